//! The red-team runs (`assay redteam`, saved under `results/redteam/`): the list, newest first,
//! with each run's families, attack success rate and verdict, and a run's report (the same body
//! as its `report.html`: rates with their intervals per family and technique, and every finding
//! with its payload, reply and evidence).

use std::fmt::Write;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;

use assay_redteam::journal::runs_dir;
use assay_redteam::{RunFolder, list_runs, load_report};

use super::runs::with_results;
use super::{Ctx, Html, UiError, esc, path_segment};
use crate::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/redteam", get(list))
        .route("/redteam/{run}", get(detail))
}

/// A run id names a folder directly under `results/redteam/`, nothing else.
fn check_id(id: &str) -> Result<(), UiError> {
    let plain = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if plain {
        Ok(())
    } else {
        Err(UiError::bad_request(format!(
            "`{id}` is not a red-team run id (a folder name under results/redteam/)"
        )))
    }
}

async fn list(State(state): State<AppState>, headers: HeaderMap) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    let rows = with_results(&ctx.state, |results, _| {
        Ok(list_runs(&runs_dir(results))
            .into_iter()
            .map(|run| {
                let report = run
                    .finished
                    .then(|| load_report(&run.path).map_err(|e| e.to_string()));
                (run, report)
            })
            .collect::<Vec<_>>())
    })
    .await?;
    let mut body = String::from(
        "<h1>Red team</h1><p class=\"muted\">The runs of <code>assay redteam</code> (<code>results/redteam/</code>), newest first: per run, the attack success rate over every family, how many attacks worked, and the verdict of its gates.</p>",
    );
    if rows.is_empty() {
        let dir = super::dir_arg(&ctx.state);
        body.push_str(&super::empty_state(
            "empty-redteam",
            &format!("No red-team runs yet: <code>assay redteam {dir}</code> attacks the project and saves one (in <code>results/redteam/</code>)."),
        ));
        return Ok(ctx.page("Red team", "redteam", &body));
    }
    body.push_str("<div class=\"table-wrap\"><table class=\"grid\" id=\"redteam-runs\"><thead><tr><th>Run</th><th>Families</th><th class=\"num\">Attempts each</th><th>Product</th><th>Attack success rate</th><th class=\"num\">Findings</th><th>Verdict</th></tr></thead><tbody>");
    for (run, report) in &rows {
        let RunFolder { id, .. } = run;
        let href = format!("/ui/redteam/{}", path_segment(id));
        match report {
            Some(Ok(r)) => {
                let h = &r.header;
                let families: Vec<&str> = h.families.iter().map(|f| f.name()).collect();
                let _ = write!(
                    body,
                    "<tr><td class=\"nowrap\"><a href=\"{}\">{}</a><br><span class=\"muted\">{}, seed {}</span></td><td>{}</td><td class=\"num\">{}</td><td><code>{}</code></td><td>{}</td><td class=\"num\">{}</td><td>{} {}</td></tr>",
                    esc(&href),
                    esc(id),
                    esc(&h.started_at),
                    h.seed,
                    esc(&families.join(", ")),
                    h.attempts,
                    esc(&h.target),
                    esc(&r.total.statement),
                    r.findings.len(),
                    if r.passed { "✓" } else { "✗" },
                    esc(&r.verdict())
                );
            }
            Some(Err(e)) => {
                let _ = write!(
                    body,
                    "<tr><td>{}</td><td colspan=\"6\"><span class=\"tag inactive\">✗ unreadable</span> {}</td></tr>",
                    esc(id),
                    esc(e)
                );
            }
            None => {
                let _ = write!(
                    body,
                    "<tr><td>{}</td><td colspan=\"6\"><span class=\"tag\">unfinished</span> no report yet: the run is going on, or was interrupted (<code>assay redteam --resume</code> finishes it)</td></tr>",
                    esc(id)
                );
            }
        }
    }
    body.push_str("</tbody></table></div>");
    Ok(ctx.page("Red team", "redteam", &body))
}

async fn detail(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(run): Path<String>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    check_id(&run)?;
    let lookup = run.clone();
    let report = with_results(&ctx.state, move |results, _| {
        let dir = runs_dir(results).join(&lookup);
        if !dir.join(assay_redteam::journal::REPORT_JSON).is_file() {
            return Err(UiError::not_found(format!(
                "no finished red-team run `{lookup}` in {}",
                runs_dir(results).display()
            )));
        }
        load_report(&dir).map_err(|e| UiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))
    })
    .await?;
    let body = format!(
        "<p class=\"muted\"><a href=\"/ui/redteam\">Red team</a> / {}</p><style>{}</style><div id=\"redteam-report\">{}</div>",
        esc(&run),
        assay_redteam::report::STYLE,
        report.html_body()
    );
    Ok(ctx.page(&format!("Red team {run}"), "redteam", &body))
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_ids_are_plain_folder_names() {
        assert!(super::check_id("redteam-2026-11-29-101500").is_ok());
        assert!(super::check_id("redteam-2026-11-29-101500-2").is_ok());
        for bad in ["", "..", "a/b", "../x", "a b", "é"] {
            assert!(super::check_id(bad).is_err(), "{bad}");
        }
    }
}
