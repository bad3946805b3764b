//! Record a CRAG run against a wiremock OpenAI-compatible server, then replay it with
//! no key and no server: identical results. The response cache through the binary:
//! a second run is answered from disk, `--no-cache` and temperature > 0 are not. A
//! planted API key reaches the server and nothing else.

use crate::providers_support::crag_answer;
use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const KEY_VAR: &str = "RAGLOOP_TEST_CASSETTE_OPENAI_KEY";
const PLANTED: &str = "sk-planted-cassette-5e1d9a7c3b2f4e6d8a0c";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// graphs/crag.yaml with both models on the mock server (temperature `t` for the
/// generator), rooted at the repository so its prompts and schemas resolve.
fn crag_on(dir: &Path, base_url: &str, generator_temperature: f64) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("graphs/crag.yaml")).expect("crag.yaml");
    let start = text.find("\nmodels:\n").expect("models") + 1;
    let end = text.find("\nretrievers:\n").expect("retrievers") + 1;
    let model = |t: f64| {
        format!("{{provider: openai, model: gpt-test, base_url: \"{base_url}\", api_key_env: {KEY_VAR}, temperature: {t}, retries: 0, price: {{input_per_mtok: 1.0, output_per_mtok: 2.0}}}}")
    };
    let models = format!(
        "models:\n  grader: {}\n  generator: {}\n\n",
        model(0.0),
        model(generator_temperature)
    );
    // The offline variants patch params these models do not have.
    let cut = text.find("\nvariants:\n").unwrap_or(text.len()) + 1;
    let text = format!("{}{}{}", &text[..start], models, &text[end..cut])
        .replace("root: ..", &format!("root: \"{}\"", repo().display()));
    let spec = dir.join("crag-openai.yaml");
    std::fs::write(&spec, text).expect("spec");
    spec
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn start(rt: &tokio::runtime::Runtime) -> MockServer {
    rt.block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(|req: &Request| {
                let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                ResponseTemplate::new(200).set_body_json(crag_answer(&body))
            })
            .mount(&server)
            .await;
        server
    })
}

fn requests(rt: &tokio::runtime::Runtime, server: &MockServer) -> Vec<Request> {
    rt.block_on(server.received_requests()).unwrap_or_default()
}

fn ragloop(cache: &Path) -> Command {
    let mut c = Command::cargo_bin("ragloop").expect("binary");
    c.env("RAGLOOP_CACHE_DIR", cache)
        .env_remove(KEY_VAR)
        .env_remove("OPENAI_API_KEY")
        .current_dir(repo());
    c
}

