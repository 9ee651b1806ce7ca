//! Renderings of a comparison of two runs ([`RunDiff`]): for the console (`assay run
//! --baseline`, `assay runs diff`), as a Markdown section and as an HTML section (the reports'
//! "Compared with" section and the web UI's run diff page). All three say the same things in
//! the same order: what differs in the setup first (why results may differ), then regressions
//! (new failures and new errors by verdict, new critical failures, new hard fails, the
//! largest drops), topics, improvements (cases fixed first), the
//! paired comparison with its interval, and the regression gate.

use std::fmt::Write as _;

use assay_core::rundiff::{CaseChange, MetricChange, RunDiff, SettingChange};
use assay_core::stats::Verdict;

use crate::common::escape as esc;

/// How many cases of one group the console and the section list.
pub const SHOWN: usize = 5;

fn value(v: Option<&String>) -> String {
    v.map_or_else(|| "(not set)".to_owned(), Clone::clone)
}

fn setting(c: &SettingChange) -> String {
    format!(
        "{}: {} → {}",
        c.key,
        value(c.before.as_ref()),
        value(c.after.as_ref())
    )
}

fn score(v: Option<u32>) -> String {
    v.map_or_else(|| "–".to_owned(), |s| s.to_string())
}

fn case(c: &CaseChange) -> String {
    format!("{} ({} → {})", c.name(), score(c.before), score(c.after))
}

/// A metric's value (0–1) with two decimals, `–` when not a number.
fn metric_value(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "–".to_owned()
    }
}

/// A metric's change, signed, with two decimals.
fn metric_delta(m: &MetricChange) -> String {
    let d = m.delta();
    if d.is_finite() {
        format!("{d:+.2}")
    } else {
        "–".to_owned()
    }
}

/// `answer/A-1 faithfulness 1.00 → 0.25`.
fn metric_change(m: &MetricChange) -> String {
    format!(
        "{} {} {} → {}",
        m.name(),
        m.metric,
        metric_value(m.before),
        metric_value(m.after)
    )
}

/// The answer metrics that fell, then those that rose (each group in the diff's order:
/// the largest fall first, the smallest rise first, so rises are reversed here).
fn metric_falls_and_rises(d: &RunDiff) -> (Vec<&MetricChange>, Vec<&MetricChange>) {
    let falls = d
        .metric_changes
        .iter()
        .filter(|m| m.delta() < 0.0)
        .collect();
    let mut rises: Vec<&MetricChange> = d
        .metric_changes
        .iter()
        .filter(|m| m.delta() > 0.0)
        .collect();
    rises.reverse();
    (falls, rises)
}

fn names(list: &[String], n: usize) -> String {
    let shown = list.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if list.len() > n {
        format!("{shown}, and {} more", list.len() - n)
    } else {
        shown
    }
}

/// The setup differences in lines (settings and systems, then the knowledge base).
pub fn setup_lines(d: &RunDiff) -> Vec<String> {
    let mut lines: Vec<String> = d.setup_changes.iter().map(setting).collect();
    let kb = &d.kb_changes;
    if kb.differ {
        if kb.by_entity {
            let mut parts = Vec::new();
            if !kb.changed.is_empty() {
                parts.push(format!(
                    "{} changed ({})",
                    kb.changed.len(),
                    names(&kb.changed, SHOWN)
                ));
            }
            if !kb.added.is_empty() {
                parts.push(format!(
                    "{} added ({})",
                    kb.added.len(),
                    names(&kb.added, SHOWN)
                ));
            }
            if !kb.removed.is_empty() {
                parts.push(format!(
                    "{} removed ({})",
                    kb.removed.len(),
                    names(&kb.removed, SHOWN)
                ));
            }
            lines.push(format!("knowledge base: entities {}", parts.join("; ")));
        } else {
            lines.push("knowledge base: differs (not recorded entity by entity)".to_owned());
        }
    }
    lines
}

