//! The call layers of HTTP rerank calls (a retriever's `rerank:` stage with a `tei`,
//! `cohere` or `jina` reranker): the same response cache, cassette recording and
//! replay as embedding and LLM calls, behind the
//! [`crate::retrieval::rerank::RerankBackend`] seam.
//!
//! [`layer`] (what [`super::embeddings::EmbedLayers`]'s `layer_rerank` returns)
//! stacks, innermost first:
//! 1. the server (the reranker's own HTTP client, with its retries), or under
//!    `--replay` a [`ReplayReranks`] on the cassette instead (no key read, nothing
//!    sent);
//! 2. unless replaying, the response cache ([`CachedReranks`]): a reranker scores
//!    deterministically, so the same query over the same documents is asked once;
//! 3. the recorder ([`RecordingReranks`]), outermost, when recording: one
//!    `"kind": "rerank"` cassette line per call, cache hits included.
//!
//! Key: [`rerank_key`] (the reranker's shape, model and base URL, the query and the
//! documents in order). A cache entry is `<cache>/responses/<2 hex>/<key>.json` like
//! an LLM answer's, its `output` `{"scores": [...], "usage": {...}}`.
use super::cache::ResponseCache;
use super::cassette::{
    rerank_key, Cassette, CassetteWriter, RerankLineOut, CASSETTE_VERSION, RERANK,
};
use super::embeddings::EmbedLayers;
use super::LlmResponse;
use crate::retrieval::rerank::{
    NoServer, RerankBackend, RerankError, RerankRequest, RerankUsage, Reranking,
};
use futures::future::BoxFuture;
use serde_json::Value;
use std::sync::Arc;

/// The rerank backend stack of `layers` in front of `live` (see the module docs).
pub fn layer(layers: &EmbedLayers, live: Option<Arc<dyn RerankBackend>>) -> Arc<dyn RerankBackend> {
    let mut b: Arc<dyn RerankBackend> = match (&layers.replay, live) {
        (Some(c), _) => Arc::new(ReplayReranks {
            cassette: Arc::clone(c),
        }),
        (None, Some(live)) => match &layers.cache {
            Some(cache) => Arc::new(CachedReranks {
                inner: live,
                cache: Arc::clone(cache),
            }),
            None => live,
        },
        (None, None) => Arc::new(NoServer),
    };
    if let Some(w) = &layers.record {
        b = Arc::new(RecordingReranks {
            inner: b,
            writer: Arc::clone(w),
        });
    }
    b
}

/// Answers rerank calls from a cassette, by key, with no server. A call recorded as
/// a failure fails again with its message; a call the cassette does not hold fails
/// naming the reranker, the query and how many rerank lines there are.
pub struct ReplayReranks {
    cassette: Arc<Cassette>,
}

impl ReplayReranks {
    /// Replays from `cassette`.
    pub fn new(cassette: Arc<Cassette>) -> ReplayReranks {
        ReplayReranks { cassette }
    }

    fn answer(&self, req: RerankRequest<'_>) -> Result<Reranking, RerankError> {
        let key = rerank_key(req.config, req.query, req.documents);
        match self.cassette.rerank(&key) {
            Some(Ok((scores, usage))) => Ok(Reranking {
                scores: scores.clone(),
                usage: *usage,
                cached: true,
            }),
            Some(Err(m)) => Err(RerankError::Call {
                reranker: req.config.describe(),
                message: m.clone(),
            }),
            None => {
                let q: String = req.query.chars().take(80).collect();
                Err(RerankError::Call {
                    reranker: req.config.describe(),
                    message: format!(
                        "replay: cassette {} holds no rerank call of the query {q:?} over these {} document(s) ({} rerank line(s) in all; the query or the candidates differ from the recorded run's): record the run again with --record",
                        self.cassette.path().display(),
                        req.documents.len(),
                        self.cassette.rerank_lines()
                    ),
                })
            }
        }
    }
}

