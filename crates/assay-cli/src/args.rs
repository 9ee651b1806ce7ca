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

/// `--batch`: the calls nobody waits on go through the providers' batch APIs.
#[derive(Debug, Clone, Copy, Args)]
pub struct BatchArg {
    /// Send the calls nobody waits on (judges, the LLM reranker, calibration, generation, the
    /// optimizer's grader) through the providers' batch APIs, at the batch price; overrides
    /// ASSAY_BATCH and [providers] batch. An interrupted command polls its batches again
    /// (docs/batch.md).
    #[arg(long)]
    pub batch: bool,
}

impl BatchArg {
    /// The process environment as the harness reads it, with `ASSAY_BATCH=1` when `--batch`
    /// was given.
    pub fn env(self) -> impl Fn(&str) -> Option<String> + Send + Sync + 'static {
        move |name| {
            if self.batch && name == assay_project::engine::ASSAY_BATCH {
                Some("1".to_owned())
            } else {
                std::env::var(name).ok()
            }
        }
    }
}
