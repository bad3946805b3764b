//! Seed 004's iteration delta: does the loop earn its keep on the questions where it
//! looped?
//!
//! - **The single-shot arm** is the arm given with `--single-shot ARM`, else the
//!   first arm (in arm order) that has rows and whose every row took at most one
//!   iteration (one pass through the entry node); none when no arm qualifies.
//! - **The delta of an arm** A (every arm but the single-shot one S): over the
//!   questions where A's run took 2 or more iterations and S has a row, for
//!   `faithfulness` and `must_contain`, the per-question difference A − S on the
//!   questions where both have a value, its mean and the bootstrap 95% CI of the
//!   mean ([`crate::eval::stats::paired_ci`]: the bootstrap with the fixed
//!   [`crate::eval::stats::SEED`], closed-form above 2,000 questions).
//!
//! Mean iterations per arm is the `iterations` metric.
use crate::eval::dataset::Item;
use crate::eval::metrics::{value, Question};
use crate::eval::stats::{mean, paired_ci};
use crate::eval::store::Row;
use serde::Serialize;
use std::collections::HashMap;

/// The metrics compared by the iteration delta.
pub const DELTA_METRICS: [&str; 2] = ["faithfulness", "must_contain"];

/// One metric of one arm's iteration delta.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DeltaMetric {
    /// Metric name.
    pub metric: String,
    /// Questions with a value under both arms.
    pub n: usize,
    /// Mean under the single-shot arm over those questions.
    pub single_shot: Option<f64>,
    /// Mean under the arm.
    pub arm: Option<f64>,
    /// Mean of arm − single-shot.
    pub diff: Option<f64>,
    /// Bootstrap 95% CI of `diff`.
    pub ci: Option<[f64; 2]>,
}

/// One arm against the single-shot arm on the questions it looped on.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct IterationDelta {
    /// The arm.
    pub arm: String,
    /// Questions where the arm took 2+ iterations and the single-shot arm has a row.
    pub questions: usize,
    /// One entry per [`DELTA_METRICS`].
    pub metrics: Vec<DeltaMetric>,
}

/// summary.json `loop`: the single-shot arm and every other arm's delta.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LoopMetrics {
    /// The single-shot arm (`null` when none qualifies).
    pub single_shot: Option<String>,
    /// How it was chosen: `flag` (`--single-shot`) or `at most one iteration`.
    pub chosen_by: Option<String>,
    /// Per other arm.
    pub deltas: Vec<IterationDelta>,
}

/// Computes the loop metrics from the rows of the arms (see the module docs).
/// `given` must be one of `arms` (checked by the caller).
pub fn loop_metrics(
    arms: &[String],
    items: &[Item],
    rows: &[Row],
    given: Option<&str>,
) -> LoopMetrics {
    let items_by: HashMap<&str, &Item> = items.iter().map(|i| (i.id.as_str(), i)).collect();
    let mut of: HashMap<&str, HashMap<&str, &Row>> = HashMap::new();
    for r in rows {
        if items_by.contains_key(r.id.as_str()) {
            of.entry(r.variant.as_str())
                .or_default()
                .entry(r.id.as_str())
                .or_insert(r);
        }
    }
    let (single, by) = match given {
        Some(g) => (Some(g.to_string()), "flag"),
        None => (
            arms.iter()
                .find(|a| {
                    of.get(a.as_str())
                        .is_some_and(|m| !m.is_empty() && m.values().all(|r| r.iterations <= 1))
                })
                .cloned(),
            "at most one iteration",
        ),
    };
    let Some(s) = single else {
        return LoopMetrics::default();
    };
    let empty = HashMap::new();
    let srows = of.get(s.as_str()).unwrap_or(&empty);
    let mut deltas = Vec::new();
    for a in arms.iter().filter(|a| **a != s) {
        let arows = of.get(a.as_str()).unwrap_or(&empty);
        // Questions in dataset order.
        let looped: Vec<(&Row, &Row, &Item)> = items
            .iter()
            .filter_map(|it| {
                let ra = arows.get(it.id.as_str())?;
                let rs = srows.get(it.id.as_str())?;
                (ra.iterations >= 2).then_some((*ra, *rs, it))
            })
            .collect();
        let metrics = DELTA_METRICS
            .iter()
            .map(|m| {
                let (mut xs, mut xa) = (Vec::new(), Vec::new());
                for (ra, rs, it) in &looped {
                    let q = Question::of(it);
                    if let (Some(va), Some(vs)) = (value(m, ra, q), value(m, rs, q)) {
                        xa.push(va);
                        xs.push(vs);
                    }
                }
                let diffs: Vec<f64> = xa.iter().zip(&xs).map(|(a, s)| a - s).collect();
                DeltaMetric {
                    metric: (*m).to_string(),
                    n: diffs.len(),
                    single_shot: mean(&xs),
                    arm: mean(&xa),
                    diff: mean(&diffs),
                    ci: paired_ci(&xs, &xa),
                }
            })
            .collect();
        deltas.push(IterationDelta {
            arm: a.clone(),
            questions: looped.len(),
            metrics,
        });
    }
    LoopMetrics {
        single_shot: Some(s),
        chosen_by: Some(by.to_string()),
        deltas,
    }
}
