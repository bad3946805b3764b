//! `ragloop serve` in process: a real server on 127.0.0.1:0, a real HTTP client
//! (reqwest), scripted providers (no network). Runs, SSE event order and ids,
//! Last-Event-ID resume, hot reload (success and failure), every bad-input status,
//! the Prometheus text, the OpenAPI document against the router, shutdown.
use ragloop::serve::{ServeOptions, Server};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const SPEC: &str = r#"version: 1
name: svc
state:
  schema:
    type: object
    properties:
      question: {type: string, maxLength: 200}
      answer: {type: string}
      n: {type: integer, minimum: 0}
      tag: {type: string}
    required: [question]
  initial: {n: 0}
models:
  m: {provider: scripted, params: {file: fixture.json}}
output: {answer: answer}
limits: {max_steps: 10}
entry: count
nodes:
  count: {kind: update, update: {n: "n + 1"}}
  say: {kind: llm, model: m, prompt: {user: {file: say.jinja}}, update: {answer: output}}
edges:
  count: say
  say: END
variants:
  short:
    set:
      limits.max_steps: 1
"#;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// A spec dir with `svc.yaml`, its prompt and a fixture of `answers` for `say`.
    fn new(answers: Value) -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("svc.yaml"), SPEC).unwrap();
        std::fs::write(dir.path().join("say.jinja"), "Q: {{ question }}").unwrap();
        std::fs::write(
            dir.path().join("fixture.json"),
            json!({ "say": answers }).to_string(),
        )
        .unwrap();
        Env { dir }
    }
    fn path(&self, p: &str) -> std::path::PathBuf {
        self.dir.path().join(p)
    }
    fn options(&self) -> ServeOptions {
        ServeOptions {
            specs: vec![self.path("svc.yaml")],
            reload_interval: None,
            ..ServeOptions::default()
        }
    }
}

/// A server running on this test's runtime.
struct Running {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
    http: reqwest::Client,
}

async fn start(opts: ServeOptions) -> Running {
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
    Running {
        base,
        stop: Some(tx),
        done,
        http: reqwest::Client::new(),
    }
}

impl Running {
    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_raw(path, body.to_string()).await
    }
    async fn post_raw(&self, path: &str, body: String) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let code = r.status().as_u16();
        let bytes = r.bytes().await.unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }
    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let code = r.status().as_u16();
        let bytes = r.bytes().await.unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }
    async fn text(&self, path: &str) -> (u16, String, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let code = r.status().as_u16();
        let ct = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        (code, ct, r.text().await.unwrap())
    }
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(60), self.done)
            .await
            .expect("the server stops")
            .unwrap()
            .unwrap();
    }
}

/// One SSE event: (id, event, data).
type Sse = (u64, String, Value);

/// Parses complete events out of `text` (blocks ended by a blank line; comments
/// skipped).
fn parse_sse(text: &str) -> Vec<Sse> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let (mut id, mut event, mut data) = (None, None, String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().parse::<u64>().expect("numeric id"));
            } else if let Some(v) = line.strip_prefix("event:") {
                event = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if let (Some(id), Some(event)) = (id, event) {
            out.push((id, event, serde_json::from_str(&data).expect("JSON data")));
        }
    }
    out
}

async fn stream_all(s: &Running, body: &Value) -> (String, Vec<Sse>) {
    let r = s
        .http
        .post(format!("{}/runs/stream", s.base))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let id = r.headers()["x-ragloop-run-id"]
        .to_str()
        .unwrap()
        .to_string();
    let text = r.text().await.unwrap();
    (id, parse_sse(&text))
}

