//! The record of a prompt-optimization experiment (`assay optimize`, seed 001): per-case
//! results of a step (the target's final answer, the llm-rubric grade and the factual
//! correctness check), the seed's derived metrics, the study's trials, the Pareto front, the
//! baseline-vs-optimized comparisons with their significance, and what the calls consumed.
//! Reports render an [`ExperimentReport`] and never compute anything themselves. Like the
//! RunLog it is versioned ([`EXPERIMENT_SCHEMA_VERSION`]) and changes are additive; timestamps
//! are RFC 3339 strings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The version of the [`ExperimentReport`] and [`TrialRecord`] JSON shapes; changes are
/// additive.
pub const EXPERIMENT_SCHEMA_VERSION: u32 = 1;

/// The seed's llm-rubric threshold: a composite score at or above it passes.
pub const DEFAULT_RUBRIC_THRESHOLD: f64 = 0.8;

/// The llm-rubric grader's verdict on one answer (all scores in 0–1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RubricGrade {
    /// Is the answer accurate compared with the expected answer?
    pub factuality: f64,
    /// Does it fully address the question?
    pub completeness: f64,
    /// Is it relevant to the question?
    pub relevance: f64,
    /// The overall score: the case's composite score.
    pub overall: f64,
    /// The grader's own call on factual correctness.
    pub factually_correct: bool,
    /// Why, in the grader's words.
    #[serde(default)]
    pub reasoning: String,
}

/// One test case run through the target and graded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// The case's line in its `test_cases.jsonl` (1-based).
    pub line: usize,
    /// The question.
    pub question: String,
    /// The expected answer.
    pub expected: String,
    /// The target's final answer (`None` when the target failed).
    #[serde(default)]
    pub output: Option<String>,
    /// Whether the answer is correct by the case's correctness rule (by default words on word
    /// boundaries and numbers as numbers; the first objective). The grader's own call is
    /// `rubric.factually_correct`.
    pub factually_correct: bool,
    /// The rule that decided `factually_correct` (`normalised`, `exact`, `numeric`, `regex`,
    /// `grader`, `seed`; absent in reports written before rules existed, which used `seed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correctness: Option<String>,
    /// Why the rule decided so, in a few words ("15 g is not 5 g").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correct_why: Option<String>,
    /// The llm-rubric overall score (0 when the case errored; errors are not averaged).
    pub composite_score: f64,
    /// `composite_score >= threshold`.
    pub rubric_pass: bool,
    /// The grader's full verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<RubricGrade>,
    /// An infrastructure error (target or grader failed after retries): not a score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The case's deterministic assertions (`assert`) on the answer, when it has any. A failed
    /// critical assertion makes `factually_correct` false whatever the rule and the grader say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assertions: Option<crate::assertion::AssertionReport>,
}

/// The seed's derived metrics over one set of case results.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Metrics {
    /// Cases graded (errors excluded).
    pub cases: usize,
    /// Cases that errored.
    pub errors: usize,
    /// `FactuallyCorrectCount`: the number of factually correct answers.
    pub factually_correct_count: usize,
    /// `AverageCompositeScore`: the mean llm-rubric overall score.
    pub average_composite_score: f64,
    /// `FactualCorrectnessPercentage`: `FactuallyCorrectCount / cases × 100`.
    pub factual_correctness_percentage: f64,
    /// Cases whose composite score reached the threshold.
    pub rubric_passes: usize,
}

impl Metrics {
    /// The metrics of these results; errored cases count only in `errors`.
    pub fn of(results: &[CaseResult]) -> Metrics {
        let graded: Vec<&CaseResult> = results.iter().filter(|r| r.error.is_none()).collect();
        let cases = graded.len();
        let correct = graded.iter().filter(|r| r.factually_correct).count();
        let mean = if cases == 0 {
            0.0
        } else {
            graded.iter().map(|r| r.composite_score).sum::<f64>() / cases as f64
        };
        Metrics {
            cases,
            errors: results.len() - cases,
            factually_correct_count: correct,
            average_composite_score: mean,
            factual_correctness_percentage: if cases == 0 {
                0.0
            } else {
                correct as f64 / cases as f64 * 100.0
            },
            rubric_passes: graded.iter().filter(|r| r.rubric_pass).count(),
        }
    }

