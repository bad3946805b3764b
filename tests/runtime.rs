//! Runtime tests: reducers, branches, strict undefined, limits, repairs, map order,
//! traces, template safety. No network: scripted providers and retrievers.

use crate::runtime_support::*;
use ragloop::runtime::{JsonlTrace, NoTrace, Status};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A small spec exercising every reducer and a loop bounded by a counter.
fn mini(extra_nodes: &str, edges: &str, limits: &str) -> String {
    format!(
        r#"version: 1
name: mini
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      n: {{type: integer, minimum: 0}}
      log: {{type: array, items: {{type: string}}}}
      meta: {{type: object}}
      answer: {{type: string}}
      label: {{type: string}}
    required: [question]
  initial: {{n: 0, log: [], meta: {{a: 1}}}}
  reducers: {{n: add, log: append, meta: merge}}
models:
  m: {{provider: scripted, params: {{file: fixture.json}}}}
output: {{answer: answer}}
entry: start
{limits}
nodes:
  start:
    kind: update
    update:
      n: 1
      log: "'start ' ~ n"
      meta: "{{'b': 2}}"
{extra_nodes}
edges:
{edges}
"#
    )
}

fn answer_node() -> &'static str {
    r#"  say:
    kind: llm
    model: m
    inputs:
      q: question
    prompt:
      user: "Q: {{ q }}"
    update:
      answer: output
"#
}

#[test]
fn reducers_apply_in_order() {
    let spec = mini(answer_node(), "  start: say\n  say: END\n", "");
    let p = project(&spec, &json!({}));
    let prog = program(&p.spec);
    let r = quick(&prog, json!({"say": ["done"]}), vec![]);
    assert_eq!(r.status, Status::Generated, "{:?}", r.error);
    assert_eq!(r.state["n"], json!(1));
    assert_eq!(r.state["log"], json!(["start 0"]));
    assert_eq!(r.state["meta"], json!({"a": 1, "b": 2}));
    assert_eq!(r.answer.as_deref(), Some("done"));
    assert_eq!(r.path, vec!["start", "say"]);
}

#[test]
fn first_true_arm_wins_then_else() {
    let nodes = format!(
        "{}  other:\n    kind: update\n    update:\n      label: \"'other'\"\n",
        answer_node()
    );
    // Both `when`s are true: the first wins.
    let edges = "  start:\n    - when: n >= 1\n      to: say\n    - when: n >= 0\n      to: other\n    - else: END\n  say: END\n  other: END\n";
    let p = project(&mini(&nodes, edges, ""), &json!({}));
    let r = quick(&program(&p.spec), json!({"say": ["a"]}), vec![]);
    assert_eq!(r.path, vec!["start", "say"]);
    // No `when` true: else.
    let edges = "  start:\n    - when: n > 5\n      to: say\n    - when: n > 4\n      to: other\n    - else: END\n  say: END\n  other: END\n";
    let p = project(&mini(&nodes, edges, ""), &json!({}));
    let r = quick(&program(&p.spec), json!({}), vec![]);
    assert_eq!(r.path, vec!["start"]);
    assert_eq!(r.status, Status::Exhausted);
}

#[test]
fn predicate_on_missing_field_fails_naming_the_node() {
    // `answer` is a state field but unset at run time: strict undefined.
    let edges =
        "  start:\n    - when: answer | length > 0\n      to: say\n    - else: END\n  say: END\n";
    let p = project(&mini(answer_node(), edges, ""), &json!({}));
    let r = quick(&program(&p.spec), json!({}), vec![]);
    assert_eq!(r.status, Status::Failed);
    let e = r.error.unwrap();
    assert!(e.contains("node `start`") && e.contains("answer"), "{e}");
}

