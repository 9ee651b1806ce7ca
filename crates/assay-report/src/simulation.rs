//! Renderers of conversation simulations (`assay simulate`), pure functions of
//! [`SimReport`]s: the console summary, the Markdown report (per
//! scenario table, per criterion breakdown, what needs attention, transcript excerpts with tool
//! calls), the HTML report ([`body`], shared by the web UI's report page and the
//! self-contained `report_<stamp>.html`), a run's transcript page ([`transcript_body`]) and the
//! comparison of several reports (models as columns, scenarios as rows) in Markdown and HTML.

use std::fmt::Write as _;

use assay_core::simulation::{
    FailedBy, GateOutcome, ScenarioCell, ScenarioRun, SimBaseline, SimComparison, SimReport,
    Speaker, Transcript, TurnUsage, Verdict, failed_checks,
};
use assay_core::stats::Verdict as StatVerdict;

/// What model calls took and cost, in a line: `1.2 s · 350→120 tokens · $0.0012`. The time is
/// `cached` when every call came from the call cache (`2 of 3 calls cached` when some did:
/// no time measured); a cost that is not known is left out, or, with `say_unknown`, said.
fn usage_line(u: &TurnUsage, say_unknown: bool) -> String {
    let time = match u.latency_ms {
        Some(ms) if ms < 1000 => format!("{ms} ms"),
        Some(ms) => format!("{:.1} s", ms as f64 / 1000.0),
        None if u.cache_hits >= u.calls => "cached".to_owned(),
        None if u.cache_hits > 0 => format!("{} of {} calls cached", u.cache_hits, u.calls),
        None => "time not measured".to_owned(),
    };
    let mut parts = vec![time];
    if u.calls > 1 {
        parts.push(format!("{} calls", u.calls));
    }
    parts.push(format!("{}→{} tokens", u.input_tokens, u.output_tokens));
    match u.cost_usd {
        Some(c) if c <= 0.0 => parts.push("$0".to_owned()),
        Some(c) if c < 0.000_05 => parts.push("<$0.0001".to_owned()),
        Some(c) => parts.push(format!("${c:.4}")),
        None if say_unknown => parts.push("cost unknown".to_owned()),
        None => {}
    }
    parts.join(" · ")
}

/// A conversation's totals per role (`model under test: …; simulated user: …`), or `None`
/// for a transcript recorded before turns were measured.
fn usage_totals(t: &Transcript) -> Option<String> {
    let parts: Vec<String> = [
        (Speaker::Assistant, "model under test"),
        (Speaker::User, "simulated user"),
    ]
    .into_iter()
    .filter_map(|(who, name)| {
        t.usage_of(who)
            .map(|u| format!("{name} {}", usage_line(&u, true)))
    })
    .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

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
        Verdict::Uncertain => "uncertain",
        Verdict::Error => "ERROR",
    }
}

/// `FAIL (check)` / `FAIL (judge)` for failed runs, else the verdict's word.
fn verdict_with_cause(run: &ScenarioRun) -> String {
    match (run.verdict, run.failed_by) {
        (Verdict::Fail, Some(FailedBy::Check)) => "FAIL (check)".to_owned(),
        (Verdict::Fail, Some(FailedBy::Judge)) => "FAIL (judge)".to_owned(),
        (v, _) => verdict_word(v).to_owned(),
    }
}

/// The pass rate with its 95 % interval when known: `80% (95% CI 49–94%)`.
fn pass_rate(report: &SimReport) -> String {
    match (report.summary.pass_rate, report.summary.pass_rate_interval) {
        (Some(r), Some([low, high])) => format!(
            "{:.0}% (95% CI {:.0}–{:.0}%)",
            r * 100.0,
            low * 100.0,
            high * 100.0
        ),
        (r, _) => pct(r),
    }
}

/// The gate in a line: which rule, passed or not, and why.
fn gate_line(gate: &GateOutcome) -> String {
    format!(
        "{}{}{}",
        if gate.implicit {
            "gate (no `gate:` in the suite: every scored run must pass): "
        } else {
            "gate: "
        },
        if gate.passed { "passed" } else { "FAILED" },
        if gate.reasons.is_empty() {
            String::new()
        } else {
            format!(" ({})", gate.reasons.join("; "))
        }
    )
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_uppercase().collect::<String>() + chars.as_str()
    })
}