    /// The value of a named objective (`factually_correct_count`, `average_composite_score`,
    /// `factual_correctness_percentage`), as the study sees it.
    pub fn objective(&self, name: &str) -> Option<f64> {
        match name {
            "factually_correct_count" => Some(self.factually_correct_count as f64),
            "average_composite_score" => Some(self.average_composite_score),
            "factual_correctness_percentage" => Some(self.factual_correctness_percentage),
            _ => None,
        }
    }
}

/// The objective names [`Metrics::objective`] knows.
pub const OBJECTIVES: [&str; 3] = [
    "factually_correct_count",
    "average_composite_score",
    "factual_correctness_percentage",
];

/// Which test data a step ran on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DataRef {
    /// `optimization` or `evaluation`.
    pub kind: String,
    /// The test-data version (`None` for a file given with `--*-test-cases`).
    #[serde(default)]
    pub version: Option<String>,
    /// The `test_cases.jsonl` path, relative to the project when inside it.
    pub path: String,
    /// sha256 of the cases file and its context files.
    pub fingerprint: String,
    /// Number of cases.
    pub cases: usize,
}

/// Calls, cache hits, tokens and cost, for one role or in all.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Calls through the wrapper (cache hits included).
    pub calls: u64,
    /// Calls answered from the call cache.
    pub cache_hits: u64,
    /// HTTP requests sent (retries included).
    pub requests: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost in USD where the models' prices are known.
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

impl UsageTotals {
    /// No call made.
    pub fn is_zero(&self) -> bool {
        self.calls == 0 && self.requests == 0 && self.cost_usd.is_none_or(|c| c == 0.0)
    }
}

impl std::ops::AddAssign for UsageTotals {
    fn add_assign(&mut self, o: UsageTotals) {
        self.calls += o.calls;
        self.cache_hits += o.cache_hits;
        self.requests += o.requests;
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cost_usd = match (self.cost_usd, o.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

/// Usage by role: the target's calls (the built-in chain's agents) and the grader's.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// The system under test (zero for command and HTTP targets: their calls are theirs).
    pub target: UsageTotals,
    /// The llm-rubric grader.
    pub grader: UsageTotals,
    /// The proposer of new prompts (`--propose-rounds`; zero otherwise).
    #[serde(default, skip_serializing_if = "UsageTotals::is_zero")]
    pub proposer: UsageTotals,
    /// Target executions (one per case answered, cached answers included).
    pub target_runs: u64,
    /// How the providers' rate limits shaped the calls, per model (target and grader).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<crate::ratelimit::RateLimitRecord>,
}

/// One step's run: a set of prompts on a set of cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// `baseline`, `evaluation` or `evaluation_baseline`.
    pub step: String,
    /// The test data.
    pub data: DataRef,
    /// The prompt index per agent (0 = baseline) where the prompts came from the lists.
    #[serde(default)]
    pub params: BTreeMap<String, usize>,
    /// sha256 of each agent's prompt.
    pub prompt_sha256: BTreeMap<String, String>,
    /// Every case, in file order.
    pub cases: Vec<CaseResult>,
    /// The derived metrics.
    pub metrics: Metrics,
    /// Seconds the step took.
    pub duration_s: f64,
}

/// How a trial ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialOutcome {
    /// Evaluated on every case.
    Complete,
    /// The same prompts as an earlier trial: its values reused, nothing evaluated.
    Duplicate,
    /// Dropped by racing after a subset (clearly worse than the best so far).
    Pruned,
    /// An infrastructure error halted the study here.
    Failed,
}

/// One trial of the study, as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// The trial number (0 = the enqueued baseline).
    pub number: usize,
    /// The prompt index per agent.
    pub params: BTreeMap<String, usize>,
    /// How it ended.
    pub outcome: TrialOutcome,
    /// The objective values, in `directions` order (empty unless complete or duplicate).
    #[serde(default)]
    pub values: Vec<f64>,
    /// The earlier trial whose values a duplicate reused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<usize>,
    /// The metrics (complete and duplicate trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    /// Per-case results (complete trials; pruned ones: the subset scored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<CaseResult>,
    /// Why it failed or was pruned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// How the sampler chose it (`enqueued`, `startup`, `tpe`, `exhaustive`, …).
    #[serde(default)]
    pub origin: String,
    /// Seconds it took.
    #[serde(default)]
    pub duration_s: f64,
    /// The worker that ran it, in a study shared by several (`[optimize] storage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Earlier attempts that did not finish (a worker that stopped heart-beating), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried: Vec<String>,
}

