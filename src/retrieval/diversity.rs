//! Result diversity: at most `max_per_source` chunks of one source page in a result
//! list, and an optional maximal marginal relevance (MMR) re-ordering ([`Diversity`]),
//! applied by the [`Diversified`] retriever around any backend.
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{Document, Retriever, SearchFuture};

/// How a result list is diversified. `Default`: unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Diversity {
    /// At most this many chunks of one source (`metadata.source`, else the id) in the
    /// results; the freed slots go to the next best chunks of other sources. `None`:
    /// no limit.
    pub max_per_source: Option<usize>,
    /// MMR with this λ in `[0, 1]`: the results are picked one by one, each time the
    /// candidate maximizing `λ·relevance − (1−λ)·max similarity to those picked`, where
    /// relevance is the backend's `score` scaled to the best candidate (else
    /// `1/(1+rank)`) and similarity the Jaccard index of the lowercase word sets of the
    /// two chunks (1 for two chunks of the same source). `None`: backend order.
    pub mmr: Option<f64>,
}

/// Candidates fetched per result slot when a limit applies: with `max_per_source: 1`
/// and top_k 4, the first 32 BM25 hits hold 4 distinct pages for every question of
/// the Rust book set; a list with fewer distinct sources is fetched again, larger.
const OVERFETCH: usize = 8;

impl Diversity {
    /// `true` when results are left as they are.
    pub fn is_identity(&self) -> bool {
        self.max_per_source.is_none() && self.mmr.is_none()
    }

    /// How many candidates to ask the backend for to fill `top_k` slots.
    pub fn fetch(&self, top_k: usize) -> usize {
        if self.is_identity() {
            top_k
        } else {
            top_k.saturating_mul(OVERFETCH).max(top_k)
        }
    }

    /// The first `top_k` of `docs` (best first) keeping at most `max_per_source` per
    /// source, in their original order.
    pub fn apply(&self, docs: Vec<Document>, top_k: usize) -> Vec<Document> {
        let docs = match self.mmr {
            Some(lambda) => mmr(docs, lambda.clamp(0.0, 1.0), self.max_per_source, top_k),
            None => docs,
        };
        let Some(cap) = self.max_per_source else {
            let mut docs = docs;
            docs.truncate(top_k);
            return docs;
        };
        let mut per: HashMap<String, usize> = HashMap::new();
        let mut out = Vec::with_capacity(top_k);
        for d in docs {
            if out.len() >= top_k {
                break;
            }
            let source = source_key(&d).to_string();
            let n = per.entry(source).or_insert(0);
            if *n < cap {
                *n += 1;
                out.push(d);
            }
        }
        out
    }
}

fn source_key(d: &Document) -> &str {
    d.metadata
        .get("source")
        .and_then(|v| v.as_str())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(&d.id)
}

fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
        .map(str::to_lowercase)
        .collect()
}

/// MMR order of `docs` (best first), at most `top_k` picked (respecting `cap` per
/// source while picking), the rest after them in their original order.
fn mmr(docs: Vec<Document>, lambda: f64, cap: Option<usize>, top_k: usize) -> Vec<Document> {
    let n = docs.len();
    let scores: Vec<f64> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            d.metadata
                .get("score")
                .and_then(|v| v.as_f64())
                .filter(|s| s.is_finite())
                .unwrap_or(1.0 / (1.0 + i as f64))
        })
        .collect();
    let best = scores.iter().copied().fold(f64::MIN, f64::max);
    let rel: Vec<f64> = scores
        .iter()
        .map(|s| if best > 0.0 { s / best } else { 0.0 })
        .collect();
    let sets: Vec<HashSet<String>> = docs.iter().map(|d| words(&d.content)).collect();
    let sim = |a: usize, b: usize| -> f64 {
        if source_key(&docs[a]) == source_key(&docs[b]) {
            return 1.0;
        }
        let inter = sets[a].intersection(&sets[b]).count() as f64;
        let union = (sets[a].len() + sets[b].len()) as f64 - inter;
        if union > 0.0 {
            inter / union
        } else {
            0.0
        }
    };
    let mut picked: Vec<usize> = Vec::with_capacity(top_k.min(n));
    let mut max_sim = vec![0.0f64; n];
    let mut used = vec![false; n];
    let mut per: HashMap<&str, usize> = HashMap::new();
    while picked.len() < top_k {
        let mut choice: Option<(f64, usize)> = None;
        for i in (0..n).filter(|&i| !used[i]) {
            if cap.is_some_and(|c| per.get(source_key(&docs[i])).copied().unwrap_or(0) >= c) {
                continue;
            }
            let v = lambda * rel[i] - (1.0 - lambda) * max_sim[i];
            // Ties keep the backend order (first index wins).
            if choice.is_none_or(|(b, _)| v > b) {
                choice = Some((v, i));
            }
        }
        let Some((_, i)) = choice else { break };
        used[i] = true;
        picked.push(i);
        *per.entry(source_key(&docs[i])).or_insert(0) += 1;
        for j in (0..n).filter(|&j| !used[j]) {
            max_sim[j] = max_sim[j].max(sim(i, j));
        }
    }
    let rest: Vec<usize> = (0..n).filter(|&i| !used[i]).collect();
    let mut slots: Vec<Option<Document>> = docs.into_iter().map(Some).collect();
    picked
        .into_iter()
        .chain(rest)
        .filter_map(|i| slots[i].take())
        .collect()
}

