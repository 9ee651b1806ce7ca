//! Deterministic assertions on a scenario's conversation: the scenario's `assert` list (with
//! `assert_threshold`), parsed by [`assay_core::assertion`] when the suite loads, is checked on
//! the assistant's **final reply** once the conversation is over.
//!
//! Each assertion becomes one [`CheckResult`] of kind [`CheckKind::Assertion`], named
//! `assert[0]: icontains "logged"`, after the trajectory checks. The rule is the optimizer's:
//!
//! * with no `assert_threshold`, every assertion must pass, so each is a required check: a failed
//!   one fails the run (`failed_by: check`) whatever the judge said;
//! * with `assert_threshold`, a `critical` assertion is still a required check, the others are
//!   reported as advisory checks, and one more required check, `assert: threshold 0.75`, fails
//!   the run when the weighted share of the decided assertions that passed is below it.
//!
//! An assertion that cannot be decided is an error of its check, not a pass: a conversation
//! with no assistant reply, or a `latency` or `cost` assertion (the transcript records neither
//! the assistant's per-turn latency nor its cost, so both are unmeasured).

use assay_core::assertion::{AssertionReport, AssertionSet, Output, Status};
use assay_core::simulation::{CheckKind, CheckResult, CheckStatus, Speaker, Transcript};

/// How much of the reply a check keeps as what it read, in characters.
const KEPT: usize = 2_000;

/// The assistant's final reply: the text of the last assistant turn that said something.
pub fn final_reply(transcript: &Transcript) -> Option<&str> {
    transcript
        .turns
        .iter()
        .rev()
        .find(|t| t.role == Speaker::Assistant && !t.content.trim().is_empty())
        .map(|t| t.content.as_str())
}

/// A check's name: `assert[0]: icontains "logged"`, `assert[2]: not-refusal`.
fn name(index: usize, set: &AssertionSet) -> String {
    let a = &set.assertions[index];
    match &a.config.value {
        None => format!("assert[{index}]: {}", a.type_name()),
        Some(v) => {
            let shown = crate::checks::show(v);
            let shown: String = if shown.chars().count() > 60 {
                format!("{}…", shown.chars().take(60).collect::<String>())
            } else {
                shown
            };
            format!("assert[{index}]: {} {shown}", a.type_name())
        }
    }
}

fn check(name: String, status: CheckStatus, details: Vec<String>, advisory: bool) -> CheckResult {
    CheckResult {
        name,
        status,
        details,
        advisory,
        source: Some("the assistant's final reply".to_owned()),
        state: None,
        kind: CheckKind::Assertion,
        calls: Vec::new(),
    }
}

/// Checks `set` on the transcript's final assistant reply: one check per assertion, then the
/// threshold's check when the set names one.
pub fn evaluate(set: &AssertionSet, transcript: &Transcript) -> Vec<CheckResult> {
    let advisory = |i: usize| set.threshold.is_some() && !set.assertions[i].critical;
    let Some(reply) = final_reply(transcript) else {
        let why = "the assistant never replied: nothing to check".to_owned();
        let mut out: Vec<CheckResult> = (0..set.assertions.len())
            .map(|i| {
                check(
                    name(i, set),
                    CheckStatus::Error,
                    vec![why.clone()],
                    advisory(i),
                )
            })
            .collect();
        if let Some(t) = set.threshold {
            out.push(check(
                threshold_name(t),
                CheckStatus::Error,
                vec![why],
                false,
            ));
        }
        return out;
    };
    let report = set.evaluate(&Output {
        text: reply,
        latency_ms: None,
        cost_usd: None,
    });
    let kept: String = reply.chars().take(KEPT).collect();
    let mut out: Vec<CheckResult> = report
        .results
        .iter()
        .map(|r| {
            let status = match r.status {
                Status::Passed => CheckStatus::Passed,
                Status::Failed => CheckStatus::Failed,
                Status::Error => CheckStatus::Error,
            };
            let mut c = check(
                name(r.index, set),
                status,
                vec![r.reason.clone()],
                advisory(r.index),
            );
            c.state = Some(kept.clone());
            c
        })
        .collect();
    if let Some(t) = set.threshold {
        out.push(threshold_check(t, &report));
    }
    out
}

fn threshold_name(t: f64) -> String {
    format!("assert: threshold {t}")
}

