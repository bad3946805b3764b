//! The `bm25` retriever kind (and the `corpus` tool): the BM25 [`Index`] of a corpus
//! directory, opened (built on first use) once per process and shared.
use super::{resolve_corpus, Index, IndexOptions, OpenContext, Opened};
use crate::spec::types::Bm25Options;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

type IndexKey = (PathBuf, Vec<String>);

fn index_cache() -> &'static Mutex<HashMap<IndexKey, Arc<Index>>> {
    static CACHE: OnceLock<Mutex<HashMap<IndexKey, Arc<Index>>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Opens (building on first use) the index of a corpus directory, once per process.
///
/// # Errors
/// The retrieval error, as text.
pub fn open_index(
    corpus: &Path,
    exclude: Option<&[String]>,
    progress: bool,
) -> Result<Arc<Index>, String> {
    let mut opts = IndexOptions {
        progress,
        ..IndexOptions::default()
    };
    if let Some(ex) = exclude {
        opts.exclude = ex.to_vec();
    }
    let key = (
        corpus
            .canonicalize()
            .unwrap_or_else(|_| corpus.to_path_buf()),
        opts.exclude.clone(),
    );
    if let Some(ix) = index_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(ix);
    }
    let (index, _report) = Index::open_or_build(corpus, None, &opts).map_err(|e| e.to_string())?;
    let index = Arc::new(index);
    if let Ok(mut c) = index_cache().lock() {
        c.insert(key, Arc::clone(&index));
    }
    Ok(index)
}

/// The index of the corpus `corpus` (as written in the spec, relative to the
/// project root) of `what` (``retriever `x` `` or ``tool `x` ``), or of
/// `replacement` (`--corpus`, relative to the working directory) when given.
///
/// # Errors
/// A message starting with `what`, naming the corpus as written and, once
/// resolved, its directory.
pub(super) fn open_corpus(
    what: &str,
    corpus: &str,
    replacement: Option<&Path>,
    exclude: Option<&[String]>,
    ctx: &OpenContext<'_>,
) -> Result<Arc<Index>, String> {
    let dir = match replacement {
        Some(d) => resolve_corpus(&d.to_string_lossy(), Path::new("."))
            .map_err(|e| format!("{what}: --corpus {}: {e}", d.display()))?,
        None => resolve_corpus(corpus, ctx.root)
            .map_err(|e| format!("{what}: corpus `{corpus}`: {e}"))?,
    };
    open_index(&dir, exclude, ctx.progress)
        .map_err(|e| format!("{what}: corpus {}: {e}", dir.display()))
}

/// Opens the `bm25` retriever `name`.
///
/// # Errors
/// See [`open_corpus`].
pub(super) fn open(name: &str, o: &Bm25Options, ctx: &OpenContext<'_>) -> Result<Opened, String> {
    let index = open_corpus(
        &format!("retriever `{name}`"),
        &o.corpus,
        ctx.corpus,
        o.exclude.as_deref(),
        ctx,
    )?;
    Ok(Opened {
        retriever: Arc::clone(&index) as _,
        index,
    })
}
