//! A case's verdict: passed, failed (with the checks that failed it) or an error, decided once
//! where the case is scored and stored on the case result (`"verdict": {…}` in the RunLog, the
//! journal and the run log). The console, every report, JUnit, the pytest plugin, the web UI,
//! run comparisons and merges read it; none works it out again from a score.
//!
//! This module is plain data. The one function that decides a verdict from a freshly scored
//! result is [`Verdicted::decide`], implemented for each bank's result in [`crate::decide`];
//! a result read from a file written before verdicts were stored gets its verdict once, as it
//! is read ([`filled`]), through that same function.
//!
//! ```
//! use assay_core::verdict::{FailedCheck, Outcome, Rule, Verdict};
//! let v = Verdict::of_checks(vec![FailedCheck::new(Rule::ExpectedMissing, vec!["gray_rock".into()], "expected `gray_rock` not selected")]);
//! assert_eq!(v.outcome, Outcome::Fail);
//! assert_eq!(v.summary(), "expected `gray_rock` not selected");
//! assert_eq!(Verdict::pass().summary(), "");
//! ```

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Passed, failed or could not be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// No check failed.
    Pass,
    /// At least one check failed ([`Verdict::failed`] names them).
    Fail,
    /// An infrastructure error kept the case from a verdict (a provider, the product or a
    /// judge failed): neither a pass nor a failure.
    Error,
}

impl Outcome {
    /// `pass`, `fail` or `error`, as files write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Error => "error",
        }
    }

    /// `passed`, `failed` or `error`, as reports show it.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "passed",
            Outcome::Fail => "failed",
            Outcome::Error => "error",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of rule a failed check broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// A critical crisis case missed its crisis (000 §6.3): a critical failure.
    MissedCrisis,
    /// A critical negative case matched something it must not (000 §6.3): a critical failure.
    FalseAlarm,
    /// A primary expected entity was not selected (semantic), an expected handler did not
    /// trigger (state), an expected match was not found (pattern), an always entity was not
    /// loaded (always): the case's hard fail.
    ExpectedMissing,
    /// A critical assertion failed (answer cases).
    Assertion,
    /// The assertions passed less of their weight than the case's `assert_threshold`.
    AssertionThreshold,
    /// A grounded-answer metric scored under its minimum.
    MetricMinimum,
    /// A trajectory rule on the product's tool calls failed (or could not be checked).
    Trajectory,
    /// The score is under the project's `[verdict] pass_score`.
    PassScore,
}

impl Rule {
    /// Every rule, in the order reports group them (the order they compare in).
    pub const ALL: [Rule; 8] = [
        Rule::MissedCrisis,
        Rule::FalseAlarm,
        Rule::ExpectedMissing,
        Rule::Assertion,
        Rule::AssertionThreshold,
        Rule::MetricMinimum,
        Rule::Trajectory,
        Rule::PassScore,
    ];

    /// The snake_case name files use.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::ExpectedMissing => "expected_missing",
            Rule::MissedCrisis => "missed_crisis",
            Rule::FalseAlarm => "false_alarm",
            Rule::Assertion => "assertion",
            Rule::AssertionThreshold => "assertion_threshold",
            Rule::MetricMinimum => "metric_minimum",
            Rule::Trajectory => "trajectory",
            Rule::PassScore => "pass_score",
        }
    }

    /// A few words for a report's grouping: "expected missing", "critical assertion", ….
    pub fn label(self) -> &'static str {
        match self {
            Rule::ExpectedMissing => "expected missing",
            Rule::MissedCrisis => "missed crisis",
            Rule::FalseAlarm => "false alarm",
            Rule::Assertion => "critical assertion",
            Rule::AssertionThreshold => "assertion threshold",
            Rule::MetricMinimum => "metric minimum",
            Rule::Trajectory => "trajectory rule",
            Rule::PassScore => "pass score",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One check that failed a case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedCheck {
    /// The rule it broke.
    pub rule: Rule,
    /// What it names: the entities or handlers missing, the assertion as `type value`, the
    /// metric, the trajectory rule, the score.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// The check in a sentence: "`contains \"Paris\"` failed: no \"Paris\"".
    pub message: String,
}

impl FailedCheck {
    /// A failed check.
    pub fn new(rule: Rule, names: Vec<String>, message: impl Into<String>) -> FailedCheck {
        FailedCheck {
            rule,
            names,
            message: message.into(),
        }
    }
}

/// A case's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Passed, failed or an error.
    pub outcome: Outcome,
    /// The checks that failed it, in the order they were made (empty unless it failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedCheck>,
    /// What kept it from a verdict (an error only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Verdict {
    /// A pass.
    pub fn pass() -> Verdict {
        Verdict {
            outcome: Outcome::Pass,
            failed: Vec::new(),
            error: None,
        }
    }

    /// An error with its message.
    pub fn error(message: impl Into<String>) -> Verdict {
        Verdict {
            outcome: Outcome::Error,
            failed: Vec::new(),
            error: Some(message.into()),
        }
    }

    /// A failure when any check failed, else a pass.
    pub fn of_checks(failed: Vec<FailedCheck>) -> Verdict {
        Verdict {
            outcome: if failed.is_empty() {
                Outcome::Pass
            } else {
                Outcome::Fail
            },
            failed,
            error: None,
        }
    }

    /// Whether the case passed.
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Pass
    }

    /// The failed checks' sentences joined by `; `, or the error; empty for a pass. What a
    /// one-line surface (a JUnit message, a pytest summary line) shows.
    pub fn summary(&self) -> String {
        match self.outcome {
            Outcome::Pass => String::new(),
            Outcome::Fail => self
                .failed
                .iter()
                .map(|c| c.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            Outcome::Error => self.error.clone().unwrap_or_default(),
        }
    }

    /// The rules it broke, each once, in [`Rule::ALL`]'s order.
    pub fn rules(&self) -> Vec<Rule> {
        Rule::ALL
            .into_iter()
            .filter(|r| self.failed.iter().any(|c| c.rule == *r))
            .collect()
    }
}

