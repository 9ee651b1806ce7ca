//! The pytest plugin (`python/assay_eval/pytest_plugin.py`, docs/pytest.md) driving the real
//! binary: the real `pytest` of the test virtualenv, with `PYTHONPATH=python`,
//! `-p assay_eval.pytest_plugin` and `ASSAY_BIN` set to the binary cargo built. Items and their
//! outcomes are read from pytest's own `--junitxml` and set against what `assay run --junit`
//! says of the same project.
//!
//! The Python comes from `ASSAY_TEST_PYTHON` or `ASSAY_TEST_PYTHON_VENV` (default
//! `target/test-venv`, made by `scripts/ci-setup`). Without pytest there these tests fail with
//! that instruction, unless `ASSAY_SKIP_PYTHON_TESTS=1` says to skip them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::sim_provider::Behaviour;
use crate::support::{Run, Scratch, assay, repo_path};

pub(crate) fn python() -> Option<PathBuf> {
    let python = crate::support::test_python();
    let ok = Command::new(&python)
        .args(["-c", "import pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    if std::env::var("ASSAY_SKIP_PYTHON_TESTS").as_deref() == Ok("1") {
        eprintln!("skipped: no pytest at {}", python.display());
        return None;
    }
    panic!(
        "pytest is missing at {}: run scripts/ci-setup (or set ASSAY_TEST_PYTHON_VENV)",
        python.display()
    );
}

/// `python -m pytest -p assay_eval.pytest_plugin ARGS` in `cwd`, with the plugin from this
/// checkout and this build's binary. Entry points are not loaded (the wheel's test checks
/// that one); nothing is written into the checkout (no bytecode, no cache).
pub(crate) fn pytest(python: &Path, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(python)
        .args([
            "-m",
            "pytest",
            "-p",
            "assay_eval.pytest_plugin",
            "-p",
            "no:cacheprovider",
        ])
        .args(["--rootdir", cwd.to_str().unwrap()])
        .args(args)
        .current_dir(cwd)
        .env("PYTHONPATH", repo_path("python"))
        .env("ASSAY_BIN", env!("CARGO_BIN_EXE_assay"))
        .env("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("COLUMNS", "200")
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// One `<testcase>` of a JUnit XML file (assay's or pytest's).
#[derive(Debug, Clone)]
pub(crate) struct TestCase {
    pub(crate) classname: String,
    pub(crate) name: String,
    /// `passed`, `failure`, `error` or `skipped`.
    pub(crate) outcome: String,
    pub(crate) message: String,
    pub(crate) text: String,
}

fn unescape(text: &str) -> String {
    let numeric = regex::Regex::new(r"&#(\d+);").unwrap();
    let text = numeric.replace_all(text, |c: &regex::Captures| {
        char::from_u32(c[1].parse().unwrap()).unwrap().to_string()
    });
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

pub(crate) fn testcases(xml: &str) -> Vec<TestCase> {
    let case = regex::Regex::new(r"(?s)<testcase\s([^>]*?)(?:/>|>(.*?)</testcase>)").unwrap();
    let attr = regex::Regex::new(r#"(\w+)="([^"]*)""#).unwrap();
    let outcome =
        regex::Regex::new(r#"(?s)<(failure|error|skipped)(?:\s+message="([^"]*)")?[^>]*?(?:/>|>(.*?)</(?:failure|error|skipped)>)"#)
            .unwrap();
    case.captures_iter(xml)
        .map(|c| {
            let attrs: BTreeMap<&str, String> = attr
                .captures_iter(c.get(1).unwrap().as_str())
                .map(|a| (a.get(1).unwrap().as_str(), unescape(&a[2])))
                .collect();
            let body = c.get(2).map_or("", |b| b.as_str());
            let (outcome, message, text) = outcome.captures(body).map_or_else(
                || ("passed".to_owned(), String::new(), String::new()),
                |o| {
                    (
                        o[1].to_owned(),
                        o.get(2).map_or_else(String::new, |m| unescape(m.as_str())),
                        o.get(3).map_or_else(String::new, |t| unescape(t.as_str())),
                    )
                },
            );
            TestCase {
                classname: attrs.get("classname").cloned().unwrap_or_default(),
                name: attrs.get("name").cloned().unwrap_or_default(),
                outcome,
                message,
                text,
            }
        })
        .collect()
}

/// The cases each bank file of the project declares, per bank.
fn declared_cases(root: &Path) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for bank in ["semantic", "state", "pattern", "always"] {
        let mut n = 0;
        for entry in std::fs::read_dir(root.join("test_banks").join(bank)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let file: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                n += file["tests"].as_array().map_or(0, Vec::len);
            }
        }
        counts.insert(bank.to_owned(), n);
    }
    counts
}

fn workdir(p: &Scratch) -> &Path {
    p.root().parent().unwrap()
}

#[test]
fn every_case_is_an_item_with_assays_verdict_and_reason() {
    let Some(python) = python() else { return };
    let p = Scratch::example();
    let dir = workdir(&p);
    // What assay itself says of each case.
    let own_xml = dir.join("own.xml");
    let own = p.assay(&["run", "--no-save", "--junit", own_xml.to_str().unwrap()]);
    assert_eq!(own.code, 0, "{own:?}");
    let own = testcases(&std::fs::read_to_string(&own_xml).unwrap());

    let out = pytest(
        &python,
        dir,
        &["--assay", "project", "--junitxml", "pytest.xml", "-rfE"],
        &[],
    );
    // The cases assay fails (hard fails here) fail, though assay's gate passed.
    assert_eq!(out.code, 1, "{out:?}");
    let items = testcases(&std::fs::read_to_string(dir.join("pytest.xml")).unwrap());

    // One item per case of the project's banks, and the gate.
    let declared = declared_cases(p.root());
    for (bank, n) in &declared {
        let here = items
            .iter()
            .filter(|i| i.classname == format!("project.{bank}"))
            .count();
        assert_eq!(here, *n, "{bank}: {out:?}");
    }
    assert_eq!(items.len(), declared.values().sum::<usize>() + 1);
    assert_eq!(items.len(), own.len() + 1);
    let gate = items
        .iter()
        .find(|i| i.classname == "project" && i.name == "gate");
    assert_eq!(gate.unwrap().outcome, "passed", "{gate:?}");

    // Each item as assay judged it, a failing one with assay's reason.
    let mut failed = 0;
    for case in &own {
        let bank = case.classname.strip_prefix("assay.").unwrap();
        let id = case.name.split(": ").next().unwrap();
        let item = items
            .iter()
            .find(|i| i.classname == format!("project.{bank}") && i.name == id)
            .unwrap_or_else(|| panic!("no item for {bank}/{id}"));
        assert_eq!(item.outcome, case.outcome, "{bank}/{id}: {item:?}");
        if case.outcome == "failure" {
            failed += 1;
            assert!(item.message.contains(&case.message), "{item:?} vs {case:?}");
            for line in case.text.lines() {
                assert!(item.text.contains(line), "{line:?} missing from {item:?}");
            }
            assert!(
                out.stdout.contains(&format!(
                    "FAILED project::{bank}::{id} - Failed: {}",
                    case.message
                )),
                "{id}: {}",
                out.stdout
            );
        }
    }
    assert!(failed > 0, "the example has failing cases");
    assert!(
        out.stdout.contains(&format!(
            "{failed} failed, {} passed",
            own.len() - failed + 1
        )),
        "{}",
        out.stdout
    );
    // A hard fail reads as assay words it: the check that failed it, then what was selected.
    let hard = items
        .iter()
        .find(|i| i.name == "V2-CRI-001")
        .expect("the example's crisis case");
    assert!(
        hard.message
            .contains("expected primary entity missing: `handler_crisis`"),
        "{hard:?}"
    );
    assert!(hard.text.contains("selected: "), "{hard:?}");

    // -k selects by name; the project ran once for all of it.
    let one = pytest(
        &python,
        dir,
        &["--assay", "project", "-k", "STATE-001"],
        &[],
    );
    assert_eq!(one.code, 0, "{one:?}");
    assert!(one.stdout.contains("1 passed, "), "{}", one.stdout);
    assert_eq!(
        one.stdout.matches("assay run ").count(),
        1,
        "{}",
        one.stdout
    );
}

#[test]
fn a_failing_baseline_gate_fails_pytest_with_the_gates_verdict() {
    let Some(python) = python() else { return };
    let p = Scratch::example();
    let dir = workdir(&p);
    let gate_only = [
        "--assay",
        "project",
        "--assay-baseline",
        "accepted",
        "-m",
        "assay_gate",
    ];

    // Nothing accepted yet: the gate passes and assay's warning is in pytest's summary.
    let first = pytest(&python, dir, &gate_only, &[]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.stdout.contains("1 passed, "), "{}", first.stdout);
    assert!(
        first.stdout.contains("no run has been accepted yet"),
        "{}",
        first.stdout
    );
    let root = p.root().to_str().unwrap();
    let accept = assay(&["runs", "accept", "latest", "--by", "ci", "--project", root]);
    assert_eq!(accept.code, 0, "{accept:?}");

    // A knowledge-base edit breaks the cases that expect the welcome handler (one of the
    // wrong type, `{eq: "yes"}`, would not run at all: typed user state).
    p.edit(
        "kb/handlers.yaml",
        "is_first_conversation: {eq: true}",
        "is_first_conversation: {eq: false}",
    );
    let gate = pytest(&python, dir, &gate_only, &[]);
    assert_eq!(gate.code, 1, "{gate:?}");
    for words in [
        "FAILED project::gate - Failed: the run regressed against the baseline: state/STATE-001",
        "assay run exited 1: the quality gate failed",
        "regression gate: FAILED: 4 new hard fail(s): state/STATE-001",
        "knowledge base: entities 1 changed (handler_first_conversation)",
        "/project --baseline accepted: exit 1 (the quality gate failed)",
    ] {
        assert!(gate.stdout.contains(words), "{words:?}: {}", gate.stdout);
    }

    // The whole run: every item in pytest's JUnit XML, the gate among the failures.
    let all = pytest(
        &python,
        dir,
        &[
            "--assay",
            "project",
            "--assay-baseline",
            "accepted",
            "--junitxml",
            "all.xml",
        ],
        &[],
    );
    assert_eq!(all.code, 1, "{all:?}");
    let items = testcases(&std::fs::read_to_string(dir.join("all.xml")).unwrap());
    assert_eq!(
        items.len(),
        declared_cases(p.root()).values().sum::<usize>() + 1
    );
    let gate = items.iter().find(|i| i.name == "gate").unwrap();
    assert_eq!(gate.outcome, "failure", "{gate:?}");
    assert!(
        gate.text.contains("regression gate: FAILED")
            && gate
                .message
                .contains("the run regressed against the baseline"),
        "{gate:?}"
    );
    let broken = items.iter().find(|i| i.name == "STATE-001").unwrap();
    assert!(
        broken
            .message
            .contains("expected handler did not trigger: `handler_first_conversation`"),
        "{broken:?}"
    );
}

#[test]
fn a_project_assay_refuses_is_a_collection_error_with_its_words() {
    let Some(python) = python() else { return };
    let p = Scratch::example();
    let dir = workdir(&p);
    let refused = |args: &[&str], words: &str| {
        let out = pytest(&python, dir, args, &[]);
        // pytest's "interrupted": collection errors, nothing run.
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stdout.contains("ERROR collecting"), "{}", out.stdout);
        assert!(
            out.stdout.contains("assay exited 2 (bad input or usage)"),
            "{}",
            out.stdout
        );
        assert!(out.stdout.contains(words), "{words:?}: {}", out.stdout);
        assert!(!out.stdout.contains(" passed"), "{}", out.stdout);
    };
    refused(&["--assay", "missing"], "does not exist");
    refused(
        &["--assay", "project", "--assay-args", "--banks stat"],
        "unknown bank `stat`",
    );
    // A misspelt field in a bank: the words of assay's own error.
    p.edit(
        "test_banks/state/state_handler_tests.json",
        "\"expected_handlers\"",
        "\"expected_handler\"",
    );
    let direct = p.assay(&["run", "--no-save"]);
    assert_eq!(direct.code, 2, "{direct:?}");
    let words = direct
        .stderr
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("error: ");
    refused(&["--assay", "project"], words);
}

#[test]
fn simulation_runs_are_items_with_the_reports_verdicts() {
    let Some(python) = python() else { return };
    let provider = crate::simulate::provider(Behaviour::default());
    let scratch = crate::simulate::project(&provider);
    // The coach claims to log the chores without calling a tool: the state check fails it.
    let prompt = scratch.read("sim/prompts/coach_system_prompt.md");
    scratch.write(
        "sim/prompts/coach_system_prompt.md",
        &format!("{prompt}\nCLAIM_WITHOUT_TOOLS\n"),
    );
    let suite = scratch.read("sim/suite.yaml");
    scratch.write(
        "sim/suite.yaml",
        &suite.replace("gate:\n  min_mean_overall: 7.0\n  min_pass_rate: 0.8\n", ""),
    );
    let env = crate::simulate::env_with(&[]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let dir = workdir(&scratch);
    let out = pytest(
        &python,
        dir,
        &[
            "--assay",
            "project",
            "--assay-simulate",
            "--assay-simulate-args",
            "--model anthropic/coach-under-test --simulator-model anthropic/scout-sim \
             --evaluator-model anthropic/judge --scenarios daily_chore,off_topic --repeat 2",
            "--junitxml",
            "sim.xml",
        ],
        &env,
    );
    assert_eq!(out.code, 1, "{out:?}");
    let items = testcases(&std::fs::read_to_string(dir.join("sim.xml")).unwrap());
    let outcomes: Vec<(&str, &str, &str)> = items
        .iter()
        .map(|i| (i.classname.as_str(), i.name.as_str(), i.outcome.as_str()))
        .collect();
    // A simulation-only project (no test_banks/): its runs and its gate, no bank items.
    assert_eq!(
        outcomes,
        [
            ("project.sim", "daily_chore[1]", "failure"),
            ("project.sim", "daily_chore[2]", "failure"),
            ("project.sim", "off_topic[1]", "passed"),
            ("project.sim", "off_topic[2]", "passed"),
            ("project.sim", "gate", "failure"),
        ],
        "{out:?}"
    );
    let chore = &items[0];
    assert!(
        chore.message.contains(
            "FAIL (check): failed check `exactly the two chores Will did are logged for today` \
             (chores_today: length 0, expected 2)"
        ) && chore.message.contains("(the judge said pass)"),
        "{chore:?}"
    );
    assert!(
        items[4].text.contains(
            "gate (no `gate:` in the suite: every scored run must pass): FAILED (2 scored run(s) failed"
        ),
        "{:?}",
        items[4]
    );
    // The same report assay saved.
    let report: serde_json::Value =
        serde_json::from_str(&scratch.read("sim/reports/latest.json")).unwrap();
    assert_eq!(report["runs"].as_array().unwrap().len(), 4);
}

#[test]
fn the_plugins_python_tests_pass() {
    let Some(python) = python() else { return };
    let tests = repo_path("python/tests");
    let out = pytest(&python, &tests, &["-q", tests.to_str().unwrap()], &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(" passed"), "{}", out.stdout);
}
