//! The generation journal, `.assay/generate/<generation>.journal.jsonl`: the request on its
//! first line, then one line per finished model call (its key, what came back, what it cost),
//! then a `done` line when the draft files are written. A generation killed at any point is
//! finished by `assay generate --resume`, which reads the journal, answers every call found
//! there from it (paying nothing) and makes only the calls that are missing; the drafts come
//! out the same because everything after the calls is deterministic.
//!
//! Each line is written and flushed as its call ends, so a process killed with SIGKILL loses
//! at most the calls in flight. A line cut short by the kill is ignored on reading.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::HarnessError;
use assay_project::settings::ProjectSettings;

/// `.assay/generate/`.
pub fn journal_dir(settings: &ProjectSettings) -> PathBuf {
    settings.root.join(".assay").join("generate")
}

/// The journal of a generation.
pub fn journal_path(settings: &ProjectSettings, generation: &str) -> PathBuf {
    journal_dir(settings).join(format!("{generation}.journal.jsonl"))
}

/// The first line: what the generation was asked for, so a resumed run asks the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The generation id.
    pub generation: String,
    /// When it started (RFC 3339): every draft's `generated_at`.
    pub generated_at: String,
    /// The resolved request, as `key: value` pairs (the draft files' `request`).
    pub request: BTreeMap<String, String>,
}

/// What one call (with its corrective turns) came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// A reply that follows the schema: its JSON object.
    Valid(serde_json::Value),
    /// No usable reply (not JSON, the wrong shape, empty): why.
    Invalid(String),
}

/// A finished call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The call's key (a digest of the model, the prompt and the schema).
    pub key: String,
    /// What came back.
    pub reply: Reply,
    /// Chat requests it took (corrective turns included).
    pub requests: u32,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// What it cost, when the model's price is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Header(Header),
    Call(Entry),
    Done { files: Vec<String> },
}

/// An open journal: the entries read back, and the file to append to.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    /// The header.
    pub header: Header,
    entries: HashMap<String, Entry>,
    file: Mutex<std::fs::File>,
}

/// A journal read back.
#[derive(Debug)]
pub struct Read {
    /// The header.
    pub header: Header,
    /// The calls.
    pub entries: Vec<Entry>,
    /// Whether its generation finished.
    pub done: bool,
}

/// Reads a journal; a line cut short (the last one, by a kill) is skipped.
pub fn read(path: &Path) -> Result<Read, HarnessError> {
    let text = std::fs::read_to_string(path).map_err(|e| HarnessError::io(path, &e))?;
    let mut header = None;
    let mut entries = Vec::new();
    let mut done = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(line) {
            Ok(Line::Header(h)) if i == 0 => header = Some(h),
            Ok(Line::Call(e)) => entries.push(e),
            Ok(Line::Done { .. }) => done = true,
            Ok(Line::Header(_)) | Err(_) => {
                tracing::warn!(
                    "{}: line {} is not a journal entry; skipped",
                    path.display(),
                    i + 1
                );
            }
        }
    }
    let header = header.ok_or_else(|| {
        HarnessError::Usage(format!(
            "{}: not a generation journal (no header on its first line)",
            path.display()
        ))
    })?;
    Ok(Read {
        header,
        entries,
        done,
    })
}

/// The newest journal of a generation that did not finish, if any.
pub fn latest_unfinished(settings: &ProjectSettings) -> Result<Option<PathBuf>, HarnessError> {
    let dir = journal_dir(settings);
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| HarnessError::io(&dir, &e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".journal.jsonl"))
        .collect();
    // Generation ids sort by time; a modification time breaks ties between `-2` suffixes.
    paths.sort_by_key(|p| {
        (
            std::fs::metadata(p).and_then(|m| m.modified()).ok(),
            p.clone(),
        )
    });
    for path in paths.into_iter().rev() {
        if !read(&path)?.done {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

fn append_line(file: &Mutex<std::fs::File>, line: &Line, path: &Path) -> Result<(), HarnessError> {
    let mut text = serde_json::to_string(line)
        .map_err(|e| HarnessError::Infrastructure(format!("{}: {e}", path.display())))?;
    text.push('\n');
    let mut file = file
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    file.write_all(text.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| HarnessError::io(path, &e))
}

impl Journal {
    /// Starts a new journal with `header` (the file must not exist).
    pub fn create(path: &Path, header: Header) -> Result<Journal, HarnessError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
        }
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(|e| HarnessError::io(path, &e))?;
        let file = Mutex::new(file);
        append_line(&file, &Line::Header(header.clone()), path)?;
        Ok(Journal {
            path: path.to_owned(),
            header,
            entries: HashMap::new(),
            file,
        })
    }

    /// Opens an unfinished journal to resume it.
    pub fn resume(path: &Path) -> Result<Journal, HarnessError> {
        let read = read(path)?;
        // A line cut short by a kill has no newline: start the next entry on a line of its own.
        let text = std::fs::read(path).map_err(|e| HarnessError::io(path, &e))?;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| HarnessError::io(path, &e))?;
        if text.last().is_some_and(|b| *b != b'\n') {
            file.write_all(b"\n")
                .map_err(|e| HarnessError::io(path, &e))?;
        }
        Ok(Journal {
            path: path.to_owned(),
            header: read.header,
            entries: read
                .entries
                .into_iter()
                .map(|e| (e.key.clone(), e))
                .collect(),
            file: Mutex::new(file),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The finished call with this key, from an earlier process.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// What the calls read back from the file cost (USD, those with a known price).
    pub fn spent(&self) -> f64 {
        self.entries.values().filter_map(|e| e.cost_usd).sum()
    }

    /// Calls read back from the file.
    pub fn replayable(&self) -> usize {
        self.entries.len()
    }

    /// Records a finished call (written and flushed before this returns).
    pub fn record(&self, entry: &Entry) -> Result<(), HarnessError> {
        append_line(&self.file, &Line::Call(entry.clone()), &self.path)
    }

    /// Marks the generation finished, with the files it wrote.
    pub fn finish(&self, files: Vec<String>) -> Result<(), HarnessError> {
        append_line(&self.file, &Line::Done { files }, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_line_is_skipped_and_resume_appends_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.journal.jsonl");
        let header = Header {
            generation: "g".into(),
            generated_at: "2026-11-28T00:00:00Z".into(),
            request: BTreeMap::new(),
        };
        let j = Journal::create(&path, header.clone()).unwrap();
        let entry = Entry {
            key: "k1".into(),
            reply: Reply::Valid(serde_json::json!({"messages": []})),
            requests: 1,
            input_tokens: 10,
            output_tokens: 5,
            cost_usd: Some(0.001),
        };
        j.record(&entry).unwrap();
        drop(j);
        // A kill in the middle of a line.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(br#"{"call":{"key":"k2","rep"#).unwrap();
        drop(f);
        let j = Journal::resume(&path).unwrap();
        assert_eq!(j.header, header);
        assert_eq!(j.get("k1"), Some(&entry));
        assert!(j.get("k2").is_none());
        let second = Entry {
            key: "k2".into(),
            reply: Reply::Invalid("the reply was empty".into()),
            ..entry.clone()
        };
        j.record(&second).unwrap();
        j.finish(vec!["a.json".into()]).unwrap();
        let back = read(&path).unwrap();
        assert!(back.done);
        assert_eq!(back.entries, vec![entry, second]);
    }
}
