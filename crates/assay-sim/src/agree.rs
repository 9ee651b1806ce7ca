//! The simulator's judge measured against people (`assay judge agree` with `judge:
//! simulation`): a labels file names a saved simulation report and, for some of its runs, the
//! scores people gave each criterion (and, optionally, their verdict). The judge scores those
//! same transcripts again, and [`assay_core::agreement`] measures how far they agree.
//!
//! The labels file (YAML or JSON; `docs/judges.md`):
//!
//! ```yaml
//! judge: simulation
//! report: reports/report_20261126_120449.json   # beside this file, else in the project folder
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
//! weights, the suite's pass threshold). An item with no score and no verdict is unscored:
//! skipped and counted ([`Labels::unscored`]).
//!
//! Paths (`report`, `transcript`) are relative: looked up beside the labels file first, then in
//! the project folder, and must stay inside the project. [`template`] writes the report's path
//! so that it resolves: relative to the labels file's folder when it knows where the file goes,
//! else relative to the project folder.

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};

use assay_core::agreement::{
    AgreementReport, Criterion, JudgeSample, JudgedItem, ReportHead, Scale as AgreementScale,
    report as measure_report,
};
use assay_core::simulation::{Judgement, Scale, ScenarioRun, SimReport, Transcript};
use assay_kb::datafile::{self, DataError};
use assay_providers::ChatModel;
use serde::Deserialize;

use crate::judge::{self, Sample};
use crate::suite::{Scenario, Suite, line_of};

/// A labels file for the simulator's judge: transcripts people scored, which `assay judge
/// agree` has the judge score again and compares.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct LabelsFile {
    /// The JSON Schema the file follows, for editors that complete and check it (`assay
    /// schema`); assay itself does not read it.
    #[serde(rename = "$schema", default, skip_serializing)]
    #[allow(dead_code)]
    schema: Option<String>,
    /// Which judge the labels are for: `simulation` (the simulator's judge).
    judge: String,
    /// The simulation report whose runs the items name (`items[].run`): relative to this
    /// file's folder, else to the project's folder.
    #[serde(default)]
    report: Option<String>,
    /// The labelled runs.
    items: Vec<LabelConfig>,
}

/// One run a person scored.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct LabelConfig {
    /// A run of the report: `scenario#repeat`.
    #[serde(default)]
    run: Option<String>,
    /// Or a transcript file (`sim/reports/transcripts/<stamp>/<scenario>-<repeat>.json`, or
    /// one written by hand): relative to this file's folder, else to the project's folder.
    #[serde(default)]
    transcript: Option<String>,
    /// The person's score of each criterion, on the criterion's scale. A criterion left empty
    /// (`~`) was not scored; an item with no score and no verdict is skipped and counted.
    #[serde(default)]
    scores: Option<BTreeMap<String, Option<f64>>>,
    /// The person's overall verdict: `pass` or `fail`.
    #[serde(default)]
    verdict: Option<String>,
    /// Free text for the people reading the file; assay does not read it.
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

/// The JSON Schema of a labels file for the simulator's judge (`assay schema judge-labels`).
pub fn labels_schema() -> schemars::Schema {
    let mut schema = schemars::schema_for!(LabelsFile);
    assay_core::schema::set_const(&mut schema, "judge", "simulation");
    schema
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
    /// The labelled runs, in file order (the scored ones).
    pub labels: Vec<Label>,
    /// Items left unscored (no score, no verdict): skipped.
    pub unscored: usize,
}

/// What the labels' paths are relative to, in messages.
const FOLDER: &str = "the project's folder";

/// Resolves a path of a labels file: beside the labels file (in `base`, its folder) first,
/// then in the project folder; either way it must stay inside the project. When it is in
/// neither, the error says both places looked.
fn resolve(project: &Path, base: &Path, name: &str) -> Result<PathBuf, String> {
    // Real folders: a project given as `../..` holds `..` that would not compare as inside.
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let (project, base) = (&real(project), &real(base));
    let beside = base.join(name);
    let in_project = project.join(name);
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    if exists(&beside) || Path::new(name).is_absolute() || !lexically_inside(project, base, name) {
        return datafile::file_inside(project, base, name, FOLDER);
    }
    if exists(&in_project) {
        return datafile::file_inside(project, project, name, FOLDER);
    }
    Err(format!(
        "`{name}` not found: looked beside the labels file ({}) and in the project folder ({})",
        beside.display(),
        in_project.display()
    ))
}

