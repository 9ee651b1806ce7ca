//! The semantic bank against a real HTTP provider (a local OpenAI-compatible server): fault
//! injection, replay from the call cache, and resuming an interrupted run from its journal.

use std::time::{Duration, Instant};

use crate::fake_openai::{FakeOpenAi, Faults};
use crate::support::Scratch;

pub(crate) const KEY: (&str, &str) = ("OPENAI_API_KEY", "sk-test-0123456789abcdef");

/// Every entity id of the example knowledge base.
pub(crate) fn entity_ids(project: &Scratch) -> Vec<String> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(project.path("kb")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let list: Vec<serde_json::Value> = serde_norway::from_str(&text).unwrap();
        ids.extend(
            list.iter()
                .filter_map(|e| e["entity_id"].as_str().map(str::to_owned)),
        );
    }
    // Longest first, so that an id that contains another is found as itself.
    ids.sort_by_key(|id| std::cmp::Reverse(id.len()));
    ids
}

/// Points the project's embedder and LLM reranker at `server`.
pub(crate) fn configure(project: &Scratch, server: &FakeOpenAi, extra: &str) {
    let base = &server.base_url;
    project.write(
        "assay.toml",
        &format!(
            r#"
[embedder]
model = "openai/text-embedding-3-small"
openai_base_url = "{base}"

[retrieval]
score_threshold = 0.1

[semantic]
reranker = "openai/gpt-4o-mini"
rate_limit_delay = 0
concurrency = 8

[providers]
openai_base_url = "{base}"
timeout_seconds = 0.5
max_retries = 6
retry_backoff_seconds = 0.05
max_backoff_seconds = 0.4
{extra}
"#
        ),
    );
}

/// The RunLog without what legitimately differs between two runs.
pub(crate) fn comparable(log: serde_json::Value) -> serde_json::Value {
    // Durations measure the run, the run's and each case's.
    let mut log = crate::support::timeless(log);
    // `rate_limits` accounts for the requests sent, which a replay does not send.
    for key in ["timestamp", "run_id", "rate_limits"] {
        log.as_object_mut().unwrap().remove(key);
    }
    log
}

fn semantic_results(log: &serde_json::Value) -> &Vec<serde_json::Value> {
    log["semantic"]["results"].as_array().unwrap()
}

