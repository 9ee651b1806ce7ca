//! Keeping the tests up with the knowledge base:
//!
//! * `assay run --changed-since RUN` ([`changed_entities`], [`ChangedEntities`]): the entities
//!   whose content differs from that run's knowledge base (per-entity digests, `kb.entities`
//!   of its RunLog), and added or removed since; a run then takes only the cases that name one
//!   of them, or whose provenance does, and the always cases of their audiences.
//! * Stale cases ([`StaleCheck`]): a case that names an entity edited since its reference
//!   point, the entity version its provenance records or else the accepted run's knowledge
//!   base, with the fields that changed. A run lists them in its RunLog (`stale`).
//! * `assay run --include-drafts` ([`include_drafts`]): the pending drafts of
//!   `test_banks/drafts/` added to the project's banks as ordinary cases.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use assay_core::answer::AnswerCase;
use assay_core::bank::{BankType, Case, PatternCase, SemanticCase, StateCase};
use assay_core::draft::Provenance;
use assay_core::entity::Entity;
use assay_core::runlog::{
    RunLog, STALE_LISTED, StaleCase, StaleChange, StaleEntity, StaleReference,
};
use assay_kb::KnowledgeBase;
use assay_kb::datafile::DataError;
use assay_kb::store::{EntityVersion, KbStore};

use crate::HarnessError;
use assay_project::banks::{self, EntityRef, Located};
use assay_project::project::Project;

/// Calls `each` with every entity an expectation field of `case` names (expected, secondary,
/// not expected, rank checks, handlers, matches, always).
fn each_named(case: &dyn Case, each: &mut dyn FnMut(&str)) {
    for id in case.expects().into_iter().chain(case.excludes()) {
        each(id);
    }
}

/// Every entity `case` names or its provenance lists, each once, in first-seen order.
pub fn named_entities(case: &dyn Case) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |id: &str| {
        if !out.iter().any(|o| o == id) {
            out.push(id.to_owned());
        }
    };
    each_named(case, &mut add);
    if let Some(p) = case.provenance() {
        if let Some(id) = &p.entity_id {
            add(id);
        }
        for id in p.entity_versions.keys() {
            add(id);
        }
    }
    out
}

/// The entities changed since a run, and what `--changed-since` selects with them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangedEntities {
    /// The run compared with, as given (`latest`, a run id, …).
    pub reference: String,
    /// That run's `run_id`.
    pub run_id: String,
    /// Entities whose content differs from that run's, or that were added or removed since.
    pub entities: BTreeSet<String>,
    /// The audiences of those entities (their current `audience_types`): the always cases of
    /// these run too.
    pub audiences: BTreeSet<String>,
    /// The entities each answer case's contexts held in that run, by test id (an answer case
    /// names no entity in its fields: what its last run retrieved is what it reads).
    pub answer_contexts: BTreeMap<String, BTreeSet<String>>,
}

impl ChangedEntities {
    /// Whether a run with this filter takes `case`: it names a changed entity, its provenance
    /// does, or it is an always case of a changed entity's audience; an answer case, when its
    /// contexts in that run held a changed entity, or when that run gave it no context to go
    /// by (it did not run it, or retrieved nothing with an entity for it).
    pub fn selects(&self, case: &dyn Case) -> bool {
        if case.named_by_run() {
            return self
                .answer_contexts
                .get(case.test_id())
                .filter(|held| !held.is_empty())
                .is_none_or(|held| held.iter().any(|id| self.entities.contains(id)));
        }
        let mut hit = false;
        each_named(case, &mut |id| hit |= self.entities.contains(id));
        if hit {
            return true;
        }
        if let Some(p) = case.provenance()
            && (p
                .entity_id
                .as_ref()
                .is_some_and(|id| self.entities.contains(id))
                || p.entity_versions
                    .keys()
                    .any(|id| self.entities.contains(id)))
        {
            return true;
        }
        case.audience().is_some_and(|a| self.audiences.contains(a))
    }

