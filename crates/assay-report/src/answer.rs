//! The answer bank in reports: each case's reply, its claims with their verdicts and the
//! entity that supports each, every assertion's outcome, each trajectory check with the calls
//! it names, and the bank's metric means. The
//! Markdown and HTML reports and the web UI's case page render answer cases with these.

use std::fmt::Write;

use assay_core::answer::{AnswerCaseResult, ContextSource, Metric, MetricOutcome};
use assay_core::runlog::AnswerResults;
use assay_core::verdict::Verdicted;

use assay_core::bank::BankType;
use assay_core::scoring::interpret;
use assay_core::simulation::{CheckResult, CheckStatus};

use crate::common::{CaseLinks, NoLinks, escape};

/// A share as a report shows it: `0.75`, or `n/a` when undefined (or not a number: a report
/// never shows `NaN`).
pub fn share(value: Option<f64>) -> String {
    value
        .filter(|v| v.is_finite())
        .map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2}"))
}

/// A similarity as a report shows it (`0.83`, or `n/a` when not a number).
fn similarity(value: f64) -> String {
    share(Some(value))
}

/// The bank's metric means, one line each (`faithfulness 0.83 over 5 cases; 1 not applicable`),
/// plus the errored cases the averages leave out.
pub fn metric_lines(r: &AnswerResults) -> Vec<String> {
    let mut lines: Vec<String> = Metric::ALL
        .iter()
        .filter_map(|m| r.metrics.get(m).map(|s| (m, s)))
        .map(|(m, s)| {
            let mut line = format!(
                "{m} {} over {} case{}",
                share(s.mean),
                s.cases,
                if s.cases == 1 { "" } else { "s" }
            );
            if s.not_applicable > 0 {
                let _ = write!(line, "; did not apply to {}", s.not_applicable);
            }
            line
        })
        .collect();
    if r.errors > 0 {
        lines.push(format!(
            "{} of {} cases errored and are left out of every average",
            r.errors, r.tests_run
        ));
    }
    lines
}

fn outcome_line(metric: Metric, o: &MetricOutcome) -> String {
    let mut line = format!("{metric}: {}", share(o.score));
    if let Some(min) = o.minimum {
        let _ = write!(
            line,
            " (minimum {min:.2}{})",
            if o.below_minimum() { ", below" } else { "" }
        );
    }
    if o.noncommittal {
        line.push_str(" — the reply is non-committal");
    }
    if let Some(note) = &o.note {
        let _ = write!(line, " — {note}");
    }
    line
}

/// A trajectory check on one line: its name, `advisory` when it is, why it failed, and the
/// calls it names (`renew_loan (call 2)`: an answer case has one turn, so no turn is given).
fn trajectory_line(c: &CheckResult) -> String {
    let mut line = c.name.clone();
    if c.advisory {
        line.push_str(" (advisory)");
    }
    if !c.details.is_empty() {
        let _ = write!(line, ": {}", c.details.join("; "));
    }
    if !c.calls.is_empty() {
        let calls: Vec<String> = c
            .calls
            .iter()
            .map(|r| format!("{} (call {})", r.name, r.call))
            .collect();
        let _ = write!(line, " — {}", calls.join(", "));
    }
    line
}

fn trajectory_mark(c: &CheckResult) -> (&'static str, &'static str, &'static str) {
    match c.status {
        CheckStatus::Passed => ("✓", "wanted", "passed"),
        CheckStatus::Failed => ("✗", "unwanted", "failed"),
        CheckStatus::Error => ("?", "", "error"),
    }
}

fn trajectory_summary(r: &AnswerCaseResult) -> String {
    let passed = r
        .trajectory
        .iter()
        .filter(|c| c.status == CheckStatus::Passed)
        .count();
    format!(
        "{passed} of {} checks passed on the product's tool calls",
        r.trajectory.len()
    )
}

fn sources(r: &AnswerCaseResult) -> &'static str {
    match r.contexts_from {
        ContextSource::Pipeline => "assay's pipeline",
        ContextSource::Target => "the product's own",
    }
}

