//! Per-question metrics of one eval row, and the table of metric definitions.
//!
//! Every metric is a per-question value (a number, or 0/1 for binary outcomes) that is
//! absent when it does not apply to the question (recall on an unanswerable question);
//! a variant's aggregate is the mean over the questions where it applies
//! ([`super::summary`]), and paired comparisons use the same per-question values
//! ([`super::stats`]).
//!
//! - Token F1 follows the SQuAD v1.1 evaluation script (Rajpurkar et al., 2016,
//!   "SQuAD: 100,000+ Questions for Machine Comprehension of Text"): lowercase, drop
//!   ASCII punctuation, drop the articles `a`, `an`, `the`, split on whitespace; F1 of
//!   the multiset overlap of the answer's and the reference's tokens (both empty: 1;
//!   one empty: 0). A missing answer is the empty string.
//! - A retrieved document matches a labelled source when one path is a suffix of the
//!   other at a `/` boundary: the document's `metadata.source` `ch01-03-hello-cargo.html`
//!   (relative to the corpus root `…/html/book`) matches the label
//!   `book/ch01-03-hello-cargo.html` (relative to the HTML root).
//! - Iteration *i* is the *i*-th execution of a `retrieve` node in the run.
use super::dataset::Item;
use super::store::Row;
use crate::runtime::Status;
use serde::Serialize;

pub use super::store::RowMetrics;

/// How a metric is compared between variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// 0/1 per question: the aggregate is a rate; compared with McNemar's test.
    Binary,
    /// A number per question: the aggregate is a mean; compared by the bootstrap CI
    /// of the paired differences.
    Mean,
}

/// What a metric's values are, which decides how reports show them and which gate
/// values make sense.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// A share from 0 to 1 (binary metrics too): shown as a percentage (`41.2%`),
    /// differences and CIs in percentage points; a gate value must be in 0..=1.
    Share,
    /// A difference of shares, from −1 to 1: shown signed in percentage points
    /// (`+2.5 pp`); a gate value must be in −1..=1.
    ShareDiff,
    /// A plain number shown with this many decimals (differences and CIs: 2).
    Number(usize),
}

impl Scale {
    /// The range a value (and a gate's bound) lies in, for shares.
    pub fn bounds(self) -> Option<(f64, f64)> {
        match self {
            Scale::Share => Some((0.0, 1.0)),
            Scale::ShareDiff => Some((-1.0, 1.0)),
            Scale::Number(_) => None,
        }
    }
}

/// A report table (or plot) a metric appears in; columns follow [`METRICS`] order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// "Answer and retrieval quality" (report.md and report.html).
    Quality,
    /// "Loop, usage and latency" (both reports; the latency percentiles follow).
    Loop,
    /// "By question kind" (both reports).
    ByKind,
    /// The "Quality per variant" bar plot of report.html (shares only).
    Bars,
}

/// What a per-question value may depend on besides the row: the question's labels.
#[derive(Clone, Copy, Debug)]
pub struct Question {
    /// The question has labelled sources.
    pub labelled: bool,
    /// The question's kind is `unanswerable`.
    pub unanswerable: bool,
    /// The question has a reference `answer` (token F1 applies).
    pub reference: bool,
}

impl Question {
    /// The facts of a dataset item.
    pub fn of(item: &Item) -> Question {
        Question {
            labelled: !item.sources.is_empty(),
            unanswerable: item.unanswerable(),
            reference: item.answer.is_some(),
        }
    }
}

