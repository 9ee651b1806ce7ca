//! `assay simulate` and `assay simulate compare`.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use assay_core::simulation::{Outcome, RoleUsage, SimReport};
use assay_harness::HarnessError;
use assay_harness::engine::{ProviderCalls, build_chat_model};
use assay_harness::results::{write_new, write_replace};
use assay_harness::settings::ProjectSettings;
use assay_report::simulation as report;
use assay_sim::SimModels;
use assay_sim::run::{PreflightError, SimOptions};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{log_warnings, out, runtime};
use crate::args::{CompareArgs, SimulateArgs, SimulateCommand};
use crate::exit::Exit;

pub fn run(args: &SimulateArgs) -> anyhow::Result<Exit> {
    if let Some(SimulateCommand::Compare(compare_args)) = &args.command {
        return compare(compare_args);
    }
    let Some(dir) = &args.dir else {
        return Err(HarnessError::Usage("give the project directory".into()).into());
    };
    let settings = ProjectSettings::load(dir)?;
    let suite = assay_sim::load(dir)?;
    log_warnings(&suite.warnings);
    // The baseline is read and checked before anything runs.
    let baseline = match &args.baseline {
        None => None,
        Some(path) => {
            let base = assay_sim::report::read(path)?;
            if base.suite != suite.config.name {
                return Err(HarnessError::Usage(format!(
                    "--baseline {}: a report of suite `{}`, not `{}`",
                    path.display(),
                    base.suite,
                    suite.config.name
                ))
                .into());
            }
            let version = assay_sim::judge::version(&suite);
            let theirs = base.judge.as_ref().map(|j| j.version.clone());
            if theirs.as_deref() != Some(version.as_str()) && !args.allow_judge_change {
                return Err(HarnessError::Usage(format!(
                    "--baseline {}: judged by judge version {} and this suite's judge is version {version} (its instructions, criteria, rubrics or weights changed): a comparison would mix the judge's change with the model's; judge the baseline again, or pass --allow-judge-change",
                    path.display(),
                    theirs.as_deref().unwrap_or("(unrecorded)")
                ))
                .into());
            }
            Some((path.display().to_string(), base))
        }
    };

    let wanted: Option<Vec<String>> = match args.scenarios.trim() {
        "all" | "" => None,
        list => Some(
            list.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
        ),
    };
    let selected = assay_sim::select(&suite, wanted.as_deref()).map_err(preflight_error)?;

    let model = args
        .model
        .clone()
        .or_else(|| settings.simulate.model.clone())
        .ok_or_else(|| {
            HarnessError::Usage(
                "name the model under test with --model (or [simulate] model in assay.toml)".into(),
            )
        })?;
    let simulator = args
        .simulator_model
        .clone()
        .unwrap_or_else(|| settings.simulate.simulator_model.clone());
    let evaluator = args
        .evaluator_model
        .clone()
        .unwrap_or_else(|| settings.simulate.evaluator_model.clone());
    let concurrency = args
        .concurrency
        .map_or(settings.simulate.concurrency, |c| c as usize);
    // `concurrency` bounds the model calls in flight across the three roles (one shared limit:
    // what the provider sees); more conversations than that are open at once, so that a slot
    // freed by one conversation (its tools running, its turn being built) is taken by another.
    let runs_in_flight = args
        .runs_in_flight
        .map(|r| r as usize)
        .or(settings.simulate.runs_in_flight)
        .unwrap_or(2 * concurrency);

    let env = super::env;
    let assistant = build_chat_model(&settings, &model, "--model", &env)?;
    let simulator_model = build_chat_model(&settings, &simulator, "--simulator-model", &env)?;
    let judge_model = build_chat_model(&settings, &evaluator, "--evaluator-model", &env)?;
    let calls = ProviderCalls::open(&settings, args.cache.as_deref(), &env, true)?;
    let group = calls.chat_group(concurrency);
    let models = SimModels {
        assistant: group.chat(assistant),
        simulator: group.chat(simulator_model),
        judge: group.chat(judge_model),
    };

    let runs_total = selected.len() as u64 * u64::from(args.repeat);
    let show_bar = !args.json && std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(
        Some(runs_total),
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
    let progress = bar.clone();
    let message = Arc::new(std::sync::Mutex::new(String::new()));
    let last_run = Arc::clone(&message);
    // Says so on the bar while a provider's rate limit holds calls back.
    let watch = show_bar.then(|| {
        crate::progress::LimitWatch::start(bar.clone(), calls.limits(), Arc::clone(&message))
    });
    // Removed when this function returns, however it returns; what killed runs left is swept
    // first.
    let scratch =
        assay_sim::scratch::RunScratch::create(&dir.join(".assay").join("sim"), args.keep_workdirs)
            .map_err(|e| {
                HarnessError::Infrastructure(format!(
                    "cannot make a scratch folder under {}: {e}",
                    dir.join(".assay").join("sim").display()
                ))
            })?;
    let options = SimOptions {
        repeat: args.repeat,
        concurrency,
        runs_in_flight,
        work_root: scratch.dir().to_owned(),
        keep_workdirs: args.keep_workdirs,
        judge_samples: args.judge_samples,
        env: Arc::new(|name: &str| std::env::var(name).ok()),
        on_finished: Some(Arc::new(move |run| {
            let text = format!("{} #{}", run.scenario_id, run.repeat);
            text.clone_into(
                &mut last_run
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            progress.set_message(text);
            progress.inc(1);
        })),
    };
    tracing::info!(
        runs = runs_total,
        scenarios = selected.len(),
        model = %model,
        simulator = %simulator,
        judge = %evaluator,
        concurrency,
        runs_in_flight,
        "simulating"
    );

    let rt = runtime()?;
    rt.block_on(assay_sim::preflight(&suite, &options))
        .map_err(preflight_error)?;
    let mut report = rt.block_on(assay_sim::simulate(&suite, &models, &options, &selected));
    drop(watch);
    bar.finish_and_clear();
    if let Some((label, base)) = &baseline {
        if base.evaluator_model != report.evaluator_model && !args.allow_judge_change {
            tracing::warn!(
                "the baseline was judged by {} and this simulation by {}",
                base.evaluator_model,
                report.evaluator_model
            );
        }
        report.baseline = Some(assay_core::simulation::SimBaseline::of(
            label, base, &report,
        ));
    }

    let snapshot = calls.usage();
    for name in [
        &report.model,
        &report.simulator_model,
        &report.evaluator_model,
    ] {
        if report.usage.iter().any(|u| &u.model == name) {
            continue;
        }
        if let Some(s) = snapshot.models.get(name.as_str()) {
            report.usage.push(RoleUsage {
                model: name.clone(),
                calls: s.calls,
                cache_hits: s.cache_hits,
                input_tokens: s.input_tokens,
                output_tokens: s.output_tokens,
                cost_usd: s.cost_usd,
            });
        }
    }

    report.rate_limits = calls.rate_limit_records();

    let saved = save(dir, args.output.as_deref(), &report)?;
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&report)?));
    } else {
        out(&report::console(
            &report,
            Some(&saved.display().to_string()),
        ));
        let usage = calls.usage_report();
        if !usage.is_empty() {
            #[allow(clippy::print_stderr)]
            {
                eprint!("{usage}");
            }
        }
    }
    Ok(match report.outcome() {
        Outcome::Errors => Exit::Infrastructure,
        Outcome::GateFailed => Exit::GateFailed,
        Outcome::Passed => Exit::Success,
    })
}

