//! The compatibility suite against llama.cpp's real `llama-server` (built from the
//! llama-cpp-python sdist by `.ci/llamacpp.sh`, with tiny random-weight models): the
//! protocol is asserted, never answer text (the models are random).
//!
//! Servers are found through environment variables that `.ci/llamacpp.sh` exports:
//! `RAGLOOP_LLAMACPP_TOOL_URL` (a model that opens every turn with a tool call),
//! `RAGLOOP_LLAMACPP_PROSE_URL` (a model that answers one character unless a grammar
//! forces JSON: the one that shows whether structured output is really forced),
//! `RAGLOOP_LLAMACPP_EMBED_URL` (the prose model with `--embeddings --pooling mean`),
//! all base URLs ending in `/v1`, and `RAGLOOP_LLAMACPP_BIN` / `RAGLOOP_LLAMACPP_MODELS`
//! (the binary and the models directory, to start a private server that a test stops).
//! Unset: each test prints a skip note and passes, unless `RAGLOOP_REQUIRE_LLAMACPP=1`
//! (set by `.ci/run` when the build succeeded), then it fails.
//!
//! Token streaming is not covered: ragloop does not stream yet.
mod embeddings;

use crate::providers_support::{project, rt, run_async, Project, GRADE_SCHEMA};
use ragloop::compile::load_program;
use ragloop::providers::openai::OpenAiProvider;
use ragloop::providers::{LlmRequest, Message, Provider};
use ragloop::runtime::Status;
use ragloop::spec::types::ModelSpec;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One test at a time against the servers: they share two cores with the rest of
/// the suite, and a grammar-constrained reply takes seconds on a loaded machine.
static SERVERS: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    SERVERS.lock().unwrap_or_else(|e| e.into_inner())
}

fn required() -> bool {
    std::env::var("RAGLOOP_REQUIRE_LLAMACPP").as_deref() == Ok("1")
}

/// The value of `var`, or `None` after a skip note (a failure when the suite is
/// required).
fn env(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Some(v.trim().trim_end_matches('/').to_string()),
        _ => {
            assert!(
                !required(),
                "{var} is not set but RAGLOOP_REQUIRE_LLAMACPP=1 (start the servers with .ci/llamacpp.sh)"
            );
            eprintln!("skipped: {var} is not set (run the suite through .ci/llamacpp.sh)");
            None
        }
    }
}

/// A one-node spec (`judge`, model `m`) on the server at `url`.
fn one_node(url: &str, extra: &str, structured: bool) -> Project {
    project(
        &format!(
            "provider: openai, model: tiny, base_url: '{url}', temperature: 0, timeout_secs: 300, retries: 1{extra}"
        ),
        structured,
    )
}

fn run_one(p: &Project, question: &str) -> ragloop::runtime::RunResult {
    let prog = load_program(&p.spec, None, &[]).expect("spec loads");
    rt().block_on(run_async(&prog, question))
}

fn assert_verdict(v: &Value, what: &str) {
    assert!(
        matches!(v["verdict"].as_str(), Some("yes" | "no")),
        "{what}: {v}"
    );
    assert!(
        v.get("score").is_none_or(Value::is_number),
        "{what}: score {v}"
    );
    let keys: Vec<&String> = v.as_object().expect("an object").keys().collect();
    assert!(
        keys.iter().all(|k| *k == "verdict" || *k == "score"),
        "{what}: {v}"
    );
}

#[test]
fn structured_output_is_forced_in_both_modes_on_both_servers() {
    let (Some(tool), Some(prose)) = (
        env("RAGLOOP_LLAMACPP_TOOL_URL"),
        env("RAGLOOP_LLAMACPP_PROSE_URL"),
    ) else {
        return;
    };
    let _g = lock();
    for (server, url, mode) in [
        ("prose", &prose, ""),
        ("prose", &prose, ", structured_output: json_schema"),
        ("tool", &tool, ""),
        ("tool", &tool, ", structured_output: json_schema"),
        ("tool", &tool, ", structured_output: tool_call"),
    ] {
        let what = format!("{server} server, mode `{mode}`");
        let p = one_node(url, mode, true);
        let r = run_one(&p, "Is Rust fast?");
        // (The status is `exhausted`: the spec's output `answer` is an object, not
        // a text answer.)
        assert!(r.error.is_none(), "{what}: {:?}", r.error);
        assert_ne!(r.status, Status::Failed, "{what}");
        assert_verdict(&r.state["answer"], &what);
        // Forced: the first reply is in the asked shape, no repair turn.
        assert_eq!(r.usage.calls, 1, "{what}: {:?}", r.usage);
        assert!(
            r.usage.tokens.input_tokens > 0
                && r.usage.tokens.output_tokens > 0
                && !r.usage.estimated,
            "{what}: the server's own counts: {:?}",
            r.usage
        );
    }
}

