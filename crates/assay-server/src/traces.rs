//! The OTLP trace receiver (`POST /v1/traces`) and the check of what it received
//! (`GET /traces/check`).
//!
//! The receiver takes an `ExportTraceServiceRequest` as protobuf (`application/x-protobuf`) or
//! JSON (`application/json`), plain or gzip-compressed (`Content-Encoding: gzip`, the
//! OpenTelemetry exporters' usual setting, which the OTLP specification requires a server to
//! accept; tower-http inflates it, and the body limit holds for the inflated bytes), with the
//! admin bearer token (`ASSAY_ADMIN_TOKEN`; without the variable the server refuses traces:
//! 403 `traces_disabled`). It appends the retrieval spans to
//! `.assay/traces/received-<date>.jsonl` in the project, one span a line in assay's flat form,
//! under a lock so that concurrent requests never interleave a line, and answers as OTLP
//! does: an `ExportTraceServiceResponse` in the request's content type, whose
//! `partial_success` counts the retrieval spans it rejected (malformed) with the first
//! problems in `error_message`. Spans that are not retrieval spans are accepted and dropped.
//!
//! A span is stored once however often it is sent (an exporter retries a batch whose answer it
//! did not get): spans are told apart by trace id and span id, against every span the
//! `received-*.jsonl` files hold ([`ReceivedIndex`]: the files are the truth, read again
//! whenever one changed other than by this server's own appends, so a restart or a file
//! edited by hand is no different).
//!
//! `GET /traces/check` checks every received span against the project, as `assay traces
//! check .assay/traces/` does, and answers the report as JSON. It holds production users'
//! messages and state, so it needs the admin token as the receiver does.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use assay_core::tracecheck::{SpanPosition, TraceCheckReport, TraceProblem};
use assay_kbtools::kbedit::KbSession;
use assay_traces::check::{self, CheckSetup};
use assay_traces::read::{self, ReadOutcome};
use assay_traces::{AttrValue, RawSpan, extract};
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
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

/// The token check of both routes: 403 `traces_disabled` on a server started without the
/// admin token, else [`authorize`]'s 401 or 403.
fn authorize_traces(state: &AppState, headers: &HeaderMap, what: &str) -> Result<(), ApiError> {
    if state.admin_token().is_none() {
        return Err(ApiError::forbidden(
            "traces_disabled",
            format!(
                "{what} needs the admin token: start the server with {ASSAY_ADMIN_TOKEN} set and send `Authorization: Bearer <{ASSAY_ADMIN_TOKEN}>`"
            ),
        ));
    }
    authorize(state.admin_token(), headers)
}

/// `POST /v1/traces`.
pub async fn receive(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    authorize_traces(&state, &headers, "receiving traces")?;
    let encoding = encoding(&headers)?;
    // A gzip body that does not inflate fails here too.
    let body = body.map_err(|e| ApiError::body(&e))?;
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
    let mut lines: Vec<(SpanKey, String)> = Vec::new();
    for span in &raw {
        match extract(span) {
            Ok(Some(_)) => {
                let flat = span.to_flat(Some(
                    received_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                ));
                let line = serde_json::to_string(&flat)
                    .map_err(|e| ApiError::internal(format!("writing a span: {e}")))?;
                lines.push((SpanKey::of(&span.trace_id, &span.span_id), line));
            }
            Ok(None) => {}
            Err(p) => problems.push(p),
        }
    }
    if !lines.is_empty() {
        let dir = state.project_dir().join(TRACES_DIR);
        let path = received_file(
            state.project_dir(),
            &received_at.format("%Y-%m-%d").to_string(),
        );
        let index = state.traces_index();
        let stored = tokio::task::spawn_blocking(move || append_new(&dir, &path, lines, &index))
            .await
            .map_err(|e| ApiError::internal(format!("the request stopped unexpectedly: {e}")))?
            .map_err(|e| ApiError::from(assay_project::HarnessError::Infrastructure(e)))?;
        tracing::debug!(
            stored = stored.0,
            already = stored.1,
            "/v1/traces: retrieval spans stored (spans stored before are not stored again)"
        );
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

/// A span's identity: a 128-bit digest of its trace id and span id (lower-case hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanKey(u128);

impl SpanKey {
    /// The key of the span `span_id` of trace `trace_id`.
    pub fn of(trace_id: &str, span_id: &str) -> SpanKey {
        use sha2::{Digest as _, Sha256};
        let mut hash = Sha256::new();
        hash.update(trace_id.trim().to_ascii_lowercase().as_bytes());
        hash.update(b"/");
        hash.update(span_id.trim().to_ascii_lowercase().as_bytes());
        let d = hash.finalize();
        let mut first = [0u8; 16];
        first.copy_from_slice(&d[..16]);
        SpanKey(u128::from_le_bytes(first))
    }
}

/// The spans the `received-*.jsonl` files of `.assay/traces/` hold, by [`SpanKey`], and how
/// much of each file that is: what the receiver checks a span against before storing it.
/// The files are the truth: when one differs from what the index read (grown, shrunk, gone,
/// new) other than by the receiver's own appends, they are all read again.
#[derive(Debug, Default)]
pub struct ReceivedIndex {
    /// The folder the index was read from.
    dir: Option<PathBuf>,
    /// Each file's length as read.
    files: BTreeMap<PathBuf, u64>,
    /// The spans they hold.
    keys: HashSet<SpanKey>,
}

/// The id fields of a flat span line.
#[derive(serde::Deserialize)]
struct Ids {
    trace_id: String,
    span_id: String,
}

impl ReceivedIndex {
    /// The `received-*.jsonl` files of `dir` with their lengths.
    fn list(dir: &Path) -> Result<BTreeMap<PathBuf, u64>, String> {
        let mut files = BTreeMap::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        };
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with("received-") && name.ends_with(".jsonl")) {
                continue;
            }
            let meta = entry
                .metadata()
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
            if meta.is_file() {
                files.insert(entry.path(), meta.len());
            }
        }
        Ok(files)
    }

    /// Brings the index up to date with the files of `dir` (read again when they changed).
    pub fn refresh(&mut self, dir: &Path) -> Result<(), String> {
        let now = Self::list(dir)?;
        if self.dir.as_deref() == Some(dir) && now == self.files {
            return Ok(());
        }
        let mut keys = HashSet::new();
        let mut files = BTreeMap::new();
        for path in now.keys() {
            let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut reader = std::io::BufReader::new(file);
            let mut line = String::new();
            let mut read = 0u64;
            loop {
                line.clear();
                let n = reader
                    .read_line(&mut line)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                if n == 0 {
                    break;
                }
                read += n as u64;
                // A line that is not a span is the check's to report, not the index's.
                if let Ok(ids) = serde_json::from_str::<Ids>(line.trim_end()) {
                    keys.insert(SpanKey::of(&ids.trace_id, &ids.span_id));
                }
            }
            files.insert(path.clone(), read);
        }
        *self = ReceivedIndex {
            dir: Some(dir.to_owned()),
            files,
            keys,
        };
        Ok(())
    }

    /// Whether a span with this key is stored.
    pub fn contains(&self, key: SpanKey) -> bool {
        self.keys.contains(&key)
    }
}