#[test]
fn faults_are_retried_or_recorded_as_errors_and_never_mis_scored() {
    let project = Scratch::example();
    let ids = entity_ids(&project);
    let bank = project.json("test_banks/semantic/parent_test_bank.json");
    let cases = bank["tests"].as_array().unwrap();
    assert_eq!(cases.len(), 94);
    let poisoned_prompt = cases[7]["prompt"].as_str().unwrap().to_owned();
    let poisoned_id = cases[7]["test_id"].as_str().unwrap().to_owned();

    // A clean run is the reference.
    let clean = FakeOpenAi::start(ids.clone(), Faults::default());
    configure(&project, &clean, "cache = \"off\"");
    let reference = project.assay_env(&["run", "--json", "--no-save"], &[KEY]);
    assert!(matches!(reference.code, 0 | 1), "{reference:?}");
    let reference = reference.json();
    assert_eq!(reference["summary"]["error_count"], 0);
    assert!(clean.counts.chat.load(std::sync::atomic::Ordering::SeqCst) >= 94);
    drop(clean);

    // 30% of requests fail in one of five ways; one case's requests always fail.
    let faulty = FakeOpenAi::start(
        ids,
        Faults {
            rate_percent: 30,
            poison: Some(poisoned_prompt),
            slow: Duration::from_millis(900),
            limit: None,
        },
    );
    // The fake's 429s are faults, not a bucket: what a run learns from them is not kept, or the
    // next run here paces itself by a limit that does not exist (remembered limits have tests
    // of their own, with a real bucket).
    configure(
        &project,
        &faulty,
        "cache = \"off\"\nremember_limits = false",
    );
    let run = project.assay_env(&["run", "--json", "--no-save"], &[KEY]);
    let faults = faulty
        .counts
        .faults
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(faults >= 30, "only {faults} faults were injected");
    assert_eq!(run.code, 3, "an errored case makes exit code 3: {run:?}");
    let log = run.json();

    let results = semantic_results(&log);
    assert_eq!(results.len(), 94, "every case has a result");
    let errors: Vec<&serde_json::Value> =
        results.iter().filter(|r| !r["error"].is_null()).collect();
    assert_eq!(
        errors
            .iter()
            .map(|r| r["test_id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec![poisoned_id.as_str()],
        "only the poisoned case may error (the others are retried to success)"
    );
    assert!(errors[0]["score"].is_null(), "an error is not scored");
    let message = errors[0]["error"].as_str().unwrap();
    assert!(message.contains("500"), "{message}");
    assert!(!message.contains(KEY.1), "the key leaked: {message}");
    assert_eq!(log["summary"]["error_count"], 1);
    assert_eq!(log["semantic"]["errors"], 1);

    // Every scored case scored exactly as in the clean run.
    let reference_results = semantic_results(&reference);
    for (got, want) in results.iter().zip(reference_results) {
        assert_eq!(got["test_id"], want["test_id"]);
        if got["error"].is_null() {
            assert_eq!(got["selections"], want["selections"], "{}", got["test_id"]);
            assert_eq!(got["score"], want["score"], "{}", got["test_id"]);
        }
    }
    // The average leaves the error out.
    let scored: Vec<f64> = results.iter().filter_map(|r| r["score"].as_f64()).collect();
    let mean = scored.iter().sum::<f64>() / scored.len() as f64;
    let reported = log["semantic"]["average_score"].as_f64().unwrap();
    assert!((mean - reported).abs() < 0.06, "{mean} vs {reported}");

    // The console summary reports the error apart, grouped by message, with the case's id.
    let console = project.assay_env(&["run", "--no-save"], &[KEY]);
    assert_eq!(console.code, 3, "{console:?}");
    assert!(
        console.stdout.contains("errors (not scored): 1\n"),
        "{}",
        console.stdout
    );
    let grouped = console
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("errors (not scored)"))
        .collect::<Vec<_>>();
    assert!(grouped[1].trim_start().starts_with("1 × "), "{grouped:?}");
    assert_eq!(grouped[2].trim(), poisoned_id, "{grouped:?}");
}

/// Issue 23: a provider that rate-limits (a bucket of 5, 50 requests a second) and four
/// times the concurrency it takes: every case is answered, nothing errors, and the run's
/// summary, RunLog and reports say how the limit shaped the calls.
#[test]
fn a_rate_limited_provider_answers_every_case_and_the_run_records_it() {
    let project = Scratch::example();
    let server = FakeOpenAi::start(
        entity_ids(&project),
        Faults {
            limit: Some((50.0, 5.0)),
            ..Faults::default()
        },
    );
    // Slow start off: all 16 at once, as a provider's first wave.
    configure(
        &project,
        &server,
        "cache = \"off\"\nmax_concurrency = 16\nslow_start = false",
    );
    let run = project.assay_env(&["run", "--concurrency", "16"], &[KEY]);
    assert!(matches!(run.code, 0 | 1), "{run:?}");
    let throttled = server
        .counts
        .throttled
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        throttled > 0,
        "the first 16 calls cannot all fit a bucket of 5"
    );

    let saved = project.results();
    let log_file = saved.iter().find(|f| f.starts_with("results_")).unwrap();
    let log = project.json(&format!("results/{log_file}"));
    assert_eq!(log["summary"]["error_count"], 0, "every case is answered");
    assert_eq!(semantic_results(&log).len(), 94);
    let limits = log["rate_limits"].as_array().expect("rate_limits");
    let reranker = limits
        .iter()
        .find(|r| r["throttled"].as_u64() > Some(0))
        .expect("the reranker's record");
    assert_eq!(reranker["throttled"].as_u64(), Some(throttled as u64));
    assert_eq!(reranker["ceiling"], 16);
    assert!(
        reranker["min_concurrency"].as_u64() < Some(16),
        "{reranker}"
    );
    assert!(reranker["requests"].as_u64() >= Some(94 + throttled as u64));

    // The summary and the Markdown report show it.
    assert!(run.stdout.contains("rate limits: "), "{}", run.stdout);
    assert!(run.stdout.contains("answered 429/529 (no retry spent)"));
    let report = saved
        .iter()
        .find(|f| {
            f.starts_with("report_")
                && std::path::Path::new(f)
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("md"))
        })
        .unwrap();
    let md = project.read(&format!("results/{report}"));
    assert!(md.contains("## Rate limits"), "{md}");

    // What the run learned about the limit is kept for the next run, which paces from its
    // first request: no first wave of 429s to learn the bucket again (the bucket has refilled).
    let memory = project.json(".assay/limits.json");
    let learned = memory["models"]
        .as_object()
        .and_then(|m| {
            m.values()
                .find(|l| l["buckets"]["requests"]["limit"] == 5.0)
        })
        .unwrap_or_else(|| panic!("the bucket of 5 in {memory}"));
    assert!(learned["learned_at"].as_u64() > Some(0), "{learned}");
    std::thread::sleep(std::time::Duration::from_millis(100));
    let again = project.assay_env(&["run", "--concurrency", "16"], &[KEY]);
    assert!(matches!(again.code, 0 | 1), "{again:?}");
    let second = server
        .counts
        .throttled
        .load(std::sync::atomic::Ordering::SeqCst)
        - throttled;
    assert!(
        second < throttled,
        "429s: {throttled} in the first run, {second} in the second"
    );

    // Slow start (the default), cold: the calls go out as answers come back, so a bucket
    // nobody announced refuses fewer than the first wave.
    let cold = Scratch::example();
    let server = FakeOpenAi::start(
        entity_ids(&cold),
        Faults {
            limit: Some((50.0, 5.0)),
            ..Faults::default()
        },
    );
    configure(&cold, &server, "cache = \"off\"\nmax_concurrency = 16");
    let run = cold.assay_env(&["run", "--concurrency", "16"], &[KEY]);
    assert!(matches!(run.code, 0 | 1), "{run:?}");
    let slow = server
        .counts
        .throttled
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        slow < throttled,
        "429s of a cold run: {slow} with slow start, {throttled} without"
    );
}

