//! `ragloop eval SPEC... --dataset FILE.jsonl`: every question under every arm (the
//! variants of one spec, or `STEM[:VARIANT]` of several), with reports and CI gates
//! (see `ragloop::eval` and docs/eval.md).
//!
//! Exit status: 0 ok; 1 a run failed, a dataset line was skipped, a report could
//! not be written, or the spec / resources / output cannot be used; 2 usage error (nothing ran; another eval
//! holding --out included); 5 a gate failed; 130 interrupted by SIGINT/SIGTERM (partial reports)
//! (reports are written in every case where runs happened).
use ragloop::eval::{run_eval_until, EvalConfig};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `ragloop eval`.
#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 ok, 1 a run failed, a dataset line was skipped or a report could not be written (or the spec cannot run), 2 usage error, a missing API key or another eval using --out included (nothing ran), 5 a gate failed, 130 interrupted (partial reports written). See docs/eval.md.",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct EvalArgs {
    /// `ragloop eval merge`: combine the outputs of `--shard` runs.
    #[command(subcommand)]
    pub action: Option<EvalAction>,
    /// The spec file, or several: each question then runs under every arm, `STEM`
    /// (a spec without a variant) or `STEM:VARIANT` (see docs/eval.md, Arms).
    #[arg(required = true, value_name = "SPEC")]
    pub specs: Vec<PathBuf>,
    /// Questions, one JSON object per line: id, question, answer, must_contain, sources, kind.
    #[arg(long, required = true)]
    pub dataset: Option<PathBuf>,
    /// Comma-separated variants to evaluate; `base` is the spec without a variant and
    /// is only included when listed. Default: base and every variant of the spec.
    /// With several specs: arms, `STEM` or `STEM:VARIANT`.
    #[arg(long, value_delimiter = ',')]
    pub variants: Option<Vec<String>>,
    /// (arm, question) runs at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,
    /// Output directory: results.jsonl, summary.json, report.md, report.html.
    /// Default: eval-results/SPEC_STEM (several specs: STEM1+STEM2+...).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue an interrupted eval in --out: completed pairs are skipped.
    #[arg(long)]
    pub resume: bool,
    /// With --resume: run the failed pairs again (their rows are replaced).
    #[arg(long, requires = "resume")]
    pub retry_failed: bool,
    /// Refuse to run anything when a dataset line is bad.
    #[arg(long)]
    pub strict: bool,
    /// Fail (exit 5) when METRIC is below VALUE, for every variant or VARIANT only (repeatable).
    #[arg(long = "fail-under", value_name = "[VARIANT:]METRIC=VALUE")]
    pub fail_under: Vec<String>,
    /// Fail (exit 5) when METRIC is above VALUE (repeatable).
    #[arg(long = "fail-over", value_name = "[VARIANT:]METRIC=VALUE")]
    pub fail_over: Vec<String>,
    /// Fail (exit 5) when VARIANT is significantly worse than REF on must_contain, f1 or recall_final (repeatable; REF: base, or with several specs the first arm).
    #[arg(long = "fail-if-worse", value_name = "VARIANT[=REF]")]
    pub fail_if_worse: Vec<String>,
    /// Run each (arm, question) N times (the repeat index is in the cache and cassette keys); metrics average over repeats, the reports show the per-question spread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeats: u32,
    /// Question kinds of the hard subset of the cost table (an item's `hard: true|false` decides first).
    #[arg(long, value_delimiter = ',', value_name = "KIND,...")]
    pub hard: Option<Vec<String>>,
    /// Override a model for every variant: NAME=PROVIDER[:MODEL][@BASE_URL] (repeatable).
    #[arg(long = "model", value_name = "NAME=PROVIDER[:MODEL][@BASE_URL]")]
    pub models: Vec<String>,
    /// --override, --timeout, --retries, for every variant.
    #[command(flatten)]
    pub changes: super::overrides::SpecArgs,
    /// Corpus directory for every retriever, instead of the spec's.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Response cache, cassette recording (every exchange of every run) and replay.
    #[command(flatten)]
    pub calls: super::calls::CallArgs,
    /// Judge model of faithfulness and answer relevancy (same form as --model without
    /// NAME=; cached, recorded and replayed like every call). Default: the offline
    /// judge (a classical approximation, see docs/eval.md); `none`: no judge (the
    /// judge metrics are n/a).
    #[arg(long, value_name = "PROVIDER[:MODEL][@BASE_URL]")]
    pub judge: Option<String>,
    /// Judge samples per row; with 2 or more the judge's agreement with itself is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=32))]
    pub judge_repeats: u16,
    /// The single-shot arm the iteration delta compares the others with (default: the
    /// first arm whose runs never took more than one iteration).
    #[arg(long, value_name = "ARM")]
    pub single_shot: Option<String>,
    /// Run only shard I of N (1-based, 1 <= I <= N): a deterministic slice of the
    /// (arm, question, repeat) pairs by a hash of each pair, stable when the dataset
    /// grows. The output directory gets shard.json; combine the N directories with
    /// `ragloop eval merge` (gates are evaluated there).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
}

