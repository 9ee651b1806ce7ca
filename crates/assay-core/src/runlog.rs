//! The RunLog: the complete, versioned record of a run (000 §6.5), and its aggregation.
//!
//! Its top level keeps the seed's result keys — `summary`, `semantic`, `state`, `pattern`,
//! `always` — with `null` for a bank that was not run. Reports only read it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::UserState;
use crate::bank::{BankType, ExpectationSet};
use crate::ir::{IrMetrics, IrSummary};
use crate::scoring::{Breakdown, RankViolation, ScoreDistribution};
use crate::verdict::Verdict;

/// The RunLog schema version; changes are additive only. Version 2 added `settings`, `kb`
/// and `baseline`: what a comparison with a later run needs. Version 3 added the run log
/// (`cases`: every case in `results/cases_<stamp>.jsonl`, the RunLog's lists then holding the
/// worst cases only) and `notable`. Version 4 added each case's `verdict` (pass, fail with the
/// checks that failed it, or error) and `duration_ms`, and `notable.verdicts`; a case read
/// from an older file gets its verdict as it is read ([`crate::verdict::filled`]).
pub const SCHEMA_VERSION: u32 = 4;

/// The oldest RunLog a baseline comparison accepts: older runs do not record their settings
/// and knowledge base, so a comparison could not say why results differ.
pub const BASELINE_OLDEST: u32 = 2;

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

impl SemanticResults {
    /// Records that each case ran `repeats` times: the average's interval over the repeats
    /// and the unstable cases.
    pub fn with_repeats(mut self, repeats: u32) -> SemanticResults {
        self.repeats = repeats.max(1);
        if self.repeats > 1 {
            let groups: Vec<Vec<f64>> = self
                .results
                .iter()
                .map(|r| {
                    r.repeat_scores
                        .iter()
                        .filter_map(|s| s.map(f64::from))
                        .collect::<Vec<f64>>()
                })
                .filter(|g| g.len() >= 2)
                .collect();
            let refs: Vec<&[f64]> = groups.iter().map(Vec::as_slice).collect();
            self.average_interval = crate::stats::stratified_bootstrap_mean(
                &refs,
                crate::stats::BootstrapSettings::default(),
            );
            self.unstable = self
                .results
                .iter()
                .filter(|r| r.unstable)
                .map(|r| r.test_id.clone())
                .collect();
        }
        self
    }

    fn scored(&self) -> usize {
        self.tests_run - self.errors
    }
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

impl BankResults {
    /// `(bank, average, scored cases, hard fails)` for each bank that ran.
    fn components(&self) -> Vec<(BankType, f64, usize, usize)> {
        let mut out = Vec::new();
        if let Some(r) = &self.semantic {
            out.push((
                BankType::Semantic,
                r.average_score,
                r.scored(),
                r.hard_fails,
            ));
        }
        if let Some(r) = &self.state {
            out.push((BankType::State, r.average_score, r.tests_run, r.hard_fails));
        }
        if let Some(r) = &self.pattern {
            out.push((
                BankType::Pattern,
                r.average_score,
                r.tests_run,
                r.hard_fails,
            ));
        }
        if let Some(r) = &self.always {
            out.push((BankType::Always, r.average_score, r.tests_run, r.hard_fails));
        }
        if let Some(r) = &self.answer {
            out.push((
                BankType::Answer,
                r.average_score,
                r.tests_run - r.errors,
                r.hard_fails,
            ));
        }
        out
    }

