//! Entity pages: the list with filters and paging, the detail, and the version history with a
//! field-by-field diff.

use std::collections::HashMap;
use std::fmt::Write;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::routing::get;
use serde_json::Value;

use assay_core::entity::{Entity, EntityType, LoadMode};
use assay_kb::EntityFilter;
use assay_kb::store::EntityVersion;
use assay_kbtools::kbedit::{self, LOAD_MODES};

use super::links::{entity_link, url_encode};
use super::{Ctx, Html, UiError, blocking, esc, flash, has_kb, no_kb, open_store};
use crate::AppState;

/// The most rows a list page shows.
pub const MAX_PAGE_SIZE: usize = 100;
const DEFAULT_PAGE_SIZE: usize = 20;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/entities", get(list))
        .route("/entities/{id}", get(detail))
        .route("/entities/{id}/history", get(history))
}

/// The list's filters, parsed by hand so a bad value is a clear 400.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ListQuery {
    entity_type: Option<EntityType>,
    load_mode: Option<LoadMode>,
    /// `None`: all.
    active: Option<bool>,
    q: String,
    page: usize,
    page_size: usize,
}

impl ListQuery {
    fn parse(q: &HashMap<String, String>) -> Result<ListQuery, UiError> {
        let mut out = ListQuery {
            active: Some(true),
            page: 1,
            page_size: DEFAULT_PAGE_SIZE,
            ..ListQuery::default()
        };
        for (k, v) in q {
            let v = v.trim();
            match k.as_str() {
                "entity_type" | "load_mode" if v.is_empty() => {}
                "entity_type" => {
                    out.entity_type = Some(
                        kbedit::parse_entity_type(v)
                            .map_err(|e| UiError::bad_request(format!("entity_type: {e}")))?,
                    );
                }
                "load_mode" => {
                    out.load_mode = Some(
                        kbedit::parse_load_mode(v)
                            .map_err(|e| UiError::bad_request(format!("load_mode: {e}")))?,
                    );
                }
                "active" | "is_active" => {
                    out.active = match v {
                        "" | "all" => None,
                        "true" | "yes" => Some(true),
                        "false" | "no" => Some(false),
                        _ => {
                            return Err(UiError::bad_request(format!(
                                "{k}: `{v}` is not true, false or all"
                            )));
                        }
                    };
                }
                "q" => v.clone_into(&mut out.q),
                "page" => {
                    out.page = v.parse().ok().filter(|p| *p >= 1).ok_or_else(|| {
                        UiError::bad_request(format!("page: `{v}` is not a page number (1, 2, …)"))
                    })?;
                }
                "page_size" => {
                    out.page_size = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_PAGE_SIZE).contains(n))
                        .ok_or_else(|| {
                            UiError::bad_request(format!(
                                "page_size: `{v}` is not a number from 1 to {MAX_PAGE_SIZE}"
                            ))
                        })?;
                }
                "done" => {}
                _ => return Err(UiError::bad_request(format!("unknown parameter `{k}`"))),
            }
        }
        Ok(out)
    }

    fn filter(&self) -> EntityFilter {
        EntityFilter {
            entity_type: self.entity_type,
            load_mode: self.load_mode,
            active: self.active,
            audience: None,
        }
    }

    /// The query string of this list at another page.
    fn at_page(&self, page: usize) -> String {
        let mut parts = vec![format!("page={page}")];
        if let Some(t) = self.entity_type {
            parts.push(format!("entity_type={}", t.as_str()));
        }
        if let Some(m) = self.load_mode {
            parts.push(format!("load_mode={}", m.as_str()));
        }
        parts.push(format!(
            "active={}",
            self.active
                .map_or("all", |a| if a { "true" } else { "false" })
        ));
        if !self.q.is_empty() {
            parts.push(format!("q={}", url_encode(&self.q)));
        }
        if self.page_size != DEFAULT_PAGE_SIZE {
            parts.push(format!("page_size={}", self.page_size));
        }
        parts.join("&amp;")
    }

    fn matches(&self, e: &Entity) -> bool {
        if self.q.is_empty() {
            return true;
        }
        let needle = self.q.to_lowercase();
        [
            Some(&e.entity_id),
            Some(&e.title),
            e.concept_summary.as_ref(),
            e.keywords.as_ref(),
            e.recognition.as_ref(),
        ]
        .into_iter()
        .flatten()
        .any(|t| t.to_lowercase().contains(&needle))
    }
}

fn selected(cond: bool) -> &'static str {
    if cond { " selected" } else { "" }
}

fn active_tag(active: bool) -> &'static str {
    if active {
        "<span class=\"tag on\">active</span>"
    } else {
        "<span class=\"tag inactive\">inactive</span>"
    }
}

