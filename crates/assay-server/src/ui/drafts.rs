//! The drafts page (`/ui/drafts`): the cases `assay generate` drafted, by entity, findings
//! first, with forms to accept, reject (with a reason) and edit a pending one; and the
//! coverage page (`/ui/drafts/coverage`). The same operations as JSON under `/admin/drafts`
//! (writes need the admin token as a bearer token). Every change goes through
//! [`assay_generate::review`], as `assay generate review` does.

use std::collections::HashMap;
use std::fmt::Write;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use assay_core::bank::BankType;
use assay_generate::review::{self, Coverage, DraftEntry, ListFilter, Reviewer, Selection};

use super::links::{entity_link, url_encode};
use super::{Ctx, Html, UiError, blocking_dir, check_write, empty_state, esc};
use crate::AppState;
use crate::auth::authorize;
use crate::error::ApiError;

/// Who the web UI's reviews are recorded as.
pub const REVIEWER: &str = super::forms::EDITOR;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/drafts", get(list_page))
        .route("/drafts/coverage", get(coverage_page))
        .route("/drafts/accept", post(accept_form))
        .route("/drafts/reject", post(reject_form))
        .route("/drafts/{id}/edit", get(edit_page).post(edit_form))
}

/// A notice chosen by a fixed key (no text from the URL is shown).
fn done_notice(done: Option<&str>) -> &'static str {
    match done {
        Some("accepted") => "<p class=\"notice ok\" role=\"status\">Accepted into the bank.</p>",
        Some("rejected") => "<p class=\"notice\" role=\"status\">Rejected.</p>",
        Some("edited") => "<p class=\"notice ok\" role=\"status\">Draft edited.</p>",
        Some("unchanged") => "<p class=\"notice\" role=\"status\">Nothing changed.</p>",
        _ => "",
    }
}

async fn list_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let mut filter = ListFilter::default();
    for (k, v) in &q {
        match k.as_str() {
            "entity" if !v.trim().is_empty() => filter.entity = Some(v.trim().to_owned()),
            "entity" | "done" => {}
            "all" => filter.reviewed = matches!(v.as_str(), "true" | "yes" | "1"),
            _ => return Err(UiError::bad_request(format!("unknown parameter `{k}`"))),
        }
    }
    let env = ctx.state.env();
    let asked = filter.clone();
    let (counts, groups) =
        blocking_dir(&ctx.state, move |dir| Ok(listed(dir, &asked, &env)?)).await?;
    let mut body = String::from("<h1>Drafts</h1>");
    body.push_str(done_notice(q.get("done").map(String::as_str)));
    body.push_str(ctx.write_notice());
    let _ = write!(
        body,
        "<p id=\"counts\">{} pending ({}), {} accepted, {} rejected · <a href=\"/ui/drafts/coverage\">Coverage</a> · {}</p>",
        counts.pending,
        count(counts.findings, "finding"),
        counts.accepted,
        counts.rejected,
        if filter.reviewed {
            "<a href=\"/ui/drafts\">pending only</a>"
        } else {
            "<a href=\"/ui/drafts?all=true\">show reviewed too</a>"
        }
    );
    if groups.is_empty() {
        body.push_str(&empty_state(
            "empty-drafts",
            &format!(
                "No drafts to review. <code>assay generate {}</code> drafts cases from the knowledge base into <code>test_banks/drafts/</code>.",
                super::dir_arg(&ctx.state)
            ),
        ));
    }
    for g in &groups {
        let _ = write!(
            body,
            "<section class=\"entity-drafts\"><h2>{} <span class=\"hint\">{}, {}</span></h2><table><thead><tr><th>Test</th><th>Bank</th><th>Message or state</th><th>Expects</th><th>Status</th><th>Review</th></tr></thead><tbody>",
            entity_link(&g.entity_id),
            count(g.drafts.len(), "draft"),
            count(g.findings, "finding")
        );
        for d in &g.drafts {
            body.push_str(&row(&ctx, d));
        }
        body.push_str("</tbody></table></section>");
    }
    Ok(ctx.page("Drafts", "drafts", &body))
}