/// A retriever whose results are diversified by a [`Diversity`]: it asks `inner` for
/// more candidates ([`Diversity::fetch`]), keeps at most `max_per_source` per source,
/// and asks again with twice as many while the list is short and `inner` returned as
/// many as asked (so a short list means the corpus has no more distinct sources).
pub struct Diversified {
    inner: Arc<dyn Retriever>,
    diversity: Diversity,
}

impl Diversified {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Retriever>, diversity: Diversity) -> Diversified {
        Diversified { inner, diversity }
    }
}

/// Most candidates a diversified search asks for.
const MAX_FETCH: usize = 4096;

impl Retriever for Diversified {
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a> {
        Box::pin(async move {
            let mut fetch = self.diversity.fetch(top_k).min(MAX_FETCH.max(top_k));
            loop {
                let docs = self.inner.search(query, fetch).await?;
                let complete = docs.len() < fetch || fetch >= MAX_FETCH;
                let out = self.diversity.apply(docs, top_k);
                if out.len() >= top_k || complete {
                    return Ok(out);
                }
                fetch = fetch.saturating_mul(2).min(MAX_FETCH);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, source: &str) -> Document {
        let mut m = serde_json::Map::new();
        m.insert("source".into(), source.into());
        Document {
            id: id.into(),
            content: String::new(),
            metadata: m,
        }
    }

    #[test]
    fn caps_per_source_and_fills_with_the_next_best() {
        let docs = vec![
            doc("1", "a"),
            doc("2", "a"),
            doc("3", "a"),
            doc("4", "b"),
            doc("5", "a"),
            doc("6", "c"),
        ];
        let d = Diversity {
            max_per_source: Some(1),
            mmr: None,
        };
        let ids: Vec<_> = d.apply(docs.clone(), 3).into_iter().map(|d| d.id).collect();
        assert_eq!(ids, ["1", "4", "6"]);
        let d = Diversity {
            max_per_source: Some(2),
            mmr: None,
        };
        let ids: Vec<_> = d.apply(docs.clone(), 4).into_iter().map(|d| d.id).collect();
        assert_eq!(ids, ["1", "2", "4", "6"]);
        let ids: Vec<_> = Diversity::default()
            .apply(docs, 4)
            .into_iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(ids, ["1", "2", "3", "4"]);
    }

    #[test]
    fn mmr_prefers_a_different_page_over_a_near_copy() {
        let mut a = doc("1", "a");
        a.content = "ownership moves the string value".into();
        a.metadata.insert("score".into(), 10.0.into());
        let mut b = doc("2", "b");
        b.content = "ownership moves the string value again".into();
        b.metadata.insert("score".into(), 9.0.into());
        let mut c = doc("3", "c");
        c.content = "borrowing lends a reference instead".into();
        c.metadata.insert("score".into(), 8.0.into());
        let d = Diversity {
            max_per_source: None,
            mmr: Some(0.5),
        };
        let ids: Vec<_> = d
            .apply(vec![a.clone(), b.clone(), c.clone()], 2)
            .into_iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(ids, ["1", "3"]);
        let d = Diversity {
            max_per_source: None,
            mmr: Some(1.0),
        };
        let ids: Vec<_> = d
            .apply(vec![a, b, c], 2)
            .into_iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(ids, ["1", "2"], "λ = 1 is the backend order");
    }
}
