//! The saved runs of a project (`results/results_<stamp>.json`): listing them, reading one,
//! and comparing two ([`assay_core::rundiff`]). Read-only.
//!
//! A run's id is its file's stamp: `2026-11-25-0915` for `results_2026-11-25-0915.json`, or
//! `2026-11-25-0915-2` for the second run saved in that minute. Ids are checked before any
//! path is built from them ([`check_run_id`]), so an id can never name a file outside the
//! results folder.
//!
//! ```no_run
//! # fn main() -> Result<(), assay_run::runs::RunsError> {
//! let dir = std::path::Path::new("examples/coparent/results");
//! let runs = assay_run::runs::list_runs(dir)?;
//! if let [newest, previous, ..] = runs.as_slice() {
//!     let diff = assay_run::runs::diff(dir, &previous.id, &newest.id)?;
//!     println!("{} better, {} worse", diff.cases.better.len(), diff.cases.worse.len());
//! }
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use assay_core::rundiff::{RunDiff, diff_runs_scored};
use assay_core::runlog::{Health, RunLog};
use serde::Serialize;

/// What can go wrong reading saved runs.
#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    /// The id is not a run id (`YYYY-MM-DD-HHMM`, optionally `-N`).
    #[error(
        "`{0}` is not a run id (expected the stamp of a results file, like 2026-11-25-0915 or 2026-11-25-0915-2)"
    )]
    BadId(String),
    /// No saved run has this id.
    #[error("no saved run `{id}` (no {file})")]
    NotFound {
        /// The id.
        id: String,
        /// The file looked for.
        file: String,
    },
    /// A results file cannot be read or is not a RunLog.
    #[error("{path}: {message}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// One saved run, as a list shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunEntry {
    /// The run's id (its file stamp).
    pub id: String,
    /// The RunLog's own id.
    pub run_id: String,
    /// When it started (RFC 3339).
    pub timestamp: String,
    /// The weighted score.
    pub combined_score: f64,
    /// Its health.
    pub health_status: Health,
    /// Cases run.
    pub total_tests: usize,
    /// Hard-failed cases.
    pub hard_fails: usize,
    /// Cases with a critical failure.
    pub critical_failures: usize,
    /// Cases an infrastructure error kept from a score.
    pub error_count: usize,
    /// The banks that ran (keys).
    pub banks: Vec<String>,
    /// Each scored bank's score (key → average out of 100), as the run's summary has it.
    pub bank_scores: std::collections::BTreeMap<String, f64>,
    /// How long it took.
    pub duration_ms: u64,
    /// The RunLog's file.
    pub json: PathBuf,
    /// The Markdown report beside it, when there is one.
    pub markdown: Option<PathBuf>,
    /// The shard of the suite it ran (`hash:i/n`), when it ran one: part of a run, never
    /// `latest` nor a baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// What made it a partial run (`--test ID`, `--topic T`, `--changed-since RUN (15 of 61
    /// cases)`, `--banks …`; [`assay_core::runlog::RunFilters::partial`]); empty for a run of
    /// the whole suite.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partial: Vec<String>,
    /// The pending drafts its banks included (`--include-drafts`), when there were some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drafts: Option<usize>,
    /// How many shards it was merged from (`assay runs merge`), when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged: Option<u32>,
}

impl RunEntry {
    /// Whether it is a run of the whole suite as it stands: no shard, not partial, no drafts.
    /// Only such a run can be the accepted baseline, and only such runs share the runs chart's
    /// line.
    pub fn is_full(&self) -> bool {
        self.shard.is_none() && self.partial.is_empty() && self.drafts.is_none()
    }

    /// What sets it apart from a run of the whole suite, in a few words (`shard hash:1/3`,
    /// `partial: --test SEM-01`, `3 drafts`), for lists and the chart; `None` for a full run.
    pub fn apart(&self) -> Option<String> {
        apart(self.shard.as_deref(), &self.partial, self.drafts)
    }
}

/// What sets the run `log` apart from a run of the whole suite, as [`RunEntry::apart`] says it.
pub fn apart_of(log: &RunLog) -> Option<String> {
    let shard = log.shard.as_ref().map(|s| s.shard.to_string());
    apart(
        shard.as_deref(),
        &log.filters.partial(),
        log.filters.drafts.filter(|n| *n > 0),
    )
}

