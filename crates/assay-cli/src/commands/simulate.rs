//! `assay simulate` and `assay simulate compare`: the flags mapped to a request for
//! [`assay_sim::session`], a progress bar, and the rendering; and the simulation half of
//! `assay runs merge` ([`merge`]), which puts the reports of `assay simulate --shard` together.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use assay_core::simulation::{Outcome, SimReport};
use assay_project::HarnessError;
use assay_project::results::write_replace;
use assay_providers::RateLimits;
use assay_report::simulation as report;
use assay_sim::session::{SimObserver, SimRequest};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{out, runtime};
use crate::exit::Exit;
use crate::progress::LimitWatch;

/// `assay simulate`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub command: Option<SimulateCommand>,

    /// The project directory (with sim/suite.yaml).
    #[arg(required = true)]
    pub dir: Option<PathBuf>,

    /// The model under test, `vendor/model` (default: [simulate] model in assay.toml).
    #[arg(long)]
    pub model: Option<String>,

    /// Scenarios to run: `all` or ids separated by commas.
    #[arg(long, default_value = "all")]
    pub scenarios: String,

    /// The simulated user's model (default: [simulate] simulator_model, else
    /// anthropic/claude-sonnet-4-6).
    #[arg(long)]
    pub simulator_model: Option<String>,

    /// The judge's model (default: [simulate] evaluator_model, else anthropic/claude-sonnet-4-6).
    #[arg(long)]
    pub evaluator_model: Option<String>,

    /// Runs per scenario; the report shows mean, spread and pass^k.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,

    /// Model calls in flight at once, across the simulated user, the model under test and the
    /// judge (default: [simulate] concurrency, else 4). This is the limit your provider sees.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: Option<u32>,

    /// Conversations open at once, each with its own MCP servers (default: [simulate]
    /// runs_in_flight, else twice --concurrency).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub runs_in_flight: Option<u32>,

    /// Where the Markdown report goes (the JSON beside it); default
    /// DIR/sim/reports/report_<stamp>.md, also copied to latest.md.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Call cache mode: read-write, off or replay (overrides ASSAY_CACHE and assay.toml).
    #[arg(long)]
    pub cache: Option<String>,

    #[command(flatten)]
    pub batch: crate::args::BatchArg,

    /// Print the JSON report on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// Judge each transcript K times (the criteria in another order, another seed, each
    /// time): the report gives each criterion's spread and the share of runs whose verdict
    /// flips, and a run the samples pass and fail is `uncertain` (apart from pass and fail).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub judge_samples: u32,

    /// Compare with a saved report (JSON, or the Markdown with its JSON beside it) and fail
    /// (exit 1) on a significant regression: the per-scenario mean overall falls (paired
    /// bootstrap over scenarios, 95 %), or a scenario with two or more scored runs on each side
    /// falls (bootstrap over its runs).
    #[arg(long, value_name = "REPORT")]
    pub baseline: Option<PathBuf>,

    /// With --baseline: compare even when the baseline was judged by another judge (model or
    /// version); by default that is refused, since a change of judge would pass for a change of
    /// model.
    #[arg(long, requires = "baseline")]
    pub allow_judge_change: bool,

    /// Keep this simulation's scratch folder (under DIR/.assay/sim/, marked KEPT): assay never
    /// removes a kept folder; other runs' folders are removed when they end, or, when killed,
    /// by the next simulation.
    #[arg(long)]
    pub keep_workdirs: bool,

    /// Run one shard of the selected scenarios: `hash:i/n` keeps the scenarios whose id hashes
    /// to shard i of n (from 1), every repeat of each, so n machines run a suite between them
    /// and adding a scenario moves no other. Each shard saves its own report, without a gate
    /// or a baseline verdict (it exits 0 unless errors kept runs from a verdict);
    /// `assay runs merge` makes the reports one, as an unsharded run would, and decides both.
    #[arg(long, value_name = "hash:i/n", value_parser = assay_core::shard::Shard::parse)]
    pub shard: Option<assay_core::shard::Shard>,
}

