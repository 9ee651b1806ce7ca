//! The optimizer's llm-rubric grader measured against people (`assay judge agree` with `judge:
//! rubric`): a labels file holds answers to questions with their expected answers and the
//! scores people gave on the grader's criteria; the grader grades the same answers, and
//! [`assay_core::agreement`] measures how far they agree.
//!
//! ```yaml
//! judge: rubric
//! items:
//!   - question: What is the capital of Australia?
//!     expected: Canberra
//!     answer: Sydney is the capital.
//!     scores: {factuality: 0, completeness: 1, relevance: 1, overall: 0.2}
//!     factually_correct: false
//!     verdict: fail              # optional; else overall >= the pass threshold
//! ```
//!
//! Scores are 0 to 1, as the grader gives them; `factually_correct` is true or false.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use assay_core::agreement::{
    AgreementReport, ItemScores, Observation, Scale, VerdictPair, measure,
};
use assay_core::experiment::RubricGrade;
use assay_kb::datafile::{self, DataError};
use serde::Deserialize;

use crate::grade::{self, Grader};

/// The grader's criteria on a 0-1 scale.
pub const CRITERIA: [&str; 4] = ["factuality", "completeness", "relevance", "overall"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelsFile {
    judge: String,
    items: Vec<ItemConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemConfig {
    question: String,
    expected: String,
    answer: String,
    #[serde(default)]
    scores: BTreeMap<String, Option<f64>>,
    #[serde(default)]
    factually_correct: Option<bool>,
    #[serde(default)]
    verdict: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

/// One labelled answer.
#[derive(Debug, Clone)]
pub struct Label {
    /// `item N`.
    pub item: String,
    /// The question.
    pub question: String,
    /// The expected answer.
    pub expected: String,
    /// The answer graded.
    pub answer: String,
    /// Criterion → the person's score (0-1).
    pub scores: BTreeMap<String, f64>,
    /// The person's call on factual correctness.
    pub factually_correct: Option<bool>,
    /// The person's verdict, given or derived from `overall`.
    pub verdict: Option<bool>,
}

/// A `judge: rubric` labels file, read and checked.
#[derive(Debug, Clone)]
pub struct Labels {
    /// The file.
    pub path: PathBuf,
    /// The labelled answers, in file order.
    pub labels: Vec<Label>,
}

/// Reads and checks a `judge: rubric` labels file; `threshold` derives verdicts from
/// `overall`. Unknown fields and criteria, scores off the 0-1 scale, empty texts and repeated
/// items are errors naming the file and the item.
pub fn load_labels(path: &Path, threshold: f64) -> Result<Labels, DataError> {
    let (format, text) = datafile::read_text(path)?;
    let mut warnings = Vec::new();
    let file: LabelsFile = datafile::parse(path, &text, format, &mut |w| warnings.push(w))?;
    if let Some(w) = warnings.first() {
        return Err(DataError::new(path, w.replace(" (ignored)", "")));
    }
    if file.judge != "rubric" {
        return Err(DataError::new(
            path,
            format!("judge: `{}` is not `rubric`", file.judge),
        ));
    }
    if file.items.is_empty() {
        return Err(DataError::new(path, "items: no labelled answer"));
    }
    let mut seen = HashSet::new();
    let mut labels = Vec::new();
    for (i, item) in file.items.into_iter().enumerate() {
        let at = |message: String| DataError::new(path, format!("items[{i}]: {message}"));
        for (field, value) in [
            ("question", &item.question),
            ("expected", &item.expected),
            ("answer", &item.answer),
        ] {
            if value.trim().is_empty() {
                return Err(at(format!("{field}: must not be empty")));
            }
        }
        if !seen.insert((item.question.clone(), item.answer.clone())) {
            return Err(at("the same question and answer are labelled twice".into()));
        }
        let mut scores = BTreeMap::new();
        for (criterion, score) in &item.scores {
            if !CRITERIA.contains(&criterion.as_str()) {
                return Err(at(format!(
                    "scores: unknown criterion `{criterion}` (the grader's: {})",
                    CRITERIA.join(", ")
                )));
            }
            if let Some(score) = score {
                if !Scale::Unit.admits(*score) {
                    return Err(at(format!(
                        "scores.{criterion}: {score} is not on the grader's scale (0 to 1)"
                    )));
                }
                scores.insert(criterion.clone(), *score);
            }
        }
        let verdict = match item.verdict.as_deref() {
            Some("pass") => Some(true),
            Some("fail") => Some(false),
            Some(other) => return Err(at(format!("verdict: `{other}` is not pass or fail"))),
            None => scores.get("overall").map(|o| *o >= threshold),
        };
        if scores.is_empty() && verdict.is_none() && item.factually_correct.is_none() {
            return Err(at("give scores, factually_correct or a verdict".into()));
        }
        labels.push(Label {
            item: format!("item {}", i + 1),
            question: item.question,
            expected: item.expected,
            answer: item.answer,
            scores,
            factually_correct: item.factually_correct,
            verdict,
        });
    }
    Ok(Labels {
        path: path.to_owned(),
        labels,
    })
}

fn score_of(grade: &RubricGrade, criterion: &str) -> f64 {
    match criterion {
        "factuality" => grade.factuality,
        "completeness" => grade.completeness,
        "relevance" => grade.relevance,
        _ => grade.overall,
    }
}

/// Grades every labelled answer again (`samples` times each) and measures the agreement.
pub async fn agree(grader: &Grader<'_>, labels: &Labels, samples: u32) -> AgreementReport {
    let samples = samples.max(1);
    let asks = labels.labels.iter().map(|label| async move {
        let calls = (0..samples)
            .map(|k| grader.rubric_sample(&label.question, &label.expected, &label.answer, k));
        let out: Result<Vec<RubricGrade>, String> = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .map(|r| r.map_err(|e| e.to_string()))
            .collect();
        (label, out)
    });
    let results = futures_util::future::join_all(asks).await;
    let (mut observations, mut verdicts, mut per_item, mut errors) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut judged, mut flipped) = (0usize, 0usize);
    for (label, result) in results {
        let grades = match result {
            Ok(g) => g,
            Err(e) => {
                errors.push(format!("{}: {e}", label.item));
                continue;
            }
        };
        judged += 1;
        let passes: Vec<bool> = grades
            .iter()
            .map(|g| g.overall >= grader.threshold)
            .collect();
        if passes.iter().any(|p| *p) && passes.iter().any(|p| !*p) {
            flipped += 1;
        }
        let n = grades.len() as f64;
        let mean = |c: &str| grades.iter().map(|g| score_of(g, c)).sum::<f64>() / n;
        let mut scores = BTreeMap::new();
        for (criterion, human) in &label.scores {
            let judge = mean(criterion);
            scores.insert(criterion.clone(), (*human, judge));
            observations.push(Observation::new(
                &label.item,
                criterion,
                Scale::Unit,
                *human,
                judge,
            ));
        }
        if let Some(human) = label.factually_correct {
            // The grader's call by majority of its samples.
            let yes = grades.iter().filter(|g| g.factually_correct).count();
            let judge = if 2 * yes >= grades.len() { 1.0 } else { 0.0 };
            let human = if human { 1.0 } else { 0.0 };
            scores.insert("factually_correct".into(), (human, judge));
            observations.push(Observation::new(
                &label.item,
                "factually_correct",
                Scale::Boolean,
                human,
                judge,
            ));
        }
        let judge_verdict = mean("overall") >= grader.threshold;
        if let Some(human) = label.verdict {
            verdicts.push(VerdictPair {
                item: label.item.clone(),
                human,
                judge: judge_verdict,
            });
        }
        per_item.push(ItemScores {
            item: label.item.clone(),
            scores,
            human_verdict: label.verdict,
            judge_verdict: Some(judge_verdict),
        });
    }
    AgreementReport {
        kind: "rubric".into(),
        judge_model: grader.model.model().to_owned(),
        judge_version: grade::version(),
        labels: labels.path.display().to_string(),
        samples,
        items: labels.labels.len(),
        errors,
        flip_share: (samples > 1 && judged > 0).then(|| flipped as f64 / judged as f64),
        measurement: measure(&observations, &verdicts),
        per_item,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("labels.yaml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn labels_are_checked() {
        let ok = "judge: rubric\nitems:\n  - question: Q\n    expected: A\n    answer: A\n    scores: {overall: 0.9, factuality: ~}\n    factually_correct: true\n";
        let (_d, p) = write(ok);
        let l = load_labels(&p, 0.8).unwrap();
        assert_eq!(l.labels[0].verdict, Some(true), "derived from overall");
        assert_eq!(l.labels[0].scores.len(), 1, "an empty score is not scored");
        for (text, needle) in [
            (
                ok.replace("overall: 0.9", "overal: 0.9"),
                "unknown criterion `overal`",
            ),
            (
                ok.replace("overall: 0.9", "overall: 7"),
                "7 is not on the grader's scale",
            ),
            (
                ok.replace("judge: rubric", "judge: simulation"),
                "is not `rubric`",
            ),
            (
                ok.replace("answer: A", "answer: \"\""),
                "answer: must not be empty",
            ),
            (
                ok.replace("    factually_correct: true\n", "    colour: red\n"),
                "unknown field `colour`",
            ),
            (
                "judge: rubric\nitems: []\n".to_owned(),
                "no labelled answer",
            ),
        ] {
            let (_d, p) = write(&text);
            let e = load_labels(&p, 0.8).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }
}
