//! An experiment as HTML: the web UI's experiment page and the self-contained
//! `experiments/<name>/report.html` share [`body`]; a trial's page is [`trial_body`]. Charts are
//! inline SVG drawn here (no script): the optimization history of each objective with the best
//! so far, and the Pareto front as a scatter of the first two objectives with the front, the
//! baseline and the best trial marked by shape and text as well as colour.
//!
//! Every string from the record (names, prompts, questions, answers, notes, verdicts) goes
//! through [`escape`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use assay_core::experiment::{
    CaseResult, Comparison, ExperimentProgress, ExperimentReport, ExperimentState, Metrics,
    ProposalStatus, TrialOutcome, TrialRecord, UsageTotals,
};

use crate::common::escape;
use crate::svg::{self, Plot, Shape};

/// What the experiment renderers take.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The record (finished, or what the journal holds so far).
    pub report: &'a ExperimentReport,
    /// Where the experiment stands.
    pub progress: &'a ExperimentProgress,
    /// Warnings about its files.
    pub warnings: &'a [String],
    /// Each agent's prompt texts by index, where known.
    pub prompts: &'a BTreeMap<String, Vec<Option<String>>>,
    /// Whether the study raced new combinations.
    pub racing: bool,
}

/// Where the page's links go. The web UI links trials, sort orders and the promotion review;
/// the self-contained file links nothing ([`NoLinks`]).
pub trait Links {
    /// Trial `n`'s page.
    fn trial(&self, _n: usize) -> Option<String> {
        None
    }
    /// The page with the trial table sorted by `key`.
    fn sort(&self, _key: &str, _desc: bool) -> Option<String> {
        None
    }
    /// The promotion review.
    fn promote(&self) -> Option<String> {
        None
    }
    /// The progress fragment a script may poll while the experiment runs.
    fn live(&self) -> Option<String> {
        None
    }
}

/// No links: the self-contained file.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLinks;

impl Links for NoLinks {}

/// The trial table's order: a column key (`number`, `value0`, `value1`, …, `correct`,
/// `composite`, `duration`, `outcome`) and a direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sort {
    /// The column.
    pub key: String,
    /// Largest first.
    pub desc: bool,
}

impl Default for Sort {
    fn default() -> Sort {
        Sort {
            key: "number".to_owned(),
            desc: false,
        }
    }
}

impl Sort {
    /// The order `key` names, for a report with `objectives` objective values; an unknown key
    /// is the default order.
    pub fn parse(key: Option<&str>, desc: bool, objectives: usize) -> Sort {
        let known = |k: &str| {
            matches!(
                k,
                "number" | "correct" | "composite" | "duration" | "outcome"
            ) || k
                .strip_prefix("value")
                .and_then(|i| i.parse::<usize>().ok())
                .is_some_and(|i| i < objectives)
        };
        match key {
            Some(k) if known(k) => Sort {
                key: k.to_owned(),
                desc,
            },
            _ => Sort::default(),
        }
    }
}

/// The whole self-contained HTML document of an experiment (`report.html`).
pub fn html(page: &Page<'_>) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>assay experiment {}</title>\n<style>\nbody{{font:15px/1.45 system-ui,-apple-system,\"Segoe UI\",sans-serif;color:#1d2127;margin:0 auto;max-width:76rem;padding:1.5rem}}\n{}</style></head>\n<body>\n{}</body></html>\n",
        escape(&page.report.name),
        crate::common::STYLE,
        body(page, &NoLinks, &Sort::default())
    )
}

fn usd(v: Option<f64>) -> String {
    v.map_or_else(|| "unknown".to_owned(), |c| format!("${c:.4}"))
}

fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

fn state_tag(state: ExperimentState) -> String {
    let mark = match state {
        ExperimentState::Running => "▶",
        ExperimentState::Interrupted => "⏸",
        ExperimentState::Halted => "✗",
        ExperimentState::Finished => "✓",
    };
    format!("<span class=\"state s-{state}\">{mark} {state}</span>")
}

/// The progress panel: the part of the page a running experiment's page refreshes.
pub fn progress_html(p: &ExperimentProgress) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<div class=\"cards\"><div class=\"card\"><b>{}</b><span>state</span></div><div class=\"card\"><b><span id=\"trials-done\">{}</span> / {}</b><span>trials done / requested</span></div><div class=\"card\"><b>{}</b><span>step</span></div>",
        state_tag(p.state),
        p.trials_done,
        p.trials_requested,
        escape(&p.step)
    );
    if p.state == ExperimentState::Running {
        let _ = write!(
            out,
            "<div class=\"card\"><b id=\"eta\">{}</b><span>study time left (at its pace so far)</span></div>",
            p.eta_seconds.map_or_else(|| "–".to_owned(), duration)
        );
    }
    let _ = write!(
        out,
        "<div class=\"card\"><b id=\"spend\">{}</b><span>spent</span></div></div>",
        usd(p.spent_usd)
    );
    let frac = if p.trials_requested == 0 {
        0.0
    } else {
        (p.trials_done as f64 / p.trials_requested as f64).min(1.0)
    };
    let _ = write!(
        out,
        "<p><progress max=\"{}\" value=\"{}\" aria-label=\"trials done\">{:.0}%</progress> {:.0}% of the trials",
        p.trials_requested,
        p.trials_done,
        frac * 100.0,
        frac * 100.0
    );
    if let Some(u) = &p.updated {
        let _ = write!(out, " · last written {}", escape(u));
    }
    if let Some(h) = &p.holder {
        let _ = write!(out, " · run by {}", escape(h));
    }
    out.push_str("</p>");
    if let Some(n) = &p.note {
        let _ = write!(out, "<p class=\"meta\">{}</p>", escape(n));
    }
    out
}

