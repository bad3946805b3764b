//! `rewrite_query`: a new search query, never one already tried in the run.
//!
//! Inputs: `question`, `documents` (the passages not graded irrelevant: in
//! graphs/crag.yaml the graded survivors) and, optional, `queries` (every query the run
//! has already sent to the retriever, in order; graphs pass their `queries` state field).
//! Each part of the method fixes one way the first search fails:
//!
//! 1. **Base**: the question's content words (stop words and question words
//!    dropped), written twice so they outweigh the expansion terms (each written
//!    once): the new query searches around the question, not away from it.
//! 2. **Synonyms** (`synonyms` on): the Rust vocabulary of everyday programming words
//!    the question uses ([`SYNONYMS`], e.g. `null` → `Option None`) — vocabulary
//!    mismatch between the asker and the book.
//! 3. **Unmatched terms weighed up**: a question term that no kept passage contains is
//!    the part of the question the search has not found yet (the second page of a
//!    two-page question, a word the kept passages only skirt); it is written twice, so
//!    BM25 weighs it double. Only when some passage was kept (else every term is
//!    unmatched and there is nothing to weigh against).
//! 4. **The documentation's own vocabulary**: terms of the section titles and heading
//!    paths of the feedback passages (how the book names the topic), ranked by IDF
//!    times the summed relevance of the passages whose headings hold them.
//! 5. **Pseudo-relevance feedback**: terms of the feedback passages' text, scored by
//!    the sum over passages of `relevance × tf / length` (heading terms counted twice
//!    more) times IDF times the summed relevance of the passages holding them. A
//!    passage's relevance is its IDF-weighted coverage of the question (0..1), so a
//!    kept passage that only skirts the question feeds back little (one off-topic
//!    passage among four no longer steers the next search).
//!
//!    The feedback passages are the call's `documents`. When there are none (every
//!    passage was graded irrelevant, so feeding back from them would drift further),
//!    they are probed from the index: the best chunk for each question term searched
//!    alone (with its synonyms), rarest terms first, at most `feedback_docs` — the page
//!    where that concept is central rather than the pages where the terms co-occur.
//!    Question terms, question words, numbers and terms shorter than 3 characters are
//!    never expansion terms; each is written as its most frequent surface form.
//! 6. **Never a query already tried**: a query's identity is its set of analyzed
//!    terms (BM25 ranks a bag of words, so word order, case and repeats do not make a
//!    different search). The question and every `queries` entry are tried. Expansion
//!    terms are added `expansion_terms` at a time (heading terms first, then feedback
//!    terms, half and half) until the term set is new; when the candidates run out,
//!    the lowest-IDF question words are dropped one at a time, then generic words are
//!    appended. Every step is a pure function of the inputs: the same inputs give the
//!    same query.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::text::{coverage, doc_view, Analyzer, DocView, Idf};
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

/// Appended, one more at a time, when every other candidate was tried.
const FALLBACK_WORDS: &[&str] = &[
    "example",
    "explanation",
    "overview",
    "introduction",
    "usage",
];

/// Most expansion candidates ranked per source (headings, passage text).
const MAX_CANDIDATES: usize = 40;

/// A query's identity: its distinct analyzed terms, sorted.
fn term_set(an: &Analyzer, text: &str) -> Vec<String> {
    let mut v = an.distinct(text);
    v.sort();
    v
}

