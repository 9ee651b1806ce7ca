//! The study: trials, ask/tell, enqueue, duplicates, exhaustive mode, best trials.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::pareto::nondomination_ranks;
use crate::rng::SplitMix64;
use crate::space::SearchSpace;
pub use crate::state::TrialState;
use crate::tpe::{self, Observation};

/// Whether an objective is to be made large or small.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Larger is better.
    Maximize,
    /// Smaller is better.
    Minimize,
}

impl Direction {
    /// The value as a loss (smaller is better).
    pub fn loss(self, value: f64) -> f64 {
        match self {
            Self::Maximize => -value,
            Self::Minimize => value,
        }
    }
}

/// How a trial's parameters were chosen (for logs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Taken from the queue filled by [`Study::enqueue`].
    Enqueued,
    /// Uniformly at random (the start-up trials).
    Random,
    /// By the TPE sampler.
    Tpe,
    /// The next unevaluated point of an exhaustive enumeration.
    Exhaustive,
    /// Restored with [`Study::add_trial`].
    Added,
}

/// One trial: a parameter assignment, its state and objective values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// 0-based, in ask order.
    pub number: usize,
    /// One choice index per parameter, in the space's order.
    pub params: Vec<usize>,
    /// The objective values (one per direction) once complete; empty otherwise.
    pub values: Vec<f64>,
    /// Its state.
    pub state: TrialState,
    /// How its parameters were chosen.
    pub origin: Origin,
    /// When its values were copied from an earlier trial with the same parameters.
    pub duplicate_of: Option<usize>,
}

/// What [`Study::ask`] hands out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// The trial number to `tell`.
    pub number: usize,
    /// The parameters to evaluate.
    pub params: Vec<usize>,
    /// A completed trial with exactly these parameters: don't evaluate again, call
    /// [`Study::tell_duplicate`] (and say so in the log).
    pub duplicate_of: Option<usize>,
    /// How the parameters were chosen.
    pub origin: Origin,
}

/// Sampler settings. The defaults are Optuna's `TPESampler` defaults, plus duplicate
/// avoidance (see the crate docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplerSettings {
    /// Random trials before TPE takes over (counted over complete and pruned trials,
    /// enqueued ones included). Optuna: 10.
    pub n_startup_trials: usize,
    /// Candidates drawn from l(x) per parameter. Optuna: 24.
    pub n_ei_candidates: usize,
    /// Weight of the uniform prior kernel in both Parzen estimators. Optuna: 1.0.
    pub prior_weight: f64,
    /// Multivariate TPE (joint product-kernel estimators over whole assignments) or
    /// independent TPE (one estimator per parameter). `None`: Optuna 5's default, multivariate
    /// for one objective and independent for several.
    pub multivariate: Option<bool>,
    /// When the sampler's pick was already evaluated and the space still has unevaluated
    /// points, take the best-scoring unevaluated candidate instead (Optuna does not).
    pub avoid_duplicates: bool,
    /// The trial budget. When the whole space has no more points than this, the study
    /// enumerates it instead of sampling ([`SearchMode::Exhaustive`]).
    pub budget: Option<usize>,
}

impl Default for SamplerSettings {
    fn default() -> Self {
        Self {
            n_startup_trials: 10,
            n_ei_candidates: 24,
            prior_weight: 1.0,
            multivariate: None,
            avoid_duplicates: true,
            budget: None,
        }
    }
}

/// How a study picks parameters; log it at the start of a search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchMode {
    /// Every point of the space is evaluated once, in mixed-radix order after the enqueued
    /// trials, because the space is no larger than the budget.
    Exhaustive {
        /// Points in the space.
        size: u128,
    },
    /// Random start-up trials, then TPE.
    Tpe {
        /// Points in the space (`None` past `u128::MAX`).
        size: Option<u128>,
        /// Random trials first.
        n_startup_trials: usize,
    },
}

impl fmt::Display for SearchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exhaustive { size } => write!(
                f,
                "exhaustive: the space has {size} points, no more than the trial budget; each is evaluated once"
            ),
            Self::Tpe {
                size,
                n_startup_trials,
            } => {
                match size {
                    Some(s) => write!(f, "TPE over {s} points")?,
                    None => write!(f, "TPE")?,
                }
                write!(f, " after {n_startup_trials} random start-up trials")
            }
        }
    }
}

