//! Review of draft cases (`assay generate review` and the `/ui/drafts` page): list the drafts
//! by entity (findings first), accept them into a bank, reject them with a reason, or edit a
//! pending one. [`coverage`] says which entities, handlers and rules no case tests. Draft
//! scenarios of the simulator (`sim/drafts/`) are reviewed with them ([`scenarios`]): listed
//! under bank `scenario`, accepted into `sim/scenarios/`, rejected; not edited as drafts.
//!
//! Accepting copies the case, with its provenance (plus who accepted it and when), into
//! `test_banks/<bank>/generated.json`, which is created as a V2 bank when absent. A test id
//! that any bank already has is refused. Every change is checked in full before anything is
//! written; files are replaced atomically, the bank file before the draft file, and the whole
//! read-check-write holds `.assay/drafts.lock`, so the console and the web page can review at
//! the same time without losing each other's changes.
//!
//! Accepted cases are then kept up: [`confirm`] records that stale ones still hold (on the
//! latest run's evidence), [`retire`] takes them out of their bank with who and why, and
//! [`recheck_findings`] tells, when drafts are listed, which findings the current knowledge
//! base no longer shows.

mod confirm;
pub mod coverage;
mod recheck;
mod retire;
pub mod scenarios;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use assay_core::answer::AnswerCase;
pub use assay_core::bank::Case;
use assay_core::bank::{BankFile, BankType, PatternCase, SemanticCase, StateCase};
use assay_core::draft::{DraftStatus, Finding};
use assay_kb::datafile::{self, DataError, Format};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::HarnessError;
use assay_project::drafts::banks_dir_of as banks_dir;
use assay_project::drafts::{self, Loaded};
pub use assay_project::drafts::{
    DRAFTS_LOCK_FILE, DRAFTS_LOCK_WAIT, DraftsLock, GENERATED_BANK_FILE, read_generated,
    record_expectations, write_bank,
};
use assay_project::project::Project;

pub use confirm::{Confirm, confirm, passed};
pub use coverage::{Coverage, EntityCoverage, UncoveredRule, coverage};
pub use recheck::{FindingNow, FindingStatus, recheck_findings};
pub use retire::{RETIRED_FILE, Retirement, retire, retired};

/// What a case type offers review, besides what every case says ([`Case`]).
pub trait ReviewCase: Case + Clone + PartialEq + Serialize + DeserializeOwned {
    /// Its bank.
    const BANK: BankType;
    /// The message, or the user state, in one line.
    fn summary(&self) -> String;
}

impl ReviewCase for SemanticCase {
    const BANK: BankType = BankType::Semantic;
    fn summary(&self) -> String {
        self.prompt.clone()
    }
}

impl ReviewCase for StateCase {
    const BANK: BankType = BankType::State;
    fn summary(&self) -> String {
        Value::Object(self.user_state.clone()).to_string()
    }
}

impl ReviewCase for PatternCase {
    const BANK: BankType = BankType::Pattern;
    fn summary(&self) -> String {
        self.prompt.clone()
    }
}

impl ReviewCase for AnswerCase {
    const BANK: BankType = BankType::Answer;
    fn summary(&self) -> String {
        self.message.clone()
    }
}

/// The entity a draft was made for: its provenance's, else the first it expects or excludes.
fn entity_of<C: ReviewCase>(case: &C) -> String {
    case.provenance()
        .and_then(|p| p.entity_id.clone())
        .or_else(|| case.expects().first().map(|s| (*s).clone()))
        .or_else(|| case.excludes().first().map(|s| (*s).clone()))
        .unwrap_or_else(|| "(none)".to_owned())
}

