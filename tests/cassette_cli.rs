//! `--record`, `--replay` and `provider: replay` end to end through the binary. No
//! network: the offline provider over the installed Rust book, and the scripted
//! provider in temp projects. Every run uses a temp cache directory.
use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn ragloop(cache: &Path) -> Command {
    let mut c = Command::cargo_bin("ragloop").expect("binary");
    c.env("RAGLOOP_CACHE_DIR", cache)
        .env("XDG_CACHE_HOME", cache)
        .current_dir(repo());
    c
}

fn out(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("cassette")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each cassette line is JSON"))
        .collect()
}

/// The parts of a `--json` result that replay must reproduce exactly.
fn outcome(v: &Value) -> Value {
    json!({
        "status": v["status"], "answer": v["answer"], "sources": v["sources"],
        "path": v["path"], "iterations": v["iterations"], "state": v["state"],
        "error": v["error"], "calls": v["usage"]["calls"],
        "input_tokens": v["usage"]["input_tokens"], "output_tokens": v["usage"]["output_tokens"],
        "id": v["id"],
    })
}

#[test]
fn crag_offline_record_then_replay_is_identical() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cas = tmp.path().join("crag.jsonl");
    let questions = tmp.path().join("q.jsonl");
    std::fs::write(
        &questions,
        "{\"id\": 1, \"question\": \"What does cargo check do?\"}\n{\"id\": 2, \"question\": \"How do I declare a mutable variable?\"}\n{\"id\": 3, \"question\": \"What is the airspeed of a swallow?\"}\n",
    )
    .expect("questions");
    let o = ragloop(tmp.path())
        .args(["run", "graphs/crag.yaml", "--input"])
        .arg(&questions)
        .arg("--record")
        .arg(&cas)
        .output()
        .expect("run");
    let (live, err) = out(&o);
    assert!(o.status.code().is_some_and(|c| c == 0 || c == 3), "{err}");
    let recorded = lines(&cas);
    let live: Vec<Value> = live
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(live.len(), 3);
    let calls: u64 = live
        .iter()
        .map(|v| v["usage"]["calls"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(recorded.len() as u64, calls, "one line per call");
    for l in &recorded {
        assert_eq!(l["config"]["provider"], json!("offline"));
        assert!(l["task"].is_string() && l["inputs"].is_object(), "{l}");
        assert_eq!(l["key"].as_str().map(str::len), Some(64));
    }

    let trace = tmp.path().join("trace.jsonl");
    let o = ragloop(tmp.path())
        .args(["run", "graphs/crag.yaml", "--input"])
        .arg(&questions)
        .arg("--replay")
        .arg(&cas)
        .arg("--trace")
        .arg(&trace)
        .output()
        .expect("replay");
    let (replayed, err) = out(&o);
    assert!(o.status.code().is_some_and(|c| c == 0 || c == 3), "{err}");
    let replayed: Vec<Value> = replayed
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    for (a, b) in live.iter().zip(&replayed) {
        assert_eq!(outcome(a), outcome(b));
        assert_eq!(b["usage"]["cached_calls"], b["usage"]["calls"]);
        assert_eq!(a["usage"]["cached_calls"], json!(0));
    }
    // The trace marks every LLM step as answered from the cassette.
    let steps: Vec<Value> = lines(&trace);
    let llm: Vec<&Value> = steps.iter().filter(|s| s.get("llm").is_some()).collect();
    assert!(!llm.is_empty());
    for s in llm {
        assert_eq!(s["llm"]["cached"], s["llm"]["calls"], "{s}");
    }
}

#[test]
fn replaying_another_variant_fails_saying_what_differs() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cas = tmp.path().join("crag.jsonl");
    let o = ragloop(tmp.path())
        .args([
            "run",
            "graphs/crag.yaml",
            "-q",
            "What does cargo check do?",
            "--record",
        ])
        .arg(&cas)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", out(&o).1);
    let calls = lines(&cas).len();
    // The same run replays, and the human output says where the answers came from.
    let o = ragloop(tmp.path())
        .args([
            "run",
            "graphs/crag.yaml",
            "-q",
            "What does cargo check do?",
            "--verbose",
            "--replay",
        ])
        .arg(&cas)
        .output()
        .expect("replay");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains(&format!(
            "Cached: {calls} of {calls} LLM call(s) answered from the response cache or a cassette"
        )),
        "{stdout}"
    );
    assert!(
        stderr.contains(" cached") && stderr.contains(&format!("({calls} of {calls} LLM call(s)")),
        "{stderr}"
    );
    let o = ragloop(tmp.path())
        .args([
            "run",
            "graphs/crag.yaml",
            "-q",
            "What does cargo check do?",
            "--variant",
            "lenient_grader",
            "--replay",
        ])
        .arg(&cas)
        .output()
        .expect("replay");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("Status: failed"), "{stdout}");
    for part in [
        "node `grade_documents` (item 0)",
        "model `grader`",
        "(key ",
        "exchange(s) for that node",
        "the model configuration differs",
        "relevance_threshold",
    ] {
        assert!(stderr.contains(part), "missing {part:?} in {stderr}");
    }
    // A question the cassette never saw.
    let o = ragloop(tmp.path())
        .args([
            "run",
            "graphs/crag.yaml",
            "-q",
            "What does cargo build do?",
            "--replay",
        ])
        .arg(&cas)
        .output()
        .expect("replay");
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("input(s) `question`"), "{stderr}");
}

