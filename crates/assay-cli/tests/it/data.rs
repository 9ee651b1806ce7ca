//! `assay data …`: the optimizer's versioned test data, on a scratch copy of
//! examples/gaia-mini.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{Run, Scratch, assay, repo_path};

fn gaia() -> Scratch {
    Scratch::copy_of(&repo_path("examples/gaia-mini"))
}

fn data(p: &Scratch, args: &[&str]) -> Run {
    let mut full = vec!["data", "--project", p.root.to_str().unwrap()];
    full.extend_from_slice(args);
    assay(&full)
}

/// Every file under `dir` with its contents, for "nothing was written" checks. The lock file
/// `.assay/lock` is left out: a command takes the project lock before it can refuse, and the
/// (empty) lock file stays for the next one; its holder description `.assay/lock.json` is
/// listed and must be gone again.
pub fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.ends_with(".assay/lock") {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_owned(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

/// Replaces the scratch folder, creation times and backup stamps so snapshots are stable.
pub fn redact(text: &str, root: &Path) -> String {
    redact_times(&text.replace(root.to_str().unwrap(), "[PROJECT]"))
}

/// The redaction without a regex crate: RFC 3339 seconds and backup stamps.
fn redact_times(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let digit = |b: u8| b.is_ascii_digit();
    let shape = |s: &[u8], pat: &str| {
        s.len() >= pat.len()
            && pat
                .bytes()
                .zip(s)
                .all(|(p, &c)| if p == b'9' { digit(c) } else { p == c })
    };
    while i < bytes.len() {
        let rest = &bytes[i..];
        if shape(rest, "9999-99-99T99:99:99Z") {
            out.push_str("[TIME]");
            i += 20;
        } else if shape(rest, "9999-99-99T999999Z") {
            out.push_str("[STAMP]");
            i += 18;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// A source folder for a new version, outside the project.
fn source(dir: &Path, jsonl: &str, files: &[(&str, &str)]) -> PathBuf {
    let src = dir.join("new_data");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("test_cases.jsonl"), jsonl).unwrap();
    for (name, text) in files {
        let p = src.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    src
}

const NEW_CASES: &str = "{\"question\": \"What is the capital of Peru?\", \"files\": [], \"answer\": \"Lima\"}\n\
{\"question\": \"How many legs has the spider in the note?\", \"files\": [\"context_files/note.txt\"], \"answer\": \"8\"}\n";

/// Runs `assay <group> --project P <args>`, which must be refused as bad input (exit 2, a
/// clear error, no panic) leaving the project as it was.
pub fn refused_in(p: &Scratch, group: &str, args: &[&str]) -> Run {
    let before = tree(&p.root);
    let mut full = vec![group, "--project", p.root.to_str().unwrap()];
    full.extend_from_slice(args);
    let run = assay(&full);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.starts_with("error: "), "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
    assert_eq!(tree(&p.root), before, "the project changed: {run:?}");
    run
}

fn refused(p: &Scratch, args: &[&str]) -> Run {
    refused_in(p, "data", args)
}

/// `create-version` of `kind`/`version` from `src`.
fn create_args<'a>(kind: &'a str, version: &'a str, src: &'a Path) -> Vec<&'a str> {
    vec![
        "create-version",
        "--type",
        kind,
        "--version",
        version,
        "--description",
        "Two more questions",
        "--source-dir",
        src.to_str().unwrap(),
    ]
}

#[test]
fn list_create_and_set_latest() {
    let p = gaia();
    let list = data(&p, &["list-versions"]);
    assert_eq!(list.code, 0, "{list:?}");
    insta::assert_snapshot!("data_list_versions", redact(&list.stdout, &p.root));

    let tmp = tempfile::tempdir().unwrap();
    let src = source(
        tmp.path(),
        NEW_CASES,
        &[
            ("context_files/note.txt", "A spider has eight legs."),
            ("notes.md", "not copied"),
        ],
    );
    let made = data(&p, &create_args("optimization", "v1.1.0", &src));
    assert_eq!(made.code, 0, "{made:?}");
    insta::assert_snapshot!("data_create_version", redact(&made.stdout, &p.root));
    assert!(
        p.path("test_data/optimization/v1.1.0/context_files/note.txt")
            .is_file()
    );
    assert!(!p.path("test_data/optimization/v1.1.0/notes.md").exists());
    assert!(
        !p.path(".assay/lock.json").exists(),
        "the lock's description is gone after the run"
    );

    let set = data(&p, &["set-latest", "--optimization-version", "v1.1.0"]);
    assert_eq!(set.code, 0, "{set:?}");
    assert_eq!(
        set.stdout,
        "latest optimization: v1.1.0\nlatest evaluation: v1.0.0\n"
    );

    let json = data(&p, &["list-versions", "--json"]).json();
    assert_eq!(json["latest_optimization"], "v1.1.0");
    assert_eq!(json["latest_evaluation"], "v1.0.0");
    let rows = json["versions"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1]["version"], "v1.1.0");
    assert_eq!(rows[1]["latest"], true);
    assert_eq!(rows[1]["cases"], 2);
    assert_eq!(rows[1]["fingerprint"].as_str().unwrap().len(), 64);
    // The seed's keys are in versions.json itself.
    let file = p.json("test_data/versions.json");
    assert_eq!(
        file["versions"]["optimization"]["v1.1.0"]["description"],
        "Two more questions"
    );
}

#[test]
fn a_version_that_exists_is_refused() {
    let p = gaia();
    let tmp = tempfile::tempdir().unwrap();
    let src = source(
        tmp.path(),
        NEW_CASES,
        &[("context_files/note.txt", "eight")],
    );
    let run = refused(&p, &create_args("evaluation", "v1.0.0", &src));
    assert!(
        run.stderr
            .contains("evaluation version `v1.0.0` already exists"),
        "{run:?}"
    );
}

#[test]
fn bad_jsonl_names_file_and_line() {
    let p = gaia();
    let tmp = tempfile::tempdir().unwrap();
    let src = source(
        tmp.path(),
        "{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\"}\n{\"question\": \"Q2?\", \"files\": [],}\n",
        &[],
    );
    let run = refused(&p, &create_args("optimization", "v2", &src));
    assert!(
        run.stderr.contains("new_data/test_cases.jsonl:2:"),
        "{run:?}"
    );
}

#[test]
fn a_line_with_text_after_its_case_is_refused_not_cut_short() {
    // Issue 22: these lines loaded as one case each, silently dropping what followed.
    let p = gaia();
    let case = "{\"question\": \"Q?\", \"files\": [], \"answer\": \"A\"}";
    for (second, column) in [
        (format!("{case}{case}"), 47),
        (format!("{case} garbage"), 48),
        (format!("{case},"), 47),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let src = source(tmp.path(), &format!("{case}\n{second}\n"), &[]);
        let run = refused(&p, &create_args("optimization", "v2", &src));
        assert!(
            run.stderr.contains(&format!(
                "new_data/test_cases.jsonl:2:{column}: unexpected text after the JSON value"
            )),
            "{second}: {run:?}"
        );
    }
}

#[test]
fn missing_field_names_file_line_and_field() {
    let p = gaia();
    let tmp = tempfile::tempdir().unwrap();
    let src = source(
        tmp.path(),
        "{\"question\": \"Q?\", \"answer\": \"A\"}\n",
        &[],
    );
    let run = refused(&p, &create_args("optimization", "v2", &src));
    assert!(
        run.stderr.contains("new_data/test_cases.jsonl:1:")
            && run.stderr.contains("missing field `files`"),
        "{run:?}"
    );
}

#[test]
fn a_missing_context_file_names_line_and_entry() {
    let p = gaia();
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), NEW_CASES, &[]);
    let run = refused(&p, &create_args("optimization", "v2", &src));
    assert!(
        run.stderr.contains(
            "new_data/test_cases.jsonl:2: files[0]: context file `context_files/note.txt` not found"
        ),
        "{run:?}"
    );
}

