//! `grade_answer`: is the answer grounded in the documents, and does it address the
//! question?
//!
//! - Citations are stripped first: every `[x]` where `x` is the source or id of a
//!   given document.
//! - `grounded`: every answer sentence with content terms has at least
//!   `support_threshold` of its distinct terms in one single document (content, title
//!   and headings). An answer with no content terms is grounded; a non-empty answer
//!   with no documents is not.
//! - `addresses_question`: the answer holds at least `addresses_threshold` of the
//!   question's content terms, IDF-weighted (all of them count when the question has
//!   none), **and** every key term of the question: the question's terms taken
//!   rarest first (highest IDF) until they make up `key_terms_share` of its IDF
//!   weight — the words that say what the question is about, as opposed to its
//!   common words. A key term counts as present when the answer holds it or one of
//!   its documentation-vocabulary equivalents ([`super::SYNONYMS`]). An extractive
//!   answer that quotes passages about the question's common words but never names
//!   its subject fails here; that is the signal adaptive routing escalates on.
//! - A refusal ("I could not find ...") is grounded and does not address the question.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::text::{is_refusal, sentences, Analyzer, DocView, Idf};
use super::OfflineParams;
use crate::retrieval::Index;

/// Replaces every `[source]` citation naming one of `docs` with a line break (so
/// the text cited by different citations splits into separate claims).
pub(crate) fn strip_citations(answer: &str, docs: &[DocView]) -> String {
    let names: HashSet<&str> = docs
        .iter()
        .flat_map(|d| [d.source.as_str(), d.id.as_str()])
        .filter(|s| !s.is_empty())
        .collect();
    let mut out = String::with_capacity(answer.len());
    let mut rest = answer;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        match after.find(']') {
            Some(close) if names.contains(after[..close].trim()) => {
                out.push_str(&rest[..open]);
                out.push('\n');
                rest = &after[close + 1..];
            }
            _ => {
                out.push_str(&rest[..open + 1]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `{"grounded": bool, "addresses_question": bool}`.
pub(crate) fn grade(
    an: &Analyzer,
    params: &OfflineParams,
    index: Option<&Index>,
    question: &str,
    docs: &[DocView],
    answer: &str,
) -> Value {
    if answer.trim().is_empty() || is_refusal(answer) {
        return json!({ "grounded": true, "addresses_question": false });
    }
    let text = strip_citations(answer, docs);
    let mut grounded = true;
    for s in sentences(&text) {
        let terms: HashSet<String> = an.tokens(s.text).into_iter().map(|t| t.term).collect();
        if terms.is_empty() {
            continue;
        }
        let best = docs
            .iter()
            .map(|d| {
                terms
                    .iter()
                    .filter(|t| d.all_terms.contains_key(*t))
                    .count() as f64
                    / terms.len() as f64
            })
            .fold(0.0, f64::max);
        if best < params.support_threshold {
            grounded = false;
            break;
        }
    }
    let q = an.question_terms(question);
    let addresses = if q.is_empty() {
        true
    } else {
        let answer_terms: HashSet<String> = an.tokens(&text).into_iter().map(|t| t.term).collect();
        let idf = Idf::new(index, docs);
        let w = idf.weights(&q);
        let total: f64 = w.iter().sum();
        let got: f64 = q
            .iter()
            .zip(&w)
            .filter(|(t, _)| answer_terms.contains(*t))
            .map(|(_, x)| x)
            .sum();
        total > 0.0 && got / total >= params.addresses_threshold && {
            // Key terms among the question terms the documents hold: a term no
            // document holds cannot be quoted (the retrieval's fault, not the answer's).
            let (held, held_w): (Vec<String>, Vec<f64>) = q
                .iter()
                .zip(&w)
                .filter(|(t, _)| docs.iter().any(|d| d.all_terms.contains_key(*t)))
                .map(|(t, x)| (t.clone(), *x))
                .unzip();
            key_terms(&held, &held_w, params.key_terms_share)
                .into_iter()
                .all(|t| {
                    answer_terms.contains(t)
                        || equivalents(an, t).iter().any(|e| answer_terms.contains(e))
                })
        }
    };
    json!({ "grounded": grounded, "addresses_question": addresses })
}

/// The question's key terms: rarest first (highest weight, ties by position) until
/// their weight reaches `share` of the total; none when `share` is 0.
pub(crate) fn key_terms<'a>(q: &'a [String], w: &[f64], share: f64) -> Vec<&'a String> {
    let total: f64 = w.iter().sum();
    if share <= 0.0 || total <= 0.0 {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..q.len()).collect();
    order.sort_by(|&a, &b| w[b].total_cmp(&w[a]).then_with(|| a.cmp(&b)));
    let mut out = Vec::new();
    let mut got = 0.0;
    for i in order {
        if got >= share * total - 1e-12 {
            break;
        }
        got += w[i];
        out.push(&q[i]);
    }
    out
}

/// The analyzed terms a key term may be written as in the documentation: the
/// expansions of every [`super::SYNONYMS`] entry whose key is that one term.
fn equivalents(an: &Analyzer, term: &str) -> Vec<String> {
    super::SYNONYMS
        .iter()
        .filter(|(key, _)| an.distinct(key) == [term.to_string()])
        .flat_map(|(_, expansion)| an.distinct(expansion))
        .collect()
}
