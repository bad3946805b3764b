//! `ragloop eval`: every question of a dataset under every variant of a spec, with
//! per-question rows, aggregate metrics, paired comparisons, reports and CI gates.
//!
//! One module per concept:
//! - [`dataset`]: the JSON-lines question set (bad lines kept with their numbers);
//! - [`runner`]: variants resolved, opened and run concurrently on tokio;
//! - [`store`]: results.jsonl rows, append + flush, resume after a kill;
//! - [`lock`]: one eval at a time per output directory (`eval.lock`);
//! - [`settings`]: the CLI settings of the rows (`settings.json`), checked by `--resume`;
//! - [`metrics`]: per-question metrics and their definitions;
//! - [`judge`] (with [`verdicts`]): faithfulness and answer relevancy by a judge,
//!   grader calibration, the iteration delta;
//! - [`stats`]: percentiles, bootstrap CIs, McNemar's test;
//! - [`summary`]: aggregates and comparisons (summary.json);
//! - [`report_md`], [`report_html`] (with [`svg`]): the reports;
//! - [`gates`]: `--fail-under`, `--fail-over`, `--fail-if-worse`;
//! - [`shard`], [`merge`]: `--shard I/N` and `ragloop eval merge`;
//! - [`rows`]: the slim rows and capped row tables that bound memory and
//!   report.html; [`finish`]: rows to summary, shared by eval and merge.
//!
//! [`run_eval`] does it all; the CLI only parses flags and maps [`EvalError`] and
//! [`Outcome`] to exit codes.
pub mod arms;
pub mod dataset;
pub mod finish;
pub mod gates;
pub mod judge;
pub mod judge_report;
pub mod lock;
pub mod merge;
pub mod metrics;
pub mod questions;
pub mod report_html;
pub mod report_md;
pub mod rows;
pub mod runner;
pub mod settings;
pub mod shard;
pub mod spread;
pub mod stats;
pub mod store;
pub mod summary;
pub mod svg;
pub mod table;
pub mod verdicts;

