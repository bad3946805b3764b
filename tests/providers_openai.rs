//! The `openai` provider against wiremock servers on 127.0.0.1: request shapes,
//! lenient parsing, repair turns, retries, timeouts, failures.

use crate::providers_support::*;
use ragloop::providers::openai::endpoint;
use ragloop::runtime::Status;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn model(server: &MockServer, extra: &str) -> String {
    format!(
        "provider: openai, model: test-model, base_url: '{}/v1', api_key_env: RAGLOOP_TEST_OPENAI_KEY, temperature: 0.2, max_tokens: 300, retries: 1, timeout_secs: 5{extra}",
        server.uri()
    )
}

/// The `tool_call` mode (the default is `json_schema`).
const TOOL_CALL: &str = ", structured_output: tool_call";

fn set_key() {
    std::env::set_var("RAGLOOP_TEST_OPENAI_KEY", "sk-test-openai-123456");
}

async fn mount(
    server: &MockServer,
    responses: Vec<ResponseTemplate>,
) -> std::sync::Arc<std::sync::Mutex<Vec<Instant>>> {
    let seq = Sequence::new(responses);
    let seen = seq.seen.clone();
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(seq)
        .mount(server)
        .await;
    seen
}

fn ok(v: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(v)
}

#[test]
fn endpoint_rule() {
    for (base, want) in [
        (None, "https://api.openai.com/v1/chat/completions"),
        (
            Some("http://localhost:11434"),
            "http://localhost:11434/v1/chat/completions",
        ),
        (
            Some("http://localhost:11434/"),
            "http://localhost:11434/v1/chat/completions",
        ),
        (
            Some("http://localhost:8000/v1"),
            "http://localhost:8000/v1/chat/completions",
        ),
        (
            Some("http://localhost:8000/v1/"),
            "http://localhost:8000/v1/chat/completions",
        ),
        (
            Some("https://api.groq.com/openai/v1"),
            "https://api.groq.com/openai/v1/chat/completions",
        ),
        (
            Some("http://h:1/v1/chat/completions"),
            "http://h:1/v1/chat/completions",
        ),
        (
            Some("http://h:1/v1/chat/completions/"),
            "http://h:1/v1/chat/completions",
        ),
    ] {
        assert_eq!(endpoint("m", base).unwrap(), want, "{base:?}");
    }
    assert!(endpoint("m", Some("localhost:11434"))
        .unwrap_err()
        .to_string()
        .contains("http"));
    assert!(endpoint("m", Some("ftp://h/v1")).is_err());
    assert!(endpoint("m", Some("not a url")).is_err());
}

