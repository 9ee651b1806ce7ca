//! The saved runs, read-only (`GET /runs`, `GET /runs/{id}`, `GET /runs/{id}/cases`,
//! `GET /runs/{a}/diff/{b}`): what a dashboard shows. No token is needed; ids are checked before they name a file
//! ([`assay_run::runs::check_run_id`]).

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::Uri;

use assay_core::rundiff::RunDiff;
use assay_core::runlog::RunLog;
use assay_project::settings::ProjectSettings;
use assay_run::runs;

use crate::AppState;
use crate::error::ApiError;
use crate::params::Params;
use crate::views::RunsView;

/// The project's results folder (`[paths] results` in `assay.toml`, default `results/`).
async fn results_dir(state: &AppState) -> Result<std::path::PathBuf, ApiError> {
    let dir = state.project_dir().to_owned();
    tokio::task::spawn_blocking(move || {
        let settings = ProjectSettings::load(&dir).map_err(assay_project::HarnessError::from)?;
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

/// Bytes sent per chunk of a streamed run log.
const CHUNK: usize = 64 * 1024;

/// `GET /runs/{id}/cases[?bank=state]`: every case of the run as JSON Lines
/// (`{"bank": …, "result": …}` a line), streamed from its run log (or from its RunLog's lists
/// when they are complete), so a run of any size is served in bounded memory.
pub async fn cases(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<axum::response::Response, ApiError> {
    let Path(id) = id.map_err(|e| path_error(&e))?;
    let params = Params::parse(&uri, &["bank"])?;
    let bank = params
        .one("bank")?
        .map(|b| {
            assay_core::bank::BankType::from_key(b).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "query parameter `bank`: unknown bank `{b}` (expected semantic, state, pattern or always)"
                ))
            })
        })
        .transpose()?;
    runs::check_run_id(&id)?;
    let dir = results_dir(&state).await?;
    let log = {
        let dir = dir.clone();
        blocking(move || Ok(runs::load_run(&dir, &id)?)).await?
    };
    let file = assay_run::caselog::cases_file(&dir, &log);
    // The whole run log is checked before the answer starts: a missing, damaged or changed
    // one is a 422 naming the file and the line, never a 200 cut short.
    let (log, file) = blocking(move || {
        assay_run::caselog::verify(&log, file.as_deref()).map_err(|e| {
            ApiError::new(
                axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                "damaged_run_log",
                e.to_string(),
            )
        })?;
        Ok((log, file))
    })
    .await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
    tokio::task::spawn_blocking(move || {
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
        let walked = assay_run::caselog::for_each_case(&log, file.as_deref(), bank, &mut |r| {
            serde_json::to_writer(&mut buf, &r).map_err(|e| e.to_string())?;
            buf.push(b'\n');
            if buf.len() >= CHUNK {
                let chunk = std::mem::replace(&mut buf, Vec::with_capacity(CHUNK));
                // The client went away: stop reading.
                tx.blocking_send(Ok(chunk))
                    .map_err(|_| "closed".to_owned())?;
            }
            Ok(())
        });
        match walked {
            Ok(()) => drop(tx.blocking_send(Ok(buf))),
            Err(e) => {
                // The file changed after the check: the stream ends with an error record, not
                // silence, so a reader never takes a partial list for the whole.
                tracing::warn!("streaming a run log: {e}");
                serde_json::to_writer(&mut buf, &serde_json::json!({"error": e.to_string()}))
                    .unwrap_or_default();
                buf.push(b'\n');
                drop(tx.blocking_send(Ok(buf)));
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    axum::response::Response::builder()
        .header(axum::http::header::CONTENT_TYPE, "application/x-ndjson")
        .body(axum::body::Body::from_stream(stream))
        .map_err(|e| ApiError::internal(e.to_string()))
}
