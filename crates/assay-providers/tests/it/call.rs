//! The call wrapper against fake servers: retries, limits, cache and replay, accounting.

use std::sync::Arc;
use std::time::{Duration, Instant};

use assay_providers::{
    Accounting, AnthropicChat, CacheMode, CallCache, CallContext, CallPolicy, ChatModel,
    ChatRequest, Guarded, HashedNgramEmbedder, InputKind, LlmReranker, ModelStats,
    ProviderErrorKind, RerankDocument, VoyageEmbedder, VoyageReranker,
};

use crate::support::{
    ANTHROPIC_KEY, FakeServer, Reply, ScriptedChat, anthropic_key, fixture, fixture_json,
    synthesize, texts, voyage_key,
};

/// Small waits so retry tests stay fast.
fn fast_policy() -> CallPolicy {
    CallPolicy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        ..CallPolicy::default()
    }
}

fn message() -> Reply {
    Reply::json(&fixture_json("anthropic_message.json"))
}

fn request(text: &str) -> ChatRequest {
    ChatRequest::new(Some("Be calm.".into()), text, 300)
}

/// A context without a cache.
fn context(policy: CallPolicy) -> (Arc<CallContext>, Arc<Accounting>) {
    let accounting = Arc::new(Accounting::default());
    let ctx = CallContext::new(policy, Arc::clone(&accounting)).with_seed(7);
    (Arc::new(ctx), accounting)
}

fn anthropic(server: &FakeServer, timeout: Duration) -> Arc<dyn ChatModel> {
    let options = assay_providers::ProviderOptions {
        timeout,
        ..server.provider_options()
    };
    Arc::new(AnthropicChat::new("claude-haiku-4-5", anthropic_key(), &options).unwrap())
}

fn stats(accounting: &Accounting, model: &str) -> ModelStats {
    accounting
        .snapshot()
        .models
        .get(model)
        .cloned()
        .unwrap_or_default()
}

const MODEL: &str = "anthropic/claude-haiku-4-5";

#[tokio::test]
async fn a_429_with_retry_after_is_honoured() {
    let server = FakeServer::script(vec![
        Reply::raw(429, &fixture("anthropic_error_overloaded.json")).header("retry-after", "1"),
        message(),
    ])
    .await;
    let (ctx, accounting) = context(fast_policy());
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), ctx);
    let start = Instant::now();
    let response = chat.chat(&request("hello")).await.unwrap();
    assert!(response.text.starts_with("Keep it BIFF"));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at - requests[0].at;
    assert!(waited >= Duration::from_secs(1), "waited only {waited:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    let s = stats(&accounting, MODEL);
    assert_eq!((s.calls, s.requests, s.retries, s.errors), (1, 2, 1, 0));
}

#[tokio::test]
async fn server_errors_then_success() {
    for first in [
        Reply::raw(500, "upstream exploded"),
        Reply::raw(529, &fixture("anthropic_error_overloaded.json")),
        // A 2xx whose body was cut short: malformed, treated as transient by the wrapper.
        Reply::raw(200, &fixture("anthropic_message.json")[..100]),
    ] {
        let server = FakeServer::script(vec![first, message()]).await;
        let (ctx, accounting) = context(fast_policy());
        let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), ctx);
        chat.chat(&request("hello")).await.unwrap();
        assert_eq!(server.requests().len(), 2);
        assert_eq!(stats(&accounting, MODEL).retries, 1);
    }
}

#[tokio::test]
async fn a_timeout_then_success() {
    let server = FakeServer::script(vec![message().delay(Duration::from_secs(3)), message()]).await;
    let (ctx, _) = context(fast_policy());
    let chat = Guarded::chat(anthropic(&server, Duration::from_millis(300)), ctx);
    let start = Instant::now();
    chat.chat(&request("hello")).await.unwrap();
    assert_eq!(server.requests().len(), 2);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn retries_are_bounded_and_the_error_counts_attempts() {
    let server = FakeServer::always(Reply::raw(503, "try later")).await;
    let (ctx, accounting) = context(CallPolicy {
        max_retries: 2,
        ..fast_policy()
    });
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), ctx);
    let err = chat.chat(&request("hello")).await.unwrap_err();
    assert_eq!(server.requests().len(), 3, "max_retries + 1 attempts");
    assert_eq!(err.attempts(), Some(3));
    assert_eq!(err.status(), Some(503));
    assert_eq!(
        err.to_string(),
        "anthropic/claude-haiku-4-5: HTTP 503: try later (gave up after 3 attempts)"
    );
    let s = stats(&accounting, MODEL);
    assert_eq!((s.calls, s.requests, s.retries, s.errors), (1, 3, 2, 1));
}