/// A worker's part of a study another worker finishes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JoinedStudy {
    /// The experiment.
    pub name: String,
    /// This worker's name.
    pub worker: String,
    /// The trials it ran, by number.
    pub trials: Vec<usize>,
    /// The worker that runs the finish, when another one is running it now.
    pub finisher: Option<String>,
}

/// McNemar's test on paired factually-correct outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct McNemar {
    /// Correct with the baseline only.
    pub baseline_only: usize,
    /// Correct with the optimized prompts only.
    pub optimized_only: usize,
    /// Two-sided p-value.
    pub p_value: f64,
    /// `exact` (binomial) or `chi2` (with continuity correction).
    pub method: McNemarMethod,
}

/// How [`McNemar::p_value`] was computed (the shared statistics' enum, serialized as `exact` or
/// `chi2`).
pub use crate::stats::McNemarMethod;

/// The paired bootstrap on composite scores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// Mean of optimized − baseline.
    pub mean_difference: f64,
    /// 95% percentile interval, low end.
    pub ci_low: f64,
    /// 95% percentile interval, high end.
    pub ci_high: f64,
    /// Two-sided bootstrap p-value.
    pub p_value: f64,
    /// Resamples drawn.
    pub resamples: usize,
    /// The seed.
    pub seed: u64,
}

/// Whether a difference is significant, and what the set could have detected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Significance {
    /// Paired cases (both sides graded).
    pub pairs: usize,
    /// The test on factual correctness.
    pub mcnemar: McNemar,
    /// The test on composite scores (`None` with fewer than two pairs).
    #[serde(default)]
    pub bootstrap: Option<Bootstrap>,
    /// The significance level (0.05).
    pub alpha: f64,
    /// The fewest extra correct answers (with no new wrong ones) McNemar could call
    /// significant on this set (`None` when even all pairs would not do).
    pub min_detectable_correct: Option<usize>,
    /// The same as percentage points of the set.
    pub min_detectable_correct_pct: Option<f64>,
    /// The smallest composite-score difference detectable with 80% power (normal
    /// approximation from the observed spread).
    pub min_detectable_composite: Option<f64>,
    /// A gain in factual correctness that McNemar calls significant.
    pub correct_gain_significant: bool,
    /// A composite-score gain whose bootstrap interval excludes zero.
    pub composite_gain_significant: bool,
    /// One sentence for people.
    pub verdict: String,
}

/// How one case changed between baseline and optimized prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseChange {
    /// The case's line.
    pub line: usize,
    /// The question.
    pub question: String,
    /// Factually correct with the baseline.
    pub baseline_correct: bool,
    /// Factually correct with the optimized prompts.
    pub optimized_correct: bool,
    /// Composite score with the baseline.
    pub baseline_score: f64,
    /// Composite score with the optimized prompts.
    pub optimized_score: f64,
}

/// Baseline vs optimized on one set of cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// `optimization` or `evaluation`.
    pub set: String,
    /// The baseline's metrics.
    pub baseline: Metrics,
    /// The optimized prompts' metrics.
    pub optimized: Metrics,
    /// Cases whose correctness or score changed.
    pub changes: Vec<CaseChange>,
    /// The paired tests.
    pub significance: Significance,
}

