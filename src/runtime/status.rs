//! Terminal statuses of a run and the exit codes of `ragloop run`.
use serde::{Deserialize, Serialize};

/// Exit status of a command stopped by SIGINT or SIGTERM after ending cleanly
/// (128 + 2, what a shell reports for a process killed by SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Exit status of `ragloop run` when the run paused before a node
/// (`interrupt_before` or `--interrupt-before`): status `interrupted`, a checkpoint
/// to resume from (see `RunResult::exit_code`).
pub const EXIT_PAUSED: u8 = 6;

/// How a run ended.
///
/// Decided when the run stops:
/// - reaching END right after a node listed in `output.fallback` → [`Status::Fallback`];
/// - else reaching END with a non-empty string in the `output.answer` field →
///   [`Status::Generated`];
/// - else reaching END → [`Status::Exhausted`] (seed 000 Condition B: no generation,
///   the history of the attempts kept in the state);
/// - a step or visit limit stopping the run → [`Status::Limit`];
/// - any error (provider, template or predicate, schema violation, retrieval) →
///   [`Status::Failed`], with a message naming the node;
/// - the run's cancellation token cancelled (SIGINT/SIGTERM in the CLI) before it
///   reached END → [`Status::Interrupted`], with a message naming the node it stopped
///   at (see [`crate::runtime::run_until`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Reached END with an answer.
    Generated,
    /// Reached END without an answer.
    Exhausted,
    /// Reached END right after a fallback node.
    Fallback,
    /// Stopped by `limits.max_steps` or a node's `max_visits`.
    Limit,
    /// Stopped by an error.
    Failed,
    /// Stopped by its cancellation token (a signal) before reaching END.
    Interrupted,
}

impl Status {
    /// The status as written in traces and JSON results.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Generated => "generated",
            Status::Exhausted => "exhausted",
            Status::Fallback => "fallback",
            Status::Limit => "limit",
            Status::Failed => "failed",
            Status::Interrupted => "interrupted",
        }
    }

    /// Exit code of `ragloop run`: 0 generated, 3 exhausted or fallback, 4 limit,
    /// 1 failed, 130 interrupted (128 + SIGINT, the shell's convention). (2 is a
    /// usage error, decided before any run.)
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Generated => 0,
            Status::Exhausted | Status::Fallback => 3,
            Status::Limit => 4,
            Status::Failed => 1,
            Status::Interrupted => EXIT_INTERRUPTED,
        }
    }

    /// Severity for combining many runs into one exit code: interrupted > failed >
    /// limit > exhausted/fallback > generated.
    pub fn severity(self) -> u8 {
        match self {
            Status::Generated => 0,
            Status::Exhausted | Status::Fallback => 1,
            Status::Limit => 2,
            Status::Failed => 3,
            Status::Interrupted => 4,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
