//! Corpus ingestion and embedded BM25 retrieval.
//!
//! A corpus is a directory of `.md`, `.markdown`, `.txt`, `.html` and `.htm` files.
//! [`Index::open_or_build`] walks it, turns every file into plain text (HTML through
//! the `scraper` parser, keeping only the page's `<main>` content), splits the text
//! into heading sections and then into overlapping chunks, and writes a tantivy BM25
//! index next to a `manifest.json`. The index is reused as long as the corpus
//! fingerprint (relative paths, sizes and blake3 hashes of every candidate file, plus
//! the options that shape the chunks) is unchanged.
//!
//! Every chunk becomes a [`Document`] whose `id` is a UUID v5 of its source path, its
//! ordinal and the blake3 hash of its content, so ids are identical across rebuilds of
//! an unchanged corpus. [`Index::search`] returns documents ordered by BM25 score
//! (descending) and then by id (ascending), so results are deterministic.
//!
//! See `docs/retrieval.md` for the on-disk layout and measured figures.
//!
//! This file is the registry of retriever kinds: it declares every backend and
//! says, in one match per question, how a spec's retriever or tool is opened
//! ([`open_retriever`], [`open_tool`]), checked ([`check_retriever`], [`check_tool`])
//! and which key variable it reads ([`tool_key_var`]).

mod bm25;
mod cache_dir;
mod chunk;
mod corpus;
pub mod dense;
mod diversity;
mod document;
pub mod embed;
pub mod embed_calls;
mod error;
mod extracted;
mod fingerprint;
mod html;
mod hygiene;
mod index;
mod ingest;
mod loader;
mod markdown;
mod options;
mod progress;
pub mod rerank;
mod rerank_error;
mod retriever;
mod skips;
mod sysroot;
pub mod usage;
mod vectors;
pub mod web;

pub use bm25::{open_index, CorpusFilter};
pub use cache_dir::cache_root;
pub use chunk::{chunk_text, Chunk, ChunkSizes};
pub(crate) use corpus::check_dir;
pub use corpus::{default_index_dir, resolve_corpus};
pub use dense::{open_dense, DenseIndex, DenseRetriever, Fusion};
pub use diversity::{Diversified, Diversity};
pub use document::{chunk_id, source_of, Document, ID_NAMESPACE};
pub use embed::Embedder;
pub use embed_calls::{EmbedBackend, EmbedCalls, EmbedConfig, EmbedRequest, Embedded, Purpose};
pub use error::RetrievalError;
pub use extracted::{Extracted, Heading};
pub use html::{extract_html, HtmlPage};
pub use index::{FieldWeights, Index, FORMAT_VERSION};
pub use ingest::{LoadedCorpus, LoadedFile};
pub use loader::load_corpus;
pub use options::{BuildReport, IndexOptions};
pub use rerank::{OfflineReranker, RerankError, Reranked, Reranker};
pub use retriever::{Retriever, ScriptedRetriever, SearchError, SearchFuture};
pub use skips::{SkipReason, SkippedFile, Skips};
pub use usage::RetrievalUsage;

use crate::diag::{Code, Diagnostic};
use crate::spec::types::{ModelSpec, RetrieverSpec, ToolSpec, MAX_TIMEOUT_SECS, MIN_TIMEOUT_SECS};
use crate::spec::LoadedSpec;
use std::path::Path;
use std::sync::Arc;

/// What opening a spec's retrievers and tools needs.
#[derive(Clone, Copy)]
pub struct OpenContext<'a> {
    /// The project root corpus paths are relative to.
    pub root: &'a Path,
    /// `--corpus`: the corpus of every retriever instead of the spec's (relative to
    /// the working directory).
    pub corpus: Option<&'a Path>,
    /// Draw progress bars while an index is built or a corpus embedded (terminals only).
    pub progress: bool,
    /// The spec's models (embedding models are looked up there).
    pub models: &'a indexmap::IndexMap<String, ModelSpec>,
    /// The call layers of embedding calls (response cache, cassette record, replay);
    /// `None`: embedders call their server directly.
    pub embed_calls: Option<&'a dyn EmbedCalls>,
}

/// An opened retriever, and the BM25 index of its corpus (the `offline` provider
/// reads corpus statistics from the spec's first one).
pub struct Opened {
    /// The retriever.
    pub retriever: Arc<dyn Retriever>,
    /// The index of its corpus.
    pub index: Arc<Index>,
}

