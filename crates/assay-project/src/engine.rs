//! The system under test, assembled: the project's knowledge-base store (the embedded SQLite
//! `.assay/kb.db` refreshed from the `kb/` files, or a PostgreSQL database), an embedder, fresh
//! embeddings, and the retrieval pipeline.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use assay_core::entity::LoadMode;
use assay_kb::store::{Edit, ImportReport, KbBackend, KbStore, SqliteStore};
use assay_kb::{EmbeddingIndex, EntityFilter, KnowledgeBase, MemoryKb};
use assay_kb::{ViewEmbedding, view_text_hash};
use assay_providers::{
    ChatModel, ChatSpec, Embedder, EmbedderOptions, EmbedderSpec, InputKind, ProviderOptions,
    Reranker, RerankerSpec,
};
use assay_retrieval::pipeline::{
    DEFAULT_LEXICAL_WEIGHT, IndexSearch, Pipeline, RankMode, RetrievalConfig, ViewVector,
};

use crate::HarnessError;
use crate::lock::KbLock;
use crate::project::Project;
use crate::settings::{ProjectSettings, TunedConfig};

mod calls;
mod retriever;
mod semantic;
pub use crate::settings::{ASSAY_STORE, Selection, is_database, store_setting};
pub use calls::{ChatGroup, ProviderCalls, rate_limit_records};
pub use retriever::{SemanticRetrieval, SemanticRetriever};
pub use semantic::{SemanticSearch, rerank_documents};

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

/// The embedded store's path: `<project>/.assay/kb.db`.
pub fn store_path(settings: &ProjectSettings) -> PathBuf {
    settings.root.join(STATE_DIR).join("kb.db")
}

/// Where a store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// An SQLite file; the project's `kb/` files are the source of truth and are imported
    /// into it before use.
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgres://user@host:port/db`, never with a password): the
    /// source of truth; `kb/` files are imported only by `assay kb import`.
    Postgres(String),
}

impl std::fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreLocation::Sqlite(path) => write!(f, "{}", path.display()),
            StoreLocation::Postgres(target) => f.write_str(target),
        }
    }
}

/// An open store of either backend, and where it lives. Derefs to the store.
#[derive(Debug)]
pub struct OpenStore {
    store: Arc<dyn KbBackend>,
    /// The store's vector index, when it has one (PostgreSQL's HNSW).
    index: Option<Arc<dyn EmbeddingIndex>>,
    /// Where it lives.
    pub location: StoreLocation,
}

impl std::ops::Deref for OpenStore {
    type Target = dyn KbBackend;

    fn deref(&self) -> &Self::Target {
        &*self.store
    }
}

impl OpenStore {
    /// Whether the project's `kb/` files are the source of truth (the embedded store), so
    /// that they are imported before each use; with a database they are not.
    pub fn files_are_source(&self) -> bool {
        matches!(self.location, StoreLocation::Sqlite(_))
    }

    /// The store's approximate nearest-neighbour index over entity embeddings, when it has
    /// one (a PostgreSQL store's HNSW indexes; the SQLite store has none).
    pub fn vector_index(&self) -> Option<Arc<dyn EmbeddingIndex>> {
        self.index.clone()
    }

    fn sqlite(path: PathBuf) -> Result<OpenStore, HarnessError> {
        Ok(OpenStore {
            store: Arc::new(SqliteStore::open(&path)?),
            index: None,
            location: StoreLocation::Sqlite(path),
        })
    }
}

/// Opens (creating if needed) the project's store, as configured ([`store_setting`], reading
/// the environment).
pub fn open_store(settings: &ProjectSettings) -> Result<OpenStore, HarnessError> {
    open_store_with(settings, &|name| std::env::var(name).ok())
}

