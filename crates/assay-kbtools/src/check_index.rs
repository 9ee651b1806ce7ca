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
//! The check holds the index to two rules: the mean recall must reach `min_recall`, and no
//! message may fall below `min_query_recall`. The second catches what a mean hides: at 200,000
//! entities a mean of 0.98 can hold messages for which the index found none of the exact
//! answer, and a run scores those cases as if the knowledge base had nothing for them.
//!
//! The message embeddings (and any entity embeddings brought up to date) go through the call
//! cache in the mode `--cache` > `ASSAY_CACHE` > `[providers] cache` names, as a run's do, so a
//! check with a remote embedder can be replayed offline (`--cache replay`).
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
use assay_project::engine::{self, OpenStore, ProviderCalls};
use assay_project::project::Project;

/// The recall below which the check warns (and `assay kb check-index` exits 1) by default:
/// the floor the store benchmark held the index to (bench/README.md, "store").
pub const DEFAULT_MIN_RECALL: f64 = 0.98;

/// The recall below which one message fails the check by default: the index found less than
/// half of the exact answer, which changes what a run selects for that message whatever the mean
/// says. 0 turns the rule off.
pub const DEFAULT_MIN_QUERY_RECALL: f64 = 0.5;

/// What to check.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOptions {
    /// Neighbours compared per message (default: `[semantic] candidates`).
    pub k: Option<usize>,
    /// `hnsw.ef_search` (default: `[semantic] ef_search`).
    pub ef_search: Option<u32>,
    /// The mean recall the index must reach.
    pub min_recall: f64,
    /// The recall every message must reach (0: no floor).
    pub min_query_recall: f64,
    /// The embedder (`--embedder`; default: the project's).
    pub embedder: Option<String>,
    /// The call cache mode (`--cache`; default: `ASSAY_CACHE`, then `[providers] cache`).
    pub cache: Option<String>,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            k: None,
            ef_search: None,
            min_recall: DEFAULT_MIN_RECALL,
            min_query_recall: DEFAULT_MIN_QUERY_RECALL,
            embedder: None,
            cache: None,
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
    /// What the index search returned instead: its entities outside the exact answer, in the
    /// index's order.
    pub instead: Vec<String>,
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
    /// The mean recall the index must reach.
    pub min_recall: f64,
    /// The recall every message must reach (0: no floor).
    pub min_query_recall: f64,
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
    /// The messages whose recall is below [`IndexCheck::min_query_recall`], by id, lowest
    /// first (ties in input order).
    pub below_floor: Vec<String>,
    /// The rules the check failed (empty: it passed).
    pub failed: Vec<Rule>,
    /// Every message, in input order.
    pub queries: Vec<QueryRecall>,
}

/// A rule of the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The mean recall reaches `min_recall` (a check that measured no message fails it).
    MeanRecall,
    /// No message's recall is below `min_query_recall`.
    QueryRecall,
}

/// The mean and lowest recall of `queries`, the messages below `min_query_recall` (lowest
/// first) and the rules they fail.
fn judge(
    queries: &[QueryRecall],
    min_recall: f64,
    min_query_recall: f64,
) -> (Option<f64>, Option<f64>, Vec<String>, Vec<Rule>) {
    let recalls: Vec<f64> = queries.iter().filter_map(|q| q.recall).collect();
    let mean = (!recalls.is_empty()).then(|| recalls.iter().sum::<f64>() / recalls.len() as f64);
    let lowest = recalls.iter().copied().reduce(f64::min);
    let below_floor: Vec<String> = worst(queries)
        .into_iter()
        .filter(|q| q.recall.is_some_and(|r| r < min_query_recall))
        .map(|q| q.id.clone())
        .collect();
    let mut failed = Vec::new();
    if !mean.is_some_and(|m| m >= min_recall) {
        failed.push(Rule::MeanRecall);
    }
    if !below_floor.is_empty() {
        failed.push(Rule::QueryRecall);
    }
    (mean, lowest, below_floor, failed)
}

/// The measured messages of `queries`, lowest recall first (ties in input order).
fn worst(queries: &[QueryRecall]) -> Vec<&QueryRecall> {
    let mut measured: Vec<&QueryRecall> = queries.iter().filter(|q| q.recall.is_some()).collect();
    measured.sort_by(|a, b| a.recall.unwrap_or(1.0).total_cmp(&b.recall.unwrap_or(1.0)));
    measured
}

