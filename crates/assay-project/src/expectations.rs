//! Versioned expectations of semantic cases (000 §4).
//!
//! History files `test_banks/semantic/history/expectations_<date>.json` are read newest first by
//! file name. For each case, in this order (000 §4.2: clinical judgment trumps calibration):
//!
//! 1. the newest `human_override` for the case in any history file, even when a later file
//!    holds a calibration for it (the seed's sample code would let that later calibration
//!    shadow the override; assay does not);
//! 2. otherwise the `updated` expectations of the newest calibration entry for the case;
//! 3. otherwise the bank's own expectations.
//!
//! Within one file, a later entry is newer than an earlier one. History files are only read.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use assay_core::bank::{ExpectationSet, RankCheck, SemanticCase};
use assay_core::runlog::ExpectationSources;
use assay_kb::datafile::{self, DataError};
use serde::{Deserialize, Serialize};

/// A human override in a history entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HumanOverride {
    /// Replaces the primary expectations.
    #[serde(default)]
    pub expected_primary: Vec<String>,
    /// Replaces the secondary expectations.
    #[serde(default)]
    pub expected_secondary: Vec<String>,
    /// Replaces the exclusions.
    #[serde(default)]
    pub not_expected: Vec<String>,
    /// Replaces the rank checks.
    #[serde(default)]
    pub rank_check: Vec<RankCheck>,
    /// When it was decided (`YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_date: Option<String>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
}

impl HumanOverride {
    /// The expectations it sets.
    pub fn expectations(&self) -> ExpectationSet {
        ExpectationSet {
            expected_primary: self.expected_primary.clone(),
            expected_secondary: self.expected_secondary.clone(),
            not_expected: self.not_expected.clone(),
            rank_check: self.rank_check.clone(),
        }
    }
}

/// One change in a history file: a case's expectations before and after a calibration, or a
/// human override.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryChange {
    /// The case.
    pub test_id: String,
    /// The expectations before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<ExpectationSet>,
    /// The calibrated expectations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<ExpectationSet>,
    /// The calibrating model's explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opus_reasoning: Option<String>,
    /// A clinician's decision, which wins over any calibration.
    #[serde(default)]
    pub human_override: Option<HumanOverride>,
}

/// A history file (`test_banks/semantic/history/expectations_<date>.json`): the expectations
/// one calibration or override changed. History files are append-only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryFile {
    /// The JSON Schema the file follows, for editors that complete and check it (`assay
    /// schema`); assay itself does not read it.
    #[serde(rename = "$schema", default, skip_serializing)]
    pub schema: Option<String>,
    /// When the calibration ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it ran (`kb_entity_added`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_trigger: Option<String>,
    /// The KB version it saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kb_version: Option<String>,
    /// The changed cases.
    pub changes: Vec<HistoryChange>,
    /// Cases left as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchanged_count: Option<usize>,
    /// Cases changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_count: Option<usize>,
}

/// Where a case's expectations came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectationSource {
    /// The bank itself.
    Original,
    /// A calibration; the date is the history file's name minus `expectations_`.
    Calibration(String),
    /// A human override, with its `override_date` (or `unknown`).
    HumanOverride(String),
}

impl fmt::Display for ExpectationSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpectationSource::Original => f.write_str("original"),
            ExpectationSource::Calibration(date) => write!(f, "opus_{date}"),
            ExpectationSource::HumanOverride(date) => write!(f, "human_override_{date}"),
        }
    }
}

/// A case's expectations after resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The expectations in force.
    pub expectations: ExpectationSet,
    /// Where they came from.
    pub source: ExpectationSource,
    /// The history file they came from, if any.
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone)]
struct Entry {
    file: PathBuf,
    stem_date: String,
    change: HistoryChange,
}

/// Resolves semantic expectations against the history folder.
#[derive(Debug, Clone, Default)]
pub struct ExpectationLoader {
    /// Per test id, entries newest first.
    entries: HashMap<String, Vec<Entry>>,
    files: Vec<PathBuf>,
}