/// The paired comparison of the per-case scores in words: whether the mean change is a real
/// drop, a real gain or within noise, with its interval.
fn significance_line(d: &RunDiff) -> Option<String> {
    let s = d.significance.as_ref()?;
    let verdict = match s.verdict {
        Verdict::Better => "a real gain",
        Verdict::Worse => "a real drop",
        Verdict::NotDistinguishable => "within noise",
    };
    let i = &s.difference;
    Some(format!(
        "the mean per-case change is {verdict} ({:+.2} points, {:.0}% CI {:+.2} to {:+.2}, paired bootstrap over {} cases)",
        i.estimate,
        i.level * 100.0,
        i.low,
        i.high,
        i.n
    ))
}

/// The comparison's verdict, one coherent statement: the gate's outcome and the rule that
/// failed with its cases first, then the statistics as context (`None` without a gate or a
/// paired comparison). A gate that fails while the mean change is within noise says that the
/// failure rests on its rule, not on the average; a gate that passes over a real drop says
/// that no rule forbids it.
pub fn verdict(d: &RunDiff) -> Option<(String, Option<String>)> {
    let stats = significance_line(d);
    let worse = d
        .significance
        .as_ref()
        .is_some_and(|s| s.verdict == Verdict::Worse);
    let noise = d
        .significance
        .as_ref()
        .is_some_and(|s| s.verdict == Verdict::NotDistinguishable);
    let Some(g) = &d.gate else {
        return stats.map(|s| (capitalised(&s), None));
    };
    let head = if g.passed {
        "regression gate: passed (no rule broken)".to_owned()
    } else {
        format!("regression gate: FAILED: {}", g.reasons.join("; "))
    };
    let context = stats.map(|s| {
        if !g.passed && noise {
            format!("{s}: the gate failed on its rule, not on the average")
        } else if g.passed && worse {
            format!("{s}: no gate rule forbids it (max_score_drop would)")
        } else {
            s
        }
    });
    Some((head, context))
}

