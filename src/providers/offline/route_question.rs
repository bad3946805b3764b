//! `route_question`: retrieve, or answer directly?
//!
//! Heuristic: `retrieve` when the question has at least one content term (after stop
//! words and question words) and, with an index, at least one of those terms occurs
//! in the corpus; `direct` otherwise (greetings, empty or stop-word-only questions,
//! questions about nothing the corpus mentions).

use serde_json::{json, Value};

use super::text::Analyzer;
use crate::retrieval::Index;

/// `{"route": "retrieve" | "direct"}`.
pub(crate) fn route(an: &Analyzer, index: Option<&Index>, question: &str) -> Value {
    let q = an.question_terms(question);
    let known = match index {
        Some(ix) => q.iter().any(|t| ix.doc_freq(t) > 0),
        None => !q.is_empty(),
    };
    json!({ "route": if known { "retrieve" } else { "direct" } })
}
