//! Renderers of conversation simulations (`assay simulate`), pure functions of
//! [`SimReport`]s: the console summary, the Markdown report (per
//! scenario table, per criterion breakdown, what needs attention, transcript excerpts with tool
//! calls) and the comparison of several reports (models as columns, scenarios as rows) in
//! Markdown and HTML.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use assay_core::simulation::{ScenarioRun, SimReport, Speaker, Verdict, failed_checks};

fn score(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.2}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{:.0}%", v * 100.0))
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "FAIL",
        Verdict::SimulatorFault => "simulator at fault",
        Verdict::Error => "ERROR",
    }
}

/// One line, at most `max` characters, for tables.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = flat.replace('|', "\\|");
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// The lowest-scoring criterion of a judged run, with its reasoning.
fn weakest(run: &ScenarioRun) -> Option<String> {
    let j = run.judgement.as_ref()?;
    let s = j.scores.iter().min_by(|a, b| a.score.total_cmp(&b.score))?;
    Some(format!(
        "{} {:.0}/10: {}",
        s.name,
        s.score,
        one_line(&s.reasoning, 160)
    ))
}

/// The console summary: counts, the worst few runs grouped by verdict, and where the rest is.
pub fn console(report: &SimReport, report_path: Option<&str>) -> String {
    let s = &report.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Simulation: {} · model {} · {} scenario run(s) ({} scenario(s) × {})",
        report.suite,
        report.model,
        s.runs,
        report.scenarios.len(),
        report.repeat
    );
    let _ = writeln!(
        out,
        "  passed {}, failed {}, simulator at fault {}, errors {} · mean overall {} · pass rate {}{}",
        s.passed,
        s.failed,
        s.simulator_fault,
        s.errors,
        score(s.mean_overall),
        pct(s.pass_rate),
        match (report.repeat, s.pass_all_scenarios) {
            (k, Some((all, of))) if k > 1 => format!(" · pass^{k} {all}/{of} scenarios"),
            _ => String::new(),
        }
    );
    let mut failing: Vec<&ScenarioRun> = report
        .runs
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .collect();
    failing.sort_by(|a, b| {
        a.overall
            .unwrap_or(0.0)
            .total_cmp(&b.overall.unwrap_or(0.0))
    });
    for (title, runs) in [
        ("Lowest failing runs", failing),
        (
            "Errors (not scored)",
            report
                .runs
                .iter()
                .filter(|r| r.verdict == Verdict::Error)
                .collect(),
        ),
        (
            "Simulated user at fault (not counted)",
            report
                .runs
                .iter()
                .filter(|r| r.verdict == Verdict::SimulatorFault)
                .collect(),
        ),
    ] {
        if runs.is_empty() {
            continue;
        }
        let _ = writeln!(out, "  {title}:");
        for run in runs.iter().take(3) {
            let why = match run.verdict {
                Verdict::Error => one_line(run.error.as_deref().unwrap_or(""), 140),
                Verdict::SimulatorFault => one_line(
                    run.judgement
                        .as_ref()
                        .map_or("", |j| j.simulator_issue.as_str()),
                    140,
                ),
                _ => weakest(run).unwrap_or_default(),
            };
            let _ = writeln!(
                out,
                "    {} #{} {}: {why}",
                run.scenario_id,
                run.repeat,
                score(run.overall)
            );
        }
        if runs.len() > 3 {
            let _ = writeln!(out, "    … and {} more", runs.len() - 3);
        }
    }
    if let Some(gate) = &report.gate {
        let _ = writeln!(
            out,
            "  gate: {}{}",
            if gate.passed { "passed" } else { "FAILED" },
            if gate.reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", gate.reasons.join("; "))
            }
        );
    }
    if let Some(path) = report_path {
        let _ = writeln!(
            out,
            "  full report: {path} (transcripts and JSON beside it; --json prints the JSON)"
        );
    }
    out
}

