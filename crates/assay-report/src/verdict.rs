//! A case's stored verdict ([`assay_core::verdict`]) as the Markdown and HTML reports show it,
//! the same on every page: a badge beside the case's score, then the checks that failed it.

use std::fmt::Write as _;

use assay_core::verdict::{Outcome, Verdict};

use crate::common::escape;

/// Markdown: `passed`, `**FAILED**` or `error`, beside a case's score.
pub(crate) fn markdown_badge(v: &Verdict) -> &'static str {
    match v.outcome {
        Outcome::Pass => "passed",
        Outcome::Fail => "**FAILED**",
        Outcome::Error => "error",
    }
}

/// Markdown: the verdict's line of a case entry, `**Verdict:** failed: <the checks>`.
pub(crate) fn markdown_line(v: &Verdict) -> String {
    let summary = v.summary();
    if summary.is_empty() {
        format!("**Verdict:** {}", v.outcome.label())
    } else {
        format!(
            "**Verdict:** {}: {}",
            v.outcome.label(),
            summary.replace(['\n', '\r'], " ")
        )
    }
}

/// HTML: the verdict's badge, its outcome in `data-verdict`, the checks in its title.
pub(crate) fn html_badge(v: &Verdict) -> String {
    format!(
        "<span class=\"verdict v-{}\" data-verdict=\"{}\" title=\"{}\">{}</span>",
        v.outcome.as_str(),
        v.outcome.as_str(),
        escape(&v.summary()),
        v.outcome.label()
    )
}

/// HTML: one `<li>` per failed check (or the error).
pub(crate) fn html_items(out: &mut String, v: &Verdict) {
    for c in &v.failed {
        let _ = writeln!(
            out,
            "<li class=\"unwanted\"><strong>Failed:</strong> {}</li>",
            escape(&c.message)
        );
    }
    if let Some(e) = &v.error {
        let _ = writeln!(
            out,
            "<li class=\"unwanted\"><strong>Error:</strong> {}</li>",
            escape(e)
        );
    }
}

/// One row of a "failed cases by rule" table, its cells written by the format: the first
/// cases (`code` writes an id), "… N more" when there are more, and the names that failed
/// most often (`text` writes a name; "—" for none). Markdown and HTML share it.
pub(crate) fn rule_cells(
    r: &assay_core::aggregate::RuleTally,
    code: impl Fn(&str) -> String,
    text: impl Fn(&str) -> String,
) -> (String, String) {
    let mut ids = r
        .test_ids
        .iter()
        .map(|i| code(i))
        .collect::<Vec<_>>()
        .join(", ");
    let more = r.cases.saturating_sub(r.test_ids.len());
    if more > 0 {
        let _ = write!(ids, ", … {more} more");
    }
    let named = r
        .named
        .iter()
        .take(3)
        .map(|(n, c)| format!("{} ({c})", text(n)))
        .collect::<Vec<_>>()
        .join(", ");
    let named = if named.is_empty() {
        "—".to_owned()
    } else {
        named
    };
    (ids, named)
}
