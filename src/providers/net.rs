//! What the network providers (`openai`, `anthropic`) share: API keys, endpoint
//! rules, the call policy built from a model config, cost, response-body checks and
//! the schema helpers of structured output.
use super::LlmRequest;
use crate::http::{server_message, CallPolicy, HttpError, HttpResponse};
use crate::spec::types::{ModelSpec, Provider as Kind};
use serde_json::{Map, Value};
use std::time::Duration;

/// Default attempts after the first one for transient failures (`retries`).
pub const DEFAULT_RETRIES: u32 = 2;
/// Default timeout of one attempt, in seconds (`timeout_secs`).
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

/// An API key. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key.
    pub fn new(key: String) -> Secret {
        Secret(key)
    }

    /// The key, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The default key variable and the official API host of a network provider kind.
fn defaults(kind: Kind) -> Option<(&'static str, &'static str)> {
    match kind {
        Kind::Openai => Some(("OPENAI_API_KEY", "api.openai.com")),
        Kind::Anthropic => Some(("ANTHROPIC_API_KEY", "api.anthropic.com")),
        _ => None,
    }
}

/// The API key of model `name`, read from the environment only.
///
/// Rules (the same for `openai` and `anthropic`):
/// - `api_key_env: VAR` names the variable: it must be set and non-empty;
/// - no `api_key_env` and no `base_url` (or a `base_url` on the official host,
///   `api.openai.com` / `api.anthropic.com`): the provider's default variable,
///   `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`, must be set;
/// - no `api_key_env` and a `base_url` on another host (Ollama, vLLM, llama.cpp
///   server, a proxy): no key is sent. The default variable is never sent to a host
///   the spec did not name it for; Groq, Together and other hosted servers name
///   their variable with `api_key_env`.
///
/// Other provider kinds need no key (`Ok(None)`).
///
/// # Errors
/// A message naming the model and the variable when a required key is missing,
/// empty or not UTF-8.
pub fn api_key(name: &str, model: &ModelSpec) -> Result<Option<Secret>, String> {
    let Some((default_var, official)) = defaults(model.provider) else {
        return Ok(None);
    };
    let (var, how) = match model.api_key_env.as_deref() {
        Some(v) => (v, format!("named by models.{name}.api_key_env")),
        None => {
            let on_official = model.base_url.as_deref().is_none_or(|b| {
                reqwest::Url::parse(b.trim())
                    .ok()
                    .and_then(|u| u.host_str().map(|h| h.eq_ignore_ascii_case(official)))
                    .unwrap_or(false)
            });
            if !on_official {
                return Ok(None);
            }
            (
                default_var,
                format!(
                    "the default of provider {}; name another one with models.{name}.api_key_env",
                    model.provider.as_str()
                ),
            )
        }
    };
    match std::env::var(var) {
        Ok(k) if !k.trim().is_empty() => Ok(Some(Secret(k.trim().to_string()))),
        Ok(_) => Err(format!(
            "model `{name}`: the API key variable {var} ({how}) is empty"
        )),
        Err(std::env::VarError::NotPresent) => Err(format!(
            "model `{name}`: the API key variable {var} ({how}) is not set"
        )),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!(
            "model `{name}`: the API key variable {var} ({how}) is not valid UTF-8"
        )),
    }
}

/// The call policy of a model: `retries` (default [`DEFAULT_RETRIES`]), per-attempt
/// `timeout_secs` (default [`DEFAULT_TIMEOUT_SECS`]), backoff 0.5 s doubling to 8 s
/// with jitter, `Retry-After` honoured up to 120 s, the key redacted.
pub fn policy(model: &ModelSpec, key: Option<&Secret>) -> CallPolicy {
    let secs = model
        .timeout_secs
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .min(86_400.0);
    CallPolicy {
        retries: model.retries.unwrap_or(DEFAULT_RETRIES),
        timeout: Duration::from_secs_f64(secs),
        secrets: key.map(|k| vec![k.0.clone()]).unwrap_or_default(),
        ..CallPolicy::default()
    }
}

