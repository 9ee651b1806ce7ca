//! `assay kb check-index`: how much of the exact answer a store's vector index finds.
//!
//! For each message (the semantic bank's prompts, or a file of messages), the `k` nearest
//! active SITUATION entities of its audience are found twice: by the exact scan a run does
//! without the index (every fresh embedding scored in memory), and through the store's index
//! as a run with `[semantic] search` = `index` takes them ([`Pipeline::with_index`], with
//! `[semantic] ef_search`). The recall@k of a message is the share of the exact `k` that the
//! index search also returned; the check reports each message's and their mean, with the time
//! each search took.
//!
//! Both searches are the ones a run makes, through the same code, so the recall measured here is
//! the recall of the candidates a run takes from the index (the semantic bank's first stage:
//! `k` = `[semantic] candidates`).

use std::collections::HashSet;
use std::time::Instant;

use assay_core::entity::LoadMode;
use assay_kb::{EntityFilter, KnowledgeBase};
use assay_retrieval::pipeline::{IndexSearch, Pipeline, RankMode};
use serde::Serialize;

use crate::HarnessError;
use crate::compare::Message;
use crate::engine::{self, OpenStore};
use crate::project::Project;

/// The recall below which the check warns (and `assay kb check-index` exits 1) by default:
/// the floor the store benchmark held the index to (bench/README.md, "store").
pub const DEFAULT_MIN_RECALL: f64 = 0.98;

/// What to check.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOptions {
    /// Neighbours compared per message (default: `[semantic] candidates`).
    pub k: Option<usize>,
    /// `hnsw.ef_search` (default: `[semantic] ef_search`).
    pub ef_search: Option<u32>,
    /// The recall the index must reach.
    pub min_recall: f64,
    /// The embedder (`--embedder`; default: the project's).
    pub embedder: Option<String>,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            k: None,
            ef_search: None,
            min_recall: DEFAULT_MIN_RECALL,
            embedder: None,
        }
    }
}

/// One message's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryRecall {
    /// The message's name (its test id, or `line N` of the file).
    pub id: String,
    /// The message.
    pub message: String,
    /// Its audience.
    pub audience: String,
    /// The share of the exact `k` the index search found (`None`: the audience has no
    /// SITUATION entity with an embedding, or the message could not be searched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall: Option<f64>,
    /// The exact search's answer, best first.
    pub exact: Vec<String>,
    /// Entities of the exact answer the index search missed, in the exact order.
    pub missed: Vec<String>,
    /// Why the message could not be searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The whole check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IndexCheck {
    /// The store.
    pub store: String,
    /// The index (`PostgreSQL HNSW (pgvector 0.8.5)`).
    pub index: String,
    /// The embedder whose embeddings were searched.
    pub embedder: String,
    /// Neighbours compared per message.
    pub k: usize,
    /// `hnsw.ef_search` used.
    pub ef_search: u32,
    /// Active SITUATION entities in the store.
    pub entities: usize,
    /// The recall the index must reach.
    pub min_recall: f64,
    /// Messages given.
    pub messages: usize,
    /// Messages with a recall (the others errored or had nothing to find).
    pub measured: usize,
    /// Messages that could not be embedded or searched.
    pub errors: usize,
    /// The mean recall@k over the measured messages.
    pub mean_recall: Option<f64>,
    /// The lowest recall@k of a message.
    pub lowest_recall: Option<f64>,
    /// The mean time of an exact search, in milliseconds.
    pub exact_ms: f64,
    /// The mean time of an index search, in milliseconds.
    pub index_ms: f64,
    /// Index searches the exact search in the database answered instead (the index returned
    /// too few rows of the audience).
    pub exact_fallbacks: u64,
    /// Every message, in input order.
    pub queries: Vec<QueryRecall>,
}

impl IndexCheck {
    /// Whether the mean recall reaches [`IndexCheck::min_recall`] (a check that measured no
    /// message does not).
    pub fn passes(&self) -> bool {
        self.mean_recall.is_some_and(|r| r >= self.min_recall)
    }

    /// The measured messages, lowest recall first (ties in input order).
    pub fn worst(&self) -> Vec<&QueryRecall> {
        let mut measured: Vec<&QueryRecall> =
            self.queries.iter().filter(|q| q.recall.is_some()).collect();
        measured.sort_by(|a, b| a.recall.unwrap_or(1.0).total_cmp(&b.recall.unwrap_or(1.0)));
        measured
    }
}

/// The share of `exact` that `found` holds (`None` when `exact` is empty).
pub fn recall(exact: &[String], found: &[String]) -> Option<f64> {
    if exact.is_empty() {
        return None;
    }
    let found: HashSet<&String> = found.iter().collect();
    let hits = exact.iter().filter(|id| found.contains(id)).count();
    Some(hits as f64 / exact.len() as f64)
}

