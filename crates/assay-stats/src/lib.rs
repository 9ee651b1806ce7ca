//! The statistics that the optimizer, the simulator and the harness share: intervals for a
//! proportion and for a mean, paired comparisons with a verdict, McNemar's test, agreement
//! between two raters (Cohen's kappa, plain and quadratic-weighted; Spearman's rank
//! correlation; mean absolute error; a confusion table). Pure functions of their input; no I/O,
//! no clock, no global random state.
//!
//! * [`wilson`] / [`wilson_z`]: the Wilson score interval of `k` successes in `n` trials.
//! * [`bootstrap_mean`]: a percentile bootstrap interval of one sample's mean.
//! * [`paired_bootstrap`]: the mean of `b − a` over paired values with its percentile interval,
//!   a bootstrap p-value and a [`Verdict`] ([`PairedComparison`]).
//! * [`mcnemar`] / [`mcnemar_paired`]: McNemar's test on paired pass/fail outcomes
//!   ([`McNemarTest`], with its own [`McNemarTest::verdict`]).
//! * [`cohen_kappa`] (nominal categories) and [`quadratic_kappa`] (ordinal scores).
//! * [`spearman`] (average ranks for ties, [`average_ranks`]), [`mean_absolute_error`],
//!   [`confusion_table`].
//! * Helpers: [`normal_critical_value`], [`erfc`], [`chi2_1_sf`],
//!   [`exact_binomial_two_sided`], and the seeded generator [`SplitMix64`].
//!
//! Every function returns `None` where its statistic is undefined for the input (each says
//! when); none panics on any input. Float inputs must be finite: a NaN or an infinity gives
//! `None`. An `alpha` must lie strictly between 0 and 1.
//!
//! **Paired inputs are slices of pairs** `(a, b)` (`(human, judge)`, `(baseline, candidate)`),
//! so the two sides can never differ in length.
//!
//! # The verdict
//!
//! A paired comparison at level `α` says [`Verdict::Better`] when its `1 − α` interval of the
//! mean difference `b − a` lies entirely above 0, [`Verdict::Worse`] when it lies entirely below
//! 0, and [`Verdict::NotDistinguishable`] when it contains 0. McNemar's verdict is `Better`
//! (`Worse`) when `b` passes more (fewer) cases than `a` and `p < α`.
//!
//! # The bootstrap, exactly (for a reimplementation)
//!
//! `crates/assay-stats/tests/stats_reference.py` reimplements it in Python and gets the same
//! numbers bit for bit.
//!
//! 1. The generator is SplitMix64 ([`SplitMix64`]) whose state starts at the seed itself:
//!    each draw adds `0x9E3779B97F4A7C15` to the state (mod 2⁶⁴) and returns
//!    `z ^ (z >> 31)` where `z` is the new state passed through
//!    `z = (z ^ (z >> 30)) · 0xBF58476D1CE4E5B9` and `z = (z ^ (z >> 27)) · 0x94D049BB133111EB`
//!    (products mod 2⁶⁴).
//! 2. An index below `n` is `(draw · n) >> 64`, the high half of the 128-bit product
//!    (Lemire's multiply-shift without rejection: its bias is below `n / 2⁶⁴`).
//! 3. For each of the `B` resamples in turn, `n` indices are drawn in turn and the values at
//!    them added left to right in `f64`, starting from 0, then divided by `n`: that
//!    resample's mean.
//! 4. The `B` means are sorted ascending. With `lo = α / 2` and `hi = 1 − α / 2` (both computed
//!    in `f64`), the interval is `[means[i(lo)], means[i(hi)]]` where
//!    `i(q) = min(B − 1, round(q · (B − 1)))`, rounding halves away from zero.
//! 5. The estimate is the sample's own mean (left-to-right sum, divided by `n`); the paired
//!    bootstrap's sample is the differences `b − a`, one per pair, in input order. Its p-value
//!    is `min(1, 2 · min(#{means ≤ 0}, #{means ≥ 0}) / B)`.
//!
//! # Degenerate cases
//!
//! | function | input | result |
//! |---|---|---|
//! | [`wilson`] | `n = 0`, or `k > n` | `None` |
//! | [`bootstrap_mean`], [`paired_bootstrap`] | fewer than 2 values, `B = 0` | `None` |
//! | [`mcnemar`] | no discordant pair | `p = 1`, not distinguishable |
//! | [`cohen_kappa`], [`quadratic_kappa`] | observed agreement perfect (also when both raters used one and the same category throughout, where chance agreement is perfect too and the ratio is 0/0) | `1` (scikit-learn returns NaN for the 0/0 case) |
//! | [`cohen_kappa`], [`quadratic_kappa`] | no pairs | `None` |
//! | [`spearman`] | fewer than 2 pairs, or either side constant | `None` |
//! | [`mean_absolute_error`] | no pairs | `None` |
//!
//! ```
//! use assay_stats::{paired_bootstrap, wilson, BootstrapSettings, Verdict};
//! let ci = wilson(8, 10, 0.05).unwrap();
//! assert!(ci.low < 0.8 && 0.8 < ci.high && ci.high < 1.0);
//! let pairs = [(0.2, 0.6), (0.4, 0.7), (0.5, 0.9), (0.1, 0.5), (0.3, 0.6), (0.6, 0.8)];
//! let c = paired_bootstrap(&pairs, BootstrapSettings { seed: 7, ..Default::default() }).unwrap();
//! assert_eq!(c.verdict, Verdict::Better);
//! assert!((c.difference.estimate - 0.3333333333333333).abs() < 1e-12);
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The default significance level: 95% intervals.
pub const DEFAULT_ALPHA: f64 = 0.05;
/// The default number of bootstrap resamples.
pub const DEFAULT_RESAMPLES: usize = 10_000;
/// From this many discordant pairs on, [`mcnemar`] uses the chi-square approximation instead of
/// the exact binomial test.
pub const MCNEMAR_EXACT_BELOW: usize = 25;

