//! Embeddings through an OpenAI-compatible `/v1/embeddings` endpoint.
//!
//! Request: `POST {base_url}/embeddings` with `{"model", "input": [texts],
//! "encoding_format": "float"}` plus `"dimensions"` when the retriever asks for a
//! size, and `Authorization: Bearer <key>` when the model names an `api_key_env`.
//! `base_url` follows the OpenAI convention and includes the version segment
//! (default `https://api.openai.com/v1`; Ollama `http://127.0.0.1:11434/v1`, vLLM and
//! llama.cpp server `http://HOST:PORT/v1`).
//!
//! Response: `data[]` of `{index, embedding: [numbers]}`; vectors are put in input
//! order by `index` (position when a server leaves `index` out). A response is
//! refused, naming the model, when it is not JSON, has no `data` list, has another
//! number of vectors than inputs, repeats or skips an index, holds a value that is not
//! a finite number, or vectors of different sizes (or not the size asked for).
//!
//! Calls go through [`crate::http::send`] (retries of timeouts, 408, 429, 5xx with
//! `Retry-After`; other 4xx fail at once with the server's message) with the model's
//! `timeout_secs` (default 60) and `retries` (default 2). Up to the model's
//! `concurrency` (default 4) batches are in flight at once. The key is redacted from
//! every message.
//!
//! An embedder opened with [`EmbedCalls`] ([`Embedder::with_calls`]) sends each call
//! through those layers instead (response cache, cassette record and replay; see
//! `embed_calls.rs`); one built with [`Embedder::from_model`] calls the server.
use super::embed_calls::{EmbedBackend, EmbedCalls, EmbedConfig, EmbedRequest, Embedded, Purpose};
use crate::http::{self, CallPolicy};
use crate::spec::types::{ModelSpec, Provider};
use futures::future::BoxFuture;
use futures::StreamExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The API root used when an embedding model names no `base_url`.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Inputs per request when the retriever sets no `batch_size`.
pub const DEFAULT_BATCH_SIZE: usize = 64;
/// Batches in flight at once when the model sets no `concurrency`.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// A client for one embedding model of a spec. Cheap to share (`Send + Sync`).
#[derive(Clone)]
pub struct Embedder {
    name: String,
    model: String,
    base_url: String,
    endpoint: reqwest::Url,
    key: Option<String>,
    dimensions: Option<u32>,
    batch_size: usize,
    concurrency: usize,
    policy: CallPolicy,
    /// The call layers every call goes through (`None`: straight to the server).
    layers: Option<Arc<dyn EmbedBackend>>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("endpoint", &self.endpoint.as_str())
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .field("dimensions", &self.dimensions)
            .field("batch_size", &self.batch_size)
            .field("layered", &self.layers.is_some())
            .finish()
    }
}

