//! `reranker: offline`: a classical reranker over the retriever's own BM25 index, no
//! call. Each candidate chunk is scored by evidence the first pass does not see:
//!
//! - **page**: BM25 (k1 1.2, b 0.75) of the query over the candidate's *whole source
//!   page* (its chunks joined, overlaps counted once), with page-level document
//!   frequencies and length: a page about the question outranks a page that mentions
//!   its words once in a dense chunk;
//! - **proximity**: the largest IDF-weighted share of the query's terms found
//!   together in a window of [`WINDOW`] consecutive terms of the chunk: the terms of a
//!   question answered in one passage are close together;
//! - **heading**: the IDF-weighted share of the query's terms in the chunk's title
//!   and heading path: the section that names the topic;
//! - **retrieval**: the backend's score scaled to the best candidate (`1/(1+rank)`
//!   when documents carry no score), so the first pass still counts.
//!
//! Score = Σ weight × part, each part in 0..1 (page BM25 scaled to the best
//! candidate's page); [`OfflineWeights`] gives the weights. Deterministic: the same
//! index and candidates give the same scores; equal scores are ordered by id.
//! Page statistics and every chunk's terms are computed once per index, at the first
//! rerank (a pass over the stored chunks), so a search only looks them up.
use super::{RerankError, Reranker};
use crate::retrieval::{Document, Index};
use futures::future::BoxFuture;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

/// Terms in a proximity window.
pub const WINDOW: usize = 16;

/// The weights of the offline reranker's parts (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OfflineWeights {
    /// The backend's score, scaled to the best candidate.
    pub retrieval: f64,
    /// BM25 of the query over the candidate's page, scaled to the best.
    pub page: f64,
    /// Query terms close together in the chunk.
    pub proximity: f64,
    /// Query terms in the chunk's title and headings.
    pub heading: f64,
}

impl Default for OfflineWeights {
    fn default() -> Self {
        OfflineWeights {
            retrieval: 1.0,
            page: 1.0,
            proximity: 0.5,
            heading: 0.5,
        }
    }
}

/// A term of the index's vocabulary, by number (the statistics hold numbers, not
/// strings, so their size stays a few bytes per term occurrence).
type Term = u32;

/// A chunk term outside the vocabulary (never a query term's number).
const UNKNOWN: Term = Term::MAX;

/// Chunk terms kept for the searches (beyond, a search tokenizes its candidates):
/// 4 bytes each, so at most 32 MB; the Rust book has about 0.3 M.
pub const MAX_KEPT_TERMS: usize = 8 << 20;

/// Term statistics of one page.
#[derive(Debug, Default)]
struct Page {
    tf: HashMap<Term, u32>,
    len: u32,
}

/// Page-level statistics of an index.
#[derive(Debug, Default)]
struct Pages {
    vocab: HashMap<String, Term>,
    pages: HashMap<String, Page>,
    /// Pages containing each term, by term number.
    df: Vec<u32>,
    avg_len: f64,
    /// Per chunk id: its content's terms in order, and its title and heading terms
    /// (empty when the corpus has more than [`MAX_KEPT_TERMS`]).
    chunks: HashMap<String, (Vec<Term>, HashSet<Term>)>,
}

impl Pages {
    fn term(&mut self, t: String) -> Term {
        let next = self.vocab.len() as Term;
        *self.vocab.entry(t).or_insert(next)
    }

    fn known(&self, t: &str) -> Term {
        self.vocab.get(t).copied().unwrap_or(UNKNOWN)
    }
}

/// The offline reranker of one index.
pub struct OfflineReranker {
    index: Arc<Index>,
    weights: OfflineWeights,
    pages: OnceLock<Result<Pages, String>>,
}

impl OfflineReranker {
    /// The reranker over `index`'s pages, with the default weights.
    pub fn new(index: Arc<Index>) -> OfflineReranker {
        OfflineReranker::with_weights(index, OfflineWeights::default())
    }

    /// The reranker with other weights (measurements).
    pub fn with_weights(index: Arc<Index>, weights: OfflineWeights) -> OfflineReranker {
        OfflineReranker {
            index,
            weights,
            pages: OnceLock::new(),
        }
    }

    fn pages(&self) -> Result<&Pages, RerankError> {
        self.pages
            .get_or_init(|| build_pages(&self.index))
            .as_ref()
            .map_err(|e| RerankError::Call {
                reranker: "`offline`".into(),
                message: e.clone(),
            })
    }