/// Opens retriever `name` of the spec (building its index, and embedding its corpus
/// for `dense`/`hybrid`, on first use).
///
/// # Errors
/// A message naming the retriever (and the corpus directory when it cannot open).
pub fn open_retriever(
    name: &str,
    spec: &RetrieverSpec,
    ctx: &OpenContext<'_>,
) -> Result<Opened, String> {
    let corpus = || {
        bm25::open_corpus(
            &format!("retriever `{name}`"),
            spec.corpus(),
            ctx.corpus,
            |c| CorpusFilter::of(spec, c),
            ctx,
        )
    };
    let mut opened = match spec {
        RetrieverSpec::Bm25(o) => bm25::open(name, spec, o, ctx)?,
        RetrieverSpec::Dense(o) => dense::open(
            name,
            spec.kind(),
            corpus()?,
            o.embedding(),
            Fusion::Dense,
            ctx,
        )?,
        RetrieverSpec::Hybrid(o) => {
            let fusion = Fusion::Hybrid {
                k: o.rrf_k.unwrap_or(dense::DEFAULT_RRF_K),
            };
            dense::open(name, spec.kind(), corpus()?, o.embedding(), fusion, ctx)?
        }
    };
    let diversity = Diversity {
        max_per_source: spec.max_per_source().map(|n| n as usize),
        mmr: spec.mmr(),
    };
    if !diversity.is_identity() {
        opened.retriever = Arc::new(Diversified::new(opened.retriever, diversity));
    }
    if let Some(r) = spec.rerank() {
        let reranker = open_reranker(name, &r.reranker, &opened.index, ctx)?;
        let candidates = r.fetched(spec.own_top_k()) as usize;
        opened.retriever = Arc::new(Reranked::new(opened.retriever, reranker, candidates));
    }
    Ok(opened)
}

/// The reranker of retriever `name`'s rerank stage: `offline` over its index, or an
/// HTTP reranker whose calls go through `ctx.embed_calls` (cache, record, replay;
/// replaying reads no key).
///
/// # Errors
/// A message naming the retriever: an unknown reranker, an HTTP reranker without its
/// settings or key.
fn open_reranker(
    name: &str,
    spec: &crate::spec::retriever::RerankerSpec,
    index: &Arc<Index>,
    ctx: &OpenContext<'_>,
) -> Result<Arc<dyn Reranker>, String> {
    use crate::spec::retriever::RerankerSpec;
    let at = |e: String| format!("retriever `{name}`: {e}");
    Ok(match spec {
        RerankerSpec::Name(n) if n == "offline" => {
            Arc::new(OfflineReranker::new(Arc::clone(index)))
        }
        RerankerSpec::Name(n) => return Err(at(format!("unknown reranker `{n}`"))),
        RerankerSpec::Http(h) => {
            let replaying = ctx.embed_calls.is_some_and(|c| c.replaying());
            let client = rerank::HttpReranker::new(h, replaying).map_err(at)?;
            match ctx.embed_calls {
                Some(calls) => {
                    let live: Option<Arc<dyn rerank::RerankBackend>> =
                        (!replaying).then(|| Arc::new(client.clone()) as _);
                    Arc::new(client.with_layers(calls.layer_rerank(live)))
                }
                None => Arc::new(client),
            }
        }
    })
}

/// Opens tool `name`: a `corpus` tool is a BM25 index (never replaced by
/// `--corpus`), `searxng` and `tavily` tools are [`web::WebSearch`] clients (a
/// Tavily key is read now).
///
/// # Errors
/// A message naming the tool.
pub fn open_tool(
    name: &str,
    tool: &ToolSpec,
    ctx: &OpenContext<'_>,
) -> Result<Arc<dyn Retriever>, String> {
    Ok(match tool {
        ToolSpec::Corpus { corpus, .. } => bm25::open_corpus(
            &format!("tool `{name}`"),
            corpus,
            None,
            CorpusFilter::default_for,
            ctx,
        )?,
        ToolSpec::Searxng {
            base_url,
            timeout_secs,
            retries,
            ..
        } => Arc::new(
            web::WebSearch::searxng(name, base_url, web::tool_policy(*timeout_secs, *retries))
                .map_err(|e| e.to_string())?,
        ),
        ToolSpec::Tavily {
            api_key_env,
            base_url,
            timeout_secs,
            retries,
            ..
        } => Arc::new(
            web::WebSearch::tavily(
                name,
                api_key_env,
                base_url.as_deref(),
                web::tool_policy(*timeout_secs, *retries),
            )
            .map_err(|e| e.to_string())?,
        ),
    })
}

