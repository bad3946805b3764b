//! The response cache, cassette recording and replay through the library: a counting
//! mock stands in for a network provider (`provider: openai` in the spec, the mock
//! injected by name), every cache lives in a temp directory.
use futures::future::BoxFuture;
use ragloop::compile::load_program;
use ragloop::providers::cache::ResponseCache;
use ragloop::providers::cassette::{Cassette, CassetteWriter};
use ragloop::providers::{LlmRequest, LlmResponse, Provider, ProviderError, Usage};
use ragloop::runtime::{
    run, JsonlTrace, NoTrace, Program, ResourceOptions, Resources, RunInput, RunResult, Status,
};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Answers `"<model>: <last message>"`; the first `fail_first` calls fail
/// (transient) and the first `slow_first` calls take 300 ms.
#[derive(Default)]
struct Mock {
    calls: AtomicUsize,
    fail_first: usize,
    slow_first: usize,
}

impl Provider for Mock {
    fn name(&self) -> &'static str {
        "mock"
    }
    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if n < self.slow_first {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            if n < self.fail_first {
                return Err(ProviderError::Transient("503 from the mock".into()));
            }
            let last = req
                .messages
                .last()
                .map(|m| m.content.clone())
                .unwrap_or_default();
            Ok(LlmResponse {
                output: json!(format!("{}: {last}", req.model_name)),
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 2,
                    cost_usd: 0.25,
                },
                ..Default::default()
            })
        })
    }
}

const SPEC: &str = r#"version: 1
name: cache
state:
  schema:
    type: object
    properties: {question: {type: string}, draft: {type: string}, answer: {type: string}}
    required: [question]
models:
  cold: {provider: openai, model: mock-model, temperature: 0}
  hot: {provider: openai, model: mock-model, temperature: 0.7}
output: {answer: answer}
entry: draft
nodes:
  draft: {kind: llm, model: hot, prompt: {user: "Draft {{ question }}"}, update: {draft: output}}
  say: {kind: llm, model: cold, prompt: {user: "Answer {{ question }}"}, update: {answer: output}}
edges:
  draft: say
  say: END
variants:
  reworded:
    set:
      nodes.say.prompt.user: "Reply to {{ question }}"
  bigger:
    set:
      models.cold.max_tokens: 64
"#;

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("spec.yaml"), SPEC).expect("spec");
        Setup { dir }
    }
    fn program(&self, variant: Option<&str>) -> Program {
        load_program(&self.dir.path().join("spec.yaml"), variant, &[]).expect("spec loads")
    }
    fn cache(&self) -> Arc<ResponseCache> {
        Arc::new(ResponseCache::at(self.dir.path().join("responses")))
    }
    fn cache_files(&self) -> Vec<std::path::PathBuf> {
        walk(&self.dir.path().join("responses"))
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Runs `program` on `question` with `mock` injected for every model.
fn go(
    program: &Program,
    mock: &Arc<Mock>,
    mut opts: ResourceOptions,
    question: &str,
) -> (RunResult, Vec<Value>) {
    for name in program.spec.models.keys() {
        opts.providers
            .insert(name.clone(), Arc::clone(mock) as Arc<dyn Provider>);
    }
    let res = Resources::prepare(program, opts).expect("resources");
    let buf = Shared::default();
    let mut trace = JsonlTrace::new(buf.clone());
    let input = RunInput {
        question: Some(question.into()),
        sets: vec![],
    };
    let r = rt().block_on(run(program, &res, &input, &mut trace));
    drop(trace);
    let text = String::from_utf8(buf.0.lock().expect("buf").clone()).expect("utf8");
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("trace json"))
        .collect();
    (r, lines)
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);
impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buf").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn with_cache(c: &Arc<ResponseCache>) -> ResourceOptions {
    ResourceOptions {
        cache: Some(Arc::clone(c)),
        ..ResourceOptions::default()
    }
}

fn step<'a>(trace: &'a [Value], node: &str) -> &'a Value {
    trace
        .iter()
        .find(|s| s["node"] == node)
        .expect("step in trace")
}

