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

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};

use crate::span::{Needed, Span};
use crate::{ACTIVE, parent_context};

thread_local! {
    /// The ids the next span made on this thread takes (see [`AssayIds`]).
    static NEXT_IDS: Cell<(Option<TraceId>, Option<SpanId>)> = const { Cell::new((None, None)) };
}

/// The tracer provider's id generator: random ids, except for a span made from a
/// [`CaseSpans`], which takes the ids chosen when its case started.
#[derive(Debug, Default)]
pub(crate) struct AssayIds {
    random: RandomIdGenerator,
}

impl IdGenerator for AssayIds {
    fn new_trace_id(&self) -> TraceId {
        let (trace, span) = NEXT_IDS.get();
        match trace {
            Some(t) => {
                NEXT_IDS.set((None, span));
                t
            }
            None => self.random.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        let (trace, span) = NEXT_IDS.get();
        match span {
            Some(s) => {
                NEXT_IDS.set((trace, None));
                s
            }
            None => self.random.new_span_id(),
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

    /// Makes the case span and the stage span under it, with the ids and the start time
    /// chosen when the case started; the caller records on them and ends them.
    pub fn make(
        self,
        case: (String, Vec<KeyValue>),
        stage: (String, Vec<KeyValue>),
    ) -> (Span, Span) {
        let (Some(i), Some(pipeline)) = (self.inner, ACTIVE.get()) else {
            return (Span::default(), Span::default());
        };
        let make = |name: String, attributes, parent: &Context, trace_id, span_id| {
            // A span with no valid parent takes a new trace id: this case's.
            NEXT_IDS.set((Some(trace_id), Some(span_id)));
            let span = pipeline
                .tracer
                .span_builder(name)
                .with_kind(SpanKind::Internal)
                .with_start_time(i.start)
                .with_attributes(attributes)
                .start_with_context(&pipeline.tracer, parent);
            NEXT_IDS.set((None, None));
            Span::from_context(parent.with_span(span))
        };
        let case_span = make(case.0, case.1, &i.parent, i.trace_id, i.case_id);
        let case_cx = context_of(&i.parent, i.trace_id, i.case_id);
        let stage_span = make(stage.0, stage.1, &case_cx, i.trace_id, i.stage_id);
        (case_span, stage_span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_hands_out_the_chosen_ids_once() {
        let ids = AssayIds::default();
        let trace = TraceId::from_bytes([7; 16]);
        let span = SpanId::from_bytes([9; 8]);
        NEXT_IDS.set((Some(trace), Some(span)));
        assert_eq!(ids.new_span_id(), span);
        assert_eq!(ids.new_trace_id(), trace);
        assert_ne!(ids.new_span_id(), span);
        assert_ne!(ids.new_trace_id(), trace);
    }

    #[test]
    fn off_is_nothing() {
        let spans = CaseSpans::start();
        assert!(!spans.is_recording());
        assert!(!spans.sampled());
        assert!(!spans.has_exported_children());
        let (a, b) = spans.make(("c".into(), vec![]), ("s".into(), vec![]));
        assert!(!a.is_recording() && !b.is_recording());
    }
}