/// The whole experiment, as `experiments/<name>/report.json` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentReport {
    /// [`EXPERIMENT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The experiment's name.
    pub name: String,
    /// When it started.
    pub started: String,
    /// When it finished.
    pub finished: String,
    /// The sampler's seed.
    pub seed: u64,
    /// The target, in words.
    pub target: String,
    /// The grader's `vendor/model`.
    pub grader: String,
    /// The llm-rubric grader's version (a digest of its instructions, prompt and schema):
    /// experiments graded by different versions are not comparable score for score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grader_version: Option<String>,
    /// The rubric threshold.
    pub threshold: f64,
    /// The objectives and their directions, e.g. `["maximize factually_correct_count", …]`.
    pub directions: Vec<String>,
    /// Agents and their prompt counts (baseline + variants).
    pub agents: BTreeMap<String, usize>,
    /// Trials asked for.
    pub trials_requested: usize,
    /// How the study searched (`TPE`, `exhaustive`…), in words.
    pub search_mode: String,
    /// Step 1: the baseline on the optimization cases.
    pub baseline: StepResult,
    /// Step 2: every trial.
    pub trials: Vec<TrialRecord>,
    /// Trial numbers on the Pareto front.
    pub pareto_front: Vec<usize>,
    /// The best trial (highest factual-correct count, then composite score).
    pub best_trial: Option<usize>,
    /// Its prompt indices.
    pub best_params: BTreeMap<String, usize>,
    /// Its prompts.
    pub best_prompts: BTreeMap<String, String>,
    /// The baseline (production) prompts the experiment started from, by agent: what
    /// `best_prompts` is compared with (empty in reports written before this field existed;
    /// readers then take `baseline_prompts/` from the experiment's folder).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub baseline_prompts: BTreeMap<String, String>,
    /// Step 3: the best prompts on the evaluation cases.
    pub evaluation: Option<StepResult>,
    /// The baseline on the evaluation cases (for the comparison).
    pub evaluation_baseline: Option<StepResult>,
    /// Baseline vs optimized on the optimization and the evaluation sets.
    pub comparisons: Vec<Comparison>,
    /// What the calls consumed.
    pub usage: Usage,
    /// The estimate printed before any call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
    /// Where each prompt index came from, per agent: the file of every choice (relative to
    /// the project), proposals included (empty in reports written before it was recorded).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompt_files: BTreeMap<String, Vec<String>>,
    /// Every proposal of the proposal rounds (`--propose-rounds`), accepted or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proposals: Vec<ProposalRecord>,
    /// With proposals: the best combination of hand-written prompts only, and the verdict of
    /// the best combination against it on the held-out cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hand_written: Option<HandWritten>,
    /// The correctness rule that counted `factually_correct` (with declared units), in words;
    /// absent in reports written before rules existed (the spec's substring rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correctness: Option<String>,
    /// Cases where the correctness rule and the grader's own `factually_correct` differ, over
    /// the baseline, every trial and the evaluation steps, one entry per distinct answer to a
    /// case: where a team decides which to trust.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<Disagreement>,
    /// How the best trial was chosen when others tie with it on the first objective (absent
    /// when none does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tie: Option<String>,
}

/// A case where the correctness rule and the grader disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disagreement {
    /// The step (`baseline`, `trial 7`, `evaluation`, `evaluation_baseline`).
    pub step: String,
    /// The case's line.
    pub line: usize,
    /// The question.
    pub question: String,
    /// The expected answer.
    pub expected: String,
    /// The answer.
    pub output: String,
    /// The rule (`normalised`, …).
    pub rule: String,
    /// The rule's verdict.
    pub check: bool,
    /// Why the rule decided so.
    pub why: String,
    /// The grader's `factually_correct`.
    pub grader: bool,
    /// The grader's reasoning.
    pub reasoning: String,
    /// Other steps or trials that gave the same answer to the same case (not listed again).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeats: usize,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The cases of `cases` (one step's results) where the rule and the grader disagree.
pub fn disagreements(step: &str, cases: &[CaseResult]) -> Vec<Disagreement> {
    cases
        .iter()
        .filter_map(|c| {
            let rubric = c.rubric.as_ref()?;
            if c.error.is_some() || rubric.factually_correct == c.factually_correct {
                return None;
            }
            Some(Disagreement {
                step: step.to_owned(),
                line: c.line,
                question: c.question.clone(),
                expected: c.expected.clone(),
                output: c.output.clone().unwrap_or_default(),
                rule: c.correctness.clone().unwrap_or_else(|| "seed".to_owned()),
                check: c.factually_correct,
                why: c.correct_why.clone().unwrap_or_default(),
                grader: rubric.factually_correct,
                reasoning: rubric.reasoning.clone(),
                repeats: 0,
            })
        })
        .collect()
}

