//! API keys, checked in one place: [`api_key`] (the rule of a model's key) and
//! [`missing`] (every key a run of a spec needs, one message per fault, reported
//! before anything runs). Every key variable is read by [`crate::secret::read_env`].
use super::{KeyError, KeyRule};
use crate::secret::{read_env, Secret};
use crate::spec::types::{ModelSpec, Spec};

/// The API key of model `name`, read from the environment only.
///
/// Rules (the same for `openai` and `anthropic`):
/// - `api_key_env: VAR` names the variable: it must be set and non-empty;
/// - no `api_key_env` and no `base_url` (or a `base_url` on the official host,
///   `api.openai.com` / `api.anthropic.com`): the provider's default variable,
///   `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`, must be set;
/// - no `api_key_env` and a `base_url` on another host (Ollama, vLLM, llama.cpp
///   server, a proxy): no key is sent. The default variable is never sent to a host
///   the spec did not name it for; Groq, Together and other hosted servers name
///   their variable with `api_key_env`.
///
/// Other provider kinds need no key (`Ok(None)`).
///
/// # Errors
/// A [`KeyError`] naming the model and the variable when a required key is missing,
/// empty or not UTF-8.
pub fn api_key(name: &str, model: &ModelSpec) -> Result<Option<Secret>, KeyError> {
    let Some(net) = super::kind(model.provider).network else {
        return Ok(None);
    };
    let (default_var, official) = (net.key_var, net.official_host);
    let (var, rule) = match model.api_key_env.as_deref() {
        Some(v) => (v, KeyRule::Named),
        None => {
            let on_official = model.base_url.as_deref().is_none_or(|b| {
                reqwest::Url::parse(b.trim())
                    .ok()
                    .and_then(|u| u.host_str().map(|h| h.eq_ignore_ascii_case(official)))
                    .unwrap_or(false)
            });
            if !on_official {
                return Ok(None);
            }
            (
                default_var,
                KeyRule::Default {
                    provider: model.provider.as_str(),
                },
            )
        }
    };
    read_env(var).map(Some).map_err(|why| KeyError {
        model: name.to_string(),
        var: var.to_string(),
        rule,
        why,
    })
}

/// Which keys [`missing`] checks.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyScope<'a> {
    /// `--replay`: the chat and embedding models answer from a cassette and read no
    /// key (web searches are still made live).
    pub replaying: bool,
    /// Models answered by providers the caller gives: they read no key.
    pub given: &'a [&'a str],
    /// Also check the keys of the calls made live whatever answers the models: the
    /// tools' (Tavily). (`Resources::prepare` leaves them to the constructors, which
    /// read them.)
    pub live_calls: bool,
}

/// The API-key problems of a spec for a run in `scope`, one message per fault
/// (empty when every key is there): each model that reads a key
/// ([`api_key`]: embedding models of `dense`/`hybrid` retrievers included, none
/// when replaying, since a cassette answers their calls too); with `live_calls`, a
/// `tavily` tool whose `api_key_env` is unset or empty. `ragloop run` and
/// `ragloop eval` report them before anything runs, as a usage error.
pub fn missing(spec: &Spec, scope: &KeyScope<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if !scope.replaying {
        out.extend(
            spec.models
                .iter()
                .filter(|(name, _)| !scope.given.contains(&name.as_str()))
                .filter_map(|(name, m)| api_key(name, m).err().map(|e| e.to_string())),
        );
        out.extend(crate::retrieval::rerank::missing_keys(spec));
    }
    if !scope.live_calls {
        return out;
    }
    for (name, t) in &spec.tools {
        if let Some(var) = crate::retrieval::tool_key_var(t) {
            if read_env(var).is_err() {
                out.push(format!(
                    "tool `{name}`: the Tavily API key variable {var} (named by tools.{name}.api_key_env) is not set or empty"
                ));
            }
        }
    }
    out
}