/// An Optuna-like study over a categorical [`SearchSpace`]: ask for parameters, evaluate them,
/// tell the values. Deterministic for a seed: what trial `n` asks for depends only on the
/// seed, `n` and the trials before it (each trial draws from its own random stream).
#[derive(Clone, Debug)]
pub struct Study {
    space: SearchSpace,
    directions: Vec<Direction>,
    seed: u64,
    settings: SamplerSettings,
    trials: Vec<Trial>,
    queue: VecDeque<Vec<usize>>,
    /// Parameters of completed trials → the first such trial.
    completed: HashMap<Vec<usize>, usize>,
    /// Parameters of running and pruned trials.
    occupied: HashSet<Vec<usize>>,
    mode: SearchMode,
    cursor: u128,
}

impl Study {
    /// A study with Optuna's default sampler settings (see [`SamplerSettings`]).
    pub fn new(space: SearchSpace, directions: Vec<Direction>, seed: u64) -> Result<Self> {
        Self::with_settings(space, directions, seed, SamplerSettings::default())
    }

    /// A study with explicit sampler settings.
    pub fn with_settings(
        space: SearchSpace,
        directions: Vec<Direction>,
        seed: u64,
        settings: SamplerSettings,
    ) -> Result<Self> {
        if space.is_empty() {
            return Err(Error::EmptySpace);
        }
        if directions.is_empty() {
            return Err(Error::NoDirections);
        }
        if settings.n_ei_candidates == 0 {
            return Err(Error::Setting("n_ei_candidates must be at least 1"));
        }
        if !(settings.prior_weight.is_finite() && settings.prior_weight > 0.0) {
            return Err(Error::Setting("prior_weight must be a positive number"));
        }
        let size = space.size();
        let mode = match (size, settings.budget) {
            (Some(size), Some(budget)) if size <= budget as u128 => SearchMode::Exhaustive { size },
            _ => SearchMode::Tpe {
                size,
                n_startup_trials: settings.n_startup_trials,
            },
        };
        Ok(Self {
            space,
            directions,
            seed,
            settings,
            trials: Vec::new(),
            queue: VecDeque::new(),
            completed: HashMap::new(),
            occupied: HashSet::new(),
            mode,
            cursor: 0,
        })
    }

    /// The search space.
    pub fn space(&self) -> &SearchSpace {
        &self.space
    }

    /// The objective directions.
    pub fn directions(&self) -> &[Direction] {
        &self.directions
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The sampler settings.
    pub fn settings(&self) -> &SamplerSettings {
        &self.settings
    }

    /// Exhaustive enumeration or TPE (decided at creation from the budget).
    pub fn search_mode(&self) -> SearchMode {
        self.mode
    }

    /// All trials, in number order.
    pub fn trials(&self) -> &[Trial] {
        &self.trials
    }

    /// Trial `number`.
    pub fn trial(&self, number: usize) -> Option<&Trial> {
        self.trials.get(number)
    }

    /// The first completed trial with exactly these parameters.
    pub fn find_complete(&self, params: &[usize]) -> Option<usize> {
        self.completed.get(params).copied()
    }

    /// Adds a choice to parameter `param` (a new prompt for an agent, proposed during the
    /// study) and returns its index (the old `n_choices`). Trials so far keep their values;
    /// later asks sample from the larger space. An exhaustive study stays exhaustive when the
    /// larger space still fits `budget` (the trials it may still ask, counted from trial 0),
    /// enumerating the points it has not seen; otherwise it continues with TPE. The same
    /// calls in the same order give the same study, so a resumed run replays it exactly.
    pub fn add_choice(&mut self, param: usize, budget: Option<usize>) -> Result<usize> {
        let index = self.space.add_choice(param)?;
        self.settings.budget = budget;
        let size = self.space.size();
        self.mode = match (size, budget, self.mode) {
            (Some(size), Some(budget), SearchMode::Exhaustive { .. }) if size <= budget as u128 => {
                SearchMode::Exhaustive { size }
            }
            _ => SearchMode::Tpe {
                size,
                n_startup_trials: self.settings.n_startup_trials,
            },
        };
        self.cursor = 0;
        Ok(index)
    }

    /// Queues a parameter assignment: the next `ask` returns it before sampling anything
    /// (Optuna's `enqueue_trial`; the baseline, all zeros, goes first).
    pub fn enqueue(&mut self, params: Vec<usize>) -> Result<()> {
        self.space.validate(&params)?;
        self.queue.push_back(params);
        Ok(())
    }

    /// [`Study::enqueue`] by parameter name.
    pub fn enqueue_named<'a>(
        &mut self,
        named: impl IntoIterator<Item = (&'a str, usize)>,
    ) -> Result<()> {
        let params = self.space.assignment(named)?;
        self.enqueue(params)
    }

    /// The next trial's parameters. If `duplicate_of` is set, those parameters were already
    /// evaluated: reuse the values with [`Study::tell_duplicate`].
    pub fn ask(&mut self) -> Result<Asked> {
        let number = self.trials.len();
        let (params, origin) = if let Some(p) = self.queue.pop_front() {
            (p, Origin::Enqueued)
        } else if let SearchMode::Exhaustive { size } = self.mode {
            (self.next_unvisited(size)?, Origin::Exhaustive)
        } else {
            let mut rng = SplitMix64::for_trial(self.seed, number);
            let finished = self
                .trials
                .iter()
                .filter(|t| matches!(t.state, TrialState::Complete | TrialState::Pruned))
                .count();
            if finished < self.settings.n_startup_trials {
                (self.sample_random(&mut rng), Origin::Random)
            } else {
                (self.sample_tpe(&mut rng), Origin::Tpe)
            }
        };
        let duplicate_of = self.find_complete(&params);
        self.occupied.insert(params.clone());
        self.trials.push(Trial {
            number,
            params: params.clone(),
            values: Vec::new(),
            state: TrialState::Running,
            origin,
            duplicate_of: None,
        });
        Ok(Asked {
            number,
            params,
            duplicate_of,
            origin,
        })
    }

    fn running(&mut self, number: usize) -> Result<&mut Trial> {
        let trial = self
            .trials
            .get_mut(number)
            .ok_or(Error::UnknownTrial { number })?;
        if trial.state != TrialState::Running {
            return Err(Error::TrialFinished {
                number,
                state: trial.state,
            });
        }
        Ok(trial)
    }

    fn check_values(&self, values: &[f64]) -> Result<()> {
        if values.len() != self.directions.len() {
            return Err(Error::ValueCount {
                expected: self.directions.len(),
                got: values.len(),
            });
        }
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(Error::NonFinite { index, value });
        }
        Ok(())
    }

