//! How far a judge agrees with people (`assay judge agree`): scores people gave, per criterion,
//! set beside the scores a judge (the simulator's judge, the optimizer's llm-rubric grader)
//! gives the same items, measured with the shared statistics ([`crate::stats`]).
//!
//! Per criterion: Cohen's kappa (quadratic-weighted on 0-10 scales, where a near miss counts
//! almost as agreement; plain on pass/fail), Spearman's rank correlation, the mean absolute
//! error, the share of exact agreement (within one point on 0-10) and a confusion table. Over
//! everything: the share of agreement with its bootstrap interval, and, when verdicts are
//! known, the verdicts' agreement and kappa.
//!
//! ```
//! use assay_core::agreement::{Observation, Scale, measure};
//! let obs: Vec<Observation> = (0..10)
//!     .map(|i| Observation::new(&format!("item{i}"), "accuracy", Scale::ZeroToTen, f64::from(i), f64::from(i)))
//!     .collect();
//! let report = measure(&obs, &[]);
//! assert_eq!(report.criteria[0].kappa, Some(1.0));
//! ```

use serde::{Deserialize, Serialize};

use crate::stats::{
    BootstrapSettings, ConfusionTable, Interval, bootstrap_mean, cohen_kappa, confusion_table,
    mean_absolute_error, quadratic_kappa, spearman,
};

/// A criterion's scale, as people and the judge score it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// 0 to 10 (the simulator's `0-10` criteria).
    ZeroToTen,
    /// 0 (fail) or 10 (pass) (the simulator's `pass_fail` criteria).
    PassFail,
    /// 0 to 1 (the llm-rubric grader's factuality, completeness, relevance, overall); compared
    /// on a 0-10 footing (times 10).
    Unit,
    /// true (1) or false (0) (the grader's `factually_correct`).
    Boolean,
}

impl Scale {
    /// The lowest and highest score.
    pub fn range(self) -> (f64, f64) {
        match self {
            Scale::ZeroToTen | Scale::PassFail => (0.0, 10.0),
            Scale::Unit | Scale::Boolean => (0.0, 1.0),
        }
    }

    /// Whether `score` is a score of this scale.
    pub fn admits(self, score: f64) -> bool {
        let (lo, hi) = self.range();
        score.is_finite()
            && (lo..=hi).contains(&score)
            && match self {
                Scale::PassFail => score == 0.0 || score == 10.0,
                Scale::Boolean => score == 0.0 || score == 1.0,
                _ => true,
            }
    }

    /// Whether the scale is two categories (plain kappa) rather than ordinal (weighted).
    pub fn is_binary(self) -> bool {
        matches!(self, Scale::PassFail | Scale::Boolean)
    }

    /// A score on a 0-10 footing.
    fn tenths(self, score: f64) -> f64 {
        match self {
            Scale::Unit | Scale::Boolean => score * 10.0,
            Scale::ZeroToTen | Scale::PassFail => score,
        }
    }

    /// The confusion table's category of a score.
    fn category(self, score: f64) -> String {
        if self.is_binary() {
            return if self.tenths(score) >= 5.0 {
                "pass"
            } else {
                "fail"
            }
            .to_owned();
        }
        let t = self.tenths(score);
        if t < 3.5 {
            "0-3"
        } else if t < 6.5 {
            "4-6"
        } else {
            "7-10"
        }
        .to_owned()
    }

    fn categories(self) -> Vec<String> {
        if self.is_binary() {
            vec!["fail".into(), "pass".into()]
        } else {
            vec!["0-3".into(), "4-6".into(), "7-10".into()]
        }
    }
}

/// One criterion of one item, as a person and the judge scored it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The item (a scenario run, an answer).
    pub item: String,
    /// The criterion.
    pub criterion: String,
    /// Its scale.
    pub scale: Scale,
    /// The person's score.
    pub human: f64,
    /// The judge's score (the mean of its samples when it was asked several times).
    pub judge: f64,
}

impl Observation {
    /// An observation.
    pub fn new(item: &str, criterion: &str, scale: Scale, human: f64, judge: f64) -> Observation {
        Observation {
            item: item.to_owned(),
            criterion: criterion.to_owned(),
            scale,
            human,
            judge,
        }
    }

    /// Whether the two agree: the same category on two-category scales, within one point of
    /// ten otherwise.
    pub fn agrees(&self) -> bool {
        if self.scale.is_binary() {
            self.scale.category(self.human) == self.scale.category(self.judge)
        } else {
            (self.scale.tenths(self.human) - self.scale.tenths(self.judge)).abs() <= 1.0 + 1e-9
        }
    }
}

/// One item's verdict, as a person and the judge gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictPair {
    /// The item.
    pub item: String,
    /// The person's: passes.
    pub human: bool,
    /// The judge's: passes.
    pub judge: bool,
}

