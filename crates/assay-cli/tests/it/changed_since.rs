//! Keeping up with the knowledge base (issue 28): `assay run --changed-since RUN` runs only the
//! cases that name an entity edited since that run; a case whose entity was edited since the
//! version its provenance records is listed as stale in the RunLog and the report; `assay run
//! --include-drafts` runs the pending drafts, which a plain run never reads.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::support::{Scratch, assay};

/// `assay kb ARGS --project <p>`, expected to succeed.
fn kb(p: &Scratch, args: &[&str]) -> String {
    let mut full = vec!["kb"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--project", p.root.to_str().unwrap()]);
    let run = assay(&full);
    assert_eq!(run.code, 0, "{args:?}: {run:?}");
    run.stdout
}

/// The test cases of a bank file (a bare list or `{"tests": [...]}`).
fn cases(p: &Scratch, rel: &str) -> Vec<Value> {
    let v = p.json(rel);
    v.get("tests")
        .and_then(Value::as_array)
        .or_else(|| v.as_array())
        .cloned()
        .unwrap_or_default()
}

fn strings(case: &Value, field: &str) -> Vec<String> {
    case.get(field)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The `(bank, test_id)` of every case that names `entity` in an expectation field, and every
/// always case of one of `audiences`: read from the bank files here, apart from assay's code.
fn naming(p: &Scratch, entity: &str, audiences: &[String]) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let id = |c: &Value| c["test_id"].as_str().unwrap().to_owned();
    let names = |c: &Value, fields: &[&str]| {
        fields
            .iter()
            .any(|f| strings(c, f).iter().any(|e| e == entity))
    };
    for c in cases(p, "test_banks/semantic/parent_test_bank.json") {
        let ranked = c
            .get("rank_check")
            .and_then(Value::as_array)
            .is_some_and(|r| {
                r.iter()
                    .any(|r| r["higher"] == entity || r["lower"] == entity)
            });
        if ranked
            || names(
                &c,
                &["expected_primary", "expected_secondary", "not_expected"],
            )
        {
            out.insert(("semantic".to_owned(), id(&c)));
        }
    }
    for c in cases(p, "test_banks/state/state_handler_tests.json") {
        if names(&c, &["expected_handlers", "not_expected_handlers"]) {
            out.insert(("state".to_owned(), id(&c)));
        }
    }
    for c in cases(p, "test_banks/pattern/pattern_tests.json") {
        if names(
            &c,
            &[
                "expected_matches",
                "expected_secondary",
                "not_expected_matches",
            ],
        ) {
            out.insert(("pattern".to_owned(), id(&c)));
        }
    }
    for c in cases(p, "test_banks/always/always_load_tests.json") {
        let audience = c["user_type"].as_str().unwrap_or_default();
        if names(&c, &["expected_always"]) || audiences.iter().any(|a| a == audience) {
            out.insert(("always".to_owned(), id(&c)));
        }
    }
    out
}

/// Every case result of a RunLog, by `(bank, test_id)`.
fn results(log: &Value) -> BTreeMap<(String, String), Value> {
    let mut out = BTreeMap::new();
    for bank in ["semantic", "state", "pattern", "always"] {
        for r in log[bank]["results"].as_array().into_iter().flatten() {
            let id = r["test_id"].as_str().unwrap().to_owned();
            // How long a case took measures its run, not its result.
            out.insert((bank.to_owned(), id), crate::support::timeless(r.clone()));
        }
    }
    out
}

/// The number of cases in the example's four bank files.
fn all_cases(p: &Scratch) -> usize {
    [
        "test_banks/semantic/parent_test_bank.json",
        "test_banks/state/state_handler_tests.json",
        "test_banks/pattern/pattern_tests.json",
        "test_banks/always/always_load_tests.json",
    ]
    .iter()
    .map(|f| cases(p, f).len())
    .sum()
}

#[test]
fn changed_since_runs_exactly_the_cases_naming_the_edited_entity_and_matches_a_full_run() {
    let p = Scratch::example();
    let first = p.assay(&["run"]);
    assert_eq!(first.code, 0, "{first:?}");
    let first_id = p
        .results()
        .into_iter()
        .find_map(|n| {
            Some(
                n.strip_prefix("results_")?
                    .strip_suffix(".json")?
                    .to_owned(),
            )
        })
        .unwrap();

    // Nothing edited yet: nothing runs, and that is no failure.
    let nothing = p.assay(&["run", "--changed-since", "latest"]);
    assert_eq!(nothing.code, 0, "{nothing:?}");
    assert!(
        nothing.stdout.contains("nothing changed since latest"),
        "{nothing:?}"
    );
    let quiet = p.assay(&["run", "--changed-since", "latest", "--json"]);
    assert_eq!(quiet.code, 0, "{quiet:?}");
    let quiet = quiet.json();
    assert_eq!(quiet["changed_since"]["ran"], 0, "{quiet}");
    assert_eq!(quiet["changed_since"]["skipped"], all_cases(&p), "{quiet}");
    assert_eq!(quiet["changed_since"]["entities"], json!([]), "{quiet}");
    let saved_before = p.results().len();
    assert_eq!(saved_before, 3, "a run of nothing saves nothing");

    let entity = "gray_rock";
    let shown: Value =
        serde_json::from_str(&kb(&p, &["show", entity, "--json"])).expect("kb show --json");
    let audiences = strings(&shown, "audience_types");
    assert!(!audiences.is_empty(), "{shown}");
    let edited = kb(
        &p,
        &[
            "update",
            entity,
            "--set",
            "concept_summary=Answer baiting with short, dull, factual replies.",
        ],
    );
    assert!(edited.contains("changed: concept_summary"), "{edited}");

    let expected = naming(&p, entity, &audiences);
    assert!(
        ["semantic", "pattern", "always"]
            .iter()
            .all(|b| expected.iter().any(|(bank, _)| bank == b)),
        "the edit should reach several banks: {expected:?}"
    );

    let changed = p.assay(&["run", "--changed-since", "latest", "--json"]);
    assert_eq!(changed.code, 0, "{changed:?}");
    assert_eq!(
        p.results().len(),
        saved_before + 3,
        "a changed-since run is saved"
    );
    let log = changed.json();
    let ran = results(&log);
    assert_eq!(
        ran.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "the cases run are exactly those naming {entity}, and the always cases of its audiences"
    );
    // The RunLog says it is partial: which run, which entities, how many ran and were skipped.
    let filters = &log["filters"]["changed_since"];
    assert_eq!(filters["reference"], "latest");
    assert_eq!(filters["entities"], json!([entity]));
    assert_eq!(filters["entity_count"], 1);
    assert_eq!(filters["ran"], expected.len());
    assert_eq!(filters["skipped"], all_cases(&p) - expected.len());
    assert_eq!(log["summary"]["total_tests"], expected.len());

    // The console says so too (the first run by its id: `latest` is now the run just made,
    // whose knowledge base has the edit).
    let text = p.assay(&["run", "--changed-since", &first_id, "--no-save"]);
    assert_eq!(text.code, 0, "{text:?}");
    let line = format!(
        "ran {} cases that name them, skipped {}",
        expected.len(),
        all_cases(&p) - expected.len()
    );
    assert!(text.stdout.contains(&line), "{line:?} in {text:?}");
    assert!(text.stdout.contains("1 entity (gray_rock)"), "{text:?}");

    // Each case's result is the one a full run gives it.
    let full = p.assay(&["run", "--json", "--no-save"]);
    assert_eq!(full.code, 0, "{full:?}");
    let whole = results(&full.json());
    assert_eq!(whole.len(), all_cases(&p));
    for (key, result) in &ran {
        assert_eq!(Some(result), whole.get(key), "{key:?}");
    }
}

#[test]
fn a_case_whose_provenance_names_an_edited_entity_is_stale_with_the_changed_fields() {
    let p = Scratch::example();
    let entity = "handler_returning_user";
    let bank = "test_banks/state/state_handler_tests.json";
    // A state case drafted from version 1 of the handler (and accepted into the bank).
    let mut file = p.json(bank);
    let tests = file["tests"].as_array_mut().unwrap();
    let index = tests
        .iter()
        .position(|c| strings(c, "expected_handlers").iter().any(|h| h == entity))
        .expect("a case expecting the handler");
    let test_id = tests[index]["test_id"].as_str().unwrap().to_owned();
    tests[index]["provenance"] = json!({
        "method": "boundary",
        "entity_id": entity,
        "entity_versions": {entity: 1},
        "generated_at": "2026-11-28T00:00:00Z"
    });
    p.write_json(bank, &file);

    // Before any edit the case is current: no stale list.
    let before = p.assay(&["run", "--json"]);
    assert_eq!(before.code, 0, "{before:?}");
    assert!(before.json().get("stale").is_none(), "{}", before.stdout);
    let saved_before = p.results();

    let handlers: Vec<Value> = serde_norway::from_str(&p.read("kb/handlers.yaml")).unwrap();
    let keywords_then = handlers.iter().find(|e| e["entity_id"] == entity).unwrap()["keywords"]
        .as_str()
        .unwrap()
        .to_owned();
    kb(&p, &["update", entity, "--set", "priority=77"]);
    kb(
        &p,
        &["update", entity, "--set", "keywords=[\"welcome back\"]"],
    );

    // No semantic case names the handler: a changed-since run of that bank runs nothing.
    let none = p.assay(&["run", "--changed-since", "latest", "--banks", "semantic"]);
    assert_eq!(none.code, 0, "{none:?}");
    assert!(
        none.stdout.contains("1 entity (handler_returning_user)")
            && none
                .stdout
                .contains("no case of the selected banks names it"),
        "{none:?}"
    );
    assert_eq!(p.results(), saved_before, "nothing saved");

    let run = p.assay(&["run", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    let stale = log["stale"].as_array().expect("a stale list");
    assert_eq!(stale.len(), 1, "{stale:?}");
    // Each changed field's value then and now (issue 42), long text clipped to 80 characters.
    let mut listed = stale[0].clone();
    let changes = listed["entities"][0]
        .as_object_mut()
        .unwrap()
        .remove("changes")
        .expect("the changed values");
    let keywords_old = changes[0]["old"].as_str().unwrap();
    assert!(
        keywords_old.ends_with('…') && keywords_old.chars().count() <= 80,
        "{keywords_old}"
    );
    assert!(
        keywords_then.starts_with(keywords_old.trim_end_matches('…')),
        "{keywords_old} / {keywords_then}"
    );
    assert_eq!(
        changes,
        json!([
            {"field": "keywords", "old": keywords_old, "new": "[\"welcome back\"]"},
            {"field": "priority", "old": "70", "new": "77"}
        ])
    );
    assert_eq!(
        listed,
        json!({
            "bank": "state",
            "test_id": test_id,
            "entities": [{
                "entity_id": entity,
                "since_version": 1,
                "current_version": 3,
                "fields": ["keywords", "priority"],
                "reference": "provenance"
            }]
        })
    );

    // The Markdown report shows it, with the fields.
    let report = p
        .results()
        .into_iter()
        .find(|n| {
            !saved_before.contains(n)
                && n.starts_with("report_")
                && std::path::Path::new(n)
                    .extension()
                    .is_some_and(|e| e == "md")
        })
        .unwrap();
    let md = p.read(&format!("results/{report}"));
    let section = &md[md.find("## Stale cases").expect("a Stale cases section")..];
    let row = format!(
        "| `{test_id}` | state | `{entity}` | v1 → v3 | keywords: {keywords_old} → [\"welcome back\"]; priority: 70 → 77 | provenance |"
    );
    assert!(section.contains(&row), "{row:?} in\n{section}");

    // And the console, in one line.
    let text = p.assay(&["run", "--no-save"]);
    assert!(
        text.stdout.contains("1 case is stale") && text.stdout.contains(&test_id),
        "{text:?}"
    );

    // A case without provenance is compared with the accepted run: once one is accepted, an
    // edit of an entity it names makes it stale, with the version the accepted run had.
    let accept = assay(&[
        "runs",
        "accept",
        "latest",
        "--project",
        p.root.to_str().unwrap(),
    ]);
    assert_eq!(accept.code, 0, "{accept:?}");
    kb(
        &p,
        &[
            "update",
            "gray_rock",
            "--set",
            "concept_summary=Stay brief.",
        ],
    );
    let run = p.assay(&["run", "--json", "--no-save"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    let stale = log["stale"].as_array().expect("a stale list");
    let gray = stale
        .iter()
        .find(|c| c["test_id"] == "V2-GR-001")
        .expect("V2-GR-001 names gray_rock");
    let mut gray_entities = gray["entities"].clone();
    let gray_changes = gray_entities[0]
        .as_object_mut()
        .unwrap()
        .remove("changes")
        .expect("the changed values");
    assert_eq!(gray_changes[0]["field"], "concept_summary");
    assert_eq!(gray_changes[0]["new"], "Stay brief.");
    assert_eq!(
        gray_entities,
        json!([{
            "entity_id": "gray_rock",
            "since_version": 1,
            "current_version": 2,
            "fields": ["concept_summary"],
            "reference": "accepted"
        }])
    );
    // The provenance case still compares with its own version, not with the accepted run.
    assert!(
        stale
            .iter()
            .any(|c| c["test_id"] == test_id.as_str()
                && c["entities"][0]["reference"] == "provenance")
    );
    let expected = naming(&p, "gray_rock", &[]);
    let listed: BTreeSet<(String, String)> = stale
        .iter()
        .filter(|c| c["test_id"] != test_id.as_str())
        .map(|c| {
            (
                c["bank"].as_str().unwrap().to_owned(),
                c["test_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        listed, expected,
        "every case naming gray_rock, and no other"
    );
}

#[test]
fn include_drafts_runs_pending_drafts_and_a_plain_run_never_reads_them() {
    let p = Scratch::example();
    let draft = |id: &str, status: &str| {
        json!({
            "case": {
                "test_id": id,
                "prompt": "he keeps baiting me trying to get a reaction",
                "expected_primary": ["gray_rock"],
                "provenance": {"method": "llm", "entity_id": "gray_rock",
                    "entity_versions": {"gray_rock": 1}, "model": "scripted/model",
                    "generated_at": "2026-11-28T00:00:00Z"}
            },
            "status": status
        })
    };
    p.write_json(
        "test_banks/drafts/semantic/gen-20261128T000000Z.json",
        &json!({
            "bank_type": "SEMANTIC",
            "generation": "gen-20261128T000000Z",
            "created": "2026-11-28T00:00:00Z",
            "drafts": [draft("GEN-SEM-1", "pending"), draft("GEN-SEM-2", "rejected")]
        }),
    );

    let valid = p.assay(&["validate"]);
    assert_eq!(valid.code, 0, "{valid:?}");
    assert!(
        valid
            .stdout
            .contains("drafts          2 in test_banks/drafts/ (1 pending"),
        "{valid:?}"
    );
    let plain = p.assay(&["run", "--json", "--no-save"]);
    assert_eq!(plain.code, 0, "{plain:?}");
    let plain = plain.json();
    assert!(!results(&plain).keys().any(|(_, id)| id.starts_with("GEN-")));
    assert!(plain["filters"].get("drafts").is_none());

    let with = p.assay(&["run", "--include-drafts", "--json", "--no-save"]);
    assert_eq!(with.code, 0, "{with:?}");
    let with = with.json();
    let ids: Vec<String> = results(&with)
        .into_keys()
        .filter(|(_, id)| id.starts_with("GEN-"))
        .map(|(bank, id)| format!("{bank}/{id}"))
        .collect();
    assert_eq!(
        ids,
        vec!["semantic/GEN-SEM-1"],
        "only the pending draft runs"
    );
    assert_eq!(with["filters"]["drafts"], 1);
    assert_eq!(
        with["summary"]["total_tests"].as_u64().unwrap(),
        plain["summary"]["total_tests"].as_u64().unwrap() + 1
    );

    // A draft whose id a bank case has: exit 2, naming both files, nothing run.
    p.write_json(
        "test_banks/drafts/semantic/gen-20261128T000000Z.json",
        &json!({
            "bank_type": "SEMANTIC",
            "generation": "gen-20261128T000000Z",
            "created": "2026-11-28T00:00:00Z",
            "drafts": [draft("V2-GR-001", "pending")]
        }),
    );
    // `assay validate` reads the draft files strictly and finds the clash too.
    let validate = p.assay(&["validate"]);
    assert_eq!(validate.code, 2, "{validate:?}");
    assert!(validate.stderr.contains("V2-GR-001"), "{validate:?}");
    let clash = p.assay(&["run", "--include-drafts"]);
    assert_eq!(clash.code, 2, "{clash:?}");
    assert!(
        clash.stderr.contains("gen-20261128T000000Z.json")
            && clash.stderr.contains("parent_test_bank.json")
            && clash.stderr.contains("V2-GR-001"),
        "{clash:?}"
    );
    // A plain run still ignores the drafts folder.
    assert_eq!(p.assay(&["run", "--no-save"]).code, 0);
}

#[test]
fn changed_since_a_run_that_does_not_exist_is_bad_input() {
    let p = Scratch::example();
    let run = p.assay(&["run", "--changed-since", "2020-01-01-0000"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--changed-since"), "{run:?}");
    assert!(run.stderr.contains("2020-01-01-0000"), "{run:?}");
    // `latest` before any saved run: also bad input, saying why.
    let latest = p.assay(&["run", "--changed-since", "latest"]);
    assert_eq!(latest.code, 2, "{latest:?}");
    assert!(latest.stderr.contains("no saved run"), "{latest:?}");
    assert!(p.results().is_empty(), "nothing was written");
}

#[test]
fn confirming_an_accepted_case_moves_its_provenance_and_clears_its_staleness() {
    let p = Scratch::example();
    let entity = "handler_returning_user";
    // An accepted draft in the state bank's generated.json, made from version 1 of the handler.
    let hand = cases(&p, "test_banks/state/state_handler_tests.json");
    let mut case = hand
        .iter()
        .find(|c| strings(c, "expected_handlers").iter().any(|h| h == entity))
        .expect("a case expecting the handler")
        .clone();
    let hand_id = case["test_id"].as_str().unwrap().to_owned();
    case["test_id"] = json!("GEN-STATE-confirm-1");
    case["provenance"] = json!({
        "method": "boundary",
        "entity_id": entity,
        "entity_versions": {entity: 1},
        "generated_at": "2026-11-28T00:00:00Z",
        "accepted_by": "sam",
        "accepted_at": "2026-11-28T00:01:00Z"
    });
    p.write_json(
        "test_banks/state/generated.json",
        &json!({"bank_type": "STATE", "version": "1.0", "tests": [case]}),
    );
    kb(&p, &["update", entity, "--set", "priority=77"]);
    let stale_ids = |p: &Scratch| -> Vec<String> {
        let run = p.assay(&["run", "--json", "--no-save", "--banks", "state"]);
        assert_eq!(run.code, 0, "{run:?}");
        run.json()["stale"]
            .as_array()
            .map(|s| {
                s.iter()
                    .map(|c| c["test_id"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(stale_ids(&p), ["GEN-STATE-confirm-1"]);

    // A hand-written case cannot be confirmed this way: exit 2, nothing written.
    let before = p.read("test_banks/state/generated.json");
    let r = p.assay(&["generate", "review", "--confirm", &hand_id]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(&hand_id) && r.stderr.contains("generated.json"),
        "{}",
        r.stderr
    );
    assert_eq!(p.read("test_banks/state/generated.json"), before);

    // Confirmed on the evidence of a saved run on today's knowledge base (issue 42: a
    // confirmation needs one): the provenance holds the current version and who confirmed it;
    // not stale.
    let saved = p.assay(&["run", "--banks", "state"]);
    assert_eq!(saved.code, 0, "{saved:?}");
    let r = p.assay(&[
        "generate",
        "review",
        "--confirm",
        "all-stale",
        "--by",
        "ana",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("confirmed 1 case: GEN-STATE-confirm-1"),
        "{}",
        r.stdout
    );
    let prov = &p.json("test_banks/state/generated.json")["tests"][0]["provenance"];
    assert_eq!(prov["entity_versions"][entity], 2, "{prov}");
    assert_eq!(prov["confirmed_by"], "ana", "{prov}");
    assert_eq!(prov["accepted_by"], "sam", "{prov}");
    assert!(stale_ids(&p).is_empty());

    // Nothing stale is left to confirm.
    let r = p.assay(&["generate", "review", "--confirm", "all-stale"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("nothing to confirm"), "{}", r.stderr);
}