impl Embedder {
    /// The embedder of model `name` (a key of the spec's `models`), reading the key
    /// from the environment variable the model names, now.
    ///
    /// - `dimensions`: vector size to ask for (`None`: the model's own, no parameter
    ///   sent);
    /// - `batch_size`: inputs per request (`None`: [`DEFAULT_BATCH_SIZE`]).
    ///
    /// # Errors
    /// A message naming the model when its provider is not `openai`, it has no
    /// `model`, its `base_url` is not an http(s) URL, its key variable is unset or
    /// empty, or it names neither `base_url` nor `api_key_env` (OpenAI's API needs a
    /// key).
    pub fn from_model(
        name: &str,
        spec: &ModelSpec,
        dimensions: Option<u32>,
        batch_size: Option<u32>,
    ) -> Result<Embedder, String> {
        if spec.provider != Provider::Openai {
            return Err(format!(
                "embedding model `{name}`: provider `{}` cannot compute embeddings (use `provider: openai` with an OpenAI-compatible server)",
                spec.provider.as_str()
            ));
        }
        let model = spec
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| format!("embedding model `{name}` names no `model`"))?;
        let key = match &spec.api_key_env {
            None if spec.base_url.is_none() => {
                return Err(format!(
                    "embedding model `{name}`: OpenAI's API ({OPENAI_BASE_URL}) needs a key: set `api_key_env` (e.g. OPENAI_API_KEY), or `base_url` for a local server"
                ))
            }
            None => None,
            Some(var) => Some(
                crate::secret::read_env(var)
                    .map(|k| k.expose().to_string())
                    .map_err(|_| {
                        format!("embedding model `{name}`: the API key is missing: set the environment variable {var}")
                    })?,
            ),
        };
        let base_url = spec.base_url.as_deref().unwrap_or(OPENAI_BASE_URL);
        let endpoint = super::web::endpoint(base_url, "embeddings")
            .map_err(|e| format!("embedding model `{name}`: {e}"))?;
        let timeout = spec
            .timeout_secs
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(60.0)
            .min(1e6);
        let mut policy = CallPolicy {
            retries: spec.retries.unwrap_or(2),
            timeout: Duration::from_secs_f64(timeout),
            // A batch of 512 vectors of 3072 floats is about 35 MB of JSON.
            max_body_bytes: 256 << 20,
            ..CallPolicy::default()
        };
        policy.secrets.extend(key.clone());
        Ok(Embedder {
            name: name.to_string(),
            model: model.to_string(),
            base_url: base_url.trim().trim_end_matches('/').to_string(),
            endpoint,
            key,
            dimensions,
            batch_size: batch_size.map_or(DEFAULT_BATCH_SIZE, |b| b.max(1) as usize),
            concurrency: spec
                .concurrency
                .map_or(DEFAULT_CONCURRENCY, |c| c.max(1) as usize),
            policy,
            layers: None,
        })
    }

    /// The embedder of model `name`, as [`Embedder::from_model`] builds it, whose calls
    /// go through `calls` (response cache, cassette record, replay). When
    /// `calls.replaying()`, no key is read (`api_key_env` is ignored) and the server is
    /// never called: every call is answered by the layers.
    ///
    /// # Errors
    /// [`Embedder::from_model`]'s, except the missing key when replaying.
    pub fn with_calls(
        name: &str,
        spec: &ModelSpec,
        dimensions: Option<u32>,
        batch_size: Option<u32>,
        calls: &dyn EmbedCalls,
    ) -> Result<Embedder, String> {
        if calls.replaying() {
            let keyless = ModelSpec {
                api_key_env: None,
                base_url: Some(
                    spec.base_url
                        .clone()
                        .unwrap_or_else(|| OPENAI_BASE_URL.to_string()),
                ),
                ..spec.clone()
            };
            let mut e = Embedder::from_model(name, &keyless, dimensions, batch_size)
                .map_err(|e| e.to_string())?;
            e.layers = Some(calls.layer(None));
            Ok(e)
        } else {
            let mut e = Embedder::from_model(name, spec, dimensions, batch_size)
                .map_err(|e| e.to_string())?;
            let live: Arc<dyn EmbedBackend> = Arc::new(e.clone());
            e.layers = Some(calls.layer(Some(live)));
            Ok(e)
        }
    }

    /// Replaces the call policy (tests use short backoffs). Keys stay redacted.
    pub fn with_policy(mut self, mut policy: CallPolicy) -> Embedder {
        policy.secrets.extend(self.key.clone());
        self.policy = policy;
        self
    }

    /// The spec's name of the model (the key of `models`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model as the server knows it.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The API root, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The vector size asked for, if any.
    pub fn dimensions(&self) -> Option<u32> {
        self.dimensions
    }

    /// What decides this embedder's vectors, as request keys and cassettes hold it.
    pub fn config(&self) -> EmbedConfig {
        EmbedConfig {
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            dimensions: self.dimensions,
        }
    }

    /// What identifies the vectors this embedder makes: model, base URL and requested
    /// size. Stored vectors made under another identity are not reused.
    pub fn identity(&self) -> String {
        format!(
            "{}\u{0}{}\u{0}{}",
            self.model,
            self.base_url,
            self.dimensions
                .map_or("native".to_string(), |d| d.to_string())
        )
    }

    fn fail(&self, what: &str) -> String {
        self.policy.redact(&format!(
            "embedding model `{}` ({} at {}): {what}",
            self.name, self.model, self.endpoint
        ))
    }

    /// Embeds `texts`, in batches of `batch_size`, up to `concurrency` batches at
    /// once; `on_batch(done, total)` is called as batches finish (for progress).
    /// Returns one vector per text, in order, all of the same size.
    ///
    /// # Errors
    /// The first failing batch's message (see the module docs).
    pub async fn embed_all(
        &self,
        texts: &[String],
        mut on_batch: impl FnMut(&[Vec<f32>], usize),
    ) -> Result<Vec<Vec<f32>>, String> {
        let batches: Vec<&[String]> = texts.chunks(self.batch_size).collect();
        let mut stream =
            futures::stream::iter(batches.iter().map(|b| self.embed(b))).buffered(self.concurrency);
        let mut out: Vec<Vec<f32>> = Vec::with_capacity(texts.len());
        let mut start = 0usize;
        while let Some(r) = stream.next().await {
            let vs = r?;
            if let (Some(first), Some(v)) = (out.first(), vs.first()) {
                if first.len() != v.len() {
                    return Err(self.fail(&format!(
                        "vectors of different sizes across requests ({} then {})",
                        first.len(),
                        v.len()
                    )));
                }
            }
            on_batch(&vs, start);
            start += vs.len();
            out.extend(vs);
        }
        Ok(out)
    }

    /// Embeds one batch of corpus texts (one request, or one answer of the call
    /// layers). An empty batch makes no request.
    ///
    /// # Errors
    /// See the module docs; every message names the model and the endpoint.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        Ok(self.call(texts, Purpose::Corpus).await?.vectors)
    }

    /// Embeds one query (through the response cache, when the layers hold one).
    ///
    /// # Errors
    /// See the module docs; under replay, a query the cassette does not hold.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>, String> {
        self.call(std::slice::from_ref(&query.to_string()), Purpose::Query)
            .await?
            .vectors
            .pop()
            .ok_or_else(|| self.fail("no vector for the query"))
    }

    /// Whether the layers want the vectors a dense index took from its store (the
    /// cassette recorder: see [`EmbedBackend::wants_stored`]).
    pub fn wants_stored(&self) -> bool {
        self.layers.as_ref().is_some_and(|l| l.wants_stored())
    }

    /// Hands vectors taken from the store to the layers, in batches of `batch_size`
    /// (see [`EmbedBackend::stored`]).
    ///
    /// # Errors
    /// The recorder's write error.
    pub fn stored(&self, texts: &[String], vectors: &[Vec<f32>]) -> Result<(), String> {
        let Some(l) = &self.layers else {
            return Ok(());
        };
        let config = self.config();
        for (t, v) in texts
            .chunks(self.batch_size)
            .zip(vectors.chunks(self.batch_size))
        {
            l.stored(
                EmbedRequest {
                    model_name: &self.name,
                    config: &config,
                    texts: t,
                    purpose: Purpose::Corpus,
                },
                v,
            )?;
        }
        Ok(())
    }

    async fn call(&self, texts: &[String], purpose: Purpose) -> Result<Embedded, String> {
        if texts.is_empty() {
            return Ok(Embedded::default());
        }
        let Some(layers) = &self.layers else {
            let out = self.post(texts).await?;
            if purpose == Purpose::Query {
                super::usage::add_embedding(out.cached, out.input_tokens);
            }
            return Ok(out);
        };
        let config = self.config();
        let out = layers
            .embed(EmbedRequest {
                model_name: &self.name,
                config: &config,
                texts,
                purpose,
            })
            .await?;
        if purpose == Purpose::Query {
            super::usage::add_embedding(out.cached, out.input_tokens);
        }
        // Whatever answered (a cassette, a cache entry), the shape is the server's.
        if out.vectors.len() != texts.len() {
            return Err(self.fail(&format!(
                "{} vector(s) for {} input(s)",
                out.vectors.len(),
                texts.len()
            )));
        }
        Ok(out)
    }

    /// One request to the server.
    async fn post(&self, texts: &[String]) -> Result<Embedded, String> {
        let mut body = serde_json::json!({
            "model": self.model,
            "input": texts,
            "encoding_format": "float",
        });
        if let Some(d) = self.dimensions {
            body["dimensions"] = Value::from(d);
        }
        let body = body.to_string();
        let resp = http::send(
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
        )
        .await
        .map_err(|e| self.fail(&e.to_string()))?;
        let (vectors, input_tokens) =
            parse_body(&resp.body, texts.len(), self.dimensions).map_err(|e| self.fail(&e))?;
        Ok(Embedded {
            vectors,
            input_tokens,
            cached: false,
        })
    }
}

