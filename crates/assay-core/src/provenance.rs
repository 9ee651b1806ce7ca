//! Where a case came from: [`Provenance`] (how it was made, [`GenerationMethod`], from which
//! entities at which versions, and who accepted and confirmed it), kept on the case when a
//! draft (`crate::draft`) is accepted into a bank. Plain data, beneath both the banks and the
//! drafts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a case was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GenerationMethod {
    /// Written by a model for one entity (or a pair of related entities).
    Llm,
    /// Derived without a model from a STATE handler's condition: a value on one side of a
    /// boundary.
    Boundary,
    /// Made from a production retrieval span (`assay traces check --drafts`).
    Trace,
    /// Made from an attack that worked (`assay redteam --drafts`).
    Redteam,
}

impl GenerationMethod {
    /// The name used in files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            GenerationMethod::Llm => "llm",
            GenerationMethod::Boundary => "boundary",
            GenerationMethod::Trace => "trace",
            GenerationMethod::Redteam => "redteam",
        }
    }
}

/// Where a case came from. Kept on the case when it is accepted into a bank, so a report can
/// say which cases a knowledge-base edit has made stale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// How it was made.
    pub method: GenerationMethod,
    /// The entity (or STATE handler, or the first entity of a pattern rule) it was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    /// Every entity the case was made from or names, with its version when the case was made.
    /// An entity with a later version makes the case stale.
    #[serde(default)]
    pub entity_versions: BTreeMap<String, u32>,
    /// The model that wrote it (`vendor/model`); absent for boundary cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A digest of the prompt the model was given (template and inputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_hash: Option<String>,
    /// The language the message was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// What the case varies (a persona, a register, the boundary it sits on, the rule it
    /// tests), in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The generation that made it (its draft file's `generation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    /// When it was made (RFC 3339, UTC).
    pub generated_at: String,
    /// Who accepted it into a bank, once accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_by: Option<String>,
    /// When it was accepted (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_at: Option<String>,
    /// Who last confirmed that the case still holds after its entities changed (`assay generate
    /// review --confirm`), which moves `entity_versions` to the versions then current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed_by: Option<String>,
    /// When it was confirmed (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed_at: Option<String>,
}
