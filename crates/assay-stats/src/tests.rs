//! Tests of `stats` (kept apart: the module itself is long).

use super::*;

#[test]
fn t_quantiles_welch_and_holm() {
    // scipy.stats.t.ppf(0.975, df) for df 1, 4, 10, 30 and 7.5 (SciPy 1.16).
    for (df, q) in [
        (1.0, 12.706_204_736_432_095),
        (4.0, 2.776_445_105_197_798_7),
        (10.0, 2.228_138_851_964_938_5),
        (30.0, 2.042_272_456_301_237_3),
        (7.5, 2.333_039_626_864_973),
    ] {
        let ours = t_quantile(0.975, df).unwrap();
        assert!((ours - q).abs() < 1e-9, "df {df}: {ours} vs {q}");
    }
    // scipy.stats.ttest_ind([8, 8.4, 7.9, 8.2], [5, 5.5, 6, 5.2, 5.8], equal_var=False):
    // p = 1.2630315711508625e-05; t.interval(0.95, 2, loc=5, scale=sqrt(1/3)).
    let w = welch_difference(&[5.0, 5.5, 6.0, 5.2, 5.8], &[8.0, 8.4, 7.9, 8.2], 0.05).unwrap();
    assert_eq!(w.verdict, Verdict::Better);
    assert!((w.difference.estimate - 2.625).abs() < 1e-12);
    assert!(
        (w.p_value - 1.263_031_571_150_862_5e-5).abs() < 1e-12,
        "{w:?}"
    );
    let same = welch_difference(&[7.0, 7.0], &[7.0, 7.0], 0.05).unwrap();
    assert_eq!(
        (same.verdict, same.p_value),
        (Verdict::NotDistinguishable, 1.0)
    );
    let t = t_interval(&[4.0, 5.0, 6.0], 0.05).unwrap();
    assert!((t.high - 7.484_137_711_719_546).abs() < 1e-9, "{t:?}");
    assert_eq!(holm(&[0.01, 0.04, 0.03], 0.05), vec![true, false, false]);
    // scipy.stats.fisher_exact([[3, 0], [0, 3]]) p = 0.1; [[10, 2], [3, 9]] p = 0.012278...
    assert!((fisher_exact(3, 3, 0, 3).unwrap() - 0.1).abs() < 1e-12);
    assert!((fisher_exact(10, 12, 3, 12).unwrap() - 0.012_278_137_799_742_322).abs() < 1e-12);
    let d = proportion_difference(3, 3, 0, 3, 0.05).unwrap();
    assert_eq!(
        d.verdict,
        Verdict::NotDistinguishable,
        "three runs a side prove little"
    );
    assert_eq!(d.difference.estimate, -1.0);
    assert!((d.p_value - 0.1).abs() < 1e-12);
    let d = proportion_difference(10, 12, 3, 12, 0.05).unwrap();
    assert_eq!(d.verdict, Verdict::Worse);
    assert_eq!(holm(&[0.01, 0.02, 0.012], 0.05), vec![true, true, true]);
    let groups: [&[f64]; 2] = [&[1.0, 1.0, 1.0], &[9.0, 9.0, 9.0]];
    let s = stratified_bootstrap_mean(&groups, BootstrapSettings::default()).unwrap();
    assert_eq!(
        (s.estimate, s.low, s.high),
        (5.0, 5.0, 5.0),
        "no spread within groups"
    );
}

#[test]
fn the_two_sample_bootstrap_sees_a_clear_difference_and_not_noise() {
    let a = [5.0, 5.5, 6.0, 5.2, 5.8, 6.1];
    let b = [8.0, 8.4, 7.9, 8.2, 8.8, 8.1];
    let s = BootstrapSettings::default();
    let up = bootstrap_difference(&a, &b, s).unwrap();
    assert_eq!(up.verdict, Verdict::Better);
    assert!((up.difference.estimate - (mean(&b) - mean(&a))).abs() < 1e-12);
    assert!(up.difference.contains(up.difference.estimate));
    assert_eq!(
        bootstrap_difference(&b, &a, s).unwrap().verdict,
        Verdict::Worse
    );
    let same = bootstrap_difference(&a, &[5.1, 6.0, 5.6, 5.3, 5.9, 5.7], s).unwrap();
    assert_eq!(same.verdict, Verdict::NotDistinguishable);
    assert_eq!(
        bootstrap_difference(&a, &b, s),
        bootstrap_difference(&a, &b, s),
        "seeded"
    );
    assert!(bootstrap_difference(&[1.0], &b, s).is_none());
    assert!(bootstrap_difference(&a, &[f64::NAN, 1.0], s).is_none());
}