fn maximize(report: &ExperimentReport, i: usize) -> bool {
    !report
        .directions
        .get(i)
        .is_some_and(|d| d.trim_start().starts_with("minimize"))
}

fn objective_name(report: &ExperimentReport, i: usize) -> String {
    report.directions.get(i).map_or_else(
        || format!("objective {}", i + 1),
        |d| d.split_whitespace().nth(1).unwrap_or(d.as_str()).to_owned(),
    )
}

fn objectives(report: &ExperimentReport) -> usize {
    report
        .trials
        .iter()
        .map(|t| t.values.len())
        .max()
        .unwrap_or(0)
        .max(report.directions.len())
}

fn is_baseline_trial(t: &TrialRecord) -> bool {
    t.params.values().all(|&i| i == 0)
}

/// The trial's markers, in words.
fn markers(page: &Page<'_>, t: &TrialRecord) -> Vec<String> {
    let r = page.report;
    let mut m = Vec::new();
    match t.outcome {
        TrialOutcome::Complete => {
            if is_baseline_trial(t) {
                m.push("reused step 1 (baseline)".to_owned());
            } else if page.racing {
                m.push("racing: kept".to_owned());
            }
        }
        TrialOutcome::Duplicate => m.push(match t.duplicate_of {
            Some(d) => format!("duplicate of #{d}"),
            None => "duplicate".to_owned(),
        }),
        TrialOutcome::Pruned => m.push("pruned (racing)".to_owned()),
        TrialOutcome::Failed => m.push("failed".to_owned()),
    }
    if r.pareto_front.contains(&t.number) {
        m.push("Pareto front".to_owned());
    }
    if r.best_trial == Some(t.number) {
        m.push("best".to_owned());
    }
    m
}

fn outcome_word(o: TrialOutcome) -> &'static str {
    match o {
        TrialOutcome::Complete => "complete",
        TrialOutcome::Duplicate => "duplicate",
        TrialOutcome::Pruned => "pruned",
        TrialOutcome::Failed => "failed",
    }
}

fn metrics_of<'t>(report: &'t ExperimentReport, t: &'t TrialRecord) -> Option<&'t Metrics> {
    t.metrics.as_ref().or_else(|| {
        t.duplicate_of
            .and_then(|d| report.trials.iter().find(|o| o.number == d))
            .and_then(|o| o.metrics.as_ref())
    })
}

fn link(href: Option<String>, text: &str) -> String {
    match href {
        Some(h) => format!("<a href=\"{}\">{text}</a>", escape(&h)),
        None => text.to_owned(),
    }
}

/// The experiment's content, `<div class="report">…</div>`, for the page and the file.
pub fn body(page: &Page<'_>, links: &dyn Links, sort: &Sort) -> String {
    let r = page.report;
    let mut out = String::from("<div class=\"report experiment\">\n");
    let _ = writeln!(out, "<h1>Experiment <code>{}</code></h1>", escape(&r.name));
    let mut meta = String::new();
    if !r.started.is_empty() {
        let _ = write!(meta, "started {}", escape(&r.started));
    }
    if !r.finished.is_empty() {
        let _ = write!(meta, " · finished {}", escape(&r.finished));
    }
    let _ = write!(
        meta,
        " · target {} · grader <code>{}</code>{} · seed {} · {}",
        escape(&r.target),
        escape(&r.grader),
        r.grader_version
            .as_deref()
            .map_or_else(String::new, |v| format!(" (version {})", escape(v))),
        r.seed,
        escape(&r.search_mode)
    );
    let _ = writeln!(out, "<p class=\"meta\">{meta}</p>");
    let live = links
        .live()
        .filter(|_| page.progress.state == ExperimentState::Running);
    match live {
        Some(url) => {
            let _ = writeln!(
                out,
                "<section id=\"live\" data-live=\"{}\" aria-live=\"polite\">{}</section>",
                escape(&url),
                progress_html(page.progress)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "<section id=\"live\">{}</section>",
                progress_html(page.progress)
            );
        }
    }
    if !page.warnings.is_empty() {
        out.push_str("<ul class=\"warnings\">");
        for w in page.warnings {
            let _ = write!(out, "<li>⚠ {}</li>", escape(w));
        }
        out.push_str("</ul>\n");
    }
    setup(&mut out, r);
    comparisons(&mut out, page, links);
    out.push_str("<h2 id=\"history\">Optimization history</h2>\n");
    if r.trials.is_empty() {
        out.push_str("<p class=\"meta\">No trial has finished yet.</p>\n");
    } else {
        out.push_str("<p class=\"meta\">Each objective per trial: ● evaluated, ○ duplicate (values reused), ■ trial 0 (the baseline), × pruned by racing (no value); the line is the best so far.</p>\n<div class=\"charts\">");
        for i in 0..objectives(r) {
            out.push_str(&history(r, i, links));
        }
        out.push_str("</div>\n");
    }
    out.push_str("<h2 id=\"pareto\">Pareto front</h2>\n");
    if objectives(r) < 2 {
        out.push_str("<p class=\"meta\">One objective: no front to draw.</p>\n");
    } else if r.trials.iter().all(|t| t.values.len() < 2) {
        out.push_str("<p class=\"meta\">No trial has values yet.</p>\n");
    } else {
        let _ = writeln!(
            out,
            "<p class=\"meta\">{} on the front (◆, joined by the line) of {} trials with values (●); ■ the baseline, ◎ the best trial (best first objective, then second).</p>",
            r.pareto_front.len(),
            r.trials.iter().filter(|t| t.values.len() >= 2).count()
        );
        out.push_str(&pareto(r, links));
    }
    trials_table(&mut out, page, links, sort);
    prompts_section(&mut out, page);
    proposals_section(&mut out, r);
    disagreements_section(&mut out, r);
    usage_section(&mut out, r);
    promotion(&mut out, r, links);
    out.push_str("</div>\n");
    out
}

