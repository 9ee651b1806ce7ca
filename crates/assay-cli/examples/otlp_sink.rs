//! A cheap OTLP/HTTP trace sink for the telemetry-overhead benchmark (`bench/telemetry/run.sh`):
//! it answers every export at once, so a run exporting to it measures what export costs assay,
//! not a collector. It runs on one thread (the benchmark's machine has two cores, shared with
//! the run it measures).
//!
//! - `POST /v1/traces`: reads the body, counts the request and its bytes (per content type:
//!   `application/x-protobuf` or `application/json`), answers `200` with an empty body (an
//!   empty `ExportTraceServiceResponse`, full success, in either encoding). With
//!   `--count-spans` it also decodes the body (protobuf with `opentelemetry-proto`, JSON with
//!   `serde_json`) and counts spans and span events; off by default, so that what the timed runs
//!   share the CPU with is a byte counter.
//! - `GET /stats`: `{"requests", "bytes", "protobuf_requests", "json_requests",
//!   "other_requests", "spans", "events", "failing_cases", "model_calls", "decode_errors",
//!   "count_spans"}` so far (the decoded counts stay 0 without `--count-spans`). `failing_cases`
//!   counts spans whose `assay.case.verdict` is `fail` or `error`; `model_calls` spans whose
//!   `gen_ai.operation.name` is `chat` or `embeddings`.
//!
//! ```sh
//! cargo run --release -p assay-cli --example otlp_sink -- --port 0 [--count-spans]
//! ```
//!
//! It prints its base URL `http://127.0.0.1:<port>` (for `OTEL_EXPORTER_OTLP_ENDPOINT`) on its
//! first line of stdout (`--port 0` picks a free port) and serves until killed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde_json::{Value, json};

#[derive(Default)]
struct Counters {
    count_spans: bool,
    requests: AtomicU64,
    bytes: AtomicU64,
    protobuf_requests: AtomicU64,
    json_requests: AtomicU64,
    other_requests: AtomicU64,
    spans: AtomicU64,
    events: AtomicU64,
    failing_cases: AtomicU64,
    model_calls: AtomicU64,
    decode_errors: AtomicU64,
}

/// What a request held.
#[derive(Default)]
struct Counted {
    spans: u64,
    events: u64,
    failing_cases: u64,
    model_calls: u64,
}

type Shared = Arc<Counters>;

/// Spans, span events, failing case spans and model-call spans of a protobuf
/// `ExportTraceServiceRequest`.
fn count_proto(body: &[u8]) -> Option<Counted> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    let request = ExportTraceServiceRequest::decode(body).ok()?;
    let mut c = Counted::default();
    for resource in &request.resource_spans {
        for scope in &resource.scope_spans {
            for span in &scope.spans {
                c.spans += 1;
                c.events += span.events.len() as u64;
                for kv in &span.attributes {
                    let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
                    let Some(Any::StringValue(value)) = value else {
                        continue;
                    };
                    match (kv.key.as_str(), value.as_str()) {
                        ("assay.case.verdict", "fail" | "error") => c.failing_cases += 1,
                        ("gen_ai.operation.name", "chat" | "embeddings") => c.model_calls += 1,
                        _ => {}
                    }
                }
            }
        }
    }
    Some(c)
}

