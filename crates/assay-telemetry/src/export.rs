//! The tracer provider of assay's own: a batch processor over the OTLP/HTTP exporter, wrapped so
//! that a failed export is counted and warned about, never raised.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor,
};

use crate::{ExportConfig, Protocol, TelemetryError};

/// Spans queued for export (`OTEL_BSP_MAX_QUEUE_SIZE` overrides it); beyond that new spans are
/// dropped and counted. The queue is allocated whole when export starts (about 370 bytes a
/// slot), so it is sized for the exporter to keep up with a large run on a free core, not to
/// hold a whole 100,000-case run: bench/telemetry measured 262,144 slots costing 70 ms and 94 MB
/// at every start, and 16,384 losing no span of a 100,000-case run.
pub const DEFAULT_QUEUE: usize = 32_768;
/// Spans per OTLP request.
const BATCH: usize = 2048;

/// The provider, its tracer and the delivery counts.
pub(crate) struct Pipeline {
    pub(crate) config: ExportConfig,
    provider: SdkTracerProvider,
    pub(crate) tracer: SdkTracer,
    /// The provider's batch processor, for spans handed over finished
    /// ([`crate::CaseSpans::finish`]).
    pub(crate) processor: Shared,
    /// The tracer's instrumentation scope, for those spans.
    pub(crate) scope: InstrumentationScope,
    pub(crate) stats: Arc<Stats>,
}

/// The batch processor, shared between the tracer provider and [`Pipeline::processor`].
#[derive(Debug, Clone)]
pub(crate) struct Shared(Arc<BatchSpanProcessor>);

impl SpanProcessor for Shared {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        self.0.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    /// The resource was set before the processor was shared (it is the provider's).
    fn set_resource(&mut self, _resource: &Resource) {}
}

/// Delivery counts, shared by the exporter wrapper and the spans.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Spans ended (handed to the processor).
    pub(crate) ended: AtomicU64,
    /// Spans the backend accepted.
    pub(crate) exported: AtomicU64,
    /// Spans in batches the backend refused or never got.
    pub(crate) failed: AtomicU64,
    /// Failed export requests.
    pub(crate) failed_requests: AtomicU64,
    /// Passing cases whose spans the sampler dropped unmade.
    pub(crate) sampled_out: AtomicU64,
    warned: AtomicBool,
    first_error: Mutex<Option<String>>,
}

/// What became of the spans, at a flush.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportReport {
    /// Where they went.
    pub traces_url: String,
    /// Spans ended so far.
    pub ended: u64,
    /// Spans the backend accepted.
    pub exported: u64,
    /// Spans lost to failed requests.
    pub failed: u64,
    /// Failed requests.
    pub failed_requests: u64,
    /// Spans never confirmed: dropped when the queue was full, or still being sent when the
    /// flush stopped waiting.
    pub unconfirmed: u64,
    /// The first failure's reason.
    pub first_error: Option<String>,
    /// Passing cases whose spans the sampler dropped.
    pub sampled_out: u64,
}

impl ExportReport {
    /// Logs a warning when spans were lost (the first failure was already warned about as it
    /// happened; this is the count).
    pub fn warn(&self) {
        if self.failed > 0 || self.unconfirmed > 0 {
            tracing::warn!(
                "telemetry: {} of {} spans did not reach {} ({} failed request(s){}{}); the run's results are unaffected",
                self.failed + self.unconfirmed,
                self.ended,
                self.traces_url,
                self.failed_requests,
                if self.unconfirmed > 0 {
                    format!(
                        ", {} not confirmed: dropped with the queue full, or still being sent when assay stopped waiting",
                        self.unconfirmed
                    )
                } else {
                    String::new()
                },
                self.first_error
                    .as_deref()
                    .map(|e| format!("; first error: {e}"))
                    .unwrap_or_default(),
            );
        } else {
            tracing::debug!(
                "telemetry: {} spans exported to {}{}",
                self.exported,
                self.traces_url,
                if self.sampled_out > 0 {
                    format!(
                        "; {} passing cases not sampled (OTEL_TRACES_SAMPLER)",
                        self.sampled_out
                    )
                } else {
                    String::new()
                }
            );
        }
    }
}