/// How an [`Interval`] was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntervalMethod {
    /// The Wilson score interval of a proportion ([`wilson`]).
    Wilson,
    /// The percentile bootstrap of one sample's mean ([`bootstrap_mean`]).
    BootstrapPercentile,
    /// The percentile bootstrap of the mean paired difference ([`paired_bootstrap`]).
    PairedBootstrapPercentile,
    /// The percentile bootstrap of the difference of two independent samples' means
    /// ([`bootstrap_difference`]).
    TwoSampleBootstrapPercentile,
    /// The percentile bootstrap of a mean over fixed groups, resampling within each group
    /// ([`stratified_bootstrap_mean`]).
    StratifiedBootstrapPercentile,
    /// Student's t interval of a mean ([`t_interval`]).
    StudentT,
    /// Welch's t interval of the difference of two means ([`welch_difference`]).
    Welch,
    /// The studentised bootstrap of the mean paired difference ([`paired_bootstrap_t`]).
    PairedBootstrapT,
    /// Newcombe's hybrid score interval of a difference of two proportions, from their Wilson
    /// intervals ([`proportion_difference`]).
    Newcombe,
}

/// A point estimate with its confidence interval, as reports carry it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// How it was computed.
    pub method: IntervalMethod,
    /// The point estimate (a proportion, a mean, a mean difference).
    pub estimate: f64,
    /// The interval's low end.
    pub low: f64,
    /// The interval's high end.
    pub high: f64,
    /// The confidence level, `1 − α` (0.95 by default).
    pub level: f64,
    /// Trials, values or pairs it was computed from.
    pub n: usize,
    /// Bootstrap resamples (bootstrap methods only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resamples: Option<usize>,
    /// The bootstrap's seed (bootstrap methods only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Interval {
    /// Whether `x` lies in the closed interval.
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }

    /// `high − low`.
    pub fn width(&self) -> f64 {
        self.high - self.low
    }
}

/// Whether `b` differs from `a` in a paired comparison (see the module's "The verdict").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// `b` is better than `a`: the interval of `b − a` lies above 0.
    Better,
    /// `b` is worse than `a`: the interval of `b − a` lies below 0.
    Worse,
    /// The data cannot tell them apart: the interval contains 0.
    NotDistinguishable,
}

impl Verdict {
    /// The verdict on a difference `b − a` whose interval is `[low, high]`.
    pub fn of_interval(low: f64, high: f64) -> Verdict {
        if low > 0.0 {
            Verdict::Better
        } else if high < 0.0 {
            Verdict::Worse
        } else {
            Verdict::NotDistinguishable
        }
    }
}

/// A paired comparison of `b` against `a` ([`paired_bootstrap`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedComparison {
    /// The mean of `b − a` and its `1 − alpha` percentile interval.
    pub difference: Interval,
    /// The significance level the verdict is at.
    pub alpha: f64,
    /// The two-sided bootstrap p-value: twice the smaller share of resampled means at or below
    /// 0 and at or above 0, at most 1.
    pub p_value: f64,
    /// Better, worse or not distinguishable at `alpha`.
    pub verdict: Verdict,
}

/// How a bootstrap resamples: how many times, from which seed, at which level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapSettings {
    /// Resamples (`B`); [`DEFAULT_RESAMPLES`] by default.
    pub resamples: usize,
    /// The generator's seed; 0 by default.
    pub seed: u64,
    /// The interval is `1 − alpha`; [`DEFAULT_ALPHA`] by default.
    pub alpha: f64,
}

