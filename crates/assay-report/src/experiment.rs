//! Renderers of a prompt-optimization experiment ([`ExperimentReport`]): the console summary
//! (counts, not one line per trial), the estimate before any call, the Markdown report
//! (baseline vs optimized on both sets with the cases that changed and the significance, the
//! Pareto front, the best trial's prompts and where each came from, the proposals and their
//! held-out verdict, calls, tokens, cost and cache hits), and the HTML
//! ([`body`], shared by the web UI's experiment page and the self-contained `report.html`;
//! [`trial_body`], a trial's page). Pure: the report in, text out.

use std::fmt::Write as _;

use assay_core::experiment::{
    Comparison, Estimate, ExperimentReport, Metrics, ProposalStatus, RoleEstimate, TrialOutcome,
    UsageTotals,
};

mod page;

pub use page::{Links, NoLinks, Page, Sort, body, diff_html, html, progress_html, trial_body};

/// The estimate printed before any call: runs, calls, tokens and the cost per role.
pub fn estimate_text(e: &Estimate) -> String {
    let role = |r: &RoleEstimate| {
        format!(
            "{} calls, ≤ {} input / ≤ {} output tokens, {}",
            r.calls,
            r.input_tokens,
            r.output_tokens,
            r.cost_usd.map_or_else(
                || "cost unknown (model not priced)".to_owned(),
                |c| format!("≤ ${c:.4}")
            )
        )
    };
    let target = if e.target.calls == 0 && e.target_runs > 0 {
        "runs of your command or endpoint; the model calls it makes itself are not seen or priced by assay".to_owned()
    } else {
        role(&e.target)
    };
    let mut out = format!(
        "estimate before any call: {} target runs\n  target: {target}\n  grader: {}",
        e.target_runs,
        role(&e.grader)
    );
    if !e.proposer.is_zero() {
        out.push_str(&format!("\n  proposer: {}", role(&e.proposer)));
    }
    out
}

/// What became of a proposal, in words: `accepted as #3, trial 27`, `rejected: …`,
/// `not better: …`.
pub fn proposal_outcome(status: &ProposalStatus) -> String {
    match status {
        ProposalStatus::Accepted { index, trial } => format!("accepted as #{index}, trial {trial}"),
        ProposalStatus::Rejected { reason } => format!("rejected: {reason}"),
        ProposalStatus::NotBetter { reason } => format!("not better: {reason}"),
    }
}

/// A proposal's row in the reports' proposal table: proposal, agent, parent, cases shown,
/// outcome, file (unescaped).
pub fn proposal_cells(p: &assay_core::experiment::ProposalRecord) -> [String; 6] {
    [
        format!("r{}-{}", p.round, p.k),
        p.agent.clone(),
        format!("trial {} #{}", p.parent_trial, p.parent_index),
        format!(
            "lines {}",
            p.cases_shown
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        proposal_outcome(&p.status),
        p.file.clone().unwrap_or_else(|| "-".to_owned()),
    ]
}

/// Where an agent's prompt `index` came from: `baseline`, a variant's file name, or
/// `proposal r1-2`.
pub fn prompt_source(report: &ExperimentReport, agent: &str, index: usize) -> String {
    if index == 0 {
        return "baseline".to_owned();
    }
    if let Some(p) = report.proposals.iter().find(|p| {
        p.agent == agent
            && matches!(p.status, ProposalStatus::Accepted { index: i, .. } if i == index)
    }) {
        return format!("proposal r{}-{}", p.round, p.k);
    }
    report
        .prompt_files
        .get(agent)
        .and_then(|files| files.get(index))
        .map_or_else(
            || format!("variant {index}"),
            |f| f.rsplit('/').next().unwrap_or(f).to_owned(),
        )
}

/// The proposals in one line each, for the console and Markdown: accepted first.
fn proposal_lines(report: &ExperimentReport) -> Vec<String> {
    let mut lines = Vec::new();
    for p in &report.proposals {
        let what = proposal_outcome(&p.status);
        lines.push(format!(
            "r{}-{} {} (from trial {}'s #{}, {} cases shown): {what}",
            p.round,
            p.k,
            p.agent,
            p.parent_trial,
            p.parent_index,
            p.cases_shown.len()
        ));
    }
    lines
}

fn metrics(m: &Metrics) -> String {
    format!(
        "{}/{} correct ({:.0}%), composite {:.3}",
        m.factually_correct_count,
        m.cases,
        m.factual_correctness_percentage,
        m.average_composite_score
    )
}

fn usage(u: &UsageTotals) -> String {
    let cost = u
        .cost_usd
        .map_or_else(|| "cost unknown".to_owned(), |c| format!("${c:.4}"));
    format!(
        "{} calls ({} from cache), {} requests, {} in / {} out tokens, {cost}",
        u.calls, u.cache_hits, u.requests, u.input_tokens, u.output_tokens
    )
}

/// The trials in words: `30 trials`, `12 of 30 requested trials` (a study still running or
/// stopped), `33 trials (30 requested + 3 from proposals)`.
pub fn trials_count(report: &ExperimentReport) -> String {
    let (done, asked) = (report.trials.len(), report.trials_requested);
    match done.cmp(&asked) {
        std::cmp::Ordering::Equal => format!("{done} trials"),
        std::cmp::Ordering::Less => format!("{done} of {asked} requested trials"),
        std::cmp::Ordering::Greater => format!(
            "{done} trials ({asked} requested + {} from proposals)",
            done - asked
        ),
    }
}

/// Whether a verdict is correct, in a word.
/// The trials each worker of a shared study ran, by worker (none for a local study).
pub fn workers(report: &ExperimentReport) -> std::collections::BTreeMap<String, Vec<usize>> {
    let mut by = std::collections::BTreeMap::<String, Vec<usize>>::new();
    for t in &report.trials {
        if let Some(w) = &t.worker {
            by.entry(w.clone()).or_default().push(t.number);
        }
    }
    by
}

fn yes_no(b: bool) -> &'static str {
    if b { "correct" } else { "wrong" }
}

