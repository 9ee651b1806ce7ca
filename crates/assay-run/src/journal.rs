//! The run journal: every finished case is appended as one JSON line the moment it finishes, so
//! an interrupted run can be resumed (`assay run … --resume`) without redoing finished cases.
//!
//! Layout of `.assay/journal.jsonl`:
//!
//! ```text
//! {"journal":1,"run_id":"…","timestamp":"…","request":{…},"setup":"…"}
//! {"bank":"semantic","result":{…SemanticCaseResult…}}
//! {"bank":"state","result":{…}}
//! ```
//!
//! The first line (the header) ties the journal to one request and one setup (embedder,
//! reranker, expectations): resuming with a different request or setup is refused, because the
//! finished results would not be comparable. A case that ended in an infrastructure error is
//! journaled too, but a resumed run runs it again. A last line cut short by a crash is ignored.
//! Lines are flushed to the operating system as they are written (a killed process loses
//! nothing); they are not fsynced one by one. A semantic case (provider calls) is written the
//! moment it finishes; the cases of the deterministic banks (state, pattern, always), which
//! take microseconds each, are written together when their bank finishes.

use std::collections::HashMap;

use assay_core::bank::BankType;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::HarnessError;

/// The journal format version.
pub const JOURNAL_VERSION: u32 = 1;

/// The first line of a journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalHeader {
    /// [`JOURNAL_VERSION`].
    pub journal: u32,
    /// The run the journal belongs to; a resumed run keeps it.
    pub run_id: String,
    /// When the run started; a resumed run keeps it.
    pub timestamp: String,
    /// The request, as `banks=…;test=…;topic=…`.
    pub request: String,
    /// The systems under test and the expectations in force, as a fingerprint.
    pub setup: String,
}

/// One finished case: the journal and the run log hold the same records.
pub use assay_core::aggregate::CaseRecord as JournalEntry;

/// A JSON-lines journal read back (this run journal, and the optimizer's experiment journal):
/// the header on line 1, then one entry a line.
#[derive(Debug)]
pub struct JournalLines<H, E> {
    /// Line 1.
    pub header: H,
    /// The entries, in file order.
    pub entries: Vec<E>,
    /// A last line that does not parse, as a crash mid-write leaves it: its line number and
    /// why. It is not an error; the caller drops it (and says so).
    pub torn: Option<(usize, String)>,
}

/// Why a journal's text could not be read back.
#[derive(Debug, Clone, PartialEq)]
pub enum JournalLinesError {
    /// There is no line 1.
    Empty,
    /// Line 1 is not a header: why.
    Header(String),
    /// A line before the last is not an entry.
    Entry {
        /// Its line number (from 1).
        line: usize,
        /// Why.
        message: String,
    },
}

/// Parses a journal's text. Blank lines are skipped; only the last line may fail to parse (it
/// is then [`JournalLines::torn`]): any other line that fails is an error naming its line.
pub fn parse_journal<H: DeserializeOwned, E: DeserializeOwned>(
    text: &str,
) -> Result<JournalLines<H, E>, JournalLinesError> {
    let first = text.lines().next().ok_or(JournalLinesError::Empty)?;
    let header =
        serde_json::from_str(first).map_err(|e| JournalLinesError::Header(e.to_string()))?;
    let rest = text.split_once('\n').map_or("", |(_, rest)| rest);
    let (entries, torn) = parse_entries(rest, 2)?;
    Ok(JournalLines {
        header,
        entries,
        torn,
    })
}

/// A last line that did not parse: its number and why.
pub type Torn = (usize, String);

/// Parses append-only JSON lines with no header (numbered from `first_line`): one value a line,
/// blank lines skipped. Only the last line may fail to parse, as a crash mid-append leaves it:
/// it is returned apart (its line and why) for the caller to drop and report. Any other line
/// that fails, or holds text after its value, is [`JournalLinesError::Entry`]: an append-only
/// file is never read with a line silently left out.
pub fn parse_entries<E: DeserializeOwned>(
    text: &str,
    first_line: usize,
) -> Result<(Vec<E>, Option<Torn>), JournalLinesError> {
    let mut entries = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, text) in text.lines().enumerate() {
        if text.trim().is_empty() {
            continue;
        }
        if let Some((line, message)) = pending.take() {
            return Err(JournalLinesError::Entry { line, message });
        }
        match serde_json::from_str(text) {
            Ok(entry) => entries.push(entry),
            Err(e) => pending = Some((i + first_line, e.to_string())),
        }
    }
    Ok((entries, pending))
}

/// The header of the journal at `path`, when there is one that reads.
pub fn read_header(path: &Path) -> Option<JournalHeader> {
    let file = File::open(path).ok()?;
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(file), &mut first).ok()?;
    serde_json::from_str(&first).ok()
}

