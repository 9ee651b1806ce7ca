//! The answer bank: the product's own replies, judged on grounded-answer metrics and checked
//! with deterministic assertions (docs/answers.md).
//!
//! An [`AnswerCase`] is a user message (with a user state), optionally a reference answer and
//! a list of assertions. The product answers it through a target (the optimizer's command,
//! HTTP or built-in chain target) given the context assay's pipeline selected; a target may
//! return the contexts it actually used, and those are then judged instead. The result, an
//! [`AnswerCaseResult`], keeps the reply, every claim with its verdict and the entity that
//! supports it, each assertion's outcome, and the case's score out of 100 ([`score_case`]).
//!
//! The metrics' formulas, pure and unit-tested against hand-computed values, are in
//! [`metrics`]; the judge calls that produce their verdicts live in `assay-run`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::UserState;
use crate::assertion::AssertionReport;
use crate::scoring::Breakdown;
use crate::verdict::{FailedCheck, Rule, Verdict};

pub mod metrics;

/// A grounded-answer metric.
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
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// The share of the reply's claims that the context supports.
    Faithfulness,
    /// How well the reply answers the question asked (questions the reply answers, compared
    /// with the one asked; zero for an evasive reply).
    AnswerRelevancy,
    /// Whether the useful contexts are ranked first (mean precision at each useful rank).
    ContextPrecision,
    /// The share of the reference answer's claims that the context holds.
    ContextRecall,
}

impl Metric {
    /// All four, in the order reports show them.
    pub const ALL: [Metric; 4] = [
        Metric::Faithfulness,
        Metric::AnswerRelevancy,
        Metric::ContextPrecision,
        Metric::ContextRecall,
    ];

