//! The 100-point scoring system (000 §3).
//!
//! A case starts at 100 when its primary expectation holds and is a hard fail (0) when it does
//! not. Penalties stack per item: −10 per missing secondary, −20 per false positive, −10 per
//! rank violation, −20 per wrong handler; the floor is 0.
//!
//! ```
//! use assay_core::scoring::{score, ScoreInput};
//! let input = ScoreInput { primary_pass: true, secondary_missing: vec!["a".into()], ..ScoreInput::default() };
//! assert_eq!(score(&input).score, 90);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Points taken per missing secondary entity.
pub const SECONDARY_PENALTY: u32 = 10;
/// Points taken per false positive.
pub const FALSE_POSITIVE_PENALTY: u32 = 20;
/// Points taken per rank violation.
pub const RANK_PENALTY: u32 = 10;
/// Points taken per wrong handler.
pub const WRONG_HANDLER_PENALTY: u32 = 20;

/// A violated `rank_check`, with 1-based ranks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankViolation {
    /// The entity that should have ranked higher.
    pub expected_higher: String,
    /// The entity that should have ranked lower.
    pub expected_lower: String,
    /// Where the first one actually ranked.
    pub actual_higher_rank: usize,
    /// Where the second one actually ranked.
    pub actual_lower_rank: usize,
}

/// What a runner observed, ready to be scored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScoreInput {
    /// Did every primary expectation hold?
    pub primary_pass: bool,
    /// Expected secondary entities that were not found.
    pub secondary_missing: Vec<String>,
    /// Entities found that were expected not to be.
    pub false_positives: Vec<String>,
    /// Violated rank checks.
    pub rank_violations: Vec<RankViolation>,
    /// Handlers that triggered but should not have (state cases).
    pub wrong_handlers: Vec<String>,
}

/// One penalty line of a breakdown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Penalty<T> {
    /// What was penalised.
    pub items: Vec<T>,
    /// How many.
    pub count: usize,
    /// Points taken (negative).
    pub penalty: i64,
}

impl<T> Penalty<T> {
    fn of(items: Vec<T>, per_item: u32) -> Option<Penalty<T>> {
        if items.is_empty() {
            return None;
        }
        let count = items.len();
        let count_i64 = i64::try_from(count).unwrap_or(i64::MAX);
        Some(Penalty {
            items,
            count,
            penalty: -count_i64.saturating_mul(i64::from(per_item)),
        })
    }

    fn points(&self) -> u64 {
        self.penalty.unsigned_abs()
    }
}

/// Why a case scored what it did (the seed's `breakdown`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Breakdown {
    /// Set on a hard fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_fail: Option<bool>,
    /// Set on a hard fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// −10 each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secondary_missing: Option<Penalty<String>>,
    /// −20 each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub false_positives: Option<Penalty<String>>,
    /// −10 each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_violations: Option<Penalty<RankViolation>>,
    /// −20 each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrong_handlers: Option<Penalty<String>>,
}

/// A case's score.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoreResult {
    /// 0–100.
    pub score: u32,
    /// Why.
    pub breakdown: Breakdown,
    /// The primary expectation failed.
    pub is_hard_fail: bool,
}

/// The reason recorded on a hard fail.
pub const PRIMARY_FAIL_REASON: &str = "Primary expected entity not found";

/// Scores a case (000 §3.2).
pub fn score(input: &ScoreInput) -> ScoreResult {
    score_with_reason(input, PRIMARY_FAIL_REASON)
}

