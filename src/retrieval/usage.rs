//! What a search's calls were billed: embedding calls (query embeddings of `dense`
//! and `hybrid`) and rerank calls, counted into the step that ran the search.
//!
//! The runtime runs each `retrieve` step's search inside [`counted`]; the embedder
//! and the HTTP rerankers [`add_embedding`] / [`add_rerank`] to the current count
//! (nothing happens outside a `counted` scope, e.g. while a dense index is built at
//! open time: those corpus batches are reported by the build instead).
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::{Arc, Mutex};

/// The calls of retrievers: one step's, or (summed) a run's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrievalUsage {
    /// Embedding calls (query embeddings), cached and replayed ones included.
    pub embedding_calls: u64,
    /// Of `embedding_calls`, answered by the response cache or a cassette.
    pub embedding_cached: u64,
    /// `usage.prompt_tokens` the embedding servers reported (cached calls at their
    /// recorded count).
    pub embedding_tokens: u64,
    /// HTTP rerank calls, cached and replayed ones included.
    pub rerank_calls: u64,
    /// Of `rerank_calls`, answered by the response cache or a cassette.
    pub rerank_cached: u64,
    /// Cohere's billed `search_units`.
    pub rerank_search_units: u64,
    /// Jina's `usage.total_tokens`.
    pub rerank_tokens: u64,
}

impl RetrievalUsage {
    /// Whether no call was counted.
    pub fn is_empty(&self) -> bool {
        *self == RetrievalUsage::default()
    }
}

impl std::ops::AddAssign<&RetrievalUsage> for RetrievalUsage {
    fn add_assign(&mut self, o: &RetrievalUsage) {
        self.embedding_calls += o.embedding_calls;
        self.embedding_cached += o.embedding_cached;
        self.embedding_tokens += o.embedding_tokens;
        self.rerank_calls += o.rerank_calls;
        self.rerank_cached += o.rerank_cached;
        self.rerank_search_units += o.rerank_search_units;
        self.rerank_tokens += o.rerank_tokens;
    }
}

tokio::task_local! {
    static COUNT: Arc<Mutex<RetrievalUsage>>;
}

/// Runs `f`, counting the retrieval calls it makes.
pub async fn counted<F: Future>(f: F) -> (F::Output, RetrievalUsage) {
    let cell = Arc::new(Mutex::new(RetrievalUsage::default()));
    let out = COUNT.scope(Arc::clone(&cell), f).await;
    let usage = cell.lock().map(|u| *u).unwrap_or_default();
    (out, usage)
}

fn add(f: impl FnOnce(&mut RetrievalUsage)) {
    let _ = COUNT.try_with(|c| {
        if let Ok(mut u) = c.lock() {
            f(&mut u);
        }
    });
}

/// Counts one query embedding call: answered from a cache or cassette (`cached`),
/// with the tokens the server reported.
pub fn add_embedding(cached: bool, tokens: Option<u64>) {
    add(|u| {
        u.embedding_calls += 1;
        u.embedding_cached += u64::from(cached);
        u.embedding_tokens += tokens.unwrap_or(0);
    });
}

/// Counts one rerank call: `cached`, Cohere's search units, Jina's tokens.
pub fn add_rerank(cached: bool, search_units: Option<u64>, tokens: Option<u64>) {
    add(|u| {
        u.rerank_calls += 1;
        u.rerank_cached += u64::from(cached);
        u.rerank_search_units += search_units.unwrap_or(0);
        u.rerank_tokens += tokens.unwrap_or(0);
    });
}
