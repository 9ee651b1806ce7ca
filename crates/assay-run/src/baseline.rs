//! Comparing a run with a baseline run (`assay run --baseline`): finding the baseline, checking
//! it belongs to this project and is recent enough to compare, and the regression rules of
//! `[gate]` (`no_new_hard_fails`, `no_new_critical`, `max_score_drop`, `max_metric_drop`).
//!
//! A baseline is a results file, a saved run's id (its stamp, or the RunLog's `run_id`),
//! `latest` (the newest saved run before this one) or `accepted` (the run the team accepted,
//! [`crate::accepted`]). It is resolved and checked before the run starts, so a bad baseline
//! stops the run with nothing written. `accepted` before any run has been accepted is no
//! baseline at all ([`load`] returns `None`): a project's first CI run must not fail for it.
//!
//! ```no_run
//! # fn main() -> Result<(), assay_project::HarnessError> {
//! use assay_project::project::Project;
//! use assay_run::baseline;
//! let project = Project::load(std::path::Path::new("examples/coparent"))?;
//! if let Some(base) = baseline::load(&project, "accepted")? {
//!     println!("comparing with {}", base.label);
//! }
//! # Ok(()) }
//! ```

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use assay_core::rundiff::{CaseScore, RegressionGate, RunDiff, diff_runs_scored};
use assay_core::runlog::{BASELINE_OLDEST, RunLog, SCHEMA_VERSION};
use assay_kb::datafile::DataError;

use crate::HarnessError;
use crate::runs::{self, RunsError};
use assay_project::project::Project;
use assay_project::settings::RegressionRules;

/// A baseline run, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    /// The run.
    pub log: RunLog,
    /// The score of each of its cases (from its run log when its lists hold only the worst).
    pub cases: Vec<CaseScore>,
    /// What to call it: the file it was read from.
    pub label: String,
}

fn data(path: &Path, message: impl Into<String>) -> HarnessError {
    HarnessError::Data(DataError::new(path, message))
}

/// Reads a RunLog file for a comparison: it must be a RunLog of a version this assay compares.
pub fn read_file(path: &Path) -> Result<RunLog, HarnessError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| data(path, format!("cannot read the baseline: {e}")))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        HarnessError::Data(DataError {
            path: path.to_owned(),
            line: Some(e.line()),
            column: Some(e.column()),
            message: format!("not JSON: {e}"),
        })
    })?;
    let version = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| {
            data(
                path,
                "not a run's results file (no `schema_version`; expected results/results_<stamp>.json)",
            )
        })?;
    if version < u64::from(BASELINE_OLDEST) {
        return Err(data(
            path,
            format!(
                "written by an older assay (RunLog version {version}; comparisons need version {BASELINE_OLDEST} or later, which records the settings and knowledge base a run used): run the baseline again with this assay"
            ),
        ));
    }
    if version > u64::from(SCHEMA_VERSION) {
        return Err(data(
            path,
            format!(
                "written by a newer assay (RunLog version {version}; this assay reads up to {SCHEMA_VERSION})"
            ),
        ));
    }
    serde_json::from_value(value).map_err(|e| data(path, format!("not a RunLog: {e}")))
}

/// The word that names the accepted baseline.
pub const ACCEPTED: &str = "accepted";

/// Finds and reads the baseline `spec` names: a file, `latest`, `accepted`, a saved run's
/// stamp or its `run_id`. Then checks that it is a run of `project`. `None`: `accepted`, and
/// no run has been accepted yet.
pub fn load(project: &Project, spec: &str) -> Result<Option<Baseline>, HarnessError> {
    let settings = &project.settings;
    let (path, label) = if spec.trim() == ACCEPTED {
        match accepted_run(&settings.root)? {
            Some(found) => found,
            None => return Ok(None),
        }
    } else {
        let path = resolve(&settings.results_dir, spec)?;
        let label = path.display().to_string();
        (path, label)
    };
    let log = read_file(&path)?;
    let cases = read_cases(&log, &path)?;
    check_project(&log, &cases, project, &path)?;
    Ok(Some(Baseline { log, cases, label }))
}

