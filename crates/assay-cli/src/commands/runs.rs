//! `assay runs list`, `assay runs diff A B` and `assay runs accept RUN`.

use std::path::{Path, PathBuf};

use assay_project::HarnessError;
use assay_project::settings::ProjectSettings;
use assay_run::baseline;
use clap::{Args, Subcommand};

use assay_project::project::Project;
use assay_report::console::Listing;
use assay_run::session;

use super::{log_warnings, out};
use crate::exit::Exit;

/// `assay runs …`
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// The saved runs, newest first; a shard, a partial run (--test, --topic, --changed-since,
    /// a --banks subset), a run with drafts and a merged run are marked so.
    List {
        /// The project directory (as `assay run DIR` takes it; the same as --project).
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compare two runs case by case: what differs in their setups, regressions, topics,
    /// improvements, and the paired comparison of their per-case scores. Each run is a saved
    /// run's id, `latest`, `accepted`, or a results JSON file.
    Diff {
        /// The first run (the baseline).
        before: String,
        /// The second run.
        after: String,
        /// Print the comparison as JSON (every case, unchanged ones included).
        #[arg(long)]
        json: bool,
    },
    /// Accept a saved run as the project's baseline: `assay run --baseline accepted` compares
    /// with it until another is accepted. The run is copied into baseline/ (commit that
    /// folder so CI compares with it) with who accepted it and when; baseline/history.jsonl
    /// keeps every acceptance.
    ///
    /// Only a run of the whole suite can be the baseline: a shard, a partial run (--test,
    /// --topic, --changed-since, a --banks subset) and a run with pending drafts
    /// (--include-drafts) are refused (exit 2, the reason named). A CRITICAL run or one with
    /// errored cases is accepted with a warning, which the acceptance records.
    Accept {
        /// A saved run's id (like 2026-11-25-0915), or `latest`.
        #[arg(value_name = "RUN_ID|latest")]
        run: String,
        /// Who accepts it (default: ASSAY_USER, else the login name).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        /// Why (kept with the acceptance).
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// Print the acceptance as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Merge the runs of a suite's shards (`assay run --shard hash:i/n`, one results file per
    /// shard) into one run of the whole suite, saved like any run: totals, statistics, the
    /// baseline gate and every report computed over all the cases, as one run would give
    /// them. Shards of different settings, knowledge bases, suites or shard counts, a shard
    /// given twice and a missing shard are refused, naming the difference. Simulation reports
    /// of `assay simulate --shard` merge the same way.
    Merge(MergeArgs),
}

/// `assay runs merge`
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' results files (`results/results_<stamp>.json` of each shard's run, with
    /// its `cases_<stamp>.jsonl` beside it when it has one; a saved run's stamp or run_id; or
    /// the RunLog `assay run --shard … --no-save --json` printed), in any order.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,

    /// Compare the merged run with a saved run and apply the regression rules, as `assay run
    /// --baseline` does: `accepted`, `latest`, a saved run's id or a results JSON file.
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,

    /// Also write JUnit XML of the merged run to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Print the merged RunLog as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// Do not save the merged run in the results folder.
    #[arg(long)]
    pub no_save: bool,
}