/// Markdown lines for one answer case (the details under its heading).
pub fn markdown_details(r: &AnswerCaseResult) -> Vec<String> {
    let one_line = |t: &str| t.replace(['\n', '\r'], " ").replace('|', "\\|");
    let mut out = vec![format!("**Message:** \"{}\"", one_line(&r.message))];
    match &r.reply {
        Some(reply) => out.push(format!("**Reply:** \"{}\"", one_line(reply))),
        None => out.push("**Reply:** none".to_owned()),
    }
    // The stored verdict: the checks that failed the case, or the error that kept it from one.
    out.push(one_line(&crate::verdict::markdown_line(&r.verdict())));
    if r.error.is_some() {
        out.push("**Not scored:** left out of every average".to_owned());
    }
    let entities: Vec<String> = r
        .contexts
        .iter()
        .map(|c| c.entity.clone().unwrap_or_else(|| "(unnamed)".into()))
        .collect();
    out.push(format!(
        "**Context ({}):** {}",
        sources(r),
        if entities.is_empty() {
            "none".to_owned()
        } else {
            entities
                .iter()
                .map(|e| format!("`{e}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    for (metric, o) in &r.metrics {
        out.push(format!("**{}**", outcome_line(*metric, o)));
        for c in &o.claims {
            out.push(format!(
                "  - {} \"{}\"{}{}",
                if c.supported { "✓" } else { "✗" },
                one_line(&c.claim),
                c.entity
                    .as_ref()
                    .map(|e| format!(" — `{e}`"))
                    .unwrap_or_default(),
                if c.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", one_line(&c.reason))
                }
            ));
        }
        for c in &o.contexts {
            out.push(format!(
                "  - rank {} `{}`: {}{}",
                c.rank,
                c.entity.as_deref().unwrap_or("(unnamed)"),
                if c.useful { "useful" } else { "not useful" },
                if c.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", one_line(&c.reason))
                }
            ));
        }
        for q in &o.questions {
            out.push(format!(
                "  - \"{}\" similarity {}",
                one_line(&q.question),
                similarity(q.similarity)
            ));
        }
    }
    if let Some(a) = &r.assertions {
        out.push(format!(
            "**Assertions:** {} of weight passed (threshold {:.0}%){}",
            a.score
                .map_or_else(|| "none".to_owned(), |s| format!("{:.0}%", s * 100.0)),
            a.threshold * 100.0,
            if a.errors > 0 {
                format!(", {} could not be decided", a.errors)
            } else {
                String::new()
            }
        ));
        for x in &a.results {
            out.push(format!(
                "  - {} `{}`{}: {}",
                match x.status {
                    assay_core::assertion::Status::Passed => "✓",
                    assay_core::assertion::Status::Failed => "✗",
                    assay_core::assertion::Status::Error => "?",
                },
                x.kind,
                if x.critical { " (critical)" } else { "" },
                one_line(&x.reason)
            ));
        }
    }
    if !r.trajectory.is_empty() {
        out.push(format!("**Trajectory:** {}", trajectory_summary(r)));
        for c in &r.trajectory {
            out.push(format!(
                "  - {} {}",
                trajectory_mark(c).0,
                one_line(&trajectory_line(c))
            ));
        }
    }
    if let Some(ms) = r.latency_ms {
        let cost = r.cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default();
        out.push(format!("**Product:** {ms:.0} ms{cost}"));
    }
    out
}

/// One answer case as a Markdown entry: a `###` heading (id, name, score and what it means,
/// or "error (not scored)", and the verdict) and [`markdown_details`] as a list.
pub fn markdown_case(r: &AnswerCaseResult) -> String {
    let mut out = String::new();
    let title = if r.name.is_empty() {
        String::new()
    } else {
        format!(": {}", r.name.replace(['\n', '\r'], " "))
    };
    let score = match r.score {
        _ if r.error.is_some() => "error (not scored)".to_owned(),
        Some(s) => format!("{s} ({})", interpret(s)),
        None => "not scored".to_owned(),
    };
    let critical = if r.is_critical_failure {
        " 🚨 critical failure"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "### {}{title} — {score} · {}{critical}\n",
        r.test_id,
        crate::verdict::markdown_badge(&r.verdict())
    );
    for line in markdown_details(r) {
        if line.starts_with("  - ") {
            let _ = writeln!(out, "{line}");
        } else {
            let _ = writeln!(out, "- {line}");
        }
    }
    out.push('\n');
    out
}

/// One answer case as an HTML `<section class="case">` (the report's failures and the web
/// UI's case page).
pub fn html_case(out: &mut String, r: &AnswerCaseResult) {
    html_case_with(out, r, &NoLinks);
}

/// [`html_case`] with the case id linked through `links` (the web UI's run page).
pub fn html_case_with(out: &mut String, r: &AnswerCaseResult, links: &dyn CaseLinks) {
    let score = match r.score {
        _ if r.error.is_some() => "error (not scored)".to_owned(),
        Some(s) => format!(
            "<span class=\"{}\">{s}</span> ({})",
            if s < 70 { "score-bad" } else { "score-ok" },
            interpret(s)
        ),
        None => "not scored".to_owned(),
    };
    let title = if r.name.is_empty() {
        String::new()
    } else {
        format!(": {}", escape(&r.name))
    };
    let id = match links.case(BankType::Answer, &r.test_id) {
        Some(href) => format!(
            "<a href=\"{}\"><code>{}</code></a>",
            escape(&href),
            escape(&r.test_id)
        ),
        None => format!("<code>{}</code>", escape(&r.test_id)),
    };
    let critical = if r.is_critical_failure {
        " <strong class=\"unwanted\">critical failure</strong>"
    } else {
        ""
    };
    let verdict = r.verdict();
    let _ = writeln!(
        out,
        "<section class=\"case\" id=\"case-{}\" data-bank=\"answer\"><h3>{id}{title} — {score} {}{critical}</h3>",
        escape(&r.test_id),
        crate::verdict::html_badge(&verdict)
    );
    let _ = writeln!(
        out,
        "<ul><li><strong>Message:</strong> “{}”</li>",
        escape(&r.message)
    );
    match &r.reply {
        Some(reply) => {
            let _ = writeln!(
                out,
                "<li><strong>Reply:</strong><blockquote>{}</blockquote></li>",
                escape(reply)
            );
        }
        None => out.push_str("<li><strong>Reply:</strong> none</li>\n"),
    }
    if r.error.is_some() {
        out.push_str("<li><strong>Not scored:</strong> left out of every average</li>\n");
    }
    crate::verdict::html_items(out, &verdict);
    let _ = writeln!(
        out,
        "<li><strong>Context</strong> ({}): {}</li>",
        sources(r),
        if r.contexts.is_empty() {
            "none".to_owned()
        } else {
            r.contexts
                .iter()
                .map(|c| {
                    format!(
                        "<code>{}</code>",
                        escape(c.entity.as_deref().unwrap_or("(unnamed)"))
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    out.push_str("</ul>\n");
    for (metric, o) in &r.metrics {
        let _ = writeln!(out, "<h4>{}</h4>", escape(&outcome_line(*metric, o)));
        if !o.claims.is_empty() {
            out.push_str(
                "<table><thead><tr><th>claim</th><th>verdict</th><th>supported by</th><th>why</th></tr></thead><tbody>\n",
            );
            for c in &o.claims {
                let _ = writeln!(
                    out,
                    "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>",
                    escape(&c.claim),
                    if c.supported { "wanted" } else { "unwanted" },
                    if c.supported {
                        "supported"
                    } else {
                        "not supported"
                    },
                    c.entity
                        .as_ref()
                        .map(|e| format!("<code>{}</code>", escape(e)))
                        .unwrap_or_default(),
                    escape(&c.reason)
                );
            }
            out.push_str("</tbody></table>\n");
        }
        if !o.contexts.is_empty() {
            out.push_str(
                "<table><thead><tr><th>rank</th><th>context</th><th>useful</th><th>why</th></tr></thead><tbody>\n",
            );
            for c in &o.contexts {
                let _ = writeln!(
                    out,
                    "<tr><td>{}</td><td><code>{}</code></td><td class=\"{}\">{}</td><td>{}</td></tr>",
                    c.rank,
                    escape(c.entity.as_deref().unwrap_or("(unnamed)")),
                    if c.useful { "wanted" } else { "unwanted" },
                    if c.useful { "yes" } else { "no" },
                    escape(&c.reason)
                );
            }
            out.push_str("</tbody></table>\n");
        }
        if !o.questions.is_empty() {
            out.push_str("<ul>\n");
            for q in &o.questions {
                let _ = writeln!(
                    out,
                    "<li>“{}” — similarity {}</li>",
                    escape(&q.question),
                    similarity(q.similarity)
                );
            }
            out.push_str("</ul>\n");
        }
    }
    if let Some(a) = &r.assertions {
        let _ = writeln!(
            out,
            "<h4>Assertions: {} of their weight passed (threshold {:.0}%)</h4><ul>",
            a.score
                .map_or_else(|| "none".to_owned(), |s| format!("{:.0}%", s * 100.0)),
            a.threshold * 100.0
        );
        for x in &a.results {
            let (class, word) = match x.status {
                assay_core::assertion::Status::Passed => ("wanted", "passed"),
                assay_core::assertion::Status::Failed => ("unwanted", "failed"),
                assay_core::assertion::Status::Error => ("", "error"),
            };
            let _ = writeln!(
                out,
                "<li><code>{}</code>{} <span class=\"{class}\">{word}</span>: {}</li>",
                escape(&x.kind),
                if x.critical { " (critical)" } else { "" },
                escape(&x.reason)
            );
        }
        out.push_str("</ul>\n");
    }
    if !r.trajectory.is_empty() {
        let _ = writeln!(
            out,
            "<h4>Trajectory: {}</h4><ul>",
            escape(&trajectory_summary(r))
        );
        for c in &r.trajectory {
            let (_, class, word) = trajectory_mark(c);
            let _ = writeln!(
                out,
                "<li><span class=\"{class}\">{word}</span> {}</li>",
                escape(&trajectory_line(c))
            );
        }
        out.push_str("</ul>\n");
    }
    if let Some(ms) = r.latency_ms {
        let cost = r.cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default();
        let _ = writeln!(out, "<p>The product took {ms:.0} ms{cost}.</p>");
    }
    out.push_str("</section>\n");
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use assay_core::aggregate::{Aggregator, CaseRecord};
    use assay_core::answer::{
        AnswerCaseResult, ClaimVerdict, ContextItem, ContextVerdict, GeneratedQuestion, Metric,
        MetricOutcome, ScoreWeights, score_case,
    };
    use assay_core::assertion::{AssertionSet, Output};
    use assay_core::bank::BankType;
    use assay_core::runlog::{BankResults, RunFilters, RunLog, SCHEMA_VERSION, Weights};

    fn claim(text: &str, supported: bool, entity: Option<&str>, reason: &str) -> ClaimVerdict {
        ClaimVerdict {
            claim: text.into(),
            supported,
            entity: entity.map(str::to_owned),
            reason: reason.into(),
        }
    }

    fn context(entity: &str, text: &str) -> ContextItem {
        ContextItem {
            entity: Some(entity.into()),
            text: text.into(),
        }
    }

    /// A case scored as the run scores it: its assertions evaluated on its reply, then
    /// [`score_case`].
    fn scored(mut r: AnswerCaseResult, assert: &serde_json::Value) -> AnswerCaseResult {
        let set = AssertionSet::parse(assert, None, "assert").unwrap();
        let reply = r.reply.clone().unwrap_or_default();
        r.assertions = Some(set.evaluate(&Output::text(&reply)));
        score_case(&mut r, &ScoreWeights::default());
        r
    }

    /// Three answer cases: one passing, one failing (an unsupported claim, a failed critical
    /// assertion), one errored on a judge reply that was not JSON.
    pub(crate) fn answer_cases() -> Vec<AnswerCaseResult> {
        let passing = scored(
            AnswerCaseResult {
                test_id: "ANS-001".into(),
                name: "opening hours".into(),
                topics: vec!["hours".into()],
                message: "When are you open on Saturday?".into(),
                reply: Some("We are open from 9 to 17 on Saturdays.".into()),
                reference: Some("Saturday 9:00-17:00.".into()),
                contexts: vec![context("kb_hours", "Saturday: 9:00-17:00")],
                metrics: BTreeMap::from([
                    (
                        Metric::Faithfulness,
                        MetricOutcome {
                            score: Some(1.0),
                            claims: vec![claim(
                                "The shop opens 9 to 17 on Saturdays",
                                true,
                                Some("kb_hours"),
                                "the hours are listed",
                            )],
                            ..MetricOutcome::default()
                        },
                    ),
                    (
                        Metric::ContextRecall,
                        MetricOutcome {
                            score: Some(1.0),
                            claims: vec![claim(
                                "Saturday hours are 9:00-17:00",
                                true,
                                Some("kb_hours"),
                                "stated by the entity",
                            )],
                            ..MetricOutcome::default()
                        },
                    ),
                ]),
                latency_ms: Some(412.0),
                ..AnswerCaseResult::default()
            },
            &serde_json::json!([{"type": "icontains", "value": "saturday"}]),
        );
        let failing = scored(
            AnswerCaseResult {
                test_id: "ANS-002".into(),
                name: "returns".into(),
                topics: vec!["returns".into()],
                message: "Can I return a used helmet?".into(),
                reply: Some("Yes, helmets can be returned within 90 days, even when used.".into()),
                contexts: vec![
                    context("kb_warranty", "Frames carry a five-year warranty."),
                    context("kb_returns", "Unused items can be returned within 30 days."),
                ],
                metrics: BTreeMap::from([
                    (
                        Metric::Faithfulness,
                        MetricOutcome {
                            score: Some(0.0),
                            minimum: Some(0.8),
                            claims: vec![claim(
                                "Used helmets can be returned within 90 days",
                                false,
                                None,
                                "the context allows 30 days, for unused items only",
                            )],
                            ..MetricOutcome::default()
                        },
                    ),
                    (
                        Metric::AnswerRelevancy,
                        MetricOutcome {
                            score: Some(0.93),
                            questions: vec![GeneratedQuestion {
                                question: "Can used helmets be returned?".into(),
                                similarity: 0.93,
                            }],
                            ..MetricOutcome::default()
                        },
                    ),
                    (
                        Metric::ContextPrecision,
                        MetricOutcome {
                            score: Some(0.5),
                            contexts: vec![
                                ContextVerdict {
                                    rank: 1,
                                    entity: Some("kb_warranty".into()),
                                    useful: false,
                                    reason: "about warranties, not returns".into(),
                                },
                                ContextVerdict {
                                    rank: 2,
                                    entity: Some("kb_returns".into()),
                                    useful: true,
                                    reason: "states the return rule".into(),
                                },
                            ],
                            ..MetricOutcome::default()
                        },
                    ),
                ]),
                ..AnswerCaseResult::default()
            },
            &serde_json::json!([
                {"type": "icontains", "value": "30 days", "critical": true},
                {"type": "not-refusal"}
            ]),
        );
        let errored = scored(
            AnswerCaseResult {
                test_id: "ANS-003".into(),
                message: "Do you fit tubeless tyres?".into(),
                reply: Some("Yes, we fit tubeless tyres while you wait.".into()),
                error: Some("judge: faithfulness: the reply is not JSON".into()),
                ..AnswerCaseResult::default()
            },
            &serde_json::json!([{"type": "icontains", "value": "tubeless"}]),
        );
        vec![passing, failing, errored]
    }

    /// A run of the answer bank alone, with [`answer_cases`].
    pub(crate) fn answer_run() -> RunLog {
        let mut agg = Aggregator::new(0, usize::MAX);
        let cases = answer_cases();
        agg.start(BankType::Answer, cases.len());
        for (i, r) in cases.into_iter().enumerate() {
            agg.push(i, CaseRecord::Answer(r));
        }
        let (banks, notable) = agg.finish();
        let answer = banks.answer;
        let banks = BankResults {
            semantic: None,
            state: None,
            pattern: None,
            always: None,
            answer,
        };
        let summary = banks.summarize(&Weights::default(), None);
        RunLog {
            schema_version: SCHEMA_VERSION,
            assay_version: "0.1.0".into(),
            run_id: "run-answer".into(),
            project: "examples/bikeshop".into(),
            timestamp: "2026-11-28T09:00:00Z".into(),
            duration_ms: 2345,
            filters: RunFilters {
                banks: vec![BankType::Answer],
                test: None,
                tests: Vec::new(),
                topic: None,
                changed_since: None,
                drafts: None,
                banks_left_out: Vec::new(),
            },
            setup: BTreeMap::new(),
            summary,
            semantic: None,
            state: None,
            pattern: None,
            always: None,
            answer: banks.answer,
            warnings: Vec::new(),
            settings: BTreeMap::new(),
            kb: assay_core::rundiff::KbFingerprint::default(),
            baseline: None,
            rate_limits: Vec::new(),
            cases: None,
            notable_cases: Some(notable),
            shard: None,
            merged: None,
            stale: Vec::new(),
            stale_more: 0,
        }
    }

    fn no_nan(what: &str, text: &str) {
        assert!(!text.contains("NaN"), "{what} shows NaN:\n{text}");
    }

    #[test]
    fn the_fixture_scores_as_the_run_would() {
        let cases = answer_cases();
        assert_eq!(cases[0].score, Some(100));
        assert!(!cases[0].is_hard_fail);
        assert_eq!(cases[1].score, Some(0), "a failed critical assertion is 0");
        assert!(cases[1].is_hard_fail);
        assert_eq!(cases[2].score, None);
        let log = answer_run();
        let a = log.answer.as_ref().unwrap();
        assert_eq!((a.tests_run, a.errors, a.hard_fails), (3, 1, 1));
    }

    #[test]
    fn markdown_answer_section() {
        let md = crate::markdown::render(&answer_run());
        no_nan("the Markdown report", &md);
        let failures = md
            .find("## Answer Cases: Failed or Below 100")
            .expect("failures");
        let errors = md.find("## Answer Test Errors").expect("errors apart");
        let failing = md.find("### ANS-002").unwrap();
        let errored = md.rfind("### ANS-003").unwrap();
        assert!(failures < failing && failing < errors && errors < errored);
        assert!(
            !md[failures..errors].contains("ANS-003"),
            "an error is never a failure"
        );
        assert!(!md.contains("### ANS-001"), "a passing case is not listed");
        assert!(md.contains("✗ \"Used helmets can be returned within 90 days\""));
        assert!(md.contains("critical assertion 1 `icontains \"30 days\"` failed"));
        // Each case with its stored verdict, beside its score.
        assert!(md.contains("### ANS-002: "), "{md}");
        assert!(md.contains(" · **FAILED**"), "{md}");
        assert!(md.contains("**Verdict:** error: "), "{md}");
        assert!(md.contains("1 of 3 cases errored and are left out of every average"));
        insta::assert_snapshot!(md);
    }

    #[test]
    fn html_answer_section() {
        let html = crate::html::render(&answer_run());
        no_nan("the HTML report", &html);
        let failures = html
            .find("<h2>Answer cases: failed or below 100</h2>")
            .expect("failures");
        let errors = html
            .find("<h2>Answer test errors</h2>")
            .expect("errors apart");
        assert!(failures < errors);
        assert!(!html[failures..errors].contains("ANS-003"));
        assert!(html[errors..].contains("judge: faithfulness: the reply is not JSON"));
        assert!(html.contains("<td class=\"unwanted\">not supported</td>"));
        assert!(
            html.contains("<tr><td>Answer</td>"),
            "the summary has the answer row"
        );
        insta::assert_snapshot!(html);
    }

    #[test]
    fn trajectory_checks_are_listed_with_their_status_and_calls() {
        use assay_core::simulation::{CallRef, CheckKind, CheckResult, CheckStatus};
        let call = |n: usize, name: &str| CallRef {
            call: n,
            turn: 2,
            id: format!("call-{n}"),
            name: name.into(),
        };
        let mut r = answer_cases().remove(0);
        r.trajectory = vec![
            CheckResult {
                name: "trajectory: order find_loan → renew_loan".into(),
                status: CheckStatus::Passed,
                details: Vec::new(),
                advisory: false,
                source: Some("the product's tool calls".into()),
                state: None,
                kind: CheckKind::Trajectory,
                calls: vec![call(1, "find_loan"), call(2, "renew_loan")],
            },
            CheckResult {
                name: "trajectory: renew_loan called at most 1".into(),
                status: CheckStatus::Failed,
                details: vec![
                    "renew_loan called 2 times, at most 1: the 2nd is renew_loan (call 3, turn 2)"
                        .into(),
                ],
                advisory: true,
                source: Some("the product's tool calls".into()),
                state: None,
                kind: CheckKind::Trajectory,
                calls: vec![call(3, "renew_loan")],
            },
        ];
        let md = super::markdown_details(&r);
        let at = md
            .iter()
            .position(|l| l == "**Trajectory:** 1 of 2 checks passed on the product's tool calls")
            .expect("a trajectory line");
        assert_eq!(
            md[at + 1],
            "  - ✓ trajectory: order find_loan → renew_loan — find_loan (call 1), renew_loan (call 2)"
        );
        assert_eq!(
            md[at + 2],
            "  - ✗ trajectory: renew_loan called at most 1 (advisory): renew_loan called 2 times, at most 1: the 2nd is renew_loan (call 3, turn 2) — renew_loan (call 3)"
        );
        let mut html = String::new();
        super::html_case(&mut html, &r);
        assert!(
            html.contains(
                "<h4>Trajectory: 1 of 2 checks passed on the product&apos;s tool calls</h4>"
            ),
            "{html}"
        );
        assert!(
            html.contains("<li><span class=\"unwanted\">failed</span> trajectory: renew_loan called at most 1 (advisory)"),
            "{html}"
        );
        // A case without trajectory rules shows no such section.
        r.trajectory.clear();
        assert!(
            !super::markdown_details(&r)
                .iter()
                .any(|l| l.contains("Trajectory"))
        );
    }

    #[test]
    fn console_shows_metric_means_and_errors_apart() {
        let text = crate::console::render(&answer_run(), crate::console::Listing::All);
        no_nan("the console summary", &text);
        assert!(
            text.contains("answer metrics  faithfulness 0.50 over 2 cases"),
            "{text}"
        );
        assert!(
            text.contains("1 of 3 cases errored and are left out of every average"),
            "{text}"
        );
        let errors = text.find("errors (not scored): 1").expect(&text);
        assert!(text[errors..].contains("judge: faithfulness: the reply is not JSON"));
        assert!(text[errors..].contains("ANS-003"));
        let listed = text.find("ANS-002").expect("the failing case is listed");
        assert!(listed < errors);
        assert!(!text[..errors].contains("ANS-003"), "{text}");
    }

    #[test]
    fn a_critical_answer_case_is_a_critical_failure_in_every_report() {
        let mut log = answer_run();
        let a = log.answer.as_mut().unwrap();
        a.results[1].is_critical = true;
        a.results[1].is_critical_failure = true;
        log.summary.critical_failures = vec!["ANS-002".into()];
        let md = crate::markdown::render(&log);
        assert!(
            md.contains("critical failure(s): a critical case failed"),
            "{md}"
        );
        assert!(md.contains("- **ANS-002** (answer): \"Can I return a used helmet?\""));
        let html = crate::html::render(&log);
        assert!(html.contains("<strong>ANS-002</strong> (answer)"));
        let text = crate::console::render(&log, crate::console::Listing::Summary);
        assert!(text.contains("!! CRITICAL FAILURES: ANS-002"), "{text}");
        assert!(text.contains("CRITICAL"), "{text}");
    }

    #[test]
    fn undefined_numbers_read_n_a() {
        assert_eq!(super::share(Some(f64::NAN)), "n/a");
        assert_eq!(super::share(None), "n/a");
        assert_eq!(super::share(Some(0.5)), "0.50");
        let mut r = answer_cases().remove(0);
        for o in r.metrics.values_mut() {
            o.score = Some(f64::NAN);
            for q in &mut o.questions {
                q.similarity = f64::NAN;
            }
        }
        let mut html = String::new();
        super::html_case(&mut html, &r);
        no_nan("an answer case", &html);
        no_nan("an answer case", &super::markdown_case(&r));
    }
}
