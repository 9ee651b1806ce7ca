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

    // Reading them back needs the token too: they hold users' messages and state.
    let (status, _) = server.get("/traces/check").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, report) = check(&server, "s3cret").await;
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
    // Nor can they be read: no token can be right.
    let (status, error) = check(&server, "anything").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(error["code"], "traces_disabled");
}

/// `GET /traces/check` with a bearer token.
async fn check(server: &Server, token: &str) -> (StatusCode, Value) {
    server
        .request_with(
            Method::GET,
            "/traces/check",
            None,
            &[("authorization", format!("Bearer {token}"))],
        )
        .await
}

/// `post` with more headers, to `app`.
async fn post_to(
    app: &axum::Router,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, Vec<u8>) {
    let mut req = Request::builder()
        .method(Method::POST)
        .uri("/v1/traces")
        .header("authorization", "Bearer s3cret");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, bytes.to_vec())
}

/// `post` with more headers, to the server's own router.
async fn post_with(
    server: &Server,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, Vec<u8>) {
    post_to(&server.app, headers, body).await
}

/// Issue 42: gzip bodies (protobuf and JSON) are taken, as the OTLP specification requires;
/// a batch sent again (an exporter's retry) is stored and counted once, across requests and
/// across a restart of the server (the stored files are the truth); a span twice in one
/// request is stored once.
#[tokio::test]
async fn gzip_bodies_are_taken_and_a_span_is_stored_once() {
    let server = Server::with_env(&[("ASSAY_ADMIN_TOKEN", "s3cret")]);
    let gz = crate::errors::gzip;
    let (status, body) = post_with(
        &server,
        &[
            ("content-type", "application/x-protobuf"),
            ("content-encoding", "gzip"),
        ],
        gz(&proto_request()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let answer = ExportTraceServiceResponse::decode(body.as_slice()).unwrap();
    assert_eq!(answer.partial_success, None);
    let (status, body) = post_with(
        &server,
        &[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ],
        gz(json_request().as_bytes()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let ids = |server: &Server| -> Vec<String> {
        received(server)
            .iter()
            .map(|l| l["span_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&server), ["0101010101010101", "01"]);

    // The same batches again, plain and compressed: nothing new is stored.
    for _ in 0..2 {
        let (status, _) = post_with(
            &server,
            &[("content-type", "application/x-protobuf")],
            proto_request(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, _) = post_with(
        &server,
        &[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ],
        gz(json_request().as_bytes()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids(&server), ["0101010101010101", "01"]);
    let (status, report) = check(&server, "s3cret").await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["checked"], 2, "counted once: {report:#}");

    // A restarted server reads what is stored: still once.
    let again = assay_server::app(assay_server::AppState::with_env(
        &server.root,
        std::sync::Arc::new(|name: &str| (name == "ASSAY_ADMIN_TOKEN").then(|| "s3cret".into())),
    ));
    let (status, _) = post_to(
        &again,
        &[("content-type", "application/x-protobuf")],
        proto_request(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids(&server), ["0101010101010101", "01"]);

    // A span the files no longer hold (removed by hand) is stored again; a span twice in one
    // request once.
    std::fs::remove_dir_all(server.root.join(".assay/traces")).unwrap();
    let twice = {
        let mut request = ExportTraceServiceRequest::decode(proto_request().as_slice()).unwrap();
        let spans = &mut request.resource_spans[0].scope_spans[0].spans;
        let first = spans[0].clone();
        spans.push(first);
        request.encode_to_vec()
    };
    let (status, _) = post_with(
        &server,
        &[("content-type", "application/x-protobuf")],
        twice,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids(&server), ["0101010101010101"]);
}
