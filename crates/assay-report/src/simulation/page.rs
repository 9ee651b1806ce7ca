//! A simulation report as HTML: the web UI's report page and the self-contained
//! `report_<stamp>.html` share [`body`]; [`transcript_body`] is a run's transcript with the
//! judge's scores and reasoning and the state checks beside it; [`compare_body`] is the
//! comparison of several reports. Verdicts are words and symbols as well as colours.
//!
//! Every string from the record (scenario names, turns, tool arguments and results, the
//! judge's reasoning, check details, what checks read) goes through [`escape`].

use std::fmt::Write as _;

use assay_core::simulation::{
    CheckStatus, FailedBy, Judgement, ScenarioRun, SimComparison, SimReport, Speaker, Transcript,
    Verdict, check_tally, criteria_by_scenario, failed_checks,
};

use super::{
    baseline_lines, gate_line, judge_line, mark, pair_lines, pass_rate, pct, score, usage_line,
    usage_totals, verdict_with_cause, verdict_word, with_interval,
};
use crate::common::escape;

/// Where a report's links go: the web UI links each run's transcript page; the saved file
/// links the transcript files beside it ([`TranscriptFiles`]).
pub trait SimLinks {
    /// A run's transcript.
    fn transcript(&self, run: &ScenarioRun) -> Option<String>;
}

/// Links to the transcript files of a saved report (`<dir>/<scenario>-<repeat>.json`,
/// relative to the report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptFiles {
    /// The transcripts' folder, relative to the report (`transcripts/<stamp>`).
    pub dir: String,
}

impl SimLinks for TranscriptFiles {
    fn transcript(&self, run: &ScenarioRun) -> Option<String> {
        run.transcript.as_ref()?;
        Some(format!(
            "{}/{}-{}.json",
            self.dir, run.scenario_id, run.repeat
        ))
    }
}

/// The self-contained HTML document of a report (`report_<stamp>.html`).
pub fn html(report: &SimReport, links: &dyn SimLinks) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>assay simulation {} — {}</title>\n<style>\nbody{{font:15px/1.45 system-ui,-apple-system,\"Segoe UI\",sans-serif;color:#1d2127;margin:0 auto;max-width:76rem;padding:1.5rem}}\n{}</style></head>\n<body>\n{}</body></html>\n",
        escape(&report.suite),
        escape(&report.model),
        crate::common::STYLE,
        body(report, links)
    )
}

/// A verdict as a badge: a symbol and a word (never colour alone).
fn badge(run: &ScenarioRun) -> String {
    let (class, sign) = match run.verdict {
        Verdict::Pass => ("pass", "✓"),
        Verdict::Fail => ("fail", "✗"),
        Verdict::SimulatorFault => ("fault", "⚑"),
        Verdict::Uncertain => ("uncertain", "?"),
        Verdict::Error => ("error", "!"),
    };
    format!(
        "<span class=\"verdict v-{class}\">{sign} {}</span>",
        escape(&verdict_with_cause(run))
    )
}

fn linked(links: &dyn SimLinks, run: &ScenarioRun, inner: &str) -> String {
    match links.transcript(run) {
        Some(h) => format!("<a href=\"{}\">{inner}</a>", escape(&h)),
        None => inner.to_owned(),
    }
}

fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// The heat map's shade for a 0–10 score (five steps; the number is always written too).
fn heat(v: f64) -> &'static str {
    match v {
        v if v >= 9.0 => "h4",
        v if v >= 7.5 => "h3",
        v if v >= 6.0 => "h2",
        v if v >= 4.0 => "h1",
        _ => "h0",
    }
}

