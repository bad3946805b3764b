//! The index's store lifecycle: reuse an index whose manifest matches the corpus,
//! else build into a temporary sibling and swap it into place (crash-safe; stale
//! siblings of killed builds removed).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::super::fingerprint::FileStamp;
use super::super::fingerprint::{scan, Scanned};
use super::super::{
    check_dir, default_index_dir, BuildReport, IndexOptions, RetrievalError, SkipReason, Skips,
};
use super::build::{write_index, write_manifest, Identity};
use super::{Index, Manifest, FORMAT_VERSION, MANIFEST};

/// Outcome of looking at an existing index directory.
enum Existing {
    Usable(Index, Box<Manifest>),
    /// Absent or stale; the optional note says why (for unexpected states).
    Rebuild(Option<String>),
}

/// The manifest of the index at `dir`, read before the scan (its stamps spare
/// rehashing unchanged files), or why there is none usable.
fn read_manifest(dir: &Path) -> Result<Manifest, Option<String>> {
    let manifest_path = dir.join(MANIFEST);
    let raw = match std::fs::read(&manifest_path) {
        Ok(r) => r,
        Err(_) => {
            return Err(dir.join("meta.json").exists().then(|| {
                format!(
                    "index at {} has no manifest (interrupted build?); rebuilding",
                    dir.display()
                )
            }))
        }
    };
    let manifest: Manifest = serde_json::from_slice(&raw).map_err(|e| {
        Some(format!(
            "manifest {} is invalid ({e}); rebuilding",
            manifest_path.display()
        ))
    })?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(Some(format!(
            "index at {} has format version {} (expected {FORMAT_VERSION}); rebuilding",
            dir.display(),
            manifest.format_version
        )));
    }
    Ok(manifest)
}

fn read_existing(
    dir: &Path,
    manifest: Result<Manifest, Option<String>>,
    fingerprint: &str,
) -> Existing {
    let manifest = match manifest {
        Ok(m) => m,
        Err(note) => return Existing::Rebuild(note),
    };
    if manifest.fingerprint != fingerprint {
        return Existing::Rebuild(None);
    }
    match Index::open(dir) {
        Ok(index) if index.num_chunks() == manifest.chunks => {
            Existing::Usable(index, Box::new(manifest))
        }
        Ok(index) => Existing::Rebuild(Some(format!(
            "index at {} has {} chunks but its manifest says {}; rebuilding",
            dir.display(),
            index.num_chunks(),
            manifest.chunks
        ))),
        Err(e) => Existing::Rebuild(Some(format!("{e}; rebuilding"))),
    }
}

/// Writes `manifest` back with fresh `stamps` when they changed (files hashed again
/// because their stamp was missing, racy or different while their content was not).
/// Best effort: an index directory that cannot be written (read-only) costs only the
/// rehash on the next start. Written to a temporary file and renamed, so a reader never
/// sees half a manifest.
fn refresh_stamps(dir: &Path, mut manifest: Manifest, stamps: Vec<FileStamp>) -> Manifest {
    if manifest.stamps == stamps {
        return manifest;
    }
    manifest.stamps = stamps;
    let tmp = dir.join(format!(".{MANIFEST}.tmp-{}", unique_suffix()));
    if write_manifest(&tmp, &manifest).is_err()
        || std::fs::rename(&tmp, dir.join(MANIFEST)).is_err()
    {
        let _ = std::fs::remove_file(&tmp);
    }
    manifest
}

/// `true` if `dir` may be replaced: missing, empty, or looking like an index.
fn replaceable(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Err(_) => !dir.exists(),
        Ok(mut entries) => {
            entries.next().is_none()
                || dir.join(MANIFEST).exists()
                || dir.join("meta.json").exists()
        }
    }
}

