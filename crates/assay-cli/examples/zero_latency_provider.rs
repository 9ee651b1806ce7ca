//! A zero-latency OpenAI-compatible provider for the harness-overhead benchmark
//! (`bench/harness/run.sh`): answers at once, with no model behind it, so a run against it
//! measures what assay itself costs.
//!
//! - `POST /v1/embeddings`: `{"input": [...], "model": ...}` → one deterministic vector per input,
//!   a hashed bag of words (lower-cased alphanumeric words, FNV-1a into 256 buckets, ±1 by a
//!   second hash bit), L2-normalised.
//! - `POST /v1/chat/completions`: the listwise LLM reranker's request
//!   (`assay_providers::llm_rerank`): answers `{"ranked_ids": [...]}` with the candidate ids of
//!   the last user message (its `- id: <id>` lines) in order of appearance, at most 6.
//! - `GET /stats`: `{"embeddings_requests", "embedded_inputs", "chat_requests"}` so far.
//!
//! ```sh
//! cargo run --release -p assay-cli --example zero_latency_provider -- --port 0
//! ```
//!
//! It prints `http://127.0.0.1:<port>/v1` on its first line of stdout (`--port 0` picks a free
//! port) and serves until killed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

/// Dimension of the embeddings.
const DIM: usize = 256;
/// Ids answered per reranking call at most.
const MAX_IDS: usize = 6;

#[derive(Default)]
struct Counters {
    embeddings_requests: AtomicU64,
    embedded_inputs: AtomicU64,
    chat_requests: AtomicU64,
}

type Shared = Arc<Counters>;

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Hashed bag of words, L2-normalised; an empty text gets a fixed unit vector.
fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIM];
    let lower = text.to_lowercase();
    for word in lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = fnv1a(word.as_bytes());
        #[allow(clippy::cast_possible_truncation)]
        let bucket = (h % DIM as u64) as usize;
        v[bucket] += if (h >> 32) & 1 == 0 { 1.0 } else { -1.0 };
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    } else {
        v[0] = 1.0;
    }
    v
}

fn bad_request(message: &str) -> (StatusCode, Json<Value>) {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": {"message": message, "type": "invalid_request_error"}})),
    )
}

async fn embeddings(
    State(counters): State<Shared>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let inputs: Vec<String> = match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => return bad_request("`input` must be a string or an array of strings"),
    };
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    counters.embeddings_requests.fetch_add(1, Ordering::Relaxed);
    counters
        .embedded_inputs
        .fetch_add(inputs.len() as u64, Ordering::Relaxed);
    let mut tokens = 0usize;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            tokens += text.split_whitespace().count();
            json!({"object": "embedding", "index": index, "embedding": embed(text)})
        })
        .collect();
    (
        StatusCode::OK,
        Json(json!({
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })),
    )
}

/// The candidate ids of a reranking prompt (`- id: <id>` lines), in order, first occurrence.
fn candidate_ids(prompt: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for line in prompt.lines() {
        if let Some(id) = line.trim_start().strip_prefix("- id:") {
            let id = id.trim();
            if !id.is_empty() && !ids.iter().any(|known| known == id) {
                ids.push(id.to_owned());
                if ids.len() == MAX_IDS {
                    break;
                }
            }
        }
    }
    ids
}

async fn chat_completions(
    State(counters): State<Shared>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return bad_request("`messages` must be an array");
    };
    counters.chat_requests.fetch_add(1, Ordering::Relaxed);
    let prompt = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let content = json!({"ranked_ids": candidate_ids(prompt)}).to_string();
    let prompt_tokens = messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_str))
        .map(|c| c.split_whitespace().count())
        .sum::<usize>();
    let completion_tokens = content.len() / 4 + 1;
    (
        StatusCode::OK,
        Json(json!({
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model").cloned().unwrap_or(Value::Null),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        })),
    )
}

async fn stats(State(counters): State<Shared>) -> Json<Value> {
    Json(json!({
        "embeddings_requests": counters.embeddings_requests.load(Ordering::Relaxed),
        "embedded_inputs": counters.embedded_inputs.load(Ordering::Relaxed),
        "chat_requests": counters.chat_requests.load(Ordering::Relaxed),
    }))
}

fn parse_port() -> Result<u16, String> {
    let mut args = std::env::args().skip(1);
    let mut port = 0u16;
    while let Some(arg) = args.next() {
        let value = if arg == "--port" {
            args.next().ok_or("--port needs a value")?
        } else if let Some(v) = arg.strip_prefix("--port=") {
            v.to_owned()
        } else {
            return Err(format!("unknown argument `{arg}` (usage: --port N)"));
        };
        port = value.parse().map_err(|_| format!("bad port `{value}`"))?;
    }
    Ok(port)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = parse_port()?;
    let counters: Shared = Arc::new(Counters::default());
    let app = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/stats", get(stats))
        .with_state(counters);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    let addr = listener.local_addr()?;
    println!("http://{addr}/v1");
    // The URL must reach a reader through a pipe at once.
    use std::io::Write as _;
    std::io::stdout().flush()?;
    axum::serve(listener, app).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_order_at_most_six() {
        let prompt = "User message:\nhi\n\nCandidates:\n\n- id: a\n  title: A\n  summary: s\n\n\
                      - id: b\n  title: B\n  summary: s\n- id: a\n";
        assert_eq!(candidate_ids(prompt), vec!["a", "b"]);
        let many = (0..10).fold(String::new(), |mut out, i| {
            out.push_str(&format!("- id: e{i}\n"));
            out
        });
        assert_eq!(candidate_ids(&many).len(), 6);
    }

    #[test]
    fn vectors_are_unit_and_deterministic() {
        let a = embed("Hello world, hello!");
        assert_eq!(a, embed("hello WORLD hello"));
        let n: f32 = a.iter().map(|x| x * x).sum();
        assert!((n - 1.0).abs() < 1e-5);
    }
}