/// One draft as review lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DraftEntry {
    /// Its bank (`semantic`, `state`, `pattern`, `answer`), or `scenario` for a draft
    /// scenario of the simulator.
    pub bank: String,
    /// Its test id.
    pub test_id: String,
    /// The entity it was made for.
    pub entity_id: String,
    /// Where it stands.
    pub status: DraftStatus,
    /// What the system does differently from what the draft intends, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<Finding>,
    /// The finding checked against the current knowledge base and rules (set by
    /// [`recheck_findings`]): whether it still holds or is fixed since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding_now: Option<FindingNow>,
    /// The message, or the user state.
    pub summary: String,
    /// The entities it expects.
    pub expects: Vec<String>,
    /// The entities it expects not to be selected.
    pub excludes: Vec<String>,
    /// What it varies (the boundary, the persona).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Why it was rejected or what an edit changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The bank file it was accepted into.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_into: Option<String>,
    /// Its draft file.
    pub file: PathBuf,
    /// The whole case, as in the file.
    pub case: Value,
}

/// The drafts of one entity, findings first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityDrafts {
    /// The entity.
    pub entity_id: String,
    /// How many of its drafts are findings.
    pub findings: usize,
    /// Its drafts.
    pub drafts: Vec<DraftEntry>,
}

/// Which drafts [`list`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only those made for this entity.
    pub entity: Option<String>,
    /// Accepted and rejected ones too (by default only pending ones).
    pub reviewed: bool,
}

/// Counts of a project's drafts, by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DraftCounts {
    /// Not reviewed yet.
    pub pending: usize,
    /// Pending and a finding.
    pub findings: usize,
    /// Accepted.
    pub accepted: usize,
    /// Rejected.
    pub rejected: usize,
}

fn entries<C: ReviewCase>(files: &[Loaded<C>], root: &Path, out: &mut Vec<DraftEntry>) {
    for loaded in files {
        for d in &loaded.file.drafts {
            out.push(DraftEntry {
                bank: C::BANK.key().to_owned(),
                test_id: d.case.test_id().to_owned(),
                entity_id: entity_of(&d.case),
                status: d.status,
                finding: d.finding.clone(),
                finding_now: None,
                summary: d.case.summary(),
                expects: d.case.expects().into_iter().cloned().collect(),
                excludes: d.case.excludes().into_iter().cloned().collect(),
                variant: d.case.provenance().and_then(|p| p.variant.clone()),
                note: d.note.clone(),
                accepted_into: d.accepted_into.clone(),
                file: relative(root, &loaded.path),
                case: serde_json::to_value(&d.case).unwrap_or(Value::Null),
            });
        }
    }
}

fn relative(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}

/// Every draft of the project at `root`, as entries.
pub fn all_entries(root: &Path) -> Result<Vec<DraftEntry>, HarnessError> {
    let all = drafts::load_drafts(&banks_dir(root)?)?;
    let mut out = Vec::new();
    entries(&all.semantic, root, &mut out);
    entries(&all.state, root, &mut out);
    entries(&all.pattern, root, &mut out);
    entries(&all.answer, root, &mut out);
    scenarios::entries(root, &mut out)?;
    Ok(out)
}

/// How many drafts the project at `root` has, by status.
pub fn counts(entries: &[DraftEntry]) -> DraftCounts {
    let mut c = DraftCounts::default();
    for e in entries {
        match e.status {
            DraftStatus::Pending => {
                c.pending += 1;
                c.findings += usize::from(e.finding.is_some());
            }
            DraftStatus::Accepted => c.accepted += 1,
            DraftStatus::Rejected => c.rejected += 1,
        }
    }
    c
}

/// The drafts of the project at `root` that pass `filter`, grouped by entity (entities by
/// id), findings first within each entity.
pub fn list(root: &Path, filter: &ListFilter) -> Result<Vec<EntityDrafts>, HarnessError> {
    Ok(group(all_entries(root)?, filter))
}

