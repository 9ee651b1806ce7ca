//! The spans of the optimizer's cases (with export on): one per case, the target's
//! `traceparent` naming it, the grade as evaluation events.

use std::collections::BTreeMap;

use assay_core::experiment::CaseResult;

use super::Runner;
use crate::cases::LoadedCase;

impl Runner<'_> {
    /// [`Runner::one`] in a span of its own (the target's `traceparent` names it), with the
    /// grade as evaluation events.
    pub(super) async fn one_traced(
        &self,
        prompts: &BTreeMap<String, String>,
        case: &LoadedCase,
    ) -> CaseResult {
        use assay_telemetry::Evaluation;
        let span = assay_telemetry::Span::start(
            format!("case line {}", case.case.line),
            opentelemetry::trace::SpanKind::Internal,
            || {
                vec![opentelemetry::KeyValue::new(
                    "assay.case.line",
                    assay_telemetry::count(case.case.line),
                )]
            },
        );
        let result = assay_telemetry::in_span(&span, self.one(prompts, case)).await;
        if span.is_recording() {
            if let Some(error) = &result.error {
                span.evaluation(&Evaluation {
                    name: "assay.correct",
                    score: None,
                    label: Some("error"),
                    explanation: Some(error),
                });
                span.fail("case_error", error.clone());
            } else {
                span.evaluation(&Evaluation {
                    name: "assay.correct",
                    score: Some(if result.factually_correct { 1.0 } else { 0.0 }),
                    label: Some(if result.factually_correct {
                        "correct"
                    } else {
                        "incorrect"
                    }),
                    explanation: result.correct_why.as_deref(),
                });
                if let Some(rubric) = &result.rubric {
                    span.evaluation(&Evaluation {
                        name: "assay.rubric",
                        score: Some(result.composite_score),
                        label: Some(if result.rubric_pass { "pass" } else { "fail" }),
                        explanation: Some(&rubric.reasoning),
                    });
                }
            }
        }
        span.end();
        result
    }
}