    /// Summarises the banks (000 §6.5), leaving banks that did not run, or had no scored case,
    /// out of the weighted score and renormalising the remaining weights.
    pub fn summarize(&self, weights: &Weights, sources: Option<ExpectationSources>) -> Summary {
        let components = self.components();
        // The four retrieval banks always have a key; the answer bank only when it ran.
        let mut component_scores: BTreeMap<String, Option<f64>> = BankType::RETRIEVAL
            .iter()
            .chain(self.answer.as_ref().map(|_| &BankType::Answer))
            .map(|b| (b.key().to_owned(), None))
            .collect();
        let weighted: Vec<(BankType, f64)> = components
            .iter()
            .filter(|(_, _, scored, _)| *scored > 0)
            .map(|(b, avg, _, _)| (*b, *avg))
            .collect();
        for (bank, avg) in &weighted {
            component_scores.insert(bank.key().to_owned(), Some(*avg));
        }
        let total_weight: f64 = weighted.iter().map(|(b, _)| weights.get(*b)).sum();
        let (combined, used) = if total_weight > 0.0 {
            let combined = weighted
                .iter()
                .map(|(b, avg)| avg * weights.get(*b))
                .sum::<f64>()
                / total_weight;
            let used = weighted
                .iter()
                .map(|(b, _)| (b.key().to_owned(), weights.get(*b) / total_weight))
                .collect();
            (combined, used)
        } else {
            (0.0, BTreeMap::new())
        };
        let hard_fail_count = components.iter().map(|c| c.3).sum();
        let critical_failures: Vec<String> = self
            .pattern
            .iter()
            .flat_map(|p| p.critical_failures.iter().cloned())
            .chain(
                self.answer
                    .iter()
                    .flat_map(|a| a.critical_failures.iter().cloned()),
            )
            .collect();
        let total_tests = self.semantic.as_ref().map_or(0, |r| r.tests_run)
            + self.state.as_ref().map_or(0, |r| r.tests_run)
            + self.pattern.as_ref().map_or(0, |r| r.tests_run)
            + self.always.as_ref().map_or(0, |r| r.tests_run)
            + self.answer.as_ref().map_or(0, |r| r.tests_run);
        Summary {
            total_tests,
            combined_score: round1(combined),
            hard_fail_count,
            health_status: Health::assess(!critical_failures.is_empty(), combined, hard_fail_count),
            critical_failures,
            component_scores,
            weights: used,
            expectation_sources: sources,
            error_count: self.semantic.as_ref().map_or(0, |r| r.errors)
                + self.answer.as_ref().map_or(0, |r| r.errors),
        }
    }
}

mod bank_keys {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use crate::bank::BankType;

    pub fn serialize<S: Serializer>(banks: &[BankType], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(banks.iter().map(|b| b.key()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<BankType>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|k| {
                BankType::from_key(k).ok_or_else(|| D::Error::custom(format!("unknown bank `{k}`")))
            })
            .collect()
    }
}

/// What a run was asked to run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunFilters {
    /// The banks selected, as lower-case keys (`semantic`, `state`, …).
    #[serde(with = "bank_keys")]
    pub banks: Vec<BankType>,
    /// `--test`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// `--topic`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// `--changed-since`, when given: only the cases that name an entity changed since that
    /// run ran, so this run is partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_since: Option<ChangedSince>,
    /// `--include-drafts`, when given: how many pending drafts (`test_banks/drafts/`) the run's
    /// banks included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drafts: Option<usize>,
    /// The banks holding cases that `--banks` left out (absent when `--banks` named every bank
    /// with cases, or was not given): a run of a subset of the banks is partial.
    #[serde(default, with = "bank_keys", skip_serializing_if = "Vec::is_empty")]
    pub banks_left_out: Vec<BankType>,
}

impl RunFilters {
    /// Whether the run ran only part of the suite (`--test`, `--topic`, `--changed-since`, a
    /// `--banks` subset): such a run is no full run to compare others with.
    pub fn is_partial(&self) -> bool {
        !self.partial().is_empty()
    }