#[test]
fn a_replayed_run_is_identical_and_makes_no_calls() {
    let project = Scratch::example();
    let server = FakeOpenAi::start(entity_ids(&project), Faults::default());
    configure(&project, &server, "");
    let recorded = project.assay_env(&["run", "--json", "--no-save"], &[KEY]);
    assert!(matches!(recorded.code, 0 | 1), "{recorded:?}");
    let calls = server.requests();
    assert!(calls > 94, "{calls}");

    // Replay: same log, zero requests, and no key needed.
    let replayed = project.assay_env(&["run", "--json", "--no-save", "--cache", "replay"], &[KEY]);
    assert_eq!(replayed.code, recorded.code, "{replayed:?}");
    assert_eq!(server.requests(), calls, "replay made network calls");
    assert_eq!(comparable(replayed.json()), comparable(recorded.json()));
    // The recording run says how the provider's limits shaped its calls; the replay sent none.
    let limits = recorded.json()["rate_limits"].clone();
    assert!(
        limits
            .as_array()
            .is_some_and(|l| l.iter().any(|r| r["requests"].as_u64() >= Some(94)
                && r["throttled"] == 0
                && r["concurrency"] == r["ceiling"])),
        "{limits}"
    );
    assert!(replayed.json().get("rate_limits").is_none());

    // A case the cache has never seen is an error naming the request, not a silent score.
    project.edit(
        "test_banks/semantic/parent_test_bank.json",
        "\"prompt\": \"",
        "\"prompt\": \"Brand new wording. ",
    );
    let missed = project.assay_env(&["run", "--json", "--no-save", "--cache", "replay"], &[KEY]);
    assert_eq!(missed.code, 3, "{missed:?}");
    assert_eq!(server.requests(), calls, "replay made network calls");
    let log = missed.json();
    let errors: Vec<&serde_json::Value> = semantic_results(&log)
        .iter()
        .filter(|r| !r["error"].is_null())
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "only the new prompt misses the cache: {:?}",
        errors
            .iter()
            .map(|r| &r["error"])
            .take(3)
            .collect::<Vec<_>>()
    );
    let message = errors[0]["error"].as_str().unwrap();
    assert!(message.contains("replay"), "{message}");
    assert!(message.contains("Brand new wording"), "{message}");
}