#[test]
fn second_run_hits_the_cache_for_temperature_0_only() {
    let s = Setup::new();
    let prog = s.program(None);
    let cache = s.cache();
    let mock = Arc::new(Mock::default());
    let (a, _) = go(&prog, &mock, with_cache(&cache), "q1");
    assert_eq!(a.status, Status::Generated, "{:?}", a.error);
    assert_eq!(mock.calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        s.cache_files().len(),
        1,
        "only the temperature-0 model is cached"
    );

    let (b, trace) = go(&prog, &mock, with_cache(&cache), "q1");
    // `hot` (temperature 0.7) was called again, `cold` was not.
    assert_eq!(mock.calls.load(Ordering::SeqCst), 3);
    assert_eq!(a.answer, b.answer);
    assert_eq!(step(&trace, "say")["llm"]["cached"], json!(1));
    assert_eq!(step(&trace, "say")["llm"]["cost_usd"], json!(0.25));
    assert_eq!(step(&trace, "say")["llm"]["saved_usd"], json!(0.25));
    assert_eq!(step(&trace, "say")["llm"]["input_tokens"], json!(10));
    assert_eq!(step(&trace, "draft")["llm"]["cached"], json!(0));
    let fin = trace.last().expect("final");
    assert_eq!(fin["usage"]["cached_calls"], json!(1));
    assert_eq!(b.usage.calls, 2);
    assert_eq!(b.usage.cached_calls, 1);
    // Same figures as the first run; the money spent is cost - saved.
    assert_eq!(b.usage.tokens.cost_usd, a.usage.tokens.cost_usd);
    assert_eq!(b.usage.saved_usd, 0.25);
    assert_eq!(b.usage.tokens.input_tokens, a.usage.tokens.input_tokens);
    assert_eq!(cache.stats(), (1, 1));

    // Another question is another key.
    go(&prog, &mock, with_cache(&cache), "q2");
    assert_eq!(mock.calls.load(Ordering::SeqCst), 5);
}

#[test]
fn no_cache_means_no_read_and_no_write() {
    let s = Setup::new();
    let prog = s.program(None);
    let cache = s.cache();
    let mock = Arc::new(Mock::default());
    go(&prog, &mock, with_cache(&cache), "q");
    assert_eq!(mock.calls.load(Ordering::SeqCst), 2);
    // The library default (and --no-cache) is no cache at all.
    let (r, _) = go(&prog, &mock, ResourceOptions::default(), "q");
    assert_eq!(mock.calls.load(Ordering::SeqCst), 4);
    assert_eq!(r.usage.cached_calls, 0);
    let (r, _) = go(&prog, &mock, ResourceOptions::default(), "fresh");
    assert_eq!(r.usage.cached_calls, 0);
    assert_eq!(s.cache_files().len(), 1, "nothing written without a cache");
}

#[test]
fn corrupt_entries_are_misses_and_get_rewritten() {
    let s = Setup::new();
    let prog = s.program(None);
    let cache = s.cache();
    let mock = Arc::new(Mock::default());
    let (a, _) = go(&prog, &mock, with_cache(&cache), "q");
    let files = s.cache_files();
    assert_eq!(files.len(), 1);
    std::fs::write(&files[0], "{\"v\":1,\"key\":\"trunc").expect("corrupt");
    let (b, _) = go(&prog, &mock, with_cache(&cache), "q");
    assert_eq!(b.status, Status::Generated, "{:?}", b.error);
    assert_eq!(b.usage.cached_calls, 0);
    assert_eq!(mock.calls.load(Ordering::SeqCst), 4);
    let (c, _) = go(&prog, &mock, with_cache(&cache), "q");
    assert_eq!(c.usage.cached_calls, 1, "the corrupt entry was overwritten");
    assert_eq!(a.answer, c.answer);
}

#[test]
fn variants_never_share_cache_entries() {
    let s = Setup::new();
    let cache = s.cache();
    let mock = Arc::new(Mock::default());
    let (base, _) = go(&s.program(None), &mock, with_cache(&cache), "q");
    let (reworded, _) = go(&s.program(Some("reworded")), &mock, with_cache(&cache), "q");
    let (bigger, _) = go(&s.program(Some("bigger")), &mock, with_cache(&cache), "q");
    for r in [&reworded, &bigger] {
        assert_eq!(
            r.usage.cached_calls, 0,
            "a variant must not hit the base's entry"
        );
    }
    assert_eq!(base.answer.as_deref(), Some("cold: Answer q"));
    assert_eq!(reworded.answer.as_deref(), Some("cold: Reply to q"));
    assert_eq!(s.cache_files().len(), 3);
    // Each arm hits its own entry.
    for v in [None, Some("reworded"), Some("bigger")] {
        let (r, _) = go(&s.program(v), &mock, with_cache(&cache), "q");
        assert_eq!(r.usage.cached_calls, 1, "{v:?}");
    }
}

