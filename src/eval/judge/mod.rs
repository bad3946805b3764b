//! Reference-free judge metrics: `faithfulness` and `answer_relevancy` of every row,
//! by a judge model (`--judge PROVIDER[:MODEL][@URL]`, [`model`]) or, without one,
//! by the classical [`offline`] judge; `--judge-repeats K` samples the judge K times
//! per row and measures its agreement with itself. Also the grader calibration
//! ([`calibration`]) and seed 004's iteration delta ([`delta`]); their report
//! sections are [`crate::eval::judge_report`].
//!
//! Per row ([`judge_row`]):
//! 1. no answer (failed run, empty answer) → both metrics `no_answer`;
//! 2. a refusal ([`crate::eval::metrics::declined`]: fallback, exhausted, or a
//!    refusal phrase) → both `refusal`;
//! 3. otherwise the answer is split into statements (offline: sentences; model: the
//!    `statements` call), each statement judged supported or not by the run's
//!    context ([`context_of`]); faithfulness = supported / statements (`no_statements`
//!    when there is none); answer relevancy is scored 0..1.
//!
//! A judge that fails (HTTP error, timeout, a reply that is not its schema's JSON,
//! a call missing from a replayed cassette) makes that metric `judge_failed` for the
//! row; the row is kept. Only `scored` values enter a mean ([`counts`] shows the
//! others).
pub mod calibration;
pub mod delta;
pub mod model;
pub mod offline;

use super::dataset::Item;
use super::metrics::declined;
use super::store::Row;
pub use super::verdicts::{Agreement, GraderCounts, JudgeRow, Judged, JudgedStatus};
use crate::runtime::RunResult;
use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;

/// Which judge scores the rows.
#[derive(Debug)]
pub enum JudgeKind {
    /// The classical judge ([`offline`]): the default, and `--judge offline`.
    Offline(offline::OfflineJudge),
    /// A model ([`model::ModelJudge`]).
    Model(Box<model::ModelJudge>),
}

/// The judge of an eval and how many samples it takes per row.
#[derive(Debug)]
pub struct Judge {
    /// The judge.
    pub kind: JudgeKind,
    /// Samples per row (`--judge-repeats`, at least 1).
    pub repeats: usize,
    /// `offline` or the `--judge` argument (stored in each row).
    pub name: String,
}

impl Judge {
    /// The offline judge, `repeats` samples per row.
    pub fn offline(repeats: usize) -> Judge {
        Judge {
            kind: JudgeKind::Offline(offline::OfflineJudge::new()),
            repeats: repeats.max(1),
            name: "offline".into(),
        }
    }

    async fn statements(&self, question: &str, answer: &str) -> Result<Vec<String>, String> {
        match &self.kind {
            JudgeKind::Offline(j) => Ok(j.statements(answer)),
            JudgeKind::Model(m) => m.statements(question, answer).await,
        }
    }

    async fn verdicts(
        &self,
        question: &str,
        statements: &[String],
        context: &[String],
        sample: usize,
    ) -> Result<Vec<bool>, String> {
        let v = match &self.kind {
            JudgeKind::Offline(j) => j.verdicts(statements, context),
            JudgeKind::Model(m) => m.verdicts(question, statements, context, sample).await?,
        };
        if v.len() != statements.len() {
            return Err(format!(
                "the judge gave {} verdict(s) for {} statement(s)",
                v.len(),
                statements.len()
            ));
        }
        Ok(v)
    }

    async fn relevancy(&self, question: &str, answer: &str, sample: usize) -> Result<f64, String> {
        match &self.kind {
            JudgeKind::Offline(j) => j.relevancy(question, answer),
            JudgeKind::Model(m) => m.relevancy(question, answer, sample).await,
        }
    }
}

/// The run's context for faithfulness: the `content` of the documents in the
/// spec's `output.documents` state field at the end of the run (what the answer was
/// generated from); empty when the spec names no such field or it holds none.
pub fn context_of(result: &RunResult, documents_field: Option<&str>) -> Vec<String> {
    let Some(Value::Array(docs)) = documents_field.and_then(|f| result.state.get(f)) else {
        return Vec::new();
    };
    docs.iter()
        .filter_map(|d| match d {
            Value::String(s) => Some(s.clone()),
            Value::Object(_) => d.get("content").and_then(Value::as_str).map(str::to_string),
            _ => None,
        })
        .collect()
}