    /// A digest of the selection, for the journal header (a resume must select the same).
    pub fn key(&self) -> String {
        use sha2::{Digest as _, Sha256};
        let mut h = Sha256::new();
        for id in &self.entities {
            h.update(id.as_bytes());
            h.update(b"\n");
        }
        h.update(b"|");
        for a in &self.audiences {
            h.update(a.as_bytes());
            h.update(b"\n");
        }
        // Only when there are answer contexts, so the key of a selection without them is the
        // one earlier versions wrote.
        for (case, held) in &self.answer_contexts {
            h.update(b"|");
            h.update(case.as_bytes());
            for id in held {
                h.update(b"\n");
                h.update(id.as_bytes());
            }
        }
        h.finalize()[..8].iter().fold(String::new(), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
    }
}

/// Reads the run `spec` names for `--changed-since` (`latest`, `accepted`, a run id, a saved
/// run's stamp or a results file), as `--baseline` finds one. Bad input is an error naming it.
pub fn load_reference(project: &Project, spec: &str) -> Result<RunLog, HarnessError> {
    let settings = &project.settings;
    let path = crate::baseline::resolve_in(&settings.root, &settings.results_dir, spec)
        .map_err(|e| HarnessError::Usage(format!("--changed-since: {e}")))?;
    crate::baseline::read_file(&path)
}

/// The entities each answer case's contexts held in the saved run `spec` names (`log`, read
/// already), by test id: from its RunLog's lists, or from its run log when they are not
/// complete. What `--changed-since` selects answer cases by.
pub fn answer_contexts(
    project: &Project,
    spec: &str,
    log: &RunLog,
) -> Result<BTreeMap<String, BTreeSet<String>>, HarnessError> {
    if log.answer.is_none() {
        // The run had no answer bank: nothing to read (its run log is not opened).
        return Ok(BTreeMap::new());
    }
    let settings = &project.settings;
    let path = crate::baseline::resolve_in(&settings.root, &settings.results_dir, spec)
        .map_err(|e| HarnessError::Usage(format!("--changed-since: {e}")))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let file = crate::caselog::cases_file(dir, log);
    contexts_of(log, file.as_deref())
        .map_err(|e| HarnessError::Usage(format!("--changed-since {spec}: {e}")))
}

/// The entities each answer case's contexts held in `log` (its cases read from its lists, or
/// from `file`, its run log, when they are not complete), by test id.
fn contexts_of(
    log: &RunLog,
    file: Option<&Path>,
) -> Result<BTreeMap<String, BTreeSet<String>>, crate::caselog::CaseLogError> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    crate::caselog::for_each_case(log, file, Some(BankType::Answer), &mut |r| {
        if let assay_core::aggregate::CaseRecord::Answer(a) = r {
            out.entry(a.test_id)
                .or_default()
                .extend(a.contexts.into_iter().filter_map(|c| c.entity));
        }
        Ok(())
    })?;
    Ok(out)
}

/// The entities whose content in `kb` (now, digested as `now`) differs from the run
/// `reference`'s knowledge base, with those added and removed since. `spec` is how the run was
/// named. A run that recorded no per-entity digests (a knowledge base beyond
/// `KbFingerprint::MAX_ENTITIES`) is a usage error: nothing can be compared.
pub fn changed_entities(
    reference: &RunLog,
    spec: &str,
    now: &assay_core::rundiff::KbFingerprint,
    kb: &dyn KnowledgeBase,
) -> Result<ChangedEntities, HarnessError> {
    let then = &reference.kb;
    if then.entities.is_empty() && then.count > 0 {
        return Err(HarnessError::Usage(format!(
            "--changed-since {spec}: run {} recorded no per-entity digests of its knowledge base ({} entities; a run records them up to {}), so what changed since cannot be told; run the whole suite instead",
            reference.run_id,
            then.count,
            assay_core::rundiff::KbFingerprint::MAX_ENTITIES
        )));
    }
    if now.entities.is_empty() && now.count > 0 {
        return Err(HarnessError::Usage(format!(
            "--changed-since {spec}: the knowledge base has {} entities, more than the {} whose digests a run compares; run the whole suite instead",
            now.count,
            assay_core::rundiff::KbFingerprint::MAX_ENTITIES
        )));
    }
    let mut entities = BTreeSet::new();
    for (id, digest) in &now.entities {
        if then.entities.get(id) != Some(digest) {
            entities.insert(id.clone());
        }
    }
    for id in then.entities.keys() {
        if !now.entities.contains_key(id) {
            entities.insert(id.clone());
        }
    }
    let mut audiences = BTreeSet::new();
    for id in &entities {
        if let Some(e) = kb.get(id)? {
            audiences.extend(e.audience_types.iter().cloned());
        }
    }
    Ok(ChangedEntities {
        reference: spec.to_owned(),
        run_id: reference.run_id.clone(),
        entities,
        audiences,
        answer_contexts: BTreeMap::new(),
    })
}

