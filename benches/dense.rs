// Dense retrieval over the installed Rust book against a local mock embeddings server
// (`cargo bench --bench dense`): time to embed and store every chunk, time to load the
// stored vectors, and query latency (exact cosine over all chunks; dense and hybrid,
// with and without the query's embedding round trip). Prints each figure next to its
// bound. Skips with a note when the book is not installed.
//
// The mock answers `/v1/embeddings` with 1536-dimensional bag-of-words vectors (the
// size of text-embedding-3-small), computed per request, so the figures include JSON
// encoding and parsing of real-sized responses but no model time.
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ragloop::http::CallPolicy;
use ragloop::retrieval::dense::DEFAULT_RRF_K;
use ragloop::retrieval::{
    resolve_corpus, DenseIndex, DenseRetriever, Embedder, Fusion, Index, IndexOptions,
};
use serde_json::{json, Value};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const DIM: usize = 1536;
const QUERIES: &[&str] = &[
    "What is ownership?",
    "How do I use a loop label to break out of an outer loop?",
    "difference between String and &str slices",
    "how can I share data between threads safely",
    "What does cargo check do?",
    "How do closures capture values from their environment?",
    "When should I use Box<T>?",
    "What are the rules of references?",
];

struct BagOfWords;

fn bag(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIM];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = blake3::hash(w.to_lowercase().as_bytes());
        let b = u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap_or([0; 8])) as usize % DIM;
        v[b] += 1.0;
    }
    v
}

impl Respond for BagOfWords {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let data: Vec<Value> = body["input"]
            .as_array()
            .map(|a| {
                a.iter()
                    .enumerate()
                    .map(|(i, t)| json!({"index": i, "embedding": bag(t.as_str().unwrap_or(""))}))
                    .collect()
            })
            .unwrap_or_default();
        ResponseTemplate::new(200).set_body_json(json!({"object": "list", "data": data}))
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(name: &str, mut ms: Vec<f64>, bound_ms: f64) {
    ms.sort_by(f64::total_cmp);
    let p50 = pct(&ms, 0.5);
    println!(
        "{name:<40} p50 {p50:>8.3} ms  p95 {:>8.3} ms  (n={}, bound p50 <= {bound_ms} ms: {})",
        pct(&ms, 0.95),
        ms.len(),
        if p50 <= bound_ms { "ok" } else { "EXCEEDED" }
    );
}

fn main() {
    let book = match resolve_corpus("rust-docs:book", Path::new(".")) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("note: skipping dense bench: {e}");
            return;
        }
    };
    let work = std::env::temp_dir().join(format!("ragloop-bench-dense-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let (index, _) =
        match Index::open_or_build(&book, Some(&work.join("ix")), &IndexOptions::default()) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("note: skipping dense bench: {e}");
                return;
            }
        };
    let index = Arc::new(index);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let server = MockServer::start().await;
        Mock::given(wiremock::matchers::method("POST"))
            .respond_with(BagOfWords)
            .mount(&server)
            .await;
        let spec = serde_json::from_value(json!({
            "provider": "openai", "model": "bench-bow-1536",
            "base_url": format!("{}/v1", server.uri())
        }))
        .expect("model spec");
        let embedder = Embedder::from_model("emb", &spec, None, None)
            .expect("embedder")
            .with_policy(CallPolicy {
                timeout: Duration::from_secs(60),
                ..CallPolicy::default()
            });

        let t = Instant::now();
        let (_, built) = DenseIndex::open_or_build(&index, &embedder, |_, _| {})
            .await
            .expect("build");
        let build_s = t.elapsed().as_secs_f64();
        let size = std::fs::metadata(&built.path).map(|m| m.len()).unwrap_or(0);
        println!(
            "embed + store {} chunks ({} requests of <= 64, dim {}): {build_s:.2} s, store {:.1} MB (bound <= 30 s: {})",
            built.chunks,
            built.requests,
            built.dim,
            size as f64 / 1e6,
            if build_s <= 30.0 { "ok" } else { "EXCEEDED" }
        );

        let mut loads = Vec::new();
        let mut dense = None;
        for _ in 0..5 {
            let t = Instant::now();
            let (d, r) = DenseIndex::open_or_build(&index, &embedder, |_, _| {})
                .await
                .expect("load");
            assert_eq!(r.embedded, 0);
            loads.push(t.elapsed().as_secs_f64() * 1000.0);
            dense = Some(d);
        }
        report("load stored vectors (no request)", loads, 150.0);
        let dense = Arc::new(dense.expect("dense index"));

        let qvecs: Vec<Vec<f32>> = QUERIES.iter().map(|q| bag(q)).collect();
        let mut brute = Vec::new();
        for _ in 0..25 {
            for v in &qvecs {
                let t = Instant::now();
                let hits = dense.nearest(v, 10).expect("nearest");
                brute.push(t.elapsed().as_secs_f64() * 1000.0);
                assert_eq!(hits.len(), 10);
            }
        }
        report("cosine top10 over all chunks", brute, 5.0);

        for (label, fusion) in [
            ("dense search incl. query embedding", Fusion::Dense),
            ("hybrid search incl. query embedding", Fusion::Hybrid { k: DEFAULT_RRF_K }),
        ] {
            let r = DenseRetriever {
                index: Arc::clone(&index),
                dense: Arc::clone(&dense),
                embedder: embedder.clone(),
                fusion,
            };
            let mut ms = Vec::new();
            for _ in 0..10 {
                for q in QUERIES {
                    let t = Instant::now();
                    let docs = r.search(q, 10).await.expect("search");
                    ms.push(t.elapsed().as_secs_f64() * 1000.0);
                    assert_eq!(docs.len(), 10);
                }
            }
            report(label, ms, 15.0);
        }
    });
    let _ = std::fs::remove_dir_all(&work);
}