/// The rows of the disagreement table: step, line, answer, expected, rule's verdict (with why),
/// grader's verdict (unescaped).
pub fn disagreement_cells(d: &assay_core::experiment::Disagreement) -> [String; 6] {
    let cut = |t: &str, n: usize| {
        let t = t.trim();
        if t.chars().count() > n {
            format!("{}…", t.chars().take(n).collect::<String>())
        } else {
            t.to_owned()
        }
    };
    [
        if d.repeats == 0 {
            d.step.clone()
        } else {
            format!("{} (and {} more)", d.step, d.repeats)
        },
        d.line.to_string(),
        cut(&d.output, 60),
        cut(&d.expected, 40),
        format!("{} by {} ({})", yes_no(d.check), d.rule, d.why),
        format!("{}: {}", yes_no(d.grader), cut(&d.reasoning, 80)),
    ]
}

fn outcomes(report: &ExperimentReport) -> (usize, usize, usize, usize) {
    let count = |o: TrialOutcome| report.trials.iter().filter(|t| t.outcome == o).count();
    (
        count(TrialOutcome::Complete),
        count(TrialOutcome::Duplicate),
        count(TrialOutcome::Pruned),
        count(TrialOutcome::Failed),
    )
}

/// The console summary; `report_path` is where the Markdown report was written.
pub fn console(report: &ExperimentReport, report_path: Option<&str>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Experiment {} ({})", report.name, report.target);
    let _ = writeln!(
        s,
        "  step 1 baseline:     {}",
        metrics(&report.baseline.metrics)
    );
    let (complete, dup, pruned, failed) = outcomes(report);
    let _ = writeln!(
        s,
        "  step 2 optimization: {}: {complete} evaluated, {dup} duplicates reused, {pruned} pruned, {failed} failed; {}",
        trials_count(report),
        report.search_mode
    );
    if let Some(best) = report.best_trial {
        let _ = writeln!(
            s,
            "                       best trial {best}, Pareto front {:?}",
            report.pareto_front
        );
    }
    if let Some(tie) = &report.tie {
        let _ = writeln!(s, "                       {tie}");
    }
    let workers = workers(report);
    if !workers.is_empty() {
        let per: Vec<String> = workers
            .iter()
            .map(|(w, n)| format!("{w} {}", n.len()))
            .collect();
        let retried = report
            .trials
            .iter()
            .filter(|t| !t.retried.is_empty())
            .count();
        let _ = writeln!(
            s,
            "                       trials per worker: {}{}",
            per.join(", "),
            if retried > 0 {
                format!("; {retried} retried after a worker stopped")
            } else {
                String::new()
            }
        );
    }
    if let Some(e) = &report.evaluation {
        let _ = writeln!(s, "  step 3 evaluation:   {}", metrics(&e.metrics));
    }
    for c in &report.comparisons {
        let _ = writeln!(
            s,
            "  {:<12} baseline {} → optimized {}\n               {}",
            c.set,
            metrics(&c.baseline),
            metrics(&c.optimized),
            c.significance.verdict
        );
    }
    if !report.proposals.is_empty() {
        let accepted = report
            .proposals
            .iter()
            .filter(|p| matches!(p.status, ProposalStatus::Accepted { .. }))
            .count();
        let _ = writeln!(
            s,
            "  proposals: {} made, {accepted} joined the study",
            report.proposals.len()
        );
        for line in proposal_lines(report).iter().take(5) {
            let _ = writeln!(s, "    {line}");
        }
        if report.proposals.len() > 5 {
            let _ = writeln!(s, "    … {} more in the report", report.proposals.len() - 5);
        }
    }
    if let Some(h) = &report.hand_written {
        let _ = writeln!(s, "  proposals vs hand-written: {}", h.summary);
    }
    if !report.disagreements.is_empty() {
        let rule = report.correctness.as_deref().unwrap_or("seed");
        let _ = writeln!(
            s,
            "  correctness ({rule}) and the grader disagree on {} case{}, e.g. {} line {}: {} ({}), the grader says {}; all in the report",
            report.disagreements.len(),
            if report.disagreements.len() == 1 {
                ""
            } else {
                "s"
            },
            report.disagreements[0].step,
            report.disagreements[0].line,
            yes_no(report.disagreements[0].check),
            report.disagreements[0].why,
            yes_no(report.disagreements[0].grader)
        );
    }
    if report
        .best_params
        .iter()
        .any(|(a, &i)| prompt_source(report, a, i).starts_with("proposal"))
    {
        let from: Vec<String> = report
            .best_params
            .iter()
            .map(|(a, &i)| format!("{a}: {}", prompt_source(report, a, i)))
            .collect();
        let _ = writeln!(s, "  best prompts from: {}", from.join(", "));
    }
    let _ = writeln!(s, "  target: {}", usage(&report.usage.target));
    let _ = writeln!(s, "  grader: {}", usage(&report.usage.grader));
    if !report.usage.proposer.is_zero() {
        let _ = writeln!(s, "  proposer: {}", usage(&report.usage.proposer));
    }
    if let Some(p) = report_path {
        let _ = writeln!(s, "Report: {p}");
    }
    s
}

