//! assay's side of the cross-check against Ragas (bench/ragas): scores each row of a rows file
//! with the real grounded-answer judge (`assay_run::answer::judge::AnswerJudge`), its model
//! an in-process scripted [`ChatModel`] that answers every judge prompt from the rows file's
//! table (the scripted judge `answer_judge.rs`, reused as a module) and its embedder a lookup
//! in the table's `embeddings`.
//!
//! # The rows file
//!
//! ```json
//! {
//!   "relevancy_questions": 3,
//!   "rows": [{"id": "…", "question": "…", "reply": "…",
//!             "contexts": [{"entity": "plot-fees", "text": "…"}], "reference": "…"}],
//!   "table": {"claims": {…}, "verdicts": {…}, …, "embeddings": {"<text>": [1, 0, 0]}}
//! }
//! ```
//!
//! `table` is `answer_judge.rs`'s table (see its module docs) plus `embeddings`: the vector of
//! every text the embedder is asked for (the question asked and each generated question),
//! matched after collapsing runs of whitespace. A row's `reference` is optional; other keys of
//! a row (`covers`) are ignored.
//!
//! ```sh
//! cargo run -p assay-cli --example answer_metrics -- bench/ragas/rows.json
//! ```
//!
//! It prints one JSON object on stdout: `{"rows": [{"id", "metrics": {"faithfulness":
//! {"score": 0.5 | null, "note": "…" | null}, …}}]}`, every metric for every row. A judge
//! failure is printed as the row's `error` (and the exit status is 1).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use assay_core::answer::{ContextItem, Metric};
use assay_providers::{ChatModel, ChatRequest, ChatResponse, ProviderError, Role};
use assay_run::answer::TextEmbedder;
use assay_run::answer::judge::{AnswerJudge, JudgeInput};
use serde_json::{Value, json};

// The scripted judge's table and `answer`; its server, `main` and tests go unused here.
#[path = "answer_judge.rs"]
#[allow(dead_code)]
mod answer_judge;

use answer_judge::{Table, answer};

/// `text` with every run of whitespace made one space (as the table's keys are).
fn norm(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A judge model answering from the table, in-process: the schema's name and the first user
/// turn go to `answer_judge::answer`.
#[derive(Debug)]
struct Scripted {
    table: Table,
}

type Chatted<'a> = Pin<Box<dyn Future<Output = Result<ChatResponse, ProviderError>> + Send + 'a>>;

// What `#[async_trait]` would write (this crate does not depend on async-trait).
impl ChatModel for Scripted {
    fn model(&self) -> &'static str {
        "scripted/answer-judge"
    }

    fn chat<'s, 'r, 'a>(&'s self, request: &'r ChatRequest) -> Chatted<'a>
    where
        's: 'a,
        'r: 'a,
        Self: 'a,
    {
        Box::pin(async move {
            let schema = request
                .output_schema
                .as_ref()
                .map_or("", |s| s.name.as_str());
            let prompt = request
                .messages
                .iter()
                .find(|m| m.role == Role::User)
                .map_or("", |m| m.content.as_str());
            Ok(ChatResponse {
                text: answer(&self.table, schema, prompt),
                ..ChatResponse::default()
            })
        })
    }
}

/// The table's vectors, by text.
struct Lookup {
    vectors: BTreeMap<String, Vec<f32>>,
}

type Embedded<'a> = Pin<Box<dyn Future<Output = Result<Vec<Vec<f32>>, String>> + Send + 'a>>;

impl TextEmbedder for Lookup {
    fn embed<'s, 't, 'a>(&'s self, texts: &'t [String]) -> Embedded<'a>
    where
        's: 'a,
        't: 'a,
        Self: 'a,
    {
        Box::pin(async move {
            texts
                .iter()
                .map(|t| {
                    self.vectors
                        .get(&norm(t))
                        .cloned()
                        .ok_or_else(|| format!("the table has no embedding for {t:?}"))
                })
                .collect()
        })
    }
}

/// One row to score.
struct Row {
    id: String,
    question: String,
    reply: String,
    contexts: Vec<ContextItem>,
    reference: Option<String>,
}

