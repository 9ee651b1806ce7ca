//! The semantic bank's system under test: the nearest SITUATION entities of a message, then
//! a selection, made one of two ways ([`Selection`]).

use std::collections::HashMap;
use std::sync::Arc;

use assay_core::UserState;
use assay_core::entity::DEFAULT_AUDIENCE;
use assay_core::entity::LoadMode;
use assay_core::runlog::Candidate;
use assay_kb::{EntityFilter, KnowledgeBase};
use assay_providers::{RerankDocument, Reranker};
use assay_retrieval::pipeline::{DropReason, Pipeline, Stage};

use super::{SearchChoice, SearchKind};
use super::{SemanticRetrieval, SemanticRetriever};
use crate::HarnessError;
use crate::settings::Selection;

/// What the reranker sees of each SITUATION entity: id, title and a short summary (its
/// `concept_summary`, else its recognition text), keyed by entity id.
pub fn rerank_documents(
    kb: &dyn assay_kb::KnowledgeBase,
) -> Result<HashMap<String, RerankDocument>, HarnessError> {
    const SUMMARY_CHARS: usize = 400;
    let entities = kb.list(&EntityFilter {
        active: Some(true),
        ..EntityFilter::default()
    })?;
    Ok(entities
        .into_iter()
        .map(|e| {
            let summary = e
                .concept_summary
                .as_deref()
                .or(e.recognition.as_deref())
                .unwrap_or_default()
                .trim();
            let summary = match summary.char_indices().nth(SUMMARY_CHARS) {
                Some((cut, _)) => format!("{}…", &summary[..cut]),
                None => summary.to_owned(),
            };
            let doc = RerankDocument {
                id: e.entity_id.clone(),
                title: e.title,
                summary,
            };
            (e.entity_id, doc)
        })
        .collect())
}

/// The semantic bank's system under test: the `candidates` nearest SITUATION entities of the
/// case's audience, then a selection ([`Selection`]): `top_k` of them by the reranker or, without
/// one, by similarity plus priority bonus (the pipeline's final score); or what the pipeline
/// loads.
pub struct SemanticSearch<'a> {
    pipeline: &'a Pipeline,
    selection: Selection,
    kb: Option<&'a dyn KnowledgeBase>,
    queries: &'a HashMap<String, Result<Vec<f32>, String>>,
    reranker: Option<(Arc<dyn Reranker>, HashMap<String, RerankDocument>)>,
    candidates: usize,
    top_k: usize,
    threshold: Option<f32>,
    /// The embedder's `vendor/model`, for [`SemanticRetriever::describe`].
    embedder_model: String,
    search: Option<SearchChoice>,
    /// What the warm-up did ([`SemanticSearch::warm_up`]), for the run's setup.
    warmed: Option<String>,
}

