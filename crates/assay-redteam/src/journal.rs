//! The journal of a red-team run: `results/redteam/<run>/journal.jsonl`, one header line and
//! one line per finished attempt, appended and flushed as each attempt ends. A killed run
//! resumes from it (`--resume`) without repeating a finished attempt; a last line cut short by
//! the kill is ignored.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::RedteamError;
use crate::attempt::Attempt;
use crate::family::Family;

/// What a run is: a resumed run must match it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The run's id (its folder's name).
    pub run_id: String,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// The seed.
    pub seed: u64,
    /// The families, in order.
    pub families: Vec<Family>,
    /// Attempts per family.
    pub attempts: usize,
    /// The payload library's version.
    pub library_version: String,
    /// The product, in words (or `none`).
    pub target: String,
    /// Whether the matcher normalises (`[patterns] normalise`).
    pub normalise: bool,
    /// The model that also rewrote crisis messages, if one did (`--attacker-model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attacker_model: Option<String>,
    /// Questions the attacker model drafted per SITUATION entity (`--questions`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub questions: usize,
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    Header(Header),
    Attempt(Box<Attempt>),
}

impl Header {
    /// The header of a new run under `runs`, its id the time now (UTC, to the second; `-2`,
    /// `-3`, … when a run of that second exists), and the folder it is kept in.
    #[allow(
        clippy::too_many_arguments,
        reason = "one per option that a resumed run must match"
    )]
    pub fn new_run(
        runs: &Path,
        seed: u64,
        families: Vec<Family>,
        attempts: usize,
        target: String,
        normalise: bool,
        attacker_model: Option<String>,
        questions: usize,
    ) -> (PathBuf, Header) {
        let now = chrono::Utc::now();
        let stamp = now.format("%Y-%m-%d-%H%M%S");
        let mut run_id = format!("redteam-{stamp}");
        let mut n = 2;
        while runs.join(&run_id).exists() {
            run_id = format!("redteam-{stamp}-{n}");
            n += 1;
        }
        let header = Header {
            run_id: run_id.clone(),
            started_at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            seed,
            families,
            attempts,
            library_version: crate::payload::LIBRARY_VERSION.into(),
            target,
            normalise,
            attacker_model,
            questions,
        };
        (runs.join(run_id), header)
    }
}

/// An unfinished run: its folder, header and finished attempts by id.
pub type Unfinished = (PathBuf, Header, BTreeMap<String, Attempt>);

/// An open journal.
pub struct Journal {
    path: PathBuf,
    file: std::fs::File,
}

/// The folder of red-team runs in a results folder.
pub fn runs_dir(results: &Path) -> PathBuf {
    results.join("redteam")
}

/// The report of a finished run, in its folder.
pub const REPORT_JSON: &str = "report.json";
/// The journal's file name.
pub const JOURNAL_FILE: &str = "journal.jsonl";

impl Journal {
    /// Starts the journal of a new run in `dir` (created).
    pub fn start(dir: &Path, header: &Header) -> Result<Journal, RedteamError> {
        std::fs::create_dir_all(dir).map_err(|e| RedteamError::io(dir, e))?;
        let path = dir.join(JOURNAL_FILE);
        let mut file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| RedteamError::io(&path, e))?;
        let line = serde_json::to_string(&Line::Header(header.clone()))
            .map_err(|e| RedteamError::io(&path, std::io::Error::other(e)))?;
        writeln!(file, "{line}").map_err(|e| RedteamError::io(&path, e))?;
        file.sync_data().map_err(|e| RedteamError::io(&path, e))?;
        Ok(Journal { path, file })
    }

    /// The newest unfinished run under `runs` (no report yet): its folder, header and finished
    /// attempts by id. `None` when every run finished.
    pub fn unfinished(runs: &Path) -> Result<Option<Unfinished>, RedteamError> {
        let Ok(entries) = std::fs::read_dir(runs) else {
            return Ok(None);
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join(JOURNAL_FILE).is_file() && !p.join(REPORT_JSON).exists())
            .collect();
        dirs.sort();
        let Some(dir) = dirs.pop() else {
            return Ok(None);
        };
        let (header, done) = Journal::read(&dir.join(JOURNAL_FILE))?;
        Ok(Some((dir, header, done)))
    }

    /// The header and finished attempts of the journal at `path`.
    pub fn read(path: &Path) -> Result<(Header, BTreeMap<String, Attempt>), RedteamError> {
        let text = std::fs::read_to_string(path).map_err(|e| RedteamError::io(path, e))?;
        let mut header = None;
        let mut done = BTreeMap::new();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            match serde_json::from_str::<Line>(line) {
                Ok(Line::Header(h)) => header = Some(h),
                Ok(Line::Attempt(a)) => {
                    done.insert(a.id.clone(), *a);
                }
                // The last line may have been cut short by a kill.
                Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => {}
                Err(e) => {
                    return Err(RedteamError::Data {
                        path: path.to_owned(),
                        line: Some(i + 1),
                        message: format!("not a journal line: {e}"),
                    });
                }
            }
        }
        let header = header.ok_or_else(|| RedteamError::Data {
            path: path.to_owned(),
            line: Some(1),
            message: "the journal has no header line".into(),
        })?;
        Ok((header, done))
    }

    /// Reopens the journal at `dir` to append to it.
    pub fn reopen(dir: &Path) -> Result<Journal, RedteamError> {
        let path = dir.join(JOURNAL_FILE);
        // A line cut short by a kill is dropped before appending after it.
        let text = std::fs::read_to_string(&path).map_err(|e| RedteamError::io(&path, e))?;
        if !text.ends_with('\n') {
            let keep = text.rfind('\n').map_or(0, |i| i + 1);
            crate::files::write_atomic(&path, &text.as_bytes()[..keep])?;
        }
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| RedteamError::io(&path, e))?;
        Ok(Journal { path, file })
    }

    /// Appends a finished attempt.
    pub fn record(&mut self, attempt: &Attempt) -> Result<(), RedteamError> {
        let line = serde_json::to_string(&Line::Attempt(Box::new(attempt.clone())))
            .map_err(|e| RedteamError::io(&self.path, std::io::Error::other(e)))?;
        writeln!(self.file, "{line}").map_err(|e| RedteamError::io(&self.path, e))?;
        self.file
            .flush()
            .map_err(|e| RedteamError::io(&self.path, e))
    }
}
