//! The HTTP routes and their handlers. [`routes`] is the table the router is built
//! from (and the OpenAPI document is checked against).
use super::error::ApiError;
use super::runs::{RunLog, ServeObserver};
use super::{threads, App};
use crate::checkpoint::{Checkpointer, Mode};
use crate::runtime::state::initial_state;
use crate::runtime::{run_until, RunInput, RunResult};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Handler = MethodRouter<Arc<App>>;

fn endpoints() -> Vec<(&'static str, &'static str, Handler)> {
    vec![
        ("post", "/runs/wait", post(wait)),
        ("post", "/runs/stream", post(stream)),
        ("get", "/runs/{run_id}", get(run_status)),
        ("get", "/runs/{run_id}/stream", get(resume)),
        ("get", "/graphs", get(graphs)),
        ("get", "/graphs/{name}", get(graph)),
        ("get", "/healthz", get(healthz)),
        ("get", "/metrics", get(metrics)),
        ("get", "/openapi.json", get(openapi)),
        ("post", "/threads", post(threads::create)),
        ("get", "/threads/{thread_id}", get(threads::get)),
        ("post", "/threads/{thread_id}/runs/wait", post(thread_wait)),
        (
            "post",
            "/threads/{thread_id}/runs/stream",
            post(thread_stream),
        ),
        ("get", "/threads/{thread_id}/state", get(threads::state)),
        ("get", "/threads/{thread_id}/history", get(threads::history)),
    ]
}

/// Every route the router serves: (method, path), paths in axum's `{param}` form,
/// which is OpenAPI's.
pub fn routes() -> Vec<(&'static str, &'static str)> {
    endpoints().into_iter().map(|(m, p, _)| (m, p)).collect()
}

pub(super) fn router(app: Arc<App>) -> Router {
    let mut r: Router<Arc<App>> = Router::new();
    for (_, path, h) in endpoints() {
        r = r.route(path, h);
    }
    r.fallback(|| async {
        ApiError::not_found(
            "unknown_route",
            "no such route; GET /openapi.json lists them",
        )
    })
    .method_not_allowed_fallback(|| async {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method; GET /openapi.json lists them",
        )
    })
    .with_state(app)
}

/// The body of `POST /runs/wait` and `POST /runs/stream`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRequest {
    /// The graph (spec file stem); `assistant_id` is LangGraph's name for it.
    #[serde(default)]
    graph: Option<String>,
    #[serde(default)]
    assistant_id: Option<String>,
    /// `{"question": ..., FIELD: VALUE...}` or a question string.
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    variant: Option<String>,
    #[serde(default)]
    config: Option<RunConfig>,
    #[serde(default)]
    on_disconnect: Option<OnDisconnect>,
    /// LangGraph fields accepted and ignored: every stream carries all events.
    #[serde(default)]
    #[allow(dead_code)]
    stream_mode: Option<Value>,
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<Value>,
    /// Thread runs only: resume the thread's run (`{resume, update}`).
    #[serde(default)]
    command: Option<Command>,
    /// Thread runs only: nodes to pause before (besides the spec's).
    #[serde(default)]
    interrupt_before: Option<Vec<String>>,
    /// Thread runs only: what a new run on an unknown thread does.
    #[serde(default)]
    if_not_exists: Option<IfNotExists>,
}

/// `command` of a thread run: continue the thread's interrupted (or killed, or
/// failed) run, after writing `update` into its state.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Command {
    /// LangGraph's resume value: accepted, any value but `false`/`null` (ragloop's
    /// interrupts take no value).
    #[serde(default)]
    resume: Option<Value>,
    /// State fields to set before the run goes on, checked against the state schema.
    #[serde(default)]
    update: Option<indexmap::IndexMap<String, Value>>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum IfNotExists {
    Reject,
    Create,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunConfig {
    #[serde(default)]
    configurable: Configurable,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Configurable {
    #[serde(default)]
    variant: Option<String>,
    /// `NAME=PROVIDER[:MODEL][@BASE_URL]`, as `ragloop run --model`.
    #[serde(default)]
    models: Vec<String>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum OnDisconnect {
    Continue,
    Cancel,
}

/// Reads the whole body, at most `max` bytes.
pub(super) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    max: usize,
) -> Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than the server's limit of {max} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    axum::body::to_bytes(body, max)
        .await
        .map(|b| b.to_vec())
        .map_err(|_| too_large())
}

/// A JSON body into `T`: 400 `malformed_json` when it is not JSON, 422
/// `invalid_request` naming the field that does not fit.
pub(super) fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::malformed(format!("the request body is not JSON: {e}")))?;
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        ApiError::unprocessable(
            "invalid_request",
            if path == "." {
                format!("request: {inner}")
            } else {
                format!("request field `{path}`: {inner}")
            },
        )
    })
}

