//! How far a judge agrees with people (`assay judge agree`): scores people gave, per criterion,
//! set beside the scores a judge (the simulator's judge, the optimizer's llm-rubric grader)
//! gives the same items, measured with the shared statistics ([`crate::stats`]).
//!
//! Per criterion: Cohen's kappa (quadratic-weighted on 0-10 scales, where a near miss counts
//! almost as agreement; plain on pass/fail), Spearman's rank correlation, the mean absolute
//! error, the share of exact agreement (within one point on 0-10) and a confusion table. Over
//! everything: the share of agreement with its bootstrap interval, and, when verdicts are
//! known, the verdicts' agreement and kappa. Criteria come out in the judge's order (the
//! suite's, the grader's), never sorted.
//!
//! A judge asked several times per item ([`report`] over [`JudgedItem`]s with several
//! [`JudgeSample`]s) is also measured against itself ([`Consistency`]): the items whose verdict
//! flipped between samples are *uncertain* and kept out of the verdicts' agreement (so "too
//! lenient" and "too strict" hold only items the judge is sure of), and each criterion's
//! spread across samples is reported.
//!
//! ```
//! use assay_core::agreement::{Criterion, Observation, Scale, measure};
//! let obs: Vec<Observation> = (0..10)
//!     .map(|i| Observation::new(&format!("item{i}"), "accuracy", Scale::ZeroToTen, f64::from(i), f64::from(i)))
//!     .collect();
//! let report = measure(&[Criterion::new("accuracy", Scale::ZeroToTen)], &obs, &[]);
//! assert_eq!(report.criteria[0].kappa, Some(1.0));
//! ```

use std::collections::BTreeMap;

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
        self.scale.close(self.human, self.judge)
    }
}

impl Scale {
    /// Whether two scores agree: the same category on two-category scales, within one point
    /// of ten otherwise.
    fn close(self, a: f64, b: f64) -> bool {
        if self.is_binary() {
            self.category(a) == self.category(b)
        } else {
            (self.tenths(a) - self.tenths(b)).abs() <= 1.0 + 1e-9
        }
    }
}

/// A criterion the judge scores: its id and scale. Lists of criteria are in the judge's order
/// (the suite's, the grader's), and every output keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Criterion {
    /// The criterion's id.
    pub id: String,
    /// Its scale.
    pub scale: Scale,
}

