use super::*;
use crate::bank::BankType;
use crate::scoring::Breakdown;

#[test]
fn a_stale_change_writes_values_as_one_clipped_line() {
    use serde_json::json;
    let c = StaleChange::new("priority", Some(&json!(50)), Some(&json!(77)));
    assert_eq!((c.old.as_str(), c.new.as_str()), ("50", "77"));
    let c = StaleChange::new("subtype", None, Some(&json!("technique")));
    assert_eq!((c.old.as_str(), c.new.as_str()), ("null", "technique"));
    let c = StaleChange::new("audience_types", Some(&json!(["PARENT"])), Some(&json!([])));
    assert_eq!((c.old.as_str(), c.new.as_str()), ("[\"PARENT\"]", "[]"));
    // A long text keeps its first characters, on one line, and says it was cut.
    let long = format!("first line\n{}", "word ".repeat(40));
    let c = StaleChange::new("concept_summary", Some(&json!(long)), Some(&json!("short")));
    assert_eq!(c.old.chars().count(), StaleChange::CLIPPED);
    assert!(c.old.starts_with("first line word word"), "{}", c.old);
    assert!(c.old.ends_with('…') && !c.old.contains('\n'), "{}", c.old);
    assert_eq!(c.new, "short");
    // Exactly at the limit: kept whole.
    let exact = "x".repeat(StaleChange::CLIPPED);
    assert_eq!(StaleChange::new("t", Some(&json!(exact)), None).old, exact);
}

fn always(score: u32) -> AlwaysCaseResult {
    AlwaysCaseResult {
        test_id: format!("A{score}"),
        name: String::new(),
        user_type: "PARENT".into(),
        loaded_entities: vec![],
        expected_always: vec![],
        missing: vec![],
        score,
        breakdown: Breakdown::default(),
        is_hard_fail: score == 0,
        duration_ms: None,
        verdict: None,
    }
}

fn pattern(id: &str, score: u32, critical_failure: bool) -> PatternCaseResult {
    PatternCaseResult {
        test_id: id.into(),
        name: String::new(),
        prompt: String::new(),
        pattern_type: "crisis".into(),
        matched_entities: vec![],
        crisis_matches: vec![],
        keyword_matches: vec![],
        expected_matches: vec![],
        expected_secondary: vec![],
        not_expected_matches: vec![],
        primary_pass: score > 0,
        secondary_missing: vec![],
        false_positives: vec![],
        score,
        breakdown: Breakdown::default(),
        is_hard_fail: score == 0,
        is_critical: true,
        is_critical_failure: critical_failure,
        duration_ms: None,
        verdict: None,
    }
}

#[test]
fn health_thresholds() {
    assert_eq!(Health::assess(true, 100.0, 0), Health::Critical);
    assert_eq!(Health::assess(false, 90.0, 0), Health::Excellent);
    assert_eq!(Health::assess(false, 95.0, 1), Health::Good);
    assert_eq!(Health::assess(false, 80.0, 3), Health::Good);
    assert_eq!(Health::assess(false, 79.9, 0), Health::Fair);
    assert_eq!(Health::assess(false, 70.0, 0), Health::Fair);
    assert_eq!(Health::assess(false, 69.9, 0), Health::Poor);
    assert!(Health::Critical < Health::Poor && Health::Good < Health::Excellent);
}

#[test]
fn weights_renormalise_over_banks_that_ran() {
    let banks = BankResults {
        always: Some(AlwaysResults::from_results(vec![always(100), always(0)])),
        pattern: Some(PatternResults::from_results(vec![pattern(
            "P1", 100, false,
        )])),
        ..BankResults::default()
    };
    let s = banks.summarize(&Weights::default(), None);
    // always 50 × 0.10 + pattern 100 × 0.15, over 0.25
    assert_eq!(s.combined_score, 80.0);
    assert_eq!(s.weights["always"], 0.4);
    assert_eq!(s.component_scores["semantic"], None);
    assert_eq!(s.hard_fail_count, 1, "hard fails count failing cases");
    assert_eq!(s.health_status, Health::Good);
}

#[test]
fn an_empty_bank_is_left_out() {
    let banks = BankResults {
        always: Some(AlwaysResults::from_results(vec![])),
        pattern: Some(PatternResults::from_results(vec![pattern(
            "P1", 100, false,
        )])),
        ..BankResults::default()
    };
    let s = banks.summarize(&Weights::default(), None);
    assert_eq!(s.combined_score, 100.0);
    assert_eq!(s.component_scores["always"], None);
    assert_eq!(s.health_status, Health::Excellent);
}

#[test]
fn a_critical_failure_makes_health_critical() {
    let banks = BankResults {
        pattern: Some(PatternResults::from_results(vec![
            pattern("P1", 100, false),
            pattern("PAT-NEG-001", 80, true),
        ])),
        ..BankResults::default()
    };
    let s = banks.summarize(&Weights::default(), None);
    assert_eq!(s.critical_failures, vec!["PAT-NEG-001"]);
    assert_eq!(s.health_status, Health::Critical);
}

#[test]
fn group_scores_average_and_count() {
    let p = PatternResults::from_results(vec![
        PatternCaseResult {
            pattern_type: "a".into(),
            ..pattern("P1", 100, false)
        },
        PatternCaseResult {
            pattern_type: "a".into(),
            ..pattern("P2", 0, false)
        },
        PatternCaseResult {
            pattern_type: "b".into(),
            ..pattern("P3", 90, false)
        },
    ]);
    let g = &p.pattern_type_scores;
    assert_eq!(
        g["a"],
        GroupScore {
            avg: 50.0,
            tests: 2,
            hard_fails: 1
        }
    );
    assert_eq!(g["b"].avg, 90.0);
}

#[test]
fn a_run_is_partial_for_each_selection_of_part_of_the_suite() {
    let whole = RunFilters {
        banks: BankType::ALL.to_vec(),
        ..RunFilters::default()
    };
    assert!(!whole.is_partial() && !whole.has_drafts());
    let test = RunFilters {
        test: Some("SEM-01".into()),
        ..whole.clone()
    };
    assert_eq!(test.partial(), vec!["--test SEM-01"]);
    let subset = RunFilters {
        banks: vec![BankType::State, BankType::Pattern],
        banks_left_out: vec![BankType::Semantic, BankType::Always],
        ..RunFilters::default()
    };
    assert_eq!(
        subset.partial(),
        vec!["--banks state,pattern (left out: semantic, always)"]
    );
    let changed = RunFilters {
        changed_since: Some(ChangedSince {
            reference: "latest".into(),
            ran: 15,
            skipped: 46,
            ..ChangedSince::default()
        }),
        ..whole.clone()
    };
    assert_eq!(
        changed.partial(),
        vec!["--changed-since latest (15 of 61 cases)"]
    );
    // Drafts are not partial, but set the run apart; none pending is a whole run.
    let drafts = RunFilters {
        drafts: Some(2),
        ..whole.clone()
    };
    assert!(!drafts.is_partial() && drafts.has_drafts());
    assert!(
        !RunFilters {
            drafts: Some(0),
            ..whole
        }
        .has_drafts()
    );
    // The left-out banks are read back, and absent when none were.
    let json = serde_json::to_value(&subset).unwrap();
    assert_eq!(
        json["banks_left_out"],
        serde_json::json!(["semantic", "always"])
    );
    assert_eq!(serde_json::from_value::<RunFilters>(json).unwrap(), subset);
    assert!(
        serde_json::to_value(&test)
            .unwrap()
            .get("banks_left_out")
            .is_none()
    );
}
