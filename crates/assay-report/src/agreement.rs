//! Renderings of a judge's agreement with people ([`AgreementReport`], `assay judge agree`):
//! for the console and as Markdown.

use std::fmt::Write as _;

use assay_core::agreement::{AgreementReport, Scale};

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.digits$}"))
}

fn scale(s: Scale) -> &'static str {
    match s {
        Scale::ZeroToTen => "0-10",
        Scale::PassFail => "pass/fail",
        Scale::Unit => "0-1",
        Scale::Boolean => "true/false",
    }
}

/// A kappa as it is printed and compared: rounded to two decimals, so that the band named, the
/// number shown and `--min-kappa` always agree (0.6046 is 0.60: moderate).
pub fn kappa_rounded(k: f64) -> f64 {
    (k * 100.0).round() / 100.0
}

/// A kappa in words, by Landis and Koch's bands on the rounded value: below 0 worse than
/// chance, 0.00–0.20 slight, 0.21–0.40 fair, 0.41–0.60 moderate, 0.61–0.80 substantial,
/// 0.81–1.00 almost perfect.
pub fn kappa_words(k: Option<f64>) -> &'static str {
    match k.map(kappa_rounded) {
        None => "undefined",
        Some(k) if k < 0.0 => "worse than chance",
        Some(k) if k <= 0.20 => "slight",
        Some(k) if k <= 0.40 => "fair",
        Some(k) if k <= 0.60 => "moderate",
        Some(k) if k <= 0.80 => "substantial",
        Some(_) => "almost perfect",
    }
}

/// A score as the reports print it: up to two decimals, trailing zeros dropped (0.85, 0.1, 7).
pub fn score(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

/// The agreement for a terminal: one line per criterion, the verdicts, the overall share with
/// its interval, and the worst few disagreements.
pub fn console(r: &AgreementReport) -> String {
    let m = &r.measurement;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Judge agreement: {} ({} judge, version {}) against {} labelled item(s) in {}{}",
        r.judge_model,
        r.kind,
        r.judge_version,
        r.items,
        r.labels,
        if r.samples > 1 {
            format!(", {} samples each", r.samples)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "  {:<24} {:>10} {:>3} {:>7} {:<16} {:>8} {:>6} {:>9}",
        "criterion", "scale", "n", "kappa", "", "spearman", "mae", "agreement"
    );
    for c in &m.criteria {
        let _ = writeln!(
            out,
            "  {:<24} {:>10} {:>3} {:>7} {:<16} {:>8} {:>6} {:>8.0}%",
            c.id,
            scale(c.scale),
            c.n,
            opt(c.kappa, 2),
            format!("({})", kappa_words(c.kappa)),
            opt(c.spearman, 2),
            opt(c.mae, 2),
            c.agreement * 100.0
        );
    }
    if let Some(o) = &m.overall {
        let _ = writeln!(
            out,
            "  overall agreement {:.0}% ({:.0}% CI {:.0}–{:.0}%, {} scores; within a point of ten, or the same category)",
            o.estimate * 100.0,
            o.level * 100.0,
            o.low * 100.0,
            o.high * 100.0,
            o.n
        );
    }
    if let Some(v) = &m.verdicts {
        let _ = writeln!(
            out,
            "  verdicts: agree on {:.0}% of {}{} · kappa {} ({}); too lenient on {}, too strict on {}",
            v.agreement * 100.0,
            v.n,
            v.interval.as_ref().map_or_else(String::new, |i| format!(
                " ({:.0}% CI {:.0}–{:.0}%)",
                i.level * 100.0,
                i.low * 100.0,
                i.high * 100.0
            )),
            opt(v.kappa, 2),
            kappa_words(v.kappa),
            if v.judge_too_lenient.is_empty() {
                "none".to_owned()
            } else {
                v.judge_too_lenient.join(", ")
            },
            if v.judge_too_strict.is_empty() {
                "none".to_owned()
            } else {
                v.judge_too_strict.join(", ")
            }
        );
    }
    if let Some(f) = r.flip_share {
        let _ = writeln!(
            out,
            "  self-consistency: the verdict flipped between samples on {:.0}% of items",
            f * 100.0
        );
    }
    if !m.disagreements.is_empty() {
        let _ = writeln!(out, "  largest disagreements (person → judge):");
        for d in m.disagreements.iter().take(5) {
            let _ = writeln!(
                out,
                "    {} {}: {} → {}",
                d.item,
                d.criterion,
                score(d.human),
                score(d.judge)
            );
        }
        if m.disagreements.len() > 5 {
            let _ = writeln!(
                out,
                "    … and {} more (--json lists every item)",
                m.disagreements.len() - 5
            );
        }
    }
    for e in &r.errors {
        let _ = writeln!(out, "  error: {e}");
    }
    out
}
