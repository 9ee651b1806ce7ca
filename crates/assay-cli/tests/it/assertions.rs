//! Deterministic assertions (`assert` on an optimizer test case) through the real binary: a
//! passing and a failing fixture side by side, a critical assertion overriding the rule and the
//! grader, an unmeasured cost reported as such, and bad specs refused with exit 2 naming file,
//! line and field before any model call.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::assertion_types::{check_statuses, every_type};
use crate::optimize::{args, project, provider, run_in};

/// Three cases the production prompts already answer or not (`[d:0]` needs no marked agent):
/// line 1 passes every assertion (its cost unmeasured), line 2 is right by the rule and the
/// grader but fails a critical assertion, line 3 fails a plain one.
const CASES: &str = concat!(
    r#"{"question": "Capital of France? [key:Paris] [d:0]", "files": [], "answer": "Paris", "assert": [{"type": "equals", "value": "Paris"}, {"type": "latency", "value": 600000}, {"type": "cost", "value": 1}]}"#,
    "\n",
    r#"{"question": "Largest planet? [key:Jupiter] [d:0]", "files": [], "answer": "Jupiter", "assert": [{"type": "starts-with", "value": "The", "critical": true}]}"#,
    "\n",
    r#"{"question": "Author of Hamlet? [key:Shakespeare] [d:3]", "files": [], "answer": "Shakespeare", "assert": [{"type": "not-icontains", "value": "not sure"}, {"type": "contains", "value": "Shakespeare", "weight": 2}], "assert_threshold": 0.5}"#,
    "\n",
);

#[test]
fn assertions_are_checked_recorded_and_a_critical_failure_makes_a_case_incorrect() {
    let p = provider(Duration::ZERO);
    let s = project(&p, "");
    s.write("cases/asserted.jsonl", CASES);
    let mut a = args("asserted", "1");
    a[6] = "cases/asserted.jsonl";
    a[8] = "cases/asserted.jsonl";
    let run = run_in(&s, &a);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    let cases = &report["baseline"]["cases"];

    // Line 1: every decided assertion passes; the cost was not measured: an error, not a fail.
    let one = &cases[0]["assertions"];
    assert_eq!(cases[0]["factually_correct"], true, "{}", cases[0]);
    assert_eq!(
        (one["passed"].as_bool(), one["errors"].as_u64()),
        (Some(true), Some(1))
    );
    assert_eq!(one["results"][1]["status"], "passed", "{one}");
    assert_eq!(one["results"][2]["status"], "error");
    assert_eq!(one["results"][2]["reason"], "cost was not measured");

    // Line 2: the rule and the grader say correct; the critical assertion decides.
    let two = &cases[1];
    assert_eq!(two["output"], "Jupiter", "{two}");
    assert_eq!(two["rubric"]["factually_correct"], true, "{two}");
    assert_eq!(two["factually_correct"], false, "{two}");
    assert_eq!(two["assertions"]["critical_failed"], true);
    assert!(
        two["correct_why"]
            .as_str()
            .unwrap()
            .starts_with("critical assertion failed: assert[0] starts-with"),
        "{two}"
    );

    // Line 3: the answer is `not sure`: the plain assertion fails, the weighted score is 0.
    let three = &cases[2]["assertions"];
    assert_eq!(three["results"][0]["status"], "failed", "{three}");
    assert_eq!(
        (three["score"].as_f64(), three["passed"].as_bool()),
        (Some(0.0), Some(false))
    );
    assert_eq!(three["threshold"], 0.5);
    assert_eq!(report["baseline"]["metrics"]["factually_correct_count"], 1);

    // The Markdown report lists what did not pass, a line each.
    let md = std::fs::read_to_string(s.path("experiments/asserted/report.md")).unwrap();
    assert!(md.contains("## Assertions that did not pass"), "{md}");
    assert!(
        md.contains(
            "line 2: assert[0] `starts-with` (critical) failed: does not start with \"The\""
        ),
        "{md}"
    );
    assert!(
        md.contains("line 1: assert[2] `cost` could not be checked: cost was not measured"),
        "{md}"
    );
    assert!(
        md.contains("line 3: assert[0] `not-icontains` failed"),
        "{md}"
    );
    assert!(
        !md.contains("line 1: assert[0]"),
        "a passing assertion gets no line"
    );
}

#[test]
fn bad_assertion_specs_are_exit_2_naming_file_line_and_field() {
    let p = provider(Duration::ZERO);
    let s = project(&p, "");
    let first = CASES.lines().next().unwrap();
    for (bad, want) in [
        (
            r#"{"question": "q", "files": [], "answer": "a", "assert": [{"type": "contains", "value": "a"}, {"type": "regex", "value": "(unclosed"}]}"#,
            "bad.jsonl:2: assert[1].value: invalid regular expression",
        ),
        (
            r#"{"question": "q", "files": [], "answer": "a", "assert": [{"type": "contians", "value": "a"}]}"#,
            "bad.jsonl:2: assert[0].type: unknown assertion type `contians` (did you mean `contains`?)",
        ),
        (
            r#"{"question": "q", "files": [], "answer": "a", "assert": [{"type": "length", "value": 5}]}"#,
            "bad.jsonl:2: assert[0].value: expected {\"min\": …, \"max\": …} in characters, found a number",
        ),
        (
            r#"{"question": "q", "files": [], "answer": "a", "assert": [{"type": "json-schema", "value": {"type": "object"}, "critical": 1}]}"#,
            "bad.jsonl:2: assert[0].critical: expected true or false, found 1",
        ),
        (
            r#"{"question": "q", "files": [], "answer": "a", "assert": [{"type": "is-json"}], "assert_threshold": 2}"#,
            "bad.jsonl:2: assert_threshold: must be a share between 0 and 1, found 2",
        ),
    ] {
        s.write("cases/bad.jsonl", &format!("{first}\n{bad}\n"));
        let mut a = args("bad", "3");
        a[6] = "cases/bad.jsonl";
        let run = run_in(&s, &a);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains(want), "want {want:?} in {}", run.stderr);
    }
    assert!(!s.path("experiments").exists(), "nothing written");
    assert_eq!(p.stats.agent.load(Ordering::SeqCst), 0, "no model called");
}

#[test]
fn every_assertion_type_passes_and_fails_on_an_optimizer_answer() {
    let p = provider(Duration::ZERO);
    let s = project(&p, "");
    // The chain answers `Paris`; the target's latency is measured, its cost is not.
    let specs = every_type("Paris", true, false);
    let list: Vec<serde_json::Value> = specs.iter().map(|(s, _)| s.clone()).collect();
    let line = serde_json::json!({
        "question": "Capital of France? [key:Paris] [d:0]", "files": [], "answer": "Paris",
        "assert": list, "assert_threshold": 0
    });
    s.write("cases/types.jsonl", &format!("{line}\n"));
    let mut a = args("types", "1");
    a[6] = "cases/types.jsonl";
    a[8] = "cases/types.jsonl";
    let run = run_in(&s, &a);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    let case = &report["baseline"]["cases"][0];
    assert_eq!(case["output"], "Paris", "{case}");
    check_statuses(&specs, &case["assertions"]["results"]);
}
