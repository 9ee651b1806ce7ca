//! The experiment's three steps (seed 001 "Three-Step Test Harness Workflow"):
//!
//! 1. **Baseline**: the production prompts (index 0 of every list, copied to
//!    `experiments/<name>/baseline_prompts/`) on the optimization cases.
//! 2. **Optimization**: the study over the prompt lists — categorical TPE from
//!    `assay-optimize`, seeded, the configured directions (the seed's pair by default), the
//!    baseline enqueued as trial 0 (its values are step 1's: nothing is run twice), the
//!    configured number of random start-up trials, exhaustive enumeration when the whole space
//!    fits the trial budget (the log says so), duplicates not re-evaluated (the log says so).
//!    One trial at a time; one case at a time unless the target is stateless and
//!    `--max-concurrency` allows more. A trial with an infrastructure error (after the call
//!    wrapper's retries) halts the study with its context in `logs/error_logs/`. The best
//!    trial (highest factual-correct count, then composite score) is written to
//!    `optimized_prompts/`.
//! 3. **Evaluation**: the best prompts, and the baseline for the comparison, on the held-out
//!    evaluation cases.
//!
//! Then baseline vs optimized on both sets with paired tests ([`crate::stats`]).
//!
//! **Journal.** `experiments/<name>/journal.jsonl` is append-only (each line flushed and
//! synced): a header tying it to its inputs (cases' fingerprints, every prompt's hash, seed,
//! directions, trials, target, grader, threshold), then each finished step and each trial. With
//! `resume` the header must match; finished steps are read back and the study is replayed —
//! every `ask` is answered from the journal while it has the trial, so the sampler asks exactly
//! what an uninterrupted run would — and continues from the first trial it lacks.
//!
//! **Budget.** Before each case is dispatched the spend so far plus one case's estimate must
//! stay within `budget`, else the run stops with [`RunError::Budget`].
//!
//! **Racing** (`racing`): a new combination is first scored on the first
//! `⌈fraction × n⌉` cases; it is dropped (pruned) when, on those cases, it is clearly worse
//! than the best trial so far — McNemar p < 0.05 on correctness or a bootstrap interval of the
//! composite difference entirely below zero. A pruned combination asked again is scored in
//! full; its first cases then come from the call cache.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use assay_core::experiment::{
    CaseResult, Comparison, DataRef, EXPERIMENT_SCHEMA_VERSION, Estimate, ExperimentReport,
    HandWritten, Metrics, OBJECTIVES, ProposalRecord, ProposalStatus, StepResult, TrialOutcome,
    TrialRecord, Usage,
};
use assay_optimize::{Asked, Direction, Origin, SamplerSettings, SearchSpace, Study, TrialState};
use assay_providers::ChatModel;
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};

use crate::ExperimentError;
use crate::cases::{CaseSet, LoadedCase};
use crate::grade::{self, Grader};
use crate::prompts::{PromptLists, write_prompt_dir};
use crate::stats;
use crate::target::{Target, TargetFile, sha256_hex};

mod journal;
mod search;
#[cfg(feature = "postgres")]
mod shared;
mod traced;
mod verdicts;
pub use assay_core::experiment::JoinedStudy;
pub(crate) use journal::name_taken;
use journal::{Journal, Replay, header_differences, open_journal};
pub use journal::{JournalEntry, JournalHeader, JournalLine, read_journal};
use search::{Searched, study};
#[cfg(feature = "postgres")]
pub use shared::{SharedOutcome, SharedStorage, optimize_shared};
use verdicts::all_disagreements;
pub use verdicts::tie_note;

/// The journal's file name inside the experiment folder.
pub const JOURNAL_FILE: &str = "journal.jsonl";
/// The JSON report's file name inside the experiment folder.
pub const REPORT_JSON: &str = "report.json";
/// The Markdown report's file name inside the experiment folder.
pub const REPORT_MD: &str = "report.md";

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad input or usage (exit 2): a journal that does not match, bad directions.
    #[error("{0}")]
    Usage(String),
    /// A file could not be written or read.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// An infrastructure error halted the run (exit 3); the context is in the error log.
    #[error("{step}: {message} (details: {})", log.display())]
    Halted {
        /// The step.
        step: String,
        /// What failed.
        message: String,
        /// The error log.
        log: PathBuf,
    },
    /// The budget would be exceeded by the next dispatch (exit 3).
    #[error(
        "budget: ${spent:.4} spent, the next case (or proposal) would take about ${next:.4} more, over the --budget ${budget:.4}; the journal keeps what finished (--resume with a larger budget continues)"
    )]
    Budget {
        /// Spent so far.
        spent: f64,
        /// The next case's estimate.
        next: f64,
        /// The cap.
        budget: f64,
    },
    /// The study's shared storage (`[optimize] storage`) failed or refused (exit 3).
    #[error("study storage: {0}")]
    Storage(String),
    /// The sampler refused (a bug or a bad journal).
    #[error("study: {0}")]
    Study(#[from] assay_optimize::Error),
    /// Promptfiles or cases.
    #[error(transparent)]
    Experiment(#[from] crate::ExperimentError),
}

impl RunError {
    /// Exit code 3 (infrastructure) rather than 2 (bad input).
    pub fn is_infrastructure(&self) -> bool {
        matches!(
            self,
            RunError::Halted { .. }
                | RunError::Budget { .. }
                | RunError::Io { .. }
                | RunError::Storage(_)
        ) || matches!(self, RunError::Experiment(e) if e.is_infrastructure())
    }

    fn io(path: &Path, e: &impl std::fmt::Display) -> RunError {
        RunError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        }
    }
}

