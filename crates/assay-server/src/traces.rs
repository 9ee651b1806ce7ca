//! The OTLP trace receiver (`POST /v1/traces`) and the check of what it received
//! (`GET /traces/check`).
//!
//! The receiver takes an `ExportTraceServiceRequest` as protobuf (`application/x-protobuf`) or
//! JSON (`application/json`), with the admin bearer token (`ASSAY_ADMIN_TOKEN`; without the
//! variable the server refuses traces: 403 `traces_disabled`). It appends the retrieval spans
//! to `.assay/traces/received-<date>.jsonl` in the project, one span a line in assay's flat
//! form, under a lock so that concurrent requests never interleave a line, and answers as OTLP
//! does: an `ExportTraceServiceResponse` in the request's content type, whose
//! `partial_success` counts the retrieval spans it rejected (malformed) with the first
//! problems in `error_message`. Spans that are not retrieval spans are accepted and dropped.
//! `GET /traces/check` checks every received span against the project, as `assay traces
//! check .assay/traces/` does, and answers the report as JSON.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use assay_core::tracecheck::{SpanPosition, TraceCheckReport, TraceProblem};
use assay_harness::kbedit::KbSession;
use assay_harness::traces::check::{self, CheckSetup};
use assay_harness::traces::read::{self, ReadOutcome};
use assay_harness::traces::{AttrValue, RawSpan, extract};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header::CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;

use crate::AppState;
use crate::auth::{ASSAY_ADMIN_TOKEN, authorize};
use crate::error::ApiError;

/// The folder, under the project, that received spans are appended to.
pub const TRACES_DIR: &str = ".assay/traces";

/// The file received spans go to on `date` (`YYYY-MM-DD`, UTC).
pub fn received_file(project: &Path, date: &str) -> PathBuf {
    project
        .join(TRACES_DIR)
        .join(format!("received-{date}.jsonl"))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

fn encoding(headers: &HeaderMap) -> Result<Encoding, ApiError> {
    let given = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match given.as_str() {
        "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
        "application/json" => Ok(Encoding::Json),
        other => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "Content-Type `{other}`: OTLP traces are `application/x-protobuf` or `application/json`"
            ),
        )),
    }
}

/// `POST /v1/traces`.
pub async fn receive(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    if state.admin_token().is_none() {
        return Err(ApiError::forbidden(
            "traces_disabled",
            format!(
                "receiving traces needs the admin token: start the server with {ASSAY_ADMIN_TOKEN} set and send `Authorization: Bearer <{ASSAY_ADMIN_TOKEN}>`"
            ),
        ));
    }
    authorize(state.admin_token(), &headers)?;
    let encoding = encoding(&headers)?;
    let at = SpanPosition {
        file: "request".into(),
        line: None,
        path: String::new(),
    };
    let mut problems = Vec::new();
    let raw = match encoding {
        Encoding::Protobuf => {
            let request = ExportTraceServiceRequest::decode(body.as_ref()).map_err(|e| {
                ApiError::bad_request(format!("not an OTLP ExportTraceServiceRequest: {e}"))
            })?;
            from_proto(&request, &at, &mut problems)
        }
        Encoding::Json => {
            let value: serde_json::Value = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("not valid JSON: {e}")))?;
            if value.get("resourceSpans").is_none() {
                return Err(ApiError::bad_request(
                    "expected an OTLP ExportTraceServiceRequest: {\"resourceSpans\": [...]}",
                ));
            }
            read::spans_of(&value, &at, &mut problems)
        }
    };
    let received_at = chrono::Utc::now();
    let mut lines = String::new();
    for span in &raw {
        match extract(span) {
            Ok(Some(_)) => {
                let flat = span.to_flat(Some(
                    received_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                ));
                let line = serde_json::to_string(&flat)
                    .map_err(|e| ApiError::internal(format!("writing a span: {e}")))?;
                lines.push_str(&line);
                lines.push('\n');
            }
            Ok(None) => {}
            Err(p) => problems.push(p),
        }
    }
    if !lines.is_empty() {
        let path = received_file(
            state.project_dir(),
            &received_at.format("%Y-%m-%d").to_string(),
        );
        let lock = state.traces_lock();
        tokio::task::spawn_blocking(move || append(&path, &lines, &lock))
            .await
            .map_err(|e| ApiError::internal(format!("the request stopped unexpectedly: {e}")))?
            .map_err(|e| ApiError::from(assay_harness::HarnessError::Infrastructure(e)))?;
    }
    let partial = (!problems.is_empty()).then(|| ExportTracePartialSuccess {
        rejected_spans: i64::try_from(problems.len()).unwrap_or(i64::MAX),
        error_message: message(&problems),
    });
    for p in &problems {
        tracing::warn!("/v1/traces: rejected {p}");
    }
    Ok(respond(encoding, partial))
}