/// The report's content, `<div class="report">…</div>`, for the page and the file.
pub fn body(report: &SimReport, links: &dyn SimLinks) -> String {
    let s = &report.summary;
    let mut out = String::from("<div class=\"report simulation\">\n");
    let _ = writeln!(
        out,
        "<h1>Simulation <code>{}</code></h1>",
        escape(&report.suite)
    );
    let _ = writeln!(
        out,
        "<p class=\"meta\">model under test <code>{}</code> · simulated user <code>{}</code> · judge <code>{}</code> · {} · {} run(s) per scenario · pass threshold {:.1} · {:.1} s</p>",
        escape(&report.model),
        escape(&report.simulator_model),
        escape(&report.evaluator_model),
        escape(&report.generated_at),
        report.repeat,
        report.pass_threshold,
        report.duration_ms as f64 / 1000.0
    );
    let _ = write!(
        out,
        "<div class=\"cards\"><div class=\"card\"><b>{}</b><span>runs</span></div><div class=\"card\"><b>{}</b><span>✓ passed</span></div><div class=\"card\"><b>{}</b><span>✗ failed ({} by a check, {} by the judge)</span></div>",
        s.runs, s.passed, s.failed, s.failed_by_check, s.failed_by_judge
    );
    if s.uncertain > 0 {
        let _ = write!(
            out,
            "<div class=\"card\"><b>{}</b><span>? uncertain (apart)</span></div>",
            s.uncertain
        );
    }
    let _ = writeln!(
        out,
        "<div class=\"card\"><b>{}</b><span>⚑ simulator at fault (apart)</span></div><div class=\"card\"><b>{}</b><span>! errors (apart)</span></div><div class=\"card\"><b>{}</b><span>mean overall</span></div><div class=\"card\"><b>{}</b><span>pass rate</span></div>{}</div>",
        s.simulator_fault,
        s.errors,
        score(s.mean_overall),
        escape(&pass_rate(report)),
        match (report.repeat, s.pass_all_scenarios) {
            (k, Some((all, of))) if k > 1 => format!(
                "<div class=\"card\"><b>{all}/{of}</b><span>scenarios pass^{k}</span></div>"
            ),
            _ => String::new(),
        }
    );
    if s.judge_passed_failed_check > 0 {
        let _ = writeln!(
            out,
            "<p class=\"notice\">The judge passed {} run(s) whose state check failed: it was fooled by the reply; the check decided.</p>",
            s.judge_passed_failed_check
        );
    }
    if let Some(g) = &report.gate {
        let _ = writeln!(
            out,
            "<p id=\"gate\"><strong>{}</strong></p>",
            escape(&gate_line(g))
        );
    }
    if let Some(b) = &report.baseline {
        out.push_str("<ul id=\"baseline\">");
        for line in baseline_lines(b) {
            let _ = write!(out, "<li>{}</li>", escape(line.trim()));
        }
        out.push_str("</ul>\n");
    }
    if let Some(line) = judge_line(report) {
        let _ = writeln!(out, "<p class=\"meta\">{}</p>", escape(&line));
    }
    scenarios(&mut out, report, links);
    criteria(&mut out, report);
    checks(&mut out, report, links);
    apart(&mut out, report, links);
    all_runs(&mut out, report, links);
    usage(&mut out, report);
    out.push_str("</div>\n");
    out
}

fn scenarios(out: &mut String, report: &SimReport, links: &dyn SimLinks) {
    let _ = writeln!(
        out,
        "<h2 id=\"scenarios\">Scenarios</h2>\n<table id=\"scenario-table\"><thead><tr><th>Scenario</th><th>Verdicts (each run; click for its transcript)</th><th class=\"num\">Mean</th><th>Spread (sd, min–max)</th><th class=\"num\">Passed</th><th>pass^{}</th></tr></thead><tbody>",
        report.repeat
    );
    for sc in &report.scenarios {
        let verdicts: Vec<String> = report
            .runs
            .iter()
            .filter(|r| r.scenario_id == sc.id)
            .map(|r| linked(links, r, &badge(r)))
            .collect();
        let _ = writeln!(
            out,
            "<tr><td>{} <code>{}</code></td><td class=\"badges\">{}</td><td class=\"num\">{}</td><td>{} ({}–{})</td><td class=\"num\">{}/{}</td><td>{}</td></tr>",
            escape(&sc.name),
            escape(&sc.id),
            verdicts.join(" "),
            score(sc.mean),
            score(sc.stddev),
            score(sc.min),
            score(sc.max),
            sc.passed,
            sc.runs,
            match sc.pass_all {
                Some(true) => "✓ every run",
                Some(false) => "✗ not every run",
                None => "– (a run has no verdict)",
            }
        );
    }
    out.push_str("</tbody></table>\n");
}