    fn complete(&mut self, number: usize, values: Vec<f64>, duplicate_of: Option<usize>) {
        let trial = &mut self.trials[number];
        trial.values = values;
        trial.state = TrialState::Complete;
        trial.duplicate_of = duplicate_of;
        let params = trial.params.clone();
        self.occupied.remove(&params);
        self.completed.entry(params).or_insert(number);
    }

    /// Finishes trial `number` with one value per objective.
    pub fn tell(&mut self, number: usize, values: &[f64]) -> Result<()> {
        self.check_values(values)?;
        self.running(number)?;
        self.complete(number, values.to_vec(), None);
        Ok(())
    }

    /// Finishes trial `number` with the values of the earlier completed trial that had the
    /// same parameters; returns that trial's number.
    pub fn tell_duplicate(&mut self, number: usize) -> Result<usize> {
        let params = self.running(number)?.params.clone();
        let original = self
            .find_complete(&params)
            .ok_or(Error::NotDuplicate { number })?;
        let values = self.trials[original].values.clone();
        self.complete(number, values, Some(original));
        Ok(original)
    }

    /// Marks trial `number` failed: the sampler ignores it and may propose it again.
    pub fn tell_failed(&mut self, number: usize) -> Result<()> {
        let trial = self.running(number)?;
        trial.state = TrialState::Failed;
        let params = trial.params.clone();
        self.occupied.remove(&params);
        Ok(())
    }

    /// Marks trial `number` pruned: the sampler counts it with the bad trials.
    pub fn tell_pruned(&mut self, number: usize) -> Result<()> {
        self.running(number)?.state = TrialState::Pruned;
        Ok(())
    }

