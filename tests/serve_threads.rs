//! `ragloop serve`'s threads: create, state, history (newest first), a run paused
//! by `interrupt_before` and resumed with a checked state patch, a second run on a
//! busy thread (409), every thread error's status; and `ragloop serve` killed with
//! SIGKILL mid-run, restarted, resuming the thread from its last completed step
//! without repeating that step's LLM calls (the mock counts them).
use crate::checkpoints_cli::{checkpoints, server, spec};
use ragloop::serve::{ServeOptions, Server};
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Running {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
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
    }
}

async fn post(base: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    let bytes = r.bytes().await.unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let r = reqwest::get(format!("{base}{path}")).await.unwrap();
    let code = r.status().as_u16();
    let bytes = r.bytes().await.unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_pause_resume_with_a_patch_refuse_busy_runs_and_map_every_error() {
    let mock = server(Duration::from_millis(20), Some("step a: hang"));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &mock.base(), false);
    let store =
        ragloop::checkpoint::open(Some(dir.path().join("t.sqlite3").to_str().unwrap())).unwrap();
    let s = start(ServeOptions {
        specs: vec![spec],
        reload_interval: None,
        grace: Duration::from_millis(200),
        checkpoints: Ok(Arc::from(store)),
        ..ServeOptions::default()
    })
    .await;
    let b = s.base.as_str();

    // Create, and create again.
    let (st, t) = post(
        b,
        "/threads",
        &json!({"thread_id": "T", "metadata": {"k": 1}}),
    )
    .await;
    assert_eq!(st, 201, "{t}");
    assert_eq!(t["thread_id"], "T");
    assert_eq!(t["status"], "idle");
    assert!(t["created_at"].as_str().unwrap().ends_with('Z'));
    let (st, e) = post(b, "/threads", &json!({"thread_id": "T"})).await;
    assert_eq!((st, code(&e)), (409, "thread_exists"));
    let (st, _) = post(
        b,
        "/threads",
        &json!({"thread_id": "T", "if_exists": "do_nothing"}),
    )
    .await;
    assert_eq!(st, 200);
    let (st, fresh) = post(b, "/threads", &json!({})).await;
    assert_eq!(st, 201);
    assert!(!fresh["thread_id"].as_str().unwrap().is_empty());

    // Unknown threads and bad ids.
    for path in [
        "/threads/nope",
        "/threads/nope/state",
        "/threads/nope/history",
    ] {
        let (st, e) = get(b, path).await;
        assert_eq!((st, code(&e)), (404, "unknown_thread"), "{path}");
    }
    let (st, e) = post(
        b,
        "/threads/nope/runs/wait",
        &json!({"graph": "spec", "input": "why"}),
    )
    .await;
    assert_eq!((st, code(&e)), (404, "unknown_thread"));
    let (st, e) = post(
        b,
        "/threads/nope/runs/wait",
        &json!({"graph": "spec", "command": {"resume": true}}),
    )
    .await;
    assert_eq!((st, code(&e)), (404, "unknown_thread"));
    let (st, e) = get(b, "/threads/a%01b/state").await;
    assert_eq!((st, code(&e)), (422, "bad_thread_id"));
    let (st, e) = post(b, "/threads/U/runs/wait", &json!({"graph": "spec", "input": "why", "if_not_exists": "create", "interrupt_before": ["zzz"]})).await;
    assert_eq!((st, code(&e)), (422, "unknown_node"));
    let (st, e) = post(
        b,
        "/runs/wait",
        &json!({"graph": "spec", "input": "why", "command": {"resume": true}}),
    )
    .await;
    assert_eq!((st, code(&e)), (422, "invalid_request"));
    let (st, e) = get(b, "/threads/T/history?limit=0").await;
    assert_eq!((st, code(&e)), (422, "invalid_request"));

    // A pause before `c`.
    let (st, r) = post(
        b,
        "/threads/T/runs/wait",
        &json!({"graph": "spec", "input": "why", "interrupt_before": ["c"]}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["status"], "interrupted");
    assert_eq!(r["paused_before"], "c");
    assert_eq!(
        (r["thread"].clone(), r["run"].clone()),
        (json!("T"), json!(1))
    );
    let (_, state) = get(b, "/threads/T/state").await;
    assert_eq!(state["status"], "interrupted");
    assert_eq!(state["paused_before"], "c");
    assert_eq!(state["next"], json!(["c"]));
    assert_eq!(state["step"], 2);
    let (_, t) = get(b, "/threads/T").await;
    assert_eq!(t["status"], "interrupted");

    // A new run on it, and patches the schema refuses.
    let (st, e) = post(
        b,
        "/threads/T/runs/wait",
        &json!({"graph": "spec", "input": "again"}),
    )
    .await;
    assert_eq!((st, code(&e)), (409, "thread_busy"), "{e}");
    for update in [json!({"score": "high"}), json!({"nosuch": 1})] {
        let (st, e) = post(
            b,
            "/threads/T/runs/wait",
            &json!({"graph": "spec", "command": {"resume": true, "update": update}}),
        )
        .await;
        assert_eq!((st, code(&e)), (422, "invalid_patch"), "{e}");
    }
    let (st, e) = post(
        b,
        "/threads/T/runs/wait",
        &json!({"graph": "spec", "input": "x", "command": {"resume": true}}),
    )
    .await;
    assert_eq!((st, code(&e)), (422, "invalid_request"));

    // The resume with a patch runs `c` (once), not `a` or `b` again.
    let (st, r) = post(
        b,
        "/threads/T/runs/wait",
        &json!({"graph": "spec", "command": {"resume": true, "update": {"score": 7}}}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["status"], "generated");
    assert_eq!(r["state"]["score"], 7);
    assert_eq!(r["path"], json!(["a", "b", "c"]));
    assert_eq!(
        (
            mock.count("step a"),
            mock.count("step b"),
            mock.count("step c")
        ),
        (1, 1, 1)
    );
    let (st, h) = get(b, "/threads/T/history").await;
    assert_eq!(st, 200);
    let h = h.as_array().unwrap();
    let steps: Vec<u64> = h.iter().map(|c| c["step"].as_u64().unwrap()).collect();
    let sources: Vec<&str> = h
        .iter()
        .map(|c| c["metadata"]["source"].as_str().unwrap())
        .collect();
    assert_eq!(steps, [3, 2, 2, 1, 0], "newest first");
    assert_eq!(sources, ["loop", "update", "loop", "loop", "input"]);
    let (_, h2) = get(b, "/threads/T/history?limit=2").await;
    assert_eq!(h2.as_array().unwrap().len(), 2);
    let (st, e) = post(
        b,
        "/threads/T/runs/wait",
        &json!({"graph": "spec", "command": {"resume": true}}),
    )
    .await;
    assert_eq!((st, code(&e)), (409, "run_finished"));

    // A second run on a thread whose run is in flight: 409, not queued.
    let base = s.base.clone();
    let streaming = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{base}/threads/B/runs/stream"))
            .header("content-type", "application/json")
            .body(json!({"graph": "spec", "input": "hang", "if_not_exists": "create"}).to_string())
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    wait_until("the held run started", || mock.count("step a: hang") == 1).await;
    let (st, e) = post(
        b,
        "/threads/B/runs/wait",
        &json!({"graph": "spec", "command": {"resume": true}}),
    )
    .await;
    assert_eq!((st, code(&e)), (409, "thread_busy"), "{e}");
    let (st, e) = post(
        b,
        "/threads/B/runs/wait",
        &json!({"graph": "spec", "input": "why"}),
    )
    .await;
    assert_eq!((st, code(&e)), (409, "thread_busy"), "{e}");
    let (_, t) = get(b, "/threads/B").await;
    assert_eq!(t["status"], "busy");
    assert_eq!(streaming.await.unwrap().unwrap(), 200);
    let _ = s.stop.unwrap().send(());
    tokio::time::timeout(Duration::from_secs(60), s.done)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();

    // No store: 503, saying why.
    let s = start(ServeOptions {
        specs: vec![dir.path().join("spec.yaml")],
        reload_interval: None,
        ..ServeOptions::default()
    })
    .await;
    let (st, e) = post(&s.base, "/threads", &json!({})).await;
    assert_eq!((st, code(&e)), (503, "checkpoints_unavailable"));
    let _ = s.stop.unwrap().send(());
}

/// `ragloop serve` as a child process; returns it and its base URL.
fn serve(dir: &Path, spec: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ragloop"))
        .args([
            "serve",
            spec.to_str().unwrap(),
            "--addr",
            "127.0.0.1:0",
            "--reload-ms",
            "0",
            "--no-cache",
        ])
        .env("RAGLOOP_CACHE_DIR", dir.join("cache"))
        .env_remove("OPENAI_API_KEY")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ragloop serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    let base = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("ragloop serve says where it listens");
    (child, base)
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_resumes_the_thread_without_repeating_completed_steps() {
    let mock = server(Duration::from_millis(50), Some("step b"));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &mock.base(), false);
    let (mut child, base) = serve(dir.path(), &spec);
    let b = base.clone();
    let pending = tokio::spawn(async move {
        post(
            &b,
            "/threads/T/runs/wait",
            &json!({"graph": "spec", "input": "why", "if_not_exists": "create"}),
        )
        .await
    });
    // Step 1 (`a`) is checkpointed and step 2's request is in flight (and held).
    let d = dir.path().to_path_buf();
    wait_until("step 2 started", || {
        mock.count("step b") >= 1 && checkpoints(&d, "T").iter().any(|c| c.0 == 1)
    })
    .await;
    child.kill().expect("kill -9");
    let _ = child.wait();
    pending.abort();
    assert_eq!(
        checkpoints(dir.path(), "T"),
        [(0, Some("a".to_string())), (1, Some("b".to_string()))]
    );

    let (mut child, base) = serve(dir.path(), &spec);
    let b = base.as_str();
    let (_, t) = get(b, "/threads/T").await;
    assert_eq!(t["status"], "interrupted", "{t}");
    assert_eq!(t["run"]["status"], "running");
    let (st, e) = post(
        b,
        "/threads/T/runs/wait",
        &json!({"graph": "spec", "input": "again"}),
    )
    .await;
    assert_eq!((st, code(&e)), (409, "thread_busy"), "{e}");
    let (st, r) = post(
        b,
        "/threads/T/runs/wait",
        &json!({"graph": "spec", "command": {"resume": true}}),
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["status"], "generated");
    assert_eq!(
        (r["thread"].clone(), r["run"].clone()),
        (json!("T"), json!(1))
    );
    // `a` was not asked again; `b`, killed mid-call, was; `c` once.
    assert_eq!(
        (
            mock.count("step a"),
            mock.count("step b"),
            mock.count("step c")
        ),
        (1, 2, 1)
    );
    assert_eq!(
        r["answer"],
        "ans(step c: ans(step a: why),ans(step b: ans(step a: why)))"
    );
    assert_eq!(
        r["usage"]["calls"], 3,
        "the calls before the kill are counted"
    );
    let steps: Vec<u32> = checkpoints(dir.path(), "T").iter().map(|c| c.0).collect();
    assert_eq!(steps, [0, 1, 2, 3]);
}
