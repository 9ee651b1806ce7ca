//! Draft scenarios in review (`sim/drafts/`, [`assay_sim::drafts`]): listed with the draft
//! cases (bank `scenario`, grouped under the scenario they were made from), accepted into
//! `sim/scenarios/<id>.yaml` or rejected with a reason, by the same commands and under the same
//! lock. An accepted scenario is written before its draft file, and a scenario file that
//! already holds exactly the accepted draft (an accept interrupted between the two) is
//! finished, not refused.

use std::path::{Path, PathBuf};

use assay_core::draft::DraftStatus;
use assay_sim::drafts::{self as sim, Loaded};
use serde_json::Value;

use super::{DraftEntry, Reviewer, relative, set_review};
use crate::HarnessError;

/// The bank name scenario drafts are listed under.
pub const BANK: &str = "scenario";

/// What review lists a draft scenario under: the scenario it was made from.
fn entity_of(from: &str) -> String {
    format!("scenario:{from}")
}

/// An accept checked and ready to write: (file, draft, scenario path, its text, whether the
/// scenario file already holds it).
pub(super) struct Planned(Vec<(usize, usize, PathBuf, String, bool)>);

/// The draft scenarios of a project, read for a change.
pub(super) struct Scenarios {
    root: PathBuf,
    files: Vec<Loaded>,
    dirty: Vec<usize>,
}

impl Scenarios {
    pub(super) fn load(root: &Path) -> Result<Scenarios, HarnessError> {
        Ok(Scenarios {
            root: root.to_owned(),
            files: sim::load(root)?,
            dirty: Vec::new(),
        })
    }

    /// Every draft with this id: (file, draft, status), in file order.
    fn find(&self, id: &str) -> Vec<(usize, usize, DraftStatus)> {
        let mut out = Vec::new();
        for (fi, loaded) in self.files.iter().enumerate() {
            for (di, d) in loaded.file.drafts.iter().enumerate() {
                if d.case.scenario.id == id {
                    out.push((fi, di, d.status));
                }
            }
        }
        out
    }

    /// Whether a draft scenario has this id.
    pub(super) fn has(&self, id: &str) -> bool {
        !self.find(id).is_empty()
    }

    /// The pending draft with this id (the newest file's), or an error naming the id.
    fn pending(&self, id: &str) -> Result<(usize, usize), HarnessError> {
        let found = self.find(id);
        if let Some((f, d, _)) = found
            .iter()
            .rev()
            .find(|(_, _, s)| *s == DraftStatus::Pending)
        {
            return Ok((*f, *d));
        }
        match found.last() {
            Some((_, _, status)) => Err(HarnessError::Usage(format!(
                "draft `{id}` is already {}; only pending drafts can be reviewed",
                status.as_str()
            ))),
            None => Err(HarnessError::Usage(format!(
                "no draft has test id `{id}` (see `assay generate review --all`)"
            ))),
        }
    }

    /// The ids of the pending drafts (made from scenario `entity`'s scenario, when given as
    /// review lists it: `scenario:<id>`).
    pub(super) fn all_pending(&self, entity: Option<&str>, out: &mut Vec<String>) {
        for d in self.files.iter().flat_map(|l| &l.file.drafts) {
            if d.status == DraftStatus::Pending
                && entity.is_none_or(|e| entity_of(&d.case.from_scenario) == e)
                && !out.contains(&d.case.scenario.id)
            {
                out.push(d.case.scenario.id.clone());
            }
        }
    }

