//! Information-retrieval metrics of the semantic bank: recall@k, MRR and nDCG@k, beside the
//! seed's 100-point score.
//!
//! * **The ranked list** of a case ([`ranked_list`]) is its final selection, in order, followed
//!   by the other first-stage candidates in candidate order, cut at [`RANKED_LIST_LEN`]. With
//!   the default settings (15 candidates, 6 selected) its first six are exactly what the case is
//!   scored on, and the rest is what the embedding search found but the selection left out, so
//!   recall@6 reads as "what was selected" and recall@15 as "what was found at all".
//! * **Relevance** is graded: each expected primary entity is 2, each expected secondary
//!   entity 1 (an entity listed as both counts as primary); everything else is 0.
//! * **recall@k** = relevant entities in the first k / relevant entities.
//! * **MRR**: 1 / the rank of the first relevant entity in the list (0 when none is in it).
//! * **nDCG@k**: DCG@k = Σ rel_i / log2(i + 1) over the first k (linear gain, as trec_eval's
//!   `ndcg_cut`), divided by the DCG@k of the ideal ordering of all relevant entities.
//! * A case with no relevant entity, or one that errored, has no metrics; aggregates are means
//!   over the cases that have them.
//!
//! ```
//! use assay_core::ir::IrMetrics;
//! let ranked = vec!["b".to_owned(), "a".to_owned()];
//! let m = IrMetrics::of(&ranked, &["a".to_owned()], &[]).unwrap();
//! assert_eq!((m.recall_at_3, m.mrr), (1.0, 0.5));
//! ```

use serde::{Deserialize, Serialize};

/// The cut-offs of recall and nDCG.
pub const CUTOFFS: [usize; 3] = [3, 6, 15];
/// The length of a case's ranked list (the default number of semantic candidates).
pub const RANKED_LIST_LEN: usize = 15;

/// A case's ranked list: `selections` in order, then the `candidates` not selected, in order;
/// duplicates kept once; at most [`RANKED_LIST_LEN`].
pub fn ranked_list<'a>(
    selections: impl IntoIterator<Item = &'a str>,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for id in selections.into_iter().chain(candidates) {
        if out.len() == RANKED_LIST_LEN {
            break;
        }
        if !out.iter().any(|o| o == id) {
            out.push(id.to_owned());
        }
    }
    out
}

/// The metrics of one case, or their means over cases.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct IrMetrics {
    /// Recall in the first 3.
    pub recall_at_3: f64,
    /// Recall in the first 6.
    pub recall_at_6: f64,
    /// Recall in the first 15.
    pub recall_at_15: f64,
    /// Reciprocal rank of the first relevant entity.
    pub mrr: f64,
    /// nDCG of the first 3.
    pub ndcg_at_3: f64,
    /// nDCG of the first 6.
    pub ndcg_at_6: f64,
    /// nDCG of the first 15.
    pub ndcg_at_15: f64,
}

fn grade(id: &str, primary: &[String], secondary: &[String]) -> u32 {
    if primary.iter().any(|p| p == id) {
        2
    } else {
        u32::from(secondary.iter().any(|s| s == id))
    }
}

fn dcg(gains: impl IntoIterator<Item = u32>, k: usize) -> f64 {
    gains
        .into_iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| f64::from(g) / ((i + 2) as f64).log2())
        .sum()
}

impl IrMetrics {
    /// The metrics of a ranked list against graded expectations; `None` when nothing is
    /// relevant.
    pub fn of(ranked: &[String], primary: &[String], secondary: &[String]) -> Option<IrMetrics> {
        let mut relevant: Vec<(&str, u32)> = Vec::new();
        for id in primary.iter().chain(secondary) {
            if !relevant.iter().any(|(r, _)| *r == id) {
                relevant.push((id, grade(id, primary, secondary)));
            }
        }
        if relevant.is_empty() {
            return None;
        }
        let gains: Vec<u32> = ranked
            .iter()
            .map(|id| grade(id, primary, secondary))
            .collect();
        let mut ideal: Vec<u32> = relevant.iter().map(|(_, g)| *g).collect();
        ideal.sort_unstable_by(|a, b| b.cmp(a));
        let total = relevant.len() as f64;
        let recall = |k: usize| gains.iter().take(k).filter(|g| **g > 0).count() as f64 / total;
        let ndcg = |k: usize| dcg(gains.iter().copied(), k) / dcg(ideal.iter().copied(), k);
        let mrr = gains
            .iter()
            .position(|g| *g > 0)
            .map_or(0.0, |i| 1.0 / (i + 1) as f64);
        Some(IrMetrics {
            recall_at_3: recall(3),
            recall_at_6: recall(6),
            recall_at_15: recall(15),
            mrr,
            ndcg_at_3: ndcg(3),
            ndcg_at_6: ndcg(6),
            ndcg_at_15: ndcg(15),
        })
    }