/// Scores a case, with a mechanism-specific hard-fail reason.
pub fn score_with_reason(input: &ScoreInput, hard_fail_reason: &str) -> ScoreResult {
    if !input.primary_pass {
        return ScoreResult {
            score: 0,
            breakdown: Breakdown {
                primary_fail: Some(true),
                reason: Some(hard_fail_reason.to_owned()),
                ..Breakdown::default()
            },
            is_hard_fail: true,
        };
    }
    let breakdown = Breakdown {
        secondary_missing: Penalty::of(input.secondary_missing.clone(), SECONDARY_PENALTY),
        false_positives: Penalty::of(input.false_positives.clone(), FALSE_POSITIVE_PENALTY),
        rank_violations: Penalty::of(input.rank_violations.clone(), RANK_PENALTY),
        wrong_handlers: Penalty::of(input.wrong_handlers.clone(), WRONG_HANDLER_PENALTY),
        ..Breakdown::default()
    };
    let taken: u64 = breakdown
        .secondary_missing
        .as_ref()
        .map_or(0, Penalty::points)
        + breakdown
            .false_positives
            .as_ref()
            .map_or(0, Penalty::points)
        + breakdown
            .rank_violations
            .as_ref()
            .map_or(0, Penalty::points)
        + breakdown.wrong_handlers.as_ref().map_or(0, Penalty::points);
    let score = 100u64.saturating_sub(taken) as u32;
    ScoreResult {
        score,
        breakdown,
        is_hard_fail: false,
    }
}

/// The human reading of a score (000 §3.2 `interpret_score`).
pub fn interpret(score: u32) -> &'static str {
    match score {
        100.. => "Perfect",
        90..=99 => "Minor issue",
        80..=89 => "Notable issues",
        70..=79 => "Concerning",
        60..=69 => "Barely acceptable",
        1..=59 => "Failing",
        0 => "Hard fail",
    }
}

/// The distribution buckets, in report order.
pub const BUCKETS: [&str; 7] = ["100", "90-99", "80-89", "70-79", "60-69", "1-59", "0"];

/// The distribution bucket of a score.
pub fn bucket(score: u32) -> &'static str {
    match score {
        100.. => BUCKETS[0],
        90..=99 => BUCKETS[1],
        80..=89 => BUCKETS[2],
        70..=79 => BUCKETS[3],
        60..=69 => BUCKETS[4],
        1..=59 => BUCKETS[5],
        0 => BUCKETS[6],
    }
}

/// Counts of scores per bucket (000 §3.2 `get_score_distribution`); every bucket is present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ScoreDistribution(pub BTreeMap<String, usize>);

impl ScoreDistribution {
    /// The distribution of `scores`.
    pub fn of(scores: impl IntoIterator<Item = u32>) -> ScoreDistribution {
        let mut counts: BTreeMap<String, usize> =
            BUCKETS.iter().map(|b| ((*b).to_owned(), 0)).collect();
        for s in scores {
            *counts.entry(bucket(s).to_owned()).or_default() += 1;
        }
        ScoreDistribution(counts)
    }

