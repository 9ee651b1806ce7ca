//! One whole optimization or evaluation, as `assay optimize` / `assay evaluate` (and anything
//! else that starts one, such as a server) carry it out: read the settings, the prompt lists
//! and the case sets, take the project lock, build the target and the grader behind the call
//! wrapper ([`assay_project::engine::ProviderCalls`]), estimate the calls and cost before any
//! call, enforce the budget rule, run the dry check (every agent's prompt must reach the
//! target), run the steps ([`crate::run`]), and write what the experiment leaves behind:
//! `report.json` (by the run), `report.md`, `report.html`, the Optuna journal and the tracking
//! runs (MLflow or the local store). The caller parses its arguments into a request and
//! renders what comes back; [`Observer`] lets it show the estimate and the progress.
//!
//! As [`assay_run::session::execute`] is for runs, this is the one entry point for
//! experiments.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use assay_core::experiment::{
    Comparison, Estimate, ExperimentReport, StepResult, Usage, UsageTotals,
};
use assay_project::HarnessError;
use assay_project::engine::{ProviderCalls, build_chat_model};
use assay_project::lock::ProjectLock;
use assay_project::settings::ProjectSettings;
use assay_providers::{AccountingSnapshot, ChatModel};

use crate::cases::{CaseSet, load_cases};
use crate::correct::{Checker, Correctness};
use crate::error::ExperimentError;
use crate::prompts::{PromptLists, load_prompt_lists, load_prompt_lists_for, read_prompt_dir};
use crate::run::{self, CaseData, Experiment, Layout, Options, Progress, RunError, Services};
use crate::target::{
    ChainTarget, CommandTarget, FunctionTarget, HttpTarget, Target, TargetError, WorkerTarget,
};
use crate::testdata::{self, Kind};
use crate::tracking::{self, TrackingError};

/// The self-contained HTML report's file name inside the experiment folder.
pub const REPORT_HTML: &str = "report.html";

/// How an environment variable is read (API keys, `ASSAY_CACHE`).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Where a set of cases comes from: a file (`--*-test-cases`), else a test-data version
/// (`--*-version`, else the latest).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseSource {
    /// A `test_cases.jsonl` (relative paths that do not exist from here are the project's).
    pub file: Option<PathBuf>,
    /// A test-data version.
    pub version: Option<String>,
}

/// An optimization, resolved from the command line (or a form).
#[derive(Debug, Clone, PartialEq)]
pub struct OptimizeRequest {
    /// The project directory.
    pub project: PathBuf,
    /// The experiment's name (`experiments/<name>/`): a plain folder name.
    pub name: String,
    /// Trials of the study, the baseline trial included.
    pub trials: usize,
    /// The sampler's and the bootstrap's seed.
    pub seed: u64,
    /// Continue the experiment from its journal.
    pub resume: bool,
    /// A hard cap on the spend in USD (every model of the run must be priced).
    pub budget: Option<f64>,
    /// Racing, with `[optimize] racing_fraction`.
    pub racing: bool,
    /// Cases of a trial at once (stateless targets only); `[optimize] max_concurrency` else.
    pub max_concurrency: Option<usize>,
    /// The optimization cases.
    pub optimization: CaseSource,
    /// The held-out evaluation cases.
    pub evaluation: CaseSource,
    /// The call cache's mode (`--cache`).
    pub cache: Option<String>,
    /// An MLflow tracking server; the local store `experiments/<name>/tracking/` without one.
    pub mlflow_uri: Option<String>,
    /// Proposal rounds (`--propose-rounds`); `[optimize.propose] rounds` when `None`.
    pub propose_rounds: Option<usize>,
    /// Where the study's trials are shared (`--storage`); `[optimize] storage` when `None`.
    pub storage: Option<String>,
    /// `--worker`: join the shared experiment (created if no worker has yet).
    pub worker: bool,
    /// The command line, for the project lock's holder description.
    pub command_line: String,
}

/// An evaluation of a prompt folder on the evaluation cases (step 3 alone).
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluateRequest {
    /// The project directory.
    pub project: PathBuf,
    /// The prompt folder (`<agent>_system_prompt.txt` for every agent).
    pub prompts: PathBuf,
    /// The experiment folder's name (default `evaluate_<unix seconds>`).
    pub name: Option<String>,
    /// The bootstrap's seed.
    pub seed: u64,
    /// A hard cap on the spend in USD.
    pub budget: Option<f64>,
    /// Cases at once (stateless targets only).
    pub max_concurrency: Option<usize>,
    /// The evaluation cases.
    pub evaluation: CaseSource,
    /// The call cache's mode.
    pub cache: Option<String>,
    /// The command line, for the project lock's holder description.
    pub command_line: String,
}

/// What the caller is told while a session runs.
pub struct Observer<'a> {
    /// Progress of the steps (a bar, or nothing: [`run::Quiet`]).
    pub progress: &'a dyn Progress,
    /// The estimate, before any call.
    pub estimate: &'a (dyn Fn(&Estimate) + Sync),
    /// Warnings about the inputs (unknown fields in case files).
    pub warning: &'a (dyn Fn(&str) + Sync),
}