/// The history files of a folder, newest first by file name.
pub fn history_files(history_dir: &Path) -> Result<Vec<PathBuf>, DataError> {
    if !history_dir.is_dir() {
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(history_dir)
        .map_err(|e| DataError::new(history_dir, format!("cannot read history folder: {e}")))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| DataError::new(history_dir, e.to_string()))?
            .path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if name.starts_with("expectations_") && is_json && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    files.reverse();
    Ok(files)
}

impl ExpectationLoader {
    /// Reads every history file. A malformed file is an error naming file, line and column.
    pub fn load(
        history_dir: &Path,
        warn: &mut dyn FnMut(String),
    ) -> Result<ExpectationLoader, DataError> {
        let files = history_files(history_dir)?;
        let mut entries: HashMap<String, Vec<Entry>> = HashMap::new();
        for file in &files {
            let history: HistoryFile = datafile::read(file, warn)?;
            let stem = file
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            let stem_date = stem
                .strip_prefix("expectations_")
                .unwrap_or(stem)
                .to_owned();
            // Later entries in a file are newer: walk them backwards.
            for (i, change) in history.changes.into_iter().enumerate().rev() {
                if change.updated.is_none() && change.human_override.is_none() {
                    return Err(DataError::new(
                        file,
                        format!(
                            "changes[{i}] ({}): needs `updated` or `human_override`",
                            change.test_id
                        ),
                    ));
                }
                entries
                    .entry(change.test_id.clone())
                    .or_default()
                    .push(Entry {
                        file: file.clone(),
                        stem_date: stem_date.clone(),
                        change,
                    });
            }
        }
        Ok(ExpectationLoader { entries, files })
    }

