//! Hostile replies of the network providers against wiremock servers on 127.0.0.1:
//! a reply cut at `max_tokens` is a truncation (one request, no repair turn), every
//! failed reply the server billed is counted in the run's usage and trace, and the
//! response cache keeps only calls sent at temperature exactly 0 (after `params`).

use crate::providers_support::*;
use assert_cmd::Command;
use ragloop::providers::cache::ResponseCache;
use ragloop::runtime::{run, NoTrace, Program, ResourceOptions, Resources, RunInput, Status};
use serde_json::{json, Value};
use std::sync::Arc;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const ANTHROPIC_KEY: &str = "RAGLOOP_TEST_FAILURES_ANTHROPIC_KEY";
const OPENAI_KEY: &str = "RAGLOOP_TEST_FAILURES_OPENAI_KEY";

fn anthropic(server: &MockServer, extra: &str) -> String {
    std::env::set_var(ANTHROPIC_KEY, "sk-ant-failures-2718");
    format!(
        "provider: anthropic, model: claude-test, base_url: '{}', api_key_env: {ANTHROPIC_KEY}, temperature: 0, retries: 2, timeout_secs: 5{extra}",
        server.uri()
    )
}

fn openai(server: &MockServer, extra: &str) -> String {
    std::env::set_var(OPENAI_KEY, "sk-oai-failures-2718");
    format!(
        "provider: openai, model: test-model, base_url: '{}/v1', api_key_env: {OPENAI_KEY}, temperature: 0, retries: 2, timeout_secs: 5{extra}",
        server.uri()
    )
}

async fn answer_with(server: &MockServer, route: &str, v: Value) {
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(ResponseTemplate::new(200).set_body_json(v))
        .mount(server)
        .await;
}

/// Anthropic's reply when the budget runs out inside the forced tool call: the
/// `tool_use` block has an empty `input`.
fn anthropic_cut() -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "Verdict", "input": {}}],
        "stop_reason": "max_tokens", "stop_sequence": null,
        "usage": {"input_tokens": 900, "output_tokens": 1024}
    })
}

/// OpenAI's reply cut inside the tool call's arguments (here they even parse).
fn openai_cut() -> Value {
    let mut v = openai_tool_call("Verdict", json!("{}"));
    v["choices"][0]["finish_reason"] = json!("length");
    v["usage"] = json!({"prompt_tokens": 900, "completion_tokens": 1024});
    v
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.map_or(0, |r| r.len())
}

/// Runs the one-node project (structured output) with `model`, expecting a failure:
/// returns the error and the result.
async fn failing(model: &str) -> (String, ragloop::runtime::RunResult) {
    let p = project(model, true);
    let r = run_async(&program(&p), "q").await;
    assert_eq!(r.status, Status::Failed, "{:?}", r.error);
    (r.error.clone().unwrap_or_default(), r)
}

#[test]
fn anthropic_max_tokens_stop_is_a_truncation_not_a_schema_failure() {
    rt().block_on(async {
        for (extra, names) in [
            (
                ", max_tokens: 1024",
                ["max_tokens (1024)", "raise models.m.max_tokens"],
            ),
            (
                ", params: {max_tokens: 2000}",
                ["max_tokens (2000)", "raise models.m.params.max_tokens"],
            ),
            (
                "",
                ["max_tokens (4096, the default", "raise models.m.max_tokens"],
            ),
        ] {
            let server = MockServer::start().await;
            answer_with(&server, "/v1/messages", anthropic_cut()).await;
            let (e, _) = failing(&anthropic(&server, extra)).await;
            assert_eq!(requests(&server).await, 1, "no repair turn, no retry: {e}");
            for n in names {
                assert!(e.contains(n), "{n:?} not in: {e}");
            }
            assert!(e.contains("stop_reason max_tokens"), "{e}");
            assert!(!e.contains("does not match the schema"), "{e}");
            assert!(!e.contains("required"), "{e}");
        }
    });
}

