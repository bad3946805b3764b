//! CI gates: bounds on variant metrics and "no significant regression against base".
//!
//! - `--fail-under [VARIANT:]METRIC=VALUE`: fails when the metric (overall aggregate,
//!   see [`super::summary::Aggregate::get`]) is below VALUE for VARIANT, or for any
//!   evaluated variant when no VARIANT is given. A metric without a value (no
//!   question it applies to) fails too.
//! - `--fail-over [VARIANT:]METRIC=VALUE`: the same with "above" (for latency, cost,
//!   `failed`, `loop_bound`...).
//! - `--fail-if-worse VARIANT[=REF]`: fails when VARIANT is significantly worse than
//!   REF (default: `base` with one spec, the first arm with several specs; see
//!   [`super::arms`]) (verdict `worse`, α = 0.05) on a primary metric: `must_contain` (McNemar),
//!   `f1` and `recall_final` (bootstrap CI of the paired difference). A metric with
//!   fewer than [`MIN_PAIRED`] paired questions has the verdict `insufficient data`
//!   and does not trip the gate (its one-line reason says so).
use super::arms::BASE;
use super::metrics::METRICS;
use super::stats::MIN_PAIRED;
use super::summary::{gate_metric_names, GateOutcome, Summary, INSUFFICIENT};

/// A parsed gate.
#[derive(Clone, Debug, PartialEq)]
pub enum Gate {
    /// Metric at least (`under`) or at most (`over`) a bound.
    Bound {
        /// Text as given.
        text: String,
        /// Restrict to one variant.
        variant: Option<String>,
        /// Metric name.
        metric: String,
        /// The bound.
        value: f64,
        /// `true` for `--fail-over`.
        over: bool,
    },
    /// No significant regression of an arm against a reference arm.
    NotWorse {
        /// The arm.
        arm: String,
        /// The arm it is compared with (`base` with one spec).
        reference: String,
    },
}

/// A gate flag that cannot be used (a usage error, exit 2). `gate` is the flag and
/// its argument as given (`--fail-under f1=2`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GateError {
    /// No `=`.
    #[error("`{gate}`: expected [VARIANT:]METRIC=VALUE")]
    Syntax {
        /// Flag and argument.
        gate: String,
    },
    /// Not a metric name.
    #[error("`{gate}`: unknown metric `{metric}` (metrics: {known})")]
    UnknownMetric {
        /// Flag and argument.
        gate: String,
        /// The name given.
        metric: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A variant that is not evaluated.
    #[error("`{gate}`: variant `{variant}` is not evaluated (variants: {variants})")]
    UnknownVariant {
        /// Flag and argument.
        gate: String,
        /// The name given.
        variant: String,
        /// The evaluated variants, comma-separated.
        variants: String,
    },
    /// The bound is not a finite number.
    #[error("`{gate}`: `{value}` is not a number")]
    NotANumber {
        /// Flag and argument.
        gate: String,
        /// The text given.
        value: String,
    },
    /// A share metric bounded outside its range (a percentage, probably).
    #[error("`{gate}`: {metric} is a share from {low} to {high}, not a percentage (e.g. {metric}=0.3 for 30%)")]
    NotAShare {
        /// Flag and argument.
        gate: String,
        /// Metric name.
        metric: String,
        /// Lowest allowed bound.
        low: f64,
        /// Highest allowed bound.
        high: f64,
    },
    /// `--fail-if-worse base` (the reference itself).
    #[error("--fail-if-worse {reference}: name a variant to compare with {reference}")]
    WorseThanBase {
        /// The reference arm (`base` with one spec).
        reference: String,
    },
    /// `--fail-if-worse V` without the reference (`base`) among the variants.
    #[error("--fail-if-worse {variant}: `{reference}` is not evaluated (add it to --variants)")]
    NoBase {
        /// The variant given.
        variant: String,
        /// The reference arm.
        reference: String,
    },
    /// `--fail-if-worse V` with V not evaluated.
    #[error(
        "--fail-if-worse {variant}: variant `{variant}` is not evaluated (variants: {variants})"
    )]
    NotEvaluated {
        /// The variant given.
        variant: String,
        /// The evaluated variants, comma-separated.
        variants: String,
    },
}

/// Parses `[VARIANT:]METRIC=VALUE` (`over`: for `--fail-over`) and checks the names
/// against the evaluated variants.
///
/// # Errors
/// A [`GateError`] naming the flag and what is wrong (unknown metric or variant, not
/// a number, a share metric bounded outside its range).
pub fn parse_bound(arg: &str, over: bool, variants: &[String]) -> Result<Gate, GateError> {
    let flag = if over { "--fail-over" } else { "--fail-under" };
    let gate = || format!("{flag} {arg}");
    let (lhs, v) = arg
        .split_once('=')
        .ok_or_else(|| GateError::Syntax { gate: gate() })?;
    // An arm may hold `:` (`crag:strict`); a metric never does.
    let (variant, metric) = match lhs.rsplit_once(':') {
        Some((v, m)) => (Some(v.trim().to_string()), m.trim()),
        None => (None, lhs.trim()),
    };
    let names = gate_metric_names();
    if !names.contains(&metric) {
        return Err(GateError::UnknownMetric {
            gate: gate(),
            metric: metric.to_string(),
            known: names.join(", "),
        });
    }
    if let Some(var) = &variant {
        if !variants.contains(var) {
            return Err(GateError::UnknownVariant {
                gate: gate(),
                variant: var.clone(),
                variants: variants.join(", "),
            });
        }
    }
    let value: f64 = v
        .trim()
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite())
        .ok_or_else(|| GateError::NotANumber {
            gate: gate(),
            value: v.trim().to_string(),
        })?;
    if let Some((low, high)) = super::metrics::scale(metric).bounds() {
        if !(low..=high).contains(&value) {
            return Err(GateError::NotAShare {
                gate: gate(),
                metric: metric.to_string(),
                low,
                high,
            });
        }
    }
    Ok(Gate::Bound {
        text: gate(),
        variant,
        metric: metric.to_string(),
        value,
        over,
    })
}