/// Removes `.{name}.tmp-<pid>-…` / `.{name}.old-<pid>-…` siblings left by killed
/// builds, when `/proc` shows that process is gone (elsewhere they are left alone).
fn remove_stale_siblings(parent: &Path, name: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        let rest = n
            .strip_prefix(&format!(".{name}.tmp-"))
            .or_else(|| n.strip_prefix(&format!(".{name}.old-")));
        let Some(pid) = rest
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}

impl Index {
    /// Opens the index at `corpus`'s index directory if its manifest matches the
    /// current corpus fingerprint; otherwise builds it (into a temporary sibling
    /// directory, manifest written last, then renamed into place).
    ///
    /// - `corpus`: the corpus directory; only read, never written.
    /// - `out`: the index directory; default [`super::default_index_dir`].
    /// - `opts`: exclusions, chunk sizes, progress bar, `force` rebuild.
    ///
    /// Returns the open index and a [`BuildReport`] (`reused` tells which happened).
    ///
    /// # Errors
    /// [`RetrievalError::CorpusNotFound`] / [`RetrievalError::NotADirectory`] for a bad
    /// corpus, [`RetrievalError::EmptyCorpus`] if no file yields a chunk,
    /// [`RetrievalError::NotAnIndex`] if `out` is an unrelated non-empty directory,
    /// [`RetrievalError::Io`] / [`RetrievalError::Tantivy`] for write failures.
    pub fn open_or_build(
        corpus: &Path,
        out: Option<&Path>,
        opts: &IndexOptions,
    ) -> Result<(Index, BuildReport), RetrievalError> {
        let started = Instant::now();
        check_dir(corpus)?;
        let dest = match out {
            Some(p) => p.to_path_buf(),
            None => default_index_dir(corpus)?,
        };
        let existing = if opts.force {
            Err(None)
        } else {
            read_manifest(&dest)
        };
        let known: std::collections::HashMap<String, FileStamp> = match &existing {
            Ok(m) => m
                .stamps
                .iter()
                .map(|s| (s.rel.clone(), s.clone()))
                .collect(),
            Err(_) => Default::default(),
        };
        let scanned = scan(corpus, opts, FORMAT_VERSION, &known);
        let left_out = scanned
            .walk_skips
            .files
            .iter()
            .filter(|f| matches!(f.reason, SkipReason::Excluded | SkipReason::NotIncluded))
            .count();
        if scanned.files.is_empty() && left_out > 0 && left_out == scanned.seen {
            return Err(RetrievalError::AllExcluded {
                dir: corpus.to_path_buf(),
                seen: scanned.seen,
                include: opts.include.clone(),
                exclude: opts.exclude.clone(),
            });
        }
        let mut notes = Vec::new();
        if !opts.force {
            match read_existing(&dest, existing, &scanned.fingerprint) {
                Existing::Usable(index, m) => {
                    return Ok(reused(index, *m, dest, scanned, started));
                }
                Existing::Rebuild(note) => notes.extend(note),
            }
        }
        // One builder at a time per index directory (processes on one cold cache:
        // eval shards, `serve` beside `run`): the others wait, then reuse its index
        // instead of swapping theirs over it while it is being opened.
        let _lock = BuildLock::acquire(&dest)?;
        if !opts.force {
            if let Existing::Usable(index, m) =
                read_existing(&dest, read_manifest(&dest), &scanned.fingerprint)
            {
                return Ok(reused(index, *m, dest, scanned, started));
            }
        }
        let (index, mut report) = build(corpus, &dest, scanned, opts)?;
        notes.append(&mut report.warnings);
        report.warnings = notes;
        report.seconds = started.elapsed().as_secs_f64();
        Ok((index, report))
    }
}

