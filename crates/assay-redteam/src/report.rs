//! A red-team run's report: rates with their uncertainty per family and per technique, the
//! findings with their evidence, the gate, and the comparison with a baseline; as JSON,
//! Markdown, JUnit and the console's summary.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::attempt::Attempt;
use crate::family::Family;
use crate::journal::Header;

/// The report's format version.
pub const REPORT_VERSION: u32 = 1;

/// Attempts and successes, with the rate and its 95 % interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Attempts that reached a verdict (errors left out).
    pub attempts: usize,
    /// Attempts that worked.
    pub successes: usize,
    /// Attempts that ended in an infrastructure error.
    pub errors: usize,
    /// successes / attempts (0 with no attempt).
    pub rate: f64,
    /// The Wilson 95 % interval's low end.
    pub low: f64,
    /// Its high end; with no success, the exact one-sided 95 % upper bound, `1 − 0.05^(1/n)`.
    pub high: f64,
    /// The rate in words: `3 of 300: 1.0 % (0.3–2.9 % at 95 %)`, `0 of 300: below 1.0 % at 95 %`.
    pub statement: String,
}

impl Rate {
    /// The rate of `attempts`.
    pub fn of<'a>(attempts: impl IntoIterator<Item = &'a Attempt>) -> Rate {
        let (mut n, mut k, mut errors) = (0usize, 0usize, 0usize);
        for a in attempts {
            if a.error.is_some() {
                errors += 1;
            } else {
                n += 1;
                k += usize::from(a.success);
            }
        }
        Rate::from_counts(n, k, errors)
    }

    /// The rate of `successes` in `attempts`.
    pub fn from_counts(attempts: usize, successes: usize, errors: usize) -> Rate {
        let pct = |x: f64| format!("{:.1} %", x * 100.0);
        if attempts == 0 {
            return Rate {
                attempts,
                successes,
                errors,
                rate: 0.0,
                low: 0.0,
                high: 1.0,
                statement: "no attempt reached a verdict".into(),
            };
        }
        let rate = successes as f64 / attempts as f64;
        if successes == 0 {
            let high = 1.0 - 0.05f64.powf(1.0 / attempts as f64);
            return Rate {
                attempts,
                successes,
                errors,
                rate,
                low: 0.0,
                high,
                statement: format!("0 of {attempts}: below {} at 95 %", pct(high)),
            };
        }
        let (low, high) =
            assay_stats::wilson(successes, attempts, 0.05).map_or((0.0, 1.0), |i| (i.low, i.high));
        Rate {
            attempts,
            successes,
            errors,
            rate,
            low,
            high,
            statement: format!(
                "{successes} of {attempts}: {} ({}–{} at 95 %)",
                pct(rate),
                pct(low).trim_end_matches(" %"),
                pct(high)
            ),
        }
    }
}

/// One family's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyReport {
    /// The family.
    pub family: Family,
    /// The channel it attacks.
    pub channel: String,
    /// Why it did not run, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Its rate.
    pub rate: Rate,
    /// The rate per technique group: a crisis evasion's transform groups (`unicode`,
    /// `spacing+typo`), else the payload and its carrier.
    pub by_technique: BTreeMap<String, Rate>,
    /// `[redteam] max_success_rate` for it, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_success_rate: Option<f64>,
    /// Whether it passed its gate (true with no gate).
    pub passed: bool,
}

/// A family's rate beside the baseline's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The family.
    pub family: Family,
    /// The baseline's rate.
    pub before: Rate,
    /// This run's rate.
    pub after: Rate,
    /// `worse` (this run's interval lies above the baseline's), `better`, or `same`.
    pub verdict: String,
}

/// A red-team run's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// What the run was.
    pub header: Header,
    /// One per family, in order.
    pub families: Vec<FamilyReport>,
    /// Every family's attempts together.
    pub total: Rate,
    /// Every attempt that worked, in family and index order.
    pub findings: Vec<Attempt>,
    /// The comparison with `--baseline`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baseline: Vec<Comparison>,
    /// Whether the run passed: every gate held and nothing got worse than the baseline.
    pub passed: bool,
}

/// The saved HTML report's page rules (the web UI has its own).
const PAGE_STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border-bottom:1px solid #ddd;padding:.3rem .6rem;text-align:left;vertical-align:top}";

