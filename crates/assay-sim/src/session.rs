//! One whole simulation, as `assay simulate` carries it out: read the settings and `sim/`,
//! read and check the baseline report, select the scenarios, resolve the three models (flags >
//! `[simulate]` > defaults) and build them behind one shared call limit
//! ([`assay_project::engine::ProviderCalls::chat_group`]), make the scratch folder (removed
//! after the run, whatever happens), run the preflight, the scenarios and the baseline
//! comparison, add what the calls consumed, and save the reports ([`crate::report::save`]).
//! With a shard (`--shard hash:i/n`), only the selected scenarios whose id hashes to it run,
//! and the report records what the merge checks ([`SimShard`]) instead of a gate and a baseline
//! comparison, which only the whole suite can decide.
//! The caller maps its arguments to a [`SimRequest`] and renders the [`Simulated`] it gets.

use std::path::PathBuf;
use std::sync::Arc;

use assay_core::shard::Shard;
use assay_core::simulation::{RoleUsage, ShardBaseline, SimReport, SimShard};
use assay_kb::datafile::DataError;
use assay_project::HarnessError;
use assay_project::engine::{ProviderCalls, build_chat_model};
use assay_project::settings::ProjectSettings;

use crate::report::{SaveError, SavedReport};
use crate::run::{EnvLookup, PreflightError, RunCallback, SimModels, SimOptions};
use crate::suite::SuiteError;

/// A simulation, resolved from the command line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimRequest {
    /// The project directory (with `sim/suite.yaml`).
    pub project: PathBuf,
    /// The scenarios to run (`None`: all).
    pub scenarios: Option<Vec<String>>,
    /// The model under test (else `[simulate] model`).
    pub model: Option<String>,
    /// The simulated user's model (else `[simulate] simulator_model`).
    pub simulator_model: Option<String>,
    /// The judge's model (else `[simulate] evaluator_model`).
    pub evaluator_model: Option<String>,
    /// Runs per scenario.
    pub repeat: u32,
    /// Model calls in flight across the three roles (else `[simulate] concurrency`).
    pub concurrency: Option<usize>,
    /// Conversations open at once (else `[simulate] runs_in_flight`, else twice the
    /// concurrency).
    pub runs_in_flight: Option<usize>,
    /// The call cache's mode.
    pub cache: Option<String>,
    /// Keep each run's scratch folder.
    pub keep_workdirs: bool,
    /// Times the judge reads each transcript.
    pub judge_samples: u32,
    /// A saved report to gate on.
    pub baseline: Option<PathBuf>,
    /// Compare with a baseline judged by another judge version anyway.
    pub allow_judge_change: bool,
    /// Where the Markdown report goes (the JSON, HTML and transcripts beside it); default
    /// `sim/reports/report_<stamp>.md`.
    pub output: Option<PathBuf>,
    /// Run only this shard of the selected scenarios (`--shard hash:i/n`): those whose id
    /// hashes to it, every repeat of each. The report records the shard and holds no gate and
    /// no baseline comparison; [`crate::merge`] puts the shards' reports back together.
    pub shard: Option<Shard>,
}

/// What the caller is told while the simulation runs.
#[derive(Default)]
pub struct SimObserver {
    /// The number of scenario runs, before the first starts.
    pub start: Option<Arc<dyn Fn(u64) + Send + Sync>>,
    /// Each finished run.
    pub finished: Option<RunCallback>,
    /// The models' rate limiters, once they are built and before the first call (a progress
    /// display says when a limit holds calls back).
    pub limits: Option<Arc<dyn Fn(Arc<assay_providers::RateLimits>) + Send + Sync>>,
}

/// A finished simulation.
#[derive(Debug, Clone)]
pub struct Simulated {
    /// The report (as saved).
    pub report: SimReport,
    /// Where it was saved.
    pub saved: SavedReport,
    /// The calls, tokens and cost per model, as text (empty when nothing was called).
    pub usage_report: String,
}

