//! The web UI under `/ui/`: server-rendered HTML pages for the knowledge base (its entities,
//! their history, edits, a retrieval test, bulk operations and statistics), the saved runs
//! (their scores over time, each run, each case, two runs compared), the prompt optimizer's
//! experiments (with promotion), the conversation simulations and the red-team runs, with one
//! embedded style sheet and a few lines of optional script. No build step: the assets are
//! `include_str!`ed into the binary.
//!
//! A project may hold any of these parts or none ([`crate::project::Contents`]); a page whose
//! part is missing shows an empty state that names the command that fills it
//! ([`empty_state`]).
//!
//! # Safety rules
//!
//! * Every string that did not come from this file goes through [`esc`] (the report's one
//!   escape function) before it is put into a page; that includes ids, titles, content,
//!   prompts, run data and error messages.
//! * Every POST carries the per-process CSRF token in a hidden field (`csrf`), checked in
//!   constant time, and is refused when its `Origin` (or `Sec-Fetch-Site`) says it came from
//!   another site.
//! * Writes need the admin token (`ASSAY_ADMIN_TOKEN`): the login form checks it and sets an
//!   `HttpOnly; SameSite=Strict` cookie derived from it and the process secret. Without the
//!   variable the UI is read-only and says so.

mod bulk;
mod cases;
pub(crate) mod drafts;
mod entities;
mod experiments;
mod forms;
mod links;
mod pages;
mod redteam;
mod runs;
mod simulations;

use std::collections::HashMap;
use std::fmt::Write;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use assay_kb::KbError;
use assay_kbtools::kbedit::KbSession;
use assay_project::project::Project;
use assay_project::{HarnessError, engine};

use crate::AppState;
use crate::error::ApiError;

pub use assay_report::html::escape as esc;

/// The cookie that marks a signed-in admin.
pub const AUTH_COOKIE: &str = "assay_admin";

const CSS: &str = include_str!("assets/ui.css");
const JS: &str = include_str!("assets/ui.js");

/// The per-process secret the CSRF token and the sign-in cookie are derived from.
pub struct Secrets {
    key: [u8; 32],
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(..)")
    }
}

impl Secrets {
    /// A fresh random secret (two v4 UUIDs from the operating system's generator).
    pub fn random() -> Secrets {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Secrets { key }
    }

    fn derive(&self, label: &str, data: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update(label.as_bytes());
        h.update([0]);
        h.update(data.as_bytes());
        h.finalize().iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// The CSRF token every form carries.
    pub fn csrf_token(&self) -> String {
        self.derive("csrf", "")
    }

    /// The sign-in cookie's value (the admin token is fixed for the life of the process, as
    /// this secret is).
    fn session(&self) -> String {
        self.derive("session", "")
    }
}

/// What the UI keeps for the life of the process: its secret and the re-embedding job.
#[derive(Debug, Default)]
pub struct Shared {
    secrets: Secrets,
    jobs: bulk::Jobs,
}

impl Default for Secrets {
    fn default() -> Secrets {
        Secrets::random()
    }
}

/// Compares two strings in constant time (for equal lengths).
fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// What the UI lets this request do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No `ASSAY_ADMIN_TOKEN`: nothing can be changed.
    ReadOnly,
    /// Writes are possible after signing in.
    SignedOut,
    /// Signed in: writes allowed.
    Admin,
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The access of a request.
pub fn access(state: &AppState, headers: &HeaderMap) -> Access {
    if state.admin_token().is_none() {
        return Access::ReadOnly;
    }
    match cookie(headers, AUTH_COOKIE) {
        Some(v) if same(v, &state.ui.secrets.session()) => Access::Admin,
        _ => Access::SignedOut,
    }
}

/// Refuses a POST that did not come from one of our own forms: a foreign `Origin` or
/// `Sec-Fetch-Site: cross-site`, or a missing or wrong CSRF token.
pub(crate) fn check_post(
    state: &AppState,
    headers: &HeaderMap,
    form: &HashMap<String, String>,
) -> Result<(), UiError> {
    let forbidden = |m: &str| UiError::new(StatusCode::FORBIDDEN, m);
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "cross-site")
    {
        return Err(forbidden("cross-site form posts are refused"));
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let origin_host = origin
            .split_once("://")
            .map_or(origin, |(_, rest)| rest)
            .trim_end_matches('/');
        if origin == "null" || !origin_host.eq_ignore_ascii_case(host) {
            return Err(forbidden(
                "this form was posted from another origin; reload the page and try again",
            ));
        }
    }
    match form.get("csrf") {
        Some(t) if same(t, &state.ui.secrets.csrf_token()) => Ok(()),
        _ => Err(forbidden(
            "the form's CSRF token is missing or out of date (the server may have restarted); reload the page and try again",
        )),
    }
}