/// The environment variable holding the key of a tool, for the tools that need one
/// (`tavily`).
pub fn tool_key_var(tool: &ToolSpec) -> Option<&str> {
    match tool {
        ToolSpec::Tavily { api_key_env, .. } => Some(api_key_env),
        ToolSpec::Corpus { .. } | ToolSpec::Searxng { .. } => None,
    }
}

/// Pushes the findings about retriever `name`'s own options (the ranges serde does
/// not enforce). References to other entries (the embedding model) are checked by
/// `validate`.
pub fn check_retriever(
    ls: &LoadedSpec,
    name: &str,
    spec: &RetrieverSpec,
    diags: &mut Vec<Diagnostic>,
) {
    let mut ranges: Vec<(&str, Option<u32>, u32, u32)> = Vec::new();
    if let Some(e) = spec.embedding() {
        ranges.push(("dimensions", e.dimensions, 1, 65_536));
        ranges.push(("batch_size", e.batch_size, 1, 2048));
    }
    ranges.push(("max_per_source", spec.max_per_source(), 1, 1000));
    if let RetrieverSpec::Hybrid(o) = spec {
        ranges.push(("rrf_k", o.rrf_k, 0, 100_000));
    }
    rerank::check_rerank(ls, name, spec, diags);
    if let Some(v) = spec.mmr().filter(|v| !(0.0..=1.0).contains(v)) {
        diags.push(
            Diagnostic::new(
                Code::WrongType,
                format!("`retrievers.{name}.mmr` is {v}; it must be between 0 and 1"),
            )
            .at(ls.span(&["retrievers", name, "mmr"])),
        );
    }
    for (key, v, min, max) in ranges {
        if let Some(v) = v.filter(|v| *v < min || *v > max) {
            diags.push(
                Diagnostic::new(
                    Code::WrongType,
                    format!("`retrievers.{name}.{key}` is {v}; it must be between {min} and {max}"),
                )
                .at(ls.span(&["retrievers", name, key])),
            );
        }
    }
}

/// Pushes the findings about tool `name`: a web-search `base_url` that is not an
/// absolute http(s) URL, `timeout_secs` or `retries` out of bounds.
pub fn check_tool(ls: &LoadedSpec, name: &str, tool: &ToolSpec, diags: &mut Vec<Diagnostic>) {
    let (base_url, timeout, retries) = match tool {
        ToolSpec::Corpus { .. } => return,
        ToolSpec::Searxng {
            base_url,
            timeout_secs,
            retries,
            ..
        } => (Some(base_url.as_str()), *timeout_secs, *retries),
        ToolSpec::Tavily {
            base_url,
            timeout_secs,
            retries,
            ..
        } => (base_url.as_deref(), *timeout_secs, *retries),
    };
    if let Some(url) = base_url {
        if let Err(e) = web::endpoint(url, "search") {
            diags.push(
                Diagnostic::new(Code::WrongType, format!("tool `{name}`: {e}"))
                    .at(ls.span(&["tools", name, "base_url"]))
                    .help("an absolute URL such as `http://127.0.0.1:8888`"),
            );
        }
    }
    if let Some(v) = timeout.filter(|v| !(MIN_TIMEOUT_SECS..=MAX_TIMEOUT_SECS).contains(v)) {
        diags.push(
            Diagnostic::new(
                Code::WrongType,
                format!(
                    "`tools.{name}.timeout_secs` is {v}; it must be between {MIN_TIMEOUT_SECS} and {MAX_TIMEOUT_SECS}"
                ),
            )
            .at(ls.span(&["tools", name, "timeout_secs"])),
        );
    }
    if let Some(v) = retries.filter(|v| *v > 10) {
        diags.push(
            Diagnostic::new(
                Code::WrongType,
                format!("`tools.{name}.retries` is {v}; it must be between 0 and 10"),
            )
            .at(ls.span(&["tools", name, "retries"])),
        );
    }
}
