//! The errors of building providers and of writing what they answer: one enum per
//! concept. [`ProviderError`](super::ProviderError) (a call that failed) lives in
//! `mod.rs` next to the [`Provider`](super::Provider) trait.
//!
//! - [`EndpointError`]: a model's `base_url` that is not an http(s) URL without a
//!   query (the `endpoint` of a [`Network`](super::Network) kind);
//! - [`KeyError`]: a model's API key variable that cannot be read ([`super::api_key`]);
//! - [`ConfigError`]: a model whose provider cannot be built (the registry's
//!   [`KindDef::build`](super::KindDef), [`super::registry::provider_for`]); it wraps
//!   the two above and the constructors' own: [`ParamError`] (offline `params`),
//!   [`FixtureError`] (scripted fixtures), [`ReplayConfigError`] (`provider: replay`);
//! - [`CassetteError`](super::cassette::CassetteError) (reading and writing
//!   cassettes) and [`CacheError`](super::cache::CacheError) (request keys, cache
//!   writes) beside the types they belong to.
//!
//! Each `Display` is the message users see; the ones of a model name it
//! (``model `NAME`: …``).
use crate::secret::Unreadable;
use serde_json::Value;
use std::path::PathBuf;

/// Why a model's `base_url` is refused. The message names the model and quotes the
/// URL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The text does not parse as a URL (`reason`: the parser's message).
    #[error("model `{model}`: base_url `{base}` is not a URL: {reason}")]
    NotUrl {
        /// The model's name in the spec.
        model: String,
        /// The `base_url` as written.
        base: String,
        /// Why it does not parse.
        reason: String,
    },
    /// Not http or https, or no host.
    #[error("model `{model}`: base_url `{base}` must be an http:// or https:// address")]
    NotHttp {
        /// The model's name in the spec.
        model: String,
        /// The `base_url` as written.
        base: String,
    },
    /// The URL carries a query or a fragment.
    #[error("model `{model}`: base_url `{base}` must not carry a query or a fragment")]
    QueryOrFragment {
        /// The model's name in the spec.
        model: String,
        /// The `base_url` as written.
        base: String,
    },
}

/// Which rule named a model's key variable (see [`super::api_key`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyRule {
    /// The model's `api_key_env`.
    Named,
    /// The provider kind's default variable (`OPENAI_API_KEY`, ...), for a model on the
    /// official host.
    Default {
        /// The provider kind (`openai`, `anthropic`).
        provider: &'static str,
    },
}

/// A required API key that cannot be read. The message names the model, the variable,
/// the rule that named it and what is wrong; never the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyError {
    /// The model's name in the spec.
    pub model: String,
    /// The environment variable.
    pub var: String,
    /// Why that variable.
    pub rule: KeyRule,
    /// What is wrong with it: unset, empty, not UTF-8.
    pub why: Unreadable,
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let KeyError {
            model,
            var,
            rule,
            why,
        } = self;
        write!(f, "model `{model}`: the API key variable {var} (")?;
        match rule {
            KeyRule::Named => write!(f, "named by models.{model}.api_key_env")?,
            KeyRule::Default { provider } => write!(
                f,
                "the default of provider {provider}; name another one with models.{model}.api_key_env"
            )?,
        }
        write!(f, ") {}", why.describe())
    }
}

impl std::error::Error for KeyError {}

/// A bad `params` entry of an `offline` model. The message names the parameter.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// A share that is not a number from 0 to 1.
    #[error("param `{param}` must be a number between 0 and 1, got {value}")]
    NotUnit {
        /// The parameter.
        param: String,
        /// The value given.
        value: Value,
    },
    /// A count that is not an integer in its range.
    #[error("param `{param}` must be an integer from {min} to {max}, got {value}")]
    NotCount {
        /// The parameter.
        param: String,
        /// The least value taken.
        min: u64,
        /// The largest value taken.
        max: u64,
        /// The value given.
        value: Value,
    },
    /// A flag that is not a boolean.
    #[error("param `{param}` must be a boolean, got {value}")]
    NotBool {
        /// The parameter.
        param: String,
        /// The value given.
        value: Value,
    },
    /// Not a parameter of the offline provider; `known` lists them.
    #[error("unknown param `{param}` (known: {})", .known.join(", "))]
    Unknown {
        /// The key as written.
        param: String,
        /// The known parameters.
        known: &'static [&'static str],
    },
}