/// The Markdown report.
pub fn markdown(report: &SimReport) -> String {
    let s = &report.summary;
    let mut md = String::new();
    let _ = writeln!(md, "# Simulation report: {}\n", report.suite);
    let _ = writeln!(
        md,
        "Model under test **{}** · simulated user {} · judge {} · {} · {} run(s) per scenario · pass threshold {:.1}\n",
        report.model,
        report.simulator_model,
        report.evaluator_model,
        report
            .generated_at
            .get(..16)
            .unwrap_or(&report.generated_at)
            .replace('T', " ")
            + " UTC",
        report.repeat,
        report.pass_threshold
    );
    let _ = writeln!(md, "## Summary\n");
    let _ = writeln!(
        md,
        "| runs | passed | failed | simulator at fault | errors | mean overall | pass rate |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        md,
        "| {} | {} | {} | {} | {} | {} | {} |\n",
        s.runs,
        s.passed,
        s.failed,
        s.simulator_fault,
        s.errors,
        score(s.mean_overall),
        pct(s.pass_rate)
    );
    if s.simulator_fault > 0 || s.errors > 0 {
        let _ = writeln!(
            md,
            "Runs where the simulated user broke its persona, and runs that an error kept from a verdict, are listed apart and left out of the means and the pass rate.\n"
        );
    }
    if let Some(gate) = &report.gate {
        let _ = writeln!(
            md,
            "**Gate: {}**{}\n",
            if gate.passed { "passed" } else { "FAILED" },
            if gate.reasons.is_empty() {
                String::new()
            } else {
                format!(" — {}", gate.reasons.join("; "))
            }
        );
    }

    let _ = writeln!(md, "## Scenarios\n");
    if report.repeat > 1 {
        let _ = writeln!(
            md,
            "| scenario | mean | spread (sd, min–max) | passed | pass^{} | verdicts |",
            report.repeat
        );
        let _ = writeln!(md, "|---|---:|---|---:|:---:|---|");
    } else {
        let _ = writeln!(md, "| scenario | overall | verdict | weakest criterion |");
        let _ = writeln!(md, "|---|---:|---|---|");
    }
    for sc in &report.scenarios {
        let runs: Vec<&ScenarioRun> = report
            .runs
            .iter()
            .filter(|r| r.scenario_id == sc.id)
            .collect();
        if report.repeat > 1 {
            let verdicts: Vec<&str> = runs.iter().map(|r| verdict_word(r.verdict)).collect();
            let _ = writeln!(
                md,
                "| {} (`{}`) | {} | {} ({}–{}) | {}/{} | {} | {} |",
                sc.name,
                sc.id,
                score(sc.mean),
                score(sc.stddev),
                score(sc.min),
                score(sc.max),
                sc.passed,
                sc.runs,
                match sc.pass_all {
                    Some(true) => "✅",
                    Some(false) => "❌",
                    None => "–",
                },
                verdicts.join(", ")
            );
        } else if let Some(run) = runs.first() {
            let _ = writeln!(
                md,
                "| {} (`{}`) | {} | {} | {} |",
                sc.name,
                sc.id,
                score(run.overall),
                verdict_word(run.verdict),
                match run.verdict {
                    Verdict::Error => one_line(run.error.as_deref().unwrap_or(""), 100),
                    _ => weakest(run).map(|w| one_line(&w, 100)).unwrap_or_default(),
                }
            );
        }
    }

    let _ = writeln!(md, "\n## Criteria\n");
    let _ = writeln!(md, "| criterion | default weight | mean | lowest |");
    let _ = writeln!(md, "|---|---:|---:|---:|");
    for c in &report.criteria {
        let _ = writeln!(
            md,
            "| {} (`{}`) | {:.2} | {} | {} |",
            c.name,
            c.id,
            c.weight,
            score(c.mean),
            score(c.min)
        );
    }

    let attention: Vec<&ScenarioRun> = report
        .runs
        .iter()
        .filter(|r| r.verdict != Verdict::Pass || failed_checks(r).next().is_some())
        .collect();
    if !attention.is_empty() {
        let _ = writeln!(md, "\n## Needs attention\n");
        for run in attention {
            let _ = writeln!(
                md,
                "### {} #{} — {} ({})\n",
                run.scenario_id,
                run.repeat,
                verdict_word(run.verdict),
                score(run.overall)
            );
            if let Some(error) = &run.error {
                let _ = writeln!(md, "Error: {}\n", one_line(error, 400));
            }
            if let Some(j) = &run.judgement {
                if run.verdict == Verdict::SimulatorFault {
                    let _ = writeln!(
                        md,
                        "Simulated user: {}\n",
                        one_line(&j.simulator_issue, 400)
                    );
                }
                for s in j.scores.iter().filter(|s| s.score < report.pass_threshold) {
                    let _ = writeln!(
                        md,
                        "- **{}** {:.1}/10: {}",
                        s.name,
                        s.score,
                        one_line(&s.reasoning, 400)
                    );
                }
            }
            for c in failed_checks(run) {
                let _ = writeln!(
                    md,
                    "- state check **{}** {:?}: {}",
                    c.name,
                    c.status,
                    c.details.join("; ")
                );
            }
            md.push('\n');
        }
    }

    let _ = writeln!(md, "## Transcripts\n");
    let _ = writeln!(
        md,
        "First repeat of each scenario, turns cut at 400 characters and tool results at 200; the full transcripts are in the JSON report and the transcript files.\n"
    );
    for run in report.runs.iter().filter(|r| r.repeat == 1) {
        let Some(t) = &run.transcript else { continue };
        let _ = writeln!(
            md,
            "<details><summary>{} — {} ({}), {} turns, ended by {}</summary>\n",
            run.scenario_id,
            verdict_word(run.verdict),
            score(run.overall),
            t.turns.len(),
            t.ended_by
        );
        for turn in &t.turns {
            for call in &turn.tool_calls {
                let _ = writeln!(
                    md,
                    "> 🔧 `{}({})` → {}{}\n>",
                    call.name,
                    one_line(&call.arguments.to_string(), 200),
                    if call.is_error { "**error:** " } else { "" },
                    one_line(&call.result, 200)
                );
            }
            let who = match turn.role {
                Speaker::User => "User",
                Speaker::Assistant => "Assistant",
            };
            let _ = writeln!(md, "> **{who}:** {}\n>", one_line(&turn.content, 400));
        }
        md.push_str("\n</details>\n\n");
    }
    if !report.usage.is_empty() {
        let _ = writeln!(md, "## Model usage\n");
        let _ = writeln!(
            md,
            "| model | calls | cached | input tokens | output tokens | cost |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
        for u in &report.usage {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                u.model,
                u.calls,
                u.cache_hits,
                u.input_tokens,
                u.output_tokens,
                u.cost_usd
                    .map_or_else(|| "unknown".to_owned(), |c| format!("${c:.4}"))
            );
        }
    }
    let limits = crate::limits::markdown(&report.rate_limits);
    if !limits.is_empty() {
        md.push('\n');
        md.push_str(&limits);
    }
    md
}

