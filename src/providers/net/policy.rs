//! The call policy of a network model: retries, per-attempt timeout, the key redacted.
use crate::http::CallPolicy;
use crate::secret::Secret;
use crate::spec::types::ModelSpec;
use std::time::Duration;

/// Default attempts after the first one for transient failures (`retries`).
pub const DEFAULT_RETRIES: u32 = 2;
/// Default timeout of one attempt, in seconds (`timeout_secs`).
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

/// The call policy of a model: `retries` (default [`DEFAULT_RETRIES`]), per-attempt
/// `timeout_secs` (default [`DEFAULT_TIMEOUT_SECS`]), backoff 0.5 s doubling to 8 s
/// with jitter, `Retry-After` honoured up to 120 s, the key redacted.
pub fn policy(model: &ModelSpec, key: Option<&Secret>) -> CallPolicy {
    let secs = model
        .timeout_secs
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .min(86_400.0);
    CallPolicy {
        retries: model.retries.unwrap_or(DEFAULT_RETRIES),
        timeout: Duration::from_secs_f64(secs),
        secrets: key
            .map(|k| vec![k.expose().to_string()])
            .unwrap_or_default(),
        ..CallPolicy::default()
    }
}