#[track_caller]
fn close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{a} vs {b}");
}

#[test]
fn splitmix64_is_the_reference_stream() {
    // The reference SplitMix64 from seed 0 (Vigna's splitmix64.c): 0xe220a8397b1dcdaf,
    // 0x6e789e6aa1b965f4.
    let mut r = SplitMix64::new(0);
    assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    assert_eq!(r.below(10), 0);
    assert_eq!(SplitMix64::new(5).below(0), 0);
    let mut r = SplitMix64::new(99);
    assert!((0..1000).all(|_| r.below(7) < 7));
}

// The optimizer's former `assay_experiment::stats::paired_bootstrap` (on differences),
// compiled from its last source: the same numbers bit for bit.
#[test]
fn paired_bootstrap_gives_the_optimizers_former_numbers() {
    let check = |d: &[f64], resamples: usize, seed: u64, want: [f64; 4]| {
        let pairs: Vec<(f64, f64)> = d.iter().map(|&x| (0.0, x)).collect();
        let s = BootstrapSettings {
            resamples,
            seed,
            alpha: 0.05,
        };
        let c = paired_bootstrap(&pairs, s).unwrap();
        let got = [
            c.difference.estimate,
            c.difference.low,
            c.difference.high,
            c.p_value,
        ];
        assert_eq!(got, want);
    };
    check(
        &[0.2, 0.1, 0.3, 0.0, 0.25, 0.15, 0.2, 0.1, 0.3, 0.05],
        2000,
        42,
        [0.165, 0.105_000_000_000_000_01, 0.225, 0.0],
    );
    check(&[0.1, -0.1, 0.1, -0.1], 2000, 1, [0.0, -0.1, 0.1, 1.0]);
    let e: Vec<f64> = (0..30)
        .map(|i| f64::from((i * 37 % 11) - 4) / 10.0)
        .collect();
    check(
        &e,
        10_000,
        7,
        [
            0.083_333_333_333_333_33,
            -0.029_999_999_999_999_99,
            0.196_666_666_666_666_68,
            0.1472,
        ],
    );
}

#[test]
fn paired_bootstrap_verdicts() {
    let s = BootstrapSettings {
        resamples: 2000,
        seed: 3,
        ..Default::default()
    };
    let up: Vec<(f64, f64)> = (0..12)
        .map(|i| (0.5, 0.6 + f64::from(i % 3) / 20.0))
        .collect();
    let c = paired_bootstrap(&up, s).unwrap();
    assert_eq!(c.verdict, Verdict::Better);
    assert!(c.difference.low > 0.0 && c.p_value < 0.05);
    assert_eq!(c.difference.n, 12);
    assert_eq!(
        c.difference.method,
        IntervalMethod::PairedBootstrapPercentile
    );
    assert_eq!(
        (c.difference.resamples, c.difference.seed),
        (Some(2000), Some(3))
    );
    close(c.difference.level, 0.95, 1e-15);
    let down: Vec<(f64, f64)> = up.iter().map(|&(a, b)| (b, a)).collect();
    let c = paired_bootstrap(&down, s).unwrap();
    assert_eq!(c.verdict, Verdict::Worse);
    assert!(c.difference.high < 0.0);
    let mixed = [(0.5, 0.6), (0.5, 0.4), (0.3, 0.4), (0.4, 0.3)];
    let c = paired_bootstrap(&mixed, s).unwrap();
    assert_eq!(c.verdict, Verdict::NotDistinguishable);
    assert!(c.difference.contains(0.0));
    // A wider interval at a smaller alpha, from the same resamples.
    let strict = paired_bootstrap(&up, BootstrapSettings { alpha: 0.001, ..s }).unwrap();
    let loose = paired_bootstrap(&up, s).unwrap();
    assert!(strict.difference.width() >= loose.difference.width());
    assert_eq!(strict.alpha, 0.001);
    // Deterministic given the seed; another seed moves the interval.
    assert_eq!(paired_bootstrap(&mixed, s), paired_bootstrap(&mixed, s));
    let e: Vec<(f64, f64)> = (0..30).map(|i| (0.0, f64::from(i % 7))).collect();
    let other = BootstrapSettings { seed: 4, ..s };
    assert_ne!(paired_bootstrap(&e, s), paired_bootstrap(&e, other));
}

