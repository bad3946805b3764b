//! `ragloop serve`: the graphs as an HTTP service, shaped like LangGraph Server's API
//! where it fits (docs/serve.md, `GET /openapi.json`).
//!
//! Layering: this module sits above [`crate::compile`] and [`crate::runtime`] (it
//! compiles specs with [`crate::compile::compile`], runs programs with
//! [`crate::runtime::run_until`] and turns the [`crate::runtime::Observer`] calls into
//! events and metrics); the CLI's `serve` subcommand only parses flags into
//! [`ServeOptions`] and calls [`Server::load`] and [`Server::serve`].
//!
//! Policies (documented in docs/serve.md):
//! - **Concurrency**: at most [`ServeOptions::max_runs`] runs in flight; a run beyond
//!   it is refused at once with 429 `too_many_runs` and `Retry-After: 1` (no queue).
//! - **Body cap**: a request body above [`ServeOptions::max_body_bytes`] is refused
//!   with 413 `body_too_large`.
//! - **Model overrides** in a request (`config.configurable.models`) only when
//!   [`ServeOptions::allow_model_overrides`]; else 403.
//! - **Disconnects**: a client that leaves `POST /runs/wait` cancels its run; a
//!   streamed run goes on (so a reconnect can resume it) unless the request said
//!   `"on_disconnect": "cancel"`.
//! - **Hot reload**: every [`ServeOptions::reload_interval`] the files each spec
//!   read are compared ([`watch`]); a changed spec is compiled again, served when it
//!   compiles (runs in flight finish on the version they started with), kept with the
//!   failure shown in `GET /graphs` when it does not.
//! - **Threads** ([`threads`]): runs on a thread are checkpointed in
//!   [`ServeOptions::checkpoints`]; one run per thread at a time (a second is 409
//!   `thread_busy`, not queued); a resume continues a paused, cancelled, failed or
//!   killed run from its last checkpoint.
//! - **Shutdown**: when the future given to [`Server::serve`] resolves, the listener
//!   closes, requests in flight go on; after [`ServeOptions::grace`] the runs still
//!   in flight are cancelled (status `interrupted`), and `serve` returns once they
//!   ended (or 5 s later).
pub mod error;
pub mod metrics;
pub mod openapi;
mod registry;
mod routes;
pub mod runs;
pub mod threads;
pub mod watch;

pub use error::ApiError;
pub use registry::{spec_files, Graph, Registry};
pub use routes::routes;

use crate::checkpoint::Checkpointer;
use crate::providers::cache::ResponseCache;
use crate::providers::cassette::{Cassette, CassetteWriter};
use crate::runtime::{CancellationToken, ResourceOptions};
use runs::{Retention, RunStore};
use std::future::{Future, IntoFuture};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Where runs' calls go: the call layers every served run gets (as `ragloop run`'s
/// `--corpus`, cache, `--record`, `--replay`).
#[derive(Clone, Default)]
pub struct Settings {
    /// Corpus directory for every retriever, instead of the specs'.
    pub corpus: Option<PathBuf>,
    /// The response cache (temperature-0 network models).
    pub cache: Option<Arc<ResponseCache>>,
    /// Record every exchange into this cassette.
    pub record: Option<Arc<CassetteWriter>>,
    /// Answer every model from this cassette.
    pub replay: Option<Arc<Cassette>>,
}

impl Settings {
    /// The [`ResourceOptions`] of one graph's resources.
    pub fn resource_options(&self) -> ResourceOptions {
        ResourceOptions {
            corpus: self.corpus.clone(),
            cache: self.cache.clone(),
            record: self.record.clone(),
            replay: self.replay.clone(),
            progress: false,
            ..ResourceOptions::default()
        }
    }
}

/// How a server runs.
#[derive(Clone)]
pub struct ServeOptions {
    /// Spec files and directories (their `*.yaml`/`*.yml`, not recursive).
    pub specs: Vec<PathBuf>,
    /// Most runs in flight at once; beyond it 429 (default 64).
    pub max_runs: usize,
    /// Largest request body in bytes; beyond it 413 (default 1 MiB).
    pub max_body_bytes: usize,
    /// Whether requests may override models (`config.configurable.models`).
    pub allow_model_overrides: bool,
    /// How often the specs' files are polled for changes; `None`: no hot reload
    /// (default 500 ms).
    pub reload_interval: Option<Duration>,
    /// How long finished runs' event logs are kept (default 1,000 runs, 10 minutes).
    pub retention: Retention,
    /// How long runs in flight may go on after shutdown begins (default 30 s).
    pub grace: Duration,
    /// The call layers of every run.
    pub settings: Settings,
    /// Where threads are kept (`--checkpoints`): `Err(why)` when the server has no
    /// store; the thread routes then answer 503 `checkpoints_unavailable` with `why`
    /// (default: none, "not configured").
    pub checkpoints: Result<Arc<dyn Checkpointer>, String>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            specs: Vec::new(),
            max_runs: 64,
            max_body_bytes: 1 << 20,
            allow_model_overrides: false,
            reload_interval: Some(Duration::from_millis(500)),
            retention: Retention::default(),
            grace: Duration::from_secs(30),
            settings: Settings::default(),
            checkpoints: Err("not configured".into()),
        }
    }
}

