//! Seed 004's cost-analysis table, the first table of both reports: per arm, what a
//! question costs (LLM calls, tokens, dollars, latency p50 and p99) next to what it
//! buys (faithfulness, answer relevancy, must_contain, recall on the hard subset).
//!
//! Columns are read from the metric registry ([`super::metrics::METRICS`]) by name,
//! so a metric that is not defined or applies to no question is `n/a`, never 0 or
//! NaN. Every column but the latency percentiles has a 95% CI ([`super::stats::mean_ci`]:
//! the bootstrap, closed-form above 2,000 questions) over
//! questions (repeats averaged first, see [`super::summary::question_values`]).
//!
//! - `tokens/q`: input + output tokens of a question's LLM calls;
//! - `recall (hard)`: `recall_final` over the hard questions: an item with `hard:
//!   true`, or without a `hard` field and of a kind in `--hard` (default
//!   `paraphrase,multi_hop`); labelled questions only.
use super::dataset::Item;
use super::metrics::metric;
use super::questions::{by_question, question_values, Pairs};
use super::stats::{mean, mean_ci, quantile};
use super::store::Row;
use serde::Serialize;

/// One value of the table.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Cell {
    /// Mean over the questions it applies to (`null`: n/a).
    pub value: Option<f64>,
    /// Questions it applies to.
    pub n: usize,
    /// Bootstrap 95% CI of the mean (`null` for latency percentiles and n/a).
    pub ci: Option<[f64; 2]>,
}

/// One row of the table (summary.json `table`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CostRow {
    /// The arm.
    pub arm: String,
    /// Questions with a row.
    pub questions: usize,
    /// LLM calls per question.
    pub calls: Cell,
    /// Input + output tokens per question.
    pub tokens: Cell,
    /// Cost per question, US dollars.
    pub cost_usd: Cell,
    /// Median run latency, ms.
    pub latency_p50_ms: Cell,
    /// 99th percentile run latency, ms.
    pub latency_p99_ms: Cell,
    /// The `faithfulness` metric (n/a while it is not defined).
    pub faithfulness: Cell,
    /// The `answer_relevancy` metric (n/a while it is not defined).
    pub answer_relevancy: Cell,
    /// The `must_contain` metric.
    pub must_contain: Cell,
    /// `recall_final` over the hard subset.
    pub recall_hard: Cell,
}

/// How a column's values are shown.
#[derive(Clone, Copy, Debug)]
pub enum Format {
    /// By the scale of this metric of the registry (shares as percentages).
    Metric(&'static str),
    /// A plain number with this many decimals.
    Decimals(usize),
}

/// A column accessor.
pub type Get = fn(&CostRow) -> Cell;

/// The columns, in order: (header, format, accessor).
pub const COLUMNS: &[(&str, Format, Get)] = &[
    ("calls/q", Format::Decimals(2), |r| r.calls),
    ("tokens/q", Format::Decimals(0), |r| r.tokens),
    ("cost/q", Format::Decimals(4), |r| r.cost_usd),
    ("latency p50 ms", Format::Decimals(1), |r| r.latency_p50_ms),
    ("latency p99 ms", Format::Decimals(1), |r| r.latency_p99_ms),
    ("faithfulness", Format::Metric("faithfulness"), |r| {
        r.faithfulness
    }),
    (
        "answer relevancy",
        Format::Metric("answer_relevancy"),
        |r| r.answer_relevancy,
    ),
    ("must_contain", Format::Metric("must_contain"), |r| {
        r.must_contain
    }),
    ("recall (hard)", Format::Metric("recall_final"), |r| {
        r.recall_hard
    }),
];

fn over(xs: &[f64]) -> Cell {
    Cell {
        value: mean(xs),
        n: xs.len(),
        ci: mean_ci(xs),
    }
}

/// The row of one arm from its rows (several per question with repeats). Metric
/// columns are the same per-question values, means and CIs as the summary's overall
/// aggregate; the latency percentiles are over runs.
pub fn cost_row(arm: &str, rows: &Pairs<'_>, hard_kinds: &[String]) -> CostRow {
    let grouped = by_question(rows);
    let named = |name: &str, of: &[(&Item, Vec<&Row>)]| {
        metric(name).map_or_else(Cell::default, |d| over(&question_values(d, of)))
    };
    let tokens: Vec<f64> = grouped
        .iter()
        .filter_map(|(_, rs)| {
            let xs: Vec<f64> = rs
                .iter()
                .map(|r| (r.usage.tokens.input_tokens + r.usage.tokens.output_tokens) as f64)
                .collect();
            mean(&xs)
        })
        .collect();
    let hard: Vec<(&Item, Vec<&Row>)> = grouped
        .iter()
        .filter(|(it, _)| it.is_hard(hard_kinds))
        .cloned()
        .collect();
    let latencies: Vec<f64> = rows.iter().map(|(r, _)| r.latency_ms).collect();
    let pct = |q: f64| {
        let v = quantile(&latencies, q);
        Cell {
            value: v,
            n: if v.is_some() { latencies.len() } else { 0 },
            ci: None,
        }
    };
    CostRow {
        arm: arm.to_string(),
        questions: grouped.len(),
        calls: named("calls", &grouped),
        tokens: over(&tokens),
        cost_usd: named("cost_usd", &grouped),
        latency_p50_ms: pct(0.5),
        latency_p99_ms: pct(0.99),
        faithfulness: named("faithfulness", &grouped),
        answer_relevancy: named("answer_relevancy", &grouped),
        must_contain: named("must_contain", &grouped),
        recall_hard: named("recall_final", &hard),
    }
}
