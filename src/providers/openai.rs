//! The `openai` provider: any OpenAI-compatible Chat Completions server (OpenAI,
//! vLLM, Ollama, llama.cpp server, LM Studio, Groq, Together, ...).
//!
//! **Endpoint.** `POST {base_url}/chat/completions`, `base_url` defaulting to
//! `https://api.openai.com/v1`. `base_url` is taken as users type it: a trailing
//! slash is ignored; a bare host (`http://localhost:11434`, no path) gets `/v1`; a
//! URL already ending in `/chat/completions` is used as is; any other path
//! (`.../v1`, `https://api.groq.com/openai/v1`, a proxy prefix) gets
//! `/chat/completions` appended.
//!
//! **Request.** `model`, `messages` in order (system first, then user; a repair
//! turn appends the rejected answer as `assistant` and the correction as `user`),
//! `temperature`, `max_tokens` when set, then the model's `params` merged at the top
//! level (a `null` param removes a field, e.g. `temperature: null`).
//!
//! **Structured output** (`structured_output`, default `json_schema`, see
//! [`DEFAULT_MODE`]):
//! - `tool_call`: `tools: [{type: function, function: {name, description,
//!   parameters: schema}}]` and `tool_choice: "required"` (one function is offered,
//!   so this forces that function, as the named form would; llama.cpp's server
//!   ignores the named form, and enforces `"required"` only as "a call must
//!   come": text may precede it); the name is the schema's `title` (else
//!   `respond`);
//! - `json_schema`: `response_format: {type: json_schema, json_schema: {name,
//!   schema, strict: true}}`, the schema adapted to strict mode (every property
//!   required, optional ones nullable, `additionalProperties: false`; the nulls are
//!   removed again before validation). A schema that cannot be strict (a free-form
//!   object) is sent with `strict: false`.
//!
//! **Lenient parsing.** Tool arguments as a JSON string or an object; the legacy
//! `function_call`; content as a string or an array of text parts; a missing or
//! unknown `finish_reason`; missing `usage` (estimated from the text, about 4
//! characters a token, and flagged as estimated); unknown fields ignored. A model
//! that ignores the forced tool and answers with a JSON object as text is accepted
//! (the runtime validates it like any output).
//!
//! **Failures** (each names the model and, through the runtime, the node):
//!
//! | what | kind |
//! |---|---|
//! | timeout, connection reset, 408/429/5xx, empty 200 body, JSON cut short, a 200 with an overloaded/server error object | transient: retried `retries` times |
//! | other 4xx (the server's message shown), HTML page, non-JSON body, a 200 with another error object, no `choices`, a refusal, a content filter stop | permanent |
//! | `finish_reason: length` on structured output (whatever the tool call holds), or with no text | truncated ([`ProviderError::Truncated`]), checked first: no repair turn, no retry (raise `max_tokens`) |
//! | prose instead of the forced tool call, arguments that are not JSON, a call to a function that was not offered | invalid output: a repair turn (prose or an empty reply names the likely cause, a server that does not honour the forcing, and the `structured_output` setting that fixes it) |
//!
//! **Streaming.** A text call someone listens to ([`super::streams`]) is sent with
//! `stream: true` and `stream_options: {include_usage: true}` and read as it
//! arrives (see `openai/stream.rs`): each content delta is a token event, and the
//! chunks are folded into the equivalent non-streamed body, parsed as above. A
//! stream cut before `data: [DONE]` is a transient failure, retried only while no
//! token was delivered (after that it is permanent: shown tokens cannot be taken
//! back); the body limit and the per-attempt timeout cover the whole stream.
//!
//! A failure of a reply that reports its token usage is billed: a truncated or
//! rejected reply carries its usage (the server's, else estimated), and a permanent
//! failure of a 2xx body reporting `usage` (a refusal, a 200 with an error object)
//! becomes [`ProviderError::Unusable`] carrying it; the runtime counts both.
mod stream;

use super::net;
use super::{
    Billed, ConfigError, EndpointError, LlmRequest, LlmResponse, Provider, ProviderError, Usage,
};
use crate::http::{self, HttpError, HttpResponse};
use crate::spec::types::{ModelSpec, StructuredMode};
use futures::future::BoxFuture;
use serde_json::{json, Map, Value};

/// Default `base_url` of the `openai` provider.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The structured-output mode of a model that sets no `structured_output`:
/// `response_format` json_schema, the mechanism the servers we name enforce most
/// widely (a grammar or constrained decoding on OpenAI, vLLM, llama.cpp, Ollama and
/// LM Studio; see docs/providers.md, "What is sent, per server").
pub const DEFAULT_MODE: StructuredMode = StructuredMode::JsonSchema;

