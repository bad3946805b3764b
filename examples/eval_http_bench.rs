//! `ragloop eval` throughput against a real local HTTP server: graphs/crag.yaml with
//! both models pointed (`--model NAME=openai:mock@URL`) at a wiremock server on
//! 127.0.0.1 that answers every Chat Completions call after a fixed delay (50 ms by
//! default), 40 questions × 2 variants, `--concurrency 32`.
//!
//! Prints the measured questions/second next to the concurrency bound: every run of
//! CRAG's happy path makes 3 sequential LLM rounds (the fanned-out document grading
//! counts once, then generate, then grade_answer), so P runs at concurrency C take at
//! least ceil(P / C) × 3 × delay; the bound is P divided by that. Target ≥ 85%.
//!
//! ```sh
//! cargo run --release --example eval_http_bench -- [DATASET] [DELAY_MS] [CONCURRENCY]
//! ```
use ragloop::eval::{run_eval, EvalConfig};
use serde_json::Value;
use std::time::Duration;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

struct Chat {
    delay: Duration,
}

/// The first `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in a text (document ids are UUIDs).
fn first_uuid(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let is_hex = |c: u8| c.is_ascii_hexdigit();
    (0..b.len().saturating_sub(35)).find_map(|i| {
        let w = &b[i..i + 36];
        let ok = w.iter().enumerate().all(|(j, &c)| {
            if matches!(j, 8 | 13 | 18 | 23) {
                c == b'-'
            } else {
                is_hex(c)
            }
        });
        ok.then(|| &text[i..i + 36])
    })
}

impl Respond for Chat {
    // Cheap on purpose (a byte scan, no JSON parse of the request): the mock shares
    // the machine with the eval, and its CPU time would count against the bound.
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body = String::from_utf8_lossy(&req.body);
        let call = |name: &str, args: String| {
            format!(
                r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"{name}","arguments":{}}}}}]}}"#,
                Value::String(args)
            )
        };
        let message = if body.contains("\"GradingResult\"") {
            // The passage id is the last UUID of the request (the user message).
            let id = body
                .rmatch_indices("Passage ")
                .next()
                .and_then(|(i, _)| first_uuid(&body[i..]))
                .unwrap_or("");
            call(
                "GradingResult",
                format!(r#"{{"document_id":"{id}","binary_score":"yes","confidence":0.9}}"#),
            )
        } else if body.contains("\"AnswerGrade\"") {
            call(
                "AnswerGrade",
                r#"{"grounded":true,"addresses_question":true}"#.to_string(),
            )
        } else {
            r#"{"role":"assistant","content":"From the book. [ch01-03-hello-cargo.html]"}"#
                .to_string()
        };
        let resp = format!(
            r#"{{"id":"chatcmpl-1","object":"chat.completion","model":"mock","choices":[{{"index":0,"finish_reason":"stop","message":{message}}}],"usage":{{"prompt_tokens":100,"completion_tokens":20}}}}"#
        );
        ResponseTemplate::new(200)
            .set_body_raw(resp, "application/json")
            .set_delay(self.delay)
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut args = std::env::args().skip(1);
    let dataset = args.next().map_or_else(
        || manifest.join("../shared/datasets/rust-book-qa.jsonl"),
        Into::into,
    );
    let delay_ms: u64 = args.next().map_or(Ok(50), |s| s.parse())?;
    let concurrency: usize = args.next().map_or(Ok(32), |s| s.parse())?;
    // No request recording: the bench never inspects them, and storing every body costs CPU.
    let server = MockServer::builder()
        .disable_request_recording()
        .start()
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Chat {
            delay: Duration::from_millis(delay_ms),
        })
        .mount(&server)
        .await;
    let url = format!("{}/v1", server.uri());
    let out = tempfile::tempdir()?;
    let cfg = EvalConfig {
        spec: manifest.join("graphs/crag.yaml"),
        dataset,
        variants: Some(vec!["base".into(), "lenient_grader".into()]),
        concurrency,
        out: out.path().to_path_buf(),
        models: vec![
            format!("grader=openai:mock@{url}"),
            format!("generator=openai:mock@{url}"),
        ],
        ..EvalConfig::default()
    };
    let o = run_eval(&cfg).await.map_err(|e| e.to_string())?;
    let rows = std::fs::read_to_string(out.path().join("results.jsonl"))?;
    let mut paths = std::collections::BTreeSet::new();
    for l in rows.lines() {
        let v: Value = serde_json::from_str(l)?;
        paths.insert(v["path"].to_string());
    }
    println!("paths taken: {paths:?}");
    if o.failed_runs > 0 {
        return Err(format!("{} run(s) failed", o.failed_runs).into());
    }
    let p = o.new_rows as f64;
    let seq = 3.0;
    let delay = delay_ms as f64 / 1000.0;
    let waves = (o.new_rows as f64 / concurrency as f64).ceil();
    let bound = p / (waves * seq * delay);
    let got = p / o.run_seconds;
    println!(
        "{} runs against a mock OpenAI server on 127.0.0.1 ({delay_ms} ms per call, {seq} sequential calls per run, --concurrency {concurrency}): \
         {got:.1} q/s in {:.3} s; concurrency bound {bound:.1} q/s ({waves} waves x {seq} x {delay_ms} ms); {:.1}% of the bound (target >= 85%) {}",
        o.new_rows,
        o.run_seconds,
        100.0 * got / bound,
        if got >= 0.85 * bound { "OK" } else { "BELOW" }
    );
    Ok(())
}