#[test]
fn bootstrap_refuses_what_it_cannot_do() {
    let s = BootstrapSettings::default();
    assert!(paired_bootstrap(&[(0.1, 0.2)], s).is_none());
    assert!(paired_bootstrap(&[], s).is_none());
    let two = [(0.1, 0.2), (0.3, 0.2)];
    assert!(paired_bootstrap(&two, BootstrapSettings { resamples: 0, ..s }).is_none());
    assert!(paired_bootstrap(&two, BootstrapSettings { alpha: 0.0, ..s }).is_none());
    assert!(paired_bootstrap(&two, BootstrapSettings { alpha: 1.0, ..s }).is_none());
    assert!(
        paired_bootstrap(
            &two,
            BootstrapSettings {
                alpha: f64::NAN,
                ..s
            }
        )
        .is_none()
    );
    assert!(paired_bootstrap(&[(0.1, f64::NAN), (0.3, 0.2)], s).is_none());
    assert!(paired_bootstrap(&[(f64::INFINITY, 1.0), (0.3, 0.2)], s).is_none());
    assert!(bootstrap_mean(&[1.0], s).is_none());
    assert!(bootstrap_mean(&[1.0, f64::NAN], s).is_none());
    // One resample: both ends are that resample's mean.
    let one = bootstrap_mean(&[1.0, 2.0], BootstrapSettings { resamples: 1, ..s }).unwrap();
    assert_eq!(one.low, one.high);
}

#[test]
fn bootstrap_mean_of_agreement_indicators() {
    let agree: Vec<f64> = (0..40)
        .map(|i| if i % 5 == 0 { 0.0 } else { 1.0 })
        .collect();
    let s = BootstrapSettings {
        resamples: 4000,
        seed: 11,
        ..Default::default()
    };
    let ci = bootstrap_mean(&agree, s).unwrap();
    assert_eq!(ci.method, IntervalMethod::BootstrapPercentile);
    close(ci.estimate, 0.8, 1e-15);
    assert!(ci.low < 0.8 && ci.high > 0.8 && ci.low > 0.5 && ci.high <= 1.0);
    // Every resampled mean of 0/1 values over 40 is a multiple of 1/40.
    close((ci.low * 40.0).round(), ci.low * 40.0, 1e-9);
    assert_eq!(bootstrap_mean(&agree, s), bootstrap_mean(&agree, s));
    // A constant sample has a zero-width interval at its value.
    let flat = bootstrap_mean(&[0.5; 5], s).unwrap();
    assert_eq!((flat.low, flat.estimate, flat.high), (0.5, 0.5, 0.5));
}

// Reference: statsmodels.stats.proportion.proportion_confint(k, n, alpha, method="wilson").
// 8 of 10: [0.49016247153664183, 0.9433178485456247]; 0 of 10: [0, 0.27753279986288926].
#[test]
fn wilson_interval() {
    let ci = wilson(8, 10, 0.05).unwrap();
    close(ci.low, 0.490_162_471_536_641_83, 1e-12);
    close(ci.high, 0.943_317_848_545_624_7, 1e-12);
    assert_eq!(
        (ci.estimate, ci.n, ci.method),
        (0.8, 10, IntervalMethod::Wilson)
    );
    close(ci.level, 0.95, 1e-15);
    let zero = wilson(0, 10, 0.05).unwrap();
    assert_eq!(zero.low, 0.0);
    close(zero.high, 0.277_532_799_862_889_26, 1e-12);
    let all = wilson(10, 10, 0.05).unwrap();
    assert_eq!(all.high, 1.0);
    close(all.low, 1.0 - 0.277_532_799_862_889_26, 1e-12);
    let z = wilson_z(8, 10, normal_critical_value(0.05).unwrap()).unwrap();
    close(z.low, ci.low, 1e-15);
    close(z.level, 0.95, 1e-12);
    assert!(wilson(1, 0, 0.05).is_none());
    assert!(wilson(0, 0, 0.05).is_none());
    assert!(wilson(11, 10, 0.05).is_none());
    assert!(wilson(5, 10, 0.0).is_none());
    assert!(wilson(5, 10, 1.5).is_none());
    assert!(wilson_z(5, 10, 0.0).is_none());
    assert!(wilson_z(5, 10, f64::INFINITY).is_none());
    // Narrower at a larger alpha.
    assert!(wilson(5, 10, 0.2).unwrap().width() < wilson(5, 10, 0.05).unwrap().width());
}

