//! How HTTP failures map to `ProviderError`, for both clients.

use std::time::{Duration, Instant};

use assay_providers::{
    Embedder, EmbedderOptions, InputKind, OpenAiEmbedder, ProviderError, ProviderErrorKind,
    VoyageEmbedder,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{FakeServer, Reply, fixture, openai_key, texts, voyage_key};

/// Both clients, pointed at `base`.
fn clients(base: &str, timeout: Duration) -> Vec<Box<dyn Embedder>> {
    let options = EmbedderOptions {
        openai_base_url: base.to_owned(),
        voyage_base_url: base.to_owned(),
        timeout,
        ..EmbedderOptions::default()
    };
    vec![
        Box::new(VoyageEmbedder::new("voyage-2", voyage_key(), &options).unwrap()),
        Box::new(
            OpenAiEmbedder::new("text-embedding-3-small", Some(openai_key()), &options).unwrap(),
        ),
    ]
}

/// The error each client returns for a server that always answers `reply`.
async fn errors_for(reply: Reply) -> Vec<ProviderError> {
    let server = FakeServer::always(reply).await;
    let mut out = Vec::new();
    for client in clients(&server.base, Duration::from_secs(10)) {
        let err = client.embed(&texts(3), InputKind::Query).await.unwrap_err();
        assert_eq!(
            err.model(),
            Some(client.model()),
            "errors name the provider"
        );
        out.push(err);
    }
    out
}

#[tokio::test]
async fn unauthorized_is_an_http_error_that_is_not_retried() {
    for err in errors_for(Reply::raw(401, &fixture("openai_error_401.json"))).await {
        assert_eq!(err.status(), Some(401), "{err}");
        assert!(!err.is_retryable());
        assert!(
            err.to_string()
                .contains("HTTP 401: Incorrect API key provided"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn rate_limit_carries_retry_after() {
    let reply = Reply::raw(429, &fixture("voyage_error_429.json")).header("retry-after", "7");
    for err in errors_for(reply).await {
        assert_eq!(err.status(), Some(429));
        assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
        assert!(err.is_retryable());
        assert!(
            err.to_string()
                .contains("HTTP 429 (retry after 7s): You have not yet added your payment method"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn unavailable_carries_retry_after_as_an_http_date() {
    let reply = Reply::raw(503, "").header("retry-after", "Thu, 01 Jan 1970 00:00:00 GMT");
    for err in errors_for(reply).await {
        assert_eq!(
            (err.status(), err.retry_after()),
            (Some(503), Some(Duration::ZERO)),
            "{err}"
        );
        assert!(err.is_retryable());
        assert!(
            err.to_string()
                .contains("HTTP 503 (retry after 0s): Service Unavailable"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn server_error_is_retryable() {
    for err in errors_for(Reply::raw(500, "upstream exploded")).await {
        assert!(
            matches!(
                err.kind(),
                ProviderErrorKind::Http {
                    status: 500,
                    retry_after: None,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.is_retryable());
        assert!(
            err.to_string().ends_with("HTTP 500: upstream exploded"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn malformed_json_is_not_retryable() {
    for err in errors_for(Reply::raw(200, "<html>Gateway says hi</html>")).await {
        assert!(
            matches!(err.kind(), ProviderErrorKind::Malformed { .. }),
            "{err:?}"
        );
        assert!(!err.is_retryable());
        assert!(
            err.to_string().contains("<html>Gateway"),
            "quotes the body: {err}"
        );
    }
}

#[tokio::test]
async fn truncated_json_is_malformed() {
    let full = fixture("voyage_embeddings.json");
    for err in errors_for(Reply::raw(200, &full[..full.len() / 2])).await {
        assert!(
            matches!(err.kind(), ProviderErrorKind::Malformed { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("EOF while parsing"), "{err}");
    }
}

#[tokio::test]
async fn wrong_shape_or_count_is_malformed() {
    let cases = [
        r#"{"object": "list", "data": [{"object": "embedding", "embedding": [1.0], "index": 0}]}"#,
        r#"{"object": "list", "data": "nope"}"#,
        r#"{"object": "list"}"#,
    ];
    for body in cases {
        for err in errors_for(Reply::raw(200, body)).await {
            assert!(
                matches!(err.kind(), ProviderErrorKind::Malformed { .. }),
                "{body}: {err:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_body_cut_off_mid_transfer_is_a_retryable_connection_error() {
    // A raw server: promises 1000 bytes, sends 40, closes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut seen = Vec::new();
                // Read the headers and the body (its length is in content-length).
                loop {
                    let n = socket.read(&mut buf).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length: usize = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if seen.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n";
                socket.write_all(head.as_bytes()).await.unwrap();
                socket
                    .write_all(br#"{"object": "list", "data": [{"object": "#)
                    .await
                    .unwrap();
                socket.shutdown().await.unwrap();
            });
        }
    });
    for client in clients(&base, Duration::from_secs(10)) {
        let err = client.embed(&texts(3), InputKind::Query).await.unwrap_err();
        assert!(
            matches!(err.kind(), ProviderErrorKind::Connection { .. }),
            "{err:?}"
        );
        assert!(err.is_retryable());
    }
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let server = FakeServer::always(Reply::raw(200, "{}").delay(Duration::from_secs(5))).await;
    for client in clients(&server.base, Duration::from_millis(300)) {
        let start = Instant::now();
        let err = client.embed(&texts(1), InputKind::Query).await.unwrap_err();
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
        assert!(
            matches!(err.kind(), ProviderErrorKind::Timeout { after } if *after == Duration::from_millis(300)),
            "{err:?}"
        );
        assert!(err.is_retryable());
        assert!(
            err.to_string().ends_with("request timed out after 0.3s"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn nothing_listening_is_a_retryable_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    for client in clients(&base, Duration::from_secs(5)) {
        let err = client.embed(&texts(1), InputKind::Query).await.unwrap_err();
        assert!(
            matches!(err.kind(), ProviderErrorKind::Connection { .. }),
            "{err:?}"
        );
        assert!(err.is_retryable());
    }
}
