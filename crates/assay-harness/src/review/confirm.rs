//! `assay generate review --confirm`: a reviewer has checked that accepted cases still hold
//! after the entities they were made from changed, so their provenance moves to the versions
//! now current and they are no longer reported stale.
//!
//! Only cases in the banks' `generated.json` (the files review writes) are changed: a file a
//! person wrote is never rewritten. A hand-written case is stale against the accepted baseline,
//! and accepting a new baseline (`assay runs accept`) is what confirms it.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use assay_core::bank::{BankFile, BankType};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{
    DRAFTS_LOCK_WAIT, DraftsLock, GENERATED_BANK_FILE, Outcome, ReviewCase, Reviewer,
    read_generated, relative, write_bank,
};
use crate::HarnessError;
use crate::engine;
use crate::project::Project;

/// Which accepted cases to confirm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// These test ids.
    Ids(Vec<String>),
    /// Every case of a `generated.json` whose provenance names an entity at another version
    /// than the current one.
    AllStale,
}

/// Whether `case`'s provenance is behind `current` (an entity at another version, or gone).
fn behind<C: ReviewCase>(case: &C, current: &BTreeMap<String, u32>) -> bool {
    case.provenance().is_some_and(|p| {
        p.entity_versions
            .iter()
            .any(|(id, v)| current.get(id) != Some(v))
    })
}

/// Moves the selected cases of one bank's `generated.json` to the current versions; returns
/// the ids confirmed and the file to write, if any changed.
fn confirm_bank<C: ReviewCase>(
    path: &Path,
    which: &Confirm,
    wanted: &HashSet<&str>,
    current: &BTreeMap<String, u32>,
    reviewer: &Reviewer,
) -> Result<(Vec<String>, Option<BankFile<C>>), HarnessError> {
    if !path.exists() {
        return Ok((Vec::new(), None));
    }
    let mut file: BankFile<C> = read_generated(path, C::BANK)?;
    let mut done = Vec::new();
    for case in &mut file.tests {
        let selected = match which {
            Confirm::Ids(_) => wanted.contains(case.test_id()),
            Confirm::AllStale => behind(case, current),
        };
        if !selected {
            continue;
        }
        let id = case.test_id().to_owned();
        let Some(p) = case.provenance_mut() else {
            return Err(HarnessError::Usage(format!(
                "`{id}` in {} has no provenance to confirm; nothing was written",
                path.display()
            )));
        };
        for (entity, version) in &mut p.entity_versions {
            if let Some(now) = current.get(entity) {
                *version = *now;
            }
        }
        p.confirmed_by = Some(reviewer.by.clone());
        p.confirmed_at = Some(reviewer.at.clone());
        done.push(id);
    }
    let changed = !done.is_empty();
    Ok((done, changed.then_some(file)))
}

fn write_if<C: Serialize + DeserializeOwned>(
    root: &Path,
    path: &Path,
    file: Option<BankFile<C>>,
    written: &mut Vec<PathBuf>,
) -> Result<(), HarnessError> {
    if let Some(file) = file {
        write_bank(path, &file)?;
        written.push(relative(root, path));
    }
    Ok(())
}

/// Confirms accepted cases of the project at `root`: their provenance's entity versions become
/// the store's current ones, with who confirmed them and when. Every id must be a case of a
/// bank's `generated.json`; otherwise nothing is written and the error names it.
pub fn confirm(
    root: &Path,
    which: &Confirm,
    reviewer: &Reviewer,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Outcome, HarnessError> {
    let _lock = DraftsLock::acquire(root, DRAFTS_LOCK_WAIT)?;
    let project = Project::load(root)?;
    let store = engine::open_store_with(&project.settings, env)?;
    engine::sync_kb(&store, &project)?;
    let mut current = BTreeMap::new();
    for e in assay_kb::KnowledgeBase::list(&*store, &assay_kb::EntityFilter::default())? {
        if let Some(stored) = store.get_stored(&e.entity_id)? {
            current.insert(e.entity_id.clone(), stored.version);
        }
    }
    let wanted: HashSet<&str> = match which {
        Confirm::Ids(ids) => ids.iter().map(String::as_str).collect(),
        Confirm::AllStale => HashSet::new(),
    };
    let banks_dir = &project.settings.banks_dir;
    let path = |bank: BankType| crate::banks::bank_dir(banks_dir, bank).join(GENERATED_BANK_FILE);
    let (semantic, semantic_file) = confirm_bank::<assay_core::bank::SemanticCase>(
        &path(BankType::Semantic),
        which,
        &wanted,
        &current,
        reviewer,
    )?;
    let (state, state_file) = confirm_bank::<assay_core::bank::StateCase>(
        &path(BankType::State),
        which,
        &wanted,
        &current,
        reviewer,
    )?;
    let (pattern, pattern_file) = confirm_bank::<assay_core::bank::PatternCase>(
        &path(BankType::Pattern),
        which,
        &wanted,
        &current,
        reviewer,
    )?;
    let mut ids: Vec<String> = semantic.into_iter().chain(state).chain(pattern).collect();
    if let Confirm::Ids(asked) = which {
        let found: HashSet<&str> = ids.iter().map(String::as_str).collect();
        if let Some(missing) = asked.iter().find(|id| !found.contains(id.as_str())) {
            return Err(HarnessError::Usage(format!(
                "`{missing}` is not a case of a bank's {GENERATED_BANK_FILE}: only accepted drafts carry the versions --confirm moves (a hand-written case is stale against the accepted baseline; `assay runs accept` confirms it); nothing was written"
            )));
        }
        // In the order asked.
        ids.clone_from(asked);
    }
    if ids.is_empty() {
        return Err(HarnessError::Usage(
            "no accepted case is stale: nothing to confirm".to_owned(),
        ));
    }
    let mut bank_files = Vec::new();
    write_if(
        root,
        &path(BankType::Semantic),
        semantic_file,
        &mut bank_files,
    )?;
    write_if(root, &path(BankType::State), state_file, &mut bank_files)?;
    write_if(
        root,
        &path(BankType::Pattern),
        pattern_file,
        &mut bank_files,
    )?;
    tracing::info!(confirmed = ids.len(), by = %reviewer.by, "accepted cases confirmed");
    Ok(Outcome {
        test_ids: ids,
        bank_files,
        draft_files: Vec::new(),
        note: None,
    })
}
