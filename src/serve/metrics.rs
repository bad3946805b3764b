//! `GET /metrics`: Prometheus text exposition (format 0.0.4), written by hand.
//!
//! Families (every one always declared with `# HELP` and `# TYPE`):
//! - `ragloop_runs_total{graph,status}` counter: runs ended, by terminal status;
//! - `ragloop_run_duration_seconds{graph}` histogram: wall time of a run;
//! - `ragloop_step_duration_seconds{graph,node}` histogram: wall time of a step;
//! - `ragloop_llm_calls_total{graph,model,llm}`, `ragloop_llm_cached_calls_total`,
//!   `ragloop_llm_tokens_total{graph,model,llm,direction}` (`input`/`output`),
//!   `ragloop_llm_cost_usd_total{graph,model,llm}` counters: `model` is the spec's
//!   model name, `llm` its `provider:model`;
//! - `ragloop_runs_in_flight`, `ragloop_runs_max_in_flight`, `ragloop_runs_queued`
//!   gauges (the server queues nothing: a run beyond the limit is refused, so the
//!   queue depth is always 0), `ragloop_runs_rejected_total` counter (429s);
//! - `ragloop_graphs{state}` gauge (`served`, `invalid`), `ragloop_reloads_total{graph,
//!   result}` counter (`ok`, `failed`).
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Upper bounds of the latency histograms' buckets, in seconds.
pub const BUCKETS: [f64; 15] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

#[derive(Clone, Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += secs;
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Llm {
    calls: u64,
    cached: u64,
    input: u64,
    output: u64,
    cost: f64,
}

/// A counter family over the LLM figures: name, help, value.
type LlmFamily = (&'static str, &'static str, fn(&Llm) -> f64);

#[derive(Debug, Default)]
struct Inner {
    runs: BTreeMap<(String, String), u64>,
    run_latency: BTreeMap<String, Histogram>,
    step_latency: BTreeMap<(String, String), Histogram>,
    llm: BTreeMap<(String, String, String), Llm>,
    reloads: BTreeMap<(String, &'static str), u64>,
}

/// The server's counters, shared by every request.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
    /// Runs refused with 429.
    pub rejected: AtomicU64,
}

/// One LLM usage sample of a step: the model it called and the figures.
#[derive(Clone, Debug)]
pub struct LlmSample<'a> {
    /// The spec's model name.
    pub model: &'a str,
    /// `provider:model`.
    pub llm: &'a str,
    /// Calls, cached calls, input and output tokens, cost in USD.
    pub calls: u64,
    /// Of `calls`, answered from the cache or a cassette.
    pub cached: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// US dollars.
    pub cost_usd: f64,
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A step of `graph` ran node `node` for `secs`, with these LLM figures.
    pub fn step(&self, graph: &str, node: &str, secs: f64, llm: Option<LlmSample<'_>>) {
        let mut m = self.lock();
        m.step_latency
            .entry((graph.to_string(), node.to_string()))
            .or_default()
            .observe(secs);
        if let Some(l) = llm {
            let e = m
                .llm
                .entry((graph.to_string(), l.model.to_string(), l.llm.to_string()))
                .or_default();
            e.calls += l.calls;
            e.cached += l.cached;
            e.input += l.input_tokens;
            e.output += l.output_tokens;
            e.cost += l.cost_usd;
        }
    }

    /// A run of `graph` ended with `status` after `secs`.
    pub fn run(&self, graph: &str, status: &str, secs: f64) {
        let mut m = self.lock();
        *m.runs
            .entry((graph.to_string(), status.to_string()))
            .or_default() += 1;
        m.run_latency
            .entry(graph.to_string())
            .or_default()
            .observe(secs);
    }

    /// A reload of `graph` succeeded (`ok`) or failed (`failed`).
    pub fn reload(&self, graph: &str, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        *self
            .lock()
            .reloads
            .entry((graph.to_string(), result))
            .or_default() += 1;
    }

    /// The exposition text, with the gauges given by the server.
    pub fn render(&self, gauges: &Gauges) -> String {
        let m = self.lock();
        let mut out = String::with_capacity(4096);
        family(
            &mut out,
            "ragloop_runs_total",
            "counter",
            "Runs ended, by graph and terminal status.",
        );
        for ((g, s), n) in &m.runs {
            sample(
                &mut out,
                "ragloop_runs_total",
                &[("graph", g), ("status", s)],
                *n as f64,
            );
        }
        family(
            &mut out,
            "ragloop_run_duration_seconds",
            "histogram",
            "Wall time of a run, in seconds.",
        );
        for (g, h) in &m.run_latency {
            histogram(&mut out, "ragloop_run_duration_seconds", &[("graph", g)], h);
        }
        family(
            &mut out,
            "ragloop_step_duration_seconds",
            "histogram",
            "Wall time of a step (one node execution), in seconds.",
        );
        for ((g, n), h) in &m.step_latency {
            histogram(
                &mut out,
                "ragloop_step_duration_seconds",
                &[("graph", g), ("node", n)],
                h,
            );
        }
        let llm_families: [LlmFamily; 3] = [
            (
                "ragloop_llm_calls_total",
                "LLM calls (repairs included), by graph and model.",
                |l| l.calls as f64,
            ),
            (
                "ragloop_llm_cached_calls_total",
                "Of the LLM calls, those answered from the response cache or a cassette.",
                |l| l.cached as f64,
            ),
            (
                "ragloop_llm_cost_usd_total",
                "Cost of the LLM answers in US dollars (from the models' prices; 0 without).",
                |l| l.cost,
            ),
        ];
        for (name, help, value) in llm_families {
            family(&mut out, name, "counter", help);
            for ((g, model, llm), l) in &m.llm {
                sample(
                    &mut out,
                    name,
                    &[("graph", g), ("model", model), ("llm", llm)],
                    value(l),
                );
            }
        }
        family(
            &mut out,
            "ragloop_llm_tokens_total",
            "counter",
            "LLM tokens, by graph, model and direction (input: prompt, output: completion).",
        );
        for ((g, model, llm), l) in &m.llm {
            for (dir, n) in [("input", l.input), ("output", l.output)] {
                sample(
                    &mut out,
                    "ragloop_llm_tokens_total",
                    &[
                        ("graph", g),
                        ("model", model),
                        ("llm", llm),
                        ("direction", dir),
                    ],
                    n as f64,
                );
            }
        }
        for (name, kind, help, v) in [
            (
                "ragloop_runs_in_flight",
                "gauge",
                "Runs in flight now.",
                gauges.in_flight as f64,
            ),
            (
                "ragloop_runs_max_in_flight",
                "gauge",
                "The most runs in flight at once (--max-runs); beyond it a run is refused with 429.",
                gauges.max_in_flight as f64,
            ),
            (
                "ragloop_runs_queued",
                "gauge",
                "Runs waiting for a slot: always 0, runs beyond the limit are refused, not queued.",
                0.0,
            ),
            (
                "ragloop_runs_rejected_total",
                "counter",
                "Runs refused with 429 because --max-runs were in flight.",
                self.rejected.load(Ordering::Relaxed) as f64,
            ),
        ] {
            family(&mut out, name, kind, help);
            sample(&mut out, name, &[], v);
        }
        family(
            &mut out,
            "ragloop_graphs",
            "gauge",
            "Spec files by state: served (a compiled version is served) or invalid (none is).",
        );
        sample(
            &mut out,
            "ragloop_graphs",
            &[("state", "served")],
            gauges.served as f64,
        );
        sample(
            &mut out,
            "ragloop_graphs",
            &[("state", "invalid")],
            gauges.invalid as f64,
        );
        family(
            &mut out,
            "ragloop_reloads_total",
            "counter",
            "Hot reloads after a spec, prompt or schema file changed, by graph and result.",
        );
        for ((g, r), n) in &m.reloads {
            sample(
                &mut out,
                "ragloop_reloads_total",
                &[("graph", g), ("result", r)],
                *n as f64,
            );
        }
        out
    }
}

