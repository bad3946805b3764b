//! Interpreter overhead per step, with instant scripted nodes (provider and retriever
//! answer immediately), on the shipped ARSC graphs:
//! - happy path: graphs/arsc.yaml, retriever -> grader -> generator (3 steps);
//! - exhausted path: graphs/arsc-canonical.yaml with max_iterations 3 (11 steps).
//!
//! Per-step overhead = reported time / steps. `fanout_4x50ms` is the wall time of a
//! grading fan-out of 4 calls that each sleep 50 ms (concurrency 4): ~50 ms expected.
//!
//! Run: `cargo bench --bench runtime` (or bench/runtime.sh for the LangGraph comparison).
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use ragloop::compile::load_program;
use ragloop::providers::scripted::ScriptedProvider;
use ragloop::providers::Provider;
use ragloop::retrieval::Document;
use ragloop::runtime::{
    run, NoTrace, Program, ResourceOptions, Resources, Retriever, RunInput, ScriptedRetriever,
};
use serde_json::{json, Value};
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

fn grade(id: &str, yes: bool) -> Value {
    json!({"document_id": id, "binary_score": if yes { "yes" } else { "no" }, "confidence": 0.9})
}

fn resources(program: &Program, fixture: &Value, retrieval: Vec<Vec<Document>>) -> Resources {
    let provider: Arc<dyn Provider> =
        Arc::new(ScriptedProvider::from_json(fixture).expect("fixture"));
    let retriever: Arc<dyn Retriever> = Arc::new(ScriptedRetriever::new(retrieval));
    let mut opts = ResourceOptions::default();
    for name in program.spec.retrievers.keys() {
        opts.retrievers.insert(name.clone(), Arc::clone(&retriever));
    }
    for name in program.spec.models.keys() {
        opts.providers.insert(name.clone(), Arc::clone(&provider));
    }
    Resources::prepare(program, opts).expect("resources")
}

fn load(rel: &str) -> Program {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    load_program(&path, None, &[]).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn bench_paths(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let docs = || {
        vec![
            doc("d1", "Cargo check checks your code."),
            doc("d2", "Ownership rules."),
        ]
    };

    let happy = load("graphs/arsc.yaml");
    let happy_fixture = json!({"grader": [grade("d1", true), grade("d2", false)], "generator": ["Cargo check checks. [d1.html]"]});
    let input = RunInput {
        question: Some("What does cargo check do?".into()),
        sets: vec![],
    };
    c.bench_function("arsc_happy_path_3_steps", |b| {
        b.iter_batched(
            || resources(&happy, &happy_fixture, vec![docs()]),
            |res| {
                let r = rt.block_on(run(&happy, &res, &input, &mut NoTrace));
                assert_eq!(r.steps, 3);
                r
            },
            BatchSize::SmallInput,
        )
    });

    let canonical = load("graphs/arsc-canonical.yaml");
    let grades: Vec<Value> = (0..4)
        .flat_map(|_| [grade("d1", false), grade("d2", false)])
        .collect();
    let ex_fixture = json!({"grader": grades, "rewriter": ["q2", "q3", "q4"]});
    let ex_input = RunInput {
        question: Some("q1".into()),
        sets: vec![("max_iterations".into(), json!(3))],
    };
    c.bench_function("arsc_canonical_exhausted_11_steps", |b| {
        b.iter_batched(
            || resources(&canonical, &ex_fixture, (0..4).map(|_| docs()).collect()),
            |res| {
                let r = rt.block_on(run(&canonical, &res, &ex_input, &mut NoTrace));
                assert_eq!(r.steps, 11);
                r
            },
            BatchSize::SmallInput,
        )
    });
}

/// A loop of `update` nodes only (a literal added to a counter, one predicate per step):
/// the interpreter's own cost per step, without prompts, providers or retrieval.
const LOOP: &str = r#"version: 1
name: loop
state:
  schema:
    type: object
    properties:
      question: {type: string}
      n: {type: integer, minimum: 0}
    required: [question]
  initial: {n: 0}
entry: tick
limits: {max_steps: 1000}
nodes:
  tick:
    kind: update
    max_visits: 100
    update:
      n: 1
edges:
  tick:
    - when: n >= 100
      to: END
    - else: tick
"#;

fn bench_update_loop(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("loop.yaml");
    std::fs::write(&path, LOOP).expect("write spec");
    let program = load_program(&path, None, &[]).unwrap_or_else(|e| panic!("loop spec: {e}"));
    let res = Resources::prepare(&program, ResourceOptions::default()).expect("resources");
    let input = RunInput {
        question: Some("q".into()),
        sets: vec![],
    };
    c.bench_function("update_loop_100_steps", |b| {
        b.iter(|| {
            let r = rt.block_on(run(&program, &res, &input, &mut NoTrace));
            assert_eq!(r.steps, 100);
            r
        })
    });
}

fn bench_fanout(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let happy = load("graphs/arsc.yaml");
    let grades: Vec<Value> = (1..=4)
        .map(|i| json!({"delay_ms": 50, "output": grade(&format!("d{i}"), true)}))
        .collect();
    let fixture = json!({"grader": grades, "generator": ["ans"]});
    let docs: Vec<Document> = (1..=4).map(|i| doc(&format!("d{i}"), "x")).collect();
    let input = RunInput {
        question: Some("q".into()),
        sets: vec![],
    };
    let mut g = c.benchmark_group("fanout");
    g.sample_size(10);
    g.bench_function("fanout_4x50ms", |b| {
        b.iter_batched(
            || resources(&happy, &fixture, vec![docs.clone()]),
            |res| rt.block_on(run(&happy, &res, &input, &mut NoTrace)),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench_paths, bench_update_loop, bench_fanout);
criterion_main!(benches);
