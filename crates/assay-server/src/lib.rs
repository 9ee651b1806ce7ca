//! The assay HTTP API: run the test banks, one case or one topic, and calibrate
//! expectations, over JSON; the KB admin API under `/admin/kb/`; the saved runs, read-only,
//! under `/runs`; and the web UI under `/ui/`. `assay serve` binds it; [`app`] builds the
//! router on its own so tests can call it without a socket.
//!
//! The project directory is loaded afresh for every request (files may change between
//! requests). It may hold any of the parts (test banks, a knowledge base, runs, experiments,
//! simulation reports) or none ([`project::Contents`]): the pages show what is there, and
//! the harness routes, which need the test banks, answer 422 `no_test_banks` without them. One run or calibration runs at a time: a request that would start a second one
//! while one is in progress gets **409** at once. Runs go through
//! [`assay_run::session::execute`] (no journal) on a blocking thread with its own
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
//! | `GET /ui/…` | the web UI ([`ui`]): knowledge base, runs, experiments and simulations, HTML |
//! | `GET /admin/kb/entities` | a page of entities: `entity_type`, `load_mode`, `is_active` (default true), `page` (from 1), `page_size` (default 20, at most [`admin::MAX_PAGE_SIZE`]) |
//! | `POST /admin/kb/entities` | create (token); body: the entity's fields (`EntityCreate` in the OpenAPI document) |
//! | `GET /admin/kb/entities/{entity_id}` | one entity, its version (also as `ETag`) and embedding status |
//! | `PUT /admin/kb/entities/{entity_id}` | update → a new version (token); body: the fields to change and `expected_version` (or `If-Match: "N"`) |
//! | `DELETE /admin/kb/entities/{entity_id}` | deactivate: a new, inactive version (token; `If-Match` optional) |
//! | `GET /admin/kb/entities/{entity_id}/versions` | the version history, oldest first, with the fields each version changed |
//! | `POST /admin/kb/entities/{entity_id}/regenerate-embedding` | re-embed one active entity (token) |
//! | `POST /admin/kb/regenerate-all-embeddings` | re-embed every active entity (token) |
//! | `GET /admin/kb/retrieval-test` | `query`, `audience_type` (default PARENT), `top_k` (at most [`admin::MAX_TOP_K`]): the context and every stage's candidates, scores and drops |
//! | `GET /admin/kb/stats` | counts by type and load mode, versions, embedding coverage, retrievals |
//! | `GET /runs` | the saved runs in `results/`, newest first |
//! | `GET /runs/{id}` | one saved run's RunLog (`id` = the file's stamp, `2026-11-25-0915`) |
//! | `GET /runs/{id}/cases` | every case of a saved run as JSON Lines, streamed from its run log (`?bank=` for one bank) |
//! | `GET /runs/{a}/diff/{b}` | cases better, worse, unchanged, errored, added and removed from run `a` to run `b` |
//!
//! # The admin token
//! Writes to the knowledge base need `Authorization: Bearer <token>`, where the token is the
//! `ASSAY_ADMIN_TOKEN` the server was started with (compared in constant time). Without the
//! variable the server starts read-only and logs so; reads need no token. Edits write through
//! to the `kb/` files exactly as `assay kb update` does ([`assay_kbtools::kbedit`]), and are
//! serialised. An update carries the version it edits; when the entity has moved on, the
//! update gets **409** `stale_version` and nothing is written, so two editors never silently
//! overwrite each other.
//!
//! # Errors
//!
//! Every error is JSON: `{"error": "<message>", "status": <HTTP status>, "code": "<code>"}`,
//! with `"field"` when a 422 is about one field of the body. That holds for the answers of
//! axum's extractors and tower-http's layers too ([`error::json_errors`] rewrites any
//! plain-text one); only the web UI's pages answer in HTML.
//!
//! | status | code | when |
//! |---|---|---|
//! | 400 | `bad_request` | an unknown query parameter (named), a bad value (`banks`, a boolean, `scope`, `page_size` beyond the maximum, a run id that is not a stamp), a malformed JSON body (empty, not JSON, not an object), a request the harness rejects ([`HarnessError::Usage`], e.g. scope `single` without test ids, a chat model without its API key) |
//! | 401 | `unauthorized` | a KB write, `POST /v1/traces` or `GET /traces/check` without `Authorization: Bearer …` (with `WWW-Authenticate: Bearer`) |
//! | 403 | `forbidden` / `read_only` / `traces_disabled` | a wrong token / a KB write to a server started without `ASSAY_ADMIN_TOKEN` / traces sent or read on such a server |
//! | 404 | `not_found` | an unknown test id, topic, entity id or run, an unknown route |
//! | 405 | `method_not_allowed` | a known route with another method |
//! | 408 | `request_timeout` | a request body that stopped arriving (`--body-timeout`) |
//! | 413 | `payload_too_large` | a body larger than the server takes (2 MB; for `/v1/traces` once inflated) |
//! | 415 | `unsupported_media_type` | `/v1/traces` with a Content-Type other than protobuf or JSON, or a Content-Encoding other than gzip |
//! | 409 | `busy` | a run or calibration is already in progress |
//! | 409 | `stale_version` | an update or delete made from a version that is no longer current |
//! | 409 | `already_exists` / `conflict` | a create with a taken id (ids are never reused) / an edit the knowledge base's state refuses (an entity in no `kb/` file, re-embedding an inactive one) |
//! | 422 | `validation_failed` | a well-formed body whose content breaks a rule: a wrong type, an unknown field, a priority out of range, an unknown enum value, an empty title, bad `state_conditions`, an `entity_id` that breaks the id rule (1 to 128 bytes of letters, digits, `_`, `-`, `.`); `field` names the field, and the message is the CLI's |
//! | 422 | `invalid_project` | the project does not load: a bad `assay.toml`, bank or `kb/` file (the message names the file), or a saved run that is not a RunLog |
//! | 422 | `no_test_banks` | a run, case, topic or calibration asked of a project without test banks (no `test_banks/` folder) |
//! | 428 | `precondition_required` | an update without `expected_version` or `If-Match` |
//! | 500 | `infrastructure` | a provider, the store or the file system failed ([`HarnessError::is_infrastructure`]) |
//! | 503 | `kb_busy` | another process held the project's knowledge-base lock (`.assay/kb.lock`) for longer than a request waits (30 s); try again |
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

