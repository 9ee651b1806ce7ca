//! Typed user state (issue 42, item 3): a value of the wrong type in a STATE condition or a
//! case, an unknown operator or field, and an audience no entity names stop `assay validate`,
//! `assay run` and `assay generate` with exit 2, naming the file, the line and the field, and
//! nothing is written; the same project with the mistakes fixed runs green.

use std::path::Path;

use crate::support::{Run, Scratch};

/// A club whose fee-exemption handler reads a field of the club's own, `age`.
const KB: &str = r"# A members' club's assistant.
- entity_id: club_persona
  entity_type: PERSONA
  title: The club's assistant
  concept_summary: Answers members' and staff's questions about the club.
  load_mode: ALWAYS
  priority: 100
  audience_types: [PARENT, STAFF]

- entity_id: handler_senior
  entity_type: HANDLER
  title: Senior members pay no fee
  guidance_do: Tell a member aged 65 or over that the yearly fee is waived.
  load_mode: STATE
  state_conditions:
    is_first_conversation: {eq: false}
    age: {$gte: 65}
  audience_types: [PARENT, STAFF]
";

const CONFIG: &str = "[state.fields]\nage = \"integer\"\n";

const STATE: &str = r#"{
  "bank_type": "STATE",
  "version": "1.0",
  "tests": [
    {
      "test_id": "FEE-1",
      "name": "A member of 65 pays no fee",
      "user_state": {"user_type": "PARENT", "is_first_conversation": false, "age": 65},
      "expected_handlers": ["handler_senior"]
    },
    {
      "test_id": "FEE-2",
      "name": "A member of 64 pays",
      "user_state": {"user_type": "PARENT", "is_first_conversation": false, "age": 64},
      "expected_handlers": [],
      "not_expected_handlers": ["handler_senior"]
    }
  ]
}
"#;

const ALWAYS: &str = r#"{
  "bank_type": "ALWAYS",
  "version": "1.0",
  "tests": [
    {
      "test_id": "CLUB-A1",
      "name": "Staff get the assistant",
      "user_type": "STAFF",
      "expected_always": ["club_persona"]
    }
  ]
}
"#;

/// The club, every file right.
fn club() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let p = Scratch::copy_of(dir.path());
    p.write("assay.toml", CONFIG);
    p.write("kb/club.yaml", KB);
    p.write("test_banks/state/club_state.json", STATE);
    p.write("test_banks/always/club_always.json", ALWAYS);
    p
}

/// The 1-based line of the first line of `p`'s `file` that contains `text`.
fn line_of(p: &Scratch, file: &str, text: &str) -> usize {
    p.read(file)
        .lines()
        .position(|l| l.contains(text))
        .unwrap_or_else(|| panic!("{text} is not in {file}"))
        + 1
}

/// Nothing under the project but what the test wrote: no store, no results, no drafts.
fn nothing_written(root: &Path) {
    for written in [".assay", "results", "test_banks/drafts"] {
        assert!(!root.join(written).exists(), "{written} was written");
    }
}

/// `validate`, `run` and `generate` each refuse the project with exit 2 and an error that
/// contains every one of `names`; nothing is written.
fn refused(p: &Scratch, names: &[String]) {
    for args in [
        &["validate"][..],
        &["run"][..],
        &["generate", "--banks", "state"][..],
    ] {
        let r: Run = p.assay(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains("error: "), "{args:?}: {r:?}");
        for name in names {
            assert!(
                r.stderr.contains(name.as_str()),
                "{args:?}: expected {name:?} in:\n{}",
                r.stderr
            );
        }
        nothing_written(p.root());
    }
}

#[test]
fn a_string_where_a_number_is_meant_in_a_case_is_an_error() {
    let p = club();
    p.edit(
        "test_banks/state/club_state.json",
        "\"age\": 65}",
        "\"age\": \"65\"}",
    );
    let line = line_of(&p, "test_banks/state/club_state.json", "\"age\": \"65\"");
    refused(
        &p,
        &[
            format!("club_state.json:{line}: tests[0] (FEE-1): user_state.age"),
            "expected an integer, found the string \"65\" (age is an integer)".into(),
        ],
    );
}

#[test]
fn a_string_where_a_number_is_meant_in_a_condition_is_an_error() {
    let p = club();
    p.edit("kb/club.yaml", "age: {$gte: 65}", "age: {$gte: \"65\"}");
    let line = line_of(&p, "kb/club.yaml", "age: {$gte");
    refused(
        &p,
        &[
            format!("club.yaml:{line}: entity `handler_senior`: state_conditions.age"),
            "`gte`: expected an integer, found the string \"65\"".into(),
        ],
    );
}

#[test]
fn an_unknown_operator_is_an_error_with_the_one_meant() {
    let p = club();
    p.edit("kb/club.yaml", "age: {$gte: 65}", "age: {ge: 65}");
    let line = line_of(&p, "kb/club.yaml", "age: {ge");
    refused(
        &p,
        &[
            format!("club.yaml:{line}: "),
            "`handler_senior`: state_conditions: field `age`: unknown operator `ge` (did you mean `gte`?)".into(),
        ],
    );
}