fn apart(shard: Option<&str>, partial: &[String], drafts: Option<usize>) -> Option<String> {
    let mut why = Vec::new();
    if let Some(shard) = shard {
        why.push(format!("shard {shard}"));
    }
    if !partial.is_empty() {
        why.push(format!("partial: {}", partial.join(", ")));
    }
    if let Some(n) = drafts {
        why.push(format!("{n} draft{}", if n == 1 { "" } else { "s" }));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// Whether `id` is a run id: `YYYY-MM-DD-HHMM` of digits, optionally followed by `-N`.
pub fn check_run_id(id: &str) -> Result<(), RunsError> {
    let bad = || RunsError::BadId(id.to_owned());
    let parts: Vec<&str> = id.split('-').collect();
    let digits = |s: &str, n: Option<usize>| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && n.is_none_or(|n| s.len() == n)
    };
    let stamp_ok = parts.len() >= 4
        && digits(parts[0], Some(4))
        && digits(parts[1], Some(2))
        && digits(parts[2], Some(2))
        && digits(parts[3], Some(4));
    match parts.len() {
        4 if stamp_ok => Ok(()),
        5 if stamp_ok && digits(parts[4], None) && parts[4].len() <= 6 => Ok(()),
        _ => Err(bad()),
    }
}

/// The id of a results file name (`results_<id>.json`), if it is one.
fn id_of(file_name: &str) -> Option<&str> {
    let id = file_name.strip_prefix("results_")?.strip_suffix(".json")?;
    check_run_id(id).ok().map(|()| id)
}

/// The saved runs in `results_dir`, newest first (by timestamp, then id). A missing folder
/// holds none; a file that is not a RunLog is left out with a warning.
pub fn list_runs(results_dir: &Path) -> Result<Vec<RunEntry>, RunsError> {
    let entries = match std::fs::read_dir(results_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(RunsError::Unreadable {
                path: results_dir.to_owned(),
                message: format!("cannot read the folder: {e}"),
            });
        }
    };
    let mut runs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(id_of) else {
            continue;
        };
        match load_run(results_dir, id) {
            Ok(log) => runs.push(entry_of(results_dir, id, &log)),
            Err(e) => tracing::warn!("left out of the run list: {e}"),
        }
    }
    runs.sort_by(|a, b| {
        b.timestamp
            .cmp(&a.timestamp)
            .then_with(|| natural(&b.id).cmp(&natural(&a.id)))
    });
    Ok(runs)
}

/// An id as (stamp, n) so that `-10` sorts after `-9`.
fn natural(id: &str) -> (&str, u64) {
    let stamp = id.get(..15).unwrap_or(id);
    let n = id.get(16..).and_then(|n| n.parse().ok()).unwrap_or(1);
    (stamp, n)
}

fn entry_of(results_dir: &Path, id: &str, log: &RunLog) -> RunEntry {
    let s = &log.summary;
    let markdown = results_dir.join(format!("report_{id}.md"));
    RunEntry {
        id: id.to_owned(),
        run_id: log.run_id.clone(),
        timestamp: log.timestamp.clone(),
        combined_score: s.combined_score,
        health_status: s.health_status,
        total_tests: s.total_tests,
        hard_fails: s.hard_fail_count,
        critical_failures: s.critical_failures.len(),
        error_count: s.error_count,
        banks: s
            .component_scores
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| k.clone())
            .collect(),
        bank_scores: s
            .component_scores
            .iter()
            .filter_map(|(k, v)| v.map(|v| (k.clone(), v)))
            .collect(),
        duration_ms: log.duration_ms,
        json: results_dir.join(format!("results_{id}.json")),
        markdown: markdown.is_file().then_some(markdown),
        shard: log.shard.as_ref().map(|s| s.shard.to_string()),
        partial: log.filters.partial(),
        drafts: log.filters.drafts.filter(|n| *n > 0),
        merged: log.merged.as_ref().map(|m| m.count),
    }
}

