//! The CI recipes in docs/ci/ run here, as far as this machine allows: every shell step of the
//! GitHub Actions workflow and of the GitLab CI pipeline, in order, on copies of a project
//! (one per machine), with `pip install assay-eval==…` answered by the wheel the packaging
//! test builds (no index, no Rust toolchain on PATH), artifacts carried from the shard jobs to
//! the merge job as the CI systems carry them. The merged run must gate against the committed
//! accepted baseline: pass on the project as it is, fail (exit 1) once a state condition is
//! broken.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{Scratch, copy_dir, repo_path};

fn recipe(name: &str) -> Value {
    let text = std::fs::read_to_string(repo_path(&format!("docs/ci/{name}"))).unwrap();
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("docs/ci/{name}: {e}"))
}

/// A project as a CI checkout sees it: its files and its committed accepted baseline, none
/// of the runs or state a developer's machine accumulates.
fn checkout(broken: bool) -> Scratch {
    let p = Scratch::example();
    let run = p.assay(&["run"]);
    assert_eq!(run.code, 0, "{run:?}");
    let root = p.root().display().to_string();
    let accept = crate::support::assay(&["runs", "accept", "latest", "--project", root.as_str()]);
    assert_eq!(accept.code, 0, "{accept:?}");
    for dir in ["results", ".assay"] {
        std::fs::remove_dir_all(p.path(dir)).unwrap();
    }
    if broken {
        // The first-conversation handler no longer triggers: state cases hard-fail.
        p.edit(
            "kb/handlers.yaml",
            "is_first_conversation: {eq: true}",
            "is_first_conversation: {eq: false}",
        );
    }
    p
}

/// What a CI machine has: Python in a virtual environment of its own (the setup-python step),
/// and no Rust toolchain.
struct Machine {
    venv: PathBuf,
    dist: PathBuf,
}

impl Machine {
    /// `None` where the packaging tests are skipped (no wheel to install).
    fn new(scratch: &Path) -> Option<Machine> {
        let dist = crate::packaging::dist()?.to_owned();
        let venv = scratch.join("venv");
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(made.success(), "python3 -m venv failed");
        Some(Machine { venv, dist })
    }

