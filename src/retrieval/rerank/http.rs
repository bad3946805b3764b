//! HTTP rerankers in the three shapes in use:
//!
//! | `kind` | request | response |
//! | --- | --- | --- |
//! | `tei` (Hugging Face text-embeddings-inference) | `POST {base_url}/rerank` `{query, texts}` | `[{index, score}]` |
//! | `cohere` (Cohere v2) | `POST {base_url}/v2/rerank` `{model, query, documents, top_n}` | `{results: [{index, relevance_score}], meta.billed_units.search_units}` |
//! | `jina` (Jina AI) | `POST {base_url}/v1/rerank` `{model, query, documents, top_n}` | `{results: [{index, relevance_score}], usage.total_tokens}` |
//!
//! `top_n` is the number of documents sent, so every candidate gets a score. Calls
//! go through [`crate::http::send_checked`] (timeouts, connection failures, 408, 429
//! after `Retry-After` and 5xx retried `retries` times; other 4xx fail at once with
//! the server's message; no redirect followed) with `Authorization: Bearer <key>`
//! when `api_key_env` is set; the key is redacted from every message. An answer
//! must score every document exactly once with a finite number
//! ([`super::scores_from_pairs`]).
use super::calls::{RerankBackend, RerankConfig, RerankRequest, RerankUsage, Reranking};
use super::{scores_from_pairs, AnswerFault, RerankError, Reranker};
use crate::http::{self, CallPolicy};
use crate::retrieval::Document;
use crate::spec::retriever::HttpRerankerSpec;
use futures::future::BoxFuture;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The request and response shape of an HTTP reranker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Hugging Face text-embeddings-inference.
    Tei,
    /// Cohere v2.
    Cohere,
    /// Jina AI.
    Jina,
}

impl Shape {
    /// The shape of `kind` as written in specs.
    pub fn of(kind: &str) -> Option<Shape> {
        match kind {
            "tei" => Some(Shape::Tei),
            "cohere" => Some(Shape::Cohere),
            "jina" => Some(Shape::Jina),
            _ => None,
        }
    }

    /// The path after the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Shape::Tei => "rerank",
            Shape::Cohere => "v2/rerank",
            Shape::Jina => "v1/rerank",
        }
    }

    /// The official server, when the API has one (TEI is self-hosted).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Shape::Tei => None,
            Shape::Cohere => Some("https://api.cohere.com"),
            Shape::Jina => Some("https://api.jina.ai"),
        }
    }

    /// Whether the shape sends a `model`.
    pub fn needs_model(self) -> bool {
        !matches!(self, Shape::Tei)
    }
}

/// Seconds per attempt when the reranker sets no `timeout_secs`.
pub const DEFAULT_TIMEOUT_SECS: f64 = 30.0;

/// A client of one HTTP reranker.
#[derive(Clone)]
pub struct HttpReranker {
    shape: Shape,
    config: RerankConfig,
    endpoint: reqwest::Url,
    key: Option<String>,
    policy: CallPolicy,
    /// The call layers (`None`: straight to the server).
    layers: Option<Arc<dyn RerankBackend>>,
}

impl std::fmt::Debug for HttpReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpReranker")
            .field("config", &self.config)
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