/// The judge in a line: its version and, with samples, how consistent it was.
fn judge_line(report: &SimReport) -> Option<String> {
    let judge = report.judge.as_ref()?;
    let mut line = format!(
        "judge {} · version {}",
        report.evaluator_model, judge.version
    );
    if let Some(c) = &judge.consistency {
        let spread = c
            .criteria
            .iter()
            .max_by(|a, b| a.mean_sd.total_cmp(&b.mean_sd))
            .map_or_else(String::new, |w| {
                format!(", widest spread `{}` (sd {:.2})", w.id, w.mean_sd)
            });
        let _ = write!(
            line,
            " · {} samples: verdict flipped in {}/{} runs ({:.0}%), overall sd {:.2}{spread}",
            judge.samples,
            c.flipped,
            c.judged,
            c.flip_share * 100.0,
            c.overall_sd
        );
    }
    Some(line)
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
        "  passed {}, failed {}{}, simulator at fault {}{}, errors {} · mean overall {} · pass rate {}{}",
        s.passed,
        s.failed,
        if s.failed > 0 {
            format!(
                " ({} by a check, {} by the judge)",
                s.failed_by_check, s.failed_by_judge
            )
        } else {
            String::new()
        },
        s.simulator_fault,
        if s.uncertain > 0 {
            format!(", uncertain {}", s.uncertain)
        } else {
            String::new()
        },
        s.errors,
        score(s.mean_overall),
        pass_rate(report),
        match (report.repeat, s.pass_all_scenarios) {
            (k, Some((all, of))) if k > 1 => format!(" · pass^{k} {all}/{of} scenarios"),
            _ => String::new(),
        }
    );
    if s.judge_passed_failed_check > 0 {
        let _ = writeln!(
            out,
            "  the judge passed {} run(s) whose state check failed: it was fooled (the check decided)",
            s.judge_passed_failed_check
        );
    }
    let by_check: Vec<&ScenarioRun> = report
        .runs
        .iter()
        .filter(|r| r.verdict == Verdict::Fail && r.failed_by == Some(FailedBy::Check))
        .collect();
    let mut failing: Vec<&ScenarioRun> = report
        .runs
        .iter()
        .filter(|r| r.verdict == Verdict::Fail && r.failed_by != Some(FailedBy::Check))
        .collect();
    failing.sort_by(|a, b| {
        a.overall
            .unwrap_or(0.0)
            .total_cmp(&b.overall.unwrap_or(0.0))
    });
    for (title, runs) in [
        ("Failed by a state check", by_check),
        ("Lowest runs failed by the judge", failing),
        (
            "Uncertain (the judge's samples disagree; not counted)",
            report
                .runs
                .iter()
                .filter(|r| r.verdict == Verdict::Uncertain)
                .collect(),
        ),
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
            let why = match (run.verdict, run.failed_by) {
                (Verdict::Fail, Some(FailedBy::Check)) | (Verdict::Uncertain, _) => {
                    let judge = match run.judge_verdict {
                        Some(v) if run.verdict == Verdict::Fail => {
                            format!(" (the judge said {})", verdict_word(v))
                        }
                        _ => String::new(),
                    };
                    format!(
                        "{}{judge}",
                        one_line(run.reason.as_deref().unwrap_or(""), 140)
                    )
                }
                (Verdict::Error, _) => one_line(run.error.as_deref().unwrap_or(""), 140),
                (Verdict::SimulatorFault, _) => one_line(
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
        let _ = writeln!(out, "  {}", gate_line(gate));
    }
    if let Some(b) = &report.baseline {
        for line in baseline_lines(b) {
            let _ = writeln!(out, "  {line}");
        }
    }
    if let Some(line) = judge_line(report) {
        let _ = writeln!(out, "  {line}");
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
        "| runs | passed | failed (by check / by judge) | uncertain | simulator at fault | errors | mean overall | pass rate (95% CI) |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        md,
        "| {} | {} | {} ({} / {}) | {} | {} | {} | {} | {} |\n",
        s.runs,
        s.passed,
        s.failed,
        s.failed_by_check,
        s.failed_by_judge,
        s.uncertain,
        s.simulator_fault,
        s.errors,
        score(s.mean_overall),
        pass_rate(report)
    );
    let _ = writeln!(
        md,
        "Objective checks decide: a run whose required state check failed is failed by the check, whatever the judge scored.{}\n",
        if s.judge_passed_failed_check > 0 {
            format!(
                " **The judge passed {} run(s) whose state check failed**: it was fooled by the reply; see below.",
                s.judge_passed_failed_check
            )
        } else {
            String::new()
        }
    );
    if let Some(line) = judge_line(report) {
        let _ = writeln!(md, "{}.\n", capitalise(&line));
    }
    if s.simulator_fault > 0 || s.errors > 0 {
        let _ = writeln!(
            md,
            "Runs where the simulated user broke its persona, and runs that an error kept from a verdict, are listed apart and left out of the means and the pass rate.\n"
        );
    }
    if let Some(gate) = &report.gate {
        let _ = writeln!(md, "**{}**\n", gate_line(gate));
    }
    if let Some(b) = &report.baseline {
        let lines = baseline_lines(b);
        let _ = writeln!(md, "**{}**\n", capitalise(&lines[0]));
        for line in &lines[1..] {
            let _ = writeln!(md, "- {}", line.trim());
        }
        md.push('\n');
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
            let verdicts: Vec<String> = runs.iter().map(|r| verdict_with_cause(r)).collect();
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
                verdict_with_cause(run),
                match (run.verdict, run.failed_by) {
                    (Verdict::Error, _) => one_line(run.error.as_deref().unwrap_or(""), 100),
                    (Verdict::Fail, Some(FailedBy::Check)) | (Verdict::Uncertain, _) => {
                        one_line(run.reason.as_deref().unwrap_or(""), 100)
                    }
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
                verdict_with_cause(run),
                score(run.overall)
            );
            if let Some(reason) = &run.reason {
                let judge = match (run.verdict, run.failed_by, run.judge_verdict) {
                    (Verdict::Fail, Some(FailedBy::Check), Some(j)) => {
                        format!(" The judge alone said **{}**.", verdict_word(j))
                    }
                    _ => String::new(),
                };
                let _ = writeln!(md, "Why: {}.{judge}\n", one_line(reason, 400));
            }
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
                    "- {} check **{}**{} {:?}: {}",
                    c.kind.word(),
                    c.name,
                    if c.advisory { " (advisory)" } else { "" },
                    c.status,
                    c.details.join("; ")
                );
            }
            md.push('\n');
        }
    }

    let _ = writeln!(md, "\n## Transcripts\n");
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
        if let Some(totals) = usage_totals(t) {
            let _ = writeln!(md, "Totals: {totals}.\n");
        }
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
            if let Some(u) = &turn.usage {
                let _ = writeln!(md, "> ⏱ {}\n>", usage_line(u, false));
            }
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

