//! A whole simulation: preflight, every (scenario, repeat) run — concurrently up to a limit —
//! and the aggregation into a [`SimReport`].
//!
//! One scenario run: a fresh scratch folder, the setup steps (commands marked `before_servers`
//! first), the stdio servers started (URL servers reached), the remaining setup steps, the
//! conversation, the expected-state checks, the teardown steps, the servers stopped, then the
//! judge. Provider, MCP and judge failures make the run an **error** (reported apart, never
//! averaged); the teardown runs whatever happened.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use assay_core::simulation::Ending;
use assay_core::simulation::{
    CheckResult, CheckStatus, CriterionScore, CriterionSpread, CriterionSummary, FailedBy,
    GateOutcome, JudgeConsistency, JudgeInfo, Judgement, SIM_SCHEMA_VERSION, ScenarioRun,
    ScenarioSummary, SimGate, SimReport, SimSummary, Verdict,
};
use assay_providers::ChatModel;
use futures_util::StreamExt as _;

use crate::checks;
use crate::conversation::{Conversation, now};
use crate::judge;
use crate::mcp::{self, McpConnection, McpError, Vars};
use crate::suite::{ServerKind, StepConfig, Suite};

/// How long a setup, teardown or check command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// An environment lookup (injectable for tests).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Called after each scenario run finishes (progress).
pub type RunCallback = Arc<dyn Fn(&ScenarioRun) + Send + Sync>;

pub use crate::conversation::ToolTap;

/// The three chat models of a simulation, already wrapped by the call wrapper.
#[derive(Clone)]
pub struct SimModels {
    /// The model under test.
    pub assistant: Arc<dyn ChatModel>,
    /// The simulated user.
    pub simulator: Arc<dyn ChatModel>,
    /// The judge.
    pub judge: Arc<dyn ChatModel>,
    /// The model under test's price, when known (`ProviderCalls::price`): each assistant
    /// turn's cost in the transcript. `None` records no cost, never a zero one.
    pub assistant_price: Option<assay_providers::Price>,
    /// The simulated user's price, when known: each of its turns' cost.
    pub simulator_price: Option<assay_providers::Price>,
}

/// How to run.
#[derive(Clone)]
pub struct SimOptions {
    /// Runs per scenario.
    pub repeat: u32,
    /// Model calls in flight at once. The limit itself is enforced by the call wrapper the
    /// models share (see `ProviderCalls::chat_group` in assay-project); it is recorded here for
    /// the report.
    pub concurrency: usize,
    /// Conversations open at once, each with its own servers. More than `concurrency`, so
    /// that while one conversation's tools run or its next call waits, another's call fills the
    /// slot: the schedule is then of calls, not of whole runs.
    pub runs_in_flight: usize,
    /// This simulation's scratch folder (see [`crate::scratch::RunScratch`]): the preflight and
    /// one sub-folder per scenario run go in it.
    pub work_root: PathBuf,
    /// Keep scratch folders after the run.
    pub keep_workdirs: bool,
    /// Times the judge scores each transcript (criteria in another order and another seed each
    /// time); more than 1 measures the judge's consistency and makes runs whose samples
    /// disagree `uncertain`.
    pub judge_samples: u32,
    /// The environment (for `${VAR}` and `PATH`).
    pub env: EnvLookup,
    /// Called after each scenario run finishes (progress).
    pub on_finished: Option<RunCallback>,
    /// When the preflight runs beside the runs' setup ([`crate::session`]): the runs start
    /// their conversations (no model call before) and finish (no verdict, no file before) only
    /// once it holds the report's files, which is when the preflight passed and the report's
    /// stamp was taken; each run's transcript is then written there as its conversation ends,
    /// beside the judge's calls. `None`: no wait, no transcript written.
    pub ready: Option<Ready>,
    /// Rewrites each tool result before the model under test sees it (`None`: as the server
    /// answered).
    pub tool_tap: Option<ToolTap>,
    /// Whether the judge reads the transcripts (`assay redteam` decides by evidence alone and
    /// runs none: the runs then have their checks and no judgement).
    pub judge: bool,
}

/// What the runs wait for: `None` until the preflight passed, then the report's files (a
/// preflight that fails closes it, and the runs are dropped).
pub type Ready = tokio::sync::watch::Receiver<Option<Arc<crate::report::ReportFiles>>>;

/// Waits until the preflight passed (at once without a gate): the report's files, or an error
/// when the preflight failed (the simulation is then being dropped).
async fn preflight_passed(
    options: &SimOptions,
) -> Result<Option<Arc<crate::report::ReportFiles>>, String> {
    let Some(ready) = &options.ready else {
        return Ok(None);
    };
    let mut ready = ready.clone();
    let files = ready
        .wait_for(Option::is_some)
        .await
        .map_err(|_| "the preflight failed".to_owned())?;
    Ok(files.clone())
}

