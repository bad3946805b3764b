//! Request keys and the on-disk response cache.
//!
//! # The request key
//!
//! A [`RequestKey`] is the blake3 hash of a canonical JSON document (object keys
//! sorted at every depth, no whitespace) describing everything that decides a
//! provider's answer:
//!
//! ```json
//! {"v": 1,
//!  "config": {"provider": "openai", "model": "gpt-4o-mini", "base_url": "...",
//!             "temperature": 0.0, "max_tokens": 512, "structured_output": "tool_call",
//!             "params": {...every provider param...}},
//!  "messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}],
//!  "schema": {...the output schema...} or null,
//!  "task": "grade_documents", "inputs": {...}     (offline provider only)
//!  "node": "grader"                                (scripted provider only)}
//! ```
//!
//! - `config` ([`KeyConfig`]) is the model configuration as the provider sees it: the
//!   provider kind, the model name the provider knows (not the spec's name for the
//!   model), the base URL (the same model name on two servers is two models), the
//!   temperature, `max_tokens`, the structured-output mode and **all** provider
//!   `params`. It leaves out what does not change an answer: `api_key_env` (and never
//!   the key itself), timeouts, retries, concurrency and rate limits, prices. An eval
//!   run with `--repeats N` adds `"repeat": r` for its repeats r = 1 to N−1 (absent
//!   otherwise, so every other key is unchanged): each repeat has its own answers.
//! - `messages` are the rendered prompts, in order, role and content. A repair turn
//!   sends more messages, so it has its own key.
//! - `schema` is the output schema the provider is asked to follow.
//! - The `offline` provider answers from the node's `task` and evaluated `inputs`, not
//!   from the prompt, so for it both are part of the key: two offline calls that
//!   would be answered differently never share a key even when their prompts are
//!   equal. The `scripted` provider answers per node, so its key holds the node.
//!
//! **Variants.** A variant can only change the spec, and everything of the spec that
//! reaches a provider reaches it through the fields above: a different prompt
//! template or input renders different `messages`; a different model, temperature,
//! `max_tokens`, structured-output mode or parameter changes `config`; a different
//! schema file changes `schema`; a different `top_k` or retriever changes the
//! documents rendered into the messages (and the offline `inputs`). So two A/B arms
//! share a key only for requests that are identical byte for byte, which a model
//! answers the same way at temperature 0.
//!
//! Numbers are written as serde_json writes them: `1` and `1.0` in params are
//! different keys; `-0.0` temperature counts as `0.0`.
//!
//! # The response cache
//!
//! [`ResponseCache`] stores one small JSON file per key under
//! `<cache root>/responses/<first 2 hex digits>/<key hex>.json` (see
//! [`crate::retrieval::cache_root`]). Entries are written to a temporary file in the
//! same directory and renamed into place, so concurrent runs and a `kill -9` never
//! leave a torn entry; an unreadable or corrupt entry counts as a miss and is
//! overwritten by the next answer. Entries are not fsynced: after a power loss an
//! entry may be empty or torn, and then it is a miss like any corrupt entry. [`CachedProvider`] puts the cache in front of a
//! provider. Only answers are cached, never failures.
//!
//! Which models are cached is decided by [`cacheable`]: a network provider (`openai`,
//! `anthropic`) whose requests carry temperature exactly 0, as sent after the
//! `params` merge (`params: {temperature: 0.7}` or `temperature: null`, the server's
//! default, are not cached). Not `scripted` (its answers depend on call
//! order), not `replay` (already an in-memory lookup), and not `offline`: it answers in
//! about the time of a cache read, and its answers depend on the corpus index and on
//! the ragloop version, which the key does not hold (see docs/cassettes.md for the
//! measured figures).
//!
//! Query embeddings of `dense`/`hybrid` retrievers are cached too, under
//! [`embedding_key`] (model, base URL, dimensions and the exact text), by
//! [`super::embeddings::CachedEmbeddings`]: an entry's `output` is the list of
//! vectors, its `usage.input_tokens` the server's `prompt_tokens`. Corpus batches are
//! not (their vectors are stored beside the index).
//!
//! A cache hit returns the stored usage (tokens and the cost of the original call)
//! with [`LlmResponse::cached`] set; the runtime counts it like any answer and adds its
//! cost to `saved_usd` as well (see [`crate::runtime::trace::LlmStats`]).
use super::{LlmRequest, LlmResponse, Provider, ProviderError, Usage};
use crate::spec::types::{ModelSpec, Provider as Kind};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Version of the key layout; part of every key, bumped when the layout changes.
pub const KEY_VERSION: u32 = 1;

