//! Issue 29: every assertion type passes and fails on one reply, in each of the three places
//! that take assertions (answer cases, optimizer test cases, simulator scenarios). The table is
//! built from the reply the place actually produced, so the same rules are checked everywhere.

use serde_json::{Value, json};

/// For each assertion type (and its `not-` form), one spec that passes and one that fails on
/// `reply`, with the status each must end in. `latency_measured`/`cost_measured` say whether the
/// place measures them; an unmeasured one must end in `error`, never a verdict.
pub(crate) fn every_type(
    reply: &str,
    latency_measured: bool,
    cost_measured: bool,
) -> Vec<(Value, &'static str)> {
    let trimmed = reply.trim();
    let word = reply
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| w.chars().count() >= 3)
        .unwrap_or_else(|| panic!("no word of 3 letters in {reply:?}"))
        .to_owned();
    let upper = word.to_uppercase();
    let absent = "qzxv-absent";
    let start: String = trimmed.chars().take(3).collect();
    let n = reply.chars().count();
    let json_reply = serde_json::from_str::<Value>(trimmed).is_ok();
    let refusal = assay_core::assertion::refusal(reply).is_some();
    let (json_pass, json_fail) = if json_reply {
        (json!({"type": "is-json"}), json!({"type": "not-is-json"}))
    } else {
        (json!({"type": "not-is-json"}), json!({"type": "is-json"}))
    };
    let (schema_pass, schema_fail) = if json_reply {
        (
            json!({"type": "json-schema", "value": {}}),
            json!({"type": "json-schema", "value": {"type": "object", "required": [absent]}}),
        )
    } else {
        (
            json!({"type": "not-json-schema", "value": {"type": "object"}}),
            json!({"type": "json-schema", "value": {"type": "object"}}),
        )
    };
    let (refusal_pass, refusal_fail) = if refusal {
        (json!({"type": "refusal"}), json!({"type": "not-refusal"}))
    } else {
        (json!({"type": "not-refusal"}), json!({"type": "refusal"}))
    };
    let latency = if latency_measured {
        ("passed", "failed")
    } else {
        ("error", "error")
    };
    let cost = if cost_measured {
        ("passed", "failed")
    } else {
        ("error", "error")
    };
    vec![
        (json!({"type": "equals", "value": trimmed}), "passed"),
        (json!({"type": "equals", "value": absent}), "failed"),
        (json!({"type": "contains", "value": word}), "passed"),
        (json!({"type": "contains", "value": absent}), "failed"),
        (json!({"type": "not-contains", "value": absent}), "passed"),
        (json!({"type": "not-contains", "value": word}), "failed"),
        (json!({"type": "icontains", "value": upper}), "passed"),
        (json!({"type": "icontains", "value": absent}), "failed"),
        (
            json!({"type": "contains-any", "value": [absent, word]}),
            "passed",
        ),
        (
            json!({"type": "contains-any", "value": [absent, "qzxv-2"]}),
            "failed",
        ),
        (
            json!({"type": "contains-all", "value": [word, start]}),
            "passed",
        ),
        (
            json!({"type": "contains-all", "value": [word, absent]}),
            "failed",
        ),
        (
            json!({"type": "icontains-any", "value": [absent, upper]}),
            "passed",
        ),
        (
            json!({"type": "icontains-any", "value": [absent, "QZXV-2"]}),
            "failed",
        ),
        (
            json!({"type": "icontains-all", "value": [upper, start.to_uppercase()]}),
            "passed",
        ),
        (
            json!({"type": "icontains-all", "value": [upper, absent]}),
            "failed",
        ),
        (
            json!({"type": "regex", "value": regex_escape(&word)}),
            "passed",
        ),
        (json!({"type": "regex", "value": "^qzxv"}), "failed"),
        (json!({"type": "not-regex", "value": "^qzxv"}), "passed"),
        (json!({"type": "starts-with", "value": start}), "passed"),
        (json!({"type": "starts-with", "value": absent}), "failed"),
        (json_pass, "passed"),
        (json_fail, "failed"),
        (schema_pass, "passed"),
        (schema_fail, "failed"),
        (
            json!({"type": "length", "value": {"max": n + 10}}),
            "passed",
        ),
        (
            json!({"type": "length", "value": {"min": n + 10}}),
            "failed",
        ),
        (json!({"type": "not-length", "value": {"max": 1}}), "passed"),
        (json!({"type": "latency", "value": 600_000}), latency.0),
        (json!({"type": "latency", "value": 0.001}), latency.1),
        (json!({"type": "cost", "value": 1000}), cost.0),
        (json!({"type": "cost", "value": 0.000_000_001}), cost.1),
        (refusal_pass, "passed"),
        (refusal_fail, "failed"),
    ]
}

fn regex_escape(word: &str) -> String {
    word.chars()
        .flat_map(|c| {
            if c.is_alphanumeric() {
                vec![c]
            } else {
                vec!['\\', c]
            }
        })
        .collect()
}

/// Checks each result's status against the table, naming the spec that differs.
pub(crate) fn check_statuses(specs: &[(Value, &'static str)], results: &Value) {
    let results = results
        .as_array()
        .unwrap_or_else(|| panic!("no assertion results: {results}"));
    assert_eq!(results.len(), specs.len(), "{results:?}");
    for ((spec, status), r) in specs.iter().zip(results) {
        assert_eq!(r["status"], *status, "{spec} → {r}");
    }
    // Every type appears at least once, so a type added later is not silently untested.
    for kind in [
        "equals",
        "contains",
        "icontains",
        "contains-any",
        "contains-all",
        "icontains-any",
        "icontains-all",
        "regex",
        "starts-with",
        "is-json",
        "json-schema",
        "length",
        "latency",
        "cost",
        "refusal",
    ] {
        assert!(
            specs
                .iter()
                .any(|(s, _)| s["type"].as_str().unwrap().trim_start_matches("not-") == kind),
            "{kind} is not in the table"
        );
    }
    assert_eq!(
        assay_core::assertion::Kind::type_names().len(),
        2 * 15,
        "a new assertion type: add it to tests/it/assertion_types.rs"
    );
}
