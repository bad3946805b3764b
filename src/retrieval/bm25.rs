//! The `bm25` retriever kind (and the `corpus` tool): the BM25 [`Index`] of a corpus
//! directory, opened (built on first use) once per process and shared.
use super::{resolve_corpus, Index, IndexOptions, OpenContext, Opened};
use crate::spec::types::{Bm25Options, RetrieverSpec};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Which files of a corpus an index holds: the `exclude`, `include` and `hygiene`
/// options of a retriever (see [`IndexOptions`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CorpusFilter {
    /// `exclude` patterns; `None`: the default (`print.html`).
    pub exclude: Option<Vec<String>>,
    /// `include` patterns; empty: every file.
    pub include: Vec<String>,
    /// Skip placeholders, duplicates and all-in-one pages.
    pub hygiene: bool,
}

impl CorpusFilter {
    /// The filter of a spec retriever over the corpus written `corpus` (the
    /// `--corpus` replacement when given): `hygiene` defaults to on for `rust-docs:`.
    pub fn of(spec: &RetrieverSpec, corpus: &str) -> CorpusFilter {
        CorpusFilter {
            exclude: spec.exclude().map(<[String]>::to_vec),
            include: spec.include().map(<[String]>::to_vec).unwrap_or_default(),
            hygiene: spec
                .hygiene()
                .unwrap_or_else(|| corpus.starts_with("rust-docs:")),
        }
    }

    /// The default filter of a corpus written `corpus` (a `corpus` tool).
    pub fn default_for(corpus: &str) -> CorpusFilter {
        CorpusFilter {
            hygiene: corpus.starts_with("rust-docs:"),
            ..CorpusFilter::default()
        }
    }
}

type IndexKey = (PathBuf, CorpusFilter);

fn index_cache() -> &'static Mutex<HashMap<IndexKey, Arc<Index>>> {
    static CACHE: OnceLock<Mutex<HashMap<IndexKey, Arc<Index>>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Opens (building on first use) the index of a corpus directory holding the files
/// `filter` keeps, once per process.
///
/// # Errors
/// The retrieval error, as text.
pub fn open_index(
    corpus: &Path,
    filter: &CorpusFilter,
    progress: bool,
) -> Result<Arc<Index>, String> {
    let mut opts = IndexOptions {
        progress,
        include: filter.include.clone(),
        hygiene: filter.hygiene,
        ..IndexOptions::default()
    };
    if let Some(ex) = &filter.exclude {
        opts.exclude = ex.clone();
    }
    let key = (
        corpus
            .canonicalize()
            .unwrap_or_else(|_| corpus.to_path_buf()),
        filter.clone(),
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
/// `replacement` (`--corpus`, relative to the working directory) when given; `filter`
/// gives the files kept from the corpus as written (or its replacement).
///
/// # Errors
/// A message starting with `what`, naming the corpus as written and, once
/// resolved, its directory.
pub(super) fn open_corpus(
    what: &str,
    corpus: &str,
    replacement: Option<&Path>,
    filter: impl Fn(&str) -> CorpusFilter,
    ctx: &OpenContext<'_>,
) -> Result<Arc<Index>, String> {
    let dir = match replacement {
        Some(d) => resolve_corpus(&d.to_string_lossy(), Path::new("."))
            .map_err(|e| format!("{what}: --corpus {}: {e}", d.display()))?,
        None => resolve_corpus(corpus, ctx.root)
            .map_err(|e| format!("{what}: corpus `{corpus}`: {e}"))?,
    };
    let written = match replacement {
        Some(d) => d.to_string_lossy().to_string(),
        None => corpus.to_string(),
    };
    open_index(&dir, &filter(&written), ctx.progress)
        .map_err(|e| format!("{what}: corpus {}: {e}", dir.display()))
}

/// Opens the `bm25` retriever `name`.
///
/// # Errors
/// See [`open_corpus`].
pub(super) fn open(
    name: &str,
    spec: &RetrieverSpec,
    o: &Bm25Options,
    ctx: &OpenContext<'_>,
) -> Result<Opened, String> {
    let index = open_corpus(
        &format!("retriever `{name}`"),
        &o.corpus,
        ctx.corpus,
        |c| CorpusFilter::of(spec, c),
        ctx,
    )?;
    Ok(Opened {
        retriever: Arc::clone(&index) as _,
        index,
    })
}
