//! One case of a saved run (`/ui/runs/{id}/cases/{test_id}`): its bank, score and why, what
//! was expected beside what came back, and the report's section on it, read from the run's
//! RunLog or its run log (`cases_<stamp>.jsonl`) through [`assay_run::caselog`]. Also the
//! cases of the test banks that name an entity (the entity's page), each linked to its result
//! in the newest run.

use std::collections::HashMap;
use std::fmt::Write;
use std::path::Path as FsPath;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::get;

use assay_core::aggregate::CaseRecord;
use assay_core::bank::BankType;
use assay_core::rundiff::CaseScore;
use assay_core::scoring::{Breakdown, interpret};
use assay_project::project::Project;
use assay_project::settings::ProjectSettings;
use assay_run::{caselog, runs};

use super::links::{case_href, entity_link, id_cell};
use super::{Ctx, Html, UiError, blocking_dir, empty_state, esc, path_segment};
use crate::AppState;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/runs/{id}/cases/{test_id}", get(case))
}

/// The case `test_id` of the saved run `id`, read from its RunLog or its run log.
fn find(results_dir: &FsPath, id: &str, test_id: &str) -> Result<CaseRecord, UiError> {
    // Stops at the case: the rest of a long run log is not read.
    const FOUND: &str = "\u{0}found";
    let log = runs::load_run(results_dir, id)?;
    let file = caselog::cases_file(results_dir, &log);
    let mut found = None;
    let walked = caselog::for_each_case(&log, file.as_deref(), None, &mut |r| {
        if r.test_id() == test_id {
            found = Some(r);
            return Err(FOUND.to_owned());
        }
        Ok(())
    });
    // The answer cases a RunLog lists, where the walk does not reach them.
    let found = found.or_else(|| {
        log.answer
            .iter()
            .flat_map(|a| &a.results)
            .find(|r| r.test_id == test_id)
            .cloned()
            .map(CaseRecord::Answer)
    });
    match (found, walked) {
        (Some(r), _) => Ok(r),
        (None, Ok(())) => Err(UiError::not_found(format!(
            "run {id} has no case `{test_id}`"
        ))),
        (None, Err(e)) => Err(UiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            e.to_string(),
        )),
    }
}

