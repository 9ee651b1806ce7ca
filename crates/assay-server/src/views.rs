//! The JSON bodies the API answers (`*View`); [`crate::openapi`] describes each.

use std::collections::BTreeMap;

use assay_core::bank::BankType;
use assay_core::runlog::{Health, RunLog};
use assay_harness::results::SavedResults;
use serde::Serialize;
use serde_json::Value;

use crate::RunInfo;

/// `GET /health`.
#[derive(Debug, Clone, Serialize)]
pub struct HealthView {
    /// Always `ok`.
    pub status: &'static str,
    /// The assay version.
    pub version: &'static str,
    /// The project directory served.
    pub project: String,
    /// Whether a run or calibration is in progress.
    pub busy: bool,
    /// The run or calibration in progress.
    pub current_run: Option<RunInfo>,
}

/// Where a run was saved.
#[derive(Debug, Clone, Serialize)]
pub struct SavedView {
    /// The RunLog (`results/results_<stamp>.json`).
    pub json: String,
    /// The Markdown report (`results/report_<stamp>.md`).
    pub markdown: String,
    /// The HTML report (`results/report_<stamp>.html`).
    pub html: String,
}

impl From<&SavedResults> for SavedView {
    fn from(s: &SavedResults) -> SavedView {
        SavedView {
            json: s.json.display().to_string(),
            markdown: s.markdown.display().to_string(),
            html: s.html.display().to_string(),
        }
    }
}

/// The summary of a run (000 §7), shared by every run endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummaryView {
    /// Health per 000 §9.4.
    pub health_status: Health,
    /// The weighted score, one decimal.
    pub combined_score: f64,
    /// Cases run (errors included).
    pub total_tests: usize,
    /// Hard-failed cases.
    pub hard_fails: usize,
    /// Ids of the cases with a critical failure.
    pub critical_failures: Vec<String>,
    /// Cases an infrastructure error kept from a verdict.
    pub error_count: usize,
    /// The run's id.
    pub run_id: String,
    /// Whether the run passes the project's gate (`[gate]` in `assay.toml`).
    pub gate_passed: bool,
    /// Where the results were saved; `null` when not saved.
    pub saved: Option<SavedView>,
}

impl RunSummaryView {
    /// The summary of `log`.
    pub fn new(log: &RunLog, gate_passed: bool, saved: Option<&SavedResults>) -> RunSummaryView {
        let s = &log.summary;
        RunSummaryView {
            health_status: s.health_status,
            combined_score: s.combined_score,
            total_tests: s.total_tests,
            hard_fails: s.hard_fail_count,
            critical_failures: s.critical_failures.clone(),
            error_count: s.error_count,
            run_id: log.run_id.clone(),
            gate_passed,
            saved: saved.map(SavedView::from),
        }
    }
}

/// A case that scored below 100 or errored.
#[derive(Debug, Clone, Serialize)]
pub struct FailureView {
    /// The case.
    pub test_id: String,
    /// 0–99, or `null` for an error.
    pub score: Option<u64>,
    /// Whether it is a hard fail.
    pub is_hard_fail: bool,
    /// The infrastructure error, when it errored.
    pub error: Option<String>,
}

/// `GET /cli/test-harness`.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    /// The summary.
    #[serde(flatten)]
    pub summary: RunSummaryView,
    /// Per bank that ran, its failed cases (`failures_only=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failures: Option<BTreeMap<String, Vec<FailureView>>>,
    /// Provider calls, tokens, cost and latency, when a provider was called.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// The whole RunLog (`verbose=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_log: Option<Value>,
}

/// `GET /cli/test-harness/test/{test_id}`.
#[derive(Debug, Clone, Serialize)]
pub struct TestView {
    /// The bank that holds the case (`semantic`, `state`, `pattern`, `always`).
    pub bank: &'static str,
    /// The case.
    pub test_id: String,
    /// The case's result, as in the RunLog.
    pub result: Value,
    /// The summary of the one-case run.
    #[serde(flatten)]
    pub summary: RunSummaryView,
    /// Provider calls, when a provider was called.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// The whole RunLog (`debug=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_log: Option<Value>,
}

/// `GET /cli/test-harness/topic/{topic}`.
#[derive(Debug, Clone, Serialize)]
pub struct TopicView {
    /// The topic.
    pub topic: String,
    /// The summary of the run.
    #[serde(flatten)]
    pub summary: RunSummaryView,
    /// The semantic case results, as in the RunLog.
    pub results: Vec<Value>,
    /// Provider calls, when a provider was called.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
}

/// The case results of `bank` in a RunLog serialised to JSON (empty when it did not run).
pub fn bank_results(log: &Value, bank: BankType) -> Vec<Value> {
    log.get(bank.key())
        .and_then(|b| b.get("results"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Per bank that ran, the cases that scored below 100 or errored.
pub fn failures(log: &Value) -> BTreeMap<String, Vec<FailureView>> {
    BankType::ALL
        .into_iter()
        .filter(|b| log.get(b.key()).is_some_and(|v| !v.is_null()))
        .map(|b| {
            let failed = bank_results(log, b)
                .iter()
                .filter_map(|r| {
                    let score = r.get("score").and_then(Value::as_u64);
                    let error = r.get("error").and_then(Value::as_str).map(str::to_owned);
                    (score.is_none_or(|s| s < 100) || error.is_some()).then(|| FailureView {
                        test_id: r
                            .get("test_id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        score,
                        is_hard_fail: r
                            .get("is_hard_fail")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        error,
                    })
                })
                .collect();
            (b.key().to_owned(), failed)
        })
        .collect()
}