/// `assay simulate` subcommands.
#[derive(Debug, Subcommand)]
pub enum SimulateCommand {
    /// Put several simulation reports side by side: models as columns, scenarios as rows.
    ///
    /// Takes the JSON reports (or the Markdown reports with their JSON beside them). Each cell
    /// is a scenario's mean overall score with its 95 % bootstrap interval over the repeats;
    /// each pair of reports gets a verdict (better, worse, not distinguishable), scenario by
    /// scenario and over all scenarios. Warns when the reports were judged differently.
    /// Prints Markdown; --html writes a colour-coded HTML page too; --json the comparison.
    Compare(CompareArgs),
}

/// `assay simulate compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Simulation reports (.json, or .md with the .json beside it).
    #[arg(required = true, num_args = 1..)]
    pub reports: Vec<PathBuf>,

    /// Also write the comparison as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Write the Markdown here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Print the comparison as JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &SimulateArgs) -> anyhow::Result<Exit> {
    if let Some(SimulateCommand::Compare(compare_args)) = &args.command {
        return compare(compare_args);
    }
    let Some(dir) = &args.dir else {
        return Err(HarnessError::Usage("give the project directory".into()).into());
    };
    let scenarios: Option<Vec<String>> = match args.scenarios.trim() {
        "all" | "" => None,
        list => Some(
            list.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
        ),
    };
    let request = SimRequest {
        project: dir.clone(),
        scenarios,
        model: args.model.clone(),
        simulator_model: args.simulator_model.clone(),
        evaluator_model: args.evaluator_model.clone(),
        repeat: args.repeat,
        concurrency: args.concurrency.map(|c| c as usize),
        runs_in_flight: args.runs_in_flight.map(|r| r as usize),
        cache: args.cache.clone(),
        keep_workdirs: args.keep_workdirs,
        judge_samples: args.judge_samples,
        baseline: args.baseline.clone(),
        allow_judge_change: args.allow_judge_change,
        output: args.output.clone(),
        shard: args.shard,
    };
    let show_bar = !args.json && std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(
        Some(0),
        if show_bar {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    if let Ok(style) = ProgressStyle::with_template(
        "simulate [{bar:30}] {pos}/{len} runs, {elapsed} (eta {eta}) {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    let (on_start, on_run, on_limits) = (bar.clone(), bar.clone(), bar.clone());
    let message = Arc::new(Mutex::new(String::new()));
    let last_run = Arc::clone(&message);
    // Says so on the bar while a provider's rate limit holds calls back.
    let watch: Arc<Mutex<Option<LimitWatch>>> = Arc::default();
    let watching = Arc::clone(&watch);
    let observer = SimObserver {
        start: Some(Arc::new(move |total| on_start.set_length(total))),
        finished: Some(Arc::new(move |run| {
            let text = format!("{} #{}", run.scenario_id, run.repeat);
            text.clone_into(&mut last_run.lock().unwrap_or_else(PoisonError::into_inner));
            on_run.set_message(text);
            on_run.inc(1);
        })),
        limits: show_bar.then(|| {
            let start: Arc<dyn Fn(Arc<RateLimits>) + Send + Sync> =
                Arc::new(move |limits| {
                    *watching.lock().unwrap_or_else(PoisonError::into_inner) = Some(
                        LimitWatch::start(on_limits.clone(), limits, Arc::clone(&message)),
                    );
                });
            start
        }),
    };
    let done = runtime()?.block_on(assay_sim::session::simulate(
        &request,
        Arc::new(args.batch.env()),
        &observer,
    ));
    drop(watch.lock().unwrap_or_else(PoisonError::into_inner).take());
    let done = done?;
    bar.finish_and_clear();
    let report = &done.report;
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(report)?));
    } else {
        out(&report::console(
            report,
            Some(&done.saved.markdown.display().to_string()),
        ));
        if let Some(shard) = &report.shard {
            out(&format!(
                "shard {}: {} of the {} selected scenario(s); the gate{} is decided when the shards' reports are merged (assay runs merge)\n",
                shard.shard,
                report.scenarios.len(),
                shard.scenarios.len(),
                if shard.baseline.is_some() {
                    " and the baseline comparison"
                } else {
                    ""
                }
            ));
        }
        if !done.usage_report.is_empty() {
            super::err(&done.usage_report);
        }
    }
    Ok(exit_of(report))
}

