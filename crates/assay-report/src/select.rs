//! What the Markdown and HTML reports show, chosen once: the bank rows of the summary, the
//! critical failures with what went wrong, and the failing cases of each bank in report order.

use assay_core::aggregate::CaseRecord;
use assay_core::answer::AnswerCaseResult;
use assay_core::bank::BankType;
use assay_core::runlog::{
    AlwaysCaseResult, PatternCaseResult, RunLog, SemanticCaseResult, StateCaseResult,
};
use assay_core::verdict::{Outcome, Verdicted};

/// A bank's summary row: `(bank, name, (tests run, hard fails) when it ran)`.
pub(crate) type BankRow = (BankType, &'static str, Option<(usize, usize)>);

/// The summary's bank rows, in report order. The answer bank's row shows only when it ran
/// (runs without it read as before).
pub(crate) fn bank_rows(log: &RunLog) -> Vec<BankRow> {
    let mut rows = vec![
        (
            BankType::Semantic,
            "Semantic",
            log.semantic.as_ref().map(|r| (r.tests_run, r.hard_fails)),
        ),
        (
            BankType::State,
            "State",
            log.state.as_ref().map(|r| (r.tests_run, r.hard_fails)),
        ),
        (
            BankType::Pattern,
            "Pattern",
            log.pattern.as_ref().map(|r| (r.tests_run, r.hard_fails)),
        ),
        (
            BankType::Always,
            "Always",
            log.always.as_ref().map(|r| (r.tests_run, r.hard_fails)),
        ),
    ];
    if let Some(r) = &log.answer {
        rows.push((
            BankType::Answer,
            "Answer",
            Some((r.tests_run, r.hard_fails)),
        ));
    }
    rows
}

/// The pattern cases with a critical failure.
pub(crate) fn critical(log: &RunLog) -> Vec<&PatternCaseResult> {
    log.pattern
        .as_ref()
        .map(|p| p.results.iter().filter(|r| r.is_critical_failure).collect())
        .unwrap_or_default()
}

/// What a critical failure got wrong, with entity lists rendered by `list`.
pub(crate) fn critical_what(r: &PatternCaseResult, list: impl Fn(&[String]) -> String) -> String {
    if r.pattern_type == "negative" {
        format!("false alarm: matched {}", list(&r.false_positives))
    } else {
        format!(
            "missed crisis: expected {}, matched {}",
            list(&r.expected_matches),
            list(&r.matched_entities)
        )
    }
}

/// Semantic cases that failed or scored below 100 (errors apart), worst first.
pub(crate) fn semantic_failures(log: &RunLog) -> Vec<&SemanticCaseResult> {
    let mut failed: Vec<_> = log
        .semantic
        .iter()
        .flat_map(|s| &s.results)
        .filter(|r| r.score.is_some_and(|s| s < 100) || r.verdict().outcome == Outcome::Fail)
        .collect();
    failed.sort_by_key(|r| (r.score, r.test_id.clone()));
    failed
}

/// State cases that failed or scored below 100.
pub(crate) fn state_failures(log: &RunLog) -> Vec<&StateCaseResult> {
    log.state
        .iter()
        .flat_map(|s| &s.results)
        .filter(|r| r.score < 100 || r.verdict().outcome == Outcome::Fail)
        .collect()
}

/// Pattern cases that failed (a critical failure among them) or scored below 100.
pub(crate) fn pattern_failures(log: &RunLog) -> Vec<&PatternCaseResult> {
    log.pattern
        .iter()
        .flat_map(|p| &p.results)
        .filter(|r| r.score < 100 || r.verdict().outcome == Outcome::Fail)
        .collect()
}

/// Always cases that failed or scored below 100.
pub(crate) fn always_failures(log: &RunLog) -> Vec<&AlwaysCaseResult> {
    log.always
        .iter()
        .flat_map(|a| &a.results)
        .filter(|r| r.score < 100 || r.verdict().outcome == Outcome::Fail)
        .collect()
}

/// Answer cases that failed or scored below 100 (errored cases are not failures, see
/// [`errored`]); critical failures first, then worst first, in run order among equals.
pub(crate) fn answer_failures(log: &RunLog) -> Vec<&AnswerCaseResult> {
    let mut failed: Vec<&AnswerCaseResult> = log
        .answer
        .iter()
        .flat_map(|a| &a.results)
        .filter(|r| r.verdict().outcome != Outcome::Error)
        .filter(|r| r.verdict().outcome == Outcome::Fail || r.score.is_some_and(|s| s < 100))
        .collect();
    failed.sort_by_key(|r| (!r.is_critical_failure, r.score));
    failed
}

/// The answer cases that errored (not scored: shown apart from the failures).
pub(crate) fn answer_errors(log: &RunLog) -> Vec<&AnswerCaseResult> {
    log.answer
        .iter()
        .flat_map(|a| &a.results)
        .filter(|r| r.error.is_some())
        .collect()
}

/// The answer cases that failed critically.
pub(crate) fn answer_critical(log: &RunLog) -> Vec<&AnswerCaseResult> {
    log.answer
        .iter()
        .flat_map(|a| &a.results)
        .filter(|r| r.is_critical_failure)
        .collect()
}

/// One errored case as the reports list it.
pub(crate) struct Errored<'a> {
    /// Its bank.
    pub bank: BankType,
    /// The case.
    pub test_id: &'a str,
    /// The error.
    pub error: &'a str,
}

