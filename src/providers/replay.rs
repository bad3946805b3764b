//! The `replay` provider: answers from a [`Cassette`], by request key, with no model,
//! no key and no network.
//!
//! Two ways to use it:
//! - `ragloop run|eval --replay FILE` answers **every** model of the run from FILE.
//!   The keys are computed from the spec's own model configurations, so the spec (and
//!   variant, and `--model` overrides) must be the one that was recorded; no provider
//!   is built and no API key is read.
//! - `provider: replay` with `params: {file: PATH}` (relative to the project root)
//!   answers one model. Since the spec no longer says which provider configuration
//!   was recorded, it is taken from the cassette: the one configuration recorded for
//!   that model name; when several were (variants that change the model), the ones
//!   matching the replay model's `model`, `base_url`, `temperature`, `max_tokens` and
//!   `structured_output`; it is an error if that still leaves several or none.
//!
//! A request the cassette does not hold fails (a permanent error, never retried) with
//! a message naming the node, the model, the short key, and what differs from the
//! closest recorded request of that node (configuration, schema, inputs or the first
//! differing message).
use super::cache::{canonical_bytes, KeyConfig, KeyMaker, RequestKey};
use super::cassette::CassetteError;
use super::cassette::{Cassette, Exchange};
use super::{
    ConfigError, LlmRequest, LlmResponse, Message, Provider, ProviderError, ReplayConfigError,
};
use crate::spec::types::ModelSpec;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Answers one model's calls from a cassette.
pub struct ReplayProvider {
    cassette: Arc<Cassette>,
    model_name: String,
    keys: KeyMaker,
}

impl ReplayProvider {
    /// Replays model `model_name` of the spec, whose recorded configuration is the one
    /// `keys` was made for.
    pub fn new(cassette: Arc<Cassette>, model_name: &str, keys: KeyMaker) -> ReplayProvider {
        ReplayProvider {
            cassette,
            model_name: model_name.to_string(),
            keys,
        }
    }

    /// The provider of a model written `provider: replay` in a spec: reads
    /// `params.file` (relative to `root`), loads the cassette (once per process and
    /// file) and picks the recorded configuration (see the module docs).
    ///
    /// # Errors
    /// A [`ConfigError`] naming the model: a path outside the root (`File`); no or
    /// unknown params, an unreadable or malformed cassette, no or several matching
    /// recorded configurations (`Replay`, with the [`ReplayConfigError`]).
    pub fn from_spec(
        name: &str,
        model: &ModelSpec,
        root: &Path,
    ) -> Result<ReplayProvider, ConfigError> {
        let fail = |source: ReplayConfigError| ConfigError::Replay {
            model: name.to_string(),
            source,
        };
        if let Some(k) = model.params.keys().find(|k| *k != "file") {
            return Err(fail(ReplayConfigError::UnknownParam(k.clone())));
        }
        let file = model
            .params
            .get("file")
            .and_then(Value::as_str)
            .ok_or_else(|| fail(ReplayConfigError::NoFile))?;
        let path =
            crate::spec::load::resolve_under(root, file, None).map_err(|d| ConfigError::File {
                model: name.to_string(),
                message: d.message,
            })?;
        let cassette = load_shared(&path).map_err(|e| fail(e.into()))?;
        let recorded: Vec<&KeyConfig> = cassette
            .configs()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, c)| c)
            .collect();
        let config = match recorded.as_slice() {
            [] => {
                let mut names: Vec<String> =
                    cassette.configs().iter().map(|(n, _)| n.clone()).collect();
                names.dedup();
                return Err(fail(ReplayConfigError::NotRecorded {
                    path,
                    model: name.to_string(),
                    recorded: names,
                }));
            }
            [one] => (*one).clone(),
            several => {
                let want = KeyConfig::from_model(model);
                let fits: Vec<&&KeyConfig> = several
                    .iter()
                    .filter(|c| {
                        want.model
                            .as_ref()
                            .is_none_or(|m| c.model.as_ref() == Some(m))
                            && want
                                .base_url
                                .as_ref()
                                .is_none_or(|u| c.base_url.as_ref() == Some(u))
                            && want.max_tokens.is_none_or(|t| c.max_tokens == Some(t))
                            && want
                                .structured_output
                                .as_ref()
                                .is_none_or(|s| c.structured_output.as_ref() == Some(s))
                            && c.temperature == want.temperature
                    })
                    .collect();
                match fits.as_slice() {
                    [one] => (**one).clone(),
                    _ => {
                        return Err(fail(ReplayConfigError::Ambiguous {
                            path,
                            model: name.to_string(),
                            configs: several.iter().map(|c| c.describe()).collect(),
                            selected: fits.len(),
                        }))
                    }
                }
            }
        };
        Ok(ReplayProvider::new(cassette, name, KeyMaker::new(config)))
    }

    /// The key maker (the recorded configuration this provider replays).
    pub fn keys(&self) -> &KeyMaker {
        &self.keys
    }

    /// The cassette.
    pub fn cassette(&self) -> &Arc<Cassette> {
        &self.cassette
    }
}

