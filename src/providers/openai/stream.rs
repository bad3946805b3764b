//! The `openai` stream: Chat Completions with `stream: true` and
//! `stream_options: {include_usage: true}`, read as Server-Sent Events
//! (`data: {"choices": [{"delta": {"content": ...}, "finish_reason": ...}]}` chunks,
//! a last chunk carrying `usage`, then `data: [DONE]`), folded into the equivalent
//! non-streamed body `{"choices": [{"message": {"content", "refusal"},
//! "finish_reason"}], "usage"}`.
//!
//! Lenient like the non-streamed body: data that is not JSON and chunks without
//! choices are ignored; `content` as a string or an array of text parts; a `data:
//! {"error": ...}` chunk ends the attempt, classified as the same error object in a
//! JSON body would be. The terminator is `[DONE]`: a stream that ends without it is
//! cut short (transient).
use crate::http::HttpError;
use crate::providers::net::stream::{error_event, json, Fold};
use serde_json::{json, Map, Value};

/// What the chunks said so far.
#[derive(Default)]
pub(super) struct Chunks {
    text: String,
    refusal: String,
    finish: Option<Value>,
    usage: Option<Value>,
    choices: bool,
    done: bool,
}

impl Fold for Chunks {
    fn event(&mut self, _name: &str, data: &str) -> Result<String, HttpError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(String::new());
        }
        let Some(v) = json(data) else {
            return Ok(String::new());
        };
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            return Err(error_event(e));
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(String::new());
        };
        self.choices = true;
        if let Some(f) = choice.get("finish_reason").filter(|f| !f.is_null()) {
            self.finish = Some(f.clone());
        }
        let delta = choice.get("delta").or_else(|| choice.get("message"));
        if let Some(r) = delta.and_then(|d| d.get("refusal")).and_then(Value::as_str) {
            self.refusal.push_str(r);
        }
        let text = delta
            .and_then(|d| d.get("content"))
            .map(super::content_text)
            .unwrap_or_default();
        self.text.push_str(&text);
        Ok(text)
    }

    fn done(&self) -> bool {
        self.done
    }

    fn terminator(&self) -> &'static str {
        "data: [DONE]"
    }

    fn body(&self) -> String {
        let mut body = Map::new();
        if self.choices {
            let mut message = Map::new();
            message.insert("content".into(), json!(self.text));
            if !self.refusal.is_empty() {
                message.insert("refusal".into(), json!(self.refusal));
            }
            body.insert(
                "choices".into(),
                json!([{"message": message, "finish_reason": self.finish}]),
            );
        }
        if let Some(u) = &self.usage {
            body.insert("usage".into(), u.clone());
        }
        Value::Object(body).to_string()
    }
}
