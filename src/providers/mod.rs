//! LLM providers behind one trait. A node's call is turned into a provider-neutral
//! [`LlmRequest`]; each provider converts it to its own wire format (or, for
//! `offline`, computes the task locally) and returns an [`LlmResponse`].
//!
//! Errors are sorted into transient (worth a retry), permanent, and
//! unsupported/invalid-output kinds, so retries touch only what a retry can fix.
pub mod anthropic;
pub mod cache;
pub mod cassette;
pub mod embeddings;
mod error;
pub mod keys;
pub mod limits;
mod net;
pub mod offline;
pub mod openai;
pub mod registry;
pub mod replay;
pub mod reranks;
pub mod retry;
pub mod scripted;

pub use crate::secret::Secret;
pub use error::{
    ConfigError, EndpointError, FixtureError, KeyError, KeyRule, ParamError, ReplayConfigError,
};
pub use keys::api_key;
pub use net::{cost_usd, FIXED_FIELDS};

use crate::spec::types::{ModelSpec, Provider as Kind};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;

/// A chat message of a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// One LLM call, provider-neutral.
#[derive(Clone, Debug)]
pub struct LlmRequest {
    /// The node making the call (for fixtures, errors and traces).
    pub node: String,
    /// Index of the item in a `map` node's fan-out (`None` for `llm` nodes).
    pub item: Option<usize>,
    /// The model's name in the spec (a key of `models`).
    pub model_name: String,
    /// The model's configuration (after `--model` overrides), shared by every call.
    pub model: std::sync::Arc<ModelSpec>,
    /// The standard task the node names, if any (see [`crate::tasks`]).
    pub task: Option<String>,
    /// The node's evaluated `inputs` (name → JSON value).
    pub inputs: Map<String, Value>,
    /// Rendered messages: optional system message, then the user message, then (on a
    /// repair turn) the rejected answer and the validation error.
    pub messages: Vec<Message>,
    /// JSON Schema of the structured output, shared by every call; `None` for text
    /// output.
    pub schema: Option<std::sync::Arc<Value>>,
}

/// Token counts and their cost: of one call (what a provider reports), or summed
/// over calls, steps, runs and eval rows. The one type these counts are added in
/// (`+=`, `+`, `.sum()`): [`crate::runtime::trace::LlmStats`] (a step),
/// [`crate::runtime::RunUsage`] (a run) and `eval::store::Usage` (a results row and
/// the summary's totals) hold one, flattened into their JSON, next to what they count
/// besides (calls, cache hits, latency).
///
/// JSON: `{"input_tokens", "output_tokens", "cost_usd"}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cost in US dollars (from the model's configured prices; 0 when unknown).
    pub cost_usd: f64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;
    fn add(mut self, other: Usage) -> Usage {
        self += other;
        self
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), |a, b| a + b)
    }
}

/// What a provider returned. Build it with `..Default::default()` for the fields you
/// do not set, so new fields do not break providers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LlmResponse {
    /// A JSON string for text output; the parsed object for structured output
    /// (validated by the runtime, not the provider).
    pub output: Value,
    /// Usage of the call.
    pub usage: Usage,
    /// True when no model was called: the answer came from the response cache or a
    /// cassette. Its usage is the recorded call's (tokens and cost); the runtime counts
    /// it like any answer and adds its cost to `saved_usd` too (not spent again, see
    /// [`crate::runtime::trace::LlmStats`]).
    pub cached: bool,
    /// True when the server reported no token counts and `usage` is an estimate
    /// (about 4 characters a token).
    pub usage_estimated: bool,
    /// Milliseconds the call waited for the model's local limits (`concurrency`,
    /// `requests_per_minute`) before it was sent; part of the call's wall time, set
    /// by [`limits::Limited`].
    pub limit_wait_ms: f64,
}