/// One objective: a direction and a metric of [`Metrics::objective`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Objective {
    /// Maximize or minimize.
    pub maximize: bool,
    /// The metric's name.
    pub metric: String,
}

impl Objective {
    /// The sampler's direction.
    pub fn direction(&self) -> Direction {
        if self.maximize {
            Direction::Maximize
        } else {
            Direction::Minimize
        }
    }
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = if self.maximize {
            "maximize"
        } else {
            "minimize"
        };
        write!(f, "{d} {}", self.metric)
    }
}

/// Parses `[optimize] directions` (`maximize factually_correct_count`, …).
pub fn parse_directions(items: &[String]) -> Result<Vec<Objective>, String> {
    items
        .iter()
        .map(|item| {
            let mut words = item.split_whitespace();
            let (Some(d), Some(metric), None) = (words.next(), words.next(), words.next()) else {
                return Err(format!(
                    "optimize.directions: `{item}` must be `maximize <metric>` or `minimize <metric>`"
                ));
            };
            let maximize = match d {
                "maximize" => true,
                "minimize" => false,
                other => {
                    return Err(format!(
                        "optimize.directions: unknown direction `{other}` (expected maximize or minimize)"
                    ));
                }
            };
            if !OBJECTIVES.contains(&metric) {
                return Err(format!(
                    "optimize.directions: unknown metric `{metric}` (expected one of {})",
                    OBJECTIVES.join(", ")
                ));
            }
            Ok(Objective {
                maximize,
                metric: metric.to_owned(),
            })
        })
        .collect()
}

/// Receives progress for the console (a bar, or nothing).
pub trait Progress: Send + Sync {
    /// A step begins with `units` case executions to do.
    fn start(&self, step: &str, units: u64);
    /// `n` more done; `note` says where (trial, calls, cost so far).
    fn advance(&self, n: u64, note: &str);
    /// The step ended.
    fn finish(&self, step: &str, summary: &str);
}

/// No progress shown.
#[derive(Debug, Default)]
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64, _: &str) {}
    fn finish(&self, _: &str, _: &str) {}
}

/// A set of cases with where it came from.
#[derive(Debug, Clone)]
pub struct CaseData {
    /// The cases.
    pub set: CaseSet,
    /// The record of where they came from.
    pub data: DataRef,
}

impl CaseData {
    /// Wraps a loaded set; `kind` is `optimization` or `evaluation`; `project` shortens the
    /// path.
    pub fn new(kind: &str, set: CaseSet, project: &Path) -> CaseData {
        let path = set
            .path
            .strip_prefix(project)
            .unwrap_or(&set.path)
            .display()
            .to_string();
        let data = DataRef {
            kind: kind.to_owned(),
            version: set.version.clone(),
            path,
            fingerprint: set.fingerprint.clone(),
            cases: set.len(),
        };
        CaseData { set, data }
    }
}

/// The experiment's options.
#[derive(Debug, Clone)]
pub struct Options {
    /// The experiment's name (`experiments/<name>/`).
    pub name: String,
    /// Trials of the study (the baseline trial included), at least 1.
    pub trials: usize,
    /// The sampler's and the bootstrap's seed.
    pub seed: u64,
    /// Continue from the journal.
    pub resume: bool,
    /// A hard cap on the spend in USD.
    pub budget: Option<f64>,
    /// Racing: the share of cases a new combination is first scored on.
    pub racing: Option<f64>,
    /// Cases of a trial at once (only for stateless targets).
    pub max_concurrency: usize,
    /// The objectives.
    pub objectives: Vec<Objective>,
    /// Random start-up trials.
    pub startup_trials: usize,
    /// The rubric threshold.
    pub threshold: f64,
    /// Proposal rounds after the search (`--propose-rounds`), if any.
    pub propose: Option<ProposeOptions>,
    /// Whether an answer is correct: the project's rule, its declared units and every case's
    /// rule checked ([`crate::correct::Checker`]).
    pub checker: crate::correct::Checker,
    /// The agents in the order they run (`[optimize] chain`, or the chain's default order):
    /// what the proposal rounds fall back on, and the order the blame call lists the agents in
    /// when the target reports no trace.
    pub chain: Vec<String>,
}

