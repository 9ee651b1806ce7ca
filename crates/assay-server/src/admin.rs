//! The KB admin API (003 §4) under `/admin/kb/`: list, get, create, update, deactivate,
//! version history, re-embedding, a retrieval test and statistics.
//!
//! Every request loads the project and imports its `kb/` files into the store first (the files
//! are the source of truth of the embedded store), holding the server's KB lock, so edits are
//! serialised: the version check of an update and its write cannot interleave with another
//! edit. Edits go through [`assay_kbtools::kbedit::KbEditor`], exactly as `assay kb` does.

use std::path::PathBuf;
use std::sync::PoisonError;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::header::{ETAG, IF_MATCH};
use axum::http::{HeaderMap, HeaderValue, Uri};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use assay_core::entity::{DEFAULT_AUDIENCE, Entity};
use assay_kb::EntityFilter;
use assay_kb::store::{Edit, EntityUpdate, KbStats, StoredEntity};
use assay_kbtools::kbedit::{
    self, EditOutcome, KbEditor, KbSession, Reembed, Regenerated, list_page,
};
use assay_project::engine;
use assay_project::retrieve::{self, Ask};

use crate::auth::authorize;
use crate::error::ApiError;
use crate::params::Params;
use crate::views::{
    EditView, EntityPageView, EntityView, RetrievalTestView, VersionView, VersionsView,
};
use crate::{AppState, EnvLookup};

/// Entities per page when `page_size` is not given (003 §4).
pub const DEFAULT_PAGE_SIZE: usize = 20;
/// The largest `page_size` a list accepts; more is a 400.
pub const MAX_PAGE_SIZE: usize = 100;
/// The largest `top_k` a retrieval test accepts; more is a 400.
pub const MAX_TOP_K: usize = 50;
/// The header that names the editor recorded as `created_by` (default [`DEFAULT_EDITOR`]).
pub const EDITOR_HEADER: &str = "x-assay-user";
/// The author of an API edit when the request names none.
pub const DEFAULT_EDITOR: &str = "api";

/// A project loaded for one request, with its store imported, holding the knowledge-base
/// lock ([`KbSession`]) for the whole request.
struct Kb {
    session: KbSession,
    env: EnvLookup,
}

impl std::ops::Deref for Kb {
    type Target = KbSession;

    fn deref(&self) -> &KbSession {
        &self.session
    }
}

impl Kb {
    /// The editor: the embedded store's `kb/` files are its source of truth, so edits write
    /// through to them. (A store that is its own source of truth takes `None` for the files.)
    fn editor(&self) -> KbEditor<'_> {
        self.session.editor()
    }

    fn source_file(&self, entity_id: &str) -> Option<PathBuf> {
        self.project.kb.sources.get(entity_id).cloned()
    }

    fn view(&self, stored: StoredEntity) -> EntityView {
        let source = self.source_file(&stored.entity.entity_id);
        EntityView::new(stored, source.as_deref())
    }

    fn lookup(&self) -> impl Fn(&str) -> Option<String> + '_ {
        |name: &str| (self.env)(name)
    }

    fn runtime() -> Result<tokio::runtime::Runtime, ApiError> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ApiError::internal(format!("cannot start a runtime: {e}")))
    }
}

/// Runs `work` on a blocking thread, holding the KB lock, with the project loaded and its
/// `kb/` files imported.
async fn with_kb<T, F>(state: &AppState, work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Kb) -> Result<T, ApiError> + Send + 'static,
{
    let dir = state.project_dir().to_owned();
    let env = state.env();
    let lock = state.kb_lock();
    tokio::task::spawn_blocking(move || {
        // The in-process lock keeps this server's requests from spinning on the file lock;
        // the session's knowledge-base lock keeps other processes out.
        let _guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let session = KbSession::open(&dir)?;
        for w in &session.project.warnings {
            tracing::warn!("{w}");
        }
        work(&Kb { session, env })
    })
    .await
    .map_err(|e| ApiError::internal(format!("the request stopped unexpectedly: {e}")))?
}

