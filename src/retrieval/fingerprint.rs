//! Corpus fingerprint: a blake3 hash over the sorted relative paths, sizes and content
//! hashes of every candidate file, plus the index format version and the options that
//! shape the chunks. Equal fingerprints mean an existing index can be reused.
//!
//! Freshness without rehashing: the manifest of the last build keeps a [`FileStamp`]
//! per file (size, modification time, and on Unix the inode and change time, with the
//! file's content hash). A file whose stamp is unchanged is not read again; its
//! recorded hash goes into the fingerprint. The fingerprint itself is still computed
//! over content hashes, so it stays the truth: a file is re-read whenever anything in
//! its stamp differs, or when it was modified within [`RACY_WINDOW_NS`] of the moment
//! its hash was taken (a write in the same clock tick would not show in the stamp —
//! git's "racy clean" rule).

use std::collections::HashMap;
use std::path::Path;

use super::ingest::{walk, Candidate, Walk};
use super::{IndexOptions, Skips};

/// A file is trusted by its stamp only when its modification time is at least this
/// long (nanoseconds) before the moment its content hash was taken.
pub(crate) const RACY_WINDOW_NS: i128 = 2_000_000_000;

/// What the manifest remembers of one corpus file, to tell whether it changed without
/// reading it. Times are nanoseconds since the Unix epoch (negative before it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FileStamp {
    /// Path relative to the corpus root, `/`-separated.
    pub rel: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time.
    pub mtime_ns: i128,
    /// Inode change time (Unix; 0 elsewhere).
    #[serde(default)]
    pub ctime_ns: i128,
    /// Inode number (Unix; 0 elsewhere).
    #[serde(default)]
    pub ino: u64,
    /// blake3 of the content, hex.
    pub hash: String,
    /// When `hash` was computed (same clock as `mtime_ns`).
    pub hashed_at_ns: i128,
}

/// A walked corpus: its fingerprint and candidate files. File contents are hashed and
/// dropped (the build reads them again), so memory stays flat on large corpora.
pub(crate) struct Scanned {
    pub fingerprint: String,
    pub files: Vec<Candidate>,
    pub walk_skips: Skips,
    pub walk_warnings: Vec<String>,
    /// Supported files seen before `include`/`exclude`.
    pub seen: usize,
    /// A stamp per readable candidate, for the next manifest.
    pub stamps: Vec<FileStamp>,
    /// Files whose content was read and hashed in this scan (the rest were trusted by
    /// their stamp).
    pub hashed: usize,
}

fn nanos(t: std::io::Result<std::time::SystemTime>) -> i128 {
    match t {
        Ok(t) => match t.duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        },
        Err(_) => 0,
    }
}

/// Size, mtime, ctime and inode of `meta`.
fn stat_of(meta: &std::fs::Metadata) -> (u64, i128, i128, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let ctime = meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128;
        (meta.len(), nanos(meta.modified()), ctime, meta.ino())
    }
    #[cfg(not(unix))]
    {
        (meta.len(), nanos(meta.modified()), 0, 0)
    }
}

fn now_ns() -> i128 {
    nanos(Ok(std::time::SystemTime::now()))
}

/// The stamp of `known` still describes the file at `path` (same size, times, inode,
/// and not modified within the racy window of its hashing).
fn trusted(known: Option<&FileStamp>, stat: (u64, i128, i128, u64)) -> Option<&FileStamp> {
    let k = known?;
    let (size, mtime, ctime, ino) = stat;
    (k.size == size
        && k.mtime_ns == mtime
        && k.ctime_ns == ctime
        && k.ino == ino
        && mtime != 0
        && k.hashed_at_ns - mtime >= RACY_WINDOW_NS)
        .then_some(k)
}

/// Walks `root`, reads every candidate whose stamp in `known` (the last manifest's,
/// keyed by relative path) does not match, and computes the fingerprint. The
/// fingerprint is the same whether a file's hash was read from its stamp or computed.
pub(crate) fn scan(
    root: &Path,
    opts: &IndexOptions,
    format_version: u32,
    known: &HashMap<String, FileStamp>,
) -> Scanned {
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
    // What the walk could not read (a dangling symlink, a loop) is warned about by
    // every start that reuses the index: when it goes away or changes, the index is
    // rebuilt so its report says what is there now.
    for w in &warnings {
        h.update(b"walk warning ");
        h.update(w.as_bytes());
        h.update(b"\n");
    }
    let mut files = Vec::with_capacity(candidates.len());
    let mut stamps = Vec::with_capacity(candidates.len());
    let mut hashed = 0usize;
    for cand in candidates {
        h.update(b"file ");
        h.update(cand.rel.as_bytes());
        h.update(b"\0");
        let stat = std::fs::metadata(&cand.path).ok().map(|m| stat_of(&m));
        let reuse = stat.and_then(|s| trusted(known.get(&cand.rel), s));
        if let Some(k) = reuse {
            h.update(format!("{} {}\n", k.size, k.hash).as_bytes());
            stamps.push(k.clone());
        } else {
            let hashed_at_ns = now_ns();
            match std::fs::read(&cand.path) {
                Ok(b) => {
                    hashed += 1;
                    let hash = blake3::hash(&b).to_hex().to_string();
                    h.update(format!("{} {}\n", b.len(), hash).as_bytes());
                    // Stat again after the read: the stamp must describe what was hashed.
                    let after = std::fs::metadata(&cand.path).ok().map(|m| stat_of(&m));
                    if let Some((size, mtime_ns, ctime_ns, ino)) = after {
                        if size == b.len() as u64 && after == stat {
                            stamps.push(FileStamp {
                                rel: cand.rel.clone(),
                                size,
                                mtime_ns,
                                ctime_ns,
                                ino,
                                hash,
                                hashed_at_ns,
                            });
                        }
                    }
                }
                Err(e) => {
                    h.update(format!("unreadable {:?}\n", e.kind()).as_bytes());
                }
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
        stamps,
        hashed,
    }
}
