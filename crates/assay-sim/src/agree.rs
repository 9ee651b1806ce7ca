//! The simulator's judge measured against people (`assay judge agree` with `judge:
//! simulation`): a labels file names a saved simulation report and, for some of its runs, the
//! scores people gave each criterion (and, optionally, their verdict). The judge scores those
//! same transcripts again, and [`assay_core::agreement`] measures how far they agree.
//!
//! The labels file (YAML or JSON; `docs/judges.md`):
//!
//! ```yaml
//! judge: simulation
//! report: reports/report_20261126_120449.json   # relative to this file, inside the project
//! items:
//!   - run: daily_chore#1          # scenario id, `#` and the repeat (`#1` may be left out)
//!     scores: {requirement_accuracy: 8, state_management: 2}
//!     verdict: fail               # optional: pass or fail
//!     note: claimed the chores were logged; nothing was
//!   - transcript: transcripts/off_topic-1.json   # or a transcript file, without a report
//!     scores: {scope_adherence: 9}
//! ```
//!
//! Criteria must be the suite's; scores must lie on the criterion's scale (0-10, or 0 or 10 for
//! `pass_fail`). A verdict left out is derived when every criterion is scored (the scenario's
//! weights, the suite's pass threshold).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use assay_core::agreement::{
    AgreementReport, ItemScores, Observation, Scale as AgreementScale, VerdictPair, measure,
};
use assay_core::simulation::{Judgement, Scale, ScenarioRun, SimReport, Transcript};
use assay_kb::datafile::{self, DataError};
use assay_providers::ChatModel;
use serde::Deserialize;