impl HttpReranker {
    /// The reranker `spec` describes; reads the key from `api_key_env` now, unless
    /// `replaying` (then no key is read and nothing will be sent).
    ///
    /// # Errors
    /// A message when the kind is unknown, `base_url` is missing (TEI) or not an
    /// http(s) URL, `model` is missing (Cohere, Jina), or the key variable is unset.
    pub fn new(spec: &HttpRerankerSpec, replaying: bool) -> Result<HttpReranker, String> {
        let shape = Shape::of(&spec.kind).ok_or_else(|| {
            format!(
                "unknown reranker kind `{}` (tei, cohere or jina)",
                spec.kind
            )
        })?;
        let base = spec
            .base_url
            .as_deref()
            .or(shape.default_base_url())
            .ok_or_else(|| format!("reranker `{}` needs `base_url`", spec.kind))?;
        let model = spec
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_string);
        if shape.needs_model() && model.is_none() {
            return Err(format!("reranker `{}` needs `model`", spec.kind));
        }
        let endpoint = crate::retrieval::web::endpoint(base, shape.path())
            .map_err(|e| format!("reranker `{}`: {e}", spec.kind))?;
        let key = match (&spec.api_key_env, replaying) {
            (Some(var), false) => Some(
                crate::secret::read_env(var)
                    .map(|k| k.expose().to_string())
                    .map_err(|why| {
                        format!(
                            "reranker `{}`: the API key variable {var} (named by its api_key_env) {}",
                            spec.kind,
                            why.describe()
                        )
                    })?,
            ),
            _ => None,
        };
        let timeout = spec
            .timeout_secs
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .min(86_400.0);
        let mut policy = CallPolicy {
            retries: spec.retries.unwrap_or(2),
            timeout: Duration::from_secs_f64(timeout),
            ..CallPolicy::default()
        };
        policy.secrets.extend(key.clone());
        Ok(HttpReranker {
            shape,
            config: RerankConfig {
                kind: spec.kind.clone(),
                model,
                base_url: base.trim().trim_end_matches('/').to_string(),
            },
            endpoint,
            key,
            policy,
            layers: None,
        })
    }

    /// Sends every call through `layers` (built around this client by the caller).
    pub fn with_layers(mut self, layers: Arc<dyn RerankBackend>) -> HttpReranker {
        self.layers = Some(layers);
        self
    }

    /// Replaces the call policy (tests use short backoffs). Keys stay redacted.
    pub fn with_policy(mut self, mut policy: CallPolicy) -> HttpReranker {
        policy.secrets.extend(self.key.clone());
        self.policy = policy;
        self
    }

    /// What decides the scores.
    pub fn config(&self) -> &RerankConfig {
        &self.config
    }

    /// The URL calls are sent to.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    fn body(&self, query: &str, documents: &[String]) -> String {
        let v = match self.shape {
            Shape::Tei => serde_json::json!({"query": query, "texts": documents}),
            Shape::Cohere | Shape::Jina => serde_json::json!({
                "model": self.config.model,
                "query": query,
                "documents": documents,
                "top_n": documents.len(),
            }),
        };
        v.to_string()
    }

    /// One request to the server.
    async fn post(&self, query: &str, documents: &[String]) -> Result<Reranking, RerankError> {
        let body = self.body(query, documents);
        let n = documents.len();
        let shape = self.shape;
        let described = self.config.describe();
        let result = http::send_checked(
            || {
                let mut req = http::client()
                    .post(self.endpoint.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .header(reqwest::header::ACCEPT, "application/json")
                    .body(body.clone());
                if let Some(k) = &self.key {
                    req = req.bearer_auth(k);
                }
                req
            },
            &self.policy,
            |resp| Ok(parse_scores(shape, &resp.body, n)),
        )
        .await;
        match result {
            Ok(Ok((scores, usage))) => Ok(Reranking {
                scores,
                usage,
                cached: false,
            }),
            // The body arrived but is not a finite score per document: not retried.
            Ok(Err(fault)) => Err(RerankError::Answer {
                reranker: described,
                fault,
            }),
            Err(e) => Err(RerankError::Call {
                reranker: described,
                message: self.policy.redact(&format!("{}: {e}", self.endpoint)),
            }),
        }
    }
}

impl RerankBackend for HttpReranker {
    fn rerank<'a>(
        &'a self,
        req: RerankRequest<'a>,
    ) -> BoxFuture<'a, Result<Reranking, RerankError>> {
        Box::pin(self.post(req.query, req.documents))
    }
}

impl Reranker for HttpReranker {
    fn describe(&self) -> String {
        self.config.describe()
    }

    fn rerank<'a>(
        &'a self,
        query: &'a str,
        docs: &'a [Document],
    ) -> BoxFuture<'a, Result<Vec<f64>, RerankError>> {
        Box::pin(async move {
            let texts: Vec<String> = docs.iter().map(|d| d.content.clone()).collect();
            let out = match &self.layers {
                Some(l) => {
                    l.rerank(RerankRequest {
                        config: &self.config,
                        query,
                        documents: &texts,
                    })
                    .await?
                }
                None => self.post(query, &texts).await?,
            };
            crate::retrieval::usage::add_rerank(
                out.cached,
                out.usage.search_units,
                out.usage.tokens,
            );
            Ok(out.scores)
        })
    }
}

