//! Recording a human override of a semantic case's expectations (000 §4.2: clinical judgment
//! trumps calibration).
//!
//! [`record_override`] appends a NEW history file holding one change: the expectations in force
//! as `previous`, no `updated`, and the `human_override` dated today. Nothing existing is
//! modified, so every earlier decision stays on record. The override then wins over every
//! calibration, earlier or later, until a newer override replaces it.

use std::collections::HashSet;
use std::path::PathBuf;

use assay_core::bank::{ExpectationSet, RankCheck};
use assay_kb::KnowledgeBase;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::HarnessError;
use assay_project::expectations::{HistoryChange, HistoryFile, HumanOverride};
use assay_project::history::{append_history, history_dir};
use assay_project::project::Project;

/// The `calibration_trigger` of a history file that records an override.
pub const OVERRIDE_TRIGGER: &str = "human_override";

/// A clinician's decision on one case.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideRequest {
    /// The semantic case.
    pub test_id: String,
    /// The expectations decided on.
    pub expectations: ExpectationSet,
    /// Why (required).
    pub reason: String,
    /// Who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
}

/// What [`record_override`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideOutcome {
    /// The case.
    pub test_id: String,
    /// The expectations in force before.
    pub previous: ExpectationSet,
    /// Where they came from (`original`, `opus_<date>`, `human_override_<date>`).
    pub previous_source: String,
    /// The override recorded.
    pub human_override: HumanOverride,
    /// The new history file.
    pub history_file: PathBuf,
}

/// Parses a rank check written `higher>lower`.
pub fn parse_rank_check(text: &str) -> Result<RankCheck, HarnessError> {
    match text.split_once('>') {
        Some((higher, lower)) if !higher.trim().is_empty() && !lower.trim().is_empty() => {
            Ok(RankCheck {
                higher: higher.trim().to_owned(),
                lower: lower.trim().to_owned(),
            })
        }
        _ => Err(HarnessError::Usage(format!(
            "rank check `{text}` must be written HIGHER>LOWER (two entity ids)"
        ))),
    }
}

/// Checks an override against the project: the case exists in a semantic bank, the reason is
/// not empty, `expected_primary` is not empty, every id is a knowledge-base entity, no id is in
/// two lists, and rank checks are between expected entities. All problems are reported together.
pub fn validate_override(project: &Project, request: &OverrideRequest) -> Result<(), HarnessError> {
    let mut problems = Vec::new();
    if !project
        .banks
        .semantic
        .iter()
        .any(|l| l.case.test_id == request.test_id)
    {
        problems.push(format!(
            "unknown test id `{}`: no semantic case has it",
            request.test_id
        ));
    }
    if request.reason.trim().is_empty() {
        problems.push("the reason is empty (say why the override is right)".to_owned());
    }
    let e = &request.expectations;
    if e.expected_primary.is_empty() {
        problems.push("expected_primary is empty (at least one entity is required)".to_owned());
    }
    let lists = [
        ("expected_primary", &e.expected_primary),
        ("expected_secondary", &e.expected_secondary),
        ("not_expected", &e.not_expected),
    ];
    let ranked = e.rank_check.iter().flat_map(|r| [&r.higher, &r.lower]);
    let mut unknown = Vec::new();
    for id in lists.iter().flat_map(|(_, ids)| ids.iter()).chain(ranked) {
        if !project.kb.kb.contains(id)? && !unknown.contains(&id) {
            unknown.push(id);
        }
    }
    for id in unknown {
        problems.push(format!("unknown entity `{id}` (not in the knowledge base)"));
    }
    for (i, (a_name, a)) in lists.iter().enumerate() {
        for (b_name, b) in &lists[i + 1..] {
            for id in a.iter().filter(|id| b.contains(id)) {
                problems.push(format!("`{id}` is in both {a_name} and {b_name}"));
            }
        }
    }
    let expected: HashSet<&str> = e
        .expected_primary
        .iter()
        .chain(&e.expected_secondary)
        .map(String::as_str)
        .collect();
    for r in &e.rank_check {
        for id in [&r.higher, &r.lower] {
            if !expected.contains(id.as_str()) {
                problems.push(format!(
                    "rank check {}>{}: `{id}` is not an expected entity",
                    r.higher, r.lower
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(HarnessError::Usage(format!(
            "cannot record the override: {}",
            problems.join("; ")
        )))
    }
}

/// Records a human override dated `now` (UTC date) in a new history file; see the module docs.
/// Invalid input is a usage error and writes nothing.
pub fn record_override(
    project: &Project,
    request: &OverrideRequest,
    now: DateTime<Utc>,
) -> Result<OverrideOutcome, HarnessError> {
    validate_override(project, request)?;
    let case = project
        .banks
        .semantic
        .iter()
        .map(|l| &l.case)
        .find(|c| c.test_id == request.test_id)
        .ok_or_else(|| HarnessError::Usage(format!("unknown test id `{}`", request.test_id)))?;
    let resolved = project.expectations.resolve(case);
    let date = now.format("%Y-%m-%d").to_string();
    let e = &request.expectations;
    let human_override = HumanOverride {
        expected_primary: e.expected_primary.clone(),
        expected_secondary: e.expected_secondary.clone(),
        not_expected: e.not_expected.clone(),
        rank_check: e.rank_check.clone(),
        override_date: Some(date.clone()),
        reason: Some(request.reason.trim().to_owned()),
        reviewer: request
            .reviewer
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_owned),
    };
    let file = HistoryFile {
        schema: None,
        version: Some(now.to_rfc3339_opts(SecondsFormat::Secs, true)),
        calibration_trigger: Some(OVERRIDE_TRIGGER.to_owned()),
        kb_version: None,
        changes: vec![HistoryChange {
            test_id: case.test_id.clone(),
            previous: Some(resolved.expectations.clone()),
            updated: None,
            opus_reasoning: None,
            human_override: Some(human_override.clone()),
        }],
        unchanged_count: None,
        changed_count: Some(1),
    };
    let history_file = append_history(&history_dir(&project.settings), &date, &file)?;
    Ok(OverrideOutcome {
        test_id: case.test_id.clone(),
        previous: resolved.expectations,
        previous_source: resolved.source.to_string(),
        human_override,
        history_file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_checks_parse() {
        let r = parse_rank_check("a > b").unwrap();
        assert_eq!((r.higher.as_str(), r.lower.as_str()), ("a", "b"));
        for bad in ["a", ">b", "a>", ""] {
            assert!(
                parse_rank_check(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("HIGHER>LOWER")
            );
        }
    }
}
