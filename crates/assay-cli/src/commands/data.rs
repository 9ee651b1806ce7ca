//! `assay data …`: the optimizer's versioned test data (`test_data/versions.json`).
//!
//! `create-version` and `set-latest` change the project, so they take the project lock (one
//! optimize, evaluate or data change at a time); `list-versions` only reads.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use assay_experiment::testdata::{self, Kind, VersionRow};
use assay_project::lock::ProjectLock;
use clap::{Args, Subcommand};

use super::kb::plural;
use super::{command_line, out};
use crate::exit::Exit;

/// The two sets of optimizer test data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DataKind {
    /// The cases the search optimises on.
    Optimization,
    /// The held-out cases of the final evaluation.
    Evaluation,
}

/// `assay data …`
#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Create a test-data version from a folder holding test_cases.jsonl and the context files
    /// it names (relative to the folder). Every case and file is validated first; only
    /// test_cases.jsonl and the named files are copied; an existing version is never
    /// overwritten. The first version of a kind becomes its latest.
    #[command(disable_version_flag = true)]
    CreateVersion(CreateVersionArgs),
    /// Set the version `assay optimize` uses when none is named.
    SetLatest(SetLatestArgs),
    /// List the versions of both kinds, the latest marked with `*`.
    ListVersions {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `assay data create-version`
#[derive(Debug, Args)]
pub struct CreateVersionArgs {
    /// Which set.
    #[arg(long = "type", value_enum, value_name = "TYPE")]
    pub kind: DataKind,
    /// The new version's name (letters, digits, `.`, `_`, `-`; e.g. v1.1.0).
    #[arg(long, value_name = "V")]
    pub version: String,
    /// What is in it or what changed.
    #[arg(long, value_name = "TEXT")]
    pub description: String,
    /// The folder with test_cases.jsonl and its context files.
    #[arg(long, value_name = "DIR")]
    pub source_dir: PathBuf,
}

/// `assay data set-latest`
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(true)))]
pub struct SetLatestArgs {
    /// The optimization version to use by default.
    #[arg(long, value_name = "V", group = "which")]
    pub optimization_version: Option<String>,
    /// The evaluation version to use by default.
    #[arg(long, value_name = "V", group = "which")]
    pub evaluation_version: Option<String>,
}

impl From<DataKind> for Kind {
    fn from(k: DataKind) -> Kind {
        match k {
            DataKind::Optimization => Kind::Optimization,
            DataKind::Evaluation => Kind::Evaluation,
        }
    }
}

pub fn run(project: &Path, command: &DataCommand) -> anyhow::Result<Exit> {
    match command {
        DataCommand::CreateVersion(a) => {
            let _lock = ProjectLock::acquire(project, "data create-version", &command_line())?;
            let made = testdata::create_version(
                project,
                a.kind.into(),
                &a.version,
                &a.description,
                &a.source_dir,
            )?;
            let mut text = format!(
                "created {} version {}: {}, {} ({})\n",
                made.kind,
                made.version,
                plural(made.info.cases, "case"),
                plural(made.info.files.unwrap_or(0), "context file"),
                made.dir
                    .strip_prefix(project)
                    .unwrap_or(&made.dir)
                    .display()
            );
            if made.became_latest {
                let _ = writeln!(
                    text,
                    "it is the latest {} version (the first one)",
                    made.kind
                );
            } else {
                let _ = writeln!(
                    text,
                    "the latest {kind} version is unchanged; use it with `assay data set-latest {} {}`",
                    made.kind.flag(),
                    made.version,
                    kind = made.kind
                );
            }
            if !made.warnings.is_empty() {
                let _ = writeln!(text, "{} warnings (see stderr)", made.warnings.len());
            }
            out(&text);
        }
        DataCommand::SetLatest(a) => {
            let _lock = ProjectLock::acquire(project, "data set-latest", &command_line())?;
            let file = testdata::set_latest(
                project,
                a.optimization_version.as_deref(),
                a.evaluation_version.as_deref(),
            )?;
            let mut text = String::new();
            for kind in Kind::ALL {
                let _ = writeln!(
                    text,
                    "latest {kind}: {}",
                    file.latest(kind).unwrap_or("(none)")
                );
            }
            out(&text);
        }
        DataCommand::ListVersions { json } => {
            let rows = testdata::list_versions(project)?;
            if *json {
                let file = testdata::read_versions(project)?.unwrap_or_default();
                let doc = serde_json::json!({
                    "latest_optimization": file.latest_optimization,
                    "latest_evaluation": file.latest_evaluation,
                    "versions": rows,
                });
                out(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
            } else {
                out(&render_list(&rows));
            }
        }
    }
    Ok(Exit::Success)
}

/// The versions as a table per kind, the latest marked with `*`.
fn render_list(rows: &[VersionRow]) -> String {
    if rows.is_empty() {
        return format!(
            "no test data versions yet ({} not found or empty); create one with `assay data \
             create-version`\n",
            testdata::VERSIONS_FILE
        );
    }
    let width = rows.iter().map(|r| r.version.len()).max().unwrap_or(0);
    let mut text = String::new();
    for kind in Kind::ALL {
        let of_kind: Vec<&VersionRow> = rows.iter().filter(|r| r.kind == kind).collect();
        let _ = writeln!(text, "{kind} ({})", plural(of_kind.len(), "version"));
        for r in of_kind {
            let _ = writeln!(
                text,
                "  {} {:width$}  {:>4} cases  {}  {}",
                if r.latest { '*' } else { ' ' },
                r.version,
                r.info.cases,
                r.info.created_at,
                r.info.description,
            );
        }
    }
    text.push_str("* = latest (used when no version is named)\n");
    text
}
