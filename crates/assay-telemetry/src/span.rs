//! A span that costs nothing when export is off.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::context::{FutureExt, WithContext};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue, Value};

use crate::{ACTIVE, parent_context};

/// One span, or nothing when export is off (every method is then a no-op). Cloning shares the
/// span; [`Span::end`] ends it once.
#[derive(Clone, Default)]
pub struct Span {
    cx: Option<Context>,
}

impl std::fmt::Debug for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.traceparent() {
            Some(tp) => write!(f, "Span({tp})"),
            None => f.write_str("Span(off)"),
        }
    }
}

/// Set on a deferred case's context: a span made under it was exported, so the case's own
/// spans must be too (or that span's parent would be missing).
#[derive(Debug, Clone)]
pub(crate) struct Needed(pub(crate) Arc<AtomicBool>);

impl Needed {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A verdict, as a `gen_ai.evaluation.result` event on the span it judges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation<'a> {
    /// `gen_ai.evaluation.name`: what was evaluated (`retrieval.score`, a criterion's id, …).
    pub name: &'a str,
    /// `gen_ai.evaluation.score.value`.
    pub score: Option<f64>,
    /// `gen_ai.evaluation.score.label` (`pass`, `fail`, `error`, a status).
    pub label: Option<&'a str>,
    /// `gen_ai.evaluation.explanation`.
    pub explanation: Option<&'a str>,
}

/// The attributes of a `gen_ai.evaluation.result` event.
pub(crate) fn evaluation_attributes(evaluation: &Evaluation<'_>) -> Vec<KeyValue> {
    let mut attributes = Vec::with_capacity(4);
    attributes.push(KeyValue::new(
        crate::genai::EVALUATION_NAME,
        evaluation.name.to_owned(),
    ));
    if let Some(score) = evaluation.score.filter(|s| s.is_finite()) {
        attributes.push(KeyValue::new(crate::genai::EVALUATION_SCORE, score));
    }
    if let Some(label) = evaluation.label {
        attributes.push(KeyValue::new(
            crate::genai::EVALUATION_LABEL,
            label.to_owned(),
        ));
    }
    if let Some(explanation) = evaluation.explanation.filter(|e| !e.is_empty()) {
        attributes.push(KeyValue::new(
            crate::genai::EVALUATION_EXPLANATION,
            explanation.to_owned(),
        ));
    }
    attributes
}

pub(crate) fn start_root(name: &str, kind: SpanKind, attributes: Vec<KeyValue>) -> Span {
    build(name.to_owned(), kind, attributes, &Context::new())
}

fn build(
    name: impl Into<Cow<'static, str>>,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
    parent: &Context,
) -> Span {
    let Some(pipeline) = ACTIVE.get() else {
        return Span::default();
    };
    // Under a deferred case: its spans are needed now.
    if let Some(needed) = parent.get::<Needed>() {
        needed.set();
    }
    let span = pipeline
        .tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(&pipeline.tracer, parent);
    Span {
        cx: Some(parent.with_span(span)),
    }
}

impl Span {
    /// A span under the current one (or under the command's span where none is current).
    /// `attributes` is only built when export is on.
    pub fn start(
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        if ACTIVE.get().is_none() {
            return Span::default();
        }
        build(name, kind, attributes(), &parent_context())
    }

    /// A span under `self`.
    pub fn child(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        match &self.cx {
            Some(cx) => build(name, kind, attributes(), cx),
            None => Span::default(),
        }
    }

    /// Whether this span is exported.
    pub fn is_recording(&self) -> bool {
        self.cx.is_some()
    }

    /// The context holding this span (the current context when off), for
    /// [`FutureExt::with_context`].
    pub fn context(&self) -> Context {
        self.cx.clone().unwrap_or_else(Context::current)
    }

    /// Sets an attribute.
    pub fn set(&self, key: &'static str, value: impl Into<Value>) {
        if let Some(cx) = &self.cx {
            cx.span().set_attribute(KeyValue::new(key, value));
        }
    }

    /// Sets attributes built only when export is on.
    pub fn set_with(&self, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(cx) = &self.cx {
            cx.span().set_attributes(attributes());
        }
    }

    /// Adds an event.
    pub fn event(&self, name: &'static str, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(cx) = &self.cx {
            cx.span().add_event(name, attributes());
        }
    }

    /// Adds a `gen_ai.evaluation.result` event.
    pub fn evaluation(&self, evaluation: &Evaluation<'_>) {
        if let Some(cx) = &self.cx {
            cx.span().add_event(
                crate::genai::EVALUATION_EVENT,
                evaluation_attributes(evaluation),
            );
        }
    }

    /// Marks the span failed with `message` (`error.type` names the kind).
    pub fn fail(&self, error_type: &str, message: impl Into<Cow<'static, str>>) {
        if let Some(cx) = &self.cx {
            let span = cx.span();
            span.set_attribute(KeyValue::new("error.type", error_type.to_owned()));
            span.set_status(Status::error(message));
        }
    }

    /// Ends the span (a second call does nothing).
    pub fn end(&self) {
        if let Some(cx) = &self.cx {
            let span = cx.span();
            if span.is_recording() {
                span.end();
                if let Some(p) = ACTIVE.get() {
                    p.stats.ended.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// The W3C `traceparent` of this span (`00-<trace id>-<span id>-<flags>`).
    pub fn traceparent(&self) -> Option<String> {
        traceparent_of(self.cx.as_ref()?.span().span_context())
    }

    /// The trace id, 32 hex digits.
    pub fn trace_id(&self) -> Option<String> {
        let cx = self.cx.as_ref()?;
        let sc = cx.span().span_context().clone();
        sc.is_valid().then(|| sc.trace_id().to_string())
    }
}

/// The W3C `traceparent` of a span context (`00-<trace id>-<span id>-<flags>`), if valid.
pub(crate) fn traceparent_of(sc: &opentelemetry::trace::SpanContext) -> Option<String> {
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// `future` with `span` current while it runs, so that spans started inside it are its
/// children.
pub fn in_span<F: Future>(span: &Span, future: F) -> WithContext<F> {
    future.with_context(span.context())
}
