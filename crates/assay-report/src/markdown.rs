//! The Markdown report (000 §6.6), with critical failures first.

use std::fmt::Write;

use assay_core::bank::BankType;
use assay_core::ir::IrSummary;
use assay_core::runlog::{GroupScore, Health, RunLog, SemanticResults};
use assay_core::scoring::{Breakdown, interpret};
use assay_core::verdict::{Verdict, Verdicted};

pub use crate::common::breakdown_lines;
use crate::common::{STALE_SHOWN, list, stale_fields, stale_versions};
use crate::select;

/// Escapes text for a Markdown table cell or inline text.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn quote(text: &str, max: usize) -> String {
    let flat = cell(text);
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

fn fmt_score(score: Option<f64>) -> String {
    score.map_or_else(|| "not run".to_owned(), |s| format!("{s:.1}"))
}

fn group_table(
    out: &mut String,
    title: &str,
    key: &str,
    groups: &std::collections::BTreeMap<String, GroupScore>,
) {
    if groups.is_empty() {
        return;
    }
    let mut rows: Vec<(&String, &GroupScore)> = groups.iter().collect();
    rows.sort_by(|a, b| b.1.avg.total_cmp(&a.1.avg).then_with(|| a.0.cmp(b.0)));
    let _ = writeln!(
        out,
        "## {title}\n\n| {key} | Avg Score | Tests | Hard Fails |\n|---|---|---|---|"
    );
    for (name, g) in rows {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {} | {} |",
            cell(name),
            g.avg,
            g.tests,
            g.hard_fails
        );
    }
    out.push('\n');
}

fn ir_table(out: &mut String, sem: &SemanticResults) {
    let Some(run) = &sem.ir else {
        return;
    };
    let _ = writeln!(
        out,
        "## Retrieval Metrics (Semantic)\n\nOver each case's ranked list (the selection, then the other candidates; 15 at most); relevance 2 for primary, 1 for secondary entities.\n\n| Topic | Cases | Recall@3 | Recall@6 | Recall@15 | MRR | nDCG@3 | nDCG@6 | nDCG@15 |\n|---|---|---|---|---|---|---|---|---|"
    );
    let row = |out: &mut String, name: &str, s: &IrSummary| {
        let m = &s.mean;
        let _ = writeln!(
            out,
            "| {name} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            s.cases,
            m.recall_at_3,
            m.recall_at_6,
            m.recall_at_15,
            m.mrr,
            m.ndcg_at_3,
            m.ndcg_at_6,
            m.ndcg_at_15
        );
    };
    row(out, "**All**", run);
    for (topic, s) in &sem.topic_ir {
        row(out, &cell(topic), s);
    }
    out.push('\n');
}

