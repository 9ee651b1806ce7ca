//! The results of a run's banks: each bank's case results ([`SemanticCaseResult`] and its
//! siblings, the answer bank's from [`crate::answer`]), each bank's results with its averages
//! and groups ([`SemanticResults`], …, [`BankResults`]), the weights, the summary and the health
//! (000 §6.5, §9.4). Plain data: the folds that fill them are in [`crate::aggregate`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::UserState;
use crate::bank::{BankType, ExpectationSet};
use crate::ir::{IrMetrics, IrSummary};
use crate::scoring::{Breakdown, RankViolation, ScoreDistribution};
use crate::verdict::Verdict;

/// Overall health (000 §9.4), ordered from worst to best.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Health {
    /// A critical failure happened (a missed crisis, or a crisis false alarm).
    Critical,
    /// Combined score below 70.
    Poor,
    /// Combined score 70 or more.
    Fair,
    /// Combined score 80 or more.
    Good,
    /// Combined score 90 or more and no hard fails.
    Excellent,
}

impl Health {
    /// Health per 000 §9.4, from the unrounded combined score.
    pub fn assess(has_critical_failures: bool, combined_score: f64, hard_fails: usize) -> Health {
        if has_critical_failures {
            Health::Critical
        } else if combined_score >= 90.0 && hard_fails == 0 {
            Health::Excellent
        } else if combined_score >= 80.0 {
            Health::Good
        } else if combined_score >= 70.0 {
            Health::Fair
        } else {
            Health::Poor
        }
    }

    /// The upper-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Critical => "CRITICAL",
            Health::Poor => "POOR",
            Health::Fair => "FAIR",
            Health::Good => "GOOD",
            Health::Excellent => "EXCELLENT",
        }
    }

    /// Parses an upper- or lower-case name.
    pub fn parse(name: &str) -> Option<Health> {
        [
            Health::Critical,
            Health::Poor,
            Health::Fair,
            Health::Good,
            Health::Excellent,
        ]
        .into_iter()
        .find(|h| h.as_str().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Rounds to one decimal, as the seed's `round(x, 1)`.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Scores of a group of cases (a topic, a handler, a pattern type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupScore {
    /// Average score, one decimal.
    pub avg: f64,
    /// Cases in the group.
    pub tests: usize,
    /// Hard fails in the group.
    pub hard_fails: usize,
}

/// A semantic candidate from the first stage (embedding search).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The entity.
    pub entity_id: String,
    /// Cosine (or lexical) similarity to the prompt.
    pub similarity: f64,
}

/// Which stage of the semantic pipeline lost an expected entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LostAt {
    /// Not among the candidates of the embedding search.
    NotRetrieved,
    /// Among the candidates, but not selected by the reranker.
    DroppedByReranker,
}

/// An expected entity that did not make the final selection, and where it was lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostEntity {
    /// The entity.
    pub entity_id: String,
    /// Where it was lost.
    pub lost_at: LostAt,
    /// What happened, in plain words: "not among the 15 nearest", "ranked 9th of 15, below
    /// the cut of 6", "similarity 0.131 below the threshold 0.2", "inactive", "not for the
    /// PARENT audience" (absent in runs saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl LostEntity {
    /// The entity and what happened to it: "`chain_care` not retrieved (not among the 15
    /// nearest)".
    pub fn describe(&self) -> String {
        let what = match self.lost_at {
            LostAt::NotRetrieved => "not retrieved",
            LostAt::DroppedByReranker => "retrieved but not selected",
        };
        match &self.detail {
            Some(d) => format!("`{}` {what}: {d}", self.entity_id),
            None => format!("`{}` {what}", self.entity_id),
        }
    }
}