/// The model configuration part of a request key (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyConfig {
    /// Provider kind as written in specs (`openai`, `offline`, ...).
    pub provider: String,
    /// The model name as the provider knows it.
    #[serde(default)]
    pub model: Option<String>,
    /// Base URL of the API.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Sampling temperature.
    #[serde(default)]
    pub temperature: f64,
    /// Most tokens generated per call.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// `tool_call` or `json_schema`.
    #[serde(default)]
    pub structured_output: Option<String>,
    /// Every provider parameter.
    #[serde(default)]
    pub params: Map<String, Value>,
    /// The repeat index of an eval run with `--repeats N` (1 to N−1; absent for the
    /// first repeat and outside such an eval, so those keys are unchanged): repeats
    /// of one question get distinct keys, so the cache and cassettes hold each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
}

impl KeyConfig {
    /// The key configuration of a model of the spec.
    pub fn from_model(m: &ModelSpec) -> KeyConfig {
        KeyConfig {
            provider: m.provider.as_str().to_string(),
            model: m.model.clone(),
            base_url: m.base_url.clone(),
            temperature: if m.temperature == 0.0 {
                0.0
            } else {
                m.temperature
            },
            max_tokens: m.max_tokens,
            structured_output: m.structured_output.map(|s| match s {
                crate::spec::types::StructuredMode::ToolCall => "tool_call".to_string(),
                crate::spec::types::StructuredMode::JsonSchema => "json_schema".to_string(),
            }),
            params: m
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            repeat: None,
        }
    }

    /// Whether the key holds the request's task and inputs (the offline provider).
    pub fn keys_task(&self) -> bool {
        self.provider == Kind::Offline.as_str()
    }

    /// Whether the key holds the node name (the scripted provider).
    pub fn keys_node(&self) -> bool {
        self.provider == Kind::Scripted.as_str()
    }

    /// A short human description (`openai gpt-4o-mini at http://..., temperature 0`).
    pub fn describe(&self) -> String {
        let mut s = self.provider.clone();
        if let Some(m) = &self.model {
            s.push(' ');
            s.push_str(m);
        }
        if let Some(u) = &self.base_url {
            s.push_str(" at ");
            s.push_str(u);
        }
        s.push_str(&format!(", temperature {}", self.temperature));
        s
    }

    /// The fields in which `self` and `other` differ, as `name: self vs other` lines.
    pub fn differences(&self, other: &KeyConfig) -> Vec<String> {
        let a = serde_json::to_value(self).unwrap_or(Value::Null);
        let b = serde_json::to_value(other).unwrap_or(Value::Null);
        let mut out = Vec::new();
        if let (Value::Object(a), Value::Object(b)) = (&a, &b) {
            for (k, va) in a {
                let vb = b.get(k).unwrap_or(&Value::Null);
                if canonical_bytes(va) != canonical_bytes(vb) {
                    out.push(format!("{k} {} vs {}", short(va), short(vb)));
                }
            }
        }
        out
    }

    fn canonical(&self) -> Vec<u8> {
        canonical_bytes(&serde_json::to_value(self).unwrap_or(Value::Null))
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

/// A request key: blake3 of the canonical request document (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestKey(pub blake3::Hash);

impl RequestKey {
    /// 64 lowercase hex digits.
    pub fn hex(&self) -> String {
        self.0.to_hex().to_string()
    }

    /// The first 12 hex digits, for messages.
    pub fn short(&self) -> String {
        self.0.to_hex()[..12].to_string()
    }

    /// Parses 64 hex digits.
    ///
    /// # Errors
    /// [`CacheError::BadKey`] when the text is not 64 hex digits.
    pub fn from_hex(s: &str) -> Result<RequestKey, CacheError> {
        blake3::Hash::from_hex(s)
            .map(RequestKey)
            .map_err(|_| CacheError::BadKey {
                text: s.to_string(),
            })
    }
}

impl std::fmt::Display for RequestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.to_hex())
    }
}

/// Computes request keys for one model configuration (the configuration's canonical
/// form is computed once).
#[derive(Clone, Debug)]
pub struct KeyMaker {
    config: KeyConfig,
    canonical: Arc<[u8]>,
}

impl KeyMaker {
    /// A key maker for `config`.
    pub fn new(config: KeyConfig) -> KeyMaker {
        let canonical = config.canonical().into();
        KeyMaker { config, canonical }
    }

    /// The configuration.
    pub fn config(&self) -> &KeyConfig {
        &self.config
    }

