//! Threads over HTTP, shaped like LangGraph Server's: `POST /threads`,
//! `GET /threads/{id}`, `GET /threads/{id}/state`, `GET /threads/{id}/history`, and
//! the thread part of `POST /threads/{id}/runs/wait|stream` (the checks and the run,
//! through [`crate::checkpoint::prepare`] and [`crate::checkpoint::run_thread`]).
//!
//! Policies (docs/serve.md "Threads"):
//! - **One run per thread at a time**: a second run (new or resume) on a thread
//!   whose run is in flight *in this server* is refused with 409 `thread_busy`, not
//!   queued. A stored `running` status without a run in flight is a run whose
//!   server died (kill -9): a resume continues it; a new run is refused (409
//!   `thread_busy`, "resume it").
//! - **Threads do not appear by accident**: a new run on a thread the store does
//!   not have is a 404 `unknown_thread` unless the request says
//!   `"if_not_exists": "create"` (LangGraph's default is the same reject).
//! - **History is newest first** (as LangGraph's), `?limit=N` checkpoints (default
//!   10).
//! - Every [`ThreadError::code`] has one status ([`thread_error`]).
use super::error::ApiError;
use super::App;
use crate::checkpoint::{Checkpoint, Checkpointer, ThreadError, ThreadInfo};
use crate::runtime::Status;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Threads with a run in flight in this server.
#[derive(Default)]
pub struct Busy(Mutex<HashSet<String>>);

/// A thread claimed for one run; released when dropped.
pub struct BusyGuard {
    busy: Arc<Busy>,
    thread: String,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        lock(&self.busy.0).remove(&self.thread);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Busy {
    /// Claims `thread` for a run; 409 `thread_busy` when a run of it is in flight.
    ///
    /// # Errors
    /// [`ApiError`] 409 `thread_busy`.
    pub fn claim(self: &Arc<Self>, thread: &str) -> Result<BusyGuard, ApiError> {
        if !lock(&self.0).insert(thread.to_string()) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "thread_busy",
                format!("thread `{thread}` has a run in flight; a second run is refused, not queued (retry when it ended: GET /threads/{thread})"),
            ));
        }
        Ok(BusyGuard {
            busy: Arc::clone(self),
            thread: thread.to_string(),
        })
    }

    /// Whether a run of `thread` is in flight.
    pub fn is_busy(&self, thread: &str) -> bool {
        lock(&self.0).contains(thread)
    }
}

/// The HTTP status of each [`ThreadError::code`]: 422 `bad_thread_id`,
/// `unknown_node`, `invalid_patch`; 404 `unknown_thread`; 409 `nothing_to_resume`,
/// `run_finished`, `thread_busy`, `other_spec`, `spec_changed`; 503
/// `checkpoint_store` (the store failed: not the client's fault).
pub fn status_of(e: &ThreadError) -> StatusCode {
    match e {
        ThreadError::BadId(_) | ThreadError::UnknownNode { .. } | ThreadError::Patch(_) => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ThreadError::UnknownThread(_) => StatusCode::NOT_FOUND,
        ThreadError::NothingToResume(_)
        | ThreadError::Finished { .. }
        | ThreadError::Unfinished { .. }
        | ThreadError::OtherSpec { .. }
        | ThreadError::ChangedSpec { .. } => StatusCode::CONFLICT,
        ThreadError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// A [`ThreadError`] as an error body: its code, [`status_of`], and a message in
/// the API's words (the library's name `ragloop run` flags).
pub fn thread_error(e: ThreadError) -> ApiError {
    let message = match &e {
        ThreadError::UnknownThread(t) => {
            format!("no thread `{t}` to resume (POST /threads creates one)")
        }
        ThreadError::Finished {
            thread,
            run,
            status,
        } => format!("thread `{thread}`: run {run} ended with status {status}; nothing to resume (send `input` without `command` for a new run on the thread)"),
        ThreadError::Unfinished {
            thread,
            run,
            status,
            paused_before,
        } => format!(
            "thread `{thread}`: run {run} is {status}{}; continue it with `\"command\": {{\"resume\": true}}`",
            match (paused_before, *status) {
                (Some(n), _) => format!(" (paused before node `{n}`)"),
                (None, "running") => " (the server running it stopped)".into(),
                _ => String::new(),
            }
        ),
        ThreadError::ChangedSpec {
            thread,
            run,
            was,
            now,
        } => format!("thread `{thread}`: the spec changed since run {run} started (fingerprint {was} then, {now} now: its file, a prompt or a schema was edited and reloaded, or model overrides differ); resume with the same spec, or start a new run"),
        ThreadError::Patch(p) => format!("command.update: {p}"),
        ThreadError::UnknownNode { .. } => format!("interrupt_before: {e}"),
        e => e.to_string(),
    };
    ApiError::new(status_of(&e), e.code(), message)
}

/// 503 `checkpoints_unavailable`: the server has no store.
fn no_store(why: &str) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "checkpoints_unavailable",
        format!("this server has no checkpoint store ({why}); start it with --checkpoints FILE|postgres://..."),
    )
}

