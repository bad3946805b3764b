//! Cassettes: every LLM exchange and embedding call of a run or an eval, one JSON
//! line each, so the run can be replayed later with no model, no key and no network
//! ([`super::replay::ReplayProvider`]).
//!
//! # Format
//!
//! A cassette is a JSON-lines file. Each line is one LLM exchange (or one embedding
//! call, see below):
//!
//! ```json
//! {"v": 1, "seq": 7, "key": "<64 hex digits>", "node": "grade_documents", "item": 2,
//!  "model_name": "grader", "config": {"provider": "openai", "model": "gpt-4o-mini",
//!  "base_url": null, "temperature": 0.0, "max_tokens": null, "structured_output": null,
//!  "params": {}}, "messages": [{"role": "user", "content": "..."}], "schema": {...},
//!  "task": "grade_documents", "inputs": {...}, "output": {...},
//!  "usage": {"input_tokens": 812, "output_tokens": 23, "cost_usd": 0.0001356},
//!  "cached": false, "error": null}
//! ```
//!
//! - `key`: the [`RequestKey`](super::cache::RequestKey) (see [`super::cache`] for exactly what it covers);
//! - `seq`: the order in which the calls were *made* (lines are written when calls
//!   end, so concurrent calls can be written out of order);
//! - `item`: index of the item in a `map` fan-out (absent for `llm` nodes);
//! - `model_name`: the model's name in the spec; `config`: the key's model
//!   configuration ([`KeyConfig`]);
//! - `task` and `inputs`: only for the offline provider, whose answers come from them;
//! - `output` and `usage`: what the provider returned; `cached`: the answer came from
//!   the response cache (its `usage` is the original call's);
//! - `usage_estimated: true` (only when true): the server reported no token counts;
//! - a failure the server answered and billed (`error.kind` `invalid_output`,
//!   `truncated` or `unusable`) carries the `usage` it was billed (a failed attempt
//!   costs like any other); other failures have zero usage;
//! - `error`: `{"kind": "transient"|"permanent"|"unsupported"|"invalid_output"|"truncated"|"unusable",
//!   "message": ..., "reply": ...}` when the call failed for good, after the
//!   provider's own retries (`reply`: what the model sent when it was not in the
//!   asked shape, shown back in the repair turn). A call dropped before it ended is
//!   recorded as a transient failure. Replay returns the same failure.
//!
//! One line is one call as the runtime sees it: retries and per-attempt timeouts
//! happen inside the recorded provider.
//!
//! # Embedding lines
//!
//! The embedding calls of `dense` and `hybrid` retrievers (a query at search time, a
//! batch of corpus chunks while the dense index is built) are lines of their own
//! kind ([`EmbedLine`], written by `super::embeddings::RecordingEmbeddings`):
//!
//! ```json
//! {"v": 1, "kind": "embeddings", "seq": 3, "key": "<64 hex digits>", "model_name": "emb",
//!  "config": {"model": "text-embedding-3-small", "base_url": "https://api.openai.com/v1",
//!  "dimensions": null}, "purpose": "query", "inputs": ["what is a closure?"],
//!  "vectors": [[0.0123, -0.0456, ...]], "input_tokens": 5, "cached": false, "error": null}
//! ```
//!
//! - `key`: [`embedding_key`](super::cache::embedding_key) of `config` and `inputs`;
//! - `purpose`: `query` or `corpus`; `inputs`: the texts, `vectors`: one per input
//!   (absent when the call failed; `error` is then its message);
//! - `input_tokens`: the server's `usage.prompt_tokens` (absent when not reported);
//!   `cached`: the vectors came from the response cache;
//! - `stored: true` (only when true): not a call, the chunk vectors a dense index
//!   took from its vector store on disk (unit length), written so that a cassette
//!   recorded against a warm store replays where there is none (CI).
//!
//! Replay looks each text up by the key of a one-text call, so a batch is answered
//! whatever batches the recording made. A cassette with LLM lines only (every
//! cassette written before embeddings were recorded) loads and replays as before.
//!
//! # Rerank lines
//!
//! The HTTP rerank calls of a retriever's rerank stage are `"kind": "rerank"` lines
//! ([`RerankLine`], written by `super::reranks::RecordingReranks`): `config` (shape,
//! model, base URL), `query`, `documents`, `scores` (one per document, absent when
//! the call failed: `error`), `usage`, `cached`; `key` is [`rerank_key`]. Replay
//! answers a call by its key ([`Cassette::rerank`]).
//!
//! No API key is ever written: the configuration holds no `api_key_env` and no
//! header; provider error messages are redacted by the providers.
//!
//! [`CassetteWriter`] appends lines from any number of concurrent calls through one
//! file handle: each line is written with a single `write_all` under a lock and
//! flushed. [`RecordingProvider`] wraps a provider and records what it answers.
//! [`Cassette::load`] reads a cassette into a hash map from key to the recorded answers.
mod embedding;
mod reader;
mod rerank;

