//! Runs: their event logs (what `POST /runs/stream` sends and a reconnecting client
//! resumes), the observer that writes them, and how long finished ones are kept.
//!
//! Every run (waited for or streamed) gets a log of events, numbered from 0:
//! `metadata` (`{run_id, graph, variant, generation}`), then per step `node_start`
//! (`{step, node, kind}`) and `node_end` (the step's trace record: `step`, `node`,
//! `kind`, `duration_us`, `delta` — the state fields written —, `route` — `to`,
//! `arm`, `predicate` —, `llm` usage, `documents`, `error`...), then `error`
//! (`{message, status}`, when the run ended with an error) and `end` (the result as
//! `ragloop run --json` gives it). A finished run's log is kept until
//! [`Retention::keep_runs`] newer runs finished or [`Retention::keep_for`] passed,
//! whichever comes first; a run in flight is never dropped.
use super::metrics::{LlmSample, Metrics};
use crate::runtime::trace::{Observer, StepRecord};
use crate::runtime::{Program, RunResult};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One event of a run's stream.
#[derive(Clone, Debug)]
pub struct Event {
    /// Its id: the position in the run's log, from 0.
    pub id: u64,
    /// `metadata`, `node_start`, `node_end`, `error` or `end`.
    pub name: &'static str,
    /// The JSON payload.
    pub data: Arc<str>,
}

/// The events of one run, as they come.
pub struct RunLog {
    /// The run id.
    pub id: String,
    /// The graph it runs.
    pub graph: String,
    events: Mutex<Vec<Event>>,
    /// (events written, finished).
    tx: watch::Sender<(usize, bool)>,
    result: Mutex<Option<Value>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RunLog {
    /// A log with no event yet.
    pub fn new(id: String, graph: String) -> RunLog {
        RunLog {
            id,
            graph,
            events: Mutex::new(Vec::new()),
            tx: watch::channel((0, false)).0,
            result: Mutex::new(None),
        }
    }

    /// Appends an event.
    pub fn push(&self, name: &'static str, data: &Value) {
        let mut ev = lock(&self.events);
        let id = ev.len() as u64;
        ev.push(Event {
            id,
            name,
            data: data.to_string().into(),
        });
        let n = ev.len();
        drop(ev);
        self.tx.send_modify(|s| s.0 = n);
    }

    /// Writes the last events (`error` when the run has one, then `end`) and marks the
    /// log finished.
    pub fn finish(&self, result: &RunResult) {
        self.finish_with(result, result.to_json());
    }

    /// As [`RunLog::finish`] with `json` as the result (a thread run's: with
    /// `thread`, `run`, `paused_before`).
    pub fn finish_with(&self, result: &RunResult, json: Value) {
        if let Some(e) = &result.error {
            self.push("error", &json!({"message": e, "status": result.status}));
        }
        self.push("end", &json);
        *lock(&self.result) = Some(json);
        self.tx.send_modify(|s| s.1 = true);
    }

    /// The event at `index`, if written.
    pub fn get(&self, index: usize) -> Option<Event> {
        lock(&self.events).get(index).cloned()
    }

    /// Follows the log: (events written, finished), changing as it grows.
    pub fn subscribe(&self) -> watch::Receiver<(usize, bool)> {
        self.tx.subscribe()
    }

    /// Whether the run ended.
    pub fn is_finished(&self) -> bool {
        self.tx.borrow().1
    }

    /// The run's result (`run --json`), once finished.
    pub fn result(&self) -> Option<Value> {
        lock(&self.result).clone()
    }

    /// Events written so far.
    pub fn len(&self) -> usize {
        lock(&self.events).len()
    }

    /// Whether no event was written yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How long finished runs' logs stay available for `GET /runs/{run_id}/stream`.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// At most this many finished runs are kept (the oldest dropped first).
    pub keep_runs: usize,
    /// A finished run is dropped this long after it ended.
    pub keep_for: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            keep_runs: 1000,
            keep_for: Duration::from_secs(600),
        }
    }
}