/// The accepted run's copy and what a comparison calls it, if a run has been accepted.
fn accepted_run(root: &Path) -> Result<Option<(PathBuf, String)>, HarnessError> {
    Ok(crate::accepted::current(root)?.map(|a| (a.results_path(root), a.label())))
}

/// [`resolve`], and `accepted` too (the accepted run's copy, [`crate::accepted`]), for a
/// project whose folder is `root`.
pub fn resolve_in(root: &Path, results_dir: &Path, spec: &str) -> Result<PathBuf, HarnessError> {
    if spec.trim() == ACCEPTED {
        return match accepted_run(root)? {
            Some((path, _)) => Ok(path),
            None => Err(HarnessError::Usage(
                "`accepted`: no run has been accepted yet (`assay runs accept latest` accepts the newest)".to_owned(),
            )),
        };
    }
    resolve(results_dir, spec)
}

/// The score of every case of the run `log` read from `path`: from its lists, or streamed
/// from its run log beside it.
pub fn read_cases(log: &RunLog, path: &Path) -> Result<Vec<CaseScore>, HarnessError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let file = crate::caselog::cases_file(dir, log);
    crate::caselog::case_scores(log, file.as_deref()).map_err(|e| data(path, e.to_string()))
}

/// The results file `spec` names: a file, `latest` (the newest saved run in `results_dir`), a
/// saved run's stamp, or a saved run's `run_id`.
pub fn resolve(results_dir: &Path, spec: &str) -> Result<PathBuf, HarnessError> {
    let dir = results_dir;
    let spec = spec.trim();
    let path: PathBuf = if spec == "latest" {
        // A shard's run is part of a run: the newest whole (or merged) run is meant.
        let newest = runs::list_runs(dir)
            .map_err(runs_error)?
            .into_iter()
            .find(|r| r.shard.is_none())
            .ok_or_else(|| {
                HarnessError::Usage(format!(
                    "`latest`: there is no saved run in {} yet (run once without --baseline, or use --baseline accepted, which compares with nothing until a run is accepted)",
                    dir.display()
                ))
            })?;
        newest.json
    } else if Path::new(spec).is_file() {
        PathBuf::from(spec)
    } else if runs::check_run_id(spec).is_ok() {
        dir.join(format!("results_{spec}.json"))
    } else if let Some(entry) = runs::list_runs(dir)
        .map_err(runs_error)?
        .into_iter()
        .find(|r| r.run_id == spec)
    {
        entry.json
    } else {
        return Err(HarnessError::Usage(format!(
            "`{spec}`: not a file, `latest`, `accepted`, a saved run's id (like 2026-11-25-0915) or a run_id in {}",
            dir.display()
        )));
    };
    if !path.is_file() {
        return Err(HarnessError::Usage(format!(
            "`{spec}`: no saved run ({} does not exist)",
            path.display()
        )));
    }
    Ok(path)
}

#[allow(clippy::needless_pass_by_value)] // used as map_err(runs_error)
fn runs_error(e: RunsError) -> HarnessError {
    HarnessError::Usage(e.to_string())
}

/// A case's id, the rest of it skipped.
#[derive(serde::Deserialize)]
struct IdOnly {
    test_id: String,
}

