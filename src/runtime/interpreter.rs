//! The interpreter: runs a [`Program`] from its entry node to END, a limit, or an
//! error.
//!
//! One step: check the bounds, run the node, evaluate every `update` value over the
//! state as it was before the step (plus `output` and the node's `inputs`), merge the
//! values through the reducers, validate the whole state against its schema, then
//! evaluate the outgoing edge (static, or the first arm whose `when` is true, else the
//! `else` arm).
//!
//! Bounds, exactly:
//! - `limits.max_steps = N`: at most N node executions. Before executing a node the
//!   runtime checks `steps_done == N`; if so the run stops with status `limit` and the
//!   node is not run. A run that reaches END after exactly N executions is not limited.
//! - `max_visits: N` on a node: the node runs at most N times. Its (N+1)-th entry stops
//!   the run with status `limit`, naming the node, before running it.
//! - Neither bound counts END.
use super::expr::{to_jinja, Mirror, Scope};
use super::nodes::{exec, name, Meter, UpdateNames};
use super::program::{EdgeProg, NodeProg, Program, Target};
use super::resources::Resources;
use super::snapshot::{resume_at, snapshot, Start, StepHook};
use super::state::{initial_state, reduce};
use super::status::Status;
use super::trace::{unix_ms, Arm, LlmStats, Observer, RetrievedDoc, Route, StepRecord};
use super::{RunInput, RunResult};
use crate::retries::RetryEvent;
use minijinja::value::Value as JValue;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

fn mirror_of(state: &Map<String, Value>) -> Mirror {
    state
        .iter()
        .map(|(k, v)| (k.clone(), to_jinja(v)))
        .collect()
}

/// Runs a program once. Never panics on user input: every failure becomes a
/// [`Status::Failed`] result whose `error` names the node. Never interrupted (see
/// [`run_until`]).
pub async fn run(
    program: &Program,
    res: &Resources,
    input: &RunInput,
    obs: &mut dyn Observer,
) -> RunResult {
    run_until(program, res, input, obs, &CancellationToken::new()).await
}

/// Runs a program once, like [`run`], until it ends or `cancel` is cancelled.
///
/// Cancellation is checked before each step and raced against the step in flight:
/// the step's future is dropped at once (its LLM calls, HTTP requests included, are
/// cancelled; nothing is retried), the usage its finished calls reported is billed,
/// and the run ends with [`Status::Interrupted`], `error` naming the node, and a step
/// record carrying that error. The observer's `finish` is called as for any other
/// end, so a trace gets its final line (`"status": "interrupted"`). A run that
/// reached END before the cancellation keeps its status. Interrupts
/// (`interrupt_before`) are ignored: see [`run_from`].
pub async fn run_until(
    program: &Program,
    res: &Resources,
    input: &RunInput,
    obs: &mut dyn Observer,
    cancel: &CancellationToken,
) -> RunResult {
    let ctl = Control {
        cancel,
        interrupts: false,
        interrupt_before: &[],
        hook: None,
    };
    run_from(program, res, Start::Fresh(input), obs, ctl).await
}

/// What a run does besides running its nodes: stop, pause, report snapshots.
pub struct Control<'a> {
    /// Cancelled: the run ends [`Status::Interrupted`] (see [`run_until`]).
    pub cancel: &'a CancellationToken,
    /// Pause before the nodes the spec marks `interrupt_before: true`.
    pub interrupts: bool,
    /// Pause before these nodes too (names; a name that is not a node never
    /// matches: callers check them, see `checkpoint::check_nodes`).
    pub interrupt_before: &'a [String],
    /// Receives a [`Snapshot`] at step 0 of a fresh run and after every completed
    /// step (see [`StepHook`]).
    pub hook: Option<&'a mut dyn StepHook>,
}

