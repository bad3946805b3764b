//! Thread runs: a run whose every step is checkpointed, and resuming one.
//!
//! Two phases, so a caller refuses a bad request before opening anything:
//! [`prepare`] checks the thread, the spec, the interrupt nodes and the state patch
//! and writes nothing; [`run_thread`] then begins or resumes the run, checkpoints
//! it through the [`Checkpointer`] after every step and records how it ended.
//!
//! Rules (docs/checkpoints.md):
//! - a new run on an existing thread is run `n+1` of it, starting from the spec's
//!   initial state (the question and `--set`s) and appending to its history; it is
//!   refused while the thread's latest run is unfinished (running or interrupted:
//!   resume it) or when the thread belongs to another spec (`name`);
//! - a resume continues the thread's latest run from its latest checkpoint; it is
//!   refused when that run ended (generated, exhausted, fallback, limit), when the
//!   spec's name or variant differ, and when the compiled spec changed
//!   (`Program::fingerprint`: spec, prompts, schemas and command-line changes);
//! - a resume of a run paused before node N runs N (it does not pause there again);
//!   its state patch is checked against the state schema first and stored as a
//!   checkpoint of its own (source `update`).
use super::{Checkpoint, CheckpointError, Checkpointer, RunStatus, Source, SpecId};
use crate::runtime::{
    run_from, CancellationToken, Control, Observer, PatchError, Program, Resources, RunInput,
    RunResult, Snapshot, Start, StepHook,
};
use serde_json::Value;

/// What to do on the thread.
#[derive(Clone, Copy, Debug)]
pub enum Mode<'a> {
    /// A new run on the thread (created when absent).
    New(&'a RunInput),
    /// Continue the thread's latest run, after writing `patch` (field, value;
    /// may be empty) into its state.
    Resume {
        /// The state patch.
        patch: &'a [(String, Value)],
    },
}

/// Why a thread request is refused ([`ThreadError::is_usage`]: everything but
/// [`ThreadError::Store`] is the caller's mistake). `Display` is the message.
#[derive(Debug, thiserror::Error)]
pub enum ThreadError {
    /// The thread id is empty, longer than 256 bytes or has control characters.
    #[error("thread id {0:?}: give 1 to 256 characters without control characters")]
    BadId(String),
    /// `--resume` of a thread the store does not have.
    #[error("no thread `{0}` to resume (a new run on it starts it: run without --resume)")]
    UnknownThread(String),
    /// The thread has no run, or its latest run has no checkpoint yet.
    #[error("thread `{0}` has no checkpoint to resume from")]
    NothingToResume(String),
    /// `--resume` of a run that ended.
    #[error("thread `{thread}`: run {run} ended with status {status}; nothing to resume (run without --resume for a new run on the thread)")]
    Finished {
        /// The thread.
        thread: String,
        /// The run.
        run: u32,
        /// How it ended.
        status: &'static str,
    },
    /// A new run while the latest is unfinished.
    #[error("thread `{thread}`: run {run} is {status}{}; continue it with --resume", .paused_before.as_ref().map(|n| format!(" (paused before node `{n}`)")).unwrap_or_default())]
    Unfinished {
        /// The thread.
        thread: String,
        /// The unfinished run.
        run: u32,
        /// `running` or `interrupted`.
        status: &'static str,
        /// The node it paused before, if paused.
        paused_before: Option<String>,
    },
    /// The thread's runs are of another spec, or (on resume) another variant.
    #[error("thread `{thread}` runs {theirs}; this is {ours}")]
    OtherSpec {
        /// The thread.
        thread: String,
        /// The thread's spec (`spec `a`, variant `v``).
        theirs: String,
        /// This program's.
        ours: String,
    },
    /// Resume on a spec whose compiled form changed since the run started.
    #[error("thread `{thread}`: the spec changed since run {run} started (fingerprint {was} then, {now} now: its file, a prompt, a schema or a command-line change such as --model or --override); resume with the same spec and flags, or start a new run without --resume")]
    ChangedSpec {
        /// The thread.
        thread: String,
        /// The run.
        run: u32,
        /// The stored fingerprint's first 12 digits.
        was: String,
        /// The program's first 12 digits.
        now: String,
    },
    /// An interrupt names a node the spec does not have.
    #[error("no node `{node}` to interrupt before (nodes: {})", .nodes.join(", "))]
    UnknownNode {
        /// The name given.
        node: String,
        /// The spec's nodes.
        nodes: Vec<String>,
    },
    /// The state patch does not fit the state schema.
    #[error("state patch: {0}")]
    Patch(#[from] PatchError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] CheckpointError),
}

impl ThreadError {
    /// Whether the request is at fault (a usage error, exit 2; a 4xx for a
    /// server) rather than the store.
    pub fn is_usage(&self) -> bool {
        !matches!(self, ThreadError::Store(_))
    }

