//! Running every (variant, question) pair: programs and resources opened once per
//! variant, pairs run concurrently on the tokio runtime, each finished pair turned
//! into a [`Row`] and handed to one writer.
use super::arms::Arm;
use super::dataset::Item;
use super::metrics::row_metrics;
use super::store::{PairKey, Row, StoreError, Usage, Writer};
use crate::compile::{compile, CompileOptions, CompiledSpec, LoadError, SpecOverrides};
use crate::retries::RetryEvent;
use crate::runtime::{
    run_until, CancellationToken, Observer, Program, ResourceOptions, Resources, RunInput,
    RunResult, StepRecord,
};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

pub use super::arms::{spec_variants, BASE};

/// One arm (a variant of a spec), for one repeat, ready to run.
pub struct Prepared {
    /// The arm's name: `base` or the variant name (several specs: `STEM` or
    /// `STEM:VARIANT`, see [`super::arms`]).
    pub name: String,
    /// The repeat index (0 for the first; see [`ResourceOptions::repeat`]).
    pub repeat: u32,
    /// The compiled program.
    pub program: Arc<Program>,
    /// Its resources.
    pub resources: Arc<Resources>,
    /// The judge of the eval's faithfulness and answer relevancy (`None`: rows get
    /// no judge metrics).
    pub judge: Option<Arc<super::judge::Judge>>,
}

/// How to open every variant.
#[derive(Clone, Debug, Default)]
pub struct PrepareOptions {
    /// `--model NAME=PROVIDER[:MODEL]` overrides, applied to every variant.
    pub models: Vec<String>,
    /// `--override PATH=VALUE` changes, applied to every variant (before `models`;
    /// see [`crate::runtime::overrides`]).
    pub overrides: Vec<String>,
    /// `--timeout SECS` for every network call of every variant.
    pub timeout_secs: Option<f64>,
    /// `--retries N` for every call of every variant.
    pub retries: Option<u32>,
    /// Corpus directory for every retriever.
    pub corpus: Option<PathBuf>,
    /// Draw a progress bar while an index is built.
    pub progress: bool,
    /// LLM answer layers shared by every variant and run (see
    /// [`ResourceOptions`]): the response cache, the cassette every exchange is
    /// recorded into, the cassette every model answers from.
    pub calls: CallLayers,
}

/// The response cache, recording and replay layers of an eval, shared by all runs.
#[derive(Clone, Debug, Default)]
pub struct CallLayers {
    /// Response cache for temperature-0 network models.
    pub cache: Option<Arc<crate::providers::cache::ResponseCache>>,
    /// Record every LLM exchange of every run here.
    pub record: Option<Arc<crate::providers::cassette::CassetteWriter>>,
    /// Answer every model from this cassette (no key needed).
    pub replay: Option<Arc<crate::providers::cassette::Cassette>>,
}

impl CallLayers {
    /// Takes the layers out of options filled by the CLI's `--record/--replay/--no-cache`.
    pub fn from_options(opts: &mut ResourceOptions) -> CallLayers {
        CallLayers {
            cache: opts.cache.take(),
            record: opts.record.take(),
            replay: opts.replay.take(),
        }
    }
}

/// Loads and checks the spec once: base spec and every variant (see
/// [`crate::compile`]).
///
/// # Errors
/// [`LoadError::Usage`] for a spec variant named `base` (reserved for the spec
/// without any variant); [`LoadError::Invalid`] when the spec does not validate.
pub fn compile_spec(spec: &Path) -> Result<CompiledSpec, LoadError> {
    compile(
        spec,
        &CompileOptions {
            no_environment: true,
        },
    )
    .map_err(|e| {
        // `base` names the spec without a variant: a variant of that name would be
        // ambiguous (validation rejects it with E027; say so as a usage error).
        if e.variant_names.iter().any(|v| v == BASE) {
            LoadError::Usage(format!(
                "{}: a variant is named `{BASE}`, which is reserved for the spec without any variant (E027); rename it",
                spec.display()
            ))
        } else {
            e.into()
        }
    })
}

/// Resolves `--variants`: `None` is `base` followed by every variant of the spec;
/// otherwise the listed names in order (`base` only when listed).
///
/// # Errors
/// [`LoadError::Usage`] naming an unknown variant and the known ones, a name
/// listed twice, or no name.
pub fn resolve_variants(
    compiled: &CompiledSpec,
    wanted: Option<&[String]>,
) -> Result<Vec<String>, LoadError> {
    let known = spec_variants(compiled);
    let Some(wanted) = wanted else {
        return Ok(known);
    };
    let mut out: Vec<String> = Vec::new();
    for w in wanted {
        let w = w.trim();
        if w.is_empty() {
            return Err(LoadError::Usage("--variants: empty variant name".into()));
        }
        if !known.iter().any(|k| k == w) {
            return Err(LoadError::Usage(format!(
                "--variants: unknown variant `{w}`; {} defines: {}",
                compiled.path.display(),
                known.join(", ")
            )));
        }
        if out.iter().any(|o| o == w) {
            return Err(LoadError::Usage(format!(
                "--variants: `{w}` is listed twice"
            )));
        }
        out.push(w.to_string());
    }
    if out.is_empty() {
        return Err(LoadError::Usage("--variants: no variant named".into()));
    }
    Ok(out)
}

