//! The rerank stage of a retriever (`rerank:` in a spec): the backend retrieves
//! `candidates` documents, a [`Reranker`] scores every one of them against the query,
//! and [`Reranked`] returns the best `top_k` by that score.
//!
//! Rerankers: [`OfflineReranker`] (`reranker: offline`, classical, over the BM25 index:
//! no call) and [`HttpReranker`] (`reranker: {kind: tei|cohere|jina, ...}`), whose
//! calls go through the same call layers as embedding calls (response cache,
//! cassette record and replay: [`RerankBackend`], built by
//! [`crate::retrieval::EmbedCalls::layer_rerank`]).
//!
//! **Bad answers are failures, never silently skipped.** A reranker that fails (the
//! call's error after its retries, a replay miss) or answers with an index out of
//! range, an index twice, a candidate without a score, or a score that is not a
//! finite number fails the search with a [`RerankError`] naming the reranker and the
//! fault; the retrieve step then fails naming the retriever (``retriever `R`:
//! rerank: ...``). The un-reranked order is never returned instead: a spec asked for
//! reranked documents, and a quietly different order would change answers and eval
//! figures without a trace.
mod calls;
mod check;
mod http;
mod offline;

pub use super::rerank_error::{AnswerFault, RerankError};
pub use calls::{RerankBackend, RerankConfig, RerankRequest, RerankUsage, Reranking};
pub use check::check_rerank;
pub use http::{parse_scores, HttpReranker, Shape};
pub use offline::{OfflineReranker, OfflineWeights};

use super::{Document, Retriever, SearchError, SearchFuture};
use futures::future::BoxFuture;
use std::sync::Arc;

/// The HTTP rerankers' key variables that are unset or empty: one message per
/// retriever, naming it and the variable (`ragloop run`/`eval` refuse to start, exit
/// 2, like a model's missing key). Not called when replaying.
pub fn missing_keys(spec: &crate::spec::types::Spec) -> Vec<String> {
    use crate::spec::retriever::RerankerSpec;
    let mut out = Vec::new();
    for (name, r) in &spec.retrievers {
        let Some(RerankerSpec::Http(h)) = r.rerank().map(|r| &r.reranker) else {
            continue;
        };
        if let Some(var) = &h.api_key_env {
            if let Err(why) = crate::secret::read_env(var) {
                out.push(format!(
                    "retriever `{name}`: the API key variable {var} of its `{}` reranker (named by retrievers.{name}.rerank.reranker.api_key_env) {}",
                    h.kind,
                    why.describe()
                ));
            }
        }
    }
    out
}

/// Answers no rerank call: an HTTP reranker layered for replay without a cassette
/// (a caller's mistake, never reached from the CLI).
pub struct NoServer;

impl RerankBackend for NoServer {
    fn rerank<'a>(
        &'a self,
        req: RerankRequest<'a>,
    ) -> BoxFuture<'a, Result<Reranking, RerankError>> {
        Box::pin(std::future::ready(Err(RerankError::Call {
            reranker: req.config.describe(),
            message: "no server and no cassette to answer from".into(),
        })))
    }
}

/// Scores candidates against a query.
pub trait Reranker: Send + Sync {
    /// How the reranker is named in messages, e.g. `offline` or ``cohere (rerank-v3.5
    /// at https://api.cohere.com)``.
    fn describe(&self) -> String;

    /// One score per document of `docs`, in their order (higher is better).
    ///
    /// # Errors
    /// The [`RerankError`] of a failed call or a malformed answer.
    fn rerank<'a>(
        &'a self,
        query: &'a str,
        docs: &'a [Document],
    ) -> BoxFuture<'a, Result<Vec<f64>, RerankError>>;
}

/// Scores from `(index, score)` pairs of an answer for `n` candidates: every index
/// in range, none twice, every candidate scored, every score finite.
///
/// # Errors
/// The first [`AnswerFault`] found (in answer order; missing ones after the rest).
pub fn scores_from_pairs(
    n: usize,
    pairs: impl IntoIterator<Item = (i64, f64)>,
) -> Result<Vec<f64>, AnswerFault> {
    let mut scores: Vec<Option<f64>> = vec![None; n];
    for (index, score) in pairs {
        let i = usize::try_from(index)
            .ok()
            .filter(|i| *i < n)
            .ok_or(AnswerFault::OutOfRange { index, n })?;
        if scores[i].is_some() {
            return Err(AnswerFault::Duplicate(i));
        }
        if !score.is_finite() {
            return Err(AnswerFault::NotFinite {
                index: i,
                value: score.to_string(),
            });
        }
        scores[i] = Some(score);
    }
    let missing: Vec<usize> = (0..n).filter(|i| scores[*i].is_none()).collect();
    if !missing.is_empty() {
        return Err(AnswerFault::Missing { missing, n });
    }
    Ok(scores.into_iter().flatten().collect())
}