impl Criterion {
    /// A criterion.
    pub fn new(id: &str, scale: Scale) -> Criterion {
        Criterion {
            id: id.to_owned(),
            scale,
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
    /// Per criterion, in the judge's order (a criterion no one scored is left out).
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

/// Measures agreement over `observations` and `verdicts` (seeded bootstrap, 95 %), the
/// criteria in the order of `criteria` (any other criterion observed comes after them, in the
/// order first seen).
pub fn measure(
    criteria: &[Criterion],
    observations: &[Observation],
    verdicts: &[VerdictPair],
) -> Measurement {
    let mut order: Vec<(&str, Scale)> = criteria
        .iter()
        .filter(|c| observations.iter().any(|o| o.criterion == c.id))
        .map(|c| (c.id.as_str(), c.scale))
        .collect();
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
    /// Labelled items asked of the judge (the scored ones).
    pub items: usize,
    /// Items of the labels file left unscored (no score, no verdict): skipped, not judged.
    #[serde(default)]
    pub unscored: usize,
    /// Items the judge could not score (an error, reported, left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// With several samples: the share of items whose verdict flipped between samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flip_share: Option<f64>,
    /// With several samples: the judge measured against itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistency: Option<Consistency>,
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
    /// Criterion → (person, judge), in the judge's order; the judge's is the mean of its
    /// samples (the majority on true/false). A map in JSON.
    #[serde(with = "in_order")]
    pub scores: Vec<(String, (f64, f64))>,
    /// The person's verdict, when given or derived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_verdict: Option<bool>,
    /// The judge's verdict; none when it is uncertain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_verdict: Option<bool>,
    /// With several samples: how many passed the item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_passed: Option<u32>,
    /// The judge's verdict flipped between samples.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uncertain: bool,
}

/// A list of pairs written as a map, in its order.
mod in_order {
    use std::fmt;

    use serde::de::{MapAccess, Visitor};
    use serde::{Deserializer, Serializer};

    type Pairs = Vec<(String, (f64, f64))>;

    #[allow(clippy::ptr_arg)]
    pub fn serialize<S: Serializer>(pairs: &Pairs, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Pairs, D::Error> {
        struct Pairwise;
        impl<'de> Visitor<'de> for Pairwise {
            type Value = Pairs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of criterion to [person, judge]")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Pairwise)
    }
}

/// A judge asked several times per item, measured against itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Consistency {
    /// Times each item was judged.
    pub samples: u32,
    /// Items judged (every sample answered).
    pub judged: usize,
    /// Items whose verdict flipped between samples, in the labels' order: left out of the
    /// verdicts' agreement (and so out of "too lenient" and "too strict").
    pub uncertain: Vec<String>,
    /// Per criterion, in the judge's order: its spread across samples.
    pub criteria: Vec<CriterionSpread>,
}

/// How far one criterion's scores move between a judge's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionSpread {
    /// The criterion.
    pub id: String,
    /// Its scale.
    pub scale: Scale,
    /// Items the judge scored on it in two or more samples.
    pub n: usize,
    /// The mean over those items of the standard deviation (n − 1) of the judge's score across
    /// its samples, on the criterion's own scale.
    pub mean_sd: f64,
    /// How many items' samples disagree with one another by the rule of agreement (more than a
    /// point of ten apart, or pass and fail).
    pub unstable: usize,
    /// Those items, in the labels' order.
    pub unstable_items: Vec<String>,
}

/// One labelled item and the judge's answers: what [`report`] measures.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedItem {
    /// The item.
    pub item: String,
    /// Criterion → the person's score (a criterion left empty is absent).
    pub human: BTreeMap<String, f64>,
    /// The person's verdict, when given or derived.
    pub human_verdict: Option<bool>,
    /// The judge's answer in each sample (one or more).
    pub samples: Vec<JudgeSample>,
}

/// One sample of the judge on one item.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeSample {
    /// Criterion → the judge's score.
    pub scores: BTreeMap<String, f64>,
    /// Whether the judge passed the item in this sample.
    pub passes: bool,
}

/// What a report is about: the judge, the labels and how they were asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportHead {
    /// `simulation` or `rubric`.
    pub kind: String,
    /// The judge's `vendor/model`.
    pub judge_model: String,
    /// The judge's version.
    pub judge_version: String,
    /// The labels file.
    pub labels: String,
    /// Times each item was judged.
    pub samples: u32,
    /// Items of the labels file left unscored (skipped).
    pub unscored: usize,
}

/// The judge's score over its samples: the mean, or the majority on true/false (a tie is
/// true).
fn judge_score(scale: Scale, scores: &[f64]) -> f64 {
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    if scale == Scale::Boolean {
        if mean >= 0.5 { 1.0 } else { 0.0 }
    } else {
        mean
    }
}

/// The sample standard deviation (n − 1) of two or more values.
fn sd(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
}

