//! Running specs: the tokio interpreter and what it needs. A [`Program`] comes from
//! [`crate::compile`] (which validated it); nothing here reads or checks spec files.
//!
//! - [`program`]: a validated spec compiled for running ([`Program`]);
//! - [`state`]: initial state, reducers, state schema checks;
//! - [`expr`]: templates and expressions on the shared minijinja environment;
//! - [`resources`]: retrievers ([`Retriever`], BM25 by default), tools, providers;
//! - [`interpreter`]: [`run`], one run of a program (node execution in `nodes.rs`), and
//!   [`run_until`], the same run stopped by a [`CancellationToken`] (status
//!   [`Status::Interrupted`]);
//! - [`snapshot`]: where a run is after a step ([`Snapshot`]), the [`StepHook`] that
//!   persists it (checkpoints, in `crate::checkpoint`) and resuming from one;
//! - [`trace`]: step records, JSON-lines traces, verbose output;
//! - [`status`]: terminal statuses and exit codes.
//!
//! ```no_run
//! # async fn demo() -> Result<(), String> {
//! use ragloop::runtime::*;
//! let program = ragloop::compile::load_program(std::path::Path::new("graphs/crag.yaml"), None, &[]).map_err(|e| e.to_string())?;
//! let res = Resources::prepare(&program, ResourceOptions::default()).map_err(|e| e.to_string())?;
//! let input = RunInput { question: Some("What does cargo check do?".into()), sets: vec![] };
//! let result = run(&program, &res, &input, &mut NoTrace).await;
//! println!("{} {:?}", result.status, result.answer);
//! # Ok(()) }
//! ```
pub mod expr;
mod integers;
pub mod interpreter;
pub(crate) mod kinds;
mod nodes;
pub mod program;
pub mod program_error;
pub mod resources;
pub mod snapshot;
pub mod state;
pub mod status;
pub mod trace;

pub use interpreter::{run, run_from, run_until, Control};
pub use program::{NodeFault, Program, ProgramError, SetError};
pub use resources::{
    ResourceError, ResourceOptions, Resources, Retriever, ScriptedRetriever, SearchFuture,
};
pub use snapshot::{PatchError, Snapshot, Start, StepHook};
pub use status::Status;
pub use tokio_util::sync::CancellationToken;
pub use trace::{JsonlTrace, NoTrace, Observer, StepRecord, Verbose};

use serde::Serialize;
use serde_json::Value;

/// One run's inputs besides the spec.
#[derive(Clone, Debug, Default)]
pub struct RunInput {
    /// The question (written to the `question` field).
    pub question: Option<String>,
    /// `--set FIELD=VALUE` values, applied after the question.
    pub sets: Vec<(String, Value)>,
}

/// Token usage of a whole run (the sum of the steps' [`trace::LlmStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct RunUsage {
    /// LLM calls (repairs included, cached answers included).
    pub calls: u64,
    /// Of `calls`, the answers served from the response cache or a cassette.
    pub cached_calls: u64,
    /// Prompt and completion tokens (cached answers count with their recorded
    /// tokens), and the cost in US dollars of the answers (from the models' `price`;
    /// 0 without prices), cached ones at their recorded cost; the money spent by this
    /// run is `cost_usd - saved_usd`. JSON: `input_tokens`, `output_tokens`,
    /// `cost_usd` at this level.
    #[serde(flatten)]
    pub tokens: crate::providers::Usage,
    /// Of `cost_usd`, the recorded cost of the cached answers: not spent again.
    #[serde(default)]
    pub saved_usd: f64,
    /// True when some call's token counts were estimated (the server reported no
    /// usage); absent from JSON when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    /// The retrievers' calls (query embeddings, HTTP rerank calls) summed over the
    /// steps; absent from JSON when none.
    #[serde(
        default,
        skip_serializing_if = "crate::retrieval::RetrievalUsage::is_empty"
    )]
    pub retrieval: crate::retrieval::RetrievalUsage,
}

