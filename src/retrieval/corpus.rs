//! Where a corpus and its index live: corpus references (`rust-docs:`, paths),
//! the default index directory, ragloop's cache root.
use super::{sysroot, RetrievalError};
use std::path::{Path, PathBuf};

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
    let cache = super::cache_root().ok_or(RetrievalError::NoCacheDir)?;
    Ok(cache.join("indexes").join(&hash.as_str()[..16]))
}
