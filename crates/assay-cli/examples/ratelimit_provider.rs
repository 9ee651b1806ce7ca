//! A rate-limited two-format provider for the rate-limit benchmark (`bench/ratelimit/run.sh`):
//! one local server that speaks the OpenAI chat-completions (`POST /v1/chat/completions`) and
//! the Anthropic Messages (`POST /v1/messages`) wire formats behind a token bucket per model on
//! requests and on tokens, as the big providers do.
//!
//! - **Buckets.** Per model: `--rps` requests a second with a burst of `--request-burst`
//!   (default one second's worth), and `--tps` tokens a second with a burst of `--token-burst`
//!   (default one second's worth; `--tps 0`: no token limit). A request costs one request and
//!   its estimated tokens: the characters of its system prompt, messages, tools and schema over
//!   four, plus its `max_tokens` (providers count the most a request may produce when they
//!   admit it). Admission happens when the request arrives; then the answer comes after
//!   `--latency-ms`.
//! - **Headers.** Every answer carries the buckets' state after admission: OpenAI's
//!   `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (reset as a Go duration, `25ms`,
//!   `1.2s`) on `/v1/chat/completions`, Anthropic's
//!   `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` (reset an RFC 3339 time) on
//!   `/v1/messages`. A refused request gets 429 with `retry-after` (whole seconds, rounded up,
//!   as the providers send it), `retry-after-ms` and the same headers. `--headers all` (the
//!   default), `retry-after` (only `retry-after` and `retry-after-ms`), `rate` (only the
//!   rate-limit headers) or `none`. A request needing more tokens than the whole burst is
//!   refused with "request too large". `--key-wide`: one pair of buckets for every model, as a
//!   provider counts an API key's requests (models sharing a limit nobody declared).
//! - **Answers.** The LLM reranker's requests (a `Candidates:` list of `- id:` lines) get
//!   `{"ranked_ids": [...]}` with the first six ids; everything else is answered by the scripted
//!   simulator provider (`sim_provider.rs`: the simulated user, the model under test with tool
//!   calls, the judge), so `assay simulate` on scout-quest runs against it.
//! - `GET /stats`: requests, answered, throttled (429), the tokens of answered requests, the
//!   span from the first request's arrival to the last answer, the most in flight.
//!   `POST /reset`: counters to zero and every bucket full again (between tools, so each starts
//!   from the same state). `--dump FILE`: every admitted request's body, one JSON line each (to
//!   replay the same workload with other tools).
//!
//! ```sh
//! cargo run --release -p assay-cli --example ratelimit_provider -- --port 0 --rps 40 --tps 20000
//! ```
//!
//! It prints `http://127.0.0.1:<port>` on its first line of stdout and serves until killed.

#[path = "sim_provider.rs"]
mod sim_provider;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

/// Which headers the server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Headers {
    All,
    RetryAfter,
    Rate,
    None,
}

#[derive(Debug, Clone, Copy)]
struct Config {
    rps: f64,
    request_burst: f64,
    tps: f64,
    token_burst: f64,
    latency: Duration,
    headers: Headers,
    /// One bucket for every model (an API key's limit) instead of one per model.
    key_wide: bool,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    capacity: f64,
    rate: f64,
    level: f64,
    at: Instant,
}

