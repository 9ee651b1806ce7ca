//! Test banks and their cases, as they are written in files.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::UserState;

/// What a bank tests: a retrieval mechanism, or the product's replies (the answer bank).
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
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BankType {
    /// Embedding search and reranking.
    Semantic,
    /// User-state conditions.
    State,
    /// Crisis regexes and keyword boosts.
    Pattern,
    /// Always-loaded entities.
    Always,
    /// The product's replies, judged on grounded-answer metrics and assertions
    /// (`assay_core::answer`).
    Answer,
}

impl BankType {
    /// Every bank, in the order the unified runner runs them: the four retrieval banks, then
    /// the answer bank.
    pub const ALL: [BankType; 5] = [
        BankType::Semantic,
        BankType::State,
        BankType::Pattern,
        BankType::Always,
        BankType::Answer,
    ];

    /// The four retrieval banks of spec 000.
    pub const RETRIEVAL: [BankType; 4] = [
        BankType::Semantic,
        BankType::State,
        BankType::Pattern,
        BankType::Always,
    ];

    /// The lower-case key used in results, settings and on the command line.
    pub fn key(self) -> &'static str {
        match self {
            BankType::Semantic => "semantic",
            BankType::State => "state",
            BankType::Pattern => "pattern",
            BankType::Always => "always",
            BankType::Answer => "answer",
        }
    }

    /// The upper-case name used in bank files.
    pub fn as_str(self) -> &'static str {
        match self {
            BankType::Semantic => "SEMANTIC",
            BankType::State => "STATE",
            BankType::Pattern => "PATTERN",
            BankType::Always => "ALWAYS",
            BankType::Answer => "ANSWER",
        }
    }

    /// The version a migrated bank file gets (000 appendix: semantic banks are V2).
    pub fn current_version(self) -> &'static str {
        match self {
            BankType::Semantic => "2.0",
            _ => "1.0",
        }
    }

    /// Parses a lower-case key (`semantic`, `state`, `pattern`, `always`, `answer`).
    pub fn from_key(key: &str) -> Option<BankType> {
        BankType::ALL.into_iter().find(|b| b.key() == key)
    }
}

impl fmt::Display for BankType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// An ordering constraint on a semantic selection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RankCheck {
    /// Must be ranked above `lower` when both are selected.
    pub higher: String,
    /// Must be ranked below `higher` when both are selected.
    pub lower: String,
}

/// What a semantic case must (and must not) retrieve.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectationSet {
    /// All must be selected, or the case is a hard fail.
    #[serde(default)]
    pub expected_primary: Vec<String>,
    /// Each one missing costs 10 points.
    #[serde(default)]
    pub expected_secondary: Vec<String>,
    /// Each one selected costs 20 points.
    #[serde(default)]
    pub not_expected: Vec<String>,
    /// Each violated order costs 10 points.
    #[serde(default)]
    pub rank_check: Vec<RankCheck>,
}

/// A semantic case: a user message and what semantic retrieval must (and must not) select for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SemanticCase {
    /// Unique id.
    pub test_id: String,
    /// Short description.
    #[serde(default)]
    pub name: String,
    /// Free category (`one_liner`, `multi_sentence`, `ambiguous`, …).
    #[serde(default)]
    pub category: String,
    /// Topics the case belongs to (for `--topic` and topic scores).
    #[serde(default)]
    pub topics: Vec<String>,
    /// The user message.
    pub prompt: String,
    /// All must be selected, or the case is a hard fail.
    pub expected_primary: Vec<String>,
    /// Each one missing costs 10 points.
    #[serde(default)]
    pub expected_secondary: Vec<String>,
    /// Each one selected costs 20 points.
    #[serde(default)]
    pub not_expected: Vec<String>,
    /// Each violated order costs 10 points.
    #[serde(default)]
    pub rank_check: Vec<RankCheck>,
    /// The user's state while sending the message.
    #[serde(default)]
    pub user_state: UserState,
    /// Entities this case names on purpose although the knowledge base does not hold them
    /// (one still to be written, or one removed that must stay absent). Any other name the
    /// knowledge base lacks is a mistake in the test and stops the run before it starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_missing: Vec<String>,
    /// Where the case came from, when `assay generate` (or `assay traces check`) made it and
    /// a reviewer accepted it: how, from which entity versions, by which model and prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::provenance::Provenance>,
}

