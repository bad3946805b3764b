//! Result diversity: at most `max_per_source` chunks of one source page in a result
//! list ([`Diversity`]), applied by the [`Diversified`] retriever around any backend.
use std::collections::HashMap;
use std::sync::Arc;

use super::{Document, Retriever, SearchFuture};

/// How a result list is diversified. `Default`: unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Diversity {
    /// At most this many chunks of one source (`metadata.source`, else the id) in the
    /// results; the freed slots go to the next best chunks of other sources. `None`:
    /// no limit.
    pub max_per_source: Option<usize>,
}

/// Candidates fetched per result slot when a limit applies: with `max_per_source: 1`
/// and top_k 4, the first 32 BM25 hits hold 4 distinct pages for every question of
/// the Rust book set; a list with fewer distinct sources is fetched again, larger.
const OVERFETCH: usize = 8;

impl Diversity {
    /// `true` when results are left as they are.
    pub fn is_identity(&self) -> bool {
        self.max_per_source.is_none()
    }

    /// How many candidates to ask the backend for to fill `top_k` slots.
    pub fn fetch(&self, top_k: usize) -> usize {
        match self.max_per_source {
            None => top_k,
            Some(_) => top_k.saturating_mul(OVERFETCH).max(top_k),
        }
    }

    /// The first `top_k` of `docs` (best first) keeping at most `max_per_source` per
    /// source, in their original order.
    pub fn apply(&self, docs: Vec<Document>, top_k: usize) -> Vec<Document> {
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
            let source = d
                .metadata
                .get("source")
                .and_then(|v| v.as_str())
                .filter(|s| !s.trim().is_empty())
                .unwrap_or(&d.id)
                .to_string();
            let n = per.entry(source).or_insert(0);
            if *n < cap {
                *n += 1;
                out.push(d);
            }
        }
        out
    }
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
        };
        let ids: Vec<_> = d.apply(docs.clone(), 3).into_iter().map(|d| d.id).collect();
        assert_eq!(ids, ["1", "4", "6"]);
        let d = Diversity {
            max_per_source: Some(2),
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
}
