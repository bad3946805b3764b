//! Aggregates per variant (overall and by kind) and paired comparisons between
//! variants: the content of summary.json.
//!
//! summary.json schema:
//!
//! ```text
//! {
//!   "spec": path, "dataset": path, "questions": n (usable dataset lines),
//!   "dataset_errors": [{"line", "message"}],
//!   "variants": [names, in order],
//!   "metrics": [{"name", "description", "kind": "binary"|"mean", "higher_is_better": bool|null, "primary": bool}],
//!   "results": {variant: {
//!       "rows": n, "missing": n (pairs without a row, e.g. an interrupted eval),
//!       "overall": Aggregate, "by_kind": {kind: Aggregate}}},
//!   "comparisons": [{"a", "b", "metrics": [{"metric", "n" (paired questions), "mean_a",
//!       "mean_b", "diff" (b - a), "ci" ([low, high] of the mean difference),
//!       "mcnemar": {"b", "c", "p", "exact"} (binary metrics only), "verdict"}]}],
//!   "gates": [{"gate", "passed", "reason"}],
//!   "partial": bool (some selected pair has no row),
//!   "interrupted": {"pairs", "with_rows", "new_rows", "cancelled", "not_started"}
//!       (only when the eval was interrupted by SIGINT/SIGTERM),
//!   "shard": {"index", "count"} (only for `--shard I/N`: the figures cover that slice)
//! }
//! Aggregate = {"n": questions, "statuses": {status: n},
//!   "metrics": {name: {"value": mean or null, "n": questions it applies to, "ci": [low, high] or null}},
//!   "latency_ms": {"p50", "p95", "p99", "max"}, "totals": {"calls", "input_tokens", "output_tokens", "cost_usd"},
//!   "per_iteration": [{"iteration", "n", "recall", "precision"}],
//!   "iterations_histogram": [[iterations, questions], ...],
//!   "judge": {"judge", "statuses": {metric: {status: n}}, "agreement"?},
//!   "grader": {"rows", "verdicts", "yes", "yes_rate", "labelled_verdicts", "relevant",
//!       "precision", "recall", "warning"?} or null}
//! "loop": {"single_shot", "chosen_by", "deltas": [{"arm", "questions", "metrics":
//!   [{"metric", "n", "single_shot", "arm", "diff", "ci"}]}]} (see super::judge::delta)
//! ```
//!
//! Verdicts say how `b` compares with `a`: `better` / `worse` when the difference is
//! significant at α = 0.05 (McNemar p < 0.05 for binary metrics, the bootstrap 95% CI
//! of the mean difference — closed-form above 2,000 pairs, see [`super::stats`] —
//! excluding 0 for the others) and the metric has a direction;
//! `higher` / `lower` for a significant difference on a metric without one; `no
//! significant difference` otherwise; `insufficient data` when fewer than
//! [`MIN_PAIRED`](super::stats::MIN_PAIRED) (10) questions are paired.
use super::dataset::{Item, LineError};
use super::metrics::{Kind, MetricDef, Question, LATENCY_PERCENTILES, METRICS};
use super::stats::{
    mcnemar, mean, mean_ci, paired_ci, par_map, quantile, McNemar, ALPHA, MIN_PAIRED,
};
use super::store::Row;
use indexmap::IndexMap;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One aggregated metric.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MetricValue {
    /// Mean over the questions it applies to (`null` when none).
    pub value: Option<f64>,
    /// Questions it applies to.
    pub n: usize,
    /// Bootstrap 95% CI of the mean (overall aggregates only).
    pub ci: Option<[f64; 2]>,
}

/// Latency percentiles, ms.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Slowest.
    pub max: Option<f64>,
}

/// Usage totals: the rows' usage summed.
pub type Totals = super::store::Usage;

/// Retrieval quality of the i-th retrieval pass, over the labelled questions whose
/// run reached it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct IterationStat {
    /// 1-based pass number.
    pub iteration: usize,
    /// Questions that reached it.
    pub n: usize,
    /// Mean recall@k.
    pub recall: f64,
    /// Mean context precision.
    pub precision: f64,
}

