//! The four case runners (000 §6.1–6.4): each turns one case into a scored result.

use assay_core::bank::{AlwaysCase, ExpectationSet, PatternCase, SemanticCase, StateCase};
use assay_core::ir::{IrMetrics, ranked_list};
use assay_core::runlog::{
    AlwaysCaseResult, LostAt, LostEntity, PatternCaseResult, SemanticCaseResult, StateCaseResult,
};
use assay_core::scoring::{
    Breakdown, PRIMARY_FAIL_REASON, RankViolation, ScoreInput, score_with_reason,
};
use assay_kb::KnowledgeBase;
use assay_retrieval::patterns::PatternMatcher;
use assay_retrieval::{RetrievalError, StateMatcher, always_entities};

pub use assay_project::engine::{SemanticRetrieval, SemanticRetriever};
use assay_project::expectations::Resolved;

fn missing(expected: &[String], found: &[String]) -> Vec<String> {
    expected
        .iter()
        .filter(|e| !found.contains(e))
        .cloned()
        .collect()
}

fn present(unwanted: &[String], found: &[String]) -> Vec<String> {
    unwanted
        .iter()
        .filter(|e| found.contains(e))
        .cloned()
        .collect()
}

/// Rank checks whose two entities were both selected in the wrong order (000 §6.1).
pub fn rank_violations(selections: &[String], expectations: &ExpectationSet) -> Vec<RankViolation> {
    expectations
        .rank_check
        .iter()
        .filter_map(|check| {
            let higher = selections.iter().position(|s| *s == check.higher)?;
            let lower = selections.iter().position(|s| *s == check.lower)?;
            (higher > lower).then(|| RankViolation {
                expected_higher: check.higher.clone(),
                expected_lower: check.lower.clone(),
                actual_higher_rank: higher + 1,
                actual_lower_rank: lower + 1,
            })
        })
        .collect()
}

/// Runs one semantic case.
pub async fn run_semantic_case(
    retriever: &dyn SemanticRetriever,
    case: &SemanticCase,
    resolved: &Resolved,
) -> SemanticCaseResult {
    run_semantic_sample(retriever, case, resolved, 0).await
}

/// A semantic case run `repeats` times (repeat `k` as sample `k`), as one result: the first
/// repeat's candidates and selections, the score the mean of the scored repeats (rounded),
/// a hard fail when most scored repeats hard-failed, every repeat's score in
/// `repeat_scores`, and `unstable` when the repeats disagree on the primary expectation.
/// Errors of some repeats are kept as the result's error only when no repeat scored.
pub async fn run_semantic_repeated(
    retriever: &dyn SemanticRetriever,
    case: &SemanticCase,
    resolved: &Resolved,
    repeats: u32,
) -> SemanticCaseResult {
    let mut runs = Vec::with_capacity(repeats as usize);
    for k in 0..repeats.max(1) {
        runs.push(run_semantic_sample(retriever, case, resolved, k).await);
    }
    if runs.len() == 1 {
        return runs.remove(0);
    }
    let scored: Vec<&SemanticCaseResult> = runs.iter().filter(|r| r.score.is_some()).collect();
    let repeat_scores: Vec<Option<u32>> = runs.iter().map(|r| r.score).collect();
    let mut first = runs
        .iter()
        .find(|r| r.score.is_some())
        .cloned()
        .unwrap_or_else(|| runs[0].clone());
    if !scored.is_empty() {
        let sum: u32 = scored.iter().filter_map(|r| r.score).sum();
        let mean = f64::from(sum) / scored.len() as f64;
        first.score = Some(mean.round() as u32);
        first.is_hard_fail = 2 * scored.iter().filter(|r| r.is_hard_fail).count() > scored.len();
        first.unstable = scored
            .iter()
            .any(|r| r.primary_pass != scored[0].primary_pass);
        first.error = None;
    }
    first.repeat_scores = repeat_scores;
    first
}