/// Cost in US dollars of `input` and `output` tokens at the model's `price` (per
/// million tokens); 0 without a price.
pub fn cost_usd(model: &ModelSpec, input: u64, output: u64) -> f64 {
    model.price.as_ref().map_or(0.0, |p| {
        (input as f64 * p.input_per_mtok + output as f64 * p.output_per_mtok) / 1_000_000.0
    })
}

/// Parses and checks a `base_url` (http or https).
pub(crate) fn parse_base(name: &str, base: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(base.trim())
        .map_err(|e| format!("model `{name}`: base_url `{base}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "model `{name}`: base_url `{base}` must be an http:// or https:// address"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "model `{name}`: base_url `{base}` must not carry a query or a fragment"
        ));
    }
    Ok(url)
}

/// `base` with `segments` appended to its path (no doubled slashes).
pub(crate) fn join(base: &reqwest::Url, segments: &str) -> String {
    let mut u = base.clone();
    let path = format!(
        "{}/{}",
        base.path().trim_end_matches('/'),
        segments.trim_start_matches('/')
    );
    u.set_path(&path);
    u.to_string()
}

/// The rendered messages' text, for token estimates.
pub(crate) fn prompt_chars(req: &LlmRequest) -> String {
    let mut s = String::new();
    for m in &req.messages {
        s.push_str(&m.content);
        s.push('\n');
    }
    s
}

/// The JSON body of a 2xx response, or why it is not usable: an empty body and JSON
/// cut short are transient (a retry can help), an HTML page or other non-JSON body
/// is permanent; a JSON body carrying an `error` object is classified by the error's
/// type (overloaded, server error, rate limit: transient; else permanent).
pub(crate) fn json_body(resp: &HttpResponse) -> Result<Value, HttpError> {
    let status = resp.status;
    let body = resp.body.trim_start_matches('\u{feff}').trim();
    if body.is_empty() {
        return Err(HttpError::Transient {
            message: format!("HTTP {status} with an empty body"),
            retry_after: None,
        });
    }
    let html = body.starts_with('<')
        || resp
            .content_type
            .as_deref()
            .is_some_and(|c| c.contains("html"));
    if html {
        return Err(HttpError::Permanent {
            status: Some(status),
            message: format!(
                "HTTP {status}: the server answered with an HTML page, not JSON (is base_url the API's address?): {}",
                server_message(body)
            ),
        });
    }
    let v: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) if e.is_eof() => {
            return Err(HttpError::Transient {
                message: format!("HTTP {status}: the response JSON is cut short ({e})"),
                retry_after: None,
            })
        }
        Err(e) => {
            return Err(HttpError::Permanent {
                status: Some(status),
                message: format!(
                    "HTTP {status}: the response is not JSON ({e}): {}",
                    server_message(body)
                ),
            })
        }
    };
    let err = v.get("error").filter(|e| !e.is_null());
    if let Some(e) = err {
        let message = format!(
            "HTTP {status} carrying an error: {}",
            server_message(&serde_json::json!({ "error": e }).to_string())
        );
        let kind = [e.get("type"), e.get("code"), e.get("status")]
            .into_iter()
            .flatten()
            .map(|k| k.as_str().map_or_else(|| k.to_string(), str::to_lowercase))
            .collect::<Vec<_>>()
            .join(" ");
        let transient = [
            "overload",
            "server_error",
            "api_error",
            "rate_limit",
            "timeout",
            "unavailable",
            "429",
            "500",
            "502",
            "503",
            "504",
            "529",
        ]
        .iter()
        .any(|t| kind.contains(t));
        return Err(if transient {
            HttpError::Transient {
                message,
                retry_after: None,
            }
        } else {
            HttpError::Permanent {
                status: Some(status),
                message,
            }
        });
    }
    if !v.is_object() {
        return Err(HttpError::Permanent {
            status: Some(status),
            message: format!(
                "HTTP {status}: expected a JSON object, got {}",
                clip(body, 200)
            ),
        });
    }
    Ok(v)
}

