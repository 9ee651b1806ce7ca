//! JUnit XML for CI systems: one `<testsuite>` per bank, one `<testcase>` per case.
//!
//! Each case shows its stored verdict ([`assay_core::verdict`]), never one worked out again
//! from its score: a `<failure>` exactly when the case failed (the message names the failed
//! checks; the body lists them one per line, then the reply's first
//! [`REPLY_SHOWN`] characters for an answer case, or what was selected for a retrieval case),
//! an `<error>` exactly when an error kept it from a verdict, and `time` is the case's
//! measured duration.

use std::fmt::Write;

use assay_core::aggregate::CaseRecord;
use assay_core::bank::BankType;
use assay_core::runlog::RunLog;
use assay_core::verdict::{Outcome, Verdict};

pub use crate::common::escape;

/// Characters of an answer case's reply a failure's body shows.
pub const REPLY_SHOWN: usize = 300;

struct Case {
    id: String,
    name: String,
    verdict: Verdict,
    /// What came back, a line each, for a failure's body.
    got: Vec<String>,
    /// Seconds, where measured.
    seconds: Option<f64>,
}

/// Calls its second argument with every case of a bank (every bank with `None`): from a
/// RunLog's lists, or streamed from its run log. An `Err` stops the walk.
pub type EachCase<'a> =
    dyn FnMut(Option<BankType>, &mut dyn FnMut(CaseRecord)) -> Result<(), String> + 'a;

/// `a`, `b` as backticked ids, or `nothing`.
fn ids(items: &[String]) -> String {
    if items.is_empty() {
        "nothing".to_owned()
    } else {
        items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The first `max` characters of `text`, with an ellipsis when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    } else {
        text.to_owned()
    }
}

/// What a case got back, as a failure's body shows it after the failed checks.
pub fn got_lines(record: &CaseRecord) -> Vec<String> {
    match record {
        CaseRecord::Semantic(r) => vec![format!("selected: {}", ids(&r.selections))],
        CaseRecord::State(r) => vec![format!("triggered: {}", ids(&r.triggered_handlers))],
        CaseRecord::Pattern(r) => vec![format!("matched: {}", ids(&r.matched_entities))],
        CaseRecord::Always(r) => vec![format!("loaded: {}", ids(&r.loaded_entities))],
        CaseRecord::Answer(r) => vec![match &r.reply {
            Some(reply) => format!("reply: {}", excerpt(reply, REPLY_SHOWN)),
            None => "reply: none".to_owned(),
        }],
    }
}

fn case_of(record: &CaseRecord) -> Case {
    let mut got = got_lines(record);
    if let Some(score) = record.score() {
        got.push(format!("score: {score}"));
    }
    Case {
        id: record.test_id().to_owned(),
        name: record.name().to_owned(),
        verdict: record.verdict().into_owned(),
        got,
        seconds: record.duration_ms().map(|ms| ms / 1000.0),
    }
}

fn bank_index(bank: BankType) -> usize {
    match bank {
        BankType::Semantic => 0,
        BankType::State => 1,
        BankType::Pattern => 2,
        BankType::Always => 3,
        BankType::Answer => 4,
    }
}

