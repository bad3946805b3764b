//! [`Connection`]: what every network chat provider holds, built the same way.
use super::{fixed_param, policy};
use crate::http::CallPolicy;
use crate::providers::{ConfigError, EndpointError};
use crate::secret::Secret;
use crate::spec::types::ModelSpec;

/// What every network chat provider holds, built the same way for each: the server's
/// model name (required), the endpoint, the key (from the environment) and the call
/// policy (retries, timeout, redaction of the key).
#[derive(Debug)]
pub(crate) struct Connection {
    /// The model's name in the spec.
    pub name: String,
    /// The model's name on the server.
    pub model: String,
    /// Where requests go.
    pub endpoint: String,
    /// The API key, if the model needs one.
    pub key: Option<Secret>,
    /// Retries, timeout and the secrets to redact.
    pub policy: CallPolicy,
    /// The model config.
    pub spec: ModelSpec,
}

impl Connection {
    /// Checks the config of model `name` for provider `provider` and reads its key.
    /// `example` is a model name shown when `model` is missing; `endpoint` maps the
    /// `base_url` to the provider's endpoint.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the model: no `model` name (`NoModel`), a bad
    /// `base_url` (`Endpoint`), a `params` key that would replace the request's fixed
    /// fields (`FixedParam`), a missing key (`Key`).
    pub fn new(
        name: &str,
        spec: &ModelSpec,
        provider: &'static str,
        example: &'static str,
        endpoint: impl FnOnce(&str, Option<&str>) -> Result<String, EndpointError>,
    ) -> Result<Connection, ConfigError> {
        let model = spec
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| ConfigError::NoModel {
                model: name.to_string(),
                provider,
                example,
            })?;
        let endpoint = endpoint(name, spec.base_url.as_deref())?;
        if let Some(k) = fixed_param(&spec.params) {
            return Err(ConfigError::FixedParam {
                model: name.to_string(),
                param: k.to_string(),
            });
        }
        let key = crate::providers::keys::api_key(name, spec)?;
        Ok(Connection {
            name: name.to_string(),
            model,
            endpoint,
            policy: policy(spec, key.as_ref()),
            key,
            spec: spec.clone(),
        })
    }
}