/// A non-negative integer field (lenient: floats and numeric strings accepted).
pub(crate) fn count(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The function name offered for a schema: its `title` reduced to
/// `[A-Za-z0-9_-]{1,64}`, else `respond`.
pub(crate) fn tool_name(schema: &Value) -> String {
    let t: String = schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if t.trim_matches('_').is_empty() {
        "respond".into()
    } else {
        t
    }
}

/// The tool description: the schema's `description`, else a generic sentence.
pub(crate) fn tool_description(schema: &Value) -> String {
    schema
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| "Return the answer as structured output.".into())
}

/// The schema as sent to a provider: `$schema` and `$id` removed (some servers
/// reject them).
pub(crate) fn wire_schema(schema: &Value) -> Value {
    let mut s = schema.clone();
    if let Value::Object(m) = &mut s {
        m.remove("$schema");
        m.remove("$id");
    }
    s
}

/// A schema adapted to OpenAI's strict structured outputs: every object with
/// `properties` gets `additionalProperties: false` and lists all its properties in
/// `required`, the optional ones made nullable. `None` when the schema cannot be
/// made strict (a free-form object, `additionalProperties` allowing extra keys):
/// it is then sent with `strict: false`. Outputs are mapped back with
/// [`drop_optional_nulls`].
pub(crate) fn strict_schema(schema: &Value) -> Option<Value> {
    fn walk(s: &mut Value) -> bool {
        let Value::Object(m) = s else { return true };
        let is_object =
            m.get("type").and_then(Value::as_str) == Some("object") || m.contains_key("properties");
        if is_object {
            if !matches!(
                m.get("additionalProperties"),
                None | Some(Value::Bool(false))
            ) {
                return false;
            }
            let Some(Value::Object(props)) = m.get_mut("properties") else {
                return false;
            };
            let names: Vec<String> = props.keys().cloned().collect();
            let mut ok = true;
            for p in props.values_mut() {
                ok &= walk(p);
            }
            let required: Vec<String> = m
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Object(props)) = m.get_mut("properties") {
                for (k, p) in props.iter_mut() {
                    if !required.contains(k) {
                        make_nullable(p);
                    }
                }
            }
            m.insert("additionalProperties".into(), Value::Bool(false));
            m.insert(
                "required".into(),
                Value::Array(names.into_iter().map(Value::String).collect()),
            );
            if !ok {
                return false;
            }
        }
        let mut ok = true;
        for key in ["items", "not"] {
            if let Some(v) = m.get_mut(key) {
                ok &= walk(v);
            }
        }
        for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
            if let Some(Value::Array(a)) = m.get_mut(key) {
                for v in a {
                    ok &= walk(v);
                }
            }
        }
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(d)) = m.get_mut(key) {
                for v in d.values_mut() {
                    ok &= walk(v);
                }
            }
        }
        ok
    }
    fn make_nullable(p: &mut Value) {
        let Value::Object(m) = p else { return };
        match m.get_mut("type") {
            Some(Value::String(t)) => {
                let t = t.clone();
                if t != "null" {
                    m.insert("type".into(), serde_json::json!([t, "null"]));
                }
            }
            Some(Value::Array(a)) => {
                if !a.iter().any(|t| t == "null") {
                    a.push(Value::String("null".into()));
                }
            }
            _ => {
                let inner = Value::Object(std::mem::take(m));
                m.insert("anyOf".into(), serde_json::json!([inner, {"type": "null"}]));
            }
        }
        if let Some(Value::Array(e)) = m.get_mut("enum") {
            if !e.contains(&Value::Null) {
                e.push(Value::Null);
            }
        }
    }
    let mut s = wire_schema(schema);
    walk(&mut s).then_some(s)
}