/// A baseline of another project shares no case with this one: comparing would call every
/// case added and every old case removed.
fn check_project(
    log: &RunLog,
    cases: &[CaseScore],
    project: &Project,
    path: &Path,
) -> Result<(), HarnessError> {
    if cases.is_empty() {
        return Ok(());
    }
    let b = &project.banks;
    let mine: HashSet<(&str, &str)> = b
        .semantic
        .iter()
        .map(|c| ("semantic", c.case.test_id.as_str()))
        .chain(b.state.iter().map(|c| ("state", c.case.test_id.as_str())))
        .chain(
            b.pattern
                .iter()
                .map(|c| ("pattern", c.case.test_id.as_str())),
        )
        .chain(b.always.iter().map(|c| ("always", c.case.test_id.as_str())))
        .chain(b.answer.iter().map(|c| ("answer", c.case.test_id.as_str())))
        .collect();
    if cases
        .iter()
        .any(|c| mine.contains(&(c.bank.as_str(), c.test_id.as_str())))
    {
        return Ok(());
    }
    // The banks a run streams are not held: look for the baseline's cases in their files.
    let theirs: HashSet<(&str, &str)> = cases
        .iter()
        .map(|c| (c.bank.as_str(), c.test_id.as_str()))
        .collect();
    for streamed in &b.streamed {
        let mut found = false;
        let mut quiet = |_: String| {};
        for file in &streamed.files {
            assay_project::banks::for_each_case(
                file,
                streamed.bank,
                &mut quiet,
                &mut |_, c: IdOnly| {
                    found |= theirs.contains(&(streamed.bank.key(), c.test_id.as_str()));
                    Ok(())
                },
            )?;
            if found {
                return Ok(());
            }
        }
    }
    Err(data(
        path,
        format!(
            "a run of another project (`{}`): none of its {} cases is a case of {}",
            log.project,
            cases.len(),
            project.settings.root.display()
        ),
    ))
}

/// Compares `current` (whose case scores are `current_cases`) with the baseline and applies
/// the regression rules.
pub fn compare(
    baseline: &Baseline,
    current: &RunLog,
    current_cases: &[CaseScore],
    rules: &RegressionRules,
) -> RunDiff {
    let mut diff = diff_runs_scored(&baseline.log, current, &baseline.cases, current_cases);
    diff.label = Some(baseline.label.clone());
    diff.gate = Some(gate(&diff, rules));
    diff
}

/// How many cases a gate message names before "and N more".
const NAMED: usize = 8;

fn named(cases: &[String]) -> String {
    let shown = cases
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if cases.len() > NAMED {
        format!("{shown}, and {} more", cases.len() - NAMED)
    } else {
        shown
    }
}

/// Falls this close to the limit are float noise (0.4 - 0.3 is a hair above 0.1).
const METRIC_SLACK: f64 = 1e-9;

/// `max_metric_drop`: one reason per answer metric that fell by more than `max` in some case
/// (the metric with the largest fall first), naming the cases with their values, and the cases
/// (`answer/<id>`).
fn metric_drops(
    changes: &[assay_core::rundiff::MetricChange],
    max: f64,
) -> Vec<(String, Vec<String>)> {
    // `changes` come largest fall first, so metrics and cases keep that order.
    let mut by_metric: Vec<(&str, Vec<&assay_core::rundiff::MetricChange>)> = Vec::new();
    for c in changes.iter().filter(|c| -c.delta() > max + METRIC_SLACK) {
        match by_metric.iter_mut().find(|(m, _)| *m == c.metric) {
            Some((_, list)) => list.push(c),
            None => by_metric.push((&c.metric, vec![c])),
        }
    }
    by_metric
        .into_iter()
        .map(|(metric, list)| {
            let shown: Vec<String> = list
                .iter()
                .map(|c| format!("{} {:.2} → {:.2}", c.test_id, c.before, c.after))
                .collect();
            let reason = format!(
                "{metric} fell in {} answer case{}: {} (more than max_metric_drop {max})",
                list.len(),
                if list.len() == 1 { "" } else { "s" },
                named(&shown)
            );
            (
                reason,
                list.iter()
                    .copied()
                    .map(assay_core::rundiff::MetricChange::name)
                    .collect::<Vec<String>>(),
            )
        })
        .collect()
}

