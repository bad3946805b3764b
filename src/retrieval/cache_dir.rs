//! Where ragloop keeps what it can compute again: indexes, the response cache, the
//! remembered sysroot.
use std::path::PathBuf;

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
