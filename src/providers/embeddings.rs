//! The call layers of embedding calls (query embeddings of `dense`/`hybrid`
//! retrievers, and the corpus batches embedded when a dense index is built): the
//! same response cache, cassette recording and replay as LLM calls, behind the
//! [`EmbedBackend`] seam that [`crate::retrieval`] defines.
//!
//! [`EmbedLayers`] is what `Resources::prepare` hands the retrievers it opens. Per
//! embedder it stacks, innermost first:
//! 1. the server (the embedder's own HTTP client), or under `--replay` a
//!    [`ReplayEmbeddings`] on the cassette instead (no key read, nothing sent);
//! 2. unless replaying, the response cache ([`CachedEmbeddings`]), for **query**
//!    embeddings only (chunk vectors have their own store beside the index);
//! 3. the recorder ([`RecordingEmbeddings`]), outermost, when recording: one cassette
//!    line per call as the retriever sees it (after the HTTP retries), cache hits
//!    included, plus the chunk vectors a dense index took from its store.
//!
//! Keys: [`embedding_key`] (the model as the server knows it, its base URL, the
//! requested dimensions and the exact input texts). The response cache entry of a
//! query is `<cache>/responses/<2 hex>/<key>.json` like an LLM answer's, its
//! `output` the list of vectors.
use super::cache::{embedding_key, ResponseCache};
use super::cassette::{Cassette, CassetteWriter, EmbedLineOut, CASSETTE_VERSION, EMBEDDINGS};
use super::{LlmResponse, Usage};
use crate::retrieval::{EmbedBackend, EmbedCalls, EmbedRequest, Embedded, Purpose};
use futures::future::BoxFuture;
use serde_json::Value;
use std::sync::Arc;

/// The layers of a run's embedding calls (see the module docs). With every field
/// `None` the stack is the server alone.
#[derive(Clone, Default)]
pub struct EmbedLayers {
    /// The response cache (query embeddings only; not when replaying).
    pub cache: Option<Arc<ResponseCache>>,
    /// Record every embedding call into this cassette.
    pub record: Option<Arc<CassetteWriter>>,
    /// Answer every embedding call from this cassette.
    pub replay: Option<Arc<Cassette>>,
}

impl EmbedLayers {
    /// Whether any layer is set.
    pub fn is_empty(&self) -> bool {
        self.cache.is_none() && self.record.is_none() && self.replay.is_none()
    }
}

impl EmbedCalls for EmbedLayers {
    fn replaying(&self) -> bool {
        self.replay.is_some()
    }

    fn layer(&self, live: Option<Arc<dyn EmbedBackend>>) -> Arc<dyn EmbedBackend> {
        let mut b: Arc<dyn EmbedBackend> = match (&self.replay, live) {
            (Some(c), _) => Arc::new(ReplayEmbeddings {
                cassette: Arc::clone(c),
            }),
            (None, Some(live)) => match &self.cache {
                Some(cache) => Arc::new(CachedEmbeddings {
                    inner: live,
                    cache: Arc::clone(cache),
                }),
                None => live,
            },
            (None, None) => Arc::new(NoServer),
        };
        if let Some(w) = &self.record {
            b = Arc::new(RecordingEmbeddings {
                inner: b,
                writer: Arc::clone(w),
            });
        }
        b
    }

    fn layer_rerank(
        &self,
        live: Option<Arc<dyn crate::retrieval::rerank::RerankBackend>>,
    ) -> Arc<dyn crate::retrieval::rerank::RerankBackend> {
        super::reranks::layer(self, live)
    }
}

/// Answers nothing: an embedder layered for replay with no cassette (a caller's
/// mistake, never reached from the CLI).
struct NoServer;

impl EmbedBackend for NoServer {
    fn embed<'a>(&'a self, req: EmbedRequest<'a>) -> BoxFuture<'a, Result<Embedded, String>> {
        Box::pin(std::future::ready(Err(format!(
            "embedding model `{}`: no server and no cassette to answer from",
            req.model_name
        ))))
    }
}

/// A text shortened for a message (first 80 characters, quoted and escaped).
fn excerpt(t: &str) -> String {
    let s: String = t.chars().take(80).collect();
    if s.len() < t.len() {
        format!("{s:?}...")
    } else {
        format!("{s:?}")
    }
}

