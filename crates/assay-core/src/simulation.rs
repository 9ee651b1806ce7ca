//! The record of a conversation simulation (`assay simulate`, seed 004): transcripts with their
//! tool calls, expected-state check results, the judge's scores, verdicts and the aggregated
//! [`SimReport`] that reports render and `compare` reads. Like the RunLog, it is versioned
//! ([`SIM_SCHEMA_VERSION`]) and changes are additive; timestamps are RFC 3339 strings.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the [`SimReport`] JSON shape; changes are additive.
pub const SIM_SCHEMA_VERSION: u32 = 1;
/// Who speaks a transcript turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    /// The simulated user.
    User,
    /// The model under test.
    Assistant,
}

/// One tool call of the model under test, with what came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The provider's call id.
    pub id: String,
    /// The tool's name as the model saw it.
    pub name: String,
    /// The server that ran it (`null` when no server has the tool).
    pub server: Option<String>,
    /// The arguments as the model gave them.
    pub arguments: Value,
    /// What the tool returned, or its error.
    pub result: String,
    /// The tool (or the harness, for an unknown tool or bad arguments) reported an error.
    pub is_error: bool,
    /// Milliseconds the call took.
    pub duration_ms: u64,
}

/// One turn of the transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Who speaks.
    pub role: Speaker,
    /// What they said (for the assistant, its final text of the turn).
    pub content: String,
    /// The assistant's tool calls in this turn, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRecord>,
    /// When the turn was complete.
    pub timestamp: String,
}

/// Why the conversation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The simulated user said the stop token.
    StopToken,
    /// `max_turns` user turns were answered.
    MaxTurns,
    /// A provider or MCP error stopped it.
    Error,
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Ending::StopToken => "the simulated user's stop token",
            Ending::MaxTurns => "max_turns",
            Ending::Error => "an error",
        })
    }
}

/// A whole conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    /// The scenario.
    pub scenario_id: String,
    /// Which repeat (1-based).
    pub repeat: u32,
    /// The model under test.
    pub model: String,
    /// The simulated user's model.
    pub simulator_model: String,
    /// The turns.
    pub turns: Vec<Turn>,
    /// Why it ended.
    pub ended_by: Ending,
    /// The error that stopped it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it started.
    pub started_at: String,
    /// When it ended.
    pub ended_at: String,
}

impl Transcript {
    /// Every tool call of the assistant, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCallRecord> {
        self.turns.iter().flat_map(|t| t.tool_calls.iter())
    }

    /// User turns taken.
    pub fn user_turns(&self) -> usize {
        self.turns
            .iter()
            .filter(|t| t.role == Speaker::User)
            .count()
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The check's name.
    pub name: String,
    /// `passed`, `failed` or `error`.
    pub status: CheckStatus,
    /// One line per expectation that failed, or the error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

/// A check's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Every expectation held.
    Passed,
    /// Some did not.
    Failed,
    /// The state could not be read.
    Error,
}

/// A criterion's scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scale {
    /// A score from 0 to 10.
    #[serde(rename = "0-10")]
    ZeroToTen,
    /// Pass (10) or fail (0).
    #[serde(rename = "pass_fail")]
    PassFail,
}

impl std::fmt::Display for Scale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scale::ZeroToTen => "0-10",
            Scale::PassFail => "pass_fail",
        })
    }
}

/// One criterion's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionScore {
    /// The criterion.
    pub id: String,
    /// Its display name.
    pub name: String,
    /// Its scale.
    pub scale: Scale,
    /// 0-10 (0 or 10 for `pass_fail`).
    pub score: f64,
    /// The normalised weight used for this scenario.
    pub weight: f64,
    /// The judge's reasoning.
    pub reasoning: String,
}

/// The judge's verdict on one transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// Every criterion, in suite order.
    pub scores: Vec<CriterionScore>,
    /// Σ weight × score.
    pub overall: f64,
    /// Whether the simulated user kept to its persona.
    pub simulator_kept_persona: bool,
    /// What the simulated user did wrong, if anything.
    pub simulator_issue: String,
    /// The judge's summary.
    pub summary: String,
    /// Judge calls made (more than 1 after corrective retries).
    pub calls: u32,
}

/// A simulation suite's gate (`gate:` in `sim/suite.yaml`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimGate {
    /// The mean overall score over scored scenario runs must reach this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_mean_overall: Option<f64>,
    /// The share of scored scenario runs that pass must reach this (0-1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pass_rate: Option<f64>,
}

/// A scenario run's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Overall score at or above the pass threshold.
    Pass,
    /// Below it.
    Fail,
    /// The judge found that the simulated user broke its persona: not counted against the model.
    SimulatorFault,
    /// An infrastructure failure kept the run from a verdict.
    Error,
}

impl Verdict {
    /// Scored (pass or fail): counts towards means and pass rates.
    pub fn is_scored(self) -> bool {
        matches!(self, Verdict::Pass | Verdict::Fail)
    }
}

