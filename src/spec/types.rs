//! The spec format, version 1, as Rust types. `schemas/spec.schema.json` is generated
//! from these types (see [`spec_json_schema`]); a test fails when the two drift.
//!
//! Every struct rejects unknown keys. Maps keep declaration order ([`IndexMap`]).
//! The doc comments here become the descriptions editors show.
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The spec format version this ragloop reads.
pub const SPEC_VERSION: u32 = 1;

/// The smallest `timeout_secs` a model or tool may have, in seconds (one millisecond);
/// `--timeout` has the same bound.
pub const MIN_TIMEOUT_SECS: f64 = 0.001;

/// The largest `timeout_secs` a model or tool may have, in seconds (one day);
/// `--timeout` has the same bound.
pub const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// A ragloop graph spec.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Spec format version. Must be 1.
    #[schemars(range(min = 1, max = 1))]
    pub version: u32,
    /// Name of the graph (shown in traces and reports).
    pub name: String,
    /// What the graph does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Project root, relative to the spec file's directory (default `.`). Every file
    /// path in the spec is resolved against it and must stay inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Other specs whose named nodes, models, retrievers and tools this spec includes,
    /// as if written here (resolved when the spec loads; docs/spec.md "Imports").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<super::imports::Import>,
    /// The state object every node reads and updates.
    pub state: StateSpec,
    /// Named model configurations. Nodes refer to them by name.
    #[serde(default)]
    pub models: IndexMap<String, ModelSpec>,
    /// Named retrievers.
    #[serde(default)]
    pub retrievers: IndexMap<String, RetrieverSpec>,
    /// Named tools for `tool` nodes (web search and its offline stand-in).
    #[serde(default)]
    pub tools: IndexMap<String, ToolSpec>,
    /// The node a run starts at.
    pub entry: String,
    /// Global bounds of a run.
    #[serde(default)]
    pub limits: Limits,
    /// The nodes, by name. `END` and `START` are reserved.
    pub nodes: IndexMap<String, NodeSpec>,
    /// Outgoing edge of every node: a node name (or `END`), or an ordered list of
    /// `when`/`to` arms that ends with an `else` arm.
    pub edges: IndexMap<String, Edge>,
    /// What a run returns and how its terminal status is decided.
    #[serde(default)]
    pub output: OutputSpec,
    /// Named overlays: each maps a dotted path of this spec to a replacement value.
    #[serde(default)]
    pub variants: IndexMap<String, Variant>,
}

/// What a run returns. The terminal status of a run that reached END is `fallback`
/// when the last node was one of `fallback`, else `generated` when the `answer`
/// field holds a non-empty value, else `exhausted` (seed 000 Condition B: no
/// generation, the history of the failed attempts kept).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// State field holding the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// State field holding the documents the answer is based on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<String>,
    /// Nodes whose completion before END means the run fell back (no grounded answer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<String>,
}

/// The state: its JSON Schema, initial values and a reducer per field.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateSpec {
    /// JSON Schema of the state object: a path to a `.json`/`.yaml` file, or an inline
    /// schema. Must be `type: object` with `properties`.
    pub schema: SchemaRef,
    /// Initial values; the question and `--set` values are merged over them.
    #[serde(default)]
    pub initial: IndexMap<String, Value>,
    /// How a node's update to a field is merged into the state. Default `replace`.
    #[serde(default)]
    pub reducers: IndexMap<String, Reducer>,
}

/// A JSON Schema given by file path or inline.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum SchemaRef {
    /// Path of a `.json` or `.yaml` schema file, relative to the project root.
    File(String),
    /// An inline schema.
    Inline(serde_json::Map<String, Value>),
}

/// How an update to a state field is merged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Reducer {
    /// The new value replaces the old one.
    #[default]
    Replace,
    /// Arrays: an array value is concatenated, any other value is pushed.
    Append,
    /// Numbers: the value is added to the old one.
    Add,
    /// Objects: keys of the value overwrite keys of the old object (shallow).
    Merge,
}