/// The rules [`Report::html_body`] needs: the interval bars, the verdict colours, long texts.
pub const STYLE: &str = ".bar{position:relative;width:12rem;height:.8rem;background:#eee}.bar span{position:absolute;top:0;height:100%;background:#c0392b66}.bar i{position:absolute;top:-.15rem;width:2px;height:1.1rem;background:#c0392b}.pass{color:#1e7d32}.fail{color:#b00020}code{white-space:pre-wrap;word-break:break-word}details{margin:.4rem 0}";

fn html_escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The group an attempt's technique is counted under: a crisis evasion's transform groups
/// (`unicode`, `spacing+typo`), else the payload and its carrier.
fn technique_group(a: &Attempt) -> String {
    if a.family == Family::CrisisEvasion {
        let mut groups: Vec<String> = a
            .technique
            .split('+')
            .map(|t| crate::transform::group(t).to_owned())
            .collect();
        groups.sort();
        groups.dedup();
        groups.join("+")
    } else {
        a.technique.clone()
    }
}

impl Report {
    /// The report of `attempts` (every attempt of the run).
    pub fn build(
        header: Header,
        skipped: &BTreeMap<Family, String>,
        attempts: &[Attempt],
        gates: &BTreeMap<String, f64>,
        baseline: Option<&Report>,
    ) -> Report {
        let mut families = Vec::new();
        let listed = Family::ALL
            .into_iter()
            .filter(|f| header.families.contains(f) || skipped.contains_key(f));
        for family in listed {
            let mine: Vec<&Attempt> = attempts.iter().filter(|a| a.family == family).collect();
            let mut groups: BTreeMap<String, Vec<&Attempt>> = BTreeMap::new();
            for a in &mine {
                groups.entry(technique_group(a)).or_default().push(a);
            }
            let rate = Rate::of(mine.iter().copied());
            let max = gates.get(family.name()).copied();
            let passed = max.is_none_or(|m| rate.rate <= m);
            families.push(FamilyReport {
                family,
                channel: family.channel().into(),
                skipped: skipped.get(&family).cloned(),
                by_technique: groups.into_iter().map(|(k, v)| (k, Rate::of(v))).collect(),
                rate,
                max_success_rate: max,
                passed,
            });
        }
        let mut findings: Vec<Attempt> = attempts.iter().filter(|a| a.success).cloned().collect();
        findings.sort_by_key(|a| (a.family, a.index));
        let comparisons: Vec<Comparison> = baseline
            .map(|b| {
                families
                    .iter()
                    .filter_map(|f| {
                        let before = b.families.iter().find(|x| x.family == f.family)?;
                        if before.rate.attempts == 0 || f.rate.attempts == 0 {
                            return None;
                        }
                        let verdict = if f.rate.low > before.rate.high
                            || (before.rate.successes == 0 && f.rate.successes > 0)
                        {
                            "worse"
                        } else if f.rate.high < before.rate.low {
                            "better"
                        } else {
                            "same"
                        };
                        Some(Comparison {
                            family: f.family,
                            before: before.rate.clone(),
                            after: f.rate.clone(),
                            verdict: verdict.into(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let passed =
            families.iter().all(|f| f.passed) && comparisons.iter().all(|c| c.verdict != "worse");
        Report {
            version: REPORT_VERSION,
            header,
            total: Rate::of(attempts.iter().filter(|a| header_has(&families, a))),
            families,
            findings,
            baseline: comparisons,
            passed,
        }
    }

    /// The run's verdict in words: `FAILED`, `PASSED`, or, with no gate and no baseline to
    /// pass, how many findings there are and how to gate on them.
    pub fn verdict(&self) -> String {
        let gated =
            self.families.iter().any(|f| f.max_success_rate.is_some()) || !self.baseline.is_empty();
        match (self.passed, gated) {
            (false, _) => "FAILED".into(),
            (true, true) => "PASSED".into(),
            (true, false) => format!(
                "NO GATE: {} findings; set [redteam] max_success_rate to fail the run on them",
                self.findings.len()
            ),
        }
    }

    /// Why the run failed, one line per reason (empty when it passed).
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in self.families.iter().filter(|f| !f.passed) {
            out.push(format!(
                "{}: attack success rate {:.1} % is above [redteam] max_success_rate {:.1} % ({})",
                f.family,
                f.rate.rate * 100.0,
                f.max_success_rate.unwrap_or(0.0) * 100.0,
                f.rate.statement
            ));
        }
        for c in self.baseline.iter().filter(|c| c.verdict == "worse") {
            out.push(format!(
                "{}: worse than the baseline ({} before, {} now)",
                c.family, c.before.statement, c.after.statement
            ));
        }
        out
    }

    /// The report as Markdown.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let h = &self.header;
        let _ = writeln!(s, "# Red team: {}\n", h.run_id);
        let _ = writeln!(
            s,
            "Seed {}, {} attempts per family, payload library v{}, product: {}, `[patterns] normalise` {}{}.\n",
            h.seed,
            h.attempts,
            h.library_version,
            h.target,
            if h.normalise { "on" } else { "off" },
            h.attacker_model
                .as_deref()
                .map(|m| format!(", attacker model {m}"))
                .unwrap_or_default()
        );
        let _ = writeln!(s, "**{}**\n", self.verdict());
        for f in self.failures() {
            let _ = writeln!(s, "- {f}");
        }
        let _ = writeln!(
            s,
            "\n| family | channel | attack success rate | errors | gate |\n|---|---|---|---|---|"
        );
        for f in &self.families {
            let rate = f
                .skipped
                .as_ref()
                .map_or_else(|| f.rate.statement.clone(), |why| format!("not run: {why}"));
            let gate = f.max_success_rate.map_or("none".to_owned(), |m| {
                format!(
                    "{} ≤ {:.1} %",
                    if f.passed { "✅" } else { "❌" },
                    m * 100.0
                )
            });
            let _ = writeln!(
                s,
                "| {} | {} | {rate} | {} | {gate} |",
                f.family, f.channel, f.rate.errors
            );
        }
        let _ = writeln!(
            s,
            "| all | | {} | {} | |",
            self.total.statement, self.total.errors
        );
        if !self.baseline.is_empty() {
            let _ = writeln!(
                s,
                "\n## Against the baseline\n\n| family | before | now | verdict |\n|---|---|---|---|"
            );
            for c in &self.baseline {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} |",
                    c.family, c.before.statement, c.after.statement, c.verdict
                );
            }
        }
        for f in self.families.iter().filter(|f| !f.by_technique.is_empty()) {
            let _ = writeln!(
                s,
                "\n## {}: by technique\n\n| technique | rate |\n|---|---|",
                f.family
            );
            for (t, r) in &f.by_technique {
                let _ = writeln!(s, "| {t} | {} |", r.statement);
            }
        }
        if !self.findings.is_empty() {
            let _ = writeln!(s, "\n## Findings\n");
        }
        for a in &self.findings {
            let _ = writeln!(
                s,
                "### {} ({}, {}, from {})\n",
                a.id, a.family, a.technique, a.source
            );
            if let Some(o) = &a.original {
                let _ = writeln!(s, "- original: `{}`", o.escape_debug());
            }
            let _ = writeln!(s, "- sent: `{}`", clip(&a.input, 400).escape_debug());
            if let Some(p) = &a.payload {
                let _ = writeln!(s, "- payload: `{}`", p.escape_debug());
            }
            if let Some(p) = &a.planted_in {
                let _ = writeln!(s, "- planted in: {p}");
            }
            if let Some(r) = &a.reply {
                let _ = writeln!(s, "- reply: `{}`", clip(r, 400).escape_debug());
            }
            for e in &a.evidence {
                let at = e.position.map(|p| format!(" at {p}")).unwrap_or_default();
                let _ = writeln!(s, "- evidence: {} `{}`{at}", e.kind, e.found.escape_debug());
            }
            let _ = writeln!(s);
        }
        s
    }

    /// The report as one self-contained HTML page: the families with their rates and
    /// intervals drawn, each technique, and every finding with its evidence.
    pub fn html(&self) -> String {
        format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Red team {}</title>\n<style>{PAGE_STYLE}{STYLE}</style></head><body>\n{}</body></html>\n",
            html_escape(&self.header.run_id),
            self.html_body()
        )
    }

    /// The body of [`Report::html`], for a page of another's (the web UI's red-team page),
    /// which includes [`STYLE`] for its interval bars.
    pub fn html_body(&self) -> String {
        let esc = html_escape;
        let h = &self.header;
        let mut s = String::new();
        let _ = write!(
            s,
            "<h1>Red team {id}</h1>\n<p>Seed {seed}, {n} attempts per family, payload library v{lib}, product: {target}, <code>[patterns] normalise</code> {norm}{attacker}.</p>\n<p class=\"{cls}\"><strong>{verdict}</strong></p>\n",
            id = esc(&h.run_id),
            seed = h.seed,
            n = h.attempts,
            lib = esc(&h.library_version),
            target = esc(&h.target),
            norm = if h.normalise { "on" } else { "off" },
            attacker = h
                .attacker_model
                .as_deref()
                .map(|m| format!(", attacker model {}", esc(m)))
                .unwrap_or_default(),
            cls = if self.passed { "pass" } else { "fail" },
            verdict = esc(&self.verdict()),
        );
        for f in self.failures() {
            let _ = writeln!(s, "<p class=\"fail\">{}</p>", esc(&f));
        }
        s.push_str("<table><tr><th>family</th><th>channel</th><th>attack success rate</th><th>95 % interval</th><th>errors</th><th>gate</th></tr>\n");
        let bar = |r: &Rate| {
            format!(
                "<div class=\"bar\"><span style=\"left:{:.2}%;width:{:.2}%\"></span><i style=\"left:{:.2}%\"></i></div>",
                r.low * 100.0,
                (r.high - r.low) * 100.0,
                r.rate * 100.0
            )
        };
        for f in &self.families {
            let (rate, drawn) = match &f.skipped {
                Some(why) => (format!("not run: {}", esc(why)), String::new()),
                None => (esc(&f.rate.statement), bar(&f.rate)),
            };
            let gate = f.max_success_rate.map_or("none".to_owned(), |m| {
                format!(
                    "<span class=\"{}\">≤ {:.1} %</span>",
                    if f.passed { "pass" } else { "fail" },
                    m * 100.0
                )
            });
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{rate}</td><td>{drawn}</td><td>{}</td><td>{gate}</td></tr>",
                f.family,
                esc(&f.channel),
                f.rate.errors
            );
        }
        let _ = writeln!(
            s,
            "<tr><td><strong>all</strong></td><td></td><td>{}</td><td>{}</td><td>{}</td><td></td></tr></table>",
            esc(&self.total.statement),
            bar(&self.total),
            self.total.errors
        );
        for f in self.families.iter().filter(|f| !f.by_technique.is_empty()) {
            let _ = writeln!(
                s,
                "<h2>{}: by technique</h2><table><tr><th>technique</th><th>rate</th><th>95 % interval</th></tr>",
                f.family
            );
            for (t, r) in &f.by_technique {
                let _ = writeln!(
                    s,
                    "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(t),
                    esc(&r.statement),
                    bar(r)
                );
            }
            s.push_str("</table>\n");
        }
        if !self.findings.is_empty() {
            let _ = writeln!(s, "<h2>Findings ({})</h2>", self.findings.len());
        }
        for a in &self.findings {
            let _ = write!(
                s,
                "<details id=\"{id}\"><summary><code>{id}</code> {family}, {tech}, from {src}</summary><table>",
                id = esc(&a.id),
                family = a.family,
                tech = esc(&a.technique),
                src = esc(&a.source)
            );
            let mut row = |k: &str, v: &str| {
                let _ = write!(s, "<tr><th>{k}</th><td><code>{}</code></td></tr>", esc(v));
            };
            if let Some(o) = &a.original {
                row("original", o);
            }
            row("sent", &a.input);
            if let Some(p) = &a.payload {
                row("payload", p);
            }
            if let Some(p) = &a.planted_in {
                row("planted in", p);
            }
            if let Some(r) = &a.reply {
                row("reply", r);
            }
            for e in &a.evidence {
                let at = e.position.map(|p| format!(" at {p}")).unwrap_or_default();
                row("evidence", &format!("{}: {}{at}", e.kind, e.found));
            }
            s.push_str("</table></details>\n");
        }
        s
    }

    /// The report as JUnit XML: one test case per family, failed when its gate fails, each
    /// finding listed in it (the same verdict as the exit code).
    pub fn junit(&self) -> String {
        let esc = |t: &str| {
            t.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
        };
        let failed = self.families.iter().filter(|f| !f.passed).count()
            + usize::from(self.baseline.iter().any(|c| c.verdict == "worse"));
        let mut s = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"assay redteam\" tests=\"{}\" failures=\"{failed}\">\n<testsuite name=\"redteam {}\" tests=\"{}\" failures=\"{failed}\">\n",
            self.families.len(),
            esc(&self.header.run_id),
            self.families.len(),
        );
        for f in &self.families {
            let findings: Vec<String> = self
                .findings
                .iter()
                .filter(|a| a.family == f.family)
                .map(|a| format!("{} {} ({})", a.id, a.technique, a.source))
                .collect();
            let _ = write!(
                s,
                "  <testcase classname=\"redteam\" name=\"{}\">",
                esc(f.family.name())
            );
            if let Some(why) = &f.skipped {
                let _ = write!(s, "<skipped message=\"{}\"/>", esc(why));
            } else if !f.passed {
                let _ = write!(
                    s,
                    "<failure message=\"{}\">{}</failure>",
                    esc(&f.rate.statement),
                    esc(&findings.join("\n"))
                );
            }
            let _ = writeln!(
                s,
                "<system-out>{}</system-out></testcase>",
                esc(&format!("{}\n{}", f.rate.statement, findings.join("\n")))
            );
        }
        s.push_str("</testsuite>\n</testsuites>\n");
        s
    }

