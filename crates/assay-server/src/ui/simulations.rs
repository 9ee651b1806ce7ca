//! The conversation simulations: the saved reports (`sim/reports/report_<stamp>.json`), a
//! report (the same body as its `report_<stamp>.html`), a run's transcript beside its
//! judgement and checks, and two or more reports compared through
//! [`assay_core::simulation::compare_reports`], as `assay simulate compare` does.

use std::fmt::Write;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;

use assay_core::simulation::{ScenarioRun, SimReport, Transcript, compare_reports};
use assay_kb::datafile::DataError;
use assay_report::simulation::{self as render, SimLinks};
use assay_sim::report;

use super::{Ctx, Html, UiError, blocking_dir, esc, path_segment};
use crate::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/simulations", get(list))
        .route("/simulations/compare", get(compare))
        .route("/simulations/{stamp}", get(detail))
        .route(
            "/simulations/{stamp}/runs/{scenario}/{repeat}",
            get(transcript),
        )
}

/// The most reports one comparison takes.
const MAX_COMPARED: usize = 8;

fn data_error(e: &DataError) -> UiError {
    let status = if e.message.starts_with("no such simulation report") {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    UiError::new(status, e.to_string())
}

fn load(dir: &std::path::Path, stamp: &str) -> Result<SimReport, UiError> {
    let path = report::path_of(dir, stamp).map_err(UiError::bad_request)?;
    report::read(&path).map_err(|e| data_error(&e))
}

/// Each run's transcript page.
struct PageLinks {
    base: String,
}

impl PageLinks {
    fn new(stamp: &str) -> PageLinks {
        PageLinks {
            base: format!("/ui/simulations/{}", path_segment(stamp)),
        }
    }
}

impl SimLinks for PageLinks {
    fn transcript(&self, run: &ScenarioRun) -> Option<String> {
        Some(format!(
            "{}/runs/{}/{}",
            self.base,
            path_segment(&run.scenario_id),
            run.repeat
        ))
    }
}

async fn list(State(state): State<AppState>, headers: HeaderMap) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let rows = blocking_dir(&ctx.state, |dir| {
        Ok(report::list(dir)
            .into_iter()
            .map(|(stamp, path)| {
                let head = report::read_head(&path).map_err(|e| e.to_string());
                (stamp, head)
            })
            .collect::<Vec<_>>())
    })
    .await?;
    let mut body = String::from(
        "<h1>Simulations</h1><p class=\"muted\">The saved reports of <code>assay simulate</code> (<code>sim/reports/</code>), newest first. Tick two or more to compare their models side by side.</p>",
    );
    if rows.is_empty() {
        let dir = super::dir_arg(&ctx.state);
        body.push_str(&super::empty_state(
            "empty-simulations",
            &format!("No simulation reports yet: <code>assay simulate {dir}</code> writes one (in <code>sim/reports/</code>, from the suite in <code>sim/</code>)."),
        ));
        return Ok(ctx.page("Simulations", "simulations", &body));
    }
    body.push_str("<form method=\"get\" action=\"/ui/simulations/compare\" id=\"compare-form\"><div class=\"table-wrap\"><table class=\"grid\" id=\"simulations\"><thead><tr><th>Compare</th><th>Report</th><th>Suite</th><th>Model</th><th>Judge</th><th class=\"num\">Runs</th><th class=\"num\">Passed</th><th class=\"num\">Failed</th><th class=\"num\">Errors / faults</th><th class=\"num\">Mean</th><th class=\"num\">Pass rate</th><th>Gate</th></tr></thead><tbody>");
    for (stamp, head) in &rows {
        let href = format!("/ui/simulations/{}", path_segment(stamp));
        match head {
            Ok(h) => {
                let s = &h.summary;
                let _ = write!(
                    body,
                    "<tr><td><input type=\"checkbox\" name=\"r\" value=\"{}\" aria-label=\"compare {}\"></td><td class=\"nowrap\"><a href=\"{}\">{}</a><br><span class=\"muted\">{}</span></td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{} / {}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                    esc(stamp),
                    esc(stamp),
                    esc(&href),
                    esc(stamp),
                    esc(&h.generated_at),
                    esc(&h.suite),
                    esc(&h.model),
                    esc(&h.evaluator_model),
                    s.runs,
                    s.passed,
                    s.failed,
                    s.errors,
                    s.simulator_fault,
                    s.mean_overall
                        .map_or_else(|| "–".to_owned(), |m| format!("{m:.2}")),
                    s.pass_rate
                        .map_or_else(|| "–".to_owned(), |r| format!("{:.0}%", r * 100.0)),
                    match &h.gate {
                        Some(g) if g.passed => "✓ passed",
                        Some(_) => "✗ failed",
                        None => "–",
                    }
                );
            }
            Err(e) => {
                let _ = write!(
                    body,
                    "<tr><td></td><td><a href=\"{}\">{}</a></td><td colspan=\"10\"><span class=\"tag inactive\">✗ unreadable</span> {}</td></tr>",
                    esc(&href),
                    esc(stamp),
                    esc(e)
                );
            }
        }
    }
    body.push_str("</tbody></table></div><div class=\"actions\"><button type=\"submit\">Compare the ticked reports</button></div></form>");
    Ok(ctx.page("Simulations", "simulations", &body))
}

