//! What a run talks to: retrievers, tools and providers, opened once before the run.
//! This is the assembly only: retrievers and tools are opened through the registry of
//! retriever kinds ([`crate::retrieval::open_retriever`], [`crate::retrieval::open_tool`]),
//! providers through [`crate::providers::registry`], and the call layers (retries,
//! limits, cache, cassette) are stacked here. [`Retriever`], [`ScriptedRetriever`],
//! [`SearchFuture`], [`open_index`] and [`open_dense`] are re-exported from
//! [`crate::retrieval`]. Indexes and chunk vectors are opened (built on first use)
//! once per process and shared; keys are read and checked when the resources are
//! prepared, before a run starts.
use crate::providers::cache::{cacheable, CachedProvider, KeyConfig, KeyMaker, ResponseCache};
use crate::providers::cassette::{Cassette, CassetteWriter, RecordingProvider};
use crate::providers::embeddings::EmbedLayers;
use crate::providers::registry::{provider_for, wrap};
use crate::providers::replay::ReplayProvider;
use crate::providers::Provider;
pub use crate::retrieval::{
    open_dense, open_index, Retriever, ScriptedRetriever, SearchError, SearchFuture,
};
use crate::retrieval::{open_retriever, open_tool, Index, OpenContext};
use crate::spec::types::Provider as Kind;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Why [`Resources::prepare`] failed. `Display` is the message `run` prints.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// API keys are missing: one message per model or tool (see
    /// [`crate::providers::keys::missing`]), shown joined by `; `.
    #[error("{}", .0.join("; "))]
    MissingKeys(Vec<String>),
    /// A retriever did not open (the message names it and its corpus path).
    #[error("{0}")]
    Retriever(String),
    /// A tool did not open (the message names it).
    #[error("{0}")]
    Tool(String),
    /// A model's provider could not be built (the message names the model).
    #[error("{0}")]
    Provider(#[source] Box<crate::providers::ConfigError>),
}

/// How to open the resources of a run.
///
/// Providers are assembled per model, innermost first (see [`Resources::prepare`]):
/// 1. the answering provider: `providers[name]` if given; else, for a model written
///    `provider: replay`, its own cassette; else a [`ReplayProvider`] on `replay` if
///    given (nothing is built, no key is read); else the spec's provider;
/// 2. unless it replays: the model's retries, per-attempt timeout and concurrency /
///    rate limits ([`crate::providers::registry::wrap`]);
/// 3. the response cache, when `cache` is set, the model is [`cacheable`] (temperature
///    0, a network provider) and the answers do not come from a cassette; outside the
///    limits, so a hit waits for no rate limiter;
/// 4. the cassette recorder, outermost, when `record` is set: one line per call as the
///    runtime sees it (after the retries of layer 2), cache hits included, so the
///    cassette replays the whole run.
///
/// The embedding calls of `dense`/`hybrid` retrievers get the same three layers
/// ([`crate::providers::embeddings::EmbedLayers`]): replayed from `replay` (the
/// embedder reads no key), else the server behind the cache (query embeddings only),
/// and recorded into `record`.
#[derive(Default)]
pub struct ResourceOptions {
    /// Corpus directory used by every retriever instead of the spec's.
    pub corpus: Option<PathBuf>,
    /// Retrievers (and tools) to use instead of opening the spec's, by name.
    pub retrievers: HashMap<String, Arc<dyn Retriever>>,
    /// Providers to use instead of building the spec's, by model name.
    pub providers: HashMap<String, Arc<dyn Provider>>,
    /// Draw a progress bar while an index is built (only on a terminal).
    pub progress: bool,
    /// The response cache for temperature-0 network models; `None` (the library
    /// default) caches nothing. The CLI opens [`ResponseCache::open_default`] unless
    /// `--no-cache` is given.
    pub cache: Option<Arc<ResponseCache>>,
    /// Record every LLM exchange and embedding call of the run into this cassette.
    pub record: Option<Arc<CassetteWriter>>,
    /// Answer every model, chat and embedding, from this cassette (keys computed from
    /// the spec's models).
    pub replay: Option<Arc<Cassette>>,
    /// The eval repeat these resources run ([`KeyConfig::repeat`]: part of every
    /// request key of the cache, the recorder and the replay); `None` for a run
    /// outside `--repeats` and for the first repeat.
    pub repeat: Option<u32>,
}

/// Retrievers, tools and providers of a run.
#[derive(Default)]
pub struct Resources {
    /// By retriever name.
    pub retrievers: HashMap<String, Arc<dyn Retriever>>,
    /// By tool name: `corpus` tools are BM25 indexes, `searxng` and `tavily` tools are
    /// [`WebSearch`] clients.
    pub tools: HashMap<String, Arc<dyn Retriever>>,
    /// By model name.
    pub providers: HashMap<String, Arc<dyn Provider>>,
}

