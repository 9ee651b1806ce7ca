//! The route handlers.

use std::collections::HashMap;
use std::path::Path as FsPath;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use serde::Deserialize;
use serde_json::Value;

use assay_core::bank::BankType;
use assay_project::project::Project;
use assay_run::calibrate::{CalibrationOutcome, CalibrationRequest, Scope};
use assay_run::run::{Quiet, RunRequest, gate_passed};
use assay_run::session::{self, CalibrationSetup, JournalMode, RunOutcome, RunSetup};

use crate::error::ApiError;
use crate::params::Params;
use crate::views::{self, HealthView, RunSummaryView, RunView, TestView, TopicView, bank_results};
use crate::{AppState, EnvLookup, RunGuard};

/// The default `kb_version` of a calibration (000 §7).
pub const DEFAULT_KB_VERSION: &str = "v2.0";

/// Runs `work` on a blocking thread with its own current-thread runtime, holding `guard` until
/// it returns (even when the client goes away meanwhile).
async fn in_background<T, F>(guard: RunGuard, work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&tokio::runtime::Runtime) -> Result<T, ApiError> + Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        let _guard = guard;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ApiError::internal(format!("cannot start a runtime: {e}")))?;
        work(&rt)
    })
    .await
    .map_err(|e| ApiError::internal(format!("the run stopped unexpectedly: {e}")))?
}

fn load(dir: &FsPath) -> Result<Project, ApiError> {
    // A folder of experiments or simulation reports is served too; only these routes need
    // the test banks, and say so.
    crate::project::require_test_banks(dir)?;
    let project = Project::load(dir)?;
    for w in &project.warnings {
        tracing::warn!("{w}");
    }
    Ok(project)
}

/// Runs `request` on `project` without a journal.
fn execute(
    rt: &tokio::runtime::Runtime,
    project: &Project,
    request: &RunRequest,
    env: &EnvLookup,
    save: bool,
) -> Result<RunOutcome, ApiError> {
    let setup = RunSetup {
        journal: JournalMode::Off,
        save,
        answer: Some(assay_experiment::answer::factory()),
        ..RunSetup::default()
    };
    let lookup = |name: &str| env(name);
    // With export on (`assay serve` turned it on), each run is a trace of its own.
    let trace = assay_telemetry::Command::begin(
        "assay serve: run",
        vec![opentelemetry::KeyValue::new(
            "assay.project",
            project.settings.root.display().to_string(),
        )],
    );
    let outcome = rt.block_on(session::execute(
        project, request, &setup, &lookup, &mut Quiet,
    ));
    trace.finish();
    let outcome = outcome?;
    tracing::info!(
        run_id = outcome.log.run_id,
        health = %outcome.log.summary.health_status,
        score = outcome.log.summary.combined_score,
        tests = outcome.log.summary.total_tests,
        "run finished"
    );
    Ok(outcome)
}

fn usage(outcome: &RunOutcome) -> Option<Value> {
    if outcome.usage.models.is_empty() {
        None
    } else {
        serde_json::to_value(&outcome.usage).ok()
    }
}

fn log_value(outcome: &RunOutcome) -> Result<Value, ApiError> {
    serde_json::to_value(&outcome.log)
        .map_err(|e| ApiError::internal(format!("cannot serialise the RunLog: {e}")))
}

/// Parses `banks` as `assay run --banks` does: `all`, or a comma-separated list.
pub fn parse_banks(spec: &str) -> Result<Vec<BankType>, ApiError> {
    assay_run::run::parse_banks(spec)
        .map_err(|e| ApiError::bad_request(format!("query parameter `banks`: {e}")))
}

fn path_param(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    p.map(|Path(v)| v)
        .map_err(|e| ApiError::bad_request(format!("invalid path: {e}")))
}

pub async fn health(State(state): State<AppState>) -> Json<HealthView> {
    let current_run = state.current_run();
    Json(HealthView {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        project: state.project_dir().display().to_string(),
        busy: current_run.is_some(),
        current_run,
    })
}