/// A named model configuration.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Which provider answers calls to this model.
    pub provider: Provider,
    /// Model name as the provider knows it (e.g. `gpt-4o-mini`). Optional for `offline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Base URL of the API (OpenAI-compatible servers: vLLM, Ollama, llama.cpp, ...).
    /// Defaults: `https://api.openai.com/v1`, `https://api.anthropic.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Name of the environment variable that holds the API key. The key itself never
    /// appears in a spec. Default on the official hosts: `OPENAI_API_KEY` /
    /// `ANTHROPIC_API_KEY`; other hosts get no key unless this is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Sampling temperature.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: f64,
    /// Most tokens the model may generate per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    /// Timeout of one attempt of a call, in seconds (default 60 for network
    /// providers, none for local ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.001))]
    pub timeout_secs: Option<f64>,
    /// Attempts after the first one for transient failures (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// Most calls in flight at once for this model, shared by every run of the
    /// process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency: Option<u32>,
    /// Most calls started in any 60-second window, shared by every run of the
    /// process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub requests_per_minute: Option<u32>,
    /// Price per million tokens, for cost reporting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// How structured output is enforced (`json_schema` or `tool_call`; `openai`
    /// default `json_schema`; `anthropic` always uses a forced tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<StructuredMode>,
    /// Provider-specific parameters (for `offline`: `relevance_threshold`, ...;
    /// for `scripted`/`replay`: `file`; for `openai`/`anthropic`: extra request-body
    /// fields, `null` removing one).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub params: IndexMap<String, Value>,
}

/// Provider kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Deterministic, local, classical-IR implementation of the standard RAG tasks.
    Offline,
    /// Answers from a fixture file, in order, per node (tests).
    Scripted,
    /// Answers from a recorded cassette.
    Replay,
    /// Any OpenAI-compatible Chat Completions server.
    Openai,
    /// Anthropic Messages API.
    Anthropic,
}

impl Provider {
    /// Every provider kind, in the order messages list them.
    pub const ALL: [Provider; 5] = [
        Provider::Offline,
        Provider::Scripted,
        Provider::Replay,
        Provider::Openai,
        Provider::Anthropic,
    ];

    /// The provider's name as written in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Offline => "offline",
            Provider::Scripted => "scripted",
            Provider::Replay => "replay",
            Provider::Openai => "openai",
            Provider::Anthropic => "anthropic",
        }
    }
}

/// How a provider is made to return structured output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StructuredMode {
    /// A forced tool/function call whose parameters are the output schema
    /// (`tool_choice: "required"`, one function offered).
    ToolCall,
    /// `response_format: json_schema` (strict); the `openai` default.
    JsonSchema,
}

/// Price per million tokens, in US dollars.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Dollars per million input tokens.
    #[schemars(range(min = 0.0))]
    pub input_per_mtok: f64,
    /// Dollars per million output tokens.
    #[schemars(range(min = 0.0))]
    pub output_per_mtok: f64,
}

pub use super::retriever::{
    Bm25Options, DenseOptions, EmbeddingOptions, HybridOptions, RetrieverSpec,
};

pub(super) fn default_top_k() -> u32 {
    4
}

/// A named tool.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum ToolSpec {
    /// Offline stand-in for web search: a second local corpus searched with BM25.
    Corpus {
        /// Corpus directory (same forms as a retriever's `corpus`).
        corpus: String,
        /// Results per search.
        #[serde(default = "default_top_k")]
        #[schemars(range(min = 1, max = 1000))]
        top_k: u32,
    },
    /// A SearxNG-compatible JSON search endpoint: `GET {base_url}/search?q=...&format=json`.
    Searxng {
        /// Base URL of the SearxNG instance (`http://` or `https://`), e.g.
        /// `http://127.0.0.1:8888`.
        base_url: String,
        /// Results per search.
        #[serde(default = "default_top_k")]
        #[schemars(range(min = 1, max = 1000))]
        top_k: u32,
        /// Timeout of one attempt, in seconds (default 20).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0.001))]
        timeout_secs: Option<f64>,
        /// Attempts after the first one for transient failures (timeouts, 429, 5xx;
        /// default 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(max = 10))]
        retries: Option<u32>,
    },
    /// Tavily's search API: `POST {base_url}/search` with `Authorization: Bearer <key>`.
    Tavily {
        /// Environment variable holding the Tavily key. A missing key is reported
        /// before the run starts.
        api_key_env: String,
        /// Base URL (default `https://api.tavily.com`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_url: Option<String>,
        /// Results per search (Tavily returns at most 20).
        #[serde(default = "default_top_k")]
        #[schemars(range(min = 1, max = 1000))]
        top_k: u32,
        /// Timeout of one attempt, in seconds (default 20).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0.001))]
        timeout_secs: Option<f64>,
        /// Attempts after the first one for transient failures (timeouts, 429, 5xx;
        /// default 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(max = 10))]
        retries: Option<u32>,
    },
}

