//! Validating a spec in-process: the whole static pipeline on graphs/crag.yaml (load
//! with spans, typing, references, schemas, templates, predicates, graph checks, and
//! both variants' merged specs). Target: under 2 ms.
use criterion::{criterion_group, criterion_main, Criterion};
use ragloop::spec::source::Sources;
use ragloop::validate::{validate_file, validate_str, Options};
use std::path::Path;

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crag = root.join("graphs/crag.yaml");
    let text = std::fs::read_to_string(&crag).unwrap();
    let opts = Options::default();
    c.bench_function("validate graphs/crag.yaml (file)", |b| {
        b.iter(|| {
            let mut sources = Sources::new();
            let out = validate_file(&crag, &mut sources, &opts);
            assert!(out.is_valid());
        })
    });
    c.bench_function("validate graphs/crag.yaml (text in memory)", |b| {
        b.iter(|| {
            let mut sources = Sources::new();
            let out = validate_str(&crag, &text, &mut sources, &opts);
            assert!(out.is_valid());
        })
    });
    c.bench_function("load graphs/crag.yaml (YAML + types only)", |b| {
        b.iter(|| {
            let mut sources = Sources::new();
            ragloop::spec::load_spec_str(&crag, &text, &mut sources).unwrap();
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