/// Metrics of a set of rows.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Aggregate {
    /// Questions (rows).
    pub n: usize,
    /// Rows per status.
    pub statuses: BTreeMap<String, usize>,
    /// Every metric of [`METRICS`], by name.
    pub metrics: IndexMap<String, MetricValue>,
    /// Latency percentiles.
    pub latency_ms: Latency,
    /// Usage totals.
    pub totals: Totals,
    /// Per retrieval pass.
    pub per_iteration: Vec<IterationStat>,
    /// (iterations, questions), ascending.
    pub iterations_histogram: Vec<(u32, usize)>,
    /// The judge metrics' rows per status (counted apart) and agreement.
    pub judge: super::judge::JudgeCounts,
    /// The document grader against the labels (`null` when no run graded documents).
    pub grader: Option<super::judge::calibration::Calibration>,
}

impl Aggregate {
    /// A gate-able value by name: any [`METRICS`] name, or `latency_p50_ms`,
    /// `latency_p95_ms`, `latency_p99_ms`.
    pub fn get(&self, name: &str) -> Option<f64> {
        match name {
            "latency_p50_ms" => self.latency_ms.p50,
            "latency_p95_ms" => self.latency_ms.p95,
            "latency_p99_ms" => self.latency_ms.p99,
            _ => self.metrics.get(name).and_then(|m| m.value),
        }
    }
}

/// Names accepted by [`Aggregate::get`].
pub fn gate_metric_names() -> Vec<&'static str> {
    METRICS
        .iter()
        .map(|m| m.name)
        .chain(LATENCY_PERCENTILES)
        .collect()
}

pub use super::questions::{by_question, question_values, Pairs};

/// Aggregates rows; `with_ci` adds bootstrap CIs to the metrics. A metric's value,
/// `n` and CI are over questions (each question's repeats averaged first, see
/// [`question_values`]); statuses, latency, totals and histograms count runs.
pub fn aggregate(rows: &Pairs<'_>, with_ci: bool) -> Aggregate {
    let mut metrics = IndexMap::new();
    let grouped = by_question(rows);
    let values: Vec<Vec<f64>> = METRICS
        .iter()
        .map(|d| question_values(d, &grouped))
        .collect();
    let cis = if with_ci {
        par_map(&values, Vec::len, |xs| mean_ci(xs))
    } else {
        vec![None; values.len()]
    };
    for ((d, xs), ci) in METRICS.iter().zip(&values).zip(cis) {
        metrics.insert(
            d.name.to_string(),
            MetricValue {
                value: mean(xs),
                n: xs.len(),
                ci,
            },
        );
    }
    let mut statuses = BTreeMap::new();
    let totals: Totals = rows.iter().map(|(r, _)| r.usage).sum();
    let mut hist: BTreeMap<u32, usize> = BTreeMap::new();
    let mut lat = Vec::with_capacity(rows.len());
    let mut passes: Vec<(usize, f64, f64)> = Vec::new();
    for (r, it) in rows {
        *statuses.entry(r.status.as_str().to_string()).or_default() += 1;
        *hist.entry(r.iterations).or_default() += 1;
        lat.push(r.latency_ms);
        if !it.sources.is_empty() {
            for (i, (rc, pr)) in r
                .metrics
                .recall
                .iter()
                .zip(&r.metrics.precision)
                .enumerate()
            {
                if passes.len() <= i {
                    passes.push((0, 0.0, 0.0));
                }
                passes[i].0 += 1;
                passes[i].1 += rc;
                passes[i].2 += pr;
            }
        }
    }
    Aggregate {
        n: rows.len(),
        statuses,
        metrics,
        latency_ms: Latency {
            p50: quantile(&lat, 0.5),
            p95: quantile(&lat, 0.95),
            p99: quantile(&lat, 0.99),
            max: quantile(&lat, 1.0),
        },
        totals,
        per_iteration: passes
            .into_iter()
            .enumerate()
            .map(|(i, (n, r, p))| IterationStat {
                iteration: i + 1,
                n,
                recall: r / n as f64,
                precision: p / n as f64,
            })
            .collect(),
        iterations_histogram: hist.into_iter().collect(),
        judge: super::judge::counts(rows.iter().map(|(r, _)| *r)),
        grader: super::judge::calibration::calibrate(rows.iter().map(|(r, _)| *r)),
    }
}