/// Subcommands of `ragloop eval`.
#[derive(clap::Subcommand)]
pub enum EvalAction {
    /// Combine the output directories of `ragloop eval ... --shard I/N` (every I of
    /// one N) into the unsharded eval's results.jsonl, summary.json and reports.
    #[command(
        after_help = "Exit status: 0 ok, 1 a run failed, a dataset line was skipped or a report could not be written, 2 usage error (shards of different evals, a shard missing, given twice or incomplete, overlapping pairs: nothing written), 5 a gate failed. See docs/eval.md, Sharded evals."
    )]
    Merge(MergeArgs),
}

/// Arguments of `ragloop eval merge`.
#[derive(clap::Args)]
pub struct MergeArgs {
    /// The shards' output directories (each with shard.json), in any order.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The merged output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// The dataset, when it is not at the path the shards recorded (same contents).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
}

/// Runs `ragloop eval merge`.
fn merge(args: MergeArgs) -> ExitCode {
    let cfg = ragloop::eval::merge::MergeConfig {
        dirs: args.dirs,
        out: args.out,
        dataset: args.dataset,
    };
    match ragloop::eval::merge::merge(&cfg) {
        Err(e) if e.is_usage() => {
            ragloop::errln!("ragloop eval merge: {e}");
            ExitCode::from(super::EXIT_USAGE)
        }
        Err(e) => {
            ragloop::errln!("ragloop eval merge: {e}");
            ExitCode::from(1)
        }
        Ok(o) => {
            print_arms(&o, "ragloop eval merge");
            let _ = writeln!(
                std::io::stdout(),
                "merged {} shard(s): {} row(s), {:.3} s of merge, summary and reports; reports in {}",
                cfg.dirs.len(),
                o.resumed_rows,
                o.report_seconds,
                cfg.out.display()
            );
            finish(&o, "ragloop eval merge")
        }
    }
}