/// [`list`] on entries already read.
pub fn group(entries: Vec<DraftEntry>, filter: &ListFilter) -> Vec<EntityDrafts> {
    let mut by_entity: BTreeMap<String, Vec<DraftEntry>> = BTreeMap::new();
    for e in entries {
        if (!filter.reviewed && e.status != DraftStatus::Pending)
            || filter.entity.as_ref().is_some_and(|id| *id != e.entity_id)
        {
            continue;
        }
        by_entity.entry(e.entity_id.clone()).or_default().push(e);
    }
    by_entity
        .into_iter()
        .map(|(entity_id, mut drafts)| {
            // Stable: findings first, then file order.
            drafts.sort_by_key(|d| d.finding.is_none());
            EntityDrafts {
                entity_id,
                findings: drafts.iter().filter(|d| d.finding.is_some()).count(),
                drafts,
            }
        })
        .collect()
}

/// Which drafts to accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// These test ids.
    Ids(Vec<String>),
    /// Every pending draft (of one entity, when given).
    AllPending {
        /// Only those made for this entity.
        entity: Option<String>,
    },
}

/// Who reviews, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewer {
    /// The reviewer's name.
    pub by: String,
    /// The time (RFC 3339, UTC).
    pub at: String,
}

impl Reviewer {
    /// `by`, now.
    pub fn now(by: &str) -> Reviewer {
        Reviewer {
            by: by.to_owned(),
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }
}

/// What a review action changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The test ids changed, in order.
    pub test_ids: Vec<String>,
    /// The bank files written (relative to the project), for an accept.
    pub bank_files: Vec<PathBuf>,
    /// The draft files rewritten (relative to the project).
    pub draft_files: Vec<PathBuf>,
    /// What an edit changed, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The drafts of every bank, read for a change.
struct Workspace {
    root: PathBuf,
    semantic: Vec<Loaded<SemanticCase>>,
    state: Vec<Loaded<StateCase>>,
    pattern: Vec<Loaded<PatternCase>>,
    answer: Vec<Loaded<AnswerCase>>,
    /// Which draft files changed: (bank, index in its vector).
    dirty: Vec<(BankType, usize)>,
}

/// Where one draft is: its bank, its file's index and its index in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    bank: BankType,
    file: usize,
    draft: usize,
}

fn find_in<C: ReviewCase>(files: &[Loaded<C>], id: &str, out: &mut Vec<(Place, DraftStatus)>) {
    for (fi, loaded) in files.iter().enumerate() {
        for (di, d) in loaded.file.drafts.iter().enumerate() {
            if d.case.test_id() == id {
                out.push((
                    Place {
                        bank: C::BANK,
                        file: fi,
                        draft: di,
                    },
                    d.status,
                ));
            }
        }
    }
}

impl Workspace {
    fn load(root: &Path) -> Result<Workspace, HarnessError> {
        let all = drafts::load_drafts(&banks_dir(root)?)?;
        Ok(Workspace {
            root: root.to_owned(),
            semantic: all.semantic,
            state: all.state,
            pattern: all.pattern,
            answer: all.answer,
            dirty: Vec::new(),
        })
    }

    /// The pending draft with this id (the newest generation's when several are), or an error
    /// naming the id.
    fn pending(&self, id: &str) -> Result<Place, HarnessError> {
        let mut found = Vec::new();
        find_in(&self.semantic, id, &mut found);
        find_in(&self.state, id, &mut found);
        find_in(&self.pattern, id, &mut found);
        find_in(&self.answer, id, &mut found);
        if let Some((place, _)) = found.iter().rev().find(|(_, s)| *s == DraftStatus::Pending) {
            return Ok(*place);
        }
        match found.last() {
            Some((_, status)) => Err(HarnessError::Usage(format!(
                "draft `{id}` is already {}; only pending drafts can be reviewed",
                status.as_str()
            ))),
            None => Err(HarnessError::Usage(format!(
                "no draft has test id `{id}` (see `assay generate review --all`)"
            ))),
        }
    }

