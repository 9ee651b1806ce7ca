//! An answer case's `trajectory:` through [`run_case`]: validated at load with errors naming
//! `trajectory.…`, checked against the calls the product reports, deciding the case.

use std::sync::Arc;

use assay_core::answer::{AnswerCase, ContextItem};
use assay_core::simulation::{CheckStatus, ToolCallRecord};
use assay_providers::{ChatModel, ChatRequest, ChatResponse, ProviderError};
use serde_json::{Value, json};

use super::*;

/// A product that replies with fixed calls (or reports none).
struct Product(Option<Vec<(&'static str, Value)>>);

#[async_trait::async_trait]
impl AnswerSystem for Product {
    fn describe(&self) -> String {
        "test product".into()
    }
    fn stateless(&self) -> bool {
        true
    }
    async fn respond(&self, _: &AnswerAsk<'_>) -> Result<AnswerReply, String> {
        Ok(AnswerReply {
            text: "Book 42 is renewed.".into(),
            latency_ms: 5.0,
            tool_calls: self.0.as_ref().map(|calls| {
                calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, arguments))| ToolCallRecord {
                        id: format!("call-{}", i + 1),
                        name: (*name).to_owned(),
                        server: None,
                        arguments: arguments.clone(),
                        result: String::new(),
                        is_error: false,
                        duration_ms: 0,
                    })
                    .collect()
            }),
            ..AnswerReply::default()
        })
    }
}

struct OneContext;

#[async_trait::async_trait]
impl ContextProvider for OneContext {
    async fn context(&self, _: &str, _: &UserState, _: &str) -> Result<Vec<ContextItem>, String> {
        Ok(vec![ContextItem {
            entity: Some("loans".into()),
            text: "Loans can be renewed.".into(),
        }])
    }
    fn unknown_entity(&self, entity: &str) -> Option<String> {
        (entity != "loans").then(|| format!("`{entity}` is unknown"))
    }
}

/// The cases here compute no metric: the judge must never be asked.
#[derive(Debug)]
struct NoJudge;

#[async_trait::async_trait]
impl ChatModel for NoJudge {
    fn model(&self) -> &'static str {
        "test/no-judge"
    }
    async fn chat(&self, _: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        Err(ProviderError::config("the judge was called"))
    }
}

fn backend(calls: Option<Vec<(&'static str, Value)>>) -> AnswerBackend {
    AnswerBackend {
        system: Arc::new(Product(calls)),
        context: Arc::new(OneContext),
        judge: Some(judge::AnswerJudge {
            model: Arc::new(NoJudge),
            embedder: None,
            max_tokens: 100,
        }),
        config: AnswerConfig::default(),
    }
}

fn case(trajectory: &Value) -> AnswerCase {
    serde_json::from_value(json!({
        "test_id": "T-1", "message": "Renew my loan for book 42.", "metrics": [],
        "trajectory": trajectory
    }))
    .unwrap()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn rules() -> Value {
    json!({"order": ["find_loan", "renew_loan"], "calls": {"renew_loan": {"max": 1}},
           "arguments": [{"tool": "renew_loan", "match": {"book": 42}}]})
}

#[test]
fn an_honest_product_passes_every_trajectory_check() {
    let c = case(&rules());
    validate_case(&c).unwrap();
    let honest = vec![
        ("find_loan", json!({"book": 42})),
        ("renew_loan", json!({"book": 42.0})),
    ];
    let r = block_on(run_case(&backend(Some(honest)), &c));
    assert_eq!(r.error, None);
    assert_eq!(r.trajectory.len(), 3, "{:?}", r.trajectory);
    assert!(
        r.trajectory.iter().all(|c| c.status == CheckStatus::Passed),
        "{:?}",
        r.trajectory
    );
    assert_eq!(r.trajectory[0].calls[0].id, "call-1");
    assert_eq!(r.score, Some(100));
    assert!(!r.is_hard_fail);
}

#[test]
fn a_product_that_renews_blindly_fails_naming_the_call() {
    let blind = vec![
        ("renew_loan", json!({"book": 42})),
        ("renew_loan", json!({"book": 42})),
        ("renew_loan", json!({"book": 42})),
    ];
    let r = block_on(run_case(&backend(Some(blind)), &case(&rules())));
    assert_eq!(r.score, Some(0));
    assert!(r.is_hard_fail);
    let failed: Vec<&str> = r
        .trajectory
        .iter()
        .filter(|c| c.status == CheckStatus::Failed)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        failed,
        [
            "trajectory: order find_loan → renew_loan",
            "trajectory: renew_loan called at most 1"
        ]
    );
    assert!(
        r.failures
            .iter()
            .any(|f| f.contains("the 2nd is renew_loan (call 2, turn 2)")),
        "{:?}",
        r.failures
    );
}

#[test]
fn a_product_that_reports_no_calls_is_checked_against_none() {
    let r = block_on(run_case(
        &backend(None),
        &case(&json!({"tools_used": ["find_loan"]})),
    ));
    assert_eq!(r.trajectory[0].status, CheckStatus::Failed);
    assert!(
        r.trajectory[0]
            .details
            .iter()
            .any(|d| d.contains("reported no tool calls")),
        "{:?}",
        r.trajectory
    );
    assert!(r.is_hard_fail);
    // Without a trajectory, nothing is checked and nothing is said.
    let plain: AnswerCase =
        serde_json::from_value(json!({"test_id": "T-2", "message": "Hello", "metrics": []}))
            .unwrap();
    let r = block_on(run_case(&backend(None), &plain));
    assert!(r.trajectory.is_empty());
    assert_eq!(r.score, Some(100));
}

#[test]
fn advisory_rules_are_reported_and_decide_nothing() {
    let mut advisory = rules();
    advisory["advisory"] = json!(true);
    let blind = vec![("renew_loan", json!({"book": 7}))];
    let r = block_on(run_case(&backend(Some(blind)), &case(&advisory)));
    assert!(r.trajectory.iter().any(|c| c.status == CheckStatus::Failed));
    assert!(!r.is_hard_fail, "{:?}", r.failures);
    assert_eq!(r.score, Some(100));
}

#[test]
fn bad_trajectory_rules_are_refused_naming_the_field() {
    let e = validate_case(&case(&json!({"order": ["find_loan", ""]}))).unwrap_err();
    assert!(e.starts_with("trajectory.order[1]: "), "{e}");
    let e = validate_case(&case(
        &json!({"calls": {"renew_loan": {"min": 2, "max": 1}}}),
    ))
    .unwrap_err();
    assert!(e.starts_with("trajectory.calls.renew_loan.min: "), "{e}");
    let e = validate_case(&case(&json!({}))).unwrap_err();
    assert!(e.starts_with("trajectory: no rule given"), "{e}");
    let unknown = serde_json::from_value::<AnswerCase>(json!({
        "test_id": "T-1", "message": "m", "trajectory": {"tool_used": ["a"]}}));
    assert!(unknown.is_err());
}
