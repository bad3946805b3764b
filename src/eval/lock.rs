//! One writer per eval output directory: an exclusive lock on `DIR/eval.lock`.
//!
//! [`DirLock::acquire`] opens (creating it) the lock file and takes an exclusive OS
//! advisory lock on it without waiting (`flock` on Unix, `LockFileEx` on Windows,
//! through [`std::fs::File::try_lock`]). The lock, not the file, says who holds the
//! directory: the OS drops it when the holder's process ends, however it ends (a
//! crash, `kill -9`), so there is no stale lock to clear by hand. The file holds
//! the holder's identity for the message another eval shows, one JSON object:
//! `{"pid": 1234, "host": "build-7", "started_unix_ms": 1718000000000}`.
//!
//! - Held by a live eval: [`LockError::Held`] names that pid, host and start time.
//! - A lock file left by an eval that ended without removing it (the process is
//!   gone, so its OS lock is too): taken over; the old holder is returned so the
//!   caller can say so.
//! - Released when the [`DirLock`] is dropped (a normal end, an error, an
//!   interrupted eval): the file is removed, then the OS lock released. A process
//!   that must exit without unwinding (a second Ctrl-C) calls [`remove_held`] first.
//! - A file system without advisory locks: the eval goes on unlocked, with a note
//!   ([`Acquired::unlocked`]); rows stay whole anyway (each is one `O_APPEND` write).
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The lock file's name inside the output directory.
pub const LOCK_FILE: &str = "eval.lock";

/// Who holds (or held) a lock: what the lock file says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// Host name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// When the lock was taken, unix milliseconds.
    #[serde(default)]
    pub started_unix_ms: u64,
}

impl Holder {
    fn me() -> Holder {
        Holder {
            pid: std::process::id(),
            host: host_name(),
            started_unix_ms: crate::runtime::trace::unix_ms(),
        }
    }

    /// `pid 1234 on host build-7, started Tue, 11 Jun 2024 06:13:20 GMT`.
    pub fn describe(&self) -> String {
        let mut s = format!("pid {}", self.pid);
        if let Some(h) = &self.host {
            s.push_str(&format!(" on host {h}"));
        }
        if self.started_unix_ms > 0 {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(self.started_unix_ms);
            s.push_str(&format!(", started {}", httpdate::fmt_http_date(at)));
        }
        s
    }
}

fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// Why a directory could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds the lock.
    Held {
        /// The lock file.
        path: PathBuf,
        /// What the file says about the holder (`None`: unreadable, or the holder
        /// has not written it yet).
        holder: Option<Holder>,
    },
    /// The lock file cannot be created, read or written.
    Io(String),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held { path, holder } => write!(
                f,
                "{} is in use by another eval ({}; lock file {}): wait for it to end, or choose another --out",
                path.parent().unwrap_or(Path::new(".")).display(),
                holder
                    .as_ref()
                    .map_or_else(|| "pid unknown".to_string(), Holder::describe),
                path.display()
            ),
            LockError::Io(m) => f.write_str(m),
        }
    }
}

/// A held lock; dropping it releases the directory.
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
    id: FileId,
}

/// What [`DirLock::acquire`] got.
#[derive(Debug)]
pub struct Acquired {
    /// The lock (`None` when the file system has no advisory locks).
    pub lock: Option<DirLock>,
    /// The holder named by a lock file left behind by an eval that is gone (its lock
    /// was taken over).
    pub stale: Option<Holder>,
    /// Why the directory could not be locked (the eval goes on unlocked).
    pub unlocked: Option<String>,
}

/// Locks held by this process: (lock file, its identity), for [`remove_held`].
static HELD: Mutex<Vec<(PathBuf, FileId)>> = Mutex::new(Vec::new());

