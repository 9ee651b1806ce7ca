//! A scripted server speaking both chat APIs and both batch APIs: OpenAI
//! (`/v1/chat/completions`, `/v1/files`, `/v1/batches`) and Anthropic (`/v1/messages`,
//! `/v1/messages/batches`). A batch ends `delay` after it was submitted; a request whose prompt
//! contains `fail` fails inside its batch; the first `expire` batches expire without running.
//! Every answer is a function of the prompt, so batch and interactive answers are equal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

#[derive(Debug, Clone, Default)]
pub(crate) struct Script {
    pub(crate) delay: Duration,
    pub(crate) fail: Option<String>,
    pub(crate) expire: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Custom ids submitted, over all batches.
    pub(crate) submitted: Vec<String>,
    /// Batch ids, in order.
    pub(crate) batches: Vec<String>,
    /// Polls per batch id.
    pub(crate) polls: HashMap<String, usize>,
    /// Interactive chat requests.
    pub(crate) interactive: usize,
}

struct Batch {
    anthropic: bool,
    /// (custom id, prompt)
    requests: Vec<(String, String)>,
    ready: Instant,
    expires: bool,
}

#[derive(Default)]
struct Inner {
    script: Script,
    seen: Seen,
    files: HashMap<String, String>,
    batches: HashMap<String, Batch>,
}

#[derive(Clone)]
pub(crate) struct Fake {
    inner: Arc<Mutex<Inner>>,
    pub(crate) base: String,
}

impl Fake {
    pub(crate) fn seen<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.inner.lock().unwrap().seen)
    }
}

/// The answer to `prompt`.
pub(crate) fn answer(prompt: &str) -> String {
    format!("answer to: {}", prompt.to_uppercase())
}

fn last_prompt(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn openai_completion(prompt: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": answer(prompt)},
                        "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 1000, "completion_tokens": 100}})
}

fn anthropic_message(prompt: &str) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant",
           "content": [{"type": "text", "text": answer(prompt)}], "stop_reason": "end_turn",
           "usage": {"input_tokens": 1000, "output_tokens": 100}})
}

pub(crate) async fn start(script: Script) -> Fake {
    let inner = Arc::new(Mutex::new(Inner {
        script,
        ..Inner::default()
    }));
    let app = Router::new()
        .route("/v1/chat/completions", post(openai_chat))
        .route("/v1/files", post(upload))
        .route("/v1/files/{id}/content", get(file_content))
        .route("/v1/batches", post(openai_create))
        .route("/v1/batches/{id}", get(openai_poll))
        .route("/v1/messages", post(anthropic_chat))
        .route("/v1/messages/batches", post(anthropic_create))
        .route("/v1/messages/batches/{id}", get(anthropic_poll))
        .route("/v1/messages/batches/{id}/results", get(anthropic_results))
        .with_state(Arc::clone(&inner));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    Fake { inner, base }
}

type Shared = State<Arc<Mutex<Inner>>>;

async fn openai_chat(State(s): Shared, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    s.lock().unwrap().seen.interactive += 1;
    axum::Json(openai_completion(&last_prompt(&body))).into_response()
}

async fn anthropic_chat(State(s): Shared, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    s.lock().unwrap().seen.interactive += 1;
    axum::Json(anthropic_message(&last_prompt(&body))).into_response()
}

/// The `file` part of a multipart body.
fn file_part(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    let kind = headers.get("content-type")?.to_str().ok()?;
    let boundary = kind.split("boundary=").nth(1)?;
    let text = String::from_utf8_lossy(body);
    for part in text.split(&format!("--{boundary}")) {
        if part.contains("name=\"file\"") {
            let (_, content) = part.split_once("\r\n\r\n")?;
            return Some(content.strip_suffix("\r\n").unwrap_or(content).to_owned());
        }
    }
    None
}

async fn upload(State(s): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let Some(file) = file_part(&headers, &body) else {
        return (StatusCode::BAD_REQUEST, "no file part").into_response();
    };
    if !String::from_utf8_lossy(&body).contains("name=\"purpose\"\r\n\r\nbatch\r\n") {
        return (StatusCode::BAD_REQUEST, "no purpose=batch").into_response();
    }
    let mut inner = s.lock().unwrap();
    let id = format!("file-{}", inner.files.len() + 1);
    inner.files.insert(id.clone(), file);
    axum::Json(json!({"id": id, "object": "file", "purpose": "batch"})).into_response()
}