fn replay_run(prog: &Program, cas: &Path) -> RunResult {
    let cassette = Arc::new(Cassette::load(cas).expect("load"));
    let res = Resources::prepare(
        prog,
        ResourceOptions {
            replay: Some(cassette),
            ..ResourceOptions::default()
        },
    )
    .expect("resources");
    let input = RunInput {
        question: Some("q".into()),
        sets: vec![],
    };
    rt().block_on(run(prog, &res, &input, &mut NoTrace))
}

fn cassette_lines(cas: &Path) -> Vec<Value> {
    std::fs::read_to_string(cas)
        .expect("cassette")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

#[test]
fn recording_covers_cache_hits_and_calls_after_retries_and_replays_them() {
    let s = Setup::new();
    let cache = s.cache();
    // Warm the cache for `say`.
    go(
        &s.program(None),
        &Arc::new(Mock::default()),
        with_cache(&cache),
        "q",
    );

    // `hot` retries inside its provider: attempt 1 times out (100 ms), attempt 2 gets
    // a 503, attempt 3 answers. The cassette holds the call as the runtime saw it.
    let spec = SPEC.replace(
        "hot: {provider: openai, model: mock-model, temperature: 0.7}",
        "hot: {provider: openai, model: mock-model, temperature: 0.7, timeout_secs: 0.1, retries: 3}",
    );
    std::fs::write(s.dir.path().join("spec.yaml"), spec).expect("spec");
    let prog = s.program(None);
    let cas = s.dir.path().join("cas.jsonl");
    let writer = Arc::new(CassetteWriter::create(&cas).expect("writer"));
    let mock = Arc::new(Mock {
        fail_first: 2,
        slow_first: 1,
        ..Mock::default()
    });
    let opts = ResourceOptions {
        record: Some(Arc::clone(&writer)),
        ..with_cache(&cache)
    };
    let (live, _) = go(&prog, &mock, opts, "q");
    assert_eq!(live.status, Status::Generated, "{:?}", live.error);
    assert_eq!(
        mock.calls.load(Ordering::SeqCst),
        3,
        "three attempts for `hot`"
    );
    assert_eq!((live.usage.calls, live.usage.cached_calls), (2, 1));
    drop(writer);
    let lines = cassette_lines(&cas);
    assert_eq!(lines.len(), 2);
    let by_seq = |i: u64| lines.iter().find(|l| l["seq"] == json!(i)).expect("seq");
    assert_eq!(by_seq(0)["output"], json!("hot: Draft q"));
    assert_eq!(by_seq(0)["cached"], json!(false));
    assert_eq!(by_seq(1)["cached"], json!(true));
    assert_eq!(
        by_seq(1)["usage"]["cost_usd"],
        json!(0.25),
        "the original cost"
    );
    for l in &lines {
        assert!(
            l.get("task").is_none() && l.get("inputs").is_none(),
            "network keys: no inputs"
        );
    }

    // Replay: same answer and figures, no provider call at all.
    let replayed = replay_run(&prog, &cas);
    assert_eq!(replayed.answer, live.answer);
    assert_eq!((replayed.usage.calls, replayed.usage.cached_calls), (2, 2));
    assert_eq!(
        replayed.usage.tokens.input_tokens,
        live.usage.tokens.input_tokens
    );
    assert_eq!(replayed.usage.tokens.cost_usd, live.usage.tokens.cost_usd);
    assert_eq!(replayed.usage.saved_usd, 0.5);
    assert_eq!(mock.calls.load(Ordering::SeqCst), 3);
}

#[test]
fn a_recorded_failure_replays_as_the_same_failure() {
    let s = Setup::new();
    let spec = SPEC.replace(
        "hot: {provider: openai, model: mock-model, temperature: 0.7}",
        "hot: {provider: openai, model: mock-model, temperature: 0.7, retries: 0}",
    );
    std::fs::write(s.dir.path().join("spec.yaml"), spec).expect("spec");
    let prog = s.program(None);
    let cas = s.dir.path().join("cas.jsonl");
    let writer = Arc::new(CassetteWriter::create(&cas).expect("writer"));
    let mock = Arc::new(Mock {
        fail_first: 100,
        ..Mock::default()
    });
    let (live, _) = go(
        &prog,
        &mock,
        ResourceOptions {
            record: Some(writer),
            ..ResourceOptions::default()
        },
        "q",
    );
    assert_eq!(live.status, Status::Failed);
    let lines = cassette_lines(&cas);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["error"]["kind"], json!("transient"));
    assert_eq!(lines[0]["error"]["message"], json!("503 from the mock"));
    assert_eq!(lines[0]["output"], Value::Null);
    let replayed = replay_run(&prog, &cas);
    assert_eq!(replayed.status, Status::Failed);
    assert_eq!(replayed.error, live.error);
    assert_eq!(replayed.path, live.path);
}

