//! A scripted judge for the answer bank's tests (`assay run` with an answer bank): a local
//! server speaking the OpenAI chat-completions wire format (`POST /v1/chat/completions`, or
//! `POST /chat/completions`) that answers the grounded-answer judge's requests
//! (`assay_run::answer::judge`) deterministically from a JSON table, with no model behind
//! it. It reads the judge's prompts by their `## ` sections (Question, Reply, Reference,
//! Contexts with `[rank] entity: id` headers, Claims as `n. claim`) and the schema's name.
//!
//! # The table
//!
//! One JSON object; every key is optional, and an unknown key is an error (a typo would
//! otherwise go unnoticed). Texts are matched after collapsing runs of whitespace.
//!
//! ```json
//! {
//!   "claims":       {"<a reply or reference text>": ["claim", "claim"]},
//!   "verdicts":     {"<claim>": {"supported": true, "entity": "plot-fees"},
//!                    "<claim>": "tool-shed",
//!                    "<claim>": false},
//!   "useful":       {"<the reference text, else the reply text>": ["plot-fees", "<context text>"]},
//!   "questions":    {"<reply text>": ["How much is a plot?", "When is the fee due?"]},
//!   "noncommittal": ["<reply text>"],
//!   "garbage":      ["<text>"],
//!   "invalid":      ["<text>"]
//! }
//! ```
//!
//! - **claims**: the claims the judge finds in a reply (faithfulness) or a reference (context
//!   recall). A text not in the table is split into sentences, each one claim.
//! - **verdicts**: whether the contexts support a claim (or hold a reference's claim). An
//!   object `{"supported", "entity"}`, a string (supported by that entity), or a boolean. A
//!   verdict naming an entity counts only when a context of that entity is in the prompt:
//!   otherwise the claim is unsupported, as a judge would find it with that context missing. A
//!   claim not in the table is unsupported.
//! - **useful**: for context precision, the contexts (by entity id or text) useful in arriving
//!   at the reference answer (at the reply when the case has no reference). A text not in the
//!   table: a context is useful when one of the text's claims has a supported verdict naming
//!   its entity.
//! - **questions**: the questions a reply answers (answer relevancy), repeated or cut to the
//!   number asked. A reply not in the table: its claims, as above.
//! - **noncommittal**: replies the judge finds evasive (answer relevancy 0).
//! - **garbage**: a request whose prompt contains one of these texts gets prose instead of
//!   JSON, on every attempt: the judge gives up and the case is an error.
//! - **invalid**: a request whose prompt contains one of these texts gets JSON that breaks the
//!   judge's checks, on every attempt (a verdict for claim n+4 of n, a context rank past the
//!   last, one question too few, an entity not among the contexts, claims that are not a list).
//!
//! Every answered request is logged: `GET /log` gives `{"received": n, "answered": [schema,
//! …]}`. Flags: `--table PATH` (required), `--port N` (0 picks one).
//!
//! ```sh
//! cargo run -p assay-cli --example answer_judge -- --table judge.json --port 0
//! ```
//!
//! It prints `http://127.0.0.1:<port>` on its first line of stdout and serves until killed.
//! Point a project at it with `[providers] openai_base_url = "<url>/v1"` and
//! `[answer] judge_model = "openai/<any name>"`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

/// A claim's verdict in the table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the contexts support the claim.
    pub supported: bool,
    /// The entity that supports it (it must be among the prompt's contexts to count).
    pub entity: Option<String>,
}

/// The judge's answers (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Text → its claims.
    pub claims: BTreeMap<String, Vec<String>>,
    /// Claim → verdict.
    pub verdicts: BTreeMap<String, Verdict>,
    /// Reference (else reply) → the useful contexts' entity ids or texts.
    pub useful: BTreeMap<String, Vec<String>>,
    /// Reply → questions it answers.
    pub questions: BTreeMap<String, Vec<String>>,
    /// Replies found evasive.
    pub noncommittal: BTreeSet<String>,
    /// Prompt texts that get prose.
    pub garbage: Vec<String>,
    /// Prompt texts that get JSON breaking the judge's checks.
    pub invalid: Vec<String>,
}