/// Renders JUnit XML for a RunLog whose lists hold every case.
pub fn render(log: &RunLog) -> String {
    let mut out = Vec::new();
    let mut from_lists = |bank: Option<BankType>, each: &mut dyn FnMut(CaseRecord)| {
        crate::select::for_each_listed(log, bank, each);
        Ok(())
    };
    // Writing to memory cannot fail, and the lists' walk returns no error.
    let _ = write(log, &mut from_lists, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Writes JUnit XML to `out`, one case at a time: `cases` walks the run's cases (twice: once
/// to count, once to write), so a run of any size is written in bounded memory.
pub fn write(
    log: &RunLog,
    cases: &mut EachCase<'_>,
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    // tests, failures, errors per bank.
    let mut counts = [[0usize; 3]; 5];
    cases(None, &mut |r| {
        let outcome = r.verdict().outcome;
        let n = &mut counts[bank_index(r.bank())];
        n[0] += 1;
        n[1] += usize::from(outcome == Outcome::Fail);
        n[2] += usize::from(outcome == Outcome::Error);
    })?;
    let total: usize = counts.iter().map(|c| c[0]).sum();
    let failures: usize = counts.iter().map(|c| c[1]).sum();
    let errors: usize = counts.iter().map(|c| c[2]).sum();
    let seconds = log.duration_ms as f64 / 1000.0;
    let io = |e: std::io::Error| format!("cannot write the JUnit XML: {e}");

    let mut head = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        head,
        "<testsuites name=\"assay\" tests=\"{total}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{seconds:.3}\">"
    );
    out.write_all(head.as_bytes()).map_err(io)?;
    let ran = [
        (BankType::Semantic, log.semantic.is_some()),
        (BankType::State, log.state.is_some()),
        (BankType::Pattern, log.pattern.is_some()),
        (BankType::Always, log.always.is_some()),
        (BankType::Answer, log.answer.is_some()),
    ];
    for (bank, _) in ran.into_iter().filter(|(_, ran)| *ran) {
        let [tests, failures, errors] = counts[bank_index(bank)];
        let mut text = String::new();
        let _ = writeln!(
            text,
            "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" timestamp=\"{}\">",
            bank.key(),
            escape(&log.timestamp)
        );
        if bank == BankType::Semantic
            && let Some(ir) = log.semantic.as_ref().and_then(|s| s.ir.as_ref())
        {
            let _ = writeln!(text, "    <properties>");
            let _ = writeln!(
                text,
                "      <property name=\"ir.cases\" value=\"{}\"/>",
                ir.cases
            );
            for (name, value) in ir.mean.named() {
                let _ = writeln!(
                    text,
                    "      <property name=\"ir.{name}\" value=\"{value:.6}\"/>"
                );
            }
            let _ = writeln!(text, "    </properties>");
        }
        out.write_all(text.as_bytes()).map_err(io)?;
        let mut failed: Option<std::io::Error> = None;
        cases(Some(bank), &mut |r| {
            if failed.is_some() {
                return;
            }
            let line = testcase(bank.key(), &case_of(&r));
            if let Err(e) = out.write_all(line.as_bytes()) {
                failed = Some(e);
            }
        })?;
        if let Some(e) = failed {
            return Err(io(e));
        }
        out.write_all(b"  </testsuite>\n").map_err(io)?;
    }
    out.write_all(b"</testsuites>\n").map_err(io)?;
    Ok(())
}

/// One `<testcase>` element, with its newline.
fn testcase(bank: &str, case: &Case) -> String {
    let name = if case.name.is_empty() {
        case.id.clone()
    } else {
        format!("{}: {}", case.id, case.name)
    };
    let time = case
        .seconds
        .map_or_else(String::new, |s| format!(" time=\"{s:.3}\""));
    let open = format!(
        "    <testcase classname=\"assay.{bank}\" name=\"{}\"{time}",
        escape(&name)
    );
    let v = &case.verdict;
    match v.outcome {
        Outcome::Pass => format!("{open}/>\n"),
        Outcome::Fail => {
            let kind = v
                .failed
                .first()
                .map_or("assay.verdict".to_owned(), |c| format!("assay.{}", c.rule));
            let body: Vec<&str> = v
                .failed
                .iter()
                .map(|c| c.message.as_str())
                .chain(case.got.iter().map(String::as_str))
                .collect();
            format!(
                "{open}>\n      <failure message=\"{}\" type=\"{kind}\">{}</failure>\n    </testcase>\n",
                escape(&v.summary()),
                escape(&body.join("\n"))
            )
        }
        Outcome::Error => format!(
            "{open}>\n      <error message=\"{}\" type=\"assay.infrastructure\"/>\n    </testcase>\n",
            escape(&v.summary())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::answer::{AnswerCaseResult, ScoreWeights, score_case};
    use assay_core::assertion::{AssertionSet, Output};
    use assay_core::verdict::{VerdictRules, Verdicted};

    fn answer(threshold: f64, rules: VerdictRules) -> CaseRecord {
        let reply = format!("Paris is the capital. {}", "x".repeat(400));
        let mut r = AnswerCaseResult {
            test_id: "AN-1".into(),
            name: "capital".into(),
            message: "m".into(),
            reply: Some(reply.clone()),
            duration_ms: Some(1234.0),
            ..AnswerCaseResult::default()
        };
        let set = AssertionSet::parse(
            &serde_json::json!([{"type": "contains", "value": "Paris"}, {"type": "contains", "value": "capital"},
                                {"type": "icontains", "value": "paris"}, {"type": "contains", "value": "Lyon"}]),
            Some(threshold),
            "assert",
        )
        .unwrap();
        r.assertions = Some(set.evaluate(&Output::text(&reply)));
        score_case(&mut r, &ScoreWeights::default());
        r.settle(&rules);
        CaseRecord::Answer(r)
    }

    #[test]
    fn a_failure_names_its_checks_and_the_replys_start_and_time_is_the_duration() {
        let line = testcase("answer", &case_of(&answer(0.8, VerdictRules::default())));
        assert!(
            line.starts_with(
                "    <testcase classname=\"assay.answer\" name=\"AN-1: capital\" time=\"1.234\">"
            ),
            "{line}"
        );
        assert!(
            line.contains("<failure message=\"assertions passed 75% of their weight, under the threshold 80%: failed `contains &quot;Lyon&quot;` (no &quot;Lyon&quot;)\" type=\"assay.assertion_threshold\">"),
            "{line}"
        );
        let reply = format!(
            "reply: Paris is the capital. {}…",
            "x".repeat(REPLY_SHOWN - 22)
        );
        assert!(line.contains(&escape(&reply)), "{line}");
        assert!(line.contains("score: 75"), "{line}");
    }

    #[test]
    fn the_verdict_decides_not_the_score() {
        // Threshold missed at 75: a failure whatever pass score the project sets.
        let low = VerdictRules {
            pass_score: Some(50),
        };
        assert!(testcase("answer", &case_of(&answer(0.8, low))).contains("<failure "));
        // Threshold met at 75: a pass, unless the project's pass score is above it.
        let met = testcase("answer", &case_of(&answer(0.7, VerdictRules::default())));
        assert!(met.ends_with("time=\"1.234\"/>\n"), "{met}");
        let strict = VerdictRules {
            pass_score: Some(80),
        };
        let failed = testcase("answer", &case_of(&answer(0.7, strict)));
        assert!(
            failed.contains("message=\"score 75 is under the pass score 80 ([verdict] pass_score)\" type=\"assay.pass_score\""),
            "{failed}"
        );
    }
}
