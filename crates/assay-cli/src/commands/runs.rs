//! `assay runs list`, `assay runs diff A B` and `assay runs accept RUN`.

use std::path::Path;

use assay_harness::HarnessError;
use assay_harness::baseline;
use assay_harness::settings::ProjectSettings;

use super::out;
use crate::args::RunsCommand;
use crate::exit::Exit;

pub fn run(dir: &Path, command: &RunsCommand) -> anyhow::Result<Exit> {
    let settings = ProjectSettings::load(dir)?;
    let results = &settings.results_dir;
    match command {
        RunsCommand::List { json } => {
            let runs = assay_harness::runs::list_runs(results)
                .map_err(|e| HarnessError::Usage(e.to_string()))?;
            if *json {
                out(&format!("{}\n", serde_json::to_string_pretty(&runs)?));
            } else if runs.is_empty() {
                out(&format!("no saved runs in {}\n", results.display()));
            } else {
                let accepted = assay_harness::accepted::current(&settings.root)?;
                let mut text = format!(
                    "{:<20} {:<22} {:>6} {:<9} {:>6} {:>5} {:>6}\n",
                    "id", "started", "score", "health", "cases", "hard", "errors"
                );
                for r in &runs {
                    let id = if accepted.as_ref().is_some_and(|a| a.id == r.id) {
                        format!("{} *", r.id)
                    } else {
                        r.id.clone()
                    };
                    text.push_str(&format!(
                        "{:<20} {:<22} {:>6.1} {:<9} {:>6} {:>5} {:>6}\n",
                        id,
                        r.timestamp,
                        r.combined_score,
                        r.health_status.to_string(),
                        r.total_tests,
                        r.hard_fails,
                        r.error_count
                    ));
                }
                match &accepted {
                    Some(a) => text.push_str(&format!(
                        "* the accepted baseline (by {} on {}; `assay run --baseline accepted` compares with it)\n",
                        a.accepted_by, a.accepted_at
                    )),
                    None => text.push_str(
                        "no run accepted as the baseline yet (`assay runs accept latest`)\n",
                    ),
                }
                out(&text);
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
            let by = by.clone().unwrap_or_else(|| {
                assay_harness::accepted::default_user(&|k| std::env::var(k).ok())
            });
            let a = assay_harness::accepted::accept(
                &settings.root,
                results,
                run,
                &by,
                note.as_deref(),
            )?;
            if *json {
                out(&format!("{}\n", serde_json::to_string_pretty(&a)?));
            } else {
                out(&format!(
                    "accepted run {} (score {:.1}, {}) as the baseline, by {}\n  copied to {} (commit baseline/ so CI compares with it)\n  `assay run --baseline accepted` now compares with it\n",
                    a.id,
                    a.combined_score,
                    a.health_status,
                    a.accepted_by,
                    a.results_path(&settings.root).display()
                ));
            }
        }
    }
    Ok(Exit::Success)
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
