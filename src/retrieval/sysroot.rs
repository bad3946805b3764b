//! `$(rustc --print sysroot)`, asked with a time limit: a `rust-docs:` corpus lives
//! under the toolchain's sysroot.
//!
//! Asking costs a process start (about 30 ms through rustup's proxy, more than a whole
//! offline run), so a successful answer is also remembered across processes, in
//! `<cache>/sysroot/` ([`super::cache_root`]), under a key of everything that picks
//! the toolchain: the rustc asked (`$RUSTC` or `rustc`) and the file it resolves to on
//! `$PATH` (path, size, modification and change times, inode), `$PATH`,
//! `$RUSTUP_TOOLCHAIN`, `$RUSTUP_HOME`, `$CARGO_HOME`, the current directory, rustup's
//! `settings.toml` (default toolchain, directory overrides) and every
//! `rust-toolchain`/`rust-toolchain.toml` from the current directory up (their stamps).
//! A remembered sysroot is used only while that directory still exists; anything else
//! that changes the key asks rustc again. Failures are never remembered across
//! processes.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Seconds `rustc --print sysroot` may take before it is killed, unless
/// `$RAGLOOP_RUSTC_TIMEOUT_SECS` says otherwise.
pub const DEFAULT_RUSTC_TIMEOUT_SECS: f64 = 10.0;

/// At most this many characters of a failing rustc's stderr are quoted.
const STDERR_CLIP: usize = 300;

/// `$(rustc --print sysroot)` (`$RUSTC` names the rustc; empty counts as unset),
/// asked once per process for each rustc, its answer or its failure remembered:
/// validation resolves every `rust-docs:` corpus of every variant.
///
/// The rustc is killed when it has not answered within `$RAGLOOP_RUSTC_TIMEOUT_SECS`
/// seconds (default [`DEFAULT_RUSTC_TIMEOUT_SECS`]).
///
/// # Errors
/// As text naming the rustc: it cannot be started, did not answer in time, exited
/// unsuccessfully (with the first lines of its stderr), or printed an empty or
/// relative path.
pub(super) fn sysroot() -> Result<String, String> {
    type Cache = Vec<(OsString, Result<String, String>)>;
    static CACHE: std::sync::Mutex<Cache> = std::sync::Mutex::new(Vec::new());
    let rustc = std::env::var_os("RUSTC")
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "rustc".into());
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, s)) = cache.iter().find(|(r, _)| *r == rustc) {
        return s.clone();
    }
    let stored = super::cache_dir::cache_root().map(|c| c.join("sysroot").join(key(&rustc)));
    if let Some(known) = stored.as_deref().and_then(remembered) {
        cache.push((rustc, Ok(known.clone())));
        return Ok(known);
    }
    let answer = timeout().and_then(|t| ask(&rustc, t));
    if let (Ok(sysroot), Some(path)) = (&answer, &stored) {
        remember(path, sysroot);
    }
    cache.push((rustc, answer.clone()));
    answer
}

/// The sysroot stored at `path`, if it is there and still a directory.
fn remembered(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let sysroot = text.strip_suffix('\n')?;
    (Path::new(sysroot).is_absolute() && Path::new(sysroot).is_dir()).then(|| sysroot.to_string())
}

/// Stores `sysroot` at `path` (written to a temporary file and renamed, so a reader
/// never sees half of it). Best effort: a cache that cannot be written costs only the
/// next process its question to rustc.
fn remember(path: &Path, sysroot: &str) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(".tmp-{}", std::process::id()));
    if std::fs::write(&tmp, format!("{sysroot}\n")).is_err() || std::fs::rename(&tmp, path).is_err()
    {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The stamp of a file that may pick the toolchain: its size, modification and change
/// times and inode, or that it is absent.
fn stamp(h: &mut blake3::Hasher, label: &str, path: &Path) {
    h.update(label.as_bytes());
    h.update(path.as_os_str().as_encoded_bytes());
    match std::fs::metadata(path) {
        Ok(m) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                h.update(
                    format!(
                        " {} {}.{} {}.{} {}\n",
                        m.len(),
                        m.mtime(),
                        m.mtime_nsec(),
                        m.ctime(),
                        m.ctime_nsec(),
                        m.ino()
                    )
                    .as_bytes(),
                );
            }
            #[cfg(not(unix))]
            h.update(format!(" {} {:?}\n", m.len(), m.modified().ok()).as_bytes());
        }
        Err(_) => {
            h.update(b" absent\n");
        }
    }
}

