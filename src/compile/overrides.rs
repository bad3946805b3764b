//! Command-line changes to a spec (`ragloop run` and `ragloop eval`), applied after
//! the variant, in this order:
//!
//! 1. `--override PATH=VALUE`, each in the order given, with a variant's `set` rules
//!    ([`crate::spec::overlay::apply_overrides`]);
//! 2. `--model NAME=PROVIDER[:MODEL][@BASE_URL]` ([`apply_model_override`]);
//! 3. `--timeout SECS` and `--retries N`: the per-attempt timeout and the retries of
//!    every network call of the run, whatever the spec says: every model's
//!    `timeout_secs`/`retries` (chat models and embedding models alike) and every
//!    web-search tool's.
//!
//! The changed spec is validated again before anything runs; a fault it has is the
//! overrides' fault, so it is a usage error naming them.
use crate::spec::types::Provider as ProviderKind;
use crate::spec::types::{Spec, ToolSpec};
use crate::spec::LoadedSpec;
use serde_json::Value;

/// The bounds of `--timeout`, in seconds: those of a spec's `timeout_secs`.
pub use crate::spec::types::{MAX_TIMEOUT_SECS, MIN_TIMEOUT_SECS};

/// The largest `--retries` (the bound a web-search tool's `retries` has in a spec).
pub const MAX_RETRIES: u32 = 10;

/// Every command-line change to a spec (see the module docs for the order).
#[derive(Clone, Debug, Default)]
pub struct SpecOverrides {
    /// `--override PATH=VALUE` arguments, in order.
    pub set: Vec<String>,
    /// `--model NAME=PROVIDER[:MODEL][@BASE_URL]` arguments, in order.
    pub models: Vec<String>,
    /// `--timeout SECS`: timeout of one attempt of every network call, in seconds.
    pub timeout_secs: Option<f64>,
    /// `--retries N`: retries of every call after a transient failure.
    pub retries: Option<u32>,
}

impl SpecOverrides {
    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
            && self.models.is_empty()
            && self.timeout_secs.is_none()
            && self.retries.is_none()
    }

    /// The flags, as a user would type them, for messages:
    /// `--override a.b=1 --model m=openai:x`.
    pub fn flags(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        parts.extend(self.set.iter().map(|s| format!("--override {s}")));
        parts.extend(self.models.iter().map(|m| format!("--model {m}")));
        parts.extend(self.timeout_secs.map(|t| format!("--timeout {t}")));
        parts.extend(self.retries.map(|r| format!("--retries {r}")));
        parts.join(" ")
    }
}

/// A malformed `--timeout`, `--retries` or `--model` argument (a usage error).
/// `Display` is the message the CLI prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    /// `--timeout` is not a number of seconds within the bounds.
    #[error("`{0}` is not a timeout: give a number of seconds (e.g. 30 or 0.5) between {MIN_TIMEOUT_SECS} and {MAX_TIMEOUT_SECS}")]
    Timeout(String),
    /// `--retries` is not an integer within the bounds.
    #[error("`{0}` is not a retry count: give an integer from 0 to {MAX_RETRIES}")]
    Retries(String),
    /// A `--model ARG` that cannot be applied.
    #[error("`--model {arg}`: {fault}")]
    Model {
        /// The argument as given.
        arg: String,
        /// What is wrong with it.
        fault: ModelFault,
    },
}

/// What is wrong with a `--model` argument (see [`OverrideError::Model`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelFault {
    /// No `=`.
    #[error("expected NAME=PROVIDER[:MODEL][@BASE_URL]")]
    Syntax,
    /// An `@` not followed by `http://` or `https://`.
    #[error("the part after `@` must be an http:// or https:// base URL")]
    NotUrl,
    /// The base URL does not parse (the provider's message).
    #[error("{0}")]
    BaseUrl(#[source] crate::providers::EndpointError),
    /// Not a provider kind; `expected` lists them.
    #[error("unknown provider `{provider}` (expected {expected})")]
    UnknownProvider {
        /// The provider as written.
        provider: String,
        /// The provider kinds, as [`crate::providers::kind_names`] gives them.
        expected: String,
    },
    /// The spec has no model of that name; `known` lists them.
    #[error("the spec has no model `{name}` (models: {})", .known.join(", "))]
    UnknownModel {
        /// The model name as written.
        name: String,
        /// The spec's model names.
        known: Vec<String>,
    },
    /// A network provider without a model name.
    #[error("provider {provider} needs a model name: --model {name}={provider}:MODEL")]
    NeedsModel {
        /// The provider as written.
        provider: String,
        /// The model name.
        name: String,
    },
}