    /// A stable snake_case code for error bodies: `bad_thread_id`,
    /// `unknown_thread`, `nothing_to_resume`, `run_finished`, `thread_busy`,
    /// `other_spec`, `spec_changed`, `unknown_node`, `invalid_patch`,
    /// `checkpoint_store`.
    pub fn code(&self) -> &'static str {
        match self {
            ThreadError::BadId(_) => "bad_thread_id",
            ThreadError::UnknownThread(_) => "unknown_thread",
            ThreadError::NothingToResume(_) => "nothing_to_resume",
            ThreadError::Finished { .. } => "run_finished",
            ThreadError::Unfinished { .. } => "thread_busy",
            ThreadError::OtherSpec { .. } => "other_spec",
            ThreadError::ChangedSpec { .. } => "spec_changed",
            ThreadError::UnknownNode { .. } => "unknown_node",
            ThreadError::Patch(_) => "invalid_patch",
            ThreadError::Store(_) => "checkpoint_store",
        }
    }
}

/// Checks that every name in `nodes` is a node of the program.
///
/// # Errors
/// [`ThreadError::UnknownNode`] naming the first unknown one and the spec's nodes.
pub fn check_nodes(program: &Program, nodes: &[String]) -> Result<(), ThreadError> {
    for n in nodes {
        if !program.nodes.iter().any(|p| p.name == *n) {
            return Err(ThreadError::UnknownNode {
                node: n.clone(),
                nodes: program.nodes.iter().map(|p| p.name.clone()).collect(),
            });
        }
    }
    Ok(())
}

/// The [`SpecId`] of a program.
pub fn spec_id(program: &Program) -> SpecId {
    SpecId {
        name: program.name.clone(),
        variant: program.variant.clone(),
        fingerprint: program.fingerprint.clone(),
    }
}

fn shown(spec: &SpecId) -> String {
    match &spec.variant {
        Some(v) => format!("spec `{}`, variant `{v}`", spec.name),
        None => format!("spec `{}` (no variant)", spec.name),
    }
}

/// A checked thread request, ready for [`run_thread`].
#[derive(Debug)]
pub struct Prepared {
    thread: String,
    spec: SpecId,
    interrupt_before: Vec<String>,
    what: What,
}

#[derive(Debug)]
enum What {
    New(RunInput),
    Resume {
        run: u32,
        snapshot: Box<Snapshot>,
        past_pause: bool,
        patched: bool,
    },
}

impl Prepared {
    /// The thread id.
    pub fn thread(&self) -> &str {
        &self.thread
    }

    /// The run resumed (`None` for a new run: its number comes when it begins).
    pub fn resumed_run(&self) -> Option<u32> {
        match &self.what {
            What::Resume { run, .. } => Some(*run),
            What::New(_) => None,
        }
    }

    /// The checkpoint a resume continues from (patched), `None` for a new run.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        match &self.what {
            What::Resume { snapshot, .. } => Some(snapshot),
            What::New(_) => None,
        }
    }
}

/// Checks a thread request against the store and the program; writes nothing.
/// `interrupt_before`: nodes to pause before besides the spec's `interrupt_before`
/// ones (this run only; a resume does not remember a previous run's list).
///
/// # Errors
/// Every [`ThreadError`]; see the module docs for the
/// rules.
pub fn prepare(
    store: &dyn Checkpointer,
    program: &Program,
    thread: &str,
    mode: Mode<'_>,
    interrupt_before: &[String],
) -> Result<Prepared, ThreadError> {
    if thread.is_empty() || thread.len() > 256 || thread.chars().any(char::is_control) {
        return Err(ThreadError::BadId(thread.to_string()));
    }
    check_nodes(program, interrupt_before)?;
    let ours = spec_id(program);
    let info = store.thread(thread)?;
    let what = match mode {
        Mode::New(input) => {
            if let Some(latest) = info.as_ref().and_then(|i| i.latest.as_ref()) {
                if latest.status.unfinished() {
                    return Err(ThreadError::Unfinished {
                        thread: thread.to_string(),
                        run: latest.run,
                        status: latest.status.as_str(),
                        paused_before: latest.status.paused_before.clone(),
                    });
                }
                if latest.spec.name != ours.name {
                    return Err(ThreadError::OtherSpec {
                        thread: thread.to_string(),
                        theirs: shown(&latest.spec),
                        ours: shown(&ours),
                    });
                }
            }
            What::New(input.clone())
        }
        Mode::Resume { patch } => {
            let info = info.ok_or_else(|| ThreadError::UnknownThread(thread.to_string()))?;
            let latest = info
                .latest
                .ok_or_else(|| ThreadError::NothingToResume(thread.to_string()))?;
            if !latest.status.resumable() {
                return Err(ThreadError::Finished {
                    thread: thread.to_string(),
                    run: latest.run,
                    status: latest.status.as_str(),
                });
            }
            if latest.spec.name != ours.name || latest.spec.variant != ours.variant {
                return Err(ThreadError::OtherSpec {
                    thread: thread.to_string(),
                    theirs: shown(&latest.spec),
                    ours: shown(&ours),
                });
            }
            if latest.spec.fingerprint != ours.fingerprint {
                let short = |f: &str| f.chars().take(12).collect::<String>();
                return Err(ThreadError::ChangedSpec {
                    thread: thread.to_string(),
                    run: latest.run,
                    was: short(&latest.spec.fingerprint),
                    now: short(&ours.fingerprint),
                });
            }
            let Some(Checkpoint { mut snapshot, .. }) =
                store.latest(thread)?.filter(|c| c.run.run == latest.run)
            else {
                return Err(ThreadError::NothingToResume(thread.to_string()));
            };
            let past_pause = latest.status.paused_before.is_some()
                && latest.status.paused_before == snapshot.next;
            if !patch.is_empty() {
                snapshot.patch(program, patch)?;
            }
            What::Resume {
                run: latest.run,
                snapshot: Box::new(snapshot),
                past_pause,
                patched: !patch.is_empty(),
            }
        }
    };
    Ok(Prepared {
        thread: thread.to_string(),
        spec: ours,
        interrupt_before: interrupt_before.to_vec(),
        what,
    })
}