    /// Each selection that made the run partial, as the flag that asked for it
    /// (`--test SEM-01`, `--changed-since latest (15 of 61 cases)`,
    /// `--banks state (left out: semantic, pattern)`); empty for a run of the whole suite.
    pub fn partial(&self) -> Vec<String> {
        let mut why = Vec::new();
        if let Some(test) = &self.test {
            why.push(format!("--test {test}"));
        }
        if let Some(topic) = &self.topic {
            why.push(format!("--topic {topic}"));
        }
        if let Some(c) = &self.changed_since {
            why.push(format!(
                "--changed-since {} ({} of {} cases)",
                c.reference,
                c.ran,
                c.ran + c.skipped
            ));
        }
        if !self.banks_left_out.is_empty() {
            let keys =
                |banks: &[BankType]| banks.iter().map(|b| b.key()).collect::<Vec<_>>().join(",");
            why.push(format!(
                "--banks {} (left out: {})",
                keys(&self.banks),
                keys(&self.banks_left_out).replace(',', ", ")
            ));
        }
        why
    }

    /// Whether the run's banks included pending drafts (`--include-drafts` when there were
    /// some): cases nobody has reviewed, so no run to compare others with.
    pub fn has_drafts(&self) -> bool {
        self.drafts.is_some_and(|n| n > 0)
    }
}

/// What `assay run --changed-since RUN` selected: the cases that name an entity whose content
/// differs from that run's knowledge base (or that was added or removed since), and the
/// always cases of those entities' audiences.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedSince {
    /// The run compared with, as given (`latest`, `accepted`, a run id or a file).
    pub reference: String,
    /// That run's `run_id`.
    pub run_id: String,
    /// The changed entities, sorted (the first [`ChangedSince::LISTED`]).
    pub entities: Vec<String>,
    /// How many entities changed.
    pub entity_count: usize,
    /// The cases this run ran.
    pub ran: usize,
    /// The cases of the selected banks it skipped.
    pub skipped: usize,
}

impl ChangedSince {
    /// Changed entities a RunLog lists at most.
    pub const LISTED: usize = 1_000;
}

/// A case that names an entity edited since its reference point: the entity version its
/// provenance records, else the accepted run's knowledge base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleCase {
    /// Its bank.
    #[serde(with = "bank_key")]
    pub bank: BankType,
    /// Its id.
    pub test_id: String,
    /// The entities it names that changed.
    pub entities: Vec<StaleEntity>,
}

/// One changed entity of a [`StaleCase`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleEntity {
    /// The entity.
    pub entity_id: String,
    /// The version the reference point had, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_version: Option<u32>,
    /// Its version now; absent when the knowledge base no longer has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<u32>,
    /// The fields that differ between the two versions (empty when the reference version is
    /// not in the store's history: the content changed, which fields is unknown).
    #[serde(default)]
    pub fields: Vec<String>,
    /// Each changed field's value in the reference version and now, in the order of
    /// `fields`, each clipped to [`StaleChange::CLIPPED`] characters (absent in RunLogs written
    /// before assay recorded them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<StaleChange>,
    /// What the case is compared with.
    pub reference: StaleReference,
}

/// One changed field of a [`StaleEntity`]: its value then and now, as text (a string as it
/// is, anything else as compact JSON, `null` where the field was not set), clipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleChange {
    /// The field.
    pub field: String,
    /// Its value in the reference version.
    pub old: String,
    /// Its value now.
    pub new: String,
}

impl StaleChange {
    /// The characters a value keeps (a longer one is cut and ends in `…`).
    pub const CLIPPED: usize = 80;

    /// The change of `field` from `old` to `new` (JSON values), each written as text and
    /// clipped to [`StaleChange::CLIPPED`] characters.
    pub fn new(
        field: &str,
        old: Option<&serde_json::Value>,
        new: Option<&serde_json::Value>,
    ) -> Self {
        StaleChange {
            field: field.to_owned(),
            old: clip_value(old),
            new: clip_value(new),
        }
    }
}

/// A value as one line of text, clipped to [`StaleChange::CLIPPED`] characters.
fn clip_value(value: Option<&serde_json::Value>) -> String {
    let text = match value {
        None | Some(serde_json::Value::Null) => "null".to_owned(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > StaleChange::CLIPPED {
        let kept: String = line.chars().take(StaleChange::CLIPPED - 1).collect();
        format!("{}…", kept.trim_end())
    } else {
        line
    }
}

/// What a stale case's entity is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StaleReference {
    /// The entity version the case's provenance records.
    Provenance,
    /// The knowledge base of the accepted run (`assay runs accept`).
    Accepted,
}

impl StaleReference {
    /// The key as written.
    pub fn as_str(self) -> &'static str {
        match self {
            StaleReference::Provenance => "provenance",
            StaleReference::Accepted => "accepted",
        }
    }
}