/// The point-in-time figures [`Metrics::render`] prints as gauges.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gauges {
    /// Runs in flight.
    pub in_flight: usize,
    /// The limit.
    pub max_in_flight: usize,
    /// Graphs served.
    pub served: usize,
    /// Spec files with no served version.
    pub invalid: usize,
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value escaped as the exposition format says: `\`, `"` and newline.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else if v.is_nan() {
        "NaN".into()
    } else if v > 0.0 {
        "+Inf".into()
    } else {
        "-Inf".into()
    }
}

fn sample(out: &mut String, name: &str, pairs: &[(&str, &str)], v: f64) {
    let _ = writeln!(out, "{name}{} {}", labels(pairs), number(v));
}

fn histogram(out: &mut String, name: &str, pairs: &[(&str, &str)], h: &Histogram) {
    for (i, b) in BUCKETS.iter().enumerate() {
        let le = number(*b);
        let mut p = pairs.to_vec();
        p.push(("le", &le));
        sample(out, &format!("{name}_bucket"), &p, h.counts[i] as f64);
    }
    let mut p = pairs.to_vec();
    p.push(("le", "+Inf"));
    sample(out, &format!("{name}_bucket"), &p, h.count as f64);
    sample(out, &format!("{name}_sum"), pairs, h.sum);
    sample(out, &format!("{name}_count"), pairs, h.count as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn buckets_are_cumulative_and_end_with_the_count() {
        let m = Metrics::default();
        m.run("g", "generated", 0.003);
        m.run("g", "generated", 2.0);
        let text = m.render(&Gauges::default());
        assert!(text.contains("ragloop_run_duration_seconds_bucket{graph=\"g\",le=\"0.001\"} 0"));
        assert!(text.contains("ragloop_run_duration_seconds_bucket{graph=\"g\",le=\"0.005\"} 1"));
        assert!(text.contains("ragloop_run_duration_seconds_bucket{graph=\"g\",le=\"2.5\"} 2"));
        assert!(text.contains("ragloop_run_duration_seconds_bucket{graph=\"g\",le=\"+Inf\"} 2"));
        assert!(text.contains("ragloop_run_duration_seconds_count{graph=\"g\"} 2"));
        assert!(text.contains("ragloop_runs_total{graph=\"g\",status=\"generated\"} 2"));
    }
}