    /// Checks an accept of the pending drafts `ids`, writing nothing: each must be pending and
    /// selected once, and no scenario of the suite may have its id unless that file already
    /// holds exactly this draft (as accepted by `reviewer`).
    pub(super) fn plan_accept(
        &self,
        ids: &[String],
        reviewer: &Reviewer,
    ) -> Result<Planned, HarnessError> {
        let existing = if ids.is_empty() {
            Vec::new()
        } else {
            sim::scenario_ids(&self.root)?
        };
        let mut planned = Vec::with_capacity(ids.len());
        for (n, id) in ids.iter().enumerate() {
            if ids[..n].contains(id) {
                return Err(HarnessError::Usage(format!(
                    "test id `{id}` is selected twice; nothing was written"
                )));
            }
            let (f, d) = self
                .pending(id)
                .map_err(|e| HarnessError::Usage(format!("{e}; nothing was written")))?;
            let mut draft = self.files[f].file.drafts[d].case.clone();
            draft.provenance.accepted_by = Some(reviewer.by.clone());
            draft.provenance.accepted_at = Some(reviewer.at.clone());
            let text = sim::scenario_yaml(&draft).map_err(HarnessError::Infrastructure)?;
            let path = sim::scenario_path(&self.root, id);
            let finished = match existing.iter().find(|(i, _)| i == id) {
                None => false,
                Some((_, file)) => {
                    let same = std::fs::read_to_string(file)
                        .ok()
                        .and_then(|t| serde_norway::from_str::<Value>(&t).ok())
                        .zip(serde_norway::from_str::<Value>(&text).ok())
                        .is_some_and(|(a, b)| a == b);
                    if !same {
                        return Err(HarnessError::Usage(format!(
                            "draft `{id}`: the suite already has scenario `{id}` ({}); reject the draft or rename that scenario; nothing was written",
                            relative(&self.root, file).display()
                        )));
                    }
                    true
                }
            };
            planned.push((f, d, path, text, finished));
        }
        Ok(Planned(planned))
    }

    /// Writes a checked accept: each scenario to `sim/scenarios/<id>.yaml` (with who accepted
    /// it and when), and marks its draft accepted. Returns the scenario files, relative to the
    /// project.
    pub(super) fn accept(
        &mut self,
        planned: Planned,
        reviewer: &Reviewer,
    ) -> Result<Vec<PathBuf>, HarnessError> {
        let mut written = Vec::new();
        for (f, d, path, text, finished) in planned.0 {
            if !finished {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
                }
                assay_project::results::write_replace(&path, text.as_bytes())
                    .map_err(|e| HarnessError::io(&path, &e))?;
            }
            let into = relative(&self.root, &path)
                .to_string_lossy()
                .replace('\\', "/");
            let draft = &mut self.files[f].file.drafts[d];
            set_review(draft, DraftStatus::Accepted, reviewer, None);
            draft.accepted_into = Some(into);
            if !self.dirty.contains(&f) {
                self.dirty.push(f);
            }
            written.push(relative(&self.root, &path));
        }
        Ok(written)
    }

    /// Rejects the pending drafts `ids` with `reason`; checks every id before changing any.
    pub(super) fn reject(
        &mut self,
        ids: &[String],
        reason: &str,
        reviewer: &Reviewer,
    ) -> Result<(), HarnessError> {
        let places = ids
            .iter()
            .map(|id| self.pending(id))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| HarnessError::Usage(format!("{e}; nothing was written")))?;
        for (f, d) in places {
            set_review(
                &mut self.files[f].file.drafts[d],
                DraftStatus::Rejected,
                reviewer,
                Some(reason.to_owned()),
            );
            if !self.dirty.contains(&f) {
                self.dirty.push(f);
            }
        }
        Ok(())
    }

    /// Writes the changed draft files; returns them relative to the project.
    pub(super) fn save(&self) -> Result<Vec<PathBuf>, HarnessError> {
        let mut out = Vec::new();
        for &f in &self.dirty {
            let loaded = &self.files[f];
            sim::write(&loaded.path, &loaded.file)
                .map_err(|e| HarnessError::io(&loaded.path, &e))?;
            out.push(relative(&self.root, &loaded.path));
        }
        Ok(out)
    }
}

/// Every draft scenario of the project at `root`, as review lists drafts.
pub(super) fn entries(root: &Path, out: &mut Vec<DraftEntry>) -> Result<(), HarnessError> {
    for loaded in sim::load(root)? {
        for d in &loaded.file.drafts {
            let s = &d.case.scenario;
            out.push(DraftEntry {
                bank: BANK.to_owned(),
                test_id: s.id.clone(),
                entity_id: entity_of(&d.case.from_scenario),
                status: d.status,
                finding: d.finding.clone(),
                finding_now: None,
                summary: s.initial_message.clone(),
                expects: Vec::new(),
                excludes: Vec::new(),
                variant: d.case.provenance.variant.clone(),
                note: d.note.clone(),
                accepted_into: d.accepted_into.clone(),
                file: relative(root, &loaded.path),
                case: serde_json::to_value(&d.case).unwrap_or(Value::Null),
            });
        }
    }
    Ok(())
}

/// The error for an action that draft scenarios do not take (an edit).
pub(super) fn not_editable(id: &str) -> HarnessError {
    HarnessError::Usage(format!(
        "draft `{id}` is a scenario: accept it and edit sim/scenarios/{id}.yaml, or reject it; nothing was written"
    ))
}