/// The file name under `<cache>/sysroot/` of what `rustc` answers here and now: a hash
/// of everything that picks the toolchain (see the module docs).
fn key(rustc: &OsString) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"ragloop sysroot v1\n");
    h.update(rustc.as_encoded_bytes());
    h.update(b"\n");
    for var in [
        "PATH",
        "RUSTUP_TOOLCHAIN",
        "RUSTUP_HOME",
        "CARGO_HOME",
        "HOME",
    ] {
        h.update(var.as_bytes());
        h.update(b"=");
        if let Some(v) = std::env::var_os(var) {
            h.update(v.as_encoded_bytes());
        }
        h.update(b"\n");
    }
    // The executable that runs: `$RUSTC` as given when it names a path, else the
    // first `rustc` on `$PATH`.
    let exe = Path::new(rustc);
    if exe.components().count() > 1 {
        stamp(&mut h, "exe ", exe);
    } else if let Some(path) = std::env::var_os("PATH") {
        if let Some(found) = std::env::split_paths(&path)
            .map(|d| d.join(exe))
            .find(|p| p.is_file())
        {
            stamp(&mut h, "exe ", &found);
        }
    }
    let rustup_home = std::env::var_os("RUSTUP_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".rustup")));
    if let Some(home) = rustup_home {
        stamp(&mut h, "settings ", &home.join("settings.toml"));
    }
    if let Ok(cwd) = std::env::current_dir() {
        h.update(b"cwd ");
        h.update(cwd.as_os_str().as_encoded_bytes());
        h.update(b"\n");
        for dir in cwd.ancestors() {
            stamp(&mut h, "toolchain ", &dir.join("rust-toolchain"));
            stamp(&mut h, "toolchain ", &dir.join("rust-toolchain.toml"));
        }
    }
    h.finalize().to_hex()[..32].to_string()
}

/// The time limit from `$RAGLOOP_RUSTC_TIMEOUT_SECS` (seconds, > 0), else the default.
fn timeout() -> Result<Duration, String> {
    let Some(raw) = std::env::var_os("RAGLOOP_RUSTC_TIMEOUT_SECS") else {
        return Ok(Duration::from_secs_f64(DEFAULT_RUSTC_TIMEOUT_SECS));
    };
    let text = raw.to_string_lossy();
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "RAGLOOP_RUSTC_TIMEOUT_SECS is `{text}`; it must be a number of seconds above 0 and at most 86400"
        )),
    }
}

/// Runs `rustc --print sysroot` with stdin closed, killing it after `limit`.
fn ask(rustc: &OsString, limit: Duration) -> Result<String, String> {
    let shown = Path::new(rustc).display().to_string();
    let mut child = Command::new(rustc)
        .args(["--print", "sysroot"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running `{shown}` ($RUSTC): {e}"))?;
    // The pipes are drained on threads so a chatty rustc cannot fill them and stall;
    // a grandchild holding them open must not stall us either, hence channels with
    // deadlines rather than joins.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + limit;
    let mut poll = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{shown} --print sysroot` ($RUSTC) did not answer within {} s and was stopped (RAGLOOP_RUSTC_TIMEOUT_SECS sets the limit)",
                    limit.as_secs_f64()
                ));
            }
            Ok(None) => {
                // 1 ms, doubling to 20 ms: a fast rustc is not kept waiting on a
                // coarse poll.
                std::thread::sleep(poll);
                poll = (poll * 2).min(Duration::from_millis(20));
            }
            Err(e) => {
                let _ = child.kill();
                return Err(format!("waiting for `{shown}` ($RUSTC): {e}"));
            }
        }
    };
    let grace = Duration::from_secs(1);
    let out = stdout.recv_timeout(grace).unwrap_or_default();
    let err = stderr.recv_timeout(grace).unwrap_or_default();
    if !status.success() {
        let said = clip(&String::from_utf8_lossy(&err));
        return Err(if said.is_empty() {
            format!("`{shown} --print sysroot` ($RUSTC) exited with {status}")
        } else {
            format!("`{shown} --print sysroot` ($RUSTC) exited with {status}: {said}")
        });
    }
    let sysroot = String::from_utf8_lossy(&out).trim().to_string();
    if sysroot.is_empty() {
        return Err(format!(
            "`{shown} --print sysroot` ($RUSTC) printed no sysroot"
        ));
    }
    if !Path::new(&sysroot).is_absolute() {
        return Err(format!(
            "`{shown} --print sysroot` ($RUSTC) printed `{}`, which is not an absolute path",
            clip(&sysroot)
        ));
    }
    Ok(sysroot)
}

/// Reads a pipe to its end on a thread; the bytes arrive on the channel.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    if let Some(mut pipe) = pipe {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
    } else {
        let _ = tx.send(Vec::new());
    }
    rx
}

/// The first non-empty lines of `text` (at most 3), trimmed, joined by ` / `, and
/// clipped to [`STDERR_CLIP`] characters.
fn clip(text: &str) -> String {
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(3)
        .collect::<Vec<_>>()
        .join(" / ");
    if joined.chars().count() > STDERR_CLIP {
        let mut s: String = joined.chars().take(STDERR_CLIP).collect();
        s.push('…');
        s
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_keeps_the_first_lines_trimmed_and_bounded() {
        assert_eq!(clip("  error: a  \n\n b \n c\n d\n"), "error: a / b / c");
        assert_eq!(clip(""), "");
        assert_eq!(clip(&"x".repeat(400)).chars().count(), 301);
    }
}