fn entity_id(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    p.map(|Path(v)| v)
        .map_err(|e| ApiError::bad_request(format!("invalid path: {e}")))
}

fn editor_name(headers: &HeaderMap) -> Result<String, ApiError> {
    match headers.get(EDITOR_HEADER) {
        None => Ok(DEFAULT_EDITOR.to_owned()),
        Some(v) => v
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.len() <= 100)
            .map(str::to_owned)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "header `{EDITOR_HEADER}`: expected a name of 1 to 100 visible characters"
                ))
            }),
    }
}

fn etag(version: u32) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        headers.insert(ETAG, v);
    }
    headers
}

/// A positive whole number from a query parameter, or a 400 that names it.
fn number(params: &Params, name: &str, default: usize, max: usize) -> Result<usize, ApiError> {
    let Some(text) = params.one(name)? else {
        return Ok(default);
    };
    let n: usize = text.trim().parse().map_err(|_| {
        ApiError::bad_request(format!(
            "query parameter `{name}`: expected a whole number, got `{text}`"
        ))
    })?;
    if n == 0 || n > max {
        return Err(ApiError::bad_request(format!(
            "query parameter `{name}`: {n} is out of range (1 to {max})"
        )));
    }
    Ok(n)
}

/// The JSON object of a request body: **400** when the body is empty, not JSON, or not an
/// object.
fn json_object(body: Result<Bytes, BytesRejection>) -> Result<Map<String, Value>, ApiError> {
    let body = body.map_err(|e| ApiError::body(&e))?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request needs a JSON object as its body",
        ));
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(ApiError::bad_request(format!(
            "the body must be a JSON object, not {}",
            json_kind(&other)
        ))),
        Err(e) => Err(ApiError::bad_request(format!("invalid JSON body: {e}"))),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads a body object as `T`: **422** naming the field for a wrong type, a value out of
/// range, a missing required field, a `null` where one is not allowed, or an unknown field.
fn from_object<T: DeserializeOwned>(map: Map<String, Value>) -> Result<T, ApiError> {
    let mut unknown = Vec::new();
    let mut on_unknown = |p: serde_ignored::Path<'_>| unknown.push(p.to_string());
    let de = serde_ignored::Deserializer::new(Value::Object(map), &mut on_unknown);
    let value: T = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        // serde names an unknown or missing field in its message, at the object's path.
        let field =
            if message.starts_with("unknown field `") || message.starts_with("missing field `") {
                message.split('`').nth(1).unwrap_or_default().to_owned()
            } else if path == "." {
                String::new()
            } else {
                path
            };
        ApiError::invalid(Some(&field), message)
    })?;
    if let Some(field) = unknown.first() {
        return Err(ApiError::invalid(
            Some(field),
            format!("unknown field `{field}`"),
        ));
    }
    Ok(value)
}

/// The version an update is made from: `expected_version` in the body or `If-Match: "N"`
/// (**400** when both are given and differ, **422** when not a positive whole number).
fn expected_version(
    body: &mut Map<String, Value>,
    headers: &HeaderMap,
) -> Result<Option<u32>, ApiError> {
    let from_body = match body.remove("expected_version") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n >= 1)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    ApiError::invalid(
                        Some("expected_version"),
                        format!("expected a version number (1 or more), got {v}"),
                    )
                })?,
        ),
    };
    let from_header = match headers.get(IF_MATCH) {
        None => None,
        Some(v) => {
            let text = v.to_str().unwrap_or_default().trim();
            let bare = text.trim_start_matches("W/").trim_matches('"');
            Some(
                bare.parse::<u32>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "header `If-Match`: expected a version as an entity tag, like \"3\", got `{text}`"
                        ))
                    })?,
            )
        }
    };
    match (from_body, from_header) {
        (Some(b), Some(h)) if b != h => Err(ApiError::bad_request(format!(
            "`expected_version` {b} and `If-Match` {h} disagree; give one"
        ))),
        (b, h) => Ok(b.or(h)),
    }
}

