//! With `--repeats N`: how much one question's outcome varies from one run of it to
//! the next, per arm (summary.json `spread`, the reports' "Repeats" table).
//!
//! Over the questions with at least two repeats: how many have a `must_contain`
//! outcome that differs between repeats, and the mean over questions of the
//! per-question standard deviation (population, over the repeats) of must_contain
//! (0/1), token F1 and latency, plus the mean per-question latency range (max − min).
use super::metrics::metric;
use super::questions::{by_question, Pairs};
use serde::Serialize;

/// The spread of one arm's repeats.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Spread {
    /// Questions with at least two repeats.
    pub questions: usize,
    /// Of those, the ones with must_contain terms.
    pub must_contain_questions: usize,
    /// Of those, the ones whose must_contain outcome differs between repeats.
    pub must_contain_unstable: usize,
    /// Mean per-question standard deviation of must_contain (0/1).
    pub must_contain_sd: Option<f64>,
    /// Mean per-question standard deviation of token F1.
    pub f1_sd: Option<f64>,
    /// Mean per-question standard deviation of the latency, ms.
    pub latency_sd_ms: Option<f64>,
    /// Mean per-question latency range (slowest − fastest repeat), ms.
    pub latency_range_ms: Option<f64>,
}

fn sd(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
    Some(v.sqrt())
}

fn mean(xs: &[f64]) -> Option<f64> {
    super::stats::mean(xs)
}

/// The spread of one arm's rows (several rows per question: its repeats).
pub fn spread(rows: &Pairs<'_>) -> Spread {
    let grouped: Vec<_> = by_question(rows)
        .into_iter()
        .filter(|(_, rs)| rs.len() >= 2)
        .collect();
    let mut out = Spread {
        questions: grouped.len(),
        ..Spread::default()
    };
    let (mut mc_sd, mut f1_sd, mut lat_sd, mut lat_range) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let must = metric("must_contain");
    for (it, rs) in &grouped {
        let q = super::metrics::Question::of(it);
        if let Some(d) = must {
            let hits: Vec<f64> = rs.iter().filter_map(|r| (d.value)(r, q)).collect();
            if hits.len() >= 2 {
                out.must_contain_questions += 1;
                if hits.iter().any(|h| *h != hits[0]) {
                    out.must_contain_unstable += 1;
                }
                mc_sd.extend(sd(&hits));
            }
        }
        let f1: Vec<f64> = rs.iter().map(|r| r.metrics.f1).collect();
        f1_sd.extend(sd(&f1));
        let lat: Vec<f64> = rs.iter().map(|r| r.latency_ms).collect();
        lat_sd.extend(sd(&lat));
        let (lo, hi) = lat
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(*x), hi.max(*x))
            });
        if lo.is_finite() && hi.is_finite() {
            lat_range.push(hi - lo);
        }
    }
    out.must_contain_sd = mean(&mc_sd);
    out.f1_sd = mean(&f1_sd);
    out.latency_sd_ms = mean(&lat_sd);
    out.latency_range_ms = mean(&lat_range);
    out
}

/// Column heads of the reports' "Repeats: per-question spread" table.
pub const COLUMNS: [&str; 7] = [
    "arm",
    "questions",
    "must_contain unstable",
    "sd must_contain",
    "sd f1",
    "sd latency ms",
    "latency range ms",
];

/// The rows of that table, one per arm in `spread`'s order, cells as shown in both
/// report.md and report.html (`n/a` where a figure has no value).
pub fn table_rows(spread: &indexmap::IndexMap<String, Spread>) -> Vec<Vec<String>> {
    let na =
        |x: Option<f64>, decimals: usize| x.map_or("n/a".into(), |x| format!("{x:.decimals$}"));
    spread
        .iter()
        .map(|(arm, sp)| {
            vec![
                arm.clone(),
                sp.questions.to_string(),
                format!(
                    "{} of {}",
                    sp.must_contain_unstable, sp.must_contain_questions
                ),
                na(sp.must_contain_sd, 3),
                na(sp.f1_sd, 3),
                na(sp.latency_sd_ms, 1),
                na(sp.latency_range_ms, 1),
            ]
        })
        .collect()
}
