//! The `anthropic` provider: the Messages API.
//!
//! **Endpoint.** `POST {base_url}/v1/messages`, `base_url` defaulting to
//! `https://api.anthropic.com`; a trailing slash is ignored, a `base_url` already
//! ending in `/v1` gets `/messages`, one ending in `/v1/messages` is used as is.
//! Headers: `x-api-key` (when a key is configured, see
//! [`api_key`](super::api_key)), `anthropic-version: 2023-06-01`.
//!
//! **Request.** `model`, `max_tokens` (the model's `max_tokens`, default
//! [`DEFAULT_MAX_TOKENS`]; the API requires it), the system messages joined into the
//! top-level `system` field, the other messages in order (user first; a repair turn
//! appends the rejected answer as `assistant` and the correction as `user`),
//! `temperature` (clamped to the API's 0..1), then the model's `params` merged at the
//! top level. Structured output is always a forced tool: `tools: [{name,
//! description, input_schema}]` and `tool_choice: {type: "tool", name}` (the
//! `structured_output` setting does not apply).
//!
//! **Response.** The `tool_use` block named as offered gives the output; text
//! blocks give text output. `usage.input_tokens` (plus cache creation and cache read
//! tokens) and `usage.output_tokens`; missing usage is estimated and flagged.
//!
//! **Failures** as for [`super::openai`]: 408/429/5xx and 529 "overloaded" (also as
//! a 200 carrying an `overloaded_error`) are retried; `stop_reason: max_tokens` on
//! structured output (whatever the `tool_use` block holds, often an empty `input`),
//! or with no text, is a [`ProviderError::Truncated`] checked before anything else
//! (no repair turn, no retry: raise `max_tokens`); prose instead of the tool call, or
//! a `tool_use` of another name, goes to a repair turn. Failed replies are billed as
//! for `openai`.
//!
//! **Streaming.** A text call someone listens to ([`super::streams`]) is sent with
//! `stream: true` and read as Server-Sent Events (see `anthropic/stream.rs`): each
//! `text_delta` is a token event, and the events are folded into the equivalent
//! non-streamed body, parsed as above. An `error` event, or a stream cut before
//! `message_stop`, fails the attempt; it is retried (when transient) only while no
//! token was delivered, as for `openai`.
mod stream;

use super::net;
use super::openai::{http_error, strip_fence};
use super::{
    Billed, ConfigError, EndpointError, LlmRequest, LlmResponse, Provider, ProviderError, Usage,
};
use crate::http::{self, HttpError, HttpResponse};
use crate::spec::types::ModelSpec;
use futures::future::BoxFuture;
use serde_json::{json, Map, Value};

/// Default `base_url` of the `anthropic` provider.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// `max_tokens` sent when the model config sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The `anthropic-version` header.
pub const API_VERSION: &str = "2023-06-01";

/// A Messages API client for one model of a spec.
#[derive(Debug)]
pub struct AnthropicProvider {
    conn: net::Connection,
}

/// The Messages endpoint for a `base_url` (see the module docs).
///
/// # Errors
/// [`EndpointError`] when `base_url` is not an http(s) URL, or carries a query or
/// fragment.
pub fn endpoint(name: &str, base_url: Option<&str>) -> Result<String, EndpointError> {
    let url = net::parse_base(name, base_url.unwrap_or(DEFAULT_BASE_URL))?;
    let path = url.path().trim_end_matches('/');
    Ok(if path.ends_with("/v1/messages") {
        let mut u = url.clone();
        u.set_path(path);
        u.to_string()
    } else if path.ends_with("/v1") {
        net::join(&url, "messages")
    } else {
        net::join(&url, "v1/messages")
    })
}

