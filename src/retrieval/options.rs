//! What an index build takes ([`IndexOptions`]) and reports ([`BuildReport`]).
use super::{ChunkSizes, SkipReason, SkippedFile};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Options for building an index. The chunk sizes and exclude patterns are part of the
/// corpus fingerprint: changing them triggers a rebuild.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexOptions {
    /// Files to leave out. A pattern without `/` is matched against the file name, one
    /// with `/` against the path relative to the corpus root. `*` matches any run of
    /// characters (including `/`), `?` exactly one. Default: `["print.html"]` (the
    /// mdBook whole-book page, which duplicates every other page).
    pub exclude: Vec<String>,
    /// Files to keep: when not empty, only files matching one of these patterns (same
    /// rules as `exclude`) are indexed; `exclude` still applies to them. Default: empty.
    pub include: Vec<String>,
    /// Skip placeholder pages, duplicates and all-in-one pages, found by their content
    /// (see `hygiene.rs`: the rules and their thresholds). Default `false`; on by
    /// default for `rust-docs:` corpora in specs and `ragloop index`.
    pub hygiene: bool,
    /// Heading context in each chunk: the chunk's heading path (with the page title
    /// when the path lacks it) is indexed this many times with the chunk's text, so a
    /// query term in the headings weighs like that many occurrences in the text (a
    /// BM25F-style field weight sharing the chunk's length normalization). 0: headings
    /// only in their own fields. The stored `content` is unchanged. Default
    /// [`DEFAULT_HEADING_WEIGHT`].
    pub heading_weight: u32,
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

/// Default [`IndexOptions::heading_weight`]: a chunk's headings count twice as much
/// as its text (measured in docs/retrieval.md).
pub const DEFAULT_HEADING_WEIGHT: u32 = 2;

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            exclude: vec!["print.html".to_string()],
            include: Vec::new(),
            hygiene: false,
            heading_weight: DEFAULT_HEADING_WEIGHT,
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
    /// The skipped files counted by reason (the counts sum to `skipped`).
    pub skipped_by_reason: BTreeMap<SkipReason, usize>,
    /// Every skipped file with its reason, in the order found (`ragloop index --verbose`).
    pub skipped_files: Vec<SkippedFile>,
    /// One line per problem worth telling the user about (unreadable file, loop, ...).
    /// Expected skips (redirect stubs, excluded files) are counted, not warned.
    pub warnings: Vec<String>,
    /// `true` if an existing index was reused without rebuilding.
    pub reused: bool,
    /// Files whose content was read to compute the corpus fingerprint. On a reuse this
    /// is 0 when no file changed since the last start: unchanged files are recognised
    /// by size, modification time (and on Unix inode and change time) recorded in the
    /// manifest, not rehashed.
    pub hashed: usize,
    /// Wall time of the whole call, in seconds.
    pub seconds: f64,
    /// The index directory.
    pub index_dir: PathBuf,
}
