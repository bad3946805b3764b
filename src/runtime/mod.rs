//! Running specs: the tokio interpreter and what it needs.
//!
//! - [`program`]: a validated spec compiled for running ([`Program`]);
//! - [`state`]: initial state, reducers, state schema checks;
//! - [`eval`]: templates and expressions on the shared minijinja environment;
//! - [`resources`]: retrievers ([`Retriever`], BM25 by default), tools, providers;
//! - [`interpreter`]: [`run`], one run of a program (node execution in `nodes.rs`), and
//!   [`run_until`], the same run stopped by a [`CancellationToken`] (status
//!   [`Status::Interrupted`]);
//! - [`trace`]: step records, JSON-lines traces, verbose output;
//! - [`status`]: terminal statuses and exit codes.
//!
//! ```no_run
//! # async fn demo() -> Result<(), String> {
//! use ragloop::runtime::*;
//! let program = load_program(std::path::Path::new("graphs/crag.yaml"), None, &[]).map_err(|e| e.to_string())?;
//! let res = Resources::prepare(&program, ResourceOptions::default())?;
//! let input = RunInput { question: Some("What does cargo check do?".into()), sets: vec![] };
//! let result = run(&program, &res, &input, &mut NoTrace).await;
//! println!("{} {:?}", result.status, result.answer);
//! # Ok(()) }
//! ```
pub mod expr;
mod integers;
pub mod interpreter;
mod nodes;
pub mod overrides;
pub mod program;
pub mod resources;
pub mod state;
pub mod status;
pub mod trace;

pub use interpreter::{run, run_until};
pub use overrides::SpecOverrides;
pub use program::Program;
pub use resources::{ResourceOptions, Resources, Retriever, ScriptedRetriever, SearchFuture};
pub use status::Status;
pub use tokio_util::sync::CancellationToken;
pub use trace::{JsonlTrace, NoTrace, Observer, StepRecord, Verbose};

use crate::diag::Diagnostic;
use crate::spec::source::Sources;
use crate::spec::types::Provider as ProviderKind;
use crate::spec::{overlay, LoadedSpec};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// One run's inputs besides the spec.
#[derive(Clone, Debug, Default)]
pub struct RunInput {
    /// The question (written to the `question` field).
    pub question: Option<String>,
    /// `--set FIELD=VALUE` values, applied after the question.
    pub sets: Vec<(String, Value)>,
}

/// Token usage of a whole run (the sum of the steps' [`trace::LlmStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RunUsage {
    /// LLM calls (repairs included, cached answers included).
    pub calls: u64,
    /// Of `calls`, the answers served from the response cache or a cassette.
    pub cached_calls: u64,
    /// Prompt and completion tokens (cached answers count with their recorded
    /// tokens), and the cost in US dollars of the answers (from the models' `price`;
    /// 0 without prices), cached ones at their recorded cost; the money spent by this
    /// run is `cost_usd - saved_usd`. JSON: `input_tokens`, `output_tokens`,
    /// `cost_usd` at this level.
    #[serde(flatten)]
    pub tokens: crate::providers::Usage,
    /// Of `cost_usd`, the recorded cost of the cached answers: not spent again.
    pub saved_usd: f64,
    /// True when some call's token counts were estimated (the server reported no
    /// usage); absent from JSON when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl RunUsage {
    /// One line for people: `4 call(s), 1200 tokens in, 85 out, $0.000231`
    /// (`, estimated` when some counts are estimates; the cost only when priced).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} call(s), {} tokens in, {} out",
            self.calls, self.tokens.input_tokens, self.tokens.output_tokens
        );
        if self.tokens.cost_usd > 0.0 {
            s.push_str(&format!(", ${:.6}", self.tokens.cost_usd));
        }
        if self.estimated {
            s.push_str(" (token counts partly estimated)");
        }
        s
    }
}

impl std::ops::AddAssign<&trace::LlmStats> for RunUsage {
    /// Adds a step's usage.
    fn add_assign(&mut self, s: &trace::LlmStats) {
        self.calls += s.calls;
        self.cached_calls += s.cached;
        self.tokens += s.tokens;
        self.saved_usd += s.saved_usd;
        self.estimated |= s.usage_estimated;
    }
}

/// What a run returns.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Terminal status.
    pub status: Status,
    /// The answer (`output.answer` field) when the status is generated or fallback.
    pub answer: Option<String>,
    /// `metadata.source` (else `id`) of the documents in the `output.documents` field,
    /// deduplicated, in order.
    pub sources: Vec<String>,
    /// Nodes executed, in order.
    pub path: Vec<String>,
    /// How many times the entry node ran (passes through the loop).
    pub iterations: u32,
    /// Node executions (the length of `path`).
    pub steps: u32,
    /// The final state.
    pub state: Value,
    /// LLM usage.
    pub usage: RunUsage,
    /// Why the run failed or was limited.
    pub error: Option<String>,
    /// The variant the run used.
    pub variant: Option<String>,
}

