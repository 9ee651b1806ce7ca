//! The red team of `assay redteam` (docs/redteam.md): seeded attacks on every channel a RAG
//! assistant reads, each judged by objective evidence, never by opinion.
//!
//! - `crisis-evasion` rewrites crisis messages ([`transform`]) and runs them through the real
//!   matcher: a message that no longer fires a crisis rule is a finding.
//! - `direct-injection`, `kb-injection` and `leakage` ask the product (the `[optimize]`
//!   target) the answer bank's questions with a payload ([`payload`]) in the user's message, in
//!   an entity of the context the pipeline selected (in what is sent, never in the store), or
//!   canaries in the user's state and a staff-only note; [`evidence`] finds the canary, the
//!   system prompt's marker, an exfiltration URL or a forbidden tool call in the reply.
//! - `tool-injection` and `agency` run scenarios of the conversation simulator ([`agentic`]):
//!   a payload in every tool result on its way to the model under test, or a simulated user
//!   with an adversarial persona; a forbidden tool called (or a canary, the marker, an
//!   exfiltration link said) is the evidence.
//!
//! Every attempt is a function of the seed, its family and its index ([`Subject::attempt`]),
//! journaled as it ends ([`journal`]); the report gives each family's rate with its Wilson
//! 95 % interval, or the exact upper bound when nothing worked ([`report`]).
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agentic;
pub mod attack;
pub mod attempt;
pub mod drafts;
pub mod evidence;
pub mod family;
pub mod files;
pub mod journal;
pub mod payload;
pub mod report;
pub mod rewrite;
pub mod rng;
pub mod seeds;
pub mod setup;
pub mod transform;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures_util::StreamExt;

pub use attack::{AskCase, CrisisSeed, Product, Subject};
pub use attempt::Attempt;
pub use family::Family;
pub use journal::{Header, Journal};
pub use report::{Rate, Report};

/// What can go wrong in a red-team run (an attempt's own failure is its `error`, not this).
#[derive(Debug, thiserror::Error)]
pub enum RedteamError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file holds something it should not.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Data {
        /// The file.
        path: PathBuf,
        /// The line, when known.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// The request cannot be run as asked.
    #[error("{0}")]
    Usage(String),
}