/// Why a simulation did not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Settings, usage (a missing model, a bad selection), a model that cannot be built, a
    /// server that cannot be started.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// A bad file under `sim/`.
    #[error(transparent)]
    Suite(#[from] SuiteError),
    /// A bad `assay.toml`, or a baseline report that cannot be read.
    #[error(transparent)]
    Data(#[from] DataError),
    /// A report file could not be written.
    #[error(transparent)]
    Save(#[from] SaveError),
}

impl SessionError {
    /// Exit code 3 (infrastructure) rather than 2 (bad input).
    pub fn is_infrastructure(&self) -> bool {
        match self {
            SessionError::Harness(e) => e.is_infrastructure(),
            SessionError::Save(_) => true,
            SessionError::Suite(_) | SessionError::Data(_) => false,
        }
    }
}

/// Bad input is a usage error; a server that exists but cannot be started or reached is
/// infrastructure.
pub(crate) fn preflight_error(e: PreflightError) -> SessionError {
    match e {
        PreflightError::Input(m) => HarnessError::Usage(m).into(),
        PreflightError::Server(e) => HarnessError::Infrastructure(e.to_string()).into(),
    }
}

/// `assay simulate`: every selected scenario, `repeat` times, judged, compared with the
/// baseline, saved. Nothing is written before the inputs are valid and the preflight passed.
pub async fn simulate(
    request: &SimRequest,
    env: EnvLookup,
    observer: &SimObserver,
) -> Result<Simulated, SessionError> {
    let dir = request.project.as_path();
    // `--output`'s extension decides which report goes there: checked before anything runs.
    if let Some(output) = &request.output {
        crate::report::output_paths(output).map_err(HarnessError::Usage)?;
    }
    let settings = ProjectSettings::load(dir)?;
    let suite = crate::load(dir)?;
    for w in &suite.warnings {
        tracing::warn!("{w}");
    }
    // The baseline is read and checked before anything runs.
    let baseline = match &request.baseline {
        None => None,
        Some(path) => {
            let base = crate::report::read(path)?;
            if base.suite != suite.config.name {
                return Err(HarnessError::Usage(format!(
                    "--baseline {}: a report of suite `{}`, not `{}`",
                    path.display(),
                    base.suite,
                    suite.config.name
                ))
                .into());
            }
            let version = crate::judge::version(&suite);
            let theirs = base.judge.as_ref().map(|j| j.version.clone());
            if theirs.as_deref() != Some(version.as_str()) && !request.allow_judge_change {
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
    let mut selected =
        crate::select(&suite, request.scenarios.as_deref()).map_err(preflight_error)?;
    // A scenario's shard is its id's (every repeat in one shard, so that its statistics are
    // whole); the selection as a whole is recorded for the merge.
    let shard = request.shard.map(|shard| {
        let mut all: Vec<String> = selected.iter().map(|s| s.config.id.clone()).collect();
        all.sort();
        all.dedup();
        selected.retain(|s| shard.contains(&s.config.id));
        SimShard {
            shard,
            scenarios: all,
            suite_version: suite.version(),
            fixture_version: suite.fixture_version(),
            gate: suite.config.gate.clone(),
            baseline: baseline.as_ref().map(|(label, base)| ShardBaseline {
                label: label.clone(),
                version: crate::merge::baseline_version(base),
            }),
            // Recorded once the runs are in (below).
            runs_sha256: None,
        }
    });

    let model = request
        .model
        .clone()
        .or_else(|| settings.simulate.model.clone())
        .ok_or_else(|| {
            HarnessError::Usage(
                "name the model under test with --model (or [simulate] model in assay.toml)".into(),
            )
        })?;
    let simulator = request
        .simulator_model
        .clone()
        .unwrap_or_else(|| settings.simulate.simulator_model.clone());
    let evaluator = request
        .evaluator_model
        .clone()
        .unwrap_or_else(|| settings.simulate.evaluator_model.clone());
    let concurrency = request.concurrency.unwrap_or(settings.simulate.concurrency);
    // `concurrency` bounds the model calls in flight across the three roles (one shared limit:
    // what the provider sees); more conversations than that are open at once, so that a slot
    // freed by one conversation (its tools running, its turn being built) is taken by another.
    let runs_in_flight = request
        .runs_in_flight
        .or(settings.simulate.runs_in_flight)
        .unwrap_or(2 * concurrency);

    let lookup = |name: &str| env(name);
    let assistant = build_chat_model(&settings, &model, "--model", &lookup)?;
    let simulator_model = build_chat_model(&settings, &simulator, "--simulator-model", &lookup)?;
    let judge_model = build_chat_model(&settings, &evaluator, "--evaluator-model", &lookup)?;
    let calls = ProviderCalls::open(&settings, request.cache.as_deref(), &lookup, true)?;
    let group = calls.chat_group(concurrency);
    let models = SimModels {
        assistant_price: calls.price(assistant.model()),
        simulator_price: calls.price(simulator_model.model()),
        assistant: group.chat("assistant", assistant),
        simulator: group.chat("user", simulator_model),
        judge: group.chat("judge", judge_model),
    };

    if let Some(limits) = &observer.limits {
        limits(calls.limits());
    }
    let runs_total = selected.len() as u64 * u64::from(request.repeat);
    if let Some(start) = &observer.start {
        start(runs_total);
    }
    // Removed when this function returns, however it returns; what killed runs left is swept
    // first.
    let scratch_root = dir.join(".assay").join("sim");
    let scratch = crate::scratch::RunScratch::create(&scratch_root, request.keep_workdirs)
        .map_err(|e| {
            HarnessError::Infrastructure(format!(
                "cannot make a scratch folder under {}: {e}",
                scratch_root.display()
            ))
        })?;
    let mut options = SimOptions {
        repeat: request.repeat,
        concurrency,
        runs_in_flight,
        work_root: scratch.dir().to_owned(),
        keep_workdirs: request.keep_workdirs,
        judge_samples: request.judge_samples,
        env,
        on_finished: observer.finished.clone(),
        ready: None,
        tool_tap: None,
        judge: true,
    };
    tracing::info!(
        runs = runs_total,
        scenarios = selected.len(),
        shard = ?request.shard.map(|s| s.to_string()),
        model = %model,
        simulator = %simulator,
        judge = %evaluator,
        concurrency,
        runs_in_flight,
        "simulating"
    );
    // The preflight runs beside the runs' setup (their folders, setup commands and servers):
    // the runs make no model call and write nothing until it passed, and a failed preflight
    // drops them (their servers are killed, the scratch folder removed) before anything is
    // scored or written. Once it passed, the report's stamp is taken, so that each transcript
    // is written as its conversation ends rather than all of them after the last run.
    let (ready, waiting) = tokio::sync::watch::channel(None);
    options.ready = Some(waiting);
    let checked = async {
        crate::preflight(&suite, &options)
            .await
            .map_err(preflight_error)?;
        let files = Arc::new(crate::report::ReportFiles::reserve(
            dir,
            request.output.as_deref(),
            &crate::conversation::now(),
        )?);
        ready.send_replace(Some(Arc::clone(&files)));
        Ok::<_, SessionError>(files)
    };
    let runs = async { Ok(crate::simulate(&suite, &models, &options, &selected).await) };
    let (files, mut report) = futures_util::future::try_join(checked, runs).await?;
    if let Some(mut shard) = shard {
        // A part's gate and baseline comparison would not be the suite's: the merge decides.
        // Its runs get a digest, which the merge checks.
        report.gate = None;
        shard.runs_sha256 = Some(crate::merge::runs_digest(&report.runs));
        report.shard = Some(shard);
    } else if let Some((label, base)) = &baseline {
        if base.evaluator_model != report.evaluator_model && !request.allow_judge_change {
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
    report.rate_limits = calls.rate_limit_records();

    let snapshot = calls.usage();
    for name in [
        report.model.clone(),
        report.simulator_model.clone(),
        report.evaluator_model.clone(),
    ] {
        if report.usage.iter().any(|u| u.model == name) {
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
    let saved = files.finish(&report)?;
    drop(scratch);
    Ok(Simulated {
        report,
        saved,
        usage_report: calls.usage_report(),
    })
}
