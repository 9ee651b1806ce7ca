//! Rate limits against a fake provider with token buckets (issue 23): a limit lowered mid-run
//! and raised again, a server that sends only `retry-after`, one that sends only the rate-limit
//! headers, a token limit smaller than one request, a 500 storm, the time bound of a call, and
//! three models behind one key-wide bucket with and without a declared shared limit.
//!
//! No assertion here is on timing: the outcomes (every call answered, errors and their kinds)
//! and counts with generous bounds, so a loaded machine cannot make them flaky.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assay_providers::{
    Accounting, AccountingSnapshot, AnthropicChat, CallContext, CallPolicy, ChatModel, ChatRequest,
    Guarded, LimitKind, LimitMemory, OpenAiChat, ProviderErrorKind, RateLimits,
};
use serde_json::json;

use crate::support::{FakeServer, Recorded, Reply, anthropic_key, openai_key};

/// Which headers the fake provider sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Headers {
    /// `retry-after`, `retry-after-ms` on a 429 and the rate-limit headers on every answer.
    All,
    /// Only `retry-after` and `retry-after-ms` on a 429.
    RetryAfter,
    /// Only the rate-limit headers (no `retry-after`).
    Rate,
}

#[derive(Debug)]
struct Bucket {
    capacity: f64,
    rate: f64,
    level: f64,
    at: Instant,
}

impl Bucket {
    fn new(capacity: f64, rate: f64) -> Bucket {
        Bucket {
            capacity,
            rate,
            level: capacity,
            at: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        self.level = (self.level + self.rate * (now - self.at).as_secs_f64()).min(self.capacity);
        self.at = now;
    }

    fn wait_for(&self, n: f64) -> Duration {
        Duration::from_secs_f64(((n - self.level) / self.rate).max(0.0))
    }

    fn reset(&self) -> Duration {
        Duration::from_secs_f64(((self.capacity - self.level) / self.rate).max(0.0))
    }
}

#[derive(Debug)]
struct Provider {
    requests: Bucket,
    tokens: Option<Bucket>,
    headers: Headers,
    anthropic: bool,
    latency: Duration,
    /// After this many admitted requests, the request limit becomes (capacity, rate).
    schedule: Vec<(usize, f64, f64)>,
    admitted: usize,
    throttled: usize,
    too_large: usize,
}

/// The tokens a request costs: its characters over four, plus `max_tokens`.
fn cost(body: &serde_json::Value) -> f64 {
    let chars = body["messages"].to_string().len() + body["system"].to_string().len();
    (chars / 4) as f64 + body["max_tokens"].as_f64().unwrap_or(0.0)
}

impl Provider {
    fn new(rps: f64, burst: f64, headers: Headers) -> Provider {
        Provider {
            requests: Bucket::new(burst, rps),
            tokens: None,
            headers,
            anthropic: false,
            latency: Duration::from_millis(20),
            schedule: Vec::new(),
            admitted: 0,
            throttled: 0,
            too_large: 0,
        }
    }

