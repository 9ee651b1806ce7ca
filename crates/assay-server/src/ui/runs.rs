//! The runs dashboard: the saved runs, one run (the HTML report's own body), and two runs
//! compared case by case.

use std::fmt::Write;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;

use assay_core::rundiff::CaseChange;
use assay_harness::runs::{self, RunsError};

use super::{Ctx, Html, UiError, blocking, esc};
use crate::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/runs", get(list))
        .route("/runs/compare", get(compare))
        .route("/runs/{id}", get(detail))
        .route("/runs/{a}/diff/{b}", get(diff))
}

impl From<RunsError> for UiError {
    fn from(e: RunsError) -> UiError {
        let status = match e {
            RunsError::BadId(_) => StatusCode::BAD_REQUEST,
            RunsError::NotFound { .. } => StatusCode::NOT_FOUND,
            RunsError::Unreadable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        };
        UiError::new(status, e.to_string())
    }
}

fn health_tag(health: assay_core::runlog::Health) -> String {
    format!("<span class=\"tag h-{health}\">{health}</span>")
}

async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let entries = blocking(&ctx.state, |project| {
        Ok(runs::list_runs(&project.settings.results_dir)?)
    })
    .await?;
    let mut body = String::from(
        "<h1>Runs</h1><p class=\"muted\">The runs saved in the project's results folder (<code>assay run</code> saves one each time), newest first. Pick two to compare them case by case.</p>",
    );
    if entries.is_empty() {
        body.push_str(
            "<p class=\"notice\">No saved runs yet: run <code>assay run</code> on the project.</p>",
        );
        return Ok(ctx.page("Runs", "runs", &body));
    }
    let newest = &entries[0].id;
    let older = entries.get(1).map_or(newest, |e| &e.id);
    let a = q.get("a").unwrap_or(older);
    let b = q.get("b").unwrap_or(newest);
    body.push_str("<form method=\"get\" action=\"/ui/runs/compare\" class=\"filters\" id=\"compare\"><label>Baseline <select name=\"a\">");
    for e in &entries {
        let _ = write!(
            body,
            "<option value=\"{}\"{}>{}</option>",
            esc(&e.id),
            if &e.id == a { " selected" } else { "" },
            esc(&e.id)
        );
    }
    body.push_str("</select></label><label>Compared run <select name=\"b\">");
    for e in &entries {
        let _ = write!(
            body,
            "<option value=\"{}\"{}>{}</option>",
            esc(&e.id),
            if &e.id == b { " selected" } else { "" },
            esc(&e.id)
        );
    }
    body.push_str("</select></label><button type=\"submit\">Compare</button></form>");
    body.push_str("<div class=\"table-wrap\"><table class=\"grid\" id=\"runs\"><thead><tr><th>Run</th><th>Started</th><th class=\"num\">Score</th><th>Health</th><th class=\"num\">Tests</th><th class=\"num\">Hard fails</th><th class=\"num\">Critical</th><th class=\"num\">Errors</th><th>Banks</th><th class=\"num\">Duration</th><th>Compare</th></tr></thead><tbody>");
    for (i, e) in entries.iter().enumerate() {
        let prev = entries.get(i + 1).map_or_else(String::new, |p| {
            format!(
                "<a href=\"/ui/runs/{}/diff/{}\">vs previous</a>",
                esc(&p.id),
                esc(&e.id)
            )
        });
        let _ = write!(
            body,
            "<tr><td><a href=\"/ui/runs/{}\">{}</a></td><td>{}</td><td class=\"num\">{:.1}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{:.1} s</td><td>{prev}</td></tr>",
            esc(&e.id),
            esc(&e.id),
            esc(&e.timestamp),
            e.combined_score,
            health_tag(e.health_status),
            e.total_tests,
            e.hard_fails,
            e.critical_failures,
            e.error_count,
            esc(&e.banks.join(", ")),
            e.duration_ms as f64 / 1000.0
        );
    }
    body.push_str("</tbody></table></div>");
    Ok(ctx.page("Runs", "runs", &body))
}

