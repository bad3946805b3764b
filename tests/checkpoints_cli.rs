//! `ragloop run --thread ID [--resume]` and `--interrupt-before` from the command
//! line: a run killed with SIGKILL mid-way resumes from its last checkpointed step
//! without sending that step's (or an earlier step's) requests again and ends as an
//! uninterrupted run; a pause exits 6 and resumes with a checked state patch; bad
//! requests are usage errors that change nothing.
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An OpenAI-shaped server on 127.0.0.1 answering `ans(<last message>)` after
/// `delay`, counting requests by prompt. The first request whose prompt starts with
/// `hang_on` (if any) is never answered.
pub(crate) struct Server {
    port: u16,
    seen: Arc<Mutex<HashMap<String, usize>>>,
}

pub(crate) fn server(delay: Duration, hang_on: Option<&'static str>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let counts = Arc::clone(&seen);
    std::thread::spawn(move || {
        let hang = Arc::new(Mutex::new(hang_on));
        let mut held = Vec::new();
        for mut s in listener.incoming().flatten() {
            let Some(body) = read_body(&mut s) else {
                continue;
            };
            let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let prompt = req["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or("")
                .to_string();
            *counts.lock().unwrap().entry(prompt.clone()).or_default() += 1;
            let mut h = hang.lock().unwrap();
            if h.is_some_and(|p| prompt.starts_with(p)) {
                *h = None;
                held.push(s);
                continue;
            }
            drop(h);
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let out = json!({
                    "id": "c", "object": "chat.completion", "model": "test",
                    "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": format!("ans({prompt})")}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
                })
                .to_string();
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}",
                    out.len()
                );
            });
        }
    });
    Server { port, seen }
}

fn read_body(s: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Some(buf[end + 4..end + 4 + len].to_vec());
            }
        }
    }
}

impl Server {
    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
    /// Requests whose prompt starts with `prefix`.
    pub(crate) fn count(&self, prefix: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }
}

/// Three LLM steps; `c` optionally paused before.
pub(crate) fn spec(dir: &Path, base: &str, interrupt: bool) -> PathBuf {
    let text = format!(
        r#"version: 1
name: chain
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      notes: {{type: array, items: {{type: string}}}}
      answer: {{type: string}}
      score: {{type: integer}}
    required: [question]
  reducers: {{notes: append}}
models:
  m: {{provider: openai, model: test, base_url: "{base}", timeout_secs: 300, retries: 0}}
output: {{answer: answer}}
entry: a
nodes:
  a: {{kind: llm, model: m, prompt: {{user: "step a: {{{{ question }}}}"}}, update: {{notes: output}}}}
  b: {{kind: llm, model: m, prompt: {{user: "step b: {{{{ notes | join(',') }}}}"}}, update: {{notes: output}}}}
  c: {{kind: llm, model: m, interrupt_before: {interrupt}, prompt: {{user: "step c: {{{{ notes | join(',') }}}}"}}, update: {{answer: output}}}}
edges:
  a: b
  b: c
  c: END
"#
    );
    let p = dir.join("spec.yaml");
    std::fs::write(&p, text).expect("spec");
    p
}

