//! Provider selection: which [`Provider`] answers a model of the spec.
use super::limits::Limited;
use super::retry::Retrying;
use super::scripted::ScriptedProvider;
use super::Provider;
use crate::retrieval::Index;
use crate::spec::types::{ModelSpec, Provider as Kind};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Builds the provider of model `name`.
///
/// - `offline`: [`super::offline::OfflineProvider`] with the model's `params` and
///   `index` (the spec's first retriever's index, for corpus statistics);
/// - `scripted`: a fixture file named by `params.file`, relative to `root`;
/// - `openai`: [`super::openai::OpenAiProvider`] (key from the environment, see
///   [`super::api_key`]);
/// - `anthropic`: [`super::anthropic::AnthropicProvider`];
/// - `replay`: a cassette named by `params.file`, relative to `root` (see
///   [`super::replay::ReplayProvider::from_spec`]); returned bare, never wrapped.
///
/// The provider is returned bare; [`wrap`] adds retries, timeouts and limits.
///
/// # Errors
/// A message naming the model when the provider cannot be built.
pub fn provider_for(
    name: &str,
    model: &ModelSpec,
    root: &Path,
    index: Option<Arc<Index>>,
) -> Result<Arc<dyn Provider>, String> {
    match model.provider {
        Kind::Offline => super::offline::OfflineProvider::new(&model.params, index)
            .map(|p| Arc::new(p) as Arc<dyn Provider>)
            .map_err(|e| format!("model `{name}`: offline provider: {e}")),
        Kind::Scripted => {
            let file = model.params.get("file").and_then(|f| f.as_str()).ok_or_else(|| {
                format!("model `{name}`: the scripted provider needs `params.file` (a fixture path relative to the project root)")
            })?;
            let path = crate::spec::load::resolve_under(root, file, None)
                .map_err(|d| format!("model `{name}`: {}", d.message))?;
            ScriptedProvider::from_file(&path)
                .map(|p| Arc::new(p) as Arc<dyn Provider>)
                .map_err(|e| format!("model `{name}`: {e}"))
        }
        Kind::Openai => super::openai::OpenAiProvider::new(name, model)
            .map(|p| Arc::new(p) as Arc<dyn Provider>),
        Kind::Anthropic => super::anthropic::AnthropicProvider::new(name, model)
            .map(|p| Arc::new(p) as Arc<dyn Provider>),
        Kind::Replay => super::replay::ReplayProvider::from_spec(name, model, root)
            .map(|p| Arc::new(p) as Arc<dyn Provider>),
    }
}

/// A provider under its model's call policy, as every run uses it:
/// - one that does not retry itself ([`Provider::retries_itself`]) is wrapped in
///   [`Retrying`]: `retries` (default 2) retries of transient failures, each attempt
///   bounded by `timeout_secs` (no bound when unset);
/// - a model with `concurrency` or `requests_per_minute` is wrapped in [`Limited`]
///   with the process-wide limits of that model ([`super::limits::shared`]).
pub fn wrap(name: &str, model: &ModelSpec, provider: Arc<dyn Provider>) -> Arc<dyn Provider> {
    let mut p = provider;
    if !p.retries_itself() {
        let timeout = model
            .timeout_secs
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Duration::from_secs_f64(s.min(86_400.0)));
        p = Arc::new(Retrying::new(
            p,
            model.retries.unwrap_or(super::net::DEFAULT_RETRIES),
            timeout,
        ));
    }
    if let Some(l) = super::limits::shared(name, model) {
        p = Arc::new(Limited::new(p, l));
    }
    p
}

/// The API-key problems of a spec's models, one message per model (empty when every
/// model that needs a key has one). `ragloop run` reports them before anything
/// runs, as a usage error.
pub fn missing_keys<'a>(
    models: impl IntoIterator<Item = (&'a String, &'a ModelSpec)>,
) -> Vec<String> {
    models
        .into_iter()
        .filter_map(|(name, m)| super::api_key(name, m).err())
        .collect()
}

/// The API-key problems of a spec's tools and embedders, one message per fault,
/// naming the variable: a `tavily` tool whose `api_key_env` is unset or empty, an
/// embedding model of a `dense`/`hybrid` retriever whose `api_key_env` is unset or
/// empty. These are needed even by a replayed run (`--replay` answers the chat
/// models only: web searches and query embeddings are made live). `ragloop run`
/// reports them with [`missing_keys`], before anything runs, as a usage error.
/// `replaying`: whether chat models are replayed; when they are not, [`missing_keys`]
/// already reports the embedding models (they are models of the spec), so only the
/// tools are checked here and no key is reported twice.
pub fn missing_tool_keys(spec: &crate::spec::types::Spec, replaying: bool) -> Vec<String> {
    let unset = |var: &str| std::env::var(var).ok().is_none_or(|k| k.trim().is_empty());
    let mut out = Vec::new();
    for (name, t) in &spec.tools {
        if let crate::spec::types::ToolSpec::Tavily { api_key_env, .. } = t {
            if unset(api_key_env) {
                out.push(format!(
                    "tool `{name}`: the Tavily API key variable {api_key_env} (named by tools.{name}.api_key_env) is not set or empty"
                ));
            }
        }
    }
    if !replaying {
        return out;
    }
    let mut seen = Vec::new();
    for (rname, r) in &spec.retrievers {
        let Some(m) = r.embedding().and_then(|e| e.model) else {
            continue;
        };
        if seen.contains(&m) {
            continue;
        }
        seen.push(m);
        if let Some(var) = spec.models.get(m).and_then(|s| s.api_key_env.as_deref()) {
            if unset(var) {
                out.push(format!(
                    "embedding model `{m}` (retriever `{rname}`): the API key variable {var} (named by models.{m}.api_key_env) is not set or empty; query embeddings are computed live, also under --replay"
                ));
            }
        }
    }
    out
}
