//! Answer cases in the web UI: the run page shows the answer bank's failures and errors apart,
//! an answer case's own page shows its reply, claims and assertions, and a run diff shows the
//! answer metrics that moved.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::Value;

use assay_core::aggregate::{Aggregator, CaseRecord};
use assay_core::answer::{AnswerCaseResult, ClaimVerdict, Metric, MetricOutcome, score_case};
use assay_core::bank::BankType;

use crate::support::Server;
use crate::ui::{INJECT, assert_inert, get};

/// A failing answer case (an unsupported claim at `faithfulness`) and an errored one.
fn answer_bank(faithfulness: f64) -> Value {
    let mut failing = AnswerCaseResult {
        test_id: "ANS-002".into(),
        name: "returns".into(),
        message: "Can I return a used helmet?".into(),
        reply: Some(format!("Yes, within 90 days. {INJECT}")),
        contexts: vec![assay_core::answer::ContextItem {
            entity: Some("kb_returns".into()),
            text: "Unused items can be returned within 30 days.".into(),
        }],
        metrics: BTreeMap::from([(
            Metric::Faithfulness,
            MetricOutcome {
                score: Some(faithfulness),
                minimum: Some(0.8),
                claims: vec![ClaimVerdict {
                    claim: "Used helmets can be returned within 90 days".into(),
                    supported: false,
                    entity: None,
                    reason: "the context allows 30 days".into(),
                }],
                ..MetricOutcome::default()
            },
        )]),
        ..AnswerCaseResult::default()
    };
    score_case(&mut failing, &assay_core::answer::ScoreWeights::default());
    let errored = AnswerCaseResult {
        test_id: "ANS-003".into(),
        message: "Do you fit tubeless tyres?".into(),
        error: Some("judge: faithfulness: the reply is not JSON".into()),
        ..AnswerCaseResult::default()
    };
    let mut agg = Aggregator::new(0, usize::MAX);
    agg.start(BankType::Answer, 2);
    agg.push(0, CaseRecord::Answer(failing));
    agg.push(1, CaseRecord::Answer(errored));
    serde_json::to_value(agg.finish().0.answer.unwrap()).unwrap()
}

/// Two saved runs of the state bank with an answer bank added: `before` with faithfulness
/// 1.0 on ANS-002, `after` with 0.25.
async fn two_runs(s: &Server) -> (String, String) {
    let (status, body) = s
        .get("/cli/test-harness?banks=state&save_results=true")
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let json = body["saved"]["json"].as_str().unwrap().to_owned();
    let text = std::fs::read_to_string(&json).unwrap();
    let mut ids = Vec::new();
    for (stamp, faithfulness) in [("2030-01-01-0900", 1.0), ("2030-01-02-0900", 0.25)] {
        let mut log: Value = serde_json::from_str(&text).unwrap();
        log["answer"] = answer_bank(faithfulness);
        log["filters"]["banks"] = serde_json::json!(["state", "answer"]);
        log["run_id"] = format!("run-{stamp}").into();
        s.write(
            &format!("results/results_{stamp}.json"),
            &serde_json::to_string(&log).unwrap(),
        );
        ids.push(stamp.to_owned());
    }
    (ids[0].clone(), ids[1].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answer_cases_show_on_the_run_page_their_own_page_and_the_diff() {
    let s = Server::example();
    let (before, after) = two_runs(&s).await;

    let run = get(&s, &format!("/ui/runs/{after}"), None).await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.body);
    assert_inert(&run, "the run page");
    let failures = run
        .body
        .find("<h2>Answer cases: failed or below 100</h2>")
        .expect(&run.body);
    let errors = run
        .body
        .find("<h2>Answer test errors</h2>")
        .expect(&run.body);
    assert!(failures < errors);
    assert!(
        run.body[failures..errors].contains(&format!("href=\"/ui/runs/{after}/cases/ANS-002\"")),
        "the failing case links to its page"
    );
    assert!(!run.body[failures..errors].contains("ANS-003"));
    assert!(run.body.contains("<h2>Answer metrics</h2>"));
    assert!(
        run.body.contains("faithfulness 0.25 over 1 case"),
        "{}",
        run.body
    );
    assert!(!run.body.contains("NaN"));

    let case = get(&s, &format!("/ui/runs/{after}/cases/ANS-002"), None).await;
    assert_eq!(case.status, StatusCode::OK, "{}", case.body);
    assert_inert(&case, "the answer case page");
    assert!(
        case.body.contains("<dt>bank</dt><dd>answer</dd>"),
        "{}",
        case.body
    );
    assert!(
        case.body.contains("<dt>hard fail</dt><dd>yes</dd>"),
        "{}",
        case.body
    );
    assert!(
        case.body
            .contains("faithfulness 0.25 below its minimum 0.80"),
        "{}",
        case.body
    );
    assert!(case.body.contains("faithfulness ≥ 0.80"), "{}", case.body);
    // The report's section: the reply, and the claim with its verdict.
    assert!(
        case.body
            .contains("Used helmets can be returned within 90 days")
    );
    assert!(
        case.body
            .contains("<td class=\"unwanted\">not supported</td>")
    );
    assert!(
        case.body.contains("&lt;script&gt;"),
        "the reply is shown, escaped"
    );

    let errored = get(&s, &format!("/ui/runs/{after}/cases/ANS-003"), None).await;
    assert_eq!(errored.status, StatusCode::OK, "{}", errored.body);
    assert!(
        errored
            .body
            .contains("an error kept it from a score: judge: faithfulness: the reply is not JSON"),
        "{}",
        errored.body
    );
    assert!(errored.body.contains("no score (an error)"));

    let diff = get(&s, &format!("/ui/runs/{before}/diff/{after}"), None).await;
    assert_eq!(diff.status, StatusCode::OK, "{}", diff.body);
    assert!(
        diff.body
            .contains("<a href=\"#metric_falls\">1 metric_falls</a>"),
        "{}",
        diff.body
    );
    let section = &diff.body[diff
        .body
        .find("<h3 id=\"metric_falls\">")
        .expect(&diff.body)..];
    assert!(section.starts_with("<h3 id=\"metric_falls\">Answer metrics (1 fell, 0 rose)</h3>"));
    assert!(
        section.contains(&format!("href=\"/ui/runs/{after}/cases/ANS-002\"")),
        "{section}"
    );
    assert!(section.contains("<td class=\"num\">1.00</td><td class=\"num\">0.25</td><td class=\"num worse\">-0.75</td>"), "{section}");
}