/// How a proposal ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ProposalStatus {
    /// It joined its agent's list at `index` and was scored in the study as `trial`.
    Accepted {
        /// Its index in the agent's list.
        index: usize,
        /// The trial that scored it on every optimization case (with the parent's other
        /// prompts).
        trial: usize,
    },
    /// A guard refused it (empty, a copy, a required format dropped): not a trial.
    Rejected {
        /// Why.
        reason: String,
    },
    /// It did no better than its parent on the cases it was written for, so it was not
    /// scored on the whole set (GEPA's minibatch check).
    NotBetter {
        /// The scores on those cases, parent then proposal.
        reason: String,
    },
}

/// One proposed prompt: what the proposer was shown and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProposalRecord {
    /// The round (1-based).
    pub round: usize,
    /// Its number within the round (1-based).
    pub k: usize,
    /// The agent whose prompt it revises.
    pub agent: String,
    /// The trial whose prompts were the parent (the best combination then).
    pub parent_trial: usize,
    /// The parent prompt's index in the agent's list.
    pub parent_index: usize,
    /// sha256 of the parent prompt.
    pub parent_sha256: String,
    /// The optimization cases shown (their lines in the case file).
    pub cases_shown: Vec<usize>,
    /// The proposer's `vendor/model`.
    pub model: String,
    /// The proposer's reflection on what went wrong.
    pub reasoning: String,
    /// The proposed prompt.
    pub text: String,
    /// sha256 of the proposed prompt.
    pub sha256: String,
    /// What became of it.
    #[serde(flatten)]
    pub status: ProposalStatus,
    /// The prompt file it was written to (relative to the project; accepted ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The minibatch check: factually correct count and composite sum on the cases shown,
    /// parent then proposal (absent when a guard refused it first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minibatch: Option<[(usize, f64); 2]>,
    /// Why this agent was the one revised (absent in records written before the choice was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<AgentChoice>,
}

/// How a proposal round picked the agent to revise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChoiceRule {
    /// The proposer named, per failing case, the agent whose output went wrong first; the
    /// majority of those votes (ties: first in the chain) among the agents that may be revised.
    Blame,
    /// Every agent that may be revised, each in its own proposal (`selector = "all"`).
    All,
    /// The only agent that may be revised: nothing to choose.
    Only,
    /// The next agent in name order, because blame could not decide (the reason says why).
    RoundRobin,
}

/// One failing case's blame: the agent whose output went wrong first, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlameVote {
    /// The case's line in the optimization case file.
    pub line: usize,
    /// The agent named.
    pub agent: String,
    /// The proposer's reason.
    pub reason: String,
}

/// Why a proposal revises the agent it does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentChoice {
    /// The rule that decided.
    pub rule: ChoiceRule,
    /// The blame votes of the failing cases (with `blame`, and with a fallback whose votes
    /// named no agent that may be revised).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<BlameVote>,
    /// The choice in words: the vote count and the proposer's reason,
    /// `round-robin fallback: <why>`, or `all agents (selector all)`.
    pub why: String,
}

/// The best hand-written combination and the held-out verdict of the best one against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandWritten {
    /// Its trial.
    pub trial: usize,
    /// Its prompt indices.
    pub params: BTreeMap<String, usize>,
    /// It on the evaluation cases (absent when the best combination is hand-written itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<StepResult>,
    /// The best combination against it on the evaluation cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// `better`: the held-out comparison says the proposals beat the hand-written prompts;
    /// `not_generalised`: they won on the optimization cases only; `hand_written`: the best
    /// combination has no proposal in it.
    pub verdict: String,
    /// The verdict in words.
    pub summary: String,
}

/// Where an experiment stands, as its folder shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExperimentState {
    /// `assay optimize` holds the project lock for this experiment and is writing its journal.
    Running,
    /// The journal stops before the end and nothing is running it (killed, or stopped by the
    /// budget): `--resume` continues it.
    Interrupted,
    /// A trial or step failed and the study halted (the error log says why).
    Halted,
    /// The report is written.
    Finished,
}

