//! Issue 44: products as functions. A Python function (`target = "python:…"`) and a
//! JavaScript one (`target = "node:…"`) served by long-lived workers give the verdicts the
//! same product gives behind the command target; a worker killed mid-run fails only what it
//! held; `pytest -k` and `pytest -n` call the product once per selected case; `assay init
//! --template rag` runs green with no key; `assay run --list`, `--test` (repeated) and
//! `--tests-from` select cases; `assay check` is the assertions library outside a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::pytest_plugin::{pytest, python, testcases};
use crate::support::{Scratch, assay, repo_path};

/// A case the helpdesk fails (it never says it is closed on Sundays), beside the template's
/// four that pass.
const FAILING: &str = r#"{"test_id": "HD-5", "name": "Says when it is closed",
  "message": "Is the workshop open on a Sunday?", "user_state": {"user_type": "CUSTOMER"},
  "assert": [{"type": "icontains", "value": "closed on sundays"}, {"type": "icontains", "value": "no"}]}"#;

/// A project from `assay init --template rag`, with the failing case added and the product's
/// calls counted in `calls.log` (one line per call: the question).
pub(crate) fn rag_project() -> Scratch {
    let scratch = Scratch::empty();
    let out = assay(&[
        "init",
        scratch.root().to_str().unwrap(),
        "--template",
        "rag",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let bank = "test_banks/answer/helpdesk.json";
    let mut json = scratch.json(bank);
    json["tests"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::from_str(FAILING).unwrap());
    scratch.write_json(bank, &json);
    // Every call is logged, so the tests count them.
    scratch.edit(
        "helpdesk/bot.py",
        "def answer(question, context, user_state):\n",
        "def answer(question, context, user_state):\n    with open(\"calls.log\", \"a\") as log:\n        log.write(question + \"\\n\")\n",
    );
    scratch
}

fn calls(scratch: &Scratch) -> Vec<String> {
    std::fs::read_to_string(scratch.path("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The answer cases a RunLog says failed.
pub(crate) fn failed_ids(log: &Value) -> Vec<String> {
    verdicts(log)
        .into_iter()
        .filter(|(_, v)| v.0)
        .map(|(id, _)| id)
        .collect()
}

/// Each case's verdict, score and failures from a RunLog.
fn verdicts(log: &Value) -> BTreeMap<String, (bool, Value, Value)> {
    log["answer"]["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no answer results: {log}"))
        .iter()
        .map(|c| {
            (
                c["test_id"].as_str().unwrap().to_owned(),
                (
                    c["is_hard_fail"].as_bool().unwrap_or(false),
                    c["score"].clone(),
                    c["failures"].clone(),
                ),
            )
        })
        .collect()
}

/// A virtual environment (no pip) with `package_root` installed in it (a `.pth` file, as an
/// editable install leaves): its Python.
fn venv_with(dir: &Path, package_root: &Path) -> PathBuf {
    let env = dir.join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&env)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let site = Command::new(env.join("bin/python"))
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ])
        .output()
        .unwrap();
    let site = PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
    std::fs::write(
        site.join("helpdesk.pth"),
        format!("{}\n", package_root.display()),
    )
    .unwrap();
    env.join("bin/python")
}

#[test]
fn a_python_function_gives_the_verdicts_of_the_same_product_behind_a_command() {
    let scratch = rag_project();
    // The function lives in an installed package, not in the project.
    let elsewhere = tempfile::tempdir().unwrap();
    let packages = elsewhere.path().join("src");
    std::fs::create_dir_all(&packages).unwrap();
    std::fs::rename(scratch.path("helpdesk"), packages.join("helpdesk")).unwrap();
    let venv_python = venv_with(elsewhere.path(), &packages);
    let py = venv_python.to_str().unwrap();

    let worker = scratch.assay_env(&["run", "--json", "--no-save"], &[("ASSAY_PYTHON", py)]);
    // HD-5 fails; one failed case of five leaves the gate passed (exit 0).
    assert_eq!(worker.code, 0, "{worker:?}");
    let by_worker = verdicts(&worker.json());
    assert_eq!(by_worker.len(), 5);
    assert!(by_worker["HD-5"].0, "HD-5 fails: {by_worker:?}");
    assert!(
        by_worker
            .iter()
            .filter(|(id, _)| *id != "HD-5")
            .all(|(_, v)| !v.0),
        "{by_worker:?}"
    );
    assert_eq!(calls(&scratch).len(), 5, "one call per case");
    assert!(
        worker.json()["setup"]["answer"]
            .as_str()
            .unwrap()
            .contains("python:helpdesk.bot:answer"),
        "{}",
        worker.json()["setup"]
    );

    // pytest on the same project: an item per case, failing exactly where the run failed.
    if let Some(pytest_python) = python() {
        let junit = scratch.path("pytest.xml");
        let out = pytest(
            &pytest_python,
            scratch.root(),
            &["-q", "--junitxml", junit.to_str().unwrap()],
            &[("ASSAY_PYTHON", py)],
        );
        assert_eq!(out.code, 1, "HD-5's item fails: {out:?}");
        let items = testcases(&std::fs::read_to_string(&junit).unwrap());
        let failed: BTreeMap<String, bool> = items
            .iter()
            .filter(|c| c.name.starts_with("HD-"))
            .map(|c| (c.name.clone(), c.outcome == "failure"))
            .collect();
        let expected: BTreeMap<String, bool> =
            by_worker.iter().map(|(id, v)| (id.clone(), v.0)).collect();
        assert_eq!(failed, expected, "{items:?}");
    }

    // The same function behind the command target: a script that reads the request on stdin.
    scratch.write(
        "adapter.py",
        "import json, sys\nfrom helpdesk.bot import answer\nreq = json.load(sys.stdin)\nif req.get('dry_run'):\n    import hashlib\n    print(json.dumps({'prompt_sha256': {k: hashlib.sha256(v.encode()).hexdigest() for k, v in req['prompts'].items()}}))\n    sys.exit(0)\nout = answer(req['question'], req.get('context', []), req.get('user_state', {}))\nprint(json.dumps(out if isinstance(out, dict) else {'final_answer': out}))\n",
    );
    scratch.edit(
        "assay.toml",
        "target = \"python:helpdesk.bot:answer\"",
        &format!("target = \"command\"\ncommand = [\"{py}\", \"adapter.py\"]"),
    );
    let command = scratch.assay(&["run", "--json", "--no-save"]);
    assert_eq!(command.code, worker.code, "{command:?}");
    assert_eq!(verdicts(&command.json()), by_worker);
}

#[test]
fn a_worker_killed_mid_run_fails_only_the_request_it_held() {
    let scratch = rag_project();
    // The Sunday question kills the worker's own process, as `kill -9` would.
    scratch.edit(
        "helpdesk/bot.py",
        "    asked = question.lower()\n",
        "    asked = question.lower()\n    if \"sunday\" in asked:\n        import os, signal, sys\n        sys.stderr.write(\"about to be killed\\n\")\n        sys.stderr.flush()\n        os.kill(os.getpid(), signal.SIGKILL)\n",
    );
    let out = scratch.assay(&["run", "--json", "--no-save"]);
    assert_eq!(
        out.code, 3,
        "an error keeps the run from a verdict: {out:?}"
    );
    let log = out.json();
    let results = log["answer"]["results"].as_array().unwrap();
    let errored: Vec<&Value> = results.iter().filter(|c| c["error"].is_string()).collect();
    assert_eq!(errored.len(), 1, "{results:?}");
    let error = errored[0]["error"].as_str().unwrap();
    assert_eq!(errored[0]["test_id"], "HD-5");
    assert!(
        error.contains("python:helpdesk.bot:answer") && error.contains("it exited"),
        "{error}"
    );
    assert!(error.contains("about to be killed"), "stderr kept: {error}");
    // Every other case was scored, by a worker started again after the death.
    let scored: Vec<&str> = results
        .iter()
        .filter(|c| c["error"].is_null())
        .map(|c| c["test_id"].as_str().unwrap())
        .collect();
    assert_eq!(scored.len(), 4, "{scored:?}");
    assert!(
        results
            .iter()
            .filter(|c| c["error"].is_null())
            .all(|c| c["score"] == 100)
    );
}

#[test]
fn pytest_selects_before_running_and_xdist_runs_each_case_once() {
    let Some(python) = python() else { return };
    let scratch = rag_project();
    let root = scratch.root().to_str().unwrap();

    // -k: the one selected case is the only product call.
    let out = pytest(
        &python,
        scratch.root(),
        &["--assay", root, "-k", "HD-2", "-q"],
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        calls(&scratch),
        ["How much is it to fix a puncture in my tyre?"]
    );
    assert!(out.stdout.contains("1 passed"), "{}", out.stdout);

    // The failing case alone; its failure shows the assertion and the reply's start.
    std::fs::remove_file(scratch.path("calls.log")).unwrap();
    let junit = scratch.path("pytest.xml");
    let out = pytest(
        &python,
        scratch.root(),
        &[
            "--assay",
            root,
            "-k",
            "HD-5",
            "--junitxml",
            junit.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(calls(&scratch).len(), 1);
    let items = testcases(&std::fs::read_to_string(&junit).unwrap());
    let failed: Vec<_> = items.iter().filter(|c| c.outcome == "failure").collect();
    assert_eq!(failed.len(), 1, "{items:?}");
    let text = format!("{} {}", failed[0].message, failed[0].text);
    assert!(text.contains("failed `icontains \"no\"`"), "{text}");
    assert!(
        text.contains("workshop is open Tuesday to Saturday"),
        "the reply's start: {text}"
    );

    // -n 2: two workers, each runs a shard; every case is asked once, and the gate merges.
    std::fs::remove_file(scratch.path("calls.log")).unwrap();
    let out = pytest(
        &python,
        scratch.root(),
        &["--assay", root, "-n", "2", "-p", "xdist"],
        &[],
    );
    assert_eq!(out.code, 1, "HD-5 fails: {out:?}");
    let mut asked = calls(&scratch);
    asked.sort();
    let mut unique = asked.clone();
    unique.dedup();
    assert_eq!(asked.len(), 5, "each case once: {asked:?}");
    assert_eq!(unique.len(), 5, "{asked:?}");
    assert!(
        out.stdout.contains("1 failed, 5 passed"),
        "HD-5 fails; four cases and the merged gate pass: {}",
        out.stdout
    );
}

#[test]
fn assay_init_rag_runs_green_with_no_key_and_pytest_passes_on_it() {
    let scratch = Scratch::empty();
    let out = assay(&[
        "init",
        scratch.root().to_str().unwrap(),
        "--template",
        "rag",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("helpdesk/bot.py"), "{}", out.stdout);
    let keys = [
        ("ANTHROPIC_API_KEY", ""),
        ("OPENAI_API_KEY", ""),
        ("VOYAGE_API_KEY", ""),
    ];
    let run = scratch.assay_env(&["run"], &keys);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("4: 4 passed"), "{}", run.stdout);
    // A second init refuses to overwrite.
    let again = assay(&[
        "init",
        scratch.root().to_str().unwrap(),
        "--template",
        "rag",
    ]);
    assert_eq!(again.code, 2, "{again:?}");
    let Some(python) = python() else { return };
    // `pytest` alone: the template's pytest.ini names the project.
    let out = pytest(&python, scratch.root(), &["-q"], &keys);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("5 passed"),
        "four cases and the gate: {}",
        out.stdout
    );
}

/// The helpdesk in JavaScript: `answer` of bot.py, line for line, as an async function.
pub(crate) const BOT_JS: &str = r#"
const TOPICS = ["bike", "bicycle", "tyre", "puncture", "service", "open", "repair", "brake", "workshop"];
const words = (t) => new Set(t.toLowerCase().match(/[a-z0-9:]+/g) || []);
async function answer({ question, context }) {
  await new Promise((r) => setTimeout(r, 1));
  const asked = question.toLowerCase();
  if (!TOPICS.some((t) => asked.includes(t))) {
    return "I'm sorry, I can't help with that: I only answer questions about your bike and the workshop.";
  }
  if (asked.includes("book") && asked.includes("service")) {
    const slot = "Tuesday 9:00";
    return {
      final_answer: `Your bike is booked in for a service on ${slot}.`,
      tool_calls: [
        { name: "check_calendar", arguments: { week: "next" }, result: `${slot} is free` },
        { name: "book_service", arguments: { slot }, result: "booked" },
      ],
    };
  }
  const q = words(question);
  let best = null, score = -1;
  for (const c of context) {
    const n = [...words(c.text)].filter((w) => q.has(w)).length;
    if (n > score) { best = c; score = n; }
  }
  if (!best) return "I don't know: nothing in the workshop's notes covers that.";
  return { final_answer: best.text, contexts: [best] };
}
"#;

#[test]
fn a_javascript_async_function_gives_the_verdicts_of_the_python_one() {
    if Command::new("node").arg("--version").output().is_err() {
        if std::env::var_os("ASSAY_SKIP_NPM_TESTS").is_some() {
            return;
        }
        panic!("node is missing (set ASSAY_SKIP_NPM_TESTS to skip)");
    }
    let scratch = rag_project();
    let python = scratch.assay(&["run", "--json", "--no-save"]);
    let expected = verdicts(&python.json());
    // An ES module…
    scratch.write("bot.mjs", &format!("{BOT_JS}\nexport {{ answer }};\n"));
    scratch.edit(
        "assay.toml",
        "target = \"python:helpdesk.bot:answer\"",
        "target = \"node:./bot.mjs#answer\"",
    );
    let esm = scratch.assay(&["run", "--json", "--no-save"]);
    assert_eq!(esm.code, python.code, "{esm:?}");
    assert_eq!(verdicts(&esm.json()), expected);
    // …and CommonJS.
    scratch.write(
        "bot.cjs",
        &format!("{BOT_JS}\nmodule.exports = {{ answer }};\n"),
    );
    scratch.edit(
        "assay.toml",
        "node:./bot.mjs#answer",
        "node:./bot.cjs#answer",
    );
    let cjs = scratch.assay(&["run", "--json", "--no-save"]);
    assert_eq!(verdicts(&cjs.json()), expected, "{cjs:?}");
}

#[test]
fn the_node_workers_own_tests_pass() {
    if Command::new("node").arg("--version").output().is_err() {
        if std::env::var_os("ASSAY_SKIP_NPM_TESTS").is_some() {
            return;
        }
        panic!("node is missing (set ASSAY_SKIP_NPM_TESTS to skip)");
    }
    let out = Command::new("node")
        .arg("--test")
        .arg(repo_path("npm/assay-eval/test"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("# fail 0"), "{stdout}");
}

#[test]
fn list_test_and_tests_from_select_cases_without_running_them() {
    let scratch = rag_project();
    let list = scratch.assay(&["run", "--list"]);
    assert_eq!(list.code, 0, "{list:?}");
    assert_eq!(
        list.stdout,
        "answer::HD-1\nanswer::HD-2\nanswer::HD-3\nanswer::HD-4\nanswer::HD-5\n"
    );
    let json = scratch.assay(&[
        "run", "--list", "--json", "--test", "HD-3", "--test", "HD-1",
    ]);
    assert_eq!(json.json()["count"], 2, "{json:?}");
    assert_eq!(json.json()["cases"][0]["test_id"], "HD-1");
    assert!(calls(&scratch).is_empty(), "listing calls nothing");
    assert!(!scratch.path("results").exists(), "and writes nothing");

    scratch.write("ids.txt", "# the two we care about\nHD-2\n\nHD-4\n");
    let ids = scratch.path("ids.txt");
    let run = scratch.assay(&[
        "run",
        "--json",
        "--no-save",
        "--tests-from",
        ids.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    assert_eq!(log["filters"]["tests"], serde_json::json!(["HD-2", "HD-4"]));
    assert_eq!(calls(&scratch).len(), 2);

    let unknown = scratch.assay(&["run", "--test", "HD-1", "--test", "NOPE"]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(unknown.stderr.contains("`NOPE`"), "{}", unknown.stderr);
    assert_eq!(calls(&scratch).len(), 2, "nothing ran");
}

#[test]
fn assay_check_is_the_assertions_library_outside_a_run() {
    let scratch = Scratch::empty();
    scratch.write(
        "in.json",
        r#"{"reply": "Colour printing costs 50p a page.", "assert": [
            {"type": "contains", "value": "50p"},
            {"type": "not-icontains", "value": "free", "critical": true},
            {"type": "latency", "value": 100}]}"#,
    );
    let input = scratch.path("in.json");
    let out = assay(&["check", "--json", "--input", input.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:?}");
    let report = out.json();
    assert_eq!(report["passed"], true);
    assert_eq!(
        report["results"][2]["status"], "error",
        "no latency measured"
    );
    scratch.write(
        "bad.json",
        r#"{"reply": "x", "assert": [{"type": "contains"}]}"#,
    );
    let bad = scratch.path("bad.json");
    let out = assay(&["check", "--input", bad.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("assert[0].value"), "{}", out.stderr);

    // From Python, through this binary: the same outcome.
    let Some(python) = python() else { return };
    let got = Command::new(&python)
        .args([
            "-c",
            "import assay_eval, json\nr = assay_eval.check('It is free!', [{'type': 'contains', 'value': '50p'}])\nprint(json.dumps({'passed': r.passed, 'reasons': [x.reason for x in r.results]}))\nprint(assay_eval.__version__)",
        ])
        .env("PYTHONPATH", repo_path("python"))
        .env("ASSAY_BIN", env!("CARGO_BIN_EXE_assay"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&got.stdout);
    assert!(
        got.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&got.stderr)
    );
    let first: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["passed"], false);
    assert_eq!(first["reasons"][0], "no \"50p\"");
}
