//! A newcomer's first hour (issue 27), on a project the rest of the tests were not written
//! from: a bike shop's knowledge base and banks, written here from scratch. Mistakes in the
//! tests stop `assay validate` and `assay run` before anything is scored or written; a run the
//! team accepts stays the baseline; the semantic bank scores what the pipeline loads.

use std::path::Path;

use crate::support::{Scratch, assay};

const KB: &str = r"# A bike shop's assistant.
- entity_id: shop_persona
  entity_type: PERSONA
  title: The shop's mechanic
  concept_summary: A friendly bike mechanic who explains repairs in plain steps.
  load_mode: ALWAYS
  priority: 100
  audience_types: [RIDER]

- entity_id: chain_care
  entity_type: KNOWLEDGE
  title: Cleaning and oiling a chain
  recognition: rusty chain, squeaky chain, chain skips, how do I oil my bike chain, the chain is dirty and black
  guidance_do: Degrease, dry, then one drop of oil per link; wipe off the rest.
  priority: 50
  audience_types: [RIDER]

- entity_id: brake_adjustment
  entity_type: KNOWLEDGE
  title: Adjusting rim and disc brakes
  recognition: brakes squeal, the brake lever pulls all the way to the bar, brakes feel soft or spongy, adjust the brake pads
  guidance_do: Check pad wear first, then cable tension with the barrel adjuster.
  priority: 60
  audience_types: [RIDER]

- entity_id: tire_puncture
  entity_type: KNOWLEDGE
  title: Fixing a flat tire
  recognition: flat tire, puncture, the tube keeps going flat, how to patch an inner tube
  guidance_do: Find the cause in the tire before fitting a new tube.
  priority: 50
  audience_types: [RIDER]

- entity_id: handler_crash_injury
  entity_type: HANDLER
  title: A rider who crashed and is hurt
  recognition: I crashed my bike and I am hurt, I fell off and I am bleeding, hit by a car
  guidance_do: Ask whether they are safe and whether they need emergency help, before any repair talk.
  priority: 100
  audience_types: [RIDER]

- entity_id: handler_night_riding
  entity_type: HANDLER
  title: Riding after dark
  guidance_do: Mention front and rear lights and reflective clothing.
  load_mode: STATE
  state_conditions:
    rides_after_dark: {eq: true}
  audience_types: [RIDER]

- entity_id: wheel_truing
  entity_type: KNOWLEDGE
  title: Truing a wobbly wheel
  recognition: the wheel wobbles, rim rubs the brake pad, buckled wheel
  is_active: false
  audience_types: [RIDER]
";

const SEMANTIC: &str = r#"{
  "bank_type": "SEMANTIC",
  "version": "2.0",
  "tests": [
    {"test_id": "BIKE-S1", "name": "Rusty chain", "prompt": "my chain is rusty and squeaky, how do I oil my bike chain",
     "expected_primary": ["chain_care"], "user_state": {"user_type": "RIDER"}},
    {"test_id": "BIKE-S2", "name": "Soft brakes", "prompt": "the brake lever pulls all the way to the bar and the brakes squeal",
     "expected_primary": ["brake_adjustment"], "user_state": {"user_type": "RIDER"}},
    {"test_id": "BIKE-S3", "name": "Flat", "prompt": "flat tire again, the tube keeps going flat",
     "expected_primary": ["tire_puncture"], "user_state": {"user_type": "RIDER"}}
  ]
}
"#;

const STATE: &str = r#"{
  "bank_type": "STATE",
  "version": "1.0",
  "tests": [
    {"test_id": "BIKE-ST1", "name": "Night rider", "user_state": {"user_type": "RIDER", "rides_after_dark": true},
     "expected_handlers": ["handler_night_riding"]},
    {"test_id": "BIKE-ST2", "name": "Night rider, first visit", "user_state": {"user_type": "RIDER", "rides_after_dark": true, "is_first_conversation": true},
     "expected_handlers": ["handler_night_riding"]},
    {"test_id": "BIKE-ST3", "name": "Day rider", "user_state": {"user_type": "RIDER", "rides_after_dark": false},
     "expected_handlers": [], "not_expected_handlers": ["handler_night_riding"]}
  ]
}
"#;