/// The rewritten query: never a query of `tried` nor the question itself (as far as
/// the candidates reach; see the module documentation).
pub(crate) fn rewrite(
    an: &Analyzer,
    params: &OfflineParams,
    index: Option<&Index>,
    question: &str,
    docs: &[DocView],
    tried: &[String],
) -> String {
    let toks = an.tokens(question);
    let mut q_terms: Vec<String> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    for t in &toks {
        if q_terms.len() >= super::text::MAX_QUESTION_TERMS {
            break;
        }
        if !q_terms.contains(&t.term) {
            q_terms.push(t.term.clone());
            words.push(question.get(t.from..t.to).unwrap_or(&t.term).to_string());
        }
    }
    let mut query_terms: HashSet<String> = q_terms.iter().cloned().collect();

    // 2. synonyms
    let mut synonym_words: Vec<String> = Vec::new();
    if params.synonyms {
        for (key, expansion) in SYNONYMS {
            let key_terms = an.distinct(key);
            if !key_terms.is_empty() && key_terms.iter().all(|k| q_terms.contains(k)) {
                for word in expansion.split_whitespace() {
                    let terms = an.distinct(word);
                    if !terms.is_empty() && terms.iter().any(|t| query_terms.insert(t.clone())) {
                        synonym_words.push(word.to_string());
                    }
                }
            }
        }
    }

    // 3. unmatched question terms, weighed up
    let mut emphasis: Vec<String> = Vec::new();
    let mut unmatched: Vec<String> = Vec::new();
    if !docs.is_empty() {
        for (t, w) in q_terms.iter().zip(&words) {
            if !docs.iter().any(|d| d.all_terms.contains_key(t)) {
                emphasis.push(w.clone());
                unmatched.push(t.clone());
            }
        }
        if emphasis.len() == q_terms.len() {
            emphasis.clear();
            unmatched.clear();
        }
    }

    // 4 + 5. feedback passages and their ranked terms
    let fetched: Vec<DocView>;
    let feedback: &[DocView] = if !docs.is_empty() {
        docs
    } else if let (Some(ix), true) = (index, params.feedback_docs > 0) {
        fetched = probe(an, ix, &q_terms, params);
        &fetched
    } else {
        &[]
    };
    let candidates = if params.expansion_terms > 0 {
        // Each passage feeds back in proportion to how much of the question it covers.
        let idf = Idf::new(index, feedback);
        let w = idf.weights(&q_terms);
        let rel: Vec<f64> = feedback
            .iter()
            .map(|d| coverage(d, &q_terms, &w).0)
            .collect();
        let mut heads = Vec::new();
        // The uncovered part of the question: the sections where its unmatched terms
        // are central name it in the documentation's words (the missing page of a
        // two-page question). Feedback from the kept passages alone would pull the
        // search back to the pages already found.
        if let (Some(ix), false) = (index, unmatched.is_empty()) {
            let probes = search_together(an, ix, &unmatched, params);
            let ones = vec![1.0; probes.len()];
            heads = heading_terms(an, index, &probes, &ones, &query_terms);
        }
        heads.extend(heading_terms(an, index, feedback, &rel, &query_terms));
        let body = expansion(an, index, feedback, &rel, &query_terms, MAX_CANDIDATES);
        interleave(heads, body, params.expansion_terms)
    } else {
        Vec::new()
    };

    // 6. the first candidate whose term set was not tried
    let mut seen: HashSet<Vec<String>> = tried.iter().map(|q| term_set(an, q)).collect();
    seen.insert(term_set(an, question));
    let compose = |base: &[String], extra: &[String]| -> String {
        base.iter()
            .chain(base)
            .chain(&synonym_words)
            .chain(&emphasis)
            .chain(extra)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let step = params.expansion_terms.max(1);
    let mut n = params.expansion_terms.min(candidates.len());
    loop {
        let q = compose(&words, &candidates[..n]);
        if !q.trim().is_empty() && !seen.contains(&term_set(an, &q)) {
            return q;
        }
        if n >= candidates.len() {
            break;
        }
        n = (n + step).min(candidates.len());
    }
    // Drop question words, lowest IDF first (the most common word is the likeliest
    // to have pulled in the wrong pages).
    let idf = Idf::new(index, feedback);
    let mut order: Vec<usize> = (0..words.len()).collect();
    order.sort_by(|&a, &b| {
        idf.idf(&q_terms[a])
            .total_cmp(&idf.idf(&q_terms[b]))
            .then_with(|| a.cmp(&b))
    });
    if words.len() > 1 {
        for &drop in &order {
            let base: Vec<String> = (0..words.len())
                .filter(|&i| i != drop)
                .map(|i| words[i].clone())
                .collect();
            let q = compose(&base, &candidates);
            if !q.trim().is_empty() && !seen.contains(&term_set(an, &q)) {
                return q;
            }
        }
    }
    let mut q = compose(&words, &candidates);
    for w in FALLBACK_WORDS {
        if !q.is_empty() {
            q.push(' ');
        }
        q.push_str(w);
        if !seen.contains(&term_set(an, &q)) {
            return q;
        }
    }
    q
}

/// Heading terms first, then passage terms, `k` at a time half and half (heading
/// terms rounded up); duplicates dropped. Surface forms.
fn interleave(heads: Vec<(String, String)>, body: Vec<(String, String)>, k: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    let (mut h, mut b) = (heads.into_iter(), body.into_iter());
    let per_head = k.div_ceil(2).max(1);
    let per_body = k.saturating_sub(per_head).max(1);
    loop {
        let mut progressed = false;
        for (source, count) in [(&mut h, per_head), (&mut b, per_body)] {
            let mut got = 0;
            while got < count {
                let Some((term, surface)) = source.next() else {
                    break;
                };
                progressed = true;
                if taken.insert(term) {
                    out.push(surface);
                    got += 1;
                }
            }
        }
        if !progressed {
            return out;
        }
    }
}

/// The best `feedback_docs` chunks for the unmatched terms searched together (with
/// their synonyms): the pages about the part of the question not yet covered.
fn search_together(
    an: &Analyzer,
    ix: &Index,
    terms: &[String],
    params: &OfflineParams,
) -> Vec<DocView> {
    let mut text = terms.join(" ");
    if params.synonyms {
        for t in terms {
            for (key, expansion) in SYNONYMS {
                if an.distinct(key) == [t.clone()] {
                    text.push(' ');
                    text.push_str(expansion);
                }
            }
        }
    }
    ix.search(&text, params.feedback_docs)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| serde_json::to_value(d).ok())
        .enumerate()
        .filter_map(|(i, v)| doc_view(an, &v, i).ok())
        .collect()
}