impl ToolSpec {
    /// Results per search.
    pub fn top_k(&self) -> u32 {
        match self {
            ToolSpec::Corpus { top_k, .. }
            | ToolSpec::Searxng { top_k, .. }
            | ToolSpec::Tavily { top_k, .. } => *top_k,
        }
    }
}

/// Global bounds.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Most node executions in one run. The run that would execute one more node stops
    /// with status `limit` instead (like LangGraph's `recursion_limit`). Default 25.
    #[serde(default = "default_max_steps")]
    #[schemars(range(min = 1))]
    pub max_steps: u32,
}

fn default_max_steps() -> u32 {
    25
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: default_max_steps(),
        }
    }
}

/// An expression: a minijinja expression string evaluated over the state, or a
/// literal number, boolean or null.
pub type Expr = Value;

/// A node. `kind` selects the fields it takes.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum NodeSpec {
    /// Query a retriever; `output` is the list of documents (`id`, `content`, `metadata`).
    Retrieve(RetrieveNode),
    /// One LLM call: text, or structured output validated against `schema`.
    Llm(LlmNode),
    /// The same LLM call once per element of `over`, up to `concurrency` at a time;
    /// `output` is the list of results in input order. Takes every `llm` field plus
    /// `over` (required) and `concurrency`.
    Map(LlmNode),
    /// Pure state transform: every `update` expression is evaluated over the state.
    Update(UpdateNode),
    /// Call a tool (web search or its offline stand-in); `output` is a list of documents.
    Tool(ToolNode),
}

/// Fields of a `retrieve` node.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveNode {
    /// What the node is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Retriever name.
    pub retriever: String,
    /// Query template (minijinja) rendered over the state.
    pub query: String,
    /// Overrides the retriever's `top_k`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub top_k: Option<u32>,
    /// State fields to write: field → expression over the state and `output`.
    #[serde(default)]
    pub update: IndexMap<String, Expr>,
    /// Most times this node may run in one run (1 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_visits: Option<u32>,
    /// Pause a thread run before this node runs (status `interrupted`, a
    /// checkpoint); `ragloop run --thread ID --resume` continues it, optionally with
    /// a state patch. Plain runs without a thread (`eval`, the library's `run`) ignore it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupt_before: bool,
}

/// Fields of an `update` node.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateNode {
    /// What the node is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// State fields to write: field → expression over the state.
    pub update: IndexMap<String, Expr>,
    /// Most times this node may run in one run (1 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_visits: Option<u32>,
    /// Pause a thread run before this node runs (status `interrupted`, a
    /// checkpoint); `ragloop run --thread ID --resume` continues it, optionally with
    /// a state patch. Plain runs without a thread (`eval`, the library's `run`) ignore it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupt_before: bool,
}

/// Fields of a `tool` node.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolNode {
    /// What the node is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Tool name.
    pub tool: String,
    /// Query template (minijinja) rendered over the state.
    pub query: String,
    /// State fields to write: field → expression over the state and `output`.
    #[serde(default)]
    pub update: IndexMap<String, Expr>,
    /// Most times this node may run in one run (1 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_visits: Option<u32>,
    /// Pause a thread run before this node runs (status `interrupted`, a
    /// checkpoint); `ragloop run --thread ID --resume` continues it, optionally with
    /// a state patch. Plain runs without a thread (`eval`, the library's `run`) ignore it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupt_before: bool,
}