// scipy.stats.norm.isf(alpha / 2) for alpha = 0.05, 0.01, 0.1, 0.8, 1e-10.
#[test]
fn normal_critical_values() {
    close(
        normal_critical_value(0.05).unwrap(),
        1.959_963_984_540_054_5,
        1e-14,
    );
    close(
        normal_critical_value(0.01).unwrap(),
        2.575_829_303_548_901,
        1e-14,
    );
    close(
        normal_critical_value(0.1).unwrap(),
        1.644_853_626_951_472_9,
        1e-14,
    );
    close(
        normal_critical_value(0.8).unwrap(),
        0.253_347_103_135_799_7,
        1e-14,
    );
    close(
        normal_critical_value(1e-10).unwrap(),
        6.466_951_087_240_516,
        1e-12,
    );
    assert!(normal_critical_value(0.0).is_none());
    assert!(normal_critical_value(1.0).is_none());
    assert!(normal_critical_value(-0.1).is_none());
}

// Python's math.erfc.
#[test]
fn erfc_to_double_precision() {
    for (x, want) in [
        (0.0, 1.0),
        (0.1, 0.887_537_083_981_715_2),
        (1.0, 0.157_299_207_050_285_13),
        (-1.0, 1.842_700_792_949_715),
        (3.0, 2.209_049_699_858_543_8e-5),
        (6.0, 2.151_973_671_249_891_6e-17),
    ] {
        let got = erfc(x);
        assert!(
            (got - want).abs() <= 1e-14 * want,
            "erfc({x}) = {got}, want {want}"
        );
    }
    assert!(erfc(f64::NAN).is_nan());
    assert_eq!(erfc(f64::INFINITY), 0.0);
    assert_eq!(erfc(f64::NEG_INFINITY), 2.0);
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
    assert_eq!(exact_binomial_two_sided(50, 10), 1.0);
    let t = mcnemar(9, 1);
    assert_eq!(t.method, McNemarMethod::Exact);
    assert_eq!((t.statistic, t.discordant()), (1.0, 10));
    // The optimizer's former implementation gave these bits.
    assert_eq!(t.p_value, 0.021_484_375_000_000_003);
    assert_eq!(mcnemar(3, 9).p_value, 0.145_996_093_750_000_06);
    assert_eq!(t.verdict(0.05), Verdict::Worse);
    assert_eq!(mcnemar(1, 9).verdict(0.05), Verdict::Better);
    assert_eq!(mcnemar(1, 9).verdict(0.01), Verdict::NotDistinguishable);
    let none = mcnemar(0, 0);
    assert_eq!(
        (none.p_value, none.verdict(0.05)),
        (1.0, Verdict::NotDistinguishable)
    );
    let paired = [
        (true, false),
        (true, true),
        (false, true),
        (false, true),
        (false, false),
    ];
    let t = mcnemar_paired(&paired);
    assert_eq!((t.a_only, t.b_only), (1, 2));
}