fn comparison(s: &mut String, c: &Comparison) {
    let sig = &c.significance;
    let _ = writeln!(s, "### {} set\n", c.set);
    let _ = writeln!(s, "| | baseline | optimized |\n|---|---|---|");
    let _ = writeln!(
        s,
        "| FactuallyCorrectCount | {} | {} |\n| FactualCorrectnessPercentage | {:.1}% | {:.1}% |\n| AverageCompositeScore | {:.3} | {:.3} |\n| errors | {} | {} |\n",
        c.baseline.factually_correct_count,
        c.optimized.factually_correct_count,
        c.baseline.factual_correctness_percentage,
        c.optimized.factual_correctness_percentage,
        c.baseline.average_composite_score,
        c.optimized.average_composite_score,
        c.baseline.errors,
        c.optimized.errors
    );
    let _ = writeln!(s, "**{}**\n", sig.verdict);
    let _ = writeln!(
        s,
        "- McNemar ({:?}): {} correct only with the baseline, {} only with the optimized prompts, p = {:.4}",
        sig.mcnemar.method,
        sig.mcnemar.baseline_only,
        sig.mcnemar.optimized_only,
        sig.mcnemar.p_value
    );
    if let Some(b) = sig.bootstrap {
        let _ = writeln!(
            s,
            "- Paired bootstrap on the composite score ({} resamples, seed {}): mean difference {:+.3}, 95% interval [{:+.3}, {:+.3}], p = {:.4}",
            b.resamples, b.seed, b.mean_difference, b.ci_low, b.ci_high, b.p_value
        );
    }
    match (sig.min_detectable_correct, sig.min_detectable_correct_pct) {
        (Some(k), Some(p)) => {
            let _ = writeln!(
                s,
                "- Smallest detectable correctness gain on {} pairs: {k} answers ({p:.0} points) at α = {}",
                sig.pairs, sig.alpha
            );
        }
        _ => {
            let _ = writeln!(
                s,
                "- {} pairs are too few for any correctness gain to be significant at α = {}",
                sig.pairs, sig.alpha
            );
        }
    }
    if let Some(m) = sig.min_detectable_composite {
        let _ = writeln!(
            s,
            "- Smallest composite difference detectable with 80% power: {m:.3}"
        );
    }
    if c.changes.is_empty() {
        let _ = writeln!(s, "\nNo case changed.\n");
    } else {
        let _ = writeln!(
            s,
            "\n| line | question | correct (baseline → optimized) | composite |\n|---|---|---|---|"
        );
        let mark = |b: bool| if b { "yes" } else { "no" };
        for ch in &c.changes {
            let q: String = ch.question.chars().take(70).collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} → {} | {:.2} → {:.2} |",
                ch.line,
                q.replace('|', "\\|"),
                mark(ch.baseline_correct),
                mark(ch.optimized_correct),
                ch.baseline_score,
                ch.optimized_score
            );
        }
        s.push('\n');
    }
}