#[test]
fn base_url_override_to_another_host_drops_the_key_variable() {
    let p = project(
        "provider: openai, model: gpt-4o-mini, base_url: 'https://api.groq.com/openai/v1', api_key_env: GROQ_KEY_UNSET_XYZ",
        true,
    );
    let load = |m: &str| {
        ragloop::compile::load_program(&p.spec, None, &[m.to_string()])
            .map(|prog| prog.spec.models["m"].clone())
    };
    // Another host: the key named for Groq is not sent to it.
    let m = load("m=openai:qwen2.5:7b@http://localhost:11434/v1").unwrap();
    assert_eq!(m.api_key_env, None);
    assert_eq!(m.base_url.as_deref(), Some("http://localhost:11434/v1"));
    assert_eq!(
        ragloop::providers::api_key("m", &m).unwrap(),
        None,
        "no key needed"
    );
    // The same host (another path): the key stays.
    let m = load("m=openai:llama@https://api.groq.com/openai/v2").unwrap();
    assert_eq!(m.api_key_env.as_deref(), Some("GROQ_KEY_UNSET_XYZ"));
    // No model name for a network provider is a usage error naming the flag.
    let p2 = project("provider: scripted", true);
    match ragloop::compile::load_program(&p2.spec, None, &["m=openai".to_string()]) {
        Err(ragloop::compile::LoadError::Usage(e)) => {
            assert!(
                e.contains("--model m=openai") && e.contains("model name"),
                "{e}"
            )
        }
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn tool_call_request_shape_and_result() {
    set_key();
    let rt = rt();
    rt.block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(header("authorization", "Bearer sk-test-openai-123456"))
            .respond_with(ok(openai_tool_call(
                "Verdict",
                json!(r#"{"verdict": "yes", "score": 0.5}"#),
            )))
            .expect(1)
            .mount(&server)
            .await;
        let p = project(
            &model(
                &server,
                ", price: {input_per_mtok: 1.0, output_per_mtok: 2.0}, structured_output: tool_call",
            ),
            true,
        );
        let r = run_async(&program(&p), "Is Rust fast?").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.state["answer"], json!({"verdict": "yes", "score": 0.5}));
        assert_eq!(r.usage.tokens.input_tokens, 11);
        assert_eq!(r.usage.tokens.output_tokens, 7);
        assert!((r.usage.tokens.cost_usd - (11.0 * 1.0 + 7.0 * 2.0) / 1e6).abs() < 1e-12);
        let b = &bodies(&server).await[0];
        assert_eq!(b["model"], "test-model");
        assert_eq!(b["temperature"], json!(0.2));
        assert_eq!(b["max_tokens"], json!(300));
        assert_eq!(
            b["messages"],
            json!([
                {"role": "system", "content": "You are a careful judge."},
                {"role": "user", "content": "Question: Is Rust fast?"}
            ])
        );
        assert_eq!(b["tools"][0]["type"], "function");
        assert_eq!(b["tools"][0]["function"]["name"], "Verdict");
        assert_eq!(b["tools"][0]["function"]["description"], "The verdict.");
        assert_eq!(
            b["tools"][0]["function"]["parameters"]["required"],
            json!(["verdict"])
        );
        // One function offered and "required": forced on every server that honours
        // tool_choice, llama.cpp's included (it ignores the named form).
        assert_eq!(b["tools"].as_array().map(Vec::len), Some(1));
        assert_eq!(b["tool_choice"], json!("required"));
        assert!(b.get("response_format").is_none());
    });
}

#[test]
fn json_schema_mode_is_strict_and_optional_nulls_are_dropped() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![ok(openai_text(r#"{"verdict": "no", "score": null}"#))],
        )
        .await;
        let p = project(&model(&server, ", structured_output: json_schema"), true);
        let r = run_async(&program(&p), "q").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.state["answer"], json!({"verdict": "no"}));
        let b = &bodies(&server).await[0];
        assert!(b.get("tools").is_none() && b.get("tool_choice").is_none());
        let rf = &b["response_format"];
        assert_eq!(rf["type"], "json_schema");
        assert_eq!(rf["json_schema"]["name"], "Verdict");
        assert_eq!(rf["json_schema"]["strict"], json!(true));
        let s = &rf["json_schema"]["schema"];
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(s["required"], json!(["verdict", "score"]));
        assert_eq!(s["properties"]["score"]["type"], json!(["number", "null"]));
    });
}

#[test]
fn the_default_mode_is_json_schema() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(&server, vec![ok(openai_text(r#"{"verdict": "yes"}"#))]).await;
        let p = project(&model(&server, ""), true);
        let r = run_async(&program(&p), "q").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.state["answer"], json!({"verdict": "yes"}));
        let b = &bodies(&server).await[0];
        assert!(
            b.get("tools").is_none() && b.get("tool_choice").is_none(),
            "{b}"
        );
        assert_eq!(b["response_format"]["type"], "json_schema");
        assert_eq!(b["response_format"]["json_schema"]["strict"], json!(true));
    });
}

