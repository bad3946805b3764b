use super::calibration::{calibrate, count, grading_step, verdict};
use super::delta::loop_metrics;
use super::*;
use crate::eval::dataset::Item;
use crate::eval::metrics::row_metrics;
use crate::eval::store::{Row, Usage};
use crate::runtime::trace::RetrievedDoc;
use crate::runtime::Status;
use serde_json::json;

fn item(id: &str, question: &str, sources: &[&str]) -> Item {
    Item {
        id: id.into(),
        question: question.into(),
        answer: None,
        must_contain: vec!["check".into()],
        sources: sources.iter().map(|s| (*s).to_string()).collect(),
        kind: "direct".into(),
        line: 1,
        hard: None,
    }
}

fn row(variant: &str, it: &Item, status: Status, answer: Option<&str>, iterations: u32) -> Row {
    let mut r = Row {
        variant: variant.into(),
        id: it.id.clone(),
        kind: it.kind.clone(),
        status,
        answer: answer.map(str::to_string),
        sources: vec![],
        path: vec![],
        iterations,
        steps: 1,
        retrieved: vec![],
        usage: Usage::default(),
        latency_ms: 1.0,
        error: None,
        metrics: Default::default(),
        repeat: 0,
        retrieval: true,
    };
    r.metrics = row_metrics(it, &r);
    r
}

fn judge(r: &Row, it: &Item, ctx: &[&str], k: usize) -> JudgeRow {
    let ctx: Vec<String> = ctx.iter().map(|s| (*s).to_string()).collect();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(judge_row(&Judge::offline(k), it, r, &ctx))
}

const CTX: &str = "The cargo check command quickly checks your code to make sure it compiles but does not produce an executable.";

#[test]
fn offline_judge_scores_supported_statements_and_counts_the_rest_apart() {
    let it = item("q", "What does cargo check do?", &[]);
    let r = row(
        "base",
        &it,
        Status::Generated,
        Some("Cargo check checks that the code compiles. Cargo check uploads crates to crates.io and signs them."),
        1,
    );
    let j = judge(&r, &it, &[CTX], 1);
    assert_eq!(j.judge, "offline");
    assert_eq!((j.statements, j.supported), (2, 1));
    assert_eq!(j.faithfulness.status, JudgedStatus::Scored);
    assert_eq!(j.faithfulness.value, Some(0.5));
    assert_eq!(j.answer_relevancy.value, Some(1.0));
    assert!(j.agreement.is_none());

    // A refusal is counted apart for both metrics, not scored 0.
    let r = row(
        "base",
        &it,
        Status::Generated,
        Some("I cannot find this in the documentation."),
        1,
    );
    let j = judge(&r, &it, &[CTX], 1);
    assert_eq!(j.faithfulness, Judged::apart(JudgedStatus::Refusal));
    assert_eq!(j.answer_relevancy, Judged::apart(JudgedStatus::Refusal));
    // A fallback is a refusal too, whatever its text.
    let r = row(
        "base",
        &it,
        Status::Fallback,
        Some("Cargo check compiles."),
        1,
    );
    assert_eq!(
        judge(&r, &it, &[CTX], 1).faithfulness.status,
        JudgedStatus::Refusal
    );
    // No answer and an empty answer.
    for a in [None, Some(""), Some("  \n")] {
        let r = row("base", &it, Status::Generated, a, 1);
        let j = judge(&r, &it, &[CTX], 1);
        assert_eq!(j.faithfulness.status, JudgedStatus::NoAnswer, "{a:?}");
        assert_eq!(j.answer_relevancy.status, JudgedStatus::NoAnswer, "{a:?}");
    }
    // No statement: faithfulness apart, relevancy still scored.
    let r = row("base", &it, Status::Generated, Some("Yes. It is."), 1);
    let j = judge(&r, &it, &[CTX], 1);
    assert_eq!(j.faithfulness.status, JudgedStatus::NoStatements);
    assert_eq!(j.answer_relevancy.status, JudgedStatus::Scored);
}

#[test]
fn counts_never_put_a_nan_in_a_mean() {
    let it = item("q", "What does cargo check do?", &[]);
    let mut rows = vec![
        row("base", &it, Status::Generated, Some("I cannot find it."), 1),
        row("base", &it, Status::Failed, None, 1),
    ];
    for r in &mut rows {
        r.metrics.judge = Some(judge(r, &it, &[CTX], 1));
    }
    let mut failed = rows[0].clone();
    failed.metrics.judge.as_mut().unwrap().faithfulness = Judged::failed("HTTP 500");
    rows.push(failed);
    let c = counts(&rows);
    assert_eq!(c.judge.as_deref(), Some("offline"));
    assert_eq!(c.statuses["faithfulness"]["refusal"], 1);
    assert_eq!(c.statuses["faithfulness"]["no_answer"], 1);
    assert_eq!(c.statuses["faithfulness"]["judge_failed"], 1);
    assert_eq!(c.statuses["faithfulness"]["scored"], 0);
    assert!(!c.statuses["answer_relevancy"].contains_key("no_statements"));
    let pairs: Vec<(&Row, &Item)> = rows.iter().map(|r| (r, &it)).collect();
    let a = crate::eval::summary::aggregate(&pairs, true);
    assert_eq!(a.get("faithfulness"), None);
    assert_eq!(a.metrics["faithfulness"].n, 0);
    assert!(a
        .metrics
        .values()
        .all(|m| m.value.is_none_or(f64::is_finite)));
    // A non-finite score is a failure, never a value.
    assert_eq!(Judged::scored(f64::NAN).status, JudgedStatus::JudgeFailed);
}