#[test]
fn comparing_a_string_with_a_number_fails() {
    // `meta` is an open object: validate cannot type `meta.a`, so the run-time check
    // is what refuses the comparison (a typed field is caught statically: E084).
    let edges = "  start:\n    - when: meta.a >= '3'\n      to: say\n    - else: END\n  say: END\n";
    let p = project(&mini(answer_node(), edges, ""), &json!({}));
    let r = quick(&program(&p.spec), json!({}), vec![]);
    assert_eq!(r.status, Status::Failed);
    let e = r.error.unwrap();
    assert!(e.contains("node `start`") && e.contains("string"), "{e}");
}

fn loop_spec(limits: &str, max_visits: Option<u32>, bound: u32) -> String {
    let mv = max_visits
        .map(|v| format!("    max_visits: {v}\n"))
        .unwrap_or_default();
    let nodes = format!("  again:\n    kind: update\n{mv}    update:\n      n: 1\n");
    let edges = format!(
        "  start: again\n  again:\n    - when: n >= {bound}\n      to: END\n    - else: again\n"
    );
    mini(&nodes, &edges, limits)
}

#[test]
fn max_steps_counts_node_executions() {
    // Needs 1 (start) + 2 (again until n >= 3) = 3 executions.
    for (max, status, steps) in [
        (1, Status::Limit, 1),
        (2, Status::Limit, 2),
        (3, Status::Exhausted, 3),
        (4, Status::Exhausted, 3),
    ] {
        let p = project(
            &loop_spec(&format!("limits: {{max_steps: {max}}}"), None, 3),
            &json!({}),
        );
        let r = quick(&program(&p.spec), json!({}), vec![]);
        assert_eq!(
            (r.status, r.steps),
            (status, steps),
            "max_steps {max}: {:?}",
            r.error
        );
        if status == Status::Limit {
            assert!(
                r.error.as_deref().unwrap_or("").contains("max_steps"),
                "{:?}",
                r.error
            );
        }
    }
}

#[test]
fn max_visits_counts_visits_of_the_node() {
    // `again` must run 4 times to reach n >= 5.
    for (mv, status, again_runs) in [
        (1, Status::Limit, 1),
        (3, Status::Limit, 3),
        (4, Status::Exhausted, 4),
        (9, Status::Exhausted, 4),
    ] {
        let p = project(&loop_spec("", Some(mv), 5), &json!({}));
        let r = quick(&program(&p.spec), json!({}), vec![]);
        assert_eq!(r.status, status, "max_visits {mv}: {:?}", r.error);
        assert_eq!(
            r.path.iter().filter(|n| *n == "again").count(),
            again_runs,
            "max_visits {mv}"
        );
        if status == Status::Limit {
            let e = r.error.unwrap();
            assert!(
                e.contains("`again`") && e.contains(&format!("max_visits = {mv}")),
                "{e}"
            );
        }
    }
}

fn arsc(canonical: bool) -> ragloop::runtime::Program {
    let name = if canonical {
        "graphs/arsc-canonical.yaml"
    } else {
        "graphs/arsc.yaml"
    };
    program(&repo().join(name))
}

fn all_no_fixture(rounds: usize) -> Value {
    let grades: Vec<Value> = (0..rounds)
        .flat_map(|_| [grade("d1", false), grade("d2", false)])
        .collect();
    let rewrites: Vec<Value> = (0..rounds).map(|i| json!(format!("q{}", i + 2))).collect();
    json!({"grader": grades, "rewriter": rewrites, "generator": []})
}

#[test]
fn iteration_bounds_at_one_and_n() {
    let docs = || vec![doc("d1", "unrelated"), doc("d2", "also unrelated")];
    for (canonical, max_it, retrievals) in
        [(false, 1, 1), (false, 3, 3), (true, 1, 2), (true, 3, 4)]
    {
        let prog = arsc(canonical);
        let r = run_scripted(
            &prog,
            scripted(all_no_fixture(retrievals)),
            (0..retrievals).map(|_| docs()).collect(),
            "q1",
            vec![("max_iterations".into(), json!(max_it))],
            &mut NoTrace,
        );
        assert_eq!(r.status, Status::Exhausted, "{:?}", r.error);
        assert_eq!(
            r.path.iter().filter(|n| *n == "retriever").count(),
            retrievals,
            "canonical={canonical} max={max_it}: {:?}",
            r.path
        );
        assert_eq!(r.state["iteration_count"], json!(max_it));
        assert!(r.state.get("generation").is_none());
        assert_eq!(r.iterations as usize, retrievals);
    }
}