/// One (scenario, repeat) run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioRun {
    /// The scenario.
    pub scenario_id: String,
    /// Its name.
    pub scenario_name: String,
    /// Which repeat (1-based).
    pub repeat: u32,
    /// The verdict.
    pub verdict: Verdict,
    /// The weighted overall score (0-10), when judged.
    pub overall: Option<f64>,
    /// The judge's verdict, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judgement: Option<Judgement>,
    /// The expected-state checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckResult>,
    /// Why the run is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Warnings (a teardown step that failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The conversation (absent when the run failed before it started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<Transcript>,
    /// Wall-clock milliseconds.
    pub duration_ms: u64,
}

/// Per-scenario aggregate over its repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioSummary {
    /// The scenario.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Runs.
    pub runs: u32,
    /// Scored runs (pass or fail).
    pub scored: u32,
    /// Passing runs.
    pub passed: u32,
    /// Mean overall over scored runs.
    pub mean: Option<f64>,
    /// Population standard deviation over scored runs.
    pub stddev: Option<f64>,
    /// Lowest scored overall.
    pub min: Option<f64>,
    /// Highest scored overall.
    pub max: Option<f64>,
    /// pass^k: every one of the runs passed (`None` when some run was not scored).
    pub pass_all: Option<bool>,
}

/// Per-criterion aggregate over scored runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionSummary {
    /// The criterion.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its default weight (normalised).
    pub weight: f64,
    /// Mean score.
    pub mean: Option<f64>,
    /// Lowest score.
    pub min: Option<f64>,
}

/// Counts over all runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimSummary {
    /// All runs.
    pub runs: u32,
    /// Passed.
    pub passed: u32,
    /// Failed.
    pub failed: u32,
    /// Simulator at fault (apart).
    pub simulator_fault: u32,
    /// Errors (apart).
    pub errors: u32,
    /// Mean overall over scored runs.
    pub mean_overall: Option<f64>,
    /// passed / (passed + failed).
    pub pass_rate: Option<f64>,
    /// Scenarios whose every run passed (pass^k), over scenarios with every run scored.
    pub pass_all_scenarios: Option<(u32, u32)>,
}

/// The gate's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateOutcome {
    /// The gate as configured.
    pub config: SimGate,
    /// Whether it passed (a gate with nothing scored fails).
    pub passed: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// Tokens and calls per role.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoleUsage {
    /// `vendor/model`.
    pub model: String,
    /// Calls made.
    pub calls: u64,
    /// Answered from the cache.
    pub cache_hits: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost, when the price is known.
    pub cost_usd: Option<f64>,
}

/// A whole simulation: what the Markdown and JSON reports and `compare` read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimReport {
    /// [`SIM_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The suite's name.
    pub suite: String,
    /// The model under test.
    pub model: String,
    /// The simulated user's model.
    pub simulator_model: String,
    /// The judge's model.
    pub evaluator_model: String,
    /// When the report was made.
    pub generated_at: String,
    /// The pass threshold.
    pub pass_threshold: f64,
    /// Runs per scenario.
    pub repeat: u32,
    /// Model calls in flight at once (across the three roles).
    pub concurrency: usize,
    /// Conversations open at once (0 in reports written before this field existed).
    #[serde(default)]
    pub runs_in_flight: usize,
    /// Wall-clock milliseconds of the whole simulation.
    pub duration_ms: u64,
    /// Counts.
    pub summary: SimSummary,
    /// The gate, when the suite has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateOutcome>,
    /// Per scenario, in id order.
    pub scenarios: Vec<ScenarioSummary>,
    /// Per criterion, in suite order.
    pub criteria: Vec<CriterionSummary>,
    /// Every run, by scenario then repeat.
    pub runs: Vec<ScenarioRun>,
    /// Model usage (filled in by the caller, which owns the accounting).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<RoleUsage>,
    /// How the providers' rate limits shaped the calls, per model (filled in by the caller).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<crate::runlog::RateLimitRecord>,
}

/// What a simulation's outcome means for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything judged; the gate (if any) passed.
    Passed,
    /// The suite's gate failed (exit 1).
    GateFailed,
    /// Errors kept runs from a verdict (exit 3).
    Errors,
}

impl SimReport {
    /// [`Outcome::Errors`] when errors kept runs from a verdict, else
    /// [`Outcome::GateFailed`] when the gate failed, else [`Outcome::Passed`].
    pub fn outcome(&self) -> Outcome {
        if self.summary.errors > 0 {
            Outcome::Errors
        } else if self.gate.as_ref().is_some_and(|g| !g.passed) {
            Outcome::GateFailed
        } else {
            Outcome::Passed
        }
    }
}

/// Checks that failed or could not be evaluated, for reports.
pub fn failed_checks(run: &ScenarioRun) -> impl Iterator<Item = &CheckResult> {
    run.checks
        .iter()
        .filter(|c| c.status != CheckStatus::Passed)
}