/// How one criterion's scores agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionAgreement {
    /// The criterion.
    pub id: String,
    /// Its scale.
    pub scale: Scale,
    /// Items scored by both.
    pub n: usize,
    /// Cohen's kappa: quadratic-weighted on ordinal scales, plain on two-category ones.
    pub kappa: Option<f64>,
    /// `quadratic` or `none`.
    pub kappa_weights: String,
    /// Spearman's rank correlation.
    pub spearman: Option<f64>,
    /// Mean absolute error, on the criterion's own scale.
    pub mae: Option<f64>,
    /// The share of items where they agree ([`Observation::agrees`]).
    pub agreement: f64,
    /// Rows: the person's category; columns: the judge's.
    pub confusion: ConfusionTable<String>,
}

/// How the verdicts agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictAgreement {
    /// Items with both verdicts.
    pub n: usize,
    /// The share where they agree, with its bootstrap interval (two or more items).
    pub agreement: f64,
    /// The interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    /// Cohen's kappa on pass/fail.
    pub kappa: Option<f64>,
    /// Rows: the person's verdict; columns: the judge's.
    pub confusion: ConfusionTable<String>,
    /// Items the judge passed and the person failed.
    pub judge_too_lenient: Vec<String>,
    /// Items the judge failed and the person passed.
    pub judge_too_strict: Vec<String>,
}

/// The measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Per criterion, in the order first seen.
    pub criteria: Vec<CriterionAgreement>,
    /// Every observation's agreement: the share, with its bootstrap interval (resampled by
    /// observation).
    pub overall: Option<Interval>,
    /// The verdicts, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdicts: Option<VerdictAgreement>,
    /// Observations that disagree, worst first (largest gap on a 0-10 footing).
    pub disagreements: Vec<Observation>,
}

/// Measures agreement over `observations` and `verdicts` (seeded bootstrap, 95 %).
pub fn measure(observations: &[Observation], verdicts: &[VerdictPair]) -> Measurement {
    let mut order: Vec<(&str, Scale)> = Vec::new();
    for o in observations {
        if !order.iter().any(|(id, _)| *id == o.criterion) {
            order.push((&o.criterion, o.scale));
        }
    }
    let criteria = order
        .iter()
        .map(|(id, scale)| {
            let of: Vec<&Observation> =
                observations.iter().filter(|o| o.criterion == *id).collect();
            let pairs: Vec<(f64, f64)> = of.iter().map(|o| (o.human, o.judge)).collect();
            let kappa = if scale.is_binary() {
                let cats: Vec<(String, String)> = of
                    .iter()
                    .map(|o| (scale.category(o.human), scale.category(o.judge)))
                    .collect();
                cohen_kappa(&cats)
            } else {
                // Quadratic weights on the 0-10 footing: a miss by one point costs 1/100 of a
                // miss by ten.
                let tenths: Vec<(f64, f64)> = pairs
                    .iter()
                    .map(|(h, j)| (scale.tenths(*h), scale.tenths(*j)))
                    .collect();
                quadratic_kappa(&tenths)
            };
            let cats: Vec<(String, String)> = of
                .iter()
                .map(|o| (scale.category(o.human), scale.category(o.judge)))
                .collect();
            let columns = scale.categories();
            CriterionAgreement {
                id: (*id).to_owned(),
                scale: *scale,
                n: of.len(),
                kappa,
                kappa_weights: if scale.is_binary() {
                    "none"
                } else {
                    "quadratic"
                }
                .to_owned(),
                spearman: spearman(&pairs),
                mae: mean_absolute_error(&pairs),
                agreement: share(of.iter().map(|o| o.agrees())),
                confusion: confusion_table(&cats, &columns, &columns),
            }
        })
        .collect();
    let agree: Vec<f64> = observations
        .iter()
        .map(|o| if o.agrees() { 1.0 } else { 0.0 })
        .collect();
    let overall = bootstrap_mean(&agree, BootstrapSettings::default());
    let verdicts = (!verdicts.is_empty()).then(|| {
        let word = |b: bool| if b { "pass" } else { "fail" }.to_owned();
        let cats: Vec<(String, String)> = verdicts
            .iter()
            .map(|v| (word(v.human), word(v.judge)))
            .collect();
        let agree: Vec<f64> = verdicts
            .iter()
            .map(|v| if v.human == v.judge { 1.0 } else { 0.0 })
            .collect();
        let columns = vec!["fail".to_owned(), "pass".to_owned()];
        VerdictAgreement {
            n: verdicts.len(),
            agreement: share(verdicts.iter().map(|v| v.human == v.judge)),
            interval: bootstrap_mean(&agree, BootstrapSettings::default()),
            kappa: cohen_kappa(&cats),
            confusion: confusion_table(&cats, &columns, &columns),
            judge_too_lenient: verdicts
                .iter()
                .filter(|v| v.judge && !v.human)
                .map(|v| v.item.clone())
                .collect(),
            judge_too_strict: verdicts
                .iter()
                .filter(|v| !v.judge && v.human)
                .map(|v| v.item.clone())
                .collect(),
        }
    });
    let mut disagreements: Vec<Observation> = observations
        .iter()
        .filter(|o| !o.agrees())
        .cloned()
        .collect();
    let gap = |o: &Observation| (o.scale.tenths(o.human) - o.scale.tenths(o.judge)).abs();
    disagreements.sort_by(|a, b| gap(b).total_cmp(&gap(a)));
    Measurement {
        criteria,
        overall,
        verdicts,
        disagreements,
    }
}

