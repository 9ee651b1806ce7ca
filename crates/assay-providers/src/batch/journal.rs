//! The batch journal (`.assay/batches.jsonl`): one JSON line per event, appended and synced to
//! disk before the command goes on. `{"event": "submitted", "at", "provider", "base_url",
//! "model", "batch_id", "requests": [{"custom_id", "request"}]}` when a batch was accepted;
//! `{"event": "finished", "at", "batch_id", "status"}` once its results are in the call cache.
//! A batch submitted and not finished is pending: the next command polls it. A line that does
//! not parse (a command killed while writing it) is skipped with a warning.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::chat::ChatRequest;
use crate::{ProviderError, ProviderErrorKind};

/// A batch as the journal records it.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalBatch {
    /// `openai` or `anthropic`.
    pub provider: String,
    /// The API's base URL.
    pub base_url: String,
    /// The `vendor/model` name.
    pub model: String,
    /// The provider's id of the batch.
    pub batch_id: String,
    /// Its requests by custom id.
    pub requests: Vec<(String, ChatRequest)>,
}

#[derive(Serialize, Deserialize)]
struct Item {
    custom_id: String,
    request: ChatRequest,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line {
    Submitted {
        at: u64,
        provider: String,
        base_url: String,
        model: String,
        batch_id: String,
        requests: Vec<Item>,
    },
    Finished {
        at: u64,
        batch_id: String,
        status: String,
    },
}

/// The append-only journal of the batches submitted.
#[derive(Debug)]
pub struct BatchJournal {
    path: PathBuf,
    write: Mutex<()>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl BatchJournal {
    /// Opens the journal at `path` (a missing file is an empty journal) and returns the
    /// batches still pending, in the order they were submitted.
    pub fn open(path: PathBuf) -> Result<(BatchJournal, Vec<JournalBatch>), ProviderError> {
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(journal_error(&path, &e.to_string())),
        };
        let pending = pending(&path, &text);
        Ok((
            BatchJournal {
                path,
                write: Mutex::new(()),
            },
            pending,
        ))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records that `batch` was submitted.
    pub fn submitted(&self, batch: &JournalBatch) -> Result<(), ProviderError> {
        self.append(&Line::Submitted {
            at: now(),
            provider: batch.provider.clone(),
            base_url: batch.base_url.clone(),
            model: batch.model.clone(),
            batch_id: batch.batch_id.clone(),
            requests: batch
                .requests
                .iter()
                .map(|(id, r)| Item {
                    custom_id: id.clone(),
                    request: r.clone(),
                })
                .collect(),
        })
    }

    /// Records that batch `batch_id` ended with `status` (its answers are in the cache).
    pub fn finished(&self, batch_id: &str, status: &str) -> Result<(), ProviderError> {
        self.append(&Line::Finished {
            at: now(),
            batch_id: batch_id.to_owned(),
            status: status.to_owned(),
        })
    }

    fn append(&self, line: &Line) -> Result<(), ProviderError> {
        let mut text =
            serde_json::to_string(line).map_err(|e| journal_error(&self.path, &e.to_string()))?;
        text.push('\n');
        let _guard = self.write.lock().unwrap_or_else(PoisonError::into_inner);
        let io = || -> std::io::Result<()> {
            if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)?;
            }
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            file.write_all(text.as_bytes())?;
            file.sync_data()
        };
        io().map_err(|e| journal_error(&self.path, &e.to_string()))
    }
}

fn journal_error(path: &Path, message: &str) -> ProviderError {
    ProviderError::new(ProviderErrorKind::Cache {
        path: path.to_owned(),
        message: format!("batch journal: {message}"),
    })
}

/// The batches of `text` submitted and not finished.
fn pending(path: &Path, text: &str) -> Vec<JournalBatch> {
    let mut order: Vec<String> = Vec::new();
    let mut open: HashMap<String, JournalBatch> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Line>(line) {
            Ok(Line::Submitted {
                provider,
                base_url,
                model,
                batch_id,
                requests,
                ..
            }) => {
                order.push(batch_id.clone());
                open.insert(
                    batch_id.clone(),
                    JournalBatch {
                        provider,
                        base_url,
                        model,
                        batch_id,
                        requests: requests
                            .into_iter()
                            .map(|i| (i.custom_id, i.request))
                            .collect(),
                    },
                );
            }
            Ok(Line::Finished { batch_id, .. }) => {
                open.remove(&batch_id);
            }
            Err(e) => tracing::warn!(
                "{}:{}: skipped a line of the batch journal that does not parse ({e})",
                path.display(),
                n + 1
            ),
        }
    }
    order
        .into_iter()
        .filter_map(|id| open.remove(&id))
        .collect()
}