fn message(problems: &[TraceProblem]) -> String {
    let mut text = problems
        .iter()
        .take(5)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if problems.len() > 5 {
        text.push_str(&format!("; and {} more", problems.len() - 5));
    }
    text
}

/// Appends whole lines under the lock: one write of every line of the request.
fn append(path: &Path, lines: &str, lock: &std::sync::Mutex<()>) -> Result<(), String> {
    let _guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(lines.as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn respond(encoding: Encoding, partial: Option<ExportTracePartialSuccess>) -> Response {
    match encoding {
        Encoding::Protobuf => {
            let body = ExportTraceServiceResponse {
                partial_success: partial,
            }
            .encode_to_vec();
            ([(CONTENT_TYPE, "application/x-protobuf")], body).into_response()
        }
        Encoding::Json => {
            let body = match partial {
                Some(p) => serde_json::json!({"partialSuccess": {
                    "rejectedSpans": p.rejected_spans.to_string(),
                    "errorMessage": p.error_message,
                }}),
                None => serde_json::json!({}),
            };
            ([(CONTENT_TYPE, "application/json")], body.to_string()).into_response()
        }
    }
}

/// The spans of a protobuf request, as read from JSON (hex ids, the same positions).
pub fn from_proto(
    request: &ExportTraceServiceRequest,
    at: &SpanPosition,
    problems: &mut Vec<TraceProblem>,
) -> Vec<RawSpan> {
    let mut out = Vec::new();
    for (r, resource) in request.resource_spans.iter().enumerate() {
        let service_name = resource.resource.as_ref().and_then(|res| {
            res.attributes
                .iter()
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| match attr(kv) {
                    AttrValue::Str(s) => Some(s),
                    _ => None,
                })
        });
        for (s, scope) in resource.scope_spans.iter().enumerate() {
            for (i, span) in scope.spans.iter().enumerate() {
                let position = SpanPosition {
                    path: format!("resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"),
                    ..at.clone()
                };
                if span.trace_id.is_empty() || span.span_id.is_empty() {
                    problems.push(TraceProblem {
                        position,
                        attribute: None,
                        message: "a span without `traceId` or `spanId`: skipped".into(),
                    });
                    continue;
                }
                out.push(RawSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex(&span.parent_span_id)),
                    name: span.name.clone(),
                    start_time_unix_nano: (span.start_time_unix_nano > 0)
                        .then_some(span.start_time_unix_nano),
                    service_name: service_name.clone(),
                    position,
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), attr(kv)))
                        .collect(),
                });
            }
        }
    }
    out
}

/// Bytes as lower-case hex (OTLP JSON's ids).
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

fn attr(kv: &KeyValue) -> AttrValue {
    kv.value
        .as_ref()
        .map_or(AttrValue::Other(String::new()), any)
}

fn any(v: &AnyValue) -> AttrValue {
    match &v.value {
        Some(any_value::Value::StringValue(s)) => AttrValue::Str(s.clone()),
        Some(any_value::Value::BoolValue(b)) => AttrValue::Bool(*b),
        Some(any_value::Value::IntValue(i)) => AttrValue::Int(*i),
        Some(any_value::Value::DoubleValue(d)) => AttrValue::Double(*d),
        Some(any_value::Value::ArrayValue(a)) => {
            AttrValue::Array(a.values.iter().map(any).collect())
        }
        Some(any_value::Value::KvlistValue(kv)) => AttrValue::KvList(
            kv.values
                .iter()
                .map(|kv| (kv.key.clone(), attr(kv)))
                .collect(),
        ),
        Some(any_value::Value::BytesValue(b)) => AttrValue::Other(hex(b)),
        Some(any_value::Value::StringValueStrindex(_)) | None => AttrValue::Other(String::new()),
    }
}

