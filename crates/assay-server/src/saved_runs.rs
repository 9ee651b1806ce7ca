//! The saved runs, read-only (`GET /runs`, `GET /runs/{id}`, `GET /runs/{a}/diff/{b}`): what a
//! dashboard shows. No token is needed; ids are checked before they name a file
//! ([`assay_harness::runs::check_run_id`]).

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::Uri;

use assay_core::rundiff::RunDiff;
use assay_core::runlog::RunLog;
use assay_harness::runs;
use assay_harness::settings::ProjectSettings;

use crate::AppState;
use crate::error::ApiError;
use crate::params::Params;
use crate::views::RunsView;

/// The project's results folder (`[paths] results` in `assay.toml`, default `results/`).
async fn results_dir(state: &AppState) -> Result<std::path::PathBuf, ApiError> {
    let dir = state.project_dir().to_owned();
    tokio::task::spawn_blocking(move || {
        let settings = ProjectSettings::load(&dir).map_err(assay_harness::HarnessError::from)?;
        Ok(settings.results_dir)
    })
    .await
    .map_err(|e| ApiError::internal(format!("the request stopped unexpectedly: {e}")))?
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("the request stopped unexpectedly: {e}")))?
}

fn path_error(e: &PathRejection) -> ApiError {
    ApiError::bad_request(format!("invalid path: {e}"))
}

/// `GET /runs`
pub async fn list(State(state): State<AppState>, uri: Uri) -> Result<Json<RunsView>, ApiError> {
    Params::parse(&uri, &[])?;
    let dir = results_dir(&state).await?;
    blocking(move || {
        Ok(Json(RunsView {
            runs: runs::list_runs(&dir)?,
        }))
    })
    .await
}

/// `GET /runs/{id}`
pub async fn get(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<Json<RunLog>, ApiError> {
    let Path(id) = id.map_err(|e| path_error(&e))?;
    Params::parse(&uri, &[])?;
    runs::check_run_id(&id)?;
    let dir = results_dir(&state).await?;
    blocking(move || Ok(Json(runs::load_run(&dir, &id)?))).await
}

/// `GET /runs/{a}/diff/{b}`
pub async fn diff(
    State(state): State<AppState>,
    pair: Result<Path<(String, String)>, PathRejection>,
    uri: Uri,
) -> Result<Json<RunDiff>, ApiError> {
    let Path((a, b)) = pair.map_err(|e| path_error(&e))?;
    Params::parse(&uri, &[])?;
    runs::check_run_id(&a)?;
    runs::check_run_id(&b)?;
    let dir = results_dir(&state).await?;
    blocking(move || Ok(Json(runs::diff(&dir, &a, &b)?))).await
}
