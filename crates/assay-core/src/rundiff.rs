//! Comparing two runs case by case: which cases got better, which got worse, which stayed the
//! same, and which only one run has or could not score; which cases newly hard-fail or newly
//! fail critically; how each topic moved; and, first of all, what differs between the two
//! runs' setups (settings, embedder and reranker, the knowledge base's entities), so that a
//! change in results can be read against a change in what was run.
//!
//! ```
//! use assay_core::rundiff::{CaseScore, diff_scores};
//! let before = [CaseScore::new("always", "A1", Some(50)), CaseScore::new("always", "A2", Some(100))];
//! let after = [CaseScore::new("always", "A1", Some(100)), CaseScore::new("always", "A2", Some(100))];
//! let diff = diff_scores(&before, &after);
//! assert_eq!(diff.better[0].test_id, "A1");
//! assert_eq!(diff.unchanged.len(), 1);
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::runlog::RunLog;
use crate::verdict::{Outcome, Verdicted};

pub use crate::runlog::diff::{
    CaseChange, CaseDiff, KbChanges, KbFingerprint, MetricChange, RegressionGate, RunDiff,
    RunHeadline, SettingChange, TopicChange,
};

/// One case's score in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseScore {
    /// The bank's key (`semantic`, `state`, `pattern`, `always`, `answer`).
    pub bank: String,
    /// The case.
    pub test_id: String,
    /// 0–100, or `None` when an infrastructure error kept the case from a score.
    pub score: Option<u32>,
    /// Whether it hard-failed.
    pub is_hard_fail: bool,
    /// Whether it is a critical failure (a missed crisis, or a crisis false alarm).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_critical_failure: bool,
    /// The infrastructure error, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// An answer case's grounded-answer metrics (0–1) by name, where they applied.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
    /// Its stored verdict ([`crate::verdict`]).
    pub verdict: Outcome,
}

impl CaseScore {
    /// A case with a score, not hard-failed, that passed; or, with no score, one an error kept
    /// from a verdict.
    pub fn new(bank: &str, test_id: &str, score: Option<u32>) -> CaseScore {
        CaseScore {
            bank: bank.to_owned(),
            test_id: test_id.to_owned(),
            score,
            is_hard_fail: false,
            is_critical_failure: false,
            error: score.is_none().then(|| "error".to_owned()),
            metrics: BTreeMap::new(),
            verdict: if score.is_some() {
                Outcome::Pass
            } else {
                Outcome::Error
            },
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
            is_critical_failure: false,
            error: c.error.clone(),
            metrics: BTreeMap::new(),
            verdict: c.verdict().outcome,
        }));
    }
    let scored = |bank: &str, test_id: &str, score: u32, is_hard_fail: bool, verdict| CaseScore {
        bank: bank.to_owned(),
        test_id: test_id.to_owned(),
        score: Some(score),
        is_hard_fail,
        is_critical_failure: false,
        error: None,
        metrics: BTreeMap::new(),
        verdict,
    };
    if let Some(r) = &log.state {
        out.extend(r.results.iter().map(|c| {
            scored(
                "state",
                &c.test_id,
                c.score,
                c.is_hard_fail,
                c.verdict().outcome,
            )
        }));
    }
    if let Some(r) = &log.pattern {
        out.extend(r.results.iter().map(|c| CaseScore {
            is_critical_failure: c.is_critical_failure,
            ..scored(
                "pattern",
                &c.test_id,
                c.score,
                c.is_hard_fail,
                c.verdict().outcome,
            )
        }));
    }
    if let Some(r) = &log.always {
        out.extend(r.results.iter().map(|c| {
            scored(
                "always",
                &c.test_id,
                c.score,
                c.is_hard_fail,
                c.verdict().outcome,
            )
        }));
    }
    if let Some(r) = &log.answer {
        out.extend(r.results.iter().map(answer_score));
    }
    out
}