impl Bucket {
    fn new(capacity: f64, rate: f64, now: Instant) -> Bucket {
        Bucket {
            capacity,
            rate,
            level: capacity,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        self.level = (self.level + self.rate * (now - self.at).as_secs_f64()).min(self.capacity);
        self.at = now;
    }

    /// How long until `n` is available (zero: now).
    fn wait_for(&self, n: f64) -> Duration {
        if self.level >= n {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((n - self.level) / self.rate)
        }
    }

    /// How long until it is full.
    fn reset(&self) -> Duration {
        Duration::from_secs_f64(((self.capacity - self.level) / self.rate).max(0.0))
    }
}

#[derive(Debug)]
struct Buckets {
    requests: Bucket,
    tokens: Option<Bucket>,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    answered: AtomicU64,
    throttled: AtomicU64,
    too_large: AtomicU64,
    tokens: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

struct Server {
    config: Config,
    buckets: Mutex<HashMap<String, Buckets>>,
    counters: Counters,
    /// First arrival and last answer since the last reset.
    span: Mutex<(Option<Instant>, Option<Instant>)>,
    dump: Option<Mutex<std::fs::File>>,
    sim_stats: Arc<sim_provider::Stats>,
}

type Shared = Arc<Server>;

/// The characters of what a request sends, over four, plus its `max_tokens`.
fn estimate(body: &Value) -> (u64, u64) {
    let mut chars = 0usize;
    let mut text = |v: &Value| chars += v.to_string().len();
    for key in ["system", "messages", "tools", "response_format"] {
        if let Some(v) = body.get(key) {
            text(v);
        }
    }
    let output = ["max_tokens", "max_completion_tokens"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_u64))
        .unwrap_or(1024);
    ((chars as u64).div_ceil(4), output)
}

/// `25ms`, `1.2s`, `1m3.5s`: a duration as OpenAI writes it (Go's format).
fn go_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        return format!("{}ms", ms.ceil() as u64);
    }
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        return format!("{}s", (secs * 1000.0).ceil() / 1000.0);
    }
    let minutes = (secs / 60.0).floor();
    format!(
        "{}m{}s",
        minutes as u64,
        ((secs - minutes * 60.0) * 1000.0).ceil() / 1000.0
    )
}

/// An RFC 3339 UTC time with milliseconds, `2026-11-25T06:33:53.250Z`.
fn rfc3339(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs().cast_signed();
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // civil_from_days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The rate-limit headers of the buckets' state, in the wire format's family.
fn rate_headers(out: &mut HeaderMap, buckets: &Buckets, anthropic: bool) {
    let mut put = |name: String, value: String| {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            out.insert(name, value);
        }
    };
    let now = SystemTime::now();
    let families = [
        ("requests", Some(buckets.requests)),
        ("tokens", buckets.tokens),
    ];
    for (part, bucket) in families {
        let Some(b) = bucket else { continue };
        let remaining = b.level.max(0.0).floor() as u64;
        if anthropic {
            put(
                format!("anthropic-ratelimit-{part}-limit"),
                format!("{}", b.capacity as u64),
            );
            put(
                format!("anthropic-ratelimit-{part}-remaining"),
                remaining.to_string(),
            );
            put(
                format!("anthropic-ratelimit-{part}-reset"),
                rfc3339(now + b.reset()),
            );
        } else {
            put(
                format!("x-ratelimit-limit-{part}"),
                format!("{}", b.capacity as u64),
            );
            put(
                format!("x-ratelimit-remaining-{part}"),
                remaining.to_string(),
            );
            put(format!("x-ratelimit-reset-{part}"), go_duration(b.reset()));
        }
    }
}

fn error_body(anthropic: bool, kind: &str, message: &str) -> Value {
    if anthropic {
        json!({"type": "error", "error": {"type": kind, "message": message}})
    } else {
        json!({"error": {"message": message, "type": kind, "code": "rate_limit_exceeded"}})
    }
}

/// The candidate ids of a reranking prompt (`- id: <id>` lines), in order, at most six.
fn candidate_ids(body: &Value, anthropic: bool) -> Option<Vec<String>> {
    let messages = body.get("messages")?.as_array()?;
    let last = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
    let text = match last.get("content")? {
        Value::String(s) => s.clone(),
        other if anthropic => other.to_string(),
        _ => return None,
    };
    if !text.contains("Candidates:") {
        return None;
    }
    let mut ids: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(id) = line.trim_start().strip_prefix("- id:") {
            let id = id.trim().to_owned();
            if !id.is_empty() && !ids.contains(&id) && ids.len() < 6 {
                ids.push(id);
            }
        }
    }
    Some(ids)
}

fn rerank_answer(body: &Value, anthropic: bool, ids: &[String], input: u64) -> Response {
    let value = json!({"ranked_ids": ids});
    if anthropic {
        let name = body["tool_choice"]["name"].clone();
        Json(json!({
            "id": "msg_rl", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "tool_use", "id": "toolu_rank", "name": name, "input": value}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 20}
        }))
        .into_response()
    } else {
        Json(json!({
            "id": "chatcmpl-rl", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": value.to_string()},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": input, "completion_tokens": 20, "total_tokens": input + 20}
        }))
        .into_response()
    }
}