mod bank_key {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::bank::BankType;

    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's `with` passes a reference
    pub fn serialize<S: Serializer>(bank: &BankType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(bank.key())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BankType, D::Error> {
        let k = String::deserialize(d)?;
        BankType::from_key(&k).ok_or_else(|| D::Error::custom(format!("unknown bank `{k}`")))
    }
}

/// Stale cases a RunLog lists at most (the rest are counted in `stale_more`).
pub const STALE_LISTED: usize = 2_000;

/// The complete record of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunLog {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The assay version that made it.
    pub assay_version: String,
    /// Unique run id.
    pub run_id: String,
    /// The project directory, as given.
    pub project: String,
    /// When the run started (RFC 3339, UTC).
    pub timestamp: String,
    /// Wall-clock duration.
    pub duration_ms: u64,
    /// What was selected.
    pub filters: RunFilters,
    /// The systems under test, described (for example the semantic pipeline's embedder and
    /// reranker).
    #[serde(default)]
    pub setup: BTreeMap<String, String>,
    /// Aggregates, score and health.
    pub summary: Summary,
    /// `null` when not run.
    pub semantic: Option<SemanticResults>,
    /// `null` when not run.
    pub state: Option<StateResults>,
    /// `null` when not run.
    pub pattern: Option<PatternResults>,
    /// `null` when not run.
    pub always: Option<AlwaysResults>,
    /// The answer bank; absent when not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerResults>,
    /// Warnings raised while loading (unknown fields, unknown entities, pre-V2 banks).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The project settings that shape results (`assay.toml`'s `[weights]`, `[semantic]`,
    /// `[retrieval]`, `[embedder]` and `[gate]`, as dotted keys with their values as written).
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// What the knowledge base held.
    #[serde(default)]
    pub kb: crate::rundiff::KbFingerprint,
    /// The comparison with a baseline run (`assay run --baseline`), unchanged cases left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Box<crate::rundiff::RunDiff>>,
    /// Where every case is, when the banks' `results` hold only the worst of each bank (a run
    /// saved with its run log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases: Option<CaseLog>,
    /// What the summary shows besides the numbers (cases below 100, why, errors by message);
    /// absent in RunLogs before version 3, where [`RunLog::notable`] computes it.
    #[serde(default, rename = "notable", skip_serializing_if = "Option::is_none")]
    pub notable_cases: Option<crate::aggregate::Notable>,
    /// How the providers' rate limits shaped the calls, per remote model that was sent
    /// requests (absent when none was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<RateLimitRecord>,
    /// The shard of the suite this run ran (`assay run --shard hash:i/n`); absent in a run of
    /// the whole suite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardRun>,
    /// The shards this run was merged from (`assay runs merge`); absent in a run made in one
    /// piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergedRun>,
    /// The cases of this run that name an entity edited since their reference point (the
    /// version their provenance records, else the accepted run), with the fields that changed:
    /// the first [`STALE_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<StaleCase>,
    /// Stale cases beyond those `stale` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stale_more: usize,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What a shard's run records so that its shards can be merged and checked: which shard, and
/// which suite it is a shard of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRun {
    /// Which shard of how many.
    pub shard: crate::shard::Shard,
    /// The cases of the whole suite (every shard together) the run's selection holds.
    pub suite_cases: usize,
    /// A digest (16 hex digits) of the whole suite's case ids in run order: shards of one
    /// suite share it.
    pub suite: String,
    /// SHA-256 (hex) of this shard's cases as saved: every case record (`{"bank", "result"}`,
    /// one line of a run log) serialised as JSON and ended by a newline, in the order the
    /// saved run gives them back (its lists bank by bank, or its run log). Recorded when the
    /// run is saved, whether its cases are listed or streamed; `assay runs merge` computes it
    /// again and refuses a shard whose cases changed since (absent in shards saved before it
    /// was recorded, which a merge refuses too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases_sha256: Option<String>,
}

