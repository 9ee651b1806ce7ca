//! The pages that write: create, edit and deactivate an entity. Every write goes through
//! [`KbEditor`] (the same write-through to the `kb/` files as `assay kb` and the admin API),
//! carries the version it was made from (a stale one is a 409 with a link to reload), and
//! needs the CSRF token and a signed-in admin ([`super::check_write`]).

use std::collections::HashMap;
use std::fmt::Write;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value};

use assay_core::entity::{Entity, EntityType};
use assay_kb::store::{Edit, EntityUpdate};
use assay_kbtools::kbedit::{EditError, EditOutcome, LOAD_MODES};

use super::entities::{fields, show};
use super::links::{entity_link, url_encode};
use super::{Ctx, Html, UiError, blocking, blocking_write, check_write, esc, open_store};
use crate::AppState;

/// Who the web UI's edits are recorded as (`created_by`).
pub const EDITOR: &str = "web-ui";

/// The optional text fields of an entity, in schema order, with their labels.
const TEXT_FIELDS: [(&str, &str); 8] = [
    ("concept_summary", "Concept summary"),
    ("recognition", "Recognition"),
    ("keywords", "Keywords"),
    ("guidance_do", "Guidance: do"),
    ("guidance_dont", "Guidance: don't"),
    ("examples", "Examples"),
    ("red_flags", "Red flags"),
    ("subtype", "Subtype"),
];

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/entities/new", get(new_page))
        .route("/entities/create", post(create))
        .route("/entities/{id}/edit", get(edit_page))
        .route("/entities/{id}/update", post(update))
        .route("/entities/{id}/deactivate", post(deactivate))
}

/// A form's values as strings, by field name.
type Values = HashMap<String, String>;

fn values_of(e: &Entity) -> Values {
    fields(e)
        .into_iter()
        .map(|(k, v)| {
            let text = match (&*k, &v) {
                ("state_conditions", Value::Object(_)) => {
                    serde_json::to_string_pretty(&v).unwrap_or_default()
                }
                _ => show(&v),
            };
            (k, text)
        })
        .collect()
}

fn val<'a>(v: &'a Values, k: &str) -> &'a str {
    v.get(k).map_or("", String::as_str)
}