    /// The key of `req` under this configuration (`req.model` is not read: the
    /// configuration given at construction stands for it).
    pub fn key(&self, req: &LlmRequest) -> RequestKey {
        // The canonical document is built in one buffer and hashed once: many small
        // hasher updates cost more than the copy.
        let mut b: Vec<u8> = Vec::with_capacity(
            self.canonical.len()
                + 256
                + req
                    .messages
                    .iter()
                    .map(|m| m.content.len() + 32)
                    .sum::<usize>(),
        );
        b.extend_from_slice(b"{\"config\":");
        b.extend_from_slice(&self.canonical);
        if self.config.keys_task() {
            b.extend_from_slice(b",\"inputs\":");
            write_canonical_map(&mut b, &req.inputs);
        }
        b.extend_from_slice(b",\"messages\":[");
        for (i, m) in req.messages.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            b.extend_from_slice(b"{\"content\":");
            write_str(&mut b, &m.content);
            b.extend_from_slice(b",\"role\":");
            write_str(&mut b, &m.role);
            b.push(b'}');
        }
        b.push(b']');
        if self.config.keys_node() {
            b.extend_from_slice(b",\"node\":");
            write_str(&mut b, &req.node);
        }
        b.extend_from_slice(b",\"schema\":");
        match &req.schema {
            Some(s) => write_canonical(&mut b, s),
            None => b.extend_from_slice(b"null"),
        }
        if self.config.keys_task() {
            b.extend_from_slice(b",\"task\":");
            match &req.task {
                Some(t) => write_str(&mut b, t),
                None => b.extend_from_slice(b"null"),
            }
        }
        b.extend_from_slice(format!(",\"v\":{KEY_VERSION}}}").as_bytes());
        RequestKey(blake3::hash(&b))
    }
}

fn write_str(b: &mut Vec<u8>, s: &str) {
    // serde_json's string escaping.
    let _ = serde_json::to_writer(&mut *b, s);
}

/// Writes `v` as canonical JSON (object keys sorted by their UTF-8 bytes at every
/// depth, no whitespace).
pub fn write_canonical(out: &mut impl Write, v: &Value) {
    match v {
        Value::Object(m) => write_canonical_map(out, m),
        Value::Array(a) => {
            let _ = out.write_all(b"[");
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                write_canonical(out, x);
            }
            let _ = out.write_all(b"]");
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

fn write_canonical_map(out: &mut impl Write, m: &Map<String, Value>) {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let _ = out.write_all(b"{");
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            let _ = out.write_all(b",");
        }
        let _ = serde_json::to_writer(&mut *out, k);
        let _ = out.write_all(b":");
        write_canonical(out, v);
    }
    let _ = out.write_all(b"}");
}

/// `v` as canonical JSON bytes (see [`write_canonical`]).
pub fn canonical_bytes(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_canonical(&mut out, v);
    out
}

/// The request key of an embedding call: blake3 of the canonical
/// `{"config": {"base_url", "dimensions", "model"}, "input": [texts], "kind":
/// "embeddings", "v": 1}` (see [`crate::retrieval::EmbedConfig`]: the model as the
/// server knows it, its API root and the requested size; never the spec's name for
/// the model, a key or a header). The `kind` field keeps it apart from every LLM
/// key. The key of one text is the key of a one-text call, so a cassette answers a
/// text whatever batch it was recorded in.
pub fn embedding_key(config: &crate::retrieval::EmbedConfig, texts: &[String]) -> RequestKey {
    let doc = serde_json::json!({
        "config": config,
        "input": texts,
        "kind": "embeddings",
        "v": KEY_VERSION,
    });
    RequestKey(blake3::hash(&canonical_bytes(&doc)))
}

/// Whether the response cache applies to a model: a provider kind registered as
/// cacheable ([`super::KindDef::cache`]: `openai`, `anthropic`) whose requests carry `temperature` exactly 0 — the temperature
/// actually sent, after the `params` merge ([`super::net::sent_temperature`]): a
/// `params.temperature` of 0.7 is not cached, and neither is `temperature: null`
/// (the field removed: the server's default, which is not 0 for the known APIs).
/// Other sampling parameters (`top_p`, `top_k`, `seed`, ...) do not change the
/// eligibility: at temperature 0 decoding is greedy, and they are part of the key
/// anyway. See the module docs for why not the other providers.
pub fn cacheable(m: &ModelSpec) -> bool {
    super::kind(m.provider).cache
        && super::net::sent_temperature(m)
            .and_then(|t| t.as_f64())
            .is_some_and(|t| t == 0.0)
}

/// One stored answer.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    v: u32,
    key: String,
    output: Value,
    usage: Usage,
    #[serde(default)]
    usage_estimated: bool,
    #[serde(default)]
    created: u64,
}