/// `text` with every run of whitespace made one space, trimmed.
fn norm(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn strings(value: &Value, at: &str) -> Result<Vec<String>, String> {
    value
        .as_array()
        .ok_or_else(|| format!("{at}: expected a list of strings"))?
        .iter()
        .map(|v| {
            v.as_str()
                .map(norm)
                .ok_or_else(|| format!("{at}: expected a list of strings"))
        })
        .collect()
}

fn string_lists(value: &Value, at: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("{at}: expected an object"))?
        .iter()
        .map(|(k, v)| Ok((norm(k), strings(v, &format!("{at}.{k}"))?)))
        .collect()
}

impl Table {
    /// Reads a table from its JSON.
    pub fn from_json(json: &Value) -> Result<Table, String> {
        let object = json.as_object().ok_or("the table must be a JSON object")?;
        let mut table = Table::default();
        for (key, value) in object {
            match key.as_str() {
                "claims" => table.claims = string_lists(value, key)?,
                "useful" => table.useful = string_lists(value, key)?,
                "questions" => table.questions = string_lists(value, key)?,
                "noncommittal" => table.noncommittal = strings(value, key)?.into_iter().collect(),
                "garbage" => table.garbage = strings(value, key)?,
                "invalid" => table.invalid = strings(value, key)?,
                "verdicts" => {
                    let map = value.as_object().ok_or("verdicts: expected an object")?;
                    for (claim, v) in map {
                        let verdict = match v {
                            Value::Bool(b) => Verdict {
                                supported: *b,
                                entity: None,
                            },
                            Value::String(entity) => Verdict {
                                supported: true,
                                entity: Some(entity.clone()),
                            },
                            Value::Object(o) => Verdict {
                                supported: o
                                    .get("supported")
                                    .and_then(Value::as_bool)
                                    .ok_or(format!("verdicts.{claim}: needs `supported`"))?,
                                entity: o.get("entity").and_then(Value::as_str).map(str::to_owned),
                            },
                            _ => {
                                return Err(format!(
                                    "verdicts.{claim}: expected an object, a string or a boolean"
                                ));
                            }
                        };
                        table.verdicts.insert(norm(claim), verdict);
                    }
                }
                other => return Err(format!("unknown key `{other}` in the table")),
            }
        }
        Ok(table)
    }

    /// Reads a table file.
    #[allow(dead_code)] // `main`'s: unused where a test binary includes this file
    pub fn load(path: &std::path::Path) -> Result<Table, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        Table::from_json(&json).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn claims_of(&self, text: &str) -> Vec<String> {
        self.claims
            .get(&norm(text))
            .cloned()
            .unwrap_or_else(|| sentences(text))
    }

    /// The verdict on `claim`, given the entities of the contexts shown.
    fn verdict(&self, claim: &str, shown: &[Option<String>]) -> Verdict {
        let Some(v) = self.verdicts.get(&norm(claim)) else {
            return Verdict::default();
        };
        match &v.entity {
            Some(e) if !shown.iter().any(|s| s.as_deref() == Some(e)) => Verdict::default(),
            _ => Verdict {
                supported: v.supported,
                entity: v.entity.clone().filter(|_| v.supported),
            },
        }
    }
}

/// The sentences of `text` (split after `.`, `!` or `?` followed by a space or the end).
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        current.push(c);
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|n| n.is_whitespace()) {
            let s = norm(&current);
            if !s.is_empty() {
                out.push(s);
            }
            current.clear();
        }
    }
    let s = norm(&current);
    if !s.is_empty() {
        out.push(s);
    }
    out
}

const HEADINGS: [&str; 5] = ["Question", "Reply", "Reference", "Contexts", "Claims"];

/// The prompt's `## ` sections (the last paragraph, the instruction, left out).
fn sections(prompt: &str) -> BTreeMap<&'static str, String> {
    let body = prompt
        .trim_end()
        .rsplit_once("\n\n")
        .map_or(prompt, |(body, _)| body);
    let mut out: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut current: Option<&'static str> = None;
    for line in body.lines() {
        let heading = line
            .strip_prefix("## ")
            .and_then(|h| HEADINGS.iter().find(|k| **k == h.trim()));
        if let Some(h) = heading {
            current = Some(h);
            out.insert(h, String::new());
        } else if let Some(h) = current {
            let text = out.entry(h).or_default();
            text.push_str(line);
            text.push('\n');
        }
    }
    for text in out.values_mut() {
        *text = text.trim().to_owned();
    }
    out
}