/// One metric of a paired comparison.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MetricComparison {
    /// Metric name.
    pub metric: String,
    /// Questions with a value under both variants.
    pub n: usize,
    /// Mean under `a` over those questions.
    pub mean_a: Option<f64>,
    /// Mean under `b`.
    pub mean_b: Option<f64>,
    /// Mean of the per-question differences b − a.
    pub diff: Option<f64>,
    /// Bootstrap 95% CI of `diff`.
    pub ci: Option<[f64; 2]>,
    /// McNemar's test (binary metrics).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcnemar: Option<McNemar>,
    /// `better`, `worse`, `higher`, `lower`, `no significant difference` (b vs a), or
    /// `insufficient data` when `n` < [`MIN_PAIRED`].
    pub verdict: String,
}

/// Every metric compared between two variants.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Comparison {
    /// First variant.
    pub a: String,
    /// Second variant (the verdicts describe it).
    pub b: String,
    /// One entry per metric of [`METRICS`].
    pub metrics: Vec<MetricComparison>,
}

/// The verdict text for no significant difference.
pub const NO_DIFFERENCE: &str = "no significant difference";
/// The verdict text when fewer than [`MIN_PAIRED`] questions are paired.
pub const INSUFFICIENT: &str = "insufficient data";

fn verdict(d: &MetricDef, significant: bool, diff: f64) -> String {
    if !significant || diff == 0.0 {
        return NO_DIFFERENCE.into();
    }
    let up = diff > 0.0;
    match d.higher_is_better {
        Some(h) => if up == h { "better" } else { "worse" }.into(),
        None => if up { "higher" } else { "lower" }.into(),
    }
}

/// Compares `b` with `a` question by question (questions with a row under both).
/// With repeats, each side's value of a question is the mean over its repeats, and a
/// binary metric whose per-question values are not all 0 or 1 is compared by the
/// bootstrap CI like a mean (McNemar's test needs one outcome per question).
pub fn compare(a: &str, b: &str, rows_a: &Pairs<'_>, rows_b: &Pairs<'_>) -> Comparison {
    let ga = by_question(rows_a);
    let gb = by_question(rows_b);
    let by_id: HashMap<&str, &Vec<&Row>> = gb.iter().map(|(it, rs)| (it.id.as_str(), rs)).collect();
    let paired: Vec<(&Vec<&Row>, &Vec<&Row>, &Item)> = ga
        .iter()
        .filter_map(|(it, ra)| by_id.get(it.id.as_str()).map(|rb| (ra, *rb, *it)))
        .collect();
    let side = |d: &MetricDef, rs: &[&Row], q: Question| {
        let xs: Vec<f64> = rs.iter().filter_map(|r| (d.value)(r, q)).collect();
        mean(&xs)
    };
    let sides: Vec<(Vec<f64>, Vec<f64>)> = METRICS
        .iter()
        .map(|d| {
            let mut xa = Vec::new();
            let mut xb = Vec::new();
            for (ra, rb, it) in &paired {
                let q = Question::of(it);
                if let (Some(va), Some(vb)) = (side(d, ra, q), side(d, rb, q)) {
                    xa.push(va);
                    xb.push(vb);
                }
            }
            (xa, xb)
        })
        .collect();
    let cis = par_map(&sides, |(xa, _)| xa.len(), |(xa, xb)| paired_ci(xa, xb));
    let metrics = METRICS
        .iter()
        .zip(sides)
        .zip(cis)
        .map(|((d, (xa, xb)), ci)| {
            let outcomes = xa.iter().chain(&xb).all(|x| *x == 0.0 || *x == 1.0);
            let diffs: Vec<f64> = xa.iter().zip(&xb).map(|(x, y)| y - x).collect();
            let diff = mean(&diffs);
            let (test, significant) = match d.kind {
                Kind::Binary if outcomes => {
                    let bb = xa
                        .iter()
                        .zip(&xb)
                        .filter(|(x, y)| **x > 0.5 && **y < 0.5)
                        .count();
                    let cc = xa
                        .iter()
                        .zip(&xb)
                        .filter(|(x, y)| **x < 0.5 && **y > 0.5)
                        .count();
                    let t = mcnemar(bb as u64, cc as u64);
                    (Some(t), t.p < ALPHA)
                }
                Kind::Binary | Kind::Mean => {
                    (None, ci.is_some_and(|[lo, hi]| lo > 0.0 || hi < 0.0))
                }
            };
            MetricComparison {
                metric: d.name.to_string(),
                n: diffs.len(),
                mean_a: mean(&xa),
                mean_b: mean(&xb),
                diff,
                ci,
                mcnemar: test,
                verdict: if diffs.len() < MIN_PAIRED {
                    INSUFFICIENT.into()
                } else {
                    verdict(d, significant, diff.unwrap_or(0.0))
                },
            }
        })
        .collect();
    Comparison {
        a: a.to_string(),
        b: b.to_string(),
        metrics,
    }
}