impl Resources {
    /// Opens everything the spec names (after overrides), before any call, and
    /// assembles each model's provider with the retry, limit, cache, replay and
    /// recording layers (see [`ResourceOptions`]). Every provider that calls a model
    /// (those in `opts.providers` included) is wrapped with its model's retries,
    /// per-attempt timeout and limits ([`crate::providers::registry::wrap`]); replayed
    /// ones are not (a cassette answers at once, and a recorded failure is final).
    ///
    /// # Errors
    /// A [`ResourceError`] naming the retriever (with the corpus path), tool or model
    /// at fault; missing API keys are checked first, before any corpus is opened (see
    /// [`crate::providers::keys::missing`]).
    pub fn prepare(
        program: &super::Program,
        opts: ResourceOptions,
    ) -> Result<Resources, ResourceError> {
        let spec = &program.spec;
        let root = &program.root;
        let mut res = Resources::default();
        let mut first_index: Option<Arc<Index>> = None;
        // Replayed models (chat and embedding) need no key; tools and live embedders
        // read theirs when opened.
        let given: Vec<&str> = opts.providers.keys().map(String::as_str).collect();
        let missing = crate::providers::keys::missing(
            spec,
            &crate::providers::keys::KeyScope {
                replaying: opts.replay.is_some(),
                given: &given,
                live_calls: false,
            },
        );
        if !missing.is_empty() {
            return Err(ResourceError::MissingKeys(missing));
        }
        // Embedding calls (query and corpus batches) go through the same cache,
        // replay and recording as the LLM calls below.
        let embed_layers = EmbedLayers {
            cache: opts.cache.clone(),
            record: opts.record.clone(),
            replay: opts.replay.clone(),
        };
        let ctx = OpenContext {
            root,
            corpus: opts.corpus.as_deref(),
            progress: opts.progress,
            models: &spec.models,
            embed_calls: if embed_layers.is_empty() {
                None
            } else {
                Some(&embed_layers)
            },
        };
        for (name, r) in &spec.retrievers {
            if let Some(o) = opts.retrievers.get(name) {
                res.retrievers.insert(name.clone(), Arc::clone(o));
                continue;
            }
            let opened = open_retriever(name, r, &ctx).map_err(ResourceError::Retriever)?;
            first_index.get_or_insert(opened.index);
            res.retrievers.insert(name.clone(), opened.retriever);
        }
        // Models used only to embed get no chat provider.
        let chat_models: std::collections::HashSet<&str> = spec
            .nodes
            .values()
            .filter_map(|n| n.llm().map(|l| l.model.as_str()))
            .collect();
        let embed_only: std::collections::HashSet<&str> = spec
            .retrievers
            .values()
            .filter_map(|r| r.embedding().and_then(|e| e.model))
            .filter(|m| !chat_models.contains(m))
            .collect();
        for (name, t) in &spec.tools {
            if let Some(o) = opts.retrievers.get(name) {
                res.tools.insert(name.clone(), Arc::clone(o));
                continue;
            }
            let tool = open_tool(name, t, &ctx).map_err(ResourceError::Tool)?;
            res.tools.insert(name.clone(), tool);
        }
        for (name, m) in &spec.models {
            if embed_only.contains(name.as_str()) && !opts.providers.contains_key(name) {
                continue;
            }
            let mut config = KeyConfig::from_model(m);
            config.repeat = opts.repeat;
            let mut keys = KeyMaker::new(config);
            let mut local = true;
            let mut p = match (opts.providers.get(name), &opts.replay) {
                (Some(p), _) => {
                    local = false;
                    Arc::clone(p)
                }
                (None, _) if m.provider == Kind::Replay => {
                    let r = ReplayProvider::from_spec(name, m, root)
                        .map_err(|e| ResourceError::Provider(Box::new(e)))?;
                    // Recorded again under the configuration it replays.
                    keys = r.keys().clone();
                    Arc::new(r)
                }
                (None, Some(c)) => Arc::new(ReplayProvider::new(Arc::clone(c), name, keys.clone())),
                (None, None) => {
                    local = false;
                    provider_for(name, m, root, first_index.clone())
                        .map_err(|e| ResourceError::Provider(Box::new(e)))?
                }
            };
            if !local {
                // Retries, per-attempt timeouts and the model's limits.
                p = wrap(name, m, p);
            }
            if let Some(cache) = &opts.cache {
                // Outside the limits: a hit waits for no rate limiter.
                if !local && cacheable(m) {
                    p = Arc::new(CachedProvider::new(p, Arc::clone(cache), keys.clone()));
                }
            }
            if let Some(w) = &opts.record {
                // Outermost: one line per call as the runtime sees it (after retries),
                // cache hits included.
                p = Arc::new(RecordingProvider::new(p, Arc::clone(w), name, keys));
            }
            res.providers.insert(name.clone(), p);
        }
        Ok(res)
    }
}