/// Spans and span events of a JSON `ExportTraceServiceRequest`, by counting its `"spanId":`
/// keys (one a span: links, which also have one, are not made by assay) and `"timeUnixNano":`
/// keys (one an event: spans have `startTimeUnixNano`/`endTimeUnixNano`). A key inside a string
/// value is escaped (`\"spanId\":`) and does not count. Scanning, not parsing: a 2,048-span
/// batch is megabytes of JSON and the sink shares the CPU with the run. `None` when the body is
/// not a JSON object.
fn count_json(body: &[u8]) -> Option<Counted> {
    let start = body.iter().position(|b| !b.is_ascii_whitespace())?;
    if body[start] != b'{' {
        return None;
    }
    let count = |needle: &[u8]| body.windows(needle.len()).filter(|w| *w == needle).count() as u64;
    // `{"key": KEY, "value": {"stringValue": VALUE}}`, whitespace anywhere between the tokens
    // (the exporter may pretty-print): each key, then what follows it with the spaces dropped.
    let attribute = |key: &str, value: &str| {
        let needle = format!(r#""key":"{key}""#);
        let wanted = format!(r#","value":{{"stringValue":"{value}""#);
        let squeezed: Vec<u8> = body
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        squeezed
            .windows(needle.len())
            .enumerate()
            .filter(|(i, w)| {
                *w == needle.as_bytes()
                    && squeezed[i + needle.len()..].starts_with(wanted.as_bytes())
            })
            .count() as u64
    };
    Some(Counted {
        spans: count(br#""spanId":"#),
        events: count(br#""timeUnixNano":"#),
        failing_cases: attribute("assay.case.verdict", "fail")
            + attribute("assay.case.verdict", "error"),
        model_calls: attribute("gen_ai.operation.name", "chat")
            + attribute("gen_ai.operation.name", "embeddings"),
    })
}

async fn traces(
    State(counters): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(&'static str, &'static str); 1], &'static str) {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let json = content_type.starts_with("application/json");
    let protobuf = content_type.starts_with("application/x-protobuf");
    counters.requests.fetch_add(1, Ordering::Relaxed);
    counters
        .bytes
        .fetch_add(body.len() as u64, Ordering::Relaxed);
    let kind = if json {
        &counters.json_requests
    } else if protobuf {
        &counters.protobuf_requests
    } else {
        &counters.other_requests
    };
    kind.fetch_add(1, Ordering::Relaxed);
    if counters.count_spans {
        let counted = if json {
            count_json(&body)
        } else {
            count_proto(&body)
        };
        match counted {
            Some(c) => {
                counters.spans.fetch_add(c.spans, Ordering::Relaxed);
                counters.events.fetch_add(c.events, Ordering::Relaxed);
                counters
                    .failing_cases
                    .fetch_add(c.failing_cases, Ordering::Relaxed);
                counters
                    .model_calls
                    .fetch_add(c.model_calls, Ordering::Relaxed);
            }
            None => {
                counters.decode_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    // An empty ExportTraceServiceResponse: zero bytes in protobuf, `{}` in JSON.
    if json {
        (StatusCode::OK, [("content-type", "application/json")], "{}")
    } else {
        (
            StatusCode::OK,
            [("content-type", "application/x-protobuf")],
            "",
        )
    }
}

async fn stats(State(counters): State<Shared>) -> Json<Value> {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    Json(json!({
        "requests": get(&counters.requests),
        "bytes": get(&counters.bytes),
        "protobuf_requests": get(&counters.protobuf_requests),
        "json_requests": get(&counters.json_requests),
        "other_requests": get(&counters.other_requests),
        "spans": get(&counters.spans),
        "events": get(&counters.events),
        "failing_cases": get(&counters.failing_cases),
        "model_calls": get(&counters.model_calls),
        "decode_errors": get(&counters.decode_errors),
        "count_spans": counters.count_spans,
    }))
}

fn parse_args() -> Result<(u16, bool), String> {
    let mut args = std::env::args().skip(1);
    let (mut port, mut count_spans) = (0u16, false);
    while let Some(arg) = args.next() {
        let value = if arg == "--count-spans" {
            count_spans = true;
            continue;
        } else if arg == "--port" {
            args.next().ok_or("--port needs a value")?
        } else if let Some(v) = arg.strip_prefix("--port=") {
            v.to_owned()
        } else {
            return Err(format!(
                "unknown argument `{arg}` (usage: --port N [--count-spans])"
            ));
        };
        port = value.parse().map_err(|_| format!("bad port `{value}`"))?;
    }
    Ok((port, count_spans))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (port, count_spans) = parse_args()?;
    let counters: Shared = Arc::new(Counters {
        count_spans,
        ..Counters::default()
    });
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .route("/stats", get(stats))
        // A batch of 2,048 spans in JSON is several MB: no body limit.
        .layer(DefaultBodyLimit::disable())
        .with_state(counters);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    let addr = listener.local_addr()?;
    println!("http://{addr}");
    // The URL must reach a reader through a pipe at once.
    use std::io::Write as _;
    std::io::stdout().flush()?;
    axum::serve(listener, app).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::trace::v1::span::Event;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

    fn tuple(c: Option<Counted>) -> Option<(u64, u64, u64, u64)> {
        c.map(|c| (c.spans, c.events, c.failing_cases, c.model_calls))
    }

    #[test]
    fn counts_spans_events_failing_cases_and_model_calls_in_both_encodings() {
        let attribute = |key: &str, value: &str| KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.to_owned())),
            }),
            ..KeyValue::default()
        };
        let span = |events: usize, attributes: Vec<KeyValue>| Span {
            events: vec![Event::default(); events],
            attributes,
            ..Span::default()
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![
                        span(1, vec![attribute("assay.case.verdict", "fail")]),
                        span(0, vec![attribute("assay.case.verdict", "pass")]),
                        span(2, vec![attribute("gen_ai.operation.name", "chat")]),
                        span(0, vec![attribute("gen_ai.operation.name", "retrieval")]),
                    ],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        assert_eq!(
            tuple(count_proto(&request.encode_to_vec())),
            Some((4, 3, 1, 1))
        );
        let body = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[
            {"spanId":"01","parentSpanId":"02","startTimeUnixNano":"1",
             "attributes":[{"key":"assay.case.verdict","value":{"stringValue":"error"}}],
             "events":[{"timeUnixNano":"2","name":"x \"spanId\": y"}]},
            {"spanId":"03","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"embeddings"}}],"events":[]}]}]}]}"#;
        assert_eq!(tuple(count_json(body)), Some((2, 1, 1, 1)));
        let pretty = br#"{"resourceSpans": [{"scopeSpans": [{"spans": [
            {"spanId": "01", "attributes": [
              {"key": "assay.case.verdict", "value": {"stringValue": "fail"}},
              {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]}]}]}]}"#;
        assert_eq!(tuple(count_json(pretty)), Some((1, 0, 1, 1)));
        assert!(count_json(b"not json").is_none());
    }
}
