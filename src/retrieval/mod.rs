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
pub mod dense;
mod document;
pub mod embed;
mod fingerprint;
mod html;
mod index;
mod ingest;
mod markdown;
mod retriever;
mod sysroot;
mod vectors;
pub mod web;

use std::path::{Path, PathBuf};

pub use chunk::{chunk_text, Chunk, ChunkSizes};
pub use dense::{DenseIndex, DenseRetriever, Fusion};
pub use document::{chunk_id, source_of, Document, ID_NAMESPACE};
pub use embed::Embedder;
pub use html::{extract_html, HtmlPage};
pub use index::{Index, FORMAT_VERSION};
pub use ingest::{load_corpus, Extracted, Heading, LoadedCorpus, LoadedFile};
pub use retriever::{Retriever, ScriptedRetriever, SearchFuture};

/// Options for building an index. The chunk sizes and exclude patterns are part of the
/// corpus fingerprint: changing them triggers a rebuild.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexOptions {
    /// Files to leave out. A pattern without `/` is matched against the file name, one
    /// with `/` against the path relative to the corpus root. `*` matches any run of
    /// characters (including `/`), `?` exactly one. Default: `["print.html"]` (the
    /// mdBook whole-book page, which duplicates every other page).
    pub exclude: Vec<String>,
    /// Chunk sizes, in bytes of UTF-8 text.
    pub chunk: ChunkSizes,
    /// Show an indicatif progress bar on stderr (only drawn when stderr is a terminal).
    pub progress: bool,
    /// Rebuild even if a valid index for the same corpus fingerprint exists.
    pub force: bool,
    /// Memory budget of the tantivy writer, in bytes (default 50 MB; tantivy needs at
    /// least 15 MB).
    pub writer_memory: usize,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            exclude: vec!["print.html".to_string()],
            chunk: ChunkSizes::default(),
            progress: false,
            force: false,
            writer_memory: 50_000_000,
        }
    }
}

/// What [`Index::open_or_build`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildReport {
    /// Files that produced at least one chunk (taken from the manifest when reused).
    pub files: usize,
    /// Chunks in the index.
    pub chunks: usize,
    /// Files looked at but not indexed: excluded, redirect stubs, empty, binary,
    /// invalid UTF-8, unreadable, symlink loops.
    pub skipped: usize,
    /// One line per problem worth telling the user about (unreadable file, loop, ...).
    /// Expected skips (redirect stubs, excluded files) are counted, not warned.
    pub warnings: Vec<String>,
    /// `true` if an existing index was reused without rebuilding.
    pub reused: bool,
    /// Wall time of the whole call, in seconds.
    pub seconds: f64,
    /// The index directory.
    pub index_dir: PathBuf,
}

/// Errors of corpus loading, index building and searching. Messages name the path.
#[derive(Debug, thiserror::Error)]
pub enum RetrievalError {
    /// The corpus directory does not exist.
    #[error("corpus directory not found: {0}")]
    CorpusNotFound(PathBuf),
    /// The corpus path exists but is not a directory.
    #[error("corpus path is not a directory: {0}")]
    NotADirectory(PathBuf),
    /// The corpus has no file that yields any text.
    #[error("no indexable files in {dir} ({skipped} skipped)")]
    EmptyCorpus {
        /// The corpus directory.
        dir: PathBuf,
        /// Files looked at and skipped.
        skipped: usize,
    },
    /// A file-system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("reading", "creating", ...).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The destination exists and does not look like a ragloop index; it is left alone.
    #[error("refusing to replace {0}: it exists and is not a ragloop index")]
    NotAnIndex(PathBuf),
    /// tantivy failed while building, opening or searching the index.
    #[error("index error at {path}: {message}")]
    Tantivy {
        /// The index directory.
        path: PathBuf,
        /// tantivy's message.
        message: String,
    },
    /// A stored document could not be decoded (the index is damaged).
    #[error("damaged index at {path}: {message}")]
    Corrupt {
        /// The index directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A `rust-docs:` corpus could not be located.
    #[error("cannot locate the Rust docs for {spec:?}: {message}")]
    RustDocs {
        /// The spec as given.
        spec: String,
        /// What went wrong.
        message: String,
    },
    /// The toolchain has no Rust documentation (the `rust-docs` rustup component is
    /// not installed): its HTML root does not exist.
    #[error(
        "the Rust documentation is not installed: {} does not exist (`rustup component add rust-docs` installs it)",
        html.display()
    )]
    RustDocsNotInstalled {
        /// The spec as given.
        spec: String,
        /// The HTML root that was looked for, `<sysroot>/share/doc/rust/html`.
        html: PathBuf,
    },
    /// The toolchain's HTML root exists but the named folder of it does not (the
    /// documentation is partly installed, or the folder name is wrong).
    #[error(
        "{} does not exist: `{folder}` is not a folder of the installed Rust documentation (if it should be, `rustup component add rust-docs` installs it)",
        path.display()
    )]
    RustDocsFolderMissing {
        /// The spec as given.
        spec: String,
        /// The folder named after `rust-docs:`, e.g. `book`.
        folder: String,
        /// The path that was looked for, `<sysroot>/share/doc/rust/html/<folder>`.
        path: PathBuf,
    },
    /// No cache directory could be determined (no `$RAGLOOP_CACHE_DIR`,
    /// `$XDG_CACHE_HOME` or `$HOME`).
    #[error("no cache directory: set RAGLOOP_CACHE_DIR or pass --out")]
    NoCacheDir,
}