/// The answer to an edit: the view, and the version as the `ETag`.
fn edited(kb: &Kb, outcome: EditOutcome) -> (HeaderMap, Json<EditView>) {
    (etag(outcome.version()), Json(edit_view(kb, outcome)))
}

fn edit_view(kb: &Kb, outcome: EditOutcome) -> EditView {
    match outcome {
        EditOutcome::Written {
            stored,
            changed,
            file,
            note,
        } => EditView {
            changed: true,
            changed_fields: changed.iter().map(|f| (*f).to_owned()).collect(),
            unchanged_because: None,
            file: file.map(|f| f.display().to_string()),
            note,
            entity: kb.view(stored),
        },
        EditOutcome::Unchanged { stored, why } => EditView {
            changed: false,
            changed_fields: Vec::new(),
            unchanged_because: Some(why),
            file: None,
            note: None,
            entity: kb.view(stored),
        },
    }
}

/// `GET /admin/kb/entities`
pub async fn list_entities(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<Json<EntityPageView>, ApiError> {
    let params = Params::parse(
        &uri,
        &["entity_type", "load_mode", "is_active", "page", "page_size"],
    )?;
    let filter = EntityFilter {
        entity_type: params
            .one("entity_type")?
            .map(kbedit::parse_entity_type)
            .transpose()
            .map_err(|e| ApiError::bad_request(format!("query parameter `entity_type`: {e}")))?,
        load_mode: params
            .one("load_mode")?
            .map(kbedit::parse_load_mode)
            .transpose()
            .map_err(|e| ApiError::bad_request(format!("query parameter `load_mode`: {e}")))?,
        active: Some(params.bool("is_active", true)?),
        audience: None,
    };
    let page = number(&params, "page", 1, usize::MAX / MAX_PAGE_SIZE)?;
    let page_size = number(&params, "page_size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)?;
    with_kb(&state, move |kb| {
        let listed = list_page(&*kb.store, &filter, page, page_size)?;
        let pages = listed.pages();
        Ok(Json(EntityPageView {
            items: listed.items.into_iter().map(|s| kb.view(s)).collect(),
            page: listed.page,
            page_size: listed.page_size,
            total: listed.total,
            pages,
        }))
    })
    .await
}

/// `GET /admin/kb/entities/{entity_id}`
pub async fn get_entity(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<(HeaderMap, Json<EntityView>), ApiError> {
    let id = entity_id(id)?;
    Params::parse(&uri, &[])?;
    with_kb(&state, move |kb| {
        let stored = kb.editor().stored(&id)?;
        let model = kbedit::embedding_model(&kb.project.settings, None, &kb.lookup())?;
        let staleness = kb
            .store
            .embedding_status(&EntityFilter::default(), &model)
            .map_err(assay_project::HarnessError::from)?
            .into_iter()
            .find(|(e, _)| *e == id)
            .map(|(_, s)| s);
        let version = stored.version;
        let mut view = kb.view(stored);
        view.embedding_status = staleness;
        Ok((etag(version), Json(view)))
    })
    .await
}

/// `POST /admin/kb/entities`
pub async fn create_entity(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    body: Result<Bytes, BytesRejection>,
) -> Result<(HeaderMap, Json<EditView>), ApiError> {
    authorize(state.admin_token(), &headers)?;
    Params::parse(&uri, &[])?;
    let by = editor_name(&headers)?;
    let entity: Entity = from_object(json_object(body)?)?;
    with_kb(&state, move |kb| {
        let outcome = kb.editor().create(&entity, &Edit::now(&by))?;
        tracing::info!(entity_id = entity.entity_id, by, "created");
        Ok(edited(kb, outcome))
    })
    .await
}

/// `PUT /admin/kb/entities/{entity_id}`
pub async fn update_entity(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
    body: Result<Bytes, BytesRejection>,
) -> Result<(HeaderMap, Json<EditView>), ApiError> {
    authorize(state.admin_token(), &headers)?;
    let id = entity_id(id)?;
    Params::parse(&uri, &[])?;
    let by = editor_name(&headers)?;
    let mut body = json_object(body)?;
    let expected = expected_version(&mut body, &headers)?.ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::PRECONDITION_REQUIRED,
            "precondition_required",
            "an update carries the version it edits: `expected_version` in the body, or `If-Match: \"N\"`",
        )
    })?;
    let update: EntityUpdate = from_object(body)?;
    with_kb(&state, move |kb| {
        let outcome = kb
            .editor()
            .update(&id, &update, Some(expected), &Edit::now(&by))?;
        tracing::info!(entity_id = id, by, version = outcome.version(), "updated");
        Ok(edited(kb, outcome))
    })
    .await
}