/// A run accepted and started.
struct Started {
    log: Arc<RunLog>,
    cancel: crate::runtime::CancellationToken,
    on_disconnect: OnDisconnect,
}

pub(super) fn run_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static NONCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let nonce = NONCE.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        format!("{}-{t}", std::process::id())
    });
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("ragloop-run-{nonce}-{n}").as_bytes(),
    )
    .to_string()
}

/// The question and `--set` values of a request's `input`, checked against the
/// program's state schema.
fn run_input(
    input: Option<Value>,
    program: &crate::runtime::Program,
) -> Result<RunInput, ApiError> {
    let bad = |m: String| ApiError::unprocessable("invalid_input", m);
    let (question, sets) = match input {
        Some(Value::String(q)) => (q, Vec::new()),
        Some(Value::Object(mut m)) => {
            let q = match m.shift_remove("question") {
                Some(Value::String(q)) => q,
                Some(other) => {
                    return Err(bad(format!(
                        "input `question` must be a string, not {}",
                        crate::json::kind(&other)
                    )))
                }
                None => return Err(bad("input needs a `question` (a string)".into())),
            };
            (q, m.into_iter().collect::<Vec<(String, Value)>>())
        }
        None | Some(Value::Null) => {
            return Err(bad(
                "the request needs an `input`: {\"question\": \"...\"} or a question string".into(),
            ))
        }
        Some(other) => {
            return Err(bad(format!(
                "`input` must be an object or a string, not {}",
                crate::json::kind(&other)
            )))
        }
    };
    if question.trim().is_empty() {
        return Err(bad("the question is empty".into()));
    }
    program
        .check_sets(&sets)
        .map_err(|e| bad(e.input_message()))?;
    let state = Value::Object(initial_state(
        &program.spec.state.initial,
        Some(&question),
        &sets,
    ));
    if let Err(v) = program.state_check.check(&state) {
        return Err(bad(format!(
            "the input does not match the state schema: {v}"
        )));
    }
    Ok(RunInput {
        question: Some(question),
        sets,
    })
}

/// A thread run's request, checked against the store (before the program is made).
struct OnThread {
    id: String,
    store: Arc<dyn Checkpointer>,
    guard: threads::BusyGuard,
    resume: bool,
    patch: Vec<(String, Value)>,
    interrupt_before: Vec<String>,
}

/// What the run task runs.
enum Job {
    Plain(RunInput),
    Thread {
        store: Arc<dyn Checkpointer>,
        prepared: crate::checkpoint::Prepared,
        guard: threads::BusyGuard,
    },
}

fn thread_only(field: &str) -> ApiError {
    ApiError::unprocessable(
        "invalid_request",
        format!(
            "`{field}` is for thread runs: POST /threads/{{thread_id}}/runs/wait or /runs/stream"
        ),
    )
}

/// Checks a thread run's request against the store: the thread is claimed (409
/// `thread_busy` when a run of it is in flight here), a resume takes the thread's
/// variant when the request names none, a new run on an unknown thread needs
/// `if_not_exists: create`.
async fn on_thread(
    app: &Arc<App>,
    id: String,
    req: &mut RunRequest,
    variant: &mut Option<String>,
) -> Result<OnThread, ApiError> {
    let store = app.store()?;
    threads::check_id(&id)?;
    let resume = match &req.command {
        None => false,
        Some(Command {
            resume: Some(Value::Bool(false) | Value::Null),
            ..
        }) => {
            return Err(ApiError::unprocessable(
                "invalid_request",
                "`command.resume` is false: leave `command` out for a new run",
            ))
        }
        Some(_) => true,
    };
    if resume && req.input.is_some() {
        return Err(ApiError::unprocessable(
            "invalid_request",
            "a resume (`command`) takes no `input`; set state fields with `command.update`",
        ));
    }
    let guard = app.busy.claim(&id)?;
    let (s, t) = (Arc::clone(&store), id.clone());
    let info = threads::blocking(move || s.thread(&t))
        .await?
        .map_err(|e| threads::thread_error(e.into()))?;
    if resume && variant.is_none() {
        *variant = info
            .as_ref()
            .and_then(|i| i.latest.as_ref())
            .and_then(|r| r.spec.variant.clone());
    }
    if !resume && info.is_none() && req.if_not_exists != Some(IfNotExists::Create) {
        return Err(ApiError::not_found(
            "unknown_thread",
            format!("no thread `{id}` (POST /threads creates one, or send \"if_not_exists\": \"create\")"),
        ));
    }
    let patch = req
        .command
        .as_mut()
        .and_then(|c| c.update.take())
        .map(|u| u.into_iter().collect())
        .unwrap_or_default();
    Ok(OnThread {
        id,
        store,
        guard,
        resume,
        patch,
        interrupt_before: req.interrupt_before.take().unwrap_or_default(),
    })
}