/// One comparison cell: the mean over a model's scored runs of a scenario, with a mark.
fn cell(report: &SimReport, scenario: &str) -> (Option<f64>, &'static str) {
    let Some(s) = report.scenarios.iter().find(|s| s.id == scenario) else {
        return (None, "not run");
    };
    match s.mean {
        None => (None, "no verdict"),
        Some(m) if m >= report.pass_threshold => (Some(m), "pass"),
        Some(m) if m >= report.pass_threshold - 1.5 => (Some(m), "near"),
        Some(m) => (Some(m), "fail"),
    }
}

fn scenario_rows(reports: &[SimReport]) -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    let mut rows = Vec::new();
    for r in reports {
        for s in &r.scenarios {
            if seen.insert(s.id.clone()) {
                rows.push((s.id.clone(), s.name.clone()));
            }
        }
    }
    rows.sort();
    rows
}

/// Models as columns, scenarios as rows, in Markdown (✅ at or above each report's pass
/// threshold, ⚠️ within 1.5 below it, ❌ lower, – no verdict).
pub fn compare_markdown(reports: &[SimReport]) -> String {
    let mut md = String::from("# Model comparison\n\n");
    let _ = writeln!(
        md,
        "Mean overall score (0-10) per scenario over scored runs. ✅ passes the report's threshold, ⚠️ within 1.5 below it, ❌ lower, – no verdict.\n"
    );
    let mut header = "| scenario |".to_owned();
    let mut rule = "|---|".to_owned();
    for r in reports {
        let _ = write!(header, " {} |", r.model);
        rule.push_str("---:|");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    for (id, name) in scenario_rows(reports) {
        let _ = write!(md, "| {name} (`{id}`) |");
        for r in reports {
            let (value, mark) = cell(r, &id);
            let symbol = match mark {
                "pass" => "✅",
                "near" => "⚠️",
                "fail" => "❌",
                _ => "–",
            };
            let _ = write!(md, " {} {symbol} |", score(value));
        }
        md.push('\n');
    }
    let _ = write!(md, "| **mean overall** |");
    for r in reports {
        let _ = write!(md, " **{}** |", score(r.summary.mean_overall));
    }
    let _ = write!(md, "\n| pass rate |");
    for r in reports {
        let _ = write!(md, " {} |", pct(r.summary.pass_rate));
    }
    let _ = write!(md, "\n| errors / simulator at fault |");
    for r in reports {
        let _ = write!(
            md,
            " {} / {} |",
            r.summary.errors, r.summary.simulator_fault
        );
    }
    md.push('\n');
    md
}

use crate::junit::escape as esc;

/// The same comparison as one self-contained HTML page, cells colour-coded.
pub fn compare_html(reports: &[SimReport]) -> String {
    let mut h = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>assay: model comparison</title>\n<style>\nbody{font:15px/1.4 system-ui,sans-serif;margin:2rem;color:#222}\ntable{border-collapse:collapse}th,td{padding:.4rem .7rem;border:1px solid #ccc}\ntd.num{text-align:right;font-variant-numeric:tabular-nums}\n.pass{background:#d7f5dd}.near{background:#fff1c2}.fail{background:#fbd5d5}.none{background:#eee;color:#777}\n</style></head><body>\n<h1>Model comparison</h1>\n<p>Mean overall score (0-10) per scenario over scored runs; green passes the report's threshold, amber is within 1.5 below it, red is lower.</p>\n<table><thead><tr><th>scenario</th>",
    );
    for r in reports {
        let _ = write!(h, "<th>{}</th>", esc(&r.model));
    }
    h.push_str("</tr></thead><tbody>\n");
    for (id, name) in scenario_rows(reports) {
        let _ = write!(h, "<tr><td>{} (<code>{}</code>)</td>", esc(&name), esc(&id));
        for r in reports {
            let (value, mark) = cell(r, &id);
            let class = match mark {
                "pass" | "near" | "fail" => mark,
                _ => "none",
            };
            let _ = write!(h, "<td class=\"num {class}\">{}</td>", score(value));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("<tr><th>mean overall</th>");
    for r in reports {
        let _ = write!(
            h,
            "<td class=\"num\"><b>{}</b></td>",
            score(r.summary.mean_overall)
        );
    }
    h.push_str("</tr>\n<tr><th>pass rate</th>");
    for r in reports {
        let _ = write!(h, "<td class=\"num\">{}</td>", pct(r.summary.pass_rate));
    }
    h.push_str("</tr>\n</tbody></table>\n</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_everything_shown() {
        assert_eq!(
            esc("<script>\"x\" & 'y'</script>"),
            "&lt;script&gt;&quot;x&quot; &amp; &apos;y&apos;&lt;/script&gt;"
        );
    }

    #[test]
    fn table_cells_stay_on_one_line() {
        assert_eq!(one_line("a\n b | c", 100), "a b \\| c");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }
}