pub async fn run_banks(State(state): State<AppState>, uri: Uri) -> Result<Json<RunView>, ApiError> {
    let params = Params::parse(&uri, &["banks", "verbose", "failures_only", "save_results"])?;
    let banks_spec = params.one("banks")?.unwrap_or("all").to_owned();
    let banks = parse_banks(&banks_spec)?;
    let verbose = params.bool("verbose", false)?;
    let failures_only = params.bool("failures_only", false)?;
    let save = params.bool("save_results", true)?;

    let guard = state.begin(format!("run: banks {}", banks_spec.trim()))?;
    let (dir, env) = (state.project_dir().to_owned(), state.env());
    in_background(guard, move |rt| {
        let project = load(&dir)?;
        let request = RunRequest {
            banks,
            ..RunRequest::default()
        };
        let outcome = execute(rt, &project, &request, &env, save)?;
        let log = log_value(&outcome)?;
        Ok(Json(RunView {
            summary: RunSummaryView::new(
                &outcome.log,
                gate_passed(&outcome.log, &project.settings),
                outcome.saved.as_ref(),
            ),
            failures: failures_only.then(|| views::failures(&log)),
            usage: usage(&outcome),
            run_log: verbose.then_some(log),
        }))
    })
    .await
}

/// The bank that holds the case `test_id`, in bank order.
fn find_bank(project: &Project, test_id: &str) -> Option<BankType> {
    let b = &project.banks;
    let has = |ids: Vec<&String>| ids.into_iter().any(|id| id == test_id);
    if has(b.semantic.iter().map(|l| &l.case.test_id).collect()) {
        Some(BankType::Semantic)
    } else if has(b.state.iter().map(|l| &l.case.test_id).collect()) {
        Some(BankType::State)
    } else if has(b.pattern.iter().map(|l| &l.case.test_id).collect()) {
        Some(BankType::Pattern)
    } else if has(b.always.iter().map(|l| &l.case.test_id).collect()) {
        Some(BankType::Always)
    } else if has(b.answer.iter().map(|l| &l.case.test_id).collect()) {
        Some(BankType::Answer)
    } else {
        None
    }
}