    /// `(bucket, count)` in report order (100 first, 0 last).
    pub fn in_order(&self) -> impl Iterator<Item = (&'static str, usize)> + '_ {
        BUCKETS
            .iter()
            .map(|b| (*b, self.0.get(*b).copied().unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("e{i}")).collect()
    }

    fn violations(n: usize) -> Vec<RankViolation> {
        (0..n)
            .map(|i| RankViolation {
                expected_higher: format!("h{i}"),
                expected_lower: format!("l{i}"),
                actual_higher_rank: 2,
                actual_lower_rank: 1,
            })
            .collect()
    }

    fn passing(secondary: usize, false_pos: usize, rank: usize, wrong: usize) -> ScoreInput {
        ScoreInput {
            primary_pass: true,
            secondary_missing: ids(secondary),
            false_positives: ids(false_pos),
            rank_violations: violations(rank),
            wrong_handlers: ids(wrong),
        }
    }

    // 000 §3.3, one test per row.
    #[test]
    fn table_perfect() {
        let r = score(&passing(0, 0, 0, 0));
        assert_eq!((r.score, r.is_hard_fail), (100, false));
        assert_eq!(r.breakdown, Breakdown::default());
    }

    #[test]
    fn table_one_secondary_miss() {
        let r = score(&passing(1, 0, 0, 0));
        assert_eq!(r.score, 90);
        assert_eq!(r.breakdown.secondary_missing.unwrap().penalty, -10);
    }

    #[test]
    fn table_one_false_positive() {
        let r = score(&passing(0, 1, 0, 0));
        assert_eq!(r.score, 80);
        assert_eq!(r.breakdown.false_positives.unwrap().penalty, -20);
    }

    #[test]
    fn table_two_secondary_and_one_rank_violation() {
        assert_eq!(score(&passing(2, 0, 1, 0)).score, 70);
    }

    #[test]
    fn table_one_secondary_and_two_false_positives() {
        assert_eq!(score(&passing(1, 2, 0, 0)).score, 50);
    }

    #[test]
    fn table_primary_not_found() {
        let r = score(&ScoreInput {
            primary_pass: false,
            ..passing(1, 1, 1, 1)
        });
        assert_eq!((r.score, r.is_hard_fail), (0, true));
        assert_eq!(r.breakdown.primary_fail, Some(true));
        assert_eq!(r.breakdown.reason.as_deref(), Some(PRIMARY_FAIL_REASON));
    }

    #[test]
    fn wrong_handler_costs_twenty() {
        assert_eq!(score(&passing(0, 0, 0, 1)).score, 80);
    }

    #[test]
    fn floor_is_zero_and_not_a_hard_fail() {
        let r = score(&passing(3, 5, 2, 1));
        assert_eq!((r.score, r.is_hard_fail), (0, false));
    }

    #[test]
    fn breakdown_serializes_like_the_seed() {
        let r = score(&passing(1, 0, 0, 0));
        assert_eq!(
            serde_json::to_value(&r.breakdown).unwrap(),
            serde_json::json!({"secondary_missing": {"items": ["e0"], "count": 1, "penalty": -10}})
        );
    }

    #[test]
    fn interpretation_labels() {
        let cases = [
            (100, "Perfect"),
            (99, "Minor issue"),
            (90, "Minor issue"),
            (89, "Notable issues"),
            (80, "Notable issues"),
            (79, "Concerning"),
            (70, "Concerning"),
            (69, "Barely acceptable"),
            (60, "Barely acceptable"),
            (59, "Failing"),
            (1, "Failing"),
            (0, "Hard fail"),
        ];
        for (s, label) in cases {
            assert_eq!(interpret(s), label, "score {s}");
        }
    }

    #[test]
    fn distribution_buckets() {
        let d = ScoreDistribution::of([100, 100, 95, 80, 79, 60, 59, 1, 0]);
        let got: Vec<_> = d.in_order().collect();
        assert_eq!(
            got,
            vec![
                ("100", 2),
                ("90-99", 1),
                ("80-89", 1),
                ("70-79", 1),
                ("60-69", 1),
                ("1-59", 2),
                ("0", 1)
            ]
        );
        assert_eq!(
            ScoreDistribution::of([])
                .in_order()
                .map(|(_, c)| c)
                .sum::<usize>(),
            0
        );
    }

    proptest! {
        #[test]
        fn score_stays_within_bounds(pass: bool, s in 0usize..12, f in 0usize..8, r in 0usize..12, w in 0usize..8) {
            let result = score(&ScoreInput { primary_pass: pass, ..passing(s, f, r, w) });
            prop_assert!(result.score <= 100);
            prop_assert_eq!(result.is_hard_fail, !pass);
            if !pass { prop_assert_eq!(result.score, 0); }
        }

        #[test]
        fn more_penalties_never_raise_a_score(
            s in 0usize..6, f in 0usize..4, r in 0usize..6, w in 0usize..4,
            ds in 0usize..3, df in 0usize..3, dr in 0usize..3, dw in 0usize..3,
        ) {
            let base = score(&passing(s, f, r, w)).score;
            let worse = score(&passing(s + ds, f + df, r + dr, w + dw)).score;
            prop_assert!(worse <= base);
            let failed = score(&ScoreInput { primary_pass: false, ..passing(s, f, r, w) }).score;
            prop_assert!(failed <= worse);
        }
    }
}