/// Removes the `null` values a strict schema allowed for properties the original
/// schema left optional, so the output validates against the original schema.
pub(crate) fn drop_optional_nulls(schema: &Value, out: &mut Value) {
    match out {
        Value::Object(o) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            o.retain(|k, v| {
                !(v.is_null() && props.contains_key(k) && !required.contains(&k.as_str()))
            });
            for (k, v) in o.iter_mut() {
                if let Some(ps) = props.get(k) {
                    drop_optional_nulls(ps, v);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for v in a {
                    drop_optional_nulls(items, v);
                }
            }
        }
        _ => {}
    }
}

/// The `temperature` field a request of model `m` carries after the `params` merge
/// (one rule for the bodies the providers send and for the response cache's
/// eligibility, [`super::cache::cacheable`]): `params.temperature` when the params
/// set it (`null` removes the field: the server's default applies, `None`), else the
/// model's `temperature` (clamped to the Messages API's 0..1 for `anthropic`).
pub(crate) fn sent_temperature(m: &ModelSpec) -> Option<Value> {
    match m.params.get("temperature") {
        Some(Value::Null) => None,
        Some(v) => Some(v.clone()),
        None if m.provider == Kind::Anthropic => {
            Some(serde_json::json!(m.temperature.clamp(0.0, 1.0)))
        }
        None => Some(serde_json::json!(m.temperature)),
    }
}

/// The output-token limit a request of model `name` carries after the `params`
/// merge, for messages: the setting that decides it (a spec path) and its value.
/// `keys` are the body fields that set a limit, the first one set winning
/// (`max_completion_tokens` before `max_tokens` for OpenAI); `default` is what is
/// sent when the model sets no `max_tokens` (Anthropic's required default).
fn token_limit(
    name: &str,
    spec: &ModelSpec,
    keys: &[&str],
    default: Option<u32>,
) -> (String, Option<String>) {
    let mut base_removed = false;
    for k in keys {
        match spec.params.get(*k) {
            Some(Value::Null) => base_removed |= *k == "max_tokens",
            Some(v) => {
                return (
                    format!("models.{name}.params.{k}"),
                    Some(format!("{k} ({v})")),
                )
            }
            None => {}
        }
    }
    let setting = format!("models.{name}.max_tokens");
    let value = match (base_removed, spec.max_tokens, default) {
        (true, _, _) | (false, None, None) => None,
        (false, Some(n), _) => Some(format!("max_tokens ({n})")),
        (false, None, Some(d)) => Some(format!(
            "max_tokens ({d}, the default: {setting} is not set)"
        )),
    };
    (setting, value)
}

/// The failure of a reply cut at the output-token limit ([`super::ProviderError::Truncated`]),
/// for the model of `conn` (`what` names it for messages): `stop` is the stop reason
/// as the server wrote it (`finish_reason length`); `keys` and `default` as for the
/// limit the request carried (see [`token_limit`]); `billed` what the reply cost.
pub(crate) fn truncated(
    conn: &Connection,
    what: &str,
    stop: &str,
    keys: &[&str],
    default: Option<u32>,
    billed: super::Billed,
) -> super::ProviderError {
    let (setting, value) = token_limit(&conn.name, &conn.spec, keys, default);
    let message = match value {
        Some(v) => format!(
            "{what}: the reply was cut at {v} before it was complete ({stop}); a truncated reply gets no repair turn and no retry (the same limit would cut it again): raise {setting}"
        ),
        None => format!(
            "{what}: the reply was cut at the server's default output-token limit before it was complete ({stop}; no max_tokens is sent); a truncated reply gets no repair turn and no retry: set {setting}"
        ),
    };
    super::ProviderError::Truncated { message, billed }
}