/// The line under the gate in a report: the statistics as context ("In context: …"), or, with
/// no gate, the statistics alone.
fn context_line(d: &RunDiff) -> Option<String> {
    match verdict(d)? {
        (_, Some(context)) if d.gate.is_some() => Some(format!("In context: {context}.")),
        (_, None) if d.gate.is_some() => None,
        (head, _) => Some(format!("{head}.")),
    }
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The comparison for a terminal, bounded: at most [`SHOWN`] cases a group, and where the rest
/// is. `baseline` names the baseline (a file or an id).
pub fn console(d: &RunDiff, baseline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Compared with {baseline} (started {}): combined score {:.1} → {:.1} ({:+.1})",
        d.before.timestamp, d.before.combined_score, d.after.combined_score, d.score_delta
    );
    if d.is_unchanged() {
        let _ = writeln!(
            out,
            "  no change: same settings, same knowledge base, every case scored as before"
        );
    } else {
        let setup = setup_lines(d);
        if !setup.is_empty() {
            let _ = writeln!(
                out,
                "  The runs differ in what was run (read the changes below against this):"
            );
            for line in &setup {
                let _ = writeln!(out, "    {line}");
            }
        }
        let c = &d.cases;
        let mut regressions = Vec::new();
        if !c.new_failures.is_empty() {
            regressions.push(format!("{} new failure(s)", c.new_failures.len()));
        }
        if !c.new_errors.is_empty() {
            regressions.push(format!("{} new error(s)", c.new_errors.len()));
        }
        if !c.new_critical.is_empty() {
            regressions.push(format!("{} new critical failure(s)", c.new_critical.len()));
        }
        if !c.new_hard_fails.is_empty() {
            regressions.push(format!("{} new hard fail(s)", c.new_hard_fails.len()));
        }
        if !c.worse.is_empty() {
            regressions.push(format!("{} case(s) worse", c.worse.len()));
        }
        let (falls, rises) = metric_falls_and_rises(d);
        if !falls.is_empty() {
            regressions.push(format!("{} answer metric(s) fell", falls.len()));
        }
        if regressions.is_empty() {
            let _ = writeln!(out, "  Regressions: none");
        } else {
            let _ = writeln!(out, "  Regressions: {}", regressions.join(", "));
        }
        for (title, list) in [
            ("new failures", &c.new_failures),
            ("new errors", &c.new_errors),
            ("new critical", &c.new_critical),
            ("new hard fails", &c.new_hard_fails),
            ("largest drops", &c.worse),
        ] {
            if list.is_empty() {
                continue;
            }
            let shown: Vec<String> = list.iter().take(SHOWN).map(case).collect();
            let more = list.len().saturating_sub(SHOWN);
            let _ = writeln!(
                out,
                "    {title}: {}{}",
                shown.join(", "),
                if more > 0 {
                    format!(", and {more} more")
                } else {
                    String::new()
                }
            );
        }
        if !falls.is_empty() {
            let shown: Vec<String> = falls.iter().take(SHOWN).map(|m| metric_change(m)).collect();
            let more = falls.len().saturating_sub(SHOWN);
            let _ = writeln!(
                out,
                "    answer metrics that fell: {}{}",
                shown.join(", "),
                if more > 0 {
                    format!(", and {more} more")
                } else {
                    String::new()
                }
            );
        }
        let topics: Vec<String> = d
            .topic_changes
            .iter()
            .take(SHOWN)
            .map(|t| match t.delta {
                Some(delta) => format!("{} {delta:+.1}", t.topic),
                None if t.after.is_none() => format!("{} (gone)", t.topic),
                None => format!("{} (new)", t.topic),
            })
            .collect();
        if !topics.is_empty() {
            let _ = writeln!(out, "  Topics: {}", topics.join(", "));
        }
        let mut gains = Vec::new();
        if !c.fixed.is_empty() {
            let shown: Vec<String> = c.fixed.iter().take(SHOWN).map(CaseChange::name).collect();
            gains.push(format!(
                "{} fixed (failed, now pass: {}{})",
                c.fixed.len(),
                shown.join(", "),
                if c.fixed.len() > SHOWN { ", …" } else { "" }
            ));
        }
        if !c.better.is_empty() {
            gains.push(format!("{} case(s) better", c.better.len()));
        }
        if !c.fixed_hard_fails.is_empty() {
            gains.push(format!("{} hard fail(s) fixed", c.fixed_hard_fails.len()));
        }
        if !rises.is_empty() {
            gains.push(format!("{} answer metric(s) rose", rises.len()));
        }
        if !gains.is_empty() {
            let _ = writeln!(out, "  Improvements: {}", gains.join(", "));
        }
        let mut other = Vec::new();
        if !c.added.is_empty() {
            other.push(format!("{} added", c.added.len()));
        }
        if !c.removed.is_empty() {
            other.push(format!("{} removed", c.removed.len()));
        }
        if !c.errored.is_empty() {
            other.push(format!("{} not comparable (errors)", c.errored.len()));
        }
        if !other.is_empty() {
            let _ = writeln!(out, "  Cases: {}", other.join(", "));
        }
    }
    if let Some((head, context)) = verdict(d) {
        let _ = writeln!(out, "  {head}");
        if let Some(context) = context {
            let _ = writeln!(out, "    in context: {context}");
        }
    }
    out
}

