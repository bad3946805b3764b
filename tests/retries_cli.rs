//! No silent minutes: `--timeout` and `--retries` override every model, and each
//! retry is shown as it happens (`run --verbose`, the eval progress line) and listed
//! in the trace — for network providers (retried inside the HTTP call) and for the
//! providers the runtime wraps in its own retry loop alike.

use crate::providers_support::ragloop_isolated as ragloop;
use crate::providers_support::*;
use ragloop::providers::{LlmRequest, LlmResponse, Provider, ProviderError};
use ragloop::retries::RetryEvent;
use ragloop::runtime::{Observer, RunResult, StepRecord};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn verdict() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(openai_tool_call(
        "Verdict",
        json!(r#"{"verdict": "yes", "score": 0.5}"#),
    ))
}

fn trace_steps(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("final").is_none())
        .collect()
}

#[test]
fn verbose_run_shows_each_retry_and_the_trace_lists_them() {
    let rt = rt();
    let server = rt.block_on(MockServer::start());
    let seq = Sequence::new(vec![
        ResponseTemplate::new(500).set_body_string("boom"),
        ResponseTemplate::new(500).set_body_string("boom"),
        verdict(),
    ]);
    let seen = Arc::clone(&seq.seen);
    rt.block_on(
        Mock::given(wiremock::matchers::any())
            .respond_with(seq)
            .mount(&server),
    );
    let p = project(
        &format!(
            "provider: openai, model: test, base_url: '{}/v1'",
            server.uri()
        ),
        true,
    );
    let trace = p.dir.path().join("trace.jsonl");
    let out = ragloop()
        .args(["run"])
        .arg(&p.spec)
        .args(["-q", "Is it?", "--verbose", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // `exhausted`: the answer field of this spec holds an object, not answer text.
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 3);
    for a in [2, 3] {
        assert!(
            err.contains(&format!("retrying judge (attempt {a}/3) after HTTP 500")),
            "{err}"
        );
    }
    // Shown before the step's own line (as they happen, not after the step).
    let first_retry = err.find("retrying judge").unwrap();
    let step_line = err.find("judge (llm)").unwrap();
    assert!(first_retry < step_line, "{err}");
    let steps = trace_steps(&trace);
    let retries = steps[0]["retries"]
        .as_array()
        .expect("retries in the trace");
    assert_eq!(retries.len(), 2);
    assert_eq!(retries[0]["node"], "judge");
    assert_eq!(retries[0]["attempt"], 2);
    assert_eq!(retries[1]["attempt"], 3);
    assert_eq!(retries[1]["attempts"], 3);
    assert_eq!(retries[1]["after"], "HTTP 500");
    assert!(retries[0].get("item").is_none());
}

/// Fails the first `left` grading calls of the document that mentions `needle`.
struct FailDocument {
    needle: &'static str,
    left: AtomicUsize,
}

impl Respond for FailDocument {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        // The function name (tool_call mode) or the schema name (json_schema mode).
        let grading = body.pointer("/tools/0/function/name") == Some(&json!("GradingResult"))
            || body.pointer("/response_format/json_schema/name") == Some(&json!("GradingResult"));
        if grading
            && body.to_string().contains(self.needle)
            && self
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return ResponseTemplate::new(500).set_body_string("overloaded");
        }
        ResponseTemplate::new(200).set_body_json(crag_answer(&body))
    }
}

#[test]
fn retries_of_a_map_item_name_the_item() {
    let rt = rt();
    let server = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(wiremock::matchers::path("/v1/chat/completions"))
            .respond_with(FailDocument {
                needle: "produces an executable in target/debug",
                left: AtomicUsize::new(2),
            })
            .mount(&server),
    );
    let corpus = tempfile::tempdir().unwrap();
    std::fs::write(
        corpus.path().join("a.md"),
        "# Cargo check\n\nThe cargo check command checks your code to make sure it compiles but does not produce an executable.\n",
    )
    .unwrap();
    std::fs::write(
        corpus.path().join("b.md"),
        "# Cargo build\n\nThe cargo check and cargo build commands differ: cargo build compiles your code and produces an executable in target/debug.\n",
    )
    .unwrap();
    let url = format!("{}/v1", server.uri());
    let trace = corpus.path().join("trace.jsonl");
    let cache = tempfile::tempdir().unwrap();
    let out = ragloop()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("RAGLOOP_CACHE_DIR", cache.path())
        .args(["run", "graphs/crag.yaml", "-q", "What does cargo check do?"])
        .args(["--verbose", "--no-cache", "--corpus"])
        .arg(corpus.path())
        .arg(format!("--model=grader=openai:g@{url}"))
        .arg(format!("--model=generator=openai:x@{url}"))
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let steps = trace_steps(&trace);
    let docs = steps[0]["delta"]["documents"].as_array().unwrap();
    let ix = docs
        .iter()
        .position(|d| d["content"].as_str().unwrap().contains("target/debug"))
        .expect("b.md retrieved");
    for a in [2, 3] {
        let line = format!("retrying grade_documents[{ix}] (attempt {a}/3) after HTTP 500");
        assert!(err.contains(&line), "{line}\n{err}");
    }
    let grading = steps
        .iter()
        .find(|s| s["node"] == "grade_documents")
        .unwrap();
    let r = grading["retries"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|e| e["item"] == json!(ix)));
}

