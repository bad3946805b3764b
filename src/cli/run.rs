//! `ragloop run SPEC --question TEXT`: execute a spec, offline by default.
//!
//! Exit status: 0 generated, 3 exhausted or fallback, 4 limit, 1 failed (or the spec
//! does not validate, or its resources cannot be opened), 2 usage error, 130
//! interrupted by SIGINT/SIGTERM (the run in flight ends with status `interrupted`,
//! with its result and trace; with `--input`, no further line is run). With
//! `--input`, the most severe status over all questions decides (failed > limit >
//! exhausted/fallback > generated), and a bad input line counts as failed. 6: the
//! run paused before a node (`interrupt_before`, `--interrupt-before`): status
//! `interrupted`, resumed with `--thread ID --resume`.
//!
//! Threads (`--thread`, `--resume`, `--checkpoints`; see docs/checkpoints.md): a
//! run on a thread is checkpointed after every step. A run that can pause (a node
//! with `interrupt_before`, or `--interrupt-before`) always runs on a thread: a new
//! one named `run-…` when `--thread` is not given, printed when it pauses. `--input`
//! runs have no thread, so they refuse specs and flags that pause.
use ragloop::checkpoint::{self, Mode};
use ragloop::compile::{compile, CompileOptions, LoadError};
use ragloop::runtime::state::parse_set;
use ragloop::runtime::trace::Tee;
use ragloop::runtime::{
    run_until as run_program, JsonlTrace, Observer, ResourceOptions, Resources, RunInput,
    RunResult, Status, Verbose,
};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `ragloop run`.
#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 generated, 3 exhausted or fallback, 4 limit, 1 failed or invalid spec, 2 usage error (a missing API key included), 6 paused before a node (interrupt_before; resume with --thread ID --resume), 130 interrupted (SIGINT/SIGTERM)."
)]
pub struct RunArgs {
    /// The spec file.
    pub spec: PathBuf,
    /// The question.
    #[arg(long, short, conflicts_with = "input")]
    pub question: Option<String>,
    /// Questions, one per line: `{"id": ..., "question": ...}` or a JSON string. One
    /// JSON result line per question is written to stdout.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Corpus directory for every retriever, instead of the spec's.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Apply a variant of the spec.
    #[arg(long)]
    pub variant: Option<String>,
    /// Override a model: NAME=PROVIDER[:MODEL][@BASE_URL], e.g.
    /// grader=openai:gpt-4o-mini or grader=openai:llama3.1:8b@http://localhost:11434/v1
    /// (repeatable).
    #[arg(long = "model", value_name = "NAME=PROVIDER[:MODEL][@BASE_URL]")]
    pub models: Vec<String>,
    /// --override, --timeout, --retries.
    #[command(flatten)]
    pub changes: super::overrides::SpecArgs,
    /// Set a state field: FIELD=VALUE, VALUE parsed as JSON, else a string (repeatable).
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    pub sets: Vec<String>,
    /// Write one JSON line per step to this file.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print each step on stderr.
    #[arg(long, short)]
    pub verbose: bool,
    /// Print the text of the llm nodes to stdout as it arrives (the openai and
    /// anthropic providers stream it; a cached or replayed answer comes whole), then
    /// the summary on stderr. Not with --json or --input.
    #[arg(long, conflicts_with_all = ["json", "input"])]
    pub stream: bool,
    /// Response cache, cassette recording and replay.
    #[command(flatten)]
    pub calls: super::calls::CallArgs,
    /// Run on this thread: a checkpoint after every step, so a killed, interrupted
    /// or paused run can be resumed. Without --resume, a new run on the thread.
    #[arg(long, value_name = "ID", conflicts_with = "input")]
    pub thread: Option<String>,
    /// Continue the thread's latest run from its last checkpoint (completed steps
    /// are not run again); each --set patches its state first, checked against the
    /// state schema.
    #[arg(long, requires = "thread", conflicts_with_all = ["question", "input"])]
    pub resume: bool,
    /// Pause before this node (repeatable): status interrupted, exit 6, resumed
    /// with --thread ID --resume.
    #[arg(
        long = "interrupt-before",
        value_name = "NODE",
        conflicts_with = "input"
    )]
    pub interrupt_before: Vec<String>,
    /// The checkpoint database: a SQLite file (default:
    /// <cache dir>/checkpoints/threads.sqlite3) or a postgres://USER[:PASSWORD]@HOST[:PORT]/DB URL.
    #[arg(long, value_name = "FILE|URL")]
    pub checkpoints: Option<String>,
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    ragloop::errln!("ragloop run: {msg}");
    ExitCode::from(super::EXIT_USAGE)
}