impl ExperimentState {
    /// `running`, `interrupted`, `halted` or `finished`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExperimentState::Running => "running",
            ExperimentState::Interrupted => "interrupted",
            ExperimentState::Halted => "halted",
            ExperimentState::Finished => "finished",
        }
    }
}

impl std::fmt::Display for ExperimentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far an experiment has got: what a page shows while it runs (read from its journal) and
/// after it finished (from its report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentProgress {
    /// Running, interrupted, halted or finished.
    pub state: ExperimentState,
    /// The step it is in (or stopped in): `baseline`, `optimization`, `evaluation`, `done`.
    pub step: String,
    /// Trials journaled so far (the baseline trial included).
    pub trials_done: usize,
    /// Trials asked for.
    pub trials_requested: usize,
    /// Seconds the rest of the study should take at the pace of its trials so far (running
    /// experiments in the optimization step only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_seconds: Option<f64>,
    /// USD spent so far, where the models' prices are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent_usd: Option<f64>,
    /// When the journal (or the report) was last written (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
    /// Who is running it (`pid 123, started …`), while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Why it halted, or what else a reader should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a run is expected to consume, per role, before anything is called.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RoleEstimate {
    /// Model calls at most (no cache hits assumed).
    pub calls: u64,
    /// Input tokens (estimated from prompt and case lengths, 4 characters a token).
    pub input_tokens: u64,
    /// Output tokens (the configured limit per call, an upper bound).
    pub output_tokens: u64,
    /// Cost in USD where the model's price is known.
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

/// The estimate of a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Estimate {
    /// Target executions (cases × runs).
    pub target_runs: u64,
    /// The target's calls (built-in chain only).
    pub target: RoleEstimate,
    /// The grader's calls.
    pub grader: RoleEstimate,
    /// The proposer's calls (`--propose-rounds`; zero otherwise).
    #[serde(default, skip_serializing_if = "RoleEstimate::is_zero")]
    pub proposer: RoleEstimate,
}

impl RoleEstimate {
    /// No call expected.
    pub fn is_zero(&self) -> bool {
        self.calls == 0
    }
}

impl Estimate {
    /// The total known cost.
    pub fn cost_usd(&self) -> Option<f64> {
        let proposer = if self.proposer.is_zero() {
            Some(0.0)
        } else {
            self.proposer.cost_usd
        };
        match (self.target.cost_usd, self.grader.cost_usd, proposer) {
            (None, None, _) => None,
            (a, b, c) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0) + c.unwrap_or(0.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(correct: bool, score: f64, error: bool) -> CaseResult {
        CaseResult {
            line: 1,
            question: "q".into(),
            expected: "a".into(),
            output: Some("a".into()),
            factually_correct: correct,
            correctness: None,
            correct_why: None,
            composite_score: score,
            rubric_pass: score >= DEFAULT_RUBRIC_THRESHOLD,
            rubric: None,
            error: error.then(|| "timeout".into()),
            assertions: None,
        }
    }

    #[test]
    fn metrics_follow_the_seed_and_leave_errors_out() {
        let m = Metrics::of(&[
            case(true, 1.0, false),
            case(false, 0.5, false),
            case(true, 0.9, false),
            case(false, 0.0, true),
        ]);
        assert_eq!((m.cases, m.errors, m.factually_correct_count), (3, 1, 2));
        assert!((m.average_composite_score - 0.8).abs() < 1e-12);
        assert!((m.factual_correctness_percentage - 200.0 / 3.0).abs() < 1e-9);
        assert_eq!(m.rubric_passes, 2);
        assert_eq!(m.objective("factually_correct_count"), Some(2.0));
        assert_eq!(m.objective("nope"), None);
        assert_eq!(Metrics::of(&[]).average_composite_score, 0.0);
    }

    #[test]
    fn usage_adds_costs_when_either_side_knows_one() {
        let mut a = UsageTotals {
            calls: 1,
            ..UsageTotals::default()
        };
        a += UsageTotals {
            calls: 2,
            cost_usd: Some(0.5),
            ..UsageTotals::default()
        };
        assert_eq!((a.calls, a.cost_usd), (3, Some(0.5)));
    }
}
