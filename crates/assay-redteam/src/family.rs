//! The attack families and the channel each one attacks.

use serde::{Deserialize, Serialize};

/// An attack family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Crisis messages rewritten to slip past the pattern rules (no model).
    CrisisEvasion,
    /// Payloads in the user's message.
    DirectInjection,
    /// Payloads planted in an entity of the context the pipeline selected.
    KbInjection,
    /// Canaries planted in the user's state and in staff-only notes; questions ask for them.
    Leakage,
    /// Payloads in a tool's result, through the simulator.
    ToolInjection,
    /// Adversarial personas pushing the model to forbidden tool calls, through the simulator.
    Agency,
}

impl Family {
    /// Every family, in the order a run takes them.
    pub const ALL: [Family; 6] = [
        Family::CrisisEvasion,
        Family::DirectInjection,
        Family::KbInjection,
        Family::Leakage,
        Family::ToolInjection,
        Family::Agency,
    ];

    /// Its name (`crisis-evasion`).
    pub fn name(self) -> &'static str {
        match self {
            Family::CrisisEvasion => "crisis-evasion",
            Family::DirectInjection => "direct-injection",
            Family::KbInjection => "kb-injection",
            Family::Leakage => "leakage",
            Family::ToolInjection => "tool-injection",
            Family::Agency => "agency",
        }
    }

    /// The short prefix of its attempts' ids.
    pub fn prefix(self) -> &'static str {
        match self {
            Family::CrisisEvasion => "ce",
            Family::DirectInjection => "di",
            Family::KbInjection => "kb",
            Family::Leakage => "lk",
            Family::ToolInjection => "ti",
            Family::Agency => "ag",
        }
    }

    /// The channel it attacks, in words.
    pub fn channel(self) -> &'static str {
        match self {
            Family::CrisisEvasion => "pattern rules",
            Family::DirectInjection => "user message",
            Family::KbInjection => "knowledge-base context",
            Family::Leakage => "user state and staff-only context",
            Family::ToolInjection => "tool results",
            Family::Agency => "conversation",
        }
    }

    /// The family named `name`.
    pub fn parse(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The family whose attempts' ids start with `prefix`.
    pub fn from_prefix(prefix: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.prefix() == prefix)
    }

    /// Whether it asks the product (an answer target) rather than the matcher alone.
    pub fn needs_product(self) -> bool {
        matches!(
            self,
            Family::DirectInjection | Family::KbInjection | Family::Leakage
        )
    }

    /// Whether it runs through the conversation simulator.
    pub fn needs_simulator(self) -> bool {
        matches!(self, Family::ToolInjection | Family::Agency)
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Family;

    #[test]
    fn the_settings_know_the_same_families() {
        let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names, assay_project::settings::REDTEAM_FAMILIES);
        for f in Family::ALL {
            assert_eq!(Family::from_prefix(f.prefix()), Some(f));
            assert_eq!(Family::parse(f.name()), Some(f));
        }
    }
}
