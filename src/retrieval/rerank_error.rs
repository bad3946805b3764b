//! Why a rerank stage failed ([`RerankError`]), apart from the stage itself so that
//! [`super::SearchError`] can carry it without an import cycle.

/// What is wrong with a reranker's answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AnswerFault {
    /// An index beyond the candidates.
    #[error("index {index} is out of range for {n} document(s)")]
    OutOfRange {
        /// The index answered.
        index: i64,
        /// Candidates sent.
        n: usize,
    },
    /// An index answered twice.
    #[error("index {0} is answered twice")]
    Duplicate(usize),
    /// Candidates without a score.
    #[error("{} of the {n} document(s) have no score (first: index {})", .missing.len(), .missing[0])]
    Missing {
        /// The indices without a score, ascending.
        missing: Vec<usize>,
        /// Candidates sent.
        n: usize,
    },
    /// A score that is not a finite number (`NaN`, infinite, a string, `null`).
    #[error("the score of index {index} is {value}, not a finite number")]
    NotFinite {
        /// The index.
        index: usize,
        /// The value as answered.
        value: String,
    },
    /// The body is not the reranker's shape (not JSON, no result list, an error
    /// object).
    #[error("{0}")]
    Shape(String),
}

/// Why a rerank stage failed. `Display` names the reranker.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RerankError {
    /// The call failed (after its retries), or replay has no answer.
    #[error("reranker {reranker}: {message}")]
    Call {
        /// The reranker, as [`Reranker::describe`] names it.
        reranker: String,
        /// What happened.
        message: String,
    },
    /// The reranker answered, but not a score for every candidate.
    #[error("reranker {reranker}: {fault}")]
    Answer {
        /// The reranker.
        reranker: String,
        /// What is wrong.
        fault: AnswerFault,
    },
}