/// The contexts: (entity, text) in rank order.
fn contexts(section: &str) -> Vec<(Option<String>, String)> {
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    for line in section.lines() {
        let header = line.strip_prefix('[').and_then(|rest| {
            let (rank, entity) = rest.split_once("] entity: ")?;
            rank.parse::<usize>().ok()?;
            Some(entity.trim())
        });
        match (header, out.last_mut()) {
            (Some(entity), _) => {
                let entity = (entity != "(none)").then(|| entity.to_owned());
                out.push((entity, String::new()));
            }
            (None, Some((_, text))) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    out.into_iter().map(|(e, t)| (e, norm(&t))).collect()
}

/// The numbered claims, in order.
fn numbered(section: &str) -> Vec<String> {
    section
        .lines()
        .filter_map(|l| {
            let (n, claim) = l.split_once(". ")?;
            n.trim().parse::<usize>().ok()?;
            Some(norm(claim))
        })
        .collect()
}

/// The `N` of "exactly N question(s)".
fn asked(prompt: &str) -> usize {
    prompt
        .split("exactly ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(3)
}

/// The reply to one judge request: `schema` is the JSON schema's name, `prompt` the first user
/// turn.
pub fn answer(table: &Table, schema: &str, prompt: &str) -> String {
    if table.garbage.iter().any(|g| prompt.contains(g.as_str())) {
        return "Let me think about that. The reply looks mostly fine to me.".to_owned();
    }
    let invalid = table.invalid.iter().any(|g| prompt.contains(g.as_str()));
    let s = sections(prompt);
    let section = |name: &str| s.get(name).map_or("", String::as_str);
    let shown = contexts(section("Contexts"));
    let entities: Vec<Option<String>> = shown.iter().map(|(e, _)| e.clone()).collect();
    let value = match schema {
        "reply_claims" if invalid => json!({"claims": "none"}),
        "reply_claims" => json!({"claims": table.claims_of(section("Reply"))}),
        "claim_verdicts" => {
            let claims = numbered(section("Claims"));
            let mut verdicts: Vec<Value> = claims
                .iter()
                .enumerate()
                .map(|(i, claim)| {
                    let v = table.verdict(claim, &entities);
                    json!({"claim_index": i + 1, "supported": v.supported, "entity": v.entity,
                           "reason": "scripted"})
                })
                .collect();
            if invalid {
                verdicts.push(json!({"claim_index": claims.len() + 4, "supported": false,
                                     "entity": null, "reason": "scripted"}));
            }
            json!({"verdicts": verdicts})
        }
        "reply_questions" => {
            let reply = section("Reply");
            let n = asked(prompt);
            let pool = table
                .questions
                .get(&norm(reply))
                .cloned()
                .unwrap_or_else(|| table.claims_of(reply));
            let noncommittal = table.noncommittal.contains(&norm(reply));
            let count = if invalid { n.saturating_sub(1) } else { n };
            let questions: Vec<Value> = pool
                .iter()
                .cycle()
                .take(if pool.is_empty() { 0 } else { count })
                .map(|q| json!({"question": q, "noncommittal": noncommittal}))
                .collect();
            json!({"questions": questions})
        }
        "context_usefulness" => {
            let target = if s.contains_key("Reference") {
                section("Reference")
            } else {
                section("Reply")
            };
            let useful: BTreeSet<String> = match table.useful.get(&norm(target)) {
                Some(list) => list.iter().cloned().collect(),
                None => table
                    .claims_of(target)
                    .iter()
                    .filter_map(|c| table.verdict(c, &entities).entity)
                    .collect(),
            };
            let shift = usize::from(invalid);
            let verdicts: Vec<Value> = shown
                .iter()
                .enumerate()
                .map(|(i, (entity, text))| {
                    let is_useful = useful.contains(text)
                        || entity.as_ref().is_some_and(|e| useful.contains(e));
                    json!({"rank": i + 1 + shift, "useful": is_useful, "reason": "scripted"})
                })
                .collect();
            json!({"verdicts": verdicts})
        }
        "reference_claims" => {
            let claims: Vec<Value> = table
                .claims_of(section("Reference"))
                .iter()
                .enumerate()
                .map(|(i, claim)| {
                    let v = table.verdict(claim, &entities);
                    let entity = if invalid && i == 0 {
                        Some("not-a-shown-entity".to_owned())
                    } else {
                        v.entity
                    };
                    json!({"claim": claim, "attributed": v.supported || entity.is_some(),
                           "entity": entity, "reason": "scripted"})
                })
                .collect();
            json!({"claims": claims})
        }
        _ => return "I only answer the answer judge's structured requests.".to_owned(),
    };
    value.to_string()
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct Stats {
    /// Requests received.
    pub received: AtomicUsize,
    /// The schema of each answered request, in order.
    pub answered: Mutex<Vec<String>>,
}

struct Shared {
    table: Table,
    stats: Arc<Stats>,
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
    shared.stats.received.fetch_add(1, Ordering::SeqCst);
    let schema = body["response_format"]["json_schema"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // The first user turn is the prompt (corrective turns come after it).
    let prompt = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .unwrap_or_default();
    let text = answer(&shared.table, &schema, &prompt);
    if let Ok(mut log) = shared.stats.answered.lock() {
        log.push(schema);
    }
    let input = (body.to_string().len() / 4) as u64;
    let output = (text.len() / 4) as u64;
    Json(json!({
        "id": "chatcmpl-answer-judge", "object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": input, "completion_tokens": output,
                  "total_tokens": input + output}
    }))
    .into_response()
}

async fn log_handler(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let answered = shared
        .stats
        .answered
        .lock()
        .map(|l| l.clone())
        .unwrap_or_default();
    Json(json!({
        "received": shared.stats.received.load(Ordering::SeqCst),
        "answered": answered,
    }))
}

/// The server's routes.
pub fn router(table: Table, stats: Arc<Stats>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(openai))
        .route("/chat/completions", post(openai))
        .route("/log", get(log_handler))
        .with_state(Arc::new(Shared { table, stats }))
}

#[allow(dead_code)]
fn main() {
    let mut port = 0u16;
    let mut table = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--port" => port = value.parse().expect("--port takes a number"),
            "--table" => {
                table = Some(
                    Table::load(std::path::Path::new(&value)).unwrap_or_else(|e| panic!("{e}")),
                );
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let table = table.expect("--table PATH is required");
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
        axum::serve(listener, router(table, Arc::new(Stats::default())))
            .await
            .expect("the server runs");
    });
}

#[cfg(test)]
mod tests {
    //! The scripted server against the real judge, over HTTP: what the CLI tests rely on.

    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;

    use assay_core::answer::{ContextItem, Metric};
    use assay_providers::{ChatModel, OpenAiChat, ProviderOptions};
    use assay_run::answer::TextEmbedder;
    use assay_run::answer::judge::{AnswerJudge, JudgeInput};

    use super::*;

    /// The question asked and "When is the fee due?" point the same way; anything else is
    /// orthogonal to them.
    struct Fixed;

    type Embedded<'a> = Pin<Box<dyn Future<Output = Result<Vec<Vec<f32>>, String>> + Send + 'a>>;

    // What `#[async_trait]` would write (this crate does not depend on async-trait).
    impl TextEmbedder for Fixed {
        fn embed<'s, 't, 'a>(&'s self, texts: &'t [String]) -> Embedded<'a>
        where
            's: 'a,
            't: 'a,
            Self: 'a,
        {
            Box::pin(async move {
                Ok(texts
                    .iter()
                    .map(|t| {
                        if t.contains("fee due") || t.contains("when do I pay") {
                            vec![1.0, 0.0]
                        } else {
                            vec![0.0, 1.0]
                        }
                    })
                    .collect())
            })
        }
    }

    const REPLY: &str = "A plot costs 40 pounds a year. The fee is due by 1 March. \
                         You can pay by card.";
    const REFERENCE: &str = "Plots cost 40 pounds a year. Late payers lose their plot.";

    fn table() -> Table {
        Table::from_json(&json!({
            "claims": {REPLY: ["A plot costs 40 pounds a year.", "The plot fee is due by 1 March.",
                               "The plot fee can be paid by card."]},
            "verdicts": {
                "A plot costs 40 pounds a year.": {"supported": true, "entity": "plot-fees"},
                "The plot fee is due by 1 March.": "plot-fees",
                "Plots cost 40 pounds a year.": "plot-fees",
                "Late payers lose their plot.": false
            },
            "questions": {REPLY: ["When is the fee due?", "What does a plot cost?"]},
            "garbage": ["GARBLED"],
            "invalid": ["OUT OF RANGE"]
        }))
        .unwrap()
    }

    fn contexts() -> Vec<ContextItem> {
        vec![
            ContextItem {
                entity: Some("water-rota".into()),
                text: "Members water the shared beds on a weekly rota.".into(),
            },
            ContextItem {
                entity: Some("plot-fees".into()),
                text: "Plot fees are 40 pounds a year and are due by 1 March.".into(),
            },
        ]
    }

    fn serve(stats: Arc<Stats>) -> (tokio::runtime::Runtime, String) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move { axum::serve(listener, router(table(), stats)).await });
        (runtime, url)
    }

    fn judge(url: &str) -> AnswerJudge {
        let options = ProviderOptions {
            openai_base_url: format!("{url}/v1"),
            ..ProviderOptions::default()
        };
        let model: Arc<dyn ChatModel> =
            Arc::new(OpenAiChat::new("scripted-judge", None, &options).unwrap());
        AnswerJudge {
            model,
            embedder: Some(Arc::new(Fixed)),
            max_tokens: 600,
        }
    }

    #[test]
    fn the_judge_scores_each_metric_from_the_table_over_http() {
        let stats = Arc::new(Stats::default());
        let (runtime, url) = serve(stats.clone());
        let judge = judge(&url);
        let ctx = contexts();
        let input = JudgeInput {
            question: "How much is a plot and when do I pay?",
            reply: REPLY,
            contexts: &ctx,
            reference: Some(REFERENCE),
        };
        let got = runtime
            .block_on(judge.judge(&input, &Metric::ALL, 2))
            .unwrap();
        // 2 of 3 claims supported (the card claim has no verdict).
        assert_eq!(got[&Metric::Faithfulness].score, Some(2.0 / 3.0));
        assert_eq!(
            got[&Metric::Faithfulness].claims[1].entity.as_deref(),
            Some("plot-fees")
        );
        // Cosines 1 and 0.
        assert_eq!(got[&Metric::AnswerRelevancy].score, Some(0.5));
        // Useful by default: plot-fees (rank 2) supports a reference claim: (1/2) / 1.
        assert_eq!(got[&Metric::ContextPrecision].score, Some(0.5));
        // 1 of the reference's 2 sentences.
        assert_eq!(got[&Metric::ContextRecall].score, Some(0.5));
        assert_eq!(stats.received.load(Ordering::SeqCst), 5);

        // Without the plot-fees context, its verdicts no longer count.
        let only_rota = &ctx[..1];
        let input = JudgeInput {
            contexts: only_rota,
            ..input
        };
        let got = runtime
            .block_on(judge.judge(&input, &[Metric::Faithfulness], 2))
            .unwrap();
        assert_eq!(got[&Metric::Faithfulness].score, Some(0.0));
    }

    #[test]
    fn garbage_and_invalid_lines_make_the_judge_fail_naming_the_metric() {
        let (runtime, url) = serve(Arc::new(Stats::default()));
        let judge = judge(&url);
        let ctx = contexts();
        for (reply, metric) in [
            (
                "GARBLED. A plot costs 40 pounds a year.",
                Metric::Faithfulness,
            ),
            (
                "OUT OF RANGE. A plot costs 40 pounds a year.",
                Metric::Faithfulness,
            ),
            (
                "OUT OF RANGE. A plot costs 40 pounds a year.",
                Metric::AnswerRelevancy,
            ),
            (
                "OUT OF RANGE. A plot costs 40 pounds a year.",
                Metric::ContextPrecision,
            ),
            (
                "OUT OF RANGE. A plot costs 40 pounds a year.",
                Metric::ContextRecall,
            ),
        ] {
            let reference = format!("{reply} Late payers lose their plot.");
            let input = JudgeInput {
                question: "How much is a plot?",
                reply,
                contexts: &ctx,
                reference: Some(&reference),
            };
            let err = runtime
                .block_on(judge.judge(&input, &[metric], 2))
                .unwrap_err();
            assert_eq!(err.metric, metric, "{err}");
            assert!(!err.is_provider, "{err}");
            assert!(err.to_string().contains("3 attempt"), "{err}");
        }
    }

    #[test]
    fn tables_reject_unknown_keys_and_bad_shapes() {
        assert!(
            Table::from_json(&json!({"claim": {}}))
                .unwrap_err()
                .contains("unknown key `claim`")
        );
        assert!(Table::from_json(&json!({"verdicts": {"c": 3}})).is_err());
        assert!(Table::from_json(&json!({"garbage": "x"})).is_err());
    }

    #[test]
    fn unknown_texts_split_into_sentences() {
        assert_eq!(
            sentences("It opens at 8.30 daily.  Bring gloves! Why? Because"),
            [
                "It opens at 8.30 daily.",
                "Bring gloves!",
                "Why?",
                "Because"
            ]
        );
    }
}
