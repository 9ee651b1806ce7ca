//! `assay generate review` and `assay generate coverage` on hand-written draft files, and the
//! boundary drafts of the state generator run as a bank.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::support::{Run, Scratch};

fn provenance(entity: &str, method: &str) -> Value {
    json!({"method": method, "entity_id": entity, "entity_versions": {entity: 1},
        "model": "scripted/m", "prompt_hash": "h-1", "generated_at": "2026-11-28T00:00:00Z"})
}

/// Draft files for two state cases, two pattern cases (one a finding) and two semantic cases.
fn write_drafts(p: &Scratch) {
    p.write_json(
        "test_banks/drafts/state/gen-1.json",
        &json!({"bank_type": "STATE", "generation": "gen-1", "created": "2026-11-28T00:00:00Z",
        "drafts": [
            {"case": {"test_id": "gen-st-1",
                "user_state": {"is_first_conversation": false, "days_since_last": 7},
                "expected_handlers": ["handler_returning_user"],
                "provenance": provenance("handler_returning_user", "boundary")}},
            {"case": {"test_id": "gen-st-2",
                "user_state": {"is_first_conversation": false, "days_since_last": 6},
                "expected_handlers": [], "not_expected_handlers": ["handler_returning_user"],
                "provenance": provenance("handler_returning_user", "boundary")}}
        ]}),
    );
    p.write_json(
        "test_banks/drafts/pattern/gen-1.json",
        &json!({"bank_type": "PATTERN", "generation": "gen-1", "created": "2026-11-28T00:00:00Z",
            "drafts": [
                {"case": {"test_id": "gen-pat-1", "prompt": "i want to end it all tonight",
                    "expected_matches": ["handler_crisis"], "pattern_type": "crisis",
                    "is_critical": true, "provenance": provenance("handler_crisis", "llm")}},
                {"case": {"test_id": "gen-pat-2", "prompt": "I can't go on like this anymore",
                    "expected_matches": ["handler_crisis"], "pattern_type": "crisis",
                    "is_critical": true, "provenance": provenance("handler_crisis", "llm")},
                 "finding": {"kind": "pattern_miss", "intended": "a crisis message",
                    "observed": [], "explanation": "the generator meant this as a crisis message; the crisis patterns miss it"}}
            ]}),
    );
    p.write_json(
        "test_banks/drafts/semantic/gen-1.json",
        &json!({"bank_type": "SEMANTIC", "generation": "gen-1", "created": "2026-11-28T00:00:00Z",
        "drafts": [
            {"case": {"test_id": "gen-sem-1", "prompt": "he texts me twenty times a day",
                "expected_primary": ["gray_rock"], "provenance": provenance("gray_rock", "llm")}},
            {"case": {"test_id": "gen-sem-2", "prompt": "what do I bring to court",
                "expected_primary": ["court_preparation"],
                "provenance": provenance("court_preparation", "llm")}}
        ]}),
    );
}

fn total_tests(p: &Scratch) -> u64 {
    let run = p.assay(&["run", "--banks", "state,pattern", "--json", "--no-save"]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    run.json()["summary"]["total_tests"].as_u64().unwrap()
}

fn review(p: &Scratch, args: &[&str]) -> Run {
    let mut full = vec!["generate", "review"];
    full.extend_from_slice(args);
    p.assay(&full)
}

fn tree(p: &Scratch) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for dir in [
        "test_banks/state",
        "test_banks/pattern",
        "test_banks/semantic",
        "test_banks/drafts/state",
        "test_banks/drafts/pattern",
        "test_banks/drafts/semantic",
    ] {
        for e in std::fs::read_dir(p.path(dir)).unwrap() {
            let path = e.unwrap().path();
            if path.is_file() {
                out.insert(
                    path.display().to_string(),
                    std::fs::read_to_string(&path).unwrap(),
                );
            }
        }
    }
    out
}

