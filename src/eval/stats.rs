//! Statistics for eval reports: percentiles, bootstrap confidence intervals, and
//! McNemar's test.
//!
//! - Bootstrap: the percentile method of Efron (1979, "Bootstrap methods: another
//!   look at the jackknife", Ann. Statist. 7(1)) as described in Efron & Tibshirani
//!   (1993, "An Introduction to the Bootstrap", ch. 13): resample the n values with
//!   replacement [`RESAMPLES`] times, take the mean of each resample, and report the
//!   2.5th and 97.5th percentiles of those means. The generator is a `SmallRng`
//!   seeded afresh with [`SEED`] for every interval, so a report is reproducible
//!   and the same values get the same interval whatever the metric (or the number of
//!   metrics computed before it).
//! - McNemar's test (McNemar, 1947) on paired binary outcomes, with b = pairs where
//!   only the first variant succeeds and c = pairs where only the second does. For
//!   b + c < 25 the exact version: two-sided binomial p = min(1, 2·P(X ≤ min(b, c)))
//!   with X ~ Binomial(b + c, 1/2); otherwise the chi-squared statistic with
//!   Edwards' continuity correction (|b − c| − 1)² / (b + c), 1 degree of freedom.
use rand::{Rng, SeedableRng};
use serde::Serialize;
use statrs::distribution::{Binomial, ChiSquared, ContinuousCDF, DiscreteCDF};

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 4000;
/// Seed of the bootstrap generator.
pub const SEED: u64 = 0x5eed_2026;
/// Significance level of verdicts.
pub const ALPHA: f64 = 0.05;
/// Fewest paired questions a comparison needs before it can be called significant:
/// below it the verdict is "insufficient data" (a bootstrap of one or two values has
/// a zero-width interval, and the exact McNemar test cannot reach α = 0.05 with fewer
/// than 6 discordant pairs anyway) and `--fail-if-worse` does not trip.
pub const MIN_PAIRED: usize = 10;
/// Below this many discordant pairs McNemar's test is exact.
pub const EXACT_BELOW: u64 = 25;

/// Arithmetic mean; `None` for no value.
pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The `q`-quantile (0..=1) of already sorted values, linear interpolation between
/// closest ranks (Hyndman & Fan type 7, the default of R and NumPy); `None` for no
/// value.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// The `q`-quantile of unsorted values (see [`quantile_sorted`]).
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    quantile_sorted(&v, q)
}

/// Percentile-bootstrap 95% confidence interval of the mean of `xs`, `[low, high]`;
/// `None` for no value. Deterministic for a given `seed`.
pub fn bootstrap_ci(xs: &[f64], seed: u64) -> Option<[f64; 2]> {
    if xs.is_empty() {
        return None;
    }
    let n = xs.len();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut means = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let mut s = 0.0;
        for _ in 0..n {
            s += xs[rng.random_range(0..n)];
        }
        means.push(s / n as f64);
    }
    means.sort_by(f64::total_cmp);
    Some([
        quantile_sorted(&means, ALPHA / 2.0)?,
        quantile_sorted(&means, 1.0 - ALPHA / 2.0)?,
    ])
}

/// Outcome of McNemar's test.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct McNemar {
    /// Pairs where only the first variant succeeded.
    pub b: u64,
    /// Pairs where only the second variant succeeded.
    pub c: u64,
    /// Two-sided p-value.
    pub p: f64,
    /// Whether the exact binomial version was used.
    pub exact: bool,
}

/// McNemar's test for discordant counts `b` and `c` (see the module docs).
pub fn mcnemar(b: u64, c: u64) -> McNemar {
    let n = b + c;
    if n == 0 {
        return McNemar {
            b,
            c,
            p: 1.0,
            exact: true,
        };
    }
    if n < EXACT_BELOW {
        let p = Binomial::new(0.5, n)
            .map(|d| (2.0 * d.cdf(b.min(c))).min(1.0))
            .unwrap_or(1.0);
        return McNemar {
            b,
            c,
            p: tidy_p(p),
            exact: true,
        };
    }
    let d = (b as f64 - c as f64).abs() - 1.0;
    let stat = d.max(0.0).powi(2) / n as f64;
    let p = ChiSquared::new(1.0)
        .map(|x| 1.0 - x.cdf(stat))
        .unwrap_or(1.0);
    McNemar {
        b,
        c,
        p: tidy_p(p),
        exact: false,
    }
}

