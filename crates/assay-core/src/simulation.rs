//! The record of a conversation simulation (`assay simulate`, seed 004): transcripts with their
//! tool calls, expected-state check results, the judge's scores, verdicts and the aggregated
//! [`SimReport`] that reports render and `compare` reads. Like the RunLog, it is versioned
//! ([`SIM_SCHEMA_VERSION`]) and changes are additive; timestamps are RFC 3339 strings.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the [`SimReport`] JSON shape; changes are additive. Version 2 added the
/// objective checks' say in verdicts (`failed_by`, `judge_verdict`, advisory checks), the
/// `uncertain` verdict, the judge's version and samples, and the comparison with a baseline.
/// Version 3 added trajectory checks: a check's `kind` and the tool `calls` that satisfied or
/// broke it. Version 4 added what each turn's model calls took and cost (a turn's `usage`, a
/// transcript's `stop_usage`).
pub const SIM_SCHEMA_VERSION: u32 = 4;

/// The oldest [`SimReport`] shape this version reads.
pub const SIM_SCHEMA_OLDEST: u32 = 1;

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_false(b: &bool) -> bool {
    !*b
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &u32) -> bool {
    *n == 0
}
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
    /// What the turn's model calls took and cost: the model under test's for an assistant
    /// turn, the simulated user's for a user turn (version 4). Absent for the scenario's
    /// opening message, which no model wrote, and in reports written before version 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TurnUsage>,
}

/// What the model calls of one turn took and cost (version 4).
///
/// A call answered from the call cache took no measurable time: a turn with one has no
/// `latency_ms` (never a near-zero one that a `latency` assertion would pass), while its tokens
/// are those the provider reported when the call was recorded, and its cost theirs at the
/// model's price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnUsage {
    /// Model calls made (tool rounds and the simulated user's retries each count).
    pub calls: u32,
    /// Of those, the calls answered from the call cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_hits: u32,
    /// Wall-clock milliseconds of the calls, summed (tool calls not included: each has its own
    /// `duration_ms`); `None` when some call came from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// The tokens at the model's price, in US dollars; `None` when the price is not known
    /// (never 0 for an unknown price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl TurnUsage {
    /// Adds `other`: counts and tokens add up; a latency or cost stays known only when both
    /// are.
    pub fn add(&mut self, other: &TurnUsage) {
        self.calls += other.calls;
        self.cache_hits += other.cache_hits;
        self.latency_ms = self.latency_ms.zip(other.latency_ms).map(|(a, b)| a + b);
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd = self.cost_usd.zip(other.cost_usd).map(|(a, b)| a + b);
    }

    /// The sum of `usages` ([`TurnUsage::add`]), or `None` when there are none.
    pub fn sum<'a>(usages: impl IntoIterator<Item = &'a TurnUsage>) -> Option<TurnUsage> {
        let mut usages = usages.into_iter();
        let mut total = usages.next()?.clone();
        for u in usages {
            total.add(u);
        }
        Some(total)
    }
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
    /// The simulated user's last call when its message was only the stop token, so that no
    /// turn records it (version 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_usage: Option<TurnUsage>,
}

impl Transcript {
    /// What `speaker`'s model calls took and cost over the conversation (for the simulated
    /// user, its closing call too), or `None` when no turn of theirs recorded any (a report
    /// written before version 4).
    pub fn usage_of(&self, speaker: Speaker) -> Option<TurnUsage> {
        let closing = match speaker {
            Speaker::User => self.stop_usage.as_ref(),
            Speaker::Assistant => None,
        };
        TurnUsage::sum(
            self.turns
                .iter()
                .filter(|t| t.role == speaker)
                .filter_map(|t| t.usage.as_ref())
                .chain(closing),
        )
    }

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
    /// An advisory check is reported but does not decide the run's verdict.
    #[serde(default, skip_serializing_if = "is_false")]
    pub advisory: bool,
    /// Where the state was read from, in words (`tool quest.get_state`, `resource …`,
    /// `command …`); absent in reports written before this field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// What the check read (the state's JSON, cut at 2,000 characters), when it read anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// What the check tested: the state after the conversation (the default) or the
    /// assistant's tool calls (version 3).
    #[serde(default, skip_serializing_if = "CheckKind::is_state")]
    pub kind: CheckKind,
    /// For a trajectory check, the tool calls that satisfied it (passed) or broke it (failed),
    /// in transcript order (version 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallRef>,
}