async fn run_semantic_sample(
    retriever: &dyn SemanticRetriever,
    case: &SemanticCase,
    resolved: &Resolved,
    sample: u32,
) -> SemanticCaseResult {
    let exp = &resolved.expectations;
    let mut result = SemanticCaseResult {
        test_id: case.test_id.clone(),
        name: case.name.clone(),
        category: case.category.clone(),
        topics: case.topics.clone(),
        prompt: case.prompt.clone(),
        candidates: Vec::new(),
        selections: Vec::new(),
        expectations: exp.clone(),
        expectation_source: resolved.source.to_string(),
        primary_pass: false,
        secondary_missing: Vec::new(),
        false_positives: Vec::new(),
        rank_violations: Vec::new(),
        lost: Vec::new(),
        score: None,
        breakdown: Breakdown::default(),
        is_hard_fail: false,
        error: None,
        ir: None,
        repeat_scores: Vec::new(),
        unstable: false,
        duration_ms: None,
        verdict: None,
    };
    let retrieval = match retriever
        .retrieve_sample(&case.prompt, &case.user_state, sample)
        .await
    {
        Ok(r) => r,
        Err(error) => {
            result.error = Some(error);
            return result;
        }
    };
    let selections = retrieval.selections;
    let primary_missing = missing(&exp.expected_primary, &selections);
    let input = ScoreInput {
        primary_pass: primary_missing.is_empty(),
        secondary_missing: missing(&exp.expected_secondary, &selections),
        false_positives: present(&exp.not_expected, &selections),
        rank_violations: rank_violations(&selections, exp),
        wrong_handlers: Vec::new(),
    };
    let n = retrieval.candidates.len();
    let kept = selections.len();
    let lost: Vec<LostEntity> = primary_missing
        .iter()
        .chain(&input.secondary_missing)
        .map(|id| {
            let rank = retrieval.candidates.iter().position(|c| c.entity_id == *id);
            let detail = retrieval
                .why_not
                .get(id)
                .cloned()
                .or_else(|| retriever.explain(id, &case.user_state))
                .or_else(|| {
                    Some(match rank {
                        Some(r) => format!(
                            "ranked {} of the {n} candidates; {kept} were selected",
                            assay_core::text::ordinal(r + 1)
                        ),
                        None => format!("not among the {n} nearest"),
                    })
                });
            LostEntity {
                entity_id: id.clone(),
                lost_at: if rank.is_some() {
                    LostAt::DroppedByReranker
                } else {
                    LostAt::NotRetrieved
                },
                detail,
            }
        })
        .collect();
    let reason = lost
        .iter()
        .filter(|l| primary_missing.contains(&l.entity_id))
        .map(LostEntity::describe)
        .collect::<Vec<_>>()
        .join("; ");
    let scored = score_with_reason(&input, &format!("{PRIMARY_FAIL_REASON}: {reason}"));
    let ranked = ranked_list(
        selections.iter().map(String::as_str),
        retrieval.candidates.iter().map(|c| c.entity_id.as_str()),
    );
    let ir = IrMetrics::of(&ranked, &exp.expected_primary, &exp.expected_secondary);
    SemanticCaseResult {
        candidates: retrieval.candidates,
        selections,
        primary_pass: input.primary_pass,
        secondary_missing: input.secondary_missing,
        false_positives: input.false_positives,
        rank_violations: input.rank_violations,
        lost,
        score: Some(scored.score),
        breakdown: scored.breakdown,
        is_hard_fail: scored.is_hard_fail,
        ir,
        ..result
    }
}

/// Runs one state case (000 §6.2).
pub fn run_state_case(matcher: &StateMatcher, case: &StateCase) -> StateCaseResult {
    let triggered = matcher.evaluate(&case.user_state);
    let not_triggered = missing(&case.expected_handlers, &triggered);
    let input = ScoreInput {
        primary_pass: not_triggered.is_empty(),
        wrong_handlers: present(&case.not_expected_handlers, &triggered),
        ..ScoreInput::default()
    };
    let reason = format!(
        "Expected handler did not trigger: {}",
        not_triggered.join(", ")
    );
    let scored = score_with_reason(&input, &reason);
    StateCaseResult {
        test_id: case.test_id.clone(),
        name: case.name.clone(),
        user_state: case.user_state.clone(),
        triggered_handlers: triggered,
        expected_handlers: case.expected_handlers.clone(),
        not_expected_handlers: case.not_expected_handlers.clone(),
        primary_pass: input.primary_pass,
        wrong_handlers: input.wrong_handlers,
        score: scored.score,
        breakdown: scored.breakdown,
        is_hard_fail: scored.is_hard_fail,
        duration_ms: None,
        verdict: None,
    }
}

