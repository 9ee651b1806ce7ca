//! The spans of a run (with export on, see `assay_telemetry`): one per case, a `retrieval` span
//! under it with the documents the stage returned, and the case's verdict as a
//! `gen_ai.evaluation.result` event on that retrieval span (what was judged).
//!
//! A case's spans are deferred ([`CaseSpans`]) and made when it is done: always for a case that
//! failed or erred and for one that made a model call (its span is under the case), and for a
//! passing case only when the sampler keeps it (`OTEL_TRACES_SAMPLER`, `[telemetry]
//! sample_passing`; all by default).

use assay_core::aggregate::CaseRecord;
use assay_core::bank::BankType;
use assay_core::scoring::{Breakdown, Penalty};
use assay_core::verdict::Outcome;
use assay_telemetry::genai;
use assay_telemetry::{CaseSpans, Evaluation, Recorded};
use opentelemetry::KeyValue;

/// The spans of one case, deferred until it is done ([`finish_case`]); nothing with export off.
pub fn case_spans() -> CaseSpans {
    CaseSpans::start()
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

/// Makes a finished case's spans when they are exported (it failed or erred, a span under it was
/// exported, or the sampler keeps it), records its documents and verdict on them and ends them.
pub fn finish_case(spans: CaseSpans, record: &CaseRecord) {
    if !spans.is_recording() {
        return;
    }
    let bank = record.bank();
    let (label, explanation) = verdict(record);
    if label == "pass" && !spans.has_exported_children() && !spans.sampled() {
        spans.drop_unsampled();
        return;
    }
    let test_id = record.test_id();
    let mut case = Recorded::new(
        format!("case {}/{test_id}", bank.key()),
        vec![
            KeyValue::new("assay.bank", bank.key()),
            KeyValue::new("assay.test_id", test_id.to_owned()),
        ],
    );
    let mut retrieval = Recorded::new(
        format!("retrieval {}", stage(bank)),
        vec![
            KeyValue::new(genai::OPERATION, "retrieval"),
            KeyValue::new(genai::DATA_SOURCE, "kb"),
            KeyValue::new("assay.stage", stage(bank)),
            KeyValue::new(genai::DOCUMENTS, documents(record)),
        ],
    );
    if assay_telemetry::capture_content() {
        record_query(&mut retrieval, record);
    }
    let name = format!("assay.{}", bank.key());
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
    spans.finish(case, retrieval);
}

/// The documents a case's stage returned, best first, with their scores where the stage has
/// them (the semantic bank's similarity), as [`genai::DOCUMENTS`] holds them.
fn documents(record: &CaseRecord) -> String {
    match record {
        CaseRecord::Semantic(r) => genai::documents_json(r.selections.iter().map(|id| {
            let score = r
                .candidates
                .iter()
                .find(|c| &c.entity_id == id)
                .map(|c| c.similarity);
            (id.as_str(), score)
        })),
        CaseRecord::State(r) => {
            genai::documents_json(r.triggered_handlers.iter().map(|id| (id.as_str(), None)))
        }
        CaseRecord::Pattern(r) => {
            genai::documents_json(r.matched_entities.iter().map(|id| (id.as_str(), None)))
        }
        CaseRecord::Always(r) => {
            genai::documents_json(r.loaded_entities.iter().map(|id| (id.as_str(), None)))
        }
        CaseRecord::Answer(r) => genai::documents_json(
            r.contexts
                .iter()
                .filter_map(|c| c.entity.as_deref())
                .map(|id| (id, None)),
        ),
    }
}

/// What the stage was asked (content: only with the opt-in): the prompt, the user state, or
/// the audience.
fn record_query(span: &mut Recorded, record: &CaseRecord) {
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