    /// The console's summary: one line per family, the techniques that worked most, and where
    /// the findings are.
    pub fn summary(&self, folder: Option<&Path>) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "red team {}: {} findings; all families {}",
            self.header.run_id,
            self.findings.len(),
            self.total.statement
        );
        for f in &self.families {
            if let Some(why) = &f.skipped {
                let _ = writeln!(s, "  {:<17} not run: {why}", f.family.name());
            } else {
                let gate = match (f.max_success_rate, f.passed) {
                    (Some(m), true) => format!("  (gate ≤ {:.1} %: ok)", m * 100.0),
                    (Some(m), false) => format!("  (gate ≤ {:.1} %: FAILED)", m * 100.0),
                    (None, _) => String::new(),
                };
                let errors = if f.rate.errors > 0 {
                    format!(", {} errors", f.rate.errors)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    s,
                    "  {:<17} {}{errors}{gate}",
                    f.family.name(),
                    f.rate.statement
                );
            }
        }
        let mut worst: Vec<(&str, &str, &Rate)> = self
            .families
            .iter()
            .flat_map(|f| {
                f.by_technique
                    .iter()
                    .map(move |(t, r)| (f.family.name(), t.as_str(), r))
            })
            .filter(|(_, _, r)| r.successes > 0)
            .collect();
        worst.sort_by(|a, b| {
            (b.2.successes, b.2.rate.to_bits()).cmp(&(a.2.successes, a.2.rate.to_bits()))
        });
        if !worst.is_empty() {
            let _ = writeln!(s, "what worked most:");
            for (f, t, r) in worst.iter().take(5) {
                let _ = writeln!(s, "  {f} {t}: {}", r.statement);
            }
        }
        for line in self.failures() {
            let _ = writeln!(s, "FAILED {line}");
        }
        if let Some(dir) = folder {
            let _ = writeln!(
                s,
                "findings: {} (report.md, report.html, report.json, junit.xml); replay one with `assay redteam --replay ID`",
                dir.display()
            );
        }
        s
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn header_has(families: &[FamilyReport], a: &Attempt) -> bool {
    families
        .iter()
        .any(|f| f.family == a.family && f.skipped.is_none())
}

#[cfg(test)]
mod tests {
    use super::Rate;

    #[test]
    fn zero_successes_are_an_upper_bound() {
        let r = Rate::from_counts(300, 0, 0);
        assert_eq!(r.statement, "0 of 300: below 1.0 % at 95 %");
        assert!((r.high - 0.00994).abs() < 1e-4, "{}", r.high);
        let r = Rate::from_counts(300, 3, 2);
        assert!(r.low > 0.0 && r.low < 0.01 && r.high > 0.02, "{r:?}");
        assert!(
            r.statement.starts_with("3 of 300: 1.0 % ("),
            "{}",
            r.statement
        );
    }
}