/// The comparison as a Markdown section (`## Compared with …`).
pub fn markdown(d: &RunDiff, baseline: &str) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## Compared with {baseline}\n");
    let _ = writeln!(
        md,
        "Baseline started {} · combined score {:.1} → {:.1} (**{:+.1}**)\n",
        d.before.timestamp, d.before.combined_score, d.after.combined_score, d.score_delta
    );
    if d.is_unchanged() {
        let _ = writeln!(
            md,
            "No change: same settings, same knowledge base, every case scored as before.\n"
        );
    }
    let setup = setup_lines(d);
    if !setup.is_empty() {
        let _ = writeln!(md, "**The runs differ in what was run:**\n");
        for line in &setup {
            let _ = writeln!(md, "- {line}");
        }
        md.push('\n');
    }
    if let Some(g) = &d.gate {
        let _ = writeln!(
            md,
            "**Regression gate: {}**{}\n",
            if g.passed {
                "passed (no rule broken)"
            } else {
                "FAILED"
            },
            if g.reasons.is_empty() {
                String::new()
            } else {
                format!(" — {}", g.reasons.join("; "))
            }
        );
    }
    if let Some(line) = context_line(d) {
        let _ = writeln!(md, "{line}\n");
    }
    let c = &d.cases;
    for (title, list) in [
        ("New failures", &c.new_failures),
        ("New errors", &c.new_errors),
        ("New critical failures", &c.new_critical),
        ("New hard fails", &c.new_hard_fails),
        ("Worse", &c.worse),
        ("Better", &c.better),
        ("Fixed (failed, now pass)", &c.fixed),
        ("Hard fails fixed", &c.fixed_hard_fails),
        ("Not comparable (errors)", &c.errored),
        ("Added", &c.added),
        ("Removed", &c.removed),
    ] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(md, "### {title} ({})\n", list.len());
        let _ = writeln!(md, "| case | before | after | change |");
        let _ = writeln!(md, "|---|---:|---:|---:|");
        for ch in list {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                ch.name(),
                score(ch.before),
                score(ch.after),
                ch.delta
                    .map_or_else(|| "–".to_owned(), |x| format!("{x:+}"))
            );
        }
        md.push('\n');
    }
    if !d.metric_changes.is_empty() {
        let (falls, rises) = metric_falls_and_rises(d);
        let _ = writeln!(
            md,
            "### Answer metrics ({} fell, {} rose)\n",
            falls.len(),
            rises.len()
        );
        let _ = writeln!(md, "| case | metric | before | after | change |");
        let _ = writeln!(md, "|---|---|---:|---:|---:|");
        for m in falls.into_iter().chain(rises) {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                m.name(),
                m.metric,
                metric_value(m.before),
                metric_value(m.after),
                metric_delta(m)
            );
        }
        md.push('\n');
    }
    if !d.topic_changes.is_empty() {
        let _ = writeln!(md, "### Topics\n");
        let _ = writeln!(md, "| topic | before | after | change |");
        let _ = writeln!(md, "|---|---:|---:|---:|");
        for t in &d.topic_changes {
            let f = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"));
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                t.topic,
                f(t.before),
                f(t.after),
                t.delta
                    .map_or_else(|| "–".to_owned(), |x| format!("{x:+.1}"))
            );
        }
        md.push('\n');
    }
    md
}

/// A changed case's name (`bank/test_id`) as HTML: linked to the case's page in the run
/// compared when `links` has one (a removed case is not in that run: never linked).
fn html_case(c: &CaseChange, links: &dyn crate::common::CaseLinks, linked: bool) -> String {
    let href = assay_core::bank::BankType::from_key(&c.bank)
        .filter(|_| linked)
        .and_then(|bank| links.case(bank, &c.test_id));
    match href {
        Some(href) => format!("<a href=\"{}\">{}</a>", esc(&href), esc(&c.name())),
        None => esc(&c.name()),
    }
}

fn html_rows(
    h: &mut String,
    title: &str,
    id: &str,
    list: &[CaseChange],
    class: &str,
    links: &dyn crate::common::CaseLinks,
    linked: bool,
) {
    if list.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<h3 id=\"{id}\">{} ({})</h3><table class=\"grid\"><thead><tr><th>Case</th><th class=\"num\">Before</th><th class=\"num\">After</th><th class=\"num\">Change</th></tr></thead><tbody>",
        esc(title),
        list.len()
    );
    for c in list {
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num {class}\">{}</td></tr>",
            html_case(c, links, linked),
            score(c.before),
            score(c.after),
            c.delta.map_or_else(|| "–".to_owned(), |x| format!("{x:+}"))
        );
    }
    h.push_str("</tbody></table>");
}