/// Why a call failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ProviderError {
    /// Worth retrying: timeouts, connection resets, 408/429/5xx.
    #[error("transient failure: {0}")]
    Transient(String),
    /// Retrying cannot help: bad request, authentication, unknown model.
    #[error("{0}")]
    Permanent(String),
    /// The provider does not implement what was asked (for example an offline task).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The model answered, but not in the shape asked for: prose instead of the forced
    /// tool call, tool arguments that are not JSON, a call to a function that was not
    /// offered. For structured output the runtime treats it like a schema violation
    /// (a repair turn showing `reply` and `reason` to the model); it is never retried
    /// as a transient failure.
    #[error("{reason}")]
    InvalidOutput {
        /// What the model sent (text or raw arguments), as the repair turn shows it
        /// back; may be empty.
        reply: String,
        /// What is wrong with it, for the model and for the error message.
        reason: String,
        /// What the rejected reply was billed (the server's token counts, or an
        /// estimate): a rejected attempt still costs, and the runtime counts it.
        billed: Billed,
    },
    /// The reply was cut at the output-token limit (`max_tokens`; OpenAI's
    /// `finish_reason: length`, Anthropic's `stop_reason: max_tokens`). Detected from
    /// the stop reason before any schema check: it is neither a schema failure (no
    /// repair turn: the same budget would cut the repair too) nor retried. The
    /// message names the model's limit setting, its value and how to raise it.
    #[error("{message}")]
    Truncated {
        /// What happened and how to raise the limit.
        message: String,
        /// What the cut reply was billed (the server's counts, or an estimate).
        billed: Billed,
    },
    /// The server answered and reported the usage it billed, but the answer cannot
    /// be used and neither a retry nor a repair turn would help: a refusal, a
    /// content-filter stop, a 2xx carrying an error object or no choices. Permanent.
    #[error("{message}")]
    Unusable {
        /// What happened, with the server's message.
        message: String,
        /// The usage the server reported for the call.
        billed: Billed,
    },
}

/// The usage of a reply that failed: rejected ([`ProviderError::InvalidOutput`]), cut
/// short ([`ProviderError::Truncated`]) or unusable ([`ProviderError::Unusable`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Billed {
    /// Tokens and cost of the call.
    pub usage: Usage,
    /// True when the server reported no token counts and `usage` is an estimate.
    pub usage_estimated: bool,
    /// True when no model was called (the rejected reply was replayed from a
    /// cassette): its cost counts, but is not spent again.
    pub cached: bool,
}

impl ProviderError {
    /// Whether a retry of the same request could help (only [`ProviderError::Transient`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Transient(_))
    }

    /// What the failed call was billed, when the server answered: the variants that
    /// carry a [`Billed`] ([`ProviderError::InvalidOutput`],
    /// [`ProviderError::Truncated`], [`ProviderError::Unusable`]). `None` for failures
    /// without an answer (timeouts, HTTP errors, unsupported tasks). The runtime adds
    /// it to the node's and the run's usage like an answer's.
    pub fn billed(&self) -> Option<&Billed> {
        match self {
            ProviderError::InvalidOutput { billed, .. }
            | ProviderError::Truncated { billed, .. }
            | ProviderError::Unusable { billed, .. } => Some(billed),
            ProviderError::Transient(_)
            | ProviderError::Permanent(_)
            | ProviderError::Unsupported(_) => None,
        }
    }
}

/// A provider: answers [`LlmRequest`]s. Implementations must be cheap to share
/// (`Arc<dyn Provider>`) and safe to call concurrently.
pub trait Provider: Send + Sync {
    /// The provider's name as written in specs (`offline`, `scripted`, ...).
    fn name(&self) -> &'static str;

    /// Answers one request.
    fn call<'a>(&'a self, req: &'a LlmRequest)
        -> BoxFuture<'a, Result<LlmResponse, ProviderError>>;

    /// Whether the provider applies the model's per-attempt timeout (`timeout_secs`)
    /// and retries its transient failures itself (the network providers do, through
    /// [`crate::http::send`]). When false, `Resources::prepare` wraps it in
    /// [`retry::Retrying`], which does both with the same policy; either way a
    /// transient failure is retried exactly `retries` times, never twice over.
    fn retries_itself(&self) -> bool {
        false
    }
}

/// Whether the call `req` delivers its text as token events ([`crate::tokens`]):
/// someone listens on this task, and it is a text call (no schema) of an `llm` node
/// (not a `map` item). The streaming providers (`openai`, `anthropic`) then request
/// `stream: true` and hand each text delta to [`crate::tokens::emit`]; the answer
/// they return is the complete one, as a non-streamed call returns it.
pub fn streams(req: &LlmRequest) -> bool {
    req.schema.is_none() && req.item.is_none() && crate::tokens::listening()
}

/// Rough token count of a text (about 4 characters a token), for providers that do
/// not report usage.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// What building the provider of a model takes.
pub struct Build<'a> {
    /// The model's name in the spec.
    pub name: &'a str,
    /// Its configuration.
    pub model: &'a ModelSpec,
    /// The project root fixture and cassette paths are relative to.
    pub root: &'a Path,
    /// The index of the spec's first retriever (corpus statistics for `offline`).
    pub index: Option<Arc<crate::retrieval::Index>>,
}

