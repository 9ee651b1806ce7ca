//! Bank files in the layout of 000 §2:
//!
//! ```text
//! test_banks/semantic/*.json          SEMANTIC banks (parent_test_bank.json in the seed)
//! test_banks/semantic/history/        expectation history (see crate::expectations)
//! test_banks/state/*.json             STATE banks
//! test_banks/pattern/*.json           PATTERN banks; pattern_rules.json holds the rules
//! test_banks/always/*.json            ALWAYS banks
//! test_banks/answer/*.json            ANSWER banks (the product's replies; docs/answers.md)
//! ```
//!
//! A bank's type comes from its folder. A file that states a different `bank_type` is an error;
//! a file that states none (a pre-V2 bank, or a bare list of cases) loads with a warning.

use std::path::{Path, PathBuf};

use assay_core::answer::AnswerCase;
use assay_core::bank::{
    AlwaysCase, BankFile, BankType, Case, PatternCase, SemanticCase, StateCase,
};
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
    /// Answer cases (held in memory: each costs model calls, so a bank stays small).
    pub answer: Vec<Located<AnswerCase>>,
    /// The bank files read.
    pub files: Vec<(BankType, PathBuf)>,
    /// Banks that are read case by case when they run ([`for_each_case`]) instead of held
    /// here: a project loaded for a run (`Project::load_for_run`) streams its state, pattern
    /// and always banks, so a suite of a million cases does not have to fit in memory. Their
    /// vectors above are then empty.
    pub streamed: Vec<StreamedBank>,
}

/// A bank read case by case when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamedBank {
    /// The bank.
    pub bank: BankType,
    /// Its files, in order.
    pub files: Vec<PathBuf>,
    /// Its cases, counted when they were validated.
    pub count: usize,
}

impl Banks {
    /// How many cases a bank has.
    pub fn count(&self, bank: BankType) -> usize {
        if let Some(s) = self.streamed(bank) {
            return s.count;
        }
        match bank {
            BankType::Semantic => self.semantic.len(),
            BankType::State => self.state.len(),
            BankType::Pattern => self.pattern.len(),
            BankType::Always => self.always.len(),
            BankType::Answer => self.answer.len(),
        }
    }

    /// The bank, when it is read case by case.
    pub fn streamed(&self, bank: BankType) -> Option<&StreamedBank> {
        self.streamed.iter().find(|s| s.bank == bank)
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
    let answer = load_kind(banks_dir, BankType::Answer, &mut files, warn)?;
    Ok(Banks {
        semantic,
        state,
        pattern,
        always,
        answer,
        files,
        streamed: Vec::new(),
    })
}

/// What checking the streamed banks found, for the project's other checks: every test id (as
/// a 64-bit digest, to find duplicates in little memory) and the entity ids the cases name,
/// each with the first place it was named.
#[derive(Debug, Default)]
pub struct StreamedChecks {
    /// The digest of every case's test id ([`id_digest`]), in reading order.
    pub ids: Vec<u64>,
    /// The entities the cases name, each once per way it is named, at the first case that
    /// names it so.
    pub refs: std::collections::BTreeMap<(String, RefKind), EntityRef>,
    /// The audiences the cases name, checked once the knowledge base is known.
    pub uses: crate::typed_state::StateUses,
}

/// How a case names an entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefKind {
    /// The case expects it (primary, secondary, handlers, matches, always, rank checks).
    Expects,
    /// The case expects it absent (`not_expected…`).
    Excludes,
    /// The case lists it in `known_missing`: named on purpose though the knowledge base lacks it.
    KnownMissing,
}

/// An entity a bank case or a pattern rule names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntityRef {
    /// Where: `<file>: tests[3] (S001)`, `<rules file>: keyword_boosts[2]`.
    pub place: String,
    /// The file that names it.
    pub file: PathBuf,
    /// The entity.
    pub entity_id: String,
    /// How.
    pub kind: RefKind,
}

/// The entities one case names: `expects` and `excludes`, less those its `known_missing`
/// lists, which come back as [`RefKind::KnownMissing`].
pub fn case_refs<'a>(
    expects: impl IntoIterator<Item = &'a String>,
    excludes: impl IntoIterator<Item = &'a String>,
    known_missing: &'a [String],
) -> impl Iterator<Item = (&'a str, RefKind)> {
    let named = expects
        .into_iter()
        .map(|id| (id.as_str(), RefKind::Expects))
        .chain(
            excludes
                .into_iter()
                .map(|id| (id.as_str(), RefKind::Excludes)),
        )
        .filter(move |(id, _)| !known_missing.iter().any(|k| k == id));
    named.chain(
        known_missing
            .iter()
            .map(|id| (id.as_str(), RefKind::KnownMissing)),
    )
}