/// The report of an index reused as it is (its stamps refreshed when they moved).
fn reused(
    index: Index,
    m: Manifest,
    dest: PathBuf,
    scanned: Scanned,
    started: Instant,
) -> (Index, BuildReport) {
    let m = refresh_stamps(&dest, m, scanned.stamps);
    let skips = Skips {
        files: m.skipped_files,
    };
    let report = BuildReport {
        files: m.files,
        chunks: m.chunks,
        skipped: m.skipped,
        skipped_by_reason: skips.by_reason(),
        skipped_files: skips.files,
        warnings: m.warnings,
        reused: true,
        hashed: scanned.hashed,
        seconds: started.elapsed().as_secs_f64(),
        index_dir: dest,
    };
    (index, report)
}

/// An exclusive advisory lock on `.{name}.lock` beside an index directory, held
/// while the index is built, swapped into place and opened. The holder removes the
/// file before it unlocks (so no lock file is left beside the index); a waiter that
/// then gets the lock of a removed file opens the path again. The OS releases the lock
/// of a process that dies, so a killed builder never blocks the next.
struct BuildLock {
    file: std::fs::File,
    path: PathBuf,
}

impl BuildLock {
    /// Blocks until no other process builds `dest`.
    ///
    /// # Errors
    /// [`RetrievalError::Io`] when the lock file cannot be created or locked.
    fn acquire(dest: &Path) -> Result<BuildLock, RetrievalError> {
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "index".into());
        std::fs::create_dir_all(&parent).map_err(|e| RetrievalError::io("creating", &parent, e))?;
        let path = parent.join(format!(".{name}.lock"));
        loop {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|e| RetrievalError::io("opening the build lock", &path, e))?;
            file.lock()
                .map_err(|e| RetrievalError::io("locking", &path, e))?;
            if still_at(&file, &path) {
                return Ok(BuildLock { file, path });
            }
        }
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Whether the locked `file` is still the one at `path` (the previous holder removes
/// it before unlocking).
#[cfg(unix)]
fn still_at(file: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn still_at(_file: &std::fs::File, path: &Path) -> bool {
    path.exists()
}

/// Builds the index of `scanned` into a temporary sibling of `dest`, then moves it
/// into place.
fn build(
    corpus: &Path,
    dest: &Path,
    scanned: Scanned,
    opts: &IndexOptions,
) -> Result<(Index, BuildReport), RetrievalError> {
    let Scanned {
        fingerprint,
        files,
        walk_skips,
        walk_warnings,
        seen: _,
        stamps,
        hashed,
    } = scanned;
    let mut skips = walk_skips;
    let mut warnings = walk_warnings;
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "index".into());
    if !replaceable(dest) {
        return Err(RetrievalError::NotAnIndex(dest.to_path_buf()));
    }
    std::fs::create_dir_all(&parent).map_err(|e| RetrievalError::io("creating", &parent, e))?;
    remove_stale_siblings(&parent, &name);
    let tmp = parent.join(format!(".{name}.tmp-{}", unique_suffix()));
    std::fs::create_dir(&tmp).map_err(|e| RetrievalError::io("creating", &tmp, e))?;
    let result = write_index(
        corpus,
        &tmp,
        files,
        opts,
        Identity {
            fingerprint,
            stamps,
        },
        &mut skips,
        &mut warnings,
    );
    let (n_files, n_chunks) = match result {
        Ok(counts) => counts,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    // Swap into place: old index aside, new one in, old one removed.
    let old = parent.join(format!(".{name}.old-{}", unique_suffix()));
    let had_old = dest.exists();
    if had_old {
        if let Err(e) = std::fs::rename(dest, &old) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(RetrievalError::io("moving aside", dest, e));
        }
    }
    if let Err(e) = std::fs::rename(&tmp, dest) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(RetrievalError::io("moving into place", dest, e));
    }
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
    }
    let index = Index::open(dest)?;
    let report = BuildReport {
        files: n_files,
        chunks: n_chunks,
        skipped: skips.len(),
        skipped_by_reason: skips.by_reason(),
        skipped_files: skips.files,
        warnings,
        reused: false,
        hashed,
        seconds: 0.0,
        index_dir: dest.to_path_buf(),
    };
    Ok((index, report))
}
