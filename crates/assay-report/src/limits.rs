//! How the providers' rate limits shaped a run's calls ([`RateLimitRecord`]), as every report
//! shows it: only when a limit showed itself (an answer said slow down, a caller was held back,
//! or the concurrency went below its ceiling), so an unlimited run reads as before.

use std::fmt::Write;

use assay_core::runlog::RateLimitRecord;

/// The records worth showing.
fn shown(records: &[RateLimitRecord]) -> Vec<&RateLimitRecord> {
    records.iter().filter(|r| r.limited()).collect()
}

/// The model, and the shared limiter its calls were counted against where it has one:
/// `openai/a (limit shared as shared:auto (openai/a, openai/b))`.
fn model(r: &RateLimitRecord) -> String {
    match &r.limiter {
        Some(limiter) => format!("{} (limit shared as {limiter})", r.model),
        None => r.model.clone(),
    }
}

/// One line per limited model: `openai/m: 3 of 120 requests answered 429/529 (2.5%), 4.2 s
/// held back, concurrency settled at 6 of 16 (lowest 4)`.
fn line(r: &RateLimitRecord) -> String {
    format!(
        "{}: {} of {} requests answered 429/529 ({:.1}%), {:.1} s held back, concurrency settled at {} of {} (lowest {})",
        model(r),
        r.throttled,
        r.requests,
        r.throttled_percent(),
        r.wait_ms as f64 / 1000.0,
        r.concurrency,
        r.ceiling,
        r.min_concurrency
    )
}

/// A Markdown section `## Rate limits` with a table (empty when nothing to show).
pub(crate) fn markdown(records: &[RateLimitRecord]) -> String {
    let shown = shown(records);
    let mut out = String::new();
    if shown.is_empty() {
        return out;
    }
    let _ = writeln!(out, "## Rate limits\n");
    let _ = writeln!(
        out,
        "| model | requests | answered 429/529 | held back (s) | concurrency settled | lowest | ceiling |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for r in shown {
        let _ = writeln!(
            out,
            "| {} | {} | {} ({:.1}%) | {:.1} | {} | {} | {} |",
            model(r).replace('|', "\\|"),
            r.requests,
            r.throttled,
            r.throttled_percent(),
            r.wait_ms as f64 / 1000.0,
            r.concurrency,
            r.min_concurrency,
            r.ceiling
        );
    }
    out.push('\n');
    out
}

/// An HTML section (empty when nothing to show); `escape` escapes text.
pub(crate) fn html(records: &[RateLimitRecord], escape: impl Fn(&str) -> String) -> String {
    let shown = shown(records);
    let mut out = String::new();
    if shown.is_empty() {
        return out;
    }
    out.push_str("<h2>Rate limits</h2>\n<ul>\n");
    for r in shown {
        let _ = writeln!(out, "<li>{}</li>", escape(&line(r)));
    }
    out.push_str("</ul>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(throttled: u64, wait_ms: u64, min: usize) -> RateLimitRecord {
        RateLimitRecord {
            model: "openai/m".into(),
            requests: 120,
            throttled,
            wait_ms,
            concurrency: 6,
            min_concurrency: min,
            ceiling: 16,
            limiter: None,
        }
    }

    #[test]
    fn only_limited_models_are_shown() {
        assert_eq!(markdown(&[record(0, 0, 16)]), "");
        let md = markdown(&[record(3, 4200, 4), record(0, 0, 16)]);
        assert_eq!(
            md,
            "## Rate limits\n\n| model | requests | answered 429/529 | held back (s) | concurrency settled | lowest | ceiling |\n|---|---:|---:|---:|---:|---:|---:|\n| openai/m | 120 | 3 (2.5%) | 4.2 | 6 | 4 | 16 |\n\n"
        );
        assert_eq!(
            line(&record(3, 4200, 4)),
            "openai/m: 3 of 120 requests answered 429/529 (2.5%), 4.2 s held back, concurrency settled at 6 of 16 (lowest 4)"
        );
        assert!(html(&[record(1, 0, 16)], str::to_owned).contains("<h2>Rate limits</h2>"));
    }

    #[test]
    fn a_shared_limiter_is_named_beside_the_model() {
        let pooled = RateLimitRecord {
            limiter: Some("shared:auto (openai/a, openai/m)".into()),
            ..record(3, 4200, 4)
        };
        assert!(
            line(&pooled).starts_with(
                "openai/m (limit shared as shared:auto (openai/a, openai/m)): 3 of 120 requests"
            ),
            "{}",
            line(&pooled)
        );
        assert!(
            markdown(&[pooled])
                .contains("| openai/m (limit shared as shared:auto (openai/a, openai/m)) | 120 |")
        );
    }
}
