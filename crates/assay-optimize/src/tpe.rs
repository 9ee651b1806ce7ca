//! The categorical TPE model: split, weights, Parzen estimators, acquisition.
//!
//! See the crate docs for the algorithm; this module follows Optuna's `TPESampler` (v4/v5,
//! independent sampling) for categorical parameters.

use crate::pareto::{hssp_greedy, nondomination_ranks, reference_point, row};
use crate::rng::SplitMix64;

/// Optuna's default γ: the good group holds `min(ceil(n / 10), 25)` trials for one objective,
/// `ceil(n / 10)` for several (`default_gamma_multiobjective`).
pub(crate) fn default_gamma(n: usize, objectives: usize) -> usize {
    if objectives > 1 {
        n.div_ceil(10)
    } else {
        n.div_ceil(10).min(25)
    }
}

/// Optuna's default observation weights, oldest first: 1 for each of the 25 newest trials, a
/// linear ramp from `1/n` to 1 over the older ones.
pub(crate) fn default_weights(n: usize) -> Vec<f64> {
    if n < 25 {
        return vec![1.0; n];
    }
    let ramp = n - 25;
    let start = 1.0 / n as f64;
    let mut w: Vec<f64> = (0..ramp)
        .map(|i| {
            if ramp == 1 {
                start
            } else {
                start + (1.0 - start) * i as f64 / (ramp - 1) as f64
            }
        })
        .collect();
    w.extend(std::iter::repeat_n(1.0, 25));
    w
}

/// A finished trial as the model sees it.
pub(crate) struct Observation<'a> {
    pub(crate) params: &'a [usize],
    /// Losses (smaller is better), one per objective; empty for pruned trials.
    pub(crate) loss: Vec<f64>,
}

/// The split of observations into good ("below") and bad ("above") groups, as positions into
/// the complete and pruned lists, each group in trial order.
pub(crate) struct Split {
    pub(crate) below: Vec<usize>,
    pub(crate) above_complete: Vec<usize>,
}

/// Splits completed trials (in trial order) into the `n_below` best and the rest: by loss for
/// one objective (ties to the older trial), by non-domination rank for several, the last rank
/// that does not fit whole cut by greedy hypervolume subset selection.
pub(crate) fn split(complete: &[Observation<'_>], d: usize, n_below: usize) -> Split {
    let n = complete.len();
    let n_below = n_below.min(n);
    let mut is_below = vec![false; n];
    if d == 1 {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| {
            complete[i].loss[0]
                .total_cmp(&complete[j].loss[0])
                .then(i.cmp(&j))
        });
        for &i in &order[..n_below] {
            is_below[i] = true;
        }
    } else if n_below > 0 {
        let data: Vec<f64> = complete
            .iter()
            .flat_map(|o| o.loss.iter().copied())
            .collect();
        let ranks = nondomination_ranks(&data, d, n_below);
        let mut taken = 0;
        let mut rank = 0;
        loop {
            let count = ranks.iter().filter(|&&r| r == rank).count();
            if count == 0 || taken + count > n_below {
                break;
            }
            for (i, _) in ranks.iter().enumerate().filter(|&(_, &r)| r == rank) {
                is_below[i] = true;
            }
            taken += count;
            rank += 1;
        }
        if taken < n_below {
            let tied: Vec<usize> = (0..n).filter(|&i| ranks[i] == rank).collect();
            let tied_data: Vec<f64> = tied
                .iter()
                .flat_map(|&i| row(&data, d, i).iter().copied())
                .collect();
            let reference = reference_point(&tied_data, d);
            for k in hssp_greedy(&tied_data, d, n_below - taken, &reference) {
                is_below[tied[k]] = true;
            }
        }
    }
    Split {
        below: (0..n).filter(|&i| is_below[i]).collect(),
        above_complete: (0..n).filter(|&i| !is_below[i]).collect(),
    }
}

/// The fitted model.
pub(crate) enum Model {
    /// Independent TPE: per parameter, the good-group distribution's CDF and the acquisition
    /// score `ln l(c) - ln g(c)` of every choice.
    Independent {
        cdf_below: Vec<Vec<f64>>,
        score: Vec<Vec<f64>>,
    },
    /// Multivariate TPE: l and g are mixtures of product kernels over whole assignments.
    Joint {
        below: Mixture,
        above: Mixture,
        n_choices: Vec<usize>,
    },
}

