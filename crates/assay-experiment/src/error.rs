//! The one error type of the experiment crate.
//!
//! Bad input (a test-case line, a prompt file, `versions.json`, a version that does not exist)
//! is [`ExperimentError::Data`], which names the file, the line and the field; a request that
//! cannot be carried out as asked (a version that already exists, an unknown experiment) is
//! [`ExperimentError::Usage`]. Both map to exit code 2. [`ExperimentError::is_infrastructure`]
//! says which errors kept a run from a verdict (exit code 3).

use std::path::{Path, PathBuf};

pub use assay_kb::datafile::DataError;

/// Errors of the experiment crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// A project file is missing, unreadable or not valid: names the file, and the line and
    /// field when known.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The request cannot be carried out as asked (a version that already exists, an
    /// experiment folder that is missing).
    #[error("{0}")]
    Usage(String),
    /// Writing a file failed.
    #[error("cannot write {}: {message}", path.display())]
    Write {
        /// The file or folder being written.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// The request no longer fits the project's files (a reviewed prompt change whose plan
    /// moved on).
    #[error("{0}")]
    Conflict(String),
    /// Another optimize, evaluate or prompt change holds the project lock.
    #[error(transparent)]
    Lock(#[from] assay_project::lock::LockError),
}

impl ExperimentError {
    /// A data error about a whole file.
    pub fn data(path: &Path, message: impl Into<String>) -> ExperimentError {
        ExperimentError::Data(DataError::new(path, message))
    }

    /// A data error at a 1-based line of a file.
    pub fn at_line(path: &Path, line: usize, message: impl Into<String>) -> ExperimentError {
        ExperimentError::Data(DataError {
            path: path.to_owned(),
            line: Some(line),
            column: None,
            message: message.into(),
        })
    }

    /// A failed write of `path`.
    pub fn write(path: &Path, error: &std::io::Error) -> ExperimentError {
        ExperimentError::Write {
            path: path.to_owned(),
            message: error.to_string(),
        }
    }

    /// Whether this error kept a run from a verdict (exit code 3) rather than being bad input
    /// or usage (exit code 2).
    pub fn is_infrastructure(&self) -> bool {
        match self {
            ExperimentError::Lock(e) => e.is_infrastructure(),
            ExperimentError::Data(_)
            | ExperimentError::Usage(_)
            | ExperimentError::Conflict(_)
            | ExperimentError::Write { .. } => false,
        }
    }
}
