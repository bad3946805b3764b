//! What a run talks to: retrievers, tools and providers, opened once before the run.
//!
//! A [`Retriever`] answers a query with documents; the BM25 [`Index`] is the default
//! implementation, [`ScriptedRetriever`] returns fixed lists (tests, conformance).
//! Indexes are opened (built on first use) once per process and shared.
use crate::providers::cache::{cacheable, CachedProvider, KeyConfig, KeyMaker, ResponseCache};
use crate::providers::cassette::{Cassette, CassetteWriter, RecordingProvider};
use crate::providers::registry::{provider_for, wrap};
use crate::providers::replay::ReplayProvider;
use crate::providers::Provider;
use crate::retrieval::{resolve_corpus, Document, Index, IndexOptions};
use crate::spec::types::Provider as Kind;
use crate::spec::types::ToolSpec;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Answers a query with documents.
pub trait Retriever: Send + Sync {
    /// At most `top_k` documents for `query`.
    ///
    /// # Errors
    /// A message when the search fails.
    fn search(&self, query: &str, top_k: usize) -> Result<Vec<Document>, String>;
}

impl Retriever for Index {
    fn search(&self, query: &str, top_k: usize) -> Result<Vec<Document>, String> {
        Index::search(self, query, top_k).map_err(|e| e.to_string())
    }
}

/// Returns fixed document lists, one per call, in order, and records the queries.
#[derive(Debug, Default)]
pub struct ScriptedRetriever {
    results: Mutex<VecDeque<Vec<Document>>>,
    queries: Mutex<Vec<String>>,
}

impl ScriptedRetriever {
    /// A retriever answering call `i` with `results[i]` (truncated to `top_k`).
    pub fn new(results: Vec<Vec<Document>>) -> ScriptedRetriever {
        ScriptedRetriever {
            results: Mutex::new(results.into()),
            queries: Mutex::default(),
        }
    }

    /// The queries received so far.
    pub fn queries(&self) -> Vec<String> {
        self.queries.lock().map(|q| q.clone()).unwrap_or_default()
    }
}

impl Retriever for ScriptedRetriever {
    fn search(&self, query: &str, top_k: usize) -> Result<Vec<Document>, String> {
        if let Ok(mut q) = self.queries.lock() {
            q.push(query.to_string());
        }
        let mut results = self
            .results
            .lock()
            .map_err(|_| "scripted retriever state is poisoned".to_string())?;
        let mut docs = results
            .pop_front()
            .ok_or("scripted retriever: no result list left")?;
        docs.truncate(top_k);
        Ok(docs)
    }
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
    /// Record every LLM exchange of the run into this cassette.
    pub record: Option<Arc<CassetteWriter>>,
    /// Answer every model from this cassette (keys computed from the spec's models).
    pub replay: Option<Arc<Cassette>>,
}

/// Retrievers, tools and providers of a run.
#[derive(Default)]
pub struct Resources {
    /// By retriever name.
    pub retrievers: HashMap<String, Arc<dyn Retriever>>,
    /// By tool name (only `corpus` tools; other kinds are missing and fail when used).
    pub tools: HashMap<String, Arc<dyn Retriever>>,
    /// By model name.
    pub providers: HashMap<String, Arc<dyn Provider>>,
}

type IndexKey = (PathBuf, Vec<String>);

fn index_cache() -> &'static Mutex<HashMap<IndexKey, Arc<Index>>> {
    static CACHE: OnceLock<Mutex<HashMap<IndexKey, Arc<Index>>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Opens (building on first use) the index of a corpus directory, once per process.
///
/// # Errors
/// The retrieval error, as text.
pub fn open_index(
    corpus: &Path,
    exclude: Option<&[String]>,
    progress: bool,
) -> Result<Arc<Index>, String> {
    let mut opts = IndexOptions {
        progress,
        ..IndexOptions::default()
    };
    if let Some(ex) = exclude {
        opts.exclude = ex.to_vec();
    }
    let key = (
        corpus
            .canonicalize()
            .unwrap_or_else(|_| corpus.to_path_buf()),
        opts.exclude.clone(),
    );
    if let Some(ix) = index_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(ix);
    }
    let (index, _report) = Index::open_or_build(corpus, None, &opts).map_err(|e| e.to_string())?;
    let index = Arc::new(index);
    if let Ok(mut c) = index_cache().lock() {
        c.insert(key, Arc::clone(&index));
    }
    Ok(index)
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
    /// A message naming the retriever (with the corpus path), tool or model at fault;
    /// missing API keys are checked first, before any corpus is opened (see
    /// [`crate::providers::registry::missing_keys`]).
    pub fn prepare(program: &super::Program, opts: ResourceOptions) -> Result<Resources, String> {
        let spec = &program.loaded.spec;
        let root = &program.loaded.root;
        let mut res = Resources::default();
        let mut first_index: Option<Arc<Index>> = None;
        let missing =
            crate::providers::registry::missing_keys(spec.models.iter().filter(|(name, m)| {
                // Replayed models need no key.
                !opts.providers.contains_key(*name)
                    && opts.replay.is_none()
                    && m.provider != Kind::Replay
            }));
        if !missing.is_empty() {
            return Err(missing.join("; "));
        }
        for (name, r) in &spec.retrievers {
            if let Some(o) = opts.retrievers.get(name) {
                res.retrievers.insert(name.clone(), Arc::clone(o));
                continue;
            }
            let dir = match &opts.corpus {
                Some(d) => {
                    crate::retrieval::resolve_corpus(&d.to_string_lossy(), Path::new("."))
                        .map_err(|e| format!("retriever `{name}`: --corpus {}: {e}", d.display()))?
                }
                None => resolve_corpus(&r.corpus, root)
                    .map_err(|e| format!("retriever `{name}`: corpus `{}`: {e}", r.corpus))?,
            };
            let index = open_index(&dir, r.exclude.as_deref(), opts.progress)
                .map_err(|e| format!("retriever `{name}`: corpus {}: {e}", dir.display()))?;
            first_index.get_or_insert_with(|| Arc::clone(&index));
            res.retrievers.insert(name.clone(), index);
        }
        for (name, t) in &spec.tools {
            if let Some(o) = opts.retrievers.get(name) {
                res.tools.insert(name.clone(), Arc::clone(o));
                continue;
            }
            if let ToolSpec::Corpus { corpus, .. } = t {
                let dir = resolve_corpus(corpus, root)
                    .map_err(|e| format!("tool `{name}`: corpus `{corpus}`: {e}"))?;
                let index = open_index(&dir, None, opts.progress)
                    .map_err(|e| format!("tool `{name}`: corpus {}: {e}", dir.display()))?;
                res.tools.insert(name.clone(), index);
            }
        }
        for (name, m) in &spec.models {
            let mut keys = KeyMaker::new(KeyConfig::from_model(m));
            let mut local = true;
            let mut p = match (opts.providers.get(name), &opts.replay) {
                (Some(p), _) => {
                    local = false;
                    Arc::clone(p)
                }
                (None, _) if m.provider == Kind::Replay => {
                    let r = ReplayProvider::from_spec(name, m, root)?;
                    // Recorded again under the configuration it replays.
                    keys = r.keys().clone();
                    Arc::new(r)
                }
                (None, Some(c)) => Arc::new(ReplayProvider::new(Arc::clone(c), name, keys.clone())),
                (None, None) => {
                    local = false;
                    provider_for(name, m, root, first_index.clone())?
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
