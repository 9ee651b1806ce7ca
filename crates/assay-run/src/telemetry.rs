//! The spans of a run (with export on, see `assay_telemetry`): one per case, a `retrieval` span
//! under it with the documents the stage returned, and the case's verdict as a
//! `gen_ai.evaluation.result` event on that retrieval span (what was judged).

use assay_core::aggregate::CaseRecord;
use assay_core::bank::BankType;
use assay_core::scoring::{Breakdown, Penalty};
use assay_core::verdict::Outcome;
use assay_telemetry::genai;
use assay_telemetry::{Evaluation, Span};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

/// The span of one case of `bank`.
pub fn case_span(bank: BankType, test_id: &str) -> Span {
    // Every case passes here: with export off, nothing is formatted.
    if !assay_telemetry::enabled() {
        return Span::default();
    }
    Span::start(
        format!("case {}/{test_id}", bank.key()),
        SpanKind::Internal,
        || {
            vec![
                KeyValue::new("assay.bank", bank.key()),
                KeyValue::new("assay.test_id", test_id.to_owned()),
            ]
        },
    )
}

/// The stage a bank exercises, as its retrieval span names it.
fn stage(bank: BankType) -> &'static str {
    match bank {
        BankType::Semantic => "situation",
        BankType::State => "state",
        BankType::Pattern => "pattern",
        BankType::Always => "always",
        BankType::Answer => "answer",
    }
}

/// A retrieval span under `case` for `bank`'s stage.
pub fn retrieval_span(case: &Span, bank: BankType) -> Span {
    if !case.is_recording() {
        return Span::default();
    }
    case.child(
        format!("retrieval {}", stage(bank)),
        SpanKind::Internal,
        || {
            vec![
                KeyValue::new(genai::OPERATION, "retrieval"),
                KeyValue::new(genai::DATA_SOURCE, "kb"),
                KeyValue::new("assay.stage", stage(bank)),
            ]
        },
    )
}

/// Records a finished case on its spans (documents, verdict) and ends both.
pub fn finish_case(case: &Span, retrieval: &Span, record: &CaseRecord) {
    if case.is_recording() {
        record_documents(retrieval, record);
        if assay_telemetry::capture_content() {
            record_query(retrieval, record);
        }
        let (label, explanation) = verdict(record);
        let name = format!("assay.{}", record.bank().key());
        retrieval.evaluation(&Evaluation {
            name: &name,
            score: record.score().map(f64::from),
            label: Some(label),
            explanation: explanation.as_deref(),
        });
        if let Some(score) = record.score() {
            case.set("assay.case.score", i64::from(score));
        }
        case.set("assay.case.verdict", label);
        if label == "error" {
            let message = explanation.unwrap_or_default();
            retrieval.fail("case_error", message.clone());
            case.fail("case_error", message);
        }
    }
    retrieval.end();
    case.end();
}

/// The documents a case's stage returned, best first, with their scores where the stage has
/// them (the semantic bank's similarity).
fn record_documents(span: &Span, record: &CaseRecord) {
    match record {
        CaseRecord::Semantic(r) => genai::documents(
            span,
            r.selections.iter().map(|id| {
                let score = r
                    .candidates
                    .iter()
                    .find(|c| &c.entity_id == id)
                    .map(|c| c.similarity);
                (id.as_str(), score)
            }),
        ),
        CaseRecord::State(r) => {
            genai::documents(
                span,
                r.triggered_handlers.iter().map(|id| (id.as_str(), None)),
            );
        }
        CaseRecord::Pattern(r) => {
            genai::documents(
                span,
                r.matched_entities.iter().map(|id| (id.as_str(), None)),
            );
        }
        CaseRecord::Always(r) => {
            genai::documents(span, r.loaded_entities.iter().map(|id| (id.as_str(), None)));
        }
        CaseRecord::Answer(r) => {
            genai::documents(
                span,
                r.contexts
                    .iter()
                    .filter_map(|c| c.entity.as_deref())
                    .map(|id| (id, None)),
            );
        }
    }
}

/// What the stage was asked (content: only with the opt-in): the prompt, the user state, or
/// the audience.
fn record_query(span: &Span, record: &CaseRecord) {
    match record {
        CaseRecord::Semantic(r) => {
            span.set(genai::QUERY_TEXT, r.prompt.clone());
        }
        CaseRecord::Pattern(r) => span.set(genai::QUERY_TEXT, r.prompt.clone()),
        CaseRecord::State(r) => span.set(
            genai::USER_STATE,
            serde_json::to_string(&r.user_state).unwrap_or_default(),
        ),
        CaseRecord::Always(r) => span.set("assay.audience", r.user_type.clone()),
        CaseRecord::Answer(r) => span.set(genai::QUERY_TEXT, r.message.clone()),
    }
}

/// The case's stored verdict (`pass`, `fail` or `error`) and why: the checks that failed it,
/// the error, or for a pass what cost it points.
fn verdict(record: &CaseRecord) -> (&'static str, Option<String>) {
    let verdict = record.verdict();
    let why = match verdict.outcome {
        Outcome::Pass => explain(record.breakdown()),
        Outcome::Fail | Outcome::Error => Some(verdict.summary()),
    };
    (verdict.outcome.as_str(), why)
}

/// The breakdown in words: why points were taken.
fn explain(b: &Breakdown) -> Option<String> {
    let mut parts: Vec<String> = b.reason.iter().cloned().collect();
    let list = |what: &str, p: &Option<Penalty<String>>, parts: &mut Vec<String>| {
        if let Some(p) = p {
            parts.push(format!(
                "{what}: {} ({} points)",
                p.items.join(", "),
                p.penalty
            ));
        }
    };
    list("secondary missing", &b.secondary_missing, &mut parts);
    list("not expected", &b.false_positives, &mut parts);
    list("wrong handlers", &b.wrong_handlers, &mut parts);
    if let Some(p) = &b.rank_violations {
        let pairs: Vec<String> = p
            .items
            .iter()
            .map(|v| format!("{} below {}", v.expected_higher, v.expected_lower))
            .collect();
        parts.push(format!(
            "rank order: {} ({} points)",
            pairs.join(", "),
            p.penalty
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
