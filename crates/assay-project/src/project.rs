//! A project directory, loaded and validated as a whole before anything runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use assay_core::bank::{BankType, Case, PatternRules};
use assay_kb::datafile::{self, DataError};
use assay_kb::{KnowledgeBase, LoadedKb};
use assay_retrieval::patterns::PatternMatcher;

use crate::HarnessError;
use crate::banks::{self, Banks, HISTORY_DIR, Located, PATTERN_RULES_FILE};
use crate::expectations::ExpectationLoader;
use crate::settings::ProjectSettings;

/// A loaded project: settings, knowledge base, banks, rules and expectation history.
pub struct Project {
    /// Resolved settings.
    pub settings: ProjectSettings,
    /// The knowledge base from `kb/`.
    pub kb: LoadedKb,
    /// Every bank's cases.
    pub banks: Banks,
    /// The compiled pattern rules, when the project has a rules file.
    pub patterns: Option<Arc<PatternMatcher>>,
    /// The pattern rules as written (the journal's fingerprint hashes them).
    pub rules: Option<PatternRules>,
    /// The pattern rules file, when present.
    pub rules_file: Option<PathBuf>,
    /// Semantic expectation history.
    pub expectations: ExpectationLoader,
    /// Warnings raised while loading.
    pub warnings: Vec<String>,
    /// Every entity the banks' cases and the pattern rules name, with where. [`Project::load`]
    /// checks them against the `kb/` files when those are the source of truth (the embedded
    /// store); with a database store they are checked against the store's snapshot instead
    /// ([`Project::check_entity_refs`]), by a run and by `assay validate`.
    pub entity_refs: Vec<EntityRef>,
    /// Whether [`Project::load`] checked [`Project::entity_refs`] against the `kb/` files.
    pub refs_checked_against_files: bool,
    /// What the cases say of audiences, checked once the audiences are known: by
    /// [`Project::load`] against the `kb/` files, or, with a database store, against the
    /// store's snapshot ([`Project::check_typed_state`]).
    pub state_uses: crate::typed_state::StateUses,
}

pub use crate::banks::{EntityRef, RefKind};

/// The version that deactivated an entity, where a store keeps versions.
type DeactivatedIn<'a> = &'a dyn Fn(&str) -> Option<u32>;

/// How many unknown names one error lists (the rest are counted).
const UNKNOWN_LISTED: usize = 20;

/// Checks the entities `refs` name against `kb` (`source` says what `kb` is): an unknown
/// entity is a mistake in the test, not a failure of the product, so it is an error naming
/// each place and the closest known ids, before anything runs. A `known_missing` entity may be
/// absent.
fn check_unknown(
    refs: &[EntityRef],
    kb: &dyn KnowledgeBase,
    source: &str,
) -> Result<(), HarnessError> {
    let mut unknown: Vec<&EntityRef> = Vec::new();
    for r in refs {
        if r.kind != RefKind::KnownMissing && !kb.contains(&r.entity_id)? {
            unknown.push(r);
        }
    }
    let Some(first) = unknown.first() else {
        return Ok(());
    };
    let ids: Vec<String> = kb
        .list(&assay_kb::EntityFilter::default())?
        .into_iter()
        .map(|e| e.entity_id)
        .collect();
    let describe = |r: &EntityRef| {
        let near = assay_core::text::closest(&r.entity_id, ids.iter().map(String::as_str))
            .map(|near| format!(" (did you mean `{near}`?)"))
            .unwrap_or_default();
        format!("{}: unknown entity `{}`{near}", r.place, r.entity_id)
    };
    let mut message = format!(
        "{} name{} an entity that {source} does not have; this is a mistake in the tests, so nothing was run",
        if unknown.len() == 1 {
            "a case".to_owned()
        } else {
            format!("{} references", unknown.len())
        },
        if unknown.len() == 1 { "s" } else { "" },
    );
    for r in unknown.iter().take(UNKNOWN_LISTED) {
        message.push_str("\n  ");
        message.push_str(&describe(r));
    }
    if unknown.len() > UNKNOWN_LISTED {
        message.push_str(&format!(
            "\n  … and {} more",
            unknown.len() - UNKNOWN_LISTED
        ));
    }
    message.push_str(
        "\n(a case that names an absent entity on purpose lists it in its `known_missing`)",
    );
    Err(DataError::new(&first.file, message).into())
}