#[test]
fn a_server_refusing_the_mode_is_told_the_other_one() {
    set_key();
    rt().block_on(async {
        for (extra, refusal, fix) in [
            (
                "",
                "response_format json_schema is not supported by this model",
                "--override models.m.structured_output=tool_call",
            ),
            (
                TOOL_CALL,
                "`tool_choice` must either be a named tool, \"auto\", or \"none\"",
                "--override models.m.structured_output=json_schema",
            ),
        ] {
            let server = MockServer::start().await;
            mount(
                &server,
                vec![ResponseTemplate::new(400).set_body_json(
                    json!({"error": {"message": refusal, "type": "invalid_request_error"}}),
                )],
            )
            .await;
            let p = project(&model(&server, extra), true);
            let e = run_async(&program(&p), "q").await.error.unwrap();
            assert!(e.contains("HTTP 400") && e.contains(refusal), "{e}");
            assert!(e.contains(fix), "{e}");
            // Another 400 (or a text node) gets no hint.
            let server = MockServer::start().await;
            mount(
                &server,
                vec![ResponseTemplate::new(400)
                    .set_body_json(json!({"error": {"message": "model not found"}}))],
            )
            .await;
            let p = project(&model(&server, extra), true);
            let e = run_async(&program(&p), "q").await.error.unwrap();
            assert!(!e.contains("--override"), "{e}");
        }
    });
}

#[test]
fn text_output_and_lenient_parsing() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        // Content as parts, no finish_reason, no usage, unknown fields.
        mount(
            &server,
            vec![ok(json!({
                "choices": [{"message": {"role": "assistant", "content": [
                    {"type": "text", "text": "Cargo check "}, {"type": "text", "text": "type-checks."}
                ], "reasoning": "x"}, "logprobs": null}],
                "system_fingerprint": "fp", "x_extra": {"a": 1}
            }))],
        )
        .await;
        let p = project(&model(&server, ""), false);
        let r = run_async(&program(&p), "What does cargo check do?").await;
        assert_eq!(r.status, Status::Generated, "{:?}", r.error);
        assert_eq!(r.answer.as_deref(), Some("Cargo check type-checks."));
        assert!(r.usage.tokens.input_tokens > 0 && r.usage.tokens.output_tokens > 0, "estimated usage");
        let b = &bodies(&server).await[0];
        assert!(b.get("tools").is_none() && b.get("response_format").is_none());
    });
}

#[test]
fn arguments_as_object_and_params_merged() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![ok(openai_tool_call("Verdict", json!({"verdict": "no"})))],
        )
        .await;
        let p = project(
            &model(
                &server,
                ", params: {seed: 7, temperature: null, max_completion_tokens: 50}",
            ),
            true,
        );
        let r = run_async(&program(&p), "q").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.state["answer"], json!({"verdict": "no"}));
        let b = &bodies(&server).await[0];
        assert_eq!(b["seed"], json!(7));
        assert_eq!(b["max_completion_tokens"], json!(50));
        assert!(
            b.get("temperature").is_none(),
            "null param removes the field"
        );
    });
}

/// The second request carries the rejected answer and the correction.
fn assert_repair_turn(bodies: &[Value], shown: &str, reason_part: &str) {
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    let m = bodies[1]["messages"].as_array().expect("messages");
    assert_eq!(m.len(), 4, "{m:?}");
    assert_eq!(m[0]["role"], "system");
    assert_eq!(m[1]["role"], "user");
    assert_eq!(m[2]["role"], "assistant");
    assert!(m[2]["content"].as_str().unwrap().contains(shown), "{m:?}");
    assert_eq!(m[3]["role"], "user");
    assert!(
        m[3]["content"].as_str().unwrap().contains(reason_part),
        "{m:?}"
    );
    // The tool is still forced on the repair turn.
    assert_eq!(bodies[1]["tool_choice"], "required");
    assert_eq!(bodies[1]["tools"][0]["function"]["name"], "Verdict");
}

#[test]
fn schema_violation_gets_a_repair_turn() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![
                ok(openai_tool_call(
                    "Verdict",
                    json!(r#"{"verdict": "maybe"}"#),
                )),
                ok(openai_tool_call("Verdict", json!(r#"{"verdict": "yes"}"#))),
            ],
        )
        .await;
        let p = project(&model(&server, TOOL_CALL), true);
        let r = run_async(&program(&p), "q").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.state["answer"], json!({"verdict": "yes"}));
        assert_eq!(r.usage.calls, 2);
        assert_repair_turn(&bodies(&server).await, "maybe", "does not match");
    });
}

