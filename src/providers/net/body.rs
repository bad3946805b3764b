//! Checks of a 2xx response body: JSON, an object, no `error` object (classified
//! transient or permanent); lenient token counts; clipping for messages.
use crate::http::{server_message, HttpError, HttpResponse};
use serde_json::Value;

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
