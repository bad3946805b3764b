//! Checkpoints: threads whose runs survive the process.
//!
//! A *thread* is a named sequence of runs of one spec. While a thread run goes, the
//! interpreter hands a [`Snapshot`] to its step hook at step 0 and after every
//! completed step; [`thread`] persists each one through a [`Checkpointer`], so a run
//! killed mid-way (kill -9 included) resumes from its last completed step without
//! repeating that step's LLM calls, and a run paused by an interrupt
//! (`interrupt_before`) continues when resumed, optionally with a state patch.
//!
//! - [`Checkpointer`]: the storage trait (no SQL in it); [`sqlite`]: the default
//!   backend, an embedded SQLite file under the cache dir ([`default_path`]), WAL
//!   mode, versioned migrations; [`postgres`]: the same schema on a PostgreSQL
//!   server (`--checkpoints postgres://...`);
//! - [`thread`]: the API `ragloop run --thread` and the server call: [`prepare`]
//!   (every check, nothing written) then [`run_thread`].
//!
//! Layering: `checkpoint` → `runtime` (the runtime knows only its `StepHook`).
//! docs/checkpoints.md has the schema and the resume rules.
pub mod postgres;
pub mod sqlite;
pub mod thread;

pub use postgres::PostgresCheckpointer;
pub use sqlite::SqliteCheckpointer;
pub use thread::{
    check_nodes, prepare, run_thread, spec_id, Mode, Prepared, ThreadError, ThreadOutcome,
};

use crate::runtime::{Snapshot, Status};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which spec a run ran: checked when a thread is resumed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecId {
    /// The spec's `name`.
    pub name: String,
    /// The variant applied, if any.
    pub variant: Option<String>,
    /// `Program::fingerprint`: blake3 of the merged, changed spec and its prompt
    /// and schema texts.
    pub fingerprint: String,
}

/// How a run of a thread stands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStatus {
    /// `None` while the run goes (or when its process died: a killed run stays
    /// running), else how it ended.
    pub status: Option<Status>,
    /// Why it failed, was limited, interrupted or paused.
    pub error: Option<String>,
    /// The node it paused before (`interrupt_before`), with status interrupted.
    pub paused_before: Option<String>,
}

impl RunStatus {
    /// `running`, or the status as written in results (`generated`, ...).
    pub fn as_str(&self) -> &'static str {
        self.status.map_or("running", Status::as_str)
    }

    /// Whether `--resume` may continue this run: it is running (its process was
    /// killed), interrupted (a signal, or paused by an interrupt) or failed (the
    /// failed step runs again).
    pub fn resumable(&self) -> bool {
        matches!(
            self.status,
            None | Some(Status::Interrupted) | Some(Status::Failed)
        )
    }

    /// Whether a new run on the thread would abandon this one: it is running or
    /// interrupted (a failed run may be left behind).
    pub fn unfinished(&self) -> bool {
        matches!(self.status, None | Some(Status::Interrupted))
    }
}

/// One run of a thread (runs are numbered from 1 in their thread).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Its number in the thread: 1, 2, ...
    pub run: u32,
    /// The spec it runs.
    pub spec: SpecId,
    /// How it stands.
    pub status: RunStatus,
    /// When it started and was last written (Unix milliseconds).
    pub started_ms: u64,
    /// When it was last written (Unix milliseconds).
    pub updated_ms: u64,
}

/// What wrote a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Step 0 of a run: the initial state.
    Input,
    /// A completed step.
    Loop,
    /// A state patch applied when the run was resumed.
    Update,
}

impl Source {
    /// As stored: `input`, `loop`, `update`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Input => "input",
            Source::Loop => "loop",
            Source::Update => "update",
        }
    }

    fn parse(s: &str) -> Option<Source> {
        match s {
            "input" => Some(Source::Input),
            "loop" => Some(Source::Loop),
            "update" => Some(Source::Update),
            _ => None,
        }
    }
}

/// One stored checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The thread.
    pub thread: String,
    /// Its position in the thread's history (increasing, unique per store).
    pub seq: u64,
    /// The run it belongs to (with that run's current status).
    pub run: RunInfo,
    /// What wrote it.
    pub source: Source,
    /// The run at that point.
    pub snapshot: Snapshot,
    /// When it was written (Unix milliseconds).
    pub created_ms: u64,
}

/// A thread's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// The thread's id.
    pub id: String,
    /// When it was created (Unix milliseconds).
    pub created_ms: u64,
    /// Its latest run, if it had one.
    pub latest: Option<RunInfo>,
}

