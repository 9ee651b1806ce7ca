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

use assay_core::simulation::{
    CriterionSummary, GateOutcome, SIM_SCHEMA_VERSION, ScenarioRun, ScenarioSummary, SimReport,
    SimSummary, Verdict,
};
use assay_providers::ChatModel;
use futures_util::StreamExt as _;

use assay_core::simulation::Ending;

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

/// The three chat models of a simulation, already wrapped by the call wrapper.
#[derive(Clone)]
pub struct SimModels {
    /// The model under test.
    pub assistant: Arc<dyn ChatModel>,
    /// The simulated user.
    pub simulator: Arc<dyn ChatModel>,
    /// The judge.
    pub judge: Arc<dyn ChatModel>,
}

/// How to run.
#[derive(Clone)]
pub struct SimOptions {
    /// Runs per scenario.
    pub repeat: u32,
    /// Model calls in flight at once. The limit itself is enforced by the call wrapper the
    /// models share (see `ProviderCalls::chat_group` in assay-harness); it is recorded here for
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
    /// The environment (for `${VAR}` and `PATH`).
    pub env: EnvLookup,
    /// Called after each scenario run finishes (progress).
    pub on_finished: Option<RunCallback>,
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
    let mut runs: Vec<ScenarioRun> = futures_util::stream::iter(jobs)
        .map(|(scenario, repeat)| async move {
            let run = run_one(suite, models, options, scenario, repeat).await;
            if let Some(callback) = &options.on_finished {
                callback(&run);
            }
            run
        })
        .buffer_unordered(options.runs_in_flight.max(1))
        .collect()
        .await;
    runs.sort_by(|a, b| (&a.scenario_id, a.repeat).cmp(&(&b.scenario_id, b.repeat)));
    aggregate(suite, models, options, runs, started.elapsed())
}

async fn run_one(
    suite: &Suite,
    models: &SimModels,
    options: &SimOptions,
    scenario: &crate::suite::Scenario,
    repeat: u32,
) -> ScenarioRun {
    let started = Instant::now();
    let id = &scenario.config.id;
    let mut run = ScenarioRun {
        scenario_id: id.clone(),
        scenario_name: scenario.config.name.clone(),
        repeat,
        verdict: Verdict::Error,
        overall: None,
        judgement: None,
        checks: Vec::new(),
        error: None,
        warnings: Vec::new(),
        transcript: None,
        duration_ms: 0,
    };
    let workdir = options.work_root.join(format!("{id}-{repeat}"));
    if let Err(e) = std::fs::create_dir_all(&workdir) {
        run.error = Some(format!("cannot create {}: {e}", workdir.display()));
        return run;
    }
    let workdir = std::path::absolute(&workdir).unwrap_or(workdir);
    let vars = vars_for(suite, &workdir, id);
    let env = &options.env;
    let mut connections: Vec<McpConnection> = Vec::new();

    let outcome: Result<(), String> = async {
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
        }
        .run()
        .await;
        let failed = transcript.ended_by == Ending::Error;
        let error = transcript.error.clone();
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
            (Ok(()), Some(transcript)) => judge::judge(
                models.judge.as_ref(),
                suite.criteria(),
                scenario,
                &suite.system_prompt,
                suite.fixture.as_ref().map(|(_, v)| v),
                transcript,
                &run.checks,
            )
            .await
            .map(|(judgement, _)| judgement)
            .map_err(|e| format!("judge: {e}")),
        }
    };
    let ((), verdict) = tokio::join!(cleanup, judging);
    match verdict {
        Err(e) => run.error = Some(e),
        Ok(judgement) => {
            run.overall = Some(judgement.overall);
            run.verdict = if !judgement.simulator_kept_persona {
                Verdict::SimulatorFault
            } else if judgement.overall >= suite.config.pass_threshold {
                Verdict::Pass
            } else {
                Verdict::Fail
            };
            run.judgement = Some(judgement);
        }
    }
    run.duration_ms = started.elapsed().as_millis() as u64;
    run
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

fn aggregate(
    suite: &Suite,
    models: &SimModels,
    options: &SimOptions,
    runs: Vec<ScenarioRun>,
    elapsed: Duration,
) -> SimReport {
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
    let total_weight: f64 = suite.criteria().iter().map(|c| c.weight).sum();
    let criteria = suite
        .criteria()
        .iter()
        .map(|c| {
            let values: Vec<f64> = scored
                .iter()
                .filter_map(|r| r.judgement.as_ref())
                .filter_map(|j| j.scores.iter().find(|s| s.id == c.id))
                .map(|s| s.score)
                .collect();
            CriterionSummary {
                id: c.id.clone(),
                name: c.display_name().to_owned(),
                weight: c.weight / total_weight,
                mean: mean_sd(&values).0,
                min: min_of(&values),
            }
        })
        .collect();
    let count = |v: Verdict| runs.iter().filter(|r| r.verdict == v).count() as u32;
    let overall: Vec<f64> = scored.iter().filter_map(|r| r.overall).collect();
    let (passed, failed) = (count(Verdict::Pass), count(Verdict::Fail));
    let all_scored: Vec<&ScenarioSummary> =
        scenarios.iter().filter(|s| s.pass_all.is_some()).collect();
    let summary = SimSummary {
        runs: runs.len() as u32,
        passed,
        failed,
        simulator_fault: count(Verdict::SimulatorFault),
        errors: count(Verdict::Error),
        mean_overall: mean_sd(&overall).0,
        pass_rate: (passed + failed > 0).then(|| f64::from(passed) / f64::from(passed + failed)),
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
    let gate = suite.config.gate.as_ref().map(|config| {
        let mut reasons = Vec::new();
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
        reasons.dedup();
        GateOutcome {
            config: config.clone(),
            passed: reasons.is_empty(),
            reasons,
        }
    });
    SimReport {
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
        summary,
        gate,
        scenarios,
        criteria,
        runs,
        usage: Vec::new(),
        rate_limits: Vec::new(),
    }
}
