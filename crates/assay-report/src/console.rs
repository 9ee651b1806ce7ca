//! The plain-text summary `assay run` prints on a terminal.

use std::fmt::Write;

use assay_core::bank::BankType;
use assay_core::runlog::RunLog;
use assay_core::scoring::{Breakdown, Penalty, interpret};

use crate::markdown::breakdown_lines;

fn strip_ticks(s: &str) -> String {
    s.replace('`', "")
}

/// Which cases the summary lists one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Listing {
    /// Counts per reason and the worst few cases (the default): readable at any bank size.
    #[default]
    Summary,
    /// Every hard fail and critical failure.
    Failures,
    /// Every case below 100.
    All,
}

/// Renders the summary: the per-bank table, the totals, the reasons cases lost points (with
/// the entities named most often) and the cases `listing` asks for, worst first. Errors are
/// grouped by message. The full list is in the saved report and the `--json` RunLog.
pub fn render(log: &RunLog, listing: Listing) -> String {
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

    let cases = imperfect_cases(log);
    let shown: Vec<&Imperfect> = match listing {
        Listing::Failures => cases
            .iter()
            .filter(|c| c.score == 0 || c.critical)
            .collect(),
        Listing::All => cases.iter().collect(),
        Listing::Summary => cases.iter().take(WORST).collect(),
    };
    if !cases.is_empty() {
        let total_cases = s.total_tests;
        let _ = writeln!(out, "\ncases below 100: {} of {total_cases}", cases.len());
        render_reasons(&mut out, &cases);
        let heading = match listing {
            Listing::Summary if cases.len() > shown.len() => format!("worst {}", shown.len()),
            Listing::Failures => "failures".to_owned(),
            _ => "cases".to_owned(),
        };
        if !shown.is_empty() {
            let _ = writeln!(out, "\n{heading}:");
            for c in &shown {
                let flag = if c.critical { " CRITICAL" } else { "" };
                let _ = writeln!(
                    out,
                    "  {:<16} {:>3} {:<17}{flag} {}",
                    c.id,
                    c.score,
                    interpret(c.score),
                    c.why
                );
            }
        }
        let hidden = cases.len() - shown.len();
        if hidden > 0 {
            let _ = writeln!(
                out,
                "  … {hidden} more below 100: `--all` lists them here; the saved report and `--json` have every case"
            );
        }
    }
    if let Some(r) = &log.semantic {
        let errors: Vec<_> = r.results.iter().filter(|c| c.error.is_some()).collect();
        if !errors.is_empty() {
            let _ = writeln!(out, "\nerrors (not scored): {}", errors.len());
            // Grouped by message: one provider outage is one line, not one line per case.
            let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
            for c in errors {
                let msg = c.error.as_deref().unwrap_or_default().to_owned();
                match groups.iter_mut().find(|(m, _)| *m == msg) {
                    Some((_, ids)) => ids.push(&c.test_id),
                    None => groups.push((msg, vec![&c.test_id])),
                }
            }
            groups.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
            let all = listing == Listing::All;
            for (msg, ids) in groups.iter().take(if all { usize::MAX } else { WORST }) {
                let _ = writeln!(out, "  {:>3} × {msg}", ids.len());
                let _ = writeln!(
                    out,
                    "        {}",
                    id_list(ids, if all { usize::MAX } else { 6 })
                );
            }
            if !all && groups.len() > WORST {
                let _ = writeln!(
                    out,
                    "  … {} more kinds of error: `--all` or `--json`",
                    groups.len() - WORST
                );
            }
        }
    }
    out
}

/// How many cases the default summary lists.
const WORST: usize = 8;

/// One case below 100 (or a critical failure), as the summary lists it.
struct Imperfect {
    id: String,
    score: u32,
    critical: bool,
    why: String,
    breakdown: Breakdown,
}

