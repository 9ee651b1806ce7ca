//! What loads and assembles an assay project (000 §2): its settings (`assay.toml`), the banks
//! and their validation, typed user state, versioned expectations and their history, the
//! locks, the saved-results writers, draft files, provenance, and the system under test
//! ([`engine`]: the store, the embedder, the semantic search) with one traced retrieval
//! ([`retrieve`]); `assay init`'s templates and bank migration.
//!
//! Entry point: [`project::Project::load`] reads and validates a project directory (a bad file
//! stops everything before anything runs or is written); [`engine`] assembles what it runs
//! against. The run itself is `assay-run`'s.
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod answer_case;
pub mod banks;
pub mod drafts;
pub mod engine;
pub mod expectations;
pub mod hash;
pub mod history;
pub mod init;
pub mod lock;
pub mod migrate;
pub mod project;
pub mod provenance;
pub mod results;
pub mod retrieve;
pub mod settings;
pub mod typed_state;

use std::path::Path;

use assay_kb::KbError;
use assay_kb::datafile::DataError;

/// Errors of the harness crates (this one and the run, generation, trace and knowledge-base
/// tooling crates above it, which re-export it). Bad input and usage errors map to exit code
/// 2, infrastructure errors to 3.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A project file is not valid.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The knowledge base is not valid or failed.
    #[error(transparent)]
    Kb(#[from] KbError),
    /// The request cannot be carried out as asked.
    #[error("{0}")]
    Usage(String),
    /// Something outside assay failed.
    #[error("{0}")]
    Infrastructure(String),
    /// Another process held what this one needed (the knowledge-base lock) for longer than it
    /// waits: try again.
    #[error("{0}")]
    Busy(String),
    /// Another run holds a lock this one needs and does not wait for (the run lock, the project
    /// lock); the message names the holder. Bad timing, not bad input: exit 2, HTTP 409.
    #[error("{0}")]
    Held(String),
}

impl From<lock::LockError> for HarnessError {
    /// A lock held by another run is a usage error (wait, or stop it); a lock that cannot be
    /// taken (the file system, a holder that does not let go) is infrastructure.
    fn from(e: lock::LockError) -> HarnessError {
        if matches!(e, lock::LockError::Busy { .. }) {
            HarnessError::Busy(e.to_string())
        } else if e.is_infrastructure() {
            HarnessError::Infrastructure(e.to_string())
        } else {
            HarnessError::Held(e.to_string())
        }
    }
}

impl HarnessError {
    /// An I/O error on a path, as bad input.
    pub fn io(path: &Path, error: &std::io::Error) -> HarnessError {
        HarnessError::Data(DataError::new(path, error.to_string()))
    }

    /// Whether this is an infrastructure error (exit code 3) rather than bad input (2).
    pub fn is_infrastructure(&self) -> bool {
        match self {
            HarnessError::Infrastructure(_) | HarnessError::Busy(_) => true,
            HarnessError::Kb(e) => e.is_infrastructure(),
            HarnessError::Data(_) | HarnessError::Usage(_) | HarnessError::Held(_) => false,
        }
    }
}
