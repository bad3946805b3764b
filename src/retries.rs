//! Retry events: each retry a retry loop is about to make, reported as it happens to
//! whoever runs the call. The loops are [`crate::http::send_checked`] (network chat
//! providers, embeddings, web search) and [`crate::providers::retry::Retrying`] (the
//! providers that do not retry themselves); the runtime shows the events under
//! `--verbose`, on the eval progress bar, and records them in the trace (the
//! `retries` list of a step).
//!
//! The route is the async task, so no caller between the runtime and the retry loop
//! has to pass anything along: the runtime runs a node's future inside [`in_node`]
//! (each `map` item's calls inside [`in_item`]), and a retry loop calls [`report`],
//! which fills in the node and item of the innermost enclosing scope and hands the
//! event to that scope's sink. Outside any scope (an index being built, a library
//! caller that observes nothing) [`report`] does nothing.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use ragloop::retries::{in_item, in_node, report, RetryEvent};
//! use std::sync::{Arc, Mutex};
//! let seen: Arc<Mutex<Vec<RetryEvent>>> = Arc::default();
//! let sink = { let seen = Arc::clone(&seen); Arc::new(move |e| seen.lock().unwrap().push(e)) };
//! in_node(sink, "grade_documents", in_item(Some(2), async {
//!     report(2, 3, "HTTP 500: overloaded", std::time::Duration::from_millis(500));
//! })).await;
//! let line = seen.lock().unwrap()[0].to_string();
//! assert_eq!(line, "retrying grade_documents[2] (attempt 2/3) after HTTP 500");
//! # });
//! ```
use serde::Serialize;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// One retry about to be made.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RetryEvent {
    /// The node whose call is retried.
    pub node: String,
    /// The `map` item (0-based) whose call is retried; absent for other nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
    /// The attempt about to be made (2 for the first retry).
    pub attempt: u32,
    /// Most attempts the call may make (its `retries` + 1).
    pub attempts: u32,
    /// Why the previous attempt failed, in a few words ([`short_cause`]):
    /// `HTTP 500`, `timeout (60 s)`, `connection reset`.
    pub after: String,
    /// The wait before the attempt, in milliseconds.
    pub delay_ms: u64,
}

impl std::fmt::Display for RetryEvent {
    /// `retrying grade_documents[2] (attempt 2/3) after HTTP 500` (no `[i]` outside
    /// `map` nodes).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "retrying {}", self.node)?;
        if let Some(i) = self.item {
            write!(f, "[{i}]")?;
        }
        write!(
            f,
            " (attempt {}/{}) after {}",
            self.attempt, self.attempts, self.after
        )
    }
}

/// Where the events of a scope go. Called on the task that retries, so it must be
/// quick (push to a channel, set a progress message).
pub type RetrySink = Arc<dyn Fn(RetryEvent) + Send + Sync>;