#[test]
fn an_interrupted_run_resumes_without_redoing_finished_cases() {
    let project = Scratch::example();
    let server = FakeOpenAi::start(
        entity_ids(&project),
        Faults {
            rate_percent: 0,
            poison: None,
            slow: Duration::ZERO,
            limit: None,
        },
    );
    // One case at a time, 100 ms apart: slow enough to interrupt.
    configure(&project, &server, "cache = \"off\"");
    project.edit(
        "assay.toml",
        "concurrency = 8",
        "concurrency = 1\nrate_limit_delay = 0.1",
    );
    project.edit("assay.toml", "rate_limit_delay = 0\n", "");
    let journal = project.path(".assay/journal.jsonl");
    let mut child = project.spawn(&["run", "--no-save"], &[KEY]);
    let started = Instant::now();
    let finished_lines =
        || std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count().saturating_sub(1));
    while finished_lines() < 20 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run did not progress"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Let the server count a request the killed process had already sent.
    std::thread::sleep(Duration::from_millis(300));
    let journal_text = std::fs::read_to_string(&journal).unwrap();
    let header: serde_json::Value =
        serde_json::from_str(journal_text.lines().next().unwrap()).unwrap();
    let done = finished_lines();
    assert!(done < 94, "the run finished before it was interrupted");
    let chat_before = server.counts.chat.load(std::sync::atomic::Ordering::SeqCst);

    // Other options are refused.
    let other = project.assay_env(
        &["run", "--resume", "--banks", "state", "--no-save"],
        &[KEY],
    );
    assert_eq!(other.code, 2, "{other:?}");
    assert!(other.stderr.contains("--resume"), "{other:?}");

    let resumed = project.assay_env(&["run", "--resume", "--json", "--no-save"], &[KEY]);
    assert!(matches!(resumed.code, 0 | 1), "{resumed:?}");
    let log = resumed.json();
    assert_eq!(
        log["run_id"], header["run_id"],
        "a resumed run keeps its id"
    );
    assert_eq!(semantic_results(&log).len(), 94);
    let chat_after = server.counts.chat.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        chat_after - chat_before,
        94 - done,
        "the resumed run re-did finished cases"
    );
    assert!(!journal.exists(), "a finished run removes its journal");

    let again = project.assay_env(&["run", "--resume", "--no-save"], &[KEY]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(again.stderr.contains("no interrupted run"), "{again:?}");
}