/// Runs a program from `start` (a fresh input, or a [`Snapshot`] to resume from)
/// under `ctl`: like [`run_until`], plus interrupts and the step hook.
///
/// Pausing: before running a node (after the step and visit limits are checked),
/// if the node is marked `interrupt_before` (with `ctl.interrupts`) or named in
/// `ctl.interrupt_before`, the run ends with [`Status::Interrupted`],
/// [`RunResult::paused_before`] naming the node and `error` saying so; the last
/// snapshot the hook received has that node as `next`. A resume with
/// `past_pause: true` runs that node instead of pausing again.
///
/// Resuming: the state, step count, visits, iterations, path, usage and last node
/// come from the snapshot, so bounds count the steps done before, and the result
/// (path, steps, usage) is that of the whole run. A snapshot naming a node the
/// program does not have (a checkpoint of another spec) fails the run.
pub async fn run_from(
    program: &Program,
    res: &Resources,
    start: Start<'_>,
    obs: &mut dyn Observer,
    mut ctl: Control<'_>,
) -> RunResult {
    let cancel = ctl.cancel;
    let mut result = RunResult::new(program.variant());
    let mut visits = vec![0u32; program.nodes.len()];
    let mut steps = 0u32;
    let mut current = Target::Node(program.entry);
    let mut last: Option<usize> = None;
    let mut pass_pause = false;
    let mut state = match start {
        Start::Fresh(input) => {
            let spec = &program.spec;
            let mut state = Value::Object(initial_state(
                &spec.state.initial,
                input.question.as_deref(),
                &input.sets,
            ));
            if let Err(v) = program.state_check.check(&state) {
                result.fail(format!(
                    "initial state does not match the state schema: {v}"
                ));
                return finish(program, result, state, None, obs);
            }
            // `7.0` where the state schema says integer is stored as `7`.
            program.state_check.normalize(&mut state);
            state
        }
        Start::Resume {
            snapshot,
            past_pause,
        } => match resume_at(program, snapshot) {
            Ok(at) => {
                visits = at.visits;
                current = at.next;
                last = at.last;
                steps = snapshot.step;
                result.path = snapshot.path.clone();
                result.iterations = snapshot.iterations;
                result.usage = snapshot.usage;
                pass_pause = past_pause;
                snapshot.state.clone()
            }
            Err(msg) => {
                result.fail(format!("cannot resume: {msg}"));
                return finish(program, result, snapshot.state.clone(), None, obs);
            }
        },
    };
    if let (Start::Fresh(_), Some(hook)) = (start, ctl.hook.as_deref_mut()) {
        let snap = snapshot(program, &state, current, steps, &visits, last, &result);
        if let Err(e) = hook.after_step(&snap) {
            result.fail(format!("checkpoint: {e}"));
            return finish(program, result, state, last, obs);
        }
    }
    let mut mirror = Arc::new(state.as_object().map(mirror_of).unwrap_or_default());
    let tracing = obs.enabled();
    while let Target::Node(at) = current {
        let ix = at.index();
        let node = &program.nodes[ix];
        if cancel.is_cancelled() {
            result.status = Status::Interrupted;
            result.error = Some(format!(
                "interrupted before node `{}` (step {})",
                node.name,
                steps + 1
            ));
            return finish(program, result, state, last, obs);
        }
        if steps >= program.max_steps {
            result.status = Status::Limit;
            result.error = Some(format!(
                "step limit reached: limits.max_steps = {} node executions done, node `{}` would be the next",
                program.max_steps, node.name
            ));
            return finish(program, result, state, last, obs);
        }
        if let Some(mv) = node.max_visits {
            if visits[ix] >= mv {
                result.status = Status::Limit;
                result.error = Some(format!(
                    "node `{}` reached its visit limit (max_visits = {mv}); entry {} refused",
                    node.name,
                    mv + 1
                ));
                return finish(program, result, state, last, obs);
            }
        }
        let pause =
            (ctl.interrupts && node.interrupt_before) || ctl.interrupt_before.contains(&node.name);
        if std::mem::take(&mut pass_pause) {
            // The resume of a pause before this node: run it.
        } else if pause {
            result.status = Status::Interrupted;
            result.paused_before = Some(node.name.clone());
            result.error = Some(format!(
                "paused before node `{}` (step {}): interrupt_before",
                node.name,
                steps + 1
            ));
            return finish(program, result, state, last, obs);
        }
        steps += 1;
        visits[ix] += 1;
        if at == program.entry {
            result.iterations += 1;
        }
        result.path.push(node.name.clone());
        let started = Instant::now();
        let start_ms = if tracing { unix_ms() } else { 0 };
        if tracing {
            obs.node_start(steps, &node.name, node.kind);
        }
        let mut retries = Vec::new();
        let meter = Meter::default();
        let outcome = {
            let step = exec(program, node, res, &mirror, &state, &meter);
            let step = async {
                if tracing {
                    let tokens = obs.wants_tokens();
                    observed(step, &node.name, tokens, |e| match e {
                        Event::Retry(e) => {
                            obs.retry(&e);
                            retries.push(e);
                        }
                        Event::Token(t) => obs.token(&node.name, &t),
                    })
                    .await
                } else {
                    step.await
                }
            };
            tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                r = step => Some(r),
            }
        };
        let mut record = |delta: Map<String, Value>,
                          route: Option<Route>,
                          llm: Option<LlmStats>,
                          documents: Option<Vec<RetrievedDoc>>,
                          error: Option<String>| {
            if tracing {
                // A map step's documents are the items it fanned out over.
                let (documents, items) = if node.kind == "map" {
                    (None, documents)
                } else {
                    (documents, None)
                };
                obs.step(&StepRecord {
                    step: steps,
                    node: node.name.clone(),
                    kind: node.kind,
                    variant: program.variant().map(str::to_string),
                    start: start_ms,
                    duration_us: started.elapsed().as_micros() as u64,
                    delta,
                    route,
                    llm,
                    documents,
                    items,
                    error,
                    retries: std::mem::take(&mut retries),
                });
            }
        };
        let out = match outcome {
            None => {
                let msg = format!("interrupted during node `{}`", node.name);
                let llm = node.body.calls_llm().then(|| meter.get());
                if let Some(l) = &llm {
                    result.usage += l;
                }
                record(Map::new(), None, llm, None, Some(msg.clone()));
                result.status = Status::Interrupted;
                result.error = Some(msg);
                return finish(program, result, state, last, obs);
            }
            Some(Ok(o)) => o,
            Some(Err((e, llm))) => {
                let msg = format!("node `{}`: {e}", node.name);
                if let Some(l) = &llm {
                    result.usage += l;
                }
                record(Map::new(), None, llm, None, Some(msg.clone()));
                result.fail(msg);
                return finish(program, result, state, last, obs);
            }
        };
        if let Some(l) = &out.llm {
            result.usage += l;
        }
        // Every update value sees the state before the step.
        let mut writes = Vec::with_capacity(node.update.len());
        {
            let mut cached: Option<JValue> = None;
            let mut scope = || {
                cached
                    .get_or_insert_with(|| {
                        let mut extra = out.inputs.clone();
                        if let Some(o) = &out.output_jinja {
                            extra.push((name("output"), o.clone()));
                        }
                        Scope::make(&mirror, extra)
                    })
                    .clone()
            };
            let names = UpdateNames {
                out: &out,
                state: &state,
            };
            for (field, reducer, value) in &node.update {
                match value.eval_json(&mut scope, &names) {
                    Ok(v) => writes.push((field, *reducer, v)),
                    Err(e) => {
                        let msg = format!("node `{}`: update of `{field}`: {e}", node.name);
                        record(
                            Map::new(),
                            None,
                            out.llm,
                            out.documents.clone(),
                            Some(msg.clone()),
                        );
                        result.fail(msg);
                        return finish(program, result, state, last, obs);
                    }
                }
            }
        }
        let mut delta = Map::new();
        let fields = Arc::make_mut(&mut mirror);
        if let Value::Object(obj) = &mut state {
            for (field, reducer, v) in writes {
                match reduce(reducer, obj.get(field), v) {
                    Ok(mut new) => {
                        program.state_check.normalize_property(field, &mut new);
                        fields.insert(field.clone(), to_jinja(&new));
                        if tracing {
                            delta.insert(field.clone(), new.clone());
                        }
                        obj.insert(field.clone(), new);
                    }
                    Err(e) => {
                        let msg = format!("node `{}`: update of `{field}`: {e}", node.name);
                        record(
                            delta,
                            None,
                            out.llm,
                            out.documents.clone(),
                            Some(msg.clone()),
                        );
                        result.fail(msg);
                        return finish(program, result, state, last, obs);
                    }
                }
            }
        }
        if let Err(v) = program.state_check.check(&state) {
            let field = v
                .field()
                .map(|f| format!("field `{f}`"))
                .unwrap_or_else(|| "the state".into());
            let msg = format!(
                "node `{}`: the update makes {field} violate the state schema: {v}",
                node.name
            );
            record(
                delta,
                None,
                out.llm,
                out.documents.clone(),
                Some(msg.clone()),
            );
            result.fail(msg);
            return finish(program, result, state, last, obs);
        }
        last = Some(ix);
        let route = match choose(node, &mirror) {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("node `{}`: edge: {e}", node.name);
                record(
                    delta,
                    None,
                    out.llm,
                    out.documents.clone(),
                    Some(msg.clone()),
                );
                result.fail(msg);
                return finish(program, result, state, last, obs);
            }
        };
        current = route.0;
        if tracing {
            let to = program
                .topology
                .name(match route.0 {
                    Target::Node(n) => n,
                    Target::End => program.topology.end,
                })
                .to_string();
            record(
                delta,
                Some(Route {
                    to,
                    arm: route.1,
                    predicate: route.2,
                }),
                out.llm,
                out.documents.clone(),
                None,
            );
        }
        if let Some(hook) = ctl.hook.as_deref_mut() {
            let snap = snapshot(program, &state, current, steps, &visits, last, &result);
            if let Err(e) = hook.after_step(&snap) {
                result.fail(format!("checkpoint after node `{}`: {e}", node.name));
                return finish(program, result, state, last, obs);
            }
        }
    }
    // Reached END.
    result.status = if last.is_some_and(|l| program.nodes[l].fallback) {
        Status::Fallback
    } else if answer_of(program, &state).is_some() {
        Status::Generated
    } else {
        Status::Exhausted
    };
    finish(program, result, state, last, obs)
}

