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

/// Sends `n` requests through `l`, one after another, each answered.
async fn answer_each(l: &Arc<Limiter>, n: usize) {
    for _ in 0..n {
        l.acquire(cost(1, 1), far(), false).await.unwrap().finish(
            Outcome::Success,
            None,
            None,
            0.0,
        );
    }
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

#[tokio::test(start_paused = true)]
async fn starts_at_the_ceiling_and_halves_once_per_congestion_event() {
    let limits = RateLimits::new().with_slow_start(false);
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
    let limits = RateLimits::new().with_slow_start(false);
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
    answer_each(&l, 10).await;
    assert_eq!(l.status().concurrency, 2);
}

#[tokio::test(start_paused = true)]
async fn the_gate_releases_waiters_one_at_a_time() {
    let limits = Arc::new(RateLimits::new().with_slow_start(false));
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
    let limits = RateLimits::new().with_slow_start(false);
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
    answer_each(&l, 15).await;
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
    let limits = RateLimits::new().with_slow_start(false);
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
    let limits = RateLimits::new().with_slow_start(false);
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
    let limits = RateLimits::new().with_slow_start(false);
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
    let limits = RateLimits::new().with_slow_start(false);
    let a = limits.limiter("llm:anthropic/m", 4);
    let b = limits.limiter("anthropic/m", 16);
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.status().ceiling, 16);
    assert_eq!(a.status().concurrency, 16);
    assert_eq!(limits.status().len(), 1);
    assert!(limits.held_back().is_none());
}

/// Sends one request through `l` and answers it with the provider's request bucket at
/// `remaining` of `limit` (a minute's window), from `account`; whether it showed a shared limit.
async fn answered(l: &Arc<Limiter>, limit: f64, remaining: f64, account: u64) -> bool {
    let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
    p.finish(
        Outcome::Success,
        Some(&seen(LimitKind::Requests, limit, remaining, 60_000)),
        Some(account),
        0.0,
    )
}

/// Sends `rounds` rounds of requests (the limiters `round(i)` lists, in order) through one
/// key-wide bucket of 1,000 requests on account 7: each answer's `remaining` counts every
/// request so far. Checks pooling whenever an answer shows a limit shared with others; returns
/// the models whose answers showed it, in order.
async fn drain_together<'a>(
    limits: &RateLimits,
    rounds: usize,
    round: impl Fn(usize) -> Vec<&'a Arc<Limiter>>,
) -> Vec<String> {
    let mut used = 0.0;
    let mut shown = Vec::new();
    for i in 0..rounds {
        for l in round(i) {
            used += 1.0;
            if answered(l, 1000.0, 1000.0 - used, 7).await {
                shown.push(l.model.clone());
                limits.check_pooling(l);
            }
        }
    }
    shown
}