fn criteria(out: &mut String, report: &SimReport) {
    out.push_str("<h2 id=\"criteria\">Criteria</h2>\n<p class=\"meta\">The mean score (0–10) of each criterion over each scenario's scored runs; darker is higher, and the number is written in every cell.</p>\n<div class=\"table-scroll\"><table id=\"heatmap\" class=\"heatmap\"><thead><tr><th>Scenario</th>");
    for c in &report.criteria {
        let _ = write!(
            out,
            "<th class=\"num\" title=\"{}\">{}</th>",
            escape(&c.id),
            escape(&c.name)
        );
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in criteria_by_scenario(report) {
        let _ = write!(
            out,
            "<tr><th scope=\"row\">{}</th>",
            escape(&row.scenario_name)
        );
        for (c, cell) in report.criteria.iter().zip(&row.cells) {
            match cell {
                Some((mean, n)) => {
                    let _ = write!(
                        out,
                        "<td class=\"num {}\" title=\"{}: {mean:.2} over {n} run(s)\">{mean:.1}</td>",
                        heat(*mean),
                        escape(&c.name)
                    );
                }
                None => out.push_str("<td class=\"num none\">–</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("<tr class=\"all\"><th scope=\"row\">all runs (weight)</th>");
    for c in &report.criteria {
        let _ = write!(
            out,
            "<td class=\"num\">{} ({:.2})</td>",
            score(c.mean),
            c.weight
        );
    }
    out.push_str("</tr></tbody></table></div>\n");
}

fn checks(out: &mut String, report: &SimReport, links: &dyn SimLinks) {
    let tally = check_tally(report);
    out.push_str("<h2 id=\"checks\">State checks</h2>\n");
    if tally.is_empty() {
        out.push_str("<p class=\"meta\">The suite has no expected-state checks.</p>\n");
        return;
    }
    out.push_str("<p class=\"meta\">Objective checks of the state after each conversation; a failed required check fails the run, whatever the judge scored.</p>\n<table id=\"check-table\"><thead><tr><th>Check</th><th class=\"num\">✓ Passed</th><th class=\"num\">✗ Failed</th><th class=\"num\">! Could not read</th></tr></thead><tbody>\n");
    for t in &tally {
        let _ = writeln!(
            out,
            "<tr><td>{}{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&t.name),
            if t.advisory {
                " <span class=\"tag\">advisory</span>"
            } else {
                ""
            },
            t.passed,
            t.failed,
            t.errors
        );
    }
    out.push_str("</tbody></table>\n");
    let failing: Vec<(&ScenarioRun, &assay_core::simulation::CheckResult)> = report
        .runs
        .iter()
        .flat_map(|r| failed_checks(r).map(move |c| (r, c)))
        .collect();
    if failing.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3>Checks that failed or could not read the state ({})</h3>\n<table><thead><tr><th>Run</th><th>Check</th><th>Status</th><th>Why</th></tr></thead><tbody>",
        failing.len()
    );
    for (run, c) in failing {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            linked(
                links,
                run,
                &format!("{} #{}", escape(&run.scenario_id), run.repeat)
            ),
            escape(&c.name),
            check_status(c),
            escape(&c.details.join("; "))
        );
    }
    out.push_str("</tbody></table>\n");
}

fn check_status(c: &assay_core::simulation::CheckResult) -> String {
    let word = match c.status {
        CheckStatus::Passed => "✓ passed",
        CheckStatus::Failed => "✗ failed",
        CheckStatus::Error => "! could not read",
    };
    if c.advisory {
        format!("{word} (advisory)")
    } else {
        word.to_owned()
    }
}

/// Runs that need a look, and the runs kept apart from every mean (errors, simulator faults,
/// uncertain judgements), each in its own section.
fn apart(out: &mut String, report: &SimReport, links: &dyn SimLinks) {
    let runs = |v: Verdict| {
        report
            .runs
            .iter()
            .filter(|r| r.verdict == v)
            .collect::<Vec<_>>()
    };
    let sections: [(&str, &str, Vec<&ScenarioRun>); 4] = [
        ("failed", "Failed runs", runs(Verdict::Fail)),
        (
            "errors",
            "Errors (no verdict; left out of every mean)",
            runs(Verdict::Error),
        ),
        (
            "faults",
            "Simulated user at fault (left out of every mean)",
            runs(Verdict::SimulatorFault),
        ),
        (
            "uncertain",
            "Uncertain: the judge's samples disagree (left out)",
            runs(Verdict::Uncertain),
        ),
    ];
    for (id, title, list) in sections {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "<h2 id=\"{id}\">{title} ({})</h2>\n<ul class=\"runs\">",
            list.len()
        );
        for run in list {
            let why = match (run.verdict, run.failed_by) {
                (Verdict::Error, _) => run.error.clone().unwrap_or_default(),
                (Verdict::SimulatorFault, _) => run
                    .judgement
                    .as_ref()
                    .map(|j| j.simulator_issue.clone())
                    .unwrap_or_default(),
                (Verdict::Fail, Some(FailedBy::Check)) | (Verdict::Uncertain, _) => {
                    let judge = match run.judge_verdict {
                        Some(v) if run.verdict == Verdict::Fail => {
                            format!(" (the judge alone said {})", verdict_word(v))
                        }
                        _ => String::new(),
                    };
                    format!("{}{judge}", run.reason.clone().unwrap_or_default())
                }
                _ => run
                    .judgement
                    .as_ref()
                    .and_then(|j| j.scores.iter().min_by(|a, b| a.score.total_cmp(&b.score)))
                    .map(|c| {
                        format!(
                            "weakest: {} {:.1}/10: {}",
                            c.name,
                            c.score,
                            one_line(&c.reasoning, 240)
                        )
                    })
                    .unwrap_or_default(),
            };
            let _ = writeln!(
                out,
                "<li>{} {} ({}): {}</li>",
                linked(
                    links,
                    run,
                    &format!(
                        "<strong>{} #{}</strong>",
                        escape(&run.scenario_id),
                        run.repeat
                    )
                ),
                badge(run),
                score(run.overall),
                escape(&one_line(&why, 400))
            );
        }
        out.push_str("</ul>\n");
    }
}

fn all_runs(out: &mut String, report: &SimReport, links: &dyn SimLinks) {
    let _ = writeln!(
        out,
        "<h2 id=\"runs\">All runs ({})</h2>\n<div class=\"table-scroll\"><table id=\"run-table\"><thead><tr><th>Scenario</th><th class=\"num\">Repeat</th><th>Verdict</th><th class=\"num\">Overall</th><th class=\"num\">Turns</th><th class=\"num\">Tool calls (errors)</th><th class=\"num\">Seconds</th><th>Transcript</th></tr></thead><tbody>",
        report.runs.len()
    );
    for run in &report.runs {
        let (turns, calls, errors) = run.transcript.as_ref().map_or((0, 0, 0), |t| {
            (
                t.turns.len(),
                t.tool_calls().count(),
                t.tool_calls().filter(|c| c.is_error).count(),
            )
        });
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{turns}</td><td class=\"num\">{calls} ({errors})</td><td class=\"num\">{:.1}</td><td>{}</td></tr>",
            escape(&run.scenario_name),
            run.repeat,
            badge(run),
            score(run.overall),
            run.duration_ms as f64 / 1000.0,
            if run.transcript.is_some() {
                linked(links, run, "transcript")
            } else {
                "none".to_owned()
            }
        );
    }
    out.push_str("</tbody></table></div>\n");
}

