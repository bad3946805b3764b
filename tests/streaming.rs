//! Token streaming from the `openai` and `anthropic` providers against wiremock
//! servers on 127.0.0.1 serving Server-Sent Events: tokens in order, usage, lenient
//! parsing, streams cut short (retried only before a token was delivered), error
//! events, record then replay, `ragloop run --stream`, and no streaming when nobody
//! listens.
use crate::providers_support::*;
use ragloop::runtime::{
    run, Observer, ResourceOptions, Resources, RunInput, RunResult, Status, StepRecord,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn openai_model(server: &MockServer) -> String {
    format!(
        "provider: openai, model: test-model, base_url: '{}/v1', api_key_env: RAGLOOP_TEST_OPENAI_KEY, temperature: 0.2, retries: 1, timeout_secs: 5",
        server.uri()
    )
}

fn anthropic_model(server: &MockServer) -> String {
    format!(
        "provider: anthropic, model: claude-test, base_url: '{}', api_key_env: RAGLOOP_TEST_ANTHROPIC_KEY, temperature: 0.2, retries: 1, timeout_secs: 5",
        server.uri()
    )
}

fn set_keys() {
    std::env::set_var("RAGLOOP_TEST_OPENAI_KEY", "sk-test-openai-123456");
    std::env::set_var("RAGLOOP_TEST_ANTHROPIC_KEY", "sk-ant-test-654321");
}

fn sse(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body.to_string())
}

/// `data:` lines of OpenAI chunks with `deltas` as content, then a usage chunk;
/// `[DONE]` when `done`.
fn openai_stream(deltas: &[&str], done: bool) -> String {
    let mut s = String::from(": a comment\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n");
    for d in deltas {
        let chunk =
            json!({"choices": [{"index": 0, "delta": {"content": d}, "finish_reason": null}]});
        s.push_str(&format!("data: {chunk}\n\n"));
    }
    if done {
        s.push_str(
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        );
        s.push_str("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":3,\"total_tokens\":14}}\n\n");
        s.push_str("data: [DONE]\n\n");
    }
    s
}

/// Anthropic events with `deltas` as text deltas; `message_stop` when `done`.
fn anthropic_stream(deltas: &[&str], done: bool) -> String {
    let mut s = String::from("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n");
    s.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    s.push_str("event: ping\ndata: {\"type\": \"ping\"}\n\n");
    for d in deltas {
        let ev = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}});
        s.push_str(&format!("event: content_block_delta\ndata: {ev}\n\n"));
    }
    if done {
        s.push_str(
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        );
        s.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n");
        s.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    }
    s
}

/// An observer that wants tokens and keeps them.
#[derive(Clone, Default)]
struct Tokens(Arc<Mutex<Vec<(String, String)>>>);

impl Tokens {
    fn texts(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().map(|t| t.1.clone()).collect()
    }
}

impl Observer for Tokens {
    fn wants_tokens(&self) -> bool {
        true
    }
    fn token(&mut self, node: &str, text: &str) {
        self.0.lock().unwrap().push((node.into(), text.into()));
    }
    fn step(&mut self, _: &StepRecord) {}
    fn finish(&mut self, _: &RunResult) {}
}

async fn mount(server: &MockServer, at: &str, responses: Vec<ResponseTemplate>) {
    Mock::given(method("POST"))
        .and(path(at))
        .respond_with(Sequence::new(responses))
        .mount(server)
        .await;
}

async fn run_with(p: &Project, opts: ResourceOptions, obs: &mut dyn Observer) -> RunResult {
    let prog = program(p);
    let res = Resources::prepare(&prog, opts).expect("resources");
    let input = RunInput {
        question: Some("q".into()),
        sets: vec![],
    };
    run(&prog, &res, &input, obs).await
}