    /// The snake_case name used in files, settings and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Faithfulness => "faithfulness",
            Metric::AnswerRelevancy => "answer_relevancy",
            Metric::ContextPrecision => "context_precision",
            Metric::ContextRecall => "context_recall",
        }
    }

    /// Parses a snake_case name.
    pub fn parse(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// Whether the metric needs the case's reference answer (context recall does).
    pub fn needs_reference(self) -> bool {
        self == Metric::ContextRecall
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An answer case, as written in `test_banks/answer/*.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerCase {
    /// Unique id.
    pub test_id: String,
    /// Short description.
    #[serde(default)]
    pub name: String,
    /// The user's message, sent to the product.
    pub message: String,
    /// The user's state: read by the pipeline's STATE stage and sent to the target.
    #[serde(default)]
    pub user_state: UserState,
    /// The audience (default: the state's `user_type`, else the knowledge base's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    /// What a good reply says. Context recall needs it; context precision judges each context
    /// against it (against the reply when there is none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Topics, for grouping in reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<String>,
    /// The metrics computed for this case (default: the bank's `[answer] metrics`; context
    /// recall only where there is a reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<Metric>>,
    /// Minimum scores (0–1) per metric for this case, over the bank's `[answer.minimum]`: a
    /// metric below its minimum fails the case.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "minimum_schema")]
    pub minimum: BTreeMap<Metric, f64>,
    /// Deterministic assertions on the reply (docs/assertions.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<crate::assertion::AssertionConfig>>")]
    pub assert: Option<Value>,
    /// The weighted share (0–1) of `assert` that must pass (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assert_threshold: Option<f64>,
    /// Rules on the tool calls the product reports with its reply (`tool_calls`), as a
    /// scenario's `trajectory:` (docs/simulate.md); the reply is one turn. A failed check that
    /// is not advisory fails the case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<crate::trajectory::TrajectoryConfig>,
    /// Whether a failure here is a critical failure: it makes the run CRITICAL.
    #[serde(default)]
    pub is_critical: bool,
    /// Entities this case names on purpose although the knowledge base does not hold them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_missing: Vec<String>,
    /// Text planted in the context sent to the product for this case (an attack that came in
    /// through the knowledge base, kept by `assay redteam --drafts`): each replaces the text of
    /// its entity in what the pipeline selected, or is added after it when the pipeline did not
    /// select that entity. The store is never changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plant: Vec<ContextPlant>,
    /// Where the case came from, when a generator made it and a reviewer accepted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::provenance::Provenance>,
}

/// One entity's text as an answer case's `plant` puts it in the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextPlant {
    /// The entity whose text is replaced (or added, when the pipeline did not select it).
    pub entity: String,
    /// The text the product is given for it.
    pub text: String,
}

/// The context with `plants` applied: each plant's text replaces its entity's, in place, or
/// is added at the end when the context does not hold that entity.
pub fn apply_plants(context: &mut Vec<ContextItem>, plants: &[ContextPlant]) {
    for p in plants {
        match context
            .iter_mut()
            .find(|c| c.entity.as_deref() == Some(p.entity.as_str()))
        {
            Some(item) => item.text.clone_from(&p.text),
            None => context.push(ContextItem {
                entity: Some(p.entity.clone()),
                text: p.text.clone(),
            }),
        }
    }
}

/// The JSON Schema of a `minimum` table: a share (0–1) for any of the four metrics, and no
/// other key (a misspelt metric is an error, not a minimum that never applies).
pub fn minimum_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let share = serde_json::json!({"type": "number", "minimum": 0, "maximum": 1});
    let properties: serde_json::Map<String, Value> = Metric::ALL
        .iter()
        .map(|m| (m.as_str().to_owned(), share.clone()))
        .collect();
    schemars::json_schema!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
    })
}

impl crate::bank::Case for AnswerCase {
    fn test_id(&self) -> &str {
        &self.test_id
    }
    fn expects(&self) -> Vec<&String> {
        Vec::new()
    }
    fn excludes(&self) -> Vec<&String> {
        Vec::new()
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
    fn named_by_run(&self) -> bool {
        true
    }
}

/// The most bytes of a reply (or of a context the product sent) a result keeps:
/// 16 KiB. Assertions and the judge read the whole reply; what is stored, and so every report
/// and page, holds at most this much of it, then [`clip`]'s marker.
pub const KEPT_REPLY_BYTES: usize = 16 * 1024;

/// `text` as a result stores it: whole when it is at most [`KEPT_REPLY_BYTES`], else its first
/// [`KEPT_REPLY_BYTES`] (cut at a character boundary) followed by
/// ` … [clipped: <n> bytes in all]`.
///
/// ```
/// use assay_core::answer::{clip, KEPT_REPLY_BYTES};
/// assert_eq!(clip("short"), "short");
/// let long = "é".repeat(KEPT_REPLY_BYTES);
/// let kept = clip(&long);
/// assert!(kept.ends_with(&format!(" … [clipped: {} bytes in all]", long.len())));
/// assert!(kept.len() < KEPT_REPLY_BYTES + 64);
/// ```
pub fn clip(text: &str) -> String {
    if text.len() <= KEPT_REPLY_BYTES {
        return text.to_owned();
    }
    let mut end = KEPT_REPLY_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} … [clipped: {} bytes in all]", &text[..end], text.len())
}

/// One piece of context the reply was written from, in rank order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextItem {
    /// The entity it came from, when known (a target's own context may name none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// Its text.
    pub text: String,
}

/// Where the judged contexts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextSource {
    /// What assay's pipeline selected for the message.
    #[default]
    Pipeline,
    /// What the target said it used.
    Target,
}

/// One claim and the judge's verdict on it (faithfulness: a claim of the reply against the
/// context; context recall: a claim of the reference against the context).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimVerdict {
    /// The claim, one self-contained statement.
    pub claim: String,
    /// Whether the context supports it.
    pub supported: bool,
    /// The entity whose text supports it (when supported and the context names one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// The judge's reason, in a sentence.
    #[serde(default)]
    pub reason: String,
}

/// The judge's verdict on one context for context precision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextVerdict {
    /// 1-based rank.
    pub rank: usize,
    /// The entity, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// Whether it was useful in arriving at the answer.
    pub useful: bool,
    /// The judge's reason.
    #[serde(default)]
    pub reason: String,
}

/// A question the judge read off the reply, for answer relevancy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratedQuestion {
    /// The question the reply answers.
    pub question: String,
    /// Its cosine similarity with the question asked.
    pub similarity: f64,
}