// Reference: statsmodels mcnemar([[0,10],[20,0]], exact=False, correction=True) is
// chi2 = (|10-20|-1)^2/30 = 2.7, p = scipy.stats.chi2.sf(2.7, 1) = 0.10034824646229054;
// (|30-12|-1)^2/42: p = 0.008711912962379598.
#[test]
fn large_counts_use_chi_square_with_continuity_correction() {
    let t = mcnemar(10, 20);
    assert_eq!(t.method, McNemarMethod::Chi2);
    close(t.statistic, 2.7, 1e-15);
    close(t.p_value, 0.100_348_246_462_290_54, 1e-15);
    close(mcnemar(30, 12).p_value, 0.008_711_912_962_379_598, 1e-16);
    assert_eq!(mcnemar(30, 12).verdict(0.05), Verdict::Worse);
    close(chi2_1_sf(8.1), 0.004_426_525_857_919_833, 1e-16);
    assert_eq!(chi2_1_sf(0.0), 1.0);
    assert_eq!(chi2_1_sf(-1.0), 1.0);
    assert_eq!(chi2_1_sf(f64::INFINITY), 0.0);
    assert!(chi2_1_sf(1e4) < 1e-300);
    // Equal counts: statistic 0 and p = 1 (statsmodels would say 1/26).
    let even = mcnemar(13, 13);
    assert_eq!((even.statistic, even.p_value), (0.0, 1.0));
    assert_eq!(mcnemar(40, 41).p_value, 1.0);
    assert_eq!(mcnemar(12, 12).method, McNemarMethod::Exact);
}

// By hand: 10 items, 7 alike; rater 1 says yes 6 times, rater 2 5 times:
// pₑ = (6·5 + 4·5) / 100 = 0.5, κ = (0.7 − 0.5) / 0.5 = 0.4.
#[test]
fn cohen_kappa_nominal() {
    let r1 = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0];
    let r2 = [1, 1, 1, 1, 0, 0, 1, 0, 0, 0];
    let pairs: Vec<(i32, i32)> = r1.into_iter().zip(r2).collect();
    close(cohen_kappa(&pairs).unwrap(), 0.4, 1e-15);
    // Labels of any ordered type.
    let words = [
        ("pass", "pass"),
        ("fail", "pass"),
        ("fail", "fail"),
        ("pass", "pass"),
    ];
    // pₒ = 0.75, pₑ = (2·3 + 2·1)/16 = 0.5, κ = 0.5.
    close(cohen_kappa(&words).unwrap(), 0.5, 1e-15);
    // Complete disagreement on two balanced labels: κ = −1.
    close(cohen_kappa(&[(0, 1), (1, 0)]).unwrap(), -1.0, 1e-15);
    // Degenerate: perfect agreement, also on one single label; none at all.
    assert_eq!(cohen_kappa(&[(2, 2), (2, 2)]), Some(1.0));
    assert_eq!(cohen_kappa(&[(1, 1), (2, 2)]), Some(1.0));
    assert_eq!(cohen_kappa::<u8>(&[]), None);
    // Both raters constant, different labels: pₒ = 0 = pₑ, κ = 0.
    assert_eq!(cohen_kappa(&[(1, 2), (1, 2)]), Some(0.0));
}

// By hand: x = [0, 1, 2], y = [0, 2, 2]: D = 1/3; means 1 and 4/3, variances 2/3 and 8/9,
// E = 2/3 + 8/9 + 1/9 = 5/3, κ = 1 − (1/3)/(5/3) = 0.8.
#[test]
fn quadratic_kappa_ordinal() {
    let pairs = [(0.0, 0.0), (1.0, 2.0), (2.0, 2.0)];
    close(quadratic_kappa(&pairs).unwrap(), 0.8, 1e-15);
    // A near miss costs less than a far one (unlike plain kappa, which sees both as misses).
    let near = [(0.0, 0.0), (5.0, 6.0), (10.0, 10.0), (3.0, 3.0)];
    let far = [(0.0, 0.0), (5.0, 10.0), (10.0, 10.0), (3.0, 3.0)];
    assert!(quadratic_kappa(&near).unwrap() > quadratic_kappa(&far).unwrap());
    // Reversed scores on a symmetric set: κ = −1.
    close(
        quadratic_kappa(&[(0.0, 2.0), (2.0, 0.0)]).unwrap(),
        -1.0,
        1e-15,
    );
    assert_eq!(quadratic_kappa(&[(7.0, 7.0), (7.0, 7.0)]), Some(1.0));
    assert_eq!(quadratic_kappa(&[(3.0, 5.0), (3.0, 5.0)]), Some(0.0));
    assert_eq!(quadratic_kappa(&[]), None);
    assert_eq!(quadratic_kappa(&[(1.0, f64::NAN)]), None);
}

