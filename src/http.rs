//! HTTP shared by the network providers (`openai`, `anthropic`), the embeddings
//! client and the web-search tools: one pooled [`reqwest::Client`], one call with a
//! per-attempt timeout, and retries with jittered exponential backoff
//! ([`backon`]).
//!
//! Which failures are retried (the rule every network caller follows):
//!
//! | failure | retried |
//! |---|---|
//! | timeout, connection refused or reset, body cut short | yes |
//! | 408, 429, 500–599 (Anthropic's 529 "overloaded" included) | yes, after `Retry-After` when the server sends one |
//! | any other 4xx (400 bad request, 401 bad key, 404 unknown model, ...) | no: fails at once with the server's own message |
//! | a body larger than [`MAX_BODY_BYTES`] (16 MiB) | no: fails at once, the body is not kept |
//! | a redirect (300–399) | no: fails at once, the redirect is not followed (below) |
//!
//! **Redirects are never followed.** An API call carries a key (`Authorization`,
//! `x-api-key`, ...) and a request body; following a `Location` could hand both to
//! a server the spec never named. So the [`client`] follows no redirect, for every
//! caller alike (LLM providers, embeddings, web search), and a 3xx answer is a
//! permanent failure naming the status and the origin (`scheme://host:port`) of its
//! `Location` — never the full target, whose query may carry a key — and asking for
//! the API's own address in `base_url`.
//!
//! Each retry is reported as it is about to happen, to the node that made the call
//! ([`crate::retries`]: `--verbose`, the eval progress bar, the trace).
//!
//! Secrets (API keys) handed to [`CallPolicy::secrets`] are replaced by
//! `[redacted]` in every message this module produces, so a key never reaches a
//! trace, a report or the terminal through an error.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ragloop::http::HttpError> {
//! use ragloop::http::{client, send, CallPolicy};
//! let policy = CallPolicy::default();
//! let resp = send(|| client().get("http://127.0.0.1:8080/search?q=rust&format=json"), &policy).await?;
//! assert_eq!(resp.status, 200);
//! # Ok(()) }
//! ```
use backon::{ExponentialBuilder, Retryable};
mod stream;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};
pub use stream::{send_streamed, StreamDecoder};

/// The largest response body read, in bytes (16 MiB). A larger body fails the call
/// at once with [`HttpError::Permanent`] (not retried: the server would send it
/// again), before it is held in memory.
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// The process-wide HTTP client (connection pool shared by every model and tool).
/// Timeouts are set per request by [`send`], not on the client. It follows no
/// redirect (see the module docs): every HTTP request of the crate goes through it.
pub fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        // Building fails only when the TLS backend cannot start, where
        // `reqwest::Client::new()` would panic too; there is no client without the
        // redirect policy to fall back to.
        reqwest::Client::builder()
            .user_agent(concat!("ragloop/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|e| panic!("cannot build the HTTP client: {e}"))
    })
}

/// How one logical call is made: timeout of each attempt, retries, backoff bounds.
#[derive(Clone, Debug)]
pub struct CallPolicy {
    /// Attempts after the first one, for transient failures only.
    pub retries: u32,
    /// Timeout of one attempt (connect, send and read the whole body).
    pub timeout: Duration,
    /// First backoff delay (doubled after every attempt, with jitter).
    pub min_delay: Duration,
    /// Longest backoff delay.
    pub max_delay: Duration,
    /// Longest `Retry-After` honoured; a server asking for more fails the call with
    /// its wait named, rather than parking the run.
    pub max_retry_after: Duration,
    /// Strings that must never appear in a message (API keys).
    pub secrets: Vec<String>,
    /// Largest response body read, in bytes ([`MAX_BODY_BYTES`] by default; the
    /// embeddings client allows more, since a batch of large vectors is big).
    pub max_body_bytes: usize,
}

