//! Step records and where they go: a JSON-lines trace file, readable console lines,
//! or nowhere.
//!
//! One trace line per executed step:
//! `{"step", "node", "kind", "variant", "start" (unix ms), "duration_us", "delta"
//! (the state fields written, with their values after the reducers), "route": {"to",
//! "arm" (index, "else" or "static"), "predicate"}, "llm": {"calls", "cached",
//! "input_tokens", "output_tokens", "cost_usd", "saved_usd", "latency_ms"}}` (`cached`:
//! calls answered from the response cache or a cassette, see [`LlmStats`]),
//! `"documents": [{"id", "source"}]` on a `retrieve` or `tool` step (what its search
//! returned, in rank order; `source` is `metadata.source`, else the id),
//! `"items": [{"id", "source", "output"}]` on a `map` step whose items are all
//! documents (objects with a string `id`), in item order, each with its item's
//! output (how eval finds a document grader's verdicts), a
//! `"retries"` list when calls of the step were retried (one
//! [`crate::retries::RetryEvent`] each: `{"node", "item", "attempt", "attempts",
//! "after", "delay_ms"}`), and an `"error"` key on the step that failed. A last line `{"final": true, "status", "steps", "path", "error", ...}` ends
//! the run. Each line is flushed when written, so a trace up to a failure is kept.
use super::RunResult;
use crate::providers::Usage;
use crate::retries::RetryEvent;
use serde::Serialize;
use serde_json::{Map, Value};
use std::io::Write;

/// Which arm of an edge was taken.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Arm {
    /// The index of a `when` arm.
    Index(usize),
    /// `"else"` or `"static"`.
    Named(&'static str),
}

/// The route a step took.
#[derive(Clone, Debug, Serialize)]
pub struct Route {
    /// Target node, or `END`.
    pub to: String,
    /// The arm.
    pub arm: Arm,
    /// The predicate that was true (absent for `else` and static edges).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicate: Option<String>,
}

/// LLM usage of one step.
///
/// A call answered from the response cache or a cassette (`cached`) counts in `calls`,
/// its recorded tokens in `input_tokens`/`output_tokens` and its recorded cost in
/// `cost_usd` (the cost of the answers, so a replayed run or eval reports the figures
/// of the recorded one) and also in `saved_usd`: the money this run actually spent is
/// `cost_usd - saved_usd`.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LlmStats {
    /// Calls made (repairs and failed attempts included, cached answers included).
    pub calls: u64,
    /// Of `calls`, the answers served from the response cache or a cassette (a
    /// replayed rejected reply counts too, at its recorded cost; another replayed
    /// failure counts as a call only). Failed replies the server answered count in
    /// the tokens and cost, since they were billed: rejected ones (prose instead of
    /// the tool call, arguments that are not JSON), truncated ones, and unusable ones
    /// that reported usage (see [`crate::providers::ProviderError::billed`]).
    pub cached: u64,
    /// Prompt and completion tokens, and the cost in US dollars of the answers
    /// (cached ones at their recorded cost); JSON: `input_tokens`, `output_tokens`,
    /// `cost_usd` at this level.
    #[serde(flatten)]
    pub tokens: Usage,
    /// Of `cost_usd`, the recorded cost of the cached answers: not spent again.
    pub saved_usd: f64,
    /// Wall time spent waiting for the provider, summed over calls, in ms.
    pub latency_ms: f64,
    /// True when a call's token counts were estimated (the server sent no usage).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub usage_estimated: bool,
    /// Of `latency_ms`, the time calls waited for the model's local limits
    /// (`concurrency`, `requests_per_minute`), in ms; absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub limit_wait_ms: f64,
    /// The retriever calls of a `retrieve` step: query embeddings and HTTP rerank
    /// calls (`crate::retrieval::RetrievalUsage`); absent from JSON when none.
    #[serde(skip_serializing_if = "crate::retrieval::RetrievalUsage::is_empty")]
    pub retrieval: crate::retrieval::RetrievalUsage,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl LlmStats {
    /// The figures of one answered call: its reported usage, whether it came from the
    /// cache or a cassette (its cost is then saved too), whether its token counts are
    /// estimates, and how long it waited for the model's local limits. `calls` and
    /// `latency_ms` stay 0: they count when the call starts and ends.
    pub fn answered(usage: Usage, cached: bool, estimated: bool, limit_wait_ms: f64) -> LlmStats {
        LlmStats {
            cached: u64::from(cached),
            tokens: usage,
            saved_usd: if cached { usage.cost_usd } else { 0.0 },
            usage_estimated: estimated,
            limit_wait_ms,
            ..LlmStats::default()
        }
    }
}

