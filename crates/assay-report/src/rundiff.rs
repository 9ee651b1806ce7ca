//! Renderings of a comparison of two runs ([`RunDiff`]): for the console (`assay run
//! --baseline`, `assay runs diff`), as a Markdown section and as an HTML section (the reports'
//! "Compared with" section and the web UI's run diff page). All three say the same things in
//! the same order: what differs in the setup first (why results may differ), then regressions
//! (new critical failures, new hard fails, the largest drops), topics, improvements, the
//! paired comparison with its interval, and the regression gate.

use std::fmt::Write as _;

use assay_core::rundiff::{CaseChange, RunDiff, SettingChange};
use assay_core::stats::Verdict;

use crate::html::escape as esc;

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

fn significance_line(d: &RunDiff) -> Option<String> {
    let s = d.significance.as_ref()?;
    let verdict = match s.verdict {
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        Verdict::NotDistinguishable => "not distinguishable",
    };
    let i = &s.difference;
    Some(format!(
        "per-case score change {:+.2} ({:.0}% CI {:+.2} to {:+.2}, paired bootstrap over {} cases): {verdict}",
        i.estimate,
        i.level * 100.0,
        i.low,
        i.high,
        i.n
    ))
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
        if !c.new_critical.is_empty() {
            regressions.push(format!("{} new critical failure(s)", c.new_critical.len()));
        }
        if !c.new_hard_fails.is_empty() {
            regressions.push(format!("{} new hard fail(s)", c.new_hard_fails.len()));
        }
        if !c.worse.is_empty() {
            regressions.push(format!("{} case(s) worse", c.worse.len()));
        }
        if regressions.is_empty() {
            let _ = writeln!(out, "  Regressions: none");
        } else {
            let _ = writeln!(out, "  Regressions: {}", regressions.join(", "));
        }
        for (title, list) in [
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
        if !c.better.is_empty() {
            gains.push(format!("{} case(s) better", c.better.len()));
        }
        if !c.fixed_hard_fails.is_empty() {
            gains.push(format!("{} hard fail(s) fixed", c.fixed_hard_fails.len()));
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
    if let Some(line) = significance_line(d) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(g) = &d.gate {
        if g.passed {
            let _ = writeln!(out, "  regression gate: passed");
        } else {
            let _ = writeln!(out, "  regression gate: FAILED");
            for r in &g.reasons {
                let _ = writeln!(out, "    {r}");
            }
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
            if g.passed { "passed" } else { "FAILED" },
            if g.reasons.is_empty() {
                String::new()
            } else {
                format!(" — {}", g.reasons.join("; "))
            }
        );
    }
    if let Some(line) = significance_line(d) {
        let _ = writeln!(md, "{line}.\n");
    }
    let c = &d.cases;
    for (title, list) in [
        ("New critical failures", &c.new_critical),
        ("New hard fails", &c.new_hard_fails),
        ("Worse", &c.worse),
        ("Better", &c.better),
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

fn html_rows(h: &mut String, title: &str, id: &str, list: &[CaseChange], class: &str) {
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
            esc(&c.name()),
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
    h.push_str(&html_overview(d));
    let c = &d.cases;
    html_rows(&mut h, "Worse", "worse", &c.worse, "worse");
    html_rows(&mut h, "Better", "better", &c.better, "better");
    html_rows(
        &mut h,
        "Hard fails fixed",
        "fixed_hard_fails",
        &c.fixed_hard_fails,
        "better",
    );
    html_rows(&mut h, "Not comparable (errors)", "errored", &c.errored, "");
    html_rows(&mut h, "Added", "added", &c.added, "");
    html_rows(&mut h, "Removed", "removed", &c.removed, "");
    if !c.unchanged.is_empty() {
        let _ = write!(
            h,
            "<details><summary>Unchanged ({})</summary>",
            c.unchanged.len()
        );
        html_rows(&mut h, "Unchanged", "unchanged", &c.unchanged, "");
        h.push_str("</details>");
    }
    h.push_str("</section>");
    h
}

/// What a comparison says before its case lists, in HTML: "no change", what differs in the
/// setups, the regression gate, the paired comparison, new critical failures and new hard
/// fails, and the topics. The web UI's run diff page shows it above its case tables.
pub fn html_overview(d: &RunDiff) -> String {
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
            if g.passed { "passed" } else { "FAILED" },
            if g.reasons.is_empty() {
                String::new()
            } else {
                format!(" — {}", esc(&g.reasons.join("; ")))
            }
        );
    }
    if let Some(line) = significance_line(d) {
        let _ = write!(h, "<p id=\"significance\">{}.</p>", esc(&line));
    }
    let c = &d.cases;
    html_rows(
        &mut h,
        "New critical failures",
        "new_critical",
        &c.new_critical,
        "worse",
    );
    html_rows(
        &mut h,
        "New hard fails",
        "new_hard_fails",
        &c.new_hard_fails,
        "worse",
    );
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
