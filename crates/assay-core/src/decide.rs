//! Deciding a case's verdict ([`crate::verdict`]) from its freshly scored result, once per
//! bank: the one place where pass, fail and error are told apart. A run calls it as each case
//! finishes ([`crate::verdict::Verdicted::settle`]); a result read from a file written before
//! verdicts were stored gets one through it too, with no project rules.
//!
//! The rules, for every bank: an infrastructure error is an error, never a pass or a failure;
//! otherwise the case fails when its scorer failed it (a hard fail: a primary expected entity,
//! handler, match or always entity missing; for answer cases a metric under its minimum, a
//! critical assertion, the assertions under their threshold, a trajectory rule), when it is a
//! critical failure (a missed crisis, a false alarm on a critical negative case), or when the
//! project sets `[verdict] pass_score` and the score is under it; else it passes. A score
//! below 100 alone does not fail a case.
//!
//! ```
//! use assay_core::runlog::AlwaysCaseResult;
//! use assay_core::scoring::Breakdown;
//! use assay_core::verdict::{Outcome, Rule, VerdictRules, Verdicted};
//! let mut case = AlwaysCaseResult {
//!     test_id: "A1".into(), name: String::new(), user_type: "PARENT".into(),
//!     loaded_entities: vec![], expected_always: vec!["welcome".into()], missing: vec!["welcome".into()],
//!     score: 0, breakdown: Breakdown::default(), is_hard_fail: true, duration_ms: None, verdict: None,
//! };
//! case.settle(&VerdictRules::default());
//! let v = case.verdict();
//! assert_eq!((v.outcome, v.failed[0].rule), (Outcome::Fail, Rule::ExpectedMissing));
//! ```

use crate::answer::AnswerCaseResult;
use crate::runlog::{
    AlwaysCaseResult, LostEntity, PatternCaseResult, SemanticCaseResult, StateCaseResult,
};
use crate::verdict::{FailedCheck, Rule, Verdict, VerdictRules, Verdicted};

