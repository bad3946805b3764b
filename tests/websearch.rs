//! Web-search tools against wiremock servers on 127.0.0.1: request shapes, result
//! mapping, and every bad answer a server can give.
use ragloop::http::CallPolicy;
use ragloop::retrieval::web::{web_id, WebSearch};
use serde_json::json;
use std::time::Duration;
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn policy(retries: u32, timeout_ms: u64) -> CallPolicy {
    CallPolicy {
        retries,
        timeout: Duration::from_millis(timeout_ms),
        min_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        ..CallPolicy::default()
    }
}

fn searx(server: &MockServer) -> WebSearch {
    WebSearch::searxng("web", &server.uri(), policy(2, 2000)).unwrap()
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.map_or(0, |r| r.len())
}

#[tokio::test]
async fn searxng_request_and_mapping() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search"))
        .and(query_param("q", "what is a crate? & more"))
        .and(query_param("format", "json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "query": "what is a crate? & more",
            "number_of_results": 4,
            "results": [
                {"url": "https://doc.rust-lang.org/book/ch07-01-packages-and-crates.html",
                 "title": "Packages and Crates", "content": "A crate is the smallest amount of code...",
                 "engine": "duckduckgo", "score": 3.0},
                {"title": "no url here", "content": "skipped"},
                {"url": "https://doc.rust-lang.org/book/ch07-01-packages-and-crates.html",
                 "title": "duplicate", "engine": "bing"},
                {"url": "https://crates.io/", "title": "crates.io", "content": "The Rust community's crate registry"},
                {"url": "https://example.org/third", "title": "Third"}
            ]
        })))
        .mount(&server)
        .await;
    let docs = searx(&server)
        .search("what is a crate? & more", 2)
        .await
        .unwrap();
    assert_eq!(docs.len(), 2);
    let url = "https://doc.rust-lang.org/book/ch07-01-packages-and-crates.html";
    assert_eq!(docs[0].id, web_id(url));
    assert_eq!(
        docs[0].content,
        "Packages and Crates\n\nA crate is the smallest amount of code..."
    );
    assert_eq!(docs[0].metadata["source"], url);
    assert_eq!(docs[0].metadata["title"], "Packages and Crates");
    assert_eq!(docs[0].metadata["engine"], "duckduckgo");
    assert_eq!(docs[1].metadata["source"], "https://crates.io/");
    assert_eq!(docs[1].metadata["engine"], "searxng");
    // Same url, same id, on every call.
    let again = searx(&server)
        .search("what is a crate? & more", 2)
        .await
        .unwrap();
    assert_eq!(again, docs);
}

#[tokio::test]
async fn searxng_base_url_with_a_path() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/searx/search"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .expect(1)
        .mount(&server)
        .await;
    let tool =
        WebSearch::searxng("web", &format!("{}/searx/", server.uri()), policy(0, 2000)).unwrap();
    assert!(tool.search("q", 3).await.unwrap().is_empty());
    // A blank query makes no request.
    assert!(tool.search("   ", 3).await.unwrap().is_empty());
}

async fn searx_failure(resp: ResponseTemplate) -> (String, usize) {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search"))
        .respond_with(resp)
        .mount(&server)
        .await;
    let e = searx(&server).search("rust", 4).await.unwrap_err();
    (e, requests(&server).await)
}

#[tokio::test]
async fn searxng_bad_bodies_fail_at_once_naming_the_tool() {
    let html = ResponseTemplate::new(200).set_body_raw(
        "<!DOCTYPE html><html><body><h1>SearXNG</h1></body></html>",
        "text/html; charset=utf-8",
    );
    let (e, n) = searx_failure(html).await;
    assert!(
        e.starts_with("tool `web`: searxng at http://127.0.0.1:"),
        "{e}"
    );
    assert!(e.contains("HTML page, not JSON"), "{e}");
    assert!(e.contains("search.formats"), "{e}");
    assert_eq!(n, 1, "a bad body is not retried");

    let (e, n) = searx_failure(ResponseTemplate::new(200)).await;
    assert!(e.contains("empty response body"), "{e}");
    assert_eq!(n, 1);

    let (e, _) = searx_failure(
        ResponseTemplate::new(200).set_body_json(json!({"query": "rust", "answers": []})),
    )
    .await;
    assert!(
        e.contains("no `results` list (keys: query, answers)"),
        "{e}"
    );

    let (e, n) = searx_failure(
        ResponseTemplate::new(200).set_body_json(json!({"error": "engine suspended"})),
    )
    .await;
    assert!(e.contains("reported an error: engine suspended"), "{e}");
    assert_eq!(n, 1);

    let (e, _) = searx_failure(
        ResponseTemplate::new(200).set_body_raw("{\"results\": [", "application/json"),
    )
    .await;
    assert!(e.contains("not JSON"), "{e}");
}

#[tokio::test]
async fn searxng_403_names_the_json_setting_and_is_not_retried() {
    let (e, n) = searx_failure(
        ResponseTemplate::new(403)
            .set_body_raw("<html><body>403 Forbidden</body></html>", "text/html"),
    )
    .await;
    assert!(e.contains("HTTP 403"), "{e}");
    assert!(e.contains("403 Forbidden"), "{e}");
    assert!(e.contains("add `json` to `search.formats`"), "{e}");
    assert_eq!(n, 1);
}

#[tokio::test]
async fn searxng_429_with_retry_after_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "0"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"results": [{"url": "https://x.example/", "title": "X"}]})),
        )
        .with_priority(2)
        .mount(&server)
        .await;
    let docs = searx(&server).search("rust", 4).await.unwrap();
    assert_eq!(docs.len(), 1);
    assert_eq!(requests(&server).await, 2);
}

