//! Grading a final answer against the expected one: two verdicts side by side.
//!
//! * **llm-rubric**: a grader model scores factuality, completeness and relevance and an
//!   overall score, each in 0–1, and says whether the answer is factually correct, in
//!   structured output validated against [`rubric_schema`] (temperature 0, through
//!   [`assay_providers::ask_structured`] and so through the caller's call wrapper: retries,
//!   limits, cache, accounting). The overall score is the case's composite score; it passes at
//!   the threshold (0.8, as the seed). A reply that still does not validate after the
//!   corrective turns, or a provider error after the wrapper's retries, is a
//!   [`GradeError`]: an infrastructure error, never a score.
//! * **correctness**: the case's rule ([`crate::correct`]; by default words on word boundaries
//!   and numbers as numbers with their units) decides `factually_correct`, the optimizer's
//!   first objective. The grader's own call is kept beside it; where the two differ the
//!   report lists the case.

use assay_core::assertion::Status;
use assay_core::experiment::{CaseResult, RubricGrade};
use assay_providers::{
    ChatModel, ChatRequest, DEFAULT_STRUCTURED_RETRIES, ProviderError, SchemaCheck, ask_structured,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cases::TestCase;
use crate::correct::Checker;

/// Tokens the grader may answer with.
pub const GRADER_MAX_TOKENS: u32 = 1024;

/// The grader failed: an infrastructure error, recorded as such.
#[derive(Debug, thiserror::Error)]
#[error("grader {model}: {source}")]
pub struct GradeError {
    /// The grader's `vendor/model`.
    pub model: String,
    /// What went wrong.
    #[source]
    pub source: ProviderError,
}

/// The JSON schema of the grader's reply.
pub fn rubric_schema() -> Value {
    let unit = json!({"type": "number", "minimum": 0, "maximum": 1});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["factuality", "completeness", "relevance", "overall", "factually_correct", "reasoning"],
        "properties": {
            "factuality": unit,
            "completeness": unit,
            "relevance": unit,
            "overall": unit,
            "factually_correct": {"type": "boolean"},
            "reasoning": {"type": "string"}
        }
    })
}

#[derive(Debug, Deserialize)]
struct Reply {
    factuality: f64,
    completeness: f64,
    relevance: f64,
    overall: f64,
    factually_correct: bool,
    reasoning: String,
}

const SYSTEM: &str = "You grade answers to questions against the expected answer. Be strict \
about facts and lenient about wording. Answer with the JSON object the schema describes and \
nothing else.";

/// The grader's prompt (the seed's rubric, in our words).
pub fn rubric_prompt(question: &str, expected: &str, output: &str) -> String {
    format!(
        "Evaluate the final answer on these criteria:\n\
         1. Factuality: is the information accurate compared with the expected answer?\n\
         2. Completeness: does the answer fully address the question?\n\
         3. Relevance: is the answer relevant to the question?\n\n\
         Question: {question}\n\
         Expected answer: {expected}\n\
         Actual answer: {output}\n\n\
         Grade each criterion from 0.0 to 1.0, give an overall score from 0.0 to 1.0, and say \
         whether the answer is factually correct (true/false), with a one-sentence reasoning."
    )
}

/// The llm-rubric grader: a wrapped chat model and the pass threshold.
#[derive(Debug, Clone)]
pub struct Grader<'a> {
    /// The grader model (already wrapped by the caller's `ProviderCalls`).
    pub model: &'a dyn ChatModel,
    /// The composite score at or above which a case passes.
    pub threshold: f64,
}