fn setup(out: &mut String, r: &ExperimentReport) {
    let data = |d: &assay_core::experiment::DataRef| {
        if d.cases == 0 && d.path.is_empty() {
            "not run yet".to_owned()
        } else {
            format!(
                "<code>{}</code> ({} cases, version {})",
                escape(&d.path),
                d.cases,
                escape(d.version.as_deref().unwrap_or("–"))
            )
        }
    };
    let _ = write!(
        out,
        "<h2>Set-up</h2>\n<table><tbody><tr><th>Objectives</th><td>{}</td></tr><tr><th>Agents</th><td>{}</td></tr><tr><th>Trials requested</th><td>{}</td></tr><tr><th>Optimization cases</th><td>{}</td></tr>",
        escape(&r.directions.join(", ")),
        escape(
            &r.agents
                .iter()
                .map(|(a, n)| format!("{a} ({n} prompt{})", if *n == 1 { "" } else { "s" }))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        r.trials_requested,
        data(&r.baseline.data)
    );
    if let Some(e) = &r.evaluation {
        let _ = write!(
            out,
            "<tr><th>Evaluation cases</th><td>{}</td></tr>",
            data(&e.data)
        );
    }
    let _ = writeln!(
        out,
        "<tr><th>Rubric threshold</th><td>{}</td></tr><tr><th>Correct answers counted by</th><td>{}</td></tr></tbody></table>",
        r.threshold,
        escape(
            r.correctness
                .as_deref()
                .unwrap_or("seed (either text contains the other)")
        )
    );
}

fn disagreements_section(out: &mut String, r: &ExperimentReport) {
    if r.disagreements.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h2 id=\"disagreements\">Where the correctness rule and the grader disagree ({})</h2>\n<p>The first objective counts an answer correct by the rule; the grader's own call sits beside it. Read these cases to decide which to trust.</p>\n<table><thead><tr><th>Step</th><th class=\"num\">Line</th><th>Answer</th><th>Expected</th><th>Rule</th><th>Grader</th></tr></thead><tbody>",
        r.disagreements.len()
    );
    for d in &r.disagreements {
        let c = super::disagreement_cells(d);
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c[0]),
            escape(&c[1]),
            escape(&c[2]),
            escape(&c[3]),
            escape(&c[4]),
            escape(&c[5])
        );
    }
    out.push_str("</tbody></table>\n");
}

fn metrics_cell(m: &Metrics) -> String {
    format!(
        "{}/{} correct ({:.0}%), composite {:.3}{}",
        m.factually_correct_count,
        m.cases,
        m.factual_correctness_percentage,
        m.average_composite_score,
        if m.errors > 0 {
            format!(", {} errors", m.errors)
        } else {
            String::new()
        }
    )
}

/// `significant` / `not significant` for people in a hurry, with the sentence beside it.
fn verdict_word(c: &Comparison) -> &'static str {
    let s = &c.significance;
    if s.correct_gain_significant || s.composite_gain_significant {
        "significant gain"
    } else {
        "no significant gain"
    }
}