impl Default for CallPolicy {
    /// 2 retries, 60 s per attempt, backoff 0.5 s → 8 s, `Retry-After` up to 120 s.
    fn default() -> CallPolicy {
        CallPolicy {
            retries: 2,
            timeout: Duration::from_secs(60),
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(120),
            secrets: Vec::new(),
            max_body_bytes: MAX_BODY_BYTES,
        }
    }
}

impl CallPolicy {
    /// Replaces every secret in `text` with `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in self.secrets.iter().filter(|s| s.len() >= 4) {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "[redacted]");
            }
        }
        out
    }
}

/// A response with a 2xx status.
#[derive(Clone, Debug)]
pub struct HttpResponse {
    /// HTTP status (200–299).
    pub status: u16,
    /// The body, as text (lossy UTF-8).
    pub body: String,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// Attempts made (1 when the first one succeeded).
    pub attempts: u32,
}

/// Why a call failed, after retries.
#[derive(Clone, Debug, thiserror::Error)]
pub enum HttpError {
    /// A failure a retry could fix (timeout, reset, 408/429/5xx); returned once the
    /// retries are spent.
    #[error("{message}")]
    Transient {
        /// What happened, with the server's message when it sent one.
        message: String,
        /// The server's `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// A failure a retry cannot fix (other 4xx, a `Retry-After` beyond the limit).
    #[error("{message}")]
    Permanent {
        /// HTTP status, when there was a response.
        status: Option<u16>,
        /// What happened, with the server's message when it sent one.
        message: String,
    },
}

impl HttpError {
    /// Whether a retry could help.
    pub fn is_transient(&self) -> bool {
        matches!(self, HttpError::Transient { .. })
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            HttpError::Transient { retry_after, .. } => *retry_after,
            HttpError::Permanent { .. } => None,
        }
    }

    fn with_attempts(self, attempts: u32) -> HttpError {
        if attempts <= 1 {
            return self;
        }
        match self {
            HttpError::Transient {
                message,
                retry_after,
            } => HttpError::Transient {
                message: format!("{message} (gave up after {attempts} attempts)"),
                retry_after,
            },
            p => p,
        }
    }
}

/// Sends the request `build` makes (called once per attempt) under `policy`, and
/// returns the 2xx response or the classified failure (see the module docs).
///
/// # Errors
/// [`HttpError::Permanent`] at once for non-retryable statuses (with the server's
/// `error.message`, `message` or `error` field, else the start of its body);
/// [`HttpError::Transient`] when the retries are spent.
pub async fn send<F>(build: F, policy: &CallPolicy) -> Result<HttpResponse, HttpError>
where
    F: Fn() -> reqwest::RequestBuilder,
{
    send_checked(build, policy, Ok).await
}

/// [`send`], with `check` applied to every 2xx response inside the retry loop: it
/// turns the response into the caller's value, or into an [`HttpError`] — a
/// [`HttpError::Transient`] one (an empty body, a 200 carrying an "overloaded"
/// error object) is retried like a 5xx, a [`HttpError::Permanent`] one ends the call.
/// `check` sees the body already redacted of the policy's secrets.
///
/// # Errors
/// As [`send`], plus the errors `check` returns.
pub async fn send_checked<F, C, T>(build: F, policy: &CallPolicy, check: C) -> Result<T, HttpError>
where
    F: Fn() -> reqwest::RequestBuilder,
    C: Fn(HttpResponse) -> Result<T, HttpError>,
{
    let attempts = std::sync::atomic::AtomicU32::new(0);
    let backoff = ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay)
        .with_max_times(policy.retries as usize)
        .with_jitter();
    let result = (|| async {
        let n = attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut r = attempt(build(), policy).await?;
        r.attempts = n;
        if !policy.secrets.is_empty() {
            r.body = policy.redact(&r.body);
        }
        check(r)
    })
    .retry(backoff)
    .when(HttpError::is_transient)
    // Honour the server's wait; stop when the backoff is spent (`None`).
    .adjust(|e: &HttpError, d| d.map(|d| e.retry_after().unwrap_or(d)))
    // Every retry is reported as it is about to happen (see `crate::retries`).
    .notify(|e: &HttpError, d| {
        let done = attempts.load(std::sync::atomic::Ordering::Relaxed);
        crate::retries::report(
            done + 1,
            policy.retries.saturating_add(1),
            &e.to_string(),
            d,
        );
    })
    .await;
    let n = attempts.load(std::sync::atomic::Ordering::Relaxed);
    result.map_err(|e| e.with_attempts(n))
}

