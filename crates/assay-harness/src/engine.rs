//! The system under test, assembled: the project's knowledge base imported into the SQLite
//! store (`.assay/kb.db`), an embedder, fresh embeddings, and the retrieval pipeline.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use assay_core::UserState;
use assay_core::entity::DEFAULT_AUDIENCE;
use assay_core::runlog::Candidate;
use assay_kb::EntityFilter;
use assay_kb::store::{Edit, ImportReport, KbStore, SqliteStore};
use assay_providers::{Embedder, EmbedderOptions, EmbedderSpec, InputKind};
use assay_retrieval::patterns::PatternMatcher;
use assay_retrieval::pipeline::{Pipeline, RetrievalConfig, TokenCounter};

use crate::HarnessError;
use crate::project::Project;
use crate::runners::{SemanticRetrieval, SemanticRetriever};
use crate::settings::ProjectSettings;

/// The folder of local state inside a project (git-ignored).
pub const STATE_DIR: &str = ".assay";
/// The embedder used when nothing else is configured: needs no setup and no weights.
pub const DEFAULT_EMBEDDER: &str = "builtin/hashed-ngrams";
/// The environment variable that overrides the project's embedder.
pub const ASSAY_EMBEDDER: &str = "ASSAY_EMBEDDER";
/// The environment variable that names a local model directory.
pub const ASSAY_MODEL_DIR: &str = "ASSAY_MODEL_DIR";
/// The similarity threshold of the built-in lexical embedder, whose cosines run lower than a
/// neural model's (see the guide).
pub const BUILTIN_SCORE_THRESHOLD: f32 = 0.2;
/// The similarity threshold of in-process sentence-transformers (`local/`, `hf/`): measured on
/// the example knowledge base with all-MiniLM-L6-v2, whose cosines for a correct match run
/// 0.28 to 0.66 (docs/guide.md).
pub const LOCAL_SCORE_THRESHOLD: f32 = 0.25;
/// The similarity threshold of remote embedders (003 §3, calibrated for Voyage).
pub const REMOTE_SCORE_THRESHOLD: f32 = 0.65;

/// The store's path: `<project>/.assay/kb.db`.
pub fn store_path(settings: &ProjectSettings) -> PathBuf {
    settings.root.join(STATE_DIR).join("kb.db")
}

/// Opens (creating if needed) the project's store.
pub fn open_store(settings: &ProjectSettings) -> Result<SqliteStore, HarnessError> {
    Ok(SqliteStore::open(store_path(settings))?)
}

/// Imports the project's `kb/` files into the store: new entities are created, changed ones get
/// a new version, entities no longer in the files are deactivated, unchanged ones are left alone.
pub fn import_kb(store: &dyn KbStore, project: &Project) -> Result<ImportReport, HarnessError> {
    Ok(store.import(project.kb.kb.entities(), &Edit::now("import"))?)
}

/// An embedder choice and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderChoice {
    /// The embedder.
    pub spec: EmbedderSpec,
    /// Its options.
    pub options: EmbedderOptions,
    /// `--embedder`, `ASSAY_EMBEDDER`, `assay.toml` or `default`.
    pub source: &'static str,
}

impl EmbedderChoice {
    /// Whether this is the built-in lexical embedder.
    pub fn is_builtin(&self) -> bool {
        matches!(self.spec, EmbedderSpec::Builtin(_))
    }
}

