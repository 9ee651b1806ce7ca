//! The self-contained HTML report (`results/report_<stamp>.html`): the Markdown report's
//! content with charts, as one file with inline CSS and inline SVG, no script and no external
//! asset. The web UI's run page shows the same body, its case ids linked to the cases' pages
//! ([`body_with`]), and a case's page its section ([`case_section`]).
//!
//! Every string that comes from the run (ids, names, prompts, entity ids, topics, warnings,
//! errors) goes through [`escape`]; nothing else is ever interpolated.

use std::collections::BTreeMap;
use std::fmt::Write;

use assay_core::aggregate::CaseRecord;
use assay_core::bank::{BankType, ExpectationSet};
use assay_core::runlog::{
    AlwaysCaseResult, GroupScore, LostAt, PatternCaseResult, RunLog, SemanticCaseResult,
    StateCaseResult,
};
use assay_core::scoring::{Breakdown, interpret};
use assay_core::verdict::{Verdict, Verdicted};

use crate::select;

pub use crate::common::{CaseLinks, NoLinks, STYLE, escape};

const PAGE_STYLE: &str = "body{font:15px/1.45 system-ui,-apple-system,\"Segoe UI\",sans-serif;color:#1d2127;margin:0 auto;max-width:72rem;padding:1.5rem}";

/// A case id as HTML: a link to its page when `links` has one, else the escaped id.
fn case_id(links: &dyn CaseLinks, bank: BankType, id: &str) -> String {
    match links.case(bank, id) {
        Some(href) => format!("<a href=\"{}\">{}</a>", escape(&href), escape(id)),
        None => escape(id),
    }
}

/// The whole report as one HTML document.
pub fn render(log: &RunLog) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>assay run {} — {}</title>\n<style>\n{PAGE_STYLE}\n{STYLE}</style></head>\n<body>\n",
        escape(&log.run_id),
        log.summary.health_status
    );
    out.push_str(&body(log));
    out.push_str("</body></html>\n");
    out
}

fn score_class(score: f64) -> &'static str {
    if score < 70.0 {
        "score-bad"
    } else {
        "score-ok"
    }
}