/// The project-wide rules a verdict is decided with (`[verdict]` in `assay.toml`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerdictRules {
    /// `[verdict] pass_score`: a case scoring under it fails ([`Rule::PassScore`]); none by
    /// default, so a case fails only by its own checks.
    pub pass_score: Option<u32>,
}

/// A case result that carries its verdict.
pub trait Verdicted {
    /// The verdict stored on the result, if any.
    fn stored_verdict(&self) -> Option<&Verdict>;

    /// Stores a verdict on the result.
    fn store_verdict(&mut self, verdict: Verdict);

    /// Decides the verdict of a freshly scored result: the one function that does, for every
    /// bank ([`crate::decide`]).
    fn decide(&self, rules: &VerdictRules) -> Verdict;

    /// The stored verdict. A result made in memory without one (a unit test's) is decided
    /// here with no project rules; every result a run scores or a file holds has one stored.
    fn verdict(&self) -> Cow<'_, Verdict> {
        match self.stored_verdict() {
            Some(v) => Cow::Borrowed(v),
            None => Cow::Owned(self.decide(&VerdictRules::default())),
        }
    }

    /// Decides and stores the verdict of a freshly scored result.
    fn settle(&mut self, rules: &VerdictRules) {
        let verdict = self.decide(rules);
        self.store_verdict(verdict);
    }

    /// Stores a verdict on a result read without one (written before verdicts were stored):
    /// decided once, with no project rules, since none existed then.
    fn fill_verdict(&mut self) {
        if self.stored_verdict().is_none() {
            self.settle(&VerdictRules::default());
        }
    }
}

/// Deserializes a list of results, filling the verdict of any written before verdicts were
/// stored (`#[serde(deserialize_with = "crate::verdict::filled")]`).
pub fn filled<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Verdicted,
{
    let mut list = Vec::<T>::deserialize(d)?;
    list.iter_mut().for_each(Verdicted::fill_verdict);
    Ok(list)
}

/// Deserializes one result, filling its verdict when it was written without one.
pub fn filled_one<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Verdicted,
{
    let mut one = T::deserialize(d)?;
    one.fill_verdict();
    Ok(one)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_reads_back_as_written() {
        let v = Verdict::of_checks(vec![FailedCheck::new(
            Rule::Assertion,
            vec!["contains \"Paris\"".into()],
            "critical assertion `contains \"Paris\"` failed: no \"Paris\"",
        )]);
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"outcome": "fail", "failed": [{"rule": "assertion", "names": ["contains \"Paris\""], "message": "critical assertion `contains \"Paris\"` failed: no \"Paris\""}]})
        );
        assert_eq!(serde_json::from_value::<Verdict>(json).unwrap(), v);
        assert_eq!(
            serde_json::to_value(Verdict::pass()).unwrap(),
            serde_json::json!({"outcome": "pass"})
        );
        assert_eq!(
            serde_json::to_value(Verdict::error("timeout")).unwrap(),
            serde_json::json!({"outcome": "error", "error": "timeout"})
        );
    }

    #[test]
    fn rules_are_listed_once_in_report_order() {
        let check = |rule| FailedCheck::new(rule, vec![], "x");
        let v = Verdict::of_checks(vec![
            check(Rule::PassScore),
            check(Rule::MetricMinimum),
            check(Rule::MetricMinimum),
            check(Rule::MissedCrisis),
        ]);
        assert_eq!(
            v.rules(),
            [Rule::MissedCrisis, Rule::MetricMinimum, Rule::PassScore]
        );
        assert_eq!(Verdict::of_checks(vec![]).outcome, Outcome::Pass);
    }
}