/// What a check tested.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// The state read after the conversation (`expected_state`).
    #[default]
    State,
    /// The assistant's tool calls in the transcript (`trajectory`).
    Trajectory,
    /// A deterministic assertion on the assistant's final reply (`assert`).
    Assertion,
}

impl CheckKind {
    /// An expected-state check.
    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
    pub fn is_state(&self) -> bool {
        *self == CheckKind::State
    }

    /// `state`, `trajectory` or `assertion`, for reports.
    pub fn word(self) -> &'static str {
        match self {
            CheckKind::State => "state",
            CheckKind::Trajectory => "trajectory",
            CheckKind::Assertion => "assertion",
        }
    }
}

/// One tool call of a transcript, as a check's evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRef {
    /// The call's number over the whole transcript, from 1 (the transcript page's `call-N`).
    pub call: usize,
    /// The transcript turn it was made in, from 1 (the transcript page's `turn-N`).
    pub turn: usize,
    /// The provider's call id.
    pub id: String,
    /// The tool's name as the model saw it.
    pub name: String,
}

impl std::fmt::Display for CallRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (call {}, turn {})", self.name, self.call, self.turn)
    }
}

impl CheckResult {
    /// A check that decides the verdict (not advisory).
    pub fn required(&self) -> bool {
        !self.advisory
    }
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The judge, asked several times (`--judge-samples`), passed the run on some samples and
    /// failed it on others, and no objective check decided it: reported apart, not counted.
    Uncertain,
    /// An infrastructure failure kept the run from a verdict.
    Error,
}

/// What failed a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailedBy {
    /// A required expected-state check failed: objective evidence, whatever the judge scored.
    Check,
    /// The judge's overall score was below the pass threshold (every required check passed).
    Judge,
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
    /// The verdict: a failed required check makes it `fail`; otherwise the judge's.
    pub verdict: Verdict,
    /// For a failed run: what failed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_by: Option<FailedBy>,
    /// What the judge alone would have said (`pass`, `fail`, `simulator_fault`, `uncertain`),
    /// when it judged; it differs from `verdict` when a check decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_verdict: Option<Verdict>,
    /// Why the run failed or is uncertain, in a line (the failed checks by name, the flips).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The weighted overall score (0-10), when judged.
    pub overall: Option<f64>,
    /// The judge's verdict, when there is one (with several samples: each criterion's mean
    /// over the samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judgement: Option<Judgement>,
    /// Every sample of the judge, when it was asked more than once (`--judge-samples`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judge_samples: Vec<Judgement>,
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Failed runs that a required expected-state check failed (objective evidence).
    #[serde(default)]
    pub failed_by_check: u32,
    /// Failed runs that the judge failed, every required check having passed.
    #[serde(default)]
    pub failed_by_judge: u32,
    /// Runs the judge passed although a required check failed: the judge was fooled (a
    /// confident reply about an action that never happened), worth a look at the judge.
    #[serde(default)]
    pub judge_passed_failed_check: u32,
    /// Runs whose judge samples disagreed on pass or fail (apart, not scored).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub uncertain: u32,
    /// Mean overall over scored runs.
    pub mean_overall: Option<f64>,
    /// passed / (passed + failed).
    pub pass_rate: Option<f64>,
    /// The pass rate's 95 % Wilson interval `[low, high]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_rate_interval: Option<[f64; 2]>,
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
    /// The suite has no `gate:`; this is the default rule: every scored run must pass.
    #[serde(default, skip_serializing_if = "is_false")]
    pub implicit: bool,
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
    /// How the judge judged: its version and, with several samples, its consistency (absent in
    /// reports written before version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeInfo>,
    /// The comparison with a baseline report (`--baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<SimBaseline>,
    /// How the providers' rate limits shaped the calls, per model (filled in by the caller).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<crate::ratelimit::RateLimitRecord>,
    /// The shard of the simulation this report is (`assay simulate --shard hash:i/n`); absent
    /// in a report of the whole simulation. A shard's report holds no gate and no baseline
    /// comparison: the merge decides both over the whole suite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<SimShard>,
    /// The shards this report was merged from (`assay runs merge`); absent in a report made in
    /// one piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<SimMerged>,
}