/// The comparison as an HTML section (escaped; classes from the report's stylesheet): a
/// heading, [`html_overview`], then every changed case by group. The unchanged cases, when
/// the diff still has them, go in a closed `<details>`.
pub fn html(d: &RunDiff, baseline: &str) -> String {
    html_with(d, baseline, &crate::common::NoLinks)
}

/// [`html`] with the cases of the run compared linked through `links` (the web UI).
pub fn html_with(d: &RunDiff, baseline: &str, links: &dyn crate::common::CaseLinks) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<section id=\"compared\"><h2>Compared with {}</h2><p>Baseline started {} · combined score {:.1} → {:.1} (<b>{:+.1}</b>)</p>",
        esc(baseline),
        esc(&d.before.timestamp),
        d.before.combined_score,
        d.after.combined_score,
        d.score_delta
    );
    h.push_str(&html_overview_with(d, links));
    let c = &d.cases;
    let groups: [(&str, &str, &[CaseChange], &str); 7] = [
        ("Worse", "worse", &c.worse, "worse"),
        ("Better", "better", &c.better, "better"),
        ("Fixed (failed, now pass)", "fixed", &c.fixed, "better"),
        (
            "Hard fails fixed",
            "fixed_hard_fails",
            &c.fixed_hard_fails,
            "better",
        ),
        ("Not comparable (errors)", "errored", &c.errored, ""),
        ("Added", "added", &c.added, ""),
        ("Removed", "removed", &c.removed, ""),
    ];
    for (title, id, list, class) in groups {
        html_rows(&mut h, title, id, list, class, links, id != "removed");
    }
    if !c.unchanged.is_empty() {
        let _ = write!(
            h,
            "<details><summary>Unchanged ({})</summary>",
            c.unchanged.len()
        );
        html_rows(
            &mut h,
            "Unchanged",
            "unchanged",
            &c.unchanged,
            "",
            links,
            true,
        );
        h.push_str("</details>");
    }
    h.push_str("</section>");
    h
}

/// What a comparison says before its case lists, in HTML: "no change", what differs in the
/// setups, the regression gate, the paired comparison, new critical failures and new hard
/// fails, and the topics. The web UI's run diff page shows it above its case tables.
pub fn html_overview(d: &RunDiff) -> String {
    html_overview_with(d, &crate::common::NoLinks)
}

/// [`html_overview`] with the cases of the run compared linked through `links` (the web UI).
pub fn html_overview_with(d: &RunDiff, links: &dyn crate::common::CaseLinks) -> String {
    let mut h = String::new();
    if d.is_unchanged() {
        h.push_str("<p id=\"no-change\">No change: same settings, same knowledge base, every case scored as before.</p>");
    }
    let setup = setup_lines(d);
    if !setup.is_empty() {
        h.push_str("<div id=\"setup-changes\" class=\"notice warn\"><p><b>The runs differ in what was run:</b></p><ul>");
        for line in &setup {
            let _ = write!(h, "<li>{}</li>", esc(line));
        }
        h.push_str("</ul></div>");
    }
    if let Some(g) = &d.gate {
        let _ = write!(
            h,
            "<p id=\"regression-gate\"><b>Regression gate: {}</b>{}</p>",
            if g.passed {
                "passed (no rule broken)"
            } else {
                "FAILED"
            },
            if g.reasons.is_empty() {
                String::new()
            } else {
                format!(" — {}", esc(&g.reasons.join("; ")))
            }
        );
    }
    if let Some(line) = context_line(d) {
        let _ = write!(h, "<p id=\"significance\">{}</p>", esc(&line));
    }
    let c = &d.cases;
    html_rows(
        &mut h,
        "New failures",
        "new_failures",
        &c.new_failures,
        "worse",
        links,
        true,
    );
    html_rows(
        &mut h,
        "New errors",
        "new_errors",
        &c.new_errors,
        "worse",
        links,
        true,
    );
    html_rows(
        &mut h,
        "New critical failures",
        "new_critical",
        &c.new_critical,
        "worse",
        links,
        true,
    );
    html_rows(
        &mut h,
        "New hard fails",
        "new_hard_fails",
        &c.new_hard_fails,
        "worse",
        links,
        true,
    );
    html_metric_changes(&mut h, d, links);
    if !d.topic_changes.is_empty() {
        h.push_str("<h3 id=\"topics\">Topics</h3><table class=\"grid\"><thead><tr><th>Topic</th><th class=\"num\">Before</th><th class=\"num\">After</th><th class=\"num\">Change</th></tr></thead><tbody>");
        for t in &d.topic_changes {
            let f = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"));
            let _ = write!(
                h,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                esc(&t.topic),
                f(t.before),
                f(t.after),
                t.delta
                    .map_or_else(|| "–".to_owned(), |x| format!("{x:+.1}"))
            );
        }
        h.push_str("</tbody></table>");
    }
    h
}

