//! Draft test cases (`assay generate`): where a case came from ([`Provenance`], kept on the
//! case when it is accepted into a bank), the draft files under `test_banks/drafts/<bank>/`
//! ([`DraftBank`]), and findings: drafts whose intended outcome the system under test does
//! not produce (a crisis message the pattern misses, a message whose entity retrieval does not
//! select), listed for review with the outcome the generator meant, never relabelled.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bank::BankType;
pub use crate::provenance::{GenerationMethod, Provenance};

/// The folder, inside the test banks, that holds draft files (one sub-folder per bank). Runs
/// read it only with `--include-drafts`.
pub const DRAFTS_DIR: &str = "drafts";

/// Where a draft stands in review.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DraftStatus {
    /// Not reviewed yet. `assay run --include-drafts` runs pending drafts.
    #[default]
    Pending,
    /// Copied into a bank as an ordinary case (with its provenance).
    Accepted,
    /// Turned down, with a reason.
    Rejected,
}

impl DraftStatus {
    /// The name used in files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            DraftStatus::Pending => "pending",
            DraftStatus::Accepted => "accepted",
            DraftStatus::Rejected => "rejected",
        }
    }
}

/// Why a draft is a finding: what the generator meant and the system under test does not do.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Meant to fire a pattern rule (a crisis message, a keyword request); the rules miss it.
    PatternMiss,
    /// Meant as a look-alike that must not fire; a rule fires on it.
    PatternFalseAlarm,
    /// Written for an entity that the pipeline does not select for it (a retrieval gap).
    RetrievalGap,
    /// Written for an entity; the pipeline selects another one first (two entities overlap).
    Overlap,
    /// An attack (`assay redteam`) the product gave in to: its reply or its tool calls carried
    /// the attack's evidence (a canary, a marker, an exfiltration link, a forbidden tool).
    Attack,
}

impl FindingKind {
    /// The name used in files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::PatternMiss => "pattern_miss",
            FindingKind::PatternFalseAlarm => "pattern_false_alarm",
            FindingKind::RetrievalGap => "retrieval_gap",
            FindingKind::Overlap => "overlap",
            FindingKind::Attack => "attack",
        }
    }
}

/// A disagreement between what a draft was meant to do and what the system does with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// What kind of disagreement.
    pub kind: FindingKind,
    /// What the generator meant, in words (the draft's expectations say it exactly).
    pub intended: String,
    /// What the system selected or matched for the message (entity ids, in order).
    #[serde(default)]
    pub observed: Vec<String>,
    /// The finding in one sentence, for the review list.
    pub explanation: String,
}

/// One draft case and its review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Draft<C> {
    /// The case, with the generator's intended expectations and its `provenance`.
    pub case: C,
    /// Where it stands in review.
    #[serde(default)]
    pub status: DraftStatus,
    /// Set when the system under test does not do what the draft intends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<Finding>,
    /// Who reviewed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_by: Option<String>,
    /// When it was reviewed (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_at: Option<String>,
    /// Why it was rejected, or what an edit changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The bank file it was accepted into, relative to the project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_into: Option<String>,
}

/// A draft file: the drafts of one bank made by one generation, in
/// `test_banks/drafts/<bank>/<generation>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DraftBank<C> {
    /// The JSON Schema the file follows (`assay schema draft-bank`); assay does not read it.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The bank the drafts are cases of (must match the folder).
    pub bank_type: BankType,
    /// The generation's id (also the file's name).
    pub generation: String,
    /// When the file was written (RFC 3339, UTC).
    pub created: String,
    /// What the generation was asked for, as `key: value` pairs (banks, entities, model,
    /// language, per entity).
    #[serde(default)]
    pub request: BTreeMap<String, String>,
    /// The drafts.
    pub drafts: Vec<Draft<C>>,
}
