//! The prompt optimizer's experiments: the list, an experiment (the same body as its
//! `report.html`), a trial, the progress fragment a running experiment's page polls, and the
//! promotion review with promote and roll back (through [`assay_experiment::promote::change`],
//! under the project lock, exactly as `assay prompts promote|rollback --yes`).

use std::collections::HashMap;
use std::fmt::Write;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use assay_core::experiment::ExperimentState;
use assay_experiment::ExperimentError;
use assay_experiment::promote::{self, Action};
use assay_experiment::view::{self, ExperimentView};
use assay_project::lock::{self, LockError, LockState};
use assay_report::experiment::{self as render, Links, Sort};

use super::{Ctx, Html, UiError, blocking_dir, check_write, esc, flash, path_segment};
use crate::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/experiments", get(list))
        .route("/experiments/{name}", get(detail))
        .route("/experiments/{name}/live", get(live))
        .route("/experiments/{name}/trials/{number}", get(trial))
        .route("/experiments/{name}/promote", get(review).post(change))
}

impl From<ExperimentError> for UiError {
    fn from(e: ExperimentError) -> UiError {
        let status = match &e {
            ExperimentError::Usage(m) if m.starts_with("no experiment") => StatusCode::NOT_FOUND,
            ExperimentError::Usage(_) => StatusCode::BAD_REQUEST,
            ExperimentError::Data(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ExperimentError::Lock(LockError::Held { .. }) | ExperimentError::Conflict(_) => {
                StatusCode::CONFLICT
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        UiError::new(status, e.to_string())
    }
}

/// The UI's links from an experiment's page.
struct PageLinks {
    base: String,
}

impl PageLinks {
    fn new(name: &str) -> PageLinks {
        PageLinks {
            base: format!("/ui/experiments/{}", path_segment(name)),
        }
    }
}

impl Links for PageLinks {
    fn trial(&self, n: usize) -> Option<String> {
        Some(format!("{}/trials/{n}", self.base))
    }
    fn sort(&self, key: &str, desc: bool) -> Option<String> {
        Some(format!(
            "{}?sort={key}{}#trials",
            self.base,
            if desc { "&desc=1" } else { "" }
        ))
    }
    fn promote(&self) -> Option<String> {
        Some(format!("{}/promote", self.base))
    }
    fn live(&self) -> Option<String> {
        Some(format!("{}/live", self.base))
    }
}

fn metrics_short(m: &assay_core::experiment::Metrics) -> String {
    format!(
        "{}/{} · {:.3}",
        m.factually_correct_count, m.cases, m.average_composite_score
    )
}

fn state_cell(v: &ExperimentView) -> String {
    let p = &v.progress;
    let word = match p.state {
        ExperimentState::Running => "▶ running",
        ExperimentState::Interrupted => "⏸ interrupted",
        ExperimentState::Halted => "✗ halted",
        ExperimentState::Finished => "✓ finished",
    };
    format!("<span class=\"tag st-{}\">{word}</span>", p.state.as_str())
}

/// Baseline → best on each set, with the verdict (finished), or on the optimization cases so
/// far (running).
fn best_cell(v: &ExperimentView) -> String {
    let r = &v.report;
    if !r.comparisons.is_empty() {
        return r.comparisons.iter().fold(String::new(), |mut out, c| {
            let s = &c.significance;
            let word = if s.correct_gain_significant || s.composite_gain_significant {
                "significant"
            } else {
                "not significant"
            };
            let _ = write!(
                out,
                "<div><b>{}</b>: {} → {} <span class=\"tag\" title=\"{}\">{word}</span></div>",
                esc(&c.set),
                metrics_short(&c.baseline),
                metrics_short(&c.optimized),
                esc(&s.verdict)
            );
            out
        });
    }
    if r.baseline.cases.is_empty() {
        return "<span class=\"muted\">baseline not finished</span>".to_owned();
    }
    let best = r
        .best_trial
        .and_then(|n| r.trials.iter().find(|t| t.number == n))
        .and_then(|t| {
            t.metrics.as_ref().or_else(|| {
                t.duplicate_of
                    .and_then(|d| r.trials.iter().find(|o| o.number == d))
                    .and_then(|o| o.metrics.as_ref())
            })
        });
    match best {
        Some(b) => format!(
            "<div><b>optimization</b>: {} → {} <span class=\"tag\">so far</span></div>",
            metrics_short(&r.baseline.metrics),
            metrics_short(b)
        ),
        None => format!(
            "<div><b>optimization</b>: baseline {}</div>",
            metrics_short(&r.baseline.metrics)
        ),
    }
}

async fn list(State(state): State<AppState>, headers: HeaderMap) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let listed = blocking_dir(&ctx.state, |dir| Ok(view::list(dir))).await?;
    let mut body = String::from(
        "<h1>Experiments</h1><p class=\"muted\">Prompt optimizations (<code>assay optimize</code>) in the project's <code>experiments/</code> folder, newest first. Correct answers of the cases · mean composite score, baseline → best; the verdict is the paired tests' on each set.</p>",
    );
    if listed.is_empty() {
        let dir = super::dir_arg(&ctx.state);
        body.push_str(&super::empty_state(
            "empty-experiments",
            &format!("No experiments yet: <code>assay optimize {dir} --experiment-name NAME</code> writes one (in <code>experiments/NAME/</code>; <code>assay optimize --help</code> says what it needs)."),
        ));
        return Ok(ctx.page("Experiments", "experiments", &body));
    }
    body.push_str("<div class=\"table-wrap\"><table class=\"grid\" id=\"experiments\"><thead><tr><th>Experiment</th><th class=\"when\">Started</th><th>Status</th><th class=\"num\">Trials</th><th>Best against the baseline</th><th class=\"num\">Spend</th></tr></thead><tbody>");
    for l in &listed {
        let href = format!("/ui/experiments/{}", path_segment(&l.name));
        match &l.view {
            Ok(v) => {
                let p = &v.progress;
                let _ = write!(
                    body,
                    "<tr><td class=\"id\" title=\"{}\"><a href=\"{}\">{}</a></td><td class=\"when\">{}</td><td>{}</td><td class=\"num\">{} / {}</td><td>{}</td><td class=\"num\">{}</td></tr>",
                    esc(&l.name),
                    esc(&href),
                    esc(&l.name),
                    esc(&v.report.started),
                    state_cell(v),
                    p.trials_done,
                    p.trials_requested,
                    best_cell(v),
                    p.spent_usd
                        .map_or_else(|| "unknown".to_owned(), |c| format!("${c:.4}"))
                );
            }
            Err(e) => {
                let _ = write!(
                    body,
                    "<tr><td><a href=\"{}\">{}</a></td><td></td><td><span class=\"tag inactive\">✗ unreadable</span></td><td></td><td colspan=\"2\">{}</td></tr>",
                    esc(&href),
                    esc(&l.name),
                    esc(e)
                );
            }
        }
    }
    body.push_str("</tbody></table></div>");
    Ok(ctx.page("Experiments", "experiments", &body))
}

fn read(dir: &std::path::Path, name: &str) -> Result<ExperimentView, UiError> {
    Ok(view::read(dir, name)?)
}

async fn detail(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let lookup = name.clone();
    let v = blocking_dir(&ctx.state, move |dir| read(dir, &lookup)).await?;
    let objectives = v.report.directions.len().max(
        v.report
            .trials
            .iter()
            .map(|t| t.values.len())
            .max()
            .unwrap_or(0),
    );
    let sort = Sort::parse(
        q.get("sort").map(String::as_str),
        q.get("desc").is_some_and(|d| d == "1"),
        objectives,
    );
    let body = format!(
        "<p class=\"muted\"><a href=\"/ui/experiments\">Experiments</a> / {}</p><style>{}</style>{}",
        esc(&name),
        assay_report::html::STYLE,
        render::body(&v.page(), &PageLinks::new(&name), &sort)
    );
    Ok(ctx.page(&format!("Experiment {name}"), "experiments", &body))
}

/// The progress panel alone, for the page's script to swap in while the experiment runs; its
/// `X-Experiment-State` header says when to reload the whole page instead.
async fn live(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, UiError> {
    let v = blocking_dir(&state, move |dir| read(dir, &name)).await?;
    let mut r = Html(render::progress_html(&v.progress)).into_response();
    if let Ok(h) = HeaderValue::from_str(v.progress.state.as_str()) {
        r.headers_mut().insert("x-experiment-state", h);
    }
    Ok(r)
}

async fn trial(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((name, number)): Path<(String, String)>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let number: usize = number
        .parse()
        .map_err(|_| UiError::bad_request(format!("`{number}` is not a trial number")))?;
    let lookup = name.clone();
    let v = blocking_dir(&ctx.state, move |dir| read(dir, &lookup)).await?;
    let links = PageLinks::new(&name);
    let inner = render::trial_body(&v.page(), number, &links).ok_or_else(|| {
        UiError::not_found(format!(
            "experiment `{name}` has no trial {number} (it has {} so far)",
            v.report.trials.len()
        ))
    })?;
    let body = format!(
        "<p class=\"muted\"><a href=\"/ui/experiments\">Experiments</a> / <a href=\"{}\">{}</a> / trial {number}</p><style>{}</style>{inner}",
        esc(&links.base),
        esc(&name),
        assay_report::html::STYLE
    );
    Ok(ctx.page(&format!("Trial {number} of {name}"), "experiments", &body))
}

/// One side of the review: the plan's diff and its form, or why there is nothing to do.
struct Planned {
    action: Action,
    plan: Result<promote::PromotionPlan, String>,
}

struct Review {
    view: ExperimentView,
    plans: Vec<Planned>,
    history: Result<Vec<promote::HistoryEntry>, String>,
    lock: Option<String>,
}

fn unified_html(diff: &str) -> String {
    let mut out = String::from("<pre class=\"diff\">");
    for line in diff.lines() {
        let class = if line.starts_with("+++") || line.starts_with("---") {
            "head"
        } else if line.starts_with('+') {
            "ins"
        } else if line.starts_with('-') {
            "del"
        } else if line.starts_with("@@") {
            "hunk"
        } else {
            "same"
        };
        let _ = writeln!(out, "<span class=\"{class}\">{}</span>", esc(line));
    }
    out.push_str("</pre>");
    out
}

async fn review(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let lookup = name.clone();
    let r = blocking_dir(&ctx.state, move |dir| {
        let view = read(dir, &lookup)?;
        let plans = [Action::Promote, Action::Rollback]
            .into_iter()
            .map(|action| Planned {
                action,
                plan: promote::plan(dir, &lookup, action).map_err(|e| e.to_string()),
            })
            .collect();
        let lock = match lock::probe(dir) {
            Ok(LockState::Held(Some(h))) => Some(format!(
                "{} (pid {}, started {})",
                h.operation, h.pid, h.started
            )),
            Ok(LockState::Held(None)) => Some("another assay process".to_owned()),
            _ => None,
        };
        Ok(Review {
            view,
            plans,
            history: promote::history(dir).map_err(|e| e.to_string()),
            lock,
        })
    })
    .await?;
    let base = format!("/ui/experiments/{}", path_segment(&name));
    let mut body = format!(
        "<p class=\"muted\"><a href=\"/ui/experiments\">Experiments</a> / <a href=\"{}\">{}</a> / promotion</p><h1>Promote or roll back <code>{}</code></h1>{}",
        esc(&base),
        esc(&name),
        esc(&name),
        promotion_flash(q.get("done").map(String::as_str))
    );
    body.push_str(ctx.write_notice());
    if let Some(holder) = &r.lock {
        let _ = write!(
            body,
            "<p class=\"notice warn\" role=\"status\" id=\"lock-held\">The project lock is held by {}: a promotion or rollback is refused until it is released.</p>",
            esc(holder)
        );
    }
    body.push_str("<h2>The evidence</h2>");
    if r.view.report.comparisons.is_empty() {
        body.push_str("<p class=\"notice warn\">No held-out comparison is recorded for this experiment: review its report before promoting.</p>");
    } else {
        body.push_str("<ul id=\"evidence\">");
        for c in &r.view.report.comparisons {
            let s = &c.significance;
            let _ = write!(
                body,
                "<li><b>{} set</b> ({} paired cases): baseline {} → optimized {}. <strong>{}</strong></li>",
                esc(&c.set),
                s.pairs,
                metrics_short(&c.baseline),
                metrics_short(&c.optimized),
                esc(&s.verdict)
            );
        }
        body.push_str("</ul>");
    }
    for p in &r.plans {
        let (title, verb, button, confirm) = match p.action {
            Action::Promote => (
                "Promote: install the optimized prompts",
                "promote",
                "Promote",
                "Replace the production prompts with this experiment's optimized prompts? They are backed up first.",
            ),
            Action::Rollback => (
                "Roll back: restore the baseline prompts",
                "rollback",
                "Roll back",
                "Restore the production prompts this experiment started from? The current ones are backed up first.",
            ),
        };
        let _ = write!(
            body,
            "<section class=\"card\" id=\"{verb}\"><h2>{title}</h2>"
        );
        match &p.plan {
            Err(e) => {
                let _ = write!(body, "<p class=\"notice\">{}</p>", esc(e));
            }
            Ok(plan) if plan.is_empty() => {
                body.push_str("<p class=\"notice\">Nothing to change: <code>prompts/</code> already holds these prompts.</p>");
            }
            Ok(plan) => {
                let _ = write!(
                    body,
                    "<p>{} of {} prompts change{}.</p>{}<form method=\"post\" action=\"{}/promote\" data-confirm=\"{}\">{}<input type=\"hidden\" name=\"action\" value=\"{verb}\"><input type=\"hidden\" name=\"reviewed\" value=\"{}\"><button type=\"submit\"{}>{button}</button></form>",
                    plan.changes.len(),
                    plan.changes.len() + plan.unchanged.len(),
                    if plan.untouched.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; left as they are (not in the source): {}",
                            esc(&plan.untouched.join(", "))
                        )
                    },
                    unified_html(&plan.unified_diff()),
                    esc(&base),
                    esc(confirm),
                    ctx.csrf_field(),
                    esc(&promote::diff_digest(plan)),
                    ctx.disabled()
                );
            }
        }
        body.push_str("</section>");
    }
    body.push_str("<h2 id=\"history\">Prompt history</h2>");
    match &r.history {
        Err(e) => {
            let _ = write!(body, "<p class=\"notice bad\">{}</p>", esc(e));
        }
        Ok(h) if h.is_empty() => {
            body.push_str("<p class=\"muted\">No promotion or rollback yet (<code>.assay/prompt-history.jsonl</code>).</p>");
        }
        Ok(h) => {
            body.push_str("<div class=\"table-wrap\"><table class=\"grid\" id=\"history-table\"><thead><tr><th>When</th><th>Action</th><th>Experiment</th><th>Changed</th><th>Backup</th></tr></thead><tbody>");
            for e in h.iter().rev() {
                let _ = write!(
                    body,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                    esc(&e.at),
                    e.action.as_str(),
                    esc(&e.experiment),
                    esc(&e.changed.join(", ")),
                    esc(e.backup.as_deref().unwrap_or("–"))
                );
            }
            body.push_str("</tbody></table></div>");
        }
    }
    Ok(ctx.page(&format!("Promote {name}"), "experiments", &body))
}

fn promotion_flash(done: Option<&str>) -> &'static str {
    match done {
        Some("promoted") => {
            "<p class=\"notice ok\" role=\"status\">Promoted: the production prompts were backed up and replaced (see the history).</p>"
        }
        Some("rolled-back") => {
            "<p class=\"notice ok\" role=\"status\">Rolled back: the production prompts were backed up and the baseline restored (see the history).</p>"
        }
        Some("unchanged") => {
            "<p class=\"notice\" role=\"status\">Nothing changed: prompts/ already held these prompts.</p>"
        }
        other => flash(other),
    }
}