impl App {
    /// The checkpoint store, or 503 `checkpoints_unavailable`.
    ///
    /// # Errors
    /// [`ApiError`] 503.
    pub fn store(&self) -> Result<Arc<dyn Checkpointer>, ApiError> {
        self.checkpoints.clone().map_err(|why| no_store(&why))
    }
}

/// Runs a blocking store call off the async workers.
///
/// # Errors
/// 500 `internal` when the call panicked.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("a checkpoint store call stopped unexpectedly: {e}"),
        )
    })
}

/// The thread's summary, 404 `unknown_thread` when the store has none.
async fn info(store: &Arc<dyn Checkpointer>, thread: &str) -> Result<ThreadInfo, ApiError> {
    check_id(thread)?;
    let s = Arc::clone(store);
    let t = thread.to_string();
    blocking(move || s.thread(&t))
        .await?
        .map_err(|e| thread_error(e.into()))?
        .ok_or_else(|| unknown(thread))
}

/// 404 `unknown_thread`.
pub fn unknown(thread: &str) -> ApiError {
    ApiError::not_found(
        "unknown_thread",
        format!("no thread `{thread}` (POST /threads creates one)"),
    )
}

/// 422 `bad_thread_id` unless the id is 1 to 256 bytes without control characters
/// (the rule of [`crate::checkpoint::prepare`]).
///
/// # Errors
/// [`ApiError`] 422.
pub fn check_id(thread: &str) -> Result<(), ApiError> {
    if thread.is_empty() || thread.len() > 256 || thread.chars().any(char::is_control) {
        return Err(thread_error(ThreadError::BadId(thread.to_string())));
    }
    Ok(())
}

/// Unix milliseconds as RFC 3339 UTC (`2026-12-01T18:22:50.123Z`).
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// A thread's status as LangGraph names them: `busy` (a run in flight here),
/// `idle` (no run, or the latest ended: generated, exhausted, fallback, limit),
/// `interrupted` (paused, cancelled, or its server died mid-run: resumable),
/// `error` (the latest run failed: resumable, or a new run).
fn thread_status(info: &ThreadInfo, busy: bool) -> &'static str {
    if busy {
        return "busy";
    }
    match info.latest.as_ref().map(|r| r.status.status) {
        None => "idle",
        Some(None | Some(Status::Interrupted)) => "interrupted",
        Some(Some(Status::Failed)) => "error",
        Some(Some(_)) => "idle",
    }
}

fn thread_json(info: &ThreadInfo, busy: bool) -> Value {
    let updated = info
        .latest
        .as_ref()
        .map_or(info.created_ms, |r| r.updated_ms);
    json!({
        "thread_id": info.id,
        "created_at": rfc3339(info.created_ms),
        "updated_at": rfc3339(updated),
        "metadata": {},
        "status": thread_status(info, busy),
        "run": info.latest.as_ref().map(|r| json!({
            "run": r.run,
            "status": r.status.as_str(),
            "paused_before": r.status.paused_before,
            "error": r.status.error,
            "spec": {"name": r.spec.name, "variant": r.spec.variant},
            "started_at": rfc3339(r.started_ms),
            "updated_at": rfc3339(r.updated_ms),
        })),
    })
}

/// One checkpoint as `GET /threads/{id}/state` and `/history` give it.
fn state_json(c: &Checkpoint) -> Value {
    let s = &c.snapshot;
    json!({
        "values": s.state,
        "next": s.next.iter().collect::<Vec<_>>(),
        "step": s.step,
        "checkpoint": {"thread_id": c.thread, "checkpoint_id": c.seq.to_string()},
        "metadata": {"source": c.source.as_str(), "step": s.step, "run": c.run.run},
        "created_at": rfc3339(c.created_ms),
        "run": c.run.run,
        "status": c.run.status.as_str(),
        "paused_before": c.run.status.paused_before,
        "path": s.path,
        "iterations": s.iterations,
        "usage": s.usage,
    })
}

