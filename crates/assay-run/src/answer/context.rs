//! The answer bank's context and embeddings from the project's own pipeline and embedder, as
//! `assay retrieve` and the semantic bank build them.

use std::sync::Arc;

use assay_core::UserState;
use assay_core::answer::ContextItem;
use assay_providers::{Embedder, InputKind};
use assay_retrieval::pipeline::Pipeline;

use super::{ContextProvider, TextEmbedder};

/// The context the project's pipeline loads for a message: ALWAYS, STATE, pattern and
/// SITUATION entities in the pipeline's order, each with its prompt text.
pub struct PipelineContext {
    /// The pipeline (embeddings up to date).
    pub pipeline: Arc<Pipeline>,
    /// The embedder of its vectors (behind the call wrapper).
    pub embedder: Arc<dyn Embedder>,
}

#[async_trait::async_trait]
impl ContextProvider for PipelineContext {
    async fn context(
        &self,
        message: &str,
        user_state: &UserState,
        audience: &str,
    ) -> Result<Vec<ContextItem>, String> {
        let query = self
            .embedder
            .embed(&[message.to_owned()], InputKind::Query)
            .await
            .map_err(|e| format!("embedding the message with {}: {e}", self.embedder.model()))?
            .into_iter()
            .next();
        let retrieval = self
            .pipeline
            .retrieve(message, query.as_deref(), user_state, audience)
            .map_err(|e| format!("retrieving: {e}"))?;
        Ok(retrieval
            .entities
            .iter()
            .map(|e| ContextItem {
                entity: Some(e.entity_id.clone()),
                text: self
                    .pipeline
                    .entity(&e.entity_id)
                    .map_or_else(|| e.title.clone(), assay_core::entity::Entity::prompt_text),
            })
            .collect())
    }

    fn unknown_entity(&self, entity: &str) -> Option<String> {
        if self.pipeline.entity(entity).is_some() {
            return None;
        }
        let hint = assay_core::text::closest(entity, self.pipeline.entity_ids())
            .map(|c| format!(" (did you mean `{c}`?)"))
            .unwrap_or_default();
        Some(format!(
            "`{entity}` is not an active entity of the knowledge base{hint}"
        ))
    }
}

/// Texts embedded as queries by the project's embedder (answer relevancy compares questions).
pub struct QueryEmbedder(pub Arc<dyn Embedder>);

#[async_trait::async_trait]
impl TextEmbedder for QueryEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        self.0
            .embed(texts, InputKind::Query)
            .await
            .map_err(|e| format!("embedding with {}: {e}", self.0.model()))
    }
}
