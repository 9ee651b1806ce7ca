//! Issue 42: stale tracking that is complete. A generated case's provenance lists every entity
//! it names (the calibrator's secondaries too), so editing a secondary marks it stale, with
//! each changed field's old and new value; `--confirm` takes the latest run's word and refuses
//! a case that fails there; `--retire` takes an accepted case out of its bank with who and why.
//! Also: `--changed-since` selects answer cases by what their last run's contexts held.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::generate_provider::{Behaviour, Stats, router};
use crate::support::{Run, Scratch, assay, repo_path};

const MODEL: &str = "openai/scripted";
/// The entity the scripted calibrator proposes as every case's secondary.
const SECONDARY: &str = "compost_smell";

/// The garden fixture whose scripted calibrator adds [`SECONDARY`]; with no `[verdict]
/// pass_score`, every case that does not hard-fail passes (a missed secondary costs points, not
/// the verdict).
fn garden() -> Scratch {
    let behaviour = Behaviour {
        secondary: Some(SECONDARY),
        ..Behaviour::default()
    };
    let url = crate::support::serve(router(behaviour, Arc::new(Stats::default())));
    let scratch = Scratch::copy_of(&repo_path("crates/assay-cli/tests/fixtures/generate-kb"));
    let toml = scratch.read("assay.toml");
    scratch.write(
        "assay.toml",
        &format!("{toml}\n[providers]\nopenai_base_url = \"{url}/v1\"\nmax_retries = 0\n"),
    );
    scratch
}

fn run_json(p: &Scratch, args: &[&str]) -> Value {
    let mut full = vec!["run", "--banks", "semantic", "--json"];
    full.extend_from_slice(args);
    let run = p.assay(&full);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    run.json()
}

fn review(p: &Scratch, args: &[&str]) -> Run {
    let mut full = vec!["generate", "review"];
    full.extend_from_slice(args);
    p.assay(&full)
}

