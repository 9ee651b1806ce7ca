//! The assay retrieval harness (000): projects, bank loading and validation, versioned
//! expectations, the four runners, the unified runner and saved results.
//!
//! Entry points: [`project::Project::load`] reads and validates a project directory;
//! [`run::run`] runs a [`run::RunRequest`] against it and returns the
//! [`assay_core::runlog::RunLog`]; [`results::save`] writes it without overwriting anything.
//!
//! ```no_run
//! use assay_harness::project::Project;
//! use assay_harness::run::{Backends, Quiet, RunOptions, RunRequest, run};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let project = Project::load(std::path::Path::new("examples/coparent")).unwrap();
//! let request = RunRequest::default();
//! let backends = Backends::files(&project);
//! let log = run(&project, &request, backends, RunOptions::default(), &mut Quiet)
//!     .await
//!     .unwrap();
//! println!("{}", log.summary.health_status);
//! # });
//! ```
//!
//! [`session::execute`] does a whole run as `assay run` does (store import, embedder,
//! reranker, provider-call wrapper, journal, saved results).
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod accepted;
pub mod answer;
pub mod answer_case;
pub mod banks;
pub mod baseline;
pub mod calibrate;
pub mod caselog;
pub mod check_index;
pub mod compare;
pub mod drafts;
pub mod engine;
pub mod expectations;
pub mod freshness;
pub mod generate;
pub mod history;
pub mod init;
pub mod journal;
pub mod kbedit;
pub mod lock;
pub mod merge;
pub mod migrate;
pub mod overrides;
pub mod project;
pub mod provenance;
pub mod results;
pub mod retrieve;
pub mod review;
pub mod run;
pub mod runners;
pub mod runs;
pub mod session;
pub mod settings;
pub mod telemetry;
pub mod traces;
pub mod tune;
pub mod typed_state;

use std::path::Path;

use assay_kb::KbError;
use assay_kb::datafile::DataError;

/// Errors of the harness. Bad input and usage errors map to exit code 2, infrastructure
/// errors to 3.
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