#[derive(Clone)]
struct Scope {
    sink: RetrySink,
    node: Arc<str>,
    item: Option<usize>,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `fut` with its retries reported to `sink` as retries of node `node`.
pub async fn in_node<F: Future>(sink: RetrySink, node: &str, fut: F) -> F::Output {
    let scope = Scope {
        sink,
        node: Arc::from(node),
        item: None,
    };
    SCOPE.scope(scope, fut).await
}

/// Runs `fut` with its retries reported as retries of `map` item `item` of the
/// enclosing node; just `fut` when `item` is `None` or there is no enclosing scope.
pub async fn in_item<F: Future>(item: Option<usize>, fut: F) -> F::Output {
    let scope = item.and_then(|i| {
        SCOPE
            .try_with(|s| Scope {
                item: Some(i),
                ..s.clone()
            })
            .ok()
    });
    match scope {
        Some(s) => SCOPE.scope(s, fut).await,
        None => fut.await,
    }
}

/// Reports that attempt `attempt` of at most `attempts` is about to be made, after
/// `delay`, because the previous one failed with `cause` (a full error message; it
/// is shortened with [`short_cause`]). Does nothing outside [`in_node`].
pub fn report(attempt: u32, attempts: u32, cause: &str, delay: Duration) {
    let _ = SCOPE.try_with(|s| {
        (s.sink)(RetryEvent {
            node: s.node.to_string(),
            item: s.item,
            attempt,
            attempts,
            after: short_cause(cause),
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        })
    });
}

/// A transient failure's message in a few words, for a retry line:
/// - a timeout (`no answer within 60 s (timeout)`, `... timed out`): `timeout (60 s)`;
/// - an HTTP status (`HTTP 503: overloaded`): `HTTP 503` (`HTTP 200 (body cut short)`
///   for a body that broke off);
/// - a connection fault: `connection reset`, `connection refused`, `connection closed`;
/// - anything else: the message, cut to 80 characters.
pub fn short_cause(message: &str) -> String {
    let m = message.trim();
    let lower = m.to_ascii_lowercase();
    if lower.contains("(timeout)") || lower.contains("timed out") {
        let secs = lower
            .find("within ")
            .and_then(|i| lower[i + "within ".len()..].split(" s").next())
            .filter(|s| s.parse::<f64>().is_ok());
        return match secs {
            Some(s) => format!("timeout ({s} s)"),
            None => "timeout".into(),
        };
    }
    let status = m
        .strip_prefix("HTTP ")
        .and_then(|r| r.get(..3))
        .filter(|s| s.bytes().all(|b| b.is_ascii_digit()));
    if let Some(s) = status {
        return if lower.contains("body cut short") {
            format!("HTTP {s} (body cut short)")
        } else {
            format!("HTTP {s}")
        };
    }
    if lower.contains("reset") {
        "connection reset".into()
    } else if lower.contains("refused") {
        "connection refused".into()
    } else if lower.contains("connection closed")
        || lower.contains("incompletemessage")
        || lower.contains("connection was closed")
    {
        "connection closed".into()
    } else if m.chars().count() > 80 {
        format!("{}...", m.chars().take(80).collect::<String>())
    } else {
        m.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn causes() {
        assert_eq!(
            short_cause("no answer within 60 s (timeout)"),
            "timeout (60 s)"
        );
        assert_eq!(
            short_cause("HTTP 200: body not received within 0.5 s (timeout)"),
            "timeout (0.5 s)"
        );
        assert_eq!(
            short_cause("HTTP 500: internal error (details)"),
            "HTTP 500"
        );
        assert_eq!(
            short_cause("HTTP 200: body cut short: error decoding"),
            "HTTP 200 (body cut short)"
        );
        assert_eq!(
            short_cause("request failed: error sending request: connection reset by peer"),
            "connection reset"
        );
        assert_eq!(
            short_cause("cannot connect: tcp connect error: Connection refused (os error 111)"),
            "connection refused"
        );
        assert_eq!(short_cause("the fixture said no"), "the fixture said no");
        assert_eq!(short_cause(&"x".repeat(100)).chars().count(), 83);
    }

    #[test]
    fn scopes_nest_and_nothing_is_reported_outside_them() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let seen: Arc<Mutex<Vec<RetryEvent>>> = Arc::default();
        let s = Arc::clone(&seen);
        let sink: RetrySink = Arc::new(move |e| s.lock().unwrap().push(e));
        rt.block_on(async {
            report(2, 3, "HTTP 500", Duration::ZERO);
            in_item(Some(1), async { report(2, 3, "HTTP 500", Duration::ZERO) }).await;
            in_node(sink, "grade", async {
                let a = in_item(Some(0), async {
                    report(2, 3, "HTTP 429", Duration::from_millis(1500));
                });
                let b = in_item(Some(1), async {
                    tokio::task::yield_now().await;
                    report(3, 3, "no answer within 1 s (timeout)", Duration::ZERO);
                });
                futures::future::join(a, b).await;
                report(2, 2, "connection reset", Duration::ZERO);
            })
            .await;
        });
        let lines: Vec<String> = seen.lock().unwrap().iter().map(|e| e.to_string()).collect();
        assert_eq!(
            lines,
            [
                "retrying grade[0] (attempt 2/3) after HTTP 429",
                "retrying grade[1] (attempt 3/3) after timeout (1 s)",
                "retrying grade (attempt 2/2) after connection reset",
            ]
        );
        assert_eq!(seen.lock().unwrap()[0].delay_ms, 1500);
    }
}