pub fn run(project: &Path, command: &RunsCommand) -> anyhow::Result<Exit> {
    // `assay runs list DIR` takes the project as `assay run DIR` does.
    let dir = match command {
        RunsCommand::List { dir: Some(dir), .. } => {
            if project != Path::new(".") && project != dir {
                return Err(HarnessError::Usage(format!(
                    "two projects given: {} and --project {}; give one",
                    dir.display(),
                    project.display()
                ))
                .into());
            }
            dir.as_path()
        }
        _ => project,
    };
    let settings = ProjectSettings::load(dir)?;
    let results = &settings.results_dir;
    match command {
        RunsCommand::List { json, .. } => {
            let runs = assay_run::runs::list_runs(results)
                .map_err(|e| HarnessError::Usage(e.to_string()))?;
            if *json {
                out(&format!("{}\n", serde_json::to_string_pretty(&runs)?));
            } else if runs.is_empty() {
                out(&format!("no saved runs in {}\n", results.display()));
            } else {
                let accepted = assay_run::accepted::current(&settings.root)?;
                out(&list_text(&runs, accepted.as_ref()));
            }
        }
        RunsCommand::Diff {
            before,
            after,
            json,
        } => {
            let a = baseline::resolve_in(&settings.root, results, before)?;
            let b = baseline::resolve_in(&settings.root, results, after)?;
            let (a_log, b_log) = (read(&a)?, read(&b)?);
            // Every case of each run: from its lists, or streamed from its run log when the
            // RunLog lists only the worst.
            let a_cases = baseline::read_cases(&a_log, &a)?;
            let b_cases = baseline::read_cases(&b_log, &b)?;
            let mut diff =
                assay_core::rundiff::diff_runs_scored(&a_log, &b_log, &a_cases, &b_cases);
            diff.label = Some(a.display().to_string());
            if *json {
                out(&format!("{}\n", serde_json::to_string_pretty(&diff)?));
            } else {
                let mut text = assay_report::rundiff::console(&diff, &a.display().to_string());
                text.push_str(&format!(
                    "  (second run: {}; --json gives every case)\n",
                    b.display()
                ));
                out(&text);
            }
        }
        RunsCommand::Accept {
            run,
            by,
            note,
            json,
        } => {
            let by = by
                .clone()
                .unwrap_or_else(|| assay_run::accepted::default_user(&|k| std::env::var(k).ok()));
            let a =
                assay_run::accepted::accept(&settings.root, results, run, &by, note.as_deref())?;
            for w in &a.warnings {
                tracing::warn!("{w} (recorded in baseline/history.jsonl)");
            }
            if *json {
                out(&format!("{}\n", serde_json::to_string_pretty(&a)?));
            } else {
                let mut text = format!(
                    "accepted run {} (score {:.1}, {}) as the baseline, by {}\n  copied to {} (commit baseline/ so CI compares with it)\n  `assay run --baseline accepted` now compares with it\n",
                    a.id,
                    a.combined_score,
                    a.health_status,
                    a.accepted_by,
                    a.results_path(&settings.root).display()
                );
                for w in &a.warnings {
                    text.push_str(&format!("  warning: {w}\n"));
                }
                out(&text);
            }
        }
        RunsCommand::Merge(args) => return merge(dir, args),
    }
    Ok(Exit::Success)
}

/// The saved runs as `assay runs list` shows them: one line each, newest first, the accepted
/// baseline starred, and what sets a run apart from a run of the whole suite (a shard, a
/// partial run, drafts) or how it was made (merged) in the last column.
fn list_text(
    runs: &[assay_run::runs::RunEntry],
    accepted: Option<&assay_run::accepted::Acceptance>,
) -> String {
    let mut text = format!(
        "{:<20} {:<22} {:>6} {:<9} {:>6} {:>5} {:>6}  {}\n",
        "id", "started", "score", "health", "cases", "hard", "errors", "run"
    );
    let mut apart = false;
    for r in runs {
        let id = if accepted.is_some_and(|a| a.id == r.id) {
            format!("{} *", r.id)
        } else {
            r.id.clone()
        };
        let kind = match (r.apart(), r.merged) {
            (Some(why), _) => {
                apart = true;
                why
            }
            (None, Some(n)) => format!("whole suite, merged from {n} shards"),
            (None, None) => "whole suite".to_owned(),
        };
        text.push_str(&format!(
            "{:<20} {:<22} {:>6.1} {:<9} {:>6} {:>5} {:>6}  {}\n",
            id,
            r.timestamp,
            r.combined_score,
            r.health_status.to_string(),
            r.total_tests,
            r.hard_fails,
            r.error_count,
            kind
        ));
    }
    match accepted {
        Some(a) => text.push_str(&format!(
            "* the accepted baseline (by {} on {}; `assay run --baseline accepted` compares with it)\n",
            a.accepted_by, a.accepted_at
        )),
        None => text.push_str("no run accepted as the baseline yet (`assay runs accept latest`)\n"),
    }
    if apart {
        text.push_str(
            "a shard, a partial run or a run with drafts ran part of the suite, or more than it: it cannot be accepted as the baseline, and its score is not comparable with a whole run's\n",
        );
    }
    text
}

