//! Comparing two runs case by case: which cases got better, which got worse, which stayed the
//! same, and which only one run has or could not score.
//!
//! ```
//! use assay_core::rundiff::{CaseScore, diff_scores};
//! let before = [CaseScore::new("always", "A1", Some(50)), CaseScore::new("always", "A2", Some(100))];
//! let after = [CaseScore::new("always", "A1", Some(100)), CaseScore::new("always", "A2", Some(100))];
//! let diff = diff_scores(&before, &after);
//! assert_eq!(diff.better[0].test_id, "A1");
//! assert_eq!(diff.unchanged.len(), 1);
//! ```

use serde::Serialize;

use crate::runlog::RunLog;

/// One case's score in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaseScore {
    /// The bank's key (`semantic`, `state`, `pattern`, `always`).
    pub bank: String,
    /// The case.
    pub test_id: String,
    /// 0–100, or `None` when an infrastructure error kept the case from a score.
    pub score: Option<u32>,
    /// Whether it hard-failed.
    pub is_hard_fail: bool,
    /// The infrastructure error, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CaseScore {
    /// A case with a score (or none), not hard-failed, without error.
    pub fn new(bank: &str, test_id: &str, score: Option<u32>) -> CaseScore {
        CaseScore {
            bank: bank.to_owned(),
            test_id: test_id.to_owned(),
            score,
            is_hard_fail: false,
            error: None,
        }
    }
}

/// Every case of a run with its score, bank by bank in run order.
pub fn case_scores(log: &RunLog) -> Vec<CaseScore> {
    let mut out = Vec::new();
    if let Some(r) = &log.semantic {
        out.extend(r.results.iter().map(|c| CaseScore {
            bank: "semantic".into(),
            test_id: c.test_id.clone(),
            score: c.score,
            is_hard_fail: c.is_hard_fail,
            error: c.error.clone(),
        }));
    }
    let scored = |bank: &str, test_id: &str, score: u32, is_hard_fail: bool| CaseScore {
        bank: bank.to_owned(),
        test_id: test_id.to_owned(),
        score: Some(score),
        is_hard_fail,
        error: None,
    };
    if let Some(r) = &log.state {
        out.extend(
            r.results
                .iter()
                .map(|c| scored("state", &c.test_id, c.score, c.is_hard_fail)),
        );
    }
    if let Some(r) = &log.pattern {
        out.extend(
            r.results
                .iter()
                .map(|c| scored("pattern", &c.test_id, c.score, c.is_hard_fail)),
        );
    }
    if let Some(r) = &log.always {
        out.extend(
            r.results
                .iter()
                .map(|c| scored("always", &c.test_id, c.score, c.is_hard_fail)),
        );
    }
    out
}

/// One case in both runs (or in one of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaseChange {
    /// The bank's key.
    pub bank: String,
    /// The case.
    pub test_id: String,
    /// Its score in the first run (`None`: errored there, or not in it).
    pub before: Option<u32>,
    /// Its score in the second run.
    pub after: Option<u32>,
    /// `after - before`, when both scored.
    pub delta: Option<i64>,
    /// Hard-failed in the first run.
    pub was_hard_fail: bool,
    /// Hard-failed in the second run.
    pub is_hard_fail: bool,
    /// The error in the first run, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_error: Option<String>,
    /// The error in the second run, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_error: Option<String>,
}

/// Two runs compared case by case. Cases are matched by bank and `test_id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CaseDiff {
    /// Cases whose score rose, the largest rise first.
    pub better: Vec<CaseChange>,
    /// Cases whose score fell, the largest fall first.
    pub worse: Vec<CaseChange>,
    /// Cases with the same score in both runs, in run order.
    pub unchanged: Vec<CaseChange>,
    /// Cases scored in one run but errored (no score) in the other, or errored in both: not
    /// comparable, and never counted as better or worse.
    pub errored: Vec<CaseChange>,
    /// Cases only the second run has.
    pub added: Vec<CaseChange>,
    /// Cases only the first run has.
    pub removed: Vec<CaseChange>,
}

