//! Paired tests for "are the optimized prompts really better than the baseline on the same
//! cases?":
//!
//! * **McNemar** on the factually-correct outcomes: only discordant pairs count
//!   (`b` = correct with the baseline only, `c` = with the optimized prompts only). Below 25
//!   discordant pairs the exact two-sided binomial test (`p = min(1, 2·P[X ≤ min(b, c)])`,
//!   `X ~ Bin(b + c, ½)`), as statsmodels' `mcnemar(exact=True)`; from 25 on the chi-square
//!   statistic `(|b − c| − 1)² / (b + c)` with one degree of freedom, as
//!   `mcnemar(exact=False, correction=True)`.
//! * **Paired bootstrap** on the composite scores: the per-case differences resampled with
//!   replacement (seeded SplitMix64, 10,000 resamples), the 95% percentile interval and a
//!   two-sided p-value (twice the smaller tail share of resampled means at or beyond zero).
//!   A gain is significant when the interval excludes zero.
//! * **Minimum detectable effect**: for correctness, the fewest extra correct answers with no
//!   new wrong ones (`b = 0`) that the exact test calls significant (`2 · ½^c < α`, so 6 at
//!   α = 0.05) — impossible when the set has fewer pairs; for the composite score,
//!   `(z₀.₉₇₅ + z₀.₈) · sd(d) / √n`, the difference a paired test finds with 80% power given
//!   the observed spread of the differences.

use assay_core::experiment::{
    Bootstrap, CaseChange, CaseResult, Comparison, McNemar, McNemarMethod, Metrics, Significance,
};

/// The significance level.
pub const ALPHA: f64 = 0.05;
/// Bootstrap resamples.
pub const RESAMPLES: usize = 10_000;
/// Discordant pairs from which McNemar uses the chi-square approximation.
pub const EXACT_BELOW: usize = 25;

/// Two-sided p-value of McNemar's test for `b` and `c` discordant pairs.
pub fn mcnemar(b: usize, c: usize) -> McNemar {
    let n = b + c;
    let (p_value, method) = if n < EXACT_BELOW {
        (exact_binomial_two_sided(b.min(c), n), McNemarMethod::Exact)
    } else {
        let diff = (b as f64 - c as f64).abs() - 1.0;
        let stat = diff.max(0.0).powi(2) / n as f64;
        (chi2_1_sf(stat), McNemarMethod::Chi2)
    };
    McNemar {
        baseline_only: b,
        optimized_only: c,
        p_value,
        method,
    }
}

/// `min(1, 2·P[X ≤ k])` for `X ~ Bin(n, ½)`; 1 when `n` is 0.
pub fn exact_binomial_two_sided(k: usize, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    // P[X = i] = C(n, i) / 2^n, summed in log space so large n does not overflow.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_c = 0.0; // ln C(n, 0)
    let mut total = 0.0;
    for i in 0..=k {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        total += (ln_c + ln_half_n).exp();
    }
    (2.0 * total).min(1.0)
}

/// The survival function of the chi-square distribution with one degree of freedom:
/// `erfc(√(x/2))`.
pub fn chi2_1_sf(x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    erfc((x / 2.0).sqrt())
}

/// The complementary error function (W. J. Cody's rational approximations as in Numerical
/// Recipes' `erfcc`, relative error below 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// SplitMix64: a small, seeded, portable generator (the same stream on every platform).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        // Lemire's multiply-shift; the bias is below 2^-32 for the set sizes used here.
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// The paired bootstrap of `differences` (optimized − baseline); `None` with fewer than two.
pub fn paired_bootstrap(differences: &[f64], resamples: usize, seed: u64) -> Option<Bootstrap> {
    let n = differences.len();
    if n < 2 || resamples == 0 {
        return None;
    }
    let mean = differences.iter().sum::<f64>() / n as f64;
    let mut rng = SplitMix(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| differences[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (resamples - 1) as f64).round() as usize).min(resamples - 1)];
    let le = means.iter().filter(|m| **m <= 0.0).count() as f64 / resamples as f64;
    let ge = means.iter().filter(|m| **m >= 0.0).count() as f64 / resamples as f64;
    Some(Bootstrap {
        mean_difference: mean,
        ci_low: at(0.025),
        ci_high: at(0.975),
        p_value: (2.0 * le.min(ge)).min(1.0),
        resamples,
        seed,
    })
}

/// The fewest extra correct answers (none lost) the exact McNemar test calls significant at
/// `alpha` with `pairs` cases; `None` when even all of them would not do.
pub fn min_detectable_correct(pairs: usize, alpha: f64) -> Option<usize> {
    (1..=pairs).find(|&c| exact_binomial_two_sided(0, c) < alpha)
}