/// The RunLog of the saved run `id`.
pub fn load_run(results_dir: &Path, id: &str) -> Result<RunLog, RunsError> {
    check_run_id(id)?;
    let file = format!("results_{id}.json");
    let path = results_dir.join(&file);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RunsError::NotFound {
                id: id.to_owned(),
                file,
            });
        }
        Err(e) => {
            return Err(RunsError::Unreadable {
                path,
                message: format!("cannot read: {e}"),
            });
        }
    };
    serde_json::from_str(&text).map_err(|e| RunsError::Unreadable {
        path,
        message: format!("not a RunLog: {e}"),
    })
}

/// The saved run whose run id is `run_id` among those saved with the stamp of `timestamp`
/// (`results_<stamp>.json`, `results_<stamp>-2.json`, …): its id and RunLog.
pub fn find_saved(results_dir: &Path, timestamp: &str, run_id: &str) -> Option<(String, RunLog)> {
    let stamp = assay_project::results::stamp(timestamp);
    (1..10_000)
        .map(|n| {
            if n == 1 {
                stamp.clone()
            } else {
                format!("{stamp}-{n}")
            }
        })
        .take_while(|id| results_dir.join(format!("results_{id}.json")).exists())
        .find_map(|id| {
            load_run(results_dir, &id)
                .ok()
                .filter(|log| log.run_id == run_id)
                .map(|log| (id, log))
        })
}

/// The files of the saved run `id`.
pub fn saved_paths(
    results_dir: &Path,
    id: &str,
    log: &RunLog,
) -> assay_project::results::SavedResults {
    assay_project::results::SavedResults {
        json: results_dir.join(format!("results_{id}.json")),
        markdown: results_dir.join(format!("report_{id}.md")),
        html: results_dir.join(format!("report_{id}.html")),
        cases: log.cases.as_ref().map(|c| results_dir.join(&c.file)),
    }
}

/// Compares the saved run `before` with the saved run `after`.
pub fn diff(results_dir: &Path, before: &str, after: &str) -> Result<RunDiff, RunsError> {
    let a = load_run(results_dir, before)?;
    let b = load_run(results_dir, after)?;
    let scores = |log: &RunLog| {
        let file = crate::caselog::cases_file(results_dir, log);
        crate::caselog::case_scores(log, file.as_deref()).map_err(|e| RunsError::Unreadable {
            path: file.unwrap_or_default(),
            message: e.to_string(),
        })
    };
    Ok(diff_runs_scored(&a, &b, &scores(&a)?, &scores(&b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_stamps() {
        for ok in ["2026-11-25-0915", "2026-11-25-0915-2", "2026-11-25-0915-10"] {
            assert!(check_run_id(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "..",
            "../etc/passwd",
            "2026-11-25",
            "2026-11-25-0915/..",
            "2026-11-25-0915-",
            "2026-11-25-091",
            "2026-11-25-0915-2-3",
            "results_2026-11-25-0915",
            "2026-11-25-0915\0",
        ] {
            assert!(
                matches!(check_run_id(bad), Err(RunsError::BadId(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            id_of("results_2026-11-25-0915-2.json"),
            Some("2026-11-25-0915-2")
        );
        assert_eq!(id_of("report_2026-11-25-0915.md"), None);
        assert!(natural("2026-11-25-0915-10") > natural("2026-11-25-0915-9"));
        assert!(natural("2026-11-25-0915-2") > natural("2026-11-25-0915"));
    }

    #[test]
    fn missing_folder_has_no_runs_and_unknown_ids_are_not_found() {
        let dir = tempfile::tempdir().unwrap();
        assert!(list_runs(&dir.path().join("results")).unwrap().is_empty());
        assert!(matches!(
            load_run(dir.path(), "2026-01-01-0000"),
            Err(RunsError::NotFound { .. })
        ));
        std::fs::write(dir.path().join("results_2026-01-01-0000.json"), "{}").unwrap();
        assert!(matches!(
            load_run(dir.path(), "2026-01-01-0000"),
            Err(RunsError::Unreadable { .. })
        ));
        assert!(list_runs(dir.path()).unwrap().is_empty());
    }
}