fn ids(items: &[String]) -> String {
    if items.is_empty() {
        "—".to_owned()
    } else {
        items
            .iter()
            .map(|i| format!("<code>{}</code>", escape(i)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Horizontal bars of scores out of 100, one per row: `(label, score, note)`.
fn bars(rows: &[(String, f64, String)]) -> String {
    const LABEL: f64 = 190.0;
    const WIDTH: f64 = 300.0;
    const ROW: f64 = 22.0;
    let height = ROW * rows.len() as f64 + 4.0;
    let total = LABEL + WIDTH + 190.0;
    let mut svg = format!(
        "<svg role=\"img\" width=\"{total}\" height=\"{height}\" viewBox=\"0 0 {total} {height}\" xmlns=\"http://www.w3.org/2000/svg\">"
    );
    for (i, (label, score, note)) in rows.iter().enumerate() {
        let y = ROW * i as f64 + 2.0;
        let w = (score.clamp(0.0, 100.0) / 100.0 * WIDTH).max(1.0);
        let colour = if *score >= 90.0 {
            "#1f7a3a"
        } else if *score >= 70.0 {
            "#9a6700"
        } else {
            "#b42318"
        };
        let short: String = label.chars().take(28).collect();
        let _ = write!(
            svg,
            "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\">{}</text><rect x=\"{LABEL}\" y=\"{y:.0}\" width=\"{WIDTH}\" height=\"16\" fill=\"#eef0f3\"/><rect x=\"{LABEL}\" y=\"{y:.0}\" width=\"{w:.1}\" height=\"16\" fill=\"{colour}\"><title>{}: {score:.1}</title></rect><text x=\"{:.0}\" y=\"{:.0}\">{score:.1} {}</text>",
            LABEL - 6.0,
            y + 12.0,
            escape(&short),
            escape(label),
            LABEL + WIDTH + 6.0,
            y + 12.0,
            escape(note),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A histogram of the score buckets, in report order (100 first).
fn histogram(buckets: &[(&str, usize)]) -> String {
    const BAR: f64 = 46.0;
    const GAP: f64 = 10.0;
    const PLOT: f64 = 140.0;
    let max = buckets.iter().map(|b| b.1).max().unwrap_or(0).max(1) as f64;
    let width = (BAR + GAP) * buckets.len() as f64 + GAP;
    let height = PLOT + 40.0;
    let mut svg = format!(
        "<svg role=\"img\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" xmlns=\"http://www.w3.org/2000/svg\"><line x1=\"0\" y1=\"{:.0}\" x2=\"{width}\" y2=\"{:.0}\" stroke=\"#999\"/>",
        PLOT + 18.0,
        PLOT + 18.0
    );
    for (i, (range, count)) in buckets.iter().enumerate() {
        let x = GAP + (BAR + GAP) * i as f64;
        let h = *count as f64 / max * PLOT;
        let y = PLOT + 18.0 - h;
        let colour = match *range {
            "100" | "90-99" => "#1f7a3a",
            "80-89" | "70-79" => "#9a6700",
            _ => "#b42318",
        };
        let _ = write!(
            svg,
            "<rect x=\"{x:.0}\" y=\"{y:.1}\" width=\"{BAR}\" height=\"{h:.1}\" fill=\"{colour}\"><title>{range}: {count}</title></rect><text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"middle\">{count}</text><text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\">{range}</text>",
            x + BAR / 2.0,
            y - 4.0,
            x + BAR / 2.0,
            PLOT + 34.0
        );
    }
    svg.push_str("</svg>");
    svg
}

fn group_rows(groups: &BTreeMap<String, GroupScore>) -> Vec<(String, f64, String)> {
    let mut rows: Vec<(&String, &GroupScore)> = groups.iter().collect();
    rows.sort_by(|a, b| a.1.avg.total_cmp(&b.1.avg).then_with(|| a.0.cmp(b.0)));
    rows.into_iter()
        .map(|(name, g)| {
            let note = if g.hard_fails > 0 {
                format!("({} tests, {} hard fails)", g.tests, g.hard_fails)
            } else {
                format!("({} tests)", g.tests)
            };
            (name.clone(), g.avg, note)
        })
        .collect()
}

fn group_section(out: &mut String, title: &str, key: &str, groups: &BTreeMap<String, GroupScore>) {
    if groups.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<h2>{title}</h2>\n<p class=\"meta\">Worst first.</p>\n{}\n<table><thead><tr><th>{key}</th><th class=\"num\">Avg score</th><th class=\"num\">Tests</th><th class=\"num\">Hard fails</th></tr></thead><tbody>\n",
        bars(&group_rows(groups))
    );
    for (name, score, _) in group_rows(groups) {
        let g = &groups[&name];
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num {}\">{score:.1}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&name),
            score_class(score),
            g.tests,
            g.hard_fails
        );
    }
    out.push_str("</tbody></table>\n");
}

/// A case's stored verdict as a badge (`passed`, `failed`, `error`; the outcome in
/// `data-verdict`, the failed checks in its title): the report's and the web UI's.
pub fn verdict_badge(verdict: &Verdict) -> String {
    crate::verdict::html_badge(verdict)
}

/// The report's content, `<div class="report">…</div>`, for [`render`].
pub fn body(log: &RunLog) -> String {
    body_with(log, &NoLinks)
}

/// [`body`] with every case id linked through `links` (the web UI's run page).
pub fn body_with(log: &RunLog, links: &dyn CaseLinks) -> String {
    let s = &log.summary;
    let verdicts = log.verdicts();
    let mut out = String::from("<div class=\"report\">\n");
    // The regression gate's verdict sits beside health: a run can be healthy and still have
    // regressed against its baseline.
    let gate = log
        .baseline
        .as_ref()
        .and_then(|d| d.gate.as_ref())
        .map(|g| {
            if g.passed {
                " <span class=\"gate gate-pass\" title=\"no regression rule broken against the baseline\">regression gate passed</span>".to_owned()
            } else {
                format!(
                    " <span class=\"gate gate-fail\" title=\"{}\">regression gate FAILED</span>",
                    escape(&g.reasons.join("; "))
                )
            }
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "<h1>Run <code>{}</code> <span class=\"health h-{}\" title=\"health\">{}</span>{gate}</h1>",
        escape(&log.run_id),
        s.health_status,
        s.health_status
    );
    let banks: Vec<&str> = log.filters.banks.iter().map(|b| b.key()).collect();
    let mut meta = format!(
        "{} · project <code>{}</code> · banks {} · {:.1} s · assay {}",
        escape(&log.timestamp),
        escape(&log.project),
        banks.join(", "),
        log.duration_ms as f64 / 1000.0,
        escape(&log.assay_version)
    );
    if let Some(t) = &log.filters.test {
        let _ = write!(meta, " · case <code>{}</code>", escape(t));
    }
    if !log.filters.tests.is_empty() {
        let _ = write!(meta, " · {} cases by id", log.filters.tests.len());
    }
    if let Some(t) = &log.filters.topic {
        let _ = write!(meta, " · topic <code>{}</code>", escape(t));
    }
    if let Some(c) = &log.filters.changed_since {
        let _ = write!(
            meta,
            " · partial run: changed since <code>{}</code>",
            escape(&c.reference)
        );
    }
    if let Some(n) = log.filters.drafts {
        let _ = write!(meta, " · {n} pending draft(s) included");
    }
    for (k, v) in &log.setup {
        let _ = write!(meta, " · {} <code>{}</code>", escape(k), escape(v));
    }
    let _ = writeln!(out, "<p class=\"meta\">{meta}</p>");
    let _ = writeln!(
        out,
        "<div class=\"cards\"><div class=\"card\"><b class=\"{}\">{:.1}</b><span>weighted score</span></div><div class=\"card\"><b>{}</b><span>health</span></div><div class=\"card\"><b>{}</b><span>tests</span></div><div class=\"card\"><b>{}</b><span>passed</span></div><div class=\"card\"><b>{}</b><span>failed</span></div><div class=\"card\"><b>{}</b><span>hard fails</span></div><div class=\"card\"><b>{}</b><span>critical failures</span></div><div class=\"card\"><b>{}</b><span>errors</span></div></div>",
        score_class(s.combined_score),
        s.combined_score,
        s.health_status,
        s.total_tests,
        verdicts.all.passed,
        verdicts.all.failed,
        s.hard_fail_count,
        s.critical_failures.len(),
        s.error_count
    );

    if let Some(diff) = &log.baseline {
        let label = diff
            .label
            .clone()
            .unwrap_or_else(|| format!("run {}", diff.before.run_id));
        out.push_str(&crate::rundiff::html_with(diff, &label, links));
    }
    critical(&mut out, log, links);
    errors(&mut out, log, links);
    components(&mut out, log);
    charts(&mut out, log);
    if let Some(sem) = &log.semantic {
        group_section(
            &mut out,
            "Topic scores (semantic)",
            "Topic",
            &sem.topic_scores,
        );
        if let Some(run) = &sem.ir {
            out.push_str("<h2>Retrieval metrics (semantic)</h2>\n<p class=\"meta\">Over each case's ranked list (the selection, then the other candidates; 15 at most); relevance 2 for primary, 1 for secondary entities.</p>\n<table><thead><tr><th>Topic</th><th class=\"num\">Cases</th><th class=\"num\">Recall@3</th><th class=\"num\">Recall@6</th><th class=\"num\">Recall@15</th><th class=\"num\">MRR</th><th class=\"num\">nDCG@3</th><th class=\"num\">nDCG@6</th><th class=\"num\">nDCG@15</th></tr></thead><tbody>\n");
            let rows = std::iter::once(("All".to_owned(), run))
                .chain(sem.topic_ir.iter().map(|(t, s)| (t.clone(), s)));
            for (name, ir) in rows {
                let m = &ir.mean;
                let _ = writeln!(
                    out,
                    "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td></tr>",
                    escape(&name),
                    ir.cases,
                    m.recall_at_3,
                    m.recall_at_6,
                    m.recall_at_15,
                    m.mrr,
                    m.ndcg_at_3,
                    m.ndcg_at_6,
                    m.ndcg_at_15
                );
            }
            out.push_str("</tbody></table>\n");
        }
    }
    if let Some(src) = &s.expectation_sources {
        let _ = writeln!(
            out,
            "<h2>Expectation sources</h2>\n<table><thead><tr><th>Source</th><th class=\"num\">Tests</th></tr></thead><tbody><tr><td>original</td><td class=\"num\">{}</td></tr><tr><td>opus</td><td class=\"num\">{}</td></tr><tr><td>human_override</td><td class=\"num\">{}</td></tr></tbody></table>",
            src.original, src.opus, src.human_override
        );
    }
    if let Some(st) = &log.state {
        group_section(
            &mut out,
            "Handler scores (state)",
            "Handler",
            &st.handler_scores,
        );
    }
    if let Some(p) = &log.pattern {
        group_section(
            &mut out,
            "Pattern type scores",
            "Pattern type",
            &p.pattern_type_scores,
        );
    }
    if let Some(a) = &log.answer {
        out.push_str("<h2>Answer metrics</h2>\n<ul class=\"answer-metrics\">\n");
        for line in crate::answer::metric_lines(a) {
            let _ = writeln!(out, "<li>{}</li>", escape(&line));
        }
        out.push_str("</ul>\n");
        group_section(&mut out, "Topic scores (answer)", "Topic", &a.topic_scores);
    }
    if let Some(c) = &log.filters.changed_since {
        let _ = writeln!(
            out,
            "<p class=\"meta changed-since\">{}</p>",
            escape(&crate::common::changed_line(c))
        );
    }
    failures(&mut out, log, links);
    stale(&mut out, log, links);
    out.push_str(&crate::limits::html(&log.rate_limits, escape));
    if !log.warnings.is_empty() {
        out.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in &log.warnings {
            let _ = writeln!(out, "<li>{}</li>", escape(w));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</div>\n");
    out
}

/// The "Stale cases" section: each case whose entities were edited since its reference point,
/// with the fields that changed.
fn stale(out: &mut String, log: &RunLog, links: &dyn CaseLinks) {
    use crate::common::{STALE_SHOWN, stale_fields, stale_versions};
    if log.stale.is_empty() {
        return;
    }
    let total = log.stale.len() + log.stale_more;
    let _ = writeln!(
        out,
        "<h2 id=\"stale\">Stale cases</h2>\n<p class=\"meta\">{total} case(s) name an entity edited since the version the case records (provenance) or since the accepted run: check that their expectations still hold.</p>\n<table class=\"stale\"><thead><tr><th>Case</th><th>Bank</th><th>Entity</th><th>Versions</th><th>Changed fields (old → new)</th><th>Compared with</th></tr></thead><tbody>"
    );
    for c in log.stale.iter().take(STALE_SHOWN) {
        for e in &c.entities {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                case_id(links, c.bank, &c.test_id),
                c.bank.key(),
                escape(&e.entity_id),
                escape(&stale_versions(e)),
                escape(&stale_fields(e)),
                e.reference.as_str()
            );
        }
    }
    out.push_str("</tbody></table>\n");
    let shown = STALE_SHOWN.min(log.stale.len());
    if total > shown {
        let _ = writeln!(
            out,
            "<p class=\"meta\">… and {} more stale case(s) (the RunLog's <code>stale</code> lists up to {}).</p>",
            total - shown,
            assay_core::runlog::STALE_LISTED
        );
    }
}

fn critical(out: &mut String, log: &RunLog, links: &dyn CaseLinks) {
    let s = &log.summary;
    if s.critical_failures.is_empty() {
        return;
    }
    let answers = select::answer_critical(log);
    let what = if answers.is_empty() {
        "crisis detection is wrong"
    } else {
        "a critical case failed"
    };
    let _ = writeln!(
        out,
        "<section class=\"critical\" id=\"critical\"><h2>Critical failures</h2>\n<p><strong>{} critical failure(s): {what}. Fix these before anything else.</strong></p>\n<ul>",
        s.critical_failures.len()
    );
    for r in answers {
        let _ = writeln!(
            out,
            "<li><strong>{}</strong> (answer): “{}” — {}</li>",
            case_id(links, BankType::Answer, &r.test_id),
            escape(&r.message),
            escape(&r.failures.join("; "))
        );
    }
    {
        for r in select::critical(log) {
            let what = select::critical_what(r, ids);
            let _ = write!(
                out,
                "<li><strong>{}</strong> ({}): “{}” — {what}",
                case_id(links, BankType::Pattern, &r.test_id),
                escape(&r.pattern_type),
                escape(&r.prompt)
            );
            if !r.crisis_matches.is_empty() {
                out.push_str("<ul>");
                for m in &r.crisis_matches {
                    let _ = write!(
                        out,
                        "<li>rule <code>{}</code> matched “{}”</li>",
                        escape(&m.pattern),
                        escape(&m.matched_text)
                    );
                }
                out.push_str("</ul>");
            }
            out.push_str("</li>\n");
        }
    }
    out.push_str("</ul></section>\n");
}

fn errors(out: &mut String, log: &RunLog, links: &dyn CaseLinks) {
    if log.summary.error_count == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "<h2>Errors</h2>\n<p>{} case(s) could not be scored because of infrastructure errors; they are left out of every average.</p>\n<ul>",
        log.summary.error_count
    );
    let listed = select::errored(log);
    for e in &listed {
        // Semantic errors read as they always have; other banks are named.
        let bank = match e.bank {
            BankType::Semantic => String::new(),
            b => format!(" ({})", b.key()),
        };
        let _ = writeln!(
            out,
            "<li data-bank=\"{}\" data-verdict=\"error\"><strong>{}</strong>{bank}: {}</li>",
            e.bank.key(),
            case_id(links, e.bank, e.test_id),
            escape(e.error)
        );
    }
    if listed.len() < log.summary.error_count {
        let _ = writeln!(
            out,
            "<li>… and {} more, in the run log{}</li>",
            log.summary.error_count - listed.len(),
            escape(&select::run_log_name(log))
        );
    }
    out.push_str("</ul>\n");
}

fn components(out: &mut String, log: &RunLog) {
    let s = &log.summary;
    let verdicts = log.verdicts();
    out.push_str("<h2>Summary</h2>\n<table><thead><tr><th>Component</th><th class=\"num\">Score</th><th class=\"num\">Tests</th><th class=\"num\">Passed</th><th class=\"num\">Failed</th><th class=\"num\">Errors</th><th class=\"num\">Hard fails</th><th class=\"num\">Weight</th></tr></thead><tbody>\n");
    for (bank, name, counts) in select::bank_rows(log) {
        let score = s.component_scores.get(bank.key()).copied().flatten();
        let weight = s
            .weights
            .get(bank.key())
            .map_or_else(|| "—".to_owned(), |w| format!("{:.1}%", w * 100.0));
        let v = verdicts.of_bank(bank);
        let Some((tests, hard)) = counts else {
            let _ = writeln!(
                out,
                "<tr><td>{name}</td><td class=\"num\">not run</td><td class=\"num\">—</td><td class=\"num\">—</td><td class=\"num\">—</td><td class=\"num\">—</td><td class=\"num\">—</td><td class=\"num\">—</td></tr>"
            );
            continue;
        };
        let score = score.map_or_else(
            || "<td class=\"num\">not scored</td>".to_owned(),
            |score| format!("<td class=\"num {}\">{score:.1}</td>", score_class(score)),
        );
        let _ = writeln!(
            out,
            "<tr><td>{name}</td>{score}<td class=\"num\">{tests}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{hard}</td><td class=\"num\">{weight}</td></tr>",
            v.passed, v.failed, v.errors
        );
    }
    let _ = writeln!(
        out,
        "<tr><th>Combined</th><th class=\"num\">{:.1}</th><th class=\"num\">{}</th><th class=\"num\">{}</th><th class=\"num\">{}</th><th class=\"num\">{}</th><th class=\"num\">{}</th><th></th></tr></tbody></table>",
        s.combined_score,
        s.total_tests,
        verdicts.all.passed,
        verdicts.all.failed,
        verdicts.all.errors,
        s.hard_fail_count
    );
    if !verdicts.rules.is_empty() {
        out.push_str("<h2>Failed cases by rule</h2>\n<table><thead><tr><th>Rule</th><th class=\"num\">Cases</th><th>First cases</th><th>Most often</th></tr></thead><tbody>\n");
        for r in &verdicts.rules {
            let (ids, named) =
                crate::verdict::rule_cells(r, |i| format!("<code>{}</code>", escape(i)), escape);
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td class=\"num\">{}</td><td>{ids}</td><td>{named}</td></tr>",
                r.rule.label(),
                r.cases,
            );
        }
        out.push_str("</tbody></table>\n");
    }
}

fn charts(out: &mut String, log: &RunLog) {
    let Some(sem) = &log.semantic else {
        return;
    };
    let buckets: Vec<(&str, usize)> = sem.score_distribution.in_order().collect();
    out.push_str("<h2>Score distribution (semantic)</h2>\n<div class=\"charts\">");
    let _ = write!(
        out,
        "<figure><figcaption>Cases per score range</figcaption>{}</figure>",
        histogram(&buckets)
    );
    out.push_str("</div>\n");
}

fn breakdown(out: &mut String, b: &Breakdown) {
    if b.primary_fail == Some(true) {
        let _ = writeln!(
            out,
            "<li class=\"unwanted\">hard fail: {}</li>",
            escape(b.reason.as_deref().unwrap_or("primary expectation not met"))
        );
    }
    if let Some(p) = &b.secondary_missing {
        let _ = writeln!(
            out,
            "<li>{} secondary missing: {}</li>",
            p.penalty,
            ids(&p.items)
        );
    }
    if let Some(p) = &b.false_positives {
        let _ = writeln!(
            out,
            "<li>{} false positives: {}</li>",
            p.penalty,
            ids(&p.items)
        );
    }
    if let Some(p) = &b.rank_violations {
        let items: Vec<String> = p
            .items
            .iter()
            .map(|v| {
                format!(
                    "<code>{}</code> (#{}) should rank above <code>{}</code> (#{})",
                    escape(&v.expected_higher),
                    v.actual_higher_rank,
                    escape(&v.expected_lower),
                    v.actual_lower_rank
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "<li>{} rank violations: {}</li>",
            p.penalty,
            items.join("; ")
        );
    }
    if let Some(p) = &b.wrong_handlers {
        let _ = writeln!(
            out,
            "<li>{} wrong handlers: {}</li>",
            p.penalty,
            ids(&p.items)
        );
    }
}

/// A case's section head: its id, name, score and verdict badge.
fn case_head(
    out: &mut String,
    links: &dyn CaseLinks,
    bank: BankType,
    (id, name): (&str, &str),
    score: Option<u32>,
    verdict: &Verdict,
) {
    let title = if name.is_empty() {
        String::new()
    } else {
        format!(": {}", escape(name))
    };
    let score = score.map_or_else(
        || "not scored".to_owned(),
        |score| {
            format!(
                "<span class=\"{}\">{score}</span> ({})",
                score_class(f64::from(score)),
                interpret(score)
            )
        },
    );
    let _ = writeln!(
        out,
        "<section class=\"case\" id=\"case-{}\" data-bank=\"{}\"><h3>{}{title} — {score} {}</h3>",
        escape(id),
        bank.key(),
        case_id(links, bank, id),
        crate::verdict::html_badge(verdict)
    );
}

fn expectation_of(e: &ExpectationSet, entity: &str) -> &'static str {
    if e.expected_primary.iter().any(|x| x == entity) {
        "primary"
    } else if e.expected_secondary.iter().any(|x| x == entity) {
        "secondary"
    } else if e.not_expected.iter().any(|x| x == entity) {
        "not expected"
    } else {
        ""
    }
}

fn semantic_case(out: &mut String, r: &SemanticCaseResult, links: &dyn CaseLinks) {
    case_head(
        out,
        links,
        BankType::Semantic,
        (&r.test_id, &r.name),
        r.score,
        &r.verdict(),
    );
    let lost: Vec<String> = r
        .lost
        .iter()
        .map(|l| {
            let at = match l.lost_at {
                LostAt::NotRetrieved => "not retrieved",
                LostAt::DroppedByReranker => "retrieved but not selected",
            };
            match &l.detail {
                Some(d) => format!(
                    "<code>{}</code> ({at}: {})",
                    escape(&l.entity_id),
                    escape(d)
                ),
                None => format!("<code>{}</code> ({at})", escape(&l.entity_id)),
            }
        })
        .collect();
    let _ = writeln!(
        out,
        "<ul><li><strong>Prompt:</strong> “{}”</li><li><strong>Topics:</strong> {}</li><li><strong>Expected primary:</strong> {}</li><li><strong>Expected secondary:</strong> {}</li><li><strong>Selected:</strong> {}</li><li><strong>Lost:</strong> {}</li><li><strong>Expectation source:</strong> {}</li>",
        escape(&r.prompt),
        escape(&r.topics.join(", ")),
        ids(&r.expectations.expected_primary),
        ids(&r.expectations.expected_secondary),
        ids(&r.selections),
        if lost.is_empty() {
            "—".to_owned()
        } else {
            lost.join(", ")
        },
        escape(&r.expectation_source)
    );
    crate::verdict::html_items(out, &r.verdict());
    breakdown(out, &r.breakdown);
    out.push_str("</ul>\n");
    if !r.candidates.is_empty() {
        out.push_str("<table><thead><tr><th class=\"num\">#</th><th>Candidate</th><th class=\"num\">Similarity</th><th>Selected</th><th>Expectation</th></tr></thead><tbody>\n");
        for (i, c) in r.candidates.iter().enumerate() {
            let selected = r
                .selections
                .iter()
                .position(|s| s == &c.entity_id)
                .map_or_else(String::new, |p| format!("#{}", p + 1));
            let expectation = expectation_of(&r.expectations, &c.entity_id);
            let class = match (expectation, selected.is_empty()) {
                ("not expected", false) => " class=\"unwanted\"",
                ("primary" | "secondary", _) => " class=\"exp\"",
                _ => "",
            };
            let _ = writeln!(
                out,
                "<tr{class}><td class=\"num\">{}</td><td><code>{}</code></td><td class=\"num\">{:.3}</td><td class=\"sel\">{selected}</td><td>{expectation}</td></tr>",
                i + 1,
                escape(&c.entity_id),
                c.similarity
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</section>\n");
}

fn partial_note(out: &mut String, log: &RunLog, bank: BankType, shown: usize) {
    if let Some(note) = select::partial_note(log, bank, shown) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&note));
    }
}

fn state_case(out: &mut String, r: &StateCaseResult, links: &dyn CaseLinks) {
    case_head(
        out,
        links,
        BankType::State,
        (&r.test_id, &r.name),
        Some(r.score),
        &r.verdict(),
    );
    let state = serde_json::to_string(&r.user_state).unwrap_or_default();
    let _ = writeln!(
        out,
        "<ul><li><strong>User state:</strong> <code>{}</code></li><li><strong>Expected:</strong> {}</li><li><strong>Triggered:</strong> {}</li>",
        escape(&state),
        ids(&r.expected_handlers),
        ids(&r.triggered_handlers)
    );
    crate::verdict::html_items(out, &r.verdict());
    breakdown(out, &r.breakdown);
    out.push_str("</ul></section>\n");
}

fn pattern_case(out: &mut String, r: &PatternCaseResult, links: &dyn CaseLinks) {
    case_head(
        out,
        links,
        BankType::Pattern,
        (&r.test_id, &r.name),
        Some(r.score),
        &r.verdict(),
    );
    let critical = if r.is_critical_failure {
        " <strong class=\"unwanted\">critical failure</strong>"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "<ul><li><strong>Prompt:</strong> “{}”{critical}</li><li><strong>Type:</strong> {}</li><li><strong>Expected:</strong> {}</li><li><strong>Matched:</strong> {}</li>",
        escape(&r.prompt),
        escape(&r.pattern_type),
        ids(&r.expected_matches),
        ids(&r.matched_entities)
    );
    crate::verdict::html_items(out, &r.verdict());
    breakdown(out, &r.breakdown);
    out.push_str("</ul></section>\n");
}

fn always_case(out: &mut String, r: &AlwaysCaseResult, links: &dyn CaseLinks) {
    case_head(
        out,
        links,
        BankType::Always,
        (&r.test_id, &r.name),
        Some(r.score),
        &r.verdict(),
    );
    let _ = writeln!(
        out,
        "<ul><li><strong>User type:</strong> <code>{}</code></li><li><strong>Missing:</strong> {}</li><li><strong>Loaded:</strong> {}</li>",
        escape(&r.user_type),
        ids(&r.missing),
        ids(&r.loaded_entities)
    );
    crate::verdict::html_items(out, &r.verdict());
    breakdown(out, &r.breakdown);
    out.push_str("</ul></section>\n");
}

/// One case as the report shows a failing one (`<section class="case">`): what it asked, what
/// was expected and what came back, and what cost it points. The web UI's case page.
pub fn case_section(record: &CaseRecord) -> String {
    let mut out = String::new();
    match record {
        CaseRecord::Semantic(r) => semantic_case(&mut out, r, &NoLinks),
        CaseRecord::State(r) => state_case(&mut out, r, &NoLinks),
        CaseRecord::Pattern(r) => pattern_case(&mut out, r, &NoLinks),
        CaseRecord::Always(r) => always_case(&mut out, r, &NoLinks),
        CaseRecord::Answer(r) => crate::answer::html_case(&mut out, r),
    }
    out
}

fn failures(out: &mut String, log: &RunLog, links: &dyn CaseLinks) {
    let failed = select::semantic_failures(log);
    if !failed.is_empty() {
        out.push_str("<h2>Semantic cases: failed or below 100</h2>\n");
        partial_note(out, log, BankType::Semantic, failed.len());
        for r in failed {
            semantic_case(out, r, links);
        }
    }
    let failed = select::state_failures(log);
    if !failed.is_empty() {
        out.push_str("<h2>State cases: failed or below 100</h2>\n");
        partial_note(out, log, BankType::State, failed.len());
        for r in failed {
            state_case(out, r, links);
        }
    }
    let failed = select::pattern_failures(log);
    if !failed.is_empty() {
        out.push_str("<h2>Pattern cases: failed or below 100</h2>\n");
        partial_note(out, log, BankType::Pattern, failed.len());
        for r in failed {
            pattern_case(out, r, links);
        }
    }
    let failed = select::always_failures(log);
    if !failed.is_empty() {
        out.push_str("<h2>Always cases: failed or below 100</h2>\n");
        partial_note(out, log, BankType::Always, failed.len());
        for r in failed {
            always_case(out, r, links);
        }
    }
    let failed = select::answer_failures(log);
    if !failed.is_empty() {
        out.push_str("<h2>Answer cases: failed or below 100</h2>\n");
        partial_note(out, log, BankType::Answer, failed.len());
        for r in failed {
            crate::answer::html_case_with(out, r, links);
        }
    }
    // An error is not a failure: the answer cases that errored are shown apart.
    let errored = select::answer_errors(log);
    if !errored.is_empty() {
        out.push_str("<h2>Answer test errors</h2>\n<p class=\"note\">Not scored, and left out of every average: what each case got before the error.</p>\n");
        for r in errored {
            crate::answer::html_case_with(out, r, links);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use assay_core::bank::{BankType, ExpectationSet};
    use assay_core::runlog::{
        AlwaysCaseResult, AlwaysResults, BankResults, Candidate, CrisisMatch, LostEntity,
        PatternCaseResult, PatternResults, RunFilters, SCHEMA_VERSION, SemanticResults, Weights,
    };
    use assay_core::scoring::Penalty;

    /// A small run with a critical failure, a semantic failure with candidates, and `inject`
    /// in every string a user can put into a run.
    pub(crate) fn sample(inject: &str) -> RunLog {
        let sem = SemanticResults::from_results(vec![
            SemanticCaseResult {
                test_id: format!("S-1{inject}"),
                name: format!("custody{inject}"),
                category: "one_liner".into(),
                topics: vec![format!("custody{inject}"), "money".into()],
                prompt: format!("my ex keeps changing pickups {inject}"),
                candidates: vec![
                    Candidate {
                        entity_id: format!("kb_pickups{inject}"),
                        similarity: 0.81,
                    },
                    Candidate {
                        entity_id: "kb_money".into(),
                        similarity: 0.52,
                    },
                    Candidate {
                        entity_id: "kb_schedule".into(),
                        similarity: 0.44,
                    },
                ],
                selections: vec!["kb_money".into()],
                expectations: ExpectationSet {
                    expected_primary: vec![format!("kb_pickups{inject}")],
                    expected_secondary: vec!["kb_schedule".into()],
                    not_expected: vec!["kb_money".into()],
                    rank_check: vec![],
                },
                expectation_source: "original".into(),
                primary_pass: false,
                secondary_missing: vec!["kb_schedule".into()],
                false_positives: vec!["kb_money".into()],
                rank_violations: vec![],
                lost: vec![LostEntity {
                    entity_id: format!("kb_pickups{inject}"),
                    lost_at: LostAt::DroppedByReranker,
                    detail: None,
                }],
                score: Some(0),
                breakdown: Breakdown {
                    primary_fail: Some(true),
                    reason: Some(format!("missing kb_pickups{inject}")),
                    false_positives: Some(Penalty {
                        items: vec!["kb_money".into()],
                        count: 1,
                        penalty: -20,
                    }),
                    ..Breakdown::default()
                },
                is_hard_fail: true,
                error: None,
                ir: None,
                repeat_scores: Vec::new(),
                unstable: false,
                duration_ms: None,
                verdict: None,
            },
            SemanticCaseResult {
                test_id: "S-2".into(),
                name: String::new(),
                category: "one_liner".into(),
                topics: vec!["money".into()],
                prompt: "who pays for school trips".into(),
                candidates: vec![Candidate {
                    entity_id: "kb_money".into(),
                    similarity: 0.9,
                }],
                selections: vec!["kb_money".into()],
                expectations: ExpectationSet {
                    expected_primary: vec!["kb_money".into()],
                    ..ExpectationSet::default()
                },
                expectation_source: "original".into(),
                primary_pass: true,
                secondary_missing: vec![],
                false_positives: vec![],
                rank_violations: vec![],
                lost: vec![],
                score: Some(100),
                breakdown: Breakdown::default(),
                is_hard_fail: false,
                error: None,
                ir: None,
                repeat_scores: Vec::new(),
                unstable: false,
                duration_ms: None,
                verdict: None,
            },
        ]);
        let pattern = PatternResults::from_results(vec![PatternCaseResult {
            test_id: format!("P-1{inject}"),
            name: "crisis".into(),
            prompt: format!("I can't go on {inject}"),
            pattern_type: "crisis".into(),
            matched_entities: vec![],
            crisis_matches: vec![CrisisMatch {
                pattern: format!("go on{inject}"),
                matched_text: format!("go on{inject}"),
                entities: vec![],
            }],
            keyword_matches: vec![],
            expected_matches: vec!["crisis_support".into()],
            expected_secondary: vec![],
            not_expected_matches: vec![],
            primary_pass: false,
            secondary_missing: vec![],
            false_positives: vec![],
            score: 0,
            breakdown: Breakdown {
                primary_fail: Some(true),
                reason: Some("crisis_support not matched".into()),
                ..Breakdown::default()
            },
            is_hard_fail: true,
            is_critical: true,
            is_critical_failure: true,
            duration_ms: None,
            verdict: None,
        }]);
        let always = AlwaysResults::from_results(vec![AlwaysCaseResult {
            test_id: "A-1".into(),
            name: String::new(),
            user_type: format!("PARENT{inject}"),
            loaded_entities: vec!["persona".into()],
            expected_always: vec!["persona".into()],
            missing: vec![],
            score: 100,
            breakdown: Breakdown::default(),
            is_hard_fail: false,
            duration_ms: None,
            verdict: None,
        }]);
        let banks = BankResults {
            semantic: Some(sem),
            state: None,
            pattern: Some(pattern),
            always: Some(always),
            answer: None,
        };
        let summary = banks.summarize(&Weights::default(), None);
        RunLog {
            schema_version: SCHEMA_VERSION,
            assay_version: "0.1.0".into(),
            run_id: format!("run-1{inject}"),
            project: format!("examples/coparent{inject}"),
            timestamp: "2026-11-25T09:00:00Z".into(),
            duration_ms: 1234,
            filters: RunFilters {
                banks: vec![BankType::Semantic, BankType::Pattern, BankType::Always],
                test: None,
                tests: Vec::new(),
                topic: Some(format!("custody{inject}")),
                changed_since: None,
                drafts: None,
                banks_left_out: Vec::new(),
            },
            setup: BTreeMap::from([("embedder".to_owned(), format!("builtin/lexical{inject}"))]),
            summary,
            semantic: banks.semantic,
            state: None,
            pattern: banks.pattern,
            always: banks.always,
            answer: None,
            warnings: vec![format!("unknown field{inject}")],
            settings: std::collections::BTreeMap::new(),
            kb: assay_core::rundiff::KbFingerprint::default(),
            baseline: None,
            rate_limits: Vec::new(),
            cases: None,
            notable_cases: None,
            shard: None,
            merged: None,
            stale: Vec::new(),
            stale_more: 0,
        }
    }

    #[test]
    fn stale_cases_and_changed_since_are_shown_escaped() {
        use assay_core::runlog::{
            ChangedSince, StaleCase, StaleChange, StaleEntity, StaleReference,
        };
        let inject = "<script>alert(1)</script>";
        let mut log = sample("");
        assert!(
            !render(&log).contains("Stale cases"),
            "no section without stale cases"
        );
        log.stale = vec![StaleCase {
            bank: BankType::Semantic,
            test_id: format!("S-1{inject}"),
            entities: vec![
                StaleEntity {
                    entity_id: format!("welcome{inject}"),
                    since_version: Some(1),
                    current_version: Some(3),
                    fields: vec!["title".into(), "keywords".into()],
                    changes: Vec::new(),
                    reference: StaleReference::Provenance,
                },
                StaleEntity {
                    entity_id: "gone".into(),
                    since_version: None,
                    current_version: None,
                    fields: vec![],
                    changes: Vec::new(),
                    reference: StaleReference::Accepted,
                },
                StaleEntity {
                    entity_id: "welcome_back".into(),
                    since_version: Some(2),
                    current_version: Some(4),
                    fields: vec!["title".into(), "priority".into()],
                    changes: vec![
                        StaleChange::new(
                            "title",
                            Some(&serde_json::json!(format!("Old{inject}"))),
                            Some(&serde_json::json!("New")),
                        ),
                        StaleChange::new(
                            "priority",
                            Some(&serde_json::json!(50)),
                            Some(&serde_json::json!(77)),
                        ),
                    ],
                    reference: StaleReference::Provenance,
                },
            ],
        }];
        log.stale_more = 4;
        log.filters.changed_since = Some(ChangedSince {
            reference: format!("latest{inject}"),
            run_id: "r0".into(),
            entities: vec!["welcome".into()],
            entity_count: 1,
            ran: 3,
            skipped: 9,
        });
        let html = render(&log);
        assert!(!html.contains("<script"), "a script tag got through");
        let section = &html[html.find("<h2 id=\"stale\">Stale cases</h2>").unwrap()..];
        assert!(
            section.contains("5 case(s) name an entity edited"),
            "{section}"
        );
        assert!(section.contains("v1 → v3") && section.contains("title, keywords"));
        assert!(section.contains("the accepted run → removed"));
        // Each field's old and new value, escaped.
        assert!(
            section.contains(
                "title: Old&lt;script&gt;alert(1)&lt;/script&gt; → New; priority: 50 → 77"
            ),
            "{section}"
        );
        assert!(section.contains("… and 4 more stale case(s)"));
        assert!(html.contains("partial run: changed since <code>latest&lt;script&gt;"));
        assert!(html.contains("ran 3 cases that name them, skipped 9"));
    }

    #[test]
    fn report_snapshot() {
        insta::assert_snapshot!(render(&sample("")));
    }

    #[test]
    fn critical_failures_come_first() {
        let html = render(&sample(""));
        let critical = html.find("Critical failures").unwrap();
        assert!(critical < html.find("<h2>Summary</h2>").unwrap());
        assert!(critical < html.find("Semantic cases: failed or below 100").unwrap());
    }

    #[test]
    fn injected_markup_is_inert() {
        let inject = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";
        let html = render(&sample(inject));
        assert!(!html.contains("<script"), "a script tag got through");
        assert!(!html.contains("<img"), "an element got through");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        // Every place the injected text was put is escaped (prompt, ids, topics, warnings …).
        assert!(html.matches("&lt;img src=x onerror=alert(2)&gt;").count() >= 10);
    }

    #[test]
    fn self_contained() {
        let html = render(&sample(""));
        for needle in [
            "<script",
            "<link",
            "src=\"http",
            "href=\"http",
            "@import",
            "url(",
        ] {
            assert!(!html.contains(needle), "{needle}");
        }
        assert!(html.contains("<svg"));
    }
}
