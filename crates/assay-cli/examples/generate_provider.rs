//! A scripted generator for `assay generate`'s tests and benchmark (`bench/generate/run.sh`):
//! a local server speaking the OpenAI chat-completions wire format (`POST
//! /v1/chat/completions`) that answers the generator's three kinds of request
//! deterministically from the request itself, with no model behind it:
//!
//! - **user messages** (schema `user_messages`): for the entity ids in the prompt's `## Title
//!   (id)` headings, exactly the number of messages asked for, each built from the entity's
//!   title and a rotating persona, so they are far apart. Scripted quirks, for a prompt about one
//!   entity whose text holds a marker: `SCRIPT:DUP` makes the second message equal to the
//!   first (a duplicate); `SCRIPT:GARBAGE` gets prose instead of JSON, on every attempt (a
//!   rejected reply); `SCRIPT:BABEL` makes the last message Spanish (off-language);
//!   `SCRIPT:ECHO` makes the first message `I keep seeing the same weeds` (the fixture's
//!   existing case: a duplicate of an existing case); `SCRIPT:SHAPE` answers JSON of the
//!   wrong shape; `SCRIPT:EMPTY` answers an empty list; `SCRIPT:DRIFT` makes the last message
//!   about the shared hose rota instead (a message retrieval gives to another entity).
//! - **pattern messages** (schema `pattern_messages`): for a crisis rule, two messages meant
//!   to fire (the first says "fell off the ladder", which the fixture's regex matches; the
//!   second describes a deep cut that it does not: a miss) and two look-alikes (the second
//!   says "can't breathe" about the heat: a false alarm); for a keyword group, messages with
//!   and without its first keyword.
//! - **calibration** (schema `expectations`): the case's primary kept, no secondaries (or the
//!   one [`Behaviour::secondary`] names).
//!
//! Every answered request is logged (`GET /log`: kind and a digest of the whole request
//! body) so a test can count calls and find a repeated one. Flags: `--port N` (0 picks
//! one), `--latency-ms N` (sleep before every answer). In tests, [`Stats::hold_after`] makes
//! every request after the first N wait unanswered for ever (a process can then be killed
//! mid-generation; setting it back to 0 lets later requests through), and
//! [`Stats::fail_after`] with [`Stats::failures`] answers a few requests with a 500.
//!
//! ```sh
//! cargo run --release -p assay-cli --example generate_provider -- --port 0 --latency-ms 200
//! ```
//!
//! It prints `http://127.0.0.1:<port>` on its first line of stdout and serves until killed.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

/// How the server behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Behaviour {
    /// Sleep before every answer.
    pub latency: Duration,
    /// The calibrator proposes this entity as a secondary of every case (not of a case whose
    /// primary it is); none by default.
    pub secondary: Option<&'static str>,
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct Stats {
    /// Requests received (held ones too).
    pub received: AtomicUsize,
    /// Requests received after the first N are never answered (0: all are answered).
    pub hold_after: AtomicUsize,
    /// Requests received after the first N get a 500 ([`Stats::failures`] of them).
    pub fail_after: AtomicUsize,
    /// How many requests after [`Stats::fail_after`] get a 500 (0: none).
    pub failures: AtomicUsize,
    /// Answered requests: (kind, digest of the body).
    pub log: Mutex<Vec<(String, String)>>,
}

impl Stats {
    /// Answered requests.
    pub fn answered(&self) -> usize {
        self.log.lock().map_or(0, |l| l.len())
    }
}

struct Shared {
    behaviour: Behaviour,
    stats: Arc<Stats>,
}

