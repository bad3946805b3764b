//! `ragloop eval` end to end: metrics on a hand-made dataset with known values,
//! resume after a kill, bad input, unknown variants, gates, reports. No network: a
//! temp corpus and the scripted provider.
use assert_cmd::Command;
use serde_json::{json, Value};

const SPEC: &str = r#"version: 1
name: evaltest
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      answer: {type: string}
    required: [question]
models:
  m: {provider: scripted, params: {file: fixture.json}}
retrievers:
  docs: {kind: bm25, corpus: corpus, top_k: 1}
output: {answer: answer, documents: documents, fallback: [giveup]}
limits: {max_steps: 10}
entry: retrieve
nodes:
  retrieve: {kind: retrieve, retriever: docs, query: "{{ question }}", update: {documents: output}}
  say: {kind: llm, model: m, prompt: {user: "{{ question }}"}, update: {answer: output}}
  giveup: {kind: update, update: {answer: "'no idea'"}}
edges:
  retrieve:
    - when: "question == 'giveup'"
      to: giveup
    - else: say
  say: END
  giveup: END
variants:
  bad:
    set:
      models.m.params.file: bad.json
  strict:
    set:
      limits.max_steps: 1
"#;

struct Env {
    dir: tempfile::TempDir,
}

fn item(id: &str, q: &str, answer: &str, must: &[&str], sources: &[&str], kind: &str) -> Value {
    json!({"id": id, "question": q, "answer": answer, "must_contain": must, "sources": sources, "kind": kind})
}