/// The proposal rounds' settings (`[optimize.propose]`, `--propose-rounds`); recorded in the
/// journal's header, so `--resume` continues only the same rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProposeOptions {
    /// Rounds (at least 1).
    pub rounds: usize,
    /// Proposals per round (with the `all` selector: per agent).
    pub proposals_per_round: usize,
    /// The agents whose prompts may be revised, in list order.
    pub agents: Vec<String>,
    /// Which agents a round revises.
    #[serde(default)]
    pub selector: crate::propose::Selector,
    /// Cases shown with each proposal request.
    pub minibatch: usize,
    /// Study trials over the grown space after a round that added prompts.
    pub trials_per_round: usize,
    /// Tokens the proposer may answer with.
    pub max_tokens: u32,
    /// Markers a proposal must keep, per agent (besides `FINAL ANSWER:`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub required: BTreeMap<String, Vec<String>>,
    /// The proposer's `vendor/model`.
    pub model: String,
}

impl ProposeOptions {
    /// The most trials the rounds may add (every proposal accepted).
    pub fn max_trials(&self) -> usize {
        self.rounds * (self.proposals_in_round() + self.trials_per_round)
    }

    /// Proposals in one round: `proposals_per_round`, for every agent with the `all` selector.
    pub fn proposals_in_round(&self) -> usize {
        match self.selector {
            crate::propose::Selector::All => self.proposals_per_round * self.agents.len().max(1),
            crate::propose::Selector::Blame => self.proposals_per_round,
        }
    }

    /// The blame calls the rounds make at most: one a round when there is an agent to choose.
    pub fn blame_calls(&self) -> usize {
        if self.selector == crate::propose::Selector::Blame && self.agents.len() > 1 {
            self.rounds
        } else {
            0
        }
    }
}

/// What the run calls: the target, the grader and how to read what the calls consumed.
pub struct Services<'a> {
    /// The system under test.
    pub target: Arc<dyn Target>,
    /// The grader (wrapped).
    pub grader: Arc<dyn ChatModel>,
    /// The proposer (wrapped), with proposal rounds.
    pub proposer: Option<Arc<dyn ChatModel>>,
    /// Usage so far by role.
    pub usage: &'a (dyn Fn() -> Usage + Sync),
    /// Progress for the console.
    pub progress: &'a dyn Progress,
    /// The estimate of the whole run (for the budget's per-case figure).
    pub estimate: Option<Estimate>,
    /// What the other workers of a shared study spent, as last read from its storage: the
    /// budget is the study's (zero for a study of one process).
    pub others_spent: OthersSpent,
}

/// USD spent by the other workers of a study shared in PostgreSQL, as last read (at each
/// trial claim, and before the finish); counted against `--budget` with this worker's own.
#[derive(Debug, Default)]
pub struct OthersSpent(std::sync::atomic::AtomicU64);