impl SemanticCase {
    /// The expectations as written in the bank (the `original` source).
    pub fn original_expectations(&self) -> ExpectationSet {
        ExpectationSet {
            expected_primary: self.expected_primary.clone(),
            expected_secondary: self.expected_secondary.clone(),
            not_expected: self.not_expected.clone(),
            rank_check: self.rank_check.clone(),
        }
    }
}

/// A state case: a user state and the STATE handlers it must (and must not) trigger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateCase {
    /// Unique id.
    pub test_id: String,
    /// Short description.
    #[serde(default)]
    pub name: String,
    /// The state the handlers are evaluated against.
    pub user_state: UserState,
    /// All must trigger, or the case is a hard fail.
    pub expected_handlers: Vec<String>,
    /// Each one that triggers costs 20 points.
    #[serde(default)]
    pub not_expected_handlers: Vec<String>,
    /// Entities this case names on purpose although the knowledge base does not hold them
    /// (one still to be written, or one removed that must stay absent). Any other name the
    /// knowledge base lacks is a mistake in the test and stops the run before it starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_missing: Vec<String>,
    /// Where the case came from, when `assay generate` (or `assay traces check`) made it and
    /// a reviewer accepted it: how, from which entity versions, by which model and prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::provenance::Provenance>,
}

/// A pattern case: a user message and the entities the pattern rules must (and must not) bring in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatternCase {
    /// Unique id.
    pub test_id: String,
    /// Short description.
    #[serde(default)]
    pub name: String,
    /// The user message.
    pub prompt: String,
    /// All must match, or the case is a hard fail.
    pub expected_matches: Vec<String>,
    /// Each one missing costs 10 points.
    #[serde(default)]
    pub expected_secondary: Vec<String>,
    /// Each one matched costs 20 points.
    #[serde(default)]
    pub not_expected_matches: Vec<String>,
    /// `crisis`, `keyword`, `negative`, or a project's own type.
    #[serde(default = "unknown_pattern_type")]
    pub pattern_type: String,
    /// Whether a failure here is a critical failure (a missed crisis): it makes the run CRITICAL.
    #[serde(default)]
    pub is_critical: bool,
    /// Entities this case names on purpose although the knowledge base does not hold them
    /// (one still to be written, or one removed that must stay absent). Any other name the
    /// knowledge base lacks is a mistake in the test and stops the run before it starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_missing: Vec<String>,
    /// Where the case came from, when `assay generate` (or `assay traces check`) made it and
    /// a reviewer accepted it: how, from which entity versions, by which model and prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::provenance::Provenance>,
}

fn unknown_pattern_type() -> String {
    "unknown".to_owned()
}

/// An always case: an audience and the ALWAYS entities every message of it must load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlwaysCase {
    /// Unique id.
    pub test_id: String,
    /// Short description.
    #[serde(default)]
    pub name: String,
    /// The audience whose ALWAYS entities are loaded.
    pub user_type: String,
    /// The user's state (recorded; ALWAYS loading does not read it).
    #[serde(default)]
    pub user_state: UserState,
    /// All must be loaded, or the case scores 0.
    pub expected_always: Vec<String>,
    /// Entities this case names on purpose although the knowledge base does not hold them
    /// (one still to be written, or one removed that must stay absent). Any other name the
    /// knowledge base lacks is a mistake in the test and stops the run before it starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_missing: Vec<String>,
}

/// A bank file: header fields and its cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BankFile<C> {
    /// The JSON Schema the file follows, for editors that complete and check it (`assay
    /// schema`); assay itself does not read it.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Absent in pre-V2 banks; then the type comes from the bank's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bank_type: Option<BankType>,
    /// Absent in pre-V2 banks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Creation date, free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Free description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The cases.
    pub tests: Vec<C>,
}

/// The pattern rules: crisis regexes and keyword groups that bring entities in by name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatternRules {
    /// The JSON Schema the file follows, for editors that complete and check it (`assay
    /// schema`); assay itself does not read it.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Regexes that detect a crisis, matched case-insensitively.
    #[serde(default)]
    pub crisis_patterns: Vec<CrisisPattern>,
    /// Keyword groups that name an entity explicitly.
    #[serde(default)]
    pub keyword_boosts: Vec<KeywordBoost>,
}

