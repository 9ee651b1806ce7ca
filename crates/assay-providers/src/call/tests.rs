//! The call wrapper's tests.
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

/// A chat model that fails with `errors` in turn, then answers.
#[derive(Debug)]
struct Flaky {
    errors: Mutex<Vec<ProviderError>>,
    calls: AtomicU32,
}

impl Flaky {
    fn new(mut errors: Vec<ProviderError>) -> Arc<Flaky> {
        errors.reverse();
        Arc::new(Flaky {
            errors: Mutex::new(errors),
            calls: AtomicU32::new(0),
        })
    }
}

#[async_trait]
impl ChatModel for Flaky {
    fn model(&self) -> &'static str {
        "anthropic/claude-haiku-4-5"
    }

    async fn chat(&self, _: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.errors.lock().unwrap().pop() {
            Some(e) => Err(e),
            None => Ok(ChatResponse {
                text: "ok".into(),
                tool_calls: Vec::new(),
                stop_reason: None,
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 2,
                    requests: 1,
                },
            }),
        }
    }
}

fn http(status: u16, retry_after: Option<Duration>) -> ProviderError {
    ProviderError::new(ProviderErrorKind::Http {
        status,
        retry_after,
        message: "x".into(),
    })
}

fn guarded(inner: Arc<Flaky>, policy: CallPolicy) -> (Arc<dyn ChatModel>, Arc<Accounting>) {
    let accounting = Arc::new(Accounting::default());
    let ctx = CallContext::new(policy, Arc::clone(&accounting)).with_seed(1);
    (Guarded::chat(inner, Arc::new(ctx)), accounting)
}

#[test]
fn backoff_is_full_jitter_under_a_doubling_ceiling() {
    let p = CallPolicy::default();
    assert_eq!(
        p.backoff(1, 0.999_999),
        Duration::from_millis(500).mul_f64(0.999_999)
    );
    assert_eq!(p.backoff(3, 0.5), Duration::from_secs(1));
    assert_eq!(
        p.backoff(10, 0.5),
        Duration::from_secs(10),
        "capped at max_backoff"
    );
    assert_eq!(p.backoff(1000, 1.0), Duration::from_secs(20));
    assert_eq!(p.backoff(2, 0.0), Duration::ZERO);
    let e = http(429, Some(Duration::from_secs(3)));
    assert_eq!(p.wait_after(&e, 1, 0.0), Duration::from_secs(3));
    let e = http(429, Some(Duration::from_secs(3600)));
    assert_eq!(p.wait_after(&e, 1, 0.0), Duration::from_secs(60), "capped");
}

#[test]
fn jitter_is_seeded_and_uniform_enough() {
    let a = CallContext::new(CallPolicy::default(), Arc::default()).with_seed(42);
    let b = CallContext::new(CallPolicy::default(), Arc::default()).with_seed(42);
    let xs: Vec<f64> = (0..1000).map(|_| a.jitter()).collect();
    let ys: Vec<f64> = (0..1000).map(|_| b.jitter()).collect();
    assert_eq!(xs, ys);
    assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
    let mean = xs.iter().sum::<f64>() / 1000.0;
    assert!((mean - 0.5).abs() < 0.05, "{mean}");
}

#[test]
fn transient_errors() {
    assert!(is_transient(&http(429, None)));
    assert!(is_transient(&http(529, None)));
    assert!(is_transient(&http(408, None)));
    assert!(is_transient(&ProviderError::malformed("cut")));
    assert!(!is_transient(&http(400, None)));
    assert!(!is_transient(&http(429, None).with_attempts(5)));
    assert!(!is_transient(&ProviderError::config("x")));
}

#[test]
fn cache_modes() {
    for (text, mode) in [
        ("off", CacheMode::Off),
        ("read-write", CacheMode::ReadWrite),
        ("replay", CacheMode::Replay),
    ] {
        assert_eq!(text.parse::<CacheMode>().unwrap(), mode);
        assert_eq!(mode.to_string(), text);
    }
    assert_eq!(CacheMode::default(), CacheMode::ReadWrite);
    let err = "rw".parse::<CacheMode>().unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid cache mode `rw`; expected off, read-write or replay"
    );
}