impl Default for BootstrapSettings {
    fn default() -> Self {
        BootstrapSettings {
            resamples: DEFAULT_RESAMPLES,
            seed: 0,
            alpha: DEFAULT_ALPHA,
        }
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a small seeded generator whose stream is the same
/// on every platform and in every version of assay. The algorithm is spelled out in the module
/// docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose state starts at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index in `0..n` (0 when `n` is 0): the high 64 bits of `next_u64() · n`.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

fn valid_alpha(alpha: f64) -> bool {
    alpha > 0.0 && alpha < 1.0
}

fn all_finite(values: impl IntoIterator<Item = f64>) -> bool {
    values.into_iter().all(f64::is_finite)
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The `B` resampled means, sorted ascending (steps 1–4 of the module docs).
fn resampled_means(values: &[f64], resamples: usize, seed: u64) -> Vec<f64> {
    let n = values.len();
    let mut rng = SplitMix64::new(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    means
}

/// The percentile interval of sorted resampled means.
fn percentile_interval(sorted: &[f64], alpha: f64) -> (f64, f64) {
    let last = sorted.len() - 1;
    let at = |q: f64| sorted[((q * last as f64).round() as usize).min(last)];
    (at(alpha / 2.0), at(1.0 - alpha / 2.0))
}

fn bootstrap_ok(n: usize, settings: &BootstrapSettings) -> bool {
    n >= 2 && settings.resamples > 0 && valid_alpha(settings.alpha)
}

/// The percentile bootstrap interval of the mean of `values` (for example the overall agreement
/// between a judge and humans, as the mean of 1-or-0 per case). `None` with fewer than two
/// values, no resamples, an `alpha` outside (0, 1) or a non-finite value.
pub fn bootstrap_mean(values: &[f64], settings: BootstrapSettings) -> Option<Interval> {
    if !bootstrap_ok(values.len(), &settings) || !all_finite(values.iter().copied()) {
        return None;
    }
    let means = resampled_means(values, settings.resamples, settings.seed);
    let (low, high) = percentile_interval(&means, settings.alpha);
    Some(Interval {
        method: IntervalMethod::BootstrapPercentile,
        estimate: mean(values),
        low,
        high,
        level: 1.0 - settings.alpha,
        n: values.len(),
        resamples: Some(settings.resamples),
        seed: Some(settings.seed),
    })
}

/// The paired bootstrap of `b` against `a`: the differences `b − a` (one per pair) resampled
/// with replacement, their mean with its `1 − alpha` percentile interval, the bootstrap
/// p-value and the [`Verdict`]. `None` with fewer than two pairs, no resamples, an `alpha`
/// outside (0, 1) or a non-finite value.
pub fn paired_bootstrap(
    pairs: &[(f64, f64)],
    settings: BootstrapSettings,
) -> Option<PairedComparison> {
    if !bootstrap_ok(pairs.len(), &settings) {
        return None;
    }
    let differences: Vec<f64> = pairs.iter().map(|&(a, b)| b - a).collect();
    if !all_finite(differences.iter().copied()) {
        return None;
    }
    let b = settings.resamples;
    let means = resampled_means(&differences, b, settings.seed);
    let (low, high) = percentile_interval(&means, settings.alpha);
    let at_or_below = means.iter().filter(|m| **m <= 0.0).count();
    let at_or_above = means.iter().filter(|m| **m >= 0.0).count();
    let p_value = (2.0 * at_or_below.min(at_or_above) as f64 / b as f64).min(1.0);
    Some(PairedComparison {
        difference: Interval {
            method: IntervalMethod::PairedBootstrapPercentile,
            estimate: mean(&differences),
            low,
            high,
            level: 1.0 - settings.alpha,
            n: pairs.len(),
            resamples: Some(b),
            seed: Some(settings.seed),
        },
        alpha: settings.alpha,
        p_value,
        verdict: Verdict::of_interval(low, high),
    })
}

/// The bootstrap of `mean(b) − mean(a)` for two independent samples (two models' repeats of a
/// scenario, say): each resample draws `a` then `b` with replacement, each from its own values,
/// from one [`SplitMix64`] stream; the difference's percentile interval, p-value and verdict
/// follow [`paired_bootstrap`]'s rules. `None` when either side has fewer than two values, or
/// as [`paired_bootstrap`].
pub fn bootstrap_difference(
    a: &[f64],
    b: &[f64],
    settings: BootstrapSettings,
) -> Option<PairedComparison> {
    if !bootstrap_ok(a.len(), &settings)
        || !bootstrap_ok(b.len(), &settings)
        || !all_finite(a.iter().chain(b).copied())
    {
        return None;
    }
    let mut rng = SplitMix64::new(settings.seed);
    let mut draw = |values: &[f64]| {
        let n = values.len();
        (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64
    };
    let resamples = settings.resamples;
    let mut differences: Vec<f64> = (0..resamples)
        .map(|_| {
            let x = draw(a);
            draw(b) - x
        })
        .collect();
    differences.sort_by(f64::total_cmp);
    let (low, high) = percentile_interval(&differences, settings.alpha);
    let at_or_below = differences.iter().filter(|m| **m <= 0.0).count();
    let at_or_above = differences.iter().filter(|m| **m >= 0.0).count();
    let p_value = (2.0 * at_or_below.min(at_or_above) as f64 / resamples as f64).min(1.0);
    Some(PairedComparison {
        difference: Interval {
            method: IntervalMethod::TwoSampleBootstrapPercentile,
            estimate: mean(b) - mean(a),
            low,
            high,
            level: 1.0 - settings.alpha,
            n: a.len() + b.len(),
            resamples: Some(resamples),
            seed: Some(settings.seed),
        },
        alpha: settings.alpha,
        p_value,
        verdict: Verdict::of_interval(low, high),
    })
}

/// The percentile bootstrap of the mean of all values of fixed groups (the runs of a suite's
/// scenarios): each resample draws, within every group, as many values as it has, with
/// replacement, so the interval holds the error of measuring these groups (the judge's noise,
/// the model's variation) and not the spread between them. Each group's values are first
/// spread by √(k/(k−1)) around the group's mean (k its size), so the resampled variance is
/// unbiased. `None` when a group has fewer than two values, as [`bootstrap_mean`] otherwise.
pub fn stratified_bootstrap_mean(
    groups: &[&[f64]],
    settings: BootstrapSettings,
) -> Option<Interval> {
    let n: usize = groups.iter().map(|g| g.len()).sum();
    if groups.is_empty()
        || groups.iter().any(|g| g.len() < 2)
        || !bootstrap_ok(n, &settings)
        || !all_finite(groups.iter().flat_map(|g| g.iter().copied()))
    {
        return None;
    }
    // Each group's values spread by √(k/(k−1)) around its mean, so that a resample's variance
    // is unbiased for the group's (the plain bootstrap shrinks it by (k−1)/k, which a group of
    // five repeats would pay with an interval 10 % too narrow).
    let spread: Vec<Vec<f64>> = groups
        .iter()
        .map(|g| {
            let k = g.len() as f64;
            let m = mean(g);
            let f = (k / (k - 1.0)).sqrt();
            g.iter().map(|v| m + (v - m) * f).collect()
        })
        .collect();
    let mut rng = SplitMix64::new(settings.seed);
    let mut means: Vec<f64> = (0..settings.resamples)
        .map(|_| {
            let mut total = 0.0;
            for g in &spread {
                let k = g.len();
                for _ in 0..k {
                    total += g[rng.below(k)];
                }
            }
            total / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let (low, high) = percentile_interval(&means, settings.alpha);
    let all: Vec<f64> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    Some(Interval {
        method: IntervalMethod::StratifiedBootstrapPercentile,
        estimate: mean(&all),
        low,
        high,
        level: 1.0 - settings.alpha,
        n,
        resamples: Some(settings.resamples),
        seed: Some(settings.seed),
    })
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine coefficients: about 15 digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let mut a = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularised incomplete beta function I_x(a, b) (Lentz's continued fraction).
#[allow(clippy::many_single_char_names)] // the textbook's names
fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(1.0 - x, b, a);
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp() / a;
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..400 {
        let m = f64::from(m);
        let numerator = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        for num in [
            numerator,
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            if d.abs() < tiny {
                d = tiny;
            }
            c = 1.0 + num / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-16 {
            break;
        }
    }
    front * f
}

/// The Student t distribution's CDF with `df` degrees of freedom (df > 0, not necessarily a
/// whole number: Welch's test uses fractional ones).
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * incomplete_beta(x, df / 2.0, 0.5);
    if t >= 0.0 { 1.0 - tail } else { tail }
}

/// The `p` quantile of Student's t with `df` degrees of freedom (scipy's `t.ppf`), by
/// bisection on [`t_cdf`]. `None` unless 0 < p < 1 and df > 0.
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0 && df > 0.0 && df.is_finite()) {
        return None;
    }
    let (mut lo, mut hi) = (-1e3, 1e3);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(0.5 * (lo + hi))
}

fn variance(values: &[f64]) -> f64 {
    let m = mean(values);
    values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (values.len() - 1) as f64
}

/// Student's t interval of the mean of `values` (scipy's `t.interval(1 − alpha, n − 1,
/// loc=mean, scale=sem)`): better than a bootstrap for a few values, such as a scenario's
/// repeats, when their spread is roughly normal. `None` with fewer than two values, an
/// `alpha` outside (0, 1) or a non-finite value.
pub fn t_interval(values: &[f64], alpha: f64) -> Option<Interval> {
    let n = values.len();
    if n < 2 || !valid_alpha(alpha) || !all_finite(values.iter().copied()) {
        return None;
    }
    let m = mean(values);
    let half =
        t_quantile(1.0 - alpha / 2.0, (n - 1) as f64)? * (variance(values) / n as f64).sqrt();
    Some(Interval {
        method: IntervalMethod::StudentT,
        estimate: m,
        low: m - half,
        high: m + half,
        level: 1.0 - alpha,
        n,
        resamples: None,
        seed: None,
    })
}

/// Welch's t test of `mean(b) − mean(a)` for two independent samples with unequal variances
/// (scipy's `ttest_ind(b, a, equal_var=False)`): the difference, its `1 − alpha` interval with
/// the Welch–Satterthwaite degrees of freedom, the two-sided p-value and the verdict. Two
/// samples that are both constant and equal give a zero interval (not distinguishable).
/// `None` when a side has fewer than two values, as [`t_interval`] otherwise.
pub fn welch_difference(a: &[f64], b: &[f64], alpha: f64) -> Option<PairedComparison> {
    if a.len() < 2 || b.len() < 2 || !valid_alpha(alpha) || !all_finite(a.iter().chain(b).copied())
    {
        return None;
    }
    let (va, vb) = (variance(a) / a.len() as f64, variance(b) / b.len() as f64);
    let estimate = mean(b) - mean(a);
    let se = (va + vb).sqrt();
    let (low, high, p_value) = if se == 0.0 {
        (estimate, estimate, if estimate == 0.0 { 1.0 } else { 0.0 })
    } else {
        let df = (va + vb).powi(2)
            / (va.powi(2) / (a.len() - 1) as f64 + vb.powi(2) / (b.len() - 1) as f64);
        let q = t_quantile(1.0 - alpha / 2.0, df)?;
        let t = estimate / se;
        (
            estimate - q * se,
            estimate + q * se,
            (2.0 * t_cdf(-t.abs(), df)).min(1.0),
        )
    };
    Some(PairedComparison {
        difference: Interval {
            method: IntervalMethod::Welch,
            estimate,
            low,
            high,
            level: 1.0 - alpha,
            n: a.len() + b.len(),
            resamples: None,
            seed: None,
        },
        alpha,
        p_value,
        verdict: if p_value < alpha {
            Verdict::of_interval(low, high)
        } else {
            Verdict::NotDistinguishable
        },
    })
}

fn ln_choose(n: usize, k: usize) -> f64 {
    ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0)
}

/// Fisher's exact test of two proportions, two-sided (scipy's `fisher_exact`): the probability,
/// with the table's margins fixed, of a table no more likely than the one seen. `None` when a
/// count exceeds its trials or a side has no trial.
pub fn fisher_exact(
    a_successes: usize,
    a_trials: usize,
    b_successes: usize,
    b_trials: usize,
) -> Option<f64> {
    if a_trials == 0 || b_trials == 0 || a_successes > a_trials || b_successes > b_trials {
        return None;
    }
    let total = a_trials + b_trials;
    let successes = a_successes + b_successes;
    let ln_p = |x: usize| {
        ln_choose(successes, x) + ln_choose(total - successes, a_trials - x)
            - ln_choose(total, a_trials)
    };
    let lo = successes.saturating_sub(b_trials);
    let hi = successes.min(a_trials);
    let observed = ln_p(a_successes);
    let p: f64 = (lo..=hi)
        .map(ln_p)
        .filter(|l| *l <= observed + 1e-7)
        .map(f64::exp)
        .sum();
    Some(p.min(1.0))
}

/// The difference of two proportions, `b − a` (a pass rate before and after): Newcombe's
/// hybrid score interval from the two Wilson intervals, and the verdict from Fisher's exact
/// test (better or worse only when its p-value is below `alpha`). For a few runs a side, where
/// a t test on 0s and 1s would call three passes against three failures certain.
pub fn proportion_difference(
    a_successes: usize,
    a_trials: usize,
    b_successes: usize,
    b_trials: usize,
    alpha: f64,
) -> Option<PairedComparison> {
    let wa = wilson(a_successes, a_trials, alpha)?;
    let wb = wilson(b_successes, b_trials, alpha)?;
    let p_value = fisher_exact(a_successes, a_trials, b_successes, b_trials)?;
    let (pa, pb) = (wa.estimate, wb.estimate);
    let d = pb - pa;
    let low = d - ((pb - wb.low).powi(2) + (wa.high - pa).powi(2)).sqrt();
    let high = d + ((wb.high - pb).powi(2) + (pa - wa.low).powi(2)).sqrt();
    Some(PairedComparison {
        difference: Interval {
            method: IntervalMethod::Newcombe,
            estimate: d,
            low,
            high,
            level: 1.0 - alpha,
            n: a_trials + b_trials,
            resamples: None,
            seed: None,
        },
        alpha,
        p_value,
        verdict: if p_value < alpha {
            if d > 0.0 {
                Verdict::Better
            } else {
                Verdict::Worse
            }
        } else {
            Verdict::NotDistinguishable
        },
    })
}

/// Holm's step-down correction: which of `p_values` are significant when all of them are
/// tested at family-wise level `alpha` (sort ascending; the i-th smallest, from 0, is
/// significant while it is below `alpha / (m − i)`).
pub fn holm(p_values: &[f64], alpha: f64) -> Vec<bool> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p_values[i].total_cmp(&p_values[j]));
    let mut significant = vec![false; m];
    for (rank, &i) in order.iter().enumerate() {
        if p_values[i] < alpha / (m - rank) as f64 {
            significant[i] = true;
        } else {
            break;
        }
    }
    significant
}

/// The studentised paired bootstrap (bootstrap-t) of `b` against `a`, for few pairs (the
/// scenarios of a suite): each resample of the differences gives `t* = (mean* − mean) / se*`;
/// the interval is `mean − t*₁₋α/₂ · se` to `mean − t*α/₂ · se`, the p-value the share of
/// resamples with `|t*|` at least the observed `|mean / se|`. Unlike the percentile bootstrap,
/// whose interval is too narrow for ten pairs (equal models called different about 8 % of the
/// time at α = 5 %), it keeps its level for small samples. Resamples whose differences are all
/// equal (no spread) are left out. `None` as [`paired_bootstrap`], or when every difference is
/// the same (then there is nothing to resample: see [`paired_bootstrap`]).
pub fn paired_bootstrap_t(
    pairs: &[(f64, f64)],
    settings: BootstrapSettings,
) -> Option<PairedComparison> {
    if !bootstrap_ok(pairs.len(), &settings) {
        return None;
    }
    let d: Vec<f64> = pairs.iter().map(|&(a, b)| b - a).collect();
    if !all_finite(d.iter().copied()) {
        return None;
    }
    let n = d.len();
    let m = mean(&d);
    let se = (variance(&d) / n as f64).sqrt();
    if se == 0.0 {
        return paired_bootstrap(pairs, settings);
    }
    let mut rng = SplitMix64::new(settings.seed);
    let mut ts: Vec<f64> = Vec::with_capacity(settings.resamples);
    let mut sample = vec![0.0; n];
    for _ in 0..settings.resamples {
        for x in &mut sample {
            *x = d[rng.below(n)];
        }
        let s = (variance(&sample) / n as f64).sqrt();
        if s > 0.0 {
            ts.push((mean(&sample) - m) / s);
        }
    }
    if ts.is_empty() {
        return None;
    }
    let observed = (m / se).abs();
    let p_value = ts.iter().filter(|t| t.abs() >= observed).count() as f64 / ts.len() as f64;
    ts.sort_by(f64::total_cmp);
    let (t_low, t_high) = percentile_interval(&ts, settings.alpha);
    let (low, high) = (m - t_high * se, m - t_low * se);
    Some(PairedComparison {
        difference: Interval {
            method: IntervalMethod::PairedBootstrapT,
            estimate: m,
            low,
            high,
            level: 1.0 - settings.alpha,
            n,
            resamples: Some(settings.resamples),
            seed: Some(settings.seed),
        },
        alpha: settings.alpha,
        p_value,
        verdict: Verdict::of_interval(low, high),
    })
}

/// The Wilson score interval of `successes` in `trials` at level `1 − alpha`, as statsmodels'
/// `proportion_confint(method="wilson")`; its ends are clipped to [0, 1] (and are exactly 0
/// with no success, exactly 1 with no failure). `None` when `trials` is 0, `successes >
/// trials` or `alpha` is outside (0, 1).
pub fn wilson(successes: usize, trials: usize, alpha: f64) -> Option<Interval> {
    let z = normal_critical_value(alpha)?;
    wilson_interval(successes, trials, z, 1.0 - alpha)
}

/// [`wilson`] with the critical value `z` given instead of `alpha` (1.96 for about 95%); the
/// interval's `level` is `erf(z / √2)`. `None` also when `z` is not positive and finite.
pub fn wilson_z(successes: usize, trials: usize, z: f64) -> Option<Interval> {
    if !(z.is_finite() && z > 0.0) {
        return None;
    }
    wilson_interval(
        successes,
        trials,
        z,
        1.0 - erfc(z / std::f64::consts::SQRT_2),
    )
}

fn wilson_interval(successes: usize, trials: usize, z: f64, level: f64) -> Option<Interval> {
    if trials == 0 || successes > trials {
        return None;
    }
    let n = trials as f64;
    let p = successes as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    let low = if successes == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let high = if successes == trials {
        1.0
    } else {
        (center + half).min(1.0)
    };
    Some(Interval {
        method: IntervalMethod::Wilson,
        estimate: p,
        low,
        high,
        level,
        n: trials,
        resamples: None,
        seed: None,
    })
}

/// How a [`McNemarTest`]'s p-value was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McNemarMethod {
    /// Exact binomial test on the discordant pairs.
    Exact,
    /// Chi-square with one degree of freedom and continuity correction.
    Chi2,
}

/// McNemar's test on paired pass/fail outcomes of `a` and `b` ([`mcnemar`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct McNemarTest {
    /// Pairs where only `a` passed.
    pub a_only: usize,
    /// Pairs where only `b` passed.
    pub b_only: usize,
    /// The test statistic: `min(a_only, b_only)` for the exact test, the corrected chi-square
    /// for the approximation (as statsmodels reports them).
    pub statistic: f64,
    /// The two-sided p-value.
    pub p_value: f64,
    /// Exact or chi-square.
    pub method: McNemarMethod,
}

impl McNemarTest {
    /// The discordant pairs, `a_only + b_only`.
    pub fn discordant(&self) -> usize {
        self.a_only + self.b_only
    }