/// The drafts `filter` lists, grouped by entity, with their findings checked against the
/// current knowledge base and rules; and the counts of every draft. Run on a blocking thread:
/// the check builds the retrieval pipeline on a runtime of its own.
fn listed(
    dir: &std::path::Path,
    filter: &ListFilter,
    env: &crate::EnvLookup,
) -> Result<(review::DraftCounts, Vec<review::EntityDrafts>), assay_project::HarnessError> {
    let entries = review::all_entries(dir)?;
    let counts = review::counts(&entries);
    let mut groups = review::group(entries, filter);
    let mut refs: Vec<&mut DraftEntry> = groups
        .iter_mut()
        .flat_map(|g| g.drafts.iter_mut())
        .collect();
    if refs.iter().any(|d| d.finding.is_some()) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                assay_project::HarnessError::Infrastructure(format!("cannot start a runtime: {e}"))
            })?;
        let lookup = |name: &str| env(name);
        rt.block_on(review::recheck_findings(dir, &mut refs, &lookup));
    }
    Ok((counts, groups))
}

/// The line under a finding that says whether it still holds.
fn finding_now(now: &review::FindingNow) -> String {
    let observed = if now.observed.is_empty() {
        "nothing".to_owned()
    } else {
        now.observed.join(", ")
    };
    match now.status {
        review::FindingStatus::FixedSince => format!(
            "<br><strong class=\"fixed-since\">Fixed since</strong>: the current knowledge base and rules do what the draft intends (now: {}).",
            esc(&observed)
        ),
        review::FindingStatus::Holds => {
            format!("<br>Still holds (now: {}).", esc(&observed))
        }
        review::FindingStatus::Unchecked => format!(
            "<br>Not checked again: {}.",
            esc(now.note.as_deref().unwrap_or("unknown"))
        ),
    }
}

fn row(ctx: &Ctx, d: &DraftEntry) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<tr id=\"draft-{}\"><td><code>{}</code></td><td>{}</td><td>{}",
        esc(&d.test_id),
        esc(&d.test_id),
        esc(&d.bank),
        esc(&d.summary)
    );
    if let Some(v) = &d.variant {
        let _ = write!(out, "<br><span class=\"hint\">{}</span>", esc(v));
    }
    if let Some(f) = &d.finding {
        let _ = write!(
            out,
            "<p class=\"notice bad finding\"><strong>Finding: {}</strong> {} <br>Intended: {}{}{}</p>",
            esc(f.kind.as_str()),
            esc(&f.explanation),
            esc(&f.intended),
            if f.observed.is_empty() {
                String::new()
            } else {
                format!("; observed: {}", esc(&f.observed.join(", ")))
            },
            d.finding_now.as_ref().map(finding_now).unwrap_or_default()
        );
    }
    let _ = write!(
        out,
        "</td><td>{}{}</td><td>{}",
        esc(&d.expects.join(", ")),
        if d.excludes.is_empty() {
            String::new()
        } else {
            format!("<br>not: {}", esc(&d.excludes.join(", ")))
        },
        esc(d.status.as_str())
    );
    if let Some(note) = &d.note {
        let _ = write!(out, "<br><span class=\"hint\">{}</span>", esc(note));
    }
    out.push_str("</td><td>");
    if d.status == assay_core::draft::DraftStatus::Pending {
        let id = esc(&d.test_id);
        let disabled = ctx.disabled();
        let _ = write!(
            out,
            "<form method=\"post\" action=\"/ui/drafts/accept\">{csrf}<input type=\"hidden\" name=\"test_id\" value=\"{id}\"><button type=\"submit\"{disabled}>Accept</button></form>\
             <form method=\"post\" action=\"/ui/drafts/reject\">{csrf}<input type=\"hidden\" name=\"test_id\" value=\"{id}\"><input type=\"text\" name=\"reason\" required placeholder=\"reason\" aria-label=\"Reason to reject {id}\"><button type=\"submit\"{disabled}>Reject</button></form>",
            csrf = ctx.csrf_field(),
        );
        // A draft scenario is edited as YAML once accepted, not as a draft.
        if d.bank == review::scenarios::BANK {
            let _ = write!(
                out,
                "<span class=\"hint\">a scenario: edit sim/scenarios/{id}.yaml once accepted</span>"
            );
        } else {
            let _ = write!(
                out,
                "<a href=\"/ui/drafts/{}/edit\">Edit</a>",
                url_encode(&d.test_id)
            );
        }
    }
    out.push_str("</td></tr>");
    out
}

