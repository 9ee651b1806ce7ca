//! The categorical TPE model: split, weights, Parzen estimators, acquisition.
//!
//! See the crate docs for the algorithm; this module follows Optuna's `TPESampler` (v4/v5,
//! independent sampling) for categorical parameters.

use crate::pareto::{contribution_weights, hssp_greedy, nondomination_ranks, reference_point, row};
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

/// The fitted model: per parameter, the good-group distribution's CDF and the acquisition
/// score `ln l(c) - ln g(c)` of every choice.
pub(crate) struct Model {
    pub(crate) cdf_below: Vec<Vec<f64>>,
    pub(crate) score: Vec<Vec<f64>>,
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
) -> Model {
    let n_below = default_gamma(complete.len() + pruned.len(), d);
    let split = split(complete, d, n_below);
    let below_weights = if d == 1 {
        default_weights(split.below.len())
    } else {
        let data: Vec<f64> = split
            .below
            .iter()
            .flat_map(|&i| complete[i].loss.iter().copied())
            .collect();
        contribution_weights(&data, d)
    };
    // Bad group in trial order: Optuna puts pruned trials with the bad ones. (Our pruned
    // trials are not interleaved by number here; their weight is the ramp's tail.)
    let n_above = split.above_complete.len() + pruned.len();
    let above_weights = default_weights(n_above);
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
    Model { cdf_below, score }
}

impl Model {
    /// Draws one choice of parameter `j` from the good-group distribution l(x).
    pub(crate) fn draw(&self, j: usize, rng: &mut SplitMix64) -> usize {
        let cdf = &self.cdf_below[j];
        let u = rng.next_f64() * cdf.last().copied().unwrap_or(1.0);
        cdf.iter().position(|&c| u < c).unwrap_or(cdf.len() - 1)
    }

    /// Optuna's independent TPE step: per parameter, `n_candidates` draws from l(x), keep the
    /// one with the largest l(x)/g(x) (the first on ties).
    pub(crate) fn suggest(&self, n_candidates: usize, rng: &mut SplitMix64) -> Vec<usize> {
        (0..self.score.len())
            .map(|j| {
                let mut best = self.draw(j, rng);
                for _ in 1..n_candidates {
                    let c = self.draw(j, rng);
                    if self.score[j][c] > self.score[j][best] {
                        best = c;
                    }
                }
                best
            })
            .collect()
    }

    /// Acquisition of a whole assignment: the sum of per-parameter `ln l - ln g`.
    pub(crate) fn joint_score(&self, params: &[usize]) -> f64 {
        params.iter().zip(&self.score).map(|(&c, s)| s[c]).sum()
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
