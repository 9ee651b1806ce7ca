//! `assay expectations`

use std::path::PathBuf;

use assay_core::bank::ExpectationSet;
use assay_project::project::Project;
use assay_run::overrides::{OverrideRequest, parse_rank_check, record_override};
use clap::{Args, Subcommand};
use serde_json::json;

use super::{log_warnings, out};
use crate::exit::Exit;

/// `assay expectations`
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ExpectationsArgs {
    #[command(subcommand)]
    pub command: Option<ExpectationsCommand>,

    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Print JSON: a summary of sources and every case's expectations with `_source`.
    #[arg(long)]
    pub json: bool,
}

/// `assay expectations …`
#[derive(Debug, Subcommand)]
pub enum ExpectationsCommand {
    /// Record a human override of a semantic case's expectations, dated today.
    ///
    /// Writes a new history file; nothing existing changes. The override wins over every
    /// calibration until a newer override replaces it.
    Override(OverrideArgs),
}

/// `assay expectations override`
#[derive(Debug, Args)]
pub struct OverrideArgs {
    /// The semantic case.
    pub test_id: String,

    /// The project directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project: PathBuf,

    /// Expected primary entities (comma-separated or repeated).
    #[arg(long, required = true, value_delimiter = ',', value_name = "IDS")]
    pub primary: Vec<String>,

    /// Expected secondary entities.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub secondary: Vec<String>,

    /// Entities that must not be retrieved.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub not_expected: Vec<String>,

    /// A rank check, HIGHER>LOWER (repeatable).
    #[arg(long, value_delimiter = ',', value_name = "HIGHER>LOWER")]
    pub rank_check: Vec<String>,

    /// Why the override is right (required).
    #[arg(long, required = true)]
    pub reason: String,

    /// Who decided.
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,

    /// Print what was recorded as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &ExpectationsArgs) -> anyhow::Result<Exit> {
    if let Some(ExpectationsCommand::Override(o)) = &args.command {
        return override_case(o);
    }
    let project = Project::load(&args.dir)?;
    log_warnings(&project.warnings);
    let cases: Vec<_> = project.banks.semantic.iter().map(|l| &l.case).collect();
    let summary = project.expectations.summary(cases.iter().copied());
    if args.json {
        let expectations: Vec<_> = cases
            .iter()
            .map(|case| {
                let r = project.expectations.resolve(case);
                json!({
                    "test_id": case.test_id,
                    "expected_primary": r.expectations.expected_primary,
                    "expected_secondary": r.expectations.expected_secondary,
                    "not_expected": r.expectations.not_expected,
                    "rank_check": r.expectations.rank_check,
                    "_source": r.source.to_string(),
                })
            })
            .collect();
        let doc = json!({ "summary": summary, "expectations": expectations });
        out(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
    } else {
        let mut text = format!(
            "{} semantic cases: {} original, {} calibrated (opus), {} human override\n\n",
            cases.len(),
            summary.original,
            summary.opus,
            summary.human_override
        );
        for case in &cases {
            let r = project.expectations.resolve(case);
            text.push_str(&format!(
                "  {:<16} {:<28} primary: {}\n",
                case.test_id,
                r.source.to_string(),
                r.expectations.expected_primary.join(", ")
            ));
        }
        out(&text);
    }
    Ok(Exit::Success)
}

fn ids(values: &[String]) -> Vec<String> {
    values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `assay expectations override`
fn override_case(args: &OverrideArgs) -> anyhow::Result<Exit> {
    let project = Project::load(&args.project)?;
    log_warnings(&project.warnings);
    let rank_check = args
        .rank_check
        .iter()
        .map(|r| parse_rank_check(r))
        .collect::<Result<Vec<_>, _>>()?;
    let request = OverrideRequest {
        test_id: args.test_id.clone(),
        expectations: ExpectationSet {
            expected_primary: ids(&args.primary),
            expected_secondary: ids(&args.secondary),
            not_expected: ids(&args.not_expected),
            rank_check,
        },
        reason: args.reason.clone(),
        reviewer: args.reviewer.clone(),
    };
    let outcome = record_override(&project, &request, std::time::SystemTime::now().into())?;
    // An accepted generated case's provenance lists what the override makes it name.
    if let Err(e) = assay_run::session::record_expectations(
        &project,
        &[(outcome.test_id.clone(), request.expectations.clone())],
        &super::env,
    ) {
        tracing::warn!("the provenance of {} was not updated: {e}", outcome.test_id);
    }
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&outcome)?));
    } else {
        let o = &outcome.human_override;
        out(&format!(
            "Recorded a human override of {} (was {}: primary {})\n  primary: {}\n  secondary: {}\n  not expected: {}\n  rank: {}\n  written: {}\n",
            outcome.test_id,
            outcome.previous_source,
            outcome.previous.expected_primary.join(", "),
            o.expected_primary.join(", "),
            o.expected_secondary.join(", "),
            o.not_expected.join(", "),
            o.rank_check
                .iter()
                .map(|r| format!("{}>{}", r.higher, r.lower))
                .collect::<Vec<_>>()
                .join(", "),
            outcome.history_file.display()
        ));
    }
    Ok(Exit::Success)
}
