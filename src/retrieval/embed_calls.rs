//! The seam through which embedding calls pass the same call layers as LLM calls.
//!
//! An [`super::Embedder`] either calls its `/v1/embeddings` server directly or, when
//! it was opened with [`EmbedCalls`] (what `Resources::prepare` passes in
//! [`super::OpenContext::embed_calls`]), hands every call to a stack of
//! [`EmbedBackend`]s: the response cache, the cassette recorder, or a cassette that
//! answers instead of the server (`--replay`). The layers live in
//! `crate::providers::embeddings` (next to the cache and the cassette), so retrieval
//! names no provider type: the traits here are all it knows.
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What decides an embedding model's vectors, as the request key and a cassette
/// line hold it: the model as the server knows it, the API root (without a trailing
/// `/`) and the requested size (`None`: the model's own). Never a key or header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedConfig {
    /// The model name sent as `model`.
    pub model: String,
    /// The API root, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// `dimensions` sent with each request, if any.
    #[serde(default)]
    pub dimensions: Option<u32>,
}

impl EmbedConfig {
    /// `bag-of-words at http://127.0.0.1:8080/v1, 64 dimensions` (or `native size`).
    pub fn describe(&self) -> String {
        format!(
            "{} at {}, {}",
            self.model,
            self.base_url,
            self.dimensions
                .map_or("native size".to_string(), |d| format!("{d} dimensions"))
        )
    }
}

/// Why a call is made: a query at search time, or a batch of corpus chunks while the
/// dense index is built. Only query embeddings go to the response cache (the chunk
/// vectors have their own store beside the index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    /// One query text.
    Query,
    /// A batch of corpus chunks.
    Corpus,
}

impl Purpose {
    /// `query` or `corpus`.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Query => "query",
            Purpose::Corpus => "corpus",
        }
    }
}

/// One embedding call: every text of `texts` is embedded under `config`.
#[derive(Clone, Copy, Debug)]
pub struct EmbedRequest<'a> {
    /// The model's name in the spec (a key of `models`).
    pub model_name: &'a str,
    /// What decides the vectors.
    pub config: &'a EmbedConfig,
    /// The texts, in order (never empty).
    pub texts: &'a [String],
    /// Query or corpus batch.
    pub purpose: Purpose,
}

/// The answer of an embedding call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Embedded {
    /// One vector per text, in input order, all of one size.
    pub vectors: Vec<Vec<f32>>,
    /// `usage.prompt_tokens` of the server's answer, when it reported one.
    pub input_tokens: Option<u64>,
    /// The vectors came from the response cache or a cassette, not the server.
    pub cached: bool,
}

/// Something that answers embedding calls: the server itself, or a layer in front of
/// another backend (cache, recorder, replay).
pub trait EmbedBackend: Send + Sync {
    /// Answers `req`.
    ///
    /// # Errors
    /// A message naming the model (and, for a replay miss, the text not recorded).
    fn embed<'a>(&'a self, req: EmbedRequest<'a>) -> BoxFuture<'a, Result<Embedded, String>>;

    /// Whether [`EmbedBackend::stored`] wants the vectors a dense index took from its
    /// store on disk (the cassette recorder does: a cassette recorded against a warm
    /// store must replay where the store is cold). `false` by default.
    fn wants_stored(&self) -> bool {
        false
    }

    /// Vectors of `req.texts` that were not requested because the vector store beside
    /// the index held them (unit length, as stored). Does nothing by default.
    ///
    /// # Errors
    /// The recorder's write error.
    fn stored(&self, req: EmbedRequest<'_>, vectors: &[Vec<f32>]) -> Result<(), String> {
        let _ = (req, vectors);
        Ok(())
    }
}

/// How the embedders of a run are layered (implemented by
/// `crate::providers::embeddings::EmbedLayers`).
pub trait EmbedCalls: Send + Sync {
    /// The calls are answered from a cassette: the embedder is built without reading
    /// its key, and nothing is sent to the server.
    fn replaying(&self) -> bool;

    /// The backend stack in front of `live`, the server (`None` when
    /// [`EmbedCalls::replaying`]). Each call names its model and configuration
    /// ([`EmbedRequest`]), so one stack may serve several models.
    fn layer(&self, live: Option<Arc<dyn EmbedBackend>>) -> Arc<dyn EmbedBackend>;

    /// The same layers in front of an HTTP reranker (`live`; `None` when
    /// [`EmbedCalls::replaying`]): rerank calls share the cache, the cassette and
    /// replay with embedding calls. The default passes calls straight to `live`
    /// (and fails them when there is none).
    fn layer_rerank(
        &self,
        live: Option<Arc<dyn super::rerank::RerankBackend>>,
    ) -> Arc<dyn super::rerank::RerankBackend> {
        match live {
            Some(l) => l,
            None => Arc::new(super::rerank::NoServer),
        }
    }
}
