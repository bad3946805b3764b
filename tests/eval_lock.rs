//! One writer per eval directory: a second `ragloop eval` on the same --out exits 2
//! at once naming the holder's pid and the lock file; a lock file left by an eval
//! that is gone is taken over with a note; the lock file is removed when the eval
//! ends, normally or not.
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SPEC: &str = r#"version: 1
name: locktest
state:
  schema:
    type: object
    properties:
      question: {type: string}
      answer: {type: string}
    required: [question]
models:
  m: {provider: scripted, params: {file: fixture.json}}
output: {answer: answer}
entry: say
nodes:
  say: {kind: llm, model: m, prompt: {user: "{{ question }}"}, update: {answer: output}}
edges:
  say: END
"#;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// `answers`: the scripted answers of `say`, in order.
    fn new(answers: Value, questions: usize) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("spec.yaml"), SPEC).unwrap();
        std::fs::write(
            p.join("fixture.json"),
            json!({ "say": answers }).to_string(),
        )
        .unwrap();
        let text: String = (0..questions)
            .map(|i| {
                format!(
                    "{}\n",
                    json!({"id": format!("q{i}"), "question": format!("question {i}"), "answer": "ok",
                           "must_contain": ["ok"], "sources": [], "kind": "direct"})
                )
            })
            .collect();
        std::fs::write(p.join("data.jsonl"), text).unwrap();
        Env { dir }
    }
    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }
    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ragloop"));
        c.env("RAGLOOP_CACHE_DIR", self.path("cache"))
            .arg("eval")
            .arg(self.path("spec.yaml"))
            .arg("--dataset")
            .arg(self.path("data.jsonl"))
            .arg("--out")
            .arg(self.path("out"))
            .stdin(Stdio::null());
        c
    }
}

fn lock_holder(out: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(out.join("eval.lock")).ok()?;
    let v: Value = serde_json::from_str(text.trim()).ok()?;
    v["pid"].as_u64().map(|p| p as u32)
}

#[test]
fn a_second_eval_on_the_same_out_exits_2_naming_the_holder() {
    // The first eval's runs answer slowly: it holds the directory meanwhile.
    let slow = json!({"output": "ok", "delay_ms": 4000});
    let env = Env::new(json!([slow, slow, slow]), 3);
    let mut first = env
        .cmd()
        .args(["--concurrency", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = first.id();
    // Wait until the first eval has written its pid into the lock file.
    let deadline = Instant::now() + Duration::from_secs(60);
    while lock_holder(&env.path("out")) != Some(pid) {
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first eval ended early"
        );
        assert!(Instant::now() < deadline, "the first eval took no lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    let second = env.cmd().output().unwrap();
    let err = String::from_utf8_lossy(&second.stderr).into_owned();
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("pid {pid}")), "{err}");
    assert!(err.contains("eval.lock"), "{err}");
    // At once: well before the first eval's runs could end.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let st = first.wait_with_output().unwrap();
    assert_eq!(
        st.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    // Only the first eval wrote: three whole rows, the summary complete.
    let text = std::fs::read_to_string(env.path("out/results.jsonl")).unwrap();
    let ids: Vec<String> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("whole row");
            v["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids, ["q0", "q1", "q2"]);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(env.path("out/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["partial"], json!(false));
    assert!(
        !env.path("out/eval.lock").exists(),
        "released after a normal exit"
    );
}

#[test]
fn a_lock_file_left_by_a_dead_eval_is_taken_over_with_a_note() {
    let env = Env::new(json!(["ok", "ok"]), 2);
    std::fs::create_dir_all(env.path("out")).unwrap();
    // A pid that cannot be running (above any pid_max), and no OS lock held.
    std::fs::write(
        env.path("out/eval.lock"),
        json!({"pid": 999_999_999u32, "host": "gone", "started_unix_ms": 1_000}).to_string(),
    )
    .unwrap();
    let o = env.cmd().output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("took over") && err.contains("pid 999999999"),
        "{err}"
    );
    assert!(!env.path("out/eval.lock").exists());
}

#[test]
fn the_lock_is_released_after_a_failed_eval() {
    // A run fails (exit 1, reports written) ...
    let env = Env::new(json!([{"error": "boom"}]), 1);
    let o = env.cmd().output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!env.path("out/eval.lock").exists());
    // ... and an eval that stops on an error after locking (a corrupt results
    // file on --resume, exit 1, no report).
    std::fs::write(env.path("out/results.jsonl"), "{oops\n{}\n").unwrap();
    let o = env.cmd().arg("--resume").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("not a result row"), "{err}");
    assert!(!env.path("out/eval.lock").exists());
    // Usable again at once.
    std::fs::remove_file(env.path("out/results.jsonl")).unwrap();
    let o = env.cmd().output().unwrap();
    assert_ne!(o.status.code(), Some(2));
}