impl<'a> SemanticSearch<'a> {
    /// A search over `pipeline` with the prompts' embeddings from [`embed_queries`], reranked
    /// by `reranker` (with the documents from [`rerank_documents`]) when there is one.
    pub fn new(
        pipeline: &'a Pipeline,
        queries: &'a HashMap<String, Result<Vec<f32>, String>>,
        candidates: usize,
        top_k: usize,
        embedder_model: &str,
        reranker: Option<(Arc<dyn Reranker>, HashMap<String, RerankDocument>)>,
    ) -> SemanticSearch<'a> {
        SemanticSearch {
            pipeline,
            selection: Selection::TopK,
            kb: None,
            queries,
            reranker,
            candidates,
            top_k,
            threshold: None,
            embedder_model: embedder_model.to_owned(),
            search: None,
            warmed: None,
        }
    }

    /// Records how the pipeline searches ([`prepare_search_pipeline`]): an index search is
    /// part of the description (a journal of an exact run does not resume with the index), and
    /// [`SemanticSearch::setup_entries`] records it.
    #[must_use]
    pub fn with_search(mut self, search: SearchChoice) -> Self {
        self.search = Some(search);
        self
    }

    /// What a run records of the search in the RunLog's `setup`: `semantic_search` (`exact` or
    /// `index`) and `semantic_search_detail` (why; with the index, what answered, its
    /// `ef_search`, and how many searches the exact search in the database answered instead).
    pub fn setup_entries(&self) -> Vec<(String, String)> {
        let warmed = self
            .warmed
            .as_ref()
            .map(|w| ("semantic_warm_up".to_owned(), w.clone()));
        let Some(search) = &self.search else {
            return std::iter::once(self.selection_entry())
                .chain(warmed)
                .collect();
        };
        let mut detail = search.reason.clone();
        if search.kind == SearchKind::Index {
            detail = format!("{}; {detail}", search.describe());
            if let Some(stats) = self.pipeline.index_stats() {
                detail.push_str(&format!(
                    "; {} searches, {} answered by the exact search",
                    stats.searches, stats.exact_fallbacks
                ));
            }
        }
        vec![
            (
                "semantic_search".to_owned(),
                search.kind.as_str().to_owned(),
            ),
            ("semantic_search_detail".to_owned(), detail),
            self.selection_entry(),
        ]
        .into_iter()
        .chain(warmed)
        .collect()
    }

    /// Selects as `selection` says. [`Selection::Pipeline`] has no reranker stage: a search
    /// built with a reranker refuses it.
    pub fn with_selection(mut self, selection: Selection) -> Result<Self, HarnessError> {
        if selection == Selection::Pipeline && self.reranker.is_some() {
            return Err(HarnessError::Usage(
                "[semantic] selection = \"pipeline\" scores what the retrieval pipeline loads, and the pipeline has no reranker: remove the reranker, or use selection = \"top_k\"".to_owned(),
            ));
        }
        self.selection = selection;
        Ok(self)
    }

    /// Explains, from `kb`, an expected entity that semantic search could never select (not
    /// in the knowledge base, inactive, another load mode, another audience).
    #[must_use]
    pub fn with_kb(mut self, kb: &'a dyn KnowledgeBase) -> Self {
        self.kb = Some(kb);
        self
    }

    /// Searches the store's index once for every `(prompt, user state)` before the run, so
    /// the run's own searches find the index's pages in memory (a cold HNSW index is slower on
    /// its first pass), and records what it cost (`semantic_warm_up` in the run's setup). The
    /// warm-up's searches are not counted in the run's index statistics. Without an index
    /// (the exact scan) there is nothing to warm, and the setup says so.
    pub fn warm_up<'c>(
        &mut self,
        cases: impl IntoIterator<Item = (&'c str, &'c UserState)>,
    ) -> Result<(), HarnessError> {
        if self
            .search
            .as_ref()
            .is_none_or(|s| s.kind != SearchKind::Index)
        {
            self.warmed = Some(
                "skipped: the search is exact, and only an index has pages to warm".to_owned(),
            );
            return Ok(());
        }
        let start = std::time::Instant::now();
        let mut searches = 0usize;
        for (prompt, state) in cases {
            if let Some(Ok(query)) = self.queries.get(prompt) {
                self.pipeline
                    .rank(query, prompt, audience_of(state), self.candidates)
                    .map_err(|e| {
                        HarnessError::Infrastructure(format!("warming up the index: {e}"))
                    })?;
                searches += 1;
            }
        }
        self.pipeline.reset_index_stats();
        self.warmed = Some(format!(
            "{searches} searches through the index in {} ms before the run",
            start.elapsed().as_millis()
        ));
        Ok(())
    }

    /// What the run's `setup` records of the selection: `semantic_selection`.
    pub fn selection_entry(&self) -> (String, String) {
        let value = match self.selection {
            Selection::TopK => format!(
                "top_k: the {} best of the {} nearest, whatever their similarity",
                self.top_k, self.candidates
            ),
            Selection::Pipeline => {
                let c = self.pipeline.config();
                format!(
                    "pipeline: what `assay retrieve` loads (similarity threshold {}, top {}, pattern rules, token budget {})",
                    c.score_threshold, c.top_k, c.max_tokens_budget
                )
            }
        };
        ("semantic_selection".to_owned(), value)
    }

    /// Why semantic search cannot select `entity_id` for a user in `state`, if the knowledge
    /// base says.
    fn unselectable(&self, entity_id: &str, state: &UserState) -> Option<String> {
        let kb = self.kb?;
        let Ok(found) = kb.get(entity_id) else {
            return None;
        };
        let Some(e) = found else {
            return Some("not in the knowledge base".to_owned());
        };
        let audience = audience_of(state);
        if !e.is_active {
            Some("inactive".to_owned())
        } else if e.load_mode != LoadMode::Situation {
            Some(format!(
                "its load mode is {}, and semantic search selects SITUATION entities only",
                e.load_mode
            ))
        } else if !e.has_audience(audience) {
            Some(format!(
                "filtered by audience: it is for {}, and the case's user is {audience}",
                e.audience_types.join(", ")
            ))
        } else {
            None
        }
    }

    /// Selects only candidates scoring at least `threshold` (a threshold tuned for the
    /// embedder by `assay kb tune`; without one, as the original harness did, there is none).
    #[must_use]
    pub fn with_threshold(mut self, threshold: Option<f32>) -> Self {
        self.threshold = threshold;
        self
    }
}

fn audience_of(state: &UserState) -> &str {
    state
        .get("user_type")
        .and_then(|v| v.as_str())
        .unwrap_or(DEFAULT_AUDIENCE)
}