impl Pipeline {
    pub(crate) fn build(config: ExportConfig) -> Result<Pipeline, TelemetryError> {
        let stats = Arc::new(Stats::default());
        crate::tls::ensure_provider();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(match config.protocol {
                Protocol::HttpProtobuf => opentelemetry_otlp::Protocol::HttpBinary,
                Protocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
            })
            .with_endpoint(config.traces_url.clone())
            .with_timeout(config.timeout)
            .with_headers(config.headers.clone().into_iter().collect())
            .build()
            .map_err(|e| TelemetryError::Build(e.to_string()))?;
        let exporter = Counting {
            inner: exporter,
            stats: Arc::clone(&stats),
            traces_url: config.traces_url.clone(),
        };
        let mut processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_max_queue_size(config.queue_size)
                    .with_max_export_batch_size(BATCH)
                    .with_scheduled_delay(Duration::from_millis(500))
                    .build(),
            )
            .build();
        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .with_attributes([KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))])
            .build();
        processor.set_resource(&resource);
        let processor = Shared(Arc::new(processor));
        // assay samples itself (passing deterministic cases only, see `CaseSpans`): the SDK's
        // own reading of OTEL_TRACES_SAMPLER would drop a whole run's trace, evidence and all.
        let provider = SdkTracerProvider::builder()
            .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOn)
            .with_span_processor(processor.clone())
            .with_resource(resource)
            .build();
        let scope = InstrumentationScope::builder("assay").build();
        let tracer = provider.tracer_with_scope(scope.clone());
        tracing::debug!(
            "telemetry: exporting spans to {} ({}, from {})",
            config.traces_url,
            config.protocol,
            config.source
        );
        Ok(Pipeline {
            config,
            provider,
            tracer,
            processor,
            scope,
            stats,
        })
    }

    /// Sends every queued span and counts. Waits until every ended span is accounted for
    /// (accepted or refused) or the export timeout has passed: the processor gives up on a
    /// flush after 5 s of its own, which a slow backend's first answer can take.
    pub(crate) fn flush(&self) -> ExportReport {
        let deadline = std::time::Instant::now() + self.config.timeout;
        loop {
            if let Err(e) = self.provider.force_flush() {
                tracing::debug!("telemetry: flush: {e}");
            }
            let s = &self.stats;
            let settled = s.exported.load(Ordering::Relaxed) + s.failed.load(Ordering::Relaxed)
                >= s.ended.load(Ordering::Relaxed);
            if settled || std::time::Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let s = &self.stats;
        let ended = s.ended.load(Ordering::Relaxed);
        let exported = s.exported.load(Ordering::Relaxed);
        let failed = s.failed.load(Ordering::Relaxed);
        ExportReport {
            traces_url: self.config.traces_url.clone(),
            ended,
            exported,
            failed,
            failed_requests: s.failed_requests.load(Ordering::Relaxed),
            unconfirmed: ended.saturating_sub(exported + failed),
            sampled_out: s.sampled_out.load(Ordering::Relaxed),
            first_error: s
                .first_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    pub(crate) fn shutdown(&self) {
        let _ = self.provider.shutdown_with_timeout(self.config.timeout);
    }
}

/// The OTLP exporter, counting what it delivers and warning once when a request fails. Its
/// result still goes to the processor (which only logs it at debug level).
#[derive(Debug)]
struct Counting<E> {
    inner: E,
    stats: Arc<Stats>,
    traces_url: String,
}

impl<E: SpanExporter> SpanExporter for Counting<E> {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        let n = batch.len() as u64;
        let stats = Arc::clone(&self.stats);
        let url = self.traces_url.clone();
        let sent = self.inner.export(batch);
        async move {
            let result = sent.await;
            match &result {
                Ok(()) => {
                    stats.exported.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => {
                    stats.failed.fetch_add(n, Ordering::Relaxed);
                    stats.failed_requests.fetch_add(1, Ordering::Relaxed);
                    let reason = e.to_string();
                    stats
                        .first_error
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get_or_insert_with(|| reason.clone());
                    if !stats.warned.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "telemetry: cannot export {n} spans to {url}: {reason}; the run goes on (spans may be lost)"
                        );
                    }
                }
            }
            result
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