/// The exit code of a simulation's report: 3 when errors kept runs from a verdict, else 1 when
/// the gate or the baseline comparison failed, else 0. A shard's report has neither gate nor
/// baseline verdict (the merge decides them), so a shard fails only on errors.
fn exit_of(report: &SimReport) -> Exit {
    match report.outcome() {
        Outcome::Errors => Exit::Infrastructure,
        Outcome::GateFailed => Exit::GateFailed,
        Outcome::Passed => Exit::Success,
    }
}

/// Whether a JSON document is a simulation report (`assay simulate`'s `report_<stamp>.json`),
/// not a RunLog: `assay runs merge` sends simulation reports to [`merge`].
pub fn is_sim_report(value: &serde_json::Value) -> bool {
    assay_sim::report::is_report(value)
}

/// Whether the file (`.json`, or a `.md` report with its `.json` beside it) is a simulation
/// report; false when it cannot be read or is not JSON.
pub fn is_sim_report_file(path: &Path) -> bool {
    std::fs::read_to_string(assay_sim::report::json_path(path))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|v| is_sim_report(&v))
}

/// `assay runs merge` of the reports of `assay simulate --shard`: reads them, checks that they
/// are every shard of one simulation, merges them as an unsharded run would have reported
/// ([`assay_sim::merge`]), saves the merged report in every format where `assay simulate`
/// saves (DIR/sim/reports/, latest.md and latest.json replaced), prints the summary (or the
/// JSON report with `json`), and exits as `assay simulate` would have for it. Reports that
/// are not the shards of one simulation are bad input (exit 2, the files and the difference
/// named), and nothing is written.
pub fn merge(dir: &Path, files: &[PathBuf], json: bool) -> anyhow::Result<Exit> {
    let merged = assay_sim::merge::merge_files(files, dir)?;
    let saved = assay_sim::report::save(dir, None, &merged)
        .map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
    if json {
        out(&format!("{}\n", serde_json::to_string_pretty(&merged)?));
    } else {
        out(&report::console(
            &merged,
            Some(&saved.markdown.display().to_string()),
        ));
        if let Some(m) = &merged.merged {
            out(&format!(
                "merged from {} shard(s): {}\n",
                m.count,
                m.shards
                    .iter()
                    .map(|s| format!(
                        "hash:{}/{} ({} run(s), {:.1}s)",
                        s.index,
                        m.count,
                        s.runs,
                        s.duration_ms as f64 / 1000.0
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(exit_of(&merged))
}

fn compare(args: &CompareArgs) -> anyhow::Result<Exit> {
    // Each file's extension decides what goes there; two outputs never share a file.
    use super::output::{Format, distinct, format};
    if let Some(path) = &args.html {
        format("--html", path, &[Format::Html])?;
    }
    let output = match &args.output {
        Some(path) => Some((
            path,
            format(
                "--output",
                path,
                &[Format::Markdown, Format::Json, Format::Html],
            )?,
        )),
        None => None,
    };
    if let (Some(html), Some((path, _))) = (&args.html, &output) {
        distinct(&[("--html", html.as_path()), ("--output", path.as_path())])?;
    }
    let reports = args
        .reports
        .iter()
        .map(|p| {
            assay_sim::report::read(p)
                .map(|r| (assay_sim::report::json_path(p).display().to_string(), r))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let labelled: Vec<(String, &SimReport)> = reports.iter().map(|(l, r)| (l.clone(), r)).collect();
    let comparison = assay_core::simulation::compare_reports(&labelled);
    for w in &comparison.warnings {
        tracing::warn!("{w}");
    }
    let only: Vec<SimReport> = reports.into_iter().map(|(_, r)| r).collect();
    let write = |path: &Path, text: &str| {
        write_replace(path, text.as_bytes())
            .with_context(|| std::format!("cannot write {}", path.display()))
    };
    if let Some(path) = &args.html {
        write(path, &report::compare_html(&only, &comparison))?;
    }
    let json = || serde_json::to_string_pretty(&comparison).map(|j| j + "\n");
    match output {
        Some((path, Format::Json)) => write(path, &json()?)?,
        Some((path, Format::Html)) => write(path, &report::compare_html(&only, &comparison))?,
        Some((path, _)) => write(path, &report::compare_markdown(&only, &comparison))?,
        None => {}
    }
    if args.json {
        out(&json()?);
    } else if output.is_none() {
        out(&report::compare_markdown(&only, &comparison));
    }
    Ok(Exit::Success)
}