impl RetrievalError {
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        RetrievalError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Resolves a corpus reference from a spec or the command line to a directory.
///
/// - `"rust-docs:"` is the HTML root of the installed Rust documentation,
///   `$(rustc --print sysroot)/share/doc/rust/html` (`$RUSTC` overrides `rustc`; it is
///   killed after `$RAGLOOP_RUSTC_TIMEOUT_SECS`, default 10 s);
/// - `"rust-docs:NAME"` is a folder under it, e.g. `"rust-docs:book"`;
/// - anything else is a path, relative to `base` unless absolute.
///
/// # Errors
/// [`RetrievalError::RustDocs`] if `rustc` cannot be run,
/// [`RetrievalError::RustDocsNotInstalled`] if the toolchain's HTML root is missing,
/// [`RetrievalError::RustDocsFolderMissing`] if the folder under it is missing,
/// [`RetrievalError::CorpusNotFound`] if the directory is missing,
/// [`RetrievalError::NotADirectory`] if it is a file.
pub fn resolve_corpus(spec: &str, base: &Path) -> Result<PathBuf, RetrievalError> {
    let path = if let Some(rest) = spec.strip_prefix("rust-docs:") {
        let sysroot = sysroot::sysroot().map_err(|message| RetrievalError::RustDocs {
            spec: spec.to_string(),
            message,
        })?;
        let mut p = PathBuf::from(sysroot)
            .join("share")
            .join("doc")
            .join("rust")
            .join("html");
        if !p.is_dir() {
            return Err(RetrievalError::RustDocsNotInstalled {
                spec: spec.to_string(),
                html: p,
            });
        }
        let rest = rest.trim_matches('/');
        if !rest.is_empty() {
            p.push(rest);
            if !p.exists() {
                return Err(RetrievalError::RustDocsFolderMissing {
                    spec: spec.to_string(),
                    folder: rest.to_string(),
                    path: p,
                });
            }
        }
        p
    } else {
        let p = Path::new(spec);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };
    check_dir(&path)?;
    Ok(path)
}

/// Checks that `path` is an existing directory.
pub(crate) fn check_dir(path: &Path) -> Result<(), RetrievalError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(RetrievalError::NotADirectory(path.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(RetrievalError::CorpusNotFound(path.to_path_buf()))
        }
        Err(e) => Err(RetrievalError::io("reading", path, e)),
    }
}

/// The default index directory of a corpus: `<cache>/indexes/<first 16 hex digits of
/// blake3(canonical corpus path)>`, where `<cache>` is `$RAGLOOP_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/ragloop`, else `$HOME/.cache/ragloop`.
///
/// # Errors
/// [`RetrievalError::CorpusNotFound`] and friends if the corpus cannot be
/// canonicalized, [`RetrievalError::NoCacheDir`] if no variable is set.
pub fn default_index_dir(corpus: &Path) -> Result<PathBuf, RetrievalError> {
    check_dir(corpus)?;
    let canonical =
        std::fs::canonicalize(corpus).map_err(|e| RetrievalError::io("resolving", corpus, e))?;
    let hash = blake3::hash(canonical.as_os_str().as_encoded_bytes()).to_hex();
    let cache = cache_root().ok_or(RetrievalError::NoCacheDir)?;
    Ok(cache.join("indexes").join(&hash.as_str()[..16]))
}

/// ragloop's cache directory: `$RAGLOOP_CACHE_DIR`, else `$XDG_CACHE_HOME/ragloop`,
/// else `$HOME/.cache/ragloop` (empty variables count as unset); `None` when none is
/// set. Indexes live under `indexes/`, the LLM response cache under `responses/`.
pub fn cache_root() -> Option<PathBuf> {
    let nonempty = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = nonempty("RAGLOOP_CACHE_DIR") {
        Some(d)
    } else if let Some(d) = nonempty("XDG_CACHE_HOME") {
        Some(d.join("ragloop"))
    } else {
        nonempty("HOME").map(|d| d.join(".cache").join("ragloop"))
    }
}
