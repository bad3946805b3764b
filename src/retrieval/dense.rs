//! Dense and hybrid retrieval over the chunks of a BM25 [`Index`].
//!
//! [`DenseIndex::open_or_build`] embeds every chunk of an index once (through an
//! [`Embedder`]) and keeps the vectors on disk next to the index
//! (`<index dir>.vectors/<key>.vec`, see the store layout in `vectors.rs`), keyed by
//! chunk id and by the embedder's identity (model, base URL, requested dimensions):
//! a change of model embeds again, a changed corpus embeds only its new chunks.
//! Vectors are stored at unit length, so cosine similarity is a dot product.
//!
//! [`DenseRetriever`] answers a query by embedding it (one request per search) and
//! scoring every chunk exactly (brute force: 1614 chunks for the Rust book), ordered
//! by cosine descending, then chunk id ascending. In [`Fusion::Hybrid`] mode the BM25
//! list and the dense list (each cut to `max(top_k, 100)`) are fused by reciprocal
//! rank (Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms Condorcet
//! and individual Rank Learning Methods", SIGIR 2009):
//!
//! ```text
//! score(d) = Σ over the lists that hold d of 1 / (k + rank(d)),   rank from 1, k = 60 by default
//! ```
//!
//! ties again broken by chunk id.
use super::embed::Embedder;
use super::vectors::{self, Appender};
use super::RetrievalError;
use super::{Document, Index};
use super::{OpenContext, Opened, Retriever, SearchFuture};
use crate::spec::types::EmbeddingOptions;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Candidates each list contributes to a hybrid fusion (at least `top_k`).
pub const HYBRID_DEPTH: usize = 100;
/// The reciprocal rank fusion constant when the spec sets none.
pub const DEFAULT_RRF_K: u32 = 60;

/// The chunks of an index with their unit-length vectors, in id order.
pub struct DenseIndex {
    docs: Vec<Document>,
    /// `docs.len() × dim` values, row `i` is the vector of `docs[i]`.
    matrix: Vec<f32>,
    dim: usize,
    identity: String,
    path: PathBuf,
}

impl std::fmt::Debug for DenseIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseIndex")
            .field("chunks", &self.docs.len())
            .field("dim", &self.dim)
            .field("path", &self.path)
            .finish()
    }
}

/// What [`DenseIndex::open_or_build`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseReport {
    /// Chunks in the index.
    pub chunks: usize,
    /// Chunks embedded by this call (0 when every vector was on disk).
    pub embedded: usize,
    /// Embedding requests made.
    pub requests: usize,
    /// Vector size.
    pub dim: usize,
    /// The vector store file.
    pub path: PathBuf,
    /// Things worth telling the user (a store that could not be used, ...).
    pub notes: Vec<String>,
    /// Wall time of the call, in seconds.
    pub seconds: f64,
}

