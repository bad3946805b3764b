//! Embeddings, dense and hybrid retrieval against a mock `/v1/embeddings` server on
//! 127.0.0.1 that returns bag-of-words vectors (each word hashed into a bucket), so
//! that cosine similarity measures word overlap and dense results are meaningful.
use ragloop::http::CallPolicy;
use ragloop::retrieval::dense::{DenseReport, DEFAULT_RRF_K};
use ragloop::retrieval::{DenseIndex, DenseRetriever, Embedder, Fusion, Index, IndexOptions};
use ragloop::spec::types::ModelSpec;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Bag-of-words embeddings: `dim` buckets (the request's `dimensions`, else the
/// `native` size), one count per word.
struct BagOfWords {
    native: Arc<AtomicUsize>,
    inputs: Arc<AtomicUsize>,
}

fn bag(text: &str, dim: usize) -> Vec<f32> {
    let mut v = vec![0f32; dim];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = blake3::hash(w.to_lowercase().as_bytes());
        let b = u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap()) as usize % dim;
        v[b] += 1.0;
    }
    v
}

impl Respond for BagOfWords {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let dim = body["dimensions"]
            .as_u64()
            .map_or_else(|| self.native.load(Ordering::SeqCst), |d| d as usize);
        let inputs = body["input"].as_array().unwrap();
        self.inputs.fetch_add(inputs.len(), Ordering::SeqCst);
        // Answer in reverse order: clients must sort by `index`.
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .rev()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": bag(t.as_str().unwrap(), dim)}))
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "data": data, "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1}
        }))
    }
}

pub(crate) struct Mocked {
    pub(crate) server: MockServer,
    native: Arc<AtomicUsize>,
    inputs: Arc<AtomicUsize>,
}

pub(crate) async fn mock_embeddings() -> Mocked {
    let server = MockServer::start().await;
    let native = Arc::new(AtomicUsize::new(64));
    let inputs = Arc::new(AtomicUsize::new(0));
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(BagOfWords {
            native: Arc::clone(&native),
            inputs: Arc::clone(&inputs),
        })
        .mount(&server)
        .await;
    Mocked {
        server,
        native,
        inputs,
    }
}

fn model(base_url: &str, name: &str, extra: Value) -> ModelSpec {
    let mut v = json!({"provider": "openai", "model": name, "base_url": base_url});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    serde_json::from_value(v).unwrap()
}

fn fast() -> CallPolicy {
    CallPolicy {
        retries: 2,
        timeout: Duration::from_secs(5),
        min_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        ..CallPolicy::default()
    }
}

fn embedder(m: &Mocked, name: &str, dims: Option<u32>, batch: Option<u32>) -> Embedder {
    Embedder::from_model(
        "emb",
        &model(&format!("{}/v1", m.server.uri()), name, json!({})),
        dims,
        batch,
    )
    .unwrap()
    .with_policy(fast())
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Small pages, one chunk each; `twin-a` and `twin-b` have the same text.
pub(crate) fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "ownership.md", "# Ownership\n\nEach value has an owner; when the owner goes out of scope the value is dropped.\n");
    write(
        r,
        "borrowing.md",
        "# Borrowing\n\nA reference borrows a value without taking ownership of it.\n",
    );
    write(
        r,
        "cargo.md",
        "# Cargo\n\nCargo builds your package, downloads dependencies and runs tests.\n",
    );
    write(
        r,
        "closures.md",
        "# Closures\n\nClosures are anonymous functions that capture their environment.\n",
    );
    write(r, "twin-a.md", "# Zebra\n\nquagga okapi\n");
    write(r, "twin-b.md", "# Zebra\n\nquagga okapi\n");
    dir
}

fn index(corpus: &Path, out: &Path) -> Index {
    Index::open_or_build(corpus, Some(out), &IndexOptions::default())
        .unwrap()
        .0
}

async fn open(ix: &Index, e: &Embedder) -> (DenseIndex, DenseReport) {
    DenseIndex::open_or_build(ix, e, |_, _| {}).await.unwrap()
}