async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let query = ListQuery::parse(&q)?;
    let done = q.get("done").cloned();
    let listed = blocking(&ctx.state, move |project| {
        if !has_kb(project) {
            // What the folder holds instead, so the first page says where to look.
            let contents = crate::project::Contents::survey(&project.settings.root, &|name| {
                std::env::var(name).ok()
            })?;
            return Ok(Err(contents));
        }
        let store = open_store(project)?;
        let all: Vec<Entity> = store
            .list(&query.filter())?
            .into_iter()
            .filter(|e| query.matches(e))
            .collect();
        let total = all.len();
        let rows: Vec<Entity> = all
            .into_iter()
            .skip((query.page - 1) * query.page_size)
            .take(query.page_size)
            .collect();
        Ok(Ok((rows, total)))
    })
    .await?;
    let query = ListQuery::parse(&q)?;
    let mut body = String::from("<h1>Entities</h1>");
    body.push_str(flash(done.as_deref()));
    let (rows, total) = match listed {
        Ok(listed) => listed,
        Err(contents) => {
            body.push_str(&no_kb(&ctx.state));
            let _ = write!(
                body,
                "<p class=\"muted\" id=\"holds\">This folder holds {}. The <a href=\"/ui/runs\">runs</a>, <a href=\"/ui/experiments\">experiments</a> and <a href=\"/ui/simulations\">simulations</a> have their own pages.</p>",
                esc(&contents.describe())
            );
            return Ok(ctx.page("Entities", "entities", &body));
        }
    };
    let _ = write!(
        body,
        "<form class=\"filters\" method=\"get\" action=\"/ui/entities\" role=\"search\"><label>Search <input type=\"search\" name=\"q\" value=\"{}\" placeholder=\"id, title, summary, keywords\" data-search></label><label>Type <select name=\"entity_type\"><option value=\"\">any</option>",
        esc(&query.q)
    );
    for t in EntityType::ALL {
        let _ = write!(
            body,
            "<option{}>{}</option>",
            selected(query.entity_type == Some(t)),
            t.as_str()
        );
    }
    body.push_str("</select></label><label>Load mode <select name=\"load_mode\"><option value=\"\">any</option>");
    for m in LOAD_MODES {
        let _ = write!(
            body,
            "<option{}>{}</option>",
            selected(query.load_mode == Some(m)),
            m.as_str()
        );
    }
    let _ = write!(
        body,
        "</select></label><label>Status <select name=\"active\"><option value=\"true\"{}>active</option><option value=\"false\"{}>inactive</option><option value=\"all\"{}>all</option></select></label><button type=\"submit\">Filter</button> <a class=\"button secondary\" href=\"/ui/entities/new\">New entity</a></form>",
        selected(query.active == Some(true)),
        selected(query.active == Some(false)),
        selected(query.active.is_none()),
    );
    let pages = total.div_ceil(query.page_size).max(1);
    let first = (query.page - 1) * query.page_size;
    let _ = write!(
        body,
        "<p class=\"muted\">{total} entities{}</p>",
        if total > 0 {
            format!(
                "; showing {}–{}",
                first + 1,
                (first + rows.len()).max(first + 1)
            )
        } else {
            String::new()
        }
    );
    body.push_str("<div class=\"table-wrap\"><table class=\"grid\"><thead><tr><th>Entity</th><th>Title</th><th>Type</th><th>Load mode</th><th class=\"num\">Priority</th><th>Audience</th><th>Status</th></tr></thead><tbody>");
    for e in &rows {
        let _ = write!(
            body,
            "<tr><td class=\"id\" title=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&e.entity_id),
            entity_link(&e.entity_id),
            esc(&e.title),
            e.entity_type.as_str(),
            e.load_mode.as_str(),
            e.priority.get(),
            esc(&e.audience_types.join(", ")),
            active_tag(e.is_active)
        );
    }
    if rows.is_empty() {
        body.push_str(
            "<tr><td colspan=\"7\" class=\"muted\">No entity matches these filters.</td></tr>",
        );
    }
    body.push_str("</tbody></table></div>");
    let _ = write!(body, "<nav class=\"pager\" aria-label=\"Pages\">");
    if query.page > 1 {
        let _ = write!(
            body,
            "<a href=\"/ui/entities?{}\" rel=\"prev\">← Previous</a>",
            query.at_page(query.page - 1)
        );
    }
    let _ = write!(body, "<span>Page {} of {pages}</span>", query.page);
    if query.page < pages {
        let _ = write!(
            body,
            "<a href=\"/ui/entities?{}\" rel=\"next\">Next →</a>",
            query.at_page(query.page + 1)
        );
    }
    body.push_str("</nav>");
    Ok(ctx.page("Entities", "entities", &body))
}

