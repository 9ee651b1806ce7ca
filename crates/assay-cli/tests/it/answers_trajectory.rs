//! Issue 29: trajectory checks on an answer case whose product reports its own tool calls
//! (`tests/fixtures/answer-kb`'s `product.py`: with its grounding rule it looks the loan up and
//! renews it once; without it, it renews three times without looking). The case's own bank is
//! written by the test, so the fixture's bank and its counts stay as they are.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::answers::{Library, case, library};

const BANK: &str = "test_banks/answer/loans.json";

fn write_case(lib: &Library, trajectory: &Value) {
    lib.scratch.write_json(
        BANK,
        &json!({"bank_type": "ANSWER", "version": "1.0", "tests": [{
            "test_id": "LIB-T1", "name": "Renews a loan after looking it up",
            "message": "Renew my loan for book 42.",
            "user_state": {"user_type": "PATRON"}, "metrics": [], "is_critical": true,
            "trajectory": trajectory
        }]}),
    );
}

fn rules() -> Value {
    json!({"order": ["find_loan", "renew_loan"], "calls": {"renew_loan": {"max": 1}},
           "arguments": [{"tool": "renew_loan", "match": {"book": 42}}]})
}

fn check<'a>(c: &'a Value, prefix: &str) -> &'a Value {
    c["trajectory"]
        .as_array()
        .unwrap_or_else(|| panic!("no trajectory checks: {c}"))
        .iter()
        .find(|t| t["name"].as_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("no check {prefix}: {}", c["trajectory"]))
}

fn names(calls: &Value) -> Vec<(String, u64)> {
    calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["call"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_honest_product_passes_and_the_blind_one_fails_naming_the_call() {
    let lib = library();
    write_case(&lib, &rules());
    let args = ["--banks", "answer", "--test", "LIB-T1", "--json"];

    let honest = lib.run(&args);
    assert_eq!(honest.code, 0, "{honest:?}");
    let log = honest.json();
    let c = case(&log, "LIB-T1");
    assert_eq!(c["is_hard_fail"], false, "{c}");
    assert_eq!(c["score"], 100, "{c}");
    let order = check(c, "trajectory: order find_loan → renew_loan");
    assert_eq!(order["status"], "passed");
    assert_eq!(
        names(&order["calls"]),
        [("find_loan".to_owned(), 1), ("renew_loan".to_owned(), 2)]
    );
    assert_eq!(order["calls"][0]["id"], "call-1");
    assert_eq!(order["source"], "the product's tool calls");
    assert_eq!(
        check(c, "trajectory: renew_loan called at most 1")["status"],
        "passed"
    );
    assert_eq!(
        check(c, "trajectory: renew_loan called with")["status"],
        "passed"
    );

    // Without its grounding rule the product renews three times and never looks the loan up.
    lib.scratch.edit(
        "prompts/answerer_system_prompt.txt",
        "Answer only from the context you are given",
        "Answer from what you know",
    );
    // The case is critical: its failure makes the run CRITICAL, and the gate fails (exit 1).
    std::fs::remove_dir_all(lib.scratch.path("results")).unwrap();
    let blind = lib.run(&args);
    assert_eq!(blind.code, 1, "{blind:?}");
    let log = blind.json();
    let c = case(&log, "LIB-T1");
    assert_eq!(c["is_hard_fail"], true, "{c}");
    assert_eq!(c["is_critical_failure"], true, "{c}");
    assert_eq!(
        c["score"], 0,
        "a failed trajectory check outranks the rest: {c}"
    );
    let order = check(c, "trajectory: order");
    assert_eq!(order["status"], "failed");
    assert_eq!(order["details"][0], "find_loan was never called", "{order}");
    let bounds = check(c, "trajectory: renew_loan called at most 1");
    assert_eq!(bounds["status"], "failed");
    assert_eq!(names(&bounds["calls"]), [("renew_loan".to_owned(), 2)]);
    assert_eq!(
        bounds["details"][0],
        "renew_loan called 3 times, at most 1: the 2nd is renew_loan (call 2, turn 2)"
    );
    // The arguments rule still holds: the book is right, the path to it is not.
    assert_eq!(
        check(c, "trajectory: renew_loan called with")["status"],
        "passed"
    );
    let failures = c["failures"].to_string();
    assert!(
        failures.contains("trajectory: order find_loan → renew_loan")
            && failures.contains("renew_loan (call 2, turn 2)"),
        "{failures}"
    );

    // The reports list each check with its status and the calls it names.
    let report = std::fs::read_dir(lib.scratch.path("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "md"))
        .expect("a Markdown report");
    let md = std::fs::read_to_string(report).unwrap();
    assert!(
        md.contains("✗ trajectory: renew_loan called at most 1"),
        "{md}"
    );
    assert!(md.contains("renew_loan (call 2)"), "{md}");
    assert_eq!(
        lib.stats.received.load(Ordering::SeqCst),
        0,
        "no judge call"
    );
}

#[test]
fn bad_trajectory_rules_are_exit_2_naming_the_field() {
    let bad: [(Value, &[&str]); 3] = [
        (
            json!({"order": ["find_loan"], "tool_used": ["find_loan"]}),
            &["loans.json", "trajectory", "tool_used"],
        ),
        (
            json!({"order": ["find_loan", ""]}),
            &["loans.json", "LIB-T1", "trajectory.order[1]"],
        ),
        (
            json!({"calls": {"renew_loan": {"min": 2, "max": 1}}}),
            &["loans.json", "LIB-T1", "trajectory.calls.renew_loan.min"],
        ),
    ];
    for (rules, wanted) in bad {
        let lib = library();
        write_case(&lib, &rules);
        let run = lib.run(&["--banks", "answer", "--test", "LIB-T1"]);
        assert_eq!(run.code, 2, "{rules}: {run:?}");
        for w in wanted {
            assert!(run.stderr.contains(w), "no {w:?} in {}", run.stderr);
        }
        assert!(!lib.scratch.path("results").exists(), "nothing written");
    }
}