fn comparisons(out: &mut String, page: &Page<'_>, links: &dyn Links) {
    let r = page.report;
    out.push_str("<h2 id=\"comparison\">Best against the baseline</h2>\n");
    if r.comparisons.is_empty() {
        let best = r
            .best_trial
            .and_then(|n| r.trials.iter().find(|t| t.number == n))
            .and_then(|t| metrics_of(r, t));
        match (best, r.baseline.cases.is_empty()) {
            (_, true) => out.push_str("<p class=\"meta\">The baseline has not finished yet.</p>\n"),
            (Some(b), false) => {
                let _ = writeln!(
                    out,
                    "<p>So far, on the optimization cases: baseline {} → best {} ({}). The comparison on both sets, with its significance, comes when the experiment finishes.</p>",
                    metrics_cell(&r.baseline.metrics),
                    metrics_cell(b),
                    link(
                        r.best_trial.and_then(|n| links.trial(n)),
                        &format!("trial {}", r.best_trial.unwrap_or(0))
                    )
                );
            }
            (None, false) => {
                let _ = writeln!(
                    out,
                    "<p>Baseline on the optimization cases: {}.</p>",
                    metrics_cell(&r.baseline.metrics)
                );
            }
        }
        return;
    }
    out.push_str("<table id=\"sets\"><thead><tr><th>Set</th><th>Baseline</th><th>Best</th><th>Verdict</th></tr></thead><tbody>\n");
    for c in &r.comparisons {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td><strong>{}</strong><br>{}</td></tr>",
            escape(&c.set),
            metrics_cell(&c.baseline),
            metrics_cell(&c.optimized),
            verdict_word(c),
            escape(&c.significance.verdict)
        );
    }
    out.push_str("</tbody></table>\n");
    for c in &r.comparisons {
        let s = &c.significance;
        let _ = write!(
            out,
            "<h3>{} set: the tests</h3>\n<ul><li>McNemar ({:?}) on {} pairs: {} correct only with the baseline, {} only with the best prompts, p = {:.4}</li>",
            escape(&c.set),
            s.mcnemar.method,
            s.pairs,
            s.mcnemar.baseline_only,
            s.mcnemar.optimized_only,
            s.mcnemar.p_value
        );
        if let Some(b) = s.bootstrap {
            let _ = write!(
                out,
                "<li>Paired bootstrap of the composite score ({} resamples, seed {}): mean difference {:+.3}, 95% interval [{:+.3}, {:+.3}], p = {:.4}</li>",
                b.resamples, b.seed, b.mean_difference, b.ci_low, b.ci_high, b.p_value
            );
        }
        match s.min_detectable_correct {
            Some(k) => {
                let _ = write!(
                    out,
                    "<li>Smallest detectable correctness gain here: {k} answers at α = {}</li>",
                    s.alpha
                );
            }
            None => {
                let _ = write!(
                    out,
                    "<li>{} pairs are too few for any correctness gain to be significant at α = {}</li>",
                    s.pairs, s.alpha
                );
            }
        }
        out.push_str("</ul>\n");
        let _ = writeln!(
            out,
            "<h3 id=\"changes-{}\">{} set: cases that changed ({})</h3>",
            escape(&c.set),
            escape(&c.set),
            c.changes.len()
        );
        if c.changes.is_empty() {
            out.push_str("<p class=\"meta\">No case changed.</p>\n");
            continue;
        }
        out.push_str("<table class=\"changes\"><thead><tr><th class=\"num\">Line</th><th>Question</th><th>Correct (baseline → best)</th><th class=\"num\">Composite</th></tr></thead><tbody>\n");
        let yes = |b: bool| if b { "✓ yes" } else { "✗ no" };
        for ch in &c.changes {
            let class = match (ch.baseline_correct, ch.optimized_correct) {
                (false, true) => " class=\"better\"",
                (true, false) => " class=\"worse\"",
                _ => "",
            };
            let _ = writeln!(
                out,
                "<tr{class}><td class=\"num\">{}</td><td>{}</td><td>{} → {}</td><td class=\"num\">{:.2} → {:.2}</td></tr>",
                ch.line,
                escape(&ch.question),
                yes(ch.baseline_correct),
                yes(ch.optimized_correct),
                ch.baseline_score,
                ch.optimized_score
            );
        }
        out.push_str("</tbody></table>\n");
    }
}

/// Objective number `objective` per trial, with the best so far.
fn history(r: &ExperimentReport, objective: usize, links: &dyn Links) -> String {
    let name = objective_name(r, objective);
    let max = maximize(r, objective);
    let valued: Vec<(&TrialRecord, f64)> = r
        .trials
        .iter()
        .filter_map(|t| t.values.get(objective).map(|value| (t, *value)))
        .collect();
    let last = r.trials.iter().map(|t| t.number).max().unwrap_or(0);
    let plot = Plot::new(
        520.0,
        250.0,
        (0.0, (last.max(1)) as f64),
        svg::range_of(valued.iter().map(|(_, value)| *value)),
    );
    let mut out = format!("<figure><figcaption>{}</figcaption>", escape(&name));
    plot.open(
        &mut out,
        &format!("history-{objective}"),
        &format!("{name} per trial, with the best so far"),
        "trial",
        &name,
    );
    // The best so far, as a step line.
    let mut best: Option<f64> = None;
    let mut path = String::new();
    for (t, value) in &valued {
        let better = best.is_none_or(|prev| if max { *value > prev } else { *value < prev });
        let (x, y) = (plot.px(t.number as f64), plot.py(*value));
        match best {
            None => {
                let _ = write!(path, "M{x:.1} {y:.1}");
            }
            Some(prev) if better => {
                let _ = write!(path, "L{x:.1} {:.1}L{x:.1} {y:.1}", plot.py(prev));
            }
            _ => {}
        }
        if better {
            best = Some(*value);
        }
    }
    if let Some(prev) = best {
        let _ = write!(path, "L{:.1} {:.1}", plot.px(last as f64), plot.py(prev));
        let _ = write!(
            out,
            "<path class=\"best-line\" d=\"{path}\" fill=\"none\"/>"
        );
    }
    for (t, value) in &valued {
        let (x, y) = (plot.px(t.number as f64), plot.py(*value));
        let (shape, class) = if t.number == 0 && is_baseline_trial(t) {
            (Shape::Square, "baseline")
        } else if t.outcome == TrialOutcome::Duplicate {
            (Shape::Ring, "dup")
        } else {
            (Shape::Dot, "trial")
        };
        let mut mark = String::new();
        svg::marker(
            &mut mark,
            shape,
            x,
            y,
            3.2,
            class,
            &format!("trial {}: {}", t.number, svg::num(*value)),
        );
        out.push_str(&wrap_link(links.trial(t.number), mark));
    }
    let floor = plot.height - plot.bottom - 4.0;
    for t in r
        .trials
        .iter()
        .filter(|t| t.outcome == TrialOutcome::Pruned)
    {
        let mut mark = String::new();
        svg::marker(
            &mut mark,
            Shape::Cross,
            plot.px(t.number as f64),
            floor,
            3.0,
            "pruned",
            &format!("trial {}: pruned by racing", t.number),
        );
        out.push_str(&wrap_link(links.trial(t.number), mark));
    }
    out.push_str("</svg></figure>");
    out
}