/// [`open_store`] with `env` in place of the environment.
pub fn open_store_with(
    settings: &ProjectSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<OpenStore, HarnessError> {
    let (Some(spec), source) = store_setting(settings, env) else {
        return OpenStore::sqlite(store_path(settings));
    };
    open_store_at(&spec, &settings.root).map_err(|e| match e {
        HarnessError::Usage(message) | HarnessError::Kb(assay_kb::KbError::Invalid(message)) => {
            HarnessError::Usage(format!("{source}: {message}"))
        }
        other => other,
    })
}

/// Opens the store `spec` names: a `postgres://` URL, or an SQLite file (`sqlite:PATH` or a
/// path; relative paths are relative to `root`).
pub fn open_store_at(spec: &str, root: &Path) -> Result<OpenStore, HarnessError> {
    let spec = spec.trim();
    if is_database(spec) {
        return open_postgres(spec);
    }
    if spec.contains("://") {
        return Err(HarnessError::Usage(format!(
            "store `{}`: unknown kind of store (expected postgres://user@host:port/db,              sqlite:PATH or a path to an SQLite file)",
            spec.split("://").next().unwrap_or_default()
        )));
    }
    OpenStore::sqlite(root.join(spec.strip_prefix("sqlite:").unwrap_or(spec)))
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str) -> Result<OpenStore, HarnessError> {
    let store = Arc::new(assay_kb::PgStore::connect(url)?);
    let location = StoreLocation::Postgres(store.target().to_owned());
    Ok(OpenStore {
        index: Some(store.clone()),
        store,
        location,
    })
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_url: &str) -> Result<OpenStore, HarnessError> {
    Err(HarnessError::Usage(
        "this assay was built without PostgreSQL support (cargo feature `postgres`)".into(),
    ))
}

/// Brings the store up to date with the project's `kb/` files where they are the source of
/// truth (the embedded store): an import ([`import_kb`]), under the project's knowledge-base
/// lock ([`KbLock`]), of the files as they are when the lock is taken (when another process
/// changed them since `project` was loaded, they are read again). A database store is the
/// source of truth itself and is left as it is (`assay kb import` imports files into it);
/// `None` then.
pub fn sync_kb(store: &OpenStore, project: &Project) -> Result<Option<ImportReport>, HarnessError> {
    if !store.files_are_source() {
        return sync_kb_inner(store, project);
    }
    let lock = KbLock::acquire(&project.settings.root)?;
    sync_kb_held(store, project, &lock)
}

/// [`sync_kb`] for a caller that already holds the knowledge-base lock (an edit, which must
/// read the files, check versions, write and import as one step).
pub fn sync_kb_held(
    store: &OpenStore,
    project: &Project,
    _lock: &KbLock,
) -> Result<Option<ImportReport>, HarnessError> {
    sync_kb_inner(store, project)
}

fn sync_kb_inner(
    store: &OpenStore,
    project: &Project,
) -> Result<Option<ImportReport>, HarnessError> {
    if !store.files_are_source() {
        tracing::info!(
            "the knowledge base is the database {}; the kb/ files are not imported (use `assay kb import`)",
            store.location
        );
        return Ok(None);
    }
    let now = assay_kb::fingerprint(&project.settings.kb_dir)?;
    let imported = if now == project.kb.fingerprint {
        import_kb(&**store, project)?
    } else {
        // Another process edited the files after this one read them: import what they hold
        // now, never the older copy (which would undo that edit in the store).
        tracing::info!("the kb/ files changed since they were read; reading them again");
        let fresh = if project.settings.kb_dir.is_dir() {
            assay_kb::load_dir(&project.settings.kb_dir)?.kb
        } else {
            MemoryKb::default()
        };
        store.import(fresh.entities(), &Edit::now("import"))?
    };
    tracing::info!(
        created = imported.created.len(),
        updated = imported.updated.len(),
        deactivated = imported.deactivated.len(),
        unchanged = imported.unchanged.len(),
        "imported kb/ into {}",
        store.location
    );
    Ok(Some(imported))
}

/// Imports the project's `kb/` files into the store: new entities are created, changed ones get
/// a new version, entities no longer in the files are deactivated, unchanged ones are left alone.
pub fn import_kb(store: &dyn KbStore, project: &Project) -> Result<ImportReport, HarnessError> {
    Ok(store.import(project.kb.kb.entities(), &Edit::now("import"))?)
}

/// Every current row of the store (active or not), in memory: what a run reads, many times
/// over (each always case, the state matcher, the pipeline, the journal's fingerprint), is read
/// from the store once, after the import.
pub fn snapshot(store: &dyn KbStore) -> Result<MemoryKb, HarnessError> {
    Ok(MemoryKb::new(store.list(&EntityFilter::default())?)?)
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
    /// Prepended to queries before embedding (query/document asymmetry; empty: none).
    pub query_prefix: String,
    /// Prepended to documents before embedding (empty: none).
    pub document_prefix: String,
}

/// The BGE v1.5 models' query instruction (their model cards).
pub const BGE_QUERY_INSTRUCTION: &str = "Represent this sentence for searching relevant passages: ";

/// The prefixes a model's card asks for, by its name: E5 models embed `query: ` and
/// `passage: ` texts, BGE v1.5 English models instruct queries; others (MiniLM, Voyage, which
/// takes `input_type` instead, OpenAI) need none.
pub fn default_prefixes(name: &str) -> (&'static str, &'static str) {
    let lower = name.to_ascii_lowercase();
    let base = lower.rsplit('/').next().unwrap_or(&lower);
    if base.contains("e5-") || base.starts_with("e5") {
        ("query: ", "passage: ")
    } else if base.starts_with("bge-") && base.contains("-en-v1.5") {
        (BGE_QUERY_INSTRUCTION, "")
    } else {
        ("", "")
    }
}

/// An embedder that prepends fixed prefixes to queries and documents (query/document
/// asymmetry for models that expect it). Its model name records the prefixes, so embeddings
/// made with other prefixes are stale.
#[derive(Debug)]
pub struct PrefixedEmbedder {
    inner: Box<dyn Embedder>,
    query: String,
    document: String,
    name: String,
}

impl PrefixedEmbedder {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn Embedder>, query: &str, document: &str) -> PrefixedEmbedder {
        let name = format!("{}+prefixes({:?},{:?})", inner.model(), query, document);
        PrefixedEmbedder {
            inner,
            query: query.to_owned(),
            document: document.to_owned(),
            name,
        }
    }
}

