//! The plain-text summary `assay run` prints on a terminal.

use std::fmt::Write;

use assay_core::bank::BankType;
use assay_core::runlog::RunLog;
use assay_core::scoring::interpret;

use crate::markdown::breakdown_lines;

fn strip_ticks(s: &str) -> String {
    s.replace('`', "")
}

/// Renders the summary. With `failures_only`, only hard fails, critical failures and errors are
/// listed; otherwise every case below 100.
pub fn render(log: &RunLog, failures_only: bool) -> String {
    let s = &log.summary;
    let mut out = String::new();
    let banks: Vec<&str> = log.filters.banks.iter().map(|b| b.key()).collect();
    let _ = writeln!(out, "assay run: {} ({})\n", log.project, banks.join(", "));
    if !s.critical_failures.is_empty() {
        let _ = writeln!(
            out,
            "!! CRITICAL FAILURES: {}\n",
            s.critical_failures.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "  {:<9} {:>6} {:>6} {:>11} {:>7}",
        "bank", "score", "tests", "hard fails", "weight"
    );
    let counts = |bank: BankType| -> Option<(usize, usize)> {
        match bank {
            BankType::Semantic => log.semantic.as_ref().map(|r| (r.tests_run, r.hard_fails)),
            BankType::State => log.state.as_ref().map(|r| (r.tests_run, r.hard_fails)),
            BankType::Pattern => log.pattern.as_ref().map(|r| (r.tests_run, r.hard_fails)),
            BankType::Always => log.always.as_ref().map(|r| (r.tests_run, r.hard_fails)),
        }
    };
    for bank in BankType::ALL {
        let Some((tests, hard)) = counts(bank) else {
            continue;
        };
        let score = s.component_scores.get(bank.key()).copied().flatten();
        let weight = s
            .weights
            .get(bank.key())
            .map_or_else(|| "-".to_owned(), |w| format!("{:.1}%", w * 100.0));
        let score = score.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
        let _ = writeln!(
            out,
            "  {:<9} {score:>6} {tests:>6} {hard:>11} {weight:>7}",
            bank.key()
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "  combined score  {:.1}", s.combined_score);
    let _ = writeln!(out, "  health          {}", s.health_status);
    let _ = writeln!(
        out,
        "  cases           {} ({} hard fails, {} errors)",
        s.total_tests, s.hard_fail_count, s.error_count
    );
    if let Some(src) = &s.expectation_sources {
        let _ = writeln!(
            out,
            "  expectations    {} original, {} calibrated, {} human override",
            src.original, src.opus, src.human_override
        );
    }
    if let Some(ir) = log.semantic.as_ref().and_then(|r| r.ir.as_ref()) {
        let m = &ir.mean;
        let _ = writeln!(
            out,
            "  retrieval       recall@3/6/15 {:.3}/{:.3}/{:.3}, MRR {:.3}, nDCG@3/6/15 {:.3}/{:.3}/{:.3} ({} cases)",
            m.recall_at_3,
            m.recall_at_6,
            m.recall_at_15,
            m.mrr,
            m.ndcg_at_3,
            m.ndcg_at_6,
            m.ndcg_at_15,
            ir.cases
        );
    }

    let mut lines: Vec<String> = Vec::new();
    let mut push = |id: &str, score: u32, critical: bool, why: Vec<String>| {
        if failures_only && score > 0 && !critical {
            return;
        }
        let flag = if critical { " CRITICAL" } else { "" };
        let why = why
            .iter()
            .map(|w| strip_ticks(w))
            .collect::<Vec<_>>()
            .join("; ");
        lines.push(format!(
            "  {id:<16} {score:>3} {:<17}{flag} {why}",
            interpret(score)
        ));
    };
    if let Some(r) = &log.semantic {
        for c in r
            .results
            .iter()
            .filter(|c| c.score.is_some_and(|s| s < 100))
        {
            push(
                &c.test_id,
                c.score.unwrap_or(0),
                false,
                breakdown_lines(&c.breakdown),
            );
        }
    }
    if let Some(r) = &log.state {
        for c in r.results.iter().filter(|c| c.score < 100) {
            push(&c.test_id, c.score, false, breakdown_lines(&c.breakdown));
        }
    }
    if let Some(r) = &log.pattern {
        for c in r
            .results
            .iter()
            .filter(|c| c.score < 100 || c.is_critical_failure)
        {
            push(
                &c.test_id,
                c.score,
                c.is_critical_failure,
                breakdown_lines(&c.breakdown),
            );
        }
    }
    if let Some(r) = &log.always {
        for c in r.results.iter().filter(|c| c.score < 100) {
            push(&c.test_id, c.score, false, breakdown_lines(&c.breakdown));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(
            out,
            "\n{}:",
            if failures_only {
                "failures"
            } else {
                "cases below 100"
            }
        );
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
    if let Some(r) = &log.semantic {
        let errors: Vec<_> = r.results.iter().filter(|c| c.error.is_some()).collect();
        if !errors.is_empty() {
            let _ = writeln!(out, "\nerrors (not scored):");
            for c in errors {
                let _ = writeln!(
                    out,
                    "  {:<16} {}",
                    c.test_id,
                    c.error.as_deref().unwrap_or_default()
                );
            }
        }
    }
    out
}
