//! `--override PATH=VALUE` on run and eval (a variant's `set` from the command line),
//! `--model` keeping a model's other settings, and the small `run` input checks:
//! a `--set` of the wrong type, an empty `--input`, integer-valued floats.

use crate::providers_support::ragloop_isolated as ragloop;
use crate::providers_support::*;
use serde_json::{json, Value};
use wiremock::{Mock, MockServer, ResponseTemplate};

// The structured one-node specs end `exhausted` (exit 3): their answer field holds
// an object, not answer text.

/// A server answering every request with a verdict as JSON text (what a
/// `json_schema` reply looks like); a tool-call request is answered the same way,
/// which the provider reads as the JSON document it is.
fn json_text_server(rt: &tokio::runtime::Runtime) -> MockServer {
    let server = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(wiremock::matchers::any())
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(openai_text(r#"{"verdict": "yes", "score": 0.5}"#)),
            )
            .mount(&server),
    );
    server
}

fn modes(bodies: &[Value]) -> Vec<&'static str> {
    bodies
        .iter()
        .map(|b| {
            match (
                b.pointer("/response_format/type").and_then(Value::as_str),
                b.get("tools").is_some(),
            ) {
                (Some("json_schema"), false) => "json_schema",
                (None, true) => "tool_call",
                _ => "other",
            }
        })
        .collect()
}

#[test]
fn override_chooses_the_structured_output_mode() {
    let rt = rt();
    let server = json_text_server(&rt);
    let p = project(
        &format!(
            "provider: openai, model: test, structured_output: tool_call, base_url: '{}/v1'",
            server.uri()
        ),
        true,
    );
    let run = |extra: &[&str]| {
        let out = ragloop()
            .arg("run")
            .arg(&p.spec)
            .args(["-q", "Is it?", "--json"])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(3), "{err}");
    };
    run(&[]);
    run(&["--override", "models.m.structured_output=json_schema"]);
    let b = rt.block_on(bodies(&server));
    assert_eq!(modes(&b), ["tool_call", "json_schema"]);
    assert_eq!(
        b[1].pointer("/response_format/json_schema/name"),
        Some(&json!("Verdict"))
    );
}

