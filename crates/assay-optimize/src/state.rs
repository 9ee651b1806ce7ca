//! A trial's state, shared by the study and the error type (its own module, so that neither
//! imports the other).

use serde::{Deserialize, Serialize};

/// Where a trial is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrialState {
    /// Asked for, not yet told.
    Running,
    /// Told its objective values.
    Complete,
    /// The evaluation failed; the sampler ignores it and may propose its parameters again.
    Failed,
    /// Stopped early; the sampler counts it with the bad trials.
    Pruned,
}