fn usage(out: &mut String, report: &SimReport) {
    if !report.usage.is_empty() {
        usage_table(out, report);
    }
    out.push_str(&crate::limits::html(&report.rate_limits, escape));
}

fn usage_table(out: &mut String, report: &SimReport) {
    out.push_str("<h2 id=\"usage\">Model usage</h2>\n<table><thead><tr><th>Model</th><th class=\"num\">Calls</th><th class=\"num\">From cache</th><th class=\"num\">Input tokens</th><th class=\"num\">Output tokens</th><th class=\"num\">Cost</th></tr></thead><tbody>\n");
    for u in &report.usage {
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&u.model),
            u.calls,
            u.cache_hits,
            u.input_tokens,
            u.output_tokens,
            u.cost_usd
                .map_or_else(|| "unknown".to_owned(), |c| format!("${c:.4}"))
        );
    }
    out.push_str("</tbody></table>\n");
}

/// The conversation of a run, its judgement and its checks. `transcript` is the transcript
/// (from the report, or its file), or why there is none to show.
pub fn transcript_body(
    report: &SimReport,
    run: &ScenarioRun,
    transcript: Result<&Transcript, String>,
) -> String {
    let mut out = String::from("<div class=\"report simulation transcript\">\n");
    let _ = writeln!(
        out,
        "<h1>{} <code>{}</code> #{}</h1>",
        escape(&run.scenario_name),
        escape(&run.scenario_id),
        run.repeat
    );
    let _ = write!(
        out,
        "<p class=\"meta\">{} · overall {} · {:.1} s · model <code>{}</code>",
        badge(run),
        score(run.overall),
        run.duration_ms as f64 / 1000.0,
        escape(&report.model)
    );
    if let Some(j) = run.judge_verdict
        && j != run.verdict
    {
        let _ = write!(out, " · the judge alone said {}", verdict_word(j));
    }
    out.push_str("</p>\n");
    if let Some(r) = &run.reason {
        let _ = writeln!(out, "<p class=\"notice\">Why: {}</p>", escape(r));
    }
    if let Some(e) = &run.error {
        let _ = writeln!(
            out,
            "<p class=\"notice bad\" role=\"alert\">Error: {}</p>",
            escape(e)
        );
    }
    for w in &run.warnings {
        let _ = writeln!(out, "<p class=\"meta\">⚠ {}</p>", escape(w));
    }
    out.push_str(
        "<div class=\"split\"><section class=\"conversation\" aria-label=\"Transcript\">\n",
    );
    match transcript {
        Ok(t) => conversation(&mut out, t),
        Err(why) => {
            let _ = writeln!(
                out,
                "<p class=\"notice bad\" role=\"alert\" id=\"no-transcript\">{}</p>",
                escape(&why)
            );
        }
    }
    out.push_str("</section>\n<aside class=\"judging\" aria-label=\"Judgement and checks\">\n");
    match &run.judgement {
        Some(j) => judgement(&mut out, j, report.pass_threshold),
        None => out.push_str("<h2>Judge</h2><p class=\"meta\">Not judged.</p>\n"),
    }
    if !run.judge_samples.is_empty() {
        samples(&mut out, &run.judge_samples);
    }
    run_checks(&mut out, run);
    out.push_str("</aside></div>\n</div>\n");
    out
}