pub mod admin;
pub mod auth;
pub mod error;
mod handlers;
pub mod openapi;
pub mod params;
pub mod project;
mod saved_runs;
pub mod traces;
pub mod ui;
pub mod views;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::http::Method;
use axum::routing::{MethodRouter, delete, get, post, put};
use serde::Serialize;

pub use assay_project::HarnessError;
pub use auth::{ASSAY_ADMIN_TOKEN, AdminToken};
pub use error::{ApiError, ErrorCode};

/// How the server reads environment variables (API keys, `ASSAY_CACHE`, …); tests inject one.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What the server shares between requests: the project directory, the environment, the run
/// lock, the admin token and the lock that serialises knowledge-base edits.
#[derive(Clone)]
pub struct AppState {
    project_dir: PathBuf,
    env: EnvLookup,
    lock: Arc<RunLock>,
    ui: Arc<ui::Shared>,
    admin_token: Option<AdminToken>,
    kb_lock: Arc<Mutex<()>>,
    traces_index: Arc<Mutex<traces::ReceivedIndex>>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("project_dir", &self.project_dir)
            .field("current_run", &self.current_run())
            .field("read_only", &self.read_only())
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// The project at `project_dir`, with the process environment.
    pub fn new(project_dir: impl Into<PathBuf>) -> AppState {
        AppState::with_env(project_dir, Arc::new(|name| std::env::var(name).ok()))
    }

    /// The project at `project_dir`, reading environment variables through `env`. The admin
    /// token is read now, once: [`ASSAY_ADMIN_TOKEN`] (without it the KB admin API is
    /// read-only).
    pub fn with_env(project_dir: impl Into<PathBuf>, env: EnvLookup) -> AppState {
        let admin_token = env(ASSAY_ADMIN_TOKEN).as_deref().and_then(AdminToken::new);
        AppState {
            project_dir: project_dir.into(),
            ui: Arc::new(ui::Shared::default()),
            env,
            lock: Arc::new(RunLock::default()),
            admin_token,
            kb_lock: Arc::new(Mutex::new(())),
            traces_index: Arc::new(Mutex::new(traces::ReceivedIndex::default())),
        }
    }

    /// Whether the KB admin API refuses writes (no admin token).
    pub fn read_only(&self) -> bool {
        self.admin_token.is_none()
    }

    /// The admin token, when writes are allowed.
    pub fn admin_token(&self) -> Option<&AdminToken> {
        self.admin_token.as_ref()
    }

    /// The lock that serialises knowledge-base requests.
    pub fn kb_lock(&self) -> Arc<Mutex<()>> {
        Arc::clone(&self.kb_lock)
    }

