//! A local OpenAI-compatible chat server for the prompt optimizer's tests and benchmark: its
//! answers depend on the system prompts injected into the built-in chain, so a known best
//! combination exists.
//!
//! * An agent call (no `response_format`) answers `note:GOOD` when its system prompt holds the
//!   marker `[[GOOD]]`, else `note:meh`; the chain's last agent (its user turn asks for a
//!   `FINAL ANSWER:` line) counts the `note:GOOD` lines of the earlier agents plus its own
//!   marker and, when that count reaches the case's difficulty (`[d:N]` in the question,
//!   default: every agent), answers `FINAL ANSWER: <the key>` (`[key:…]` in the question),
//!   else `FINAL ANSWER: not sure`.
//! * A grader call (`response_format` json_schema `rubric_grade`) reads the expected and the
//!   actual answer from its prompt: overall 1.0 when the actual contains the expected, else
//!   0.2 + 0.1 × the number of `GOOD` notes the answer mentions (none here: 0.2).
//!
//! * A case whose question holds `[needs:UNITS]` is answered right only when the last
//!   agent's system prompt holds `[[UNITS]]` too (no hand-written prompt of the optimizer's
//!   test has it: only a proposal can bring it).
//! * A proposer call (`response_format` json_schema `prompt_proposal`) reads the current
//!   instructions and the cases shown. Model `fake-proposer`: when a case shown is a
//!   `[needs:UNITS]` case answered wrong, the instructions plus a `[[UNITS]]` line, else the
//!   instructions plus a harmless sentence; `fake-proposer-empty`: an empty prompt;
//!   `fake-proposer-copy`: the instructions unchanged; `fake-proposer-garbage`: a line of
//!   noise. A request that shows a case marked `[held-out]` (the tests mark evaluation cases
//!   so) is counted as a leak and answered 500.
//! * A blame call (`response_format` json_schema `agent_blame`) reads each case's steps and
//!   names, per case, the first agent whose output is `note:meh`, else (the notes all good)
//!   the agent that wrote the `FINAL ANSWER:` line, its reason naming the missing unit for a
//!   `[needs:UNITS]` case. Without steps (a target that reports no trace: the prompt lists the
//!   agents' instructions once, in the order they run), the first agent listed whose
//!   instructions lack `[[GOOD]]`, else the last. `fake-proposer-garbage` answers it with a line of noise (the
//!   fallback); a `[held-out]` case is a leak as above.
//!
//! * The last agent's answer is distorted when its system prompt holds `[[NOISY]]` (a `1` before
//!   the key: "15 g" for "5 g") or `[[TERSE]]` (the key's last word only: "g" for "400 g"),
//!   answers the spec's substring rule counts correct and assay's default rule does not.
//!
//! `GET /v1/models` lists the models it answers as (`fake-agent`, `fake-grader` and the
//! proposers), as an OpenAI-compatible server does; a chat request naming another model is
//! answered 404 `model_not_found`. `GET /stats` returns the number of chat calls. Run alone (the benchmark):
//! `cargo run --example prompt_provider -- [--port N] [--latency-ms N]` prints its base URL.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

/// Counters.
#[derive(Debug, Default)]
pub struct PromptStats {
    /// Agent calls.
    pub agent: AtomicU64,
    /// Grader calls.
    pub grader: AtomicU64,
    /// Proposer calls.
    pub proposer: AtomicU64,
    /// Proposer calls that showed a `[held-out]` case.
    pub leaks: AtomicU64,
    /// Blame calls (`agent_blame`).
    pub blame: AtomicU64,
}

struct Shared {
    latency: Duration,
    stats: Arc<PromptStats>,
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let at = text.find(start)? + start.len();
    let rest = &text[at..];
    Some(rest[..rest.find(end).unwrap_or(rest.len())].trim())
}