/// Checks a run request (on `thread` for the thread routes), takes a slot, prepares
/// the program and starts the run.
async fn start(
    app: &Arc<App>,
    headers: &HeaderMap,
    body: Body,
    thread: Option<String>,
) -> Result<Started, ApiError> {
    if app.stopping.is_cancelled() {
        return Err(shutting_down());
    }
    let bytes = read_body(headers, body, app.max_body_bytes).await?;
    let mut req: RunRequest = parse_json(&bytes)?;
    if thread.is_none() {
        if req.command.is_some() {
            return Err(thread_only("command"));
        }
        if req.interrupt_before.is_some() {
            return Err(thread_only("interrupt_before"));
        }
        if req.if_not_exists.is_some() {
            return Err(thread_only("if_not_exists"));
        }
    }
    let name = match (req.graph.take(), req.assistant_id.take()) {
        (Some(g), Some(a)) if g != a => {
            return Err(ApiError::unprocessable(
                "invalid_request",
                format!("`graph` ({g}) and `assistant_id` ({a}) name different graphs"),
            ))
        }
        (Some(g), _) | (None, Some(g)) => g,
        (None, None) => {
            return Err(ApiError::unprocessable(
                "invalid_request",
                "the request needs a `graph` (or `assistant_id`): GET /graphs lists them",
            ))
        }
    };
    let configurable = req
        .config
        .take()
        .map(|c| c.configurable)
        .unwrap_or_default();
    let mut variant = match (req.variant.take(), configurable.variant) {
        (Some(a), Some(b)) if a != b => {
            return Err(ApiError::unprocessable(
                "invalid_request",
                format!("`variant` ({a}) and `config.configurable.variant` ({b}) differ"),
            ))
        }
        (a, b) => a.or(b),
    };
    let models = configurable.models;
    let graph = app.registry.get(&name)?;
    let on_thread = match thread {
        Some(id) => Some(on_thread(app, id, &mut req, &mut variant).await?),
        None => None,
    };
    graph.check_variant(variant.as_deref())?;
    if !models.is_empty() && !app.allow_model_overrides {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "model_overrides_disabled",
            "this server does not take model overrides (start it with --allow-model-overrides)",
        ));
    }
    let Ok(permit) = Arc::clone(&app.slots).try_acquire_owned() else {
        app.metrics.rejected.fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_runs",
            format!(
                "{} runs are in flight, the server's limit (--max-runs); retry later",
                app.max_runs
            ),
        )
        .retry_after(1));
    };
    let (program, resources) = match graph
        .cached(variant.as_deref())
        .filter(|_| models.is_empty())
    {
        Some(pair) => pair,
        None => {
            let g = Arc::clone(&graph);
            let v = variant.clone();
            tokio::task::spawn_blocking(move || g.prepare(v.as_deref(), &models))
                .await
                .map_err(|e| {
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "internal",
                        format!("preparing the run failed: {e}"),
                    )
                })??
        }
    };
    let job = match on_thread {
        None => Job::Plain(run_input(req.input.take(), &program)?),
        Some(t) => {
            let input = if t.resume {
                None
            } else {
                Some(run_input(req.input.take(), &program)?)
            };
            let (store, p, id) = (Arc::clone(&t.store), Arc::clone(&program), t.id.clone());
            let (patch, nodes) = (t.patch, t.interrupt_before);
            let prepared = threads::blocking(move || {
                let mode = match &input {
                    Some(i) => Mode::New(i),
                    None => Mode::Resume { patch: &patch },
                };
                crate::checkpoint::prepare(&*store, &p, &id, mode, &nodes)
            })
            .await?
            .map_err(threads::thread_error)?;
            Job::Thread {
                store: t.store,
                prepared,
                guard: t.guard,
            }
        }
    };
    let thread_id = match &job {
        Job::Thread { prepared, .. } => Some(prepared.thread().to_string()),
        Job::Plain(_) => None,
    };
    let id = run_id();
    let log = Arc::new(RunLog::new(id.clone(), graph.name.clone()));
    let mut meta = json!({"run_id": id, "graph": graph.name, "variant": variant, "generation": graph.generation});
    if let (Some(t), Some(m)) = (&thread_id, meta.as_object_mut()) {
        m.insert("thread_id".into(), json!(t));
    }
    log.push("metadata", &meta);
    app.runs.insert(Arc::clone(&log));
    let cancel = app.cancel_runs.child_token();
    {
        let app = Arc::clone(app);
        let log = Arc::clone(&log);
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let mut obs = ServeObserver {
                log: Arc::clone(&log),
                metrics: Arc::clone(&app.metrics),
                program: Arc::clone(&program),
            };
            let p = Arc::clone(&program);
            let inner = tokio::spawn(async move {
                let out = match job {
                    Job::Plain(input) => (
                        run_until(&p, &resources, &input, &mut obs, &cancel).await,
                        None,
                    ),
                    Job::Thread {
                        store,
                        prepared,
                        guard,
                    } => {
                        let thread = prepared.thread().to_string();
                        let r = crate::checkpoint::run_thread(
                            &*store, &p, &resources, prepared, &mut obs, &cancel,
                        )
                        .await;
                        // Released before the result is answered: a client that got
                        // it may resume at once.
                        drop(guard);
                        match r {
                            Ok(o) => {
                                if let Some(e) = &o.status_error {
                                    crate::errln!("ragloop serve: thread `{thread}` run {}: the run's end was not recorded: {e}", o.run);
                                }
                                (o.result, Some((thread, Some(o.run))))
                            }
                            Err(e) => (
                                RunResult::failed(
                                    p.variant(),
                                    format!("the thread run could not begin: {e}"),
                                ),
                                Some((thread, None)),
                            ),
                        }
                    }
                };
                drop(resources);
                out
            });
            let (result, thread) = match inner.await {
                Ok(r) => r,
                Err(e) => (
                    RunResult::failed(
                        program.variant(),
                        format!("the run stopped unexpectedly: {e}"),
                    ),
                    thread_id.map(|t| (t, None)),
                ),
            };
            app.metrics.run(
                &log.graph,
                result.status.as_str(),
                started.elapsed().as_secs_f64(),
            );
            let mut json = result.to_json();
            if let (Some((t, run)), Some(obj)) = (thread, json.as_object_mut()) {
                obj.insert("thread".into(), json!(t));
                obj.insert("run".into(), json!(run));
                if let Some(n) = &result.paused_before {
                    obj.insert("paused_before".into(), json!(n));
                }
            }
            // Counted and filed as finished before the `end` event is written, so a
            // client that saw `end` sees the run's metrics and retention too.
            app.runs.finished(&log.id);
            log.finish_with(&result, json);
            drop(graph);
            drop(permit);
        });
    }
    Ok(Started {
        log,
        cancel,
        on_disconnect: req.on_disconnect.unwrap_or(OnDisconnect::Continue),
    })
}