/// Renders the Markdown report of a run.
pub fn render(log: &RunLog) -> String {
    let s = &log.summary;
    let mut out = String::new();
    let health = if s.health_status == Health::Critical {
        format!("🚨 **{}**", s.health_status)
    } else {
        format!("**{}**", s.health_status)
    };
    let _ = writeln!(out, "# Test Harness Results\n");
    let _ = writeln!(out, "**Health Status:** {health}  ");
    let _ = writeln!(out, "**Combined Score:** {:.1}  ", s.combined_score);
    let _ = writeln!(out, "**Date:** {}  ", log.timestamp);
    let _ = writeln!(out, "**Project:** `{}`  ", log.project);
    let banks: Vec<&str> = log.filters.banks.iter().map(|b| b.key()).collect();
    let _ = writeln!(out, "**Banks:** {}  ", banks.join(", "));
    if let Some(t) = &log.filters.test {
        let _ = writeln!(out, "**Case:** `{t}`  ");
    }
    if !log.filters.tests.is_empty() {
        let _ = writeln!(
            out,
            "**Cases:** {} selected by id  ",
            log.filters.tests.len()
        );
    }
    if let Some(t) = &log.filters.topic {
        let _ = writeln!(out, "**Topic:** `{t}`  ");
    }
    if let Some(c) = &log.filters.changed_since {
        let _ = writeln!(
            out,
            "**Changed since:** `{}` (run `{}`): {} — a partial run  ",
            cell(&c.reference),
            cell(&c.run_id),
            cell(&crate::common::changed_line(c))
        );
    }
    if let Some(n) = log.filters.drafts {
        let _ = writeln!(
            out,
            "**Drafts:** {n} pending draft(s) from `test_banks/drafts/` included  "
        );
    }
    let _ = writeln!(
        out,
        "**Run:** `{}` (assay {})\n",
        log.run_id, log.assay_version
    );
    if let Some(diff) = &log.baseline {
        let label = diff
            .label
            .clone()
            .unwrap_or_else(|| format!("run `{}`", diff.before.run_id));
        out.push_str(&crate::rundiff::markdown(diff, &label));
    }

    if !s.critical_failures.is_empty() {
        let _ = writeln!(out, "## 🚨 Critical Failures\n");
        let answers = select::answer_critical(log);
        let what = if answers.is_empty() {
            "crisis detection is wrong"
        } else {
            "a critical case failed"
        };
        let _ = writeln!(
            out,
            "**{} critical failure(s): {what}. Fix these before anything else.**\n",
            s.critical_failures.len()
        );
        for r in answers {
            let _ = writeln!(
                out,
                "- **{}** (answer): \"{}\" — {}",
                r.test_id,
                quote(&r.message, 120),
                cell(&r.failures.join("; "))
            );
        }
        {
            for r in select::critical(log) {
                let what = select::critical_what(r, list);
                let _ = writeln!(
                    out,
                    "- **{}** ({}): \"{}\" — {what}",
                    r.test_id,
                    r.pattern_type,
                    quote(&r.prompt, 120)
                );
                for m in &r.crisis_matches {
                    let _ = writeln!(
                        out,
                        "  - rule `{}` matched \"{}\"",
                        cell(&m.pattern),
                        cell(&m.matched_text)
                    );
                }
            }
        }
        out.push('\n');
    }

    if s.error_count > 0 {
        let _ = writeln!(out, "## ⚠️ Errors\n");
        let _ = writeln!(
            out,
            "{} case(s) could not be scored because of infrastructure errors; they are left out of every average.\n",
            s.error_count
        );
        let listed = select::errored(log);
        for e in &listed {
            // Semantic errors read as they always have; other banks are named.
            let bank = match e.bank {
                BankType::Semantic => String::new(),
                b => format!(" ({})", b.key()),
            };
            let _ = writeln!(out, "- **{}**{bank}: {}", e.test_id, cell(e.error));
        }
        if listed.len() < s.error_count {
            let _ = writeln!(
                out,
                "- … and {} more, in the run log{}",
                s.error_count - listed.len(),
                cell(&select::run_log_name(log))
            );
        }
        out.push('\n');
    }

    let verdicts = log.verdicts();
    let _ = writeln!(
        out,
        "## Summary\n\n**Verdicts:** {} passed, {} failed, {} errors\n\n| Component | Score | Tests | Passed | Failed | Errors | Hard Fails | Weight |\n|---|---|---|---|---|---|---|---|",
        verdicts.all.passed, verdicts.all.failed, verdicts.all.errors
    );
    for (bank, name, counts) in select::bank_rows(log) {
        let score = s.component_scores.get(bank.key()).copied().flatten();
        let weight = s
            .weights
            .get(bank.key())
            .map_or_else(|| "—".to_owned(), |w| format!("{:.1}%", w * 100.0));
        let v = verdicts.of_bank(bank);
        match counts {
            Some((tests, hard)) => {
                let _ = writeln!(
                    out,
                    "| {name} | {} | {tests} | {} | {} | {} | {hard} | {weight} |",
                    fmt_score(score),
                    v.passed,
                    v.failed,
                    v.errors
                );
            }
            None => {
                let _ = writeln!(out, "| {name} | not run | — | — | — | — | — | — |");
            }
        }
    }
    let _ = writeln!(
        out,
        "| **Combined** | **{:.1}** | **{}** | **{}** | **{}** | **{}** | **{}** | |\n",
        s.combined_score,
        s.total_tests,
        verdicts.all.passed,
        verdicts.all.failed,
        verdicts.all.errors,
        s.hard_fail_count
    );
    failed_by_rule(&mut out, &verdicts);

    if let Some(sem) = &log.semantic {
        let _ = writeln!(
            out,
            "## Score Distribution (Semantic)\n\n| Range | Count |\n|---|---|"
        );
        for (range, count) in sem.score_distribution.in_order() {
            let _ = writeln!(out, "| {range} | {count} |");
        }
        out.push('\n');
        group_table(
            &mut out,
            "Topic Scores (Semantic)",
            "Topic",
            &sem.topic_scores,
        );
        ir_table(&mut out, sem);
    }
    if let Some(src) = &s.expectation_sources {
        let _ = writeln!(
            out,
            "## Expectation Sources\n\n| Source | Tests |\n|---|---|\n| original | {} |\n| opus | {} |\n| human_override | {} |\n",
            src.original, src.opus, src.human_override
        );
    }
    if let Some(st) = &log.state {
        group_table(
            &mut out,
            "Handler Scores (State)",
            "Handler",
            &st.handler_scores,
        );
    }
    if let Some(p) = &log.pattern {
        group_table(
            &mut out,
            "Pattern Type Scores",
            "Pattern Type",
            &p.pattern_type_scores,
        );
    }

    if let Some(a) = &log.answer {
        let _ = writeln!(out, "## Answer Metrics\n");
        for line in crate::answer::metric_lines(a) {
            let _ = writeln!(out, "- {}", cell(&line));
        }
        out.push('\n');
        group_table(&mut out, "Topic Scores (Answer)", "Topic", &a.topic_scores);
    }

    failures(&mut out, log);
    answer_cases(&mut out, log);
    stale(&mut out, log);
    out.push_str(&crate::limits::markdown(&log.rate_limits));

    if !log.warnings.is_empty() {
        let _ = writeln!(out, "## Warnings\n");
        for w in &log.warnings {
            let _ = writeln!(out, "- {}", cell(w));
        }
        out.push('\n');
    }
    out
}

