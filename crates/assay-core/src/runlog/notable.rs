//! What a run's summary shows besides the numbers ([`Notable`]): the cases by verdict
//! ([`VerdictTally`]), why cases lost points ([`ReasonTally`]), errors by message. Plain data:
//! [`crate::aggregate`] counts them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bank::BankType;
use crate::verdict::Rule;

/// One reason cases lost points, with how many cases it touched and what it named most often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasonTally {
    /// `hard fail`, `false positives`, `secondary missing`, `rank violations`, `wrong handlers`.
    pub reason: String,
    /// Cases it touched.
    pub cases: usize,
    /// What it named (an entity, a reason text), with how often, most often first (at most
    /// [`Notable::NAMED`]).
    pub named: Vec<(String, usize)>,
    /// How many distinct things it named in all.
    pub distinct: usize,
}

/// Semantic errors with one message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorGroup {
    /// The message.
    pub message: String,
    /// How many cases.
    pub count: usize,
    /// The first of them (at most [`Notable::IDS`]).
    pub test_ids: Vec<String>,
}

/// Cases by verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failed: usize,
    /// Cases an error kept from a verdict.
    pub errors: usize,
}

impl OutcomeCounts {
    /// Cases counted.
    pub fn total(&self) -> usize {
        self.passed + self.failed + self.errors
    }
}

/// The failed cases that broke one rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleTally {
    /// The rule.
    pub rule: Rule,
    /// Cases it failed.
    pub cases: usize,
    /// The first of them, as `bank/test_id` (at most [`Notable::IDS`]).
    pub test_ids: Vec<String>,
    /// What it named most often (entities, assertions, metrics), with how often (at most
    /// [`Notable::NAMED`]).
    pub named: Vec<(String, usize)>,
    /// How many distinct things it named in all.
    pub distinct: usize,
}

/// The run's cases by verdict: how many passed, failed and errored, per bank, and the failed
/// cases grouped by the rule that failed them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictTally {
    /// Every case.
    #[serde(flatten)]
    pub all: OutcomeCounts,
    /// Per bank (by key).
    pub by_bank: BTreeMap<String, OutcomeCounts>,
    /// The failed cases by rule, in [`Rule::ALL`]'s order (a case that broke two rules is in
    /// both).
    pub rules: Vec<RuleTally>,
}

impl VerdictTally {
    /// The counts of one bank.
    pub fn of_bank(&self, bank: BankType) -> OutcomeCounts {
        self.by_bank.get(bank.key()).copied().unwrap_or_default()
    }
}

/// What the summary and reports show besides the numbers, in bounded memory: how many cases
/// scored below 100, why they lost points, the semantic errors grouped by message, and whether
/// the RunLog's case lists hold every case or only the worst few of each bank.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Notable {
    /// The cases by verdict (absent in RunLogs before version 4, whose verdicts
    /// [`crate::runlog::RunLog::verdicts`] counts from the lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdicts: Option<VerdictTally>,
    /// Cases below 100, and critical failures.
    pub imperfect: usize,
    /// The same, per bank (by key).
    #[serde(default)]
    pub imperfect_by_bank: BTreeMap<String, usize>,
    /// Why they lost points, in report order.
    pub reasons: Vec<ReasonTally>,
    /// Semantic errors by message, most frequent first (at most [`Notable::GROUPS`]).
    pub errors: Vec<ErrorGroup>,
    /// Distinct error messages in all.
    pub error_kinds: usize,
    /// The RunLog's `results` lists hold every case (`false`: the worst few of each bank,
    /// the critical failures and the errors, each up to a bound; the run log has them all).
    pub complete: bool,
}

impl Notable {
    /// Cases of `bank` below 100 (or critical failures).
    pub fn imperfect_in(&self, bank: BankType) -> usize {
        self.imperfect_by_bank.get(bank.key()).copied().unwrap_or(0)
    }

    /// Names kept per reason.
    pub const NAMED: usize = 20;
    /// Case ids kept per error message.
    pub const IDS: usize = 20;
    /// Error messages kept.
    pub const GROUPS: usize = 100;
    /// Critical failures and errored cases kept in the lists when they are not complete.
    pub const KEPT: usize = 1000;
}