/// Where a merged run came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedRun {
    /// How many shards the suite was split into.
    pub count: u32,
    /// The suite's digest, as every shard recorded it.
    pub suite: String,
    /// The shards, in shard order.
    pub shards: Vec<MergedShard>,
}

/// One shard of a merged run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedShard {
    /// Which shard (from 1).
    pub index: u32,
    /// Its run id.
    pub run_id: String,
    /// When it started.
    pub timestamp: String,
    /// Its cases.
    pub cases: usize,
    /// Its wall-clock duration.
    pub duration_ms: u64,
}

/// The run log of a saved run: one JSON line per case (`{"bank": …, "result": …}`) after a
/// header line, in the order the cases finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseLog {
    /// Its file name, beside the RunLog (`cases_<stamp>.jsonl`).
    pub file: String,
    /// Cases it holds.
    pub count: usize,
    /// SHA-256 (hex) of the file as saved: readers check it, so a run log changed afterwards
    /// is an error, never believed (absent in run logs saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl RunLog {
    /// What the summary shows besides the numbers: recorded with the run, or computed from
    /// the case lists of a RunLog that predates it (whose lists are complete).
    pub fn notable(&self) -> crate::aggregate::Notable {
        self.notable_cases
            .clone()
            .unwrap_or_else(|| self.notable_of_lists())
    }

    fn notable_of_lists(&self) -> crate::aggregate::Notable {
        crate::aggregate::Notable::of(&BankResults {
            semantic: self.semantic.clone(),
            state: self.state.clone(),
            pattern: self.pattern.clone(),
            always: self.always.clone(),
            answer: self.answer.clone(),
        })
    }

    /// The cases by verdict: recorded with the run, or counted from the case lists of a
    /// RunLog that predates verdicts (each case's verdict filled as it was read).
    pub fn verdicts(&self) -> crate::aggregate::VerdictTally {
        self.notable_cases
            .as_ref()
            .and_then(|n| n.verdicts.clone())
            .or_else(|| self.notable_of_lists().verdicts)
            .unwrap_or_default()
    }

    /// Whether the banks' `results` hold every case (else the worst of each bank, the rest
    /// being in the run log, [`RunLog::cases`]).
    pub fn is_complete(&self) -> bool {
        self.notable_cases.as_ref().is_none_or(|n| n.complete)
    }
}

/// How a provider's rate limits shaped the calls to one model: the 429s it answered, the time
/// callers were held back, and the concurrency the adaptive limit settled at. Recorded in the
/// RunLog, the simulation report and the experiment report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimitRecord {
    /// `vendor/model` (or `llm:vendor/model` for an LLM reranker).
    pub model: String,
    /// HTTP requests sent.
    pub requests: u64,
    /// Answers that said "slow down" (HTTP 429, or Anthropic's 529).
    pub throttled: u64,
    /// Milliseconds callers were held back by a limit, summed over calls.
    pub wait_ms: u64,
    /// The concurrency limit it settled at (at the end).
    pub concurrency: usize,
    /// The lowest the limit went.
    pub min_concurrency: usize,
    /// The ceiling: the configured concurrency.
    pub ceiling: usize,
    /// The limiter the model's calls were counted against, when it is not the model's own: a
    /// shared limit declared in `[providers.shared_limits]` (`shared:<name> (<models>)`), or
    /// one found by refusals that came together and pooled (`shared:auto (<models>)`). The
    /// other figures are the model's own; the concurrency is the shared limiter's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limiter: Option<String>,
}