/// What a shard's report records so that the shards can be merged and checked: which shard,
/// and what every shard of one simulation shares besides the settings the report holds anyway
/// (suite, models, judge, pass threshold, repeats, criteria).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimShard {
    /// Which shard of how many.
    pub shard: crate::shard::Shard,
    /// Every scenario the simulation selected (all shards together), in id order: what the
    /// merge must cover. A scenario's runs are all in the shard its id hashes to.
    pub scenarios: Vec<String>,
    /// A digest (16 hex digits of SHA-256) of the suite as read: `suite.yaml`, the system
    /// prompt and every scenario. Shards of one simulation share it.
    pub suite_version: String,
    /// A digest of the fixture, when the suite has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixture_version: Option<String>,
    /// The suite's gate (absent: the default rule, every scored run passes), which the merge
    /// applies to the whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<SimGate>,
    /// The baseline report the simulation is compared with (`--baseline`), which the merge
    /// reads again to compare the whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<ShardBaseline>,
    /// SHA-256 (hex) of the shard's runs as saved: each run serialised as JSON and ended by a
    /// newline, in the report's order. The merge computes it again and refuses a report whose
    /// runs (a verdict, a score, a transcript) changed since it was saved; absent in reports
    /// saved before it was recorded, which a merge refuses too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_sha256: Option<String>,
}

/// The baseline of a sharded simulation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardBaseline {
    /// The baseline's file as `--baseline` named it.
    pub label: String,
    /// A digest (16 hex digits of SHA-256) of the baseline report as read: the merge refuses
    /// a file that is not the one the shards read.
    pub version: String,
}

/// Where a merged report came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimMerged {
    /// How many shards the simulation was split into.
    pub count: u32,
    /// The suite's digest, as every shard recorded it.
    pub suite_version: String,
    /// The shards, in shard order.
    pub shards: Vec<MergedSimShard>,
}

/// One shard of a merged report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedSimShard {
    /// Which shard (from 1).
    pub index: u32,
    /// When its report was made.
    pub generated_at: String,
    /// Its wall-clock milliseconds.
    pub duration_ms: u64,
    /// Its scenarios.
    pub scenarios: u32,
    /// Its scenario runs.
    pub runs: u32,
}

/// The judge's identity and consistency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeInfo {
    /// A digest (16 hex digits of SHA-256) of everything that shapes a verdict besides the
    /// transcript: the judge's instructions, the answer schema and the suite's criteria with
    /// their rubrics, scales and weights. Two reports with the same version were judged alike;
    /// comparisons warn when they differ.
    pub version: String,
    /// Times each transcript was judged (`--judge-samples`, default 1).
    pub samples: u32,
    /// With several samples: how much the judge disagrees with itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistency: Option<JudgeConsistency>,
}

/// How consistent the judge was across samples of the same transcripts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeConsistency {
    /// Runs judged with every sample.
    pub judged: u32,
    /// Of those, runs whose pass/fail verdict differed between samples.
    pub flipped: u32,
    /// `flipped / judged`.
    pub flip_share: f64,
    /// Each criterion's spread over samples, in suite order.
    pub criteria: Vec<CriterionSpread>,
    /// The overall score's mean standard deviation over samples.
    pub overall_sd: f64,
}

/// One criterion's spread over judge samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionSpread {
    /// The criterion.
    pub id: String,
    /// The mean, over runs, of the standard deviation of its score across samples.
    pub mean_sd: f64,
    /// The largest such standard deviation.
    pub max_sd: f64,
    /// The share of runs whose samples gave it more than one distinct score.
    pub varied_share: f64,
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
        } else if self.gate.as_ref().is_some_and(|g| !g.passed)
            || self.baseline.as_ref().is_some_and(|b| !b.passed)
        {
            Outcome::GateFailed
        } else {
            Outcome::Passed
        }
    }
}

