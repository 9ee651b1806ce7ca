//! `assay optimize` (the seed's three steps) and `assay evaluate` (step 3 alone).

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use assay_core::experiment::{Estimate, ExperimentReport, RoleEstimate, Usage, UsageTotals};
use assay_experiment::cases::{CaseSet, load_cases};
use assay_experiment::prompts::{PromptLists, load_prompt_lists, read_prompt_dir};
use assay_experiment::run::{
    self, CaseData, Experiment, Layout, Options, Progress, RunError, Services, parse_directions,
};
use assay_experiment::target::{ChainTarget, CommandTarget, HttpTarget, Target};
use assay_experiment::testdata::{self, Kind};
use assay_experiment::tracking;
use assay_harness::HarnessError;
use assay_harness::engine::{ProviderCalls, build_chat_model};
use assay_harness::lock::ProjectLock;
use assay_harness::settings::ProjectSettings;
use assay_providers::{AccountingSnapshot, ChatModel};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{command_line, env, out, runtime};
use crate::args::{EvaluateArgs, OptimizeArgs};
use crate::exit::Exit;

/// A progress bar on stderr (hidden when stderr is not a terminal or for `--json`).
struct Bar(ProgressBar);

impl Bar {
    fn new(show: bool) -> Bar {
        let bar = ProgressBar::with_draw_target(
            Some(0),
            if show {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:>12} [{bar:30}] {pos}/{len} cases, {elapsed} (eta {eta}) {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        Bar(bar)
    }
}

impl Progress for Bar {
    fn start(&self, step: &str, units: u64) {
        self.0.reset();
        self.0.set_length(units);
        self.0.set_position(0);
        self.0.set_prefix(step.to_owned());
    }
    fn advance(&self, n: u64, note: &str) {
        self.0.set_message(note.to_owned());
        self.0.inc(n);
    }
    fn finish(&self, step: &str, summary: &str) {
        self.0.set_length(0);
        self.0.set_position(0);
        self.0.set_message(String::new());
        self.0.println(format!("{step}: {summary}"));
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
    file: Option<&Path>,
    version: Option<&str>,
) -> anyhow::Result<CaseData> {
    let set: CaseSet = match file {
        Some(f) => {
            let f = if f.is_absolute() || f.exists() {
                f.to_owned()
            } else {
                dir.join(f)
            };
            let root = f.parent().map(Path::to_path_buf).unwrap_or_default();
            load_cases(&f, &root)?
        }
        None => testdata::resolve(dir, kind, version)?.load()?,
    };
    super::log_warnings(&set.warnings);
    Ok(CaseData::new(kind.as_str(), set, dir))
}

/// Everything built from the settings: the target, the grader, and their call wrappers.
struct Built {
    target: Arc<dyn Target>,
    grader: Arc<dyn ChatModel>,
    target_calls: ProviderCalls,
    grader_calls: ProviderCalls,
    agent_models: BTreeMap<String, String>,
    chain_len: usize,
}

fn build(
    dir: &Path,
    settings: &ProjectSettings,
    lists: &PromptLists,
    cache: Option<&str>,
) -> anyhow::Result<Built> {
    let o = &settings.optimize;
    let target_calls = ProviderCalls::open(settings, cache, &env, true)?;
    let grader_calls =
        ProviderCalls::open(settings, cache, &env, true)?.sharing_limits_with(&target_calls);
    let grader = grader_calls.chat(build_chat_model(
        settings,
        &o.grader_model,
        "[optimize] grader_model",
        &env,
    )?);
    let agents: Vec<String> = lists.names().iter().map(|s| (*s).to_owned()).collect();
    let timeout = Duration::from_secs_f64(o.timeout_seconds);
    let mut agent_models = BTreeMap::new();
    let (target, chain_len): (Arc<dyn Target>, usize) = match o.target.as_str() {
        "command" => (
            Arc::new(CommandTarget {
                command: o.command.clone(),
                dir: dir.to_owned(),
                timeout,
                stateless: o.stateless,
            }),
            0,
        ),
        "http" => (
            Arc::new(HttpTarget::new(
                o.url.as_deref().unwrap_or_default(),
                timeout,
                o.stateless,
            )?),
            0,
        ),
        _ => {
            let chain = ChainTarget::order(&agents, o.chain.as_deref());
            let mut models: BTreeMap<String, Arc<dyn ChatModel>> = BTreeMap::new();
            for agent in &chain {
                let name = o.agent_models.get(agent).unwrap_or(&o.model);
                let source = if o.agent_models.contains_key(agent) {
                    format!("[optimize.agent_models] {agent}")
                } else {
                    "[optimize] model".to_owned()
                };
                models.insert(
                    agent.clone(),
                    target_calls.chat(build_chat_model(settings, name, &source, &env)?),
                );
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
    Ok(Built {
        target,
        grader,
        target_calls,
        grader_calls,
        agent_models,
        chain_len,
    })
}

impl Built {
    /// Calls, tokens and cost so far, by role.
    fn usage(&self) -> Usage {
        Usage {
            target: totals(&self.target_calls.usage()),
            grader: totals(&self.grader_calls.usage()),
            target_runs: 0,
            rate_limits: {
                let mut records = self.target_calls.rate_limit_records();
                records.extend(self.grader_calls.rate_limit_records());
                records
            },
        }
    }
}

/// Before any call: the estimate (printed), the budget rule, and the dry check (INT-011).
/// Returns the runtime the run goes on with, and the estimate the budget is checked against.
fn preflight(
    settings: &ProjectSettings,
    built: &Built,
    lists: &PromptLists,
    runs: &[(&CaseSet, u64)],
    budget: Option<f64>,
) -> anyhow::Result<(tokio::runtime::Runtime, Estimate)> {
    let est = estimate(settings, built, lists, runs);
    say(&estimate_text(&est));
    check_budget(budget, &est)?;
    let rt = runtime()?;
    dry_check(&rt, built, lists)?;
    Ok((rt, est))
}

/// INT-011: every agent's prompt must reach the target before anything is spent.
fn dry_check(
    rt: &tokio::runtime::Runtime,
    built: &Built,
    lists: &PromptLists,
) -> anyhow::Result<()> {
    let agents: Vec<String> = lists.names().iter().map(|s| (*s).to_owned()).collect();
    rt.block_on(built.target.dry_check(&agents)).context(
        "dry check: every agent's prompt must reach the target before anything is spent",
    )?;
    tracing::info!(target = %built.target.describe(), agents = agents.len(), "dry check passed: every agent's prompt reaches the target");
    Ok(())
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
    let grader_price = assay_providers::price(&o.grader_model);
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
                target_cost = match (target_cost, assay_providers::price(model)) {
                    (Some(c), Some(p)) => Some(
                        c + *times as f64 * (input as f64 * p.input + max_out as f64 * p.output)
                            / 1e6,
                    ),
                    _ => None,
                };
            }
            let input = 200 + case_tokens + chars(&case.case.answer) / 4 + max_out;
            let output = u64::from(assay_experiment::grade::GRADER_MAX_TOKENS);
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

fn estimate_text(e: &Estimate) -> String {
    let role = |r: &RoleEstimate| {
        format!(
            "{} calls, ≤ {} input / ≤ {} output tokens, {}",
            r.calls,
            r.input_tokens,
            r.output_tokens,
            r.cost_usd.map_or_else(
                || "cost unknown (model not priced)".to_owned(),
                |c| format!("≤ ${c:.4}")
            )
        )
    };
    format!(
        "estimate before any call: {} target runs\n  target: {}\n  grader: {}",
        e.target_runs,
        role(&e.target),
        role(&e.grader)
    )
}

#[allow(clippy::print_stderr)]
fn say(text: &str) {
    eprintln!("{text}");
}

fn check_budget(budget: Option<f64>, e: &Estimate) -> anyhow::Result<()> {
    if let Some(b) = budget {
        if !(b.is_finite() && b > 0.0) {
            return Err(HarnessError::Usage("--budget: must be more than 0 USD".into()).into());
        }
        if e.cost_usd().is_none() || e.target.cost_usd.is_none() || e.grader.cost_usd.is_none() {
            return Err(HarnessError::Usage(
                "--budget: the cost cannot be enforced: a model of the run has no known price"
                    .into(),
            )
            .into());
        }
    }
    Ok(())
}

fn run_error(e: RunError) -> anyhow::Error {
    anyhow::Error::new(e)
}

pub fn optimize(args: &OptimizeArgs) -> anyhow::Result<Exit> {
    let dir = &args.dir;
    let settings = ProjectSettings::load(dir)?;
    let objectives =
        parse_directions(&settings.optimize.directions).map_err(HarnessError::Usage)?;
    let lists = load_prompt_lists(dir)?;
    let optimization = load_set(
        dir,
        Kind::Optimization,
        args.optimization_test_cases.as_deref(),
        args.optimization_version.as_deref(),
    )?;
    let evaluation = load_set(
        dir,
        Kind::Evaluation,
        args.evaluation_test_cases.as_deref(),
        args.evaluation_version.as_deref(),
    )?;
    let name = args.experiment_name.trim();
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(HarnessError::Usage(format!(
            "--experiment-name: `{name}` must be a plain folder name"
        ))
        .into());
    }
    let _lock = ProjectLock::acquire(dir, "optimize", &command_line())?;
    let built = build(dir, &settings, &lists, args.cache.as_deref())?;
    let trials = args.optimization_trials as usize;
    let (rt, est) = preflight(
        &settings,
        &built,
        &lists,
        &[(&optimization.set, trials as u64), (&evaluation.set, 2)],
        args.budget,
    )?;
    let usage = || built.usage();
    let bar = Bar::new(!args.json && std::io::stderr().is_terminal());
    let services = Services {
        target: built.target.clone(),
        grader: built.grader.clone(),
        usage: &usage,
        progress: &bar,
        estimate: Some(est),
    };
    let options = Options {
        name: name.to_owned(),
        trials,
        seed: args.seed,
        resume: args.resume,
        budget: args.budget,
        racing: args.racing.then_some(settings.optimize.racing_fraction),
        max_concurrency: args
            .max_concurrency
            .map_or(settings.optimize.max_concurrency, |n| n as usize),
        objectives,
        startup_trials: settings.optimize.startup_trials,
        threshold: settings.optimize.threshold,
    };
    let experiment = Experiment {
        project: dir,
        lists: &lists,
        optimization: &optimization,
        evaluation: &evaluation,
        options: &options,
        services: &services,
    };
    let report = rt.block_on(run::optimize(&experiment)).map_err(run_error)?;
    bar.0.finish_and_clear();
    let layout = Layout::new(dir, name);
    let md_path = layout.dir.join(run::REPORT_MD);
    assay_harness::results::write_replace(
        &md_path,
        assay_report::experiment::markdown(&report).as_bytes(),
    )
    .with_context(|| format!("writing {}", md_path.display()))?;
    let journal_path = layout.dir.join(tracking::OPTUNA_JOURNAL);
    assay_harness::results::write_replace(
        &journal_path,
        tracking::optuna_journal(&report).as_bytes(),
    )
    .with_context(|| format!("writing {}", journal_path.display()))?;
    track(
        &rt,
        args.mlflow_uri.as_deref(),
        &layout,
        &report,
        &lists.baseline(),
    )?;
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&report)?));
    } else {
        out(&assay_report::experiment::console(
            &report,
            Some(&md_path.display().to_string()),
        ));
    }
    Ok(Exit::Success)
}

fn track(
    rt: &tokio::runtime::Runtime,
    mlflow: Option<&str>,
    layout: &Layout,
    report: &ExperimentReport,
    baseline: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let runs = tracking::runs_of(report, baseline);
    if let Some(uri) = mlflow {
        let client = tracking::Mlflow::new(uri)?;
        let ids = rt.block_on(client.log(&report.name, &runs))?;
        tracing::info!(uri, runs = ids.len(), "logged to MLflow");
    } else {
        let written = tracking::write_local(&layout.tracking(), &runs)?;
        tracing::info!(runs = written.len(), dir = %layout.tracking().display(), "tracked locally");
    }
    Ok(())
}

pub fn evaluate(args: &EvaluateArgs) -> anyhow::Result<Exit> {
    let dir = &args.dir;
    let settings = ProjectSettings::load(dir)?;
    let lists = load_prompt_lists(dir)?;
    // Like the case files: a relative folder that is not there from here is the project's.
    let prompts_dir = if args.prompts.is_absolute() || args.prompts.exists() {
        args.prompts.clone()
    } else {
        dir.join(&args.prompts)
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
    let evaluation = load_set(
        dir,
        Kind::Evaluation,
        args.evaluation_test_cases.as_deref(),
        args.evaluation_version.as_deref(),
    )?;
    let _lock = ProjectLock::acquire(dir, "evaluate", &command_line())?;
    let built = build(dir, &settings, &lists, args.cache.as_deref())?;
    let (rt, est) = preflight(
        &settings,
        &built,
        &lists,
        &[(&evaluation.set, 2)],
        args.budget,
    )?;
    let usage = || built.usage();
    let bar = Bar::new(!args.json && std::io::stderr().is_terminal());
    let services = Services {
        target: built.target.clone(),
        grader: built.grader.clone(),
        usage: &usage,
        progress: &bar,
        estimate: Some(est),
    };
    let name = args.experiment_name.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("evaluate_{secs}")
    });
    let options = Options {
        name,
        trials: 1,
        seed: args.seed,
        resume: false,
        budget: args.budget,
        racing: None,
        max_concurrency: args
            .max_concurrency
            .map_or(settings.optimize.max_concurrency, |n| n as usize),
        objectives: parse_directions(&settings.optimize.directions).map_err(HarnessError::Usage)?,
        startup_trials: settings.optimize.startup_trials,
        threshold: settings.optimize.threshold,
    };
    let experiment = Experiment {
        project: dir,
        lists: &lists,
        optimization: &evaluation,
        evaluation: &evaluation,
        options: &options,
        services: &services,
    };
    let (step, base, cmp) = rt
        .block_on(run::evaluate(&experiment, &prompts))
        .map_err(run_error)?;
    bar.0.finish_and_clear();
    if args.json {
        let v = serde_json::json!({"evaluation": step, "evaluation_baseline": base, "comparison": cmp, "usage": usage()});
        out(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    } else {
        out(&format!(
            "evaluation ({} cases): prompts {} vs baseline {}\n{}\n",
            step.data.cases,
            run::metrics_line(&step.metrics),
            run::metrics_line(&base.metrics),
            cmp.significance.verdict
        ));
    }
    Ok(Exit::Success)
}
