//! Embedding calls through the call layers (issue 13 item 5): `--record` writes the
//! query and corpus-batch embeddings of `dense`/`hybrid` retrievers as cassette
//! lines, `--replay` answers them with no server and no key, the response cache
//! answers a repeated query, and a cassette recorded before embeddings were recorded
//! (LLM lines only) still replays. Against the bag-of-words mock `/v1/embeddings`
//! server of `dense.rs`, on 127.0.0.1.
use crate::dense::{dense_spec, mock_embeddings, run_cli};
use serde_json::Value;
use std::path::{Path, PathBuf};

const KEY: &str = "sk-embed-replay-key-777";
const Q: &str = "What are closures: anonymous functions that capture their environment?";

/// `ragloop run SPEC ARGS` on a blocking thread (the mock server runs on this one).
async fn run(spec: &Path, cache: &Path, args: &[&str], key: Option<&str>) -> (i32, Value, String) {
    let (s, c) = (spec.to_path_buf(), cache.to_path_buf());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let key = key.map(str::to_string);
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        run_cli(&s, &c, &a, key.as_deref())
    })
    .await
    .unwrap();
    let v = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, v, err)
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn embedding_lines(path: &Path) -> Vec<Value> {
    lines(path)
        .into_iter()
        .filter(|l| l["kind"] == "embeddings")
        .collect()
}

