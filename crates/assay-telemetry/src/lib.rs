//! assay's OpenTelemetry export.
//!
//! Off unless a command turns it on ([`start`]) with an [`ExportConfig`] resolved from the
//! standard `OTEL_*` variables or the project's `[telemetry]` table ([`ExportConfig::resolve`]).
//! Then every span goes through a tracer provider of assay's own, never the global one (a
//! library or product code in the same process keeps whatever it installed), batched on the
//! batch processor's own thread and sent as OTLP over HTTP (protobuf or JSON).
//!
//! What assay writes follows the OpenTelemetry GenAI conventions ([`genai`]): a span for the
//! command, one per case, conversation or trial, and under those `chat` / `embeddings` spans
//! for provider calls, `retrieval` spans with the documents and their scores, `execute_tool`
//! spans for MCP tool calls, and `gen_ai.evaluation.result` events for verdicts.
//!
//! A backend that is down or refuses costs a warning (once, at the first failed batch, and a
//! count at the end), never the run: export errors never reach the caller.

mod config;
mod deferred;
mod export;
pub mod genai;
mod span;
pub mod tls;

use std::sync::{Mutex, OnceLock, PoisonError};

use opentelemetry::trace::{SpanKind, TraceContextExt};
use opentelemetry::{Context, KeyValue};

pub use config::{ExportConfig, Protocol, TableValues};
pub use deferred::{CaseSpans, Recorded};
pub use export::ExportReport;
pub use span::{Evaluation, Span, in_span};

/// A telemetry setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A value is wrong; the message names where it came from (a variable or the field).
    #[error("{0}")]
    Config(String),
    /// The exporter could not be built.
    #[error("telemetry: cannot build the OTLP exporter: {0}")]
    Build(String),
}

/// The process's telemetry, once a command turned it on.
static ACTIVE: OnceLock<export::Pipeline> = OnceLock::new();
/// The command span: the parent of spans that start where no span is current (a task spawned
/// away from its parent's context).
static ROOT: Mutex<Option<Context>> = Mutex::new(None);

/// Whether spans are being exported.
pub fn enabled() -> bool {
    ACTIVE.get().is_some()
}

/// Whether message contents (prompts, replies, queries, tool arguments and results) may be
/// recorded: only when export is on and the user opted in.
pub fn capture_content() -> bool {
    ACTIVE.get().is_some_and(|p| p.config.capture_content)
}

/// Turns export on for this process with `config` and starts the command's span, named
/// `command` (e.g. `assay run`) with `attributes`. The returned guard ends the span and
/// flushes what is left when it is finished (or dropped). Export is set up once per process:
/// a second call only starts another command span.
pub fn start(
    config: ExportConfig,
    command: &str,
    attributes: Vec<KeyValue>,
) -> Result<Command, TelemetryError> {
    install(config)?;
    Ok(Command::begin(command, attributes))
}

/// Turns export on for this process (once; later calls keep the first configuration), with no
/// command span: a server starts one per request it runs ([`Command::begin`]).
pub fn install(config: ExportConfig) -> Result<(), TelemetryError> {
    if ACTIVE.get().is_none() {
        let pipeline = export::Pipeline::build(config)?;
        // A lost race leaves the first pipeline in place; the other is shut down unused.
        if let Err(unused) = ACTIVE.set(pipeline) {
            unused.shutdown();
        }
    }
    Ok(())
}

/// The command span: ends it, then flushes every span still queued and reports what was lost.
#[must_use = "finish the command to flush its spans"]
pub struct Command {
    span: Option<Span>,
}

impl Command {
    /// Starts a root span named `name` (nothing when export is off): the parent of the spans
    /// that start where none is current, until it is finished. One at a time: a server runs one
    /// run at a time.
    pub fn begin(name: &str, attributes: Vec<KeyValue>) -> Command {
        if !enabled() {
            return Command { span: None };
        }
        let span = span::start_root(name, SpanKind::Internal, attributes);
        *ROOT.lock().unwrap_or_else(PoisonError::into_inner) = Some(span.context());
        Command { span: Some(span) }
    }

    /// The command's span (to add attributes, or to parent work explicitly).
    pub fn span(&self) -> Span {
        self.span.clone().unwrap_or_default()
    }

    /// Ends the command span and flushes (bounded by the export timeout); logs a warning when
    /// spans could not be delivered. The run's result does not depend on it.
    pub fn finish(mut self) -> Option<ExportReport> {
        self.close()
    }

    fn close(&mut self) -> Option<ExportReport> {
        let span = self.span.take()?;
        span.end();
        *ROOT.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let report = ACTIVE.get().map(export::Pipeline::flush);
        if let Some(report) = &report {
            report.warn();
        }
        report
    }
}

impl Drop for Command {
    fn drop(&mut self) {
        self.close();
    }
}

/// The W3C `traceparent` of the current span (the command's span where none is current), to
/// hand to a process or service assay calls; `None` when export is off.
pub fn current_traceparent() -> Option<String> {
    if !enabled() {
        return None;
    }
    span::traceparent_of(parent_context().span().span_context())
}

/// A count as an attribute value (saturating).
pub fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The parent a new span takes: the current context when it holds a span, else the command
/// span.
fn parent_context() -> Context {
    let current = Context::current();
    if current.has_active_span() {
        return current;
    }
    ROOT.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .unwrap_or(current)
}