    fn answer(&mut self, request: &Recorded) -> Reply {
        let now = Instant::now();
        if let Some(&(after, capacity, rate)) = self.schedule.first()
            && self.admitted >= after
        {
            self.schedule.remove(0);
            self.requests.refill(now);
            self.requests.capacity = capacity;
            self.requests.rate = rate;
            self.requests.level = self.requests.level.min(capacity);
        }
        self.requests.refill(now);
        let need = cost(&request.body);
        if let Some(t) = &mut self.tokens {
            t.refill(now);
        }
        let too_large = self.tokens.as_ref().is_some_and(|t| need > t.capacity);
        let wait = self.requests.wait_for(1.0).max(
            self.tokens
                .as_ref()
                .map_or(Duration::ZERO, |t| t.wait_for(need)),
        );
        let admitted = !too_large && wait.is_zero();
        if admitted {
            self.admitted += 1;
            self.requests.level -= 1.0;
            if let Some(t) = &mut self.tokens {
                t.level -= need;
            }
        }
        let mut reply = if admitted {
            let body = if self.anthropic {
                json!({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                       "usage": {"input_tokens": 5, "output_tokens": 1}})
            } else {
                json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 1}})
            };
            Reply::json(&body).delay(self.latency)
        } else {
            self.throttled += 1;
            let message = if too_large {
                self.too_large += 1;
                "Request too large"
            } else {
                "Rate limit reached"
            };
            let mut reply = Reply::raw(429, &json!({"error": {"message": message}}).to_string());
            if !too_large && matches!(self.headers, Headers::All | Headers::RetryAfter) {
                reply = reply
                    .header(
                        "retry-after",
                        &(wait.as_secs_f64().ceil() as u64).to_string(),
                    )
                    .header(
                        "retry-after-ms",
                        &((wait.as_secs_f64() * 1000.0).ceil() as u64).to_string(),
                    );
            }
            reply
        };
        if matches!(self.headers, Headers::All | Headers::Rate) {
            let buckets = [
                ("requests", Some(&self.requests)),
                ("tokens", self.tokens.as_ref()),
            ];
            for (part, bucket) in buckets {
                let Some(b) = bucket else { continue };
                let limit = (b.capacity as u64).to_string();
                let remaining = (b.level.max(0.0).floor() as u64).to_string();
                let reset_ms = b.reset().as_secs_f64() * 1000.0;
                reply = if self.anthropic {
                    let at = std::time::SystemTime::now() + Duration::from_secs_f64(reset_ms / 1e3);
                    let (name_l, name_r, name_t) = match part {
                        "requests" => (
                            "anthropic-ratelimit-requests-limit",
                            "anthropic-ratelimit-requests-remaining",
                            "anthropic-ratelimit-requests-reset",
                        ),
                        _ => (
                            "anthropic-ratelimit-tokens-limit",
                            "anthropic-ratelimit-tokens-remaining",
                            "anthropic-ratelimit-tokens-reset",
                        ),
                    };
                    reply
                        .header(name_l, &limit)
                        .header(name_r, &remaining)
                        .header(name_t, &rfc3339(at))
                } else {
                    let (name_l, name_r, name_t) = match part {
                        "requests" => (
                            "x-ratelimit-limit-requests",
                            "x-ratelimit-remaining-requests",
                            "x-ratelimit-reset-requests",
                        ),
                        _ => (
                            "x-ratelimit-limit-tokens",
                            "x-ratelimit-remaining-tokens",
                            "x-ratelimit-reset-tokens",
                        ),
                    };
                    reply
                        .header(name_l, &limit)
                        .header(name_r, &remaining)
                        .header(name_t, &format!("{}ms", reset_ms.ceil() as u64))
                };
            }
        }
        reply
    }
}

