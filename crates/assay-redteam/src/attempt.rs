//! One attempt's record: what was sent, what came back, the evidence (the journal's lines,
//! the report's findings).

use assay_core::UserState;
use assay_core::answer::ContextPlant;
use serde::{Deserialize, Serialize};

use crate::evidence::Evidence;
use crate::family::Family;

/// One attempt: what was sent, what came back, and whether the attack worked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// `<family prefix>-<index>`, e.g. `kb-0042`: with the run's seed it names the attack.
    pub id: String,
    /// The family.
    pub family: Family,
    /// Its index in the family.
    pub index: usize,
    /// The technique: the transform chain (`confusables+typo`) or the payload and how it was
    /// carried (`override-prefix/base64`).
    pub technique: String,
    /// What the payload wanted (`canary`, `system-prompt`, `exfiltration`, `tool-call`,
    /// `private-state`), or `evade` for a crisis evasion.
    pub objective: String,
    /// The case or rule it was made from.
    pub source: String,
    /// The message sent.
    pub input: String,
    /// The crisis message before it was rewritten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<String>,
    /// The payload's text, as planted or sent before any encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// Where the payload was planted (`entity handler_x (end)`, `user_state.private_note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planted_in: Option<String>,
    /// The user state sent, when the attack changed the case's (leakage's canaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_state: Option<UserState>,
    /// The entity texts as planted in the context sent (what a draft answer case replays).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planted: Vec<ContextPlant>,
    /// The product's reply (or, for a crisis evasion, the entities the matcher brought in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Whether the attack worked: there is evidence.
    pub success: bool,
    /// The evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
    /// An infrastructure error (the product failed): the attempt is neither a success nor a
    /// failure of the attack and is left out of the rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Attempt {
    /// The id of attempt `index` of `family`.
    pub fn id_of(family: Family, index: usize) -> String {
        format!("{}-{index:04}", family.prefix())
    }

    /// `(family, index)` of an id made by [`Attempt::id_of`].
    pub fn parse_id(id: &str) -> Option<(Family, usize)> {
        let (prefix, index) = id.split_once('-')?;
        Some((Family::from_prefix(prefix)?, index.parse().ok()?))
    }
}