/// Appends the lines of the spans not stored yet (in `dir`, by trace id and span id; a span
/// twice in the request is stored once) to `path` in one write, under the index's lock.
/// Returns how many lines were stored and how many were stored before.
fn append_new(
    dir: &Path,
    path: &Path,
    lines: Vec<(SpanKey, String)>,
    index: &Mutex<ReceivedIndex>,
) -> Result<(usize, usize), String> {
    let mut index = index.lock().unwrap_or_else(PoisonError::into_inner);
    index.refresh(dir)?;
    let mut text = String::new();
    let mut fresh = Vec::new();
    let mut already = 0;
    for (key, line) in lines {
        if index.contains(key) || fresh.contains(&key) {
            already += 1;
            continue;
        }
        fresh.push(key);
        text.push_str(&line);
        text.push('\n');
    }
    if fresh.is_empty() {
        return Ok((0, already));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let before = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // The index read the file up to `before` (or the file is new): it now holds these too.
    if index.files.get(path).copied().unwrap_or(0) == before {
        index
            .files
            .insert(path.to_owned(), before + text.len() as u64);
        index.keys.extend(fresh.iter().copied());
    } else {
        index.dir = None;
    }
    Ok((fresh.len(), already))
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
/// Needs the admin token: the spans hold production users' messages and state.
pub async fn check_received(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<axum::Json<TraceCheckReport>, ApiError> {
    authorize_traces(&state, &headers, "reading the checked traces")?;
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
                "summary": "OTLP/HTTP trace receiver: an ExportTraceServiceRequest as protobuf or JSON, plain or with Content-Encoding: gzip. Retrieval spans (gen_ai.operation.name = retrieval) are appended to .assay/traces/received-<date>.jsonl, each once however often it is sent (by trace id and span id); malformed ones are rejected in partialSuccess. Needs the admin token.",
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
                    "400": error("The body is not an ExportTraceServiceRequest (or not gzip where Content-Encoding says so)."),
                    "401": error("No bearer token."),
                    "403": error("A wrong token (code forbidden), or the server was started without ASSAY_ADMIN_TOKEN (code traces_disabled)."),
                    "413": error("The body, inflated, is larger than the server takes (2 MB)."),
                    "415": error("A Content-Type other than application/x-protobuf or application/json, or a Content-Encoding other than gzip."),
                    "500": error("The file of received spans cannot be written.")
                }
            }
        },
        "/traces/check": {
            "get": {
                "operationId": "checkTraces",
                "summary": "Every retrieval span received (.assay/traces/) checked against the project, as `assay traces check .assay/traces/` does: each span's disagreements, counts by kind and by entity. Needs the admin token (the spans hold users' messages and state).",
                "security": [{"adminToken": []}],
                "responses": {
                    "200": {"description": "The check (TraceCheckReport, version 1).", "content": {"application/json": {"schema": {"type": "object", "required": ["version", "checked", "by_kind", "by_entity", "spans", "problems"]}}}},
                    "401": error("No bearer token."),
                    "403": error("A wrong token (code forbidden), or the server was started without ASSAY_ADMIN_TOKEN (code traces_disabled)."),
                    "404": error("No span received yet."),
                    "422": error("The received files hold no retrieval span that can be read, or the project does not load."),
                    "500": error("An infrastructure error (the embedder, the store).")
                }
            }
        }
    })
}
