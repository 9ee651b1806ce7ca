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
//! Scores are 0 to 1, as the grader gives them; `factually_correct` is true or false. An item
//! with no score, no `factually_correct` and no verdict is unscored: skipped and counted
//! ([`Labels::unscored`]).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use assay_core::agreement::{
    AgreementReport, Criterion, JudgeSample, JudgedItem, ReportHead, Scale,
    report as measure_report,
};
use assay_core::experiment::RubricGrade;
use assay_kb::datafile::{self, DataError};
use serde::Deserialize;

use crate::grade::{self, Grader};

/// The grader's criteria on a 0-1 scale.
pub const CRITERIA: [&str; 4] = ["factuality", "completeness", "relevance", "overall"];

/// A labels file for the optimizer's llm-rubric grader: answers people graded, which `assay
/// judge agree` has the grader grade again and compares.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct LabelsFile {
    /// The JSON Schema the file follows, for editors that complete and check it (`assay
    /// schema`); assay itself does not read it.
    #[serde(rename = "$schema", default, skip_serializing)]
    #[allow(dead_code)]
    schema: Option<String>,
    /// Which judge the labels are for: `rubric` (the optimizer's llm-rubric grader).
    judge: String,
    /// The graded answers.
    items: Vec<ItemConfig>,
}

/// One answer a person graded.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ItemConfig {
    /// The question the answer replies to.
    question: String,
    /// The expected (reference) answer.
    expected: String,
    /// The answer being graded.
    answer: String,
    /// The person's score of each criterion (`factuality`, `completeness`, `relevance`,
    /// `overall`), from 0 to 1. A criterion left empty (`~`) was not scored.
    #[serde(default)]
    scores: Option<BTreeMap<String, Option<f64>>>,
    /// Whether the answer states the facts of the expected one.
    #[serde(default)]
    factually_correct: Option<bool>,
    /// The person's overall verdict: `pass` or `fail`.
    #[serde(default)]
    verdict: Option<String>,
    /// Free text for the people reading the file; assay does not read it.
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

/// The JSON Schema of a labels file for the llm-rubric grader (`assay schema grader-labels`).
pub fn labels_schema() -> schemars::Schema {
    let mut schema = schemars::schema_for!(LabelsFile);
    assay_core::schema::set_const(&mut schema, "judge", "rubric");
    schema
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
    /// The labelled answers, in file order (the scored ones).
    pub labels: Vec<Label>,
    /// Items left unscored (no score, no `factually_correct`, no verdict): skipped.
    pub unscored: usize,
}

