//! The runs dashboard: the saved runs (their scores over time as a chart, then a table), one
//! run (the HTML report's own body, every case id linked to the case's page), and two runs
//! compared case by case.

use std::fmt::Write;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;

use assay_core::rundiff::CaseChange;
use assay_project::settings::ProjectSettings;
use assay_report::trend::{RunKind, TrendMarks, TrendPoint};
use assay_run::runs::{self, RunEntry, RunsError};

use super::links::{RunCaseLinks, case_href, id_cell};
use super::{Ctx, Html, UiError, blocking_dir, dir_arg, empty_state, esc, path_segment};
use crate::AppState;

/// The most runs the chart shows: the newest ones.
const CHART_RUNS: usize = 200;

/// Runs `work` on a blocking thread with the project's results folder (`[paths] results`).
pub(super) async fn with_results<T, F>(state: &AppState, work: F) -> Result<T, UiError>
where
    T: Send + 'static,
    F: FnOnce(&std::path::Path, &ProjectSettings) -> Result<T, UiError> + Send + 'static,
{
    blocking_dir(state, move |dir| {
        let settings = ProjectSettings::load(dir).map_err(assay_project::HarnessError::from)?;
        work(&settings.results_dir, &settings)
    })
    .await
}

/// The chart of the runs over time: the newest [`CHART_RUNS`] of `entries` (given newest
/// first), drawn oldest first.
fn trend(entries: &[RunEntry], accepted: Option<&str>) -> String {
    let points: Vec<TrendPoint> = entries
        .iter()
        .take(CHART_RUNS)
        .rev()
        .map(|e| TrendPoint {
            id: e.id.clone(),
            timestamp: e.timestamp.clone(),
            combined: e.combined_score,
            banks: e.bank_scores.clone(),
            href: Some(format!("/ui/runs/{}", path_segment(&e.id))),
            kind: match (e.apart(), e.merged) {
                (Some(why), _) => RunKind::Apart { why },
                (None, Some(shards)) => RunKind::Merged { shards },
                (None, None) => RunKind::Full,
            },
        })
        .collect();
    // The accepted baseline (`assay runs accept`), a dashed line labelled "accepted".
    let marks = TrendMarks {
        accepted: accepted.map(str::to_owned),
    };
    let shown = if entries.len() > CHART_RUNS {
        format!("the newest {CHART_RUNS} of {} runs", entries.len())
    } else if entries.len() == 1 {
        "the one run".to_owned()
    } else {
        format!("{} runs", entries.len())
    };
    format!(
        "<figure class=\"trend\">{}<figcaption>The weighted score (thick line) and each bank's score over time, {shown}, oldest on the left; a point's tooltip has the run and its scores, and a click opens the run. The lines join runs of the whole suite; a shard, a partial run or a run with drafts is a hollow point off them, its score not comparable.</figcaption></figure>",
        assay_report::trend::svg(&points, &marks)
    )
}

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/runs", get(list))
        .route("/runs/compare", get(compare))
        .route("/runs/{id}", get(detail))
        .route("/runs/{id}/accept", axum::routing::post(accept))
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
    let (entries, has_banks, accepted) = with_results(&ctx.state, |results, settings| {
        Ok((
            runs::list_runs(results)?,
            settings.banks_dir.is_dir(),
            assay_run::accepted::current(&settings.root)?,
        ))
    })
    .await?;
    let mut body = String::from(
        "<h1>Runs</h1><p class=\"muted\">The runs saved in the project's results folder (<code>assay run</code> saves one each time): their scores over time, then each run, newest first. Pick two to compare them case by case.</p>",
    );
    if entries.is_empty() {
        let dir = dir_arg(&ctx.state);
        let needs = if has_banks {
            String::new()
        } else {
            format!(
                " It needs test banks, which this project does not have yet: <code>assay init {dir}</code> makes a project with them (it never overwrites a file)."
            )
        };
        body.push_str(&empty_state(
            "empty-runs",
            &format!("No runs yet: <code>assay run {dir}</code> writes one.{needs}"),
        ));
        return Ok(ctx.page("Runs", "runs", &body));
    }
    match &accepted {
        Some(a) => {
            let _ = write!(
                body,
                "<p id=\"accepted-baseline\">The accepted baseline is run <a class=\"nowrap\" href=\"/ui/runs/{}\">{}</a> (score {:.1}), accepted by {} on {}{}. <code>assay run --baseline accepted</code> compares with it.</p>",
                esc(&path_segment(&a.id)),
                esc(&a.id),
                a.combined_score,
                esc(&a.accepted_by),
                esc(&a.accepted_at),
                a.note
                    .as_deref()
                    .map(|n| format!(": “{}”", esc(n)))
                    .unwrap_or_default()
            );
        }
        None => body.push_str(
            "<p id=\"accepted-baseline\" class=\"muted\">No run is accepted as the baseline yet: accept one from its page, or with <code>assay runs accept latest</code>.</p>",
        ),
    }
    let accepted_id = accepted.as_ref().map(|a| a.id.as_str());
    body.push_str(&trend(&entries, accepted_id));
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
    body.push_str("<div class=\"table-wrap\"><table class=\"grid\" id=\"runs\"><thead><tr><th>Run</th><th class=\"when\">Started</th><th class=\"num\">Score</th><th>Health</th><th class=\"num\">Tests</th><th class=\"num\">Hard fails</th><th class=\"num\">Critical</th><th class=\"num\">Errors</th><th>Banks</th><th class=\"num\">Duration</th><th>Compare</th></tr></thead><tbody>");
    for (i, e) in entries.iter().enumerate() {
        let prev = entries.get(i + 1).map_or_else(String::new, |p| {
            format!(
                "<a class=\"nowrap\" href=\"/ui/runs/{}/diff/{}\">vs previous</a>",
                esc(&path_segment(&p.id)),
                esc(&path_segment(&e.id))
            )
        });
        let banks: Vec<String> = e
            .banks
            .iter()
            .map(|b| match e.bank_scores.get(b) {
                Some(v) => format!("{} {v:.1}", esc(b)),
                None => esc(b),
            })
            .collect();
        let mut mark = if accepted_id == Some(e.id.as_str()) {
            " <span class=\"tag accepted\" title=\"the accepted baseline\">accepted</span>"
                .to_owned()
        } else {
            String::new()
        };
        mark.push_str(&kind_tags(e));
        // The duration is the run's own measure (RunLog `duration_ms`: wall clock from its
        // start to its end), never a sum of case latencies or a file time.
        let _ = write!(
            body,
            "<tr><td class=\"id\" title=\"{}\"><a href=\"/ui/runs/{}\">{}</a>{mark}</td><td class=\"when\">{}</td><td class=\"num\">{:.1}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num nowrap\">{}</td><td>{prev}</td></tr>",
            esc(&e.id),
            esc(&path_segment(&e.id)),
            esc(&e.id),
            esc(&e.timestamp),
            e.combined_score,
            health_tag(e.health_status),
            e.total_tests,
            e.hard_fails,
            e.critical_failures,
            e.error_count,
            banks.join(", "),
            duration(e.duration_ms)
        );
    }
    body.push_str("</tbody></table></div>");
    Ok(ctx.page("Runs", "runs", &body))
}