#[test]
fn openai_tokens_arrive_in_order_with_usage_and_garbage_ignored() {
    set_keys();
    rt().block_on(async {
        let server = MockServer::start().await;
        let body = openai_stream(&["Hel", "lo, ", "world"], true).replace(
            "data: [DONE]",
            "not sse at all\ndata: {broken json\n\nevent: odd\ndata: {\"x\":1}\n\ndata: [DONE]",
        );
        mount(&server, "/v1/chat/completions", vec![sse(&body)]).await;
        let p = project(&openai_model(&server), false);
        let tokens = Tokens::default();
        let r = run_with(&p, ResourceOptions::default(), &mut tokens.clone()).await;
        assert_eq!(r.status, Status::Generated, "{:?}", r.error);
        assert_eq!(tokens.texts(), ["Hel", "lo, ", "world"]);
        assert!(tokens.0.lock().unwrap().iter().all(|t| t.0 == "judge"));
        assert_eq!(r.answer.as_deref(), Some("Hello, world"));
        assert_eq!(
            (r.usage.tokens.input_tokens, r.usage.tokens.output_tokens),
            (11, 3)
        );
        let b = &bodies(&server).await[0];
        assert_eq!(b["stream"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
    });
}

#[test]
fn nobody_listening_means_no_stream() {
    set_keys();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            "/v1/chat/completions",
            vec![ResponseTemplate::new(200).set_body_json(openai_text("plain"))],
        )
        .await;
        let p = project(&openai_model(&server), false);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.answer.as_deref(), Some("plain"), "{:?}", r.error);
        let b = &bodies(&server).await[0];
        assert!(
            b.get("stream").is_none() && b.get("stream_options").is_none(),
            "{b}"
        );
    });
}

#[test]
fn a_server_that_ignores_stream_gives_one_whole_token() {
    set_keys();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            "/v1/chat/completions",
            vec![ResponseTemplate::new(200).set_body_json(openai_text("all at once"))],
        )
        .await;
        let p = project(&openai_model(&server), false);
        let tokens = Tokens::default();
        let r = run_with(&p, ResourceOptions::default(), &mut tokens.clone()).await;
        assert_eq!(r.answer.as_deref(), Some("all at once"), "{:?}", r.error);
        assert_eq!(tokens.texts(), ["all at once"]);
        assert_eq!(r.usage.tokens.input_tokens, 11);
    });
}

#[test]
fn anthropic_tokens_and_usage() {
    set_keys();
    rt().block_on(async {
        let server = MockServer::start().await;
        let body = anthropic_stream(&["Cargo ", "check ", "checks."], true).replace(
            "event: ping",
            "event: something_new\ndata: {\"type\":\"something_new\"}\n\nevent: ping",
        );
        mount(&server, "/v1/messages", vec![sse(&body)]).await;
        let p = project(&anthropic_model(&server), false);
        let tokens = Tokens::default();
        let r = run_with(&p, ResourceOptions::default(), &mut tokens.clone()).await;
        assert_eq!(r.status, Status::Generated, "{:?}", r.error);
        assert_eq!(tokens.texts(), ["Cargo ", "check ", "checks."]);
        assert_eq!(r.answer.as_deref(), Some("Cargo check checks."));
        assert_eq!(
            (r.usage.tokens.input_tokens, r.usage.tokens.output_tokens),
            (20, 5)
        );
        assert_eq!(bodies(&server).await[0]["stream"], true);
    });
}

#[test]
fn a_stream_cut_after_tokens_fails_without_retry() {
    set_keys();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            "/v1/chat/completions",
            vec![
                sse(&openai_stream(&["par", "tial"], false)),
                sse(&openai_stream(&["never"], true)),
            ],
        )
        .await;
        let p = project(&openai_model(&server), false);
        let tokens = Tokens::default();
        let r = run_with(&p, ResourceOptions::default(), &mut tokens.clone()).await;
        assert_eq!(r.status, Status::Failed);
        let e = r.error.unwrap();
        assert!(e.contains("[DONE]") && e.contains("not retried"), "{e}");
        assert_eq!(tokens.texts(), ["par", "tial"]);
        assert_eq!(bodies(&server).await.len(), 1, "no retry after tokens");
    });
}

