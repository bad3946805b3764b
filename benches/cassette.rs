//! Replay, cache and key costs, on real requests of graphs/crag.yaml (offline provider,
//! the installed Rust book) over the 40 questions of
//! ../shared/datasets/rust-book-qa.jsonl (`RAGLOOP_BENCH_DATASET` overrides).
//!
//! - `replay/crag_40_questions`: the 40 questions answered from a cassette recorded
//!   once at setup (retrieval still runs: BM25 over the book); questions/second =
//!   40 / time. Bound (issue 6): at least 500 questions/second.
//! - `replay/load_cassette`: reading that cassette (one line per LLM call).
//! - `cache/hit`, `cache/put`: one response-cache entry read / written (atomic
//!   rename) in a temp directory.
//! - `key/<task>`: the request key of one recorded request.
//! - `offline/<task>`: the offline provider answering the same request, to compare
//!   with `cache/hit` (why offline answers are not cached).
//!
//! Run: `cargo bench --bench cassette`, or bench/replay.sh for the figures and bounds.
use criterion::{criterion_group, criterion_main, Criterion};
use ragloop::compile::load_program;
use ragloop::providers::cache::{KeyConfig, KeyMaker, ResponseCache};
use ragloop::providers::cassette::{Cassette, CassetteWriter};
use ragloop::providers::{LlmRequest, LlmResponse};
use ragloop::runtime::{run, NoTrace, ResourceOptions, Resources, RunInput};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn questions() -> Vec<String> {
    let path = std::env::var_os("RAGLOOP_BENCH_DATASET")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets/rust-book-qa.jsonl")
        });
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("dataset {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("dataset line");
            v["question"].as_str().expect("question").to_string()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("tmp");
    std::env::set_var("RAGLOOP_CACHE_DIR", tmp.path().join("cache"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs/crag.yaml");
    let program = load_program(&spec, None, &[]).expect("crag loads");
    let qs = questions();
    let inputs: Vec<RunInput> = qs
        .iter()
        .map(|q| RunInput {
            question: Some(q.clone()),
            sets: vec![],
        })
        .collect();

    // Record once.
    let cas = tmp.path().join("crag.jsonl");
    let writer = Arc::new(CassetteWriter::create(&cas).expect("cassette"));
    let live = Resources::prepare(
        &program,
        ResourceOptions {
            record: Some(Arc::clone(&writer)),
            ..ResourceOptions::default()
        },
    )
    .expect("resources");
    let live_answers: Vec<Option<String>> = inputs
        .iter()
        .map(|i| rt.block_on(run(&program, &live, i, &mut NoTrace)).answer)
        .collect();
    eprintln!(
        "recorded {} questions, {} exchanges, {} bytes",
        inputs.len(),
        writer.written(),
        std::fs::metadata(&cas).map(|m| m.len()).unwrap_or(0)
    );
    drop(live);

    let cassette = Arc::new(Cassette::load(&cas).expect("load"));
    c.bench_function("replay/load_cassette", |b| {
        b.iter(|| Cassette::load(&cas).expect("load"))
    });
    c.bench_function("replay/crag_40_questions", |b| {
        b.iter(|| {
            let res = Resources::prepare(
                &program,
                ResourceOptions {
                    replay: Some(Arc::clone(&cassette)),
                    ..ResourceOptions::default()
                },
            )
            .expect("resources");
            for (i, want) in inputs.iter().zip(&live_answers) {
                let r = rt.block_on(run(&program, &res, i, &mut NoTrace));
                assert_eq!(&r.answer, want, "replay differs: {:?}", r.error);
            }
        })
    });

    // Requests as the runtime made them, one per task.
    let exchanges = Cassette::read_exchanges(&cas).expect("exchanges");
    let offline = Resources::prepare(&program, ResourceOptions::default()).expect("resources");
    let cache = ResponseCache::at(tmp.path().join("responses"));
    let mut seen = std::collections::HashSet::new();
    for x in &exchanges {
        let Some(task) = x.task.clone() else { continue };
        if !seen.insert(task.clone()) {
            continue;
        }
        let model = Arc::new(program.spec.models[&x.model_name].clone());
        let req = LlmRequest {
            node: x.node.clone(),
            item: x.item,
            model_name: x.model_name.clone(),
            model: Arc::clone(&model),
            task: x.task.clone(),
            inputs: x.inputs.clone().unwrap_or_default(),
            messages: x.messages.clone(),
            schema: x.schema.clone().map(Arc::new),
        };
        let keys = KeyMaker::new(KeyConfig::from_model(&model));
        c.bench_function(&format!("key/{task}"), |b| b.iter(|| keys.key(&req)));
        let provider = Arc::clone(&offline.providers[&x.model_name]);
        c.bench_function(&format!("offline/{task}"), |b| {
            b.iter(|| rt.block_on(provider.call(&req)).expect("offline answers"))
        });
        if task == "generate_answer" {
            let key = keys.key(&req);
            let resp = LlmResponse {
                output: x.output.clone().unwrap_or(Value::Null),
                usage: x.usage,
                cached: false,
                usage_estimated: x.usage_estimated,
                ..Default::default()
            };
            cache.put(&key, &resp).expect("put");
            c.bench_function("cache/hit", |b| b.iter(|| cache.get(&key).expect("hit")));
            c.bench_function("cache/put", |b| {
                b.iter(|| cache.put(&key, &resp).expect("put"))
            });
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