/// Applies the regression rules to a comparison.
pub fn gate(diff: &RunDiff, rules: &RegressionRules) -> RegressionGate {
    let mut reasons = Vec::new();
    let mut cases: Vec<String> = Vec::new();
    let note = |list: Vec<String>, cases: &mut Vec<String>| {
        for c in list {
            if !cases.contains(&c) {
                cases.push(c);
            }
        }
    };
    if rules.no_new_hard_fails && !diff.cases.new_hard_fails.is_empty() {
        let list: Vec<String> = diff
            .cases
            .new_hard_fails
            .iter()
            .map(assay_core::rundiff::CaseChange::name)
            .collect();
        reasons.push(format!(
            "{} new hard fail(s): {} (no_new_hard_fails)",
            list.len(),
            named(&list)
        ));
        note(list, &mut cases);
    }
    if rules.no_new_critical && !diff.cases.new_critical.is_empty() {
        let list: Vec<String> = diff
            .cases
            .new_critical
            .iter()
            .map(assay_core::rundiff::CaseChange::name)
            .collect();
        reasons.push(format!(
            "{} new critical failure(s): {} (no_new_critical)",
            list.len(),
            named(&list)
        ));
        note(list, &mut cases);
    }
    if let Some(max) = rules.max_score_drop
        && -diff.score_delta > max
    {
        let list: Vec<String> = diff
            .cases
            .worse
            .iter()
            .map(assay_core::rundiff::CaseChange::name)
            .collect();
        reasons.push(format!(
            "the combined score fell {:.1} points ({:.1} → {:.1}), more than max_score_drop {max}; cases that fell, worst first: {}",
            -diff.score_delta,
            diff.before.combined_score,
            diff.after.combined_score,
            named(&list)
        ));
        note(list, &mut cases);
    }
    for (reason, list) in metric_drops(&diff.metric_changes, rules.max_metric_drop) {
        reasons.push(reason);
        note(list, &mut cases);
    }
    RegressionGate {
        passed: reasons.is_empty(),
        reasons,
        cases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::rundiff::{CaseChange, CaseDiff, KbChanges, MetricChange, RunHeadline};
    use assay_core::runlog::Health;

    fn headline(score: f64) -> RunHeadline {
        RunHeadline {
            run_id: "r".into(),
            timestamp: "t".into(),
            combined_score: score,
            health_status: Health::Good,
            total_tests: 3,
            hard_fails: 0,
            error_count: 0,
        }
    }

    fn change(id: &str, before: u32, after: u32, hard: bool, critical: bool) -> CaseChange {
        CaseChange {
            bank: "pattern".into(),
            test_id: id.into(),
            before: Some(before),
            after: Some(after),
            delta: Some(i64::from(after) - i64::from(before)),
            was_hard_fail: false,
            is_hard_fail: hard,
            was_critical_failure: false,
            is_critical_failure: critical,
            before_error: None,
            after_error: None,
            before_verdict: None,
            after_verdict: None,
        }
    }

    fn diff(score_delta: f64, cases: CaseDiff) -> RunDiff {
        RunDiff {
            label: None,
            before: headline(90.0),
            after: headline(90.0 + score_delta),
            setup_changes: Vec::new(),
            kb_changes: KbChanges::default(),
            score_delta,
            counts: std::collections::BTreeMap::default(),
            topic_changes: Vec::new(),
            significance: None,
            gate: None,
            metric_changes: Vec::new(),
            cases,
        }
    }

    #[test]
    fn each_rule_names_its_cases_once() {
        let crit = change("P1", 100, 0, true, true);
        let hard = change("P2", 80, 0, true, false);
        let worse = change("P3", 90, 70, false, false);
        let d = diff(
            -6.0,
            CaseDiff {
                worse: vec![crit.clone(), hard.clone(), worse],
                new_hard_fails: vec![crit.clone(), hard],
                new_critical: vec![crit],
                ..CaseDiff::default()
            },
        );
        let all = RegressionRules {
            no_new_hard_fails: true,
            no_new_critical: true,
            max_score_drop: Some(5.0),
            max_metric_drop: 0.1,
        };
        let g = gate(&d, &all);
        assert!(!g.passed);
        assert_eq!(g.reasons.len(), 3, "{:?}", g.reasons);
        assert!(g.reasons[0].contains("2 new hard fail(s): pattern/P1, pattern/P2"));
        assert!(g.reasons[1].contains("1 new critical failure(s): pattern/P1"));
        assert!(g.reasons[2].contains("fell 6.0 points"));
        assert_eq!(g.cases, ["pattern/P1", "pattern/P2", "pattern/P3"]);
        // Rules switched off, and a drop within the limit, pass.
        let none = RegressionRules {
            no_new_hard_fails: false,
            no_new_critical: false,
            max_score_drop: Some(6.0),
            max_metric_drop: 0.1,
        };
        assert!(gate(&d, &none).passed);
        assert!(gate(&diff(0.0, CaseDiff::default()), &all).passed);
    }

    fn fell(id: &str, metric: &str, before: f64, after: f64) -> MetricChange {
        MetricChange {
            bank: "answer".into(),
            test_id: id.into(),
            metric: metric.into(),
            before,
            after,
        }
    }

    fn rules(max_metric_drop: f64) -> RegressionRules {
        RegressionRules {
            no_new_hard_fails: true,
            no_new_critical: true,
            max_score_drop: None,
            max_metric_drop,
        }
    }

    #[test]
    fn a_metric_that_fell_too_far_fails_the_gate_and_names_its_cases() {
        let mut d = diff(0.0, CaseDiff::default());
        // As `metric_changes` orders them: the largest fall first.
        d.metric_changes = vec![
            fell("A-1", "faithfulness", 1.0, 0.25),
            fell("A-2", "faithfulness", 0.9, 0.4),
            fell("A-3", "context_recall", 0.8, 0.5),
            fell("A-1", "answer_relevancy", 0.9, 0.85),
            fell("A-4", "faithfulness", 0.5, 0.6),
        ];
        let g = gate(&d, &rules(0.1));
        assert!(!g.passed);
        assert_eq!(
            g.reasons,
            [
                "faithfulness fell in 2 answer cases: A-1 1.00 → 0.25, A-2 0.90 → 0.40 (more than max_metric_drop 0.1)",
                "context_recall fell in 1 answer case: A-3 0.80 → 0.50 (more than max_metric_drop 0.1)",
            ]
        );
        assert_eq!(g.cases, ["answer/A-1", "answer/A-2", "answer/A-3"]);
        // A looser limit lets the smaller falls pass; 1 lets every fall pass.
        let g = gate(&d, &rules(0.5));
        assert_eq!(g.reasons.len(), 1, "{:?}", g.reasons);
        assert_eq!(g.cases, ["answer/A-1"]);
        assert!(gate(&d, &rules(1.0)).passed);
    }

    #[test]
    fn a_fall_of_exactly_the_limit_passes_despite_float_noise() {
        let mut d = diff(0.0, CaseDiff::default());
        d.metric_changes = vec![fell("A-1", "faithfulness", 0.4, 0.3)];
        assert!(
            -d.metric_changes[0].delta() > 0.1,
            "the noise this test is about"
        );
        assert!(gate(&d, &rules(0.1)).passed);
    }

    #[test]
    fn a_long_list_of_metric_falls_is_cut_short() {
        let mut d = diff(0.0, CaseDiff::default());
        d.metric_changes = (0..12)
            .map(|i| fell(&format!("A-{i:02}"), "faithfulness", 1.0, 0.0))
            .collect();
        let g = gate(&d, &rules(0.1));
        assert_eq!(g.reasons.len(), 1);
        assert!(
            g.reasons[0].starts_with("faithfulness fell in 12 answer cases: A-00 1.00 → 0.00,"),
            "{}",
            g.reasons[0]
        );
        assert!(
            g.reasons[0].contains("A-07 1.00 → 0.00, and 4 more"),
            "{}",
            g.reasons[0]
        );
        assert!(!g.reasons[0].contains("A-08"), "{}", g.reasons[0]);
        assert_eq!(g.cases.len(), 12, "every case is listed in `cases`");
    }
}
