//! The persistent tantivy BM25 index: building (crash-safe), reuse, and search.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{IndexReader, ReloadPolicy, TantivyDocument, Term};

use super::fingerprint::{scan, Scanned};
use super::ingest::load_file;
use super::{check_dir, default_index_dir, BuildReport, Document, IndexOptions, RetrievalError};

/// Version of the on-disk layout (schema, tokenizer, chunking, metadata keys). An index
/// whose manifest has another version is rebuilt.
pub const FORMAT_VERSION: u32 = 1;

const TOKENIZER: &str = "ragloop_en";
const MANIFEST: &str = "manifest.json";
/// Query-time weight of a match in the page title.
const TITLE_BOOST: f32 = 0.5;
/// Query-time weight of a match in the heading path.
const HEADINGS_BOOST: f32 = 0.8;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Manifest {
    format_version: u32,
    fingerprint: String,
    files: usize,
    chunks: usize,
    skipped: usize,
    warnings: Vec<String>,
    corpus: String,
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    id: Field,
    title: Field,
    headings: Field,
    content: Field,
    meta: Field,
}

/// An open BM25 index over one corpus. Cheap to share across threads (`Send + Sync`);
/// Most query terms a search uses (the rest of a very long query is ignored).
pub const MAX_QUERY_TERMS: usize = 256;

/// searches take `&self`.
pub struct Index {
    reader: IndexReader,
    fields: Fields,
    analyzer: TextAnalyzer,
    dir: PathBuf,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dir", &self.dir)
            .field("chunks", &self.num_chunks())
            .finish()
    }
}

/// The analyzer used for both indexing and queries: simple tokenizer, drop tokens over
/// 40 bytes, lowercase, English stop words, English (Snowball) stemming.
fn analyzer() -> TextAnalyzer {
    let builder = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser);
    match StopWordFilter::new(Language::English) {
        Some(stop) => builder
            .filter(stop)
            .filter(Stemmer::new(Language::English))
            .build(),
        None => builder.filter(Stemmer::new(Language::English)).build(),
    }
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let indexed = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let id = b.add_text_field("id", STRING | STORED);
    let title = b.add_text_field("title", indexed.clone());
    let headings = b.add_text_field("headings", indexed.clone());
    let content = b.add_text_field("content", indexed | STORED);
    let meta = b.add_text_field("meta", STORED);
    (
        b.build(),
        Fields {
            id,
            title,
            headings,
            content,
            meta,
        },
    )
}

fn tv(path: &Path) -> impl Fn(tantivy::TantivyError) -> RetrievalError + '_ {
    move |e| RetrievalError::Tantivy {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

fn progress_bar(enabled: bool, len: usize) -> indicatif::ProgressBar {
    let target = if enabled && std::io::stderr().is_terminal() {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    };
    let pb = indicatif::ProgressBar::with_draw_target(Some(len as u64), target);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} files")
    {
        pb.set_style(style);
    }
    pb
}

/// Outcome of looking at an existing index directory.
enum Existing {
    Usable(Index, Manifest),
    /// Absent or stale; the optional note says why (for unexpected states).
    Rebuild(Option<String>),
}

fn read_existing(dir: &Path, fingerprint: &str) -> Existing {
    let manifest_path = dir.join(MANIFEST);
    let raw = match std::fs::read(&manifest_path) {
        Ok(r) => r,
        Err(_) => {
            let note = dir.join("meta.json").exists().then(|| {
                format!(
                    "index at {} has no manifest (interrupted build?); rebuilding",
                    dir.display()
                )
            });
            return Existing::Rebuild(note);
        }
    };
    let manifest: Manifest = match serde_json::from_slice(&raw) {
        Ok(m) => m,
        Err(e) => {
            return Existing::Rebuild(Some(format!(
                "manifest {} is invalid ({e}); rebuilding",
                manifest_path.display()
            )))
        }
    };
    if manifest.format_version != FORMAT_VERSION {
        return Existing::Rebuild(Some(format!(
            "index at {} has format version {} (expected {FORMAT_VERSION}); rebuilding",
            dir.display(),
            manifest.format_version
        )));
    }
    if manifest.fingerprint != fingerprint {
        return Existing::Rebuild(None);
    }
    match Index::open(dir) {
        Ok(index) if index.num_chunks() == manifest.chunks => Existing::Usable(index, manifest),
        Ok(index) => Existing::Rebuild(Some(format!(
            "index at {} has {} chunks but its manifest says {}; rebuilding",
            dir.display(),
            index.num_chunks(),
            manifest.chunks
        ))),
        Err(e) => Existing::Rebuild(Some(format!("{e}; rebuilding"))),
    }
}