fn conversation(out: &mut String, t: &Transcript) {
    let _ = writeln!(
        out,
        "<p class=\"meta\">{} turns, {} tool calls; ended by {}{}</p>",
        t.turns.len(),
        t.tool_calls().count(),
        escape(&t.ended_by.to_string()),
        t.error
            .as_deref()
            .map_or_else(String::new, |e| format!(": {}", escape(e)))
    );
    if let Some(totals) = usage_totals(t) {
        let _ = writeln!(
            out,
            "<p class=\"meta\" id=\"usage-totals\">Totals: {}</p>",
            escape(&totals)
        );
    }
    let mut call_no = 0usize;
    for (i, turn) in t.turns.iter().enumerate() {
        let (class, who) = match turn.role {
            Speaker::User => ("user", "Simulated user"),
            Speaker::Assistant => ("assistant", "Assistant"),
        };
        let _ = write!(
            out,
            "<article class=\"turn {class}\" id=\"turn-{}\"><header><b>{who}</b> <span class=\"meta\">turn {} · {}{}</span></header>",
            i + 1,
            i + 1,
            escape(&turn.timestamp),
            turn.usage.as_ref().map_or_else(String::new, |u| format!(
                " · <span class=\"usage\">{}</span>",
                escape(&usage_line(u, false))
            ))
        );
        for call in &turn.tool_calls {
            call_no += 1;
            let args = serde_json::to_string_pretty(&call.arguments)
                .unwrap_or_else(|_| call.arguments.to_string());
            let _ = write!(
                out,
                "<details class=\"tool{}\" id=\"call-{call_no}\"><summary>🔧 <code>{}</code> <span class=\"tag\">{}</span> · {} ms{}</summary><h4>Arguments</h4><pre class=\"args\">{}</pre><h4>Result</h4><pre class=\"result\">{}</pre></details>",
                if call.is_error { " error" } else { "" },
                escape(&call.name),
                if call.is_error { "✗ error" } else { "✓ ok" },
                call.duration_ms,
                call.server.as_deref().map_or_else(
                    || " · no server".to_owned(),
                    |s| format!(" · server {}", escape(s))
                ),
                escape(&args),
                escape(&call.result)
            );
        }
        let _ = writeln!(
            out,
            "<div class=\"text\">{}</div></article>",
            escape(&turn.content)
        );
    }
}