#[tokio::test]
async fn a_400_fails_at_once() {
    let server = FakeServer::always(Reply::raw(
        400,
        &fixture("anthropic_error_invalid_request.json"),
    ))
    .await;
    let (ctx, accounting) = context(fast_policy());
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), ctx);
    let err = chat.chat(&request("hello")).await.unwrap_err();
    assert_eq!(server.requests().len(), 1);
    assert_eq!(err.status(), Some(400));
    assert!(!err.to_string().contains("gave up"), "{err}");
    let s = stats(&accounting, MODEL);
    assert_eq!((s.calls, s.requests, s.retries, s.errors), (1, 1, 0, 1));
}

#[tokio::test]
async fn a_cache_hit_makes_no_request_and_replay_works_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".assay/cache.db");
    let server = FakeServer::always(message()).await;
    let accounting = Arc::new(Accounting::default());
    let ctx = CallContext::open(
        fast_policy(),
        Arc::clone(&accounting),
        &path,
        CacheMode::ReadWrite,
    )
    .unwrap();
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), Arc::new(ctx));

    let first = chat.chat(&request("hello")).await.unwrap();
    let second = chat.chat(&request("hello")).await.unwrap();
    assert_eq!(server.requests().len(), 1, "the second call is a cache hit");
    assert_eq!(first.text, second.text);
    assert_eq!((first.usage.requests, second.usage.requests), (1, 0));
    chat.chat(&request("something else")).await.unwrap();
    assert_eq!(server.requests().len(), 2, "a different request is a miss");
    let s = stats(&accounting, MODEL);
    assert_eq!((s.calls, s.cache_hits, s.requests), (3, 1, 2));
    assert_eq!(
        (s.input_tokens, s.output_tokens),
        (84, 46),
        "hits add no tokens"
    );

    // A later run replays from the same file without the network.
    let cache = Arc::new(CallCache::open(&path).unwrap());
    assert_eq!(cache.len().unwrap(), 2);
    let replay_accounting = Arc::new(Accounting::default());
    let ctx = CallContext::new(fast_policy(), Arc::clone(&replay_accounting))
        .with_cache(cache, CacheMode::Replay);
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), Arc::new(ctx));
    let replayed = chat.chat(&request("hello")).await.unwrap();
    assert_eq!(replayed.text, first.text);
    assert_eq!(replayed.stop_reason, first.stop_reason);
    assert_eq!(server.requests().len(), 2, "replay sends nothing");

    // A replay miss is an error naming the request, and sends nothing.
    let err = chat
        .chat(&request(
            "What should I tell my ex about the holiday schedule this year?",
        ))
        .await
        .unwrap_err();
    assert_eq!(server.requests().len(), 2);
    assert!(
        matches!(
            err.kind(),
            ProviderErrorKind::ReplayMiss { call: "chat", .. }
        ),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(
        text.starts_with(
            "anthropic/claude-haiku-4-5: no recorded answer for this chat request (cache key "
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"prompt "What should I tell my ex about the…""#),
        "{text}"
    );
    assert!(text.contains("re-run in read-write cache mode"), "{text}");
    let s = stats(&replay_accounting, MODEL);
    assert_eq!((s.calls, s.cache_hits, s.errors, s.requests), (2, 1, 1, 0));
}

#[tokio::test]
async fn errors_are_never_cached() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::script(vec![Reply::raw(400, "bad"), message()]).await;
    let cache = Arc::new(CallCache::open(&dir.path().join("c.db")).unwrap());
    let ctx = CallContext::new(fast_policy(), Arc::default())
        .with_cache(Arc::clone(&cache), CacheMode::ReadWrite);
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), Arc::new(ctx));
    chat.chat(&request("hello")).await.unwrap_err();
    assert!(cache.is_empty().unwrap());
    chat.chat(&request("hello")).await.unwrap();
    assert_eq!(cache.len().unwrap(), 1);
}

#[tokio::test]
async fn the_concurrency_limit_is_respected() {
    let server = FakeServer::always(message().delay(Duration::from_millis(150))).await;
    let (ctx, _) = context(CallPolicy {
        concurrency: 2,
        ..fast_policy()
    });
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), ctx);
    let calls = (0..6).map(|i| {
        let chat = Arc::clone(&chat);
        tokio::spawn(async move { chat.chat(&request(&format!("call {i}"))).await })
    });
    for call in calls.collect::<Vec<_>>() {
        call.await.unwrap().unwrap();
    }
    assert_eq!(server.requests().len(), 6);
    assert_eq!(server.max_in_flight(), 2);
}