/// `true` if `dir` may be replaced: missing, empty, or looking like an index.
fn replaceable(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Err(_) => !dir.exists(),
        Ok(mut entries) => {
            entries.next().is_none()
                || dir.join(MANIFEST).exists()
                || dir.join("meta.json").exists()
        }
    }
}

/// Removes `.{name}.tmp-<pid>-…` / `.{name}.old-<pid>-…` siblings left by killed
/// builds, when `/proc` shows that process is gone (elsewhere they are left alone).
fn remove_stale_siblings(parent: &Path, name: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        let rest = n
            .strip_prefix(&format!(".{name}.tmp-"))
            .or_else(|| n.strip_prefix(&format!(".{name}.old-")));
        let Some(pid) = rest
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}

impl Index {
    /// Opens the index at `corpus`'s index directory if its manifest matches the
    /// current corpus fingerprint; otherwise builds it (into a temporary sibling
    /// directory, manifest written last, then renamed into place).
    ///
    /// - `corpus`: the corpus directory; only read, never written.
    /// - `out`: the index directory; default [`super::default_index_dir`].
    /// - `opts`: exclusions, chunk sizes, progress bar, `force` rebuild.
    ///
    /// Returns the open index and a [`BuildReport`] (`reused` tells which happened).
    ///
    /// # Errors
    /// [`RetrievalError::CorpusNotFound`] / [`RetrievalError::NotADirectory`] for a bad
    /// corpus, [`RetrievalError::EmptyCorpus`] if no file yields a chunk,
    /// [`RetrievalError::NotAnIndex`] if `out` is an unrelated non-empty directory,
    /// [`RetrievalError::Io`] / [`RetrievalError::Tantivy`] for write failures.
    pub fn open_or_build(
        corpus: &Path,
        out: Option<&Path>,
        opts: &IndexOptions,
    ) -> Result<(Index, BuildReport), RetrievalError> {
        let started = Instant::now();
        check_dir(corpus)?;
        let dest = match out {
            Some(p) => p.to_path_buf(),
            None => default_index_dir(corpus)?,
        };
        let scanned = scan(corpus, opts, FORMAT_VERSION);
        let mut notes = Vec::new();
        if !opts.force {
            match read_existing(&dest, &scanned.fingerprint) {
                Existing::Usable(index, m) => {
                    let report = BuildReport {
                        files: m.files,
                        chunks: m.chunks,
                        skipped: m.skipped,
                        warnings: m.warnings,
                        reused: true,
                        seconds: started.elapsed().as_secs_f64(),
                        index_dir: dest,
                    };
                    return Ok((index, report));
                }
                Existing::Rebuild(note) => notes.extend(note),
            }
        }
        let (index, mut report) = build(corpus, &dest, scanned, opts)?;
        notes.append(&mut report.warnings);
        report.warnings = notes;
        report.seconds = started.elapsed().as_secs_f64();
        Ok((index, report))
    }

    /// Opens an existing index directory without checking the corpus.
    ///
    /// # Errors
    /// [`RetrievalError::Tantivy`] if `dir` is not a readable tantivy index.
    pub fn open(dir: &Path) -> Result<Index, RetrievalError> {
        let index = tantivy::Index::open_in_dir(dir).map_err(tv(dir))?;
        Index::from_tantivy(index, dir)
    }