/// The files an optimization wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentFiles {
    /// `experiments/<name>/`.
    pub dir: PathBuf,
    /// `report.json`.
    pub report_json: PathBuf,
    /// `report.md`.
    pub report_md: PathBuf,
    /// `report.html`.
    pub report_html: PathBuf,
    /// `optuna_journal.log`.
    pub optuna_journal: PathBuf,
}

/// What `assay optimize` ended with.
#[derive(Debug, Clone)]
pub enum OptimizeDone {
    /// The experiment finished here: its report and files.
    Finished(Box<Optimized>),
    /// A worker of a shared study whose finish another worker runs (or ran).
    Joined(run::JoinedStudy),
}

/// A finished optimization.
#[derive(Debug, Clone)]
pub struct Optimized {
    /// The record.
    pub report: ExperimentReport,
    /// What was written.
    pub files: ExperimentFiles,
}

/// A finished evaluation.
#[derive(Debug, Clone)]
pub struct Evaluated {
    /// The prompts on the evaluation cases.
    pub evaluation: StepResult,
    /// The production prompts on the same cases.
    pub baseline: StepResult,
    /// The paired comparison.
    pub comparison: Comparison,
    /// What the calls consumed.
    pub usage: Usage,
}

/// Why a session stopped.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Settings, usage, a provider that cannot be built.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// Bad project files (cases, prompts, versions) or the project lock.
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    /// The run stopped (halted, budget, journal).
    #[error(transparent)]
    Run(#[from] RunError),
    /// The dry check failed: an agent's prompt does not reach the target.
    #[error("dry check: every agent's prompt must reach the target before anything is spent: {0}")]
    DryCheck(#[source] TargetError),
    /// A model of the run is not there (or its provider cannot be reached), found before
    /// anything was written.
    #[error("preflight: {message}; nothing was written")]
    Preflight {
        /// What is wrong, naming the setting.
        message: String,
        /// The provider could not be reached (exit 3) rather than refusing the model (exit 2).
        infrastructure: bool,
    },
    /// The target could not be built (a bad URL).
    #[error(transparent)]
    Target(#[from] TargetError),
    /// Tracking (MLflow or the local store) failed.
    #[error(transparent)]
    Tracking(#[from] TrackingError),
    /// A report could not be written.
    #[error("writing {}: {message}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl SessionError {
    /// Exit code 3 (infrastructure) rather than 2 (bad input).
    pub fn is_infrastructure(&self) -> bool {
        match self {
            SessionError::Harness(e) => e.is_infrastructure(),
            SessionError::Experiment(e) => e.is_infrastructure(),
            SessionError::Run(e) => e.is_infrastructure(),
            // The dry check runs the user's target with marker prompts: a target that cannot
            // start, exits non-zero or answers badly there is a setup to fix (exit 2), except
            // when it cannot be reached or times out.
            SessionError::DryCheck(e) => e.is_unreachable(),
            SessionError::Target(e) => e.is_infrastructure(),
            SessionError::Preflight { infrastructure, .. } => *infrastructure,
            SessionError::Tracking(_) | SessionError::Write { .. } => true,
        }
    }
}

fn totals(snapshot: &AccountingSnapshot) -> UsageTotals {
    let mut t = UsageTotals::default();
    for s in snapshot.models.values() {
        t += UsageTotals {
            calls: s.calls,
            cache_hits: s.cache_hits,
            requests: s.requests,
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            cost_usd: s.cost_usd,
        };
    }
    t
}

fn load_set(
    dir: &Path,
    kind: Kind,
    source: &CaseSource,
    observer: &Observer<'_>,
) -> Result<CaseData, ExperimentError> {
    let set: CaseSet = match &source.file {
        Some(f) => {
            let f = if f.is_absolute() || f.exists() {
                f.clone()
            } else {
                dir.join(f)
            };
            let root = f.parent().map(Path::to_path_buf).unwrap_or_default();
            load_cases(&f, &root)?
        }
        None => testdata::resolve(dir, kind, source.version.as_deref())?.load()?,
    };
    for w in &set.warnings {
        (observer.warning)(w);
    }
    Ok(CaseData::new(kind.as_str(), set, dir))
}

/// The target `[optimize]` describes, as [`build_target`] builds it.
pub struct TargetBuild {
    /// The target.
    pub target: Arc<dyn Target>,
    /// Agents in the built-in chain (0 for a command or HTTP target).
    pub chain_len: usize,
    /// The model of each chain agent (`vendor/model`).
    pub agent_models: BTreeMap<String, String>,
    /// Each chain agent's model, unwrapped, with the setting that named it (for the
    /// preflight).
    pub models: Vec<(String, Arc<dyn ChatModel>)>,
}

/// Builds the target `[optimize] target` names — `command`, `http`, a worker (`worker`,
/// `python:…`, `node:…`) or the built-in chain —
/// the one way the optimizer and the answer bank of `assay run` both reach the product. The
/// chain runs `agents` (the agents that have prompts) in `[optimize] chain`'s order, each on
/// its model (`[optimize.agent_models]`, else `[optimize] model`) wrapped by `calls` under
/// the role `target`. A command's or endpoint's replies are read up to `[answer]
/// max_reply_bytes`, for both.
pub fn build_target(
    settings: &ProjectSettings,
    dir: &Path,
    agents: &[String],
    calls: &ProviderCalls,
    env: Env<'_>,
) -> Result<TargetBuild, SessionError> {
    let o = &settings.optimize;
    let timeout = Duration::from_secs_f64(o.timeout_seconds);
    let mut agent_models = BTreeMap::new();
    let mut to_check = Vec::new();
    let (target, chain_len): (Arc<dyn Target>, usize) = match o.target.as_str() {
        "command" => (
            Arc::new(CommandTarget {
                command: o.command.clone(),
                dir: dir.to_owned(),
                timeout,
                stateless: o.stateless,
                max_reply_bytes: settings.answer.max_reply_bytes,
            }),
            0,
        ),
        "worker" => (
            Arc::new(WorkerTarget::new(
                format!("worker `{}`", o.command.join(" ")),
                o.command.clone(),
                dir.to_owned(),
                o.workers,
                timeout,
                o.stateless,
                settings.answer.max_reply_bytes,
            )),
            0,
        ),
        function if FunctionTarget::parse(function).is_some() => {
            let f = FunctionTarget::parse(function)
                .and_then(Result::ok)
                .ok_or_else(|| {
                    HarnessError::Usage(format!("optimize.target: bad function `{function}`"))
                })?;
            (
                Arc::new(WorkerTarget::new(
                    function.to_owned(),
                    f.command(dir, None),
                    dir.to_owned(),
                    o.workers,
                    timeout,
                    o.stateless,
                    settings.answer.max_reply_bytes,
                )),
                0,
            )
        }
        "http" => (
            Arc::new(HttpTarget {
                max_reply_bytes: settings.answer.max_reply_bytes,
                ..HttpTarget::new(o.url.as_deref().unwrap_or_default(), timeout, o.stateless)?
            }),
            0,
        ),
        _ => {
            let chain = ChainTarget::order(agents, o.chain.as_deref());
            let mut models: BTreeMap<String, Arc<dyn ChatModel>> = BTreeMap::new();
            for agent in &chain {
                let name = o.agent_models.get(agent).unwrap_or(&o.model);
                let source = if o.agent_models.contains_key(agent) {
                    format!("[optimize.agent_models] {agent}")
                } else {
                    "[optimize] model".to_owned()
                };
                let raw = build_chat_model(settings, name, &source, env)?;
                to_check.push((source, raw.clone()));
                models.insert(agent.clone(), calls.chat("target", raw));
                agent_models.insert(agent.clone(), name.clone());
            }
            let n = chain.len();
            (
                Arc::new(ChainTarget {
                    chain,
                    models,
                    max_tokens: o.agent_max_tokens,
                }),
                n,
            )
        }
    };
    Ok(TargetBuild {
        target,
        chain_len,
        agent_models,
        models: to_check,
    })
}

/// Everything built from the settings: the target, the grader, and their call wrappers.
struct Built {
    target: Arc<dyn Target>,
    grader: Arc<dyn ChatModel>,
    proposer: Option<Arc<dyn ChatModel>>,
    target_calls: ProviderCalls,
    grader_calls: ProviderCalls,
    proposer_calls: ProviderCalls,
    agent_models: BTreeMap<String, String>,
    chain_len: usize,
    /// Every model of the run, unwrapped, with the setting that named it: what the preflight
    /// asks the providers about.
    models: Vec<(String, Arc<dyn ChatModel>)>,
}

impl Built {
    fn new(
        dir: &Path,
        settings: &ProjectSettings,
        lists: &PromptLists,
        cache: Option<&str>,
        env: Env<'_>,
        proposer_model: Option<&str>,
    ) -> Result<Built, SessionError> {
        let o = &settings.optimize;
        let target_calls = ProviderCalls::open(settings, cache, env, true)?;
        // The target, the grader and the proposer are accounted apart but share the rate
        // limits of a model they all call.
        let grader_calls =
            ProviderCalls::open(settings, cache, env, true)?.sharing_limits_with(&target_calls);
        let proposer_calls =
            ProviderCalls::open(settings, cache, env, true)?.sharing_limits_with(&target_calls);
        let mut to_check: Vec<(String, Arc<dyn ChatModel>)> = Vec::new();
        let raw_grader =
            build_chat_model(settings, &o.grader_model, "[optimize] grader_model", env)?;
        to_check.push(("[optimize] grader_model".into(), raw_grader.clone()));
        let grader = grader_calls.chat("grader", raw_grader);
        let proposer = match proposer_model {
            Some(name) => {
                let source = if o.propose.model.is_some() {
                    "[optimize.propose] model"
                } else {
                    "[optimize] grader_model (the proposer's default)"
                };
                let raw = build_chat_model(settings, name, source, env)?;
                to_check.push((source.to_owned(), raw.clone()));
                Some(proposer_calls.chat("proposer", raw))
            }
            None => None,
        };
        let agents: Vec<String> = lists.names().iter().map(|s| (*s).to_owned()).collect();
        let built = build_target(settings, dir, &agents, &target_calls, env)?;
        to_check.extend(built.models);
        Ok(Built {
            target: built.target,
            grader,
            proposer,
            target_calls,
            grader_calls,
            proposer_calls,
            agent_models: built.agent_models,
            chain_len: built.chain_len,
            models: to_check,
        })
    }

    /// Asks each model's provider whether it has the model (`[optimize] preflight`), before
    /// anything is written: a misspelt model is exit 2 naming the setting, a provider that
    /// cannot be reached exit 3. With the call cache in `replay` nothing is asked (no call
    /// leaves the machine).
    async fn check_models(&self, settings: &ProjectSettings) -> Result<(), SessionError> {
        let mode = settings.optimize.preflight.as_str();
        if mode == "off" || self.target_calls.mode() == assay_providers::CacheMode::Replay {
            return Ok(());
        }
        let mut seen = std::collections::BTreeSet::new();
        for (source, model) in &self.models {
            if !seen.insert(model.model().to_owned()) {
                continue;
            }
            let found = match model.check_model().await {
                Ok(assay_providers::ModelCheck::Found) => true,
                Ok(assay_providers::ModelCheck::Missing { known }) => {
                    return Err(SessionError::Preflight {
                        message: missing_model(source, model.model(), &known),
                        infrastructure: false,
                    });
                }
                Ok(assay_providers::ModelCheck::Unknown(why)) => {
                    tracing::info!(
                        model = model.model(),
                        "preflight: cannot tell whether the model exists: {why}"
                    );
                    false
                }
                Err(e) => return Err(preflight_error(source, model.model(), &e)),
            };
            if !found && mode == "call" {
                let request = assay_providers::ChatRequest::new(None, "Reply with OK.", 1);
                if let Err(e) = model.chat(&request).await {
                    return Err(preflight_error(source, model.model(), &e));
                }
            }
        }
        Ok(())
    }

    /// Calls, tokens and cost so far, by role.
    fn usage(&self) -> Usage {
        Usage {
            target: totals(&self.target_calls.usage()),
            grader: totals(&self.grader_calls.usage()),
            proposer: totals(&self.proposer_calls.usage()),
            target_runs: 0,
            rate_limits: {
                let mut records = self.target_calls.rate_limit_records();
                records.extend(self.grader_calls.rate_limit_records());
                records.extend(self.proposer_calls.rate_limit_records());
                records
            },
        }
    }

    /// Before any call: the estimate (told to the observer), the budget rule, and the dry
    /// check (INT-011). Returns the estimate the budget is checked against.
    async fn preflight(
        &self,
        settings: &ProjectSettings,
        lists: &PromptLists,
        runs: &[(&CaseSet, u64)],
        propose: Option<(&run::ProposeOptions, &CaseSet)>,
        budget: Option<f64>,
        observer: &Observer<'_>,
    ) -> Result<Estimate, SessionError> {
        let mut est = estimate(settings, self, lists, runs);
        if let Some((p, set)) = propose {
            est.proposer = proposer_estimate(settings, self, lists, p, set);
        }
        (observer.estimate)(&est);
        check_budget(budget, &est)?;
        let agents: Vec<String> = lists.names().iter().map(|s| (*s).to_owned()).collect();
        self.target
            .dry_check(&agents)
            .await
            .map_err(SessionError::DryCheck)?;
        tracing::info!(target = %self.target.describe(), agents = agents.len(), "dry check passed: every agent's prompt reaches the target");
        Ok(est)
    }
}

fn chars(text: &str) -> u64 {
    text.chars().count() as u64
}

/// Calls, tokens and cost before any call: upper bounds (no cache hits; every reply as long
/// as its token limit; 4 characters a token).
fn estimate(
    settings: &ProjectSettings,
    built: &Built,
    lists: &PromptLists,
    runs: &[(&CaseSet, u64)],
) -> Estimate {
    let o = &settings.optimize;
    let max_out = u64::from(o.agent_max_tokens);
    let mut e = Estimate::default();
    let mut target_cost = Some(0.0);
    let mut grader_cost = Some(0.0);
    let grader_price = built.grader_calls.price(&o.grader_model);
    for (set, times) in runs {
        for case in &set.cases {
            let case_tokens = (chars(&case.case.question)
                + case.context.iter().map(|f| chars(&f.text)).sum::<u64>())
                / 4
                + 50;
            e.target_runs += times;
            for (i, agent) in lists.agents.iter().enumerate().take(built.chain_len) {
                let prompt = agent
                    .prompts
                    .iter()
                    .map(|p| chars(&p.text))
                    .max()
                    .unwrap_or(0)
                    / 4;
                let input = prompt + case_tokens + i as u64 * max_out;
                e.target.calls += times;
                e.target.input_tokens += input * times;
                e.target.output_tokens += max_out * times;
                let model = built
                    .agent_models
                    .get(&agent.agent)
                    .map_or(o.model.as_str(), String::as_str);
                target_cost = match (target_cost, built.target_calls.price(model)) {
                    (Some(c), Some(p)) => Some(
                        c + *times as f64 * (input as f64 * p.input + max_out as f64 * p.output)
                            / 1e6,
                    ),
                    _ => None,
                };
            }
            let input = 200 + case_tokens + chars(&case.case.answer) / 4 + max_out;
            let output = u64::from(crate::grade::GRADER_MAX_TOKENS);
            e.grader.calls += times;
            e.grader.input_tokens += input * times;
            e.grader.output_tokens += output * times;
            grader_cost = match (grader_cost, grader_price) {
                (Some(c), Some(p)) => Some(
                    c + *times as f64 * (input as f64 * p.input + output as f64 * p.output) / 1e6,
                ),
                _ => None,
            };
        }
    }
    e.target.cost_usd = if built.chain_len == 0 {
        Some(0.0)
    } else {
        target_cost
    };
    e.grader.cost_usd = grader_cost;
    e
}

/// The proposer's calls: one per proposal and one blame call per round where there is an agent
/// to choose (no corrective turn assumed), each reading the
/// longest prompt, `minibatch` cases with every agent's longest reply, and the instructions;
/// answering with its token limit.
fn proposer_estimate(
    settings: &ProjectSettings,
    built: &Built,
    lists: &PromptLists,
    p: &run::ProposeOptions,
    set: &CaseSet,
) -> assay_core::experiment::RoleEstimate {
    let max_out = u64::from(settings.optimize.agent_max_tokens);
    let calls = (p.rounds * p.proposals_in_round() + p.blame_calls()) as u64;
    let prompt = lists
        .agents
        .iter()
        .flat_map(|a| a.prompts.iter().map(|q| chars(&q.text)))
        .max()
        .unwrap_or(0)
        / 4;
    let mut case_tokens: Vec<u64> = set
        .cases
        .iter()
        .map(|c| {
            (chars(&c.case.question)
                + chars(&c.case.answer)
                + c.context
                    .iter()
                    .map(|f| chars(&f.text).min(3000))
                    .sum::<u64>())
                / 4
                + 150
                + built.chain_len.max(1) as u64 * max_out
        })
        .collect();
    case_tokens.sort_unstable_by(|a, b| b.cmp(a));
    let shown: u64 = case_tokens.iter().take(p.minibatch).sum();
    let input = 400 + prompt + shown;
    let output = u64::from(p.max_tokens);
    let cost = built
        .proposer_calls
        .price(&p.model)
        .map(|pr| calls as f64 * (input as f64 * pr.input + output as f64 * pr.output) / 1e6);
    assay_core::experiment::RoleEstimate {
        calls,
        input_tokens: calls * input,
        output_tokens: calls * output,
        cost_usd: cost,
    }
}

/// The budget rule: a budget must be positive, and every model of the run must be priced
/// (else the cap cannot be enforced).
pub fn check_budget(budget: Option<f64>, e: &Estimate) -> Result<(), HarnessError> {
    if let Some(b) = budget {
        if !(b.is_finite() && b > 0.0) {
            return Err(HarnessError::Usage(
                "--budget: must be more than 0 USD".into(),
            ));
        }
        if e.cost_usd().is_none()
            || e.target.cost_usd.is_none()
            || e.grader.cost_usd.is_none()
            || (!e.proposer.is_zero() && e.proposer.cost_usd.is_none())
        {
            return Err(HarnessError::Usage(
                "--budget: the cost cannot be enforced: a model of the run has no known price (declare it in assay.toml, e.g. [providers.prices] \"openai/my-model\" = 0 for a free local model, or { input = 0.5, output = 1.5 } USD per million tokens)"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// The message for a model the provider does not have: the setting, the model, and the
/// closest names the provider listed.
fn missing_model(source: &str, model: &str, known: &[String]) -> String {
    let id = model.split_once('/').map_or(model, |(_, id)| id);
    let hint = match assay_core::text::closest(id, known.iter().map(String::as_str)) {
        Some(k) => format!(" (did you mean `{k}`?)"),
        None if !known.is_empty() => {
            let list: Vec<&str> = known.iter().take(8).map(String::as_str).collect();
            format!(" (it lists: {})", list.join(", "))
        }
        _ => String::new(),
    };
    format!("{source}: the provider has no model `{id}`{hint}")
}

fn preflight_error(source: &str, model: &str, e: &assay_providers::ProviderError) -> SessionError {
    let message = format!("{source}: cannot check model `{model}`: {e}");
    let refused = matches!(e.status(), Some(400 | 401 | 403 | 404 | 422));
    SessionError::Preflight {
        message,
        infrastructure: !refused,
    }
}

/// Whether `name` can name an experiment folder.
pub fn check_experiment_name(name: &str) -> Result<(), HarnessError> {
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(HarnessError::Usage(format!(
            "--experiment-name: `{name}` must be a plain folder name"
        )));
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), SessionError> {
    assay_project::results::write_replace(path, text.as_bytes()).map_err(|e| SessionError::Write {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Writes an experiment's Markdown and self-contained HTML reports and its Optuna journal
/// beside `report.json`, each atomically (replacing an older one).
pub fn write_reports(
    layout: &Layout,
    report: &ExperimentReport,
) -> Result<ExperimentFiles, SessionError> {
    let files = ExperimentFiles {
        dir: layout.dir.clone(),
        report_json: layout.dir.join(run::REPORT_JSON),
        report_md: layout.dir.join(run::REPORT_MD),
        report_html: layout.dir.join(REPORT_HTML),
        optuna_journal: layout.dir.join(tracking::OPTUNA_JOURNAL),
    };
    write(
        &files.report_md,
        &assay_report::experiment::markdown(report),
    )?;
    let view = crate::view::finished_view(layout, report.clone());
    write(
        &files.report_html,
        &assay_report::experiment::html(&view.page()),
    )?;
    write(&files.optuna_journal, &tracking::optuna_journal(report))?;
    Ok(files)
}

async fn track(
    mlflow: Option<&str>,
    layout: &Layout,
    report: &ExperimentReport,
    baseline: &BTreeMap<String, String>,
) -> Result<(), TrackingError> {
    let runs = tracking::runs_of(report, baseline);
    if let Some(uri) = mlflow {
        let client = tracking::Mlflow::new(uri)?;
        let ids = client.log(&report.name, &runs).await?;
        tracing::info!(uri, runs = ids.len(), "logged to MLflow");
    } else {
        let written = tracking::write_local(&layout.tracking(), &runs)?;
        tracing::info!(runs = written.len(), dir = %layout.tracking().display(), "tracked locally");
    }
    Ok(())
}

/// The run's options from the settings; the caller sets `trials`, `resume` and `racing`.
fn options_of(
    settings: &ProjectSettings,
    lists: &PromptLists,
    name: String,
    seed: u64,
    budget: Option<f64>,
    max_concurrency: Option<usize>,
    checker: Checker,
) -> Result<Options, SessionError> {
    let o = &settings.optimize;
    let agents: Vec<String> = lists.names().iter().map(|s| (*s).to_owned()).collect();
    Ok(Options {
        chain: ChainTarget::order(&agents, o.chain.as_deref()),
        checker,
        name,
        trials: 1,
        seed,
        resume: false,
        budget,
        racing: None,
        max_concurrency: max_concurrency.unwrap_or(o.max_concurrency),
        objectives: run::parse_directions(&o.directions).map_err(HarnessError::Usage)?,
        startup_trials: o.startup_trials,
        threshold: o.threshold,
        propose: None,
    })
}

/// The correctness rule of the project (`[optimize] correctness`, `units`) with every case of
/// `sets` checked against its own rule.
fn checker_of(settings: &ProjectSettings, sets: &[&CaseSet]) -> Result<Checker, SessionError> {
    let o = &settings.optimize;
    let file = settings.root.join(assay_project::settings::SETTINGS_FILE);
    let kind: Correctness = o.correctness.parse().map_err(|e: String| {
        HarnessError::Usage(format!("{}: [optimize] correctness: {e}", file.display()))
    })?;
    let mut checker = Checker::new(kind, &o.units)
        .map_err(|e| HarnessError::Usage(format!("{}: [optimize] units: {e}", file.display())))?;
    for set in sets {
        checker.admit(set)?;
    }
    Ok(checker)
}

/// Every agent the search varies has variants: an agent with only its production prompt is an
/// error naming the folder its variants belong in, unless `[optimize] fixed_agents` names it
/// (then a warning says it is held fixed) or proposal rounds may revise it.
fn check_agents(
    dir: &Path,
    settings: &ProjectSettings,
    lists: &PromptLists,
    propose: Option<&run::ProposeOptions>,
    observer: &Observer<'_>,
) -> Result<(), SessionError> {
    let o = &settings.optimize;
    let names = lists.names();
    for a in &o.fixed_agents {
        if !names.contains(&a.as_str()) {
            return Err(HarnessError::Usage(format!(
                "{}: [optimize] fixed_agents: unknown agent `{a}` (agents: {})",
                settings
                    .root
                    .join(assay_project::settings::SETTINGS_FILE)
                    .display(),
                names.join(", ")
            ))
            .into());
        }
    }
    for agent in &lists.agents {
        if agent.prompts.len() > 1 {
            continue;
        }
        let folder = dir.join("prompt_variations").join(&agent.agent);
        let proposed = propose.is_some_and(|p| p.agents.contains(&agent.agent));
        if o.fixed_agents.contains(&agent.agent) {
            (observer.warning)(&format!(
                "agent `{}` is held at its production prompt ([optimize] fixed_agents)",
                agent.agent
            ));
        } else if proposed {
            (observer.warning)(&format!(
                "agent `{}` has no variants in {}: only the proposal rounds can change its prompt",
                agent.agent,
                folder.display()
            ));
        } else {
            let state = if folder.is_dir() {
                "is empty"
            } else {
                "does not exist"
            };
            return Err(ExperimentError::data(
                &folder,
                format!(
                    "agent `{}` has no prompt variants: the folder {state}, so the search could never change its prompt. Add variants (<name>.txt), or list it in [optimize] fixed_agents to hold it at its production prompt on purpose",
                    agent.agent
                ),
            )
            .into());
        }
    }
    Ok(())
}

/// The proposal rounds' options: `rounds` (the flag, else the settings) above 0, the agents
/// checked against the prompt lists.
fn propose_options(
    settings: &ProjectSettings,
    lists: &PromptLists,
    rounds: Option<usize>,
) -> Result<Option<run::ProposeOptions>, SessionError> {
    let p = &settings.optimize.propose;
    let rounds = rounds.unwrap_or(p.rounds);
    if rounds == 0 {
        return Ok(None);
    }
    let names = lists.names();
    for a in p.agents.iter().chain(p.required.keys()) {
        if !names.contains(&a.as_str()) {
            return Err(HarnessError::Usage(format!(
                "[optimize.propose]: unknown agent `{a}` (agents: {})",
                names.join(", ")
            ))
            .into());
        }
    }
    let agents: Vec<String> = names
        .iter()
        .filter(|n| p.agents.is_empty() || p.agents.iter().any(|a| a == *n))
        .map(|n| (*n).to_owned())
        .collect();
    let selector = crate::propose::Selector::parse(&p.selector).ok_or_else(|| {
        HarnessError::Usage(format!(
            "[optimize.propose] selector: unknown selector `{}` (expected blame or all)",
            p.selector
        ))
    })?;
    Ok(Some(run::ProposeOptions {
        rounds,
        proposals_per_round: p.proposals_per_round,
        agents,
        selector,
        minibatch: p.minibatch,
        trials_per_round: p.trials_per_round,
        max_tokens: p.max_tokens,
        required: p.required.clone(),
        model: p
            .model
            .clone()
            .unwrap_or_else(|| settings.optimize.grader_model.clone()),
    }))
}

/// `assay optimize`: the three steps (or their continuation with `resume`), the reports, the
/// Optuna journal and the tracking runs, under the project lock.
pub async fn optimize(
    request: &OptimizeRequest,
    env: Env<'_>,
    observer: &Observer<'_>,
) -> Result<OptimizeDone, SessionError> {
    let dir = request.project.as_path();
    let settings = ProjectSettings::load(dir).map_err(ExperimentError::from)?;
    run::parse_directions(&settings.optimize.directions).map_err(HarnessError::Usage)?;
    let name = request.name.trim();
    check_experiment_name(name)?;
    // The experiment's own proposals join its lists during the run, not before (--resume).
    let lists = load_prompt_lists_for(dir, Some(name))?;
    let optimization = load_set(dir, Kind::Optimization, &request.optimization, observer)?;
    let evaluation = load_set(dir, Kind::Evaluation, &request.evaluation, observer)?;
    let propose = propose_options(&settings, &lists, request.propose_rounds)?;
    let checker = checker_of(&settings, &[&optimization.set, &evaluation.set])?;
    check_agents(dir, &settings, &lists, propose.as_ref(), observer)?;
    let layout = Layout::new(dir, name);
    let storage = request
        .storage
        .clone()
        .or_else(|| settings.optimize.storage.clone());
    if request.worker && storage.is_none() {
        return Err(HarnessError::Usage(
            "--worker joins a study shared in PostgreSQL: give --storage postgresql://… or set [optimize] storage".into(),
        )
        .into());
    }
    if storage.is_some() && !cfg!(feature = "postgres") {
        return Err(HarnessError::Usage(
            "optimize.storage: this assay was built without PostgreSQL support (the `postgres` feature)".into(),
        )
        .into());
    }
    // A shared study is coordinated by its storage (several workers may share a project
    // folder); a local one by the project lock.
    let _lock = match storage {
        Some(_) => None,
        None => Some(
            ProjectLock::acquire_for(dir, "optimize", Some(name), &request.command_line)
                .map_err(ExperimentError::from)?,
        ),
    };
    // A name already used is refused before anything is estimated or called.
    if storage.is_none() && !request.resume && layout.journal().exists() {
        return Err(run::name_taken(name, &layout.journal()).into());
    }
    let built = Built::new(
        dir,
        &settings,
        &lists,
        request.cache.as_deref(),
        env,
        propose.as_ref().map(|p| p.model.as_str()),
    )?;
    built.check_models(&settings).await?;
    // Proposals: each accepted one a trial, the trials after each round, and per proposal the
    // parent's traces and the proposal on the cases shown (two runs of `minibatch` cases).
    let extra_trials = propose.as_ref().map_or(0, run::ProposeOptions::max_trials);
    let shown = propose.as_ref().map(|p| CaseSet {
        cases: optimization
            .set
            .cases
            .iter()
            .take(p.minibatch)
            .cloned()
            .collect(),
        ..optimization.set.clone()
    });
    let mut runs = vec![
        (&optimization.set, (request.trials + extra_trials) as u64),
        (&evaluation.set, if propose.is_some() { 3 } else { 2 }),
    ];
    if let (Some(p), Some(shown)) = (&propose, &shown) {
        runs.push((shown, 2 * (p.rounds * p.proposals_in_round()) as u64));
    }
    let est = built
        .preflight(
            &settings,
            &lists,
            &runs,
            propose.as_ref().map(|p| (p, &optimization.set)),
            request.budget,
            observer,
        )
        .await?;
    let usage = || built.usage();
    let services = Services {
        target: built.target.clone(),
        grader: built.grader.clone(),
        proposer: built.proposer.clone(),
        usage: &usage,
        progress: observer.progress,
        estimate: Some(est),
        others_spent: crate::run::OthersSpent::default(),
    };
    let options = Options {
        trials: request.trials,
        resume: request.resume,
        propose,
        racing: request.racing.then_some(settings.optimize.racing_fraction),
        ..options_of(
            &settings,
            &lists,
            name.to_owned(),
            request.seed,
            request.budget,
            request.max_concurrency,
            checker,
        )?
    };
    let experiment = Experiment {
        project: dir,
        lists: &lists,
        optimization: &optimization,
        evaluation: &evaluation,
        options: &options,
        services: &services,
    };
    let report = match &storage {
        None => run::optimize(&experiment).await,
        Some(url) => {
            let shared = shared(&experiment, url, request.worker, &settings, env).await;
            match shared {
                Ok(Shared::Finished(report)) => Ok(*report),
                Ok(Shared::Joined(joined)) => {
                    built.target.close().await;
                    return Ok(OptimizeDone::Joined(joined));
                }
                Err(e) => Err(e),
            }
        }
    };
    built.target.close().await;
    let report = report?;
    let files = write_reports(&layout, &report)?;
    track(
        request.mlflow_uri.as_deref(),
        &layout,
        &report,
        &lists.baseline(),
    )
    .await?;
    Ok(OptimizeDone::Finished(Box::new(Optimized {
        report,
        files,
    })))
}

/// A shared study's outcome, whatever the features.
enum Shared {
    Finished(Box<ExperimentReport>),
    Joined(run::JoinedStudy),
}

#[cfg(feature = "postgres")]
async fn shared(
    experiment: &Experiment<'_>,
    url: &str,
    join: bool,
    settings: &ProjectSettings,
    env: Env<'_>,
) -> Result<Shared, run::RunError> {
    let storage = run::SharedStorage {
        url,
        env,
        join,
        heartbeat: Duration::from_secs_f64(settings.optimize.heartbeat_seconds),
    };
    Ok(match run::optimize_shared(experiment, &storage).await? {
        run::SharedOutcome::Finished(report) => Shared::Finished(report),
        run::SharedOutcome::Joined(joined) => Shared::Joined(joined),
    })
}

#[cfg(not(feature = "postgres"))]
async fn shared(
    _: &Experiment<'_>,
    _: &str,
    _: bool,
    _: &ProjectSettings,
    _: Env<'_>,
) -> Result<Shared, run::RunError> {
    Err(run::RunError::Usage(
        "optimize.storage: this assay was built without PostgreSQL support (the `postgres` feature)".into(),
    ))
}

/// `assay evaluate`: a prompt folder and the production prompts on the evaluation cases, and
/// their paired comparison, under the project lock.
pub async fn evaluate(
    request: &EvaluateRequest,
    env: Env<'_>,
    observer: &Observer<'_>,
) -> Result<Evaluated, SessionError> {
    let dir = request.project.as_path();
    let settings = ProjectSettings::load(dir).map_err(ExperimentError::from)?;
    let lists = load_prompt_lists(dir)?;
    // Like the case files: a relative folder that is not there from here is the project's.
    let prompts_dir = if request.prompts.is_absolute() || request.prompts.exists() {
        request.prompts.clone()
    } else {
        dir.join(&request.prompts)
    };
    let prompts = read_prompt_dir(&prompts_dir)?;
    let missing: Vec<&str> = lists
        .names()
        .into_iter()
        .filter(|a| !prompts.contains_key(*a))
        .collect();
    if !missing.is_empty() {
        return Err(HarnessError::Usage(format!(
            "{}: no prompt for {} (expected <agent>_system_prompt.txt for every agent in prompts/)",
            prompts_dir.display(),
            missing.join(", ")
        ))
        .into());
    }
    let evaluation = load_set(dir, Kind::Evaluation, &request.evaluation, observer)?;
    let checker = checker_of(&settings, &[&evaluation.set])?;
    let _lock = ProjectLock::acquire(dir, "evaluate", &request.command_line)
        .map_err(ExperimentError::from)?;
    let built = Built::new(dir, &settings, &lists, request.cache.as_deref(), env, None)?;
    built.check_models(&settings).await?;
    let est = built
        .preflight(
            &settings,
            &lists,
            &[(&evaluation.set, 2)],
            None,
            request.budget,
            observer,
        )
        .await?;
    let usage = || built.usage();
    let services = Services {
        target: built.target.clone(),
        grader: built.grader.clone(),
        proposer: None,
        usage: &usage,
        progress: observer.progress,
        estimate: Some(est),
        others_spent: crate::run::OthersSpent::default(),
    };
    let name = request.name.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("evaluate_{secs}")
    });
    let options = options_of(
        &settings,
        &lists,
        name,
        request.seed,
        request.budget,
        request.max_concurrency,
        checker,
    )?;
    let experiment = Experiment {
        project: dir,
        lists: &lists,
        optimization: &evaluation,
        evaluation: &evaluation,
        options: &options,
        services: &services,
    };
    let evaluated = run::evaluate(&experiment, &prompts).await;
    built.target.close().await;
    let (step, baseline, comparison) = evaluated?;
    Ok(Evaluated {
        evaluation: step,
        baseline,
        comparison,
        usage: usage(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_rule_needs_a_positive_budget_and_known_prices() {
        let priced = Estimate {
            target_runs: 1,
            target: assay_core::experiment::RoleEstimate {
                cost_usd: Some(0.1),
                ..Default::default()
            },
            grader: assay_core::experiment::RoleEstimate {
                cost_usd: Some(0.2),
                ..Default::default()
            },
            proposer: assay_core::experiment::RoleEstimate::default(),
        };
        assert!(check_budget(None, &Estimate::default()).is_ok());
        assert!(check_budget(Some(1.0), &priced).is_ok());
        let e = check_budget(Some(0.0), &priced).unwrap_err().to_string();
        assert!(e.contains("more than 0"), "{e}");
        let unpriced = Estimate {
            grader: assay_core::experiment::RoleEstimate::default(),
            ..priced
        };
        let e = check_budget(Some(1.0), &unpriced).unwrap_err().to_string();
        assert!(e.contains("no known price"), "{e}");
    }

    #[test]
    fn experiment_names_are_plain_folder_names() {
        assert!(check_experiment_name("exp_1").is_ok());
        for bad in ["", "../x", "a/b", ".hidden", "a\\b"] {
            assert!(check_experiment_name(bad).is_err(), "{bad}");
        }
    }
}