#[tokio::test]
async fn searxng_500s_are_retried_then_reported() {
    let (e, n) = searx_failure(ResponseTemplate::new(502).set_body_string("Bad Gateway")).await;
    assert!(
        e.contains("HTTP 502: Bad Gateway (gave up after 3 attempts)"),
        "{e}"
    );
    assert_eq!(n, 3);
}

#[tokio::test]
async fn searxng_timeout_is_retried_then_reported() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"results": []}))
                .set_delay(Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let tool = WebSearch::searxng("web", &server.uri(), policy(1, 150)).unwrap();
    let t = std::time::Instant::now();
    let e = tool.search("rust", 4).await.unwrap_err();
    assert!(e.contains("timeout"), "{e}");
    assert!(e.contains("gave up after 2 attempts"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn searxng_unreachable_server() {
    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tool =
        WebSearch::searxng("web", &format!("http://127.0.0.1:{port}"), policy(1, 500)).unwrap();
    let e = tool.search("rust", 4).await.unwrap_err();
    assert!(e.contains("cannot connect"), "{e}");
}

#[test]
fn bad_base_urls_are_refused() {
    let e = WebSearch::searxng("web", "localhost:8888", policy(0, 100))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("tool `web`: base_url `localhost:8888`"),
        "{e}"
    );
    assert!(WebSearch::searxng("web", "file:///etc", policy(0, 100)).is_err());
}

const KEY: &str = "tvly-test-planted-key-0123456789";

fn tavily(server: &MockServer, var: &str) -> WebSearch {
    std::env::set_var(var, KEY);
    WebSearch::tavily("web", var, Some(&server.uri()), policy(1, 2000)).unwrap()
}

#[tokio::test]
async fn tavily_request_shape_and_mapping() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/search"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({"query": "rust ownership", "max_results": 3})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "query": "rust ownership",
            "answer": null,
            "results": [
                {"title": "Ownership", "url": "https://doc.rust-lang.org/book/ch04-01-what-is-ownership.html",
                 "content": "Ownership is a set of rules...", "score": 0.93, "raw_content": null},
                {"title": "No url", "content": "x", "score": 0.9},
                {"title": "Borrowing", "url": "https://doc.rust-lang.org/book/ch04-02-references-and-borrowing.html",
                 "content": "A reference is like a pointer...", "score": 0.81}
            ],
            "response_time": 1.2
        })))
        .expect(1)
        .mount(&server)
        .await;
    let docs = tavily(&server, "RAGLOOP_TEST_TAVILY_A")
        .search("rust ownership", 3)
        .await
        .unwrap();
    assert_eq!(docs.len(), 2);
    assert_eq!(
        docs[0].metadata["source"],
        "https://doc.rust-lang.org/book/ch04-01-what-is-ownership.html"
    );
    assert_eq!(docs[0].metadata["engine"], "tavily");
    assert_eq!(docs[0].metadata["score"], 0.93);
    assert_eq!(docs[1].metadata["rank"], 3);
    assert_eq!(
        docs[0].content,
        "Ownership\n\nOwnership is a set of rules..."
    );
}

#[tokio::test]
async fn tavily_caps_max_results_and_query_length() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"results": []})))
        .mount(&server)
        .await;
    let q = "ownership ".repeat(60);
    tavily(&server, "RAGLOOP_TEST_TAVILY_B")
        .search(&q, 50)
        .await
        .unwrap();
    let reqs = server.received_requests().await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(body["max_results"], 20);
    assert!(body["query"].as_str().unwrap().chars().count() <= 400);
}

#[tokio::test]
async fn tavily_401_shows_the_server_message_never_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "detail": {"error": format!("Unauthorized: invalid API key {KEY}")}
        })))
        .mount(&server)
        .await;
    let tool = tavily(&server, "RAGLOOP_TEST_TAVILY_C");
    let e = tool.search("rust", 3).await.unwrap_err();
    assert!(e.contains("HTTP 401"), "{e}");
    assert!(e.contains("Unauthorized: invalid API key"), "{e}");
    assert!(e.contains("check the Tavily API key"), "{e}");
    assert!(!e.contains(KEY), "{e}");
    assert!(!format!("{tool:?}").contains(KEY));
    assert_eq!(requests(&server).await, 1, "a 401 is not retried");
}

#[tokio::test]
async fn tavily_200_with_an_error_object() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"detail": {"error": "Usage limit exceeded"}})),
        )
        .mount(&server)
        .await;
    let e = tavily(&server, "RAGLOOP_TEST_TAVILY_D")
        .search("rust", 3)
        .await
        .unwrap_err();
    assert!(e.contains("reported an error"), "{e}");
    assert!(e.contains("Usage limit exceeded"), "{e}");
}

#[tokio::test]
async fn tavily_500_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("oops"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"results": [{"url": "https://ok.example/", "title": "OK"}]})),
        )
        .with_priority(2)
        .mount(&server)
        .await;
    let docs = tavily(&server, "RAGLOOP_TEST_TAVILY_E")
        .search("rust", 3)
        .await
        .unwrap();
    assert_eq!(docs[0].metadata["source"], "https://ok.example/");
    assert_eq!(requests(&server).await, 2);
}

#[test]
fn tavily_missing_key_is_reported_up_front() {
    std::env::remove_var("RAGLOOP_TEST_TAVILY_UNSET");
    let e = WebSearch::tavily("web", "RAGLOOP_TEST_TAVILY_UNSET", None, policy(0, 100))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "tool `web`: the Tavily API key is missing: set the environment variable RAGLOOP_TEST_TAVILY_UNSET"
    );
    std::env::set_var("RAGLOOP_TEST_TAVILY_EMPTY", "  ");
    assert!(WebSearch::tavily("web", "RAGLOOP_TEST_TAVILY_EMPTY", None, policy(0, 100)).is_err());
}