/// The required checks of a run that failed, for reports and verdicts.
pub fn failed_required_checks(run: &ScenarioRun) -> impl Iterator<Item = &CheckResult> {
    run.checks
        .iter()
        .filter(|c| c.required() && c.status == CheckStatus::Failed)
}

/// Checks that failed or could not be evaluated, for reports.
pub fn failed_checks(run: &ScenarioRun) -> impl Iterator<Item = &CheckResult> {
    run.checks
        .iter()
        .filter(|c| c.status != CheckStatus::Passed)
}

/// One scenario's row of the criteria heat map: each criterion's mean score over the
/// scenario's scored runs (in the report's criterion order; `None` where no scored run has it).
#[derive(Debug, Clone, PartialEq)]
pub struct CriteriaRow {
    /// The scenario.
    pub scenario_id: String,
    /// Its name.
    pub scenario_name: String,
    /// Per criterion of [`SimReport::criteria`], the mean and the number of scored runs.
    pub cells: Vec<Option<(f64, u32)>>,
}

/// The criteria heat map: scenarios as rows, the report's criteria as columns, each cell the
/// mean score over the scenario's scored runs (pass and fail; errors, simulator faults and
/// uncertain runs are left out, as from every mean).
pub fn criteria_by_scenario(report: &SimReport) -> Vec<CriteriaRow> {
    report
        .scenarios
        .iter()
        .map(|sc| {
            let cells = report
                .criteria
                .iter()
                .map(|c| {
                    let scores: Vec<f64> = report
                        .runs
                        .iter()
                        .filter(|r| r.scenario_id == sc.id && r.verdict.is_scored())
                        .filter_map(|r| r.judgement.as_ref())
                        .filter_map(|j| j.scores.iter().find(|s| s.id == c.id))
                        .map(|s| s.score)
                        .collect();
                    (!scores.is_empty()).then(|| {
                        (
                            scores.iter().sum::<f64>() / scores.len() as f64,
                            scores.len() as u32,
                        )
                    })
                })
                .collect();
            CriteriaRow {
                scenario_id: sc.id.clone(),
                scenario_name: sc.name.clone(),
                cells,
            }
        })
        .collect()
}

/// How one expected-state check fared over a report's runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckTally {
    /// The check's name.
    pub name: String,
    /// Advisory (reported, never deciding a verdict).
    pub advisory: bool,
    /// Runs where it passed.
    pub passed: u32,
    /// Runs where it failed.
    pub failed: u32,
    /// Runs where the state could not be read.
    pub errors: u32,
}

/// Every check of a report with its passes, failures and errors, in order of first appearance.
pub fn check_tally(report: &SimReport) -> Vec<CheckTally> {
    let mut out: Vec<CheckTally> = Vec::new();
    for c in report.runs.iter().flat_map(|r| r.checks.iter()) {
        let i = out
            .iter()
            .position(|t| t.name == c.name)
            .unwrap_or_else(|| {
                out.push(CheckTally {
                    name: c.name.clone(),
                    advisory: c.advisory,
                    ..CheckTally::default()
                });
                out.len() - 1
            });
        let t = &mut out[i];
        match c.status {
            CheckStatus::Passed => t.passed += 1,
            CheckStatus::Failed => t.failed += 1,
            CheckStatus::Error => t.errors += 1,
        }
    }
    out
}

/// Several simulation reports compared (`assay simulate compare`, `assay simulate
/// --baseline`): per report and per scenario the mean overall score with its bootstrap
/// interval over the scored runs, and for every pair of reports, scenario by scenario and
/// overall, whether the second is better, worse or not distinguishable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimComparison {
    /// The reports, in the order given.
    pub reports: Vec<ComparedReport>,
    /// What makes the comparison less than clean: reports judged by another judge (version or
    /// model), other suites, other pass thresholds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Scenario by scenario, in id order.
    pub scenarios: Vec<ComparedScenario>,
    /// Every pair `(a, b)` with `a < b`: `b` against `a`.
    pub pairs: Vec<ComparedPair>,
}