/// Each marker as a tag, a space before each.
fn tags(marks: &[String]) -> String {
    marks.iter().fold(String::new(), |mut out, m| {
        let _ = write!(out, " <span class=\"tag\">{}</span>", escape(m));
        out
    })
}

fn wrap_link(href: Option<String>, inner: String) -> String {
    match href {
        Some(h) => format!("<a href=\"{}\">{inner}</a>", escape(&h)),
        None => inner,
    }
}

/// The first two objectives as a scatter: every trial with values, the front, the baseline and
/// the best.
fn pareto(r: &ExperimentReport, links: &dyn Links) -> String {
    let (nx, ny) = (objective_name(r, 0), objective_name(r, 1));
    let points: Vec<(&TrialRecord, f64, f64)> = r
        .trials
        .iter()
        .filter(|t| t.values.len() >= 2)
        .map(|t| (t, t.values[0], t.values[1]))
        .collect();
    let plot = Plot::new(
        560.0,
        380.0,
        svg::range_of(points.iter().map(|p| p.1)),
        svg::range_of(points.iter().map(|p| p.2)),
    );
    let mut s = String::from("<figure><figcaption>Pareto front</figcaption>");
    plot.open(
        &mut s,
        "pareto-chart",
        &format!(
            "{} trials by {nx} and {ny}; {} on the Pareto front",
            points.len(),
            r.pareto_front.len()
        ),
        &nx,
        &ny,
    );
    for (t, x, y) in &points {
        let mut m = String::new();
        svg::marker(
            &mut m,
            Shape::Dot,
            plot.px(*x),
            plot.py(*y),
            3.0,
            "trial",
            &format!("trial {}: {}, {}", t.number, svg::num(*x), svg::num(*y)),
        );
        s.push_str(&wrap_link(links.trial(t.number), m));
    }
    let mut front: Vec<&(&TrialRecord, f64, f64)> = points
        .iter()
        .filter(|p| r.pareto_front.contains(&p.0.number))
        .collect();
    front.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.2.total_cmp(&a.2)));
    if front.len() > 1 {
        let d: Vec<String> = front
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!(
                    "{}{:.1} {:.1}",
                    if i == 0 { "M" } else { "L" },
                    plot.px(p.1),
                    plot.py(p.2)
                )
            })
            .collect();
        let _ = write!(
            s,
            "<path class=\"front-line\" d=\"{}\" fill=\"none\"/>",
            d.join("")
        );
    }
    for (t, x, y) in front {
        let mut m = String::new();
        svg::marker(
            &mut m,
            Shape::Diamond,
            plot.px(*x),
            plot.py(*y),
            4.5,
            "front",
            &format!(
                "trial {} (Pareto front): {}, {}",
                t.number,
                svg::num(*x),
                svg::num(*y)
            ),
        );
        s.push_str(&wrap_link(links.trial(t.number), m));
    }
    // The baseline: trial 0's values, else step 1's metrics.
    let base = points
        .iter()
        .find(|p| p.0.number == 0 && is_baseline_trial(p.0))
        .map(|p| (p.1, p.2));
    if let Some((x, y)) = base {
        let (px, py) = (plot.px(x), plot.py(y));
        let mut m = String::new();
        svg::marker(
            &mut m,
            Shape::Square,
            px,
            py,
            5.0,
            "baseline",
            &format!("baseline: {}, {}", svg::num(x), svg::num(y)),
        );
        s.push_str(&m);
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"label\">baseline</text>",
            px + 8.0,
            py + 14.0
        );
    }
    if let Some(b) = r
        .best_trial
        .and_then(|n| points.iter().find(|p| p.0.number == n))
    {
        let (px, py) = (plot.px(b.1), plot.py(b.2));
        let text = format!("best (trial {})", b.0.number);
        // About 7 pixels a character: a label that would leave the plot goes to the left of
        // the point, and below it when the point is at the top.
        let wide = text.chars().count() as f64 * 7.0;
        let (lx, anchor) = if px + 11.0 + wide > plot.width - plot.right {
            (px - 11.0, "end")
        } else {
            (px + 11.0, "start")
        };
        let ly = if py - 8.0 < plot.top + 12.0 {
            py + 20.0
        } else {
            py - 8.0
        };
        let _ = write!(
            s,
            "<circle class=\"best\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"9\" fill=\"none\" stroke-width=\"2\"><title>best: trial {}</title></circle><text x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"{anchor}\" class=\"label\">{text}</text>",
            b.0.number
        );
    }
    let ly = plot.top + 14.0;
    let lx = plot.left + 8.0;
    svg::legend(&mut s, Shape::Dot, lx, ly, "trial", "trial");
    svg::legend(
        &mut s,
        Shape::Diamond,
        lx + 60.0,
        ly,
        "front",
        "Pareto front",
    );
    svg::legend(
        &mut s,
        Shape::Square,
        lx + 160.0,
        ly,
        "baseline",
        "baseline",
    );
    s.push_str("</svg></figure>\n");
    s
}

