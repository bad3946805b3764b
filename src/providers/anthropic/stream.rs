//! The `anthropic` stream: the Messages API with `stream: true`, read as
//! Server-Sent Events — `message_start` (the message, its input `usage`),
//! `content_block_start`/`content_block_delta` (`text_delta`) /`content_block_stop`,
//! `message_delta` (`stop_reason`, output `usage`), `message_stop`, `ping`, `error` —
//! folded into the equivalent non-streamed body `{"content": [{"type": "text",
//! "text"}], "stop_reason", "usage"}` (the usage counts of `message_start` and
//! `message_delta` merged, the later ones winning).
//!
//! Lenient like the non-streamed body: unknown events, data that is not JSON and
//! deltas of other kinds are ignored; the event type is read from the data's `type`
//! when the `event:` line is missing. An `error` event ends the attempt, classified
//! as the same error object in a JSON body would be (`overloaded_error`: transient).
//! The terminator is `message_stop`: a stream that ends without it is cut short
//! (transient).
use crate::http::HttpError;
use crate::providers::net::stream::{error_event, json, Fold};
use serde_json::{json, Map, Value};

/// What the events said so far.
#[derive(Default)]
pub(super) struct Events {
    text: String,
    stop: Option<Value>,
    usage: Map<String, Value>,
    done: bool,
}

impl Events {
    fn merge_usage(&mut self, u: Option<&Value>) {
        if let Some(Value::Object(u)) = u {
            for (k, v) in u {
                if !v.is_null() {
                    self.usage.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

impl Fold for Events {
    fn event(&mut self, name: &str, data: &str) -> Result<String, HttpError> {
        let Some(v) = json(data) else {
            return Ok(String::new());
        };
        let kind = match name {
            "" => v.get("type").and_then(Value::as_str).unwrap_or(""),
            n => n,
        };
        match kind {
            "message_start" => self.merge_usage(v.pointer("/message/usage")),
            "content_block_start" => {
                let text = v
                    .pointer("/content_block/text")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                self.text.push_str(text);
                return Ok(text.to_string());
            }
            "content_block_delta" => {
                let d = v.get("delta");
                if d.and_then(|d| d.get("type")).and_then(Value::as_str) == Some("text_delta") {
                    let text = d
                        .and_then(|d| d.get("text"))
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    self.text.push_str(text);
                    return Ok(text.to_string());
                }
            }
            "message_delta" => {
                if let Some(s) = v.pointer("/delta/stop_reason").filter(|s| !s.is_null()) {
                    self.stop = Some(s.clone());
                }
                self.merge_usage(v.get("usage"));
            }
            "message_stop" => self.done = true,
            "error" => {
                let e = v.get("error").cloned().unwrap_or(v);
                return Err(error_event(&e));
            }
            _ => {}
        }
        Ok(String::new())
    }

    fn done(&self) -> bool {
        self.done
    }

    fn terminator(&self) -> &'static str {
        "event: message_stop"
    }

    fn body(&self) -> String {
        let mut body = Map::new();
        body.insert(
            "content".into(),
            json!([{"type": "text", "text": self.text}]),
        );
        body.insert(
            "stop_reason".into(),
            self.stop.clone().unwrap_or(Value::Null),
        );
        if !self.usage.is_empty() {
            body.insert("usage".into(), Value::Object(self.usage.clone()));
        }
        Value::Object(body).to_string()
    }
}