impl RunResult {
    fn new(variant: Option<&str>) -> RunResult {
        RunResult {
            status: Status::Failed,
            answer: None,
            sources: Vec::new(),
            path: Vec::new(),
            iterations: 0,
            steps: 0,
            state: Value::Null,
            usage: RunUsage::default(),
            error: None,
            variant: variant.map(str::to_string),
        }
    }

    /// A failed result with this reason, for callers that could not run the program
    /// at all (a task that panicked, a cancelled run).
    pub fn failed(variant: Option<&str>, msg: String) -> RunResult {
        let mut r = RunResult::new(variant);
        r.fail(msg);
        r
    }

    fn fail(&mut self, msg: String) {
        self.status = Status::Failed;
        self.error = Some(msg);
    }
}

/// Why a spec could not be made into a program.
#[derive(Debug)]
pub enum LoadError {
    /// The spec does not validate; the diagnostics are rendered as human text.
    Invalid(String),
    /// A bad argument (unknown variant or model, malformed override).
    Usage(String),
    /// The spec validated but could not be compiled.
    Compile(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Invalid(s) | LoadError::Usage(s) | LoadError::Compile(s) => f.write_str(s),
        }
    }
}

/// Applies `--model NAME=PROVIDER[:MODEL][@BASE_URL]` to a loaded spec.
///
/// Only the provider, the model name and the base URL change; every other setting
/// of the model (`structured_output`, `temperature`, `max_tokens`, `timeout_secs`,
/// `retries`, limits, `price`) is kept.
///
/// - `PROVIDER` replaces the model's provider; when it changes, the model's
///   `params`, `base_url` and `api_key_env` are dropped (they belong to the server
///   they were written for);
/// - `:MODEL` replaces the model name (everything after the first `:`, so Ollama
///   tags such as `llama3.1:8b` work);
/// - `@BASE_URL` (an `http://` or `https://` address) replaces `base_url`, e.g.
///   `--model grader=openai:qwen2.5:7b@http://localhost:11434/v1`. When it points
///   to another host (or port) than the model's, `api_key_env` is dropped too: a key
///   is never sent to a host the spec did not name it for (the new host gets no key;
///   name one in a variant or the YAML).
///
/// # Errors
/// A usage message for a malformed argument, an unknown model or provider, a
/// `@` suffix that is not an http(s) URL.
pub fn apply_model_override(loaded: &mut LoadedSpec, arg: &str) -> Result<(), String> {
    let (name, rest) = arg
        .split_once('=')
        .ok_or_else(|| format!("`--model {arg}`: expected NAME=PROVIDER[:MODEL][@BASE_URL]"))?;
    let (rest, base_url) = match rest.find("@http://").or_else(|| rest.find("@https://")) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None if rest.contains('@') => {
            return Err(format!(
                "`--model {arg}`: the part after `@` must be an http:// or https:// base URL"
            ))
        }
        None => (rest, None),
    };
    if let Some(b) = base_url {
        crate::providers::openai::endpoint(name, Some(b))
            .map_err(|e| format!("`--model {arg}`: {e}"))?;
    }
    let (prov, model) = match rest.split_once(':') {
        Some((p, m)) => (p, Some(m)),
        None => (rest, None),
    };
    let kind: ProviderKind =
        serde_json::from_value(Value::String(prov.to_string())).map_err(|_| {
            format!(
                "`--model {arg}`: unknown provider `{prov}` (expected {})",
                crate::providers::kind_names()
            )
        })?;
    let known: Vec<String> = loaded.spec.models.keys().cloned().collect();
    let m = loaded.spec.models.get_mut(name).ok_or_else(|| {
        format!(
            "`--model {arg}`: the spec has no model `{name}` (models: {})",
            known.join(", ")
        )
    })?;
    if m.provider != kind {
        // These belong to the provider they were written for.
        m.params.clear();
        m.base_url = None;
        m.api_key_env = None;
    }
    m.provider = kind;
    if let Some(model) = model.filter(|m| !m.is_empty()) {
        m.model = Some(model.to_string());
    }
    if crate::providers::kind(kind).network.is_some()
        && m.model.as_deref().is_none_or(|s| s.trim().is_empty())
    {
        return Err(format!(
            "`--model {arg}`: provider {prov} needs a model name: --model {name}={prov}:MODEL"
        ));
    }
    if let Some(b) = base_url {
        // The spec's key was named for its host: never send it to another one.
        if m.api_key_env.is_some() && host_of(m.base_url.as_deref(), kind) != host_of(Some(b), kind)
        {
            m.api_key_env = None;
        }
        m.base_url = Some(b.to_string());
    }
    Ok(())
}

/// `--override ... --model ... makes the spec invalid:` and the diagnostics.
fn invalid_after(changes: &SpecOverrides, diagnostics: &str) -> String {
    format!(
        "{} makes the spec invalid:\n{}",
        changes.flags(),
        diagnostics.trim_end()
    )
}

/// The host and port a model's requests go to (`None` base URL: the provider's
/// official API).
fn host_of(base_url: Option<&str>, kind: ProviderKind) -> Option<(String, Option<u16>)> {
    let base = base_url.unwrap_or(match crate::providers::kind(kind).network {
        Some(n) => n.default_base_url,
        None => crate::providers::openai::DEFAULT_BASE_URL,
    });
    let u = reqwest::Url::parse(base.trim()).ok()?;
    Some((
        u.host_str()?.to_ascii_lowercase(),
        u.port_or_known_default(),
    ))
}