/// `(z₀.₉₇₅ + z₀.₈) · sd / √n`: the paired mean difference detectable with 80% power.
pub fn min_detectable_mean(differences: &[f64]) -> Option<f64> {
    let n = differences.len();
    if n < 2 {
        return None;
    }
    let mean = differences.iter().sum::<f64>() / n as f64;
    let var = differences.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    const Z_975: f64 = 1.959_963_984_540_054;
    const Z_80: f64 = 0.841_621_233_572_914_3;
    Some((Z_975 + Z_80) * var.sqrt() / (n as f64).sqrt())
}

/// Both tests and the detectable effects for paired case results (matched by line; cases
/// that errored on either side are left out).
pub fn significance(baseline: &[CaseResult], optimized: &[CaseResult], seed: u64) -> Significance {
    let pairs: Vec<(&CaseResult, &CaseResult)> = baseline
        .iter()
        .filter(|b| b.error.is_none())
        .filter_map(|b| {
            optimized
                .iter()
                .find(|o| o.line == b.line && o.error.is_none())
                .map(|o| (b, o))
        })
        .collect();
    let b = pairs
        .iter()
        .filter(|(x, y)| x.factually_correct && !y.factually_correct)
        .count();
    let c = pairs
        .iter()
        .filter(|(x, y)| !x.factually_correct && y.factually_correct)
        .count();
    let test = mcnemar(b, c);
    let diffs: Vec<f64> = pairs
        .iter()
        .map(|(x, y)| y.composite_score - x.composite_score)
        .collect();
    let boot = paired_bootstrap(&diffs, RESAMPLES, seed);
    let mdc = min_detectable_correct(pairs.len(), ALPHA);
    let correct_sig = c > b && test.p_value < ALPHA;
    let composite_sig = boot.is_some_and(|x| x.ci_low > 0.0);
    let n = pairs.len();
    let mdc_text = match mdc {
        Some(k) => format!(
            "this set could detect a gain of {k} correct answers ({:.0} points) or more",
            k as f64 / n as f64 * 100.0
        ),
        None => format!("{n} cases are too few for any correctness gain to be significant"),
    };
    let verdict = match (correct_sig, composite_sig) {
        (true, true) => format!(
            "Significant gain in correctness (McNemar p = {:.3}) and composite score.",
            test.p_value
        ),
        (true, false) => format!(
            "Significant gain in correctness (McNemar p = {:.3}); the composite-score change is not significant.",
            test.p_value
        ),
        (false, true) => format!(
            "Significant composite-score gain; the correctness change (+{c} −{b}, McNemar p = {:.3}) is not significant; {mdc_text}.",
            test.p_value
        ),
        (false, false) => format!(
            "No significant gain (+{c} −{b} correct, McNemar p = {:.3}); {mdc_text}.",
            test.p_value
        ),
    };
    Significance {
        pairs: n,
        mcnemar: test,
        bootstrap: boot,
        alpha: ALPHA,
        min_detectable_correct: mdc,
        min_detectable_correct_pct: mdc.map(|k| k as f64 / n.max(1) as f64 * 100.0),
        min_detectable_composite: min_detectable_mean(&diffs),
        correct_gain_significant: correct_sig,
        composite_gain_significant: composite_sig,
        verdict,
    }
}