/// The form of an entity: `create` adds the id, type and subtype; `error` is shown on top and
/// `field` marks the field at fault.
fn form(
    ctx: &Ctx,
    action: &str,
    v: &Values,
    create: bool,
    error: Option<(&str, Option<&str>)>,
) -> String {
    let mut out = String::new();
    out.push_str(ctx.write_notice());
    if let Some((message, _)) = error {
        let _ = write!(
            out,
            "<p class=\"notice bad\" role=\"alert\" id=\"form-error\">{}</p>",
            esc(message)
        );
    }
    let bad = |name: &str| -> &'static str {
        if error.and_then(|e| e.1) == Some(name) {
            " aria-invalid=\"true\" autofocus"
        } else {
            ""
        }
    };
    let _ = write!(
        out,
        "<form class=\"stack\" method=\"post\" action=\"{}\">{}",
        esc(action),
        ctx.csrf_field()
    );
    if create {
        let _ = write!(
            out,
            "<div class=\"row\"><label>Entity id <span class=\"hint\">unique, never reused; also the file name kb/&lt;id&gt;.yaml</span><input type=\"text\" name=\"entity_id\" required pattern=\"[A-Za-z0-9_.-]+\" value=\"{}\"{}></label><label>Type <select name=\"entity_type\">",
            esc(val(v, "entity_id")),
            bad("entity_id")
        );
        for t in EntityType::ALL {
            let _ = write!(
                out,
                "<option{}>{}</option>",
                if val(v, "entity_type") == t.as_str() {
                    " selected"
                } else {
                    ""
                },
                t.as_str()
            );
        }
        out.push_str("</select></label></div>");
    } else {
        let _ = write!(
            out,
            "<input type=\"hidden\" name=\"version\" value=\"{}\">",
            esc(val(v, "version"))
        );
    }
    let _ = write!(
        out,
        "<label>Title <input type=\"text\" name=\"title\" required value=\"{}\"{}></label><div class=\"row\"><label>Load mode <select name=\"load_mode\">",
        esc(val(v, "title")),
        bad("title")
    );
    let mode = match val(v, "load_mode") {
        "" => "SITUATION",
        m => m,
    };
    for m in LOAD_MODES {
        let _ = write!(
            out,
            "<option{}>{}</option>",
            if mode == m.as_str() { " selected" } else { "" },
            m.as_str()
        );
    }
    let priority = match val(v, "priority") {
        "" => "50",
        p => p,
    };
    let audience = match val(v, "audience_types") {
        "" if create => "PARENT",
        a => a,
    };
    let _ = write!(
        out,
        "</select></label><label>Priority <span class=\"hint\">0–100</span><input type=\"number\" name=\"priority\" min=\"0\" max=\"100\" value=\"{}\"{}></label><label>Audience types <span class=\"hint\">comma-separated</span><input type=\"text\" name=\"audience_types\" value=\"{}\"{}></label><label><span>Active</span><input type=\"checkbox\" name=\"is_active\" value=\"true\"{}></label></div>",
        esc(priority),
        bad("priority"),
        esc(audience),
        bad("audience_types"),
        if create || val(v, "is_active") == "true" {
            " checked"
        } else {
            ""
        }
    );
    for (name, label) in TEXT_FIELDS {
        if name == "subtype" && !create {
            continue;
        }
        let _ = write!(
            out,
            "<label>{label}<textarea name=\"{name}\"{}>{}</textarea></label>",
            bad(name),
            esc(val(v, name))
        );
    }
    let _ = write!(
        out,
        "<label>State conditions <span class=\"hint\">JSON object, for STATE entities; empty for none</span><textarea name=\"state_conditions\" class=\"mono\"{}>{}</textarea></label><div class=\"actions\"><button type=\"submit\"{}>{}</button><a href=\"{}\">Cancel</a></div></form>",
        bad("state_conditions"),
        esc(val(v, "state_conditions")),
        ctx.disabled(),
        if create { "Create" } else { "Save new version" },
        if create {
            "/ui/entities".to_owned()
        } else {
            format!("/ui/entities/{}", url_encode(val(v, "entity_id")))
        }
    );
    out
}

/// A form field error: `(message, field)`.
type FieldError = (String, Option<&'static str>);

/// A text area's value: `null` when blank, else the text with the browser's CRLF line ends
/// made LF (and otherwise as typed, so an unchanged field stays unchanged).
fn text_or_null(form: &Values, name: &str) -> Value {
    let text = val(form, name).replace("\r\n", "\n");
    if text.trim().is_empty() {
        Value::Null
    } else {
        Value::String(text)
    }
}

/// The posted form as the JSON fields an entity (or an update) takes.
fn json_of(form: &Values, create: bool) -> Result<Map<String, Value>, FieldError> {
    let mut m = Map::new();
    if create {
        m.insert(
            "entity_id".into(),
            Value::String(val(form, "entity_id").trim().to_owned()),
        );
        m.insert(
            "entity_type".into(),
            Value::String(val(form, "entity_type").trim().to_owned()),
        );
    }
    m.insert("title".into(), Value::String(val(form, "title").to_owned()));
    m.insert(
        "load_mode".into(),
        Value::String(val(form, "load_mode").trim().to_owned()),
    );
    let priority = val(form, "priority").trim();
    let p: u8 = priority.parse().ok().filter(|p| *p <= 100).ok_or_else(|| {
        (
            format!("priority: `{priority}` is not a whole number from 0 to 100"),
            Some("priority"),
        )
    })?;
    m.insert("priority".into(), Value::from(p));
    let audience: Vec<Value> = val(form, "audience_types")
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| Value::String(a.to_owned()))
        .collect();
    if audience.is_empty() {
        return Err((
            "audience_types: give at least one audience (e.g. PARENT)".into(),
            Some("audience_types"),
        ));
    }
    m.insert("audience_types".into(), Value::Array(audience));
    m.insert(
        "is_active".into(),
        Value::Bool(val(form, "is_active") == "true"),
    );
    for (name, _) in TEXT_FIELDS {
        if name == "subtype" && !create {
            continue;
        }
        m.insert(name.into(), text_or_null(form, name));
    }
    let conditions = val(form, "state_conditions").trim();
    let conditions = if conditions.is_empty() {
        Value::Null
    } else {
        match serde_json::from_str::<Value>(conditions) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return Err((
                    "state_conditions: expected a JSON object, e.g. {\"days_since_last\": {\"gte\": 7}}".into(),
                    Some("state_conditions"),
                ));
            }
            Err(e) => {
                return Err((
                    format!("state_conditions: not valid JSON: {e}"),
                    Some("state_conditions"),
                ));
            }
        }
    };
    m.insert("state_conditions".into(), conditions);
    Ok(m)
}

