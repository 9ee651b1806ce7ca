//! Bulk operations: import `kb/` files (uploaded, parsed and validated exactly as the
//! project's own files, UTF-8 byte-order mark included), export every entity, and re-embed
//! with progress.

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use axum::Router;
use axum::extract::{Multipart, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use assay_kb::EntityFilter;
use assay_kbtools::kbedit::{self, KbEditor, Reembed};
use assay_project::engine;
use assay_project::results::{write_new, write_replace};

use super::{Ctx, Html, UiError, blocking, blocking_write, check_write, esc, no_kb, open_store};
use crate::AppState;

/// The largest upload accepted (all files together).
pub const MAX_UPLOAD_BYTES: usize = 8 * 1024 * 1024;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/bulk", get(page))
        .route("/bulk/export", get(export))
        .route("/bulk/import", post(import))
        .route("/bulk/reembed", post(reembed))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_UPLOAD_BYTES))
}

/// The re-embedding job's progress, shared between the worker and the page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Entities to embed.
    pub total: usize,
    /// Entities embedded so far.
    pub done: usize,
    /// Still running.
    pub running: bool,
    /// How it ended: a summary, or the error.
    pub outcome: Option<Result<String, String>>,
}

/// The one re-embedding job of the process.
#[derive(Debug, Default)]
pub struct Jobs {
    reembed: Mutex<Progress>,
}

