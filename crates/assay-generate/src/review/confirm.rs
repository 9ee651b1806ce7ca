//! `assay generate review --confirm`: a reviewer has checked that accepted cases still hold
//! after the entities they were made from changed, so their provenance moves to the versions
//! now current (every entity the case names listed) and they are no longer reported stale.
//!
//! A confirmation needs evidence: the latest saved run must have run the case on the knowledge
//! base as it is now (the changed entities' content the same as in that run) and the case must
//! have passed there. A case that failed, errored or was not run there is refused, named, and
//! nothing is written; a failing case is fixed or retired (`--retire`), never confirmed.
//!
//! Only cases in the banks' `generated.json` (the files review writes) are changed: a file a
//! person wrote is never rewritten. A hand-written case is stale against the accepted baseline,
//! and accepting a new baseline (`assay runs accept`) is what confirms it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use assay_core::bank::{BankFile, BankType};
use assay_core::rundiff::CaseScore;
use assay_core::runlog::{RunLog, StaleEntity};
use assay_core::verdict::Outcome as VerdictOutcome;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{
    DRAFTS_LOCK_WAIT, DraftsLock, GENERATED_BANK_FILE, Outcome, ReviewCase, Reviewer,
    read_generated, relative, write_bank,
};
use crate::HarnessError;
use assay_project::engine;
use assay_project::project::Project;
use assay_run::freshness::StaleCheck;

/// Which accepted cases to confirm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// These test ids.
    Ids(Vec<String>),
    /// Every case of a `generated.json` that a run would list as stale.
    AllStale,
}

/// How many refused cases an error names one by one.
const NAMED: usize = 10;

/// One case picked for confirmation: its id and the entities changed since its provenance.
struct Picked {
    test_id: String,
    changed: Vec<StaleEntity>,
}

/// Picks the cases of one bank's `generated.json` that `which` selects (with their stale
/// entities, read through `check`).
fn pick<C: ReviewCase>(
    path: &Path,
    which: &Confirm,
    wanted: &HashSet<&str>,
    check: &mut StaleCheck<'_>,
    out: &mut Vec<Picked>,
) -> Result<(), HarnessError> {
    if !path.exists() {
        return Ok(());
    }
    let file: BankFile<C> = read_generated(path, C::BANK)?;
    for case in &file.tests {
        let id = case.test_id();
        let asked = matches!(which, Confirm::Ids(_)) && wanted.contains(id);
        if asked && case.provenance().is_none() {
            return Err(HarnessError::Usage(format!(
                "`{id}` in {} has no provenance to confirm; nothing was written",
                path.display()
            )));
        }
        if case.provenance().is_none() {
            continue;
        }
        let changed = check.stale_entities(case);
        if asked || (matches!(which, Confirm::AllStale) && !changed.is_empty()) {
            out.push(Picked {
                test_id: id.to_owned(),
                changed,
            });
        }
    }
    Ok(())
}