/// Entity ids as links to their pages, or `—`.
fn entities(ids: &[String]) -> String {
    if ids.is_empty() {
        "—".to_owned()
    } else {
        ids.iter()
            .map(|id| entity_link(id))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why a case lost points, a line each (escaped HTML).
fn why(b: &Breakdown, score: Option<u32>, error: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = error {
        out.push(format!("an error kept it from a score: {}", esc(e)));
    }
    if b.primary_fail == Some(true) {
        out.push(format!(
            "hard fail: {}",
            esc(b
                .reason
                .as_deref()
                .unwrap_or("the primary expectation was not met"))
        ));
    } else if let Some(r) = &b.reason {
        out.push(esc(r));
    }
    let mut penalty = |label: &str, n: i64, items: String| {
        out.push(format!("{n} points: {label} {items}"));
    };
    if let Some(p) = &b.secondary_missing {
        penalty("secondary missing:", p.penalty, entities(&p.items));
    }
    if let Some(p) = &b.false_positives {
        penalty("unwanted:", p.penalty, entities(&p.items));
    }
    if let Some(p) = &b.wrong_handlers {
        penalty("wrong handlers:", p.penalty, entities(&p.items));
    }
    if let Some(p) = &b.rank_violations {
        let items: Vec<String> = p
            .items
            .iter()
            .map(|v| {
                format!(
                    "{} (#{}) should rank above {} (#{})",
                    entity_link(&v.expected_higher),
                    v.actual_higher_rank,
                    entity_link(&v.expected_lower),
                    v.actual_lower_rank
                )
            })
            .collect();
        penalty("order:", p.penalty, items.join("; "));
    }
    if out.is_empty() && score == Some(100) {
        out.push("nothing missing, nothing unwanted".to_owned());
    }
    out
}

/// `(what was expected, what came back, why)` of a case, as HTML.
fn expected_and_got(record: &CaseRecord) -> (String, String, Vec<String>) {
    match record {
        CaseRecord::Semantic(r) => {
            let e = &r.expectations;
            let mut expected = format!("primary {}", entities(&e.expected_primary));
            if !e.expected_secondary.is_empty() {
                let _ = write!(expected, "; secondary {}", entities(&e.expected_secondary));
            }
            if !e.not_expected.is_empty() {
                let _ = write!(expected, "; not {}", entities(&e.not_expected));
            }
            (
                expected,
                format!("selected {}", entities(&r.selections)),
                why(&r.breakdown, r.score, r.error.as_deref()),
            )
        }
        CaseRecord::State(r) => {
            let mut expected = format!("handlers {}", entities(&r.expected_handlers));
            if !r.not_expected_handlers.is_empty() {
                let _ = write!(expected, "; not {}", entities(&r.not_expected_handlers));
            }
            (
                expected,
                format!("triggered {}", entities(&r.triggered_handlers)),
                why(&r.breakdown, Some(r.score), None),
            )
        }
        CaseRecord::Pattern(r) => {
            let mut expected = format!("matches {}", entities(&r.expected_matches));
            if !r.expected_secondary.is_empty() {
                let _ = write!(expected, "; secondary {}", entities(&r.expected_secondary));
            }
            if !r.not_expected_matches.is_empty() {
                let _ = write!(expected, "; not {}", entities(&r.not_expected_matches));
            }
            (
                expected,
                format!("matched {}", entities(&r.matched_entities)),
                why(&r.breakdown, Some(r.score), None),
            )
        }
        CaseRecord::Always(r) => (
            format!("loaded always {}", entities(&r.expected_always)),
            format!("loaded {}", entities(&r.loaded_entities)),
            why(&r.breakdown, Some(r.score), None),
        ),
        CaseRecord::Answer(r) => answer_expected_and_got(r),
    }
}

/// An answer case: what it was held to (a reference answer, minimums, assertions), the reply
/// with the context it was judged on, and why it failed, a line each.
fn answer_expected_and_got(
    r: &assay_core::answer::AnswerCaseResult,
) -> (String, String, Vec<String>) {
    let mut expected = Vec::new();
    if let Some(reference) = &r.reference {
        expected.push(format!("a reply like “{}”", esc(reference)));
    }
    let minimums: Vec<String> = r
        .metrics
        .iter()
        .filter_map(|(m, o)| o.minimum.map(|min| format!("{m} ≥ {min:.2}")))
        .collect();
    if !minimums.is_empty() {
        expected.push(minimums.join(", "));
    }
    if let Some(a) = &r.assertions {
        expected.push(format!(
            "{} assertion{} (threshold {:.0}%)",
            a.results.len(),
            if a.results.len() == 1 { "" } else { "s" },
            a.threshold * 100.0
        ));
    }
    let expected = if expected.is_empty() {
        "a reply grounded in its context".to_owned()
    } else {
        expected.join("; ")
    };
    let context: Vec<String> = r.contexts.iter().filter_map(|c| c.entity.clone()).collect();
    let got = match &r.reply {
        Some(reply) => format!(
            "the reply “{}”, from context {}",
            esc(reply),
            entities(&context)
        ),
        None => "no reply".to_owned(),
    };
    let mut reasons = Vec::new();
    if let Some(e) = &r.error {
        reasons.push(format!("an error kept it from a score: {}", esc(e)));
    }
    reasons.extend(r.failures.iter().map(|f| esc(f)));
    let scores: Vec<String> = r
        .metrics
        .iter()
        .map(|(m, o)| format!("{m} {}", assay_report::answer::share(o.score)))
        .collect();
    if r.error.is_none() && !scores.is_empty() {
        reasons.push(format!("metrics: {}", scores.join(", ")));
    }
    if r.failures.is_empty() && r.score == Some(100) {
        reasons.push("every metric and assertion held".to_owned());
    }
    (expected, got, reasons)
}

fn name(record: &CaseRecord) -> &str {
    match record {
        CaseRecord::Semantic(r) => &r.name,
        CaseRecord::State(r) => &r.name,
        CaseRecord::Pattern(r) => &r.name,
        CaseRecord::Always(r) => &r.name,
        CaseRecord::Answer(r) => &r.name,
    }
}

async fn case(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((id, test_id)): Path<(String, String)>,
) -> Result<Html, UiError> {
    let ctx = Ctx::new(state, &headers);
    runs::check_run_id(&id)?;
    let (run, lookup) = (id.clone(), test_id.clone());
    let record = blocking_dir(&ctx.state, move |dir| {
        let settings = ProjectSettings::load(dir).map_err(assay_project::HarnessError::from)?;
        find(&settings.results_dir, &run, &lookup)
    })
    .await?;
    let (expected, got, reasons) = expected_and_got(&record);
    let score = record.score().map_or_else(
        || "no score (an error)".to_owned(),
        |s| format!("{s} <span class=\"muted\">({})</span>", interpret(s)),
    );
    let mut body = format!(
        "<p class=\"muted\"><a href=\"/ui/runs\">Runs</a> / <a href=\"/ui/runs/{}\">{}</a> / case</p><h1>Case <code>{}</code></h1>",
        esc(&path_segment(&id)),
        esc(&id),
        esc(&test_id)
    );
    if !name(&record).is_empty() {
        let _ = write!(body, "<p>{}</p>", esc(name(&record)));
    }
    // The verdict stored when the case was scored, and the checks that failed it.
    let verdict = record.verdict();
    let checks = if verdict.summary().is_empty() {
        String::new()
    } else {
        format!(" {}", esc(&verdict.summary()))
    };
    let _ = write!(
        body,
        "<dl class=\"fields case\" id=\"case\"><dt>run</dt><dd class=\"nowrap\"><a href=\"/ui/runs/{}\">{}</a></dd><dt>bank</dt><dd>{}</dd><dt>verdict</dt><dd id=\"verdict\" data-verdict=\"{}\"><span class=\"report\">{}</span>{checks}</dd><dt>score</dt><dd>{score}</dd><dt>hard fail</dt><dd>{}</dd><dt>why</dt><dd>{}</dd><dt>expected</dt><dd>{expected}</dd><dt>came back</dt><dd>{got}</dd></dl>",
        esc(&path_segment(&id)),
        esc(&id),
        record.bank().key(),
        verdict.outcome.as_str(),
        assay_report::html::verdict_badge(&verdict),
        if record.is_hard_fail() { "yes" } else { "no" },
        if reasons.is_empty() {
            "—".to_owned()
        } else {
            reasons.join("<br>")
        }
    );
    let _ = write!(
        body,
        "<h2>In the report</h2><style>{}</style><div class=\"report\">{}</div>",
        assay_report::html::STYLE,
        assay_report::html::case_section(&record)
    );
    Ok(ctx.page(&format!("Case {test_id}"), "runs", &body))
}

/// A case of the test banks that names an entity.
pub(super) struct NamedCase {
    bank: BankType,
    test_id: String,
    name: String,
    /// How it names the entity (`expected primary`, `not expected`, …).
    roles: Vec<&'static str>,
}

/// The cases of `project`'s test banks that name `entity`, in bank order.
pub(super) fn naming(project: &Project, entity: &str) -> Vec<NamedCase> {
    let mut out = Vec::new();
    let mut add = |bank, test_id: &str, name: &str, lists: &[(&'static str, &[String])]| {
        let roles: Vec<&'static str> = lists
            .iter()
            .filter(|(_, ids)| ids.iter().any(|i| i == entity))
            .map(|(role, _)| *role)
            .collect();
        if !roles.is_empty() {
            out.push(NamedCase {
                bank,
                test_id: test_id.to_owned(),
                name: name.to_owned(),
                roles,
            });
        }
    };
    let b = &project.banks;
    for c in &b.semantic {
        let c = &c.case;
        let ranked: Vec<String> = c
            .rank_check
            .iter()
            .flat_map(|r| [r.higher.clone(), r.lower.clone()])
            .collect();
        add(
            BankType::Semantic,
            &c.test_id,
            &c.name,
            &[
                ("expected primary", &c.expected_primary),
                ("expected secondary", &c.expected_secondary),
                ("not expected", &c.not_expected),
                ("rank check", &ranked),
            ],
        );
    }
    for c in &b.state {
        let c = &c.case;
        add(
            BankType::State,
            &c.test_id,
            &c.name,
            &[
                ("expected handler", &c.expected_handlers),
                ("not expected handler", &c.not_expected_handlers),
            ],
        );
    }
    for c in &b.pattern {
        let c = &c.case;
        add(
            BankType::Pattern,
            &c.test_id,
            &c.name,
            &[
                ("expected match", &c.expected_matches),
                ("expected secondary", &c.expected_secondary),
                ("not expected", &c.not_expected_matches),
            ],
        );
    }
    for c in &b.always {
        let c = &c.case;
        add(
            BankType::Always,
            &c.test_id,
            &c.name,
            &[("always loaded", &c.expected_always)],
        );
    }
    out
}

/// The newest saved run that can be read (by id: a run's id is the stamp of its start), and
/// its cases' scores by test id; `None` without one.
pub(super) fn newest_scores(results_dir: &FsPath) -> Option<(String, HashMap<String, CaseScore>)> {
    let mut ids: Vec<String> = std::fs::read_dir(results_dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            let id = name.strip_prefix("results_")?.strip_suffix(".json")?;
            runs::check_run_id(id).ok().map(|()| id.to_owned())
        })
        .collect();
    // `2026-11-25-0915-10` after `-9`: by stamp, then by the number after it.
    let key = |id: &String| {
        let stamp = id.get(..15).unwrap_or(id).to_owned();
        let n: u64 = id.get(16..).and_then(|n| n.parse().ok()).unwrap_or(1);
        (stamp, n)
    };
    ids.sort_by_key(|id| std::cmp::Reverse(key(id)));
    ids.into_iter().find_map(|id| {
        let log = runs::load_run(results_dir, &id).ok()?;
        let file = caselog::cases_file(results_dir, &log);
        let scores = caselog::case_scores(&log, file.as_deref()).ok()?;
        Some((
            id,
            scores.into_iter().map(|s| (s.test_id.clone(), s)).collect(),
        ))
    })
}

/// The entity page's section: the cases that name it, each linked to its result in the
/// newest run (when that run has it).
pub(super) fn section(
    state: &AppState,
    has_banks: bool,
    cases: &[NamedCase],
    newest: Option<&(String, HashMap<String, CaseScore>)>,
) -> String {
    let dir = super::dir_arg(state);
    let mut out = String::from("<section id=\"entity-cases\"><h2>Cases that name it</h2>");
    if !has_banks {
        out.push_str(&empty_state(
            "empty-cases",
            &format!(
                "No test banks yet: the cases that name this entity show here once the project has a <code>test_banks/</code> folder. <code>assay init {dir}</code> makes one (it never overwrites a file)."
            ),
        ));
        out.push_str("</section>");
        return out;
    }
    if cases.is_empty() {
        out.push_str(
            "<p class=\"muted\">No case in the test banks names this entity.</p></section>",
        );
        return out;
    }
    match newest {
        Some((run, _)) => {
            let _ = write!(
                out,
                "<p class=\"muted\">{} case{}; scores from the newest run, <a class=\"nowrap\" href=\"/ui/runs/{}\">{}</a>.</p>",
                cases.len(),
                if cases.len() == 1 { "" } else { "s" },
                esc(&path_segment(run)),
                esc(run)
            );
        }
        None => {
            let _ = write!(
                out,
                "<p class=\"muted\">{} case{}. No runs yet: <code>assay run {dir}</code> writes one, and then each case links to its result.</p>",
                cases.len(),
                if cases.len() == 1 { "" } else { "s" }
            );
        }
    }
    out.push_str("<div class=\"table-wrap\"><table class=\"grid\" id=\"entity-cases-table\"><thead><tr><th>Case</th><th>Bank</th><th>Name</th><th>Names it as</th><th class=\"num\">Newest score</th></tr></thead><tbody>");
    for c in cases {
        let result = newest.and_then(|(run, scores)| {
            scores
                .get(&c.test_id)
                .filter(|s| s.bank == c.bank.key())
                .map(|s| (run, s))
        });
        let href = result.map(|(run, _)| case_href(run, &c.test_id));
        let score = match result {
            // The score beside the verdict stored with it.
            Some((_, s)) => match s.score {
                Some(v) => format!("{v} ({})", s.verdict.label()),
                None => s.verdict.label().to_owned(),
            },
            None if newest.is_some() => "<span class=\"muted\">not in that run</span>".to_owned(),
            None => "—".to_owned(),
        };
        let _ = write!(
            out,
            "<tr>{}<td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{score}</td></tr>",
            id_cell(&c.test_id, href.as_deref()),
            c.bank.key(),
            esc(&c.name),
            c.roles.join(", ")
        );
    }
    out.push_str("</tbody></table></div></section>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_what_cost_points() {
        let b = Breakdown {
            primary_fail: Some(true),
            reason: Some("missing <b>".into()),
            ..Breakdown::default()
        };
        let lines = why(&b, Some(0), None);
        assert_eq!(lines, ["hard fail: missing &lt;b&gt;"]);
        assert_eq!(
            why(&Breakdown::default(), Some(100), None),
            ["nothing missing, nothing unwanted"]
        );
    }
}