async fn compare(
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Result<axum::response::Redirect, UiError> {
    let (Some(a), Some(b)) = (q.get("a"), q.get("b")) else {
        return Err(UiError::bad_request("choose two runs (a and b) to compare"));
    };
    runs::check_run_id(a)?;
    runs::check_run_id(b)?;
    Ok(axum::response::Redirect::to(&format!(
        "/ui/runs/{a}/diff/{b}"
    )))
}

async fn detail(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let lookup = id.clone();
    let log = blocking(&ctx.state, move |project| {
        Ok(runs::load_run(&project.settings.results_dir, &lookup)?)
    })
    .await?;
    let body = format!(
        "<p class=\"muted\"><a href=\"/ui/runs\">Runs</a> / {} · <a href=\"/runs/{}/cases\">every case (JSON Lines)</a></p><style>{}</style>{}",
        esc(&id),
        esc(&id),
        assay_report::html::STYLE,
        assay_report::html::body(&log)
    );
    Ok(ctx.page(&format!("Run {id}"), "runs", &body))
}

fn score(s: Option<u32>, error: Option<&String>) -> String {
    match (s, error) {
        (Some(s), _) => s.to_string(),
        (None, Some(e)) => format!("<span title=\"{}\">error</span>", esc(e)),
        (None, None) => "—".to_owned(),
    }
}

fn change_rows(body: &mut String, title: &str, id: &str, rows: &[CaseChange], class: &str) {
    let _ = write!(body, "<h2 id=\"{id}\">{title} ({})</h2>", rows.len());
    if rows.is_empty() {
        body.push_str("<p class=\"muted\">None.</p>");
        return;
    }
    body.push_str("<div class=\"table-wrap\"><table class=\"grid\"><thead><tr><th>Bank</th><th>Case</th><th class=\"num\">Before</th><th class=\"num\">After</th><th class=\"num\">Change</th><th>Hard fail</th></tr></thead><tbody>");
    for c in rows {
        let delta = c.delta.map_or_else(String::new, |d| {
            format!("<span class=\"{class}\">{d:+}</span>")
        });
        let hard = match (c.was_hard_fail, c.is_hard_fail) {
            (false, true) => "new hard fail",
            (true, false) => "fixed",
            (true, true) => "still",
            (false, false) => "",
        };
        let _ = write!(
            body,
            "<tr><td>{}</td><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{delta}</td><td>{hard}</td></tr>",
            esc(&c.bank),
            esc(&c.test_id),
            score(c.before, c.before_error.as_ref()),
            score(c.after, c.after_error.as_ref())
        );
    }
    body.push_str("</tbody></table></div>");
}

async fn diff(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((a, b)): Path<(String, String)>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let (before, after) = (a.clone(), b.clone());
    let d = blocking(&ctx.state, move |project| {
        Ok(runs::diff(&project.settings.results_dir, &before, &after)?)
    })
    .await?;
    let delta_class = if d.score_delta > 0.0 {
        "better"
    } else if d.score_delta < 0.0 {
        "worse"
    } else {
        ""
    };
    let mut body = format!(
        "<p class=\"muted\"><a href=\"/ui/runs\">Runs</a> / compare</p><h1>Run <a href=\"/ui/runs/{}\">{}</a> → <a href=\"/ui/runs/{}\">{}</a></h1>",
        esc(&a),
        esc(&a),
        esc(&b),
        esc(&b)
    );
    let _ = write!(
        body,
        "<table class=\"grid\" id=\"headline\"><thead><tr><th></th><th>Started</th><th class=\"num\">Score</th><th>Health</th><th class=\"num\">Tests</th><th class=\"num\">Hard fails</th><th class=\"num\">Errors</th></tr></thead><tbody>"
    );
    for (label, h) in [("before", &d.before), ("after", &d.after)] {
        let _ = write!(
            body,
            "<tr><th scope=\"row\">{label}</th><td>{}</td><td class=\"num\">{:.1}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&h.timestamp),
            h.combined_score,
            health_tag(h.health_status),
            h.total_tests,
            h.hard_fails,
            h.error_count
        );
    }
    let _ = write!(
        body,
        "</tbody></table><p>Weighted score <span class=\"{delta_class}\">{:+.1}</span>. ",
        d.score_delta
    );
    let counts: Vec<String> = d
        .counts
        .iter()
        .map(|(k, n)| format!("<a href=\"#{k}\">{n} {k}</a>"))
        .collect();
    body.push_str(&counts.join(", "));
    body.push_str(".</p>");
    // What the CLI's `assay runs diff` and a report's "Compared with" say, in the same words.
    body.push_str(&assay_report::rundiff::html_overview(&d));
    change_rows(&mut body, "Worse", "worse", &d.cases.worse, "worse");
    change_rows(&mut body, "Better", "better", &d.cases.better, "better");
    change_rows(
        &mut body,
        "Not comparable (errors)",
        "errored",
        &d.cases.errored,
        "",
    );
    change_rows(&mut body, "Added", "added", &d.cases.added, "");
    change_rows(&mut body, "Removed", "removed", &d.cases.removed, "");
    let _ = write!(
        body,
        "<details><summary>Unchanged ({})</summary>",
        d.cases.unchanged.len()
    );
    change_rows(&mut body, "Unchanged", "unchanged", &d.cases.unchanged, "");
    body.push_str("</details>");
    Ok(ctx.page(&format!("Runs {a} → {b}"), "runs", &body))
}
