//! The rerank stage (issue 13 item 4): `rerank:` on a retriever with the `offline`
//! reranker and HTTP rerankers in the TEI, Cohere v2 and Jina shapes (wiremock on
//! 127.0.0.1), their failures (out-of-range, repeated and missing indices, scores
//! that are not numbers, error bodies, 5xx), usage, and record/replay from the CLI.
use ragloop::retrieval::rerank::{HttpReranker, OfflineReranker, Reranker};
use ragloop::retrieval::usage::counted;
use ragloop::retrieval::{
    open_retriever, Document, OpenContext, Reranked, Retriever, ScriptedRetriever,
};
use ragloop::spec::retriever::HttpRerankerSpec;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn doc(id: &str, text: &str) -> Document {
    Document {
        id: id.into(),
        content: text.into(),
        metadata: json!({"source": format!("{id}.md"), "score": 1.0})
            .as_object()
            .unwrap()
            .clone(),
    }
}

fn three() -> Vec<Document> {
    vec![doc("a", "alpha"), doc("b", "beta"), doc("c", "gamma")]
}

fn http(kind: &str, base: &str, key_var: Option<&str>) -> HttpReranker {
    let spec = HttpRerankerSpec {
        kind: kind.into(),
        base_url: Some(base.into()),
        model: (kind != "tei").then(|| "rr-model".into()),
        api_key_env: key_var.map(String::from),
        timeout_secs: Some(5.0),
        retries: Some(1),
    };
    let policy = ragloop::http::CallPolicy {
        retries: 1,
        timeout: Duration::from_secs(5),
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        ..Default::default()
    };
    HttpReranker::new(&spec, false).unwrap().with_policy(policy)
}

fn stage(reranker: HttpReranker, docs: Vec<Document>) -> Reranked {
    Reranked::new(
        Arc::new(ScriptedRetriever::new(vec![docs])),
        Arc::new(reranker),
        12,
    )
}

fn ids(docs: &[Document]) -> Vec<&str> {
    docs.iter().map(|d| d.id.as_str()).collect()
}

#[tokio::test]
async fn each_http_shape_reorders_the_candidates_and_counts_its_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/rerank"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            {"index": 2, "score": 0.9}, {"index": 0, "score": 0.5}, {"index": 1, "score": 0.1}
        ])))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v2/rerank"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "x",
            "results": [{"index": 1, "relevance_score": 0.8}, {"index": 2, "relevance_score": 0.3}, {"index": 0, "relevance_score": 0.2}],
            "meta": {"billed_units": {"search_units": 1}}
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/rerank"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "model": "rr-model",
            "results": [{"index": 0, "relevance_score": 0.7, "document": {"text": "alpha"}}, {"index": 1, "relevance_score": 0.6}, {"index": 2, "relevance_score": 0.1}],
            "usage": {"total_tokens": 42}
        })))
        .mount(&server)
        .await;
    std::env::set_var("RAGLOOP_TEST_RERANK_KEY", "sk-rerank-secret-5");
    for (kind, want, units, tokens) in [
        ("tei", ["c", "a"], 0, 0),
        ("cohere", ["b", "c"], 1, 0),
        ("jina", ["a", "b"], 0, 42),
    ] {
        let r = stage(
            http(kind, &server.uri(), Some("RAGLOOP_TEST_RERANK_KEY")),
            three(),
        );
        let (docs, usage) = counted(r.search("which letter", 2)).await;
        let docs = docs.unwrap();
        assert_eq!(ids(&docs), want, "{kind}");
        for d in &docs {
            let rank = ["a", "b", "c"].iter().position(|x| *x == d.id).unwrap() + 1;
            assert_eq!(d.metadata["retrieval_rank"], rank, "{kind}");
        }
        assert_eq!(
            (
                usage.rerank_calls,
                usage.rerank_search_units,
                usage.rerank_tokens
            ),
            (1, units, tokens),
            "{kind}"
        );
    }
    let reqs = server.received_requests().await.unwrap();
    let body = |p: &str| -> Value {
        let r = reqs.iter().find(|r| r.url.path() == p).unwrap();
        assert_eq!(
            r.headers.get("authorization").unwrap(),
            "Bearer sk-rerank-secret-5"
        );
        serde_json::from_slice(&r.body).unwrap()
    };
    assert_eq!(
        body("/rerank"),
        json!({"query": "which letter", "texts": ["alpha", "beta", "gamma"]})
    );
    for p in ["/v2/rerank", "/v1/rerank"] {
        assert_eq!(
            body(p),
            json!({"model": "rr-model", "query": "which letter", "documents": ["alpha", "beta", "gamma"], "top_n": 3})
        );
    }
}