/// An OpenAI-compatible Chat Completions client for one model of a spec.
#[derive(Debug)]
pub struct OpenAiProvider {
    conn: net::Connection,
    mode: StructuredMode,
}

/// The Chat Completions endpoint for a `base_url` (see the module docs).
///
/// # Errors
/// [`EndpointError`] when `base_url` is not an http(s) URL, or carries a query or
/// fragment.
pub fn endpoint(name: &str, base_url: Option<&str>) -> Result<String, EndpointError> {
    let url = net::parse_base(name, base_url.unwrap_or(DEFAULT_BASE_URL))?;
    let path = url.path().trim_end_matches('/');
    Ok(if path.ends_with("/chat/completions") {
        let mut u = url.clone();
        u.set_path(path);
        u.to_string()
    } else if path.is_empty() {
        net::join(&url, "v1/chat/completions")
    } else {
        net::join(&url, "chat/completions")
    })
}

impl OpenAiProvider {
    /// The provider of model `name` (its key read from the environment, see
    /// [`net::api_key`](super::api_key)).
    ///
    /// # Errors
    /// A [`ConfigError`] naming the model: no `model` name, a bad `base_url`, a
    /// missing key, a `params` key that would replace the request's fixed fields.
    pub fn new(name: &str, spec: &ModelSpec) -> Result<OpenAiProvider, ConfigError> {
        Ok(OpenAiProvider {
            conn: net::Connection::new(
                name,
                spec,
                "openai",
                "the server's model name, e.g. gpt-4o-mini",
                endpoint,
            )?,
            mode: spec.structured_output.unwrap_or(DEFAULT_MODE),
        })
    }

    /// The URL requests go to.
    pub fn endpoint(&self) -> &str {
        &self.conn.endpoint
    }