    /// The spans received so far, under whose lock received spans are appended
    /// (`/v1/traces`).
    pub fn traces_index(&self) -> Arc<Mutex<traces::ReceivedIndex>> {
        Arc::clone(&self.traces_index)
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
        route(Method::GET, "/admin/kb/entities", get(admin::list_entities)),
        route(
            Method::POST,
            "/admin/kb/entities",
            post(admin::create_entity),
        ),
        route(
            Method::GET,
            "/admin/kb/entities/{entity_id}",
            get(admin::get_entity),
        ),
        route(
            Method::PUT,
            "/admin/kb/entities/{entity_id}",
            put(admin::update_entity),
        ),
        route(
            Method::DELETE,
            "/admin/kb/entities/{entity_id}",
            delete(admin::deactivate_entity),
        ),
        route(
            Method::GET,
            "/admin/kb/entities/{entity_id}/versions",
            get(admin::entity_versions),
        ),
        route(
            Method::POST,
            "/admin/kb/entities/{entity_id}/regenerate-embedding",
            post(admin::regenerate_embedding),
        ),
        route(
            Method::POST,
            "/admin/kb/regenerate-all-embeddings",
            post(admin::regenerate_all_embeddings),
        ),
        route(
            Method::GET,
            "/admin/kb/retrieval-test",
            get(admin::retrieval_test),
        ),
        route(Method::GET, "/admin/kb/stats", get(admin::stats)),
        route(Method::GET, "/runs", get(saved_runs::list)),
        route(Method::GET, "/runs/{id}", get(saved_runs::get)),
        route(Method::GET, "/runs/{id}/cases", get(saved_runs::cases)),
        route(Method::GET, "/runs/{a}/diff/{b}", get(saved_runs::diff)),
        route(
            Method::POST,
            "/v1/traces",
            // OTLP/HTTP bodies arrive gzip-compressed as often as not (the Collector's and the
            // SDKs' exporters compress by default or on one setting).
            post(traces::receive)
                .layer(tower_http::decompression::RequestDecompressionLayer::new()),
        ),
        route(Method::GET, "/traces/check", get(traces::check_received)),
        route(Method::GET, "/admin/drafts", get(ui::drafts::api_list)),
        route(
            Method::GET,
            "/admin/drafts/coverage",
            get(ui::drafts::api_coverage),
        ),
        route(
            Method::POST,
            "/admin/drafts/{test_id}/accept",
            post(ui::drafts::api_accept),
        ),
        route(
            Method::POST,
            "/admin/drafts/{test_id}/reject",
            post(ui::drafts::api_reject),
        ),
        route(
            Method::POST,
            "/admin/drafts/{test_id}/edit",
            post(ui::drafts::api_edit),
        ),
    ]
}

/// The API's router, with the web UI nested under `/ui` (`/` redirects there). Unknown routes
/// answer a JSON 404, known routes with another method a JSON 405, and every other error of
/// the API is JSON too ([`error::json_errors`]), whoever made it.
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
        // Last, so it sees every answer: extractors' and layers' rejections included.
        .layer(axum::middleware::from_fn(error::json_errors))
}

/// What a connection may cost the server: how long it may take to send its request headers
/// and each part of its body, and how many connections are served at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A connection that has not sent a whole request head within this time (from its start,
    /// or from its previous answer) is closed. Default 10 s.
    pub header_timeout: std::time::Duration,
    /// A request body that sends nothing for this long is cut off (the request fails with
    /// 408). Default 30 s.
    pub body_timeout: std::time::Duration,
    /// Connections served at once; more wait in the operating system's queue until one
    /// closes. Default 512: well under the common limit of 1,024 open files, so `/health`
    /// and the store keep file descriptors to work with.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            header_timeout: std::time::Duration::from_secs(10),
            body_timeout: std::time::Duration::from_secs(30),
            max_connections: 512,
        }
    }
}

/// Serves [`app`] on `listener` until `shutdown` completes, then finishes the requests in
/// flight, with the default [`Limits`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, state, Limits::default(), shutdown).await
}

/// [`serve`] with explicit [`Limits`]: hyper's HTTP/1 server per connection (header read
/// timeout), tower-http's request-body timeout, and a semaphore that caps the connections.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    state: AppState,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if state.read_only() {
        tracing::warn!(
            "{ASSAY_ADMIN_TOKEN} is not set: the KB admin API is read-only (writes get 403)"
        );
    } else {
        tracing::info!("KB admin API: writes need `Authorization: Bearer <{ASSAY_ADMIN_TOKEN}>`");
    }
    let service = app(state).layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
        limits.body_timeout,
    ));
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = std::sync::Arc::clone(&slots).acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, a connection reset before it was accepted: say
                    // so and go on (a short pause, so a full table is not spun on).
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let io = hyper_util::rt::TokioIo::new(stream);
        let hyper_service = hyper_util::service::TowerToHyperService::new(service.clone());
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(io, hyper_service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection closed: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
