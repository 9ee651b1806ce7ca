//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// assay: a fast, offline test harness for LLM and RAG applications.
///
/// Point it at a project directory (knowledge base in kb/, test banks in test_banks/,
/// optional assay.toml) and it scores how well retrieval works, in seconds.
#[derive(Debug, Parser)]
#[command(name = "assay", version, about, long_about, propagate_version = true)]
pub struct Cli {
    /// More logging on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run test banks against a project and report scores and health.
    ///
    /// Exit codes: 0 passed, 1 quality gate failed (CRITICAL health, or below [gate] in
    /// assay.toml), 2 bad input, 3 infrastructure errors.
    Run(RunArgs),
    /// Print each semantic case's resolved expectations and where they came from.
    Expectations(ExpectationsArgs),
    /// Work with bank files.
    Banks {
        #[command(subcommand)]
        command: BanksCommand,
    },
    /// Load and validate a project without running anything.
    Validate(ProjectArg),
    /// Create a small project that runs as it is.
    Init(InitArgs),
}

/// A project directory.
#[derive(Debug, Args)]
pub struct ProjectArg {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
}

/// `assay run`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Banks to run: `all`, or a comma-separated list of semantic, state, pattern, always.
    #[arg(long, default_value = "all", value_name = "BANKS")]
    pub banks: String,

    /// Run only the case with this test_id (in whichever bank holds it).
    #[arg(long, value_name = "ID")]
    pub test: Option<String>,

    /// Run only the semantic cases with this topic.
    #[arg(long, value_name = "TOPIC")]
    pub topic: Option<String>,

    /// Print the RunLog as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// Also write JUnit XML to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Do not save results/results_<stamp>.json and results/report_<stamp>.md.
    #[arg(long)]
    pub no_save: bool,

    /// List only failing cases in the summary (the default lists every imperfect case).
    #[arg(long)]
    pub failures_only: bool,
}

/// `assay expectations`
#[derive(Debug, Args)]
pub struct ExpectationsArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Print JSON: a summary of sources and every case's expectations with `_source`.
    #[arg(long)]
    pub json: bool,
}

/// `assay banks …`
#[derive(Debug, Subcommand)]
pub enum BanksCommand {
    /// Add `bank_type` and `version` to pre-V2 bank files in place (originals kept as .bak).
    Migrate(ProjectArg),
}

/// `assay init`
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to create the project (created if missing; existing files are never overwritten).
    pub dir: PathBuf,
}