fn field<'a>(form: &'a HashMap<String, String>, name: &str) -> Result<&'a str, UiError> {
    form.get(name)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| UiError::bad_request(format!("{name}: missing")))
}

async fn accept_form(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::Form(posted): axum::Form<HashMap<String, String>>,
) -> Result<Response, UiError> {
    check_write(&state, &headers, &posted)?;
    let id = field(&posted, "test_id")?.to_owned();
    let env = state.env();
    blocking_dir(&state, move |dir| {
        let lookup = |name: &str| env(name);
        review::accept(
            dir,
            &Selection::Ids(vec![id]),
            &Reviewer::now(REVIEWER),
            &lookup,
        )?;
        Ok(())
    })
    .await?;
    Ok(Redirect::to("/ui/drafts?done=accepted").into_response())
}

async fn reject_form(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::Form(posted): axum::Form<HashMap<String, String>>,
) -> Result<Response, UiError> {
    check_write(&state, &headers, &posted)?;
    let id = field(&posted, "test_id")?.to_owned();
    let reason = field(&posted, "reason")?.to_owned();
    blocking_dir(&state, move |dir| {
        review::reject(dir, &[id], &reason, &Reviewer::now(REVIEWER))?;
        Ok(())
    })
    .await?;
    Ok(Redirect::to("/ui/drafts?done=rejected").into_response())
}

/// The fields the edit form shows for a bank: the message (or state) and the expectations.
fn editable(bank: BankType) -> &'static [(&'static str, &'static str)] {
    match bank {
        BankType::Semantic => &[
            ("prompt", "Message"),
            ("expected_primary", "Expected primary (comma-separated ids)"),
            ("expected_secondary", "Expected secondary"),
            ("not_expected", "Not expected"),
        ],
        BankType::State => &[
            ("user_state", "User state (JSON object)"),
            (
                "expected_handlers",
                "Expected handlers (comma-separated ids)",
            ),
            ("not_expected_handlers", "Not expected handlers"),
        ],
        _ => &[
            ("prompt", "Message"),
            ("expected_matches", "Expected matches (comma-separated ids)"),
            ("expected_secondary", "Expected secondary"),
            ("not_expected_matches", "Not expected matches"),
        ],
    }
}

/// A field's value as the form shows it: text as it is, a list of ids comma-separated, any
/// other value as JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A posted value as the `field=value` text review takes: a comma-separated list of ids
/// becomes a JSON list.
fn posted_value(current: &Value, text: &str) -> String {
    if current.is_array() && !text.trim_start().starts_with('[') {
        let ids: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        return serde_json::to_string(&ids).unwrap_or_default();
    }
    text.to_owned()
}

async fn edit_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let target = id.clone();
    let (bank, case) =
        blocking_dir(&ctx.state, move |dir| Ok(review::draft_case(dir, &target)?)).await?;
    let mut body = format!("<h1>Edit draft <code>{}</code></h1>", esc(&id));
    body.push_str(ctx.write_notice());
    let _ = write!(
        body,
        "<form class=\"stack\" method=\"post\" action=\"/ui/drafts/{}/edit\">{}",
        url_encode(&id),
        ctx.csrf_field()
    );
    for (name, label) in editable(bank) {
        let value = shown(&case[*name]);
        if matches!(*name, "prompt" | "user_state") {
            let _ = write!(
                body,
                "<label>{label} <textarea name=\"{name}\" rows=\"4\">{}</textarea></label>",
                esc(&value)
            );
        } else {
            let _ = write!(
                body,
                "<label>{label} <input type=\"text\" name=\"{name}\" value=\"{}\"></label>",
                esc(&value)
            );
        }
    }
    let _ = write!(
        body,
        "<button type=\"submit\"{}>Save draft</button> <a href=\"/ui/drafts\">Cancel</a></form>",
        ctx.disabled()
    );
    Ok(ctx.page("Edit draft", "drafts", &body))
}

