//! An answer case checked beyond its JSON shape, as a project is loaded: the checks that
//! need no model (a message, assertions that parse, minimums that are shares, trajectory
//! rules that can hold).

use assay_core::answer::{AnswerCase, Metric};
use assay_core::assertion::AssertionSet;

/// Checks an answer case beyond its JSON shape: a message, assertions that parse, minimums
/// that are shares, trajectory rules that can hold. The error names the field
/// (`assert[1].value: …`, `minimum.faithfulness: …`, `trajectory.order[1]: …`).
pub fn validate_case(case: &AnswerCase) -> Result<(), String> {
    if case.message.trim().is_empty() {
        return Err("message: is empty".into());
    }
    assertions(case)?;
    for (metric, min) in &case.minimum {
        if !(min.is_finite() && (0.0..=1.0).contains(min)) {
            return Err(format!(
                "minimum.{metric}: must be a share between 0 and 1, found {min}"
            ));
        }
    }
    if let Some(metrics) = &case.metrics {
        let mut seen = std::collections::BTreeSet::new();
        for m in metrics {
            if !seen.insert(*m) {
                return Err(format!("metrics: `{m}` is listed twice"));
            }
        }
        if metrics.contains(&Metric::ContextRecall) && case.reference.is_none() {
            return Err(
                "metrics: `context_recall` needs a `reference` answer, and the case has none"
                    .into(),
            );
        }
    }
    if case.reference.as_ref().is_some_and(|r| r.trim().is_empty()) {
        return Err("reference: is empty (leave it out when there is none)".into());
    }
    if let Some(rules) = &case.trajectory {
        rules.validate().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The case's assertions, parsed (`None` when it has none).
pub fn assertions(case: &AnswerCase) -> Result<Option<AssertionSet>, String> {
    match &case.assert {
        None if case.assert_threshold.is_some() => {
            Err("assert_threshold: given without `assert`".into())
        }
        None => Ok(None),
        Some(list) => AssertionSet::parse(list, case.assert_threshold, "assert")
            .map(Some)
            .map_err(|e| e.to_string()),
    }
}