impl Provider for ReplayProvider {
    fn name(&self) -> &'static str {
        "replay"
    }

    fn call<'a>(
        &'a self,
        req: &'a LlmRequest,
    ) -> BoxFuture<'a, Result<LlmResponse, ProviderError>> {
        // Picked now, in call order (answers of a repeated key are served in order).
        let key = self.keys.key(req);
        let r = match self.cassette.answer(&key) {
            Some(r) => r,
            None => Err(ProviderError::Permanent(explain_miss(
                &self.cassette,
                &self.model_name,
                &self.keys,
                req,
                &key,
            ))),
        };
        Box::pin(std::future::ready(r))
    }
}

type Shared = HashMap<(PathBuf, Option<std::time::SystemTime>, u64), Arc<Cassette>>;

/// Loads a cassette once per process (keyed by canonical path, modification time and
/// size), so every variant and question of an eval shares one copy.
///
/// # Errors
/// The load error, as text.
pub fn load_shared(path: &Path) -> Result<Arc<Cassette>, CassetteError> {
    static LOADED: OnceLock<Mutex<Shared>> = OnceLock::new();
    let meta = std::fs::metadata(path).map_err(|source| CassetteError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let id = (
        path.canonicalize().unwrap_or_else(|_| path.to_path_buf()),
        meta.modified().ok(),
        meta.len(),
    );
    let map = LOADED.get_or_init(Mutex::default);
    if let Some(c) = map.lock().ok().and_then(|m| m.get(&id).cloned()) {
        return Ok(c);
    }
    let c = Arc::new(Cassette::load(path)?);
    if let Ok(mut m) = map.lock() {
        m.insert(id, Arc::clone(&c));
    }
    Ok(c)
}

/// The failure message of a request the cassette does not hold.
pub fn explain_miss(
    cassette: &Cassette,
    model_name: &str,
    keys: &KeyMaker,
    req: &LlmRequest,
    key: &RequestKey,
) -> String {
    let item = req.item.map(|i| format!(" (item {i})")).unwrap_or_default();
    let mut msg = format!(
        "replay: cassette {} holds no recorded request for node `{}`{item} of model `{model_name}` with these {} (key {})",
        cassette.path().display(),
        req.node,
        if keys.config().keys_task() { "inputs" } else { "messages" },
        key.short()
    );
    let n = cassette.exchanges_for_node(&req.node);
    if n == 0 {
        msg.push_str(&format!(
            "; it has no exchange for that node ({} exchange(s) in all)",
            cassette.len()
        ));
        return msg;
    }
    msg.push_str(&format!("; it has {n} exchange(s) for that node"));
    if let Some(why) = Cassette::read_exchanges(cassette.path())
        .ok()
        .and_then(|all| what_differs(&all, model_name, keys, req))
    {
        msg.push_str(": ");
        msg.push_str(&why);
    }
    msg
}

fn what_differs(
    all: &[Exchange],
    model_name: &str,
    keys: &KeyMaker,
    req: &LlmRequest,
) -> Option<String> {
    let node: Vec<&Exchange> = all.iter().filter(|x| x.node == req.node).collect();
    let same_model: Vec<&Exchange> = node
        .iter()
        .copied()
        .filter(|x| x.model_name == model_name)
        .collect();
    if same_model.is_empty() {
        let mut names: Vec<&str> = node.iter().map(|x| x.model_name.as_str()).collect();
        names.dedup();
        return Some(format!("they were made by model(s) {}", names.join(", ")));
    }
    let same_config: Vec<&Exchange> = same_model
        .iter()
        .copied()
        .filter(|x| x.config == *keys.config())
        .collect();
    if same_config.is_empty() {
        let d = keys.config().differences(&same_model[0].config);
        return Some(format!(
            "the model configuration differs (now vs recorded: {})",
            d.join(", ")
        ));
    }
    let schema_now = req
        .schema
        .as_deref()
        .map(canonical_bytes)
        .unwrap_or_default();
    let same_schema: Vec<&Exchange> = same_config
        .iter()
        .copied()
        .filter(|x| x.schema.as_ref().map(canonical_bytes).unwrap_or_default() == schema_now)
        .collect();
    if same_schema.is_empty() {
        return Some("the output schema differs".into());
    }
    if keys.config().keys_task() {
        // The recorded request with the most equal inputs.
        let equal = |x: &Exchange| {
            let rec = x.inputs.as_ref();
            req.inputs
                .iter()
                .filter(|(k, v)| {
                    rec.and_then(|r| r.get(*k)).map(canonical_bytes) == Some(canonical_bytes(v))
                })
                .count()
        };
        let x = same_schema
            .iter()
            .copied()
            .filter(|x| x.task == req.task)
            .max_by_key(|x| equal(x))
            .unwrap_or(same_schema[0]);
        if x.task != req.task {
            return Some(format!(
                "the task differs (now {:?}, recorded {:?})",
                req.task, x.task
            ));
        }
        let rec = x.inputs.clone().unwrap_or_default();
        let mut diffs: Vec<String> = req
            .inputs
            .iter()
            .filter(|(k, v)| rec.get(*k).map(canonical_bytes) != Some(canonical_bytes(v)))
            .map(|(k, _)| format!("`{k}`"))
            .collect();
        diffs.extend(
            rec.keys()
                .filter(|k| !req.inputs.contains_key(*k))
                .map(|k| format!("`{k}` (recorded only)")),
        );
        return Some(format!(
            "input(s) {} differ from the closest recorded request",
            diffs.join(", ")
        ));
    }
    let best = same_schema
        .iter()
        .max_by_key(|x| common_prefix(&x.messages, &req.messages))?;
    Some(message_diff(&best.messages, &req.messages))
}

/// Characters the two message lists share before their first difference.
fn common_prefix(a: &[Message], b: &[Message]) -> usize {
    let mut n = 0;
    for (x, y) in a.iter().zip(b) {
        if x.role != y.role {
            return n;
        }
        let p = x
            .content
            .chars()
            .zip(y.content.chars())
            .take_while(|(c, d)| c == d)
            .count();
        n += p;
        if x.content != y.content {
            return n;
        }
    }
    n
}

fn message_diff(recorded: &[Message], now: &[Message]) -> String {
    for (i, (r, n)) in recorded.iter().zip(now).enumerate() {
        if r.role != n.role {
            return format!(
                "message {} is `{}` now, `{}` in the closest recording",
                i + 1,
                n.role,
                r.role
            );
        }
        if r.content != n.content {
            let at = r
                .content
                .chars()
                .zip(n.content.chars())
                .take_while(|(c, d)| c == d)
                .count();
            let excerpt = |s: &str| {
                let from = at.saturating_sub(20);
                let t: String = s.chars().skip(from).take(60).collect();
                format!("{}{t}", if from > 0 { "..." } else { "" })
            };
            return format!(
                "message {} ({}) first differs at character {at}: now {:?}, recorded {:?}",
                i + 1,
                n.role,
                excerpt(&n.content),
                excerpt(&r.content)
            );
        }
    }
    format!(
        "the request has {} message(s), the closest recording {} (the first {} are equal{})",
        now.len(),
        recorded.len(),
        now.len().min(recorded.len()),
        if now.len() > recorded.len() {
            "; a repair turn the recording did not make?"
        } else {
            ""
        }
    )
}