#[test]
fn a_version_that_does_not_exist_lists_the_known_ones() {
    let p = gaia();
    let run = refused(&p, &["set-latest", "--evaluation-version", "v9.9.9"]);
    assert!(
        run.stderr.contains(
            "--evaluation-version: evaluation version `v9.9.9` does not exist (known evaluation versions: v1.0.0)"
        ),
        "{run:?}"
    );
    let run = refused(&p, &["set-latest"]);
    assert!(run.stderr.contains("required"), "{run:?}");
}

#[test]
fn a_held_lock_refuses_changes_and_names_the_holder() {
    let p = gaia();
    let lock =
        assay_project::lock::ProjectLock::acquire(&p.root, "optimize", "assay optimize gaia")
            .unwrap();
    let run = refused(&p, &["set-latest", "--evaluation-version", "v1.0.0"]);
    assert!(
        run.stderr.contains(&format!(
            "optimize (pid {}, started {}, command: assay optimize gaia)",
            std::process::id(),
            lock.holder().started
        )),
        "{run:?}"
    );
    // Reading is not refused.
    assert_eq!(data(&p, &["list-versions"]).code, 0);
    drop(lock);
    let ok = data(&p, &["set-latest", "--evaluation-version", "v1.0.0"]);
    assert_eq!(ok.code, 0, "{ok:?}");
}