impl OthersSpent {
    /// The amount last read.
    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }

    pub(crate) fn set(&self, usd: f64) {
        self.0
            .store(usd.max(0.0).to_bits(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// The experiment folder's layout.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `experiments/<name>/`.
    pub dir: PathBuf,
}

impl Layout {
    /// The layout of experiment `name` in `project`.
    pub fn new(project: &Path, name: &str) -> Layout {
        Layout {
            dir: project.join("experiments").join(name),
        }
    }
    /// `baseline_prompts/`.
    pub fn baseline_prompts(&self) -> PathBuf {
        self.dir.join("baseline_prompts")
    }
    /// `optimized_prompts/`.
    pub fn optimized_prompts(&self) -> PathBuf {
        self.dir.join("optimized_prompts")
    }
    /// `logs/`.
    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }
    /// `logs/error_logs/`.
    pub fn error_logs(&self) -> PathBuf {
        self.dir.join("logs").join("error_logs")
    }
    /// The journal.
    pub fn journal(&self) -> PathBuf {
        self.dir.join(JOURNAL_FILE)
    }
    /// `tracking/` (the local tracking store).
    pub fn tracking(&self) -> PathBuf {
        self.dir.join("tracking")
    }
}

/// A step's log file (`logs/<step>_run.log`): timestamped lines, also sent to tracing.
struct StepLog {
    file: std::fs::File,
    path: PathBuf,
}

impl StepLog {
    fn open(layout: &Layout, step: &str) -> Result<StepLog, RunError> {
        let path = layout.logs().join(format!("{step}_run.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| RunError::io(&path, &e))?;
        Ok(StepLog { file, path })
    }

    fn line(&mut self, message: &str) {
        tracing::info!(log = %self.path.display(), "{message}");
        let _ = writeln!(
            self.file,
            "{} {message}",
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        );
    }
}

fn error_log(layout: &Layout, step: &str, context: &str) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let path = layout.error_logs().join(format!("{step}_{stamp}.log"));
    if let Err(e) = assay_project::results::write_replace(&path, context.as_bytes()) {
        tracing::error!(path = %path.display(), "cannot write the error log: {e}");
    }
    tracing::error!("{step}: {}", context.lines().next().unwrap_or_default());
    path
}

// ---------------------------------------------------------------------------------------------
// Running cases

fn files_of(case: &LoadedCase) -> Vec<TargetFile> {
    case.context
        .iter()
        .map(|f| TargetFile {
            path: f.path.clone(),
            text: f.text.clone(),
        })
        .collect()
}

fn prompt_hashes(prompts: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    prompts
        .iter()
        .map(|(a, p)| (a.clone(), sha256_hex(p)))
        .collect()
}

pub(crate) fn spent(usage: &Usage) -> f64 {
    usage.target.cost_usd.unwrap_or(0.0)
        + usage.grader.cost_usd.unwrap_or(0.0)
        + usage.proposer.cost_usd.unwrap_or(0.0)
}

struct Runner<'a> {
    services: &'a Services<'a>,
    options: &'a Options,
    per_case: f64,
    per_proposal: f64,
}

impl Runner<'_> {
    fn check_budget(&self) -> Result<(), RunError> {
        self.check_budget_for(self.per_case)
    }

    /// Whether the spend so far plus `next` (one case's or one proposal's estimate) stays
    /// within the budget.
    fn check_budget_for(&self, next: f64) -> Result<(), RunError> {
        if let Some(budget) = self.options.budget {
            let spent = spent(&(self.services.usage)()) + self.services.others_spent.get();
            if spent + next > budget {
                return Err(RunError::Budget {
                    spent,
                    next,
                    budget,
                });
            }
        }
        Ok(())
    }

    async fn one(&self, prompts: &BTreeMap<String, String>, case: &LoadedCase) -> CaseResult {
        let c = &case.case;
        let started = std::time::Instant::now();
        let answered = self
            .services
            .target
            .answer(prompts, &c.question, &files_of(case))
            .await;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        let output = match answered {
            Ok(o) => o,
            Err(e) => {
                return grade::errored(
                    c.line,
                    &c.question,
                    &c.answer,
                    None,
                    format!("target: {e}"),
                );
            }
        };
        let grader = Grader {
            model: self.services.grader.as_ref(),
            threshold: self.options.threshold,
        };
        match grader.grade(c, &output, &self.options.checker).await {
            Ok(mut r) => {
                grade::apply_assertions(&mut r, c, &output, Some(latency_ms));
                r
            }
            Err(e) => grade::errored(c.line, &c.question, &c.answer, Some(output), e.to_string()),
        }
    }

    fn note(&self, what: &str) -> String {
        let u = (self.services.usage)();
        let calls = u.target.calls + u.grader.calls + u.proposer.calls;
        match (u.target.cost_usd, u.grader.cost_usd) {
            (None, None) => format!("{what} · {calls} calls"),
            _ => format!("{what} · {calls} calls · ${:.4}", spent(&u)),
        }
    }

    /// Runs `cases` with `prompts`, in order, at most `max_concurrency` at once for stateless
    /// targets; stops dispatching at the first infrastructure error.
    async fn cases(
        &self,
        prompts: &BTreeMap<String, String>,
        cases: &[LoadedCase],
        what: &str,
    ) -> Result<Vec<CaseResult>, RunError> {
        let width = if self.services.target.stateless() {
            self.options.max_concurrency.max(1)
        } else {
            1
        };
        let mut results: Vec<CaseResult> = Vec::with_capacity(cases.len());
        // One span for the cases of a step or trial, each case's span under it.
        let span = assay_telemetry::Span::start(
            what.to_owned(),
            opentelemetry::trace::SpanKind::Internal,
            || {
                vec![opentelemetry::KeyValue::new(
                    "assay.cases",
                    assay_telemetry::count(cases.len()),
                )]
            },
        );
        for chunk in cases.chunks(width) {
            if let Err(e) = self.check_budget() {
                span.end();
                return Err(e);
            }
            let done: Vec<CaseResult> = assay_telemetry::in_span(
                &span,
                futures_util::stream::iter(chunk)
                    .map(|case| self.one_traced(prompts, case))
                    .buffered(width)
                    .collect(),
            )
            .await;
            self.services
                .progress
                .advance(done.len() as u64, &self.note(what));
            let failed = done.iter().any(|r| r.error.is_some());
            results.extend(done);
            if failed {
                break;
            }
        }
        span.end();
        Ok(results)
    }
}

fn first_error(results: &[CaseResult]) -> Option<&CaseResult> {
    results.iter().find(|r| r.error.is_some())
}

