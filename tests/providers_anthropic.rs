//! The `anthropic` provider against wiremock servers on 127.0.0.1.

use crate::providers_support::*;
use ragloop::providers::anthropic::endpoint;
use ragloop::runtime::Status;
use serde_json::{json, Value};
use std::time::Duration;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn model(server: &MockServer, extra: &str) -> String {
    format!(
        "provider: anthropic, model: claude-test, base_url: '{}', api_key_env: RAGLOOP_TEST_ANTHROPIC_KEY, temperature: 0, retries: 1, timeout_secs: 5{extra}",
        server.uri()
    )
}

fn set_key() {
    std::env::set_var("RAGLOOP_TEST_ANTHROPIC_KEY", "sk-ant-test-654321");
}

fn tool_use(name: &str, input: Value) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "text", "text": "Let me answer."},
            {"type": "tool_use", "id": "toolu_1", "name": name, "input": input}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 20, "output_tokens": 9, "cache_read_input_tokens": 5}
    })
}

fn text(t: &str) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": t}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 20, "output_tokens": 9}
    })
}

async fn mount(server: &MockServer, responses: Vec<ResponseTemplate>) {
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(Sequence::new(responses))
        .mount(server)
        .await;
}

fn ok(v: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(v)
}

#[test]
fn endpoint_rule() {
    for (base, want) in [
        (None, "https://api.anthropic.com/v1/messages"),
        (Some("http://h:1"), "http://h:1/v1/messages"),
        (Some("http://h:1/"), "http://h:1/v1/messages"),
        (Some("http://h:1/v1"), "http://h:1/v1/messages"),
        (Some("http://h:1/v1/messages"), "http://h:1/v1/messages"),
        (
            Some("http://proxy/anthropic"),
            "http://proxy/anthropic/v1/messages",
        ),
    ] {
        assert_eq!(endpoint("m", base).unwrap(), want, "{base:?}");
    }
}

#[test]
fn request_shape_tool_use_and_usage() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .and(header("x-api-key", "sk-ant-test-654321"))
            .and(header("anthropic-version", "2023-06-01"))
            .respond_with(ok(tool_use("Verdict", json!({"verdict": "yes"}))))
            .expect(1)
            .mount(&server)
            .await;
        let p = project(
            &model(&server, ", price: {input_per_mtok: 3, output_per_mtok: 15}"),
            true,
        );
        let r = run_async(&program(&p), "Is Rust fast?").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.state["answer"], json!({"verdict": "yes"}));
        assert_eq!(
            r.usage.tokens.input_tokens, 25,
            "cache reads count as input"
        );
        assert_eq!(r.usage.tokens.output_tokens, 9);
        assert!((r.usage.tokens.cost_usd - (25.0 * 3.0 + 9.0 * 15.0) / 1e6).abs() < 1e-12);
        let b = &bodies(&server).await[0];
        assert_eq!(b["model"], "claude-test");
        assert_eq!(
            b["max_tokens"],
            json!(4096),
            "required by the API, defaulted"
        );
        assert_eq!(b["system"], "You are a careful judge.");
        assert_eq!(
            b["messages"],
            json!([{"role": "user", "content": "Question: Is Rust fast?"}])
        );
        assert_eq!(b["tools"][0]["name"], "Verdict");
        assert_eq!(
            b["tools"][0]["input_schema"]["required"],
            json!(["verdict"])
        );
        assert_eq!(b["tool_choice"], json!({"type": "tool", "name": "Verdict"}));
    });
}

#[test]
fn text_output() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(&server, vec![ok(text("Cargo check type-checks."))]).await;
        let p = project(&model(&server, ", max_tokens: 100"), false);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Generated, "{:?}", r.error);
        assert_eq!(r.answer.as_deref(), Some("Cargo check type-checks."));
        let b = &bodies(&server).await[0];
        assert_eq!(b["max_tokens"], json!(100));
        assert!(b.get("tools").is_none());
    });
}

#[test]
fn overloaded_529_is_retried() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![
                ResponseTemplate::new(529).set_body_json(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
                ok(text("fine")),
            ],
        )
        .await;
        let p = project(&model(&server, ""), false);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Generated, "{:?}", r.error);
        assert_eq!(bodies(&server).await.len(), 2);
    });
}

#[test]
fn prose_gets_a_repair_turn_with_alternating_roles() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![
                ok(text("Yes, it is.")),
                ok(tool_use("Verdict", json!({"verdict": "yes"}))),
            ],
        )
        .await;
        let p = project(&model(&server, ""), true);
        let r = run_async(&program(&p), "q").await;
        assert!(r.error.is_none(), "{:?}", r.error);
        let b = bodies(&server).await;
        assert_eq!(b.len(), 2);
        let m = b[1]["messages"].as_array().unwrap();
        let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(m[1]["content"], "Yes, it is.");
        assert!(m[2]["content"]
            .as_str()
            .unwrap()
            .contains("instead of calling the tool `Verdict`"));
    });
}

#[test]
fn max_tokens_stop_on_structured_output_is_permanent() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        let mut v = text("{\"verdict\": ");
        v["stop_reason"] = json!("max_tokens");
        mount(&server, vec![ok(v)]).await;
        let p = project(&model(&server, ""), true);
        let r = run_async(&program(&p), "q").await;
        let e = r.error.unwrap();
        assert!(
            e.contains("max_tokens") && e.contains("node `judge`"),
            "{e}"
        );
        assert_eq!(bodies(&server).await.len(), 1);
    });
}

#[test]
fn unknown_tool_and_bad_key() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![ResponseTemplate::new(401).set_body_json(json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}))],
        )
        .await;
        let p = project(&model(&server, ""), true);
        let r = run_async(&program(&p), "q").await;
        let e = r.error.unwrap();
        assert!(e.contains("HTTP 401") && e.contains("invalid x-api-key"), "{e}");
        assert_eq!(bodies(&server).await.len(), 1);

        let server = MockServer::start().await;
        mount(&server, vec![ok(tool_use("other_tool", json!({})))]).await;
        let p = project(&model(&server, ""), true);
        let r = run_async(&program(&p), "q").await;
        let e = r.error.unwrap();
        assert!(e.contains("`other_tool`") && e.contains("not offered"), "{e}");
    });
}

#[test]
fn never_answers_times_out() {
    set_key();
    rt().block_on(async {
        let server = MockServer::start().await;
        mount(
            &server,
            vec![ok(text("late")).set_delay(Duration::from_secs(30))],
        )
        .await;
        let spec = model(&server, "")
            .replace("timeout_secs: 5", "timeout_secs: 0.2")
            .replace("retries: 1", "retries: 0");
        let p = project(&spec, false);
        let r = run_async(&program(&p), "q").await;
        let e = r.error.unwrap();
        assert!(e.contains("timeout"), "{e}");
    });
}