#[tokio::test]
async fn the_minimum_interval_is_respected() {
    let server = FakeServer::always(message()).await;
    let (ctx, _) = context(CallPolicy {
        min_interval: Duration::from_millis(150),
        ..fast_policy()
    });
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), ctx);
    let calls: Vec<_> = (0..4)
        .map(|i| {
            let chat = Arc::clone(&chat);
            tokio::spawn(async move { chat.chat(&request(&format!("call {i}"))).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    let mut at: Vec<Instant> = server.requests().iter().map(|r| r.at).collect();
    at.sort();
    // Starts are at least 150 ms apart; arrivals at the server may jitter on a loaded machine,
    // but without the limit all four would arrive within a few milliseconds.
    for pair in at.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= Duration::from_millis(100), "gap {gap:?}");
    }
    assert!(
        at[3] - at[0] >= Duration::from_millis(440),
        "{:?}",
        at[3] - at[0]
    );
}

#[tokio::test]
async fn accounting_counts_tokens_latency_and_cost() {
    let server = FakeServer::script(vec![Reply::raw(500, "oops"), message(), message()]).await;
    let (ctx, accounting) = context(fast_policy());
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), ctx);
    chat.chat(&request("one")).await.unwrap();
    chat.chat(&request("two")).await.unwrap();
    let snapshot = accounting.snapshot();
    let s = &snapshot.models[MODEL];
    assert_eq!(
        (s.calls, s.cache_hits, s.requests, s.retries, s.errors),
        (2, 0, 3, 1, 0)
    );
    assert_eq!((s.input_tokens, s.output_tokens), (84, 46));
    assert!(s.latency_ms_max <= s.latency_ms_total);
    // claude-haiku-4-5: $1 / $5 per million tokens.
    let cost = s.cost_usd.unwrap();
    assert!(
        (cost - (84.0 * 1.0 + 46.0 * 5.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    assert_eq!(snapshot.total_cost_usd, Some(cost));
    let json = serde_json::to_value(&snapshot).unwrap();
    assert_eq!(json["models"][MODEL]["input_tokens"], 84);
}

#[tokio::test]
async fn remote_embeddings_are_cached_and_builtin_ones_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start(synthesize).await;
    let accounting = Arc::new(Accounting::default());
    let ctx = Arc::new(
        CallContext::open(
            fast_policy(),
            Arc::clone(&accounting),
            &dir.path().join("c.db"),
            CacheMode::ReadWrite,
        )
        .unwrap(),
    );
    let options = assay_providers::EmbedderOptions {
        batch_size: Some(2),
        ..server.options()
    };
    let voyage = Guarded::embedder(
        Arc::new(VoyageEmbedder::new("voyage-3.5", voyage_key(), &options).unwrap()),
        Arc::clone(&ctx),
    );
    let first = voyage
        .embed_with_usage(&texts(3), InputKind::Query)
        .await
        .unwrap();
    assert_eq!(first.usage.requests, 2, "two batches");
    let again = voyage
        .embed_with_usage(&texts(3), InputKind::Query)
        .await
        .unwrap();
    assert_eq!(again.vectors, first.vectors);
    assert_eq!(again.usage.requests, 0);
    assert_eq!(server.requests().len(), 2, "the second call is a cache hit");
    voyage.embed(&texts(3), InputKind::Document).await.unwrap();
    assert_eq!(
        server.requests().len(),
        4,
        "the input kind is part of the key"
    );
    assert_eq!(voyage.dimension(), Some(2));

    let builtin = Guarded::embedder(Arc::new(HashedNgramEmbedder::new()), Arc::clone(&ctx));
    builtin.embed(&texts(2), InputKind::Query).await.unwrap();
    builtin.embed(&texts(2), InputKind::Query).await.unwrap();
    let snapshot = accounting.snapshot();
    let b = &snapshot.models["builtin/hashed-ngrams"];
    assert_eq!(
        (b.calls, b.cache_hits, b.requests),
        (2, 0, 0),
        "in-process: never cached"
    );
    assert_eq!(b.cost_usd, Some(0.0));
    let v = &snapshot.models["voyage/voyage-3.5"];
    assert_eq!(
        (v.calls, v.cache_hits, v.requests, v.input_tokens),
        (3, 1, 4, 12)
    );
}

#[tokio::test]
async fn embeddings_are_cached_per_text_so_a_new_text_costs_only_itself() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::start(synthesize).await;
    let cache = Arc::new(assay_providers::CallCache::open(&dir.path().join("c.db")).unwrap());
    let context = |mode| {
        Arc::new(
            CallContext::new(fast_policy(), Arc::new(Accounting::default()))
                .with_cache(Arc::clone(&cache), mode),
        )
    };
    let embedder = || -> Arc<dyn assay_providers::Embedder> {
        Arc::new(VoyageEmbedder::new("voyage-3.5", voyage_key(), &server.options()).unwrap())
    };
    let recording = Guarded::embedder(embedder(), context(CacheMode::ReadWrite));
    let first = recording.embed(&texts(3), InputKind::Query).await.unwrap();
    assert_eq!(server.requests().len(), 1);

    // One new text among known ones: only it is sent, and the order is kept.
    let mut mixed = texts(3);
    mixed.insert(1, "text 7".into());
    let got = recording.embed(&mixed, InputKind::Query).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].inputs(), vec!["text 7".to_owned()]);
    assert_eq!(got[0], first[0]);
    assert_eq!(got[2], first[1]);
    assert_eq!(got[3], first[2]);

    // Replay: a subset of recorded texts is a hit; an unrecorded text is an error naming it.
    let replay = Guarded::embedder(embedder(), context(CacheMode::Replay));
    let subset = vec!["text 7".to_owned(), "text 0".to_owned()];
    let got = replay.embed(&subset, InputKind::Query).await.unwrap();
    assert_eq!(got[1], first[0]);
    let e = replay
        .embed(
            &["text 0".to_owned(), "never seen".to_owned()],
            InputKind::Query,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("replay") && e.contains("never seen"), "{e}");
    assert_eq!(server.requests().len(), 2, "replay sent nothing");
}