    /// [`Verdict::Better`] when `b` passes more cases and `p < alpha`, [`Verdict::Worse`] when
    /// it passes fewer and `p < alpha`, else [`Verdict::NotDistinguishable`].
    pub fn verdict(&self, alpha: f64) -> Verdict {
        if self.p_value >= alpha || self.a_only == self.b_only {
            Verdict::NotDistinguishable
        } else if self.b_only > self.a_only {
            Verdict::Better
        } else {
            Verdict::Worse
        }
    }
}

/// McNemar's test for `a_only` and `b_only` discordant pairs (the pairs where only one side
/// passed; concordant pairs carry no information). Below [`MCNEMAR_EXACT_BELOW`] discordant
/// pairs: the exact two-sided binomial test, `p = min(1, 2·P[X ≤ min(a_only, b_only)])` with
/// `X ~ Bin(a_only + b_only, ½)`, as statsmodels' `mcnemar(exact=True)`. From there on: the
/// chi-square statistic with continuity correction, `max(0, |a_only − b_only| − 1)² /
/// (a_only + b_only)`, with one degree of freedom, as `mcnemar(exact=False, correction=True)`
/// except when `a_only = b_only`, where statsmodels' statistic is `1 / (a_only + b_only)` and
/// this one is 0 (p = 1: equal counts are no evidence either way).
pub fn mcnemar(a_only: usize, b_only: usize) -> McNemarTest {
    let n = a_only + b_only;
    let (statistic, p_value, method) = if n < MCNEMAR_EXACT_BELOW {
        let k = a_only.min(b_only);
        (
            k as f64,
            exact_binomial_two_sided(k, n),
            McNemarMethod::Exact,
        )
    } else {
        let diff = (a_only as f64 - b_only as f64).abs() - 1.0;
        let stat = diff.max(0.0).powi(2) / n as f64;
        (stat, chi2_1_sf(stat), McNemarMethod::Chi2)
    };
    McNemarTest {
        a_only,
        b_only,
        statistic,
        p_value,
        method,
    }
}

/// [`mcnemar`] on paired outcomes `(a passed, b passed)`.
pub fn mcnemar_paired(pairs: &[(bool, bool)]) -> McNemarTest {
    let a_only = pairs.iter().filter(|&&(a, b)| a && !b).count();
    let b_only = pairs.iter().filter(|&&(a, b)| !a && b).count();
    mcnemar(a_only, b_only)
}

/// `min(1, 2·P[X ≤ k])` for `X ~ Bin(n, ½)`: the exact two-sided binomial test of `k`
/// successes against one half (for `k ≤ n / 2`); 1 when `n` is 0.
pub fn exact_binomial_two_sided(k: usize, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    // P[X = i] = C(n, i) / 2^n, summed in log space so large n does not overflow.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_c = 0.0; // ln C(n, 0)
    let mut total = 0.0;
    for i in 0..=k.min(n) {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        total += (ln_c + ln_half_n).exp();
    }
    (2.0 * total).min(1.0)
}

/// The survival function of the chi-square distribution with one degree of freedom,
/// `P[χ²₁ > x] = erfc(√(x/2))`; 1 for `x ≤ 0` (and for NaN).
pub fn chi2_1_sf(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return 1.0;
    }
    gamma_q_half(x / 2.0)
}