fn shutting_down() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "shutting_down",
        "the server is shutting down and takes no new run",
    )
}

fn run_header(resp: &mut Response, id: &str) {
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert("x-ragloop-run-id", v);
    }
}

/// `POST /runs/wait`: runs and answers the result as `ragloop run --json` gives it.
async fn wait(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    wait_on(app, headers, body, None).await
}

/// `POST /threads/{thread_id}/runs/wait`: a new run on the thread, or (`command`) a
/// resume of its latest run.
async fn thread_wait(
    State(app): State<Arc<App>>,
    Path(thread): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    wait_on(app, headers, body, Some(thread)).await
}

/// `POST /threads/{thread_id}/runs/stream`: as `thread_wait`, streamed.
async fn thread_stream(
    State(app): State<Arc<App>>,
    Path(thread): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    stream_on(app, headers, body, Some(thread)).await
}

async fn wait_on(
    app: Arc<App>,
    headers: HeaderMap,
    body: Body,
    thread: Option<String>,
) -> Response {
    let started = match start(&app, &headers, body, thread).await {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    // A client that leaves cancels its run.
    let guard = started.cancel.clone().drop_guard();
    let mut rx = started.log.subscribe();
    let _ = rx.wait_for(|s| s.1).await;
    guard.disarm();
    let result = started.log.result().unwrap_or(Value::Null);
    let mut resp = Json(result).into_response();
    run_header(&mut resp, &started.log.id);
    resp
}

/// Cancels the run when dropped unless disarmed (a streamed run with
/// `on_disconnect: cancel` whose client left).
struct CancelOnDrop(Option<crate::runtime::CancellationToken>);

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.cancel();
        }
    }
}

