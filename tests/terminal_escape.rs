//! Control characters from remote content (answers, document sources) and from state
//! (JSON keys) never reach the terminal raw: `ragloop run`'s human output and its
//! error messages escape them; `--json` stays exact JSON.
use assert_cmd::Command;
use serde_json::{json, Value};

const SPEC: &str = r#"version: 1
name: esc
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      answer: {type: string}
      grade: {type: object}
    required: [question]
models:
  m: {provider: scripted, params: {file: fixture.json}}
retrievers:
  docs: {kind: bm25, corpus: corpus, top_k: 2}
output: {answer: answer, documents: documents}
limits: {max_steps: 10}
entry: retrieve
nodes:
  retrieve: {kind: retrieve, retriever: docs, query: "{{ question }}", update: {documents: output}}
  say: {kind: llm, model: m, prompt: {user: "{{ question }} GRADE"}, update: {answer: output}}
edges:
  retrieve: say
  say: END
"#;

const ANSWER: &str = "Cargo \u{1b}[31mchecks\u{0} code\u{9b}2J\nsecond line\twith tab";

fn project(grade_expr: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("spec.yaml"), SPEC.replace("GRADE", grade_expr)).unwrap();
    std::fs::write(
        p.join("fixture.json"),
        json!({ "say": [ANSWER] }).to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(p.join("corpus")).unwrap();
    std::fs::write(
        p.join("corpus/evil\u{1b}[31m\u{7}.md"),
        "# Cargo\n\nCargo check checks your code.\n",
    )
    .unwrap();
    dir
}

fn run(dir: &tempfile::TempDir, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("ragloop")
        .unwrap()
        .current_dir(dir.path())
        .env("RAGLOOP_CACHE_DIR", dir.path().join("cache"))
        .args([
            "run",
            "spec.yaml",
            "--question",
            "What does cargo check do?",
        ])
        .args(extra)
        .output()
        .unwrap()
}

fn raw_controls(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    text.chars()
        .filter(|c| matches!(*c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'))
        .map(|c| c as u32 as u8)
        .collect()
}

#[test]
fn human_output_escapes_control_characters_of_the_answer_and_sources() {
    let dir = project("");
    let o = run(&dir, &[]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        raw_controls(&o.stdout).is_empty(),
        "raw controls {:?} in {out:?}",
        raw_controls(&o.stdout)
    );
    assert!(
        out.contains("Cargo \\u{1b}[31mchecks\\u{0} code\\u{9b}2J\nsecond line\twith tab"),
        "{out:?}"
    );
    assert!(out.contains("evil\\u{1b}[31m\\u{7}.md"), "{out:?}");
    assert!(raw_controls(&o.stderr).is_empty());
    // --json keeps the exact values (JSON escapes them itself).
    let dir = project("");
    let o = run(&dir, &["--json"]);
    assert!(
        !o.stdout.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&o.stdout)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["answer"], json!(ANSWER));
    assert!(
        v["sources"][0]
            .as_str()
            .unwrap()
            .contains("evil\u{1b}[31m\u{7}.md"),
        "{v}"
    );
}

#[test]
fn undefined_value_messages_escape_state_key_names() {
    let dir = project("{{ grade.verdict.scor }}");
    let o = run(
        &dir,
        &[
            "--set",
            "grade={\"verdict\":{\"\\u001b[31mevil\\nline\":1,\"score\":2}}",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(raw_controls(&o.stderr).is_empty(), "{err:?}");
    assert!(raw_controls(&o.stdout).is_empty());
    let line = err
        .lines()
        .find(|l| l.contains("grade.verdict has:"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("\\u{1b}[31mevil\\u{a}line, score"), "{line}");
}
