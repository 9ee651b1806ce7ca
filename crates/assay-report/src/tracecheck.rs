//! The console summary of `assay traces check`: the counts, the disagreements by kind and by
//! entity, the first spans of each kind, and what was skipped, with where the full list is.

use std::fmt::Write as _;

use assay_core::tracecheck::{DisagreementKind, SpanCheck, TraceCheckReport};

/// How many spans of each kind, entities and problems the summary lists unless asked for all.
pub const LIST: usize = 3;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn clip(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let cut: String = one_line.chars().take(max - 1).collect();
        format!("{cut}…")
    }
}

/// The summary; `all` lists every disagreeing span, entity and problem instead of the first
/// few.
pub fn render(report: &TraceCheckReport, all: bool) -> String {
    let mut out = String::new();
    let limit = if all { usize::MAX } else { LIST };
    let _ = writeln!(
        out,
        "Checked {} from {} (embedder {}): {} agree, {} disagree{}.",
        plural(report.checked, "retrieval span", "retrieval spans"),
        plural(report.files.len(), "file", "files"),
        report.embedder,
        report.agreeing,
        report.disagreeing,
        if report.errored > 0 {
            format!(", {} could not be checked", report.errored)
        } else {
            String::new()
        }
    );
    if report.other_spans > 0 {
        let _ = writeln!(
            out,
            "{}, not checked.",
            plural(
                report.other_spans,
                "span is not a retrieval span",
                "spans are not retrieval spans"
            )
        );
    }
    if !report.problems.is_empty() {
        let _ = writeln!(
            out,
            "{} skipped (listed below).",
            plural(
                report.problems.len(),
                "malformed span or line",
                "malformed spans or lines"
            )
        );
    }
    if !report.by_kind.is_empty() {
        out.push_str("\nDisagreements by kind:\n");
        for kind in DisagreementKind::ALL {
            if let Some(n) = report.by_kind.get(&kind) {
                let _ = writeln!(out, "  {:<17} {n:>5}  {}", kind.as_str(), kind.describe());
            }
        }
        out.push_str("\nBy entity:\n");
        for e in report.by_entity.iter().take(limit.max(10)) {
            let parts: Vec<String> = DisagreementKind::ALL
                .iter()
                .filter_map(|k| e.by_kind.get(k).map(|n| format!("{} {n}", k.as_str())))
                .collect();
            let _ = writeln!(
                out,
                "  {:<32} {:>5}  {}",
                e.entity_id,
                e.total,
                parts.join(", ")
            );
        }
        if !all && report.by_entity.len() > 10 {
            let _ = writeln!(
                out,
                "  … and {} more",
                plural(report.by_entity.len() - 10, "entity", "entities")
            );
        }
        for kind in DisagreementKind::ALL {
            let spans: Vec<&SpanCheck> = report
                .spans
                .iter()
                .filter(|s| s.disagreements.iter().any(|d| d.kind == kind))
                .collect();
            if spans.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{} ({}):", kind.as_str(), kind.describe());
            for s in spans.iter().take(limit) {
                let what: Vec<String> = s
                    .disagreements
                    .iter()
                    .filter(|d| d.kind == kind)
                    .map(|d| match (kind, &d.pattern) {
                        (DisagreementKind::CrisisUnhandled, Some(p)) => {
                            format!("`{}` needs {}", p, d.entities.join(" or "))
                        }
                        (DisagreementKind::Rank, _) => format!(
                            "{} (production #{}, assay #{})",
                            d.entity_id,
                            d.production_rank.unwrap_or(0),
                            d.assay_rank.unwrap_or(0)
                        ),
                        _ => d.entity_id.clone(),
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "  {}  span {}  \"{}\"\n      {}",
                    s.position,
                    s.span_id,
                    clip(&s.query, 60),
                    what.join(", ")
                );
            }
            if spans.len() > limit {
                let _ = writeln!(
                    out,
                    "  … and {} more",
                    plural(spans.len() - limit, "span", "spans")
                );
            }
        }
    }
    let errored: Vec<&SpanCheck> = report.spans.iter().filter(|s| s.error.is_some()).collect();
    if !errored.is_empty() {
        out.push_str("\nNot checked:\n");
        for s in errored.iter().take(limit) {
            let _ = writeln!(
                out,
                "  {}  span {}: {}",
                s.position,
                s.span_id,
                s.error.as_deref().unwrap_or("")
            );
        }
        if errored.len() > limit {
            let _ = writeln!(
                out,
                "  … and {} more",
                plural(errored.len() - limit, "span", "spans")
            );
        }
    }
    if !report.problems.is_empty() {
        out.push_str("\nSkipped:\n");
        for p in report.problems.iter().take(limit.max(5)) {
            let _ = writeln!(out, "  {p}");
        }
        if !all && report.problems.len() > 5 {
            let _ = writeln!(out, "  … and {} more", report.problems.len() - 5);
        }
    }
    if !all
        && (report.disagreeing > LIST || report.problems.len() > 5 || report.by_entity.len() > 10)
    {
        out.push_str("\n--all lists every span; --json prints every span's result.\n");
    }
    out
}