#[async_trait::async_trait]
impl Embedder for PrefixedEmbedder {
    fn model(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> Option<usize> {
        self.inner.dimension()
    }

    async fn embed_with_usage(
        &self,
        texts: &[String],
        kind: InputKind,
    ) -> Result<assay_providers::Embeddings, assay_providers::ProviderError> {
        let prefix = match kind {
            InputKind::Query => &self.query,
            InputKind::Document => &self.document,
        };
        if prefix.is_empty() {
            return self.inner.embed_with_usage(texts, kind).await;
        }
        let prefixed: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        self.inner.embed_with_usage(&prefixed, kind).await
    }
}

impl EmbedderChoice {
    /// Whether this is the built-in lexical embedder.
    pub fn is_builtin(&self) -> bool {
        matches!(self.spec, EmbedderSpec::Builtin(_))
    }

    /// Whether it runs in this process (built-in, `local/`, `hf/`): no calls to a provider.
    pub fn is_in_process(&self) -> bool {
        matches!(
            self.spec,
            EmbedderSpec::Builtin(_) | EmbedderSpec::Local(_) | EmbedderSpec::HuggingFace(_)
        )
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
    let p = &settings.providers;
    if let Some(url) = e.openai_base_url.as_ref().or(p.openai_base_url.as_ref()) {
        options.openai_base_url.clone_from(url);
    }
    if let Some(url) = e.voyage_base_url.as_ref().or(p.voyage_base_url.as_ref()) {
        options.voyage_base_url.clone_from(url);
    }
    options.timeout = Duration::from_secs_f64(e.timeout_seconds.unwrap_or(p.timeout_seconds));
    options.batch_size = e.batch_size;
    let (query, document) = default_prefixes(&spec.to_string());
    Ok(EmbedderChoice {
        spec,
        options,
        source,
        query_prefix: e.query_prefix.clone().unwrap_or_else(|| query.to_owned()),
        document_prefix: e
            .document_prefix
            .clone()
            .unwrap_or_else(|| document.to_owned()),
    })
}

/// The environment variable that overrides the project's reranker.
pub const ASSAY_RERANKER: &str = "ASSAY_RERANKER";
/// The environment variable that overrides the provider cache mode.
pub const ASSAY_CACHE: &str = "ASSAY_CACHE";
/// The environment variable that turns batch mode on or off (`1`/`true` or `0`/`false`),
/// over `[providers] batch`; `--batch` sets it for one command.
pub const ASSAY_BATCH: &str = "ASSAY_BATCH";

/// Whether batch mode is on: `ASSAY_BATCH` when set (`--batch` sets it), else `[providers]
/// batch`.
pub fn batch_mode(
    settings: &ProjectSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<bool, HarnessError> {
    match env(ASSAY_BATCH).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(settings.providers.batch),
        Some(v) if v.is_empty() => Ok(settings.providers.batch),
        Some(v) if ["1", "true", "yes", "on"].contains(&v.as_str()) => Ok(true),
        Some(v) if ["0", "false", "no", "off"].contains(&v.as_str()) => Ok(false),
        Some(v) => Err(HarnessError::Usage(format!(
            "{ASSAY_BATCH}: `{v}` is not a switch (expected 1, true, 0 or false)"
        ))),
    }
}

/// The provider call cache: `<project>/.assay/cache.db`.
pub fn cache_path(settings: &ProjectSettings) -> PathBuf {
    settings.root.join(STATE_DIR).join("cache.db")
}

/// What runs learned about the providers' rate limits ([`assay_providers::LimitMemory`]):
/// `<project>/.assay/limits.json`, read when a run starts and replaced when it ends.
pub fn limits_path(settings: &ProjectSettings) -> PathBuf {
    settings.root.join(STATE_DIR).join("limits.json")
}

/// The journal of provider batches (batch mode): `<project>/.assay/batches.jsonl`.
pub fn batches_path(settings: &ProjectSettings) -> PathBuf {
    settings.root.join(STATE_DIR).join("batches.jsonl")
}

/// The run journal: `<project>/.assay/journal.jsonl`.
pub fn journal_path(settings: &ProjectSettings) -> PathBuf {
    settings.root.join(STATE_DIR).join("journal.jsonl")
}

/// The options of chat models and rerankers, from `[providers]`.
pub fn provider_options(settings: &ProjectSettings) -> ProviderOptions {
    let p = &settings.providers;
    let mut options = ProviderOptions::default();
    if let Some(url) = &p.anthropic_base_url {
        options.anthropic_base_url.clone_from(url);
    }
    if let Some(url) = &p.openai_base_url {
        options.openai_base_url.clone_from(url);
    }
    if let Some(url) = &p.voyage_base_url {
        options.voyage_base_url.clone_from(url);
    }
    options.timeout = Duration::from_secs_f64(p.timeout_seconds);
    options
}

/// Chooses the reranker: `--reranker` > `ASSAY_RERANKER` > `[semantic] reranker` > `none`.
pub fn choose_reranker(
    settings: &ProjectSettings,
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(RerankerSpec, &'static str), HarnessError> {
    let from_env = env(ASSAY_RERANKER).filter(|v| !v.trim().is_empty());
    let (name, source) = match (flag, from_env, settings.semantic.reranker.as_deref()) {
        (Some(f), _, _) => (f.to_owned(), "--reranker"),
        (None, Some(e), _) => (e, ASSAY_RERANKER),
        (None, None, Some(m)) => (m.to_owned(), "assay.toml [semantic] reranker"),
        (None, None, None) => ("none".to_owned(), "default"),
    };
    let spec = name
        .trim()
        .parse()
        .map_err(|e: assay_providers::ProviderError| {
            HarnessError::Usage(format!("{source}: {e}"))
        })?;
    Ok((spec, source))
}

/// Builds the chosen reranker, unwrapped (`None` for `none`). A bad name or a missing API key
/// is bad input (exit 2); nothing is contacted yet.
pub fn build_reranker(
    settings: &ProjectSettings,
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Arc<dyn Reranker>>, HarnessError> {
    let (spec, source) = choose_reranker(settings, flag, env)?;
    assay_providers::build_reranker_with_env(&spec, &provider_options(settings), env)
        .map_err(|e| HarnessError::Usage(format!("reranker `{spec}` (from {source}): {e}")))
}

/// Builds a chat model by name (`anthropic/<model>`, `openai/<model>`), unwrapped.
pub fn build_chat_model(
    settings: &ProjectSettings,
    name: &str,
    source: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ChatModel>, HarnessError> {
    let spec: ChatSpec = name
        .trim()
        .parse()
        .map_err(|e: assay_providers::ProviderError| {
            HarnessError::Usage(format!("{source}: {e}"))
        })?;
    assay_providers::build_chat_model_with_env(&spec, &provider_options(settings), env)
        .map_err(|e| HarnessError::Usage(format!("chat model `{spec}` (from {source}): {e}")))
}

/// Builds the chosen embedder. A bad configuration or a model that cannot be loaded is bad
/// input (exit 2); nothing is contacted yet.
pub fn build_embedder(choice: &EmbedderChoice) -> Result<Box<dyn Embedder>, HarnessError> {
    let inner = assay_providers::build_embedder(&choice.spec, &choice.options).map_err(|e| {
        HarnessError::Usage(format!(
            "embedder `{}` (from {}): {e}",
            choice.spec, choice.source
        ))
    })?;
    if choice.query_prefix.is_empty() && choice.document_prefix.is_empty() {
        Ok(inner)
    } else {
        Ok(Box::new(PrefixedEmbedder::new(
            inner,
            &choice.query_prefix,
            &choice.document_prefix,
        )))
    }
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
    let tuned = tuned_for(settings, choice);
    RetrievalConfig {
        top_k: r.top_k,
        fetch_factor: r.fetch_factor,
        score_threshold: tuned
            .and_then(|t| t.score_threshold)
            .or(r.score_threshold)
            .unwrap_or(default_threshold),
        priority_weight: r.priority_weight,
        max_tokens_budget: r.max_tokens_budget,
        mode: if r.mode == "hybrid" {
            RankMode::Hybrid
        } else {
            RankMode::Dense
        },
        lexical_weight: tuned
            .and_then(|t| t.lexical_weight)
            .or(r.lexical_weight)
            .unwrap_or(DEFAULT_LEXICAL_WEIGHT),
    }
}

/// The values `assay kb tune --write` saved for this embedder, if any.
pub fn tuned_for<'a>(
    settings: &'a ProjectSettings,
    choice: &EmbedderChoice,
) -> Option<&'a TunedConfig> {
    settings.retrieval.tuned.get(&choice.spec.to_string())
}

/// The semantic bank's first-stage candidates for this embedder: the tuned value, else
/// `[semantic] candidates`.
pub fn semantic_candidates(settings: &ProjectSettings, choice: &EmbedderChoice) -> usize {
    tuned_for(settings, choice)
        .and_then(|t| t.candidates)
        .unwrap_or(settings.semantic.candidates)
}

/// Whether `[retrieval] views = "multi"`.
pub fn multi_view(settings: &ProjectSettings) -> bool {
    settings.retrieval.views == "multi"
}

/// Embeds the views ([`assay_core::entity::Entity::views`]) of the active SITUATION entities
/// whose stored view embedding for `embedder`'s model is missing or was made from another
/// text (all of them with `force`), and removes stored views that no longer exist. A provider
/// failure is an infrastructure error.
pub async fn refresh_view_embeddings(
    store: &dyn KbStore,
    embedder: &dyn Embedder,
    force: bool,
) -> Result<EmbedReport, HarnessError> {
    let model = embedder.model().to_owned();
    let entities = store.list(&EntityFilter::active(LoadMode::Situation))?;
    let stored: HashMap<(String, String), String> = store
        .view_embeddings(&model)?
        .into_iter()
        .map(|v| ((v.entity_id, v.view), v.text_hash))
        .collect();
    let mut wanted: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    let mut todo: Vec<(String, String, String, String)> = Vec::new();
    let mut report = EmbedReport::default();
    for e in &entities {
        let mut stale = false;
        for (view, text) in e.views() {
            let hash = view_text_hash(&text);
            let key = (e.entity_id.clone(), view.clone());
            if force || stored.get(&key) != Some(&hash) {
                stale = true;
                todo.push((e.entity_id.clone(), view, text, hash));
            }
            wanted.insert(key);
        }
        if stale {
            report.embedded.push(e.entity_id.clone());
        } else {
            report.fresh += 1;
        }
    }
    let remove: Vec<(String, String)> =
        stored.into_keys().filter(|k| !wanted.contains(k)).collect();
    if todo.is_empty() && remove.is_empty() {
        return Ok(report);
    }
    let texts: Vec<String> = todo.iter().map(|t| t.2.clone()).collect();
    let vectors = if texts.is_empty() {
        Vec::new()
    } else {
        embedder
            .embed(&texts, InputKind::Document)
            .await
            .map_err(|e| {
                HarnessError::Infrastructure(format!("embedding entity views with {model}: {e}"))
            })?
    };
    if vectors.len() != todo.len() {
        return Err(HarnessError::Infrastructure(format!(
            "{model} returned {} vectors for {} texts",
            vectors.len(),
            todo.len()
        )));
    }
    let rows: Vec<ViewEmbedding> = todo
        .into_iter()
        .zip(vectors)
        .map(|((entity_id, view, _, text_hash), vector)| ViewEmbedding {
            entity_id,
            view,
            text_hash,
            vector,
        })
        .collect();
    store.set_view_embeddings(&model, &rows, &remove)?;
    Ok(report)
}

/// Brings the embeddings the configured views need up to date (the entities' single
/// embedding text, or every view with `[retrieval] views = "multi"`) and builds the pipeline
/// over them: what `assay run`, `assay retrieve` and `assay kb tune` search with.
pub async fn prepare_pipeline(
    store: &dyn KbStore,
    kb: &dyn KnowledgeBase,
    project: &Project,
    embedder: &dyn Embedder,
    config: RetrievalConfig,
) -> Result<(Pipeline, EmbedReport), HarnessError> {
    let model = embedder.model();
    if multi_view(&project.settings) {
        let report = refresh_view_embeddings(store, embedder, false).await?;
        let current: HashMap<(String, String), String> = kb
            .list(&EntityFilter::active(LoadMode::Situation))?
            .into_iter()
            .flat_map(|e| {
                let id = e.entity_id.clone();
                e.views()
                    .into_iter()
                    .map(move |(v, t)| ((id.clone(), v), view_text_hash(&t)))
            })
            .collect();
        let views: Vec<ViewVector> = store
            .view_embeddings(model)?
            .into_iter()
            .filter(|v| current.get(&(v.entity_id.clone(), v.view.clone())) == Some(&v.text_hash))
            .map(|v| ViewVector {
                entity_id: v.entity_id,
                view: Some(v.view),
                vector: v.vector,
            })
            .collect();
        let pipeline = Pipeline::with_views(kb, project.patterns.clone(), &views, config)
            .map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
        Ok((pipeline, report))
    } else {
        let report = refresh_embeddings(store, embedder, false, None).await?;
        let pipeline = build_pipeline(store, kb, project, model, config)?;
        Ok((pipeline, report))
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

/// Builds the retrieval pipeline over `kb`'s active entities (the store, or a [`snapshot`] of
/// it) and the store's fresh embeddings.
pub fn build_pipeline(
    store: &dyn KbStore,
    kb: &dyn KnowledgeBase,
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
    // The rules were compiled when the project was loaded.
    Pipeline::new(kb, project.patterns.clone(), &embeddings, config)
        .map_err(|e| HarnessError::Infrastructure(e.to_string()))
}

/// How the SITUATION stage finds its candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchKind {
    /// Every fresh embedding scored, in memory.
    Exact,
    /// The store's approximate nearest-neighbour index (PostgreSQL's HNSW).
    Index,
}

impl SearchKind {
    /// `exact` or `index`.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchKind::Exact => "exact",
            SearchKind::Index => "index",
        }
    }
}

/// The search a pipeline uses ([`choose_search`]), and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SearchChoice {
    /// Exact or index.
    pub kind: SearchKind,
    /// Why, in words (`[semantic] search = "auto": 1000000 active SITUATION entities, at least
    /// index_min_entities (100000)`).
    pub reason: String,
    /// With the index: what answers (`PostgreSQL HNSW (pgvector 0.8.5)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// With the index: `[semantic] ef_search`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ef_search: Option<u32>,
}

impl SearchChoice {
    fn exact(reason: String) -> SearchChoice {
        SearchChoice {
            kind: SearchKind::Exact,
            reason,
            index: None,
            ef_search: None,
        }
    }