/// A scripted fixture that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The file cannot be read.
    #[error("cannot read scripted fixture {}: {source}", path.display())]
    Read {
        /// The fixture file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON.
    #[error("scripted fixture {} is not JSON: {source}", path.display())]
    NotJson {
        /// The fixture file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The fixture is not a JSON object.
    #[error("a scripted fixture must be a JSON object: node name -> list of answers")]
    NotObject,
    /// A node's answers are not a list.
    #[error("scripted fixture: answers of node `{node}` must be a list")]
    NotList {
        /// The node.
        node: String,
    },
}

/// Why a `provider: replay` model cannot answer from its cassette (the model is named
/// by the [`ConfigError::Replay`] around it).
#[derive(Debug, thiserror::Error)]
pub enum ReplayConfigError {
    /// A param other than `file`.
    #[error("the replay provider has one param, `file`; unknown param `{0}`")]
    UnknownParam(String),
    /// No `params.file`.
    #[error("the replay provider needs `params.file` (a cassette path relative to the project root), or use --replay FILE")]
    NoFile,
    /// The cassette cannot be read or is malformed.
    #[error(transparent)]
    Cassette(#[from] super::cassette::CassetteError),
    /// The cassette holds no exchange of the model; `recorded` lists the model names it
    /// holds.
    #[error(
        "cassette {} holds no exchange of a model named `{model}` (models recorded: {})",
        path.display(),
        if recorded.is_empty() { "none".to_string() } else { recorded.join(", ") }
    )]
    NotRecorded {
        /// The cassette.
        path: PathBuf,
        /// The model's name.
        model: String,
        /// The model names recorded.
        recorded: Vec<String>,
    },
    /// Several configurations of the model were recorded and the replay model's
    /// settings select none or several of them.
    #[error(
        "cassette {} records {} configurations of `{model}` ({}) and the replay model's model/base_url/temperature/max_tokens/structured_output select {}; set them to pick one, or replay with --replay FILE and the spec that was recorded",
        path.display(),
        configs.len(),
        configs.join("; "),
        if *selected == 0 { "none".to_string() } else { selected.to_string() }
    )]
    Ambiguous {
        /// The cassette.
        path: PathBuf,
        /// The model's name.
        model: String,
        /// The recorded configurations, described.
        configs: Vec<String>,
        /// How many the replay model's settings select (0 or more than 1).
        selected: usize,
    },
}