/// [`check_post`], then requires a signed-in admin.
pub(crate) fn check_write(
    state: &AppState,
    headers: &HeaderMap,
    form: &HashMap<String, String>,
) -> Result<(), UiError> {
    check_post(state, headers, form)?;
    match access(state, headers) {
        Access::Admin => Ok(()),
        Access::SignedOut => Err(UiError::new(
            StatusCode::UNAUTHORIZED,
            "sign in with the admin token to make changes",
        )),
        Access::ReadOnly => Err(UiError::new(
            StatusCode::FORBIDDEN,
            "the server is read-only: start it with ASSAY_ADMIN_TOKEN set to allow changes",
        )),
    }
}

/// An error shown as an HTML page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for people.
    pub message: String,
}

impl UiError {
    /// An error with this status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> UiError {
        UiError {
            status,
            message: message.into(),
        }
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> UiError {
        UiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> UiError {
        UiError::new(StatusCode::BAD_REQUEST, message)
    }
}

impl From<ApiError> for UiError {
    fn from(e: ApiError) -> UiError {
        UiError::new(e.status, e.message)
    }
}

impl From<HarnessError> for UiError {
    fn from(e: HarnessError) -> UiError {
        ApiError::from(e).into()
    }
}

impl From<KbError> for UiError {
    fn from(e: KbError) -> UiError {
        HarnessError::from(e).into()
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let title = self.status.canonical_reason().unwrap_or("Error").to_owned();
        let body = format!(
            "<h1>{}</h1><p class=\"notice bad\" role=\"alert\">{}</p><p><a href=\"/ui/\">Entities</a></p>",
            esc(&title),
            esc(&self.message)
        );
        let page = layout(&title, "", "", &body);
        (self.status, Html(page)).into_response()
    }
}

/// An HTML answer with the UI's security headers.
pub struct Html(pub String);

impl IntoResponse for Html {
    fn into_response(self) -> Response {
        let mut r = self.0.into_response();
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            ),
        );
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        h.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    }
}

/// The navigation: `(key, path, label, access key)`.
const NAV: [(&str, &str, &str, &str); 10] = [
    ("entities", "/ui/entities", "Entities", "e"),
    ("new", "/ui/entities/new", "New entity", "n"),
    ("retrieval", "/ui/retrieval", "Retrieval test", "t"),
    ("bulk", "/ui/bulk", "Bulk", "b"),
    ("stats", "/ui/stats", "Stats", "s"),
    ("runs", "/ui/runs", "Runs", "r"),
    ("experiments", "/ui/experiments", "Experiments", "x"),
    ("simulations", "/ui/simulations", "Simulations", "m"),
    ("redteam", "/ui/redteam", "Red team", "a"),
    ("drafts", "/ui/drafts", "Drafts", "d"),
];

/// The header's sign-in state for `access`.
fn who(access: Access, csrf: &str) -> String {
    match access {
        Access::ReadOnly => "<span title=\"Start assay serve with ASSAY_ADMIN_TOKEN set to allow changes\">read-only</span>".to_owned(),
        Access::SignedOut => "<a href=\"/ui/login\" style=\"color:#fff\">Sign in</a>".to_owned(),
        Access::Admin => format!(
            "<span>admin</span><form method=\"post\" action=\"/ui/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Sign out</button></form>",
            esc(csrf)
        ),
    }
}

