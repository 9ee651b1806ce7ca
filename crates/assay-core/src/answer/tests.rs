use serde_json::json;

use super::*;
use crate::assertion::{AssertionSet, Output};

fn outcome(score: Option<f64>, minimum: Option<f64>) -> MetricOutcome {
    MetricOutcome {
        score,
        minimum,
        ..MetricOutcome::default()
    }
}

fn result(metrics: &[(Metric, MetricOutcome)]) -> AnswerCaseResult {
    AnswerCaseResult {
        test_id: "A-1".into(),
        message: "m".into(),
        reply: Some("Paris is the capital.".into()),
        metrics: metrics.iter().cloned().collect(),
        ..AnswerCaseResult::default()
    }
}

#[test]
fn the_score_is_the_weighted_mean_of_metrics_and_assertions() {
    let mut r = result(&[
        (Metric::Faithfulness, outcome(Some(0.5), None)),
        (Metric::AnswerRelevancy, outcome(Some(1.0), None)),
        (Metric::ContextRecall, outcome(None, None)),
    ]);
    let set = AssertionSet::parse(
        &json!([{"type": "contains", "value": "Paris"}, {"type": "contains", "value": "Lyon"}]),
        Some(0.5),
        "assert",
    )
    .unwrap();
    r.assertions = Some(set.evaluate(&Output::text("Paris is the capital.")));
    score_case(&mut r, &ScoreWeights::default());
    // (0.5 + 1.0 + 0.5) / 3 = 0.667; recall does not apply and is left out.
    assert_eq!(r.score, Some(67));
    assert!(!r.is_hard_fail, "{:?}", r.failures);

    let weights = ScoreWeights {
        metrics: [(Metric::Faithfulness, 3.0)].into_iter().collect(),
        assertions: 0.0,
    };
    score_case(&mut r, &weights);
    // (3 × 0.5 + 1.0) / 4 = 0.625
    assert_eq!(r.score, Some(63));
}

#[test]
fn a_metric_under_its_minimum_fails_the_case_and_keeps_its_score() {
    let mut r = result(&[(Metric::Faithfulness, outcome(Some(0.5), Some(0.8)))]);
    r.is_critical = true;
    score_case(&mut r, &ScoreWeights::default());
    assert_eq!(r.score, Some(50));
    assert!(r.is_hard_fail && r.is_critical_failure);
    assert_eq!(r.failures, ["faithfulness 0.50 below its minimum 0.80"]);
    assert_eq!(r.breakdown.primary_fail, Some(true));
}

#[test]
fn a_failed_critical_assertion_scores_zero_whatever_the_judge_says() {
    let mut r = result(&[(Metric::Faithfulness, outcome(Some(1.0), None))]);
    let set = AssertionSet::parse(
        &json!([{"type": "not-contains", "value": "capital", "critical": true}]),
        None,
        "assert",
    )
    .unwrap();
    r.assertions = Some(set.evaluate(&Output::text("Paris is the capital.")));
    score_case(&mut r, &ScoreWeights::default());
    assert_eq!(r.score, Some(0));
    assert!(r.is_hard_fail);
    assert!(
        r.failures[0].starts_with("critical assertion 1 `not-contains \"capital\"` failed"),
        "{:?}",
        r.failures
    );
}

#[test]
fn an_error_is_never_scored() {
    let mut r = result(&[(Metric::Faithfulness, outcome(Some(1.0), None))]);
    r.error = Some("the judge's reply is not JSON".into());
    score_case(&mut r, &ScoreWeights::default());
    assert_eq!(r.score, None);
    assert!(!r.is_hard_fail);
}

#[test]
fn cases_read_strictly() {
    let case: AnswerCase = serde_json::from_value(json!({
        "test_id": "A-1", "message": "When is the hose rota?", "reference": "Tuesdays.",
        "minimum": {"faithfulness": 0.8}, "assert": [{"type": "icontains", "value": "tuesday"}]
    }))
    .unwrap();
    assert_eq!(case.minimum.get(&Metric::Faithfulness), Some(&0.8));
    let bad = serde_json::from_value::<AnswerCase>(
        json!({"test_id": "A", "message": "m", "minimum": {"faithful": 1}}),
    );
    assert!(bad.unwrap_err().to_string().contains("faithful"));
}