async fn file_content(State(s): Shared, Path(id): Path<String>) -> Response {
    match s.lock().unwrap().files.get(&id) {
        Some(text) => text.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Registers a batch of (custom id, prompt); returns its id.
fn register(inner: &mut Inner, anthropic: bool, requests: Vec<(String, String)>) -> String {
    let n = inner.batches.len() + 1;
    let id = if anthropic {
        format!("msgbatch_{n:03}")
    } else {
        format!("batch_{n:03}")
    };
    inner
        .seen
        .submitted
        .extend(requests.iter().map(|(c, _)| c.clone()));
    inner.seen.batches.push(id.clone());
    let expires = n <= inner.script.expire;
    inner.batches.insert(
        id.clone(),
        Batch {
            anthropic,
            requests,
            ready: Instant::now() + inner.script.delay,
            expires,
        },
    );
    id
}

async fn openai_create(State(s): Shared, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["endpoint"], "/v1/chat/completions");
    assert_eq!(body["completion_window"], "24h");
    let mut inner = s.lock().unwrap();
    let Some(file) = inner
        .files
        .get(body["input_file_id"].as_str().unwrap_or(""))
        .cloned()
    else {
        return (StatusCode::BAD_REQUEST, "unknown file").into_response();
    };
    let mut requests = Vec::new();
    for line in file.lines().filter(|l| !l.trim().is_empty()) {
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(line["url"], "/v1/chat/completions");
        requests.push((
            line["custom_id"].as_str().unwrap().to_owned(),
            last_prompt(&line["body"]),
        ));
    }
    let id = register(&mut inner, false, requests);
    axum::Json(json!({"id": id, "object": "batch", "status": "validating"})).into_response()
}

async fn openai_poll(State(s): Shared, Path(id): Path<String>) -> Response {
    let mut inner = s.lock().unwrap();
    *inner.seen.polls.entry(id.clone()).or_default() += 1;
    let fail = inner.script.fail.clone();
    let Some(batch) = inner.batches.get(&id) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if Instant::now() < batch.ready {
        return axum::Json(json!({"id": id, "status": "in_progress"})).into_response();
    }
    let (mut output, mut errors) = (String::new(), String::new());
    for (custom, prompt) in &batch.requests {
        let line = if batch.expires {
            json!({"custom_id": custom, "response": null,
                   "error": {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}})
        } else if fail.as_deref().is_some_and(|f| prompt.contains(f)) {
            json!({"custom_id": custom, "response": {"status_code": 400,
                   "body": {"error": {"message": "scripted failure", "type": "invalid_request_error"}}}, "error": null})
        } else {
            json!({"custom_id": custom, "response": {"status_code": 200, "body": openai_completion(prompt)}, "error": null})
        };
        let target = if line["response"]["status_code"] == 200 {
            &mut output
        } else {
            &mut errors
        };
        target.push_str(&line.to_string());
        target.push('\n');
    }
    let status = if batch.expires {
        "expired"
    } else {
        "completed"
    };
    let mut answer = json!({"id": id, "status": status});
    for (field, text) in [("output_file_id", output), ("error_file_id", errors)] {
        if !text.is_empty() {
            let file = format!("file-{id}-{field}");
            inner.files.insert(file.clone(), text);
            answer[field] = json!(file);
        }
    }
    axum::Json(answer).into_response()
}

async fn anthropic_create(State(s): Shared, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    let requests = body["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let id = r["custom_id"].as_str().unwrap().to_owned();
            assert!(
                !id.is_empty()
                    && id.len() <= 64
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
            (id, last_prompt(&r["params"]))
        })
        .collect();
    let mut inner = s.lock().unwrap();
    let id = register(&mut inner, true, requests);
    axum::Json(json!({"id": id, "type": "message_batch", "processing_status": "in_progress"}))
        .into_response()
}

async fn anthropic_poll(State(s): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let mut inner = s.lock().unwrap();
    *inner.seen.polls.entry(id.clone()).or_default() += 1;
    let Some(batch) = inner.batches.get(&id) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    assert!(batch.anthropic);
    if Instant::now() < batch.ready {
        return axum::Json(json!({"id": id, "processing_status": "in_progress"})).into_response();
    }
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    axum::Json(json!({"id": id, "processing_status": "ended",
                      "results_url": format!("http://{host}/v1/messages/batches/{id}/results")}))
    .into_response()
}

async fn anthropic_results(State(s): Shared, Path(id): Path<String>) -> Response {
    let inner = s.lock().unwrap();
    let Some(batch) = inner.batches.get(&id) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut out = String::new();
    for (custom, prompt) in &batch.requests {
        let result = if batch.expires {
            json!({"type": "expired"})
        } else if inner
            .script
            .fail
            .as_deref()
            .is_some_and(|f| prompt.contains(f))
        {
            json!({"type": "errored", "error": {"type": "error",
                   "error": {"type": "invalid_request_error", "message": "scripted failure"}}})
        } else {
            json!({"type": "succeeded", "message": anthropic_message(prompt)})
        };
        out.push_str(&json!({"custom_id": custom, "result": result}).to_string());
        out.push('\n');
    }
    out.into_response()
}