/// Every case below 100 and every critical failure, worst first: critical failures, then by
/// score, then in bank and file order.
fn imperfect_cases(log: &RunLog) -> Vec<Imperfect> {
    let mut cases = Vec::new();
    let mut push = |id: &str, score: u32, critical: bool, b: &Breakdown| {
        let why = breakdown_lines(b)
            .iter()
            .map(|w| strip_ticks(w))
            .collect::<Vec<_>>()
            .join("; ");
        cases.push(Imperfect {
            id: id.to_owned(),
            score,
            critical,
            why,
            breakdown: b.clone(),
        });
    };
    if let Some(r) = &log.semantic {
        for c in r
            .results
            .iter()
            .filter(|c| c.score.is_some_and(|s| s < 100))
        {
            push(&c.test_id, c.score.unwrap_or(0), false, &c.breakdown);
        }
    }
    if let Some(r) = &log.state {
        for c in r.results.iter().filter(|c| c.score < 100) {
            push(&c.test_id, c.score, false, &c.breakdown);
        }
    }
    if let Some(r) = &log.pattern {
        for c in r
            .results
            .iter()
            .filter(|c| c.score < 100 || c.is_critical_failure)
        {
            push(&c.test_id, c.score, c.is_critical_failure, &c.breakdown);
        }
    }
    if let Some(r) = &log.always {
        for c in r.results.iter().filter(|c| c.score < 100) {
            push(&c.test_id, c.score, false, &c.breakdown);
        }
    }
    // A stable sort keeps bank and file order among equals.
    cases.sort_by_key(|c| (!c.critical, c.score));
    cases
}

/// The reasons cases lost points, with how many cases each touched and, for penalties that
/// name entities, the entities named most often.
fn render_reasons(out: &mut String, cases: &[Imperfect]) {
    const LABELS: [&str; 5] = [
        "hard fail",
        "false positives",
        "secondary missing",
        "rank violations",
        "wrong handlers",
    ];
    // Per reason: the cases it touched and the entities it named, with counts.
    let mut touched = [0usize; 5];
    let mut named: [Vec<(String, usize)>; 5] = Default::default();
    for c in cases {
        let b = &c.breakdown;
        // What each reason names: the hard fail's reason, the entities penalised, and for a
        // rank violation the entity that should have ranked higher.
        let names = |p: Option<&Penalty<String>>| p.map(|p| p.items.clone());
        let hits: [Option<Vec<String>>; 5] = [
            (b.primary_fail == Some(true)).then(|| b.reason.clone().into_iter().collect()),
            names(b.false_positives.as_ref()),
            names(b.secondary_missing.as_ref()),
            b.rank_violations.as_ref().map(|p| {
                p.items
                    .iter()
                    .map(|v| format!("{} too low", v.expected_higher))
                    .collect()
            }),
            names(b.wrong_handlers.as_ref()),
        ];
        for (i, items) in hits.into_iter().enumerate() {
            let Some(items) = items else { continue };
            touched[i] += 1;
            for item in items {
                match named[i].iter_mut().find(|(n, _)| *n == item) {
                    Some((_, count)) => *count += 1,
                    None => named[i].push((item, 1)),
                }
            }
        }
    }
    let _ = writeln!(out, "  {:<18} {:>5}  most often", "reason", "cases");
    for (i, label) in LABELS.iter().enumerate() {
        if touched[i] == 0 {
            continue;
        }
        // Most often first; a stable sort keeps first-seen order among equals.
        named[i].sort_by_key(|n| std::cmp::Reverse(n.1));
        let mut top = named[i]
            .iter()
            .take(3)
            .map(|(item, n)| format!("{item} ({n})"))
            .collect::<Vec<_>>()
            .join(", ");
        let more = named[i].len().saturating_sub(3);
        if more > 0 {
            let _ = write!(top, ", {more} more");
        }
        let line = format!("  {label:<18} {:>5}  {top}", touched[i]);
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// `a, b, c` and `… N more` past `max`.
fn id_list(ids: &[&str], max: usize) -> String {
    let mut s = ids.iter().take(max).copied().collect::<Vec<_>>().join(", ");
    if ids.len() > max {
        let _ = write!(s, ", … {} more", ids.len() - max);
    }
    s
}