/// One metric's outcome on one case, with what explains it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MetricOutcome {
    /// 0–1; `None` when the metric does not apply (see `note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Why there is no score, or anything else a reader needs ("the reply makes no claims",
    /// "no reference answer").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The minimum the case had to reach, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<f64>,
    /// Claims with their verdicts (faithfulness, context recall).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimVerdict>,
    /// Each context's verdict (context precision).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contexts: Vec<ContextVerdict>,
    /// Questions read off the reply (answer relevancy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<GeneratedQuestion>,
    /// Answer relevancy: the judge found the reply evasive or non-committal (score 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub noncommittal: bool,
}

impl MetricOutcome {
    /// Whether the score is below the minimum.
    pub fn below_minimum(&self) -> bool {
        matches!((self.score, self.minimum), (Some(s), Some(m)) if s < m)
    }
}

/// One answer case's result.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AnswerCaseResult {
    /// The case's id.
    pub test_id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its topics.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topics: Vec<String>,
    /// The message.
    pub message: String,
    /// The product's reply (`None` when the target failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The reference answer, when the case has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The contexts judged, in rank order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contexts: Vec<ContextItem>,
    /// Where they came from.
    #[serde(default)]
    pub contexts_from: ContextSource,
    /// Each metric computed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<Metric, MetricOutcome>,
    /// The assertions' outcome, when the case has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assertions: Option<AssertionReport>,
    /// The case's trajectory checks on the tool calls the product reported, one per rule (each
    /// naming the calls that satisfied or broke it), when the case has a `trajectory`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trajectory: Vec<crate::simulation::CheckResult>,
    /// How long the target took, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// How long the whole case took (the product, the judge, the checks), in milliseconds
    /// (absent in results written before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// What the target's model calls cost, in US dollars, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// 0–100; `None` on an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<u32>,
    /// Why it scored what it did.
    #[serde(default)]
    pub breakdown: Breakdown,
    /// A failed case: a critical assertion failed, the assertions missed their threshold, a
    /// metric fell below its minimum, or a trajectory check that is not advisory failed.
    pub is_hard_fail: bool,
    /// Whether the case is critical.
    #[serde(default)]
    pub is_critical: bool,
    /// A critical case that failed.
    #[serde(default)]
    pub is_critical_failure: bool,
    /// Why the case failed, one line each (empty when it passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
    /// An infrastructure error (the target failed, a judge reply could not be parsed): the
    /// case is not scored and averages leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The case's verdict, decided where it was scored ([`crate::verdict`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// How metrics and assertions weigh in an answer case's score (`[answer.weights]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreWeights {
    /// Each metric's weight (a metric absent here weighs 1).
    pub metrics: BTreeMap<Metric, f64>,
    /// The assertions' weight (their weighted pass share is one component).
    pub assertions: f64,
}

impl Default for ScoreWeights {
    fn default() -> Self {
        ScoreWeights {
            metrics: BTreeMap::new(),
            assertions: 1.0,
        }
    }
}