async fn attempt(
    req: reqwest::RequestBuilder,
    policy: &CallPolicy,
) -> Result<HttpResponse, HttpError> {
    let (resp, content_type) = open(req, policy).await?;
    let status = resp.status().as_u16();
    let body = read_body(resp, policy).await?;
    Ok(HttpResponse {
        status,
        body,
        content_type,
        attempts: 1,
    })
}

/// The failure of a body larger than the policy allows.
fn too_large(status: u16, policy: &CallPolicy) -> HttpError {
    HttpError::Permanent {
        status: Some(status),
        message: format!(
            "HTTP {status}: the response body is larger than {} MiB; ragloop does not read it (is this the right server?)",
            policy.max_body_bytes >> 20
        ),
    }
}

/// The failure of a body read that broke off (`e`), transient.
fn read_failed(status: u16, e: &reqwest::Error, policy: &CallPolicy) -> HttpError {
    let secs = policy.timeout.as_secs_f64();
    let message = if e.is_timeout() {
        format!("HTTP {status}: body not received within {secs} s (timeout)")
    } else {
        format!("HTTP {status}: body cut short: {}", error_chain(e))
    };
    HttpError::Transient {
        message: policy.redact(&message),
        retry_after: None,
    }
}

/// The whole body of a 2xx response, bounded by the policy's limit.
async fn read_body(mut resp: reqwest::Response, policy: &CallPolicy) -> Result<String, HttpError> {
    let status = resp.status().as_u16();
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                if bytes.len() + c.len() > policy.max_body_bytes {
                    return Err(too_large(status, policy));
                }
                bytes.extend_from_slice(&c);
            }
            Ok(None) => break,
            Err(e) => return Err(read_failed(status, &e, policy)),
        }
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Sends `req` and returns its 2xx response (body unread) and content type, or the
/// classified failure of the attempt (see the module docs).
async fn open(
    req: reqwest::RequestBuilder,
    policy: &CallPolicy,
) -> Result<(reqwest::Response, Option<String>), HttpError> {
    let secs = policy.timeout.as_secs_f64();
    let transient = |message: String| HttpError::Transient {
        message: policy.redact(&message),
        retry_after: None,
    };
    let resp = match req.timeout(policy.timeout).send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => {
            return Err(transient(format!("no answer within {secs} s (timeout)")))
        }
        Err(e) if e.is_connect() => {
            return Err(transient(format!("cannot connect: {}", error_chain(&e))))
        }
        Err(e) if e.is_builder() => {
            return Err(HttpError::Permanent {
                status: None,
                message: policy.redact(&format!("bad request URL or header: {}", error_chain(&e))),
            })
        }
        Err(e) => return Err(transient(format!("request failed: {}", error_chain(&e)))),
    };
    let status = resp.status().as_u16();
    if (300..400).contains(&status) {
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok());
        return Err(HttpError::Permanent {
            status: Some(status),
            message: policy.redact(&redirect_message(status, location, resp.url())),
        });
    }
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after);
    if resp
        .content_length()
        .is_some_and(|n| n > policy.max_body_bytes as u64)
    {
        return Err(too_large(status, policy));
    }
    if (200..300).contains(&status) {
        return Ok((resp, content_type));
    }
    let body = read_body(resp, policy).await?;
    let message = policy.redact(&format!("HTTP {status}: {}", server_message(&body)));
    let retryable = matches!(status, 408 | 429) || (500..600).contains(&status);
    if !retryable {
        return Err(HttpError::Permanent {
            status: Some(status),
            message,
        });
    }
    if let Some(ra) = retry_after.filter(|ra| *ra > policy.max_retry_after) {
        return Err(HttpError::Permanent {
            status: Some(status),
            message: format!(
                "{message} (the server asks to wait {} s, more than the {} s allowed)",
                ra.as_secs(),
                policy.max_retry_after.as_secs()
            ),
        });
    }
    Err(HttpError::Transient {
        message,
        retry_after,
    })
}