fn threshold_check(t: f64, report: &AssertionReport) -> CheckResult {
    // `+ 0.0` turns the -0 of an empty sum into 0.
    let pct = |x: f64| x * 100.0 + 0.0;
    let (status, why) = match report.score {
        None => (
            CheckStatus::Error,
            "no assertion could be decided: no share to compare".to_owned(),
        ),
        // The library's tolerance, so that three weights of 1/3 reach a threshold of 1.
        Some(s) if s + 1e-9 >= t => (
            CheckStatus::Passed,
            format!(
                "{:.0}% of the weight passed, at least {:.0}%",
                pct(s),
                pct(t)
            ),
        ),
        Some(s) => (
            CheckStatus::Failed,
            format!("{:.0}% of the weight passed, below {:.0}%", pct(s), pct(t)),
        ),
    };
    check(threshold_name(t), status, vec![why], false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::simulation::{Ending, Turn};
    use serde_json::json;

    fn transcript(replies: &[&str]) -> Transcript {
        let mut turns = vec![Turn {
            role: Speaker::User,
            content: "Log my chore.".into(),
            tool_calls: Vec::new(),
            timestamp: String::new(),
        }];
        turns.extend(replies.iter().map(|r| Turn {
            role: Speaker::Assistant,
            content: (*r).to_owned(),
            tool_calls: Vec::new(),
            timestamp: String::new(),
        }));
        Transcript {
            scenario_id: "s".into(),
            repeat: 1,
            model: "m".into(),
            simulator_model: "u".into(),
            turns,
            ended_by: Ending::MaxTurns,
            error: None,
            started_at: String::new(),
            ended_at: String::new(),
        }
    }

    fn set(list: &serde_json::Value, threshold: Option<f64>) -> AssertionSet {
        AssertionSet::parse(list, threshold, "assert").unwrap()
    }

    #[test]
    fn each_assertion_is_a_required_check_on_the_final_reply() {
        let s = set(
            &json!([{"type": "icontains", "value": "logged"},
                   {"type": "not-refusal", "critical": true}]),
            None,
        );
        // The earlier reply says "logged"; only the final one counts.
        let checks = evaluate(&s, &transcript(&["Logged it.", "What next?"]));
        assert_eq!(checks.len(), 2);
        assert_eq!(checks[0].name, "assert[0]: icontains \"logged\"");
        assert_eq!(checks[0].kind, CheckKind::Assertion);
        assert_eq!(checks[0].status, CheckStatus::Failed);
        assert!(checks[0].required());
        assert_eq!(checks[0].state.as_deref(), Some("What next?"));
        assert_eq!(checks[1].name, "assert[1]: not-refusal");
        assert_eq!(checks[1].status, CheckStatus::Passed);

        let checks = evaluate(&s, &transcript(&["What next?", "I've logged both chores."]));
        assert!(checks.iter().all(|c| c.status == CheckStatus::Passed));
    }

    #[test]
    fn a_threshold_makes_the_others_advisory_and_decides_one_more_check() {
        let s = set(
            &json!([{"type": "contains", "value": "dishes", "weight": 3},
                   {"type": "contains", "value": "laundry"},
                   {"type": "not-refusal", "critical": true}]),
            Some(0.75),
        );
        // dishes (3) and not-refusal (1) pass, laundry (1) fails: 80%, at least 75%.
        let checks = evaluate(&s, &transcript(&["Logged the dishes."]));
        assert_eq!(checks.len(), 4);
        assert!(checks[1].advisory && checks[1].status == CheckStatus::Failed);
        assert!(!checks[2].advisory, "a critical assertion stays required");
        assert_eq!(checks[3].name, "assert: threshold 0.75");
        assert_eq!(checks[3].status, CheckStatus::Passed);
        assert!(checks[3].required());

        // Neither chore: 25%, below 75%; the critical refusal check fails on its own.
        let checks = evaluate(&s, &transcript(&["I can't help with that."]));
        assert_eq!(checks[2].status, CheckStatus::Failed);
        assert_eq!(checks[3].status, CheckStatus::Failed);
        assert_eq!(checks[3].details, ["0% of the weight passed, below 75%"]);
    }

    #[test]
    fn no_reply_and_unmeasured_latency_are_errors_not_passes() {
        let s = set(
            &json!([{"type": "not-contains", "value": "x"},
                   {"type": "latency", "value": 1000}]),
            Some(0.5),
        );
        let checks = evaluate(&s, &transcript(&[]));
        assert_eq!(checks.len(), 3);
        assert!(checks.iter().all(|c| c.status == CheckStatus::Error));
        assert_eq!(
            checks[0].details,
            ["the assistant never replied: nothing to check"]
        );

        let checks = evaluate(&s, &transcript(&["Done."]));
        assert_eq!(checks[0].status, CheckStatus::Passed);
        assert_eq!(checks[1].status, CheckStatus::Error);
        // The undecided latency is left out of the share: 1 of 1 decided passed.
        assert_eq!(checks[2].status, CheckStatus::Passed);
    }
}