/// The fields of an entity, in schema order, as JSON values (`null` for an unset one).
pub(super) fn fields(e: &Entity) -> Vec<(String, Value)> {
    match serde_json::to_value(e) {
        Ok(Value::Object(map)) => map.into_iter().collect(),
        _ => Vec::new(),
    }
}

/// A field's value for display: text as is, anything else as JSON.
pub(super) fn show(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

async fn detail(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let lookup = id.clone();
    let (stored, versions, named) = blocking(&ctx.state, move |project| {
        let store = open_store(project)?;
        let stored = store
            .get_stored(&lookup)?
            .ok_or_else(|| UiError::not_found(format!("no entity `{lookup}`")))?;
        let versions = store.history(&lookup)?.len();
        let has_banks = project.settings.banks_dir.is_dir();
        let cases = super::cases::naming(project, &lookup);
        let newest = if cases.is_empty() {
            None
        } else {
            super::cases::newest_scores(&project.settings.results_dir)
        };
        Ok((stored, versions, (has_banks, cases, newest)))
    })
    .await?;
    let e = &stored.entity;
    let mut body = format!(
        "<p class=\"muted\"><a href=\"/ui/entities\">Entities</a> /</p><h1>{} {}</h1>",
        esc(&e.title),
        active_tag(e.is_active)
    );
    body.push_str(flash(q.get("done").map(String::as_str)));
    let enc = url_encode(&e.entity_id);
    let _ = write!(
        body,
        "<div class=\"actions\"><a class=\"button\" href=\"/ui/entities/{enc}/edit\">Edit</a><a class=\"button secondary\" href=\"/ui/entities/{enc}/history\">History ({versions} versions)</a><a class=\"button secondary\" href=\"/ui/retrieval?query={}\">Test retrieval with its title</a>",
        url_encode(&e.title)
    );
    if e.is_active {
        let _ = write!(
            body,
            "<form method=\"post\" action=\"/ui/entities/{enc}/deactivate\" data-confirm=\"Deactivate this entity? It stays in the history.\">{}<input type=\"hidden\" name=\"version\" value=\"{}\"><button class=\"danger\" type=\"submit\"{}>Deactivate</button></form>",
            ctx.csrf_field(),
            stored.version,
            ctx.disabled()
        );
    }
    body.push_str("</div>");
    let _ = write!(
        body,
        "<div class=\"cols\"><section class=\"card\"><h2>Content</h2><dl class=\"fields\">"
    );
    for (name, value) in fields(e) {
        if value.is_null() {
            continue;
        }
        let text = show(&value);
        let _ = write!(
            body,
            "<dt>{}</dt><dd>{}</dd>",
            esc(&name),
            if text.contains('\n') || text.len() > 80 {
                format!("<pre>{}</pre>", esc(&text))
            } else {
                esc(&text)
            }
        );
    }
    let _ = write!(
        body,
        "</dl></section><section class=\"card\"><h2>Row</h2><dl class=\"fields\"><dt>version</dt><dd>{}</dd><dt>row id</dt><dd><code>{}</code></dd><dt>previous version</dt><dd><code>{}</code></dd><dt>created by</dt><dd>{}</dd><dt>created at</dt><dd>{}</dd><dt>updated at</dt><dd>{}</dd><dt>retrievals</dt><dd>{}</dd><dt>embedding</dt><dd>{}</dd></dl></section></div>",
        stored.version,
        esc(&stored.id),
        esc(stored.previous_version_id.as_deref().unwrap_or("—")),
        esc(&stored.created_by),
        stored.created_at.to_rfc3339(),
        stored.updated_at.to_rfc3339(),
        stored.retrieval_count,
        esc(stored.embedding_model.as_deref().unwrap_or("none"))
    );
    let (has_banks, cases, newest) = named;
    body.push_str(&super::cases::section(
        &ctx.state,
        has_banks,
        &cases,
        newest.as_ref(),
    ));
    Ok(ctx.page(&e.title, "entities", &body))
}

/// The field-by-field differences between two versions: `(field, old, new)` for every field
/// whose value differs, in schema order.
pub fn diff_fields(old: &Entity, new: &Entity) -> Vec<(String, Value, Value)> {
    let old: HashMap<String, Value> = fields(old).into_iter().collect();
    fields(new)
        .into_iter()
        .filter_map(|(name, value)| {
            let before = old.get(&name).cloned().unwrap_or(Value::Null);
            (before != value).then_some((name, before, value))
        })
        .collect()
}

fn version_of<'a>(
    versions: &'a [EntityVersion],
    q: &HashMap<String, String>,
    key: &str,
    default: Option<&'a EntityVersion>,
) -> Result<Option<&'a EntityVersion>, UiError> {
    match q.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(v) => {
            let n: u32 = v.parse().map_err(|_| {
                UiError::bad_request(format!("{key}: `{v}` is not a version number"))
            })?;
            versions
                .iter()
                .find(|x| x.version == n)
                .map(Some)
                .ok_or_else(|| UiError::not_found(format!("{key}: there is no version {n}")))
        }
    }
}