/// An answer case's score, with its metrics.
pub fn answer_score(c: &crate::answer::AnswerCaseResult) -> CaseScore {
    CaseScore {
        bank: "answer".into(),
        test_id: c.test_id.clone(),
        score: c.score,
        is_hard_fail: c.is_hard_fail,
        is_critical_failure: c.is_critical_failure,
        error: c.error.clone(),
        metrics: c
            .metrics
            .iter()
            .filter_map(|(m, o)| o.score.map(|s| (m.as_str().to_owned(), s)))
            .collect(),
        verdict: c.verdict().outcome,
    }
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
            was_critical_failure: a.is_some_and(|a| a.is_critical_failure),
            is_critical_failure: b.is_critical_failure,
            before_error: a.and_then(|a| a.error.clone()),
            after_error: b.error.clone(),
            before_verdict: a.map(|a| a.verdict),
            after_verdict: Some(b.verdict),
        };
        if b.verdict == Outcome::Fail && change.before_verdict != Some(Outcome::Fail) {
            diff.new_failures.push(change.clone());
        }
        if b.verdict == Outcome::Pass && change.before_verdict == Some(Outcome::Fail) {
            diff.fixed.push(change.clone());
        }
        if b.verdict == Outcome::Error && change.before_verdict != Some(Outcome::Error) {
            diff.new_errors.push(change.clone());
        }
        if change.is_hard_fail && !change.was_hard_fail {
            diff.new_hard_fails.push(change.clone());
        }
        if change.was_hard_fail && !change.is_hard_fail && change.after.is_some() {
            diff.fixed_hard_fails.push(change.clone());
        }
        if change.is_critical_failure && !change.was_critical_failure {
            diff.new_critical.push(change.clone());
        }
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
                was_critical_failure: a.is_critical_failure,
                is_critical_failure: false,
                before_error: a.error.clone(),
                after_error: None,
                before_verdict: Some(a.verdict),
                after_verdict: None,
            });
        }
    }
    // Stable sorts: equal moves stay in run order.
    diff.better.sort_by_key(|c| std::cmp::Reverse(c.delta));
    diff.worse.sort_by_key(|c| c.delta);
    diff
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

impl KbChanges {
    /// Compares two runs' knowledge bases.
    pub fn of(before: &KbFingerprint, after: &KbFingerprint) -> KbChanges {
        let differ = before.digest != after.digest;
        let by_entity = !before.entities.is_empty() || !after.entities.is_empty();
        if !differ || !by_entity {
            return KbChanges {
                by_entity,
                differ,
                ..KbChanges::default()
            };
        }
        let mut changes = KbChanges {
            by_entity,
            differ,
            ..KbChanges::default()
        };
        for (id, digest) in &after.entities {
            match before.entities.get(id) {
                None => changes.added.push(id.clone()),
                Some(d) if d != digest => changes.changed.push(id.clone()),
                Some(_) => {}
            }
        }
        changes.removed = before
            .entities
            .keys()
            .filter(|id| !after.entities.contains_key(*id))
            .cloned()
            .collect();
        changes
    }
}

/// Smaller moves than this are float noise, not a change.
const METRIC_EPSILON: f64 = 1e-9;

/// The metrics that moved for the cases both runs have and both measured, by the largest fall
/// first, then the rises by the smallest first; equal moves stay in run order. A metric only
/// one run measured (or a non-finite value) is left out: there is nothing to compare.
pub fn metric_changes(before: &[CaseScore], after: &[CaseScore]) -> Vec<MetricChange> {
    let old: std::collections::HashMap<(&str, &str), &CaseScore> = before
        .iter()
        .filter(|c| !c.metrics.is_empty())
        .map(|c| ((c.bank.as_str(), c.test_id.as_str()), c))
        .collect();
    let mut out = Vec::new();
    for b in after.iter().filter(|c| !c.metrics.is_empty()) {
        let Some(a) = old.get(&(b.bank.as_str(), b.test_id.as_str())) else {
            continue;
        };
        for (metric, &y) in &b.metrics {
            let Some(&x) = a.metrics.get(metric) else {
                continue;
            };
            if x.is_finite() && y.is_finite() && (y - x).abs() > METRIC_EPSILON {
                out.push(MetricChange {
                    bank: b.bank.clone(),
                    test_id: b.test_id.clone(),
                    metric: metric.clone(),
                    before: x,
                    after: y,
                });
            }
        }
    }
    out.sort_by(|p, q| p.delta().total_cmp(&q.delta()));
    out
}

impl RunDiff {
    /// Whether anything differs: setup, knowledge base, any case's score or presence, or an
    /// answer case's metric.
    pub fn is_unchanged(&self) -> bool {
        self.setup_changes.is_empty()
            && !self.kb_changes.differ
            && self.cases.better.is_empty()
            && self.cases.worse.is_empty()
            && self.cases.errored.is_empty()
            && self.cases.added.is_empty()
            && self.cases.removed.is_empty()
            && self.cases.new_failures.is_empty()
            && self.cases.fixed.is_empty()
            && self.cases.new_errors.is_empty()
            && self.metric_changes.is_empty()
    }

    /// Drops the unchanged cases (kept as a count), for a record embedded in a report.
    pub fn without_unchanged(mut self) -> RunDiff {
        self.cases.unchanged.clear();
        self
    }
}

/// The settings and setup entries that differ between two maps, in key order.
pub fn setting_changes(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<SettingChange> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| SettingChange {
            key: k.clone(),
            before: before.get(k).cloned(),
            after: after.get(k).cloned(),
        })
        .collect()
}