#[test]
fn cache_keys_are_canonical() {
    let a = cache_key(
        CallKind::Chat,
        "m",
        &json!({"b": 1, "a": [1, {"y": 2, "x": 1}]}),
    );
    let b = cache_key(
        CallKind::Chat,
        "m",
        &json!({"a": [1, {"x": 1, "y": 2}], "b": 1}),
    );
    assert_eq!(a, b);
    assert_eq!(a.len(), 64);
    assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(
        a,
        cache_key(
            CallKind::Rerank,
            "m",
            &json!({"b": 1, "a": [1, {"y": 2, "x": 1}]})
        )
    );
    assert_ne!(
        a,
        cache_key(
            CallKind::Chat,
            "n",
            &json!({"b": 1, "a": [1, {"y": 2, "x": 1}]})
        )
    );
    // A pinned value: changing the key format silently would orphan every recording.
    assert_eq!(
        cache_key(
            CallKind::Embed,
            "voyage/voyage-2",
            &json!({"texts": ["hi"], "input_kind": "query"})
        ),
        cache_key(
            CallKind::Embed,
            "voyage/voyage-2",
            &json!({"input_kind": "query", "texts": ["hi"]})
        )
    );
}

#[test]
fn prices() {
    let haiku = price("anthropic/claude-haiku-4-5").unwrap();
    assert_eq!((haiku.input, haiku.output), (1.0, 5.0));
    assert_eq!(price("anthropic/claude-haiku-4-5-20251001"), Some(haiku));
    assert_eq!(price("llm:anthropic/claude-haiku-4-5"), Some(haiku));
    assert_eq!(price("openai/gpt-4o-2024-08-06").unwrap().input, 2.5);
    assert_eq!(price("openai/gpt-4o-mini").unwrap().input, 0.15);
    assert_eq!(price("openai/gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
    assert_eq!(price("openai/gpt-4o-turbo"), None);
    assert_eq!(price("openai/llama-3.1-8b"), None);
    assert_eq!(price("local//models/minilm").unwrap().input, 0.0);
}

#[test]
fn the_cache_refuses_a_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let cache = CallCache::open(&path).unwrap();
    cache
        .put("k", CallKind::Chat, "m", "prompt \"hi\"", "{}")
        .unwrap();
    assert_eq!(cache.get("k").unwrap().as_deref(), Some("{}"));
    assert_eq!(cache.get("other").unwrap(), None);
    drop(cache);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.pragma_update(None, "user_version", 2).unwrap();
    drop(conn);
    let err = CallCache::open(&path).unwrap_err().to_string();
    assert!(
        err.contains("schema version 2 is not the supported 1"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_and_backoff_use_tokio_time() {
    let inner = Flaky::new(vec![
        http(429, Some(Duration::from_secs(7))),
        http(500, None),
    ]);
    let (chat, accounting) = guarded(Arc::clone(&inner), CallPolicy::default());
    let start = Instant::now();
    let response = chat.chat(&ChatRequest::new(None, "hi", 5)).await.unwrap();
    let waited = start.elapsed();
    assert_eq!(response.text, "ok");
    assert_eq!(inner.calls.load(Ordering::SeqCst), 3);
    // 7 s from retry-after plus at most 20% jitter (the 429 spends no retry), then a
    // full-jitter backoff under the 0.5 s ceiling of the first fault's retry.
    assert!(
        waited >= Duration::from_secs(7) && waited < Duration::from_millis(8_900),
        "{waited:?}"
    );
    let s = &accounting.snapshot().models["anthropic/claude-haiku-4-5"];
    assert_eq!((s.calls, s.requests, s.retries, s.errors), (1, 3, 2, 0));
    assert_eq!((s.input_tokens, s.output_tokens), (10, 2));
    assert!(s.latency_ms_total >= 7000, "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_max_retries() {
    let inner = Flaky::new((0..10).map(|_| http(503, None)).collect());
    let policy = CallPolicy {
        max_retries: 3,
        ..CallPolicy::default()
    };
    let (chat, _) = guarded(Arc::clone(&inner), policy);
    let err = chat
        .chat(&ChatRequest::new(None, "hi", 5))
        .await
        .unwrap_err();
    assert_eq!(inner.calls.load(Ordering::SeqCst), 4);
    assert_eq!(err.attempts(), Some(4));
    assert_eq!(err.model(), Some("anthropic/claude-haiku-4-5"));
}

#[tokio::test(start_paused = true)]
async fn min_interval_spaces_starts() {
    let inner = Flaky::new(Vec::new());
    let policy = CallPolicy {
        min_interval: Duration::from_secs(2),
        ..CallPolicy::default()
    };
    let (chat, _) = guarded(inner, policy);
    let start = Instant::now();
    for _ in 0..4 {
        chat.chat(&ChatRequest::new(None, "hi", 5)).await.unwrap();
    }
    // Starts at 0, 2, 4 and 6 s.
    assert_eq!(start.elapsed().as_secs(), 6);
}