    /// `(name, value)` pairs, in a fixed order (`recall@3`, …, `mrr`, `ndcg@3`, …).
    pub fn named(&self) -> [(&'static str, f64); 7] {
        [
            ("recall@3", self.recall_at_3),
            ("recall@6", self.recall_at_6),
            ("recall@15", self.recall_at_15),
            ("mrr", self.mrr),
            ("ndcg@3", self.ndcg_at_3),
            ("ndcg@6", self.ndcg_at_6),
            ("ndcg@15", self.ndcg_at_15),
        ]
    }
}

/// Mean metrics over the cases that have them.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct IrSummary {
    /// Cases averaged (those with at least one relevant entity and no error).
    pub cases: usize,
    /// The means.
    #[serde(flatten)]
    pub mean: IrMetrics,
}

impl IrSummary {
    /// The means of `metrics`; `None` when there are none.
    pub fn of<'a>(metrics: impl IntoIterator<Item = &'a IrMetrics>) -> Option<IrSummary> {
        let mut sum = IrMetrics::default();
        let mut n = 0usize;
        for m in metrics {
            n += 1;
            sum.recall_at_3 += m.recall_at_3;
            sum.recall_at_6 += m.recall_at_6;
            sum.recall_at_15 += m.recall_at_15;
            sum.mrr += m.mrr;
            sum.ndcg_at_3 += m.ndcg_at_3;
            sum.ndcg_at_6 += m.ndcg_at_6;
            sum.ndcg_at_15 += m.ndcg_at_15;
        }
        if n == 0 {
            return None;
        }
        let d = n as f64;
        Some(IrSummary {
            cases: n,
            mean: IrMetrics {
                recall_at_3: sum.recall_at_3 / d,
                recall_at_6: sum.recall_at_6 / d,
                recall_at_15: sum.recall_at_15 / d,
                mrr: sum.mrr / d,
                ndcg_at_3: sum.ndcg_at_3 / d,
                ndcg_at_6: sum.ndcg_at_6 / d,
                ndcg_at_15: sum.ndcg_at_15 / d,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn ranked_list_is_selections_then_unselected_candidates() {
        let r = ranked_list(["c", "a"], ["a", "b", "c", "d"]);
        assert_eq!(r, ids(&["c", "a", "b", "d"]));
        let many: Vec<String> = (0..40).map(|i| format!("e{i}")).collect();
        let r = ranked_list([], many.iter().map(String::as_str));
        assert_eq!(r.len(), RANKED_LIST_LEN);
    }

    #[test]
    fn graded_metrics_by_hand() {
        // primary p at rank 2, secondary s at rank 4, secondary t missing.
        let ranked = ids(&["x", "p", "y", "s", "z"]);
        let m = IrMetrics::of(&ranked, &ids(&["p"]), &ids(&["s", "t"])).unwrap();
        assert!((m.recall_at_3 - 1.0 / 3.0).abs() < 1e-12);
        assert!((m.recall_at_6 - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(m.mrr, 0.5);
        // ideal gains 2, 1, 1 at ranks 1..3
        let idcg3 = 2.0 + 1.0 / 3f64.log2() + 1.0 / 4f64.log2();
        let want3 = (2.0 / 3f64.log2()) / idcg3;
        assert!(
            (m.ndcg_at_3 - want3).abs() < 1e-12,
            "{} {want3}",
            m.ndcg_at_3
        );
        let want6 = (2.0 / 3f64.log2() + 1.0 / 5f64.log2()) / idcg3;
        assert!((m.ndcg_at_6 - want6).abs() < 1e-12);
    }

    #[test]
    fn perfect_and_empty() {
        let m = IrMetrics::of(&ids(&["p", "s"]), &ids(&["p"]), &ids(&["s"])).unwrap();
        assert_eq!(m.ndcg_at_3, 1.0);
        assert_eq!(m.recall_at_3, 1.0);
        assert_eq!(m.mrr, 1.0);
        let none = IrMetrics::of(&ids(&["x"]), &ids(&["p"]), &[]).unwrap();
        assert_eq!(
            (none.mrr, none.ndcg_at_15, none.recall_at_15),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(IrMetrics::of(&ids(&["x"]), &[], &[]), None);
        // Listed as both: counts once, as primary.
        let both = IrMetrics::of(&ids(&["p"]), &ids(&["p"]), &ids(&["p"])).unwrap();
        assert_eq!(both.recall_at_3, 1.0);
        assert_eq!(both.ndcg_at_3, 1.0);
    }

    #[test]
    fn summary_means() {
        let a = IrMetrics {
            mrr: 1.0,
            ..IrMetrics::default()
        };
        let b = IrMetrics::default();
        let s = IrSummary::of([&a, &b]).unwrap();
        assert_eq!((s.cases, s.mean.mrr), (2, 0.5));
        assert_eq!(IrSummary::of([]), None);
    }
}