/// `ln Γ(½) = ln √π`.
const LN_SQRT_PI: f64 = 0.572_364_942_924_700_1;

/// The regularized upper incomplete gamma function `Q(½, x)` for `x > 0` (0 at infinity), which is
/// `erfc(√x)`: the series for `P` below `x = 1.5`, Lentz's continued fraction for `Q` above
/// (both to double precision).
fn gamma_q_half(x: f64) -> f64 {
    const A: f64 = 0.5;
    const EPS: f64 = 1e-17;
    const TINY: f64 = 1e-300;
    if x == f64::INFINITY {
        return 0.0;
    }
    let prefactor = (-x + A * x.ln() - LN_SQRT_PI).exp();
    if x < A + 1.0 {
        let (mut ap, mut term) = (A, 1.0 / A);
        let mut sum = term;
        for _ in 0..500 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * EPS {
                break;
            }
        }
        1.0 - sum * prefactor
    } else {
        // Lentz's method for Q = prefactor · 1/(x + 1 − a − 1·(1 − a)/(x + 3 − a − …)).
        let mut denominator = x + 1.0 - A;
        let mut upper = 1.0 / TINY;
        let mut lower = 1.0 / denominator;
        let mut fraction = lower;
        for i in 1..500 {
            let numerator = -f64::from(i) * (f64::from(i) - A);
            denominator += 2.0;
            lower = numerator * lower + denominator;
            if lower.abs() < TINY {
                lower = TINY;
            }
            upper = denominator + numerator / upper;
            if upper.abs() < TINY {
                upper = TINY;
            }
            lower = 1.0 / lower;
            let delta = lower * upper;
            fraction *= delta;
            if (delta - 1.0).abs() < EPS {
                break;
            }
        }
        prefactor * fraction
    }
}