fn edit_error(e: &EditError) -> (StatusCode, Option<&'static str>) {
    let status = match e {
        EditError::NotFound(_) => StatusCode::NOT_FOUND,
        EditError::Conflict(_) | EditError::AlreadyExists { .. } => StatusCode::CONFLICT,
        EditError::Invalid { .. } | EditError::Refused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        EditError::Harness(h) => crate::error::ErrorCode::status(h),
    };
    (status, e.field())
}

async fn new_page(State(state): State<AppState>, headers: HeaderMap) -> Html {
    let ctx = Ctx::new(state, &headers);
    let v = Values::from([
        ("entity_type".to_owned(), "KNOWLEDGE".to_owned()),
        ("is_active".to_owned(), "true".to_owned()),
    ]);
    let body = format!(
        "<p class=\"muted\"><a href=\"/ui/entities\">Entities</a> /</p><h1>New entity</h1><p class=\"muted\">Saved as a new file <code>kb/&lt;id&gt;.yaml</code> in the project, then imported as version 1.</p>{}",
        form(&ctx, "/ui/entities/create", &v, true, None)
    );
    ctx.page("New entity", "new", &body)
}

async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::Form(posted): axum::Form<Values>,
) -> Result<Response, UiError> {
    check_write(&state, &headers, &posted)?;
    let ctx = Ctx::new(state, &headers);
    let again = |ctx: &Ctx, status: StatusCode, message: &str, field: Option<&str>| {
        let body = format!(
            "<h1>New entity</h1>{}",
            form(
                ctx,
                "/ui/entities/create",
                &posted,
                true,
                Some((message, field))
            )
        );
        (status, ctx.page("New entity", "new", &body)).into_response()
    };
    let json = match json_of(&posted, true) {
        Ok(j) => j,
        Err((m, f)) => return Ok(again(&ctx, StatusCode::UNPROCESSABLE_ENTITY, &m, f)),
    };
    let entity: Entity = match serde_json::from_value(Value::Object(json)) {
        Ok(e) => e,
        Err(e) => {
            return Ok(again(
                &ctx,
                StatusCode::UNPROCESSABLE_ENTITY,
                &e.to_string(),
                None,
            ));
        }
    };
    let id = entity.entity_id.clone();
    let result = blocking_write(&ctx.state, move |session| {
        let editor = session.editor();
        Ok(editor
            .create(&entity, &Edit::now(EDITOR))
            .map(|_| ())
            .map_err(|e| (e.to_string(), edit_error(&e))))
    })
    .await?;
    match result {
        Ok(()) => Ok(
            Redirect::to(&format!("/ui/entities/{}?done=created", url_encode(&id))).into_response(),
        ),
        Err((m, (status, field))) => Ok(again(&ctx, status, &m, field)),
    }
}

