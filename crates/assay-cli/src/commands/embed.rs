//! `assay embed`

use assay_project::HarnessError;
use assay_project::engine;
use assay_project::settings::ProjectSettings;
use assay_providers::InputKind;
use serde_json::json;

use super::{env, out, runtime};
use crate::args::EmbedArgs;
use crate::exit::Exit;

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
