//! Versioned test data (seed 001 "Test Data Manager"): `test_data/versions.json` and
//! `test_data/<optimization|evaluation>/<version>/test_cases.jsonl` with the context files the
//! cases name, stored inside the version's folder.
//!
//! `versions.json` keeps the seed's keys and adds a little metadata per version:
//!
//! ```json
//! {
//!   "latest_optimization": "v1.0.0",
//!   "latest_evaluation": "v1.0.0",
//!   "versions": {
//!     "optimization": {
//!       "v1.0.0": {"description": "First set", "created_at": "2026-11-25T09:00:00Z",
//!                  "cases": 10, "files": 3, "fingerprint": "<sha256>"}
//!     },
//!     "evaluation": {}
//!   }
//! }
//! ```
//!
//! `cases` and `files` count the cases and the distinct context files; `fingerprint` is the
//! [`CaseSet::fingerprint`] at creation, so a version edited by hand afterwards is noticed
//! (a warning when it is loaded). Keys assay does not know are kept as they are when the file
//! is rewritten. `latest_*` may be missing or `null` while a kind has no version.
//!
//! Rules: a version is resolved CLI > `latest_*` ([`resolve`]); a version that is not in
//! `versions.json` is an error listing the known ones; [`create_version`] validates every case
//! and context file first ([`crate::cases::load_cases`]), copies the JSONL and exactly the files
//! it names into a temporary folder that is then renamed into place, never overwrites an
//! existing version, and rewrites `versions.json` atomically; the first version of a kind
//! becomes its latest. Version names are one path component of letters, digits, `.`, `_` and
//! `-` (`v1.0.0`, `2026-11-gaia`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cases::{CaseSet, check_relative, load_cases};
use crate::error::ExperimentError;

/// The test-data folder, relative to the project.
pub const TEST_DATA_DIR: &str = "test_data";
/// The registry of versions, relative to the project.
pub const VERSIONS_FILE: &str = "test_data/versions.json";
/// The cases file inside a version's folder.
pub const CASES_FILE: &str = "test_cases.jsonl";

/// The two sets of test data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The cases the search optimises on.
    Optimization,
    /// The held-out cases of the final evaluation.
    Evaluation,
}

impl Kind {
    /// Both kinds, optimization first.
    pub const ALL: [Kind; 2] = [Kind::Optimization, Kind::Evaluation];

    /// `optimization` or `evaluation`: the folder name and the key in `versions.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Optimization => "optimization",
            Kind::Evaluation => "evaluation",
        }
    }

    /// The CLI flag that picks a version of this kind.
    pub fn flag(self) -> &'static str {
        match self {
            Kind::Optimization => "--optimization-version",
            Kind::Evaluation => "--evaluation-version",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One version's entry in `versions.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// What changed, in the creator's words.
    #[serde(default)]
    pub description: String,
    /// When it was created (RFC 3339).
    #[serde(default)]
    pub created_at: String,
    /// Number of cases.
    #[serde(default)]
    pub cases: usize,
    /// Number of distinct context files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<usize>,
    /// [`CaseSet::fingerprint`] at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Keys assay does not know, kept as they are.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// The versions of both kinds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Versions {
    /// Optimization versions by name.
    #[serde(default)]
    pub optimization: BTreeMap<String, VersionInfo>,
    /// Evaluation versions by name.
    #[serde(default)]
    pub evaluation: BTreeMap<String, VersionInfo>,
    /// Keys assay does not know, kept as they are.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// `test_data/versions.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VersionsFile {
    /// The optimization version used when none is asked for.
    #[serde(default)]
    pub latest_optimization: Option<String>,
    /// The evaluation version used when none is asked for.
    #[serde(default)]
    pub latest_evaluation: Option<String>,
    /// Every version.
    #[serde(default)]
    pub versions: Versions,
    /// Keys assay does not know, kept as they are.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl VersionsFile {
    /// The versions of a kind.
    pub fn of(&self, kind: Kind) -> &BTreeMap<String, VersionInfo> {
        match kind {
            Kind::Optimization => &self.versions.optimization,
            Kind::Evaluation => &self.versions.evaluation,
        }
    }

    fn of_mut(&mut self, kind: Kind) -> &mut BTreeMap<String, VersionInfo> {
        match kind {
            Kind::Optimization => &mut self.versions.optimization,
            Kind::Evaluation => &mut self.versions.evaluation,
        }
    }

    /// The latest version of a kind, if set.
    pub fn latest(&self, kind: Kind) -> Option<&str> {
        match kind {
            Kind::Optimization => self.latest_optimization.as_deref(),
            Kind::Evaluation => self.latest_evaluation.as_deref(),
        }
    }

    fn set_latest(&mut self, kind: Kind, version: &str) {
        let slot = match kind {
            Kind::Optimization => &mut self.latest_optimization,
            Kind::Evaluation => &mut self.latest_evaluation,
        };
        *slot = Some(version.to_owned());
    }

    /// The versions of a kind in the order they were created (then by name).
    pub fn ordered(&self, kind: Kind) -> Vec<(&str, &VersionInfo)> {
        let mut v: Vec<_> = self
            .of(kind)
            .iter()
            .map(|(name, info)| (name.as_str(), info))
            .collect();
        v.sort_by(|a, b| {
            a.1.created_at
                .cmp(&b.1.created_at)
                .then_with(|| a.0.cmp(b.0))
        });
        v
    }

    fn known(&self, kind: Kind) -> String {
        let names: Vec<&str> = self.ordered(kind).into_iter().map(|(n, _)| n).collect();
        if names.is_empty() {
            "none yet".to_owned()
        } else {
            names.join(", ")
        }
    }
}