/// Whether `name`, read from `base`, stays inside `root` before any link is followed.
fn lexically_inside(root: &Path, base: &Path, name: &str) -> bool {
    let (Ok(root), Ok(mut at)) = (std::path::absolute(root), std::path::absolute(base)) else {
        return false;
    };
    for c in Path::new(name).components() {
        match c {
            Component::Normal(part) => at.push(part),
            Component::ParentDir => {
                at.pop();
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    at.starts_with(&root) && at != root
}

/// Reads `judge:` of a labels file (`simulation`, `rubric` or `claims`) without reading the rest.
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
            "judge: missing (say which judge the labels are for: `simulation`, `rubric` or `claims`)",
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
            let report_path = resolve(&suite.project, base, report)
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
    let total = file.items.len();
    let mut seen = HashSet::new();
    let mut labels = Vec::new();
    let mut unscored = 0usize;
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
        let given = item.scores.clone().unwrap_or_default();
        let item_scores: BTreeMap<String, f64> = given
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
                let real = resolve(&suite.project, base, file)
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
        for (criterion, score) in &given {
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
            let Some(score) = score else {
                continue;
            };
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
            unscored += 1;
            continue;
        }
        labels.push(Label {
            item: key,
            run,
            scores: item_scores,
            verdict,
        });
    }
    if labels.is_empty() {
        return Err(err(
            "items",
            format!(
                "items: none of the {total} item(s) is scored; give the runs you judged their \
                 scores or a verdict (unscored items are skipped)"
            ),
        ));
    }
    Ok(Labels {
        path: path.to_owned(),
        report_path: report.map(|(p, _)| p),
        labels,
        unscored,
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
    let mut judged = Vec::new();
    let mut errors = Vec::new();
    for (label, result) in futures_util::future::join_all(asks).await {
        match result {
            Ok(judgements) => judged.push(JudgedItem {
                item: label.item.clone(),
                human: label.scores.clone(),
                human_verdict: label.verdict,
                samples: judgements
                    .iter()
                    .map(|j| JudgeSample {
                        scores: j.scores.iter().map(|s| (s.id.clone(), s.score)).collect(),
                        passes: judge_passes(j, suite),
                    })
                    .collect(),
            }),
            Err(e) => errors.push(format!("{}: {e}", label.item)),
        }
    }
    let criteria: Vec<Criterion> = suite
        .criteria()
        .iter()
        .map(|c| Criterion::new(&c.id, scale_of(c.scale)))
        .collect();
    measure_report(
        ReportHead {
            kind: "simulation".into(),
            judge_model: model.model().to_owned(),
            judge_version: judge::version(suite),
            labels: labels.path.display().to_string(),
            samples,
            unscored: labels.unscored,
        },
        &criteria,
        &judged,
        errors,
    )
}

/// A labels file to fill in for a saved report: every run with a transcript, with empty
/// scores for every criterion (people label blind: the judge's scores are not shown).
///
/// `report_path` is the report as given (`.json`, or the `.md` beside it); `latest.json` is
/// replaced by the stamped report it copies, which later simulations leave alone. `labels_at`
/// is where the labels file will be written, when known: the report's path is written relative
/// to its folder; without it (the text goes to stdout, wherever that lands), relative to the
/// project folder. Loading the labels finds it either way. A report outside the project is an error:
/// labels can only name reports inside it.
pub fn template(
    suite: &Suite,
    report_path: &Path,
    report: &SimReport,
    labels_at: Option<&Path>,
) -> Result<String, DataError> {
    let json = crate::report::json_path(report_path);
    let real = |p: &Path| std::fs::canonicalize(p).map_err(|e| DataError::new(p, e.to_string()));
    let mut report_real = real(&json)?;
    let mut note = String::new();
    if json.file_name().is_some_and(|n| n == "latest.json")
        && let Some(stamped) = stamped_twin(&report_real)
    {
        note = format!(
            "# Given latest.json, which the next simulation replaces: the report below is {},\n\
             # the stamped report it copies.\n",
            stamped.file_name().unwrap_or_default().to_string_lossy()
        );
        report_real = stamped;
    }
    let project = real(&suite.project)?;
    if !report_real.starts_with(&project) {
        return Err(DataError::new(
            &json,
            format!(
                "the report lies outside the project ({}); labels can only name a report inside \
                 it: copy the report (and its transcripts/ folder) under sim/reports/",
                project.display()
            ),
        ));
    }
    let from = match labels_at {
        Some(file) => real_dir(
            file.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        ),
        None => project.clone(),
    };
    let relative_to = if labels_at.is_some() {
        "this file's folder"
    } else {
        "the project folder"
    };
    let transcripts = report_real
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("report_"))
        .and_then(|n| n.strip_suffix(".json"))
        .and_then(|stamp| {
            let dir = report_real.parent()?.join("transcripts").join(stamp);
            dir.is_dir().then_some(dir)
        });
    let transcripts = transcripts.map_or_else(
        || "the report's transcripts/ folder".to_owned(),
        |dir| format!("{}/", relative(&dir, &from).display()),
    );
    let shown = yaml_scalar(&relative(&report_real, &from).display().to_string());
    let mut out = format!(
        "# Labels for `assay judge agree`: score each run's transcript yourself, then measure the\n\
         # judge with `assay judge agree <this file>`. Score the runs you judged and leave the\n\
         # rest empty: unscored runs are skipped (and counted).\n\
         # The transcripts, one file per run (<scenario>-<repeat>.json):\n\
         #   {transcripts}\n\
         # The report's path below is relative to {relative_to}; `agree` looks beside this\n\
         # file first, then in the project folder.\n{note}\
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
    Ok(out)
}

/// The stamped report (`report_<stamp>.json`, in the same folder) that `latest` copies.
fn stamped_twin(latest: &Path) -> Option<PathBuf> {
    let bytes = std::fs::read(latest).ok()?;
    let mut found: Vec<PathBuf> = std::fs::read_dir(latest.parent()?)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("report_"))
        })
        .filter(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.len() == bytes.len() as u64)
                && std::fs::read(p).is_ok_and(|b| b == bytes)
        })
        .collect();
    found.sort();
    found.pop()
}