    /// Runs one shell step in `dir`; returns its exit code and output.
    fn sh(&self, dir: &Path, script: &str, env: &BTreeMap<String, String>) -> (i32, String) {
        let path = format!("{}:/usr/bin:/bin", self.venv.join("bin").display());
        let out = Command::new("bash")
            .args(["-eo", "pipefail", "-c", script])
            .current_dir(dir)
            .env_clear()
            .env("PATH", path)
            .env("HOME", dir)
            .env("NO_COLOR", "1")
            // `pip install assay-eval==…` from the wheel just built: no index to reach.
            .env("PIP_NO_INDEX", "1")
            .env("PIP_FIND_LINKS", &self.dist)
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .envs(env)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            format!(
                "$ {script}\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
}

/// `${{ matrix.x }}` replaced by its value; any other expression is one this test does not
/// know how to run (a recipe change this test must follow).
fn expand(text: &str, matrix: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${{") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find("}}").expect("an unclosed ${{") + at;
        let expr = rest[at + 3..end].trim();
        match expr.strip_prefix("matrix.").and_then(|k| matrix.get(k)) {
            Some(v) => out.push_str(v),
            None if expr.starts_with("hashFiles(") || expr == "!cancelled()" => {
                out.push_str("expr");
            }
            None => panic!("the recipe uses `{expr}`, which this test cannot evaluate"),
        }
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

fn env_of(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// Runs the GitHub Actions workflow; returns the merge step's exit code and the merge job's
/// folder.
fn github_actions(broken: bool) -> Option<(i32, tempfile::TempDir)> {
    let workflow = recipe("github-actions.yml");
    let scratch = tempfile::tempdir().unwrap();
    let machine = Machine::new(scratch.path())?;
    let source = checkout(broken);
    let env = env_of(&workflow["env"]);
    let artifacts = scratch.path().join("artifacts");
    let jobs = workflow["jobs"].as_object().unwrap();
    assert_eq!(
        jobs.keys().collect::<Vec<_>>(),
        ["shard", "merge"],
        "the test runs these two jobs"
    );
    assert_eq!(jobs["merge"]["needs"], "shard");
    let mut merge_code = None;
    for (job, spec) in jobs {
        let matrix = &spec["strategy"]["matrix"];
        let runs: Vec<BTreeMap<String, String>> = match matrix.as_object() {
            Some(m) => {
                assert_eq!(m.len(), 1, "one matrix dimension");
                let (k, values) = m.iter().next().unwrap();
                values
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| BTreeMap::from([(k.clone(), v.to_string())]))
                    .collect()
            }
            None => vec![BTreeMap::new()],
        };
        if job == "shard" {
            assert_eq!(runs.len().to_string(), env["SHARDS"], "one job per shard");
        }
        for (n, m) in runs.iter().enumerate() {
            let dir = scratch.path().join(format!("{job}-{n}"));
            for step in spec["steps"].as_array().unwrap() {
                if let Some(script) = step["run"].as_str() {
                    let (code, log) = machine.sh(&dir, &expand(script, m), &env);
                    if job == "merge" && script.contains("runs merge") {
                        merge_code = Some(code);
                        if code != 0 {
                            // The job stops here; the upload steps still run (`!cancelled()`).
                            eprintln!("{log}");
                            continue;
                        }
                    }
                    assert_eq!(code, 0, "{job} {m:?}: {log}");
                    continue;
                }
                let uses = step["uses"].as_str().expect("a step runs or uses");
                let with = &step["with"];
                match uses.split('@').next().unwrap() {
                    "actions/checkout" => copy_dir(source.root(), &dir),
                    "actions/setup-python" | "actions/cache" => {}
                    "actions/upload-artifact" => {
                        let name = expand(with["name"].as_str().unwrap(), m);
                        let path = dir.join(expand(with["path"].as_str().unwrap(), m));
                        if merge_code.is_some_and(|c| c != 0) && !path.exists() {
                            continue;
                        }
                        assert!(path.exists(), "{job}: nothing at {}", path.display());
                        let to = artifacts.join(&name);
                        if path.is_dir() {
                            copy_dir(&path, &to);
                        } else {
                            std::fs::create_dir_all(&to).unwrap();
                            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
                        }
                    }
                    "actions/download-artifact" => {
                        let prefix = with["pattern"].as_str().unwrap().trim_end_matches('*');
                        let into = dir.join(with["path"].as_str().unwrap());
                        let mut found = 0;
                        for a in std::fs::read_dir(&artifacts).unwrap() {
                            let a = a.unwrap();
                            let name = a.file_name().to_string_lossy().into_owned();
                            if name.starts_with(prefix) {
                                copy_dir(&a.path(), &into.join(&name));
                                found += 1;
                            }
                        }
                        assert_eq!(found.to_string(), env["SHARDS"], "every shard's results");
                    }
                    other => panic!("the recipe uses {other}, which this test does not emulate"),
                }
            }
        }
    }
    // The published artifacts: JUnit and the merged run's report.
    assert!(artifacts.join("assay-junit/junit.xml").is_file());
    let report = std::fs::read_dir(artifacts.join("assay-report"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("report_"))
                && p.extension().is_some_and(|e| e == "html")
        })
        .count();
    assert_eq!(report, 1, "one merged HTML report");
    Some((merge_code.expect("the merge step ran"), scratch))
}

#[test]
fn the_github_actions_recipe_shards_merges_and_gates() {
    let Some((code, scratch)) = github_actions(false) else {
        return;
    };
    assert_eq!(
        code, 0,
        "the merged run passes its gate against the accepted baseline"
    );
    let results = scratch.path().join("merge-0/results");
    let merged: Vec<Value> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("results_"))
        })
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0]["merged"]["count"], 4);
    assert_eq!(merged[0]["baseline"]["gate"]["passed"], true);
    let junit =
        std::fs::read_to_string(scratch.path().join("artifacts/assay-junit/junit.xml")).unwrap();
    assert_eq!(
        junit.matches("<testcase ").count(),
        merged[0]["summary"]["total_tests"].as_u64().unwrap() as usize,
        "JUnit has every case of the whole suite"
    );

    // A regression fails the pipeline at the merge.
    let (code, _scratch) = github_actions(true).expect("packaged above");
    assert_eq!(code, 1, "the broken suite must fail the merge job's gate");
}