impl std::ops::AddAssign<&LlmStats> for LlmStats {
    /// Adds another step's (or call's) figures; estimated when either is.
    fn add_assign(&mut self, o: &LlmStats) {
        self.calls += o.calls;
        self.cached += o.cached;
        self.tokens += o.tokens;
        self.saved_usd += o.saved_usd;
        self.latency_ms += o.latency_ms;
        self.usage_estimated |= o.usage_estimated;
        self.limit_wait_ms += o.limit_wait_ms;
        self.retrieval += &o.retrieval;
    }
}

impl std::ops::AddAssign for LlmStats {
    fn add_assign(&mut self, o: LlmStats) {
        *self += &o;
    }
}

/// One document a `retrieve` or `tool` step returned (`documents`), or one document
/// a `map` step fanned out over (`items`, with the item's output).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RetrievedDoc {
    /// The document id (a chunk id, or the UUID of a web result).
    pub id: String,
    /// Its source: `metadata.source` when that is a string, else the id.
    pub source: String,
    /// In a `map` step's `items`: the output of the item that was this document (a
    /// grader's verdict, say); absent in `documents`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// One executed step.
#[derive(Clone, Debug, Serialize)]
pub struct StepRecord {
    /// 1 for the first node executed.
    pub step: u32,
    /// Node name.
    pub node: String,
    /// Node kind.
    pub kind: &'static str,
    /// The variant the run uses, if any.
    pub variant: Option<String>,
    /// Start time, unix milliseconds.
    pub start: u64,
    /// Duration of the step, microseconds.
    pub duration_us: u64,
    /// State fields written (values after the reducers).
    pub delta: Map<String, Value>,
    /// The route taken (absent when the step failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<Route>,
    /// LLM usage (absent for nodes without LLM calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmStats>,
    /// The documents a `retrieve` or `tool` step returned, in rank order (absent for
    /// other kinds and for a step that failed before its search returned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents: Option<Vec<RetrievedDoc>>,
    /// On a `map` step whose items were all documents (objects with a string `id`):
    /// those documents in item order, each with its item's `output` (absent
    /// otherwise). How eval finds a document grader's verdicts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<RetrievedDoc>>,
    /// The error that stopped the run at this step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The retries the step's calls made (LLM, embeddings, web search), in the order
    /// they happened; absent when there were none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<RetryEvent>,
}

/// Receives step records as the run goes.
pub trait Observer: Send {
    /// Whether records are wanted at all (when false the runtime skips building
    /// deltas).
    fn enabled(&self) -> bool {
        true
    }
    /// A call of the running step is about to be retried (reported as it happens,
    /// before the step's record). Default: ignored.
    fn retry(&mut self, _event: &RetryEvent) {}
    /// Step `step` (1-based) is about to run node `node` of kind `kind`: the bounds
    /// passed, the node's work starts now (its [`StepRecord`] follows when it ends).
    /// Default: ignored. Called only when [`Observer::enabled`].
    fn node_start(&mut self, _step: u32, _node: &str, _kind: &'static str) {}
    /// Whether text deltas of `llm` nodes are wanted ([`Observer::token`]): only then
    /// do the streaming providers stream (see [`crate::tokens`]). Default: false.
    /// Asked only when [`Observer::enabled`].
    fn wants_tokens(&self) -> bool {
        false
    }
    /// A text delta of the running `llm` node `node`, as it arrived (in order; the
    /// deltas of a step concatenate to the node's text answer). An answer that did
    /// not stream (a cache hit, a cassette replay, a provider that does not stream)
    /// comes whole, as one delta. Called on the runtime's task, only when
    /// [`Observer::wants_tokens`]. Default: ignored.
    fn token(&mut self, _node: &str, _text: &str) {}
    /// A step ended.
    fn step(&mut self, record: &StepRecord);
    /// The run ended.
    fn finish(&mut self, result: &RunResult);
}

/// Discards everything.
#[derive(Debug, Default)]
pub struct NoTrace;

impl Observer for NoTrace {
    fn enabled(&self) -> bool {
        false
    }
    fn step(&mut self, _: &StepRecord) {}
    fn finish(&mut self, _: &RunResult) {}
}

/// Writes JSON lines, flushing each one. Write errors are reported once on stderr
/// and the trace is then dropped (a full disk must not fail the run).
pub struct JsonlTrace<W: Write + Send> {
    out: Option<W>,
}

impl<W: Write + Send> JsonlTrace<W> {
    /// Traces into `out`.
    pub fn new(out: W) -> Self {
        JsonlTrace { out: Some(out) }
    }

