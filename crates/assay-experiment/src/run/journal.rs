//! The experiment's journal (`experiments/<name>/journal.jsonl`): its header, one line per
//! step or trial, reading it back and opening it for a run or a resume.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use assay_core::experiment::{
    ProposalRecord, StepResult, TrialOutcome, TrialRecord, Usage, UsageTotals,
};
use assay_run::journal::JournalLinesError;
use serde::{Deserialize, Serialize};

use super::{Layout, ProposeOptions, RunError};

/// The journal's first line: what the experiment ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalHeader {
    /// [`EXPERIMENT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The experiment.
    pub name: String,
    /// The seed.
    pub seed: u64,
    /// Trials asked for.
    pub trials: usize,
    /// The objectives.
    pub directions: Vec<String>,
    /// Random start-up trials.
    pub startup_trials: usize,
    /// The rubric threshold.
    pub threshold: f64,
    /// Racing fraction, if racing.
    pub racing: Option<f64>,
    /// The target in words.
    pub target: String,
    /// The grader's `vendor/model`.
    pub grader: String,
    /// The optimization cases' fingerprint.
    pub optimization: String,
    /// The evaluation cases' fingerprint.
    pub evaluation: String,
    /// sha256 of every prompt, per agent, in list order.
    pub prompts: BTreeMap<String, Vec<String>>,
    /// When the experiment started (RFC 3339; absent in journals written before this field
    /// existed). Not compared on `--resume`: the first start is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// The proposal rounds, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propose: Option<ProposeOptions>,
    /// The correctness rule and declared units, in words (absent in journals written before
    /// rules existed: those counted by the spec's substring rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correctness: Option<String>,
}

/// A journal line after the header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JournalEntry {
    /// Step 1 finished.
    Baseline {
        /// Its result.
        step: StepResult,
    },
    /// A trial finished (or failed, or was pruned or a duplicate).
    Trial {
        /// Its record.
        trial: TrialRecord,
    },
    /// Step 3 finished for the best prompts.
    Evaluation {
        /// Its result.
        step: StepResult,
    },
    /// Step 3's baseline comparison run finished.
    EvaluationBaseline {
        /// Its result.
        step: StepResult,
    },
    /// A proposal was made and judged (before the trial that scores it, if accepted): the
    /// search space grows here on `--resume` too.
    Proposal {
        /// Its record.
        proposal: ProposalRecord,
    },
    /// Step 3 for the best hand-written combination (when the best one has a proposal).
    EvaluationHandWritten {
        /// Its result.
        step: StepResult,
    },
}

/// A journal line after the header as written: the entry and what the calls consumed since
/// the line before (`usage`, absent in journals written before it was recorded), so that a
/// reader of a running or interrupted experiment can add up its spend across `--resume`s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalLine {
    /// The entry.
    #[serde(flatten)]
    pub entry: JournalEntry,
    /// Calls, tokens and cost since the previous line of this process (or its start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `now - before`, role by role (a cost known on either side is known).
pub(super) fn usage_since(now: &Usage, before: &Usage) -> Usage {
    let minus = |a: &UsageTotals, b: &UsageTotals| UsageTotals {
        calls: a.calls.saturating_sub(b.calls),
        cache_hits: a.cache_hits.saturating_sub(b.cache_hits),
        requests: a.requests.saturating_sub(b.requests),
        input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
        output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
        cost_usd: match (a.cost_usd, b.cost_usd) {
            (Some(x), y) => Some((x - y.unwrap_or(0.0)).max(0.0)),
            (None, _) => None,
        },
    };
    Usage {
        target: minus(&now.target, &before.target),
        grader: minus(&now.grader, &before.grader),
        proposer: minus(&now.proposer, &before.proposer),
        target_runs: now.target_runs.saturating_sub(before.target_runs),
        // Per-model summaries of the whole run, not differences: the report carries them.
        rate_limits: Vec::new(),
    }
}

pub(super) struct Journal<'a> {
    pub(super) file: std::fs::File,
    pub(super) path: PathBuf,
    pub(super) usage: &'a (dyn Fn() -> Usage + Sync),
    pub(super) last: Usage,
}

impl Journal<'_> {
    pub(super) fn append(&mut self, entry: &JournalEntry) -> Result<(), RunError> {
        let now = (self.usage)();
        let line = JournalLine {
            entry: entry.clone(),
            usage: Some(usage_since(&now, &self.last)),
        };
        self.last = now;
        let mut line = serde_json::to_vec(&line).map_err(|e| RunError::io(&self.path, &e))?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| RunError::io(&self.path, &e))
    }
}