/// The checks that fail an answer case, in the order they are made: each metric under its
/// minimum, each critical assertion that failed (named by its type and value), the assertions
/// under their threshold (naming the assertions that failed), each trajectory rule that failed
/// and is not advisory. What [`score_case`] records as `failures` and what the case's verdict
/// names ([`crate::decide`]).
pub fn failed_checks(result: &AnswerCaseResult) -> Vec<FailedCheck> {
    let mut out = Vec::new();
    for (metric, outcome) in &result.metrics {
        if outcome.below_minimum() {
            out.push(FailedCheck::new(
                Rule::MetricMinimum,
                vec![metric.as_str().to_owned()],
                format!(
                    "{metric} {:.2} below its minimum {:.2}",
                    outcome.score.unwrap_or_default(),
                    outcome.minimum.unwrap_or_default()
                ),
            ));
        }
    }
    if let Some(report) = &result.assertions {
        for r in report
            .results
            .iter()
            .filter(|r| r.critical && r.status == crate::assertion::Status::Failed)
        {
            out.push(FailedCheck::new(
                Rule::Assertion,
                vec![r.name()],
                format!(
                    "critical assertion {} `{}` failed: {}",
                    r.index + 1,
                    r.name(),
                    r.reason
                ),
            ));
        }
        if !report.passed && !report.critical_failed {
            let failed: Vec<&crate::assertion::AssertionResult> = report
                .results
                .iter()
                .filter(|r| r.status == crate::assertion::Status::Failed)
                .collect();
            let mut message = format!(
                "assertions passed {}% of their weight, under the threshold {}%",
                percent(report.score.unwrap_or(0.0)),
                percent(report.threshold)
            );
            if !failed.is_empty() {
                let each: Vec<String> = failed
                    .iter()
                    .map(|r| format!("`{}` ({})", r.name(), r.reason))
                    .collect();
                message.push_str(&format!(": failed {}", each.join(", ")));
            }
            if report.errors > 0 {
                message.push_str(&format!(
                    "; {} could not be decided (an error is not a pass)",
                    report.errors
                ));
            }
            out.push(FailedCheck::new(
                Rule::AssertionThreshold,
                failed.iter().map(|r| r.name()).collect(),
                message,
            ));
        }
    }
    for c in result
        .trajectory
        .iter()
        .filter(|c| c.required() && c.status != crate::simulation::CheckStatus::Passed)
    {
        let why = if c.details.is_empty() {
            c.calls
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            c.details.join("; ")
        };
        out.push(FailedCheck::new(
            Rule::Trajectory,
            vec![c.name.clone()],
            format!("{} failed: {why}", c.name),
        ));
    }
    out
}

/// A share as a whole percentage, never `-0`.
fn percent(share: f64) -> String {
    format!("{:.0}", (share * 100.0).round() + 0.0)
}

/// Scores a result whose metrics and assertions are filled in: sets `score`, `breakdown`,
/// `is_hard_fail`, `is_critical_failure` and `failures`. A result with an `error` is left
/// unscored.
///
/// The score is 100 × the weighted mean of the metrics that have a score and of the
/// assertions' pass share (when any assertion was decided), rounded. A critical assertion
/// that failed, or a trajectory check that failed and is not advisory, makes the score 0 and
/// the case a hard fail, whatever the metrics say (evidence outranks opinion). Assertions under their threshold, or a metric under its minimum, make
/// the case a hard fail and keep the score ([`failed_checks`]). A case with nothing to score
/// (no metric applies and no assertion was decided) scores 100 only when it has no failure.
pub fn score_case(result: &mut AnswerCaseResult, weights: &ScoreWeights) {
    result.failures.clear();
    if result.error.is_some() {
        result.score = None;
        result.is_hard_fail = false;
        result.is_critical_failure = false;
        result.breakdown = Breakdown::default();
        return;
    }
    let mut sum = 0.0;
    let mut total = 0.0;
    for (metric, outcome) in &result.metrics {
        if let Some(s) = outcome.score {
            let w = weights.metrics.get(metric).copied().unwrap_or(1.0);
            sum += w * s;
            total += w;
        }
    }
    if let Some(s) = result.assertions.as_ref().and_then(|r| r.score) {
        sum += weights.assertions * s;
        total += weights.assertions;
    }
    let checks = failed_checks(result);
    // Evidence outranks opinion: a failed critical assertion or trajectory rule scores 0.
    let critical = checks
        .iter()
        .any(|c| matches!(c.rule, Rule::Assertion | Rule::Trajectory));
    result.failures = checks.into_iter().map(|c| c.message).collect();
    let score = if critical {
        0
    } else if total > 0.0 {
        (100.0 * sum / total).round().clamp(0.0, 100.0) as u32
    } else if result.failures.is_empty() {
        100
    } else {
        0
    };
    result.score = Some(score);
    result.is_hard_fail = !result.failures.is_empty();
    result.is_critical_failure = result.is_critical && result.is_hard_fail;
    result.breakdown = if result.is_hard_fail {
        Breakdown {
            primary_fail: Some(true),
            reason: Some(result.failures.join("; ")),
            ..Breakdown::default()
        }
    } else {
        Breakdown::default()
    };
}

#[cfg(test)]
mod tests;