/// A permanent failure of a 2xx reply (a refusal, a content-filter stop, a 200
/// carrying an error object, no choices) whose body reports token usage becomes
/// [`super::ProviderError::Unusable`] carrying that usage, so a failed call that was
/// billed is counted. `usage` reads the counts from the JSON body (`None` when it
/// reports none: the failure then passes through unchanged, as do answers and
/// transient failures, which are retried). `what` names the model for the message.
pub(crate) fn bill_unusable(
    what: &str,
    resp: &HttpResponse,
    parsed: Result<Result<super::LlmResponse, super::ProviderError>, HttpError>,
    usage: impl FnOnce(&Value) -> Option<(super::Usage, bool)>,
) -> Result<Result<super::LlmResponse, super::ProviderError>, HttpError> {
    let Err(HttpError::Permanent { message, .. }) = &parsed else {
        return parsed;
    };
    let body = resp.body.trim_start_matches('\u{feff}').trim();
    let Some((usage, usage_estimated)) = serde_json::from_str::<Value>(body)
        .ok()
        .as_ref()
        .and_then(usage)
    else {
        return parsed;
    };
    Ok(Err(super::ProviderError::Unusable {
        message: format!("{what}: {message}"),
        billed: super::Billed {
            usage,
            usage_estimated,
            cached: false,
        },
    }))
}

/// `params` of a network model, merged into the request body: each key is set at
/// the top level (a `null` value removes the field the provider would send, e.g.
/// `temperature: null` for models that reject it); `model`, `messages`, `system`,
/// `tools`, `tool_choice` and `response_format` cannot be replaced.
pub(crate) fn merge_params(body: &mut Map<String, Value>, params: &Map<String, Value>) {
    const FIXED: [&str; 6] = [
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "response_format",
    ];
    for (k, v) in params {
        if FIXED.contains(&k.as_str()) {
            continue;
        }
        if v.is_null() {
            body.remove(k);
        } else {
            body.insert(k.clone(), v.clone());
        }
    }
}

/// The parameter keys that [`merge_params`] ignores, for error messages at build.
pub(crate) fn fixed_param(params: &indexmap::IndexMap<String, Value>) -> Option<&str> {
    params.keys().map(String::as_str).find(|k| {
        [
            "model",
            "messages",
            "system",
            "tools",
            "tool_choice",
            "response_format",
        ]
        .contains(k)
    })
}