/// Parses `--timeout SECS`: a number of seconds, fractions allowed (`0.5`), from
/// [`MIN_TIMEOUT_SECS`] to [`MAX_TIMEOUT_SECS`] (the bounds of a spec's `timeout_secs`).
///
/// # Errors
/// [`OverrideError::Timeout`], saying what is accepted.
pub fn parse_timeout(text: &str) -> Result<f64, OverrideError> {
    let bad = || OverrideError::Timeout(text.to_string());
    let secs: f64 = text.trim().parse().map_err(|_| bad())?;
    if (MIN_TIMEOUT_SECS..=MAX_TIMEOUT_SECS).contains(&secs) {
        Ok(secs)
    } else {
        Err(bad())
    }
}

/// Parses `--retries N`: an integer from 0 to [`MAX_RETRIES`].
///
/// # Errors
/// [`OverrideError::Retries`], saying what is accepted.
pub fn parse_retries(text: &str) -> Result<u32, OverrideError> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n <= MAX_RETRIES)
        .ok_or_else(|| OverrideError::Retries(text.to_string()))
}

/// Sets the per-attempt timeout and the retries of every model and web-search tool
/// of `spec` (step 3 of the module docs); `None` leaves the spec's own.
pub fn apply_call_policy(spec: &mut Spec, timeout_secs: Option<f64>, retries: Option<u32>) {
    if timeout_secs.is_none() && retries.is_none() {
        return;
    }
    for m in spec.models.values_mut() {
        if timeout_secs.is_some() {
            m.timeout_secs = timeout_secs;
        }
        if retries.is_some() {
            m.retries = retries;
        }
    }
    for t in spec.tools.values_mut() {
        match t {
            ToolSpec::Searxng {
                timeout_secs: t,
                retries: r,
                ..
            }
            | ToolSpec::Tavily {
                timeout_secs: t,
                retries: r,
                ..
            } => {
                if timeout_secs.is_some() {
                    *t = timeout_secs;
                }
                if retries.is_some() {
                    *r = retries;
                }
            }
            ToolSpec::Corpus { .. } => {}
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
/// [`OverrideError::Model`] for a malformed argument, an unknown model or provider, a
/// `@` suffix that is not an http(s) URL.
pub fn apply_model_override(loaded: &mut LoadedSpec, arg: &str) -> Result<(), OverrideError> {
    let bad = |fault: ModelFault| OverrideError::Model {
        arg: arg.to_string(),
        fault,
    };
    let (name, rest) = arg.split_once('=').ok_or_else(|| bad(ModelFault::Syntax))?;
    let (rest, base_url) = match rest.find("@http://").or_else(|| rest.find("@https://")) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None if rest.contains('@') => return Err(bad(ModelFault::NotUrl)),
        None => (rest, None),
    };
    if let Some(b) = base_url {
        crate::providers::openai::endpoint(name, Some(b))
            .map_err(|e| bad(ModelFault::BaseUrl(e)))?;
    }
    let (prov, model) = match rest.split_once(':') {
        Some((p, m)) => (p, Some(m)),
        None => (rest, None),
    };
    let kind: ProviderKind =
        serde_json::from_value(Value::String(prov.to_string())).map_err(|_| {
            bad(ModelFault::UnknownProvider {
                provider: prov.to_string(),
                expected: crate::providers::kind_names(),
            })
        })?;
    let known: Vec<String> = loaded.spec.models.keys().cloned().collect();
    let m = loaded.spec.models.get_mut(name).ok_or_else(|| {
        bad(ModelFault::UnknownModel {
            name: name.to_string(),
            known,
        })
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
        return Err(bad(ModelFault::NeedsModel {
            provider: prov.to_string(),
            name: name.to_string(),
        }));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_and_retries_are_checked() {
        assert_eq!(parse_timeout("0.5"), Ok(0.5));
        assert_eq!(parse_timeout("30"), Ok(30.0));
        assert_eq!(parse_timeout("0.001"), Ok(MIN_TIMEOUT_SECS));
        assert_eq!(parse_timeout("86400"), Ok(MAX_TIMEOUT_SECS));
        for bad in [
            "abc", "0", "-1", "nan", "inf", "", "86401", "0.0001", "0.000999",
        ] {
            let e = parse_timeout(bad).unwrap_err().to_string();
            assert!(e.contains("between 0.001 and 86400"), "{bad}: {e}");
        }
        assert_eq!(parse_retries("0"), Ok(0));
        assert_eq!(parse_retries("10"), Ok(10));
        for bad in ["-1", "11", "1.5", "x"] {
            assert!(parse_retries(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_retries("11").unwrap_err().to_string(),
            "`11` is not a retry count: give an integer from 0 to 10"
        );
        let e = OverrideError::Model {
            arg: "x=openai".into(),
            fault: ModelFault::UnknownModel {
                name: "x".into(),
                known: vec!["a".into(), "b".into()],
            },
        };
        assert_eq!(
            e.to_string(),
            "`--model x=openai`: the spec has no model `x` (models: a, b)"
        );
    }
}