/// Fields of an LLM call (the `llm` node, and each call of a `map` node).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmNode {
    /// What the node is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Model name (a key of `models`).
    pub model: String,
    /// `map` nodes only: expression that yields the list to fan out over. Each call
    /// sees `item` (the element) and `index` (its position, from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over: Option<String>,
    /// `map` nodes only: most calls in flight at once (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub concurrency: Option<u32>,
    /// The standard RAG task this call performs: `grade_documents`, `rewrite_query`,
    /// `generate_answer`, `grade_answer`, `route_question`. The `offline` provider
    /// implements these; LLM providers use the prompt and ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Named inputs: name → expression over the state (and `item`/`index` in `map`
    /// nodes). Templates can read them by name.
    #[serde(default)]
    pub inputs: IndexMap<String, Expr>,
    /// The prompt templates.
    pub prompt: Prompt,
    /// JSON Schema of the structured output (file path or inline). Absent: the
    /// output is text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<SchemaRef>,
    /// Repair turns after an output fails the schema (the validation error is sent back).
    #[serde(default = "default_repairs")]
    #[schemars(range(max = 10))]
    pub repair_attempts: u32,
    /// State fields to write: field → expression over the state and `output`.
    #[serde(default)]
    pub update: IndexMap<String, Expr>,
    /// Most times this node may run in one run (1 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_visits: Option<u32>,
    /// Pause a thread run before this node runs (status `interrupted`, a
    /// checkpoint); `ragloop run --thread ID --resume` continues it, optionally with
    /// a state patch. Plain runs without a thread (`eval`, the library's `run`) ignore it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupt_before: bool,
}

fn default_repairs() -> u32 {
    2
}

/// Prompt templates: a system and a user message.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    /// System message template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<TemplateSource>,
    /// User message template.
    pub user: TemplateSource,
}

/// A template: inline text, or `{file: path}` for a `.jinja` file under the project root.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum TemplateSource {
    /// Inline template text.
    Inline(String),
    /// A template file.
    File(FileRef),
}

/// A reference to a file under the project root.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileRef {
    /// Path relative to the project root.
    pub file: String,
}

/// A node's outgoing edge.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Edge {
    /// Always go to this node (or `END`).
    Static(String),
    /// Conditional branch: the first arm whose `when` is true wins; the last arm is `else`.
    Branch(Vec<Arm>),
}

/// One arm of a conditional branch: `{when, to}` or `{else}`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// Predicate: a minijinja expression over the state (strict: reading a missing
    /// field is an error, use `is defined` to test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// Target when `when` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Target when no earlier arm matched. Must be the last arm.
    #[serde(default, rename = "else", skip_serializing_if = "Option::is_none")]
    pub otherwise: Option<String>,
}

impl Arm {
    /// The arm's predicate and target when it has one of the two legal shapes:
    /// `{when, to}` gives `(Some(when), to)`, `{else}` gives `(None, else)`; any other
    /// shape (`validate` reports E051) gives `None`.
    pub fn shape(&self) -> Option<(Option<&str>, &str)> {
        match (&self.when, &self.to, &self.otherwise) {
            (Some(w), Some(to), None) => Some((Some(w.as_str()), to.as_str())),
            (None, None, Some(to)) => Some((None, to.as_str())),
            _ => None,
        }
    }
}

/// One way out of a node, as the graph and the runtime see an [`Edge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeArm<'a> {
    /// Position in the branch list; `None` for a static edge.
    pub index: Option<usize>,
    /// The predicate of a `when` arm; `None` for a static edge and the `else` arm.
    pub when: Option<&'a str>,
    /// The target: a node name or `END`.
    pub to: &'a str,
}

impl EdgeArm<'_> {
    /// True for the `else` arm of a branch.
    pub fn is_else(&self) -> bool {
        self.index.is_some() && self.when.is_none()
    }

    /// The key holding the target in the spec: `to` or `else` (`None` for a static edge,
    /// whose target is the edge's value itself).
    pub fn key(&self) -> Option<&'static str> {
        match (self.index, self.when) {
            (None, _) => None,
            (Some(_), Some(_)) => Some("to"),
            (Some(_), None) => Some("else"),
        }
    }
}

impl Edge {
    /// The edge's arms in order: a static edge is one arm without position or
    /// predicate; a branch yields its `{when, to}` and `{else}` arms with their
    /// positions. Arms of another shape are skipped (see [`Arm::shape`]).
    pub fn arms(&self) -> impl Iterator<Item = EdgeArm<'_>> {
        let (single, list) = match self {
            Edge::Static(to) => (
                Some(EdgeArm {
                    index: None,
                    when: None,
                    to: to.as_str(),
                }),
                &[][..],
            ),
            Edge::Branch(arms) => (None, arms.as_slice()),
        };
        single
            .into_iter()
            .chain(list.iter().enumerate().filter_map(|(i, a)| {
                a.shape().map(|(when, to)| EdgeArm {
                    index: Some(i),
                    when,
                    to,
                })
            }))
    }
}