/// What a journal held.
#[derive(Debug, Default)]
pub(super) struct Replay {
    pub(super) started: Option<String>,
    pub(super) baseline: Option<StepResult>,
    pub(super) trials: BTreeMap<usize, TrialRecord>,
    pub(super) evaluation: Option<StepResult>,
    pub(super) evaluation_baseline: Option<StepResult>,
    pub(super) evaluation_hand_written: Option<StepResult>,
    pub(super) proposals: BTreeMap<(usize, usize), ProposalRecord>,
}

/// Reads a journal: its header and entries (a torn last line, from a killed run, is dropped).
pub fn read_journal(path: &Path) -> Result<(JournalHeader, Vec<JournalEntry>), RunError> {
    let text = std::fs::read_to_string(path).map_err(|e| RunError::io(path, &e))?;
    let read = assay_run::journal::parse_journal(&text).map_err(|e| {
        RunError::Usage(match e {
            JournalLinesError::Empty | JournalLinesError::Header(_) => {
                format!("{}: line 1: not a journal header", path.display())
            }
            JournalLinesError::Entry { line, message } => {
                format!("{}: line {line}: {message}", path.display())
            }
        })
    })?;
    if read.torn.is_some() {
        tracing::warn!(journal = %path.display(), "dropping a torn last line");
    }
    Ok((read.header, read.entries))
}

pub(super) fn header_differences(a: &JournalHeader, b: &JournalHeader) -> Vec<&'static str> {
    let mut d = Vec::new();
    let checks: [(&str, bool); 14] = [
        ("schema_version", a.schema_version == b.schema_version),
        ("seed", a.seed == b.seed),
        ("trials", a.trials == b.trials),
        ("directions", a.directions == b.directions),
        ("startup_trials", a.startup_trials == b.startup_trials),
        ("threshold", a.threshold == b.threshold),
        ("racing", a.racing == b.racing),
        ("target", a.target == b.target),
        ("grader", a.grader == b.grader),
        ("optimization cases", a.optimization == b.optimization),
        ("evaluation cases", a.evaluation == b.evaluation),
        ("prompts", a.prompts == b.prompts),
        ("proposal settings", a.propose == b.propose),
        ("correctness rule", a.correctness == b.correctness),
    ];
    for (name, same) in checks {
        if !same {
            d.push(name);
        }
    }
    d
}

/// An experiment name already used, without `--resume`.
pub(crate) fn name_taken(name: &str, journal: &Path) -> RunError {
    RunError::Usage(format!(
        "experiment `{name}` already exists ({}): pass --resume to continue it, or choose another --experiment-name",
        journal.display()
    ))
}

pub(super) fn open_journal<'a>(
    layout: &Layout,
    header: &JournalHeader,
    resume: bool,
    usage: &'a (dyn Fn() -> Usage + Sync),
) -> Result<(Journal<'a>, Replay), RunError> {
    let path = layout.journal();
    let mut replay = Replay::default();
    if path.exists() {
        if !resume {
            return Err(name_taken(&header.name, &path));
        }
        let (old, entries) = read_journal(&path)?;
        replay.started.clone_from(&old.started);
        let diffs = header_differences(&old, header);
        if !diffs.is_empty() {
            return Err(RunError::Usage(format!(
                "{}: cannot resume: the {} differ from the journal's; start a new experiment",
                path.display(),
                diffs.join(", ")
            )));
        }
        for e in entries {
            match e {
                JournalEntry::Baseline { step } => replay.baseline = Some(step),
                JournalEntry::Trial { trial } => {
                    if trial.outcome != TrialOutcome::Failed {
                        replay.trials.insert(trial.number, trial);
                    }
                }
                JournalEntry::Evaluation { step } => replay.evaluation = Some(step),
                JournalEntry::EvaluationBaseline { step } => {
                    replay.evaluation_baseline = Some(step);
                }
                JournalEntry::EvaluationHandWritten { step } => {
                    replay.evaluation_hand_written = Some(step);
                }
                JournalEntry::Proposal { proposal } => {
                    replay
                        .proposals
                        .insert((proposal.round, proposal.k), proposal);
                }
            }
        }
        // Rewrite without a torn tail so appends start on a fresh line.
        let text = std::fs::read_to_string(&path).map_err(|e| RunError::io(&path, &e))?;
        if !text.ends_with('\n') {
            let keep = text.rfind('\n').map_or(0, |i| i + 1);
            assay_project::results::write_replace(&path, &text.as_bytes()[..keep])
                .map_err(|e| RunError::io(&path, &e))?;
        }
    } else {
        let mut line = serde_json::to_vec(header).map_err(|e| RunError::io(&path, &e))?;
        line.push(b'\n');
        assay_project::results::write_new(&path, &line).map_err(|e| RunError::io(&path, &e))?;
    }
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(|e| RunError::io(&path, &e))?;
    let last = usage();
    Ok((
        Journal {
            file,
            path,
            usage,
            last,
        },
        replay,
    ))
}
