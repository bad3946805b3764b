//! The persistent tantivy BM25 index: its schema and analyzer, opening it, and (in
//! the submodules) its store lifecycle ([`store`]: reuse or crash-safe rebuild), its
//! writing ([`build`]) and BM25 search ([`search`]).

use std::path::{Path, PathBuf};

use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, STORED, STRING,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{IndexReader, ReloadPolicy, Term};

use super::RetrievalError;

mod build;
mod search;
mod store;

pub use search::FieldWeights;

/// Version of the on-disk layout (schema, tokenizer, chunking, metadata keys). An index
/// whose manifest has another version is rebuilt.
pub const FORMAT_VERSION: u32 = 2;

const TOKENIZER: &str = "ragloop_en";
const MANIFEST: &str = "manifest.json";
/// Query-time weight of a separate clause on the page title field: a small
/// page-level "the title names a query word" signal. Title and headings are weighted
/// mainly through [`super::IndexOptions::heading_weight`]; short-field clauses at the
/// old 0.5/0.8 cost rank-1 hits, 0 lost pages titled with the query's subject
/// (docs/retrieval.md).
const TITLE_BOOST: f32 = 0.1;
/// Query-time weight of a separate clause on the heading path field (0: none).
const HEADINGS_BOOST: f32 = 0.0;

/// The index's `manifest.json`, written last: an index without one is incomplete.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Manifest {
    format_version: u32,
    fingerprint: String,
    files: usize,
    chunks: usize,
    skipped: usize,
    /// Every skipped file and why (format 2).
    #[serde(default)]
    skipped_files: Vec<super::SkippedFile>,
    warnings: Vec<String>,
    corpus: String,
    /// What each corpus file looked like when last hashed, so an unchanged file is not
    /// read again (`fingerprint` module docs). Absent in older manifests: then every
    /// file is hashed once and the stamps are written back.
    #[serde(default)]
    stamps: Vec<super::fingerprint::FileStamp>,
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    id: Field,
    title: Field,
    headings: Field,
    content: Field,
    meta: Field,
}

/// Most query terms a search uses (the rest of a very long query is ignored).
pub const MAX_QUERY_TERMS: usize = 256;

/// An open BM25 index over one corpus. Cheap to share across threads (`Send + Sync`);
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

impl Index {
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

    /// Every analyzed term of `text`, in order, repeats kept (what the index counts
    /// as occurrences): the offline reranker's page statistics and term positions.
    pub fn tokens(&self, text: &str) -> Vec<String> {
        let mut analyzer = self.analyzer.clone();
        let mut stream = analyzer.token_stream(text);
        let mut terms: Vec<String> = Vec::new();
        while stream.advance() {
            let t = &stream.token().text;
            if !t.is_empty() {
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