#[test]
fn timeout_and_retries_override_every_model() {
    // A server that accepts connections and never writes a byte.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    {
        let accepted = Arc::clone(&accepted);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for s in listener.incoming().flatten() {
                accepted.fetch_add(1, Ordering::SeqCst);
                held.push(s);
            }
        });
    }
    // The spec asks for 120 s and 5 retries: 12 minutes of silence.
    let p = project(
        &format!(
            "provider: openai, model: test, base_url: 'http://127.0.0.1:{port}/v1', timeout_secs: 120, retries: 5"
        ),
        true,
    );
    let started = Instant::now();
    let out = ragloop()
        .arg("run")
        .arg(&p.spec)
        .args([
            "-q",
            "Is it?",
            "--verbose",
            "--timeout",
            "0.5",
            "--retries",
            "1",
        ])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(60), "took {took:?}: {err}");
    assert!(
        err.contains("retrying judge (attempt 2/2) after timeout (0.5 s)"),
        "{err}"
    );
    assert!(err.contains("no answer within 0.5 s"), "{err}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "{err}");
}

#[test]
fn bad_timeout_and_retries_are_usage_errors() {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/graphs/crag.yaml");
    for (flag, value, says) in [
        ("--timeout", "abc", "between 0.001 and 86400"),
        ("--timeout", "0", "between 0.001 and 86400"),
        ("--timeout", "-2", "between 0.001 and 86400"),
        // Below or above a spec's bounds: refused by the flag itself, not by the spec.
        ("--timeout", "0.0001", "between 0.001 and 86400"),
        ("--timeout", "86400.5", "between 0.001 and 86400"),
        ("--retries", "-1", "0 to 10"),
        ("--retries", "1000", "0 to 10"),
    ] {
        for cmd in ["run", "eval"] {
            let mut c = ragloop();
            c.args([cmd, spec]);
            if cmd == "run" {
                c.args(["-q", "x"]);
            } else {
                c.args(["--dataset", "unused.jsonl"]);
            }
            let out = c.arg(format!("{flag}={value}")).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd} {flag} {value}: {err}");
            assert!(err.contains(flag) && err.contains(says), "{err}");
            assert!(!err.contains("makes the spec invalid"), "{err}");
        }
    }
}

#[test]
fn eval_shows_retries_on_stderr_without_a_terminal() {
    let rt = rt();
    let server = rt.block_on(MockServer::start());
    let seq = Sequence::new(vec![
        ResponseTemplate::new(503).set_body_string("busy"),
        verdict(),
    ]);
    rt.block_on(
        Mock::given(wiremock::matchers::any())
            .respond_with(seq)
            .mount(&server),
    );
    let p = project(
        &format!(
            "provider: openai, model: test, base_url: '{}/v1'",
            server.uri()
        ),
        true,
    );
    let dataset = p.dir.path().join("qa.jsonl");
    std::fs::write(&dataset, "{\"id\": \"q1\", \"question\": \"Is it?\", \"answer\": \"yes\", \"must_contain\": [], \"sources\": [], \"kind\": \"direct\"}\n").unwrap();
    let out = ragloop()
        .arg("eval")
        .arg(&p.spec)
        .arg("--dataset")
        .arg(&dataset)
        .arg("--out")
        .arg(p.dir.path().join("out"))
        .args(["--retries", "1", "--no-cache"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("ragloop eval: base/q1: retrying judge (attempt 2/2) after HTTP 503"),
        "{err}"
    );
}

/// Fails the first call of every `map` item whose index is listed, transiently.
struct Flaky {
    failing: Vec<usize>,
    calls: Mutex<Vec<Option<usize>>>,
}

impl Provider for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }
    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> futures::future::BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        let mut calls = self.calls.lock().unwrap();
        let first = !calls.contains(&req.item);
        calls.push(req.item);
        let fail = first && req.item.is_some_and(|i| self.failing.contains(&i));
        Box::pin(async move {
            if fail {
                return Err(ProviderError::Transient("HTTP 502: bad gateway".into()));
            }
            Ok(LlmResponse {
                output: json!({"document_id": "d", "binary_score": "yes", "confidence": 0.9}),
                ..Default::default()
            })
        })
    }
}

