use super::*;

#[test]
fn models_of_a_shared_limit_share_one_limiter() {
    let groups: BTreeMap<String, Vec<String>> = [(
        "team_key".to_owned(),
        vec!["openai/a".to_owned(), "openai/b".to_owned()],
    )]
    .into_iter()
    .collect();
    let limits = RateLimits::with_shared(&groups).unwrap();
    let a = limits.limiter("openai/a", 4);
    let b = limits.limiter("llm:openai/b", 4);
    let c = limits.limiter("openai/c", 4);
    assert!(Arc::ptr_eq(&a, &b));
    assert!(!Arc::ptr_eq(&a, &c));
    assert_eq!(limits.status().len(), 2);
    assert_eq!(
        limits.status_of("openai/b").unwrap().model,
        "shared:team_key (openai/a, openai/b)"
    );
    let twice: BTreeMap<String, Vec<String>> = [
        ("x".to_owned(), vec!["openai/a".to_owned()]),
        ("y".to_owned(), vec!["openai/a".to_owned()]),
    ]
    .into_iter()
    .collect();
    let e = RateLimits::with_shared(&twice).unwrap_err();
    assert!(e.contains("`openai/a` is in two shared limits"), "{e}");
}

fn seen(kind: LimitKind, limit: f64, remaining: f64, reset_ms: u64) -> RateHeaders {
    RateHeaders {
        limits: vec![LimitObservation {
            kind,
            limit,
            remaining,
            reset: Some(Duration::from_millis(reset_ms)),
        }],
    }
}