/// `1994-11-06T08:49:37.250Z`.
fn rfc3339(at: std::time::SystemTime) -> String {
    let since = at.duration_since(std::time::UNIX_EPOCH).unwrap();
    let secs = since.as_secs().cast_signed();
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
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

async fn start(provider: Provider) -> (FakeServer, Arc<Mutex<Provider>>) {
    let provider = Arc::new(Mutex::new(provider));
    let shared = Arc::clone(&provider);
    let server = FakeServer::start(move |request| shared.lock().unwrap().answer(request)).await;
    (server, provider)
}

struct Client {
    chat: Arc<dyn ChatModel>,
    accounting: Arc<Accounting>,
    limits: Arc<RateLimits>,
}

fn client(server: &FakeServer, anthropic: bool, policy: CallPolicy) -> Client {
    client_with(server, anthropic, policy, RateLimits::new())
}

fn client_with(
    server: &FakeServer,
    anthropic: bool,
    policy: CallPolicy,
    limits: RateLimits,
) -> Client {
    let accounting = Arc::new(Accounting::default());
    let limits = Arc::new(limits);
    let ctx = CallContext::new(policy, Arc::clone(&accounting))
        .with_limits(Arc::clone(&limits))
        .with_seed(23);
    let options = server.provider_options();
    let inner: Arc<dyn ChatModel> = if anthropic {
        Arc::new(AnthropicChat::new("m", anthropic_key(), &options).unwrap())
    } else {
        Arc::new(OpenAiChat::new("m", Some(openai_key()), &options).unwrap())
    };
    Client {
        chat: Guarded::chat(inner, Arc::new(ctx)),
        accounting,
        limits,
    }
}

/// Every call of `calls`, all at once; the errors.
async fn run_all(chat: &Arc<dyn ChatModel>, calls: usize) -> Vec<String> {
    let mut tasks = Vec::new();
    for i in 0..calls {
        let chat = Arc::clone(chat);
        tasks.push(tokio::spawn(async move {
            chat.chat(&ChatRequest::new(None, format!("question {i}"), 20))
                .await
        }));
    }
    let mut errors = Vec::new();
    for task in tasks {
        if let Err(e) = task.await.unwrap() {
            errors.push(e.to_string());
        }
    }
    errors
}

fn policy(concurrency: usize, max_retries: u32) -> CallPolicy {
    CallPolicy {
        concurrency,
        max_retries,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        max_wait: Duration::from_secs(60),
        ..CallPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_limit_lowered_mid_run_down_and_back_up() {
    // 100 requests a second; after 40 admitted, 25 a second; after 80, 100 again.
    let mut provider = Provider::new(100.0, 100.0, Headers::All);
    provider.schedule = vec![(40, 25.0, 25.0), (80, 100.0, 100.0)];
    let (server, state) = start(provider).await;
    let c = client(&server, false, policy(8, 1));
    // Sample what the limiter believes the provider's pace is while the calls run.
    let limits = Arc::clone(&c.limits);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let samples = Arc::clone(&seen);
    let sampler = tokio::spawn(async move {
        loop {
            if let Some(rate) = limits
                .status_of("openai/m")
                .and_then(|s| s.requests_per_second)
            {
                samples.lock().unwrap().push(rate);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let errors = run_all(&c.chat, 130).await;
    sampler.abort();
    assert!(errors.is_empty(), "{errors:?}");
    let seen = seen.lock().unwrap().clone();
    let low = seen.iter().copied().fold(f64::INFINITY, f64::min);
    let low_at = seen.iter().position(|r| *r == low).unwrap();
    let high_after = seen[low_at..].iter().copied().fold(0.0, f64::max);
    assert!(
        (15.0..=35.0).contains(&low),
        "followed it down to {low}: {seen:?}"
    );
    assert!(high_after >= 70.0, "and back up to {high_after}: {seen:?}");
    let provider = state.lock().unwrap();
    let s = &c.accounting.snapshot().models["openai/m"];
    assert_eq!((s.calls, s.errors), (130, 0));
    assert_eq!(s.throttled, provider.throttled as u64);
    assert_eq!(s.requests, 130 + s.throttled);
    // Paced by the headers: the 429s are the few the lowering itself caused, not a storm.
    assert!(s.throttled <= 30, "{} 429s", s.throttled);
    assert!(s.rate_limit.clone().unwrap().wait_ms > 0, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_sends_only_retry_after() {
    // 100 requests a second, a burst of 20, 16 callers; 429s carry retry-after(-ms) only.
    let (server, state) = start(Provider::new(100.0, 20.0, Headers::RetryAfter)).await;
    // One retry for faults: a call survives its 429s only because they do not spend it.
    let c = client(&server, false, policy(16, 1));
    let errors = run_all(&c.chat, 240).await;
    assert!(errors.is_empty(), "{errors:?}");
    let s = &c.accounting.snapshot().models["openai/m"];
    assert_eq!((s.calls, s.errors), (240, 0));
    assert!(s.throttled > 0, "16 callers overrun 100 a second");
    assert_eq!(s.throttled, state.lock().unwrap().throttled as u64);
    // The pace is learned from retry-after within a few refusals and every caller is released
    // at it, one at a time: a few 429s, not one per answer (issue 32: 18 % of requests before
    // the pace was learned; measured here now about 5 %, bound loose for a loaded machine).
    let share = s.throttled as f64 / s.requests as f64;
    assert!(
        share < 0.10,
        "{} 429s of {} requests",
        s.throttled,
        s.requests
    );
    let limit = s.rate_limit.clone().unwrap();
    assert!(limit.min_concurrency < 16, "{limit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_run_starts_from_the_limit_the_last_one_learned() {
    // Retry-after only, as above: the first run learns the pace by being refused; the second,
    // given what the first learned, paces from its first request. Slow start off: a cold run
    // with it meets only 3 refusals on a loaded machine, as few as the second run's probes, so
    // the comparison would say nothing about memory (a run that remembers skips slow start
    // anyway).
    let mut runs = Vec::new();
    let mut memory = LimitMemory::empty();
    for _ in 0..2 {
        let (server, state) = start(Provider::new(100.0, 20.0, Headers::RetryAfter)).await;
        let c = client_with(
            &server,
            false,
            policy(16, 1),
            RateLimits::new()
                .with_slow_start(false)
                .with_memory(memory.clone()),
        );
        let started = Instant::now();
        let errors = run_all(&c.chat, 240).await;
        let took = started.elapsed();
        assert!(errors.is_empty(), "{errors:?}");
        let throttled = state.lock().unwrap().throttled;
        runs.push((throttled, took));
        memory = c.limits.learned();
    }
    let learned = &memory.models["openai/m"];
    assert!(learned.from_refusals, "{learned:?}");
    let bucket = learned.buckets[&LimitKind::Requests];
    // Loose bounds (a loaded machine shifts the timings): near the provider's 100 a second.
    assert!(
        (50.0..=130.0).contains(&bucket.per_second),
        "{bucket:?} after {runs:?}"
    );
    // Measured here: 8-14 refusals in the first run, 0-2 in the second, in about the same time
    // ((240 - 20) / 100 a second = 2.2 s at best).
    let ((first, first_took), (second, second_took)) = (runs[0], runs[1]);
    assert!(
        second <= 4 && second < first.max(1),
        "429s: first run {first}, second {second}"
    );
    assert!(
        second_took < first_took.mul_f64(1.5) + Duration::from_millis(500),
        "{first_took:?} then {second_took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_sends_only_rate_limit_headers() {
    for anthropic in [false, true] {
        // 100 requests a second, a burst of 10, 16 callers; no retry-after on a 429.
        let mut provider = Provider::new(100.0, 10.0, Headers::Rate);
        provider.anthropic = anthropic;
        let (server, _) = start(provider).await;
        let c = client(&server, anthropic, policy(16, 0));
        let errors = run_all(&c.chat, 80).await;
        assert!(errors.is_empty(), "anthropic {anthropic}: {errors:?}");
        let model = if anthropic { "anthropic/m" } else { "openai/m" };
        let s = &c.accounting.snapshot().models[model];
        assert_eq!((s.calls, s.errors), (80, 0));
        // The first wave (16 callers, 10 in the burst) knows nothing yet; after it, the headers
        // pace the rest before the limit is hit.
        assert!(
            s.throttled <= 24,
            "anthropic {anthropic}: {} 429s",
            s.throttled
        );
        let status = c.limits.status_of(model).unwrap();
        let rate = status.requests_per_second.unwrap();
        assert!((50.0..=200.0).contains(&rate), "{status:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_limit_smaller_than_one_request_is_a_clear_error() {
    // 100 tokens a second in all; a request asks for up to 500 output tokens.
    let mut provider = Provider::new(100.0, 100.0, Headers::All);
    provider.tokens = Some(Bucket::new(100.0, 100.0));
    let (server, state) = start(provider).await;
    let c = client(&server, false, policy(4, 4));
    let start = Instant::now();
    let err = c
        .chat
        .chat(&ChatRequest::new(None, "a question", 500))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ProviderErrorKind::TooLarge { limit: 100, unit: "tokens", need } if *need > 500
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("more than the provider's whole limit of 100 tokens"),
        "{text}"
    );
    assert!(!err.is_retryable());
    // Refused once by the provider, then known to be too large: no endless wait.
    assert_eq!(state.lock().unwrap().too_large, 1);
    assert_eq!(server.requests().len(), 1);
    assert!(start.elapsed() < Duration::from_secs(30));
    let s = &c.accounting.snapshot().models["openai/m"];
    assert_eq!((s.calls, s.errors, s.requests), (1, 1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_storm_still_spends_the_fault_retries_and_records_errors() {
    // Every other answer is a 429 (with retry-after 0), the rest 500s.
    let count = Arc::new(Mutex::new(0usize));
    let n = Arc::clone(&count);
    let server = FakeServer::start(move |_| {
        let mut n = n.lock().unwrap();
        *n += 1;
        if n.is_multiple_of(2) {
            Reply::raw(429, "slow down").header("retry-after-ms", "5")
        } else {
            Reply::raw(500, "upstream exploded")
        }
    })
    .await;
    let c = client(&server, false, policy(4, 2));
    let errors = run_all(&c.chat, 6).await;
    assert_eq!(errors.len(), 6, "{errors:?}");
    for e in &errors {
        assert!(e.contains("HTTP 500: upstream exploded"), "{e}");
    }
    let s = &c.accounting.snapshot().models["openai/m"];
    assert_eq!((s.calls, s.errors), (6, 6));
    let answers = server.requests().len() as u64;
    assert_eq!(s.requests, answers);
    // Each call got exactly max_retries + 1 = 3 faults; the 429s in between spent none.
    let faults = answers - s.throttled;
    assert_eq!(faults, 18, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_held_back_past_its_time_bound_is_an_error() {
    let server = FakeServer::always(
        Reply::raw(429, "slow down")
            .header("retry-after", "1")
            .header("retry-after-ms", "300"),
    )
    .await;
    let c = client(
        &server,
        false,
        CallPolicy {
            max_wait: Duration::from_millis(800),
            ..policy(2, 4)
        },
    );
    let start = Instant::now();
    let err = c
        .chat
        .chat(&ChatRequest::new(None, "hi", 20))
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ProviderErrorKind::RateLimited { throttled, .. } if *throttled >= 1),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("rate limited: still held back after"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
    let s = &c.accounting.snapshot().models["openai/m"];
    assert_eq!((s.calls, s.errors), (1, 1));
}

/// Three models behind one key-wide bucket (one API key's limit), each called by 8 callers;
/// `limits` is what their contexts share. Returns the 429s and the errors.
async fn three_models_one_bucket(limits: Arc<RateLimits>) -> (u64, Vec<String>) {
    three_models_one_bucket_with(limits, Headers::All, 6.0).await
}

async fn three_models_one_bucket_with(
    limits: Arc<RateLimits>,
    headers: Headers,
    burst: f64,
) -> (u64, Vec<String>) {
    let (throttled, errors, _) = three_models_one_bucket_counted(limits, headers, burst).await;
    (throttled, errors)
}

/// As [`three_models_one_bucket_with`], with the calls' accounting.
async fn three_models_one_bucket_counted(
    limits: Arc<RateLimits>,
    headers: Headers,
    burst: f64,
) -> (u64, Vec<String>, AccountingSnapshot) {
    // 60 requests a second for the key, a burst of `burst`; the headers (`All`) describe the
    // key's bucket.
    let (server, state) = start(Provider::new(60.0, burst, headers)).await;
    let accounting = Arc::new(Accounting::default());
    let options = server.provider_options();
    let mut tasks = Vec::new();
    for model in ["a", "b", "c"] {
        let ctx = CallContext::new(policy(8, 1), Arc::clone(&accounting))
            .with_limits(Arc::clone(&limits))
            .with_seed(23);
        let inner: Arc<dyn ChatModel> =
            Arc::new(OpenAiChat::new(model, Some(openai_key()), &options).unwrap());
        let chat = Guarded::chat(inner, Arc::new(ctx));
        tasks.push(tokio::spawn(async move { run_all(&chat, 40).await }));
    }
    let mut errors = Vec::new();
    for task in tasks {
        errors.extend(task.await.unwrap());
    }
    let throttled = state.lock().unwrap().throttled as u64;
    (throttled, errors, accounting.snapshot())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_that_share_a_key_wide_limit_pace_together_when_declared() {
    let alone = three_models_one_bucket(Arc::new(RateLimits::new().with_pooling(false))).await;
    let groups = [(
        "key".to_owned(),
        vec![
            "openai/a".to_owned(),
            "openai/b".to_owned(),
            "openai/c".to_owned(),
        ],
    )]
    .into_iter()
    .collect();
    let shared = three_models_one_bucket(Arc::new(RateLimits::with_shared(&groups).unwrap())).await;
    assert!(
        alone.1.is_empty() && shared.1.is_empty(),
        "{alone:?} {shared:?}"
    );
    // Measured here: each model on its own limiter, about 145 429s for 120 answers (each
    // believes it has the whole bucket); declared shared, 3 to 6. Bounds are loose (a loaded
    // machine shifts the timings), the gap is not.
    assert!(
        shared.0 <= 24,
        "{} 429s for 120 answers with the shared limit",
        shared.0
    );
    assert!(
        alone.0 >= 2 * shared.0.max(1),
        "alone {} vs shared {}",
        alone.0,
        shared.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_that_share_an_undeclared_limit_are_found_and_pooled() {
    for headers in [Headers::RetryAfter, Headers::All] {
        // A burst that takes the first 24 callers: what follows is the limit's doing. Slow
        // start off, so that the 24 start at once as this measures (with it, fewer 429s come
        // before pooling in both runs and on a loaded machine the gap closes).
        let alone = three_models_one_bucket_with(
            Arc::new(RateLimits::new().with_pooling(false).with_slow_start(false)),
            headers,
            30.0,
        )
        .await;
        let limits = Arc::new(RateLimits::new().with_slow_start(false));
        let pooled = three_models_one_bucket_with(Arc::clone(&limits), headers, 30.0).await;
        assert!(
            alone.1.is_empty() && pooled.1.is_empty(),
            "{headers:?}: {alone:?} {pooled:?}"
        );
        // Refused together while their own limiters had room: pooled into one, found after a
        // few refusals and named in the status.
        let found = limits.pooled();
        let name = "shared:auto (openai/a, openai/b, openai/c)";
        assert_eq!(
            found.values().collect::<Vec<_>>(),
            [name, name, name],
            "{headers:?}: {found:?}"
        );
        assert_eq!(limits.status_of("openai/b").unwrap().model, name);
        assert_eq!(limits.status().len(), 1, "{:?}", limits.status());
        // Loose bounds (exact figures: bench/ratelimit). About 18 of these 429s are the first
        // wave (24 callers start at once, before anything is known); measured here, pooled
        // 20-33, a limiter per model 38-47 (`RetryAfter`) and about 100 (`All`).
        assert!(
            pooled.0 <= 45 && alone.0 > pooled.0,
            "{headers:?}: alone {} vs pooled {} 429s for 120 answers",
            alone.0,
            pooled.0
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_whose_headers_move_together_are_pooled_before_they_are_refused() {
    // A burst of 60 takes the first 24 callers and more: no 429 is due before the bucket runs
    // low, and by then each model's headers have shown it drained by requests it did not send.
    let alone = three_models_one_bucket_counted(
        Arc::new(RateLimits::new().with_pooling(false)),
        Headers::All,
        60.0,
    )
    .await;
    let limits = Arc::new(RateLimits::new());
    let pooled = three_models_one_bucket_counted(Arc::clone(&limits), Headers::All, 60.0).await;
    assert!(
        alone.1.is_empty() && pooled.1.is_empty(),
        "{:?} {:?}",
        alone.1,
        pooled.1
    );
    let name = "shared:auto (openai/a, openai/b, openai/c)";
    assert_eq!(
        limits.pooled().values().collect::<Vec<_>>(),
        [name, name, name],
        "{:?}",
        limits.pooled()
    );
    // The accounting (and so every report) names the limiter each model was counted against.
    for model in ["openai/a", "openai/b", "openai/c"] {
        let rate = pooled.2.models[model].rate_limit.as_ref().unwrap();
        assert_eq!(rate.limiter.as_deref(), Some(name), "{model}: {rate:?}");
        let own = alone.2.models[model].rate_limit.as_ref().unwrap();
        assert_eq!(own.limiter, None, "{model}: {own:?}");
    }
    // Loose bound (exact figures: bench/ratelimit): pooled in time, few or no 429s; each on
    // its own limiter believes it has the whole bucket.
    assert!(
        pooled.0 <= 12 && alone.0 > pooled.0,
        "alone {} vs pooled {} 429s for 120 answers",
        alone.0,
        pooled.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_with_limits_of_their_own_are_not_pooled() {
    // One bucket per model on one account: never refused together while believing they had
    // room, so each keeps its limiter.
    let providers: Vec<Arc<Mutex<Provider>>> = (0..2)
        .map(|_| Arc::new(Mutex::new(Provider::new(60.0, 6.0, Headers::RetryAfter))))
        .collect();
    let by_model = providers.clone();
    let server = FakeServer::start(move |request| {
        let b = usize::from(request.body["model"] == "b");
        by_model[b].lock().unwrap().answer(request)
    })
    .await;
    // Slow start off: both models' windows would otherwise grow in step and reach their own
    // buckets at the same moment, which on a loaded machine can look like one shared limit
    // (see the issue 45 note; `pool_shared_limits = false` is the way out for a user).
    let limits = Arc::new(RateLimits::new().with_slow_start(false));
    let accounting = Arc::new(Accounting::default());
    let options = server.provider_options();
    let mut tasks = Vec::new();
    for model in ["a", "b"] {
        let ctx = CallContext::new(policy(8, 1), Arc::clone(&accounting))
            .with_limits(Arc::clone(&limits))
            .with_seed(23);
        let inner: Arc<dyn ChatModel> =
            Arc::new(OpenAiChat::new(model, Some(openai_key()), &options).unwrap());
        let chat = Guarded::chat(inner, Arc::new(ctx));
        tasks.push(tokio::spawn(async move { run_all(&chat, 40).await }));
    }
    for task in tasks {
        let errors = task.await.unwrap();
        assert!(errors.is_empty(), "{errors:?}");
    }
    assert!(limits.pooled().is_empty(), "{:?}", limits.pooled());
    assert_eq!(limits.status().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_limit_adds_no_wait() {
    // No limit at all and no rate-limit headers: 64 calls, 16 at a time, 20 ms each. With
    // slow start off nothing is held back.
    let server = FakeServer::always(
        Reply::json(
            &json!({"choices": [{"index": 0, "message": {"role": "assistant",
            "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1}}),
        )
        .delay(Duration::from_millis(20)),
    )
    .await;
    let c = client_with(
        &server,
        false,
        policy(16, 1),
        RateLimits::new().with_slow_start(false),
    );
    let start = Instant::now();
    let errors = run_all(&c.chat, 64).await;
    let took = start.elapsed();
    assert!(errors.is_empty(), "{errors:?}");
    let s = &c.accounting.snapshot().models["openai/m"];
    assert_eq!((s.calls, s.requests, s.throttled), (64, 64, 0));
    let limit = s.rate_limit.clone().unwrap();
    assert_eq!((limit.wait_ms, limit.min_concurrency), (0, 16), "{limit:?}");
    // The ideal is 4 x 20 ms; a loaded machine adds its own delays, the limiter none.
    assert!(took < Duration::from_secs(5), "{took:?}");

    // Slow start on (the default): a provider that says nothing about its limits is probed
    // from 4 calls in flight up; the window reaches the ceiling and nothing is refused or
    // lowered.
    let c = client(&server, false, policy(16, 1));
    let errors = run_all(&c.chat, 64).await;
    assert!(errors.is_empty(), "{errors:?}");
    let s = &c.accounting.snapshot().models["openai/m"];
    assert_eq!((s.calls, s.requests, s.throttled), (64, 64, 0));
    let limit = s.rate_limit.clone().unwrap();
    assert_eq!(
        (limit.concurrency, limit.min_concurrency),
        (16, 16),
        "{limit:?}"
    );
}