/// What the rows file holds.
struct Bench {
    relevancy_questions: usize,
    rows: Vec<Row>,
    table: Table,
    vectors: BTreeMap<String, Vec<f32>>,
}

fn text(row: &Value, key: &str, at: &str) -> Result<String, String> {
    row.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{at}: `{key}` must be a string"))
}

fn parse(json: &Value) -> Result<Bench, String> {
    let mut table = json
        .get("table")
        .and_then(Value::as_object)
        .cloned()
        .ok_or("`table` must be an object")?;
    let mut vectors = BTreeMap::new();
    if let Some(embeddings) = table.remove("embeddings") {
        let map = embeddings
            .as_object()
            .ok_or("table.embeddings: expected an object")?;
        for (t, v) in map {
            let vector: Vec<f32> = v
                .as_array()
                .ok_or_else(|| format!("table.embeddings.{t}: expected a list of numbers"))?
                .iter()
                .map(|x| {
                    #[allow(clippy::cast_possible_truncation)] // vectors are f32, as embedders give
                    x.as_f64()
                        .map(|f| f as f32)
                        .ok_or_else(|| format!("table.embeddings.{t}: expected a list of numbers"))
                })
                .collect::<Result<_, _>>()?;
            vectors.insert(norm(t), vector);
        }
    }
    let table = Table::from_json(&Value::Object(table)).map_err(|e| format!("table: {e}"))?;
    let relevancy_questions = json
        .get("relevancy_questions")
        .map_or(Some(3), Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("`relevancy_questions` must be a whole number")?;
    let rows = json
        .get("rows")
        .and_then(Value::as_array)
        .ok_or("`rows` must be a list")?
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let at = format!("rows[{i}]");
            let contexts = row
                .get("contexts")
                .cloned()
                .map(serde_json::from_value::<Vec<ContextItem>>)
                .transpose()
                .map_err(|e| format!("{at}.contexts: {e}"))?
                .unwrap_or_default();
            let reference = match row.get("reference") {
                None | Some(Value::Null) => None,
                Some(_) => Some(text(row, "reference", &at)?),
            };
            Ok(Row {
                id: text(row, "id", &at)?,
                question: text(row, "question", &at)?,
                reply: text(row, "reply", &at)?,
                contexts,
                reference,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Bench {
        relevancy_questions,
        rows,
        table,
        vectors,
    })
}

/// Scores every row: `(json, whether every row was scored)`.
async fn score(bench: Bench) -> (Value, bool) {
    let judge = AnswerJudge {
        model: Arc::new(Scripted { table: bench.table }),
        embedder: Some(Arc::new(Lookup {
            vectors: bench.vectors,
        })),
        max_tokens: 800,
    };
    let mut out = Vec::with_capacity(bench.rows.len());
    let mut all_scored = true;
    for row in &bench.rows {
        let input = JudgeInput {
            question: &row.question,
            reply: &row.reply,
            contexts: &row.contexts,
            reference: row.reference.as_deref(),
        };
        match judge
            .judge(&input, &Metric::ALL, bench.relevancy_questions)
            .await
        {
            Ok(outcomes) => {
                let metrics: serde_json::Map<String, Value> = outcomes
                    .iter()
                    .map(|(m, o)| {
                        (
                            m.as_str().to_owned(),
                            json!({"score": o.score, "note": o.note}),
                        )
                    })
                    .collect();
                out.push(json!({"id": row.id, "metrics": metrics}));
            }
            Err(e) => {
                all_scored = false;
                out.push(json!({"id": row.id, "error": e.to_string()}));
            }
        }
    }
    (json!({"rows": out}), all_scored)
}

fn run(path: &Path) -> Result<bool, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    let bench = parse(&json).map_err(|e| format!("{}: {e}", path.display()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let (scores, all_scored) = runtime.block_on(score(bench));
    #[allow(clippy::print_stdout)]
    {
        println!("{scores:#}");
    }
    Ok(all_scored)
}

fn main() -> std::process::ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("usage: answer_metrics ROWS.json");
        }
        return std::process::ExitCode::from(2);
    };
    match run(Path::new(&path)) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(1),
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("answer_metrics: {e}");
            }
            std::process::ExitCode::from(2)
        }
    }
}