/// A whole page: header, navigation (`active` is a [`NAV`] key), `who` (the sign-in state,
/// safe HTML), `body` (safe HTML). `title` is escaped here.
pub fn layout(title: &str, active: &str, who: &str, body: &str) -> String {
    let mut nav = String::new();
    for (key, path, label, k) in NAV {
        let current = if key == active {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(
            nav,
            "<a href=\"{path}\" accesskey=\"{k}\"{current}>{label}</a>"
        );
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>{} · assay</title>\n<link rel=\"stylesheet\" href=\"/ui/assets/ui.css\">\n<script src=\"/ui/assets/ui.js\" defer></script></head>\n<body><a class=\"skip\" href=\"#main\">Skip to content</a>\n<header class=\"top\"><div class=\"bar\"><a class=\"brand\" href=\"/ui/\">assay</a><nav aria-label=\"Main\">{nav}</nav><div class=\"who\">{who}</div></div></header>\n<main id=\"main\">\n{body}\n</main>\n<footer class=\"keys\">Keys: <kbd>/</kbd> search · access keys (<kbd>Alt</kbd>+letter): <kbd>e</kbd> entities, <kbd>n</kbd> new, <kbd>t</kbd> retrieval test, <kbd>b</kbd> bulk, <kbd>s</kbd> stats, <kbd>r</kbd> runs, <kbd>x</kbd> experiments, <kbd>m</kbd> simulations, <kbd>a</kbd> red team, <kbd>d</kbd> drafts</footer>\n</body></html>\n",
        esc(title)
    )
}

/// What every page handler needs: the state, the access, the CSRF token.
pub struct Ctx {
    /// The shared state.
    pub state: AppState,
    /// The request's access.
    pub access: Access,
    /// The CSRF token for forms.
    pub csrf: String,
}

impl Ctx {
    fn new(state: AppState, headers: &HeaderMap) -> Ctx {
        Ctx {
            access: access(&state, headers),
            csrf: state.ui.secrets.csrf_token(),
            state,
        }
    }

    /// A page in the layout.
    pub fn page(&self, title: &str, active: &str, body: &str) -> Html {
        Html(layout(title, active, &who(self.access, &self.csrf), body))
    }

    /// The hidden CSRF field of a form.
    pub fn csrf_field(&self) -> String {
        format!(
            "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
            esc(&self.csrf)
        )
    }

    /// The read-only or sign-in notice shown above a form that writes, or nothing for an admin.
    pub fn write_notice(&self) -> &'static str {
        match self.access {
            Access::Admin => "",
            Access::SignedOut => {
                "<p class=\"notice warn\">You are not signed in: <a href=\"/ui/login\">sign in</a> with the admin token to save changes.</p>"
            }
            Access::ReadOnly => {
                "<p class=\"notice warn\">Read-only: this server was started without <code>ASSAY_ADMIN_TOKEN</code>, so nothing can be changed here.</p>"
            }
        }
    }

    /// `disabled` for controls that write, unless signed in.
    pub fn disabled(&self) -> &'static str {
        if self.access == Access::Admin {
            ""
        } else {
            " disabled"
        }
    }
}

/// Loads the project on a blocking thread and runs `work` there. A project without test
/// banks loads too, with none ([`crate::project::load`]).
pub async fn blocking<T, F>(state: &AppState, work: F) -> Result<T, UiError>
where
    T: Send + 'static,
    F: FnOnce(&Project) -> Result<T, UiError> + Send + 'static,
{
    let dir = state.project_dir.clone();
    tokio::task::spawn_blocking(move || {
        let project = crate::project::load(&dir)?;
        work(&project)
    })
    .await
    .map_err(|e| {
        UiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the page failed: {e}"),
        )
    })?
}

/// Runs `work` on a blocking thread with the project directory, without loading the project
/// (for the experiment and simulation pages, which read their own files).
pub async fn blocking_dir<T, F>(state: &AppState, work: F) -> Result<T, UiError>
where
    T: Send + 'static,
    F: FnOnce(&std::path::Path) -> Result<T, UiError> + Send + 'static,
{
    let dir = state.project_dir.clone();
    tokio::task::spawn_blocking(move || work(&dir))
        .await
        .map_err(|e| {
            UiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the page failed: {e}"),
            )
        })?
}