/// One report in a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparedReport {
    /// Where it came from (its file).
    pub label: String,
    /// The model under test.
    pub model: String,
    /// The judge's model.
    pub evaluator_model: String,
    /// The judge's version, when the report records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_version: Option<String>,
    /// The mean overall score over scored runs, with its bootstrap interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_overall: Option<crate::stats::Interval>,
    /// The pass rate with its Wilson interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_rate: Option<crate::stats::Interval>,
}

/// One scenario across the reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparedScenario {
    /// The scenario.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Per report (`None`: not run there).
    pub cells: Vec<Option<ScenarioCell>>,
}

/// A scenario's result in one report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioCell {
    /// Mean overall over its scored runs.
    pub mean: Option<f64>,
    /// Its bootstrap interval (two or more scored runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<crate::stats::Interval>,
    /// Scored runs.
    pub scored: u32,
    /// Passing runs.
    pub passed: u32,
    /// Runs.
    pub runs: u32,
    /// Whether the mean passes the report's threshold.
    pub passes: Option<bool>,
}

/// Report `b` against report `a`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparedPair {
    /// Index of the first report.
    pub a: usize,
    /// Index of the second.
    pub b: usize,
    /// Paired over the scenarios both scored (each scenario's mean overall): the mean change,
    /// its interval and the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall: Option<crate::stats::PairedComparison>,
    /// Per scenario, over the two reports' scored runs (two or more on each side): the change
    /// in mean overall (Welch's t) and the verdict, corrected for the number of scenarios
    /// (Holm).
    #[serde(default)]
    pub scenarios: Vec<(String, crate::stats::PairedComparison)>,
    /// Paired over the scenarios both scored: the change in each scenario's pass rate. Failed
    /// checks count here even when the judge scored the run well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overall_pass_rate: Option<crate::stats::PairedComparison>,
    /// Per scenario, over the two reports' scored runs: the change in pass rate (Newcombe's
    /// interval, Fisher's exact test), corrected as `scenarios`.
    #[serde(default)]
    pub scenario_pass_rates: Vec<(String, crate::stats::PairedComparison)>,
}

