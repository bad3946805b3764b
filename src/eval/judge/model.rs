//! The model judge of `--judge PROVIDER[:MODEL][@URL]`: three one-node ragloop
//! programs (`statements`, `verdicts`, `relevancy`), each an `llm` node with a JSON
//! Schema `schema:` and Jinja prompts shipped in the binary (`prompts/*.jinja`
//! here), compiled and validated like any spec, their model overridden with the
//! `--judge` argument by the `--model` rules
//! ([`crate::compile::SpecOverrides`]), their providers built by
//! [`Resources::prepare`] with the eval's cache, cassette recording and replay
//! layers, retries, limits, `--timeout` and `--retries`, and API-key rules. So a
//! judge reply is schema-checked with repair turns like an `llm` node's, cached,
//! recorded in the `--record` cassette and answered by `--replay`.
//!
//! Path rules: `scripted:FIXTURE` takes its fixture (keys `statements`, `verdicts`,
//! `relevancy`) relative to the working directory; it is copied next to the judge
//! specs (the specs' root), so root confinement holds.
use crate::compile::{compile, CompileOptions, SpecOverrides};
use crate::runtime::{NoTrace, Program, ResourceOptions, Resources, RunInput, Status};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PROMPTS: [(&str, &str); 6] = [
    (
        "statements.system.jinja",
        include_str!("prompts/statements.system.jinja"),
    ),
    (
        "statements.user.jinja",
        include_str!("prompts/statements.user.jinja"),
    ),
    (
        "verdicts.system.jinja",
        include_str!("prompts/verdicts.system.jinja"),
    ),
    (
        "verdicts.user.jinja",
        include_str!("prompts/verdicts.user.jinja"),
    ),
    (
        "relevancy.system.jinja",
        include_str!("prompts/relevancy.system.jinja"),
    ),
    (
        "relevancy.user.jinja",
        include_str!("prompts/relevancy.user.jinja"),
    ),
];

/// The three judge tasks: (node name, inputs, output schema).
const TASKS: [(&str, &str, &str); 3] = [
    (
        "statements",
        "{question: question, answer: answer}",
        r#"{"type": "object", "properties": {"statements": {"type": "array", "items": {"type": "string"}}}, "required": ["statements"]}"#,
    ),
    (
        "verdicts",
        "{question: question, context: context, statements: statements, sample: sample}",
        r#"{"type": "object", "properties": {"verdicts": {"type": "array", "items": {"type": "object", "properties": {"supported": {"type": "boolean"}, "reason": {"type": "string"}}, "required": ["supported", "reason"]}}}, "required": ["verdicts"]}"#,
    ),
    (
        "relevancy",
        "{question: question, answer: answer, sample: sample}",
        r#"{"type": "object", "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}}, "required": ["score", "reason"]}"#,
    ),
];

fn spec_text(task: &str, inputs: &str, schema: &str, model: &str) -> String {
    format!(
        r#"version: 1
name: judge-{task}
description: ragloop eval's judge, task {task}.
state:
  schema:
    type: object
    properties:
      question: {{type: string}}
      answer: {{type: string}}
      context: {{type: array, items: {{type: string}}}}
      statements: {{type: array, items: {{type: string}}}}
      sample: {{type: integer}}
      result: {{type: object}}
  initial:
    answer: ""
    context: []
    statements: []
    sample: 1
    result: {{}}
models:
  judge:
{model}
entry: {task}
nodes:
  {task}:
    kind: llm
    model: judge
    inputs: {inputs}
    prompt:
      system: {{ file: {task}.system.jinja }}
      user: {{ file: {task}.user.jinja }}
    schema: {schema}
    update:
      result: output
edges:
  {task}: END
"#
    )
}

/// A judge program whose model and keys are checked, resources not opened yet.
struct Loaded {
    task: &'static str,
    program: Arc<Program>,
}

