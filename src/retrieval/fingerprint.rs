//! Corpus fingerprint: a blake3 hash over the sorted relative paths, sizes and content
//! hashes of every candidate file, plus the index format version and the options that
//! shape the chunks. Equal fingerprints mean an existing index can be reused.

use std::path::Path;

use super::ingest::{walk, Candidate, Walk};
use super::{IndexOptions, Skips};

/// A walked corpus: its fingerprint and candidate files. File contents are hashed and
/// dropped (the build reads them again), so memory stays flat on large corpora.
pub(crate) struct Scanned {
    pub fingerprint: String,
    pub files: Vec<Candidate>,
    pub walk_skips: Skips,
    pub walk_warnings: Vec<String>,
    /// Supported files seen before `include`/`exclude`.
    pub seen: usize,
}

/// Walks `root`, reads every candidate and computes the fingerprint.
pub(crate) fn scan(root: &Path, opts: &IndexOptions, format_version: u32) -> Scanned {
    let Walk {
        candidates,
        skips,
        warnings,
        seen,
    } = walk(root, &opts.exclude, &opts.include);
    let mut h = blake3::Hasher::new();
    h.update(format!("ragloop-index v{format_version}\n").as_bytes());
    let sizes = opts.chunk.normalized();
    h.update(format!("chunk {} {} {}\n", sizes.target, sizes.max, sizes.overlap).as_bytes());
    for p in &opts.exclude {
        h.update(b"exclude ");
        h.update(p.as_bytes());
        h.update(b"\n");
    }
    for p in &opts.include {
        h.update(b"include ");
        h.update(p.as_bytes());
        h.update(b"\n");
    }
    if opts.hygiene {
        h.update(b"hygiene\n");
    }
    h.update(format!("heading_weight {}\n", opts.heading_weight).as_bytes());
    let mut files = Vec::with_capacity(candidates.len());
    for cand in candidates {
        let bytes = std::fs::read(&cand.path);
        h.update(b"file ");
        h.update(cand.rel.as_bytes());
        h.update(b"\0");
        match &bytes {
            Ok(b) => {
                h.update(format!("{} {}\n", b.len(), blake3::hash(b).to_hex()).as_bytes());
            }
            Err(e) => {
                h.update(format!("unreadable {:?}\n", e.kind()).as_bytes());
            }
        }
        files.push(cand);
    }
    Scanned {
        fingerprint: h.finalize().to_hex().to_string(),
        files,
        walk_skips: skips,
        walk_warnings: warnings,
        seen,
    }
}
