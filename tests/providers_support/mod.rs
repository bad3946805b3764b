//! Helpers shared by the provider tests: a one-node spec pointed at a wiremock
//! server on 127.0.0.1, runs through the library, and mock responders.
#![allow(dead_code)]
use ragloop::compile::load_program;
use ragloop::runtime::{run, NoTrace, Program, ResourceOptions, Resources, RunInput, RunResult};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wiremock::{Request, Respond, ResponseTemplate};

pub struct Project {
    pub dir: tempfile::TempDir,
    pub spec: PathBuf,
}

pub const GRADE_SCHEMA: &str = r#"{"title": "Verdict", "description": "The verdict.", "type": "object",
  "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}, "score": {"type": "number"}},
  "required": ["verdict"]}"#;

/// A spec with model `m` (`model_yaml` is its flow mapping body, e.g.
/// `provider: openai, model: x, base_url: ...`) and one `llm` node `judge`, with
/// structured output when `structured`.
pub fn project(model_yaml: &str, structured: bool) -> Project {
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = if structured {
        format!(
            "    schema: {}\n    repair_attempts: 1\n",
            GRADE_SCHEMA.replace('\n', " ")
        )
    } else {
        String::new()
    };
    let answer_type = if structured { "object" } else { "string" };
    let text = format!(
        r#"version: 1
name: providers
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      answer: {{type: {answer_type}}}
    required: [question]
models:
  m: {{{model_yaml}}}
output: {{answer: answer}}
entry: judge
nodes:
  judge:
    kind: llm
    model: m
    inputs:
      q: question
    prompt:
      system: "You are a careful judge."
      user: "Question: {{{{ q }}}}"
{schema}    update:
      answer: output
edges:
  judge: END
"#
    );
    let spec = dir.path().join("spec.yaml");
    std::fs::write(&spec, text).expect("write spec");
    Project { dir, spec }
}

pub fn program(p: &Project) -> Program {
    match load_program(&p.spec, None, &[]) {
        Ok(p) => p,
        Err(e) => panic!("spec does not load: {e}"),
    }
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Prepares and runs a program on `question` inside `rt`.
pub async fn run_async(program: &Program, question: &str) -> RunResult {
    let res = Resources::prepare(program, ResourceOptions::default()).expect("resources");
    let input = RunInput {
        question: Some(question.into()),
        sets: vec![],
    };
    run(program, &res, &input, &mut NoTrace).await
}

/// The JSON bodies of the requests a mock server received, in order.
pub async fn bodies(server: &wiremock::MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("request body is JSON"))
        .collect()
}

/// An OpenAI chat completion with one tool call.
pub fn openai_tool_call(name: &str, args: Value) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "test",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]
        }}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    })
}

/// An OpenAI chat completion with text content.
pub fn openai_text(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "test",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    })
}

/// Answers with the given responses in order (the last one repeats), and keeps the
/// arrival time of every request.
pub struct Sequence {
    responses: Vec<ResponseTemplate>,
    pub seen: Arc<Mutex<Vec<Instant>>>,
}

impl Sequence {
    pub fn new(responses: Vec<ResponseTemplate>) -> Sequence {
        Sequence {
            responses,
            seen: Arc::default(),
        }
    }
}

impl Respond for Sequence {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let mut seen = self.seen.lock().expect("lock");
        let i = seen.len().min(self.responses.len() - 1);
        seen.push(Instant::now());
        self.responses[i].clone()
    }
}

/// An OpenAI-compatible server that drives the CRAG graph: grading tools answer
/// "relevant", the answer grader "grounded and on topic", text calls an answer
/// citing its first document. Keeps the arrival time of every request.
pub struct CragOpenAi {
    pub seen: Arc<Mutex<Vec<Instant>>>,
}

/// CRAG's happy path, in the shape the request asks for: a call of the offered
/// function (`tool_call` mode), or the JSON object as text (`response_format`
/// json_schema, the default mode).
pub fn crag_answer(body: &Value) -> Value {
    let (name, as_text) = match body.pointer("/tools/0/function/name") {
        Some(n) => (n.as_str(), false),
        None => (
            body.pointer("/response_format/json_schema/name")
                .and_then(Value::as_str),
            true,
        ),
    };
    let out = match name {
        Some("GradingResult") => {
            json!({"document_id": passage_id(body), "binary_score": "yes", "confidence": 0.9})
        }
        Some("AnswerGrade") => json!({"grounded": true, "addresses_question": true}),
        Some(_) => json!({}),
        None => return openai_text("Cargo check checks the code without building it. [a.md]"),
    };
    if as_text {
        openai_text(&out.to_string())
    } else {
        openai_tool_call(name.unwrap_or_default(), json!(out.to_string()))
    }
}

/// The id of the passage a CRAG grading prompt shows (`Passage ID (from ...`).
pub fn passage_id(body: &Value) -> String {
    let user = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    user.split("Passage ")
        .nth(1)
        .and_then(|r| r.split(" (from").next())
        .unwrap_or("")
        .to_string()
}

impl Respond for CragOpenAi {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.seen.lock().expect("lock").push(Instant::now());
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        ResponseTemplate::new(200).set_body_json(crag_answer(&body))
    }
}

/// Max number of arrivals inside any window of `window_ms`.
pub fn max_in_window(seen: &[Instant], window_ms: u64) -> usize {
    let mut t: Vec<Instant> = seen.to_vec();
    t.sort();
    let w = std::time::Duration::from_millis(window_ms);
    let mut best = 0;
    for (i, a) in t.iter().enumerate() {
        let n = t[i..]
            .iter()
            .take_while(|b| b.duration_since(*a) < w)
            .count();
        best = best.max(n);
    }
    best
}

/// `ragloop`, with no OpenAI key and a response cache of its own (a cached answer
/// would hide the requests these tests count).
pub fn ragloop_isolated() -> assert_cmd::Command {
    static CACHE: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| tempfile::tempdir().unwrap());
    let mut c = assert_cmd::Command::cargo_bin("ragloop").unwrap();
    c.env_remove("OPENAI_API_KEY")
        .env("RAGLOOP_CACHE_DIR", cache.path().join(uuid_like()));
    c
}

/// A fresh name per command: every command starts with an empty cache.
fn uuid_like() -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!("c{}", N.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
}