/// What a node's calls report while it runs.
enum Event {
    /// A call is about to be retried.
    Retry(RetryEvent),
    /// A text delta of the node's answer (only when tokens are wanted).
    Token(String),
}

/// Runs a node's future with its retries ([`crate::retries`]) and, when `tokens`,
/// its text deltas ([`crate::tokens`]) handed to `on_event` as they happen, on this
/// task (the observer is not shared with the node's calls), in the order they
/// happened.
async fn observed<F: std::future::Future>(
    fut: F,
    node: &str,
    tokens: bool,
    mut on_event: impl FnMut(Event),
) -> F::Output {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let retry_tx = tx.clone();
    let sink: crate::retries::RetrySink = Arc::new(move |e| {
        let _ = retry_tx.send(Event::Retry(e));
    });
    let fut = crate::retries::in_node(sink, node, fut);
    let token_sink: Option<crate::tokens::TokenSink> = tokens.then(|| {
        Arc::new(move |_node: &str, text: &str| {
            let _ = tx.send(Event::Token(text.to_string()));
        }) as crate::tokens::TokenSink
    });
    let fut = async move {
        match token_sink {
            Some(sink) => crate::tokens::in_node(sink, node, fut).await,
            None => fut.await,
        }
    };
    tokio::pin!(fut);
    let out = loop {
        tokio::select! {
            biased;
            Some(e) = rx.recv() => on_event(e),
            out = &mut fut => break out,
        }
    };
    while let Ok(e) = rx.try_recv() {
        on_event(e);
    }
    out
}