/// Answers embedding calls from a cassette, by key, with no server.
///
/// Each text is looked up by the key of a one-text call, so a batch is answered
/// whatever batches the recording made. A call the cassette holds as a failure
/// fails again the same way; a text it does not hold fails the call with a message
/// naming the model, its configuration and the text (`replay: ...`).
pub struct ReplayEmbeddings {
    cassette: Arc<Cassette>,
}

impl ReplayEmbeddings {
    /// Replays from `cassette`.
    pub fn new(cassette: Arc<Cassette>) -> ReplayEmbeddings {
        ReplayEmbeddings { cassette }
    }

    fn answer(&self, req: EmbedRequest<'_>) -> Result<Embedded, String> {
        let mut vectors = Vec::with_capacity(req.texts.len());
        let mut tokens = None;
        let mut missing: Vec<&String> = Vec::new();
        for t in req.texts {
            match self.cassette.embedding(req.config, t) {
                Some(r) => {
                    vectors.push(r.vector.clone());
                    tokens = r.input_tokens;
                }
                None => missing.push(t),
            }
        }
        if missing.is_empty() {
            return Ok(Embedded {
                vectors,
                input_tokens: if req.texts.len() == 1 { tokens } else { None },
                cached: true,
            });
        }
        let key = embedding_key(req.config, req.texts);
        if let Some(e) = self.cassette.embedding_error(&key) {
            return Err(e.to_string());
        }
        Err(self.explain_miss(req, &missing))
    }

    fn explain_miss(&self, req: EmbedRequest<'_>, missing: &[&String]) -> String {
        let what = match req.purpose {
            Purpose::Query => format!("the query {}", excerpt(missing[0])),
            Purpose::Corpus => format!(
                "corpus chunk {} ({} of the {} chunk(s) of this batch are not recorded)",
                excerpt(missing[0]),
                missing.len(),
                req.texts.len()
            ),
        };
        let mut msg = format!(
            "replay: cassette {} holds no embedding of {what} by embedding model `{}` ({})",
            self.cassette.path().display(),
            req.model_name,
            req.config.describe()
        );
        let same_name: Vec<_> = self
            .cassette
            .embedding_models()
            .filter(|(n, _, _)| *n == req.model_name)
            .collect();
        let same_config = same_name.iter().find(|(_, c, _)| *c == req.config);
        match (same_config, same_name.first()) {
            (Some((_, _, n)), _) => msg.push_str(&format!(
                "; it has {n} embedding line(s) of that model and configuration: the {} differ from the recorded run's",
                match req.purpose {
                    Purpose::Query => "queries",
                    Purpose::Corpus => "corpus chunks",
                }
            )),
            (None, Some((_, c, _))) => msg.push_str(&format!(
                "; the model was recorded as {}",
                c.describe()
            )),
            (None, None) => msg.push_str(&format!(
                "; it has no embedding of that model ({} embedding line(s) in all)",
                self.cassette.embedding_lines()
            )),
        }
        msg.push_str(": record the run again with --record");
        msg
    }
}

impl EmbedBackend for ReplayEmbeddings {
    fn embed<'a>(&'a self, req: EmbedRequest<'a>) -> BoxFuture<'a, Result<Embedded, String>> {
        Box::pin(std::future::ready(self.answer(req)))
    }
}

/// Query embeddings behind the response cache: a hit answers from disk without a
/// request; a miss asks the inner backend and stores the vectors. Corpus batches
/// pass through (their vectors are stored beside the index).
pub struct CachedEmbeddings {
    inner: Arc<dyn EmbedBackend>,
    cache: Arc<ResponseCache>,
}

impl CachedEmbeddings {
    /// `inner` behind `cache`.
    pub fn new(inner: Arc<dyn EmbedBackend>, cache: Arc<ResponseCache>) -> CachedEmbeddings {
        CachedEmbeddings { inner, cache }
    }
}

/// The vectors of a cache entry's `output`, when it is a list of `n` non-empty
/// lists of finite numbers of one size.
fn vectors_of(output: &Value, n: usize) -> Option<Vec<Vec<f32>>> {
    let list = output.as_array().filter(|a| a.len() == n)?;
    let mut out = Vec::with_capacity(n);
    for v in list {
        let v: Vec<f32> = v
            .as_array()?
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32).filter(|f| f.is_finite()))
            .collect::<Option<_>>()?;
        if v.is_empty() || out.first().is_some_and(|f: &Vec<f32>| f.len() != v.len()) {
            return None;
        }
        out.push(v);
    }
    Some(out)
}

