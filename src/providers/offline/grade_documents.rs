//! `grade_documents`: is one document relevant to the question?
//!
//! Score = IDF-weighted coverage of the question's content terms by the document's
//! content, title and heading path ([`super::text::coverage`]), 0..1. The grade is
//! `yes` when the score reaches `relevance_threshold` and the document holds at least
//! `min_overlap` distinct question terms. Confidence maps the distance from the
//! threshold to 0.5..1: 0.5 at the threshold, 1 at a score of 0 (for `no`) or 1 (for
//! `yes`).

use serde_json::{json, Value};

use super::text::{coverage, doc_view, Analyzer, Idf};
use super::OfflineParams;
use crate::retrieval::Index;

/// Relevance score (0..1) and number of matched distinct question terms.
pub(crate) fn score(
    an: &Analyzer,
    index: Option<&Index>,
    question: &str,
    document: &Value,
) -> (f64, usize) {
    let Ok(doc) = doc_view(an, document, 0) else {
        return (0.0, 0);
    };
    let q = an.question_terms(question);
    if q.is_empty() {
        return (0.0, 0);
    }
    let idf = Idf::new(index, std::slice::from_ref(&doc));
    let w = idf.weights(&q);
    coverage(&doc, &q, &w)
}

/// The GradingResult of `document` for `question`.
pub(crate) fn grade(
    an: &Analyzer,
    params: &OfflineParams,
    index: Option<&Index>,
    question: &str,
    document: &Value,
) -> Value {
    let id = match document.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let (s, matched) = score(an, index, question, document);
    let th = params.relevance_threshold;
    let yes = s >= th && matched >= params.min_overlap && matched > 0;
    let dist = if s >= th {
        if th < 1.0 {
            (s - th) / (1.0 - th)
        } else {
            1.0
        }
    } else if th > 0.0 {
        (th - s) / th
    } else {
        1.0
    };
    let confidence = (0.5 + 0.5 * dist.clamp(0.0, 1.0)).clamp(0.0, 1.0);
    let confidence = (confidence * 1000.0).round() / 1000.0;
    json!({
        "document_id": id,
        "binary_score": if yes { "yes" } else { "no" },
        "confidence": confidence,
    })
}