async fn edit_form(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(posted): axum::Form<HashMap<String, String>>,
) -> Result<Response, UiError> {
    check_write(&state, &headers, &posted)?;
    let changed = blocking_dir(&state, move |dir| {
        let (bank, case) = review::draft_case(dir, &id)?;
        let mut sets = Vec::new();
        for (name, _) in editable(bank) {
            let Some(text) = posted.get(*name) else {
                continue;
            };
            if *text != shown(&case[*name]) {
                sets.push(((*name).to_owned(), posted_value(&case[*name], text)));
            }
        }
        if sets.is_empty() {
            return Ok(false);
        }
        review::edit(dir, &id, &sets, &Reviewer::now(REVIEWER))?;
        Ok(true)
    })
    .await?;
    let done = if changed { "edited" } else { "unchanged" };
    Ok(Redirect::to(&format!("/ui/drafts?done={done}")).into_response())
}

async fn coverage_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let include_drafts = match q.get("include_drafts").map(String::as_str) {
        None | Some("" | "false") => false,
        Some("true" | "1" | "yes") => true,
        Some(v) => {
            return Err(UiError::bad_request(format!(
                "include_drafts: `{v}` is not true or false"
            )));
        }
    };
    let c: Coverage = super::blocking(&ctx.state, move |project| {
        Ok(review::coverage(project, include_drafts)?)
    })
    .await?;
    let mut body = String::from("<h1>Coverage</h1>");
    let _ = write!(
        body,
        "<p>{} · <a href=\"/ui/drafts\">Drafts</a></p>",
        if include_drafts {
            "Pending drafts counted. <a href=\"/ui/drafts/coverage\">Without drafts</a>"
        } else {
            "Bank cases only. <a href=\"/ui/drafts/coverage?include_drafts=true\">Count pending drafts too</a>"
        }
    );
    let list = |body: &mut String, id: &str, title: &str, ids: &[String]| {
        let _ = write!(
            body,
            "<section id=\"{id}\"><h2>{title} ({})</h2>",
            ids.len()
        );
        if ids.is_empty() {
            body.push_str("<p>None.</p>");
        } else {
            body.push_str("<ul>");
            for i in ids {
                let _ = write!(body, "<li>{}</li>", entity_link(i));
            }
            body.push_str("</ul>");
        }
        body.push_str("</section>");
    };
    list(
        &mut body,
        "no-semantic",
        "SITUATION entities without a semantic case",
        &c.situations_without_semantic,
    );
    list(
        &mut body,
        "no-state",
        "STATE handlers without a state case",
        &c.handlers_without_state,
    );
    let _ = write!(
        body,
        "<section id=\"no-pattern\"><h2>Pattern rules without a pattern case ({})</h2><ul>",
        c.rules_without_pattern.len()
    );
    for r in &c.rules_without_pattern {
        let _ = write!(
            body,
            "<li><code>{}</code> <code>{}</code> → {}</li>",
            esc(&r.rule),
            esc(&r.text),
            esc(&r.entities.join(", "))
        );
    }
    body.push_str("</ul></section>");
    list(
        &mut body,
        "no-always",
        "ALWAYS entities without an always case",
        &c.always_without_case,
    );
    body.push_str("<section id=\"per-entity\"><h2>Cases per entity</h2><table><thead><tr><th>Entity</th><th>Load mode</th><th>Semantic</th><th>State</th><th>Pattern</th><th>Always</th></tr></thead><tbody>");
    for e in &c.entities {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            entity_link(&e.entity_id),
            esc(&e.load_mode),
            e.semantic,
            e.state,
            e.pattern,
            e.always
        );
    }
    body.push_str("</tbody></table></section>");
    Ok(ctx.page("Coverage", "drafts", &body))
}

