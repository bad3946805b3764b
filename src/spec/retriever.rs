//! Retrievers in the spec format: [`RetrieverSpec`], one options struct per kind
//! (re-exported by [`super::types`]). A new kind is a variant here, its options
//! struct, an arm in each accessor, and an entry of [`RetrieverSpec::kinds`].
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A named retriever. `kind` selects the options it takes: an option of another kind
/// is refused when the spec loads (E004, "has no effect there").
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum RetrieverSpec {
    /// `bm25`: BM25 over the embedded tantivy index of a local corpus.
    Bm25(Bm25Options),
    /// `dense`: exact cosine similarity between the query's embedding and every
    /// chunk's (the chunks of the same index).
    Dense(DenseOptions),
    /// `hybrid`: BM25 and dense results fused by reciprocal rank.
    Hybrid(HybridOptions),
}

/// Options of a `bm25` retriever.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bm25Options {
    /// Corpus directory, relative to the project root, or `rust-docs:book` for the
    /// Rust book installed with the toolchain. `--corpus DIR` overrides it.
    pub corpus: String,
    /// Documents returned per query.
    #[serde(default = "super::types::default_top_k")]
    #[schemars(range(min = 1, max = 1000))]
    pub top_k: u32,
    /// File names or glob patterns left out of the index (default: `print.html`). A
    /// pattern without `/` matches the file name, one with `/` the path relative to
    /// the corpus; `*` any run of characters, `?` one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
    /// File names or glob patterns to index (same rules as `exclude`): when given,
    /// only matching files are indexed, and `exclude` still applies to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Skip placeholder pages (mostly template text shared with other pages),
    /// duplicates and all-in-one pages repeating other pages, found by their content
    /// (docs/retrieval.md). Default: on for `rust-docs:` corpora, off otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hygiene: Option<bool>,
    /// At most this many chunks of one source page in the results; the freed slots go
    /// to the next best chunks of other pages. Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_per_source: Option<u32>,
    /// Re-order the results by maximal marginal relevance with this λ (0..1): 1 is
    /// the backend's order, lower values trade relevance for novelty (word overlap
    /// with the results already picked; same page counts as identical). Default: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1))]
    pub mmr: Option<f64>,
}

/// Options of a `dense` retriever.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DenseOptions {
    /// Corpus directory, relative to the project root, or `rust-docs:book` for the
    /// Rust book installed with the toolchain. `--corpus DIR` overrides it.
    pub corpus: String,
    /// Documents returned per query.
    #[serde(default = "super::types::default_top_k")]
    #[schemars(range(min = 1, max = 1000))]
    pub top_k: u32,
    /// File names or glob patterns left out of the index (default: `print.html`). A
    /// pattern without `/` matches the file name, one with `/` the path relative to
    /// the corpus; `*` any run of characters, `?` one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
    /// File names or glob patterns to index (same rules as `exclude`): when given,
    /// only matching files are indexed, and `exclude` still applies to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Skip placeholder pages (mostly template text shared with other pages),
    /// duplicates and all-in-one pages repeating other pages, found by their content
    /// (docs/retrieval.md). Default: on for `rust-docs:` corpora, off otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hygiene: Option<bool>,
    /// At most this many chunks of one source page in the results; the freed slots go
    /// to the next best chunks of other pages. Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_per_source: Option<u32>,
    /// Re-order the results by maximal marginal relevance with this λ (0..1): 1 is
    /// the backend's order, lower values trade relevance for novelty (word overlap
    /// with the results already picked; same page counts as identical). Default: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1))]
    pub mmr: Option<f64>,
    /// Required: the embedding model, a key of `models` with `provider: openai` and
    /// `model` set (e.g. `text-embedding-3-small`). Its `base_url`, `api_key_env`,
    /// `timeout_secs` and `retries` apply to the `/v1/embeddings` calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<String>,
    /// Vector size requested from the server (the `dimensions` parameter of OpenAI's
    /// text-embedding-3 models). Absent: the model's native size, and no
    /// `dimensions` parameter is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65536))]
    pub dimensions: Option<u32>,
    /// Chunks per embeddings request when the corpus is embedded (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2048))]
    pub batch_size: Option<u32>,
}

/// Options of a `hybrid` retriever: those of `dense`, and `rrf_k`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HybridOptions {
    /// Corpus directory, relative to the project root, or `rust-docs:book` for the
    /// Rust book installed with the toolchain. `--corpus DIR` overrides it.
    pub corpus: String,
    /// Documents returned per query.
    #[serde(default = "super::types::default_top_k")]
    #[schemars(range(min = 1, max = 1000))]
    pub top_k: u32,
    /// File names or glob patterns left out of the index (default: `print.html`). A
    /// pattern without `/` matches the file name, one with `/` the path relative to
    /// the corpus; `*` any run of characters, `?` one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
    /// File names or glob patterns to index (same rules as `exclude`): when given,
    /// only matching files are indexed, and `exclude` still applies to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Skip placeholder pages (mostly template text shared with other pages),
    /// duplicates and all-in-one pages repeating other pages, found by their content
    /// (docs/retrieval.md). Default: on for `rust-docs:` corpora, off otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hygiene: Option<bool>,
    /// At most this many chunks of one source page in the results; the freed slots go
    /// to the next best chunks of other pages. Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_per_source: Option<u32>,
    /// Re-order the results by maximal marginal relevance with this λ (0..1): 1 is
    /// the backend's order, lower values trade relevance for novelty (word overlap
    /// with the results already picked; same page counts as identical). Default: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1))]
    pub mmr: Option<f64>,
    /// Required: the embedding model, a key of `models` with `provider: openai` and
    /// `model` set (e.g. `text-embedding-3-small`). Its `base_url`, `api_key_env`,
    /// `timeout_secs` and `retries` apply to the `/v1/embeddings` calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<String>,
    /// Vector size requested from the server (the `dimensions` parameter of OpenAI's
    /// text-embedding-3 models). Absent: the model's native size, and no
    /// `dimensions` parameter is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65536))]
    pub dimensions: Option<u32>,
    /// Chunks per embeddings request when the corpus is embedded (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2048))]
    pub batch_size: Option<u32>,
    /// The constant `k` of reciprocal rank fusion,
    /// `score(d) = 1/(k + rank_bm25(d)) + 1/(k + rank_dense(d))` (default 60, the value
    /// of Cormack, Clarke and Büttcher, SIGIR 2009).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100000))]
    pub rrf_k: Option<u32>,
}