/// `assay runs merge`: the shards' runs made one run of the whole suite, compared with the
/// baseline when asked, saved, shown and ended as `assay run` ends a run.
fn merge(dir: &Path, args: &MergeArgs) -> anyhow::Result<Exit> {
    // Simulation reports of `assay simulate --shard` merge as simulations.
    if args
        .logs
        .iter()
        .any(|p| super::simulate::is_sim_report_file(p))
    {
        if let Some(p) = args
            .logs
            .iter()
            .find(|p| !super::simulate::is_sim_report_file(p))
        {
            return Err(HarnessError::Usage(format!(
                "{}: not a simulation report, and the others are: merge runs and simulations apart",
                p.display()
            ))
            .into());
        }
        for (flag, given) in [
            ("--baseline", args.baseline.is_some()),
            ("--junit", args.junit.is_some()),
            ("--no-save", args.no_save),
        ] {
            if given {
                return Err(HarnessError::Usage(format!(
                    "{flag} is for runs of `assay run --shard`; simulation shards merge with their own baseline checks, as `assay simulate` ran them"
                ))
                .into());
            }
        }
        return super::simulate::merge(dir, &args.logs, args.json);
    }
    if let Some(path) = &args.junit {
        super::output::format("--junit", path, &[super::output::Format::Xml])?;
    }
    let project = Project::load_for_run(dir)?;
    log_warnings(&project.warnings);
    let settings = &project.settings;
    let mut shards = Vec::new();
    for path in &args.logs {
        // A file, or a saved shard run named by its stamp or run_id.
        let path = if path.exists() {
            path.clone()
        } else {
            baseline::resolve(&settings.results_dir, &path.to_string_lossy())?
        };
        shards.push(assay_run::merge::ShardFile::read(&path)?);
    }
    // Checked before the baseline is looked for or anything is written.
    assay_run::merge::check(&shards)?;
    let baseline = match args.baseline.as_deref() {
        Some(spec) => {
            let found = baseline::load(&project, spec)?;
            if found.is_none() {
                tracing::warn!(
                    "--baseline accepted: no run has been accepted yet, so the merged run is compared with nothing (accept one with `assay runs accept latest`)"
                );
            }
            found
        }
        None => None,
    };
    // The merged run is saved where runs are: one writer of the results folder at a time.
    let _lock = if args.no_save {
        None
    } else {
        Some(assay_project::lock::ProjectLock::acquire_run(
            &settings.root,
            &std::env::args().collect::<Vec<_>>().join(" "),
        )?)
    };
    let merged = assay_run::merge::merge(&project, shards)?;
    let mut log = merged.log;
    let run_log = merged.run_log;
    if let Some(b) = &baseline {
        session::compare_with_baseline(settings, b, &mut log, run_log.as_deref())?;
    }
    let (json, saved) = if args.no_save {
        if log.is_complete() {
            log.cases = None;
        }
        (assay_report::json(&log), None)
    } else {
        let (json, saved) = session::save_log(settings, &mut log, run_log.as_deref())?;
        (json, Some(saved))
    };
    let outcome = session::RunOutcome {
        log,
        json,
        saved,
        usage: assay_providers::AccountingSnapshot::default(),
        usage_report: String::new(),
    };
    let output = super::run::Output {
        json: args.json,
        junit: args.junit.as_deref(),
        listing: Listing::Summary,
        // Unsaved, the merged run log is still where the merge wrote it.
        run_log: if args.no_save {
            run_log.as_deref()
        } else {
            None
        },
    };
    super::run::finish(&project, &outcome, &output)
}

/// A results file of any RunLog version (a comparison of runs older than version 2 cannot say
/// which settings or entities differ, and says so).
fn read(path: &Path) -> Result<assay_core::runlog::RunLog, HarnessError> {
    match baseline::read_file(path) {
        Ok(log) => Ok(log),
        Err(e) if e.to_string().contains("written by an older assay") => {
            tracing::warn!(
                "{}: an older RunLog: settings and knowledge-base changes are not recorded in it",
                path.display()
            );
            let text = std::fs::read_to_string(path).map_err(|e| HarnessError::io(path, &e))?;
            serde_json::from_str(&text).map_err(|e| {
                HarnessError::Data(assay_kb::datafile::DataError::new(
                    path,
                    format!("not a RunLog: {e}"),
                ))
            })
        }
        Err(e) => Err(e),
    }
}