/// `DELETE /admin/kb/entities/{entity_id}`: a soft delete (a new, inactive version).
pub async fn deactivate_entity(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<(HeaderMap, Json<EditView>), ApiError> {
    authorize(state.admin_token(), &headers)?;
    let id = entity_id(id)?;
    Params::parse(&uri, &[])?;
    let by = editor_name(&headers)?;
    let expected = expected_version(&mut Map::new(), &headers)?;
    with_kb(&state, move |kb| {
        let outcome = kb.editor().deactivate(&id, expected, &Edit::now(&by))?;
        tracing::info!(
            entity_id = id,
            by,
            version = outcome.version(),
            "deactivated"
        );
        Ok(edited(kb, outcome))
    })
    .await
}

/// `GET /admin/kb/entities/{entity_id}/versions`
pub async fn entity_versions(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    uri: Uri,
) -> Result<Json<VersionsView>, ApiError> {
    let id = entity_id(id)?;
    Params::parse(&uri, &[])?;
    with_kb(&state, move |kb| {
        let versions = kb.editor().history(&id)?;
        Ok(Json(VersionsView {
            entity_id: id,
            versions: versions.into_iter().map(VersionView::from).collect(),
        }))
    })
    .await
}

fn regenerate(kb: &Kb, which: Reembed<'_>) -> Result<Regenerated, ApiError> {
    let choice = engine::choose_embedder(&kb.project.settings, None, &kb.lookup())?;
    let embedder = engine::build_embedder(&choice)?;
    let multi_view = engine::multi_view(&kb.project.settings);
    let outcome = Kb::runtime()?.block_on(kb.editor().regenerate_embeddings(
        embedder.as_ref(),
        which,
        multi_view,
    ))?;
    tracing::info!(
        model = outcome.model,
        embedded = outcome.embedded.len(),
        "embeddings regenerated"
    );
    Ok(outcome)
}

/// `POST /admin/kb/entities/{entity_id}/regenerate-embedding`
pub async fn regenerate_embedding(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Json<Regenerated>, ApiError> {
    authorize(state.admin_token(), &headers)?;
    let id = entity_id(id)?;
    Params::parse(&uri, &[])?;
    with_kb(&state, move |kb| {
        Ok(Json(regenerate(kb, Reembed::One(&id))?))
    })
    .await
}

/// `POST /admin/kb/regenerate-all-embeddings`
pub async fn regenerate_all_embeddings(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Json<Regenerated>, ApiError> {
    authorize(state.admin_token(), &headers)?;
    Params::parse(&uri, &[])?;
    with_kb(&state, move |kb| Ok(Json(regenerate(kb, Reembed::All)?))).await
}

/// `GET /admin/kb/retrieval-test`
pub async fn retrieval_test(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<Json<RetrievalTestView>, ApiError> {
    let params = Params::parse(&uri, &["query", "audience_type", "top_k", "user_state"])?;
    let query = params
        .one("query")?
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(
                "query parameter `query` is required (the message to retrieve for)",
            )
        })?
        .to_owned();
    let audience = params
        .one("audience_type")?
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .unwrap_or(DEFAULT_AUDIENCE)
        .to_owned();
    let top_k = match params.one("top_k")? {
        None => None,
        Some(_) => Some(number(&params, "top_k", 0, MAX_TOP_K)?),
    };
    let user_state = match params.one("user_state")?.map(str::trim) {
        None | Some("") => assay_core::UserState::new(),
        Some(text) => user_state(text)?,
    };
    with_kb(&state, move |kb| {
        let choice = engine::choose_embedder(&kb.project.settings, None, &kb.lookup())?;
        let ask = Ask {
            message: query.clone(),
            audience: audience.clone(),
            state: user_state.clone(),
            top_k,
        };
        let traced =
            Kb::runtime()?.block_on(retrieve::retrieve(&kb.project, &kb.store, &choice, &ask))?;
        Ok(Json(RetrievalTestView::new(
            query, audience, user_state, traced,
        )))
    })
    .await
}

/// The retrieval test's `user_state`: a JSON object (the facts STATE conditions read), as the
/// web UI's retrieval test takes it.
fn user_state(text: &str) -> Result<assay_core::UserState, ApiError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(
            "query parameter `user_state`: expected a JSON object, e.g. {\"days_since_last\": 9}",
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "query parameter `user_state`: not valid JSON: {e}"
        ))),
    }
}