#[test]
fn repeats_report_agreement() {
    let it = item("q", "What does cargo check do?", &[]);
    let r = row(
        "base",
        &it,
        Status::Generated,
        Some("Cargo check checks that the code compiles."),
        1,
    );
    let j = judge(&r, &it, &[CTX], 3);
    let a = j.agreement.unwrap();
    assert_eq!(a.samples, 3);
    // The offline judge is deterministic: full agreement, no spread.
    assert_eq!(a.verdicts, Some(1.0));
    assert_eq!(a.faithfulness_spread, Some(0.0));
    // By hand: samples [T,T,F,F], [T,F,F,F], [T,T,F,T]: pairs agree 3/4, 2/4, 3/4.
    let v = vec![
        vec![true, true, false, false],
        vec![true, false, false, false],
        vec![true, true, false, true],
    ];
    let a = agreement(3, &v, &[0.2, 0.9]);
    assert!((a.verdicts.unwrap() - (0.75 + 0.5 + 0.75) / 3.0).abs() < 1e-12);
    // Faithfulness 0.5, 0.25, 0.75: spread 0.5; relevancy 0.9 - 0.2.
    assert!((a.faithfulness_spread.unwrap() - 0.5).abs() < 1e-12);
    assert!((a.relevancy_spread.unwrap() - 0.7).abs() < 1e-12);
    assert_eq!(agreement(2, &[vec![true]], &[0.5]).verdicts, None);
}

fn doc(source: &str, output: serde_json::Value) -> RetrievedDoc {
    RetrievedDoc {
        id: format!("id-{source}"),
        source: source.into(),
        output: Some(output),
    }
}

#[test]
fn grader_verdicts_are_found_by_shape_not_by_name() {
    assert_eq!(
        verdict(&json!({"binary_score": "Yes", "confidence": 0.3})),
        Some(true)
    );
    assert_eq!(
        verdict(&json!({"relevant": false, "reason": "off topic"})),
        Some(false)
    );
    assert_eq!(verdict(&json!("no")), Some(false));
    assert_eq!(verdict(&json!({"a": true, "b": false})), None, "ambiguous");
    assert_eq!(verdict(&json!({"summary": "text"})), None);
    let docs = vec![
        doc("a.html", json!({"binary_score": "yes"})),
        doc("b.html", json!(false)),
    ];
    assert_eq!(
        grading_step("map", Some(&docs)),
        Some(vec![("a.html".into(), true), ("b.html".into(), false)])
    );
    assert_eq!(grading_step("llm", Some(&docs)), None);
    assert_eq!(grading_step("retrieve", Some(&docs)), None);
    // A map over documents whose outputs are not verdicts (a summarizer) is no grader.
    let summaries = vec![doc("a.html", json!("a summary"))];
    assert_eq!(grading_step("map", Some(&summaries)), None);
    // Retrieved documents carry no output.
    let mut plain = docs.clone();
    plain[0].output = None;
    assert_eq!(grading_step("map", Some(&plain)), None);
}

#[test]
fn calibration_on_a_constructed_trace() {
    // Two labelled questions and one without labels, as a grader saw them.
    let labelled = item("q1", "q", &["book/a.html"]);
    let unlabelled = item("q2", "q", &[]);
    let v1 = vec![
        ("/x/book/a.html".to_string(), true), // yes, relevant
        ("c.html".to_string(), true),         // yes, irrelevant
        ("a.html".to_string(), false),        // no, relevant
        ("d.html".to_string(), false),        // no, irrelevant
    ];
    let c1 = count(&v1, &labelled.sources);
    assert_eq!((c1.yes, c1.no), (2, 2));
    assert_eq!(
        (c1.yes_relevant, c1.yes_irrelevant, c1.no_relevant),
        (Some(1), Some(1), Some(1))
    );
    let c2 = count(&[("e.html".into(), true)], &unlabelled.sources);
    assert_eq!(c2.yes_relevant, None);
    let mut r1 = row("base", &labelled, Status::Generated, Some("x"), 1);
    r1.metrics.grader = Some(c1);
    let mut r2 = row("base", &unlabelled, Status::Generated, Some("x"), 1);
    r2.metrics.grader = Some(c2);
    let r3 = row("base", &unlabelled, Status::Generated, Some("x"), 1);
    let c = calibrate([&r1, &r2, &r3]).unwrap();
    assert_eq!(
        (c.rows, c.verdicts, c.yes, c.labelled_verdicts, c.relevant),
        (2, 5, 3, 4, 2)
    );
    assert_eq!(c.precision, Some(0.5));
    assert_eq!(c.recall, Some(0.5));
    assert_eq!(c.yes_rate, Some(0.6));
    assert!(c.warning.is_none());
    assert!(calibrate([&r3]).is_none());
    // A grader that says yes to everything is flagged (and one that says no).
    for yes in [true, false] {
        let v: Vec<(String, bool)> = (0..12).map(|i| (format!("p{i}.html"), yes)).collect();
        let mut r = row("base", &labelled, Status::Generated, Some("x"), 1);
        r.metrics.grader = Some(count(&v, &labelled.sources));
        let c = calibrate([&r]).unwrap();
        let w = c.warning.expect("skewed grader flagged");
        assert!(
            w.contains(if yes {
                "said yes to 100.0% of 12"
            } else {
                "said no to 100.0% of 12"
            }),
            "{w}"
        );
    }
    // Below 10 verdicts no warning.
    let mut r = row("base", &labelled, Status::Generated, Some("x"), 1);
    r.metrics.grader = Some(count(&[("a.html".into(), true)], &labelled.sources));
    assert!(calibrate([&r]).unwrap().warning.is_none());
}