/// What docs/providers.md says of llama.cpp's `tool_choice: "required"`: its grammar
/// lets text come before the call, so a model that would rather write prose writes
/// until max_tokens. When this starts failing, llama.cpp enforces the call from the
/// first token and the docs (and perhaps the default mode) should say so.
#[test]
fn a_required_tool_call_on_llama_cpp_lets_prose_come_first() {
    let Some(prose) = env("RAGLOOP_LLAMACPP_PROSE_URL") else {
        return;
    };
    let _g = lock();
    let p = one_node(
        &prose,
        ", structured_output: tool_call, max_tokens: 12",
        true,
    );
    let r = run_one(&p, "Is Rust fast?");
    assert_eq!(r.status, Status::Failed, "{:?}", r.state);
    let e = r.error.unwrap_or_default();
    assert!(e.contains("max_tokens") || e.contains("truncat"), "{e}");
}

#[test]
fn a_text_node_gets_the_text() {
    let (Some(tool), Some(prose)) = (
        env("RAGLOOP_LLAMACPP_TOOL_URL"),
        env("RAGLOOP_LLAMACPP_PROSE_URL"),
    ) else {
        return;
    };
    let _g = lock();
    for (server, url) in [("tool", &tool), ("prose", &prose)] {
        // The tool model writes tool-call markup as text until max_tokens: a cut text
        // answer is still an answer.
        let p = one_node(url, ", max_tokens: 16", false);
        let r = run_one(&p, "What does cargo check do?");
        assert_eq!(r.status, Status::Generated, "{server}: {:?}", r.error);
        let a = r.answer.expect("an answer");
        assert!(!a.is_empty(), "{server}: empty answer");
        assert_eq!(r.state["answer"], json!(a));
        assert!(
            r.usage.tokens.output_tokens >= 1
                && r.usage.tokens.output_tokens <= 16
                && !r.usage.estimated,
            "{server}: {:?}",
            r.usage
        );
    }
}

#[test]
fn structured_output_cut_at_max_tokens_is_the_truncation_error() {
    let Some(prose) = env("RAGLOOP_LLAMACPP_PROSE_URL") else {
        return;
    };
    let _g = lock();
    for mode in ["tool_call", "json_schema"] {
        let p = one_node(
            &prose,
            &format!(", structured_output: {mode}, max_tokens: 3"),
            true,
        );
        let r = run_one(&p, "Is Rust fast?");
        assert_eq!(r.status, Status::Failed, "{mode}: {:?}", r.state);
        let e = r.error.unwrap_or_default();
        let l = e.to_lowercase();
        assert!(
            l.contains("max_tokens") || l.contains("truncat"),
            "{mode}: {e}"
        );
        assert!(
            r.state.get("answer").is_none(),
            "{mode}: never a partial answer"
        );
    }
}

fn model_spec(url: &str, extra: Value) -> ModelSpec {
    let mut v = json!({"provider": "openai", "model": "tiny", "base_url": url, "temperature": 0,
        "timeout_secs": 300, "retries": 1});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    serde_json::from_value(v).expect("a model spec")
}