/// The digest of a test id for [`StreamedChecks::ids`].
pub fn id_digest(id: &str) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

/// Warnings of one kind past this many are counted, not listed (a million cases that each
/// test nothing are one line, not a million).
const WARNINGS_PER_KIND: usize = 20;

/// [`load_banks`] for a run: the semantic bank held, the state, pattern and always banks
/// checked case by case (an empty id, a case that tests nothing, a user state that does not
/// fit `schema`'s types) and streamed when they run.
pub fn load_banks_streaming(
    banks_dir: &Path,
    schema: &assay_core::state_fields::StateSchema,
    warn: &mut dyn FnMut(String),
    checks: &mut StreamedChecks,
) -> Result<Banks, DataError> {
    use crate::typed_state::{case_place, check_case_state};
    let mut checks_uses = crate::typed_state::StateUses::default();
    let mut files = Vec::new();
    let semantic = load_kind(banks_dir, BankType::Semantic, &mut files, warn)?;
    let answer = load_kind(banks_dir, BankType::Answer, &mut files, warn)?;
    let mut streamed = Vec::new();
    for bank in [BankType::State, BankType::Pattern, BankType::Always] {
        let paths = bank_files(banks_dir, bank)?;
        let mut count = 0;
        let mut nothing = 0usize;
        for path in &paths {
            let mut listed: Vec<String> = Vec::new();
            let mut each = |index: usize,
                            id: &str,
                            tests_nothing: bool,
                            refs: Vec<(&str, RefKind)>| {
                if id.trim().is_empty() {
                    return Err(DataError::new(
                        path,
                        format!("tests[{index}]: test_id is empty"),
                    ));
                }
                checks.ids.push(id_digest(id));
                let place = || format!("{}:tests[{index}] ({id})", path.display());
                if tests_nothing {
                    nothing += 1;
                    if nothing <= WARNINGS_PER_KIND {
                        listed.push(format!(
                            "{}: neither expected_handlers nor not_expected_handlers: the case tests nothing",
                            place()
                        ));
                    }
                }
                for (entity, kind) in refs {
                    checks
                        .refs
                        .entry((entity.to_owned(), kind))
                        .or_insert_with(|| EntityRef {
                            place: place(),
                            file: path.clone(),
                            entity_id: entity.to_owned(),
                            kind,
                        });
                }
                Ok(())
            };
            let uses = &mut checks_uses;
            count += match bank {
                BankType::State => for_each_case(path, bank, warn, &mut |i, c: StateCase| {
                    let nothing =
                        c.expected_handlers.is_empty() && c.not_expected_handlers.is_empty();
                    let refs = case_refs(c.expects(), c.excludes(), c.known_missing()).collect();
                    each(i, &c.test_id, nothing, refs)?;
                    let place = case_place(i, &c.test_id);
                    check_case_state(schema, path, &place, &c.test_id, &c.user_state)?;
                    uses.record(schema, path, &place, &c.test_id, &c.user_state, None);
                    Ok(())
                })?,
                BankType::Pattern => for_each_case(path, bank, warn, &mut |i, c: PatternCase| {
                    let refs = case_refs(c.expects(), c.excludes(), c.known_missing()).collect();
                    each(i, &c.test_id, false, refs)
                })?,
                _ => for_each_case(path, bank, warn, &mut |i, c: AlwaysCase| {
                    let refs = case_refs(c.expects(), [], c.known_missing()).collect();
                    each(i, &c.test_id, false, refs)?;
                    let place = case_place(i, &c.test_id);
                    check_case_state(schema, path, &place, &c.test_id, &c.user_state)?;
                    let own = Some(Some(c.user_type.as_str()));
                    uses.record(schema, path, &place, &c.test_id, &c.user_state, own);
                    Ok(())
                })?,
            };
            listed.into_iter().for_each(&mut *warn);
            files.push((bank, path.clone()));
        }
        if nothing > WARNINGS_PER_KIND {
            warn(format!(
                "{} {} more {} cases test nothing (neither expected nor not-expected handlers)",
                banks_dir.display(),
                nothing - WARNINGS_PER_KIND,
                bank.key()
            ));
        }
        streamed.push(StreamedBank {
            bank,
            files: paths,
            count,
        });
    }
    checks.uses.merge(checks_uses);
    Ok(Banks {
        semantic,
        state: Vec::new(),
        pattern: Vec::new(),
        always: Vec::new(),
        answer,
        files,
        streamed,
    })
}