fn ragloop(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ragloop"));
    c.env("RAGLOOP_CACHE_DIR", dir.join("cache"))
        .env_remove("OPENAI_API_KEY")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

struct Out {
    code: Option<i32>,
    json: Value,
    stderr: String,
}

fn run(dir: &Path, args: &[&str]) -> Out {
    let out = ragloop(dir).args(args).output().expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    Out {
        code: out.status.code(),
        json: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

fn db(dir: &Path) -> PathBuf {
    dir.join("cache/checkpoints/threads.sqlite3")
}

/// (step, next) of every checkpoint of a thread, read with a second connection
/// while the writer may be running (WAL).
pub(crate) fn checkpoints(dir: &Path, thread: &str) -> Vec<(u32, Option<String>)> {
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(db(dir), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return Vec::new();
    };
    let Ok(mut stmt) =
        conn.prepare("SELECT step, next_node FROM checkpoints WHERE thread_id = ?1 ORDER BY seq")
    else {
        return Vec::new();
    };
    stmt.query_map([thread], |r| Ok((r.get(0)?, r.get(1)?)))
        .map(|rows| rows.filter_map(Result::ok).collect())
        .unwrap_or_default()
}

#[cfg(unix)]
#[test]
fn a_run_killed_after_a_checkpoint_resumes_without_repeating_completed_steps() {
    let server = server(Duration::from_millis(50), Some("step b"));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &server.base(), false);
    let spec_arg = spec.to_str().unwrap();
    let mut child = ragloop(dir.path())
        .args([
            "run",
            spec_arg,
            "-q",
            "why",
            "--thread",
            "T",
            "--json",
            "--no-cache",
        ])
        .spawn()
        .expect("spawn");
    // Step 1 (`a`) is checkpointed and step 2's request is in flight (and held).
    let deadline = Instant::now() + Duration::from_secs(120);
    while server.count("step b") < 1 || !checkpoints(dir.path(), "T").iter().any(|c| c.0 == 1) {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the run ended before it was killed: {st}");
        }
        assert!(Instant::now() < deadline, "step 2 never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill -9");
    let _ = child.wait();
    assert_eq!(
        checkpoints(dir.path(), "T"),
        [(0, Some("a".to_string())), (1, Some("b".to_string()))]
    );
    assert_eq!(server.count("step a"), 1);

    let resumed = run(
        dir.path(),
        &[
            "run",
            spec_arg,
            "--thread",
            "T",
            "--resume",
            "--json",
            "--no-cache",
        ],
    );
    assert_eq!(resumed.code, Some(0), "{}", resumed.stderr);
    // `a` was not asked again; `b`, killed mid-call, was; `c` once.
    assert_eq!(server.count("step a"), 1);
    assert_eq!(server.count("step b"), 2);
    assert_eq!(server.count("step c"), 1);
    assert_eq!(resumed.json["thread"], "T");
    assert_eq!(resumed.json["run"], 1);

    // An uninterrupted run gives the same result.
    let whole = run(
        dir.path(),
        &["run", spec_arg, "-q", "why", "--json", "--no-cache"],
    );
    assert_eq!(whole.code, Some(0), "{}", whole.stderr);
    for key in ["status", "answer", "path", "steps", "iterations", "state"] {
        assert_eq!(resumed.json[key], whole.json[key], "{key}");
    }
    assert_eq!(
        resumed.json["usage"]["calls"], whole.json["usage"]["calls"],
        "the resumed run counts the calls of the steps before the kill"
    );
    assert_eq!(
        resumed.json["answer"],
        "ans(step c: ans(step a: why),ans(step b: ans(step a: why)))"
    );
    let steps: Vec<u32> = checkpoints(dir.path(), "T").iter().map(|c| c.0).collect();
    assert_eq!(steps, [0, 1, 2, 3]);
}

#[test]
fn a_pause_exits_6_and_a_patched_resume_finishes_the_run() {
    let server = server(Duration::ZERO, None);
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &server.base(), true);
    let spec_arg = spec.to_str().unwrap();
    let paused = run(
        dir.path(),
        &["run", spec_arg, "-q", "why", "--thread", "R", "--json"],
    );
    assert_eq!(paused.code, Some(6), "{}", paused.stderr);
    assert_eq!(paused.json["status"], "interrupted");
    assert_eq!(paused.json["paused_before"], "c");
    assert_eq!(paused.json["path"], json!(["a", "b"]));
    assert!(
        paused.stderr.contains("--thread R --resume"),
        "{}",
        paused.stderr
    );
    let before = checkpoints(dir.path(), "R");

    // A patch the state schema refuses: exit 2, nothing written.
    let bad = run(
        dir.path(),
        &[
            "run",
            spec_arg,
            "--thread",
            "R",
            "--resume",
            "--set",
            "score=high",
        ],
    );
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("score"), "{}", bad.stderr);
    assert!(bad.stderr.contains("integer"), "{}", bad.stderr);
    let unknown = run(
        dir.path(),
        &[
            "run", spec_arg, "--thread", "R", "--resume", "--set", "nope=1",
        ],
    );
    assert_eq!(unknown.code, Some(2), "{}", unknown.stderr);
    assert!(
        unknown
            .stderr
            .contains("fields: question, notes, answer, score"),
        "{}",
        unknown.stderr
    );
    // A blank question is refused as `run -q ""` is.
    let blank = run(
        dir.path(),
        &[
            "run",
            spec_arg,
            "--thread",
            "R",
            "--resume",
            "--set",
            "question=\"  \"",
        ],
    );
    assert_eq!(blank.code, Some(2), "{}", blank.stderr);
    assert!(
        blank.stderr.contains("the question is empty"),
        "{}",
        blank.stderr
    );
    // A new run on the paused thread is refused too.
    let again = run(
        dir.path(),
        &["run", spec_arg, "-q", "other", "--thread", "R"],
    );
    assert_eq!(again.code, Some(2), "{}", again.stderr);
    assert!(again.stderr.contains("--resume"), "{}", again.stderr);
    assert_eq!(checkpoints(dir.path(), "R"), before);
    assert_eq!(server.count("step c"), 0);

    let done = run(
        dir.path(),
        &[
            "run",
            spec_arg,
            "--thread",
            "R",
            "--resume",
            "--set",
            r#"notes=["reviewed"]"#,
            "--json",
        ],
    );
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    assert_eq!(done.json["answer"], "ans(step c: reviewed)");
    assert_eq!(done.json["path"], json!(["a", "b", "c"]));
    assert_eq!(server.count("step a"), 1);
    assert_eq!(server.count("step b"), 1);
    // Finished: nothing left to resume.
    let over = run(dir.path(), &["run", spec_arg, "--thread", "R", "--resume"]);
    assert_eq!(over.code, Some(2), "{}", over.stderr);
    assert!(
        over.stderr.contains("ended with status generated"),
        "{}",
        over.stderr
    );
}