    /// Whether a draft case (of any status) has this id.
    fn has(&self, id: &str) -> bool {
        let mut found = Vec::new();
        find_in(&self.semantic, id, &mut found);
        find_in(&self.state, id, &mut found);
        find_in(&self.pattern, id, &mut found);
        find_in(&self.answer, id, &mut found);
        !found.is_empty()
    }

    fn all_pending(&self, entity: Option<&str>) -> Vec<String> {
        fn ids<C: ReviewCase>(files: &[Loaded<C>], entity: Option<&str>, out: &mut Vec<String>) {
            for d in files.iter().flat_map(|l| &l.file.drafts) {
                if d.status == DraftStatus::Pending
                    && entity.is_none_or(|e| entity_of(&d.case) == e)
                    && !out.iter().any(|x| x == d.case.test_id())
                {
                    out.push(d.case.test_id().to_owned());
                }
            }
        }
        let mut out = Vec::new();
        ids(&self.semantic, entity, &mut out);
        ids(&self.state, entity, &mut out);
        ids(&self.pattern, entity, &mut out);
        ids(&self.answer, entity, &mut out);
        out
    }

    fn mark(&mut self, place: Place) {
        if !self.dirty.contains(&(place.bank, place.file)) {
            self.dirty.push((place.bank, place.file));
        }
    }

    /// Applies `f` to the draft at `place`, whatever its case type.
    fn with_draft<R>(&mut self, place: Place, f: impl FnOnce(&mut dyn DraftAccess) -> R) -> R {
        self.mark(place);
        match place.bank {
            BankType::Semantic => f(&mut self.semantic[place.file].file.drafts[place.draft]),
            BankType::State => f(&mut self.state[place.file].file.drafts[place.draft]),
            BankType::Answer => f(&mut self.answer[place.file].file.drafts[place.draft]),
            _ => f(&mut self.pattern[place.file].file.drafts[place.draft]),
        }
    }

    /// Writes the changed draft files; returns them relative to the project.
    fn save(&self) -> Result<Vec<PathBuf>, HarnessError> {
        let mut written = Vec::new();
        for (bank, i) in &self.dirty {
            let path = match bank {
                BankType::Semantic => write(&self.semantic[*i])?,
                BankType::State => write(&self.state[*i])?,
                BankType::Answer => write(&self.answer[*i])?,
                _ => write(&self.pattern[*i])?,
            };
            written.push(relative(&self.root, path));
        }
        Ok(written)
    }
}

fn write<C: Serialize>(loaded: &Loaded<C>) -> Result<&Path, HarnessError> {
    drafts::write_draft_bank(&loaded.path, &loaded.file)?;
    Ok(&loaded.path)
}

/// A draft of any case type, for the actions that do not depend on it.
trait DraftAccess {
    fn set_review(&mut self, status: DraftStatus, reviewer: &Reviewer, note: Option<String>);
    fn set_accepted_into(&mut self, into: String);
    fn case_json(&self) -> Value;
    fn bank(&self) -> BankType;
    fn append_note(&mut self, note: &str);
}

/// Records a review on a draft of any kind (a case's or a scenario's): its status, who and when,
/// and the note when one is given.
fn set_review<C>(
    draft: &mut assay_core::draft::Draft<C>,
    status: DraftStatus,
    reviewer: &Reviewer,
    note: Option<String>,
) {
    draft.status = status;
    draft.reviewed_by = Some(reviewer.by.clone());
    draft.reviewed_at = Some(reviewer.at.clone());
    if note.is_some() {
        draft.note = note;
    }
}

impl<C: ReviewCase> DraftAccess for assay_core::draft::Draft<C> {
    fn set_review(&mut self, status: DraftStatus, reviewer: &Reviewer, note: Option<String>) {
        set_review(self, status, reviewer, note);
    }
    fn set_accepted_into(&mut self, into: String) {
        self.accepted_into = Some(into);
    }
    fn case_json(&self) -> Value {
        serde_json::to_value(&self.case).unwrap_or(Value::Null)
    }
    fn bank(&self) -> BankType {
        C::BANK
    }
    fn append_note(&mut self, note: &str) {
        self.note = Some(match self.note.take() {
            Some(old) => format!("{old}; {note}"),
            None => note.to_owned(),
        });
    }
}