/// The judge programs checked before anything runs ([`ModelJudge::load`]); opened
/// with the eval's call layers by [`LoadedJudge::open`].
pub struct LoadedJudge {
    arg: String,
    programs: Vec<Loaded>,
    /// The judge specs' directory, kept until the providers are built (a scripted
    /// fixture is read then).
    _dir: Scratch,
}

impl std::fmt::Debug for LoadedJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoadedJudge({})", self.arg)
    }
}

/// A judge model ready to call.
pub struct ModelJudge {
    arg: String,
    statements: (Arc<Program>, Arc<Resources>),
    verdicts: (Arc<Program>, Arc<Resources>),
    relevancy: (Arc<Program>, Arc<Resources>),
}

impl std::fmt::Debug for ModelJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModelJudge({})", self.arg)
    }
}

/// A scratch directory for the judge specs, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch() -> Result<Scratch, String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ragloop-judge-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("--judge: cannot create {}: {e}", dir.display()))?;
    Ok(Scratch(dir))
}

/// The `models.judge` block of the judge specs for `arg` (the override then sets
/// provider, model and URL): a scripted fixture (relative to the working
/// directory) is copied into `dir`, the judge specs' root.
fn model_block(arg: &str, dir: &Path) -> Result<(String, String), String> {
    if let Some(file) = arg.strip_prefix("scripted:") {
        std::fs::copy(Path::new(file), dir.join("fixture.json"))
            .map_err(|e| format!("--judge {arg}: cannot read {file}: {e}"))?;
        return Ok((
            "    provider: scripted\n    params: {file: fixture.json}\n".into(),
            "scripted".into(),
        ));
    }
    Ok((
        "    provider: openai\n    model: gpt-4o-mini\n    temperature: 0\n".into(),
        arg.to_string(),
    ))
}

impl ModelJudge {
    /// Compiles the judge programs for `--judge ARG` with `--timeout`/`--retries`,
    /// and checks the model's API key (none needed when `replaying`).
    ///
    /// # Errors
    /// A usage message starting with `--judge`: a malformed argument, an unknown
    /// provider, a missing model name or API key.
    pub fn load(
        arg: &str,
        timeout_secs: Option<f64>,
        retries: Option<u32>,
        replaying: bool,
    ) -> Result<LoadedJudge, String> {
        let dir = scratch()?;
        let (block, over) = model_block(arg, &dir.0)?;
        for (name, text) in PROMPTS {
            std::fs::write(dir.0.join(name), text)
                .map_err(|e| format!("--judge: cannot write {}: {e}", dir.0.display()))?;
        }
        let mut programs = Vec::new();
        for (task, inputs, schema) in TASKS {
            let path = dir.0.join(format!("{task}.yaml"));
            std::fs::write(&path, spec_text(task, inputs, schema, &block))
                .map_err(|e| format!("--judge: cannot write {}: {e}", path.display()))?;
            let mut compiled = compile(
                &path,
                &CompileOptions {
                    no_environment: true,
                },
            )
            .map_err(|e| format!("--judge {arg}: the judge spec does not compile: {e}"))?;
            let changes = SpecOverrides {
                models: vec![format!("judge={over}")],
                timeout_secs,
                retries,
                ..SpecOverrides::default()
            };
            let program = compiled
                .program_with(None, &changes)
                .map_err(|e| format!("--judge {arg}: {e}"))?;
            let scope = crate::providers::keys::KeyScope {
                replaying,
                live_calls: true,
                ..Default::default()
            };
            let missing = crate::providers::keys::missing(&program.spec, &scope);
            if !missing.is_empty() {
                return Err(format!("--judge {arg}: {}", missing.join("; ")));
            }
            programs.push(Loaded { task, program });
        }
        Ok(LoadedJudge {
            arg: arg.to_string(),
            programs,
            _dir: dir,
        })
    }
}