/// The tags that set a run apart from a run of the whole suite (a shard, partial, drafts) or
/// say how it was made (merged), each with its reason as its title.
fn kind_tags(e: &RunEntry) -> String {
    let mut tags = String::new();
    if let Some(shard) = &e.shard {
        let _ = write!(
            tags,
            " <span class=\"tag shard\" title=\"shard {} of the suite: part of a run\">shard {}</span>",
            esc(shard),
            esc(shard)
        );
    }
    if !e.partial.is_empty() {
        let _ = write!(
            tags,
            " <span class=\"tag partial\" title=\"a partial run: {}\">partial</span>",
            esc(&e.partial.join(", "))
        );
    }
    if let Some(n) = e.drafts {
        let _ = write!(
            tags,
            " <span class=\"tag drafts\" title=\"{n} pending draft(s) ran as cases (--include-drafts)\">drafts</span>"
        );
    }
    if let Some(n) = e.merged {
        let _ = write!(
            tags,
            " <span class=\"tag merged\" title=\"the whole suite, merged from {n} shards\">merged</span>"
        );
    }
    tags
}

/// A run's duration for people: `850 ms`, `12.4 s`, `3 min 05 s`, `1 h 02 min`.
fn duration(ms: u64) -> String {
    let s = ms / 1000;
    if ms < 1000 {
        format!("{ms} ms")
    } else if s < 60 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if s < 3600 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{} h {:02} min", s / 3600, (s % 3600) / 60)
    }
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
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let lookup = id.clone();
    let (log, accepted) = with_results(&ctx.state, move |results, settings| {
        Ok((
            runs::load_run(results, &lookup)?,
            assay_run::accepted::current(&settings.root)?,
        ))
    })
    .await?;
    let done = if q.get("done").map(String::as_str) == Some("accepted") {
        "<p class=\"notice ok\" role=\"status\">Accepted as the baseline.</p>"
    } else {
        ""
    };
    let apart = runs::apart_of(&log);
    let baseline = match &accepted {
        Some(a) if a.id == id => format!(
            "<p id=\"accept\"><span class=\"tag accepted\">accepted baseline</span> by {} on {}</p>",
            esc(&a.accepted_by),
            esc(&a.accepted_at)
        ),
        // Only a run of the whole suite can be the baseline (`assay runs accept` refuses
        // others): the form is not offered, and the page says why.
        _ if apart.is_some() => format!(
            "<p id=\"accept\" class=\"muted\">Not a run of the whole suite ({}): it cannot be accepted as the baseline.</p>",
            esc(apart.as_deref().unwrap_or_default())
        ),
        _ if log.is_complete() => format!(
            "<form id=\"accept\" class=\"inline\" method=\"post\" action=\"/ui/runs/{}/accept\">{}{}<label>By <input name=\"by\" placeholder=\"your name\" required{}></label> <label>Note <input name=\"note\" placeholder=\"why this run is the baseline\"{}></label> <button type=\"submit\"{}>Accept as the baseline</button> <span class=\"hint\">later runs with <code>--baseline accepted</code> are compared with it</span></form>",
            esc(&path_segment(&id)),
            ctx.write_notice(),
            ctx.csrf_field(),
            ctx.disabled(),
            ctx.disabled(),
            ctx.disabled()
        ),
        _ => String::new(),
    };
    let body = format!(
        "<p class=\"muted\"><a href=\"/ui/runs\">Runs</a> / <span class=\"nowrap\">{}</span> · <a href=\"/runs/{}/cases\">every case (JSON Lines)</a></p>{done}{baseline}<style>{}</style>{}",
        esc(&id),
        esc(&path_segment(&id)),
        assay_report::html::STYLE,
        assay_report::html::body_with(&log, &RunCaseLinks { run: &id })
    );
    Ok(ctx.page(&format!("Run {id}"), "runs", &body))
}