fn trajectory_check(name: &str, passed: bool, advisory: bool) -> crate::simulation::CheckResult {
    use crate::simulation::{CallRef, CheckKind, CheckResult, CheckStatus};
    CheckResult {
        name: name.into(),
        status: if passed {
            CheckStatus::Passed
        } else {
            CheckStatus::Failed
        },
        details: if passed {
            Vec::new()
        } else {
            vec![
                "renew_loan called 3 times, at most 1: the 2nd is renew_loan (call 2, turn 2)"
                    .into(),
            ]
        },
        advisory,
        source: Some("the product's tool calls".into()),
        state: None,
        kind: CheckKind::Trajectory,
        calls: vec![CallRef {
            call: 2,
            turn: 2,
            id: "call-2".into(),
            name: "renew_loan".into(),
        }],
    }
}

#[test]
fn a_failed_trajectory_check_fails_the_case_with_score_0_naming_the_call() {
    let mut r = result(&[(Metric::Faithfulness, outcome(Some(1.0), None))]);
    r.is_critical = true;
    r.trajectory = vec![
        trajectory_check("trajectory: order find_loan → renew_loan", true, false),
        trajectory_check("trajectory: renew_loan called at most 1", false, false),
    ];
    score_case(&mut r, &ScoreWeights::default());
    assert_eq!(r.score, Some(0), "evidence outranks the judge");
    assert!(r.is_hard_fail && r.is_critical_failure);
    assert_eq!(
        r.failures,
        [
            "trajectory: renew_loan called at most 1 failed: renew_loan called 3 times, at most 1: the 2nd is renew_loan (call 2, turn 2)"
        ]
    );
    assert_eq!(r.breakdown.primary_fail, Some(true));

    // A failed check without a detail names its calls.
    r.trajectory[1].details.clear();
    score_case(&mut r, &ScoreWeights::default());
    assert_eq!(
        r.failures,
        ["trajectory: renew_loan called at most 1 failed: renew_loan (call 2, turn 2)"]
    );
}

#[test]
fn advisory_or_passed_trajectory_checks_only_report() {
    let mut r = result(&[(Metric::Faithfulness, outcome(Some(0.8), None))]);
    r.trajectory = vec![
        trajectory_check("trajectory: renew_loan called at most 1", false, true),
        trajectory_check("trajectory: find_loan used", true, false),
    ];
    score_case(&mut r, &ScoreWeights::default());
    assert_eq!(r.score, Some(80));
    assert!(!r.is_hard_fail, "{:?}", r.failures);
    // They are kept on the result, and read back from JSON; a result without any writes none.
    let text = serde_json::to_string(&r).unwrap();
    let back: AnswerCaseResult = serde_json::from_str(&text).unwrap();
    assert_eq!(back.trajectory, r.trajectory);
    r.trajectory.clear();
    assert!(!serde_json::to_string(&r).unwrap().contains("trajectory"));
}

#[test]
fn a_case_reads_its_trajectory_rules_and_refuses_unknown_fields() {
    let case: AnswerCase = serde_json::from_value(json!({
        "test_id": "T", "message": "m",
        "trajectory": {"order": ["find_loan", "renew_loan"], "calls": {"renew_loan": {"max": 1}}}
    }))
    .unwrap();
    let rules = case.trajectory.unwrap();
    assert_eq!(rules.order, ["find_loan", "renew_loan"]);
    assert_eq!(rules.calls["renew_loan"].max, Some(1));
    let bad = serde_json::from_value::<AnswerCase>(json!({
        "test_id": "T", "message": "m", "trajectory": {"tool_used": ["a"]}}));
    assert!(bad.unwrap_err().to_string().contains("tool_used"));
}

#[test]
fn a_plant_replaces_its_entity_text_in_place_or_is_added_after() {
    let item = |e: &str, t: &str| ContextItem {
        entity: Some(e.to_owned()),
        text: t.to_owned(),
    };
    let mut context = vec![item("a", "A"), item("b", "B")];
    let plants: Vec<ContextPlant> = serde_json::from_value(serde_json::json!([
        {"entity": "b", "text": "B, then an order"},
        {"entity": "z", "text": "Z, not selected"}
    ]))
    .unwrap();
    apply_plants(&mut context, &plants);
    assert_eq!(
        context,
        vec![
            item("a", "A"),
            item("b", "B, then an order"),
            item("z", "Z, not selected")
        ]
    );
    // An answer case carries them, strictly.
    let case: Result<AnswerCase, _> = serde_json::from_value(serde_json::json!({
        "test_id": "T", "message": "m", "plant": [{"entity": "b", "text": "x", "at": "end"}]
    }));
    assert!(case.unwrap_err().to_string().contains("at"));
}