/// The failure message of a redirect answer: the status, the origin of its
/// `Location` (resolved against the request's URL `from`; never its path or query,
/// which may carry a key), and the fix.
fn redirect_message(status: u16, location: Option<&str>, from: &reqwest::Url) -> String {
    let origin = |u: &reqwest::Url| u.origin().ascii_serialization();
    let target = match location.map(|l| from.join(l.trim())) {
        None => "without a Location".to_string(),
        Some(Err(_)) => "to an unreadable Location".to_string(),
        Some(Ok(to)) if origin(&to) == origin(from) => {
            format!("to another path on the same origin {}", origin(&to))
        }
        Some(Ok(to)) => format!("to another origin, {}", origin(&to)),
    };
    format!(
        "HTTP {status}: the server redirects {target}; ragloop does not follow redirects of API calls (a key must never reach an address the spec did not name): give the API's own address, without redirects (fix base_url)"
    )
}

/// `Retry-After` as seconds or an HTTP date (RFC 9110 §10.2.3).
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(s) = v.parse::<f64>() {
        return (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(1e6)));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// The server's own error message from an error body: `error.message` (OpenAI,
/// Anthropic), `error` as a string, `message` or `detail`; else the start of the body
/// with whitespace collapsed (HTML pages included), or `empty body`.
pub fn server_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let pick = v
            .pointer("/error/message")
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .or_else(|| v.get("message"))
            .or_else(|| v.get("detail"));
        if let Some(m) = pick {
            return clip(
                m.as_str()
                    .map_or_else(|| m.to_string(), str::to_string)
                    .as_str(),
                300,
            );
        }
    }
    let flat = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        "empty body".into()
    } else {
        clip(&flat, 300)
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn server_messages() {
        assert_eq!(
            server_message(r#"{"error":{"message":"Incorrect API key","type":"x"}}"#),
            "Incorrect API key"
        );
        assert_eq!(
            server_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            server_message("<html>\n<body> Bad  Gateway </body></html>"),
            "<html> <body> Bad Gateway </body></html>"
        );
        assert_eq!(server_message("  "), "empty body");
    }

    #[test]
    fn redirect_messages_name_the_origin_only() {
        let from = reqwest::Url::parse("http://127.0.0.1:8080/v1/messages").unwrap();
        let m = redirect_message(
            307,
            Some("http://localhost:9999/v1/messages?key=sk-abc"),
            &from,
        );
        assert!(m.starts_with("HTTP 307: "), "{m}");
        assert!(m.contains("another origin, http://localhost:9999;"), "{m}");
        assert!(!m.contains("sk-abc") && !m.contains("/v1/messages"), "{m}");
        assert!(m.contains("fix base_url"), "{m}");
        let m = redirect_message(301, Some("/v2/messages"), &from);
        assert!(m.contains("same origin http://127.0.0.1:8080"), "{m}");
        let m = redirect_message(302, None, &from);
        assert!(m.contains("without a Location"), "{m}");
    }

    #[test]
    fn redaction() {
        let p = CallPolicy {
            secrets: vec!["sk-secret-123".into()],
            ..CallPolicy::default()
        };
        assert_eq!(p.redact("bad key sk-secret-123!"), "bad key [redacted]!");
    }
}