    /// The JSON body sent for `req`.
    pub fn body(&self, req: &LlmRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.conn.model));
        body.insert(
            "messages".into(),
            Value::Array(
                req.messages
                    .iter()
                    .map(|m| json!({"role": m.role, "content": m.content}))
                    .collect(),
            ),
        );
        if let Some(t) = net::sent_temperature(&self.conn.spec) {
            body.insert("temperature".into(), t);
        }
        if let Some(n) = self.conn.spec.max_tokens {
            body.insert("max_tokens".into(), json!(n));
        }
        if let Some(schema) = &req.schema {
            let name = net::tool_name(schema);
            match self.mode {
                StructuredMode::ToolCall => {
                    body.insert(
                        "tools".into(),
                        json!([{"type": "function", "function": {
                            "name": name,
                            "description": net::tool_description(schema),
                            "parameters": net::wire_schema(schema),
                        }}]),
                    );
                    // One function is offered, so `"required"` means "call this one",
                    // like the named form, which llama.cpp's server ignores (treats
                    // as `auto`) while its grammar enforces `"required"` (as "a call
                    // must come").
                    body.insert("tool_choice".into(), json!("required"));
                }
                StructuredMode::JsonSchema => {
                    let (schema, strict) = match net::strict_schema(schema) {
                        Some(s) => (s, true),
                        None => (net::wire_schema(schema), false),
                    };
                    body.insert(
                        "response_format".into(),
                        json!({"type": "json_schema", "json_schema": {
                            "name": name, "schema": schema, "strict": strict,
                        }}),
                    );
                }
            }
        }
        let params: Map<String, Value> = self
            .conn
            .spec
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        net::merge_params(&mut body, &params);
        Value::Object(body)
    }

    fn what(&self) -> String {
        format!(
            "openai model `{}` ({})",
            self.conn.model, self.conn.endpoint
        )
    }

    /// Turns a 2xx response into the call's result (see the module docs).
    fn parse(
        &self,
        req: &LlmRequest,
        resp: &HttpResponse,
    ) -> Result<Result<LlmResponse, ProviderError>, HttpError> {
        let v = net::json_body(resp)?;
        let permanent = |message: String| HttpError::Permanent {
            status: Some(resp.status),
            message,
        };
        let choice = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| {
                permanent(format!(
                    "the response has no `choices`: {}",
                    net::clip(&v.to_string(), 200)
                ))
            })?;
        let msg = choice.get("message").or_else(|| choice.get("delta"));
        let finish = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .unwrap_or("");
        let text = msg.and_then(|m| m.get("content")).map(content_text);
        if let Some(r) = msg
            .and_then(|m| m.get("refusal"))
            .and_then(Value::as_str)
            .filter(|r| !r.trim().is_empty())
        {
            return Err(permanent(format!(
                "the model refused: {}",
                net::clip(r, 300)
            )));
        }
        if finish == "content_filter" {
            return Err(permanent(
                "the reply was stopped by the server's content filter (finish_reason content_filter)".into(),
            ));
        }
        // Truncation first, before any reading of the reply: a cut structured reply
        // is not a schema failure (a text answer with text is kept).
        if finish == "length"
            && (req.schema.is_some() || text.as_deref().is_none_or(|t| t.trim().is_empty()))
        {
            let raw = format!(
                "{}{}",
                text.as_deref().unwrap_or(""),
                msg.and_then(|m| m.get("tool_calls"))
                    .map_or_else(String::new, Value::to_string)
            );
            let (usage, usage_estimated) = self.usage(req, &v, &raw);
            return Ok(Err(net::truncated(
                &self.conn,
                &self.what(),
                "finish_reason length",
                &["max_completion_tokens", "max_tokens"],
                None,
                Billed {
                    usage,
                    usage_estimated,
                    cached: false,
                },
            )));
        }
        let (output, out_text) = match &req.schema {
            None => {
                let t = text.unwrap_or_default();
                (Value::String(t.clone()), t)
            }
            Some(schema) => {
                let name = net::tool_name(schema);
                match self.structured(msg, text, &name, schema) {
                    Ok((out, raw)) => (out, raw),
                    Err(e) => {
                        return Ok(Err(net::bill_rejected(e, |reply| {
                            self.usage(req, &v, reply)
                        })))
                    }
                }
            }
        };
        let (usage, usage_estimated) = self.usage(req, &v, &out_text);
        Ok(Ok(LlmResponse {
            output,
            usage,
            usage_estimated,
            ..Default::default()
        }))
    }

    /// The usage of a reply: the server's counts, else an estimate from the prompt and
    /// `out_text` (flagged as estimated).
    fn usage(&self, req: &LlmRequest, v: &Value, out_text: &str) -> (Usage, bool) {
        let usage = v.get("usage");
        net::reply_usage(
            &self.conn.spec,
            req,
            net::count(usage.and_then(|u| u.get("prompt_tokens"))),
            net::count(usage.and_then(|u| u.get("completion_tokens"))),
            0,
            out_text,
        )
    }

    /// The structured output of a reply, and its raw text (for token estimates).
    fn structured(
        &self,
        msg: Option<&Value>,
        text: Option<String>,
        name: &str,
        schema: &Value,
    ) -> Result<(Value, String), ProviderError> {
        let mut calls: Vec<(String, &Value)> = msg
            .and_then(|m| m.get("tool_calls"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| {
                        let f = c.get("function")?;
                        Some((f.get("name")?.as_str()?.to_string(), f.get("arguments")?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(f) = msg.and_then(|m| m.get("function_call")) {
            if let (Some(n), Some(a)) = (f.get("name").and_then(Value::as_str), f.get("arguments"))
            {
                calls.push((n.to_string(), a));
            }
        }
        let mut out = if let Some((_, args)) = calls.iter().find(|(n, _)| n == name) {
            match args {
                Value::String(s) => match serde_json::from_str::<Value>(s.trim()) {
                    Ok(v) => v,
                    Err(e) => {
                        return Err(ProviderError::InvalidOutput {
                            reply: s.clone(),
                            reason: format!(
                                "the arguments of the `{name}` call are not JSON ({e})"
                            ),
                            billed: Billed::default(),
                        })
                    }
                },
                other => (*other).clone(),
            }
        } else if let Some((other, args)) = calls.first() {
            return Err(ProviderError::InvalidOutput {
                reply: format!("{other}({})", args_text(args)),
                reason: format!(
                    "the model called the function `{other}`, which was not offered; the only function is `{name}`"
                ),
                billed: Billed::default(),
            });
        } else {
            let t = text.unwrap_or_default();
            if t.trim().is_empty() {
                return Err(ProviderError::InvalidOutput {
                    reply: String::new(),
                    reason: format!(
                        "the reply is empty: no `{name}` call and no text{}",
                        self.unforced_hint()
                    ),
                    billed: Billed::default(),
                });
            }
            match serde_json::from_str::<Value>(strip_fence(&t)) {
                Ok(v) if v.is_object() => v,
                _ => {
                    let reason = match self.mode {
                        StructuredMode::ToolCall => format!(
                            "the model answered in prose instead of calling the function `{name}`{}",
                            self.unforced_hint()
                        ),
                        StructuredMode::JsonSchema => format!(
                            "the reply is not a JSON object as the response format requires{}",
                            self.unforced_hint()
                        ),
                    };
                    return Err(ProviderError::InvalidOutput {
                        reply: t,
                        reason,
                        billed: Billed::default(),
                    });
                }
            }
        };
        if self.mode == StructuredMode::JsonSchema {
            net::drop_optional_nulls(schema, &mut out);
        }
        let raw = out.to_string();
        Ok((out, raw))
    }
}

impl OpenAiProvider {
    /// Why a forced reply can come back unforced, and the setting that fixes it: the
    /// request forced the shape, so a reply in another shape means the server did not
    /// enforce it (see docs/providers.md, "What is sent, per server").
    fn unforced_hint(&self) -> String {
        let m = &self.conn.name;
        match self.mode {
            StructuredMode::ToolCall => format!(
                ", although the request forced the call (tool_choice \"required\"); the server may not honour tool_choice (Ollama ignores it): set models.{m}.structured_output: json_schema in the spec, or pass --override models.{m}.structured_output=json_schema"
            ),
            StructuredMode::JsonSchema => format!(
                ", although the request forced it (response_format json_schema); the server may not honour response_format: set models.{m}.structured_output: tool_call in the spec, or pass --override models.{m}.structured_output=tool_call"
            ),
        }
    }

    /// A server that refuses the structured-output mode itself (a 4xx naming
    /// `response_format`/`json_schema`, or `tool_choice`/`tools`) gets the setting
    /// that switches to the other mode appended to its message.
    fn refused_mode_hint(&self, req: &LlmRequest, e: ProviderError) -> ProviderError {
        let ProviderError::Permanent(msg) = e else {
            return e;
        };
        let lower = msg.to_ascii_lowercase();
        let m = &self.conn.name;
        let names = |words: &[&str]| words.iter().any(|w| lower.contains(w));
        let hint = match self.mode {
            _ if req.schema.is_none() || !lower.contains("http 4") => None,
            StructuredMode::JsonSchema if names(&["response_format", "json_schema"]) => Some(format!(
                "; the server or model may not support response_format json_schema: set models.{m}.structured_output: tool_call in the spec, or pass --override models.{m}.structured_output=tool_call"
            )),
            StructuredMode::ToolCall if names(&["tool_choice", "tools"]) => Some(format!(
                "; the server or model may not support a forced tool call: set models.{m}.structured_output: json_schema in the spec, or pass --override models.{m}.structured_output=json_schema"
            )),
            _ => None,
        };
        ProviderError::Permanent(msg + hint.as_deref().unwrap_or(""))
    }
}

fn args_text(v: &Value) -> String {
    net::clip(
        &v.as_str().map_or_else(|| v.to_string(), str::to_string),
        300,
    )
}

/// A JSON reply wrapped in a Markdown code fence, unwrapped.
pub(crate) fn strip_fence(t: &str) -> &str {
    let t = t.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// `content` as a string, or the text parts of an array joined.
fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                other => other.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

pub(crate) fn http_error(what: &str, e: HttpError) -> ProviderError {
    match e {
        HttpError::Transient { message, .. } => {
            ProviderError::Transient(format!("{what}: {message}"))
        }
        HttpError::Permanent { message, .. } => {
            ProviderError::Permanent(format!("{what}: {message}"))
        }
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn retries_itself(&self) -> bool {
        true
    }

    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        Box::pin(async move {
            let streaming = super::streams(req);
            let mut body = self.body(req);
            if streaming {
                body["stream"] = json!(true);
                body["stream_options"] = json!({"include_usage": true});
            }
            let body = body.to_string();
            let build = || {
                let b = http::client()
                    .post(&self.conn.endpoint)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone());
                match &self.conn.key {
                    Some(k) => b.bearer_auth(k.expose()),
                    None => b,
                }
            };
            let what = self.what();
            let check = |r: HttpResponse| {
                net::bill_unusable(&what, &r, self.parse(req, &r), |v| {
                    let u = v.get("usage")?;
                    let counted = ["prompt_tokens", "completion_tokens"]
                        .iter()
                        .any(|k| net::count(u.get(*k)).is_some());
                    counted.then(|| self.usage(req, v, ""))
                })
            };
            let sent = if streaming {
                let new = || net::stream::Sse::new(stream::Chunks::default());
                http::send_streamed(build, &self.conn.policy, new, check).await
            } else {
                http::send_checked(build, &self.conn.policy, check).await
            };
            sent.map_err(|e| self.refused_mode_hint(req, http_error(&self.what(), e)))?
        })
    }
}