/// Runs by id: in flight, and finished ones within the [`Retention`].
pub struct RunStore {
    retention: Retention,
    inner: Mutex<Store>,
}

#[derive(Default)]
struct Store {
    runs: HashMap<String, Arc<RunLog>>,
    finished: VecDeque<(Instant, String)>,
}

impl RunStore {
    /// An empty store.
    pub fn new(retention: Retention) -> RunStore {
        RunStore {
            retention,
            inner: Mutex::new(Store::default()),
        }
    }

    /// Registers a run in flight.
    pub fn insert(&self, log: Arc<RunLog>) {
        lock(&self.inner).runs.insert(log.id.clone(), log);
    }

    /// The run `id`, if in flight or kept.
    pub fn get(&self, id: &str) -> Option<Arc<RunLog>> {
        let mut s = lock(&self.inner);
        self.prune(&mut s);
        s.runs.get(id).cloned()
    }

    /// Marks `id` finished: it is kept within the retention from now.
    pub fn finished(&self, id: &str) {
        let mut s = lock(&self.inner);
        s.finished.push_back((Instant::now(), id.to_string()));
        self.prune(&mut s);
    }

    fn prune(&self, s: &mut Store) {
        let now = Instant::now();
        while let Some((at, id)) = s.finished.front() {
            let too_many = s.finished.len() > self.retention.keep_runs;
            let too_old = now.duration_since(*at) >= self.retention.keep_for;
            if !(too_many || too_old) {
                break;
            }
            let id = id.clone();
            s.finished.pop_front();
            s.runs.remove(&id);
        }
    }

    /// Runs held (in flight and kept).
    pub fn len(&self) -> usize {
        lock(&self.inner).runs.len()
    }

    /// Whether the store holds no run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The observer of a served run: each step into the log (`node_start`, `token`
/// `{node, text}` for each text delta of an `llm` node, `node_end`) and into the metrics (step latency; LLM calls, tokens and cost by model).
pub struct ServeObserver {
    /// The run's log.
    pub log: Arc<RunLog>,
    /// The server's metrics.
    pub metrics: Arc<Metrics>,
    /// The program (to find a step's model).
    pub program: Arc<Program>,
}

impl Observer for ServeObserver {
    fn node_start(&mut self, step: u32, node: &str, kind: &'static str) {
        self.log.push(
            "node_start",
            &json!({"step": step, "node": node, "kind": kind}),
        );
    }

    fn wants_tokens(&self) -> bool {
        true
    }

    fn token(&mut self, node: &str, text: &str) {
        self.log.push("token", &json!({"node": node, "text": text}));
    }

    fn step(&mut self, r: &StepRecord) {
        let data = serde_json::to_value(r).unwrap_or(Value::Null);
        self.log.push("node_end", &data);
        let spec = &self.program.spec;
        let sample = r.llm.as_ref().and_then(|l| {
            let model = spec.nodes.get(&r.node)?.llm()?.model.as_str();
            let m = spec.models.get(model)?;
            let llm = match &m.model {
                Some(id) => format!("{}:{id}", m.provider.as_str()),
                None => m.provider.as_str().to_string(),
            };
            Some((model, llm, *l))
        });
        let secs = r.duration_us as f64 / 1e6;
        match &sample {
            Some((model, llm, l)) => self.metrics.step(
                &self.log.graph,
                &r.node,
                secs,
                Some(LlmSample {
                    model,
                    llm,
                    calls: l.calls,
                    cached: l.cached,
                    input_tokens: l.tokens.input_tokens,
                    output_tokens: l.tokens.output_tokens,
                    cost_usd: l.tokens.cost_usd,
                }),
            ),
            None => self.metrics.step(&self.log.graph, &r.node, secs, None),
        }
    }

    fn finish(&mut self, _: &RunResult) {}
}