/// `GET /traces/check`: every span received (`.assay/traces/`) checked against the project.
pub async fn check_received(
    State(state): State<AppState>,
) -> Result<axum::Json<TraceCheckReport>, ApiError> {
    let dir = state.project_dir().to_owned();
    let env = state.env();
    let lock = state.kb_lock();
    tokio::task::spawn_blocking(move || {
        let folder = dir.join(TRACES_DIR);
        if !folder.is_dir() {
            return Err(ApiError::not_found(format!(
                "no traces received yet ({TRACES_DIR}/ does not exist): send them to POST /v1/traces"
            )));
        }
        let read: ReadOutcome = read::read_paths(&[folder])?;
        if let Some(why) = read.refusal() {
            return Err(ApiError::invalid(None, why));
        }
        let _guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let session = KbSession::open(&dir)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ApiError::internal(format!("cannot start a runtime: {e}")))?;
        let lookup = |name: &str| env(name);
        let report = runtime.block_on(check::check_spans(
            &session.project,
            &session.store,
            &CheckSetup::default(),
            &lookup,
            read,
        ))?;
        Ok(axum::Json(report))
    })
    .await
    .map_err(|e| ApiError::internal(format!("the request stopped unexpectedly: {e}")))?
}

/// The OpenAPI paths of the receiver and the check.
pub fn openapi_paths() -> serde_json::Value {
    let error = |description: &str| {
        serde_json::json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        })
    };
    let otlp_response = serde_json::json!({
        "type": "object",
        "description": "OTLP's ExportTraceServiceResponse: empty when every retrieval span was taken, else partialSuccess with rejectedSpans and errorMessage (the first problems, each with its position and attribute).",
        "properties": {"partialSuccess": {"type": "object", "properties": {
            "rejectedSpans": {"type": "string"}, "errorMessage": {"type": "string"}
        }}}
    });
    serde_json::json!({
        "/v1/traces": {
            "post": {
                "operationId": "receiveTraces",
                "summary": "OTLP/HTTP trace receiver: an ExportTraceServiceRequest as protobuf or JSON. Retrieval spans (gen_ai.operation.name = retrieval) are appended to .assay/traces/received-<date>.jsonl; malformed ones are rejected in partialSuccess. Needs the admin token.",
                "security": [{"adminToken": []}],
                "requestBody": {"required": true, "content": {
                    "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                    "application/json": {"schema": {"type": "object", "required": ["resourceSpans"]}}
                }},
                "responses": {
                    "200": {"description": "Taken (see partialSuccess for rejected spans), in the request's content type.", "content": {
                        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                        "application/json": {"schema": otlp_response}
                    }},
                    "400": error("The body is not an ExportTraceServiceRequest."),
                    "401": error("No bearer token."),
                    "403": error("A wrong token (code forbidden), or the server was started without ASSAY_ADMIN_TOKEN (code traces_disabled)."),
                    "415": error("A Content-Type other than application/x-protobuf or application/json."),
                    "500": error("The file of received spans cannot be written.")
                }
            }
        },
        "/traces/check": {
            "get": {
                "operationId": "checkTraces",
                "summary": "Every retrieval span received (.assay/traces/) checked against the project, as `assay traces check .assay/traces/` does: each span's disagreements, counts by kind and by entity.",
                "responses": {
                    "200": {"description": "The check (TraceCheckReport, version 1).", "content": {"application/json": {"schema": {"type": "object", "required": ["version", "checked", "by_kind", "by_entity", "spans", "problems"]}}}},
                    "404": error("No span received yet."),
                    "422": error("The received files hold no retrieval span that can be read, or the project does not load."),
                    "500": error("An infrastructure error (the embedder, the store).")
                }
            }
        }
    })
}