/// The complementary error function to double precision (through the incomplete gamma
/// function, `erfc(x) = Q(½, x²)` for `x ≥ 0` and `2 − erfc(−x)` below 0); NaN for NaN.
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let upper = if x == 0.0 { 1.0 } else { gamma_q_half(x * x) };
    if x >= 0.0 { upper } else { 2.0 - upper }
}

/// The two-sided critical value `z₁₋α/₂` of the standard normal distribution (1.959963984540054
/// for `alpha` = 0.05), as `scipy.stats.norm.isf(alpha / 2)`: the root of
/// `erfc(z / √2) = alpha`, found by Newton's method kept inside a bisection bracket. `None`
/// when `alpha` is outside (0, 1).
pub fn normal_critical_value(alpha: f64) -> Option<f64> {
    if !valid_alpha(alpha) {
        return None;
    }
    let slope = (2.0 / std::f64::consts::PI).sqrt(); // −d/dz erfc(z/√2) at z = 0
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    let mut z = 1.0f64;
    for _ in 0..200 {
        let f = erfc(z / std::f64::consts::SQRT_2) - alpha;
        if f > 0.0 {
            lo = z;
        } else {
            hi = z;
        }
        let derivative = slope * (-z * z / 2.0).exp();
        let mut next = z + f / derivative;
        if !(next > lo && next < hi) {
            next = f64::midpoint(lo, hi);
        }
        let done = (next - z).abs() <= 4.0 * f64::EPSILON * z.max(1.0);
        z = next;
        if done || hi - lo <= f64::EPSILON * hi {
            break;
        }
    }
    Some(z)
}

