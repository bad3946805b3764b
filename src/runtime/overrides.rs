//! Command-line changes to a spec (`ragloop run` and `ragloop eval`), applied after
//! the variant, in this order:
//!
//! 1. `--override PATH=VALUE`, each in the order given, with a variant's `set` rules
//!    ([`crate::spec::overlay::apply_overrides`]);
//! 2. `--model NAME=PROVIDER[:MODEL][@BASE_URL]` ([`super::apply_model_override`]);
//! 3. `--timeout SECS` and `--retries N`: the per-attempt timeout and the retries of
//!    every network call of the run, whatever the spec says: every model's
//!    `timeout_secs`/`retries` (chat models and embedding models alike) and every
//!    web-search tool's.
//!
//! The changed spec is validated again before anything runs; a fault it has is the
//! overrides' fault, so it is a usage error naming them.
use crate::spec::types::{Spec, ToolSpec};

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

/// Parses `--timeout SECS`: a number of seconds, fractions allowed (`0.5`), from
/// [`MIN_TIMEOUT_SECS`] to [`MAX_TIMEOUT_SECS`] (the bounds of a spec's `timeout_secs`).
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_timeout(text: &str) -> Result<f64, String> {
    let bad = || {
        format!(
            "`{text}` is not a timeout: give a number of seconds (e.g. 30 or 0.5) between {MIN_TIMEOUT_SECS} and {MAX_TIMEOUT_SECS}"
        )
    };
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
/// A message saying what is accepted.
pub fn parse_retries(text: &str) -> Result<u32, String> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n <= MAX_RETRIES)
        .ok_or_else(|| {
            format!("`{text}` is not a retry count: give an integer from 0 to {MAX_RETRIES}")
        })
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
            let e = parse_timeout(bad).unwrap_err();
            assert!(e.contains("between 0.001 and 86400"), "{bad}: {e}");
        }
        assert_eq!(parse_retries("0"), Ok(0));
        assert_eq!(parse_retries("10"), Ok(10));
        for bad in ["-1", "11", "1.5", "x"] {
            assert!(parse_retries(bad).is_err(), "{bad}");
        }
    }
}
