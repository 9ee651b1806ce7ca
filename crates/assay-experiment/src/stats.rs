//! Paired tests for "are the optimized prompts really better than the baseline on the same
//! cases?", computed with the shared statistics of [`assay_core::stats`]:
//!
//! * **McNemar** on the factually-correct outcomes ([`assay_core::stats::mcnemar`]): only
//!   discordant pairs count (`b` = correct with the baseline only, `c` = with the optimized
//!   prompts only); the exact binomial test below 25 discordant pairs, the chi-square with
//!   continuity correction from 25 on. A gain is significant when its verdict is `Better`
//!   (`c > b` and `p < α`).
//! * **Paired bootstrap** on the composite scores ([`assay_core::stats::paired_bootstrap`]):
//!   the per-case differences resampled with replacement (seeded SplitMix64, 10,000
//!   resamples), the 95% percentile interval and a two-sided p-value. A gain is significant
//!   when the interval lies above zero.
//! * **Minimum detectable effect** (here, the optimizer's own): for correctness, the fewest
//!   extra correct answers with no new wrong ones (`b = 0`) that the exact test calls
//!   significant (`2 · ½^c < α`, so 6 at α = 0.05) — impossible when the set has fewer pairs;
//!   for the composite score, `(z₀.₉₇₅ + z₀.₈) · sd(d) / √n`, the difference a paired test finds
//!   with 80% power given the observed spread of the differences.

use assay_core::experiment::{
    Bootstrap, CaseChange, CaseResult, Comparison, McNemar, Metrics, Significance,
};
use assay_core::stats::{
    self as shared, BootstrapSettings, McNemarTest, PairedComparison, Verdict,
};

/// The significance level.
pub const ALPHA: f64 = shared::DEFAULT_ALPHA;
/// Bootstrap resamples.
pub const RESAMPLES: usize = shared::DEFAULT_RESAMPLES;

/// The record of McNemar's test with `a` the baseline and `b` the optimized prompts.
fn mcnemar_record(t: &McNemarTest) -> McNemar {
    McNemar {
        baseline_only: t.a_only,
        optimized_only: t.b_only,
        p_value: t.p_value,
        method: t.method,
    }
}

/// The record of the paired bootstrap of optimized − baseline.
fn bootstrap_record(c: &PairedComparison, seed: u64) -> Bootstrap {
    Bootstrap {
        mean_difference: c.difference.estimate,
        ci_low: c.difference.low,
        ci_high: c.difference.high,
        p_value: c.p_value,
        resamples: c.difference.resamples.unwrap_or(RESAMPLES),
        seed,
    }
}

/// The fewest extra correct answers (none lost) the exact McNemar test calls significant at
/// `alpha` with `pairs` cases; `None` when even all of them would not do.
pub fn min_detectable_correct(pairs: usize, alpha: f64) -> Option<usize> {
    (1..=pairs).find(|&c| shared::exact_binomial_two_sided(0, c) < alpha)
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
    let test = shared::mcnemar(b, c);
    let scores: Vec<(f64, f64)> = pairs
        .iter()
        .map(|(x, y)| (x.composite_score, y.composite_score))
        .collect();
    let diffs: Vec<f64> = scores.iter().map(|(x, y)| y - x).collect();
    let settings = BootstrapSettings {
        resamples: RESAMPLES,
        seed,
        alpha: ALPHA,
    };
    let boot = shared::paired_bootstrap(&scores, settings);
    let mdc = min_detectable_correct(pairs.len(), ALPHA);
    let correct_sig = test.verdict(ALPHA) == Verdict::Better;
    let composite_sig = boot.is_some_and(|x| x.verdict == Verdict::Better);
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
        mcnemar: mcnemar_record(&test),
        bootstrap: boot.map(|x| bootstrap_record(&x, seed)),
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
pub(crate) mod tests {
    use assay_core::experiment::McNemarMethod;

    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol, "{a} vs {b}");
    }

    #[test]
    fn minimum_detectable_correctness_gain() {
        assert_eq!(min_detectable_correct(10, ALPHA), Some(6));
        assert_eq!(min_detectable_correct(5, ALPHA), None);
    }

    #[test]
    fn minimum_detectable_composite_difference() {
        // (1.96 + 0.84) * sd / sqrt(n) for sd = 0.1 exactly (differences ±0.1 around 0,
        // sample variance 4·0.01/3).
        close(
            min_detectable_mean(&[0.1, -0.1, 0.1, -0.1]).unwrap(),
            2.801_585_218 * (0.04f64 / 3.0).sqrt() / 2.0,
            1e-6,
        );
        assert!(min_detectable_mean(&[0.1]).is_none());
    }

    /// A graded case for the crate's tests.
    pub(crate) fn result(line: usize, correct: bool, score: f64) -> CaseResult {
        CaseResult {
            line,
            question: format!("q{line}"),
            expected: "a".into(),
            output: Some("x".into()),
            factually_correct: correct,
            correctness: None,
            correct_why: None,
            composite_score: score,
            rubric_pass: score >= 0.8,
            rubric: None,
            error: None,
            assertions: None,
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

    // The statistics moved to assay_core::stats; the optimizer's numbers did not change. The
    // bits below are what this module's own McNemar and bootstrap gave before the move (the
    // composite differences (37·i mod 11 − 4) / 10, seed 7, 10,000 resamples; 1 correct with
    // the baseline only, 9 with the optimized prompts only).
    #[test]
    fn significance_gives_the_numbers_it_gave_before_the_move() {
        let base: Vec<_> = (0..30).map(|i| result(i + 1, i == 0, 0.0)).collect();
        let opt: Vec<_> = (0..30)
            .map(|i| {
                let d = f64::from(u8::try_from(i * 37 % 11).unwrap()) - 4.0;
                result(i + 1, (1..10).contains(&i), d / 10.0)
            })
            .collect();
        let s = significance(&base, &opt, 7);
        assert_eq!(s.pairs, 30);
        assert_eq!((s.mcnemar.baseline_only, s.mcnemar.optimized_only), (1, 9));
        assert_eq!(s.mcnemar.method, McNemarMethod::Exact);
        assert_eq!(s.mcnemar.p_value, 0.021_484_375_000_000_003);
        let b = s.bootstrap.unwrap();
        assert_eq!(
            [b.mean_difference, b.ci_low, b.ci_high, b.p_value],
            [
                0.083_333_333_333_333_33,
                -0.029_999_999_999_999_99,
                0.196_666_666_666_666_68,
                0.1472
            ]
        );
        assert_eq!((b.resamples, b.seed), (RESAMPLES, 7));
        assert!(s.correct_gain_significant && !s.composite_gain_significant);
        // Fewer correct with the optimized prompts is never a significant gain.
        let worse = significance(&opt, &base, 7);
        assert!(!worse.correct_gain_significant);
        assert!(worse.verdict.starts_with("No significant gain"));
    }
}