fn judgement(out: &mut String, j: &Judgement, threshold: f64) {
    let _ = writeln!(
        out,
        "<h2>Judge</h2>\n<p><strong>overall {:.2}</strong> (pass at {:.1}) · {} call(s)</p>",
        j.overall, threshold, j.calls
    );
    out.push_str("<ul class=\"criteria\">");
    for c in &j.scores {
        let w = (c.score.clamp(0.0, 10.0) * 10.0).round();
        let _ = write!(
            out,
            "<li class=\"criterion\"><div><b>{}</b> <span class=\"score\">{:.1}/10</span> <span class=\"meta\">weight {:.2} · {}</span></div><div class=\"meter\" aria-hidden=\"true\"><span style=\"width:{w}%\"></span></div><p class=\"reasoning\">{}</p></li>",
            escape(&c.name),
            c.score,
            c.weight,
            escape(&c.scale.to_string()),
            escape(&c.reasoning)
        );
    }
    out.push_str("</ul>\n");
    if !j.summary.is_empty() {
        let _ = writeln!(out, "<p><b>Summary:</b> {}</p>", escape(&j.summary));
    }
    let _ = writeln!(
        out,
        "<p><b>Simulated user:</b> {}{}</p>",
        if j.simulator_kept_persona {
            "✓ kept its persona"
        } else {
            "⚑ broke its persona"
        },
        if j.simulator_issue.is_empty() {
            String::new()
        } else {
            format!(": {}", escape(&j.simulator_issue))
        }
    );
}

fn samples(out: &mut String, samples: &[Judgement]) {
    let _ = write!(
        out,
        "<h3>Judge samples ({})</h3><table><thead><tr><th class=\"num\">#</th><th class=\"num\">Overall</th>",
        samples.len()
    );
    if let Some(first) = samples.first() {
        for c in &first.scores {
            let _ = write!(out, "<th class=\"num\">{}</th>", escape(&c.name));
        }
    }
    out.push_str("</tr></thead><tbody>");
    for (i, s) in samples.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td class=\"num\">{}</td><td class=\"num\">{:.2}</td>",
            i + 1,
            s.overall
        );
        for c in &s.scores {
            let _ = write!(out, "<td class=\"num\">{:.1}</td>", c.score);
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
}

fn run_checks(out: &mut String, run: &ScenarioRun) {
    out.push_str("<h2>State checks</h2>\n");
    if run.checks.is_empty() {
        out.push_str("<p class=\"meta\">None for this scenario.</p>\n");
        return;
    }
    for c in &run.checks {
        let _ = write!(
            out,
            "<section class=\"check\"><h3>{} — {}</h3>",
            escape(&c.name),
            check_status(c)
        );
        if c.kind == assay_core::simulation::CheckKind::Trajectory {
            out.push_str("<p class=\"meta\">checked the assistant's tool calls</p>");
        } else if c.kind == assay_core::simulation::CheckKind::Assertion {
            out.push_str("<p class=\"meta\">checked the assistant's final reply</p>");
        } else if let Some(src) = &c.source {
            let _ = write!(out, "<p class=\"meta\">read from {}</p>", escape(src));
        }
        if !c.details.is_empty() {
            out.push_str("<ul>");
            for d in &c.details {
                let _ = write!(out, "<li>{}</li>", escape(d));
            }
            out.push_str("</ul>");
        }
        if !c.calls.is_empty() {
            let _ = write!(
                out,
                "<p class=\"calls\">{} ",
                if c.status == CheckStatus::Passed {
                    "Satisfied by"
                } else {
                    "Broken by"
                }
            );
            for (i, call) in c.calls.iter().enumerate() {
                let _ = write!(
                    out,
                    "{}<a href=\"#call-{}\">{}</a>",
                    if i == 0 { "" } else { ", " },
                    call.call,
                    escape(&call.to_string())
                );
            }
            out.push_str("</p>");
        }
        match &c.state {
            None if c.kind == assay_core::simulation::CheckKind::Trajectory => {}
            Some(state) => {
                let _ = write!(
                    out,
                    "<details><summary>What it read</summary><pre>{}</pre></details>",
                    escape(state)
                );
            }
            None => out.push_str("<p class=\"meta\">What it read is not recorded.</p>"),
        }
        out.push_str("</section>\n");
    }
}

