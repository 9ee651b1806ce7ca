use std::collections::BTreeMap;

use super::*;
use crate::ProviderOptions;
use crate::anthropic::AnthropicChat;
use crate::anthropic::batch::{self as anthropic_batch, AnthropicBatch};
use crate::call::BATCH_PRICE_FACTOR;
use crate::call::{Accounting, CacheMode, CallContext, CallPolicy, Guarded, Price};
use crate::http::ApiKey;
use crate::openai::OpenAiChat;
use crate::openai::batch::{self as openai_batch, OpenAiBatch};

mod server;

use server::{Script, answer};

// ---------------------------------------------------------------------------------------------
// Wire formats

fn options(base: &str) -> ProviderOptions {
    ProviderOptions {
        openai_base_url: format!("{base}/v1"),
        anthropic_base_url: base.to_owned(),
        timeout: Duration::from_secs(5),
        ..ProviderOptions::default()
    }
}

fn openai(base: &str) -> OpenAiChat {
    OpenAiChat::new(
        "gpt-4o-mini",
        Some(ApiKey::new("sk-test-0123456789")),
        &options(base),
    )
    .unwrap()
}

fn anthropic(base: &str) -> AnthropicChat {
    AnthropicChat::new(
        "claude-haiku-4-5",
        ApiKey::new("sk-ant-test-0123"),
        &options(base),
    )
    .unwrap()
}

#[test]
fn the_openai_input_file_has_one_line_per_request_with_the_interactive_body() {
    let chat = openai("http://localhost:1");
    let request = ChatRequest::new(Some("be brief".into()), "hello", 50);
    let id = custom_id("openai/gpt-4o-mini", &request);
    assert_eq!(id.len(), 64);
    let batch = OpenAiBatch::new(chat.clone(), "http://localhost:1/v1".into());
    let file = batch.input_file(&[(id.clone(), request.clone())]);
    let lines: Vec<Value> = file
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["custom_id"], id.as_str());
    assert_eq!(lines[0]["method"], "POST");
    assert_eq!(lines[0]["url"], "/v1/chat/completions");
    assert_eq!(lines[0]["body"], chat.wire_body(&request));
    assert_eq!(lines[0]["body"]["model"], "gpt-4o-mini");

    let (kind, body) = openai_batch::multipart(&file);
    let boundary = kind.strip_prefix("multipart/form-data; boundary=").unwrap();
    let body = String::from_utf8(body).unwrap();
    assert!(body.starts_with(&format!("--{boundary}\r\n")));
    assert!(body.contains("name=\"purpose\"\r\n\r\nbatch\r\n"));
    assert!(body.contains(&file));
    assert!(body.ends_with(&format!("\r\n--{boundary}--\r\n")));
}

