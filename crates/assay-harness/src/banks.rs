//! Bank files in the layout of 000 §2:
//!
//! ```text
//! test_banks/semantic/*.json          SEMANTIC banks (parent_test_bank.json in the seed)
//! test_banks/semantic/history/        expectation history (see crate::expectations)
//! test_banks/state/*.json             STATE banks
//! test_banks/pattern/*.json           PATTERN banks; pattern_rules.json holds the rules
//! test_banks/always/*.json            ALWAYS banks
//! ```
//!
//! A bank's type comes from its folder. A file that states a different `bank_type` is an error;
//! a file that states none (a pre-V2 bank, or a bare list of cases) loads with a warning.

use std::path::{Path, PathBuf};

use assay_core::bank::{AlwaysCase, BankFile, BankType, PatternCase, SemanticCase, StateCase};
use assay_kb::datafile::{self, DataError, Format};
use serde::de::DeserializeOwned;

/// The pattern rules file's name, inside `test_banks/pattern/`.
pub const PATTERN_RULES_FILE: &str = "pattern_rules.json";
/// The history folder's name, inside `test_banks/semantic/`.
pub const HISTORY_DIR: &str = "history";

/// A case with the file it came from and its index there.
#[derive(Debug, Clone, PartialEq)]
pub struct Located<C> {
    /// The case.
    pub case: C,
    /// Its bank file.
    pub file: PathBuf,
    /// Its index in the file's `tests`.
    pub index: usize,
}

/// The cases of every bank of a project.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Banks {
    /// Semantic cases.
    pub semantic: Vec<Located<SemanticCase>>,
    /// State cases.
    pub state: Vec<Located<StateCase>>,
    /// Pattern cases.
    pub pattern: Vec<Located<PatternCase>>,
    /// Always cases.
    pub always: Vec<Located<AlwaysCase>>,
    /// The bank files read.
    pub files: Vec<(BankType, PathBuf)>,
}

impl Banks {
    /// How many cases a bank has.
    pub fn count(&self, bank: BankType) -> usize {
        match bank {
            BankType::Semantic => self.semantic.len(),
            BankType::State => self.state.len(),
            BankType::Pattern => self.pattern.len(),
            BankType::Always => self.always.len(),
        }
    }
}

/// The folder of a bank type under `test_banks/`.
pub fn bank_dir(banks_dir: &Path, bank: BankType) -> PathBuf {
    banks_dir.join(bank.key())
}

/// The bank files of one folder: its `.json` files except the pattern rules, sorted.
pub fn bank_files(banks_dir: &Path, bank: BankType) -> Result<Vec<PathBuf>, DataError> {
    let dir = bank_dir(banks_dir, bank);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| DataError::new(&dir, format!("cannot read bank folder: {e}")))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| DataError::new(&dir, e.to_string()))?
            .path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_file()
            && Format::from_path(&path) == Some(Format::Json)
            && name != PATTERN_RULES_FILE
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Whether a bank file's text is a bare list of cases (the oldest layout).
fn is_bare_list(text: &str) -> bool {
    text.trim_start().starts_with('[')
}

/// Reads one bank file of a known type.
pub fn read_bank<C: DeserializeOwned>(
    path: &Path,
    bank: BankType,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<C>, DataError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| DataError::new(path, format!("cannot read file: {e}")))?;
    let pre_v2 = |what: &str| {
        format!(
            "{}: {what}: loaded as a {} bank from its folder (pre-V2 layout); `assay banks migrate` adds the fields",
            path.display(),
            bank.as_str()
        )
    };
    if is_bare_list(&text) {
        let tests: Vec<C> = datafile::parse(path, &text, Format::Json, warn)?;
        warn(pre_v2("a bare list of cases with no bank_type or version"));
        return Ok(tests);
    }
    let file: BankFile<C> = datafile::parse(path, &text, Format::Json, warn)?;
    match file.bank_type {
        Some(t) if t != bank => {
            return Err(DataError::new(
                path,
                format!(
                    "bank_type {} does not match its folder `{}/` (expected {})",
                    t.as_str(),
                    bank.key(),
                    bank.as_str()
                ),
            ));
        }
        Some(_) if file.version.is_none() => warn(pre_v2("no version")),
        Some(_) => {}
        None => warn(pre_v2("no bank_type")),
    }
    Ok(file.tests)
}

fn load_kind<C: DeserializeOwned>(
    banks_dir: &Path,
    bank: BankType,
    files: &mut Vec<(BankType, PathBuf)>,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<Located<C>>, DataError> {
    let mut out = Vec::new();
    for path in bank_files(banks_dir, bank)? {
        let cases: Vec<C> = read_bank(&path, bank, warn)?;
        out.extend(cases.into_iter().enumerate().map(|(index, case)| Located {
            case,
            file: path.clone(),
            index,
        }));
        files.push((bank, path));
    }
    Ok(out)
}

/// Reads every bank under `banks_dir`.
pub fn load_banks(banks_dir: &Path, warn: &mut dyn FnMut(String)) -> Result<Banks, DataError> {
    let mut files = Vec::new();
    let semantic = load_kind(banks_dir, BankType::Semantic, &mut files, warn)?;
    let state = load_kind(banks_dir, BankType::State, &mut files, warn)?;
    let pattern = load_kind(banks_dir, BankType::Pattern, &mut files, warn)?;
    let always = load_kind(banks_dir, BankType::Always, &mut files, warn)?;
    Ok(Banks {
        semantic,
        state,
        pattern,
        always,
        files,
    })
}