/// Measures the judge's answers on `judged` against the labels: the agreement over the
/// criteria (in the order of `criteria`) and the verdicts, and, when the judge was asked
/// several times, its consistency. `errors` are the items the judge could not score.
pub fn report(
    head: ReportHead,
    criteria: &[Criterion],
    judged: &[JudgedItem],
    errors: Vec<String>,
) -> AgreementReport {
    let (mut observations, mut verdicts, mut per_item, mut uncertain) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for j in judged.iter().filter(|j| !j.samples.is_empty()) {
        let of = |id: &str| -> Vec<f64> {
            j.samples
                .iter()
                .filter_map(|s| s.scores.get(id).copied())
                .collect()
        };
        let mut scores = Vec::new();
        for c in criteria {
            let (Some(human), sampled) = (j.human.get(&c.id), of(&c.id)) else {
                continue;
            };
            if sampled.is_empty() {
                continue;
            }
            let judge = judge_score(c.scale, &sampled);
            scores.push((c.id.clone(), (*human, judge)));
            observations.push(Observation::new(&j.item, &c.id, c.scale, *human, judge));
        }
        let passed = j.samples.iter().filter(|s| s.passes).count();
        let flipped = passed > 0 && passed < j.samples.len();
        let judge_verdict = (!flipped).then_some(passed > 0);
        if flipped {
            uncertain.push(j.item.clone());
        }
        if let (Some(human), Some(judge)) = (j.human_verdict, judge_verdict) {
            verdicts.push(VerdictPair {
                item: j.item.clone(),
                human,
                judge,
            });
        }
        per_item.push(ItemScores {
            item: j.item.clone(),
            scores,
            human_verdict: j.human_verdict,
            judge_verdict,
            samples_passed: (head.samples > 1).then(|| u32::try_from(passed).unwrap_or(u32::MAX)),
            uncertain: flipped,
        });
    }
    let judged_n = per_item.len();
    let consistency = (head.samples > 1).then(|| Consistency {
        samples: head.samples,
        judged: judged_n,
        uncertain: uncertain.clone(),
        criteria: criteria
            .iter()
            .filter_map(|c| {
                let mut sds = Vec::new();
                let mut unstable_items = Vec::new();
                for j in judged {
                    let sampled: Vec<f64> = j
                        .samples
                        .iter()
                        .filter_map(|s| s.scores.get(&c.id).copied())
                        .collect();
                    if sampled.len() < 2 {
                        continue;
                    }
                    sds.push(sd(&sampled));
                    let steady = sampled
                        .iter()
                        .all(|a| sampled.iter().all(|b| c.scale.close(*a, *b)));
                    if !steady {
                        unstable_items.push(j.item.clone());
                    }
                }
                (!sds.is_empty()).then(|| CriterionSpread {
                    id: c.id.clone(),
                    scale: c.scale,
                    n: sds.len(),
                    mean_sd: sds.iter().sum::<f64>() / sds.len() as f64,
                    unstable: unstable_items.len(),
                    unstable_items,
                })
            })
            .collect(),
    });
    AgreementReport {
        kind: head.kind,
        judge_model: head.judge_model,
        judge_version: head.judge_version,
        labels: head.labels,
        samples: head.samples,
        items: judged.len() + errors.len(),
        unscored: head.unscored,
        errors,
        flip_share: (head.samples > 1 && judged_n > 0)
            .then(|| uncertain.len() as f64 / judged_n as f64),
        consistency,
        measurement: measure(criteria, &observations, &verdicts),
        per_item,
    }
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
        let m = measure(
            &[
                Criterion::new("c", Scale::ZeroToTen),
                Criterion::new("p", Scale::PassFail),
            ],
            &obs,
            &verdicts,
        );
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

    fn sample(passes: bool, scores: &[(&str, f64)]) -> JudgeSample {
        JudgeSample {
            scores: scores.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            passes,
        }
    }

    fn head(samples: u32) -> ReportHead {
        ReportHead {
            kind: "simulation".into(),
            judge_model: "test/judge".into(),
            judge_version: "v".into(),
            labels: "labels.yaml".into(),
            samples,
            unscored: 2,
        }
    }

    /// The judge's order, not the alphabet's, in the criteria, every item's scores and the
    /// JSON; a flipping item is uncertain and apart from too lenient and too strict.
    #[test]
    fn criteria_keep_the_judges_order_and_flipping_items_are_uncertain() {
        let criteria = [
            Criterion::new("zeal", Scale::ZeroToTen),
            Criterion::new("accuracy", Scale::ZeroToTen),
            Criterion::new("safe", Scale::PassFail),
        ];
        let item = |name: &str, human_verdict: bool, samples: Vec<JudgeSample>| JudgedItem {
            item: name.into(),
            human: [("accuracy", 7.0), ("safe", 10.0), ("zeal", 5.0)]
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            human_verdict: Some(human_verdict),
            samples,
        };
        let steady = |passes: bool| {
            vec![
                sample(passes, &[("zeal", 5.0), ("accuracy", 7.0), ("safe", 10.0)]),
                sample(passes, &[("zeal", 5.0), ("accuracy", 7.0), ("safe", 10.0)]),
                sample(passes, &[("zeal", 5.0), ("accuracy", 7.0), ("safe", 10.0)]),
            ]
        };
        let judged = vec![
            item("a", false, steady(true)),
            item(
                "b",
                false,
                vec![
                    sample(true, &[("zeal", 5.0), ("accuracy", 9.0), ("safe", 10.0)]),
                    sample(false, &[("zeal", 5.0), ("accuracy", 3.0), ("safe", 0.0)]),
                    sample(true, &[("zeal", 5.0), ("accuracy", 9.0), ("safe", 10.0)]),
                ],
            ),
            item("c", true, steady(false)),
            item("d", true, steady(true)),
        ];
        let r = report(head(3), &criteria, &judged, vec!["e: timed out".into()]);
        assert_eq!((r.items, r.unscored), (5, 2));
        let ids: Vec<&str> = r
            .measurement
            .criteria
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids, ["zeal", "accuracy", "safe"]);
        let keys: Vec<&str> = r.per_item[0]
            .scores
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(keys, ["zeal", "accuracy", "safe"]);
        let json = serde_json::to_string(&r).unwrap();
        let at = |needle: &str| json.find(needle).unwrap();
        assert!(
            at("\"zeal\":[5.0,5.0]") < at("\"accuracy\":[7.0,7.0]"),
            "{json}"
        );
        let back: AgreementReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r, "the JSON reads back, in order");

        let c = r.consistency.as_ref().unwrap();
        assert_eq!(c.uncertain, ["b"]);
        assert_eq!(r.flip_share, Some(0.25));
        let b = &r.per_item[1];
        assert!(b.uncertain && b.judge_verdict.is_none());
        assert_eq!(b.samples_passed, Some(2));
        let v = r.measurement.verdicts.as_ref().unwrap();
        assert_eq!(v.n, 3, "the uncertain item is left out of the verdicts");
        assert_eq!(v.judge_too_lenient, ["a"]);
        assert_eq!(v.judge_too_strict, ["c"]);
        let spread: Vec<(&str, usize, &[String])> = c
            .criteria
            .iter()
            .map(|s| (s.id.as_str(), s.unstable, s.unstable_items.as_slice()))
            .collect();
        assert_eq!(
            spread,
            [
                ("zeal", 0, &[][..]),
                ("accuracy", 1, &["b".to_owned()][..]),
                ("safe", 1, &["b".to_owned()][..]),
            ]
        );
        // b's accuracy: 9, 3, 9 has sd sqrt(12); the others 0; the mean over four items.
        assert!((c.criteria[1].mean_sd - 12f64.sqrt() / 4.0).abs() < 1e-12);
        assert_eq!(c.criteria[0].mean_sd, 0.0);
        // The judge's score is the samples' mean: (9 + 3 + 9) / 3.
        assert_eq!(b.scores[1], ("accuracy".to_owned(), (7.0, 7.0)));

        // One sample: no consistency, nothing uncertain.
        let one: Vec<JudgedItem> = judged
            .iter()
            .map(|j| JudgedItem {
                samples: j.samples[..1].to_vec(),
                ..j.clone()
            })
            .collect();
        let r = report(head(1), &criteria, &one, Vec::new());
        assert!(r.consistency.is_none() && r.flip_share.is_none());
        assert!(
            r.per_item
                .iter()
                .all(|i| !i.uncertain && i.samples_passed.is_none())
        );
        assert_eq!(r.measurement.verdicts.unwrap().n, 4);
    }
}