#[test]
fn openai_output_lines_are_answers_failures_or_not_run() {
    let text = [
        json_line(r#"{"custom_id":"a","response":{"status_code":200,"body":{"choices":[]}},"error":null}"#),
        json_line(r#"{"custom_id":"b","response":{"status_code":400,"body":{"error":{"message":"bad"}}},"error":null}"#),
        json_line(r#"{"custom_id":"c","response":null,"error":{"code":"batch_expired","message":"x"}}"#),
        json_line(r#"{"custom_id":"d","response":null,"error":{"code":"server_error","message":"boom"}}"#),
        "not json\n".to_owned(),
    ]
    .concat();
    let results = openai_batch::parse_output(&text);
    assert_eq!(results.len(), 4);
    assert!(matches!(&results[0], (id, ItemResult::Answer(_)) if id == "a"));
    assert!(matches!(&results[1], (_, ItemResult::Failed(m)) if m == "HTTP 400: bad"));
    assert!(matches!(&results[2], (_, ItemResult::NotRun)));
    assert!(matches!(&results[3], (_, ItemResult::Failed(m)) if m == "server_error: boom"));
}

fn json_line(s: &str) -> String {
    format!("{s}\n")
}

#[test]
fn anthropic_results_are_answers_failures_or_not_run_and_name_the_status() {
    let text = [
        json_line(r#"{"custom_id":"a","result":{"type":"succeeded","message":{"content":[]}}}"#),
        json_line(r#"{"custom_id":"b","result":{"type":"errored","error":{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}}}"#),
        json_line(r#"{"custom_id":"c","result":{"type":"expired"}}"#),
    ]
    .concat();
    let (status, results) = anthropic_batch::parse_results(&text);
    assert_eq!(status, "expired");
    assert!(matches!(&results[0], (_, ItemResult::Answer(_))));
    assert!(matches!(&results[1], (_, ItemResult::Failed(m)) if m == "invalid_request_error: bad"));
    assert!(matches!(&results[2], (_, ItemResult::NotRun)));
    let chat = anthropic("http://localhost:1");
    let request = ChatRequest::new(None, "hi", 10);
    let batch = AnthropicBatch::new(chat.clone(), "http://localhost:1".into());
    let body = batch.submission(&[("x".into(), request.clone())]);
    assert_eq!(body["requests"][0]["custom_id"], "x");
    assert_eq!(body["requests"][0]["params"], chat.wire_body(&request));
}

#[test]
fn the_journal_keeps_batches_pending_until_they_finish_and_skips_a_torn_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".assay/batches.jsonl");
    let (journal, pending) = BatchJournal::open(path.clone()).unwrap();
    assert!(pending.is_empty());
    let batch = |id: &str| JournalBatch {
        provider: "openai".into(),
        base_url: "http://x/v1".into(),
        model: "openai/m".into(),
        batch_id: id.into(),
        requests: vec![(format!("{id}-1"), ChatRequest::new(None, "q", 5))],
    };
    journal.submitted(&batch("b1")).unwrap();
    journal.submitted(&batch("b2")).unwrap();
    journal.finished("b1", "completed").unwrap();
    // A command killed while writing leaves half a line.
    std::fs::write(
        &path,
        std::fs::read_to_string(&path).unwrap() + r#"{"event":"finished","batch_"#,
    )
    .unwrap();
    let (_, pending) = BatchJournal::open(path).unwrap();
    assert_eq!(pending, vec![batch("b2")]);
}

// ---------------------------------------------------------------------------------------------
// Against the scripted server

fn fast() -> BatchSettings {
    BatchSettings {
        poll: Duration::from_millis(25),
        window: Duration::from_millis(60),
        max_requests: 100,
        max_retries: 2,
    }
}

#[derive(Clone, Copy, Debug)]
enum Vendor {
    OpenAi,
    Anthropic,
}

fn model(vendor: Vendor, base: &str) -> Arc<dyn ChatModel> {
    match vendor {
        Vendor::OpenAi => Arc::new(openai(base)),
        Vendor::Anthropic => Arc::new(anthropic(base)),
    }
}

fn prices() -> Arc<Accounting> {
    Arc::new(Accounting::with_prices(BTreeMap::from([
        (
            "openai/gpt-4o-mini".to_owned(),
            Price {
                input: 1.0,
                output: 10.0,
            },
        ),
        (
            "anthropic/claude-haiku-4-5".to_owned(),
            Price {
                input: 1.0,
                output: 10.0,
            },
        ),
    ])))
}

/// A context with the cache in `dir` (or none).
fn context(dir: Option<&std::path::Path>, accounting: &Arc<Accounting>) -> CallContext {
    match dir {
        Some(dir) => CallContext::open(
            CallPolicy::default(),
            Arc::clone(accounting),
            &dir.join(".assay/cache.db"),
            CacheMode::ReadWrite,
        )
        .unwrap(),
        None => CallContext::new(CallPolicy::default(), Arc::clone(accounting)),
    }
}

fn prompts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("question {i}")).collect()
}

/// Asks every prompt at once; the answers' texts (or errors) in order.
async fn ask_all(chat: &Arc<dyn ChatModel>, prompts: &[String]) -> Vec<Result<String, String>> {
    let mut set = tokio::task::JoinSet::new();
    for (i, prompt) in prompts.iter().enumerate() {
        let chat = Arc::clone(chat);
        let request = ChatRequest::new(None, prompt.clone(), 100);
        set.spawn(async move {
            (
                i,
                chat.chat(&request)
                    .await
                    .map(|r| r.text)
                    .map_err(|e| e.to_string()),
            )
        });
    }
    let mut out = vec![Err(String::new()); prompts.len()];
    while let Some(done) = set.join_next().await {
        let (i, result) = done.unwrap();
        out[i] = result;
    }
    out
}

fn batcher(dir: &std::path::Path) -> Batcher {
    let cache = Arc::new(CallCache::open(&dir.join(".assay/cache.db")).unwrap());
    Batcher::open(fast(), Some(dir.join(".assay/batches.jsonl")), Some(cache)).unwrap()
}

/// A judge on `vendor` at `base` whose calls `batcher` batches, counted in `accounting`.
fn batched_judge(
    batcher: &Batcher,
    vendor: Vendor,
    base: &str,
    dir: &std::path::Path,
    accounting: &Arc<Accounting>,
) -> Arc<dyn ChatModel> {
    Guarded::chat_as(
        batcher.wrap(model(vendor, base)).unwrap(),
        Arc::new(context(Some(dir), accounting).batched()),
        "judge",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_answers_equal_interactive_ones_at_the_batch_price_and_a_failed_request_is_an_error()
{
    for vendor in [Vendor::OpenAi, Vendor::Anthropic] {
        let server = server::start(Script {
            delay: Duration::from_millis(300),
            fail: Some("question 3".into()),
            expire: 0,
        })
        .await;
        let questions = prompts(12);

        let interactive_accounting = prices();
        let interactive = Guarded::chat_as(
            model(vendor, &server.base),
            Arc::new(context(None, &interactive_accounting)),
            "judge",
        );
        let reference = ask_all(&interactive, &questions).await;
        assert!(reference.iter().all(Result::is_ok), "{reference:?}");
        assert_eq!(server.seen(|s| s.interactive), 12);

        let dir = tempfile::tempdir().unwrap();
        let accounting = prices();
        let batcher = batcher(dir.path());
        let batched = batched_judge(&batcher, vendor, &server.base, dir.path(), &accounting);
        let answers = ask_all(&batched, &questions).await;
        for (i, (got, want)) in answers.iter().zip(&reference).enumerate() {
            if i == 3 {
                let e = got.as_ref().unwrap_err();
                assert!(
                    e.contains("request failed in batch") && e.contains("scripted failure"),
                    "{vendor:?}: {e}"
                );
            } else {
                assert_eq!(got, want, "{vendor:?} case {i}");
                assert_eq!(got.as_ref().unwrap(), &answer(&questions[i]));
            }
        }
        // One batch, every request in it once; nothing sent interactively.
        assert_eq!(server.seen(|s| s.batches.len()), 1, "{vendor:?}");
        let mut submitted = server.seen(|s| s.submitted.clone());
        assert_eq!(submitted.len(), 12);
        submitted.sort();
        submitted.dedup();
        assert_eq!(submitted.len(), 12);
        assert_eq!(server.seen(|s| s.interactive), 12, "{vendor:?}");

        // Batch price: half of the interactive price per answered call.
        let name = interactive.model().to_owned();
        let full = interactive_accounting.snapshot().models[&name].clone();
        let half = accounting.snapshot().models[&name].clone();
        assert_eq!(
            (half.calls, half.batch_calls, half.errors),
            (12, 11, 1),
            "{half:?}"
        );
        let per_call = full.cost_usd.unwrap() / 12.0;
        assert!((per_call - (1000.0 + 1000.0) / 1e6).abs() < 1e-12);
        assert!((half.cost_usd.unwrap() - 11.0 * per_call * BATCH_PRICE_FACTOR).abs() < 1e-12);

        // The journal says the batch ended; the answers are in the cache.
        let (_, pending) = BatchJournal::open(dir.path().join(".assay/batches.jsonl")).unwrap();
        assert!(pending.is_empty());
        let again = ask_all(&batched, &questions[..3]).await;
        assert_eq!(again, reference[..3].to_vec());
        assert_eq!(server.seen(|s| s.batches.len()), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_batch_is_sent_interactively_at_the_full_price() {
    for vendor in [Vendor::OpenAi, Vendor::Anthropic] {
        let server = server::start(Script {
            delay: Duration::from_millis(100),
            fail: None,
            expire: 1,
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let accounting = prices();
        let batcher = batcher(dir.path());
        let batched = batched_judge(&batcher, vendor, &server.base, dir.path(), &accounting);
        let questions = prompts(5);
        let answers = ask_all(&batched, &questions).await;
        for (got, prompt) in answers.iter().zip(&questions) {
            assert_eq!(got.as_deref(), Ok(answer(prompt).as_str()), "{vendor:?}");
        }
        assert_eq!(server.seen(|s| (s.batches.len(), s.interactive)), (1, 5));
        let stats = accounting.snapshot().models[batched.model()].clone();
        assert_eq!((stats.calls, stats.batch_calls, stats.errors), (5, 0, 0));
        assert!((stats.cost_usd.unwrap() - 5.0 * 2000.0 / 1e6).abs() < 1e-12);
    }
}

#[test]
fn a_killed_command_polls_its_pending_batch_again_and_never_submits_twice() {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = server_rt.block_on(server::start(Script {
        delay: Duration::from_millis(1500),
        fail: None,
        expire: 0,
    }));
    let dir = tempfile::tempdir().unwrap();
    let questions = prompts(6);

    // The first command submits its batch, polls it, and is killed.
    let first = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    {
        let (dir, questions, base) = (
            dir.path().to_owned(),
            questions.clone(),
            server.base.clone(),
        );
        first.spawn(async move {
            let accounting = prices();
            let batcher = batcher(&dir);
            let chat = batched_judge(&batcher, Vendor::OpenAi, &base, &dir, &accounting);
            ask_all(&chat, &questions).await
        });
    }
    let started = std::time::Instant::now();
    while server.seen(|s| s.polls.values().sum::<usize>()) == 0 {
        assert!(started.elapsed() < Duration::from_secs(5), "no poll came");
        std::thread::sleep(Duration::from_millis(10));
    }
    first.shutdown_background();
    let batch_id = server.seen(|s| s.batches[0].clone());
    let polls_before = server.seen(|s| s.polls[&batch_id]);

    // The next command finds the batch pending and waits on it.
    let again = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let answers = again.block_on(async {
        let accounting = prices();
        let batcher = batcher(dir.path());
        assert_eq!(batcher.pending(), vec![batch_id.clone()]);
        let chat = batched_judge(
            &batcher,
            Vendor::OpenAi,
            &server.base,
            dir.path(),
            &accounting,
        );
        let answers = ask_all(&chat, &questions).await;
        let stats = accounting.snapshot().models[chat.model()].clone();
        assert_eq!(stats.batch_calls, 6);
        answers
    });
    for (got, prompt) in answers.iter().zip(&questions) {
        assert_eq!(got.as_deref(), Ok(answer(prompt).as_str()));
    }
    server.seen(|s| {
        assert_eq!(s.batches, vec![batch_id.clone()], "one batch only");
        assert_eq!(s.submitted.len(), 6, "each request submitted once");
        assert_eq!(s.interactive, 0);
        assert!(
            s.polls[&batch_id] > polls_before,
            "the same batch was polled again"
        );
    });

    // A third command: nothing pending, every answer from the cache.
    let answers = again.block_on(async {
        let accounting = prices();
        let batcher = batcher(dir.path());
        assert!(batcher.pending().is_empty());
        let chat = batched_judge(
            &batcher,
            Vendor::OpenAi,
            &server.base,
            dir.path(),
            &accounting,
        );
        ask_all(&chat, &questions).await
    });
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(server.seen(|s| s.batches.len()), 1);
    drop(again);
    drop(server_rt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_batch_the_provider_does_not_know_is_forgotten_and_its_requests_sent_interactively()
 {
    let server = server::start(Script::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let chat = model(Vendor::OpenAi, &server.base);
    let request = ChatRequest::new(None, "question 0", 100);
    let (journal, _) = BatchJournal::open(dir.path().join(".assay/batches.jsonl")).unwrap();
    journal
        .submitted(&JournalBatch {
            provider: "openai".into(),
            base_url: format!("{}/v1", server.base),
            model: chat.model().to_owned(),
            batch_id: "batch_999".into(),
            requests: vec![(custom_id(chat.model(), &request), request)],
        })
        .unwrap();
    let accounting = prices();
    let batcher = batcher(dir.path());
    assert_eq!(batcher.pending(), vec!["batch_999".to_owned()]);
    let batched = Guarded::chat_as(
        batcher.wrap(chat).unwrap(),
        Arc::new(context(Some(dir.path()), &accounting).batched()),
        "judge",
    );
    let answers = ask_all(&batched, &prompts(1)).await;
    assert_eq!(answers, vec![Ok(answer("question 0"))]);
    assert_eq!(server.seen(|s| (s.batches.len(), s.interactive)), (0, 1));
    assert!(batcher.pending().is_empty());
    let (_, pending) = BatchJournal::open(dir.path().join(".assay/batches.jsonl")).unwrap();
    assert!(pending.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_requests_wait_in_batches_whatever_the_interactive_limits() {
    let server = server::start(Script {
        delay: Duration::from_millis(100),
        ..Script::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let accounting = prices();
    // One call at a time, a second apart: 300 calls would take five minutes interactively.
    let policy = CallPolicy {
        concurrency: 1,
        min_interval: Duration::from_secs(1),
        ..CallPolicy::default()
    };
    let context = CallContext::new(policy, Arc::clone(&accounting)).batched();
    let batcher = batcher(dir.path());
    let batched = Guarded::chat_as(
        batcher
            .wrap(model(Vendor::Anthropic, &server.base))
            .unwrap(),
        Arc::new(context),
        "judge",
    );
    let questions = prompts(300);
    let started = std::time::Instant::now();
    let answers = ask_all(&batched, &questions).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(answers.iter().all(Result::is_ok));
    // At most 100 a batch here (`fast`).
    assert_eq!(
        server.seen(|s| (s.batches.len(), s.submitted.len())),
        (3, 300)
    );
}