/// Reads a bank file case by case, without holding the file or its cases in memory: `each`
/// gets every case (its index in the file's `tests`) as it is parsed, and can stop the read
/// with an error. The same rules as [`read_bank`]: the folder decides the type, a differing
/// `bank_type` is an error, a file without one warns; errors name the file, line, column and
/// field (`tests[12345].expected_handlers`); unknown fields warn.
pub fn for_each_case<C: DeserializeOwned>(
    path: &Path,
    bank: BankType,
    warn: &mut dyn FnMut(String),
    each: &mut dyn FnMut(usize, C) -> Result<(), DataError>,
) -> Result<usize, DataError> {
    use std::io::{BufRead as _, Read as _};
    let file = std::fs::File::open(path)
        .map_err(|e| DataError::new(path, format!("cannot read file: {e}")))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    // A byte-order mark is not data; the first other byte says bare list or object.
    let bom = reader
        .fill_buf()
        .map_err(|e| DataError::new(path, format!("cannot read file: {e}")))?
        .starts_with(&[0xEF, 0xBB, 0xBF]);
    if bom {
        reader.consume(3);
    }
    let first = reader
        .fill_buf()
        .map_err(|e| DataError::new(path, format!("cannot read file: {e}")))?
        .iter()
        .copied()
        .find(|b| !b.is_ascii_whitespace());
    let mut state = StreamState {
        path,
        each,
        warn,
        count: 0,
        failure: None,
        bank_type: None,
        version: None,
        error_at: None,
    };
    let mut de = serde_json::Deserializer::from_reader(reader.by_ref());
    let result = if first == Some(b'[') {
        serde::de::DeserializeSeed::deserialize(
            CasesSeed::<C> {
                state: &mut state,
                _c: std::marker::PhantomData,
            },
            &mut de,
        )
    } else {
        serde::de::DeserializeSeed::deserialize(
            FileSeed::<C> {
                state: &mut state,
                _c: std::marker::PhantomData,
            },
            &mut de,
        )
    };
    let result = result.and_then(|()| de.end());
    if let Some(failure) = state.failure.take() {
        return Err(failure);
    }
    let error_at = state.error_at;
    result.map_err(|e| DataError {
        path: path.to_owned(),
        line: error_at
            .map(|(l, _)| l)
            .or((e.line() > 0).then_some(e.line())),
        column: error_at
            .map(|(_, c)| c)
            .or((e.column() > 0).then_some(e.column())),
        message: e
            .to_string()
            .rsplit_once(" at line ")
            .map_or_else(|| e.to_string(), |(m, _)| m.to_owned()),
    })?;
    let pre_v2 = |what: &str| {
        format!(
            "{}: {what}: loaded as a {} bank from its folder (pre-V2 layout); `assay banks migrate` adds the fields",
            path.display(),
            bank.as_str()
        )
    };
    if first == Some(b'[') {
        (state.warn)(pre_v2("a bare list of cases with no bank_type or version"));
    } else {
        match state.bank_type {
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
            Some(_) if state.version.is_none() => (state.warn)(pre_v2("no version")),
            Some(_) => {}
            None => (state.warn)(pre_v2("no bank_type")),
        }
    }
    Ok(state.count)
}

struct StreamState<'a, C> {
    path: &'a Path,
    each: &'a mut dyn FnMut(usize, C) -> Result<(), DataError>,
    warn: &'a mut dyn FnMut(String),
    count: usize,
    /// The first error of a case (parsing or `each`): it stops the read and is the result.
    failure: Option<DataError>,
    bank_type: Option<BankType>,
    version: Option<serde_json::Value>,
    /// Where a case's parse error happened (line, column): the error reaches the top as a
    /// custom one, which serde_json would place where it surfaced instead.
    error_at: Option<(usize, usize)>,
}