/// One metric: everything the summary, the comparisons, the gates and both reports
/// need to know about it. A new metric is one [`METRICS`] entry (plus a
/// [`RowMetrics`] field and its computation in [`row_metrics`] when it is computed
/// per row from the answer or the retrievals).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct MetricDef {
    /// Name used in summary.json, reports and gates.
    pub name: &'static str,
    /// What it measures, for reports.
    pub description: &'static str,
    /// Binary or mean: how it aggregates (a rate or a mean over the questions where
    /// it applies, with a bootstrap CI) and how variants are compared.
    pub kind: Kind,
    /// `Some(true)` when higher is better, `Some(false)` when lower is, `None` when
    /// neither (the verdict then says "higher"/"lower").
    pub higher_is_better: Option<bool>,
    /// Primary metrics decide `--fail-if-worse`.
    pub primary: bool,
    /// How values are shown and which gate values are allowed (not in summary.json).
    #[serde(skip)]
    pub scale: Scale,
    /// The report tables and plots showing it (not in summary.json).
    #[serde(skip)]
    pub tables: &'static [Table],
    /// The per-question value of a row; `None` when the metric does not apply to the
    /// question (not in summary.json).
    #[serde(skip)]
    pub value: fn(&Row, Question) -> Option<f64>,
}

fn b(x: bool) -> f64 {
    if x {
        1.0
    } else {
        0.0
    }
}

// A labelled question whose run never retrieved scores 0, not "absent"; an arm
// whose spec has no retrieve node has no retrieval metric ("absent", n/a).
fn first_or_zero(q: Question, r: &Row, v: &[f64]) -> Option<f64> {
    (q.labelled && r.retrieval).then(|| v.first().copied().unwrap_or(0.0))
}

fn last_or_zero(q: Question, r: &Row, v: &[f64]) -> Option<f64> {
    (q.labelled && r.retrieval).then(|| v.last().copied().unwrap_or(0.0))
}