    fn from_tantivy(index: tantivy::Index, dir: &Path) -> Result<Index, RetrievalError> {
        let schema = index.schema();
        let field = |name: &str| {
            schema.get_field(name).map_err(|_| RetrievalError::Corrupt {
                path: dir.to_path_buf(),
                message: format!("schema has no field {name:?}"),
            })
        };
        let fields = Fields {
            id: field("id")?,
            title: field("title")?,
            headings: field("headings")?,
            content: field("content")?,
            meta: field("meta")?,
        };
        let analyzer = analyzer();
        index.tokenizers().register(TOKENIZER, analyzer.clone());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(tv(dir))?;
        Ok(Index {
            reader,
            fields,
            analyzer,
            dir: dir.to_path_buf(),
        })
    }

    /// Number of chunks (documents) in the index.
    pub fn num_chunks(&self) -> usize {
        self.reader.searcher().num_docs() as usize
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The distinct analyzed terms of `text` (lowercased, stop words removed, stemmed),
    /// in order of first appearance. This is how queries are interpreted.
    pub fn analyze(&self, text: &str) -> Vec<String> {
        let mut analyzer = self.analyzer.clone();
        let mut stream = analyzer.token_stream(text);
        let mut terms: Vec<String> = Vec::new();
        while stream.advance() {
            let t = &stream.token().text;
            if !t.is_empty() && !terms.iter().any(|x| x == t) {
                terms.push(t.clone());
            }
        }
        terms
    }

    /// Number of chunks whose content contains `term`, an already analyzed term (as
    /// returned by [`Index::analyze`]); 0 for an unknown term or if the index cannot be
    /// read. Together with [`Index::num_chunks`] this gives corpus IDF statistics
    /// (used by the `offline` provider).
    pub fn doc_freq(&self, term: &str) -> u64 {
        let searcher = self.reader.searcher();
        searcher
            .doc_freq(&Term::from_field_text(self.fields.content, term))
            .unwrap_or(0)
    }

    /// BM25 search. `query` is free text: it is analyzed into terms and matched as a
    /// disjunction over content, headings and title; no query syntax is interpreted, so
    /// any text is accepted. Only the first [`MAX_QUERY_TERMS`] terms count. Returns at most `top_k` documents ordered by score
    /// descending, then id ascending; each carries its stored metadata plus `score`
    /// (f64). A query with no terms (empty, punctuation or stop words only) or
    /// `top_k == 0` returns an empty list.
    ///
    /// # Errors
    /// [`RetrievalError::Tantivy`] if the index cannot be read,
    /// [`RetrievalError::Corrupt`] if a stored document cannot be decoded.
    pub fn search(&self, query: &str, top_k: usize) -> Result<Vec<Document>, RetrievalError> {
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
            clauses.push((
                Occur::Should,
                Box::new(BoostQuery::new(Box::new(tq(f.headings)), HEADINGS_BOOST)),
            ));
            clauses.push((
                Occur::Should,
                Box::new(BoostQuery::new(Box::new(tq(f.title)), TITLE_BOOST)),
            ));
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

/// Builds the index of `scanned` into a temporary sibling of `dest`, then moves it
/// into place.
fn build(
    corpus: &Path,
    dest: &Path,
    scanned: Scanned,
    opts: &IndexOptions,
) -> Result<(Index, BuildReport), RetrievalError> {
    let Scanned {
        fingerprint,
        files,
        walk_skipped,
        walk_warnings,
    } = scanned;
    let mut skipped = walk_skipped;
    let mut warnings = walk_warnings;
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "index".into());
    if !replaceable(dest) {
        return Err(RetrievalError::NotAnIndex(dest.to_path_buf()));
    }
    std::fs::create_dir_all(&parent).map_err(|e| RetrievalError::io("creating", &parent, e))?;
    remove_stale_siblings(&parent, &name);
    let tmp = parent.join(format!(".{name}.tmp-{}", unique_suffix()));
    std::fs::create_dir(&tmp).map_err(|e| RetrievalError::io("creating", &tmp, e))?;
    let result = write_index(
        corpus,
        &tmp,
        files,
        opts,
        &fingerprint,
        &mut skipped,
        &mut warnings,
    );
    let (n_files, n_chunks) = match result {
        Ok(counts) => counts,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    // Swap into place: old index aside, new one in, old one removed.
    let old = parent.join(format!(".{name}.old-{}", unique_suffix()));
    let had_old = dest.exists();
    if had_old {
        if let Err(e) = std::fs::rename(dest, &old) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(RetrievalError::io("moving aside", dest, e));
        }
    }
    if let Err(e) = std::fs::rename(&tmp, dest) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(RetrievalError::io("moving into place", dest, e));
    }
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
    }
    let index = Index::open(dest)?;
    let report = BuildReport {
        files: n_files,
        chunks: n_chunks,
        skipped,
        warnings,
        reused: false,
        seconds: 0.0,
        index_dir: dest.to_path_buf(),
    };
    Ok((index, report))
}