/// The answer metrics that moved, falls first (the largest first), then rises.
fn html_metric_changes(h: &mut String, d: &RunDiff, links: &dyn crate::common::CaseLinks) {
    if d.metric_changes.is_empty() {
        return;
    }
    let (falls, rises) = metric_falls_and_rises(d);
    let _ = write!(
        h,
        "<h3 id=\"metric_falls\">Answer metrics ({} fell, {} rose)</h3><table class=\"grid\"><thead><tr><th>Case</th><th>Metric</th><th class=\"num\">Before</th><th class=\"num\">After</th><th class=\"num\">Change</th></tr></thead><tbody>",
        falls.len(),
        rises.len()
    );
    for m in falls.into_iter().chain(rises) {
        let name = match links.case(assay_core::bank::BankType::Answer, &m.test_id) {
            Some(href) if m.bank == "answer" => {
                format!("<a href=\"{}\">{}</a>", esc(&href), esc(&m.name()))
            }
            _ => esc(&m.name()),
        };
        let _ = write!(
            h,
            "<tr><td><code>{name}</code></td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num {}\">{}</td></tr>",
            esc(&m.metric),
            metric_value(m.before),
            metric_value(m.after),
            if m.delta() < 0.0 { "worse" } else { "better" },
            metric_delta(m)
        );
    }
    h.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::rundiff::{CaseDiff, KbChanges, RegressionGate, RunHeadline};
    use assay_core::runlog::Health;
    use assay_core::stats::{Interval, IntervalMethod, PairedComparison};

    fn diff(passed: bool, verdict: Verdict) -> RunDiff {
        let headline = |score: f64| RunHeadline {
            run_id: "r".into(),
            timestamp: "t".into(),
            combined_score: score,
            health_status: Health::Good,
            total_tests: 17,
            hard_fails: 0,
            error_count: 0,
        };
        RunDiff {
            label: None,
            before: headline(90.0),
            after: headline(85.0),
            setup_changes: Vec::new(),
            kb_changes: KbChanges::default(),
            score_delta: -5.0,
            counts: std::collections::BTreeMap::default(),
            topic_changes: Vec::new(),
            significance: Some(PairedComparison {
                difference: Interval {
                    method: IntervalMethod::PairedBootstrapPercentile,
                    estimate: -17.65,
                    low: -35.29,
                    high: 0.0,
                    level: 0.95,
                    n: 17,
                    resamples: Some(10_000),
                    seed: Some(1),
                },
                alpha: 0.05,
                p_value: 0.1,
                verdict,
            }),
            gate: Some(RegressionGate {
                passed,
                reasons: if passed {
                    Vec::new()
                } else {
                    vec!["3 new hard fail(s): semantic/S1, semantic/S2, semantic/S3 (no_new_hard_fails)".into()]
                },
                cases: Vec::new(),
            }),
            metric_changes: Vec::new(),
            cases: CaseDiff::default(),
        }
    }

    fn moved(id: &str, metric: &str, before: f64, after: f64) -> MetricChange {
        MetricChange {
            bank: "answer".into(),
            test_id: id.into(),
            metric: metric.into(),
            before,
            after,
        }
    }

    #[test]
    fn metric_changes_are_shown_falls_first() {
        let mut d = diff(false, Verdict::NotDistinguishable);
        // As the diff orders them: the largest fall first, then the smallest rise first.
        d.metric_changes = vec![
            moved("A-1", "faithfulness", 1.0, 0.25),
            moved("A-2", "context_recall", 0.9, 0.8),
            moved("A-3", "answer_relevancy", 0.5, 0.6),
            moved("A-4", "faithfulness", 0.2, 0.9),
        ];
        assert!(!d.is_unchanged());
        let text = console(&d, "base.json");
        assert!(text.contains("2 answer metric(s) fell"), "{text}");
        assert!(
            text.contains("answer metrics that fell: answer/A-1 faithfulness 1.00 → 0.25, answer/A-2 context_recall 0.90 → 0.80"),
            "{text}"
        );
        assert!(text.contains("2 answer metric(s) rose"), "{text}");
        let md = markdown(&d, "base.json");
        let table = &md[md.find("### Answer metrics (2 fell, 2 rose)").expect(&md)..];
        let order: Vec<usize> = ["A-1", "A-2", "A-4", "A-3"]
            .iter()
            .map(|id| table.find(&format!("answer/{id} ")).expect(id))
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{table}");
        assert!(
            table.contains("| answer/A-1 | faithfulness | 1.00 | 0.25 | -0.75 |"),
            "{table}"
        );
        assert!(
            table.contains("| answer/A-4 | faithfulness | 0.20 | 0.90 | +0.70 |"),
            "{table}"
        );
        let html = html(&d, "base.json");
        let section = &html[html.find("<h3 id=\"metric_falls\">").expect(&html)..];
        assert!(
            section.contains("<td class=\"num worse\">-0.75</td>"),
            "{section}"
        );
        assert!(
            section.contains("<td class=\"num better\">+0.10</td>"),
            "{section}"
        );
        for text in [text, md, html] {
            assert!(!text.contains("NaN"), "{text}");
        }
    }

    #[test]
    fn a_failed_gate_over_noise_is_one_coherent_verdict() {
        let d = diff(false, Verdict::NotDistinguishable);
        let (head, context) = verdict(&d).unwrap();
        assert_eq!(
            head,
            "regression gate: FAILED: 3 new hard fail(s): semantic/S1, semantic/S2, semantic/S3 (no_new_hard_fails)"
        );
        assert_eq!(
            context.unwrap(),
            "the mean per-case change is within noise (-17.65 points, 95% CI -35.29 to +0.00, paired bootstrap over 17 cases): the gate failed on its rule, not on the average"
        );
        let text = console(&d, "base.json");
        assert!(!text.contains("not distinguishable"), "{text}");
        let md = markdown(&d, "base.json");
        assert!(
            md.contains("**Regression gate: FAILED** — 3 new hard fail(s)"),
            "{md}"
        );
        assert!(
            md.contains("In context: the mean per-case change is within noise"),
            "{md}"
        );
    }

    #[test]
    fn a_passed_gate_over_a_real_drop_says_no_rule_forbids_it() {
        let (head, context) = verdict(&diff(true, Verdict::Worse)).unwrap();
        assert_eq!(head, "regression gate: passed (no rule broken)");
        assert!(
            context.unwrap().ends_with("a real drop (-17.65 points, 95% CI -35.29 to +0.00, paired bootstrap over 17 cases): no gate rule forbids it (max_score_drop would)")
        );
        let mut no_gate = diff(true, Verdict::Better);
        no_gate.gate = None;
        let (head, context) = verdict(&no_gate).unwrap();
        assert!(
            head.starts_with("The mean per-case change is a real gain"),
            "{head}"
        );
        assert!(context.is_none());
    }
}
