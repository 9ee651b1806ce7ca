//! Command-line argument groups that several commands share. The top-level `Cli` and
//! `Command` are in `commands`; each command's own arguments are in its module there, beside
//! the code that reads them.

use std::path::PathBuf;

use clap::Args;

/// A project directory.
#[derive(Debug, Args)]
pub struct ProjectArg {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
}
