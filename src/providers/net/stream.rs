//! Streamed replies: Server-Sent Events read leniently and folded, per provider, into
//! the body a non-streamed call would have had, so the provider's ordinary parsing
//! (truncation, refusals, usage, estimates) applies to a streamed reply unchanged.
//!
//! Framing (the SSE rules, leniently): lines end in `\n` or `\r\n`; `event: NAME`
//! names the event, `data: ...` lines are joined with `\n`, a blank line dispatches;
//! comment lines (`:`), other fields and lines that are not `field: value` are
//! ignored; a last event not followed by a blank line is still dispatched. A body
//! whose first character is `{` or `[` is not a stream (a server that ignored
//! `stream: true`): it is kept whole and parsed as a non-streamed body.
use crate::http::{HttpError, StreamDecoder};

/// What a provider makes of the events of its stream.
pub(crate) trait Fold {
    /// One event: its name (`""` when unnamed) and data. Returns the text delta it
    /// carries (`""` for none).
    ///
    /// # Errors
    /// An error event, classified as the same error object in a JSON body would be.
    fn event(&mut self, name: &str, data: &str) -> Result<String, HttpError>;
    /// Whether the stream's terminator arrived (`[DONE]`, `message_stop`).
    fn done(&self) -> bool;
    /// The terminator, for the message of a stream cut short.
    fn terminator(&self) -> &'static str;
    /// The equivalent non-streamed JSON body of what was folded.
    fn body(&self) -> String;
}

/// A [`StreamDecoder`] over SSE framing and a provider's [`Fold`]; each text delta is
/// handed to [`crate::tokens::emit`].
pub(crate) struct Sse<F> {
    fold: F,
    line: Vec<u8>,
    name: String,
    data: Option<String>,
    /// `Some` once the body turned out not to be a stream: the raw body.
    raw: Option<Vec<u8>>,
    started: bool,
    delivered: bool,
}

impl<F: Fold> Sse<F> {
    pub(crate) fn new(fold: F) -> Sse<F> {
        Sse {
            fold,
            line: Vec::new(),
            name: String::new(),
            data: None,
            raw: None,
            started: false,
            delivered: false,
        }
    }

    fn dispatch(&mut self) -> Result<(), HttpError> {
        let name = std::mem::take(&mut self.name);
        let Some(data) = self.data.take() else {
            return Ok(());
        };
        if self.fold.done() {
            return Ok(());
        }
        let delta = self.fold.event(&name, &data)?;
        if !delta.is_empty() {
            self.delivered = true;
            crate::tokens::emit(&delta);
        }
        Ok(())
    }

    fn line(&mut self) -> Result<(), HttpError> {
        let bytes = std::mem::take(&mut self.line);
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        if text.is_empty() {
            return self.dispatch();
        }
        if text.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text, ""),
        };
        match field.trim_start_matches('\u{feff}') {
            "event" => self.name = value.trim().to_string(),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
        Ok(())
    }
}

impl<F: Fold> StreamDecoder for Sse<F> {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), HttpError> {
        if let Some(raw) = &mut self.raw {
            raw.extend_from_slice(bytes);
            return Ok(());
        }
        let mut rest = bytes;
        if !self.started {
            let body = String::from_utf8_lossy(bytes);
            let first = body
                .trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
                .chars()
                .next();
            match first {
                None => return Ok(()),
                Some('{' | '[') => {
                    self.raw = Some(bytes.to_vec());
                    return Ok(());
                }
                Some(_) => self.started = true,
            }
        }
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            self.line.extend_from_slice(&rest[..i]);
            rest = &rest[i + 1..];
            self.line()?;
        }
        self.line.extend_from_slice(rest);
        Ok(())
    }

    fn finish(&mut self) -> Result<String, HttpError> {
        if let Some(raw) = &self.raw {
            return Ok(String::from_utf8_lossy(raw).into_owned());
        }
        if !self.line.is_empty() {
            self.line()?;
        }
        self.dispatch()?;
        if !self.started {
            // An empty body: the ordinary check calls it what it is (transient).
            return Ok(String::new());
        }
        if !self.fold.done() {
            return Err(HttpError::Transient {
                message: format!(
                    "HTTP 200: body cut short: the stream ended before its `{}`",
                    self.fold.terminator()
                ),
                retry_after: None,
            });
        }
        Ok(self.fold.body())
    }

    fn delivered(&self) -> bool {
        self.delivered
    }
}

/// The data of an event as JSON; `None` for data that is not JSON (ignored: garbage
/// lines of a lenient stream).
pub(crate) fn json(data: &str) -> Option<serde_json::Value> {
    serde_json::from_str(data.trim()).ok()
}

/// The failure an error object of a stream stands for, classified as in a JSON body
/// (overloaded, server error, rate limit: transient; else permanent).
pub(crate) fn error_event(error: &serde_json::Value) -> HttpError {
    let body = serde_json::json!({ "error": error }).to_string();
    let resp = crate::http::HttpResponse {
        status: 200,
        body,
        content_type: None,
        attempts: 1,
    };
    match super::json_body(&resp) {
        Err(e) => e,
        Ok(_) => HttpError::Permanent {
            status: Some(200),
            message: "HTTP 200: the stream carried an error event".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects `name=data` of every event; done at `data: [DONE]`.
    #[derive(Default)]
    struct Log(Vec<String>, bool);
    impl Fold for Log {
        fn event(&mut self, name: &str, data: &str) -> Result<String, HttpError> {
            if data == "[DONE]" {
                self.1 = true;
            } else {
                self.0.push(format!("{name}={data}"));
            }
            Ok(String::new())
        }
        fn done(&self) -> bool {
            self.1
        }
        fn terminator(&self) -> &'static str {
            "[DONE]"
        }
        fn body(&self) -> String {
            self.0.join("|")
        }
    }

    #[test]
    fn framing_across_chunks_crlf_comments_and_garbage() {
        let mut d = Sse::new(Log::default());
        let body = ": keep-alive\r\nevent: a\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\ngarbage line\n\ndata:é\n\nretry: 10\ndata: [DONE]\n\ndata: after\n\n";
        for chunk in body.as_bytes().chunks(3) {
            d.feed(chunk).unwrap();
        }
        assert_eq!(d.finish().unwrap(), "a={\"x\":\n1}|=é");
    }

    #[test]
    fn a_stream_without_its_terminator_is_cut_short() {
        let mut d = Sse::new(Log::default());
        d.feed(b"data: {}\n\n").unwrap();
        let e = d.finish().unwrap_err();
        assert!(e.is_transient() && e.to_string().contains("[DONE]"), "{e}");
    }

    #[test]
    fn a_json_body_is_kept_whole() {
        let mut d = Sse::new(Log::default());
        d.feed(b" {\"choices\"").unwrap();
        d.feed(b": []}").unwrap();
        assert_eq!(d.finish().unwrap(), " {\"choices\": []}");
    }
}