/// Every per-question metric, in report order.
pub const METRICS: &[MetricDef] = &[
    MetricDef {
        name: "must_contain",
        description: "answer holds every must_contain term (case-insensitive); questions with terms",
        kind: Kind::Binary,
        higher_is_better: Some(true),
        primary: true,
        scale: Scale::Share,
        tables: &[Table::Quality, Table::ByKind, Table::Bars],
        value: |r, _| r.metrics.must_contain_hit.map(b),
    },
    MetricDef {
        name: "must_contain_terms",
        description: "share of must_contain terms found in the answer; questions with terms",
        kind: Kind::Mean,
        higher_is_better: Some(true),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Quality],
        value: |r, _| r.metrics.must_contain_terms,
    },
    MetricDef {
        name: "f1",
        description: "SQuAD token F1 of the answer against the reference answer; questions with a reference answer",
        kind: Kind::Mean,
        higher_is_better: Some(true),
        primary: true,
        scale: Scale::Share,
        tables: &[Table::Quality, Table::ByKind, Table::Bars],
        value: |r, q| q.reference.then_some(r.metrics.f1),
    },
    MetricDef {
        name: "faithfulness",
        description: "share of the answer's statements the judge found supported by the run's context; answers with statements the judge scored (refusals, no statements, judge failures counted apart)",
        kind: Kind::Mean,
        higher_is_better: Some(true),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Quality, Table::ByKind, Table::Bars],
        value: |r, _| r.metrics.judge.as_ref().and_then(|j| j.faithfulness.value),
    },
    MetricDef {
        name: "answer_relevancy",
        description: "how well the answer addresses the question, by the judge, 0..1; answers the judge scored (refusals and judge failures counted apart)",
        kind: Kind::Mean,
        higher_is_better: Some(true),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Quality, Table::ByKind, Table::Bars],
        value: |r, _| r.metrics.judge.as_ref().and_then(|j| j.answer_relevancy.value),
    },
    MetricDef {
        name: "recall_first",
        description: "recall@k of labelled sources in the first retrieval (single shot); labelled questions",
        kind: Kind::Mean,
        higher_is_better: Some(true),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Quality, Table::ByKind, Table::Bars],
        value: |r, q| first_or_zero(q, r, &r.metrics.recall),
    },
    MetricDef {
        name: "recall_final",
        description: "recall@k of labelled sources in the last retrieval of the run; labelled questions",
        kind: Kind::Mean,
        higher_is_better: Some(true),
        primary: true,
        scale: Scale::Share,
        tables: &[Table::Quality, Table::ByKind, Table::Bars],
        value: |r, q| last_or_zero(q, r, &r.metrics.recall),
    },
    MetricDef {
        name: "recall_gain",
        description: "recall_final - recall_first: what the loop's later retrievals added (negative: lost); labelled questions",
        kind: Kind::Mean,
        higher_is_better: Some(true),
        primary: false,
        scale: Scale::ShareDiff,
        tables: &[Table::Quality],
        value: |r, q| {
            last_or_zero(q, r, &r.metrics.recall)
                .zip(first_or_zero(q, r, &r.metrics.recall))
                .map(|(l, f)| l - f)
        },
    },
    MetricDef {
        name: "precision_first",
        description: "share of documents of the first retrieval from a labelled source; labelled questions",
        kind: Kind::Mean,
        higher_is_better: Some(true),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Quality],
        value: |r, q| first_or_zero(q, r, &r.metrics.precision),
    },
    MetricDef {
        name: "precision_final",
        description: "share of documents of the last retrieval from a labelled source; labelled questions",
        kind: Kind::Mean,
        higher_is_better: Some(true),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Quality, Table::Bars],
        value: |r, q| last_or_zero(q, r, &r.metrics.precision),
    },
    MetricDef {
        name: "iterations",
        description: "retrieval passes (mean iterations; passes through the entry node for an arm without retrieval)",
        kind: Kind::Mean,
        higher_is_better: None,
        primary: false,
        scale: Scale::Number(2),
        tables: &[Table::ByKind, Table::Loop],
        value: |r, _| Some(f64::from(r.iterations)),
    },
    MetricDef {
        name: "loop_bound",
        description: "run hit the loop bound: status exhausted or limit",
        kind: Kind::Binary,
        higher_is_better: Some(false),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Loop],
        value: |r, _| Some(b(r.metrics.loop_bound)),
    },
    MetricDef {
        name: "fallback",
        description: "run ended in a fallback node",
        kind: Kind::Binary,
        higher_is_better: None,
        primary: false,
        scale: Scale::Share,
        tables: &[Table::ByKind, Table::Loop],
        value: |r, _| Some(b(r.status == Status::Fallback)),
    },
    MetricDef {
        name: "declined_unanswerable",
        description: "unanswerable question correctly declined",
        kind: Kind::Binary,
        higher_is_better: Some(true),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Quality, Table::ByKind, Table::Bars],
        value: |r, q| q.unanswerable.then(|| b(r.metrics.declined)),
    },
    MetricDef {
        name: "declined_answerable",
        description: "answerable question wrongly declined",
        kind: Kind::Binary,
        higher_is_better: Some(false),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Quality, Table::ByKind],
        value: |r, q| (!q.unanswerable).then(|| b(r.metrics.declined)),
    },
    MetricDef {
        name: "failed",
        description: "run failed (status failed)",
        kind: Kind::Binary,
        higher_is_better: Some(false),
        primary: false,
        scale: Scale::Share,
        tables: &[Table::Loop],
        value: |r, _| Some(b(r.status == Status::Failed)),
    },
    MetricDef {
        name: "calls",
        description: "LLM calls per question (repairs included)",
        kind: Kind::Mean,
        higher_is_better: Some(false),
        primary: false,
        scale: Scale::Number(2),
        tables: &[Table::Loop],
        value: |r, _| Some(r.usage.calls as f64),
    },
    MetricDef {
        name: "input_tokens",
        description: "prompt tokens per question",
        kind: Kind::Mean,
        higher_is_better: Some(false),
        primary: false,
        scale: Scale::Number(2),
        tables: &[Table::Loop],
        value: |r, _| Some(r.usage.tokens.input_tokens as f64),
    },
    MetricDef {
        name: "output_tokens",
        description: "completion tokens per question",
        kind: Kind::Mean,
        higher_is_better: Some(false),
        primary: false,
        scale: Scale::Number(2),
        tables: &[Table::Loop],
        value: |r, _| Some(r.usage.tokens.output_tokens as f64),
    },
    MetricDef {
        name: "cost_usd",
        description: "cost per question, US dollars",
        kind: Kind::Mean,
        higher_is_better: Some(false),
        primary: false,
        scale: Scale::Number(4),
        tables: &[Table::Loop],
        value: |r, _| Some(r.usage.tokens.cost_usd),
    },
    MetricDef {
        name: "latency_ms",
        description: "wall time of the run, milliseconds",
        kind: Kind::Mean,
        higher_is_better: Some(false),
        primary: false,
        scale: Scale::Number(1),
        tables: &[],
        value: |r, _| Some(r.latency_ms),
    },
];

