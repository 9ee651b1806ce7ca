//! Test cases of an experiment: the seed's JSONL (`{"question", "files", "answer"}` per line)
//! and the context files its lines name.
//!
//! [`load_cases`] reads and validates everything before any model is called. Every error names
//! the file and, for a line of the JSONL, its 1-based line number and the field:
//!
//! * a line that is not a JSON object, a missing field or a field of the wrong type;
//! * an empty `question` or `answer` (an empty expected answer would "contain" every output);
//! * a `files` entry that is absolute, leaves the version folder (`..`, or a symbolic link
//!   pointing outside it), is missing, unreadable or not UTF-8 text;
//! * a file with no cases at all;
//! * a bad `assert` list (an unknown assertion type, a bad regex, a value of the wrong shape),
//!   named down to the assertion's field: `assert[2].value: invalid regular expression: …`.
//!
//! Blank lines are skipped; a UTF-8 byte-order mark at the start of the file is accepted.
//! Fields the format does not define are **warnings**, not errors (the data-file rule of
//! DESIGN.md: a case exported with extra metadata, such as a GAIA `task_id` or `level`, still
//! loads), collected in [`CaseSet::warnings`] for the caller to report; one within a typo of a
//! defined field (`corectness`) is an error naming the field it meant.
//!
//! `files` paths are relative to `files_root`, which for versioned test data is the version's
//! folder (`test_data/<kind>/<version>/`), so a case names `context_files/article.txt`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use assay_core::assertion::AssertionSet;
use assay_kb::datafile::{self, DataError, Format};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ExperimentError;

/// One line of the test-case file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestCase {
    /// The 1-based line of the JSONL file the case is on.
    pub line: usize,
    /// The question put to the system under test.
    pub question: String,
    /// Context files, relative to the test data's folder.
    pub files: Vec<String>,
    /// The expected answer.
    pub answer: String,
    /// This case's correctness rule (`"correctness"`), when it differs from the project's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correctness: Option<crate::correctness::Correctness>,
    /// The regular expression of a `regex` case (`"pattern"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Deterministic assertions on the answer (`"assert"`, with `"assert_threshold"`),
    /// checked beside the correctness rule ([`assay_core::assertion`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assert: Option<AssertionSet>,
}

/// A context file's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextFile {
    /// The path as the case names it.
    pub path: String,
    /// The file's contents.
    pub text: String,
}

/// A case with its context files read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadedCase {
    /// The case as written.
    pub case: TestCase,
    /// Its files, in the order the case lists them.
    pub context: Vec<ContextFile>,
}

/// A validated set of test cases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseSet {
    /// The JSONL file.
    pub path: PathBuf,
    /// The test-data version it came from, when it came from `test_data/`.
    pub version: Option<String>,
    /// The cases in file order.
    pub cases: Vec<LoadedCase>,
    /// SHA-256 (hex) of the JSONL and of every context file with its path: two sets with the
    /// same fingerprint ask the same questions with the same context.
    pub fingerprint: String,
    /// Unknown fields and other things worth a look that did not stop loading.
    pub warnings: Vec<String>,
}

impl CaseSet {
    /// The number of cases.
    pub fn len(&self) -> usize {
        self.cases.len()
    }

    /// Whether there are no cases (never true for a set [`load_cases`] returned).
    pub fn is_empty(&self) -> bool {
        self.cases.is_empty()
    }
}

/// The fields a case line may have.
const CASE_FIELDS: [&str; 7] = [
    "question",
    "files",
    "answer",
    "correctness",
    "pattern",
    "assert",
    "assert_threshold",
];

/// One line of an optimizer cases file (JSON Lines): a question, the files that hold what it
/// needs, and the expected answer. `files` is required (it may be an empty list).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct CaseLine {
    /// The question the agents answer.
    question: String,
    /// Context files the agents are given, relative to the cases' files folder.
    files: Vec<String>,
    /// The expected answer.
    answer: String,
    /// How an answer is judged correct, overriding `[optimize] correctness` for this case:
    /// `normalised`, `exact`, `numeric`, `regex`, `grader` or `seed`.
    #[serde(default)]
    correctness: Option<String>,
    /// With `correctness: regex`: the pattern a correct answer matches.
    #[serde(default)]
    pattern: Option<String>,
    /// Deterministic assertions on the answer (see docs/assertions.md), checked beside the
    /// correctness rule; a failed `critical` one makes the case incorrect.
    #[serde(default)]
    #[schemars(with = "Option<Vec<assay_core::assertion::AssertionConfig>>")]
    assert: Option<serde_json::Value>,
    /// The weighted share (0–1) of `assert` that must pass (default: all).
    #[serde(default)]
    assert_threshold: Option<f64>,
}

