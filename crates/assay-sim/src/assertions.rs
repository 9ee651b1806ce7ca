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
//! A `latency` or `cost` assertion reads the final reply's turn as the transcript recorded it
//! ([`assay_core::simulation::TurnUsage`]): the wall time of the model under test's calls in
//! that turn (tool calls not included) and their tokens at the model's price.
//!
//! An assertion that cannot be decided is an error of its check, not a pass: a conversation
//! with no assistant reply, a `latency` assertion on a turn answered from the call cache (or
//! recorded before turns had a latency), a `cost` assertion when the model's price is unknown.

use assay_core::assertion::{AssertionReport, AssertionSet, Output, Status};
use assay_core::simulation::{
    CheckKind, CheckResult, CheckStatus, Speaker, Transcript, Turn, TurnUsage,
};

/// How much of the reply a check keeps as what it read, in characters.
const KEPT: usize = 2_000;

/// The assistant's final reply: the text of the last assistant turn that said something.
pub fn final_reply(transcript: &Transcript) -> Option<&str> {
    final_turn(transcript).map(|t| t.content.as_str())
}

/// The last assistant turn that said something.
fn final_turn(transcript: &Transcript) -> Option<&Turn> {
    transcript
        .turns
        .iter()
        .rev()
        .find(|t| t.role == Speaker::Assistant && !t.content.trim().is_empty())
}

/// Why a `latency` or `cost` assertion was not measured, in a clause that follows the
/// library's reason.
fn unmeasured_because(kind: &str, usage: Option<&TurnUsage>) -> Option<&'static str> {
    let kind = kind.strip_prefix("not-").unwrap_or(kind);
    match (kind, usage) {
        ("latency" | "cost", None) => {
            Some("the transcript has no measurement of the final reply's turn")
        }
        ("latency", Some(u)) if u.latency_ms.is_none() && u.cache_hits > 0 => {
            Some("the final reply came from the call cache, which measures no time")
        }
        ("cost", Some(u)) if u.cost_usd.is_none() => Some(
            "the price of the model under test is not known (declare it in [providers.prices])",
        ),
        _ => None,
    }
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
    let Some(turn) = final_turn(transcript) else {
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
    let reply = turn.content.as_str();
    let usage = turn.usage.as_ref();
    let report = set.evaluate(&Output {
        text: reply,
        latency_ms: usage.and_then(|u| u.latency_ms).map(|ms| ms as f64),
        cost_usd: usage.and_then(|u| u.cost_usd),
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
            let mut reason = r.reason.clone();
            if r.status == Status::Error
                && let Some(why) = unmeasured_because(set.assertions[r.index].type_name(), usage)
            {
                reason = format!("{reason}: {why}");
            }
            let mut c = check(name(r.index, set), status, vec![reason], advisory(r.index));
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
            usage: None,
        }];
        turns.extend(replies.iter().map(|r| Turn {
            role: Speaker::Assistant,
            content: (*r).to_owned(),
            tool_calls: Vec::new(),
            timestamp: String::new(),
            usage: None,
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
            stop_usage: None,
        }
    }

    /// A transcript whose two assistant turns recorded `earlier` and `last`.
    fn measured(earlier: TurnUsage, last: TurnUsage) -> Transcript {
        let mut t = transcript(&["Logged it.", "Anything else?"]);
        t.turns[1].usage = Some(earlier);
        t.turns[2].usage = Some(last);
        t
    }

    fn usage(latency_ms: Option<u64>, cache_hits: u32, cost_usd: Option<f64>) -> TurnUsage {
        TurnUsage {
            calls: 1,
            cache_hits,
            latency_ms,
            input_tokens: 350,
            output_tokens: 120,
            cost_usd,
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
    fn latency_and_cost_read_the_final_reply_s_turn() {
        let s = set(
            &json!([{"type": "latency", "value": 1000},
                   {"type": "cost", "value": 0.001}]),
            None,
        );
        // The slow, dear first turn does not count; the final one is within both limits.
        let t = measured(
            usage(Some(5_000), 0, Some(0.5)),
            usage(Some(800), 0, Some(0.0009)),
        );
        let checks = evaluate(&s, &t);
        assert_eq!(checks[0].status, CheckStatus::Passed, "{:?}", checks[0]);
        assert_eq!(checks[1].status, CheckStatus::Passed, "{:?}", checks[1]);
        let t = measured(
            usage(Some(10), 0, Some(0.0)),
            usage(Some(1_200), 0, Some(0.002)),
        );
        let checks = evaluate(&s, &t);
        assert_eq!(checks[0].status, CheckStatus::Failed, "{:?}", checks[0]);
        assert_eq!(checks[1].status, CheckStatus::Failed, "{:?}", checks[1]);
    }

    #[test]
    fn a_cached_reply_or_an_unknown_price_is_unmeasured_and_says_why() {
        let s = set(
            &json!([{"type": "latency", "value": 1000},
                   {"type": "not-cost", "value": 0.001}]),
            None,
        );
        let t = measured(usage(Some(10), 0, None), usage(None, 1, None));
        let checks = evaluate(&s, &t);
        assert!(checks.iter().all(|c| c.status == CheckStatus::Error));
        assert_eq!(
            checks[0].details,
            [
                "latency was not measured: the final reply came from the call cache, which measures no time"
            ]
        );
        assert!(
            checks[1].details[0].contains("price of the model under test is not known"),
            "{:?}",
            checks[1].details
        );
        // A transcript from before turns were measured.
        let checks = evaluate(&s, &transcript(&["Done."]));
        assert!(
            checks[0].details[0].ends_with("no measurement of the final reply's turn"),
            "{:?}",
            checks[0].details
        );
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