/// Judges one row (see the module docs): `repeats` samples of the verdicts and of
/// the relevancy; the statements are split once.
pub async fn judge_row(judge: &Judge, item: &Item, row: &Row, context: &[String]) -> JudgeRow {
    let mut out = JudgeRow {
        judge: judge.name.clone(),
        faithfulness: Judged::apart(JudgedStatus::NoAnswer),
        answer_relevancy: Judged::apart(JudgedStatus::NoAnswer),
        statements: 0,
        supported: 0,
        agreement: None,
    };
    let answer = row.answer.as_deref().unwrap_or("");
    if answer.trim().is_empty() {
        return out;
    }
    if declined(row.status, Some(answer)) {
        out.faithfulness = Judged::apart(JudgedStatus::Refusal);
        out.answer_relevancy = Judged::apart(JudgedStatus::Refusal);
        return out;
    }
    let k = judge.repeats.max(1);
    let mut verdict_samples: Vec<Vec<bool>> = Vec::new();
    out.faithfulness = match judge.statements(&item.question, answer).await {
        Err(e) => Judged::failed(e),
        Ok(st) if st.is_empty() => Judged::apart(JudgedStatus::NoStatements),
        Ok(st) => {
            out.statements = st.len();
            let mut first_err = None;
            for sample in 1..=k {
                match judge.verdicts(&item.question, &st, context, sample).await {
                    Ok(v) => verdict_samples.push(v),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            out.supported = verdict_samples
                .first()
                .map_or(0, |v| v.iter().filter(|x| **x).count());
            mean_or_failed(&faith_scores(&verdict_samples), first_err)
        }
    };
    let mut rel = Vec::new();
    let mut rel_err = None;
    for sample in 1..=k {
        match judge.relevancy(&item.question, answer, sample).await {
            Ok(x) if x.is_finite() => rel.push(x.clamp(0.0, 1.0)),
            Ok(x) => {
                rel_err.get_or_insert(format!("the judge's score is not a number ({x})"));
            }
            Err(e) => {
                rel_err.get_or_insert(e);
            }
        }
    }
    out.answer_relevancy = mean_or_failed(&rel, rel_err);
    if k >= 2 {
        out.agreement = Some(agreement(k, &verdict_samples, &rel));
    }
    out
}

fn faith_scores(samples: &[Vec<bool>]) -> Vec<f64> {
    samples
        .iter()
        .filter(|v| !v.is_empty())
        .map(|v| v.iter().filter(|x| **x).count() as f64 / v.len() as f64)
        .collect()
}

fn mean_or_failed(xs: &[f64], err: Option<String>) -> Judged {
    match super::stats::mean(xs) {
        Some(m) => Judged::scored(m),
        None => Judged::failed(err.unwrap_or_else(|| "the judge gave no score".into())),
    }
}

/// The agreement of K samples (docs/eval.md "Judge agreement"): the mean over
/// pairs of verdict samples of the share of statements with equal verdicts, and the
/// range (max − min) of each metric's sample scores.
pub fn agreement(samples: usize, verdicts: &[Vec<bool>], relevancy: &[f64]) -> Agreement {
    let mut pairs = Vec::new();
    for i in 0..verdicts.len() {
        for j in i + 1..verdicts.len() {
            let (a, b) = (&verdicts[i], &verdicts[j]);
            if !a.is_empty() && a.len() == b.len() {
                let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
                pairs.push(same as f64 / a.len() as f64);
            }
        }
    }
    let spread = |xs: &[f64]| {
        (xs.len() >= 2).then(|| {
            let max = xs.iter().copied().fold(f64::MIN, f64::max);
            let min = xs.iter().copied().fold(f64::MAX, f64::min);
            max - min
        })
    };
    Agreement {
        samples,
        verdicts: super::stats::mean(&pairs),
        faithfulness_spread: spread(&faith_scores(verdicts)),
        relevancy_spread: spread(relevancy),
    }
}

/// Rows per [`JudgedStatus`] of one judge metric, and the judge's agreement summed
/// over rows: the "counted apart" part of the judge metrics (summary.json
/// `judge` of each aggregate).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct JudgeCounts {
    /// The judge (`offline` or the `--judge` argument; `null` when no row was judged).
    pub judge: Option<String>,
    /// Per metric (`faithfulness`, `answer_relevancy`): rows per status (`scored`,
    /// `no_answer`, `refusal`, `no_statements`, `judge_failed`); every status listed.
    pub statuses: IndexMap<String, IndexMap<String, usize>>,
    /// With `--judge-repeats K` (K ≥ 2): the rows' agreements averaged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agreement: Option<AgreementSummary>,
}

/// The judge's agreement with itself over the rows of an aggregate.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct AgreementSummary {
    /// Samples per row.
    pub samples: usize,
    /// Mean of the rows' pairwise verdict agreement (rows that have one).
    pub verdicts: Option<f64>,
    /// Rows with a verdict agreement.
    pub verdict_rows: usize,
    /// Mean of the rows' faithfulness spread (max − min of the samples).
    pub faithfulness_spread: Option<f64>,
    /// Mean of the rows' answer relevancy spread.
    pub relevancy_spread: Option<f64>,
}

/// The judge metrics' counts over rows (rows written without a judge count as
/// `judge_failed` with no judge name: they were never judged).
pub fn counts<'a>(rows: impl IntoIterator<Item = &'a Row>) -> JudgeCounts {
    let mut c = JudgeCounts::default();
    for m in ["faithfulness", "answer_relevancy"] {
        let mut per: IndexMap<String, usize> = IndexMap::new();
        for s in JudgedStatus::ALL {
            if m == "answer_relevancy" && s == JudgedStatus::NoStatements {
                continue;
            }
            per.insert(s.as_str().to_string(), 0);
        }
        c.statuses.insert(m.to_string(), per);
    }
    let (mut ver, mut fs, mut rs) = (Vec::new(), Vec::new(), Vec::new());
    let mut samples = 0;
    for r in rows {
        let (f, a) = match &r.metrics.judge {
            Some(j) => {
                c.judge.get_or_insert_with(|| j.judge.clone());
                if let Some(ag) = &j.agreement {
                    samples = samples.max(ag.samples);
                    ver.extend(ag.verdicts);
                    fs.extend(ag.faithfulness_spread);
                    rs.extend(ag.relevancy_spread);
                }
                (j.faithfulness.status, j.answer_relevancy.status)
            }
            None => (JudgedStatus::JudgeFailed, JudgedStatus::JudgeFailed),
        };
        for (m, s) in [("faithfulness", f), ("answer_relevancy", a)] {
            if let Some(per) = c.statuses.get_mut(m) {
                *per.entry(s.as_str().to_string()).or_default() += 1;
            }
        }
    }
    if samples >= 2 {
        c.agreement = Some(AgreementSummary {
            samples,
            verdicts: super::stats::mean(&ver),
            verdict_rows: ver.len(),
            faithfulness_spread: super::stats::mean(&fs),
            relevancy_spread: super::stats::mean(&rs),
        });
    }
    c
}

#[cfg(test)]
mod tests;