#[tokio::test]
async fn a_misbehaving_reranker_fails_the_search_naming_the_fault() {
    for (answer, status, want) in [
        (
            json!([{"index": 0, "score": 0.1}, {"index": 3, "score": 0.2}, {"index": 1, "score": 0.0}]),
            200,
            "index 3 is out of range for 3 document(s)",
        ),
        (
            json!([{"index": 0, "score": 0.1}, {"index": 0, "score": 0.2}, {"index": 1, "score": 0.0}]),
            200,
            "index 0 is answered twice",
        ),
        (
            json!([{"index": 0, "score": 0.1}]),
            200,
            "2 of the 3 document(s) have no score (first: index 1)",
        ),
        (
            json!([{"index": 0, "score": "NaN"}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.0}]),
            200,
            "the score of index 0 is \"NaN\", not a finite number",
        ),
        (
            json!([{"index": 0, "score": null}, {"index": 1, "score": 0.2}, {"index": 2, "score": 0.0}]),
            200,
            "the score of index 0 is null",
        ),
        (
            json!({"error": "model overloaded"}),
            200,
            "the server says: \"model overloaded\"",
        ),
        (json!({"error": "boom"}), 503, "503"),
        (json!({"error": "no such model"}), 404, "404"),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/rerank"))
            .respond_with(ResponseTemplate::new(status).set_body_json(answer.clone()))
            .mount(&server)
            .await;
        let r = stage(http("tei", &server.uri(), None), three());
        let e = r.search("q", 2).await.unwrap_err().to_string();
        assert!(
            e.starts_with("rerank: reranker `tei` (at http://127.0.0.1:"),
            "{e}"
        );
        assert!(e.contains(want), "{answer}: {e}");
        let n = server.received_requests().await.unwrap().len();
        // Transient failures are retried (retries: 1), bad answers are not.
        assert_eq!(n, if status == 503 { 2 } else { 1 }, "{answer}");
    }
    // A body that is not JSON at all.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>hi</html>"))
        .mount(&server)
        .await;
    let e = stage(http("cohere", &server.uri(), None), three())
        .search("q", 2)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("reranker `cohere` (rr-model at") && e.contains("not JSON"),
        "{e}"
    );
}

#[tokio::test]
async fn a_transient_failure_then_an_answer_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            {"index": 1, "score": 2.0}, {"index": 0, "score": 1.0}, {"index": 2, "score": 0.0}
        ])))
        .mount(&server)
        .await;
    let docs = stage(http("tei", &server.uri(), None), three())
        .search("q", 3)
        .await
        .unwrap();
    assert_eq!(ids(&docs), ["b", "a", "c"]);
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[test]
fn a_missing_key_names_the_reranker_and_the_variable_and_keys_never_leak() {
    std::env::remove_var("RAGLOOP_TEST_RERANK_UNSET");
    let spec = HttpRerankerSpec {
        kind: "jina".into(),
        base_url: None,
        model: Some("m".into()),
        api_key_env: Some("RAGLOOP_TEST_RERANK_UNSET".into()),
        timeout_secs: None,
        retries: None,
    };
    let e = HttpReranker::new(&spec, false).unwrap_err();
    assert!(e.contains("RAGLOOP_TEST_RERANK_UNSET"), "{e}");
    // Replaying reads no key.
    assert!(HttpReranker::new(&spec, true).is_ok());
    std::env::set_var("RAGLOOP_TEST_RERANK_SHOWN", "sk-never-shown-9");
    let spec = HttpRerankerSpec {
        api_key_env: Some("RAGLOOP_TEST_RERANK_SHOWN".into()),
        ..spec
    };
    let r = HttpReranker::new(&spec, false).unwrap();
    assert!(!format!("{r:?}").contains("sk-never-shown-9"));
}