#[tokio::test]
async fn rerankings_are_cached() {
    let dir = tempfile::tempdir().unwrap();
    let server = FakeServer::always(Reply::json(&fixture_json("voyage_rerank.json"))).await;
    let ctx = Arc::new(
        CallContext::open(
            fast_policy(),
            Arc::default(),
            &dir.path().join("c.db"),
            CacheMode::ReadWrite,
        )
        .unwrap(),
    );
    let reranker = Guarded::reranker(
        Arc::new(
            VoyageReranker::new("rerank-2.5", voyage_key(), &server.provider_options()).unwrap(),
        ),
        ctx,
    );
    let docs: Vec<RerankDocument> = ["a", "b", "c"]
        .iter()
        .map(|id| RerankDocument {
            id: (*id).into(),
            title: format!("T{id}"),
            summary: String::new(),
        })
        .collect();
    let first = reranker.rerank("q", &docs, 3).await.unwrap();
    let second = reranker.rerank("q", &docs, 3).await.unwrap();
    assert_eq!(first.order, second.order);
    assert_eq!(server.requests().len(), 1);
    reranker.rerank("q", &docs, 2).await.unwrap();
    assert_eq!(server.requests().len(), 2, "top_k is part of the key");
}

#[tokio::test]
async fn an_llm_reranker_that_gave_up_is_not_retried_again() {
    let chat = ScriptedChat::new(&["no json here"]);
    let (ctx, accounting) = context(fast_policy());
    let reranker = Guarded::reranker(Arc::new(LlmReranker::new(chat.clone())), ctx);
    let docs = vec![RerankDocument {
        id: "a".into(),
        title: "A".into(),
        summary: String::new(),
    }];
    let err = reranker.rerank("q", &docs, 1).await.unwrap_err();
    assert!(matches!(err.kind(), ProviderErrorKind::Malformed { .. }));
    assert_eq!(
        chat.calls(),
        3,
        "the reranker's own 1 + 2 retries, not multiplied by the wrapper's"
    );
    assert_eq!(stats(&accounting, "llm:mock/scripted").errors, 1);
}

#[tokio::test]
async fn keys_never_appear_in_errors_or_debug_output() {
    let server = FakeServer::start(|r| {
        let key = r.header("x-api-key").unwrap_or_default().to_owned();
        Reply::raw(
            500,
            &format!(
                r#"{{"type":"error","error":{{"type":"api_error","message":"bad key {key}"}}}}"#
            ),
        )
    })
    .await;
    let (ctx, _) = context(CallPolicy {
        max_retries: 1,
        ..fast_policy()
    });
    let chat = Guarded::chat(anthropic(&server, Duration::from_secs(5)), Arc::clone(&ctx));
    let err = chat.chat(&request("hello")).await.unwrap_err();
    let text = format!("{err} {err:?} {chat:?} {ctx:?}");
    assert!(text.contains("bad key <redacted>"), "{text}");
    assert!(
        !text.contains(ANTHROPIC_KEY) && !text.contains(&ANTHROPIC_KEY[7..]),
        "{text}"
    );
    assert_eq!(
        server.requests()[0].header("x-api-key"),
        Some(ANTHROPIC_KEY)
    );
}