/// Preflight failures.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// Bad input (exit 2): an unknown scenario, a server program that does not exist, a tool
    /// that no server offers.
    #[error("{0}")]
    Input(String),
    /// A server that exists but cannot be started or reached (exit 3).
    #[error("{0}")]
    Server(McpError),
}

/// The scenarios `options` selects, in id order; an unknown id is bad input.
pub fn select<'s>(
    suite: &'s Suite,
    wanted: Option<&[String]>,
) -> Result<Vec<&'s crate::suite::Scenario>, PreflightError> {
    match wanted {
        None => Ok(suite.scenarios.iter().collect()),
        Some(ids) => ids
            .iter()
            .map(|id| {
                suite.scenario(id).ok_or_else(|| {
                    PreflightError::Input(format!(
                        "--scenarios: unknown scenario `{id}` (known: {})",
                        suite
                            .scenarios
                            .iter()
                            .map(|s| s.config.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
            })
            .collect(),
    }
}

fn vars_for(suite: &Suite, workdir: &Path, scenario: &str) -> Vars {
    Vars {
        workdir: workdir.to_owned(),
        sim: std::path::absolute(&suite.sim_dir).unwrap_or_else(|_| suite.sim_dir.clone()),
        project: std::path::absolute(&suite.project).unwrap_or_else(|_| suite.project.clone()),
        fixture: suite.fixture.as_ref().map(|(p, _)| p.clone()),
        scenario: scenario.to_owned(),
    }
}

fn expand_argv(argv: &[String], vars: &Vars, env: &EnvLookup) -> Vec<String> {
    argv.iter().map(|a| vars.expand(a, &**env)).collect()
}

/// Checks, before any model call, that every stdio server's program exists (exit 2 if not),
/// then starts every server once in a scratch folder (after the `before_servers` setup
/// commands) and checks that the tools named by setup steps and expected-state checks exist.
pub async fn preflight(suite: &Suite, options: &SimOptions) -> Result<(), PreflightError> {
    let scratch = options.work_root.join("preflight");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)
        .map_err(|e| PreflightError::Input(format!("cannot create {}: {e}", scratch.display())))?;
    let scratch = std::path::absolute(&scratch).unwrap_or(scratch);
    let vars = vars_for(suite, &scratch, "preflight");
    let env = &options.env;
    for server in &suite.servers {
        if let ServerKind::Stdio { command, .. } = &server.kind {
            let program = vars.expand(&command[0], &**env);
            if mcp::resolve_program(&program, &scratch, env("PATH").as_deref()).is_none() {
                return Err(PreflightError::Input(format!(
                    "{}: mcp_servers `{}`: cannot find the program `{program}` (not a file, and not on PATH); build or install it, or fix `command`",
                    suite.sim_dir.join("suite.yaml").display(),
                    server.name
                )));
            }
        }
    }
    let result = async {
        for step in suite.config.setup.iter().filter(|s| s.before_servers) {
            run_command_step(step, &vars, env, &scratch)
                .await
                .map_err(|e| PreflightError::Input(format!("setup: {e}")))?;
        }
        let mut connections = Vec::new();
        for server in &suite.servers {
            match McpConnection::start(server, &vars, &**env).await {
                Ok(c) => connections.push(c),
                Err(e) => {
                    for c in connections {
                        c.close().await;
                    }
                    return Err(PreflightError::Server(e));
                }
            }
        }
        let mut missing = Vec::new();
        let tool_steps = suite
            .config
            .setup
            .iter()
            .chain(&suite.config.teardown)
            .filter_map(|s| s.tool.as_ref())
            .map(|t| ("suite.yaml", t));
        let check_tools = suite.scenarios.iter().flat_map(|s| {
            s.config
                .expected_state
                .iter()
                .filter_map(|c| c.tool.as_ref())
                .map(move |t| (s.path.file_name().and_then(|n| n.to_str()).unwrap_or(""), t))
        });
        missing.extend(crate::trajectory::unknown_tools(
            suite,
            &mcp::offered_tools(&connections),
        ));
        for (file, tool) in tool_steps.chain(check_tools) {
            let known = connections
                .iter()
                .find(|c| c.name() == tool.server)
                .is_some_and(|c| c.tools().iter().any(|t| t.name == tool.name));
            if !known {
                missing.push(format!(
                    "{file}: server `{}` has no tool `{}`",
                    tool.server, tool.name
                ));
            }
        }
        for c in connections {
            c.close().await;
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(PreflightError::Input(missing.join("; ")))
        }
    }
    .await;
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

async fn run_command_step(
    step: &StepConfig,
    vars: &Vars,
    env: &EnvLookup,
    cwd: &Path,
) -> Result<String, String> {
    let Some(argv) = &step.command else {
        return Ok(String::new());
    };
    let argv = expand_argv(argv, vars, env);
    let resolved = mcp::resolve_program(&argv[0], cwd, env("PATH").as_deref())
        .map_or_else(|| argv[0].clone(), |p| p.display().to_string());
    let mut full = vec![resolved];
    full.extend_from_slice(&argv[1..]);
    mcp::run_command(&full, cwd, &BTreeMap::new(), COMMAND_TIMEOUT)
        .await
        .map(|o| o.stdout)
}

async fn run_tool_step(
    step: &StepConfig,
    vars: &Vars,
    env: &EnvLookup,
    connections: &[McpConnection],
) -> Result<String, String> {
    let Some(tool) = &step.tool else {
        return Ok(String::new());
    };
    let connection = connections
        .iter()
        .find(|c| c.name() == tool.server)
        .ok_or_else(|| format!("unknown server `{}`", tool.server))?;
    let arguments = match vars.expand_json(&tool.arguments, &**env) {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let outcome = connection
        .call_tool(&tool.name, arguments)
        .await
        .map_err(|e| e.to_string())?;
    if outcome.is_error {
        Err(format!(
            "tool `{}` reported an error: {}",
            tool.name, outcome.text
        ))
    } else {
        Ok(outcome.text)
    }
}

/// Runs the simulation and aggregates it. Never fails: every problem is on a run.
pub async fn simulate(
    suite: &Suite,
    models: &SimModels,
    options: &SimOptions,
    selected: &[&crate::suite::Scenario],
) -> SimReport {
    let started = Instant::now();
    // Longest first (by `max_turns`, the best estimate before running), so that short runs fill
    // the last slots and the concurrent schedule ends sooner; the report is sorted afterwards.
    let mut jobs: Vec<(&crate::suite::Scenario, u32)> = selected
        .iter()
        .flat_map(|s| (1..=options.repeat.max(1)).map(move |k| (*s, k)))
        .collect();
    jobs.sort_by_key(|(s, k)| (std::cmp::Reverse(s.config.max_turns), *k));
    // Setting runs up (setup commands, starting servers) is CPU work; the conversations are
    // mostly waiting on the model. Set up a few runs at a time, in order, so that the first
    // ones start talking while the others are set up, rather than all of them at once and
    // every conversation late.
    let setups = tokio::sync::Semaphore::new(setup_slots());
    let setups = &setups;
    let runs: Vec<ScenarioRun> = futures_util::stream::iter(jobs)
        .map(|(scenario, repeat)| async move {
            let span = conversation_span(&scenario.config.id, repeat);
            let run = assay_telemetry::in_span(
                &span,
                run_one(suite, models, options, scenario, repeat, setups),
            )
            .await;
            finish_conversation_span(&span, &run);
            if let Some(callback) = &options.on_finished {
                callback(&run);
            }
            run
        })
        .buffer_unordered(options.runs_in_flight.max(1))
        .collect()
        .await;
    report_of(suite, models, options, runs, started.elapsed())
}

/// How many runs are set up at once: one per core, and at least 2 (a setup also waits on its
/// processes).
fn setup_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// The span of one conversation (a scenario's trial): its model and tool calls go under it.
fn conversation_span(scenario: &str, repeat: u32) -> assay_telemetry::Span {
    use opentelemetry::KeyValue;
    assay_telemetry::Span::start(
        format!("conversation {scenario} #{repeat}"),
        opentelemetry::trace::SpanKind::Internal,
        || {
            vec![
                KeyValue::new(assay_telemetry::genai::OPERATION, "invoke_agent"),
                KeyValue::new(
                    assay_telemetry::genai::CONVERSATION_ID,
                    format!("{scenario}#{repeat}"),
                ),
                KeyValue::new("assay.scenario", scenario.to_owned()),
                KeyValue::new("assay.repeat", i64::from(repeat)),
            ]
        },
    )
}

/// The run's verdicts as evaluation events on its conversation span: each check, each
/// criterion the judge scored, and the run's verdict; then the span ends.
fn finish_conversation_span(span: &assay_telemetry::Span, run: &ScenarioRun) {
    use assay_telemetry::Evaluation;
    if span.is_recording() {
        for check in &run.checks {
            let name = format!("check: {}", check.name);
            let details = check.details.join("; ");
            span.evaluation(&Evaluation {
                name: &name,
                score: None,
                label: Some(&label(&check.status)),
                explanation: Some(&details),
            });
        }
        if let Some(judgement) = &run.judgement {
            for c in &judgement.scores {
                span.evaluation(&Evaluation {
                    name: &c.id,
                    score: Some(c.score),
                    label: None,
                    explanation: Some(&c.reasoning),
                });
            }
        }
        let verdict = label(&run.verdict);
        let explanation = run.error.clone().or_else(|| run.reason.clone());
        span.evaluation(&Evaluation {
            name: "assay.simulation",
            score: run.overall,
            label: Some(&verdict),
            explanation: explanation.as_deref(),
        });
        span.set("assay.verdict", verdict.clone());
        if let Some(error) = &run.error {
            span.fail("run_error", error.clone());
        }
    }
    span.end();
}

/// The serialised name of an enum (`pass`, `failed`, …).
fn label<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

async fn run_one(
    suite: &Suite,
    models: &SimModels,
    options: &SimOptions,
    scenario: &crate::suite::Scenario,
    repeat: u32,
    setups: &tokio::sync::Semaphore,
) -> ScenarioRun {
    let started = Instant::now();
    let id = &scenario.config.id;
    let mut run = ScenarioRun {
        scenario_id: id.clone(),
        scenario_name: scenario.config.name.clone(),
        repeat,
        verdict: Verdict::Error,
        failed_by: None,
        judge_verdict: None,
        reason: None,
        overall: None,
        judgement: None,
        judge_samples: Vec::new(),
        checks: Vec::new(),
        error: None,
        warnings: Vec::new(),
        transcript: None,
        duration_ms: 0,
    };
    let workdir = options.work_root.join(format!("{id}-{repeat}"));
    if let Err(e) = std::fs::create_dir_all(&workdir) {
        run.error = Some(format!("cannot create {}: {e}", workdir.display()));
        // Not decided before the preflight passed (see below).
        let _ = preflight_passed(options).await;
        return run;
    }
    let workdir = std::path::absolute(&workdir).unwrap_or(workdir);
    let vars = vars_for(suite, &workdir, id);
    let env = &options.env;
    let mut connections: Vec<McpConnection> = Vec::new();
    // The transcript's file, written off the async path while the checks and the judge run.
    let mut writing: Option<tokio::task::JoinHandle<()>> = None;

    let outcome: Result<(), String> = async {
        // A slot to set up in (the semaphore is never closed; an error below frees it).
        let slot = setups.acquire().await.ok();
        for step in suite.config.setup.iter().filter(|s| s.before_servers) {
            run_command_step(step, &vars, env, &workdir)
                .await
                .map_err(|e| format!("setup: {e}"))?;
        }
        for server in &suite.servers {
            connections.push(
                McpConnection::start(server, &vars, &**env)
                    .await
                    .map_err(|e| e.to_string())?,
            );
        }
        for step in suite.config.setup.iter().filter(|s| !s.before_servers) {
            if step.command.is_some() {
                run_command_step(step, &vars, env, &workdir).await
            } else {
                run_tool_step(step, &vars, env, &connections).await
            }
            .map_err(|e| format!("setup: {e}"))?;
        }
        drop(slot);
        // The preflight (run beside this setup) must pass before the first model call.
        let files = preflight_passed(options).await?;
        let tools = mcp::offered_tools(&connections);
        let transcript = Conversation {
            assistant: &models.assistant,
            simulator: &models.simulator,
            system_prompt: &suite.system_prompt,
            scenario,
            repeat,
            stop_token: &suite.config.stop_token,
            max_tool_rounds: suite.config.max_tool_rounds,
            connections: &connections,
            tools: &tools,
            assistant_price: models.assistant_price,
            simulator_price: models.simulator_price,
            tool_tap: options.tool_tap.as_ref(),
        }
        .run()
        .await;
        let failed = transcript.ended_by == Ending::Error;
        let error = transcript.error.clone();
        if let Some(files) = files {
            let (id, written) = (id.clone(), transcript.clone());
            writing = Some(tokio::task::spawn_blocking(move || {
                files.write_transcript(&id, repeat, &written);
            }));
        }
        run.transcript = Some(transcript);
        if failed {
            return Err(error.unwrap_or_else(|| "the conversation failed".into()));
        }
        for check in &scenario.config.expected_state {
            let source = if let Some(tool) = &check.tool {
                let step = StepConfig {
                    command: None,
                    tool: Some(tool.clone()),
                    resource: None,
                    before_servers: false,
                };
                run_tool_step(&step, &vars, env, &connections).await
            } else if let Some(resource) = &check.resource {
                match connections.iter().find(|c| c.name() == resource.server) {
                    Some(c) => c
                        .read_resource(&vars.expand(&resource.uri, &**env))
                        .await
                        .map_err(|e| e.to_string()),
                    None => Err(format!("unknown server `{}`", resource.server)),
                }
            } else {
                let step = StepConfig {
                    command: check.command.clone(),
                    tool: None,
                    resource: None,
                    before_servers: false,
                };
                run_command_step(&step, &vars, env, &workdir).await
            };
            run.checks.push(checks::evaluate(check, source));
        }
        if let (Some(rules), Some(transcript)) = (&scenario.config.trajectory, &run.transcript) {
            run.checks
                .extend(crate::trajectory::evaluate(rules, transcript));
        }
        if let (Some(set), Some(transcript)) = (&scenario.assertions, &run.transcript) {
            run.checks
                .extend(crate::assertions::evaluate(set, transcript));
        }
        Ok(())
    }
    .await;

    for step in &suite.config.teardown {
        let result = if step.command.is_some() {
            run_command_step(step, &vars, env, &workdir).await
        } else {
            run_tool_step(step, &vars, env, &connections).await
        };
        if let Err(e) = result {
            tracing::warn!(scenario = %id, repeat, error = %e, "teardown step failed");
            run.warnings.push(format!("teardown: {e}"));
        }
    }
    // The judge needs no server: stop them (and clean up) while it reads the transcript.
    let keep = options.keep_workdirs;
    let cleanup = async move {
        for c in connections {
            c.close().await;
        }
        if !keep {
            let _ = std::fs::remove_dir_all(&workdir);
        }
    };
    let judging = async {
        match (outcome, &run.transcript) {
            (Err(e), _) => Err(e),
            (Ok(()), None) => Err("no conversation took place".into()),
            (Ok(()), Some(_)) if !options.judge => Err("not judged".into()),
            (Ok(()), Some(transcript)) => {
                let samples = options.judge_samples.max(1);
                let asks = (0..samples).map(|sample| {
                    judge::judge(
                        models.judge.as_ref(),
                        suite.criteria(),
                        scenario,
                        &suite.system_prompt,
                        suite.fixture.as_ref().map(|(_, v)| v),
                        transcript,
                        &run.checks,
                        judge::Sample::new(sample, samples),
                    )
                });
                futures_util::future::join_all(asks)
                    .await
                    .into_iter()
                    .map(|r| r.map(|(judgement, _)| judgement))
                    .collect::<Result<Vec<Judgement>, _>>()
                    .map_err(|e| format!("judge: {e}"))
            }
        }
    };
    let ((), judged) = tokio::join!(cleanup, judging);
    // A run whose setup failed did not wait before its conversation: it waits here, so that
    // no run is decided before the preflight passed.
    if let Err(e) = preflight_passed(options).await {
        run.error = Some(e);
        return run;
    }
    if let Some(writing) = writing {
        // A failure is kept by the report's files and reported when they are finished.
        let _ = writing.await;
    }
    let decision = decide(&run.checks, judged, suite.config.pass_threshold);
    run.verdict = decision.verdict.unwrap_or(Verdict::Error);
    run.failed_by = decision.failed_by;
    run.judge_verdict = decision.judge_verdict;
    run.reason = decision.reason;
    if let Some(error) = decision.error {
        run.error = Some(error);
    }
    if let Some(warning) = decision.warning {
        run.warnings.push(warning);
    }
    run.overall = decision.judgement.as_ref().map(|j| j.overall);
    run.judgement = decision.judgement;
    run.judge_samples = decision.samples;
    run.duration_ms = started.elapsed().as_millis() as u64;
    run
}

/// A run's verdict, decided from its checks and its judge samples.
#[derive(Debug, Default)]
struct Decision {
    verdict: Option<Verdict>,
    failed_by: Option<FailedBy>,
    judge_verdict: Option<Verdict>,
    reason: Option<String>,
    error: Option<String>,
    warning: Option<String>,
    judgement: Option<Judgement>,
    samples: Vec<Judgement>,
}

/// The judge's verdict on one sample.
fn sample_verdict(j: &Judgement, threshold: f64) -> Verdict {
    if !j.simulator_kept_persona {
        Verdict::SimulatorFault
    } else if j.overall >= threshold {
        Verdict::Pass
    } else {
        Verdict::Fail
    }
}

/// Several judge samples as one judgement: each criterion's mean score, the mean overall, the
/// persona verdict of the majority, the first sample's texts, every call counted.
fn combine(samples: &[Judgement]) -> Option<Judgement> {
    let first = samples.first()?;
    if samples.len() == 1 {
        return Some(first.clone());
    }
    let n = samples.len() as f64;
    let scores = first
        .scores
        .iter()
        .map(|c| {
            let mean = samples
                .iter()
                .filter_map(|s| s.scores.iter().find(|x| x.id == c.id))
                .map(|x| x.score)
                .sum::<f64>()
                / n;
            CriterionScore {
                score: mean,
                ..c.clone()
            }
        })
        .collect();
    let kept = samples.iter().filter(|s| s.simulator_kept_persona).count();
    Some(Judgement {
        scores,
        overall: samples.iter().map(|s| s.overall).sum::<f64>() / n,
        simulator_kept_persona: 2 * kept >= samples.len(),
        simulator_issue: samples
            .iter()
            .find(|s| !s.simulator_kept_persona)
            .map_or_else(String::new, |s| s.simulator_issue.clone()),
        summary: first.summary.clone(),
        calls: samples.iter().map(|s| s.calls).sum(),
    })
}

/// Evidence first: a required check that failed fails the run whatever the judge said; a
/// required check that could not be read makes the run an error; otherwise the judge decides,
/// and a judge whose samples disagree on pass or fail leaves the run uncertain.
fn decide(
    checks: &[CheckResult],
    judged: Result<Vec<Judgement>, String>,
    threshold: f64,
) -> Decision {
    let failed: Vec<&CheckResult> = checks
        .iter()
        .filter(|c| c.required() && c.status == CheckStatus::Failed)
        .collect();
    let unreadable: Vec<&CheckResult> = checks
        .iter()
        .filter(|c| c.required() && c.status == CheckStatus::Error)
        .collect();
    let (samples, judge_error) = match judged {
        Ok(samples) => (samples, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let judgement = combine(&samples);
    let verdicts: Vec<Verdict> = samples
        .iter()
        .map(|s| sample_verdict(s, threshold))
        .collect();
    let judge_verdict = judgement.as_ref().map(|j| {
        let passes = verdicts.iter().filter(|v| **v == Verdict::Pass).count();
        let fails = verdicts.iter().filter(|v| **v == Verdict::Fail).count();
        if passes > 0 && fails > 0 {
            Verdict::Uncertain
        } else {
            sample_verdict(j, threshold)
        }
    });
    let mut d = Decision {
        judge_verdict,
        samples: if samples.len() > 1 {
            samples.clone()
        } else {
            Vec::new()
        },
        judgement,
        ..Decision::default()
    };
    let names = |list: &[&CheckResult]| {
        list.iter()
            .map(|c| {
                format!(
                    "`{}`{}",
                    c.name,
                    c.details
                        .first()
                        .map_or_else(String::new, |d| format!(" ({d})"))
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !failed.is_empty() {
        d.verdict = Some(Verdict::Fail);
        d.failed_by = Some(FailedBy::Check);
        d.reason = Some(format!("failed check {}", names(&failed)));
        if let Some(e) = judge_error {
            d.warning = Some(format!(
                "the judge could not score the run ({e}); the failed check decided"
            ));
        }
        return d;
    }
    if !unreadable.is_empty() {
        d.verdict = Some(Verdict::Error);
        d.error = Some(format!(
            "expected_state: check {} could not be evaluated",
            names(&unreadable)
        ));
        return d;
    }
    if let Some(e) = judge_error {
        d.verdict = Some(Verdict::Error);
        d.error = Some(e);
        return d;
    }
    d.verdict = d.judge_verdict;
    match d.verdict {
        Some(Verdict::Fail) => {
            d.failed_by = Some(FailedBy::Judge);
            d.reason = d
                .judgement
                .as_ref()
                .map(|j| format!("judged {:.2} < pass threshold {threshold:.1}", j.overall));
        }
        Some(Verdict::Uncertain) => {
            let passes = verdicts.iter().filter(|v| **v == Verdict::Pass).count();
            d.reason = Some(format!(
                "the judge passed {passes} of {} samples",
                verdicts.len()
            ));
        }
        _ => {}
    }
    d
}

fn mean_sd(values: &[f64]) -> (Option<f64>, Option<f64>) {
    if values.is_empty() {
        return (None, None);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (Some(mean), Some(var.sqrt()))
}

fn min_of(values: &[f64]) -> Option<f64> {
    values.iter().copied().reduce(f64::min)
}

/// The report of a finished simulation: its settings from the suite, the models and the
/// options, then every statistic from the runs ([`aggregate`]).
fn report_of(
    suite: &Suite,
    models: &SimModels,
    options: &SimOptions,
    runs: Vec<ScenarioRun>,
    elapsed: Duration,
) -> SimReport {
    let total_weight: f64 = suite.criteria().iter().map(|c| c.weight).sum();
    let mut report = SimReport {
        schema_version: SIM_SCHEMA_VERSION,
        suite: suite.config.name.clone(),
        model: models.assistant.model().to_owned(),
        simulator_model: models.simulator.model().to_owned(),
        evaluator_model: models.judge.model().to_owned(),
        generated_at: now(),
        pass_threshold: suite.config.pass_threshold,
        repeat: options.repeat.max(1),
        concurrency: options.concurrency.max(1),
        runs_in_flight: options.runs_in_flight.max(1),
        duration_ms: elapsed.as_millis() as u64,
        summary: SimSummary::default(),
        gate: None,
        scenarios: Vec::new(),
        criteria: suite
            .criteria()
            .iter()
            .map(|c| CriterionSummary {
                id: c.id.clone(),
                name: c.display_name().to_owned(),
                weight: c.weight / total_weight,
                mean: None,
                min: None,
            })
            .collect(),
        runs,
        usage: Vec::new(),
        judge: Some(JudgeInfo {
            version: judge::version(suite),
            samples: options.judge_samples.max(1),
            consistency: None,
        }),
        baseline: None,
        rate_limits: Vec::new(),
        shard: None,
        merged: None,
    };
    aggregate(&mut report, suite.config.gate.as_ref());
    report
}

/// Computes every statistic of `report` from its runs and its settings, as the simulator does
/// after running and [`crate::merge`] does after merging shards (one function, so the two
/// agree to the bit): the runs sorted by scenario id then repeat; per scenario the runs, the
/// scored, the passed, mean, spread, extremes and pass^k; each criterion's mean and lowest
/// score (the criteria's ids, names and normalised weights are the report's); the totals, the
/// pass rate and its Wilson interval; the gate (`gate`: the suite's, `None` for the default
/// rule); and, with several judge samples, the judge's consistency (its version and samples
/// are the report's). Settings, usage, rate limits and the baseline comparison are left as
/// they are.
pub fn aggregate(report: &mut SimReport, gate: Option<&SimGate>) {
    report
        .runs
        .sort_by(|a, b| (&a.scenario_id, a.repeat).cmp(&(&b.scenario_id, b.repeat)));
    let runs = &report.runs;
    let mut scenarios = Vec::new();
    let mut ids: Vec<&str> = runs.iter().map(|r| r.scenario_id.as_str()).collect();
    ids.dedup();
    for id in ids {
        let of: Vec<&ScenarioRun> = runs.iter().filter(|r| r.scenario_id == id).collect();
        let scores: Vec<f64> = of
            .iter()
            .filter(|r| r.verdict.is_scored())
            .filter_map(|r| r.overall)
            .collect();
        let (mean, stddev) = mean_sd(&scores);
        let passed = of.iter().filter(|r| r.verdict == Verdict::Pass).count() as u32;
        scenarios.push(ScenarioSummary {
            id: id.to_owned(),
            name: of[0].scenario_name.clone(),
            runs: of.len() as u32,
            scored: scores.len() as u32,
            passed,
            mean,
            stddev,
            min: min_of(&scores),
            max: scores.iter().copied().reduce(f64::max),
            pass_all: (scores.len() == of.len()).then_some(passed as usize == of.len()),
        });
    }
    let scored: Vec<&ScenarioRun> = runs.iter().filter(|r| r.verdict.is_scored()).collect();
    let criteria = report
        .criteria
        .iter()
        .map(|c| {
            let values: Vec<f64> = scored
                .iter()
                .filter_map(|r| r.judgement.as_ref())
                .filter_map(|j| j.scores.iter().find(|s| s.id == c.id))
                .map(|s| s.score)
                .collect();
            CriterionSummary {
                mean: mean_sd(&values).0,
                min: min_of(&values),
                ..c.clone()
            }
        })
        .collect();
    let count = |v: Verdict| runs.iter().filter(|r| r.verdict == v).count() as u32;
    let overall: Vec<f64> = scored.iter().filter_map(|r| r.overall).collect();
    let (passed, failed) = (count(Verdict::Pass), count(Verdict::Fail));
    let all_scored: Vec<&ScenarioSummary> =
        scenarios.iter().filter(|s| s.pass_all.is_some()).collect();
    let failed_by = |by: FailedBy| {
        runs.iter()
            .filter(|r| r.verdict == Verdict::Fail && r.failed_by == Some(by))
            .count() as u32
    };
    let summary = SimSummary {
        runs: runs.len() as u32,
        passed,
        failed,
        simulator_fault: count(Verdict::SimulatorFault),
        errors: count(Verdict::Error),
        failed_by_check: failed_by(FailedBy::Check),
        failed_by_judge: failed_by(FailedBy::Judge),
        judge_passed_failed_check: runs
            .iter()
            .filter(|r| {
                r.failed_by == Some(FailedBy::Check) && r.judge_verdict == Some(Verdict::Pass)
            })
            .count() as u32,
        uncertain: count(Verdict::Uncertain),
        mean_overall: mean_sd(&overall).0,
        pass_rate: (passed + failed > 0).then(|| f64::from(passed) / f64::from(passed + failed)),
        pass_rate_interval: assay_core::stats::wilson(
            passed as usize,
            (passed + failed) as usize,
            0.05,
        )
        .map(|i| [i.low, i.high]),
        pass_all_scenarios: (!all_scored.is_empty()).then(|| {
            (
                all_scored
                    .iter()
                    .filter(|s| s.pass_all == Some(true))
                    .count() as u32,
                all_scored.len() as u32,
            )
        }),
    };
    let outcome = gate_outcome(gate, &summary, runs);
    let consistency = report
        .judge
        .as_ref()
        .and_then(|j| judge_consistency(j.samples, &report.criteria, runs));
    report.summary = summary;
    report.gate = Some(outcome);
    report.scenarios = scenarios;
    report.criteria = criteria;
    if let Some(judge) = &mut report.judge {
        judge.consistency = consistency;
    }
}

/// The suite's gate, or without one the default rule: every scored run passes. Failed runs
/// are allowed only by a gate that says how many may fail (`min_pass_rate`).
fn gate_outcome(
    config: Option<&SimGate>,
    summary: &SimSummary,
    runs: &[ScenarioRun],
) -> GateOutcome {
    let mut reasons = Vec::new();
    let allows_failures = config.is_some_and(|c| c.min_pass_rate.is_some());
    if summary.failed > 0 && !allows_failures {
        let failing: Vec<String> = runs
            .iter()
            .filter(|r| r.verdict == Verdict::Fail)
            .map(|r| format!("{} #{}", r.scenario_id, r.repeat))
            .collect();
        let shown = failing
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        let more = failing.len().saturating_sub(5);
        reasons.push(format!(
            "{} scored run(s) failed ({shown}{}){}",
            summary.failed,
            if more > 0 {
                format!(", and {more} more")
            } else {
                String::new()
            },
            if config.is_some() {
                "; only `gate.min_pass_rate` allows failing runs"
            } else {
                "; a suite without a `gate:` allows none"
            }
        ));
    }
    if let Some(config) = config {
        if let Some(min) = config.min_mean_overall {
            match summary.mean_overall {
                Some(m) if m >= min => {}
                Some(m) => reasons.push(format!("mean overall {m:.2} < {min}")),
                None => reasons.push("no scenario run was scored".to_owned()),
            }
        }
        if let Some(min) = config.min_pass_rate {
            match summary.pass_rate {
                Some(r) if r >= min => {}
                Some(r) => {
                    reasons.push(format!("pass rate {:.0}% < {:.0}%", r * 100.0, min * 100.0));
                }
                None => reasons.push("no scenario run was scored".to_owned()),
            }
        }
    }
    reasons.dedup();
    GateOutcome {
        config: config.cloned().unwrap_or_default(),
        passed: reasons.is_empty(),
        implicit: config.is_none(),
        reasons,
    }
}

/// With several judge samples, how consistent the judge was over `runs` (each criterion of
/// `criteria`, in order).
fn judge_consistency(
    samples: u32,
    criteria: &[CriterionSummary],
    runs: &[ScenarioRun],
) -> Option<JudgeConsistency> {
    (samples > 1).then(|| {
        let sampled: Vec<&ScenarioRun> =
            runs.iter().filter(|r| r.judge_samples.len() > 1).collect();
        let flipped = sampled
            .iter()
            .filter(|r| r.judge_verdict == Some(Verdict::Uncertain))
            .count() as u32;
        let sd = |values: &[f64]| mean_sd(values).1.unwrap_or(0.0);
        let criteria = criteria
            .iter()
            .map(|c| {
                let per_run: Vec<(f64, bool)> = sampled
                    .iter()
                    .map(|r| {
                        let scores: Vec<f64> = r
                            .judge_samples
                            .iter()
                            .filter_map(|j| j.scores.iter().find(|s| s.id == c.id))
                            .map(|s| s.score)
                            .collect();
                        let varied = scores.windows(2).any(|w| w[0] != w[1]);
                        (sd(&scores), varied)
                    })
                    .collect();
                let sds: Vec<f64> = per_run.iter().map(|(s, _)| *s).collect();
                CriterionSpread {
                    id: c.id.clone(),
                    mean_sd: mean_sd(&sds).0.unwrap_or(0.0),
                    max_sd: sds.iter().copied().fold(0.0, f64::max),
                    varied_share: if per_run.is_empty() {
                        0.0
                    } else {
                        per_run.iter().filter(|(_, v)| *v).count() as f64 / per_run.len() as f64
                    },
                }
            })
            .collect();
        let overall_sds: Vec<f64> = sampled
            .iter()
            .map(|r| {
                sd(&r
                    .judge_samples
                    .iter()
                    .map(|j| j.overall)
                    .collect::<Vec<_>>())
            })
            .collect();
        JudgeConsistency {
            judged: sampled.len() as u32,
            flipped,
            flip_share: if sampled.is_empty() {
                0.0
            } else {
                f64::from(flipped) / sampled.len() as f64
            },
            criteria,
            overall_sd: mean_sd(&overall_sds).0.unwrap_or(0.0),
        }
    })
}