use crate::compile::LoadError;
use crate::runtime::{CancellationToken, Status};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Exit status of `ragloop eval` when a gate fails (distinct from `run`'s 0–4).
pub const EXIT_GATE: u8 = 5;

/// The question kinds of the hard subset without `--hard`.
pub const DEFAULT_HARD: [&str; 2] = ["paraphrase", "multi_hop"];

/// Everything `ragloop eval` needs.
#[derive(Clone, Debug, Default)]
pub struct EvalConfig {
    /// The spec files: one (arms are its variants), or several (arms `STEM` and
    /// `STEM:VARIANT`, see [`arms`]).
    pub specs: Vec<PathBuf>,
    /// The dataset (JSON lines).
    pub dataset: PathBuf,
    /// `--variants` (arm names); `None` = every arm: `base` and every variant of each
    /// spec.
    pub variants: Option<Vec<String>>,
    /// Pairs running at once (at least 1).
    pub concurrency: usize,
    /// Output directory (created).
    pub out: PathBuf,
    /// Skip pairs already in `out/results.jsonl`.
    pub resume: bool,
    /// With `resume`: rerun the pairs whose row is `failed` (their rows are removed
    /// from results.jsonl first, atomically, so there is still one row per pair).
    pub retry_failed: bool,
    /// Refuse to run when a dataset line is bad.
    pub strict: bool,
    /// `--fail-under` arguments.
    pub fail_under: Vec<String>,
    /// `--fail-over` arguments.
    pub fail_over: Vec<String>,
    /// `--fail-if-worse` arms.
    pub fail_if_worse: Vec<String>,
    /// `--repeats N`: each (arm, question) run N times (0 and 1: once).
    pub repeats: u32,
    /// `--hard KIND,...`: the kinds of the hard subset (`None`: [`DEFAULT_HARD`]).
    pub hard: Option<Vec<String>>,
    /// `--model` overrides, for every variant.
    pub models: Vec<String>,
    /// `--override PATH=VALUE` changes, for every variant (before `models`).
    pub overrides: Vec<String>,
    /// `--timeout SECS`: per-attempt timeout of every network call.
    pub timeout_secs: Option<f64>,
    /// `--retries N`: retries of every call.
    pub retries: Option<u32>,
    /// `--corpus` for every retriever.
    pub corpus: Option<PathBuf>,
    /// Show a progress bar (only drawn on a terminal).
    pub progress: bool,
    /// Response cache, cassette recording and replay, shared by every run
    /// (`--no-cache`, `--record FILE`, `--replay FILE`).
    pub calls: runner::CallLayers,
    /// `--record FILE`: opened (created, or appended to with `resume`) after every
    /// argument is checked, so a usage error leaves an existing cassette untouched;
    /// ignored when `calls.record` is already set.
    pub record_to: Option<PathBuf>,
    /// `--judge PROVIDER[:MODEL][@URL]`: the judge model of `faithfulness` and
    /// `answer_relevancy`; `None` (or `offline`): the classical offline judge.
    pub judge: Option<String>,
    /// `--judge-repeats K`: judge samples per row (0 is taken as 1).
    pub judge_repeats: usize,
    /// `--single-shot ARM`: the arm the iteration delta compares the others with
    /// (default: the first arm whose runs never took more than one iteration).
    pub single_shot: Option<String>,
    /// `--shard I/N`: run only that slice of the pairs ([`shard`]) and write
    /// shard.json for `ragloop eval merge`.
    pub shard: Option<shard::Shard>,
}

impl EvalConfig {
    /// The settings recorded in settings.json and summary.json ([`settings`]),
    /// without the specs' fingerprints (see [`run_eval_until`]).
    pub fn settings(&self) -> settings::Settings {
        settings::Settings {
            overrides: self.overrides.clone(),
            models: self.models.clone(),
            timeout_secs: self.timeout_secs,
            retries: self.retries,
            corpus: self.corpus.as_ref().map(|c| c.display().to_string()),
            specs: Vec::new(),
            repeats: (self.repeats > 1).then_some(self.repeats),
            judge: self
                .judge
                .clone()
                .filter(|j| j.trim() != "offline" && !j.trim().is_empty()),
            judge_repeats: (self.judge_repeats > 1).then_some(self.judge_repeats),
            shard: self.shard.map(|s| s.to_string()),
        }
    }

    /// `--repeats`, at least 1.
    pub fn repeat_count(&self) -> u32 {
        self.repeats.max(1)
    }

    /// The kinds of the hard subset.
    pub fn hard_kinds(&self) -> Vec<String> {
        let mut kinds = self
            .hard
            .clone()
            .unwrap_or_else(|| DEFAULT_HARD.iter().map(|k| (*k).to_string()).collect());
        let mut seen = HashSet::new();
        kinds.retain(|k| seen.insert(k.clone()));
        kinds
    }
}

/// Why an eval did not run to its reports: [`EvalError::is_usage`] errors (exit 2)
/// are found before anything ran; the others (exit 1) are a spec that does not load,
/// resources that cannot open, or results that cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// Bad arguments or input, found before anything ran (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The dataset cannot be evaluated (exit 2).
    #[error(transparent)]
    Dataset(#[from] dataset::DatasetError),
    /// A gate flag is wrong (exit 2).
    #[error(transparent)]
    Gate(#[from] gates::GateError),
    /// The settings.json of `--resume` cannot be read (exit 2).
    #[error(transparent)]
    Settings(store::StoreError),
    /// The spec does not validate, resources cannot be opened, or the results cannot
    /// be written (exit 1). Rendered diagnostics may span several lines.
    #[error("{0}")]
    Failed(String),
    /// results.jsonl or settings.json cannot be read or written (exit 1).
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

impl EvalError {
    /// Whether this is a usage error (exit 2): nothing ran.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            EvalError::Usage(_)
                | EvalError::Dataset(_)
                | EvalError::Gate(_)
                | EvalError::Settings(_)
        )
    }
}

impl From<LoadError> for EvalError {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Usage(m) => EvalError::Usage(m),
            LoadError::Compile(m) => EvalError::Failed(m),
            e @ (LoadError::Invalid(_) | LoadError::Program(_) | LoadError::Resources { .. }) => {
                EvalError::Failed(e.to_string())
            }
        }
    }
}