/// The pattern types whose failures can be critical (000 §6.3).
pub const CRISIS: &str = "crisis";
/// See [`CRISIS`].
pub const NEGATIVE: &str = "negative";

/// Runs one pattern case (000 §6.3).
pub fn run_pattern_case(matcher: &PatternMatcher, case: &PatternCase) -> PatternCaseResult {
    let m = matcher.match_message(&case.prompt);
    let not_matched = missing(&case.expected_matches, &m.entities);
    let input = ScoreInput {
        primary_pass: not_matched.is_empty(),
        secondary_missing: missing(&case.expected_secondary, &m.entities),
        false_positives: present(&case.not_expected_matches, &m.entities),
        ..ScoreInput::default()
    };
    let reason = format!("Expected match not found: {}", not_matched.join(", "));
    let scored = score_with_reason(&input, &reason);
    // A missed crisis on a critical crisis case, or any false positive on a critical negative case.
    let is_critical_failure = case.is_critical
        && ((case.pattern_type == CRISIS && !input.primary_pass)
            || (case.pattern_type == NEGATIVE && !input.false_positives.is_empty()));
    PatternCaseResult {
        test_id: case.test_id.clone(),
        name: case.name.clone(),
        prompt: case.prompt.clone(),
        pattern_type: case.pattern_type.clone(),
        matched_entities: m.entities,
        crisis_matches: m.crisis_matches,
        keyword_matches: m.keyword_matches,
        expected_matches: case.expected_matches.clone(),
        expected_secondary: case.expected_secondary.clone(),
        not_expected_matches: case.not_expected_matches.clone(),
        primary_pass: input.primary_pass,
        secondary_missing: input.secondary_missing,
        false_positives: input.false_positives,
        score: scored.score,
        breakdown: scored.breakdown,
        is_hard_fail: scored.is_hard_fail,
        is_critical: case.is_critical,
        is_critical_failure,
        duration_ms: None,
        verdict: None,
    }
}

