//! The JSON bodies the API answers (`*View`); [`crate::openapi`] describes each.

use std::collections::BTreeMap;

use assay_core::bank::BankType;
use assay_core::entity::Entity;
use assay_core::runlog::{Health, RunLog};
use assay_kb::store::{EntityVersion, Staleness, StoredEntity};
use assay_kbtools::kbedit::NoChange;
use assay_project::results::SavedResults;
use assay_project::retrieve::Traced;
use assay_retrieval::pipeline::Retrieval;
use assay_run::runs::RunEntry;
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

/// A case that failed, scored below 100 or errored.
#[derive(Debug, Clone, Serialize)]
pub struct FailureView {
    /// The case.
    pub test_id: String,
    /// 0–100, or `null` for an error.
    pub score: Option<u64>,
    /// Its stored verdict: `pass`, `fail` or `error`.
    pub verdict: String,
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

/// Per bank that ran, the cases that failed (by their stored verdict), scored below 100 or
/// errored.
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
                    let verdict = r
                        .pointer("/verdict/outcome")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    let listed = score.is_none_or(|s| s < 100) || verdict != "pass";
                    listed.then(|| FailureView {
                        test_id: r
                            .get("test_id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        score,
                        verdict,
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

/// One entity (`GET /admin/kb/entities/{entity_id}`, and each item of a list): its fields
/// (003 §4) and the row's metadata.
#[derive(Debug, Clone, Serialize)]
pub struct EntityView {
    /// The row id of the current version.
    pub id: String,
    /// The entity's fields.
    #[serde(flatten)]
    pub entity: Entity,
    /// The version number, from 1.
    pub version: u32,
    /// The row id of the version this one replaced.
    pub previous_version_id: Option<String>,
    /// When this version was written (RFC 3339).
    pub created_at: String,
    /// When this row last changed (RFC 3339).
    pub updated_at: String,
    /// Who wrote this version.
    pub created_by: String,
    /// How often retrieval returned the entity.
    pub retrieval_count: u64,
    /// The model of the stored embedding, if any.
    pub embedding_model: Option<String>,
    /// Whether the stored embedding is fresh for the project's embedder (single entity only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding_status: Option<Staleness>,
    /// The `kb/` file that defines it (`null`: in no file).
    pub source_file: Option<String>,
}

impl EntityView {
    /// The view of `stored`, defined in `source_file`.
    pub fn new(stored: StoredEntity, source_file: Option<&std::path::Path>) -> EntityView {
        EntityView {
            id: stored.id,
            entity: stored.entity,
            version: stored.version,
            previous_version_id: stored.previous_version_id,
            created_at: stored.created_at.to_rfc3339(),
            updated_at: stored.updated_at.to_rfc3339(),
            created_by: stored.created_by,
            retrieval_count: stored.retrieval_count,
            embedding_model: stored.embedding_model,
            embedding_status: None,
            source_file: source_file.map(|p| p.display().to_string()),
        }
    }
}

/// `GET /admin/kb/entities`: one page.
#[derive(Debug, Clone, Serialize)]
pub struct EntityPageView {
    /// The entities of this page (by priority, highest first, then id).
    pub items: Vec<EntityView>,
    /// The page, from 1.
    pub page: usize,
    /// Entities per page.
    pub page_size: usize,
    /// Entities on all pages.
    pub total: usize,
    /// How many pages there are.
    pub pages: usize,
}

/// What a create, update or delete did.
#[derive(Debug, Clone, Serialize)]
pub struct EditView {
    /// Whether a new version was written.
    pub changed: bool,
    /// The fields the new version changed (empty for a new entity, or when nothing changed).
    pub changed_fields: Vec<String>,
    /// Why nothing was written, when nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unchanged_because: Option<NoChange>,
    /// The `kb/` file written, when the edit wrote through to one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Something to know (comments lost when a YAML file was rewritten).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The entity's current version, after the edit.
    pub entity: EntityView,
}

/// One version in an entity's history.
#[derive(Debug, Clone, Serialize)]
pub struct VersionView {
    /// The version number.
    pub version: u32,
    /// Its row id.
    pub id: String,
    /// The row id of the version it replaced.
    pub previous_version_id: Option<String>,
    /// Whether it is the current version.
    pub is_current: bool,
    /// Whether the entity was active in this version.
    pub is_active: bool,
    /// When it was written (RFC 3339).
    pub created_at: String,
    /// When the row last changed (RFC 3339).
    pub updated_at: String,
    /// Who wrote it.
    pub created_by: String,
    /// The fields it changed from the previous version (empty for version 1).
    pub changed_fields: Vec<String>,
    /// The entity as this version defined it.
    pub entity: Entity,
}

impl From<EntityVersion> for VersionView {
    fn from(v: EntityVersion) -> VersionView {
        VersionView {
            version: v.version,
            id: v.id,
            previous_version_id: v.previous_version_id,
            is_current: v.is_current,
            is_active: v.entity.is_active,
            created_at: v.created_at.to_rfc3339(),
            updated_at: v.updated_at.to_rfc3339(),
            created_by: v.created_by,
            changed_fields: v.changed_fields,
            entity: v.entity,
        }
    }
}

/// `GET /admin/kb/entities/{entity_id}/versions`
#[derive(Debug, Clone, Serialize)]
pub struct VersionsView {
    /// The entity.
    pub entity_id: String,
    /// Its versions, oldest first.
    pub versions: Vec<VersionView>,
}

/// `GET /admin/kb/retrieval-test`: the context and every stage of the pipeline's trace.
#[derive(Debug, Clone, Serialize)]
pub struct RetrievalTestView {
    /// The message.
    pub query: String,
    /// The audience.
    pub audience_type: String,
    /// SITUATION entities kept.
    pub top_k: usize,
    /// The embedding model.
    pub embedder: String,
    /// The user state STATE conditions were checked against (`user_state`; empty when none
    /// was given).
    pub user_state: assay_core::UserState,
    /// How the SITUATION stage searched: `kind` (`exact` or `index`) and why.
    pub search: assay_project::engine::SearchChoice,
    /// The context (`entities`: each with its stage, similarity and final score), what each
    /// stage proposed (`stages`), what was dropped and why (`dropped`), tokens, notes, and
    /// with several views or hybrid ranking how each candidate matched (`matches`).
    #[serde(flatten)]
    pub retrieval: Retrieval,
}

impl RetrievalTestView {
    /// The view of a traced retrieval.
    pub fn new(
        query: String,
        audience_type: String,
        user_state: assay_core::UserState,
        traced: Traced,
    ) -> RetrievalTestView {
        RetrievalTestView {
            query,
            audience_type,
            top_k: traced.top_k,
            embedder: traced.embedder,
            user_state,
            search: traced.search,
            retrieval: traced.retrieval,
        }
    }
}

/// `GET /runs`
#[derive(Debug, Clone, Serialize)]
pub struct RunsView {
    /// The saved runs, newest first.
    pub runs: Vec<RunEntry>,
}