fn sort_rows<'r>(r: &'r ExperimentReport, sort: &Sort) -> Vec<&'r TrialRecord> {
    let mut rows: Vec<&TrialRecord> = r.trials.iter().collect();
    let key = |t: &TrialRecord| -> Option<f64> {
        let m = metrics_of(r, t);
        match sort.key.as_str() {
            "correct" => m.map(|m| m.factually_correct_count as f64),
            "composite" => m.map(|m| m.average_composite_score),
            "duration" => Some(t.duration_s),
            "outcome" => Some(match t.outcome {
                TrialOutcome::Complete => 0.0,
                TrialOutcome::Duplicate => 1.0,
                TrialOutcome::Pruned => 2.0,
                TrialOutcome::Failed => 3.0,
            }),
            k => match k
                .strip_prefix("value")
                .and_then(|i| i.parse::<usize>().ok())
            {
                Some(i) => t.values.get(i).copied(),
                None => Some(t.number as f64),
            },
        }
    };
    rows.sort_by(|a, b| {
        // Rows without a value go last either way; ties keep trial order.
        let ord = match (key(a), key(b)) {
            (Some(x), Some(y)) => {
                if sort.desc {
                    y.total_cmp(&x)
                } else {
                    x.total_cmp(&y)
                }
            }
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        };
        ord.then(a.number.cmp(&b.number))
    });
    rows
}