/// A retriever with a rerank stage: `inner` retrieves `candidates` (at least the
/// documents asked for), `reranker` scores them, the best are returned.
///
/// Order: rerank score descending, then id ascending (like every ranking of ragloop).
/// Each returned document gets
/// `metadata.rerank_score` and `metadata.retrieval_rank` (1-based rank before
/// reranking); `metadata.score` stays the backend's.
pub struct Reranked {
    inner: Arc<dyn Retriever>,
    reranker: Arc<dyn Reranker>,
    candidates: usize,
}

impl Reranked {
    /// `inner` followed by `reranker` over `candidates` documents per search.
    pub fn new(inner: Arc<dyn Retriever>, reranker: Arc<dyn Reranker>, candidates: usize) -> Self {
        Reranked {
            inner,
            reranker,
            candidates: candidates.max(1),
        }
    }
}

/// Orders `docs` by `scores` (descending, ties by id, then position), annotates them and
/// keeps the first `top_k`.
pub fn order(docs: Vec<Document>, scores: &[f64], top_k: usize) -> Vec<Document> {
    let mut ranked: Vec<(usize, f64, Document)> = docs
        .into_iter()
        .enumerate()
        .map(|(i, d)| (i, scores[i], d))
        .collect();
    ranked.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| a.2.id.cmp(&b.2.id))
            .then(a.0.cmp(&b.0))
    });
    ranked.truncate(top_k);
    ranked
        .into_iter()
        .map(|(i, s, mut d)| {
            d.metadata
                .insert("rerank_score".into(), serde_json::Value::from(s));
            d.metadata
                .insert("retrieval_rank".into(), serde_json::Value::from(i + 1));
            d
        })
        .collect()
}

impl Retriever for Reranked {
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a> {
        Box::pin(async move {
            let docs = self.inner.search(query, self.candidates.max(top_k)).await?;
            if docs.is_empty() || top_k == 0 {
                return Ok(Vec::new());
            }
            let scores = self
                .reranker
                .rerank(query, &docs)
                .await
                .map_err(SearchError::Rerank)?;
            if scores.len() != docs.len() {
                return Err(SearchError::Rerank(RerankError::Answer {
                    reranker: self.reranker.describe(),
                    fault: AnswerFault::Shape(format!(
                        "{} score(s) for {} document(s)",
                        scores.len(),
                        docs.len()
                    )),
                }));
            }
            if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
                return Err(SearchError::Rerank(RerankError::Answer {
                    reranker: self.reranker.describe(),
                    fault: AnswerFault::NotFinite {
                        index: i,
                        value: scores[i].to_string(),
                    },
                }));
            }
            Ok(order(docs, &scores, top_k))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_must_score_every_candidate_once_with_a_finite_number() {
        assert_eq!(
            scores_from_pairs(3, [(2, 0.5), (0, 0.9), (1, -1.0)]),
            Ok(vec![0.9, -1.0, 0.5])
        );
        assert_eq!(
            scores_from_pairs(2, [(0, 1.0), (2, 0.5)]),
            Err(AnswerFault::OutOfRange { index: 2, n: 2 })
        );
        assert_eq!(
            scores_from_pairs(2, [(-1, 1.0)]),
            Err(AnswerFault::OutOfRange { index: -1, n: 2 })
        );
        assert_eq!(
            scores_from_pairs(2, [(0, 1.0), (0, 0.5)]),
            Err(AnswerFault::Duplicate(0))
        );
        assert_eq!(
            scores_from_pairs(3, [(1, 1.0)]),
            Err(AnswerFault::Missing {
                missing: vec![0, 2],
                n: 3
            })
        );
        assert!(matches!(
            scores_from_pairs(1, [(0, f64::NAN)]),
            Err(AnswerFault::NotFinite { index: 0, .. })
        ));
    }

    #[test]
    fn order_is_by_score_then_retrieval_rank_and_annotates() {
        let doc = |id: &str| Document {
            id: id.into(),
            content: String::new(),
            metadata: serde_json::json!({"source": id})
                .as_object()
                .unwrap()
                .clone(),
        };
        let out = order(vec![doc("a"), doc("c"), doc("b")], &[0.1, 0.5, 0.5], 2);
        let ids: Vec<&str> = out.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["b", "c"], "equal scores by id");
        assert_eq!(out[0].metadata["retrieval_rank"], 3);
        assert_eq!(out[1].metadata["rerank_score"], 0.5);
    }
}