/// The warnings of the entities `refs` name in `kb`: a case that expects an inactive entity
/// (with the version that deactivated it, where `deactivated_in` knows it), and a
/// `known_missing` entity that `kb` (`source`) does hold.
fn ref_warnings(
    refs: &[EntityRef],
    kb: &dyn KnowledgeBase,
    source: &str,
    deactivated_in: DeactivatedIn<'_>,
) -> Result<Vec<String>, HarnessError> {
    let mut warnings = Vec::new();
    for r in refs {
        match (r.kind, kb.get(&r.entity_id)?) {
            (RefKind::KnownMissing, Some(_)) => warnings.push(format!(
                "{}: `{}` is listed in known_missing, but {source} has it",
                r.place, r.entity_id
            )),
            (RefKind::Expects, Some(e)) if !e.is_active => {
                let since = match deactivated_in(&r.entity_id) {
                    Some(v) => format!("deactivated in version {v}"),
                    None => "is_active: false".to_owned(),
                };
                warnings.push(format!(
                    "{}: expects `{}`, which is inactive ({since}); the case cannot pass until it is active again",
                    r.place, r.entity_id
                ));
            }
            _ => {}
        }
    }
    Ok(warnings)
}

/// What the warnings call the `kb/` files.
const FILES_KB: &str = "the knowledge base";

impl std::fmt::Debug for Project {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Project")
            .field("root", &self.settings.root)
            .finish_non_exhaustive()
    }
}

fn case_place<C>(located: &Located<C>, test_id: &str) -> String {
    format!(
        "{}: tests[{}] ({test_id})",
        located.file.display(),
        located.index
    )
}

impl Project {
    /// Loads and validates the project at `root`. Every error names the file, and the line,
    /// column or field where known; nothing is run and nothing is written. The store the
    /// project uses (`ASSAY_STORE`, else `store` in `assay.toml`) decides what entity
    /// references are checked against: see [`Project::entity_refs`].
    pub fn load(root: &Path) -> Result<Project, HarnessError> {
        Project::load_with(root, false, &|name| std::env::var(name).ok())
    }