    /// `exact`, or `index (PostgreSQL HNSW (pgvector 0.8.5), ef_search 400)`.
    pub fn describe(&self) -> String {
        match (&self.index, self.ef_search) {
            (Some(index), Some(ef)) => format!("index ({index}, ef_search {ef})"),
            _ => self.kind.as_str().to_owned(),
        }
    }
}

/// Chooses how the SITUATION stage searches `model`'s embeddings in `store`, from
/// `[semantic] search` (see [`crate::settings::SemanticConfig::search`]): `exact`; `index`, an
/// error (bad input) where the store has no index for the embeddings; or `auto`, the index when
/// the store has one for them, ranking is dense over one embedding per entity, and `kb` holds
/// at least `[semantic] index_min_entities` active SITUATION entities. Call it after the
/// embeddings are brought up to date (their dimension decides the index).
pub fn choose_search(
    settings: &ProjectSettings,
    store: &OpenStore,
    kb: &dyn KnowledgeBase,
    model: &str,
) -> Result<SearchChoice, HarnessError> {
    let semantic = &settings.semantic;
    let setting = format!("[semantic] search = \"{}\"", semantic.search);
    let forced = match semantic.search.as_str() {
        "exact" => return Ok(SearchChoice::exact(setting)),
        "index" => true,
        _ => false,
    };
    let refuse = |why: String| -> Result<SearchChoice, HarnessError> {
        if forced {
            Err(HarnessError::Usage(format!(
                "{setting}: {why}; set search = \"auto\" or \"exact\""
            )))
        } else {
            Ok(SearchChoice::exact(format!("{setting}: {why}")))
        }
    };
    let Some(index) = store.vector_index() else {
        return refuse(format!(
            "the store {} has no vector index (only a PostgreSQL store has one)",
            store.location
        ));
    };
    let r = &settings.retrieval;
    if r.mode != "dense" {
        return refuse(format!(
            "[retrieval] mode = \"{}\" ranks every entity, which an index of embeddings cannot do",
            r.mode
        ));
    }
    if multi_view(settings) {
        return refuse(
            "[retrieval] views = \"multi\" ranks several embeddings per entity; the index holds one"
                .into(),
        );
    }
    match index.embedding_dimension(model)? {
        Some(dim) if !index.has_index(dim)? => {
            return refuse(format!(
                "the store has no index for {model}'s {dim}-dimension embeddings (pgvector \
                 indexes at most 2,000 dimensions)"
            ));
        }
        _ => {}
    }
    let count = kb.list(&EntityFilter::active(LoadMode::Situation))?.len();
    let min = semantic.index_min_entities;
    if !forced && count < min {
        return Ok(SearchChoice::exact(format!(
            "{setting}: {count} active SITUATION entities, fewer than index_min_entities ({min})"
        )));
    }
    let reason = if forced {
        setting
    } else {
        format!("{setting}: {count} active SITUATION entities, at least index_min_entities ({min})")
    };
    Ok(SearchChoice {
        kind: SearchKind::Index,
        reason,
        index: Some(index.describe()),
        ef_search: Some(semantic.ef_search),
    })
}

/// [`prepare_pipeline`] with the search [`choose_search`] picks: brings the embeddings up to
/// date, then builds a pipeline that scores them exactly or takes its SITUATION candidates from
/// the store's index. What `assay run` and `assay retrieve` search with.
pub async fn prepare_search_pipeline(
    store: &OpenStore,
    kb: &dyn KnowledgeBase,
    project: &Project,
    embedder: &dyn Embedder,
    config: RetrievalConfig,
) -> Result<(Pipeline, EmbedReport, SearchChoice), HarnessError> {
    let settings = &project.settings;
    if multi_view(settings) || settings.semantic.search == "exact" {
        let model = embedder.model().to_owned();
        let (pipeline, report) = prepare_pipeline(&**store, kb, project, embedder, config).await?;
        let choice = choose_search(settings, store, kb, &model)?;
        return Ok((pipeline, report, choice));
    }
    let report = refresh_embeddings(&**store, embedder, false, None).await?;
    let model = embedder.model();
    let choice = choose_search(settings, store, kb, model)?;
    let pipeline = match (choice.kind, store.vector_index()) {
        (SearchKind::Index, Some(index)) => {
            let search = IndexSearch {
                index,
                model: model.to_owned(),
                ef_search: settings.semantic.ef_search,
            };
            Pipeline::with_index(kb, project.patterns.clone(), search, config)
                .map_err(|e| HarnessError::Infrastructure(e.to_string()))?
        }
        _ => build_pipeline(&**store, kb, project, model, config)?,
    };
    Ok((pipeline, report, choice))
}

/// Embeds queries, in one call when it succeeds. When the batch call fails (after the
/// wrapper's retries), each query is embedded on its own, so a provider failure costs only the
/// cases it hit, each of which records the error.
pub async fn embed_queries(
    embedder: &dyn Embedder,
    queries: &[String],
) -> HashMap<String, Result<Vec<f32>, String>> {
    let mut unique: Vec<String> = queries.to_vec();
    unique.sort();
    unique.dedup();
    match embedder.embed(&unique, InputKind::Query).await {
        Ok(vectors) if vectors.len() == unique.len() => {
            return unique
                .into_iter()
                .zip(vectors.into_iter().map(Ok))
                .collect();
        }
        Ok(vectors) => tracing::warn!(
            "{} returned {} vectors for {} texts; embedding one by one",
            embedder.model(),
            vectors.len(),
            unique.len()
        ),
        Err(e) => tracing::warn!(
            "embedding {} prompts with {} failed ({e}); embedding one by one",
            unique.len(),
            embedder.model()
        ),
    }
    let mut out = HashMap::with_capacity(unique.len());
    for query in unique {
        let one = embedder
            .embed(std::slice::from_ref(&query), InputKind::Query)
            .await
            .map_err(|e| format!("embedding the prompt with {}: {e}", embedder.model()))
            .and_then(|mut v| {
                v.pop()
                    .filter(|_| v.is_empty())
                    .ok_or_else(|| format!("{} returned no vector", embedder.model()))
            });
        out.insert(query, one);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::entity::Entity;
    use assay_kb::store::{Edit, EntityUpdate};
    use assay_providers::HashedNgramEmbedder;

    fn settings_with_store(root: &Path, store: Option<&str>) -> ProjectSettings {
        let config = crate::settings::ProjectConfig {
            store: store.map(str::to_owned),
            ..crate::settings::ProjectConfig::default()
        };
        ProjectSettings::resolve(root, config).unwrap()
    }

    #[test]
    fn the_environment_chooses_the_store_over_assay_toml() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings_with_store(dir.path(), Some("sqlite:from-toml.db"));
        let env = |name: &str| (name == ASSAY_STORE).then(|| "sqlite:from-env.db".to_owned());
        assert_eq!(
            store_setting(&settings, &env),
            (Some("sqlite:from-env.db".to_owned()), ASSAY_STORE)
        );
        assert_eq!(
            store_setting(&settings, &|_| None),
            (Some("sqlite:from-toml.db".to_owned()), "assay.toml")
        );
        let store = open_store_with(&settings, &env).unwrap();
        assert_eq!(
            store.location,
            StoreLocation::Sqlite(dir.path().join("from-env.db"))
        );
        assert!(store.files_are_source());
        let default = open_store_with(&settings_with_store(dir.path(), None), &|_| None).unwrap();
        assert_eq!(
            default.location,
            StoreLocation::Sqlite(store_path(&settings))
        );
    }

    #[test]
    fn bad_store_settings_are_usage_errors_naming_their_source() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings_with_store(dir.path(), Some("mysql://h/db"));
        let err = open_store_with(&settings, &|_| None).unwrap_err();
        assert!(!err.is_infrastructure());
        let text = err.to_string();
        assert!(
            text.starts_with("assay.toml: store `mysql`: unknown kind of store"),
            "{text}"
        );
        let env = |name: &str| {
            (name == ASSAY_STORE).then(|| "postgres://ann:hunter2@localhost/kb".to_owned())
        };
        let text = open_store_with(&settings, &env).unwrap_err().to_string();
        if cfg!(feature = "postgres") {
            assert!(text.starts_with("ASSAY_STORE: the store URL"), "{text}");
            assert!(
                text.contains("contains a password") && !text.contains("hunter2"),
                "{text}"
            );
        } else {
            assert!(text.contains("without PostgreSQL support"), "{text}");
        }
    }

