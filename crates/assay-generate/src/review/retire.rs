//! `assay generate review --retire IDS --reason …`: accepted generated cases taken out of their
//! bank. A case a reviewer accepted from a draft lives in `test_banks/<bank>/generated.json`;
//! retiring it removes it from that file (rewritten atomically) and records who retired it,
//! when, why and the case as it was in `test_banks/<bank>/retired.jsonl` beside it, a file
//! only ever appended to (one JSON object a line), written before the bank so a retirement is
//! never lost. The whole read-check-write holds the review lock (`.assay/drafts.lock`).
//!
//! A hand-written case is not retired this way (its file is a person's): the error says where
//! it is.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::Path;

use assay_core::answer::AnswerCase;
use assay_core::bank::{BankFile, BankType, PatternCase, SemanticCase, StateCase};
use serde::{Deserialize, Serialize};

use super::{
    DRAFTS_LOCK_WAIT, DraftsLock, GENERATED_BANK_FILE, Outcome, ReviewCase, Reviewer,
    read_generated, relative, write_bank,
};
use crate::HarnessError;
use assay_project::project::Project;

/// The history of retirements, in each bank's folder beside `generated.json`.
pub const RETIRED_FILE: &str = "retired.jsonl";

/// One retired case: a line of [`RETIRED_FILE`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retirement {
    /// The case's id.
    pub test_id: String,
    /// Its bank (`semantic`, `state`, `pattern`, `answer`).
    pub bank: String,
    /// Who retired it.
    pub retired_by: String,
    /// When (RFC 3339, UTC).
    pub retired_at: String,
    /// Why.
    pub reason: String,
    /// The case as it was in `generated.json`, provenance included.
    pub case: serde_json::Value,
}

/// One bank's `generated.json` with cases taken out, and what to record of them.
type TakenOut<C> = (BankFile<C>, Vec<Retirement>);

/// The cases of one bank's `generated.json` that `ids` names, taken out: the file without them
/// and what to record, or `None` when it holds none of them.
fn take_out<C: ReviewCase>(
    path: &Path,
    ids: &HashSet<&str>,
    reason: &str,
    reviewer: &Reviewer,
    found: &mut Vec<String>,
) -> Result<Option<TakenOut<C>>, HarnessError> {
    if !path.exists() {
        return Ok(None);
    }
    let mut file: BankFile<C> = read_generated(path, C::BANK)?;
    let mut records = Vec::new();
    let mut kept = Vec::with_capacity(file.tests.len());
    for case in std::mem::take(&mut file.tests) {
        if ids.contains(case.test_id()) {
            found.push(case.test_id().to_owned());
            records.push(Retirement {
                test_id: case.test_id().to_owned(),
                bank: C::BANK.key().to_owned(),
                retired_by: reviewer.by.clone(),
                retired_at: reviewer.at.clone(),
                reason: reason.to_owned(),
                case: serde_json::to_value(&case).map_err(|e| {
                    HarnessError::Infrastructure(format!("{}: {e}", path.display()))
                })?,
            });
        } else {
            kept.push(case);
        }
    }
    file.tests = kept;
    Ok((!records.is_empty()).then_some((file, records)))
}

/// Appends `records` to the retirement history of the bank folder of `bank_file` (flushed and
/// synced before this returns).
fn record(bank_file: &Path, records: &[Retirement]) -> Result<(), HarnessError> {
    let path = bank_file.with_file_name(RETIRED_FILE);
    let mut text = String::new();
    for r in records {
        text.push_str(
            &serde_json::to_string(r)
                .map_err(|e| HarnessError::Infrastructure(format!("{}: {e}", path.display())))?,
        );
        text.push('\n');
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| HarnessError::io(&path, &e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| HarnessError::io(&path, &e))
}

/// Every retirement recorded in the project at `root`, bank by bank, oldest first in each.
pub fn retired(root: &Path) -> Result<Vec<Retirement>, HarnessError> {
    let banks_dir = super::banks_dir(root)?;
    let mut out = Vec::new();
    for bank in assay_project::drafts::DRAFT_BANKS {
        let path = assay_project::banks::bank_dir(&banks_dir, bank).join(RETIRED_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(HarnessError::io(&path, &e)),
        };
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let r: Retirement = assay_kb::datafile::parse(
                &path,
                line,
                assay_kb::datafile::Format::Json,
                &mut |_| {},
            )
            .map_err(|mut e| {
                e.line = Some(i + 1);
                HarnessError::Data(e)
            })?;
            out.push(r);
        }
    }
    Ok(out)
}