impl RunUsage {
    /// One line for people: `4 call(s), 1200 tokens in, 85 out, $0.000231`
    /// (`, estimated` when some counts are estimates; the cost only when priced).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} call(s), {} tokens in, {} out",
            self.calls, self.tokens.input_tokens, self.tokens.output_tokens
        );
        if self.tokens.cost_usd > 0.0 {
            s.push_str(&format!(", ${:.6}", self.tokens.cost_usd));
        }
        if self.estimated {
            s.push_str(" (token counts partly estimated)");
        }
        let r = &self.retrieval;
        if r.embedding_calls > 0 {
            s.push_str(&format!(
                "; {} embedding call(s), {} tokens",
                r.embedding_calls, r.embedding_tokens
            ));
        }
        if r.rerank_calls > 0 {
            s.push_str(&format!("; {} rerank call(s)", r.rerank_calls));
            if r.rerank_search_units > 0 {
                s.push_str(&format!(", {} search unit(s)", r.rerank_search_units));
            }
            if r.rerank_tokens > 0 {
                s.push_str(&format!(", {} tokens", r.rerank_tokens));
            }
        }
        s
    }
}

impl std::ops::AddAssign<&trace::LlmStats> for RunUsage {
    /// Adds a step's usage.
    fn add_assign(&mut self, s: &trace::LlmStats) {
        self.calls += s.calls;
        self.cached_calls += s.cached;
        self.tokens += s.tokens;
        self.saved_usd += s.saved_usd;
        self.estimated |= s.usage_estimated;
        self.retrieval += &s.retrieval;
    }
}

/// What a run returns.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Terminal status.
    pub status: Status,
    /// The answer (`output.answer` field) when the status is generated or fallback.
    pub answer: Option<String>,
    /// `metadata.source` (else `id`) of the documents in the `output.documents` field,
    /// deduplicated, in order.
    pub sources: Vec<String>,
    /// Nodes executed, in order.
    pub path: Vec<String>,
    /// How many times the entry node ran (passes through the loop).
    pub iterations: u32,
    /// Node executions (the length of `path`).
    pub steps: u32,
    /// The final state.
    pub state: Value,
    /// LLM usage.
    pub usage: RunUsage,
    /// Why the run failed or was limited.
    pub error: Option<String>,
    /// The variant the run used.
    pub variant: Option<String>,
    /// The node a thread run paused before (`interrupt_before`), with status
    /// [`Status::Interrupted`]; `None` for every other end.
    pub paused_before: Option<String>,
}

impl RunResult {
    fn new(variant: Option<&str>) -> RunResult {
        RunResult {
            status: Status::Failed,
            answer: None,
            sources: Vec::new(),
            path: Vec::new(),
            iterations: 0,
            steps: 0,
            state: Value::Null,
            usage: RunUsage::default(),
            error: None,
            variant: variant.map(str::to_string),
            paused_before: None,
        }
    }

    /// A failed result with this reason, for callers that could not run the program
    /// at all (a task that panicked, a cancelled run).
    pub fn failed(variant: Option<&str>, msg: String) -> RunResult {
        let mut r = RunResult::new(variant);
        r.fail(msg);
        r
    }

    /// Exit code of `ragloop run` for this result: [`Status::exit_code`], except
    /// [`status::EXIT_PAUSED`] (6) when the run paused before a node.
    pub fn exit_code(&self) -> u8 {
        if self.paused_before.is_some() {
            status::EXIT_PAUSED
        } else {
            self.status.exit_code()
        }
    }

    /// The result as `ragloop run --json` prints it (and `ragloop serve` answers
    /// `POST /runs/wait`): `{"status", "answer", "sources", "path", "iterations",
    /// "steps", "state", "usage", "error"}`, plus `"variant"` when the run used one.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::json!({
            "status": self.status,
            "answer": self.answer,
            "sources": self.sources,
            "path": self.path,
            "iterations": self.iterations,
            "steps": self.steps,
            "state": self.state,
            "usage": self.usage,
            "error": self.error,
        });
        if let (Some(variant), Some(obj)) = (&self.variant, v.as_object_mut()) {
            obj.insert("variant".into(), Value::String(variant.clone()));
        }
        v
    }

    fn fail(&mut self, msg: String) {
        self.status = Status::Failed;
        self.error = Some(msg);
    }
}