#[test]
fn happy_path_generates_with_sources() {
    let prog = arsc(false);
    let r = run_scripted(
        &prog,
        scripted(
            json!({"grader": [grade("d1", true), grade("d2", false)], "generator": ["Cargo check checks. [d1.html]"]}),
        ),
        vec![vec![doc("d1", "cargo check"), doc("d2", "other")]],
        "What does cargo check do?",
        vec![],
        &mut NoTrace,
    );
    assert_eq!(r.status, Status::Generated, "{:?}", r.error);
    assert_eq!(r.path, vec!["retriever", "grader", "generator"]);
    assert_eq!(r.sources, vec!["d1.html"]);
    assert_eq!(r.usage.calls, 3);
}

const STRUCTURED: &str = r#"  say:
    kind: llm
    model: m
    repair_attempts: 2
    prompt:
      user: "Q: {{ question }}"
    schema:
      type: object
      properties:
        label: {type: string, enum: [a, b]}
      required: [label]
    update:
      label: output.label
      answer: "'ok'"
"#;

#[test]
fn repair_turns_fix_invalid_output() {
    let p = project(
        &mini(STRUCTURED, "  start: say\n  say: END\n", ""),
        &json!({}),
    );
    let prog = program(&p.spec);
    let provider =
        scripted(json!({"say": [{"label": "c"}, "prose instead of JSON", {"label": "b"}]}));
    let r = run_scripted(
        &prog,
        Arc::clone(&provider),
        vec![],
        "q",
        vec![],
        &mut NoTrace,
    );
    assert_eq!(r.status, Status::Generated, "{:?}", r.error);
    assert_eq!(r.state["label"], json!("b"));
    assert_eq!(r.usage.calls, 3);
    let reqs = provider.requests();
    assert_eq!(reqs.len(), 3);
    // The last request carries both rejected answers and both validation errors.
    let roles: Vec<&str> = reqs[2].messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(
        roles,
        vec!["user", "assistant", "user", "assistant", "user"]
    );
    assert!(reqs[2].messages[2].content.contains("JSON Schema"));
}

#[test]
fn repairs_exhausted_fail_naming_node_and_schema_error() {
    let p = project(
        &mini(STRUCTURED, "  start: say\n  say: END\n", ""),
        &json!({}),
    );
    let prog = program(&p.spec);
    let r = quick(
        &prog,
        json!({"say": [{"label": "c"}, {"label": "d"}, {"nope": 1}]}),
        vec![],
    );
    assert_eq!(r.status, Status::Failed);
    let e = r.error.unwrap();
    assert!(
        e.contains("node `say`") && e.contains("2 repair turn(s)") && e.contains("label"),
        "{e}"
    );
    assert_eq!(r.usage.calls, 3);
}

