//! graphs/crag-web.yaml end to end: `ragloop run` on a copy of the shipped spec whose
//! `web` tool points at a mock SearxNG (or Tavily) server on 127.0.0.1. The offline
//! grader's `strict_grader` variant rejects every book passage, so the run must search
//! the web and answer from the web result, citing its url.
use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const URL: &str = "https://example.org/cargo/commands/cargo-check";
const KEY: &str = "tvly-planted-e2e-key-98765";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A cache shared by the tests of this file, with the book indexed once.
fn cache() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("crag-web-cache");
        std::env::set_var("RAGLOOP_CACHE_DIR", &dir);
        let book = ragloop::retrieval::resolve_corpus("rust-docs:book", Path::new(".")).unwrap();
        ragloop::retrieval::Index::open_or_build(
            &book,
            None,
            &ragloop::retrieval::IndexOptions::default(),
        )
        .unwrap();
        dir
    })
}

/// The shipped spec with its web tool (and the Tavily variant) pointed at `base`.
fn spec_copy(dir: &Path, base: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("graphs/crag-web.yaml")).unwrap();
    let text = text
        .replace("root: ..", &format!("root: {}", repo().display()))
        .replace("base_url: http://127.0.0.1:8888", &format!("base_url: {base}"))
        .replace(
            "{ kind: tavily, api_key_env: TAVILY_API_KEY, top_k: 4 }",
            &format!("{{ kind: tavily, api_key_env: TAVILY_API_KEY, top_k: 4, base_url: \"{base}\", retries: 0 }}"),
        )
        .replace("timeout_secs: 20", "timeout_secs: 2");
    assert!(text.contains(base));
    let p = dir.join("crag-web.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

fn web_result() -> Value {
    json!({"query": "cargo check", "results": [
        {"url": URL, "title": "cargo check - The Cargo Book",
         "content": "cargo check checks a local package and all of its dependencies for errors. It compiles the code without producing an executable, so cargo check is much faster than cargo build.",
         "engine": "duckduckgo", "score": 1.0},
        {"title": "result without url", "content": "cargo check cargo check"}
    ]})
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    trace: String,
}

async fn ragloop(spec: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let trace = spec.with_file_name("trace.jsonl");
    let mut cmd = Command::cargo_bin("ragloop").unwrap();
    cmd.arg("run")
        .arg(spec)
        .args(args)
        .arg("--trace")
        .arg(&trace)
        .env("RAGLOOP_CACHE_DIR", cache())
        .env_remove("TAVILY_API_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        trace: std::fs::read_to_string(&trace).unwrap_or_default(),
    }
}

const Q: &str = "What does cargo check do?";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grader_rejects_everything_and_the_answer_cites_the_web_url() {
    cache();
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search"))
        .and(query_param("format", "json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(web_result()))
        .expect(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_copy(dir.path(), &server.uri());
    let r = ragloop(
        &spec,
        &["--variant", "strict_grader", "--question", Q, "--json"],
        &[],
    )
    .await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["status"], "generated");
    let answer = v["answer"].as_str().unwrap();
    assert!(answer.contains(&format!("[{URL}]")), "{answer}");
    assert_eq!(v["sources"], json!([URL]));
    assert_eq!(
        v["path"],
        json!([
            "retrieve",
            "grade_documents",
            "web_query",
            "web_search",
            "generate",
            "grade_answer"
        ])
    );
    assert_eq!(v["state"]["knowledge"], "web");
    let doc = &v["state"]["documents"][0];
    assert_eq!(doc["id"], ragloop::retrieval::web::web_id(URL));
    assert_eq!(doc["metadata"]["engine"], "duckduckgo");
    // The query sent is the web query the run wrote to the state.
    let reqs = server.received_requests().await.unwrap();
    let sent: String = reqs[0]
        .url
        .query_pairs()
        .find(|(k, _)| k == "q")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    assert_eq!(v["state"]["web_query"], sent.as_str());
    assert!(r.trace.contains("\"web_search\""), "{}", r.trace);
    // The tool step's record carries the documents the search returned.
    let step = r
        .trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["node"] == "web_search")
        .unwrap();
    assert_eq!(
        step["documents"],
        json!([{"id": ragloop::retrieval::web::web_id(URL), "source": URL}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relevant_documentation_never_reaches_the_web() {
    cache();
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(web_result()))
        .expect(0)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_copy(dir.path(), &server.uri());
    let r = ragloop(&spec, &["--question", Q, "--json"], &[]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["state"]["knowledge"], "documentation");
    assert!(v["answer"]
        .as_str()
        .unwrap()
        .contains("[ch01-03-hello-cargo.html]"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_web_results_fall_back() {
    cache();
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_copy(dir.path(), &server.uri());
    let r = ragloop(
        &spec,
        &["--variant", "strict_grader", "--question", Q, "--json"],
        &[],
    )
    .await;
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["status"], "fallback");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_server_answering_html_fails_the_run_naming_the_tool() {
    cache();
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "<!doctype html><html><body>searx</body></html>",
            "text/html",
        ))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_copy(dir.path(), &server.uri());
    let r = ragloop(&spec, &["--variant", "strict_grader", "--question", Q], &[]).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("node `web_search`: tool `web`: searxng at http://127.0.0.1:"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("HTML page, not JSON"), "{}", r.stderr);
    assert!(r.stdout.contains("Status: failed"), "{}", r.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tavily_variant_key_checked_up_front_and_never_shown() {
    cache();
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_copy(dir.path(), &server.uri());
    // No key: refused before the first node runs.
    // A usage error (exit 2), like a model's missing key.
    let r = ragloop(&spec, &["--variant", "tavily", "--question", Q], &[]).await;
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("tool `web`: the Tavily API key variable TAVILY_API_KEY (named by tools.web.api_key_env) is not set"),
        "{}",
        r.stderr
    );
    assert!(r.trace.is_empty(), "{}", r.trace);
    // A key the server rejects, echoing it back: the message is shown, the key never.
    Mock::given(method("POST"))
        .and(path("/search"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "detail": {"error": format!("Unauthorized: invalid API key {KEY}")}
        })))
        .mount(&server)
        .await;
    let args = [
        "--variant",
        "tavily",
        "--question",
        Q,
        "--set",
        "max_generations=1",
    ];
    let r = ragloop(&spec, &args, &[("TAVILY_API_KEY", KEY)]).await;
    // The grader accepts the book's passages, so the web is not needed...
    assert_eq!(r.code, 0, "{}", r.stderr);
    // ...unless the grader is strict.
    let text = std::fs::read_to_string(&spec).unwrap().replace(
        "relevance_threshold: 0.35",
        "relevance_threshold: 0.35\n      min_overlap: 1000",
    );
    std::fs::write(&spec, text).unwrap();
    let r = ragloop(
        &spec,
        &[
            "--variant",
            "tavily",
            "--question",
            Q,
            "--json",
            "--verbose",
        ],
        &[("TAVILY_API_KEY", KEY)],
    )
    .await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("HTTP 401") || r.stdout.contains("HTTP 401"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    for out in [&r.stdout, &r.stderr, &r.trace] {
        assert!(!out.contains(KEY), "key leaked: {out}");
    }
    let reqs = server.received_requests().await.unwrap();
    let auth = reqs
        .iter()
        .filter_map(|r| r.headers.get("authorization"))
        .next()
        .unwrap();
    assert_eq!(auth.to_str().unwrap(), format!("Bearer {KEY}"));
}