/// Baseline vs optimized on one set: metrics, the cases that changed, and the tests.
pub fn compare(
    set: &str,
    baseline: &[CaseResult],
    optimized: &[CaseResult],
    seed: u64,
) -> Comparison {
    let changes = baseline
        .iter()
        .filter_map(|b| {
            let o = optimized.iter().find(|o| o.line == b.line)?;
            let changed = b.factually_correct != o.factually_correct
                || (b.composite_score - o.composite_score).abs() > 1e-9
                || b.error.is_some() != o.error.is_some();
            changed.then(|| CaseChange {
                line: b.line,
                question: b.question.clone(),
                baseline_correct: b.factually_correct,
                optimized_correct: o.factually_correct,
                baseline_score: b.composite_score,
                optimized_score: o.composite_score,
            })
        })
        .collect();
    Comparison {
        set: set.to_owned(),
        baseline: Metrics::of(baseline),
        optimized: Metrics::of(optimized),
        changes,
        significance: significance(baseline, optimized, seed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol, "{a} vs {b}");
    }

    // Reference values: the exact binomial tail with rational arithmetic, which is what
    // scipy.stats.binomtest(k, n, 0.5).pvalue and statsmodels' mcnemar(exact=True) return:
    // python3 -c "from fractions import Fraction as F; from math import comb;
    //   p=lambda k,n: min(1, 2*F(sum(comb(n,i) for i in range(k+1)), 2**n)); print(float(p(1,10)), float(p(0,6)), float(p(0,5)), float(p(3,12)), float(p(10,24)))"
    // -> 0.021484375 0.03125 0.0625 0.14599609375 0.5412561893463135
    #[test]
    fn exact_mcnemar_matches_the_binomial_reference() {
        close(exact_binomial_two_sided(1, 10), 0.021_484_375, 1e-12);
        close(exact_binomial_two_sided(0, 6), 0.031_25, 1e-12);
        close(exact_binomial_two_sided(0, 5), 0.0625, 1e-12);
        close(exact_binomial_two_sided(3, 12), 0.145_996_093_75, 1e-12);
        close(
            exact_binomial_two_sided(10, 24),
            0.541_256_189_346_313_5,
            1e-12,
        );
        assert_eq!(exact_binomial_two_sided(0, 0), 1.0);
        assert_eq!(exact_binomial_two_sided(5, 10), 1.0);
        let t = mcnemar(9, 1);
        assert_eq!(t.method, McNemarMethod::Exact);
        close(t.p_value, 0.021_484_375, 1e-12);
    }

    // Reference: statsmodels mcnemar([[0,10],[20,0]], exact=False, correction=True) is
    // chi2 = (|10-20|-1)^2/30 = 2.7, p = chi2.sf(2.7, 1):
    // python3 -c "import math; print(math.erfc(math.sqrt(2.7/2)), math.erfc(math.sqrt(8.1/2)), math.erfc(1.0))"
    // -> 0.10034824646229074 0.004426525857919833 0.15729920705028513
    #[test]
    fn large_counts_use_chi_square_with_continuity_correction() {
        let t = mcnemar(10, 20);
        assert_eq!(t.method, McNemarMethod::Chi2);
        close(t.p_value, 0.100_348_246_462_290_75, 2e-7);
        close(chi2_1_sf(8.1), 0.004_426_525_857_919_833, 2e-8);
        close(erfc(-1.0), 2.0 - 0.157_299_207_050_285_13, 2e-7);
    }

    #[test]
    fn minimum_detectable_correctness_gain() {
        assert_eq!(min_detectable_correct(10, ALPHA), Some(6));
        assert_eq!(min_detectable_correct(5, ALPHA), None);
    }

    #[test]
    fn bootstrap_is_seeded_and_brackets_the_mean() {
        let d = [0.2, 0.1, 0.3, 0.0, 0.25, 0.15, 0.2, 0.1, 0.3, 0.05];
        let a = paired_bootstrap(&d, 2000, 42).unwrap();
        let b = paired_bootstrap(&d, 2000, 42).unwrap();
        assert_eq!(a, b);
        close(a.mean_difference, 0.165, 1e-12);
        assert!(a.ci_low > 0.0 && a.ci_low < 0.165 && a.ci_high > 0.165);
        assert!(a.p_value < 0.01);
        let zero = paired_bootstrap(&[0.1, -0.1, 0.1, -0.1], 2000, 1).unwrap();
        assert!(zero.ci_low < 0.0 && zero.ci_high > 0.0 && zero.p_value > 0.5);
        assert!(paired_bootstrap(&[0.1], 100, 1).is_none());
        // (1.96 + 0.84) * sd / sqrt(n) for sd = 0.1 exactly (differences ±0.1 around 0,
        // sample variance 4·0.01/3).
        close(
            min_detectable_mean(&[0.1, -0.1, 0.1, -0.1]).unwrap(),
            2.801_585_218 * (0.04f64 / 3.0).sqrt() / 2.0,
            1e-6,
        );
    }

    fn result(line: usize, correct: bool, score: f64) -> CaseResult {
        CaseResult {
            line,
            question: format!("q{line}"),
            expected: "a".into(),
            output: Some("x".into()),
            factually_correct: correct,
            composite_score: score,
            rubric_pass: score >= 0.8,
            rubric: None,
            error: None,
        }
    }

    #[test]
    fn comparison_lists_changed_cases_and_says_whether_the_gain_is_significant() {
        let base: Vec<_> = (1..=10).map(|l| result(l, l > 8, 0.3)).collect();
        let opt: Vec<_> = (1..=10).map(|l| result(l, true, 0.9)).collect();
        let c = compare("evaluation", &base, &opt, 42);
        assert_eq!(c.changes.len(), 10);
        assert_eq!(
            (
                c.baseline.factually_correct_count,
                c.optimized.factually_correct_count
            ),
            (2, 10)
        );
        assert_eq!(c.significance.mcnemar.optimized_only, 8);
        assert!(c.significance.correct_gain_significant);
        assert!(c.significance.verdict.starts_with("Significant gain"));
        let same = compare("evaluation", &base, &base, 42);
        assert!(same.changes.is_empty());
        assert!(!same.significance.correct_gain_significant);
        assert!(
            same.significance
                .verdict
                .contains("could detect a gain of 6")
        );
    }
}