#[test]
fn map_results_keep_input_order_under_reversed_delays() {
    let prog = arsc(false);
    let docs: Vec<_> = (1..=4).map(|i| doc(&format!("d{i}"), "x")).collect();
    // Item 0 answers last, item 3 first.
    let grades: Vec<Value> = (1..=4)
        .map(|i| json!({"delay_ms": 10 * (5 - i), "output": grade(&format!("d{i}"), i % 2 == 1)}))
        .collect();
    let r = run_scripted(
        &prog,
        scripted(json!({"grader": grades, "generator": ["ans"]})),
        vec![docs],
        "q",
        vec![],
        &mut NoTrace,
    );
    assert_eq!(r.status, Status::Generated, "{:?}", r.error);
    let kept: Vec<&str> = r.state["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(kept, vec!["d1", "d3"]);
}

#[test]
fn fan_out_runs_concurrently() {
    let prog = arsc(false);
    let docs: Vec<_> = (1..=4).map(|i| doc(&format!("d{i}"), "x")).collect();
    let grades: Vec<Value> = (1..=4)
        .map(|i| json!({"delay_ms": 50, "output": grade(&format!("d{i}"), true)}))
        .collect();
    let provider = scripted(json!({"grader": grades, "generator": ["ans"]}));
    let t = Instant::now();
    let r = run_scripted(&prog, provider, vec![docs], "q", vec![], &mut NoTrace);
    let ms = t.elapsed().as_millis();
    assert_eq!(r.status, Status::Generated);
    assert!(ms < 150, "4 x 50 ms with concurrency 4 took {ms} ms");
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);
impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn trace_has_one_line_per_step_and_a_final_line() {
    let prog = arsc(false);
    let buf = Shared::default();
    let mut trace = JsonlTrace::new(buf.clone());
    let r = run_scripted(
        &prog,
        scripted(json!({"grader": [grade("d1", true)], "generator": ["ans"]})),
        vec![vec![doc("d1", "x")]],
        "q",
        vec![],
        &mut trace,
    );
    assert_eq!(r.status, Status::Generated);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["node"], json!("retriever"));
    assert_eq!(lines[0]["route"], json!({"to": "grader", "arm": "static"}));
    assert_eq!(
        lines[0]["delta"]["context_history"],
        json!(["Documents retrieved."])
    );
    assert_eq!(lines[1]["route"]["arm"], json!("else"));
    assert_eq!(lines[1]["llm"]["calls"], json!(1));
    assert!(lines[1]["duration_us"].is_u64() && lines[1]["start"].is_u64());
    assert_eq!(lines[2]["route"]["to"], json!("END"));
    assert_eq!(lines[3]["final"], json!(true));
    assert_eq!(lines[3]["status"], json!("generated"));
}

#[test]
fn a_retrieve_step_record_carries_its_documents_in_rank_order() {
    // Eval reads a run's retrieval passes from these records: id and source
    // (`metadata.source`, else the id) of every document the search returned.
    let prog = arsc(false);
    let buf = Shared::default();
    let mut trace = JsonlTrace::new(buf.clone());
    let mut bare = doc("d2", "y");
    bare.metadata.clear();
    let r = run_scripted(
        &prog,
        scripted(json!({"grader": [grade("d1", true), grade("d2", false)], "generator": ["ans"]})),
        vec![vec![doc("d1", "x"), bare]],
        "q",
        vec![],
        &mut trace,
    );
    assert_eq!(r.status, Status::Generated);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], json!("retrieve"));
    assert_eq!(
        lines[0]["documents"],
        json!([{"id": "d1", "source": "d1.html"}, {"id": "d2", "source": "d2"}])
    );
    // Steps of other kinds have no `documents` key.
    assert!(lines[1].get("documents").is_none(), "{}", lines[1]);
}

#[test]
fn a_map_step_record_carries_its_documents_with_their_outputs() {
    // Eval's grader calibration reads a grader's verdicts from these records.
    let prog = arsc(false);
    let buf = Shared::default();
    let mut trace = JsonlTrace::new(buf.clone());
    let r = run_scripted(
        &prog,
        scripted(json!({"grader": [grade("d1", true), grade("d2", false)], "generator": ["ans"]})),
        vec![vec![doc("d1", "x"), doc("d2", "y")]],
        "q",
        vec![],
        &mut trace,
    );
    assert_eq!(r.status, Status::Generated);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[1]["kind"], json!("map"));
    let items = lines[1]["items"].as_array().expect("items on the map step");
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], json!("d1"));
    assert_eq!(items[0]["source"], json!("d1.html"));
    assert_eq!(items[0]["output"], grade("d1", true));
    assert_eq!(items[1]["output"], grade("d2", false));
    // The retrieve step's documents carry no output; other steps have no items.
    assert!(lines[0]["documents"][0].get("output").is_none());
    assert!(lines[0].get("items").is_none() && lines[2].get("items").is_none());
}

