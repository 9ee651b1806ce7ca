//! The plain-text summary `assay run` prints on a terminal.

use std::fmt::Write;

use assay_core::aggregate::{ReasonTally, RuleTally};
use assay_core::bank::BankType;
use assay_core::runlog::RunLog;
use assay_core::scoring::interpret;
use assay_core::verdict::Outcome;

pub use crate::common::changed_line;
use crate::common::{breakdown_lines, id_list};

fn strip_ticks(s: &str) -> String {
    s.replace('`', "")
}

/// Which cases the summary lists one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Listing {
    /// Counts by verdict, the failed cases grouped by the rule that failed them, and the
    /// reasons cases lost points (the default): no line per case, readable at any bank size.
    #[default]
    Summary,
    /// Also every failed case, a line each with the checks that failed it, and every errored
    /// case.
    Failures,
    /// Also every case below 100 (failed or not), and every error.
    All,
}

/// Renders the summary: the per-bank table with each bank's cases by verdict, the totals, the
/// failed cases grouped by the rule that failed them (each case's stored verdict, never worked
/// out again from its score), the reasons cases lost points (with the entities named most
/// often) and the cases `listing` asks for, failures first. Errors are grouped by message.
/// The full list is in the saved report and the `--json` RunLog.
pub fn render(log: &RunLog, listing: Listing) -> String {
    let s = &log.summary;
    let mut out = String::new();
    let banks: Vec<&str> = log.filters.banks.iter().map(|b| b.key()).collect();
    let _ = writeln!(out, "assay run: {} ({})\n", log.project, banks.join(", "));
    if let Some(changed) = &log.filters.changed_since {
        let _ = writeln!(out, "{}\n", changed_line(changed));
    }
    if let Some(drafts) = log.filters.drafts {
        let _ = writeln!(
            out,
            "drafts included: {drafts} pending draft(s) from test_banks/drafts/ ran as cases\n"
        );
    }
    if !s.critical_failures.is_empty() {
        let ids: Vec<&str> = s.critical_failures.iter().map(String::as_str).collect();
        let _ = writeln!(out, "!! CRITICAL FAILURES: {}\n", id_list(&ids, WORST));
    }
    let verdicts = log.verdicts();
    let _ = writeln!(
        out,
        "  {:<9} {:>6} {:>6} {:>7} {:>7} {:>7} {:>11} {:>7}",
        "bank", "score", "tests", "passed", "failed", "errors", "hard fails", "weight"
    );
    let counts = |bank: BankType| -> Option<(usize, usize)> {
        match bank {
            BankType::Semantic => log.semantic.as_ref().map(|r| (r.tests_run, r.hard_fails)),
            BankType::State => log.state.as_ref().map(|r| (r.tests_run, r.hard_fails)),
            BankType::Pattern => log.pattern.as_ref().map(|r| (r.tests_run, r.hard_fails)),
            BankType::Always => log.always.as_ref().map(|r| (r.tests_run, r.hard_fails)),
            BankType::Answer => log.answer.as_ref().map(|r| (r.tests_run, r.hard_fails)),
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
        let v = verdicts.of_bank(bank);
        let _ = writeln!(
            out,
            "  {:<9} {score:>6} {tests:>6} {:>7} {:>7} {:>7} {hard:>11} {weight:>7}",
            bank.key(),
            v.passed,
            v.failed,
            v.errors
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "  combined score  {:.1}", s.combined_score);
    let _ = writeln!(out, "  health          {}", s.health_status);
    let _ = writeln!(
        out,
        "  cases           {}: {} passed, {} failed, {} errors ({} hard fails)",
        s.total_tests,
        verdicts.all.passed,
        verdicts.all.failed,
        verdicts.all.errors,
        s.hard_fail_count
    );
    if let Some(sem) = log.semantic.as_ref().filter(|r| r.repeats > 1) {
        let interval = sem.average_interval.as_ref().map_or_else(String::new, |i| {
            format!(" (95% CI {:.1}–{:.1})", i.low, i.high)
        });
        let unstable = if sem.unstable.is_empty() {
            "no case changed its verdict".to_owned()
        } else {
            let shown: Vec<&str> = sem.unstable.iter().take(5).map(String::as_str).collect();
            format!(
                "{} unstable case(s): {}{}",
                sem.unstable.len(),
                shown.join(", "),
                if sem.unstable.len() > 5 { ", …" } else { "" }
            )
        };
        let _ = writeln!(
            out,
            "  repeats         semantic ran {} times: average {:.1}{interval}; {unstable}",
            sem.repeats, sem.average_score
        );
    }
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
    if let Some(answer) = &log.answer {
        for (i, line) in crate::answer::metric_lines(answer).iter().enumerate() {
            let label = if i == 0 { "answer metrics" } else { "" };
            let _ = writeln!(out, "  {label:<15} {line}");
        }
    }

    let notable = log.notable();
    let complete = log.is_complete();
    // Where every case is when the RunLog lists only the worst of each bank.
    let run_log = log.cases.as_ref().map_or_else(
        || "the run log".to_owned(),
        |c| format!("the run log ({})", c.file),
    );
    if verdicts.all.failed > 0 {
        let _ = writeln!(
            out,
            "\nfailed: {} of {} (by the rule that failed them)",
            verdicts.all.failed, s.total_tests
        );
        render_rules(&mut out, &verdicts.rules);
    }
    if notable.imperfect > 0 {
        let _ = writeln!(
            out,
            "\ncases below 100: {} of {} (why points were lost)",
            notable.imperfect, s.total_tests
        );
        render_reasons(&mut out, &notable.reasons);
    }
    let shown: Vec<Listed> = match listing {
        Listing::Summary => Vec::new(),
        Listing::Failures => listed_cases(log)
            .into_iter()
            .filter(|c| c.outcome == Outcome::Fail)
            .collect(),
        Listing::All => listed_cases(log),
    };
    if !shown.is_empty() {
        let heading = if listing == Listing::Failures {
            "failures"
        } else {
            "cases below 100 and failures"
        };
        let _ = writeln!(out, "\n{heading}:");
        for c in &shown {
            let flag = if c.critical { " CRITICAL" } else { "" };
            let _ = writeln!(
                out,
                "  {:<16} {:>3} {:<17} {:<6}{flag} {}",
                c.id,
                c.score,
                interpret(c.score),
                c.outcome.label(),
                c.why
            );
        }
    }
    let listed_all = match listing {
        Listing::Summary => 0,
        Listing::Failures => verdicts.all.failed,
        Listing::All => notable.imperfect.max(verdicts.all.failed),
    };
    if listing != Listing::Summary && listed_all > shown.len() {
        let _ = writeln!(
            out,
            "  … {} more: every case is in {run_log}; the saved report lists the worst of each bank",
            listed_all - shown.len()
        );
    } else if listing == Listing::Summary && verdicts.all.failed + notable.imperfect > 0 {
        let _ = writeln!(
            out,
            "  (`--failures-only` lists each failed case with its checks, `--all` every case below 100; the saved report and `--json` have every case)"
        );
    }
    // Grouped by message: one provider outage is one line, not one line per case.
    let mut groups: Vec<(String, usize, Vec<&str>)> = Vec::new();
    // Semantic and answer cases can error; both are listed apart from the failures.
    if complete {
        for c in crate::select::errored(log) {
            let msg = c.error.to_owned();
            match groups.iter_mut().find(|(m, _, _)| *m == msg) {
                Some((_, n, ids)) => {
                    *n += 1;
                    ids.push(c.test_id);
                }
                None => groups.push((msg, 1, vec![c.test_id])),
            }
        }
    } else {
        for g in &notable.errors {
            let ids = g.test_ids.iter().map(String::as_str).collect();
            groups.push((g.message.clone(), g.count, ids));
        }
    }
    if !log.stale.is_empty() {
        let _ = writeln!(out, "\n{}", stale_line(log));
    }
    if !groups.is_empty() {
        let errors = s.error_count.max(groups.iter().map(|g| g.1).sum());
        let _ = writeln!(out, "\nerrors (not scored): {errors}");
        groups.sort_by_key(|g| std::cmp::Reverse(g.1));
        let all = listing != Listing::Summary;
        for (msg, count, ids) in groups.iter().take(if all { usize::MAX } else { WORST }) {
            let _ = writeln!(out, "  {count:>3} × {msg}");
            let mut list = id_list(ids, if all { usize::MAX } else { 6 });
            if ids.len() < *count && (all || ids.len() <= 6) {
                let _ = write!(list, ", … {} more", count - ids.len());
            }
            let _ = writeln!(out, "        {list}");
        }
        let kinds = notable.error_kinds.max(groups.len());
        if !all && kinds > WORST {
            let _ = writeln!(
                out,
                "  … {} more kinds of error: `--failures-only`, `--all` or `--json`",
                kinds - WORST
            );
        }
    }
    out
}

/// How many ids (critical failures, stale cases) and error groups the default summary shows.
const WORST: usize = 8;

/// One case the summary lists: a failure, or a case below 100.
struct Listed {
    id: String,
    score: u32,
    outcome: Outcome,
    critical: bool,
    why: String,
}

/// Every listed case that failed or scored below 100 (errors are listed apart), failures
/// first (critical failures first among them), then by score, then in bank and file order.
/// A failure says the checks that failed it; a case that passed below 100 what cost it points.
fn listed_cases(log: &RunLog) -> Vec<Listed> {
    let mut cases = Vec::new();
    crate::select::for_each_listed(log, None, &mut |r| {
        let verdict = r.verdict();
        let Some(score) = r.score() else { return };
        if verdict.outcome != Outcome::Fail && score >= 100 {
            return;
        }
        let why = if verdict.outcome == Outcome::Fail {
            verdict.summary()
        } else {
            breakdown_lines(r.breakdown()).join("; ")
        };
        cases.push(Listed {
            id: r.test_id().to_owned(),
            score,
            outcome: verdict.outcome,
            critical: r.is_critical_failure(),
            why: strip_ticks(&why),
        });
    });
    // A stable sort keeps bank and file order among equals.
    cases.sort_by_key(|c| (c.outcome != Outcome::Fail, !c.critical, c.score));
    cases
}

/// The failed cases by the rule that failed them: how many, the first few, and what the rule
/// named most often.
fn render_rules(out: &mut String, rules: &[RuleTally]) {
    let _ = writeln!(out, "  {:<20} {:>5}  cases", "rule", "cases");
    for r in rules {
        let mut ids = r
            .test_ids
            .iter()
            .take(IDS_SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if r.cases > IDS_SHOWN.min(r.test_ids.len()) {
            let _ = write!(
                ids,
                ", … {} more",
                r.cases - IDS_SHOWN.min(r.test_ids.len())
            );
        }
        let mut line = format!("  {:<20} {:>5}  {ids}", r.rule.label(), r.cases);
        if !r.named.is_empty() {
            let top: Vec<String> = r
                .named
                .iter()
                .take(3)
                .map(|(item, n)| format!("{item} ({n})"))
                .collect();
            let more = r.distinct.saturating_sub(3);
            let _ = write!(
                line,
                "; most often {}{}",
                top.join(", "),
                if more > 0 {
                    format!(", {more} more")
                } else {
                    String::new()
                }
            );
        }
        let _ = writeln!(out, "{line}");
    }
}

/// Case ids the summary shows per rule.
const IDS_SHOWN: usize = 6;

/// The reasons cases lost points, with how many cases each touched and, for penalties that
/// name entities, the entities named most often.
fn render_reasons(out: &mut String, reasons: &[ReasonTally]) {
    if reasons.is_empty() {
        return;
    }
    let _ = writeln!(out, "  {:<18} {:>5}  most often", "reason", "cases");
    for r in reasons {
        let mut top = r
            .named
            .iter()
            .take(3)
            .map(|(item, n)| format!("{item} ({n})"))
            .collect::<Vec<_>>()
            .join(", ");
        let more = r.distinct.saturating_sub(3);
        if more > 0 {
            let _ = write!(top, ", {more} more");
        }
        let line = format!("  {:<18} {:>5}  {top}", r.reason, r.cases);
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// One line on the stale cases: how many, the first few, where the rest are.
pub fn stale_line(log: &RunLog) -> String {
    let total = log.stale.len() + log.stale_more;
    let ids: Vec<String> = log
        .stale
        .iter()
        .take(WORST)
        .map(|c| {
            let entities: Vec<&str> = c.entities.iter().map(|e| e.entity_id.as_str()).collect();
            format!("{} ({})", c.test_id, entities.join(", "))
        })
        .collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut list = id_list(&refs, WORST);
    if total > log.stale.len() && log.stale.len() <= WORST {
        let _ = write!(list, ", … {} more", total - log.stale.len());
    }
    format!(
        "{total} case{} stale (entities edited since the version the case was written for, or since the accepted run): {list}; the report's \"Stale cases\" section lists each with the fields that changed",
        if total == 1 { " is" } else { "s are" }
    )
}
