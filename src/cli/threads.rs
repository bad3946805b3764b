//! `ragloop run --thread ID [--resume]`, `--interrupt-before NODE`, `--checkpoints
//! FILE`: the checkpoint store and thread ids for `run` (the rules are in
//! `ragloop::checkpoint::thread` and docs/checkpoints.md).
use ragloop::checkpoint::{self, CheckpointError, Checkpointer, ThreadOutcome};
use ragloop::runtime::Status;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Opens the store `--checkpoints` names (a SQLite file or a `postgres://` URL;
/// default: under the cache dir). A missing cache dir is a usage error (2); a
/// database that cannot be opened, or is of a newer ragloop, fails (1).
pub fn open_store(location: Option<&str>) -> Result<Box<dyn Checkpointer>, ExitCode> {
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

/// Prints a thread run's result like any run's (`--json`: with `thread`, `run`,
/// `paused_before`), then how to continue it when it can be resumed; returns its
/// exit code (6 when paused). `stream`: the answer was streamed to stdout (`--stream`),
/// the summary goes to stderr.
pub fn report(outcome: &ThreadOutcome, json: bool, stream: bool, spec: &Path) -> ExitCode {
    let r = &outcome.result;
    if json {
        let mut out = std::io::stdout().lock();
        let line = super::run::result_json_on(r, None, Some((&outcome.thread, outcome.run)));
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        if let Some(e) = &r.error {
            ragloop::errln!("ragloop run: {e}");
        }
    } else {
        super::run::print_result(r, stream);
    }
    if let Some(e) = &outcome.status_error {
        ragloop::errln!("ragloop run: the run's end was not recorded: {e}");
    }
    if matches!(r.status, Status::Interrupted | Status::Failed) {
        ragloop::errln!(
            "ragloop run: thread `{}` run {}: continue with: ragloop run {} --thread {} --resume{}",
            outcome.thread,
            outcome.run,
            spec.display(),
            outcome.thread,
            if r.paused_before.is_some() {
                " [--set FIELD=VALUE ...]"
            } else {
                ""
            }
        );
    }
    ExitCode::from(r.exit_code())
}