/// Reads `test_data/versions.json`; `None` when there is no such file.
pub fn read_versions(project: &Path) -> Result<Option<VersionsFile>, ExperimentError> {
    let path = project.join(VERSIONS_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ExperimentError::data(&path, format!("cannot read: {e}")))?;
    let file: VersionsFile =
        assay_kb::datafile::parse(&path, &text, assay_kb::datafile::Format::Json, &mut |_| {})?;
    for kind in Kind::ALL {
        for name in file.of(kind).keys() {
            check_version_name(name).map_err(|m| {
                ExperimentError::data(&path, format!("versions.{kind}.{name}: {m}"))
            })?;
        }
        if let Some(latest) = file.latest(kind)
            && !file.of(kind).contains_key(latest)
        {
            return Err(ExperimentError::data(
                &path,
                format!(
                    "latest_{kind}: `{latest}` is not one of the {kind} versions ({})",
                    file.known(kind)
                ),
            ));
        }
    }
    Ok(Some(file))
}

fn write_versions(project: &Path, file: &VersionsFile) -> Result<(), ExperimentError> {
    let path = project.join(VERSIONS_FILE);
    let mut json = serde_json::to_string_pretty(file).unwrap_or_default();
    json.push('\n');
    assay_project::results::write_replace(&path, json.as_bytes())
        .map_err(|e| ExperimentError::write(&path, &e))
}

/// Checks a version name: one path component of ASCII letters, digits, `.`, `_` and `-`, not
/// starting with `.`.
pub fn check_version_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a version name must not be empty".into());
    }
    if name.starts_with('.') {
        return Err(format!("version name `{name}` must not start with `.`"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "version name `{name}` has `{c}`; use letters, digits, `.`, `_` and `-` (e.g. v1.2.0)"
        ));
    }
    Ok(())
}

/// Where a kind's test data comes from for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedData {
    /// Which set.
    pub kind: Kind,
    /// The version.
    pub version: String,
    /// Its `test_cases.jsonl`.
    pub cases_path: PathBuf,
    /// The folder `files` entries are relative to (the version's folder).
    pub files_root: PathBuf,
    /// The fingerprint recorded when the version was created, if any.
    pub fingerprint: Option<String>,
}

impl ResolvedData {
    /// Loads and validates the cases, noting in the warnings when they changed since the
    /// version was created.
    pub fn load(&self) -> Result<CaseSet, ExperimentError> {
        let mut set = load_cases(&self.cases_path, &self.files_root)?;
        set.version = Some(self.version.clone());
        if let Some(expected) = &self.fingerprint
            && *expected != set.fingerprint
        {
            let w = format!(
                "{}: {} version {} changed since it was created (its files differ from the \
                 fingerprint in {VERSIONS_FILE}); results are not comparable with runs on the \
                 original; make a new version with `assay data create-version`",
                self.cases_path.display(),
                self.kind,
                self.version
            );
            set.warnings.push(w);
        }
        Ok(set)
    }
}