// ---- The JSON API (`/admin/drafts`) ----

async fn in_dir<T, F>(state: &AppState, work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&std::path::Path) -> Result<T, ApiError> + Send + 'static,
{
    let dir = state.project_dir().to_owned();
    tokio::task::spawn_blocking(move || work(&dir))
        .await
        .map_err(|e| ApiError::internal(format!("the request failed: {e}")))?
}

/// `GET /admin/drafts`: the drafts by entity, findings first, and the counts.
pub async fn api_list(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let mut filter = ListFilter::default();
    for (k, v) in &q {
        match k.as_str() {
            "entity" => filter.entity = Some(v.clone()).filter(|v| !v.is_empty()),
            "all" => {
                filter.reviewed = match v.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "all: `{v}` is not true or false"
                        )));
                    }
                }
            }
            _ => return Err(ApiError::bad_request(format!("unknown parameter `{k}`"))),
        }
    }
    let env = state.env();
    let (counts, groups) = in_dir(&state, move |dir| Ok(listed(dir, &filter, &env)?)).await?;
    Ok(Json(json!({"counts": counts, "entities": groups})))
}

/// `GET /admin/drafts/coverage`.
pub async fn api_coverage(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Coverage>, ApiError> {
    let mut include = false;
    for (k, v) in &q {
        match (k.as_str(), v.as_str()) {
            ("include_drafts", "true") => include = true,
            ("include_drafts", "false") => include = false,
            ("include_drafts", _) => {
                return Err(ApiError::bad_request(format!(
                    "include_drafts: `{v}` is not true or false"
                )));
            }
            _ => return Err(ApiError::bad_request(format!("unknown parameter `{k}`"))),
        }
    }
    let c = in_dir(&state, move |dir| {
        let project = crate::project::load(dir)?;
        Ok(review::coverage(&project, include)?)
    })
    .await?;
    Ok(Json(c))
}

/// The body of a review request.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewBody {
    /// Who reviews (default `api`).
    #[serde(default)]
    by: Option<String>,
    /// Why (a rejection needs it).
    #[serde(default)]
    reason: Option<String>,
    /// The fields an edit changes.
    #[serde(default)]
    set: serde_json::Map<String, Value>,
}

fn body(text: &str) -> Result<ReviewBody, ApiError> {
    if text.trim().is_empty() {
        return Ok(ReviewBody::default());
    }
    serde_json::from_str(text).map_err(|e| ApiError::bad_request(format!("the body: {e}")))
}

fn reviewer(b: &ReviewBody) -> Reviewer {
    Reviewer::now(b.by.as_deref().unwrap_or("api"))
}

/// `POST /admin/drafts/{test_id}/accept`.
pub async fn api_accept(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(test_id): Path<String>,
    text: String,
) -> Result<Json<review::Outcome>, ApiError> {
    authorize(state.admin_token(), &headers)?;
    let b = body(&text)?;
    let env = state.env();
    let out = in_dir(&state, move |dir| {
        let lookup = |name: &str| env(name);
        Ok(review::accept(
            dir,
            &Selection::Ids(vec![test_id]),
            &reviewer(&b),
            &lookup,
        )?)
    })
    .await?;
    Ok(Json(out))
}

/// `POST /admin/drafts/{test_id}/reject` with `{"reason": …}`.
pub async fn api_reject(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(test_id): Path<String>,
    text: String,
) -> Result<Json<review::Outcome>, ApiError> {
    authorize(state.admin_token(), &headers)?;
    let b = body(&text)?;
    let reason = b.reason.clone().unwrap_or_default();
    let out = in_dir(&state, move |dir| {
        Ok(review::reject(dir, &[test_id], &reason, &reviewer(&b))?)
    })
    .await?;
    Ok(Json(out))
}