/// One semantic case's result (000 §6.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SemanticCaseResult {
    /// Case id.
    pub test_id: String,
    /// Case name.
    pub name: String,
    /// Case category.
    pub category: String,
    /// Case topics.
    pub topics: Vec<String>,
    /// The user message.
    pub prompt: String,
    /// First-stage candidates, best first.
    pub candidates: Vec<Candidate>,
    /// The final selection, best first.
    pub selections: Vec<String>,
    /// The resolved expectations.
    pub expectations: ExpectationSet,
    /// Where they came from: `original`, `opus_<date>`, `human_override_<date>`.
    pub expectation_source: String,
    /// Whether every primary entity was selected.
    pub primary_pass: bool,
    /// Expected secondary entities not selected.
    pub secondary_missing: Vec<String>,
    /// Unwanted entities that were selected.
    pub false_positives: Vec<String>,
    /// Violated rank checks.
    pub rank_violations: Vec<RankViolation>,
    /// Expected entities (primary and secondary) that were not selected, by stage.
    pub lost: Vec<LostEntity>,
    /// 0–100, or `null` when the case errored.
    pub score: Option<u32>,
    /// Why.
    pub breakdown: Breakdown,
    /// Primary miss.
    pub is_hard_fail: bool,
    /// An infrastructure error kept this case from a verdict; it is left out of averages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Recall@k, MRR and nDCG@k of the case's ranked list ([`crate::ir`]); absent when the
    /// case errored or expects nothing (and in RunLogs written before these metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ir: Option<IrMetrics>,
    /// With `assay run --repeat`: each repeat's score (`null` for an error), in repeat order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeat_scores: Vec<Option<u32>>,
    /// With `--repeat`: the repeats disagreed on whether the primary expectation held.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unstable: bool,
    /// How long the case took to run, in milliseconds (absent in results written before it
    /// was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// The case's verdict, decided where it was scored ([`crate::verdict`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// One state case's result (000 §6.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateCaseResult {
    /// Case id.
    pub test_id: String,
    /// Case name.
    pub name: String,
    /// The evaluated state.
    pub user_state: UserState,
    /// Handlers whose conditions held.
    pub triggered_handlers: Vec<String>,
    /// Handlers that had to trigger.
    pub expected_handlers: Vec<String>,
    /// Handlers that must not trigger.
    pub not_expected_handlers: Vec<String>,
    /// Whether every expected handler triggered.
    pub primary_pass: bool,
    /// Unwanted handlers that triggered.
    pub wrong_handlers: Vec<String>,
    /// 0–100.
    pub score: u32,
    /// Why.
    pub breakdown: Breakdown,
    /// An expected handler did not trigger.
    pub is_hard_fail: bool,
    /// How long the case took to run, in milliseconds (absent in results written before it
    /// was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// The case's verdict, decided where it was scored ([`crate::verdict`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// A crisis rule that fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrisisMatch {
    /// The rule's regex.
    pub pattern: String,
    /// The text it matched.
    pub matched_text: String,
    /// The entities it brought in.
    pub entities: Vec<String>,
}

/// A keyword group that fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeywordMatch {
    /// The keyword found.
    pub keyword: String,
    /// The entity it brought in.
    pub entity: String,
}

