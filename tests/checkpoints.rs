//! Thread runs through the library (`ragloop::checkpoint`): every step is
//! checkpointed, a run stopped after a checkpointed step resumes without repeating
//! the completed steps' LLM calls (counted by the scripted provider) and ends as an
//! uninterrupted run would, interrupts pause and resume, patches are checked
//! against the state schema, changed specs are refused.
use crate::runtime_support::{program, project, rt, scripted};
use ragloop::checkpoint::{
    self, Checkpoint, CheckpointError, Checkpointer, Mode, RunStatus, Source, SpecId,
    SqliteCheckpointer, ThreadError, ThreadInfo,
};
use ragloop::providers::scripted::ScriptedProvider;
use ragloop::providers::Provider;
use ragloop::runtime::{
    CancellationToken, NoTrace, Program, ResourceOptions, Resources, RunInput, RunResult, Snapshot,
    Status,
};
use serde_json::{json, Value};
use std::sync::Arc;

/// Three LLM steps in a row, each appending its answer to `notes`.
const SPEC: &str = r#"version: 1
name: chain
state:
  schema:
    type: object
    properties:
      question: {type: string}
      notes: {type: array, items: {type: string}}
      answer: {type: string}
      score: {type: integer}
    required: [question]
  reducers: {notes: append}
models:
  m: {provider: scripted, params: {file: fixture.json}}
output: {answer: answer}
entry: a
nodes:
  a: {kind: llm, model: m, prompt: {user: "a {{ question }}"}, update: {notes: output}}
  b: {kind: llm, model: m, prompt: {user: "b {{ notes | join(',') }}"}, update: {notes: output}}
  c: {kind: llm, model: m, interrupt_before: INTERRUPT, prompt: {user: "c {{ notes | join(',') }}"}, update: {answer: output}}
edges:
  a: b
  b: c
  c: END
"#;

fn fixture() -> Value {
    json!({"a": ["from a"], "b": ["from b"], "c": ["the answer"]})
}

fn chain(interrupt: bool) -> (crate::runtime_support::Project, Program) {
    let p = project(
        &SPEC.replace("INTERRUPT", if interrupt { "true" } else { "false" }),
        &fixture(),
    );
    let prog = program(&p.spec);
    (p, prog)
}

fn resources(program: &Program, provider: &Arc<ScriptedProvider>) -> Resources {
    let mut opts = ResourceOptions::default();
    for name in program.spec.models.keys() {
        opts.providers
            .insert(name.clone(), Arc::clone(provider) as Arc<dyn Provider>);
    }
    Resources::prepare(program, opts).expect("resources")
}

fn input() -> RunInput {
    RunInput {
        question: Some("q".into()),
        sets: vec![],
    }
}

/// Runs a prepared request to its end.
fn go(
    store: &dyn Checkpointer,
    program: &Program,
    res: &Resources,
    thread: &str,
    mode: Mode<'_>,
    cancel: &CancellationToken,
) -> Result<RunResult, ThreadError> {
    let prepared = checkpoint::prepare(store, program, thread, mode, &[])?;
    let out = rt().block_on(checkpoint::run_thread(
        store,
        program,
        res,
        prepared,
        &mut NoTrace,
        cancel,
    ))?;
    assert!(out.status_error.is_none());
    Ok(out.result)
}

/// A store that cancels a token once a checkpoint of `step` is written: the run
/// stops before its next step, as a killed process would after that checkpoint.
struct StopAfter {
    inner: SqliteCheckpointer,
    step: u32,
    cancel: CancellationToken,
    /// Fail the write of `step` instead (a full disk).
    fail: bool,
}

impl Checkpointer for StopAfter {
    fn create_thread(&self, t: &str) -> Result<bool, CheckpointError> {
        self.inner.create_thread(t)
    }
    fn thread(&self, t: &str) -> Result<Option<ThreadInfo>, CheckpointError> {
        self.inner.thread(t)
    }
    fn begin_run(&self, t: &str, s: &SpecId) -> Result<u32, CheckpointError> {
        self.inner.begin_run(t, s)
    }
    fn put(&self, t: &str, run: u32, src: Source, s: &Snapshot) -> Result<(), CheckpointError> {
        if self.fail && s.step == self.step {
            return Err(CheckpointError::Unsupported("disk full".into()));
        }
        self.inner.put(t, run, src, s)?;
        if s.step == self.step {
            self.cancel.cancel();
        }
        Ok(())
    }
    fn set_status(&self, t: &str, run: u32, s: &RunStatus) -> Result<(), CheckpointError> {
        self.inner.set_status(t, run, s)
    }
    fn latest(&self, t: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        self.inner.latest(t)
    }
    fn history(&self, t: &str) -> Result<Vec<Checkpoint>, CheckpointError> {
        self.inner.history(t)
    }
}