/// A cell's mark: at or above the report's pass threshold, within 1.5 below it, lower, or none.
fn mark(report: &SimReport, cell: Option<&ScenarioCell>) -> &'static str {
    let Some(c) = cell else {
        return "not run";
    };
    match c.mean {
        None => "no verdict",
        Some(m) if m >= report.pass_threshold => "pass",
        Some(m) if m >= report.pass_threshold - 1.5 => "near",
        Some(_) => "fail",
    }
}

/// `7.40 [6.90–7.80]`: a mean with its interval when there is one.
fn with_interval(cell: Option<&ScenarioCell>) -> String {
    match cell {
        None => "–".to_owned(),
        Some(c) => match (c.mean, &c.interval) {
            (Some(m), Some(i)) => format!("{m:.2} [{:.2}–{:.2}]", i.low, i.high),
            (m, _) => score(m),
        },
    }
}

fn verdict_text(v: StatVerdict) -> &'static str {
    match v {
        StatVerdict::Better => "better",
        StatVerdict::Worse => "worse",
        StatVerdict::NotDistinguishable => "not distinguishable",
    }
}

/// One line per pair of reports: the overall verdict and the scenarios that moved.
fn pair_lines(reports: &[SimReport], c: &SimComparison) -> Vec<String> {
    c.pairs
        .iter()
        .map(|p| {
            let (a, b) = (&reports[p.a].model, &reports[p.b].model);
            let overall = p.overall.as_ref().map_or_else(
                || "too few scenarios in common for a verdict".to_owned(),
                |o| {
                    format!(
                        "{} ({:+.2} per scenario, {:.0}% CI {:+.2} to {:+.2}, {} scenarios)",
                        verdict_text(o.verdict),
                        o.difference.estimate,
                        o.difference.level * 100.0,
                        o.difference.low,
                        o.difference.high,
                        o.difference.n
                    )
                },
            );
            let moved = |v: StatVerdict| {
                p.scenarios
                    .iter()
                    .filter(|(_, s)| s.verdict == v)
                    .map(|(id, s)| format!("{id} {:+.2}", s.difference.estimate))
                    .collect::<Vec<_>>()
            };
            let (worse, better) = (moved(StatVerdict::Worse), moved(StatVerdict::Better));
            let mut line = format!("{b} against {a}: {overall}");
            if !worse.is_empty() {
                let _ = write!(line, "; worse on {}", worse.join(", "));
            }
            if !better.is_empty() {
                let _ = write!(line, "; better on {}", better.join(", "));
            }
            line
        })
        .collect()
}