/// `a`, `b` as backticked ids.
fn ticked(ids: &[String]) -> String {
    ids.iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `expected` less what `found` holds.
fn missing(expected: &[String], found: &[String]) -> Vec<String> {
    expected
        .iter()
        .filter(|e| !found.contains(e))
        .cloned()
        .collect()
}

/// The project's pass score, when the case scored under it.
fn pass_score(failed: &mut Vec<FailedCheck>, score: Option<u32>, rules: VerdictRules) {
    if let (Some(score), Some(min)) = (score, rules.pass_score)
        && score < min
    {
        failed.push(FailedCheck::new(
            Rule::PassScore,
            vec![score.to_string()],
            format!("score {score} is under the pass score {min} ([verdict] pass_score)"),
        ));
    }
}

/// The verdict of checks made on a case that scored (an error is decided before).
fn verdict(mut failed: Vec<FailedCheck>, score: Option<u32>, rules: VerdictRules) -> Verdict {
    pass_score(&mut failed, score, rules);
    Verdict::of_checks(failed)
}

macro_rules! stored {
    () => {
        fn stored_verdict(&self) -> Option<&Verdict> {
            self.verdict.as_ref()
        }

        fn store_verdict(&mut self, verdict: Verdict) {
            self.verdict = Some(verdict);
        }
    };
}

impl Verdicted for SemanticCaseResult {
    stored!();

    fn decide(&self, rules: &VerdictRules) -> Verdict {
        if let Some(e) = &self.error {
            return Verdict::error(e.clone());
        }
        let mut failed = Vec::new();
        if self.is_hard_fail {
            let lost = missing(&self.expectations.expected_primary, &self.selections);
            let described: Vec<String> = self
                .lost
                .iter()
                .filter(|l| lost.contains(&l.entity_id))
                .map(LostEntity::describe)
                .collect();
            let message = if !described.is_empty() {
                format!("expected primary entity missing: {}", described.join("; "))
            } else if !lost.is_empty() {
                format!("expected primary entity missing: {}", ticked(&lost))
            } else {
                // With --repeat, most repeats missed a primary entity that the first found.
                "expected primary entity missing in most repeats".to_owned()
            };
            failed.push(FailedCheck::new(Rule::ExpectedMissing, lost, message));
        }
        verdict(failed, self.score, *rules)
    }
}

impl Verdicted for StateCaseResult {
    stored!();

    fn decide(&self, rules: &VerdictRules) -> Verdict {
        let mut failed = Vec::new();
        if self.is_hard_fail {
            let lost = missing(&self.expected_handlers, &self.triggered_handlers);
            failed.push(FailedCheck::new(
                Rule::ExpectedMissing,
                lost.clone(),
                format!("expected handler did not trigger: {}", ticked(&lost)),
            ));
        }
        verdict(failed, Some(self.score), *rules)
    }
}

impl Verdicted for PatternCaseResult {
    stored!();

    fn decide(&self, rules: &VerdictRules) -> Verdict {
        let negative = self.pattern_type == "negative";
        let mut failed = Vec::new();
        if self.is_critical_failure && negative {
            failed.push(FailedCheck::new(
                Rule::FalseAlarm,
                self.false_positives.clone(),
                format!(
                    "false alarm on a critical negative case: matched {}",
                    ticked(&self.false_positives)
                ),
            ));
        }
        if self.is_hard_fail || (self.is_critical_failure && !negative) {
            let lost = missing(&self.expected_matches, &self.matched_entities);
            let (rule, what) = if self.is_critical_failure && !negative {
                (
                    Rule::MissedCrisis,
                    "missed crisis: expected match not found",
                )
            } else {
                (Rule::ExpectedMissing, "expected match not found")
            };
            failed.push(FailedCheck::new(
                rule,
                lost.clone(),
                format!("{what}: {}", ticked(&lost)),
            ));
        }
        verdict(failed, Some(self.score), *rules)
    }
}

impl Verdicted for AlwaysCaseResult {
    stored!();

    fn decide(&self, rules: &VerdictRules) -> Verdict {
        let mut failed = Vec::new();
        if self.is_hard_fail {
            failed.push(FailedCheck::new(
                Rule::ExpectedMissing,
                self.missing.clone(),
                format!(
                    "always entity not loaded for {}: {}",
                    self.user_type,
                    ticked(&self.missing)
                ),
            ));
        }
        verdict(failed, Some(self.score), *rules)
    }
}

impl Verdicted for AnswerCaseResult {
    stored!();

    fn decide(&self, rules: &VerdictRules) -> Verdict {
        if let Some(e) = &self.error {
            return Verdict::error(e.clone());
        }
        verdict(crate::answer::failed_checks(self), self.score, *rules)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::{Metric, MetricOutcome, ScoreWeights, score_case};
    use crate::assertion::{AssertionSet, Output};
    use crate::bank::ExpectationSet;
    use crate::scoring::{Breakdown, ScoreInput, score};
    use crate::verdict::Outcome;
    use serde_json::json;

    const NO_RULES: VerdictRules = VerdictRules { pass_score: None };

    fn semantic(selected: &[&str], error: Option<&str>) -> SemanticCaseResult {
        let expectations = ExpectationSet {
            expected_primary: vec!["gray_rock".into()],
            expected_secondary: vec!["biff".into()],
            ..ExpectationSet::default()
        };
        let selections: Vec<String> = selected.iter().map(|s| (*s).to_owned()).collect();
        let input = ScoreInput {
            primary_pass: selections.contains(&"gray_rock".to_owned()),
            secondary_missing: missing(&expectations.expected_secondary, &selections),
            ..ScoreInput::default()
        };
        let scored = score(&input);
        SemanticCaseResult {
            test_id: "S1".into(),
            name: String::new(),
            category: String::new(),
            topics: vec![],
            prompt: "p".into(),
            candidates: vec![],
            selections,
            expectations,
            expectation_source: "original".into(),
            primary_pass: input.primary_pass,
            secondary_missing: input.secondary_missing,
            false_positives: vec![],
            rank_violations: vec![],
            lost: vec![],
            score: error.is_none().then_some(scored.score),
            breakdown: scored.breakdown,
            is_hard_fail: error.is_none() && scored.is_hard_fail,
            error: error.map(str::to_owned),
            ir: None,
            repeat_scores: vec![],
            unstable: false,
            duration_ms: None,
            verdict: None,
        }
    }

    #[test]
    fn semantic_primary_miss_fails_a_secondary_miss_passes_an_error_errs() {
        let v = semantic(&["biff"], None).decide(&NO_RULES);
        assert_eq!(v.outcome, Outcome::Fail);
        assert_eq!(v.failed[0].rule, Rule::ExpectedMissing);
        assert_eq!(v.failed[0].names, ["gray_rock"]);
        assert_eq!(v.summary(), "expected primary entity missing: `gray_rock`");
        // 90: a secondary entity missing costs points, not the verdict.
        let v = semantic(&["gray_rock"], None).decide(&NO_RULES);
        assert_eq!(v, Verdict::pass());
        let v = semantic(&[], Some("timeout after 3 retries")).decide(&NO_RULES);
        assert_eq!(v, Verdict::error("timeout after 3 retries"));
    }

    #[test]
    fn a_pass_score_fails_every_bank_below_it_with_the_rule_named() {
        let rules = VerdictRules {
            pass_score: Some(95),
        };
        let v = semantic(&["gray_rock"], None).decide(&rules);
        assert_eq!(v.outcome, Outcome::Fail);
        assert_eq!(v.rules(), [Rule::PassScore]);
        assert_eq!(
            v.summary(),
            "score 90 is under the pass score 95 ([verdict] pass_score)"
        );
        // An error stays an error: no score to hold to a pass score.
        assert_eq!(
            semantic(&[], Some("down")).decide(&rules).outcome,
            Outcome::Error
        );
        // At or above it, a pass.
        let at = VerdictRules {
            pass_score: Some(90),
        };
        assert!(semantic(&["gray_rock"], None).decide(&at).passed());
    }

    fn state(triggered: &[&str], hard: bool, score: u32) -> StateCaseResult {
        StateCaseResult {
            test_id: "ST1".into(),
            name: String::new(),
            user_state: crate::UserState::new(),
            triggered_handlers: triggered.iter().map(|s| (*s).to_owned()).collect(),
            expected_handlers: vec!["h_new".into(), "h_old".into()],
            not_expected_handlers: vec![],
            primary_pass: !hard,
            wrong_handlers: vec![],
            score,
            breakdown: Breakdown::default(),
            is_hard_fail: hard,
            duration_ms: None,
            verdict: None,
        }
    }

    #[test]
    fn state_names_the_handlers_that_did_not_trigger() {
        let v = state(&["h_old"], true, 0).decide(&NO_RULES);
        assert_eq!(v.failed[0].names, ["h_new"]);
        assert_eq!(v.summary(), "expected handler did not trigger: `h_new`");
        // A wrong handler costs 20 points and passes.
        assert!(
            state(&["h_old", "h_new"], false, 80)
                .decide(&NO_RULES)
                .passed()
        );
    }

    fn pattern(kind: &str, critical: bool, matched: &[&str]) -> PatternCaseResult {
        let matched: Vec<String> = matched.iter().map(|s| (*s).to_owned()).collect();
        let expected: Vec<String> = if kind == "negative" {
            vec![]
        } else {
            vec!["crisis_line".into()]
        };
        let unwanted: Vec<String> = if kind == "negative" {
            vec!["crisis_line".into()]
        } else {
            vec![]
        };
        let lost = missing(&expected, &matched);
        let false_positives: Vec<String> = unwanted
            .iter()
            .filter(|u| matched.contains(u))
            .cloned()
            .collect();
        let input = ScoreInput {
            primary_pass: lost.is_empty(),
            false_positives: false_positives.clone(),
            ..ScoreInput::default()
        };
        let scored = score(&input);
        let is_critical_failure = critical
            && ((kind == "crisis" && !lost.is_empty())
                || (kind == "negative" && !false_positives.is_empty()));
        PatternCaseResult {
            test_id: "P1".into(),
            name: String::new(),
            prompt: "m".into(),
            pattern_type: kind.into(),
            matched_entities: matched,
            crisis_matches: vec![],
            keyword_matches: vec![],
            expected_matches: expected,
            expected_secondary: vec![],
            not_expected_matches: unwanted,
            primary_pass: input.primary_pass,
            secondary_missing: vec![],
            false_positives,
            score: scored.score,
            breakdown: scored.breakdown,
            is_hard_fail: scored.is_hard_fail,
            is_critical: critical,
            is_critical_failure,
            duration_ms: None,
            verdict: None,
        }
    }

    #[test]
    fn pattern_critical_failures_are_named_apart_from_ordinary_misses() {
        let v = pattern("crisis", true, &[]).decide(&NO_RULES);
        assert_eq!(v.rules(), [Rule::MissedCrisis]);
        assert_eq!(
            v.summary(),
            "missed crisis: expected match not found: `crisis_line`"
        );
        let v = pattern("crisis", false, &[]).decide(&NO_RULES);
        assert_eq!(v.rules(), [Rule::ExpectedMissing]);
        // A false alarm on a critical negative case scores 80 and still fails.
        let r = pattern("negative", true, &["crisis_line"]);
        assert_eq!((r.score, r.is_hard_fail), (80, false));
        let v = r.decide(&NO_RULES);
        assert_eq!(v.rules(), [Rule::FalseAlarm]);
        assert_eq!(v.failed[0].names, ["crisis_line"]);
        // The same on a case that is not critical costs points only.
        assert!(
            pattern("negative", false, &["crisis_line"])
                .decide(&NO_RULES)
                .passed()
        );
    }

    #[test]
    fn always_names_what_was_not_loaded() {
        let r = AlwaysCaseResult {
            test_id: "A1".into(),
            name: String::new(),
            user_type: "PARENT".into(),
            loaded_entities: vec![],
            expected_always: vec!["welcome".into()],
            missing: vec!["welcome".into()],
            score: 0,
            breakdown: Breakdown::default(),
            is_hard_fail: true,
            duration_ms: None,
            verdict: None,
        };
        assert_eq!(
            r.decide(&NO_RULES).summary(),
            "always entity not loaded for PARENT: `welcome`"
        );
    }

    fn answer(reply: &str, assert: &serde_json::Value, threshold: Option<f64>) -> AnswerCaseResult {
        let mut r = AnswerCaseResult {
            test_id: "AN1".into(),
            message: "m".into(),
            reply: Some(reply.into()),
            ..AnswerCaseResult::default()
        };
        let set = AssertionSet::parse(assert, threshold, "assert").unwrap();
        r.assertions = Some(set.evaluate(&Output::text(reply)));
        score_case(&mut r, &ScoreWeights::default());
        r
    }

    #[test]
    fn answer_threshold_missed_fails_whatever_the_score_and_names_the_assertion() {
        // Three of four pass: 75, under the threshold 0.8.
        let r = answer(
            "Paris is the capital.",
            &json!([{"type": "contains", "value": "Paris"}, {"type": "contains", "value": "capital"},
                   {"type": "icontains", "value": "paris"}, {"type": "contains", "value": "Lyon"}]),
            Some(0.8),
        );
        assert_eq!((r.score, r.is_hard_fail), (Some(75), true));
        let v = r.decide(&NO_RULES);
        assert_eq!(v.rules(), [Rule::AssertionThreshold]);
        assert_eq!(v.failed[0].names, ["contains \"Lyon\""]);
        assert_eq!(
            v.summary(),
            "assertions passed 75% of their weight, under the threshold 80%: failed `contains \"Lyon\"` (no \"Lyon\")"
        );
        // A low pass score does not turn it into a pass.
        let low = VerdictRules {
            pass_score: Some(50),
        };
        assert_eq!(r.decide(&low).outcome, Outcome::Fail);
    }

    #[test]
    fn answer_threshold_met_at_75_passes_unless_a_pass_score_says_otherwise() {
        let r = answer(
            "Paris is the capital.",
            &json!([{"type": "contains", "value": "Paris"}, {"type": "contains", "value": "capital"},
                   {"type": "icontains", "value": "paris"}, {"type": "contains", "value": "Lyon"}]),
            Some(0.7),
        );
        assert_eq!((r.score, r.is_hard_fail), (Some(75), false));
        assert!(r.decide(&NO_RULES).passed());
        let strict = VerdictRules {
            pass_score: Some(80),
        };
        assert_eq!(r.decide(&strict).rules(), [Rule::PassScore]);
    }

    #[test]
    fn answer_critical_assertion_metric_minimum_and_trajectory_are_each_named() {
        let r = answer(
            "I cannot help with that.",
            &json!([{"type": "not-refusal", "critical": true}]),
            None,
        );
        let v = r.decide(&NO_RULES);
        assert_eq!(v.rules(), [Rule::Assertion]);
        assert_eq!(v.failed[0].names, ["not-refusal"]);
        let mut m = AnswerCaseResult {
            test_id: "AN2".into(),
            message: "m".into(),
            reply: Some("r".into()),
            metrics: [(
                Metric::Faithfulness,
                MetricOutcome {
                    score: Some(0.5),
                    minimum: Some(0.8),
                    ..MetricOutcome::default()
                },
            )]
            .into_iter()
            .collect(),
            ..AnswerCaseResult::default()
        };
        m.trajectory = vec![crate::simulation::CheckResult {
            name: "trajectory: tool `renew_loan` not used".into(),
            status: crate::simulation::CheckStatus::Failed,
            details: vec!["renew_loan was called (call 1, turn 1)".into()],
            advisory: false,
            source: None,
            state: None,
            kind: crate::simulation::CheckKind::Trajectory,
            calls: vec![],
        }];
        score_case(&mut m, &ScoreWeights::default());
        let v = m.decide(&NO_RULES);
        assert_eq!(v.rules(), [Rule::MetricMinimum, Rule::Trajectory]);
        assert_eq!(v.failed[0].names, ["faithfulness"]);
        assert_eq!(
            v.failed[1].message,
            "trajectory: tool `renew_loan` not used failed: renew_loan was called (call 1, turn 1)"
        );
        let mut e = m.clone();
        e.error = Some("the judge's reply is not JSON".into());
        assert_eq!(e.decide(&NO_RULES).outcome, Outcome::Error);
    }

    #[test]
    fn a_result_read_without_a_verdict_gets_one_as_it_is_read() {
        let mut r = semantic(&["biff"], None);
        let mut json = serde_json::to_value(&r).unwrap();
        assert!(json.get("verdict").is_none());
        r.settle(&NO_RULES);
        let written = serde_json::to_value(&r).unwrap();
        assert_eq!(written["verdict"]["outcome"], "fail");
        // A list read from a file written before verdicts: filled through `decide`.
        json["test_id"] = json!("S2");
        let list: crate::runlog::SemanticResults = serde_json::from_value(json!({
            "tests_run": 1, "errors": 0, "average_score": 0.0, "hard_fails": 1,
            "score_distribution": {}, "topic_scores": {}, "results": [json]
        }))
        .unwrap();
        assert_eq!(
            list.results[0].verdict.as_ref().map(|v| v.outcome),
            Some(Outcome::Fail)
        );
        // A stored verdict is read as stored, never decided again.
        let mut stored = written.clone();
        stored["verdict"] = json!({"outcome": "pass"});
        let read: SemanticCaseResult =
            crate::verdict::filled_one(stored).expect("a result with its verdict");
        assert!(read.verdict().passed());
    }
}