async fn chat(State(server): State<Shared>, uri: Uri, body: Bytes) -> Response {
    let anthropic = uri.path().ends_with("/messages");
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned();
    let (input, output) = estimate(&body);
    let need = (input + output) as f64;
    let c = server.config;
    let now = Instant::now();
    server.counters.requests.fetch_add(1, Ordering::SeqCst);
    {
        let mut span = server.span.lock().expect("span");
        span.0.get_or_insert(now);
    }
    let mut headers = HeaderMap::new();
    let refused = {
        let mut all = server.buckets.lock().expect("buckets");
        let bucket_of = if c.key_wide { "*" } else { model.as_str() };
        let buckets = all.entry(bucket_of.to_owned()).or_insert_with(|| Buckets {
            requests: Bucket::new(c.request_burst, c.rps, now),
            tokens: (c.tps > 0.0).then(|| Bucket::new(c.token_burst, c.tps, now)),
        });
        buckets.requests.refill(now);
        if let Some(t) = &mut buckets.tokens {
            t.refill(now);
        }
        let too_large = buckets.tokens.is_some_and(|t| need > t.capacity);
        let wait = buckets
            .requests
            .wait_for(1.0)
            .max(buckets.tokens.map_or(Duration::ZERO, |t| t.wait_for(need)));
        let refused = if too_large {
            Some((Duration::ZERO, true))
        } else if wait > Duration::ZERO {
            Some((wait, false))
        } else {
            buckets.requests.level -= 1.0;
            if let Some(t) = &mut buckets.tokens {
                t.level -= need;
            }
            None
        };
        if matches!(c.headers, Headers::All | Headers::Rate) {
            rate_headers(&mut headers, buckets, anthropic);
        }
        refused
    };
    if let Some((wait, too_large)) = refused {
        let message = if too_large {
            server.counters.too_large.fetch_add(1, Ordering::SeqCst);
            format!(
                "Request too large for {model}: Limit {}, Requested {}",
                c.token_burst as u64, need as u64
            )
        } else {
            format!("Rate limit reached for {model}; try again later")
        };
        server.counters.throttled.fetch_add(1, Ordering::SeqCst);
        if !too_large && matches!(c.headers, Headers::All | Headers::RetryAfter) {
            let ms = wait.as_secs_f64() * 1000.0;
            headers.insert(
                "retry-after",
                HeaderValue::from(wait.as_secs_f64().ceil() as u64),
            );
            headers.insert(
                "retry-after-ms",
                HeaderValue::try_from(format!("{}", ms.ceil() as u64)).expect("a number"),
            );
        }
        let kind = if anthropic {
            "rate_limit_error"
        } else {
            "requests"
        };
        return (
            StatusCode::TOO_MANY_REQUESTS,
            headers,
            Json(error_body(anthropic, kind, &message)),
        )
            .into_response();
    }
    if let Some(dump) = &server.dump {
        let mut line =
            json!({"wire": if anthropic {"anthropic"} else {"openai"}, "body": body}).to_string();
        line.push('\n');
        let _ = dump.lock().expect("dump").write_all(line.as_bytes());
    }
    let now_in = server.counters.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    server
        .counters
        .max_in_flight
        .fetch_max(now_in, Ordering::SeqCst);
    tokio::time::sleep(c.latency).await;
    server.counters.in_flight.fetch_sub(1, Ordering::SeqCst);
    let mut response = match candidate_ids(&body, anthropic) {
        Some(ids) => rerank_answer(&body, anthropic, &ids, input),
        None => {
            sim_provider::answer(
                sim_provider::Behaviour::default(),
                Arc::clone(&server.sim_stats),
                anthropic,
                body,
            )
            .await
        }
    };
    response.headers_mut().extend(headers);
    server.counters.answered.fetch_add(1, Ordering::SeqCst);
    server
        .counters
        .tokens
        .fetch_add(input + output, Ordering::SeqCst);
    server.span.lock().expect("span").1 = Some(Instant::now());
    response
}

async fn stats(State(server): State<Shared>) -> Json<Value> {
    let c = &server.counters;
    let span = *server.span.lock().expect("span");
    let span_ms = match span {
        (Some(a), Some(b)) if b > a => (b - a).as_secs_f64() * 1000.0,
        _ => 0.0,
    };
    Json(json!({
        "requests": c.requests.load(Ordering::SeqCst),
        "answered": c.answered.load(Ordering::SeqCst),
        "throttled": c.throttled.load(Ordering::SeqCst),
        "too_large": c.too_large.load(Ordering::SeqCst),
        "tokens": c.tokens.load(Ordering::SeqCst),
        "span_ms": span_ms,
        "max_in_flight": c.max_in_flight.load(Ordering::SeqCst),
        "config": {
            "rps": server.config.rps, "request_burst": server.config.request_burst,
            "tps": server.config.tps, "token_burst": server.config.token_burst,
            "latency_ms": server.config.latency.as_millis() as u64,
        },
    }))
}