// scipy.stats.rankdata([3, 1, 4, 1, 5, 9, 2, 6, 5]) = [4, 1.5, 5, 1.5, 6.5, 9, 3, 8, 6.5].
#[test]
fn spearman_with_ties() {
    assert_eq!(
        average_ranks(&[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0]),
        [4.0, 1.5, 5.0, 1.5, 6.5, 9.0, 3.0, 8.0, 6.5]
    );
    assert!(average_ranks(&[]).is_empty());
    // Monotone but not linear: 1; reversed: −1.
    let up: Vec<(f64, f64)> = (1..=6)
        .map(|i| (f64::from(i), f64::from(i).exp()))
        .collect();
    close(spearman(&up).unwrap(), 1.0, 1e-15);
    let down: Vec<(f64, f64)> = up.iter().map(|&(x, y)| (x, -y)).collect();
    close(spearman(&down).unwrap(), -1.0, 1e-15);
    // By hand: x ranks [1, 2, 3, 4], y = [1, 3, 2, 2] ranks [1, 4, 2.5, 2.5]:
    // deviations x [−1.5, −0.5, 0.5, 1.5], y [−1.5, 1.5, 0, 0]: Σxy = 1.5, Σx² = 5,
    // Σy² = 4.5, ρ = 1.5 / √22.5.
    let tied = [(1.0, 1.0), (2.0, 3.0), (3.0, 2.0), (4.0, 2.0)];
    close(spearman(&tied).unwrap(), 1.5 / 22.5f64.sqrt(), 1e-15);
    assert_eq!(spearman(&[(1.0, 2.0), (2.0, 2.0), (3.0, 2.0)]), None);
    assert_eq!(spearman(&[(1.0, 2.0)]), None);
    assert_eq!(spearman(&[(1.0, 2.0), (f64::NAN, 1.0)]), None);
    close(spearman(&[(1.0, 5.0), (2.0, 3.0)]).unwrap(), -1.0, 1e-15);
}

#[test]
fn mean_absolute_error_and_confusion_table() {
    close(
        mean_absolute_error(&[(1.0, 3.0), (4.0, 4.0), (2.0, 1.0)]).unwrap(),
        1.0,
        1e-15,
    );
    assert_eq!(mean_absolute_error(&[]), None);
    assert_eq!(mean_absolute_error(&[(1.0, f64::INFINITY)]), None);

    let pairs = [
        ("pass", "pass"),
        ("pass", "fail"),
        ("fail", "fail"),
        ("pass", "pass"),
        ("fail", "unsure"),
        ("skip", "pass"),
    ];
    let t = confusion_table(&pairs, &["pass", "fail"], &["pass", "fail", "unsure"]);
    assert_eq!(t.counts, [[2, 1, 0], [0, 1, 1]]);
    assert_eq!((t.unlisted, t.total()), (1, 5));
    assert_eq!(t.rows, ["pass", "fail"]);
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(json["counts"][0][0], 2);
    let empty = confusion_table::<u8>(&[], &[], &[]);
    assert_eq!((empty.total(), empty.unlisted), (0, 0));
}

#[test]
fn results_serialize_for_reports() {
    let c = paired_bootstrap(
        &[(0.1, 0.5), (0.2, 0.6), (0.3, 0.5), (0.2, 0.3)],
        BootstrapSettings {
            resamples: 500,
            seed: 9,
            ..Default::default()
        },
    )
    .unwrap();
    let json = serde_json::to_value(c).unwrap();
    assert_eq!(json["verdict"], "better");
    assert_eq!(json["difference"]["method"], "paired_bootstrap_percentile");
    assert_eq!(json["difference"]["seed"], 9);
    assert_eq!(json["difference"]["resamples"], 500);
    assert_eq!(json["alpha"], 0.05);
    let back: PairedComparison = serde_json::from_value(json).unwrap();
    assert_eq!(back, c);
    let w = serde_json::to_value(wilson(3, 4, 0.05).unwrap()).unwrap();
    assert_eq!(w["method"], "wilson");
    assert!(w.get("seed").is_none() && w.get("resamples").is_none());
    assert_eq!(
        serde_json::to_value(Verdict::NotDistinguishable).unwrap(),
        "not_distinguishable"
    );
    let m = serde_json::to_value(mcnemar(30, 12)).unwrap();
    assert_eq!(m["method"], "chi2");
}