fn cost(input: u64, output: u64) -> RequestCost {
    RequestCost {
        input_tokens: input,
        output_tokens: output,
    }
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

#[tokio::test(start_paused = true)]
async fn starts_at_the_ceiling_and_halves_once_per_congestion_event() {
    let limits = RateLimits::new();
    let l = limits.limiter("llm:openai/m", 16);
    let permits: Vec<Permit> = {
        let mut v = Vec::new();
        for _ in 0..16 {
            v.push(l.acquire(cost(10, 10), far(), false).await.unwrap());
        }
        v
    };
    assert_eq!(limits.status_of("openai/m").unwrap().in_flight, 16);
    // Every one of the 16 is refused: one congestion event, one halving.
    for p in permits {
        p.finish(
            Outcome::Throttled(Some(Duration::from_millis(100))),
            None,
            None,
            0.0,
        );
    }
    let s = limits.status_of("openai/m").unwrap();
    assert_eq!((s.concurrency, s.min_concurrency, s.throttled), (8, 8, 16));
    // A request sent after the decrease and refused halves it again.
    tokio::time::advance(Duration::from_millis(200)).await;
    let p = l.acquire(cost(10, 10), far(), false).await.unwrap();
    p.finish(Outcome::Throttled(None), None, None, 0.0);
    assert_eq!(limits.status_of("openai/m").unwrap().concurrency, 4);
}

#[tokio::test(start_paused = true)]
async fn grows_back_by_one_per_window_of_successes_while_saturated() {
    let limits = RateLimits::new();
    let l = limits.limiter("openai/m", 4);
    l.lock().limit = 1.0;
    for expected in [2, 3, 4, 4] {
        // Saturate: one in flight, a second caller would have to wait.
        let cap = l.status().concurrency;
        let mut permits = Vec::new();
        for _ in 0..cap {
            permits.push(l.acquire(cost(1, 1), far(), false).await.unwrap());
        }
        assert!(matches!(
            l.lock().try_start(Instant::now(), cost(1, 1), false),
            Ok(Err(Wait::Slot))
        ));
        for p in permits {
            p.finish(Outcome::Success, None, None, 0.0);
        }
        assert_eq!(l.status().concurrency, expected);
    }
    // Unsaturated successes do not raise it: no evidence it would help.
    {
        let mut state = l.lock();
        state.limit = 2.0;
        state.saturated = false;
    }
    for _ in 0..10 {
        l.acquire(cost(1, 1), far(), false).await.unwrap().finish(
            Outcome::Success,
            None,
            None,
            0.0,
        );
    }
    assert_eq!(l.status().concurrency, 2);
}

#[tokio::test(start_paused = true)]
async fn the_gate_releases_waiters_one_at_a_time() {
    let limits = Arc::new(RateLimits::new());
    let l = limits.limiter("openai/m", 8);
    let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
    p.finish(
        Outcome::Throttled(Some(Duration::from_millis(50))),
        None,
        None,
        0.0,
    );
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let l = Arc::clone(&l);
        tasks.push(tokio::spawn(async move {
            let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
            let at = Instant::now();
            p.finish(Outcome::Success, None, None, 0.0);
            at
        }));
    }
    let mut starts = Vec::new();
    for t in tasks {
        starts.push(t.await.unwrap() - start);
    }
    starts.sort();
    // The gate (50 ms, jitter 0 here) then one start per spacing, not all at once.
    assert_eq!(starts[0], Duration::from_millis(50));
    for pair in starts.windows(2) {
        assert!(pair[1] > pair[0], "{starts:?}");
    }
    assert!(
        starts[3] >= Duration::from_millis(50 + 3 * 30),
        "{starts:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn headers_pace_requests_before_the_limit_is_hit() {
    let limits = RateLimits::new();
    let l = limits.limiter("openai/m", 16);
    // 10 requests per second, 5 left after the first: the rate is (10 - 5) / 0.5 s.
    let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
    p.finish(
        Outcome::Success,
        Some(&seen(LimitKind::Requests, 10.0, 5.0, 500)),
        None,
        0.0,
    );
    let s = l.status();
    assert!(
        (s.requests_per_second.unwrap() - 10.0).abs() < 1e-6,
        "{s:?}"
    );
    let start = Instant::now();
    for _ in 0..15 {
        l.acquire(cost(1, 1), far(), false).await.unwrap().finish(
            Outcome::Success,
            None,
            None,
            0.0,
        );
    }
    // 4 at once (the 5th would eat into the cushion of a sixth of a request plus 5 ms of
    // refill), then 11 more at 10 a second, the first of them as soon as the cushion is
    // there: 1/6 + 0.05 of a request = 21.7 ms, then 10 x 100 ms.
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1015) && took <= Duration::from_millis(1030),
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_larger_than_the_token_limit_fails_once_refused() {
    let limits = RateLimits::new();
    let l = limits.limiter("anthropic/m", 4);
    let p = l.acquire(cost(900, 300), far(), false).await.unwrap();
    p.finish(
        Outcome::Throttled(None),
        Some(&seen(LimitKind::Tokens, 1000.0, 1000.0, 0)),
        None,
        0.0,
    );
    let err = l.acquire(cost(900, 300), far(), true).await.err().unwrap();
    assert_eq!(
        err,
        Blocked::TooLarge {
            kind: LimitKind::Tokens,
            need: 1200,
            limit: 1000
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_past_the_deadline_fails_at_once() {
    let limits = RateLimits::new();
    let l = limits.limiter("openai/m", 4);
    let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
    p.finish(
        Outcome::Throttled(Some(Duration::from_secs(30))),
        None,
        None,
        0.0,
    );
    let start = Instant::now();
    let err = l
        .acquire(cost(1, 1), start + Duration::from_secs(10), false)
        .await
        .err()
        .unwrap();
    assert_eq!(err, Blocked::PastDeadline);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_permit_frees_its_slot() {
    let limits = RateLimits::new();
    let l = limits.limiter("openai/m", 1);
    let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
    assert_eq!(l.status().in_flight, 1);
    drop(p);
    assert_eq!(l.status().in_flight, 0);
    let _p = l.acquire(cost(1, 1), far(), false).await.unwrap();
}

#[test]
fn costs() {
    let c = RequestCost::of_chat(&ChatRequest::new(Some("x".repeat(40)), "y".repeat(40), 100));
    assert_eq!((c.input_tokens, c.output_tokens), (20 + 8, 100));
    assert_eq!(c.of(LimitKind::Tokens), 128.0);
    assert_eq!(c.of(LimitKind::Requests), 1.0);
    assert_eq!(RequestCost::of_text(9).input_tokens, 3);
}

#[test]
fn registry_keys_drop_the_llm_prefix_and_raise_ceilings() {
    let limits = RateLimits::new();
    let a = limits.limiter("llm:anthropic/m", 4);
    let b = limits.limiter("anthropic/m", 16);
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.status().ceiling, 16);
    assert_eq!(a.status().concurrency, 16);
    assert_eq!(limits.status().len(), 1);
    assert!(limits.held_back().is_none());
}