fn halt(
    layout: &Layout,
    step: &str,
    what: &str,
    prompts: &BTreeMap<String, String>,
    failed: &CaseResult,
) -> RunError {
    let context = format!(
        "{what}: case on line {} failed: {}\n\nquestion: {}\nexpected: {}\noutput: {}\nprompt sha256: {}\n",
        failed.line,
        failed.error.as_deref().unwrap_or_default(),
        failed.question,
        failed.expected,
        failed.output.as_deref().unwrap_or("(none)"),
        serde_json::to_string(&prompt_hashes(prompts)).unwrap_or_default(),
    );
    let log = error_log(layout, step, &context);
    RunError::Halted {
        step: step.to_owned(),
        message: format!(
            "{what}: case on line {}: {}",
            failed.line,
            failed.error.as_deref().unwrap_or_default()
        ),
        log,
    }
}

/// A step's result: `done` when the journal has it (`--resume`; `run` is then never polled),
/// otherwise `run`'s, appended to the journal as `entry`.
async fn journaled(
    done: Option<StepResult>,
    journal: &mut Journal<'_>,
    entry: impl FnOnce(StepResult) -> JournalEntry,
    run: impl Future<Output = Result<StepResult, RunError>>,
) -> Result<StepResult, RunError> {
    if let Some(step) = done {
        return Ok(step);
    }
    let step = run.await?;
    journal.append(&entry(step.clone()))?;
    Ok(step)
}

async fn run_step(
    runner: &Runner<'_>,
    layout: &Layout,
    step: &str,
    log_name: &str,
    params: BTreeMap<String, usize>,
    prompts: &BTreeMap<String, String>,
    data: &CaseData,
) -> Result<StepResult, RunError> {
    let mut log = StepLog::open(layout, log_name)?;
    log.line(&format!(
        "{step}: {} cases from {} (version {}), prompts {}",
        data.set.len(),
        data.data.path,
        data.data.version.as_deref().unwrap_or("-"),
        serde_json::to_string(&prompt_hashes(prompts)).unwrap_or_default()
    ));
    let started = Instant::now();
    runner.services.progress.start(step, data.set.len() as u64);
    let cases = runner.cases(prompts, &data.set.cases, step).await?;
    if let Some(failed) = first_error(&cases) {
        runner.services.progress.finish(step, "halted");
        log.line(&format!("{step}: halted at line {}", failed.line));
        return Err(halt(layout, log_name, step, prompts, failed));
    }
    let metrics = Metrics::of(&cases);
    let summary = metrics_line(&metrics);
    log.line(&format!("{step}: {summary}"));
    runner.services.progress.finish(step, &summary);
    Ok(StepResult {
        step: step.to_owned(),
        data: data.data.clone(),
        params,
        prompt_sha256: prompt_hashes(prompts),
        cases,
        metrics,
        duration_s: started.elapsed().as_secs_f64(),
    })
}

/// `7/10 factually correct (70%), composite 0.812`.
pub fn metrics_line(m: &Metrics) -> String {
    format!(
        "{}/{} factually correct ({:.0}%), composite {:.3}",
        m.factually_correct_count,
        m.cases,
        m.factual_correctness_percentage,
        m.average_composite_score
    )
}

fn values_of(metrics: &Metrics, objectives: &[Objective]) -> Vec<f64> {
    objectives
        .iter()
        .map(|o| metrics.objective(&o.metric).unwrap_or(0.0))
        .collect()
}

fn named(lists: &PromptLists, params: &[usize]) -> BTreeMap<String, usize> {
    lists
        .agents
        .iter()
        .zip(params)
        .map(|(a, &i)| (a.agent.clone(), i))
        .collect()
}

/// A trial record with nothing but its number, parameters, outcome, origin and duration.
fn blank(
    asked: &Asked,
    params: BTreeMap<String, usize>,
    outcome: TrialOutcome,
    started: Instant,
) -> TrialRecord {
    TrialRecord {
        number: asked.number,
        params,
        outcome,
        values: Vec::new(),
        duplicate_of: None,
        metrics: None,
        cases: Vec::new(),
        note: None,
        origin: origin_name(asked.origin),
        duration_s: started.elapsed().as_secs_f64(),
        worker: None,
        retried: Vec::new(),
    }
}

fn origin_name(o: Origin) -> String {
    format!("{o:?}").to_lowercase()
}

/// Whether `candidate` (on a subset) is clearly worse than `best` on the same cases.
fn clearly_worse(best: &[CaseResult], candidate: &[CaseResult], seed: u64) -> Option<String> {
    let s = stats::significance(best, candidate, seed);
    let m = s.mcnemar;
    if m.baseline_only > m.optimized_only && m.p_value < stats::ALPHA {
        return Some(format!(
            "on {} cases: {} fewer correct than the best (McNemar p = {:.3})",
            s.pairs,
            m.baseline_only - m.optimized_only,
            m.p_value
        ));
    }
    if let Some(b) = s.bootstrap
        && b.ci_high < 0.0
    {
        return Some(format!(
            "on {} cases: composite {:+.3} vs the best (95% interval {:+.3}..{:+.3})",
            s.pairs, b.mean_difference, b.ci_low, b.ci_high
        ));
    }
    None
}