/// Cohen's kappa for two raters' nominal labels, `(rater 1, rater 2)` per item:
/// `κ = 1 − (1 − pₒ) / (1 − pₑ)`, `pₒ` the share of items they label alike, `pₑ` the agreement
/// expected by chance from their label frequencies (as scikit-learn's `cohen_kappa_score`).
/// 1 when every item is labelled alike (including when both used one single label, where
/// scikit-learn's 0/0 gives NaN); `None` with no pairs.
pub fn cohen_kappa<T: Ord>(pairs: &[(T, T)]) -> Option<f64> {
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let agree = pairs.iter().filter(|(x, y)| x == y).count();
    if agree == pairs.len() {
        return Some(1.0);
    }
    let mut margins: BTreeMap<&T, (usize, usize)> = BTreeMap::new();
    for (x, y) in pairs {
        margins.entry(x).or_default().0 += 1;
        margins.entry(y).or_default().1 += 1;
    }
    let chance: f64 = margins
        .values()
        .map(|&(r, c)| r as f64 * c as f64 / n)
        .sum();
    // Disagreement observed over disagreement expected, both in counts.
    Some(1.0 - (n - agree as f64) / (n - chance))
}

/// Cohen's kappa with quadratic weights for two raters' ordinal scores, `(rater 1, rater 2)` per
/// item: `κ = 1 − Σ(x − y)² / Σ over all item pairs (i, j) of (xᵢ − yⱼ)² / n`, the weight of a
/// disagreement being the square of its distance on the score scale. Equivalently `1 − D / E`
/// with `D` the mean squared difference and `E = var(x) + var(y) + (mean(x) − mean(y))²`
/// (population variances), computed that way in O(n). For integer scores this is
/// scikit-learn's `cohen_kappa_score(weights="quadratic")` with `labels` the whole run of
/// integers between the lowest and highest score (scikit-learn weighs by the distance between
/// positions in its label list, so without `labels` it differs when a score in between is
/// unused). 1 when every item is scored alike; `None` with no pairs or a non-finite score.
pub fn quadratic_kappa(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.is_empty() || !all_finite(pairs.iter().flat_map(|&(x, y)| [x, y])) {
        return None;
    }
    let n = pairs.len() as f64;
    let observed = pairs.iter().map(|(x, y)| (x - y).powi(2)).sum::<f64>() / n;
    if observed == 0.0 {
        return Some(1.0);
    }
    let mx = pairs.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pairs.iter().map(|p| p.1).sum::<f64>() / n;
    let vx = pairs.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>() / n;
    let vy = pairs.iter().map(|p| (p.1 - my).powi(2)).sum::<f64>() / n;
    let expected = vx + vy + (mx - my).powi(2);
    (expected > 0.0).then(|| 1.0 - observed / expected)
}