/// How a retriever that embeds (`dense`, `hybrid`) reaches its embedding model.
#[derive(Clone, Copy, Debug)]
pub struct EmbeddingOptions<'a> {
    /// The embedding model's name (a key of `models`), if given.
    pub model: Option<&'a str>,
    /// Vector size asked for.
    pub dimensions: Option<u32>,
    /// Chunks per request.
    pub batch_size: Option<u32>,
}

impl RetrieverSpec {
    /// Every kind as written in specs with its options type: the keys it takes and
    /// its typing errors, for the load-time checks of a retriever entry.
    pub fn kinds() -> [super::kinds::KindDef; 3] {
        use super::kinds::KindDef;
        [
            KindDef::of::<Bm25Options>("bm25"),
            KindDef::of::<DenseOptions>("dense"),
            KindDef::of::<HybridOptions>("hybrid"),
        ]
    }

    /// The kind as written in specs.
    pub fn kind(&self) -> &'static str {
        match self {
            RetrieverSpec::Bm25(_) => "bm25",
            RetrieverSpec::Dense(_) => "dense",
            RetrieverSpec::Hybrid(_) => "hybrid",
        }
    }

    /// The corpus directory (or `rust-docs:` reference) as written.
    pub fn corpus(&self) -> &str {
        match self {
            RetrieverSpec::Bm25(o) => &o.corpus,
            RetrieverSpec::Dense(o) => &o.corpus,
            RetrieverSpec::Hybrid(o) => &o.corpus,
        }
    }

    /// Documents returned per query.
    pub fn top_k(&self) -> u32 {
        match self {
            RetrieverSpec::Bm25(o) => o.top_k,
            RetrieverSpec::Dense(o) => o.top_k,
            RetrieverSpec::Hybrid(o) => o.top_k,
        }
    }

    /// The corpus files left out, when set.
    pub fn exclude(&self) -> Option<&[String]> {
        match self {
            RetrieverSpec::Bm25(o) => o.exclude.as_deref(),
            RetrieverSpec::Dense(o) => o.exclude.as_deref(),
            RetrieverSpec::Hybrid(o) => o.exclude.as_deref(),
        }
    }

    /// The corpus files kept (`include`), when set.
    pub fn include(&self) -> Option<&[String]> {
        match self {
            RetrieverSpec::Bm25(o) => o.include.as_deref(),
            RetrieverSpec::Dense(o) => o.include.as_deref(),
            RetrieverSpec::Hybrid(o) => o.include.as_deref(),
        }
    }

    /// `hygiene` as written (absent: decided by the corpus, see `Bm25Options`).
    pub fn hygiene(&self) -> Option<bool> {
        match self {
            RetrieverSpec::Bm25(o) => o.hygiene,
            RetrieverSpec::Dense(o) => o.hygiene,
            RetrieverSpec::Hybrid(o) => o.hygiene,
        }
    }

    /// `max_per_source`, when set.
    pub fn max_per_source(&self) -> Option<u32> {
        match self {
            RetrieverSpec::Bm25(o) => o.max_per_source,
            RetrieverSpec::Dense(o) => o.max_per_source,
            RetrieverSpec::Hybrid(o) => o.max_per_source,
        }
    }

    /// `mmr` (λ), when set.
    pub fn mmr(&self) -> Option<f64> {
        match self {
            RetrieverSpec::Bm25(o) => o.mmr,
            RetrieverSpec::Dense(o) => o.mmr,
            RetrieverSpec::Hybrid(o) => o.mmr,
        }
    }

    /// The embedding settings of a kind that embeds (`dense`, `hybrid`); `None` for
    /// a kind that does not.
    pub fn embedding(&self) -> Option<EmbeddingOptions<'_>> {
        match self {
            RetrieverSpec::Bm25(_) => None,
            RetrieverSpec::Dense(o) => Some(o.embedding()),
            RetrieverSpec::Hybrid(o) => Some(o.embedding()),
        }
    }
}

impl DenseOptions {
    /// The embedding settings.
    pub fn embedding(&self) -> EmbeddingOptions<'_> {
        EmbeddingOptions {
            model: self.embedding.as_deref(),
            dimensions: self.dimensions,
            batch_size: self.batch_size,
        }
    }
}

impl HybridOptions {
    /// The embedding settings.
    pub fn embedding(&self) -> EmbeddingOptions<'_> {
        EmbeddingOptions {
            model: self.embedding.as_deref(),
            dimensions: self.dimensions,
            batch_size: self.batch_size,
        }
    }
}
