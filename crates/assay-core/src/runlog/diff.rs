//! The record of two runs compared ([`RunDiff`]): the cases that moved ([`CaseDiff`]), the
//! headlines, what differs in their setups and knowledge bases, and the regression gate's
//! verdict. A RunLog embeds one (its baseline comparison). Plain data: [`crate::rundiff`]
//! computes it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::verdict::Outcome;

/// One case in both runs (or in one of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseChange {
    /// The bank's key.
    pub bank: String,
    /// The case.
    pub test_id: String,
    /// Its score in the first run (`None`: errored there, or not in it).
    pub before: Option<u32>,
    /// Its score in the second run.
    pub after: Option<u32>,
    /// `after - before`, when both scored.
    pub delta: Option<i64>,
    /// Hard-failed in the first run.
    pub was_hard_fail: bool,
    /// Hard-failed in the second run.
    pub is_hard_fail: bool,
    /// A critical failure in the first run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub was_critical_failure: bool,
    /// A critical failure in the second run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_critical_failure: bool,
    /// The error in the first run, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_error: Option<String>,
    /// The error in the second run, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_error: Option<String>,
    /// Its stored verdict in the first run (absent: not in it, or a comparison written before
    /// verdicts were stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_verdict: Option<Outcome>,
    /// Its stored verdict in the second run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_verdict: Option<Outcome>,
}

impl CaseChange {
    /// `bank/test_id`, as messages name a case.
    pub fn name(&self) -> String {
        format!("{}/{}", self.bank, self.test_id)
    }
}

/// Two runs compared case by case. Cases are matched by bank and `test_id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseDiff {
    /// Cases whose score rose, the largest rise first.
    pub better: Vec<CaseChange>,
    /// Cases whose score fell, the largest fall first.
    pub worse: Vec<CaseChange>,
    /// Cases with the same score in both runs, in run order.
    pub unchanged: Vec<CaseChange>,
    /// Cases scored in one run but errored (no score) in the other, or errored in both: not
    /// comparable, and never counted as better or worse.
    pub errored: Vec<CaseChange>,
    /// Cases only the second run has.
    pub added: Vec<CaseChange>,
    /// Cases only the first run has.
    pub removed: Vec<CaseChange>,
    /// Cases that hard-fail in the second run but did not in the first (new cases included),
    /// in run order.
    #[serde(default)]
    pub new_hard_fails: Vec<CaseChange>,
    /// Cases that hard-failed in the first run and no longer do.
    #[serde(default)]
    pub fixed_hard_fails: Vec<CaseChange>,
    /// Cases that are a critical failure in the second run but were not in the first.
    #[serde(default)]
    pub new_critical: Vec<CaseChange>,
    /// Cases whose verdict is a failure in the second run and was not in the first (it passed,
    /// errored, or the first run did not have it), in run order.
    #[serde(default)]
    pub new_failures: Vec<CaseChange>,
    /// Cases that failed in the first run and pass in the second.
    #[serde(default)]
    pub fixed: Vec<CaseChange>,
    /// Cases an error kept from a verdict in the second run but not in the first.
    #[serde(default)]
    pub new_errors: Vec<CaseChange>,
}

/// The headline of one run in a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunHeadline {
    /// The run's id.
    pub run_id: String,
    /// When it started.
    pub timestamp: String,
    /// Its weighted score.
    pub combined_score: f64,
    /// Its health.
    pub health_status: crate::runlog::Health,
    /// Cases run.
    pub total_tests: usize,
    /// Hard fails.
    pub hard_fails: usize,
    /// Errored cases.
    pub error_count: usize,
}

/// One setting or part of the setup that differs between two runs (`None`: not set there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingChange {
    /// The dotted key (`retrieval.score_threshold`) or the setup's part (`semantic`).
    pub key: String,
    /// Its value in the first run.
    pub before: Option<String>,
    /// Its value in the second run.
    pub after: Option<String>,
}

