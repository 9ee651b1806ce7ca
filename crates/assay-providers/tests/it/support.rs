//! A fake HTTP server on 127.0.0.1 that records every request and answers with a scripted
//! [`Reply`], plus fixture loading.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assay_providers::{
    ApiKey, ChatModel, ChatRequest, ChatResponse, EmbedderOptions, ProviderError, ProviderOptions,
    Usage,
};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// One request the fake server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// When it arrived.
    pub at: Instant,
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `input` array of an embeddings request.
    pub fn inputs(&self) -> Vec<String> {
        self.body["input"]
            .as_array()
            .expect("input array")
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }
}

/// What the fake server answers.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

impl Reply {
    pub fn json(value: &Value) -> Reply {
        Reply::raw(200, &value.to_string()).header("content-type", "application/json")
    }

    pub fn raw(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.push((name, value.to_owned()));
        self
    }

    pub fn delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

type Responder = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

#[derive(Clone)]
struct ServerState {
    requests: Arc<Mutex<Vec<Recorded>>>,
    responder: Responder,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
}

/// A running fake server; it stops when the test's runtime ends.
pub struct FakeServer {
    /// `http://127.0.0.1:<port>/v1`
    pub base: String,
    /// `http://127.0.0.1:<port>` (Anthropic's base URL has no `/v1`)
    pub root: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    max_in_flight: Arc<AtomicUsize>,
}

impl FakeServer {
    /// Starts a server on a random port that answers every request with `responder`.
    pub async fn start(
        responder: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> FakeServer {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let max_in_flight = Arc::new(AtomicUsize::new(0));
        let state = ServerState {
            requests: Arc::clone(&requests),
            responder: Arc::new(responder),
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: Arc::clone(&max_in_flight),
        };
        let app = axum::Router::new().fallback(handle).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        FakeServer {
            base: format!("http://127.0.0.1:{port}/v1"),
            root: format!("http://127.0.0.1:{port}"),
            requests,
            max_in_flight,
        }
    }

    /// A server that answers the scripted replies in order, then repeats the last one.
    pub async fn script(replies: Vec<Reply>) -> FakeServer {
        let replies = Mutex::new(VecDeque::from(replies));
        FakeServer::start(move |_| {
            let mut replies = replies.lock().unwrap();
            if replies.len() > 1 {
                replies.pop_front().unwrap()
            } else {
                replies.front().cloned().expect("at least one reply")
            }
        })
        .await
    }

    /// The most requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// Chat and reranker options pointing every vendor at this server.
    pub fn provider_options(&self) -> ProviderOptions {
        ProviderOptions {
            anthropic_base_url: self.root.clone(),
            openai_base_url: self.base.clone(),
            voyage_base_url: self.base.clone(),
            timeout: Duration::from_secs(10),
            ..ProviderOptions::default()
        }
    }

    /// A server that always answers `reply`.
    pub async fn always(reply: Reply) -> FakeServer {
        FakeServer::start(move |_| reply.clone()).await
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Options pointing both vendors' base URLs at this server.
    pub fn options(&self) -> EmbedderOptions {
        EmbedderOptions {
            openai_base_url: self.base.clone(),
            voyage_base_url: self.base.clone(),
            ..EmbedderOptions::default()
        }
    }
}

async fn handle(
    State(state): State<ServerState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        at: Instant::now(),
        method,
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let reply = (state.responder)(&recorded);
    state.requests.lock().unwrap().push(recorded);
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(reply.delay).await;
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    let mut response = (StatusCode::from_u16(reply.status).unwrap(), reply.body).into_response();
    for (name, value) in reply.headers {
        response.headers_mut().insert(name, value.parse().unwrap());
    }
    response
}

/// A fixture from `tests/fixtures/`.
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn fixture_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap()
}

/// The fixture's vectors, in `index` order, L2-normalised.
pub fn fixture_vectors(body: &Value) -> Vec<Vec<f32>> {
    let mut data: Vec<&Value> = body["data"].as_array().unwrap().iter().collect();
    data.sort_by_key(|d| d["index"].as_u64().unwrap());
    data.iter()
        .map(|d| {
            let mut v: Vec<f32> = d["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            assay_providers::l2_normalize(&mut v);
            v
        })
        .collect()
}

/// `n` distinct input texts.
pub fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("text {i}")).collect()
}

/// An embeddings answer made from the request, in either vendor's shape: input `text <i>` gets
/// the vector `[i, 1]`, and `data` comes back in reverse order (to exercise reassembly).
pub fn synthesize(request: &Recorded) -> Reply {
    let inputs = request.inputs();
    let mut data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let i: f64 = text.trim_start_matches("text ").parse().unwrap();
            serde_json::json!({"object": "embedding", "embedding": [i, 1.0], "index": index})
        })
        .collect();
    data.reverse();
    let n = inputs.len();
    Reply::json(&serde_json::json!({
        "object": "list",
        "data": data,
        "model": request.body["model"],
        "usage": {"prompt_tokens": 2 * n, "total_tokens": 2 * n},
    }))
}

