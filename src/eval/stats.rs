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
//! - Large samples ([`mean_ci`], [`paired_ci`]): an interval over more than
//!   [`BOOTSTRAP_MAX_N`] values is closed-form, linear in n (a bootstrap costs
//!   [`RESAMPLES`] × n draws: 160 million per interval at 40,000 questions). Values
//!   that are all 0 or 1: the Wilson score interval of the proportion (Wilson 1927,
//!   "Probable inference, the law of succession, and statistical inference", JASA
//!   22); their paired difference: Newcombe's hybrid score interval for paired
//!   proportions (Newcombe 1998, "Improved confidence intervals for the difference
//!   between binomial proportions based on paired data", Stat. Med. 17, method 10).
//!   Other values: the normal interval mean ± z·s/√n (s the sample standard
//!   deviation), clamped to the values' range like a percentile bootstrap is; at
//!   n > 2,000 the bootstrap distribution of a mean is this normal one (central
//!   limit theorem) to well under the CI's displayed precision. At or below the
//!   threshold the bootstrap is unchanged, so small evals keep their intervals.
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

/// Largest number of values an interval is bootstrapped over; above it
/// [`mean_ci`] and [`paired_ci`] are closed-form (see the module docs).
pub const BOOTSTRAP_MAX_N: usize = 2000;
/// The standard normal quantile of 1 − α/2 (α = 0.05).
pub const Z: f64 = 1.959_963_984_540_054;

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

/// Fewest bootstrapped values (summed over the intervals of one [`par_map`] call)
/// worth spreading over threads: below it (about 40 million draws) threads cost more
/// than they save.
pub const PAR_MIN_VALUES: usize = 10_000;

/// `f` over `items`, in order, on up to `std::thread::available_parallelism()`
/// threads when the bootstrap work (the lengths of the items of at most
/// [`BOOTSTRAP_MAX_N`] values, `len` giving an item's) reaches [`PAR_MIN_VALUES`];
/// sequentially otherwise. Every interval seeds its own generator, so the result is
/// the same whatever the threads.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    len: impl Fn(&T) -> usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let work: usize = items
        .iter()
        .map(len)
        .filter(|n| *n <= BOOTSTRAP_MAX_N)
        .sum();
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(items.len());
    if work < PAR_MIN_VALUES || threads < 2 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(t) = items.get(i) else { break };
                        out.push((i, f(t)));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

fn binary(xs: &[f64]) -> bool {
    xs.iter().all(|x| *x == 0.0 || *x == 1.0)
}

/// 95% CI of the mean of `xs`, `[low, high]` (`None` for no value): the percentile
/// bootstrap ([`bootstrap_ci`], [`SEED`]) over at most [`BOOTSTRAP_MAX_N`] values,
/// else the Wilson score interval (values all 0 or 1) or the normal interval
/// clamped to the values' range. Linear in n above the threshold.
pub fn mean_ci(xs: &[f64]) -> Option<[f64; 2]> {
    if xs.len() <= BOOTSTRAP_MAX_N {
        return bootstrap_ci(xs, SEED);
    }
    if binary(xs) {
        let k = xs.iter().filter(|x| **x == 1.0).count();
        return Some(wilson(k as u64, xs.len() as u64));
    }
    normal_ci(xs)
}

/// 95% CI of the mean paired difference `b − a` (`xa[i]`, `xb[i]` one question's
/// values): [`bootstrap_ci`] of the differences over at most [`BOOTSTRAP_MAX_N`]
/// pairs, else Newcombe's paired score interval (both sides all 0 or 1) or the
/// normal interval of the differences, clamped to their range. `None` when no pair
/// (or `xa` and `xb` differ in length).
pub fn paired_ci(xa: &[f64], xb: &[f64]) -> Option<[f64; 2]> {
    if xa.len() != xb.len() {
        return None;
    }
    let diffs: Vec<f64> = xa.iter().zip(xb).map(|(x, y)| y - x).collect();
    if diffs.len() <= BOOTSTRAP_MAX_N {
        return bootstrap_ci(&diffs, SEED);
    }
    if binary(xa) && binary(xb) {
        let (mut both, mut only_a, mut only_b, mut neither) = (0u64, 0u64, 0u64, 0u64);
        for (x, y) in xa.iter().zip(xb) {
            match (*x == 1.0, *y == 1.0) {
                (true, true) => both += 1,
                (true, false) => only_a += 1,
                (false, true) => only_b += 1,
                (false, false) => neither += 1,
            }
        }
        return Some(newcombe_paired(both, only_a, only_b, neither));
    }
    normal_ci(&diffs)
}