/// What a finished eval produced.
#[derive(Debug)]
pub struct Outcome {
    /// The summary (also in summary.json).
    pub summary: summary::Summary,
    /// Rows of this invocation (resumed rows excluded).
    pub new_rows: usize,
    /// Rows taken over from an earlier invocation.
    pub resumed_rows: usize,
    /// Wall time of the runs of this invocation (preparation and reports excluded),
    /// seconds.
    pub run_seconds: f64,
    /// Wall time of the summary and the reports (from the last run's end to the
    /// reports written; `ragloop eval merge`: reading the shards included), seconds.
    pub report_seconds: f64,
    /// Failed runs among all rows of the selected variants.
    pub failed_runs: usize,
    /// Warnings to show (a torn line dropped, bad dataset lines).
    pub warnings: Vec<String>,
    /// Reports that could not be written (the others were), one message each.
    pub report_errors: Vec<String>,
    /// The eval was interrupted: the summary and reports are partial (see
    /// [`summary::Summary::interrupted`]).
    pub interrupted: bool,
}

impl Outcome {
    /// Exit status: 130 ([`crate::runtime::status::EXIT_INTERRUPTED`]) when the eval was
    /// interrupted, else 1 when a dataset line was skipped, a run failed or a report
    /// could not be written, else [`EXIT_GATE`] when a gate failed, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.interrupted {
            crate::runtime::status::EXIT_INTERRUPTED
        } else if self.failed_runs > 0
            || !self.summary.dataset_errors.is_empty()
            || !self.report_errors.is_empty()
        {
            1
        } else if self.summary.gates.iter().any(|g| !g.passed) {
            EXIT_GATE
        } else {
            0
        }
    }
}

/// The files of an output directory.
pub mod files {
    /// Rows.
    pub const RESULTS: &str = "results.jsonl";
    /// Aggregates and comparisons.
    pub const SUMMARY: &str = "summary.json";
    /// Markdown report.
    pub const REPORT_MD: &str = "report.md";
    /// HTML report.
    pub const REPORT_HTML: &str = "report.html";
    /// A shard's manifest ([`super::shard`]).
    pub const SHARD: &str = super::shard::MANIFEST_FILE;
    /// The lock file of the eval writing the directory ([`super::lock`]).
    pub const LOCK: &str = super::lock::LOCK_FILE;
    /// The CLI settings of the rows ([`super::settings`]).
    pub const SETTINGS: &str = super::settings::SETTINGS_FILE;
}