/// A variant's results.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct VariantResults {
    /// Rows of this variant.
    pub rows: usize,
    /// Dataset questions without a row.
    pub missing: usize,
    /// All its rows.
    pub overall: Aggregate,
    /// Per question kind, kinds in first-seen dataset order.
    pub by_kind: IndexMap<String, Aggregate>,
}

/// Outcome of one CI gate.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GateOutcome {
    /// The gate as given on the command line.
    pub gate: String,
    /// Whether it passed.
    pub passed: bool,
    /// One line: the value against the bound, or the significant regressions.
    pub reason: String,
}

/// The whole summary.json.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The spec path.
    pub spec: String,
    /// The dataset path.
    pub dataset: String,
    /// Usable dataset questions.
    pub questions: usize,
    /// Bad dataset lines.
    pub dataset_errors: Vec<LineError>,
    /// Variants, in order.
    pub variants: Vec<String>,
    /// The metric definitions.
    pub metrics: &'static [MetricDef],
    /// Per variant.
    pub results: IndexMap<String, VariantResults>,
    /// Every pair of variants (`a` before `b` in the variant order).
    pub comparisons: Vec<Comparison>,
    /// Gate outcomes (empty without gates).
    pub gates: Vec<GateOutcome>,
    /// The CLI settings the rows were run under (also in settings.json).
    pub settings: super::settings::Settings,
    /// Mean iterations' companion: the single-shot arm and each other arm's iteration
    /// delta ([`super::judge::delta`]).
    #[serde(rename = "loop")]
    pub loop_metrics: super::judge::delta::LoopMetrics,
    /// Whether some selected (variant, question) pair has no row: the figures cover
    /// part of the dataset only (an interrupted eval; `--resume` completes it).
    pub partial: bool,
    /// Set when this invocation was interrupted (SIGINT/SIGTERM, or a library
    /// caller's cancellation token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interruption>,
    /// With several specs: each arm's spec and variant, in arm order (empty, and not
    /// written, with one spec).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arms: Vec<ArmInfo>,
    /// `--repeats` (not written when 1).
    #[serde(skip_serializing_if = "is_one")]
    pub repeats: u32,
    /// `--shard I/N`: the figures cover that slice of the pairs (`missing` counts
    /// the slice's pairs only; gates are left to `ragloop eval merge`). Not written
    /// for a whole eval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::shard::Shard>,
    /// The question kinds of the hard subset (`--hard`; items' `hard` field decides
    /// first).
    pub hard_kinds: Vec<String>,
    /// Seed 004's cost-analysis table, one row per arm ([`super::table`]).
    pub table: Vec<super::table::CostRow>,
    /// Per arm, how much a question's outcome varies across repeats (only with
    /// `--repeats` above 1; [`super::spread`]).
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub spread: IndexMap<String, super::spread::Spread>,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// One arm of an eval over several specs.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ArmInfo {
    /// The arm's name (`STEM` or `STEM:VARIANT`).
    pub name: String,
    /// Its spec, as given.
    pub spec: String,
    /// Its variant (`base`: the spec without a variant).
    pub variant: String,
}

/// How [`summarize_with`] reads the rows.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--repeats`: rows with a repeat index at or above it are ignored, and a
    /// (variant, question) pair is complete with this many rows.
    pub repeats: u32,
    /// The kinds of the hard subset.
    pub hard_kinds: Vec<String>,
    /// The slice the rows cover (`--shard`): a variant's `missing` counts its pairs
    /// in the slice only. `None`: every pair.
    pub shard: Option<super::shard::Shard>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            shard: None,
            repeats: 1,
            hard_kinds: super::DEFAULT_HARD
                .iter()
                .map(|k| (*k).to_string())
                .collect(),
        }
    }
}

/// What an interrupted eval ran.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Interruption {
    /// Selected (variant, question) pairs.
    pub pairs: usize,
    /// Of `pairs`, those with a row (resumed rows included).
    pub with_rows: usize,
    /// Of `with_rows`, the rows of this invocation.
    pub new_rows: usize,
    /// Runs in flight when the eval was interrupted: cancelled, no row written (a
    /// `--resume` runs them).
    pub cancelled: usize,
    /// Pairs never started.
    pub not_started: usize,
}

