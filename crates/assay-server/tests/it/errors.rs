//! Issue 42: every error reply of the API is JSON in the one shape (`{error, status, code}`),
//! whoever makes it: a handler, axum's extractors (a body that is too large or not UTF-8, a
//! path that does not decode), tower-http's layers (an unsupported `Content-Encoding`, a gzip
//! body that does not inflate, a body that stops arriving) or the fallbacks.

use std::io::{Read as _, Write as _};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use crate::support::Server;

const TOKEN: &str = "s3cret";

/// Sends a request with a raw body; returns the status, the headers and the body as JSON (the
/// test fails when it is not JSON).
async fn send(
    server: &Server,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let response = server
        .app
        .clone()
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    let kind = parts
        .headers
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    assert!(
        kind.starts_with("application/json"),
        "{uri}: {} answered {kind:?}: {}",
        parts.status,
        String::from_utf8_lossy(&bytes)
    );
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    (parts.status, parts.headers, value)
}

/// The one error shape, with this status and code.
#[track_caller]
fn is_error(got: &(StatusCode, axum::http::HeaderMap, Value), status: StatusCode, code: &str) {
    let (s, _, body) = got;
    assert_eq!(*s, status, "{body:#}");
    assert_eq!(body["status"], status.as_u16(), "{body:#}");
    assert_eq!(body["code"], code, "{body:#}");
    assert!(
        body["error"].as_str().is_some_and(|m| !m.is_empty()),
        "{body:#}"
    );
}

#[tokio::test]
async fn every_failure_mode_of_the_api_answers_json() {
    let server = Server::with_env(&[("ASSAY_ADMIN_TOKEN", TOKEN)]);
    let bearer = format!("Bearer {TOKEN}");
    let auth = ("authorization", bearer.as_str());
    let json = ("content-type", "application/json");
    let big = vec![b'x'; 3 << 20];

    // The fallbacks.
    is_error(
        &send(&server, Method::GET, "/no/such/route", &[], vec![]).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let got = send(&server, Method::DELETE, "/health", &[], vec![]).await;
    is_error(&got, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");

    // A body larger than the server takes, to a handler that reads bytes, one that reads a
    // string, and the trace receiver.
    let got = send(
        &server,
        Method::POST,
        "/admin/kb/entities",
        &[auth, json],
        big.clone(),
    )
    .await;
    is_error(&got, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    let got = send(
        &server,
        Method::POST,
        "/admin/drafts/SEM-001/accept",
        &[auth, json],
        big.clone(),
    )
    .await;
    is_error(&got, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    let got = send(
        &server,
        Method::POST,
        "/v1/traces",
        &[auth, json],
        big.clone(),
    )
    .await;
    is_error(&got, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    // A body that is not UTF-8 where text is read; a path that does not decode.
    let got = send(
        &server,
        Method::POST,
        "/admin/drafts/SEM-001/accept",
        &[auth, json],
        vec![0xff, 0xfe, 0x00],
    )
    .await;
    is_error(&got, StatusCode::BAD_REQUEST, "bad_request");
    let got = send(
        &server,
        Method::POST,
        "/admin/drafts/%FF%FE/reject",
        &[auth, json],
        b"{}".to_vec(),
    )
    .await;
    is_error(&got, StatusCode::BAD_REQUEST, "bad_request");

    // The trace receiver's layers: an encoding it does not take (with the one it does named
    // in Accept-Encoding), a gzip body that does not inflate, one that inflates past the limit.
    let got = send(
        &server,
        Method::POST,
        "/v1/traces",
        &[auth, json, ("content-encoding", "zstd")],
        b"{}".to_vec(),
    )
    .await;
    is_error(
        &got,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let accepted = got
        .1
        .get("accept-encoding")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(
        accepted.as_deref().is_some_and(|a| a.contains("gzip")),
        "{accepted:?}"
    );
    let got = send(
        &server,
        Method::POST,
        "/v1/traces",
        &[auth, json, ("content-encoding", "gzip")],
        b"not gzip at all".to_vec(),
    )
    .await;
    is_error(&got, StatusCode::BAD_REQUEST, "bad_request");
    let got = send(
        &server,
        Method::POST,
        "/v1/traces",
        &[auth, json, ("content-encoding", "gzip")],
        gzip(&big),
    )
    .await;
    is_error(&got, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    // The handlers' own, for completeness: JSON as ever.
    let got = send(
        &server,
        Method::POST,
        "/admin/kb/entities",
        &[json],
        b"{}".to_vec(),
    )
    .await;
    is_error(&got, StatusCode::UNAUTHORIZED, "unauthorized");
    let got = send(&server, Method::GET, "/runs/not-a-stamp", &[], vec![]).await;
    is_error(&got, StatusCode::BAD_REQUEST, "bad_request");
}

/// Sends `path` a request whose body stops after two of the ten bytes it promised, and
/// returns the raw answer.
fn stalled(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{{\""
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the whole answer is in (the server closes or the body is complete).
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
        if let Some(split) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&answer[..split]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if length.is_some_and(|n| answer.len() >= split + 4 + n) {
                break;
            }
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// A request body that stops arriving, over a real connection with a short body timeout: 408
/// in JSON, from a handler that reads the body itself and from one whose text extractor
/// answers for it (axum's own rejection).
#[tokio::test]
async fn a_body_that_stops_arriving_answers_json() {
    let server = Server::with_env(&[("ASSAY_ADMIN_TOKEN", TOKEN)]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = assay_server::Limits {
        body_timeout: std::time::Duration::from_millis(300),
        ..assay_server::Limits::default()
    };
    let state = server.state.clone();
    tokio::spawn(assay_server::serve_with(
        listener,
        state,
        limits,
        std::future::pending(),
    ));
    for path in ["/admin/kb/entities", "/admin/drafts/SEM-001/accept"] {
        let answer = tokio::task::spawn_blocking(move || stalled(addr, path))
            .await
            .unwrap();
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{answer}"));
        let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(status, 408, "{path}: {answer}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{path}: {answer}"
        );
        let value: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"));
        assert_eq!(value["status"], status, "{value}");
        assert_eq!(value["code"], "request_timeout", "{value}");
        assert!(value["error"].is_string(), "{value}");
    }
}

/// `body` gzip-compressed.
pub fn gzip(body: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(body).unwrap();
    encoder.finish().unwrap()
}