/// Every test id the project's banks hold.
fn bank_ids(project: &Project) -> HashSet<String> {
    let b = &project.banks;
    b.semantic
        .iter()
        .map(|c| c.case.test_id.clone())
        .chain(b.state.iter().map(|c| c.case.test_id.clone()))
        .chain(b.pattern.iter().map(|c| c.case.test_id.clone()))
        .chain(b.always.iter().map(|c| c.case.test_id.clone()))
        .chain(b.answer.iter().map(|c| c.case.test_id.clone()))
        .collect()
}

/// Appends the accepted cases of one bank to its `generated.json`; returns the path written.
fn append<C: ReviewCase>(
    root: &Path,
    banks_dir: &Path,
    cases: Vec<C>,
) -> Result<Option<PathBuf>, HarnessError> {
    if cases.is_empty() {
        return Ok(None);
    }
    let path = assay_project::banks::bank_dir(banks_dir, C::BANK).join(GENERATED_BANK_FILE);
    let mut file: BankFile<C> = read_generated(&path, C::BANK)?;
    file.tests.extend(cases);
    write_bank(&path, &file)?;
    Ok(Some(relative(root, &path)))
}

/// Accepts drafts of the project at `root` into its banks. Each accepted case's provenance
/// lists every entity it names, with its version now for one an edit added (`env` finds the
/// knowledge-base store, as a run does).
///
/// Every selected draft must be pending and its test id new to every bank (and to the others
/// selected): otherwise nothing is written and the error names the id.
pub fn accept(
    root: &Path,
    selection: &Selection,
    reviewer: &Reviewer,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Outcome, HarnessError> {
    let _lock = DraftsLock::acquire(root, DRAFTS_LOCK_WAIT)?;
    let project = Project::load(root)?;
    let versions = {
        let store = assay_project::engine::open_store_with(&project.settings, env)?;
        assay_project::engine::sync_kb(&store, &project)?;
        assay_project::provenance::current_versions(&*store)?
    };
    let mut ws = Workspace::load(root)?;
    let mut sc = scenarios::Scenarios::load(root)?;
    let all = match selection {
        Selection::Ids(ids) => ids.clone(),
        Selection::AllPending { entity } => {
            let mut ids = ws.all_pending(entity.as_deref());
            sc.all_pending(entity.as_deref(), &mut ids);
            ids
        }
    };
    if all.is_empty() {
        return Err(HarnessError::Usage("no pending draft to accept".to_owned()));
    }
    let (scenario_ids, ids) = split(&ws, &sc, &all);
    let scenario_plan = sc.plan_accept(&scenario_ids, reviewer)?;
    let existing = bank_ids(&project);
    let banks_dir = &project.settings.banks_dir;
    let mut seen = HashSet::new();
    let mut places = Vec::with_capacity(ids.len());
    // Drafts an interrupted accept already copied into generated.json (the bank written, the
    // draft file not yet): finished now, not refused and not copied twice.
    let mut finished = HashSet::new();
    for id in &ids {
        let place = ws
            .pending(id)
            .map_err(|e| HarnessError::Usage(format!("{e}; nothing was written")))?;
        places.push(place);
        let copied = || -> Result<bool, HarnessError> {
            match place.bank {
                BankType::Semantic => in_generated(&ws.semantic, place, banks_dir),
                BankType::State => in_generated(&ws.state, place, banks_dir),
                BankType::Answer => in_generated(&ws.answer, place, banks_dir),
                _ => in_generated(&ws.pattern, place, banks_dir),
            }
        };
        if existing.contains(id) && copied()? {
            finished.insert(id.clone());
        } else if existing.contains(id) {
            return Err(HarnessError::Usage(format!(
                "draft `{id}`: a bank already has test id `{id}`; edit the draft's test_id (--edit {id} --set test_id=…) or reject it; nothing was written"
            )));
        }
        if !seen.insert(id.clone()) {
            return Err(HarnessError::Usage(format!(
                "test id `{id}` is selected twice; nothing was written"
            )));
        }
    }
    // The cases, with the acceptance recorded in their provenance.
    let mut semantic = Vec::new();
    let mut state = Vec::new();
    let mut pattern = Vec::new();
    let mut answer = Vec::new();
    for (p, id) in places.iter().zip(&ids) {
        if finished.contains(id) {
            continue;
        }
        match p.bank {
            BankType::Semantic => {
                semantic.push(accepted_case(&ws.semantic, *p, reviewer, &versions));
            }
            BankType::State => state.push(accepted_case(&ws.state, *p, reviewer, &versions)),
            BankType::Answer => answer.push(accepted_case(&ws.answer, *p, reviewer, &versions)),
            _ => pattern.push(accepted_case(&ws.pattern, *p, reviewer, &versions)),
        }
    }
    let bank_files: Vec<PathBuf> = [
        append(root, banks_dir, semantic)?,
        append(root, banks_dir, state)?,
        append(root, banks_dir, pattern)?,
        append(root, banks_dir, answer)?,
    ]
    .into_iter()
    .flatten()
    .collect();
    for p in &places {
        let into = assay_project::banks::bank_dir(banks_dir, p.bank).join(GENERATED_BANK_FILE);
        let into = relative(root, &into).to_string_lossy().replace('\\', "/");
        ws.with_draft(*p, |d| {
            d.set_review(DraftStatus::Accepted, reviewer, None);
            d.set_accepted_into(into);
        });
    }
    let scenario_files = sc.accept(scenario_plan, reviewer)?;
    let mut draft_files = ws.save()?;
    draft_files.extend(sc.save()?);
    tracing::info!(accepted = all.len(), by = %reviewer.by, "drafts accepted");
    Ok(Outcome {
        test_ids: all,
        bank_files: bank_files.into_iter().chain(scenario_files).collect(),
        draft_files,
        note: None,
    })
}

/// Splits review ids into draft scenarios' and draft cases': an id is a scenario's when a
/// draft scenario has it and no draft case does.
fn split(ws: &Workspace, sc: &scenarios::Scenarios, ids: &[String]) -> (Vec<String>, Vec<String>) {
    ids.iter()
        .cloned()
        .partition(|id| sc.has(id) && !ws.has(id))
}

/// Whether the bank's `generated.json` already holds the draft at `p`, as an accept copies it
/// (the same case but for who accepted it and when, and the entity versions it completed).
fn in_generated<C: ReviewCase>(
    files: &[Loaded<C>],
    p: Place,
    banks_dir: &Path,
) -> Result<bool, HarnessError> {
    let path = assay_project::banks::bank_dir(banks_dir, C::BANK).join(GENERATED_BANK_FILE);
    if !path.exists() {
        return Ok(false);
    }
    let strip = |c: &C| {
        let mut c = c.clone();
        if let Some(p) = c.provenance_mut() {
            p.accepted_by = None;
            p.accepted_at = None;
            p.entity_versions.clear();
        }
        c
    };
    let draft = strip(&files[p.file].file.drafts[p.draft].case);
    let bank: BankFile<C> = read_generated(&path, C::BANK)?;
    Ok(bank.tests.iter().any(|c| strip(c) == draft))
}

fn accepted_case<C: ReviewCase>(
    files: &[Loaded<C>],
    p: Place,
    reviewer: &Reviewer,
    versions: &BTreeMap<String, u32>,
) -> C {
    let mut case = files[p.file].file.drafts[p.draft].case.clone();
    // What an edit made it name (or a draft file written before every entity was recorded).
    assay_project::provenance::record_named(&mut case, versions);
    if let Some(prov) = case.provenance_mut() {
        prov.accepted_by = Some(reviewer.by.clone());
        prov.accepted_at = Some(reviewer.at.clone());
    }
    case
}

/// Rejects pending drafts of the project at `root`, with a reason.
pub fn reject(
    root: &Path,
    ids: &[String],
    reason: &str,
    reviewer: &Reviewer,
) -> Result<Outcome, HarnessError> {
    if reason.trim().is_empty() {
        return Err(HarnessError::Usage(
            "a rejection needs a reason (--reason)".to_owned(),
        ));
    }
    if ids.is_empty() {
        return Err(HarnessError::Usage("no draft to reject".to_owned()));
    }
    let _lock = DraftsLock::acquire(root, DRAFTS_LOCK_WAIT)?;
    let mut ws = Workspace::load(root)?;
    let mut sc = scenarios::Scenarios::load(root)?;
    let (scenario_ids, case_ids) = split(&ws, &sc, ids);
    sc.reject(&scenario_ids, reason, reviewer)?;
    let places = case_ids
        .iter()
        .map(|id| ws.pending(id))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| HarnessError::Usage(format!("{e}; nothing was written")))?;
    for p in places {
        ws.with_draft(p, |d| {
            d.set_review(DraftStatus::Rejected, reviewer, Some(reason.to_owned()));
        });
    }
    let mut draft_files = ws.save()?;
    draft_files.extend(sc.save()?);
    Ok(Outcome {
        test_ids: ids.to_vec(),
        bank_files: Vec::new(),
        draft_files,
        note: Some(reason.to_owned()),
    })
}

