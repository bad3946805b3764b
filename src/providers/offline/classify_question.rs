//! `classify_question`: is a question simple (one search should do) or complex (it
//! needs the corrective loop)? The cheap up-front classifier of adaptive RAG (seed
//! 004; Jeong et al. 2024), computed from the question alone.
//!
//! `complex` when either holds, else `simple`:
//! - **several requests in one**: more than one `?`, or a clause joined by `and
//!   then`, `, and`, `, or`, `as well as`, or a comparison (`difference between`,
//!   `compare`, ` vs`, `versus`) — a multi-hop question needs more than one page;
//! - **vocabulary outside the corpus** (with an index): a content term of the question
//!   that no chunk holds and that no [`super::SYNONYMS`] entry translates — the asker's
//!   words are not the documentation's, which one search with them rarely fixes.
//!
//! A question with no content term is `simple` (there is nothing to search better).

use serde_json::{json, Value};

use super::text::Analyzer;
use crate::retrieval::Index;

/// Phrases that join two requests or compare two things (matched lowercase).
const MULTI_PART: &[&str] = &[
    "and then",
    ", and ",
    ", or ",
    "as well as",
    "difference between",
    "compare",
    " vs ",
    " vs. ",
    "versus",
];

/// `{"complexity": "simple" | "complex", "reason": string}`.
pub(crate) fn classify(an: &Analyzer, index: Option<&Index>, question: &str) -> Value {
    let q = an.question_terms(question);
    if q.is_empty() {
        return json!({"complexity": "simple", "reason": "no content term"});
    }
    let lower = question.to_lowercase();
    if question.matches('?').count() > 1 || MULTI_PART.iter().any(|p| lower.contains(p)) {
        return json!({"complexity": "complex", "reason": "several requests"});
    }
    if let Some(ix) = index {
        let translated = |t: &String| {
            super::SYNONYMS
                .iter()
                .any(|(key, _)| an.distinct(key) == [t.clone()])
        };
        if let Some(t) = q.iter().find(|t| ix.doc_freq(t) == 0 && !translated(t)) {
            return json!({"complexity": "complex", "reason": format!("`{t}` is not in the corpus")});
        }
    }
    json!({"complexity": "simple", "reason": "one request in the corpus's words"})
}