#[test]
fn a_call_dropped_while_recording_is_recorded_as_abandoned() {
    use ragloop::providers::cache::{KeyConfig, KeyMaker};
    use ragloop::providers::cassette::RecordingProvider;
    let dir = tempfile::tempdir().expect("tmp");
    let cas = dir.path().join("c.jsonl");
    let writer = Arc::new(CassetteWriter::create(&cas).expect("create"));
    let model: ragloop::spec::types::ModelSpec =
        serde_json::from_value(json!({"provider": "openai", "model": "x"})).expect("model");
    let model = Arc::new(model);
    let rec = RecordingProvider::new(
        Arc::new(Mock {
            slow_first: 1,
            ..Mock::default()
        }),
        Arc::clone(&writer),
        "m",
        KeyMaker::new(KeyConfig::from_model(&model)),
    );
    let req = LlmRequest {
        node: "n".into(),
        item: None,
        model_name: "m".into(),
        model,
        task: None,
        inputs: Default::default(),
        messages: vec![],
        schema: None,
    };
    let r = rt()
        .block_on(async { tokio::time::timeout(Duration::from_millis(50), rec.call(&req)).await });
    assert!(r.is_err(), "timed out");
    let lines = cassette_lines(&cas);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["error"]["kind"], json!("transient"));
    assert!(lines[0]["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("abandoned"));
}

#[test]
fn repeated_keys_are_served_in_call_order_then_the_last_again() {
    let key = "ab".repeat(32);
    let line = |seq: u64, out: &str| {
        json!({"v": 1, "seq": seq, "key": key, "node": "n", "model_name": "m",
               "config": {"provider": "openai", "temperature": 0.9}, "messages": [],
               "output": out, "usage": {"input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0}})
        .to_string()
    };
    // Written out of call order (seq 1 ended first).
    let text = format!(
        "{}\n\n{}\n{}\n",
        line(1, "second"),
        line(0, "first"),
        line(2, "third")
    );
    let c = Cassette::from_bytes(Path::new("c.jsonl"), text.as_bytes()).expect("load");
    let k = ragloop::providers::cache::RequestKey::from_hex(&key).expect("key");
    let got: Vec<Value> = (0..5)
        .map(|_| c.answer(&k).expect("recorded").expect("ok").output)
        .collect();
    assert_eq!(
        got,
        vec![
            json!("first"),
            json!("second"),
            json!("third"),
            json!("third"),
            json!("third")
        ]
    );
    assert_eq!(c.len(), 3);
    assert_eq!(c.exchanges_for_node("n"), 3);
    // A line with neither output nor error is malformed.
    let bad = format!(
        "{}\n{}\n",
        line(0, "x"),
        line(1, "y").replace("\"output\":\"y\",", "")
    );
    let e = Cassette::from_bytes(Path::new("c.jsonl"), bad.as_bytes()).expect_err("malformed");
    assert_eq!(
        e.to_string(),
        "c.jsonl:2: the exchange has neither `output` nor `error`"
    );
    // Nothing to replay: an empty or blank file, binary garbage.
    for (bytes, want) in [
        (&b""[..], "empty cassette"),
        (&b"\n  \n"[..], "empty cassette"),
        (&b"\xff\xfe\x00binary"[..], "not a cassette"),
    ] {
        let e = Cassette::from_bytes(Path::new("c.jsonl"), bytes).expect_err("refused");
        assert!(
            e.to_string().starts_with("c.jsonl:1: ") && e.to_string().contains(want),
            "{e}"
        );
    }
}

#[test]
fn append_cuts_a_torn_tail_and_continues_the_sequence() {
    let dir = tempfile::tempdir().expect("tmp");
    let cas = dir.path().join("c.jsonl");
    let s = Setup::new();
    let prog = s.program(None);
    let mock = Arc::new(Mock::default());
    let w = Arc::new(CassetteWriter::create(&cas).expect("create"));
    go(
        &prog,
        &mock,
        ResourceOptions {
            record: Some(w),
            ..Default::default()
        },
        "q1",
    );
    // Simulate a kill -9 mid-line.
    let mut text = std::fs::read_to_string(&cas).expect("read");
    text.push_str("{\"v\":1,\"seq\":2,\"key\":\"ab");
    std::fs::write(&cas, &text).expect("torn");
    let w = Arc::new(CassetteWriter::append(&cas).expect("append"));
    go(
        &prog,
        &mock,
        ResourceOptions {
            record: Some(Arc::clone(&w)),
            ..Default::default()
        },
        "q2",
    );
    assert_eq!(w.written(), 2);
    let c = Cassette::load(&cas).expect("valid after append");
    assert!(!c.truncated_tail());
    assert_eq!(c.len(), 4);
    let seqs: Vec<u64> = std::fs::read_to_string(&cas)
        .expect("read")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("json")["seq"]
                .as_u64()
                .expect("seq")
        })
        .collect();
    assert_eq!(seqs, vec![0, 1, 2, 3]);
}

#[test]
fn concurrent_calls_write_whole_lines() {
    use ragloop::providers::cache::{KeyConfig, KeyMaker};
    use ragloop::providers::cassette::RecordingProvider;
    use ragloop::providers::Message;
    let dir = tempfile::tempdir().expect("tmp");
    let cas = dir.path().join("c.jsonl");
    let writer = Arc::new(CassetteWriter::create(&cas).expect("create"));
    let model: ragloop::spec::types::ModelSpec =
        serde_json::from_value(json!({"provider": "openai", "model": "x"})).expect("model");
    let model = Arc::new(model);
    let rec = RecordingProvider::new(
        Arc::new(Mock::default()),
        Arc::clone(&writer),
        "m",
        KeyMaker::new(KeyConfig::from_model(&model)),
    );
    // 200 calls in flight at once on 2 worker threads, each with a ~20 kB prompt.
    let reqs: Vec<LlmRequest> = (0..200)
        .map(|i| LlmRequest {
            node: "n".into(),
            item: Some(i),
            model_name: "m".into(),
            model: Arc::clone(&model),
            task: None,
            inputs: Default::default(),
            messages: vec![Message {
                role: "user".into(),
                content: format!("{i} {}", "x".repeat(20_000)),
            }],
            schema: None,
        })
        .collect();
    let rec = Arc::new(rec);
    let outs = rt().block_on(async {
        let tasks: Vec<_> = reqs
            .into_iter()
            .map(|req| {
                let rec = Arc::clone(&rec);
                tokio::spawn(async move { rec.call(&req).await.is_ok() })
            })
            .collect();
        futures::future::join_all(tasks).await
    });
    assert!(outs.into_iter().all(|r| r.expect("task")));
    assert_eq!(writer.written(), 200);
    let c = Cassette::load(&cas).expect("every line whole");
    assert_eq!((c.len(), c.keys()), (200, 200));
    let mut items: Vec<u64> = std::fs::read_to_string(&cas)
        .expect("read")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("json")["item"]
                .as_u64()
                .expect("item")
        })
        .collect();
    items.sort_unstable();
    assert_eq!(items, (0..200).collect::<Vec<u64>>());
}

