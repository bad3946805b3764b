//! The judge metrics, grader calibration and datasets without references, end to end
//! through `ragloop::eval::run_eval`: the offline judge, an OpenAI-compatible judge on
//! wiremock (good answers, garbage, HTTP 500, timeouts), judge calls recorded in and
//! replayed from a cassette. No network beyond 127.0.0.1.
use ragloop::eval::{run_eval, EvalConfig};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SPEC: &str = r#"version: 1
name: judgetest
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      grades: {type: array}
      answer: {type: string}
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
  judge_me:
    kind: map
    model: m
    over: documents
    inputs: {document: item}
    prompt: {user: "Relevant to {{ question }}? {{ document.content }}"}
    schema:
      type: object
      properties: {verdict: {type: string, enum: ["yes", "no"]}, why: {type: string}}
      required: [verdict, why]
    update: {grades: output}
  say: {kind: llm, model: m, prompt: {user: "{{ question }}"}, update: {answer: output}}
edges:
  retrieve: judge_me
  judge_me: say
  say: END
"#;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// `n` questions about cargo check; the grader says `grade` to every document.
    fn new(n: usize, grade: &str, dataset: Option<Vec<Value>>) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("spec.yaml"), SPEC).unwrap();
        let answers: Vec<Value> = (0..n)
            .map(|i| {
                if i % 3 == 2 {
                    json!("I cannot find this in the documentation.")
                } else {
                    json!("Cargo check checks that your code compiles. It produces no executable.")
                }
            })
            .collect();
        let grades = vec![json!({"verdict": grade, "why": "because"}); 2 * n];
        std::fs::write(
            p.join("fixture.json"),
            json!({"judge_me": grades, "say": answers}).to_string(),
        )
        .unwrap();
        std::fs::create_dir_all(p.join("corpus")).unwrap();
        std::fs::write(
            p.join("corpus/cargo.md"),
            "# Cargo\n\nCargo check checks your code compiles without producing an executable.\n",
        )
        .unwrap();
        std::fs::write(
            p.join("corpus/other.md"),
            "# Ownership\n\nEach value has one owner. Cargo is mentioned here too.\n",
        )
        .unwrap();
        let data = dataset.unwrap_or_else(|| {
            (0..n)
                .map(|i| {
                    json!({"id": format!("q{i}"), "question": "What does cargo check do?",
                           "answer": "it checks the code", "must_contain": ["check"],
                           "sources": ["docs/cargo.md"], "kind": "direct"})
                })
                .collect()
        });
        let text: String = data.iter().map(|v| format!("{v}\n")).collect();
        std::fs::write(p.join("data.jsonl"), text).unwrap();
        Env { dir }
    }
    fn path(&self, p: &str) -> std::path::PathBuf {
        self.dir.path().join(p)
    }
    fn config(&self, out: &str) -> EvalConfig {
        EvalConfig {
            specs: vec![self.path("spec.yaml")],
            dataset: self.path("data.jsonl"),
            concurrency: 1,
            out: self.path(out),
            judge_repeats: 1,
            ..EvalConfig::default()
        }
    }
    fn rows(&self, out: &str) -> Vec<Value> {
        std::fs::read_to_string(self.path(&format!("{out}/results.jsonl")))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    fn summary(&self, out: &str) -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(self.path(&format!("{out}/summary.json"))).unwrap(),
        )
        .unwrap()
    }
    fn report(&self, out: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{out}/report.md"))).unwrap()
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn overall(s: &Value) -> &Value {
    &s["results"]["base"]["overall"]
}

/// No NaN anywhere in summary.json: serde_json writes a NaN as null, so look at
/// every number.
fn no_nan(v: &Value) {
    match v {
        Value::Number(n) => assert!(n.as_f64().is_some_and(f64::is_finite), "{n}"),
        Value::Array(a) => a.iter().for_each(no_nan),
        Value::Object(m) => m.values().for_each(no_nan),
        _ => {}
    }
}

#[test]
fn offline_judge_scores_and_counts_refusals_apart_and_calibration_flags_a_yes_grader() {
    let env = Env::new(12, "yes", None);
    let o = rt().block_on(run_eval(&env.config("out"))).unwrap();
    assert_eq!(o.failed_runs, 0);
    let s = env.summary("out");
    no_nan(&s);
    let a = overall(&s);
    // 8 answers with two supported statements, 4 refusals.
    assert_eq!(a["metrics"]["faithfulness"]["value"], json!(1.0));
    assert_eq!(a["metrics"]["faithfulness"]["n"], json!(8));
    assert_eq!(a["judge"]["judge"], json!("offline"));
    assert_eq!(a["judge"]["statuses"]["faithfulness"]["refusal"], json!(4));
    assert_eq!(
        a["judge"]["statuses"]["answer_relevancy"]["scored"],
        json!(8)
    );
    let row = &env.rows("out")[0];
    assert_eq!(row["metrics"]["judge"]["statements"], json!(2));
    // The grader (a map over documents named judge_me, with a `verdict` field) said
    // yes to all 24 documents: 12 relevant (cargo.md), 12 not.
    let g = &a["grader"];
    assert_eq!(g["verdicts"], json!(24));
    assert_eq!(g["yes_rate"], json!(1.0));
    assert_eq!(g["precision"], json!(0.5));
    assert_eq!(g["recall"], json!(1.0));
    assert!(g["warning"]
        .as_str()
        .unwrap()
        .contains("said yes to 100.0% of 24"));
    let md = env.report("out");
    assert!(md.contains("## Grader calibration"), "{md}");
    assert!(
        md.contains("> **Warning** base: the document grader said yes to 100.0% of 24 documents"),
        "{md}"
    );
    assert!(
        md.contains("| base | faithfulness | 100.0% | 8 | 0 | 4 | 0 | 0 |"),
        "{md}"
    );
    let html = std::fs::read_to_string(env.path("out/report.html")).unwrap();
    assert!(html.contains("Warning: base: the document grader said yes"));
}

#[test]
fn a_grader_that_discriminates_is_not_flagged() {
    let env = Env::new(12, "no", None);
    rt().block_on(run_eval(&env.config("out"))).unwrap();
    let s = env.summary("out");
    let g = &overall(&s)["grader"];
    assert_eq!(g["yes_rate"], json!(0.0));
    assert!(g["warning"].as_str().unwrap().contains("said no to 100.0%"));
    assert_eq!(g["precision"], Value::Null, "no yes: no precision");
    assert_eq!(g["recall"], json!(0.0));
}

#[test]
fn a_dataset_without_references_runs_the_judge_and_leaves_reference_metrics_na() {
    let data: Vec<Value> = (0..3)
        .map(|i| json!({"id": i, "question": "What does cargo check do?", "kind": "direct"}))
        .collect();
    let env = Env::new(3, "yes", Some(data));
    let o = rt().block_on(run_eval(&env.config("out"))).unwrap();
    assert!(o.summary.dataset_errors.is_empty());
    let s = env.summary("out");
    no_nan(&s);
    let m = &overall(&s)["metrics"];
    for name in ["f1", "must_contain", "recall_final", "precision_first"] {
        assert_eq!(m[name]["n"], json!(0), "{name}");
        assert_eq!(m[name]["value"], Value::Null, "{name}");
    }
    assert_eq!(m["faithfulness"]["n"], json!(2));
    assert_eq!(m["answer_relevancy"]["n"], json!(2));
    // Without labels the grader's yes-rate is known, its precision and recall not.
    let g = &overall(&s)["grader"];
    assert_eq!(
        (g["verdicts"].clone(), g["labelled_verdicts"].clone()),
        (json!(6), json!(0))
    );
    assert_eq!(g["precision"], Value::Null);
}

/// An OpenAI-compatible judge: answers each of the three judge tasks by its system
/// prompt, or misbehaves on the task `bad` (by the words of its system prompt).
struct JudgeServer {
    bad: &'static str,
    how: &'static str,
    calls: Arc<AtomicUsize>,
}

fn content(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

impl Respond for JudgeServer {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let system = content(&body);
        let user = body["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let task = if system.contains("Break the answer") {
            "statements"
        } else if system.contains("grounding") {
            "verdicts"
        } else {
            "relevancy"
        };
        if task == self.bad {
            return match self.how {
                "500" => ResponseTemplate::new(500).set_body_string("boom"),
                "slow" => ResponseTemplate::new(200)
                    .set_body_json(text("{}"))
                    .set_delay(std::time::Duration::from_secs(3)),
                "schema" => {
                    ResponseTemplate::new(200).set_body_json(text(r#"{"score": 7, "reason": "x"}"#))
                }
                _ => ResponseTemplate::new(200).set_body_json(text("certainly! here you go")),
            };
        }
        let reply = match task {
            "statements" => {
                json!({"statements": ["Cargo check checks code.", "It uploads crates."]})
            }
            "verdicts" => {
                // One verdict per numbered statement.
                let n = user
                    .lines()
                    .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
                    .count();
                let v: Vec<Value> = (0..n)
                    .map(|i| json!({"supported": i == 0, "reason": "r"}))
                    .collect();
                json!({"verdicts": v})
            }
            _ => json!({"score": 0.8, "reason": "on topic"}),
        };
        ResponseTemplate::new(200).set_body_json(text(&reply.to_string()))
    }
}

fn text(t: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "judge",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": t}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    })
}

fn judge_eval(
    env: &Env,
    out: &str,
    bad: &'static str,
    how: &'static str,
    record: bool,
) -> (usize, Value) {
    rt().block_on(async {
        let server = MockServer::start().await;
        let calls = Arc::new(AtomicUsize::new(0));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(JudgeServer {
                bad,
                how,
                calls: Arc::clone(&calls),
            })
            .mount(&server)
            .await;
        let mut cfg = env.config(out);
        cfg.judge = Some(format!("openai:judge-model@{}/v1", server.uri()));
        cfg.timeout_secs = Some(0.5);
        cfg.retries = Some(0);
        if record {
            cfg.record_to = Some(env.path("judge.cassette.jsonl"));
        }
        let o = run_eval(&cfg).await.unwrap();
        assert_eq!(o.failed_runs, 0, "the arm's runs are not the judge's");
        (calls.load(Ordering::SeqCst), env.summary(out))
    })
}

#[test]
fn a_model_judge_scores_through_the_schema_checked_path() {
    let env = Env::new(3, "yes", None);
    let (calls, s) = judge_eval(&env, "out", "none", "", false);
    no_nan(&s);
    // Two answers judged (the third is a refusal): statements, verdicts, relevancy each.
    assert_eq!(calls, 6, "{:#}", env.rows("out")[0]["metrics"]["judge"]);
    let a = overall(&s);
    assert_eq!(
        a["judge"]["judge"].as_str().unwrap().split('@').next(),
        Some("openai:judge-model")
    );
    assert_eq!(a["metrics"]["faithfulness"]["value"], json!(0.5));
    assert_eq!(a["metrics"]["answer_relevancy"]["value"], json!(0.8));
    assert_eq!(a["judge"]["statuses"]["faithfulness"]["refusal"], json!(1));
    let row = &env.rows("out")[0];
    assert_eq!(
        (
            row["metrics"]["judge"]["statements"].clone(),
            row["metrics"]["judge"]["supported"].clone()
        ),
        (json!(2), json!(1))
    );
}

#[test]
fn a_failing_judge_is_counted_per_metric_and_the_rows_are_kept() {
    for (bad, how, metric) in [
        ("statements", "garbage", "faithfulness"),
        ("verdicts", "500", "faithfulness"),
        ("relevancy", "slow", "answer_relevancy"),
        ("relevancy", "schema", "answer_relevancy"),
    ] {
        let env = Env::new(3, "yes", None);
        let (_, s) = judge_eval(&env, "out", bad, how, false);
        no_nan(&s);
        let a = overall(&s);
        assert_eq!(a["n"], json!(3), "{bad} {how}");
        assert_eq!(
            a["judge"]["statuses"][metric]["judge_failed"],
            json!(2),
            "{bad} {how}"
        );
        assert_eq!(a["metrics"][metric]["value"], Value::Null, "{bad} {how}");
        assert_eq!(a["metrics"][metric]["n"], json!(0), "{bad} {how}");
        // The other metric still scored.
        let other = if metric == "faithfulness" {
            "answer_relevancy"
        } else {
            "faithfulness"
        };
        assert_eq!(
            a["judge"]["statuses"][other]["scored"],
            json!(2),
            "{bad} {how}"
        );
        let rows = env.rows("out");
        let err = rows[0]["metrics"]["judge"][metric]["error"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(!err.is_empty(), "{bad} {how}");
        let md = env.report("out");
        assert!(
            md.contains(&format!(
                "base: the judge failed on 2 of 3 answer(s) for {metric}"
            )),
            "{md}"
        );
    }
}

#[test]
fn judge_calls_are_recorded_and_replayed_and_a_missing_one_is_a_judge_failure() {
    let env = Env::new(3, "yes", None);
    let (calls, live) = judge_eval(&env, "live", "none", "", true);
    assert_eq!(calls, 6);
    let cassette = std::fs::read_to_string(env.path("judge.cassette.jsonl")).unwrap();
    assert!(cassette.contains("grounding"), "judge exchanges recorded");
    // Replayed with no server at all: the same judge figures.
    let replay = Arc::new(
        ragloop::providers::cassette::Cassette::load(&env.path("judge.cassette.jsonl")).unwrap(),
    );
    let mut cfg = env.config("replayed");
    cfg.judge = Some("openai:judge-model@http://127.0.0.1:9/v1".into());
    cfg.calls.replay = Some(Arc::clone(&replay));
    let judge_url = live["results"]["base"]["overall"]["judge"]["judge"]
        .as_str()
        .unwrap()
        .to_string();
    cfg.judge = Some(judge_url);
    rt().block_on(run_eval(&cfg)).unwrap();
    let s = env.summary("replayed");
    for m in ["faithfulness", "answer_relevancy"] {
        assert_eq!(
            overall(&s)["metrics"][m],
            overall(&live)["metrics"][m],
            "{m}"
        );
    }
    // A cassette recorded with the offline judge holds the arm's calls only: replayed
    // with a model judge, every judge call misses. Judge failures counted, no
    // crash, rows kept.
    let mut cfg = env.config("offline-rec");
    cfg.record_to = Some(env.path("arm.cassette.jsonl"));
    rt().block_on(run_eval(&cfg)).unwrap();
    let arm_only =
        ragloop::providers::cassette::Cassette::load(&env.path("arm.cassette.jsonl")).unwrap();
    let mut cfg = env.config("other");
    cfg.judge = Some("openai:judge-model@http://127.0.0.1:9/v1".into());
    cfg.calls.replay = Some(Arc::new(arm_only));
    let o = rt().block_on(run_eval(&cfg)).unwrap();
    assert_eq!(o.failed_runs, 0);
    let s = env.summary("other");
    no_nan(&s);
    assert_eq!(overall(&s)["n"], json!(3));
    assert_eq!(
        overall(&s)["judge"]["statuses"]["faithfulness"]["judge_failed"],
        json!(2)
    );
    assert_eq!(
        overall(&s)["judge"]["statuses"]["answer_relevancy"]["judge_failed"],
        json!(2)
    );
}

#[test]
fn judge_repeats_report_the_judges_agreement() {
    let env = Env::new(3, "yes", None);
    let mut cfg = env.config("out");
    cfg.judge_repeats = 3;
    rt().block_on(run_eval(&cfg)).unwrap();
    let s = env.summary("out");
    let a = &overall(&s)["judge"]["agreement"];
    assert_eq!(a["samples"], json!(3));
    assert_eq!(a["verdicts"], json!(1.0));
    assert_eq!(a["faithfulness_spread"], json!(0.0));
    assert!(env.report("out").contains("verdict agreement"));
}

#[test]
fn a_bad_judge_argument_is_a_usage_error_before_anything_runs() {
    let env = Env::new(3, "yes", None);
    for (arg, want) in [("nosuch:model", "--judge"), ("openai", "--judge")] {
        let mut cfg = env.config("out");
        cfg.judge = Some(arg.into());
        let e = rt().block_on(run_eval(&cfg)).unwrap_err();
        assert!(e.is_usage(), "{arg}: {e}");
        assert!(e.to_string().contains(want), "{arg}: {e}");
        assert!(!env.path("out/results.jsonl").exists(), "{arg}");
    }
    let mut cfg = env.config("out");
    cfg.single_shot = Some("nope".into());
    let e = rt().block_on(run_eval(&cfg)).unwrap_err();
    assert!(
        e.to_string()
            .contains("--single-shot: `nope` is not an evaluated arm"),
        "{e}"
    );
}

#[test]
fn resume_refuses_another_judge() {
    let env = Env::new(3, "yes", None);
    rt().block_on(run_eval(&env.config("out"))).unwrap();
    let mut cfg = env.config("out");
    cfg.resume = true;
    cfg.judge = Some("openai:judge-model@http://127.0.0.1:9/v1".into());
    let e = rt().block_on(run_eval(&cfg)).unwrap_err();
    assert!(e.is_usage(), "{e}");
    assert!(e.to_string().contains("--judge: null (before)"), "{e}");
    // The same (offline) judge resumes.
    let mut cfg = env.config("out");
    cfg.resume = true;
    assert_eq!(rt().block_on(run_eval(&cfg)).unwrap().resumed_rows, 3);
}

/// A judge model whose second sample disagrees on the second statement and scores
/// relevancy lower: the agreement figures show it.
struct Fickle;

impl Respond for Fickle {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let system = content(&body);
        let second = system.contains("Independent judgement number 2");
        let reply = if system.contains("Break the answer") {
            json!({"statements": ["Cargo check checks code.", "It produces no executable."]})
        } else if system.contains("grounding") {
            json!({"verdicts": [{"supported": true, "reason": "r"}, {"supported": !second, "reason": "r"}]})
        } else {
            json!({"score": if second { 0.4 } else { 0.8 }, "reason": "r"})
        };
        ResponseTemplate::new(200).set_body_json(text(&reply.to_string()))
    }
}

#[test]
fn a_model_judges_repeats_measure_its_disagreement() {
    let env = Env::new(3, "yes", None);
    rt().block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Fickle)
            .mount(&server)
            .await;
        let mut cfg = env.config("out");
        cfg.judge = Some(format!("openai:judge-model@{}/v1", server.uri()));
        cfg.judge_repeats = 2;
        run_eval(&cfg).await.unwrap();
        // 2 judged answers x (1 statements + 2 verdicts + 2 relevancy) calls.
        assert_eq!(server.received_requests().await.unwrap().len(), 10);
    });
    let s = env.summary("out");
    let a = overall(&s);
    // Samples: faithfulness 1.0 and 0.5 (mean 0.75), relevancy 0.8 and 0.4 (0.6).
    assert_eq!(a["metrics"]["faithfulness"]["value"], json!(0.75));
    assert!((a["metrics"]["answer_relevancy"]["value"].as_f64().unwrap() - 0.6).abs() < 1e-9);
    let ag = &a["judge"]["agreement"];
    assert_eq!(ag["samples"], json!(2));
    assert_eq!(ag["verdicts"], json!(0.5));
    assert_eq!(ag["faithfulness_spread"], json!(0.5));
    assert!((ag["relevancy_spread"].as_f64().unwrap() - 0.4).abs() < 1e-9);
}

