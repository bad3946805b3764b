//! A local OpenAI-compatible Chat Completions mock for the benchmarks
//! (`examples/providers_bench.rs`, `examples/eval_http_bench.rs`), included with
//! `#[path = "support/mock_openai.rs"] mod mock_openai;`.
//!
//! A plain thread-per-connection HTTP/1.1 server with keep-alive, so its delay is a
//! precise `thread::sleep` rather than a timer-wheel tick and 32 connections in
//! flight are 32 threads sleeping at once. It drives CRAG's happy path: every
//! document graded relevant (the `document_id` echoed from the passage), a generated
//! answer with a citation, an answer grade "grounded and on topic".
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// Starts the mock on 127.0.0.1 (a free port) answering every request after `delay`;
/// returns its base URL (`http://127.0.0.1:PORT/v1`). The server lives as long as
/// the process.
pub fn start(delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            std::thread::spawn(move || serve(s, delay));
        }
    });
    format!("http://{addr}/v1")
}

fn answer(body: &Value) -> Value {
    // The asked shape: a call of the offered function (`tool_call` mode), or the JSON
    // object as text (`response_format` json_schema, the default mode).
    let (tool, as_text) = match body.pointer("/tools/0/function/name") {
        Some(n) => (n.as_str(), false),
        None => (
            body.pointer("/response_format/json_schema/name")
                .and_then(Value::as_str),
            true,
        ),
    };
    let msg = |message: Value| {
        json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
               "usage": {"prompt_tokens": 100, "completion_tokens": 20}})
    };
    let call = |name: &str, args: Value| {
        if as_text {
            return msg(json!({"role": "assistant", "content": args.to_string()}));
        }
        msg(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]}),
        )
    };
    match tool {
        Some("GradingResult") => {
            let user = body
                .get("messages")
                .and_then(Value::as_array)
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or("");
            let id = user
                .split("Passage ")
                .nth(1)
                .and_then(|r| r.split(" (from").next())
                .unwrap_or("");
            call(
                "GradingResult",
                json!({"document_id": id, "binary_score": "yes", "confidence": 0.9}),
            )
        }
        Some("AnswerGrade") => call(
            "AnswerGrade",
            json!({"grounded": true, "addresses_question": true}),
        ),
        Some(other) => call(other, json!({})),
        None => msg(json!({"role": "assistant",
            "content": "cargo check quickly checks your code to make sure it compiles but doesn't produce an executable. [ch01-03-hello-cargo.html]"})),
    }
}

fn serve(stream: TcpStream, delay: Duration) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut out = stream;
    loop {
        let mut len = 0usize;
        let mut line = String::new();
        let mut first = true;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" || line == "\n" {
                if first {
                    continue;
                }
                break;
            }
            first = false;
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        std::thread::sleep(delay);
        let resp = answer(&req).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            resp.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(resp.as_bytes()).is_err() {
            return;
        }
        let _ = out.flush();
    }
}