impl Interruption {
    /// One line for people: `3 of 10 pair(s) have a row (2 new); 1 run(s) cancelled
    /// in flight, 6 not started; rerun with --resume to run them`.
    pub fn describe(&self) -> String {
        format!(
            "{} of {} pair(s) have a row ({} new); {} run(s) cancelled in flight, {} not started; rerun with --resume to run them",
            self.with_rows, self.pairs, self.new_rows, self.cancelled, self.not_started
        )
    }
}

/// The pairs of arm `v` the rows should cover: every (question, repeat), or those of
/// the slice.
fn expected(v: &str, items: &[Item], repeats: u32, shard: Option<super::shard::Shard>) -> usize {
    match shard {
        None => items.len() * repeats as usize,
        Some(s) => items
            .iter()
            .map(|it| (0..repeats).filter(|r| s.contains(v, &it.id, *r)).count())
            .sum(),
    }
}

/// Builds the summary from the rows of the selected variants (rows of other
/// variants or of questions not in the dataset are ignored, and so is any row after
/// the first of a (variant, question) pair). Never panics on odd input.
pub fn summarize(
    spec: &str,
    dataset: &str,
    items: &[Item],
    dataset_errors: &[LineError],
    variants: &[String],
    rows: &[Row],
) -> Summary {
    summarize_with(
        spec,
        dataset,
        items,
        dataset_errors,
        variants,
        rows,
        &Options::default(),
    )
}