/// The failed cases grouped by the rule that failed them.
fn failed_by_rule(out: &mut String, verdicts: &assay_core::aggregate::VerdictTally) {
    if verdicts.rules.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Failed Cases by Rule\n\n| Rule | Cases | First cases | Most often |\n|---|---|---|---|"
    );
    for r in &verdicts.rules {
        let (ids, named) = crate::verdict::rule_cells(r, |i| format!("`{}`", cell(i)), cell);
        let _ = writeln!(
            out,
            "| {} | {} | {ids} | {named} |",
            r.rule.label(),
            r.cases
        );
    }
    out.push('\n');
}

/// The "Stale cases" section: each case whose entities were edited since its reference point.
fn stale(out: &mut String, log: &RunLog) {
    if log.stale.is_empty() {
        return;
    }
    let total = log.stale.len() + log.stale_more;
    let _ = writeln!(out, "## Stale cases\n");
    let _ = writeln!(
        out,
        "{total} case(s) name an entity edited since the version the case records (provenance) or since the accepted run: check that their expectations still hold.\n"
    );
    let _ = writeln!(
        out,
        "| Case | Bank | Entity | Versions | Changed fields (old → new) | Compared with |\n|---|---|---|---|---|---|"
    );
    for c in log.stale.iter().take(STALE_SHOWN) {
        for e in &c.entities {
            let _ = writeln!(
                out,
                "| `{}` | {} | `{}` | {} | {} | {} |",
                cell(&c.test_id),
                c.bank.key(),
                cell(&e.entity_id),
                stale_versions(e),
                cell(&stale_fields(e)),
                e.reference.as_str()
            );
        }
    }
    if total > STALE_SHOWN.min(log.stale.len()) {
        let _ = writeln!(
            out,
            "\n… and {} more stale case(s) (the RunLog's `stale` lists up to {})",
            total - STALE_SHOWN.min(log.stale.len()),
            assay_core::runlog::STALE_LISTED
        );
    }
    out.push('\n');
}

/// "Answer Cases: Failed or Below 100", then the answer cases that errored, apart: an error is not a
/// failure.
fn answer_cases(out: &mut String, log: &RunLog) {
    let failed = select::answer_failures(log);
    if !failed.is_empty() {
        let _ = writeln!(out, "## Answer Cases: Failed or Below 100\n");
        partial_note(out, log, BankType::Answer, failed.len());
        for r in failed {
            out.push_str(&crate::answer::markdown_case(r));
        }
    }
    let errored = select::answer_errors(log);
    if !errored.is_empty() {
        let _ = writeln!(out, "## Answer Test Errors\n");
        let _ = writeln!(
            out,
            "Not scored, and left out of every average: what each case got before the error.\n"
        );
        for r in errored {
            out.push_str(&crate::answer::markdown_case(r));
        }
    }
}

