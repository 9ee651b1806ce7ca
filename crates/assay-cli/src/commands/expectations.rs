//! `assay expectations`

use assay_core::bank::ExpectationSet;
use assay_project::project::Project;
use assay_run::overrides::{OverrideRequest, parse_rank_check, record_override};
use serde_json::json;

use super::{log_warnings, out};
use crate::args::{ExpectationsArgs, ExpectationsCommand, OverrideArgs};
use crate::exit::Exit;

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