const PATTERN: &str = r#"{
  "bank_type": "PATTERN",
  "version": "1.0",
  "tests": [
    {"test_id": "BIKE-P1", "name": "Crash", "prompt": "i crashed and i am bleeding",
     "expected_matches": ["handler_crash_injury"], "pattern_type": "crisis", "is_critical": true}
  ]
}
"#;

const RULES: &str = r#"{
  "crisis_patterns": [
    {"pattern": "\\b(crash(ed)?|bleeding|hurt)\\b", "entities": ["handler_crash_injury"], "is_critical": true}
  ],
  "keyword_boosts": [
    {"keywords": ["chain"], "entity": "chain_care"}
  ]
}
"#;

const ALWAYS: &str = r#"{
  "bank_type": "ALWAYS",
  "version": "1.0",
  "tests": [
    {"test_id": "BIKE-A1", "name": "Riders get the mechanic", "user_type": "RIDER", "expected_always": ["shop_persona"]}
  ]
}
"#;

/// The type of the bike shop's own user-state field, which its handler's condition reads.
const STATE_FIELDS: &str = "[state.fields]\nrides_after_dark = \"boolean\"\n";

/// The bike shop, as a newcomer writes it: an `assay.toml` that declares its own user-state
/// field, and nothing else unless a test adds it.
fn bike_shop() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let p = Scratch::copy_of(dir.path());
    p.write("assay.toml", STATE_FIELDS);
    p.write("kb/bikes.yaml", KB);
    p.write("test_banks/semantic/bikes.json", SEMANTIC);
    p.write("test_banks/state/bikes.json", STATE);
    p.write("test_banks/pattern/bikes.json", PATTERN);
    p.write("test_banks/pattern/pattern_rules.json", RULES);
    p.write("test_banks/always/bikes.json", ALWAYS);
    p
}

fn nothing_written(root: &Path) {
    assert!(!root.join("results").exists(), "results/ was written");
    assert!(!root.join("baseline").exists(), "baseline/ was written");
}