/// A name as one URL path segment: letters, digits and `-._~` as they are, every other byte
/// percent-encoded (axum decodes it back), so an experiment or scenario name can never leave
/// its segment.
pub fn path_segment(name: &str) -> String {
    name.bytes()
        .fold(String::with_capacity(name.len()), |mut s, b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                s.push(char::from(b));
            } else {
                let _ = write!(s, "%{b:02X}");
            }
            s
        })
}

/// Runs `work` on a blocking thread with a [`KbSession`]: the lock that serialises this
/// server's knowledge-base edits (shared with the admin API) and the project's knowledge-base
/// lock across processes are held from before the project is read until `work` returns.
pub async fn blocking_write<T, F>(state: &AppState, work: F) -> Result<T, UiError>
where
    T: Send + 'static,
    F: FnOnce(&KbSession) -> Result<T, UiError> + Send + 'static,
{
    let lock = state.kb_lock();
    let dir = state.project_dir.clone();
    tokio::task::spawn_blocking(move || {
        let _guard = lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let session = KbSession::open(&dir)?;
        work(&session)
    })
    .await
    .map_err(|e| {
        UiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the page failed: {e}"),
        )
    })?
}

/// Whether the project has a knowledge base to show (a `kb/` folder, or a database store).
pub fn has_kb(project: &Project) -> bool {
    crate::project::has_kb(&project.settings, &|name| std::env::var(name).ok())
}

/// The project's store, as every page reads it: with the embedded store the `kb/` files are
/// imported first (they are its source of truth); a database store is the source of truth
/// itself and is read as it is. A project without a knowledge base gets 404 (and no store is
/// made in its folder).
pub fn open_store(project: &Project) -> Result<engine::OpenStore, UiError> {
    if !has_kb(project) {
        return Err(UiError::not_found(format!(
            "this project has no knowledge base yet (no folder {})",
            project.settings.kb_dir.display()
        )));
    }
    let store = engine::open_store(&project.settings)?;
    engine::sync_kb(&store, project)?;
    Ok(store)
}

/// An empty state: a notice (with `id`) that says what the page would show and which command
/// fills it. `html` is safe HTML: the caller escapes what it interpolates.
pub fn empty_state(id: &str, html: &str) -> String {
    format!("<p class=\"notice empty\" id=\"{id}\">{html}</p>")
}

/// The project folder as a command line names it (`assay run DIR`), escaped.
pub fn dir_arg(state: &AppState) -> String {
    esc(&state.project_dir().display().to_string())
}

/// The knowledge base's empty state.
pub fn no_kb(state: &AppState) -> String {
    let dir = dir_arg(state);
    empty_state(
        "empty-kb",
        &format!(
            "No knowledge base yet: this project has no <code>kb/</code> folder. <code>assay init {dir}</code> makes a project with one (it never overwrites a file); entity files (YAML or JSON) put in <code>kb/</code> show here."
        ),
    )
}

/// A flash message chosen by a fixed key in the query string (`?done=saved`), so no text
/// from the URL is ever shown.
pub fn flash(done: Option<&str>) -> &'static str {
    match done {
        Some("created") => "<p class=\"notice ok\" role=\"status\">Created.</p>",
        Some("saved") => "<p class=\"notice ok\" role=\"status\">Saved as a new version.</p>",
        Some("unchanged") => {
            "<p class=\"notice\" role=\"status\">Nothing changed, so no new version.</p>"
        }
        Some("deactivated") => {
            "<p class=\"notice ok\" role=\"status\">Deactivated (a new, inactive version).</p>"
        }
        Some("signed-in") => "<p class=\"notice ok\" role=\"status\">Signed in.</p>",
        Some("signed-out") => "<p class=\"notice\" role=\"status\">Signed out.</p>",
        Some("imported") => "<p class=\"notice ok\" role=\"status\">Imported.</p>",
        _ => "",
    }
}

async fn css() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        CSS,
    )
}

async fn js() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        JS,
    )
}