/// The gate-able latency percentiles of [`super::summary::Aggregate::get`], shown
/// like `latency_ms`.
pub const LATENCY_PERCENTILES: [&str; 3] = ["latency_p50_ms", "latency_p95_ms", "latency_p99_ms"];

/// The definition of a metric by name.
pub fn metric(name: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|m| m.name == name)
}

/// The scale of a metric or latency percentile (a plain 2-decimal number for any
/// other name).
pub fn scale(name: &str) -> Scale {
    let name = if LATENCY_PERCENTILES.contains(&name) {
        "latency_ms"
    } else {
        name
    };
    metric(name).map_or(Scale::Number(2), |d| d.scale)
}

/// Whether a metric is a share (a value in 0..1, shown as a percentage; a
/// [`Scale::ShareDiff`] such as `recall_gain` is a difference of shares, in −1..1).
pub fn is_share(name: &str) -> bool {
    matches!(scale(name), Scale::Share | Scale::ShareDiff)
}

/// The metrics of a report table or plot, in [`METRICS`] order.
pub fn columns(table: Table) -> Vec<&'static str> {
    METRICS
        .iter()
        .filter(|m| m.tables.contains(&table))
        .map(|m| m.name)
        .collect()
}

/// Lowercase, ASCII punctuation removed, articles removed, whitespace-split tokens
/// (SQuAD v1.1 `normalize_answer`).
pub fn tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let cleaned: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    cleaned
        .split_whitespace()
        .filter(|t| !matches!(*t, "a" | "an" | "the"))
        .map(str::to_string)
        .collect()
}

/// SQuAD token F1 of `answer` against `reference`, 0..1.
pub fn token_f1(answer: &str, reference: &str) -> f64 {
    let a = tokens(answer);
    let r = tokens(reference);
    if a.is_empty() || r.is_empty() {
        return if a.is_empty() && r.is_empty() {
            1.0
        } else {
            0.0
        };
    }
    let mut counts: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
    for t in &r {
        *counts.entry(t).or_default() += 1;
    }
    let mut common = 0i64;
    for t in &a {
        if let Some(c) = counts.get_mut(t.as_str()) {
            if *c > 0 {
                *c -= 1;
                common += 1;
            }
        }
    }
    if common == 0 {
        return 0.0;
    }
    let p = common as f64 / a.len() as f64;
    let rc = common as f64 / r.len() as f64;
    2.0 * p * rc / (p + rc)
}

/// Whether a retrieved source path and a labelled one name the same page (one is a
/// suffix of the other at a `/` boundary, or they are equal).
pub fn same_source(retrieved: &str, label: &str) -> bool {
    let suffix = |long: &str, short: &str| {
        long == short
            || (long.len() > short.len()
                && long.ends_with(short)
                && long.as_bytes()[long.len() - short.len() - 1] == b'/')
    };
    !retrieved.is_empty()
        && !label.is_empty()
        && (suffix(label, retrieved) || suffix(retrieved, label))
}