/// Resolves the test data of a kind: the version asked for on the command line, else the
/// latest in `versions.json`.
pub fn resolve(
    project: &Path,
    kind: Kind,
    cli: Option<&str>,
) -> Result<ResolvedData, ExperimentError> {
    let path = project.join(VERSIONS_FILE);
    let Some(file) = read_versions(project)? else {
        return Err(ExperimentError::data(
            &path,
            format!(
                "no test-data registry: create a {kind} version with `assay data create-version \
                 --type {kind} --version v1.0.0 --description … --source-dir DIR`, or name a \
                 cases file directly"
            ),
        ));
    };
    let version = match cli {
        Some(v) => v.to_owned(),
        None => file.latest(kind).map(str::to_owned).ok_or_else(|| {
            ExperimentError::data(
                &path,
                format!(
                    "latest_{kind} is not set: pass {} (known: {}) or set it with `assay data \
                     set-latest {} V`",
                    kind.flag(),
                    file.known(kind),
                    kind.flag()
                ),
            )
        })?,
    };
    let Some(info) = file.of(kind).get(&version) else {
        return Err(ExperimentError::data(
            &path,
            format!(
                "{kind} version `{version}` does not exist (known {kind} versions: {})",
                file.known(kind)
            ),
        ));
    };
    let files_root = project
        .join(TEST_DATA_DIR)
        .join(kind.as_str())
        .join(&version);
    let cases_path = files_root.join(CASES_FILE);
    if !cases_path.is_file() {
        return Err(ExperimentError::data(
            &cases_path,
            format!(
                "{kind} version `{version}` is listed in {VERSIONS_FILE} but its cases file is missing"
            ),
        ));
    }
    Ok(ResolvedData {
        kind,
        version,
        cases_path,
        files_root,
        fingerprint: info.fingerprint.clone(),
    })
}

/// What [`create_version`] made.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedVersion {
    /// Which set.
    pub kind: Kind,
    /// The version's name.
    pub version: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Its registry entry.
    pub info: VersionInfo,
    /// Whether it became the latest of its kind (the first version of a kind does).
    pub became_latest: bool,
    /// Warnings from loading the source cases.
    pub warnings: Vec<String>,
}

/// The cases file in a source folder: `test_cases.jsonl`, else its only `.jsonl` file.
fn source_jsonl(source_dir: &Path) -> Result<PathBuf, ExperimentError> {
    let preferred = source_dir.join(CASES_FILE);
    if preferred.is_file() {
        return Ok(preferred);
    }
    let entries = std::fs::read_dir(source_dir).map_err(|e| {
        ExperimentError::data(source_dir, format!("cannot read source folder: {e}"))
    })?;
    let mut jsonl: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    jsonl.sort();
    match jsonl.len() {
        1 => Ok(jsonl.remove(0)),
        0 => Err(ExperimentError::data(
            source_dir,
            format!("no {CASES_FILE} (nor any .jsonl file) in the source folder"),
        )),
        _ => Err(ExperimentError::data(
            source_dir,
            format!("several .jsonl files and no {CASES_FILE}: name the one to use {CASES_FILE}"),
        )),
    }
}

