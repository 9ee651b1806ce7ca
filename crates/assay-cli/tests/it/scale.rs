//! A run too large to list whole (issue 20): the saved RunLog keeps a bounded list of the worst
//! cases per bank, every case goes to the run log `results/cases_<stamp>.jsonl`, and the
//! readers (the JUnit report, `--baseline`, `assay runs diff`) read every case from there.

use std::collections::BTreeSet;

use crate::support::{Scratch, assay};

/// Cases in the grown state bank: above the 5,000 a RunLog lists whole.
const CASES: usize = 6_000;

/// Replaces the example's state bank with `count` cases (its own, repeated under new ids);
/// every 1,000th (from the first) expects a handler its user state cannot trigger, so it
/// hard-fails. Returns the ids of those.
pub(crate) fn grow_state_bank_to(p: &Scratch, count: usize) -> Vec<String> {
    let rel = "test_banks/state/state_handler_tests.json";
    let mut bank = p.json(rel);
    let cases = bank["tests"].as_array().unwrap().clone();
    let mut grown = Vec::with_capacity(count);
    let mut broken = Vec::new();
    for i in 0..count {
        let id = format!("S-{i:05}");
        let mut case = if i % 1_000 == 0 {
            // STATE-001's first conversation never triggers the clinician handler.
            let mut c = cases[0].clone();
            c["expected_handlers"] = serde_json::json!(["handler_clinician_mode"]);
            c["not_expected_handlers"] = serde_json::json!([]);
            broken.push(id.clone());
            c
        } else {
            cases[i % cases.len()].clone()
        };
        case["test_id"] = id.into();
        grown.push(case);
    }
    bank["tests"] = grown.into();
    p.write_json(rel, &bank);
    broken
}

fn grow_state_bank(p: &Scratch) -> Vec<String> {
    grow_state_bank_to(p, CASES)
}

/// The saved RunLogs (`results_*.json`), in the order they were written.
pub(crate) fn saved(p: &Scratch) -> Vec<String> {
    let mut names: Vec<String> = p
        .results()
        .into_iter()
        .filter(|n| {
            let p = std::path::Path::new(n);
            n.starts_with("results_") && p.extension().is_some_and(|e| e == "json")
        })
        .collect();
    names.sort_by_key(|n| {
        let id = n.trim_start_matches("results_").trim_end_matches(".json");
        let k: u32 = id.get(16..).and_then(|k| k.parse().ok()).unwrap_or(1);
        (id.get(..15).unwrap_or(id).to_owned(), k)
    });
    names
}

