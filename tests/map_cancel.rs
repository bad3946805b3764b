//! A `map` node whose item fails stops its siblings: the in-flight calls of the other
//! items are dropped (their HTTP requests cancelled, never retried), the run fails at
//! once, and the usage of the items that finished is still counted.
use crate::providers_support::{openai_text, rt};
use ragloop::compile::load_program;
use ragloop::runtime::{run, NoTrace, ResourceOptions, Resources, RunInput, Status};
use serde_json::json;
use std::time::{Duration, Instant};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn spec(base: &str) -> String {
    format!(
        r#"version: 1
name: mapcancel
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      docs: {{type: array, items: {{type: string}}}}
      grades: {{type: array}}
    required: [question]
  initial:
    docs: [alpha, bravo, charlie]
models:
  m: {{provider: openai, model: test, base_url: "{base}/v1", timeout_secs: 5, retries: 2}}
entry: grade
nodes:
  grade:
    kind: map
    over: docs
    concurrency: 3
    model: m
    prompt:
      user: "Grade item {{{{ item }}}}"
    update:
      grades: output
edges:
  grade: END
"#
    )
}

#[test]
fn a_failed_item_cancels_its_stalled_siblings_and_keeps_the_finished_usage() {
    let rt = rt();
    let server = rt.block_on(async {
        let server = MockServer::start().await;
        // alpha answers at once (11 tokens in, 7 out).
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(body_string_contains("Grade item alpha"))
            .respond_with(ResponseTemplate::new(200).set_body_json(openai_text("fine")))
            .mount(&server)
            .await;
        // bravo fails permanently, a little later.
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(body_string_contains("Grade item bravo"))
            .respond_with(
                ResponseTemplate::new(400)
                    .set_body_json(json!({"error": {"message": "bad item"}}))
                    .set_delay(Duration::from_millis(400)),
            )
            .mount(&server)
            .await;
        // charlie stalls far beyond its 5 s attempt timeout.
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(body_string_contains("Grade item charlie"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(openai_text("late"))
                    .set_delay(Duration::from_secs(60)),
            )
            .mount(&server)
            .await;
        server
    });
    let dir = tempfile::tempdir().unwrap();
    let spec_path = dir.path().join("spec.yaml");
    std::fs::write(&spec_path, spec(&server.uri())).unwrap();
    let program = load_program(&spec_path, None, &[]).unwrap_or_else(|e| panic!("{e}"));
    let res = Resources::prepare(&program, ResourceOptions::default()).unwrap();
    let input = RunInput {
        question: Some("q".into()),
        sets: vec![],
    };
    let t = Instant::now();
    let r = rt.block_on(run(&program, &res, &input, &mut NoTrace));
    let took = t.elapsed();
    assert_eq!(r.status, Status::Failed);
    let err = r.error.clone().unwrap_or_default();
    assert!(err.contains("item 1") && err.contains("bad item"), "{err}");
    // Failed before charlie's first attempt could even time out (5 s).
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // The finished sibling's usage is billed; charlie's cancelled call reported none.
    assert_eq!(
        (r.usage.tokens.input_tokens, r.usage.tokens.output_tokens),
        (11, 7),
        "{:?}",
        r.usage
    );
    assert_eq!(r.usage.calls, 3, "three requests were made: {:?}", r.usage);
    // No sibling is retried after the failure: wait past charlie's attempt timeout.
    std::thread::sleep(Duration::from_millis(5500).saturating_sub(took));
    let n = rt
        .block_on(server.received_requests())
        .unwrap_or_default()
        .len();
    assert_eq!(n, 3, "one request per item, no retry after the failure");
}
