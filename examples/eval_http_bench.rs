//! `ragloop eval` throughput against a real local HTTP server: graphs/crag.yaml with
//! both models pointed (`--model NAME=openai:mock@URL`) at a local mock server on
//! 127.0.0.1 (`examples/support/mock_openai.rs`, thread per connection) that answers every Chat Completions call after a fixed delay (50 ms by
//! default), 40 questions × 2 variants, `--concurrency 32`.
//!
//! Prints the measured questions/second next to the concurrency bound: every run of
//! CRAG's happy path makes 3 sequential LLM rounds (the fanned-out document grading
//! counts once, then generate, then grade_answer), so P runs at concurrency C take at
//! least ceil(P / C) × 3 × delay; the bound is P divided by that. Target ≥ 85%.
//!
//! ```sh
//! cargo run --release --example eval_http_bench -- [DATASET] [DELAY_MS] [CONCURRENCY]
//! ```
use ragloop::eval::{run_eval, EvalConfig};
use serde_json::Value;
use std::time::Duration;

#[path = "support/mock_openai.rs"]
mod mock_openai;

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut args = std::env::args().skip(1);
    let dataset = args.next().map_or_else(
        || manifest.join("../shared/datasets/rust-book-qa.jsonl"),
        Into::into,
    );
    let delay_ms: u64 = args.next().map_or(Ok(50), |s| s.parse())?;
    let concurrency: usize = args.next().map_or(Ok(32), |s| s.parse())?;
    let url = mock_openai::start(Duration::from_millis(delay_ms));
    let out = tempfile::tempdir()?;
    let cfg = EvalConfig {
        specs: vec![manifest.join("graphs/crag.yaml")],
        dataset,
        variants: Some(vec!["base".into(), "lenient_grader".into()]),
        concurrency,
        out: out.path().to_path_buf(),
        models: vec![
            format!("grader=openai:mock@{url}"),
            format!("generator=openai:mock@{url}"),
        ],
        ..EvalConfig::default()
    };
    let o = run_eval(&cfg).await.map_err(|e| e.to_string())?;
    let rows = std::fs::read_to_string(out.path().join("results.jsonl"))?;
    let mut paths = std::collections::BTreeSet::new();
    let mut lat = Vec::new();
    for l in rows.lines() {
        let v: Value = serde_json::from_str(l)?;
        paths.insert(v["path"].to_string());
        lat.push(v["latency_ms"].as_f64().unwrap_or(f64::NAN));
    }
    println!("paths taken: {paths:?}");
    lat.sort_by(|a, b| a.total_cmp(b));
    println!(
        "per-run latency: min {:.1} ms, p50 {:.1} ms, max {:.1} ms (floor {} ms)",
        lat[0],
        lat[lat.len() / 2],
        lat[lat.len() - 1],
        3 * delay_ms
    );
    if o.failed_runs > 0 {
        return Err(format!("{} run(s) failed", o.failed_runs).into());
    }
    let p = o.new_rows as f64;
    let seq = 3.0;
    let delay = delay_ms as f64 / 1000.0;
    let waves = (o.new_rows as f64 / concurrency as f64).ceil();
    let bound = p / (waves * seq * delay);
    let got = p / o.run_seconds;
    println!(
        "{} runs against a mock OpenAI server on 127.0.0.1 ({delay_ms} ms per call, {seq} sequential calls per run, --concurrency {concurrency}): \
         {got:.1} q/s in {:.3} s; concurrency bound {bound:.1} q/s ({waves} waves x {seq} x {delay_ms} ms); {:.1}% of the bound (target >= 85%) {}",
        o.new_rows,
        o.run_seconds,
        100.0 * got / bound,
        if got >= 0.85 * bound { "OK" } else { "BELOW" }
    );
    Ok(())
}