/// recall@k and precision of one retrieval pass against the labels: (share of labels
/// matched by some document, share of documents matching some label; 0 for no
/// document).
pub fn recall_precision(docs: &[String], labels: &[String]) -> (f64, f64) {
    if labels.is_empty() {
        return (0.0, 0.0);
    }
    let found = labels
        .iter()
        .filter(|l| docs.iter().any(|d| same_source(d, l)))
        .count();
    let relevant = docs
        .iter()
        .filter(|d| labels.iter().any(|l| same_source(d, l)))
        .count();
    let precision = if docs.is_empty() {
        0.0
    } else {
        relevant as f64 / docs.len() as f64
    };
    (found as f64 / labels.len() as f64, precision)
}

/// Phrases that make an answer a refusal (matched case-insensitively, apostrophes
/// normalised).
pub const REFUSAL_PHRASES: &[&str] = &[
    "could not find",
    "couldn't find",
    "cannot find",
    "can't find",
    "cannot answer",
    "can't answer",
    "unable to answer",
    "unable to find",
    "don't cover",
    "do not cover",
    "does not cover",
    "doesn't cover",
    "not covered",
    "no information",
    "not mentioned",
    "does not mention",
    "doesn't mention",
    "i don't know",
    "i do not know",
];

/// Whether a run declined to answer: status fallback or exhausted (no answer), or an
/// answer holding one of [`REFUSAL_PHRASES`]. A failed or interrupted run did not
/// decline.
pub fn declined(status: Status, answer: Option<&str>) -> bool {
    match status {
        Status::Fallback | Status::Exhausted => true,
        Status::Failed | Status::Interrupted => false,
        Status::Generated | Status::Limit => answer.is_some_and(|a| {
            let a = a.to_lowercase().replace('\u{2019}', "'");
            REFUSAL_PHRASES.iter().any(|p| a.contains(p))
        }),
    }
}

/// Computes a row's metrics from its item and run outcome.
pub fn row_metrics(item: &Item, row: &Row) -> RowMetrics {
    let answer = row.answer.as_deref().unwrap_or("");
    let lower = answer.to_lowercase();
    let (hit, terms) = if item.must_contain.is_empty() {
        (None, None)
    } else {
        let found = item
            .must_contain
            .iter()
            .filter(|t| lower.contains(&t.to_lowercase()))
            .count();
        (
            Some(found == item.must_contain.len()),
            Some(found as f64 / item.must_contain.len() as f64),
        )
    };
    let (mut recall, mut precision) = (Vec::new(), Vec::new());
    if !item.sources.is_empty() {
        for pass in &row.retrieved {
            let (r, p) = recall_precision(pass, &item.sources);
            recall.push(r);
            precision.push(p);
        }
    }
    RowMetrics {
        must_contain_hit: hit,
        must_contain_terms: terms,
        f1: item.answer.as_deref().map_or(0.0, |a| token_f1(answer, a)),
        recall,
        precision,
        declined: declined(row.status, row.answer.as_deref()),
        loop_bound: matches!(row.status, Status::Exhausted | Status::Limit),
        // Filled after the run by the judge and the grader calibration (kept when a
        // row's metrics are recomputed).
        judge: row.metrics.judge.clone(),
        grader: row.metrics.grader,
    }
}