fn sse(log: Arc<RunLog>, from: usize, guard: CancelOnDrop) -> Response {
    let rx = log.subscribe();
    let stream = futures::stream::unfold(
        (log, from, rx, guard),
        |(log, next, mut rx, mut guard)| async move {
            loop {
                let (written, done) = *rx.borrow_and_update();
                if next < written {
                    if let Some(ev) = log.get(next) {
                        let event = Event::default()
                            .id(ev.id.to_string())
                            .event(ev.name)
                            .data(&*ev.data);
                        return Some((Ok::<Event, Infallible>(event), (log, next + 1, rx, guard)));
                    }
                }
                if done || rx.changed().await.is_err() {
                    guard.disarm();
                    return None;
                }
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// `POST /runs/stream`: runs and streams its events (Server-Sent Events).
async fn stream(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    stream_on(app, headers, body, None).await
}

async fn stream_on(
    app: Arc<App>,
    headers: HeaderMap,
    body: Body,
    thread: Option<String>,
) -> Response {
    let started = match start(&app, &headers, body, thread).await {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let guard = CancelOnDrop(
        (started.on_disconnect == OnDisconnect::Cancel).then(|| started.cancel.clone()),
    );
    let id = started.log.id.clone();
    let mut resp = sse(started.log, 0, guard);
    run_header(&mut resp, &id);
    resp
}

/// `GET /runs/{run_id}/stream`: the run's events after `Last-Event-ID` (all without
/// it), then the live ones until it ends.
async fn resume(
    State(app): State<Arc<App>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(log) = app.runs.get(&run_id) else {
        return unknown_run(&run_id).into_response();
    };
    let from = match headers.get("last-event-id") {
        None => 0,
        Some(v) => match v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()) {
            Some(n) => (n as usize).saturating_add(1),
            None => {
                return ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_last_event_id",
                    "Last-Event-ID must be an event id of this run (a number)",
                )
                .into_response()
            }
        },
    };
    // A finished run has all its events: an id past its last is not one of its own.
    if log.is_finished() && from > log.len() {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_last_event_id",
            format!(
                "Last-Event-ID must be an event id of this run (it has events 0 to {})",
                log.len().saturating_sub(1)
            ),
        )
        .into_response();
    }
    let mut resp = sse(log, from, CancelOnDrop(None));
    run_header(&mut resp, &run_id);
    resp
}

fn unknown_run(id: &str) -> ApiError {
    ApiError::not_found(
        "unknown_run",
        format!(
            "no run `{id}` (finished runs are kept for a bounded time and count: docs/serve.md)"
        ),
    )
}

/// `GET /runs/{run_id}`: status, events so far, result once finished.
async fn run_status(State(app): State<Arc<App>>, Path(run_id): Path<String>) -> Response {
    let Some(log) = app.runs.get(&run_id) else {
        return unknown_run(&run_id).into_response();
    };
    let result = log.result();
    let status = result
        .as_ref()
        .and_then(|r| r.get("status").cloned())
        .unwrap_or_else(|| json!("running"));
    Json(json!({
        "run_id": log.id,
        "graph": log.graph,
        "status": status,
        "events": log.len(),
        "result": result,
    }))
    .into_response()
}

async fn graphs(State(app): State<Arc<App>>) -> Json<Value> {
    Json(app.registry.list())
}

async fn graph(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    match app.registry.describe(&name) {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn healthz(State(app): State<Arc<App>>) -> Response {
    let (served, invalid) = app.registry.counts();
    let body = json!({
        "status": if app.stopping.is_cancelled() { "shutting_down" } else { "ok" },
        "graphs": {"served": served, "invalid": invalid},
        "runs_in_flight": app.in_flight(),
        "max_runs": app.max_runs,
    });
    let code = if app.stopping.is_cancelled() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (code, Json(body)).into_response()
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let (served, invalid) = app.registry.counts();
    let text = app.metrics.render(&super::metrics::Gauges {
        in_flight: app.in_flight(),
        max_in_flight: app.max_runs,
        served,
        invalid,
    });
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn openapi() -> Json<Value> {
    Json(super::openapi::document())
}