async fn change(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Result<Response, UiError> {
    check_write(&state, &headers, &form)?;
    let action = match form.get("action").map(String::as_str) {
        Some("promote") => Action::Promote,
        Some("rollback") => Action::Rollback,
        _ => {
            return Err(UiError::bad_request(
                "the form's action must be promote or rollback",
            ));
        }
    };
    let Some(reviewed) = form.get("reviewed").cloned() else {
        return Err(UiError::bad_request(
            "the form does not say which diff was reviewed; reload the page and review it",
        ));
    };
    let target = name.clone();
    let done = blocking_dir(&state, move |dir| {
        Ok(promote::change(
            dir,
            &target,
            action,
            true,
            Some(&reviewed),
            "assay serve (web UI)",
        )?)
    })
    .await?;
    tracing::info!(
        experiment = %done.experiment,
        action = action.as_str(),
        written = done.applied.as_ref().map_or(0, |a| a.written.len()),
        "web UI: production prompts changed"
    );
    let flag = match (&done.applied, action) {
        (None, _) => "unchanged",
        (Some(_), Action::Promote) => "promoted",
        (Some(_), Action::Rollback) => "rolled-back",
    };
    let mut r = Redirect::to(&format!(
        "/ui/experiments/{}/promote?done={flag}#history",
        path_segment(&name)
    ))
    .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}