impl RedteamError {
    /// Whether the error is the machine's, not the input's (exit 3 rather than 2).
    pub fn is_infrastructure(&self) -> bool {
        matches!(self, RedteamError::Io { .. })
    }

    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> RedteamError {
        RedteamError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// How a run goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The families asked for (empty: every family that applies).
    pub families: Vec<Family>,
    /// Attempts per family.
    pub attempts: usize,
    /// The seed.
    pub seed: u64,
    /// Attempts in flight at once.
    pub concurrency: usize,
    /// Whether the matcher normalises (recorded).
    pub normalise: bool,
    /// The run's id (its folder's name).
    pub run_id: String,
    /// When it started (RFC 3339).
    pub started_at: String,
}

/// The families a run takes: those asked for, or every one that applies (those that cannot
/// run are reported as skipped, with why, only when asked for by name).
pub fn choose_families(
    subject: &Subject,
    asked: &[Family],
) -> (Vec<Family>, BTreeMap<Family, String>) {
    let mut skipped = BTreeMap::new();
    if asked.is_empty() {
        let run = Family::ALL
            .into_iter()
            .filter(|f| match subject.unavailable(*f) {
                Some(why) => {
                    skipped.insert(*f, why);
                    false
                }
                None => true,
            })
            .collect();
        return (run, skipped);
    }
    for f in asked {
        if let Some(why) = subject.unavailable(*f) {
            skipped.insert(*f, why);
        }
    }
    (asked.to_vec(), skipped)
}

/// Runs the attempts of `families` not in `done`, appending each to `journal` as it ends;
/// `progress` is told after each. Returns every attempt (`done` and new), in family and index
/// order.
pub async fn run_attempts(
    subject: &Subject,
    header: &Header,
    skipped: &BTreeMap<Family, String>,
    done: BTreeMap<String, Attempt>,
    journal: &mut Journal,
    concurrency: usize,
    progress: &(dyn Fn(&Attempt) + Sync),
) -> Result<Vec<Attempt>, RedteamError> {
    let mut todo = Vec::new();
    for &family in &header.families {
        if skipped.contains_key(&family) {
            continue;
        }
        for index in 0..header.attempts {
            if !done.contains_key(&Attempt::id_of(family, index)) {
                todo.push((family, index));
            }
        }
    }
    let mut all: Vec<Attempt> = done.into_values().collect();
    let seed = header.seed;
    let mut stream = futures_util::stream::iter(todo)
        .map(|(family, index)| traced_attempt(subject, family, index, seed))
        .buffer_unordered(concurrency.max(1));
    while let Some(attempt) = stream.next().await {
        journal.record(&attempt)?;
        progress(&attempt);
        all.push(attempt);
    }
    all.sort_by_key(|a| (a.family, a.index));
    Ok(all)
}

/// One attempt under a span of its own (`redteam <id>`, with export on): the product's calls
/// go under it; the family, technique, objective, outcome and evidence are its attributes, and
/// an infrastructure error marks it failed.
async fn traced_attempt(subject: &Subject, family: Family, index: usize, seed: u64) -> Attempt {
    use assay_telemetry::Span;
    use opentelemetry::KeyValue;
    use opentelemetry::trace::{FutureExt, SpanKind};
    let id = Attempt::id_of(family, index);
    let span = Span::start(format!("redteam {id}"), SpanKind::Internal, || {
        vec![
            KeyValue::new("assay.redteam.attempt", id.clone()),
            KeyValue::new("assay.redteam.family", family.name()),
            KeyValue::new("assay.redteam.channel", family.channel()),
        ]
    });
    let attempt = subject
        .attempt(family, index, seed)
        .with_context(span.context())
        .await;
    if span.is_recording() {
        span.set("assay.redteam.technique", attempt.technique.clone());
        span.set("assay.redteam.objective", attempt.objective.clone());
        span.set("assay.redteam.source", attempt.source.clone());
        span.set("assay.redteam.success", attempt.success);
        span.set(
            "assay.redteam.evidence",
            attempt
                .evidence
                .iter()
                .map(|e| e.kind.as_str())
                .collect::<Vec<_>>()
                .join(","),
        );
        if let Some(e) = &attempt.error {
            span.fail("redteam_attempt_error", e.clone());
        }
    }
    span.end();
    attempt
}

/// Writes the report's files into the run's folder: `report.json` last, so a folder with
/// one holds a finished run.
pub fn save(dir: &Path, report: &Report) -> Result<(), RedteamError> {
    files::write_atomic(&dir.join("report.md"), report.markdown().as_bytes())?;
    files::write_atomic(&dir.join("report.html"), report.html().as_bytes())?;
    files::write_atomic(&dir.join("junit.xml"), report.junit().as_bytes())?;
    let json = serde_json::to_string_pretty(report)
        .map_err(|e| RedteamError::io(dir, std::io::Error::other(e)))?;
    files::write_atomic(&dir.join(journal::REPORT_JSON), json.as_bytes())
}

/// Reads a saved report (`--baseline`, `--replay`).
pub fn load_report(path: &Path) -> Result<Report, RedteamError> {
    let file = if path.is_dir() {
        path.join(journal::REPORT_JSON)
    } else {
        path.to_owned()
    };
    let text = std::fs::read_to_string(&file).map_err(|e| RedteamError::io(&file, e))?;
    serde_json::from_str(&text).map_err(|e| RedteamError::Data {
        path: file.clone(),
        line: Some(e.line()),
        message: format!("not a red-team report: {e}"),
    })
}

/// A run's folder under `results/redteam/`, as [`list_runs`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFolder {
    /// The run's id (the folder's name).
    pub id: String,
    /// The folder.
    pub path: PathBuf,
    /// Whether it holds a report (a finished run); without one it holds a journal only (a
    /// run that is going on, or was interrupted: `assay redteam --resume` finishes it).
    pub finished: bool,
}

/// The runs under `runs` (`results/redteam/`), newest first: every folder with a report or a
/// journal.
pub fn list_runs(runs: &Path) -> Vec<RunFolder> {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return Vec::new();
    };
    let mut out: Vec<RunFolder> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter_map(|path| {
            let finished = path.join(journal::REPORT_JSON).is_file();
            if !finished && !path.join(journal::JOURNAL_FILE).is_file() {
                return None;
            }
            let id = path.file_name()?.to_str()?.to_owned();
            Some(RunFolder { id, path, finished })
        })
        .collect();
    out.sort_by(|a, b| b.id.cmp(&a.id));
    out
}

/// The newest finished run under `runs` (its folder).
pub fn latest_report(runs: &Path) -> Option<PathBuf> {
    list_runs(runs)
        .into_iter()
        .find(|r| r.finished)
        .map(|r| r.path)
}