/// Writes summary.json, report.md and report.html into `dir` (each written to a
/// temporary file then renamed, so a reader never sees half a report). A report
/// that cannot be written does not stop the others.
///
/// # Errors
/// One message per report that could not be written, naming the file and the reason.
pub fn write_reports(
    dir: &Path,
    s: &summary::Summary,
    rows: &rows::ReportRows,
) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    let json = match serde_json::to_string_pretty(s) {
        Ok(j) => Some(j + "\n"),
        Err(e) => {
            errors.push(format!(
                "cannot write {}: {e}",
                dir.join(files::SUMMARY).display()
            ));
            None
        }
    };
    for (name, text) in [
        (files::SUMMARY, json),
        (files::REPORT_MD, Some(report_md::render(s, rows))),
        (files::REPORT_HTML, Some(report_html::render(s, rows))),
    ] {
        let Some(text) = text else { continue };
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)) {
            let _ = std::fs::remove_file(&tmp);
            errors.push(format!("cannot write {}: {e}", path.display()));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// A progress-bar rate with one decimal (e.g. `246.4/s`).
fn rate_text(per_sec: f64) -> String {
    if per_sec.is_finite() {
        format!("{per_sec:.1}/s")
    } else {
        "-/s".into()
    }
}

/// One retry of an eval run, for the progress bar or stderr:
/// `base/q3: retrying grade_documents[2] (attempt 2/3) after HTTP 500`.
pub fn retry_line(variant: &str, id: &str, e: &crate::retries::RetryEvent) -> String {
    format!("{variant}/{id}: {e}")
}

/// Locks the output directory for this eval ([`lock`]): another eval holding it is
/// a usage error naming its pid and the lock file; a lock left by an eval that is
/// gone is taken over with a note on stderr.
fn lock_out(dir: &Path) -> Result<Option<lock::DirLock>, EvalError> {
    let got = lock::DirLock::acquire(dir).map_err(|e| match e {
        lock::LockError::Held { .. } => EvalError::Usage(e.to_string()),
        lock::LockError::Io(m) => EvalError::Failed(m),
    })?;
    if let Some(old) = &got.stale {
        crate::errln!(
            "ragloop eval: note: took over {} left by an eval that is no longer running ({})",
            dir.join(files::LOCK).display(),
            old.describe()
        );
    }
    if let Some(why) = &got.unlocked {
        crate::errln!("ragloop eval: note: {why}");
    }
    Ok(got.lock)
}

/// With `--resume`, refuses settings that differ from the ones in the directory's
/// settings.json (a usage error naming each difference, old vs new).
fn check_settings(cfg: &EvalConfig, now: &settings::Settings) -> Result<(), EvalError> {
    if !cfg.resume || !cfg.out.is_dir() {
        return Ok(());
    }
    let Some(old) = settings::read(&cfg.out).map_err(EvalError::Settings)? else {
        return Ok(());
    };
    let diff = old.differences(now);
    if diff.is_empty() {
        return Ok(());
    }
    Err(EvalError::Usage(format!(
        "--resume with different settings than the rows in {} were run under ({}):\n  {}\nrerun with the same settings, or choose another --out",
        cfg.out.display(),
        cfg.out.join(files::SETTINGS).display(),
        diff.join("\n  ")
    )))
}

/// The compiled specs, or: with one spec, its error as it always was (a spec that
/// does not validate: [`EvalError::Failed`], exit 1); with several, a usage error
/// (exit 2) naming every spec that does not load, with its diagnostics.
fn compiled_or_usage(
    cfg: &EvalConfig,
    compiled: Vec<Result<crate::compile::CompiledSpec, LoadError>>,
) -> Result<Vec<crate::compile::CompiledSpec>, EvalError> {
    if compiled.len() == 1 {
        return Ok(vec![compiled
            .into_iter()
            .next()
            .ok_or_else(|| EvalError::Usage("no spec given".into()))??]);
    }
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for (p, c) in cfg.specs.iter().zip(compiled) {
        match c {
            Ok(c) => ok.push(c),
            Err(e) => {
                let text = e.to_string();
                bad.push(format!(
                    "{}: the spec does not validate:\n{}",
                    p.display(),
                    text.trim_end()
                ));
            }
        }
    }
    if bad.is_empty() {
        Ok(ok)
    } else {
        Err(EvalError::Usage(format!(
            "{}\n{} of {} spec(s) do not validate: nothing was run",
            bad.join("\n"),
            bad.len(),
            cfg.specs.len()
        )))
    }
}

/// Runs a whole eval that is never interrupted: [`run_eval_until`] with a token
/// nobody cancels.
///
/// # Errors
/// See [`run_eval_until`].
pub async fn run_eval(cfg: &EvalConfig) -> Result<Outcome, EvalError> {
    run_eval_until(cfg, &CancellationToken::new()).await
}

/// Runs a whole eval: checks every argument, locks the output directory, runs the
/// missing pairs, writes the reports, evaluates the gates.
///
/// Only one eval writes a directory at a time: the second fails at once with
/// [`EvalError::Usage`] naming the holder (see [`lock`]). The lock is released when
/// this returns, whatever the outcome.
///
/// When `cancel` is cancelled (the CLI does it on SIGINT/SIGTERM), no new run starts,
/// the runs in flight are cut short (no row: `--resume` runs them), every finished
/// row is already in results.jsonl, and the reports are written from the rows there
/// are, marked partial ([`summary::Summary::interrupted`]); the outcome says
/// `interrupted` (exit 130).
///
/// # Errors
/// [`EvalError::Usage`] before anything runs (unreadable dataset, duplicate ids,
/// bad lines with `strict`, unknown variant, bad gate, existing results without
/// `resume`, the directory locked by another eval); [`EvalError::Failed`] for a spec
/// that does not load, resources that cannot be opened, results that cannot be
/// written.
pub async fn run_eval_until(
    cfg: &EvalConfig,
    cancel: &CancellationToken,
) -> Result<Outcome, EvalError> {
    if cfg.specs.is_empty() {
        return Err(EvalError::Usage("no spec given".into()));
    }
    let several = cfg.specs.len() > 1;
    // Arms are named by the specs' stems: a collision is found before anything.
    let stems = arms::stems(&cfg.specs).map_err(EvalError::Usage)?;
    // Each spec is loaded and checked once, base and every variant; its faults are
    // reported after the dataset's.
    let compiled: Vec<Result<crate::compile::CompiledSpec, LoadError>> =
        cfg.specs.iter().map(|p| runner::compile_spec(p)).collect();
    // No --record may overwrite a file a spec reads (the CLI checks the other
    // inputs and the outputs), whatever else is wrong.
    if let Some(rec) = &cfg.record_to {
        for c in compiled.iter().flatten() {
            if let Some(p) = c.files.iter().find(|f| crate::paths::same_file(rec, f)) {
                return Err(EvalError::Usage(format!(
                    "--record {} would overwrite {}, an input of this eval",
                    rec.display(),
                    p.display()
                )));
            }
        }
    }
    let ds = dataset::load(&cfg.dataset)?;
    let mut warnings: Vec<String> = ds
        .errors
        .iter()
        .map(|e| format!("{}:{}: {}", cfg.dataset.display(), e.line, e.message))
        .collect();
    if cfg.strict && !ds.errors.is_empty() {
        return Err(EvalError::Usage(format!(
            "{}\n{} bad dataset line(s) and --strict: nothing was run",
            warnings.join("\n"),
            ds.errors.len()
        )));
    }
    if ds.items.is_empty() {
        return Err(EvalError::Usage(format!(
            "{}\n{}: no usable question",
            warnings.join("\n"),
            cfg.dataset.display()
        )));
    }
    // A `--hard` kind no question has is most likely a typo: the hard subset would be
    // silently smaller (or empty: recall (hard) n/a).
    if let Some(hard) = &cfg.hard {
        let kinds: HashSet<&str> = ds.items.iter().map(|i| i.kind.as_str()).collect();
        let mut seen = HashSet::new();
        for k in hard {
            if !seen.insert(k.as_str()) {
                continue;
            }
            if !kinds.contains(k.as_str()) {
                let mut known: Vec<&str> = kinds.iter().copied().collect();
                known.sort_unstable();
                warnings.push(format!(
                    "--hard: no question of {} has kind `{k}` (kinds: {})",
                    cfg.dataset.display(),
                    known.join(", ")
                ));
            }
        }
    }
    let mut specs = compiled_or_usage(cfg, compiled)?;
    let arm_list: Vec<arms::Arm> = if several {
        arms::resolve(&specs, &stems, cfg.variants.as_deref()).map_err(EvalError::Usage)?
    } else {
        runner::resolve_variants(&specs[0], cfg.variants.as_deref())?
            .into_iter()
            .map(|v| arms::Arm {
                variant: (v != runner::BASE).then(|| v.clone()),
                name: v,
                spec: 0,
            })
            .collect()
    };
    let variants: Vec<String> = arm_list.iter().map(|a| a.name.clone()).collect();
    let repeats = cfg.repeat_count();
    let mut gate_list = Vec::new();
    for g in &cfg.fail_under {
        gate_list.push(gates::parse_bound(g, false, &variants)?);
    }
    for g in &cfg.fail_over {
        gate_list.push(gates::parse_bound(g, true, &variants)?);
    }
    // The reference of --fail-if-worse ARM: `base` with one spec, the first arm with
    // several; ARM=REF names it.
    let reference = if several {
        variants[0].as_str()
    } else {
        runner::BASE
    };
    for v in &cfg.fail_if_worse {
        gate_list.push(gates::parse_not_worse_of(v, reference, &variants)?);
    }
    if cfg.retry_failed && !cfg.resume {
        return Err(EvalError::Usage(
            "--retry-failed needs --resume (it reruns the failed pairs of an earlier eval)".into(),
        ));
    }
    if cfg.out.exists() && !cfg.out.is_dir() {
        return Err(EvalError::Usage(format!(
            "--out {}: not a directory",
            cfg.out.display()
        )));
    }
    // An existing directory is locked before it is looked at: a second eval is
    // told who holds it, not that the holder's rows are there.
    let early_lock = if cfg.out.is_dir() {
        Some(lock_out(&cfg.out)?)
    } else {
        None
    };
    let results_path = cfg.out.join(files::RESULTS);
    let holds_results = || -> Result<(), EvalError> {
        if !cfg.resume && store::non_empty(&results_path) {
            return Err(EvalError::Usage(format!(
                "{} already holds results: pass --resume to continue that eval, or choose another --out",
                results_path.display()
            )));
        }
        Ok(())
    };
    holds_results()?;
    let mut settings = cfg.settings();
    if several {
        settings.specs = cfg
            .specs
            .iter()
            .zip(&specs)
            .map(|(p, c)| settings::SpecPrint {
                path: p.display().to_string(),
                fingerprint: settings::fingerprint(&c.files),
            })
            .collect();
    }
    let same_settings = || -> Result<(), EvalError> { check_settings(cfg, &settings) };
    same_settings()?;
    let mut popts = runner::PrepareOptions {
        models: cfg.models.clone(),
        overrides: cfg.overrides.clone(),
        timeout_secs: cfg.timeout_secs,
        retries: cfg.retries,
        corpus: cfg.corpus.clone(),
        progress: cfg.progress,
        calls: cfg.calls.clone(),
    };
    let programs = runner::load_arms(&mut specs, &arm_list, &popts)?;
    // A shard's manifest fingerprints every spec (settings.json only with several).
    let spec_prints: Vec<String> = if cfg.shard.is_some() {
        specs
            .iter()
            .map(|c| settings::fingerprint(&c.files))
            .collect()
    } else {
        Vec::new()
    };
    drop(specs);
    if let Some(a) = &cfg.single_shot {
        if !variants.contains(a) {
            return Err(EvalError::Usage(format!(
                "--single-shot: `{a}` is not an evaluated arm ({})",
                variants.join(", ")
            )));
        }
    }
    let judge_repeats = cfg.judge_repeats.max(1);
    // `--judge none`: no judge at all (the judge metrics are n/a).
    let no_judge = cfg.judge.as_deref().map(str::trim) == Some("none");
    let judge_loaded = match cfg.judge.as_deref().map(str::trim) {
        None | Some("offline") | Some("none") => None,
        Some(arg) => Some(
            judge::model::ModelJudge::load(
                arg,
                cfg.timeout_secs,
                cfg.retries,
                popts.calls.replay.is_some(),
            )
            .map_err(EvalError::Usage)?,
        ),
    };
    // Every usage check is done: only now may --record create (truncate) its file.
    if let (None, Some(path)) = (&popts.calls.record, &cfg.record_to) {
        let w = if cfg.resume {
            crate::providers::cassette::CassetteWriter::append(path)
        } else {
            crate::providers::cassette::CassetteWriter::create(path)
        }
        .map_err(|e| EvalError::Usage(format!("--record: {e}")))?;
        popts.calls.record = Some(std::sync::Arc::new(w));
    }
    let mut prepared = runner::open_repeats(programs, &popts, repeats)?;
    let the_judge = std::sync::Arc::new(match judge_loaded {
        None => judge::Judge::offline(judge_repeats),
        Some(l) => judge::Judge {
            name: cfg.judge.clone().unwrap_or_default(),
            kind: judge::JudgeKind::Model(Box::new(
                l.open(
                    popts.calls.cache.clone(),
                    popts.calls.record.clone(),
                    popts.calls.replay.clone(),
                )
                .map_err(EvalError::Failed)?,
            )),
            repeats: judge_repeats,
        },
    });
    if !no_judge {
        for p in &mut prepared {
            p.judge = Some(std::sync::Arc::clone(&the_judge));
        }
    }
    std::fs::create_dir_all(&cfg.out)
        .map_err(|e| EvalError::Failed(format!("cannot create {}: {e}", cfg.out.display())))?;
    // Held until this returns (dropping it removes the lock file).
    let _lock = match early_lock {
        Some(l) => l,
        None => {
            let l = lock_out(&cfg.out)?;
            // Another eval may have made and filled the directory meanwhile.
            holds_results()?;
            same_settings()?;
            l
        }
    };
    if cfg.resume
        && store::non_empty(&results_path)
        && settings::read(&cfg.out).ok().flatten().is_none()
    {
        warnings.push(format!(
            "{}: no {} (written by an older ragloop): the earlier rows' settings cannot be checked",
            cfg.out.display(),
            files::SETTINGS
        ));
    }
    settings::write(&cfg.out, &settings)?;
    if let Some(sh) = cfg.shard {
        shard::write(
            &cfg.out,
            &shard::Manifest {
                version: 1,
                shard: sh,
                specs: cfg
                    .specs
                    .iter()
                    .zip(&spec_prints)
                    .map(|(p, f)| shard::FilePrint {
                        path: p.display().to_string(),
                        fingerprint: f.clone(),
                    })
                    .collect(),
                dataset: shard::FilePrint {
                    path: cfg.dataset.display().to_string(),
                    fingerprint: settings::fingerprint(std::slice::from_ref(&cfg.dataset)),
                },
                arms: arm_list
                    .iter()
                    .map(|a| shard::ArmPrint {
                        name: a.name.clone(),
                        spec: cfg.specs[a.spec].display().to_string(),
                        variant: a.variant.clone().unwrap_or_else(|| runner::BASE.into()),
                    })
                    .collect(),
                several,
                repeats,
                hard_kinds: cfg.hard_kinds(),
                single_shot: cfg.single_shot.clone(),
                fail_under: cfg.fail_under.clone(),
                fail_over: cfg.fail_over.clone(),
                fail_if_worse: cfg.fail_if_worse.clone(),
                settings: settings.clone(),
            },
        )?;
    }
    let existing = if cfg.resume {
        store::read_for_resume(&results_path)?
    } else {
        store::Existing::default()
    };
    let mut existing = existing;
    if cfg.retry_failed {
        let before = existing.rows.len();
        let ids: HashSet<&str> = ds.items.iter().map(|i| i.id.as_str()).collect();
        existing.rows.retain(|r| {
            !(r.status == Status::Failed
                && variants.contains(&r.variant)
                && r.repeat < repeats
                && ids.contains(r.id.as_str()))
        });
        let dropped = before - existing.rows.len();
        if dropped > 0 || existing.duplicates > 0 {
            store::rewrite(&results_path, &existing.rows)?;
        }
        if dropped > 0 {
            warnings.push(format!(
                "--retry-failed: running {dropped} failed pair(s) again"
            ));
        }
    }
    if let Some(n) = existing.torn_bytes {
        warnings.push(format!(
            "{}: dropped a torn last line ({n} bytes) left by an interrupted eval",
            results_path.display()
        ));
    }
    let mut writer = store::Writer::open(&results_path, !cfg.resume)?;
    let ids: HashSet<&str> = ds.items.iter().map(|i| i.id.as_str()).collect();
    let in_slice = |r: &store::Row| shard::selected(cfg.shard, &r.variant, &r.id, r.repeat);
    let done: HashSet<store::PairKey> = existing
        .rows
        .iter()
        .filter(|r| ids.contains(r.id.as_str()) && r.repeat < repeats && in_slice(r))
        .map(store::Row::key)
        .collect();
    let resumed_rows = done.iter().filter(|(v, _, _)| variants.contains(v)).count();
    let pairs = match cfg.shard {
        None => variants.len() * ds.items.len() * repeats as usize,
        Some(sh) => variants
            .iter()
            .map(|v| {
                ds.items
                    .iter()
                    .map(|it| (0..repeats).filter(|r| sh.contains(v, &it.id, *r)).count())
                    .sum::<usize>()
            })
            .sum(),
    };
    // The rows the summary and reports read: every selected row, slim, and the
    // reports' capped row tables (see `rows`): memory does not grow with answers.
    let mut report = rows::ReportRows::new(&variants);
    let selected = |r: &store::Row| {
        variants.contains(&r.variant)
            && ids.contains(r.id.as_str())
            && r.repeat < repeats
            && in_slice(r)
    };
    let resumed: Vec<store::Row> = std::mem::take(&mut existing.rows);
    for r in resumed {
        if selected(&r) {
            report.push(r);
        }
    }
    let todo = pairs - resumed_rows;
    let bar = if cfg.progress {
        let b = indicatif::ProgressBar::new(todo as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} eval [{bar:30}] {pos}/{len} runs {rate} eta {eta} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .with_key(
                "rate",
                |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{}", rate_text(s.per_sec()));
                },
            )
            .progress_chars("=> "),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut failed_now = 0usize;
    let started = std::time::Instant::now();
    // The bar's message: the failed runs so far, then the latest retry. Retries are
    // never silent: without a bar (stderr is not a terminal) each is a line on stderr.
    let last_retry = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let message = |failed: usize, retry: &str| match (failed, retry.is_empty()) {
        (0, _) => retry.to_string(),
        (n, true) => format!("{n} failed"),
        (n, false) => format!("{n} failed; {retry}"),
    };
    let failed_shown = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let on_retry: runner::OnRetry = {
        let (bar, last_retry, failed_shown) = (
            bar.clone(),
            std::sync::Arc::clone(&last_retry),
            std::sync::Arc::clone(&failed_shown),
        );
        let drawn = cfg.progress;
        std::sync::Arc::new(
            move |variant: &str, id: &str, e: &crate::retries::RetryEvent| {
                let line = retry_line(variant, id, e);
                if drawn {
                    let failed = failed_shown.load(std::sync::atomic::Ordering::Relaxed);
                    bar.set_message(message(failed, &line));
                    if let Ok(mut l) = last_retry.lock() {
                        *l = line;
                    }
                } else {
                    crate::errln!("ragloop eval: {line}");
                }
            },
        )
    };
    let new = runner::execute(
        &prepared,
        &ds.items,
        &done,
        cfg.shard,
        cfg.concurrency,
        &mut writer,
        cancel,
        |row| {
            let failed = row.status == Status::Failed;
            report.push(row);
            if failed {
                failed_now += 1;
                failed_shown.store(failed_now, std::sync::atomic::Ordering::Relaxed);
                let retry = last_retry.lock().map(|l| l.clone()).unwrap_or_default();
                bar.set_message(message(failed_now, &retry));
            }
            bar.inc(1);
        },
        Some(on_retry),
    )
    .await;
    let run_seconds = started.elapsed().as_secs_f64();
    let report_started = std::time::Instant::now();
    bar.finish_and_clear();
    let new = new.map_err(|e| {
        EvalError::Failed(format!(
            "{e}; the rows written before it are in {}: rerun with --resume",
            results_path.display()
        ))
    })?;
    let new_rows = new.written;
    let (cancelled, not_started) = (new.cancelled, new.not_started);
    let failed_runs = report.failed.total;
    let spec_label = cfg
        .specs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let arms_info = if several {
        arm_list
            .iter()
            .map(|a| summary::ArmInfo {
                name: a.name.clone(),
                spec: cfg.specs[a.spec].display().to_string(),
                variant: a.variant.clone().unwrap_or_else(|| runner::BASE.into()),
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut summary = finish::summarize(
        &finish::Finish {
            spec_label,
            dataset_label: cfg.dataset.display().to_string(),
            items: &ds.items,
            dataset_errors: &ds.errors,
            variants: &variants,
            arms: arms_info,
            repeats,
            hard_kinds: cfg.hard_kinds(),
            shard: cfg.shard,
            settings,
            single_shot: cfg.single_shot.as_deref(),
            gates: &gate_list,
        },
        &report.rows,
    );
    let interrupted = cancel.is_cancelled() && (cancelled > 0 || not_started > 0);
    if interrupted {
        let i = summary::Interruption {
            pairs,
            with_rows: summary.results.values().map(|r| r.rows).sum(),
            new_rows,
            cancelled,
            not_started,
        };
        warnings.push(format!("interrupted: {}", i.describe()));
        summary.interrupted = Some(i);
    }
    let report_errors = write_reports(&cfg.out, &summary, &report)
        .err()
        .unwrap_or_default();
    Ok(Outcome {
        report_seconds: report_started.elapsed().as_secs_f64(),
        interrupted,
        report_errors,
        summary,
        new_rows,
        resumed_rows,
        run_seconds,
        failed_runs,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn progress_rate_has_one_decimal() {
        assert_eq!(super::rate_text(246.413_6), "246.4/s");
        assert_eq!(super::rate_text(f64::INFINITY), "-/s");
    }
}