impl RerankBackend for ReplayReranks {
    fn rerank<'a>(
        &'a self,
        req: RerankRequest<'a>,
    ) -> BoxFuture<'a, Result<Reranking, RerankError>> {
        Box::pin(std::future::ready(self.answer(req)))
    }
}

/// Rerank calls behind the response cache: a hit answers from disk; a miss asks the
/// inner backend and stores its scores. A corrupt entry (not one finite score per
/// document) is a miss.
pub struct CachedReranks {
    inner: Arc<dyn RerankBackend>,
    cache: Arc<ResponseCache>,
}

impl CachedReranks {
    /// `inner` behind `cache`.
    pub fn new(inner: Arc<dyn RerankBackend>, cache: Arc<ResponseCache>) -> CachedReranks {
        CachedReranks { inner, cache }
    }
}

/// The scores and usage of a cache entry's `output`, when it holds `n` finite scores.
fn scores_of(output: &Value, n: usize) -> Option<(Vec<f64>, RerankUsage)> {
    let scores: Vec<f64> = output
        .get("scores")?
        .as_array()
        .filter(|a| a.len() == n)?
        .iter()
        .map(|x| x.as_f64().filter(|f| f.is_finite()))
        .collect::<Option<_>>()?;
    let usage = output
        .get("usage")
        .and_then(|u| serde_json::from_value(u.clone()).ok())
        .unwrap_or_default();
    Some((scores, usage))
}

impl RerankBackend for CachedReranks {
    fn rerank<'a>(
        &'a self,
        req: RerankRequest<'a>,
    ) -> BoxFuture<'a, Result<Reranking, RerankError>> {
        Box::pin(async move {
            let key = rerank_key(req.config, req.query, req.documents);
            if let Some(hit) = self.cache.get(&key) {
                if let Some((scores, usage)) = scores_of(&hit.output, req.documents.len()) {
                    return Ok(Reranking {
                        scores,
                        usage,
                        cached: true,
                    });
                }
            }
            let out = self.inner.rerank(req).await?;
            if !out.cached {
                let entry = LlmResponse {
                    output: serde_json::json!({"scores": out.scores, "usage": out.usage}),
                    ..Default::default()
                };
                if let Err(e) = self.cache.put(&key, &entry) {
                    self.cache.warn_once(&e);
                }
            }
            Ok(out)
        })
    }
}

/// Records every rerank call of the backend it wraps as a cassette line. A line that
/// cannot be written fails the call (`--record` promised every call).
pub struct RecordingReranks {
    inner: Arc<dyn RerankBackend>,
    writer: Arc<CassetteWriter>,
}

impl RecordingReranks {
    /// Records what `inner` answers into `writer`.
    pub fn new(inner: Arc<dyn RerankBackend>, writer: Arc<CassetteWriter>) -> RecordingReranks {
        RecordingReranks { inner, writer }
    }
}

impl RerankBackend for RecordingReranks {
    fn rerank<'a>(
        &'a self,
        req: RerankRequest<'a>,
    ) -> BoxFuture<'a, Result<Reranking, RerankError>> {
        let seq = self.writer.next_seq();
        Box::pin(async move {
            let r = self.inner.rerank(req).await;
            let message = r.as_ref().err().map(ToString::to_string);
            let written = self.writer.write_line(&RerankLineOut {
                v: CASSETTE_VERSION,
                kind: RERANK,
                seq,
                key: rerank_key(req.config, req.query, req.documents).hex(),
                config: req.config,
                query: req.query,
                documents: req.documents,
                scores: r.as_ref().ok().map(|o| o.scores.as_slice()),
                usage: r.as_ref().map(|o| o.usage).unwrap_or_default(),
                cached: r.as_ref().is_ok_and(|o| o.cached),
                error: message.as_deref(),
            });
            match (r, written) {
                (Ok(_), Err(w)) => Err(RerankError::Call {
                    reranker: req.config.describe(),
                    message: w.to_string(),
                }),
                (r, _) => r,
            }
        })
    }
}
