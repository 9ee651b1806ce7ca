//! The assay HTTP API (000 §7): run the test banks, one case or one topic, and calibrate
//! expectations, over JSON. `assay serve` binds it; [`app`] builds the router on its own so
//! tests can call it without a socket.
//!
//! The project directory is loaded afresh for every request (files may change between
//! requests). One run or calibration runs at a time: a request that would start a second one
//! while one is in progress gets **409** at once. Runs go through
//! [`assay_harness::session::execute`] (no journal) on a blocking thread with its own
//! current-thread runtime, because the run's future is not `Send`.
//!
//! | route | what |
//! |---|---|
//! | `GET /health` | `{status, version, project, busy, current_run}` |
//! | `GET /cli/test-harness` | a run: `banks`, `verbose`, `failures_only`, `save_results` |
//! | `GET /cli/test-harness/test/{test_id}` | one case, in whichever bank holds it (`debug`) |
//! | `GET /cli/test-harness/topic/{topic}` | the semantic cases with the topic |
//! | `POST /cli/calibrate` | a calibration: `scope`, `test_ids`, `added_entities`, `kb_version`, `dry_run` (default true), as query parameters or a JSON body |
//! | `GET /openapi.json` | the OpenAPI 3.1 document of all of this |
//! | `GET /ui/…` | the web UI ([`ui`]): knowledge-base pages and the runs dashboard, HTML |
//!
//! # Errors
//!
//! Every error is JSON: `{"error": "<message>", "status": <HTTP status>, "code": "<code>"}`.
//!
//! | status | code | when |
//! |---|---|---|
//! | 400 | `bad_request` | an unknown query parameter (named), a bad value (`banks`, a boolean, `scope`), a malformed JSON body, a request the harness rejects ([`HarnessError::Usage`], e.g. scope `single` without test ids, a chat model without its API key) |
//! | 404 | `not_found` | an unknown test id or topic, an unknown route |
//! | 405 | `method_not_allowed` | a known route with another method |
//! | 409 | `busy` | a run or calibration is already in progress |
//! | 422 | `invalid_project` | the project does not load: a bad `assay.toml`, bank or `kb/` file (the message names the file) |
//! | 500 | `infrastructure` | a provider, the store or the file system failed ([`HarnessError::is_infrastructure`]) |
//! | 500 | `internal` | a bug: the run's thread panicked |
//!
//! A case that fails, or that errors on a provider, is data in a 200 answer (`error_count`),
//! never an HTTP error.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let state = assay_server::AppState::new("examples/coparent");
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
//! assay_server::serve(listener, state, std::future::pending()).await
//! # }
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod error;
mod handlers;
pub mod openapi;
pub mod params;
pub mod ui;
pub mod views;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::http::Method;
use axum::routing::{MethodRouter, get, post};
use serde::Serialize;

pub use assay_harness::HarnessError;
pub use error::{ApiError, ErrorCode};

/// How the server reads environment variables (API keys, `ASSAY_CACHE`, …); tests inject one.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What the server shares between requests: the project directory, the environment, and the
/// run lock.
#[derive(Clone)]
pub struct AppState {
    project_dir: PathBuf,
    env: EnvLookup,
    lock: Arc<RunLock>,
    ui: Arc<ui::Shared>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("project_dir", &self.project_dir)
            .field("current_run", &self.current_run())
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// The project at `project_dir`, with the process environment.
    pub fn new(project_dir: impl Into<PathBuf>) -> AppState {
        AppState::with_env(project_dir, Arc::new(|name| std::env::var(name).ok()))
    }

    /// The project at `project_dir`, reading environment variables through `env`.
    pub fn with_env(project_dir: impl Into<PathBuf>, env: EnvLookup) -> AppState {
        AppState {
            project_dir: project_dir.into(),
            ui: Arc::new(ui::Shared::new(&env)),
            env,
            lock: Arc::new(RunLock::default()),
        }
    }

    /// The project directory.
    pub fn project_dir(&self) -> &Path {
        &self.project_dir
    }

    /// Takes the run lock for `what` (a description for the 409 message), or answers 409 when
    /// a run or calibration holds it. The lock is released when the guard drops.
    pub fn begin(&self, what: impl Into<String>) -> Result<RunGuard, ApiError> {
        let mut current = self
            .lock
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(run) = current.as_ref() {
            return Err(ApiError::busy(format!(
                "a run is already in progress (started {}, {}); try again when it finishes",
                run.started, run.what
            )));
        }
        *current = Some(RunInfo {
            started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            what: what.into(),
        });
        Ok(RunGuard {
            lock: Arc::clone(&self.lock),
        })
    }

    /// The run or calibration in progress, if any.
    pub fn current_run(&self) -> Option<RunInfo> {
        self.lock
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn env(&self) -> EnvLookup {
        Arc::clone(&self.env)
    }
}

/// The one run at a time.
#[derive(Debug, Default)]
struct RunLock {
    current: Mutex<Option<RunInfo>>,
}

/// A run or calibration in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunInfo {
    /// When it started (RFC 3339, UTC).
    pub started: String,
    /// What it is (`run: banks all`, `test V2-GR-001`, `calibration: scope full, dry run`).
    pub what: String,
}

/// Holds the run lock; dropping it releases the lock.
#[derive(Debug)]
pub struct RunGuard {
    lock: Arc<RunLock>,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        *self
            .lock
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// A route of the API: its method, its path (axum and OpenAPI syntax, `{name}` for a path
/// parameter) and its handler.
pub struct Route {
    /// The HTTP method.
    pub method: Method,
    /// The path.
    pub path: &'static str,
    /// The handler.
    pub handler: MethodRouter<AppState>,
}

/// Every route of the API; [`app`] registers exactly these, and [`openapi::document`] describes
/// them.
pub fn routes() -> Vec<Route> {
    let route = |method: Method, path: &'static str, handler| Route {
        method,
        path,
        handler,
    };
    vec![
        route(Method::GET, "/health", get(handlers::health)),
        route(Method::GET, "/cli/test-harness", get(handlers::run_banks)),
        route(
            Method::GET,
            "/cli/test-harness/test/{test_id}",
            get(handlers::run_test),
        ),
        route(
            Method::GET,
            "/cli/test-harness/topic/{topic}",
            get(handlers::run_topic),
        ),
        route(Method::POST, "/cli/calibrate", post(handlers::calibrate)),
        route(Method::GET, "/openapi.json", get(handlers::openapi)),
    ]
}

/// The API's router, with the web UI nested under `/ui` (`/` redirects there). Unknown routes
/// answer a JSON 404, known routes with another method a JSON 405.
pub fn app(state: AppState) -> Router {
    routes()
        .into_iter()
        .fold(Router::new(), |router, r| router.route(r.path, r.handler))
        .route(
            "/",
            get(|| async { axum::response::Redirect::to("/ui/entities") }),
        )
        .route(
            "/ui/",
            get(|| async { axum::response::Redirect::to("/ui/entities") }),
        )
        .nest("/ui", ui::router())
        .fallback(handlers::no_route)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .with_state(state)
}

/// Serves [`app`] on `listener` until `shutdown` completes, then finishes the requests in
/// flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown)
        .await
}
