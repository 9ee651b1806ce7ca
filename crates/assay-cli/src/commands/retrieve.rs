//! `assay retrieve`

use std::path::PathBuf;

use anyhow::Context;
use assay_core::UserState;
use assay_project::HarnessError;
use assay_project::engine;
use assay_project::project::Project;
use assay_project::retrieve::{self, Ask};
use assay_retrieval::pipeline::Retrieval;
use clap::Args;
use serde_json::json;

use super::{env, log_warnings, out, runtime};
use crate::exit::Exit;

/// `assay retrieve`
#[derive(Debug, Args)]
pub struct RetrieveArgs {
    /// The user's message.
    pub message: String,

    /// The project directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project: PathBuf,

    /// The user's state as a JSON object, e.g. '{"days_since_last": 9}'.
    #[arg(long, value_name = "JSON", conflicts_with = "user")]
    pub state: Option<String>,

    /// Read the user's state from the store (see `assay state`).
    #[arg(long, value_name = "USER_ID")]
    pub user: Option<String>,

    /// The audience (default: the state's user_type, else PARENT).
    #[arg(long, value_name = "AUDIENCE")]
    pub audience: Option<String>,

    /// Show each stage's candidates and why entities were dropped.
    #[arg(long)]
    pub explain: bool,

    /// Print JSON.
    #[arg(long)]
    pub json: bool,

    /// Embedder (`vendor/model`); overrides ASSAY_EMBEDDER and assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,
}

fn parse_state(text: &str) -> Result<UserState, HarnessError> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(HarnessError::Usage(
            "--state: expected a JSON object, e.g. '{\"days_since_last\": 9}'".into(),
        )),
        Err(e) => Err(HarnessError::Usage(format!("--state: not valid JSON: {e}"))),
    }
}

pub fn run(args: &RetrieveArgs) -> anyhow::Result<Exit> {
    let project = Project::load(&args.project)?;
    log_warnings(&project.warnings);
    let store = engine::open_store(&project.settings)?;
    engine::sync_kb(&store, &project)?;
    let state = match (&args.state, &args.user) {
        (Some(text), _) => parse_state(text)?,
        (None, Some(user)) => store.get_user_state(user, std::time::SystemTime::now().into())?,
        (None, None) => UserState::new(),
    };
    let audience = retrieve::audience(args.audience.as_deref(), &state);

    let choice = engine::choose_embedder(&project.settings, args.embedder.as_deref(), &env)?;
    let ask = Ask {
        message: args.message.clone(),
        audience: audience.clone(),
        state,
        top_k: None,
    };
    let traced = runtime()?.block_on(retrieve::retrieve(&project, &store, &choice, &ask))?;
    let retrieval = traced.retrieval;
    let ids: Vec<String> = retrieval
        .entities
        .iter()
        .map(|e| e.entity_id.clone())
        .collect();
    store
        .record_retrievals(&ids)
        .context("recording retrieval counts")?;

    if args.json {
        let mut doc = json!({
            "message": args.message,
            "audience": audience,
            "embedder": traced.embedder,
            "entities": retrieval.entities,
            "tokens_used": retrieval.tokens_used,
            "token_budget": retrieval.token_budget,
        });
        if args.explain {
            doc["stages"] = json!(retrieval.stages);
            doc["dropped"] = json!(retrieval.dropped);
            doc["notes"] = json!(retrieval.notes);
            doc["search"] = json!(traced.search);
            if !retrieval.matches.is_empty() {
                doc["matches"] = json!(retrieval.matches);
            }
        }
        out(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
    } else {
        let mut text = render(&retrieval, args.explain, &traced.embedder, &audience);
        if args.explain {
            text.push_str(&format!(
                "\nsearch: {} ({})\n",
                traced.search.describe(),
                traced.search.reason
            ));
        }
        out(&text);
    }
    Ok(Exit::Success)
}

fn render(r: &Retrieval, explain: bool, model: &str, audience: &str) -> String {
    let mut text = format!(
        "{} entities, {} of {} tokens (audience {audience}, embedder {model})\n\n",
        r.entities.len(),
        r.tokens_used,
        r.token_budget
    );
    text.push_str(&format!(
        "  {:>2}  {:<32} {:<10} {:<9} {:>6} {:>6} {:>6}\n",
        "#", "entity", "type", "stage", "sim", "final", "tokens"
    ));
    for (i, e) in r.entities.iter().enumerate() {
        let stage = if e.also.is_empty() {
            e.stage.to_string()
        } else {
            format!(
                "{}+{}",
                e.stage,
                e.also
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("+")
            )
        };
        text.push_str(&format!(
            "  {:>2}  {:<32} {:<10} {:<9} {:>6.3} {:>6.3} {:>6}\n",
            i + 1,
            e.entity_id,
            e.entity_type.as_str(),
            stage,
            e.similarity,
            e.final_score,
            e.tokens
        ));
    }
    if explain {
        text.push_str("\nstages:\n");
        for s in &r.stages {
            let list: Vec<String> = s
                .candidates
                .iter()
                .map(|(id, sim)| format!("{id} ({sim:.3})"))
                .collect();
            text.push_str(&format!(
                "  {:<9} {}\n",
                s.stage.to_string(),
                if list.is_empty() {
                    "—".to_owned()
                } else {
                    list.join(", ")
                }
            ));
        }
        if !r.dropped.is_empty() {
            text.push_str("\ndropped:\n");
            for d in &r.dropped {
                let why = &d.reason;
                text.push_str(&format!(
                    "  {:<32} {:<9} {why}\n",
                    d.entity_id,
                    d.stage.to_string()
                ));
            }
        }
        if !r.matches.is_empty() {
            text.push_str(
                "\nsemantic matches (score = cosine of the best view + lexical bonus):\n",
            );
            for m in &r.matches {
                let lexical = match (m.lexical, &m.lexical_view) {
                    (Some(l), Some(v)) => format!(", lexical {l:.3} via {v}"),
                    (Some(l), None) => format!(", lexical {l:.3}"),
                    _ => String::new(),
                };
                text.push_str(&format!(
                    "  {:<32} {:>6.3}  cosine {:.3} via {}{lexical}\n",
                    m.entity_id,
                    m.score,
                    m.dense,
                    m.view.as_deref().unwrap_or("embedding text")
                ));
            }
        }
        for n in &r.notes {
            text.push_str(&format!("\nnote: {n}\n"));
        }
    }
    text
}