#[test]
fn usage_is_the_servers_own_count() {
    let (Some(tool), Some(prose)) = (
        env("RAGLOOP_LLAMACPP_TOOL_URL"),
        env("RAGLOOP_LLAMACPP_PROSE_URL"),
    ) else {
        return;
    };
    let _g = lock();
    let schema: Value = serde_json::from_str(GRADE_SCHEMA).unwrap();
    rt().block_on(async {
        for (url, mode, schema) in [
            (&tool, "tool_call", Some(schema.clone())),
            (&prose, "json_schema", Some(schema.clone())),
            (&prose, "text", None),
        ] {
            let extra = if mode == "text" {
                json!({"max_tokens": 8})
            } else {
                json!({"structured_output": mode})
            };
            let spec = Arc::new(model_spec(url, extra));
            let provider = OpenAiProvider::new("m", &spec).expect("provider");
            let req = LlmRequest {
                node: "judge".into(),
                item: None,
                model_name: "m".into(),
                model: Arc::clone(&spec),
                task: None,
                inputs: Default::default(),
                messages: vec![
                    Message {
                        role: "system".into(),
                        content: "You are a careful judge.".into(),
                    },
                    Message {
                        role: "user".into(),
                        content: "Question: Is Rust fast?".into(),
                    },
                ],
                schema: schema.map(Arc::new),
            };
            // The same body, sent directly: the server's own counts (temperature 0 is
            // greedy decoding, so both replies are the same tokens).
            let direct = reqwest::Client::new()
                .post(provider.endpoint())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(provider.body(&req).to_string())
                .send()
                .await
                .expect("direct request")
                .text()
                .await
                .expect("a body");
            let direct: Value = serde_json::from_str(&direct).expect("JSON");
            let resp = provider.call(&req).await.expect("the provider's call");
            assert!(!resp.usage_estimated, "{mode}");
            assert_eq!(
                (resp.usage.input_tokens, resp.usage.output_tokens),
                (
                    direct["usage"]["prompt_tokens"].as_u64().unwrap(),
                    direct["usage"]["completion_tokens"].as_u64().unwrap()
                ),
                "{mode}: {}",
                direct["usage"]
            );
            // The server's timings agree: every prompt token was either evaluated or
            // taken from its prompt cache.
            let t = &direct["timings"];
            if let (Some(n), Some(c), Some(p)) = (
                t["predicted_n"].as_u64(),
                t["cache_n"].as_u64(),
                t["prompt_n"].as_u64(),
            ) {
                assert_eq!(n, resp.usage.output_tokens, "{mode}: {t}");
                assert_eq!(c + p, resp.usage.input_tokens, "{mode}: {t}");
            }
        }
    });
}

