//! A local OTLP/HTTP collector for the telemetry tests: it decodes what it receives
//! (protobuf or JSON) into the same spans the real backends' support reads back
//! (`otel_backends::Span`), and can be told to refuse.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message;
use serde_json::{Map, Value};

use crate::otel_backends::{Event, Span};

/// What the sink answers and what it saw.
#[derive(Default)]
struct Inner {
    refuse: Option<u16>,
    spans: Vec<Span>,
    content_types: Vec<String>,
    headers: Vec<HeaderMap>,
}

/// A running collector.
pub struct Sink {
    /// Its base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: String,
    inner: Arc<Mutex<Inner>>,
}

impl Sink {
    /// Starts one that accepts everything.
    pub fn start() -> Sink {
        Sink::with(None)
    }

    /// Starts one that answers every export with `status`.
    pub fn refusing(status: u16) -> Sink {
        Sink::with(Some(status))
    }

    fn with(refuse: Option<u16>) -> Sink {
        let inner = Arc::new(Mutex::new(Inner {
            refuse,
            ..Inner::default()
        }));
        let app = axum::Router::new()
            .route("/v1/traces", post(receive))
            .with_state(Arc::clone(&inner));
        Sink {
            endpoint: crate::support::serve(app),
            inner,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.inner.lock().unwrap().spans.clone()
    }

    /// The content type of every request.
    pub fn content_types(&self) -> Vec<String> {
        self.inner.lock().unwrap().content_types.clone()
    }

    /// The headers of every request.
    pub fn headers(&self) -> Vec<HeaderMap> {
        self.inner.lock().unwrap().headers.clone()
    }
}

async fn receive(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut inner = inner.lock().unwrap();
    inner.content_types.push(content_type.clone());
    inner.headers.push(headers);
    if let Some(status) = inner.refuse {
        return (StatusCode::from_u16(status).unwrap(), "refused");
    }
    let spans = if content_type.starts_with("application/json") {
        from_json(&serde_json::from_slice(&body).expect("OTLP JSON"))
    } else {
        from_proto(&ExportTraceServiceRequest::decode(body).expect("OTLP protobuf"))
    };
    inner.spans.extend(spans);
    (StatusCode::OK, "")
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn any(value: &AnyValue) -> Value {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => Value::String(s.clone()),
        Some(any_value::Value::BoolValue(b)) => Value::Bool(*b),
        Some(any_value::Value::IntValue(i)) => Value::from(*i),
        Some(any_value::Value::DoubleValue(d)) => Value::from(*d),
        Some(any_value::Value::ArrayValue(a)) => Value::Array(a.values.iter().map(any).collect()),
        Some(any_value::Value::KvlistValue(kv)) => Value::Object(
            kv.values
                .iter()
                .map(|k| (k.key.clone(), k.value.as_ref().map_or(Value::Null, any)))
                .collect(),
        ),
        Some(any_value::Value::BytesValue(b)) => Value::String(hex(b)),
        _ => Value::Null,
    }
}

fn from_proto(request: &ExportTraceServiceRequest) -> Vec<Span> {
    let mut out = Vec::new();
    for rs in &request.resource_spans {
        for ss in &rs.scope_spans {
            for s in &ss.spans {
                let attrs = |kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue]| {
                    kvs.iter()
                        .map(|k| (k.key.clone(), k.value.as_ref().map_or(Value::Null, any)))
                        .collect::<Map<String, Value>>()
                };
                out.push(Span {
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent_span_id: (!s.parent_span_id.is_empty()).then(|| hex(&s.parent_span_id)),
                    name: s.name.clone(),
                    status: match s.status.as_ref().map_or(0, |st| st.code) {
                        1 => "OK",
                        2 => "ERROR",
                        _ => "UNSET",
                    }
                    .to_owned(),
                    project: String::new(),
                    attributes: attrs(&s.attributes),
                    events: s
                        .events
                        .iter()
                        .map(|e| Event {
                            name: e.name.clone(),
                            attributes: attrs(&e.attributes),
                        })
                        .collect(),
                });
            }
        }
    }
    out
}

fn json_any(value: &Value) -> Value {
    let Some(map) = value.as_object() else {
        return Value::Null;
    };
    if let Some(s) = map.get("stringValue") {
        return s.clone();
    }
    if let Some(b) = map.get("boolValue") {
        return b.clone();
    }
    if let Some(i) = map.get("intValue") {
        // The JSON mapping may write 64-bit integers as strings.
        return match i {
            Value::String(s) => Value::from(s.parse::<i64>().expect("intValue")),
            other => other.clone(),
        };
    }
    if let Some(d) = map.get("doubleValue") {
        return d.clone();
    }
    if let Some(a) = map.get("arrayValue") {
        return Value::Array(
            a["values"]
                .as_array()
                .map(|v| v.iter().map(json_any).collect())
                .unwrap_or_default(),
        );
    }
    Value::Null
}

fn json_attrs(list: &Value) -> Map<String, Value> {
    list.as_array()
        .map(|a| {
            a.iter()
                .map(|kv| {
                    (
                        kv["key"].as_str().unwrap().to_owned(),
                        json_any(&kv["value"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn from_json(request: &Value) -> Vec<Span> {
    let mut out = Vec::new();
    for rs in request["resourceSpans"].as_array().unwrap() {
        for ss in rs["scopeSpans"].as_array().unwrap() {
            for s in ss["spans"].as_array().unwrap() {
                let parent = s["parentSpanId"].as_str().unwrap_or_default();
                out.push(Span {
                    trace_id: s["traceId"].as_str().unwrap().to_lowercase(),
                    span_id: s["spanId"].as_str().unwrap().to_lowercase(),
                    parent_span_id: (!parent.is_empty()).then(|| parent.to_lowercase()),
                    name: s["name"].as_str().unwrap().to_owned(),
                    status: match s["status"]["code"].as_u64().unwrap_or(0) {
                        1 => "OK",
                        2 => "ERROR",
                        _ => "UNSET",
                    }
                    .to_owned(),
                    project: String::new(),
                    attributes: json_attrs(&s["attributes"]),
                    events: s["events"]
                        .as_array()
                        .map(|es| {
                            es.iter()
                                .map(|e| Event {
                                    name: e["name"].as_str().unwrap().to_owned(),
                                    attributes: json_attrs(&e["attributes"]),
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                });
            }
        }
    }
    out
}