const SPEC: &str = r#"version: 1
name: scripted
state:
  schema:
    type: object
    properties:
      question: {type: string}
      documents: {type: array}
      grades: {type: array}
      answer: {type: string}
    required: [question]
models:
  m:
    provider: scripted
    api_key_env: RAGLOOP_TEST_PLANTED_KEY
    params: {file: fixture.json}
retrievers:
  docs: {kind: bm25, corpus: corpus, top_k: 4}
output: {answer: answer, documents: documents}
entry: retrieve
nodes:
  retrieve: {kind: retrieve, retriever: docs, query: "{{ question }}", update: {documents: output}}
  grade:
    kind: map
    model: m
    over: documents
    concurrency: 4
    inputs: {doc: item}
    prompt: {user: "Is this relevant to {{ question }}? {{ doc.content }}"}
    schema: {type: object, properties: {ok: {type: boolean}}, required: [ok]}
    update: {grades: output}
  say:
    kind: llm
    model: m
    prompt: {user: "PROMPT Answer {{ question }} from {{ documents | length }} documents."}
    update: {answer: output}
edges:
  retrieve: grade
  grade: say
  say: END
"#;

struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(spec: &str, fixture: Value) -> Project {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("spec.yaml"), spec).expect("spec");
        std::fs::write(dir.path().join("fixture.json"), fixture.to_string()).expect("fixture");
        std::fs::create_dir_all(dir.path().join("corpus")).expect("corpus");
        for (i, text) in [
            "Cargo check checks your code.",
            "Cargo build builds your code.",
            "Cargo run runs your code.",
            "Cargo test tests your code.",
        ]
        .iter()
        .enumerate()
        {
            std::fs::write(
                dir.path().join(format!("corpus/{i}.md")),
                format!("# Cargo {i}\n\n{text}\n"),
            )
            .expect("doc");
        }
        Project { dir }
    }
    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }
    fn run(&self) -> Command {
        let mut c = ragloop(&self.path("cache"));
        c.arg("run").arg(self.path("spec.yaml"));
        c
    }
}

fn fixture() -> Value {
    // Reversed delays: item 0 answers last, so lines are written out of call order.
    let grades: Vec<Value> = (0..4)
        .map(|i| json!({"delay_ms": 10 * (4 - i), "output": {"ok": i % 2 == 0}}))
        .collect();
    json!({"grade": grades, "say": ["Cargo checks. [0.md]"]})
}