/// The body of `POST /threads`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateRequest {
    #[serde(default)]
    thread_id: Option<String>,
    /// Accepted and not stored.
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<Value>,
    #[serde(default)]
    if_exists: Option<IfExists>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum IfExists {
    Raise,
    DoNothing,
}

/// `POST /threads`: creates a thread (`thread_id` given or a fresh UUID).
pub async fn create(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    match create_inner(&app, &headers, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn create_inner(
    app: &Arc<App>,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let store = app.store()?;
    let bytes = super::routes::read_body(headers, body, app.max_body_bytes).await?;
    let req: CreateRequest = if bytes.iter().all(u8::is_ascii_whitespace) {
        CreateRequest::default()
    } else {
        super::routes::parse_json(&bytes)?
    };
    let id = req.thread_id.unwrap_or_else(super::routes::run_id);
    check_id(&id)?;
    let (s, t) = (Arc::clone(&store), id.clone());
    let created = blocking(move || s.create_thread(&t))
        .await?
        .map_err(|e| thread_error(e.into()))?;
    if !created && req.if_exists.unwrap_or(IfExists::Raise) == IfExists::Raise {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "thread_exists",
            format!("thread `{id}` exists (send \"if_exists\": \"do_nothing\" to get it instead)"),
        ));
    }
    let info = info(&store, &id).await?;
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((code, Json(thread_json(&info, app.busy.is_busy(&id)))).into_response())
}

/// `GET /threads/{thread_id}`.
pub async fn get(State(app): State<Arc<App>>, Path(thread): Path<String>) -> Response {
    let r = async {
        let info = info(&app.store()?, &thread).await?;
        Ok::<_, ApiError>(Json(thread_json(&info, app.busy.is_busy(&thread))))
    };
    match r.await {
        Ok(j) => j.into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /threads/{thread_id}/state`: the latest checkpoint (of the latest run).
pub async fn state(State(app): State<Arc<App>>, Path(thread): Path<String>) -> Response {
    let r = async {
        let store = app.store()?;
        info(&store, &thread).await?;
        let t = thread.clone();
        let latest = blocking(move || store.latest(&t))
            .await?
            .map_err(|e| thread_error(e.into()))?;
        Ok::<_, ApiError>(match latest {
            Some(c) => state_json(&c),
            None => json!({
                "values": {}, "next": [], "step": 0, "checkpoint": null, "metadata": null,
                "created_at": null, "run": null, "status": null, "paused_before": null,
                "path": [], "iterations": 0, "usage": null,
            }),
        })
    };
    match r.await {
        Ok(j) => Json(j).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /threads/{thread_id}/history?limit=N`: checkpoints, newest first.
pub async fn history(
    State(app): State<Arc<App>>,
    Path(thread): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let r = async {
        let limit = history_limit(query.as_deref())?;
        let store = app.store()?;
        info(&store, &thread).await?;
        let t = thread.clone();
        let all = blocking(move || store.history(&t))
            .await?
            .map_err(|e| thread_error(e.into()))?;
        Ok::<_, ApiError>(Value::Array(
            all.iter().rev().take(limit).map(state_json).collect(),
        ))
    };
    match r.await {
        Ok(j) => Json(j).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `limit` of the history query: 1 or more, default 10; any other parameter is a
/// 422.
fn history_limit(query: Option<&str>) -> Result<usize, ApiError> {
    let mut limit = 10;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "limit" => match v.parse::<usize>() {
                Ok(n) if n > 0 => limit = n,
                _ => {
                    return Err(ApiError::unprocessable(
                        "invalid_request",
                        format!("query `limit`: {v:?} is not a positive whole number"),
                    ))
                }
            },
            _ => {
                return Err(ApiError::unprocessable(
                    "invalid_request",
                    format!("unknown query parameter `{k}` (history takes `limit`)"),
                ))
            }
        }
    }
    Ok(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_798_734_599_999), "2026-12-31T16:29:59.999Z");
    }

    #[test]
    fn every_thread_error_is_a_client_status_but_the_store() {
        let e = ThreadError::BadId(String::new());
        assert_eq!(status_of(&e), StatusCode::UNPROCESSABLE_ENTITY);
        let e = ThreadError::UnknownThread("t".into());
        assert_eq!(thread_error(e).status, StatusCode::NOT_FOUND);
    }

    #[test]
    fn history_limit_is_checked() {
        assert_eq!(history_limit(None).unwrap(), 10);
        assert_eq!(history_limit(Some("limit=3")).unwrap(), 3);
        assert_eq!(
            history_limit(Some("limit=0")).unwrap_err().status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(
            history_limit(Some("order=asc")).unwrap_err().code,
            "invalid_request"
        );
    }
}