/// The server itself, innermost of the call layers.
impl EmbedBackend for Embedder {
    fn embed<'a>(&'a self, req: EmbedRequest<'a>) -> BoxFuture<'a, Result<Embedded, String>> {
        Box::pin(self.post(req.texts))
    }
}

/// The vectors of an embeddings response body for `expected` inputs, in input order.
///
/// # Errors
/// What is wrong with the body (see the module docs).
pub fn parse_embeddings(
    body: &str,
    expected: usize,
    dimensions: Option<u32>,
) -> Result<Vec<Vec<f32>>, String> {
    parse_body(body, expected, dimensions).map(|(v, _)| v)
}

/// [`parse_embeddings`], and `usage.prompt_tokens` when the server reported it.
fn parse_body(
    body: &str,
    expected: usize,
    dimensions: Option<u32>,
) -> Result<(Vec<Vec<f32>>, Option<u64>), String> {
    let trimmed = body.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err("empty response body (expected JSON with a `data` list)".into());
    }
    let v: Value = serde_json::from_str(trimmed).map_err(|e| {
        if trimmed.starts_with('<') {
            format!(
                "the server answered with an HTML page, not JSON (is base_url the API root, ending in /v1?): {}",
                http::server_message(trimmed)
            )
        } else {
            format!("the response is not JSON ({e}): {}", http::server_message(trimmed))
        }
    })?;
    let data = match v.get("data") {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(format!(
                "`data` is {}, not a list",
                crate::json::kind(other)
            ))
        }
        None if v.get("error").is_some() => {
            return Err(format!(
                "the server reported an error: {}",
                http::server_message(trimmed)
            ))
        }
        None => return Err("the response has no `data` list".into()),
    };
    if data.len() != expected {
        return Err(format!(
            "the server returned {} vector(s) for {expected} input(s)",
            data.len()
        ));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
    let mut dim: Option<usize> = None;
    for (pos, item) in data.iter().enumerate() {
        let index = match item.get("index") {
            None | Some(Value::Null) => pos,
            Some(i) => match i.as_u64() {
                Some(i) if (i as usize) < expected => i as usize,
                _ => {
                    return Err(format!(
                        "`data[{pos}].index` is {i}, not an input position (0..{expected})"
                    ))
                }
            },
        };
        if out[index].is_some() {
            return Err(format!("`data` holds index {index} twice"));
        }
        let emb = match item.get("embedding") {
            Some(Value::Array(a)) => a,
            Some(Value::String(_)) => {
                return Err(format!(
                    "`data[{pos}].embedding` is a string (base64?); the server ignored `encoding_format: float`"
                ))
            }
            Some(other) => {
                return Err(format!(
                    "`data[{pos}].embedding` is {}, not a list of numbers",
                    crate::json::kind(other)
                ))
            }
            None => return Err(format!("`data[{pos}]` has no `embedding`")),
        };
        if emb.is_empty() {
            return Err(format!("`data[{pos}].embedding` is empty"));
        }
        let mut vec = Vec::with_capacity(emb.len());
        for (j, x) in emb.iter().enumerate() {
            let f = x
                .as_f64()
                .filter(|f| f.is_finite())
                .map(|f| f as f32)
                .filter(|f| f.is_finite())
                .ok_or_else(|| {
                    format!("`data[{pos}].embedding[{j}]` is {x}, not a finite number")
                })?;
            vec.push(f);
        }
        match dim {
            None => dim = Some(vec.len()),
            Some(d) if d != vec.len() => {
                return Err(format!(
                    "vectors of different sizes in one response ({d} and {} at data[{pos}])",
                    vec.len()
                ))
            }
            Some(_) => {}
        }
        out[index] = Some(vec);
    }
    if let (Some(want), Some(got)) = (dimensions, dim) {
        if want as usize != got {
            return Err(format!(
                "asked for {want} dimensions, the server returned {got} (does the model support `dimensions`?)"
            ));
        }
    }
    let tokens = v
        .get("usage")
        .and_then(|u| u.get("prompt_tokens"))
        .and_then(Value::as_u64);
    Ok((out.into_iter().flatten().collect(), tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_index() {
        let body = r#"{"object":"list","data":[
            {"object":"embedding","index":1,"embedding":[0.0,1.0]},
            {"object":"embedding","index":0,"embedding":[1.0,0.5]}],
            "model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}"#;
        assert_eq!(
            parse_embeddings(body, 2, None).unwrap(),
            vec![vec![1.0, 0.5], vec![0.0, 1.0]]
        );
        // No index: position.
        let body = r#"{"data":[{"embedding":[1]},{"embedding":[2]}]}"#;
        assert_eq!(
            parse_embeddings(body, 2, None).unwrap(),
            vec![vec![1.0], vec![2.0]]
        );
    }

    #[test]
    fn refuses_bad_bodies() {
        let e = |b: &str, n: usize| parse_embeddings(b, n, None).unwrap_err();
        assert!(e("", 1).contains("empty response body"));
        assert!(e("<html>502</html>", 1).contains("HTML page"));
        assert!(e(r#"{"data":[{"embedding":[1]}]}"#, 2).contains("1 vector(s) for 2 input(s)"));
        assert!(
            e(r#"{"data":[{"embedding":[1,2]},{"embedding":[1]}]}"#, 2).contains("different sizes")
        );
        assert!(e(r#"{"data":[{"embedding":[1,"x"]}]}"#, 1)
            .contains("embedding[1]` is \"x\", not a finite number"));
        assert!(e(r#"{"data":[{"embedding":[1,null]}]}"#, 1).contains("not a finite number"));
        assert!(e(r#"{"data":[{"embedding":[1e39]}]}"#, 1).contains("not a finite number"));
        assert!(e(r#"{"data":[{"embedding":"AAAA"}]}"#, 1).contains("base64"));
        assert!(e(
            r#"{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}"#,
            2
        )
        .contains("twice"));
        assert!(e(r#"{"data":[{"index":5,"embedding":[1]}]}"#, 1).contains("not an input position"));
        assert!(
            e(r#"{"error":{"message":"bad model"}}"#, 1).contains("reported an error: bad model")
        );
        assert!(e(r#"{"object":"list"}"#, 1).contains("no `data` list"));
        assert!(e(r#"{"data":[{"embedding":[]}]}"#, 1).contains("is empty"));
        assert!(
            parse_embeddings(r#"{"data":[{"embedding":[1,2]}]}"#, 1, Some(3))
                .unwrap_err()
                .contains("asked for 3 dimensions")
        );
    }
}