/// Runs `ragloop eval`.
pub fn run(args: EvalArgs) -> ExitCode {
    if let Some(EvalAction::Merge(m)) = args.action {
        return merge(m);
    }
    let Some(dataset) = args.dataset.clone() else {
        ragloop::errln!("ragloop eval: --dataset FILE is required");
        return ExitCode::from(super::EXIT_USAGE);
    };
    if args.specs.is_empty() {
        ragloop::errln!("ragloop eval: give at least one SPEC");
        return ExitCode::from(super::EXIT_USAGE);
    }
    let shard = match args
        .shard
        .as_deref()
        .map(ragloop::eval::shard::Shard::parse)
    {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            ragloop::errln!("ragloop eval: {e}");
            return ExitCode::from(super::EXIT_USAGE);
        }
    };
    let out = args.out.clone().unwrap_or_else(|| {
        let stems: Vec<String> = args
            .specs
            .iter()
            .map(|p| {
                p.file_stem()
                    .map_or_else(|| "eval".into(), |s| s.to_string_lossy().into_owned())
            })
            .collect();
        PathBuf::from("eval-results").join(stems.join("+"))
    });
    // --replay / cache: one set of layers shared by every run. The --record cassette
    // is opened by the library once every argument has been checked, so a usage error
    // never truncates it; with --resume it is appended to (a torn last line cut).
    let mut layers = ragloop::runtime::ResourceOptions::default();
    let results = out.join(ragloop::eval::files::RESULTS);
    let inputs: Vec<&std::path::Path> = args
        .specs
        .iter()
        .map(PathBuf::as_path)
        .chain([dataset.as_path(), results.as_path()])
        .collect();
    let record_to = args.calls.record.clone();
    let mut early = args.calls.clone();
    early.record = None;
    if let Err(e) = early.apply(&mut layers, &inputs, args.resume) {
        ragloop::errln!("ragloop eval: {e}");
        return ExitCode::from(super::EXIT_USAGE);
    }
    if let Some(rec) = &record_to {
        let outputs: Vec<PathBuf> = [
            ragloop::eval::files::RESULTS,
            ragloop::eval::files::SUMMARY,
            ragloop::eval::files::REPORT_MD,
            ragloop::eval::files::REPORT_HTML,
            ragloop::eval::files::LOCK,
            ragloop::eval::files::SETTINGS,
            ragloop::eval::files::SHARD,
        ]
        .iter()
        .map(|f| out.join(f))
        .collect();
        // The spec's own files are checked by the eval once it has loaded the spec.
        let protected = inputs
            .iter()
            .map(|p| (*p, "an input"))
            .chain(args.calls.replay.as_deref().map(|p| (p, "an input")))
            .chain(outputs.iter().map(|p| (p.as_path(), "an output")));
        for (p, role) in protected {
            if ragloop::paths::same_file(rec, p) {
                ragloop::errln!(
                    "ragloop eval: --record {} would overwrite {}, {role} of this eval",
                    rec.display(),
                    p.display()
                );
                return ExitCode::from(super::EXIT_USAGE);
            }
        }
    }
    let cfg = EvalConfig {
        specs: args.specs,
        dataset,
        variants: args.variants,
        concurrency: usize::from(args.concurrency),
        out,
        resume: args.resume,
        retry_failed: args.retry_failed,
        strict: args.strict,
        fail_under: args.fail_under,
        fail_over: args.fail_over,
        fail_if_worse: args.fail_if_worse,
        repeats: args.repeats,
        hard: args.hard.map(|h| {
            h.into_iter()
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect()
        }),
        models: args.models,
        overrides: args.changes.overrides,
        timeout_secs: args.changes.timeout,
        retries: args.changes.retries,
        corpus: args.corpus,
        progress: std::io::stderr().is_terminal(),
        calls: ragloop::eval::runner::CallLayers::from_options(&mut layers),
        record_to,
        judge: args.judge,
        judge_repeats: usize::from(args.judge_repeats),
        single_shot: args.single_shot,
        shard,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            ragloop::errln!("ragloop eval: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let cancel = super::signals::install(&rt, "eval");
    match rt.block_on(run_eval_until(&cfg, &cancel)) {
        Err(e) if e.is_usage() => {
            ragloop::errln!("ragloop eval: {e}");
            ExitCode::from(super::EXIT_USAGE)
        }
        Err(e) => {
            let m = e.to_string();
            // Rendered diagnostics (several lines, with their own `error[...]`
            // headers) are printed as they are; a one-line message gets the prefix.
            if m.trim_end().contains('\n') {
                ragloop::errp!("{m}");
                if !m.ends_with('\n') {
                    ragloop::errln!();
                }
            } else {
                ragloop::errln!("ragloop eval: {}", m.trim_end());
            }
            ragloop::errln!("ragloop eval: no report was written");
            ExitCode::from(1)
        }
        Ok(o) => {
            print_arms(&o, "ragloop eval");
            let rate = if o.run_seconds > 0.0 {
                o.new_rows as f64 / o.run_seconds
            } else {
                0.0
            };
            let _ = writeln!(
                std::io::stdout(),
                "{} new run(s), {} resumed; {:.3} s of runs ({rate:.1} runs/s), {:.3} s of summary and reports; reports in {}",
                o.new_rows,
                o.resumed_rows,
                o.run_seconds,
                o.report_seconds,
                cfg.out.display()
            );
            finish(&o, "ragloop eval")
        }
    }
}

/// The warnings on stderr and one line per arm on stdout.
fn print_arms(o: &ragloop::eval::Outcome, prog: &str) {
    for w in &o.warnings {
        ragloop::errln!("{prog}: {w}");
    }
    for (v, r) in &o.summary.results {
        let a = &r.overall;
        let pct = |m: &str| {
            a.get(m)
                .map_or("-".into(), |x| format!("{:.1}%", 100.0 * x))
        };
        let _ = writeln!(
            std::io::stdout(),
            "{v}: {} run(s), must_contain {}, f1 {}, faithfulness {}, answer_relevancy {}, recall@k first {} final {}, mean iterations {}, failed {}",
            a.n,
            pct("must_contain"),
            pct("f1"),
            pct("faithfulness"),
            pct("answer_relevancy"),
            pct("recall_first"),
            pct("recall_final"),
            a.get("iterations").map_or("-".into(), |x| format!("{x:.2}")),
            a.statuses.get("failed").copied().unwrap_or(0)
        );
    }
}

/// The failures, skipped lines, report errors and failed gates on stderr; the exit
/// status.
fn finish(o: &ragloop::eval::Outcome, prog: &str) -> ExitCode {
    let s = &o.summary;
    let code = o.exit_code();
    if o.failed_runs > 0 {
        ragloop::errln!(
            "{prog}: {} run(s) failed (see the Failed runs section of report.md or report.html)",
            o.failed_runs
        );
    }
    if !s.dataset_errors.is_empty() {
        ragloop::errln!("{prog}: {} dataset line(s) skipped", s.dataset_errors.len());
    }
    for e in &o.report_errors {
        ragloop::errln!("{prog}: {e}");
    }
    for g in s.gates.iter().filter(|g| !g.passed) {
        ragloop::errln!("{prog}: gate failed: {}: {}", g.gate, g.reason);
    }
    ExitCode::from(code)
}