fn digest(text: &str) -> String {
    // FNV-1a, 64 bits: enough to tell requests apart in a test.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

const PERSONAS: [(&str, &str); 6] = [
    ("retired teacher", "formal"),
    ("busy parent", "casual"),
    ("teenager", "slangy"),
    ("new member", "anxious"),
    ("long-time gardener", "matter-of-fact"),
    ("visitor", "polite"),
];

const OPENERS: [&str; 6] = [
    "Good morning, I would like some advice about",
    "ugh ok so whats the deal with",
    "can someone explain",
    "Sorry if this is a silly question but I worry about",
    "Quick one:",
    "Hello! My neighbour told me to ask here regarding",
];

const CLOSERS: [&str; 6] = [
    "Thank you very much for your help.",
    "pls help",
    "lol",
    "I don't want to do it wrong.",
    "That's all.",
    "Where do I start?",
];

/// The entity ids and titles in `## Title (id)` headings, in order.
fn entities(prompt: &str) -> Vec<(String, String)> {
    prompt
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter_map(|l| {
            let open = l.rfind(" (")?;
            let id = l[open + 2..].strip_suffix(')')?;
            Some((l[..open].to_owned(), id.to_owned()))
        })
        .map(|(title, id)| (id, title))
        .collect()
}

fn asked(prompt: &str) -> usize {
    prompt
        .split("exactly ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(3)
}

fn user_messages(prompt: &str) -> Option<Value> {
    let found = entities(prompt);
    let n = asked(prompt);
    let quirk = |marker: &str| found.len() == 1 && prompt.contains(marker);
    if quirk("SCRIPT:GARBAGE") {
        return None;
    }
    if quirk("SCRIPT:SHAPE") {
        return Some(json!({"msgs": ["a list under the wrong name"]}));
    }
    if quirk("SCRIPT:EMPTY") {
        return Some(json!({"messages": []}));
    }
    let subject = found
        .iter()
        .map(|(_, t)| t.to_lowercase())
        .collect::<Vec<_>>()
        .join(" and also ");
    let mut out = Vec::new();
    for i in 0..n {
        let (persona, register) = PERSONAS[i % PERSONAS.len()];
        let mut message = format!(
            "{} {subject}, as a {persona} number {} {}",
            OPENERS[i % OPENERS.len()],
            i + 1,
            CLOSERS[(i + 2) % CLOSERS.len()]
        );
        if i == 1 && quirk("SCRIPT:DUP") {
            out.first()
                .and_then(|m: &Value| m["message"].as_str())
                .unwrap_or_default()
                .clone_into(&mut message);
        }
        if i == 0 && quirk("SCRIPT:ECHO") {
            "I keep seeing the same weeds".clone_into(&mut message);
        }
        if i + 1 == n && n > 1 && quirk("SCRIPT:BABEL") {
            "hola, no sé qué hacer con las semillas de mi parcela y necesito ayuda"
                .clone_into(&mut message);
        }
        if i + 1 == n && n > 1 && quirk("SCRIPT:DRIFT") {
            "who keeps hogging the shared hose on the watering rota every evening"
                .clone_into(&mut message);
        }
        out.push(json!({"message": message, "persona": persona, "register": register}));
    }
    Some(json!({"messages": out}))
}

fn pattern_messages(prompt: &str) -> Value {
    let n = asked(prompt);
    let mut out = Vec::new();
    if prompt.contains("CRISIS detector") {
        let fire = [
            "help I fell off the ladder by the shed and my leg looks wrong",
            "I cut my hand really deep on the shears and it will not stop bleeding",
            "my friend collapsed near the compost and is not answering me",
        ];
        let look = [
            "the kids pretended to fall over in the pumpkin patch, so funny",
            "this greenhouse heat, I can't breathe in there lol",
            "my beans fell over in the wind again",
        ];
        for m in fire.iter().take(n) {
            out.push(json!({"message": m, "intent": "fire", "why": "a member hurt in the garden"}));
        }
        for m in look.iter().take(n) {
            out.push(json!({"message": m, "intent": "look_alike", "why": "no one is hurt"}));
        }
    } else {
        let keyword = prompt
            .lines()
            .skip_while(|l| !l.starts_with("Rule:"))
            .nth(1)
            .and_then(|l| l.trim().split(", ").next())
            .unwrap_or("waitlist")
            .to_owned();
        let fire = [
            format!("how does the {keyword} work for next season?"),
            format!("am I still on the {keyword}?"),
            format!("who runs the {keyword} this year"),
        ];
        let look = [
            "I am waiting for my tomatoes to ripen".to_owned(),
            "the list of plants we can grow is on the fence".to_owned(),
            "when is the next work day".to_owned(),
        ];
        for m in fire.iter().take(n) {
            out.push(json!({"message": m, "intent": "fire", "why": "asks for it by name"}));
        }
        for m in look.iter().take(n) {
            out.push(json!({"message": m, "intent": "look_alike", "why": "no keyword"}));
        }
    }
    json!({"messages": out})
}

fn calibration(prompt: &str, secondary: Option<&str>) -> Value {
    // The expectations on record, quoted as JSON after their heading.
    let primary = prompt
        .find("Expectations on record")
        .and_then(|at| prompt[at..].find('{').map(|b| at + b))
        .and_then(|start| {
            serde_json::Deserializer::from_str(&prompt[start..])
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok)
        })
        .map_or_else(|| json!([]), |v| v["expected_primary"].clone());
    let secondaries: Vec<&str> = secondary
        .filter(|s| !primary.as_array().is_some_and(|p| p.iter().any(|p| p == s)))
        .into_iter()
        .collect();
    json!({"expected_primary": primary, "expected_secondary": secondaries, "not_expected": [],
           "rank_check": [], "reasoning": "scripted: the primary stands"})
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

async fn openai(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    let seen = shared.stats.received.fetch_add(1, Ordering::SeqCst) + 1;
    let hold = shared.stats.hold_after.load(Ordering::SeqCst);
    if hold > 0 && seen > hold {
        // Held: never answered (the test kills the client).
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
    let fail_after = shared.stats.fail_after.load(Ordering::SeqCst);
    if seen > fail_after && seen <= fail_after + shared.stats.failures.load(Ordering::SeqCst) {
        // A server error; the client's retries (none in the tests) decide what follows.
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": {"message": "scripted failure", "type": "server_error"}})),
        )
            .into_response();
    }
    if !shared.behaviour.latency.is_zero() {
        tokio::time::sleep(shared.behaviour.latency).await;
    }
    let schema = body["response_format"]["json_schema"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // The first user turn: the prompt (a corrective turn comes after it).
    let prompt = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .unwrap_or_default();
    let text = match schema.as_str() {
        "user_messages" => user_messages(&prompt).map_or_else(
            || "Sure! Here are some lovely messages your users might send.".to_owned(),
            |v| v.to_string(),
        ),
        "pattern_messages" => pattern_messages(&prompt).to_string(),
        "expectations" => calibration(&prompt, shared.behaviour.secondary).to_string(),
        _ => "I only answer structured requests.".to_owned(),
    };
    if let Ok(mut log) = shared.stats.log.lock() {
        log.push((schema, digest(&body.to_string())));
    }
    let input = (body.to_string().len() / 4) as u64;
    let output = (text.len() / 4) as u64;
    Json(json!({
        "id": "chatcmpl-scripted", "object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": input, "completion_tokens": output,
                  "total_tokens": input + output}
    }))
    .into_response()
}

async fn log_handler(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let log = shared
        .stats
        .log
        .lock()
        .map(|l| l.clone())
        .unwrap_or_default();
    Json(json!({
        "received": shared.stats.received.load(Ordering::SeqCst),
        "answered": log.iter().map(|(k, d)| json!({"kind": k, "digest": d})).collect::<Vec<_>>(),
    }))
}

/// The server's routes.
pub fn router(behaviour: Behaviour, stats: Arc<Stats>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(openai))
        .route("/log", get(log_handler))
        .with_state(Arc::new(Shared { behaviour, stats }))
}

#[allow(dead_code)]
fn main() {
    let mut port = 0u16;
    let mut behaviour = Behaviour::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--port" => port = value.parse().expect("--port takes a number"),
            "--latency-ms" => {
                behaviour.latency =
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
        axum::serve(listener, router(behaviour, Arc::new(Stats::default())))
            .await
            .expect("the server runs");
    });
}
