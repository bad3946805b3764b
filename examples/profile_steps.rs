//! Runs the ARSC happy path (3 steps) many times with instant scripted nodes, for
//! profiling the interpreter (`perf record` / `valgrind --tool=callgrind`).
//! Usage: `cargo run --release --example profile_steps -- [RUNS]`
use ragloop::compile::load_program;
use ragloop::providers::scripted::ScriptedProvider;
use ragloop::providers::Provider;
use ragloop::retrieval::Document;
use ragloop::runtime::{
    run, NoTrace, ResourceOptions, Resources, Retriever, RunInput, ScriptedRetriever,
};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

fn doc(id: &str, content: &str) -> Document {
    let mut metadata = serde_json::Map::new();
    metadata.insert("source".into(), json!(format!("{id}.html")));
    Document {
        id: id.into(),
        content: content.into(),
        metadata,
    }
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs/arsc.yaml");
    let program = load_program(&path, None, &[]).expect("program");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let input = RunInput {
        question: Some("What does cargo check do?".into()),
        sets: vec![],
    };
    let grade = |id: &str, yes: bool| json!({"document_id": id, "binary_score": if yes {"yes"} else {"no"}, "confidence": 0.9});
    let fixture = json!({
        "grader": (0..runs).flat_map(|_| [grade("d1", true), grade("d2", false)]).collect::<Vec<_>>(),
        "generator": (0..runs).map(|_| "Cargo check checks. [d1.html]").collect::<Vec<_>>(),
    });
    let provider: Arc<dyn Provider> =
        Arc::new(ScriptedProvider::from_json(&fixture).expect("fixture"));
    let docs = vec![
        doc("d1", "Cargo check checks your code."),
        doc("d2", "Ownership rules."),
    ];
    let retriever: Arc<dyn Retriever> = Arc::new(ScriptedRetriever::new(
        (0..runs).map(|_| docs.clone()).collect(),
    ));
    let mut opts = ResourceOptions::default();
    for name in program.spec.retrievers.keys() {
        opts.retrievers.insert(name.clone(), Arc::clone(&retriever));
    }
    for name in program.spec.models.keys() {
        opts.providers.insert(name.clone(), Arc::clone(&provider));
    }
    let res = Resources::prepare(&program, opts).expect("resources");
    let t = std::time::Instant::now();
    for _ in 0..runs {
        let r = rt.block_on(run(&program, &res, &input, &mut NoTrace));
        assert_eq!(r.steps, 3, "{:?}", r.error);
    }
    let per_run = t.elapsed().as_secs_f64() * 1e6 / runs as f64;
    println!(
        "{runs} runs: {per_run:.2} µs per run, {:.2} µs per step",
        per_run / 3.0
    );
}
