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
        r.failures[0].starts_with("critical assertion 1 `not-contains` failed"),
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
    assert_eq!(case.audience(), crate::entity::DEFAULT_AUDIENCE);
    let bad = serde_json::from_value::<AnswerCase>(
        json!({"test_id": "A", "message": "m", "minimum": {"faithful": 1}}),
    );
    assert!(bad.unwrap_err().to_string().contains("faithful"));
}