/// One pattern case's result (000 §6.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternCaseResult {
    /// Case id.
    pub test_id: String,
    /// Case name.
    pub name: String,
    /// The user message.
    pub prompt: String,
    /// `crisis`, `keyword`, `negative`, …
    pub pattern_type: String,
    /// Entities brought in by any rule.
    pub matched_entities: Vec<String>,
    /// The crisis rules that fired.
    pub crisis_matches: Vec<CrisisMatch>,
    /// The keyword groups that fired.
    pub keyword_matches: Vec<KeywordMatch>,
    /// Entities that had to match.
    pub expected_matches: Vec<String>,
    /// Entities that should match.
    pub expected_secondary: Vec<String>,
    /// Entities that must not match.
    pub not_expected_matches: Vec<String>,
    /// Whether every expected entity matched.
    pub primary_pass: bool,
    /// Expected secondary entities that did not match.
    pub secondary_missing: Vec<String>,
    /// Unwanted entities that matched.
    pub false_positives: Vec<String>,
    /// 0–100.
    pub score: u32,
    /// Why.
    pub breakdown: Breakdown,
    /// An expected entity did not match.
    pub is_hard_fail: bool,
    /// The case guards against harm.
    pub is_critical: bool,
    /// A missed crisis on a critical crisis case, or a false positive on a critical negative case.
    pub is_critical_failure: bool,
    /// How long the case took to run, in milliseconds (absent in results written before it
    /// was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// The case's verdict, decided where it was scored ([`crate::verdict`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// One always case's result (000 §6.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlwaysCaseResult {
    /// Case id.
    pub test_id: String,
    /// Case name.
    pub name: String,
    /// The audience.
    pub user_type: String,
    /// ALWAYS entities loaded for the audience.
    pub loaded_entities: Vec<String>,
    /// Entities that had to be loaded.
    pub expected_always: Vec<String>,
    /// Expected entities that were not loaded.
    pub missing: Vec<String>,
    /// 100 or 0.
    pub score: u32,
    /// Why.
    pub breakdown: Breakdown,
    /// Something was missing.
    pub is_hard_fail: bool,
    /// How long the case took to run, in milliseconds (absent in results written before it
    /// was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// The case's verdict, decided where it was scored ([`crate::verdict`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// Semantic bank results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SemanticResults {
    /// Cases run (errors included).
    pub tests_run: usize,
    /// Cases that errored (left out of the average).
    pub errors: usize,
    /// Average of scored cases, one decimal.
    pub average_score: f64,
    /// Hard fails.
    pub hard_fails: usize,
    /// Score buckets.
    pub score_distribution: ScoreDistribution,
    /// Scores per topic.
    pub topic_scores: BTreeMap<String, GroupScore>,
    /// The run's mean IR metrics ([`crate::ir`]); absent when no case has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ir: Option<IrSummary>,
    /// Mean IR metrics per topic.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topic_ir: BTreeMap<String, IrSummary>,
    /// Times each case ran (`--repeat`; 1 when absent).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub repeats: u32,
    /// With repeats: the average's 95 % interval (a bootstrap within cases over their repeats:
    /// the uncertainty the stochastic stage adds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_interval: Option<crate::stats::Interval>,
    /// With repeats: the cases whose repeats disagreed on the primary expectation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unstable: Vec<String>,
    /// Every case.
    #[serde(deserialize_with = "crate::verdict::filled")]
    pub results: Vec<SemanticCaseResult>,
}

fn one() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_one(n: &u32) -> bool {
    *n == 1
}

/// State bank results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateResults {
    /// Cases run.
    pub tests_run: usize,
    /// Average score, one decimal.
    pub average_score: f64,
    /// Hard fails.
    pub hard_fails: usize,
    /// Score buckets.
    pub score_distribution: ScoreDistribution,
    /// Scores of the cases that expect each handler.
    pub handler_scores: BTreeMap<String, GroupScore>,
    /// Every case.
    #[serde(deserialize_with = "crate::verdict::filled")]
    pub results: Vec<StateCaseResult>,
}

/// Pattern bank results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternResults {
    /// Cases run.
    pub tests_run: usize,
    /// Average score, one decimal.
    pub average_score: f64,
    /// Hard fails.
    pub hard_fails: usize,
    /// Score buckets.
    pub score_distribution: ScoreDistribution,
    /// Scores per pattern type.
    pub pattern_type_scores: BTreeMap<String, GroupScore>,
    /// Ids of the cases with a critical failure.
    pub critical_failures: Vec<String>,
    /// Every case.
    #[serde(deserialize_with = "crate::verdict::filled")]
    pub results: Vec<PatternCaseResult>,
}

/// Always bank results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlwaysResults {
    /// Cases run.
    pub tests_run: usize,
    /// Average score, one decimal.
    pub average_score: f64,
    /// Every case passed.
    pub all_passed: bool,
    /// Failing cases.
    pub hard_fails: usize,
    /// Every case.
    #[serde(deserialize_with = "crate::verdict::filled")]
    pub results: Vec<AlwaysCaseResult>,
}

