//! What a run talks to: retrievers, tools and providers, opened once before the run.
//!
//! A [`Retriever`] answers a query with documents: the BM25 [`Index`] (`kind: bm25`),
//! [`DenseRetriever`] (`kind: dense` and `hybrid`, over the same chunks), the web-search
//! clients of [`crate::websearch`] (`searxng` and `tavily` tools), and
//! [`ScriptedRetriever`], which returns fixed lists (tests, conformance). Indexes and
//! chunk vectors are opened (built on first use) once per process and shared; keys are
//! read and checked when the resources are prepared, before a run starts.
use crate::providers::cache::{cacheable, CachedProvider, KeyConfig, KeyMaker, ResponseCache};
use crate::providers::cassette::{Cassette, CassetteWriter, RecordingProvider};
use crate::providers::registry::{provider_for, wrap};
use crate::providers::replay::ReplayProvider;
use crate::providers::Provider;
use crate::retrieval::dense::DEFAULT_RRF_K;
use crate::retrieval::{
    resolve_corpus, DenseIndex, DenseRetriever, Document, Embedder, Fusion, Index, IndexOptions,
};
use crate::spec::types::Provider as Kind;
use crate::spec::types::{RetrieverKind, ToolSpec};
use crate::websearch::{tool_policy, WebSearch};
use futures::future::BoxFuture;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// What [`Retriever::search`] returns: the documents, or a message saying what failed.
pub type SearchFuture<'a> = BoxFuture<'a, Result<Vec<Document>, String>>;

/// Answers a query with documents.
///
/// Searches are asynchronous so that network retrievers and tools (dense retrieval
/// embedding the query, web search) never block the runtime's threads. Local
/// searches (BM25, about 0.2 ms on the Rust book) run inline when the future is
/// created and return a ready future: no thread hop.
pub trait Retriever: Send + Sync {
    /// At most `top_k` documents for `query`, best first.
    ///
    /// # Errors
    /// The future resolves to a message when the search fails.
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a>;
}

impl Retriever for Index {
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a> {
        let r = Index::search(self, query, top_k).map_err(|e| e.to_string());
        Box::pin(std::future::ready(r))
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
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a> {
        Box::pin(std::future::ready(self.next(query, top_k)))
    }
}

impl ScriptedRetriever {
    fn next(&self, query: &str, top_k: usize) -> Result<Vec<Document>, String> {
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
    /// By tool name: `corpus` tools are BM25 indexes, `searxng` and `tavily` tools are
    /// [`WebSearch`] clients.
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

type DenseKey = (PathBuf, String);

fn dense_cache() -> &'static Mutex<HashMap<DenseKey, Arc<DenseIndex>>> {
    static CACHE: OnceLock<Mutex<HashMap<DenseKey, Arc<DenseIndex>>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Loads (embedding what is missing, on first use) the chunk vectors of `index` made
/// by `embedder`, once per process. Runs the embedding calls on a thread of its own
/// with its own async runtime, so it may be called from synchronous code and from
/// inside a runtime alike. With `progress`, draws a bar on a terminal and prints the
/// store's notes (a store that could not be used, a changed vector size) on stderr.
///
/// # Errors
/// The embedder's or the store's message.
pub fn open_dense(
    index: &Arc<Index>,
    embedder: &Embedder,
    progress: bool,
) -> Result<Arc<DenseIndex>, String> {
    let key = (index.dir().to_path_buf(), embedder.identity());
    if let Some(d) = dense_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(d);
    }
    let (ix, em) = (Arc::clone(index), embedder.clone());
    let build = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        let bar = embed_bar(progress, ix.num_chunks());
        let out = rt.block_on(DenseIndex::open_or_build(&ix, &em, |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }));
        bar.finish_and_clear();
        out
    });
    let (dense, report) = build
        .join()
        .map_err(|_| "embedding the corpus failed unexpectedly".to_string())??;
    if progress {
        for n in &report.notes {
            crate::errln!("note: {n}");
        }
    }
    let dense = Arc::new(dense);
    if let Ok(mut c) = dense_cache().lock() {
        c.insert(key, Arc::clone(&dense));
    }
    Ok(dense)
}

fn embed_bar(enabled: bool, len: usize) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let target = if enabled && std::io::stderr().is_terminal() {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    };
    let pb = indicatif::ProgressBar::with_draw_target(Some(len as u64), target);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} embedding [{bar:30}] {pos}/{len} chunks")
    {
        pb.set_style(style);
    }
    pb
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
        let spec = &program.spec;
        let root = &program.root;
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
            let retriever: Arc<dyn Retriever> = match r.kind {
                RetrieverKind::Bm25 => index,
                RetrieverKind::Dense | RetrieverKind::Hybrid => {
                    let at = |e: String| format!("retriever `{name}`: {e}");
                    let model = r.embedding.as_deref().ok_or_else(|| {
                        at(format!(
                            "kind `{}` needs `embedding: <model name>`",
                            r.kind.as_str()
                        ))
                    })?;
                    let spec_model = spec
                        .models
                        .get(model)
                        .ok_or_else(|| at(format!("embedding model `{model}` is not declared")))?;
                    let embedder =
                        Embedder::from_model(model, spec_model, r.dimensions, r.batch_size)
                            .map_err(at)?;
                    let dense = open_dense(&index, &embedder, opts.progress).map_err(at)?;
                    let fusion = match r.kind {
                        RetrieverKind::Hybrid => Fusion::Hybrid {
                            k: r.rrf_k.unwrap_or(DEFAULT_RRF_K),
                        },
                        _ => Fusion::Dense,
                    };
                    Arc::new(DenseRetriever {
                        index,
                        dense,
                        embedder,
                        fusion,
                    })
                }
            };
            res.retrievers.insert(name.clone(), retriever);
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
            .filter(|r| r.kind.embeds())
            .filter_map(|r| r.embedding.as_deref())
            .filter(|m| !chat_models.contains(m))
            .collect();
        for (name, t) in &spec.tools {
            if let Some(o) = opts.retrievers.get(name) {
                res.tools.insert(name.clone(), Arc::clone(o));
                continue;
            }
            let tool: Arc<dyn Retriever> = match t {
                ToolSpec::Corpus { corpus, .. } => {
                    let dir = resolve_corpus(corpus, root)
                        .map_err(|e| format!("tool `{name}`: corpus `{corpus}`: {e}"))?;
                    open_index(&dir, None, opts.progress)
                        .map_err(|e| format!("tool `{name}`: corpus {}: {e}", dir.display()))?
                }
                ToolSpec::Searxng {
                    base_url,
                    timeout_secs,
                    retries,
                    ..
                } => Arc::new(WebSearch::searxng(
                    name,
                    base_url,
                    tool_policy(*timeout_secs, *retries),
                )?),
                ToolSpec::Tavily {
                    api_key_env,
                    base_url,
                    timeout_secs,
                    retries,
                    ..
                } => Arc::new(WebSearch::tavily(
                    name,
                    api_key_env,
                    base_url.as_deref(),
                    tool_policy(*timeout_secs, *retries),
                )?),
            };
            res.tools.insert(name.clone(), tool);
        }
        for (name, m) in &spec.models {
            if embed_only.contains(name.as_str()) && !opts.providers.contains_key(name) {
                continue;
            }
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