    /// [`Project::load`] with `env` in place of the environment.
    pub fn load_with_env(
        root: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Project, HarnessError> {
        Project::load_with(root, false, env)
    }

    /// [`Project::load`] for a run: every file is read and checked as by `load`, but the
    /// state, pattern and always banks are checked case by case and not held
    /// ([`banks::Banks::streamed`]); the run reads them again as it goes. A run's memory then
    /// does not grow with the number of those cases.
    pub fn load_for_run(root: &Path) -> Result<Project, HarnessError> {
        Project::load_with(root, true, &|name| std::env::var(name).ok())
    }

    fn load_with(
        root: &Path,
        streaming: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Project, HarnessError> {
        if !root.is_dir() {
            return Err(HarnessError::Usage(format!(
                "project directory `{}` does not exist",
                root.display()
            )));
        }
        let settings = ProjectSettings::load(root)?;
        // With a database store the kb/ files are not the knowledge base: references are
        // checked against the store once it is open.
        let files_are_source = crate::settings::store_setting(&settings, env)
            .0
            .is_none_or(|store| !crate::settings::is_database(&store));
        let mut entity_refs = Vec::new();
        // The knowledge base on this thread, the banks, rules and history on another: the two
        // halves of loading take about as long. Errors and warnings come out in the order a
        // one-threaded load would give them.
        let (kb, other) = std::thread::scope(|scope| {
            let other = scope.spawn(|| load_banks_rules_and_history(&settings, streaming));
            let kb = load_kb(&settings);
            let other = other
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (kb, other)
        });
        let (kb, mut warnings) = kb?;
        let mut warn = |w: String| warnings.push(w);
        let other = other?;
        other.warnings.into_iter().for_each(&mut warn);
        let banks = other.banks;
        let (patterns, rules, rules_file) = match other.rules {
            Some((rules, matcher, path)) => {
                entity_refs.extend(rule_entities(&path, &rules));
                (Some(Arc::new(matcher)), Some(rules), Some(path))
            }
            None => (None, None, None),
        };
        let expectations = other.history?;
        other.history_warnings.into_iter().for_each(&mut warn);
        let history_dir = history_dir(&settings);

        let mut state_uses = crate::typed_state::StateUses::default();
        let mut refs = validate_cases(&banks, &settings.state, &mut state_uses, &mut warn)?;
        if let Some(mut checks) = other.streamed_checks {
            state_uses.merge(std::mem::take(&mut checks.uses));
            refs.extend(validate_streamed(&banks, checks)?);
        }
        entity_refs.extend(refs);
        // Typed user state: the conditions and the audiences against the `kb/` files when
        // they are the knowledge base (else against the store, by the run and `validate`).
        if files_are_source {
            let entities = kb.kb.entities();
            let audiences = crate::typed_state::audiences(entities);
            let schema = settings.state.clone().with_audiences(audiences.clone());
            crate::typed_state::check_conditions(entities, &kb.sources, &schema)?;
            state_uses
                .check(&audiences)?
                .into_iter()
                .for_each(&mut warn);
        }
        // The warnings (an inactive entity expected) come from the run, once the store can
        // say which version deactivated it, and from `assay validate`.
        if files_are_source {
            check_unknown(&entity_refs, &kb.kb, FILES_KB)?;
        }
        let semantic_ids: std::collections::HashSet<&str> = banks
            .semantic
            .iter()
            .map(|c| c.case.test_id.as_str())
            .collect();
        let known = |id: &str| semantic_ids.contains(id);
        for id in expectations.unknown_test_ids(&known) {
            warn(format!(
                "{}: history names test `{id}`, which no semantic bank has",
                history_dir.display()
            ));
        }

        Ok(Project {
            settings,
            kb,
            banks,
            patterns,
            rules,
            rules_file,
            expectations,
            warnings,
            entity_refs,
            refs_checked_against_files: files_are_source,
            state_uses,
        })
    }

    /// Checks the typed user state against `kb`, a snapshot of the project's store where a
    /// database is the source of truth (with the `kb/` files as the knowledge base,
    /// [`Project::load`] has checked it): every entity's conditions against the types and the
    /// audiences the entities name, and the audiences the cases name. Returns the warnings
    /// (cases that run as the default audience among others).
    pub fn check_typed_state(&self, kb: &dyn KnowledgeBase) -> Result<Vec<String>, HarnessError> {
        if self.refs_checked_against_files {
            return Ok(Vec::new());
        }
        let entities = kb.list(&assay_kb::EntityFilter::default())?;
        let audiences = crate::typed_state::audiences(&entities);
        let schema = self
            .settings
            .state
            .clone()
            .with_audiences(audiences.clone());
        crate::typed_state::check_conditions(&entities, &HashMap::new(), &schema)?;
        self.state_uses.check(&audiences)
    }

    /// Checks the entities the banks and the pattern rules name against `kb`, a snapshot of
    /// the project's store where that store is the source of truth: an unknown one is an
    /// error; returns the warnings (an expected entity that is inactive, with the version that
    /// deactivated it from `store`).
    pub fn check_entity_refs(
        &self,
        kb: &dyn KnowledgeBase,
        store: &dyn assay_kb::store::KbStore,
    ) -> Result<Vec<String>, HarnessError> {
        let since = |id: &str| store.get_stored(id).ok().flatten().map(|s| s.version);
        let source = if self.refs_checked_against_files {
            FILES_KB
        } else {
            "the store's knowledge base"
        };
        let mut warnings = self.check_typed_state(kb)?;
        check_unknown(&self.entity_refs, kb, source)?;
        warnings.extend(ref_warnings(&self.entity_refs, kb, source, &since)?);
        Ok(warnings)
    }

    /// The warnings of the entities the banks and rules name, against the `kb/` files (for
    /// `assay validate`, which opens no store): a case that expects an inactive entity, a
    /// `known_missing` entity the knowledge base has.
    pub fn ref_warnings(&self) -> Result<Vec<String>, HarnessError> {
        ref_warnings(&self.entity_refs, &self.kb.kb, FILES_KB, &|_| None)
    }
}

/// The knowledge base from `kb/`, and the warnings of loading it.
fn load_kb(settings: &ProjectSettings) -> Result<(LoadedKb, Vec<String>), HarnessError> {
    if !settings.kb_dir.is_dir() {
        let warning = format!(
            "{}: no knowledge-base folder; the knowledge base is empty",
            settings.kb_dir.display()
        );
        let empty = LoadedKb {
            kb: assay_kb::MemoryKb::default(),
            sources: HashMap::new(),
            files: Vec::new(),
            warnings: Vec::new(),
            fingerprint: assay_kb::fingerprint(&settings.kb_dir).unwrap_or_default(),
        };
        return Ok((empty, vec![warning]));
    }
    let kb = assay_kb::load_dir(&settings.kb_dir)?;
    let warnings = kb.warnings.clone();
    Ok((kb, warnings))
}

/// The compiled pattern rules, as written, and their file.
type Rules = (PatternRules, PatternMatcher, PathBuf);

/// What loads apart from the knowledge base (and needs nothing of it).
struct BanksRulesHistory {
    banks: Banks,
    rules: Option<Rules>,
    warnings: Vec<String>,
    /// Loaded after the banks and rules; its error, if any, comes after theirs and after the
    /// rules' entity check.
    history: Result<ExpectationLoader, DataError>,
    history_warnings: Vec<String>,
    streamed_checks: Option<banks::StreamedChecks>,
}

/// Every bank, the pattern rules compiled (when the project has a rules file), and the
/// expectation history.
fn load_banks_rules_and_history(
    settings: &ProjectSettings,
    streaming: bool,
) -> Result<BanksRulesHistory, HarnessError> {
    let mut warnings = Vec::new();
    let mut warn = |w: String| warnings.push(w);
    if !settings.banks_dir.is_dir() {
        return Err(HarnessError::Data(DataError::new(
            &settings.banks_dir,
            "no test_banks folder (expected semantic/, state/, pattern/, always/ inside; `assay init` makes one)",
        )));
    }
    let mut streamed_checks = None;
    let banks = if streaming {
        let mut checks = banks::StreamedChecks::default();
        let banks = banks::load_banks_streaming(
            &settings.banks_dir,
            &settings.state,
            &mut warn,
            &mut checks,
        )?;
        streamed_checks = Some(checks);
        banks
    } else {
        banks::load_banks(&settings.banks_dir, &mut warn)?
    };
    let rules_path =
        banks::bank_dir(&settings.banks_dir, BankType::Pattern).join(PATTERN_RULES_FILE);
    let rules = if rules_path.is_file() {
        let rules: PatternRules = datafile::read(&rules_path, &mut warn)?;
        let matcher = PatternMatcher::new(&rules)
            .map_err(|e| DataError::new(&rules_path, e.to_string()))?
            .normalising(settings.patterns.normalise);
        Some((rules, matcher, rules_path))
    } else if banks.count(BankType::Pattern) > 0 {
        return Err(HarnessError::Data(DataError::new(
            &rules_path,
            "the pattern bank has cases but this rules file is missing",
        )));
    } else {
        None
    };
    let mut history_warnings = Vec::new();
    let history = ExpectationLoader::load(&history_dir(settings), &mut |w: String| {
        history_warnings.push(w);
    });
    Ok(BanksRulesHistory {
        banks,
        rules,
        warnings,
        history,
        history_warnings,
        streamed_checks,
    })
}

/// The semantic bank's expectation history folder.
fn history_dir(settings: &ProjectSettings) -> PathBuf {
    banks::bank_dir(&settings.banks_dir, BankType::Semantic).join(HISTORY_DIR)
}

/// The entities the pattern rules name.
fn rule_entities(path: &Path, rules: &PatternRules) -> Vec<EntityRef> {
    let mut named: Vec<(String, &str)> = Vec::new();
    for (i, r) in rules.crisis_patterns.iter().enumerate() {
        named.extend(
            r.entities
                .iter()
                .map(|e| (format!("crisis_patterns[{i}]"), e.as_str())),
        );
    }
    for (i, r) in rules.keyword_boosts.iter().enumerate() {
        named.push((format!("keyword_boosts[{i}]"), r.entity.as_str()));
    }
    named
        .into_iter()
        .map(|(place, id)| EntityRef {
            place: format!("{}: {place}", path.display()),
            file: path.to_owned(),
            entity_id: id.to_owned(),
            kind: RefKind::Expects,
        })
        .collect()
}

/// Checks the pending drafts' states as the banks' cases are checked (`assay run
/// --include-drafts` adds them to the banks; `assay validate` reads them): against the types,
/// and, with the `kb/` files as the knowledge base, the audiences they name.
pub fn check_drafts(
    project: &Project,
    semantic: &[Located<assay_core::bank::SemanticCase>],
    state: &[Located<assay_core::bank::StateCase>],
    answer: &[Located<assay_core::answer::AnswerCase>],
) -> Result<(), HarnessError> {
    let schema = &project.settings.state;
    let mut mistakes = crate::typed_state::Mistakes::default();
    let mut uses = crate::typed_state::StateUses::default();
    let cases = semantic
        .iter()
        .map(|d| (&d.file, d.index, &d.case.test_id, &d.case.user_state, None))
        .chain(
            state
                .iter()
                .map(|d| (&d.file, d.index, &d.case.test_id, &d.case.user_state, None)),
        )
        .chain(answer.iter().map(|d| {
            let own = Some(d.case.user_type.as_deref());
            (&d.file, d.index, &d.case.test_id, &d.case.user_state, own)
        }));
    for (file, index, id, user_state, own) in cases {
        let place = format!("drafts[{index}] ({id})");
        mistakes.case_state(schema, file, &place, id, user_state);
        uses.record(schema, file, &place, id, user_state, own);
    }
    mistakes.into_result()?;
    if project.refs_checked_against_files {
        uses.check(&crate::typed_state::audiences(project.kb.kb.entities()))?;
    }
    Ok(())
}

/// Checks the cases (ids present and unique, cases that test something) and returns the
/// entities they name.
fn validate_cases(
    banks: &Banks,
    state: &assay_core::state_fields::StateSchema,
    uses: &mut crate::typed_state::StateUses,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<EntityRef>, HarnessError> {
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut check_id = |test_id: &str, place: String, file: &Path| -> Result<(), HarnessError> {
        if test_id.trim().is_empty() {
            return Err(DataError::new(file, format!("{place}: test_id is empty")).into());
        }
        if let Some(first) = seen.insert(test_id.to_owned(), place.clone()) {
            return Err(DataError::new(
                file,
                format!("duplicate test_id `{test_id}` (first at {first})"),
            )
            .into());
        }
        Ok(())
    };
    let mut refs: Vec<EntityRef> = Vec::new();
    let mut add = |place: &str, file: &Path, named: &mut dyn Iterator<Item = (&str, RefKind)>| {
        refs.extend(named.map(|(id, kind)| EntityRef {
            place: place.to_owned(),
            file: file.to_owned(),
            entity_id: id.to_owned(),
            kind,
        }));
    };
    for c in &banks.semantic {
        let place = case_place(c, &c.case.test_id);
        check_id(&c.case.test_id, place.clone(), &c.file)?;
        if c.case.expected_primary.is_empty() {
            warn(format!(
                "{place}: no expected_primary, so the case can never hard-fail"
            ));
        }
        let case = &c.case;
        add(
            &place,
            &c.file,
            &mut banks::case_refs(case.expects(), case.excludes(), case.known_missing()),
        );
    }
    for c in &banks.state {
        let place = case_place(c, &c.case.test_id);
        check_id(&c.case.test_id, place.clone(), &c.file)?;
        if c.case.expected_handlers.is_empty() && c.case.not_expected_handlers.is_empty() {
            warn(format!(
                "{place}: neither expected_handlers nor not_expected_handlers: the case tests nothing"
            ));
        }
        let case = &c.case;
        add(
            &place,
            &c.file,
            &mut banks::case_refs(case.expects(), case.excludes(), case.known_missing()),
        );
    }
    for c in &banks.pattern {
        let place = case_place(c, &c.case.test_id);
        check_id(&c.case.test_id, place.clone(), &c.file)?;
        let case = &c.case;
        add(
            &place,
            &c.file,
            &mut banks::case_refs(case.expects(), case.excludes(), case.known_missing()),
        );
    }
    for c in &banks.always {
        let place = case_place(c, &c.case.test_id);
        check_id(&c.case.test_id, place.clone(), &c.file)?;
        add(
            &place,
            &c.file,
            &mut banks::case_refs(c.case.expects(), [], c.case.known_missing()),
        );
    }
    for c in &banks.answer {
        let place = case_place(c, &c.case.test_id);
        check_id(&c.case.test_id, place.clone(), &c.file)?;
        crate::answer_case::validate_case(&c.case).map_err(|e| {
            DataError::new(
                &c.file,
                format!("tests[{}] ({}).{e}", c.index, c.case.test_id),
            )
        })?;
    }
    typed_cases(banks, state, uses)?;
    Ok(refs)
}

/// The typed user state of the held cases: each `user_state` against the types (every
/// mistake listed), and what each says of audiences recorded in `uses`.
fn typed_cases(
    banks: &Banks,
    schema: &assay_core::state_fields::StateSchema,
    uses: &mut crate::typed_state::StateUses,
) -> Result<(), HarnessError> {
    use crate::typed_state::case_place;
    let mut mistakes = crate::typed_state::Mistakes::default();
    let mut each = |file: &Path,
                    index: usize,
                    id: &str,
                    state: &assay_core::UserState,
                    own: Option<Option<&str>>| {
        let place = case_place(index, id);
        mistakes.case_state(schema, file, &place, id, state);
        uses.record(schema, file, &place, id, state, own);
    };
    for c in &banks.semantic {
        each(
            &c.file,
            c.index,
            &c.case.test_id,
            &c.case.user_state,
            Some(None),
        );
    }
    for c in &banks.state {
        each(&c.file, c.index, &c.case.test_id, &c.case.user_state, None);
    }
    for c in &banks.always {
        let own = Some(Some(c.case.user_type.as_str()));
        each(&c.file, c.index, &c.case.test_id, &c.case.user_state, own);
    }
    for c in &banks.answer {
        let own = Some(c.case.user_type.as_deref());
        each(&c.file, c.index, &c.case.test_id, &c.case.user_state, own);
    }
    mistakes.into_result()
}

/// The checks of [`validate_cases`] for streamed banks: test ids unique across every bank;
/// returns the entities they name. Only a 64-bit digest of each id is held (8 bytes a case);
/// the digests seen twice, if any, are confirmed by reading the banks again for those ids
/// alone, so a digest collision is never reported as a duplicate.
fn validate_streamed(
    banks: &Banks,
    checks: banks::StreamedChecks,
) -> Result<Vec<EntityRef>, HarnessError> {
    let banks::StreamedChecks {
        ids: mut digests,
        refs,
        ..
    } = checks;
    digests.extend(
        banks
            .semantic
            .iter()
            .map(|c| banks::id_digest(&c.case.test_id)),
    );
    digests.sort_unstable();
    let mut twice: Vec<u64> = digests
        .windows(2)
        .filter(|pair| pair[0] == pair[1])
        .map(|pair| pair[0])
        .collect();
    drop(digests);
    twice.dedup();
    if !twice.is_empty() {
        find_duplicate(banks, &twice)?;
    }
    // Each entity once per way it is named, at the first case that names it so.
    Ok(refs.into_values().collect())
}

/// Reads every case whose id has one of the `digests` (sorted) and fails on the first id seen
/// twice, naming both places.
fn find_duplicate(banks: &Banks, digests: &[u64]) -> Result<(), HarnessError> {
    let mut first: HashMap<String, String> = HashMap::new();
    let mut check = |id: &str, file: &Path, place: String| -> Result<(), DataError> {
        if digests.binary_search(&banks::id_digest(id)).is_err() {
            return Ok(());
        }
        if let Some(at) = first.get(id) {
            return Err(DataError::new(
                file,
                format!("duplicate test_id `{id}` (first at {at})"),
            ));
        }
        first.insert(id.to_owned(), place);
        Ok(())
    };
    for c in &banks.semantic {
        check(&c.case.test_id, &c.file, case_place(c, &c.case.test_id))?;
    }
    let mut ignore = |_: String| {};
    for streamed in &banks.streamed {
        for path in &streamed.files {
            let place = |i: usize| format!("{}:tests[{i}]", path.display());
            match streamed.bank {
                BankType::State => banks::for_each_case(
                    path,
                    streamed.bank,
                    &mut ignore,
                    &mut |i, c: assay_core::bank::StateCase| check(&c.test_id, path, place(i)),
                ),
                BankType::Pattern => banks::for_each_case(
                    path,
                    streamed.bank,
                    &mut ignore,
                    &mut |i, c: assay_core::bank::PatternCase| check(&c.test_id, path, place(i)),
                ),
                _ => banks::for_each_case(
                    path,
                    streamed.bank,
                    &mut ignore,
                    &mut |i, c: assay_core::bank::AlwaysCase| check(&c.test_id, path, place(i)),
                ),
            }?;
        }
    }
    Ok(())
}
