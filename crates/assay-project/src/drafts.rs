//! Draft files (`assay generate`): `test_banks/drafts/<bank>/<generation>.json`, one per bank
//! and generation. A run ignores them unless asked (`assay run --include-drafts`, which runs the
//! pending ones); review (accept, edit, reject) rewrites them in place, atomically, and an
//! accepted draft is copied into a bank as an ordinary case that keeps its provenance.
//!
//! This module is the one reader and writer of draft files.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assay_core::answer::AnswerCase;
use assay_core::bank::{BankFile, BankType, PatternCase, SemanticCase, StateCase};
use assay_core::draft::{DRAFTS_DIR, DraftBank, DraftStatus};
use assay_kb::datafile::{self, DataError, Format};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::HarnessError;
use crate::banks::Located;

/// The banks `assay generate` drafts cases for (ALWAYS cases follow from the entities' load
/// mode and are not generated; answer drafts come only from `assay redteam --drafts`, and
/// review reads them beside these).
pub const DRAFT_BANKS: [BankType; 3] = [BankType::Semantic, BankType::State, BankType::Pattern];

/// `test_banks/drafts/`.
pub fn drafts_root(banks_dir: &Path) -> PathBuf {
    banks_dir.join(DRAFTS_DIR)
}

/// `test_banks/drafts/<bank>/`.
pub fn drafts_dir(banks_dir: &Path, bank: BankType) -> PathBuf {
    drafts_root(banks_dir).join(bank.key())
}

/// The draft files of one bank, sorted by name (generation ids sort by time).
pub fn draft_files(banks_dir: &Path, bank: BankType) -> Result<Vec<PathBuf>, DataError> {
    let dir = drafts_dir(banks_dir, bank);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| DataError::new(&dir, format!("cannot read draft folder: {e}")))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| DataError::new(&dir, e.to_string()))?
            .path();
        if path.is_file() && Format::from_path(&path) == Some(Format::Json) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Reads one draft file of a known bank, strictly (an unknown field is an error naming it).
pub fn read_draft_bank<C: DeserializeOwned>(
    path: &Path,
    bank: BankType,
) -> Result<DraftBank<C>, DataError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| DataError::new(path, format!("cannot read file: {e}")))?;
    let mut unknown = Vec::new();
    let file: DraftBank<C> = datafile::parse(path, &text, Format::Json, &mut |w| unknown.push(w))?;
    if let Some(first) = unknown.into_iter().next() {
        // Draft files are written by assay: a field it does not know is a damaged file.
        return Err(DataError::new(path, first));
    }
    if file.bank_type != bank {
        return Err(DataError::new(
            path,
            format!(
                "bank_type: {} does not match its folder `{DRAFTS_DIR}/{}/` (expected {})",
                file.bank_type.as_str(),
                bank.key(),
                bank.as_str()
            ),
        ));
    }
    Ok(file)
}

/// One draft file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded<C> {
    /// Where it is.
    pub path: PathBuf,
    /// What it holds.
    pub file: DraftBank<C>,
}

/// Every draft file of a project.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drafts {
    /// Semantic drafts.
    pub semantic: Vec<Loaded<SemanticCase>>,
    /// State drafts.
    pub state: Vec<Loaded<StateCase>>,
    /// Pattern drafts.
    pub pattern: Vec<Loaded<PatternCase>>,
    /// Answer drafts (`assay redteam --drafts` writes them; `assay generate` does not).
    pub answer: Vec<Loaded<AnswerCase>>,
}

fn load_kind<C: DeserializeOwned>(
    banks_dir: &Path,
    bank: BankType,
) -> Result<Vec<Loaded<C>>, DataError> {
    draft_files(banks_dir, bank)?
        .into_iter()
        .map(|path| {
            let file = read_draft_bank(&path, bank)?;
            Ok(Loaded { path, file })
        })
        .collect()
}

/// Reads every draft file under `banks_dir/drafts/`.
pub fn load_drafts(banks_dir: &Path) -> Result<Drafts, DataError> {
    Ok(Drafts {
        semantic: load_kind(banks_dir, BankType::Semantic)?,
        state: load_kind(banks_dir, BankType::State)?,
        pattern: load_kind(banks_dir, BankType::Pattern)?,
        answer: load_kind(banks_dir, BankType::Answer)?,
    })
}