/// The per-question value of metric `name` for a row (None when it does not apply,
/// or for an unknown name).
pub fn value(name: &str, row: &Row, q: Question) -> Option<f64> {
    metric(name).and_then(|d| (d.value)(row, q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_metric_is_defined_once_and_the_tables_follow_the_definitions() {
        let mut names: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len(), "a metric name is defined twice");
        // The report layouts as they were written by hand before the table moved here.
        assert_eq!(
            columns(Table::Quality),
            [
                "must_contain",
                "must_contain_terms",
                "f1",
                "faithfulness",
                "answer_relevancy",
                "recall_first",
                "recall_final",
                "recall_gain",
                "precision_first",
                "precision_final",
                "declined_unanswerable",
                "declined_answerable",
            ]
        );
        assert_eq!(
            columns(Table::ByKind),
            [
                "must_contain",
                "f1",
                "faithfulness",
                "answer_relevancy",
                "recall_first",
                "recall_final",
                "iterations",
                "fallback",
                "declined_unanswerable",
                "declined_answerable",
            ]
        );
        assert_eq!(
            columns(Table::Loop),
            [
                "iterations",
                "loop_bound",
                "fallback",
                "failed",
                "calls",
                "input_tokens",
                "output_tokens",
                "cost_usd",
            ]
        );
        // Bars are drawn on a 0..1 axis: shares only. Binary metrics are shares.
        for m in METRICS {
            if m.tables.contains(&Table::Bars) {
                assert_eq!(m.scale, Scale::Share, "{}", m.name);
            }
            if m.kind == Kind::Binary {
                assert_eq!(m.scale, Scale::Share, "{}", m.name);
            }
        }
        assert!(is_share("recall_gain") && !is_share("calls") && !is_share("nope"));
        assert_eq!(scale("latency_p95_ms"), Scale::Number(1));
        assert_eq!(
            value(
                "nope",
                &dummy_row(),
                Question {
                    labelled: true,
                    unanswerable: false,
                    reference: true,
                }
            ),
            None
        );
    }

    fn dummy_row() -> Row {
        Row {
            variant: "base".into(),
            id: "q".into(),
            repeat: 0,
            kind: "direct".into(),
            status: Status::Generated,
            answer: None,
            sources: vec![],
            path: vec![],
            iterations: 2,
            steps: 2,
            retrieved: vec![],
            retrieval: true,
            usage: Default::default(),
            latency_ms: 0.0,
            error: None,
            metrics: RowMetrics::default(),
        }
    }

    #[test]
    fn squad_normalisation_and_f1() {
        assert_eq!(tokens("The Cargo, a tool!"), vec!["cargo", "tool"]);
        // answer tokens: cargo check is fast (4); reference: cargo check is faster than build (6)
        // common: cargo check is (3) -> p = 3/4, r = 3/6, f1 = 2*.75*.5/1.25 = 0.6
        let f = token_f1("Cargo check is fast.", "cargo check is faster than build");
        assert!((f - 0.6).abs() < 1e-12, "{f}");
        assert_eq!(token_f1("", ""), 1.0);
        assert_eq!(token_f1("x", ""), 0.0);
        // Multiset: a repeated token counts once per occurrence in the reference.
        let f = token_f1("ok ok ok", "ok");
        assert!((f - 0.5).abs() < 1e-12, "{f}");
    }

    #[test]
    fn sources_match_on_path_suffix() {
        assert!(same_source(
            "ch01-03-hello-cargo.html",
            "book/ch01-03-hello-cargo.html"
        ));
        assert!(same_source("/x/html/book/ch01.html", "book/ch01.html"));
        assert!(!same_source("xch01.html", "book/ch01.html"));
        assert!(!same_source("", "book/ch01.html"));
        let docs: Vec<String> = ["a.html", "a.html", "b.html", "c.html"]
            .map(String::from)
            .to_vec();
        let labels: Vec<String> = ["book/a.html", "book/z.html"].map(String::from).to_vec();
        assert_eq!(recall_precision(&docs, &labels), (0.5, 0.5));
    }

    #[test]
    fn declining() {
        assert!(declined(Status::Fallback, Some("whatever")));
        assert!(declined(Status::Exhausted, None));
        assert!(!declined(Status::Failed, None));
        assert!(declined(
            Status::Generated,
            Some("The docs don\u{2019}t cover this.")
        ));
        assert!(!declined(Status::Generated, Some("Use cargo check.")));
    }
}