/// The cases' assertions (`assert`) that did not pass, a line each, for the baseline, the best
/// trial and the evaluation steps; nothing when every assertion passed or no case has any.
fn assertion_lines(s: &mut String, report: &ExperimentReport) {
    use assay_core::assertion::Status;
    let best = report
        .best_trial
        .and_then(|n| report.trials.iter().find(|t| t.number == n));
    let mut steps: Vec<(String, &[assay_core::experiment::CaseResult])> =
        vec![(report.baseline.step.clone(), &report.baseline.cases)];
    if let Some(t) = best {
        steps.push((format!("best trial {}", t.number), &t.cases));
    }
    for e in [&report.evaluation_baseline, &report.evaluation]
        .into_iter()
        .flatten()
    {
        steps.push((e.step.clone(), &e.cases));
    }
    let mut lines = Vec::new();
    for (step, cases) in &steps {
        for c in *cases {
            let Some(a) = &c.assertions else { continue };
            for r in a.not_passed() {
                lines.push(format!(
                    "- {step}, line {}: assert[{}] `{}`{} {}: {}",
                    c.line,
                    r.index,
                    r.kind,
                    if r.critical { " (critical)" } else { "" },
                    if r.status == Status::Error {
                        "could not be checked"
                    } else {
                        "failed"
                    },
                    r.reason.replace('\n', " ")
                ));
            }
        }
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Assertions that did not pass\n");
    let _ = writeln!(
        s,
        "A failed critical assertion makes its case incorrect whatever the rule and the grader say; an assertion that could not be checked (a latency or cost not measured) is neither a pass nor a fail.\n"
    );
    for l in lines {
        let _ = writeln!(s, "{l}");
    }
    s.push('\n');
}

/// The Markdown report.
pub fn markdown(report: &ExperimentReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Prompt optimization: {}\n", report.name);
    let _ = writeln!(
        s,
        "- Started {}, finished {}\n- Target: {}\n- Grader: {} (llm-rubric threshold {}{})\n- Correct answers counted by: {}\n- Objectives: {}\n- Trials: {}, {}; seed {}\n- Agents: {}",
        report.started,
        report.finished,
        report.target,
        report.grader,
        report.threshold,
        report
            .grader_version
            .as_deref()
            .map_or_else(String::new, |v| format!(", grader version {v}")),
        report
            .correctness
            .as_deref()
            .unwrap_or("seed (either text contains the other)"),
        report.directions.join(", "),
        trials_count(report),
        report.search_mode,
        report.seed,
        report
            .agents
            .iter()
            .map(|(a, n)| format!("{a} ({n} prompt{})", if *n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let data = |d: &assay_core::experiment::DataRef| {
        format!(
            "{} ({} cases, version {})",
            d.path,
            d.cases,
            d.version.as_deref().unwrap_or("-")
        )
    };
    let _ = writeln!(s, "- Optimization cases: {}", data(&report.baseline.data));
    if let Some(e) = &report.evaluation {
        let _ = writeln!(s, "- Evaluation cases: {}", data(&e.data));
    }
    let _ = writeln!(s, "\n## Baseline vs optimized\n");
    for c in &report.comparisons {
        comparison(&mut s, c);
    }
    let _ = writeln!(s, "## Study\n");
    let (complete, dup, pruned, failed) = outcomes(report);
    let _ = writeln!(
        s,
        "{} trials: {complete} evaluated, {dup} duplicates (values reused, not re-evaluated), {pruned} pruned by racing, {failed} failed.\n",
        report.trials.len()
    );
    if let Some(tie) = &report.tie {
        let _ = writeln!(s, "Best trial: {tie}.\n");
    }
    let workers = workers(report);
    if !workers.is_empty() {
        let _ = writeln!(
            s,
            "### Workers\n\nThe study was shared by {} workers (`[optimize] storage`).\n\n| worker | trials | trial numbers |\n|---|---:|---|",
            workers.len()
        );
        for (worker, numbers) in &workers {
            let list: Vec<String> = numbers.iter().map(ToString::to_string).collect();
            let _ = writeln!(s, "| {worker} | {} | {} |", numbers.len(), list.join(", "));
        }
        let retried: Vec<String> = report
            .trials
            .iter()
            .filter(|t| !t.retried.is_empty())
            .map(|t| format!("trial {}: {}", t.number, t.retried.join("; ")))
            .collect();
        if !retried.is_empty() {
            let _ = writeln!(s, "\nRetried after a worker stopped:\n");
            for line in retried {
                let _ = writeln!(s, "- {line}");
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "### Pareto front\n");
    let _ = writeln!(s, "| trial | values | prompt indices |\n|---|---|---|");
    for n in &report.pareto_front {
        if let Some(t) = report.trials.iter().find(|t| t.number == *n) {
            let _ = writeln!(
                s,
                "| {}{} | {} | {} |",
                t.number,
                if Some(t.number) == report.best_trial {
                    " (best)"
                } else {
                    ""
                },
                t.values
                    .iter()
                    .map(|v| format!("{v:.3}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                t.params
                    .iter()
                    .map(|(a, i)| format!("{a}={i}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }
    let _ = writeln!(s, "\n### Best trial's prompts\n");
    for (agent, text) in &report.best_prompts {
        let index = report.best_params.get(agent).copied().unwrap_or(0);
        let _ = writeln!(
            s,
            "#### {agent} (index {index}, {})\n\n```text\n{}\n```\n",
            prompt_source(report, agent, index),
            text.trim_end()
        );
    }
    if !report.proposals.is_empty() || report.hand_written.is_some() {
        let _ = writeln!(s, "## Proposals\n");
        if let Some(h) = &report.hand_written {
            let _ = writeln!(
                s,
                "Against the best hand-written combination (trial {}): **{}**\n",
                h.trial, h.summary
            );
            if let Some(c) = &h.comparison {
                comparison(&mut s, c);
            }
        }
        let _ = writeln!(
            s,
            "| proposal | agent | parent | cases shown | outcome | file |\n|---|---|---|---|---|---|"
        );
        for p in &report.proposals {
            let cells = proposal_cells(p).map(|c| c.replace('|', "\\|"));
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        }
        if report.proposals.iter().any(|p| p.chosen.is_some()) {
            let _ = writeln!(s, "\nWhy each agent was chosen:\n");
            for p in &report.proposals {
                if let Some(c) = &p.chosen {
                    let _ = writeln!(s, "- r{}-{} {}: {}", p.round, p.k, p.agent, c.why.trim());
                }
            }
        }
        for p in report
            .proposals
            .iter()
            .filter(|p| matches!(p.status, ProposalStatus::Accepted { .. }))
        {
            let _ = writeln!(
                s,
                "\n#### r{}-{} for {} ({})\n\nThe proposer's reasoning: {}\n",
                p.round,
                p.k,
                p.agent,
                p.model,
                p.reasoning.trim()
            );
        }
        s.push('\n');
    }
    if !report.disagreements.is_empty() {
        let _ = writeln!(s, "## Where the correctness rule and the grader disagree\n");
        let _ = writeln!(
            s,
            "The first objective counts an answer correct by the rule ({}); the grader's own call sits beside it. Read these cases to decide which to trust.\n",
            report.correctness.as_deref().unwrap_or("seed")
        );
        let _ = writeln!(
            s,
            "| step | line | answer | expected | rule | grader |\n|---|---|---|---|---|---|"
        );
        for d in &report.disagreements {
            let cells = disagreement_cells(d).map(|c| c.replace('|', "\\|").replace('\n', " "));
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        }
        s.push('\n');
    }
    assertion_lines(&mut s, report);
    let _ = writeln!(s, "## Calls\n");
    let _ = writeln!(
        s,
        "| role | calls | cache hits | requests | input tokens | output tokens | cost |\n|---|---|---|---|---|---|---|"
    );
    for (role, u) in [
        ("target", &report.usage.target),
        ("grader", &report.usage.grader),
        ("proposer", &report.usage.proposer),
    ] {
        if role == "proposer" && u.is_zero() {
            continue;
        }
        let _ = writeln!(
            s,
            "| {role} | {} | {} | {} | {} | {} | {} |",
            u.calls,
            u.cache_hits,
            u.requests,
            u.input_tokens,
            u.output_tokens,
            u.cost_usd
                .map_or_else(|| "unknown".to_owned(), |c| format!("${c:.4}"))
        );
    }
    if let Some(e) = &report.estimate {
        let _ = writeln!(
            s,
            "\nEstimated before the run: {} target runs, {} target calls, {} grader calls, {}.",
            e.target_runs,
            e.target.calls,
            e.grader.calls,
            e.cost_usd()
                .map_or_else(|| "cost unknown".to_owned(), |c| format!("${c:.4}"))
        );
    }
    let limits = crate::limits::markdown(&report.usage.rate_limits);
    if !limits.is_empty() {
        s.push('\n');
        s.push_str(&limits);
    }
    s
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use assay_core::experiment::{
        Bootstrap, CaseChange, CaseResult, DataRef, EXPERIMENT_SCHEMA_VERSION, McNemar,
        McNemarMethod, Significance, StepResult, TrialRecord, Usage,
    };

    use super::*;

    fn case(line: usize, correct: bool) -> CaseResult {
        CaseResult {
            line,
            question: format!("Question {line}?"),
            expected: "a".into(),
            output: Some("a".into()),
            factually_correct: correct,
            correctness: None,
            correct_why: None,
            composite_score: if correct { 1.0 } else { 0.2 },
            rubric_pass: correct,
            rubric: None,
            error: None,
            assertions: None,
        }
    }

    fn step(kind: &str, correct: usize) -> StepResult {
        let cases: Vec<CaseResult> = (1..=3).map(|l| case(l, l <= correct)).collect();
        StepResult {
            step: kind.into(),
            data: DataRef {
                kind: kind.into(),
                version: Some("v1.0.0".into()),
                path: format!("test_data/{kind}/v1.0.0/test_cases.jsonl"),
                fingerprint: "f".into(),
                cases: 3,
            },
            params: BTreeMap::new(),
            prompt_sha256: BTreeMap::new(),
            metrics: Metrics::of(&cases),
            cases,
            duration_s: 1.0,
        }
    }

    fn fixture() -> ExperimentReport {
        let trial =
            |number: usize, i: usize, outcome: TrialOutcome, values: Vec<f64>| TrialRecord {
                number,
                params: BTreeMap::from([("finalizer".into(), i), ("planner".into(), i)]),
                outcome,
                values,
                duplicate_of: (outcome == TrialOutcome::Duplicate).then_some(1),
                metrics: None,
                cases: Vec::new(),
                note: None,
                origin: "tpe".into(),
                duration_s: 1.0,
                worker: None,
                retried: Vec::new(),
            };
        let sig = Significance {
            pairs: 3,
            mcnemar: McNemar {
                baseline_only: 0,
                optimized_only: 2,
                p_value: 0.5,
                method: McNemarMethod::Exact,
            },
            bootstrap: Some(Bootstrap {
                mean_difference: 0.533,
                ci_low: 0.0,
                ci_high: 0.8,
                p_value: 0.25,
                resamples: 10_000,
                seed: 42,
            }),
            alpha: 0.05,
            min_detectable_correct: None,
            min_detectable_correct_pct: None,
            min_detectable_composite: Some(0.9),
            correct_gain_significant: false,
            composite_gain_significant: false,
            verdict: "No significant gain (+2 −0 correct, McNemar p = 0.500); 3 cases are too few for any correctness gain to be significant.".into(),
        };
        ExperimentReport {
            schema_version: EXPERIMENT_SCHEMA_VERSION,
            name: "exp_001".into(),
            started: "2026-11-25T09:00:00Z".into(),
            finished: "2026-11-25T09:10:00Z".into(),
            seed: 42,
            target: "built-in chain (planner → finalizer)".into(),
            grader: "anthropic/claude-sonnet-4-6".into(),
            grader_version: None,
            threshold: 0.8,
            directions: vec![
                "maximize factually_correct_count".into(),
                "maximize average_composite_score".into(),
            ],
            agents: BTreeMap::from([("finalizer".into(), 3), ("planner".into(), 3)]),
            trials_requested: 3,
            search_mode: "TPE over 9 points after 10 random start-up trials".into(),
            baseline: step("optimization", 1),
            trials: vec![
                trial(0, 0, TrialOutcome::Complete, vec![1.0, 0.467]),
                trial(1, 2, TrialOutcome::Complete, vec![3.0, 1.0]),
                trial(2, 2, TrialOutcome::Duplicate, vec![3.0, 1.0]),
            ],
            pareto_front: vec![1],
            best_trial: Some(1),
            best_params: BTreeMap::from([("finalizer".into(), 2), ("planner".into(), 2)]),
            best_prompts: BTreeMap::from([
                ("finalizer".into(), "Answer in one line.".into()),
                ("planner".into(), "Plan the steps.".into()),
            ]),
            baseline_prompts: BTreeMap::new(),
            evaluation: Some(step("evaluation", 3)),
            evaluation_baseline: Some(step("evaluation", 1)),
            comparisons: vec![Comparison {
                set: "evaluation".into(),
                baseline: Metrics::of(&[case(1, true), case(2, false), case(3, false)]),
                optimized: Metrics::of(&[case(1, true), case(2, true), case(3, true)]),
                changes: vec![CaseChange {
                    line: 2,
                    question: "Question 2?".into(),
                    baseline_correct: false,
                    optimized_correct: true,
                    baseline_score: 0.2,
                    optimized_score: 1.0,
                }],
                significance: sig,
            }],
            usage: Usage {
                target: UsageTotals {
                    calls: 40,
                    cache_hits: 12,
                    requests: 28,
                    input_tokens: 5600,
                    output_tokens: 560,
                    cost_usd: Some(0.0123),
                },
                grader: UsageTotals {
                    calls: 12,
                    cache_hits: 0,
                    requests: 12,
                    input_tokens: 2400,
                    output_tokens: 240,
                    cost_usd: None,
                },
                proposer: UsageTotals::default(),
                target_runs: 12,
                rate_limits: Vec::new(),
            },
            estimate: None,
            prompt_files: BTreeMap::new(),
            proposals: Vec::new(),
            hand_written: None,
            correctness: None,
            disagreements: Vec::new(),
            tie: None,
        }
    }

    fn progress(r: &ExperimentReport) -> assay_core::experiment::ExperimentProgress {
        assay_core::experiment::ExperimentProgress {
            state: assay_core::experiment::ExperimentState::Finished,
            step: "done".into(),
            trials_done: r.trials.len(),
            trials_requested: r.trials_requested,
            eta_seconds: None,
            spent_usd: Some(0.0123),
            updated: None,
            holder: None,
            note: None,
        }
    }

    fn document(r: &ExperimentReport) -> String {
        let p = progress(r);
        let prompts = BTreeMap::new();
        html(&Page {
            report: r,
            progress: &p,
            warnings: &[],
            prompts: &prompts,
            racing: false,
        })
    }

    #[test]
    fn the_html_is_self_contained_with_the_front_and_the_baseline_marked() {
        let mut r = fixture();
        r.baseline_prompts = BTreeMap::from([
            ("finalizer".into(), "Answer briefly.".into()),
            ("planner".into(), "Plan.".into()),
        ]);
        let html = document(&r);
        for needle in [
            "<script",
            "<link",
            "src=\"http",
            "href=\"http",
            "@import",
            "url(",
        ] {
            assert!(!html.contains(needle), "{needle}");
        }
        let chart = &html[html.find("id=\"pareto-chart\"").unwrap()..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        assert_eq!(
            chart.matches("class=\"front\"").count(),
            r.pareto_front.len()
        );
        assert_eq!(chart.matches("class=\"baseline\"").count(), 1);
        assert!(chart.contains(">baseline</text>") && chart.contains("best (trial 1)"));
        assert!(html.contains("id=\"history-0\"") && html.contains("id=\"history-1\""));
        // Duplicates are marked in words; the best prompt is diffed against the baseline.
        assert!(html.contains("duplicate of #1"));
        assert!(html.contains("<span class=\"del\">- Plan.</span>"));
        assert!(html.contains("<span class=\"ins\">+ Plan the steps.</span>"));
        assert!(html.contains("assay prompts promote exp_001"));
        assert!(html.contains("$0.0123"));
    }

    #[test]
    fn markup_in_the_record_is_shown_as_text() {
        let inject = "<script>alert(1)</script><img src=x onerror=alert(2)>";
        let mut r = fixture();
        r.name = format!("exp{inject}");
        r.best_prompts
            .insert("planner".into(), format!("Plan {inject}"));
        r.comparisons[0].changes[0].question = format!("Q {inject}");
        r.comparisons[0].significance.verdict = format!("verdict {inject}");
        r.trials[1].note = Some(format!("note {inject}"));
        r.trials[1].cases = vec![CaseResult {
            output: Some(format!("answer {inject}")),
            ..case(1, true)
        }];
        let html = document(&r);
        assert!(!html.contains("<script>alert") && !html.contains("<img src=x"));
        assert!(html.matches("&lt;img src=x onerror=alert(2)&gt;").count() >= 4);
        let p = progress(&r);
        let prompts = BTreeMap::from([(
            "planner".to_owned(),
            vec![
                Some("Plan.".to_owned()),
                None,
                Some(format!("Plan {inject}")),
            ],
        )]);
        let page = Page {
            report: &r,
            progress: &p,
            warnings: &[],
            prompts: &prompts,
            racing: true,
        };
        let trial = trial_body(&page, 1, &NoLinks).unwrap();
        assert!(!trial.contains("<script>alert") && !trial.contains("<img src=x"));
        assert!(trial.contains("answer &lt;script&gt;"));
        assert!(trial_body(&page, 9, &NoLinks).is_none());
    }

    #[test]
    fn trial_orders_are_checked() {
        assert_eq!(Sort::parse(Some("value1"), true, 2).key, "value1");
        assert_eq!(Sort::parse(Some("value2"), true, 2), Sort::default());
        assert_eq!(Sort::parse(Some("<x>"), false, 2), Sort::default());
        assert_eq!(Sort::parse(Some("composite"), true, 2).key, "composite");
    }

    #[test]
    fn console_summary() {
        insta::assert_snapshot!(console(&fixture(), Some("experiments/exp_001/report.md")));
    }

    #[test]
    fn markdown_report() {
        insta::assert_snapshot!(markdown(&fixture()));
    }

    #[test]
    fn failed_assertions_get_a_line_each_and_passing_ones_none() {
        use assay_core::assertion::{AssertionSet, Output};
        let set = AssertionSet::parse(
            &serde_json::json!([
                {"type": "icontains", "value": "a"},
                {"type": "not-contains", "value": "secret", "critical": true},
                {"type": "cost", "value": 0.01}
            ]),
            None,
            "assert",
        )
        .unwrap();
        let mut r = fixture();
        assert!(!markdown(&r).contains("## Assertions"));
        r.baseline.cases[0].assertions = Some(set.evaluate(&Output::text("a")));
        let md = markdown(&r);
        assert!(md.contains("## Assertions that did not pass"), "{md}");
        assert!(
            md.contains("line 1: assert[2] `cost` could not be checked: cost was not measured"),
            "{md}"
        );
        assert!(
            !md.contains("assert[0]"),
            "a passing assertion gets no line"
        );
        r.baseline.cases[1].assertions = Some(set.evaluate(&Output::text("a secret")));
        let md = markdown(&r);
        assert!(
            md.contains(
                "line 2: assert[1] `not-contains` (critical) failed: has \"secret\" (negated)"
            ),
            "{md}"
        );
    }
}