/// The pending drafts of some files, as located cases (`index` is the draft's index in its file).
pub fn pending<C: Clone>(files: &[Loaded<C>]) -> Vec<Located<C>> {
    files
        .iter()
        .flat_map(|loaded| {
            loaded
                .file
                .drafts
                .iter()
                .enumerate()
                .filter(|(_, d)| d.status == DraftStatus::Pending)
                .map(|(index, d)| Located {
                    case: d.case.clone(),
                    file: loaded.path.clone(),
                    index,
                })
        })
        .collect()
}

impl Drafts {
    /// How many drafts there are, in every file.
    pub fn count(&self) -> usize {
        self.semantic
            .iter()
            .map(|l| l.file.drafts.len())
            .sum::<usize>()
            + self
                .state
                .iter()
                .map(|l| l.file.drafts.len())
                .sum::<usize>()
            + self
                .pattern
                .iter()
                .map(|l| l.file.drafts.len())
                .sum::<usize>()
            + self
                .answer
                .iter()
                .map(|l| l.file.drafts.len())
                .sum::<usize>()
    }
}

/// Writes a draft file atomically (temporary file, then rename), replacing the one at `path`.
pub fn write_draft_bank<C: Serialize>(
    path: &Path,
    file: &DraftBank<C>,
) -> Result<(), HarnessError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
    }
    let mut text = serde_json::to_string_pretty(file)
        .map_err(|e| HarnessError::Infrastructure(format!("{}: {e}", path.display())))?;
    text.push('\n');
    crate::results::write_replace(path, text.as_bytes()).map_err(|e| HarnessError::io(path, &e))
}

/// A new generation's id, from the time: `gen-20261128T141500Z` (unique to the second; a
/// caller that finds the file taken adds `-2`, `-3`, …).
pub fn new_generation_id(now: chrono::DateTime<chrono::Utc>) -> String {
    format!("gen-{}", now.format("%Y%m%dT%H%M%SZ"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draft_file_round_trips_and_a_wrong_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let banks = dir.path();
        let text = serde_json::json!({
            "bank_type": "STATE",
            "generation": "gen-1",
            "created": "2026-11-28T00:00:00Z",
            "drafts": [{
                "case": {
                    "test_id": "GEN-STATE-1",
                    "user_state": {"days_since_last": 6},
                    "expected_handlers": [],
                    "not_expected_handlers": ["welcome_back"],
                    "provenance": {"method": "boundary", "entity_id": "welcome_back",
                        "entity_versions": {"welcome_back": 2}, "generated_at": "2026-11-28T00:00:00Z"}
                }
            }]
        });
        let path = drafts_dir(banks, BankType::State).join("gen-1.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text.to_string()).unwrap();
        let drafts = load_drafts(banks).unwrap();
        assert_eq!(drafts.state.len(), 1);
        let pending = pending(&drafts.state);
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].case.test_id, "GEN-STATE-1");
        assert_eq!(
            pending[0].case.provenance.as_ref().unwrap().entity_versions["welcome_back"],
            2
        );

        // Written back and read again: the same file.
        write_draft_bank(&path, &drafts.state[0].file).unwrap();
        assert_eq!(load_drafts(banks).unwrap(), drafts);

        // A STATE file in the semantic folder is an error that names the field.
        let wrong = drafts_dir(banks, BankType::Semantic).join("gen-1.json");
        std::fs::create_dir_all(wrong.parent().unwrap()).unwrap();
        std::fs::write(
            &wrong,
            r#"{"bank_type":"STATE","generation":"g","created":"c","drafts":[]}"#,
        )
        .unwrap();
        let error = load_drafts(banks).unwrap_err().to_string();
        assert!(
            error.contains("semantic/gen-1.json") && error.contains("bank_type: STATE"),
            "{error}"
        );
    }

    #[test]
    fn an_unknown_field_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = drafts_dir(dir.path(), BankType::State).join("gen-1.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            r#"{"bank_type":"STATE","generation":"g","created":"c","drafts":[],"colour":1}"#,
        )
        .unwrap();
        let error = load_drafts(dir.path()).unwrap_err().to_string();
        assert!(error.contains("colour"), "{error}");
    }
}

/// The bank file accepted drafts go to, inside each bank's folder.
pub const GENERATED_BANK_FILE: &str = "generated.json";
/// The review lock, relative to the project.
pub const DRAFTS_LOCK_FILE: &str = ".assay/drafts.lock";
/// How long a review waits for another one to finish its write.
pub const DRAFTS_LOCK_WAIT: Duration = Duration::from_secs(30);

/// The banks folder of the project at `root`, as its settings name it.
pub fn banks_dir_of(root: &Path) -> Result<PathBuf, HarnessError> {
    Ok(crate::settings::ProjectSettings::load(root)?.banks_dir)
}