fn out(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn outcome(v: &Value) -> Value {
    json!({
        "status": v["status"], "answer": v["answer"], "sources": v["sources"],
        "path": v["path"], "iterations": v["iterations"], "state": v["state"],
        "error": v["error"], "calls": v["usage"]["calls"], "id": v["id"],
        "input_tokens": v["usage"]["input_tokens"], "output_tokens": v["usage"]["output_tokens"],
        "cost_usd": v["usage"]["cost_usd"],
    })
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn record_against_a_mock_openai_server_then_replay_with_no_key_and_no_server() {
    let rt = rt();
    let server = start(&rt);
    let tmp = tempfile::tempdir().expect("tmp");
    let spec = crag_on(tmp.path(), &format!("{}/v1", server.uri()), 0.0);
    let questions = tmp.path().join("q.jsonl");
    std::fs::write(
        &questions,
        "{\"id\": \"a\", \"question\": \"What does cargo check do?\"}\n{\"id\": \"b\", \"question\": \"How do I declare a mutable variable?\"}\n",
    )
    .expect("questions");
    let cas = tmp.path().join("openai.jsonl");
    let trace = tmp.path().join("trace.jsonl");
    let cache = tmp.path().join("cache");
    let o = ragloop(&cache)
        .env(KEY_VAR, PLANTED)
        .args(["run", "--verbose"])
        .arg(&spec)
        .arg("--input")
        .arg(&questions)
        .arg("--record")
        .arg(&cas)
        .arg("--trace")
        .arg(&trace)
        .output()
        .expect("run");
    let (live_out, live_err) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{live_err}");
    let live = json_lines(&live_out);
    assert_eq!(live.len(), 2);
    let calls: u64 = live
        .iter()
        .map(|v| v["usage"]["calls"].as_u64().unwrap_or(0))
        .sum();
    let seen = requests(&rt, &server);
    assert_eq!(seen.len() as u64, calls, "every call reached the server");
    for r in &seen {
        assert_eq!(
            r.headers.get("authorization").and_then(|v| v.to_str().ok()),
            Some(format!("Bearer {PLANTED}").as_str()),
            "the key is sent to the server"
        );
    }
    let recorded = json_lines(&std::fs::read_to_string(&cas).expect("cassette"));
    assert_eq!(recorded.len() as u64, calls);
    for l in &recorded {
        assert_eq!(l["config"]["provider"], json!("openai"));
        assert_eq!(l["config"]["model"], json!("gpt-test"));
        assert!(
            l.get("inputs").is_none(),
            "network requests are keyed by messages"
        );
    }
    // The planted key is nowhere but in the requests.
    let mut outputs = vec![
        std::fs::read_to_string(&cas).expect("cassette"),
        std::fs::read_to_string(&trace).expect("trace"),
        live_out.clone(),
        live_err,
    ];
    for f in files_under(&cache.join("responses")) {
        outputs.push(std::fs::read_to_string(f).expect("cache entry"));
    }
    assert!(
        outputs.len() > 4,
        "the cache holds the temperature-0 answers"
    );
    for text in &outputs {
        assert!(!text.contains(PLANTED), "planted key leaked: {text}");
    }

    // No server, no key, a fresh cache: the replay answers everything.
    drop(server);
    let o = ragloop(&tmp.path().join("cache2"))
        .arg("run")
        .arg(&spec)
        .arg("--input")
        .arg(&questions)
        .arg("--replay")
        .arg(&cas)
        .output()
        .expect("replay");
    let (replay_out, replay_err) = out(&o);
    assert_eq!(o.status.code(), Some(0), "{replay_err}");
    let replayed = json_lines(&replay_out);
    assert_eq!(replayed.len(), 2);
    for (a, b) in live.iter().zip(&replayed) {
        assert_eq!(outcome(a), outcome(b));
        assert_eq!(b["usage"]["cached_calls"], b["usage"]["calls"]);
        assert!(
            a["answer"].as_str().is_some_and(|s| s.contains("[a.md]")),
            "{a}"
        );
    }
    // Without --replay the same run needs the key (and the server).
    let o = ragloop(&tmp.path().join("cache3"))
        .arg("run")
        .arg(&spec)
        .args(["-q", "What does cargo check do?"])
        .output()
        .expect("run");
    assert_ne!(o.status.code(), Some(0));
    assert!(out(&o).1.contains(KEY_VAR), "{}", out(&o).1);
}

#[test]
fn the_response_cache_answers_a_second_run_from_disk() {
    let rt = rt();
    let server = start(&rt);
    let tmp = tempfile::tempdir().expect("tmp");
    let cache = tmp.path().join("cache");
    let spec = crag_on(tmp.path(), &format!("{}/v1", server.uri()), 0.0);
    let go = |extra: &[&str]| {
        let trace = tmp.path().join("trace.jsonl");
        let o = ragloop(&cache)
            .env(KEY_VAR, PLANTED)
            .arg("run")
            .arg(&spec)
            .args(["-q", "What does cargo check do?", "--trace"])
            .arg(&trace)
            .args(extra)
            .output()
            .expect("run");
        let (stdout, stderr) = out(&o);
        assert_eq!(o.status.code(), Some(0), "{stderr}");
        let steps = json_lines(&std::fs::read_to_string(&trace).expect("trace"));
        (stdout, steps)
    };
    let (first, steps) = go(&[]);
    let n = requests(&rt, &server).len();
    assert!(n >= 3, "{n}");
    assert!(!first.contains("Cached:"), "{first}");
    let fin = steps.last().expect("final");
    assert_eq!(fin["usage"]["cached_calls"], json!(0));

    let (second, steps) = go(&[]);
    assert_eq!(
        requests(&rt, &server).len(),
        n,
        "the second run made no request"
    );
    assert!(
        second.contains(&format!("Cached: {n} of {n} LLM call(s)")),
        "{second}"
    );
    for s in steps.iter().filter(|s| s.get("llm").is_some()) {
        assert_eq!(s["llm"]["cached"], s["llm"]["calls"], "{s}");
    }
    let fin = steps.last().expect("final");
    assert_eq!(fin["usage"]["cached_calls"], json!(n));
    assert!(
        fin["usage"]["saved_usd"].as_f64().is_some_and(|c| c > 0.0),
        "{fin}"
    );
    assert_eq!(
        first.lines().next(),
        second.lines().next(),
        "same answer from the cache"
    );

    // --no-cache: every call goes to the server again.
    let (third, _) = go(&["--no-cache"]);
    assert_eq!(requests(&rt, &server).len(), 2 * n);
    assert!(!third.contains("Cached:"), "{third}");

    // A generator at temperature 0.5 is never cached: its calls reach the server on
    // every run, the grader's do not.
    let spec_hot = crag_on(tmp.path(), &format!("{}/v1", server.uri()), 0.5);
    assert_eq!(spec_hot, spec);
    let before = requests(&rt, &server).len();
    go(&[]);
    let mid = requests(&rt, &server).len();
    go(&[]);
    let after = requests(&rt, &server).len();
    assert!(
        mid > before,
        "the temperature-0.5 generator misses the first time"
    );
    assert_eq!(after - mid, mid - before, "and every time");
    let bodies: Vec<Value> = requests(&rt, &server)[mid..]
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("body"))
        .collect();
    assert!(
        bodies.iter().all(|b| b["temperature"] == json!(0.5)),
        "only generator calls: {bodies:?}"
    );
}