/// Models as columns, scenarios as rows: each cell the scenario's mean with its interval,
/// marked (✓ at or above the report's pass threshold, ~ within 1.5 below it, ✗ lower) as well
/// as coloured; then the reports' means, pass rates, errors and judges, and a verdict for every
/// pair. The web UI's comparison page and `assay simulate compare --html` both show it.
pub fn compare_body(reports: &[SimReport], c: &SimComparison) -> String {
    let mut h = String::from("<div class=\"report compare\">\n<h1>Model comparison</h1>\n");
    for w in &c.warnings {
        let _ = write!(
            h,
            "<p class=\"notice warn\"><b>Warning:</b> {}</p>",
            escape(w)
        );
    }
    h.push_str("<p>Mean overall score (0-10) per scenario over scored runs, with its 95% bootstrap interval; green (✓) passes the report's threshold, amber (~) is within 1.5 below it, red (✗) is lower.</p>\n<table id=\"comparison\"><thead><tr><th>scenario</th>");
    for r in reports {
        let _ = write!(h, "<th>{}</th>", escape(&r.model));
    }
    h.push_str("</tr></thead><tbody>\n");
    for row in &c.scenarios {
        let _ = write!(
            h,
            "<tr><td>{} (<code>{}</code>)</td>",
            escape(&row.name),
            escape(&row.id)
        );
        for (r, cell) in reports.iter().zip(&row.cells) {
            let (class, sign) = match mark(r, cell.as_ref()) {
                "pass" => ("pass", "✓"),
                "near" => ("near", "~"),
                "fail" => ("fail", "✗"),
                _ => ("none", ""),
            };
            let _ = write!(
                h,
                "<td class=\"num {class}\">{} {sign}</td>",
                escape(&with_interval(cell.as_ref()))
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("<tr><th>mean overall</th>");
    for cr in &c.reports {
        let _ = write!(
            h,
            "<td class=\"num\"><b>{}</b></td>",
            cr.mean_overall.as_ref().map_or_else(
                || "–".to_owned(),
                |i| format!("{:.2} [{:.2}–{:.2}]", i.estimate, i.low, i.high)
            )
        );
    }
    h.push_str("</tr>\n<tr><th>pass rate</th>");
    for (r, cr) in reports.iter().zip(&c.reports) {
        let _ = write!(
            h,
            "<td class=\"num\">{}</td>",
            cr.pass_rate.as_ref().map_or_else(
                || pct(r.summary.pass_rate),
                |i| format!(
                    "{:.0}% [{:.0}–{:.0}%]",
                    i.estimate * 100.0,
                    i.low * 100.0,
                    i.high * 100.0
                )
            )
        );
    }
    h.push_str("</tr>\n<tr><th>errors / simulator at fault</th>");
    for r in reports {
        let _ = write!(
            h,
            "<td class=\"num\">{} / {}</td>",
            r.summary.errors, r.summary.simulator_fault
        );
    }
    h.push_str("</tr>\n<tr><th>judge</th>");
    for cr in &c.reports {
        let _ = write!(
            h,
            "<td>{} {}</td>",
            escape(&cr.evaluator_model),
            escape(
                cr.judge_version
                    .as_deref()
                    .unwrap_or("(version unrecorded)")
            )
        );
    }
    h.push_str("</tr>\n</tbody></table>\n");
    let lines = pair_lines(reports, c);
    if !lines.is_empty() {
        h.push_str("<h2 id=\"verdicts\">Verdicts</h2><p class=\"meta\">Over all scenarios: a paired bootstrap of the scenarios' means; per scenario: a bootstrap of the two reports' runs. Better or worse when the 95% interval of the change excludes 0.</p><ul>");
        for line in lines {
            let _ = write!(h, "<li>{}</li>", escape(&line));
        }
        h.push_str("</ul>");
    }
    h.push_str("</div>\n");
    h
}
