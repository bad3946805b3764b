//! Validating a spec in-process: the whole static pipeline on graphs/crag.yaml (load
//! with spans, typing, references, schemas, templates, predicates, graph checks, and
//! both variants' merged specs). Target: under 2 ms (printed next to each figure).
//!
//! Then the scaling of `validate` in nodes and variants: a chain of `N` update nodes
//! with `V` variants that each change one node's update (generated here, like
//! `bench/hostile.py`), at 300 × 300, 1000 × 1000 and 3000 × 3000, printed next to
//! what a time linear in nodes + variants allows (twice the time of the nodes alone;
//! and the smallest case's time × the growth of N + V) and what a time in N × V would
//! take.
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

/// A chain of `nodes` update nodes with `variants` variants, each setting one node's
/// update to a constant.
fn chain(nodes: usize, variants: usize) -> String {
    let mut s = String::from(
        "version: 1\nname: big\nstate:\n  schema:\n    type: object\n    properties:\n      q: {type: string}\noutput:\n  answer: q\nentry: n0\nnodes:\n",
    );
    for i in 0..nodes {
        s.push_str(&format!(
            "  n{i}:\n    kind: update\n    update:\n      q: \"q\"\n"
        ));
    }
    s.push_str("edges:\n");
    for i in 0..nodes {
        let next = if i + 1 < nodes {
            format!("n{}", i + 1)
        } else {
            "END".into()
        };
        s.push_str(&format!("  n{i}: {next}\n"));
    }
    if variants > 0 {
        s.push_str("variants:\n");
        for i in 0..variants {
            s.push_str(&format!(
                "  v{i}:\n    set:\n      nodes.n{}.update.q: \"'v{i}'\"\n",
                i % nodes
            ));
        }
    }
    s
}

/// Median wall time of validating `text`, in ms.
fn median_ms(path: &Path, text: &str, runs: usize) -> f64 {
    let opts = Options {
        no_environment: true,
    };
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = std::time::Instant::now();
            let mut sources = Sources::new();
            let out = validate_str(path, text, &mut sources, &opts);
            assert!(out.is_valid(), "{:?}", out.diagnostics.first());
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

fn scaling(_: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("big.yaml");
    let mut first: Option<(usize, f64)> = None;
    for (n, runs) in [(300, 5), (1000, 3), (3000, 3)] {
        let alone = median_ms(&path, &chain(n, 0), runs);
        let both = median_ms(&path, &chain(n, n), runs);
        // Linear in nodes + variants: a variant changes one node, so checking it
        // should cost about what checking one node costs (2 x the nodes alone); and
        // the growth from the smallest case is that of N + V, not of N x V.
        let (n0, t0) = *first.get_or_insert((n, both));
        let grown = t0 * (n + n) as f64 / (n0 + n0) as f64;
        let product = t0 * (n * n) as f64 / (n0 * n0) as f64;
        println!(
            "validate {n} nodes x {n} variants: {both:.1} ms   linear bound 2 x {n} nodes alone: {:.1} ms   (from {n0} x {n0}: linear {grown:.1} ms, N x V {product:.0} ms)",
            2.0 * alone
        );
    }
}

fn crag_bound(_: &mut Criterion) {
    let crag = Path::new(env!("CARGO_MANIFEST_DIR")).join("graphs/crag.yaml");
    let opts = Options::default();
    let mut times: Vec<f64> = (0..200)
        .map(|_| {
            let start = std::time::Instant::now();
            let mut sources = Sources::new();
            assert!(validate_file(&crag, &mut sources, &opts).is_valid());
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "validate graphs/crag.yaml (file, median of 200): {:.3} ms   bound < 2 ms",
        times[100]
    );
}

criterion_group!(benches, bench, crag_bound, scaling);
criterion_main!(benches);
