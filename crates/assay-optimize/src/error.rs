//! The crate's error type.

use crate::state::TrialState;

/// Everything that can go wrong when building a search space or driving a study.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A parameter was declared with no choices.
    #[error("parameter {name:?} needs at least one choice")]
    NoChoices {
        /// The parameter.
        name: String,
    },
    /// Two parameters share a name.
    #[error("parameter {name:?} is declared twice")]
    DuplicateParam {
        /// The parameter.
        name: String,
    },
    /// The search space has no parameters.
    #[error("the search space has no parameters")]
    EmptySpace,
    /// A study was created without objective directions.
    #[error("a study needs at least one objective direction")]
    NoDirections,
    /// A parameter assignment has the wrong length.
    #[error("expected {expected} parameter values, got {got}")]
    ParamCount {
        /// Parameters in the space.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// A parameter index is out of range.
    #[error("parameter {name:?}: index {index} is out of range 0..{n_choices}")]
    ParamOutOfRange {
        /// The parameter.
        name: String,
        /// The index given.
        index: usize,
        /// Its number of choices.
        n_choices: usize,
    },
    /// A named assignment names a parameter the space lacks.
    #[error("unknown parameter {name:?}")]
    UnknownParam {
        /// The name given.
        name: String,
    },
    /// A named assignment leaves a parameter out.
    #[error("no value for parameter {name:?}")]
    MissingParam {
        /// The parameter.
        name: String,
    },
    /// `tell` got the wrong number of objective values.
    #[error("expected {expected} objective values, got {got}")]
    ValueCount {
        /// Objectives of the study.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// An objective value is NaN or infinite (report the trial as failed instead).
    #[error("objective {index} is not a finite number ({value})")]
    NonFinite {
        /// Which objective.
        index: usize,
        /// The value.
        value: f64,
    },
    /// No trial has this number.
    #[error("trial {number} does not exist")]
    UnknownTrial {
        /// The number given.
        number: usize,
    },
    /// The trial was already told.
    #[error("trial {number} is already finished ({state:?})")]
    TrialFinished {
        /// The trial.
        number: usize,
        /// Its state.
        state: TrialState,
    },
    /// `tell_duplicate` on a trial whose parameters were never evaluated.
    #[error("trial {number} is not a duplicate of a completed trial")]
    NotDuplicate {
        /// The trial.
        number: usize,
    },
    /// `best_trial` on a multi-objective study.
    #[error(
        "the study has {objectives} objectives; best_trial needs one (use pareto_front or best_by_priority)"
    )]
    NotSingleObjective {
        /// Objectives of the study.
        objectives: usize,
    },
    /// Exhaustive mode has evaluated (or is evaluating) every point of the space.
    #[error("all {size} points of the search space have been asked for")]
    Exhausted {
        /// Points in the space.
        size: u128,
    },
    /// A sampler setting is out of range.
    #[error("invalid sampler setting: {0}")]
    Setting(&'static str),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
