//! JUnit XML for CI systems: one `<testsuite>` per bank, one `<testcase>` per case.
//!
//! A case is a `<failure>` when it is a critical failure or scores below the pass score (100
//! unless configured); a case that could not be scored is an `<error>`.

use std::fmt::Write;

use assay_core::runlog::RunLog;

use crate::markdown::breakdown_lines;

/// Escapes text for XML attributes and content.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

enum Outcome {
    Pass,
    Failure { message: String, details: String },
    Error(String),
}

struct Case {
    id: String,
    name: String,
    outcome: Outcome,
}

fn outcome(score: u32, pass_score: u32, critical: bool, lines: &[String]) -> Outcome {
    if critical || score < pass_score {
        let kind = if critical { "critical failure: " } else { "" };
        Outcome::Failure {
            message: format!("{kind}score {score}"),
            details: lines.join("\n"),
        }
    } else {
        Outcome::Pass
    }
}

/// Renders JUnit XML. `pass_score` is the lowest score that passes.
pub fn render(log: &RunLog, pass_score: u32) -> String {
    let mut suites: Vec<(&str, Vec<Case>)> = Vec::new();
    if let Some(sem) = &log.semantic {
        let cases = sem
            .results
            .iter()
            .map(|r| Case {
                id: r.test_id.clone(),
                name: r.name.clone(),
                outcome: match (&r.error, r.score) {
                    (Some(e), _) => Outcome::Error(e.clone()),
                    (None, score) => outcome(
                        score.unwrap_or(0),
                        pass_score,
                        false,
                        &breakdown_lines(&r.breakdown),
                    ),
                },
            })
            .collect();
        suites.push(("semantic", cases));
    }
    if let Some(st) = &log.state {
        let cases = st
            .results
            .iter()
            .map(|r| Case {
                id: r.test_id.clone(),
                name: r.name.clone(),
                outcome: outcome(r.score, pass_score, false, &breakdown_lines(&r.breakdown)),
            })
            .collect();
        suites.push(("state", cases));
    }
    if let Some(p) = &log.pattern {
        let cases = p
            .results
            .iter()
            .map(|r| Case {
                id: r.test_id.clone(),
                name: r.name.clone(),
                outcome: outcome(
                    r.score,
                    pass_score,
                    r.is_critical_failure,
                    &breakdown_lines(&r.breakdown),
                ),
            })
            .collect();
        suites.push(("pattern", cases));
    }
    if let Some(a) = &log.always {
        let cases = a
            .results
            .iter()
            .map(|r| Case {
                id: r.test_id.clone(),
                name: r.name.clone(),
                outcome: outcome(r.score, pass_score, false, &breakdown_lines(&r.breakdown)),
            })
            .collect();
        suites.push(("always", cases));
    }

    let count =
        |cases: &[Case], f: fn(&Outcome) -> bool| cases.iter().filter(|c| f(&c.outcome)).count();
    let is_failure = |o: &Outcome| matches!(o, Outcome::Failure { .. });
    let is_error = |o: &Outcome| matches!(o, Outcome::Error(_));
    let total: usize = suites.iter().map(|(_, c)| c.len()).sum();
    let failures: usize = suites.iter().map(|(_, c)| count(c, is_failure)).sum();
    let errors: usize = suites.iter().map(|(_, c)| count(c, is_error)).sum();
    let seconds = log.duration_ms as f64 / 1000.0;

    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"assay\" tests=\"{total}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{seconds:.3}\">"
    );
    for (bank, cases) in &suites {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{bank}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" timestamp=\"{}\">",
            cases.len(),
            count(cases, is_failure),
            count(cases, is_error),
            escape(&log.timestamp)
        );
        if *bank == "semantic"
            && let Some(ir) = log.semantic.as_ref().and_then(|s| s.ir.as_ref())
        {
            let _ = writeln!(out, "    <properties>");
            let _ = writeln!(
                out,
                "      <property name=\"ir.cases\" value=\"{}\"/>",
                ir.cases
            );
            for (name, value) in ir.mean.named() {
                let _ = writeln!(
                    out,
                    "      <property name=\"ir.{name}\" value=\"{value:.6}\"/>"
                );
            }
            let _ = writeln!(out, "    </properties>");
        }
        for case in cases {
            let name = if case.name.is_empty() {
                case.id.clone()
            } else {
                format!("{}: {}", case.id, case.name)
            };
            let open = format!(
                "    <testcase classname=\"assay.{bank}\" name=\"{}\"",
                escape(&name)
            );
            match &case.outcome {
                Outcome::Pass => {
                    let _ = writeln!(out, "{open}/>");
                }
                Outcome::Failure { message, details } => {
                    let _ = writeln!(
                        out,
                        "{open}>\n      <failure message=\"{}\" type=\"assay.score\">{}</failure>\n    </testcase>",
                        escape(message),
                        escape(details)
                    );
                }
                Outcome::Error(e) => {
                    let _ = writeln!(
                        out,
                        "{open}>\n      <error message=\"{}\" type=\"assay.infrastructure\"/>\n    </testcase>",
                        escape(e)
                    );
                }
            }
        }
        let _ = writeln!(out, "  </testsuite>");
    }
    out.push_str("</testsuites>\n");
    out
}