/// The on-disk response cache: one JSON file per request key.
#[derive(Debug)]
pub struct ResponseCache {
    dir: PathBuf,
    hits: AtomicU64,
    misses: AtomicU64,
    warned: AtomicBool,
}

impl ResponseCache {
    /// A cache stored under `dir` (created on the first write).
    pub fn at(dir: impl Into<PathBuf>) -> ResponseCache {
        ResponseCache {
            dir: dir.into(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        }
    }

    /// The default cache, `<cache root>/responses` (see
    /// [`crate::retrieval::cache_root`]); `None` when no cache root can be determined.
    pub fn open_default() -> Option<ResponseCache> {
        crate::retrieval::cache_root().map(|r| ResponseCache::at(r.join("responses")))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of a key.
    pub fn path(&self, key: &RequestKey) -> PathBuf {
        let hex = key.hex();
        self.dir.join(&hex[..2]).join(format!("{hex}.json"))
    }

    /// (hits, misses) counted by [`ResponseCache::get`] so far.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// The stored answer of `key`, marked `cached`. Missing, unreadable and corrupt
    /// entries (bad JSON, another key, another layout version) are misses.
    pub fn get(&self, key: &RequestKey) -> Option<LlmResponse> {
        let found = std::fs::read(self.path(key))
            .ok()
            .and_then(|b| serde_json::from_slice::<Entry>(&b).ok())
            .filter(|e| e.v == KEY_VERSION && e.key == key.hex());
        match found {
            Some(e) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(LlmResponse {
                    output: e.output,
                    usage: e.usage,
                    cached: true,
                    usage_estimated: e.usage_estimated,
                    ..Default::default()
                })
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Stores an answer: written to a temporary file beside the entry, then renamed
    /// over it (atomic on POSIX file systems; not fsynced, see the module docs).
    ///
    /// # Errors
    /// [`CacheError::Write`]: the I/O error, naming the path.
    pub fn put(&self, key: &RequestKey, resp: &LlmResponse) -> Result<(), CacheError> {
        let path = self.path(key);
        let dir = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(dir).map_err(|source| CacheError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let entry = Entry {
            v: KEY_VERSION,
            key: key.hex(),
            output: resp.output.clone(),
            usage: resp.usage,
            usage_estimated: resp.usage_estimated,
            created: crate::clock::unix_ms(),
        };
        let bytes = serde_json::to_vec(&entry).map_err(CacheError::Encode)?;
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let tmp = dir.join(format!(
            ".{}.{}.{}.tmp",
            &entry.key[..16],
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let write = || -> std::io::Result<()> {
            // No fsync: a process killed at any point leaves the old entry or the new
            // one; only a power loss could leave an empty or torn file, which reads
            // as a miss. (An fsync costs ~9 ms here, a thousand times the write.)
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            drop(f);
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|source| {
            let _ = std::fs::remove_file(&tmp);
            CacheError::Write { path, source }
        })
    }

    pub(crate) fn warn_once(&self, msg: &CacheError) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            crate::errln!("ragloop: response cache write failed (the run goes on without caching new answers): {msg}");
        }
    }
}

/// Why a request key does not parse or a cache entry cannot be written. Write
/// failures never fail a call: [`CachedProvider`] warns once and goes on.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The text is not 64 hex digits (it is quoted, shortened, in the message).
    #[error("`{}` is not a 64-digit hex key", short(&Value::from(text.as_str())))]
    BadKey {
        /// The text given.
        text: String,
    },
    /// The entry's directory or file cannot be written.
    #[error("{}: {source}", path.display())]
    Write {
        /// The directory or entry file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The entry cannot be encoded as JSON.
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
}

/// A provider behind the response cache: a hit answers from disk without calling the
/// inner provider; a miss calls it and stores a successful answer.
pub struct CachedProvider {
    inner: Arc<dyn Provider>,
    cache: Arc<ResponseCache>,
    keys: KeyMaker,
}

impl CachedProvider {
    /// Wraps `inner`; `keys` is the key maker of the model it answers.
    pub fn new(inner: Arc<dyn Provider>, cache: Arc<ResponseCache>, keys: KeyMaker) -> Self {
        CachedProvider { inner, cache, keys }
    }
}

impl Provider for CachedProvider {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        Box::pin(async move {
            let key = self.keys.key(req);
            if let Some(hit) = self.cache.get(&key) {
                return Ok(hit);
            }
            let resp = self.inner.call(req).await?;
            if !resp.cached {
                if let Err(e) = self.cache.put(&key, &resp) {
                    self.cache.warn_once(&e);
                }
            }
            Ok(resp)
        })
    }
}

#[cfg(test)]
mod tests;