#[test]
fn an_unknown_field_is_an_error_that_says_how_to_declare_it() {
    // In a case: a typo of a declared field.
    let p = club();
    p.edit(
        "test_banks/state/club_state.json",
        "\"age\": 64}",
        "\"agee\": 64}",
    );
    let line = line_of(&p, "test_banks/state/club_state.json", "\"agee\"");
    refused(
        &p,
        &[
            format!("club_state.json:{line}: tests[1] (FEE-2): user_state.agee"),
            "unknown user-state field `agee` (did you mean `age`?)".into(),
            "[state.fields] agee = \"integer\"".into(),
        ],
    );

    // In a condition: a field the project never declared (and its cases do not name).
    let p = club();
    p.write("assay.toml", "");
    p.edit("test_banks/state/club_state.json", ", \"age\": 65}", "}");
    p.edit("test_banks/state/club_state.json", ", \"age\": 64}", "}");
    let line = line_of(&p, "kb/club.yaml", "age: {$gte");
    refused(
        &p,
        &[
            format!("club.yaml:{line}: entity `handler_senior`: state_conditions.age"),
            "unknown user-state field `age`".into(),
            "declared with its type in assay.toml: [state.fields] age = \"integer\"".into(),
        ],
    );
}

#[test]
fn an_audience_no_entity_names_is_an_error() {
    let p = club();
    p.edit(
        "test_banks/always/club_always.json",
        "\"user_type\": \"STAFF\"",
        "\"user_type\": \"STAF\"",
    );
    let line = line_of(&p, "test_banks/always/club_always.json", "\"STAF\"");
    refused(
        &p,
        &[
            format!("club_always.json:{line}: tests[0] (CLUB-A1): user_type"),
            "`STAF` is not an audience: no entity's audience_types names it (did you mean `STAFF`?)"
                .into(),
        ],
    );

    // In a case's state, and in a condition, too.
    let p = club();
    p.edit(
        "test_banks/state/club_state.json",
        "\"user_type\": \"PARENT\", \"is_first_conversation\": false, \"age\": 64",
        "\"user_type\": \"PARNET\", \"is_first_conversation\": false, \"age\": 64",
    );
    refused(
        &p,
        &[
            "tests[1] (FEE-2): user_state.user_type".into(),
            "did you mean `PARENT`?".into(),
        ],
    );
    let p = club();
    p.edit(
        "kb/club.yaml",
        "    age: {$gte: 65}\n",
        "    age: {$gte: 65}\n    user_type: {in: [STAF]}\n",
    );
    refused(
        &p,
        &["state_conditions.user_type: `in`: element 0: `STAF` is not an audience".into()],
    );
}

#[test]
fn an_ordering_operator_on_a_string_is_an_error() {
    let p = club();
    p.edit(
        "kb/club.yaml",
        "    age: {$gte: 65}\n",
        "    age: {$gte: 65}\n    session_type: {gt: debrief}\n",
    );
    refused(
        &p,
        &["state_conditions.session_type: `gt`: an ordering operator compares numbers and timestamps, but session_type is a string".into()],
    );
}

#[test]
fn a_case_without_an_audience_warns_or_fails_where_the_default_is_no_audience() {
    let p = club();
    p.write(
        "test_banks/semantic/club_semantic.json",
        r#"{"bank_type": "SEMANTIC", "version": "2.0", "tests": [
  {"test_id": "SEM-1", "prompt": "do I pay the fee?", "expected_primary": [], "user_state": {"age": 70}},
  {"test_id": "SEM-2", "prompt": "what does staff do?", "expected_primary": [], "user_state": {"user_type": "STAFF"}}
]}
"#,
    );
    let v = p.assay(&["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
    assert!(
        v.stderr.contains("club_semantic.json: a case has no user_type and runs as `PARENT` (the default audience), though the knowledge base has the audiences `PARENT`, `STAFF`: tests[0] (SEM-1)"),
        "{}",
        v.stderr
    );
    assert!(
        v.stderr
            .lines()
            .filter(|l| l.contains("no user_type"))
            .all(|l| !l.contains("SEM-2")),
        "{}",
        v.stderr
    );

    // A knowledge base without the default audience: the case could never find anything.
    p.write("kb/club.yaml", &KB.replace("PARENT", "MEMBER"));
    p.write(
        "test_banks/state/club_state.json",
        &STATE.replace("PARENT", "MEMBER"),
    );
    let line = line_of(&p, "test_banks/semantic/club_semantic.json", "SEM-1");
    refused(
        &p,
        &[
            format!("club_semantic.json:{line}: tests[0] (SEM-1): no user_type, so it would run as `PARENT`"),
            "which no entity's audience_types names; set user_state.user_type to one of `MEMBER`, `STAFF`".into(),
        ],
    );
}

#[test]
fn the_club_with_its_mistakes_fixed_runs_green_and_its_boundary_drafts_are_valid() {
    let p = club();
    let v = p.assay(&["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
    assert!(v.stdout.contains("warnings        0"), "{}", v.stdout);
    let run = p.assay(&["run", "--json", "--no-save"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    let results = log["state"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{log}");
    for case in results {
        assert_eq!(case["score"], 100, "{case}");
    }
    // The boundary states `generate` derives are of the fields' types, so they are cases
    // the project accepts, and the handler passes them.
    let g = p.assay(&["generate", "--banks", "state"]);
    assert_eq!(g.code, 0, "{g:?}");
    let drafts = p.assay(&[
        "run",
        "--banks",
        "state",
        "--include-drafts",
        "--json",
        "--no-save",
    ]);
    assert_eq!(drafts.code, 0, "{drafts:?}");
    let cases = drafts.json()["state"]["results"]
        .as_array()
        .unwrap()
        .clone();
    assert!(cases.len() > 2, "{cases:?}");
    for case in &cases {
        assert_eq!(case["score"], 100, "{case}");
    }
}