fn generated(p: &Scratch) -> Vec<Value> {
    p.json("test_banks/semantic/generated.json")["tests"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn issue_42_an_edited_secondary_makes_the_case_stale_a_failing_case_is_not_confirmed_and_retiring_removes_it()
 {
    let p = garden();
    // Three drafts for rain_barrels: the scripted third message is about the hose rota, so
    // retrieval gives it to another entity (a finding: the accepted case fails).
    let run = p.assay_env(
        &[
            "generate",
            "--model",
            MODEL,
            "--banks",
            "semantic",
            "--entities",
            "rain_barrels",
            "--per-entity",
            "3",
            "--json",
        ],
        &[("OPENAI_API_KEY", "test-key")],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let review_list = review(&p, &["--json"]);
    assert_eq!(review_list.code, 0, "{review_list:?}");
    let drafts: Vec<Value> = review_list.json()["entities"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["drafts"].as_array().unwrap().clone())
        .collect();
    assert_eq!(drafts.len(), 3, "{drafts:#?}");
    for d in &drafts {
        // The calibrator's secondary is named, and its version recorded.
        assert_eq!(d["case"]["expected_secondary"], json!([SECONDARY]), "{d:#}");
        assert_eq!(
            d["case"]["provenance"]["entity_versions"],
            json!({"rain_barrels": 1, SECONDARY: 1}),
            "{d:#}"
        );
    }
    let failing = drafts
        .iter()
        .find(|d| d["finding"]["kind"] == "overlap")
        .expect("the drifting message is a finding")["test_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = review(&p, &["--accept", "all-pending", "--by", "ana"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(generated(&p).len(), 3);

    // The secondary is edited; the next (saved) run lists every generated case as stale, with
    // the field's old and new value.
    let edit = assay(&[
        "kb",
        "update",
        SECONDARY,
        "--set",
        "guidance_dont=Do not add meat or dairy.",
        "--project",
        p.root.to_str().unwrap(),
    ]);
    assert_eq!(edit.code, 0, "{edit:?}");
    let log = run_json(&p, &[]);
    let total = log["summary"]["total_tests"].as_u64().unwrap();
    let stale = log["stale"].as_array().unwrap();
    assert_eq!(stale.len(), 3, "{stale:#?}");
    for s in stale {
        assert_eq!(
            s["entities"],
            json!([{"entity_id": SECONDARY, "since_version": 1, "current_version": 2,
                "fields": ["guidance_dont"],
                "changes": [{"field": "guidance_dont", "old": "null",
                    "new": "Do not add meat or dairy."}],
                "reference": "provenance"}]),
            "{s:#}"
        );
    }
    let results = &log["semantic"]["results"];
    let failed = results
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["test_id"] == failing.as_str())
        .unwrap();
    assert_eq!(failed["is_hard_fail"], true, "{failed:#}");
    // The saved report's stale table says old → new.
    let report = p
        .results()
        .into_iter()
        .find(|f| {
            f.starts_with("report_")
                && std::path::Path::new(f)
                    .extension()
                    .is_some_and(|e| e == "md")
        })
        .unwrap();
    let md = p.read(&format!("results/{report}"));
    assert!(
        md.contains("guidance_dont: null → Do not add meat or dairy."),
        "{md}"
    );

    // The failing case is not confirmed (named, nothing written); neither by all-stale.
    let before = p.read("test_banks/semantic/generated.json");
    for which in [failing.as_str(), "all-stale"] {
        let r = review(&p, &["--confirm", which, "--by", "ana"]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(
            r.stderr.contains(&format!("`{failing}` hard-fails")),
            "{}",
            r.stderr
        );
        assert_eq!(p.read("test_banks/semantic/generated.json"), before);
    }

    // Retired with a reason: out of the bank, recorded with who and why.
    let r = review(&p, &["--retire", &failing]);
    assert_eq!(r.code, 2, "--retire needs --reason: {r:?}");
    let r = review(
        &p,
        &[
            "--retire",
            &failing,
            "--reason",
            "the message drifted",
            "--by",
            "ana",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(&format!("retired 1 case: {failing}")),
        "{}",
        r.stdout
    );
    let left = generated(&p);
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|c| c["test_id"] != failing.as_str()));
    let history = p.read("test_banks/semantic/retired.jsonl");
    let line: Value = serde_json::from_str(history.lines().next().unwrap()).unwrap();
    assert_eq!(line["test_id"], failing.as_str());
    assert_eq!(line["retired_by"], "ana");
    assert_eq!(line["reason"], "the message drifted");
    assert_eq!(line["case"]["test_id"], failing.as_str());
    // Retiring it again, or a hand-written case: refused, naming it.
    let r = review(&p, &["--retire", &failing, "--reason", "again"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains(&failing), "{}", r.stderr);
    let hand = p.json("test_banks/semantic/garden_cases.json");
    let hand_id = hand["tests"][0]["test_id"].as_str().unwrap().to_owned();
    let r = review(&p, &["--retire", &hand_id, "--reason", "x"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("garden_cases.json"), "{}", r.stderr);

    // The run counts one case fewer.
    let after = run_json(&p, &[]);
    assert_eq!(after["summary"]["total_tests"].as_u64().unwrap(), total - 1);

    // The two left pass in the latest run, on today's knowledge base: confirmed, no longer
    // stale.
    let r = review(&p, &["--confirm", "all-stale", "--by", "ana"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("confirmed 2 cases"), "{}", r.stdout);
    for c in generated(&p) {
        let prov = &c["provenance"];
        assert_eq!(prov["entity_versions"][SECONDARY], 2, "{prov}");
        assert_eq!(prov["confirmed_by"], "ana", "{prov}");
    }
    let last = run_json(&p, &["--no-save"]);
    assert!(
        last["stale"].as_array().is_none_or(Vec::is_empty),
        "{}",
        last["stale"]
    );
}

#[test]
fn issue_42_a_confirmation_needs_a_run_on_the_knowledge_base_as_it_is_now() {
    let p = Scratch::example();
    let entity = "handler_returning_user";
    let hand = p.json("test_banks/state/state_handler_tests.json");
    let mut case = hand["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["expected_handlers"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h == entity))
        })
        .unwrap()
        .clone();
    case["test_id"] = json!("GEN-STATE-evidence-1");
    case["provenance"] = json!({"method": "boundary", "entity_id": entity,
        "entity_versions": {entity: 1}, "generated_at": "2026-11-28T00:00:00Z"});
    p.write_json(
        "test_banks/state/generated.json",
        &json!({"bank_type": "STATE", "version": "1.0", "tests": [case]}),
    );
    let state_run = |p: &Scratch| {
        let run = p.assay(&["run", "--banks", "state", "--json"]);
        assert_eq!(run.code, 0, "{run:?}");
    };
    let confirm =
        |p: &Scratch| p.assay(&["generate", "review", "--confirm", "GEN-STATE-evidence-1"]);
    // No saved run: nothing shows that it holds.
    let edit = assay(&[
        "kb",
        "update",
        entity,
        "--set",
        "priority=77",
        "--project",
        p.root.to_str().unwrap(),
    ]);
    assert_eq!(edit.code, 0, "{edit:?}");
    let r = confirm(&p);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no run is saved"), "{}", r.stderr);
    // A run, then another edit: the run saw an earlier version.
    state_run(&p);
    let edit = assay(&[
        "kb",
        "update",
        entity,
        "--set",
        "priority=78",
        "--project",
        p.root.to_str().unwrap(),
    ]);
    assert_eq!(edit.code, 0, "{edit:?}");
    let r = confirm(&p);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("ran on an earlier version of handler_returning_user"),
        "{}",
        r.stderr
    );
    // A run on the knowledge base as it is: confirmed, at version 3.
    state_run(&p);
    let r = confirm(&p);
    assert_eq!(r.code, 0, "{r:?}");
    let prov = &p.json("test_banks/state/generated.json")["tests"][0]["provenance"];
    assert_eq!(prov["entity_versions"][entity], 3, "{prov}");
}