fn topic_changes(before: &RunLog, after: &RunLog) -> Vec<TopicChange> {
    let empty = BTreeMap::new();
    let of = |log: &RunLog| {
        log.semantic
            .as_ref()
            .map_or(&empty, |s| &s.topic_scores)
            .clone()
    };
    let (a, b) = (of(before), of(after));
    let topics: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out: Vec<TopicChange> = topics
        .into_iter()
        .filter_map(|t| {
            let (x, y) = (a.get(t).map(|g| g.avg), b.get(t).map(|g| g.avg));
            let delta = x.zip(y).map(|(x, y)| ((y - x) * 10.0).round() / 10.0);
            (delta != Some(0.0)).then(|| TopicChange {
                topic: t.clone(),
                before: x,
                after: y,
                delta,
            })
        })
        .collect();
    out.sort_by(|p, q| {
        p.delta
            .unwrap_or(0.0)
            .total_cmp(&q.delta.unwrap_or(0.0))
            .then_with(|| p.topic.cmp(&q.topic))
    });
    out
}

/// The setup entries a run records besides its settings: the systems under test.
fn setup_entries(log: &RunLog) -> BTreeMap<String, String> {
    let mut all: BTreeMap<String, String> = log
        .setup
        .iter()
        .map(|(k, v)| (format!("setup.{k}"), v.clone()))
        .collect();
    all.extend(log.settings.iter().map(|(k, v)| (k.clone(), v.clone())));
    all
}