/// What replay must reproduce: the documents (ids, texts, scores, ranks) and sources.
fn retrieved(v: &Value) -> Value {
    serde_json::json!({"documents": v["state"]["documents"], "sources": v["sources"], "status": v["status"]})
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_dense_and_hybrid_run_replays_with_no_server_and_no_key() {
    let m = mock_embeddings().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = dense_spec(dir.path(), &m.server.uri());
    let requests = || async { m.server.received_requests().await.unwrap().len() };
    let cache = dir.path().join("rec-cache");
    let (dense_cas, hybrid_cas) = (
        dir.path().join("dense.jsonl"),
        dir.path().join("hybrid.jsonl"),
    );

    // Dense, cold vector store: 6 chunks in batches of 4, then the query.
    let (code, dense, err) = run(
        &spec,
        &cache,
        &["--question", Q, "--json", "--record", &s(&dense_cas)],
        Some(KEY),
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(dense["sources"][0], "closures.md", "{dense}");
    assert_eq!(requests().await, 3);
    let emb = embedding_lines(&dense_cas);
    let corpus: Vec<&Value> = emb.iter().filter(|l| l["purpose"] == "corpus").collect();
    let query: Vec<&Value> = emb.iter().filter(|l| l["purpose"] == "query").collect();
    assert_eq!(corpus.len(), 2, "{emb:?}");
    assert_eq!(
        corpus
            .iter()
            .map(|l| l["inputs"].as_array().unwrap().len())
            .sum::<usize>(),
        6
    );
    assert!(corpus.iter().all(|l| l.get("stored").is_none()));
    assert_eq!(query.len(), 1);
    let q = query[0];
    assert_eq!(q["inputs"], serde_json::json!([Q]));
    assert_eq!(q["model_name"], "emb");
    assert_eq!(q["config"]["model"], "bag-of-words");
    assert_eq!(q["config"]["base_url"], format!("{}/v1", m.server.uri()));
    assert_eq!(q["vectors"][0].as_array().unwrap().len(), 64);
    assert_eq!(q["input_tokens"], 1);
    assert_eq!(q["cached"], false);
    assert_eq!(q["key"].as_str().unwrap().len(), 64);
    // The chat exchange is there too, and no key anywhere.
    assert!(lines(&dense_cas).iter().any(|l| l["node"] == "generate"));
    let text = std::fs::read_to_string(&dense_cas).unwrap();
    assert!(!text.contains(KEY) && !text.contains("RAGLOOP_TEST_DENSE_KEY"));

    // Hybrid, warm store and a cached query: no request at all, yet the cassette
    // holds every vector the run used (the store's, marked `stored`).
    let (code, hybrid, err) = run(
        &spec,
        &cache,
        &[
            "--question",
            Q,
            "--json",
            "--variant",
            "hybrid",
            "--record",
            &s(&hybrid_cas),
        ],
        Some(KEY),
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(hybrid["state"]["documents"][0]["metadata"]["dense_rank"].is_u64());
    assert_eq!(requests().await, 3);
    let emb = embedding_lines(&hybrid_cas);
    let stored: Vec<&Value> = emb.iter().filter(|l| l["stored"] == true).collect();
    assert_eq!(
        stored
            .iter()
            .map(|l| l["inputs"].as_array().unwrap().len())
            .sum::<usize>(),
        6,
        "{emb:?}"
    );
    let query: Vec<&Value> = emb.iter().filter(|l| l["purpose"] == "query").collect();
    assert_eq!((query.len(), &query[0]["cached"]), (1, &Value::Bool(true)));

    // Replays, each into a fresh cache (no vector store on disk): no key, no request,
    // the same documents.
    for (cas, variant, recorded) in [
        (&dense_cas, None, &dense),
        (&hybrid_cas, Some("hybrid"), &hybrid),
    ] {
        let fresh = tempfile::tempdir().unwrap();
        let mut args = vec!["--question", Q, "--json", "--replay"];
        let c = s(cas);
        args.push(&c);
        if let Some(v) = variant {
            args.extend(["--variant", v]);
        }
        let (code, v, err) = run(&spec, fresh.path(), &args, None).await;
        assert_eq!(code, 0, "{variant:?}: {err}");
        assert_eq!(retrieved(&v), retrieved(recorded), "{variant:?}");
        assert_eq!(v["answer"], recorded["answer"]);
        assert_eq!(requests().await, 3, "{variant:?}: replay made a request");
    }

    // The server gone for good: still replays.
    drop(m);
    let fresh = tempfile::tempdir().unwrap();
    let (code, v, err) = run(
        &spec,
        fresh.path(),
        &[
            "--question",
            Q,
            "--json",
            "--variant",
            "hybrid",
            "--replay",
            &s(&hybrid_cas),
        ],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(retrieved(&v), retrieved(&hybrid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_miss_names_the_retriever_the_model_and_the_text() {
    let m = mock_embeddings().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = dense_spec(dir.path(), &m.server.uri());
    let cas = dir.path().join("c.jsonl");
    let (code, _, err) = run(
        &spec,
        &dir.path().join("cache"),
        &["--question", Q, "--json", "--record", &s(&cas)],
        Some(KEY),
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let before = m.server.received_requests().await.unwrap().len();

    // Another question: the corpus replays, the query is not in the cassette.
    let other = "How does cargo build my package?";
    let fresh = tempfile::tempdir().unwrap();
    let (code, _, err) = run(
        &spec,
        fresh.path(),
        &["--question", other, "--replay", &s(&cas)],
        None,
    )
    .await;
    assert_eq!(code, 1, "{err}");
    for want in [
        "retriever `docs`",
        "replay: cassette",
        "embedding model `emb`",
        "bag-of-words at http://127.0.0.1:",
        &format!("the query {other:?}"),
        "the queries differ from the recorded run's",
    ] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }

    // A corpus that changed since the recording, with no vector store on disk: the
    // index build fails naming the chunk, before the run.
    std::fs::write(
        dir.path().join("corpus/traits.md"),
        "# Traits\n\nA trait defines shared behavior.\n",
    )
    .unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let (code, _, err) = run(
        &spec,
        fresh.path(),
        &["--question", Q, "--replay", &s(&cas)],
        None,
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("retriever `docs`")
            && err.contains("embedding model `emb`")
            && err.contains("corpus chunk \"")
            && err.contains("A trait defines shared behavior"),
        "{err}"
    );
    assert_eq!(
        m.server.received_requests().await.unwrap().len(),
        before,
        "a replay miss is never a network call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_embeddings_are_cached_across_runs_and_no_cache_bypasses_it() {
    let m = mock_embeddings().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = dense_spec(dir.path(), &m.server.uri());
    let cache = dir.path().join("cache");
    let requests = || async { m.server.received_requests().await.unwrap().len() };
    let (code, first, err) = run(&spec, &cache, &["--question", Q, "--json"], Some(KEY)).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(requests().await, 3, "two corpus batches and the query");
    // The same query again (the dense and the hybrid variant embed it alike): from
    // the response cache, no request.
    for variant in ["", "hybrid"] {
        let mut args = vec!["--question", Q, "--json"];
        if !variant.is_empty() {
            args.extend(["--variant", variant]);
        }
        let (code, v, err) = run(&spec, &cache, &args, Some(KEY)).await;
        assert_eq!(code, 0, "{err}");
        if variant.is_empty() {
            assert_eq!(retrieved(&v), retrieved(&first));
        }
        assert_eq!(
            requests().await,
            3,
            "variant {variant:?} embedded the query again"
        );
    }
    let entries = walk(&cache.join("responses"));
    assert!(!entries.is_empty(), "no response cache entry");
    // --no-cache: embedded again; another query: embedded once, then cached.
    let (code, _, err) = run(&spec, &cache, &["--question", Q, "--no-cache"], Some(KEY)).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(requests().await, 4);
    for _ in 0..2 {
        let (code, _, err) = run(&spec, &cache, &["--question", "cargo tests"], Some(KEY)).await;
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(requests().await, 5);
    // A corrupt entry is a miss, answered by the server and written again.
    for e in walk(&cache.join("responses")) {
        std::fs::write(e, "{not json").unwrap();
    }
    let (code, v, err) = run(&spec, &cache, &["--question", Q, "--json"], Some(KEY)).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(retrieved(&v), retrieved(&first));
    assert_eq!(requests().await, 6);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    out
}

/// The corpus and BM25 + offline spec the fixture cassette
/// `tests/specs/files/cassettes/llm-only-55408c6.jsonl` was recorded with, by the
/// ragloop of commit 55408c6 (before embeddings were recorded).
fn llm_only_project(dir: &Path) -> PathBuf {
    let corpus = dir.join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::write(
        corpus.join("closures.md"),
        "# Closures\n\nClosures are anonymous functions that capture their environment.\n",
    )
    .unwrap();
    std::fs::write(
        corpus.join("cargo.md"),
        "# Cargo\n\nCargo builds your package, downloads dependencies and runs tests.\n",
    )
    .unwrap();
    let spec = dir.join("llm-only.yaml");
    std::fs::write(
        &spec,
        r#"version: 1
name: llm-only
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      answer: {type: string}
models:
  gen:
    provider: offline
retrievers:
  docs:
    kind: bm25
    corpus: corpus
    top_k: 2
entry: retrieve
nodes:
  retrieve:
    kind: retrieve
    retriever: docs
    query: "{{ question }}"
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
      user: "{{ question }}"
    update:
      answer: output
edges:
  retrieve: generate
  generate: END
output:
  answer: answer
  documents: documents
"#,
    )
    .unwrap();
    spec
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/specs/files/cassettes/llm-only-55408c6.jsonl")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_llm_only_cassette_still_replays() {
    let dir = tempfile::tempdir().unwrap();
    let spec = llm_only_project(dir.path());
    let old = fixture();
    assert!(
        lines(&old)
            .iter()
            .all(|l| l.get("kind").is_none() && l["node"] == "generate"),
        "the fixture is an LLM-only cassette"
    );
    let q = "What do closures capture?";
    let (code, live, err) = run(
        &spec,
        &dir.path().join("c1"),
        &["--question", q, "--json"],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, replayed, err) = run(
        &spec,
        &dir.path().join("c2"),
        &["--question", q, "--json", "--replay", &s(&old)],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(retrieved(&replayed), retrieved(&live));
    assert_eq!(replayed["answer"], live["answer"]);
    assert_eq!(replayed["usage"]["calls"], 1);
    assert_eq!(replayed["usage"]["cached_calls"], 1, "{replayed}");
}