/// Moves the picked cases of one bank's `generated.json` to the current versions, listing every
/// entity they name; returns the file to write, if any changed.
fn confirm_bank<C: ReviewCase>(
    path: &Path,
    picked: &HashSet<&str>,
    current: &BTreeMap<String, u32>,
    reviewer: &Reviewer,
) -> Result<Option<BankFile<C>>, HarnessError> {
    if !path.exists() {
        return Ok(None);
    }
    let mut file: BankFile<C> = read_generated(path, C::BANK)?;
    let mut changed = false;
    for case in &mut file.tests {
        if !picked.contains(case.test_id()) {
            continue;
        }
        assay_project::provenance::record_named(case, current);
        if let Some(p) = case.provenance_mut() {
            for (entity, version) in &mut p.entity_versions {
                if let Some(now) = current.get(entity) {
                    *version = *now;
                }
            }
            p.confirmed_by = Some(reviewer.by.clone());
            p.confirmed_at = Some(reviewer.at.clone());
            changed = true;
        }
    }
    Ok(changed.then_some(file))
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

/// Whether a case of a run passed, by the verdict the run stored on it: `Err` says why not
/// (failed, with its score and whether it was a critical failure or a hard fail, or an error,
/// which is no verdict at all).
pub fn passed(case: &CaseScore) -> Result<(), String> {
    let score = case.score.unwrap_or(0);
    match case.verdict {
        VerdictOutcome::Pass => Ok(()),
        VerdictOutcome::Error => Err(format!(
            "errored ({}), so it has no verdict",
            case.error.as_deref().unwrap_or("error")
        )),
        VerdictOutcome::Fail if case.is_critical_failure => {
            Err(format!("is a critical failure (score {score})"))
        }
        VerdictOutcome::Fail if case.is_hard_fail => Err(format!("hard-fails (score {score})")),
        VerdictOutcome::Fail => Err(format!("fails (score {score})")),
    }
}

/// A saved run read for its evidence: the RunLog and its cases by test id.
struct Evidence {
    log: RunLog,
    cases: HashMap<String, CaseScore>,
}

/// The latest saved run; `None` when nothing is saved.
fn latest_run(project: &Project) -> Result<Option<Evidence>, HarnessError> {
    let dir = &project.settings.results_dir;
    let Some(newest) = assay_run::runs::list_runs(dir)
        .map_err(|e| HarnessError::Usage(e.to_string()))?
        .into_iter()
        .find(|r| r.shard.is_none())
    else {
        return Ok(None);
    };
    let log = assay_run::baseline::read_file(&newest.json)?;
    let cases = assay_run::baseline::read_cases(&log, &newest.json)?
        .into_iter()
        .map(|c| (c.test_id.clone(), c))
        .collect();
    Ok(Some(Evidence { log, cases }))
}

/// Why each picked case may not be confirmed on the latest run's evidence (empty: all may).
fn refusals(
    picked: &[Picked],
    latest: Option<&Evidence>,
    now: &BTreeMap<String, String>,
) -> Vec<String> {
    let Some(Evidence { log, cases }) = latest else {
        return picked
            .iter()
            .map(|p| format!("`{}`: no run is saved to show that it holds", p.test_id))
            .collect();
    };
    let then = &log.kb.entities;
    let mut out = Vec::new();
    for p in picked {
        let Some(result) = cases.get(&p.test_id) else {
            out.push(format!(
                "`{}` is not in the latest run ({})",
                p.test_id, log.run_id
            ));
            continue;
        };
        // The run must have seen the entities as they are now (a run that did not record
        // per-entity digests cannot tell, and is taken as it is).
        let older: Vec<&str> = p
            .changed
            .iter()
            .map(|e| e.entity_id.as_str())
            .filter(|id| !then.is_empty() && then.get(*id) != now.get(*id))
            .collect();
        if !older.is_empty() {
            out.push(format!(
                "`{}`: the latest run ({}) ran on an earlier version of {}",
                p.test_id,
                log.run_id,
                older.join(", ")
            ));
            continue;
        }
        if let Err(why) = passed(result) {
            out.push(format!(
                "`{}` {why} in the latest run ({})",
                p.test_id, log.run_id
            ));
        }
    }
    out
}

/// Confirms accepted cases of the project at `root`: their provenance's entity versions become
/// the store's current ones (every entity they name listed), with who confirmed them and when.
/// Every id must be a case of a bank's `generated.json`, and every case must have passed in
/// the latest saved run, made on the knowledge base as it is now; otherwise nothing is written
/// and the error names each case refused and why.
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
    let current = assay_project::provenance::current_versions(&*store)?;
    let wanted: HashSet<&str> = match which {
        Confirm::Ids(ids) => ids.iter().map(String::as_str).collect(),
        Confirm::AllStale => HashSet::new(),
    };
    let banks_dir = &project.settings.banks_dir;
    let path =
        |bank: BankType| assay_project::banks::bank_dir(banks_dir, bank).join(GENERATED_BANK_FILE);
    let mut picked = Vec::new();
    {
        let mut check = StaleCheck::new(&*store, BTreeMap::new(), None);
        pick::<assay_core::bank::SemanticCase>(
            &path(BankType::Semantic),
            which,
            &wanted,
            &mut check,
            &mut picked,
        )?;
        pick::<assay_core::bank::StateCase>(
            &path(BankType::State),
            which,
            &wanted,
            &mut check,
            &mut picked,
        )?;
        pick::<assay_core::bank::PatternCase>(
            &path(BankType::Pattern),
            which,
            &wanted,
            &mut check,
            &mut picked,
        )?;
    }
    let mut ids: Vec<String> = picked.iter().map(|p| p.test_id.clone()).collect();
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

    // The evidence: the latest run, on today's knowledge base, passed each case.
    let latest = latest_run(&project)?;
    let now = assay_run::run::kb_fingerprint(&engine::snapshot(&*store)?)?.entities;
    let refused = refusals(&picked, latest.as_ref(), &now);
    if !refused.is_empty() {
        let mut text = refused
            .iter()
            .take(NAMED)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if refused.len() > NAMED {
            let _ = write!(text, "; … and {} more", refused.len() - NAMED);
        }
        return Err(HarnessError::Usage(format!(
            "cannot confirm {} of {} case(s): {text}. A case is confirmed on the evidence of the latest saved run: run the banks on the knowledge base as it is now (`assay run`), then fix a failing case or retire it (`assay generate review --retire ID --reason …`); nothing was written",
            refused.len(),
            ids.len()
        )));
    }

    let chosen: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let semantic = confirm_bank::<assay_core::bank::SemanticCase>(
        &path(BankType::Semantic),
        &chosen,
        &current,
        reviewer,
    )?;
    let state = confirm_bank::<assay_core::bank::StateCase>(
        &path(BankType::State),
        &chosen,
        &current,
        reviewer,
    )?;
    let pattern = confirm_bank::<assay_core::bank::PatternCase>(
        &path(BankType::Pattern),
        &chosen,
        &current,
        reviewer,
    )?;
    let mut bank_files = Vec::new();
    write_if(root, &path(BankType::Semantic), semantic, &mut bank_files)?;
    write_if(root, &path(BankType::State), state, &mut bank_files)?;
    write_if(root, &path(BankType::Pattern), pattern, &mut bank_files)?;
    tracing::info!(confirmed = ids.len(), by = %reviewer.by, "accepted cases confirmed");
    Ok(Outcome {
        test_ids: ids,
        bank_files,
        draft_files: Vec::new(),
        note: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(score: Option<u32>) -> CaseScore {
        CaseScore::new("state", "S1", score)
    }

    #[test]
    fn a_case_passes_only_by_its_stored_verdict() {
        assert!(passed(&score(Some(100))).is_ok());
        let mut failed = score(Some(90));
        failed.verdict = VerdictOutcome::Fail;
        assert_eq!(passed(&failed).unwrap_err(), "fails (score 90)");
        let mut hard = score(Some(0));
        hard.is_hard_fail = true;
        hard.verdict = VerdictOutcome::Fail;
        assert!(passed(&hard).unwrap_err().contains("hard-fails"));
        let mut critical = score(Some(100));
        critical.is_critical_failure = true;
        critical.verdict = VerdictOutcome::Fail;
        assert!(passed(&critical).unwrap_err().contains("critical"));
        let mut errored = score(None);
        errored.error = Some("timeout".into());
        assert!(passed(&errored).unwrap_err().contains("errored (timeout)"));
    }
}