async fn edit_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let lookup = id.clone();
    let stored = blocking(&ctx.state, move |project| {
        let store = open_store(project)?;
        store
            .get_stored(&lookup)?
            .ok_or_else(|| UiError::not_found(format!("no entity `{lookup}`")))
    })
    .await?;
    let mut v = values_of(&stored.entity);
    v.insert("version".into(), stored.version.to_string());
    let body = format!(
        "<p class=\"muted\"><a href=\"/ui/entities\">Entities</a> / {} /</p><h1>Edit {}</h1><p class=\"muted\">{} · version {} · saving writes the entity's <code>kb/</code> file and adds version {}.</p>{}",
        entity_link(&id),
        esc(&stored.entity.title),
        stored.entity.entity_type.as_str(),
        stored.version,
        stored.version + 1,
        form(
            &ctx,
            &format!("/ui/entities/{}/update", url_encode(&id)),
            &v,
            false,
            None
        )
    );
    Ok(ctx.page(&format!("Edit {}", stored.entity.title), "entities", &body))
}

fn version_field(posted: &Values) -> Result<u32, UiError> {
    let v = val(posted, "version").trim();
    v.parse().map_err(|_| {
        UiError::bad_request(format!(
            "version: `{v}` is not a version number; reload the page and edit again"
        ))
    })
}

async fn update(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(mut posted): axum::Form<Values>,
) -> Result<Response, UiError> {
    check_write(&state, &headers, &posted)?;
    let ctx = Ctx::new(state, &headers);
    let version = version_field(&posted)?;
    posted.insert("entity_id".into(), id.clone());
    let action = format!("/ui/entities/{}/update", url_encode(&id));
    let again = |ctx: &Ctx, status: StatusCode, message: &str, field: Option<&str>, extra: &str| {
        let body = format!(
            "<h1>Edit {}</h1>{extra}{}",
            esc(val(&posted, "title")),
            form(ctx, &action, &posted, false, Some((message, field)))
        );
        (status, ctx.page("Edit", "entities", &body)).into_response()
    };
    let json = match json_of(&posted, false) {
        Ok(j) => j,
        Err((m, f)) => return Ok(again(&ctx, StatusCode::UNPROCESSABLE_ENTITY, &m, f, "")),
    };
    let patch: EntityUpdate = match serde_json::from_value(Value::Object(json)) {
        Ok(u) => u,
        Err(e) => {
            return Ok(again(
                &ctx,
                StatusCode::UNPROCESSABLE_ENTITY,
                &e.to_string(),
                None,
                "",
            ));
        }
    };
    let target = id.clone();
    let result = blocking_write(&ctx.state, move |session| {
        let editor = session.editor();
        Ok(editor
            .update(&target, &patch, Some(version), &Edit::now(EDITOR))
            .map(|o| matches!(o, EditOutcome::Written { .. }))
            .map_err(|e| (e.to_string(), edit_error(&e))))
    })
    .await?;
    let enc = url_encode(&id);
    match result {
        Ok(true) => Ok(Redirect::to(&format!("/ui/entities/{enc}?done=saved")).into_response()),
        Ok(false) => {
            Ok(Redirect::to(&format!("/ui/entities/{enc}?done=unchanged")).into_response())
        }
        Err((m, (StatusCode::CONFLICT, _))) => {
            let extra = format!(
                "<p class=\"notice warn\">Someone saved this entity while you were editing. <a href=\"/ui/entities/{enc}/history\">See what changed</a>, then <a href=\"/ui/entities/{enc}/edit\">edit the current version</a>; your text is kept below.</p>"
            );
            Ok(again(&ctx, StatusCode::CONFLICT, &m, None, &extra))
        }
        Err((m, (status, field))) => Ok(again(&ctx, status, &m, field, "")),
    }
}

async fn deactivate(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(posted): axum::Form<Values>,
) -> Result<Response, UiError> {
    check_write(&state, &headers, &posted)?;
    let version = version_field(&posted)?;
    let target = id.clone();
    blocking_write(&state, move |session| {
        let editor = session.editor();
        editor
            .deactivate(&target, Some(version), &Edit::now(EDITOR))
            .map_err(|e| UiError::new(edit_error(&e).0, e.to_string()))?;
        Ok(())
    })
    .await?;
    Ok(Redirect::to(&format!(
        "/ui/entities/{}?done=deactivated",
        url_encode(&id)
    ))
    .into_response())
}