/// Models as columns, scenarios as rows, in Markdown: each cell the scenario's mean overall
/// with its 95 % bootstrap interval over the repeats (✅ at or above the report's pass
/// threshold, ⚠️ within 1.5 below it, ❌ lower, – no verdict), then a verdict for every pair of
/// reports.
pub fn compare_markdown(reports: &[SimReport], c: &SimComparison) -> String {
    let mut md = String::from("# Model comparison\n\n");
    for w in &c.warnings {
        let _ = writeln!(md, "> **Warning:** {w}\n");
    }
    let _ = writeln!(
        md,
        "Mean overall score (0-10) per scenario over scored runs, with its 95% bootstrap interval over the repeats. ✅ passes the report's threshold, ⚠️ within 1.5 below it, ❌ lower, – no verdict.\n"
    );
    let mut header = "| scenario |".to_owned();
    let mut rule = "|---|".to_owned();
    for r in reports {
        let _ = write!(header, " {} |", r.model);
        rule.push_str("---:|");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    for row in &c.scenarios {
        let _ = write!(md, "| {} (`{}`) |", row.name, row.id);
        for (r, cell) in reports.iter().zip(&row.cells) {
            let symbol = match mark(r, cell.as_ref()) {
                "pass" => "✅",
                "near" => "⚠️",
                "fail" => "❌",
                _ => "–",
            };
            let _ = write!(md, " {} {symbol} |", with_interval(cell.as_ref()));
        }
        md.push('\n');
    }
    let _ = write!(md, "| **mean overall** |");
    for cr in &c.reports {
        let _ = write!(
            md,
            " **{}** |",
            cr.mean_overall.as_ref().map_or_else(
                || "–".to_owned(),
                |i| format!("{:.2} [{:.2}–{:.2}]", i.estimate, i.low, i.high)
            )
        );
    }
    let _ = write!(md, "\n| pass rate |");
    for cr in &c.reports {
        let _ = write!(
            md,
            " {} |",
            cr.pass_rate.as_ref().map_or_else(
                || "–".to_owned(),
                |i| format!(
                    "{:.0}% [{:.0}–{:.0}%]",
                    i.estimate * 100.0,
                    i.low * 100.0,
                    i.high * 100.0
                )
            )
        );
    }
    let _ = write!(md, "\n| errors / simulator at fault |");
    for r in reports {
        let _ = write!(
            md,
            " {} / {} |",
            r.summary.errors, r.summary.simulator_fault
        );
    }
    let _ = write!(md, "\n| judge |");
    for cr in &c.reports {
        let _ = write!(
            md,
            " {} {} |",
            cr.evaluator_model,
            cr.judge_version
                .as_deref()
                .unwrap_or("(version unrecorded)")
        );
    }
    md.push_str("\n\n");
    let lines = pair_lines(reports, c);
    if !lines.is_empty() {
        let _ = writeln!(md, "## Verdicts\n");
        let _ = writeln!(
            md,
            "Over all scenarios: a paired bootstrap of the scenarios' means; per scenario: a bootstrap of the two reports' runs (two or more scored runs on each side). Better or worse when the 95% interval of the change excludes 0.\n"
        );
        for line in lines {
            let _ = writeln!(md, "- {line}");
        }
    }
    md
}

#[cfg(test)]
use crate::common::escape as esc;

mod page;

pub use page::{SimLinks, TranscriptFiles, body, compare_body, html, transcript_body};

/// The same comparison as one self-contained HTML page ([`compare_body`]: cells colour-coded
/// and marked, so colour is not the only cue).
pub fn compare_html(reports: &[SimReport], c: &SimComparison) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>assay: model comparison</title>\n<style>\nbody{{font:15px/1.4 system-ui,sans-serif;margin:2rem;color:#222}}\n{}</style></head><body>\n{}</body></html>\n",
        crate::common::STYLE,
        compare_body(reports, c)
    )
}

/// The comparison with a baseline, in lines (console and Markdown).
fn baseline_lines(b: &SimBaseline) -> Vec<String> {
    let mut lines = vec![format!(
        "compared with {}: {}",
        b.label,
        if b.passed {
            "no significant regression"
        } else {
            "REGRESSED"
        }
    )];
    lines.extend(b.reasons.iter().map(|r| format!("  {r}")));
    for w in &b.comparison.warnings {
        lines.push(format!("  warning: {w}"));
    }
    if let Some(o) = b.comparison.pairs.first().and_then(|p| p.overall.as_ref()) {
        lines.push(format!(
            "  per-scenario mean overall {:+.2} ({:.0}% CI {:+.2} to {:+.2}): {}",
            o.difference.estimate,
            o.difference.level * 100.0,
            o.difference.low,
            o.difference.high,
            verdict_text(o.verdict)
        ));
    }
    lines
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

    use assay_core::simulation::{
        CheckResult, CheckStatus, CriterionScore, CriterionSummary, Ending, Judgement, SimSummary,
        ToolCallRecord, Transcript, Turn,
    };

    const INJECT: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>";

    fn run(id: &str, repeat: u32, verdict: Verdict, score: f64) -> ScenarioRun {
        let judged = verdict != Verdict::Error;
        ScenarioRun {
            scenario_id: id.into(),
            scenario_name: format!("Name {INJECT}"),
            repeat,
            verdict,
            failed_by: (verdict == Verdict::Fail).then_some(FailedBy::Check),
            judge_verdict: None,
            reason: (verdict == Verdict::Fail).then(|| format!("check failed {INJECT}")),
            overall: judged.then_some(score),
            judgement: judged.then(|| Judgement {
                scores: vec![CriterionScore {
                    id: "tone".into(),
                    name: format!("Tone {INJECT}"),
                    scale: assay_core::simulation::Scale::ZeroToTen,
                    score,
                    weight: 1.0,
                    reasoning: format!("because {INJECT}"),
                }],
                overall: score,
                simulator_kept_persona: true,
                simulator_issue: String::new(),
                summary: format!("summary {INJECT}"),
                calls: 1,
            }),
            judge_samples: Vec::new(),
            checks: vec![CheckResult {
                name: format!("saved {INJECT}"),
                status: if verdict == Verdict::Fail {
                    CheckStatus::Failed
                } else {
                    CheckStatus::Passed
                },
                details: vec![format!("missing {INJECT}")],
                advisory: false,
                source: Some(format!("tool s.get {INJECT}")),
                state: Some(format!("{{\"x\": \"{INJECT}\"}}")),
                kind: assay_core::simulation::CheckKind::State,
                calls: Vec::new(),
            }],
            error: (!judged).then(|| format!("boom {INJECT}")),
            warnings: Vec::new(),
            transcript: judged.then(|| Transcript {
                scenario_id: id.into(),
                repeat,
                model: "m".into(),
                simulator_model: "s".into(),
                turns: vec![
                    Turn {
                        role: Speaker::User,
                        content: format!("hello {INJECT}"),
                        tool_calls: Vec::new(),
                        timestamp: "t".into(),
                        usage: None,
                    },
                    Turn {
                        role: Speaker::Assistant,
                        content: format!("done {INJECT}"),
                        tool_calls: vec![ToolCallRecord {
                            id: "c1".into(),
                            name: format!("add {INJECT}"),
                            server: Some("s".into()),
                            arguments: serde_json::json!({"chore": INJECT}),
                            result: format!("ok {INJECT}"),
                            is_error: true,
                            duration_ms: 7,
                        }],
                        timestamp: "t".into(),
                        usage: None,
                    },
                ],
                ended_by: Ending::MaxTurns,
                error: None,
                started_at: "t".into(),
                ended_at: "t".into(),
                stop_usage: None,
            }),
            duration_ms: 1000,
        }
    }

    fn report(model: &str, scores: [f64; 2]) -> SimReport {
        let runs = vec![
            run("a", 1, Verdict::Pass, scores[0]),
            run("a", 2, Verdict::Fail, scores[1]),
            run("b", 1, Verdict::Error, 0.0),
        ];
        SimReport {
            schema_version: assay_core::simulation::SIM_SCHEMA_VERSION,
            suite: format!("suite {INJECT}"),
            model: model.into(),
            simulator_model: "s".into(),
            evaluator_model: "j".into(),
            generated_at: "2026-11-25T09:00:00Z".into(),
            pass_threshold: 7.0,
            repeat: 2,
            concurrency: 1,
            runs_in_flight: 2,
            duration_ms: 3000,
            summary: SimSummary {
                runs: 3,
                passed: 1,
                failed: 1,
                simulator_fault: 0,
                errors: 1,
                failed_by_check: 1,
                failed_by_judge: 0,
                judge_passed_failed_check: 0,
                uncertain: 0,
                mean_overall: Some(7.0),
                pass_rate: Some(0.5),
                pass_rate_interval: None,
                pass_all_scenarios: Some((0, 1)),
            },
            gate: None,
            scenarios: ["a", "b"]
                .iter()
                .map(|id| assay_core::simulation::ScenarioSummary {
                    id: (*id).into(),
                    name: format!("Name {INJECT}"),
                    runs: 2,
                    scored: 2,
                    passed: 1,
                    mean: Some(7.0),
                    stddev: Some(1.0),
                    min: Some(6.0),
                    max: Some(8.0),
                    pass_all: Some(false),
                })
                .collect(),
            criteria: vec![CriterionSummary {
                id: "tone".into(),
                name: format!("Tone {INJECT}"),
                weight: 1.0,
                mean: Some(7.0),
                min: Some(6.0),
            }],
            runs,
            usage: Vec::new(),
            judge: None,
            baseline: None,
            rate_limits: Vec::new(),
            shard: None,
            merged: None,
        }
    }

    fn inert(html: &str, what: &str) {
        assert!(
            !html.contains("<script>alert") && !html.contains("<img src=x"),
            "{what}: markup got through"
        );
    }

    #[test]
    fn the_report_page_is_self_contained_escaped_and_marks_verdicts_in_words() {
        let r = report("anthropic/a", [8.0, 6.0]);
        let html = html(
            &r,
            &TranscriptFiles {
                dir: "transcripts/x".into(),
            },
        );
        inert(&html, "report");
        for needle in ["<script", "<link", "src=\"http", "@import", "url("] {
            assert!(!html.contains(needle), "{needle}");
        }
        assert!(
            html.contains("✓ pass") && html.contains("✗ FAIL (check)") && html.contains("! ERROR")
        );
        assert!(html.contains("href=\"transcripts/x/a-1.json\""));
        assert!(
            !html.contains("transcripts/x/b-1.json"),
            "the errored run has no transcript"
        );
        // Heat map: scenario a's tone over its two scored runs (8 and 6) is 7.0; b has none.
        assert!(html.contains("title=\"Tone &lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;: 7.00 over 2 run(s)\">7.0</td>"));
        assert!(html.contains("<td class=\"num none\">–</td>"));
        for id in ["id=\"errors\"", "id=\"failed\"", "id=\"check-table\""] {
            assert!(html.contains(id), "{id}");
        }
        let t = transcript_body(&r, &r.runs[1], Ok(r.runs[1].transcript.as_ref().unwrap()));
        inert(&t, "transcript");
        assert!(t.contains("<details class=\"tool error\" id=\"call-1\">"));
        assert!(t.contains("✗ error") && t.contains("7 ms"));
        assert!(t.contains("read from tool s.get"));
        let missing = transcript_body(&r, &r.runs[2], Err(format!("no transcript {INJECT}")));
        inert(&missing, "missing transcript");
        assert!(missing.contains("id=\"no-transcript\""));
    }

    #[test]
    fn the_comparison_renders_compare_reports_with_marks() {
        let (a, b) = (
            report("anthropic/a", [8.0, 7.5]),
            report("openai/<b>", [5.0, 6.5]),
        );
        let labelled = vec![("a".to_owned(), &a), ("b".to_owned(), &b)];
        let c = assay_core::simulation::compare_reports(&labelled);
        let body = compare_body(&[a.clone(), b.clone()], &c);
        inert(&body, "comparison");
        assert!(body.contains("openai/&lt;b&gt;"));
        assert!(body.contains("class=\"num pass\"") && body.contains("✓"));
        assert!(compare_html(&[a, b], &c).starts_with("<!doctype html>"));
    }

    /// Issue 29: a trajectory check on the transcript page links the call that broke it to
    /// that call's panel, and the Markdown names its kind.
    #[test]
    fn a_trajectory_check_links_the_call_that_broke_it() {
        let mut r = report("anthropic/a", [8.0, 6.0]);
        r.runs[1].checks.push(CheckResult {
            name: format!("trajectory: order {INJECT}"),
            status: CheckStatus::Failed,
            details: vec![format!("add (call 1, turn 2) came before {INJECT}")],
            advisory: false,
            source: Some("the assistant's tool calls".into()),
            state: None,
            kind: assay_core::simulation::CheckKind::Trajectory,
            calls: vec![assay_core::simulation::CallRef {
                call: 1,
                turn: 2,
                id: "c1".into(),
                name: format!("add {INJECT}"),
            }],
        });
        let t = transcript_body(&r, &r.runs[1], Ok(r.runs[1].transcript.as_ref().unwrap()));
        inert(&t, "transcript");
        assert!(t.contains("<p class=\"calls\">Broken by <a href=\"#call-1\">add &lt;script&gt;"));
        assert!(t.contains("(call 1, turn 2)</a>"));
        assert!(t.contains("checked the assistant's tool calls"));
        assert!(t.contains("id=\"call-1\""), "the anchor it links to");
        let md = markdown(&r);
        assert!(
            md.contains("- trajectory check **trajectory: order"),
            "{md}"
        );
    }

    /// Issue 29: each turn shows what its model calls took and cost, and the conversation its
    /// totals per role, on the transcript page and in the Markdown report.
    #[test]
    fn turns_show_their_latency_tokens_and_cost() {
        use assay_core::simulation::TurnUsage;
        let mut r = report("anthropic/a", [8.0, 6.0]);
        let t = r.runs[0].transcript.as_mut().unwrap();
        t.turns[0].usage = Some(TurnUsage {
            calls: 2,
            cache_hits: 0,
            latency_ms: Some(450),
            input_tokens: 80,
            output_tokens: 12,
            cost_usd: None,
        });
        t.turns[1].usage = Some(TurnUsage {
            calls: 1,
            cache_hits: 0,
            latency_ms: Some(1_234),
            input_tokens: 350,
            output_tokens: 120,
            cost_usd: Some(0.001_23),
        });
        let page = transcript_body(&r, &r.runs[0], Ok(r.runs[0].transcript.as_ref().unwrap()));
        assert!(
            page.contains(
                "turn 2 · t · <span class=\"usage\">1.2 s · 350→120 tokens · $0.0012</span>"
            ),
            "{page}"
        );
        assert!(
            page.contains("450 ms · 2 calls · 80→12 tokens</span>"),
            "{page}"
        );
        assert!(page.contains(
            "Totals: model under test 1.2 s · 350→120 tokens · $0.0012; simulated user 450 ms · 2 calls · 80→12 tokens · cost unknown</p>"
        ));
        let md = markdown(&r);
        assert!(
            md.contains("> ⏱ 1.2 s · 350→120 tokens · $0.0012\n>"),
            "{md}"
        );
        assert!(md.contains("Totals: model under test 1.2 s"), "{md}");
        // The other run's transcript predates the measurements: no line, no totals.
        let old = transcript_body(&r, &r.runs[1], Ok(r.runs[1].transcript.as_ref().unwrap()));
        assert!(!old.contains("class=\"usage\"") && !old.contains("Totals:"));

        // A cached turn took no measured time.
        let cached = TurnUsage {
            calls: 1,
            cache_hits: 1,
            latency_ms: None,
            input_tokens: 10,
            output_tokens: 2,
            cost_usd: Some(0.000_01),
        };
        assert_eq!(
            usage_line(&cached, false),
            "cached · 10→2 tokens · <$0.0001"
        );
        let mut two = cached.clone();
        two.add(&TurnUsage {
            cache_hits: 0,
            latency_ms: Some(2_000),
            cost_usd: Some(0.0),
            ..cached.clone()
        });
        assert_eq!(
            usage_line(&two, true),
            "1 of 2 calls cached · 2 calls · 20→4 tokens · <$0.0001"
        );
    }

    #[test]
    fn table_cells_stay_on_one_line() {
        assert_eq!(one_line("a\n b | c", 100), "a b \\| c");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }
}