/// Creates a new version of a kind from `source_dir` (its `test_cases.jsonl` and the files the
/// cases name, relative to `source_dir`).
pub fn create_version(
    project: &Path,
    kind: Kind,
    version: &str,
    description: &str,
    source_dir: &Path,
) -> Result<CreatedVersion, ExperimentError> {
    let registry = project.join(VERSIONS_FILE);
    check_version_name(version).map_err(|m| ExperimentError::Usage(format!("--version: {m}")))?;
    let mut file = read_versions(project)?.unwrap_or_default();
    let kind_dir = project.join(TEST_DATA_DIR).join(kind.as_str());
    let dir = kind_dir.join(version);
    if file.of(kind).contains_key(version) || dir.exists() {
        return Err(ExperimentError::Usage(format!(
            "{kind} version `{version}` already exists ({}); versions are never overwritten: \
             choose a new version name (known {kind} versions: {})",
            if dir.exists() {
                dir.display().to_string()
            } else {
                format!("listed in {}", registry.display())
            },
            file.known(kind)
        )));
    }

    // Validate everything before writing anything.
    let jsonl = source_jsonl(source_dir)?;
    let set = load_cases(&jsonl, source_dir)?;
    for w in &set.warnings {
        tracing::warn!("{w}");
    }
    let mut files: Vec<PathBuf> = Vec::new();
    for case in &set.cases {
        for name in &case.case.files {
            let rel = check_relative(name)
                .map_err(|m| ExperimentError::at_line(&jsonl, case.case.line, m))?;
            if !files.contains(&rel) {
                files.push(rel);
            }
        }
    }

    // Copy into a temporary folder beside the final one, then rename it into place.
    std::fs::create_dir_all(&kind_dir).map_err(|e| ExperimentError::write(&kind_dir, &e))?;
    let staging = tempfile_dir(&kind_dir, version)?;
    let copy = |from: &Path, to: &Path| -> Result<(), ExperimentError> {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ExperimentError::write(parent, &e))?;
        }
        std::fs::copy(from, to).map_err(|e| ExperimentError::write(to, &e))?;
        Ok(())
    };
    copy(&jsonl, &staging.join(CASES_FILE))?;
    for rel in &files {
        copy(&source_dir.join(rel), &staging.join(rel))?;
    }
    // The copy must load exactly as the source did.
    let copied = load_cases(&staging.join(CASES_FILE), &staging)?;
    if copied.fingerprint != set.fingerprint {
        return Err(ExperimentError::Write {
            path: staging.clone(),
            message: "the copied test data differs from the source (changed while copying?)".into(),
        });
    }
    // rename() of a folder onto an existing non-empty folder fails: never overwrites.
    std::fs::rename(&staging, &dir).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staging);
        ExperimentError::write(&dir, &e)
    })?;

    let info = VersionInfo {
        description: description.to_owned(),
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        cases: set.len(),
        files: Some(files.len()),
        fingerprint: Some(set.fingerprint.clone()),
        other: BTreeMap::new(),
    };
    file.of_mut(kind).insert(version.to_owned(), info.clone());
    let became_latest = file.latest(kind).is_none();
    if became_latest {
        file.set_latest(kind, version);
    }
    if let Err(e) = write_versions(project, &file) {
        // Keep the tree as it was: the version folder goes again.
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    tracing::info!(kind = %kind, version, cases = set.len(), "test data version created");
    Ok(CreatedVersion {
        kind,
        version: version.to_owned(),
        dir,
        info,
        became_latest,
        warnings: set.warnings,
    })
}

/// An empty temporary folder in `parent` (hidden, so it is never taken for a version).
fn tempfile_dir(parent: &Path, version: &str) -> Result<PathBuf, ExperimentError> {
    for n in 0..1000 {
        let p = parent.join(format!(".tmp-{version}-{}-{n}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(ExperimentError::write(&p, &e)),
        }
    }
    Err(ExperimentError::Write {
        path: parent.to_owned(),
        message: "no free temporary folder name".into(),
    })
}

/// Sets the latest version of one or both kinds. Each must exist; nothing is written unless
/// all do.
pub fn set_latest(
    project: &Path,
    optimization: Option<&str>,
    evaluation: Option<&str>,
) -> Result<VersionsFile, ExperimentError> {
    let path = project.join(VERSIONS_FILE);
    if optimization.is_none() && evaluation.is_none() {
        return Err(ExperimentError::Usage(
            "nothing to set: pass --optimization-version and/or --evaluation-version".into(),
        ));
    }
    let Some(mut file) = read_versions(project)? else {
        return Err(ExperimentError::data(
            &path,
            "no test-data registry yet: create a version first with `assay data create-version`",
        ));
    };
    for (kind, v) in [
        (Kind::Optimization, optimization),
        (Kind::Evaluation, evaluation),
    ] {
        if let Some(v) = v {
            if !file.of(kind).contains_key(v) {
                return Err(ExperimentError::Usage(format!(
                    "{}: {kind} version `{v}` does not exist (known {kind} versions: {})",
                    kind.flag(),
                    file.known(kind)
                )));
            }
            file.set_latest(kind, v);
        }
    }
    write_versions(project, &file)?;
    tracing::info!(?optimization, ?evaluation, "latest test data versions set");
    Ok(file)
}

/// One row of [`list_versions`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionRow {
    /// Which set.
    pub kind: Kind,
    /// The version.
    pub version: String,
    /// Whether it is the latest of its kind.
    pub latest: bool,
    /// Its registry entry.
    #[serde(flatten)]
    pub info: VersionInfo,
}