impl EmbedBackend for CachedEmbeddings {
    fn embed<'a>(&'a self, req: EmbedRequest<'a>) -> BoxFuture<'a, Result<Embedded, String>> {
        Box::pin(async move {
            if req.purpose != Purpose::Query {
                return self.inner.embed(req).await;
            }
            let key = embedding_key(req.config, req.texts);
            if let Some(hit) = self.cache.get(&key) {
                // A corrupt entry (not the vectors asked for) is a miss.
                if let Some(vectors) = vectors_of(&hit.output, req.texts.len()) {
                    return Ok(Embedded {
                        vectors,
                        input_tokens: (!hit.usage_estimated).then_some(hit.usage.input_tokens),
                        cached: true,
                    });
                }
            }
            let out = self.inner.embed(req).await?;
            if !out.cached {
                let entry = LlmResponse {
                    output: serde_json::to_value(&out.vectors).unwrap_or(Value::Null),
                    usage: Usage {
                        input_tokens: out.input_tokens.unwrap_or(0),
                        ..Usage::default()
                    },
                    usage_estimated: out.input_tokens.is_none(),
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

/// Records every embedding call of the backend it wraps as a cassette line
/// (`"kind": "embeddings"`, see `docs/cassettes.md`), and the chunk vectors a dense
/// index took from its store (`"stored": true`). A line that cannot be written fails
/// the call (`--record` promised every call).
pub struct RecordingEmbeddings {
    inner: Arc<dyn EmbedBackend>,
    writer: Arc<CassetteWriter>,
}

impl RecordingEmbeddings {
    /// Records what `inner` answers into `writer`.
    pub fn new(inner: Arc<dyn EmbedBackend>, writer: Arc<CassetteWriter>) -> RecordingEmbeddings {
        RecordingEmbeddings { inner, writer }
    }

    fn write(
        &self,
        seq: u64,
        req: EmbedRequest<'_>,
        r: Result<Answer<'_>, &str>,
        stored: bool,
    ) -> Result<(), String> {
        self.writer
            .write_line(&EmbedLineOut {
                v: CASSETTE_VERSION,
                kind: EMBEDDINGS,
                seq,
                key: embedding_key(req.config, req.texts).hex(),
                model_name: req.model_name,
                config: req.config,
                purpose: req.purpose,
                stored,
                inputs: req.texts,
                vectors: r.ok().map(|e| e.0),
                input_tokens: r.ok().and_then(|e| e.1),
                cached: r.is_ok_and(|e| e.2),
                error: r.err(),
            })
            .map_err(|e| e.to_string())
    }
}

/// What a recorded line holds of an answer: the vectors, the reported tokens, and
/// whether it was cached.
type Answer<'a> = (&'a [Vec<f32>], Option<u64>, bool);

impl EmbedBackend for RecordingEmbeddings {
    fn embed<'a>(&'a self, req: EmbedRequest<'a>) -> BoxFuture<'a, Result<Embedded, String>> {
        let seq = self.writer.next_seq();
        Box::pin(async move {
            let r = self.inner.embed(req).await;
            let out = match &r {
                Ok(e) => Ok((e.vectors.as_slice(), e.input_tokens, e.cached)),
                Err(m) => Err(m.as_str()),
            };
            let written = self.write(seq, req, out, false);
            match (r, written) {
                (Ok(_), Err(w)) => Err(w),
                (r, _) => r,
            }
        })
    }

    fn wants_stored(&self) -> bool {
        true
    }

    fn stored(&self, req: EmbedRequest<'_>, vectors: &[Vec<f32>]) -> Result<(), String> {
        self.write(
            self.writer.next_seq(),
            req,
            Ok((vectors, None, false)),
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::EmbedConfig;
    use std::path::Path;

    fn config(dimensions: Option<u32>) -> EmbedConfig {
        EmbedConfig {
            model: "m".into(),
            base_url: "http://127.0.0.1:1/v1".into(),
            dimensions,
        }
    }

    fn line(texts: &[&str], vectors: &str) -> String {
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        format!(
            r#"{{"v":1,"kind":"embeddings","seq":0,"key":"{}","model_name":"emb","config":{},"purpose":"corpus","inputs":{},"vectors":{vectors},"cached":false,"error":null}}"#,
            embedding_key(&config(None), &texts).hex(),
            serde_json::to_string(&config(None)).unwrap(),
            serde_json::to_string(&texts).unwrap()
        )
    }

    #[test]
    fn keys_cover_model_url_dimensions_and_texts_and_never_match_a_chat_key() {
        let t = vec!["a".to_string()];
        let k = embedding_key(&config(None), &t);
        assert_ne!(k, embedding_key(&config(Some(8)), &t));
        let mut other = config(None);
        other.base_url = "http://127.0.0.1:2/v1".into();
        assert_ne!(k, embedding_key(&other, &t));
        assert_ne!(k, embedding_key(&config(None), &["b".to_string()]));
        assert_ne!(
            embedding_key(&config(None), &["a".to_string(), "b".to_string()]),
            embedding_key(&config(None), &["b".to_string(), "a".to_string()])
        );
        assert_eq!(k, embedding_key(&config(None), &t), "stable");
    }

    #[tokio::test]
    async fn replay_answers_texts_from_any_batch_and_explains_a_miss() {
        let text = format!(
            "{}\n{}\n",
            line(&["one", "two"], "[[1.0,0.0],[0.0,1.0]]"),
            line(&["three"], "[[0.5,0.5]]")
        );
        let c = Arc::new(Cassette::from_bytes(Path::new("c.jsonl"), text.as_bytes()).unwrap());
        assert_eq!((c.len(), c.embedding_lines()), (2, 2));
        let r = ReplayEmbeddings::new(Arc::clone(&c));
        let cfg = config(None);
        let texts = vec!["three".to_string(), "one".to_string()];
        let req = EmbedRequest {
            model_name: "emb",
            config: &cfg,
            texts: &texts,
            purpose: Purpose::Corpus,
        };
        let out = r.embed(req).await.unwrap();
        assert_eq!(out.vectors, vec![vec![0.5, 0.5], vec![1.0, 0.0]]);
        assert!(out.cached);
        let q = vec!["four".to_string()];
        let e = r
            .embed(EmbedRequest {
                texts: &q,
                purpose: Purpose::Query,
                ..req
            })
            .await
            .unwrap_err();
        assert!(e.contains("holds no embedding of the query \"four\" by embedding model `emb` (m at http://127.0.0.1:1/v1, native size)"), "{e}");
        let d8 = config(Some(8));
        let e = r
            .embed(EmbedRequest { config: &d8, ..req })
            .await
            .unwrap_err();
        assert!(
            e.contains("the model was recorded as m at http://127.0.0.1:1/v1, native size"),
            "{e}"
        );
    }

    #[test]
    fn malformed_embedding_lines_are_refused_with_their_line_number() {
        let ok = line(&["one"], "[[1.0]]");
        for (bad, msg) in [
            (
                line(&["one", "two"], "[[1.0]]"),
                "1 vector(s) for 2 input(s)",
            ),
            (line(&["one"], "[[]]"), "is empty"),
            (
                line(&["one", "two"], "[[1.0],[1.0,2.0]]"),
                "of another size",
            ),
            (line(&["one"], "[[1e39]]"), "number out of range"),
            (
                ok.replace("\"vectors\":[[1.0]],", ""),
                "neither `vectors` nor `error`",
            ),
            (
                ok.replace("\"kind\":\"embeddings\"", "\"kind\":\"bogus\""),
                "unknown line kind `bogus`",
            ),
            (
                ok.replace("\"kind\":\"embeddings\"", "\"kind\":\"rerank\""),
                // read as a rerank line: its `config` has no `kind`
                "missing field `kind`",
            ),
            (ok.replace("\"v\":1", "\"v\":2"), "format version 2"),
            (
                ok.replace("\"inputs\"", "\"texts\""),
                "missing field `inputs`",
            ),
        ] {
            let text = format!("{ok}\n{bad}\n");
            let e = Cassette::from_bytes(Path::new("c.jsonl"), text.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("c.jsonl:2: ") && e.contains(msg),
                "{msg}: {e}"
            );
        }
    }

    #[test]
    fn corrupt_cache_entries_are_misses() {
        let ok = serde_json::json!([[1.0, 2.0]]);
        assert_eq!(vectors_of(&ok, 1), Some(vec![vec![1.0, 2.0]]));
        assert_eq!(vectors_of(&ok, 2), None, "another number of vectors");
        for bad in [
            serde_json::json!({"vectors": [[1.0]]}),
            serde_json::json!([[]]),
            serde_json::json!([["x"]]),
            serde_json::json!([1.0]),
        ] {
            assert_eq!(vectors_of(&bad, 1), None, "{bad}");
        }
        assert_eq!(vectors_of(&serde_json::json!([[1.0], [1.0, 2.0]]), 2), None);
    }
}