#[test]
fn interrupt_before_flags_and_pausing_specs_are_checked() {
    let server = server(Duration::ZERO, None);
    let dir = tempfile::tempdir().unwrap();
    let plain = spec(dir.path(), &server.base(), false);
    let plain_arg = plain.to_str().unwrap();
    let unknown = run(
        dir.path(),
        &["run", plain_arg, "-q", "why", "--interrupt-before", "zz"],
    );
    assert_eq!(unknown.code, Some(2), "{}", unknown.stderr);
    assert!(
        unknown
            .stderr
            .contains("no node `zz` to interrupt before (nodes: a, b, c)"),
        "{}",
        unknown.stderr
    );
    assert_eq!(server.count("step"), 0);
    // Without --thread, a run that pauses gets a thread of its own, printed.
    let paused = run(
        dir.path(),
        &[
            "run",
            plain_arg,
            "-q",
            "why",
            "--interrupt-before",
            "b",
            "--json",
        ],
    );
    assert_eq!(paused.code, Some(6), "{}", paused.stderr);
    let thread = paused.json["thread"]
        .as_str()
        .expect("a thread id")
        .to_string();
    assert!(thread.starts_with("run-"), "{thread}");
    assert_eq!(paused.json["paused_before"], "b");
    let done = run(
        dir.path(),
        &["run", plain_arg, "--thread", &thread, "--resume", "--json"],
    );
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    assert_eq!(done.json["steps"], 3);
    // --input has no thread: a pausing spec or flag is refused.
    let questions = dir.path().join("q.jsonl");
    std::fs::write(&questions, "\"why\"\n").unwrap();
    let pausing = spec(dir.path(), &server.base(), true);
    let batch = run(
        dir.path(),
        &[
            "run",
            pausing.to_str().unwrap(),
            "--input",
            questions.to_str().unwrap(),
        ],
    );
    assert_eq!(batch.code, Some(2), "{}", batch.stderr);
    assert!(
        batch.stderr.contains("interrupt_before"),
        "{}",
        batch.stderr
    );
    let flag = run(
        dir.path(),
        &[
            "run",
            plain_arg,
            "--input",
            questions.to_str().unwrap(),
            "--interrupt-before",
            "b",
        ],
    );
    assert_eq!(flag.code, Some(2), "{}", flag.stderr);
    // --resume needs --thread and takes no question.
    assert_eq!(
        run(dir.path(), &["run", plain_arg, "--resume"]).code,
        Some(2)
    );
    assert_eq!(
        run(
            dir.path(),
            &["run", plain_arg, "--thread", "x", "--resume", "-q", "a"]
        )
        .code,
        Some(2)
    );
    // Unknown thread.
    let none = run(
        dir.path(),
        &["run", plain_arg, "--thread", "nope", "--resume"],
    );
    assert_eq!(none.code, Some(2), "{}", none.stderr);
    assert!(none.stderr.contains("no thread `nope`"), "{}", none.stderr);
}