#[test]
fn prose_instead_of_tool_call_gets_a_repair_turn() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![
                ok(openai_text("I think the answer is yes.")),
                ok(openai_tool_call("Verdict", json!(r#"{"verdict": "yes"}"#))),
            ],
        )
        .await;
        let p = project(&model(&server, TOOL_CALL), true);
        let r = run_async(&program(&p), "q").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_repair_turn(
            &bodies(&server).await,
            "I think the answer is yes.",
            "prose instead of calling the function `Verdict`",
        );
    });
}

#[test]
fn prose_after_a_forced_call_names_the_cause_and_the_fix() {
    set_key();
    rt().block_on(async {
        // tool_call mode: a server that ignores tool_choice.
        let server = MockServer::start().await;
        mount(&server, vec![ok(openai_text("\""))]).await;
        let p = project(&model(&server, TOOL_CALL), true);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Failed);
        let e = r.error.unwrap();
        for part in [
            "prose instead of calling the function `Verdict`",
            "may not honour tool_choice",
            "models.m.structured_output: json_schema",
            "--override models.m.structured_output=json_schema",
        ] {
            assert!(e.contains(part), "{part:?} missing from: {e}");
        }
        // An empty reply too.
        let server = MockServer::start().await;
        mount(&server, vec![ok(openai_text(""))]).await;
        let p = project(&model(&server, TOOL_CALL), true);
        let e = run_async(&program(&p), "q").await.error.unwrap();
        assert!(
            e.contains("reply is empty") && e.contains("structured_output=json_schema"),
            "{e}"
        );
        // json_schema mode: a server that ignores response_format.
        let server = MockServer::start().await;
        mount(&server, vec![ok(openai_text("Yes."))]).await;
        let p = project(&model(&server, ", structured_output: json_schema"), true);
        let e = run_async(&program(&p), "q").await.error.unwrap();
        assert!(
            e.contains("may not honour response_format")
                && e.contains("--override models.m.structured_output=tool_call"),
            "{e}"
        );
    });
}

#[test]
fn prose_twice_fails_clearly_never_null() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(&server, vec![ok(openai_text("Yes."))]).await;
        let p = project(&model(&server, TOOL_CALL), true);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Failed);
        let e = r.error.unwrap();
        assert!(
            e.contains("node `judge`")
                && e.contains("model `m`: structured output")
                && e.contains("prose")
                && e.contains("1 repair turn"),
            "{e}"
        );
        assert!(r.state.get("answer").is_none());
    });
}

#[test]
fn rejected_replies_are_counted_in_usage() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        // Arguments that are not JSON, then a valid call: two billed attempts of
        // 11 in / 7 out each.
        mount(
            &server,
            vec![
                ok(openai_tool_call("Verdict", json!("{not json"))),
                ok(openai_tool_call("Verdict", json!(r#"{"verdict": "yes"}"#))),
            ],
        )
        .await;
        let p = project(
            &model(
                &server,
                ", price: {input_per_mtok: 1.0, output_per_mtok: 2.0}",
            ),
            true,
        );
        let r = run_async(&program(&p), "q").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.usage.calls, 2);
        assert_eq!(r.usage.tokens.input_tokens, 22);
        assert_eq!(r.usage.tokens.output_tokens, 14);
        assert!((r.usage.tokens.cost_usd - 2.0 * (11.0 + 14.0) / 1e6).abs() < 1e-12);
        // A failed run still reports what its rejected attempts cost.
        let server = MockServer::start().await;
        mount(&server, vec![ok(openai_text("Yes."))]).await;
        let p = project(&model(&server, ""), true);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Failed);
        assert_eq!(r.usage.calls, 2);
        assert_eq!(r.usage.tokens.input_tokens, 22);
        assert_eq!(r.usage.tokens.output_tokens, 14);
    });
}

