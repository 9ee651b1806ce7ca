//! The accepted baseline: the run a team has looked at and agreed to compare later runs with
//! (`assay runs accept`, `assay run --baseline accepted`).
//!
//! `latest` is the newest saved run, whatever it was like: after a bad run, the next one is
//! compared with the bad one. An accepted run stays the baseline until someone accepts another.
//! Accepting copies the run into the project's `baseline/` folder (its RunLog, and its run log
//! when it has one), so the baseline can be committed and a CI job on a fresh checkout, which
//! has no `results/`, compares with it:
//!
//! | file | what |
//! |---|---|
//! | `baseline/accepted.json` | the current acceptance: which run, its score, who accepted it and when |
//! | `baseline/results_<id>.json` | that run's RunLog (and `cases_<id>.jsonl`, its run log, when it has one) |
//! | `baseline/history.jsonl` | every acceptance, oldest first; only ever appended to |
//!
//! Every file is written atomically (a temporary file, then a rename), the copy before the
//! record that points at it, so an interrupted accept leaves the previous acceptance whole.
//!
//! Only a run of the whole suite as it stands can be the baseline: a shard, a partial run
//! (`--test`, `--topic`, `--changed-since`, a `--banks` subset) and a run that included pending
//! drafts are refused, naming why, because a later run compared with one would report
//! regressions in every case it never ran. A CRITICAL run, or one with errored cases, is
//! accepted with a warning, recorded with the acceptance (`warnings`).

use std::path::{Path, PathBuf};

use assay_core::runlog::{Health, RunLog};
use serde::{Deserialize, Serialize};

use crate::HarnessError;
use crate::runs::{self, RunEntry};
use assay_project::results::write_replace;

/// The folder, under the project, that holds the accepted baseline.
pub const DIR: &str = "baseline";
/// The current acceptance, in [`DIR`].
pub const RECORD: &str = "accepted.json";
/// Every acceptance, in [`DIR`].
pub const HISTORY: &str = "history.jsonl";

/// One acceptance of a run as the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Acceptance {
    /// The saved run's id (its results file's stamp).
    pub id: String,
    /// The RunLog's own id.
    pub run_id: String,
    /// When the run started.
    pub run_timestamp: String,
    /// Its weighted score.
    pub combined_score: f64,
    /// Its health.
    pub health_status: Health,
    /// When it was accepted (RFC 3339).
    pub accepted_at: String,
    /// Who accepted it.
    pub accepted_by: String,
    /// Why, if they said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The copy of its RunLog, relative to [`DIR`].
    pub results: String,
    /// What was wrong with the run when it was accepted (CRITICAL health, errored cases), as
    /// the acceptance warned; absent when nothing was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Acceptance {
    /// The copy of the accepted RunLog.
    pub fn results_path(&self, root: &Path) -> PathBuf {
        root.join(DIR).join(&self.results)
    }

    /// What a comparison calls it: "the accepted run 2026-11-28-0915 (accepted by ana on …)".
    pub fn label(&self) -> String {
        format!(
            "the accepted run {} (accepted by {} on {})",
            self.id,
            self.accepted_by,
            self.accepted_at.get(..10).unwrap_or(&self.accepted_at)
        )
    }
}

fn io(path: &Path, e: &std::io::Error) -> HarnessError {
    HarnessError::io(path, e)
}

/// The current acceptance of the project at `root`, if a run has been accepted.
pub fn current(root: &Path) -> Result<Option<Acceptance>, HarnessError> {
    let path = root.join(DIR).join(RECORD);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path, &e)),
    };
    let mut ignore = |_: String| {};
    let record: Acceptance =
        assay_kb::datafile::parse(&path, &text, assay_kb::datafile::Format::Json, &mut ignore)?;
    let copy = record.results_path(root);
    if !copy.is_file() {
        return Err(HarnessError::Data(assay_kb::datafile::DataError::new(
            &path,
            format!(
                "the accepted run's copy {} is missing; accept a run again (`assay runs accept latest`)",
                copy.display()
            ),
        )));
    }
    Ok(Some(record))
}