/// Parses `field=value` pairs (as given on the command line).
pub fn parse_sets(sets: &[String]) -> Result<Vec<(String, String)>, HarnessError> {
    sets.iter()
        .map(|s| {
            s.split_once('=')
                .filter(|(f, _)| !f.trim().is_empty())
                .map(|(f, v)| (f.trim().to_owned(), v.to_owned()))
                .ok_or_else(|| HarnessError::Usage(format!("--set `{s}`: expected FIELD=VALUE")))
        })
        .collect()
}

/// The value `raw` gives a field whose current value is `current`: text for a text field
/// (unless written as a JSON string), JSON otherwise (text when it is not JSON, which the
/// case's type then refuses, naming the field).
fn field_value(current: Option<&Value>, raw: &str) -> Value {
    let json = serde_json::from_str::<Value>(raw);
    match (current, json) {
        (Some(Value::String(_)), Ok(Value::String(s))) => Value::String(s),
        (Some(Value::String(_)), _) | (_, Err(_)) => Value::String(raw.to_owned()),
        (_, Ok(v)) => v,
    }
}

/// Applies `sets` to a case, strictly: the result must be a valid case of its type (an unknown
/// field or a wrong type is an error naming the field), and every entity it names must be in
/// the knowledge base or in its `known_missing`.
fn edited<C: ReviewCase>(
    case: &C,
    sets: &[(String, String)],
    draft_file: &Path,
    known: &dyn Fn(&str) -> bool,
) -> Result<C, HarnessError> {
    let mut value =
        serde_json::to_value(case).map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
    let Some(object) = value.as_object_mut() else {
        return Err(HarnessError::Infrastructure(
            "a case is not an object".to_owned(),
        ));
    };
    for (field, raw) in sets {
        if field == "provenance" {
            return Err(HarnessError::Usage(format!(
                "--set {field}: provenance records how the draft was made and cannot be edited"
            )));
        }
        let new = field_value(object.get(field), raw);
        object.insert(field.clone(), new);
    }
    let text = value.to_string();
    let place = PathBuf::from(format!(
        "{} (draft `{}`)",
        draft_file.display(),
        case.test_id()
    ));
    let mut unknown = Vec::new();
    let case: C = datafile::parse(&place, &text, Format::Json, &mut |w| unknown.push(w))?;
    if let Some(first) = unknown.into_iter().next() {
        return Err(DataError::new(&place, first).into());
    }
    if case.test_id().trim().is_empty() {
        return Err(DataError::new(&place, "test_id: is empty").into());
    }
    for id in case.expects().into_iter().chain(case.excludes()) {
        if !known(id) && !case.known_missing().contains(id) {
            return Err(DataError::new(
                &place,
                format!(
                    "unknown entity `{id}` (list it in known_missing if it is absent on purpose)"
                ),
            )
            .into());
        }
    }
    Ok(case)
}