/// One grounded-answer metric over an answer bank's scored cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    /// The mean over the cases where it applied (`None`: it applied to none).
    pub mean: Option<f64>,
    /// Cases where it applied.
    pub cases: usize,
    /// Cases where it did not apply (no claims, no reference, no context).
    pub not_applicable: usize,
}

/// The answer bank's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerResults {
    /// Cases run, errors included.
    pub tests_run: usize,
    /// Cases that errored (the target failed, a judge reply could not be parsed): left out of
    /// every average.
    pub errors: usize,
    /// Mean score of the scored cases.
    pub average_score: f64,
    /// Failed cases.
    pub hard_fails: usize,
    /// Scores by band.
    pub score_distribution: ScoreDistribution,
    /// Per topic.
    #[serde(default)]
    pub topic_scores: BTreeMap<String, GroupScore>,
    /// Each metric's mean over the scored cases where it applied.
    #[serde(default)]
    pub metrics: BTreeMap<crate::answer::Metric, MetricSummary>,
    /// Critical cases that failed.
    #[serde(default)]
    pub critical_failures: Vec<String>,
    /// Case results.
    #[serde(deserialize_with = "crate::verdict::filled")]
    pub results: Vec<crate::answer::AnswerCaseResult>,
}

/// The weight of each bank in the combined score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    /// Default 0.60.
    pub semantic: f64,
    /// Default 0.15.
    pub state: f64,
    /// Default 0.15.
    pub pattern: f64,
    /// Default 0.10.
    pub always: f64,
    /// Default 0.25 (the answer bank, beside the four retrieval banks' 1.0).
    #[serde(default = "default_answer_weight")]
    pub answer: f64,
}

fn default_answer_weight() -> f64 {
    0.25
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            semantic: 0.60,
            state: 0.15,
            pattern: 0.15,
            always: 0.10,
            answer: default_answer_weight(),
        }
    }
}

impl Weights {
    /// The weight of one bank.
    pub fn get(&self, bank: BankType) -> f64 {
        match bank {
            BankType::Semantic => self.semantic,
            BankType::State => self.state,
            BankType::Pattern => self.pattern,
            BankType::Always => self.always,
            BankType::Answer => self.answer,
        }
    }
}

/// Where resolved semantic expectations came from (000 §4.3 `get_expectation_summary`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExpectationSources {
    /// Straight from the bank.
    pub original: usize,
    /// From a calibration.
    pub opus: usize,
    /// From a human override.
    pub human_override: usize,
}

/// The run's summary (000 §6.5 `_calculate_summary`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Cases run in all banks (errors included).
    pub total_tests: usize,
    /// Weighted average of the banks that ran, one decimal.
    pub combined_score: f64,
    /// Hard-failed cases in all banks.
    pub hard_fail_count: usize,
    /// Ids of the cases with a critical failure.
    pub critical_failures: Vec<String>,
    /// Health per 000 §9.4.
    pub health_status: Health,
    /// Average per bank; `null` for a bank that did not run.
    pub component_scores: BTreeMap<String, Option<f64>>,
    /// The weights used, renormalised over the banks that ran.
    pub weights: BTreeMap<String, f64>,
    /// Where semantic expectations came from, when a semantic bank exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectation_sources: Option<ExpectationSources>,
    /// Cases that errored (infrastructure), counted apart from failures.
    pub error_count: usize,
}

/// The results of the banks of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BankResults {
    /// Semantic, when run.
    pub semantic: Option<SemanticResults>,
    /// State, when run.
    pub state: Option<StateResults>,
    /// Pattern, when run.
    pub pattern: Option<PatternResults>,
    /// Always, when run.
    pub always: Option<AlwaysResults>,
    /// Answer, when run.
    pub answer: Option<AnswerResults>,
}