/// Every acceptance of the project at `root`, oldest first.
pub fn history(root: &Path) -> Result<Vec<Acceptance>, HarnessError> {
    let path = root.join(DIR).join(HISTORY);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&path, &e)),
    };
    let mut ignore = |_: String| {};
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            assay_kb::datafile::parse(&path, line, assay_kb::datafile::Format::Json, &mut ignore)
                .map_err(|mut e| {
                    e.line = Some(i + 1);
                    HarnessError::Data(e)
                })
        })
        .collect()
}

/// Accepts the saved run `spec` names (`latest` or a saved run's id) in `results_dir` as the
/// baseline of the project at `root`, recording `by`, the time, `note` and what is wrong with
/// the run ([`Acceptance::warnings`]). A shard, a partial run and a run with drafts are refused
/// (a usage error naming why, and the newest run of the whole suite when there is one); nothing
/// is written then.
pub fn accept(
    root: &Path,
    results_dir: &Path,
    spec: &str,
    by: &str,
    note: Option<&str>,
) -> Result<Acceptance, HarnessError> {
    let spec = spec.trim();
    let id = if spec == "latest" {
        runs::list_runs(results_dir)
            .map_err(|e| HarnessError::Usage(e.to_string()))?
            .into_iter()
            .find(|r| r.shard.is_none())
            .map(|r| r.id)
            .ok_or_else(|| {
                HarnessError::Usage(format!(
                    "`latest`: there is no saved run in {} yet (`assay run` saves one)",
                    results_dir.display()
                ))
            })?
    } else {
        runs::check_run_id(spec).map_err(|e| HarnessError::Usage(e.to_string()))?;
        spec.to_owned()
    };
    let log: RunLog =
        runs::load_run(results_dir, &id).map_err(|e| HarnessError::Usage(e.to_string()))?;
    // A run too large for its RunLog to list whole is accepted with its run log (copied
    // below, checked against the digest the RunLog recorded).
    if log.cases.is_some() {
        crate::caselog::verify(
            &log,
            crate::caselog::cases_file(results_dir, &log).as_deref(),
        )
        .map_err(|e| HarnessError::Usage(format!("run {id} cannot be the baseline: {e}")))?;
    }
    refuse_partial(results_dir, &id, &log)?;
    let by = by.trim();
    if by.is_empty() {
        return Err(HarnessError::Usage(
            "--by: say who accepts the run".to_owned(),
        ));
    }
    let dir = root.join(DIR);
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, &e))?;
    let previous = current(root).ok().flatten();

    // The copies first: a record never points at a file that is not there.
    let source = results_dir.join(format!("results_{id}.json"));
    let results = format!("results_{id}.json");
    copy(&source, &dir.join(&results))?;
    if let Some(cases) = &log.cases {
        copy(&results_dir.join(&cases.file), &dir.join(&cases.file))?;
    }

    let record = Acceptance {
        id: id.clone(),
        run_id: log.run_id.clone(),
        run_timestamp: log.timestamp.clone(),
        combined_score: log.summary.combined_score,
        health_status: log.summary.health_status,
        accepted_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        accepted_by: by.to_owned(),
        note: note
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned),
        results,
        warnings: warnings(&log),
    };
    let line = serde_json::to_string(&record)
        .map_err(|e| HarnessError::Infrastructure(format!("cannot encode the acceptance: {e}")))?;
    // The history: what it held, and one more line.
    let history_path = dir.join(HISTORY);
    let mut history = match std::fs::read(&history_path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io(&history_path, &e)),
    };
    if !history.is_empty() && !history.ends_with(b"\n") {
        history.push(b'\n');
    }
    history.extend_from_slice(line.as_bytes());
    history.push(b'\n');
    write_replace(&history_path, &history).map_err(|e| io(&history_path, &e))?;
    let record_path = dir.join(RECORD);
    let pretty = serde_json::to_string_pretty(&record)
        .map_err(|e| HarnessError::Infrastructure(format!("cannot encode the acceptance: {e}")))?;
    write_replace(&record_path, format!("{pretty}\n").as_bytes())
        .map_err(|e| io(&record_path, &e))?;

    // The previous run's copies go, once nothing points at them.
    if let Some(old) = previous.filter(|old| old.id != id) {
        let _ = std::fs::remove_file(old.results_path(root));
        let old_cases = dir.join(format!("cases_{}.jsonl", old.id));
        let _ = std::fs::remove_file(old_cases);
    }
    Ok(record)
}

