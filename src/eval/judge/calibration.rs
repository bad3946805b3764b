//! Grader calibration: the document grader's yes/no verdicts against the labelled
//! sources (seed 004: "a grader returned relevant=true on 100% of inputs").
//!
//! **Which steps are grading steps** (found in the step records, never by node
//! name): a successful `map` step whose items were all documents (its record's
//! `items`, each with its item's `output`, see [`crate::runtime::trace`]) and
//! whose every output is a verdict ([`verdict`]). Every verdict of every grading
//! step of a run counts (a loop that grades three times counts three times).
//!
//! **Relevant**: a graded document is relevant when its source matches one of the
//! item's `sources` ([`crate::eval::metrics::same_source`]); items without labelled
//! sources count in the yes-rate only.
//!
//! Per arm: precision = yes on relevant / yes (on labelled items), recall = yes on
//! relevant / relevant, yes-rate = yes / verdicts (all items). A warning is raised
//! when the yes-rate is above [`SKEW`] (or below 1 − [`SKEW`]) over at least
//! [`MIN_VERDICTS`] verdicts: a grader that says the same thing to (nearly)
//! everything does not grade.
use super::GraderCounts;
use crate::eval::metrics::same_source;
use crate::eval::store::Row;
use crate::runtime::trace::RetrievedDoc;
use serde::Serialize;
use serde_json::Value;

/// The yes-rate (or no-rate) above which a grader is flagged.
pub const SKEW: f64 = 0.95;
/// Fewest verdicts before the skew warning is raised.
pub const MIN_VERDICTS: u32 = 10;

fn verdict_value(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "yes" => Some(true),
            "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The yes/no verdict of one map item's output: a boolean, a `"yes"`/`"no"` string
/// (case-insensitive), or an object whose `binary_score` is one, else whose only
/// field holding one is it (`{"relevant": true, "reason": "..."}`); `None` when
/// there is none or more than one such field.
pub fn verdict(output: &Value) -> Option<bool> {
    if let Some(v) = verdict_value(output) {
        return Some(v);
    }
    let Value::Object(m) = output else {
        return None;
    };
    if let Some(v) = m.get("binary_score").and_then(verdict_value) {
        return Some(v);
    }
    let mut found = m.values().filter_map(verdict_value);
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// The (source, yes) verdicts of a map step's documents, when it is a grading step
/// (every document's output a verdict); `None` otherwise.
pub fn grading_step(kind: &str, documents: Option<&[RetrievedDoc]>) -> Option<Vec<(String, bool)>> {
    if kind != "map" {
        return None;
    }
    let docs = documents?;
    if docs.is_empty() {
        return None;
    }
    docs.iter()
        .map(|d| Some((d.source.clone(), verdict(d.output.as_ref()?)?)))
        .collect()
}

/// A run's verdicts counted against the item's labels.
pub fn count(verdicts: &[(String, bool)], labels: &[String]) -> GraderCounts {
    let mut c = GraderCounts::default();
    let labelled = !labels.is_empty();
    let (mut yr, mut yi, mut nr) = (0u32, 0u32, 0u32);
    for (source, yes) in verdicts {
        let relevant = labels.iter().any(|l| same_source(source, l));
        match (*yes, relevant) {
            (true, true) => yr += 1,
            (true, false) => yi += 1,
            (false, true) => nr += 1,
            (false, false) => {}
        }
        if *yes {
            c.yes += 1;
        } else {
            c.no += 1;
        }
    }
    if labelled {
        c.yes_relevant = Some(yr);
        c.yes_irrelevant = Some(yi);
        c.no_relevant = Some(nr);
    }
    c
}

/// One arm's grader calibration (summary.json `grader` of each aggregate).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Calibration {
    /// Rows with at least one grading step.
    pub rows: usize,
    /// Verdicts, all rows.
    pub verdicts: u32,
    /// Of them, yes.
    pub yes: u32,
    /// yes / verdicts.
    pub yes_rate: Option<f64>,
    /// Verdicts on documents of items with labelled sources.
    pub labelled_verdicts: u32,
    /// Of those, on relevant documents.
    pub relevant: u32,
    /// yes on relevant / yes (labelled items); `null` without a yes.
    pub precision: Option<f64>,
    /// yes on relevant / relevant; `null` without a relevant document graded.
    pub recall: Option<f64>,
    /// Set when the grader says yes (or no) to more than 95% of at least 10 documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Calibration over rows; `None` when no row had a grading step.
pub fn calibrate<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Option<Calibration> {
    let mut c = Calibration::default();
    let (mut yr, mut yi, mut nr, mut no_irr) = (0u32, 0u32, 0u32, 0u32);
    for r in rows {
        let Some(g) = &r.metrics.grader else { continue };
        c.rows += 1;
        c.verdicts += g.yes + g.no;
        c.yes += g.yes;
        if let (Some(a), Some(b), Some(n)) = (g.yes_relevant, g.yes_irrelevant, g.no_relevant) {
            yr += a;
            yi += b;
            nr += n;
            // The labelled item's no on irrelevant documents.
            no_irr += g.no.saturating_sub(n);
        }
    }
    if c.rows == 0 {
        return None;
    }
    c.labelled_verdicts = yr + yi + nr + no_irr;
    c.relevant = yr + nr;
    let ratio = |a: u32, b: u32| (b > 0).then(|| f64::from(a) / f64::from(b));
    c.yes_rate = ratio(c.yes, c.verdicts);
    c.precision = ratio(yr, yr + yi);
    c.recall = ratio(yr, yr + nr);
    if let Some(rate) = c.yes_rate {
        if c.verdicts >= MIN_VERDICTS && !(1.0 - SKEW..=SKEW).contains(&rate) {
            let (word, share) = if rate > SKEW {
                ("yes", rate)
            } else {
                ("no", 1.0 - rate)
            };
            c.warning = Some(format!(
                "the document grader said {word} to {:.1}% of {} documents: it does not discriminate (check its prompt, model and threshold)",
                100.0 * share,
                c.verdicts
            ));
        }
    }
    Some(c)
}
