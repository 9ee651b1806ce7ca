//! Writing a run's files.

use std::path::Path;

use crate::RedteamError;

/// Writes `contents` to `path` through a temporary file in the same folder and a rename.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), RedteamError> {
    assay_project::results::write_replace(path, contents).map_err(|e| RedteamError::io(path, e))
}