/// Why the provider of a model cannot be built. The message names the model.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A bad `base_url`.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// A required API key is missing.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A network provider's model names no server model.
    #[error("model `{model}`: provider {provider} needs `model` ({example})")]
    NoModel {
        /// The model's name in the spec.
        model: String,
        /// The provider kind.
        provider: &'static str,
        /// An example of a server model name.
        example: &'static str,
    },
    /// A `params` key that would replace a field ragloop builds.
    #[error(
        "model `{model}`: params.{param} cannot be set (ragloop builds that field of the request)"
    )]
    FixedParam {
        /// The model's name in the spec.
        model: String,
        /// The key.
        param: String,
    },
    /// A bad `params` entry of an `offline` model.
    #[error("model `{model}`: offline provider: {source}")]
    Offline {
        /// The model's name in the spec.
        model: String,
        /// The bad parameter.
        #[source]
        source: ParamError,
    },
    /// A `params.file` (fixture or cassette) that is missing or outside the project
    /// root (`message`: the path rule's diagnostic message).
    #[error("model `{model}`: {message}")]
    File {
        /// The model's name in the spec.
        model: String,
        /// What is wrong with the path.
        message: String,
    },
    /// A scripted model without `params.file`.
    #[error("model `{model}`: the scripted provider needs `params.file` (a fixture path relative to the project root)")]
    NoFixture {
        /// The model's name in the spec.
        model: String,
    },
    /// A scripted model's fixture cannot be used.
    #[error("model `{model}`: {source}")]
    Fixture {
        /// The model's name in the spec.
        model: String,
        /// What is wrong with the fixture.
        #[source]
        source: FixtureError,
    },
    /// A `provider: replay` model cannot answer from its cassette.
    #[error("model `{model}`: {source}")]
    Replay {
        /// The model's name in the spec.
        model: String,
        /// What is wrong.
        #[source]
        source: ReplayConfigError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::cassette::CassetteError;
    use crate::spec::types::{ModelSpec, Provider as Kind};

    fn model(yaml: serde_json::Value) -> ModelSpec {
        serde_json::from_value(yaml).expect("model")
    }

    #[test]
    fn endpoints_refuse_with_typed_errors_and_the_same_messages() {
        let e = crate::providers::openai::endpoint("m", Some("localhost:11434")).unwrap_err();
        assert!(
            matches!(&e, EndpointError::NotHttp { model, base } if model == "m" && base == "localhost:11434")
        );
        assert_eq!(
            e.to_string(),
            "model `m`: base_url `localhost:11434` must be an http:// or https:// address"
        );
        let e = crate::providers::anthropic::endpoint("a", Some("http://h/v1?x=1")).unwrap_err();
        assert_eq!(
            e,
            EndpointError::QueryOrFragment {
                model: "a".into(),
                base: "http://h/v1?x=1".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "model `a`: base_url `http://h/v1?x=1` must not carry a query or a fragment"
        );
        let e = crate::providers::openai::endpoint("m", Some("not a url")).unwrap_err();
        assert!(matches!(e, EndpointError::NotUrl { .. }));
        assert!(e
            .to_string()
            .starts_with("model `m`: base_url `not a url` is not a URL: "));
    }

    #[test]
    fn constructors_say_what_is_wrong_with_typed_errors() {
        let m = model(serde_json::json!({"provider": "openai", "base_url": "http://127.0.0.1:9"}));
        let e = crate::providers::openai::OpenAiProvider::new("gen", &m).unwrap_err();
        assert!(matches!(
            e,
            ConfigError::NoModel {
                provider: "openai",
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "model `gen`: provider openai needs `model` (the server's model name, e.g. gpt-4o-mini)"
        );
        let m = model(serde_json::json!({"provider": "anthropic", "model": "x",
            "base_url": "http://127.0.0.1:9", "params": {"messages": []}}));
        let e = crate::providers::anthropic::AnthropicProvider::new("gen", &m).unwrap_err();
        assert!(matches!(&e, ConfigError::FixedParam { param, .. } if param == "messages"));
        assert_eq!(
            e.to_string(),
            "model `gen`: params.messages cannot be set (ragloop builds that field of the request)"
        );
        let m = model(serde_json::json!({"provider": "offline", "params": {"min_gain": 2}}));
        let b = crate::providers::Build {
            name: "o",
            model: &m,
            root: std::path::Path::new("."),
            index: None,
        };
        let e = (crate::providers::kind(Kind::Offline).build)(&b)
            .err()
            .unwrap();
        assert!(matches!(
            &e,
            ConfigError::Offline {
                source: ParamError::NotUnit { .. },
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "model `o`: offline provider: param `min_gain` must be a number between 0 and 1, got 2"
        );
        let m = model(serde_json::json!({"provider": "offline", "params": {"soup": 1}}));
        let e = crate::providers::offline::OfflineParams::from_map(&m.params).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown param `soup` (known: relevance_threshold, min_overlap, answer_min_coverage, sentence_min_coverage, max_sentences, min_gain, expansion_terms, feedback_docs, synonyms, support_threshold, addresses_threshold, key_terms_share)"
        );
    }

    #[test]
    fn key_errors_name_the_model_the_variable_and_the_rule() {
        std::env::remove_var("RAGLOOP_TEST_ERRORS_KEY_UNSET");
        let m = model(serde_json::json!({"provider": "openai", "model": "x",
            "api_key_env": "RAGLOOP_TEST_ERRORS_KEY_UNSET"}));
        let e = crate::providers::api_key("g", &m).unwrap_err();
        assert_eq!(e.rule, KeyRule::Named);
        assert_eq!(e.why, Unreadable::NotSet);
        assert_eq!(
            e.to_string(),
            "model `g`: the API key variable RAGLOOP_TEST_ERRORS_KEY_UNSET (named by models.g.api_key_env) is not set"
        );
        let e = KeyError {
            model: "g".into(),
            var: "ANTHROPIC_API_KEY".into(),
            rule: KeyRule::Default {
                provider: "anthropic",
            },
            why: Unreadable::Empty,
        };
        assert_eq!(
            e.to_string(),
            "model `g`: the API key variable ANTHROPIC_API_KEY (the default of provider anthropic; name another one with models.g.api_key_env) is empty"
        );
    }

    #[test]
    fn scripted_and_replay_models_name_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let m = model(serde_json::json!({"provider": "scripted"}));
        let e = crate::providers::scripted::ScriptedProvider::from_spec("s", &m, dir.path())
            .err()
            .unwrap();
        assert!(matches!(e, ConfigError::NoFixture { .. }));
        assert_eq!(e.to_string(), "model `s`: the scripted provider needs `params.file` (a fixture path relative to the project root)");
        std::fs::write(dir.path().join("f.json"), "[1]").unwrap();
        let m = model(serde_json::json!({"provider": "scripted", "params": {"file": "f.json"}}));
        let e = crate::providers::scripted::ScriptedProvider::from_spec("s", &m, dir.path())
            .err()
            .unwrap();
        assert!(matches!(
            e,
            ConfigError::Fixture {
                source: FixtureError::NotObject,
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "model `s`: a scripted fixture must be a JSON object: node name -> list of answers"
        );
        let e =
            crate::providers::scripted::ScriptedProvider::from_json(&serde_json::json!({"n": "x"}))
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "scripted fixture: answers of node `n` must be a list"
        );
        let missing = dir.path().join("none.json");
        let e = crate::providers::scripted::ScriptedProvider::from_file(&missing).unwrap_err();
        assert!(matches!(&e, FixtureError::Read { path, .. } if path == &missing));
        assert!(e.to_string().starts_with(&format!(
            "cannot read scripted fixture {}: ",
            missing.display()
        )));

        let m =
            model(serde_json::json!({"provider": "replay", "params": {"file": "c.jsonl", "x": 1}}));
        let e = crate::providers::replay::ReplayProvider::from_spec("r", &m, dir.path())
            .err()
            .unwrap();
        assert!(
            matches!(&e, ConfigError::Replay { source: ReplayConfigError::UnknownParam(k), .. } if k == "x")
        );
        assert_eq!(
            e.to_string(),
            "model `r`: the replay provider has one param, `file`; unknown param `x`"
        );
        std::fs::write(dir.path().join("c.jsonl"), "{}\n").unwrap();
        let m = model(serde_json::json!({"provider": "replay", "params": {"file": "c.jsonl"}}));
        let e = crate::providers::replay::ReplayProvider::from_spec("r", &m, dir.path())
            .err()
            .unwrap();
        assert!(matches!(
            e,
            ConfigError::Replay {
                source: ReplayConfigError::Cassette(CassetteError::Line { line: 1, .. }),
                ..
            }
        ));
        assert!(
            e.to_string().starts_with(&format!(
                "model `r`: {}:1: ",
                dir.path().canonicalize().unwrap().join("c.jsonl").display()
            )),
            "{e}"
        );
    }

    #[test]
    fn cassette_and_cache_writes_fail_with_typed_errors_naming_the_path() {
        use crate::providers::cache::{CacheError, RequestKey, ResponseCache};
        use crate::providers::cassette::CassetteWriter;
        let dir = tempfile::tempdir().unwrap();
        let nowhere = dir.path().join("no-such-dir").join("c.jsonl");
        let e = CassetteWriter::create(&nowhere).unwrap_err();
        assert!(matches!(&e, CassetteError::Create { path, .. } if path == &nowhere));
        assert!(e
            .to_string()
            .starts_with(&format!("cannot create cassette {}: ", nowhere.display())));
        let e = CassetteWriter::append(&nowhere).unwrap_err();
        assert!(matches!(e, CassetteError::Open { .. }));
        assert!(e.to_string().starts_with("cannot open cassette "));

        let e = RequestKey::from_hex("xyz").unwrap_err();
        assert!(matches!(&e, CacheError::BadKey { text } if text == "xyz"));
        assert_eq!(e.to_string(), "`\"xyz\"` is not a 64-digit hex key");
        // A file where the cache's directory should be: the write fails, naming it.
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, "").unwrap();
        let cache = ResponseCache::at(blocked.join("responses"));
        let key = RequestKey::from_hex(&"ab".repeat(32)).unwrap();
        let e = cache
            .put(&key, &crate::providers::LlmResponse::default())
            .unwrap_err();
        assert!(matches!(e, CacheError::Write { .. }));
        assert!(
            e.to_string().starts_with(&blocked.display().to_string()),
            "{e}"
        );
    }
}
