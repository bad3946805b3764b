//! An undefined value at run time names the path, the deepest part that exists and
//! what it holds, and where (template name, line and column; node and predicate), in
//! prompts, predicates, `update` expressions and map items alike.
use crate::runtime_support::*;
use ragloop::runtime::Status;
use serde_json::json;

/// A spec with one `llm` node (`generate`, prompt `user`), then an `update` node
/// (`after`, `label: <update>`), then a branch on `when`.
fn spec(user: &str, update: &str, when: &str) -> String {
    format!(
        r#"version: 1
name: undefined
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      grade: {{type: object}}
      docs: {{type: array}}
      # No `type`: validate cannot know `answer` is a string, so `answer.foo` reaches
      # the run time (a typed field is caught statically: E082).
      answer: {{}}
      label: {{type: string}}
    required: [question]
  initial: {{grade: {{verdict: {{score: 1}}}}, docs: [{{title: a}}, {{title: b}}]}}
models:
  m: {{provider: scripted, params: {{file: fixture.json}}}}
output: {{answer: answer}}
entry: generate
nodes:
  generate:
    kind: llm
    model: m
    prompt:
      user: {user}
    update:
      answer: output
  after:
    kind: update
    update:
      label: {update}
edges:
  generate: after
  after:
    - when: {when}
      to: END
    - else: END
"#
    )
}

/// Runs the spec with `generate` answering "done" and returns the failure message.
fn failure(user: &str, update: &str, when: &str) -> String {
    let p = project(&spec(user, update, when), &json!({}));
    let r = quick(&program(&p.spec), json!({"generate": ["done"]}), vec![]);
    assert_eq!(r.status, Status::Failed, "{:?}", r.error);
    r.error.expect("an error")
}

const OK_USER: &str = "\"{{ question }}\"";
const OK_UPDATE: &str = "\"'x'\"";
const OK_WHEN: &str = "\"label == 'x'\"";

#[test]
fn prompt_with_a_misspelled_nested_key_names_the_keys_that_exist() {
    let e = failure(
        "\"Q: {{ question }}\\nScore: {{ grade.verdict.scor }}\"",
        OK_UPDATE,
        OK_WHEN,
    );
    assert!(e.contains("node `generate`"), "{e}");
    assert!(
        e.contains("user prompt: undefined value: `grade.verdict.scor` (in generate/user:2:11)"),
        "{e}"
    );
    assert!(
        e.contains("grade.verdict has: score; did you mean `score`?"),
        "{e}"
    );
}

#[test]
fn prompt_reading_an_unset_field_names_the_fields_that_are_set() {
    let e = failure("\"{{ label }}\"", OK_UPDATE, OK_WHEN);
    assert!(
        e.contains("undefined value: `label` (in generate/user:1:4): `label` is not set (set: docs, grade, question)"),
        "{e}"
    );
}

#[test]
fn prompt_indexing_past_the_end_of_a_list_names_its_length() {
    let e = failure("\"{{ docs[2].title }}\"", OK_UPDATE, OK_WHEN);
    assert!(
        e.contains("`docs[2].title`") && e.contains("docs has 2 items; index 2 is out of range"),
        "{e}"
    );
}

#[test]
fn update_expression_on_a_string_says_it_is_not_an_object() {
    let e = failure(OK_USER, "\"answer.foo ~ '!'\"", OK_WHEN);
    assert!(e.contains("node `after`: update of `label`"), "{e}");
    assert!(
        e.contains("undefined value: `answer.foo`: answer is a string, not an object"),
        "{e}"
    );
}

#[test]
fn predicate_with_a_misspelled_nested_key_names_the_keys_that_exist() {
    let e = failure(OK_USER, OK_UPDATE, "\"grade.verdict.scor > 0\"");
    assert!(
        e.contains("node `after`: edge: predicate `grade.verdict.scor > 0` of arm 0"),
        "{e}"
    );
    assert!(
        e.contains("undefined value: `grade.verdict.scor`: grade.verdict has: score; did you mean `score`?"),
        "{e}"
    );
    // Undefined at the last step without an error (a bare path) is explained too.
    let e = failure(OK_USER, OK_UPDATE, "\"grade.verdict.scor\"");
    assert!(e.contains("grade.verdict has: score"), "{e}");
    // A list index out of range in a predicate.
    let e = failure(OK_USER, OK_UPDATE, "\"docs[5].title == 'a'\"");
    assert!(
        e.contains("docs has 2 items; index 5 is out of range"),
        "{e}"
    );
}

#[test]
fn map_item_with_a_misspelled_key_names_the_item_keys() {
    let yaml = spec(OK_USER, OK_UPDATE, OK_WHEN).replace(
        "    kind: llm\n    model: m\n    prompt:\n      user: \"{{ question }}\"\n    update:\n      answer: output\n",
        "    kind: map\n    model: m\n    over: docs\n    prompt:\n      user: \"{{ item.titel }}\"\n    update:\n      answer: \"'done'\"\n",
    );
    assert!(yaml.contains("kind: map"));
    let p = project(&yaml, &json!({}));
    let r = quick(&program(&p.spec), json!({"generate": ["a", "b"]}), vec![]);
    assert_eq!(r.status, Status::Failed);
    let e = r.error.unwrap();
    assert!(
        e.contains("item 0: user prompt: undefined value: `item.titel` (in generate/user:1:4): item has: title; did you mean `title`?"),
        "{e}"
    );
}

#[test]
fn run_cli_prints_the_explained_error_and_exits_1() {
    let p = project(
        &spec("\"Score: {{ grade.verdict.scor }}\"", OK_UPDATE, OK_WHEN),
        &json!({"generate": ["done"]}),
    );
    let o = assert_cmd::Command::cargo_bin("ragloop")
        .unwrap()
        .env("RAGLOOP_CACHE_DIR", p.dir.path().join("cache"))
        .args(["run", &p.spec.to_string_lossy(), "--question", "q"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`grade.verdict.scor` (in generate/user:1:11): grade.verdict has: score; did you mean `score`?"),
        "{err}"
    );
}