/// A corpus where one page is about the query throughout (each of its sections uses
/// some of the query's words, in longer text), and another page has one short
/// section holding every query word once, about something else; other pages give
/// the words their rarity.
fn page_corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut big = String::from("# Message passing with channels\n\n");
    for i in 0..8 {
        big.push_str(&format!(
            "## Step {i}\n\nThe channel sends values from one thread to another. Each message sent down the channel is owned by the receiver afterwards, which is how ownership moves across threads in step {i}; a receiver blocks until something arrives, and iterating over it ends when the channel closes.\n\n"
        ));
    }
    std::fs::write(dir.path().join("channels.md"), big).unwrap();
    std::fs::write(
        dir.path().join("misc.md"),
        "# Glossary\n\n## Words\n\nSend: values, threads, channel, receiver.\n\n## Cargo\n\nCargo builds crates, publishes crates to a registry and runs tests of a workspace.",
    )
    .unwrap();
    for (name, text) in [
        ("cargo.md", "# Cargo\n\nCargo is the build tool: it compiles crates, fetches dependencies and runs tests."),
        ("structs.md", "# Structs\n\nA struct groups named fields; methods are defined in an impl block."),
        ("errors.md", "# Errors\n\nRecoverable errors use Result; unrecoverable ones panic and unwind the stack."),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

#[tokio::test]
async fn the_offline_reranker_weighs_the_whole_page_and_is_deterministic() {
    let c = page_corpus();
    let cache = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("crag-web-cache");
    std::env::set_var("RAGLOOP_CACHE_DIR", &cache);
    let models = indexmap::IndexMap::new();
    let ctx = OpenContext {
        root: Path::new("."),
        corpus: None,
        progress: false,
        models: &models,
        embed_calls: None,
    };
    let open = |rerank: Option<Value>| {
        let mut v = json!({"kind": "bm25", "corpus": c.path().display().to_string(), "top_k": 1});
        if let Some(r) = rerank {
            v["rerank"] = r;
        }
        let spec: ragloop::spec::types::RetrieverSpec = serde_json::from_value(v).unwrap();
        open_retriever("r", &spec, &ctx).expect("open")
    };
    let q = "send values between threads through a channel receiver";
    let plain = open(None).retriever.search(q, 1).await.unwrap();
    let opened = open(Some(json!({"reranker": "offline", "candidates": 12})));
    let reranked = opened.retriever.search(q, 1).await.unwrap();
    assert_eq!(
        plain[0].metadata["source"], "misc.md",
        "the first pass's pick"
    );
    assert_eq!(reranked[0].metadata["source"], "channels.md");
    assert!(reranked[0].metadata["rerank_score"].is_f64());
    for _ in 0..5 {
        let again = opened.retriever.search(q, 1).await.unwrap();
        assert_eq!(ids(&again), ids(&reranked));
    }
    // The scores, directly: one per candidate, finite.
    let candidates = opened.index.search(q, 12).unwrap();
    let scores = OfflineReranker::new(Arc::clone(&opened.index))
        .rerank(q, &candidates)
        .await
        .unwrap();
    assert_eq!(scores.len(), candidates.len());
    assert!(scores.iter().all(|s| s.is_finite()));
}

/// A TEI server scoring each text by its position: the last candidate first.
struct Reverse;

impl wiremock::Respond for Reverse {
    fn respond(&self, req: &wiremock::Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let n = body["texts"].as_array().map_or(0, Vec::len);
        let scores: Vec<Value> = (0..n)
            .map(|i| json!({"index": i, "score": i as f64}))
            .collect();
        ResponseTemplate::new(200).set_body_json(scores)
    }
}

fn rerank_spec(dir: &Path, base: &str) -> std::path::PathBuf {
    let corpus = dir.join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    for (name, text) in [
        ("ownership.md", "# Ownership\n\nEach value has an owner; when the owner goes out of scope the value is dropped."),
        ("borrowing.md", "# Borrowing\n\nA reference borrows a value without taking its ownership."),
        ("moves.md", "# Moves\n\nAssigning a value moves its ownership to the new owner."),
        ("cargo.md", "# Cargo\n\nCargo builds your package and runs tests."),
    ] {
        std::fs::write(corpus.join(name), text).unwrap();
    }
    let spec = format!(
        r#"version: 1
name: rerank-demo
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      documents: {{type: array}}
      answer: {{type: string}}
models:
  gen:
    provider: offline
retrievers:
  docs:
    kind: bm25
    corpus: corpus
    top_k: 2
    rerank:
      candidates: 3
      reranker: {{kind: tei, base_url: "{base}", retries: 0}}
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
"#
    );
    let p = dir.join("rerank.yaml");
    std::fs::write(&p, spec).unwrap();
    p
}

async fn run(spec: &Path, cache: &Path, args: &[&str]) -> (i32, Value, String) {
    let (s, c) = (spec.to_path_buf(), cache.to_path_buf());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::dense::run_cli(&s, &c, &a, None)
    })
    .await
    .unwrap();
    (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reranked_run_records_replays_with_no_server_and_counts_its_calls() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/rerank"))
        .respond_with(Reverse)
        .mount(&server)
        .await;
    let spec = rerank_spec(dir.path(), &server.uri());
    let cas = dir.path().join("rerank.jsonl");
    let q = "who owns a value and what happens to its ownership";
    let cas_s = cas.to_string_lossy().into_owned();
    let (code, live, err) = run(
        &spec,
        &cache,
        &["--question", q, "--json", "--record", &cas_s],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let docs = live["state"]["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 2);
    // The server put the third candidate first.
    assert_eq!(docs[0]["metadata"]["retrieval_rank"], 3, "{live}");
    assert_eq!(docs[1]["metadata"]["retrieval_rank"], 2);
    assert_eq!(live["usage"]["retrieval"]["rerank_calls"], 1, "{live}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    let lines: Vec<Value> = std::fs::read_to_string(&cas)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["kind"] == "rerank")
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["query"], q);
    assert_eq!(lines[0]["documents"].as_array().unwrap().len(), 3);
    assert_eq!(lines[0]["scores"], json!([0.0, 1.0, 2.0]));

    // The same question again: the response cache answers.
    let (code, again, err) = run(&spec, &cache, &["--question", q, "--json"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(again["usage"]["retrieval"]["rerank_cached"], 1, "{again}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);

    // Replay with the server gone and a fresh cache: same documents, no call.
    drop(server);
    let fresh = dir.path().join("fresh-cache");
    let (code, replayed, err) = run(
        &spec,
        &fresh,
        &["--question", q, "--json", "--replay", &cas_s],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(replayed["state"]["documents"], live["state"]["documents"]);
    assert_eq!(replayed["usage"]["retrieval"]["rerank_cached"], 1);
    // Another question is not in the cassette: a failure naming the retriever.
    let (code, _, err) = run(
        &spec,
        &fresh,
        &[
            "--question",
            "what does cargo build",
            "--json",
            "--replay",
            &cas_s,
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("retriever `docs`: rerank: reranker `tei`")
            && err.contains("holds no rerank call"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reranker_answering_garbage_fails_the_run_naming_the_retriever() {
    let dir = tempfile::tempdir().unwrap();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([{"index": 7, "score": 1.0}])))
        .mount(&server)
        .await;
    let spec = rerank_spec(dir.path(), &server.uri());
    let (code, out, err) = run(
        &spec,
        &dir.path().join("c"),
        &["--question", "who owns a value", "--json"],
    )
    .await;
    assert_eq!(code, 1, "{out}\n{err}");
    let text = format!("{out}{err}");
    assert!(
        text.contains("retriever `docs`: rerank: reranker `tei`")
            && text.contains("index 7 is out of range"),
        "{text}"
    );
}

/// `validate`'s findings about a retriever's `rerank:` (code, line text at the span).
fn findings(rerank_yaml: &str) -> Vec<(String, String, String)> {
    let text = format!(
        "version: 1\nname: r\nstate:\n  schema:\n    type: object\n    properties:\n      question: {{type: string}}\n      documents: {{type: array}}\nmodels:\n  m: {{provider: scripted}}\nretrievers:\n  docs:\n    kind: bm25\n    corpus: files/corpus\n    top_k: 4\n    rerank:\n{rerank_yaml}\nentry: retrieve\nnodes:\n  retrieve:\n    kind: retrieve\n    retriever: docs\n    query: \"{{{{ question }}}}\"\n    update:\n      documents: output\nedges:\n  retrieve: END\n"
    );
    let mut sources = ragloop::spec::source::Sources::new();
    let opts = ragloop::validate::Options {
        no_environment: true,
    };
    let out = ragloop::validate::validate_str(Path::new("r.yaml"), &text, &mut sources, &opts);
    out.diagnostics
        .iter()
        .filter(|d| d.code.as_str().starts_with("E09"))
        .map(|d| {
            let line = d
                .span
                .map(|s| {
                    text.lines()
                        .nth(s.line as usize - 1)
                        .unwrap_or("")
                        .trim()
                        .to_string()
                })
                .unwrap_or_default();
            (d.code.as_str().to_string(), line, d.message.clone())
        })
        .collect()
}

#[test]
fn validate_reports_each_rerank_fault_at_its_value_in_the_specs_words() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("      reranker: offlin", "E094", "reranker: offlin", "unknown reranker `offlin`"),
        ("      reranker: {kind: openai, base_url: \"http://x\"}", "E094", "reranker: {kind: openai", "unknown reranker kind `openai`"),
        ("      reranker: jina", "E094", "reranker: jina", "write it as a mapping"),
        ("      candidates: 3\n      reranker: offline", "E095", "candidates: 3", "retrieves 3 candidate(s) but keeps 4: the retriever's `top_k` is 4"),
        ("      candidates: 8\n      top_k: 9\n      reranker: offline", "E095", "candidates: 8", "`rerank.top_k` is 9"),
        ("      top_k: 0\n      reranker: offline", "E096", "top_k: 0", "`retrievers.docs.rerank.top_k` is 0; it must be between 1 and 1000"),
        ("      candidates: 5000\n      reranker: offline", "E096", "candidates: 5000", "between 1 and 1000"),
        ("      reranker:\n        kind: tei\n        base_url: \"http://127.0.0.1:9\"\n        timeout_secs: 0", "E096", "timeout_secs: 0", "timeout_secs` is 0"),
        ("      reranker:\n        kind: tei\n        base_url: \"http://127.0.0.1:9\"\n        retries: 11", "E096", "retries: 11", "between 0 and 10"),
        ("      reranker:\n        kind: tei", "E097", "kind: tei", "needs `base_url`"),
        ("      reranker:\n        kind: cohere\n        api_key_env: CO_KEY", "E097", "kind: cohere", "needs `model`"),
        ("      reranker:\n        kind: jina\n        model: m", "E097", "kind: jina", "official API (https://api.jina.ai), which needs a key"),
        ("      reranker:\n        kind: tei\n        base_url: \"ftp://x\"", "E097", "base_url: \"ftp://x\"", "base_url"),
        ("      reranker:\n        kind: cohere\n        model: m\n        api_key_env: \"sk-abc 123\"", "E097", "api_key_env", "must name an environment variable"),
    ];
    for (yaml, code, at, words) in cases {
        let f = findings(yaml);
        assert!(
            f.iter().all(|(_, _, m)| !m.contains("sk-abc")),
            "a pasted key is never echoed: {f:?}"
        );
        assert!(
            f.iter()
                .any(|(c, l, m)| c == code && l.starts_with(at) && m.contains(words)),
            "{yaml}\n{f:?}"
        );
    }
    // The valid forms: no finding.
    for ok in [
        "      reranker: offline",
        "      candidates: 20\n      top_k: 2\n      reranker: offline",
        "      reranker: {kind: tei, base_url: \"http://127.0.0.1:8080\"}",
        "      reranker: {kind: cohere, model: rerank-v3.5, api_key_env: CO_API_KEY}",
        "      reranker: {kind: jina, model: m, base_url: \"http://127.0.0.1:9\"}",
    ] {
        assert_eq!(findings(ok), vec![], "{ok}");
    }
}