    /// One score per candidate (see the module docs).
    ///
    /// # Errors
    /// The index cannot be read.
    pub fn scores(&self, query: &str, docs: &[Document]) -> Result<Vec<f64>, RerankError> {
        let pages = self.pages()?;
        let n_pages = pages.pages.len().max(1) as f64;
        let mut words = self.index.analyze(query);
        words.truncate(crate::retrieval::index::MAX_QUERY_TERMS);
        // A query word the corpus lacks has no number: it matches nothing.
        let q: Vec<Option<Term>> = words.iter().map(|t| pages.vocab.get(t).copied()).collect();
        let idf: Vec<f64> = q
            .iter()
            .map(|t| {
                let df = t.map_or(0.0, |t| f64::from(pages.df[t as usize]));
                (1.0 + (n_pages - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let total: f64 = idf.iter().sum();
        if q.is_empty() || total <= 0.0 {
            return Ok(retrieval_part(docs));
        }
        let mut page_score: HashMap<&str, f64> = HashMap::new();
        for d in docs {
            let src = source_of(d);
            if page_score.contains_key(src) {
                continue;
            }
            let s = pages
                .pages
                .get(src)
                .map_or(0.0, |p| page_bm25(p, &q, &idf, pages.avg_len));
            page_score.insert(src, s);
        }
        let best_page = page_score.values().copied().fold(0.0, f64::max);
        let retrieval = retrieval_part(docs);
        let w = self.weights;
        Ok(docs
            .iter()
            .zip(retrieval)
            .map(|(d, r)| {
                let page = if best_page > 0.0 {
                    page_score[source_of(d)] / best_page
                } else {
                    0.0
                };
                let (prox, head) = match pages.chunks.get(&d.id) {
                    Some((tokens, heads)) => {
                        (proximity(tokens, &q, &idf), heading_share(heads, &q, &idf))
                    }
                    None => {
                        let tokens: Vec<Term> = self
                            .index
                            .tokens(&d.content)
                            .iter()
                            .map(|t| pages.known(t))
                            .collect();
                        let heads: HashSet<Term> = heading_terms(&self.index, d)
                            .iter()
                            .map(|t| pages.known(t))
                            .collect();
                        (
                            proximity(&tokens, &q, &idf),
                            heading_share(&heads, &q, &idf),
                        )
                    }
                };
                let (prox, head) = (prox / total, head / total);
                w.retrieval * r + w.page * page + w.proximity * prox + w.heading * head
            })
            .collect())
    }
}

/// A chunk's source page: `metadata.source` when it is a non-blank string, else the
/// id (the rule of [`crate::retrieval::source_of`], on a typed document).
fn source_of(d: &Document) -> &str {
    d.metadata
        .get("source")
        .and_then(|v| v.as_str())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(&d.id)
}

/// The backend's scores scaled to the best (`1/(1+rank)` without scores).
fn retrieval_part(docs: &[Document]) -> Vec<f64> {
    let scores: Option<Vec<f64>> = docs
        .iter()
        .map(|d| d.metadata.get("score").and_then(|s| s.as_f64()))
        .collect();
    let best = scores
        .as_ref()
        .map(|s| s.iter().copied().fold(f64::MIN, f64::max))
        .filter(|b| b.is_finite() && *b > 0.0);
    match (scores, best) {
        (Some(s), Some(b)) => s.iter().map(|x| (x / b).max(0.0)).collect(),
        _ => (0..docs.len()).map(|i| 1.0 / (1.0 + i as f64)).collect(),
    }
}

fn page_bm25(p: &Page, q: &[Option<Term>], idf: &[f64], avg_len: f64) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let norm = 1.0 - B + B * f64::from(p.len) / avg_len.max(1.0);
    q.iter()
        .zip(idf)
        .map(|(t, w)| {
            let tf = f64::from(t.and_then(|t| p.tf.get(&t).copied()).unwrap_or(0));
            w * tf * (K1 + 1.0) / (tf + K1 * norm)
        })
        .sum()
}

/// The largest IDF sum of distinct query terms within [`WINDOW`] consecutive tokens.
fn proximity(tokens: &[Term], q: &[Option<Term>], idf: &[f64]) -> f64 {
    let pos: Vec<Option<usize>> = tokens
        .iter()
        .map(|t| q.iter().position(|x| *x == Some(*t)))
        .collect();
    let mut count = vec![0usize; q.len()];
    let mut sum = 0.0;
    let mut best: f64 = 0.0;
    for i in 0..pos.len() {
        if let Some(k) = pos[i] {
            if count[k] == 0 {
                sum += idf[k];
            }
            count[k] += 1;
        }
        if i >= WINDOW {
            if let Some(k) = pos[i - WINDOW] {
                count[k] -= 1;
                if count[k] == 0 {
                    sum -= idf[k];
                }
            }
        }
        best = best.max(sum);
    }
    best
}

/// The terms of a chunk's title and heading path.
fn heading_terms(index: &Index, d: &Document) -> Vec<String> {
    let mut text = String::new();
    if let Some(t) = d.metadata.get("title").and_then(|v| v.as_str()) {
        text.push_str(t);
    }
    if let Some(hs) = d.metadata.get("heading_path").and_then(|v| v.as_array()) {
        for h in hs.iter().filter_map(|h| h.as_str()) {
            text.push('\n');
            text.push_str(h);
        }
    }
    index.tokens(&text)
}

fn heading_share(terms: &HashSet<Term>, q: &[Option<Term>], idf: &[f64]) -> f64 {
    q.iter()
        .zip(idf)
        .filter(|(t, _)| t.is_some_and(|t| terms.contains(&t)))
        .map(|(_, w)| w)
        .sum()
}

/// Per page: the chunks in order, overlaps counted once (by `byte_range`); per
/// chunk, its terms (while they fit in [`MAX_KEPT_TERMS`]).
fn build_pages(index: &Index) -> Result<Pages, String> {
    let docs = index.documents().map_err(|e| e.to_string())?;
    let mut out = Pages::default();
    let mut kept = 0usize;
    let mut by_page: HashMap<String, Vec<&Document>> = HashMap::new();
    for d in &docs {
        by_page.entry(source_of(d).to_string()).or_default().push(d);
        if kept <= MAX_KEPT_TERMS {
            let tokens: Vec<Term> = index
                .tokens(&d.content)
                .into_iter()
                .map(|t| out.term(t))
                .collect();
            let heads: HashSet<Term> = heading_terms(index, d)
                .into_iter()
                .map(|t| out.term(t))
                .collect();
            kept += tokens.len() + heads.len();
            out.chunks.insert(d.id.clone(), (tokens, heads));
        }
    }
    if kept > MAX_KEPT_TERMS {
        out.chunks = HashMap::new();
    }
    let mut total_len = 0u64;
    let mut pages: Vec<(String, Page)> = Vec::with_capacity(by_page.len());
    for (source, mut chunks) in by_page {
        let ordinal = |d: &Document| d.metadata.get("chunk_index").and_then(|v| v.as_u64());
        chunks.sort_by_key(|d| (ordinal(d), d.id.clone()));
        let mut page = Page::default();
        let mut end = 0u64;
        for d in chunks {
            let range = d
                .metadata
                .get("byte_range")
                .and_then(|v| v.as_array())
                .and_then(|a| Some((a.first()?.as_u64()?, a.get(1)?.as_u64()?)));
            let text = match range {
                Some((start, stop)) if start < end => {
                    let skip = (end - start).min(d.content.len() as u64) as usize;
                    let mut at = skip;
                    while at < d.content.len() && !d.content.is_char_boundary(at) {
                        at += 1;
                    }
                    end = end.max(stop);
                    &d.content[at..]
                }
                Some((_, stop)) => {
                    end = stop;
                    d.content.as_str()
                }
                None => d.content.as_str(),
            };
            for t in index.tokens(text) {
                let t = out.term(t);
                *page.tf.entry(t).or_insert(0) += 1;
                page.len += 1;
            }
        }
        total_len += u64::from(page.len);
        pages.push((source, page));
    }
    out.df = vec![0; out.vocab.len()];
    for (_, page) in &pages {
        for t in page.tf.keys() {
            out.df[*t as usize] += 1;
        }
    }
    out.avg_len = total_len as f64 / pages.len().max(1) as f64;
    out.pages = pages.into_iter().collect();
    Ok(out)
}

impl Reranker for OfflineReranker {
    fn describe(&self) -> String {
        "`offline`".into()
    }

    fn rerank<'a>(
        &'a self,
        query: &'a str,
        docs: &'a [Document],
    ) -> BoxFuture<'a, Result<Vec<f64>, RerankError>> {
        Box::pin(std::future::ready(self.scores(query, docs)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proximity_takes_the_closest_window() {
        // Terms by number: a = 0, b = 1, x = 2, y = 3.
        let t = |s: &str| {
            s.split(' ')
                .map(|w| ["a", "b", "x", "y"].iter().position(|x| *x == w).unwrap() as Term)
                .collect::<Vec<_>>()
        };
        let q = vec![Some(0), Some(1)];
        let idf = [1.0, 2.0];
        assert_eq!(proximity(&t("a x b"), &q, &idf), 3.0);
        let far = format!("a {} b", vec!["x"; WINDOW].join(" "));
        assert_eq!(
            proximity(&t(&far), &q, &idf),
            2.0,
            "too far apart: the rarer alone"
        );
        assert_eq!(proximity(&t("x y"), &q, &idf), 0.0);
    }
}
