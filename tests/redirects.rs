//! No request of ragloop follows a redirect (docs/providers.md "Redirects"): for each
//! HTTP client of the crate (openai, anthropic, embeddings, SearxNG, Tavily), a
//! server on 127.0.0.1 answers every request with a redirect to a second server;
//! the second server must receive nothing (so no key reaches it), the call fails at
//! once naming the status and the target's origin, and the planted key appears in
//! no output.
use crate::providers_support::*;
use ragloop::http::CallPolicy;
use ragloop::retrieval::web::WebSearch;
use ragloop::retrieval::Embedder;
use ragloop::runtime::Status;
use ragloop::spec::types::ModelSpec;
use serde_json::json;
use std::time::Duration;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The redirect target (answers anything with 200) and a server redirecting every
/// request to the same path and query on it with `status`.
async fn servers(status: u16, path: &str) -> (MockServer, MockServer) {
    let target = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
        .mount(&target)
        .await;
    let redirecting = MockServer::start().await;
    // `localhost` rather than 127.0.0.1: another origin even by host name.
    let port = target.address().port();
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(status).insert_header(
            "location",
            format!("http://localhost:{port}{path}").as_str(),
        ))
        .mount(&redirecting)
        .await;
    (redirecting, target)
}

async fn received(server: &MockServer) -> usize {
    server.received_requests().await.map_or(0, |r| r.len())
}

/// The checks every client shares: nothing reached the target, the redirecting
/// server was asked once (a redirect is not retried), the message names the status
/// and the target's origin and the fix, never the key nor the target's path.
async fn check(
    err: &str,
    status: u16,
    key: Option<&str>,
    redirecting: &MockServer,
    target: &MockServer,
) {
    assert_eq!(
        received(target).await,
        0,
        "the redirect was followed: {err}"
    );
    assert_eq!(received(redirecting).await, 1, "{err}");
    let origin = format!("http://localhost:{}", target.address().port());
    assert!(err.contains(&format!("HTTP {status}")), "{err}");
    assert!(err.contains(&origin), "{err}");
    assert!(
        err.contains("does not follow redirects") && err.contains("base_url"),
        "{err}"
    );
    assert!(
        !err.contains("?planted="),
        "the full Location is shown: {err}"
    );
    if let Some(k) = key {
        assert!(!err.contains(k), "{err}");
    }
}

fn llm_redirect(provider: &str, status: u16, path: &str) {
    let var = format!("RAGLOOP_TEST_REDIRECT_{}_KEY", provider.to_uppercase());
    let key = format!("sk-{provider}-planted-redirect-4711");
    std::env::set_var(&var, &key);
    rt().block_on(async {
        let (redirecting, target) = servers(status, &format!("{path}?planted={key}")).await;
        let model = format!(
            "provider: {provider}, model: x, base_url: '{}/v1', api_key_env: {var}, temperature: 0, retries: 2, timeout_secs: 5",
            redirecting.uri()
        );
        let p = project(&model, true);
        let r = run_async(&program(&p), "q").await;
        assert_eq!(r.status, Status::Failed);
        let err = r.error.clone().unwrap_or_default();
        check(&err, status, Some(&key), &redirecting, &target).await;
        let all = format!("{:?} {}", r.state, serde_json::to_string(&r.usage).unwrap());
        assert!(!all.contains(&key), "{all}");
    });
}

#[test]
fn anthropic_does_not_follow_a_redirect() {
    llm_redirect("anthropic", 307, "/v1/messages");
}

#[test]
fn openai_does_not_follow_a_redirect() {
    llm_redirect("openai", 308, "/v1/chat/completions");
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

#[tokio::test]
async fn embeddings_do_not_follow_a_redirect() {
    let key = "sk-embed-planted-redirect-4711";
    std::env::set_var("RAGLOOP_TEST_REDIRECT_EMBED_KEY", key);
    let (redirecting, target) = servers(302, &format!("/v1/embeddings?planted={key}")).await;
    let spec: ModelSpec = serde_json::from_value(json!({
        "provider": "openai", "model": "emb", "base_url": format!("{}/v1", redirecting.uri()),
        "api_key_env": "RAGLOOP_TEST_REDIRECT_EMBED_KEY",
    }))
    .unwrap();
    let e = Embedder::from_model("emb", &spec, None, None)
        .unwrap()
        .with_policy(fast());
    let err = e.embed(&["alpha".to_string()]).await.unwrap_err();
    check(&err, 302, Some(key), &redirecting, &target).await;
}

#[tokio::test]
async fn searxng_does_not_follow_a_redirect() {
    let (redirecting, target) = servers(301, "/search?planted=1").await;
    let tool = WebSearch::searxng("web", &redirecting.uri(), fast()).unwrap();
    let err = tool.search("rust", 3).await.unwrap_err();
    check(&err, 301, None, &redirecting, &target).await;
}

#[tokio::test]
async fn tavily_does_not_follow_a_redirect() {
    let key = "tvly-planted-redirect-4711";
    std::env::set_var("RAGLOOP_TEST_REDIRECT_TAVILY_KEY", key);
    let (redirecting, target) = servers(303, &format!("/search?planted={key}")).await;
    let tool = WebSearch::tavily(
        "web",
        "RAGLOOP_TEST_REDIRECT_TAVILY_KEY",
        Some(&redirecting.uri()),
        fast(),
    )
    .unwrap();
    let err = tool.search("rust", 3).await.unwrap_err();
    check(&err, 303, Some(key), &redirecting, &target).await;
}