/// `GET /admin/kb/stats`
pub async fn stats(State(state): State<AppState>, uri: Uri) -> Result<Json<KbStats>, ApiError> {
    Params::parse(&uri, &[])?;
    with_kb(&state, move |kb| {
        let model = kbedit::embedding_model(&kb.project.settings, None, &kb.lookup())?;
        Ok(Json(
            kb.store
                .stats(&model)
                .map_err(assay_project::HarnessError::from)?,
        ))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(text: &str) -> Map<String, Value> {
        json_object(Ok(Bytes::from(text.to_owned()))).unwrap()
    }

    #[test]
    fn bodies_are_objects_and_fields_are_named() {
        let e = json_object(Ok(Bytes::from("{"))).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);
        let e = json_object(Ok(Bytes::from("[1]"))).unwrap_err();
        assert!(e.message.contains("not an array"), "{}", e.message);
        let e = json_object(Ok(Bytes::new())).unwrap_err();
        assert_eq!(e.status.as_u16(), 400);

        let e = from_object::<EntityUpdate>(object(r#"{"priority": 101}"#)).unwrap_err();
        assert_eq!(e.status.as_u16(), 422);
        assert_eq!(e.field.as_deref(), Some("priority"));
        assert!(
            e.message.contains("priority 101 is out of range"),
            "{}",
            e.message
        );
        let e = from_object::<EntityUpdate>(object(r#"{"colour": "red"}"#)).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("colour"));
        let e = from_object::<Entity>(object(
            r#"{"entity_id": "x", "entity_type": "KNOWLEDGE", "title": "X", "colour": 1}"#,
        ))
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("colour"));
        let e = from_object::<Entity>(object(r#"{"entity_id": "x", "title": "X"}"#)).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("entity_type"));
    }

    #[test]
    fn versions_come_from_the_body_or_if_match() {
        let mut h = HeaderMap::new();
        let mut body = object(r#"{"expected_version": 3, "title": "T"}"#);
        assert_eq!(expected_version(&mut body, &h).unwrap(), Some(3));
        assert!(!body.contains_key("expected_version"));
        h.insert(IF_MATCH, HeaderValue::from_static("W/\"4\""));
        assert_eq!(expected_version(&mut Map::new(), &h).unwrap(), Some(4));
        let e = expected_version(&mut object(r#"{"expected_version": 3}"#), &h).unwrap_err();
        assert!(e.message.contains("disagree"), "{}", e.message);
        let e = expected_version(
            &mut object(r#"{"expected_version": "3"}"#),
            &HeaderMap::new(),
        )
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("expected_version"));
    }
}