/// Wilson score 95% interval of a proportion `k / n` (`[0, 1]` for n = 0).
pub fn wilson(k: u64, n: u64) -> [f64; 2] {
    if n == 0 {
        return [0.0, 1.0];
    }
    let (n, p) = (n as f64, k as f64 / n as f64);
    let z2 = Z * Z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

/// Newcombe's hybrid score 95% interval (1998, method 10) of `p_b − p_a` for paired
/// binary outcomes: `both` questions a and b got right, `only_a`, `only_b`,
/// `neither`. Built from the Wilson intervals of both proportions and the phi
/// correlation of the pairs (0 when a margin is empty).
pub fn newcombe_paired(both: u64, only_a: u64, only_b: u64, neither: u64) -> [f64; 2] {
    let n = both + only_a + only_b + neither;
    if n == 0 {
        return [-1.0, 1.0];
    }
    let nf = n as f64;
    let pa = (both + only_a) as f64 / nf;
    let pb = (both + only_b) as f64 / nf;
    let [la, ua] = wilson(both + only_a, n);
    let [lb, ub] = wilson(both + only_b, n);
    let margins = [
        both + only_a,
        only_b + neither,
        both + only_b,
        only_a + neither,
    ]
    .iter()
    .map(|m| *m as f64)
    .product::<f64>();
    let phi = if margins > 0.0 {
        (both as f64 * neither as f64 - only_a as f64 * only_b as f64) / margins.sqrt()
    } else {
        0.0
    };
    let theta = pb - pa;
    let lower = ((pb - lb).powi(2) - 2.0 * phi * (pb - lb) * (ua - pa) + (ua - pa).powi(2))
        .max(0.0)
        .sqrt();
    let upper = ((ub - pb).powi(2) - 2.0 * phi * (ub - pb) * (pa - la) + (pa - la).powi(2))
        .max(0.0)
        .sqrt();
    [(theta - lower).max(-1.0), (theta + upper).min(1.0)]
}

/// Normal 95% interval of the mean, mean ± [`Z`]·s/√n with s the sample standard
/// deviation, clamped to `[min, max]` of the values; `None` for no value.
pub fn normal_ci(xs: &[f64]) -> Option<[f64; 2]> {
    let m = mean(xs)?;
    let n = xs.len() as f64;
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        });
    if xs.len() < 2 {
        return Some([m, m]);
    }
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    let half = Z * (var / n).sqrt();
    Some([(m - half).max(lo), (m + half).min(hi)])
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
    fn wilson_and_newcombe_by_hand() {
        // Wilson, k = 81, n = 263 (Newcombe 1998a's example 81/263): 0.2553 to 0.3662.
        let [lo, hi] = wilson(81, 263);
        assert!(
            (lo - 0.2553).abs() < 1e-4 && (hi - 0.3662).abs() < 1e-4,
            "{lo} {hi}"
        );
        assert_eq!(wilson(0, 10)[0], 0.0);
        // Newcombe's method 10 worked by hand (Python, from the paper's formulas) for
        // his example (a): 36 both, 12 only the first, 2 only the second, 0 neither:
        // difference 0.2, interval 0.05693 to 0.34043. Ours is b − a, so b is first.
        let [lo, hi] = newcombe_paired(36, 2, 12, 0);
        assert!(
            (lo - 0.056_93).abs() < 1e-4 && (hi - 0.340_43).abs() < 1e-4,
            "{lo} {hi}"
        );
        // 263 both, 15 / 21 discordant, 27 neither: -0.05545 to 0.01812.
        let [lo, hi] = newcombe_paired(263, 21, 15, 27);
        assert!(
            (lo + 0.055_45).abs() < 1e-4 && (hi - 0.018_12).abs() < 1e-4,
            "{lo} {hi}"
        );
    }

    #[test]
    fn par_map_keeps_order_and_values() {
        let sets: Vec<Vec<f64>> = (0..12)
            .map(|k| (0..1500).map(|i| f64::from((i * (k + 1)) % 7)).collect())
            .collect();
        let seq: Vec<_> = sets.iter().map(|xs| mean_ci(xs)).collect();
        assert_eq!(par_map(&sets, Vec::len, |xs| mean_ci(xs)), seq);
        let few: Vec<u32> = vec![1, 2, 3];
        assert_eq!(par_map(&few, |_| 1, |x| x * 2), vec![2, 4, 6]);
    }

    #[test]
    fn closed_form_only_above_the_threshold() {
        // At the threshold: the bootstrap, unchanged.
        let small: Vec<f64> = (0..BOOTSTRAP_MAX_N)
            .map(|i| f64::from(u8::from(i % 3 == 0)))
            .collect();
        assert_eq!(mean_ci(&small), bootstrap_ci(&small, SEED));
        // Above: Wilson for 0/1 values, close to the bootstrap's interval.
        let big: Vec<f64> = (0..3 * BOOTSTRAP_MAX_N)
            .map(|i| f64::from(u8::from(i % 3 == 0)))
            .collect();
        let w = mean_ci(&big).unwrap();
        let k = big.iter().filter(|x| **x == 1.0).count() as u64;
        assert_eq!(w, wilson(k, big.len() as u64));
        let b = bootstrap_ci(&big, SEED).unwrap();
        assert!(
            (w[0] - b[0]).abs() < 0.003 && (w[1] - b[1]).abs() < 0.003,
            "{w:?} {b:?}"
        );
        // Non-binary values: the normal interval, close to the bootstrap's.
        let f: Vec<f64> = (0..5000).map(|i| f64::from(i % 7) / 7.0).collect();
        let nci = mean_ci(&f).unwrap();
        let bci = bootstrap_ci(&f, SEED).unwrap();
        assert!(
            (nci[0] - bci[0]).abs() < 0.003 && (nci[1] - bci[1]).abs() < 0.003,
            "{nci:?} {bci:?}"
        );
        // Paired: Newcombe for 0/1 pairs, near the bootstrap of the differences.
        let xa: Vec<f64> = (0..5000).map(|i| f64::from(u8::from(i % 2 == 0))).collect();
        let xb: Vec<f64> = (0..5000).map(|i| f64::from(u8::from(i % 3 != 1))).collect();
        let p = paired_ci(&xa, &xb).unwrap();
        let d: Vec<f64> = xa.iter().zip(&xb).map(|(a, b)| b - a).collect();
        let pb = bootstrap_ci(&d, SEED).unwrap();
        assert!(
            (p[0] - pb[0]).abs() < 0.004 && (p[1] - pb[1]).abs() < 0.004,
            "{p:?} {pb:?}"
        );
        assert_eq!(
            paired_ci(&xa[..10], &xb[..10]),
            bootstrap_ci(&d[..10], SEED)
        );
        // A constant: a zero-width interval, like the bootstrap's.
        assert_eq!(normal_ci(&vec![0.5; 3000]), Some([0.5, 0.5]));
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