pub async fn run_test(
    State(state): State<AppState>,
    test_id: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<Json<TestView>, ApiError> {
    let test_id = path_param(test_id)?;
    let params = Params::parse(&uri, &["debug"])?;
    let debug = params.bool("debug", false)?;

    let guard = state.begin(format!("test {test_id}"))?;
    let (dir, env) = (state.project_dir().to_owned(), state.env());
    in_background(guard, move |rt| {
        let project = load(&dir)?;
        let bank = find_bank(&project, &test_id).ok_or_else(|| {
            ApiError::not_found(format!("unknown test id `{test_id}`: no bank has it"))
        })?;
        let request = RunRequest {
            banks: vec![bank],
            tests: [test_id.clone()].into_iter().collect(),
            topic: None,
            shard: None,
            ..RunRequest::default()
        };
        let outcome = execute(rt, &project, &request, &env, false)?;
        let log = log_value(&outcome)?;
        let result = bank_results(&log, bank)
            .into_iter()
            .find(|r| r.get("test_id").and_then(Value::as_str) == Some(test_id.as_str()))
            .ok_or_else(|| ApiError::internal(format!("the run has no result for `{test_id}`")))?;
        Ok(Json(TestView {
            bank: bank.key(),
            test_id,
            result,
            summary: RunSummaryView::new(
                &outcome.log,
                gate_passed(&outcome.log, &project.settings),
                None,
            ),
            usage: usage(&outcome),
            run_log: debug.then_some(log),
        }))
    })
    .await
}

pub async fn run_topic(
    State(state): State<AppState>,
    topic: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<Json<TopicView>, ApiError> {
    let topic = path_param(topic)?;
    Params::parse(&uri, &[])?;

    let guard = state.begin(format!("topic {topic}"))?;
    let (dir, env) = (state.project_dir().to_owned(), state.env());
    in_background(guard, move |rt| {
        let project = load(&dir)?;
        if !project
            .banks
            .semantic
            .iter()
            .any(|l| l.case.topics.contains(&topic))
        {
            return Err(ApiError::not_found(format!(
                "unknown topic `{topic}`: no semantic case has it"
            )));
        }
        let request = RunRequest {
            banks: vec![BankType::Semantic],
            topic: Some(topic.clone()),
            shard: None,
            ..RunRequest::default()
        };
        let outcome = execute(rt, &project, &request, &env, false)?;
        let log = log_value(&outcome)?;
        Ok(Json(TopicView {
            topic,
            summary: RunSummaryView::new(
                &outcome.log,
                gate_passed(&outcome.log, &project.settings),
                None,
            ),
            results: bank_results(&log, BankType::Semantic),
            usage: usage(&outcome),
        }))
    })
    .await
}

/// A list in a JSON body: `["a", "b"]` or `"a,b"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum IdList {
    One(String),
    Many(Vec<String>),
}

impl IdList {
    fn into_vec(self) -> Vec<String> {
        let items = match self {
            IdList::One(s) => vec![s],
            IdList::Many(v) => v,
        };
        items
            .iter()
            .flat_map(|s| s.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// The JSON body of `POST /cli/calibrate`; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CalibrateBody {
    scope: Option<String>,
    test_ids: Option<IdList>,
    added_entities: Option<IdList>,
    kb_version: Option<String>,
    dry_run: Option<bool>,
}

fn conflict(name: &str) -> ApiError {
    ApiError::bad_request(format!(
        "`{name}` is given both as a query parameter and in the JSON body; give it once"
    ))
}

/// The calibration request of `POST /cli/calibrate` (query parameters and JSON body).
fn calibration_request(params: &Params, body: &[u8]) -> Result<CalibrationRequest, ApiError> {
    let body: CalibrateBody = if body.iter().all(u8::is_ascii_whitespace) {
        CalibrateBody::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?
    };
    let pick = |name: &str, from_body: Option<String>| -> Result<Option<String>, ApiError> {
        match (params.one(name)?, from_body) {
            (Some(_), Some(_)) => Err(conflict(name)),
            (Some(q), None) => Ok(Some(q.to_owned())),
            (None, b) => Ok(b),
        }
    };
    let list = |name: &str, from_body: Option<IdList>| -> Result<Vec<String>, ApiError> {
        match (params.has(name), from_body) {
            (true, Some(_)) => Err(conflict(name)),
            (true, None) => Ok(params.list(name)),
            (false, b) => Ok(b.map(IdList::into_vec).unwrap_or_default()),
        }
    };
    let scope: Scope = match pick("scope", body.scope)? {
        None => Scope::Full,
        Some(s) => s
            .trim()
            .parse()
            .map_err(|e: String| ApiError::bad_request(format!("`scope`: {e}")))?,
    };
    let dry_run = match (params.has("dry_run"), body.dry_run) {
        (true, Some(_)) => return Err(conflict("dry_run")),
        (true, None) => params.bool("dry_run", true)?,
        (false, b) => b.unwrap_or(true),
    };
    Ok(CalibrationRequest {
        scope,
        test_ids: list("test_ids", body.test_ids)?,
        added_entities: list("added_entities", body.added_entities)?,
        kb_version: Some(
            pick("kb_version", body.kb_version)?.unwrap_or_else(|| DEFAULT_KB_VERSION.to_owned()),
        ),
        dry_run,
        trigger: None,
        // Filled by the harness for scope `affected` (the project's embedding search).
        top_candidates: HashMap::new(),
        // The project's `[calibration] concurrency`.
        concurrency: 0,
    })
}

pub async fn calibrate(
    State(state): State<AppState>,
    uri: Uri,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CalibrationOutcome>, ApiError> {
    let params = Params::parse(
        &uri,
        &[
            "scope",
            "test_ids",
            "added_entities",
            "kb_version",
            "dry_run",
        ],
    )?;
    let body = body.map_err(|e| ApiError::body(&e))?;
    let request = calibration_request(&params, &body)?;

    let guard = state.begin(format!(
        "calibration: scope {}{}",
        request.scope,
        if request.dry_run { ", dry run" } else { "" }
    ))?;
    let (dir, env) = (state.project_dir().to_owned(), state.env());
    in_background(guard, move |rt| {
        let project = load(&dir)?;
        let lookup = |name: &str| env(name);
        let trace = assay_telemetry::Command::begin("assay serve: calibrate", Vec::new());
        let outcome = rt.block_on(session::calibrate(
            &project,
            &request,
            &CalibrationSetup::default(),
            &lookup,
            chrono::Utc::now(),
        ));
        trace.finish();
        let outcome = outcome?;
        tracing::info!(
            run_id = outcome.run_id,
            selected = outcome.counts.selected,
            changed = outcome.counts.changed,
            errors = outcome.counts.errors,
            dry_run = outcome.dry_run,
            "calibration finished"
        );
        Ok(Json(outcome))
    })
    .await
}

pub async fn openapi() -> Json<Value> {
    Json(crate::openapi::document())
}

pub async fn no_route(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no route for `{}` (see /openapi.json)", uri.path()))
}

pub async fn method_not_allowed(method: axum::http::Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "`{}` does not take {method} (see /openapi.json)",
            uri.path()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(q: &str, body: &str) -> Result<CalibrationRequest, ApiError> {
        let uri: Uri = format!("/cli/calibrate?{q}").parse().unwrap();
        let params = Params::parse(
            &uri,
            &[
                "scope",
                "test_ids",
                "added_entities",
                "kb_version",
                "dry_run",
            ],
        )?;
        calibration_request(&params, body.as_bytes())
    }

    #[test]
    fn calibration_request_from_query_and_body() {
        let r = request("", "").unwrap();
        assert_eq!(r.scope, Scope::Full);
        assert!(r.dry_run);
        assert_eq!(r.kb_version.as_deref(), Some("v2.0"));
        let r = request("scope=single&test_ids=A,B&test_ids=C&dry_run=false", "").unwrap();
        assert_eq!(r.scope, Scope::Single);
        assert_eq!(r.test_ids, ["A", "B", "C"]);
        assert!(!r.dry_run);
        let r = request(
            "",
            r#"{"scope": "affected", "added_entities": ["x", "y,z"], "kb_version": "v3"}"#,
        )
        .unwrap();
        assert_eq!(r.scope, Scope::Affected);
        assert_eq!(r.added_entities, ["x", "y", "z"]);
        assert_eq!(r.kb_version.as_deref(), Some("v3"));
        assert!(r.dry_run);
        let e = request("scope=all", "").unwrap_err();
        assert!(e.message.contains("unknown calibration scope `all`"), "{e}");
        let e = request("scope=full", r#"{"scope": "full"}"#).unwrap_err();
        assert!(e.message.contains("both"), "{e}");
        let e = request("", r#"{"scoop": "full"}"#).unwrap_err();
        assert!(e.message.contains("scoop"), "{e}");
        let e = request("", "{").unwrap_err();
        assert!(e.message.contains("invalid JSON body"), "{e}");
    }

    #[test]
    fn banks_parse() {
        assert_eq!(parse_banks("all").unwrap(), vec![]);
        assert_eq!(
            parse_banks("state, Pattern").unwrap(),
            vec![BankType::State, BankType::Pattern]
        );
        assert!(
            parse_banks("stats")
                .unwrap_err()
                .message
                .contains("`stats`")
        );
    }
}
