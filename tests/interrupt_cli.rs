//! SIGTERM/SIGINT end `ragloop run` and `ragloop eval` cleanly: against a server that
//! accepts and never answers, the first signal cancels the call in flight, writes the
//! final trace line with status `interrupted`, keeps every finished result (rows,
//! partial reports), releases the eval lock and exits 130; a second signal exits at
//! once (130) even when the first cannot end the work (a blocking corpus embedding).
#![cfg(unix)]
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A server on 127.0.0.1 that accepts connections and never answers.
struct Hung {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

fn hung() -> Hung {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for s in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            open.push(s);
        }
    });
    Hung { port, accepted }
}

impl Hung {
    fn base(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
    /// Waits (60 s at most) until `n` connections were accepted.
    fn wait_for(&self, n: usize, child: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.accepted.load(Ordering::SeqCst) < n {
            if let Ok(Some(st)) = child.try_wait() {
                panic!("the child ended before reaching the server: {st}");
            }
            assert!(Instant::now() < deadline, "no request reached the server");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Questions containing `fast` are answered without a call; the others ask the model.
fn spec(dir: &Path, base: &str) -> PathBuf {
    let text = format!(
        r#"version: 1
name: hung
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      answer: {{type: string}}
    required: [question]
models:
  m: {{provider: openai, model: test, base_url: "{base}", timeout_secs: 300, retries: 0}}
output: {{answer: answer}}
entry: start
nodes:
  start: {{kind: update, update: {{answer: "''"}}}}
  ask: {{kind: llm, model: m, prompt: {{user: "{{{{ question }}}}"}}, update: {{answer: output}}}}
  quick: {{kind: update, update: {{answer: "'a quick answer'"}}}}
edges:
  start:
    - when: "'fast' in question"
      to: quick
    - else: ask
  ask: END
  quick: END
"#
    );
    let p = dir.join("spec.yaml");
    std::fs::write(&p, text).expect("spec");
    p
}

fn ragloop(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ragloop"));
    c.env("RAGLOOP_CACHE_DIR", dir.join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn signal(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .expect("kill");
    assert!(st.success(), "kill -{sig} failed");
}

/// Collects a child's stderr lines as they come.
fn stderr_lines(child: &mut Child) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&lines);
    let err = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            out.lock().unwrap().push(l);
        }
    });
    lines
}

fn stdout_text(child: &mut Child) -> std::thread::JoinHandle<String> {
    let mut out = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    })
}

/// Waits for the child to exit, `limit` at most (then kills it and fails).
fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not exit within {limit:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn last_json_line(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("trace");
    let last = text.lines().last().expect("a trace line");
    serde_json::from_str(last).expect("JSON line")
}

#[test]
fn sigterm_ends_a_run_with_a_final_interrupted_trace_line_and_exit_130() {
    let server = hung();
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &server.base());
    let trace = dir.path().join("trace.jsonl");
    let mut child = ragloop(dir.path())
        .arg("run")
        .arg(&spec)
        .args(["-q", "a slow question", "--trace"])
        .arg(&trace)
        .spawn()
        .expect("spawn");
    let stdout = stdout_text(&mut child);
    let _err = stderr_lines(&mut child);
    server.wait_for(1, &mut child);
    signal(&child, "TERM");
    let st = wait_exit(&mut child, Duration::from_secs(30));
    assert_eq!(st.code(), Some(130), "{st}");
    let last = last_json_line(&trace);
    assert_eq!(last["final"], json!(true), "{last}");
    assert_eq!(last["status"], json!("interrupted"), "{last}");
    assert!(
        last["error"].as_str().unwrap_or("").contains("node `ask`"),
        "{last}"
    );
    let out = stdout.join().unwrap();
    assert!(out.contains("Status: interrupted"), "{out}");
}