/// Removes the journal at `path` (unlinks it: a run log it is linked to keeps its contents).
pub fn discard(path: &Path) -> Result<(), HarnessError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(HarnessError::io(path, &e)),
    }
}

/// An open journal: the cases already finished (when resuming) and the file new ones go to.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    header: JournalHeader,
    done: HashMap<(BankType, String), JournalEntry>,
}

impl Journal {
    /// Starts a new journal at `path`, replacing an old one.
    ///
    /// The old file is unlinked, never truncated: a journal that is also a saved run's run log
    /// (linked to `results/cases_<stamp>.jsonl` by the save) keeps its contents there.
    pub fn start(path: &Path, header: JournalHeader) -> Result<Journal, HarnessError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
        }
        discard(path)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| HarnessError::io(path, &e))?;
        let line = serde_json::to_string(&header)
            .map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
        writeln!(file, "{line}").map_err(|e| HarnessError::io(path, &e))?;
        file.flush().map_err(|e| HarnessError::io(path, &e))?;
        Ok(Journal {
            path: path.to_owned(),
            file,
            header,
            done: HashMap::new(),
        })
    }

    /// Reopens the journal at `path` to resume its run. The request and setup must match
    /// `expected`'s; the returned journal keeps the original run id and timestamp.
    pub fn resume(path: &Path, expected: &JournalHeader) -> Result<Journal, HarnessError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(HarnessError::Usage(format!(
                    "--resume: there is no interrupted run to resume ({} does not exist)",
                    path.display()
                )));
            }
            Err(e) => return Err(HarnessError::io(path, &e)),
        };
        let bad = |line: usize, what: String| {
            HarnessError::Usage(format!("{}:{line}: {what}", path.display()))
        };
        let read: JournalLines<JournalHeader, JournalEntry> =
            parse_journal(&text).map_err(|e| match e {
                JournalLinesError::Empty => bad(1, "the journal is empty".into()),
                JournalLinesError::Header(e) => bad(1, format!("not a journal header: {e}")),
                JournalLinesError::Entry { line, message } => {
                    bad(line, format!("not a journal entry: {message}"))
                }
            })?;
        let header = read.header;
        if header.journal != JOURNAL_VERSION {
            return Err(bad(
                1,
                format!(
                    "journal version {} is not supported (expected {JOURNAL_VERSION})",
                    header.journal
                ),
            ));
        }
        if header.request != expected.request {
            return Err(HarnessError::Usage(format!(
                "--resume: the interrupted run asked for `{}`, this run asks for `{}`; run with the same options, or without --resume to start over",
                header.request, expected.request
            )));
        }
        if header.setup != expected.setup {
            return Err(HarnessError::Usage(format!(
                "--resume: the setup changed since the interrupted run (was `{}`, now `{}`); its results would not be comparable, run without --resume to start over",
                header.setup, expected.setup
            )));
        }
        if let Some((n, e)) = read.torn {
            tracing::warn!(
                "{}:{n}: ignoring a cut-short last line (not a journal entry: {e})",
                path.display()
            );
        }
        // A case that ended in an infrastructure error runs again: its entry is dropped, so
        // the journal (which becomes the run log) holds each case once.
        let done: HashMap<(BankType, String), JournalEntry> = read
            .entries
            .into_iter()
            .filter(|e| e.error().is_none())
            .map(|entry| ((entry.bank(), entry.test_id().to_owned()), entry))
            .collect();
        // Rewrite without the cut-short line, so appends start on a fresh line.
        let mut journal = Journal::start(path, header)?;
        let mut entries: Vec<&JournalEntry> = done.values().collect();
        entries.sort_by(|a, b| (a.bank(), a.test_id()).cmp(&(b.bank(), b.test_id())));
        journal.record_all(entries)?;
        journal.done = done;
        Ok(journal)
    }

    /// The header (run id and timestamp of the run).
    pub fn header(&self) -> &JournalHeader {
        &self.header
    }

    /// The finished result of a case, when the run is resumed and the case finished without
    /// an infrastructure error.
    pub fn finished(&self, bank: BankType, test_id: &str) -> Option<&JournalEntry> {
        self.done.get(&(bank, test_id.to_owned()))
    }

    /// How many cases finished before this (resumed) run.
    pub fn resumed_cases(&self) -> usize {
        self.done.len()
    }

    /// Appends a finished case.
    pub fn record(&mut self, entry: &JournalEntry) -> Result<(), HarnessError> {
        self.record_all([entry])
    }

    /// Appends finished cases, in one write.
    pub fn record_all<'e>(
        &mut self,
        entries: impl IntoIterator<Item = &'e JournalEntry>,
    ) -> Result<(), HarnessError> {
        let mut text = String::new();
        for entry in entries {
            text.push_str(
                &serde_json::to_string(entry)
                    .map_err(|e| HarnessError::Infrastructure(e.to_string()))?,
            );
            text.push('\n');
        }
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|e| HarnessError::io(&self.path, &e))
    }

    /// Removes the journal: the run finished and its results are saved.
    pub fn finish(self) -> Result<(), HarnessError> {
        drop(self.file);
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(HarnessError::io(&self.path, &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::runlog::AlwaysCaseResult;
    use assay_core::scoring::Breakdown;
    use std::fs::OpenOptions;

    #[test]
    fn parse_journal_drops_only_a_torn_last_line() {
        type Lines = Result<JournalLines<u32, String>, JournalLinesError>;
        let read: Lines = parse_journal("1\n\"a\"\n\n\"b\"\n{\"cut");
        let read = read.unwrap();
        assert_eq!(
            (read.header, read.entries.as_slice()),
            (1, ["a".to_owned(), "b".to_owned()].as_slice())
        );
        assert_eq!(read.torn.map(|(line, _)| line), Some(5));
        let read: Lines = parse_journal("1\n{\"cut\n\"b\"\n");
        assert!(
            matches!(read, Err(JournalLinesError::Entry { line: 2, .. })),
            "{read:?}"
        );
        let read: Lines = parse_journal("");
        assert_eq!(read.unwrap_err(), JournalLinesError::Empty);
        let read: Lines = parse_journal("not json\n");
        assert!(
            matches!(read, Err(JournalLinesError::Header(_))),
            "{read:?}"
        );
        let read: Lines = parse_journal("1\n\"a\"\n");
        assert!(read.unwrap().torn.is_none());
    }

    /// Appends raw text, as a crash mid-write would leave it.
    fn append_raw(path: &Path, text: &str) -> std::io::Result<()> {
        let mut f = OpenOptions::new().append(true).open(path)?;
        f.write_all(text.as_bytes())
    }

    fn header(request: &str) -> JournalHeader {
        JournalHeader {
            journal: JOURNAL_VERSION,
            run_id: "r1".into(),
            timestamp: "2026-11-21T10:00:00Z".into(),
            request: request.into(),
            setup: "builtin".into(),
        }
    }

    fn always(id: &str) -> JournalEntry {
        JournalEntry::Always(AlwaysCaseResult {
            test_id: id.into(),
            name: String::new(),
            user_type: "PARENT".into(),
            loaded_entities: vec![],
            expected_always: vec![],
            missing: vec![],
            score: 100,
            breakdown: Breakdown::default(),
            is_hard_fail: false,
            duration_ms: None,
            verdict: None,
        })
    }

    #[test]
    fn resume_reads_finished_cases_and_ignores_a_cut_short_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::start(&path, header("all")).unwrap();
        j.record(&always("A-1")).unwrap();
        j.record(&always("A-2")).unwrap();
        drop(j);
        append_raw(&path, "{\"bank\":\"always\",\"result\":{\"test_").unwrap();

        let mut fresh = header("all");
        fresh.run_id = "r2".into();
        let j = Journal::resume(&path, &fresh).unwrap();
        assert_eq!(j.header().run_id, "r1");
        assert_eq!(j.resumed_cases(), 2);
        assert!(j.finished(BankType::Always, "A-2").is_some());
        assert!(j.finished(BankType::Always, "A-3").is_none());
        drop(j);
        // The cut-short line is gone: the file parses line by line.
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3);
    }

    #[test]
    fn resume_refuses_another_request_or_a_missing_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let e = Journal::resume(&path, &header("all")).unwrap_err();
        assert!(e.to_string().contains("no interrupted run"), "{e}");
        Journal::start(&path, header("banks=state")).unwrap();
        let e = Journal::resume(&path, &header("banks=pattern")).unwrap_err();
        assert!(e.to_string().contains("asked for `banks=state`"), "{e}");
        let mut other = header("banks=state");
        other.setup = "voyage".into();
        let e = Journal::resume(&path, &other).unwrap_err();
        assert!(e.to_string().contains("setup changed"), "{e}");
    }

    #[test]
    fn a_corrupt_line_in_the_middle_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut j = Journal::start(&path, header("all")).unwrap();
        j.record(&always("A-1")).unwrap();
        drop(j);
        append_raw(&path, "garbage\n").unwrap();
        append_raw(
            &path,
            &format!("{}\n", serde_json::to_string(&always("A-2")).unwrap()),
        )
        .unwrap();
        let e = Journal::resume(&path, &header("all")).unwrap_err();
        assert!(e.to_string().contains("journal.jsonl:3"), "{e}");
    }

    #[test]
    fn finish_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let j = Journal::start(&path, header("all")).unwrap();
        j.finish().unwrap();
        assert!(!path.exists());
    }
}