/// A storage failure. `Display` names the store and what failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The database cannot be opened, read or written.
    #[error("checkpoint store {path}: {message}")]
    Store {
        /// The database (a file path).
        path: String,
        /// What failed.
        message: String,
    },
    /// The database was written by a newer ragloop (its schema version is higher
    /// than this build's).
    #[error("checkpoint store {path}: schema version {found} is newer than this ragloop's ({supported}); use a newer ragloop, or another --checkpoints file")]
    TooNew {
        /// The database.
        path: String,
        /// Its schema version.
        found: i64,
        /// The newest this build knows.
        supported: i64,
    },
    /// A stored row cannot be read back (a damaged or hand-edited database).
    #[error("checkpoint store {path}: thread `{thread}`: {message}")]
    Corrupt {
        /// The database.
        path: String,
        /// The thread.
        thread: String,
        /// What is wrong.
        message: String,
    },
    /// The run was never begun on the thread.
    #[error("thread `{thread}` has no run {run}")]
    NoRun {
        /// The thread.
        thread: String,
        /// The run number.
        run: u32,
    },
    /// No location for the default database (no cache dir), or a location that is
    /// not one (a malformed `postgres://` URL): a usage error.
    #[error("{0}")]
    Unsupported(String),
}

/// Where threads are kept: runs, their statuses, and every checkpoint. One call is
/// one transaction; implementations are shared between tasks (`Send + Sync`) and
/// block the calling thread for the duration of the write (about a millisecond on
/// SQLite).
pub trait Checkpointer: Send + Sync {
    /// Creates an empty thread; `Ok(false)` when it existed already.
    ///
    /// # Errors
    /// [`CheckpointError::Store`].
    fn create_thread(&self, thread: &str) -> Result<bool, CheckpointError>;

    /// The thread's summary, `None` when the store has no such thread.
    ///
    /// # Errors
    /// [`CheckpointError::Store`], [`CheckpointError::Corrupt`].
    fn thread(&self, thread: &str) -> Result<Option<ThreadInfo>, CheckpointError>;

    /// Starts a new run of `spec` on the thread (created when absent), status
    /// running; returns its number (one more than the thread's last).
    ///
    /// # Errors
    /// [`CheckpointError::Store`].
    fn begin_run(&self, thread: &str, spec: &SpecId) -> Result<u32, CheckpointError>;

    /// Stores a checkpoint of run `run` (and marks the run running).
    ///
    /// # Errors
    /// [`CheckpointError::Store`]; [`CheckpointError::NoRun`] for a run that
    /// was never begun.
    fn put(
        &self,
        thread: &str,
        run: u32,
        source: Source,
        snapshot: &Snapshot,
    ) -> Result<(), CheckpointError>;

    /// Records how run `run` stands (ended, paused, running again).
    ///
    /// # Errors
    /// [`CheckpointError::Store`], [`CheckpointError::NoRun`].
    fn set_status(&self, thread: &str, run: u32, status: &RunStatus)
        -> Result<(), CheckpointError>;

    /// The thread's latest checkpoint (of its latest run), `None` when the thread
    /// is unknown or has none.
    ///
    /// # Errors
    /// [`CheckpointError::Store`], [`CheckpointError::Corrupt`].
    fn latest(&self, thread: &str) -> Result<Option<Checkpoint>, CheckpointError>;

    /// Every checkpoint of the thread, oldest first (empty when unknown).
    ///
    /// # Errors
    /// [`CheckpointError::Store`], [`CheckpointError::Corrupt`].
    fn history(&self, thread: &str) -> Result<Vec<Checkpoint>, CheckpointError>;
}

/// The default checkpoint database: `<cache>/checkpoints/threads.sqlite3` under
/// `crate::retrieval::cache_root` (`$RAGLOOP_CACHE_DIR`, `$XDG_CACHE_HOME/ragloop`,
/// `~/.cache/ragloop`); `None` when no cache dir is known.
pub fn default_path() -> Option<PathBuf> {
    crate::retrieval::cache_root().map(|d| d.join("checkpoints").join("threads.sqlite3"))
}

/// Opens the store `--checkpoints` names: `None` → [`default_path`];
/// `postgres://…`/`postgresql://…` → [`PostgresCheckpointer`]; any other text → that
/// SQLite file (created with its directory when absent).
///
/// # Errors
/// [`CheckpointError::Unsupported`] when there is no cache dir for the default or a
/// `postgres://` URL does not parse;
/// [`CheckpointError::Store`], [`CheckpointError::TooNew`] from the backend's `open`.
pub fn open(location: Option<&str>) -> Result<Box<dyn Checkpointer>, CheckpointError> {
    let path = match location {
        Some(l) if l.starts_with("postgres://") || l.starts_with("postgresql://") => {
            return Ok(Box::new(PostgresCheckpointer::open(l)?));
        }
        Some(l) => PathBuf::from(l),
        None => default_path().ok_or_else(|| {
            CheckpointError::Unsupported(
                "no cache dir for the checkpoint database (set RAGLOOP_CACHE_DIR or HOME, or give --checkpoints FILE)".into(),
            )
        })?,
    };
    Ok(Box::new(SqliteCheckpointer::open(&path)?))
}
