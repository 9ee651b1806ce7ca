//! `assay state …`: stored user state (003 §5).

use serde_json::{Value, json};

use crate::support::{Run, Scratch, assay};

/// Runs `assay state ARGS --project <scratch>`.
fn state(p: &Scratch, args: &[&str]) -> Run {
    let mut full = vec!["state"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--project", p.root.to_str().unwrap()]);
    assay(&full)
}

/// Runs `assay state ARGS --json` and returns the state.
fn state_json(p: &Scratch, args: &[&str]) -> Value {
    let mut full = args.to_vec();
    full.push("--json");
    let run = state(p, &full);
    assert_eq!(run.code, 0, "{args:?}: {run:?}");
    run.json()
}

fn rejected(run: &Run, problem: &str) {
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("error"), "{run:?}");
    assert!(
        run.stderr.contains(problem),
        "expected {problem:?}: {run:?}"
    );
    assert!(!run.stderr.contains("panicked"), "{run:?}");
}

#[test]
fn a_new_user_has_the_defaults() {
    let p = Scratch::example();
    let s = state_json(&p, &["show", "--user", "new_parent"]);
    assert_eq!(s["user_id"], "new_parent");
    assert_eq!(s["user_type"], "PARENT");
    assert_eq!(s["conversation_count"], 0);
    assert_eq!(s["is_first_conversation"], true);
    assert!(s.get("days_since_last").is_none(), "{s}");

    let text = state(&p, &["show", "--user", "new_parent"]);
    assert_eq!(text.code, 0, "{text:?}");
    let keys: Vec<&str> = text
        .stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted, "{text:?}");
    assert!(text.stdout.contains("is_first_conversation"), "{text:?}");
}

#[test]
fn set_changes_fields_and_keeps_unknown_ones() {
    let p = Scratch::example();
    let s = state_json(
        &p,
        &[
            "set",
            "--user",
            "u1",
            "user_type=CLINICIAN",
            "session_type=debrief",
            "just_logged=true",
            "has_pending_debrief=true",
            "favourite_colour=green",
        ],
    );
    assert_eq!(s["user_type"], "CLINICIAN");
    assert_eq!(s["session_type"], "debrief");
    assert_eq!(s["just_logged"], true);
    assert_eq!(s["has_pending_debrief"], true);
    assert_eq!(s["favourite_colour"], "green");

    // Stored: a later `show` sees the same.
    let again = state_json(&p, &["show", "--user", "u1"]);
    assert_eq!(again, s);
    // Another user is untouched.
    assert_eq!(
        state_json(&p, &["show", "--user", "u2"])["user_type"],
        "PARENT"
    );
}

#[test]
fn record_counts_interactions() {
    let p = Scratch::example();
    for _ in 0..2 {
        state_json(
            &p,
            &[
                "record", "--user", "u1", "--rating", "5", "--topic", "handoffs", "--skill", "biff",
            ],
        );
    }
    let s = state_json(&p, &["show", "--user", "u1"]);
    assert_eq!(s["conversation_count"], 2);
    assert_eq!(s["last_rating"], 5);
    assert_eq!(s["is_first_conversation"], false);
    assert_eq!(s["days_since_last"], 0);
    assert_eq!(s["last_topics"], json!(["handoffs"]));
    assert_eq!(s["skills_practiced"], json!(["biff"]));

    // Without a rating the last one stays.
    let s = state_json(&p, &["record", "--user", "u1"]);
    assert_eq!(s["conversation_count"], 3);
    assert_eq!(s["last_rating"], 5);
}

#[test]
fn bad_input_is_rejected() {
    let p = Scratch::example();
    rejected(
        &state(&p, &["record", "--user", "u1", "--rating", "9"]),
        "--rating",
    );
    rejected(
        &state(&p, &["set", "--user", "u1", "last_rating=9"]),
        "rating 9 is out of range",
    );
    rejected(
        &state(&p, &["set", "--user", "u1", "session_type"]),
        "expected FIELD=VALUE",
    );
    rejected(
        &state(&p, &["set", "--user", "u1", "a=1", "a=2"]),
        "`a` is given twice",
    );
    // Nothing was stored for u1.
    assert_eq!(
        state_json(&p, &["show", "--user", "u1"])["conversation_count"],
        0
    );
    let run = assay(&["state", "show", "--user", "u1", "--project", "/no/such/dir"]);
    rejected(&run, "does not exist");
    assert!(!std::path::Path::new("/no/such/dir").exists());
    let empty = tempfile::tempdir().unwrap();
    let run = assay(&[
        "state",
        "show",
        "--user",
        "u1",
        "--project",
        empty.path().to_str().unwrap(),
    ]);
    rejected(&run, "is not an assay project");
    assert!(!empty.path().join(".assay").exists());
}