/// When a reviewer last vouched for a case: confirmed it, else accepted it, else when it was
/// made (`None` when no time parses).
pub fn vouched_at(p: &Provenance) -> Option<chrono::DateTime<chrono::Utc>> {
    [&p.confirmed_at, &p.accepted_at]
        .into_iter()
        .flatten()
        .chain(std::iter::once(&p.generated_at))
        .find_map(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// The fields that differ between two versions of an entity, in schema order, with each one's
/// value then and now (clipped).
pub fn field_changes(old: &Entity, new: &Entity) -> (Vec<String>, Vec<StaleChange>) {
    let fields = assay_kb::store::changed_fields(old, new);
    let (then, now) = (
        assay_project::provenance::entity_map(old),
        assay_project::provenance::entity_map(new),
    );
    let changes = fields
        .iter()
        .map(|f| StaleChange::new(f, then.get(*f), now.get(*f)))
        .collect();
    (fields.into_iter().map(str::to_owned).collect(), changes)
}

/// Hears of every case a run takes (the stale-case check).
pub trait CaseHook: std::fmt::Debug {
    /// `case` of `bank` is about to run (or comes from a resumed run's journal).
    fn case(&mut self, bank: BankType, case: &dyn Case);
}

/// The digest of one entity as a run's knowledge-base fingerprint records it.
pub fn entity_digest(entity: &assay_core::entity::Entity) -> String {
    use sha2::{Digest as _, Sha256};
    let text = serde_json::to_string(entity).unwrap_or_else(|e| e.to_string());
    Sha256::digest(text.as_bytes())[..8]
        .iter()
        .fold(String::new(), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// The per-entity digests of the accepted run's knowledge base, when a run has been accepted
/// and recorded them. A damaged acceptance is a warning here (a run does not fail for the
/// stale list), returned as `Err`.
pub fn accepted_digests(root: &Path) -> Result<Option<BTreeMap<String, String>>, String> {
    let Some(acceptance) = crate::accepted::current(root).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let log =
        crate::baseline::read_file(&acceptance.results_path(root)).map_err(|e| e.to_string())?;
    Ok((!log.kb.entities.is_empty()).then_some(log.kb.entities))
}

/// Finds the stale cases of a run as its cases go by ([`CaseHook`]): a case with provenance
/// is compared with the entity versions it records; one without, with the accepted run's
/// knowledge base (when a run has been accepted). Each entity's answer is worked out once.
pub struct StaleCheck<'a> {
    store: &'a dyn KbStore,
    /// Each entity's digest now.
    now: BTreeMap<String, String>,
    /// Each entity's digest in the accepted run.
    accepted: Option<BTreeMap<String, String>>,
    current_versions: HashMap<String, Option<u32>>,
    histories: HashMap<String, Vec<EntityVersion>>,
    by_version: HashMap<(String, u32), Option<StaleEntity>>,
    by_accepted: HashMap<String, Option<StaleEntity>>,
    found: Vec<StaleCase>,
    more: usize,
    problem: Option<String>,
}

impl std::fmt::Debug for StaleCheck<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaleCheck")
            .field("found", &self.found.len())
            .field("more", &self.more)
            .finish_non_exhaustive()
    }
}

impl<'a> StaleCheck<'a> {
    /// A check against `store` (its versions and history), with `now` the digest of each
    /// entity of the run's knowledge base and `accepted` the accepted run's.
    pub fn new(
        store: &'a dyn KbStore,
        now: BTreeMap<String, String>,
        accepted: Option<BTreeMap<String, String>>,
    ) -> Self {
        StaleCheck {
            store,
            now,
            accepted,
            current_versions: HashMap::new(),
            histories: HashMap::new(),
            by_version: HashMap::new(),
            by_accepted: HashMap::new(),
            found: Vec::new(),
            more: 0,
            problem: None,
        }
    }

    /// The stale cases found (the first [`STALE_LISTED`]), how many more there were, and a
    /// warning when the store could not answer for some entity.
    pub fn finish(self) -> (Vec<StaleCase>, usize, Option<String>) {
        (self.found, self.more, self.problem)
    }

    fn note<T>(&mut self, r: Result<T, assay_kb::KbError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                if self.problem.is_none() {
                    self.problem = Some(format!(
                        "stale cases: the store's entity history could not be read ({e}); the list may be incomplete"
                    ));
                }
                None
            }
        }
    }

    fn current_version(&mut self, id: &str) -> Option<u32> {
        if let Some(v) = self.current_versions.get(id) {
            return *v;
        }
        let stored = self.store.get_stored(id);
        let v = self.note(stored).flatten().map(|s| s.version);
        self.current_versions.insert(id.to_owned(), v);
        v
    }

    fn history(&mut self, id: &str) -> &[EntityVersion] {
        if !self.histories.contains_key(id) {
            let read = self.store.history(id);
            let versions = self.note(read).unwrap_or_default();
            self.histories.insert(id.to_owned(), versions);
        }
        self.histories.get(id).map_or(&[], Vec::as_slice)
    }

    /// The fields that differ between version `since` of `id` and its current version, with
    /// each one's value then and now (clipped).
    fn fields_between(&mut self, id: &str, since: u32) -> (Vec<String>, Vec<StaleChange>) {
        let history = self.history(id);
        let old = history.iter().find(|v| v.version == since);
        let new = history.iter().find(|v| v.is_current);
        match (old, new) {
            (Some(old), Some(new)) => field_changes(&old.entity, &new.entity),
            _ => (Vec::new(), Vec::new()),
        }
    }

    /// The version of `id` that was current at `at` (the newest written by then); the first
    /// the store has when none was written by then (a store filled after the case was made,
    /// as on a fresh checkout, knows nothing older).
    fn version_at(&mut self, id: &str, at: chrono::DateTime<chrono::Utc>) -> Option<u32> {
        let history = self.history(id);
        history
            .iter()
            .filter(|v| v.created_at <= at)
            .map(|v| v.version)
            .max()
            .or_else(|| history.iter().map(|v| v.version).min())
    }

    /// An entity the case names that its provenance does not list (a case accepted before
    /// provenance recorded every entity): compared with the version current when the case was
    /// last vouched for (confirmed, else accepted, else made).
    fn against_vouched(
        &mut self,
        id: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Option<StaleEntity> {
        let since = self.version_at(id, at)?;
        self.against_version(id, since)
    }

    /// The entities of `case` changed since its reference point (see [`StaleCheck`]).
    pub fn stale_entities(&mut self, case: &dyn Case) -> Vec<StaleEntity> {
        let mut entities = Vec::new();
        match case.provenance().filter(|p| !p.entity_versions.is_empty()) {
            Some(p) => {
                let versions: Vec<(String, u32)> = p
                    .entity_versions
                    .iter()
                    .map(|(id, v)| (id.clone(), *v))
                    .collect();
                let vouched = vouched_at(p);
                for (id, v) in versions {
                    entities.extend(self.against_version(&id, v));
                }
                let mut unrecorded = Vec::new();
                each_named(case, &mut |id| {
                    if !p.entity_versions.contains_key(id) && !unrecorded.iter().any(|u| u == id) {
                        unrecorded.push(id.to_owned());
                    }
                });
                if let Some(at) = vouched {
                    for id in unrecorded {
                        entities.extend(self.against_vouched(&id, at));
                    }
                }
            }
            None if self.accepted.is_some() => {
                for id in named_entities(case) {
                    entities.extend(self.against_accepted(&id));
                }
            }
            None => {}
        }
        entities
    }

    fn against_version(&mut self, id: &str, since: u32) -> Option<StaleEntity> {
        let key = (id.to_owned(), since);
        if let Some(found) = self.by_version.get(&key) {
            return found.clone();
        }
        let current = self.current_version(id);
        let stale = (current != Some(since)).then(|| {
            let (fields, changes) = if current.is_some() {
                self.fields_between(id, since)
            } else {
                (Vec::new(), Vec::new())
            };
            StaleEntity {
                entity_id: id.to_owned(),
                since_version: Some(since),
                current_version: current,
                fields,
                changes,
                reference: StaleReference::Provenance,
            }
        });
        self.by_version.insert(key, stale.clone());
        stale
    }

    fn against_accepted(&mut self, id: &str) -> Option<StaleEntity> {
        if let Some(found) = self.by_accepted.get(id) {
            return found.clone();
        }
        let then = self.accepted.as_ref()?.get(id).cloned();
        let now = self.now.get(id).cloned();
        let stale = if then == now {
            None
        } else {
            let current = if now.is_some() {
                self.current_version(id)
            } else {
                None
            };
            // The version the accepted run had: the one whose content has its digest.
            let since = then.as_ref().and_then(|digest| {
                self.history(id)
                    .iter()
                    .find(|v| &entity_digest(&v.entity) == digest)
                    .map(|v| v.version)
            });
            let (fields, changes) = match (since, current) {
                (Some(since), Some(_)) => self.fields_between(id, since),
                _ => (Vec::new(), Vec::new()),
            };
            Some(StaleEntity {
                entity_id: id.to_owned(),
                since_version: since,
                current_version: current,
                fields,
                changes,
                reference: StaleReference::Accepted,
            })
        };
        self.by_accepted.insert(id.to_owned(), stale.clone());
        stale
    }
}

