//! The OTLP receiver (`POST /v1/traces`): protobuf and JSON, the token, the spans written, and
//! `GET /traces/check` over them.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::Server;

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

fn proto_request() -> Vec<u8> {
    let span = |id: u8, attributes: Vec<KeyValue>| Span {
        trace_id: vec![0xab; 16],
        span_id: vec![id; 8],
        name: "retrieve".into(),
        attributes,
        ..Span::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![
                    span(
                        1,
                        vec![
                            kv("gen_ai.operation.name", "retrieval"),
                            kv("gen_ai.retrieval.query.text", "i want to end it"),
                            kv(
                                "gen_ai.retrieval.documents",
                                r#"[{"id": "handler_crisis", "score": 1.0}]"#,
                            ),
                        ],
                    ),
                    span(2, vec![kv("gen_ai.operation.name", "chat")]),
                ],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
    .encode_to_vec()
}

fn json_request() -> String {
    json!({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "cd01", "spanId": "01", "name": "retrieve", "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "retrieval"}},
            {"key": "gen_ai.retrieval.query.text", "value": {"stringValue": "he keeps baiting me"}},
            {"key": "gen_ai.retrieval.documents", "value": {"stringValue": "[{\"id\": \"gray_rock\"}]"}}]},
        {"traceId": "cd01", "spanId": "02", "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "retrieval"}},
            {"key": "gen_ai.retrieval.query.text", "value": {"stringValue": "x"}},
            {"key": "gen_ai.retrieval.documents", "value": {"stringValue": "{oops"}}]}
    ]}]}]})
    .to_string()
}

async fn post(
    server: &Server,
    content_type: &str,
    token: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, String, Vec<u8>) {
    let mut req = Request::builder()
        .method(Method::POST)
        .uri("/v1/traces")
        .header("content-type", content_type);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let response = server
        .app
        .clone()
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (
        status,
        kind,
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
}

fn received(server: &Server) -> Vec<Value> {
    let dir = server.root.join(".assay/traces");
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        lines.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    lines
}

#[tokio::test]
async fn traces_are_received_as_protobuf_and_json_and_checked() {
    let server = Server::with_env(&[("ASSAY_ADMIN_TOKEN", "s3cret")]);
    let (status, _, _) = post(&server, "application/x-protobuf", None, proto_request()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = post(
        &server,
        "application/x-protobuf",
        Some("wrong"),
        proto_request(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = post(&server, "text/plain", Some("s3cret"), b"hi".to_vec()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (status, _, _) = post(
        &server,
        "application/x-protobuf",
        Some("s3cret"),
        b"\xff\xff".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (status, kind, body) = post(
        &server,
        "application/x-protobuf",
        Some("s3cret"),
        proto_request(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kind, "application/x-protobuf");
    let answer = ExportTraceServiceResponse::decode(body.as_slice()).unwrap();
    assert_eq!(answer.partial_success, None);

    let (status, kind, body) = post(
        &server,
        "application/json",
        Some("s3cret"),
        json_request().into_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kind, "application/json");
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["partialSuccess"]["rejectedSpans"], "1");
    let message = answer["partialSuccess"]["errorMessage"].as_str().unwrap();
    assert!(
        message.contains("resourceSpans[0].scopeSpans[0].spans[1]")
            && message.contains("gen_ai.retrieval.documents"),
        "{message}"
    );

    // Only the retrieval spans, one a line, in the flat form.
    let lines = received(&server);
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["span_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["0101010101010101", "01"]);
    assert_eq!(lines[0]["trace_id"], "abababababababababababababababab");
    assert_eq!(
        lines[0]["attributes"]["gen_ai.retrieval.query.text"],
        "i want to end it"
    );
    assert!(lines[0]["received_at"].is_string());

    let (status, report) = server.get("/traces/check").await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["checked"], 2, "{report:#}");
    let crisis = &report["spans"][0];
    // Production loaded the crisis handler, so no crisis disagreement; the rest of the
    // context is missing.
    assert!(
        crisis["disagreements"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["kind"] != "crisis_unhandled"),
        "{crisis:#}"
    );
}

#[tokio::test]
async fn without_the_admin_token_traces_are_refused() {
    let server = Server::example();
    let (status, _, body) = post(
        &server,
        "application/json",
        Some("anything"),
        json_request().into_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["code"], "traces_disabled");
    assert!(!server.root.join(".assay/traces").exists());
    let (status, _) = server.get("/traces/check").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