fn sources(docs: &[ragloop::retrieval::Document]) -> Vec<String> {
    docs.iter()
        .map(|d| d.metadata["source"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn dense_search_ranks_by_cosine_and_breaks_ties_by_id() {
    let m = mock_embeddings().await;
    let c = corpus();
    let out = tempfile::tempdir().unwrap();
    let ix = Arc::new(index(c.path(), &out.path().join("ix")));
    let e = embedder(&m, "emb-a", None, None);
    let (dense, report) = open(&ix, &e).await;
    assert_eq!(report.chunks, 6);
    assert_eq!(report.embedded, 6);
    assert_eq!(report.dim, 64);
    let r = DenseRetriever {
        index: Arc::clone(&ix),
        dense: Arc::new(dense),
        embedder: e,
        fusion: Fusion::Dense,
    };
    let docs = r
        .search("anonymous functions capture environment", 2)
        .await
        .unwrap();
    assert_eq!(sources(&docs)[0], "closures.md");
    let s0 = docs[0].metadata["score"].as_f64().unwrap();
    let s1 = docs[1].metadata["score"].as_f64().unwrap();
    assert!(s0 > s1 && s0 <= 1.0 + 1e-6, "{s0} {s1}");
    // Identical texts score the same: the smaller id comes first, every time.
    let twins = r.search("zebra quagga okapi", 2).await.unwrap();
    assert_eq!(twins.len(), 2);
    assert_eq!(twins[0].metadata["score"], twins[1].metadata["score"]);
    assert!(twins[0].id < twins[1].id, "{} {}", twins[0].id, twins[1].id);
    for _ in 0..3 {
        assert_eq!(r.search("zebra quagga okapi", 2).await.unwrap(), twins);
    }
    assert!(r.search("   ", 3).await.unwrap().is_empty());
}

#[tokio::test]
async fn vectors_are_stored_once_reembedded_on_model_change_and_incremental() {
    let m = mock_embeddings().await;
    let c = corpus();
    let out = tempfile::tempdir().unwrap();
    let ix_dir = out.path().join("ix");
    let ix = index(c.path(), &ix_dir);
    let e = embedder(&m, "emb-a", None, Some(4));
    let (_, first) = open(&ix, &e).await;
    assert_eq!((first.embedded, first.requests), (6, 2));
    assert!(first.path.starts_with(out.path().join("ix.vectors")));
    assert_eq!(m.inputs.load(Ordering::SeqCst), 6);
    // Reopened: every vector comes from disk, no request.
    let (d2, again) = open(&ix, &e).await;
    assert_eq!((again.embedded, again.requests), (0, 0));
    assert_eq!(m.inputs.load(Ordering::SeqCst), 6);
    assert_eq!(d2.len(), 6);
    // Another model: another store, everything embedded again.
    let other = embedder(&m, "emb-b", None, Some(4));
    let (_, b) = open(&ix, &other).await;
    assert_eq!(b.embedded, 6);
    assert_ne!(b.path, first.path);
    // Another requested size is another identity too.
    let (small, s) = open(&ix, &embedder(&m, "emb-a", Some(16), None)).await;
    assert_eq!((s.embedded, small.dim()), (6, 16));
    // A new page: the index is rebuilt, only its chunk is embedded.
    write(
        c.path(),
        "traits.md",
        "# Traits\n\nA trait defines shared behavior.\n",
    );
    let ix = index(c.path(), &ix_dir);
    let before = m.inputs.load(Ordering::SeqCst);
    let (d3, inc) = open(&ix, &e).await;
    assert_eq!((inc.chunks, inc.embedded), (7, 1));
    assert_eq!(m.inputs.load(Ordering::SeqCst), before + 1);
    assert_eq!(d3.len(), 7);
}

#[tokio::test]
async fn a_changed_vector_size_reembeds_everything() {
    let m = mock_embeddings().await;
    let c = corpus();
    let out = tempfile::tempdir().unwrap();
    let ix_dir = out.path().join("ix");
    let ix = index(c.path(), &ix_dir);
    let e = embedder(&m, "emb-a", None, Some(2));
    open(&ix, &e).await;
    // The server's model changes size under the same name, and a page is added.
    m.native.store(32, Ordering::SeqCst);
    write(
        c.path(),
        "traits.md",
        "# Traits\n\nA trait defines shared behavior.\n",
    );
    let ix = index(c.path(), &ix_dir);
    let (d, r) = open(&ix, &e).await;
    assert_eq!(d.dim(), 32);
    assert_eq!(r.embedded, 7, "every chunk once, at the new size");
    assert!(
        r.notes.iter().any(|n| n.contains("32-dimensional")),
        "{:?}",
        r.notes
    );
    let (_, again) = open(&ix, &e).await;
    assert_eq!(again.embedded, 0);
}

#[tokio::test]
async fn an_interrupted_build_keeps_the_batches_it_paid_for() {
    let server = MockServer::start().await;
    let inputs = Arc::new(AtomicUsize::new(0));
    // Two good batches, then the server breaks for good.
    Mock::given(method("POST"))
        .respond_with(BagOfWords {
            native: Arc::new(AtomicUsize::new(64)),
            inputs: Arc::clone(&inputs),
        })
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_json(json!({"error": {"message": "input too long"}})),
        )
        .with_priority(2)
        .mount(&server)
        .await;
    let c = corpus();
    let out = tempfile::tempdir().unwrap();
    let ix = index(c.path(), &out.path().join("ix"));
    let spec = model(
        &format!("{}/v1", server.uri()),
        "emb-a",
        json!({"concurrency": 1}),
    );
    let e = Embedder::from_model("emb", &spec, None, Some(2))
        .unwrap()
        .with_policy(fast());
    let err = DenseIndex::open_or_build(&ix, &e, |_, _| {})
        .await
        .unwrap_err();
    assert!(
        err.contains("embedding model `emb` (emb-a at http://127.0.0.1:"),
        "{err}"
    );
    assert!(err.contains("HTTP 400: input too long"), "{err}");
    // The server recovers: only the third batch is left to embed.
    server.reset().await;
    Mock::given(method("POST"))
        .respond_with(BagOfWords {
            native: Arc::new(AtomicUsize::new(64)),
            inputs: Arc::clone(&inputs),
        })
        .mount(&server)
        .await;
    let before = inputs.load(Ordering::SeqCst);
    let (d, r) = DenseIndex::open_or_build(&ix, &e, |_, _| {}).await.unwrap();
    assert_eq!((r.embedded, r.requests), (2, 1));
    assert_eq!(inputs.load(Ordering::SeqCst), before + 2);
    assert_eq!(d.len(), 6);
}

async fn failing(resp: ResponseTemplate) -> (String, usize) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(resp)
        .mount(&server)
        .await;
    std::env::set_var("RAGLOOP_TEST_EMBED_KEY", "sk-planted-secret-42");
    let spec = model(
        &format!("{}/v1", server.uri()),
        "emb-a",
        json!({"api_key_env": "RAGLOOP_TEST_EMBED_KEY"}),
    );
    let e = Embedder::from_model("emb", &spec, None, None)
        .unwrap()
        .with_policy(CallPolicy {
            retries: 1,
            timeout: Duration::from_millis(300),
            min_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(10),
            ..CallPolicy::default()
        });
    let err = e
        .embed(&["alpha".to_string(), "beta".to_string()])
        .await
        .unwrap_err();
    assert!(!err.contains("sk-planted-secret-42"), "{err}");
    assert!(err.starts_with("embedding model `emb` (emb-a at "), "{err}");
    let n = server.received_requests().await.unwrap().len();
    (err, n)
}

#[tokio::test]
async fn bad_embedding_answers_are_defined_errors() {
    let ok = |data: Value| ResponseTemplate::new(200).set_body_json(json!({"data": data}));
    let (e, n) = failing(ok(json!([{"index": 0, "embedding": [1.0]}]))).await;
    assert!(e.contains("1 vector(s) for 2 input(s)"), "{e}");
    assert_eq!(n, 1, "a bad body is not retried");
    let (e, _) = failing(ok(
        json!([{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]),
    ))
    .await;
    assert!(e.contains("different sizes"), "{e}");
    let (e, _) = failing(ok(
        json!([{"index": 0, "embedding": [1.0, "NaN"]}, {"index": 1, "embedding": [1.0, 2.0]}]),
    ))
    .await;
    assert!(e.contains("not a finite number"), "{e}");
    let (e, _) = failing(ResponseTemplate::new(200).set_body_raw(
        "{\"data\":[{\"index\":0,\"embedding\":[NaN]}]}",
        "application/json",
    ))
    .await;
    assert!(e.contains("not JSON"), "{e}");
    let (e, _) = failing(
        ResponseTemplate::new(200)
            .set_body_raw("<html><body>proxy login</body></html>", "text/html"),
    )
    .await;
    assert!(e.contains("HTML page"), "{e}");
    let (e, _) = failing(ResponseTemplate::new(200)).await;
    assert!(e.contains("empty response body"), "{e}");
    let (e, _) =
        failing(ok(json!(null)).set_body_json(json!({"error": {"message": "model overloaded"}})))
            .await;
    assert!(e.contains("reported an error: model overloaded"), "{e}");
    // A 401 echoing the key: the server's message, never the key, no retry.
    let (e, n) = failing(ResponseTemplate::new(401).set_body_json(json!({
        "error": {"message": "Incorrect API key provided: sk-planted-secret-42", "type": "invalid_request_error"}
    })))
    .await;
    assert!(
        e.contains("HTTP 401: Incorrect API key provided: [redacted]"),
        "{e}"
    );
    assert_eq!(n, 1);
    // A server that never answers in time: retried, then a timeout.
    let (e, n) = failing(ResponseTemplate::new(200).set_delay(Duration::from_secs(5))).await;
    assert!(
        e.contains("timeout") && e.contains("gave up after 2 attempts"),
        "{e}"
    );
    assert_eq!(n, 2);
}

#[tokio::test]
async fn request_shape_batches_and_key() {
    let m = mock_embeddings().await;
    std::env::set_var("RAGLOOP_TEST_EMBED_KEY2", "sk-shape-key");
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(header("authorization", "Bearer sk-shape-key"))
        .respond_with(BagOfWords {
            native: Arc::new(AtomicUsize::new(8)),
            inputs: Arc::new(AtomicUsize::new(0)),
        })
        .with_priority(1)
        .mount(&m.server)
        .await;
    let spec = model(
        &format!("{}/v1/", m.server.uri()),
        "text-embedding-3-small",
        json!({"api_key_env": "RAGLOOP_TEST_EMBED_KEY2"}),
    );
    let e = Embedder::from_model("emb", &spec, Some(8), Some(3))
        .unwrap()
        .with_policy(fast());
    let texts: Vec<String> = (0..7).map(|i| format!("text number {i}")).collect();
    let mut calls = Vec::new();
    let vs = e
        .embed_all(&texts, |b, start| calls.push((start, b.len())))
        .await
        .unwrap();
    assert_eq!(vs.len(), 7);
    assert_eq!(vs[3], bag("text number 3", 8), "vectors in input order");
    assert_eq!(calls, vec![(0, 3), (3, 3), (6, 1)]);
    let reqs = m.server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 3);
    let body: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(
        body,
        json!({"model": "text-embedding-3-small", "input": ["text number 0", "text number 1", "text number 2"], "encoding_format": "float", "dimensions": 8})
    );
    assert!(!format!("{e:?}").contains("sk-shape-key"));
}

#[test]
fn embedder_configuration_errors() {
    std::env::remove_var("RAGLOOP_TEST_EMBED_UNSET");
    let spec = model(
        "http://127.0.0.1:1/v1",
        "m",
        json!({"api_key_env": "RAGLOOP_TEST_EMBED_UNSET"}),
    );
    assert_eq!(
        Embedder::from_model("emb", &spec, None, None).unwrap_err(),
        "embedding model `emb`: the API key is missing: set the environment variable RAGLOOP_TEST_EMBED_UNSET"
    );
    let offline: ModelSpec = serde_json::from_value(json!({"provider": "offline"})).unwrap();
    assert!(Embedder::from_model("emb", &offline, None, None)
        .unwrap_err()
        .contains("provider `offline` cannot compute embeddings"));
    let nameless: ModelSpec = serde_json::from_value(json!({"provider": "openai"})).unwrap();
    assert!(Embedder::from_model("emb", &nameless, None, None)
        .unwrap_err()
        .contains("names no `model`"));
    let no_key: ModelSpec =
        serde_json::from_value(json!({"provider": "openai", "model": "text-embedding-3-small"}))
            .unwrap();
    assert!(Embedder::from_model("emb", &no_key, None, None)
        .unwrap_err()
        .contains("needs a key: set `api_key_env`"));
    let bad_url = model("127.0.0.1:8080", "m", json!({}));
    assert!(Embedder::from_model("emb", &bad_url, None, None).is_err());
}

#[tokio::test]
async fn hybrid_fuses_bm25_and_dense_by_reciprocal_rank() {
    let m = mock_embeddings().await;
    let c = corpus();
    let out = tempfile::tempdir().unwrap();
    let ix = Arc::new(index(c.path(), &out.path().join("ix")));
    let e = embedder(&m, "emb-a", None, None);
    let (dense, _) = open(&ix, &e).await;
    let dense = Arc::new(dense);
    let hybrid = DenseRetriever {
        index: Arc::clone(&ix),
        dense: Arc::clone(&dense),
        embedder: e.clone(),
        fusion: Fusion::Hybrid { k: DEFAULT_RRF_K },
    };
    let q = "reference borrows value ownership";
    let docs = hybrid.search(q, 3).await.unwrap();
    assert_eq!(docs.len(), 3);
    assert_eq!(sources(&docs)[0], "borrowing.md");
    // The fused score is exactly the RRF sum of the two ranks.
    for d in &docs {
        let rank = |k: &str| d.metadata[k].as_u64().map(|r| 1.0 / (60.0 + r as f64));
        let expect = rank("bm25_rank").unwrap_or(0.0) + rank("dense_rank").unwrap_or(0.0);
        let got = d.metadata["score"].as_f64().unwrap();
        assert!((got - expect).abs() < 1e-12, "{got} {expect}");
    }
    let scores: Vec<f64> = docs
        .iter()
        .map(|d| d.metadata["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // Dense alone ranks the same top document here.
    let dense_only = DenseRetriever {
        index: ix,
        dense,
        embedder: e,
        fusion: Fusion::Dense,
    };
    assert_eq!(
        sources(&dense_only.search(q, 1).await.unwrap())[0],
        "borrowing.md"
    );
}

pub(crate) fn dense_spec(dir: &Path, base: &str) -> std::path::PathBuf {
    let c = corpus();
    let corpus_dir = dir.join("corpus");
    std::fs::create_dir_all(&corpus_dir).unwrap();
    for e in std::fs::read_dir(c.path()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), corpus_dir.join(e.file_name())).unwrap();
    }
    let spec = format!(
        r#"version: 1
name: dense-demo
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      documents: {{type: array}}
      answer: {{type: string}}
models:
  emb:
    provider: openai
    model: bag-of-words
    base_url: "{base}/v1"
    api_key_env: RAGLOOP_TEST_DENSE_KEY
    retries: 0
  gen:
    provider: offline
retrievers:
  docs:
    kind: dense
    corpus: corpus
    top_k: 2
    embedding: emb
    batch_size: 4
entry: retrieve
nodes:
  retrieve:
    kind: retrieve
    retriever: docs
    query: "{{{{ question }}}}"
    update:
      documents: output
  generate:
    kind: llm
    model: gen
    task: generate_answer
    inputs:
      question: question
      documents: documents
    prompt:
      user: "{{{{ question }}}}"
    update:
      answer: output
edges:
  retrieve: generate
  generate: END
output:
  answer: answer
  documents: documents
variants:
  hybrid:
    set:
      retrievers.docs.kind: hybrid
"#
    );
    let p = dir.join("dense.yaml");
    std::fs::write(&p, spec).unwrap();
    p
}

pub(crate) fn run_cli(
    spec: &Path,
    cache: &Path,
    args: &[&str],
    key: Option<&str>,
) -> (i32, String, String) {
    let mut cmd = assert_cmd::Command::cargo_bin("ragloop").unwrap();
    cmd.arg("run")
        .arg(spec)
        .args(args)
        .env("RAGLOOP_CACHE_DIR", cache);
    match key {
        Some(k) => cmd.env("RAGLOOP_TEST_DENSE_KEY", k),
        None => cmd.env_remove("RAGLOOP_TEST_DENSE_KEY"),
    };
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ragloop_run_with_dense_and_hybrid_retrievers() {
    let m = mock_embeddings().await;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let spec = dense_spec(dir.path(), &m.server.uri());
    let q = "What are closures: anonymous functions that capture their environment?";
    let (s, c) = (spec.clone(), cache.clone());
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        run_cli(&s, &c, &["--question", q, "--json"], Some("sk-dense-key-1"))
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}\n{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sources"][0], "closures.md", "{out}");
    assert!(
        v["state"]["documents"][0]["metadata"]["score"]
            .as_f64()
            .unwrap()
            > 0.5
    );
    let requests = || async { m.server.received_requests().await.unwrap().len() };
    // 6 chunks in batches of 4, then the query.
    assert_eq!(requests().await, 3);
    assert!(std::fs::read_dir(cache.join("indexes")).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".vectors")));
    // Second run: vectors from disk, only the query is embedded.
    let (s, c) = (spec.clone(), cache.clone());
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        run_cli(
            &s,
            &c,
            // --no-cache: the query's embedding is in the response cache since the
            // first run (embed_replay.rs checks the cache).
            &[
                "--question",
                q,
                "--json",
                "--variant",
                "hybrid",
                "--no-cache",
            ],
            Some("sk-dense-key-1"),
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(requests().await, 4);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sources"][0], "closures.md");
    assert!(v["state"]["documents"][0]["metadata"]["dense_rank"].is_u64());
    // No key: refused before the run, naming the variable.
    let (s, c) = (spec.clone(), cache.clone());
    let (code, _, err) =
        tokio::task::spawn_blocking(move || run_cli(&s, &c, &["--question", q], None))
            .await
            .unwrap();
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("model `emb`") && err.contains("RAGLOOP_TEST_DENSE_KEY"),
        "{err}"
    );
    // Under --replay no embedding key is read: the cassette answers the embedding
    // calls too (embed_replay.rs), so this empty one is refused for being empty.
    let cassette = dir.path().join("c.jsonl");
    std::fs::write(&cassette, "").unwrap();
    let (s, c) = (spec.clone(), cache.clone());
    let (code, _, err) = tokio::task::spawn_blocking(move || {
        run_cli(
            &s,
            &c,
            &["--question", q, "--replay", &cassette.to_string_lossy()],
            None,
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("empty cassette") && !err.contains("RAGLOOP_TEST_DENSE_KEY"),
        "{err}"
    );
}

#[tokio::test]
async fn embeddings_429_with_retry_after_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("Retry-After", "0")
                .set_body_json(json!({"error": {"message": "Rate limit reached"}})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(BagOfWords {
            native: Arc::new(AtomicUsize::new(8)),
            inputs: Arc::new(AtomicUsize::new(0)),
        })
        .with_priority(2)
        .mount(&server)
        .await;
    let spec = model(&format!("{}/v1", server.uri()), "m", json!({}));
    let e = Embedder::from_model("emb", &spec, None, None)
        .unwrap()
        .with_policy(fast());
    let v = e.embed(&["one two".to_string()]).await.unwrap();
    assert_eq!(v, vec![bag("one two", 8)]);
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_key_never_reaches_any_output() {
    const KEY: &str = "sk-planted-dense-key-31337";
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "error": {"message": format!("Incorrect API key provided: {KEY}. You can find your API key at ...")}
        })))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let spec = dense_spec(dir.path(), &server.uri());
    let trace = dir.path().join("trace.jsonl");
    let t = trace.to_string_lossy().into_owned();
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        run_cli(
            &spec,
            &cache,
            &[
                "--question",
                "closures",
                "--json",
                "--verbose",
                "--trace",
                &t,
            ],
            Some(KEY),
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains("HTTP 401: Incorrect API key provided: [redacted]"),
        "{err}"
    );
    let trace = std::fs::read_to_string(&trace).unwrap_or_default();
    for o in [&out, &err, &trace] {
        assert!(!o.contains(KEY), "key leaked: {o}");
    }
}
