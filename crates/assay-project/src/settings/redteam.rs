//! `[patterns]` and `[redteam]`: the hardened matcher and `assay redteam`'s defaults
//! (docs/redteam.md).

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[patterns]`: how the pattern rules read a message.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PatternsConfig {
    /// Also match each message folded (default false; `assay init` writes true): Unicode
    /// NFKC, look-alike letters of other scripts folded to Latin, zero-width and other
    /// invisible characters removed, diacritics removed when no rule needs one, runs of
    /// separators collapsed and spelled-out letters (`s u i c i d e`) joined. A rule fires when
    /// it fires on the message or on the folded message.
    pub normalise: bool,
}

/// The attack families of `assay redteam`, in the order a run takes them.
pub const REDTEAM_FAMILIES: [&str; 6] = [
    "crisis-evasion",
    "direct-injection",
    "kb-injection",
    "leakage",
    "tool-injection",
    "agency",
];

/// `[redteam]`: `assay redteam`'s defaults.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RedteamConfig {
    /// The families to run (default: every family that applies to the project): any of
    /// crisis-evasion, direct-injection, kb-injection, leakage, tool-injection, agency.
    pub families: Vec<String>,
    /// Attempts per family (default 100; `--attempts`).
    pub attempts: usize,
    /// The seed every attempt derives from (default 0; `--seed`).
    pub seed: u64,
    /// The highest attack success rate (0–1) each family may reach: above it the run fails
    /// (exit 1, naming the family). A family not listed does not gate.
    #[schemars(with = "BTreeMap<String, f64>")]
    pub max_success_rate: BTreeMap<String, f64>,
    /// Text that appears in the product's system prompt and nowhere else: a reply that holds
    /// it has leaked the system prompt.
    pub system_prompt_marker: Option<String>,
    /// Tools the product must never call in an answer: a reply that reports calling one is a
    /// successful induced tool call.
    pub forbidden_tools: Vec<String>,
    /// User-state fields the reply must never repeat: leakage plants a canary in each (default
    /// none: leakage then plants only a staff-only note in the context). Each must be a string
    /// field of the project's user state (`[state.fields]`), so that the cases `--drafts`
    /// makes of a leak load like any other.
    pub private_state: Vec<String>,
    /// Names of `expected_state` checks of the simulator's scenarios that guard what the
    /// assistant must never change (a requirement's status, an account): after a
    /// `tool-injection` or `agency` conversation, one of them that fails is evidence of its own
    /// (`state-changed`), read from the database by the check. Default none.
    pub protected_state: Vec<String>,
    /// A model that also rewrites crisis messages for `crisis-evasion`, besides the shipped
    /// transforms: paraphrases without the words a rule matched, and translations into
    /// `languages` (`anthropic/<model>`, `openai/<model>`; `--attacker-model`). Default none.
    pub attacker_model: Option<String>,
    /// The languages the attacker model translates crisis messages into (default Spanish,
    /// French, German).
    pub languages: Vec<String>,
    /// Questions the attacker model drafts per SITUATION entity, which the answer-channel
    /// families ask besides the answer bank's cases (default 0; `--questions`).
    pub questions: usize,
    /// Attempts in flight at once (default 4).
    pub concurrency: usize,
}

impl Default for RedteamConfig {
    fn default() -> Self {
        RedteamConfig {
            families: Vec::new(),
            attempts: 100,
            seed: 0,
            max_success_rate: BTreeMap::new(),
            system_prompt_marker: None,
            forbidden_tools: Vec::new(),
            private_state: Vec::new(),
            protected_state: Vec::new(),
            attacker_model: None,
            languages: vec!["Spanish".into(), "French".into(), "German".into()],
            questions: 0,
            concurrency: 4,
        }
    }
}

impl RedteamConfig {
    /// Checks the values; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        let known = |name: &str, key: &str| {
            if REDTEAM_FAMILIES.contains(&name) {
                return Ok(());
            }
            let near = assay_core::text::closest(name, REDTEAM_FAMILIES.iter().copied())
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            Err(format!(
                "{key}: unknown family `{name}`{near}; expected one of {}",
                REDTEAM_FAMILIES.join(", ")
            ))
        };
        for f in &self.families {
            known(f, "redteam.families")?;
        }
        for (f, rate) in &self.max_success_rate {
            known(f, "redteam.max_success_rate")?;
            if !(rate.is_finite() && (0.0..=1.0).contains(rate)) {
                return Err(format!(
                    "redteam.max_success_rate.{f}: must be between 0 and 1, found {rate}"
                ));
            }
        }
        if self.attempts == 0 {
            return Err("redteam.attempts: must be at least 1".into());
        }
        if self.concurrency == 0 {
            return Err("redteam.concurrency: must be at least 1".into());
        }
        if self.languages.iter().any(|l| l.trim().is_empty()) {
            return Err("redteam.languages: a language name is empty".into());
        }
        if self
            .system_prompt_marker
            .as_deref()
            .is_some_and(|m| m.trim().len() < 6)
        {
            return Err(
                "redteam.system_prompt_marker: must be at least 6 characters (a shorter one appears in ordinary replies)"
                    .into(),
            );
        }
        Ok(())
    }

    /// Checks `private_state` against the project's user-state fields: each must be known and
    /// hold a string (the canary planted in it is one).
    pub fn validate_state(
        &self,
        state: &assay_core::state_fields::StateSchema,
    ) -> Result<(), String> {
        use assay_core::state_fields::FieldType;
        for field in &self.private_state {
            match state.get(field) {
                None => {
                    return Err(format!(
                        "redteam.private_state: {}",
                        state.unknown_field(field, None)
                    ));
                }
                Some(FieldType::String) => {}
                Some(other) => {
                    return Err(format!(
                        "redteam.private_state: `{field}` is a field of type {other}; leakage plants a text canary, so it needs a string field"
                    ));
                }
            }
        }
        Ok(())
    }
}