fn write_index(
    corpus: &Path,
    dir: &Path,
    files: Vec<super::ingest::Candidate>,
    opts: &IndexOptions,
    fingerprint: &str,
    skipped: &mut usize,
    warnings: &mut Vec<String>,
) -> Result<(usize, usize), RetrievalError> {
    let (schema, f) = schema();
    let index = tantivy::Index::create_in_dir(dir, schema).map_err(tv(dir))?;
    index.tokenizers().register(TOKENIZER, analyzer());
    let budget = opts.writer_memory.clamp(15_000_000, 2_000_000_000);
    let mut writer: tantivy::IndexWriter<TantivyDocument> =
        index.writer_with_num_threads(1, budget).map_err(tv(dir))?;
    let pb = progress_bar(opts.progress, files.len());
    pb.set_message("indexing");
    let (mut n_files, mut n_chunks) = (0usize, 0usize);
    for cand in files {
        pb.inc(1);
        let bytes = std::fs::read(&cand.path);
        let Some(loaded) = load_file(&cand, bytes, &opts.chunk, skipped, warnings) else {
            continue;
        };
        n_files += 1;
        for d in loaded.documents {
            let mut doc = TantivyDocument::default();
            let title = d
                .metadata
                .get("title")
                .and_then(|v| v.as_str())
                .unwrap_or("");
            let headings: Vec<&str> = d
                .metadata
                .get("heading_path")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            doc.add_text(f.id, &d.id);
            doc.add_text(f.title, title);
            doc.add_text(f.headings, headings.join("\n"));
            doc.add_text(f.content, &d.content);
            doc.add_text(f.meta, serde_json::Value::Object(d.metadata).to_string());
            writer.add_document(doc).map_err(tv(dir))?;
            n_chunks += 1;
        }
    }
    pb.finish_and_clear();
    if n_chunks == 0 {
        return Err(RetrievalError::EmptyCorpus {
            dir: corpus.to_path_buf(),
            skipped: *skipped,
        });
    }
    writer.commit().map_err(tv(dir))?;
    writer.wait_merging_threads().map_err(tv(dir))?;
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        fingerprint: fingerprint.to_string(),
        files: n_files,
        chunks: n_chunks,
        skipped: *skipped,
        warnings: warnings.clone(),
        corpus: corpus.display().to_string(),
    };
    let path = dir.join(MANIFEST);
    let json = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| RetrievalError::io("writing", &path, e.into()))?;
    let mut file =
        std::fs::File::create(&path).map_err(|e| RetrievalError::io("creating", &path, e))?;
    file.write_all(&json)
        .and_then(|_| file.sync_all())
        .map_err(|e| RetrievalError::io("writing", &path, e))?;
    Ok((n_files, n_chunks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Index>();
    }

    #[test]
    fn analyzer_stems_and_drops_stop_words() {
        let mut a = analyzer();
        let mut stream = a.token_stream("The Borrowing of REFERENCES, foo:bar");
        let mut terms = Vec::new();
        while stream.advance() {
            terms.push(stream.token().text.clone());
        }
        assert_eq!(terms, vec!["borrow", "refer", "foo", "bar"]);
    }
}