/// Edits one pending draft of the project at `root`: `sets` are `(field, value)` pairs
/// applied to its case (see [`parse_sets`]). The draft stays pending; its note says what
/// changed.
pub fn edit(
    root: &Path,
    id: &str,
    sets: &[(String, String)],
    reviewer: &Reviewer,
) -> Result<Outcome, HarnessError> {
    if sets.is_empty() {
        return Err(HarnessError::Usage(
            "an edit needs at least one FIELD=VALUE (--set)".to_owned(),
        ));
    }
    let _lock = DraftsLock::acquire(root, DRAFTS_LOCK_WAIT)?;
    let project = Project::load(root)?;
    let known = |id: &str| project.kb.kb.entities().iter().any(|e| e.entity_id == id);
    let mut ws = Workspace::load(root)?;
    if !ws.has(id) && scenarios::Scenarios::load(root)?.has(id) {
        return Err(scenarios::not_editable(id));
    }
    let place = ws.pending(id)?;
    let fields: Vec<&str> = sets.iter().map(|(f, _)| f.as_str()).collect();
    let note = format!(
        "edited by {} at {}: {}",
        reviewer.by,
        reviewer.at,
        fields.join(", ")
    );
    macro_rules! apply {
        ($files:expr) => {{
            let loaded = &mut $files[place.file];
            let draft = &mut loaded.file.drafts[place.draft];
            let new = edited(&draft.case, sets, &loaded.path, &known)?;
            if new.test_id() != id {
                let mut others = Vec::new();
                find_in(&ws.semantic, new.test_id(), &mut others);
                find_in(&ws.state, new.test_id(), &mut others);
                find_in(&ws.pattern, new.test_id(), &mut others);
                find_in(&ws.answer, new.test_id(), &mut others);
                if !others.is_empty() || bank_ids(&project).contains(new.test_id()) {
                    return Err(HarnessError::Usage(format!(
                        "test_id `{}` is already taken; nothing was written",
                        new.test_id()
                    )));
                }
            }
            let loaded = &mut $files[place.file];
            loaded.file.drafts[place.draft].case = new;
        }};
    }
    match place.bank {
        BankType::Semantic => apply!(ws.semantic),
        BankType::State => apply!(ws.state),
        BankType::Answer => apply!(ws.answer),
        _ => apply!(ws.pattern),
    }
    ws.with_draft(place, |d| d.append_note(&note));
    let draft_files = ws.save()?;
    Ok(Outcome {
        test_ids: vec![id.to_owned()],
        bank_files: Vec::new(),
        draft_files,
        note: Some(note),
    })
}

/// The case of a draft, as JSON (for a form that edits it).
pub fn draft_case(root: &Path, id: &str) -> Result<(BankType, Value), HarnessError> {
    let mut ws = Workspace::load(root)?;
    if !ws.has(id) && scenarios::Scenarios::load(root)?.has(id) {
        return Err(scenarios::not_editable(id));
    }
    let place = ws.pending(id)?;
    let out = ws.with_draft(place, |d| (d.bank(), d.case_json()));
    Ok(out)
}

#[cfg(test)]
mod tests;