#[test]
fn sigint_ends_a_batch_run_keeping_the_finished_lines() {
    let server = hung();
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &server.base());
    let input = dir.path().join("q.jsonl");
    std::fs::write(
        &input,
        "{\"id\": 1, \"question\": \"fast one\"}\n{\"id\": 2, \"question\": \"slow one\"}\n{\"id\": 3, \"question\": \"fast two\"}\n",
    )
    .unwrap();
    let trace = dir.path().join("trace.jsonl");
    let mut child = ragloop(dir.path())
        .arg("run")
        .arg(&spec)
        .arg("--input")
        .arg(&input)
        .arg("--trace")
        .arg(&trace)
        .spawn()
        .expect("spawn");
    let stdout = stdout_text(&mut child);
    let _err = stderr_lines(&mut child);
    server.wait_for(1, &mut child);
    signal(&child, "INT");
    let st = wait_exit(&mut child, Duration::from_secs(30));
    assert_eq!(st.code(), Some(130), "{st}");
    let out = stdout.join().unwrap();
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(
        lines.len(),
        2,
        "the finished line and the interrupted one: {out}"
    );
    assert_eq!(
        (&lines[0]["id"], &lines[0]["status"]),
        (&json!(1), &json!("generated"))
    );
    assert_eq!(
        (&lines[1]["id"], &lines[1]["status"]),
        (&json!(2), &json!("interrupted"))
    );
    assert_eq!(last_json_line(&trace)["status"], json!("interrupted"));
}

fn dataset(dir: &Path) -> PathBuf {
    let item = |id: &str, q: &str| json!({"id": id, "question": q, "answer": "a quick answer", "must_contain": ["quick"], "sources": [], "kind": "direct"});
    let rows = [
        item("f1", "fast one"),
        item("f2", "fast two"),
        item("s1", "slow one"),
        item("f3", "fast three"),
    ];
    let p = dir.join("data.jsonl");
    std::fs::write(
        &p,
        rows.iter().map(|r| format!("{r}\n")).collect::<String>(),
    )
    .unwrap();
    p
}

#[test]
fn sigterm_ends_an_eval_with_every_finished_row_and_partial_reports() {
    let server = hung();
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &server.base());
    let data = dataset(dir.path());
    let out = dir.path().join("out");
    let mut child = ragloop(dir.path())
        .arg("eval")
        .arg(&spec)
        .arg("--dataset")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .args(["--concurrency", "1"])
        .spawn()
        .expect("spawn");
    let _stdout = stdout_text(&mut child);
    let err = stderr_lines(&mut child);
    server.wait_for(1, &mut child);
    signal(&child, "TERM");
    let st = wait_exit(&mut child, Duration::from_secs(30));
    let err = err.lock().unwrap().join("\n");
    assert_eq!(st.code(), Some(130), "{st}\n{err}");
    // The two pairs that finished are in results.jsonl; the interrupted one is not.
    let rows: Vec<Value> = std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("whole row"))
        .collect();
    let ids: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, ["f1", "f2"], "{rows:?}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["partial"], json!(true));
    assert_eq!(
        summary["interrupted"],
        json!({"pairs": 4, "with_rows": 2, "new_rows": 2, "cancelled": 1, "not_started": 1}),
        "{summary}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("Partial results: the eval was interrupted"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("the eval was interrupted"));
    assert!(err.contains("interrupted: 2 of 4 pair(s)"), "{err}");
    assert!(!out.join("eval.lock").exists(), "the lock is released");
}

/// A project whose one retriever is dense over a one-file corpus, embedded by the
/// model at `base` (`timeout_secs` per attempt, no retries): opening it embeds the
/// corpus. Returns the spec path.
fn dense_project(dir: &Path, base: &str, timeout_secs: u32) -> PathBuf {
    std::fs::create_dir_all(dir.join("corpus")).unwrap();
    std::fs::write(
        dir.join("corpus/a.md"),
        "# Cargo\n\nCargo check checks code.\n",
    )
    .unwrap();
    let text = format!(
        r#"version: 1
name: dense
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      documents: {{type: array}}
      answer: {{type: string}}
models:
  emb: {{provider: openai, model: emb, base_url: "{base}", timeout_secs: {timeout_secs}, retries: 0}}
retrievers:
  docs: {{kind: dense, corpus: corpus, top_k: 1, embedding: emb}}
output: {{answer: answer, documents: documents}}
entry: retrieve
nodes:
  retrieve: {{kind: retrieve, retriever: docs, query: "{{{{ question }}}}", update: {{documents: output}}}}
edges:
  retrieve: END
"#
    );
    let spec = dir.join("spec.yaml");
    std::fs::write(&spec, text).unwrap();
    spec
}