fn agent_answer(system: &str, user: &str) -> String {
    let good = system.contains("[[GOOD]]");
    if !user.contains("FINAL ANSWER: <the answer>") {
        return format!("note:{}", if good { "GOOD" } else { "meh" });
    }
    let count = user.matches("note:GOOD").count() + usize::from(good);
    let agents = user.matches("note:").count() + 1;
    let question = between(user, "# Question\n", "\n").unwrap_or_default();
    let difficulty = between(question, "[d:", "]")
        .and_then(|d| d.parse().ok())
        .unwrap_or(agents);
    let units = !question.contains("[needs:UNITS]") || system.contains("[[UNITS]]");
    match between(question, "[key:", "]") {
        Some(key) if count >= difficulty && units => {
            let key = if system.contains("[[NOISY]]") {
                format!("1{key}")
            } else if system.contains("[[TERSE]]") {
                key.rsplit(' ').next().unwrap_or(key).to_owned()
            } else {
                key.to_owned()
            };
            format!("Thinking done.\nFINAL ANSWER: {key}")
        }
        _ => "FINAL ANSWER: not sure".into(),
    }
}

fn propose(model: &str, user: &str) -> String {
    let parent = between(user, "<instructions>\n", "\n</instructions>").unwrap_or_default();
    // A case block runs from its `## Case` heading to the next one.
    let failing_units = user
        .split("\n## Case ")
        .skip(1)
        .any(|block| block.contains("[needs:UNITS]") && block.contains("Factually correct: no"));
    let (reasoning, prompt) = match model.rsplit('/').next().unwrap_or(model) {
        "fake-proposer-empty" => ("nothing to add", String::new()),
        "fake-proposer-copy" => ("it is fine as it is", parent.to_owned()),
        "fake-proposer-garbage" => ("", "zxq lorem ipsum".to_owned()),
        _ if failing_units => (
            "the wrong answers all lack their unit",
            format!("{parent}\n[[UNITS]] Always give a measurement with its unit."),
        ),
        _ => (
            "no pattern in these cases",
            format!("{parent}\nTake your time."),
        ),
    };
    json!({"reasoning": reasoning, "prompt": prompt}).to_string()
}

fn blame(model: &str, user: &str) -> String {
    if model.ends_with("fake-proposer-garbage") {
        return "zxq lorem ipsum".into();
    }
    let mut cases = Vec::new();
    for (i, block) in user.split("\n## Case ").skip(1).enumerate() {
        let steps: Vec<(&str, &str)> = block
            .split("\n### Step ")
            .skip(1)
            .filter_map(|step| {
                let who = between(step, ": ", "\n")?;
                let output = step.split("\nOutput of ").nth(1)?;
                Some((who, output))
            })
            .collect();
        let meh = steps.iter().find(|(_, out)| out.contains("note:meh"));
        let (agent, reason) = if steps.is_empty() {
            // No trace: judged from the instructions listed once, in the order the agents run:
            // the first without the marker, else the last.
            let agents: Vec<(&str, &str)> = user
                .split("\n## ")
                .skip(1)
                .take_while(|a| !a.starts_with("Case "))
                .filter_map(|a| {
                    let (head, rest) = a.split_once('\n')?;
                    Some((head.split_once(". ")?.1, rest))
                })
                .collect();
            match agents.iter().find(|(_, text)| !text.contains("[[GOOD]]")) {
                Some((who, _)) => (*who, "its instructions lack the marker"),
                None => (
                    agents.last().map_or("", |(who, _)| *who),
                    "every instruction has the marker: the last agent answers",
                ),
            }
        } else if let Some((who, _)) = meh {
            (*who, "its note is meh")
        } else {
            let last = steps
                .iter()
                .find(|(_, out)| out.contains("FINAL ANSWER:"))
                .map_or("", |(who, _)| *who);
            if block.contains("[needs:UNITS]") {
                (
                    last,
                    "the notes are good but the final answer lacks its unit",
                )
            } else {
                (last, "the notes are good but the final answer is wrong")
            }
        };
        cases.push(json!({"case": i + 1, "agent": agent, "reason": reason}));
    }
    json!({"cases": cases}).to_string()
}

fn grade(user: &str) -> String {
    let expected = between(user, "Expected answer: ", "\n")
        .unwrap_or_default()
        .to_lowercase();
    let actual = between(user, "Actual answer: ", "\n")
        .unwrap_or_default()
        .to_lowercase();
    let right = !actual.is_empty() && actual.contains(&expected);
    let overall = if right { 1.0 } else { 0.2 };
    json!({"factuality": overall, "completeness": overall, "relevance": 1.0, "overall": overall,
           "factually_correct": right, "reasoning": if right { "matches" } else { "differs" }})
    .to_string()
}