/// A `<select>` of the version numbers, `chosen` selected.
fn version_select(name: &str, versions: &[EntityVersion], chosen: u32) -> String {
    let mut out = format!("<select name=\"{name}\">");
    for v in versions {
        let _ = write!(
            out,
            "<option{}>{}</option>",
            selected(v.version == chosen),
            v.version
        );
    }
    out.push_str("</select>");
    out
}

async fn history(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let lookup = id.clone();
    let versions = blocking(&ctx.state, move |project| {
        let store = open_store(project)?;
        if !store.contains(&lookup)? {
            return Err(UiError::not_found(format!("no entity `{lookup}`")));
        }
        Ok(store.history(&lookup)?)
    })
    .await?;
    let newest = versions.last();
    let to = version_of(&versions, &q, "to", newest)?;
    let default_from = to.and_then(|t| versions.iter().rev().find(|v| v.version < t.version));
    let from = version_of(&versions, &q, "from", default_from)?;
    let enc = url_encode(&id);
    let title = newest.map_or(id.as_str(), |v| v.entity.title.as_str());
    let mut body = format!(
        "<p class=\"muted\"><a href=\"/ui/entities\">Entities</a> / {} /</p><h1>History of {}</h1>",
        entity_link(&id),
        esc(title)
    );
    body.push_str("<div class=\"table-wrap\"><table class=\"grid\"><thead><tr><th class=\"num\">Version</th><th>When</th><th>By</th><th>Changed fields</th><th>Status</th><th>Compare</th></tr></thead><tbody>");
    for v in versions.iter().rev() {
        let prev = versions.iter().rev().find(|p| p.version < v.version);
        let compare = prev.map_or_else(String::new, |p| {
            format!(
                "<a href=\"/ui/entities/{enc}/history?from={}&amp;to={}#diff\">v{} → v{}</a>",
                p.version, v.version, p.version, v.version
            )
        });
        let _ = write!(
            body,
            "<tr><td class=\"num\">{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{compare}</td></tr>",
            v.version,
            if v.is_current { " (current)" } else { "" },
            v.created_at.to_rfc3339(),
            esc(&v.created_by),
            esc(&v.changed_fields.join(", ")),
            active_tag(v.entity.is_active)
        );
    }
    body.push_str("</tbody></table></div>");
    match (from, to) {
        (Some(a), Some(b)) => {
            let _ = write!(
                body,
                "<h2 id=\"diff\">Version {} → version {}</h2><form class=\"filters\" method=\"get\"><label>From {}</label><label>To {}",
                a.version,
                b.version,
                version_select("from", &versions, a.version),
                version_select("to", &versions, b.version)
            );
            body.push_str("</label><button type=\"submit\">Compare</button></form>");
            let diff = diff_fields(&a.entity, &b.entity);
            if diff.is_empty() {
                body.push_str("<p class=\"muted\">No field differs.</p>");
            } else {
                let _ = write!(
                    body,
                    "<table class=\"grid diff\"><thead><tr><th>Field</th><th>Version {}</th><th>Version {}</th></tr></thead><tbody>",
                    a.version, b.version
                );
                for (name, old, new) in diff {
                    let _ = write!(
                        body,
                        "<tr class=\"changed\"><th scope=\"row\">{}</th><td class=\"old\"><pre>{}</pre></td><td class=\"new\"><pre>{}</pre></td></tr>",
                        esc(&name),
                        esc(&show(&old)),
                        esc(&show(&new))
                    );
                }
                body.push_str("</tbody></table>");
            }
        }
        _ => body.push_str("<p class=\"muted\">Only one version so far: nothing to compare.</p>"),
    }
    Ok(ctx.page(&format!("History of {title}"), "entities", &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn list_filters_parse_and_reject_bad_values() {
        let l = ListQuery::parse(&q(&[
            ("entity_type", "handler"),
            ("load_mode", "STATE"),
            ("active", "all"),
            ("page", "2"),
        ]))
        .unwrap();
        assert_eq!(l.entity_type, Some(EntityType::Handler));
        assert_eq!(l.load_mode, Some(LoadMode::State));
        assert_eq!(l.active, None);
        assert_eq!(l.page, 2);
        for (k, v) in [
            ("entity_type", "X"),
            ("page", "0"),
            ("page_size", "101"),
            ("active", "maybe"),
            ("nope", "1"),
        ] {
            let err = ListQuery::parse(&q(&[(k, v)])).unwrap_err();
            assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST, "{k}");
            assert!(err.message.contains(k), "{}", err.message);
        }
    }
}