fn trials_table(out: &mut String, page: &Page<'_>, links: &dyn Links, sort: &Sort) {
    let r = page.report;
    let _ = writeln!(
        out,
        "<h2 id=\"trials\">Trials</h2>\n<p class=\"note\">{}</p>",
        escape(&super::trials_count(r))
    );
    if let Some(tie) = &r.tie {
        let _ = writeln!(out, "<p class=\"note\">Best trial: {}.</p>", escape(tie));
    }
    if r.trials.is_empty() {
        return;
    }
    let agents: Vec<&String> = r.agents.keys().collect();
    let n_obj = objectives(r);
    let head = |key: &str, label: &str, num: bool| {
        let class = if num { " class=\"num\"" } else { "" };
        let active = sort.key == key;
        let aria = if active {
            if sort.desc {
                " aria-sort=\"descending\""
            } else {
                " aria-sort=\"ascending\""
            }
        } else {
            ""
        };
        let arrow = match (active, sort.desc) {
            (true, true) => " ↓",
            (true, false) => " ↑",
            _ => "",
        };
        let desc = if active { !sort.desc } else { key != "number" };
        format!(
            "<th{class}{aria}>{}</th>",
            link(links.sort(key, desc), &format!("{}{arrow}", escape(label)))
        )
    };
    let _ = write!(
        out,
        "<div class=\"table-scroll\"><table id=\"trial-table\" class=\"trials\"><thead><tr>{}<th>Origin</th>{}",
        head("number", "#", true),
        head("outcome", "Outcome", false)
    );
    for a in &agents {
        let _ = write!(out, "<th class=\"num\">{}</th>", escape(a));
    }
    for i in 0..n_obj {
        out.push_str(&head(&format!("value{i}"), &objective_name(r, i), true));
    }
    let _ = writeln!(
        out,
        "{}{}{}<th>Note</th></tr></thead><tbody>",
        head("correct", "Correct", true),
        head("composite", "Composite", true),
        head("duration", "Seconds", true)
    );
    for t in sort_rows(r, sort) {
        let marks = markers(page, t);
        let class = match t.outcome {
            _ if r.best_trial == Some(t.number) => " class=\"best-row\"",
            TrialOutcome::Pruned | TrialOutcome::Failed => " class=\"muted-row\"",
            _ => "",
        };
        let _ = write!(
            out,
            "<tr id=\"trial-{}\"{class}><td class=\"num\">{}</td><td>{}</td><td>{}{}</td>",
            t.number,
            link(links.trial(t.number), &t.number.to_string()),
            escape(&t.origin),
            outcome_word(t.outcome),
            tags(&marks)
        );
        for a in &agents {
            let _ = write!(
                out,
                "<td class=\"num\">{}</td>",
                t.params
                    .get(*a)
                    .map_or_else(|| "–".to_owned(), ToString::to_string)
            );
        }
        for i in 0..n_obj {
            let _ = write!(
                out,
                "<td class=\"num\">{}</td>",
                t.values
                    .get(i)
                    .map_or_else(|| "–".to_owned(), |v| svg::num(*v))
            );
        }
        let m = metrics_of(r, t);
        let _ = writeln!(
            out,
            "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td><td>{}</td></tr>",
            m.map_or_else(
                || "–".to_owned(),
                |m| format!("{}/{}", m.factually_correct_count, m.cases)
            ),
            m.map_or_else(
                || "–".to_owned(),
                |m| format!("{:.3}", m.average_composite_score)
            ),
            t.duration_s,
            escape(t.note.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</tbody></table></div>\n");
}

/// A line diff of `old` → `new`: `-`/`+`/` ` prefixed lines, each with its class.
pub fn diff_html(old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = String::from("<pre class=\"diff\">");
    for change in diff.iter_all_changes() {
        let (sign, class) = match change.tag() {
            similar::ChangeTag::Delete => ("-", "del"),
            similar::ChangeTag::Insert => ("+", "ins"),
            similar::ChangeTag::Equal => (" ", "same"),
        };
        let text = change.value();
        let _ = writeln!(
            out,
            "<span class=\"{class}\">{sign} {}</span>",
            escape(text.strip_suffix('\n').unwrap_or(text))
        );
    }
    out.push_str("</pre>");
    out
}

fn prompts_section(out: &mut String, page: &Page<'_>) {
    let r = page.report;
    out.push_str("<h2 id=\"prompts\">Best prompts against the baseline</h2>\n");
    if r.best_trial.is_none() {
        out.push_str("<p class=\"meta\">No best trial yet.</p>\n");
        return;
    }
    let _ = writeln!(
        out,
        "<p class=\"meta\">Trial {}'s prompt per agent, diffed line by line against the production prompt the experiment started from (− removed, + added).</p>",
        r.best_trial.unwrap_or(0)
    );
    for (agent, index) in &r.best_params {
        let _ = write!(
            out,
            "<section class=\"agent\"><h3>{} <span class=\"tag\">index {index}, {}</span></h3>",
            escape(agent),
            escape(&super::prompt_source(r, agent, *index))
        );
        let new = r.best_prompts.get(agent);
        let old = r.baseline_prompts.get(agent);
        match (old, new) {
            (_, _) if *index == 0 => {
                out.push_str("<p class=\"meta\">Unchanged: the best trial keeps the production prompt.</p>");
            }
            (Some(o), Some(n)) => out.push_str(&diff_html(o, n)),
            (None, Some(n)) => {
                let _ = write!(
                    out,
                    "<p class=\"meta\">The baseline prompt is not recorded; the best prompt:</p><pre>{}</pre>",
                    escape(n)
                );
            }
            (_, None) => out.push_str(
                "<p class=\"meta\">The prompt's text is not known (its file changed since the experiment ran).</p>",
            ),
        }
        out.push_str("</section>\n");
    }
}

fn proposals_section(out: &mut String, r: &ExperimentReport) {
    if r.proposals.is_empty() && r.hand_written.is_none() {
        return;
    }
    out.push_str("<h2 id=\"proposals\">Proposed prompts</h2>\n");
    if let Some(h) = &r.hand_written {
        let _ = writeln!(
            out,
            "<p><strong>{}</strong>: {}</p>",
            escape(&h.verdict.replace('_', " ")),
            escape(&h.summary)
        );
    }
    out.push_str("<table><thead><tr><th>Proposal</th><th>Agent</th><th>Parent</th><th>Cases shown</th><th>Outcome</th><th>File</th></tr></thead><tbody>\n");
    for p in &r.proposals {
        out.push_str("<tr>");
        for cell in super::proposal_cells(p) {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    if r.proposals.iter().any(|p| p.chosen.is_some()) {
        out.push_str("<p>Why each agent was chosen:</p>\n<ul>\n");
        for p in &r.proposals {
            if let Some(c) = &p.chosen {
                let _ = writeln!(
                    out,
                    "<li>r{}-{} {}: {}</li>",
                    p.round,
                    p.k,
                    escape(&p.agent),
                    escape(c.why.trim())
                );
            }
        }
        out.push_str("</ul>\n");
    }
    for p in r
        .proposals
        .iter()
        .filter(|p| matches!(p.status, ProposalStatus::Accepted { .. }))
    {
        let _ = writeln!(
            out,
            "<details><summary>r{}-{} for {}: the proposer's reasoning and prompt</summary><p>{}</p><pre>{}</pre></details>",
            p.round,
            p.k,
            escape(&p.agent),
            escape(p.reasoning.trim()),
            escape(&p.text)
        );
    }
}

fn usage_row(role: &str, u: &UsageTotals) -> String {
    format!(
        "<tr><td>{role}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
        u.calls,
        u.cache_hits,
        u.requests,
        u.input_tokens,
        u.output_tokens,
        usd(u.cost_usd)
    )
}

fn usage_section(out: &mut String, r: &ExperimentReport) {
    let _ = write!(
        out,
        "<h2 id=\"usage\">Usage and cost</h2>\n<table><thead><tr><th>Role</th><th class=\"num\">Calls</th><th class=\"num\">From cache</th><th class=\"num\">Requests</th><th class=\"num\">Input tokens</th><th class=\"num\">Output tokens</th><th class=\"num\">Cost</th></tr></thead><tbody>{}{}",
        usage_row("target", &r.usage.target),
        usage_row("grader", &r.usage.grader)
    );
    if !r.usage.proposer.is_zero() {
        out.push_str(&usage_row("proposer", &r.usage.proposer));
    }
    let mut all = r.usage.target;
    all += r.usage.grader;
    all += r.usage.proposer;
    let _ = writeln!(out, "{}</tbody></table>", usage_row("all", &all));
    if let Some(e) = &r.estimate {
        let _ = writeln!(
            out,
            "<p class=\"meta\">Estimated before any call: {} target runs, {} target calls, {} grader calls, at most {}.</p>",
            e.target_runs,
            e.target.calls,
            e.grader.calls,
            usd(e.cost_usd())
        );
    }
    out.push_str(&crate::limits::html(&r.usage.rate_limits, escape));
}

fn promotion(out: &mut String, r: &ExperimentReport, links: &dyn Links) {
    out.push_str("<h2 id=\"promotion\">Promotion</h2>\n");
    let held_out = r.comparisons.iter().find(|c| c.set == "evaluation");
    match held_out {
        None => out.push_str(
            "<p>No held-out comparison yet: there is nothing to promote before the experiment finishes.</p>\n",
        ),
        Some(c) => {
            let _ = writeln!(
                out,
                "<p>On the held-out evaluation cases: <strong>{}</strong>. {}</p>",
                verdict_word(c),
                escape(&c.significance.verdict)
            );
            match links.promote() {
                Some(href) => {
                    let _ = writeln!(
                        out,
                        "<p><a class=\"button\" href=\"{}\">Review the diff and promote or roll back</a></p>",
                        escape(&href)
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "<p>Review and install with <code>assay prompts promote {}</code> (it shows the diff and writes only with <code>--yes</code>).</p>",
                        escape(&r.name)
                    );
                }
            }
        }
    }
}

fn case_rows(out: &mut String, cases: &[CaseResult], baseline: &[CaseResult]) {
    out.push_str("<table class=\"cases\"><thead><tr><th class=\"num\">Line</th><th>Question</th><th>Expected</th><th>Answer</th><th>Correct</th><th class=\"num\">Composite</th><th>Baseline</th><th>Grader's reasoning</th></tr></thead><tbody>\n");
    for c in cases {
        let base = baseline.iter().find(|b| b.line == c.line);
        let base_cell = base.map_or_else(
            || "–".to_owned(),
            |b| {
                format!(
                    "{} {:.2}",
                    if b.factually_correct { "✓" } else { "✗" },
                    b.composite_score
                )
            },
        );
        let class = match base.map(|b| (b.factually_correct, c.factually_correct)) {
            Some((false, true)) => " class=\"better\"",
            Some((true, false)) => " class=\"worse\"",
            _ => "",
        };
        let answer = match (&c.output, &c.error) {
            (_, Some(e)) => format!("<span class=\"unwanted\">error: {}</span>", escape(e)),
            (Some(o), None) => escape(o),
            (None, None) => "–".to_owned(),
        };
        let _ = writeln!(
            out,
            "<tr{class}><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{answer}</td><td>{}</td><td class=\"num\">{:.2}</td><td>{base_cell}</td><td>{}</td></tr>",
            c.line,
            escape(&c.question),
            escape(&c.expected),
            if c.factually_correct {
                "✓ yes"
            } else {
                "✗ no"
            },
            c.composite_score,
            escape(c.rubric.as_ref().map_or("", |g| g.reasoning.as_str()))
        );
    }
    out.push_str("</tbody></table>\n");
}

/// Trial `number`'s page: its markers, values and metrics, each agent's prompt (diffed against
/// the baseline's), and its cases beside the baseline's. `None` when there is no such trial.
pub fn trial_body(page: &Page<'_>, number: usize, links: &dyn Links) -> Option<String> {
    let r = page.report;
    let t = r.trials.iter().find(|t| t.number == number)?;
    let mut out = String::from("<div class=\"report experiment\">\n");
    let _ = writeln!(
        out,
        "<h1>Trial {number} of <code>{}</code></h1>",
        escape(&r.name)
    );
    let _ = writeln!(
        out,
        "<p class=\"meta\" id=\"trial-markers\">{} · chosen by {} · {:.1} s{}</p>",
        outcome_word(t.outcome),
        escape(&t.origin),
        t.duration_s,
        tags(&markers(page, t))
    );
    if let Some(n) = &t.note {
        let _ = writeln!(out, "<p class=\"notice\">{}</p>", escape(n));
    }
    if let Some(d) = t.duplicate_of {
        let _ = writeln!(
            out,
            "<p>The same prompts as {}: its values were reused and nothing was evaluated again.</p>",
            link(links.trial(d), &format!("trial {d}"))
        );
    }
    out.push_str("<table><tbody>");
    for (i, v) in t.values.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><th>{}</th><td class=\"num\">{}</td></tr>",
            escape(&objective_name(r, i)),
            svg::num(*v)
        );
    }
    if let Some(m) = metrics_of(r, t) {
        let _ = write!(
            out,
            "<tr><th>Metrics</th><td>{}</td></tr><tr><th>Baseline</th><td>{}</td></tr>",
            metrics_cell(m),
            metrics_cell(&r.baseline.metrics)
        );
    }
    out.push_str("</tbody></table>\n<h2>Prompts</h2>\n");
    for (agent, index) in &t.params {
        let _ = write!(
            out,
            "<section class=\"agent\"><h3>{} <span class=\"tag\">index {index}{}</span></h3>",
            escape(agent),
            if *index == 0 { ", the baseline" } else { "" }
        );
        let texts = page.prompts.get(agent);
        let text = texts.and_then(|v| v.get(*index)).and_then(Option::as_ref);
        let base = texts
            .and_then(|v| v.first())
            .and_then(Option::as_ref)
            .or_else(|| r.baseline_prompts.get(agent));
        match (text, base) {
            (Some(t), _) if *index == 0 => {
                let _ = write!(out, "<pre>{}</pre>", escape(t));
            }
            (Some(t), Some(b)) => out.push_str(&diff_html(b, t)),
            (Some(t), None) => {
                let _ = write!(out, "<pre>{}</pre>", escape(t));
            }
            (None, _) => out.push_str(
                "<p class=\"meta\">The prompt's text is not known: its file changed since the experiment ran.</p>",
            ),
        }
        out.push_str("</section>\n");
    }
    let cases = if t.cases.is_empty() {
        t.duplicate_of
            .and_then(|d| r.trials.iter().find(|o| o.number == d))
            .map_or(&t.cases, |o| &o.cases)
    } else {
        &t.cases
    };
    let _ = writeln!(out, "<h2>Cases ({})</h2>", cases.len());
    if t.outcome == TrialOutcome::Pruned {
        out.push_str("<p class=\"meta\">Pruned by racing: only the first cases were scored.</p>\n");
    }
    if cases.is_empty() {
        out.push_str("<p class=\"meta\">No case results recorded.</p>\n");
    } else {
        case_rows(&mut out, cases, &r.baseline.cases);
    }
    out.push_str("</div>\n");
    Some(out)
}