#[test]
fn rejected_replies_are_recorded_with_their_usage_and_replayed_with_it() {
    use ragloop::providers::cassette::{Cassette, CassetteWriter};
    use ragloop::runtime::{run, NoTrace, ResourceOptions, Resources, RunInput};
    use std::sync::Arc;
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![
                ok(openai_text("I think yes.")),
                ok(openai_tool_call("Verdict", json!(r#"{"verdict": "yes"}"#))),
            ],
        )
        .await;
        let p = project(&model(&server, ""), true);
        let prog = program(&p);
        let cas = p.dir.path().join("c.jsonl");
        let input = RunInput {
            question: Some("q".into()),
            sets: vec![],
        };
        let opts = ResourceOptions {
            record: Some(Arc::new(CassetteWriter::create(&cas).unwrap())),
            ..ResourceOptions::default()
        };
        let res = Resources::prepare(&prog, opts).expect("resources");
        let r = run(&prog, &res, &input, &mut NoTrace).await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!((r.usage.calls, r.usage.tokens.input_tokens), (2, 22));
        let lines: Vec<Value> = std::fs::read_to_string(&cas)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let rejected = lines
            .iter()
            .find(|l| l["error"]["kind"] == "invalid_output")
            .expect("the rejected reply is recorded");
        assert_eq!(rejected["usage"]["input_tokens"], 11);
        assert_eq!(rejected["usage"]["output_tokens"], 7);
        // Replayed: the same figures, all cached.
        let opts = ResourceOptions {
            replay: Some(Arc::new(Cassette::load(&cas).unwrap())),
            ..ResourceOptions::default()
        };
        let res = Resources::prepare(&prog, opts).expect("resources");
        let r = run(&prog, &res, &input, &mut NoTrace).await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(
            (
                r.usage.calls,
                r.usage.tokens.input_tokens,
                r.usage.tokens.output_tokens
            ),
            (2, 22, 14)
        );
        assert_eq!(r.usage.cached_calls, 2);
    });
}

#[test]
fn oversized_body_fails_at_once_and_long_rejected_replies_are_cut_in_repair_turns() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        let huge = "x".repeat(ragloop::http::MAX_BODY_BYTES + 10);
        mount(&server, vec![ok(openai_text(&huge))]).await;
        let p = project(&model(&server, ""), false);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Failed);
        let e = r.error.unwrap();
        assert!(e.contains("larger than 16 MiB"), "{e}");
        assert_eq!(bodies(&server).await.len(), 1, "not retried");

        // A 200 KB prose answer is shown back cut to a few KB.
        let server = MockServer::start().await;
        let long = "word ".repeat(40_000);
        mount(
            &server,
            vec![
                ok(openai_text(&long)),
                ok(openai_tool_call("Verdict", json!(r#"{"verdict": "yes"}"#))),
            ],
        )
        .await;
        let p = project(&model(&server, ""), true);
        let r = run_async(&program(&p), "q").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        let b = bodies(&server).await;
        let shown = b[1]["messages"][2]["content"].as_str().unwrap();
        assert!(shown.starts_with("word word"));
        assert!(shown.len() <= 4010, "{}", shown.len());
    });
}

#[test]
fn arguments_not_json_get_a_repair_turn() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![
                ok(openai_tool_call("Verdict", json!("{verdict: yes"))),
                ok(openai_tool_call("Verdict", json!(r#"{"verdict": "yes"}"#))),
            ],
        )
        .await;
        let p = project(&model(&server, TOOL_CALL), true);
        let r = run_async(&program(&p), "q").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_repair_turn(&bodies(&server).await, "{verdict: yes", "not JSON");
    });
}

#[test]
fn unknown_function_is_a_defined_failure() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![ok(openai_tool_call("delete_everything", json!("{}")))],
        )
        .await;
        let p = project(&model(&server, ""), true);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Failed);
        let e = r.error.unwrap();
        assert!(
            e.contains("node `judge`")
                && e.contains("`delete_everything`")
                && e.contains("not offered"),
            "{e}"
        );
        // One repair turn was tried.
        assert_eq!(bodies(&server).await.len(), 2);
    });
}