/// Loads and compiles every variant, checks API keys, then opens the resources of
/// each ([`load`] then [`open`]).
///
/// # Errors
/// See [`load`] and [`open`].
pub fn prepare(
    compiled: &mut CompiledSpec,
    variants: &[String],
    opts: &PrepareOptions,
) -> Result<Vec<Prepared>, LoadError> {
    open(load(compiled, variants, opts)?, opts)
}

/// Loads and compiles every variant and checks that every model has its API key.
///
/// # Errors
/// [`LoadError`] for a spec or variant that does not load; a missing API key is
/// [`LoadError::Usage`] (every model at once; none with a replayed cassette).
pub fn load(
    compiled: &mut CompiledSpec,
    variants: &[String],
    opts: &PrepareOptions,
) -> Result<Vec<(String, Arc<Program>)>, LoadError> {
    let changes = changes(opts);
    let programs = variants
        .iter()
        .map(|name| {
            let v = (name != BASE).then_some(name.as_str());
            compiled
                .program_with(v, &changes)
                .map(|p| (name.clone(), p))
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_keys(&programs, opts)?;
    Ok(programs)
}

/// [`load`] over several specs: compiles each arm's variant of its spec (`specs`
/// indexed by [`Arm::spec`]) and checks every model's API key.
///
/// # Errors
/// As [`load`].
pub fn load_arms(
    specs: &mut [CompiledSpec],
    arms: &[Arm],
    opts: &PrepareOptions,
) -> Result<Vec<(String, Arc<Program>)>, LoadError> {
    let changes = changes(opts);
    let mut programs = Vec::with_capacity(arms.len());
    for a in arms {
        let Some(c) = specs.get_mut(a.spec) else {
            return Err(LoadError::Usage(format!("arm `{}`: no such spec", a.name)));
        };
        programs.push((
            a.name.clone(),
            c.program_with(a.variant.as_deref(), &changes)?,
        ));
    }
    check_keys(&programs, opts)?;
    Ok(programs)
}

fn changes(opts: &PrepareOptions) -> SpecOverrides {
    SpecOverrides {
        set: opts.overrides.clone(),
        models: opts.models.clone(),
        timeout_secs: opts.timeout_secs,
        retries: opts.retries,
    }
}

/// Every model of every program has its API key (none needed with a replayed
/// cassette), else a usage error listing each missing one once.
fn check_keys(programs: &[(String, Arc<Program>)], opts: &PrepareOptions) -> Result<(), LoadError> {
    let mut missing: Vec<String> = Vec::new();
    // With a replayed cassette every model, chat and embedding, answers from it: no
    // key is needed. Web-search keys are needed even when replaying.
    let check_keys = opts.calls.replay.is_none();
    for (_, p) in programs {
        let spec = &p.spec;
        let scope = crate::providers::keys::KeyScope {
            replaying: !check_keys,
            live_calls: true,
            ..Default::default()
        };
        for m in crate::providers::keys::missing(spec, &scope) {
            if !missing.contains(&m) {
                missing.push(m);
            }
        }
    }
    if !missing.is_empty() {
        return Err(LoadError::Usage(missing.join("\n")));
    }
    Ok(())
}

/// Opens the resources of loaded variants with the layers of `opts`.
///
/// # Errors
/// [`LoadError::Compile`] naming the variant and the resource at fault.
pub fn open(
    programs: Vec<(String, Arc<Program>)>,
    opts: &PrepareOptions,
) -> Result<Vec<Prepared>, LoadError> {
    open_repeats(programs, opts, 1)
}

/// [`open`] for `--repeats N`: each program's resources are opened once per repeat
/// (repeat `r` ≥ 1 with [`ResourceOptions::repeat`] = `r`, so its calls have their own
/// cache and cassette keys; repeat 0 exactly as [`open`]). Arm-major: every repeat
/// of the first arm, then of the next.
///
/// # Errors
/// [`LoadError::Resources`] naming the variant and the resource at fault.
pub fn open_repeats(
    programs: Vec<(String, Arc<Program>)>,
    opts: &PrepareOptions,
    repeats: u32,
) -> Result<Vec<Prepared>, LoadError> {
    let mut out = Vec::new();
    for (name, program) in programs {
        for repeat in 0..repeats.max(1) {
            let res = Resources::prepare(
                &program,
                ResourceOptions {
                    corpus: opts.corpus.clone(),
                    progress: opts.progress,
                    cache: opts.calls.cache.clone(),
                    record: opts.calls.record.clone(),
                    replay: opts.calls.replay.clone(),
                    repeat: (repeat > 0).then_some(repeat),
                    ..ResourceOptions::default()
                },
            )
            .map_err(|error| LoadError::Resources {
                variant: name.clone(),
                error,
            })?;
            out.push(Prepared {
                name: name.clone(),
                repeat,
                program: Arc::clone(&program),
                resources: Arc::new(res),
                judge: None,
            });
        }
    }
    Ok(out)
}

/// Collects, for each successful execution of a `retrieve` node, the sources of the
/// documents it returned, in rank order, from its step record
/// ([`StepRecord::documents`]).
struct Capture {
    passes: Vec<Vec<String>>,
    /// The (source, yes) verdicts of the run's grading steps
    /// ([`super::judge::calibration::grading_step`]).
    graded: Vec<(String, bool)>,
    /// Some step graded documents.
    grading: bool,
    /// Where retries go, with the run's variant and question id.
    on_retry: Option<(OnRetry, String, String)>,
}

/// Called for every retry of every run of an eval, as it happens, with the run's
/// variant and question id (the eval shows it on its progress bar).
pub type OnRetry = Arc<dyn Fn(&str, &str, &RetryEvent) + Send + Sync>;

impl Observer for Capture {
    fn retry(&mut self, e: &RetryEvent) {
        if let Some((f, variant, id)) = &self.on_retry {
            f(variant, id, e);
        }
    }
    fn step(&mut self, r: &StepRecord) {
        if r.kind == "retrieve" && r.error.is_none() {
            let docs = r.documents.as_deref().unwrap_or_default();
            self.passes
                .push(docs.iter().map(|d| d.source.clone()).collect());
        }
        if r.error.is_none() {
            if let Some(v) = super::judge::calibration::grading_step(r.kind, r.items.as_deref()) {
                self.grading = true;
                self.graded.extend(v);
            }
        }
    }
    fn finish(&mut self, _: &RunResult) {}
}

/// Turns a run result into a row (metrics included).
pub fn make_row(
    variant: &str,
    item: &Item,
    r: &RunResult,
    retrieved: Vec<Vec<String>>,
    latency_ms: f64,
) -> Row {
    let mut row = Row {
        variant: variant.to_string(),
        id: item.id.clone(),
        repeat: 0,
        kind: item.kind.clone(),
        status: r.status,
        answer: r.answer.clone(),
        sources: r.sources.clone(),
        path: r.path.clone(),
        iterations: r.iterations,
        steps: r.steps,
        retrieved,
        retrieval: true,
        usage: Usage::from(&r.usage),
        latency_ms,
        error: r.error.clone(),
        metrics: Default::default(),
    };
    row.metrics = row_metrics(item, &row);
    row
}

/// Runs one question under one prepared variant.
pub async fn run_one(p: &Prepared, item: &Item) -> Row {
    run_observed(p, item, None, &CancellationToken::new()).await
}

async fn run_observed(
    p: &Prepared,
    item: &Item,
    on_retry: Option<OnRetry>,
    cancel: &CancellationToken,
) -> Row {
    let shown_id = if p.repeat == 0 {
        item.id.clone()
    } else {
        format!("{} (repeat {})", item.id, p.repeat)
    };
    let mut cap = Capture {
        passes: Vec::new(),
        graded: Vec::new(),
        grading: false,
        on_retry: on_retry.map(|f| (f, p.name.clone(), shown_id)),
    };
    let input = RunInput {
        question: Some(item.question.clone()),
        sets: Vec::new(),
    };
    let started = Instant::now();
    let result = run_until(&p.program, &p.resources, &input, &mut cap, cancel).await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut row = make_row(&p.name, item, &result, cap.passes, ms);
    row.repeat = p.repeat;
    row.retrieval = retrieves(&p.program);
    // Seed 004's iterations are retrieval passes. A graph whose entry is not its
    // retrieve node (a classifier up front) visits the entry once however often it
    // retrieves, so an arm that retrieves counts its passes.
    if row.retrieval && !row.retrieved.is_empty() {
        row.iterations = u32::try_from(row.retrieved.len()).unwrap_or(u32::MAX);
    }
    if cap.grading {
        row.metrics.grader = Some(super::judge::calibration::count(&cap.graded, &item.sources));
    }
    if let Some(j) = &p.judge {
        if result.status != crate::runtime::Status::Interrupted {
            let field = p.program.spec.output.documents.as_deref();
            let context = super::judge::context_of(&result, field);
            // The judge's calls end with the run's token like the run's own: a row
            // whose judging was cut short is interrupted (no row is written, so
            // `--resume` runs and judges it again), never a row of judge failures.
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    row.status = crate::runtime::Status::Interrupted;
                }
                judged = super::judge::judge_row(j, item, &row, &context) => {
                    row.metrics.judge = Some(judged);
                }
            }
        }
    }
    row
}

