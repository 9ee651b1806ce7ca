//! A local server that speaks the OpenAI-compatible wire format (`/v1/embeddings`,
//! `/v1/chat/completions`) with zero latency, and can inject faults: 429 with `retry-after`,
//! 500, a reply slower than the client's timeout, malformed JSON, and a body cut short.
//!
//! It is plain HTTP/1.1 over `std::net` (one thread per connection, `Connection: close`), so a
//! fault can break the protocol in ways a framework would not let a handler do.
//!
//! The chat endpoint plays a listwise reranker: it answers `{"ranked_ids": [...]}` with the
//! known entity ids in the order they appear in the prompt (the candidates' order), so the
//! answer is deterministic. Embeddings are hashed bags of words, L2-normalised.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What the server does to requests.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Percent of requests (0–100) that get a fault.
    pub rate_percent: u64,
    /// Requests whose body contains this text always get a 500.
    pub poison: Option<String>,
    /// How long a "slow" fault sleeps (longer than the client's timeout).
    pub slow: Duration,
    /// A token bucket on chat requests: (requests a second, burst). A refused request gets 429
    /// with `retry-after-ms` and `x-ratelimit-*` headers; every answer carries the headers.
    pub limit: Option<(f64, f64)>,
}

/// Counters of what the server saw.
#[derive(Debug, Default)]
pub struct Counts {
    pub requests: AtomicUsize,
    pub chat: AtomicUsize,
    pub embeddings: AtomicUsize,
    pub faults: AtomicUsize,
    /// Chat requests refused by the rate limit.
    pub throttled: AtomicUsize,
}

pub struct FakeOpenAi {
    pub base_url: String,
    pub counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    port: u16,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

const DIM: usize = 64;

fn embed(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIM];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
    {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.to_lowercase().bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        v[(h % DIM as u64) as usize] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

impl FakeOpenAi {
    /// Starts a server; `ids` are the entity ids the reranker knows.
    pub fn start(ids: Vec<String>, faults: Faults) -> FakeOpenAi {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let ids = Arc::new(ids);
        let bucket = Arc::new(Mutex::new(
            faults
                .limit
                .map(|(_, burst)| (burst, std::time::Instant::now())),
        ));
        let faults = Arc::new(faults);
        let seq = Arc::new(AtomicU64::new(0));
        {
            let (counts, stop) = (counts.clone(), stop.clone());
            thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (counts, ids, faults, seq, bucket) = (
                        counts.clone(),
                        ids.clone(),
                        faults.clone(),
                        seq.clone(),
                        bucket.clone(),
                    );
                    thread::spawn(move || {
                        let _ = serve(stream, &counts, &ids, &faults, &seq, &bucket);
                    });
                }
            });
        }
        FakeOpenAi {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            counts,
            stop,
            port,
        }
    }

    pub fn requests(&self) -> usize {
        self.counts.requests.load(Ordering::SeqCst)
    }
}

fn respond(stream: &mut TcpStream, status: &str, extra: &str, body: &str) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// The rate limit's verdict on a chat request: `Err` with the 429's extra headers, or `Ok` with
/// the headers of an answer. `bucket` is (level, when).
fn admit(
    faults: &Faults,
    bucket: &Mutex<Option<(f64, std::time::Instant)>>,
) -> Result<String, String> {
    let Some((rate, burst)) = faults.limit else {
        return Ok(String::new());
    };
    let mut bucket = bucket.lock().unwrap();
    let Some((level, at)) = bucket.as_mut() else {
        return Ok(String::new());
    };
    let now = std::time::Instant::now();
    *level = (*level + rate * (now - *at).as_secs_f64()).min(burst);
    *at = now;
    let admitted = *level >= 1.0;
    if admitted {
        *level -= 1.0;
    }
    let reset_ms = ((burst - *level) / rate * 1000.0).ceil() as u64;
    let headers = format!(
        "x-ratelimit-limit-requests: {}\r\nx-ratelimit-remaining-requests: {}\r\nx-ratelimit-reset-requests: {reset_ms}ms\r\n",
        burst as u64,
        level.max(0.0).floor() as u64
    );
    if admitted {
        Ok(headers)
    } else {
        let wait_ms = ((1.0 - *level) / rate * 1000.0).ceil() as u64;
        Err(format!("{headers}retry-after-ms: {wait_ms}\r\n"))
    }
}

