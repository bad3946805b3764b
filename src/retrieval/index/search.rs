//! BM25 search over an open index, and reading its stored documents back.

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::{TantivyDocument, Term};

use super::super::{Document, RetrievalError};
use super::{tv, Index, HEADINGS_BOOST, MAX_QUERY_TERMS, TITLE_BOOST};

/// Query-time weights of a match in each field, relative to the chunk's text (1.0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldWeights {
    /// A clause on the page title field (0: none; default 0.1).
    pub title: f32,
    /// A clause on the chunk's heading path field (0: none, the default).
    pub headings: f32,
}

impl Default for FieldWeights {
    fn default() -> Self {
        FieldWeights {
            title: TITLE_BOOST,
            headings: HEADINGS_BOOST,
        }
    }
}

impl Index {
    /// BM25 search. `query` is free text: it is analyzed into terms and matched as a
    /// disjunction over the chunk's text (with its heading context) and, weighted by
    /// [`FieldWeights::default`], the page title; no query syntax is interpreted, so
    /// any text is accepted. Only the first [`MAX_QUERY_TERMS`] terms count. Returns at most `top_k` documents ordered by score
    /// descending, then id ascending; each carries its stored metadata plus `score`
    /// (f64). A query with no terms (empty, punctuation or stop words only) or
    /// `top_k == 0` returns an empty list.
    ///
    /// # Errors
    /// [`RetrievalError::Tantivy`] if the index cannot be read,
    /// [`RetrievalError::Corrupt`] if a stored document cannot be decoded.
    pub fn search(&self, query: &str, top_k: usize) -> Result<Vec<Document>, RetrievalError> {
        self.search_with(query, top_k, &FieldWeights::default())
    }

    /// [`Index::search`] with other field weights (for measurements).
    ///
    /// # Errors
    /// As [`Index::search`].
    pub fn search_with(
        &self,
        query: &str,
        top_k: usize,
        weights: &FieldWeights,
    ) -> Result<Vec<Document>, RetrievalError> {
        let mut terms = self.analyze(query);
        // A pasted document as a question must not turn into a query of thousands of
        // clauses: keep the first MAX_QUERY_TERMS terms (repeats count, as they weigh).
        terms.truncate(MAX_QUERY_TERMS);
        if terms.is_empty() || top_k == 0 {
            return Ok(Vec::new());
        }
        let f = self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::with_capacity(terms.len() * 3);
        for t in &terms {
            let tq = |field: Field| {
                TermQuery::new(
                    Term::from_field_text(field, t),
                    IndexRecordOption::WithFreqs,
                )
            };
            clauses.push((Occur::Should, Box::new(tq(f.content))));
            for (field, w) in [(f.headings, weights.headings), (f.title, weights.title)] {
                if w > 0.0 {
                    clauses.push((
                        Occur::Should,
                        Box::new(BoostQuery::new(Box::new(tq(field)), w)),
                    ));
                }
            }
        }
        let query = BooleanQuery::new(clauses);
        let searcher = self.reader.searcher();
        let total = searcher.num_docs() as usize;
        if total == 0 {
            return Ok(Vec::new());
        }
        // Collect until every document tied with the k-th score is among the hits.
        let mut limit = (top_k.saturating_add(16)).min(total);
        let hits = loop {
            let hits = searcher
                .search(&query, &TopDocs::with_limit(limit).order_by_score())
                .map_err(tv(&self.dir))?;
            let complete = hits.len() < limit || limit >= total;
            let boundary_clear = hits.len() > top_k && hits[hits.len() - 1].0 < hits[top_k - 1].0;
            if complete || boundary_clear {
                break hits;
            }
            limit = limit.saturating_mul(2).min(total);
        };
        let cutoff = if hits.len() > top_k {
            hits[top_k - 1].0
        } else {
            f32::NEG_INFINITY
        };
        let mut docs = Vec::with_capacity(top_k + 4);
        for (score, addr) in hits.into_iter().filter(|(s, _)| *s >= cutoff) {
            let doc: TantivyDocument = searcher.doc(addr).map_err(tv(&self.dir))?;
            docs.push((score, self.decode(&doc, Some(score))?));
        }
        docs.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
        docs.truncate(top_k);
        Ok(docs.into_iter().map(|(_, d)| d).collect())
    }

    /// Every chunk of the index, ordered by id, without `score`. Dense retrieval
    /// embeds these.
    ///
    /// # Errors
    /// [`RetrievalError::Tantivy`] if the index cannot be read,
    /// [`RetrievalError::Corrupt`] if a stored document cannot be decoded.
    pub fn documents(&self) -> Result<Vec<Document>, RetrievalError> {
        let searcher = self.reader.searcher();
        let mut docs = Vec::with_capacity(searcher.num_docs() as usize);
        for (ord, segment) in searcher.segment_readers().iter().enumerate() {
            for doc_id in segment.doc_ids_alive() {
                let addr = tantivy::DocAddress::new(ord as u32, doc_id);
                let doc: TantivyDocument = searcher.doc(addr).map_err(tv(&self.dir))?;
                docs.push(self.decode(&doc, None)?);
            }
        }
        docs.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(docs)
    }

    fn decode(
        &self,
        doc: &TantivyDocument,
        score: Option<f32>,
    ) -> Result<Document, RetrievalError> {
        let get = |field: Field, name: &str| {
            doc.get_first(field)
                .and_then(|v| v.as_str())
                .map(str::to_string)
                .ok_or_else(|| RetrievalError::Corrupt {
                    path: self.dir.clone(),
                    message: format!("stored document without {name}"),
                })
        };
        let id = get(self.fields.id, "id")?;
        let content = get(self.fields.content, "content")?;
        let meta = get(self.fields.meta, "metadata")?;
        let mut metadata: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&meta)
            .map_err(|e| RetrievalError::Corrupt {
                path: self.dir.clone(),
                message: format!("metadata of {id} is not a JSON object: {e}"),
            })?;
        if let Some(score) = score {
            metadata.insert("score".into(), serde_json::Value::from(f64::from(score)));
        }
        Ok(Document {
            id,
            content,
            metadata,
        })
    }
}
