//! Renderings of a judge's agreement with people ([`AgreementReport`], `assay judge agree`)
//! for the console, the criteria in the judge's order. `--json` is the report itself.

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

/// `n thing` or `n things`.
fn plural(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
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
    if r.unscored > 0 {
        let _ = writeln!(
            out,
            "  {} unscored, skipped (no score and no verdict)",
            plural(r.unscored, "item")
        );
    }
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
    if let Some(c) = &r.consistency {
        let _ = writeln!(
            out,
            "  uncertain (the verdict flipped across the {} samples; left out of the verdicts): {}",
            c.samples,
            if c.uncertain.is_empty() {
                "none".to_owned()
            } else {
                c.uncertain.join(", ")
            }
        );
        let _ = writeln!(
            out,
            "  self-consistency: the verdict flipped between samples on {:.0}% of items ({} of {})",
            r.flip_share.unwrap_or_default() * 100.0,
            c.uncertain.len(),
            c.judged
        );
        if !c.criteria.is_empty() {
            let _ = writeln!(
                out,
                "  spread across samples (the judge's score: mean standard deviation; items whose samples disagree):"
            );
            for s in &c.criteria {
                let _ = writeln!(
                    out,
                    "    {:<24} {:>10}  sd {:>5}  unstable on {} of {}",
                    s.id,
                    scale(s.scale),
                    format!("{:.2}", s.mean_sd),
                    s.unstable,
                    s.n
                );
            }
        }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use assay_core::agreement::{Criterion, JudgeSample, JudgedItem, ReportHead, report};

    use super::*;

    fn scores(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    /// Three samples, one item the judge flips on, one it passes against the person, two
    /// items unscored: the criteria in the suite's order (not the alphabet's), the uncertain
    /// item apart from "too lenient", the spread per criterion.
    #[test]
    fn console_with_samples_lists_uncertain_items_apart() {
        let criteria = [
            Criterion::new("scope_adherence", Scale::ZeroToTen),
            Criterion::new("accuracy", Scale::ZeroToTen),
            Criterion::new("ypt_compliance", Scale::PassFail),
        ];
        let human = scores(&[
            ("scope_adherence", 8.0),
            ("accuracy", 7.0),
            ("ypt_compliance", 10.0),
        ]);
        let steady = |passes: bool, acc: f64| {
            (0..3)
                .map(|_| JudgeSample {
                    scores: scores(&[
                        ("scope_adherence", 8.0),
                        ("accuracy", acc),
                        ("ypt_compliance", 10.0),
                    ]),
                    passes,
                })
                .collect::<Vec<_>>()
        };
        let flip = vec![
            JudgeSample {
                scores: scores(&[
                    ("scope_adherence", 8.0),
                    ("accuracy", 9.0),
                    ("ypt_compliance", 10.0),
                ]),
                passes: true,
            },
            JudgeSample {
                scores: scores(&[
                    ("scope_adherence", 6.0),
                    ("accuracy", 2.0),
                    ("ypt_compliance", 0.0),
                ]),
                passes: false,
            },
            JudgeSample {
                scores: scores(&[
                    ("scope_adherence", 8.0),
                    ("accuracy", 9.0),
                    ("ypt_compliance", 10.0),
                ]),
                passes: true,
            },
        ];
        let item = |name: &str, verdict: bool, samples: Vec<JudgeSample>| JudgedItem {
            item: name.into(),
            human: human.clone(),
            human_verdict: Some(verdict),
            samples,
        };
        let r = report(
            ReportHead {
                kind: "simulation".into(),
                judge_model: "openai/judge".into(),
                judge_version: "0123456789abcdef".into(),
                labels: "sim/labels.yaml".into(),
                samples: 3,
                unscored: 2,
            },
            &criteria,
            &[
                item("daily_chore#1", true, steady(true, 7.0)),
                item("daily_chore#2", false, flip),
                item("off_topic#1", false, steady(true, 8.0)),
                item("off_topic#2", false, steady(false, 3.0)),
            ],
            Vec::new(),
        );
        let text = console(&r);
        assert!(
            text.contains("uncertain (the verdict flipped across the 3 samples; left out of the verdicts): daily_chore#2"),
            "{text}"
        );
        assert!(
            text.contains("too lenient on off_topic#1, too strict on none"),
            "{text}"
        );
        assert!(text.contains("2 items unscored, skipped"), "{text}");
        let at = |needle: &str| text.find(needle).unwrap();
        assert!(at("  scope_adherence") < at("  accuracy"), "{text}");
        insta::assert_snapshot!(text);
    }
}
