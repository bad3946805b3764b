//! `generate_answer`: an extractive answer with citations.
//!
//! Every document is split into sentences ([`super::text::sentences`]). A sentence's
//! coverage is the IDF-weighted share of the question's content terms it contains;
//! a line that does not end like prose (`.`, `!`, `?`, `:`, `)`) — a heading, a code
//! line, compiler output — counts half. Sentences are chosen greedily (MMR-style): the
//! gain of a candidate is the weight of the question terms it covers that no chosen
//! sentence covers yet, plus a third of the weight of those already covered, plus a
//! bonus for the sentence right after a chosen one (it often carries the
//! explanation; the sentence right after the best match may join even without
//! question terms); a quarter of the document's relevance breaks near ties. Up to
//! `max_sentences` sentences are taken while the gain reaches `min_gain`. A chosen
//! sentence that ends with `:` brings the lines that follow it (a code snippet, at
//! most [`MAX_CONTINUATION_BYTES`]). Sentences are printed in document order, each
//! followed by `[source]`.
//!
//! The answer is the refusal [`super::text::REFUSAL`] when no document is given, when
//! no document covers `answer_min_coverage` of the question, or when no sentence
//! covers `sentence_min_coverage` of it.

use std::collections::HashSet;

use super::text::{coverage, sentences, Analyzer, DocView, Idf, REFUSAL};
use super::OfflineParams;
use crate::retrieval::Index;

/// Sentences longer than this (bytes) are not quoted (code listings, tables).
const MAX_SENTENCE_BYTES: usize = 500;
/// Sentences with fewer whitespace-separated words than this are not quoted.
const MIN_SENTENCE_WORDS: usize = 4;
/// Most sentences considered per document.
const MAX_SENTENCES_PER_DOC: usize = 400;
/// Most bytes of the lines appended after a chosen sentence that ends with `:`.
pub(crate) const MAX_CONTINUATION_BYTES: usize = 240;

struct Candidate {
    doc: usize,
    ordinal: usize,
    text: String,
    /// Indices (into the question terms) of the terms the sentence contains.
    covers: Vec<usize>,
    terms: HashSet<String>,
    /// 1 for prose, 0.5 for a line that does not end like a sentence.
    factor: f64,
    /// The lines after a sentence ending with `:`.
    continuation: Option<String>,
}

fn ends_like_prose(s: &str) -> bool {
    matches!(
        s.chars().last(),
        Some('.' | '!' | '?' | ':' | ')' | '"' | '”' | '’')
    )
}