    /// Appends a trial as another process left it, without asking: how a study shared by
    /// several workers is rebuilt from its storage, each trial in number order. A running
    /// trial's parameters are occupied (the sampler avoids them, as for this process's own);
    /// `values` are a complete trial's (ignored otherwise); a complete trial whose parameters
    /// an earlier one had is a duplicate of it. Returns its number.
    pub fn restore(
        &mut self,
        params: Vec<usize>,
        state: TrialState,
        values: &[f64],
        origin: Origin,
    ) -> Result<usize> {
        self.space.validate(&params)?;
        if state == TrialState::Complete {
            self.check_values(values)?;
        }
        let number = self.trials.len();
        let duplicate_of = self.find_complete(&params);
        if self.queue.front() == Some(&params) {
            self.queue.pop_front();
        }
        self.trials.push(Trial {
            number,
            params: params.clone(),
            values: Vec::new(),
            state: TrialState::Running,
            origin,
            duplicate_of: None,
        });
        match state {
            TrialState::Complete => self.complete(number, values.to_vec(), duplicate_of),
            TrialState::Running | TrialState::Pruned => {
                self.trials[number].state = state;
                self.occupied.insert(params);
            }
            TrialState::Failed => self.trials[number].state = state,
        }
        Ok(number)
    }

    /// Appends a completed trial without asking (Optuna's `add_trial`): how a resumed study
    /// restores its journal. Restoring every finished trial in order makes later asks the same
    /// as an uninterrupted study's. Returns its number.
    pub fn add_trial(&mut self, params: Vec<usize>, values: &[f64]) -> Result<usize> {
        self.restore(params, TrialState::Complete, values, Origin::Added)
    }

    fn losses(&self, trial: &Trial) -> Vec<f64> {
        trial
            .values
            .iter()
            .zip(&self.directions)
            .map(|(&v, d)| d.loss(v))
            .collect()
    }

    /// The best completed trial of a single-objective study (the earliest on ties).
    pub fn best_trial(&self) -> Result<Option<&Trial>> {
        if self.directions.len() != 1 {
            return Err(Error::NotSingleObjective {
                objectives: self.directions.len(),
            });
        }
        Ok(self.best_by_priority())
    }

    /// Completed trials no other completed trial dominates (Optuna's `best_trials`), in
    /// number order. Trials with equal values are all kept, duplicates included.
    pub fn pareto_front(&self) -> Vec<&Trial> {
        let done: Vec<&Trial> = self
            .trials
            .iter()
            .filter(|t| t.state == TrialState::Complete)
            .collect();
        let data: Vec<f64> = done.iter().flat_map(|t| self.losses(t)).collect();
        let ranks = nondomination_ranks(&data, self.directions.len(), 1);
        done.into_iter()
            .zip(ranks)
            .filter(|&(_, r)| r == 0)
            .map(|(t, _)| t)
            .collect()
    }

    /// The seed's best-trial rule: best first objective, then best second, and so on (for
    /// `maximize` objectives, highest first); the earliest trial on a full tie. The result is
    /// always on the Pareto front.
    pub fn best_by_priority(&self) -> Option<&Trial> {
        self.best_by_priority_among(|_| true)
    }

    /// [`Study::best_by_priority`] among the completed trials `keep` accepts (for the prompt
    /// optimizer: those of hand-written prompts only).
    pub fn best_by_priority_among(&self, keep: impl Fn(&Trial) -> bool) -> Option<&Trial> {
        self.trials
            .iter()
            .filter(|t| t.state == TrialState::Complete && keep(t))
            .min_by(|a, b| {
                let (la, lb) = (self.losses(a), self.losses(b));
                la.iter()
                    .zip(&lb)
                    .map(|(x, y)| x.total_cmp(y))
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(a.number.cmp(&b.number))
            })
    }

    fn seen(&self, params: &[usize]) -> bool {
        self.completed.contains_key(params) || self.occupied.contains(params)
    }

    fn unseen_left(&self) -> bool {
        let running_only = self
            .occupied
            .iter()
            .filter(|p| !self.completed.contains_key(*p))
            .count();
        let seen = (self.completed.len() + running_only) as u128;
        self.space.size().is_none_or(|s| seen < s)
    }

    fn next_unvisited(&mut self, size: u128) -> Result<Vec<usize>> {
        while self.cursor < size {
            let params = self.space.decode(self.cursor);
            self.cursor += 1;
            if !self.seen(&params) {
                return Ok(params);
            }
        }
        Err(Error::Exhausted { size })
    }

    fn uniform(&self, rng: &mut SplitMix64) -> Vec<usize> {
        self.space
            .params()
            .iter()
            .map(|p| rng.below(p.n_choices))
            .collect()
    }

    fn sample_random(&self, rng: &mut SplitMix64) -> Vec<usize> {
        let mut params = self.uniform(rng);
        if self.settings.avoid_duplicates {
            for _ in 0..64 {
                if !self.seen(&params) {
                    break;
                }
                params = self.uniform(rng);
            }
        }
        params
    }