/// The grader's version: the first 16 hex digits of a SHA-256 over its instructions, its
/// prompt (with placeholders) and its answer schema. Reports carry it, so two runs graded
/// differently can be told apart.
pub fn version() -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        SYSTEM.to_owned(),
        rubric_prompt("{question}", "{expected}", "{output}"),
        rubric_schema().to_string(),
    ] {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize()
        .iter()
        .take(8)
        .fold(String::new(), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
}

impl Grader<'_> {
    /// Grades one answer with the rubric.
    pub async fn rubric(
        &self,
        question: &str,
        expected: &str,
        output: &str,
    ) -> Result<RubricGrade, GradeError> {
        self.rubric_sample(question, expected, output, 0).await
    }

    /// [`Grader::rubric`], sample `sample`: sample 0 is the grader as it always asks; later
    /// samples carry a seed, so each is a call (and a cache entry) of its own.
    pub async fn rubric_sample(
        &self,
        question: &str,
        expected: &str,
        output: &str,
        sample: u32,
    ) -> Result<RubricGrade, GradeError> {
        let schema = SchemaCheck::new("rubric_grade", rubric_schema()).map_err(|e| GradeError {
            model: self.model.model().to_owned(),
            source: e,
        })?;
        let mut request = ChatRequest::new(
            Some(SYSTEM.to_owned()),
            rubric_prompt(question, expected, output),
            GRADER_MAX_TOKENS,
        );
        if sample > 0 {
            request.seed = Some(u64::from(sample));
        }
        let answer = ask_structured::<Reply>(
            self.model,
            request,
            &schema,
            DEFAULT_STRUCTURED_RETRIES,
            &|_| Ok(()),
        )
        .await
        .map_err(|e| GradeError {
            model: self.model.model().to_owned(),
            source: e,
        })?;
        let r = answer.value;
        Ok(RubricGrade {
            factuality: r.factuality,
            completeness: r.completeness,
            relevance: r.relevance,
            overall: r.overall,
            factually_correct: r.factually_correct,
            reasoning: r.reasoning,
        })
    }

    /// Grades one answer with the rubric and the case's correctness rule into a
    /// [`CaseResult`].
    pub async fn grade(
        &self,
        case: &TestCase,
        output: &str,
        checker: &Checker,
    ) -> Result<CaseResult, GradeError> {
        let rubric = self.rubric(&case.question, &case.answer, output).await?;
        let rule = checker.rule_of(case).kind;
        let verdict = checker.judge(case, output, Some(rubric.factually_correct));
        Ok(CaseResult {
            line: case.line,
            question: case.question.clone(),
            expected: case.answer.clone(),
            output: Some(output.to_owned()),
            factually_correct: verdict.correct,
            correctness: Some(rule.as_str().to_owned()),
            correct_why: Some(verdict.why),
            composite_score: rubric.overall,
            rubric_pass: rubric.overall >= self.threshold,
            rubric: Some(rubric),
            error: None,
            assertions: None,
        })
    }
}

/// Checks the case's deterministic assertions (`assert`) on `output` and records them on
/// `result`. Latency is the target call's wall time when the caller measured it; the cost of one
/// case is not separated from the run's total, so `cost` assertions are reported unmeasured (an
/// error of that assertion, not a pass or a fail). A failed `critical` assertion makes the case
/// incorrect whatever the correctness rule and the grader said, and says so in `correct_why`.
pub fn apply_assertions(
    result: &mut CaseResult,
    case: &TestCase,
    output: &str,
    latency_ms: Option<f64>,
) {
    let Some(set) = &case.assert else { return };
    let report = set.evaluate(&assay_core::assertion::Output {
        text: output,
        latency_ms,
        cost_usd: None,
    });
    if report.critical_failed {
        let failed: Vec<String> = report
            .results
            .iter()
            .filter(|r| r.critical && !r.passed && r.status == Status::Failed)
            .map(|r| format!("assert[{}] {} ({})", r.index, r.kind, r.reason))
            .collect();
        let why = format!("critical assertion failed: {}", failed.join("; "));
        result.correct_why = Some(match result.correct_why.take() {
            Some(rule) if result.factually_correct => {
                format!("{why}; the rule said correct: {rule}")
            }
            Some(rule) => format!("{rule}; {why}"),
            None => why,
        });
        result.factually_correct = false;
    }
    result.assertions = Some(report);
}

