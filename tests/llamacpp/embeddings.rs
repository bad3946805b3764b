//! Dense retrieval against llama-server's `/v1/embeddings` (the prose model started
//! with `--embeddings --pooling mean -np 1` by `.ci/llamacpp.sh`): vector size,
//! determinism, and the stored vectors' round trip. The vectors are a random model's:
//! nothing is asserted about ranking quality.
use super::{env, lock, model_spec};
use crate::providers_support::rt;
use ragloop::retrieval::{DenseIndex, DenseRetriever, Embedder, Fusion, Index, IndexOptions};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;

fn write_corpus(dir: &Path) {
    let pages = [
        ("ownership.md", "# Ownership\n\nEach value in Rust has an owner. There can only be one owner at a time.\n\n## Moves\n\nAssigning a String to another variable moves it; the first one can no longer be used.\n"),
        ("borrowing.md", "# References and Borrowing\n\nA reference lets you use a value without taking ownership of it.\n\n## Mutable references\n\nYou can have one mutable reference or any number of immutable ones.\n"),
        ("cargo.md", "# Cargo\n\nCargo is Rust's build system and package manager.\n\n## cargo check\n\ncargo check type-checks a project without producing a binary, which is faster than cargo build.\n"),
        ("threads.md", "# Threads\n\nUse std::thread::spawn to run code on a new thread.\n\n## Sharing data\n\nArc<Mutex<T>> shares data between threads safely.\n"),
        ("errors.md", "# Error Handling\n\nRecoverable errors use Result<T, E>; unrecoverable ones panic!.\n\n## The ? operator\n\nThe ? operator returns the error early from a function returning Result.\n"),
    ];
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in pages {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

fn ids(docs: &[ragloop::retrieval::Document]) -> Vec<(String, String)> {
    docs.iter()
        .map(|d| (d.id.clone(), d.metadata["score"].to_string()))
        .collect()
}

#[test]
fn dense_retrieval_against_the_embeddings_server() {
    let Some(url) = env("RAGLOOP_LLAMACPP_EMBED_URL") else {
        return;
    };
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    write_corpus(&corpus);
    let out = dir.path().join("index");
    let (index, built) =
        Index::open_or_build(&corpus, Some(&out), &IndexOptions::default()).unwrap();
    assert!(built.chunks >= 5, "{built:?}");
    let index = Arc::new(index);
    let spec = model_spec(&url, json!({}));
    let embedder = Embedder::from_model("emb", &spec, None, Some(3)).expect("embedder");
    rt().block_on(async {
        // The model's embedding size, as the server reports it.
        let models = reqwest::get(format!("{url}/models"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let models: Value = serde_json::from_str(&models).expect("JSON");
        let n_embd = models["data"][0]["meta"]["n_embd"]
            .as_u64()
            .expect("n_embd") as usize;
        assert_eq!(n_embd, 64, "the recipe's tiny model");
        let (dense, report) = DenseIndex::open_or_build(&index, &embedder, |_, _| {})
            .await
            .expect("dense index");
        assert_eq!(report.dim, n_embd, "{report:?}");
        assert_eq!(dense.dim(), n_embd);
        assert_eq!(
            (report.chunks, report.embedded),
            (built.chunks, built.chunks)
        );
        assert_eq!(report.requests, built.chunks.div_ceil(3), "batches of 3");
        // Deterministic: the same text twice gives the same vector.
        let texts = vec!["ownership and borrowing".to_string(); 2];
        let v = embedder.embed(&texts).await.unwrap();
        assert_eq!(v[0].len(), n_embd);
        assert_eq!(v[0], v[1]);
        assert_eq!(v[0], embedder.embed(&texts[..1]).await.unwrap()[0]);
        // Every stored vector is its chunk's: a chunk's own text finds it first.
        // (Exact only with one server slot: llama-server 0c1e570 batches a request's
        // inputs across slots, and a decoder model's vector of a longer text then
        // depends on its neighbours; .ci/llamacpp.sh starts it with -np 1.)
        for i in 0..dense.len() {
            let d = dense.doc(i).unwrap();
            let q = embedder
                .embed(std::slice::from_ref(&d.content))
                .await
                .unwrap()
                .remove(0);
            let top = dense.nearest(&q, 1).unwrap();
            assert_eq!(top[0].0, i, "chunk {}", d.id);
            assert!(top[0].1 > 0.999, "cosine {}", top[0].1);
        }
        let dense = Arc::new(dense);
        let retriever = |dense: Arc<DenseIndex>, fusion| DenseRetriever {
            index: Arc::clone(&index),
            dense,
            embedder: embedder.clone(),
            fusion,
        };
        let mut first = Vec::new();
        for fusion in [Fusion::Dense, Fusion::Hybrid { k: 60 }] {
            let r = retriever(Arc::clone(&dense), fusion);
            let a = r
                .search("How do I share data between threads?", 3)
                .await
                .unwrap();
            let b = r
                .search("How do I share data between threads?", 3)
                .await
                .unwrap();
            assert_eq!(a.len(), 3, "{fusion:?}");
            assert_eq!(ids(&a), ids(&b), "{fusion:?}: same query, same ranking");
            first.push(ids(&a));
        }
        // The stored vectors round-trip: reopened with no request, same results.
        let (again, report) = DenseIndex::open_or_build(&index, &embedder, |_, _| {})
            .await
            .expect("reopened");
        assert_eq!((report.embedded, report.requests), (0, 0), "{report:?}");
        let again = Arc::new(again);
        for (fusion, want) in [Fusion::Dense, Fusion::Hybrid { k: 60 }]
            .into_iter()
            .zip(&first)
        {
            let r = retriever(Arc::clone(&again), fusion);
            let got = r
                .search("How do I share data between threads?", 3)
                .await
                .unwrap();
            assert_eq!(&ids(&got), want, "{fusion:?} after reopening");
        }
    });
}