#[test]
fn a_stream_cut_or_failed_before_any_token_is_retried() {
    set_keys();
    rt().block_on(async {
        // OpenAI: cut before any content.
        let server = MockServer::start().await;
        mount(
            &server,
            "/v1/chat/completions",
            vec![
                sse(&openai_stream(&[], false)),
                sse(&openai_stream(&["second ", "try"], true)),
            ],
        )
        .await;
        let p = project(&openai_model(&server), false);
        let tokens = Tokens::default();
        let r = run_with(&p, ResourceOptions::default(), &mut tokens.clone()).await;
        assert_eq!(r.answer.as_deref(), Some("second try"), "{:?}", r.error);
        assert_eq!(tokens.texts(), ["second ", "try"]);
        assert_eq!(bodies(&server).await.len(), 2);
        // Anthropic: an overloaded error event, then a good stream.
        let server = MockServer::start().await;
        let overloaded = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":20}}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        mount(
            &server,
            "/v1/messages",
            vec![sse(overloaded), sse(&anthropic_stream(&["ok"], true))],
        )
        .await;
        let p = project(&anthropic_model(&server), false);
        let tokens = Tokens::default();
        let r = run_with(&p, ResourceOptions::default(), &mut tokens.clone()).await;
        assert_eq!(r.answer.as_deref(), Some("ok"), "{:?}", r.error);
        assert_eq!(bodies(&server).await.len(), 2);
        // A permanent error event fails at once, with the server's message.
        let server = MockServer::start().await;
        let bad = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad thing\"}}\n\n";
        mount(&server, "/v1/messages", vec![sse(bad)]).await;
        let p = project(&anthropic_model(&server), false);
        let r = run_with(&p, ResourceOptions::default(), &mut Tokens::default()).await;
        assert_eq!(r.status, Status::Failed);
        assert!(r.error.as_deref().unwrap().contains("bad thing"), "{:?}", r.error);
        assert_eq!(bodies(&server).await.len(), 1);
    });
}

#[test]
fn an_over_long_stream_is_bounded() {
    set_keys();
    rt().block_on(async {
        let server = MockServer::start().await;
        let chunk = "x".repeat(1 << 20);
        let n = (ragloop::http::MAX_BODY_BYTES >> 20) + 2;
        let deltas: Vec<&str> = (0..n).map(|_| chunk.as_str()).collect();
        mount(
            &server,
            "/v1/chat/completions",
            vec![sse(&openai_stream(&deltas, true))],
        )
        .await;
        let p = project(&openai_model(&server), false);
        let r = run_with(&p, ResourceOptions::default(), &mut Tokens::default()).await;
        assert_eq!(r.status, Status::Failed);
        let e = r.error.unwrap();
        assert!(e.contains("larger than 16 MiB"), "{e}");
        assert_eq!(bodies(&server).await.len(), 1, "not retried");
    });
}

#[test]
fn a_streamed_run_is_recorded_whole_and_replays_as_one_token() {
    use ragloop::providers::cassette::{Cassette, CassetteWriter};
    set_keys();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            "/v1/chat/completions",
            vec![sse(&openai_stream(&["Hel", "lo, ", "world"], true))],
        )
        .await;
        let p = project(&openai_model(&server), false);
        let cas = p.dir.path().join("c.jsonl");
        let opts = ResourceOptions {
            record: Some(Arc::new(CassetteWriter::create(&cas).unwrap())),
            ..ResourceOptions::default()
        };
        let tokens = Tokens::default();
        let recorded = run_with(&p, opts, &mut tokens.clone()).await;
        assert_eq!(
            recorded.answer.as_deref(),
            Some("Hello, world"),
            "{:?}",
            recorded.error
        );
        assert_eq!(tokens.texts().len(), 3);
        let lines: Vec<Value> = std::fs::read_to_string(&cas)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["output"], "Hello, world");
        assert_eq!(lines[0]["usage"]["input_tokens"], 11);
        let opts = ResourceOptions {
            replay: Some(Arc::new(Cassette::load(&cas).unwrap())),
            ..ResourceOptions::default()
        };
        let tokens = Tokens::default();
        let replayed = run_with(&p, opts, &mut tokens.clone()).await;
        assert_eq!(replayed.answer, recorded.answer, "{:?}", replayed.error);
        assert_eq!(tokens.texts(), ["Hello, world"]);
        assert_eq!(replayed.usage.cached_calls, 1);
        assert_eq!(bodies(&server).await.len(), 1, "replay calls no model");
    });
}

