//! Where a run is between two steps, and resuming from there.
//!
//! The interpreter hands a [`Snapshot`] to a [`StepHook`] before the first step
//! (step 0: the initial state) and after every completed step (its updates merged,
//! the state checked against the schema, the outgoing edge chosen). A snapshot holds
//! everything the run needs to continue: [`crate::runtime::run_from`] with
//! [`Start::Resume`] runs the remaining steps exactly as the interrupted run would
//! have, without running a completed step (or its LLM calls) again. The hook is how
//! `crate::checkpoint` persists threads; the runtime itself stores nothing.
use super::program::{Program, Target};
use super::RunInput;
use super::{RunResult, RunUsage};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A run between two steps. JSON (as checkpoints store it): `state`, `next`,
/// `step`, `visits`, `iterations`, `path`, `usage`, `last`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The whole state after the step (an object).
    pub state: Value,
    /// The node to run next, `None` when the run reached END.
    pub next: Option<String>,
    /// Node executions done (0 before the first).
    pub step: u32,
    /// Per node name, how many times it ran (nodes that never ran are absent).
    #[serde(default)]
    pub visits: IndexMap<String, u32>,
    /// Passes through the entry node so far.
    #[serde(default)]
    pub iterations: u32,
    /// Nodes executed so far, in order.
    #[serde(default)]
    pub path: Vec<String>,
    /// The usage of the completed steps.
    #[serde(default)]
    pub usage: RunUsage,
    /// The last node that completed (decides `fallback` at END), if any.
    #[serde(default)]
    pub last: Option<String>,
}

/// How a run starts.
#[derive(Clone, Copy, Debug)]
pub enum Start<'a> {
    /// A new run: the initial state from the spec, the question and `--set`s.
    Fresh(&'a RunInput),
    /// Continue from a snapshot (a checkpoint). `past_pause`: the run paused before
    /// `snapshot.next` (an interrupt) and this resume is the go-ahead, so that node
    /// runs instead of pausing again.
    Resume {
        /// Where to continue.
        snapshot: &'a Snapshot,
        /// The run paused before `snapshot.next`: do not pause there again.
        past_pause: bool,
    },
}

/// Called by the interpreter with every [`Snapshot`] (see the module docs): step 0
/// of a fresh run, then after each completed step. A resumed run does not report
/// the snapshot it resumed from.
pub trait StepHook: Send {
    /// Persist `snapshot`. An error fails the run (status `failed`, the message
    /// prefixed with `checkpoint:`) before the next step starts: a run that cannot
    /// be resumed does not go on spending.
    fn after_step(&mut self, snapshot: &Snapshot) -> Result<(), String>;
}

/// A state patch (`--set FIELD=VALUE` on resume, or a server's patch body) that
/// [`Snapshot::patch`] refuses. Nothing is applied when it fails.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// The state schema has no such property; `fields` are the ones it has.
    #[error("the state has no field `{field}` (fields: {})", .fields.join(", "))]
    UnknownField {
        /// The field as given.
        field: String,
        /// The state schema's properties.
        fields: Vec<String>,
    },
    /// The patched state violates the state schema.
    #[error("`{field}` = {value}: the patched state violates the state schema: {violation}")]
    Violation {
        /// The field at fault (the first patched field the violation names, else
        /// the first patched field).
        field: String,
        /// Its value as given.
        value: Value,
        /// The schema violation.
        violation: String,
    },
    /// The snapshot's state is not an object (a corrupt checkpoint).
    #[error("the checkpoint's state is not an object")]
    NotAnObject,
    /// `question` patched to an empty or blank string (refused as `run -q ""` is).
    #[error("`question`: the question is empty")]
    EmptyQuestion,
}

impl Snapshot {
    /// Writes `patch` (field, value; later entries win) into the state, then checks
    /// the whole state against the program's state schema (integer-valued floats
    /// stored as integers where the schema says `integer`).
    ///
    /// # Errors
    /// [`PatchError::UnknownField`] for a field the state schema does not declare,
    /// [`PatchError::Violation`] when the patched state does not match the schema,
    /// [`PatchError::EmptyQuestion`] for a blank `question`; the snapshot is then
    /// unchanged.
    pub fn patch(
        &mut self,
        program: &Program,
        patch: &[(String, Value)],
    ) -> Result<(), PatchError> {
        for (field, value) in patch {
            if field == "question" && value.as_str().is_some_and(|q| q.trim().is_empty()) {
                return Err(PatchError::EmptyQuestion);
            }
            if !program.state_fields.iter().any(|f| f == field) {
                return Err(PatchError::UnknownField {
                    field: field.clone(),
                    fields: program.state_fields.clone(),
                });
            }
        }
        let Value::Object(obj) = &self.state else {
            return Err(PatchError::NotAnObject);
        };
        let mut obj = obj.clone();
        for (field, value) in patch {
            obj.insert(field.clone(), value.clone());
        }
        let mut state = Value::Object(obj);
        program.state_check.normalize(&mut state);
        let violations = program.state_check.violations(&state);
        if let Some(first) = violations.first() {
            let (field, value) = patch
                .iter()
                .rev()
                .find(|(f, _)| violations.iter().any(|v| v.field() == Some(f.as_str())))
                .or(patch.first())
                .cloned()
                .unwrap_or_default();
            let violation = violations
                .iter()
                .find(|v| v.field() == Some(field.as_str()))
                .unwrap_or(first)
                .to_string();
            return Err(PatchError::Violation {
                field,
                value,
                violation,
            });
        }
        self.state = state;
        Ok(())
    }
}

/// A snapshot of the loop's variables (see [`Snapshot`]).
pub(super) fn snapshot(
    program: &Program,
    state: &Value,
    next: Target,
    steps: u32,
    visits: &[u32],
    last: Option<usize>,
    result: &RunResult,
) -> Snapshot {
    Snapshot {
        state: state.clone(),
        next: match next {
            Target::Node(n) => Some(program.nodes[n.index()].name.clone()),
            Target::End => None,
        },
        step: steps,
        visits: program
            .nodes
            .iter()
            .zip(visits)
            .filter(|(_, v)| **v > 0)
            .map(|(n, v)| (n.name.clone(), *v))
            .collect(),
        iterations: result.iterations,
        path: result.path.clone(),
        usage: result.usage,
        last: last.map(|l| program.nodes[l].name.clone()),
    }
}

/// The loop's variables a snapshot gives back.
pub(super) struct ResumeAt {
    pub(super) visits: Vec<u32>,
    pub(super) next: Target,
    pub(super) last: Option<usize>,
}

pub(super) fn resume_at(program: &Program, snap: &Snapshot) -> Result<ResumeAt, String> {
    let node = |name: &str| {
        program
            .nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| {
                format!("the checkpoint names node `{name}`, which the spec does not have")
            })
    };
    if !snap.state.is_object() {
        return Err("the checkpoint's state is not an object".into());
    }
    let mut visits = vec![0u32; program.nodes.len()];
    for (name, n) in &snap.visits {
        visits[node(name)?] = *n;
    }
    let next = match &snap.next {
        None => Target::End,
        Some(name) => Target::Node(petgraph::graph::NodeIndex::new(node(name)?)),
    };
    let last = snap.last.as_deref().map(node).transpose()?;
    Ok(ResumeAt { visits, next, last })
}