/// Runs one always case (000 §6.4): 100 when every expected entity loads, else 0.
pub fn run_always_case(
    kb: &dyn KnowledgeBase,
    case: &AlwaysCase,
) -> Result<AlwaysCaseResult, RetrievalError> {
    let loaded: Vec<String> = always_entities(kb, &case.user_type)?
        .into_iter()
        .map(|e| e.entity_id)
        .collect();
    let absent = missing(&case.expected_always, &loaded);
    let reason = format!("Always-loaded entity missing: {}", absent.join(", "));
    let scored = score_with_reason(
        &ScoreInput {
            primary_pass: absent.is_empty(),
            ..ScoreInput::default()
        },
        &reason,
    );
    Ok(AlwaysCaseResult {
        test_id: case.test_id.clone(),
        name: case.name.clone(),
        user_type: case.user_type.clone(),
        loaded_entities: loaded,
        expected_always: case.expected_always.clone(),
        missing: absent,
        score: scored.score,
        breakdown: scored.breakdown,
        is_hard_fail: scored.is_hard_fail,
        duration_ms: None,
        verdict: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::UserState;
    use assay_core::runlog::Candidate;
    use assay_project::expectations::ExpectationSource;
    use serde_json::json;

    struct Fixed(Result<SemanticRetrieval, String>);

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        futures_util::FutureExt::now_or_never(f).expect("the test retriever never waits")
    }

    #[async_trait::async_trait]
    impl SemanticRetriever for Fixed {
        fn describe(&self) -> String {
            "fixed".into()
        }
        async fn retrieve(&self, _: &str, _: &UserState) -> Result<SemanticRetrieval, String> {
            self.0.clone()
        }
    }

    fn candidates(ids: &[&str]) -> Vec<Candidate> {
        ids.iter()
            .map(|id| Candidate {
                entity_id: (*id).into(),
                similarity: 0.5,
            })
            .collect()
    }

    fn retrieval(cands: &[&str], sel: &[&str]) -> Fixed {
        Fixed(Ok(SemanticRetrieval {
            candidates: candidates(cands),
            selections: sel.iter().map(|s| (*s).to_owned()).collect(),
            why_not: std::collections::HashMap::new(),
        }))
    }

    fn semantic_case() -> (SemanticCase, Resolved) {
        let case: SemanticCase = serde_json::from_value(json!({
            "test_id": "V2-GR-001", "prompt": "she texts me nonstop to get a reaction",
            "topics": ["gray_rock"],
            "expected_primary": ["gray_rock"],
            "expected_secondary": ["medium_response_time", "biff_response"],
            "not_expected": ["handler_crisis"],
            "rank_check": [{"higher": "gray_rock", "lower": "boundary_setting"}]
        }))
        .unwrap();
        let resolved = Resolved {
            expectations: case.original_expectations(),
            source: ExpectationSource::Original,
            file: None,
        };
        (case, resolved)
    }

    #[test]
    fn one_secondary_miss_scores_90_and_is_attributed() {
        let (case, resolved) = semantic_case();
        let all = ["gray_rock", "medium_response_time", "biff_response"];
        let r = block_on(run_semantic_case(
            &retrieval(&all, &["gray_rock", "medium_response_time"]),
            &case,
            &resolved,
        ));
        assert_eq!((r.score, r.is_hard_fail), (Some(90), false));
        assert_eq!(
            r.lost,
            vec![LostEntity {
                entity_id: "biff_response".into(),
                lost_at: LostAt::DroppedByReranker,
                detail: Some("ranked 3rd of the 3 candidates; 2 were selected".into()),
            }]
        );
    }

    #[test]
    fn one_false_positive_scores_80() {
        let (case, resolved) = semantic_case();
        let sel = [
            "gray_rock",
            "medium_response_time",
            "biff_response",
            "handler_crisis",
        ];
        let r = block_on(run_semantic_case(&retrieval(&sel, &sel), &case, &resolved));
        assert_eq!(r.score, Some(80));
        assert_eq!(r.false_positives, vec!["handler_crisis"]);
    }

    #[test]
    fn primary_miss_scores_0_and_says_where_it_was_lost() {
        let (case, resolved) = semantic_case();
        let r = block_on(run_semantic_case(
            &retrieval(&["biff_response"], &["biff_response"]),
            &case,
            &resolved,
        ));
        assert_eq!((r.score, r.is_hard_fail), (Some(0), true));
        assert_eq!(
            r.lost[0],
            LostEntity {
                entity_id: "gray_rock".into(),
                lost_at: LostAt::NotRetrieved,
                detail: Some("not among the 1 nearest".into()),
            }
        );
        assert_eq!(
            r.breakdown.reason.as_deref(),
            Some(
                "Primary expected entity not found: `gray_rock` not retrieved: not among the 1 nearest"
            )
        );
    }

    #[test]
    fn rank_violation_costs_ten() {
        let (case, resolved) = semantic_case();
        let sel = [
            "boundary_setting",
            "gray_rock",
            "medium_response_time",
            "biff_response",
        ];
        let r = block_on(run_semantic_case(&retrieval(&sel, &sel), &case, &resolved));
        assert_eq!(r.score, Some(90));
        assert_eq!(r.rank_violations[0].actual_higher_rank, 2);
    }

    #[test]
    fn an_infrastructure_error_is_not_scored() {
        let (case, resolved) = semantic_case();
        let r = block_on(run_semantic_case(
            &Fixed(Err("timeout after 3 retries".into())),
            &case,
            &resolved,
        ));
        assert_eq!(
            (r.score, r.error.as_deref()),
            (None, Some("timeout after 3 retries"))
        );
        assert!(!r.is_hard_fail);
    }
}