fn prompts(p: &ScriptedProvider) -> Vec<String> {
    p.requests()
        .iter()
        .map(|r| {
            r.messages
                .last()
                .map(|m| m.content.clone())
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn a_run_stopped_after_a_checkpoint_resumes_without_repeating_completed_calls() {
    let (p, program) = chain(false);
    let db = p.dir.path().join("threads.sqlite3");
    // The uninterrupted run, for reference.
    let reference = {
        let provider = scripted(fixture());
        let res = resources(&program, &provider);
        let store = SqliteCheckpointer::open(&db).unwrap();
        let r = go(
            &store,
            &program,
            &res,
            "ref",
            Mode::New(&input()),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(provider.requests().len(), 3);
        r
    };
    assert_eq!(reference.status, Status::Generated);

    let cancel = CancellationToken::new();
    let store = StopAfter {
        inner: SqliteCheckpointer::open(&db).unwrap(),
        step: 1,
        cancel: cancel.clone(),
        fail: false,
    };
    let first = scripted(fixture());
    let res = resources(&program, &first);
    let stopped = go(&store, &program, &res, "t", Mode::New(&input()), &cancel).unwrap();
    assert_eq!(stopped.status, Status::Interrupted, "{:?}", stopped.error);
    assert_eq!(prompts(&first), ["a q"]);
    let latest = store.latest("t").unwrap().unwrap();
    assert_eq!(
        (latest.snapshot.step, latest.snapshot.next.as_deref()),
        (1, Some("b"))
    );
    assert_eq!(latest.run.status.status, Some(Status::Interrupted));

    // A fresh provider: only the remaining steps ask it anything.
    let second = scripted(json!({"b": ["from b"], "c": ["the answer"]}));
    let res = resources(&program, &second);
    let store = SqliteCheckpointer::open(&db).unwrap();
    let resumed = go(
        &store,
        &program,
        &res,
        "t",
        Mode::Resume { patch: &[] },
        &CancellationToken::new(),
    )
    .unwrap();
    assert_eq!(prompts(&second), ["b from a", "c from a,from b"]);
    assert_eq!(resumed.status, Status::Generated);
    assert_eq!(resumed.answer, reference.answer);
    assert_eq!(resumed.state, reference.state);
    assert_eq!(resumed.path, reference.path);
    assert_eq!(resumed.steps, reference.steps);
    assert_eq!(resumed.iterations, reference.iterations);
    assert_eq!(resumed.usage.calls, reference.usage.calls);
    assert_eq!(resumed.usage.tokens, reference.usage.tokens);

    // History: step 0, 1 of the first process, then 2 and 3 of the resume.
    let steps: Vec<(u32, Source)> = store
        .history("t")
        .unwrap()
        .iter()
        .map(|c| (c.snapshot.step, c.source))
        .collect();
    assert_eq!(
        steps,
        [
            (0, Source::Input),
            (1, Source::Loop),
            (2, Source::Loop),
            (3, Source::Loop)
        ]
    );
    let info = store.thread("t").unwrap().unwrap().latest.unwrap();
    assert_eq!(info.status.status, Some(Status::Generated));
    // Nothing is left to resume.
    let err =
        checkpoint::prepare(&store, &program, "t", Mode::Resume { patch: &[] }, &[]).unwrap_err();
    assert!(matches!(err, ThreadError::Finished { .. }), "{err}");
    assert!(err.is_usage());
}

#[test]
fn an_interrupt_pauses_before_the_node_and_a_patched_resume_runs_it() {
    let (p, program) = chain(true);
    let store = SqliteCheckpointer::open(&p.dir.path().join("t.sqlite3")).unwrap();
    let provider = scripted(fixture());
    let res = resources(&program, &provider);
    let never = CancellationToken::new();
    let paused = go(&store, &program, &res, "t", Mode::New(&input()), &never).unwrap();
    assert_eq!(paused.status, Status::Interrupted);
    assert_eq!(paused.paused_before.as_deref(), Some("c"));
    assert_eq!(paused.exit_code(), 6);
    assert_eq!(paused.path, ["a", "b"]);
    assert_eq!(prompts(&provider).len(), 2);
    let info = store.thread("t").unwrap().unwrap().latest.unwrap();
    assert_eq!(info.status.paused_before.as_deref(), Some("c"));

    // A new run on the paused thread is refused; so is a patch the schema refuses,
    // and an unknown field: nothing is written.
    let before = store.history("t").unwrap();
    let err = checkpoint::prepare(&store, &program, "t", Mode::New(&input()), &[]).unwrap_err();
    assert!(matches!(err, ThreadError::Unfinished { .. }), "{err}");
    assert!(err.to_string().contains("paused before node `c`"), "{err}");
    let bad = [("score".to_string(), json!("high"))];
    let err =
        checkpoint::prepare(&store, &program, "t", Mode::Resume { patch: &bad }, &[]).unwrap_err();
    assert!(matches!(err, ThreadError::Patch(_)), "{err}");
    assert!(err.to_string().contains("score"), "{err}");
    let unknown = [("nope".to_string(), json!(1))];
    let err = checkpoint::prepare(&store, &program, "t", Mode::Resume { patch: &unknown }, &[])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("fields: question, notes, answer, score"),
        "{err}"
    );
    assert_eq!(store.history("t").unwrap(), before);

    // The reviewer corrects the notes; the resume runs `c` on them (no new pause).
    let patch = [
        ("notes".to_string(), json!(["checked"])),
        ("score".to_string(), json!(3.0)),
    ];
    let done = go(
        &store,
        &program,
        &res,
        "t",
        Mode::Resume { patch: &patch },
        &never,
    )
    .unwrap();
    assert_eq!(done.status, Status::Generated, "{:?}", done.error);
    assert_eq!(done.paused_before, None);
    assert_eq!(done.path, ["a", "b", "c"]);
    assert_eq!(prompts(&provider).last().unwrap(), "c checked");
    // `3.0` is stored as the integer the schema asks for.
    assert_eq!(done.state["score"], json!(3));
    let history = store.history("t").unwrap();
    let last_two: Vec<Source> = history[history.len() - 2..]
        .iter()
        .map(|c| c.source)
        .collect();
    assert_eq!(last_two, [Source::Update, Source::Loop]);
}

#[test]
fn interrupt_nodes_given_by_the_caller_pause_and_unknown_ones_are_refused() {
    let (p, program) = chain(false);
    let store = SqliteCheckpointer::open(&p.dir.path().join("t.sqlite3")).unwrap();
    let provider = scripted(fixture());
    let res = resources(&program, &provider);
    let err =
        checkpoint::prepare(&store, &program, "t", Mode::New(&input()), &["z".into()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no node `z` to interrupt before (nodes: a, b, c)"
    );
    assert!(store.thread("t").unwrap().is_none());
    let prepared =
        checkpoint::prepare(&store, &program, "t", Mode::New(&input()), &["b".into()]).unwrap();
    let out = rt()
        .block_on(checkpoint::run_thread(
            &store,
            &program,
            &res,
            prepared,
            &mut NoTrace,
            &CancellationToken::new(),
        ))
        .unwrap();
    assert_eq!(out.result.paused_before.as_deref(), Some("b"));
    assert_eq!(out.result.path, ["a"]);
}

#[test]
fn a_changed_spec_or_another_spec_is_not_resumed() {
    let (p, program) = chain(true);
    let db = p.dir.path().join("t.sqlite3");
    let store = SqliteCheckpointer::open(&db).unwrap();
    let provider = scripted(fixture());
    let res = resources(&program, &provider);
    let never = CancellationToken::new();
    go(&store, &program, &res, "t", Mode::New(&input()), &never).unwrap();
    // The same spec with another prompt for `c`.
    std::fs::write(
        &p.spec,
        SPEC.replace("INTERRUPT", "true")
            .replace("\"c {{ notes", "\"C {{ notes"),
    )
    .unwrap();
    let changed = program_of(&p);
    assert_ne!(changed.fingerprint, program.fingerprint);
    let err =
        checkpoint::prepare(&store, &changed, "t", Mode::Resume { patch: &[] }, &[]).unwrap_err();
    assert!(matches!(err, ThreadError::ChangedSpec { .. }), "{err}");
    // Another spec name.
    std::fs::write(
        &p.spec,
        SPEC.replace("INTERRUPT", "true")
            .replace("name: chain", "name: other"),
    )
    .unwrap();
    let other = program_of(&p);
    let err =
        checkpoint::prepare(&store, &other, "t", Mode::Resume { patch: &[] }, &[]).unwrap_err();
    assert!(matches!(err, ThreadError::OtherSpec { .. }), "{err}");
    // The unchanged spec resumes.
    assert_eq!(
        program_of_text(&p, &SPEC.replace("INTERRUPT", "true")).fingerprint,
        program.fingerprint
    );
    let err = checkpoint::prepare(&store, &program, "nope", Mode::Resume { patch: &[] }, &[])
        .unwrap_err();
    assert!(matches!(err, ThreadError::UnknownThread(_)), "{err}");
}

fn program_of(p: &crate::runtime_support::Project) -> Program {
    program(&p.spec)
}

fn program_of_text(p: &crate::runtime_support::Project, text: &str) -> Program {
    std::fs::write(&p.spec, text).unwrap();
    program(&p.spec)
}

#[test]
fn a_new_run_on_a_finished_thread_appends_to_its_history() {
    let (p, program) = chain(false);
    let store = SqliteCheckpointer::open(&p.dir.path().join("t.sqlite3")).unwrap();
    let provider = scripted(json!({"a": ["1", "2"], "b": ["1", "2"], "c": ["x", "y"]}));
    let res = resources(&program, &provider);
    let never = CancellationToken::new();
    let one = go(&store, &program, &res, "t", Mode::New(&input()), &never).unwrap();
    let two = go(&store, &program, &res, "t", Mode::New(&input()), &never).unwrap();
    assert_eq!(
        (one.answer.as_deref(), two.answer.as_deref()),
        (Some("x"), Some("y"))
    );
    let runs: Vec<u32> = store
        .history("t")
        .unwrap()
        .iter()
        .map(|c| c.run.run)
        .collect();
    assert_eq!(runs, [1, 1, 1, 1, 2, 2, 2, 2]);
    // Each run starts from the spec's initial state, not the previous run's.
    assert_eq!(two.state["notes"], json!(["2", "2"]));
}

#[test]
fn a_checkpoint_that_cannot_be_written_fails_the_run_before_its_next_step() {
    let (p, program) = chain(false);
    let store = StopAfter {
        inner: SqliteCheckpointer::open(&p.dir.path().join("t.sqlite3")).unwrap(),
        step: 2,
        cancel: CancellationToken::new(),
        fail: true,
    };
    let provider = scripted(fixture());
    let res = resources(&program, &provider);
    let r = go(
        &store,
        &program,
        &res,
        "t",
        Mode::New(&input()),
        &CancellationToken::new(),
    )
    .unwrap();
    assert_eq!(r.status, Status::Failed);
    assert_eq!(
        r.error.as_deref(),
        Some("checkpoint after node `b`: disk full")
    );
    // `c` was not called; the failed run resumes from step 1 (`b` runs again).
    assert_eq!(prompts(&provider), ["a q", "b from a"]);
    let latest = store.latest("t").unwrap().unwrap();
    assert_eq!(latest.snapshot.step, 1);
    assert_eq!(latest.run.status.status, Some(Status::Failed));
    assert!(checkpoint::prepare(&store, &program, "t", Mode::Resume { patch: &[] }, &[]).is_ok());
}

/// The server spawns thread runs on tokio tasks: the future must be `Send`.
#[test]
fn a_thread_run_is_a_send_future() {
    fn send<T: Send>(_: &T) {}
    let (p, program) = chain(false);
    let store = SqliteCheckpointer::open(&p.dir.path().join("t.sqlite3")).unwrap();
    let provider = scripted(fixture());
    let res = resources(&program, &provider);
    let prepared = checkpoint::prepare(&store, &program, "t", Mode::New(&input()), &[]).unwrap();
    let mut obs = NoTrace;
    let cancel = CancellationToken::new();
    let fut = checkpoint::run_thread(&store, &program, &res, prepared, &mut obs, &cancel);
    send(&fut);
}