    fn entity(id: &str, keywords: &str) -> Entity {
        serde_json::from_value(serde_json::json!({
            "entity_id": id, "entity_type": "KNOWLEDGE", "title": format!("Title {id}"),
            "recognition": "- \"first line\"\n- second line", "keywords": keywords,
            "examples": "Parent: a\nCoach: b\n\nParent: c\nCoach: d"
        }))
        .unwrap()
    }

    #[test]
    fn model_cards_decide_the_default_prefixes() {
        assert_eq!(
            default_prefixes("hf/intfloat/e5-small-v2"),
            ("query: ", "passage: ")
        );
        assert_eq!(
            default_prefixes("hf/BAAI/bge-small-en-v1.5"),
            (BGE_QUERY_INSTRUCTION, "")
        );
        assert_eq!(default_prefixes("local/models/all-minilm-l6-v2"), ("", ""));
        assert_eq!(default_prefixes("voyage/voyage-2"), ("", ""));
    }

    #[tokio::test]
    async fn prefixes_reach_the_model_and_name_the_embeddings() {
        let plain = HashedNgramEmbedder::new();
        let prefixed = PrefixedEmbedder::new(Box::new(HashedNgramEmbedder::new()), "query: ", "");
        assert_ne!(
            prefixed.model(),
            plain.model(),
            "other prefixes, other embeddings"
        );
        let text = vec!["gray rock".to_owned()];
        let q = prefixed.embed(&text, InputKind::Query).await.unwrap();
        let want = plain
            .embed(&["query: gray rock".to_owned()], InputKind::Query)
            .await
            .unwrap();
        assert_eq!(q, want);
        let d = prefixed.embed(&text, InputKind::Document).await.unwrap();
        assert_eq!(d, plain.embed(&text, InputKind::Document).await.unwrap());
    }