/// Checks `--fail-if-worse VARIANT`: the variant and `base` must both be evaluated.
///
/// # Errors
/// [`GateError::WorseThanBase`], [`GateError::NoBase`], [`GateError::NotEvaluated`].
pub fn parse_not_worse(variant: &str, variants: &[String]) -> Result<Gate, GateError> {
    parse_not_worse_of(variant, BASE, variants)
}

/// Checks `--fail-if-worse ARM` (against `reference`: `base` with one spec, the
/// first arm with several) or `--fail-if-worse ARM=REF` (against REF): both arms
/// must be evaluated and differ.
///
/// # Errors
/// [`GateError::WorseThanBase`] (ARM is the reference), [`GateError::NoBase`] (the
/// reference is not evaluated), [`GateError::NotEvaluated`].
pub fn parse_not_worse_of(
    arg: &str,
    reference: &str,
    variants: &[String],
) -> Result<Gate, GateError> {
    let (variant, reference) = match arg.split_once('=') {
        Some((a, r)) => (a.trim(), r.trim()),
        None => (arg.trim(), reference),
    };
    if variant == reference {
        return Err(GateError::WorseThanBase {
            reference: reference.to_string(),
        });
    }
    if !variants.iter().any(|v| v == reference) {
        return Err(GateError::NoBase {
            variant: variant.to_string(),
            reference: reference.to_string(),
        });
    }
    if !variants.iter().any(|v| v == variant) {
        return Err(GateError::NotEvaluated {
            variant: variant.to_string(),
            variants: variants.join(", "),
        });
    }
    Ok(Gate::NotWorse {
        arm: variant.to_string(),
        reference: reference.to_string(),
    })
}

fn fmt(x: f64) -> String {
    format!("{x:.4}")
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string()
}

/// Evaluates gates against a summary.
pub fn check(gates: &[Gate], summary: &Summary) -> Vec<GateOutcome> {
    gates
        .iter()
        .map(|g| match g {
            Gate::Bound {
                text,
                variant,
                metric,
                value,
                over,
            } => {
                let mut failures = Vec::new();
                let mut values = Vec::new();
                for (name, res) in &summary.results {
                    if variant.as_ref().is_some_and(|v| v != name) {
                        continue;
                    }
                    match res.overall.get(metric) {
                        None => failures.push(format!("{name}: {metric} has no value")),
                        Some(x) if (*over && x > *value) || (!*over && x < *value) => failures.push(
                            format!(
                                "{name}: {metric} = {} {} {}",
                                fmt(x),
                                if *over { ">" } else { "<" },
                                fmt(*value)
                            ),
                        ),
                        Some(x) => values.push(format!("{name}: {}", fmt(x))),
                    }
                }
                GateOutcome {
                    gate: text.clone(),
                    passed: failures.is_empty(),
                    reason: if failures.is_empty() {
                        format!("{metric} ok ({})", values.join(", "))
                    } else {
                        failures.join("; ")
                    },
                }
            }
            Gate::NotWorse { arm: v, reference } => {
                let r = reference.as_str();
                let cmp = summary
                    .comparisons
                    .iter()
                    .find(|c| (c.a == r && c.b == *v) || (c.b == r && c.a == *v));
                let mut worse = Vec::new();
                let mut thin = Vec::new();
                if let Some(c) = cmp {
                    // Verdicts describe `b`; flip them when the variant is `a`.
                    let variant_is_b = c.b == *v;
                    for m in &c.metrics {
                        let primary = METRICS.iter().any(|d| d.name == m.metric && d.primary);
                        let bad = if variant_is_b { "worse" } else { "better" };
                        if primary && m.verdict == INSUFFICIENT {
                            thin.push(format!("{} (n = {})", m.metric, m.n));
                        }
                        if primary && m.verdict == bad {
                            let diff = m.diff.unwrap_or(0.0) * if variant_is_b { 1.0 } else { -1.0 };
                            let detail = match (&m.mcnemar, m.ci) {
                                (Some(t), _) => format!("McNemar p = {}", super::report_md::show_p(t.p)),
                                (None, Some([lo, hi])) if variant_is_b => {
                                    format!("95% CI [{}, {}]", fmt(lo), fmt(hi))
                                }
                                (None, Some([lo, hi])) => {
                                    format!("95% CI [{}, {}]", fmt(-hi), fmt(-lo))
                                }
                                _ => String::new(),
                            };
                            worse.push(format!("{} {} ({detail})", m.metric, fmt(diff)));
                        }
                    }
                }
                GateOutcome {
                    gate: if r == BASE {
                        format!("--fail-if-worse {v}")
                    } else {
                        format!("--fail-if-worse {v}={r}")
                    },
                    passed: worse.is_empty(),
                    reason: if worse.is_empty() && !thin.is_empty() {
                        format!(
                            "{v} vs {r}: insufficient data to judge {} (fewer than {MIN_PAIRED} paired questions); not counted as worse",
                            thin.join(", ")
                        )
                    } else if worse.is_empty() {
                        format!("{v} is not significantly worse than {r} on must_contain, f1, recall_final")
                    } else {
                        format!("{v} is significantly worse than {r}: {}", worse.join(", "))
                    },
                }
            }
        })
        .collect()
}