/// Refuses (a usage error naming why) a run that is not the whole suite run as it stands: a
/// shard, a partial run (`--test`, `--topic`, `--changed-since`, a `--banks` subset) or a run
/// that included pending drafts. A later run compared with such a run would find regressions
/// in every case it did not run ("new hard fail: … (– → 0)").
fn refuse_partial(results_dir: &Path, id: &str, log: &RunLog) -> Result<(), HarnessError> {
    let why = if let Some(shard) = &log.shard {
        format!(
            "run {id} ran shard {} of the suite, a part of it: merge the shards (`assay runs merge`) and accept the merged run",
            shard.shard
        )
    } else if log.filters.is_partial() {
        format!(
            "run {id} is a partial run ({}): a baseline must be a run of the whole suite, or later runs are compared with cases it never ran; run `assay run` without that selection and accept that run",
            log.filters.partial().join(", ")
        )
    } else if log.filters.has_drafts() {
        format!(
            "run {id} included {} pending draft(s) (`--include-drafts`): a baseline holds reviewed cases only; review the drafts (`assay generate review`), then run without --include-drafts and accept that run",
            log.filters.drafts.unwrap_or(0)
        )
    } else {
        return Ok(());
    };
    let newest_full = runs::list_runs(results_dir)
        .ok()
        .and_then(|all| all.into_iter().find(RunEntry::is_full))
        .filter(|r| r.id != id);
    Err(HarnessError::Usage(match newest_full {
        Some(r) => format!(
            "{why} (the newest run of the whole suite is {}: `assay runs accept {}`)",
            r.id, r.id
        ),
        None => why,
    }))
}

/// What is wrong with a run that may still be accepted: CRITICAL health (later runs are
/// compared with a failing run) and cases an infrastructure error kept from a score (compared
/// with nothing).
fn warnings(log: &RunLog) -> Vec<String> {
    let s = &log.summary;
    let mut out = Vec::new();
    if s.health_status == Health::Critical {
        let failures = if s.critical_failures.is_empty() {
            String::new()
        } else {
            let shown: Vec<&str> = s
                .critical_failures
                .iter()
                .take(5)
                .map(String::as_str)
                .collect();
            let more = s.critical_failures.len().saturating_sub(shown.len());
            format!(
                " (critical failures: {}{})",
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        };
        out.push(format!(
            "the accepted run's health is CRITICAL{failures}: later runs are compared with a failing run"
        ));
    }
    if s.error_count > 0 {
        out.push(format!(
            "the accepted run has {} errored case(s) (infrastructure errors, no score): later runs cannot be compared on them",
            s.error_count
        ));
    }
    out
}

/// Copies `from` to `to` atomically.
fn copy(from: &Path, to: &Path) -> Result<(), HarnessError> {
    let bytes = std::fs::read(from).map_err(|e| io(from, &e))?;
    write_replace(to, &bytes).map_err(|e| io(to, &e))
}

/// Who accepts a run when `--by` is not given: `ASSAY_USER`, else the login name.
pub fn default_user(env: &dyn Fn(&str) -> Option<String>) -> String {
    ["ASSAY_USER", "USER", "USERNAME"]
        .into_iter()
        .find_map(|k| env(k).filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
}