#[test]
fn the_cli_takes_the_judge_flags() {
    let env = Env::new(3, "yes", None);
    let run = |extra: &[&str]| {
        assert_cmd::Command::cargo_bin("ragloop")
            .unwrap()
            .arg("eval")
            .arg(env.path("spec.yaml"))
            .arg("--dataset")
            .arg(env.path("data.jsonl"))
            .arg("--out")
            .arg(env.path("cli-out"))
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&["--judge", "nosuch:model"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--judge"));
    assert_eq!(run(&["--judge-repeats", "0"]).status.code(), Some(2));
    let o = run(&["--judge-repeats", "2", "--judge", "offline"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("faithfulness 100.0%, answer_relevancy 100.0%"),
        "{out}"
    );
}

#[test]
fn a_scripted_judge_reads_its_fixture_and_runs_out_into_judge_failures() {
    let env = Env::new(3, "yes", None);
    std::fs::write(
        env.path("judge.json"),
        json!({
            "statements": [{"statements": ["A claim.", "Another."]}],
            "verdicts": [{"verdicts": [{"supported": true, "reason": "r"}, {"supported": false, "reason": "r"}]}],
            "relevancy": [{"score": 0.25, "reason": "r"}]
        })
        .to_string(),
    )
    .unwrap();
    let mut cfg = env.config("out");
    cfg.judge = Some(format!("scripted:{}", env.path("judge.json").display()));
    rt().block_on(run_eval(&cfg)).unwrap();
    let s = env.summary("out");
    let a = overall(&s);
    // The first judged answer takes the fixture's answers, the second finds none left.
    assert_eq!(a["metrics"]["faithfulness"]["value"], json!(0.5));
    assert_eq!(a["metrics"]["answer_relevancy"]["value"], json!(0.25));
    assert_eq!(
        a["judge"]["statuses"]["faithfulness"]["judge_failed"],
        json!(1)
    );
    let mut cfg = env.config("missing");
    cfg.judge = Some(format!("scripted:{}", env.path("nope.json").display()));
    let e = rt().block_on(run_eval(&cfg)).unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("cannot read"), "{e}");
}

/// Ctrl-C while the judge is working: the judge's calls end with the eval's token like
/// the runs' own (no retries, no waiting out the timeouts), the pairs being judged get
/// no row (so `--resume` judges them again) and the outcome is interrupted.
#[test]
fn cancelling_during_judging_stops_at_once_and_keeps_no_half_judged_row() {
    let env = Env::new(3, "yes", None);
    rt().block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(text("{}"))
                    .set_delay(std::time::Duration::from_secs(60)),
            )
            .mount(&server)
            .await;
        let mut cfg = env.config("out");
        cfg.judge = Some(format!("openai:judge-model@{}/v1", server.uri()));
        cfg.timeout_secs = Some(30.0);
        cfg.retries = Some(3);
        let cancel = tokio_util::sync::CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            stop.cancel();
        });
        let started = std::time::Instant::now();
        let o = ragloop::eval::run_eval_until(&cfg, &cancel).await.unwrap();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "stopped after {:?}",
            started.elapsed()
        );
        assert!(o.interrupted, "the outcome says interrupted");
        let rows = std::fs::read_to_string(env.path("out/results.jsonl")).unwrap_or_default();
        assert!(
            !rows.contains("judge_failed"),
            "no row of judge failures for a cancelled judge: {rows}"
        );
    });
}