#[test]
fn a_large_run_lists_the_worst_and_streams_every_case_to_its_run_log() {
    let p = Scratch::example();
    let broken = grow_state_bank(&p);

    let run = p.assay(&["run", "--banks", "state"]);
    assert_eq!(
        run.code, 0,
        "6 hard fails in 6,000 keep the health GOOD: {run:?}"
    );
    // The console stays a summary: the failures are counted and grouped, not listed one by one.
    assert!(
        run.stdout.lines().count() < 60,
        "the console lists cases one by one:\n{}",
        run.stdout
    );

    let names = saved(&p);
    assert_eq!(names.len(), 1, "{:?}", p.results());
    let log = p.json(&format!("results/{}", names[0]));
    assert_eq!(log["schema_version"], 4);
    assert_eq!(log["summary"]["total_tests"], CASES);
    assert_eq!(log["summary"]["hard_fail_count"], broken.len());
    assert_eq!(log["notable"]["complete"], false, "{}", log["notable"]);
    let listed = log["state"]["results"].as_array().unwrap();
    assert!(listed.len() <= 100, "{} cases listed", listed.len());
    let listed_ids: BTreeSet<&str> = listed
        .iter()
        .map(|c| c["test_id"].as_str().unwrap())
        .collect();
    for id in &broken {
        assert!(
            listed_ids.contains(id.as_str()),
            "{id} (a hard fail) is not among the listed worst cases"
        );
    }
    // Small: the summary does not grow with the cases.
    let size = std::fs::metadata(p.path(&format!("results/{}", names[0])))
        .unwrap()
        .len();
    assert!(size < 400_000, "the RunLog is {size} bytes");

    // Every case is in the run log, once, after a header naming the run.
    let file = log["cases"]["file"].as_str().unwrap();
    assert_eq!(log["cases"]["count"], CASES);
    assert!(
        file.starts_with("cases_")
            && std::path::Path::new(file)
                .extension()
                .is_some_and(|e| e == "jsonl"),
        "{file}"
    );
    let text = p.read(&format!("results/{file}"));
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["run_id"], log["run_id"]);
    let mut ids = BTreeSet::new();
    for line in lines {
        let case: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(case["bank"], "state", "{line}");
        let id = case["result"]["test_id"].as_str().unwrap().to_owned();
        assert!(ids.insert(id.clone()), "{id} twice in the run log");
    }
    assert_eq!(ids.len(), CASES);

    // The same project again, against the first run: nothing changed, and the JUnit report,
    // read from the new run's log, has every case with the broken ones failing.
    let junit = p.path("ci/junit.xml");
    let again = p.assay(&[
        "run",
        "--banks",
        "state",
        "--baseline",
        "latest",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("no change"), "{}", again.stdout);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(
        xml.matches("<testcase ").count(),
        CASES,
        "JUnit misses cases"
    );
    for id in &broken {
        let at = xml.find(&format!("name=\"{id}")).unwrap();
        let case = &xml[at..at + xml[at..].find("</testcase>").unwrap()];
        assert!(case.contains("<failure"), "{id} passes in JUnit: {case}");
    }

    // One case broken more (S-02500 expects the clinician handler too) and one fixed (S-01000
    // gets its expectation back): the gate fails naming exactly the new hard fail, read from
    // both runs' logs.
    let rel = "test_banks/state/state_handler_tests.json";
    let mut bank = p.json(rel);
    bank["tests"][1_000]["expected_handlers"] = serde_json::json!(["handler_first_conversation"]);
    bank["tests"][2_500]["expected_handlers"] = serde_json::json!(["handler_clinician_mode"]);
    bank["tests"][2_500]["not_expected_handlers"] = serde_json::json!([]);
    p.write_json(rel, &bank);
    let third = p.assay(&["run", "--banks", "state", "--baseline", "latest"]);
    assert_eq!(
        third.code, 1,
        "a new hard fail fails the regression gate: {third:?}"
    );
    assert!(
        third
            .stdout
            .contains("1 new hard fail(s): state/S-02500 (no_new_hard_fails)"),
        "the new hard fail is not named:\n{}",
        third.stdout
    );
    assert!(
        third.stdout.contains("1 hard fail(s) fixed"),
        "{}",
        third.stdout
    );

    let names = saved(&p);
    assert_eq!(names.len(), 3, "{:?}", p.results());
    let root = p.root.to_str().unwrap().to_owned();
    let id = |n: &str| {
        n.trim_start_matches("results_")
            .trim_end_matches(".json")
            .to_owned()
    };
    let (before, after) = (id(&names[1]), id(&names[2]));
    let diff = assay(&["runs", "diff", &before, &after, "--project", &root]);
    assert!(diff.code == 0 || diff.code == 1, "{diff:?}");
    assert!(diff.stdout.contains("S-02500"), "{}", diff.stdout);
    assert!(
        !diff.stdout.contains("S-02000"),
        "an unchanged case is reported:\n{}",
        diff.stdout
    );
    // As JSON, every case of both runs, read from their logs.
    let json = assay(&[
        "runs",
        "diff",
        &before,
        &after,
        "--project",
        &root,
        "--json",
    ]);
    assert_eq!(json.code, diff.code, "{json:?}");
    let text = json.stdout;
    for id in ["S-00001", "S-01000", "S-02500", "S-05999"] {
        assert!(text.contains(id), "{id} missing from the JSON diff");
    }
}

#[test]
fn an_unsaved_large_run_prints_every_case_with_json() {
    let p = Scratch::example();
    grow_state_bank(&p);
    let run = p.assay(&["run", "--banks", "state", "--no-save", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    assert_eq!(log["state"]["results"].as_array().unwrap().len(), CASES);
    assert!(log.get("cases").is_none(), "an unsaved run has no run log");
    assert!(p.results().is_empty(), "--no-save wrote {:?}", p.results());
}
