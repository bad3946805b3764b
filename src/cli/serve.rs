//! `ragloop serve [SPEC|DIR...] --addr 127.0.0.1:8080`: the graphs over HTTP (see
//! `ragloop::serve` and docs/serve.md). A thin layer: flags into `ServeOptions`.
//!
//! Exit status: 0 after a clean shutdown (SIGINT/SIGTERM: the listener closes, runs
//! in flight get `--grace` seconds), 1 the address cannot be bound, 2 usage error
//! (a path that does not exist, a bad flag), 130 a second signal (exit at once).
use ragloop::serve::runs::Retention;
use ragloop::serve::{ServeOptions, Server, Settings};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `ragloop serve`.
#[derive(clap::Args)]
#[command(
    after_help = "Binds exactly the address given (default 127.0.0.1:8080, local only); --addr 0.0.0.0:8080 exposes it to the network, with no authentication.\nExit status: 0 stopped by SIGINT/SIGTERM, 1 cannot bind, 2 usage error, 130 a second signal."
)]
pub struct ServeArgs {
    /// Spec files, and directories whose *.yaml / *.yml are specs (not recursive).
    #[arg(required = true)]
    pub specs: Vec<PathBuf>,
    /// Address to listen on. Bound as given: a non-loopback address serves the network.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Most runs in flight at once; a run beyond it gets 429 with Retry-After (no queue).
    #[arg(long, default_value_t = 64)]
    pub max_runs: usize,
    /// Largest request body, in bytes; a larger one gets 413.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Let requests override models (`config.configurable.models`, as `run --model`).
    #[arg(long)]
    pub allow_model_overrides: bool,
    /// How often spec, prompt and schema files are checked for changes, in ms (0: no hot reload).
    #[arg(long, default_value_t = 500, value_name = "MS")]
    pub reload_ms: u64,
    /// Finished runs whose event logs are kept for GET /runs/{id}/stream.
    #[arg(long, default_value_t = 1000)]
    pub keep_runs: usize,
    /// Seconds a finished run's event log is kept.
    #[arg(long, default_value_t = 600)]
    pub keep_secs: u64,
    /// Seconds runs in flight get to finish after SIGINT/SIGTERM before they are cancelled.
    #[arg(long, default_value_t = 30)]
    pub grace: u64,
    /// Corpus directory for every retriever, instead of the specs'.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Where threads are kept: a SQLite file or a postgres:// URL (default: the SQLite
    /// file under the cache dir, as `ragloop run --thread`).
    #[arg(long, value_name = "FILE|URL")]
    pub checkpoints: Option<String>,
    /// Response cache, cassette recording and replay.
    #[command(flatten)]
    pub calls: super::calls::CallArgs,
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    ragloop::errln!("ragloop serve: {msg}");
    ExitCode::from(super::EXIT_USAGE)
}

/// Runs `ragloop serve`.
pub fn run(args: ServeArgs) -> ExitCode {
    // A bad address is a usage error, told before any spec is compiled.
    if let Err(e) = args.addr.parse::<std::net::SocketAddr>() {
        return usage(format!(
            "--addr {}: not an address (IP:PORT, e.g. 127.0.0.1:8080): {e}",
            args.addr
        ));
    }
    let mut opts = ragloop::runtime::ResourceOptions::default();
    let inputs: Vec<&std::path::Path> = args.specs.iter().map(PathBuf::as_path).collect();
    if let Err(e) = args.calls.apply(&mut opts, &inputs, false) {
        return usage(e);
    }
    // An explicit store that does not open stops the server; the default one only
    // turns the thread routes off (503 `checkpoints_unavailable`, saying why).
    let checkpoints = match ragloop::checkpoint::open(args.checkpoints.as_deref()) {
        Ok(s) => Ok(std::sync::Arc::from(s)),
        Err(e) if args.checkpoints.is_some() => {
            ragloop::errln!("ragloop serve: --checkpoints: {e}");
            return ExitCode::from(match e {
                ragloop::checkpoint::CheckpointError::Unsupported(_) => super::EXIT_USAGE,
                _ => 1,
            });
        }
        Err(e) => {
            ragloop::errln!("ragloop serve: threads are off: {e}");
            Err(e.to_string())
        }
    };
    let options = ServeOptions {
        specs: args.specs.clone(),
        max_runs: args.max_runs,
        max_body_bytes: args.max_body_bytes,
        allow_model_overrides: args.allow_model_overrides,
        reload_interval: (args.reload_ms > 0).then(|| Duration::from_millis(args.reload_ms)),
        retention: Retention {
            keep_runs: args.keep_runs,
            keep_for: Duration::from_secs(args.keep_secs),
        },
        grace: Duration::from_secs(args.grace),
        settings: Settings {
            corpus: args.corpus.clone(),
            cache: opts.cache,
            record: opts.record,
            replay: opts.replay,
        },
        checkpoints,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            ragloop::errln!("ragloop serve: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let server = match Server::load(options) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let listener = match rt.block_on(tokio::net::TcpListener::bind(&args.addr)) {
        Ok(l) => l,
        Err(e) => {
            ragloop::errln!("ragloop serve: cannot listen on {}: {e}", args.addr);
            return ExitCode::from(1);
        }
    };
    let shown = listener
        .local_addr()
        .map_or_else(|_| args.addr.clone(), |a| a.to_string());
    ragloop::errln!("ragloop serve: listening on http://{shown} (GET /graphs, /openapi.json)");
    let cancel = super::signals::install(&rt, "serve");
    match rt.block_on(server.serve(listener, cancel.cancelled_owned())) {
        Ok(()) => {
            ragloop::errln!("ragloop serve: stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            ragloop::errln!("ragloop serve: {e}");
            ExitCode::from(1)
        }
    }
}
