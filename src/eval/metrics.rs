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
use serde::{Deserialize, Serialize};

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

/// One metric.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct MetricDef {
    /// Name used in summary.json, reports and gates.
    pub name: &'static str,
    /// What it measures, for reports.
    pub description: &'static str,
    /// Binary or mean.
    pub kind: Kind,
    /// `Some(true)` when higher is better, `Some(false)` when lower is, `None` when
    /// neither (the verdict then says "higher"/"lower").
    pub higher_is_better: Option<bool>,
    /// Primary metrics decide `--fail-if-worse`.
    pub primary: bool,
}

const fn def(
    name: &'static str,
    description: &'static str,
    kind: Kind,
    higher_is_better: Option<bool>,
    primary: bool,
) -> MetricDef {
    MetricDef {
        name,
        description,
        kind,
        higher_is_better,
        primary,
    }
}

/// Every per-question metric, in report order.
pub const METRICS: &[MetricDef] = &[
    def(
        "must_contain",
        "answer holds every must_contain term (case-insensitive); questions with terms",
        Kind::Binary,
        Some(true),
        true,
    ),
    def(
        "must_contain_terms",
        "share of must_contain terms found in the answer; questions with terms",
        Kind::Mean,
        Some(true),
        false,
    ),
    def(
        "f1",
        "SQuAD token F1 of the answer against the reference answer; all questions",
        Kind::Mean,
        Some(true),
        true,
    ),
    def(
        "recall_first",
        "recall@k of labelled sources in the first retrieval (single shot); labelled questions",
        Kind::Mean,
        Some(true),
        false,
    ),
    def(
        "recall_final",
        "recall@k of labelled sources in the last retrieval of the run; labelled questions",
        Kind::Mean,
        Some(true),
        true,
    ),
    def(
        "recall_gain",
        "recall_final - recall_first: what the loop's later retrievals added (negative: lost); labelled questions",
        Kind::Mean,
        Some(true),
        false,
    ),
    def(
        "precision_first",
        "share of documents of the first retrieval from a labelled source; labelled questions",
        Kind::Mean,
        Some(true),
        false,
    ),
    def(
        "precision_final",
        "share of documents of the last retrieval from a labelled source; labelled questions",
        Kind::Mean,
        Some(true),
        false,
    ),
    def(
        "iterations",
        "passes through the entry node (mean iterations)",
        Kind::Mean,
        None,
        false,
    ),
    def(
        "loop_bound",
        "run hit the loop bound: status exhausted or limit",
        Kind::Binary,
        Some(false),
        false,
    ),
    def(
        "fallback",
        "run ended in a fallback node",
        Kind::Binary,
        None,
        false,
    ),
    def(
        "declined_unanswerable",
        "unanswerable question correctly declined",
        Kind::Binary,
        Some(true),
        false,
    ),
    def(
        "declined_answerable",
        "answerable question wrongly declined",
        Kind::Binary,
        Some(false),
        false,
    ),
    def(
        "failed",
        "run failed (status failed)",
        Kind::Binary,
        Some(false),
        false,
    ),
    def(
        "calls",
        "LLM calls per question (repairs included)",
        Kind::Mean,
        Some(false),
        false,
    ),
    def(
        "input_tokens",
        "prompt tokens per question",
        Kind::Mean,
        Some(false),
        false,
    ),
    def(
        "output_tokens",
        "completion tokens per question",
        Kind::Mean,
        Some(false),
        false,
    ),
    def(
        "cost_usd",
        "cost per question, US dollars",
        Kind::Mean,
        Some(false),
        false,
    ),
    def(
        "latency_ms",
        "wall time of the run, milliseconds",
        Kind::Mean,
        Some(false),
        false,
    ),
];

/// The definition of a metric by name.
pub fn metric(name: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|m| m.name == name)
}

/// Whether a metric is a share (a value in 0..1, shown as a percentage; `recall_gain`
/// is a difference of shares, in −1..1): binary metrics, `must_contain_terms`, `f1`,
/// recall and precision.
pub fn is_share(name: &str) -> bool {
    metric(name).is_some_and(|d| {
        d.kind == Kind::Binary
            || matches!(
                d.name,
                "must_contain_terms"
                    | "f1"
                    | "recall_first"
                    | "recall_final"
                    | "recall_gain"
                    | "precision_first"
                    | "precision_final"
            )
    })
}

/// Per-question metrics stored in each results.jsonl row (`metrics` key).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowMetrics {
    /// Every must_contain term is in the answer (`null` when the item has none).
    pub must_contain_hit: Option<bool>,
    /// Share of must_contain terms in the answer (`null` when the item has none).
    pub must_contain_terms: Option<f64>,
    /// SQuAD token F1 against the reference answer, 0..1.
    pub f1: f64,
    /// recall@k of each retrieval pass, in order (empty when the item has no labelled
    /// source).
    pub recall: Vec<f64>,
    /// Context precision of each retrieval pass (same shape as `recall`).
    pub precision: Vec<f64>,
    /// The run declined to answer (see [`declined`]).
    pub declined: bool,
    /// Status exhausted or limit.
    pub loop_bound: bool,
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
        f1: token_f1(answer, &item.answer),
        recall,
        precision,
        declined: declined(row.status, row.answer.as_deref()),
        loop_bound: matches!(row.status, Status::Exhausted | Status::Limit),
    }
}

/// The per-question value of metric `name` for a row (None when it does not apply).
/// `labelled` says whether the item has labelled sources, `unanswerable` its kind.
pub fn value(name: &str, row: &Row, labelled: bool, unanswerable: bool) -> Option<f64> {
    let m = &row.metrics;
    let b = |x: bool| if x { 1.0 } else { 0.0 };
    // A labelled question whose run never retrieved scores 0, not "absent".
    let first_or_zero = |v: &[f64]| labelled.then(|| v.first().copied().unwrap_or(0.0));
    let last_or_zero = |v: &[f64]| labelled.then(|| v.last().copied().unwrap_or(0.0));
    match name {
        "must_contain" => m.must_contain_hit.map(b),
        "must_contain_terms" => m.must_contain_terms,
        "f1" => Some(m.f1),
        "recall_first" => first_or_zero(&m.recall),
        "recall_final" => last_or_zero(&m.recall),
        "recall_gain" => last_or_zero(&m.recall)
            .zip(first_or_zero(&m.recall))
            .map(|(l, f)| l - f),
        "precision_first" => first_or_zero(&m.precision),
        "precision_final" => last_or_zero(&m.precision),
        "iterations" => Some(f64::from(row.iterations)),
        "loop_bound" => Some(b(m.loop_bound)),
        "fallback" => Some(b(row.status == Status::Fallback)),
        "declined_unanswerable" => unanswerable.then(|| b(m.declined)),
        "declined_answerable" => (!unanswerable).then(|| b(m.declined)),
        "failed" => Some(b(row.status == Status::Failed)),
        "calls" => Some(row.usage.calls as f64),
        "input_tokens" => Some(row.usage.tokens.input_tokens as f64),
        "output_tokens" => Some(row.usage.tokens.output_tokens as f64),
        "cost_usd" => Some(row.usage.tokens.cost_usd),
        "latency_ms" => Some(row.latency_ms),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
