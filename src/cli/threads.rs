//! `ragloop run --thread ID [--resume]`, `--interrupt-before NODE`, `--checkpoints
//! FILE`: the checkpoint store and thread ids for `run` (the rules are in
//! `ragloop::checkpoint::thread` and docs/checkpoints.md).
use ragloop::checkpoint::{self, CheckpointError, Checkpointer, SqliteCheckpointer};
use std::process::ExitCode;

/// Opens the store `--checkpoints` names (default: under the cache dir). A
/// PostgreSQL URL or a missing cache dir is a usage error (2); a database that
/// cannot be opened, or is of a newer ragloop, fails (1).
pub fn open_store(location: Option<&str>) -> Result<SqliteCheckpointer, ExitCode> {
    checkpoint::open(location).map_err(|e| {
        ragloop::errln!("ragloop run: {e}");
        match e {
            CheckpointError::Unsupported(_) => ExitCode::from(super::EXIT_USAGE),
            _ => ExitCode::from(1),
        }
    })
}

/// The variant the thread's latest run used, for `--resume` without `--variant`
/// (`None`: no such thread or run, or it ran the base spec).
pub fn stored_variant(store: &dyn Checkpointer, thread: &str) -> Result<Option<String>, ExitCode> {
    match store.thread(thread) {
        Ok(info) => Ok(info.and_then(|i| i.latest).and_then(|r| r.spec.variant)),
        Err(e) => {
            ragloop::errln!("ragloop run: {e}");
            Err(ExitCode::from(1))
        }
    }
}

/// A fresh thread id for a run that may pause without `--thread`:
/// `run-<unix ms>-<pid>` in hex.
pub fn new_thread_id() -> String {
    format!(
        "run-{:x}-{:x}",
        ragloop::clock::unix_ms(),
        std::process::id()
    )
}