#[test]
fn openai_length_finish_is_a_truncation_not_a_schema_failure() {
    rt().block_on(async {
        for (extra, names) in [
            (
                ", max_tokens: 1024",
                ["max_tokens (1024)", "raise models.m.max_tokens"],
            ),
            (
                ", max_tokens: 1024, params: {max_completion_tokens: 64}",
                [
                    "max_completion_tokens (64)",
                    "raise models.m.params.max_completion_tokens",
                ],
            ),
            (
                "",
                [
                    "server's default output-token limit",
                    "set models.m.max_tokens",
                ],
            ),
        ] {
            let server = MockServer::start().await;
            answer_with(&server, "/v1/chat/completions", openai_cut()).await;
            let (e, _) = failing(&openai(&server, extra)).await;
            assert_eq!(requests(&server).await, 1, "no repair turn, no retry: {e}");
            for n in names {
                assert!(e.contains(n), "{n:?} not in: {e}");
            }
            assert!(e.contains("finish_reason length"), "{e}");
            assert!(!e.contains("does not match the schema"), "{e}");
        }
    });
}

/// The truncated reply reported 900 input and 1024 output tokens: `run --json` and
/// the trace (the failed step and the final line) count them, priced.
#[test]
fn a_truncated_reply_is_billed_in_the_run_json_and_the_trace() {
    let rt = rt();
    let server = rt.block_on(MockServer::start());
    rt.block_on(answer_with(&server, "/v1/messages", anthropic_cut()));
    let p = project(
        &anthropic(
            &server,
            ", max_tokens: 1024, price: {input_per_mtok: 3, output_per_mtok: 15}",
        ),
        true,
    );
    let trace = p.dir.path().join("trace.jsonl");
    let cache = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("ragloop")
        .unwrap()
        .env("RAGLOOP_CACHE_DIR", cache.path())
        .arg("run")
        .arg(&p.spec)
        .args(["--json", "--question", "q", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let cost = (900.0 * 3.0 + 1024.0 * 15.0) / 1e6;
    let check = |u: &Value, what: &str| {
        assert_eq!(u["input_tokens"], json!(900), "{what}: {u}");
        assert_eq!(u["output_tokens"], json!(1024), "{what}: {u}");
        let c = u["cost_usd"].as_f64().unwrap_or(-1.0);
        assert!((c - cost).abs() < 1e-12, "{what}: {u}");
    };
    let v: Value = serde_json::from_str(stdout.trim()).expect("--json");
    assert_eq!(v["status"], "failed");
    check(&v["usage"], "run --json usage");
    assert_eq!(v["usage"]["calls"], json!(1), "{v}");
    let lines: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let step = lines.iter().find(|l| l["node"] == "judge").expect("step");
    check(&step["llm"], "trace step llm");
    let last = lines.last().unwrap();
    assert_eq!(last["final"], json!(true));
    check(&last["usage"], "trace final usage");
    assert_eq!(requests_blocking(&rt, &server), 1);
}

fn requests_blocking(rt: &tokio::runtime::Runtime, server: &MockServer) -> usize {
    rt.block_on(requests(server))
}

/// Other failures of a reply that reports its usage: a refusal, a content-filter
/// stop, a 200 carrying an error object, an Anthropic refusal. Each is one request,
/// fails, and counts the reported tokens.
#[test]
fn every_failed_reply_that_reports_usage_is_billed() {
    rt().block_on(async {
        let mut refusal = openai_text("");
        refusal["choices"][0]["message"]["refusal"] = json!("I can't help with that.");
        refusal["usage"] = json!({"prompt_tokens": 40, "completion_tokens": 6});
        let mut filtered = openai_text("");
        filtered["choices"][0]["finish_reason"] = json!("content_filter");
        filtered["usage"] = json!({"prompt_tokens": 41, "completion_tokens": 7});
        let error_object = json!({
            "error": {"message": "the tool schema is invalid", "type": "invalid_request_error"},
            "usage": {"prompt_tokens": 42, "completion_tokens": 0}
        });
        let anthropic_refusal = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "No."}],
            "stop_reason": "refusal",
            "usage": {"input_tokens": 43, "output_tokens": 2}
        });
        let cases = [
            ("openai", refusal, "refused", (40, 6)),
            ("openai", filtered, "content filter", (41, 7)),
            (
                "openai",
                error_object,
                "the tool schema is invalid",
                (42, 0),
            ),
            ("anthropic", anthropic_refusal, "refused", (43, 2)),
        ];
        for (provider, reply, says, (input, output)) in cases {
            let server = MockServer::start().await;
            let (route, model) = if provider == "openai" {
                ("/v1/chat/completions", openai(&server, ""))
            } else {
                ("/v1/messages", anthropic(&server, ""))
            };
            answer_with(&server, route, reply).await;
            let (e, r) = failing(&model).await;
            assert!(e.contains(says), "{e}");
            assert_eq!(requests(&server).await, 1, "{e}");
            assert_eq!(r.usage.tokens.input_tokens, input, "{provider} {says}: {e}");
            assert_eq!(
                r.usage.tokens.output_tokens, output,
                "{provider} {says}: {e}"
            );
        }
    });
}