/// How many cases fall in each group, and how many answer metrics fell (`metric_falls`, only
/// when any answer metric moved, so that comparisons without answer cases read as before).
fn group_counts(cases: &CaseDiff, metric_changes: &[MetricChange]) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = [
        ("better", cases.better.len()),
        ("worse", cases.worse.len()),
        ("unchanged", cases.unchanged.len()),
        ("errored", cases.errored.len()),
        ("added", cases.added.len()),
        ("removed", cases.removed.len()),
        ("new_hard_fails", cases.new_hard_fails.len()),
        ("fixed_hard_fails", cases.fixed_hard_fails.len()),
        ("new_critical", cases.new_critical.len()),
        ("new_failures", cases.new_failures.len()),
        ("fixed", cases.fixed.len()),
        ("new_errors", cases.new_errors.len()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    if !metric_changes.is_empty() {
        let falls = metric_changes.iter().filter(|m| m.delta() < 0.0).count();
        counts.insert("metric_falls".to_owned(), falls);
    }
    counts
}

/// Compares run `before` with run `after`, with the paired bootstrap (seeded, 95 %) on the
/// cases both scored.
pub fn diff_runs(before: &RunLog, after: &RunLog) -> RunDiff {
    diff_runs_scored(before, after, &case_scores(before), &case_scores(after))
}

/// [`diff_runs`] with the runs' case scores given: a run whose RunLog lists only its worst
/// cases has them all in its run log.
pub fn diff_runs_scored(
    before: &RunLog,
    after: &RunLog,
    before_cases: &[CaseScore],
    after_cases: &[CaseScore],
) -> RunDiff {
    let cases = diff_scores(before_cases, after_cases);
    let metric_changes = metric_changes(before_cases, after_cases);
    let counts = group_counts(&cases, &metric_changes);
    let pairs: Vec<(f64, f64)> = cases
        .better
        .iter()
        .chain(&cases.worse)
        .chain(&cases.unchanged)
        .filter_map(|c| Some((f64::from(c.before?), f64::from(c.after?))))
        .collect();
    let delta = after.summary.combined_score - before.summary.combined_score;
    RunDiff {
        label: None,
        before: RunHeadline::of(before),
        after: RunHeadline::of(after),
        setup_changes: setting_changes(&setup_entries(before), &setup_entries(after)),
        kb_changes: KbChanges::of(&before.kb, &after.kb),
        score_delta: (delta * 10.0).round() / 10.0,
        counts,
        topic_changes: topic_changes(before, after),
        significance: crate::stats::paired_bootstrap(
            &pairs,
            crate::stats::BootstrapSettings::default(),
        ),
        gate: None,
        metric_changes,
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
    fn a_change_of_verdict_is_a_new_failure_a_fix_or_a_new_error() {
        let v = |id: &str, verdict: Outcome| CaseScore {
            verdict,
            ..s(id, (verdict != Outcome::Error).then_some(90))
        };
        let before = [
            v("broke", Outcome::Pass),
            v("mended", Outcome::Fail),
            v("down", Outcome::Pass),
            v("still", Outcome::Fail),
            v("back", Outcome::Error),
        ];
        let after = [
            v("broke", Outcome::Fail),
            v("mended", Outcome::Pass),
            v("down", Outcome::Error),
            v("still", Outcome::Fail),
            v("back", Outcome::Fail),
            v("new", Outcome::Fail),
        ];
        let d = diff_scores(&before, &after);
        let ids = |v: &[CaseChange]| v.iter().map(|c| c.test_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&d.new_failures), ["broke", "back", "new"]);
        assert_eq!(ids(&d.fixed), ["mended"]);
        assert_eq!(ids(&d.new_errors), ["down"]);
        assert_eq!(d.new_failures[0].before_verdict, Some(Outcome::Pass));
        assert_eq!(d.new_failures[2].before_verdict, None);
        let counts = group_counts(&d, &[]);
        assert_eq!(
            (
                counts["new_failures"],
                counts["fixed"],
                counts["new_errors"]
            ),
            (3, 1, 1)
        );
    }

    fn answer(id: &str, metrics: &[(&str, f64)]) -> CaseScore {
        CaseScore {
            metrics: metrics.iter().map(|(m, v)| ((*m).to_owned(), *v)).collect(),
            ..CaseScore::new("answer", id, Some(100))
        }
    }

    #[test]
    fn metric_changes_list_falls_first_largest_first() {
        let before = [
            answer("A-1", &[("faithfulness", 1.0), ("context_recall", 0.5)]),
            answer("A-2", &[("faithfulness", 0.9), ("answer_relevancy", 0.8)]),
            answer("A-3", &[("faithfulness", 0.2)]),
            answer("gone", &[("faithfulness", 1.0)]),
        ];
        let after = [
            answer("A-1", &[("faithfulness", 0.25), ("context_recall", 0.5)]),
            answer("A-2", &[("faithfulness", 0.4), ("answer_relevancy", 0.9)]),
            answer("A-3", &[("faithfulness", 0.7), ("context_precision", 1.0)]),
            answer("new", &[("faithfulness", 0.0)]),
        ];
        let got: Vec<(String, String, f64, f64)> = metric_changes(&before, &after)
            .into_iter()
            .map(|m| (m.test_id, m.metric, m.before, m.after))
            .collect();
        let want = [
            ("A-1", "faithfulness", 1.0, 0.25),
            ("A-2", "faithfulness", 0.9, 0.4),
            ("A-2", "answer_relevancy", 0.8, 0.9),
            ("A-3", "faithfulness", 0.2, 0.7),
        ];
        let want: Vec<(String, String, f64, f64)> = want
            .iter()
            .map(|(t, m, b, a)| ((*t).to_owned(), (*m).to_owned(), *b, *a))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn unchanged_or_unmeasured_metrics_are_no_change() {
        let before = [answer("A-1", &[("faithfulness", 0.5)]), s("S-1", Some(50))];
        let after = [
            answer("A-1", &[("faithfulness", 0.5), ("context_recall", 0.0)]),
            s("S-1", Some(10)),
        ];
        assert!(metric_changes(&before, &after).is_empty());
        let nan = [answer("A-1", &[("faithfulness", f64::NAN)])];
        assert!(metric_changes(&before, &nan).is_empty());
    }

    #[test]
    fn metric_falls_are_counted_only_when_metrics_moved() {
        let plain = diff_scores(&[s("S", Some(1))], &[s("S", Some(2))]);
        let counts = group_counts(&plain, &[]);
        assert!(!counts.contains_key("metric_falls"));
        assert_eq!(counts["better"], 1);
        let before = [answer(
            "A",
            &[("faithfulness", 1.0), ("context_recall", 0.2)],
        )];
        let after = [answer(
            "A",
            &[("faithfulness", 0.5), ("context_recall", 0.4)],
        )];
        let moved = metric_changes(&before, &after);
        let counts = group_counts(&diff_scores(&before, &after), &moved);
        assert_eq!(counts["metric_falls"], 1);
        assert_eq!(counts["unchanged"], 1);
    }

    #[test]
    fn a_metric_change_names_its_case_and_round_trips() {
        let change = MetricChange {
            bank: "answer".into(),
            test_id: "A-1".into(),
            metric: "faithfulness".into(),
            before: 1.0,
            after: 0.25,
        };
        assert_eq!(change.name(), "answer/A-1");
        assert!((change.delta() + 0.75).abs() < 1e-12);
        let json = serde_json::to_string(&change).unwrap();
        let back: MetricChange = serde_json::from_str(&json).unwrap();
        assert_eq!(back, change);
    }

    #[test]
    fn the_same_id_in_two_banks_is_two_cases() {
        let before = [CaseScore::new("state", "X", Some(0))];
        let after = [CaseScore::new("pattern", "X", Some(100))];
        let d = diff_scores(&before, &after);
        assert_eq!((d.added.len(), d.removed.len(), d.better.len()), (1, 1, 0));
    }
}
