//! The spans of a case, made only when they are exported.
//!
//! A run of 100,000 deterministic cases would spend most of its export cost on spans that say
//! "passed" 100,000 times. [`CaseSpans`] defers them: while the case runs it holds only two
//! span ids chosen up front, its start time and a context that parents whatever spans the case
//! makes (a model call's `chat` span is made and exported as usual, under the case's ids). When
//! the case is done its spans are made, with those ids and its start time, if the case failed
//! or erred, if a span under it was exported (a model call), or if the sampler keeps it
//! (`OTEL_TRACES_SAMPLER` / `_ARG`, `[telemetry] sample_passing`); otherwise they are dropped
//! at the cost of two random ids and a clock read.
//!
//! A case's spans are known whole when they are made, so they skip the SDK's live spans (a
//! context, a locked span, the sampler and the id generator for each): the caller builds each
//! as a [`Recorded`] and [`CaseSpans::finish`] hands both to the export queue as finished
//! span data. bench/telemetry measured what that saves (bench/README.md).

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, SpanData, SpanEvents, SpanLinks, SpanProcessor,
};

use crate::span::{Evaluation, Needed, evaluation_attributes};
use crate::{ACTIVE, parent_context};

/// A span whose whole content is known when it is made: its name, attributes, events and
/// status, recorded in place and exported in one piece by [`CaseSpans::finish`].
#[derive(Debug, Clone)]
pub struct Recorded {
    name: Cow<'static, str>,
    attributes: Vec<KeyValue>,
    events: Vec<Event>,
    status: Status,
}

impl Recorded {
    /// A span named `name` with `attributes`.
    pub fn new(name: impl Into<Cow<'static, str>>, attributes: Vec<KeyValue>) -> Recorded {
        Recorded {
            name: name.into(),
            attributes,
            events: Vec::new(),
            status: Status::Unset,
        }
    }

    /// Sets an attribute.
    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        self.attributes.push(KeyValue::new(key, value));
    }

    /// Adds a `gen_ai.evaluation.result` event, timed now.
    pub fn evaluation(&mut self, evaluation: &Evaluation<'_>) {
        self.events.push(Event::new(
            crate::genai::EVALUATION_EVENT,
            opentelemetry::time::now(),
            evaluation_attributes(evaluation),
            0,
        ));
    }

    /// Marks the span failed with `message` (`error.type` names the kind).
    pub fn fail(&mut self, error_type: &str, message: impl Into<Cow<'static, str>>) {
        self.attributes
            .push(KeyValue::new("error.type", error_type.to_owned()));
        self.status = Status::error(message);
    }

    /// Finished span data with these ids, times and parent.
    fn into_data(
        self,
        context: SpanContext,
        parent: &SpanContext,
        start_time: SystemTime,
        end_time: SystemTime,
        scope: &opentelemetry::InstrumentationScope,
    ) -> SpanData {
        let mut events = SpanEvents::default();
        events.events = self.events;
        SpanData {
            span_context: context,
            parent_span_id: if parent.is_valid() {
                parent.span_id()
            } else {
                SpanId::INVALID
            },
            parent_span_is_remote: parent.is_valid() && parent.is_remote(),
            span_kind: SpanKind::Internal,
            name: self.name,
            start_time,
            end_time,
            attributes: self.attributes,
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status: self.status,
            instrumentation_scope: scope.clone(),
        }
    }
}

/// A case's span and the stage span under it, deferred (see the module documentation).
/// Nothing at all when export is off.
#[derive(Debug, Default)]
pub struct CaseSpans {
    inner: Option<Box<Inner>>,
}

#[derive(Debug)]
struct Inner {
    /// The case span's parent.
    parent: Context,
    trace_id: TraceId,
    case_id: SpanId,
    stage_id: SpanId,
    start: SystemTime,
    /// What the case runs in (the stage span's ids, as a parent for the spans it makes) and
    /// its mark: made on first use, since a case run in place makes no span under it.
    stage: OnceLock<(Context, Needed)>,
}

impl Inner {
    fn stage(&self) -> &(Context, Needed) {
        self.stage.get_or_init(|| {
            let needed = Needed(Arc::new(AtomicBool::new(false)));
            let cx =
                context_of(&self.parent, self.trace_id, self.stage_id).with_value(needed.clone());
            (cx, needed)
        })
    }
}

fn context_of(parent: &Context, trace_id: TraceId, span_id: SpanId) -> Context {
    parent.with_remote_span_context(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    ))
}

impl CaseSpans {
    /// Starts a case under the current span (or the command's span): two ids, a clock read.
    pub fn start() -> CaseSpans {
        if ACTIVE.get().is_none() {
            return CaseSpans::default();
        }
        let parent = parent_context();
        let ids = RandomIdGenerator::default();
        let sc = parent.span().span_context().clone();
        let trace_id = if sc.is_valid() {
            sc.trace_id()
        } else {
            ids.new_trace_id()
        };
        let case_id = ids.new_span_id();
        let stage_id = ids.new_span_id();
        CaseSpans {
            inner: Some(Box::new(Inner {
                parent,
                trace_id,
                case_id,
                stage_id,
                start: opentelemetry::time::now(),
                stage: OnceLock::new(),
            })),
        }
    }

