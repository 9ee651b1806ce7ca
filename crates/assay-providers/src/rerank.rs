//! The [`Reranker`] trait and the small types around it.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::chat::ChatModel;
use crate::{ProviderError, RequestCost, Usage};

/// A candidate to rerank: a knowledge-base entity's id and the text the reranker sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RerankDocument {
    /// The entity id (what an LLM reranker answers with).
    pub id: String,
    /// The entity's title.
    pub title: String,
    /// A short summary of the entity (its `concept_summary`, else the start of its content).
    pub summary: String,
}

impl RerankDocument {
    /// `title: summary`, the text a cross-encoder such as Voyage rerank scores.
    pub fn text(&self) -> String {
        if self.summary.is_empty() {
            self.title.clone()
        } else {
            format!("{}: {}", self.title, self.summary)
        }
    }
}

/// One document in a reranked order.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// Index into the documents passed to [`Reranker::rerank`].
    pub index: usize,
    /// The provider's relevance score, if it gives one (an LLM listwise reranker does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// A reranker's answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reranking {
    /// The kept documents, best first: at most `top_k`, no index twice, every index valid.
    pub order: Vec<Ranked>,
    /// What the call consumed.
    pub usage: Usage,
}

/// Orders candidates by relevance to a query.
///
/// Contract for implementations: at most `top_k` results, best first, no duplicate and no
/// out-of-range index; an empty `documents` gives an empty order without contacting any server.
#[async_trait]
pub trait Reranker: fmt::Debug + Send + Sync {
    /// The name: `voyage/rerank-2.5`, `llm:anthropic/claude-haiku-4-5`, …
    fn model(&self) -> &str;

    /// What one call for `query` and `documents` is expected to use of the provider's token
    /// limits, for the call wrapper's pacing. By default the characters of the query and the
    /// documents, about four a token.
    fn request_cost(&self, query: &str, documents: &[RerankDocument], top_k: usize) -> RequestCost {
        let _ = top_k;
        RequestCost::of_text(
            query.len()
                + documents
                    .iter()
                    .map(|d| d.id.len() + d.title.len() + d.summary.len() + 2)
                    .sum::<usize>(),
        )
    }

    /// The same reranker asking `wrap(model)` instead of its chat model, when it asks one (an
    /// [`crate::LlmReranker`]: batch mode wraps its model in a [`crate::Batcher`]); `None` for
    /// rerankers without a chat model (the default).
    fn with_chat(
        &self,
        wrap: &dyn Fn(Arc<dyn ChatModel>) -> Option<Arc<dyn ChatModel>>,
    ) -> Option<Arc<dyn Reranker>> {
        let _ = wrap;
        None
    }

    /// Reranks `documents` for `query` and keeps the best `top_k`.
    async fn rerank(
        &self,
        query: &str,
        documents: &[RerankDocument],
        top_k: usize,
    ) -> Result<Reranking, ProviderError>;

    /// Whether two calls with the same input may answer differently (an LLM reranker), so that
    /// repeating a run measures something.
    fn is_stochastic(&self) -> bool {
        false
    }

    /// The GenAI operation its telemetry span names: `rerank` for a reranking model, `chat`
    /// for a chat model asked to rank ([`crate::LlmReranker`]).
    fn operation(&self) -> &'static str {
        "rerank"
    }

    /// [`Reranker::rerank`], sample `sample` of a repeated run (`assay run --repeat`): sample 0
    /// is the plain call; a stochastic reranker makes each later sample a call of its own (its
    /// own seed, its own cache entry). A deterministic one answers the same.
    async fn rerank_sample(
        &self,
        query: &str,
        documents: &[RerankDocument],
        top_k: usize,
        sample: u32,
    ) -> Result<Reranking, ProviderError> {
        let _ = sample;
        self.rerank(query, documents, top_k).await
    }
}