/// Retires accepted generated cases of the project at `root` (see the module docs). Every id
/// must be a case of a bank's `generated.json` and `reason` must say why; otherwise nothing is
/// written and the error names the id.
pub fn retire(
    root: &Path,
    ids: &[String],
    reason: &str,
    reviewer: &Reviewer,
) -> Result<Outcome, HarnessError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(HarnessError::Usage(
            "--retire needs a reason (--reason): it is kept with the retired case".to_owned(),
        ));
    }
    if ids.is_empty() {
        return Err(HarnessError::Usage("no case to retire".to_owned()));
    }
    let mut seen = HashSet::new();
    if let Some(twice) = ids.iter().find(|id| !seen.insert(id.as_str())) {
        return Err(HarnessError::Usage(format!(
            "test id `{twice}` is named twice; nothing was written"
        )));
    }
    let _lock = DraftsLock::acquire(root, DRAFTS_LOCK_WAIT)?;
    let project = Project::load(root)?;
    let banks_dir = &project.settings.banks_dir;
    let path =
        |bank: BankType| assay_project::banks::bank_dir(banks_dir, bank).join(GENERATED_BANK_FILE);
    let mut found = Vec::new();
    let semantic = take_out::<SemanticCase>(
        &path(BankType::Semantic),
        &seen,
        reason,
        reviewer,
        &mut found,
    )?;
    let state = take_out::<StateCase>(&path(BankType::State), &seen, reason, reviewer, &mut found)?;
    let pattern = take_out::<PatternCase>(
        &path(BankType::Pattern),
        &seen,
        reason,
        reviewer,
        &mut found,
    )?;
    let answer =
        take_out::<AnswerCase>(&path(BankType::Answer), &seen, reason, reviewer, &mut found)?;
    if let Some(missing) = ids.iter().find(|id| !found.contains(id)) {
        return Err(HarnessError::Usage(
            match written_by_hand(&project, missing) {
                Some(file) => format!(
                    "`{missing}` is in {}, a bank file a person wrote: only accepted generated cases (in a bank's {GENERATED_BANK_FILE}) are retired; remove it from that file by hand; nothing was written",
                    relative(root, &file).display()
                ),
                None => format!(
                    "`{missing}` is not a case of a bank's {GENERATED_BANK_FILE} (see `assay generate review --all` for the drafts and where they were accepted); nothing was written"
                ),
            },
        ));
    }
    let mut bank_files = Vec::new();
    macro_rules! apply {
        ($bank:expr, $taken:expr) => {
            if let Some((file, records)) = $taken {
                let p = path($bank);
                record(&p, &records)?;
                write_bank(&p, &file)?;
                bank_files.push(relative(root, &p));
            }
        };
    }
    apply!(BankType::Semantic, semantic);
    apply!(BankType::State, state);
    apply!(BankType::Pattern, pattern);
    apply!(BankType::Answer, answer);
    tracing::info!(retired = ids.len(), by = %reviewer.by, "accepted cases retired");
    Ok(Outcome {
        test_ids: ids.to_vec(),
        bank_files,
        draft_files: Vec::new(),
        note: Some(reason.to_owned()),
    })
}

/// The bank file (not a `generated.json`) that holds a case with this id, if any.
fn written_by_hand(project: &Project, id: &str) -> Option<std::path::PathBuf> {
    let b = &project.banks;
    b.semantic
        .iter()
        .map(|c| (c.case.test_id.as_str(), &c.file))
        .chain(b.state.iter().map(|c| (c.case.test_id.as_str(), &c.file)))
        .chain(b.pattern.iter().map(|c| (c.case.test_id.as_str(), &c.file)))
        .chain(b.always.iter().map(|c| (c.case.test_id.as_str(), &c.file)))
        .chain(b.answer.iter().map(|c| (c.case.test_id.as_str(), &c.file)))
        .find(|(t, _)| *t == id)
        .map(|(_, f)| f.clone())
}