/// The scores (one per document, in input order) and the billed usage of a rerank
/// response body of `shape` for `n` documents.
///
/// # Errors
/// An [`AnswerFault`]: a body that is not JSON or not the shape's (no result list,
/// an error object, an entry without a numeric `index` or score), an index out of
/// range or answered twice, a document without a score, a score that is not finite.
pub fn parse_scores(
    shape: Shape,
    body: &str,
    n: usize,
) -> Result<(Vec<f64>, RerankUsage), AnswerFault> {
    let trimmed = body.trim_start_matches('\u{feff}').trim();
    let v: Value = serde_json::from_str(trimmed).map_err(|e| {
        AnswerFault::Shape(format!("the response is not JSON ({e}): {}", clip(trimmed)))
    })?;
    let (list, score_key) = match shape {
        Shape::Tei => (v.as_array(), "score"),
        Shape::Cohere | Shape::Jina => (
            v.get("results").and_then(Value::as_array),
            "relevance_score",
        ),
    };
    let Some(list) = list else {
        let what = match shape {
            Shape::Tei => "a list of {index, score}",
            _ => "an object with a `results` list",
        };
        let err = v
            .get("message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("detail"))
            .map(|m| format!(" (the server says: {})", clip(&m.to_string())))
            .unwrap_or_default();
        return Err(AnswerFault::Shape(format!(
            "the response is not {what}{err}: {}",
            clip(trimmed)
        )));
    };
    let mut pairs = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let index = e.get("index").and_then(Value::as_i64).ok_or_else(|| {
            AnswerFault::Shape(format!(
                "result {i} has no integer `index`: {}",
                clip(&e.to_string())
            ))
        })?;
        let score = match e.get(score_key) {
            Some(Value::Number(x)) => x.as_f64().unwrap_or(f64::NAN),
            Some(other) => {
                return Err(AnswerFault::NotFinite {
                    index: usize::try_from(index).unwrap_or(usize::MAX),
                    value: clip(&other.to_string()),
                })
            }
            None => {
                return Err(AnswerFault::Shape(format!(
                    "result {i} has no `{score_key}`: {}",
                    clip(&e.to_string())
                )))
            }
        };
        pairs.push((index, score));
    }
    let scores = scores_from_pairs(n, pairs)?;
    let usage = match shape {
        Shape::Tei => RerankUsage::default(),
        Shape::Cohere => RerankUsage {
            search_units: v
                .pointer("/meta/billed_units/search_units")
                .and_then(Value::as_f64)
                .filter(|x| x.is_finite() && *x >= 0.0)
                .map(|x| x as u64),
            tokens: None,
        },
        Shape::Jina => RerankUsage {
            search_units: None,
            tokens: v.pointer("/usage/total_tokens").and_then(Value::as_u64),
        },
    };
    Ok((scores, usage))
}

fn clip(s: &str) -> String {
    let c: String = s.chars().take(200).collect();
    let c = crate::text::escape_line(&c).into_owned();
    if s.chars().count() > 200 {
        format!("{c}…")
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_reads_its_scores_and_usage() {
        let (s, u) = parse_scores(
            Shape::Tei,
            r#"[{"index":1,"score":0.9},{"index":0,"score":0.1}]"#,
            2,
        )
        .unwrap();
        assert_eq!((s, u), (vec![0.1, 0.9], RerankUsage::default()));
        let (s, u) = parse_scores(
            Shape::Cohere,
            r#"{"results":[{"index":0,"relevance_score":0.5}],"meta":{"billed_units":{"search_units":1}}}"#,
            1,
        )
        .unwrap();
        assert_eq!((s, u.search_units), (vec![0.5], Some(1)));
        let (s, u) = parse_scores(
            Shape::Jina,
            r#"{"results":[{"index":0,"relevance_score":0.5,"document":{"text":"x"}}],"usage":{"total_tokens":42}}"#,
            1,
        )
        .unwrap();
        assert_eq!((s, u.tokens), (vec![0.5], Some(42)));
    }

    #[test]
    fn malformed_bodies_are_faults() {
        for (body, want) in [
            ("<html>", "not JSON"),
            (r#"{"message":"bad key"}"#, "bad key"),
            (r#"[{"score":0.1}]"#, "no integer `index`"),
            (r#"[{"index":0,"score":"high"}]"#, "not a finite number"),
            (r#"[{"index":0,"score":null}]"#, "not a finite number"),
            (r#"[{"index":0}]"#, "no `score`"),
            (r#"[{"index":3,"score":0.1}]"#, "out of range"),
        ] {
            let e = parse_scores(Shape::Tei, body, 1).unwrap_err().to_string();
            assert!(e.contains(want), "{body}: {e}");
        }
    }
}
