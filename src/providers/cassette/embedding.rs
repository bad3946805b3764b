//! The embedding lines of a cassette (`"kind": "embeddings"`): one per embedding
//! call of a `dense` or `hybrid` retriever (a query, or a batch of corpus chunks),
//! plus, when recording, the chunk vectors a dense index took from its store on disk
//! (`"stored": true`), so the cassette replays where that store does not exist.
use crate::retrieval::{EmbedConfig, Purpose};
use serde::{Deserialize, Serialize};

/// The `kind` of an embedding line.
pub const EMBEDDINGS: &str = "embeddings";

/// An embedding line as written (borrowed).
#[derive(Serialize)]
pub(crate) struct EmbedLineOut<'a> {
    pub v: u32,
    pub kind: &'static str,
    pub seq: u64,
    pub key: String,
    pub model_name: &'a str,
    pub config: &'a EmbedConfig,
    pub purpose: Purpose,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stored: bool,
    pub inputs: &'a [String],
    pub vectors: Option<&'a [Vec<f32>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    pub cached: bool,
    pub error: Option<&'a str>,
}

/// An embedding line as read back.
#[derive(Clone, Debug, Deserialize)]
pub struct EmbedLine {
    /// Line format version.
    pub v: u32,
    /// Always `embeddings`.
    pub kind: String,
    /// Call order (shared with the LLM lines).
    #[serde(default)]
    pub seq: u64,
    /// The key of the call ([`crate::providers::cache::embedding_key`] of all its
    /// inputs), 64 hex digits.
    pub key: String,
    /// The embedding model's name in the spec.
    pub model_name: String,
    /// Model, base URL, dimensions.
    pub config: EmbedConfig,
    /// `query` or `corpus`.
    pub purpose: Purpose,
    /// The vectors came from the index's vector store, not from a call.
    #[serde(default)]
    pub stored: bool,
    /// The texts embedded.
    pub inputs: Vec<String>,
    /// One vector per input (absent when the call failed).
    #[serde(default)]
    pub vectors: Option<Vec<Vec<f32>>>,
    /// `usage.prompt_tokens` as the server reported it.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// The vectors came from the response cache.
    #[serde(default)]
    pub cached: bool,
    /// The failure message, when the call failed.
    #[serde(default)]
    pub error: Option<String>,
}

/// Whether a line, as our writer writes it, is an embedding line (its first fields
/// are `"v"` and `"kind"`): such lines are parsed as embeddings first, the others as
/// LLM exchanges first (each falls back to the other).
pub(super) fn looks_like_embedding(raw: &[u8]) -> bool {
    const MARK: &[u8] = br#""kind":"embeddings""#;
    let head = &raw[..raw.len().min(48)];
    head.windows(MARK.len()).any(|w| w == MARK)
}