impl Env {
    fn new(fixture: Value, dataset: &[Value]) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("spec.yaml"), SPEC).unwrap();
        std::fs::write(p.join("fixture.json"), fixture.to_string()).unwrap();
        std::fs::write(
            p.join("bad.json"),
            json!({"say": vec!["nothing useful"; 50]}).to_string(),
        )
        .unwrap();
        std::fs::create_dir_all(p.join("corpus")).unwrap();
        std::fs::write(
            p.join("corpus/cargo.md"),
            "# Cargo\n\nCargo check checks your code compiles without producing an executable.\n",
        )
        .unwrap();
        std::fs::write(
            p.join("corpus/other.md"),
            "# Ownership\n\nEach value has one owner.\n",
        )
        .unwrap();
        let text: String = dataset.iter().map(|v| format!("{v}\n")).collect();
        std::fs::write(p.join("data.jsonl"), text).unwrap();
        Env { dir }
    }
    fn path(&self, p: &str) -> std::path::PathBuf {
        self.dir.path().join(p)
    }
    fn cmd(&self) -> Command {
        self.cmd_in("out")
    }
    fn cmd_in(&self, out: &str) -> Command {
        let mut c = Command::cargo_bin("ragloop").unwrap();
        c.env("RAGLOOP_CACHE_DIR", self.path("cache"))
            .arg("eval")
            .arg(self.path("spec.yaml"))
            .arg("--dataset")
            .arg(self.path("data.jsonl"))
            .arg("--out")
            .arg(self.path(out));
        c
    }
    fn rows(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("out/results.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    fn summary(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.path("out/summary.json")).unwrap())
            .unwrap()
    }
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tiny() -> Vec<Value> {
    vec![
        item(
            "q1",
            "What does cargo check do?",
            "cargo check builds without an executable",
            &["executable"],
            &["docs/cargo.md"],
            "direct",
        ),
        item(
            "q2",
            "Who owns a value?",
            "each value has one owner",
            &["owner"],
            &["docs/other.md"],
            "paraphrase",
        ),
        item("q3", "giveup", "no idea", &[], &[], "unanswerable"),
    ]
}

fn tiny_fixture() -> Value {
    json!({"say": ["It checks the code without an executable.", "No idea at all", "x", "x", "x", "x"]})
}

fn metric(s: &Value, variant: &str, name: &str) -> Value {
    s["results"][variant]["overall"]["metrics"][name]["value"].clone()
}

fn close(v: &Value, x: f64) -> bool {
    v.as_f64().is_some_and(|y| (y - x).abs() < 1e-9)
}

#[test]
fn retrieval_passes_come_from_the_step_records_whatever_the_update_stores() {
    // The retrieve node keeps a slice of its output, not `output` itself: the pass
    // is still the documents the search returned (read from the step record).
    let env = Env::new(tiny_fixture(), &tiny());
    let o = env
        .cmd()
        .args(["--variants", "base", "--concurrency", "1"])
        .args(["--override", "nodes.retrieve.update.documents=output[:1]"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = env.rows();
    let q1 = rows.iter().find(|r| r["id"] == "q1").unwrap();
    assert_eq!(q1["retrieved"], json!([["cargo.md"]]));
    assert_eq!(q1["metrics"]["recall"], json!([1.0]));
}

#[test]
fn metrics_on_a_hand_made_dataset() {
    let env = Env::new(tiny_fixture(), &tiny());
    let o = env
        .cmd()
        .args(["--variants", "base", "--concurrency", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = env.rows();
    assert_eq!(rows.len(), 3);
    let q1 = rows.iter().find(|r| r["id"] == "q1").unwrap();
    assert_eq!(q1["retrieved"], json!([["cargo.md"]]));
    assert_eq!(q1["metrics"]["recall"], json!([1.0]));
    assert_eq!(q1["metrics"]["must_contain_hit"], json!(true));
    let q3 = rows.iter().find(|r| r["id"] == "q3").unwrap();
    assert_eq!(q3["status"], "fallback");
    let s = env.summary();
    // q1 hit, q2 miss.
    assert!(
        close(&metric(&s, "base", "must_contain"), 0.5),
        "{}",
        metric(&s, "base", "must_contain")
    );
    // F1: q1 {it checks code without executable} vs {cargo check builds without executable}
    // = 2 common of 5 and 5 -> 0.4; q2 0; q3 "no idea" = reference -> 1.
    assert!(
        close(&metric(&s, "base", "f1"), 1.4 / 3.0),
        "{}",
        metric(&s, "base", "f1")
    );
    assert!(close(&metric(&s, "base", "recall_first"), 1.0));
    assert!(close(&metric(&s, "base", "precision_final"), 1.0));
    assert!(close(&metric(&s, "base", "declined_unanswerable"), 1.0));
    assert!(close(&metric(&s, "base", "declined_answerable"), 0.0));
    assert!(close(&metric(&s, "base", "fallback"), 1.0 / 3.0));
    assert!(close(&metric(&s, "base", "iterations"), 1.0));
    assert!(close(&metric(&s, "base", "calls"), 2.0 / 3.0));
    assert_eq!(
        s["results"]["base"]["overall"]["metrics"]["recall_final"]["n"],
        2
    );
    assert_eq!(s["results"]["base"]["by_kind"]["unanswerable"]["n"], 1);
    assert_eq!(s["results"]["base"]["overall"]["per_iteration"][0]["n"], 2);
    for f in ["results.jsonl", "summary.json", "report.md", "report.html"] {
        assert!(env.path("out").join(f).is_file(), "{f}");
    }
}

#[test]
fn unknown_variant_is_a_usage_error_before_anything_runs() {
    let env = Env::new(tiny_fixture(), &tiny());
    let o = env
        .cmd()
        .args(["--variants", "base,nope"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("unknown variant `nope`") && e.contains("base, bad, strict"),
        "{e}"
    );
    assert!(!env.path("out").exists());
}

#[test]
fn existing_results_need_resume() {
    let env = Env::new(tiny_fixture(), &tiny());
    let o = env
        .cmd()
        .args(["--variants", "base", "--concurrency", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = std::fs::read_to_string(env.path("out/results.jsonl")).unwrap();
    let o = env.cmd().args(["--variants", "base"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));
    assert_eq!(
        before,
        std::fs::read_to_string(env.path("out/results.jsonl")).unwrap()
    );
}

#[test]
fn resume_after_a_torn_last_line_neither_loses_nor_duplicates() {
    let env = Env::new(tiny_fixture(), &tiny());
    let o = env
        .cmd()
        .args(["--variants", "base,strict", "--concurrency", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let full = env.rows();
    assert_eq!(full.len(), 6);
    // Simulate kill -9 in the middle of writing row 3: two rows and half a line.
    let text = std::fs::read_to_string(env.path("out/results.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let torn = format!(
        "{}\n{}\n{}",
        lines[0],
        lines[1],
        &lines[2][..lines[2].len() / 2]
    );
    std::fs::write(env.path("out/results.jsonl"), torn).unwrap();
    let o = env
        .cmd()
        .args([
            "--variants",
            "base,strict",
            "--concurrency",
            "2",
            "--resume",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("torn last line"), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("4 new run(s), 2 resumed;"));
    let rows = env.rows();
    assert_eq!(rows.len(), 6);
    let mut pairs: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["variant"].as_str().unwrap().into(),
                r["id"].as_str().unwrap().into(),
            )
        })
        .collect();
    pairs.sort();
    pairs.dedup();
    assert_eq!(pairs.len(), 6);
    // The strict variant stops at the step limit.
    assert!(rows
        .iter()
        .filter(|r| r["variant"] == "strict")
        .all(|r| r["status"] == "limit"));
    assert!(close(&metric(&env.summary(), "strict", "loop_bound"), 1.0));
    // A second resume has nothing left to do.
    let o = env
        .cmd()
        .args(["--variants", "base,strict", "--resume"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("0 new run(s), 6 resumed;"));
    assert_eq!(env.rows().len(), 6);
}

#[test]
fn bad_dataset_lines_are_reported_with_line_numbers_and_the_rest_runs() {
    let env = Env::new(tiny_fixture(), &tiny());
    let good = std::fs::read_to_string(env.path("data.jsonl")).unwrap();
    let mut lines: Vec<String> = good.lines().map(String::from).collect();
    lines.insert(1, "{not json".into());
    lines.insert(2, json!({"id": "x", "question": "q"}).to_string());
    lines.insert(3, json!({"id": "y", "question": "q", "answer": 3, "must_contain": [], "sources": [], "kind": "direct"}).to_string());
    std::fs::write(env.path("data.jsonl"), lines.join("\n")).unwrap();
    let o = env
        .cmd()
        .args(["--variants", "base", "--concurrency", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("data.jsonl:2: not JSON"), "{e}");
    assert!(e.contains("data.jsonl:3: `x`: missing field `kind`"), "{e}");
    assert!(
        e.contains("data.jsonl:4: `y`: `answer` must be a string, found a number"),
        "{e}"
    );
    assert_eq!(env.rows().len(), 3);
    assert_eq!(env.summary()["dataset_errors"].as_array().unwrap().len(), 3);
    // --strict runs nothing.
    std::fs::remove_dir_all(env.path("out")).unwrap();
    let o = env
        .cmd()
        .args(["--variants", "base", "--strict"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--strict: nothing was run"));
    assert!(!env.path("out/results.jsonl").exists());
}

#[test]
fn duplicate_ids_are_refused() {
    let mut ds = tiny();
    ds.push(item("q1", "again", "a", &[], &[], "direct"));
    let env = Env::new(tiny_fixture(), &ds);
    let o = env.cmd().output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("line 4: duplicate id `q1` (first on line 1)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_failing_run_is_a_row_with_its_reason() {
    let fixture = json!({"say": [{"error": "provider exploded"}, "fine", "fine"]});
    let env = Env::new(fixture, &tiny());
    let o = env
        .cmd()
        .args(["--variants", "base", "--concurrency", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("1 run(s) failed"));
    let rows = env.rows();
    assert_eq!(rows.len(), 3);
    let failed: Vec<&Value> = rows.iter().filter(|r| r["status"] == "failed").collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0]["error"]
        .as_str()
        .unwrap()
        .contains("provider exploded"));
    assert!(close(&metric(&env.summary(), "base", "failed"), 1.0 / 3.0));
    let md = std::fs::read_to_string(env.path("out/report.md")).unwrap();
    assert!(md.contains("## Failed runs (1)") && md.contains("provider exploded"));
    let html = std::fs::read_to_string(env.path("out/report.html")).unwrap();
    assert!(html.contains("1 failed run(s)"), "header: {html}");
    let section = html
        .split("<h2 id=\"failed\">Failed runs (1)</h2>")
        .nth(1)
        .expect("a Failed runs section");
    let section = section.split("<h2>").next().unwrap();
    assert!(section.contains("provider exploded"), "{section}");
}

fn many(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            item(
                &format!("c{i}"),
                "What does cargo check do?",
                "it skips the executable",
                &["executable"],
                &["docs/cargo.md"],
                "direct",
            )
        })
        .collect()
}

#[test]
fn gates_give_exit_5_with_a_one_line_reason_and_reports_are_written() {
    let env = Env::new(
        json!({"say": vec!["no executable is produced"; 50]}),
        &many(10),
    );
    let o = env
        .cmd()
        .args(["--variants", "base,bad", "--fail-if-worse", "bad"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let e = stderr(&o);
    let gate_lines: Vec<&str> = e.lines().filter(|l| l.contains("gate failed")).collect();
    assert_eq!(gate_lines.len(), 1, "{e}");
    // 10 discordant pairs, all one way: exact p = 2 / 2^10.
    assert!(
        gate_lines[0].contains("must_contain -1 (McNemar p = 0.0020)"),
        "{e}"
    );
    assert!(env.path("out/report.html").is_file());
    let s = env.summary();
    assert_eq!(s["gates"][0]["passed"], false);
    let cmp = &s["comparisons"][0];
    assert_eq!(
        (cmp["a"].as_str(), cmp["b"].as_str()),
        (Some("base"), Some("bad"))
    );

    let o = env
        .cmd_in("out2")
        .args([
            "--variants",
            "base",
            "--fail-under",
            "must_contain=1",
            "--fail-under",
            "base:f1=0.99",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("gate failed: --fail-under base:f1=0.99: base: f1 = "),
        "{e}"
    );
    assert!(!e.contains("--fail-under must_contain=1"), "{e}");

    let o = env
        .cmd_in("out3")
        .args([
            "--variants",
            "base",
            "--fail-under",
            "must_contain=0.9",
            "--fail-over",
            "latency_p99_ms=100000",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn bad_gates_are_usage_errors() {
    let env = Env::new(tiny_fixture(), &tiny());
    for (args, want) in [
        (vec!["--fail-under", "nope=1"], "unknown metric `nope`"),
        (vec!["--fail-under", "f1=abc"], "`abc` is not a number"),
        (
            vec!["--fail-under", "must_contain=30"],
            "must_contain is a share from 0 to 1",
        ),
        (vec!["--fail-over", "failed=-0.5"], "failed is a share"),
        (
            vec!["--fail-under", "ghost:f1=0.5"],
            "variant `ghost` is not evaluated",
        ),
        (
            vec!["--variants", "bad", "--fail-if-worse", "bad"],
            "`base` is not evaluated",
        ),
    ] {
        let o = env.cmd().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    assert!(!env.path("out").exists());
}

#[test]
fn html_report_is_self_contained_and_escaped() {
    let mut ds = tiny();
    ds[0]["id"] = json!("<script>alert(1)</script>");
    let env = Env::new(tiny_fixture(), &ds);
    let o = env
        .cmd()
        .args(["--concurrency", "1", "--variants", "base,bad"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(env.path("out/report.html")).unwrap();
    assert!(html.matches("<svg").count() >= 3);
    for bad in [
        "http://", "https://", "<script", "<link", "src=", "@import", "url(",
    ] {
        assert!(!html.contains(bad), "{bad}");
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn kill_minus_9_then_resume() {
    // Slow answers so that the eval is still running when it is killed.
    let fixture = json!({"say": vec![json!({"output": "an executable", "delay_ms": 40}); 200]});
    let env = Env::new(fixture, &many(30));
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("ragloop"))
        .env("RAGLOOP_CACHE_DIR", env.path("cache"))
        .arg("eval")
        .arg(env.path("spec.yaml"))
        .arg("--dataset")
        .arg(env.path("data.jsonl"))
        .arg("--out")
        .arg(env.path("out"))
        .args(["--variants", "base", "--concurrency", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for some rows, then SIGKILL.
    let results = env.path("out/results.jsonl");
    for _ in 0..200 {
        if std::fs::read_to_string(&results).is_ok_and(|t| t.lines().count() >= 4) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let partial = std::fs::read_to_string(&results)
        .unwrap_or_default()
        .lines()
        .count();
    assert!(
        partial < 30,
        "the eval finished before the kill ({partial} rows)"
    );
    let o = env
        .cmd()
        .args(["--variants", "base", "--concurrency", "8", "--resume"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = env.rows();
    assert_eq!(rows.len(), 30);
    let ids: std::collections::HashSet<&str> =
        rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 30);
    assert!(close(&metric(&env.summary(), "base", "must_contain"), 1.0));
}

#[test]
fn a_spec_that_does_not_validate_runs_nothing() {
    let env = Env::new(tiny_fixture(), &tiny());
    std::fs::write(
        env.path("spec.yaml"),
        SPEC.replace("entry: retrieve", "entry: nowhere"),
    )
    .unwrap();
    let o = env.cmd().output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("nowhere") && e.contains("no report was written"),
        "{e}"
    );
    assert!(!env.path("out/results.jsonl").exists());
}

#[test]
fn a_missing_api_key_is_a_usage_error_before_anything_runs() {
    let env = Env::new(tiny_fixture(), &tiny());
    let o = env
        .cmd()
        .env_remove("OPENAI_API_KEY")
        .args(["--model", "m=openai:gpt-4o-mini"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("OPENAI_API_KEY"), "{}", stderr(&o));
    assert!(!env.path("out").exists());
}

#[test]
fn an_eval_recorded_once_replays_with_identical_rows() {
    let env = Env::new(tiny_fixture(), &tiny());
    let cassette = env.path("calls.jsonl");
    let o = env
        .cmd()
        .args(["--variants", "base", "--concurrency", "1", "--record"])
        .arg(&cassette)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recorded = env.rows();
    // The fixture is gone: every answer must come from the cassette.
    std::fs::write(env.path("fixture.json"), "{}").unwrap();
    let o = env
        .cmd_in("out2")
        .args(["--variants", "base", "--concurrency", "3", "--replay"])
        .arg(&cassette)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let replayed: Vec<Value> = std::fs::read_to_string(env.path("out2/results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let key = |r: &Value| {
        (
            r["id"].as_str().unwrap().to_string(),
            r["answer"].clone(),
            r["status"].clone(),
            r["metrics"].clone(),
        )
    };
    let mut a: Vec<_> = recorded.iter().map(key).collect();
    let mut b: Vec<_> = replayed.iter().map(key).collect();
    a.sort_by(|x, y| x.0.cmp(&y.0));
    b.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(a, b);
}

#[test]
fn a_usage_error_leaves_an_existing_cassette_alone() {
    let env = Env::new(tiny_fixture(), &tiny());
    let cassette = env.path("calls.jsonl");
    std::fs::write(&cassette, "precious\n").unwrap();
    for args in [vec!["--variants", "nope"], vec!["--fail-under", "nope=1"]] {
        let o = env
            .cmd()
            .args(&args)
            .arg("--record")
            .arg(&cassette)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(&cassette).unwrap(), "precious\n");
    }
    let o = env
        .cmd()
        .arg("--record")
        .arg(env.path("data.jsonl"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("would overwrite"), "{}", stderr(&o));
}

#[test]
fn a_variant_named_base_is_refused_by_validate_and_eval() {
    let env = Env::new(tiny_fixture(), &tiny());
    std::fs::write(env.path("spec.yaml"), SPEC.replace("  bad:\n", "  base:\n")).unwrap();
    let o = env.cmd().output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("`base`") && e.contains("reserved"), "{e}");
    assert!(!env.path("out/results.jsonl").exists());
    let o = Command::cargo_bin("ragloop")
        .unwrap()
        .arg("validate")
        .arg(env.path("spec.yaml"))
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("E027") || stderr(&o).contains("E027"));
    // A name listed twice is a usage error, not silently deduplicated.
    std::fs::write(env.path("spec.yaml"), SPEC).unwrap();
    let o = env
        .cmd()
        .args(["--variants", "base,base"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("listed twice"), "{}", stderr(&o));
}

#[test]
fn record_cannot_overwrite_the_evals_own_outputs() {
    let env = Env::new(tiny_fixture(), &tiny());
    for name in ["results.jsonl", "summary.json", "report.md", "report.html"] {
        // Fresh --out (does not exist yet) and a relative spelling of the same path.
        let o = env
            .cmd()
            .current_dir(env.path(""))
            .args(["--variants", "base", "--record"])
            .arg(format!("./out/../out/{name}"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("would overwrite"), "{}", stderr(&o));
        assert!(!env.path("out/results.jsonl").exists());
    }
    // After a run, with --resume: still refused, and the results are untouched.
    let o = env.cmd().args(["--variants", "base"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = std::fs::read(env.path("out/results.jsonl")).unwrap();
    let o = env
        .cmd()
        .args(["--variants", "base", "--resume", "--record"])
        .arg(env.path("out/summary.json"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        before,
        std::fs::read(env.path("out/results.jsonl")).unwrap()
    );
}

#[test]
fn one_question_never_gives_a_significant_verdict_or_trips_the_gate() {
    let env = Env::new(
        json!({"say": vec!["no executable is produced"; 50]}),
        &many(1),
    );
    let o = env
        .cmd()
        .args(["--variants", "base,bad", "--fail-if-worse", "bad"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = env.summary();
    for m in s["comparisons"][0]["metrics"].as_array().unwrap() {
        assert_eq!(m["verdict"], "insufficient data", "{m}");
    }
    assert_eq!(s["gates"][0]["passed"], true);
    assert!(
        s["gates"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("insufficient data"),
        "{}",
        s["gates"][0]
    );
    let md = std::fs::read_to_string(env.path("out/report.md")).unwrap();
    assert!(md.contains("insufficient data"), "{md}");
}

#[test]
fn resume_with_retry_failed_reruns_failed_pairs_and_keeps_one_row_per_pair() {
    let fixture = json!({"say": [{"error": "provider exploded"}, "fine", "fine"]});
    let env = Env::new(fixture, &tiny());
    let o = env
        .cmd()
        .args(["--variants", "base", "--concurrency", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        env.rows()
            .iter()
            .filter(|r| r["status"] == "failed")
            .count(),
        1
    );
    // Without --resume the flag is a usage error; plain --resume keeps the failed row.
    let o = env
        .cmd()
        .args(["--variants", "base", "--retry-failed"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    std::fs::write(
        env.path("fixture.json"),
        json!({"say": vec!["fine"; 10]}).to_string(),
    )
    .unwrap();
    let o = env
        .cmd()
        .args(["--variants", "base", "--resume"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(env.rows().len(), 3);
    let o = env
        .cmd()
        .args(["--variants", "base", "--resume", "--retry-failed"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("1 new run(s), 2 resumed"));
    let rows = env.rows();
    assert_eq!(rows.len(), 3, "{rows:?}");
    let pairs: std::collections::HashSet<(String, String)> = rows
        .iter()
        .map(|r| (r["variant"].to_string(), r["id"].to_string()))
        .collect();
    assert_eq!(pairs.len(), 3);
    assert!(rows.iter().all(|r| r["status"] != "failed"), "{rows:?}");
    assert!(close(&metric(&env.summary(), "base", "failed"), 0.0));
}

#[test]
fn a_report_that_cannot_be_written_does_not_stop_the_others() {
    let env = Env::new(tiny_fixture(), &tiny());
    std::fs::create_dir_all(env.path("out/report.md")).unwrap();
    let o = env.cmd().args(["--variants", "base"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.lines()
            .any(|l| l.starts_with("ragloop eval: cannot write") && l.contains("report.md")),
        "{e}"
    );
    assert!(
        !e.contains("nothing was evaluated") && !e.contains("no report was written"),
        "{e}"
    );
    assert!(env.path("out/report.html").is_file());
    assert!(env.path("out/summary.json").is_file());
    assert_eq!(env.rows().len(), 3);
}

#[test]
fn failures_before_running_carry_the_prefix() {
    let env = Env::new(tiny_fixture(), &tiny());
    std::fs::write(env.path("afile"), "x").unwrap();
    let o = env
        .cmd_in("afile/sub")
        .args(["--variants", "base"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.starts_with("ragloop eval: cannot create"), "{e}");
    // A corrupt row in the middle of results.jsonl, with --resume.
    std::fs::create_dir_all(env.path("out")).unwrap();
    std::fs::write(env.path("out/results.jsonl"), "{}\n{}\n").unwrap();
    let o = env
        .cmd()
        .args(["--variants", "base", "--resume"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.starts_with("ragloop eval: ") && e.contains("results.jsonl:1: not a result row"),
        "{e}"
    );
}

#[test]
fn html_tables_follow_the_variant_order_and_list_every_kind_column() {
    let env = Env::new(tiny_fixture(), &tiny());
    let o = env
        .cmd()
        .args(["--concurrency", "1", "--variants", "strict,base"])
        .output()
        .unwrap();
    assert!(o.status.code().is_some(), "{}", stderr(&o));
    let html = std::fs::read_to_string(env.path("out/report.html")).unwrap();
    let by_kind = html
        .split("<h2>By question kind</h2>")
        .nth(1)
        .unwrap()
        .split("<h2>")
        .next()
        .unwrap();
    assert!(by_kind.contains("declined_<wbr>answerable"), "{by_kind}");
    assert!(by_kind.contains("declined_<wbr>unanswerable"), "{by_kind}");
    // Every run: per question, `strict` (listed first) before `base`.
    let runs = html.split("<h2>Every run</h2>").nth(1).unwrap();
    for id in ["q1", "q2", "q3"] {
        let strict = runs.find(&format!("<td>{id}</td><td>strict</td>")).unwrap();
        let base = runs.find(&format!("<td>{id}</td><td>base</td>")).unwrap();
        assert!(strict < base, "{id}");
    }
}

#[test]
fn settings_are_recorded_and_resume_refuses_different_ones() {
    let env = Env::new(tiny_fixture(), &tiny());
    let o = env
        .cmd()
        .args(["--variants", "base", "--concurrency", "1"])
        .args(["--override", "retrievers.docs.top_k=1", "--retries", "1"])
        .args(["--timeout", "7"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(env.path("out/settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["overrides"], json!(["retrievers.docs.top_k=1"]));
    assert_eq!(settings["retries"], json!(1));
    assert_eq!(settings["timeout_secs"], json!(7.0));
    assert_eq!(env.summary()["settings"], settings);
    let md = std::fs::read_to_string(env.path("out/report.md")).unwrap();
    assert!(md.contains("--override retrievers.docs.top_k=1"), "{md}");
    let html = std::fs::read_to_string(env.path("out/report.html")).unwrap();
    assert!(html.contains("--override retrievers.docs.top_k=1"));
    let before = std::fs::read_to_string(env.path("out/results.jsonl")).unwrap();
    // Different override: refused, naming old and new, nothing touched.
    let o = env
        .cmd()
        .args(["--variants", "base", "--resume"])
        .args(["--override", "retrievers.docs.top_k=8", "--retries", "1"])
        .args(["--timeout", "7"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--override") && err.contains("top_k=1") && err.contains("top_k=8"),
        "{err}"
    );
    assert!(!err.contains("--retries"), "{err}");
    assert_eq!(
        before,
        std::fs::read_to_string(env.path("out/results.jsonl")).unwrap()
    );
    // A dropped --timeout differs too.
    let o = env
        .cmd()
        .args(["--variants", "base", "--resume"])
        .args(["--override", "retrievers.docs.top_k=1", "--retries", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--timeout: 7.0 (before) vs null (now)"),
        "{}",
        stderr(&o)
    );
    // The same settings resume.
    let o = env
        .cmd()
        .args(["--variants", "base", "--resume"])
        .args(["--override", "retrievers.docs.top_k=1", "--retries", "1"])
        .args(["--timeout", "7"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
