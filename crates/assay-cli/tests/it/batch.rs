//! Batch mode (`--batch`) against a scripted OpenAI-compatible server with the batch API
//! (`/v1/files`, `/v1/batches`): the LLM reranker's calls go in one batch, the results equal
//! an interactive run's case for case, at the batch price; a run killed while its batch is
//! pending resumes by polling the same batch, and the server sees each request once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::providers::{KEY, comparable};
use crate::support::Scratch;

#[derive(Default)]
struct Fake {
    /// Batches stay in progress while this is true.
    hold: bool,
    interactive: usize,
    /// Custom ids submitted, over all batches.
    submitted: Vec<String>,
    batches: Vec<String>,
    polls: HashMap<String, usize>,
    files: HashMap<String, String>,
    /// Batch id → (custom id, user prompt).
    requests: HashMap<String, Vec<(String, String)>>,
}

type Shared = Arc<Mutex<Fake>>;

/// The listwise reranker's answer: the candidates' ids in the order the prompt lists them.
fn completion(prompt: &str) -> Value {
    let ids: Vec<&str> = prompt
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- id: "))
        .collect();
    json!({"id": "chatcmpl-1", "object": "chat.completion",
           "choices": [{"index": 0, "message": {"role": "assistant",
                        "content": json!({"ranked_ids": ids}).to_string()}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 1000, "completion_tokens": 100}})
}

fn user_prompt(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

async fn chat(State(s): State<Shared>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    s.lock().unwrap().interactive += 1;
    axum::Json(completion(&user_prompt(&body))).into_response()
}

async fn upload(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let kind = headers["content-type"].to_str().unwrap().to_owned();
    let boundary = kind.split("boundary=").nth(1).unwrap();
    let text = String::from_utf8_lossy(&body).into_owned();
    let Some(part) = text
        .split(&format!("--{boundary}"))
        .find(|p| p.contains("name=\"file\""))
    else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let content = part.split_once("\r\n\r\n").unwrap().1;
    let content = content.strip_suffix("\r\n").unwrap_or(content).to_owned();
    let mut fake = s.lock().unwrap();
    let id = format!("file-{}", fake.files.len() + 1);
    fake.files.insert(id.clone(), content);
    axum::Json(json!({"id": id})).into_response()
}

async fn create(State(s): State<Shared>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    let mut fake = s.lock().unwrap();
    let file = fake.files[body["input_file_id"].as_str().unwrap()].clone();
    let requests: Vec<(String, String)> = file
        .lines()
        .map(|l| {
            let line: Value = serde_json::from_str(l).unwrap();
            (
                line["custom_id"].as_str().unwrap().to_owned(),
                user_prompt(&line["body"]),
            )
        })
        .collect();
    let id = format!("batch_{}", fake.batches.len() + 1);
    fake.submitted
        .extend(requests.iter().map(|(c, _)| c.clone()));
    fake.batches.push(id.clone());
    fake.requests.insert(id.clone(), requests);
    axum::Json(json!({"id": id, "status": "validating"})).into_response()
}

async fn poll(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    let mut fake = s.lock().unwrap();
    *fake.polls.entry(id.clone()).or_default() += 1;
    if fake.hold {
        return axum::Json(json!({"id": id, "status": "in_progress"})).into_response();
    }
    let mut output = String::new();
    for (custom, prompt) in &fake.requests[&id] {
        let line = json!({"custom_id": custom,
                          "response": {"status_code": 200, "body": completion(prompt)}});
        output.push_str(&line.to_string());
        output.push('\n');
    }
    let file = format!("file-out-{id}");
    fake.files.insert(file.clone(), output);
    axum::Json(json!({"id": id, "status": "completed", "output_file_id": file})).into_response()
}

async fn content(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    s.lock().unwrap().files[&id].clone().into_response()
}

fn start() -> (String, Shared) {
    let shared: Shared = Arc::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/files", post(upload))
        .route("/v1/files/{id}/content", get(content))
        .route("/v1/batches", post(create))
        .route("/v1/batches/{id}", get(poll))
        .with_state(Arc::clone(&shared));
    (crate::support::serve(app), shared)
}

fn configure(project: &Scratch, base: &str) {
    project.write(
        "assay.toml",
        &format!(
            r#"
[embedder]
model = "builtin/hashed-ngrams"

[retrieval]
score_threshold = 0.1

[semantic]
reranker = "openai/gpt-4o-mini"
rate_limit_delay = 0

[providers]
openai_base_url = "{base}/v1"
timeout_seconds = 5
batch_poll_seconds = 0.2
batch_window_seconds = 0.5
"#
        ),
    );
}

#[test]
fn a_batched_run_equals_the_interactive_one_and_a_killed_one_polls_its_batch_again() {
    let project = Scratch::example();
    let (base, fake) = start();
    configure(&project, &base);

    // The reference: every reranking sent interactively.
    let reference = project.assay_env(
        &[
            "run",
            "--banks",
            "semantic",
            "--json",
            "--no-save",
            "--cache",
            "off",
        ],
        &[KEY],
    );
    assert!(matches!(reference.code, 0 | 1), "{reference:?}");
    let reference = reference.json();
    assert_eq!(reference["summary"]["error_count"], 0, "{reference}");
    let cases = reference["semantic"]["results"].as_array().unwrap().len();
    assert_eq!(cases, 94);
    let interactive = fake.lock().unwrap().interactive;
    assert!(interactive >= cases, "{interactive} interactive calls");

    // A batched run, killed while its batch is pending.
    fake.lock().unwrap().hold = true;
    let mut child = project.spawn(&["run", "--banks", "semantic", "--batch"], &[KEY]);
    let started = Instant::now();
    loop {
        let polled = {
            let f = fake.lock().unwrap();
            f.batches.len() == 1 && f.polls.values().sum::<usize>() >= 2
        };
        if polled {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no batch was polled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let batch = fake.lock().unwrap().batches[0].clone();
    let submitted = fake.lock().unwrap().submitted.len();
    assert!(
        submitted >= 90,
        "every reranking waits in the one batch: {submitted}"
    );
    let journal = project.read(".assay/batches.jsonl");
    assert!(journal.contains(&batch), "{journal}");
    let polls_before = fake.lock().unwrap().polls[&batch];

    // Resumed: it polls the same batch, submits nothing, and equals the interactive run.
    fake.lock().unwrap().hold = false;
    let resumed = project.assay_env(
        &["run", "--banks", "semantic", "--batch", "--resume"],
        &[KEY],
    );
    assert!(matches!(resumed.code, 0 | 1), "{resumed:?}");
    {
        let f = fake.lock().unwrap();
        assert_eq!(f.batches, vec![batch.clone()], "one batch only");
        let mut ids = f.submitted.clone();
        ids.sort();
        ids.dedup();
        assert_eq!(
            ids.len(),
            f.submitted.len(),
            "a request was submitted twice"
        );
        assert!(
            f.polls[&batch] > polls_before,
            "the batch was not polled again"
        );
        assert_eq!(f.interactive, interactive, "nothing was sent interactively");
    }
    let saved = project.results();
    let file = saved
        .iter()
        .find(|n| n.starts_with("results_") && n.rsplit('.').next() == Some("json"))
        .unwrap_or_else(|| panic!("no results file in {saved:?}"));
    let log = project.json(&format!("results/{file}"));
    let want = comparable(reference.clone());
    let got = comparable(log);
    assert_eq!(got["semantic"], want["semantic"]);
    assert_eq!(got["summary"], want["summary"]);
    // Cost at the batch price: 1000 tokens in and 100 out a call, at half gpt-4o-mini's
    // $0.15 / $0.60 per million.
    let line = resumed
        .stdout
        .lines()
        .find(|l| l.contains("gpt-4o-mini:"))
        .unwrap_or_else(|| panic!("no usage line:\n{}", resumed.stdout));
    assert!(
        line.contains(&format!(
            "{cases} calls ({cases} answered by batch, at the batch price)"
        )),
        "{line}"
    );
    let cost = cases as f64 * (1000.0 * 0.15 + 100.0 * 0.6) / 1e6 * 0.5;
    assert!(
        line.contains(&format!("${cost:.4}")),
        "{line} (expected ${cost:.4})"
    );

    // Again: every answer from the cache, nothing sent.
    let again = project.assay_env(
        &[
            "run",
            "--banks",
            "semantic",
            "--json",
            "--no-save",
            "--batch",
        ],
        &[KEY],
    );
    assert!(matches!(again.code, 0 | 1), "{again:?}");
    assert_eq!(fake.lock().unwrap().batches.len(), 1);
    assert_eq!(comparable(again.json())["semantic"], want["semantic"]);
}