#[test]
fn scripted_fan_out_records_a_valid_cassette_and_replays_without_the_fixture() {
    let p = Project::new(SPEC, fixture());
    let cas = p.path("cas.jsonl");
    let planted = "sk-planted-7f3a9c1e5b2d4f6a8c0e";
    let o = p
        .run()
        .env("RAGLOOP_TEST_PLANTED_KEY", planted)
        .args(["-q", "cargo code", "--json", "--verbose", "--record"])
        .arg(&cas)
        .arg("--trace")
        .arg(p.path("trace.jsonl"))
        .output()
        .expect("run");
    let (live, err) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let rec = lines(&cas);
    assert_eq!(rec.len(), 5, "4 grades + 1 answer");
    let mut seqs: Vec<u64> = rec
        .iter()
        .map(|l| l["seq"].as_u64().expect("seq"))
        .collect();
    let written_order = seqs.clone();
    seqs.sort_unstable();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    assert_ne!(
        written_order, seqs,
        "reversed delays: lines are written as calls end"
    );
    // Item i's line holds the i-th answer.
    for l in rec.iter().filter(|l| l["node"] == "grade") {
        let i = l["item"].as_u64().expect("item");
        assert_eq!(l["output"]["ok"], json!(i % 2 == 0), "{l}");
        assert_eq!(l["seq"].as_u64(), Some(i));
    }
    // The key in the environment never reaches any output.
    for text in [
        std::fs::read_to_string(&cas).expect("cassette"),
        std::fs::read_to_string(p.path("trace.jsonl")).expect("trace"),
        live.clone(),
        err,
    ] {
        assert!(!text.contains(planted), "planted key leaked: {text}");
        assert!(
            !text.contains("RAGLOOP_TEST_PLANTED_KEY"),
            "key variable leaked: {text}"
        );
    }

    // Replay: the fixture is gone, so any call to the scripted provider would fail.
    std::fs::remove_file(p.path("fixture.json")).expect("rm fixture");
    let o = p
        .run()
        .args(["-q", "cargo code", "--json", "--replay"])
        .arg(&cas)
        .output()
        .expect("replay");
    let (replayed, err) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let a: Value = serde_json::from_str(live.trim()).expect("json");
    let b: Value = serde_json::from_str(replayed.trim()).expect("json");
    assert_eq!(outcome(&a), outcome(&b));
    assert_eq!(b["usage"]["cached_calls"], json!(5));
    assert_eq!(
        a["state"]["grades"],
        json!([{"ok": true}, {"ok": false}, {"ok": true}, {"ok": false}])
    );
}

#[test]
fn replay_with_a_changed_prompt_fails_naming_node_model_and_difference() {
    let p = Project::new(SPEC, fixture());
    let cas = p.path("cas.jsonl");
    let o = p
        .run()
        .args(["-q", "cargo code", "--record"])
        .arg(&cas)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", out(&o).1);
    std::fs::write(
        p.path("spec.yaml"),
        SPEC.replace("PROMPT Answer", "PROMPT Reply to"),
    )
    .expect("edit");
    let o = p
        .run()
        .args(["-q", "cargo code", "--replay"])
        .arg(&cas)
        .output()
        .expect("replay");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    for part in [
        "node `say` of model `m`",
        "1 exchange(s) for that node",
        "message 1 (user) first differs at character 7",
        "now \"PROMPT Reply to",
        "recorded \"PROMPT Answer",
    ] {
        assert!(stderr.contains(part), "missing {part:?} in {stderr}");
    }
    // The grades before `say` replayed fine: the failure is at `say`.
    assert!(stdout.contains("retrieve -> grade -> say"), "{stdout}");
}