fn normalize(v: &mut [f32]) {
    let norm = v
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in v {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

/// Dot product with eight independent accumulators, so the compiler vectorizes it
/// (a single running f32 sum cannot be reordered).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn uuid_of(id: &str) -> Result<uuid::Uuid, String> {
    uuid::Uuid::parse_str(id).map_err(|_| format!("chunk id `{id}` is not a UUID"))
}

impl DenseIndex {
    /// Loads the vectors of every chunk of `index` made by `embedder`, embedding
    /// (and storing) the chunks that have none. `progress(done, total)` is called
    /// after every stored batch.
    ///
    /// # Errors
    /// The embedder's message (naming the model) when a request fails, or a message
    /// naming the store file when it cannot be written.
    pub async fn open_or_build(
        index: &Index,
        embedder: &Embedder,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<(DenseIndex, DenseReport), String> {
        let started = Instant::now();
        let docs = index.documents().map_err(|e| e.to_string())?;
        let ids: Vec<uuid::Uuid> = docs
            .iter()
            .map(|d| uuid_of(&d.id))
            .collect::<Result<_, _>>()?;
        let identity = embedder.identity();
        let path = vectors::store_path(index.dir(), &identity);
        let mut loaded = vectors::load(&path, &identity);
        let mut notes: Vec<String> = loaded.note.take().into_iter().collect();
        let (mut embedded, mut requests) = (0usize, 0usize);
        let mut any_reset = false;
        // The chunks whose vectors come from the store (handed to the recorder below).
        let from_store: Vec<usize> = if embedder.wants_stored() {
            (0..docs.len())
                .filter(|&i| loaded.records.contains_key(&ids[i]))
                .collect()
        } else {
            Vec::new()
        };
        // Two passes at most: the second one only when the server's vector size
        // changed under the same identity (the store is then started afresh).
        for _pass in 0..2 {
            let missing: Vec<usize> = (0..docs.len())
                .filter(|&i| !loaded.records.contains_key(&ids[i]))
                .collect();
            if missing.is_empty() {
                break;
            }
            let texts: Vec<String> = missing.iter().map(|&i| docs[i].content.clone()).collect();
            let mut appender: Option<Appender> = match loaded.dim {
                Some(_) => {
                    Some(Appender::open(&path, loaded.valid_len).map_err(|e| e.to_string())?)
                }
                None => None,
            };
            let mut reset = false;
            let total = missing.len();
            let mut done = 0usize;
            let mut store_err: Option<RetrievalError> = None;
            let result = embedder
                .embed_all(&texts, |vs, start| {
                    requests += 1;
                    if store_err.is_some() {
                        return;
                    }
                    let dim = vs.first().map_or(0, Vec::len);
                    if loaded.dim != Some(dim) {
                        if loaded.dim.is_some() {
                            notes.push(format!(
                                "the server now returns {dim}-dimensional vectors for `{}` (stored: {}); re-embedding every chunk",
                                embedder.model(),
                                loaded.dim.unwrap_or(0)
                            ));
                            reset = true;
                        }
                        loaded.records.clear();
                        loaded.stored = 0;
                        loaded.dim = Some(dim);
                        match vectors::rewrite(&path, &identity, dim, std::iter::empty())
                            .and_then(|len| {
                                loaded.valid_len = len;
                                Appender::open(&path, len)
                            }) {
                            Ok(a) => appender = Some(a),
                            Err(e) => {
                                store_err = Some(e);
                                return;
                            }
                        }
                    }
                    let batch: Vec<(uuid::Uuid, Vec<f32>)> = vs
                        .iter()
                        .enumerate()
                        .map(|(j, v)| {
                            let mut v = v.clone();
                            normalize(&mut v);
                            (ids[missing[start + j]], v)
                        })
                        .collect();
                    if let Some(a) = appender.as_mut() {
                        if let Err(e) = a.append(&batch) {
                            store_err = Some(e);
                            return;
                        }
                    }
                    loaded.stored += batch.len();
                    loaded.valid_len += (batch.len() * (16 + 4 * dim)) as u64;
                    for (id, v) in batch {
                        loaded.records.insert(id, v);
                    }
                    done += vs.len();
                    progress(done, total);
                })
                .await;
            if let Some(a) = appender {
                a.finish().map_err(|e| e.to_string())?;
            }
            if let Some(e) = store_err {
                return Err(format!("vector store: {e}"));
            }
            result?;
            embedded += done;
            any_reset |= reset;
            if !reset {
                break;
            }
        }
        let dim = loaded.dim.unwrap_or(0);
        // After a size change every chunk was embedded (and recorded) again.
        let stored: Vec<usize> = if any_reset { Vec::new() } else { from_store };
        if !stored.is_empty() {
            let texts: Vec<String> = stored.iter().map(|&i| docs[i].content.clone()).collect();
            let vs: Vec<Vec<f32>> = stored
                .iter()
                .filter_map(|&i| loaded.records.get(&ids[i]).cloned())
                .collect();
            embedder.stored(&texts, &vs)?;
        }
        // Compact when dead records (removed chunks, repeats) outnumber live ones.
        if loaded.stored > 2 * docs.len() + 64 {
            let live = ids
                .iter()
                .filter_map(|id| loaded.records.get(id).map(|v| (id, v.as_slice())));
            vectors::rewrite(&path, &identity, dim, live).map_err(|e| e.to_string())?;
        }
        let mut matrix = Vec::with_capacity(docs.len() * dim);
        for (i, id) in ids.iter().enumerate() {
            match loaded.records.get(id) {
                Some(v) if v.len() == dim => matrix.extend_from_slice(v),
                _ => {
                    return Err(format!(
                        "vector store {}: no vector for chunk {}",
                        path.display(),
                        docs[i].id
                    ))
                }
            }
        }
        let report = DenseReport {
            chunks: docs.len(),
            embedded,
            requests,
            dim,
            path: path.clone(),
            notes,
            seconds: started.elapsed().as_secs_f64(),
        };
        Ok((
            DenseIndex {
                docs,
                matrix,
                dim,
                identity,
                path,
            },
            report,
        ))
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when the index holds no chunk.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Vector size.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The embedder identity the vectors were made under.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The vector store file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Positions of the `n` chunks most similar to `query_vec` (any length: it is
    /// normalized here), with their cosine, ordered by cosine descending then chunk id
    /// ascending.
    ///
    /// # Errors
    /// A message when the query vector's size differs from the stored vectors'.
    pub fn nearest(&self, query_vec: &[f32], n: usize) -> Result<Vec<(usize, f32)>, String> {
        if query_vec.len() != self.dim {
            return Err(format!(
                "the query vector has {} dimensions but the stored vectors have {} (did the server's model change? the store is {})",
                query_vec.len(),
                self.dim,
                self.path.display()
            ));
        }
        let mut q = query_vec.to_vec();
        normalize(&mut q);
        let mut scored: Vec<(usize, f32)> = self
            .matrix
            .chunks_exact(self.dim.max(1))
            .enumerate()
            .map(|(i, row)| (i, dot(row, &q)))
            .collect();
        // Rows are in id order, so the position breaks ties by id.
        let cmp = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let n = n.min(scored.len());
        if n == 0 {
            return Ok(Vec::new());
        }
        if n < scored.len() {
            scored.select_nth_unstable_by(n - 1, cmp);
            scored.truncate(n);
        }
        scored.sort_by(cmp);
        Ok(scored)
    }

    /// The chunk at position `i` (id order).
    pub fn doc(&self, i: usize) -> Option<&Document> {
        self.docs.get(i)
    }
}

/// How a [`DenseRetriever`] ranks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fusion {
    /// Cosine only.
    Dense,
    /// BM25 and cosine lists fused by reciprocal rank with this `k`.
    Hybrid {
        /// The RRF constant.
        k: u32,
    },
}

/// A `dense` or `hybrid` retriever: an [`Embedder`] for queries, the [`DenseIndex`]
/// of the chunk vectors and (for hybrid) the BM25 [`Index`] of the same chunks.
pub struct DenseRetriever {
    /// The BM25 index of the chunks.
    pub index: Arc<Index>,
    /// The chunk vectors.
    pub dense: Arc<DenseIndex>,
    /// Embeds queries.
    pub embedder: Embedder,
    /// Dense or hybrid.
    pub fusion: Fusion,
}

impl DenseRetriever {
    /// At most `top_k` documents for `query`. `metadata.score` is the cosine (dense)
    /// or the fused score (hybrid, which also sets `bm25_rank` and `dense_rank`, from
    /// 1, `null` when the document is not in that list). A blank query or `top_k == 0`
    /// returns no documents without a request.
    ///
    /// # Errors
    /// The embedder's message when the query cannot be embedded; BM25 errors.
    pub async fn search(&self, query: &str, top_k: usize) -> Result<Vec<Document>, String> {
        if query.trim().is_empty() || top_k == 0 || self.dense.is_empty() {
            return Ok(Vec::new());
        }
        let qv = self.embedder.embed_query(query).await?;
        match self.fusion {
            Fusion::Dense => {
                let hits = self.dense.nearest(&qv, top_k)?;
                Ok(hits
                    .into_iter()
                    .filter_map(|(i, s)| {
                        let mut d = self.dense.doc(i)?.clone();
                        d.metadata.insert("score".into(), Value::from(f64::from(s)));
                        Some(d)
                    })
                    .collect())
            }
            Fusion::Hybrid { k } => {
                let depth = top_k.max(HYBRID_DEPTH);
                let dense = self.dense.nearest(&qv, depth)?;
                let bm25 = self.index.search(query, depth).map_err(|e| e.to_string())?;
                Ok(fuse(&self.dense, &dense, &bm25, k, top_k))
            }
        }
    }
}

/// Reciprocal rank fusion of a dense list (positions into `dense`) and a BM25 list.
fn fuse(
    dense: &DenseIndex,
    dense_hits: &[(usize, f32)],
    bm25: &[Document],
    k: u32,
    top_k: usize,
) -> Vec<Document> {
    use std::collections::HashMap;
    let k = f64::from(k);
    // id → (doc, fused score, bm25 rank, dense rank)
    type Fused = (Document, f64, Option<usize>, Option<usize>);
    let mut acc: HashMap<&str, Fused> = HashMap::new();
    for (r, (i, _)) in dense_hits.iter().enumerate() {
        if let Some(d) = dense.doc(*i) {
            let e = acc
                .entry(d.id.as_str())
                .or_insert_with(|| (d.clone(), 0.0, None, None));
            e.1 += 1.0 / (k + (r + 1) as f64);
            e.3 = Some(r + 1);
        }
    }
    for (r, d) in bm25.iter().enumerate() {
        let e = acc
            .entry(d.id.as_str())
            .or_insert_with(|| (d.clone(), 0.0, None, None));
        e.1 += 1.0 / (k + (r + 1) as f64);
        e.2 = Some(r + 1);
    }
    let mut fused: Vec<_> = acc.into_values().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.id.cmp(&b.0.id)));
    fused.truncate(top_k);
    fused
        .into_iter()
        .map(|(mut d, s, b, n)| {
            d.metadata.insert("score".into(), Value::from(s));
            d.metadata
                .insert("bm25_rank".into(), b.map_or(Value::Null, Value::from));
            d.metadata
                .insert("dense_rank".into(), n.map_or(Value::Null, Value::from));
            d
        })
        .collect()
}

impl Retriever for DenseRetriever {
    fn search<'a>(&'a self, query: &'a str, top_k: usize) -> SearchFuture<'a> {
        Box::pin(async move {
            DenseRetriever::search(self, query, top_k)
                .await
                .map_err(super::SearchError::Backend)
        })
    }
}

type DenseKey = (PathBuf, String);

fn dense_cache() -> &'static Mutex<HashMap<DenseKey, Arc<DenseIndex>>> {
    static CACHE: OnceLock<Mutex<HashMap<DenseKey, Arc<DenseIndex>>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Loads (embedding what is missing, on first use) the chunk vectors of `index` made
/// by `embedder`, once per process. Runs the embedding calls on a thread of its own
/// with its own async runtime, so it may be called from synchronous code and from
/// inside a runtime alike. With `progress`, draws a bar on a terminal and prints the
/// store's notes (a store that could not be used, a changed vector size) on stderr.
///
/// # Errors
/// The embedder's or the store's message.
pub fn open_dense(
    index: &Arc<Index>,
    embedder: &Embedder,
    progress: bool,
) -> Result<Arc<DenseIndex>, String> {
    let key = (index.dir().to_path_buf(), embedder.identity());
    if let Some(d) = dense_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(d);
    }
    let (ix, em) = (Arc::clone(index), embedder.clone());
    let build = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        let bar = super::progress::bar(
            progress,
            ix.num_chunks(),
            "{spinner} embedding [{bar:30}] {pos}/{len} chunks",
        );
        let out = rt.block_on(DenseIndex::open_or_build(&ix, &em, |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }));
        bar.finish_and_clear();
        out
    });
    let (dense, report) = build
        .join()
        .map_err(|_| "embedding the corpus failed unexpectedly".to_string())??;
    if progress {
        for n in &report.notes {
            crate::errln!("note: {n}");
        }
    }
    let dense = Arc::new(dense);
    if let Ok(mut c) = dense_cache().lock() {
        c.insert(key, Arc::clone(&dense));
    }
    Ok(dense)
}