impl CaseHook for StaleCheck<'_> {
    fn case(&mut self, bank: BankType, case: &dyn Case) {
        let entities = self.stale_entities(case);
        if entities.is_empty() {
            return;
        }
        if self.found.len() < STALE_LISTED {
            self.found.push(StaleCase {
                bank,
                test_id: case.test_id().to_owned(),
                entities,
            });
        } else {
            self.more += 1;
        }
    }
}

/// Adds the pending drafts of `test_banks/drafts/` to the project's banks as ordinary cases
/// (`assay run --include-drafts`), with the entities they name checked like the banks' (by
/// the run). Every draft file is read strictly; a draft whose test id another case (or draft)
/// has is an error naming both files. Returns how many drafts were added.
pub fn include_drafts(project: &mut Project) -> Result<usize, HarnessError> {
    let banks_dir = project.settings.banks_dir.clone();
    let drafts = assay_project::drafts::load_drafts(&banks_dir)?;
    let semantic = assay_project::drafts::pending(&drafts.semantic);
    let state = assay_project::drafts::pending(&drafts.state);
    let pattern = assay_project::drafts::pending(&drafts.pattern);
    let answer = assay_project::drafts::pending(&drafts.answer);
    check_draft_ids(project, &semantic, &state, &pattern, &answer)?;
    assay_project::project::check_drafts(project, &semantic, &state, &answer)?;
    check_answer_drafts(&answer)?;

    let mut refs: Vec<EntityRef> = Vec::new();
    let mut add_refs =
        |file: &Path,
         index: usize,
         test_id: &str,
         named: &mut dyn Iterator<Item = (&str, banks::RefKind)>| {
            let place = format!("{}: drafts[{index}] ({test_id})", file.display());
            refs.extend(named.map(|(id, kind)| EntityRef {
                place: place.clone(),
                file: file.to_owned(),
                entity_id: id.to_owned(),
                kind,
            }));
        };
    for d in &semantic {
        let c = &d.case;
        add_refs(
            &d.file,
            d.index,
            &c.test_id,
            &mut banks::case_refs(c.expects(), c.excludes(), c.known_missing()),
        );
    }
    for d in &state {
        let c = &d.case;
        add_refs(
            &d.file,
            d.index,
            &c.test_id,
            &mut banks::case_refs(c.expects(), c.excludes(), c.known_missing()),
        );
    }
    for d in &pattern {
        let c = &d.case;
        add_refs(
            &d.file,
            d.index,
            &c.test_id,
            &mut banks::case_refs(c.expects(), c.excludes(), c.known_missing()),
        );
    }
    let count = semantic.len() + state.len() + pattern.len() + answer.len();
    project.entity_refs.extend(refs);
    project.banks.semantic.extend(semantic);
    project.banks.state.extend(state);
    project.banks.pattern.extend(pattern);
    project.banks.answer.extend(answer);
    Ok(count)
}