impl LoadedJudge {
    /// Builds the judge's providers with the eval's call layers (the response
    /// cache, the `--record` cassette, the `--replay` cassette: those of
    /// [`crate::eval::runner::CallLayers`]).
    ///
    /// # Errors
    /// A provider that cannot be built (a missing fixture, a bad URL), naming `--judge`.
    pub fn open(
        self,
        cache: Option<Arc<crate::providers::cache::ResponseCache>>,
        record: Option<Arc<crate::providers::cassette::CassetteWriter>>,
        replay: Option<Arc<crate::providers::cassette::Cassette>>,
    ) -> Result<ModelJudge, String> {
        let mut opened = Vec::new();
        for l in self.programs {
            let res = Resources::prepare(
                &l.program,
                ResourceOptions {
                    cache: cache.clone(),
                    record: record.clone(),
                    replay: replay.clone(),
                    ..ResourceOptions::default()
                },
            )
            .map_err(|e| format!("--judge {}: {e}", self.arg))?;
            opened.push((l.task, (l.program, Arc::new(res))));
        }
        let mut take = |task: &str| {
            let at = opened.iter().position(|(t, _)| *t == task)?;
            Some(opened.swap_remove(at).1)
        };
        let missing = || format!("--judge {}: internal: a judge task is missing", self.arg);
        Ok(ModelJudge {
            statements: take("statements").ok_or_else(missing)?,
            verdicts: take("verdicts").ok_or_else(missing)?,
            relevancy: take("relevancy").ok_or_else(missing)?,
            arg: self.arg,
        })
    }
}

async fn call(
    (program, res): &(Arc<Program>, Arc<Resources>),
    question: &str,
    sets: Vec<(String, Value)>,
) -> Result<Value, String> {
    let input = RunInput {
        question: Some(question.to_string()),
        sets,
    };
    let r = crate::runtime::run(program, res, &input, &mut NoTrace).await;
    // The judge specs name no answer field: a run that reached END is `exhausted`.
    if !matches!(
        r.status,
        Status::Generated | Status::Fallback | Status::Exhausted
    ) {
        return Err(r
            .error
            .unwrap_or_else(|| format!("the judge run ended {}", r.status.as_str())));
    }
    match r.state.get("result") {
        Some(Value::Object(m)) if !m.is_empty() => Ok(Value::Object(m.clone())),
        _ => Err("the judge gave no result".into()),
    }
}

impl ModelJudge {
    /// The answer's statements.
    ///
    /// # Errors
    /// The call failed or its reply is not the schema's JSON.
    pub async fn statements(&self, question: &str, answer: &str) -> Result<Vec<String>, String> {
        let v = call(
            &self.statements,
            question,
            vec![("answer".into(), json!(answer))],
        )
        .await?;
        Ok(v.get("statements")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// One supported/unsupported verdict per statement, sample number `sample`.
    ///
    /// # Errors
    /// The call failed or its reply is not the schema's JSON.
    pub async fn verdicts(
        &self,
        question: &str,
        statements: &[String],
        context: &[String],
        sample: usize,
    ) -> Result<Vec<bool>, String> {
        let v = call(
            &self.verdicts,
            question,
            vec![
                ("statements".into(), json!(statements)),
                ("context".into(), json!(context)),
                ("sample".into(), json!(sample)),
            ],
        )
        .await?;
        Ok(v.get("verdicts")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|x| x.get("supported").and_then(Value::as_bool).unwrap_or(false))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Answer relevancy, 0..1, sample number `sample`.
    ///
    /// # Errors
    /// The call failed or its reply is not the schema's JSON.
    pub async fn relevancy(
        &self,
        question: &str,
        answer: &str,
        sample: usize,
    ) -> Result<f64, String> {
        let v = call(
            &self.relevancy,
            question,
            vec![
                ("answer".into(), json!(answer)),
                ("sample".into(), json!(sample)),
            ],
        )
        .await?;
        v.get("score")
            .and_then(Value::as_f64)
            .ok_or_else(|| "the judge's reply has no score".into())
    }
}
