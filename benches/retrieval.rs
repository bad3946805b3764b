// Query latency of the BM25 index over the installed Rust book (`cargo bench --bench
// retrieval`). Skips with a note when the book is not installed.

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use ragloop::retrieval::{resolve_corpus, Index, IndexOptions};

const QUERIES: &[&str] = &[
    "What is ownership?",
    "How do I use a loop label to break out of an outer loop?",
    "difference between String and &str slices",
    "how can I share data between threads safely",
    "a OR (b AND \" foo:bar []",
];

fn book_index() -> Option<Index> {
    let book = match resolve_corpus("rust-docs:book", Path::new(".")) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("note: skipping retrieval bench: {e}");
            return None;
        }
    };
    let out = std::env::temp_dir().join("ragloop-bench-book-index");
    match Index::open_or_build(&book, Some(&out), &IndexOptions::default()) {
        Ok((index, _)) => Some(index),
        Err(e) => {
            eprintln!("note: skipping retrieval bench: {e}");
            None
        }
    }
}

fn bench_search(c: &mut Criterion) {
    let Some(index) = book_index() else { return };
    for (i, q) in QUERIES.iter().enumerate() {
        c.bench_function(&format!("search_top10/q{i}"), |b| {
            b.iter(|| index.search(black_box(q), 10))
        });
    }
    c.bench_function("search_top4/all_queries", |b| {
        b.iter(|| {
            for q in QUERIES {
                let _ = black_box(index.search(q, 4));
            }
        })
    });
}

criterion_group!(benches, bench_search);
criterion_main!(benches);