/// Every version, optimization first, each kind in creation order. No registry: no rows.
pub fn list_versions(project: &Path) -> Result<Vec<VersionRow>, ExperimentError> {
    let Some(file) = read_versions(project)? else {
        return Ok(Vec::new());
    };
    let mut rows = Vec::new();
    for kind in Kind::ALL {
        for (name, info) in file.ordered(kind) {
            rows.push(VersionRow {
                kind,
                version: name.to_owned(),
                latest: file.latest(kind) == Some(name),
                info: info.clone(),
            });
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(dir: &Path, jsonl: &str, files: &[(&str, &str)]) -> PathBuf {
        let src = dir.join("src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join(CASES_FILE), jsonl).unwrap();
        for (name, text) in files {
            let p = src.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        src
    }

    const GOOD: &str = "{\"question\": \"Q1?\", \"files\": [\"context_files/a.txt\"], \"answer\": \"A\"}\n\
                        {\"question\": \"Q2?\", \"files\": [], \"answer\": \"B\"}\n";

    /// Every file under `dir` with its contents, for "nothing changed" checks.
    fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_owned()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.insert(
                        p.strip_prefix(dir).unwrap().to_owned(),
                        std::fs::read(&p).unwrap(),
                    );
                }
            }
        }
        out
    }

    #[test]
    fn create_resolve_and_list() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        std::fs::create_dir_all(&project).unwrap();
        let src = source(
            tmp.path(),
            GOOD,
            &[("context_files/a.txt", "alpha"), ("unused.txt", "x")],
        );
        let made = create_version(&project, Kind::Optimization, "v1.0.0", "first", &src).unwrap();
        assert!(made.became_latest);
        assert_eq!(made.info.cases, 2);
        assert_eq!(made.info.files, Some(1));
        let dir = project.join("test_data/optimization/v1.0.0");
        assert!(dir.join("context_files/a.txt").is_file());
        assert!(
            !dir.join("unused.txt").exists(),
            "only the files the cases name are copied"
        );

        let second =
            create_version(&project, Kind::Optimization, "v1.1.0", "second", &src).unwrap();
        assert!(!second.became_latest);

        let r = resolve(&project, Kind::Optimization, None).unwrap();
        assert_eq!(r.version, "v1.0.0");
        let r = resolve(&project, Kind::Optimization, Some("v1.1.0")).unwrap();
        assert_eq!(r.version, "v1.1.0");
        let set = r.load().unwrap();
        assert_eq!(set.version.as_deref(), Some("v1.1.0"));
        assert_eq!(set.cases[0].context[0].text, "alpha");
        assert!(set.warnings.is_empty());

        set_latest(&project, Some("v1.1.0"), None).unwrap();
        let rows = list_versions(&project).unwrap();
        let view: Vec<_> = rows
            .iter()
            .map(|r| (r.kind, r.version.as_str(), r.latest))
            .collect();
        assert_eq!(
            view,
            [
                (Kind::Optimization, "v1.0.0", false),
                (Kind::Optimization, "v1.1.0", true)
            ]
        );
        // The seed's keys are there.
        let raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(project.join(VERSIONS_FILE)).unwrap())
                .unwrap();
        assert_eq!(raw["latest_optimization"], "v1.1.0");
        assert_eq!(
            raw["versions"]["optimization"]["v1.0.0"]["description"],
            "first"
        );
        assert_eq!(raw["versions"]["optimization"]["v1.0.0"]["cases"], 2);
    }

    #[test]
    fn an_existing_version_is_never_overwritten() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        let src = source(tmp.path(), GOOD, &[("context_files/a.txt", "alpha")]);
        create_version(&project, Kind::Evaluation, "v1", "first", &src).unwrap();
        let before = tree(&project);
        let e = create_version(&project, Kind::Evaluation, "v1", "again", &src).unwrap_err();
        assert!(
            e.to_string()
                .contains("evaluation version `v1` already exists"),
            "{e}"
        );
        assert_eq!(tree(&project), before);
        // A folder that is there but not registered is not overwritten either.
        std::fs::create_dir_all(project.join("test_data/evaluation/v2")).unwrap();
        let before = tree(&project);
        let e = create_version(&project, Kind::Evaluation, "v2", "x", &src).unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        assert_eq!(tree(&project), before);
    }

    #[test]
    fn bad_source_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        std::fs::create_dir_all(&project).unwrap();
        let src = source(
            tmp.path(),
            "{\"question\": \"Q?\", \"files\": [\"context_files/missing.txt\"], \"answer\": \"A\"}\n",
            &[],
        );
        let e = create_version(&project, Kind::Optimization, "v1", "x", &src).unwrap_err();
        assert!(
            e.to_string()
                .contains("test_cases.jsonl:1: files[0]: context file"),
            "{e}"
        );
        assert!(tree(&project).is_empty());
        assert!(!project.join("test_data").exists());
    }

    #[test]
    fn unknown_versions_list_the_known_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        let src = source(tmp.path(), GOOD, &[("context_files/a.txt", "alpha")]);
        create_version(&project, Kind::Optimization, "v1.0.0", "first", &src).unwrap();
        let e = resolve(&project, Kind::Optimization, Some("v9"))
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with(
                "optimization version `v9` does not exist (known optimization versions: v1.0.0)"
            ),
            "{e}"
        );
        let e = resolve(&project, Kind::Evaluation, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("latest_evaluation is not set"), "{e}");
        let before = tree(&project);
        let e = set_latest(&project, Some("v1.0.0"), Some("v9"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("evaluation version `v9` does not exist"), "{e}");
        assert_eq!(
            tree(&project),
            before,
            "nothing written when one name is wrong"
        );
    }

    #[test]
    fn a_missing_registry() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(list_versions(tmp.path()).unwrap().is_empty());
        let e = resolve(tmp.path(), Kind::Evaluation, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no test-data registry"), "{e}");
    }

    #[test]
    fn edited_versions_are_noticed() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        let src = source(tmp.path(), GOOD, &[("context_files/a.txt", "alpha")]);
        create_version(&project, Kind::Optimization, "v1", "x", &src).unwrap();
        std::fs::write(
            project.join("test_data/optimization/v1/context_files/a.txt"),
            "edited",
        )
        .unwrap();
        let set = resolve(&project, Kind::Optimization, None)
            .unwrap()
            .load()
            .unwrap();
        assert_eq!(set.warnings.len(), 1);
        assert!(set.warnings[0].contains("changed since it was created"));
    }

    #[test]
    fn registry_keeps_unknown_keys_and_checks_latest() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path();
        std::fs::create_dir_all(project.join("test_data")).unwrap();
        std::fs::write(
            project.join(VERSIONS_FILE),
            r#"{"latest_optimization": "v1", "owner": "qa", "versions": {"optimization": {"v1": {"description": "d", "created_at": "2026-01-01T00:00:00Z", "cases": 1, "source": "gaia"}}, "evaluation": {}}}"#,
        )
        .unwrap();
        let file = read_versions(project).unwrap().unwrap();
        assert_eq!(file.other["owner"], "qa");
        assert_eq!(file.versions.optimization["v1"].other["source"], "gaia");
        std::fs::write(
            project.join(VERSIONS_FILE),
            r#"{"latest_optimization": "v2", "versions": {"optimization": {}}}"#,
        )
        .unwrap();
        let e = read_versions(project).unwrap_err().to_string();
        assert!(
            e.contains("latest_optimization: `v2` is not one of the optimization versions"),
            "{e}"
        );
    }

    #[test]
    fn the_example_resolves_unchanged() {
        let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gaia-mini");
        for kind in Kind::ALL {
            let resolved = resolve(&project, kind, None).unwrap();
            assert_eq!(resolved.version, "v1.0.0");
            let set = resolved.load().unwrap();
            assert_eq!(set.len(), 10, "{kind}");
            assert!(set.warnings.is_empty(), "{kind}: {:?}", set.warnings);
            let with_files = set.cases.iter().filter(|c| !c.context.is_empty()).count();
            assert_eq!(with_files, 3, "{kind}");
        }
    }

    #[test]
    fn version_names() {
        assert!(check_version_name("v1.2.0").is_ok());
        assert!(check_version_name("2026-11_gaia").is_ok());
        assert!(check_version_name("../x").is_err());
        assert!(check_version_name(".hidden").is_err());
        assert!(check_version_name("a b").is_err());
        assert!(check_version_name("").is_err());
    }
}