impl IndexCheck {
    /// Whether the check passed: the mean recall reaches [`IndexCheck::min_recall`] (a check
    /// that measured no message does not) and no message is below
    /// [`IndexCheck::min_query_recall`].
    pub fn passes(&self) -> bool {
        self.failed.is_empty()
    }

    /// Whether the check failed `rule`.
    pub fn failed(&self, rule: Rule) -> bool {
        self.failed.contains(&rule)
    }

    /// The messages below the floor, lowest recall first.
    pub fn below_floor(&self) -> Vec<&QueryRecall> {
        self.below_floor
            .iter()
            .filter_map(|id| self.queries.iter().find(|q| &q.id == id))
            .collect()
    }

    /// The measured messages, lowest recall first (ties in input order).
    pub fn worst(&self) -> Vec<&QueryRecall> {
        worst(&self.queries)
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
    if !(1..=assay_project::settings::MAX_EF_SEARCH).contains(&ef_search) {
        return Err(HarnessError::Usage(format!(
            "--ef-search: must be between 1 and {}",
            assay_project::settings::MAX_EF_SEARCH
        )));
    }
    if !(0.0..=1.0).contains(&options.min_recall) {
        return Err(HarnessError::Usage(
            "--min-recall: must be between 0 and 1".into(),
        ));
    }
    if !(0.0..=1.0).contains(&options.min_query_recall) {
        return Err(HarnessError::Usage(
            "--min-query-recall: must be between 0 and 1".into(),
        ));
    }
    let choice = engine::choose_embedder(settings, options.embedder.as_deref(), env)?;
    // The embeddings go through the call cache as a run's do (an in-process embedder is never
    // cached, though the mode is checked either way).
    let calls = ProviderCalls::open(
        settings,
        options.cache.as_deref(),
        env,
        !choice.is_in_process(),
    )?;
    let embedder = calls.embedder(engine::build_embedder(&choice)?);
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
            instead: Vec::new(),
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
                let wanted: HashSet<&String> = truth.iter().collect();
                result.instead = found
                    .iter()
                    .filter(|id| !wanted.contains(id))
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
    let measured = results.iter().filter(|r| r.recall.is_some()).count();
    let (mean_recall, lowest_recall, below_floor, failed) =
        judge(&results, options.min_recall, options.min_query_recall);
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
        min_query_recall: options.min_query_recall,
        messages: messages.len(),
        measured,
        errors,
        mean_recall,
        lowest_recall,
        exact_ms: per(exact_s),
        index_ms: per(index_s),
        exact_fallbacks: indexed.index_stats().map_or(0, |s| s.exact_fallbacks),
        below_floor,
        failed,
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

    fn query(id: &str, recall: Option<f64>) -> QueryRecall {
        QueryRecall {
            id: id.to_owned(),
            message: format!("message {id}"),
            audience: "PARENT".to_owned(),
            recall,
            exact: Vec::new(),
            missed: Vec::new(),
            instead: Vec::new(),
            error: None,
        }
    }

    /// Issue 32: a mean that passes does not hide a message the index found nothing of.
    #[test]
    fn a_message_below_the_floor_fails_the_check_though_the_mean_passes() {
        let mut queries: Vec<QueryRecall> = (0..99)
            .map(|i| query(&format!("q{i}"), Some(1.0)))
            .collect();
        queries.insert(40, query("zero", Some(0.0)));
        queries.push(query("low", Some(0.4)));
        queries.push(query("unmeasured", None));
        let (mean, lowest, below, failed) = judge(&queries, 0.98, DEFAULT_MIN_QUERY_RECALL);
        assert!(mean.is_some_and(|m| m >= 0.98), "{mean:?}");
        assert_eq!(lowest, Some(0.0));
        assert_eq!(below, ids(&["zero", "low"]), "lowest first");
        assert_eq!(failed, vec![Rule::QueryRecall]);

        // A floor of 0 is no floor; at the floor is not below it.
        assert_eq!(judge(&queries, 0.98, 0.0).3, vec![]);
        assert_eq!(judge(&queries, 0.98, 0.4).2, ids(&["zero"]));
        // Both rules can fail, and a check that measured nothing fails the mean.
        assert_eq!(
            judge(&queries, 0.999, 0.5).3,
            vec![Rule::MeanRecall, Rule::QueryRecall]
        );
        assert_eq!(
            judge(&[query("none", None)], 0.0, 0.0).3,
            vec![Rule::MeanRecall]
        );
    }
}