/// Feedback passages when the call brings none: the best chunk for each question term
/// searched alone (with its synonyms), rarest terms first, at most `feedback_docs`
/// distinct chunks.
fn probe(an: &Analyzer, ix: &Index, q_terms: &[String], params: &OfflineParams) -> Vec<DocView> {
    let mut order: Vec<&String> = q_terms.iter().collect();
    order.sort_by(|a, b| ix.doc_freq(a).cmp(&ix.doc_freq(b)).then_with(|| a.cmp(b)));
    let mut out: Vec<DocView> = Vec::new();
    let mut ids: HashSet<String> = HashSet::new();
    for t in order.into_iter().filter(|t| ix.doc_freq(t) > 0) {
        if out.len() >= params.feedback_docs {
            break;
        }
        let mut text = t.clone();
        if params.synonyms {
            for (key, expansion) in SYNONYMS {
                if an.distinct(key) == [t.clone()] {
                    text.push(' ');
                    text.push_str(expansion);
                }
            }
        }
        let hit = ix.search(&text, 1).unwrap_or_default().into_iter().next();
        if let Some(d) = hit.and_then(|d| serde_json::to_value(d).ok()) {
            if let Ok(view) = doc_view(an, &d, out.len()) {
                if ids.insert(view.id.clone()) {
                    out.push(view);
                }
            }
        }
    }
    out
}

/// Terms of the feedback passages' titles and heading paths as (term, surface form),
/// best first: IDF times the number of passages whose headings hold the term.
fn heading_terms(
    an: &Analyzer,
    index: Option<&Index>,
    feedback: &[DocView],
    rel: &[f64],
    exclude: &HashSet<String>,
) -> Vec<(String, String)> {
    if feedback.is_empty() {
        return Vec::new();
    }
    let idf = Idf::new(index, feedback);
    let mut count: BTreeMap<String, f64> = BTreeMap::new();
    let mut surfaces: HashMap<String, BTreeMap<String, usize>> = HashMap::new();
    for (d, r) in feedback.iter().zip(rel) {
        for tok in an.tokens(&d.heading_text) {
            let t = &tok.term;
            if exclude.contains(t)
                || an.is_question_word(t)
                || t.len() < 3
                || t.chars().all(|c| c.is_ascii_digit())
            {
                continue;
            }
            if let Some(s) = d.heading_text.get(tok.from..tok.to) {
                *surfaces
                    .entry(t.clone())
                    .or_default()
                    .entry(s.to_lowercase())
                    .or_default() += 1;
            }
        }
        for t in &d.heading_terms {
            if surfaces.contains_key(t) {
                *count.entry(t.clone()).or_default() += r;
            }
        }
    }
    let mut ranked: Vec<(String, f64)> = count
        .into_iter()
        .map(|(t, c)| {
            let w = idf.idf(&t) * c;
            (t, w)
        })
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked
        .into_iter()
        .take(MAX_CANDIDATES)
        .map(|(t, _)| {
            let surface = best_surface(&surfaces, &t);
            (t, surface)
        })
        .collect()
}

/// The most frequent surface form of a term (ties: the smallest), else the term.
fn best_surface(surfaces: &HashMap<String, BTreeMap<String, usize>>, t: &str) -> String {
    surfaces
        .get(t)
        .and_then(|m| {
            m.iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(s, _)| s.clone())
        })
        .unwrap_or_else(|| t.to_string())
}