#[test]
fn a_changed_spec_is_not_resumed_and_unusable_stores_are_reported() {
    let server = server(Duration::ZERO, None);
    let dir = tempfile::tempdir().unwrap();
    let spec_path = spec(dir.path(), &server.base(), true);
    let spec_arg = spec_path.to_str().unwrap();
    let paused = run(dir.path(), &["run", spec_arg, "-q", "why", "--thread", "S"]);
    assert_eq!(paused.code, Some(6), "{}", paused.stderr);
    let text = std::fs::read_to_string(&spec_path).unwrap();
    std::fs::write(&spec_path, text.replace("step c:", "step C:")).unwrap();
    let changed = run(dir.path(), &["run", spec_arg, "--thread", "S", "--resume"]);
    assert_eq!(changed.code, Some(2), "{}", changed.stderr);
    assert!(
        changed.stderr.contains("the spec changed"),
        "{}",
        changed.stderr
    );
    // A --model change is a change of the compiled spec too.
    std::fs::write(&spec_path, &text).unwrap();
    let model = format!("m=openai:other@{}", server.base());
    let flagged = run(
        dir.path(),
        &[
            "run", spec_arg, "--thread", "S", "--resume", "--model", &model,
        ],
    );
    assert_eq!(flagged.code, Some(2), "{}", flagged.stderr);
    assert!(
        flagged.stderr.contains("the spec changed"),
        "{}",
        flagged.stderr
    );

    // An unreachable PostgreSQL server: the run fails before anything runs, the
    // password not shown.
    let pg = run(
        dir.path(),
        &[
            "run",
            spec_arg,
            "-q",
            "x",
            "--thread",
            "P",
            "--checkpoints",
            "postgres://u:hunter2@127.0.0.1:1/db",
        ],
    );
    assert_eq!(pg.code, Some(1), "{}", pg.stderr);
    assert!(
        pg.stderr.contains("postgres://u:***@127.0.0.1:1/db"),
        "{}",
        pg.stderr
    );
    assert!(!pg.stderr.contains("hunter2"), "{}", pg.stderr);
    // A database of a newer ragloop is refused, untouched.
    let newer = dir.path().join("newer.sqlite3");
    {
        let c = rusqlite::Connection::open(&newer).unwrap();
        c.execute_batch(
            "CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (99);",
        )
        .unwrap();
    }
    let refused = run(
        dir.path(),
        &[
            "run",
            spec_arg,
            "-q",
            "x",
            "--thread",
            "N",
            "--checkpoints",
            newer.to_str().unwrap(),
        ],
    );
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("schema version 99 is newer"),
        "{}",
        refused.stderr
    );
    assert_eq!(server.count("step"), 2, "only the first run asked anything");
}

#[test]
fn a_paused_run_resumes_from_postgres_checkpoints() {
    let Some(db) =
        crate::checkpoints_pg::fresh_db("a_paused_run_resumes_from_postgres_checkpoints")
    else {
        return;
    };
    let server = server(Duration::ZERO, None);
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path(), &server.base(), true);
    let spec_arg = spec.to_str().unwrap();
    let paused = run(
        dir.path(),
        &[
            "run",
            spec_arg,
            "-q",
            "why",
            "--thread",
            "G",
            "--checkpoints",
            &db.url,
            "--json",
        ],
    );
    assert_eq!(paused.code, Some(6), "{}", paused.stderr);
    assert_eq!(paused.json["paused_before"], "c");
    let bad = run(
        dir.path(),
        &[
            "run",
            spec_arg,
            "--thread",
            "G",
            "--resume",
            "--checkpoints",
            &db.url,
            "--set",
            "score=x",
        ],
    );
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    let done = run(
        dir.path(),
        &[
            "run",
            spec_arg,
            "--thread",
            "G",
            "--resume",
            "--checkpoints",
            &db.url,
            "--set",
            r#"notes=["ok"]"#,
            "--json",
        ],
    );
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    assert_eq!(done.json["answer"], "ans(step c: ok)");
    assert_eq!(server.count("step a"), 1);
    // Nothing went to the SQLite default.
    assert!(!db_path_exists(dir.path()));
}

fn db_path_exists(dir: &Path) -> bool {
    db(dir).exists()
}