/// Checks the vector index of `store` on `messages` (see the module documentation). The store's
/// entity embeddings for the embedder are brought up to date first, as before a run. A store
/// without an index, or embeddings it cannot index, is bad input.
pub async fn check_index(
    project: &Project,
    store: &OpenStore,
    messages: &[Message],
    options: &CheckOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<IndexCheck, HarnessError> {
    let settings = &project.settings;
    let Some(index) = store.vector_index() else {
        return Err(HarnessError::Usage(format!(
            "the store {} has no vector index to check: only a PostgreSQL store has one (the \
             SQLite store scores every embedding, exactly)",
            store.location
        )));
    };
    let k = options.k.unwrap_or(settings.semantic.candidates);
    if k == 0 {
        return Err(HarnessError::Usage("--k: must be at least 1".into()));
    }
    let ef_search = options.ef_search.unwrap_or(settings.semantic.ef_search);
    if !(1..=crate::settings::MAX_EF_SEARCH).contains(&ef_search) {
        return Err(HarnessError::Usage(format!(
            "--ef-search: must be between 1 and {}",
            crate::settings::MAX_EF_SEARCH
        )));
    }
    if !(0.0..=1.0).contains(&options.min_recall) {
        return Err(HarnessError::Usage(
            "--min-recall: must be between 0 and 1".into(),
        ));
    }
    let choice = engine::choose_embedder(settings, options.embedder.as_deref(), env)?;
    let embedder = engine::build_embedder(&choice)?;
    let model = embedder.model().to_owned();
    let kb = engine::snapshot(&**store)?;
    engine::refresh_embeddings(&**store, embedder.as_ref(), false, None).await?;
    match index.embedding_dimension(&model)? {
        None => {
            return Err(HarnessError::Usage(format!(
                "the store has no embeddings of {model} to check"
            )));
        }
        Some(dim) if !index.has_index(dim)? => {
            return Err(HarnessError::Usage(format!(
                "the store has no index for {model}'s {dim}-dimension embeddings (pgvector \
                 indexes at most 2,000 dimensions): they are always searched exactly"
            )));
        }
        Some(_) => {}
    }
    // The index serves dense ranking over one embedding per entity; the neighbours it is
    // measured on are those, whatever the project ranks with.
    let mut config = engine::retrieval_config(settings, &choice);
    config.mode = RankMode::Dense;
    let exact = engine::build_pipeline(&**store, &kb, project, &model, config.clone())?;
    let search = IndexSearch {
        index: index.clone(),
        model: model.clone(),
        ef_search,
    };
    let indexed = Pipeline::with_index(&kb, None, search, config)
        .map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
    let entities = kb.list(&EntityFilter::active(LoadMode::Situation))?.len();

    let prompts: Vec<String> = messages.iter().map(|m| m.message.clone()).collect();
    let queries = engine::embed_queries(embedder.as_ref(), &prompts).await;
    let (mut exact_s, mut index_s, mut timed) = (0.0f64, 0.0f64, 0usize);
    let mut results = Vec::with_capacity(messages.len());
    for m in messages {
        let audience = m.audience();
        let mut result = QueryRecall {
            id: m.id.clone(),
            message: m.message.clone(),
            audience: audience.clone(),
            recall: None,
            exact: Vec::new(),
            missed: Vec::new(),
            error: None,
        };
        let query = match queries.get(&m.message) {
            Some(Ok(q)) => q,
            Some(Err(e)) => {
                result.error = Some(e.clone());
                results.push(result);
                continue;
            }
            None => {
                result.error = Some("not embedded".into());
                results.push(result);
                continue;
            }
        };
        let t = Instant::now();
        let truth = exact.nearest(query, &audience, k);
        let exact_took = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let found = indexed.nearest(query, &audience, k);
        let index_took = t.elapsed().as_secs_f64();
        match (truth, found) {
            (Ok(truth), Ok(found)) => {
                exact_s += exact_took;
                index_s += index_took;
                timed += 1;
                let truth: Vec<String> = truth.into_iter().map(|(id, _)| id).collect();
                let found: Vec<String> = found.into_iter().map(|(id, _)| id).collect();
                let got: HashSet<&String> = found.iter().collect();
                result.missed = truth
                    .iter()
                    .filter(|id| !got.contains(id))
                    .cloned()
                    .collect();
                result.recall = recall(&truth, &found);
                result.exact = truth;
            }
            (Err(e), _) | (_, Err(e)) => result.error = Some(e.to_string()),
        }
        results.push(result);
    }
    let errors = results.iter().filter(|r| r.error.is_some()).count();
    if !messages.is_empty() && errors == messages.len() {
        let first = results
            .iter()
            .find_map(|r| r.error.clone())
            .unwrap_or_default();
        return Err(HarnessError::Infrastructure(format!(
            "no message could be searched: {first}"
        )));
    }
    let recalls: Vec<f64> = results.iter().filter_map(|r| r.recall).collect();
    let per = |secs: f64| {
        if timed == 0 {
            0.0
        } else {
            secs * 1000.0 / timed as f64
        }
    };
    Ok(IndexCheck {
        store: store.location.to_string(),
        index: index.describe(),
        embedder: model,
        k,
        ef_search,
        entities,
        min_recall: options.min_recall,
        messages: messages.len(),
        measured: recalls.len(),
        errors,
        mean_recall: (!recalls.is_empty())
            .then(|| recalls.iter().sum::<f64>() / recalls.len() as f64),
        lowest_recall: recalls.iter().copied().reduce(f64::min),
        exact_ms: per(exact_s),
        index_ms: per(index_s),
        exact_fallbacks: indexed.index_stats().map_or(0, |s| s.exact_fallbacks),
        queries: results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn recall_is_the_share_of_the_exact_answer_found() {
        assert_eq!(
            recall(&ids(&["a", "b", "c", "d"]), &ids(&["d", "x", "a"])),
            Some(0.5)
        );
        assert_eq!(recall(&ids(&["a"]), &ids(&["a"])), Some(1.0));
        assert_eq!(recall(&[], &ids(&["a"])), None);
    }
}