/// A variant: an overlay on the spec.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// What the variant changes and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Dotted path (e.g. `retrievers.book.top_k`, `nodes.grade.prompt.system`) →
    /// replacement value. The path's parent must exist.
    pub set: IndexMap<String, Value>,
}

/// The JSON Schema of the spec format, as published in `schemas/spec.schema.json`.
pub fn spec_json_schema() -> Value {
    let schema = schemars::schema_for!(Spec);
    let mut v = serde_json::to_value(schema).unwrap_or(Value::Null);
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "$id".into(),
            Value::String("https://ragloop.dev/schemas/spec.schema.json".into()),
        );
        obj.insert("title".into(), Value::String("ragloop spec v1".into()));
    }
    v
}

impl NodeSpec {
    /// The node kind as written in specs.
    pub fn kind(&self) -> &'static str {
        match self {
            NodeSpec::Retrieve(_) => "retrieve",
            NodeSpec::Llm(_) => "llm",
            NodeSpec::Map(_) => "map",
            NodeSpec::Update(_) => "update",
            NodeSpec::Tool(_) => "tool",
        }
    }

    /// The precise typing error of a node's fields (the node without its `kind` key)
    /// as the struct `kind` names, or `None` when they type (or the kind is unknown).
    /// serde reports a fault inside an internally tagged enum at the node, often as a
    /// misleading "missing field `kind`"; `load` shows this one instead.
    pub(crate) fn fields_error(
        kind: &str,
        fields: &Value,
    ) -> Option<serde_path_to_error::Error<serde_json::Error>> {
        fn typed<T: serde::de::DeserializeOwned>(
            v: &Value,
        ) -> Option<serde_path_to_error::Error<serde_json::Error>> {
            serde_path_to_error::deserialize::<_, T>(v).err()
        }
        match kind {
            "retrieve" => typed::<RetrieveNode>(fields),
            "llm" | "map" => typed::<LlmNode>(fields),
            "update" => typed::<UpdateNode>(fields),
            "tool" => typed::<ToolNode>(fields),
            _ => None,
        }
    }

    /// The node's `update` map.
    pub fn update(&self) -> &IndexMap<String, Expr> {
        match self {
            NodeSpec::Retrieve(RetrieveNode { update, .. })
            | NodeSpec::Update(UpdateNode { update, .. })
            | NodeSpec::Tool(ToolNode { update, .. }) => update,
            NodeSpec::Llm(l) | NodeSpec::Map(l) => &l.update,
        }
    }

    /// The node's visit limit.
    pub fn max_visits(&self) -> Option<u32> {
        match self {
            NodeSpec::Retrieve(RetrieveNode { max_visits, .. })
            | NodeSpec::Update(UpdateNode { max_visits, .. })
            | NodeSpec::Tool(ToolNode { max_visits, .. }) => *max_visits,
            NodeSpec::Llm(l) | NodeSpec::Map(l) => l.max_visits,
        }
    }

    /// Whether a thread run pauses before this node (`interrupt_before: true`).
    pub fn interrupt_before(&self) -> bool {
        match self {
            NodeSpec::Retrieve(RetrieveNode {
                interrupt_before, ..
            })
            | NodeSpec::Update(UpdateNode {
                interrupt_before, ..
            })
            | NodeSpec::Tool(ToolNode {
                interrupt_before, ..
            }) => *interrupt_before,
            NodeSpec::Llm(l) | NodeSpec::Map(l) => l.interrupt_before,
        }
    }

    /// Whether expressions in `update` may read `output`.
    pub fn has_output(&self) -> bool {
        !matches!(self, NodeSpec::Update(_))
    }

    /// The LLM call of `llm` and `map` nodes.
    pub fn llm(&self) -> Option<&LlmNode> {
        match self {
            NodeSpec::Llm(l) | NodeSpec::Map(l) => Some(l),
            _ => None,
        }
    }
}
