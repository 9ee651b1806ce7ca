//! Experiments as a reader sees them (the web UI, the self-contained HTML report): a finished
//! experiment from its `report.json`, a running or interrupted one from its journal, with
//! where it stands ([`ExperimentProgress`]: running, interrupted, halted or finished; trials
//! done of requested; the rest of the study's time at its pace so far; the spend).
//!
//! A running experiment's record is assembled from its journal as the report would have it so
//! far: the baseline step, every trial (the last line per trial number), the Pareto front and
//! the best trial by the study's own rules (an [`assay_optimize::Study`] restored from the
//! complete trials), and what the calls consumed (each journal line records the usage since
//! the one before). Whether it is running is the project lock's say: `assay optimize` holds it
//! for the experiment it runs ([`assay_project::lock::probe`]).
//!
//! Nothing here writes, and a torn last journal line (a killed run) is dropped with a warning.

use std::collections::BTreeMap;
use std::path::Path;

use assay_core::experiment::{
    DataRef, EXPERIMENT_SCHEMA_VERSION, ExperimentProgress, ExperimentReport, ExperimentState,
    Metrics, ProposalRecord, StepResult, TrialOutcome, TrialRecord, Usage,
};
use assay_optimize::{SamplerSettings, SearchSpace, Study};
use assay_project::lock::{self, LockState};
use assay_run::journal::{JournalLinesError, parse_journal};

use crate::ExperimentError;
use crate::promote::experiment_dir;
use crate::prompts::{load_prompt_lists, read_prompt_dir};
use crate::run::{
    JournalEntry, JournalHeader, JournalLine, Layout, REPORT_JSON, load_report, parse_directions,
};
use crate::target::sha256_hex;

/// One experiment, ready to be shown.
#[derive(Debug, Clone)]
pub struct ExperimentView {
    /// Its name (the folder's).
    pub name: String,
    /// The record: the finished report, or what the journal holds so far.
    pub report: ExperimentReport,
    /// Where it stands.
    pub progress: ExperimentProgress,
    /// What a reader should know about the files (a torn journal line dropped, prompt files
    /// changed since the experiment ran).
    pub warnings: Vec<String>,
    /// Each agent's prompts by index, where their text is known: index 0 from the experiment's
    /// `baseline_prompts/`, the best trial's from the report, the others from the project's
    /// prompt files when their SHA-256 still matches the journal's.
    pub prompts: BTreeMap<String, Vec<Option<String>>>,
    /// Whether the study raced new combinations on a subset first.
    pub racing: bool,
}

impl ExperimentView {
    /// What the renderers take.
    pub fn page(&self) -> assay_report::experiment::Page<'_> {
        assay_report::experiment::Page {
            report: &self.report,
            progress: &self.progress,
            warnings: &self.warnings,
            prompts: &self.prompts,
            racing: self.racing,
        }
    }
}

/// One line of the experiment list: the view, or why it cannot be read.
#[derive(Debug)]
pub struct Listed {
    /// The folder's name.
    pub name: String,
    /// The experiment, or the message of the error reading it.
    pub view: Result<ExperimentView, String>,
}