fn failure_entry(
    out: &mut String,
    (id, name): (&str, &str),
    (score, verdict): (u32, &Verdict),
    details: &[String],
    breakdown: &Breakdown,
) {
    let title = if name.is_empty() {
        String::new()
    } else {
        format!(": {}", cell(name))
    };
    let _ = writeln!(
        out,
        "### {id}{title} — {score} ({}) · {}\n",
        interpret(score),
        crate::verdict::markdown_badge(verdict)
    );
    let _ = writeln!(out, "- {}", cell(&crate::verdict::markdown_line(verdict)));
    for d in details {
        let _ = writeln!(out, "- {d}");
    }
    for line in breakdown_lines(breakdown) {
        let _ = writeln!(out, "- {line}");
    }
    out.push('\n');
}

fn partial_note(out: &mut String, log: &RunLog, bank: BankType, shown: usize) {
    if let Some(note) = select::partial_note(log, bank, shown) {
        let _ = writeln!(out, "{}\n", cell(&note));
    }
}

fn failures(out: &mut String, log: &RunLog) {
    {
        let failed = select::semantic_failures(log);
        if !failed.is_empty() {
            let _ = writeln!(out, "## Semantic Cases: Failed or Below 100\n");
            partial_note(out, log, BankType::Semantic, failed.len());
            for r in failed {
                let lost: Vec<String> = r
                    .lost
                    .iter()
                    .map(assay_core::runlog::LostEntity::describe)
                    .collect();
                let details = vec![
                    format!("**Prompt:** \"{}\"", quote(&r.prompt, 200)),
                    format!(
                        "**Expected primary:** {}",
                        list(&r.expectations.expected_primary)
                    ),
                    format!("**Selected:** {}", list(&r.selections)),
                    format!(
                        "**Lost:** {}",
                        if lost.is_empty() {
                            "—".to_owned()
                        } else {
                            lost.join("; ")
                        }
                    ),
                    format!("**Expectation source:** {}", r.expectation_source),
                ];
                failure_entry(
                    out,
                    (&r.test_id, &r.name),
                    (r.score.unwrap_or(0), &r.verdict()),
                    &details,
                    &r.breakdown,
                );
            }
        }
    }
    {
        let failed = select::state_failures(log);
        if !failed.is_empty() {
            let _ = writeln!(out, "## State Cases: Failed or Below 100\n");
            partial_note(out, log, BankType::State, failed.len());
            for r in failed {
                let state = serde_json::to_string(&r.user_state).unwrap_or_default();
                let details = vec![
                    format!("**User state:** `{}`", cell(&state)),
                    format!("**Expected:** {}", list(&r.expected_handlers)),
                    format!("**Triggered:** {}", list(&r.triggered_handlers)),
                ];
                failure_entry(
                    out,
                    (&r.test_id, &r.name),
                    (r.score, &r.verdict()),
                    &details,
                    &r.breakdown,
                );
            }
        }
    }
    {
        let failed = select::pattern_failures(log);
        if !failed.is_empty() {
            let _ = writeln!(out, "## Pattern Cases: Failed or Below 100\n");
            partial_note(out, log, BankType::Pattern, failed.len());
            for r in failed {
                let critical = if r.is_critical_failure {
                    " 🚨 critical failure"
                } else {
                    ""
                };
                let details = vec![
                    format!("**Prompt:** \"{}\"{critical}", quote(&r.prompt, 200)),
                    format!("**Type:** {}", r.pattern_type),
                    format!("**Expected:** {}", list(&r.expected_matches)),
                    format!("**Matched:** {}", list(&r.matched_entities)),
                ];
                failure_entry(
                    out,
                    (&r.test_id, &r.name),
                    (r.score, &r.verdict()),
                    &details,
                    &r.breakdown,
                );
            }
        }
    }
    {
        let failed = select::always_failures(log);
        if !failed.is_empty() {
            let _ = writeln!(out, "## Always Cases: Failed or Below 100\n");
            partial_note(out, log, BankType::Always, failed.len());
            for r in failed {
                let details = vec![
                    format!("**User type:** `{}`", cell(&r.user_type)),
                    format!("**Missing:** {}", list(&r.missing)),
                    format!("**Loaded:** {}", list(&r.loaded_entities)),
                ];
                failure_entry(
                    out,
                    (&r.test_id, &r.name),
                    (r.score, &r.verdict()),
                    &details,
                    &r.breakdown,
                );
            }
        }
    }
}
