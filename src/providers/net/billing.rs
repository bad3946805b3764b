//! What a reply costs and how a failed reply is billed: usage (the server's counts,
//! else estimates), cost from the model's prices, and the failures that carry it
//! (truncated, rejected, unusable).
use super::connection::Connection;
use crate::http::{HttpError, HttpResponse};
use crate::providers::LlmRequest;
use crate::spec::types::ModelSpec;
use serde_json::Value;

/// Cost in US dollars of `input` and `output` tokens at the model's `price` (per
/// million tokens); 0 without a price.
pub fn cost_usd(model: &ModelSpec, input: u64, output: u64) -> f64 {
    model.price.as_ref().map_or(0.0, |p| {
        (input as f64 * p.input_per_mtok + output as f64 * p.output_per_mtok) / 1_000_000.0
    })
}

/// The rendered messages' text, for token estimates.
pub(crate) fn prompt_chars(req: &LlmRequest) -> String {
    let mut s = String::new();
    for m in &req.messages {
        s.push_str(&m.content);
        s.push('\n');
    }
    s
}

/// The usage of one reply: the server's token counts where it gave them, else
/// estimates from the prompt and `out_text` (then flagged as estimated, the `bool`);
/// `extra_input` (Anthropic's cache reads and writes) is added to the input. Cost
/// from the model's prices.
pub(crate) fn reply_usage(
    spec: &ModelSpec,
    req: &LlmRequest,
    input: Option<u64>,
    output: Option<u64>,
    extra_input: u64,
    out_text: &str,
) -> (crate::providers::Usage, bool) {
    let estimated = input.is_none() || output.is_none();
    let input = input.unwrap_or_else(|| crate::providers::estimate_tokens(&prompt_chars(req)))
        + extra_input;
    let output_tokens = output.unwrap_or_else(|| crate::providers::estimate_tokens(out_text));
    (
        crate::providers::Usage {
            input_tokens: input,
            output_tokens,
            cost_usd: cost_usd(spec, input, output_tokens),
        },
        estimated,
    )
}

/// The output-token limit a request of model `name` carries after the `params`
/// merge, for messages: the setting that decides it (a spec path) and its value.
/// `keys` are the body fields that set a limit, the first one set winning
/// (`max_completion_tokens` before `max_tokens` for OpenAI); `default` is what is
/// sent when the model sets no `max_tokens` (Anthropic's required default).
fn token_limit(
    name: &str,
    spec: &ModelSpec,
    keys: &[&str],
    default: Option<u32>,
) -> (String, Option<String>) {
    let mut base_removed = false;
    for k in keys {
        match spec.params.get(*k) {
            Some(Value::Null) => base_removed |= *k == "max_tokens",
            Some(v) => {
                return (
                    format!("models.{name}.params.{k}"),
                    Some(format!("{k} ({v})")),
                )
            }
            None => {}
        }
    }
    let setting = format!("models.{name}.max_tokens");
    let value = match (base_removed, spec.max_tokens, default) {
        (true, _, _) | (false, None, None) => None,
        (false, Some(n), _) => Some(format!("max_tokens ({n})")),
        (false, None, Some(d)) => Some(format!(
            "max_tokens ({d}, the default: {setting} is not set)"
        )),
    };
    (setting, value)
}

/// The failure of a reply cut at the output-token limit ([`crate::providers::ProviderError::Truncated`]),
/// for the model of `conn` (`what` names it for messages): `stop` is the stop reason
/// as the server wrote it (`finish_reason length`); `keys` and `default` as for the
/// limit the request carried (see [`token_limit`]); `billed` what the reply cost.
pub(crate) fn truncated(
    conn: &Connection,
    what: &str,
    stop: &str,
    keys: &[&str],
    default: Option<u32>,
    billed: crate::providers::Billed,
) -> crate::providers::ProviderError {
    let (setting, value) = token_limit(&conn.name, &conn.spec, keys, default);
    let message = match value {
        Some(v) => format!(
            "{what}: the reply was cut at {v} before it was complete ({stop}); a truncated reply gets no repair turn and no retry (the same limit would cut it again): raise {setting}"
        ),
        None => format!(
            "{what}: the reply was cut at the server's default output-token limit before it was complete ({stop}; no max_tokens is sent); a truncated reply gets no repair turn and no retry: set {setting}"
        ),
    };
    crate::providers::ProviderError::Truncated { message, billed }
}

/// A permanent failure of a 2xx reply (a refusal, a content-filter stop, a 200
/// carrying an error object, no choices) whose body reports token usage becomes
/// [`crate::providers::ProviderError::Unusable`] carrying that usage, so a failed call that was
/// billed is counted. `usage` reads the counts from the JSON body (`None` when it
/// reports none: the failure then passes through unchanged, as do answers and
/// transient failures, which are retried). `what` names the model for the message.
pub(crate) fn bill_unusable(
    what: &str,
    resp: &HttpResponse,
    parsed: Result<
        Result<crate::providers::LlmResponse, crate::providers::ProviderError>,
        HttpError,
    >,
    usage: impl FnOnce(&Value) -> Option<(crate::providers::Usage, bool)>,
) -> Result<Result<crate::providers::LlmResponse, crate::providers::ProviderError>, HttpError> {
    let Err(HttpError::Permanent { message, .. }) = &parsed else {
        return parsed;
    };
    let body = resp.body.trim_start_matches('\u{feff}').trim();
    let Some((usage, usage_estimated)) = serde_json::from_str::<Value>(body)
        .ok()
        .as_ref()
        .and_then(usage)
    else {
        return parsed;
    };
    Ok(Err(crate::providers::ProviderError::Unusable {
        message: format!("{what}: {message}"),
        billed: crate::providers::Billed {
            usage,
            usage_estimated,
            cached: false,
        },
    }))
}

/// A rejected reply ([`crate::providers::ProviderError::InvalidOutput`]) was still billed: its
/// usage, computed by `usage` from the reply text, is attached. Other errors pass
/// through unchanged.
pub(crate) fn bill_rejected(
    mut e: crate::providers::ProviderError,
    usage: impl FnOnce(&str) -> (crate::providers::Usage, bool),
) -> crate::providers::ProviderError {
    if let crate::providers::ProviderError::InvalidOutput { reply, billed, .. } = &mut e {
        let (usage, usage_estimated) = usage(reply);
        *billed = crate::providers::Billed {
            usage,
            usage_estimated,
            cached: false,
        };
    }
    e
}