fn result_json(r: &RunResult, id: Option<&Value>) -> Value {
    result_json_on(r, id, None)
}

/// The result as `--json` prints it; on a thread also `thread`, `run` and (when it
/// paused) `paused_before`.
pub(super) fn result_json_on(
    r: &RunResult,
    id: Option<&Value>,
    thread: Option<(&str, u32)>,
) -> Value {
    let mut v = r.to_json();
    if let (Some(id), Some(obj)) = (id, v.as_object_mut()) {
        // `id` before `variant`, as always.
        let variant = obj.remove("variant");
        obj.insert("id".into(), id.clone());
        if let Some(variant) = variant {
            obj.insert("variant".into(), variant);
        }
    }
    if let (Some((thread, run)), Some(obj)) = (thread, v.as_object_mut()) {
        obj.insert("thread".into(), json!(thread));
        obj.insert("run".into(), json!(run));
        if let Some(n) = &r.paused_before {
            obj.insert("paused_before".into(), json!(n));
        }
    }
    v
}

/// Human output of one run. The answer and the sources come from LLMs, documents
/// and web results: their control characters are escaped ([`ragloop::text`]), the
/// answer keeping its newlines and tabs, a source kept on its line.
pub(super) fn print_human(r: &RunResult) {
    let mut out = std::io::stdout().lock();
    if let Some(a) = &r.answer {
        let _ = writeln!(out, "{}\n", ragloop::text::escape_text(a));
    }
    print_summary(r, &mut out);
}

/// The result as a person reads it: [`print_human`], or with `stream` (the answer
/// was streamed to stdout, `--stream`) the summary alone, on stderr.
pub(super) fn print_result(r: &RunResult, stream: bool) {
    if stream {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err);
        print_summary(r, &mut err);
    } else {
        print_human(r);
    }
}