/// One crisis rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrisisPattern {
    /// A regular expression (Rust `regex` syntax), matched case-insensitively.
    pub pattern: String,
    /// The entities a match brings in.
    pub entities: Vec<String>,
    /// Whether the rule guards against harm.
    #[serde(default)]
    pub is_critical: bool,
}

/// One keyword group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeywordBoost {
    /// Any of these, found case-insensitively as a substring, matches.
    pub keywords: Vec<String>,
    /// The entity a match brings in.
    pub entity: String,
    /// assay extension: match only whole words (not inside a longer word).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole_word: bool,
}

/// What a case of any bank says about the entities it tests, for code that handles cases of
/// every bank alike (validation, review, `--changed-since`, stale cases).
pub trait Case {
    /// Its test id.
    fn test_id(&self) -> &str;
    /// The entities it expects: selected (primary, secondary, in a rank check), triggered,
    /// matched or loaded.
    fn expects(&self) -> Vec<&String>;
    /// The entities it expects absent (`not_expected…`).
    fn excludes(&self) -> Vec<&String>;
    /// The entities it names on purpose although the knowledge base lacks them.
    fn known_missing(&self) -> &[String];
    /// Where it came from, when `assay generate` (or `assay traces check`) made it.
    fn provenance(&self) -> Option<&crate::provenance::Provenance> {
        None
    }
    /// Its provenance, to record a review.
    fn provenance_mut(&mut self) -> Option<&mut crate::provenance::Provenance> {
        None
    }
    /// The audience an always case is for.
    fn audience(&self) -> Option<&str> {
        None
    }
    /// Whether the entities this case is about are known only from what a run gave it (an
    /// answer case's contexts), not from its fields: `--changed-since` selects it by its last
    /// run's contexts.
    fn named_by_run(&self) -> bool {
        false
    }
}

impl Case for SemanticCase {
    fn test_id(&self) -> &str {
        &self.test_id
    }
    fn expects(&self) -> Vec<&String> {
        self.expected_primary
            .iter()
            .chain(&self.expected_secondary)
            .chain(self.rank_check.iter().flat_map(|r| [&r.higher, &r.lower]))
            .collect()
    }
    fn excludes(&self) -> Vec<&String> {
        self.not_expected.iter().collect()
    }
    fn known_missing(&self) -> &[String] {
        &self.known_missing
    }
    fn provenance(&self) -> Option<&crate::provenance::Provenance> {
        self.provenance.as_ref()
    }
    fn provenance_mut(&mut self) -> Option<&mut crate::provenance::Provenance> {
        self.provenance.as_mut()
    }
}

impl Case for StateCase {
    fn test_id(&self) -> &str {
        &self.test_id
    }
    fn expects(&self) -> Vec<&String> {
        self.expected_handlers.iter().collect()
    }
    fn excludes(&self) -> Vec<&String> {
        self.not_expected_handlers.iter().collect()
    }
    fn known_missing(&self) -> &[String] {
        &self.known_missing
    }
    fn provenance(&self) -> Option<&crate::provenance::Provenance> {
        self.provenance.as_ref()
    }
    fn provenance_mut(&mut self) -> Option<&mut crate::provenance::Provenance> {
        self.provenance.as_mut()
    }
}

impl Case for PatternCase {
    fn test_id(&self) -> &str {
        &self.test_id
    }
    fn expects(&self) -> Vec<&String> {
        self.expected_matches
            .iter()
            .chain(&self.expected_secondary)
            .collect()
    }
    fn excludes(&self) -> Vec<&String> {
        self.not_expected_matches.iter().collect()
    }
    fn known_missing(&self) -> &[String] {
        &self.known_missing
    }
    fn provenance(&self) -> Option<&crate::provenance::Provenance> {
        self.provenance.as_ref()
    }
    fn provenance_mut(&mut self) -> Option<&mut crate::provenance::Provenance> {
        self.provenance.as_mut()
    }
}

impl Case for AlwaysCase {
    fn test_id(&self) -> &str {
        &self.test_id
    }
    fn expects(&self) -> Vec<&String> {
        self.expected_always.iter().collect()
    }
    fn excludes(&self) -> Vec<&String> {
        Vec::new()
    }
    fn known_missing(&self) -> &[String] {
        &self.known_missing
    }
    fn audience(&self) -> Option<&str> {
        Some(&self.user_type)
    }
}
