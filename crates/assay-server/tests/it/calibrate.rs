//! `POST /cli/calibrate` against a fake OpenAI-compatible chat server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};

use crate::support::{Server, assert_error};

/// The proposal the fake model makes for every case: ids of the example's knowledge base.
fn proposal() -> Value {
    json!({
        "expected_primary": ["gray_rock"],
        "expected_secondary": ["boundary_setting"],
        "not_expected": ["domestic_violence"],
        "rank_check": [],
        "reasoning": "The message is about staying unreactive."
    })
}

async fn chat(State(calls): State<Arc<AtomicUsize>>, Json(request): Json<Value>) -> Json<Value> {
    calls.fetch_add(1, Ordering::SeqCst);
    assert_eq!(request["model"], "test-model");
    Json(json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": proposal().to_string(), "refusal": null},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    }))
}

/// Starts the fake chat server; returns its base URL and its call counter.
async fn fake_openai() -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(Arc::clone(&calls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), calls)
}

/// The example project calibrating with `openai/test-model` on the fake server.
async fn server() -> (Server, Arc<AtomicUsize>) {
    let (base, calls) = fake_openai().await;
    let server = Server::with_env(&[("OPENAI_API_KEY", "test")]);
    server.append(
        "assay.toml",
        &format!(
            "\n[calibration]\nmodel = \"openai/test-model\"\n\n[providers]\nopenai_base_url = \"{base}\"\nmax_retries = 0\n"
        ),
    );
    (server, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_is_the_default_and_writes_nothing() {
    let (server, calls) = server().await;
    let before = server.files();
    let (status, body) = server
        .post("/cli/calibrate?scope=single&test_ids=V2-GR-001", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["dry_run"], true);
    assert_eq!(body["scope"], "single");
    assert_eq!(body["model"], "openai/test-model");
    assert_eq!(body["kb_version"], "v2.0");
    assert_eq!(body["counts"]["selected"], 1);
    assert_eq!(body["counts"]["errors"], 0, "{body:#}");
    let case = &body["cases"][0];
    assert_eq!(case["test_id"], "V2-GR-001");
    assert_eq!(case["status"], "changed", "{case:#}");
    assert_eq!(case["proposed"]["expected_primary"], json!(["gray_rock"]));
    assert_eq!(
        case["proposed"]["expected_secondary"],
        json!(["boundary_setting"])
    );
    assert!(body["history_file"].is_null());
    assert!(body["responses_file"].is_null());
    assert!(body["log_file"].is_null());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(server.files(), before, "a dry run wrote into the project");
    assert_eq!(server.get("/health").await.1["busy"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_body_without_dry_run_writes_history() {
    let (server, calls) = server().await;
    let (status, body) = server
        .post(
            "/cli/calibrate?kb_version=v2.1",
            Some(
                r#"{"scope": "single", "test_ids": ["V2-GR-001", "V2-GR-002"], "dry_run": false}"#,
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["dry_run"], false);
    assert_eq!(body["kb_version"], "v2.1");
    assert_eq!(body["counts"]["selected"], 2);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    for key in ["history_file", "responses_file", "log_file"] {
        let path = std::path::Path::new(body[key].as_str().unwrap());
        assert!(path.is_file(), "{key}: {path:?}");
        assert!(path.starts_with(&server.root), "{key}: {path:?}");
    }
    let history: Value = serde_json::from_str(
        &std::fs::read_to_string(body["history_file"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    assert!(history.to_string().contains("V2-GR-001"), "{history:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calibration_requests_are_400() {
    let (server, calls) = server().await;
    let before = server.files();
    let got = server.post("/cli/calibrate?scope=everything", None).await;
    assert_error(
        &got,
        StatusCode::BAD_REQUEST,
        "unknown calibration scope `everything`",
    );
    let got = server.post("/cli/calibrate?scope=single", None).await;
    assert_error(
        &got,
        StatusCode::BAD_REQUEST,
        "scope `single` needs the test ids",
    );
    let got = server
        .post("/cli/calibrate?scope=single&test_ids=NOPE-1", None)
        .await;
    assert_error(&got, StatusCode::BAD_REQUEST, "`NOPE-1`");
    let got = server
        .post(
            "/cli/calibrate?scope=affected&added_entities=not_an_entity",
            None,
        )
        .await;
    assert_error(&got, StatusCode::BAD_REQUEST, "`not_an_entity`");
    let got = server.post("/cli/calibrate?dry_run=perhaps", None).await;
    assert_error(&got, StatusCode::BAD_REQUEST, "`dry_run`");
    let got = server.post("/cli/calibrate?trigger=x", None).await;
    assert_error(
        &got,
        StatusCode::BAD_REQUEST,
        "unknown query parameter `trigger`",
    );
    let got = server
        .post("/cli/calibrate", Some(r#"{"dry_run": "no"}"#))
        .await;
    assert_error(&got, StatusCode::BAD_REQUEST, "invalid JSON body");
    let got = server
        .post("/cli/calibrate?dry_run=true", Some(r#"{"dry_run": false}"#))
        .await;
    assert_error(&got, StatusCode::BAD_REQUEST, "`dry_run` is given both");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(server.files(), before);
}