impl RateLimitRecord {
    /// Whether a limit showed itself: an answer said slow down, a caller was held back, or
    /// the concurrency went below the ceiling.
    pub fn limited(&self) -> bool {
        self.throttled > 0 || self.wait_ms > 0 || self.min_concurrency < self.ceiling
    }

    /// The share of requests answered 429/529, in percent.
    pub fn throttled_percent(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.throttled as f64 * 100.0 / self.requests as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scoring::Breakdown;

    #[test]
    fn a_stale_change_writes_values_as_one_clipped_line() {
        use serde_json::json;
        let c = StaleChange::new("priority", Some(&json!(50)), Some(&json!(77)));
        assert_eq!((c.old.as_str(), c.new.as_str()), ("50", "77"));
        let c = StaleChange::new("subtype", None, Some(&json!("technique")));
        assert_eq!((c.old.as_str(), c.new.as_str()), ("null", "technique"));
        let c = StaleChange::new("audience_types", Some(&json!(["PARENT"])), Some(&json!([])));
        assert_eq!((c.old.as_str(), c.new.as_str()), ("[\"PARENT\"]", "[]"));
        // A long text keeps its first characters, on one line, and says it was cut.
        let long = format!("first line\n{}", "word ".repeat(40));
        let c = StaleChange::new("concept_summary", Some(&json!(long)), Some(&json!("short")));
        assert_eq!(c.old.chars().count(), StaleChange::CLIPPED);
        assert!(c.old.starts_with("first line word word"), "{}", c.old);
        assert!(c.old.ends_with('…') && !c.old.contains('\n'), "{}", c.old);
        assert_eq!(c.new, "short");
        // Exactly at the limit: kept whole.
        let exact = "x".repeat(StaleChange::CLIPPED);
        assert_eq!(StaleChange::new("t", Some(&json!(exact)), None).old, exact);
    }

    fn always(score: u32) -> AlwaysCaseResult {
        AlwaysCaseResult {
            test_id: format!("A{score}"),
            name: String::new(),
            user_type: "PARENT".into(),
            loaded_entities: vec![],
            expected_always: vec![],
            missing: vec![],
            score,
            breakdown: Breakdown::default(),
            is_hard_fail: score == 0,
            duration_ms: None,
            verdict: None,
        }
    }

    fn pattern(id: &str, score: u32, critical_failure: bool) -> PatternCaseResult {
        PatternCaseResult {
            test_id: id.into(),
            name: String::new(),
            prompt: String::new(),
            pattern_type: "crisis".into(),
            matched_entities: vec![],
            crisis_matches: vec![],
            keyword_matches: vec![],
            expected_matches: vec![],
            expected_secondary: vec![],
            not_expected_matches: vec![],
            primary_pass: score > 0,
            secondary_missing: vec![],
            false_positives: vec![],
            score,
            breakdown: Breakdown::default(),
            is_hard_fail: score == 0,
            is_critical: true,
            is_critical_failure: critical_failure,
            duration_ms: None,
            verdict: None,
        }
    }

    #[test]
    fn health_thresholds() {
        assert_eq!(Health::assess(true, 100.0, 0), Health::Critical);
        assert_eq!(Health::assess(false, 90.0, 0), Health::Excellent);
        assert_eq!(Health::assess(false, 95.0, 1), Health::Good);
        assert_eq!(Health::assess(false, 80.0, 3), Health::Good);
        assert_eq!(Health::assess(false, 79.9, 0), Health::Fair);
        assert_eq!(Health::assess(false, 70.0, 0), Health::Fair);
        assert_eq!(Health::assess(false, 69.9, 0), Health::Poor);
        assert!(Health::Critical < Health::Poor && Health::Good < Health::Excellent);
    }

    #[test]
    fn weights_renormalise_over_banks_that_ran() {
        let banks = BankResults {
            always: Some(AlwaysResults::from_results(vec![always(100), always(0)])),
            pattern: Some(PatternResults::from_results(vec![pattern(
                "P1", 100, false,
            )])),
            ..BankResults::default()
        };
        let s = banks.summarize(&Weights::default(), None);
        // always 50 × 0.10 + pattern 100 × 0.15, over 0.25
        assert_eq!(s.combined_score, 80.0);
        assert_eq!(s.weights["always"], 0.4);
        assert_eq!(s.component_scores["semantic"], None);
        assert_eq!(s.hard_fail_count, 1, "hard fails count failing cases");
        assert_eq!(s.health_status, Health::Good);
    }

    #[test]
    fn an_empty_bank_is_left_out() {
        let banks = BankResults {
            always: Some(AlwaysResults::from_results(vec![])),
            pattern: Some(PatternResults::from_results(vec![pattern(
                "P1", 100, false,
            )])),
            ..BankResults::default()
        };
        let s = banks.summarize(&Weights::default(), None);
        assert_eq!(s.combined_score, 100.0);
        assert_eq!(s.component_scores["always"], None);
        assert_eq!(s.health_status, Health::Excellent);
    }

    #[test]
    fn a_critical_failure_makes_health_critical() {
        let banks = BankResults {
            pattern: Some(PatternResults::from_results(vec![
                pattern("P1", 100, false),
                pattern("PAT-NEG-001", 80, true),
            ])),
            ..BankResults::default()
        };
        let s = banks.summarize(&Weights::default(), None);
        assert_eq!(s.critical_failures, vec!["PAT-NEG-001"]);
        assert_eq!(s.health_status, Health::Critical);
    }

    #[test]
    fn group_scores_average_and_count() {
        let p = PatternResults::from_results(vec![
            PatternCaseResult {
                pattern_type: "a".into(),
                ..pattern("P1", 100, false)
            },
            PatternCaseResult {
                pattern_type: "a".into(),
                ..pattern("P2", 0, false)
            },
            PatternCaseResult {
                pattern_type: "b".into(),
                ..pattern("P3", 90, false)
            },
        ]);
        let g = &p.pattern_type_scores;
        assert_eq!(
            g["a"],
            GroupScore {
                avg: 50.0,
                tests: 2,
                hard_fails: 1
            }
        );
        assert_eq!(g["b"].avg, 90.0);
    }

    #[test]
    fn a_run_is_partial_for_each_selection_of_part_of_the_suite() {
        let whole = RunFilters {
            banks: BankType::ALL.to_vec(),
            ..RunFilters::default()
        };
        assert!(!whole.is_partial() && !whole.has_drafts());
        let test = RunFilters {
            test: Some("SEM-01".into()),
            ..whole.clone()
        };
        assert_eq!(test.partial(), vec!["--test SEM-01"]);
        let subset = RunFilters {
            banks: vec![BankType::State, BankType::Pattern],
            banks_left_out: vec![BankType::Semantic, BankType::Always],
            ..RunFilters::default()
        };
        assert_eq!(
            subset.partial(),
            vec!["--banks state,pattern (left out: semantic, always)"]
        );
        let changed = RunFilters {
            changed_since: Some(ChangedSince {
                reference: "latest".into(),
                ran: 15,
                skipped: 46,
                ..ChangedSince::default()
            }),
            ..whole.clone()
        };
        assert_eq!(
            changed.partial(),
            vec!["--changed-since latest (15 of 61 cases)"]
        );
        // Drafts are not partial, but set the run apart; none pending is a whole run.
        let drafts = RunFilters {
            drafts: Some(2),
            ..whole.clone()
        };
        assert!(!drafts.is_partial() && drafts.has_drafts());
        assert!(
            !RunFilters {
                drafts: Some(0),
                ..whole
            }
            .has_drafts()
        );
        // The left-out banks are read back, and absent when none were.
        let json = serde_json::to_value(&subset).unwrap();
        assert_eq!(
            json["banks_left_out"],
            serde_json::json!(["semantic", "always"])
        );
        assert_eq!(serde_json::from_value::<RunFilters>(json).unwrap(), subset);
        assert!(
            serde_json::to_value(&test)
                .unwrap()
                .get("banks_left_out")
                .is_none()
        );
    }
}