#[test]
fn model_override_keeps_structured_output() {
    let rt = rt();
    let server = json_text_server(&rt);
    // The spec's model is local, in json_schema mode; --model moves it to a server.
    let p = project(
        "provider: scripted, structured_output: json_schema, params: {file: none.json}",
        true,
    );
    std::fs::write(p.dir.path().join("none.json"), "{}").unwrap();
    let out = ragloop()
        .arg("run")
        .arg(&p.spec)
        .args(["-q", "Is it?", "--json"])
        .arg(format!("--model=m=openai:test@{}/v1", server.uri()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let b = rt.block_on(bodies(&server));
    assert_eq!(modes(&b), ["json_schema"]);
    // An override before --model survives it too.
    let p = project("provider: scripted, params: {file: none.json}", true);
    std::fs::write(p.dir.path().join("none.json"), "{}").unwrap();
    let out = ragloop()
        .arg("run")
        .arg(&p.spec)
        .args(["-q", "Is it?", "--json"])
        .arg(format!("--model=m=openai:test@{}/v1", server.uri()))
        .args(["--override", "models.m.structured_output=json_schema"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let b = rt.block_on(bodies(&server));
    assert_eq!(modes(&b), ["json_schema", "json_schema"]);
}

#[test]
fn an_override_that_does_not_apply_is_a_usage_error_naming_it() {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/graphs/crag.yaml");
    let cases: [(&str, &[&str]); 5] = [
        (
            "models.nosuch.model=x",
            &["models.nosuch", "grader, generator"],
        ),
        (
            "retrievers.book.top_k=abc",
            &["retrievers.book.top_k", "abc"],
        ),
        (
            "models.grader.structured_output=bogus",
            &["tool_call", "--override models.grader.structured_output"],
        ),
        ("version=2", &["version"]),
        ("nodes.retrieve", &["PATH=VALUE"]),
    ];
    for (arg, says) in cases {
        let out = ragloop()
            .args(["run", spec, "-q", "x", "--override", arg])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains(arg.split('=').next().unwrap()), "{arg}: {err}");
        for s in says {
            assert!(err.contains(s), "{arg}: expected {s:?} in {err}");
        }
    }
    // A value that types but makes the spec invalid (a node on a model that does not
    // exist): the re-validation names the override.
    let out = ragloop()
        .args([
            "run",
            spec,
            "-q",
            "x",
            "--override",
            "nodes.generate.model=nobody",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--override nodes.generate.model=nobody makes the spec invalid")
            && err.contains("nobody"),
        "{err}"
    );
    // eval: the same rule, before anything runs.
    let d = tempfile::tempdir().unwrap();
    let ds = d.path().join("qa.jsonl");
    std::fs::write(&ds, "{\"id\": \"q1\", \"question\": \"x\", \"answer\": \"yes\", \"must_contain\": [], \"sources\": [], \"kind\": \"direct\"}\n").unwrap();
    let out = ragloop()
        .args([
            "eval",
            spec,
            "--override",
            "models.nosuch.model=x",
            "--dataset",
        ])
        .arg(&ds)
        .arg("--out")
        .arg(d.path().join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("models.nosuch"), "{err}");
    assert!(!d.path().join("out/results.jsonl").exists());
}

fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..10 {
        std::fs::write(
            dir.path().join(format!("d{i}.md")),
            format!("# Cargo {i}\n\nThe cargo check command checks code, note {i}.\n"),
        )
        .unwrap();
    }
    dir
}

#[test]
fn overrides_apply_after_the_variant() {
    let corpus = corpus();
    let repo = env!("CARGO_MANIFEST_DIR");
    let run = |extra: &[&str]| -> Value {
        let d = tempfile::tempdir().unwrap();
        let trace = d.path().join("t.jsonl");
        let out = ragloop()
            .current_dir(repo)
            .args([
                "run",
                "graphs/crag.yaml",
                "-q",
                "What does cargo check do?",
                "--corpus",
            ])
            .arg(corpus.path())
            .arg("--trace")
            .arg(&trace)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some_and(|c| c != 2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let first: Value = serde_json::from_str(
            std::fs::read_to_string(&trace)
                .unwrap()
                .lines()
                .next()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(first["node"], "retrieve");
        json!(first["delta"]["documents"].as_array().unwrap().len())
    };
    // The variant's own value, then an override on top of it.
    assert_eq!(run(&["--variant", "top_k_8"]), json!(8));
    assert_eq!(
        run(&[
            "--variant",
            "top_k_8",
            "--override",
            "retrievers.book.top_k=3"
        ]),
        json!(3)
    );
    // Repeated overrides apply in order.
    assert_eq!(
        run(&[
            "--override",
            "retrievers.book.top_k=5",
            "--override",
            "retrievers.book.top_k=2"
        ]),
        json!(2)
    );
}

#[test]
fn eval_applies_overrides_to_every_variant() {
    let rt = rt();
    let server = json_text_server(&rt);
    let p = project(
        &format!(
            "provider: openai, model: test, base_url: '{}/v1'",
            server.uri()
        ),
        true,
    );
    let mut text = std::fs::read_to_string(&p.spec).unwrap();
    text.push_str("variants:\n  warm:\n    set:\n      models.m.temperature: 0.5\n");
    std::fs::write(&p.spec, text).unwrap();
    let ds = p.dir.path().join("qa.jsonl");
    std::fs::write(&ds, "{\"id\": \"q1\", \"question\": \"x\", \"answer\": \"yes\", \"must_contain\": [], \"sources\": [], \"kind\": \"direct\"}\n").unwrap();
    let out = ragloop()
        .arg("eval")
        .arg(&p.spec)
        .arg("--dataset")
        .arg(&ds)
        .arg("--out")
        .arg(p.dir.path().join("out"))
        .args([
            "--no-cache",
            "--override",
            "models.m.structured_output=json_schema",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let b = rt.block_on(bodies(&server));
    assert_eq!(modes(&b), ["json_schema", "json_schema"]);
}

#[test]
fn a_set_of_the_wrong_type_is_a_usage_error() {
    let out = ragloop()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "run",
            "graphs/crag.yaml",
            "-q",
            "x",
            "--set",
            "max_iterations=abc",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--set max_iterations") && err.contains("integer"),
        "{err}"
    );
    // Of the right type it runs.
    let out = ragloop()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "run",
            "graphs/crag.yaml",
            "-q",
            "x",
            "--set",
            "max_iterations=1",
        ])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(2));
}

#[test]
fn an_empty_input_file_is_a_usage_error() {
    let d = tempfile::tempdir().unwrap();
    for (name, text, says) in [
        ("empty.jsonl", "", "no question (the file is empty)"),
        ("bom.jsonl", "\u{feff}", "no question (the file is empty)"),
        (
            "blank.jsonl",
            "\n  \n\t\n",
            "no question (only blank lines)",
        ),
    ] {
        let f = d.path().join(name);
        std::fs::write(&f, text).unwrap();
        let out = ragloop()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["run", "graphs/crag.yaml", "--input"])
            .arg(&f)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(name) && err.contains(says), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn integer_valued_floats_from_set_are_stored_as_integers() {
    let out = ragloop()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["run", "graphs/crag.yaml", "-q", "x", "--json"])
        .args([
            "--set",
            "max_iterations=2.0",
            "--set",
            "max_generations=1.0",
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["state"]["max_iterations"].is_u64(), "{}", v["state"]);
    assert_eq!(v["state"]["max_iterations"], json!(2));
    assert!(v["state"]["max_generations"].is_u64());
}

#[test]
fn integer_valued_floats_of_outputs_and_updates_are_stored_as_integers() {
    // From an LLM's structured output, `state.initial` and an update through `add`.
    let rt = rt();
    let server = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(wiremock::matchers::any())
            .respond_with(ResponseTemplate::new(200).set_body_json(openai_text(
                r#"{"verdict": "yes", "score": 3.0, "count": 4.0, "counts": [1.0, 2.0]}"#,
            )))
            .mount(&server),
    );
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.yaml");
    std::fs::write(&spec, ints_spec(&server.uri())).unwrap();
    let out = ragloop()
        .arg("run")
        .arg(&spec)
        .args(["-q", "x", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["state"];
    // The schema says integer: integers. It says number: left as sent.
    assert_eq!(s["answer"]["count"].to_string(), "4", "{s}");
    assert_eq!(s["answer"]["score"].to_string(), "3.0", "{s}");
    assert_eq!(s["total"].to_string(), "5", "{s}");
    assert_eq!(s["answer"]["counts"].to_string(), "[1,2]", "{s}");
    assert_eq!(s["counts"].to_string(), "[1,2]", "{s}");
}

/// A spec whose llm node `judge` (model `m` at `uri`) has a structured output with an
/// integer `count`, added to the integer state field `total`.
fn ints_spec(uri: &str) -> String {
    format!(
        r#"version: 1
name: ints
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      answer: {{type: object}}
      total: {{type: integer}}
      counts: {{type: array, items: {{type: number}}}}
  initial: {{total: 1.0}}
  reducers: {{total: add}}
models:
  m: {{provider: openai, model: test, base_url: '{}/v1'}}
output: {{answer: answer}}
entry: judge
nodes:
  judge:
    kind: llm
    model: m
    inputs: {{q: question}}
    prompt: {{user: "Question: {{{{ q }}}}"}}
    schema:
      type: object
      properties:
        verdict: {{type: string}}
        score: {{type: number}}
        count: {{type: integer}}
        counts: {{type: array, items: {{type: integer}}}}
      required: [verdict, count]
    update:
      answer: output
      total: output.count
      counts: output.counts
edges:
  judge: END
"#,
        uri
    )
}

#[test]
fn integers_too_large_to_be_exact_are_refused_from_set() {
    for value in [
        "9007199254740993.0",
        "9007199254740992.0",
        "18446744073709551616",
        "1e300",
    ] {
        let out = ragloop()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["run", "graphs/crag.yaml", "-q", "x", "--json"])
            .arg("--set")
            .arg(format!("max_iterations={value}"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert!(
            err.contains("--set max_iterations=")
                && err.contains("integer")
                && err.contains("is not an exact integer"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "{value}");
    }
    // Just below 2^53 a float is exact, and a 64-bit integer is one.
    for (value, stored) in [
        ("9007199254740991.0", "9007199254740991"),
        ("18446744073709551615", "18446744073709551615"),
    ] {
        let out = ragloop()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["run", "graphs/crag.yaml", "-q", "x", "--json"])
            .arg("--set")
            .arg(format!("max_iterations={value}"))
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{value}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(v["state"]["max_iterations"].to_string(), stored, "{value}");
    }
}

#[test]
fn an_output_integer_too_large_to_be_exact_fails_the_step() {
    let rt = rt();
    let server = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(wiremock::matchers::any())
            .respond_with(ResponseTemplate::new(200).set_body_json(openai_text(
                r#"{"verdict": "yes", "count": 18446744073709551616}"#,
            )))
            .mount(&server),
    );
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.yaml");
    std::fs::write(&spec, ints_spec(&server.uri())).unwrap();
    let out = ragloop()
        .arg("run")
        .arg(&spec)
        .args(["-q", "x", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "failed", "{v}");
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains("node `judge`")
            && error.contains("/count")
            && error.contains("is not an exact integer"),
        "{error}"
    );
    assert!(
        v["state"]
            .get("total")
            .is_none_or(|t| t != &json!(1.8446744073709552e19)),
        "{v}"
    );
}