/// The JSON Schema of one line of an optimizer cases file (`assay schema optimizer-case`).
/// Unknown fields are refused when the file is read (with the closest known one named).
pub fn case_line_schema() -> schemars::Schema {
    let mut schema = schemars::schema_for!(CaseLine);
    schema.insert("additionalProperties".to_owned(), false.into());
    schema
}

/// Reads and validates the JSONL file `jsonl`, reading every context file under `files_root`.
pub fn load_cases(jsonl: &Path, files_root: &Path) -> Result<CaseSet, ExperimentError> {
    let bytes = std::fs::read(jsonl)
        .map_err(|e| ExperimentError::data(jsonl, format!("cannot read test cases: {e}")))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| ExperimentError::data(jsonl, format!("not UTF-8 text: {e}")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root = std::fs::canonicalize(files_root).map_err(|e| {
        ExperimentError::data(
            jsonl,
            format!(
                "cannot open the folder context files are read from ({}): {e}",
                files_root.display()
            ),
        )
    })?;

    let mut warnings = Vec::new();
    let mut cases = Vec::new();
    // Context files by path: read once, hashed once, in path order.
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let mut unknown = Vec::new();
        let mut warn = |w: String| unknown.push(w);
        let parsed: CaseLine =
            datafile::parse(jsonl, raw, Format::Json, &mut warn).map_err(|e: DataError| {
                ExperimentError::Data(DataError {
                    line: Some(line),
                    ..e
                })
            })?;
        for w in unknown {
            // A field close to one the format defines is a typo, and a typo would silently
            // change what the case checks: an error naming the right one. Others (a GAIA
            // `task_id`) stay warnings.
            let field = w
                .split_once("unknown field `")
                .and_then(|(_, rest)| rest.split_once('`'))
                .map_or("", |(f, _)| f);
            if let Some(known) = assay_core::text::closest(field, CASE_FIELDS) {
                return Err(ExperimentError::at_line(
                    jsonl,
                    line,
                    format!("unknown field `{field}` (did you mean `{known}`?)"),
                ));
            }
            warnings.push(w.replacen(": unknown", &format!(":{line}: unknown"), 1));
        }
        if parsed.question.trim().is_empty() {
            return Err(ExperimentError::at_line(
                jsonl,
                line,
                "question: must not be empty",
            ));
        }
        if parsed.answer.trim().is_empty() {
            return Err(ExperimentError::at_line(
                jsonl,
                line,
                "answer: must not be empty (an empty expected answer would match every output)",
            ));
        }
        let correctness =
            match &parsed.correctness {
                None => None,
                Some(c) => Some(c.parse::<crate::correctness::Correctness>().map_err(|e| {
                    ExperimentError::at_line(jsonl, line, format!("correctness: {e}"))
                })?),
            };
        let assert = match &parsed.assert {
            None => {
                if parsed.assert_threshold.is_some() {
                    return Err(ExperimentError::at_line(
                        jsonl,
                        line,
                        "assert_threshold: given without `assert`",
                    ));
                }
                None
            }
            Some(list) => Some(
                AssertionSet::parse(list, parsed.assert_threshold, "assert")
                    .map_err(|e| ExperimentError::at_line(jsonl, line, e.to_string()))?,
            ),
        };
        let mut context = Vec::with_capacity(parsed.files.len());
        for (n, name) in parsed.files.iter().enumerate() {
            let text = if let Some(text) = files.get(name) {
                text.clone()
            } else {
                let text = read_context(&root, files_root, name).map_err(|message| {
                    ExperimentError::at_line(jsonl, line, format!("files[{n}]: {message}"))
                })?;
                files.insert(name.clone(), text.clone());
                text
            };
            context.push(ContextFile {
                path: name.clone(),
                text,
            });
        }
        cases.push(LoadedCase {
            case: TestCase {
                line,
                question: parsed.question,
                files: parsed.files,
                answer: parsed.answer,
                correctness,
                pattern: parsed.pattern,
                assert,
            },
            context,
        });
    }
    if cases.is_empty() {
        return Err(ExperimentError::data(
            jsonl,
            "no test cases (expected one JSON object per line: {\"question\", \"files\", \"answer\"})",
        ));
    }
    // The caller reports the warnings (once, naming the user's file; a copy loaded to check it
    // is never reported).
    let mut hash = Sha256::new();
    hash.update(b"assay-cases-v1\0");
    // Lengths as u64 little-endian, so the fingerprint is the same on every platform.
    let len = |n: usize| (n as u64).to_le_bytes();
    hash.update(len(bytes.len()));
    hash.update(&bytes);
    for (name, text) in &files {
        hash.update(len(name.len()));
        hash.update(name.as_bytes());
        hash.update(len(text.len()));
        hash.update(text.as_bytes());
    }
    let fingerprint = format!("{:x}", hash.finalize());
    Ok(CaseSet {
        path: jsonl.to_owned(),
        version: None,
        cases,
        fingerprint,
        warnings,
    })
}

