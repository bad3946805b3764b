//! The error body of every failed request: `{"error": {"code", "message"}}` with the
//! HTTP status that says whose fault it is (docs/serve.md "Errors").
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A request the server refuses, as `{"error": {"code", "message"}}`.
///
/// `code` is stable (clients match on it); `message` is for people and never holds a
/// key or a secret (it is built from the request and the spec's diagnostics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status: 400 malformed JSON or header, 403 a refused option, 404 unknown
    /// graph/variant/run/route/thread, 405 wrong method, 409 a thread conflict, 413
    /// body too large, 422 a request or input that does not fit, 429 too many runs,
    /// 503 shutting down, resources or checkpoint store unavailable.
    pub status: StatusCode,
    /// Machine-readable code, e.g. `unknown_graph`.
    pub code: &'static str,
    /// What is wrong, in words.
    pub message: String,
    /// Seconds for a `Retry-After` header (429 and 503).
    pub retry_after: Option<u32>,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400 `malformed_json`.
    pub fn malformed(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", message)
    }

    /// 422 with `code`.
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// 404 with `code`.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    /// With a `Retry-After` of `secs` seconds.
    pub fn retry_after(mut self, secs: u32) -> ApiError {
        self.retry_after = Some(secs);
        self
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        resp
    }
}