/// How a network provider kind is reached.
#[derive(Debug)]
pub struct Network {
    /// The environment variable of the key sent to the official host when the model
    /// names no `api_key_env`.
    pub key_var: &'static str,
    /// The official API host: the only one the default key variable is sent to.
    pub official_host: &'static str,
    /// `base_url` when the model sets none.
    pub default_base_url: &'static str,
    /// The endpoint for a model's `base_url` (`Err` names the model and the URL).
    pub endpoint: fn(&str, Option<&str>) -> Result<String, EndpointError>,
    /// Help of E071 when the model names no `model`.
    pub model_help: &'static str,
    /// Largest temperature the API takes (the model's is clamped); `None`: sent as is.
    pub max_temperature: Option<f64>,
}

/// Everything the rest of ragloop asks of a provider kind: how to build it, whether
/// and how it is reached over the network (key variable, official host, endpoint,
/// E071 help), whether its answers may be cached (at temperature 0, see
/// [`cache::cacheable`]).
#[derive(Debug)]
pub struct KindDef {
    /// Builds the bare provider of a model (see [`registry::provider_for`]).
    pub build: fn(&Build<'_>) -> Result<Arc<dyn Provider>, ConfigError>,
    /// For a kind that calls a model over the network (API keys, E071 checks,
    /// `--model …@URL` host rules).
    pub network: Option<&'static Network>,
    /// Whether answers at temperature 0 are stored in the response cache.
    pub cache: bool,
}

/// The provider kinds as a message lists them: `offline, scripted, replay, openai or
/// anthropic`.
pub fn kind_names() -> String {
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
    match names.split_last() {
        Some((last, init)) if !init.is_empty() => format!("{} or {last}", init.join(", ")),
        _ => names.join(""),
    }
}

/// The registry of provider kinds: the one place a kind is registered.
pub fn kind(kind: Kind) -> &'static KindDef {
    static OFFLINE: KindDef = KindDef {
        build: |b| {
            offline::OfflineProvider::new(&b.model.params, b.index.clone())
                .map(|p| Arc::new(p) as Arc<dyn Provider>)
                .map_err(|source| ConfigError::Offline {
                    model: b.name.to_string(),
                    source,
                })
        },
        network: None,
        cache: false,
    };
    static SCRIPTED: KindDef = KindDef {
        build: |b| scripted::ScriptedProvider::from_spec(b.name, b.model, b.root),
        network: None,
        cache: false,
    };
    static REPLAY: KindDef = KindDef {
        build: |b| {
            replay::ReplayProvider::from_spec(b.name, b.model, b.root)
                .map(|p| Arc::new(p) as Arc<dyn Provider>)
        },
        network: None,
        cache: false,
    };
    static OPENAI: KindDef = KindDef {
        build: |b| {
            openai::OpenAiProvider::new(b.name, b.model).map(|p| Arc::new(p) as Arc<dyn Provider>)
        },
        network: Some(&Network {
            key_var: "OPENAI_API_KEY",
            official_host: "api.openai.com",
            default_base_url: openai::DEFAULT_BASE_URL,
            endpoint: openai::endpoint,
            model_help: "add the server's model name, e.g. `model: gpt-4o-mini` (or `--model NAME=openai:MODEL`)",
            max_temperature: None,
        }),
        cache: true,
    };
    static ANTHROPIC: KindDef = KindDef {
        build: |b| {
            anthropic::AnthropicProvider::new(b.name, b.model)
                .map(|p| Arc::new(p) as Arc<dyn Provider>)
        },
        network: Some(&Network {
            key_var: "ANTHROPIC_API_KEY",
            official_host: "api.anthropic.com",
            default_base_url: anthropic::DEFAULT_BASE_URL,
            endpoint: anthropic::endpoint,
            model_help: "add the model name, e.g. `model: claude-3-5-haiku-latest` (or `--model NAME=anthropic:MODEL`)",
            max_temperature: Some(1.0),
        }),
        cache: true,
    };
    match kind {
        Kind::Offline => &OFFLINE,
        Kind::Scripted => &SCRIPTED,
        Kind::Replay => &REPLAY,
        Kind::Openai => &OPENAI,
        Kind::Anthropic => &ANTHROPIC,
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn every_kind_is_registered_with_consistent_network_defaults() {
        assert_eq!(
            kind_names(),
            "offline, scripted, replay, openai or anthropic"
        );
        for k in Kind::ALL {
            let def = kind(k);
            if let Some(n) = def.network {
                let host = reqwest::Url::parse(n.default_base_url).unwrap();
                assert_eq!(host.host_str(), Some(n.official_host), "{}", k.as_str());
                assert!((n.endpoint)("m", None)
                    .unwrap()
                    .starts_with(n.default_base_url));
                assert!(n.model_help.contains(&format!("NAME={}:MODEL", k.as_str())));
            }
            // Only answers that do not depend on a local file or fixture are cached.
            assert_eq!(def.cache, def.network.is_some(), "{}", k.as_str());
        }
    }
}