/// Everything `optimize` needs.
pub struct Experiment<'a> {
    /// The project directory.
    pub project: &'a Path,
    /// The prompt lists.
    pub lists: &'a PromptLists,
    /// Optimization cases.
    pub optimization: &'a CaseData,
    /// Evaluation cases.
    pub evaluation: &'a CaseData,
    /// Options.
    pub options: &'a Options,
    /// Target, grader, usage, progress.
    pub services: &'a Services<'a>,
}

impl Experiment<'_> {
    fn header(&self) -> JournalHeader {
        let o = self.options;
        JournalHeader {
            schema_version: EXPERIMENT_SCHEMA_VERSION,
            name: o.name.clone(),
            seed: o.seed,
            trials: o.trials,
            directions: o.objectives.iter().map(ToString::to_string).collect(),
            startup_trials: o.startup_trials,
            threshold: o.threshold,
            racing: o.racing,
            target: self.services.target.describe(),
            grader: self.services.grader.model().to_owned(),
            optimization: self.optimization.set.fingerprint.clone(),
            evaluation: self.evaluation.set.fingerprint.clone(),
            prompts: self
                .lists
                .agents
                .iter()
                .map(|a| {
                    (
                        a.agent.clone(),
                        a.prompts.iter().map(|p| sha256_hex(&p.text)).collect(),
                    )
                })
                .collect(),
            started: Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            propose: o.propose.clone(),
            correctness: Some(o.checker.describe()),
        }
    }

    fn per_case(&self) -> f64 {
        let Some(e) = self.services.estimate else {
            return 0.0;
        };
        (e.target.cost_usd.unwrap_or(0.0) + e.grader.cost_usd.unwrap_or(0.0))
            / e.target_runs.max(1) as f64
    }

    fn per_proposal(&self) -> f64 {
        let Some(e) = self.services.estimate else {
            return 0.0;
        };
        e.proposer.cost_usd.unwrap_or(0.0) / e.proposer.calls.max(1) as f64
    }

    /// What runs the cases of this experiment's steps.
    fn runner(&self) -> Runner<'_> {
        Runner {
            services: self.services,
            options: self.options,
            per_case: self.per_case(),
            per_proposal: self.per_proposal(),
        }
    }

    /// The production prompts' indices: 0 for every agent.
    fn zeros(&self) -> BTreeMap<String, usize> {
        self.lists
            .agents
            .iter()
            .map(|a| (a.agent.clone(), 0))
            .collect()
    }
}

