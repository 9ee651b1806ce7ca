//! The pieces the report formats share, so that no format takes them from another: the escape
//! function of HTML and XML, the HTML style sheet and case links, the lists of ids and the
//! lines (a breakdown's penalties, `--changed-since`, stale entities) that the console,
//! Markdown and HTML reports all write.

use std::fmt::Write;

use assay_core::bank::BankType;
use assay_core::runlog::ChangedSince;
use assay_core::scoring::Breakdown;

/// Escapes text for XML attributes and content.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The report's style sheet (scoped under `.report`), inlined in [`crate::html::render`]'s
/// document and used by the web UI's run pages.
pub const STYLE: &str = include_str!("report.css");

/// Where the report's case ids link to: the self-contained file links nowhere ([`NoLinks`]),
/// the web UI links every case id to the case's own page.
pub trait CaseLinks {
    /// The page of case `test_id` of `bank`, when it has one.
    fn case(&self, _bank: BankType, _test_id: &str) -> Option<String> {
        None
    }
}

/// No links: the self-contained file.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLinks;

impl CaseLinks for NoLinks {}

pub(crate) fn list(items: &[String]) -> String {
    if items.is_empty() {
        "—".to_owned()
    } else {
        items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One line per penalty of a breakdown.
pub fn breakdown_lines(b: &Breakdown) -> Vec<String> {
    let mut lines = Vec::new();
    if b.primary_fail == Some(true) {
        lines.push(format!(
            "hard fail: {}",
            b.reason.as_deref().unwrap_or("primary expectation not met")
        ));
    }
    if let Some(p) = &b.secondary_missing {
        lines.push(format!(
            "{} secondary missing: {}",
            p.penalty,
            list(&p.items)
        ));
    }
    if let Some(p) = &b.false_positives {
        lines.push(format!("{} false positives: {}", p.penalty, list(&p.items)));
    }
    if let Some(p) = &b.rank_violations {
        let items: Vec<String> = p
            .items
            .iter()
            .map(|v| {
                format!(
                    "`{}` (#{}) should rank above `{}` (#{})",
                    v.expected_higher, v.actual_higher_rank, v.expected_lower, v.actual_lower_rank
                )
            })
            .collect();
        lines.push(format!(
            "{} rank violations: {}",
            p.penalty,
            items.join("; ")
        ));
    }
    if let Some(p) = &b.wrong_handlers {
        lines.push(format!("{} wrong handlers: {}", p.penalty, list(&p.items)));
    }
    lines
}

/// `a, b, c` and `… N more` past `max`.
pub(crate) fn id_list(ids: &[&str], max: usize) -> String {
    let mut s = ids.iter().take(max).copied().collect::<Vec<_>>().join(", ");
    if ids.len() > max {
        let _ = write!(s, ", … {} more", ids.len() - max);
    }
    s
}

/// What `--changed-since` ran: "changed since run X: 2 entities (a, b); ran 5 cases, skipped 40".
pub fn changed_line(changed: &ChangedSince) -> String {
    let ids: Vec<&str> = changed.entities.iter().map(String::as_str).collect();
    let mut list = id_list(&ids, 5);
    if changed.entity_count > ids.len() && ids.len() <= 5 {
        let _ = write!(list, ", … {} more", changed.entity_count - ids.len());
    }
    format!(
        "changed since {} (run {}): {} entit{} ({list}); ran {} case{} that name them, skipped {}",
        changed.reference,
        changed.run_id,
        changed.entity_count,
        if changed.entity_count == 1 {
            "y"
        } else {
            "ies"
        },
        changed.ran,
        if changed.ran == 1 { "" } else { "s" },
        changed.skipped
    )
}

/// Stale cases the reports list one by one (the RunLog has up to `STALE_LISTED`).
pub(crate) const STALE_SHOWN: usize = 200;

/// What a stale entity is compared with, in words: "v1 → v3", "accepted run → v3", "removed".
pub(crate) fn stale_versions(e: &assay_core::runlog::StaleEntity) -> String {
    let since = match (e.since_version, e.reference) {
        (Some(v), _) => format!("v{v}"),
        (None, assay_core::runlog::StaleReference::Accepted) => "the accepted run".to_owned(),
        (None, assay_core::runlog::StaleReference::Provenance) => "?".to_owned(),
    };
    match e.current_version {
        Some(v) => format!("{since} → v{v}"),
        None => format!("{since} → removed"),
    }
}

/// The changed fields of a stale entity, each with its old and new value where the RunLog
/// has them (`priority: 50 → 77`, values clipped), or why they are not known.
pub(crate) fn stale_fields(e: &assay_core::runlog::StaleEntity) -> String {
    if !e.changes.is_empty() {
        e.changes
            .iter()
            .map(|c| format!("{}: {} → {}", c.field, c.old, c.new))
            .collect::<Vec<_>>()
            .join("; ")
    } else if !e.fields.is_empty() {
        e.fields.join(", ")
    } else if e.current_version.is_none() {
        "the entity is no longer in the knowledge base".to_owned()
    } else {
        "content changed (the earlier version is not in the store's history)".to_owned()
    }
}