/// The grader's criteria in its order, with their scales.
fn criteria() -> Vec<Criterion> {
    CRITERIA
        .iter()
        .map(|c| Criterion::new(c, Scale::Unit))
        .chain([Criterion::new("factually_correct", Scale::Boolean)])
        .collect()
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
    let total = file.items.len();
    let mut seen = HashSet::new();
    let mut labels = Vec::new();
    let mut unscored = 0usize;
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
        for (criterion, score) in item.scores.iter().flatten() {
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
            unscored += 1;
            continue;
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
    if labels.is_empty() {
        return Err(DataError::new(
            path,
            format!(
                "items: none of the {total} item(s) is scored; give the answers you judged their \
                 scores, factually_correct or a verdict (unscored items are skipped)"
            ),
        ));
    }
    Ok(Labels {
        path: path.to_owned(),
        labels,
        unscored,
    })
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
    let (mut judged, mut errors) = (Vec::new(), Vec::new());
    for (label, result) in futures_util::future::join_all(asks).await {
        let grades = match result {
            Ok(g) => g,
            Err(e) => {
                errors.push(format!("{}: {e}", label.item));
                continue;
            }
        };
        let mut human = label.scores.clone();
        if let Some(correct) = label.factually_correct {
            human.insert("factually_correct".into(), if correct { 1.0 } else { 0.0 });
        }
        judged.push(JudgedItem {
            item: label.item.clone(),
            human,
            human_verdict: label.verdict,
            samples: grades
                .iter()
                .map(|g| JudgeSample {
                    scores: [
                        ("factuality", g.factuality),
                        ("completeness", g.completeness),
                        ("relevance", g.relevance),
                        ("overall", g.overall),
                        (
                            "factually_correct",
                            if g.factually_correct { 1.0 } else { 0.0 },
                        ),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
                    passes: g.overall >= grader.threshold,
                })
                .collect(),
        });
    }
    measure_report(
        ReportHead {
            kind: "rubric".into(),
            judge_model: grader.model.model().to_owned(),
            judge_version: grade::version(),
            labels: labels.path.display().to_string(),
            samples,
            unscored: labels.unscored,
        },
        &criteria(),
        &judged,
        errors,
    )
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

    #[test]
    fn unscored_items_are_skipped_and_counted() {
        let item = |q: &str, rest: &str| {
            format!("  - question: {q}\n    expected: A\n    answer: A\n{rest}")
        };
        let text = format!(
            "judge: rubric\nitems:\n{}{}{}",
            item("Q1", "    scores: {overall: 0.9}\n"),
            item("Q2", "    scores: {overall: ~, factuality: ~}\n"),
            item("Q3", "    scores:\n"),
        );
        let (_d, p) = write(&text);
        let l = load_labels(&p, 0.8).unwrap();
        assert_eq!((l.labels.len(), l.unscored), (1, 2));
        assert_eq!(l.labels[0].item, "item 1");
        // Nothing scored: an error naming the file.
        let text = format!(
            "judge: rubric\nitems:\n{}",
            item("Q2", "    scores: {overall: ~}\n")
        );
        let (_d, p) = write(&text);
        let e = load_labels(&p, 0.8).unwrap_err().to_string();
        assert!(
            e.contains("labels.yaml") && e.contains("none of the 1 item(s) is scored"),
            "{e}"
        );
        // A score present but off the scale is still an error naming the item and field.
        let text = format!(
            "judge: rubric\nitems:\n{}{}",
            item("Q2", "    scores: {overall: ~}\n"),
            item("Q1", "    scores: {relevance: 2}\n")
        );
        let (_d, p) = write(&text);
        let e = load_labels(&p, 0.8).unwrap_err().to_string();
        assert!(
            e.contains("labels.yaml") && e.contains("items[1]: scores.relevance: 2"),
            "{e}"
        );
    }

    /// A grader that changes its mind on chosen questions: sample 0 passes every answer, the
    /// resamples (with a seed) fail the questions marked `FLIP`.
    #[derive(Debug)]
    struct Fickle;

    #[async_trait::async_trait]
    impl assay_providers::ChatModel for Fickle {
        fn model(&self) -> &'static str {
            "test/fickle-grader"
        }
        async fn chat(
            &self,
            request: &assay_providers::ChatRequest,
        ) -> Result<assay_providers::ChatResponse, assay_providers::ProviderError> {
            let prompt = &request.messages[0].content;
            let fail = prompt.contains("FLIP") && request.seed.is_some();
            let score = if fail { 0.2 } else { 0.9 };
            Ok(assay_providers::ChatResponse {
                text: serde_json::json!({"factuality": score, "completeness": score,
                    "relevance": 1.0, "overall": score, "factually_correct": !fail,
                    "reasoning": "scripted"})
                .to_string(),
                ..assay_providers::ChatResponse::default()
            })
        }
    }

    #[tokio::test]
    async fn items_whose_verdict_flips_across_samples_are_uncertain() {
        let item = |q: &str, verdict: &str| {
            format!(
                "  - question: {q}\n    expected: A\n    answer: A\n    scores: {{overall: ~}}\n    verdict: {verdict}\n"
            )
        };
        let text = format!(
            "judge: rubric\nitems:\n{}{}{}{}{}",
            item("Q1 FLIP", "fail"),
            item("Q2", "fail"),
            item("Q3 FLIP", "pass"),
            item("Q4", "pass"),
            "  - question: Q5\n    expected: A\n    answer: A\n",
        );
        let (_d, p) = write(&text);
        let labels = load_labels(&p, 0.8).unwrap();
        let grader = Grader {
            model: &Fickle,
            threshold: 0.8,
        };
        let r = agree(&grader, &labels, 3).await;
        assert_eq!((r.items, r.unscored), (4, 1));
        let c = r.consistency.as_ref().unwrap();
        assert_eq!(c.uncertain, ["item 1", "item 3"]);
        let v = r.measurement.verdicts.as_ref().unwrap();
        assert_eq!(v.n, 2, "the uncertain items are left out of the verdicts");
        assert_eq!(
            v.judge_too_lenient,
            ["item 2"],
            "stable, and not the person's"
        );
        assert!(v.judge_too_strict.is_empty());
        let ids: Vec<&str> = c.criteria.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "factuality",
                "completeness",
                "relevance",
                "overall",
                "factually_correct"
            ]
        );
        let overall = &c.criteria[3];
        assert_eq!(overall.unstable_items, ["item 1", "item 3"]);
        assert_eq!(c.criteria[2].unstable, 0, "relevance never moves");
        assert!(overall.mean_sd > 0.0 && c.criteria[2].mean_sd == 0.0);
    }
}
