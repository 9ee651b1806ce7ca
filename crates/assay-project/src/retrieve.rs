//! One message through the retrieval pipeline, with its trace: what `assay retrieve` and the
//! KB admin API's retrieval test show (each stage's candidates with their scores, what was
//! dropped and why).
//!
//! ```no_run
//! use assay_project::{engine, project::Project, retrieve};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let project = Project::load(std::path::Path::new("examples/coparent")).unwrap();
//! let store = engine::open_store(&project.settings).unwrap();
//! engine::sync_kb(&store, &project).unwrap();
//! let choice = engine::choose_embedder(&project.settings, None, &|_| None).unwrap();
//! let asked = retrieve::Ask::new("he keeps texting me at midnight", "PARENT");
//! let traced = retrieve::retrieve(&project, &store, &choice, &asked).await.unwrap();
//! println!("{} entities", traced.retrieval.entities.len());
//! # });
//! ```

use assay_core::UserState;
use assay_providers::InputKind;
use assay_retrieval::pipeline::Retrieval;

use crate::HarnessError;
use crate::engine::{self, EmbedderChoice, OpenStore, SearchChoice};
use crate::project::Project;

/// The audience a retrieval is for: the one given, else the state's `user_type`, else the
/// default audience.
pub fn audience(given: Option<&str>, state: &UserState) -> String {
    given
        .map(str::to_owned)
        .or_else(|| {
            state
                .get("user_type")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| assay_core::entity::DEFAULT_AUDIENCE.to_owned())
}

/// What to retrieve for.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// The user's message.
    pub message: String,
    /// The audience (`PARENT`, …).
    pub audience: String,
    /// The user's state, for STATE entities.
    pub state: UserState,
    /// SITUATION entities kept, instead of the project's `[retrieval] top_k`.
    pub top_k: Option<usize>,
}

impl Ask {
    /// `message` for `audience`, with an empty user state and the project's `top_k`.
    pub fn new(message: impl Into<String>, audience: impl Into<String>) -> Ask {
        Ask {
            message: message.into(),
            audience: audience.into(),
            state: UserState::new(),
            top_k: None,
        }
    }
}

/// A retrieval and what it was made with.
#[derive(Debug, Clone, PartialEq)]
pub struct Traced {
    /// The embedding model.
    pub embedder: String,
    /// The `top_k` used.
    pub top_k: usize,
    /// The context and the trace of how it was built.
    pub retrieval: Retrieval,
    /// How the SITUATION stage searched (`[semantic] search`).
    pub search: SearchChoice,
}

/// Brings the embeddings up to date, builds the pipeline as `assay run` does (the same search:
/// [`engine::prepare_search_pipeline`]), embeds the message and retrieves. Records no retrieval
/// counts (the caller decides).
pub async fn retrieve(
    project: &Project,
    store: &OpenStore,
    choice: &EmbedderChoice,
    ask: &Ask,
) -> Result<Traced, HarnessError> {
    let embedder = engine::build_embedder(choice)?;
    let mut config = engine::retrieval_config(&project.settings, choice);
    if let Some(k) = ask.top_k {
        config.top_k = k;
    }
    let top_k = config.top_k;
    let (pipeline, _, search) =
        engine::prepare_search_pipeline(store, &**store, project, embedder.as_ref(), config)
            .await?;
    let query = embedder
        .embed(std::slice::from_ref(&ask.message), InputKind::Query)
        .await
        .map_err(|e| {
            HarnessError::Infrastructure(format!(
                "embedding the message with {}: {e}",
                embedder.model()
            ))
        })?
        .into_iter()
        .next();
    let retrieval = pipeline
        .retrieve(&ask.message, query.as_deref(), &ask.state, &ask.audience)
        .map_err(|e| HarnessError::Infrastructure(format!("searching the knowledge base: {e}")))?;
    Ok(Traced {
        embedder: embedder.model().to_owned(),
        top_k,
        retrieval,
        search,
    })
}