/// [`summarize`] with repeats (one row per (variant, question, repeat) is kept)
/// and a hard subset.
pub fn summarize_with(
    spec: &str,
    dataset: &str,
    items: &[Item],
    dataset_errors: &[LineError],
    variants: &[String],
    rows: &[Row],
    opts: &Options,
) -> Summary {
    let repeats = opts.repeats.max(1);
    let by_id: HashMap<&str, (usize, &Item)> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (it.id.as_str(), (i, it)))
        .collect();
    let mut unique: Vec<String> = Vec::with_capacity(variants.len());
    for v in variants {
        if !unique.contains(v) {
            unique.push(v.clone());
        }
    }
    let variants = &unique[..];
    let mut per_variant: Vec<Vec<(usize, &Row, &Item)>> = vec![Vec::new(); variants.len()];
    let mut seen = std::collections::HashSet::new();
    for r in rows {
        let Some(vi) = variants.iter().position(|v| *v == r.variant) else {
            continue;
        };
        if r.repeat >= repeats {
            continue;
        }
        if let Some((i, it)) = by_id.get(r.id.as_str()) {
            // One row per (variant, question, repeat): a later duplicate is ignored.
            if seen.insert((vi, *i, r.repeat)) {
                per_variant[vi].push((*i, r, it));
            }
        }
    }
    let mut results = IndexMap::new();
    let mut pairs_of: Vec<Vec<(&Row, &Item)>> = Vec::new();
    for (vi, v) in variants.iter().enumerate() {
        let mut list = std::mem::take(&mut per_variant[vi]);
        list.sort_by_key(|(i, r, _)| (*i, r.repeat));
        let pairs: Vec<(&Row, &Item)> = list.iter().map(|(_, r, it)| (*r, *it)).collect();
        let mut by_kind: IndexMap<String, Vec<(&Row, &Item)>> = IndexMap::new();
        for it in items {
            by_kind.entry(it.kind.clone()).or_default();
        }
        for p in &pairs {
            by_kind.entry(p.1.kind.clone()).or_default().push(*p);
        }
        results.insert(
            v.clone(),
            VariantResults {
                rows: pairs.len(),
                missing: expected(v, items, repeats, opts.shard).saturating_sub(pairs.len()),
                overall: aggregate(&pairs, true),
                by_kind: by_kind
                    .into_iter()
                    .map(|(k, ps)| (k, aggregate(&ps, false)))
                    .collect(),
            },
        );
        pairs_of.push(pairs);
    }
    let mut comparisons = Vec::new();
    for i in 0..variants.len() {
        for j in i + 1..variants.len() {
            comparisons.push(compare(
                &variants[i],
                &variants[j],
                &pairs_of[i],
                &pairs_of[j],
            ));
        }
    }
    let partial = results.values().any(|r: &VariantResults| r.missing > 0);
    let table = variants
        .iter()
        .zip(&pairs_of)
        .map(|(v, pairs)| super::table::cost_row(v, pairs, &opts.hard_kinds))
        .collect();
    let spread = if repeats > 1 {
        variants
            .iter()
            .zip(&pairs_of)
            .map(|(v, pairs)| (v.clone(), super::spread::spread(pairs)))
            .collect()
    } else {
        IndexMap::new()
    };
    Summary {
        arms: Vec::new(),
        shard: None,
        repeats,
        hard_kinds: opts.hard_kinds.clone(),
        table,
        spread,
        partial,
        interrupted: None,
        spec: spec.to_string(),
        dataset: dataset.to_string(),
        questions: items.len(),
        dataset_errors: dataset_errors.to_vec(),
        variants: variants.to_vec(),
        metrics: METRICS,
        results,
        comparisons,
        gates: Vec::new(),
        settings: super::settings::Settings::default(),
        loop_metrics: super::judge::delta::LoopMetrics::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::store::{Row, Usage};
    use crate::runtime::Status;

    fn item(i: usize) -> Item {
        Item {
            id: format!("q{i}"),
            question: "q".into(),
            answer: Some("a".into()),
            must_contain: vec!["x".into()],
            sources: vec!["book/a.html".into()],
            kind: "direct".into(),
            hard: None,
            line: i + 1,
        }
    }

    fn row(variant: &str, it: &Item, answer: &str, iterations: u32) -> Row {
        let mut r = Row {
            variant: variant.into(),
            id: it.id.clone(),
            repeat: 0,
            kind: it.kind.clone(),
            status: Status::Generated,
            answer: Some(answer.into()),
            sources: vec![],
            path: vec![],
            iterations,
            steps: 1,
            retrieved: vec![vec!["a.html".into()]],
            retrieval: true,
            usage: Usage::default(),
            latency_ms: 1.0,
            error: None,
            metrics: Default::default(),
        };
        r.metrics = crate::eval::metrics::row_metrics(it, &r);
        r
    }

    #[test]
    fn duplicate_rows_and_variants_never_panic() {
        let items: Vec<Item> = (0..3).map(item).collect();
        let mut rows = Vec::new();
        for it in &items {
            for _ in 0..3 {
                rows.push(row("base", it, "x", 1));
            }
        }
        let variants = vec!["base".to_string(), "base".to_string()];
        let s = summarize("s", "d", &items, &[], &variants, &rows);
        assert_eq!(s.results["base"].rows, 3);
        assert_eq!(s.results["base"].missing, 0);
        assert_eq!(s.results["base"].overall.n, 3);
    }

    #[test]
    fn one_question_is_insufficient_data_and_does_not_trip_the_gate() {
        let items: Vec<Item> = (0..9).map(item).collect();
        let mut rows = Vec::new();
        for it in &items {
            rows.push(row("base", it, "x", 1));
            rows.push(row("v", it, "no", 3));
        }
        let variants = vec!["base".to_string(), "v".to_string()];
        let s = summarize("s", "d", &items, &[], &variants, &rows);
        for m in &s.comparisons[0].metrics {
            assert_eq!(m.verdict, INSUFFICIENT, "{}", m.metric);
        }
        let g = crate::eval::gates::parse_not_worse("v", &variants).unwrap();
        let out = crate::eval::gates::check(&[g], &s);
        assert!(out[0].passed, "{}", out[0].reason);
        assert!(
            out[0].reason.contains("insufficient data"),
            "{}",
            out[0].reason
        );
    }

    #[test]
    fn equal_data_gets_equal_intervals_whatever_the_metric() {
        // One must_contain term per question: must_contain and must_contain_terms
        // take the same values question by question.
        let items: Vec<Item> = (0..30).map(item).collect();
        let mut rows = Vec::new();
        for (i, it) in items.iter().enumerate() {
            rows.push(row("base", it, if i % 3 == 0 { "x" } else { "no" }, 1));
            rows.push(row("v", it, if i % 2 == 0 { "x" } else { "no" }, 1));
        }
        let variants = vec!["base".to_string(), "v".to_string()];
        let s = summarize("s", "d", &items, &[], &variants, &rows);
        let o = &s.results["base"].overall.metrics;
        assert!(o["must_contain"].ci.is_some());
        assert_eq!(o["must_contain"].ci, o["must_contain_terms"].ci);
        let c = &s.comparisons[0].metrics;
        let ci = |n: &str| c.iter().find(|m| m.metric == n).unwrap().ci;
        assert_eq!(ci("must_contain"), ci("must_contain_terms"));
        assert_ne!(
            ci("must_contain").unwrap()[0],
            ci("must_contain").unwrap()[1]
        );
    }

    #[test]
    fn paired_verdicts_by_hand() {
        let items: Vec<Item> = (0..10).map(item).collect();
        let mut rows = Vec::new();
        for it in &items {
            rows.push(row("base", it, "no", 1));
            rows.push(row("v", it, "x", 2));
        }
        let variants = vec!["base".to_string(), "v".to_string()];
        let s = summarize("s", "d", &items, &[], &variants, &rows);
        assert_eq!(s.results["base"].overall.get("must_contain"), Some(0.0));
        assert_eq!(s.results["v"].overall.get("must_contain"), Some(1.0));
        let c = &s.comparisons[0];
        let m = |name: &str| c.metrics.iter().find(|m| m.metric == name).unwrap();
        // 10 discordant pairs, all for v: exact p = 2 / 1024.
        let mc = m("must_contain");
        assert_eq!(mc.mcnemar.unwrap().c, 10);
        assert!((mc.mcnemar.unwrap().p - 2.0 / 1024.0).abs() < 1e-12);
        assert_eq!(mc.verdict, "better");
        // Every question +1 iteration: CI [1, 1], significant, no direction.
        assert_eq!(m("iterations").ci, Some([1.0, 1.0]));
        assert_eq!(m("iterations").verdict, "higher");
        assert_eq!(m("recall_final").verdict, NO_DIFFERENCE);
        assert_eq!(s.results["v"].overall.per_iteration[0].recall, 1.0);
        assert_eq!(s.results["v"].overall.iterations_histogram, vec![(2, 10)]);
        // Gates read the same aggregates.
        let g = crate::eval::gates::parse_not_worse("v", &variants).unwrap();
        assert!(crate::eval::gates::check(&[g], &s)[0].passed);
    }

    #[test]
    fn repeats_average_per_question_and_mixed_outcomes_skip_mcnemar() {
        // 12 questions, 2 repeats each: base hits on both repeats, v on one of two.
        let items: Vec<Item> = (0..12).map(item).collect();
        let mut rows = Vec::new();
        for it in &items {
            for rep in 0..2u32 {
                let mut a = row("base", it, "x", 1);
                a.repeat = rep;
                rows.push(a);
                let mut b = row("v", it, if rep == 0 { "x" } else { "no" }, 1);
                b.repeat = rep;
                b.latency_ms = f64::from(10 * (rep + 1));
                rows.push(b);
            }
        }
        // A repeat beyond --repeats is ignored.
        let mut extra = row("v", &items[0], "x", 1);
        extra.repeat = 2;
        rows.push(extra);
        let variants = vec!["base".to_string(), "v".to_string()];
        let opts = Options {
            repeats: 2,
            ..Options::default()
        };
        let s = summarize_with("s", "d", &items, &[], &variants, &rows, &opts);
        assert_eq!(s.results["v"].rows, 24);
        assert_eq!(s.results["v"].missing, 0);
        let mc = &s.results["v"].overall.metrics["must_contain"];
        assert_eq!((mc.value, mc.n), (Some(0.5), 12));
        let c = s.comparisons[0]
            .metrics
            .iter()
            .find(|m| m.metric == "must_contain")
            .unwrap();
        assert_eq!(c.n, 12);
        assert!(c.mcnemar.is_none(), "per-question rates are not outcomes");
        assert_eq!(c.diff, Some(-0.5));
        assert_eq!(c.verdict, "worse");
        let sp = &s.spread["v"];
        assert_eq!((sp.questions, sp.must_contain_unstable), (12, 12));
        assert_eq!(sp.latency_range_ms, Some(10.0));
        assert_eq!(sp.must_contain_sd, Some(0.5));
        assert!(s.spread["base"].must_contain_unstable == 0);
        assert_eq!(s.table[1].must_contain.value, Some(0.5));
        // One repeat: the same figures as summarize.
        let one: Vec<Row> = rows.iter().filter(|r| r.repeat == 0).cloned().collect();
        let a = summarize("s", "d", &items, &[], &variants, &one);
        assert!(a.spread.is_empty());
        assert!(a.comparisons[0].metrics[0].mcnemar.is_some());
    }
}