fn share(flags: impl Iterator<Item = bool>) -> f64 {
    let (mut yes, mut all) = (0usize, 0usize);
    for f in flags {
        all += 1;
        yes += usize::from(f);
    }
    if all == 0 {
        0.0
    } else {
        yes as f64 / all as f64
    }
}

/// A judge's agreement with people: what `assay judge agree` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgreementReport {
    /// `simulation` (the simulator's judge) or `rubric` (the optimizer's llm-rubric grader).
    pub kind: String,
    /// The judge's `vendor/model`.
    pub judge_model: String,
    /// The judge's version (a digest of its instructions and schema).
    pub judge_version: String,
    /// The labels file.
    pub labels: String,
    /// Times each item was judged.
    pub samples: u32,
    /// Labelled items.
    pub items: usize,
    /// Items the judge could not score (an error, reported, left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// With several samples: the share of items whose verdict flipped between samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flip_share: Option<f64>,
    /// The agreement.
    pub measurement: Measurement,
    /// Every item: the person's and the judge's scores and verdicts.
    pub per_item: Vec<ItemScores>,
}

/// One item as both scored it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemScores {
    /// The item.
    pub item: String,
    /// Criterion → (person, judge).
    pub scores: std::collections::BTreeMap<String, (f64, f64)>,
    /// The person's verdict, when given or derived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_verdict: Option<bool>,
    /// The judge's verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_verdict: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_counts_near_misses_on_ordinal_scales_only() {
        assert!(Observation::new("i", "c", Scale::ZeroToTen, 7.0, 8.0).agrees());
        assert!(!Observation::new("i", "c", Scale::ZeroToTen, 6.0, 8.0).agrees());
        assert!(Observation::new("i", "c", Scale::Unit, 0.7, 0.8).agrees());
        assert!(!Observation::new("i", "c", Scale::PassFail, 0.0, 10.0).agrees());
        assert!(Scale::PassFail.admits(10.0) && !Scale::PassFail.admits(5.0));
        assert!(!Scale::ZeroToTen.admits(11.0) && !Scale::ZeroToTen.admits(f64::NAN));
    }

    #[test]
    fn flipped_labels_lower_kappa_and_are_listed_worst_first() {
        let mut obs = Vec::new();
        for i in 0..10 {
            let s = f64::from(i);
            let judge = if i == 3 { 10.0 } else { s };
            obs.push(Observation::new(
                &format!("i{i}"),
                "c",
                Scale::ZeroToTen,
                s,
                judge,
            ));
            let pass = i % 2 == 0;
            obs.push(Observation::new(
                &format!("i{i}"),
                "p",
                Scale::PassFail,
                if pass { 10.0 } else { 0.0 },
                if pass == (i != 4) { 10.0 } else { 0.0 },
            ));
        }
        let verdicts: Vec<VerdictPair> = (0..10)
            .map(|i| VerdictPair {
                item: format!("i{i}"),
                human: i < 5,
                judge: i < 5 || i == 9,
            })
            .collect();
        let m = measure(&obs, &verdicts);
        let c = &m.criteria[0];
        assert_eq!((c.n, c.kappa_weights.as_str()), (10, "quadratic"));
        assert!(c.kappa.unwrap() < 1.0 && c.kappa.unwrap() > 0.5, "{c:?}");
        assert!((c.agreement - 0.9).abs() < 1e-12);
        assert_eq!(m.criteria[1].kappa_weights, "none");
        assert!((m.criteria[1].agreement - 0.9).abs() < 1e-12);
        assert_eq!(
            m.disagreements[0].item, "i4",
            "the pass/fail miss is the largest gap"
        );
        assert_eq!(m.disagreements[1].item, "i3");
        let v = m.verdicts.unwrap();
        assert_eq!(
            (v.n, v.judge_too_lenient.as_slice()),
            (10, ["i9".to_owned()].as_slice())
        );
        assert!((v.agreement - 0.9).abs() < 1e-12);
        assert!(v.interval.unwrap().contains(0.9));
        assert_eq!(v.confusion.total(), 10);
        assert!((m.overall.unwrap().estimate - 0.9).abs() < 1e-12);
    }
}