pub(crate) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_adaptation_and_back() {
        let s = json!({"$schema": "x", "title": "T", "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"},
                           "c": {"type": "object", "properties": {"d": {"enum": ["x", "y"]}}}},
            "required": ["a"]});
        let strict = strict_schema(&s).unwrap();
        assert!(strict.get("$schema").is_none());
        assert_eq!(strict["required"], json!(["a", "b", "c"]));
        assert_eq!(strict["additionalProperties"], json!(false));
        assert_eq!(
            strict["properties"]["b"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(
            strict["properties"]["c"]["properties"]["d"]["anyOf"][1],
            json!({"type": "null"})
        );
        assert_eq!(strict["properties"]["c"]["required"], json!(["d"]));
        let mut out = json!({"a": "x", "b": null, "c": {"d": null}});
        drop_optional_nulls(&s, &mut out);
        assert_eq!(out, json!({"a": "x", "c": {}}));
        // Free-form objects cannot be strict.
        assert!(strict_schema(&json!({"type": "object"})).is_none());
        assert!(strict_schema(
            &json!({"type": "object", "properties": {}, "additionalProperties": true})
        )
        .is_none());
    }

    #[test]
    fn names_and_joins() {
        assert_eq!(
            tool_name(&json!({"title": "Grading Result"})),
            "Grading_Result"
        );
        assert_eq!(tool_name(&json!({})), "respond");
        let b = reqwest::Url::parse("http://h:1/v1/").unwrap();
        assert_eq!(
            join(&b, "chat/completions"),
            "http://h:1/v1/chat/completions"
        );
    }

    #[test]
    fn body_classes() {
        let r = |body: &str, ct: Option<&str>| HttpResponse {
            status: 200,
            body: body.into(),
            content_type: ct.map(str::to_string),
            attempts: 1,
        };
        assert!(json_body(&r("", None)).unwrap_err().is_transient());
        assert!(!json_body(&r("<html><title>Login</title></html>", None))
            .unwrap_err()
            .is_transient());
        assert!(json_body(&r("{\"choices\": [", None))
            .unwrap_err()
            .is_transient());
        assert!(!json_body(&r("nope", None)).unwrap_err().is_transient());
        let e = json_body(&r(
            r#"{"error": {"message": "Overloaded", "type": "overloaded_error"}}"#,
            None,
        ))
        .unwrap_err();
        assert!(e.is_transient(), "{e}");
        let e = json_body(&r(
            r#"{"error": {"message": "bad model", "type": "invalid_request_error"}}"#,
            None,
        ))
        .unwrap_err();
        assert!(!e.is_transient());
        assert!(e.to_string().contains("bad model"));
        assert!(json_body(&r(r#"{"error": null, "id": 1}"#, None)).is_ok());
    }
}

/// What every network chat provider holds, built the same way for each: the server's
/// model name (required), the endpoint, the key (from the environment) and the call
/// policy (retries, timeout, redaction of the key).
#[derive(Debug)]
pub(crate) struct Connection {
    /// The model's name in the spec.
    pub name: String,
    /// The model's name on the server.
    pub model: String,
    /// Where requests go.
    pub endpoint: String,
    /// The API key, if the model needs one.
    pub key: Option<Secret>,
    /// Retries, timeout and the secrets to redact.
    pub policy: CallPolicy,
    /// The model config.
    pub spec: ModelSpec,
}

impl Connection {
    /// Checks the config of model `name` for provider `provider` and reads its key.
    /// `example` is a model name shown when `model` is missing; `endpoint` maps the
    /// `base_url` to the provider's endpoint.
    ///
    /// # Errors
    /// A message naming the model: no `model` name, a bad `base_url`, a missing key,
    /// a `params` key that would replace the request's fixed fields.
    pub fn new(
        name: &str,
        spec: &ModelSpec,
        provider: &str,
        example: &str,
        endpoint: impl FnOnce(&str, Option<&str>) -> Result<String, String>,
    ) -> Result<Connection, String> {
        let model = spec
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| {
                format!("model `{name}`: provider {provider} needs `model` ({example})")
            })?;
        let endpoint = endpoint(name, spec.base_url.as_deref())?;
        if let Some(k) = fixed_param(&spec.params) {
            return Err(format!(
                "model `{name}`: params.{k} cannot be set (ragloop builds that field of the request)"
            ));
        }
        let key = super::api_key(name, spec)?;
        Ok(Connection {
            name: name.to_string(),
            model,
            endpoint,
            policy: policy(spec, key.as_ref()),
            key,
            spec: spec.clone(),
        })
    }
}

/// The usage of one reply: the server's token counts where it gave them, else
/// estimates from the prompt and `out_text` (then flagged as estimated, the `bool`);
/// `extra_input` (Anthropic's cache reads and writes) is added to the input. Cost
/// from the model's prices.
pub(crate) fn reply_usage(
    spec: &ModelSpec,
    req: &LlmRequest,
    input: Option<u64>,
    output: Option<u64>,
    extra_input: u64,
    out_text: &str,
) -> (super::Usage, bool) {
    let estimated = input.is_none() || output.is_none();
    let input = input.unwrap_or_else(|| super::estimate_tokens(&prompt_chars(req))) + extra_input;
    let output_tokens = output.unwrap_or_else(|| super::estimate_tokens(out_text));
    (
        super::Usage {
            input_tokens: input,
            output_tokens,
            cost_usd: cost_usd(spec, input, output_tokens),
        },
        estimated,
    )
}

/// A rejected reply ([`super::ProviderError::InvalidOutput`]) was still billed: its
/// usage, computed by `usage` from the reply text, is attached. Other errors pass
/// through unchanged.
pub(crate) fn bill_rejected(
    mut e: super::ProviderError,
    usage: impl FnOnce(&str) -> (super::Usage, bool),
) -> super::ProviderError {
    if let super::ProviderError::InvalidOutput { reply, billed, .. } = &mut e {
        let (usage, usage_estimated) = usage(reply);
        *billed = super::Billed {
            usage,
            usage_estimated,
            cached: false,
        };
    }
    e
}