#[test]
fn a_second_signal_exits_at_once_when_the_first_cannot_end_the_work() {
    // The corpus is embedded (while the eval opens its resources) by a server that
    // never answers: the first SIGTERM cannot cut that short, the second exits.
    let server = hung();
    let dir = tempfile::tempdir().unwrap();
    let spec = dense_project(dir.path(), &server.base(), 300);
    let data = dataset(dir.path());
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut child = ragloop(dir.path())
        .arg("eval")
        .arg(&spec)
        .arg("--dataset")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .spawn()
        .expect("spawn");
    let _stdout = stdout_text(&mut child);
    let err = stderr_lines(&mut child);
    server.wait_for(1, &mut child);
    assert!(out.join("eval.lock").exists(), "the eval holds its --out");
    signal(&child, "TERM");
    // Wait until the first signal was handled (its note), not a fixed time.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !err.lock().unwrap().iter().any(|l| l.contains("stopping")) {
        assert!(Instant::now() < deadline, "no note after the first signal");
        if let Ok(Some(st)) = child.try_wait() {
            panic!(
                "the first signal ended the process ({st}); stderr: {:?}",
                err.lock().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(child.try_wait().unwrap().is_none(), "still embedding");
    signal(&child, "TERM");
    let st = wait_exit(&mut child, Duration::from_secs(20));
    assert_eq!(st.code(), Some(130), "{st}");
    assert!(!out.join("eval.lock").exists(), "the lock file is removed");
}

/// An embeddings server on 127.0.0.1 that reads each request whole, counts it, waits
/// `delay`, then answers one 2-dimensional vector per input.
fn slow_embeddings(delay: Duration) -> Hung {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Headers, then Content-Length bytes of body.
            let body = loop {
                let Ok(n) = s.read(&mut chunk) else {
                    break None;
                };
                if n == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            let l = l.to_ascii_lowercase();
                            l.strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break Some(buf[end + 4..end + 4 + len].to_vec());
                    }
                }
            };
            let Some(body) = body else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(delay);
            let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let n = req["input"].as_array().map_or(1, Vec::len);
            let data: Vec<Value> = (0..n)
                .map(|i| json!({"object": "embedding", "index": i, "embedding": [1.0, 0.5]}))
                .collect();
            let out = json!({"object": "list", "data": data, "model": "emb",
                "usage": {"prompt_tokens": 1, "total_tokens": 1}})
            .to_string();
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}",
                out.len()
            );
        }
    });
    Hung { port, accepted }
}

#[test]
fn a_signal_while_a_run_opens_its_index_ends_it_interrupted_before_its_first_node() {
    // The corpus is embedded while `run` opens its resources; a SIGTERM then is not
    // lost: the build finishes, and the run ends `interrupted` with its final trace line.
    let server = slow_embeddings(Duration::from_secs(2));
    let dir = tempfile::tempdir().unwrap();
    let spec = dense_project(dir.path(), &server.base(), 60);
    let trace = dir.path().join("trace.jsonl");
    let mut child = ragloop(dir.path())
        .arg("run")
        .arg(&spec)
        .args(["-q", "What does cargo check do?", "--trace"])
        .arg(&trace)
        .spawn()
        .expect("spawn");
    let stdout = stdout_text(&mut child);
    let err = stderr_lines(&mut child);
    server.wait_for(1, &mut child);
    signal(&child, "TERM");
    let st = wait_exit(&mut child, Duration::from_secs(60));
    assert_eq!(
        st.code(),
        Some(130),
        "{st}; stderr: {:?}",
        err.lock().unwrap()
    );
    let last = last_json_line(&trace);
    assert_eq!(last["final"], json!(true), "{last}");
    assert_eq!(last["status"], json!("interrupted"), "{last}");
    // Only the corpus was embedded: the run never reached its first node.
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
    let out = stdout.join().unwrap();
    assert!(out.contains("Status: interrupted"), "{out}");
}
