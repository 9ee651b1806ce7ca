//! The correctness rules by name ([`Correctness`]): which rule decides whether an answer is
//! correct, as a project (`[optimize] correctness`) or a test case (`"correctness"`) names it.
//! A leaf beneath the test cases (`crate::cases`) and the rules themselves (`crate::correct`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Which rule decides whether an answer is correct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Correctness {
    /// Words on word boundaries and quantities as numbers with their units (the default).
    #[default]
    Normalised,
    /// Equal after lower-casing, folding white space and dropping closing punctuation.
    Exact,
    /// Every quantity of the expected answer in the answer; words ignored.
    Numeric,
    /// The case's `pattern` (a regular expression) matches the answer.
    Regex,
    /// The llm-rubric grader's `factually_correct`.
    Grader,
    /// The spec's substring rule either way (empty answers excluded).
    Seed,
}

impl Correctness {
    /// Every rule, in the order the docs list them.
    pub const ALL: [Correctness; 6] = [
        Correctness::Normalised,
        Correctness::Exact,
        Correctness::Numeric,
        Correctness::Regex,
        Correctness::Grader,
        Correctness::Seed,
    ];

    /// The rule's name as files spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Correctness::Normalised => "normalised",
            Correctness::Exact => "exact",
            Correctness::Numeric => "numeric",
            Correctness::Regex => "regex",
            Correctness::Grader => "grader",
            Correctness::Seed => "seed",
        }
    }
}

impl fmt::Display for Correctness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Correctness {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let s = if s == "normalized" { "normalised" } else { s };
        Correctness::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                let names = Correctness::ALL.map(Correctness::as_str);
                match assay_core::text::closest(s, names) {
                    Some(near) => {
                        format!("unknown correctness rule `{s}` (did you mean `{near}`?)")
                    }
                    None => format!(
                        "unknown correctness rule `{s}` (expected one of: {})",
                        names.join(", ")
                    ),
                }
            })
    }
}