/// A mixture of product kernels over assignments: one kernel per observation (per parameter,
/// mass `1 + α` on the observed choice and `α` on each choice, normalised) plus a uniform
/// prior kernel; Optuna's multivariate categorical Parzen estimator.
pub(crate) struct Mixture {
    /// Observations, row-major, one row per kernel.
    observed: Vec<usize>,
    /// ln of each observation kernel's normalised weight.
    log_weights: Vec<f64>,
    /// Normalised weight of the prior kernel (1 when there are no observations).
    prior: f64,
    alpha: f64,
}

impl Mixture {
    fn new<'a>(
        rows: impl Iterator<Item = &'a [usize]>,
        weights: &[f64],
        prior_weight: f64,
    ) -> Self {
        let observed: Vec<usize> = rows.flat_map(|r| r.iter().copied()).collect();
        let n = weights.len();
        if n == 0 {
            return Self {
                observed,
                log_weights: Vec::new(),
                prior: 1.0,
                alpha: 0.0,
            };
        }
        let sum: f64 = weights.iter().sum::<f64>() + prior_weight;
        Self {
            observed,
            log_weights: weights.iter().map(|w| (w / sum).ln()).collect(),
            prior: prior_weight / sum,
            alpha: prior_weight / (n + 1) as f64,
        }
    }

    fn log_pdf(&self, x: &[usize], n_choices: &[usize]) -> f64 {
        let log_uniform: f64 = -n_choices.iter().map(|&c| (c as f64).ln()).sum::<f64>();
        if self.log_weights.is_empty() {
            return log_uniform;
        }
        let d = x.len();
        let log_norm: f64 = -n_choices
            .iter()
            .map(|&c| (c as f64).mul_add(self.alpha, 1.0).ln())
            .sum::<f64>();
        let (la, l1a) = (self.alpha.ln(), self.alpha.ln_1p());
        let mut terms: Vec<f64> = self
            .log_weights
            .iter()
            .enumerate()
            .map(|(k, lw)| {
                let row = &self.observed[k * d..(k + 1) * d];
                let m = row.iter().zip(x).filter(|(a, b)| a == b).count();
                lw + log_norm + (d - m) as f64 * la + m as f64 * l1a
            })
            .collect();
        terms.push(self.prior.ln() + log_uniform);
        let max = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        max + terms.iter().map(|t| (t - max).exp()).sum::<f64>().ln()
    }

    fn sample(&self, n_choices: &[usize], rng: &mut SplitMix64) -> Vec<usize> {
        let d = n_choices.len();
        let mut u = rng.next_f64();
        let mut kernel = None;
        for (k, lw) in self.log_weights.iter().enumerate() {
            u -= lw.exp();
            if u < 0.0 {
                kernel = Some(k);
                break;
            }
        }
        n_choices
            .iter()
            .enumerate()
            .map(|(j, &c)| match kernel {
                // Row (α + e_obs) / (cα + 1): the observed choice with probability
                // 1 / (cα + 1), otherwise uniform.
                Some(k) if rng.next_f64() * (c as f64).mul_add(self.alpha, 1.0) < 1.0 => {
                    self.observed[k * d + j]
                }
                _ => rng.below(c),
            })
            .collect()
    }
}

/// A categorical Parzen estimator collapsed to its marginal: each observation is a kernel
/// putting `1 + α` on its own choice and `α` on the others (`α = prior_weight / (n + 1)`,
/// normalised), plus a uniform prior kernel weighing `prior_weight`; kernel weights are
/// `weights` (then normalised). With no observations it is uniform.
fn parzen(
    observed: impl Iterator<Item = (usize, f64)>,
    n_choices: usize,
    n_obs: usize,
    prior_weight: f64,
) -> Vec<f64> {
    let c = n_choices as f64;
    if n_obs == 0 {
        return vec![1.0 / c; n_choices];
    }
    let alpha = prior_weight / (n_obs + 1) as f64;
    let norm = c * alpha + 1.0;
    let mut hits = vec![0.0; n_choices];
    let mut total = 0.0;
    for (choice, w) in observed {
        hits[choice] += w;
        total += w;
    }
    let sum = total + prior_weight;
    hits.iter()
        .map(|&h| ((total * alpha + h) / norm + prior_weight / c) / sum)
        .collect()
}

