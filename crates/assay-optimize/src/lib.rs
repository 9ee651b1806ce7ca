//! Search over categorical parameters for assay's prompt optimizer: a seeded, Optuna-like
//! [`Study`] with a categorical TPE sampler, single- or multi-objective.
//!
//! A [`SearchSpace`] lists named parameters, each with a number of choices (for prompts: one
//! parameter per agent, index 0 its baseline prompt, 1.. its variants). A [`Study`] hands out
//! parameter assignments with [`Study::ask`] and takes objective values back with
//! [`Study::tell`]; [`Study::enqueue`] puts the baseline first; [`Study::best_trial`],
//! [`Study::pareto_front`] and [`Study::best_by_priority`] (the seed's rule: best first
//! objective, then best second) read the result.
//!
//! ```
//! use assay_optimize::{Direction, SearchSpace, Study};
//!
//! let space = SearchSpace::new().with_param("planner", 4)?.with_param("finalizer", 3)?;
//! let mut study = Study::new(space, vec![Direction::Maximize, Direction::Maximize], 42)?;
//! study.enqueue(vec![0, 0])?; // the baseline is trial 0
//! for _ in 0..30 {
//!     let asked = study.ask()?;
//!     if asked.duplicate_of.is_some() {
//!         study.tell_duplicate(asked.number)?; // evaluated before: reuse its values
//!         continue;
//!     }
//!     let (p, f) = (asked.params[0] as f64, asked.params[1] as f64);
//!     study.tell(asked.number, &[p + f, 10.0 - (p - f).abs()])?;
//! }
//! assert_eq!(study.trials()[0].params, vec![0, 0]);
//! let best = study.best_by_priority().expect("trials completed");
//! assert!(study.pareto_front().iter().any(|t| t.number == best.number));
//! # Ok::<(), assay_optimize::Error>(())
//! ```
//!
//! # The sampler
//!
//! Categorical TPE as in Optuna 5's `TPESampler` (Bergstra et al., NeurIPS 2011; Watanabe,
//! "Tree-structured Parzen estimator: understanding its algorithm components", 2023; MOTPE:
//! Ozaki et al., GECCO 2020 / JAIR 2022), with Optuna's defaults:
//!
//! 1. **Start-up.** Until `n_startup_trials` (10) trials are complete or pruned (enqueued ones
//!    count), parameters are drawn uniformly.
//! 2. **Split.** The `n_below = γ(n)` best completed trials form the good group (`⌈n/10⌉`,
//!    capped at 25 for one objective only, as Optuna's two default γ functions), all other
//!    completed and the pruned trials the bad group. One objective: by value (ties to the
//!    older trial). Several: by non-domination rank, whole ranks first; the rank that does
//!    not fit whole is cut by greedy hypervolume subset selection (HSSP) over its distinct
//!    loss vectors, with the reference point `max(1.1 w, 0.9 w)` of that rank's worst values
//!    `w`.
//! 3. **Weights.** Bad group and single-objective good group: Optuna's ramp (the 25 newest
//!    trials weigh 1, older ones linearly from `1/n` up). Multi-objective good group: 1 each
//!    (Optuna 5; 4.x weighed by hypervolume contribution).
//! 4. **Parzen estimators.** l(x) from the good and g(x) from the bad group: a mixture of one
//!    kernel per trial (per parameter, mass `1 + α` on the trial's choice and `α =
//!    prior_weight / (n + 1)` on every choice, normalised) and a uniform prior kernel of
//!    weight `prior_weight` (1.0). Multivariate (Optuna 5's default for one objective): the
//!    kernels are products over all parameters, so l and g model whole assignments.
//!    Independent (its default for several objectives): one such mixture per parameter.
//! 5. **Acquisition.** `n_ei_candidates` (24) draws from l(x), whole assignments when
//!    multivariate, per parameter otherwise; the one with the largest l(x)/g(x) is taken (the
//!    first on ties).
//!
//! Two additions that Optuna lacks, both documented on [`SamplerSettings`] and
//! [`SearchMode`]:
//!
//! - **Duplicates.** `ask` may return an assignment already evaluated; [`Asked::duplicate_of`]
//!   names the earlier trial and [`Study::tell_duplicate`] copies its values, so nothing is
//!   evaluated twice. With `avoid_duplicates` (the default), when TPE's pick was already
//!   evaluated (or is running) and the space still has unevaluated points, the study instead
//!   takes the unevaluated assignment with the highest `ln l − ln g` among the pick's
//!   one-parameter neighbours and `4 × n_ei_candidates` joint draws from l(x) (falling back
//!   to a uniform unevaluated point); start-up draws also skip evaluated points. The
//!   benchmark in `bench/optimizer/` measures what this buys.
//! - **Exhaustive mode.** With `budget` set and a space no larger than it, the study
//!   enumerates every point once (enqueued trials first) and [`Study::search_mode`] says so.
//!
//! Why not the `optimizer` crate (1.0.1, an Optuna-like API)? Its categorical TPE uses
//! Laplace-smoothed counts without Optuna's weights or prior, its MOTPE takes the whole first
//! front as the good group (no γ, no hypervolume tie-break or weights), and it has no notion
//! of duplicate trials or exhaustive search; it also pulls in `parking_lot` and `fastrand`.
//! The categorical case is small enough to write exactly as Optuna does.
//!
//! Randomness comes from an in-crate SplitMix64, one stream per trial number, so a study
//! restored with [`Study::add_trial`] asks for exactly what an uninterrupted one would, and
//! no dependency upgrade can change a seeded run.

#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod error;
mod pareto;
mod rng;
mod space;
mod state;
mod study;
mod tpe;

pub use error::{Error, Result};
pub use space::{Param, SearchSpace};
pub use study::{Asked, Direction, Origin, SamplerSettings, SearchMode, Study, Trial, TrialState};