/// Runs the three steps (or continues them from the journal) and returns the report, also
/// written to `experiments/<name>/report.json` (the Markdown is the caller's: it renders).
pub async fn optimize(x: &Experiment<'_>) -> Result<ExperimentReport, RunError> {
    let options = x.options;
    let layout = Layout::new(x.project, &options.name);
    let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    if options.trials == 0 {
        return Err(RunError::Usage(
            "--optimization-trials: must be at least 1".into(),
        ));
    }
    for dir in [layout.logs(), layout.error_logs()] {
        std::fs::create_dir_all(&dir).map_err(|e| RunError::io(&dir, &e))?;
    }
    let header = x.header();
    let (mut journal, replay) = open_journal(&layout, &header, options.resume, x.services.usage)?;
    // A resumed experiment started when its journal did.
    let started = replay.started.clone().unwrap_or(started);
    let baseline_prompts = x.lists.baseline();
    write_prompt_dir(&layout.baseline_prompts(), &baseline_prompts)?;
    let runner = x.runner();
    let zeros = x.zeros();

    // Step 1.
    if replay.baseline.is_some() {
        StepLog::open(&layout, "baseline")?.line("baseline: read back from the journal (--resume)");
    }
    let baseline = journaled(
        replay.baseline.clone(),
        &mut journal,
        |step| JournalEntry::Baseline { step },
        run_step(
            &runner,
            &layout,
            "baseline",
            "baseline",
            zeros.clone(),
            &baseline_prompts,
            x.optimization,
        ),
    )
    .await?;

    // Step 2.
    let Searched {
        study,
        trials,
        lists,
        proposals,
    } = study(x, &runner, &layout, &mut journal, &replay, &baseline).await?;
    let best = study.best_by_priority().map(|t| t.number);
    let best_params = best
        .and_then(|n| study.trial(n))
        .map_or_else(|| zeros.clone(), |t| named(&lists, &t.params));
    let best_prompts = lists.choose(&best_params);
    write_prompt_dir(&layout.optimized_prompts(), &best_prompts)?;
    let best_cases: Vec<CaseResult> = best
        .and_then(|n| trials.iter().find(|t| t.number == n))
        .map_or_else(
            || baseline.cases.clone(),
            |t| match t.duplicate_of {
                Some(d) => trials
                    .iter()
                    .find(|o| o.number == d)
                    .map(|o| o.cases.clone())
                    .unwrap_or_default(),
                None => t.cases.clone(),
            },
        );

    // Step 3.
    let evaluation = journaled(
        replay.evaluation,
        &mut journal,
        |step| JournalEntry::Evaluation { step },
        run_step(
            &runner,
            &layout,
            "evaluation",
            "evaluation",
            best_params.clone(),
            &best_prompts,
            x.evaluation,
        ),
    )
    .await?;
    let evaluation_baseline = journaled(
        replay.evaluation_baseline,
        &mut journal,
        |step| JournalEntry::EvaluationBaseline { step },
        run_step(
            &runner,
            &layout,
            "evaluation_baseline",
            "evaluation",
            zeros.clone(),
            &baseline_prompts,
            x.evaluation,
        ),
    )
    .await?;
    let comparisons: Vec<Comparison> = vec![
        stats::compare("optimization", &baseline.cases, &best_cases, options.seed),
        stats::compare(
            "evaluation",
            &evaluation_baseline.cases,
            &evaluation.cases,
            options.seed,
        ),
    ];
    // With proposals: the best combination against the best hand-written one, held out.
    let hand_written = if options.propose.is_none() {
        None
    } else {
        let hand = |params: &[usize]| {
            params
                .iter()
                .zip(&x.lists.agents)
                .all(|(&i, a)| i < a.prompts.len())
        };
        let best_hand = study
            .best_by_priority_among(|t| hand(&t.params))
            .map_or(0, |t| t.number);
        let hand_params = study
            .trial(best_hand)
            .map_or_else(|| zeros.clone(), |t| named(&lists, &t.params));
        if best.is_none_or(|n| study.trial(n).is_some_and(|t| hand(&t.params))) {
            Some(HandWritten {
                    trial: best_hand,
                    params: hand_params,
                    evaluation: None,
                    comparison: None,
                    verdict: "hand_written".into(),
                    summary: "the best combination is hand-written: no proposal beat it on the optimization cases".into(),
                })
        } else {
            let hand_eval = if hand_params.values().all(|&i| i == 0) {
                evaluation_baseline.clone()
            } else {
                journaled(
                    replay.evaluation_hand_written.clone(),
                    &mut journal,
                    |step| JournalEntry::EvaluationHandWritten { step },
                    run_step(
                        &runner,
                        &layout,
                        "evaluation_hand_written",
                        "evaluation",
                        hand_params.clone(),
                        &lists.choose(&hand_params),
                        x.evaluation,
                    ),
                )
                .await?
            };
            let cmp = stats::compare(
                "evaluation (vs the best hand-written)",
                &hand_eval.cases,
                &evaluation.cases,
                options.seed,
            );
            let s = &cmp.significance;
            let better = s.correct_gain_significant || s.composite_gain_significant;
            let (verdict, summary) = if better {
                (
                    "better",
                    format!(
                        "the proposals beat the best hand-written prompts (trial {best_hand}) on the held-out cases: {}",
                        s.verdict
                    ),
                )
            } else {
                (
                    "not_generalised",
                    format!(
                        "the proposals did not generalise: better than the best hand-written prompts (trial {best_hand}) on the optimization cases, but on the held-out cases {}",
                        s.verdict
                    ),
                )
            };
            Some(HandWritten {
                trial: best_hand,
                params: hand_params,
                evaluation: (hand_eval.step != "evaluation_baseline").then_some(hand_eval),
                comparison: Some(cmp),
                verdict: verdict.into(),
                summary,
            })
        }
    };
    let mut log = StepLog::open(&layout, "evaluation")?;
    for c in &comparisons {
        log.line(&format!("{}: {}", c.set, c.significance.verdict));
    }
    if let Some(h) = &hand_written {
        log.line(&format!("proposals: {}", h.summary));
    }
    let report = ExperimentReport {
        schema_version: EXPERIMENT_SCHEMA_VERSION,
        name: options.name.clone(),
        started,
        finished: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        seed: options.seed,
        target: x.services.target.describe(),
        grader: x.services.grader.model().to_owned(),
        grader_version: Some(crate::grade::version()),
        threshold: options.threshold,
        directions: header.directions.clone(),
        agents: lists
            .agents
            .iter()
            .map(|a| (a.agent.clone(), a.prompts.len()))
            .collect(),
        trials_requested: options.trials,
        search_mode: study.search_mode().to_string(),
        baseline,
        pareto_front: study.pareto_front().iter().map(|t| t.number).collect(),
        best_trial: best,
        best_params,
        best_prompts,
        baseline_prompts: baseline_prompts.clone(),
        trials,
        evaluation: Some(evaluation),
        evaluation_baseline: Some(evaluation_baseline),
        comparisons,
        usage: (x.services.usage)(),
        estimate: x.services.estimate,
        prompt_files: lists
            .agents
            .iter()
            .map(|a| {
                let files = a
                    .prompts
                    .iter()
                    .map(|p| {
                        p.file
                            .strip_prefix(x.project)
                            .unwrap_or(&p.file)
                            .display()
                            .to_string()
                            .replace('\\', "/")
                    })
                    .collect();
                (a.agent.clone(), files)
            })
            .collect(),
        proposals,
        hand_written,
        correctness: Some(options.checker.describe()),
        disagreements: Vec::new(),
        tie: None,
    };
    let mut report = report;
    report.tie = tie_note(&report.trials, &report.directions, report.best_trial);
    report.disagreements = all_disagreements(&report);
    let json = serde_json::to_vec_pretty(&report).map_err(|e| RunError::io(&layout.dir, &e))?;
    let path = layout.dir.join(REPORT_JSON);
    assay_project::results::write_replace(&path, &json).map_err(|e| RunError::io(&path, &e))?;
    Ok(report)
}

