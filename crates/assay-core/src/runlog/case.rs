//! One finished case, as the run log and the journal hold it ([`CaseRecord`]), with what every
//! bank's result has in common. Plain data: [`crate::aggregate`] settles and folds it.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::{AlwaysCaseResult, PatternCaseResult, SemanticCaseResult, StateCaseResult};
use crate::answer::AnswerCaseResult;
use crate::bank::BankType;
use crate::scoring::Breakdown;
use crate::verdict::{Verdict, Verdicted};

/// One finished case, as the run log and the journal hold it: `{"bank": "state", "result":
/// {…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "bank", content = "result", rename_all = "lowercase")]
#[allow(clippy::large_enum_variant)] // one record at a time, written and dropped as a case ends
pub enum CaseRecord {
    /// A semantic case.
    #[serde(deserialize_with = "crate::verdict::filled_one")]
    Semantic(SemanticCaseResult),
    /// A state case.
    #[serde(deserialize_with = "crate::verdict::filled_one")]
    State(StateCaseResult),
    /// A pattern case.
    #[serde(deserialize_with = "crate::verdict::filled_one")]
    Pattern(PatternCaseResult),
    /// An always case.
    #[serde(deserialize_with = "crate::verdict::filled_one")]
    Always(AlwaysCaseResult),
    /// An answer case.
    #[serde(deserialize_with = "crate::verdict::filled_one")]
    Answer(AnswerCaseResult),
}

impl CaseRecord {
    /// The bank.
    pub fn bank(&self) -> BankType {
        match self {
            CaseRecord::Semantic(_) => BankType::Semantic,
            CaseRecord::State(_) => BankType::State,
            CaseRecord::Pattern(_) => BankType::Pattern,
            CaseRecord::Always(_) => BankType::Always,
            CaseRecord::Answer(_) => BankType::Answer,
        }
    }

    /// The case's id.
    pub fn test_id(&self) -> &str {
        match self {
            CaseRecord::Semantic(r) => &r.test_id,
            CaseRecord::State(r) => &r.test_id,
            CaseRecord::Pattern(r) => &r.test_id,
            CaseRecord::Always(r) => &r.test_id,
            CaseRecord::Answer(r) => &r.test_id,
        }
    }

    /// The score (`None`: an error kept the case from one).
    pub fn score(&self) -> Option<u32> {
        match self {
            CaseRecord::Semantic(r) => r.score,
            CaseRecord::State(r) => Some(r.score),
            CaseRecord::Pattern(r) => Some(r.score),
            CaseRecord::Always(r) => Some(r.score),
            CaseRecord::Answer(r) => r.score,
        }
    }

    /// Whether it is a critical failure.
    pub fn is_critical_failure(&self) -> bool {
        match self {
            CaseRecord::Pattern(r) => r.is_critical_failure,
            CaseRecord::Answer(r) => r.is_critical_failure,
            _ => false,
        }
    }

    /// Whether it hard-failed.
    pub fn is_hard_fail(&self) -> bool {
        match self {
            CaseRecord::Semantic(r) => r.is_hard_fail,
            CaseRecord::State(r) => r.is_hard_fail,
            CaseRecord::Pattern(r) => r.is_hard_fail,
            CaseRecord::Always(r) => r.is_hard_fail,
            CaseRecord::Answer(r) => r.is_hard_fail,
        }
    }

    /// Why it lost points.
    pub fn breakdown(&self) -> &Breakdown {
        match self {
            CaseRecord::Semantic(r) => &r.breakdown,
            CaseRecord::State(r) => &r.breakdown,
            CaseRecord::Pattern(r) => &r.breakdown,
            CaseRecord::Always(r) => &r.breakdown,
            CaseRecord::Answer(r) => &r.breakdown,
        }
    }

    /// The result as its verdict's holder.
    fn verdicted(&self) -> &dyn Verdicted {
        match self {
            CaseRecord::Semantic(r) => r,
            CaseRecord::State(r) => r,
            CaseRecord::Pattern(r) => r,
            CaseRecord::Always(r) => r,
            CaseRecord::Answer(r) => r,
        }
    }

    /// The case's verdict, as stored when it was scored ([`crate::verdict`]).
    pub fn verdict(&self) -> Cow<'_, Verdict> {
        self.verdicted().verdict()
    }

    /// How long the case took, in milliseconds, where measured.
    pub fn duration_ms(&self) -> Option<f64> {
        match self {
            CaseRecord::Semantic(r) => r.duration_ms,
            CaseRecord::State(r) => r.duration_ms,
            CaseRecord::Pattern(r) => r.duration_ms,
            CaseRecord::Always(r) => r.duration_ms,
            CaseRecord::Answer(r) => r.duration_ms.or(r.latency_ms),
        }
    }

    /// The case's name (its title), possibly empty.
    pub fn name(&self) -> &str {
        match self {
            CaseRecord::Semantic(r) => &r.name,
            CaseRecord::State(r) => &r.name,
            CaseRecord::Pattern(r) => &r.name,
            CaseRecord::Always(r) => &r.name,
            CaseRecord::Answer(r) => &r.name,
        }
    }

    /// The infrastructure error that kept the case from a score, if any.
    pub fn error(&self) -> Option<&str> {
        match self {
            CaseRecord::Semantic(r) => r.error.as_deref(),
            CaseRecord::Answer(r) => r.error.as_deref(),
            _ => None,
        }
    }
}