/// `POST /admin/drafts/{test_id}/edit` with `{"set": {field: value}}`.
pub async fn api_edit(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(test_id): Path<String>,
    text: String,
) -> Result<Json<review::Outcome>, ApiError> {
    authorize(state.admin_token(), &headers)?;
    let b = body(&text)?;
    let sets: Vec<(String, String)> = b
        .set
        .iter()
        .map(|(k, v)| {
            let raw = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), raw)
        })
        .collect();
    let out = in_dir(&state, move |dir| {
        Ok(review::edit(dir, &test_id, &sets, &reviewer(&b))?)
    })
    .await?;
    Ok(Json(out))
}

/// The OpenAPI paths of the drafts API.
pub fn openapi_paths() -> Value {
    let error = |description: &str| {
        json!({"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let ok = |description: &str| json!({"description": description, "content": {"application/json": {"schema": {"type": "object"}}}});
    let id = json!({"name": "test_id", "in": "path", "required": true, "description": "The draft's test id.", "schema": {"type": "string"}});
    let write_errors = |extra: &str| {
        json!({
            "200": ok("What changed: test_ids, bank_files, draft_files, note."),
            "400": error(&format!("A bad body, no draft with this id, one already reviewed{extra}; nothing is written.")),
            "401": error("No bearer token."),
            "403": error("A wrong token, or the server has no admin token (read-only)."),
            "422": error("The project or a draft file does not load (the message names the file and field)."),
            "500": error("The file system failed.")
        })
    };
    let review_body = |props: Value| json!({"required": false, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": props}}}});
    json!({
        "/admin/drafts": {"get": {
            "operationId": "listDrafts",
            "summary": "The drafts of assay generate by entity (findings first) and their counts by status.",
            "parameters": [
                {"name": "entity", "in": "query", "required": false, "description": "Only this entity's drafts.", "schema": {"type": "string"}},
                {"name": "all", "in": "query", "required": false, "description": "Accepted and rejected drafts too.", "schema": {"type": "boolean", "default": false}}
            ],
            "responses": {"200": ok("{counts, entities: [{entity_id, findings, drafts}]}"), "400": error("An unknown query parameter."), "422": error("A draft file does not load.")}
        }},
        "/admin/drafts/coverage": {"get": {
            "operationId": "getCoverage",
            "summary": "Cases per entity and bank; SITUATION entities, STATE handlers, pattern rules and ALWAYS entities no case tests.",
            "parameters": [{"name": "include_drafts", "in": "query", "required": false, "description": "Count pending drafts as cases.", "schema": {"type": "boolean", "default": false}}],
            "responses": {"200": ok("The coverage."), "400": error("An unknown query parameter."), "422": error("The project does not load.")}
        }},
        "/admin/drafts/{test_id}/accept": {"post": {
            "operationId": "acceptDraft",
            "summary": "Accept a pending draft: its case, with its provenance, joins test_banks/<bank>/generated.json. Needs the admin token.",
            "security": [{"adminToken": []}],
            "parameters": [id.clone()],
            "requestBody": review_body(json!({"by": {"type": "string"}})),
            "responses": write_errors(", or a test id a bank already has")
        }},
        "/admin/drafts/{test_id}/reject": {"post": {
            "operationId": "rejectDraft",
            "summary": "Reject a pending draft with a reason. Needs the admin token.",
            "security": [{"adminToken": []}],
            "parameters": [id.clone()],
            "requestBody": review_body(json!({"by": {"type": "string"}, "reason": {"type": "string"}})),
            "responses": write_errors(", or no reason")
        }},
        "/admin/drafts/{test_id}/edit": {"post": {
            "operationId": "editDraft",
            "summary": "Change fields of a pending draft's case ({\"set\": {field: value}}); the result must be a valid case naming known entities. Needs the admin token.",
            "security": [{"adminToken": []}],
            "parameters": [id],
            "requestBody": review_body(json!({"by": {"type": "string"}, "set": {"type": "object"}})),
            "responses": write_errors(", an unknown field, a value of the wrong type, or an unknown entity")
        }}
    })
}

/// `1 draft`, `2 drafts`.
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