/// A hold on the review lock (`.assay/drafts.lock`), released when dropped or when the
/// process dies (an operating-system lock, as [`crate::lock::KbLock`]).
#[derive(Debug)]
pub struct DraftsLock {
    file: File,
}

impl DraftsLock {
    /// Takes the review lock of the project at `root`, waiting up to `wait`.
    pub fn acquire(root: &Path, wait: Duration) -> Result<DraftsLock, HarnessError> {
        let path = root.join(DRAFTS_LOCK_FILE);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| HarnessError::Infrastructure(format!("{}: {e}", path.display())))?;
        let start = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(DraftsLock { file }),
                Err(TryLockError::WouldBlock) if start.elapsed() < wait => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(HarnessError::Busy(format!(
                        "{}: another review is still writing after {:.0}s; try again",
                        path.display(),
                        wait.as_secs_f64()
                    )));
                }
                Err(TryLockError::Error(e)) => {
                    return Err(HarnessError::Infrastructure(format!(
                        "{}: {e}",
                        path.display()
                    )));
                }
            }
        }
    }
}

impl Drop for DraftsLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// A bank file to append accepted cases to (a new one when `path` does not exist; a bare
/// list of cases is read as a bank file holding them).
pub fn read_generated<C: DeserializeOwned>(
    path: &Path,
    bank: BankType,
) -> Result<BankFile<C>, HarnessError> {
    if !path.exists() {
        return Ok(BankFile {
            schema: None,
            bank_type: Some(bank),
            version: Some(bank.current_version().to_owned()),
            created: Some(chrono::Utc::now().format("%Y-%m-%d").to_string()),
            description: Some(
                "Cases accepted from `assay generate` drafts; each keeps its provenance."
                    .to_owned(),
            ),
            tests: Vec::new(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(|e| HarnessError::io(path, &e))?;
    if text.trim_start().starts_with('[') {
        let tests: Vec<C> = datafile::parse(path, &text, Format::Json, &mut |_| {})?;
        return Ok(BankFile {
            schema: None,
            bank_type: Some(bank),
            version: Some(bank.current_version().to_owned()),
            created: None,
            description: None,
            tests,
        });
    }
    Ok(datafile::parse(path, &text, Format::Json, &mut |_| {})?)
}

/// Writes a bank file as JSON, atomically.
pub fn write_bank<C: Serialize>(path: &Path, file: &BankFile<C>) -> Result<(), HarnessError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
    }
    let mut text = serde_json::to_string_pretty(file)
        .map_err(|e| HarnessError::Infrastructure(format!("{}: {e}", path.display())))?;
    text.push('\n');
    crate::results::write_replace(path, text.as_bytes()).map_err(|e| HarnessError::io(path, &e))
}

/// Records in the provenance of the accepted generated semantic cases among `changed` every
/// entity their new expectations name (calibration or a human override changed them), at its
/// version in `versions`; an entity already listed keeps its version. The semantic bank's
/// `generated.json` is rewritten (atomically, under the review lock) only when a provenance
/// grew. Returns the test ids whose provenance grew.
pub fn record_expectations(
    root: &Path,
    changed: &[(String, assay_core::bank::ExpectationSet)],
    versions: &BTreeMap<String, u32>,
) -> Result<Vec<String>, HarnessError> {
    if changed.is_empty() {
        return Ok(Vec::new());
    }
    let _lock = DraftsLock::acquire(root, DRAFTS_LOCK_WAIT)?;
    let path =
        crate::banks::bank_dir(&banks_dir_of(root)?, BankType::Semantic).join(GENERATED_BANK_FILE);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let mut file: BankFile<SemanticCase> = read_generated(&path, BankType::Semantic)?;
    let mut grown = Vec::new();
    for case in &mut file.tests {
        let Some((_, e)) = changed.iter().find(|(id, _)| *id == case.test_id) else {
            continue;
        };
        let Some(p) = case.provenance.as_mut() else {
            continue;
        };
        let named = e
            .expected_primary
            .iter()
            .chain(&e.expected_secondary)
            .chain(&e.not_expected)
            .chain(e.rank_check.iter().flat_map(|r| [&r.higher, &r.lower]))
            .map(String::as_str);
        if !crate::provenance::record(p, named, versions).is_empty() {
            grown.push(case.test_id.clone());
        }
    }
    if !grown.is_empty() {
        write_bank(&path, &file)?;
    }
    Ok(grown)
}