#[test]
fn truncated_output_is_permanent() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        let mut v = openai_tool_call("Verdict", json!(r#"{"verdict": "y"#));
        v["choices"][0]["finish_reason"] = json!("length");
        mount(&server, vec![ok(v)]).await;
        let p = project(&model(&server, ""), true);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Failed);
        let e = r.error.unwrap();
        assert!(
            e.contains("node `judge`") && e.contains("model `m`") && e.contains("max_tokens (300)"),
            "{e}"
        );
        assert_eq!(bodies(&server).await.len(), 1, "not retried, not repaired");
    });
}

#[test]
fn retry_after_is_honoured() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "1")
                    .set_body_json(
                        json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
                    ),
                ok(openai_text("fine")),
            ],
        )
        .await;
        let p = project(&model(&server, ""), false);
        let t = Instant::now();
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Generated, "{:?}", r.error);
        assert!(
            t.elapsed() >= Duration::from_millis(1000),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(bodies(&server).await.len(), 2);
    });
}

#[test]
fn server_error_then_success() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![
                ResponseTemplate::new(500).set_body_string("oops"),
                ok(openai_text("fine")),
            ],
        )
        .await;
        let p = project(&model(&server, ""), false);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Generated, "{:?}", r.error);
        assert_eq!(r.answer.as_deref(), Some("fine"));
        assert_eq!(bodies(&server).await.len(), 2);
        // One logical call.
        assert_eq!(r.usage.calls, 1);
    });
}

#[test]
fn a_server_that_never_answers_times_out() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![ok(openai_text("late")).set_delay(Duration::from_secs(30))],
        )
        .await;
        let spec = model(&server, "").replace("timeout_secs: 5", "timeout_secs: 0.3");
        let p = project(&spec, false);
        let t = Instant::now();
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Failed);
        let e = r.error.unwrap();
        assert!(
            e.contains("timeout") && e.contains("gave up after 2 attempts"),
            "{e}"
        );
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    });
}

#[test]
fn unauthorized_shows_the_server_message_without_retry() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![ResponseTemplate::new(401).set_body_json(json!({"error": {
                "message": "Incorrect API key provided: sk-test-op***3456.", "type": "invalid_request_error", "code": "invalid_api_key"}}))],
        )
        .await;
        let p = project(&model(&server, ""), false);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Failed);
        let e = r.error.unwrap();
        assert!(e.contains("HTTP 401") && e.contains("Incorrect API key provided") && e.contains("model `m`") && e.contains("node `judge`"), "{e}");
        assert_eq!(bodies(&server).await.len(), 1);
    });
}

#[test]
fn html_body_is_permanent() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![ResponseTemplate::new(200).set_body_raw(
                "<!doctype html><html><title>Sign in</title></html>",
                "text/html",
            )],
        )
        .await;
        let p = project(&model(&server, ""), false);
        let r = run_async(&program(&p), "q").await;
        let e = r.error.unwrap();
        assert!(e.contains("HTML") && e.contains("base_url"), "{e}");
        assert_eq!(bodies(&server).await.len(), 1);
    });
}

#[test]
fn empty_body_is_retried_then_fails() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(&server, vec![ResponseTemplate::new(200)]).await;
        let p = project(&model(&server, ""), false);
        let r = run_async(&program(&p), "q").await;
        let e = r.error.unwrap();
        assert!(
            e.contains("empty body") && e.contains("gave up after 2 attempts"),
            "{e}"
        );
        assert_eq!(bodies(&server).await.len(), 2);
    });
}

#[test]
fn error_object_in_a_200() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![ok(json!({"error": {"message": "model 'test-model' not found", "type": "invalid_request_error"}}))],
        )
        .await;
        let p = project(&model(&server, ""), false);
        let r = run_async(&program(&p), "q").await;
        let e = r.error.unwrap();
        assert!(e.contains("model 'test-model' not found"), "{e}");
        assert_eq!(bodies(&server).await.len(), 1, "permanent: not retried");
    });
}