/// Compares two runs' case scores.
pub fn diff_scores(before: &[CaseScore], after: &[CaseScore]) -> CaseDiff {
    let key = |c: &CaseScore| (c.bank.clone(), c.test_id.clone());
    let old: std::collections::HashMap<(String, String), &CaseScore> =
        before.iter().map(|c| (key(c), c)).collect();
    let new_keys: std::collections::HashSet<(String, String)> = after.iter().map(key).collect();
    let mut diff = CaseDiff::default();
    for b in after {
        let a = old.get(&key(b)).copied();
        let change = CaseChange {
            bank: b.bank.clone(),
            test_id: b.test_id.clone(),
            before: a.and_then(|a| a.score),
            after: b.score,
            delta: match (a.and_then(|a| a.score), b.score) {
                (Some(x), Some(y)) => Some(i64::from(y) - i64::from(x)),
                _ => None,
            },
            was_hard_fail: a.is_some_and(|a| a.is_hard_fail),
            is_hard_fail: b.is_hard_fail,
            before_error: a.and_then(|a| a.error.clone()),
            after_error: b.error.clone(),
        };
        match (a, change.delta) {
            (None, _) => diff.added.push(change),
            (Some(_), None) => diff.errored.push(change),
            (Some(_), Some(d)) if d > 0 => diff.better.push(change),
            (Some(_), Some(d)) if d < 0 => diff.worse.push(change),
            (Some(_), Some(_)) => diff.unchanged.push(change),
        }
    }
    for a in before {
        if !new_keys.contains(&key(a)) {
            diff.removed.push(CaseChange {
                bank: a.bank.clone(),
                test_id: a.test_id.clone(),
                before: a.score,
                after: None,
                delta: None,
                was_hard_fail: a.is_hard_fail,
                is_hard_fail: false,
                before_error: a.error.clone(),
                after_error: None,
            });
        }
    }
    // Stable sorts: equal moves stay in run order.
    diff.better.sort_by_key(|c| std::cmp::Reverse(c.delta));
    diff.worse.sort_by_key(|c| c.delta);
    diff
}

/// The headline of one run in a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunHeadline {
    /// The run's id.
    pub run_id: String,
    /// When it started.
    pub timestamp: String,
    /// Its weighted score.
    pub combined_score: f64,
    /// Its health.
    pub health_status: crate::runlog::Health,
    /// Cases run.
    pub total_tests: usize,
    /// Hard fails.
    pub hard_fails: usize,
    /// Errored cases.
    pub error_count: usize,
}

impl RunHeadline {
    /// The headline of `log`.
    pub fn of(log: &RunLog) -> RunHeadline {
        RunHeadline {
            run_id: log.run_id.clone(),
            timestamp: log.timestamp.clone(),
            combined_score: log.summary.combined_score,
            health_status: log.summary.health_status,
            total_tests: log.summary.total_tests,
            hard_fails: log.summary.hard_fail_count,
            error_count: log.summary.error_count,
        }
    }
}

/// Two runs compared: their headlines, the change in weighted score, and the cases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    /// The first run (the baseline).
    pub before: RunHeadline,
    /// The second run.
    pub after: RunHeadline,
    /// `after.combined_score - before.combined_score`, one decimal.
    pub score_delta: f64,
    /// How many cases fall in each group (`better`, `worse`, `unchanged`, `errored`, `added`,
    /// `removed`).
    pub counts: std::collections::BTreeMap<&'static str, usize>,
    /// The cases.
    #[serde(flatten)]
    pub cases: CaseDiff,
}

/// Compares run `before` with run `after`.
pub fn diff_runs(before: &RunLog, after: &RunLog) -> RunDiff {
    let cases = diff_scores(&case_scores(before), &case_scores(after));
    let counts = [
        ("better", cases.better.len()),
        ("worse", cases.worse.len()),
        ("unchanged", cases.unchanged.len()),
        ("errored", cases.errored.len()),
        ("added", cases.added.len()),
        ("removed", cases.removed.len()),
    ]
    .into_iter()
    .collect();
    let delta = after.summary.combined_score - before.summary.combined_score;
    RunDiff {
        before: RunHeadline::of(before),
        after: RunHeadline::of(after),
        score_delta: (delta * 10.0).round() / 10.0,
        counts,
        cases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(id: &str, score: Option<u32>) -> CaseScore {
        CaseScore::new("semantic", id, score)
    }

    #[test]
    fn cases_fall_in_one_group_each() {
        let before = [
            s("up", Some(40)),
            s("down", Some(90)),
            s("same", Some(70)),
            s("err", Some(80)),
            s("gone", Some(10)),
            s("up2", Some(90)),
        ];
        let after = [
            s("up", Some(100)),
            s("down", Some(30)),
            s("same", Some(70)),
            s("err", None),
            s("new", Some(50)),
            s("up2", Some(95)),
        ];
        let d = diff_scores(&before, &after);
        let ids = |v: &[CaseChange]| v.iter().map(|c| c.test_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&d.better), ["up", "up2"]);
        assert_eq!(d.better[0].delta, Some(60));
        assert_eq!(ids(&d.worse), ["down"]);
        assert_eq!(d.worse[0].delta, Some(-60));
        assert_eq!(ids(&d.unchanged), ["same"]);
        assert_eq!(ids(&d.errored), ["err"]);
        assert_eq!(d.errored[0].before, Some(80));
        assert_eq!(ids(&d.added), ["new"]);
        assert_eq!(ids(&d.removed), ["gone"]);
    }

    #[test]
    fn the_same_id_in_two_banks_is_two_cases() {
        let before = [CaseScore::new("state", "X", Some(0))];
        let after = [CaseScore::new("pattern", "X", Some(100))];
        let d = diff_scores(&before, &after);
        assert_eq!((d.added.len(), d.removed.len(), d.better.len()), (1, 1, 0));
    }
}
