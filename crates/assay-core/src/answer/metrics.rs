//! The grounded-answer metrics' formulas, from the judge's verdicts (docs/answers.md gives
//! each definition and how it compares with Ragas'). Pure: the verdicts come from the judge
//! calls in `assay-run` (`assay_run::answer::judge`).
//!
//! Every function returns `None` where the metric is undefined (no claims, no contexts), so a
//! report says "does not apply" instead of showing 0 or NaN.

/// Faithfulness: the share of the reply's claims the context supports, `supported ÷ claims`.
/// `None` when the reply makes no claims.
pub fn faithfulness(supported: &[bool]) -> Option<f64> {
    share(supported)
}

/// Context recall: the share of the reference's claims found in the context,
/// `found ÷ claims`. `None` when the reference makes no claims.
pub fn context_recall(found: &[bool]) -> Option<f64> {
    share(found)
}

/// Context precision, rank-aware: with `useful[k]` the verdict on the context at rank k+1,
/// the mean of precision@k over the ranks k whose context is useful,
/// `Σ_k precision@k · useful_k ÷ Σ_k useful_k`. 0 when no context is useful; `None` when
/// there are no contexts.
pub fn context_precision(useful: &[bool]) -> Option<f64> {
    if useful.is_empty() {
        return None;
    }
    let mut hits = 0usize;
    let mut sum = 0.0;
    for (k, &u) in useful.iter().enumerate() {
        if u {
            hits += 1;
            sum += hits as f64 / (k + 1) as f64;
        }
    }
    Some(if hits == 0 { 0.0 } else { sum / hits as f64 })
}

/// Answer relevancy: the mean cosine similarity between the question asked and the questions
/// the reply answers (as the judge reads them off the reply), or 0 when the judge found the
/// reply non-committal. `None` when the judge gave no question.
pub fn answer_relevancy(similarities: &[f64], noncommittal: bool) -> Option<f64> {
    if similarities.is_empty() {
        return None;
    }
    if noncommittal {
        return Some(0.0);
    }
    let mean = similarities.iter().sum::<f64>() / similarities.len() as f64;
    Some(mean.clamp(-1.0, 1.0))
}

fn share(verdicts: &[bool]) -> Option<f64> {
    if verdicts.is_empty() {
        None
    } else {
        Some(verdicts.iter().filter(|v| **v).count() as f64 / verdicts.len() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faithfulness_and_recall_are_shares_and_undefined_without_claims() {
        assert_eq!(faithfulness(&[true, false, true, true]), Some(0.75));
        assert_eq!(faithfulness(&[]), None);
        assert_eq!(context_recall(&[false, false]), Some(0.0));
    }

    #[test]
    fn context_precision_rewards_useful_contexts_ranked_first() {
        // Useful at ranks 1 and 3: (1/1 + 2/3) / 2 = 0.8333…
        let p = context_precision(&[true, false, true]).unwrap();
        assert!((p - 5.0 / 6.0).abs() < 1e-12, "{p}");
        // The same two useful contexts ranked last: (1/2 + 2/3) / 2 = 0.5833…
        let q = context_precision(&[false, true, true]).unwrap();
        assert!((q - 7.0 / 12.0).abs() < 1e-12, "{q}");
        assert_eq!(context_precision(&[false, false]), Some(0.0));
        assert_eq!(context_precision(&[true, true]), Some(1.0));
        assert_eq!(context_precision(&[]), None);
    }

    #[test]
    fn relevancy_is_the_mean_similarity_unless_noncommittal() {
        let mean = answer_relevancy(&[0.9, 0.7, 0.8], false).unwrap();
        assert!((mean - 0.8).abs() < 1e-12, "{mean}");
        assert_eq!(answer_relevancy(&[0.9], true), Some(0.0));
        assert_eq!(answer_relevancy(&[], false), None);
    }
}