#[test]
fn provider_replay_in_the_spec_answers_one_model() {
    let p = Project::new(SPEC, fixture());
    let cas = p.path("cas.jsonl");
    let o = p
        .run()
        .args(["-q", "cargo code", "--json", "--record"])
        .arg(&cas)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", out(&o).1);
    let live: Value = serde_json::from_str(out(&o).0.trim()).expect("json");
    let replay_spec = SPEC.replace(
        "    provider: scripted\n    api_key_env: RAGLOOP_TEST_PLANTED_KEY\n    params: {file: fixture.json}",
        "    provider: replay\n    params: {file: cas.jsonl}",
    );
    assert_ne!(replay_spec, SPEC);
    std::fs::write(p.path("spec.yaml"), &replay_spec).expect("spec");
    std::fs::remove_file(p.path("fixture.json")).expect("rm fixture");
    // Recorded again from the replay: the new cassette has the same keys.
    let again = p.path("again.jsonl");
    let o = p
        .run()
        .args(["-q", "cargo code", "--json", "--record"])
        .arg(&again)
        .output()
        .expect("replay");
    let (stdout, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let replayed: Value = serde_json::from_str(stdout.trim()).expect("json");
    assert_eq!(outcome(&live), outcome(&replayed));
    let keys = |p: &Path| {
        let mut k: Vec<String> = lines(p)
            .iter()
            .map(|l| l["key"].as_str().unwrap_or("").to_string())
            .collect();
        k.sort();
        k
    };
    assert_eq!(keys(&cas), keys(&again));
    // A model name the cassette does not hold is refused before the run.
    std::fs::write(
        p.path("spec.yaml"),
        replay_spec
            .replace("  m:\n", "  other:\n")
            .replace("model: m", "model: other"),
    )
    .expect("spec");
    let o = p.run().args(["-q", "cargo code"]).output().expect("run");
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no exchange of a model named `other` (models recorded: m)"),
        "{stderr}"
    );
}

#[test]
fn bad_cassettes_and_paths_are_usage_errors() {
    let p = Project::new(SPEC, fixture());
    let cas = p.path("cas.jsonl");
    let o = p
        .run()
        .args(["-q", "cargo code", "--record"])
        .arg(&cas)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", out(&o).1);
    let good = std::fs::read_to_string(&cas).expect("cassette");

    // A malformed line: file and line number.
    let mut bad: Vec<&str> = good.lines().collect();
    bad.insert(2, "{\"v\": 1, \"key\": \"nope\"}");
    std::fs::write(p.path("bad.jsonl"), bad.join("\n") + "\n").expect("bad");
    let o = p
        .run()
        .args(["-q", "cargo code", "--replay"])
        .arg(p.path("bad.jsonl"))
        .output()
        .expect("run");
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.jsonl:3: not a cassette exchange"),
        "{stderr}"
    );

    // Not JSON at all, and another format version.
    for (text, msg) in [("garbage\n", ":1: not a cassette exchange"), ("{\"v\": 2, \"seq\": 0, \"key\": \"00\", \"node\": \"n\", \"model_name\": \"m\", \"config\": {\"provider\": \"openai\"}, \"output\": 1}\n", ":1: format version 2")] {
        std::fs::write(p.path("bad.jsonl"), text).expect("bad");
        let o = p.run().args(["-q", "cargo code", "--replay"]).arg(p.path("bad.jsonl")).output().expect("run");
        let (_, stderr) = out(&o);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(msg), "{msg}: {stderr}");
    }

    // A torn last line (a recording killed mid-write): skipped with a warning.
    let torn = format!("{good}{}", &good[..good.find('\n').unwrap_or(10) / 2]);
    std::fs::write(p.path("torn.jsonl"), torn).expect("torn");
    std::fs::remove_file(p.path("fixture.json")).expect("rm fixture");
    let o = p
        .run()
        .args(["-q", "cargo code", "--replay"])
        .arg(p.path("torn.jsonl"))
        .output()
        .expect("run");
    let (_, stderr) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("last line of") && stderr.contains("incomplete"),
        "{stderr}"
    );

    // Missing cassette; --record over the spec or the replayed cassette.
    let o = p
        .run()
        .args(["-q", "x", "--replay"])
        .arg(p.path("none.jsonl"))
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(out(&o).1.contains("cannot read cassette"), "{}", out(&o).1);
    let o = p
        .run()
        .args(["-q", "x", "--record"])
        .arg(p.path("spec.yaml"))
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(out(&o).1.contains("would overwrite"), "{}", out(&o).1);
    assert!(std::fs::read_to_string(p.path("spec.yaml"))
        .expect("spec")
        .contains("version: 1"));
    let o = p
        .run()
        .args(["-q", "x", "--replay"])
        .arg(&cas)
        .arg("--record")
        .arg(&cas)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&cas).expect("cassette"), good);
}