#[test]
fn the_gitlab_ci_recipe_shards_merges_and_gates() {
    let pipeline = recipe("gitlab-ci.yml");
    let scratch = tempfile::tempdir().unwrap();
    let Some(machine) = Machine::new(scratch.path()) else {
        return;
    };
    let source = checkout(false);
    let variables = env_of(&pipeline["variables"]);
    let shard = &pipeline["assay-shard"];
    let merge = &pipeline["assay-merge"];
    assert_eq!(merge["needs"][0], "assay-shard");
    let total = shard["parallel"].as_u64().unwrap();
    let with_ci = |dir: &Path, extra: &[(&str, String)]| {
        let mut env = BTreeMap::new();
        env.insert("CI_PROJECT_DIR".to_owned(), dir.display().to_string());
        for (k, v) in extra {
            env.insert((*k).to_owned(), v.clone());
        }
        for (k, v) in &variables {
            env.insert(
                k.clone(),
                v.replace("$CI_PROJECT_DIR", &dir.display().to_string()),
            );
        }
        env
    };
    let artifacts = scratch.path().join("artifacts");
    for i in 1..=total {
        let dir = scratch.path().join(format!("shard-job-{i}"));
        copy_dir(source.root(), &dir);
        let env = with_ci(
            &dir,
            &[
                ("CI_NODE_INDEX", i.to_string()),
                ("CI_NODE_TOTAL", total.to_string()),
            ],
        );
        for line in shard["script"].as_array().unwrap() {
            let (code, log) = machine.sh(&dir, line.as_str().unwrap(), &env);
            assert_eq!(code, 0, "shard {i}: {log}");
        }
        // `artifacts: paths` (globs of folders ending in /), kept for the jobs that need them.
        for pattern in shard["artifacts"]["paths"].as_array().unwrap() {
            let prefix = pattern
                .as_str()
                .unwrap()
                .trim_end_matches('/')
                .trim_end_matches('*');
            for e in std::fs::read_dir(&dir).unwrap() {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(prefix) && e.path().is_dir() {
                    copy_dir(&e.path(), &artifacts.join(&name));
                }
            }
        }
    }
    // The merge job: a fresh checkout with every needed job's artifacts extracted into it.
    let dir = scratch.path().join("merge-job");
    copy_dir(source.root(), &dir);
    copy_dir(&artifacts, &dir);
    let env = with_ci(&dir, &[]);
    for line in merge["script"].as_array().unwrap() {
        let (code, log) = machine.sh(&dir, line.as_str().unwrap(), &env);
        assert_eq!(code, 0, "merge: {log}");
    }
    assert_eq!(merge["artifacts"]["reports"]["junit"], "junit.xml");
    assert!(dir.join("junit.xml").is_file());
    let merged = std::fs::read_dir(dir.join("results"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("results_")
        })
        .count();
    assert_eq!(merged, 1, "the merged run is saved");
}

#[test]
fn the_recipes_install_this_version() {
    for (name, key) in [
        ("github-actions.yml", "env"),
        ("gitlab-ci.yml", "variables"),
    ] {
        let r = recipe(name);
        assert_eq!(
            r[key]["ASSAY_VERSION"],
            env!("CARGO_PKG_VERSION"),
            "docs/ci/{name}: ASSAY_VERSION is not this crate's version"
        );
    }
}