#[test]
fn a_failure_later_answered_replays_the_answer() {
    // `eval --resume --retry-failed --record` appends the rerun's answer after the
    // failure of the same request.
    let key = "cd".repeat(32);
    let base = |seq: u64| {
        json!({"v": 1, "seq": seq, "key": key, "node": "n", "model_name": "m",
               "config": {"provider": "openai", "temperature": 0.0}, "messages": [],
               "usage": {"input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0}})
    };
    let mut failed = base(0);
    failed["error"] = json!({"kind": "transient", "message": "cannot connect"});
    let mut answered = base(1);
    answered["output"] = json!("the answer");
    let text = format!("{failed}\n{answered}\n");
    let c = Cassette::from_bytes(Path::new("c.jsonl"), text.as_bytes()).expect("load");
    let k = ragloop::providers::cache::RequestKey::from_hex(&key).expect("key");
    for _ in 0..3 {
        let out = c
            .answer(&k)
            .expect("recorded")
            .expect("answered, not the failure");
        assert_eq!(out.output, json!("the answer"));
    }
    // A key that only failed still replays its failure.
    let only = format!("{failed}\n");
    let c = Cassette::from_bytes(Path::new("c.jsonl"), only.as_bytes()).expect("load");
    assert!(c.answer(&k).expect("recorded").is_err());
}
