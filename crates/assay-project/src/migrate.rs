//! `assay banks migrate`: adds `bank_type` and `version` to pre-V2 bank files in place
//! (000 §9.2 and appendix), keeping the original as a backup and changing nothing else.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use assay_core::bank::{AlwaysCase, BankType, PatternCase, SemanticCase, StateCase};
use assay_kb::datafile::DataError;
use serde_json::Value;

use crate::banks::{bank_files, read_bank};
use crate::results::{write_new, write_replace};

/// What happened to one bank file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Migration {
    /// Already has both fields.
    Current(PathBuf),
    /// Fields added; the original kept at `backup`.
    Migrated {
        /// The bank file.
        path: PathBuf,
        /// The untouched original.
        backup: PathBuf,
        /// The fields added.
        added: Vec<&'static str>,
    },
}

fn check_cases(path: &Path, bank: BankType) -> Result<(), DataError> {
    let mut ignore = |_: String| {};
    match bank {
        BankType::Semantic => read_bank::<SemanticCase>(path, bank, &mut ignore).map(|_| ()),
        BankType::State => read_bank::<StateCase>(path, bank, &mut ignore).map(|_| ()),
        BankType::Pattern => read_bank::<PatternCase>(path, bank, &mut ignore).map(|_| ()),
        BankType::Always => read_bank::<AlwaysCase>(path, bank, &mut ignore).map(|_| ()),
        BankType::Answer => {
            read_bank::<assay_core::answer::AnswerCase>(path, bank, &mut ignore).map(|_| ())
        }
    }
}

/// The migrated text of a bank file, or `None` when it needs nothing.
pub fn migrated_text(
    text: &str,
    bank: BankType,
) -> Result<Option<(String, Vec<&'static str>)>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let fields = [
        ("bank_type", bank.as_str()),
        ("version", bank.current_version()),
    ];
    let (new_text, added) = match &value {
        Value::Array(_) => {
            let body = text.trim();
            let new = format!(
                "{{\n  \"bank_type\": \"{}\",\n  \"version\": \"{}\",\n  \"tests\": {body}\n}}\n",
                fields[0].1, fields[1].1
            );
            (new, vec!["bank_type", "version"])
        }
        Value::Object(map) => {
            let missing: Vec<(&'static str, &str)> = fields
                .iter()
                .copied()
                .filter(|(k, _)| !map.contains_key(*k))
                .collect();
            if missing.is_empty() {
                return Ok(None);
            }
            // Insert right after the opening brace, in the indentation of the file's first key.
            let open = text.find('{').ok_or("no opening brace")?;
            let rest = &text[open + 1..];
            let indent = rest
                .lines()
                .skip(1)
                .find(|l| !l.trim().is_empty())
                .map_or("  ", |l| &l[..l.len() - l.trim_start().len()]);
            let multiline = rest
                .trim_start_matches([' ', '\t'])
                .starts_with(['\n', '\r']);
            let mut inserted = String::new();
            for (k, v) in &missing {
                if multiline {
                    let _ = write!(inserted, "\n{indent}\"{k}\": \"{v}\",");
                } else {
                    let _ = write!(inserted, " \"{k}\": \"{v}\",");
                }
            }
            if map.is_empty() {
                inserted.pop();
            }
            let new = format!("{}{inserted}{rest}", &text[..=open]);
            (new, missing.iter().map(|(k, _)| *k).collect())
        }
        _ => return Err("a bank file must be a JSON object or a list of cases".into()),
    };
    // Nothing else may change: the result must equal the original plus the added fields.
    let mut expected = match value {
        Value::Array(tests) => serde_json::json!({ "tests": tests }),
        other => other,
    };
    if let Value::Object(map) = &mut expected {
        for (k, v) in fields {
            map.entry(k).or_insert_with(|| Value::String(v.to_owned()));
        }
    }
    let reparsed: Value =
        serde_json::from_str(&new_text).map_err(|e| format!("migration produced bad JSON: {e}"))?;
    if reparsed != expected {
        return Err("migration would change more than the two header fields".into());
    }
    Ok(Some((new_text, added)))
}

fn backup_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut candidate = path.with_file_name(format!("{name}.bak"));
    let mut n = 2;
    while candidate.exists() {
        candidate = path.with_file_name(format!("{name}.bak{n}"));
        n += 1;
    }
    candidate
}

/// Migrates every bank file under `banks_dir`. Every file is checked before any is written: on
/// an error nothing changes.
pub fn migrate_banks(banks_dir: &Path) -> Result<Vec<Migration>, DataError> {
    let mut plan = Vec::new();
    for bank in BankType::ALL {
        for path in bank_files(banks_dir, bank)? {
            check_cases(&path, bank)?;
            let text =
                std::fs::read_to_string(&path).map_err(|e| DataError::new(&path, e.to_string()))?;
            let change = migrated_text(&text, bank).map_err(|m| DataError::new(&path, m))?;
            plan.push((path, text, change));
        }
    }
    let mut out = Vec::new();
    for (path, original, change) in plan {
        match change {
            None => out.push(Migration::Current(path)),
            Some((new_text, added)) => {
                let backup = backup_path(&path);
                let io = |e: std::io::Error| DataError::new(&path, format!("cannot write: {e}"));
                write_new(&backup, original.as_bytes()).map_err(io)?;
                write_replace(&path, new_text.as_bytes()).map_err(io)?;
                out.push(Migration::Migrated {
                    path,
                    backup,
                    added,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_fields_after_the_brace_and_keeps_the_rest() {
        let text = "{\n    \"description\": \"old\",\n    \"tests\": []\n}\n";
        let (new, added) = migrated_text(text, BankType::Semantic).unwrap().unwrap();
        assert_eq!(
            new,
            "{\n    \"bank_type\": \"SEMANTIC\",\n    \"version\": \"2.0\",\n    \"description\": \"old\",\n    \"tests\": []\n}\n"
        );
        assert_eq!(added, vec!["bank_type", "version"]);
    }

    #[test]
    fn adds_only_what_is_missing() {
        let text = "{\"bank_type\": \"STATE\", \"tests\": []}";
        let (new, added) = migrated_text(text, BankType::State).unwrap().unwrap();
        assert_eq!(
            new,
            "{ \"version\": \"1.0\",\"bank_type\": \"STATE\", \"tests\": []}"
        );
        assert_eq!(added, vec!["version"]);
    }

    #[test]
    fn wraps_a_bare_list() {
        let (new, _) = migrated_text("[{\"test_id\": \"A\"}]\n", BankType::Always)
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&new).unwrap();
        assert_eq!(v["bank_type"], "ALWAYS");
        assert_eq!(v["tests"][0]["test_id"], "A");
    }

    #[test]
    fn current_files_are_left_alone() {
        assert_eq!(
            migrated_text(
                "{\"bank_type\": \"STATE\", \"version\": \"1.0\", \"tests\": []}",
                BankType::State
            ),
            Ok(None)
        );
    }
}