#[test]
fn the_bike_shop_runs_clean() {
    let p = bike_shop();
    let v = p.assay(&["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
    assert!(v.stdout.contains("valid"), "{}", v.stdout);
    let run = p.assay(&["run"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("0 hard fails"), "{}", run.stdout);
}

#[test]
fn a_misspelt_entity_in_a_case_stops_validate_and_run_naming_the_case_and_the_right_entity() {
    let p = bike_shop();
    p.edit(
        "test_banks/semantic/bikes.json",
        "\"expected_primary\": [\"brake_adjustment\"]",
        "\"expected_primary\": [\"brake_adjustmnet\"]",
    );
    for args in [&["validate"][..], &["run"]] {
        let r = p.assay(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("bikes.json: tests[1] (BIKE-S2): unknown entity `brake_adjustmnet` (did you mean `brake_adjustment`?)"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(r.stderr.contains("mistake in the tests"), "{}", r.stderr);
        nothing_written(&p.root);
    }

    // A case that names an absent entity on purpose says so, and then runs.
    p.edit(
        "test_banks/semantic/bikes.json",
        "\"expected_primary\": [\"brake_adjustmnet\"]",
        "\"expected_primary\": [\"brake_adjustment\"], \"not_expected\": [\"ebike_motor\"], \"known_missing\": [\"ebike_motor\"]",
    );
    let v = p.assay(&["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
}

#[test]
fn unknown_handlers_and_rule_entities_are_mistakes_too() {
    let p = bike_shop();
    p.edit(
        "test_banks/state/bikes.json",
        "\"expected_handlers\": [\"handler_night_riding\"]},\n    {\"test_id\": \"BIKE-ST2\"",
        "\"expected_handlers\": [\"handler_nite_riding\"]},\n    {\"test_id\": \"BIKE-ST2\"",
    );
    let r = p.assay(&["run"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(
            "tests[0] (BIKE-ST1): unknown entity `handler_nite_riding` (did you mean `handler_night_riding`?)"
        ),
        "{}",
        r.stderr
    );
    nothing_written(&p.root);

    let p = bike_shop();
    p.edit(
        "test_banks/pattern/pattern_rules.json",
        "\"entity\": \"chain_care\"",
        "\"entity\": \"chian_care\"",
    );
    let r = p.assay(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(
            "keyword_boosts[0]: unknown entity `chian_care` (did you mean `chain_care`?)"
        ),
        "{}",
        r.stderr
    );
}

#[test]
fn a_misspelt_field_is_an_error_naming_the_field_and_the_right_one() {
    let p = bike_shop();
    p.edit(
        "kb/bikes.yaml",
        "  guidance_do: Degrease",
        "  guidence_do: Degrease",
    );
    for args in [&["validate"][..], &["run"]] {
        let r = p.assay(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("bikes.yaml:14:3: ")
                && r.stderr
                    .contains("[1]: unknown field `guidence_do` (did you mean `guidance_do`?)"),
            "{args:?}: {}",
            r.stderr
        );
        nothing_written(&p.root);
    }

    // The same in a bank: a misspelt case field.
    let p = bike_shop();
    p.edit(
        "test_banks/semantic/bikes.json",
        "\"name\": \"Flat\"",
        "\"nmae\": \"Flat\"",
    );
    let r = p.assay(&["validate"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("tests[2]: unknown field `nmae` (did you mean `name`?)"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_case_that_expects_an_inactive_entity_is_warned_about_with_the_version() {
    let p = bike_shop();
    p.edit(
        "test_banks/semantic/bikes.json",
        "\"expected_primary\": [\"tire_puncture\"]",
        "\"expected_primary\": [\"tire_puncture\"], \"expected_secondary\": [\"wheel_truing\"]",
    );
    let v = p.assay(&["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
    assert!(
        v.stderr.contains(
            "tests[2] (BIKE-S3): expects `wheel_truing`, which is inactive (is_active: false)"
        ),
        "{}",
        v.stderr
    );
    let run = p.assay(&["run"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("expects `wheel_truing`, which is inactive (deactivated in version 1)"),
        "{}",
        run.stderr
    );
    // And the report says what happened to it in plain words.
    let md = p
        .results()
        .into_iter()
        .find(|n| {
            n.starts_with("report_")
                && std::path::Path::new(n)
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("md"))
        })
        .unwrap();
    let md = p.read(&format!("results/{md}"));
    assert!(
        md.contains("`wheel_truing` not retrieved: inactive"),
        "{md}"
    );
    assert!(!md.contains("NotRetrieved"), "{md}");
}

#[test]
fn an_accepted_run_stays_the_baseline_until_another_is_accepted() {
    let p = bike_shop();
    // A first CI run with --baseline accepted, before anything is accepted: exit 0, and it says so.
    let first = p.assay(&["run", "--baseline", "accepted"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(
        first.stderr.contains("no run has been accepted yet"),
        "{}",
        first.stderr
    );
    let root = p.root.to_str().unwrap().to_owned();
    let runs = |args: &[&str]| {
        let mut full = vec!["runs"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--project", &root]);
        assay(&full)
    };
    let accept = runs(&[
        "accept",
        "latest",
        "--by",
        "ana",
        "--note",
        "first good run",
    ]);
    assert_eq!(accept.code, 0, "{accept:?}");
    assert!(
        accept.stdout.contains("as the baseline, by ana"),
        "{}",
        accept.stdout
    );
    let record = p.json("baseline/accepted.json");
    assert_eq!(record["accepted_by"], "ana");
    assert_eq!(record["note"], "first good run");
    let accepted_id = record["id"].as_str().unwrap().to_owned();
    assert!(
        p.path(&format!("baseline/results_{accepted_id}.json"))
            .is_file()
    );

    // A knowledge-base edit breaks the two cases that expect the night-riding handler (an
    // edit of the wrong type, `{eq: "yes"}`, would not run at all: typed user state).
    let kb = p.read("kb/bikes.yaml");
    p.edit(
        "kb/bikes.yaml",
        "rides_after_dark: {eq: true}",
        "rides_after_dark: {eq: false}",
    );
    for attempt in 0..2 {
        let run = p.assay(&["run", "--baseline", "accepted"]);
        assert_eq!(run.code, 1, "attempt {attempt}: {run:?}");
        assert!(
            run.stdout.contains(&format!(
                "Compared with the accepted run {accepted_id} (accepted by ana"
            )),
            "attempt {attempt}: {}",
            run.stdout
        );
        assert!(
            run.stdout
                .contains("2 new hard fail(s): state/BIKE-ST1, state/BIKE-ST2"),
            "attempt {attempt}: {}",
            run.stdout
        );
        assert!(
            run.stderr
                .contains("the run regressed against the baseline: state/BIKE-ST1, state/BIKE-ST2"),
            "attempt {attempt}: {}",
            run.stderr
        );
    }
    // `latest` means the previous run: the same breakage compared with itself passes.
    let latest = p.assay(&["run", "--baseline", "latest"]);
    assert_eq!(latest.code, 0, "{latest:?}");

    // Fixed: back to passing against the accepted run.
    p.write("kb/bikes.yaml", &kb);
    let fixed = p.assay(&["run", "--baseline", "accepted"]);
    assert_eq!(fixed.code, 0, "{fixed:?}");

    // The list marks the accepted run; history keeps every acceptance.
    let list = runs(&["list"]);
    assert!(
        list.stdout.contains(&format!("{accepted_id} *")),
        "{}",
        list.stdout
    );
    let again = runs(&["accept", "latest", "--by", "bo"]);
    assert_eq!(again.code, 0, "{again:?}");
    let history = p.read("baseline/history.jsonl");
    assert_eq!(history.lines().count(), 2, "{history}");
    let newest = p.json("baseline/accepted.json");
    assert_eq!(newest["accepted_by"], "bo");
    let new_id = newest["id"].as_str().unwrap();
    assert_ne!(new_id, accepted_id);
    assert!(
        !p.path(&format!("baseline/results_{accepted_id}.json"))
            .exists(),
        "the old copy is gone once nothing points at it"
    );

    // A run that is not saved cannot be accepted; bad ids are usage errors.
    let bad = runs(&["accept", "2020-01-01-0000"]);
    assert_eq!(bad.code, 2, "{bad:?}");
}

#[test]
fn the_semantic_bank_can_score_what_the_pipeline_loads() {
    let p = bike_shop();
    // The rusty-chain case forbids the crash handler, which the plain top-k takes in at a low
    // similarity (0.32 with the built-in embedder) but the pipeline's threshold (0.4 here)
    // keeps out.
    p.edit(
        "test_banks/semantic/bikes.json",
        "\"expected_primary\": [\"chain_care\"],",
        "\"expected_primary\": [\"chain_care\"], \"not_expected\": [\"handler_crash_injury\"],",
    );
    let scored = |selection: &str| {
        p.write(
            "assay.toml",
            &format!(
                "[semantic]\nselection = \"{selection}\"\n[retrieval]\nmode = \"dense\"\nscore_threshold = 0.4\n{STATE_FIELDS}"
            ),
        );
        let run = p.assay(&["run", "--banks", "semantic", "--json"]);
        assert_eq!(run.code, 0, "{selection}: {run:?}");
        run.json()
    };
    let top_k = scored("top_k");
    let case = |log: &serde_json::Value| {
        log["semantic"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["test_id"] == "BIKE-S1")
            .unwrap()
            .clone()
    };
    assert_eq!(
        case(&top_k)["false_positives"][0],
        "handler_crash_injury",
        "{top_k:#}"
    );
    assert!(
        top_k["setup"]["semantic_selection"]
            .as_str()
            .unwrap()
            .starts_with("top_k"),
        "{}",
        top_k["setup"]
    );
    let pipeline = scored("pipeline");
    assert_eq!(case(&pipeline)["score"], 100, "{pipeline:#}");
    assert!(
        pipeline["setup"]["semantic_selection"]
            .as_str()
            .unwrap()
            .starts_with("pipeline"),
        "{}",
        pipeline["setup"]
    );
    // What the bank selected is what `assay retrieve` loads.
    let root = p.root.to_str().unwrap();
    let retrieve = assay(&[
        "retrieve",
        "my chain is rusty and squeaky, how do I oil my bike chain",
        "--project",
        root,
        "--state",
        r#"{"user_type": "RIDER"}"#,
        "--json",
    ]);
    assert_eq!(retrieve.code, 0, "{retrieve:?}");
    let loaded: Vec<String> = retrieve.json()["entities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["stage"] != "always" && e["stage"] != "state")
        .map(|e| e["entity_id"].as_str().unwrap().to_owned())
        .collect();
    let selected: Vec<String> = case(&pipeline)["selections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(selected, loaded);

    // A misspelt value is an error with the right one.
    p.write("assay.toml", "[semantic]\nselection = \"pipline\"\n");
    let bad = p.assay(&["validate"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("did you mean `pipeline`?"),
        "{}",
        bad.stderr
    );
}