    fn line(&mut self, v: &impl Serialize) {
        let Some(out) = self.out.as_mut() else { return };
        let res = serde_json::to_writer(&mut *out, v)
            .map_err(std::io::Error::other)
            .and_then(|_| {
                out.write_all(b"\n")?;
                out.flush()
            });
        if let Err(e) = res {
            crate::errln!("ragloop: trace write failed, trace stopped: {e}");
            self.out = None;
        }
    }
}

impl<W: Write + Send> Observer for JsonlTrace<W> {
    fn step(&mut self, record: &StepRecord) {
        self.line(record);
    }
    fn finish(&mut self, r: &RunResult) {
        self.line(&serde_json::json!({
            "final": true,
            "status": r.status,
            "steps": r.path.len(),
            "path": r.path,
            "iterations": r.iterations,
            "usage": r.usage,
            "error": r.error,
        }));
    }
}

/// Readable lines on stderr.
#[derive(Debug, Default)]
pub struct Verbose;

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 100 {
        let cut: String = s.chars().take(97).collect();
        format!("{cut}...")
    } else {
        s
    }
}

impl Observer for Verbose {
    fn retry(&mut self, e: &RetryEvent) {
        crate::errln!("      {e}, in {:.1} s", e.delay_ms as f64 / 1000.0);
    }
    fn step(&mut self, r: &StepRecord) {
        let mut line = format!(
            "[{:>3}] {} ({}) {:.1} ms",
            r.step,
            r.node,
            r.kind,
            r.duration_us as f64 / 1000.0
        );
        // A retrieve step's stats hold only its retrievers' calls: no LLM part.
        if let Some(u) = r
            .llm
            .as_ref()
            .map(|l| &l.retrieval)
            .filter(|u| !u.is_empty())
        {
            if u.embedding_calls > 0 {
                line.push_str(&format!(
                    ", {} embedding call(s) ({} cached), {} tok",
                    u.embedding_calls, u.embedding_cached, u.embedding_tokens
                ));
            }
            if u.rerank_calls > 0 {
                line.push_str(&format!(
                    ", {} rerank call(s) ({} cached)",
                    u.rerank_calls, u.rerank_cached
                ));
            }
        }
        if let Some(l) = r
            .llm
            .as_ref()
            .filter(|l| l.retrieval.is_empty() || l.calls > 0)
        {
            line.push_str(&format!(
                ", {} call(s), {} tok in, {} tok out{}",
                l.calls,
                l.tokens.input_tokens,
                l.tokens.output_tokens,
                if l.usage_estimated {
                    " (estimated)"
                } else {
                    ""
                }
            ));
            if l.tokens.cost_usd > 0.0 {
                line.push_str(&format!(", ${:.6}", l.tokens.cost_usd));
            }
            if l.calls > 0 {
                line.push_str(&format!(
                    ", {:.1} ms waiting for the model",
                    (l.latency_ms - l.limit_wait_ms).max(0.0)
                ));
                if l.limit_wait_ms >= 0.05 {
                    line.push_str(&format!(
                        " and {:.1} ms for the local concurrency/requests_per_minute limit",
                        l.limit_wait_ms
                    ));
                }
            }
            if l.cached > 0 {
                line.push_str(&format!(", {} cached", l.cached));
            }
        }
        if !r.retries.is_empty() {
            line.push_str(&format!(", {} retry(ies)", r.retries.len()));
        }
        crate::errln!("{line}");
        for (k, v) in &r.delta {
            crate::errln!("      {k} = {}", short(v));
        }
        if let Some(route) = &r.route {
            match &route.predicate {
                Some(p) => crate::errln!("      -> {} (when {p})", route.to),
                None => crate::errln!(
                    "      -> {} ({})",
                    route.to,
                    if route.arm == Arm::Named("else") {
                        "else"
                    } else {
                        "static"
                    }
                ),
            }
        }
        if let Some(e) = &r.error {
            crate::errln!("      error: {e}");
        }
    }
    fn finish(&mut self, r: &RunResult) {
        let cached = if r.usage.cached_calls > 0 {
            format!(
                " ({} of {} LLM call(s) answered from the cache or a cassette)",
                r.usage.cached_calls, r.usage.calls
            )
        } else {
            String::new()
        };
        crate::errln!(
            "status: {} after {} step(s){cached}",
            r.status,
            r.path.len()
        );
        if r.usage.calls > 0 {
            crate::errln!("usage: {}", r.usage.summary());
        }
    }
}

