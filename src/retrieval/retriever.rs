//! The [`Retriever`] trait every backend implements (BM25 [`Index`], dense and hybrid
//! [`super::DenseRetriever`], web search [`super::web::WebSearch`]), and
//! [`ScriptedRetriever`], which returns fixed lists (tests, conformance).
use super::{Document, Index, RetrievalError};
use futures::future::BoxFuture;
use std::collections::VecDeque;
use std::sync::Mutex;

/// What [`Retriever::search`] returns: the documents, or why the search failed.
pub type SearchFuture<'a> = BoxFuture<'a, Result<Vec<Document>, SearchError>>;

/// Why a search failed. `Display` is the message a failed step shows after
/// ``retriever `R`: `` (or as a tool's message).
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The BM25 index failed (tantivy, I/O).
    #[error(transparent)]
    Index(#[from] RetrievalError),
    /// A network or scripted backend's message (dense embedding of the query, web
    /// search, a scripted list run out); it names the backend.
    #[error("{0}")]
    Backend(String),
    /// The rerank stage failed: the reranker's call, or an answer that does not give
    /// every candidate one finite score.
    #[error("rerank: {0}")]
    Rerank(super::rerank_error::RerankError),
}

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
    /// The future resolves to a [`SearchError`] when the search fails.
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a>;
}

impl Retriever for Index {
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a> {
        let r = Index::search(self, query, top_k).map_err(SearchError::Index);
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

impl Retriever for ScriptedRetriever {
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a> {
        Box::pin(std::future::ready(
            self.next(query, top_k).map_err(SearchError::Backend),
        ))
    }
}
