//! Fields of the request body every network provider builds the same way: the
//! temperature actually sent and the model's `params` merged over the body.
use crate::spec::types::ModelSpec;
use serde_json::{Map, Value};

/// The body fields ragloop builds and `params` cannot replace (also refused by the
/// E071 check of `validate`).
pub const FIXED_FIELDS: [&str; 6] = [
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "response_format",
];

/// The `temperature` field a request of model `m` carries after the `params` merge
/// (one rule for the bodies the providers send and for the response cache's
/// eligibility, [`crate::providers::cache::cacheable`]): `params.temperature` when the params
/// set it (`null` removes the field: the server's default applies, `None`), else the
/// model's `temperature` (clamped to the kind's `max_temperature`: the Messages
/// API's 0..1 for `anthropic`).
pub(crate) fn sent_temperature(m: &ModelSpec) -> Option<Value> {
    match m.params.get("temperature") {
        Some(Value::Null) => None,
        Some(v) => Some(v.clone()),
        None => match crate::providers::kind(m.provider)
            .network
            .and_then(|n| n.max_temperature)
        {
            Some(max) => Some(serde_json::json!(m.temperature.clamp(0.0, max))),
            None => Some(serde_json::json!(m.temperature)),
        },
    }
}

/// `params` of a network model, merged into the request body: each key is set at
/// the top level (a `null` value removes the field the provider would send, e.g.
/// `temperature: null` for models that reject it); `model`, `messages`, `system`,
/// `tools`, `tool_choice` and `response_format` cannot be replaced.
pub(crate) fn merge_params(body: &mut Map<String, Value>, params: &Map<String, Value>) {
    for (k, v) in params {
        if FIXED_FIELDS.contains(&k.as_str()) {
            continue;
        }
        if v.is_null() {
            body.remove(k);
        } else {
            body.insert(k.clone(), v.clone());
        }
    }
}

/// The parameter keys that [`merge_params`] ignores, for error messages at build.
pub(crate) fn fixed_param(params: &indexmap::IndexMap<String, Value>) -> Option<&str> {
    params
        .keys()
        .map(String::as_str)
        .find(|k| FIXED_FIELDS.contains(k))
}
