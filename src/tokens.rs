//! Token events: the text deltas of an `llm` node's answer, handed as they arrive to
//! whoever listens to the run ([`crate::runtime::Observer::token`]).
//!
//! The route is the async task, as for [`crate::retries`]: the runtime runs a node's
//! future inside [`in_node`] when its observer wants tokens
//! ([`crate::runtime::Observer::wants_tokens`]); a provider asks
//! [`crate::providers::streams`] whether the call it is making should stream, and hands each text delta to [`emit`]. Outside
//! any scope (nobody listens, a library caller, an eval) nothing streams: the
//! providers make their ordinary non-streamed calls.
//!
//! What streams: a text (non-structured) call of an `llm` node whose provider
//! streams (`openai`, `anthropic`). Structured-output calls keep their validated
//! non-streamed path, and `map` items never stream (their items run concurrently, and
//! a token event names the node only). A text answer that did not stream (a cache
//! hit, a cassette replay, the `offline`/`scripted` providers, a server that answered
//! `stream: true` with a plain JSON body) is handed over whole, as one token event,
//! when the call ends: the runtime compares [`emitted`] before and after the call.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use ragloop::tokens::{emit, in_node, listening};
//! use std::sync::{Arc, Mutex};
//! let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
//! let sink = { let seen = Arc::clone(&seen); Arc::new(move |n: &str, t: &str| seen.lock().unwrap().push((n.into(), t.into()))) };
//! assert!(!listening());
//! in_node(sink, "generate", async { assert!(listening()); emit("Hel"); emit("lo"); }).await;
//! let text: String = seen.lock().unwrap().iter().map(|(_, t)| t.as_str()).collect();
//! assert_eq!(text, "Hello");
//! # });
//! ```
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where the token events of a scope go: `(node, text_delta)`. Called on the task
/// that makes the call, so it must be quick (push to a channel).
pub type TokenSink = Arc<dyn Fn(&str, &str) + Send + Sync>;

#[derive(Clone)]
struct Scope {
    sink: TokenSink,
    node: Arc<str>,
    emitted: Arc<AtomicU64>,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `fut` with the text deltas of its calls handed to `sink` as tokens of node
/// `node`.
pub async fn in_node<F: Future>(sink: TokenSink, node: &str, fut: F) -> F::Output {
    let scope = Scope {
        sink,
        node: Arc::from(node),
        emitted: Arc::default(),
    };
    SCOPE.scope(scope, fut).await
}

/// Whether someone listens for tokens on this task (inside [`in_node`]).
pub fn listening() -> bool {
    SCOPE.try_with(|_| ()).is_ok()
}

/// Hands a text delta to the listener of this task; does nothing outside
/// [`in_node`] or for an empty delta.
pub fn emit(text: &str) {
    if text.is_empty() {
        return;
    }
    let _ = SCOPE.try_with(|s| {
        s.emitted.fetch_add(1, Ordering::Relaxed);
        (s.sink)(&s.node[..], text)
    });
}

/// How many token events this task's scope has emitted so far (0 outside
/// [`in_node`]): a call that emitted none did not stream.
pub fn emitted() -> u64 {
    SCOPE
        .try_with(|s| s.emitted.load(Ordering::Relaxed))
        .unwrap_or(0)
}
