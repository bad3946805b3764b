//! Corpus ingestion and embedded BM25 retrieval.
//!
//! A corpus is a directory of `.md`, `.markdown`, `.txt`, `.html` and `.htm` files.
//! [`Index::open_or_build`] walks it, turns every file into plain text (HTML through
//! the `scraper` parser, keeping only the page's `<main>` content), splits the text
//! into heading sections and then into overlapping chunks, and writes a tantivy BM25
//! index next to a `manifest.json`. The index is reused as long as the corpus
//! fingerprint (relative paths, sizes and blake3 hashes of every candidate file, plus
//! the options that shape the chunks) is unchanged.
//!
//! Every chunk becomes a [`Document`] whose `id` is a UUID v5 of its source path, its
//! ordinal and the blake3 hash of its content, so ids are identical across rebuilds of
//! an unchanged corpus. [`Index::search`] returns documents ordered by BM25 score
//! (descending) and then by id (ascending), so results are deterministic.
//!
//! See `docs/retrieval.md` for the on-disk layout and measured figures.

mod chunk;
mod corpus;
pub mod dense;
mod document;
pub mod embed;
mod error;
mod extracted;
mod fingerprint;
mod html;
mod index;
mod ingest;
mod markdown;
mod options;
mod retriever;
mod sysroot;
mod vectors;
pub mod web;

pub use chunk::{chunk_text, Chunk, ChunkSizes};
pub(crate) use corpus::check_dir;
pub use corpus::{cache_root, default_index_dir, resolve_corpus};
pub use dense::{DenseIndex, DenseRetriever, Fusion};
pub use document::{chunk_id, source_of, Document, ID_NAMESPACE};
pub use embed::Embedder;
pub use error::RetrievalError;
pub use extracted::{Extracted, Heading};
pub use html::{extract_html, HtmlPage};
pub use index::{Index, FORMAT_VERSION};
pub use ingest::{load_corpus, LoadedCorpus, LoadedFile};
pub use options::{BuildReport, IndexOptions};
pub use retriever::{Retriever, ScriptedRetriever, SearchFuture};