fn serve(
    mut stream: TcpStream,
    counts: &Counts,
    ids: &[String],
    faults: &Faults,
    seq: &AtomicU64,
    bucket: &Mutex<Option<(f64, std::time::Instant)>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let body = String::from_utf8_lossy(&body).into_owned();
    counts.requests.fetch_add(1, Ordering::SeqCst);
    let path = request_line.split_whitespace().nth(1).unwrap_or_default();

    if faults
        .poison
        .as_ref()
        .is_some_and(|p| body.contains(p.as_str()))
    {
        counts.faults.fetch_add(1, Ordering::SeqCst);
        return respond(
            &mut stream,
            "500 Internal Server Error",
            "",
            r#"{"error":{"message":"poisoned","type":"server_error"}}"#,
        );
    }
    // A deterministic pseudo-random fault schedule.
    let n = seq.fetch_add(1, Ordering::SeqCst);
    let roll = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) % 100;
    if roll < faults.rate_percent {
        counts.faults.fetch_add(1, Ordering::SeqCst);
        return match n % 5 {
            0 => respond(
                &mut stream,
                "429 Too Many Requests",
                "retry-after-ms: 100\r\nretry-after: 1\r\n",
                r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
            ),
            1 => respond(
                &mut stream,
                "500 Internal Server Error",
                "",
                r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
            ),
            2 => {
                thread::sleep(faults.slow);
                respond(&mut stream, "200 OK", "", "{}")
            }
            3 => respond(&mut stream, "200 OK", "", r#"{"choices": [{"message": "#),
            _ => {
                // Promise 400 bytes, send 20, hang up.
                write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\nconnection: close\r\n\r\n{{\"object\": \"list\", "
                )?;
                stream.flush()
            }
        };
    }

    let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    if path.ends_with("/embeddings") {
        counts.embeddings.fetch_add(1, Ordering::SeqCst);
        let inputs: Vec<String> = match &json["input"] {
            serde_json::Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_owned())
                .collect(),
            serde_json::Value::String(s) => vec![s.clone()],
            _ => Vec::new(),
        };
        let data: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| serde_json::json!({"object": "embedding", "index": i, "embedding": embed(t)}))
            .collect();
        let out = serde_json::json!({
            "object": "list", "data": data, "model": json["model"],
            "usage": {"prompt_tokens": inputs.len() * 8, "total_tokens": inputs.len() * 8}
        });
        return respond(&mut stream, "200 OK", "", &out.to_string());
    }
    if path.ends_with("/chat/completions") {
        let limit_headers = match admit(faults, bucket) {
            Ok(headers) => headers,
            Err(headers) => {
                counts.throttled.fetch_add(1, Ordering::SeqCst);
                return respond(
                    &mut stream,
                    "429 Too Many Requests",
                    &headers,
                    r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
                );
            }
        };
        counts.chat.fetch_add(1, Ordering::SeqCst);
        let text: String = json["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter(|m| m["role"] == "user")
                    .filter_map(|m| m["content"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let mut found: Vec<(usize, &str)> = ids
            .iter()
            .filter_map(|id| text.find(id.as_str()).map(|at| (at, id.as_str())))
            .collect();
        found.sort_unstable();
        let ranked: Vec<&str> = found.into_iter().map(|(_, id)| id).take(6).collect();
        let content = serde_json::json!({ "ranked_ids": ranked }).to_string();
        let out = serde_json::json!({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_763_700_000,
            "model": json["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 500, "completion_tokens": 40, "total_tokens": 540}
        });
        return respond(&mut stream, "200 OK", &limit_headers, &out.to_string());
    }
    respond(
        &mut stream,
        "404 Not Found",
        "",
        r#"{"error":{"message":"no such route"}}"#,
    )
}