/// Issue 18: `--repeat K` with an LLM reranker runs each semantic case K times, each repeat its
/// own call and cache entry; a replay of the same run makes no call. Without a stochastic stage
/// it is refused.
#[test]
fn repeat_runs_each_semantic_case_k_times_through_the_cache() {
    let project = Scratch::example();
    let server = FakeOpenAi::start(entity_ids(&project), Faults::default());
    configure(&project, &server, "");
    let run = project.assay_env(
        &[
            "run",
            "--banks",
            "semantic",
            "--repeat",
            "3",
            "--json",
            "--no-save",
        ],
        &[KEY],
    );
    assert!(matches!(run.code, 0 | 1), "{run:?}");
    let log = run.json();
    assert_eq!(log["semantic"]["repeats"], 3);
    let results = semantic_results(&log);
    assert_eq!(results.len(), 94);
    let timeless_results = crate::support::timeless(serde_json::Value::Array(results.clone()));
    for r in results {
        let scores = r["repeat_scores"].as_array().unwrap();
        assert_eq!(scores.len(), 3, "{r}");
        // The scripted reranker answers the same each time: the mean is each repeat's score.
        assert!(scores.iter().all(|s| s == &r["score"]), "{r}");
        assert!(r.get("unstable").is_none(), "{r}");
    }
    assert!(log["semantic"]["average_interval"]["low"].is_number());
    let chat = server.counts.chat.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(chat, 3 * 94, "one reranker call per case and repeat");
    // The same repeated run again: every repeat comes from the cache.
    let again = project.assay_env(
        &[
            "run",
            "--banks",
            "semantic",
            "--repeat",
            "3",
            "--json",
            "--no-save",
            "--cache",
            "replay",
        ],
        &[KEY],
    );
    assert!(matches!(again.code, 0 | 1), "{again:?}");
    assert_eq!(
        server.counts.chat.load(std::sync::atomic::Ordering::SeqCst),
        chat
    );
    // The same results, but for how long each case took.
    assert_eq!(
        crate::support::timeless(serde_json::Value::Array(
            semantic_results(&again.json()).clone()
        )),
        timeless_results
    );

    // No stochastic stage: refused, nothing run.
    let plain = Scratch::example();
    let refused = plain.assay(&["run", "--repeat", "2"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused.stderr.contains("no stochastic stage"),
        "{}",
        refused.stderr
    );
}

/// Issue 42: a damaged `.assay/limits.json` (a bucket refilling once a million seconds, a
/// `learned_at` far in the future) is ignored with a warning naming the file: the run neither
/// fails its calls nor crawls.
#[test]
fn a_damaged_limit_memory_is_ignored_with_the_file_named() {
    let project = Scratch::example();
    let server = FakeOpenAi::start(entity_ids(&project), Faults::default());
    // A call may wait 5 s: the damaged buckets, believed, would hold every call past that.
    configure(&project, &server, "max_wait_seconds = 5");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let damaged = serde_json::json!({"version": 1, "models": {
        "openai/text-embedding-3-small": {"learned_at": now,
            "buckets": {"requests": {"limit": 1.0, "per_second": 1e-6}}},
        "openai/gpt-4o-mini": {"learned_at": 4_102_444_800u64,
            "buckets": {"requests": {"limit": 1.0, "per_second": 1.0}}}
    }});
    project.write_json(".assay/limits.json", &damaged);
    let started = Instant::now();
    let run = project.assay_env(
        &["run", "--banks", "semantic", "--no-save", "--json"],
        &[KEY],
    );
    assert!(matches!(run.code, 0 | 1), "{run:?}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let log = run.json();
    assert_eq!(log["summary"]["error_count"], 0, "{}", log["summary"]);
    let warning = run
        .stderr
        .lines()
        .find(|l| l.contains("remembered rate limit"))
        .unwrap_or_else(|| panic!("no warning: {}", run.stderr));
    assert!(
        warning.contains(".assay/limits.json: ignored 2 remembered rate limits out of bounds"),
        "{warning}"
    );
    assert!(
        warning.contains(
            "`openai/text-embedding-3-small`: its requests bucket refills 0.000001 a second: 1000000 s to refill its 1, more than 600 s"
        ),
        "{warning}"
    );
    assert!(
        warning.contains("`openai/gpt-4o-mini`: learned_at 4102444800 is"),
        "{warning}"
    );
}