#[test]
fn run_stream_prints_tokens_then_the_summary_on_stderr() {
    set_keys();
    let rt = rt();
    let server = rt.block_on(MockServer::start());
    rt.block_on(mount(
        &server,
        "/v1/chat/completions",
        vec![sse(&openai_stream(
            &["Hel", "lo, ", "world\u{1b}[31m"],
            true,
        ))],
    ));
    let p = project(&openai_model(&server), false);
    let cache = tempfile::tempdir().unwrap();
    let out = assert_cmd::Command::cargo_bin("ragloop")
        .unwrap()
        .env("RAGLOOP_CACHE_DIR", cache.path())
        .arg("run")
        .arg(&p.spec)
        .args(["--question", "q", "--stream"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout, "Hello, world\\u{1b}[31m\n", "{stderr}");
    assert!(stderr.contains("Status: generated"), "{stderr}");
    assert_eq!(rt.block_on(bodies(&server))[0]["stream"], true);
    // With --json: a usage error.
    let out = assert_cmd::Command::cargo_bin("ragloop")
        .unwrap()
        .env("RAGLOOP_CACHE_DIR", cache.path())
        .arg("run")
        .arg(&p.spec)
        .args(["--question", "q", "--stream", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn serve_runs_stream_sends_the_provider_tokens() {
    use ragloop::serve::{ServeOptions, Server};
    set_keys();
    rt().block_on(async {
        let mock = MockServer::start().await;
        mount(
            &mock,
            "/v1/chat/completions",
            vec![sse(&openai_stream(&["Hel", "lo, ", "world"], true))],
        )
        .await;
        let p = project(&openai_model(&mock), false);
        let opts = ServeOptions {
            specs: vec![p.spec.clone()],
            reload_interval: None,
            ..ServeOptions::default()
        };
        let server = tokio::task::spawn_blocking(move || Server::load(opts))
            .await
            .unwrap()
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(server.serve(listener, async move {
            let _ = rx.await;
        }));
        let text = reqwest::Client::new()
            .post(format!("{base}/runs/stream"))
            .body(json!({"graph": "spec", "input": {"question": "q"}}).to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let mut events: Vec<(String, Value)> = Vec::new();
        for block in text.split("\n\n") {
            let event = block.lines().find_map(|l| l.strip_prefix("event:"));
            let data = block.lines().find_map(|l| l.strip_prefix("data:"));
            if let (Some(e), Some(d)) = (event, data) {
                events.push((e.trim().into(), serde_json::from_str(d.trim()).unwrap()));
            }
        }
        let names: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "metadata",
                "node_start",
                "token",
                "token",
                "token",
                "node_end",
                "end"
            ],
            "{text}"
        );
        let texts: Vec<&str> = events
            .iter()
            .filter(|e| e.0 == "token")
            .map(|e| {
                assert_eq!(e.1["node"], "judge");
                e.1["text"].as_str().unwrap()
            })
            .collect();
        assert_eq!(texts, ["Hel", "lo, ", "world"]);
        assert_eq!(events[6].1["answer"], "Hello, world");
        let _ = tx.send(());
        done.await.unwrap().unwrap();
    });
}