/// What `assay validate` says of the drafts: every draft file read strictly, and the pending
/// drafts' ids checked against the banks as `--include-drafts` would. Returns the number of
/// drafts and of pending ones.
pub fn check_drafts(project: &Project) -> Result<(usize, usize), HarnessError> {
    let drafts = assay_project::drafts::load_drafts(&project.settings.banks_dir)?;
    let semantic = assay_project::drafts::pending(&drafts.semantic);
    let state = assay_project::drafts::pending(&drafts.state);
    let pattern = assay_project::drafts::pending(&drafts.pattern);
    let answer = assay_project::drafts::pending(&drafts.answer);
    check_draft_ids(project, &semantic, &state, &pattern, &answer)?;
    assay_project::project::check_drafts(project, &semantic, &state, &answer)?;
    check_answer_drafts(&answer)?;
    Ok((
        drafts.count(),
        semantic.len() + state.len() + pattern.len() + answer.len(),
    ))
}

/// Each pending answer draft checked as the answer bank checks its cases (a message, known
/// metrics, assertions that parse): an error names its file, its index and what is wrong.
fn check_answer_drafts(answer: &[Located<AnswerCase>]) -> Result<(), HarnessError> {
    for d in answer {
        assay_project::answer_case::validate_case(&d.case)
            .and_then(|()| assay_project::answer_case::assertions(&d.case).map(|_| ()))
            .map_err(|e| {
                HarnessError::Data(DataError::new(
                    &d.file,
                    format!("drafts[{}] ({}): {e}", d.index, d.case.test_id),
                ))
            })?;
    }
    Ok(())
}