/// A finished thread run.
#[derive(Debug)]
pub struct ThreadOutcome {
    /// The thread.
    pub thread: String,
    /// The run's number in the thread.
    pub run: u32,
    /// The whole run's result (a resumed run's path, steps and usage include the
    /// steps done before it was resumed).
    pub result: RunResult,
    /// The run's end could not be recorded (the checkpoints of its steps were):
    /// the store then still says `running`, and a resume continues after the last
    /// checkpointed step.
    pub status_error: Option<CheckpointError>,
}

/// Writes each snapshot as a checkpoint of `run`.
struct Persist<'a> {
    store: &'a dyn Checkpointer,
    thread: &'a str,
    run: u32,
}

impl StepHook for Persist<'_> {
    fn after_step(&mut self, snapshot: &Snapshot) -> Result<(), String> {
        let source = if snapshot.step == 0 {
            Source::Input
        } else {
            Source::Loop
        };
        self.store
            .put(self.thread, self.run, source, snapshot)
            .map_err(|e| e.to_string())
    }
}

/// Runs a [`prepare`]d request: begins the new run (or marks the resumed one
/// running, storing its patched state as a checkpoint), runs it with a checkpoint
/// after every step (and at step 0 of a new run), pausing before the spec's
/// `interrupt_before` nodes and the prepared ones, and records how it ended.
/// `obs` and `cancel` are as for [`crate::runtime::run_until`].
///
/// # Errors
/// [`ThreadError::Store`] when the run cannot begin (nothing ran). A checkpoint
/// write failing mid-run fails the run instead (its result says so); the end
/// status failing to write is [`ThreadOutcome::status_error`].
pub async fn run_thread(
    store: &dyn Checkpointer,
    program: &Program,
    res: &Resources,
    prepared: Prepared,
    obs: &mut dyn Observer,
    cancel: &CancellationToken,
) -> Result<ThreadOutcome, ThreadError> {
    let Prepared {
        thread,
        spec,
        interrupt_before,
        what,
    } = prepared;
    let run = match &what {
        What::New(_) => store.begin_run(&thread, &spec)?,
        What::Resume {
            run,
            snapshot,
            patched,
            ..
        } => {
            if *patched {
                store.put(&thread, *run, Source::Update, snapshot)?;
            } else {
                store.set_status(&thread, *run, &RunStatus::default())?;
            }
            *run
        }
    };
    let start = match &what {
        What::New(input) => Start::Fresh(input),
        What::Resume {
            snapshot,
            past_pause,
            ..
        } => Start::Resume {
            snapshot,
            past_pause: *past_pause,
        },
    };
    let mut hook = Persist {
        store,
        thread: &thread,
        run,
    };
    let ctl = Control {
        cancel,
        interrupts: true,
        interrupt_before: &interrupt_before,
        hook: Some(&mut hook),
    };
    let result = run_from(program, res, start, obs, ctl).await;
    let status = RunStatus {
        status: Some(result.status),
        error: result.error.clone(),
        paused_before: result.paused_before.clone(),
    };
    let status_error = store.set_status(&thread, run, &status).err();
    Ok(ThreadOutcome {
        thread,
        run,
        result,
        status_error,
    })
}