/// The search space of the prompt lists: one parameter per agent, in name order.
pub fn space_of(lists: &PromptLists) -> Result<SearchSpace, assay_optimize::Error> {
    lists.agents.iter().try_fold(SearchSpace::new(), |s, a| {
        s.with_param(&a.agent, a.prompts.len())
    })
}

/// `assay evaluate`: step 3 alone — `prompts` (agent → text) on the evaluation cases, and the
/// production prompts on the same cases for the comparison.
pub async fn evaluate(
    x: &Experiment<'_>,
    prompts: &BTreeMap<String, String>,
) -> Result<(StepResult, StepResult, Comparison), RunError> {
    let layout = Layout::new(x.project, &x.options.name);
    for dir in [layout.logs(), layout.error_logs()] {
        std::fs::create_dir_all(&dir).map_err(|e| RunError::io(&dir, &e))?;
    }
    let runner = x.runner();
    let zeros = x.zeros();
    let step = run_step(
        &runner,
        &layout,
        "evaluation",
        "evaluation",
        BTreeMap::new(),
        prompts,
        x.evaluation,
    )
    .await?;
    let base = run_step(
        &runner,
        &layout,
        "evaluation_baseline",
        "evaluation",
        zeros,
        &x.lists.baseline(),
        x.evaluation,
    )
    .await?;
    let cmp = stats::compare("evaluation", &base.cases, &step.cases, x.options.seed);
    Ok((step, base, cmp))
}

/// The report of a finished experiment, if it has a readable one (see [`load_report`]).
pub fn read_report(experiment_dir: &Path) -> Option<ExperimentReport> {
    load_report(experiment_dir).ok().flatten()
}

/// Reads `report.json` of an experiment: `Ok(None)` when there is none (yet); an error naming
/// the file when it is not JSON, not an experiment report, or of a version this assay does not
/// read (the version is checked before the body, so a newer report says so instead of failing
/// on a field).
pub fn load_report(experiment_dir: &Path) -> Result<Option<ExperimentReport>, ExperimentError> {
    #[derive(Deserialize)]
    struct Version {
        schema_version: Option<u64>,
    }
    let path = experiment_dir.join(REPORT_JSON);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ExperimentError::data(&path, format!("cannot read: {e}"))),
    };
    let version = serde_json::from_str::<Version>(&text).map_err(|e| {
        ExperimentError::Data(crate::error::DataError {
            path: path.clone(),
            line: Some(e.line()),
            column: Some(e.column()),
            message: format!("not JSON: {e}"),
        })
    })?;
    let Some(version) = version.schema_version else {
        return Err(ExperimentError::data(
            &path,
            "not an experiment report (no `schema_version`)",
        ));
    };
    if version != u64::from(EXPERIMENT_SCHEMA_VERSION) {
        return Err(ExperimentError::data(
            &path,
            format!(
                "an experiment report of version {version}; this assay reads version {EXPERIMENT_SCHEMA_VERSION}"
            ),
        ));
    }
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ExperimentError::data(&path, format!("not an experiment report: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_parse_and_reject_typos() {
        let d = parse_directions(&[
            "maximize factually_correct_count".into(),
            "minimize average_composite_score".into(),
        ])
        .unwrap();
        assert_eq!(d[0].direction(), Direction::Maximize);
        assert_eq!(d[1].to_string(), "minimize average_composite_score");
        assert!(
            parse_directions(&["maximise x".into()])
                .unwrap_err()
                .contains("unknown direction")
        );
        assert!(
            parse_directions(&["maximize score".into()])
                .unwrap_err()
                .contains("unknown metric")
        );
        assert!(parse_directions(&["maximize".into()]).is_err());
    }
}