/// The listed cases that errored (semantic and answer: the banks whose cases can), in bank
/// order.
pub(crate) fn errored(log: &RunLog) -> Vec<Errored<'_>> {
    let semantic = log
        .semantic
        .iter()
        .flat_map(|s| &s.results)
        .filter_map(|r| {
            r.error.as_deref().map(|error| Errored {
                bank: BankType::Semantic,
                test_id: &r.test_id,
                error,
            })
        });
    let answer = log.answer.iter().flat_map(|a| &a.results).filter_map(|r| {
        r.error.as_deref().map(|error| Errored {
            bank: BankType::Answer,
            test_id: &r.test_id,
            error,
        })
    });
    semantic.chain(answer).collect()
}

/// Under a failures heading, when the RunLog lists only the worst cases: how many of how
/// many, and where the rest are (plain text).
pub(crate) fn partial_note(log: &RunLog, bank: BankType, shown: usize) -> Option<String> {
    let all = log.notable().imperfect_in(bank);
    (!log.is_complete() && all > shown).then(|| {
        format!(
            "The worst {shown} of {all} cases below 100; every case is in the run log{}.",
            run_log_name(log)
        )
    })
}

/// ` (cases_<stamp>.jsonl)` when the run has a run log.
pub(crate) fn run_log_name(log: &RunLog) -> String {
    log.cases
        .as_ref()
        .map_or_else(String::new, |c| format!(" ({})", c.file))
}

/// Every case a RunLog lists (of `bank`, or of every bank with `None`), in bank order.
pub(crate) fn for_each_listed(
    log: &RunLog,
    bank: Option<BankType>,
    each: &mut dyn FnMut(CaseRecord),
) {
    let wanted = |b: BankType| bank.is_none_or(|w| w == b);
    if let Some(r) = log.semantic.as_ref().filter(|_| wanted(BankType::Semantic)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::Semantic)
            .for_each(&mut *each);
    }
    if let Some(r) = log.state.as_ref().filter(|_| wanted(BankType::State)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::State)
            .for_each(&mut *each);
    }
    if let Some(r) = log.pattern.as_ref().filter(|_| wanted(BankType::Pattern)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::Pattern)
            .for_each(&mut *each);
    }
    if let Some(r) = log.always.as_ref().filter(|_| wanted(BankType::Always)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::Always)
            .for_each(&mut *each);
    }
    if let Some(r) = log.answer.as_ref().filter(|_| wanted(BankType::Answer)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::Answer)
            .for_each(&mut *each);
    }
}