type Choice = (Target, Arm, Option<String>);

fn choose(node: &NodeProg, mirror: &Arc<Mirror>) -> Result<Choice, String> {
    match &node.edge {
        EdgeProg::Static(t) => Ok((*t, Arm::Named("static"), None)),
        EdgeProg::Branch { arms, otherwise } => {
            let scope = Scope::make(mirror, Vec::new());
            for (i, (p, t)) in arms.iter().enumerate() {
                if p.test(&scope)
                    .map_err(|e| format!("predicate `{}` of arm {i}: {e}", p.source))?
                {
                    return Ok((*t, Arm::Index(i), Some(p.source.clone())));
                }
            }
            Ok((*otherwise, Arm::Named("else"), None))
        }
    }
}

fn answer_of<'a>(program: &Program, state: &'a Value) -> Option<&'a str> {
    let field = program.spec.output.answer.as_deref()?;
    state
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

fn finish(
    program: &Program,
    mut result: RunResult,
    state: Value,
    _last: Option<usize>,
    obs: &mut dyn Observer,
) -> RunResult {
    let out = &program.spec.output;
    if matches!(result.status, Status::Generated | Status::Fallback) {
        result.answer = out
            .answer
            .as_deref()
            .and_then(|f| state.get(f))
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    if let Some(docs) = out
        .documents
        .as_deref()
        .and_then(|f| state.get(f))
        .and_then(Value::as_array)
    {
        for d in docs {
            if let Some(s) = crate::retrieval::source_of(d) {
                if !result.sources.contains(&s) {
                    result.sources.push(s);
                }
            }
        }
    }
    result.steps = result.path.len() as u32;
    result.state = state;
    obs.finish(&result);
    result
}