#[test]
fn missing_key_is_reported_before_the_run() {
    rt().block_on(async {
        let server = MockServer::start().await;
        let spec =
            model(&server, "").replace("RAGLOOP_TEST_OPENAI_KEY", "RAGLOOP_TEST_UNSET_KEY_VAR");
        let p = project(&spec, false);
        let prog = program(&p);
        let e = ragloop::runtime::Resources::prepare(&prog, Default::default())
            .err()
            .expect("error")
            .to_string();
        assert!(
            e.contains("model `m`")
                && e.contains("RAGLOOP_TEST_UNSET_KEY_VAR")
                && e.contains("not set"),
            "{e}"
        );
        // A local server with no api_key_env needs no key.
        let spec = model(&server, "").replace(", api_key_env: RAGLOOP_TEST_OPENAI_KEY", "");
        let p = project(&spec, false);
        assert!(ragloop::runtime::Resources::prepare(&program(&p), Default::default()).is_ok());
    });
}

#[test]
fn concurrency_limit_holds_across_runs() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        let seq = Sequence::new(vec![
            ok(openai_text("x")).set_delay(Duration::from_millis(200))
        ]);
        let seen = seq.seen.clone();
        Mock::given(method("POST"))
            .respond_with(seq)
            .mount(&server)
            .await;
        let p = project(&model(&server, ", concurrency: 2"), false);
        let prog = program(&p);
        let t = Instant::now();
        // Six runs at once, each preparing its own resources: one shared limit.
        let runs: Vec<_> = (0..6).map(|_| run_async(&prog, "q")).collect();
        let results = futures::future::join_all(runs).await;
        for r in &results {
            assert_eq!(r.status, Status::Generated, "{:?}", r.error);
        }
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 6);
        // A third request can only arrive after one of two in flight was answered.
        assert!(max_in_window(&seen, 150) <= 2, "{seen:?}");
        assert!(
            t.elapsed() >= Duration::from_millis(600),
            "{:?}",
            t.elapsed()
        );
    });
}

#[test]
fn requests_per_minute_limit_waits() {
    use ragloop::providers::limits::RateLimiter;
    rt().block_on(async {
        let r = RateLimiter::new(2, Duration::from_millis(300));
        let t = Instant::now();
        for _ in 0..5 {
            r.acquire().await;
        }
        // Starts 3 and 4 wait one window, start 5 two.
        assert!(
            t.elapsed() >= Duration::from_millis(600),
            "{:?}",
            t.elapsed()
        );
    });
}

#[test]
fn model_override_with_base_url() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let models = vec![
        "grader=openai:llama3.1:8b@http://localhost:11434".to_string(),
        "generator=anthropic:claude-x".to_string(),
    ];
    let p = ragloop::compile::load_program(&repo.join("graphs/crag.yaml"), None, &models)
        .unwrap_or_else(|e| panic!("{e}"));
    let g = &p.spec.models["grader"];
    assert_eq!(g.model.as_deref(), Some("llama3.1:8b"));
    assert_eq!(g.base_url.as_deref(), Some("http://localhost:11434"));
    assert!(g.params.is_empty(), "offline params dropped");
    // A local server needs no key.
    assert!(ragloop::providers::api_key("grader", g).unwrap().is_none());
    let gen = &p.spec.models["generator"];
    assert_eq!(gen.model.as_deref(), Some("claude-x"));
    assert!(gen.base_url.is_none());
    for bad in [
        "grader=openai:m@localhost:1",
        "grader=openai:m@ftp://h",
        "grader=openai:m@http://",
    ] {
        match ragloop::compile::load_program(
            &repo.join("graphs/crag.yaml"),
            None,
            &[bad.to_string()],
        ) {
            Err(ragloop::compile::LoadError::Usage(m)) => assert!(m.contains(bad), "{m}"),
            Err(e) => panic!("{bad}: {e}"),
            Ok(_) => panic!("{bad} accepted"),
        }
    }
}
