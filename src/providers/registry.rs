//! Provider selection: which [`Provider`] answers a model of the spec (built through
//! the registry of kinds, [`super::kind`]), and the call layers every model gets.
use super::limits::Limited;
use super::retry::Retrying;
use super::{ConfigError, Provider};
use crate::retrieval::Index;
use crate::spec::types::ModelSpec;
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
/// The [`ConfigError`] (naming the model) when the provider cannot be built.
pub fn provider_for(
    name: &str,
    model: &ModelSpec,
    root: &Path,
    index: Option<Arc<Index>>,
) -> Result<Arc<dyn Provider>, ConfigError> {
    (super::kind(model.provider).build)(&super::Build {
        name,
        model,
        root,
        index,
    })
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