/// What every request handler shares.
pub struct App {
    /// The graphs.
    pub registry: Registry,
    /// Runs in flight and kept.
    pub runs: RunStore,
    /// Counters and histograms.
    pub metrics: Arc<metrics::Metrics>,
    /// The checkpoint store of thread runs, or why there is none.
    checkpoints: Result<Arc<dyn Checkpointer>, String>,
    /// Threads with a run in flight here.
    busy: Arc<threads::Busy>,
    slots: Arc<Semaphore>,
    max_runs: usize,
    max_body_bytes: usize,
    allow_model_overrides: bool,
    grace: Duration,
    /// Cancelled when shutdown begins (new runs are refused with 503).
    stopping: CancellationToken,
    /// Cancelled when the grace period is over: runs in flight end `interrupted`.
    cancel_runs: CancellationToken,
}

impl App {
    /// Runs in flight now.
    pub fn in_flight(&self) -> usize {
        self.max_runs - self.slots.available_permits()
    }
}

/// A loaded server, ready to [`Server::serve`].
pub struct Server {
    app: Arc<App>,
    watched: Vec<registry::Watched>,
    reload_interval: Option<Duration>,
}

impl Server {
    /// Finds the spec files and compiles each once (blocking: call it before or
    /// outside the async runtime's workers). Invalid specs are kept, listed with
    /// their diagnostics on stderr and in `GET /graphs`, and not served.
    ///
    /// # Errors
    /// A usage message: a path that does not exist, a directory without specs, two
    /// specs with one file stem, `max_runs` of 0.
    pub fn load(opts: ServeOptions) -> Result<Server, String> {
        if opts.max_runs == 0 || opts.max_runs > Semaphore::MAX_PERMITS.min(u32::MAX as usize) {
            return Err(format!("--max-runs must be from 1 to {}", u32::MAX));
        }
        let files = spec_files(&opts.specs)?;
        let dirs = opts.specs.iter().filter(|p| p.is_dir()).cloned().collect();
        let (registry, watched) = Registry::load(files, dirs, Arc::new(opts.settings));
        let app = App {
            registry,
            runs: RunStore::new(opts.retention),
            metrics: Arc::new(metrics::Metrics::default()),
            checkpoints: opts.checkpoints,
            busy: Arc::default(),
            slots: Arc::new(Semaphore::new(opts.max_runs)),
            max_runs: opts.max_runs,
            max_body_bytes: opts.max_body_bytes,
            allow_model_overrides: opts.allow_model_overrides,
            grace: opts.grace,
            stopping: CancellationToken::new(),
            cancel_runs: CancellationToken::new(),
        };
        Ok(Server {
            app: Arc::new(app),
            watched,
            reload_interval: opts.reload_interval,
        })
    }

    /// The shared state (graphs, runs, metrics).
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// The HTTP router over this server's state (every route of [`routes`]).
    pub fn router(&self) -> axum::Router {
        routes::router(Arc::clone(&self.app))
    }

    /// Serves on `listener` until `shutdown` resolves, then drains (see the module
    /// docs): stops accepting, lets runs in flight finish for the grace period,
    /// cancels the rest, returns when they ended.
    ///
    /// # Errors
    /// An I/O error of the listener.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let app = Arc::clone(&self.app);
        let router = self.router();
        if let Some(every) = self.reload_interval {
            let app = Arc::clone(&app);
            let mut watched = self.watched;
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        () = app.stopping.cancelled() => return,
                        () = tokio::time::sleep(every) => {}
                    }
                    let a = Arc::clone(&app);
                    match tokio::task::spawn_blocking(move || {
                        a.registry.poll(&mut watched, &a.metrics);
                        watched
                    })
                    .await
                    {
                        Ok(w) => watched = w,
                        Err(e) => {
                            crate::errln!("ragloop serve: hot reload stopped: {e}");
                            return;
                        }
                    }
                }
            });
        }
        let stopping = app.stopping.clone();
        let signal = async move {
            shutdown.await;
            stopping.cancel();
        };
        {
            let app = Arc::clone(&app);
            tokio::spawn(async move {
                app.stopping.cancelled().await;
                let n = app.in_flight();
                if n > 0 {
                    crate::errln!(
                        "ragloop serve: stopping: {n} run(s) in flight get {:.1} s to finish",
                        app.grace.as_secs_f64()
                    );
                }
                tokio::time::sleep(app.grace).await;
                if app.in_flight() > 0 {
                    crate::errln!(
                        "ragloop serve: grace period over: cancelling {} run(s) (status interrupted)",
                        app.in_flight()
                    );
                }
                app.cancel_runs.cancel();
            });
        }
        // Events are small writes: no Nagle delay between them.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let server = axum::serve(listener, router)
            .with_graceful_shutdown(signal)
            .into_future();
        let hard_stop = {
            let app = Arc::clone(&app);
            async move {
                app.stopping.cancelled().await;
                tokio::time::sleep(app.grace + Duration::from_secs(5)).await;
            }
        };
        tokio::select! {
            r = server => r?,
            () = hard_stop => crate::errln!("ragloop serve: connections still open after the grace period; closing them"),
        }
        // Streamed runs whose client left may still be running.
        let all = app.max_runs as u32;
        let deadline = app.grace + Duration::from_secs(5);
        let _ = tokio::time::timeout(deadline, app.slots.acquire_many(all)).await;
        Ok(())
    }
}