impl ComparedPair {
    /// The scenarios this pair finds worse, on score or on pass rate.
    pub fn worse_scenarios(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self
            .scenarios
            .iter()
            .chain(&self.scenario_pass_rates)
            .filter(|(_, c)| c.verdict == crate::stats::Verdict::Worse)
            .map(|(id, _)| id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Per-scenario comparisons with their verdicts corrected for testing many scenarios at once
/// (Holm): a verdict stands only when its p-value survives the correction, so the same model
/// twice is called better or worse on some scenario about 5 % of the time, not 5 % a scenario.
fn holm_corrected(
    mut list: Vec<(String, crate::stats::PairedComparison)>,
    alpha: f64,
) -> Vec<(String, crate::stats::PairedComparison)> {
    let p: Vec<f64> = list.iter().map(|(_, c)| c.p_value).collect();
    for ((_, c), keep) in list.iter_mut().zip(crate::stats::holm(&p, alpha)) {
        if !keep {
            c.verdict = crate::stats::Verdict::NotDistinguishable;
        }
    }
    list
}

fn scored_overall(report: &SimReport, scenario: Option<&str>) -> Vec<f64> {
    report
        .runs
        .iter()
        .filter(|r| scenario.is_none_or(|s| r.scenario_id == s))
        .filter(|r| r.verdict.is_scored())
        .filter_map(|r| r.overall)
        .collect()
}

/// Compares reports (each with a label, usually its file). Seeded: the same reports give the
/// same intervals.
pub fn compare_reports(reports: &[(String, &SimReport)]) -> SimComparison {
    use crate::stats::{
        BootstrapSettings, bootstrap_mean, paired_bootstrap_t, proportion_difference,
        stratified_bootstrap_mean, t_interval, welch_difference, wilson,
    };
    let settings = BootstrapSettings::default();
    let mut warnings = Vec::new();
    if let Some((_, first)) = reports.first() {
        let version = |r: &SimReport| r.judge.as_ref().map(|j| j.version.clone());
        for (label, r) in &reports[1..] {
            if r.suite != first.suite {
                warnings.push(format!(
                    "{label} is of another suite (`{}`, not `{}`)",
                    r.suite, first.suite
                ));
            }
            if r.evaluator_model != first.evaluator_model || version(r) != version(first) {
                warnings.push(format!(
                    "{label} was judged differently (judge {} version {}, not {} version {}): its scores mix a change of judge with the change under test",
                    r.evaluator_model,
                    version(r).unwrap_or_else(|| "unrecorded".into()),
                    first.evaluator_model,
                    version(first).unwrap_or_else(|| "unrecorded".into())
                ));
            }
            if (r.pass_threshold - first.pass_threshold).abs() > f64::EPSILON {
                warnings.push(format!(
                    "{label} has pass threshold {}, not {}",
                    r.pass_threshold, first.pass_threshold
                ));
            }
        }
    }
    let compared: Vec<ComparedReport> = reports
        .iter()
        .map(|(label, r)| ComparedReport {
            label: label.clone(),
            model: r.model.clone(),
            evaluator_model: r.evaluator_model.clone(),
            judge_version: r.judge.as_ref().map(|j| j.version.clone()),
            mean_overall: {
                // Within scenarios when each has two or more scored runs (the error of
                // measuring this suite); over runs otherwise.
                let groups: Vec<Vec<f64>> = r
                    .scenarios
                    .iter()
                    .map(|s| scored_overall(r, Some(&s.id)))
                    .filter(|g| !g.is_empty())
                    .collect();
                let refs: Vec<&[f64]> = groups.iter().map(Vec::as_slice).collect();
                stratified_bootstrap_mean(&refs, settings)
                    .or_else(|| bootstrap_mean(&scored_overall(r, None), settings))
            },
            pass_rate: wilson(
                r.summary.passed as usize,
                (r.summary.passed + r.summary.failed) as usize,
                settings.alpha,
            ),
        })
        .collect();
    let mut ids: Vec<(String, String)> = reports
        .iter()
        .flat_map(|(_, r)| r.scenarios.iter().map(|s| (s.id.clone(), s.name.clone())))
        .collect();
    ids.sort();
    ids.dedup_by(|a, b| a.0 == b.0);
    let scenarios: Vec<ComparedScenario> = ids
        .iter()
        .map(|(id, name)| ComparedScenario {
            id: id.clone(),
            name: name.clone(),
            cells: reports
                .iter()
                .map(|(_, r)| {
                    let s = r.scenarios.iter().find(|s| &s.id == id)?;
                    let values = scored_overall(r, Some(id));
                    Some(ScenarioCell {
                        mean: s.mean,
                        interval: t_interval(&values, settings.alpha),
                        scored: s.scored,
                        passed: s.passed,
                        runs: s.runs,
                        passes: s.mean.map(|m| m >= r.pass_threshold),
                    })
                })
                .collect(),
        })
        .collect();
    let mut pairs = Vec::new();
    for a in 0..reports.len() {
        for b in a + 1..reports.len() {
            let (ra, rb) = (reports[a].1, reports[b].1);
            let means: Vec<(f64, f64)> = scenarios
                .iter()
                .filter_map(|s| {
                    let x = s.cells[a].as_ref()?.mean?;
                    let y = s.cells[b].as_ref()?.mean?;
                    Some((x, y))
                })
                .collect();
            let per_scenario = holm_corrected(
                scenarios
                    .iter()
                    .filter_map(|s| {
                        let c = welch_difference(
                            &scored_overall(ra, Some(&s.id)),
                            &scored_overall(rb, Some(&s.id)),
                            settings.alpha,
                        )?;
                        Some((s.id.clone(), c))
                    })
                    .collect(),
                settings.alpha,
            );
            let rates: Vec<(f64, f64)> = scenarios
                .iter()
                .filter_map(|s| {
                    let x = s.cells[a].as_ref().filter(|c| c.scored > 0)?;
                    let y = s.cells[b].as_ref().filter(|c| c.scored > 0)?;
                    Some((
                        f64::from(x.passed) / f64::from(x.scored),
                        f64::from(y.passed) / f64::from(y.scored),
                    ))
                })
                .collect();
            let pass_rates = holm_corrected(
                scenarios
                    .iter()
                    .filter_map(|s| {
                        let (x, y) = (s.cells[a].as_ref()?, s.cells[b].as_ref()?);
                        let c = proportion_difference(
                            x.passed as usize,
                            x.scored as usize,
                            y.passed as usize,
                            y.scored as usize,
                            settings.alpha,
                        )?;
                        Some((s.id.clone(), c))
                    })
                    .collect(),
                settings.alpha,
            );
            pairs.push(ComparedPair {
                a,
                b,
                overall: paired_bootstrap_t(&means, settings),
                scenarios: per_scenario,
                overall_pass_rate: paired_bootstrap_t(&rates, settings),
                scenario_pass_rates: pass_rates,
            });
        }
    }
    SimComparison {
        reports: compared,
        warnings,
        scenarios,
        pairs,
    }
}

/// A simulation compared with its baseline report (`assay simulate --baseline`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimBaseline {
    /// The baseline report's file.
    pub label: String,
    /// The baseline (report 0) and this simulation (report 1).
    pub comparison: SimComparison,
    /// Whether there is no significant regression: neither paired comparison over the
    /// scenarios (mean overall, pass rate) is worse, and no scenario with two or more scored
    /// runs on each side is worse on either.
    pub passed: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl SimBaseline {
    /// Compares `current` with `baseline` and decides the regression gate.
    pub fn of(label: &str, baseline: &SimReport, current: &SimReport) -> SimBaseline {
        let comparison = compare_reports(&[
            (label.to_owned(), baseline),
            ("this simulation".to_owned(), current),
        ]);
        let mut reasons = Vec::new();
        if let Some(pair) = comparison.pairs.first() {
            if let Some(o) = &pair.overall
                && o.verdict == crate::stats::Verdict::Worse
            {
                reasons.push(format!(
                    "the mean overall score per scenario fell {:.2} ({:.0}% CI {:+.2} to {:+.2}, over {} scenarios)",
                    -o.difference.estimate,
                    o.difference.level * 100.0,
                    o.difference.low,
                    o.difference.high,
                    o.difference.n
                ));
            }
            if let Some(o) = &pair.overall_pass_rate
                && o.verdict == crate::stats::Verdict::Worse
            {
                reasons.push(format!(
                    "the pass rate per scenario fell {:.0} points ({:.0}% CI {:+.0} to {:+.0})",
                    -o.difference.estimate * 100.0,
                    o.difference.level * 100.0,
                    o.difference.low * 100.0,
                    o.difference.high * 100.0
                ));
            }
            for (id, c) in &pair.scenarios {
                if c.verdict == crate::stats::Verdict::Worse {
                    reasons.push(format!(
                        "scenario `{id}`: mean overall fell {:.2} ({:.0}% CI {:+.2} to {:+.2})",
                        -c.difference.estimate,
                        c.difference.level * 100.0,
                        c.difference.low,
                        c.difference.high
                    ));
                }
            }
            for (id, c) in &pair.scenario_pass_rates {
                if c.verdict == crate::stats::Verdict::Worse {
                    reasons.push(format!(
                        "scenario `{id}`: pass rate fell {:.0} points ({:.0}% CI {:+.0} to {:+.0})",
                        -c.difference.estimate * 100.0,
                        c.difference.level * 100.0,
                        c.difference.low * 100.0,
                        c.difference.high * 100.0
                    ));
                }
            }
        }
        SimBaseline {
            label: label.to_owned(),
            comparison,
            passed: reasons.is_empty(),
            reasons,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(scenario: &str, verdict: &str, tone: f64, check: &str) -> Value {
        serde_json::json!({
            "scenario_id": scenario, "scenario_name": scenario, "repeat": 1,
            "verdict": verdict, "overall": tone, "duration_ms": 1,
            "judgement": {"scores": [{"id": "tone", "name": "Tone", "scale": "0-10",
                "score": tone, "weight": 1.0, "reasoning": ""}], "overall": tone,
                "simulator_kept_persona": true, "simulator_issue": "", "summary": "", "calls": 1},
            "checks": [{"name": "saved", "status": check}]
        })
    }

    fn report(runs: &[Value]) -> SimReport {
        serde_json::from_value(serde_json::json!({
            "schema_version": SIM_SCHEMA_VERSION, "suite": "s", "model": "m",
            "simulator_model": "u", "evaluator_model": "j", "generated_at": "t",
            "pass_threshold": 7.0, "repeat": 1, "concurrency": 1, "duration_ms": 1,
            "summary": {"runs": 0, "passed": 0, "failed": 0, "simulator_fault": 0, "errors": 0,
                "mean_overall": null, "pass_rate": null, "pass_all_scenarios": null},
            "scenarios": [
                {"id": "a", "name": "A", "runs": 3, "scored": 2, "passed": 1, "mean": null,
                 "stddev": null, "min": null, "max": null, "pass_all": null},
                {"id": "b", "name": "B", "runs": 1, "scored": 0, "passed": 0, "mean": null,
                 "stddev": null, "min": null, "max": null, "pass_all": null}],
            "criteria": [{"id": "tone", "name": "Tone", "weight": 1.0, "mean": null, "min": null},
                         {"id": "goal", "name": "Goal", "weight": 0.0, "mean": null, "min": null}],
            "runs": runs
        }))
        .unwrap()
    }

    /// Issue 29: turns measured per role add up; a latency or cost unknown on one turn is
    /// unknown in the total, never a smaller sum; a transcript from before version 4 reads.
    #[test]
    fn turn_usage_adds_up_per_role_and_old_transcripts_read() {
        let old: Transcript = serde_json::from_value(serde_json::json!({
            "scenario_id": "s", "repeat": 1, "model": "m", "simulator_model": "u",
            "turns": [{"role": "user", "content": "hi", "timestamp": "t"},
                      {"role": "assistant", "content": "ok", "timestamp": "t"}],
            "ended_by": "max_turns", "started_at": "t", "ended_at": "t"
        }))
        .unwrap();
        assert_eq!(old.turns[1].usage, None);
        assert_eq!(old.usage_of(Speaker::Assistant), None);

        let turn = |latency_ms: Option<u64>, cost_usd: Option<f64>| TurnUsage {
            calls: 1,
            cache_hits: u32::from(latency_ms.is_none()),
            latency_ms,
            input_tokens: 100,
            output_tokens: 10,
            cost_usd,
        };
        let mut t = old.clone();
        t.turns[1].usage = Some(turn(Some(300), Some(0.25)));
        t.turns.push(Turn {
            usage: Some(turn(Some(200), Some(0.5))),
            ..t.turns[1].clone()
        });
        t.stop_usage = Some(turn(Some(50), None));
        let a = t.usage_of(Speaker::Assistant).unwrap();
        assert_eq!(
            (
                a.calls,
                a.latency_ms,
                a.input_tokens,
                a.output_tokens,
                a.cost_usd
            ),
            (2, Some(500), 200, 20, Some(0.75))
        );
        // The user's only measured call is the closing one.
        let u = t.usage_of(Speaker::User).unwrap();
        assert_eq!((u.calls, u.latency_ms, u.cost_usd), (1, Some(50), None));
        t.turns[2].usage = Some(turn(None, None));
        let a = t.usage_of(Speaker::Assistant).unwrap();
        assert_eq!((a.cache_hits, a.latency_ms, a.cost_usd), (1, None, None));
        // Written back, the measurement is there; absent values are left out.
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["turns"][1]["usage"]["latency_ms"], 300);
        assert!(json["turns"][0].get("usage").is_none());
        assert!(json["turns"][1]["usage"].get("cache_hits").is_none());
    }

    #[test]
    fn the_heat_map_averages_scored_runs_per_scenario_and_criterion() {
        let r = report(&[
            run("a", "pass", 9.0, "passed"),
            run("a", "fail", 5.0, "failed"),
            // Simulator faults are left out of every mean, as errors are.
            run("a", "simulator_fault", 1.0, "error"),
            run("b", "uncertain", 8.0, "passed"),
        ]);
        let grid = criteria_by_scenario(&r);
        assert_eq!(grid.len(), 2);
        assert_eq!(grid[0].cells, vec![Some((7.0, 2)), None]);
        assert_eq!(grid[1].cells, vec![None, None]);
        let tally = check_tally(&r);
        assert_eq!(tally.len(), 1);
        assert_eq!(
            (tally[0].passed, tally[0].failed, tally[0].errors),
            (2, 1, 1)
        );
    }
}
