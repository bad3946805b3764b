//! The seam through which HTTP rerank calls pass the call layers (response cache,
//! cassette record and replay), like embedding calls (`embed_calls.rs`): the layers
//! live in `crate::providers::reranks`, retrieval names only these types.
use super::RerankError;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// What decides a reranker's scores, as request keys and cassette lines hold it:
/// the API shape (`tei`, `cohere`, `jina`), the model as the server knows it and the
/// server's root (without a trailing `/`). Never a key or header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RerankConfig {
    /// `tei`, `cohere` or `jina`.
    pub kind: String,
    /// The model sent as `model` (`None` for TEI, which serves one).
    #[serde(default)]
    pub model: Option<String>,
    /// The server's root, e.g. `http://127.0.0.1:8080`.
    pub base_url: String,
}

impl RerankConfig {
    /// ``cohere (rerank-v3.5 at https://api.cohere.com)``, `tei (at http://…)`.
    pub fn describe(&self) -> String {
        match &self.model {
            Some(m) => format!("`{}` ({m} at {})", self.kind, self.base_url),
            None => format!("`{}` (at {})", self.kind, self.base_url),
        }
    }
}

/// One rerank call: score every text of `documents` against `query`.
#[derive(Clone, Copy, Debug)]
pub struct RerankRequest<'a> {
    /// What decides the scores.
    pub config: &'a RerankConfig,
    /// The query.
    pub query: &'a str,
    /// The candidates' texts, in retrieval order (never empty).
    pub documents: &'a [String],
}

/// What a rerank call was billed, as the server reported it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RerankUsage {
    /// Cohere's `meta.billed_units.search_units`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_units: Option<u64>,
    /// Jina's `usage.total_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

/// The answer of a rerank call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reranking {
    /// One finite score per document, in input order.
    pub scores: Vec<f64>,
    /// What the server billed (the original call's, for a cached answer).
    pub usage: RerankUsage,
    /// The scores came from the response cache or a cassette, not the server.
    pub cached: bool,
}

/// Something that answers rerank calls: the server itself ([`super::HttpReranker`]),
/// or a layer in front of another backend (cache, recorder, replay).
pub trait RerankBackend: Send + Sync {
    /// Answers `req`.
    ///
    /// # Errors
    /// A [`RerankError`] naming the reranker.
    fn rerank<'a>(
        &'a self,
        req: RerankRequest<'a>,
    ) -> BoxFuture<'a, Result<Reranking, RerankError>>;
}