/// Chooses the embedder: `--embedder` > `ASSAY_EMBEDDER` > `assay.toml` > the built-in one.
/// `local` alone takes its directory from `ASSAY_MODEL_DIR`, else `[embedder] model_dir`
/// (relative to the project). A `local/<dir>` written in `assay.toml` is relative to the project.
pub fn choose_embedder(
    settings: &ProjectSettings,
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<EmbedderChoice, HarnessError> {
    let from_env = env(ASSAY_EMBEDDER).filter(|v| !v.trim().is_empty());
    let (name, source) = match (flag, from_env, settings.embedder.model.as_deref()) {
        (Some(f), _, _) => (f.to_owned(), "--embedder"),
        (None, Some(e), _) => (e, ASSAY_EMBEDDER),
        (None, None, Some(m)) => (m.to_owned(), "assay.toml"),
        (None, None, None) => (DEFAULT_EMBEDDER.to_owned(), "default"),
    };
    let name = name.trim();
    let spec = if name == "local" {
        let dir = env(ASSAY_MODEL_DIR)
            .filter(|d| !d.trim().is_empty())
            .map(PathBuf::from)
            .or_else(|| settings.embedder.model_dir.as_ref().map(|d| settings.root.join(d)))
            .ok_or_else(|| {
                HarnessError::Usage(format!(
                    "embedder `local` needs a model directory: set {ASSAY_MODEL_DIR}, or model_dir in [embedder] of assay.toml, or name it as local/<dir>"
                ))
            })?;
        EmbedderSpec::Local(dir)
    } else {
        let spec: EmbedderSpec = name.parse().map_err(|e: assay_providers::ProviderError| {
            HarnessError::Usage(format!("{source}: {e}"))
        })?;
        match spec {
            EmbedderSpec::Local(dir) if source == "assay.toml" && dir.is_relative() => {
                EmbedderSpec::Local(settings.root.join(dir))
            }
            other => other,
        }
    };
    let mut options = EmbedderOptions::default();
    let e = &settings.embedder;
    if let Some(url) = &e.openai_base_url {
        options.openai_base_url.clone_from(url);
    }
    if let Some(url) = &e.voyage_base_url {
        options.voyage_base_url.clone_from(url);
    }
    if let Some(t) = e.timeout_seconds {
        options.timeout = Duration::from_secs_f64(t);
    }
    options.batch_size = e.batch_size;
    Ok(EmbedderChoice {
        spec,
        options,
        source,
    })
}

/// Builds the chosen embedder. A bad configuration or a model that cannot be loaded is bad
/// input (exit 2); nothing is contacted yet.
pub fn build_embedder(choice: &EmbedderChoice) -> Result<Box<dyn Embedder>, HarnessError> {
    assay_providers::build_embedder(&choice.spec, &choice.options).map_err(|e| {
        HarnessError::Usage(format!(
            "embedder `{}` (from {}): {e}",
            choice.spec, choice.source
        ))
    })
}

/// The retrieval settings for an embedder: the configured threshold, or the default for the
/// embedder's kind.
pub fn retrieval_config(settings: &ProjectSettings, choice: &EmbedderChoice) -> RetrievalConfig {
    let r = &settings.retrieval;
    let default_threshold = match choice.spec {
        EmbedderSpec::Builtin(_) => BUILTIN_SCORE_THRESHOLD,
        EmbedderSpec::Local(_) | EmbedderSpec::HuggingFace(_) => LOCAL_SCORE_THRESHOLD,
        _ => REMOTE_SCORE_THRESHOLD,
    };
    RetrievalConfig {
        top_k: r.top_k,
        fetch_factor: r.fetch_factor,
        score_threshold: r.score_threshold.unwrap_or(default_threshold),
        priority_weight: r.priority_weight,
        max_tokens_budget: r.max_tokens_budget,
    }
}

/// What [`refresh_embeddings`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmbedReport {
    /// Entities embedded now.
    pub embedded: Vec<String>,
    /// Entities whose embedding was already fresh.
    pub fresh: usize,
}

/// Embeds the active entities whose embedding is missing or stale for `embedder`'s model (all of
/// them with `force`; only `only` when given). A provider failure is an infrastructure error.
pub async fn refresh_embeddings(
    store: &dyn KbStore,
    embedder: &dyn Embedder,
    force: bool,
    only: Option<&str>,
) -> Result<EmbedReport, HarnessError> {
    let model = embedder.model().to_owned();
    let filter = EntityFilter {
        active: Some(true),
        ..EntityFilter::default()
    };
    let statuses = store.embedding_status(&filter, &model)?;
    if let Some(id) = only
        && !statuses.iter().any(|(e, _)| e == id)
    {
        return Err(HarnessError::Usage(format!("no active entity `{id}`")));
    }
    let mut report = EmbedReport::default();
    let mut todo = Vec::new();
    for (id, status) in statuses {
        let wanted = match only {
            Some(one) => id == one,
            None => force || !status.is_fresh(),
        };
        if wanted {
            todo.push(id);
        } else {
            report.fresh += 1;
        }
    }
    let mut texts = Vec::with_capacity(todo.len());
    for id in &todo {
        let entity = store
            .get(id)?
            .ok_or_else(|| HarnessError::Infrastructure(format!("entity `{id}` vanished")))?;
        texts.push(entity.embedding_text());
    }
    let vectors = embedder
        .embed(&texts, InputKind::Document)
        .await
        .map_err(|e| {
            HarnessError::Infrastructure(format!("embedding entities with {model}: {e}"))
        })?;
    if vectors.len() != todo.len() {
        return Err(HarnessError::Infrastructure(format!(
            "{model} returned {} vectors for {} texts",
            vectors.len(),
            todo.len()
        )));
    }
    for (id, vector) in todo.iter().zip(&vectors) {
        store.set_embedding(id, &model, vector)?;
    }
    report.embedded = todo;
    Ok(report)
}