/// Two runs of `program` sharing one response cache; the requests the server got.
async fn twice(program: &Program, cache: &tempfile::TempDir, server: &MockServer) -> usize {
    let cache = Arc::new(ResponseCache::at(cache.path()));
    for _ in 0..2 {
        let res = Resources::prepare(
            program,
            ResourceOptions {
                cache: Some(Arc::clone(&cache)),
                ..ResourceOptions::default()
            },
        )
        .expect("resources");
        let input = RunInput {
            question: Some("q".into()),
            sets: vec![],
        };
        let r = run(program, &res, &input, &mut NoTrace).await;
        assert_eq!(r.status, Status::Generated, "{:?}", r.error);
    }
    requests(server).await
}

/// The cache keeps only calls sent at temperature exactly 0, decided from the
/// temperature actually sent after the `params` merge.
#[test]
fn only_calls_sent_at_temperature_zero_are_cached() {
    rt().block_on(async {
        for provider in ["openai", "anthropic"] {
            for (extra, want) in [
                // The model's temperature 0 overridden by params: not deterministic.
                (", params: {temperature: 0.7}", 2),
                // `null` removes the field: the server's default, not 0.
                (", params: {temperature: null}", 2),
                // Temperature 0, from the config or from params: the second run
                // is served from the cache.
                ("", 1),
                (", temperature: 0.9, params: {temperature: 0}", 1),
            ] {
                let server = MockServer::start().await;
                let (route, model, reply) = if provider == "openai" {
                    (
                        "/v1/chat/completions",
                        openai(&server, extra),
                        openai_text("An answer."),
                    )
                } else {
                    (
                        "/v1/messages",
                        anthropic(&server, extra),
                        json!({"id": "msg_1", "type": "message", "role": "assistant",
                            "content": [{"type": "text", "text": "An answer."}],
                            "stop_reason": "end_turn",
                            "usage": {"input_tokens": 5, "output_tokens": 3}}),
                    )
                };
                // `temperature` given twice in the flow mapping is a spec error:
                // the later one replaces the earlier.
                let model = if extra.contains(", temperature:") {
                    model.replacen("temperature: 0, ", "", 1)
                } else {
                    model
                };
                answer_with(&server, route, reply).await;
                let p = project(&model, false);
                let cache = tempfile::tempdir().unwrap();
                let n = twice(&program(&p), &cache, &server).await;
                assert_eq!(n, want, "{provider}{extra}: {n} request(s)");
                let sent: Vec<Value> = bodies(&server).await;
                let t = sent[0].get("temperature").cloned();
                match extra {
                    ", params: {temperature: null}" => assert_eq!(t, None),
                    ", params: {temperature: 0.7}" => assert_eq!(t, Some(json!(0.7))),
                    _ => assert_eq!(t.and_then(|t| t.as_f64()), Some(0.0)),
                }
            }
        }
    });
}