async fn detail(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(stamp): Path<String>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let lookup = stamp.clone();
    let r = blocking_dir(&ctx.state, move |dir| load(dir, &lookup)).await?;
    let body = format!(
        "<p class=\"muted\"><a href=\"/ui/simulations\">Simulations</a> / {}</p><style>{}</style>{}",
        esc(&stamp),
        assay_report::html::STYLE,
        render::body(&r, &PageLinks::new(&stamp))
    );
    Ok(ctx.page(&format!("Simulation {stamp}"), "simulations", &body))
}

async fn transcript(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((stamp, scenario, repeat)): Path<(String, String, String)>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let repeat: u32 = repeat
        .parse()
        .map_err(|_| UiError::bad_request(format!("`{repeat}` is not a repeat number")))?;
    let (lookup, id) = (stamp.clone(), scenario.clone());
    let (r, file) = blocking_dir(&ctx.state, move |dir| {
        let r = load(dir, &lookup)?;
        // The report keeps each transcript; a run without one gets its transcript file, if
        // there is one, else a message that says what is missing.
        let file = r
            .runs
            .iter()
            .find(|run| run.scenario_id == id && run.repeat == repeat && run.transcript.is_none())
            .map(|run| {
                let path = report::transcript_path(dir, &lookup, run)?;
                match std::fs::read_to_string(&path) {
                    Ok(text) => serde_json::from_str::<Transcript>(&text).map_err(|e| {
                        format!(
                            "the transcript file {} is not a transcript: {e}",
                            path.display()
                        )
                    }),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                        "no transcript: the report has none for this run ({}) and there is no transcript file at {}",
                        if run.error.is_some() {
                            "it ended in an error before the conversation was recorded"
                        } else {
                            "it was not saved with the report"
                        },
                        path.display()
                    )),
                    Err(e) => Err(format!("cannot read {}: {e}", path.display())),
                }
            });
        Ok((r, file))
    })
    .await?;
    let Some(run) = r
        .runs
        .iter()
        .find(|run| run.scenario_id == scenario && run.repeat == repeat)
    else {
        return Err(UiError::not_found(format!(
            "report {stamp} has no run {repeat} of scenario `{scenario}`"
        )));
    };
    let transcript = match (&run.transcript, &file) {
        (Some(t), _) | (None, Some(Ok(t))) => Ok(t),
        (None, Some(Err(why))) => Err(why.clone()),
        (None, None) => Err("no transcript".to_owned()),
    };
    let links = PageLinks::new(&stamp);
    // The scenario's other runs, to step through them.
    let siblings: Vec<String> = r
        .runs
        .iter()
        .filter(|o| o.scenario_id == run.scenario_id)
        .map(|o| {
            if o.repeat == run.repeat {
                format!("<strong>#{}</strong>", o.repeat)
            } else {
                format!(
                    "<a href=\"{}\">#{}</a>",
                    esc(&links.transcript(o).unwrap_or_default()),
                    o.repeat
                )
            }
        })
        .collect();
    let body = format!(
        "<p class=\"muted\"><a href=\"/ui/simulations\">Simulations</a> / <a href=\"{}\">{}</a> / {} · runs: {}</p><style>{}</style>{}",
        esc(&links.base),
        esc(&stamp),
        esc(&run.scenario_id),
        siblings.join(" "),
        assay_report::html::STYLE,
        render::transcript_body(&r, run, transcript)
    );
    Ok(ctx.page(
        &format!("{} #{} · {stamp}", run.scenario_name, run.repeat),
        "simulations",
        &body,
    ))
}

async fn compare(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<Vec<(String, String)>>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let mut stamps: Vec<String> = Vec::new();
    for (k, v) in q {
        match k.as_str() {
            "r" => {
                if !stamps.contains(&v) {
                    stamps.push(v);
                }
            }
            other => {
                return Err(UiError::bad_request(format!(
                    "unknown query parameter `{other}` (expected r=<report stamp>, repeated)"
                )));
            }
        }
    }
    if stamps.len() < 2 {
        return Err(UiError::bad_request(
            "tick two or more reports to compare (r=<stamp>&r=<stamp>)",
        ));
    }
    if stamps.len() > MAX_COMPARED {
        return Err(UiError::bad_request(format!(
            "at most {MAX_COMPARED} reports at once"
        )));
    }
    let wanted = stamps.clone();
    let reports = blocking_dir(&ctx.state, move |dir| {
        wanted
            .iter()
            .map(|s| load(dir, s))
            .collect::<Result<Vec<_>, _>>()
    })
    .await?;
    let labelled: Vec<(String, &SimReport)> = stamps.iter().cloned().zip(reports.iter()).collect();
    let comparison = compare_reports(&labelled);
    let mut body = String::from(
        "<p class=\"muted\"><a href=\"/ui/simulations\">Simulations</a> / compare</p>",
    );
    body.push_str("<p>Reports: ");
    let names: Vec<String> = stamps
        .iter()
        .zip(&reports)
        .map(|(s, r)| {
            format!(
                "<a href=\"/ui/simulations/{}\">{}</a> (<code>{}</code>)",
                path_segment(s),
                esc(s),
                esc(&r.model)
            )
        })
        .collect();
    body.push_str(&names.join(", "));
    body.push_str("</p>");
    let _ = write!(
        body,
        "<style>{}</style>{}",
        assay_report::html::STYLE,
        render::compare_body(&reports, &comparison)
    );
    Ok(ctx.page("Compare simulations", "simulations", &body))
}
