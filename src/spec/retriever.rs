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
    /// A rerank stage after the search: `candidates` documents are retrieved, the
    /// reranker orders them, and the best `top_k` are returned (docs/retrieval.md).
    /// Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<RerankSpec>,
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
    /// A rerank stage after the search: `candidates` documents are retrieved, the
    /// reranker orders them, and the best `top_k` are returned (docs/retrieval.md).
    /// Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<RerankSpec>,
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
    /// A rerank stage after the search: `candidates` documents are retrieved, the
    /// reranker orders them, and the best `top_k` are returned (docs/retrieval.md).
    /// Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<RerankSpec>,
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

    /// Documents returned per query: the rerank stage's `top_k` when it sets one,
    /// else the retriever's.
    pub fn top_k(&self) -> u32 {
        let own = self.own_top_k();
        self.rerank().map_or(own, |r| r.kept(own))
    }

    /// The retriever's own `top_k` as written (or its default).
    pub fn own_top_k(&self) -> u32 {
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

    /// The rerank stage, when set.
    pub fn rerank(&self) -> Option<&RerankSpec> {
        match self {
            RetrieverSpec::Bm25(o) => o.rerank.as_ref(),
            RetrieverSpec::Dense(o) => o.rerank.as_ref(),
            RetrieverSpec::Hybrid(o) => o.rerank.as_ref(),
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

/// Candidates a rerank stage retrieves when `candidates` is not given (seed 004's
/// pipeline: retrieve 12, rerank, generate from the best few); never fewer than the
/// stage's `top_k`.
pub const DEFAULT_RERANK_CANDIDATES: u32 = 12;

/// The largest `candidates` a rerank stage takes (a reranker reads every candidate).
pub const MAX_RERANK_CANDIDATES: u32 = 1000;

/// `rerank:` on a retriever: retrieve `candidates`, let `reranker` order them, keep
/// the best `top_k`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RerankSpec {
    /// Documents retrieved and handed to the reranker (default 12, and at least
    /// `top_k`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub candidates: Option<u32>,
    /// Documents kept after reranking (default: the retriever's `top_k`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub top_k: Option<u32>,
    /// `offline` (a classical reranker over the index: BM25 of the query over each
    /// candidate's whole page, term proximity and heading matches), or an HTTP
    /// reranker given inline: `{kind: tei|cohere|jina, base_url, model, ...}`.
    pub reranker: RerankerSpec,
}

/// Which reranker a rerank stage uses.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum RerankerSpec {
    /// A built-in reranker by name: `offline`.
    Name(String),
    /// An HTTP reranker.
    Http(HttpRerankerSpec),
}

/// The built-in rerankers, by the name a spec gives them.
pub const RERANKER_NAMES: &[&str] = &["offline"];

/// The API shapes of HTTP rerankers (`kind` of an inline reranker).
pub const RERANKER_KINDS: &[&str] = &["tei", "cohere", "jina"];

/// An HTTP reranker: Hugging Face text-embeddings-inference (`kind: tei`, `POST
/// {base_url}/rerank`), Cohere v2 (`kind: cohere`, `POST {base_url}/v2/rerank`) or
/// Jina (`kind: jina`, `POST {base_url}/v1/rerank`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HttpRerankerSpec {
    /// `tei`, `cohere` or `jina`: the request and response shape.
    pub kind: String,
    /// The server's root, e.g. `http://127.0.0.1:8080` (required for `tei`; `cohere`
    /// defaults to `https://api.cohere.com`, `jina` to `https://api.jina.ai`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model as the server knows it (required for `cohere` and `jina`; `tei`
    /// serves one model and sends none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The environment variable holding the API key, sent as `Authorization: Bearer`
    /// (required for the official Cohere and Jina hosts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Seconds per attempt (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
    /// Retries of timeouts, 408, 429 and 5xx (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 10))]
    pub retries: Option<u32>,
}

impl<'de> Deserialize<'de> for RerankerSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RerankerSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a reranker name (`offline`) or a mapping with `kind: tei`, `cohere` or `jina`",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RerankerSpec, E> {
                Ok(RerankerSpec::Name(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RerankerSpec, A::Error> {
                HttpRerankerSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RerankerSpec::Http)
            }
        }
        d.deserialize_any(V)
    }
}

impl RerankSpec {
    /// The documents kept after reranking, for a retriever whose own `top_k` is
    /// `retriever_top_k`.
    pub fn kept(&self, retriever_top_k: u32) -> u32 {
        self.top_k.unwrap_or(retriever_top_k)
    }

    /// The candidates retrieved for the reranker: `candidates`, else
    /// [`DEFAULT_RERANK_CANDIDATES`] and at least the documents kept.
    pub fn fetched(&self, retriever_top_k: u32) -> u32 {
        self.candidates
            .unwrap_or_else(|| DEFAULT_RERANK_CANDIDATES.max(self.kept(retriever_top_k)))
    }
}