#[test]
fn accepted_drafts_join_the_run_with_their_provenance() {
    let p = Scratch::example();
    write_drafts(&p);
    let before = total_tests(&p);

    // The list: by entity, the finding first with its intent.
    let list = review(&p, &[]);
    assert_eq!(list.code, 0, "{list:?}");
    assert!(
        list.stdout
            .starts_with("drafts: 6 pending (1 finding), 0 accepted, 0 rejected"),
        "{list:?}"
    );
    let crisis = list
        .stdout
        .find("handler_crisis (2 drafts, 1 finding)")
        .unwrap();
    let finding = list.stdout.find("gen-pat-2").unwrap();
    assert!(finding > crisis && finding < list.stdout.find("gen-pat-1").unwrap());
    assert!(list.stdout.contains("FINDING pattern_miss"), "{list:?}");
    insta::assert_snapshot!("generate_review_list", list.stdout);
    let json = review(&p, &["--json"]).json();
    assert_eq!(json["counts"]["pending"], 6);
    assert_eq!(json["entities"][1]["entity_id"], "gray_rock");

    let accept = review(
        &p,
        &[
            "--accept",
            "gen-st-1,gen-st-2,gen-pat-2,gen-sem-1",
            "--by",
            "ana",
        ],
    );
    assert_eq!(accept.code, 0, "{accept:?}");
    assert!(accept.stdout.starts_with("accepted 4 drafts"), "{accept:?}");
    insta::assert_snapshot!("generate_review_accept", accept.stdout);
    let reject = review(
        &p,
        &[
            "--reject",
            "gen-pat-1",
            "--reason",
            "duplicate of PAT-CRISIS-001",
        ],
    );
    assert_eq!(reject.code, 0, "{reject:?}");
    let edit = review(
        &p,
        &[
            "--edit",
            "gen-sem-2",
            "--set",
            "prompt=what should I bring to the hearing",
        ],
    );
    assert_eq!(edit.code, 0, "{edit:?}");

    // The run counts the three accepted state and pattern cases.
    assert_eq!(total_tests(&p), before + 3);
    let bank = p.json("test_banks/state/generated.json");
    assert_eq!(bank["bank_type"], "STATE");
    let prov = &bank["tests"][0]["provenance"];
    assert_eq!(
        (
            &prov["method"],
            &prov["accepted_by"],
            &prov["entity_versions"]
        ),
        (
            &json!("boundary"),
            &json!("ana"),
            &json!({"handler_returning_user": 1})
        )
    );
    let semantic = p.json("test_banks/semantic/generated.json");
    assert_eq!(semantic["tests"][0]["test_id"], "gen-sem-1");
    assert_eq!(semantic["tests"][0]["provenance"]["prompt_hash"], "h-1");

    let drafts = p.json("test_banks/drafts/pattern/gen-1.json");
    assert_eq!(drafts["drafts"][0]["status"], "rejected");
    assert_eq!(drafts["drafts"][0]["note"], "duplicate of PAT-CRISIS-001");
    assert_eq!(drafts["drafts"][1]["status"], "accepted");
    assert_eq!(
        drafts["drafts"][1]["accepted_into"],
        "test_banks/pattern/generated.json"
    );
    let sem = p.json("test_banks/drafts/semantic/gen-1.json");
    assert_eq!(
        sem["drafts"][1]["case"]["prompt"],
        "what should I bring to the hearing"
    );
    assert_eq!(sem["drafts"][1]["status"], "pending");

    let after = review(&p, &["--json"]).json();
    assert_eq!(
        after["counts"],
        json!({"pending": 1, "findings": 0, "accepted": 4, "rejected": 1})
    );
}