/// Every file a run of the spec at `path` reads, under the base spec and each of
/// its variants ([`LoadedSpec::input_files`]), as canonical paths; empty when the
/// spec does not load (its own errors are reported elsewhere). For refusing output
/// paths (`--record`, `--trace`) that would overwrite an input.
pub fn spec_input_files(path: &Path) -> Vec<std::path::PathBuf> {
    let mut sources = Sources::new();
    let opts = crate::validate::Options {
        no_environment: true,
    };
    let Some(base) = crate::validate::validate_file(path, &mut sources, &opts).spec else {
        return Vec::new();
    };
    let mut out = base.input_files();
    for v in base.spec.variants.keys() {
        if let Ok(merged) = overlay::apply(&base, v) {
            for f in merged.input_files() {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
    }
    out
}

/// Loads, validates and compiles a spec: the variant (if any) is applied, then the
/// model overrides. Validation skips environment checks (corpus directories are
/// checked when the run's resources are opened, so `--corpus` can replace them).
///
/// # Errors
/// [`LoadError::Invalid`] with rendered diagnostics, [`LoadError::Usage`] for an
/// unknown variant or bad override, [`LoadError::Compile`].
pub fn load_program(
    path: &Path,
    variant: Option<&str>,
    models: &[String],
) -> Result<Program, LoadError> {
    let changes = SpecOverrides {
        models: models.to_vec(),
        ..SpecOverrides::default()
    };
    load_program_with(path, variant, &changes)
}

/// [`load_program`] with every command-line change: the variant (if any), then
/// `changes` in the order [`overrides`] documents. The changed spec is validated
/// again; whatever is wrong with it then is the changes' fault.
///
/// # Errors
/// [`LoadError::Invalid`] when the spec itself does not validate;
/// [`LoadError::Usage`] for an unknown variant, a malformed change, an override
/// path that does not exist, or a change that makes the spec invalid (the message
/// names the flags and holds the rendered diagnostics); [`LoadError::Compile`].
pub fn load_program_with(
    path: &Path,
    variant: Option<&str>,
    changes: &SpecOverrides,
) -> Result<Program, LoadError> {
    let mut sources = Sources::new();
    let opts = crate::validate::Options {
        no_environment: true,
    };
    let outcome = crate::validate::validate_file(path, &mut sources, &opts);
    let errors: Vec<Diagnostic> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    if !errors.is_empty() {
        return Err(LoadError::Invalid(crate::diag::render::render(
            &errors,
            &sources,
            crate::diag::render::Format::Human,
        )));
    }
    let Some(base) = outcome.spec else {
        return Err(LoadError::Invalid(format!(
            "{} could not be loaded",
            path.display()
        )));
    };
    let mut loaded = match variant {
        None => base,
        Some(v) => {
            if !base.spec.variants.contains_key(v) {
                let names: Vec<&str> = base.spec.variants.keys().map(String::as_str).collect();
                return Err(LoadError::Usage(format!(
                    "unknown variant `{v}`; {} defines: {}",
                    path.display(),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
            let mut merged = overlay::apply(&base, v).map_err(|ds| {
                LoadError::Invalid(crate::diag::render::render(
                    &ds,
                    &sources,
                    crate::diag::render::Format::Human,
                ))
            })?;
            merged.variant = Some(v.to_string());
            merged
        }
    };
    if !changes.set.is_empty() {
        let parsed = changes
            .set
            .iter()
            .map(|a| overlay::parse_override(a, &mut sources))
            .collect::<Result<Vec<_>, _>>()
            .map_err(LoadError::Usage)?;
        loaded = overlay::apply_overrides(&loaded, &parsed).map_err(|e| match e {
            overlay::OverrideError::Path(m) => LoadError::Usage(m),
            overlay::OverrideError::Invalid(ds) => LoadError::Usage(invalid_after(
                changes,
                &crate::diag::render::render(&ds, &sources, crate::diag::render::Format::Human),
            )),
        })?;
    }
    for m in &changes.models {
        apply_model_override(&mut loaded, m).map_err(LoadError::Usage)?;
    }
    overrides::apply_call_policy(&mut loaded.spec, changes.timeout_secs, changes.retries);
    if !changes.is_empty() {
        // A change can make a spec invalid (an offline model on a node without a
        // task, a schema file that does not exist, ...): check again before anything
        // runs.
        let errors: Vec<Diagnostic> = crate::validate::check(&loaded, &mut sources, &opts)
            .into_iter()
            .filter(|d| d.is_error())
            .collect();
        if !errors.is_empty() {
            // The spec validated before: the changes are at fault (a usage error).
            let text =
                crate::diag::render::render(&errors, &sources, crate::diag::render::Format::Human);
            return Err(LoadError::Usage(invalid_after(changes, &text)));
        }
    }
    Program::compile(&loaded).map_err(LoadError::Compile)
}