/// Checks that `name` is a relative path that stays inside the folder (no root, no prefix, no
/// `..` that climbs above it) and returns it with `.` and `..` resolved.
pub(crate) fn check_relative(name: &str) -> Result<PathBuf, String> {
    if name.trim().is_empty() {
        return Err("empty path".into());
    }
    let mut normal = PathBuf::new();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(part) => normal.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() {
                    return Err(format!(
                        "`{name}` leaves the test data's folder (paths are relative to it)"
                    ));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "`{name}` is absolute; context files are named relative to the test data's folder"
                ));
            }
        }
    }
    if normal.as_os_str().is_empty() {
        return Err(format!("`{name}` names the test data's folder, not a file"));
    }
    Ok(normal)
}

/// Reads the context file `name` under `root` (canonical) after checking that it stays inside.
fn read_context(root: &Path, shown_root: &Path, name: &str) -> Result<String, String> {
    check_relative(name)?;
    let real = datafile::file_inside(root, root, name, "the test data's folder").map_err(|e| {
        if e.contains("not found under") {
            format!(
                "context file `{name}` not found under {}",
                shown_root.display()
            )
        } else {
            e
        }
    })?;
    let bytes =
        std::fs::read(&real).map_err(|e| format!("cannot read context file `{name}`: {e}"))?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("context file `{name}` is not UTF-8 text"))?;
    Ok(text
        .strip_prefix('\u{feff}')
        .map_or_else(|| text.clone(), str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(jsonl: &str, files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let path = dir.path().join("test_cases.jsonl");
        std::fs::write(&path, jsonl).unwrap();
        (dir, path)
    }

    fn err(jsonl: &str, files: &[(&str, &str)]) -> String {
        let (dir, path) = setup(jsonl, files);
        let e = load_cases(&path, dir.path()).unwrap_err();
        e.to_string()
            .replace(&dir.path().display().to_string(), "DIR")
    }

    #[test]
    fn loads_cases_and_context() {
        let (dir, path) = setup(
            "\u{feff}{\"question\": \"Q1?\", \"files\": [], \"answer\": \"A1\"}\n\n\
             {\"question\": \"Q2?\", \"files\": [\"context_files/a.txt\"], \"answer\": \"A2\"}\r\n",
            &[("context_files/a.txt", "alpha")],
        );
        let set = load_cases(&path, dir.path()).unwrap();
        assert_eq!(set.len(), 2);
        assert_eq!(set.cases[0].case.line, 1);
        assert_eq!(set.cases[1].case.line, 3);
        assert_eq!(set.cases[1].context[0].text, "alpha");
        assert_eq!(set.cases[1].context[0].path, "context_files/a.txt");
        assert_eq!(set.fingerprint.len(), 64);
        assert!(set.warnings.is_empty());
    }

    #[test]
    fn fingerprint_follows_context_files() {
        let jsonl = "{\"question\": \"Q?\", \"files\": [\"a.txt\"], \"answer\": \"A\"}\n";
        let (d1, p1) = setup(jsonl, &[("a.txt", "one")]);
        let (d2, p2) = setup(jsonl, &[("a.txt", "two")]);
        let (d3, p3) = setup(jsonl, &[("a.txt", "one")]);
        let f1 = load_cases(&p1, d1.path()).unwrap().fingerprint;
        let f2 = load_cases(&p2, d2.path()).unwrap().fingerprint;
        let f3 = load_cases(&p3, d3.path()).unwrap().fingerprint;
        assert_ne!(f1, f2);
        assert_eq!(f1, f3);
    }

    #[test]
    fn unknown_fields_are_warnings_with_their_line() {
        let (dir, path) = setup(
            "{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\", \"level\": 1}\n",
            &[],
        );
        let set = load_cases(&path, dir.path()).unwrap();
        assert_eq!(set.warnings.len(), 1);
        assert!(
            set.warnings[0].ends_with("test_cases.jsonl:1: unknown field `level` (ignored)"),
            "{}",
            set.warnings[0]
        );
    }

    #[test]
    fn bad_json_names_the_line() {
        let e = err(
            "{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\"}\n{\"question\": \"Q2?\",\n",
            &[],
        );
        assert!(e.starts_with("DIR/test_cases.jsonl:2:"), "{e}");
        assert!(e.contains("EOF"), "{e}");
    }

    #[test]
    fn assertions_load_and_bad_ones_name_line_and_field() {
        let (dir, path) = setup(
            "{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\", \"assert\":              [{\"type\": \"icontains\", \"value\": \"a\"}, {\"type\": \"not-refusal\",              \"critical\": true}], \"assert_threshold\": 0.5}\n",
            &[],
        );
        let set = load_cases(&path, dir.path()).unwrap();
        let a = set.cases[0].case.assert.as_ref().unwrap();
        assert_eq!((a.assertions.len(), a.threshold), (2, Some(0.5)));
        assert!(a.assertions[1].critical && a.assertions[1].negate);
        let ok = "{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\"}\n";
        let e = err(
            &format!(
                "{ok}{{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\", \"assert\":                  [{{\"type\": \"contains\", \"value\": \"a\"}}, {{\"type\": \"regex\", \"value\": \"(\"}}]}}\n"
            ),
            &[],
        );
        assert!(
            e.starts_with("DIR/test_cases.jsonl:2: assert[1].value: invalid regular expression"),
            "{e}"
        );
        let e = err(
            "{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\", \"assert_threshold\": 1}\n",
            &[],
        );
        assert_eq!(
            e,
            "DIR/test_cases.jsonl:1: assert_threshold: given without `assert`"
        );
        let e = err(
            "{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\", \"asert\": []}\n",
            &[],
        );
        assert!(
            e.ends_with("unknown field `asert` (did you mean `assert`?)"),
            "{e}"
        );
    }

    #[test]
    fn missing_field_names_line_and_field() {
        let e = err("{\"question\": \"Q?\", \"files\": []}\n", &[]);
        assert_eq!(e, "DIR/test_cases.jsonl:1:31: missing field `answer`");
    }

    #[test]
    fn wrong_type_names_the_field() {
        let e = err(
            "{\"question\": \"Q?\", \"files\": \"a.txt\", \"answer\": \"A\"}\n",
            &[],
        );
        assert!(e.starts_with("DIR/test_cases.jsonl:1:"), "{e}");
        assert!(e.contains("files: invalid type: string"), "{e}");
    }

    #[test]
    fn empty_answer_and_question_are_errors() {
        let e = err(
            "{\"question\": \"Q?\", \"files\": [], \"answer\": \" \"}\n",
            &[],
        );
        assert!(
            e.starts_with("DIR/test_cases.jsonl:1: answer: must not be empty"),
            "{e}"
        );
        let e = err(
            "{\"question\": \"\", \"files\": [], \"answer\": \"A\"}\n",
            &[],
        );
        assert_eq!(e, "DIR/test_cases.jsonl:1: question: must not be empty");
    }

    #[test]
    fn missing_context_file_names_line_and_entry() {
        let e = err(
            "{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\"}\n\
             {\"question\": \"Q?\", \"files\": [\"a.txt\", \"gone.txt\"], \"answer\": \"A\"}\n",
            &[("a.txt", "x")],
        );
        assert!(
            e.starts_with(
                "DIR/test_cases.jsonl:2: files[1]: context file `gone.txt` not found under DIR"
            ),
            "{e}"
        );
    }

    #[test]
    fn paths_may_not_leave_the_folder() {
        let e = err(
            "{\"question\": \"Q?\", \"files\": [\"../x.txt\"], \"answer\": \"A\"}\n",
            &[],
        );
        assert!(
            e.contains("files[0]: `../x.txt` leaves the test data's folder"),
            "{e}"
        );
        let e = err(
            "{\"question\": \"Q?\", \"files\": [\"/etc/hostname\"], \"answer\": \"A\"}\n",
            &[],
        );
        assert!(e.contains("is absolute"), "{e}");
        // `a/../b.txt` stays inside and is fine.
        let (dir, path) = setup(
            "{\"question\": \"Q?\", \"files\": [\"a/../b.txt\"], \"answer\": \"A\"}\n",
            &[("b.txt", "b"), ("a/keep", "")],
        );
        assert_eq!(
            load_cases(&path, dir.path()).unwrap().cases[0].context[0].text,
            "b"
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_of_the_folder_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
        let (dir, path) = setup(
            "{\"question\": \"Q?\", \"files\": [\"link.txt\"], \"answer\": \"A\"}\n",
            &[],
        );
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            dir.path().join("link.txt"),
        )
        .unwrap();
        let e = load_cases(&path, dir.path()).unwrap_err().to_string();
        assert!(e.contains("leads outside the test data's folder"), "{e}");
    }

    #[test]
    fn empty_file_is_an_error() {
        let e = err("\n  \n", &[]);
        assert!(e.starts_with("DIR/test_cases.jsonl: no test cases"), "{e}");
    }

    #[test]
    fn a_missing_jsonl_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = load_cases(&dir.path().join("nope.jsonl"), dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope.jsonl: cannot read test cases"), "{e}");
    }

    #[test]
    fn relative_paths() {
        assert_eq!(
            check_relative("a/./c/../b.txt").unwrap(),
            Path::new("a/b.txt")
        );
        assert!(check_relative("./a.txt").is_ok());
        assert!(check_relative("a/../../b").is_err());
        assert!(check_relative(".").is_err());
        assert!(check_relative("").is_err());
    }
}