/// The pending drafts' ids: unique among themselves and among the project's cases.
fn check_draft_ids(
    project: &Project,
    semantic: &[Located<SemanticCase>],
    state: &[Located<StateCase>],
    pattern: &[Located<PatternCase>],
    answer: &[Located<AnswerCase>],
) -> Result<(), HarnessError> {
    // Each draft's id, with its file: unique among the drafts and the banks.
    let mut ids: HashMap<String, PathBuf> = HashMap::new();
    let mut add_id = |id: &str, file: &Path| -> Result<(), HarnessError> {
        if let Some(first) = ids.insert(id.to_owned(), file.to_owned()) {
            return Err(collision(id, file, &first));
        }
        Ok(())
    };
    for d in semantic {
        add_id(&d.case.test_id, &d.file)?;
    }
    for d in state {
        add_id(&d.case.test_id, &d.file)?;
    }
    for d in pattern {
        add_id(&d.case.test_id, &d.file)?;
    }
    for d in answer {
        add_id(&d.case.test_id, &d.file)?;
    }
    check_bank_ids(project, &ids)
}

fn collision(id: &str, draft: &Path, other: &Path) -> HarnessError {
    HarnessError::Data(DataError::new(
        draft,
        format!(
            "draft test_id `{id}` is also the test_id of a case in {}; test ids must be unique, so rename the draft",
            other.display()
        ),
    ))
}