use crate::judge::{self, Sample};
use crate::suite::{Scenario, Suite, line_of};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelsFile {
    judge: String,
    #[serde(default)]
    report: Option<String>,
    items: Vec<LabelConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelConfig {
    /// A run of the report: `scenario#repeat`.
    #[serde(default)]
    run: Option<String>,
    /// Or a transcript file (`sim/reports/transcripts/<stamp>/<scenario>-<repeat>.json`, or
    /// one written by hand), relative to the labels file.
    #[serde(default)]
    transcript: Option<String>,
    /// A criterion left empty (`~`) was not scored.
    #[serde(default)]
    scores: BTreeMap<String, Option<f64>>,
    #[serde(default)]
    verdict: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

/// One labelled run.
#[derive(Debug, Clone)]
pub struct Label {
    /// `scenario#repeat`.
    pub item: String,
    /// The run in the report.
    pub run: ScenarioRun,
    /// Criterion → the person's score.
    pub scores: BTreeMap<String, f64>,
    /// The person's verdict, given or derived.
    pub verdict: Option<bool>,
}

/// A labels file, read and checked against the suite and its report.
#[derive(Debug, Clone)]
pub struct Labels {
    /// The labels file.
    pub path: PathBuf,
    /// The report the labels score, when they name runs of one.
    pub report_path: Option<PathBuf>,
    /// The labelled runs, in file order.
    pub labels: Vec<Label>,
}

/// Reads `judge:` of a labels file (`simulation` or `rubric`) without reading the rest.
pub fn labels_kind(path: &Path) -> Result<String, DataError> {
    #[derive(Deserialize)]
    struct Head {
        judge: Option<String>,
    }
    let mut ignore = |_: String| {};
    let head: Head = datafile::read(path, &mut ignore)?;
    head.judge.ok_or_else(|| {
        DataError::new(
            path,
            "judge: missing (say which judge the labels are for: `simulation` or `rubric`)",
        )
    })
}

/// Reads and checks a `judge: simulation` labels file for `suite`: the report exists inside
/// the project and is a simulation of this suite, every run exists in it with a transcript,
/// every criterion is the suite's and every score is on its scale. Unknown fields are errors.
pub fn load_labels(path: &Path, suite: &Suite) -> Result<Labels, DataError> {
    let (format, text) = datafile::read_text(path)?;
    let mut warnings = Vec::new();
    let file: LabelsFile = datafile::parse(path, &text, format, &mut |w| warnings.push(w))?;
    if let Some(w) = warnings.first() {
        return Err(DataError::new(path, w.replace(" (ignored)", "")));
    }
    let err = |key: &str, message: String| DataError {
        path: path.to_owned(),
        line: line_of(&text, key),
        column: None,
        message,
    };
    if file.judge != "simulation" {
        return Err(err(
            "judge",
            format!("judge: `{}` is not `simulation`", file.judge),
        ));
    }
    // A bare file name (`labels.yaml`) has an empty parent: its folder is the current one.
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let report = match &file.report {
        None => None,
        Some(report) => {
            let report_path =
                datafile::file_inside(&suite.project, base, report, "the project's folder")
                    .map_err(|e| err("report", format!("report: {e}")))?;
            let read = crate::report::read(&report_path)?;
            if read.suite != suite.config.name {
                return Err(err(
                    "report",
                    format!(
                        "report: a simulation of suite `{}`, not `{}`",
                        read.suite, suite.config.name
                    ),
                ));
            }
            Some((report_path, read))
        }
    };
    if file.items.is_empty() {
        return Err(err("items", "items: no labelled run".into()));
    }
    let mut seen = HashSet::new();
    let mut labels = Vec::new();
    for (i, item) in file.items.into_iter().enumerate() {
        let name = item
            .run
            .clone()
            .or_else(|| item.transcript.clone())
            .unwrap_or_default();
        let at = |message: String| DataError {
            path: path.to_owned(),
            line: item_line(&text, &name),
            column: None,
            message: format!("items[{i}] ({name}): {message}"),
        };
        let item_scores: BTreeMap<String, f64> = item
            .scores
            .iter()
            .filter_map(|(k, v)| v.map(|v| (k.clone(), v)))
            .collect();
        let run: ScenarioRun = match (&item.run, &item.transcript) {
            (Some(run), None) => {
                let (scenario_id, repeat) = match run.split_once('#') {
                    Some((s, r)) => (
                        s.to_owned(),
                        r.parse::<u32>()
                            .map_err(|_| at("run: the repeat after `#` is not a number".into()))?,
                    ),
                    None => (run.clone(), 1),
                };
                let Some((report_path, report)) = &report else {
                    return Err(at(
                        "run: names a run of a report, but the file names no `report`".into(),
                    ));
                };
                let found = report
                    .runs
                    .iter()
                    .find(|r| r.scenario_id == scenario_id && r.repeat == repeat)
                    .ok_or_else(|| {
                        at(format!(
                            "run: the report has no run `{scenario_id}#{repeat}` ({})",
                            report_path.display()
                        ))
                    })?;
                if found.transcript.is_none() {
                    return Err(at(
                        "run: that run has no transcript (an error stopped it before the conversation)"
                            .into(),
                    ));
                }
                found.clone()
            }
            (None, Some(file)) => {
                let real =
                    datafile::file_inside(&suite.project, base, file, "the project's folder")
                        .map_err(|e| at(format!("transcript: {e}")))?;
                let mut ignore = |_: String| {};
                let transcript: Transcript = datafile::read(&real, &mut ignore)?;
                ScenarioRun {
                    scenario_id: transcript.scenario_id.clone(),
                    scenario_name: String::new(),
                    repeat: transcript.repeat,
                    verdict: assay_core::simulation::Verdict::Error,
                    failed_by: None,
                    judge_verdict: None,
                    reason: None,
                    overall: None,
                    judgement: None,
                    judge_samples: Vec::new(),
                    checks: Vec::new(),
                    error: None,
                    warnings: Vec::new(),
                    transcript: Some(transcript),
                    duration_ms: 0,
                }
            }
            _ => {
                return Err(at(
                    "give exactly one of `run` (with the file's `report`) or `transcript`".into(),
                ));
            }
        };
        let scenario_id = run.scenario_id.clone();
        let key = format!("{scenario_id}#{}", run.repeat);
        if !seen.insert(key.clone()) {
            return Err(at(format!("{key} is labelled twice")));
        }
        let scenario = suite
            .scenario(&scenario_id)
            .ok_or_else(|| at(format!("the suite has no scenario `{scenario_id}`")))?;
        for (criterion, score) in &item_scores {
            let c = suite
                .criteria()
                .iter()
                .find(|c| &c.id == criterion)
                .ok_or_else(|| {
                    at(format!(
                        "scores: unknown criterion `{criterion}` (the suite's criteria: {})",
                        suite
                            .criteria()
                            .iter()
                            .map(|c| c.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?;
            if !scale_of(c.scale).admits(*score) {
                return Err(at(format!(
                    "scores.{criterion}: {score} is not on the criterion's scale ({})",
                    match c.scale {
                        Scale::ZeroToTen => "0 to 10",
                        Scale::PassFail => "0 or 10",
                    }
                )));
            }
        }
        let verdict = match item.verdict.as_deref() {
            Some("pass") => Some(true),
            Some("fail") => Some(false),
            Some(other) => {
                return Err(at(format!("verdict: `{other}` is not pass or fail")));
            }
            None => derived_verdict(scenario, suite, &item_scores),
        };
        if item_scores.is_empty() && verdict.is_none() {
            return Err(at("give scores, a verdict, or both".into()));
        }
        labels.push(Label {
            item: key,
            run,
            scores: item_scores,
            verdict,
        });
    }
    Ok(Labels {
        path: path.to_owned(),
        report_path: report.map(|(p, _)| p),
        labels,
    })
}

/// The 1-based line of the `run:` or `transcript:` of item `name`.
fn item_line(text: &str, name: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches("- ");
            ["run:", "\"run\"", "transcript:", "\"transcript\""]
                .iter()
                .any(|k| t.starts_with(k))
                && t.contains(name)
        })
        .map(|i| i + 1)
}

fn scale_of(scale: Scale) -> AgreementScale {
    match scale {
        Scale::ZeroToTen => AgreementScale::ZeroToTen,
        Scale::PassFail => AgreementScale::PassFail,
    }
}

/// The verdict the person's scores imply, when they scored every criterion.
fn derived_verdict(
    scenario: &Scenario,
    suite: &Suite,
    scores: &BTreeMap<String, f64>,
) -> Option<bool> {
    if suite.criteria().iter().any(|c| !scores.contains_key(&c.id)) {
        return None;
    }
    let overall: f64 = scores
        .iter()
        .map(|(id, s)| scenario.weights.get(id).copied().unwrap_or(0.0) * s)
        .sum();
    Some(overall >= suite.config.pass_threshold)
}

/// The judge's verdict on a judgement, as a scenario run would get it (the persona aside).
fn judge_passes(j: &Judgement, suite: &Suite) -> bool {
    j.overall >= suite.config.pass_threshold
}

/// Judges every labelled run again (`samples` times each) and measures the agreement.
pub async fn agree(
    suite: &Suite,
    labels: &Labels,
    model: &dyn ChatModel,
    samples: u32,
) -> AgreementReport {
    let samples = samples.max(1);
    let mut observations = Vec::new();
    let mut verdicts = Vec::new();
    let mut per_item = Vec::new();
    let mut errors = Vec::new();
    let mut flipped = 0usize;
    let mut judged = 0usize;
    let asks = labels.labels.iter().map(|label| async move {
        let scenario = suite.scenario(&label.run.scenario_id);
        let transcript = label.run.transcript.as_ref();
        let (Some(scenario), Some(transcript)) = (scenario, transcript) else {
            return (label, Err("the run has no transcript".to_owned()));
        };
        let calls = (0..samples).map(|k| {
            judge::judge(
                model,
                suite.criteria(),
                scenario,
                &suite.system_prompt,
                suite.fixture.as_ref().map(|(_, v)| v),
                transcript,
                &label.run.checks,
                Sample::new(k, samples),
            )
        });
        let out: Result<Vec<Judgement>, String> = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .map(|r| r.map(|(j, _)| j).map_err(|e| e.to_string()))
            .collect();
        (label, out)
    });
    let results = futures_util::future::join_all(asks).await;
    for (label, result) in results {
        let judgements = match result {
            Ok(j) => j,
            Err(e) => {
                errors.push(format!("{}: {e}", label.item));
                continue;
            }
        };
        judged += 1;
        let passes: Vec<bool> = judgements.iter().map(|j| judge_passes(j, suite)).collect();
        if passes.iter().any(|p| *p) && passes.iter().any(|p| !*p) {
            flipped += 1;
        }
        let n = judgements.len() as f64;
        let mean_of = |id: &str| {
            judgements
                .iter()
                .filter_map(|j| j.scores.iter().find(|s| s.id == id))
                .map(|s| s.score)
                .sum::<f64>()
                / n
        };
        let mut scores = BTreeMap::new();
        for (criterion, human) in &label.scores {
            let Some(c) = suite.criteria().iter().find(|c| &c.id == criterion) else {
                continue;
            };
            let judge = mean_of(criterion);
            scores.insert(criterion.clone(), (*human, judge));
            observations.push(Observation::new(
                &label.item,
                criterion,
                scale_of(c.scale),
                *human,
                judge,
            ));
        }
        let overall = judgements.iter().map(|j| j.overall).sum::<f64>() / n;
        let judge_verdict = overall >= suite.config.pass_threshold;
        if let Some(human) = label.verdict {
            verdicts.push(VerdictPair {
                item: label.item.clone(),
                human,
                judge: judge_verdict,
            });
        }
        per_item.push(ItemScores {
            item: label.item.clone(),
            scores,
            human_verdict: label.verdict,
            judge_verdict: Some(judge_verdict),
        });
    }
    AgreementReport {
        kind: "simulation".into(),
        judge_model: model.model().to_owned(),
        judge_version: judge::version(suite),
        labels: labels.path.display().to_string(),
        samples,
        items: labels.labels.len(),
        errors,
        flip_share: (samples > 1 && judged > 0).then(|| flipped as f64 / judged as f64),
        measurement: measure(&observations, &verdicts),
        per_item,
    }
}

/// A labels file to fill in for a saved report: every run with a transcript, with empty
/// scores for every criterion (people label blind: the judge's scores are not shown).
pub fn template(
    report_path: &Path,
    report: &SimReport,
    suite: &Suite,
    relative_to: &Path,
) -> String {
    let shown = pathdiff(report_path, relative_to);
    let mut out = format!(
        "# Labels for `assay judge agree`: score each run's transcript yourself, then compare the judge.\n\
         # The transcripts are in the report's transcripts/ folder. Leave out what you did not score.\n\
         judge: simulation\nreport: {shown}\nitems:\n"
    );
    for run in report.runs.iter().filter(|r| r.transcript.is_some()) {
        out.push_str(&format!(
            "  - run: {}#{}\n    scores:\n",
            run.scenario_id, run.repeat
        ));
        for c in suite.criteria() {
            let scale = match c.scale {
                Scale::ZeroToTen => "0-10",
                Scale::PassFail => "0 or 10",
            };
            out.push_str(&format!("      {}:    # {scale}\n", c.id));
        }
        out.push_str("    verdict:    # pass or fail (left empty: derived from the scores)\n");
    }
    out
}

/// `path` relative to `base` when it lies under it, else as given.
fn pathdiff(path: &Path, base: &Path) -> String {
    let (p, b) = (
        std::path::absolute(path).unwrap_or_else(|_| path.to_owned()),
        std::path::absolute(base).unwrap_or_else(|_| base.to_owned()),
    );
    p.strip_prefix(&b)
        .map_or_else(|_| path.display().to_string(), |r| r.display().to_string())
}