/// The top-level object: `bank_type`, `version`, `tests` (streamed), other keys warned of.
struct FileSeed<'s, 'a, C> {
    state: &'s mut StreamState<'a, C>,
    _c: std::marker::PhantomData<C>,
}

impl<'de, C: DeserializeOwned> serde::de::DeserializeSeed<'de> for FileSeed<'_, '_, C> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, C: DeserializeOwned> serde::de::Visitor<'de> for FileSeed<'_, '_, C> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a bank: an object with `tests`, or a list of cases")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut tests = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "tests" => {
                    map.next_value_seed(CasesSeed::<C> {
                        state: &mut *self.state,
                        _c: std::marker::PhantomData,
                    })?;
                    tests = true;
                }
                "bank_type" => {
                    self.state.bank_type = Some(map.next_value()?);
                }
                "version" => {
                    self.state.version = Some(map.next_value()?);
                }
                "created" | "description" | "$schema" => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
                other => {
                    (self.state.warn)(format!(
                        "{}: unknown field `{other}` (ignored)",
                        self.state.path.display()
                    ));
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        if !tests {
            return Err(serde::de::Error::missing_field("tests"));
        }
        Ok(())
    }
}

/// The `tests` array, one case at a time.
struct CasesSeed<'s, 'a, C> {
    state: &'s mut StreamState<'a, C>,
    _c: std::marker::PhantomData<C>,
}

impl<'de, C: DeserializeOwned> serde::de::DeserializeSeed<'de> for CasesSeed<'_, '_, C> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, C: DeserializeOwned> serde::de::Visitor<'de> for CasesSeed<'_, '_, C> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of cases")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let state = self.state;
        loop {
            let index = state.count;
            let mut ignored: Vec<String> = Vec::new();
            let next = seq.next_element_seed(CaseSeed::<C> {
                ignored: &mut ignored,
                _c: std::marker::PhantomData,
            });
            let case = match next {
                Ok(Some(case)) => case,
                Ok(None) => return Ok(()),
                Err(e) => {
                    // The field path of a case's error: `tests[i].field`.
                    let text = e.to_string();
                    let (field, message) = match text.split_once('\u{1f}') {
                        Some((field, rest)) => {
                            let (message, at) = rest.split_once('\u{1f}').unwrap_or((rest, ""));
                            state.error_at = at
                                .split_once(':')
                                .and_then(|(l, c)| Some((l.parse().ok()?, c.parse().ok()?)));
                            (field.to_owned(), message.to_owned())
                        }
                        None => (String::new(), text),
                    };
                    let place = if field.is_empty() || field == "." {
                        format!("tests[{index}]")
                    } else {
                        format!("tests[{index}].{field}")
                    };
                    return Err(serde::de::Error::custom(format!("{place}: {message}")));
                }
            };
            for field in ignored {
                (state.warn)(format!(
                    "{}: unknown field `tests[{index}].{field}` (ignored)",
                    state.path.display()
                ));
            }
            state.count += 1;
            if let Err(e) = (state.each)(index, case) {
                state.failure = Some(e);
                return Err(serde::de::Error::custom("stopped"));
            }
        }
    }
}

/// One case, with its unknown fields collected and its errors carrying the field's path.
struct CaseSeed<'i, C> {
    ignored: &'i mut Vec<String>,
    _c: std::marker::PhantomData<C>,
}

impl<'de, C: DeserializeOwned> serde::de::DeserializeSeed<'de> for CaseSeed<'_, C> {
    type Value = C;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<C, D::Error> {
        let ignored = self.ignored;
        let mut track = serde_path_to_error::Track::new();
        let mut on_ignored = |p: serde_ignored::Path<'_>| ignored.push(p.to_string());
        let d = serde_ignored::Deserializer::new(d, &mut on_ignored);
        let d = serde_path_to_error::Deserializer::new(d, &mut track);
        C::deserialize(d).map_err(|e| {
            let path = track.path().to_string();
            let text = e.to_string();
            // serde_json's errors end " at line L column C": kept apart, for the caller.
            let (message, at) = text
                .rsplit_once(" at line ")
                .map_or((text.as_str(), String::new()), |(m, at)| {
                    (m, at.replacen(" column ", ":", 1))
                });
            // The field path, the message and the place, split by a unit separator.
            serde::de::Error::custom(format!("{path}\u{1f}{message}\u{1f}{at}"))
        })
    }
}
