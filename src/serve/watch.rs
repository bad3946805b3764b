//! Change detection for hot reload: a fingerprint of the files a spec read, compared
//! by polling. A file is unchanged while its size and modification time are; when
//! either moved its contents are hashed (BLAKE3), and only a different hash (or a
//! file that appeared or went away) is a change — `touch` alone recompiles nothing.
//! Directories are compared by modification time only (a file created in them: a
//! prompt a failed spec was missing).
use std::path::{Path, PathBuf};
use std::time::SystemTime;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Stamp {
    Missing,
    File {
        len: u64,
        modified: Option<SystemTime>,
        hash: [u8; 32],
    },
    Dir {
        modified: Option<SystemTime>,
    },
}

fn stamp(path: &Path, old: Option<&Stamp>) -> Stamp {
    let Ok(meta) = std::fs::metadata(path) else {
        return Stamp::Missing;
    };
    let modified = meta.modified().ok();
    if meta.is_dir() {
        return Stamp::Dir { modified };
    }
    if let Some(Stamp::File {
        len,
        modified: m,
        hash,
    }) = old
    {
        if *len == meta.len() && *m == modified {
            return Stamp::File {
                len: *len,
                modified,
                hash: *hash,
            };
        }
    }
    match std::fs::read(path) {
        Ok(bytes) => Stamp::File {
            len: meta.len(),
            modified,
            hash: *blake3::hash(&bytes).as_bytes(),
        },
        Err(_) => Stamp::Missing,
    }
}

/// What a compiled (or failed) spec was built from, as of when it was built.
#[derive(Clone, Debug, Default)]
pub struct Fingerprint {
    entries: Vec<(PathBuf, Stamp)>,
}

impl Fingerprint {
    /// Stamps `paths` now (duplicates kept once).
    pub fn of(paths: impl IntoIterator<Item = PathBuf>) -> Fingerprint {
        let mut entries: Vec<(PathBuf, Stamp)> = Vec::new();
        for p in paths {
            if entries.iter().any(|(q, _)| *q == p) {
                continue;
            }
            let s = stamp(&p, None);
            entries.push((p, s));
        }
        Fingerprint { entries }
    }

    /// Whether any file changed since the stamps were taken; refreshes the stamps of
    /// files whose time or size moved but whose contents did not.
    pub fn changed(&mut self) -> bool {
        let mut changed = false;
        for (path, old) in &mut self.entries {
            let new = stamp(path, Some(old));
            let differs = match (&*old, &new) {
                (Stamp::File { hash: a, .. }, Stamp::File { hash: b, .. }) => a != b,
                (Stamp::Dir { modified: a }, Stamp::Dir { modified: b }) => a != b,
                (a, b) => a != b,
            };
            changed |= differs;
            *old = new;
        }
        changed
    }

    /// The paths watched.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.entries.iter().map(|(p, _)| p.as_path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touch_is_no_change_but_new_contents_are() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.yaml");
        std::fs::write(&f, "one").unwrap();
        let mut fp = Fingerprint::of([f.clone()]);
        assert!(!fp.changed());
        // Same contents rewritten: time may move, the hash does not.
        std::fs::write(&f, "one").unwrap();
        assert!(!fp.changed());
        std::fs::write(&f, "two").unwrap();
        assert!(fp.changed());
        assert!(!fp.changed());
        std::fs::remove_file(&f).unwrap();
        assert!(fp.changed());
        std::fs::write(&f, "two").unwrap();
        assert!(fp.changed());
    }
}