/// A case the target or the grader could not finish: recorded with its error, not scored.
pub fn errored(
    line: usize,
    question: &str,
    expected: &str,
    output: Option<String>,
    error: String,
) -> CaseResult {
    CaseResult {
        line,
        question: question.to_owned(),
        expected: expected.to_owned(),
        output,
        factually_correct: false,
        correctness: None,
        correct_why: None,
        composite_score: 0.0,
        rubric_pass: false,
        rubric: None,
        error: Some(error),
        assertions: None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use assay_providers::{ChatResponse, Usage};
    use async_trait::async_trait;

    use super::*;

    #[derive(Debug)]
    struct Scripted(Mutex<Vec<String>>);

    #[async_trait]
    impl ChatModel for Scripted {
        fn model(&self) -> &'static str {
            "test/grader"
        }
        async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
            assert!(request.output_schema.is_some());
            assert!(
                request.messages[0]
                    .content
                    .contains("Expected answer: Paris")
            );
            let text = self.0.lock().unwrap().remove(0);
            Ok(ChatResponse {
                text,
                usage: Usage::default(),
                ..ChatResponse::default()
            })
        }
    }

    fn case(line: usize, question: &str, answer: &str) -> TestCase {
        TestCase {
            line,
            question: question.into(),
            files: Vec::new(),
            answer: answer.into(),
            correctness: None,
            pattern: None,
            assert: None,
        }
    }

    #[tokio::test]
    async fn the_rule_decides_and_the_grader_sits_beside_it() {
        // The grader says correct; the answer's number is wrong: the rule decides.
        let model = Scripted(Mutex::new(vec![reply(0.9)]));
        let grader = Grader {
            model: &model,
            threshold: 0.8,
        };
        let c = case(2, "Which city?", "Paris");
        let r = grader
            .grade(&c, "Parisian salt", &Checker::default())
            .await
            .unwrap();
        assert!(!r.factually_correct);
        assert!(r.rubric.as_ref().unwrap().factually_correct);
        assert_eq!(r.correct_why.as_deref(), Some("no `paris`"));
        let model = Scripted(Mutex::new(vec![reply(0.9)]));
        let grader = Grader {
            model: &model,
            threshold: 0.8,
        };
        let by_grader = Checker::new(crate::correct::Correctness::Grader, &[]).unwrap();
        let r = grader.grade(&c, "Parisian salt", &by_grader).await.unwrap();
        assert!(r.factually_correct);
    }

    fn reply(overall: f64) -> String {
        json!({"factuality": 1.0, "completeness": 0.9, "relevance": 1.0, "overall": overall,
               "factually_correct": true, "reasoning": "right"})
        .to_string()
    }

    #[tokio::test]
    async fn a_critical_assertion_overrides_the_rule_and_the_grader() {
        let mut c = case(4, "Which city?", "Paris");
        c.assert = Some(
            assay_core::assertion::AssertionSet::parse(
                &json!([
                    {"type": "not-icontains", "value": "as an ai", "critical": true},
                    {"type": "latency", "value": 50},
                    {"type": "cost", "value": 1}
                ]),
                None,
                "assert",
            )
            .unwrap(),
        );
        let model = Scripted(Mutex::new(vec![reply(0.9), reply(0.9)]));
        let grader = Grader {
            model: &model,
            threshold: 0.8,
        };
        // Rule and grader say correct; no critical failure: it stays correct, and the
        // unmeasured cost is an error of that assertion, not a failure.
        let mut ok = grader
            .grade(&c, "Paris.", &Checker::default())
            .await
            .unwrap();
        apply_assertions(&mut ok, &c, "Paris.", Some(10.0));
        let a = ok.assertions.as_ref().unwrap();
        assert!(ok.factually_correct && a.passed && !a.critical_failed);
        assert_eq!(a.results[2].status, assay_core::assertion::Status::Error);
        // The critical assertion fails: incorrect, whatever the rule and the grader said.
        let out = "As an AI, I think Paris.";
        let mut bad = grader.grade(&c, out, &Checker::default()).await.unwrap();
        assert!(bad.factually_correct && bad.rubric.as_ref().unwrap().factually_correct);
        apply_assertions(&mut bad, &c, out, Some(80.0));
        assert!(!bad.factually_correct);
        let why = bad.correct_why.as_deref().unwrap();
        assert!(
            why.starts_with("critical assertion failed: assert[0] not-icontains"),
            "{why}"
        );
        let a = bad.assertions.as_ref().unwrap();
        assert!(
            a.critical_failed && !a.results[1].passed,
            "80 ms is over 50 ms"
        );
    }

    #[tokio::test]
    async fn rubric_grades_validate_and_pass_at_the_threshold() {
        let model = Scripted(Mutex::new(vec![reply(0.8)]));
        let grader = Grader {
            model: &model,
            threshold: 0.8,
        };
        let r = grader
            .grade(
                &case(3, "Capital of France?", "Paris"),
                "It is Paris.",
                &Checker::default(),
            )
            .await
            .unwrap();
        assert!(r.factually_correct && r.rubric_pass);
        assert_eq!((r.line, r.composite_score), (3, 0.8));
        assert_eq!(r.correctness.as_deref(), Some("normalised"));
    }

    #[tokio::test]
    async fn an_invalid_reply_is_retried_then_an_error_never_a_score() {
        let bad = json!({"overall": 3.0}).to_string();
        let model = Scripted(Mutex::new(vec![bad.clone(), reply(0.5)]));
        let grader = Grader {
            model: &model,
            threshold: 0.8,
        };
        let r = grader
            .grade(&case(1, "q", "Paris"), "Lyon", &Checker::default())
            .await
            .unwrap();
        assert!(!r.rubric_pass && !r.factually_correct);
        let always_bad = Scripted(Mutex::new(vec![
            bad;
            1 + DEFAULT_STRUCTURED_RETRIES as usize
        ]));
        let grader = Grader {
            model: &always_bad,
            threshold: 0.8,
        };
        let e = grader
            .grade(&case(1, "q", "Paris"), "Lyon", &Checker::default())
            .await
            .unwrap_err();
        assert!(e.to_string().starts_with("grader test/grader:"), "{e}");
    }
}