pub(crate) use embedding::EmbedLineOut;
pub use embedding::{EmbedLine, EMBEDDINGS};
pub use reader::{Cassette, CassetteError, Exchange, RecordedVector};
pub(crate) use rerank::RerankLineOut;
pub use rerank::{rerank_key, RecordedRerank, RerankLine, RERANK};

use super::cache::{KeyConfig, KeyMaker};
use super::{LlmRequest, LlmResponse, Message, Provider, ProviderError, Usage};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Version of the line format.
pub const CASSETTE_VERSION: u32 = 1;

/// A recorded failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedError {
    /// `transient`, `permanent`, `unsupported`, `invalid_output`, `truncated` or
    /// `unusable` (see [`ProviderError`]; an unknown kind reads as `permanent`).
    pub kind: String,
    /// The provider's message (for `invalid_output`, what is wrong with the reply).
    pub message: String,
    /// For `invalid_output`: what the model sent, as the repair turn shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
}

impl RecordedError {
    fn from_error(e: &ProviderError) -> RecordedError {
        let (kind, message, reply) = match e {
            ProviderError::Transient(m) => ("transient", m, None),
            ProviderError::Permanent(m) => ("permanent", m, None),
            ProviderError::Unsupported(m) => ("unsupported", m, None),
            ProviderError::InvalidOutput { reply, reason, .. } => {
                ("invalid_output", reason, Some(reply.clone()))
            }
            ProviderError::Truncated { message, .. } => ("truncated", message, None),
            ProviderError::Unusable { message, .. } => ("unusable", message, None),
        };
        RecordedError {
            kind: kind.into(),
            message: message.clone(),
            reply,
        }
    }

    /// The error again; a billed failure (`invalid_output`, `truncated`, `unusable`)
    /// carries `billed`, the recorded usage of its line.
    pub fn to_error(&self, billed: super::Billed) -> ProviderError {
        match self.kind.as_str() {
            "transient" => ProviderError::Transient(self.message.clone()),
            "unsupported" => ProviderError::Unsupported(self.message.clone()),
            "invalid_output" => ProviderError::InvalidOutput {
                reply: self.reply.clone().unwrap_or_default(),
                reason: self.message.clone(),
                billed,
            },
            "truncated" => ProviderError::Truncated {
                message: self.message.clone(),
                billed,
            },
            "unusable" => ProviderError::Unusable {
                message: self.message.clone(),
                billed,
            },
            _ => ProviderError::Permanent(self.message.clone()),
        }
    }
}

/// One exchange as written (borrowed, to write without copying the request).
#[derive(Serialize)]
struct LineOut<'a> {
    v: u32,
    seq: u64,
    key: String,
    node: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<usize>,
    model_name: &'a str,
    config: &'a KeyConfig,
    messages: &'a [Message],
    schema: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inputs: Option<&'a Map<String, Value>>,
    output: Option<&'a Value>,
    usage: Usage,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    usage_estimated: bool,
    cached: bool,
    error: Option<RecordedError>,
}

/// Appends exchanges to a cassette file, one flushed line each, from any number of
/// concurrent calls.
#[derive(Debug)]
pub struct CassetteWriter {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    seq: AtomicU64,
    written: AtomicU64,
}