#[test]
fn provider_failure_mid_run_keeps_the_trace() {
    let prog = arsc(false);
    let buf = Shared::default();
    let mut trace = JsonlTrace::new(buf.clone());
    let r = run_scripted(
        &prog,
        scripted(
            json!({"grader": [grade("d1", true)], "generator": [{"error": "HTTP 500 upstream"}]}),
        ),
        vec![vec![doc("d1", "x")]],
        "q",
        vec![],
        &mut trace,
    );
    assert_eq!(r.status, Status::Failed);
    let e = r.error.unwrap();
    assert!(
        e.contains("node `generator`") && e.contains("HTTP 500"),
        "{e}"
    );
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[2]["error"].as_str().unwrap().contains("HTTP 500"));
    assert_eq!(lines[3]["status"], json!("failed"));
}

#[test]
fn running_out_of_scripted_answers_names_the_node() {
    let prog = arsc(false);
    let r = quick(
        &prog,
        json!({"grader": [grade("d1", true)]}),
        vec![vec![doc("d1", "x")]],
    );
    assert_eq!(r.status, Status::Failed);
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .contains("no answer left for node `generator`"),
        "{:?}",
        r.error
    );
}

#[test]
fn retrieved_template_syntax_is_not_rendered() {
    let prog = arsc(false);
    let provider = scripted(json!({"grader": [grade("d1", true)], "generator": ["ans"]}));
    let r = run_scripted(
        &prog,
        Arc::clone(&provider),
        vec![vec![doc(
            "d1",
            "use {{ x }} and {% if %} and {# c #} literally",
        )]],
        "q {{ question }}",
        vec![],
        &mut NoTrace,
    );
    assert_eq!(r.status, Status::Generated, "{:?}", r.error);
    let reqs = provider.requests();
    let gen = reqs.iter().find(|r| r.node == "generator").unwrap();
    let user = &gen.messages.last().unwrap().content;
    assert!(
        user.contains("use {{ x }} and {% if %} and {# c #} literally"),
        "{user}"
    );
    assert!(user.contains("q {{ question }}"), "{user}");
}

#[test]
fn schema_violation_names_node_and_field() {
    // `n` has minimum 0: adding -5 makes it negative.
    let nodes = "  neg:\n    kind: update\n    update:\n      n: -5\n";
    let p = project(&mini(nodes, "  start: neg\n  neg: END\n", ""), &json!({}));
    let r = quick(&program(&p.spec), json!({}), vec![]);
    assert_eq!(r.status, Status::Failed);
    let e = r.error.unwrap();
    assert!(e.contains("node `neg`") && e.contains("field `n`"), "{e}");
}

#[test]
fn huge_question_runs() {
    let prog = arsc(false);
    let q = "cargo ".repeat(200_000);
    let r = run_scripted(
        &prog,
        scripted(json!({"grader": [grade("d1", true)], "generator": ["ans"]})),
        vec![vec![doc("d1", "x")]],
        &q,
        vec![],
        &mut NoTrace,
    );
    assert_eq!(r.status, Status::Generated, "{:?}", r.error);
}

fn tool_spec(kind: &str) -> String {
    let tool = match kind {
        "corpus" => "  web: {kind: corpus, corpus: corpus, top_k: 1}\n".to_string(),
        url => {
            format!("  web: {{kind: searxng, base_url: \"{url}\", retries: 0, timeout_secs: 2}}\n")
        }
    };
    mini(
        "  search:\n    kind: tool\n    tool: web\n    query: \"{{ question }}\"\n    update:\n      log: \"output | map(attribute='id') | list\"\n",
        "  start: search\n  search: END\n",
        &format!("tools:\n{tool}"),
    )
}