#[test]
fn a_colliding_or_unknown_id_is_refused_and_nothing_is_written() {
    let p = Scratch::example();
    write_drafts(&p);
    // A draft whose id a hand-written case already has.
    p.edit(
        "test_banks/drafts/state/gen-1.json",
        "gen-st-2",
        "STATE-001",
    );
    let files = tree(&p);
    let run = review(&p, &["--accept", "gen-st-1,STATE-001"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("`STATE-001`"), "{run:?}");
    assert!(run.stderr.contains("nothing was written"), "{run:?}");
    assert_eq!(tree(&p), files);
    assert!(!p.path("test_banks/state/generated.json").exists());

    let run = review(&p, &["--accept", "gen-nope"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("`gen-nope`"), "{run:?}");
    let run = review(
        &p,
        &[
            "--edit",
            "gen-sem-1",
            "--set",
            "expected_primary=[\"no_such\"]",
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("no_such"), "{run:?}");
    let run = review(&p, &["--edit", "gen-sem-1", "--set", "colour=red"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("colour"), "{run:?}");
    assert_eq!(tree(&p), files);
}

#[test]
fn coverage_lists_what_no_case_tests() {
    let p = Scratch::example();
    // Remove the only state cases that name the clinician handler.
    let mut bank = p.json("test_banks/state/state_handler_tests.json");
    let tests = bank["tests"].as_array_mut().unwrap();
    let names_clinician = |t: &Value| t.to_string().contains("handler_clinician_mode");
    let removed = tests.iter().filter(|t| names_clinician(t)).count();
    assert!(removed > 0);
    tests.retain(|t| !names_clinician(t));
    p.write_json("test_banks/state/state_handler_tests.json", &bank);

    // And every semantic case that names court_preparation.
    let mut semantic = p.json("test_banks/semantic/parent_test_bank.json");
    semantic["tests"]
        .as_array_mut()
        .unwrap()
        .retain(|t| !t.to_string().contains("\"court_preparation\""));
    p.write_json("test_banks/semantic/parent_test_bank.json", &semantic);

    let run = p.assay(&["generate", "coverage", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let c = run.json();
    assert_eq!(
        c["handlers_without_state"],
        json!(["handler_clinician_mode"])
    );
    let clinician = c["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["entity_id"] == "handler_clinician_mode")
        .unwrap();
    assert_eq!(clinician["state"], 0);
    // Independently: no remaining semantic case expects a listed entity.
    let listed = c["situations_without_semantic"].as_array().unwrap();
    assert!(listed.contains(&json!("court_preparation")), "{listed:?}");
    for id in listed {
        for t in semantic["tests"].as_array().unwrap() {
            for key in ["expected_primary", "expected_secondary"] {
                let ids = t[key].as_array().cloned().unwrap_or_default();
                assert!(!ids.contains(id), "{id} is expected by {}", t["test_id"]);
            }
        }
    }
    assert_eq!(c["rules_without_pattern"][0]["rule"], "keyword_boosts[9]");
    let text = p.assay(&["generate", "coverage"]);
    assert!(
        text.stdout
            .contains("STATE handlers without a state case: 1 (handler_clinician_mode)"),
        "{text:?}"
    );
    insta::assert_snapshot!("generate_coverage", text.stdout);

    // A pending boundary draft covers it only with --include-drafts.
    p.write_json(
        "test_banks/drafts/state/gen-1.json",
        &json!({"bank_type": "STATE", "generation": "gen-1", "created": "2026-11-28T00:00:00Z",
            "drafts": [{"case": {"test_id": "gen-st-9", "user_state": {"user_type": "PARENT"},
                "expected_handlers": [], "not_expected_handlers": ["handler_clinician_mode"],
                "provenance": provenance("handler_clinician_mode", "boundary")}}]}),
    );
    let without = p.assay(&["generate", "coverage", "--json"]).json();
    assert_eq!(
        without["handlers_without_state"],
        json!(["handler_clinician_mode"])
    );
    let with = p
        .assay(&["generate", "coverage", "--include-drafts", "--json"])
        .json();
    assert_eq!(with["handlers_without_state"], json!([]));
}

#[test]
fn boundary_drafts_pass_as_a_bank_on_correct_handlers() {
    let p = Scratch::example();
    let project = assay_project::project::Project::load(p.root()).unwrap();
    let versions: BTreeMap<String, u32> = project
        .kb
        .kb
        .entities()
        .iter()
        .map(|e| (e.entity_id.clone(), 1))
        .collect();
    let schema =
        project
            .settings
            .state
            .clone()
            .with_audiences(assay_project::typed_state::audiences(
                project.kb.kb.entities(),
            ));
    let cases = assay_generate::state::boundary_cases(
        &schema,
        project.kb.kb.entities(),
        &versions,
        "gen-1",
        "2026-11-28T00:00:00Z",
    );
    // Six handlers with conditions in the example: every one gets a case on each side.
    let handlers: std::collections::BTreeSet<&str> = cases
        .iter()
        .filter_map(|c| c.provenance.as_ref()?.entity_id.as_deref())
        .collect();
    assert_eq!(handlers.len(), 6, "{handlers:?}");
    p.write_json(
        "test_banks/state/boundary.json",
        &json!({"bank_type": "STATE", "version": "1.0", "tests": cases}),
    );
    let run = p.assay(&["run", "--banks", "state", "--json", "--no-save"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    let results = log["state"]["results"].as_array().unwrap();
    let generated: Vec<&Value> = results
        .iter()
        .filter(|r| r["test_id"].as_str().unwrap().starts_with("GEN-STATE-"))
        .collect();
    assert_eq!(generated.len(), cases.len());
    for r in generated {
        assert_eq!(r["score"], 100, "{r}");
    }
}