#[async_trait::async_trait]
impl SemanticRetriever for SemanticSearch<'_> {
    /// `<embedder> top <candidates> → <selection>[, candidates from <index>]`: what a journal
    /// is resumed only with (an index search, a threshold or another selection is another
    /// system under test).
    fn describe(&self) -> String {
        let mut d = format!("{} top {}", self.embedder_model, self.candidates);
        match self.selection {
            Selection::TopK => {
                let reranking = self.reranker.as_ref().map_or_else(
                    || "none (similarity + priority)".to_owned(),
                    |(r, _)| r.model().to_owned(),
                );
                d.push_str(&format!(" → reranker {reranking} top {}", self.top_k));
                if let Some(t) = self.threshold {
                    d.push_str(&format!(" (threshold {t})"));
                }
            }
            Selection::Pipeline => {
                let c = self.pipeline.config();
                d.push_str(&format!(
                    " → what the pipeline loads (threshold {}, top {}, budget {} tokens)",
                    c.score_threshold, c.top_k, c.max_tokens_budget
                ));
            }
        }
        if let Some(search) = self.search.as_ref().filter(|s| s.kind == SearchKind::Index) {
            d.push_str(&format!(", candidates from {}", search.describe()));
        }
        d
    }

    async fn retrieve(
        &self,
        prompt: &str,
        user_state: &UserState,
    ) -> Result<SemanticRetrieval, String> {
        self.retrieve_sample(prompt, user_state, 0).await
    }

    fn explain(&self, entity_id: &str, user_state: &UserState) -> Option<String> {
        self.unselectable(entity_id, user_state)
    }

    fn is_stochastic(&self) -> bool {
        self.reranker
            .as_ref()
            .is_some_and(|(r, _)| r.is_stochastic())
    }

    async fn retrieve_sample(
        &self,
        prompt: &str,
        user_state: &UserState,
        sample: u32,
    ) -> Result<SemanticRetrieval, String> {
        let query = match self.queries.get(prompt) {
            Some(Ok(q)) => q,
            Some(Err(e)) => return Err(e.clone()),
            None => return Err(format!("no embedding for prompt {prompt:?}")),
        };
        // The `candidates` nearest, in both selections: the case's candidates and its IR metrics
        // (recall@15, …) are over the same list whichever selection scores it; the pipeline's
        // own search (`top_k × fetch_factor`, then its threshold) is a second, smaller one.
        let nearest: Vec<(String, f32)> = self
            .pipeline
            .rank(query, prompt, audience_of(user_state), self.candidates)
            .map_err(|e| format!("searching the knowledge base: {e}"))?
            .into_iter()
            .map(|h| (h.entity_id, h.score))
            .collect();
        let candidates: Vec<Candidate> = nearest
            .iter()
            .map(|(id, sim)| Candidate {
                entity_id: id.clone(),
                similarity: f64::from(*sim),
            })
            .collect();
        let mut why_not = HashMap::new();
        let selections = if self.selection == Selection::Pipeline {
            let loaded = self
                .pipeline
                .retrieve(prompt, Some(query), user_state, audience_of(user_state))
                .map_err(|e| format!("retrieving: {e}"))?;
            for d in &loaded.dropped {
                if !matches!(d.reason, DropReason::Duplicate { .. }) {
                    why_not
                        .entry(d.entity_id.clone())
                        .or_insert_with(|| format!("the pipeline dropped it: {}", d.reason));
                }
            }
            loaded
                .entities
                .into_iter()
                .filter(|e| {
                    std::iter::once(e.stage)
                        .chain(e.also.iter().copied())
                        .any(|s| matches!(s, Stage::Semantic | Stage::Crisis | Stage::Keyword))
                })
                .map(|e| e.entity_id)
                .collect()
        } else if let Some((reranker, documents)) = &self.reranker {
            let docs: Vec<RerankDocument> = nearest
                .iter()
                .map(|(id, _)| {
                    documents
                        .get(id)
                        .cloned()
                        .unwrap_or_else(|| RerankDocument {
                            id: id.clone(),
                            title: id.clone(),
                            summary: String::new(),
                        })
                })
                .collect();
            let reranking = reranker
                .rerank_sample(prompt, &docs, self.top_k, sample)
                .await
                .map_err(|e| format!("reranking with {}: {e}", reranker.model()))?;
            reranking
                .order
                .iter()
                .filter_map(|r| docs.get(r.index).map(|d| d.id.clone()))
                .take(self.top_k)
                .collect()
        } else {
            let weight = self.pipeline.config().priority_weight;
            let mut ranked: Vec<(f32, &str)> = nearest
                .iter()
                .filter(|(_, sim)| self.threshold.is_none_or(|t| *sim >= t))
                .map(|(id, sim)| {
                    let bonus = f32::from(self.pipeline.priority(id).unwrap_or(0)) / 100.0 * weight;
                    (sim + bonus, id.as_str())
                })
                .collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
            ranked
                .into_iter()
                .take(self.top_k)
                .map(|(_, id)| id.to_owned())
                .collect()
        };
        Ok(SemanticRetrieval {
            candidates,
            selections,
            why_not,
        })
    }
}