/// The best `k` feedback terms as (term, surface form), best first, ties by term.
fn expansion(
    an: &Analyzer,
    index: Option<&Index>,
    feedback: &[DocView],
    rel: &[f64],
    exclude: &HashSet<String>,
    k: usize,
) -> Vec<(String, String)> {
    if feedback.is_empty() {
        return Vec::new();
    }
    let idf = Idf::new(index, feedback);
    let mut score: BTreeMap<String, f64> = BTreeMap::new();
    let mut surfaces: HashMap<String, BTreeMap<String, usize>> = HashMap::new();
    let mut doc_count: HashMap<String, f64> = HashMap::new();
    for (d, r) in feedback.iter().zip(rel) {
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
            *score.entry(t.clone()).or_default() += r * (*tf as f64 + boost) / len;
            *doc_count.entry(t.clone()).or_default() += r;
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
            let w = s * idf.idf(&t) * doc_count.get(&t).copied().unwrap_or(0.0);
            (t, w)
        })
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked
        .into_iter()
        .take(k)
        .map(|(t, _)| {
            let surface = best_surface(&surfaces, &t);
            (t, surface)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn docs(an: &Analyzer) -> Vec<DocView> {
        [
            ("a", "ch16-01-threads.html", "Using Threads to Run Code Simultaneously", "Calling join on the JoinHandle blocks the thread currently running until the thread represented by the handle terminates."),
            ("b", "ch16-01-threads.html", "Waiting for All Threads to Finish Using join Handles", "The spawned thread may be stopped prematurely when the main thread ends; join waits for it."),
            ("c", "ch17-02-concurrency-with-async.html", "Applying Concurrency with Async", "An async block runs concurrently with other futures; await the handle to wait for it."),
        ]
        .iter()
        .enumerate()
        .map(|(i, (id, source, heading, content))| {
            let v = json!({"id": id, "content": content,
                "metadata": {"source": source, "heading_path": [heading]}});
            doc_view(an, &v, i).unwrap()
        })
        .collect()
    }

    const Q: &str = "Output from a background thread gets cut off when the program ends. How do I make the program wait for it?";

    #[test]
    fn never_repeats_a_query_already_tried() {
        let an = Analyzer::new();
        let p = OfflineParams::default();
        for d in [docs(&an), Vec::new()] {
            let mut tried: Vec<String> = vec![Q.to_string()];
            for _ in 0..12 {
                let q = rewrite(&an, &p, None, Q, &d, &tried);
                let set = term_set(&an, &q);
                for t in &tried {
                    assert_ne!(
                        set,
                        term_set(&an, t),
                        "{q:?} repeats {t:?} (tried: {tried:?})"
                    );
                }
                tried.push(q);
            }
        }
        // Word order, case and repeats do not make a new query.
        let an = Analyzer::new();
        let d = docs(&an);
        let first = rewrite(&an, &p, None, Q, &d, &[]);
        let shuffled: Vec<&str> = first.split_whitespace().rev().collect();
        let again = rewrite(&an, &p, None, Q, &d, &[shuffled.join(" ").to_uppercase()]);
        assert_ne!(term_set(&an, &again), term_set(&an, &first));
    }

    #[test]
    fn the_same_inputs_give_the_same_query() {
        let an = Analyzer::new();
        let p = OfflineParams::default();
        let d = docs(&an);
        let tried = vec![Q.to_string(), "thread join".to_string()];
        let a = rewrite(&an, &p, None, Q, &d, &tried);
        for _ in 0..5 {
            assert_eq!(rewrite(&Analyzer::new(), &p, None, Q, &d, &tried), a);
        }
    }

    #[test]
    fn unmatched_question_terms_are_weighed_up_and_headings_feed_back() {
        let an = Analyzer::new();
        let p = OfflineParams::default();
        let d = docs(&an);
        let q = rewrite(&an, &p, None, Q, &d, &[]);
        let count = |w: &str| {
            q.split_whitespace()
                .filter(|x| x.eq_ignore_ascii_case(w))
                .count()
        };
        // `background` is in no kept passage: written once more than the matched `thread`.
        assert_eq!(count("background"), 3, "{q}");
        assert_eq!(count("thread"), 2, "{q}");
        // Vocabulary of the kept passages' section titles.
        assert!(
            q.to_lowercase().contains("join") || q.to_lowercase().contains("handles"),
            "{q}"
        );
    }

    #[test]
    fn an_off_topic_passage_feeds_back_less() {
        let an = Analyzer::new();
        let p = OfflineParams {
            expansion_terms: 2,
            ..OfflineParams::default()
        };
        let mut d = docs(&an);
        // Kept (it names `thread`) but about something else.
        let off = json!({"id": "z", "content": "Patterns match ranges; patterns bind values; patterns destructure structs, and patterns bind enums. No thread is involved.",
            "metadata": {"source": "ch19-03-pattern-syntax.html", "heading_path": ["Pattern Syntax"]}});
        d.push(doc_view(&an, &off, 3).unwrap());
        let q = rewrite(
            &an,
            &p,
            None,
            "How do I wait for a spawned thread to finish?",
            &d,
            &[],
        );
        assert!(!q.to_lowercase().contains("pattern"), "{q}");
    }
}
