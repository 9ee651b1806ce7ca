//! Appending to the expectation history (000 §4.4): calibrations and human overrides each add a
//! NEW file `test_banks/semantic/history/expectations_<date>[_NN].json`; existing history files
//! are never modified or replaced.
//!
//! The loader reads history files newest first by file name, so a new file must sort after every
//! file already there. The first file of a day is `expectations_<date>.json`; later ones that day
//! are `expectations_<date>_02.json`, `_03`, … up to `_99` (`_` sorts after `.`, so `_02` comes
//! after the plain name). Its calibration source label is then `opus_<date>_02`: the seed's
//! rule (the file stem minus `expectations_`), which names the exact file.

use std::path::{Path, PathBuf};

use assay_core::bank::BankType;
use assay_kb::datafile::DataError;

use crate::HarnessError;
use crate::banks::{self, HISTORY_DIR};
use crate::expectations::{HistoryFile, history_files};
use crate::results::write_new;
use crate::settings::ProjectSettings;

/// The most files one day can have (`_02` … `_99` after the plain name).
const MAX_PER_DAY: u32 = 99;

/// The semantic bank's history folder of a project.
pub fn history_dir(settings: &ProjectSettings) -> PathBuf {
    banks::bank_dir(&settings.banks_dir, BankType::Semantic).join(HISTORY_DIR)
}

/// `<prefix>_<date>.json` for `n == 1`, else `<prefix>_<date>_<NN>.json`.
pub fn dated_name(prefix: &str, date: &str, n: u32) -> String {
    if n <= 1 {
        format!("{prefix}_{date}.json")
    } else {
        format!("{prefix}_{date}_{n:02}.json")
    }
}

/// Writes `contents` to the first free `<dir>/<prefix>_<date>[_NN].json` that sorts after
/// `after` (a file name, if any), creating `dir`. Never replaces a file: a name taken in the
/// meantime moves on to the next one.
pub fn write_dated_new(
    dir: &Path,
    prefix: &str,
    date: &str,
    after: Option<&str>,
    contents: &[u8],
) -> Result<PathBuf, HarnessError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        HarnessError::Infrastructure(format!("{}: cannot create folder: {e}", dir.display()))
    })?;
    for n in 1..=MAX_PER_DAY {
        let name = dated_name(prefix, date, n);
        if after.is_some_and(|a| name.as_str() <= a) {
            continue;
        }
        let path = dir.join(&name);
        if path.exists() {
            continue;
        }
        match write_new(&path, contents) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(HarnessError::Infrastructure(format!(
                    "{}: cannot write: {e}",
                    path.display()
                )));
            }
        }
    }
    let newest = after.map_or_else(String::new, |a| format!("; newest existing file: {a}"));
    Err(HarnessError::Usage(format!(
        "{}: no free file name {} that sorts newest{newest}",
        dir.display(),
        dated_name(prefix, date, 1)
    )))
}

/// Appends `history` to the history folder `dir` as a new file dated `date` (`YYYY-MM-DD`) that
/// sorts after every existing history file, and returns its path.
///
/// Fails (writing nothing) when an existing file already sorts after every name `date` allows,
/// for instance a file dated in the future: the new file would not be the newest.
pub fn append_history(
    dir: &Path,
    date: &str,
    history: &HistoryFile,
) -> Result<PathBuf, HarnessError> {
    let newest = history_files(dir)?
        .first()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .map(str::to_owned);
    if let Some(newest) = &newest
        && newest.as_str() >= dated_name("expectations", date, MAX_PER_DAY).as_str()
    {
        return Err(DataError::new(
            dir.join(newest),
            format!(
                "this history file sorts after every file name dated {date}, so a new file would not be the newest (is it dated in the future?)"
            ),
        )
        .into());
    }
    let mut text = serde_json::to_string_pretty(history)
        .map_err(|e| HarnessError::Infrastructure(format!("cannot serialise history: {e}")))?;
    text.push('\n');
    write_dated_new(
        dir,
        "expectations",
        date,
        newest.as_deref(),
        text.as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> HistoryFile {
        HistoryFile {
            schema: None,
            version: Some("2026-11-21T10:00:00Z".into()),
            calibration_trigger: None,
            kb_version: None,
            changes: Vec::new(),
            unchanged_count: Some(0),
            changed_count: Some(0),
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        history_files(dir)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn same_day_files_get_counters_that_sort_newest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("history");
        for _ in 0..3 {
            append_history(&d, "2026-11-21", &file()).unwrap();
        }
        append_history(&d, "2026-11-22", &file()).unwrap();
        assert_eq!(
            names(&d),
            [
                "expectations_2026-11-22.json",
                "expectations_2026-11-21_03.json",
                "expectations_2026-11-21_02.json",
                "expectations_2026-11-21.json",
            ]
        );
    }

    #[test]
    fn the_loader_resolves_a_same_day_counter_file_as_newest() {
        use crate::expectations::ExpectationLoader;
        let dir = tempfile::tempdir().unwrap();
        let change = |p: &str| {
            serde_json::json!({"changes": [{"test_id": "T1", "updated": {"expected_primary": [p]}}]})
                .to_string()
        };
        std::fs::write(dir.path().join("expectations_2026-11-21.json"), change("b")).unwrap();
        std::fs::write(
            dir.path().join("expectations_2026-11-21_02.json"),
            change("c"),
        )
        .unwrap();
        std::fs::write(dir.path().join("expectations_2026-11-20.json"), change("a")).unwrap();
        let loader = ExpectationLoader::load(dir.path(), &mut |w| panic!("{w}")).unwrap();
        let case: assay_core::bank::SemanticCase = serde_json::from_value(
            serde_json::json!({"test_id": "T1", "prompt": "p", "expected_primary": ["o"]}),
        )
        .unwrap();
        let r = loader.resolve(&case);
        assert_eq!(r.expectations.expected_primary, ["c"]);
        assert_eq!(r.source.to_string(), "opus_2026-11-21_02");
        assert!(loader.files()[0].ends_with("expectations_2026-11-21_02.json"));
    }

    #[test]
    fn a_new_file_sorts_after_a_later_counter_of_the_same_day() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("expectations_2026-11-21_05.json"), "{}").unwrap();
        let p = append_history(dir.path(), "2026-11-21", &file()).unwrap();
        assert!(p.ends_with("expectations_2026-11-21_06.json"), "{p:?}");
    }

    #[test]
    fn a_file_dated_in_the_future_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("expectations_2027-01-01.json"), "{}").unwrap();
        let e = append_history(dir.path(), "2026-11-21", &file()).unwrap_err();
        assert!(
            e.to_string().contains("expectations_2027-01-01.json"),
            "{e}"
        );
        assert_eq!(names(dir.path()), ["expectations_2027-01-01.json"]);
    }
}
