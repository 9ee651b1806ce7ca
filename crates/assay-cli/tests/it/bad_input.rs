//! Bad input: a clear error naming the file and place, exit code 2, no panic, nothing written.

use crate::support::{Run, Scratch};

/// Runs `assay run` on a broken project and checks the shared promises.
fn rejected(project: &Scratch) -> Run {
    let run = project.assay(&["run"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("error: "), "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
    assert!(
        project.results().is_empty(),
        "a results file was written: {:?}",
        project.results()
    );
    run
}

#[test]
fn malformed_json_names_file_line_and_column() {
    let p = Scratch::example();
    p.write(
        "test_banks/state/state_handler_tests.json",
        "{\n  \"bank_type\": \"STATE\",\n  \"tests\": [\n    {\"test_id\": \"S1\",, }\n  ]\n}\n",
    );
    let run = rejected(&p);
    assert!(
        run.stderr.contains("state_handler_tests.json:4:22: "),
        "{run:?}"
    );
}

#[test]
fn malformed_yaml_names_file_and_line() {
    let p = Scratch::example();
    p.write(
        "kb/broken.yaml",
        "- entity_id: x\n  entity_type: KNOWLEDGE\n  title: [unclosed\n",
    );
    let run = rejected(&p);
    assert!(run.stderr.contains("broken.yaml:"), "{run:?}");
}

#[test]
fn missing_required_field_names_the_case() {
    let p = Scratch::example();
    let mut bank = p.json("test_banks/pattern/pattern_tests.json");
    bank["tests"][2].as_object_mut().unwrap().remove("prompt");
    p.write_json("test_banks/pattern/pattern_tests.json", &bank);
    let run = rejected(&p);
    assert!(run.stderr.contains("pattern_tests.json:"), "{run:?}");
    assert!(
        run.stderr.contains("tests[2]: missing field `prompt`"),
        "{run:?}"
    );
}

#[test]
fn duplicate_test_id_names_both_places() {
    let p = Scratch::example();
    let mut bank = p.json("test_banks/always/always_load_tests.json");
    let first = bank["tests"][0]["test_id"].clone();
    bank["tests"][3]["test_id"] = first.clone();
    p.write_json("test_banks/always/always_load_tests.json", &bank);
    let run = rejected(&p);
    assert!(
        run.stderr
            .contains(&format!("duplicate test_id `{}`", first.as_str().unwrap())),
        "{run:?}"
    );
    assert!(run.stderr.contains("tests[0]"), "{run:?}");
}

#[test]
fn duplicate_test_id_across_banks_is_rejected() {
    let p = Scratch::example();
    let mut bank = p.json("test_banks/always/always_load_tests.json");
    bank["tests"][0]["test_id"] = "STATE-001".into();
    p.write_json("test_banks/always/always_load_tests.json", &bank);
    let run = rejected(&p);
    assert!(
        run.stderr.contains("duplicate test_id `STATE-001`"),
        "{run:?}"
    );
}

#[test]
fn duplicate_test_id_in_a_streamed_bank_names_both_places() {
    let p = Scratch::example();
    let rel = "test_banks/state/state_handler_tests.json";
    let mut bank = p.json(rel);
    bank["tests"][5]["test_id"] = "V2-GR-001".into(); // a semantic case's id
    bank["tests"][9]["test_id"] = "STATE-002".into(); // tests[1]'s
    p.write_json(rel, &bank);
    let run = rejected(&p);
    assert!(
        run.stderr
            .contains("duplicate test_id `V2-GR-001` (first at ")
            && run.stderr.contains("parent_test_bank.json"),
        "{run:?}"
    );

    // Within one file.
    bank["tests"][5]["test_id"] = "STATE-006".into();
    p.write_json(rel, &bank);
    let run = rejected(&p);
    assert!(
        run.stderr
            .contains("duplicate test_id `STATE-002` (first at ")
            && run.stderr.contains("state_handler_tests.json:tests[1]"),
        "{run:?}"
    );
}

#[test]
fn unknown_bank_type_is_rejected() {
    let p = Scratch::example();
    p.edit(
        "test_banks/state/state_handler_tests.json",
        "\"STATE\"",
        "\"STATES\"",
    );
    let run = rejected(&p);
    assert!(run.stderr.contains("state_handler_tests.json:"), "{run:?}");
    assert!(run.stderr.contains("unknown variant `STATES`"), "{run:?}");
}

#[test]
fn bank_type_that_contradicts_its_folder_is_rejected() {
    let p = Scratch::example();
    p.edit(
        "test_banks/state/state_handler_tests.json",
        "\"STATE\"",
        "\"PATTERN\"",
    );
    let run = rejected(&p);
    assert!(
        run.stderr
            .contains("bank_type PATTERN does not match its folder `state/`"),
        "{run:?}"
    );
}

#[test]
fn bad_regex_names_file_rule_and_error() {
    let p = Scratch::example();
    let mut rules = p.json("test_banks/pattern/pattern_rules.json");
    rules["crisis_patterns"][2]["pattern"] = "(not|don't feel safe".into();
    p.write_json("test_banks/pattern/pattern_rules.json", &rules);
    let run = rejected(&p);
    assert!(
        run.stderr
            .contains("pattern_rules.json: crisis_patterns[2]: bad regex `(not|don't feel safe`"),
        "{run:?}"
    );
    assert!(run.stderr.contains("unclosed group"), "{run:?}");
}

#[test]
fn bad_operator_names_entity_and_operator() {
    let p = Scratch::example();
    p.edit("kb/handlers.yaml", "gte: 7", "$gtee: 7");
    let run = rejected(&p);
    assert!(run.stderr.contains("handlers.yaml"), "{run:?}");
    assert!(run.stderr.contains("`handler_returning_user`: state_conditions: field `days_since_last`: unknown operator `$gtee`"), "{run:?}");
}

#[test]
fn priority_out_of_range_and_bad_enum_are_rejected() {
    let p = Scratch::example();
    p.write(
        "kb/extra.yaml",
        "- entity_id: extra\n  entity_type: KNOWLEDGE\n  title: Extra\n  priority: 140\n",
    );
    let run = rejected(&p);
    assert!(
        run.stderr
            .contains("extra.yaml:1:3: [0].priority: priority 140 is out of range (0 to 100)"),
        "{run:?}"
    );

    p.write(
        "kb/extra.yaml",
        "- entity_id: extra\n  entity_type: KNOWLEDGE\n  title: Extra\n  load_mode: SOMETIMES\n",
    );
    let run = rejected(&p);
    assert!(
        run.stderr
            .contains("unknown value `SOMETIMES`; expected one of `ALWAYS`, `STATE`, `SITUATION`"),
        "{run:?}"
    );
}

#[test]
fn duplicate_entity_id_is_rejected() {
    let p = Scratch::example();
    p.write(
        "kb/extra.yaml",
        "- entity_id: gray_rock\n  entity_type: KNOWLEDGE\n  title: Another gray rock\n",
    );
    let run = rejected(&p);
    assert!(
        run.stderr.contains("duplicate entity_id `gray_rock`"),
        "{run:?}"
    );
}

#[test]
fn unknown_settings_key_is_rejected() {
    let p = Scratch::example();
    p.write("assay.toml", "[weights]\nsemantic = 0.6\nstat = 0.15\n");
    let run = rejected(&p);
    assert!(
        run.stderr
            .contains("assay.toml:3:1: weights: unknown field `stat` (did you mean `state`?)"),
        "{run:?}"
    );
}

#[test]
fn malformed_history_file_is_rejected_and_left_alone() {
    let p = Scratch::example();
    let rel = "test_banks/semantic/history/expectations_2026-12-01.json";
    p.write(rel, "{\"changes\": [ {\"test_id\": 5} ]}");
    let run = p.assay(&["expectations"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("expectations_2026-12-01.json:1:"),
        "{run:?}"
    );
    assert_eq!(p.read(rel), "{\"changes\": [ {\"test_id\": 5} ]}");
}

#[test]
fn unknown_entity_referenced_by_a_case_is_an_error_before_anything_runs() {
    let p = Scratch::example();
    let mut bank = p.json("test_banks/state/state_handler_tests.json");
    bank["tests"][0]["not_expected_handlers"] = serde_json::json!(["handler_does_not_exist"]);
    p.write_json("test_banks/state/state_handler_tests.json", &bank);
    let run = p.assay(&["run", "--banks", "state"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("tests[0] (STATE-001): unknown entity `handler_does_not_exist`"),
        "{run:?}"
    );
    assert!(p.results().is_empty());
    // Named on purpose, it runs.
    bank["tests"][0]["known_missing"] = serde_json::json!(["handler_does_not_exist"]);
    p.write_json("test_banks/state/state_handler_tests.json", &bank);
    let run = p.assay(&["run", "--banks", "state", "--no-save"]);
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn unknown_case_field_is_an_error_with_the_closest_field() {
    let p = Scratch::example();
    let mut bank = p.json("test_banks/always/always_load_tests.json");
    bank["tests"][1]["expected_allways"] = serde_json::json!([]);
    p.write_json("test_banks/always/always_load_tests.json", &bank);
    let run = p.assay(&["validate"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("always_load_tests.json:")
            && run.stderr.contains(
                "tests[1]: unknown field `expected_allways` (did you mean `expected_always`?)"
            ),
        "{run:?}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let p = Scratch::example();
    let run = p.assay(&["run", "--banks", "state,stats"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("unknown bank `stats`"), "{run:?}");
    let run = p.assay(&["run", "--test", "NOPE-001"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("no case with test_id `NOPE-001`"),
        "{run:?}"
    );
    let run = p.assay(&["run", "--embedder", "nonsense"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("invalid embedder name `nonsense`"),
        "{run:?}"
    );
    let run = p.assay(&["run", "--topic", "no_such_topic"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("no semantic case has topic `no_such_topic`"),
        "{run:?}"
    );
    assert!(p.results().is_empty());
    let run = crate::support::assay(&["run", "/nonexistent/assay-project"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("does not exist"), "{run:?}");
}
