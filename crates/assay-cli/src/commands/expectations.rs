//! `assay expectations`

use assay_harness::project::Project;
use serde_json::json;

use super::{log_warnings, out};
use crate::args::ExpectationsArgs;
use crate::exit::Exit;

pub fn run(args: &ExpectationsArgs) -> anyhow::Result<Exit> {
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