#[test]
fn corpus_tool_searches_and_web_tool_failures_name_the_tool() {
    // The corpus tool searches the project's `corpus` directory with BM25 (top_k 1).
    let p = project(&tool_spec("corpus"), &json!({}));
    std::env::set_var("RAGLOOP_CACHE_DIR", p.dir.path().join("cache"));
    let prog = program(&p.spec);
    let r = run_scripted(
        &prog,
        scripted(json!({})),
        vec![],
        "cargo check",
        vec![],
        &mut NoTrace,
    );
    assert_eq!(r.status, Status::Exhausted, "{:?}", r.error);
    let log = r.state["log"].as_array().unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(
        log[1].as_str().map(str::len),
        Some(36),
        "a chunk id: {log:?}"
    );
    // A SearxNG tool whose server is gone: the node fails, naming the tool and the
    // endpoint (web search itself is tested against mock servers in tests/websearch.rs).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = project(&tool_spec(&format!("http://127.0.0.1:{port}")), &json!({}));
    let r = quick(&program(&p.spec), json!({}), vec![]);
    assert_eq!(r.status, Status::Failed);
    let e = r.error.unwrap();
    assert!(
        e.contains("node `search`")
            && e.contains(&format!(
                "tool `web`: searxng at http://127.0.0.1:{port}/search: cannot connect"
            )),
        "{e}"
    );
}

#[test]
fn transient_failures_are_retried() {
    use ragloop::providers::{LlmRequest, LlmResponse, Provider, ProviderError, Usage};
    use std::sync::atomic::{AtomicU32, Ordering};
    struct Flaky(AtomicU32);
    impl Provider for Flaky {
        fn name(&self) -> &'static str {
            "flaky"
        }
        fn call<'a>(
            &'a self,
            _: &'a LlmRequest,
        ) -> futures::future::BoxFuture<'a, Result<LlmResponse, ProviderError>> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if n == 0 {
                    Err(ProviderError::Transient("503".into()))
                } else {
                    Ok(LlmResponse {
                        output: json!("fine"),
                        usage: Usage::default(),
                        ..Default::default()
                    })
                }
            })
        }
    }
    let spec = mini(answer_node(), "  start: say\n  say: END\n", "").replace(
        "params: {file: fixture.json}",
        "retries: 1, params: {file: fixture.json}",
    );
    let p = project(&spec, &json!({}));
    let prog = program(&p.spec);
    let mut opts = ragloop::runtime::ResourceOptions::default();
    let flaky = Arc::new(Flaky(AtomicU32::new(0)));
    opts.providers
        .insert("m".into(), Arc::clone(&flaky) as Arc<dyn Provider>);
    let res = ragloop::runtime::Resources::prepare(&prog, opts).unwrap();
    let input = ragloop::runtime::RunInput {
        question: Some("q".into()),
        sets: vec![],
    };
    let r = rt().block_on(ragloop::runtime::run(&prog, &res, &input, &mut NoTrace));
    assert_eq!(r.status, Status::Generated, "{:?}", r.error);
    // Two attempts of one logical call: the retry happens inside the provider
    // wrapper (`providers::retry::Retrying`), as network providers retry inside
    // `http::send`.
    assert_eq!(flaky.0.load(Ordering::SeqCst), 2);
    assert_eq!(r.usage.calls, 1);
}

/// A retriever's failure is a typed [`ragloop::retrieval::SearchError`]; its message is
/// the backend's own.
#[tokio::test]
async fn a_scripted_retriever_out_of_lists_fails_with_a_typed_error() {
    use ragloop::retrieval::{Retriever, ScriptedRetriever, SearchError};
    let r = ScriptedRetriever::new(vec![]);
    let e = r.search("q", 3).await.unwrap_err();
    assert!(matches!(e, SearchError::Backend(_)), "{e:?}");
    assert_eq!(e.to_string(), "scripted retriever: no result list left");
}