    #[tokio::test]
    async fn views_are_embedded_once_and_again_only_when_their_text_changes() {
        let store = SqliteStore::in_memory().unwrap();
        let edit = Edit::now("test");
        store.create(&entity("a", "one, two"), &edit).unwrap();
        store.create(&entity("b", "three"), &edit).unwrap();
        let embedder = HashedNgramEmbedder::new();
        let first = refresh_view_embeddings(&store, &embedder, false)
            .await
            .unwrap();
        assert_eq!(first.embedded, vec!["a", "b"]);
        // title, 2 recognition lines, keywords, 2 examples per entity
        assert_eq!(store.view_embeddings(embedder.model()).unwrap().len(), 12);
        let again = refresh_view_embeddings(&store, &embedder, false)
            .await
            .unwrap();
        assert!(again.embedded.is_empty());
        assert_eq!(again.fresh, 2);
        let update: EntityUpdate =
            serde_json::from_value(serde_json::json!({"keywords": "changed"})).unwrap();
        store.update("b", &update, &edit).unwrap();
        let changed = refresh_view_embeddings(&store, &embedder, false)
            .await
            .unwrap();
        assert_eq!(changed.embedded, vec!["b"]);
        let keywords = store
            .view_embeddings(embedder.model())
            .unwrap()
            .into_iter()
            .find(|v| v.entity_id == "b" && v.view == "keywords")
            .unwrap();
        assert_eq!(keywords.text_hash, view_text_hash("changed"));
        // A view that disappears is removed.
        let update: EntityUpdate =
            serde_json::from_value(serde_json::json!({"examples": null})).unwrap();
        store.update("b", &update, &edit).unwrap();
        refresh_view_embeddings(&store, &embedder, false)
            .await
            .unwrap();
        assert_eq!(store.view_embeddings(embedder.model()).unwrap().len(), 10);
    }
}