    /// Whether export is on.
    pub fn is_recording(&self) -> bool {
        self.inner.is_some()
    }

    /// The context the case runs in (spans made in it are the stage span's children); the
    /// current context when export is off.
    pub fn context(&self) -> Context {
        self.inner
            .as_ref()
            .map_or_else(Context::current, |i| i.stage().0.clone())
    }

    /// Whether a span made under the case was exported (a model call, a tool call).
    pub fn has_exported_children(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| {
            i.stage
                .get()
                .is_some_and(|(_, needed)| needed.0.load(Ordering::Relaxed))
        })
    }

    /// Whether the sampler keeps this case were it to pass: its span id against the share of
    /// passing cases exported.
    pub fn sampled(&self) -> bool {
        let Some(i) = &self.inner else { return false };
        let ratio = ACTIVE.get().map_or(1.0, |p| p.config.sample_passing);
        if ratio >= 1.0 {
            return true;
        }
        // The top 53 bits of the random span id, as a share of 2^53.
        let bits = u64::from_be_bytes(i.case_id.to_bytes()) >> 11;
        (bits as f64) < ratio * (1u64 << 53) as f64
    }

    /// Drops the case's spans unmade (a passing case the sampler did not keep).
    pub fn drop_unsampled(self) {
        if self.inner.is_some()
            && let Some(p) = ACTIVE.get()
        {
            p.stats.sampled_out.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Exports the case span and the stage span under it, with the ids and the start time
    /// chosen when the case started, ending both now.
    pub fn finish(self, case: Recorded, stage: Recorded) {
        let (Some(i), Some(pipeline)) = (self.inner, ACTIVE.get()) else {
            return;
        };
        let end = opentelemetry::time::now();
        let parent = i.parent.span().span_context().clone();
        let context = |span_id| {
            SpanContext::new(
                i.trace_id,
                span_id,
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            )
        };
        let case_context = context(i.case_id);
        let stage_context = context(i.stage_id);
        let scope = &pipeline.scope;
        // Children end first, as they would on live spans.
        pipeline.processor.on_end(stage.into_data(
            stage_context,
            &case_context,
            i.start,
            end,
            scope,
        ));
        pipeline
            .processor
            .on_end(case.into_data(case_context, &parent, i.start, end, scope));
        pipeline.stats.ended.fetch_add(2, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_span_becomes_finished_data_under_its_parent() {
        let trace = TraceId::from_bytes([7; 16]);
        let context =
            |id| SpanContext::new(trace, id, TraceFlags::SAMPLED, false, TraceState::default());
        let parent = context(SpanId::from_bytes([1; 8]));
        let mut span = Recorded::new("retrieval state", vec![KeyValue::new("a", 1)]);
        span.set("b", "two");
        span.evaluation(&Evaluation {
            name: "assay.state",
            score: Some(80.0),
            label: Some("fail"),
            explanation: Some("wrong handlers"),
        });
        span.fail("case_error", "boom");
        let start = SystemTime::UNIX_EPOCH;
        let end = opentelemetry::time::now();
        let scope = opentelemetry::InstrumentationScope::builder("assay").build();
        let data = span.into_data(
            context(SpanId::from_bytes([2; 8])),
            &parent,
            start,
            end,
            &scope,
        );
        assert_eq!(data.span_context.span_id(), SpanId::from_bytes([2; 8]));
        assert_eq!(data.span_context.trace_id(), trace);
        assert_eq!(data.parent_span_id, SpanId::from_bytes([1; 8]));
        assert!(!data.parent_span_is_remote);
        assert_eq!((data.start_time, data.end_time), (start, end));
        assert_eq!(data.name, "retrieval state");
        let keys: Vec<&str> = data.attributes.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "error.type"]);
        assert_eq!(data.status, Status::error("boom"));
        assert_eq!(data.events.len(), 1);
        let event = &data.events[0];
        assert_eq!(event.name, crate::genai::EVALUATION_EVENT);
        let label = event
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == crate::genai::EVALUATION_LABEL)
            .map(|kv| kv.value.as_str().into_owned());
        assert_eq!(label.as_deref(), Some("fail"));
        // With no parent: a root span.
        let root = Recorded::new("case", vec![]).into_data(
            context(SpanId::from_bytes([3; 8])),
            &SpanContext::empty_context(),
            start,
            end,
            &scope,
        );
        assert_eq!(root.parent_span_id, SpanId::INVALID);
    }

    #[test]
    fn off_is_nothing() {
        let spans = CaseSpans::start();
        assert!(!spans.is_recording());
        assert!(!spans.sampled());
        assert!(!spans.has_exported_children());
        spans.finish(Recorded::new("c", vec![]), Recorded::new("s", vec![]));
    }
}