/// Fails when a case of the project's banks (held or streamed) has one of the drafts' ids.
fn check_bank_ids(
    project: &Project,
    drafts: &HashMap<String, PathBuf>,
) -> Result<(), HarnessError> {
    if drafts.is_empty() {
        return Ok(());
    }
    fn held<C: Case>(
        cases: &[Located<C>],
        drafts: &HashMap<String, PathBuf>,
    ) -> Result<(), HarnessError> {
        for c in cases {
            if let Some(draft) = drafts.get(c.case.test_id()) {
                return Err(collision(c.case.test_id(), draft, &c.file));
            }
        }
        Ok(())
    }
    let b = &project.banks;
    held(&b.semantic, drafts)?;
    held(&b.state, drafts)?;
    held(&b.pattern, drafts)?;
    held(&b.always, drafts)?;
    held(&b.answer, drafts)?;
    #[derive(serde::Deserialize)]
    struct IdOnly {
        test_id: String,
    }
    let mut quiet = |_: String| {};
    for streamed in &b.streamed {
        for path in &streamed.files {
            let mut found: Option<(String, PathBuf)> = None;
            banks::for_each_case(path, streamed.bank, &mut quiet, &mut |_, c: IdOnly| {
                if found.is_none()
                    && let Some(draft) = drafts.get(&c.test_id)
                {
                    found = Some((c.test_id, draft.clone()));
                }
                Ok(())
            })?;
            if let Some((id, draft)) = found {
                return Err(collision(&id, &draft, path));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::bank::AlwaysCase;

    fn state_case(json: serde_json::Value) -> StateCase {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_filter_selects_by_names_provenance_and_audience() {
        let changed = ChangedEntities {
            entities: ["welcome_back".to_owned()].into(),
            audiences: ["PARENT".to_owned()].into(),
            ..ChangedEntities::default()
        };
        let names = state_case(serde_json::json!({
            "test_id": "S1", "user_state": {}, "expected_handlers": [],
            "not_expected_handlers": ["welcome_back"]
        }));
        let other = state_case(serde_json::json!({
            "test_id": "S2", "user_state": {}, "expected_handlers": ["other"]
        }));
        let by_provenance = state_case(serde_json::json!({
            "test_id": "S3", "user_state": {}, "expected_handlers": ["other"],
            "provenance": {"method": "boundary", "entity_versions": {"welcome_back": 1},
                "generated_at": "2026-11-28T00:00:00Z"}
        }));
        assert!(changed.selects(&names));
        assert!(!changed.selects(&other));
        assert!(changed.selects(&by_provenance));
        let always = |user_type: &str| -> AlwaysCase {
            serde_json::from_value(serde_json::json!({
                "test_id": "A1", "user_type": user_type, "expected_always": ["core"]
            }))
            .unwrap()
        };
        assert!(changed.selects(&always("PARENT")));
        assert!(!changed.selects(&always("CHILD")));
        assert_eq!(
            named_entities(&by_provenance),
            vec!["other".to_owned(), "welcome_back".to_owned()]
        );
        // The journal key follows the selection.
        let mut more = changed.clone();
        more.entities.insert("x".into());
        assert_ne!(changed.key(), more.key());
    }

    #[test]
    fn answer_cases_are_selected_by_what_their_contexts_held() {
        let answer = |id: &str| -> assay_core::answer::AnswerCase {
            serde_json::from_value(serde_json::json!({"test_id": id, "message": "m"})).unwrap()
        };
        let held = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
        let changed = ChangedEntities {
            entities: ["welcome_back".to_owned()].into(),
            answer_contexts: [
                ("A1".to_owned(), held(&["x", "welcome_back"])),
                ("A2".to_owned(), held(&["x", "y"])),
                ("A4".to_owned(), held(&[])),
            ]
            .into(),
            ..ChangedEntities::default()
        };
        // Its contexts held the changed entity: runs; they held others only: skipped.
        assert!(changed.selects(&answer("A1")));
        assert!(!changed.selects(&answer("A2")));
        // Nothing to go by (not in that run, or no context named an entity): runs.
        assert!(changed.selects(&answer("A3")));
        assert!(changed.selects(&answer("A4")));
        // What a saved run's answer results held, read back from its RunLog.
        let mut log: RunLog = serde_json::from_value(serde_json::json!({
            "schema_version": 3, "assay_version": "0", "run_id": "r1", "project": "p",
            "timestamp": "t", "duration_ms": 0, "filters": {"banks": []},
            "summary": {"combined_score": 0.0, "health_status": "GOOD", "total_tests": 2,
                "hard_fail_count": 0, "critical_failures": [], "component_scores": {},
                "weights": {}, "error_count": 0}
        }))
        .unwrap();
        let result =
            |id: &str, contexts: serde_json::Value| -> assay_core::answer::AnswerCaseResult {
                serde_json::from_value(serde_json::json!({"test_id": id, "message": "m",
                "contexts": contexts, "is_hard_fail": false}))
                .unwrap()
            };
        log.answer = Some(assay_core::runlog::AnswerResults {
            tests_run: 2,
            errors: 0,
            average_score: 0.0,
            hard_fails: 0,
            score_distribution: assay_core::scoring::ScoreDistribution::of([]),
            topic_scores: BTreeMap::new(),
            metrics: BTreeMap::new(),
            critical_failures: Vec::new(),
            results: vec![
                result(
                    "A1",
                    serde_json::json!([{"entity": "welcome_back", "text": "t"},
                        {"text": "a target's own context"}, {"entity": "x", "text": "t"}]),
                ),
                result("A4", serde_json::json!([{"text": "no entity"}])),
            ],
        });
        let read = contexts_of(&log, None).unwrap();
        assert_eq!(read["A1"], held(&["welcome_back", "x"]));
        assert_eq!(read["A4"], held(&[]));

        // Contexts are part of what the journal's key records.
        let mut fewer = changed.clone();
        fewer.answer_contexts.remove("A4");
        assert_ne!(changed.key(), fewer.key());
        let none = ChangedEntities {
            answer_contexts: BTreeMap::new(),
            ..changed.clone()
        };
        assert_eq!(
            none.key(),
            ChangedEntities {
                entities: changed.entities.clone(),
                ..ChangedEntities::default()
            }
            .key()
        );
    }

    #[test]
    fn a_stale_entity_says_what_each_field_was_and_is_and_an_unlisted_one_is_compared_by_time() {
        use assay_kb::store::{Edit, EntityUpdate, SqliteStore};
        let store = SqliteStore::in_memory().unwrap();
        let at = |day: u32| {
            chrono::DateTime::parse_from_rfc3339(&format!("2026-11-{day:02}T00:00:00Z"))
                .unwrap()
                .with_timezone(&chrono::Utc)
        };
        let entity = |id: &str| -> Entity {
            serde_json::from_value(serde_json::json!({
                "entity_id": id, "entity_type": "KNOWLEDGE", "title": format!("{id} title"),
                "load_mode": "SITUATION", "priority": 50
            }))
            .unwrap()
        };
        store.create(&entity("a"), &Edit::new("t", at(1))).unwrap();
        store.create(&entity("b"), &Edit::new("t", at(1))).unwrap();
        let update = EntityUpdate {
            title: Some("A new title".into()),
            ..EntityUpdate::default()
        };
        store.update("a", &update, &Edit::new("t", at(10))).unwrap();
        store.update("b", &update, &Edit::new("t", at(10))).unwrap();
        // `a` is listed at version 1; `b`, named as a secondary, is not (an older provenance),
        // and the case was accepted on the 5th, before both edits.
        let case: SemanticCase = serde_json::from_value(serde_json::json!({
            "test_id": "S1", "prompt": "p", "expected_primary": ["a"],
            "expected_secondary": ["b"],
            "provenance": {"method": "llm", "entity_versions": {"a": 1},
                "generated_at": "2026-11-01T00:00:00Z", "accepted_at": "2026-11-05T00:00:00Z"}
        }))
        .unwrap();
        let mut check = StaleCheck::new(&store, BTreeMap::new(), None);
        let stale = check.stale_entities(&case);
        assert_eq!(
            stale
                .iter()
                .map(|e| e.entity_id.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        for e in &stale {
            assert_eq!((e.since_version, e.current_version), (Some(1), Some(2)));
            assert_eq!(e.fields, ["title"]);
            assert_eq!(
                e.changes,
                [StaleChange {
                    field: "title".into(),
                    old: format!("{} title", e.entity_id),
                    new: "A new title".into()
                }]
            );
        }
        // Confirmed after the edits: `b` was already at version 2 then; `a` is listed at 1.
        let mut confirmed = case.clone();
        confirmed.provenance.as_mut().unwrap().confirmed_at = Some("2026-11-11T00:00:00Z".into());
        let stale = check.stale_entities(&confirmed);
        assert_eq!(
            stale
                .iter()
                .map(|e| e.entity_id.as_str())
                .collect::<Vec<_>>(),
            ["a"]
        );
    }

    #[test]
    fn changed_entities_are_the_differing_added_and_removed_ones() {
        use assay_core::rundiff::KbFingerprint;
        let fp = |pairs: &[(&str, &str)]| KbFingerprint {
            digest: String::new(),
            count: pairs.len(),
            entities: pairs
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
        };
        let mut reference: RunLog = serde_json::from_value(serde_json::json!({
            "schema_version": 3, "assay_version": "0", "run_id": "r1", "project": "p",
            "timestamp": "t", "duration_ms": 0, "filters": {"banks": []},
            "summary": {"combined_score": 0.0, "health_status": "GOOD", "total_tests": 0,
                "hard_fail_count": 0, "critical_failures": [], "component_scores": {},
                "weights": {}, "error_count": 0}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        reference.kb = fp(&[("a", "1"), ("b", "2"), ("gone", "3")]);
        let now = fp(&[("a", "1"), ("b", "9"), ("new", "4")]);
        let kb = assay_kb::MemoryKb::default();
        let changed = changed_entities(&reference, "latest", &now, &kb).unwrap();
        assert_eq!(
            changed.entities.iter().collect::<Vec<_>>(),
            vec!["b", "gone", "new"]
        );
        assert_eq!(changed.run_id, "r1");

        // A run without per-entity digests cannot be compared.
        reference.kb.entities.clear();
        let error = changed_entities(&reference, "latest", &now, &kb)
            .unwrap_err()
            .to_string();
        assert!(error.contains("no per-entity digests"), "{error}");
    }
}