/// Removes the lock files this process holds, for an exit that skips destructors
/// (`std::process::exit` on a second signal). The OS locks go with the process.
pub fn remove_held() {
    let held = HELD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for (path, id) in held.iter() {
        if path_id(path).as_ref() == Some(id) {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl DirLock {
    /// Locks `dir` (which must exist) for this process, without waiting.
    ///
    /// # Errors
    /// [`LockError::Held`] when another process holds it, [`LockError::Io`] when the
    /// lock file cannot be opened, read or written (naming it).
    pub fn acquire(dir: &Path) -> Result<Acquired, LockError> {
        let path = dir.join(LOCK_FILE);
        let io = |what: &str, e: std::io::Error| {
            LockError::Io(format!("cannot {what} lock file {}: {e}", path.display()))
        };
        // A holder that ends removes the file, then unlocks: a file opened just
        // before that removal is locked in vain (the path names a new file, or
        // none). Such a lock is dropped and the file opened again.
        for _ in 0..16 {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| io("open", e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(LockError::Held {
                        holder: read_holder(&mut file),
                        path,
                    })
                }
                Err(TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {
                    return Ok(Acquired {
                        lock: None,
                        stale: None,
                        unlocked: Some(format!(
                            "{}: the file system has no advisory locks ({e}); nothing stops another eval from writing to this directory at the same time",
                            path.display()
                        )),
                    });
                }
                Err(TryLockError::Error(e)) => return Err(io("lock", e)),
            }
            let id = file_id(&file).map_err(|e| io("read", e))?;
            if path_id(&path).as_ref() != Some(&id) {
                continue;
            }
            let stale = read_holder(&mut file);
            let me = serde_json::to_string(&Holder::me()).unwrap_or_default() + "\n";
            file.set_len(0)
                .and_then(|()| file.seek(SeekFrom::Start(0)))
                .and_then(|_| file.write_all(me.as_bytes()))
                .map_err(|e| io("write", e))?;
            HELD.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((path.clone(), id));
            return Ok(Acquired {
                lock: Some(DirLock { file, path, id }),
                stale,
                unlocked: None,
            });
        }
        Err(LockError::Io(format!(
            "cannot lock {}: the lock file keeps being replaced",
            path.display()
        )))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Removed while still locked, so no other eval takes a lock on a file that
        // is about to disappear (see `acquire`); never a file that is not ours.
        if path_id(&self.path).as_ref() == Some(&self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
        let mut held = HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.retain(|(p, id)| !(p == &self.path && id == &self.id));
        drop(held);
        let _ = self.file.unlock();
    }
}

fn read_holder(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(4096).read_to_string(&mut text).ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// Identity of a file (device and inode on Unix): tells whether a path still names
/// the file we hold.
#[cfg(unix)]
type FileId = (u64, u64);
#[cfg(not(unix))]
type FileId = ();

#[cfg(unix)]
fn file_id(f: &File) -> std::io::Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = f.metadata()?;
    Ok((m.dev(), m.ino()))
}

#[cfg(unix)]
fn path_id(p: &Path) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(_: &File) -> std::io::Result<FileId> {
    Ok(())
}

#[cfg(not(unix))]
fn path_id(p: &Path) -> Option<FileId> {
    p.exists().then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        let lock = first.lock.expect("locked");
        assert!(first.stale.is_none());
        // Another open file description of the same file: refused, like another
        // process.
        match DirLock::acquire(dir.path()) {
            Err(LockError::Held { path, holder }) => {
                assert_eq!(path, dir.path().join(LOCK_FILE));
                assert_eq!(holder.map(|h| h.pid), Some(std::process::id()));
            }
            other => panic!("expected Held, got {other:?}"),
        }
        drop(lock);
        assert!(!dir.path().join(LOCK_FILE).exists());
        let again = DirLock::acquire(dir.path()).unwrap();
        assert!(again.lock.is_some() && again.stale.is_none());
    }

    #[test]
    fn a_lock_file_left_behind_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let old = Holder {
            pid: 999_999_999,
            host: Some("elsewhere".into()),
            started_unix_ms: 1,
        };
        std::fs::write(
            dir.path().join(LOCK_FILE),
            serde_json::to_string(&old).unwrap(),
        )
        .unwrap();
        let got = DirLock::acquire(dir.path()).unwrap();
        assert_eq!(got.stale, Some(old));
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        let now: Holder = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(now.pid, std::process::id());
    }
}