/// How the knowledge base differs between two runs, by entity content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KbChanges {
    /// Whether both runs recorded their entities (runs of very large knowledge bases, and runs
    /// written before RunLog version 2, record only a digest of the whole).
    pub by_entity: bool,
    /// Whether the knowledge bases differ at all.
    pub differ: bool,
    /// Entities whose content changed.
    #[serde(default)]
    pub changed: Vec<String>,
    /// Entities only the second run had.
    #[serde(default)]
    pub added: Vec<String>,
    /// Entities only the first run had.
    #[serde(default)]
    pub removed: Vec<String>,
}

impl KbChanges {
    /// Entities changed, added or removed.
    pub fn count(&self) -> usize {
        self.changed.len() + self.added.len() + self.removed.len()
    }
}

/// What a run's knowledge base held: a digest of the whole and, for knowledge bases up to
/// [`KbFingerprint::MAX_ENTITIES`] entities, a digest of each entity's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KbFingerprint {
    /// A digest of every entity (id and content), in id order.
    pub digest: String,
    /// Entities in the knowledge base (active or not).
    pub count: usize,
    /// Each entity's content digest, by id (empty beyond [`KbFingerprint::MAX_ENTITIES`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub entities: BTreeMap<String, String>,
}

impl KbFingerprint {
    /// Beyond this many entities only the whole is digested (a run record stays small).
    pub const MAX_ENTITIES: usize = 50_000;
}

/// A topic whose average moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicChange {
    /// The topic.
    pub topic: String,
    /// Its average in the first run (`None`: no case of it there).
    pub before: Option<f64>,
    /// Its average in the second run.
    pub after: Option<f64>,
    /// `after - before`, one decimal, when both exist.
    pub delta: Option<f64>,
}

/// Two runs compared: their headlines, what differs in their setups, the change in weighted
/// score, how topics moved, and the cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDiff {
    /// What the first run is called where it came from (its results file), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The first run (the baseline).
    pub before: RunHeadline,
    /// The second run.
    pub after: RunHeadline,
    /// Settings and setup (embedder, reranker) that differ, in key order: why results may
    /// differ, shown first.
    #[serde(default)]
    pub setup_changes: Vec<SettingChange>,
    /// How the knowledge base differs.
    #[serde(default)]
    pub kb_changes: KbChanges,
    /// `after.combined_score - before.combined_score`, one decimal.
    pub score_delta: f64,
    /// How many cases fall in each group (`better`, `worse`, `unchanged`, `errored`, `added`,
    /// `removed`, `new_hard_fails`, `fixed_hard_fails`, `new_critical`, and by verdict
    /// `new_failures`, `fixed`, `new_errors`), and how many answer metrics fell
    /// (`metric_falls`, present when any answer metric moved).
    pub counts: BTreeMap<String, usize>,
    /// Semantic topics whose average moved (by the largest fall first), and topics only one
    /// run has.
    #[serde(default)]
    pub topic_changes: Vec<TopicChange>,
    /// The paired comparison of the cases both runs scored: the mean change with its
    /// bootstrap interval and whether the second run is better, worse or not distinguishable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significance: Option<crate::stats::PairedComparison>,
    /// The regression gate's verdict, when the comparison was a gate (`assay run --baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<RegressionGate>,
    /// Answer-case metrics whose value changed between the runs (cases in both runs, metrics
    /// both runs measured), the largest fall first, then the rises, the smallest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metric_changes: Vec<MetricChange>,
    /// The cases.
    #[serde(flatten)]
    pub cases: CaseDiff,
}

/// One answer case's metric that moved between two runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricChange {
    /// The bank's key (`answer`).
    pub bank: String,
    /// The case.
    pub test_id: String,
    /// The metric's name (`faithfulness`, `context_recall`, ...).
    pub metric: String,
    /// Its value (0–1) in the first run.
    pub before: f64,
    /// Its value (0–1) in the second run.
    pub after: f64,
}

impl MetricChange {
    /// `after - before`: below zero when the metric fell.
    pub fn delta(&self) -> f64 {
        self.after - self.before
    }

    /// `bank/test_id`, as messages name a case.
    pub fn name(&self) -> String {
        format!("{}/{}", self.bank, self.test_id)
    }
}

/// The verdict of `[gate]`'s regression rules on a comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegressionGate {
    /// Whether every rule held.
    pub passed: bool,
    /// One line per rule that failed, naming the cases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// The cases that broke a rule (`bank/test_id`), each once, in the order found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<String>,
}
