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

/// Term statistics of one page.
#[derive(Debug, Default)]
struct Page {
    tf: HashMap<String, u32>,
    len: u32,
}

/// Page-level statistics of an index.
#[derive(Debug, Default)]
struct Pages {
    pages: HashMap<String, Page>,
    df: HashMap<String, u32>,
    avg_len: f64,
    /// Per chunk id: its content's terms in order, and its title and heading terms.
    chunks: HashMap<String, (Vec<String>, HashSet<String>)>,
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
        let mut q = self.index.analyze(query);
        q.truncate(crate::retrieval::index::MAX_QUERY_TERMS);
        let idf: Vec<f64> = q
            .iter()
            .map(|t| {
                let df = f64::from(pages.df.get(t).copied().unwrap_or(0));
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
                    None => (
                        proximity(&self.index.tokens(&d.content), &q, &idf),
                        heading_share(&heading_terms(&self.index, d), &q, &idf),
                    ),
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

fn page_bm25(p: &Page, q: &[String], idf: &[f64], avg_len: f64) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let norm = 1.0 - B + B * f64::from(p.len) / avg_len.max(1.0);
    q.iter()
        .zip(idf)
        .map(|(t, w)| {
            let tf = f64::from(p.tf.get(t).copied().unwrap_or(0));
            w * tf * (K1 + 1.0) / (tf + K1 * norm)
        })
        .sum()
}

/// The largest IDF sum of distinct query terms within [`WINDOW`] consecutive tokens.
fn proximity(tokens: &[String], q: &[String], idf: &[f64]) -> f64 {
    let pos: Vec<Option<usize>> = tokens
        .iter()
        .map(|t| q.iter().position(|x| x == t))
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
fn heading_terms(index: &Index, d: &Document) -> HashSet<String> {
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
    index.tokens(&text).into_iter().collect()
}

fn heading_share(terms: &HashSet<String>, q: &[String], idf: &[f64]) -> f64 {
    q.iter()
        .zip(idf)
        .filter(|(t, _)| terms.contains(*t))
        .map(|(_, w)| w)
        .sum()
}

/// Per page: the chunks in order, overlaps counted once (by `byte_range`).
fn build_pages(index: &Index) -> Result<Pages, String> {
    let docs = index.documents().map_err(|e| e.to_string())?;
    let mut out = Pages::default();
    let mut by_page: HashMap<String, Vec<&Document>> = HashMap::new();
    for d in &docs {
        out.chunks.insert(
            d.id.clone(),
            (index.tokens(&d.content), heading_terms(index, d)),
        );
        by_page.entry(source_of(d).to_string()).or_default().push(d);
    }
    let mut total_len = 0u64;
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
                *page.tf.entry(t).or_insert(0) += 1;
                page.len += 1;
            }
        }
        for t in page.tf.keys() {
            *out.df.entry(t.clone()).or_insert(0) += 1;
        }
        total_len += u64::from(page.len);
        out.pages.insert(source, page);
    }
    out.avg_len = total_len as f64 / out.pages.len().max(1) as f64;
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
        let t = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let q = t("a b");
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