#[test]
fn iteration_delta_pairs_looped_questions_with_the_single_shot_arm() {
    let items: Vec<Item> = (0..12)
        .map(|i| item(&format!("q{i}"), "What does cargo check do?", &[]))
        .collect();
    let mut rows = Vec::new();
    for (i, it) in items.iter().enumerate() {
        // single: one pass, never says "check"; loop: 3 passes on even questions,
        // answering with "check" there.
        rows.push(row(
            "single",
            it,
            Status::Generated,
            Some("It compiles."),
            1,
        ));
        let looped = i % 2 == 0;
        rows.push(row(
            "loop",
            it,
            Status::Generated,
            Some(if looped {
                "Cargo check checks."
            } else {
                "It compiles."
            }),
            if looped { 3 } else { 1 },
        ));
    }
    let arms = vec!["loop".to_string(), "single".to_string()];
    let l = loop_metrics(&arms, &items, &rows, None);
    assert_eq!(l.single_shot.as_deref(), Some("single"));
    assert_eq!(l.chosen_by.as_deref(), Some("at most one iteration"));
    assert_eq!(l.deltas.len(), 1);
    let d = &l.deltas[0];
    assert_eq!((d.arm.as_str(), d.questions), ("loop", 6));
    let mc = d
        .metrics
        .iter()
        .find(|m| m.metric == "must_contain")
        .unwrap();
    assert_eq!(
        (mc.n, mc.single_shot, mc.arm, mc.diff),
        (6, Some(0.0), Some(1.0), Some(1.0))
    );
    assert_eq!(mc.ci, Some([1.0, 1.0]));
    // No judge ran on these rows: faithfulness has no pair.
    let f = d
        .metrics
        .iter()
        .find(|m| m.metric == "faithfulness")
        .unwrap();
    assert_eq!((f.n, f.ci), (0, None));
    // The flag wins; with no single-shot arm there is no delta.
    let l = loop_metrics(&arms, &items, &rows, Some("loop"));
    assert_eq!(l.deltas[0].arm, "single");
    assert_eq!(l.deltas[0].questions, 0);
    let only_loop: Vec<Row> = rows
        .iter()
        .filter(|r| r.variant == "loop")
        .cloned()
        .collect();
    assert!(loop_metrics(&arms, &items, &only_loop, None)
        .single_shot
        .is_none());
}

#[test]
fn mixed_paired_differences_get_a_bootstrap_interval() {
    let items: Vec<Item> = (0..20)
        .map(|i| item(&format!("q{i}"), "What does cargo check do?", &[]))
        .collect();
    let mut rows = Vec::new();
    for (i, it) in items.iter().enumerate() {
        rows.push(row(
            "single",
            it,
            Status::Generated,
            Some(if i % 4 == 0 { "check" } else { "no" }),
            1,
        ));
        rows.push(row(
            "loop",
            it,
            Status::Generated,
            Some(if i % 3 == 0 { "no" } else { "check" }),
            2,
        ));
    }
    let l = loop_metrics(&["single".into(), "loop".into()], &items, &rows, None);
    let mc = &l.deltas[0]
        .metrics
        .iter()
        .find(|m| m.metric == "must_contain")
        .unwrap();
    let diffs: Vec<f64> = (0..20)
        .map(|i| f64::from(u8::from(i % 3 != 0)) - f64::from(u8::from(i % 4 == 0)))
        .collect();
    assert_eq!(mc.diff, crate::eval::stats::mean(&diffs));
    assert_eq!(
        mc.ci,
        crate::eval::stats::bootstrap_ci(&diffs, crate::eval::stats::SEED)
    );
    let [lo, hi] = mc.ci.unwrap();
    assert!(lo < mc.diff.unwrap() && mc.diff.unwrap() < hi);
}