/// Whether a program has a `retrieve` node (else its rows have no retrieval
/// metric, [`Row::retrieval`]).
fn retrieves(p: &Program) -> bool {
    p.spec.nodes.values().any(|n| n.kind() == "retrieve")
}

/// What [`execute`] ran.
#[derive(Debug, Default)]
pub struct Executed {
    /// Rows written (each handed to `on_row`).
    pub written: usize,
    /// Runs cut short by the cancellation token (status interrupted): no row written.
    pub cancelled: usize,
    /// Pairs not started because the token was cancelled first.
    pub not_started: usize,
}

/// Runs every (arm, question, repeat) not in `done` and in `shard` (every pair
/// without one; [`super::shard`]) (in `variants` order: all
/// questions of the first prepared arm and repeat are started first), at most `concurrency` at a time, appending each row to
/// `writer` as it finishes and handing it to `on_row` after it is written (nothing
/// is kept here, so memory does not grow with the dataset). `on_retry` sees
/// every retry of every run as it happens.
///
/// A run that panics is recorded as a failed row naming the panic. Stops at the first
/// write error (the rows written so far stay on disk). Once `cancel` is cancelled no
/// run is started, the runs in flight end as interrupted (their calls dropped, see
/// [`run_until`]) and get no row, so `--resume` runs them again; every row finished
/// before is written.
///
/// # Errors
/// The write error ([`StoreError::Write`]).
// The hooks (row, retry, cancel) are independent inputs of one loop; a struct would
// only rename them.
#[allow(clippy::too_many_arguments)]
pub async fn execute(
    variants: &[Prepared],
    items: &[Item],
    done: &HashSet<PairKey>,
    shard: Option<super::shard::Shard>,
    concurrency: usize,
    writer: &mut Writer,
    cancel: &CancellationToken,
    mut on_row: impl FnMut(Row),
    on_retry: Option<OnRetry>,
) -> Result<Executed, StoreError> {
    let items: Vec<Arc<Item>> = items.iter().cloned().map(Arc::new).collect();
    let mut queue = Vec::new();
    for (vi, v) in variants.iter().enumerate() {
        for it in &items {
            if super::shard::selected(shard, &v.name, &it.id, v.repeat)
                && !done.contains(&(v.name.clone(), it.id.clone(), v.repeat))
            {
                queue.push((vi, Arc::clone(it)));
            }
        }
    }
    let shared: Vec<Arc<Prepared>> = variants
        .iter()
        .map(|v| {
            Arc::new(Prepared {
                name: v.name.clone(),
                repeat: v.repeat,
                program: Arc::clone(&v.program),
                resources: Arc::clone(&v.resources),
                judge: v.judge.clone(),
            })
        })
        .collect();
    let mut pending = queue.into_iter();
    let mut set = tokio::task::JoinSet::new();
    let mut meta: HashMap<tokio::task::Id, (usize, Arc<Item>)> = HashMap::new();
    let concurrency = concurrency.max(1);
    let mut out = Executed::default();
    loop {
        while set.len() < concurrency && !cancel.is_cancelled() {
            let Some((vi, item)) = pending.next() else {
                break;
            };
            let p = Arc::clone(&shared[vi]);
            let it = Arc::clone(&item);
            let on_retry = on_retry.clone();
            let c = cancel.clone();
            let h = set.spawn(async move { run_observed(&p, &it, on_retry, &c).await });
            meta.insert(h.id(), (vi, item));
        }
        let Some(joined) = set.join_next_with_id().await else {
            break;
        };
        let row = match joined {
            Ok((id, row)) => {
                meta.remove(&id);
                row
            }
            Err(e) => {
                let Some((vi, item)) = meta.remove(&e.id()) else {
                    continue;
                };
                let mut r = RunResult::failed(Some(&variants[vi].name), "the run panicked".into());
                if e.is_cancelled() {
                    r.error = Some("the run was cancelled".into());
                }
                let mut row = make_row(&variants[vi].name, &item, &r, Vec::new(), 0.0);
                row.repeat = variants[vi].repeat;
                row.retrieval = retrieves(&variants[vi].program);
                row
            }
        };
        if row.status == crate::runtime::Status::Interrupted {
            out.cancelled += 1;
            continue;
        }
        writer.append(&row)?;
        out.written += 1;
        on_row(row);
    }
    out.not_started = pending.count();
    Ok(out)
}