/// Opens the `dense` or `hybrid` (per `fusion`) retriever `name` of kind `kind`
/// over the chunks of `index`, with the embedding model `emb` names.
///
/// # Errors
/// A message naming the retriever: no embedding model, an undeclared one, an
/// embedder that cannot be built, vectors that cannot be computed or loaded.
pub(super) fn open(
    name: &str,
    kind: &str,
    index: Arc<Index>,
    emb: EmbeddingOptions<'_>,
    fusion: Fusion,
    ctx: &OpenContext<'_>,
) -> Result<Opened, String> {
    let at = |e: String| format!("retriever `{name}`: {e}");
    let model = emb
        .model
        .ok_or_else(|| at(format!("kind `{kind}` needs `embedding: <model name>`")))?;
    let spec_model = ctx
        .models
        .get(model)
        .ok_or_else(|| at(format!("embedding model `{model}` is not declared")))?;
    let embedder = match ctx.embed_calls {
        Some(calls) => {
            Embedder::with_calls(model, spec_model, emb.dimensions, emb.batch_size, calls)
                .map_err(at)?
        }
        None => {
            Embedder::from_model(model, spec_model, emb.dimensions, emb.batch_size).map_err(at)?
        }
    };
    let dense = open_dense(&index, &embedder, ctx.progress).map_err(at)?;
    Ok(Opened {
        retriever: Arc::new(DenseRetriever {
            index: Arc::clone(&index),
            dense,
            embedder,
            fusion,
        }),
        index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_the_plain_sum_at_every_length() {
        for n in [0usize, 1, 7, 8, 9, 17, 64, 1536, 1539] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| f64::from(*x) * f64::from(*y))
                .sum();
            assert!((f64::from(dot(&a, &b)) - plain).abs() < 1e-3, "n={n}");
        }
    }

    #[test]
    fn normalize_gives_unit_length_and_keeps_zero_vectors() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0; 3];
        normalize(&mut z);
        assert_eq!(z, vec![0.0; 3]);
    }
}