/// Bad input is exit 2; a server that exists but cannot be started or reached is exit 3.
fn preflight_error(e: PreflightError) -> anyhow::Error {
    match e {
        PreflightError::Input(m) => HarnessError::Usage(m).into(),
        PreflightError::Server(e) => HarnessError::Infrastructure(e.to_string()).into(),
    }
}

/// Writes the Markdown and JSON reports and one JSON file per transcript, each atomically; the
/// stamped files are never overwritten, `latest.*` is replaced. Returns the Markdown's path.
fn save(dir: &Path, output: Option<&Path>, report: &SimReport) -> anyhow::Result<PathBuf> {
    let reports_dir = dir.join("sim").join("reports");
    // Stamped names never collide: a second run in the same second gets `_2`, `_3`, ….
    // `generated_at` is RFC 3339 (`2026-11-25T06:33:53.123Z`): keep its digits to the second.
    let base: String = report
        .generated_at
        .chars()
        .take(19)
        .filter(char::is_ascii_digit)
        .collect();
    let base = format!(
        "{}_{}",
        &base[..8.min(base.len())],
        &base[8.min(base.len())..]
    );
    let stamp = (1..1000)
        .map(|n| {
            if n == 1 {
                base.clone()
            } else {
                format!("{base}_{n}")
            }
        })
        .find(|s| {
            !reports_dir.join(format!("report_{s}.md")).exists()
                && !reports_dir.join("transcripts").join(s).exists()
        })
        .ok_or_else(|| {
            HarnessError::Usage(format!(
                "{}: too many reports stamped {base}",
                reports_dir.display()
            ))
        })?;
    let markdown_path = match output {
        Some(path) => path.to_owned(),
        None => reports_dir.join(format!("report_{stamp}.md")),
    };
    let base_dir = markdown_path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    std::fs::create_dir_all(&base_dir)
        .with_context(|| format!("cannot create {}", base_dir.display()))?;
    let transcripts = base_dir.join("transcripts").join(&stamp);
    std::fs::create_dir_all(&transcripts)
        .with_context(|| format!("cannot create {}", transcripts.display()))?;
    for run in &report.runs {
        if let Some(t) = &run.transcript {
            let path = transcripts.join(format!("{}-{}.json", run.scenario_id, run.repeat));
            write_replace(&path, serde_json::to_string_pretty(t)?.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    let markdown = report::markdown(report);
    let json = serde_json::to_string_pretty(report)?;
    let json_path = markdown_path.with_extension("json");
    if output.is_some() {
        write_replace(&markdown_path, markdown.as_bytes())
            .with_context(|| format!("cannot write {}", markdown_path.display()))?;
        write_replace(&json_path, json.as_bytes())
            .with_context(|| format!("cannot write {}", json_path.display()))?;
    } else {
        write_new(&markdown_path, markdown.as_bytes())
            .with_context(|| format!("cannot write {}", markdown_path.display()))?;
        write_new(&json_path, json.as_bytes())
            .with_context(|| format!("cannot write {}", json_path.display()))?;
        write_replace(&reports_dir.join("latest.md"), markdown.as_bytes())?;
        write_replace(&reports_dir.join("latest.json"), json.as_bytes())?;
    }
    Ok(markdown_path)
}

fn compare(args: &CompareArgs) -> anyhow::Result<Exit> {
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
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&comparison)?));
        return Ok(Exit::Success);
    }
    let only: Vec<SimReport> = reports.into_iter().map(|(_, r)| r).collect();
    let markdown = report::compare_markdown(&only, &comparison);
    if let Some(path) = &args.html {
        write_replace(path, report::compare_html(&only, &comparison).as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    match &args.output {
        Some(path) => write_replace(path, markdown.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => out(&markdown),
    }
    Ok(Exit::Success)
}