/// A folder's real path; a part that does not exist yet is kept as written.
fn real_dir(dir: &Path) -> PathBuf {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let mut rest = Vec::new();
    let mut at = abs.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return abs,
        }
    }
}

/// `path` relative to the folder `from` (both absolute), climbing with `..` as needed.
fn relative(path: &Path, from: &Path) -> PathBuf {
    let p: Vec<Component> = path.components().collect();
    let f: Vec<Component> = from.components().collect();
    let common = p.iter().zip(&f).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &p[common..] {
        out.push(c);
    }
    out
}

/// A path as a YAML value: plain when it can be, else double-quoted.
fn yaml_scalar(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c))
    {
        text.to_owned()
    } else {
        serde_json::Value::String(text.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_out_of_the_labels_folder() {
        let check = |path: &str, from: &str, expect: &str| {
            assert_eq!(
                relative(Path::new(path), Path::new(from)),
                PathBuf::from(expect),
                "{path} from {from}"
            );
        };
        check("/p/sim/reports/r.json", "/p/sim", "reports/r.json");
        check(
            "/p/sim/reports/r.json",
            "/p/sim/labels",
            "../reports/r.json",
        );
        check("/p/sim/reports/r.json", "/p", "sim/reports/r.json");
        check(
            "/p/sim/reports/r.json",
            "/q/x",
            "../../p/sim/reports/r.json",
        );
        assert_eq!(yaml_scalar("sim/reports/r_1.json"), "sim/reports/r_1.json");
        assert_eq!(
            yaml_scalar("my reports/r #1.json"),
            "\"my reports/r #1.json\""
        );
    }

    #[test]
    fn a_path_is_found_beside_the_labels_then_in_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path();
        std::fs::create_dir_all(project.join("sim/labels")).unwrap();
        std::fs::create_dir_all(project.join("sim/reports")).unwrap();
        std::fs::write(project.join("sim/reports/r.json"), "{}").unwrap();
        let base = project.join("sim/labels");
        let found = resolve(project, &base, "../reports/r.json").unwrap();
        assert!(found.ends_with("sim/reports/r.json"));
        let found = resolve(project, &base, "sim/reports/r.json").unwrap();
        assert!(found.ends_with("sim/reports/r.json"), "from the project");
        let e = resolve(project, &base, "reports/r.json").unwrap_err();
        assert!(
            e.contains("looked beside the labels file")
                && e.contains("sim/labels/reports/r.json")
                && e.contains("in the project folder"),
            "{e}"
        );
        let e = resolve(project, &base, "../../../etc/passwd").unwrap_err();
        assert!(e.contains("leaves the project's folder"), "{e}");
    }
}