impl CassetteWriter {
    /// Creates (or truncates) a cassette.
    ///
    /// # Errors
    /// [`CassetteError::Create`]: the I/O error, naming the path.
    pub fn create(path: &Path) -> Result<CassetteWriter, CassetteError> {
        let file = std::fs::File::create(path).map_err(|source| CassetteError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(CassetteWriter {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            seq: AtomicU64::new(0),
            written: AtomicU64::new(0),
        })
    }

    /// Opens a cassette to add exchanges after the existing ones (for resumed evals).
    /// A torn last line (a recording killed mid-write) is cut off first; `seq`
    /// continues after the largest recorded one.
    ///
    /// # Errors
    /// [`CassetteError::Open`]: the I/O error, naming the path.
    pub fn append(path: &Path) -> Result<CassetteWriter, CassetteError> {
        let err = |source: std::io::Error| CassetteError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut next = 0u64;
        let mut keep = 0u64;
        if let Ok(f) = std::fs::File::open(path) {
            let mut r = std::io::BufReader::new(f);
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = r.read_until(b'\n', &mut line).map_err(err)?;
                if n == 0 || line.last() != Some(&b'\n') {
                    break;
                }
                keep += n as u64;
                // LLM and embedding lines alike.
                #[derive(Deserialize)]
                struct Seq {
                    seq: u64,
                }
                if let Ok(l) = serde_json::from_slice::<Seq>(&line) {
                    next = next.max(l.seq + 1);
                }
            }
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(err)?;
        file.set_len(keep).map_err(err)?;
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).map_err(err)?;
        Ok(CassetteWriter {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            seq: AtomicU64::new(next),
            written: AtomicU64::new(0),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Exchanges written by this writer.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Appends one line and flushes it.
    ///
    /// # Errors
    /// [`CassetteError::Encode`], [`CassetteError::Poisoned`] or
    /// [`CassetteError::Write`] (naming the path).
    pub(crate) fn write_line(&self, line: &impl Serialize) -> Result<(), CassetteError> {
        let mut bytes = serde_json::to_vec(line).map_err(CassetteError::Encode)?;
        bytes.push(b'\n');
        let mut f = self.file.lock().map_err(|_| CassetteError::Poisoned)?;
        f.write_all(&bytes)
            .and_then(|()| f.flush())
            .map_err(|source| CassetteError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.written.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Records every exchange of the provider it wraps.
///
/// The inner provider's call is made when [`Provider::call`] is invoked (not when the
/// future first runs), so providers that pick answers in call order keep it. A
/// recording that cannot be written fails the call (`--record` promised every
/// exchange).
pub struct RecordingProvider {
    inner: Arc<dyn Provider>,
    writer: Arc<CassetteWriter>,
    model_name: String,
    keys: KeyMaker,
}

impl RecordingProvider {
    /// Wraps `inner`, the provider of model `model_name` whose key maker is `keys`.
    pub fn new(
        inner: Arc<dyn Provider>,
        writer: Arc<CassetteWriter>,
        model_name: &str,
        keys: KeyMaker,
    ) -> Self {
        RecordingProvider {
            inner,
            writer,
            model_name: model_name.to_string(),
            keys,
        }
    }

    fn line<'a>(
        &'a self,
        seq: u64,
        req: &'a LlmRequest,
        r: Result<&'a LlmResponse, &ProviderError>,
    ) -> LineOut<'a> {
        let task = self.keys.config().keys_task();
        LineOut {
            v: super::cassette::CASSETTE_VERSION,
            seq,
            key: self.keys.key(req).hex(),
            node: &req.node,
            item: req.item,
            model_name: &self.model_name,
            config: self.keys.config(),
            messages: &req.messages,
            schema: req.schema.as_deref(),
            task: if task { req.task.as_deref() } else { None },
            inputs: if task { Some(&req.inputs) } else { None },
            output: r.as_ref().ok().map(|r| &r.output),
            usage: match r {
                Ok(r) => r.usage,
                Err(e) => e.billed().map_or_else(Usage::default, |b| b.usage),
            },
            usage_estimated: match r {
                Ok(r) => r.usage_estimated,
                Err(e) => e.billed().is_some_and(|b| b.usage_estimated),
            },
            cached: match r {
                Ok(r) => r.cached,
                Err(e) => e.billed().is_some_and(|b| b.cached),
            },
            error: r.err().map(RecordedError::from_error),
        }
    }
}

/// Writes an "abandoned" exchange if the call is dropped before it ends (a run
/// dropped mid-call).
struct Abandoned<'a> {
    rec: &'a RecordingProvider,
    req: &'a LlmRequest,
    seq: u64,
    armed: bool,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if self.armed {
            let e = ProviderError::Transient(
                "the call was abandoned before it ended while recording".into(),
            );
            let _ = self
                .rec
                .writer
                .write_line(&self.rec.line(self.seq, self.req, Err(&e)));
        }
    }
}

impl Provider for RecordingProvider {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        let seq = self.writer.next_seq();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut guard = Abandoned {
                rec: self,
                req,
                seq,
                armed: true,
            };
            let r = fut.await;
            guard.armed = false;
            let written = self.writer.write_line(&self.line(seq, req, r.as_ref()));
            match (r, written) {
                (Ok(_), Err(w)) => Err(ProviderError::Permanent(w.to_string())),
                (r, _) => r,
            }
        })
    }
}
