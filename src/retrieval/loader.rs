//! [`load_corpus`]: the loader and chunker alone, what an index build indexes.
use std::path::Path;

use super::hygiene::for_each_kept;
use super::ingest::{chunk_file, walk, LoadedCorpus};
use super::{check_dir, IndexOptions, RetrievalError};

/// Loads and chunks every file of a corpus without building an index. This is what
/// [`super::Index::open_or_build`] indexes; it is public so tests and tools can compare
/// returned documents with the loader's output.
///
/// # Errors
/// [`RetrievalError::CorpusNotFound`] / [`RetrievalError::NotADirectory`] for a bad
/// root. Unreadable or unsupported files are skipped and reported, not errors.
pub fn load_corpus(root: &Path, opts: &IndexOptions) -> Result<LoadedCorpus, RetrievalError> {
    check_dir(root)?;
    let w = walk(root, &opts.exclude, &opts.include);
    let mut skips = w.skips;
    let mut warnings = w.warnings;
    let mut files = Vec::new();
    for_each_kept(
        &w.candidates,
        opts,
        &mut skips,
        &mut warnings,
        |cand, extracted, skips| {
            files.extend(chunk_file(cand, extracted, &opts.chunk, skips));
            Ok::<(), std::convert::Infallible>(())
        },
    )
    .unwrap_or_else(|never| match never {});
    Ok(LoadedCorpus {
        files,
        skipped: skips.len(),
        skips,
        warnings,
    })
}
