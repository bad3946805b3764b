//! `rewrite_query`: a new search query by pseudo-relevance feedback.
//!
//! The query keeps the question's content words (stop words and question words
//! dropped), then adds:
//!
//! 1. with `synonyms` on, the Rust vocabulary of everyday programming words the
//!    question uses ([`SYNONYMS`], e.g. `null` → `Option None`);
//! 2. the `expansion_terms` best feedback terms: the feedback documents are the
//!    call's `documents`, or, when there are none and an index is available, the top
//!    `feedback_docs` search results for the question. A term's score is the sum over
//!    feedback documents of its relative frequency (`tf / length`, title and heading
//!    terms counted twice more) times its IDF (corpus IDF with an index, else the
//!    documents' own). Question terms, question words, numbers and terms shorter than
//!    3 characters are not candidates. Each term is written as its most frequent
//!    surface form.
//!
//! If the result equals the question (ignoring case and spacing), generic words are
//! appended so the loop never searches the same query twice in a row.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::text::{doc_view, Analyzer, DocView, Idf};
use super::OfflineParams;
use crate::retrieval::Index;

/// Everyday programming words (as other languages and newcomers say them) → the words
/// the Rust book uses for the same idea. Generic vocabulary, not tied to any question:
/// the keys are matched on stems of the question's words.
pub const SYNONYMS: &[(&str, &str)] = &[
    ("null", "Option None"),
    ("nil", "Option None"),
    ("exception", "panic Result error"),
    ("crash", "panic"),
    ("inherit", "trait default methods"),
    ("inheritance", "trait default methods"),
    ("subclass", "trait"),
    ("interface", "trait"),
    ("destructor", "Drop"),
    ("cleanup", "Drop"),
    ("finalizer", "Drop"),
    ("lambda", "closure"),
    ("callback", "closure"),
    ("array", "vector Vec"),
    ("list", "vector Vec"),
    ("dictionary", "HashMap"),
    ("dict", "HashMap"),
    ("namespace", "module"),
    ("package", "crate"),
    ("library", "crate"),
    ("template", "generic"),
    ("global", "static"),
    ("constant", "const"),
    ("promise", "future async await"),
    ("coroutine", "future async"),
    ("lock", "Mutex"),
    ("wait", "join"),
    ("stacktrace", "backtrace"),
    ("traceback", "backtrace"),
    ("switch", "match"),
    ("cast", "as From Into"),
    ("convert", "From Into"),
    ("letter", "char"),
    ("character", "char"),
    ("pointer", "reference Box"),
    ("optimize", "opt-level profile"),
    ("visibility", "pub private"),
    ("public", "pub"),
];

/// Appended when nothing else changes the query.
const FALLBACK_WORDS: &str = "example explanation";

/// The rewritten query.
pub(crate) fn rewrite(
    an: &Analyzer,
    params: &OfflineParams,
    index: Option<&Index>,
    question: &str,
    docs: &[DocView],
) -> String {
    let toks = an.tokens(question);
    let mut seen: HashSet<String> = HashSet::new();
    let mut words: Vec<String> = Vec::new();
    for t in &toks {
        if seen.len() >= super::text::MAX_QUESTION_TERMS {
            break;
        }
        if seen.insert(t.term.clone()) {
            words.push(question.get(t.from..t.to).unwrap_or(&t.term).to_string());
        }
    }
    let mut query_terms: HashSet<String> = seen.clone();

    if params.synonyms {
        for (key, expansion) in SYNONYMS {
            let key_terms = an.distinct(key);
            if !key_terms.is_empty() && key_terms.iter().all(|k| seen.contains(k)) {
                for word in expansion.split_whitespace() {
                    let terms = an.distinct(word);
                    if !terms.is_empty() && terms.iter().any(|t| query_terms.insert(t.clone())) {
                        words.push(word.to_string());
                    }
                }
            }
        }
    }

    if params.expansion_terms > 0 {
        let fetched: Vec<DocView>;
        let feedback: &[DocView] = if !docs.is_empty() {
            docs
        } else if let (Some(ix), true) = (index, params.feedback_docs > 0) {
            fetched = ix
                .search(question, params.feedback_docs)
                .unwrap_or_default()
                .iter()
                .filter_map(|d| serde_json::to_value(d).ok())
                .enumerate()
                .filter_map(|(i, v)| doc_view(an, &v, i).ok())
                .collect();
            &fetched
        } else {
            &[]
        };
        for term in expansion(an, index, feedback, &query_terms, params.expansion_terms) {
            query_terms.insert(term.0);
            words.push(term.1);
        }
    }

    let mut query = words.join(" ");
    let norm = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    if norm(&query) == norm(question) || query.trim().is_empty() {
        if !query.trim().is_empty() {
            query.push(' ');
        }
        query.push_str(FALLBACK_WORDS);
        if norm(&query) == norm(question) {
            query.push_str(" overview");
        }
    }
    query
}

/// The best `k` feedback terms as (term, surface form), best first, ties by term.
fn expansion(
    an: &Analyzer,
    index: Option<&Index>,
    feedback: &[DocView],
    exclude: &HashSet<String>,
    k: usize,
) -> Vec<(String, String)> {
    if feedback.is_empty() {
        return Vec::new();
    }
    let idf = Idf::new(index, feedback);
    let mut score: BTreeMap<String, f64> = BTreeMap::new();
    let mut surfaces: HashMap<String, BTreeMap<String, usize>> = HashMap::new();
    let mut doc_count: HashMap<String, usize> = HashMap::new();
    for d in feedback {
        let len = (d.len + d.heading_terms.len()).max(1) as f64;
        for (t, tf) in &d.all_terms {
            if exclude.contains(t)
                || an.is_question_word(t)
                || t.len() < 3
                || t.chars().all(|c| c.is_ascii_digit())
            {
                continue;
            }
            let boost = if d.heading_terms.contains(t) {
                2.0
            } else {
                0.0
            };
            *score.entry(t.clone()).or_default() += (*tf as f64 + boost) / len;
            *doc_count.entry(t.clone()).or_default() += 1;
        }
        for text in [&d.content, &d.heading_text] {
            for tok in an.tokens(text) {
                if score.contains_key(&tok.term) {
                    if let Some(s) = text.get(tok.from..tok.to) {
                        *surfaces
                            .entry(tok.term.clone())
                            .or_default()
                            .entry(s.to_lowercase())
                            .or_default() += 1;
                    }
                }
            }
        }
    }
    let mut ranked: Vec<(String, f64)> = score
        .into_iter()
        .map(|(t, s)| {
            let w = s * idf.idf(&t) * doc_count.get(&t).copied().unwrap_or(1) as f64;
            (t, w)
        })
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked
        .into_iter()
        .take(k)
        .map(|(t, _)| {
            let surface = surfaces
                .get(&t)
                .and_then(|m| {
                    m.iter()
                        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                        .map(|(s, _)| s.clone())
                })
                .unwrap_or_else(|| t.clone());
            (t, surface)
        })
        .collect()
}