/// Accepts a run as the baseline (admin only), recorded with the name the form gives.
async fn accept(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<std::collections::HashMap<String, String>>,
) -> Result<axum::response::Redirect, UiError> {
    super::check_write(&state, &headers, &form)?;
    runs::check_run_id(&id)?;
    let note = form.get("note").cloned();
    let by = form
        .get("by")
        .map(|b| b.trim().to_owned())
        .filter(|b| !b.is_empty())
        .ok_or_else(|| UiError::bad_request("say who accepts the run (By)"))?;
    let run = id.clone();
    with_results(&state, move |results, settings| {
        assay_run::accepted::accept(
            &settings.root,
            results,
            &run,
            &format!("{by} (web UI)"),
            note.as_deref(),
        )?;
        Ok(())
    })
    .await?;
    Ok(axum::response::Redirect::to(&format!(
        "/ui/runs/{}?done=accepted",
        path_segment(&id)
    )))
}

fn score(s: Option<u32>, error: Option<&String>) -> String {
    match (s, error) {
        (Some(s), _) => s.to_string(),
        (None, Some(e)) => format!("<span title=\"{}\">error</span>", esc(e)),
        (None, None) => "—".to_owned(),
    }
}

/// A comparison's rows; each case id links to its page in `run` (the run it is in: the
/// compared run, or the baseline for a removed case).
fn change_rows(
    body: &mut String,
    title: &str,
    id: &str,
    rows: &[CaseChange],
    class: &str,
    run: &str,
) {
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
            "<tr><td>{}</td>{}<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{delta}</td><td>{hard}</td></tr>",
            esc(&c.bank),
            id_cell(&c.test_id, Some(&case_href(run, &c.test_id))),
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
    let d = with_results(&ctx.state, move |results, _| {
        Ok(runs::diff(results, &before, &after)?)
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
        "<p class=\"muted\"><a href=\"/ui/runs\">Runs</a> / compare</p><h1>Run <a class=\"nowrap\" href=\"/ui/runs/{}\">{}</a> → <a class=\"nowrap\" href=\"/ui/runs/{}\">{}</a></h1>",
        esc(&path_segment(&a)),
        esc(&a),
        esc(&path_segment(&b)),
        esc(&b)
    );
    let _ = write!(
        body,
        "<table class=\"grid\" id=\"headline\"><thead><tr><th></th><th class=\"when\">Started</th><th class=\"num\">Score</th><th>Health</th><th class=\"num\">Tests</th><th class=\"num\">Hard fails</th><th class=\"num\">Errors</th></tr></thead><tbody>"
    );
    for (label, h) in [("before", &d.before), ("after", &d.after)] {
        let _ = write!(
            body,
            "<tr><th scope=\"row\">{label}</th><td class=\"when\">{}</td><td class=\"num\">{:.1}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
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
    body.push_str(&assay_report::rundiff::html_overview_with(
        &d,
        &RunCaseLinks { run: &b },
    ));
    change_rows(&mut body, "Worse", "worse", &d.cases.worse, "worse", &b);
    change_rows(&mut body, "Better", "better", &d.cases.better, "better", &b);
    change_rows(
        &mut body,
        "Not comparable (errors)",
        "errored",
        &d.cases.errored,
        "",
        &b,
    );
    change_rows(&mut body, "Added", "added", &d.cases.added, "", &b);
    change_rows(&mut body, "Removed", "removed", &d.cases.removed, "", &a);
    let _ = write!(
        body,
        "<details><summary>Unchanged ({})</summary>",
        d.cases.unchanged.len()
    );
    change_rows(
        &mut body,
        "Unchanged",
        "unchanged",
        &d.cases.unchanged,
        "",
        &b,
    );
    body.push_str("</details>");
    Ok(ctx.page(&format!("Runs {a} → {b}"), "runs", &body))
}