/// A `llama-server` of our own, killed (by its PID) on drop.
struct OwnServer {
    child: Child,
    url: String,
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn healthy(url: &str) -> bool {
    let root = url.trim_end_matches("/v1");
    rt().block_on(async {
        matches!(
            reqwest::Client::new()
                .get(format!("{root}/health"))
                .timeout(Duration::from_secs(5))
                .send()
                .await,
            Ok(r) if r.status().is_success()
        )
    })
}

fn start_server(model: &str, log: &Path) -> Option<OwnServer> {
    let (bin, models) = (
        env("RAGLOOP_LLAMACPP_BIN")?,
        env("RAGLOOP_LLAMACPP_MODELS")?,
    );
    let port = free_port();
    let log = std::fs::File::create(log).expect("server log");
    let child = Command::new(&bin)
        .args(["-m", &format!("{models}/{model}"), "--host", "127.0.0.1"])
        .args([
            "--port",
            &port.to_string(),
            "--jinja",
            "-c",
            "4096",
            "-np",
            "1",
        ])
        .args(["-n", "256", "-t", "2"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let server = OwnServer {
        child,
        url: format!("http://127.0.0.1:{port}/v1"),
    };
    let started = Instant::now();
    while !healthy(&server.url) {
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "llama-server did not come up on port {port}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    Some(server)
}

fn ragloop() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("ragloop").unwrap();
    c.timeout(Duration::from_secs(1800));
    c
}

fn json_out(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn record_then_replay_with_the_server_stopped() {
    if env("RAGLOOP_LLAMACPP_BIN").is_none() || env("RAGLOOP_LLAMACPP_MODELS").is_none() {
        return;
    }
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start_server("prose.gguf", &dir.path().join("server.log")) else {
        return;
    };
    let p = one_node(&server.url, "", true);
    let cas = dir.path().join("run.jsonl");
    let run = |extra: &[&std::ffi::OsStr]| {
        ragloop()
            .arg("run")
            .arg(&p.spec)
            .args(["-q", "Is Rust fast?", "--json", "--no-cache"])
            .args(extra)
            .output()
            .unwrap()
    };
    let recorded = run(&["--record".as_ref(), cas.as_os_str()]);
    let rec = json_out(&recorded);
    assert!(rec["error"].is_null(), "{recorded:?}");
    // `exhausted` (exit 3): the one-node spec's output `answer` is an object.
    assert_eq!(recorded.status.code(), Some(3), "{recorded:?}");
    assert_verdict(&rec["state"]["answer"], "recorded");
    drop(server);
    // The server is gone: a live run fails to connect ...
    let live = run(&[]);
    assert_eq!(live.status.code(), Some(1), "{live:?}");
    // ... and the replay answers the same, with the recorded usage.
    let replayed = run(&["--replay".as_ref(), cas.as_os_str()]);
    assert_eq!(
        replayed.status.code(),
        recorded.status.code(),
        "{replayed:?}"
    );
    let rep = json_out(&replayed);
    assert_eq!(rep["status"], rec["status"]);
    assert_eq!(rep["state"]["answer"], rec["state"]["answer"]);
    for k in ["calls", "input_tokens", "output_tokens"] {
        assert_eq!(rep["usage"][k], rec["usage"][k], "usage.{k}");
    }
    assert_eq!(rep["usage"]["cached_calls"], rep["usage"]["calls"]);
}

fn rust_book() -> Option<PathBuf> {
    let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let book =
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("share/doc/rust/html/book");
    if book.join("index.html").is_file() {
        Some(book)
    } else {
        eprintln!("skipped: the Rust book is not installed (rustup component add rust-docs)");
        None
    }
}

/// Runs a shipped graph with every model on the prose server, recording a cassette,
/// and checks that it completes and that every structured call was answered in shape
/// at once (forced: no rejected reply, no repair turn).
fn shipped_graph_completes(spec: &str, models: &[&str]) {
    let Some(prose) = env("RAGLOOP_LLAMACPP_PROSE_URL") else {
        return;
    };
    if rust_book().is_none() {
        return;
    }
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let cas = dir.path().join("run.jsonl");
    let mut cmd = ragloop();
    cmd.env("RAGLOOP_CACHE_DIR", dir.path().join("cache"))
        .args([
            "run",
            spec,
            "-q",
            "What does cargo check do?",
            "--json",
            "--no-cache",
        ])
        .arg("--record")
        .arg(&cas);
    for m in models {
        cmd.arg("--model").arg(format!("{m}=openai:tiny@{prose}"));
    }
    let out = cmd.output().unwrap();
    let r = json_out(&out);
    let status = r["status"].as_str().unwrap_or_default().to_string();
    assert!(
        !matches!(status.as_str(), "failed" | ""),
        "{spec}: {status}: {}\nstderr: {}",
        r["error"],
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(1), "{spec}");
    let lines: Vec<Value> = std::fs::read_to_string(&cas)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let structured = lines.iter().filter(|l| !l["schema"].is_null()).count();
    assert!(structured > 0, "{spec}: no structured call recorded");
    for l in &lines {
        assert!(
            l["error"].is_null(),
            "{spec}: {}: {}",
            l["node"],
            l["error"]
        );
        assert!(
            !l["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "assistant"),
            "{spec}: {}: a repair turn was needed",
            l["node"]
        );
        assert!(l["usage"]["input_tokens"].as_u64().unwrap_or(0) > 0);
        assert!(
            l.get("usage_estimated").is_none(),
            "{spec}: estimated usage"
        );
    }
    assert_eq!(r["usage"]["calls"].as_u64(), Some(lines.len() as u64));
}

#[test]
fn crag_completes_on_the_prose_server() {
    shipped_graph_completes("graphs/crag.yaml", &["grader", "generator"]);
}

#[test]
fn arsc_completes_on_the_prose_server() {
    shipped_graph_completes("graphs/arsc.yaml", &["grader", "rewriter", "generator"]);
}