/// The models the server answers as.
pub const MODELS: [&str; 5] = [
    "fake-agent",
    "fake-grader",
    "fake-proposer",
    "fake-proposer-empty",
    "fake-proposer-copy",
];

fn known(model: &str) -> bool {
    MODELS.contains(&model) || model == "fake-proposer-garbage"
}

async fn models() -> Json<Value> {
    let mut data: Vec<Value> = MODELS
        .iter()
        .map(|m| json!({"id": m, "object": "model", "owned_by": "assay-tests"}))
        .collect();
    data.push(json!({"id": "fake-proposer-garbage", "object": "model", "owned_by": "assay-tests"}));
    Json(json!({"object": "list", "data": data}))
}

async fn chat(
    State(shared): State<Arc<Shared>>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, (axum::http::StatusCode, Json<Value>)> {
    if !shared.latency.is_zero() {
        tokio::time::sleep(shared.latency).await;
    }
    let model = body["model"].as_str().unwrap_or_default();
    if !known(model) {
        return Err((
            axum::http::StatusCode::NOT_FOUND,
            Json(
                json!({"error": {"message": format!("The model `{model}` does not exist"),
                                   "type": "invalid_request_error", "code": "model_not_found"}}),
            ),
        ));
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let of = |role: &str| {
        messages
            .iter()
            .filter(|m| m["role"] == role)
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (system, user) = (of("system"), of("user"));
    let schema = body["response_format"]["json_schema"]["name"].as_str();
    let content = if schema == Some("agent_blame") {
        shared.stats.blame.fetch_add(1, Ordering::SeqCst);
        if user.contains("[held-out]") {
            shared.stats.leaks.fetch_add(1, Ordering::SeqCst);
            return Err((
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": {"message": "a held-out case was shown"}})),
            ));
        }
        blame(model, &user)
    } else if schema == Some("prompt_proposal") {
        shared.stats.proposer.fetch_add(1, Ordering::SeqCst);
        if user.contains("[held-out]") {
            shared.stats.leaks.fetch_add(1, Ordering::SeqCst);
            return Err((
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": {"message": "a held-out case was shown"}})),
            ));
        }
        propose(body["model"].as_str().unwrap_or_default(), &user)
    } else if body["response_format"].is_object() {
        shared.stats.grader.fetch_add(1, Ordering::SeqCst);
        grade(&user)
    } else {
        shared.stats.agent.fetch_add(1, Ordering::SeqCst);
        agent_answer(&system, &user)
    };
    Ok(Json(json!({
        "id": "chatcmpl-prompt", "object": "chat.completion", "created": 1_763_700_000,
        "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220}
    })))
}

async fn stats(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let s = &shared.stats;
    Json(
        json!({"agent": s.agent.load(Ordering::SeqCst), "grader": s.grader.load(Ordering::SeqCst),
               "proposer": s.proposer.load(Ordering::SeqCst), "leaks": s.leaks.load(Ordering::SeqCst),
               "blame": s.blame.load(Ordering::SeqCst)}),
    )
}

/// The server's routes.
pub fn prompt_router(latency: Duration, stats_: Arc<PromptStats>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/stats", get(stats))
        .with_state(Arc::new(Shared {
            latency,
            stats: stats_,
        }))
}

#[allow(dead_code)]
fn main() {
    let mut port = 0u16;
    let mut latency = Duration::ZERO;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--port" => port = value.parse().expect("--port takes a number"),
            "--latency-ms" => {
                latency =
                    Duration::from_millis(value.parse().expect("--latency-ms takes a number"));
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .expect("a free port");
        let addr = listener.local_addr().expect("an address");
        #[allow(clippy::print_stdout)]
        {
            println!("http://{addr}");
        }
        axum::serve(
            listener,
            prompt_router(latency, Arc::new(PromptStats::default())),
        )
        .await
        .expect("the server runs");
    });
}
