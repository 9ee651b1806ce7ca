//! Retrieval quality on an evaluation set (`bench/retrieval/eval_set.jsonl`): for each message,
//! where the entity a coach would want lands.
//!
//! ```sh
//! cargo run --release --example retrieval_eval -- PROJECT bench/retrieval/eval_set.jsonl [--embedder NAME]
//! ```
//!
//! The project's `assay.toml` decides the mode, the views and the thresholds, as for
//! `assay retrieve`. Two lists are measured per message (audience PARENT, empty user state):
//!
//! * `pipeline`: what `assay retrieve` answers, less ALWAYS and STATE entities (003 §8's "top 3
//!   among the retrieved"): crisis and keyword entities first, then the semantic ones above the
//!   threshold, at most `top_k`;
//! * `ranking`: the semantic ranking alone, 15 deep, without the threshold.
//!
//! Prints JSON: top-1, top-3 and MRR of each, the misses, and the in-process time of ranking.

use std::time::Instant;

use anyhow::{Context, bail};
use assay_project::engine;
use assay_project::project::Project;
use assay_providers::InputKind;
use assay_retrieval::pipeline::Stage;
use serde_json::{Value, json};

struct Item {
    id: String,
    entity: String,
    message: String,
}

#[derive(Default)]
struct Tally {
    top1: usize,
    top3: usize,
    rr: f64,
}

impl Tally {
    fn add(&mut self, rank: Option<usize>) {
        if let Some(r) = rank {
            self.top1 += usize::from(r == 0);
            self.top3 += usize::from(r < 3);
            self.rr += 1.0 / (r + 1) as f64;
        }
    }

    fn json(&self, n: usize) -> Value {
        let n = n.max(1) as f64;
        json!({
            "top1": self.top1 as f64 / n,
            "top3": self.top3 as f64 / n,
            "mrr": self.rr / n,
        })
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(project_dir), Some(eval)) = (args.first(), args.get(1)) else {
        bail!("usage: retrieval_eval PROJECT EVAL_JSONL [--embedder NAME]");
    };
    let flag = args
        .iter()
        .position(|a| a == "--embedder")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let items: Vec<Item> = std::fs::read_to_string(eval)
        .with_context(|| format!("reading {eval}"))?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l)?;
            let field = |k: &str| {
                v[k].as_str()
                    .map(str::to_owned)
                    .context(format!("field `{k}`"))
            };
            Ok(Item {
                id: field("id")?,
                entity: field("entity")?,
                message: field("message")?,
            })
        })
        .collect::<anyhow::Result<_>>()?;

    let project = Project::load(std::path::Path::new(project_dir))?;
    let settings = &project.settings;
    let store = engine::open_store(settings)?;
    engine::sync_kb(&store, &project)?;
    let env = |k: &str| std::env::var(k).ok();
    let choice = engine::choose_embedder(settings, flag, &env)?;
    let embedder = engine::build_embedder(&choice)?;
    let config = engine::retrieval_config(settings, &choice);
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let (pipeline, _) = rt.block_on(engine::prepare_pipeline(
        &*store,
        &*store,
        &project,
        embedder.as_ref(),
        config.clone(),
    ))?;
    let messages: Vec<String> = items.iter().map(|i| i.message.clone()).collect();
    let started = Instant::now();
    let queries = rt.block_on(embedder.embed(&messages, InputKind::Query))?;
    let embed_ms = started.elapsed().as_secs_f64() * 1000.0;

    let state = assay_core::UserState::new();
    let (mut pipe, mut rank) = (Tally::default(), Tally::default());
    let mut misses = Vec::new();
    let mut rank_us = Vec::with_capacity(items.len());
    for (item, query) in items.iter().zip(&queries) {
        let r = pipeline
            .retrieve(&item.message, Some(query), &state, "PARENT")
            .expect("an exact pipeline does not fail");
        let retrieved: Vec<&str> = r
            .entities
            .iter()
            .filter(|e| !matches!(e.stage, Stage::Always | Stage::State))
            .map(|e| e.entity_id.as_str())
            .collect();
        let at = retrieved.iter().position(|e| *e == item.entity);
        pipe.add(at);
        let t = Instant::now();
        let ranked = pipeline
            .rank(query, &item.message, "PARENT", 15)
            .expect("an exact pipeline does not fail");
        rank_us.push(t.elapsed().as_secs_f64() * 1e6);
        let at_rank = ranked.iter().position(|h| h.entity_id == item.entity);
        rank.add(at_rank);
        if at.is_none_or(|r| r >= 3) {
            misses.push(json!({
                "id": item.id,
                "want": item.entity,
                "got": retrieved.iter().take(3).collect::<Vec<_>>(),
                "rank_without_threshold": at_rank.map(|r| r + 1),
            }));
        }
    }
    rank_us.sort_by(f64::total_cmp);
    let n = items.len();
    let doc = json!({
        "embedder": embedder.model(),
        "mode": config.mode.as_str(),
        "views": settings.retrieval.views,
        "score_threshold": config.score_threshold,
        "lexical_weight": config.lexical_weight,
        "messages": n,
        "pipeline": pipe.json(n),
        "ranking": rank.json(n),
        "embed_queries_ms": embed_ms,
        "rank_p50_us": rank_us.get(n / 2).copied().unwrap_or_default(),
        "misses": misses,
    });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}