impl AnthropicProvider {
    /// The provider of model `name`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the model: no `model` name, a bad `base_url`, a
    /// missing key, a `params` key that would replace the request's fixed fields.
    pub fn new(name: &str, spec: &ModelSpec) -> Result<AnthropicProvider, ConfigError> {
        Ok(AnthropicProvider {
            conn: net::Connection::new(
                name,
                spec,
                "anthropic",
                "e.g. claude-3-5-haiku-latest",
                endpoint,
            )?,
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
            "max_tokens".into(),
            json!(self.conn.spec.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        );
        let system: Vec<&str> = req
            .messages
            .iter()
            .filter(|m| m.role == "system")
            .map(|m| m.content.as_str())
            .collect();
        if !system.is_empty() {
            body.insert("system".into(), json!(system.join("\n\n")));
        }
        // The API wants alternating turns starting with `user`: consecutive messages
        // of one role are joined.
        let mut messages: Vec<(String, String)> = Vec::new();
        for m in req.messages.iter().filter(|m| m.role != "system") {
            let role = if m.role == "assistant" {
                "assistant"
            } else {
                "user"
            };
            match messages.last_mut() {
                Some((r, c)) if r == role => {
                    c.push_str("\n\n");
                    c.push_str(&m.content);
                }
                _ => messages.push((role.to_string(), m.content.clone())),
            }
        }
        body.insert(
            "messages".into(),
            Value::Array(
                messages
                    .into_iter()
                    .map(|(role, content)| json!({"role": role, "content": content}))
                    .collect(),
            ),
        );
        if let Some(t) = net::sent_temperature(&self.conn.spec) {
            body.insert("temperature".into(), t);
        }
        if let Some(schema) = &req.schema {
            let name = net::tool_name(schema);
            body.insert(
                "tools".into(),
                json!([{
                    "name": name,
                    "description": net::tool_description(schema),
                    "input_schema": net::wire_schema(schema),
                }]),
            );
            body.insert("tool_choice".into(), json!({"type": "tool", "name": name}));
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
            "anthropic model `{}` ({})",
            self.conn.model, self.conn.endpoint
        )
    }

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
        let blocks = v.get("content").and_then(Value::as_array).ok_or_else(|| {
            permanent(format!(
                "the response has no `content` list: {}",
                net::clip(&v.to_string(), 200)
            ))
        })?;
        let stop = v.get("stop_reason").and_then(Value::as_str).unwrap_or("");
        if stop == "refusal" {
            return Err(permanent(
                "the model refused to answer (stop_reason refusal)".into(),
            ));
        }
        let text: String = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("");
        // Truncation first, before any reading of the tool call: a cut structured
        // reply (often a `tool_use` with an empty `input`) is not a schema failure.
        // A text answer with text is kept.
        if stop == "max_tokens" && (req.schema.is_some() || text.trim().is_empty()) {
            let inputs: String = blocks
                .iter()
                .filter_map(|b| b.get("input"))
                .map(Value::to_string)
                .collect();
            let (usage, usage_estimated) = self.usage(req, &v, &format!("{text}{inputs}"));
            return Ok(Err(net::truncated(
                &self.conn,
                &self.what(),
                "stop_reason max_tokens",
                &["max_tokens"],
                Some(DEFAULT_MAX_TOKENS),
                Billed {
                    usage,
                    usage_estimated,
                    cached: false,
                },
            )));
        }
        let (output, raw) = match &req.schema {
            None => (Value::String(text.clone()), text),
            Some(schema) => {
                let name = net::tool_name(schema);
                let uses: Vec<(&str, &Value)> = blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                    .filter_map(|b| Some((b.get("name")?.as_str()?, b.get("input")?)))
                    .collect();
                let found = if let Some((_, input)) = uses.iter().find(|(n, _)| *n == name) {
                    match input {
                        Value::String(s) => serde_json::from_str::<Value>(s.trim()).map_err(|e| {
                            ProviderError::InvalidOutput {
                                reply: s.clone(),
                                reason: format!(
                                    "the input of the `{name}` tool call is not JSON ({e})"
                                ),
                                billed: Billed::default(),
                            }
                        }),
                        other => Ok((*other).clone()),
                    }
                } else if let Some((other, input)) = uses.first() {
                    Err(ProviderError::InvalidOutput {
                        reply: format!("{other}({})", net::clip(&input.to_string(), 300)),
                        reason: format!(
                            "the model used the tool `{other}`, which was not offered; the only tool is `{name}`"
                        ),
                        billed: Billed::default(),
                    })
                } else if text.trim().is_empty() {
                    Err(ProviderError::InvalidOutput {
                        reply: String::new(),
                        reason: format!("the reply is empty: no `{name}` tool call and no text"),
                        billed: Billed::default(),
                    })
                } else {
                    match serde_json::from_str::<Value>(strip_fence(&text)) {
                        Ok(v) if v.is_object() => Ok(v),
                        _ => Err(ProviderError::InvalidOutput {
                            reply: text.clone(),
                            reason: format!(
                                "the model answered in prose instead of calling the tool `{name}`"
                            ),
                            billed: Billed::default(),
                        }),
                    }
                };
                match found {
                    Ok(v) => {
                        let raw = v.to_string();
                        (v, raw)
                    }
                    Err(e) => {
                        return Ok(Err(net::bill_rejected(e, |reply| {
                            self.usage(req, &v, reply)
                        })))
                    }
                }
            }
        };
        let (usage, usage_estimated) = self.usage(req, &v, &raw);
        Ok(Ok(LlmResponse {
            output,
            usage,
            usage_estimated,
            ..Default::default()
        }))
    }

    /// The usage of a reply: the server's counts (cache reads and writes added to the
    /// input), else an estimate from the prompt and `raw` (flagged as estimated).
    fn usage(&self, req: &LlmRequest, v: &Value, raw: &str) -> (Usage, bool) {
        let usage = v.get("usage");
        let cache = net::count(usage.and_then(|u| u.get("cache_creation_input_tokens")))
            .unwrap_or(0)
            + net::count(usage.and_then(|u| u.get("cache_read_input_tokens"))).unwrap_or(0);
        net::reply_usage(
            &self.conn.spec,
            req,
            net::count(usage.and_then(|u| u.get("input_tokens"))),
            net::count(usage.and_then(|u| u.get("output_tokens"))),
            cache,
            raw,
        )
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &'static str {
        "anthropic"
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
            }
            let body = body.to_string();
            let build = || {
                let b = http::client()
                    .post(&self.conn.endpoint)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .header("anthropic-version", API_VERSION)
                    .body(body.clone());
                match &self.conn.key {
                    Some(k) => match reqwest::header::HeaderValue::from_str(k.expose()) {
                        Ok(mut v) => {
                            v.set_sensitive(true);
                            b.header("x-api-key", v)
                        }
                        Err(_) => b.header("x-api-key", k.expose()),
                    },
                    None => b,
                }
            };
            let what = self.what();
            let check = |r: HttpResponse| {
                net::bill_unusable(&what, &r, self.parse(req, &r), |v| {
                    let u = v.get("usage")?;
                    let counted = ["input_tokens", "output_tokens"]
                        .iter()
                        .any(|k| net::count(u.get(*k)).is_some());
                    counted.then(|| self.usage(req, v, ""))
                })
            };
            let sent = if streaming {
                let new = || net::stream::Sse::new(stream::Events::default());
                http::send_streamed(build, &self.conn.policy, new, check).await
            } else {
                http::send_checked(build, &self.conn.policy, check).await
            };
            sent.map_err(|e| http_error(&self.what(), e))?
        })
    }
}
