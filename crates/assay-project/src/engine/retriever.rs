//! The interface of the semantic bank's system under test: what a retriever returns for one
//! prompt, and the trait every retriever implements (the runner scores what it returns).

use assay_core::UserState;
use assay_core::runlog::Candidate;

/// What the semantic pipeline returned for one prompt.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SemanticRetrieval {
    /// First-stage candidates (embedding search), best first.
    pub candidates: Vec<Candidate>,
    /// The final selection after reranking, best first.
    pub selections: Vec<String>,
    /// Why entities were not selected, in plain words, where the retriever knows (the
    /// pipeline's threshold, an inactive entity, another audience), by entity id. An expected
    /// entity missing here is explained by its place among the candidates.
    pub why_not: std::collections::HashMap<String, String>,
}

/// The system under test of the semantic bank: embedding search, then reranking (000 §6.1).
///
/// An `Err` is an infrastructure error (a provider timeout, an unparsable reply after retries):
/// the case is recorded as an error, never scored.
#[async_trait::async_trait]
pub trait SemanticRetriever: Send + Sync {
    /// A short description for logs and reports (`builtin/bm25 + none`, …).
    fn describe(&self) -> String;

    /// Retrieves for one prompt.
    async fn retrieve(
        &self,
        prompt: &str,
        user_state: &UserState,
    ) -> Result<SemanticRetrieval, String>;

    /// Why this retriever can never select `entity_id` for a user in `user_state` (not in the
    /// knowledge base, inactive, another audience), if it knows: the plain words a lost
    /// expected entity's report gives.
    fn explain(&self, entity_id: &str, user_state: &UserState) -> Option<String> {
        let _ = (entity_id, user_state);
        None
    }

    /// Whether a stage may answer differently on the same input (an LLM reranker): only then
    /// does `assay run --repeat` measure anything.
    fn is_stochastic(&self) -> bool {
        false
    }

    /// [`SemanticRetriever::retrieve`], repeat `sample` (0 is the plain call): a stochastic
    /// stage makes each repeat its own call, with its own cache entry.
    async fn retrieve_sample(
        &self,
        prompt: &str,
        user_state: &UserState,
        sample: u32,
    ) -> Result<SemanticRetrieval, String> {
        let _ = sample;
        self.retrieve(prompt, user_state).await
    }
}