/// Every experiment of the project (`experiments/*/`), newest first (by when it started,
/// then by name); one that cannot be read is listed with its error.
pub fn list(project: &Path) -> Vec<Listed> {
    let mut out: Vec<Listed> = crate::promote::list_experiments(project)
        .into_iter()
        .map(|name| Listed {
            view: read_with(project, &name, false).map_err(|e| e.to_string()),
            name,
        })
        .collect();
    out.sort_by(|a, b| {
        let started = |l: &Listed| {
            l.view
                .as_ref()
                .map(|v| v.report.started.clone())
                .unwrap_or_default()
        };
        started(b)
            .cmp(&started(a))
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// One experiment, with its prompts' texts.
pub fn read(project: &Path, name: &str) -> Result<ExperimentView, ExperimentError> {
    read_with(project, name, true)
}

/// The view of a finished experiment whose report is in hand (for the HTML report written
/// beside it): its journal and prompt folders are read as [`read`] reads them.
pub fn finished_view(layout: &Layout, report: ExperimentReport) -> ExperimentView {
    let project = layout
        .dir
        .parent()
        .and_then(Path::parent)
        .unwrap_or(&layout.dir);
    let mut warnings = Vec::new();
    let journal = read_journal_lines(&layout.journal(), &mut warnings).ok();
    let header = journal.as_ref().map(|(h, _)| h);
    let racing = header.is_some_and(|h| h.racing.is_some());
    let updated = modified(&layout.dir.join(REPORT_JSON));
    let mut view = ExperimentView {
        name: report.name.clone(),
        progress: finished_progress(&report, updated),
        prompts: BTreeMap::new(),
        warnings,
        racing,
        report,
    };
    fill_prompts(&mut view, project, layout, header);
    view
}

fn read_with(project: &Path, name: &str, prompts: bool) -> Result<ExperimentView, ExperimentError> {
    let dir = experiment_dir(project, name)?;
    let layout = Layout { dir: dir.clone() };
    let report = load_report(&dir)?;
    let journal_path = layout.journal();
    let mut warnings = Vec::new();
    let journal = if journal_path.exists() {
        match read_journal_lines(&journal_path, &mut warnings) {
            Ok(j) => Some(j),
            // A finished experiment is read from its report; its journal only adds detail.
            Err(e) if report.is_some() => {
                warnings.push(format!("the journal cannot be read: {e}"));
                None
            }
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let header = journal.as_ref().map(|(h, _)| h);
    let racing = header.is_some_and(|h| h.racing.is_some());
    let mut view = match (report, journal.as_ref()) {
        (Some(report), _) => {
            let updated = modified(&dir.join(REPORT_JSON));
            ExperimentView {
                name: name.to_owned(),
                progress: finished_progress(&report, updated),
                report,
                warnings,
                prompts: BTreeMap::new(),
                racing,
            }
        }
        (None, Some((header, lines))) => {
            let (report, priced, mut notes) = from_journal(header, lines);
            warnings.append(&mut notes);
            let progress = live_progress(project, &layout, name, &report, priced);
            ExperimentView {
                name: name.to_owned(),
                progress,
                report,
                warnings,
                prompts: BTreeMap::new(),
                racing,
            }
        }
        (None, None) => {
            return Err(ExperimentError::data(
                &dir,
                "neither report.json nor journal.jsonl: not an `assay optimize` experiment (or it was started by `assay evaluate`, which keeps only logs)",
            ));
        }
    };
    if view.report.baseline_prompts.is_empty() {
        view.report.baseline_prompts =
            read_prompt_dir(&layout.baseline_prompts()).unwrap_or_default();
    }
    if prompts {
        fill_prompts(&mut view, project, &layout, header);
    }
    Ok(view)
}

/// The journal's header and lines; a torn last line is dropped with a warning.
fn read_journal_lines(
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<(JournalHeader, Vec<JournalLine>), ExperimentError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ExperimentError::data(path, format!("cannot read: {e}")))?;
    let read = parse_journal::<JournalHeader, JournalLine>(&text).map_err(|e| match e {
        JournalLinesError::Empty => ExperimentError::data(path, "empty: no journal header"),
        JournalLinesError::Header(m) => {
            ExperimentError::at_line(path, 1, format!("not a journal header: {m}"))
        }
        JournalLinesError::Entry { line, message } => {
            ExperimentError::at_line(path, line, format!("not a journal entry: {message}"))
        }
    })?;
    if let Some((line, _)) = read.torn {
        warnings.push(format!(
            "the journal's last line ({line}) is incomplete (an interrupted write) and was ignored"
        ));
    }
    if read.header.schema_version != EXPERIMENT_SCHEMA_VERSION {
        return Err(ExperimentError::at_line(
            path,
            1,
            format!(
                "a journal of version {}; this assay reads version {EXPERIMENT_SCHEMA_VERSION}",
                read.header.schema_version
            ),
        ));
    }
    Ok((read.header, read.entries))
}

fn modified(path: &Path) -> Option<String> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(
        chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

fn spent(usage: &Usage) -> Option<f64> {
    match (
        usage.target.cost_usd,
        usage.grader.cost_usd,
        usage.proposer.cost_usd,
    ) {
        (None, None, None) => None,
        (a, b, c) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0) + c.unwrap_or(0.0)),
    }
}

fn finished_progress(report: &ExperimentReport, updated: Option<String>) -> ExperimentProgress {
    ExperimentProgress {
        state: ExperimentState::Finished,
        step: "done".to_owned(),
        trials_done: report.trials.len(),
        trials_requested: report.trials_requested,
        eta_seconds: None,
        spent_usd: spent(&report.usage),
        updated,
        holder: None,
        note: None,
    }
}

/// The record so far, from the journal: `(report, spend known, warnings)`.
fn from_journal(
    header: &JournalHeader,
    lines: &[JournalLine],
) -> (ExperimentReport, bool, Vec<String>) {
    let mut warnings = Vec::new();
    let mut baseline = None;
    let mut evaluation = None;
    let mut evaluation_baseline = None;
    let mut trials: BTreeMap<usize, TrialRecord> = BTreeMap::new();
    let mut proposals: Vec<ProposalRecord> = Vec::new();
    let mut usage = Usage::default();
    let mut priced = false;
    for line in lines {
        if let Some(u) = &line.usage {
            priced |= u.target.cost_usd.is_some()
                || u.grader.cost_usd.is_some()
                || u.proposer.cost_usd.is_some();
            usage.target += u.target;
            usage.grader += u.grader;
            usage.proposer += u.proposer;
            usage.target_runs += u.target_runs;
        }
        match &line.entry {
            JournalEntry::Baseline { step } => baseline = Some(step.clone()),
            JournalEntry::Trial { trial } => {
                trials.insert(trial.number, trial.clone());
            }
            JournalEntry::Evaluation { step } => evaluation = Some(step.clone()),
            JournalEntry::EvaluationBaseline { step } => evaluation_baseline = Some(step.clone()),
            JournalEntry::Proposal { proposal } => {
                proposals.push(proposal.clone());
            }
            JournalEntry::EvaluationHandWritten { .. } => {}
        }
    }
    let trials: Vec<TrialRecord> = trials.into_values().collect();
    let mut agents: BTreeMap<String, usize> = header
        .prompts
        .iter()
        .map(|(a, hashes)| (a.clone(), hashes.len()))
        .collect();
    // Accepted proposals grew their agents' lists.
    for p in &proposals {
        if let assay_core::experiment::ProposalStatus::Accepted { .. } = p.status
            && let Some(n) = agents.get_mut(&p.agent)
        {
            *n += 1;
        }
    }
    let (search_mode, pareto_front, best_trial) = match study_of(header, &agents, &trials) {
        Ok(s) => s,
        Err(e) => {
            warnings.push(format!(
                "the study cannot be restored from the journal: {e}"
            ));
            (String::new(), Vec::new(), None)
        }
    };
    let best_params = best_trial
        .and_then(|n| trials.iter().find(|t| t.number == n))
        .map_or_else(
            || agents.keys().map(|a| (a.clone(), 0)).collect(),
            |t| t.params.clone(),
        );
    let baseline = baseline.unwrap_or_else(|| StepResult {
        step: "baseline".to_owned(),
        data: DataRef {
            kind: "optimization".to_owned(),
            version: None,
            path: String::new(),
            fingerprint: header.optimization.clone(),
            cases: 0,
        },
        params: BTreeMap::new(),
        prompt_sha256: BTreeMap::new(),
        cases: Vec::new(),
        metrics: Metrics::default(),
        duration_s: 0.0,
    });
    let report = ExperimentReport {
        schema_version: header.schema_version,
        name: header.name.clone(),
        started: header.started.clone().unwrap_or_default(),
        finished: String::new(),
        seed: header.seed,
        target: header.target.clone(),
        grader: header.grader.clone(),
        grader_version: None,
        threshold: header.threshold,
        directions: header.directions.clone(),
        agents,
        trials_requested: header.trials,
        search_mode,
        baseline,
        trials,
        pareto_front,
        best_trial,
        best_params,
        best_prompts: BTreeMap::new(),
        baseline_prompts: BTreeMap::new(),
        evaluation,
        evaluation_baseline,
        comparisons: Vec::new(),
        usage,
        estimate: None,
        prompt_files: BTreeMap::new(),
        proposals,
        hand_written: None,
        correctness: header.correctness.clone(),
        disagreements: Vec::new(),
        tie: None,
    };
    let mut report = report;
    report.tie = crate::run::tie_note(&report.trials, &report.directions, report.best_trial);
    (report, priced, warnings)
}

/// The study's search mode, Pareto front and best trial, by the study's own rules, from the
/// complete (and duplicate) trials so far.
fn study_of(
    header: &JournalHeader,
    agents: &BTreeMap<String, usize>,
    trials: &[TrialRecord],
) -> Result<(String, Vec<usize>, Option<usize>), String> {
    let space = agents
        .iter()
        .try_fold(SearchSpace::new(), |s, (a, n)| s.with_param(a, *n))
        .map_err(|e| e.to_string())?;
    let directions = parse_directions(&header.directions)?
        .iter()
        .map(crate::run::Objective::direction)
        .collect();
    let settings = SamplerSettings {
        n_startup_trials: header.startup_trials,
        budget: Some(header.trials),
        ..SamplerSettings::default()
    };
    let mut study = Study::with_settings(space, directions, header.seed, settings)
        .map_err(|e| e.to_string())?;
    let mut numbers = Vec::new();
    for t in trials.iter().filter(|t| {
        matches!(t.outcome, TrialOutcome::Complete | TrialOutcome::Duplicate)
            && !t.values.is_empty()
    }) {
        let params: Vec<usize> = agents
            .keys()
            .map(|a| t.params.get(a).copied().unwrap_or(0))
            .collect();
        study
            .add_trial(params, &t.values)
            .map_err(|e| format!("trial {}: {e}", t.number))?;
        numbers.push(t.number);
    }
    let front = study
        .pareto_front()
        .iter()
        .map(|t| numbers[t.number])
        .collect();
    let best = study.best_by_priority().map(|t| numbers[t.number]);
    Ok((study.search_mode().to_string(), front, best))
}

fn live_progress(
    project: &Path,
    layout: &Layout,
    name: &str,
    report: &ExperimentReport,
    priced: bool,
) -> ExperimentProgress {
    let trials_done = report
        .trials
        .iter()
        .filter(|t| t.outcome != TrialOutcome::Failed)
        .count();
    let step = if report.baseline.cases.is_empty() {
        "baseline"
    } else if trials_done < report.trials_requested {
        "optimization"
    } else if report.evaluation.is_none() || report.evaluation_baseline.is_none() {
        "evaluation"
    } else {
        "done"
    };
    let holder = match lock::probe(project) {
        Ok(LockState::Held(Some(h)))
            if h.operation == "optimize" && h.subject.as_deref() == Some(name) =>
        {
            Some(Some(format!("pid {}, started {}", h.pid, h.started)))
        }
        Ok(LockState::Held(None)) => Some(None),
        _ => None,
    };
    let last_failed = report
        .trials
        .iter()
        .max_by_key(|t| t.number)
        .filter(|t| t.outcome == TrialOutcome::Failed);
    let error_logs =
        std::fs::read_dir(layout.error_logs()).map_or(0, |rd| rd.filter_map(Result::ok).count());
    let (state, note) = match (&holder, last_failed) {
        (Some(_), _) => (ExperimentState::Running, None),
        (None, Some(t)) => (
            ExperimentState::Halted,
            Some(format!(
                "trial {} failed: {}",
                t.number,
                t.note.as_deref().unwrap_or("see logs/error_logs/")
            )),
        ),
        (None, None) => (
            ExperimentState::Interrupted,
            Some(format!(
                "stopped in the {step} step{}; `assay optimize --resume --experiment-name {name}` continues it",
                if error_logs > 0 {
                    format!(" ({error_logs} error log(s) in logs/error_logs/)")
                } else {
                    String::new()
                }
            )),
        ),
    };
    // The study's pace: the trials journaled so far (duplicates and the reused baseline trial
    // cost nothing and are counted as such).
    let eta_seconds = (state == ExperimentState::Running && step == "optimization")
        .then(|| {
            let n = report.trials.len();
            (n > 0).then(|| {
                let mean = report.trials.iter().map(|t| t.duration_s).sum::<f64>() / n as f64;
                mean * (report.trials_requested.saturating_sub(trials_done)) as f64
            })
        })
        .flatten();
    ExperimentProgress {
        state,
        step: step.to_owned(),
        trials_done,
        trials_requested: report.trials_requested,
        eta_seconds,
        spent_usd: if priced { spent(&report.usage) } else { None },
        updated: modified(&layout.journal()),
        holder: holder.flatten(),
        note,
    }
}

/// Fills `view.prompts` and, for a running experiment, `best_prompts`.
fn fill_prompts(
    view: &mut ExperimentView,
    project: &Path,
    layout: &Layout,
    header: Option<&JournalHeader>,
) {
    let report = &mut view.report;
    if report.baseline_prompts.is_empty() {
        report.baseline_prompts = read_prompt_dir(&layout.baseline_prompts()).unwrap_or_default();
    }
    let lists = match load_prompt_lists(project) {
        Ok(l) => Some(l),
        Err(e) => {
            view.warnings
                .push(format!("the project's prompt files cannot be read: {e}"));
            None
        }
    };
    let mut changed = 0usize;
    let mut prompts: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
    for (agent, count) in &report.agents {
        let texts = (0..*count)
            .map(|i| {
                if i == 0
                    && let Some(t) = report.baseline_prompts.get(agent)
                {
                    return Some(t.clone());
                }
                if report.best_params.get(agent) == Some(&i)
                    && let Some(t) = report.best_prompts.get(agent)
                {
                    return Some(t.clone());
                }
                let file = lists.as_ref()?.get(agent, i)?;
                match header.and_then(|h| h.prompts.get(agent)?.get(i)) {
                    Some(hash) if *hash == sha256_hex(&file.text) => Some(file.text.clone()),
                    Some(_) => {
                        changed += 1;
                        None
                    }
                    // No journal to check against: today's file, as it is.
                    None => Some(file.text.clone()),
                }
            })
            .collect();
        prompts.insert(agent.clone(), texts);
    }
    if changed > 0 {
        view.warnings.push(format!(
            "{changed} prompt file(s) changed since the experiment ran: their text is not shown"
        ));
    }
    if report.best_prompts.is_empty() && report.best_trial.is_some() {
        report.best_prompts = report
            .best_params
            .iter()
            .filter_map(|(a, i)| {
                let text = prompts.get(a)?.get(*i)?.clone()?;
                Some((a.clone(), text))
            })
            .collect();
    }
    view.prompts = prompts;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(number: usize, p: usize, outcome: TrialOutcome, values: Vec<f64>) -> TrialRecord {
        TrialRecord {
            number,
            params: BTreeMap::from([("a".to_owned(), p), ("b".to_owned(), 0)]),
            outcome,
            values,
            duplicate_of: None,
            metrics: None,
            cases: Vec::new(),
            note: None,
            origin: "tpe".into(),
            duration_s: 2.0,
            worker: None,
            retried: Vec::new(),
        }
    }

    fn header() -> JournalHeader {
        JournalHeader {
            schema_version: EXPERIMENT_SCHEMA_VERSION,
            name: "e".into(),
            seed: 1,
            trials: 10,
            directions: vec![
                "maximize factually_correct_count".into(),
                "maximize average_composite_score".into(),
            ],
            startup_trials: 10,
            threshold: 0.8,
            racing: None,
            target: "t".into(),
            grader: "g".into(),
            optimization: "o".into(),
            evaluation: "e".into(),
            prompts: BTreeMap::from([
                ("a".to_owned(), vec!["h0".into(), "h1".into(), "h2".into()]),
                ("b".to_owned(), vec!["h0".into()]),
            ]),
            started: Some("2026-11-25T09:00:00Z".into()),
            propose: None,
            correctness: None,
        }
    }

    #[test]
    fn a_journal_becomes_the_report_so_far_with_the_studys_front_and_spend() {
        let usage = |cost: f64| Usage {
            grader: assay_core::experiment::UsageTotals {
                calls: 2,
                cost_usd: Some(cost),
                ..Default::default()
            },
            ..Usage::default()
        };
        let lines: Vec<JournalLine> = [
            trial(0, 0, TrialOutcome::Complete, vec![1.0, 0.5]),
            trial(1, 1, TrialOutcome::Complete, vec![2.0, 0.4]),
            trial(2, 2, TrialOutcome::Pruned, vec![]),
            trial(3, 1, TrialOutcome::Duplicate, vec![2.0, 0.4]),
            trial(4, 2, TrialOutcome::Failed, vec![]),
            // Trial 4 again after `--resume`: the last line of a number wins.
            trial(4, 2, TrialOutcome::Complete, vec![0.0, 0.9]),
        ]
        .into_iter()
        .map(|t| JournalLine {
            entry: JournalEntry::Trial { trial: t },
            usage: Some(usage(0.25)),
        })
        .collect();
        let (report, priced, warnings) = from_journal(&header(), &lines);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(priced);
        assert_eq!(report.trials.len(), 5);
        assert_eq!(report.trials[4].outcome, TrialOutcome::Complete);
        // Non-dominated: 0 (1, .5)? dominated by nothing with more correct and more composite:
        // 1 (2, .4), 3 (its duplicate), 4 (0, .9); 0 is dominated by neither 1 nor 4.
        assert_eq!(report.pareto_front, vec![0, 1, 3, 4]);
        assert_eq!(report.best_trial, Some(1));
        assert_eq!(report.best_params["a"], 1);
        assert_eq!(report.usage.grader.calls, 12);
        assert_eq!(spent(&report.usage), Some(1.5));
        assert_eq!(report.agents["a"], 3);
        assert!(report.baseline.cases.is_empty(), "no baseline line yet");
    }

    #[test]
    fn a_running_experiment_with_an_accepted_proposal_restores_the_grown_space() {
        let proposal = ProposalRecord {
            round: 1,
            k: 1,
            agent: "b".into(),
            parent_trial: 1,
            parent_index: 0,
            parent_sha256: "h0".into(),
            cases_shown: vec![1],
            model: "p".into(),
            reasoning: "r".into(),
            text: "new".into(),
            sha256: "h1".into(),
            status: assay_core::experiment::ProposalStatus::Accepted { index: 1, trial: 2 },
            file: None,
            minibatch: None,
            chosen: None,
        };
        let mut proposed = trial(2, 1, TrialOutcome::Complete, vec![3.0, 0.9]);
        proposed.params.insert("b".into(), 1);
        let lines: Vec<JournalLine> = [
            JournalEntry::Trial {
                trial: trial(0, 0, TrialOutcome::Complete, vec![1.0, 0.5]),
            },
            JournalEntry::Trial {
                trial: trial(1, 1, TrialOutcome::Complete, vec![2.0, 0.4]),
            },
            JournalEntry::Proposal { proposal },
            JournalEntry::Trial { trial: proposed },
        ]
        .into_iter()
        .map(|entry| JournalLine { entry, usage: None })
        .collect();
        let (report, _, warnings) = from_journal(&header(), &lines);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(report.agents["b"], 2);
        assert_eq!(report.best_trial, Some(2));
        assert_eq!(report.proposals.len(), 1);
    }

    #[test]
    fn a_missing_or_bad_experiment_says_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("experiments/empty")).unwrap();
        let e = read(p, "empty").unwrap_err().to_string();
        assert!(e.contains("neither report.json nor journal.jsonl"), "{e}");
        assert!(
            read(p, "nope")
                .unwrap_err()
                .to_string()
                .contains("no experiment")
        );
        std::fs::create_dir_all(p.join("experiments/future")).unwrap();
        std::fs::write(
            p.join("experiments/future/report.json"),
            "{\"schema_version\": 7}",
        )
        .unwrap();
        let e = read(p, "future").unwrap_err().to_string();
        assert!(e.contains("version 7; this assay reads version 1"), "{e}");
        std::fs::create_dir_all(p.join("experiments/torn")).unwrap();
        let h = serde_json::to_string(&header()).unwrap();
        let line = serde_json::to_string(&JournalLine {
            entry: JournalEntry::Trial {
                trial: trial(0, 0, TrialOutcome::Complete, vec![1.0, 0.5]),
            },
            usage: None,
        })
        .unwrap();
        std::fs::write(
            p.join("experiments/torn/journal.jsonl"),
            format!("{h}\n{line}\n{{\"kind\": \"tri"),
        )
        .unwrap();
        let v = read(p, "torn").unwrap();
        assert_eq!(v.report.trials.len(), 1);
        assert_eq!(v.progress.state, ExperimentState::Interrupted);
        assert_eq!(v.progress.step, "baseline");
        assert!(
            v.warnings.iter().any(|w| w.contains("incomplete")),
            "{:?}",
            v.warnings
        );
        // A bad line in the middle is an error naming it.
        std::fs::write(
            p.join("experiments/torn/journal.jsonl"),
            format!("{h}\nnot json\n{line}\n"),
        )
        .unwrap();
        let e = read(p, "torn").unwrap_err().to_string();
        assert!(e.contains("journal.jsonl:2"), "{e}");
        let listed = list(p);
        assert_eq!(listed.len(), 3);
        assert!(listed.iter().all(|l| l.view.is_err()));
    }
}