    fn sample_tpe(&self, rng: &mut SplitMix64) -> Vec<usize> {
        let d = self.directions.len();
        let mut complete = Vec::new();
        let mut pruned = Vec::new();
        for t in &self.trials {
            match t.state {
                TrialState::Complete => complete.push(Observation {
                    params: &t.params,
                    loss: self.losses(t),
                }),
                TrialState::Pruned => pruned.push(t.params.as_slice()),
                TrialState::Running | TrialState::Failed => {}
            }
        }
        let n_choices: Vec<usize> = self.space.params().iter().map(|p| p.n_choices).collect();
        let model = tpe::fit(
            &n_choices,
            &complete,
            &pruned,
            d,
            self.settings.prior_weight,
            self.settings.multivariate.unwrap_or(d == 1),
        );
        let pick = model.suggest(self.settings.n_ei_candidates, rng);
        if !self.settings.avoid_duplicates || !self.seen(&pick) || !self.unseen_left() {
            return pick;
        }
        // Steer away from a duplicate: the best-scoring unseen assignment among the pick's
        // one-parameter neighbours and fresh joint draws from l(x).
        let mut best: Option<(f64, Vec<usize>)> = None;
        let consider = |cand: Vec<usize>, best: &mut Option<(f64, Vec<usize>)>| {
            if !self.seen(&cand) {
                let s = model.joint_score(&cand);
                if best.as_ref().is_none_or(|(b, _)| s > *b) {
                    *best = Some((s, cand));
                }
            }
        };
        for (j, p) in self.space.params().iter().enumerate() {
            for c in (0..p.n_choices).filter(|&c| c != pick[j]) {
                let mut cand = pick.clone();
                cand[j] = c;
                consider(cand, &mut best);
            }
        }
        for _ in 0..4 * self.settings.n_ei_candidates {
            consider(model.draw(rng), &mut best);
        }
        if let Some((_, cand)) = best {
            return cand;
        }
        for _ in 0..1024 {
            let cand = self.uniform(rng);
            if !self.seen(&cand) {
                return cand;
            }
        }
        pick
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_restored_study_asks_what_the_original_would() {
        let space = SearchSpace::new()
            .with_param("a", 4)
            .unwrap()
            .with_param("b", 3)
            .unwrap();
        let settings = SamplerSettings {
            n_startup_trials: 3,
            ..SamplerSettings::default()
        };
        let mut original = Study::with_settings(
            space.clone(),
            vec![Direction::Maximize],
            7,
            settings.clone(),
        )
        .unwrap();
        original.enqueue(vec![0, 0]).unwrap();
        let mut asked = Vec::new();
        for _ in 0..6 {
            let a = original.ask().unwrap();
            let value = (a.params[0] * 3 + a.params[1]) as f64;
            if a.duplicate_of.is_some() {
                original.tell_duplicate(a.number).unwrap();
            } else {
                original.tell(a.number, &[value]).unwrap();
            }
            asked.push(a);
        }
        // One more, left running.
        let running = original.ask().unwrap();

        let mut rebuilt =
            Study::with_settings(space, vec![Direction::Maximize], 7, settings).unwrap();
        rebuilt.enqueue(vec![0, 0]).unwrap();
        for t in &original.trials()[..6] {
            rebuilt
                .restore(t.params.clone(), t.state, &t.values, t.origin)
                .unwrap();
        }
        rebuilt
            .restore(
                running.params.clone(),
                TrialState::Running,
                &[],
                running.origin,
            )
            .unwrap();
        assert_eq!(rebuilt.trials().len(), 7);
        assert_eq!(
            original.ask().unwrap().params,
            rebuilt.ask().unwrap().params
        );
        // The running trial's parameters are occupied, not complete: not a duplicate.
        assert_eq!(rebuilt.find_complete(&running.params), None);
    }

    use super::*;

    fn space(n_params: usize, n_choices: usize) -> SearchSpace {
        (0..n_params).fold(SearchSpace::new(), |s, i| {
            s.with_param(format!("p{i}"), n_choices).unwrap()
        })
    }

    /// Separable: each parameter's best choice is `(i + 1) % n`, worth `i + 1`.
    fn separable(params: &[usize], n: usize) -> f64 {
        params
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                if c == (i + 1) % n {
                    (i + 1) as f64
                } else {
                    0.0
                }
            })
            .sum()
    }

    fn run(study: &mut Study, n: usize, f: impl Fn(&[usize]) -> Vec<f64>) {
        for _ in 0..n {
            let a = study.ask().unwrap();
            if a.duplicate_of.is_some() {
                study.tell_duplicate(a.number).unwrap();
            } else {
                study.tell(a.number, &f(&a.params)).unwrap();
            }
        }
    }

    #[test]
    fn same_seed_same_trials_other_seed_others() {
        let go = |seed| {
            let mut s = Study::new(space(5, 4), vec![Direction::Maximize], seed).unwrap();
            run(&mut s, 60, |p| vec![separable(p, 4)]);
            s.trials()
                .iter()
                .map(|t| t.params.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(go(7), go(7));
        assert_ne!(go(7), go(8));
    }

    #[test]
    fn enqueued_baseline_is_trial_zero() {
        let mut s = Study::new(space(3, 4), vec![Direction::Maximize], 1).unwrap();
        s.enqueue_named([("p2", 0), ("p0", 0), ("p1", 0)]).unwrap();
        s.enqueue(vec![1, 2, 3]).unwrap();
        assert!(matches!(
            s.enqueue(vec![4, 0, 0]),
            Err(Error::ParamOutOfRange { .. })
        ));
        let a = s.ask().unwrap();
        assert_eq!(
            (a.number, a.params, a.origin),
            (0, vec![0, 0, 0], Origin::Enqueued)
        );
        s.tell(0, &[1.0]).unwrap();
        let b = s.ask().unwrap();
        assert_eq!((b.params, b.origin), (vec![1, 2, 3], Origin::Enqueued));
        assert_eq!(s.ask().unwrap().origin, Origin::Random);
    }

    #[test]
    fn tell_checks_its_input() {
        let mut s = Study::new(space(2, 2), vec![Direction::Maximize; 2], 1).unwrap();
        let a = s.ask().unwrap();
        assert!(matches!(
            s.tell(a.number, &[1.0]),
            Err(Error::ValueCount { .. })
        ));
        assert!(matches!(
            s.tell(a.number, &[1.0, f64::NAN]),
            Err(Error::NonFinite { index: 1, .. })
        ));
        assert!(matches!(
            s.tell(9, &[1.0, 1.0]),
            Err(Error::UnknownTrial { number: 9 })
        ));
        s.tell(a.number, &[1.0, 2.0]).unwrap();
        assert!(matches!(
            s.tell(a.number, &[1.0, 2.0]),
            Err(Error::TrialFinished { .. })
        ));
        assert!(matches!(
            s.best_trial(),
            Err(Error::NotSingleObjective { objectives: 2 })
        ));
        assert!(Study::new(space(1, 2), vec![], 1).is_err());
        assert!(Study::new(SearchSpace::new(), vec![Direction::Minimize], 1).is_err());
    }

    #[test]
    fn duplicates_are_named_and_reuse_values() {
        let settings = SamplerSettings {
            avoid_duplicates: false,
            ..SamplerSettings::default()
        };
        let mut s =
            Study::with_settings(space(2, 2), vec![Direction::Maximize], 3, settings).unwrap();
        s.enqueue(vec![1, 1]).unwrap();
        s.enqueue(vec![1, 1]).unwrap();
        let a = s.ask().unwrap();
        assert_eq!(a.duplicate_of, None);
        assert!(matches!(
            s.tell_duplicate(a.number),
            Err(Error::NotDuplicate { .. })
        ));
        s.tell(a.number, &[5.0]).unwrap();
        let b = s.ask().unwrap();
        assert_eq!(b.duplicate_of, Some(0));
        assert_eq!(s.tell_duplicate(b.number).unwrap(), 0);
        assert_eq!(s.trial(1).unwrap().values, vec![5.0]);
        assert_eq!(s.trial(1).unwrap().duplicate_of, Some(0));
        // A failed trial's parameters are not a duplicate.
        s.enqueue(vec![0, 0]).unwrap();
        s.enqueue(vec![0, 0]).unwrap();
        let c = s.ask().unwrap();
        s.tell_failed(c.number).unwrap();
        assert_eq!(s.ask().unwrap().duplicate_of, None);
    }

    #[test]
    fn avoiding_duplicates_covers_a_small_space() {
        // 16 points, 16 asks, no budget (so TPE, not enumeration): all distinct.
        let mut s = Study::new(space(2, 4), vec![Direction::Maximize], 5).unwrap();
        run(&mut s, 16, |p| vec![separable(p, 4)]);
        let distinct: HashSet<_> = s.trials().iter().map(|t| t.params.clone()).collect();
        assert_eq!(distinct.len(), 16);
        assert!(s.trials().iter().all(|t| t.duplicate_of.is_none()));
    }

    #[test]
    fn exhaustive_when_the_space_fits_the_budget() {
        let settings = SamplerSettings {
            budget: Some(20),
            ..SamplerSettings::default()
        };
        let mut s =
            Study::with_settings(space(2, 3), vec![Direction::Minimize], 1, settings.clone())
                .unwrap();
        assert_eq!(s.search_mode(), SearchMode::Exhaustive { size: 9 });
        assert!(s.search_mode().to_string().starts_with("exhaustive"));
        s.enqueue(vec![0, 0]).unwrap();
        run(&mut s, 9, |p| vec![separable(p, 3)]);
        let mut seen: Vec<_> = s.trials().iter().map(|t| t.params.clone()).collect();
        assert_eq!(seen[0], vec![0, 0]);
        assert!(
            s.trials()[1..]
                .iter()
                .all(|t| t.origin == Origin::Exhaustive)
        );
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 9);
        assert!(matches!(s.ask(), Err(Error::Exhausted { size: 9 })));
        let big =
            Study::with_settings(space(3, 3), vec![Direction::Minimize], 1, settings).unwrap();
        assert!(matches!(
            big.search_mode(),
            SearchMode::Tpe { size: Some(27), .. }
        ));
    }

    fn brute_front(s: &Study) -> Vec<usize> {
        let done: Vec<&Trial> = s
            .trials()
            .iter()
            .filter(|t| t.state == TrialState::Complete)
            .collect();
        let loss = |t: &Trial| s.losses(t);
        done.iter()
            .filter(|t| {
                !done
                    .iter()
                    .any(|o| crate::pareto::dominates(&loss(o), &loss(t)))
            })
            .map(|t| t.number)
            .collect()
    }

    #[test]
    fn pareto_front_matches_brute_force() {
        for seed in 0..5 {
            let dirs = vec![
                Direction::Maximize,
                Direction::Minimize,
                Direction::Maximize,
            ];
            let mut s = Study::new(space(4, 3), dirs, seed).unwrap();
            run(&mut s, 50, |p| {
                vec![
                    p[0] as f64 + p[1] as f64,
                    (p[1] * p[2]) as f64,
                    (p[3] as f64 - p[0] as f64).abs(),
                ]
            });
            let front: Vec<usize> = s.pareto_front().iter().map(|t| t.number).collect();
            assert_eq!(front, brute_front(&s));
            let best = s.best_by_priority().unwrap();
            assert!(front.contains(&best.number));
            let top = s
                .trials()
                .iter()
                .map(|t| t.values[0])
                .fold(f64::MIN, f64::max);
            assert_eq!(best.values[0], top);
        }
    }

    #[test]
    fn best_by_priority_is_the_seeds_rule() {
        let mut s = Study::new(space(1, 4), vec![Direction::Maximize; 2], 0).unwrap();
        for (i, v) in [[3.0, 0.5], [4.0, 0.2], [4.0, 0.7], [2.0, 0.9]]
            .iter()
            .enumerate()
        {
            s.add_trial(vec![i], v).unwrap();
        }
        assert_eq!(s.best_by_priority().unwrap().number, 2);
        let front: Vec<usize> = s.pareto_front().iter().map(|t| t.number).collect();
        assert_eq!(front, vec![2, 3]);
    }

    #[test]
    fn restored_study_asks_the_same() {
        let mut a = Study::new(
            space(4, 4),
            vec![Direction::Maximize, Direction::Maximize],
            9,
        )
        .unwrap();
        a.enqueue(vec![0; 4]).unwrap();
        let f = |p: &[usize]| vec![separable(p, 4), p[0] as f64];
        run(&mut a, 30, f);
        let mut b = Study::new(
            space(4, 4),
            vec![Direction::Maximize, Direction::Maximize],
            9,
        )
        .unwrap();
        b.enqueue(vec![0; 4]).unwrap();
        for t in &a.trials()[..20] {
            b.add_trial(t.params.clone(), &t.values).unwrap();
        }
        for t in &a.trials()[20..] {
            let asked = b.ask().unwrap();
            assert_eq!(asked.params, t.params);
            if asked.duplicate_of.is_some() {
                b.tell_duplicate(asked.number).unwrap();
            } else {
                b.tell(asked.number, &t.values).unwrap();
            }
        }
    }

    #[test]
    fn a_choice_added_mid_study_is_sampled_and_replays_the_same() {
        let grow = |s: &mut Study| {
            let f = |p: &[usize]| vec![p.iter().map(|&i| i as f64).sum::<f64>()];
            run(s, 12, f);
            assert_eq!(s.add_choice(1, None).unwrap(), 4);
            s.enqueue(vec![0, 4, 0]).unwrap();
            run(s, 10, f);
        };
        let mut a = Study::new(space(3, 4), vec![Direction::Maximize], 4).unwrap();
        grow(&mut a);
        assert_eq!(a.space().params()[1].n_choices, 5);
        assert_eq!(a.trials()[12].params, vec![0, 4, 0]);
        assert!(
            a.trials()[13..].iter().any(|t| t.params[1] == 4),
            "later trials sample the new choice"
        );
        assert!(matches!(
            a.add_choice(7, None),
            Err(Error::ParamCount { .. })
        ));
        let mut b = Study::new(space(3, 4), vec![Direction::Maximize], 4).unwrap();
        grow(&mut b);
        let params = |s: &Study| {
            s.trials()
                .iter()
                .map(|t| t.params.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(params(&a), params(&b));
    }

    #[test]
    fn an_exhaustive_study_that_grows_enumerates_the_new_points() {
        let settings = SamplerSettings {
            budget: Some(4),
            ..SamplerSettings::default()
        };
        let mut s =
            Study::with_settings(space(2, 2), vec![Direction::Minimize], 1, settings).unwrap();
        run(&mut s, 4, |p| vec![p[0] as f64]);
        s.add_choice(0, Some(6)).unwrap();
        assert!(matches!(
            s.search_mode(),
            SearchMode::Exhaustive { size: 6 }
        ));
        run(&mut s, 2, |p| vec![p[0] as f64]);
        let mut seen: Vec<_> = s.trials().iter().map(|t| t.params.clone()).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 6, "every point once");
        s.add_choice(1, Some(7)).unwrap();
        assert!(matches!(s.search_mode(), SearchMode::Tpe { .. }));
    }

    #[test]
    fn pruned_trials_count_for_start_up_failed_ones_do_not() {
        let settings = SamplerSettings {
            n_startup_trials: 4,
            ..SamplerSettings::default()
        };
        let mut s =
            Study::with_settings(space(3, 4), vec![Direction::Minimize], 2, settings).unwrap();
        for i in 0..5 {
            let a = s.ask().unwrap();
            assert_eq!(a.origin, Origin::Random, "trial {i}");
            match i % 3 {
                0 => s.tell(a.number, &[1.0]).unwrap(),
                1 => s.tell_pruned(a.number).unwrap(),
                _ => s.tell_failed(a.number).unwrap(),
            }
        }
        // 2 complete + 2 pruned = 4 finished (the failed one does not count): TPE now.
        let a = s.ask().unwrap();
        assert_eq!(a.origin, Origin::Tpe);
        assert_eq!(s.trial(2).unwrap().state, TrialState::Failed);
        assert!(matches!(s.tell_pruned(2), Err(Error::TrialFinished { .. })));
    }

    fn trials_to_optimum(seed: u64, settings: SamplerSettings, budget: usize) -> usize {
        let mut s =
            Study::with_settings(space(6, 4), vec![Direction::Maximize], seed, settings).unwrap();
        let optimum: Vec<usize> = (0..6).map(|i| (i + 1) % 4).collect();
        for n in 1..=budget {
            let a = s.ask().unwrap();
            if a.params == optimum {
                return n;
            }
            s.tell(a.number, &[separable(&a.params, 4)]).unwrap();
        }
        budget + 1
    }

    #[test]
    fn tpe_beats_random_search_on_a_separable_objective() {
        let random = SamplerSettings {
            n_startup_trials: usize::MAX,
            ..SamplerSettings::default()
        };
        let independent = SamplerSettings {
            multivariate: Some(false),
            ..SamplerSettings::default()
        };
        let total = |settings: &SamplerSettings| -> usize {
            (0..10u64)
                .map(|s| trials_to_optimum(s, settings.clone(), 400))
                .sum()
        };
        let rnd = total(&random);
        for settings in [SamplerSettings::default(), independent] {
            let tpe = total(&settings);
            assert!(
                tpe * 2 < rnd,
                "TPE {tpe} vs random {rnd} trials over 10 seeds ({settings:?})"
            );
        }
    }
}
