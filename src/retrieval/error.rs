//! [`RetrievalError`]: every failure of corpus loading, index building and search.
use std::path::{Path, PathBuf};

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
    /// Files were found but `include`/`exclude` leave out every one of them.
    #[error(
        "every file of {dir} is left out by include/exclude: {seen} files found, none kept (include: {include:?}, exclude: {exclude:?})"
    )]
    AllExcluded {
        /// The corpus directory.
        dir: PathBuf,
        /// Supported files found.
        seen: usize,
        /// The `include` patterns.
        include: Vec<String>,
        /// The `exclude` patterns.
        exclude: Vec<String>,
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
