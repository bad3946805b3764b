//! What the judge and the document grader said about one row: the per-row data of
//! the reference-free metrics (`faithfulness`, `answer_relevancy`) and of the grader
//! calibration, stored in results.jsonl (`metrics.judge`, `metrics.grader`).
//!
//! Plain data: computed by [`super::judge`], aggregated by [`super::judge::counts`]
//! and [`super::judge::calibration`]. Imports no other eval file, so the row store
//! can hold it.
use serde::{Deserialize, Serialize};

/// Why a judge metric has, or has no, value for a row. Only `scored` rows enter the
/// metric's mean; the others are counted apart per metric (never a NaN, never a 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgedStatus {
    /// The judge scored the answer.
    Scored,
    /// The run has no answer (failed, limited without one) or an empty one.
    NoAnswer,
    /// The answer declines to answer (a fallback, or a refusal phrase such as "I
    /// cannot find ..."): nothing to judge.
    Refusal,
    /// The answer holds no statement (faithfulness only).
    NoStatements,
    /// The judge failed: an error, a timeout, a reply that is not the JSON its
    /// schema asks for, a call missing from a replayed cassette.
    JudgeFailed,
}

impl JudgedStatus {
    /// Every status, in report order.
    pub const ALL: [JudgedStatus; 5] = [
        JudgedStatus::Scored,
        JudgedStatus::NoAnswer,
        JudgedStatus::Refusal,
        JudgedStatus::NoStatements,
        JudgedStatus::JudgeFailed,
    ];

    /// The snake_case name (as in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            JudgedStatus::Scored => "scored",
            JudgedStatus::NoAnswer => "no_answer",
            JudgedStatus::Refusal => "refusal",
            JudgedStatus::NoStatements => "no_statements",
            JudgedStatus::JudgeFailed => "judge_failed",
        }
    }
}

/// One judge metric of one row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// The score, 0..1, only when `status` is `scored` (with `--judge-repeats K`:
    /// the mean over the samples that scored).
    pub value: Option<f64>,
    /// Why there is (no) value.
    pub status: JudgedStatus,
    /// What the judge did wrong, when `status` is `judge_failed` (the first failure
    /// of the samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Judged {
    /// A metric without a value, for `status`.
    pub fn apart(status: JudgedStatus) -> Judged {
        Judged {
            value: None,
            status,
            error: None,
        }
    }
    /// A failed judgement with its reason.
    pub fn failed(error: impl Into<String>) -> Judged {
        Judged {
            value: None,
            status: JudgedStatus::JudgeFailed,
            error: Some(error.into()),
        }
    }
    /// A score (clamped to 0..1; a non-finite score is a judge failure).
    pub fn scored(v: f64) -> Judged {
        if v.is_finite() {
            Judged {
                value: Some(v.clamp(0.0, 1.0)),
                status: JudgedStatus::Scored,
                error: None,
            }
        } else {
            Judged::failed(format!("the judge's score is not a number ({v})"))
        }
    }
}

/// The judge's agreement with itself over `--judge-repeats K` samples of one row
/// (see docs/eval.md "Judge agreement").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Samples taken (K).
    pub samples: usize,
    /// Mean over pairs of samples of the share of statements both gave the same
    /// supported/unsupported verdict (`null` with fewer than two samples that judged
    /// the statements, or no statement).
    pub verdicts: Option<f64>,
    /// Highest minus lowest faithfulness over the samples that scored (`null` below
    /// two).
    pub faithfulness_spread: Option<f64>,
    /// Highest minus lowest answer relevancy over the samples that scored.
    pub relevancy_spread: Option<f64>,
}

/// The judge's view of one row (results.jsonl `metrics.judge`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JudgeRow {
    /// `offline`, or the `--judge` argument.
    pub judge: String,
    /// Faithfulness: supported statements / statements.
    pub faithfulness: Judged,
    /// Answer relevancy, 0..1.
    pub answer_relevancy: Judged,
    /// The statements the answer was split into (empty when it was not split).
    #[serde(default)]
    pub statements: usize,
    /// Of `statements`, those judged supported (the first sample's verdicts).
    #[serde(default)]
    pub supported: usize,
    /// With `--judge-repeats K` (K ≥ 2): how the samples agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<Agreement>,
}

/// The document grader's verdicts in one run (results.jsonl `metrics.grader`):
/// every yes/no verdict of every grading step, against the labelled sources.
///
/// A document is *relevant* when its source is one of the item's `sources` (the
/// same suffix match as recall). The confusion counts are present only when the
/// item has labelled sources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraderCounts {
    /// Verdicts "yes" (relevant).
    pub yes: u32,
    /// Verdicts "no".
    pub no: u32,
    /// Labelled items only: yes on a relevant document.
    #[serde(default)]
    pub yes_relevant: Option<u32>,
    /// Labelled items only: yes on an irrelevant document.
    #[serde(default)]
    pub yes_irrelevant: Option<u32>,
    /// Labelled items only: no on a relevant document.
    #[serde(default)]
    pub no_relevant: Option<u32>,
}