impl Jobs {
    fn get(&self) -> Progress {
        self.reembed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn update(&self, f: impl FnOnce(&mut Progress)) {
        f(&mut self.reembed.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Html {
    let ctx = Ctx::new(state, &headers);
    let p = ctx.state.ui.jobs.get();
    let mut body = String::new();
    if p.running {
        body.push_str("<meta http-equiv=\"refresh\" content=\"1\">");
    }
    body.push_str("<h1>Bulk operations</h1>");
    if !crate::project::has_kb_dir(ctx.state.project_dir()) {
        body.push_str(&no_kb(&ctx.state));
    }
    if let Some(n) = q.get("imported").and_then(|n| n.parse::<usize>().ok()) {
        let _ = write!(
            body,
            "<p class=\"notice ok\" role=\"status\">Imported {n} file(s): the store now matches the kb/ files.</p>"
        );
    }
    body.push_str(ctx.write_notice());
    let _ = write!(
        body,
        "<div class=\"cols\"><section class=\"card\" id=\"import\"><h2>Import</h2><p>Upload entity files (<code>.yaml</code>, <code>.yml</code> or <code>.json</code>, a list of entities each, as in <code>kb/</code>). They are parsed and validated together with the project's other files exactly as <code>assay</code> reads them (a UTF-8 byte-order mark is fine); a bad file is reported with its line and field and nothing is written. A file with the name of an existing one replaces it.</p><form method=\"post\" action=\"/ui/bulk/import\" enctype=\"multipart/form-data\" class=\"stack\">{}<label>Files <input type=\"file\" name=\"files\" accept=\".yaml,.yml,.json\" multiple required></label><div class=\"actions\"><button type=\"submit\"{}>Import</button></div></form></section>",
        ctx.csrf_field(),
        ctx.disabled()
    );
    body.push_str("<section class=\"card\" id=\"export\"><h2>Export</h2><p>Every entity's current version (active or not), as a <code>kb/</code> file would hold it.</p><div class=\"actions\"><a class=\"button\" href=\"/ui/bulk/export?format=yaml\" download>Download YAML</a><a class=\"button secondary\" href=\"/ui/bulk/export?format=json\" download>Download JSON</a></div></section>");
    let _ = write!(
        body,
        "<section class=\"card\" id=\"reembed\"><h2>Re-embed</h2><p>Embeds the active entities with the project's embedder: only those whose embedding is missing or stale, or all of them.</p><form method=\"post\" action=\"/ui/bulk/reembed\" class=\"actions\">{}<button type=\"submit\" name=\"which\" value=\"stale\"{}>Re-embed stale</button><button type=\"submit\" name=\"which\" value=\"all\" class=\"secondary\"{}>Re-embed all</button></form>",
        ctx.csrf_field(),
        ctx.disabled(),
        ctx.disabled()
    );
    if p.running || p.outcome.is_some() {
        let _ = write!(
            body,
            "<div id=\"progress\" role=\"status\"><progress max=\"{}\" value=\"{}\"></progress> {} of {} embedded",
            p.total.max(1),
            p.done,
            p.done,
            p.total
        );
        match &p.outcome {
            None => body.push_str(" … (this page refreshes)</div>"),
            Some(Ok(summary)) => {
                let _ = write!(
                    body,
                    "<p class=\"notice ok\">Done: {}</p></div>",
                    esc(summary)
                );
            }
            Some(Err(e)) => {
                let _ = write!(body, "<p class=\"notice bad\">Failed: {}</p></div>", esc(e));
            }
        }
    }
    body.push_str("</section></div>");
    ctx.page("Bulk operations", "bulk", &body)
}

async fn export(
    State(state): State<AppState>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Result<Response, UiError> {
    let format = q.get("format").map_or("yaml", String::as_str).to_owned();
    if format != "yaml" && format != "json" {
        return Err(UiError::bad_request(format!(
            "format: `{format}` is not yaml or json"
        )));
    }
    let yaml = format == "yaml";
    let text = blocking(&state, move |project| {
        let store = open_store(project)?;
        let value = serde_json::to_value(store.export()?)
            .map_err(|e| UiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        Ok(if yaml {
            kbedit::to_yaml(&value)?
        } else {
            kbedit::pretty_json(&value)
        })
    })
    .await?;
    let (mime, name) = if yaml {
        (
            "application/yaml; charset=utf-8",
            "attachment; filename=\"kb-export.yaml\"",
        )
    } else {
        (
            "application/json",
            "attachment; filename=\"kb-export.json\"",
        )
    };
    let mut r = text.into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    r.headers_mut()
        .insert(header::CONTENT_DISPOSITION, HeaderValue::from_static(name));
    Ok(r)
}

/// Whether `name` is a plain entity file name: no folder, not hidden, a `kb/` extension.
fn upload_name(name: &str) -> Result<String, UiError> {
    let ok_ext = [".yaml", ".yml", ".json"]
        .iter()
        .any(|e| name.to_ascii_lowercase().ends_with(e));
    let plain = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok_ext && plain {
        Ok(name.to_owned())
    } else {
        Err(UiError::bad_request(format!(
            "`{name}`: upload entity files named like `handlers.yaml` (at most 200 letters, digits, `-`, `_`, `.`; ending in .yaml, .yml or .json)"
        )))
    }
}

/// Validates `uploads` together with the other files of `kb_dir` (in a scratch copy), then
/// writes them into `kb_dir`. Nothing is written when any file is bad.
fn import_files(kb_dir: &Path, uploads: &[(String, Vec<u8>)]) -> Result<Vec<PathBuf>, UiError> {
    let scratch = tempfile::tempdir().map_err(|e| {
        UiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot make a scratch folder: {e}"),
        )
    })?;
    let copy = scratch.path().join("kb");
    copy_tree(kb_dir, &copy).map_err(|e| {
        UiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot copy kb/: {e}"),
        )
    })?;
    for (name, bytes) in uploads {
        std::fs::write(copy.join(name), bytes)
            .map_err(|e| UiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    }
    if let Err(e) = assay_kb::load_dir(&copy) {
        // Errors name the scratch copy: show the name the user uploaded instead.
        let message = e
            .to_string()
            .replace(&format!("{}/", copy.display()), "kb/");
        return Err(UiError::new(StatusCode::UNPROCESSABLE_ENTITY, message));
    }
    let mut written = Vec::new();
    for (name, bytes) in uploads {
        let target = kb_dir.join(name);
        let result = if target.exists() {
            write_replace(&target, bytes)
        } else {
            write_new(&target, bytes)
        };
        result.map_err(|e| {
            UiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{}: cannot write: {e}", target.display()),
            )
        })?;
        written.push(target);
    }
    Ok(written)
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    if !from.exists() {
        return Ok(());
    }
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

async fn import(
    State(state): State<AppState>,
    headers: HeaderMap,
    mut multipart: Multipart,
) -> Result<Response, UiError> {
    let mut fields = std::collections::HashMap::new();
    let mut uploads: Vec<(String, Vec<u8>)> = Vec::new();
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| UiError::bad_request(format!("cannot read the upload: {e}")))?
    {
        let name = field.name().unwrap_or_default().to_owned();
        match field.file_name().map(str::to_owned) {
            Some(file) if name == "files" => {
                let bytes = field
                    .bytes()
                    .await
                    .map_err(|e| UiError::bad_request(format!("cannot read `{file}`: {e}")))?;
                if file.is_empty() && bytes.is_empty() {
                    continue;
                }
                uploads.push((upload_name(&file)?, bytes.to_vec()));
            }
            _ => {
                let text = field
                    .text()
                    .await
                    .map_err(|e| UiError::bad_request(format!("cannot read `{name}`: {e}")))?;
                fields.insert(name, text);
            }
        }
    }
    check_write(&state, &headers, &fields)?;
    if uploads.is_empty() {
        return Err(UiError::bad_request("choose at least one file to import"));
    }
    let n = uploads.len();
    blocking_write(&state, move |session| {
        import_files(&session.project.settings.kb_dir, &uploads)?;
        // The files are the source of truth: load them as a run would and import, still
        // holding the session's lock.
        let reloaded = assay_project::project::Project::load(&session.project.settings.root)?;
        engine::sync_kb_held(&session.store, &reloaded, session.lock())?;
        Ok(())
    })
    .await?;
    Ok(Redirect::to(&format!("/ui/bulk?imported={n}")).into_response())
}

async fn reembed(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<std::collections::HashMap<String, String>>,
) -> Result<Response, UiError> {
    check_write(&state, &headers, &form)?;
    let all = match form.get("which").map(String::as_str) {
        Some("all") => true,
        Some("stale") | None => false,
        Some(other) => {
            return Err(UiError::bad_request(format!(
                "which: `{other}` is not stale or all"
            )));
        }
    };
    let guard = state.begin(if all {
        "re-embedding all"
    } else {
        "re-embedding stale"
    })?;
    let jobs = std::sync::Arc::clone(&state.ui);
    jobs.jobs.update(|p| {
        *p = Progress {
            running: true,
            ..Progress::default()
        }
    });
    let env = state.env();
    let dir = state.project_dir().to_owned();
    let kb_lock = state.kb_lock();
    std::thread::spawn(move || {
        let _guard = guard;
        let _kb = kb_lock.lock().unwrap_or_else(PoisonError::into_inner);
        let outcome = reembed_all(&dir, all, &env, &jobs.jobs);
        jobs.jobs.update(|p| {
            p.running = false;
            p.outcome = Some(outcome);
        });
    });
    Ok(Redirect::to("/ui/bulk#progress").into_response())
}

/// Embeds entity by entity (so the page can show progress), then the views when the project
/// ranks by views.
fn reembed_all(
    dir: &Path,
    all: bool,
    env: &crate::EnvLookup,
    jobs: &Jobs,
) -> Result<String, String> {
    let project = assay_project::project::Project::load(dir).map_err(|e| e.to_string())?;
    let store = open_store(&project).map_err(|e| e.message)?;
    let lookup = |name: &str| env(name);
    let choice =
        engine::choose_embedder(&project.settings, None, &lookup).map_err(|e| e.to_string())?;
    let embedder = engine::build_embedder(&choice).map_err(|e| e.to_string())?;
    let filter = EntityFilter {
        active: Some(true),
        ..EntityFilter::default()
    };
    let todo: Vec<String> = store
        .embedding_status(&filter, embedder.model())
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|(_, status)| all || !status.is_fresh())
        .map(|(id, _)| id)
        .collect();
    jobs.update(|p| p.total = todo.len());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let editor = KbEditor::new(&*store, None);
    for id in &todo {
        rt.block_on(editor.regenerate_embeddings(embedder.as_ref(), Reembed::One(id), false))
            .map_err(|e| e.to_string())?;
        jobs.update(|p| p.done += 1);
    }
    let multi = engine::multi_view(&project.settings);
    let views = if multi {
        let r = rt
            .block_on(editor.regenerate_embeddings(
                embedder.as_ref(),
                if all { Reembed::All } else { Reembed::Stale },
                true,
            ))
            .map_err(|e| e.to_string())?;
        r.views.map_or(0, |v| v.embedded.len())
    } else {
        0
    };
    Ok(format!(
        "{} entities embedded with {}{}",
        todo.len(),
        embedder.model(),
        if multi {
            format!(", {views} entities' views")
        } else {
            String::new()
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_names_are_plain_entity_files() {
        assert!(upload_name("handlers.yaml").is_ok());
        assert!(upload_name("a-b_c.json").is_ok());
        for bad in [
            "../x.yaml",
            ".hidden.yaml",
            "x.txt",
            "a/b.yaml",
            "",
            "x y.yaml",
        ] {
            assert!(upload_name(bad).is_err(), "{bad}");
        }
    }
}