#[derive(Default)]
struct Seen {
    live: Vec<RetryEvent>,
    steps: Vec<StepRecord>,
}

impl Observer for Seen {
    fn retry(&mut self, e: &RetryEvent) {
        self.live.push(e.clone());
    }
    fn step(&mut self, r: &StepRecord) {
        self.steps.push(r.clone());
    }
    fn finish(&mut self, _: &RunResult) {}
}

#[test]
fn the_runtime_retry_loop_reports_map_items_too() {
    use crate::runtime_support as rs;
    // CRAG, with its grader answered by a provider that does not retry itself (the
    // runtime wraps it in its retry loop).
    let program = rs::program(&rs::repo().join("graphs/crag.yaml"));
    let flaky = Arc::new(Flaky {
        failing: vec![1, 2],
        calls: Mutex::default(),
    });
    let retriever: Arc<dyn ragloop::runtime::Retriever> =
        Arc::new(ragloop::runtime::ScriptedRetriever::new(vec![vec![
            rs::doc("a", "Cargo check checks code."),
            rs::doc("b", "Cargo build builds code."),
            rs::doc("c", "Cargo run runs code."),
        ]]));
    let mut opts = ragloop::runtime::ResourceOptions::default();
    opts.retrievers.insert("book".into(), retriever);
    opts.providers
        .insert("grader".into(), Arc::clone(&flaky) as Arc<dyn Provider>);
    let res = ragloop::runtime::Resources::prepare(&program, opts).unwrap();
    let input = ragloop::runtime::RunInput {
        question: Some("What does cargo check do?".into()),
        sets: vec![],
    };
    let mut seen = Seen::default();
    rs::rt().block_on(ragloop::runtime::run(&program, &res, &input, &mut seen));
    let mut lines: Vec<String> = seen.live.iter().map(|e| e.to_string()).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "retrying grade_documents[1] (attempt 2/3) after HTTP 502",
            "retrying grade_documents[2] (attempt 2/3) after HTTP 502",
        ]
    );
    let step = seen
        .steps
        .iter()
        .find(|s| s.node == "grade_documents")
        .unwrap();
    assert_eq!(step.retries.len(), 2);
}

#[test]
fn timeout_and_retries_reach_web_search_tools_and_every_model() {
    use ragloop::spec::types::ToolSpec;
    let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs/crag-web.yaml");
    let changes = ragloop::compile::SpecOverrides {
        timeout_secs: Some(0.25),
        retries: Some(0),
        ..Default::default()
    };
    let p = ragloop::compile::load_program_with(&spec, None, &changes).unwrap();
    let s = &p.spec;
    assert!(!s.models.is_empty() && !s.tools.is_empty());
    for (name, m) in &s.models {
        assert_eq!((m.timeout_secs, m.retries), (Some(0.25), Some(0)), "{name}");
    }
    for (name, t) in &s.tools {
        match t {
            ToolSpec::Searxng {
                timeout_secs,
                retries,
                ..
            }
            | ToolSpec::Tavily {
                timeout_secs,
                retries,
                ..
            } => assert_eq!((*timeout_secs, *retries), (Some(0.25), Some(0)), "{name}"),
            ToolSpec::Corpus { .. } => {}
        }
    }
    // Without the flags the spec's own values stay.
    let p = ragloop::compile::load_program(&spec, None, &[]).unwrap();
    assert!(matches!(
        p.spec.tools["web"],
        ToolSpec::Searxng {
            timeout_secs: Some(t),
            retries: Some(2),
            ..
        } if t == 20.0
    ));
}