async fn reset(State(server): State<Shared>) -> Json<Value> {
    let c = &server.counters;
    for counter in [
        &c.requests,
        &c.answered,
        &c.throttled,
        &c.too_large,
        &c.tokens,
        &c.max_in_flight,
    ] {
        counter.store(0, Ordering::SeqCst);
    }
    *server.span.lock().expect("span") = (None, None);
    server.buckets.lock().expect("buckets").clear();
    Json(json!({"reset": true}))
}

fn parse_args() -> Result<(u16, Config, Option<String>), String> {
    let mut port = 0u16;
    let mut config = Config {
        rps: 40.0,
        request_burst: 0.0,
        tps: 0.0,
        token_burst: 0.0,
        latency: Duration::from_millis(100),
        headers: Headers::All,
        key_wide: false,
    };
    let mut dump = None;
    let mut args = std::env::args().skip(1);
    let number = |v: Option<String>, flag: &str| -> Result<f64, String> {
        v.ok_or(format!("{flag} needs a value"))?
            .parse::<f64>()
            .map_err(|e| format!("{flag}: {e}"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => port = number(args.next(), "--port")? as u16,
            "--rps" => config.rps = number(args.next(), "--rps")?,
            "--request-burst" => config.request_burst = number(args.next(), "--request-burst")?,
            "--tps" => config.tps = number(args.next(), "--tps")?,
            "--token-burst" => config.token_burst = number(args.next(), "--token-burst")?,
            "--latency-ms" => {
                config.latency =
                    Duration::from_secs_f64(number(args.next(), "--latency-ms")? / 1e3);
            }
            "--headers" => {
                config.headers = match args.next().as_deref() {
                    Some("all") => Headers::All,
                    Some("retry-after") => Headers::RetryAfter,
                    Some("rate") => Headers::Rate,
                    Some("none") => Headers::None,
                    other => return Err(format!("--headers: unknown {other:?}")),
                };
            }
            "--key-wide" => config.key_wide = true,
            "--dump" => dump = Some(args.next().ok_or("--dump needs a file")?),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    // Written so that NaN is refused too.
    if config.rps.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Err("--rps must be more than 0".into());
    }
    if config.request_burst <= 0.0 {
        config.request_burst = config.rps.max(1.0);
    }
    if config.token_burst <= 0.0 {
        config.token_burst = config.tps;
    }
    Ok((port, config, dump))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (port, config, dump) = parse_args()?;
    let dump = match dump {
        Some(path) => Some(Mutex::new(std::fs::File::create(path)?)),
        None => None,
    };
    let server: Shared = Arc::new(Server {
        config,
        buckets: Mutex::new(HashMap::new()),
        counters: Counters::default(),
        span: Mutex::new((None, None)),
        dump,
        sim_stats: Arc::new(sim_provider::Stats::default()),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/messages", post(chat))
        .route("/chat/completions", post(chat))
        .route("/stats", get(stats))
        .route("/reset", post(reset))
        .with_state(server);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    let addr = listener.local_addr()?;
    let mut line = String::new();
    let _ = write!(line, "http://{addr}");
    #[allow(clippy::print_stdout)]
    {
        println!("{line}");
    }
    std::io::stdout().flush()?;
    axum::serve(listener, app).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_times_as_the_providers_write_them() {
        assert_eq!(go_duration(Duration::from_millis(25)), "25ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(63_500)), "1m3.5s");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(784_111_777_250)),
            "1994-11-06T08:49:37.250Z"
        );
    }

    #[test]
    fn a_bucket_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(4.0, 40.0, t0);
        b.level = 0.0;
        assert_eq!(b.wait_for(1.0), Duration::from_millis(25));
        b.refill(t0 + Duration::from_millis(50));
        assert!((b.level - 2.0).abs() < 1e-9);
        assert_eq!(b.reset(), Duration::from_millis(50));
    }
}
