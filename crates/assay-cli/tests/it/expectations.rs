//! `assay expectations`: versioned expectations per 000 §4 (seed validation list, 000 §10.3).

use serde_json::{Value, json};

use crate::support::Scratch;

fn resolved(p: &Scratch) -> (Value, Value) {
    let run = p.assay(&["expectations", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    (doc["summary"].clone(), doc["expectations"].clone())
}

fn case<'a>(all: &'a Value, id: &str) -> &'a Value {
    all.as_array()
        .unwrap()
        .iter()
        .find(|c| c["test_id"] == id)
        .unwrap_or_else(|| panic!("{id} missing"))
}

#[test]
fn the_example_shows_all_three_sources() {
    let p = Scratch::example();
    let (summary, all) = resolved(&p);
    assert_eq!(
        summary,
        json!({"original": 90, "opus": 3, "human_override": 1})
    );
    assert_eq!(all.as_array().unwrap().len(), 94);
    // The override in the older file wins over the newer calibration of the same case.
    assert_eq!(
        case(&all, "V2-LOY-002")["_source"],
        "human_override_2026-10-09"
    );
    assert_eq!(case(&all, "V2-ALN-001")["_source"], "opus_2026-11-05");
    assert_eq!(case(&all, "V2-GR-001")["_source"], "original");
}

#[test]
fn a_history_entry_wins_over_the_original_and_an_override_over_the_entry() {
    let p = Scratch::example();
    let entry = |override_: Value| {
        json!({
            "version": "2026-12-01T10:00:00Z",
            "calibration_trigger": "manual",
            "kb_version": "v9",
            "changes": [{
                "test_id": "V2-GR-001",
                "previous": {"expected_primary": ["gray_rock"], "expected_secondary": [], "not_expected": [], "rank_check": []},
                "updated": {"expected_primary": ["medium_response_time"], "expected_secondary": [], "not_expected": [], "rank_check": []},
                "opus_reasoning": "test",
                "human_override": override_
            }],
            "unchanged_count": 93,
            "changed_count": 1
        })
    };
    let rel = "test_banks/semantic/history/expectations_2026-12-01.json";
    p.write_json(rel, &entry(Value::Null));
    let (_, all) = resolved(&p);
    let c = case(&all, "V2-GR-001");
    assert_eq!(c["_source"], "opus_2026-12-01");
    assert_eq!(c["expected_primary"], json!(["medium_response_time"]));

    p.write_json(rel, &entry(json!({"expected_primary": ["boundary_setting"], "override_date": "2026-12-02", "reason": "clinical review"})));
    let before = p.read(rel);
    let (summary, all) = resolved(&p);
    let c = case(&all, "V2-GR-001");
    assert_eq!(c["_source"], "human_override_2026-12-02");
    assert_eq!(c["expected_primary"], json!(["boundary_setting"]));
    assert_eq!(summary["human_override"], 2);
    assert_eq!(
        p.read(rel),
        before,
        "the loader never modifies a history file"
    );
}