/// Fits the model. `n_choices` per parameter; `pruned` trials join the bad group.
pub(crate) fn fit(
    n_choices: &[usize],
    complete: &[Observation<'_>],
    pruned: &[&[usize]],
    d: usize,
    prior_weight: f64,
    multivariate: bool,
) -> Model {
    let n_below = default_gamma(complete.len() + pruned.len(), d);
    let split = split(complete, d, n_below);
    // Optuna 5 weighs the good group with the ramp for one objective and uniformly for
    // several (4.x used hypervolume contributions there).
    let below_weights = if d == 1 {
        default_weights(split.below.len())
    } else {
        vec![1.0; split.below.len()]
    };
    // Bad group in trial order: Optuna puts pruned trials with the bad ones. (Our pruned
    // trials are not interleaved by number here; their weight is the ramp's tail.)
    let n_above = split.above_complete.len() + pruned.len();
    let above_weights = default_weights(n_above);
    if multivariate {
        let below_rows = split.below.iter().map(|&i| complete[i].params);
        let above_rows = split
            .above_complete
            .iter()
            .map(|&i| complete[i].params)
            .chain(pruned.iter().copied());
        return Model::Joint {
            below: Mixture::new(below_rows, &below_weights, prior_weight),
            above: Mixture::new(above_rows, &above_weights, prior_weight),
            n_choices: n_choices.to_vec(),
        };
    }
    let mut cdf_below = Vec::with_capacity(n_choices.len());
    let mut score = Vec::with_capacity(n_choices.len());
    for (j, &nc) in n_choices.iter().enumerate() {
        let l = parzen(
            split
                .below
                .iter()
                .zip(&below_weights)
                .map(|(&i, &w)| (complete[i].params[j], w)),
            nc,
            split.below.len(),
            prior_weight,
        );
        let above = split
            .above_complete
            .iter()
            .map(|&i| complete[i].params[j])
            .chain(pruned.iter().map(|p| p[j]));
        let g = parzen(
            above.zip(above_weights.iter().copied()),
            nc,
            n_above,
            prior_weight,
        );
        score.push(l.iter().zip(&g).map(|(a, b)| a.ln() - b.ln()).collect());
        let mut acc = 0.0;
        cdf_below.push(
            l.iter()
                .map(|p| {
                    acc += p;
                    acc
                })
                .collect(),
        );
    }
    Model::Independent { cdf_below, score }
}

impl Model {
    /// One draw from the good-group distribution l(x).
    pub(crate) fn draw(&self, rng: &mut SplitMix64) -> Vec<usize> {
        match self {
            Self::Independent { cdf_below, .. } => cdf_below
                .iter()
                .map(|cdf| {
                    let u = rng.next_f64() * cdf.last().copied().unwrap_or(1.0);
                    cdf.iter().position(|&c| u < c).unwrap_or(cdf.len() - 1)
                })
                .collect(),
            Self::Joint {
                below, n_choices, ..
            } => below.sample(n_choices, rng),
        }
    }

    /// Optuna's TPE step: `n_candidates` draws from l(x), keep the one with the largest
    /// l(x)/g(x) (the first on ties); per parameter for independent TPE, whole assignments
    /// for multivariate TPE.
    pub(crate) fn suggest(&self, n_candidates: usize, rng: &mut SplitMix64) -> Vec<usize> {
        match self {
            Self::Independent { cdf_below, score } => (0..score.len())
                .map(|j| {
                    let cdf = &cdf_below[j];
                    let mut draw = || {
                        let u = rng.next_f64() * cdf.last().copied().unwrap_or(1.0);
                        cdf.iter().position(|&c| u < c).unwrap_or(cdf.len() - 1)
                    };
                    let mut best = draw();
                    for _ in 1..n_candidates {
                        let c = draw();
                        if score[j][c] > score[j][best] {
                            best = c;
                        }
                    }
                    best
                })
                .collect(),
            Self::Joint { .. } => {
                let mut best = self.draw(rng);
                let mut best_score = self.joint_score(&best);
                for _ in 1..n_candidates {
                    let cand = self.draw(rng);
                    let s = self.joint_score(&cand);
                    if s > best_score {
                        best = cand;
                        best_score = s;
                    }
                }
                best
            }
        }
    }

    /// The acquisition `ln l(x) - ln g(x)` of a whole assignment.
    pub(crate) fn joint_score(&self, params: &[usize]) -> f64 {
        match self {
            Self::Independent { score, .. } => params.iter().zip(score).map(|(&c, s)| s[c]).sum(),
            Self::Joint {
                below,
                above,
                n_choices,
            } => below.log_pdf(params, n_choices) - above.log_pdf(params, n_choices),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_and_weights_match_optuna() {
        assert_eq!(default_gamma(0, 1), 0);
        assert_eq!(default_gamma(10, 1), 1);
        assert_eq!(default_gamma(11, 1), 2);
        assert_eq!(default_gamma(1000, 1), 25);
        assert_eq!(default_gamma(1000, 2), 100);
        assert_eq!(default_weights(3), vec![1.0; 3]);
        assert_eq!(default_weights(25), vec![1.0; 25]);
        let w = default_weights(30);
        assert_eq!(w.len(), 30);
        assert!((w[0] - 1.0 / 30.0).abs() < 1e-12);
        assert!((w[4] - 1.0).abs() < 1e-12);
        assert!(w[..5].windows(2).all(|p| p[0] < p[1]));
    }

    #[test]
    fn parzen_is_a_distribution_favouring_observations() {
        let p = parzen([(1, 1.0), (1, 1.0), (2, 1.0)].into_iter(), 4, 3, 1.0);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(p[1] > p[2] && p[2] > p[0] && (p[0] - p[3]).abs() < 1e-15);
        let empty = parzen(std::iter::empty(), 4, 0, 1.0);
        assert_eq!(empty, vec![0.25; 4]);
    }

    #[test]
    fn joint_mixture_sums_to_one_and_favours_observations() {
        let rows: [&[usize]; 3] = [&[0, 1], &[0, 1], &[2, 2]];
        let m = Mixture::new(rows.into_iter(), &[1.0, 1.0, 0.5], 1.0);
        let nc = [3, 3];
        let total: f64 = (0..3)
            .flat_map(|a| (0..3).map(move |b| [a, b]))
            .map(|x| m.log_pdf(&x, &nc).exp())
            .sum();
        assert!((total - 1.0).abs() < 1e-12, "{total}");
        assert!(m.log_pdf(&[0, 1], &nc) > m.log_pdf(&[2, 2], &nc));
        assert!(m.log_pdf(&[2, 2], &nc) > m.log_pdf(&[1, 0], &nc));
        let mut rng = SplitMix64::for_trial(1, 1);
        let hits = (0..2000)
            .filter(|_| m.sample(&nc, &mut rng) == [0, 1])
            .count();
        let expected = m.log_pdf(&[0, 1], &nc).exp() * 2000.0;
        assert!(
            (hits as f64 - expected).abs() < 0.15 * expected,
            "{hits} vs {expected}"
        );
    }

    fn obs(params: &'static [usize], loss: &[f64]) -> Observation<'static> {
        Observation {
            params,
            loss: loss.to_vec(),
        }
    }

    #[test]
    fn single_objective_split_takes_the_best() {
        let c = [
            obs(&[0], &[3.0]),
            obs(&[1], &[1.0]),
            obs(&[2], &[2.0]),
            obs(&[3], &[1.0]),
        ];
        let s = split(&c, 1, 2);
        assert_eq!(s.below, vec![1, 3]);
        assert_eq!(s.above_complete, vec![0, 2]);
    }

    #[test]
    fn multi_objective_split_by_rank_then_hypervolume() {
        // Rank 0: (0,4), (4,0). Rank 1: (1,5), (3,3), (5,1). n_below = 3 takes rank 0 whole
        // and the rank-1 point adding the most hypervolume, (3,3).
        let c = [
            obs(&[0], &[1.0, 5.0]),
            obs(&[1], &[0.0, 4.0]),
            obs(&[2], &[3.0, 3.0]),
            obs(&[3], &[4.0, 0.0]),
            obs(&[0], &[5.0, 1.0]),
        ];
        let s = split(&c, 2, 3);
        assert_eq!(s.below, vec![1, 2, 3]);
    }
}