/// Sends records to several observers.
pub struct Tee(pub Vec<Box<dyn Observer>>);

impl Observer for Tee {
    fn enabled(&self) -> bool {
        self.0.iter().any(|o| o.enabled())
    }
    fn retry(&mut self, e: &RetryEvent) {
        for o in &mut self.0 {
            o.retry(e);
        }
    }
    fn node_start(&mut self, step: u32, node: &str, kind: &'static str) {
        for o in &mut self.0 {
            o.node_start(step, node, kind);
        }
    }
    fn wants_tokens(&self) -> bool {
        self.0.iter().any(|o| o.enabled() && o.wants_tokens())
    }
    fn token(&mut self, node: &str, text: &str) {
        for o in &mut self.0 {
            o.token(node, text);
        }
    }
    fn step(&mut self, r: &StepRecord) {
        for o in &mut self.0 {
            o.step(r);
        }
    }
    fn finish(&mut self, r: &RunResult) {
        for o in &mut self.0 {
            o.finish(r);
        }
    }
}

pub use crate::clock::unix_ms;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_stats_keeps_the_estimate_flag() {
        // A map step's total (and the run's) says estimated when any call was.
        let mut total = LlmStats::default();
        total += &LlmStats {
            calls: 1,
            usage_estimated: true,
            ..LlmStats::default()
        };
        total += LlmStats {
            calls: 1,
            ..LlmStats::default()
        };
        assert!(total.usage_estimated);
        assert_eq!(total.calls, 2);
    }

    #[test]
    fn step_usage_json_keeps_its_keys_and_order() {
        // The trace's `llm` object: the flattened token counts sit where they always did.
        let mut s = LlmStats::answered(
            Usage {
                input_tokens: 3,
                output_tokens: 2,
                cost_usd: 0.5,
            },
            true,
            false,
            0.0,
        );
        s.calls = 1;
        s.latency_ms = 1.5;
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"calls":1,"cached":1,"input_tokens":3,"output_tokens":2,"cost_usd":0.5,"saved_usd":0.5,"latency_ms":1.5}"#
        );
    }

    #[test]
    fn run_usage_sums_steps_and_keeps_its_json() {
        let step = LlmStats {
            calls: 2,
            ..LlmStats::answered(
                Usage {
                    input_tokens: 10,
                    output_tokens: 4,
                    cost_usd: 0.25,
                },
                true,
                false,
                0.0,
            )
        };
        let mut run = crate::runtime::RunUsage::default();
        run += &step;
        run += &step;
        assert_eq!(
            serde_json::to_string(&run).unwrap(),
            r#"{"calls":4,"cached_calls":2,"input_tokens":20,"output_tokens":8,"cost_usd":0.5,"saved_usd":0.5}"#
        );
        run += &LlmStats {
            usage_estimated: true,
            ..LlmStats::default()
        };
        assert!(serde_json::to_string(&run)
            .unwrap()
            .ends_with(r#""saved_usd":0.5,"estimated":true}"#));
    }
}