/// Asserts that `models` models were pooled, all into `name`.
fn assert_pooled(limits: &RateLimits, name: &str, models: usize) {
    let pooled = limits.pooled();
    assert_eq!(
        pooled.values().map(String::as_str).collect::<Vec<_>>(),
        vec![name; models],
        "{pooled:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn models_whose_request_buckets_drain_together_are_pooled_before_a_refusal() {
    let limits = RateLimits::new().with_slow_start(false);
    let a = limits.limiter("openai/a", 8);
    let b = limits.limiter("openai/b", 8);
    // One key-wide bucket of 1,000 requests: each answer's `remaining` counts both models.
    let shown = drain_together(&limits, 12, |_| vec![&a, &b]).await;
    // Each sees its bucket fall by two per request it sends: after 8 answers, the first to
    // notice finds the other drained too (then the pool looks again every 4 answers).
    assert_eq!(shown.first().map(String::as_str), Some("openai/a"));
    let name = "shared:auto (openai/a, openai/b)";
    assert_pooled(&limits, name, 2);
    assert_eq!(limits.status_of("openai/a").unwrap().model, name);
    assert_eq!(limits.status_of("openai/a").unwrap().throttled, 0);
}

#[tokio::test(start_paused = true)]
async fn a_third_model_drained_with_a_pool_joins_it() {
    let limits = RateLimits::new().with_slow_start(false);
    let models = ["openai/a", "openai/b", "openai/c"].map(|m| limits.limiter(m, 8));
    // One key-wide bucket: each answer's `remaining` counts every model. `a` and `b` share it
    // first and are pooled; `c` starts later, sending one request for the pool's eight: it
    // sees the drain plainly, the pool hardly sees `c`'s (an eighth of a request per answer),
    // so they pair only because the pool carries what its members saw.
    let [a, b, c] = &models;
    let shown = drain_together(&limits, 24, |round| {
        if round < 12 {
            vec![a, b]
        } else {
            vec![a, b, a, b, a, b, a, b, c]
        }
    })
    .await;
    // `a` notices first; the pool looks again every 4 answers and finds `c` once it shows
    // the drain.
    assert_eq!(shown.first().map(String::as_str), Some("openai/a"));
    let name = "shared:auto (openai/a, openai/b, openai/c)";
    assert_pooled(&limits, name, 3);
    assert_eq!(limits.status().len(), 1, "{:?}", limits.status());
}

#[tokio::test(start_paused = true)]
async fn a_model_that_sends_most_of_a_shared_bucket_is_the_partner_of_one_that_sends_little() {
    let limits = RateLimits::new().with_slow_start(false);
    let heavy = limits.limiter("openai/heavy", 8);
    let light = limits.limiter("openai/light", 8);
    // `heavy` sends three requests for each of `light`'s: it sees a third of a request of
    // others' per answer (never "clearly drained"), `light` three; `light` notices and finds
    // `heavy` partly drained.
    let shown = drain_together(&limits, 12, |_| vec![&heavy, &heavy, &heavy, &light]).await;
    assert_eq!(shown.first().map(String::as_str), Some("openai/light"));
    let name = "shared:auto (openai/heavy, openai/light)";
    assert_pooled(&limits, name, 2);
}

#[tokio::test(start_paused = true)]
async fn buckets_drained_only_by_their_own_model_or_of_other_sizes_are_not_pooled() {
    let limits = RateLimits::new().with_slow_start(false);
    // `a` alone uses its bucket: its headers never move without it.
    let a = limits.limiter("openai/a", 8);
    for used in 1..=20 {
        assert!(!answered(&a, 500.0, 500.0 - f64::from(used), 7).await);
    }
    // `b` and `c` are each drained by someone else, but their buckets differ in size: not the
    // same bucket, so not pooled.
    let b = limits.limiter("openai/b", 8);
    let c = limits.limiter("openai/c", 8);
    let mut shown = 0;
    for used in 1..=12 {
        for (l, limit) in [(&b, 1000.0), (&c, 2000.0)] {
            if answered(l, limit, limit - 3.0 * f64::from(used), 7).await {
                shown += 1;
                limits.check_pooling(l);
            }
        }
    }
    assert_eq!(shown, 2);
    assert!(limits.pooled().is_empty(), "{:?}", limits.pooled());
    // Another account's bucket of the same size is not the same bucket either.
    let d = limits.limiter("openai/d", 8);
    for used in 1..=12 {
        if answered(&d, 1000.0, 1000.0 - 3.0 * f64::from(used), 8).await {
            limits.check_pooling(&d);
        }
    }
    assert!(limits.pooled().is_empty(), "{:?}", limits.pooled());
    assert_eq!(limits.status().len(), 4);
}

fn memory_of(model: &str, limit: f64, per_second: f64, from_refusals: bool) -> LimitMemory {
    LimitMemory {
        version: LIMIT_MEMORY_VERSION,
        models: [(
            model.to_owned(),
            LearnedLimit {
                learned_at: unix_now(),
                buckets: [(LimitKind::Requests, LearnedBucket { limit, per_second })]
                    .into_iter()
                    .collect(),
                from_refusals,
                shared_with: Vec::new(),
            },
        )]
        .into_iter()
        .collect(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_remembered_limit_paces_from_the_first_request() {
    let limits = RateLimits::new()
        .with_slow_start(false)
        .with_memory(memory_of("openai/m", 5.0, 10.0, true));
    let l = limits.limiter("openai/m", 16);
    assert!((l.status().requests_per_second.unwrap() - 10.0).abs() < 1e-9);
    let start = Instant::now();
    answer_each(&l, 15).await;
    // As if the headers had said so before the first request: 4 of the 5 at once (the cushion
    // keeps the fifth), then 10 a second, 2 % faster after each answer while nothing refuses
    // (without the growth: 1,022 ms).
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(800) && took <= Duration::from_secs(1),
        "{took:?}"
    );
    // Never refused under it, and learned from 429s: remembered as it grew, a tenth faster.
    let next = limits.learned();
    let bucket = next.models["openai/m"].buckets[&LimitKind::Requests];
    let grown = 10.0 * 1.02f64.powi(15) * 1.1;
    assert!(
        bucket.per_second > 11.0 && bucket.per_second <= grown + 1e-9,
        "{bucket:?}"
    );
    assert!(next.models["openai/m"].from_refusals);
}

#[tokio::test(start_paused = true)]
async fn a_429_under_a_remembered_limit_slows_it_or_drops_it() {
    // Learned from 429s: slowed like a pace, no faster than the retry-after says (0.9 / 50 ms).
    let limits = RateLimits::new()
        .with_slow_start(false)
        .with_memory(memory_of("openai/m", 100.0, 1000.0, true));
    let l = limits.limiter("openai/m", 16);
    let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
    p.finish(
        Outcome::Throttled(Some(Duration::from_millis(50))),
        None,
        None,
        0.0,
    );
    let rate = l.status().requests_per_second.unwrap();
    assert!((rate - 18.0).abs() < 1e-6, "{:?}", l.status());
    // Refused under it: remembered as it now is, not a tenth faster.
    let learned = limits.learned().models["openai/m"].clone();
    assert!(learned.from_refusals);
    let bucket = learned.buckets[&LimitKind::Requests];
    assert!((bucket.per_second - 18.0).abs() < 1e-6, "{bucket:?}");
    // Learned from headers: dropped, for the next answer's headers to say what the limit is.
    let limits = RateLimits::new()
        .with_slow_start(false)
        .with_memory(memory_of("openai/m", 100.0, 1000.0, false));
    let l = limits.limiter("openai/m", 16);
    let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
    p.finish(
        Outcome::Throttled(Some(Duration::from_millis(50))),
        None,
        None,
        0.0,
    );
    assert_eq!(l.status().requests_per_second, None, "{:?}", l.status());
}

#[tokio::test(start_paused = true)]
async fn what_a_run_learns_is_remembered_headers_first() {
    let limits = RateLimits::new().with_slow_start(false);
    let headers = limits.limiter("openai/h", 16);
    answered(&headers, 10.0, 5.0, 1).await;
    let paced = limits.limiter("openai/r", 16);
    // Retry-after alone: 6 answers, then a 429 saying 100 ms after 200 ms.
    for _ in 0..6 {
        paced
            .acquire(cost(1, 1), far(), false)
            .await
            .unwrap()
            .finish(Outcome::Success, None, None, 0.0);
    }
    tokio::time::advance(Duration::from_millis(200)).await;
    paced
        .acquire(cost(1, 1), far(), false)
        .await
        .unwrap()
        .finish(
            Outcome::Throttled(Some(Duration::from_millis(100))),
            None,
            None,
            0.0,
        );
    limits.limiter("openai/quiet", 16);
    let memory = limits.learned();
    assert_eq!(
        memory.models.keys().collect::<Vec<_>>(),
        ["openai/h", "openai/r"],
        "nothing learned about openai/quiet"
    );
    let h = &memory.models["openai/h"];
    assert!(!h.from_refusals);
    let bucket = h.buckets[&LimitKind::Requests];
    // A minute's window: (10 - 5) in 60 s.
    assert_eq!(bucket.limit, 10.0);
    assert!((bucket.per_second - 5.0 / 60.0).abs() < 1e-9, "{bucket:?}");
    // The pace is 0.9 / 100 ms = 9 a second (remembered a twentieth lower; nothing admitted
    // since the 429 to measure a rate by); 6 admitted in the 200 ms before the first 429, 1.8
    // of them by the pace: a burst of 0.9 x 4.2.
    let r = &memory.models["openai/r"];
    assert!(r.from_refusals);
    let bucket = r.buckets[&LimitKind::Requests];
    assert!((bucket.per_second - 8.55).abs() < 1e-6, "{bucket:?}");
    assert!((bucket.limit - 0.9 * 4.2).abs() < 1e-6, "{bucket:?}");
    // The next run starts from it, and keeps what it does not learn anew.
    let next = RateLimits::new()
        .with_slow_start(false)
        .with_memory(memory.clone());
    assert_eq!(next.learned(), memory);
}

#[tokio::test(start_paused = true)]
async fn models_remembered_to_share_a_limit_share_one_limiter_from_the_start() {
    let mut memory = memory_of("openai/a", 60.0, 60.0, false);
    let mut shared = memory.models["openai/a"].clone();
    shared.shared_with = vec!["openai/a".into(), "openai/b".into()];
    memory.models.insert("openai/a".into(), shared.clone());
    memory.models.insert("openai/b".into(), shared);
    let limits = RateLimits::new()
        .with_slow_start(false)
        .with_memory(memory.clone());
    let a = limits.limiter("openai/a", 8);
    let b = limits.limiter("openai/b", 8);
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.status().model, "shared:auto (openai/a, openai/b)");
    assert!((a.status().requests_per_second.unwrap() - 60.0).abs() < 1e-9);
    // With pooling off, or a declared group naming one of them, the memory does not pool them.
    let off = RateLimits::new()
        .with_slow_start(false)
        .with_pooling(false)
        .with_memory(memory.clone());
    assert!(!Arc::ptr_eq(
        &off.limiter("openai/a", 8),
        &off.limiter("openai/b", 8)
    ));
    let groups: BTreeMap<String, Vec<String>> = [(
        "key".to_owned(),
        vec!["openai/a".to_owned(), "openai/c".to_owned()],
    )]
    .into_iter()
    .collect();
    let declared = RateLimits::with_shared(&groups)
        .unwrap()
        .with_memory(memory);
    assert!(!Arc::ptr_eq(
        &declared.limiter("openai/a", 8),
        &declared.limiter("openai/b", 8)
    ));
}

/// Tries to start a request without waiting.
async fn try_now(l: &Arc<Limiter>) -> Option<Permit> {
    tokio::time::timeout(
        Duration::from_millis(1),
        l.acquire(cost(1, 1), far(), false),
    )
    .await
    .ok()
    .map(Result::unwrap)
}

#[tokio::test(start_paused = true)]
async fn a_cold_limiter_starts_small_and_opens_one_slot_more_per_answer() {
    let limits = RateLimits::new();
    let l = limits.limiter("openai/m", 16);
    let mut out = Vec::new();
    for _ in 0..SLOW_START_WINDOW {
        out.push(try_now(&l).await.expect("within the window"));
    }
    assert!(try_now(&l).await.is_none(), "a fifth waits for an answer");
    assert_eq!(limits.status_of("openai/m").unwrap().concurrency, 4);
    // Each answer frees its slot and opens one more: two new requests per answer.
    out.remove(0).finish(Outcome::Success, None, None, 0.0);
    out.push(try_now(&l).await.expect("the freed slot"));
    out.push(try_now(&l).await.expect("the new slot"));
    assert!(try_now(&l).await.is_none());
    assert_eq!(limits.status_of("openai/m").unwrap().concurrency, 5);
    // Answers keep doubling the window per round until the ceiling.
    while limits.status_of("openai/m").unwrap().concurrency < 16 {
        let p = out.remove(0);
        p.finish(Outcome::Success, None, None, 0.0);
        while let Some(p) = try_now(&l).await {
            out.push(p);
        }
    }
    assert_eq!(out.len(), 16, "the whole ceiling in flight");
}

#[tokio::test(start_paused = true)]
async fn slow_start_ends_at_the_first_refusal_with_half_the_window_reached() {
    let limits = RateLimits::new();
    let l = limits.limiter("openai/m", 16);
    answer_each(&l, 4).await;
    // The window is 8 now: 8 in flight, then a 429.
    let mut out = Vec::new();
    while let Some(p) = try_now(&l).await {
        out.push(p);
    }
    assert_eq!(out.len(), 8);
    out.remove(0)
        .finish(Outcome::Throttled(None), None, None, 0.0);
    let s = limits.status_of("openai/m").unwrap();
    assert_eq!(s.concurrency, 4, "{s:?}");
    // Later answers grow it by AIMD's one per window of successes, not slow start's doubling.
    for p in out {
        p.finish(Outcome::Success, None, None, 0.0);
    }
    assert!(limits.status_of("openai/m").unwrap().concurrency <= 5);
}

#[tokio::test(start_paused = true)]
async fn headers_showing_ample_room_end_slow_start_at_the_first_answer() {
    let limits = RateLimits::new();
    let roomy = limits.limiter("openai/roomy", 16);
    let p = try_now(&roomy).await.unwrap();
    p.finish(
        Outcome::Success,
        Some(&seen(LimitKind::Requests, 10_000.0, 9_999.0, 6)),
        None,
        0.0,
    );
    assert_eq!(limits.status_of("openai/roomy").unwrap().concurrency, 16);

    // A bucket of 40 requests is not four ceilings' worth: slow start goes on.
    let tight = limits.limiter("openai/tight", 16);
    let p = try_now(&tight).await.unwrap();
    p.finish(
        Outcome::Success,
        Some(&seen(LimitKind::Requests, 40.0, 39.0, 25)),
        None,
        0.0,
    );
    assert_eq!(limits.status_of("openai/tight").unwrap().concurrency, 5);
}

#[tokio::test(start_paused = true)]
async fn slow_start_can_be_turned_off_and_a_small_ceiling_has_none() {
    let off = RateLimits::new().with_slow_start(false);
    let l = off.limiter("openai/m", 16);
    let mut out = Vec::new();
    while let Some(p) = try_now(&l).await {
        out.push(p);
    }
    assert_eq!(out.len(), 16);
    let small = RateLimits::new();
    assert_eq!(
        {
            small.limiter("openai/s", 3);
            small.status_of("openai/s").unwrap().concurrency
        },
        3
    );
}