/// The summary of a run after its answer (sources, path, status, usage), to `out`;
/// the error on stderr.
fn print_summary(r: &RunResult, out: &mut dyn Write) {
    use ragloop::text::escape_line;
    if !r.sources.is_empty() && r.status == Status::Generated {
        let _ = writeln!(out, "Sources:");
        for s in &r.sources {
            let _ = writeln!(out, "  - {}", escape_line(s));
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "Path: {} ({} step(s), {} iteration(s))",
        escape_line(&r.path.join(" -> ")),
        r.steps,
        r.iterations
    );
    let _ = writeln!(out, "Status: {}", r.status);
    if let Some(n) = &r.paused_before {
        let _ = writeln!(out, "Paused before: {}", escape_line(n));
    }
    // Paid runs say what they cost.
    if r.usage.tokens.cost_usd > 0.0 {
        let _ = writeln!(out, "Usage: {}", r.usage.summary());
    }
    if r.usage.cached_calls > 0 {
        let _ = writeln!(
            out,
            "Cached: {} of {} LLM call(s) answered from the response cache or a cassette",
            r.usage.cached_calls, r.usage.calls
        );
    }
    if let Some(e) = &r.error {
        ragloop::errln!("ragloop run: {e}");
    }
}

/// Runs `ragloop run`.
pub fn run(args: RunArgs) -> ExitCode {
    let question = match (&args.question, &args.input) {
        (Some(q), _) if q.trim().is_empty() => return usage("the question is empty"),
        (Some(q), _) => Some(q.clone()),
        (None, Some(_)) => None,
        (None, None) if args.resume => None,
        (None, None) => return usage(
            "give a question with --question TEXT, or a file of questions with --input FILE.jsonl",
        ),
    };
    let mut sets = Vec::new();
    for s in &args.sets {
        match parse_set(s) {
            Ok(kv) => sets.push(kv),
            Err(e) => return usage(e),
        }
    }
    // Read the questions before anything expensive.
    let lines = match &args.input {
        None => None,
        Some(path) => match std::fs::read(path) {
            Err(e) => return usage(format!("cannot read {}: {e}", path.display())),
            Ok(bytes) => match String::from_utf8(bytes) {
                Err(e) => {
                    return usage(format!(
                        "{} is not UTF-8 (byte offset {})",
                        path.display(),
                        e.utf8_error().valid_up_to()
                    ))
                }
                Ok(text) => Some(text),
            },
        },
    };
    if let (Some(text), Some(path)) = (&lines, &args.input) {
        if text
            .lines()
            .all(|l| l.trim_matches(['\u{feff}', ' ', '\t', '\r']).is_empty())
        {
            let what = if text.trim_matches('\u{feff}').is_empty() {
                "the file is empty"
            } else {
                "only blank lines"
            };
            return usage(format!("{}: no question ({what})", path.display()));
        }
    }
    let changes = args.changes.changes(&args.models);
    // Loaded and checked once (base spec and every variant), then the variant's
    // program with the command-line changes.
    let invalid = |text: &str| {
        ragloop::errp!("{text}");
        ragloop::errln!(
            "ragloop run: {} does not validate; nothing was run",
            args.spec.display()
        );
        ExitCode::from(1)
    };
    let mut compiled = match compile(
        &args.spec,
        &CompileOptions {
            no_environment: true,
        },
    ) {
        Ok(c) => c,
        Err(e) => return invalid(&e.render()),
    };
    // A thread run: the store is opened before anything runs; `--resume` without
    // `--variant` takes the thread's.
    let mut store = None;
    let mut variant = args.variant.clone();
    if args.thread.is_some() || !args.interrupt_before.is_empty() {
        let s = match super::threads::open_store(args.checkpoints.as_deref()) {
            Ok(s) => s,
            Err(code) => return code,
        };
        if let (true, None, Some(t)) = (args.resume, &variant, &args.thread) {
            match super::threads::stored_variant(&*s, t) {
                Ok(v) => variant = v,
                Err(code) => return code,
            }
        }
        store = Some(s);
    }
    let program = match compiled.program_with(variant.as_deref(), &changes) {
        Ok(p) => p,
        Err(LoadError::Usage(m)) => return usage(m),
        Err(LoadError::Invalid(e)) => return invalid(&e.render()),
        Err(e @ (LoadError::Compile(_) | LoadError::Program(_) | LoadError::Resources { .. })) => {
            ragloop::errln!("ragloop run: {e}");
            return ExitCode::from(1);
        }
    };
    // A spec that pauses runs on a thread; `--input` has none.
    let pauses = program.nodes.iter().any(|n| n.interrupt_before);
    if pauses && lines.is_some() {
        let nodes: Vec<&str> = program
            .nodes
            .iter()
            .filter(|n| n.interrupt_before)
            .map(|n| n.name.as_str())
            .collect();
        return usage(format!(
            "--input: the spec pauses before {} (interrupt_before), which needs a thread: run one question at a time (with --thread ID to name it)",
            nodes.join(", ")
        ));
    }
    if pauses && store.is_none() {
        match super::threads::open_store(args.checkpoints.as_deref()) {
            Ok(s) => store = Some(s),
            Err(code) => return code,
        }
    }
    if !args.resume {
        if let Err(e) = program.check_sets(&sets) {
            return usage(e);
        }
    }
    let thread_id = args
        .thread
        .clone()
        .unwrap_or_else(super::threads::new_thread_id);
    let input = RunInput {
        question: question.clone(),
        sets: sets.clone(),
    };
    let prepared = match &store {
        None => None,
        Some(s) => {
            let mode = if args.resume {
                Mode::Resume { patch: &sets }
            } else {
                Mode::New(&input)
            };
            match checkpoint::prepare(&**s, &program, &thread_id, mode, &args.interrupt_before) {
                Ok(p) => Some(p),
                Err(e) if e.is_usage() => {
                    return usage(match e {
                        checkpoint::ThreadError::Patch(p) => format!("--set: {p}"),
                        e @ checkpoint::ThreadError::UnknownNode { .. } => {
                            format!("--interrupt-before: {e}")
                        }
                        e => e.to_string(),
                    })
                }
                Err(e) => {
                    ragloop::errln!("ragloop run: {e}");
                    return ExitCode::from(1);
                }
            }
        }
    };
    // A missing API key is a usage error, reported before anything is opened or run;
    // a replayed run reads no key.
    // Web tools are live even under --replay (embeddings are replayed too).
    let missing = ragloop::providers::keys::missing(
        &program.spec,
        &ragloop::providers::keys::KeyScope {
            replaying: args.calls.replay.is_some(),
            live_calls: true,
            ..Default::default()
        },
    );
    if !missing.is_empty() {
        for m in &missing {
            ragloop::errln!("ragloop run: {m}");
        }
        return ExitCode::from(super::EXIT_USAGE);
    }
    // Every file the run reads: the spec and the files it loaded (prompts, schemas,
    // fixtures), the questions, the replayed cassette. No output may overwrite one.
    // (Variants' files too: a prompt only a variant uses is still part of the spec.)
    let spec_files = std::mem::take(&mut compiled.files);
    drop(compiled);
    let mut read: Vec<&std::path::Path> = vec![args.spec.as_path()];
    read.extend(spec_files.iter().map(PathBuf::as_path));
    read.extend(args.input.as_deref());
    read.extend(args.calls.replay.as_deref());
    let mut trace_file = None;
    if let Some(path) = &args.trace {
        if let Some(p) = ragloop::paths::clobbers(path, read.iter().copied()) {
            return usage(format!(
                "--trace {} would overwrite {}, an input of this run",
                path.display(),
                p.display()
            ));
        }
        match std::fs::File::create(path) {
            Ok(f) => trace_file = Some(f),
            Err(e) => return usage(format!("cannot create trace file {}: {e}", path.display())),
        }
    }
    let mut opts = ResourceOptions {
        corpus: args.corpus.clone(),
        progress: !args.json,
        ..ResourceOptions::default()
    };
    let mut inputs = read.clone();
    inputs.extend(args.trace.as_deref());
    if let Err(e) = args.calls.apply(&mut opts, &inputs, false) {
        return usage(e);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            ragloop::errln!("ragloop run: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // Installed before the resources open, so a signal while an index is built is
    // not lost: the build finishes (a second signal exits at once), then the run ends
    // `interrupted` before its first node.
    let cancel = super::signals::install(&rt, "run");
    let resources = match Resources::prepare(&program, opts) {
        Ok(r) => r,
        Err(e) => {
            ragloop::errln!("ragloop run: {e}");
            return ExitCode::from(1);
        }
    };
    let mut observers: Vec<Box<dyn Observer>> = Vec::new();
    if let Some(f) = trace_file {
        observers.push(Box::new(JsonlTrace::new(std::io::BufWriter::new(f))));
    }
    if args.verbose {
        observers.push(Box::new(Verbose));
    }
    if args.stream {
        observers.push(Box::new(super::stream::TokenPrinter::default()));
    }
    let mut obs = Tee(observers);
    if let (Some(store), Some(prepared)) = (&store, prepared) {
        let outcome = match rt.block_on(checkpoint::run_thread(
            &**store, &program, &resources, prepared, &mut obs, &cancel,
        )) {
            Ok(o) => o,
            Err(e) => {
                ragloop::errln!("ragloop run: {e}");
                return ExitCode::from(1);
            }
        };
        return super::threads::report(&outcome, args.json, args.stream, &args.spec);
    }
    match lines {
        None => {
            let result = rt.block_on(run_program(&program, &resources, &input, &mut obs, &cancel));
            if args.json {
                // A closed stdout (`| true`) is not an error of the run.
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{}", result_json(&result, None)).and_then(|()| out.flush());
                if let Some(e) = &result.error {
                    ragloop::errln!("ragloop run: {e}");
                }
            } else {
                print_result(&result, args.stream);
            }
            ExitCode::from(result.status.exit_code())
        }
        Some(text) => {
            let mut worst: Option<Status> = None;
            let mut bad_lines = 0usize;
            let mut stdout = std::io::stdout().lock();
            for (n, line) in text.lines().enumerate() {
                if cancel.is_cancelled() {
                    let left = text
                        .lines()
                        .skip(n)
                        .filter(|l| !l.trim().is_empty())
                        .count();
                    if left > 0 {
                        ragloop::errln!(
                            "ragloop run: interrupted: {left} line(s) from line {} on not started",
                            n + 1
                        );
                    }
                    break;
                }
                let lineno = n + 1;
                if line.trim().is_empty() {
                    continue;
                }
                let line = line.trim_start_matches('\u{feff}');
                let (id, parsed) = parse_input_line(line);
                let q = match parsed {
                    Ok(q) => q,
                    Err(e) => {
                        bad_lines += 1;
                        ragloop::errln!(
                            "ragloop run: {}:{lineno}: {e}",
                            args.input
                                .as_deref()
                                .unwrap_or_else(|| std::path::Path::new(""))
                                .display()
                        );
                        let mut row = serde_json::Map::new();
                        row.insert("line".into(), json!(lineno));
                        if let Some(id) = &id {
                            row.insert("id".into(), id.clone());
                        }
                        row.insert("status".into(), json!("failed"));
                        row.insert("error".into(), json!(e));
                        let _ = writeln!(stdout, "{}", Value::Object(row));
                        let _ = stdout.flush();
                        continue;
                    }
                };
                let input = RunInput {
                    question: Some(q),
                    sets: sets.clone(),
                };
                let result =
                    rt.block_on(run_program(&program, &resources, &input, &mut obs, &cancel));
                let mut v = result_json(&result, id.as_ref());
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("line".into(), json!(lineno));
                }
                // A closed stdout (`| head`) ends the batch: nobody reads the rest, and
                // with a paid provider it would keep spending.
                if writeln!(stdout, "{v}")
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    ragloop::errln!("ragloop run: stdout closed; stopping after line {lineno}");
                    return ExitCode::from(worst.map_or(result.status.exit_code(), |w| {
                        if result.status.severity() > w.severity() {
                            result.status.exit_code()
                        } else {
                            w.exit_code()
                        }
                    }));
                }
                if worst.is_none_or(|w| result.status.severity() > w.severity()) {
                    worst = Some(result.status);
                }
            }
            if cancel.is_cancelled() {
                return ExitCode::from(ragloop::runtime::status::EXIT_INTERRUPTED);
            }
            if bad_lines > 0 {
                return ExitCode::from(1);
            }
            ExitCode::from(worst.map_or(0, Status::exit_code))
        }
    }
}

/// One line of an `--input` file (not blank, BOM removed): its `id` whenever it is a
/// JSON object with one (kept for the row of a faulty line too), and its question or
/// what is wrong with it.
fn parse_input_line(line: &str) -> (Option<Value>, Result<String, String>) {
    let (id, question) = match serde_json::from_str::<Value>(line) {
        Ok(Value::String(q)) => (None, Ok(q)),
        Ok(Value::Object(m)) => (
            m.get("id").cloned(),
            match m.get("question").and_then(Value::as_str) {
                Some(q) => Ok(q.to_string()),
                None => Err("expected an object with a string `question`".to_string()),
            },
        ),
        Ok(_) => (
            None,
            Err("expected {\"id\": ..., \"question\": ...} or a JSON string".into()),
        ),
        Err(e) => (None, Err(format!("not JSON: {e}"))),
    };
    let question = question.and_then(|q| {
        if q.trim().is_empty() {
            Err("the question is empty".to_string())
        } else {
            Ok(q)
        }
    });
    (id, question)
}