/// Asserts that `vectors[i]` is the unit vector along `[i, 1]` as [`synthesize`] makes it.
pub fn assert_synthesized_in_order(vectors: &[Vec<f32>]) {
    for (i, v) in vectors.iter().enumerate() {
        let norm = (i as f32).hypot(1.0);
        assert!(
            (v[0] - i as f32 / norm).abs() < 1e-5 && (v[1] - 1.0 / norm).abs() < 1e-5,
            "vector {i}: {v:?}"
        );
    }
}

pub const VOYAGE_KEY: &str = "vk-test-0123456789abcdef";
pub const OPENAI_KEY: &str = "sk-test-0123456789abcdef";

pub fn voyage_key() -> ApiKey {
    ApiKey::new(VOYAGE_KEY)
}

pub fn openai_key() -> ApiKey {
    ApiKey::new(OPENAI_KEY)
}

pub const ANTHROPIC_KEY: &str = "sk-ant-test-0123456789abcdef";

pub fn anthropic_key() -> ApiKey {
    ApiKey::new(ANTHROPIC_KEY)
}

/// The environment with all three keys.
pub fn all_keys(name: &str) -> Option<String> {
    match name {
        "ANTHROPIC_API_KEY" => Some(ANTHROPIC_KEY.to_owned()),
        "OPENAI_API_KEY" => Some(OPENAI_KEY.to_owned()),
        "VOYAGE_API_KEY" => Some(VOYAGE_KEY.to_owned()),
        _ => None,
    }
}

/// A chat model that answers scripted replies in order (then repeats the last) and records the
/// requests it got.
#[derive(Debug)]
pub struct ScriptedChat {
    replies: Mutex<VecDeque<Result<String, String>>>,
    pub requests: Mutex<Vec<ChatRequest>>,
}

impl ScriptedChat {
    pub fn new(replies: &[&str]) -> Arc<ScriptedChat> {
        Arc::new(ScriptedChat {
            replies: Mutex::new(replies.iter().map(|r| Ok((*r).to_owned())).collect()),
            requests: Mutex::new(Vec::new()),
        })
    }

    pub fn calls(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

#[async_trait::async_trait]
impl ChatModel for ScriptedChat {
    fn model(&self) -> &'static str {
        "mock/scripted"
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        let mut replies = self.replies.lock().unwrap();
        let reply = if replies.len() > 1 {
            replies.pop_front().unwrap()
        } else {
            replies.front().cloned().expect("a reply")
        };
        match reply {
            Ok(text) => Ok(ChatResponse {
                text,
                tool_calls: Vec::new(),
                stop_reason: Some("end_turn".into()),
                usage: Usage {
                    input_tokens: 100,
                    output_tokens: 10,
                    requests: 1,
                },
            }),
            Err(message) => Err(ProviderError::config(message)),
        }
    }
}
