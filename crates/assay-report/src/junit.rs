//! JUnit XML for CI systems: one `<testsuite>` per bank, one `<testcase>` per case.
//!
//! A case is a `<failure>` when it is a critical failure or scores below the pass score (100
//! unless configured); a case that could not be scored is an `<error>`.

use std::fmt::Write;

use assay_core::aggregate::CaseRecord;
use assay_core::bank::BankType;
use assay_core::runlog::RunLog;

use crate::markdown::breakdown_lines;

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

enum Outcome {
    Pass,
    Failure { message: String, details: String },
    Error(String),
}

struct Case {
    id: String,
    name: String,
    outcome: Outcome,
}

fn outcome(score: u32, pass_score: u32, critical: bool, lines: &[String]) -> Outcome {
    if critical || score < pass_score {
        let kind = if critical { "critical failure: " } else { "" };
        Outcome::Failure {
            message: format!("{kind}score {score}"),
            details: lines.join("\n"),
        }
    } else {
        Outcome::Pass
    }
}

/// Calls its second argument with every case of a bank (every bank with `None`): from a
/// RunLog's lists, or streamed from its run log. An `Err` stops the walk.
pub type EachCase<'a> =
    dyn FnMut(Option<BankType>, &mut dyn FnMut(CaseRecord)) -> Result<(), String> + 'a;

fn case_of(record: &CaseRecord, pass_score: u32) -> Case {
    let (id, name) = match record {
        CaseRecord::Semantic(r) => (&r.test_id, &r.name),
        CaseRecord::State(r) => (&r.test_id, &r.name),
        CaseRecord::Pattern(r) => (&r.test_id, &r.name),
        CaseRecord::Always(r) => (&r.test_id, &r.name),
        CaseRecord::Answer(r) => (&r.test_id, &r.name),
    };
    let outcome = if let Some(error) = record.error() {
        Outcome::Error(error.to_owned())
    } else {
        outcome(
            record.score().unwrap_or(0),
            pass_score,
            record.is_critical_failure(),
            &breakdown_lines(record.breakdown()),
        )
    };
    Case {
        id: id.clone(),
        name: name.clone(),
        outcome,
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

/// Renders JUnit XML for a RunLog whose lists hold every case. `pass_score` is the lowest
/// score that passes.
pub fn render(log: &RunLog, pass_score: u32) -> String {
    let mut out = Vec::new();
    let mut from_lists = |bank: Option<BankType>, each: &mut dyn FnMut(CaseRecord)| {
        for_each_listed(log, bank, each);
        Ok(())
    };
    // Writing to memory cannot fail, and the lists' walk returns no error.
    let _ = write(log, pass_score, &mut from_lists, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Every case a RunLog lists, in bank order.
fn for_each_listed(log: &RunLog, bank: Option<BankType>, each: &mut dyn FnMut(CaseRecord)) {
    let wanted = |b: BankType| bank.is_none_or(|w| w == b);
    if let Some(r) = log.semantic.as_ref().filter(|_| wanted(BankType::Semantic)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::Semantic)
            .for_each(&mut *each);
    }
    if let Some(r) = log.state.as_ref().filter(|_| wanted(BankType::State)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::State)
            .for_each(&mut *each);
    }
    if let Some(r) = log.pattern.as_ref().filter(|_| wanted(BankType::Pattern)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::Pattern)
            .for_each(&mut *each);
    }
    if let Some(r) = log.always.as_ref().filter(|_| wanted(BankType::Always)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::Always)
            .for_each(&mut *each);
    }
    if let Some(r) = log.answer.as_ref().filter(|_| wanted(BankType::Answer)) {
        r.results
            .iter()
            .cloned()
            .map(CaseRecord::Answer)
            .for_each(&mut *each);
    }
}

/// Writes JUnit XML to `out`, one case at a time: `cases` walks the run's cases (twice: once
/// to count, once to write), so a run of any size is written in bounded memory.
pub fn write(
    log: &RunLog,
    pass_score: u32,
    cases: &mut EachCase<'_>,
    out: &mut dyn std::io::Write,
) -> Result<(), String> {
    let is_failure = |o: &Outcome| matches!(o, Outcome::Failure { .. });
    let is_error = |o: &Outcome| matches!(o, Outcome::Error(_));
    // tests, failures, errors per bank.
    let mut counts = [[0usize; 3]; 5];
    cases(None, &mut |r| {
        let c = case_of(&r, pass_score);
        let n = &mut counts[bank_index(r.bank())];
        n[0] += 1;
        n[1] += usize::from(is_failure(&c.outcome));
        n[2] += usize::from(is_error(&c.outcome));
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
            let line = testcase(bank.key(), &case_of(&r, pass_score));
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
    let open = format!(
        "    <testcase classname=\"assay.{bank}\" name=\"{}\"",
        escape(&name)
    );
    match &case.outcome {
        Outcome::Pass => format!("{open}/>\n"),
        Outcome::Failure { message, details } => format!(
            "{open}>\n      <failure message=\"{}\" type=\"assay.score\">{}</failure>\n    </testcase>\n",
            escape(message),
            escape(details)
        ),
        Outcome::Error(e) => format!(
            "{open}>\n      <error message=\"{}\" type=\"assay.infrastructure\"/>\n    </testcase>\n",
            escape(e)
        ),
    }
}