async fn login_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<HashMap<String, String>>,
) -> Html {
    let ctx = Ctx::new(state, &headers);
    let body = match ctx.access {
        Access::ReadOnly => "<h1>Sign in</h1><p class=\"notice warn\">This server is read-only: it was started without <code>ASSAY_ADMIN_TOKEN</code>. Restart <code>assay serve</code> with the variable set to allow changes.</p>".to_owned(),
        Access::Admin => format!("<h1>Sign in</h1>{}<p>You are signed in as admin.</p>", flash(Some("signed-in"))),
        Access::SignedOut => {
            let wrong = if q.contains_key("failed") {
                "<p class=\"notice bad\" role=\"alert\">That is not the admin token.</p>"
            } else {
                ""
            };
            format!(
                "<h1>Sign in</h1>{wrong}<form class=\"stack\" method=\"post\" action=\"/ui/login\">{}<label for=\"token\">Admin token <span class=\"hint\">the value of ASSAY_ADMIN_TOKEN on the server</span></label><input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" required autofocus><div class=\"actions\"><button type=\"submit\">Sign in</button></div></form>",
                ctx.csrf_field()
            )
        }
    };
    ctx.page("Sign in", "", &body)
}

async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Result<Response, UiError> {
    check_post(&state, &headers, &form)?;
    let Some(expected) = state.admin_token() else {
        return Err(UiError::new(
            StatusCode::FORBIDDEN,
            "the server is read-only: start it with ASSAY_ADMIN_TOKEN set to allow changes",
        ));
    };
    let given = form.get("token").map_or("", String::as_str);
    if !expected.matches(given.trim()) {
        tracing::warn!("web UI: a sign-in with a wrong admin token");
        return Ok(Redirect::to("/ui/login?failed=1").into_response());
    }
    let cookie = format!(
        "{AUTH_COOKIE}={}; Path=/ui; HttpOnly; SameSite=Strict",
        state.ui.secrets.session()
    );
    let mut r = Redirect::to("/ui/entities?done=signed-in").into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(r)
}

async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Result<Response, UiError> {
    check_post(&state, &headers, &form)?;
    let mut r = Redirect::to("/ui/entities?done=signed-out").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("assay_admin=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    Ok(r)
}

/// Adds `Server-Timing: app;dur=<ms>` to every UI answer: the time the server spent on it
/// (reading the files, rendering), which the browser's developer tools and `bench/ui` read.
async fn server_timing(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let start = std::time::Instant::now();
    let mut response = next.run(request).await;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    if let Ok(v) = HeaderValue::from_str(&format!("app;dur={ms:.1}")) {
        response.headers_mut().insert("server-timing", v);
    }
    response
}

/// The UI's routes, to be nested under `/ui`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/entities") }))
        .route("/assets/ui.css", get(css))
        .route("/assets/ui.js", get(js))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .merge(entities::router())
        .merge(forms::router())
        .merge(pages::router())
        .merge(runs::router())
        .merge(cases::router())
        .merge(experiments::router())
        .merge(simulations::router())
        .merge(redteam::router())
        .merge(bulk::router())
        .merge(drafts::router())
        .layer(axum::middleware::from_fn(server_timing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_compare() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(same("", ""));
    }

    #[test]
    fn secrets_differ_per_process_and_purpose() {
        let a = Secrets::random();
        let b = Secrets::random();
        assert_ne!(a.csrf_token(), b.csrf_token());
        assert_ne!(a.csrf_token(), a.session());
        assert_ne!(a.session(), b.session());
        assert_eq!(a.csrf_token().len(), 64);
    }

    #[test]
    fn cookies_are_found_by_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; assay_admin=xyz"),
        );
        assert_eq!(cookie(&h, AUTH_COOKIE), Some("xyz"));
        assert_eq!(cookie(&h, "b"), None);
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(path_segment("exp_1.a-b~"), "exp_1.a-b~");
        assert_eq!(path_segment("a/b c<"), "a%2Fb%20c%3C");
        assert_eq!(path_segment(".."), "..");
        assert_eq!(path_segment("é"), "%C3%A9");
    }

    #[test]
    fn the_layout_escapes_the_title() {
        let page = layout("<script>x</script>", "", &who(Access::ReadOnly, ""), "");
        assert!(page.contains("&lt;script&gt;x&lt;/script&gt; · assay"));
        assert!(page.contains("read-only"));
    }
}