/// Builds the retrieval pipeline over the store's current entities and fresh embeddings.
pub fn build_pipeline(
    store: &dyn KbStore,
    project: &Project,
    model: &str,
    config: RetrievalConfig,
) -> Result<Pipeline, HarnessError> {
    let embeddings = store.current_embeddings(
        &EntityFilter {
            active: Some(true),
            ..EntityFilter::default()
        },
        model,
    )?;
    let patterns = match &project.rules {
        Some(rules) => {
            Some(PatternMatcher::new(rules).map_err(|e| HarnessError::Usage(e.to_string()))?)
        }
        None => None,
    };
    let counter =
        TokenCounter::cl100k().map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
    Pipeline::new(store, patterns, &embeddings, config, &counter)
        .map_err(|e| HarnessError::Infrastructure(e.to_string()))
}

/// Embeds queries in one call; on a provider failure every query maps to that error.
pub async fn embed_queries(
    embedder: &dyn Embedder,
    queries: &[String],
) -> HashMap<String, Result<Vec<f32>, String>> {
    let mut unique: Vec<String> = queries.to_vec();
    unique.sort();
    unique.dedup();
    match embedder.embed(&unique, InputKind::Query).await {
        Ok(vectors) if vectors.len() == unique.len() => unique
            .into_iter()
            .zip(vectors.into_iter().map(Ok))
            .collect(),
        Ok(vectors) => {
            let e = format!(
                "{} returned {} vectors for {} texts",
                embedder.model(),
                vectors.len(),
                unique.len()
            );
            unique.into_iter().map(|q| (q, Err(e.clone()))).collect()
        }
        Err(e) => {
            let e = format!("embedding the prompt with {}: {e}", embedder.model());
            unique.into_iter().map(|q| (q, Err(e.clone()))).collect()
        }
    }
}

/// The semantic bank's system under test (000 §6.1): the `candidates` nearest SITUATION
/// entities of the case's audience, then a selection of `top_k`. Without a reranker model the
/// selection orders candidates by similarity plus priority bonus (the pipeline's final score).
pub struct SemanticSearch<'a> {
    pipeline: &'a Pipeline,
    queries: HashMap<String, Result<Vec<f32>, String>>,
    candidates: usize,
    top_k: usize,
    description: String,
}

impl<'a> SemanticSearch<'a> {
    /// A search over `pipeline` with the prompts' embeddings from [`embed_queries`].
    pub fn new(
        pipeline: &'a Pipeline,
        queries: HashMap<String, Result<Vec<f32>, String>>,
        candidates: usize,
        top_k: usize,
        embedder_model: &str,
    ) -> SemanticSearch<'a> {
        let description = format!(
            "{embedder_model} top {candidates} → reranker none (similarity + priority) top {top_k}"
        );
        SemanticSearch {
            pipeline,
            queries,
            candidates,
            top_k,
            description,
        }
    }
}

fn audience_of(state: &UserState) -> &str {
    state
        .get("user_type")
        .and_then(|v| v.as_str())
        .unwrap_or(DEFAULT_AUDIENCE)
}

impl SemanticRetriever for SemanticSearch<'_> {
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn retrieve(&self, prompt: &str, user_state: &UserState) -> Result<SemanticRetrieval, String> {
        let query = match self.queries.get(prompt) {
            Some(Ok(q)) => q,
            Some(Err(e)) => return Err(e.clone()),
            None => return Err(format!("no embedding for prompt {prompt:?}")),
        };
        let nearest = self
            .pipeline
            .nearest(query, audience_of(user_state), self.candidates);
        let weight = self.pipeline.config().priority_weight;
        let mut ranked: Vec<(f32, &str)> = nearest
            .iter()
            .map(|(id, sim)| {
                let bonus = f32::from(self.pipeline.priority(id).unwrap_or(0)) / 100.0 * weight;
                (sim + bonus, id.as_str())
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        Ok(SemanticRetrieval {
            candidates: nearest
                .iter()
                .map(|(id, sim)| Candidate {
                    entity_id: id.clone(),
                    similarity: f64::from(*sim),
                })
                .collect(),
            selections: ranked
                .into_iter()
                .take(self.top_k)
                .map(|(_, id)| id.to_owned())
                .collect(),
        })
    }
}