    /// The history files read, newest first.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Test ids named in history that are not in `known`.
    pub fn unknown_test_ids<'a>(&'a self, known: &'a dyn Fn(&str) -> bool) -> Vec<&'a str> {
        let mut ids: Vec<&str> = self
            .entries
            .keys()
            .map(String::as_str)
            .filter(|id| !known(id))
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The expectations in force for `case`.
    pub fn resolve(&self, case: &SemanticCase) -> Resolved {
        let entries = self
            .entries
            .get(&case.test_id)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if let Some((entry, o)) = entries
            .iter()
            .find_map(|e| e.change.human_override.as_ref().map(|o| (e, o)))
        {
            return Resolved {
                expectations: o.expectations(),
                source: ExpectationSource::HumanOverride(
                    o.override_date
                        .clone()
                        .unwrap_or_else(|| "unknown".to_owned()),
                ),
                file: Some(entry.file.clone()),
            };
        }
        if let Some((entry, updated)) = entries
            .iter()
            .find_map(|e| e.change.updated.as_ref().map(|u| (e, u)))
        {
            return Resolved {
                expectations: updated.clone(),
                source: ExpectationSource::Calibration(entry.stem_date.clone()),
                file: Some(entry.file.clone()),
            };
        }
        Resolved {
            expectations: case.original_expectations(),
            source: ExpectationSource::Original,
            file: None,
        }
    }

    /// The human override in force for a case (the newest one in any history file), if any:
    /// the one [`ExpectationLoader::resolve`] uses.
    pub fn human_override(&self, test_id: &str) -> Option<&HumanOverride> {
        self.entries
            .get(test_id)?
            .iter()
            .find_map(|e| e.change.human_override.as_ref())
    }

    /// How many cases take their expectations from each source.
    pub fn summary<'a>(
        &self,
        cases: impl IntoIterator<Item = &'a SemanticCase>,
    ) -> ExpectationSources {
        let mut s = ExpectationSources::default();
        for case in cases {
            match self.resolve(case).source {
                ExpectationSource::Original => s.original += 1,
                ExpectationSource::Calibration(_) => s.opus += 1,
                ExpectationSource::HumanOverride(_) => s.human_override += 1,
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn case(id: &str, primary: &str) -> SemanticCase {
        serde_json::from_value(json!({"test_id": id, "prompt": "p", "expected_primary": [primary]}))
            .unwrap()
    }

    fn change(id: &str, primary: &str, over: Option<(&str, &str)>) -> serde_json::Value {
        json!({
            "test_id": id,
            "previous": {"expected_primary": ["old"]},
            "updated": {"expected_primary": [primary]},
            "opus_reasoning": "because",
            "human_override": over.map(|(p, date)| json!({"expected_primary": [p], "override_date": date}))
        })
    }

    fn history(files: &[(&str, Vec<serde_json::Value>)]) -> (tempfile::TempDir, ExpectationLoader) {
        let dir = tempfile::tempdir().unwrap();
        for (name, changes) in files {
            let body = json!({"version": "x", "changes": changes, "unchanged_count": 0, "changed_count": changes.len()});
            std::fs::write(
                dir.path().join(name),
                serde_json::to_string_pretty(&body).unwrap(),
            )
            .unwrap();
        }
        let loader = ExpectationLoader::load(dir.path(), &mut |w| panic!("{w}")).unwrap();
        (dir, loader)
    }

    #[test]
    fn original_without_history() {
        let (_d, l) = history(&[]);
        let r = l.resolve(&case("T1", "a"));
        assert_eq!(
            (r.source.to_string(), r.expectations.expected_primary),
            ("original".into(), vec!["a".into()])
        );
    }

    #[test]
    fn a_history_entry_wins_over_the_original() {
        let (_d, l) = history(&[(
            "expectations_2026-01-01.json",
            vec![change("T1", "b", None)],
        )]);
        let r = l.resolve(&case("T1", "a"));
        assert_eq!(r.source.to_string(), "opus_2026-01-01");
        assert_eq!(r.expectations.expected_primary, vec!["b"]);
    }

    #[test]
    fn the_newest_calibration_wins() {
        let (_d, l) = history(&[
            (
                "expectations_2026-01-01.json",
                vec![change("T1", "b", None)],
            ),
            (
                "expectations_2026-02-01.json",
                vec![change("T1", "c", None)],
            ),
        ]);
        assert_eq!(
            l.resolve(&case("T1", "a")).expectations.expected_primary,
            vec!["c"]
        );
    }

    #[test]
    fn a_human_override_wins_over_the_history_entry() {
        let (_d, l) = history(&[(
            "expectations_2026-01-01.json",
            vec![change("T1", "b", Some(("h", "2026-01-03")))],
        )]);
        let r = l.resolve(&case("T1", "a"));
        assert_eq!(r.source.to_string(), "human_override_2026-01-03");
        assert_eq!(r.expectations.expected_primary, vec!["h"]);
    }

    #[test]
    fn an_older_override_wins_over_a_later_calibration() {
        let (_d, l) = history(&[
            (
                "expectations_2026-01-01.json",
                vec![change("T1", "b", Some(("h", "2026-01-03")))],
            ),
            (
                "expectations_2026-03-01.json",
                vec![change("T1", "c", None)],
            ),
        ]);
        assert_eq!(
            l.resolve(&case("T1", "a")).source.to_string(),
            "human_override_2026-01-03"
        );
    }

    #[test]
    fn the_newest_override_wins_and_later_entries_in_a_file_are_newer() {
        let (_d, l) = history(&[
            (
                "expectations_2026-01-01.json",
                vec![change("T1", "b", Some(("h1", "2026-01-02")))],
            ),
            (
                "expectations_2026-02-01.json",
                vec![
                    change("T1", "b", Some(("h2", "2026-02-02"))),
                    change("T1", "b", Some(("h3", "2026-02-03"))),
                ],
            ),
        ]);
        assert_eq!(
            l.resolve(&case("T1", "a")).expectations.expected_primary,
            vec!["h3"]
        );
    }

    #[test]
    fn summary_counts_sources() {
        let (_d, l) = history(&[(
            "expectations_2026-01-01.json",
            vec![
                change("T1", "b", None),
                change("T2", "b", Some(("h", "2026-01-02"))),
            ],
        )]);
        let cases = [case("T1", "a"), case("T2", "a"), case("T3", "a")];
        assert_eq!(
            l.summary(&cases),
            ExpectationSources {
                original: 1,
                opus: 1,
                human_override: 1
            }
        );
    }

    #[test]
    fn an_entry_with_neither_update_nor_override_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("expectations_2026-01-01.json"),
            r#"{"changes": [{"test_id": "T1"}]}"#,
        )
        .unwrap();
        let e = ExpectationLoader::load(dir.path(), &mut |_| {}).unwrap_err();
        assert!(
            e.to_string()
                .contains("changes[0] (T1): needs `updated` or `human_override`"),
            "{e}"
        );
    }
}