/// The ranks of `values` (1 for the smallest), ties given the average of the ranks they span,
/// as `scipy.stats.rankdata(method="average")`. NaNs sort last.
pub fn average_ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Positions start..end hold ranks start+1 ..= end; their mean:
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}

/// Spearman's rank correlation of `(x, y)` pairs: the Pearson correlation of their average
/// ranks ([`average_ranks`]), as `scipy.stats.spearmanr`. `None` with fewer than two pairs,
/// a non-finite value, or either side constant (the correlation is undefined).
pub fn spearman(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 2 || !all_finite(pairs.iter().flat_map(|&(x, y)| [x, y])) {
        return None;
    }
    let rx = average_ranks(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
    let ry = average_ranks(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    let (mx, my) = (mean(&rx), mean(&ry));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in rx.iter().zip(&ry) {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx).powi(2);
        syy += (y - my).powi(2);
    }
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    Some((sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

/// The mean of `|x − y|` over the pairs; `None` with no pairs or a non-finite value.
pub fn mean_absolute_error(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.is_empty() || !all_finite(pairs.iter().flat_map(|&(x, y)| [x, y])) {
        return None;
    }
    Some(pairs.iter().map(|(x, y)| (x - y).abs()).sum::<f64>() / pairs.len() as f64)
}

/// Counts of `(row label, column label)` pairs over given categories ([`confusion_table`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfusionTable<T> {
    /// The row categories (the first of each pair: the human label, by convention).
    pub rows: Vec<T>,
    /// The column categories (the second of each pair: the judge's label).
    pub columns: Vec<T>,
    /// `counts[r][c]`: pairs whose first label is `rows[r]` and second is `columns[c]`.
    pub counts: Vec<Vec<usize>>,
    /// Pairs left out because a label is in neither list.
    pub unlisted: usize,
}

impl<T> ConfusionTable<T> {
    /// The pairs counted in the table (not the unlisted ones).
    pub fn total(&self) -> usize {
        self.counts.iter().flatten().sum()
    }
}

/// The confusion table of `pairs` over the given categories: rows are the first label (the
/// human's), columns the second (the judge's), in the order given. A pair whose row label is
/// not in `rows` or whose column label is not in `columns` is counted in
/// [`ConfusionTable::unlisted`], never silently dropped; a category listed twice counts at its
/// first place. To tabulate 0–10 scores in bins, map each score to its bin first.
pub fn confusion_table<T: PartialEq + Clone>(
    pairs: &[(T, T)],
    rows: &[T],
    columns: &[T],
) -> ConfusionTable<T> {
    let mut counts = vec![vec![0; columns.len()]; rows.len()];
    let mut unlisted = 0;
    for (r, c) in pairs {
        match (
            rows.iter().position(|x| x == r),
            columns.iter().position(|x| x == c),
        ) {
            (Some(i), Some(j)) => counts[i][j] += 1,
            _ => unlisted += 1,
        }
    }
    ConfusionTable {
        rows: rows.to_vec(),
        columns: columns.to_vec(),
        counts,
        unlisted,
    }
}

#[cfg(test)]
mod tests;