/// A p-value clamped to [0, 1] and rounded to 12 significant digits (so
/// floating-point noise such as 0.5000000000000019 does not reach summary.json, while
/// a tiny p keeps its magnitude).
pub fn tidy_p(p: f64) -> f64 {
    if p.is_nan() {
        return 1.0;
    }
    let p = p.clamp(0.0, 1.0);
    format!("{p:.11e}").parse().unwrap_or(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcnemar_exact_by_hand() {
        // n = 12, P(X <= 2) = (1 + 12 + 66) / 4096 = 79/4096; p = 2 * that = 0.038574...
        let t = mcnemar(10, 2);
        assert!(t.exact);
        assert!((t.p - 158.0 / 4096.0).abs() < 1e-12, "{}", t.p);
        assert!((mcnemar(2, 10).p - t.p).abs() < 1e-15);
        // b = c: p = 1 (capped).
        assert_eq!(mcnemar(3, 3).p, 1.0);
        assert_eq!(mcnemar(0, 0).p, 1.0);
        // n = 5, all one side: 2 * (1/32) = 0.0625.
        assert!((mcnemar(5, 0).p - 0.0625).abs() < 1e-12);
        // Every p is in [0, 1] without float noise in its last digits.
        for b in 0..40 {
            for c in 0..40 {
                let p = mcnemar(b, c).p;
                assert!((0.0..=1.0).contains(&p), "{b} {c} {p}");
                assert_eq!(p, tidy_p(p), "{b} {c}");
            }
        }
        assert_eq!(tidy_p(0.500_000_000_000_001_9), 0.5);
        assert_eq!(tidy_p(1.000_000_1), 1.0);
        assert_eq!(tidy_p(-1e-17), 0.0);
        assert_eq!(tidy_p(3e-20), 3e-20);
    }

    #[test]
    fn mcnemar_chi_squared_by_hand() {
        // b = 30, c = 10: (|20| - 1)^2 / 40 = 9.025; P(chi2_1 > 9.025) = 0.002663...
        let t = mcnemar(30, 10);
        assert!(!t.exact);
        assert!((t.p - 0.002_663).abs() < 2e-6, "{}", t.p);
    }

    #[test]
    fn quantiles_interpolate() {
        let xs = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(quantile(&xs, 0.5), Some(2.5));
        assert_eq!(quantile(&xs, 0.0), Some(1.0));
        assert_eq!(quantile(&xs, 1.0), Some(4.0));
        // h = 3 * 0.95 = 2.85 -> 3 + 0.85 * 1
        assert!((quantile(&xs, 0.95).unwrap() - 3.85).abs() < 1e-12);
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn bootstrap_is_seeded_and_brackets_the_mean() {
        let xs: Vec<f64> = (0..40).map(|i| f64::from(i % 5)).collect();
        let a = bootstrap_ci(&xs, 7).unwrap();
        assert_eq!(a, bootstrap_ci(&xs, 7).unwrap());
        let m = mean(&xs).unwrap();
        assert!(a[0] < m && m < a[1], "{a:?} {m}");
        // Standard error = sd / sqrt(n) = 1.4142 / 6.32 = 0.2236: the 95% interval is
        // about +-0.44 wide around the mean.
        assert!((a[1] - a[0] - 0.88).abs() < 0.15, "{a:?}");
        assert_eq!(bootstrap_ci(&[1.0, 1.0], 1), Some([1.0, 1.0]));
        assert_eq!(bootstrap_ci(&[], 1), None);
    }
}
