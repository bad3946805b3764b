//! `ragloop run` end to end: exit codes, outputs, traces, bad input. No network: a
//! temp corpus and the scripted provider.
use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::Path;

const SPEC: &str = r#"version: 1
name: cli
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      answer: {type: string}
      n: {type: integer, minimum: 0}
    required: [question]
  initial: {n: 0}
models:
  m: {provider: scripted, params: {file: fixture.json}}
retrievers:
  docs: {kind: bm25, corpus: corpus, top_k: 2}
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
    - when: "question == 'nothing'"
      to: END
    - when: "n > 100"
      to: END
    - else: say
  say: END
  giveup: END
variants:
  strict:
    set:
      limits.max_steps: 1
"#;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(fixture: Value) -> Env {
        Env::with_spec(SPEC, fixture)
    }
    fn with_spec(spec: &str, fixture: Value) -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("spec.yaml"), spec).unwrap();
        std::fs::write(dir.path().join("fixture.json"), fixture.to_string()).unwrap();
        std::fs::create_dir_all(dir.path().join("corpus")).unwrap();
        std::fs::write(dir.path().join("corpus/cargo.md"), "# Cargo\n\nCargo check checks your code compiles without producing an executable. Use {{ x }} literally.\n").unwrap();
        std::fs::write(
            dir.path().join("corpus/other.md"),
            "# Ownership\n\nEach value has one owner.\n",
        )
        .unwrap();
        Env { dir }
    }
    fn path(&self, p: &str) -> String {
        self.dir.path().join(p).to_string_lossy().into_owned()
    }
    fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("ragloop").unwrap();
        c.env("RAGLOOP_CACHE_DIR", self.dir.path().join("cache"))
            .arg("run")
            .arg(self.path("spec.yaml"));
        c
    }
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn generated_exits_0_with_answer_sources_and_path() {
    let env = Env::new(json!({"say": ["Cargo check checks. [cargo.md]"]}));
    let o = env
        .cmd()
        .args(["--question", "What does cargo check do?"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("Cargo check checks. [cargo.md]"), "{out}");
    assert!(out.contains("- cargo.md"), "{out}");
    assert!(
        out.contains("Path: retrieve -> say (2 step(s), 1 iteration(s))"),
        "{out}"
    );
    assert!(out.contains("Status: generated"), "{out}");
}

#[test]
fn json_output_has_the_result_fields() {
    let env = Env::new(json!({"say": ["ok"]}));
    let o = env
        .cmd()
        .args(["--question", "cargo check", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    for key in [
        "status",
        "answer",
        "sources",
        "path",
        "iterations",
        "state",
        "usage",
        "error",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    assert_eq!(v["status"], json!("generated"));
    assert_eq!(v["usage"]["calls"], json!(1));
}

#[test]
fn exhausted_and_fallback_exit_3() {
    let env = Env::new(json!({}));
    let o = env.cmd().args(["--question", "nothing"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stdout(&o).contains("Status: exhausted"));
    let o = env.cmd().args(["--question", "giveup"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("no idea") && stdout(&o).contains("Status: fallback"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn limit_exits_4() {
    let env = Env::new(json!({"say": ["x"]}));
    let o = env
        .cmd()
        .args(["--question", "cargo", "--variant", "strict"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("max_steps"), "{}", stderr(&o));
}

#[test]
fn set_overrides_state_fields() {
    let env = Env::new(json!({}));
    let o = env
        .cmd()
        .args(["--question", "cargo", "--set", "n=101", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["state"]["n"], json!(101));
}

#[test]
fn provider_failure_exits_1_and_keeps_the_trace() {
    let env = Env::new(json!({"say": [{"error": "HTTP 503"}]}));
    let trace = env.path("trace.jsonl");
    let o = env
        .cmd()
        .args(["--question", "cargo", "--trace", &trace])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("node `say`") && stderr(&o).contains("HTTP 503"),
        "{}",
        stderr(&o)
    );
    let lines: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["node"], json!("retrieve"));
    assert!(lines[1]["error"].as_str().unwrap().contains("HTTP 503"));
    assert_eq!(lines[2]["status"], json!("failed"));
}

#[test]
fn usage_errors_exit_2() {
    let env = Env::new(json!({}));
    let cases: Vec<Vec<&str>> = vec![
        vec!["--question", ""],
        vec!["--question", "   "],
        vec![],
        vec!["--question", "q", "--variant", "nope"],
        vec!["--question", "q", "--set", "novalue"],
        vec!["--question", "q", "--set", "unknown_field=1"],
        vec!["--question", "q", "--model", "m=nosuch"],
        vec!["--question", "q", "--model", "nomodel=offline"],
        vec!["--question", "q", "--bogus-flag"],
    ];
    for args in cases {
        let o = env.cmd().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}");
    }
    let bad = env.path("bad.jsonl");
    std::fs::write(&bad, b"\"ok\"\n\xff\xfe\n").unwrap();
    let o = env.cmd().args(["--input", &bad]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("UTF-8"), "{}", stderr(&o));
}

#[test]
fn invalid_spec_prints_diagnostics_and_exits_1() {
    let env = Env::with_spec(&SPEC.replace("  say: END\n", "  say: nowhere\n"), json!({}));
    let o = env.cmd().args(["--question", "q"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("E022") && err.contains("nothing was run"),
        "{err}"
    );
}

#[test]
fn missing_corpus_names_retriever_and_path() {
    let env = Env::with_spec(
        &SPEC.replace("corpus: corpus", "corpus: no/such/dir"),
        json!({}),
    );
    let o = env.cmd().args(["--question", "q"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("retriever `docs`") && err.contains("no/such/dir"),
        "{err}"
    );
}

#[test]
fn openai_without_key_fails_before_the_run() {
    let env = Env::new(json!({}));
    let o = env
        .cmd()
        .env_remove("OPENAI_API_KEY")
        .args(["--question", "q", "--model", "m=openai:gpt-4o-mini"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("model `m`") && stderr(&o).contains("OPENAI_API_KEY"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn input_file_runs_every_line_and_reports_bad_ones() {
    let env = Env::new(json!({"say": ["a1", "a2"]}));
    let input = env.path("q.jsonl");
    std::fs::write(
        &input,
        "{\"id\": 1, \"question\": \"cargo check\"}\nnot json\n\"ownership\"\n{\"id\": 4}\n",
    )
    .unwrap();
    let o = env.cmd().args(["--input", &input]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let lines: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(
        (lines[0]["id"].clone(), lines[0]["answer"].clone()),
        (json!(1), json!("a1"))
    );
    assert_eq!(
        (lines[1]["line"].clone(), lines[1]["status"].clone()),
        (json!(2), json!("failed"))
    );
    assert_eq!(lines[2]["answer"], json!("a2"));
    assert_eq!(lines[3]["line"], json!(4));
    assert!(
        stderr(&o).contains(":2:") && stderr(&o).contains(":4:"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn rows_of_bad_input_lines_keep_their_id() {
    let env = Env::new(json!({"say": ["a1"]}));
    let input = env.path("ids.jsonl");
    std::fs::write(
        &input,
        "{\"id\":\"a\",\"question\":\"\"}\n{\"id\":\"b\"}\n{\"id\":{\"k\":3},\"question\":7}\n[1]\n{\"question\":\" \"}\n",
    )
    .unwrap();
    let o = env.cmd().args(["--input", &input]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let rows: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 5, "{}", stdout(&o));
    let ids: Vec<Option<&Value>> = rows.iter().map(|r| r.get("id")).collect();
    assert_eq!(
        ids,
        [
            Some(&json!("a")),
            Some(&json!("b")),
            Some(&json!({"k": 3})),
            None,
            None
        ],
        "{}",
        stdout(&o)
    );
    for (n, r) in rows.iter().enumerate() {
        assert_eq!(
            (&r["line"], &r["status"]),
            (&json!(n + 1), &json!("failed")),
            "{r}"
        );
    }
    assert_eq!(rows[0]["error"], json!("the question is empty"));
}

#[test]
fn huge_question_does_not_panic() {
    let env = Env::new(json!({"say": ["ok"]}));
    let q = "cargo ".repeat(175_000); // ~1 MB
    let qfile = env.path("q.jsonl");
    std::fs::write(&qfile, serde_json::to_string(&q).unwrap()).unwrap();
    let o = env.cmd().args(["--input", &qfile]).output().unwrap();
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn corpus_flag_overrides_the_spec() {
    let env = Env::with_spec(
        &SPEC.replace("corpus: corpus", "corpus: no/such/dir"),
        json!({"say": ["ok"]}),
    );
    let corpus = env.path("corpus");
    let o = env
        .cmd()
        .args(["--question", "cargo", "--corpus", &corpus])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(Path::new(&env.path("cache")).exists());
}

/// A judge whose score drives a branch: for the type-check tests below.
fn judge_spec(when: &str, over: &str) -> String {
    format!(
        r#"version: 1
name: judge
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      grade: {{type: object}}
      items: {{}}
      grades: {{type: array}}
      answer: {{type: string}}
    required: [question]
  initial: {{items: "abc"}}
models:
  m: {{provider: scripted, params: {{file: fixture.json}}}}
output: {{answer: answer}}
entry: fan
nodes:
  fan: {{kind: map, over: "{over}", model: m, prompt: {{user: "{{{{ item }}}}"}}, update: {{grades: output}}}}
  judge: {{kind: llm, model: m, prompt: {{user: "{{{{ question }}}}"}}, schema: {{type: object, properties: {{score: {{}}}}, required: [score]}}, update: {{grade: output}}}}
  say: {{kind: llm, model: m, prompt: {{user: "{{{{ question }}}}"}}, update: {{answer: output}}}}
edges:
  fan: judge
  judge:
    - when: "{when}"
      to: say
    - else: END
  say: END
"#
    )
}

#[test]
fn guarded_comparisons_are_trusted_and_unguarded_mismatches_fail() {
    // Guarded by a type test: the arm is simply false for a string score.
    let env = Env::with_spec(
        &judge_spec("grade.score is number and grade.score > 5", "[]"),
        json!({"judge": [{"score": "high"}], "say": ["x"]}),
    );
    let o = env.cmd().args(["--question", "q"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    // Unguarded: a list (or null) compared with a number is a fault of the data.
    for score in [json!([1]), json!(null), json!("high")] {
        let env = Env::with_spec(
            &judge_spec("grade.score > 5", "[]"),
            json!({"judge": [{"score": score}], "say": ["x"]}),
        );
        let o = env.cmd().args(["--question", "q"]).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{score}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot order"), "{}", stderr(&o));
    }
}

#[test]
fn map_over_an_expression_that_is_not_a_list_fails() {
    let env = Env::with_spec(
        &judge_spec("grade.score > 5", "items if items else []"),
        json!({"fan": ["a", "b", "c"], "judge": [{"score": 1}], "say": ["x"]}),
    );
    let o = env.cmd().args(["--question", "q"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not a list"), "{}", stderr(&o));
}

#[test]
fn set_question_and_trace_over_inputs_are_usage_errors() {
    let env = Env::new(json!({"say": ["ok"]}));
    let o = env
        .cmd()
        .args(["--question", "q", "--set", "question="])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let spec = env.path("spec.yaml");
    let before = std::fs::read_to_string(&spec).unwrap();
    let o = env
        .cmd()
        .args(["--question", "q", "--trace", &spec])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&spec).unwrap(), before);
}

/// The `--set` messages (`runtime::SetError`) word by word.
#[test]
fn set_errors_say_which_field_and_why() {
    let env = Env::new(json!({"say": ["ok"]}));
    let err = |set: &str| {
        let o = env
            .cmd()
            .args(["--question", "q", "--set", set])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{set}: {}", stderr(&o));
        stderr(&o)
    };
    let e = err("question=x");
    assert!(
        e.contains("ragloop run: --set question: give the question with --question or --input"),
        "{e}"
    );
    let e = err("nope=1");
    assert!(
        e.contains("ragloop run: --set nope: the state has no field `nope` (fields: "),
        "{e}"
    );
    let e = err("n=-1");
    assert!(
        e.contains("ragloop run: --set n=-1: the state schema says `n` is integer: "),
        "{e}"
    );
}
