//! `assay embed`

use std::path::PathBuf;

use assay_project::HarnessError;
use assay_project::engine;
use assay_project::settings::ProjectSettings;
use assay_providers::InputKind;
use clap::Args;
use serde_json::json;

use super::{env, out, runtime};
use crate::exit::Exit;

/// `assay embed`
#[derive(Debug, Args)]
pub struct EmbedArgs {
    /// The texts.
    #[arg(required = true)]
    pub texts: Vec<String>,

    /// Embedder (`vendor/model`); overrides ASSAY_EMBEDDER and the project's assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,

    /// The project whose assay.toml names the embedder.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project: PathBuf,

    /// Embed as documents instead of queries (matters for Voyage).
    #[arg(long)]
    pub document: bool,

    /// Print JSON: {"model", "dimension", "embeddings": [[...]]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &EmbedArgs) -> anyhow::Result<Exit> {
    let settings = ProjectSettings::load(&args.project)?;
    let choice = engine::choose_embedder(&settings, args.embedder.as_deref(), &env)?;
    let embedder = engine::build_embedder(&choice)?;
    let kind = if args.document {
        InputKind::Document
    } else {
        InputKind::Query
    };
    let vectors = runtime()?
        .block_on(embedder.embed(&args.texts, kind))
        .map_err(|e| HarnessError::Infrastructure(format!("{}: {e}", embedder.model())))?;
    let dimension = vectors.first().map_or(0, Vec::len);
    if args.json {
        let doc = json!({"model": embedder.model(), "dimension": dimension, "embeddings": vectors});
        out(&format!("{}\n", serde_json::to_string(&doc)?));
    } else {
        let mut text = format!("model {}, dimension {dimension}\n", embedder.model());
        for (t, v) in args.texts.iter().zip(&vectors) {
            let head: Vec<String> = v.iter().take(6).map(|x| format!("{x:.4}")).collect();
            text.push_str(&format!("  [{}, …]  {t}\n", head.join(", ")));
        }
        out(&text);
    }
    Ok(Exit::Success)
}