/// The text after a sentence ending with `:` up to [`MAX_CONTINUATION_BYTES`], cut
/// at a line end; `None` if empty.
fn continuation(content: &str, sentence: &str) -> Option<String> {
    if !sentence.ends_with(':') {
        return None;
    }
    let at = content.find(sentence)? + sentence.len();
    let rest = content.get(at..)?;
    let mut out = String::new();
    for line in rest.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if out.len() + line.len() > MAX_CONTINUATION_BYTES {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    (!out.is_empty()).then_some(out)
}

/// The answer text.
pub(crate) fn generate(
    an: &Analyzer,
    params: &OfflineParams,
    index: Option<&Index>,
    question: &str,
    docs: &[DocView],
) -> String {
    let q = an.question_terms(question);
    if docs.is_empty() || q.is_empty() {
        return REFUSAL.to_string();
    }
    let idf = Idf::new(index, docs);
    let w = idf.weights(&q);
    let total: f64 = w.iter().sum();
    if total <= 0.0 {
        return REFUSAL.to_string();
    }
    let doc_rel: Vec<f64> = docs.iter().map(|d| coverage(d, &q, &w).0).collect();
    if doc_rel.iter().copied().fold(0.0, f64::max) < params.answer_min_coverage {
        return REFUSAL.to_string();
    }

    let mut cands: Vec<Candidate> = Vec::new();
    let mut seen_texts: HashSet<String> = HashSet::new();
    for (di, d) in docs.iter().enumerate() {
        for (si, s) in sentences(&d.content)
            .into_iter()
            .take(MAX_SENTENCES_PER_DOC)
            .enumerate()
        {
            if s.text.len() > MAX_SENTENCE_BYTES
                || s.text.split_whitespace().count() < MIN_SENTENCE_WORDS
            {
                continue;
            }
            let norm = s
                .text
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase();
            if !seen_texts.insert(norm) {
                continue; // overlapping chunks repeat sentences
            }
            let terms: HashSet<String> = an.tokens(s.text).into_iter().map(|t| t.term).collect();
            let covers: Vec<usize> = (0..q.len()).filter(|&i| terms.contains(&q[i])).collect();
            let factor = if ends_like_prose(s.text) { 1.0 } else { 0.5 };
            let continuation = continuation(&d.content, s.text);
            cands.push(Candidate {
                doc: di,
                ordinal: si,
                text: s.text.to_string(),
                covers,
                terms,
                factor,
                continuation,
            });
        }
    }
    let cov = |c: &Candidate| c.factor * c.covers.iter().map(|&i| w[i]).sum::<f64>() / total;
    let best = cands.iter().map(cov).fold(0.0, f64::max);
    if best < params.sentence_min_coverage {
        return REFUSAL.to_string();
    }

    let mut covered = vec![false; q.len()];
    let mut chosen: Vec<usize> = Vec::new();
    while chosen.len() < params.max_sentences {
        let mut pick: Option<(usize, f64, f64)> = None;
        for (ci, c) in cands.iter().enumerate() {
            let follows = chosen
                .iter()
                .any(|&k| cands[k].doc == c.doc && cands[k].ordinal + 1 == c.ordinal);
            let quoted = chosen.iter().any(|&k| {
                cands[k]
                    .continuation
                    .as_deref()
                    .is_some_and(|more| more.contains(c.text.as_str()))
            });
            // A sentence without question terms may only extend the best match.
            let follows_best = chosen
                .first()
                .is_some_and(|&k| cands[k].doc == c.doc && cands[k].ordinal + 1 == c.ordinal);
            if chosen.contains(&ci) || quoted || (c.covers.is_empty() && !follows_best) {
                continue;
            }
            // Skip near-duplicates of a chosen sentence (Jaccard of terms ≥ 0.6).
            let dup = chosen.iter().any(|&k| {
                let t = &cands[k].terms;
                let inter = t.intersection(&c.terms).count() as f64;
                let union = (t.len() + c.terms.len()) as f64 - inter;
                union > 0.0 && inter / union >= 0.6
            });
            if dup {
                continue;
            }
            let marginal = if chosen.is_empty() {
                cov(c)
            } else {
                let new: f64 = c
                    .covers
                    .iter()
                    .filter(|&&i| !covered[i])
                    .map(|&i| w[i])
                    .sum::<f64>()
                    / total;
                let old: f64 = c
                    .covers
                    .iter()
                    .filter(|&&i| covered[i])
                    .map(|&i| w[i])
                    .sum::<f64>()
                    / total;
                c.factor * (new + old / 3.0) + if follows { 0.15 } else { 0.0 }
            };
            let gain = marginal + doc_rel[c.doc] / 4.0;
            if pick.is_none_or(|(_, _, g)| gain > g + 1e-12) {
                pick = Some((ci, marginal, gain));
            }
        }
        let Some((ci, marginal, _)) = pick else { break };
        if !chosen.is_empty() && marginal < params.min_gain {
            break;
        }
        for &i in &cands[ci].covers {
            covered[i] = true;
        }
        chosen.push(ci);
    }
    if chosen.is_empty() {
        return REFUSAL.to_string();
    }
    chosen.sort_by_key(|&k| (cands[k].doc, cands[k].ordinal));
    let parts: Vec<String> = chosen
        .iter()
        .map(|&k| {
            let c = &cands[k];
            match &c.continuation {
                Some(more) => format!("{} {} [{}]", c.text, more, docs[c.doc].source),
                None => format!("{} [{}]", c.text, docs[c.doc].source),
            }
        })
        .collect();
    parts.join(" ")
}
