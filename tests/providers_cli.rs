//! `ragloop run` against mock OpenAI-compatible and Anthropic servers on 127.0.0.1:
//! the shipped CRAG graph end to end with `--model NAME=openai:MODEL@URL`, missing
//! keys, and a planted API key that must never reach any output.

use crate::providers_support::*;
use assert_cmd::Command;
use serde_json::{json, Value};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.md"),
        "# Cargo check\n\nThe cargo check command checks your code to make sure it compiles but does not produce an executable.\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.md"),
        "# Cargo build\n\nThe cargo build command compiles your code and produces an executable in target/debug.\n",
    )
    .unwrap();
    dir
}

fn repo() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn crag_end_to_end_with_model_overrides() {
    let rt = rt();
    let server = rt.block_on(MockServer::start());
    let seen = std::sync::Arc::default();
    rt.block_on(
        Mock::given(wiremock::matchers::path("/v1/chat/completions"))
            .respond_with(CragOpenAi {
                seen: std::sync::Arc::clone(&seen),
            })
            .mount(&server),
    );
    let corpus = corpus();
    let url = format!("{}/v1", server.uri());
    let cache = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("ragloop")
        .unwrap()
        .current_dir(repo())
        .env("RAGLOOP_CACHE_DIR", cache.path())
        .env_remove("OPENAI_API_KEY")
        .args([
            "run",
            "graphs/crag.yaml",
            "--json",
            "--question",
            "What does cargo check do?",
        ])
        .arg("--corpus")
        .arg(corpus.path())
        .arg(format!("--model=grader=openai:test-grader@{url}"))
        .arg(format!("--model=generator=openai:test-gen@{url}"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["status"], "generated");
    assert_eq!(
        v["path"],
        json!(["retrieve", "grade_documents", "generate", "grade_answer"])
    );
    assert!(v["answer"].as_str().unwrap().contains("[a.md]"));
    // Two documents graded, one answer, one answer grade.
    assert_eq!(v["usage"]["calls"], json!(4));
    assert_eq!(seen.lock().unwrap().len(), 4);
    let b = rt.block_on(bodies(&server));
    let models: Vec<&str> = b.iter().map(|x| x["model"].as_str().unwrap()).collect();
    assert_eq!(models.iter().filter(|m| **m == "test-grader").count(), 3);
    assert_eq!(models.iter().filter(|m| **m == "test-gen").count(), 1);
}

#[test]
fn missing_key_exits_2_before_the_run() {
    let out = Command::cargo_bin("ragloop")
        .unwrap()
        .current_dir(repo())
        .env_remove("OPENAI_API_KEY")
        .args([
            "run",
            "graphs/crag.yaml",
            "--question",
            "q",
            "--model",
            "grader=openai:gpt-4o-mini",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("model `grader`") && err.contains("OPENAI_API_KEY") && err.contains("not set"),
        "{err}"
    );
}

#[test]
fn bad_base_url_override_is_a_usage_error() {
    let out = Command::cargo_bin("ragloop")
        .unwrap()
        .current_dir(repo())
        .args([
            "run",
            "graphs/crag.yaml",
            "--question",
            "q",
            "--model",
            "grader=openai:m@localhost:1234",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("http"));
}

const KEY: &str = "sk-PLANTED-ragloop-7f3a9c1e55";

/// Echoes the key it receives everywhere it can: in headers, in error bodies, in
/// answers and in tool arguments.
struct Echo {
    status: u16,
    structured: bool,
}

impl Respond for Echo {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let auth = req
            .headers
            .get("authorization")
            .or_else(|| req.headers.get("x-api-key"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .trim_start_matches("Bearer ")
            .to_string();
        assert_eq!(auth, KEY, "the key is sent");
        let t = ResponseTemplate::new(self.status)
            .insert_header("x-echo-key", auth.as_str())
            .insert_header("www-authenticate", format!("Bearer key={auth}").as_str());
        if self.status != 200 {
            return t.set_body_json(json!({"error": {"message": format!("Incorrect API key provided: {auth}"), "type": "invalid_request_error"}}));
        }
        if self.structured {
            // Violates the schema and carries the key: a repair turn shows it back.
            t.set_body_json(openai_tool_call(
                "Verdict",
                json!(format!("{{\"verdict\": \"{auth}\"}}")),
            ))
        } else {
            t.set_body_json(openai_text(&format!("Your key is {auth}.")))
        }
    }
}

#[test]
fn a_planted_key_never_reaches_any_output() {
    let rt = rt();
    for (provider, status, structured) in [
        ("openai", 200, false),
        ("openai", 200, true),
        ("openai", 401, false),
        ("openai", 500, false),
        ("anthropic", 401, false),
        ("anthropic", 503, true),
    ] {
        let server = rt.block_on(MockServer::start());
        rt.block_on(
            Mock::given(wiremock::matchers::method("POST"))
                .respond_with(Echo { status, structured })
                .mount(&server),
        );
        let p = project(
            &format!(
                "provider: {provider}, model: m1, base_url: '{}/v1', api_key_env: RAGLOOP_PLANTED_KEY, retries: 1, price: {{input_per_mtok: 1, output_per_mtok: 1}}",
                server.uri()
            ),
            structured,
        );
        let trace = p.dir.path().join("trace.jsonl");
        let out = Command::cargo_bin("ragloop")
            .unwrap()
            .env("RAGLOOP_PLANTED_KEY", KEY)
            .arg("run")
            // Each case must reach its server: no response cache (and none in $HOME).
            .arg("--no-cache")
            .arg(&p.spec)
            .args(["--question", "q", "--json", "--verbose", "--trace"])
            .arg(&trace)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let trace_text = std::fs::read_to_string(&trace).unwrap_or_default();
        assert!(!trace_text.is_empty(), "a trace was written");
        let case = format!("{provider}, status {status}, structured {structured}");
        for (what, text) in [
            ("stdout", &stdout),
            ("stderr", &stderr),
            ("trace", &trace_text),
        ] {
            assert!(
                !text.contains(KEY),
                "{case}: the key leaked into {what}:\n{text}"
            );
            assert!(
                !text.contains("7f3a9c1e55"),
                "{case}: part of the key leaked into {what}"
            );
        }
        // The echoes were there, redacted.
        let all = format!("{stdout}{stderr}{trace_text}");
        assert!(all.contains("[redacted]"), "{case}: {all}");
        if status == 200 && !structured {
            assert_eq!(out.status.code(), Some(0), "{case}: {stderr}");
        } else {
            assert_eq!(out.status.code(), Some(1), "{case}: {stderr}");
        }
    }
}

#[test]
fn cost_in_trace_json_verbose_and_summary() {
    let rt = rt();
    let server = rt.block_on(MockServer::start());
    rt.block_on(
        Mock::given(wiremock::matchers::method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(openai_text("fine")))
            .mount(&server),
    );
    // 11 tokens in at $2/M, 7 out at $10/M.
    let p = project(
        &format!(
            "provider: openai, model: m1, base_url: '{}', price: {{input_per_mtok: 2, output_per_mtok: 10}}",
            server.uri()
        ),
        false,
    );
    let want = (11.0 * 2.0 + 7.0 * 10.0) / 1e6;
    let trace = p.dir.path().join("t.jsonl");
    let out = Command::cargo_bin("ragloop")
        .unwrap()
        .arg("run")
        .arg("--no-cache")
        .arg(&p.spec)
        .args(["--question", "q", "--json", "--verbose", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        (v["usage"]["cost_usd"].as_f64().unwrap() - want).abs() < 1e-12,
        "{v}"
    );
    let lines: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!((lines[0]["llm"]["cost_usd"].as_f64().unwrap() - want).abs() < 1e-12);
    assert_eq!(lines[0]["llm"]["input_tokens"], json!(11));
    assert!((lines[1]["usage"]["cost_usd"].as_f64().unwrap() - want).abs() < 1e-12);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("$0.000092")
            && err.contains("usage: 1 call(s), 11 tokens in, 7 out, $0.000092"),
        "{err}"
    );
    let human = Command::cargo_bin("ragloop")
        .unwrap()
        .arg("run")
        .arg("--no-cache")
        .arg(&p.spec)
        .args(["--question", "q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("Usage: 1 call(s), 11 tokens in, 7 out, $0.000092"),
        "{text}"
    );
}