fn names(events: &[Sse]) -> Vec<&str> {
    events.iter().map(|(_, e, _)| e.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_answers_what_run_json_prints() {
    let env = Env::new(json!(["first answer", "second"]));
    let s = start(env.options()).await;
    let (code, v) = s
        .post(
            "/runs/wait",
            &json!({"graph": "svc", "input": {"question": "hi"}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    // The keys and values `ragloop run --json` prints.
    assert_eq!(v["status"], "generated");
    assert_eq!(v["answer"], "first answer");
    assert_eq!(v["path"], json!(["count", "say"]));
    assert_eq!(v["steps"], 2);
    assert_eq!(v["iterations"], 1);
    assert_eq!(v["state"]["n"], 1);
    assert_eq!(v["usage"]["calls"], 1);
    assert!(v.get("error").is_some() && v.get("sources").is_some());
    // The same through `assistant_id`, a string input and a variant.
    let (code, v) = s
        .post(
            "/runs/wait",
            &json!({"assistant_id": "svc", "input": "again", "config": {"configurable": {"variant": "short"}}}),
        )
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["status"], "limit", "{v}");
    assert_eq!(v["variant"], "short");
    s.stop().await;
}

#[test]
fn run_json_and_wait_are_one_function() {
    // `ragloop run --json` prints RunResult::to_json; the server answers the same.
    let r = ragloop::runtime::RunResult::failed(Some("v"), "boom".into());
    let v = r.to_json();
    for key in [
        "status",
        "answer",
        "sources",
        "path",
        "iterations",
        "steps",
        "state",
        "usage",
        "error",
        "variant",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_sends_events_in_order_with_ids() {
    let env = Env::new(json!(["streamed"]));
    let s = start(env.options()).await;
    let (run_id, events) =
        stream_all(&s, &json!({"graph": "svc", "input": {"question": "hi"}})).await;
    assert_eq!(
        names(&events),
        [
            "metadata",
            "node_start",
            "node_end",
            "node_start",
            "token",
            "node_end",
            "end"
        ],
        "{events:?}"
    );
    let ids: Vec<u64> = events.iter().map(|e| e.0).collect();
    assert_eq!(ids, (0..events.len() as u64).collect::<Vec<_>>());
    assert_eq!(events[0].2["run_id"], json!(run_id));
    assert_eq!(events[0].2["graph"], "svc");
    assert_eq!(
        events[1].2,
        json!({"step": 1, "node": "count", "kind": "update"})
    );
    let count_end = &events[2].2;
    assert_eq!(count_end["node"], "count");
    assert_eq!(count_end["delta"], json!({"n": 1}));
    assert_eq!(count_end["route"]["to"], "say");
    assert_eq!(count_end["route"]["arm"], "static");
    // A provider that does not stream (scripted): its answer is one token event.
    assert_eq!(events[4].2, json!({"node": "say", "text": "streamed"}));
    let say_end = &events[5].2;
    assert_eq!(say_end["delta"]["answer"], "streamed");
    assert_eq!(say_end["llm"]["calls"], 1);
    assert_eq!(say_end["route"]["to"], "END");
    assert_eq!(events[6].2["status"], "generated");
    assert_eq!(events[6].2["answer"], "streamed");
    // The run is kept: its status and result.
    let (code, v) = s.get(&format!("/runs/{run_id}")).await;
    assert_eq!(code, 200);
    assert_eq!(v["status"], "generated");
    assert_eq!(v["events"], 7);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_is_200_with_an_error_event() {
    let env = Env::new(json!([{"error": "the model is down"}]));
    let s = start(env.options()).await;
    let (_, events) = stream_all(&s, &json!({"graph": "svc", "input": "hi"})).await;
    let n = names(&events);
    assert_eq!(&n[n.len() - 2..], ["error", "end"], "{events:?}");
    assert_eq!(events[n.len() - 2].2["status"], "failed");
    assert!(events[n.len() - 2].2["message"]
        .as_str()
        .unwrap()
        .contains("say"));
    assert_eq!(events[n.len() - 1].2["status"], "failed");
    s.stop().await;
    let env = Env::new(json!([{"error": "the model is down"}]));
    let s = start(env.options()).await;
    let (code, v) = s
        .post("/runs/wait", &json!({"graph": "svc", "input": "hi"}))
        .await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["status"], "failed");
    assert!(
        v["error"].as_str().unwrap().contains("the model is down"),
        "{v}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_resumes_after_that_event() {
    let env = Env::new(json!([
        "done",
        {"output": "slow one", "delay_ms": 700}
    ]));
    let s = start(env.options()).await;
    // A finished run: replayed from after event 2.
    let (run_id, all) = stream_all(&s, &json!({"graph": "svc", "input": "hi"})).await;
    let r = s
        .http
        .get(format!("{}/runs/{run_id}/stream", s.base))
        .header("Last-Event-ID", "2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let rest = parse_sse(&r.text().await.unwrap());
    assert_eq!(rest, all[3..].to_vec());
    // Past the last event of a finished run: not one of its ids.
    let r = s
        .http
        .get(format!("{}/runs/{run_id}/stream", s.base))
        .header("Last-Event-ID", all.len().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_error(400, &v, 400, "invalid_last_event_id");
    // Its last id is still fine (nothing after it).
    let r = s
        .http
        .get(format!("{}/runs/{run_id}/stream", s.base))
        .header("Last-Event-ID", (all.len() - 1).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // A live run: the client reads the first event, leaves, and comes back.
    let mut r = s
        .http
        .post(format!("{}/runs/stream", s.base))
        .body(json!({"graph": "svc", "input": "hi"}).to_string())
        .send()
        .await
        .unwrap();
    let live_id = r.headers()["x-ragloop-run-id"]
        .to_str()
        .unwrap()
        .to_string();
    let mut seen = String::new();
    let first = loop {
        let chunk = r.chunk().await.unwrap().expect("an event before the end");
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
        let got = parse_sse(&seen);
        if !got.is_empty() {
            break got;
        }
    };
    drop(r);
    let last = first.last().unwrap().0;
    let r = s
        .http
        .get(format!("{}/runs/{live_id}/stream", s.base))
        .header("Last-Event-ID", last.to_string())
        .send()
        .await
        .unwrap();
    let rest = parse_sse(&r.text().await.unwrap());
    let ids: Vec<u64> = first.iter().chain(&rest).map(|e| e.0).collect();
    assert_eq!(
        ids,
        (0..ids.len() as u64).collect::<Vec<_>>(),
        "no gap, no repeat"
    );
    let end = rest.last().unwrap();
    assert_eq!(end.1, "end");
    // The disconnect did not cancel the run.
    assert_eq!(end.2["status"], "generated", "{end:?}");
    assert_eq!(end.2["answer"], "slow one");
    // Bad resumes.
    let r = s
        .http
        .get(format!("{}/runs/{live_id}/stream", s.base))
        .header("Last-Event-ID", "abc")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let (code, v) = s.get("/runs/no-such-run/stream").await;
    assert_eq!(
        (code, v["error"]["code"].clone()),
        (404, json!("unknown_run"))
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_runs_are_kept_within_the_retention() {
    let env = Env::new(json!(["a", "b", "c"]));
    let mut opts = env.options();
    opts.retention.keep_runs = 2;
    let s = start(opts).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (id, _) = stream_all(&s, &json!({"graph": "svc", "input": "hi"})).await;
        ids.push(id);
    }
    // A run is filed as finished before its `end` event: the oldest is gone beyond 2.
    assert_eq!(s.get(&format!("/runs/{}", ids[0])).await.0, 404);
    assert_eq!(s.get(&format!("/runs/{}", ids[1])).await.0, 200);
    assert_eq!(s.get(&format!("/runs/{}", ids[2])).await.0, 200);
    s.stop().await;
}

fn assert_error(code: u16, v: &Value, status: u16, err: &str) {
    assert_eq!(code, status, "{v}");
    assert_eq!(v["error"]["code"], json!(err), "{v}");
    assert!(
        !v["error"]["message"].as_str().unwrap_or("").is_empty(),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_right_status_and_an_error_body() {
    let env = Env::new(json!(["ok"]));
    let mut opts = env.options();
    opts.max_body_bytes = 1024;
    let s = start(opts).await;
    for path in ["/runs/wait", "/runs/stream"] {
        let (c, v) = s.post_raw(path, "{not json".into()).await;
        assert_error(c, &v, 400, "malformed_json");
        let (c, v) = s.post_raw(path, String::new()).await;
        assert_error(c, &v, 400, "malformed_json");
        let (c, v) = s.post(path, &json!({"graph": "nope", "input": "hi"})).await;
        assert_error(c, &v, 404, "unknown_graph");
        let (c, v) = s
            .post(
                path,
                &json!({"graph": "svc", "input": "hi", "variant": "wide"}),
            )
            .await;
        assert_error(c, &v, 404, "unknown_variant");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("short"),
            "{v}"
        );
        // Against the state schema: too long, wrong type, below the minimum, unknown field.
        let long = "x".repeat(300);
        for input in [
            json!({"question": long}),
            json!({"question": 5}),
            json!({"question": "hi", "n": -1}),
            json!({"question": "hi", "n": "two"}),
            json!({"question": "hi", "nope": 1}),
            json!({"question": "   "}),
            json!({}),
            json!([1, 2]),
        ] {
            let (c, v) = s.post(path, &json!({"graph": "svc", "input": input})).await;
            assert_error(c, &v, 422, "invalid_input");
            // In the request's words, not the command line's.
            let message = v["error"]["message"].as_str().unwrap_or("");
            assert!(!message.contains("--set"), "{v}");
        }
        let (c, v) = s.post(path, &json!({"graph": "svc"})).await;
        assert_error(c, &v, 422, "invalid_input");
        let (c, v) = s.post(path, &json!({"input": "hi"})).await;
        assert_error(c, &v, 422, "invalid_request");
        let (c, v) = s
            .post(
                path,
                &json!({"graph": "svc", "input": "hi", "varaint": "short"}),
            )
            .await;
        assert_error(c, &v, 422, "invalid_request");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("varaint"),
            "{v}"
        );
        let (c, v) = s.post(path, &json!({"graph": 7, "input": "hi"})).await;
        assert_error(c, &v, 422, "invalid_request");
        let (c, v) = s
            .post(
                path,
                &json!({"graph": "svc", "input": "hi", "config": {"configurable": {"models": ["m=offline"]}}}),
            )
            .await;
        assert_error(c, &v, 403, "model_overrides_disabled");
        let big = json!({"graph": "svc", "input": "x".repeat(2000)}).to_string();
        let (c, v) = s.post_raw(path, big).await;
        assert_error(c, &v, 413, "body_too_large");
    }
    let (c, v) = s.get("/graphs/nope").await;
    assert_error(c, &v, 404, "unknown_graph");
    let (c, v) = s.get("/no/such/route").await;
    assert_error(c, &v, 404, "unknown_route");
    let (c, v) = s.post("/graphs", &json!({})).await;
    assert_error(c, &v, 405, "method_not_allowed");
    let (c, v) = s.post("/threads", &json!({})).await;
    // Without a checkpoint store (the in-process default), threads are a 503.
    assert_error(c, &v, 503, "checkpoints_unavailable");
    // Nothing above ran: the one scripted answer is still there.
    let (c, v) = s
        .post("/runs/wait", &json!({"graph": "svc", "input": "hi"}))
        .await;
    assert_eq!((c, v["answer"].clone()), (200, json!("ok")), "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_overrides_need_the_flag_and_are_checked() {
    let env = Env::new(json!(["ok"]));
    let mut opts = env.options();
    opts.allow_model_overrides = true;
    let s = start(opts).await;
    let (c, v) = s
        .post(
            "/runs/wait",
            &json!({"graph": "svc", "input": "hi", "config": {"configurable": {"models": ["nosuch=offline"]}}}),
        )
        .await;
    assert_error(c, &v, 422, "invalid_override");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_beyond_the_limit_get_429() {
    let env = Env::new(json!([{"output": "slow", "delay_ms": 3000}, "fast"]));
    let mut opts = env.options();
    opts.max_runs = 1;
    let s = start(opts).await;
    let slow = s
        .http
        .post(format!("{}/runs/stream", s.base))
        .body(json!({"graph": "svc", "input": "hi"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(slow.status().as_u16(), 200);
    let r = s
        .http
        .post(format!("{}/runs/wait", s.base))
        .body(json!({"graph": "svc", "input": "hi"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 429);
    assert_eq!(r.headers()["retry-after"], "1");
    let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(v["error"]["code"], "too_many_runs");
    let (_, metrics, text) = s.text("/metrics").await;
    let _ = metrics;
    assert!(text.contains("ragloop_runs_rejected_total 1"), "{text}");
    assert!(text.contains("ragloop_runs_in_flight 1"), "{text}");
    let _ = slow.text().await.unwrap();
    // The slot is free again once the run ended.
    let (c, v) = s
        .post("/runs/wait", &json!({"graph": "svc", "input": "hi"}))
        .await;
    assert_eq!((c, v["answer"].clone()), (200, json!("fast")), "{v}");
    s.stop().await;
}

/// Waits until `/graphs/svc` satisfies `pred` (hot reload polls every 50 ms here).
async fn until(s: &Running, pred: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..400 {
        let (_, v) = s.get("/graphs/svc").await;
        if pred(&v) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the graph never reached the expected state");
}

/// Replaces a file at once (write a sibling, rename it over): a poll never sees it
/// half written.
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn has_node(v: &Value, name: &str) -> bool {
    v["nodes"]
        .as_array()
        .is_some_and(|ns| ns.iter().any(|n| n["name"] == name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_swaps_on_success_and_keeps_the_old_on_failure() {
    let env = Env::new(json!([{"output": "old version", "delay_ms": 800}, "x", "y"]));
    let mut opts = env.options();
    opts.reload_interval = Some(Duration::from_millis(50));
    let s = start(opts).await;
    let (_, v) = s.get("/graphs/svc").await;
    let gen1 = v["generation"].as_u64().unwrap();
    assert_eq!(v["served"], true);
    assert!(v["mermaid"].as_str().unwrap().contains("flowchart"), "{v}");
    // A run in flight on the first version (its metadata event says so)...
    let mut inflight = s
        .http
        .post(format!("{}/runs/stream", s.base))
        .body(json!({"graph": "svc", "input": "hi"}).to_string())
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    while parse_sse(&seen).is_empty() {
        let chunk = inflight.chunk().await.unwrap().expect("metadata");
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(parse_sse(&seen)[0].2["generation"].as_u64(), Some(gen1));
    // ...while the spec changes: a new node on the path, a new fixture (written first,
    // so the version with the new node reads it).
    let v2 = SPEC
        .replace("  count: say\n", "  count: tag\n  tag: say\n")
        .replace(
            "  say: {kind: llm",
            "  tag: {kind: update, update: {tag: \"'v2'\"}}\n  say: {kind: llm",
        );
    write(
        &env.path("fixture.json"),
        &json!({"say": ["new version", "again"]}).to_string(),
    );
    write(&env.path("svc.yaml"), &v2);
    let v = until(&s, |v| has_node(v, "tag")).await;
    assert_eq!(v["error"], Value::Null);
    let gen2 = v["generation"].as_u64().unwrap();
    assert!(gen2 > gen1);
    seen.push_str(&inflight.text().await.unwrap());
    let old = parse_sse(&seen).last().unwrap().2.clone();
    assert_eq!(old["answer"], "old version", "{old}");
    assert_eq!(
        old["path"],
        json!(["count", "say"]),
        "in-flight runs finish on the old version"
    );
    let (_, new) = s
        .post("/runs/wait", &json!({"graph": "svc", "input": "hi"}))
        .await;
    assert_eq!(new["path"], json!(["count", "tag", "say"]), "{new}");
    assert_eq!(new["answer"], "new version");
    // A prompt edit alone reloads too (a new version, which reads the fixture afresh).
    write(&env.path("say.jinja"), "Question: {{ question }}");
    let v = until(&s, |v| v["generation"].as_u64() > Some(gen2)).await;
    let gen3 = v["generation"].as_u64().unwrap();
    // A broken spec: the old version stays served, the diagnostics show.
    write(
        &env.path("svc.yaml"),
        &v2.replace("  tag: say\n", "  tag: nowhere\n"),
    );
    let v = until(&s, |v| !v["error"].is_null()).await;
    assert_eq!(v["served"], true);
    assert_eq!(v["generation"].as_u64(), Some(gen3));
    assert!(has_node(&v, "tag"));
    let diags = v["error"]["diagnostics"].as_array().unwrap();
    assert!(!diags.is_empty(), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("nowhere"),
        "{v}"
    );
    let (_, list) = s.get("/graphs").await;
    assert!(!list["graphs"][0]["error"].is_null(), "{list}");
    let (c, r) = s
        .post("/runs/wait", &json!({"graph": "svc", "input": "hi"}))
        .await;
    assert_eq!(c, 200);
    assert_eq!(
        r["path"],
        json!(["count", "tag", "say"]),
        "the previous version still runs: {r}"
    );
    assert_eq!(r["answer"], "new version", "{r}");
    let (_, _, metrics) = s.text("/metrics").await;
    assert!(
        metrics.contains("ragloop_reloads_total{graph=\"svc\",result=\"failed\"} 1"),
        "{metrics}"
    );
    // Fixed again (the first spec): served, the error gone.
    write(&env.path("svc.yaml"), SPEC);
    let v = until(&s, |v| v["error"].is_null() && !has_node(v, "tag")).await;
    assert!(v["generation"].as_u64() > Some(gen3));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_specs_are_listed_with_diagnostics_and_not_served() {
    let env = Env::new(json!(["ok"]));
    std::fs::write(
        env.path("broken.yaml"),
        SPEC.replace("entry: count", "entry: nothere"),
    )
    .unwrap();
    let opts = ServeOptions {
        specs: vec![env.dir.path().to_path_buf()],
        reload_interval: None,
        ..ServeOptions::default()
    };
    let s = start(opts).await;
    let (_, list) = s.get("/graphs").await;
    let graphs = list["graphs"].as_array().unwrap();
    let broken = graphs.iter().find(|g| g["name"] == "broken").unwrap();
    assert_eq!(broken["served"], false);
    assert!(
        broken["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothere"),
        "{broken}"
    );
    let svc = graphs.iter().find(|g| g["name"] == "svc").unwrap();
    assert_eq!(svc["served"], true);
    let (c, v) = s
        .post("/runs/wait", &json!({"graph": "broken", "input": "hi"}))
        .await;
    assert_error(c, &v, 404, "unknown_graph");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("does not validate"));
    let (_, h) = s.get("/healthz").await;
    assert_eq!(h["status"], "ok");
    assert_eq!(h["graphs"], json!({"served": 1, "invalid": 1}));
    s.stop().await;
}

/// Checks the text exposition format line by line: HELP/TYPE before a family's
/// samples, one TYPE per family, sample syntax, numeric values, histogram buckets
/// cumulative with `+Inf` equal to `_count`.
fn check_exposition(text: &str) {
    use std::collections::HashMap;
    let mut types: HashMap<String, String> = HashMap::new();
    let mut buckets: HashMap<String, (f64, f64)> = HashMap::new();
    let mut counts: HashMap<String, f64> = HashMap::new();
    let mut inf: HashMap<String, f64> = HashMap::new();
    for line in text.lines() {
        assert!(!line.is_empty(), "no blank line expected");
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let kw = parts.next().unwrap();
            let name = parts.next().expect("a metric name");
            assert!(name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'));
            match kw {
                "HELP" => assert!(parts.next().is_some_and(|h| !h.is_empty())),
                "TYPE" => {
                    let t = parts.next().unwrap();
                    assert!(["counter", "gauge", "histogram", "summary", "untyped"].contains(&t));
                    assert!(
                        types.insert(name.to_string(), t.to_string()).is_none(),
                        "TYPE twice: {name}"
                    );
                }
                other => panic!("unknown comment {other}"),
            }
            continue;
        }
        // name{labels} value
        let (head, value) = line.rsplit_once(' ').expect("name and value");
        let v: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v.parse().unwrap_or_else(|_| panic!("not a number: {line}")),
        };
        let (name, labels) = match head.find('{') {
            Some(i) => {
                assert!(head.ends_with('}'), "{line}");
                (&head[..i], &head[i + 1..head.len() - 1])
            }
            None => (head, ""),
        };
        // Labels: k="v" pairs, values with escapes only for \\ \" \n.
        let mut rest = labels;
        let mut le = None;
        let mut others = Vec::new();
        while !rest.is_empty() {
            let (k, after) = rest.split_once("=\"").expect("label=\"value\"");
            assert!(
                k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            let mut end = None;
            let mut esc = false;
            for (i, c) in after.char_indices() {
                if esc {
                    assert!(matches!(c, '\\' | '"' | 'n'), "{line}");
                    esc = false;
                } else if c == '\\' {
                    esc = true;
                } else if c == '"' {
                    end = Some(i);
                    break;
                }
            }
            let end = end.expect("closing quote");
            if k == "le" {
                le = Some(after[..end].to_string());
            } else {
                others.push(format!("{k}={}", &after[..end]));
            }
            rest = after[end + 1..]
                .strip_prefix(',')
                .unwrap_or(&after[end + 1..]);
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).map(String::as_str) == Some("histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "sample before its TYPE: {line}");
        let series = format!("{family}{{{}}}", others.join(","));
        if name.ends_with("_bucket") && family != name {
            let le = le.expect("a bucket has le");
            let bound: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            let prev = buckets
                .entry(series.clone())
                .or_insert((f64::NEG_INFINITY, 0.0));
            assert!(bound > prev.0, "buckets in order: {line}");
            assert!(v >= prev.1, "buckets cumulative: {line}");
            *prev = (bound, v);
            if bound.is_infinite() {
                inf.insert(series, v);
            }
        } else if name.ends_with("_count") && family != name {
            counts.insert(series, v);
        }
    }
    assert!(!counts.is_empty(), "some histogram has samples");
    for (series, n) in &counts {
        assert_eq!(inf.get(series), Some(n), "+Inf bucket = count for {series}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text() {
    let env = Env::new(json!(["one", {"error": "down"}]));
    let s = start(env.options()).await;
    s.post("/runs/wait", &json!({"graph": "svc", "input": "hi"}))
        .await;
    s.post("/runs/wait", &json!({"graph": "svc", "input": "hi"}))
        .await;
    let (code, ct, text) = s.text("/metrics").await;
    assert_eq!(code, 200);
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    check_exposition(&text);
    for want in [
        "ragloop_runs_total{graph=\"svc\",status=\"generated\"} 1",
        "ragloop_runs_total{graph=\"svc\",status=\"failed\"} 1",
        "ragloop_run_duration_seconds_count{graph=\"svc\"} 2",
        "ragloop_step_duration_seconds_count{graph=\"svc\",node=\"say\"} 2",
        "ragloop_llm_calls_total{graph=\"svc\",model=\"m\",llm=\"scripted\"} 2",
        "ragloop_llm_tokens_total{graph=\"svc\",model=\"m\",llm=\"scripted\",direction=\"input\"}",
        "ragloop_llm_cost_usd_total{graph=\"svc\",model=\"m\",llm=\"scripted\"}",
        "ragloop_runs_in_flight 0",
        "ragloop_runs_queued 0",
        "ragloop_graphs{state=\"served\"} 1",
    ] {
        assert!(text.contains(want), "missing {want}:\n{text}");
    }
    s.stop().await;
}

#[test]
fn the_exposition_check_catches_bad_text() {
    // The checker is not vacuous: each of these breaks a rule.
    for bad in [
        "x_total 1\n",                    // no TYPE
        "# TYPE x counter\nx{a=\"b} 1\n", // unclosed quote
        "# TYPE x counter\nx one\n",      // not a number
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n", // not cumulative
    ] {
        assert!(
            std::panic::catch_unwind(|| check_exposition(bad)).is_err(),
            "{bad}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_covers_every_route_of_the_router() {
    let doc = ragloop::serve::openapi::document();
    assert_eq!(doc["openapi"], "3.1.0");
    let routes = ragloop::serve::routes();
    assert!(routes.len() >= 9);
    for (method, path) in &routes {
        let op = &doc["paths"][path][method];
        assert!(
            op.is_object(),
            "{method} {path} missing from the OpenAPI document"
        );
        assert!(
            op["responses"].is_object(),
            "{method} {path} has no responses"
        );
    }
    // And nothing documented that the router lacks.
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if method == "parameters" {
                continue;
            }
            assert!(
                routes.iter().any(|(m, p)| m == method && p == path),
                "{method} {path} documented but not routed"
            );
        }
    }
    // Every routed path answers from the live router (never the unknown-route fallback).
    let env = Env::new(json!(["ok"]));
    let s = start(env.options()).await;
    let (c, served) = s.get("/openapi.json").await;
    assert_eq!(c, 200);
    assert_eq!(served, doc);
    for (method, path) in &routes {
        let url = format!(
            "{}{}",
            s.base,
            path.replace("{run_id}", "x")
                .replace("{name}", "svc")
                .replace("{thread_id}", "t")
        );
        let req = match *method {
            "get" => s.http.get(&url),
            "post" => s.http.post(&url).body("{}"),
            m => panic!("method {m}"),
        };
        let r = req.send().await.unwrap();
        let code = r.status().as_u16();
        let is_sse = r
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
        if !is_sse {
            let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap_or(Value::Null);
            assert_ne!(v["error"]["code"], "unknown_route", "{method} {path}");
        }
        assert_ne!(code, 405, "{method} {path}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_runs_finish_then_cancels_them_after_the_grace() {
    let env = Env::new(json!([
        {"output": "finished in the grace", "delay_ms": 300},
        {"output": "too slow", "delay_ms": 30000}
    ]));
    let mut opts = env.options();
    opts.grace = Duration::from_millis(1500);
    let mut s = start(opts).await;
    // Each stream's headers are back once its run started (its slot is taken).
    let send = |s: &Running| {
        let http = s.http.clone();
        let url = format!("{}/runs/stream", s.base);
        async move {
            let r = http
                .post(url)
                .body(json!({"graph": "svc", "input": "hi"}).to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
            r
        }
    };
    let read =
        |r: reqwest::Response| tokio::spawn(async move { parse_sse(&r.text().await.unwrap()) });
    let quick = read(send(&s).await);
    // The scripted answers go by call order: let the quick run make its call first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let slow = read(send(&s).await);
    let _ = s.stop.take().unwrap().send(());
    let quick = quick.await.unwrap();
    assert_eq!(quick.last().unwrap().2["status"], "generated", "{quick:?}");
    let slow = slow.await.unwrap();
    let end = slow.last().unwrap();
    assert_eq!(end.1, "end");
    assert_eq!(end.2["status"], "interrupted", "{end:?}");
    tokio::time::timeout(Duration::from_secs(30), s.done)
        .await
        .expect("serve returns after the grace period")
        .unwrap()
        .unwrap();
}

#[test]
fn a_bad_addr_is_a_usage_error_before_any_spec_is_compiled() {
    let out = assert_cmd::Command::cargo_bin("ragloop")
        .unwrap()
        .args(["serve", "no-such-spec.yaml", "--addr", "bogus"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--addr bogus"), "{stderr}");
    // The spec (which does not exist) was never looked at.
    assert!(!stderr.contains("no-such-spec"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_added_under_a_served_name_is_a_conflict_and_a_removed_spec_goes() {
    let env = Env::new(json!(["ok", "ok"]));
    std::fs::write(
        env.path("broken.yaml"),
        SPEC.replace("entry: count", "entry: nothere"),
    )
    .unwrap();
    let opts = ServeOptions {
        specs: vec![env.dir.path().to_path_buf()],
        reload_interval: Some(Duration::from_millis(50)),
        ..ServeOptions::default()
    };
    let s = start(opts).await;
    // The same stem as the served `svc.yaml`: listed as a conflict, not ignored.
    write(&env.path("svc.yml"), SPEC);
    let mut list = Value::Null;
    for _ in 0..400 {
        list = s.get("/graphs").await.1;
        if list["conflicts"].as_array().is_some_and(|c| !c.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let conflict = &list["conflicts"][0];
    assert_eq!(conflict["name"], "svc", "{list}");
    assert!(
        conflict["path"].as_str().unwrap().ends_with("svc.yml"),
        "{list}"
    );
    assert!(
        conflict["served_from"]
            .as_str()
            .unwrap()
            .ends_with("svc.yaml"),
        "{list}"
    );
    // A removed spec is no longer listed (nor served), and its conflict goes too.
    std::fs::remove_file(env.path("broken.yaml")).unwrap();
    std::fs::remove_file(env.path("svc.yml")).unwrap();
    for _ in 0..400 {
        list = s.get("/graphs").await.1;
        let names: Vec<&str> = list["graphs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|g| g["name"].as_str())
            .collect();
        if !names.contains(&"broken") && list["conflicts"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let names: Vec<&str> = list["graphs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(names, vec!["svc"], "{list}");
    assert_eq!(list["conflicts"], json!([]), "{list}");
    let (_, h) = s.get("/healthz").await;
    assert_eq!(h["graphs"], json!({"served": 1, "invalid": 0}));
    s.stop().await;
}
