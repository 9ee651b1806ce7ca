//! The retrieval pipeline (003 §3, §6): ALWAYS → STATE → pattern rules → SITUATION semantic
//! search → final score → dedupe and rank → token budget, with a trace of every decision.
//!
//! * ALWAYS and STATE entities, and entities named by a pattern rule, have similarity 1.0.
//! * SITUATION candidates: the `top_k × fetch_factor` nearest active SITUATION entities of the
//!   audience, those at or above `score_threshold`, at most `top_k` of them. They are found by
//!   scoring every embedding exactly ([`FlatIndex`]), or, for a pipeline built with
//!   [`Pipeline::with_index`], through a store's approximate nearest-neighbour index
//!   ([`IndexSearch`]); the stages after that are the same either way.
//! * final score = similarity + priority / 100 × `priority_weight`.
//! * Crisis entities (named by a crisis rule) always come first, in rule order.
//! * The budget counts each entity's prompt text with the cl100k_base tokenizer. When an entity
//!   does not fit, a GUARDRAIL or HANDLER displaces the last KNOWLEDGE entity already taken (as
//!   many as needed) instead of being dropped; crisis entities are never displaced.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use assay_core::UserState;
use assay_core::entity::{Entity, EntityType, LoadMode};
use assay_kb::{
    EmbeddingIndex, EmbeddingSearch, EntityFilter, KnowledgeBase, SearchMethod, embedding_text_hash,
};
use serde::Serialize;

use crate::patterns::PatternMatcher;
use crate::vector::{FlatIndex, VectorIndex};
use crate::{RetrievalError, StateMatcher};

/// Pipeline settings (003 §3 `RetrievalConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct RetrievalConfig {
    /// SITUATION entities kept (default 5).
    pub top_k: usize,
    /// Candidates fetched per kept entity before the threshold (default 2).
    pub fetch_factor: usize,
    /// Minimum cosine similarity of a SITUATION entity (default 0.65).
    pub score_threshold: f32,
    /// Weight of priority in the final score (default 0.15).
    pub priority_weight: f32,
    /// Token budget of the retrieved content (default 3000).
    pub max_tokens_budget: usize,
    /// Dense ranking alone (003's pipeline) or dense plus BM25 (default dense).
    pub mode: RankMode,
    /// In hybrid mode, the weight of the normalised BM25 score added to the cosine.
    pub lexical_weight: f32,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        RetrievalConfig {
            top_k: 5,
            fetch_factor: 2,
            score_threshold: 0.65,
            priority_weight: 0.15,
            max_tokens_budget: 3000,
            mode: RankMode::Dense,
            lexical_weight: DEFAULT_LEXICAL_WEIGHT,
        }
    }
}

/// The lexical weight of hybrid ranking when none is configured (chosen by measurement: see the
/// guide).
pub const DEFAULT_LEXICAL_WEIGHT: f32 = 0.3;

/// How SITUATION candidates are ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RankMode {
    /// Cosine similarity alone (003 §3).
    #[default]
    Dense,
    /// Cosine similarity + `lexical_weight` × BM25 / the best BM25 score of the query.
    Hybrid,
}

impl RankMode {
    /// `dense` or `hybrid`.
    pub fn as_str(self) -> &'static str {
        match self {
            RankMode::Dense => "dense",
            RankMode::Hybrid => "hybrid",
        }
    }
}

impl std::str::FromStr for RankMode {
    type Err = String;
    fn from_str(s: &str) -> Result<RankMode, String> {
        match s.trim() {
            "dense" => Ok(RankMode::Dense),
            "hybrid" => Ok(RankMode::Hybrid),
            other => Err(format!(
                "unknown retrieval mode `{other}` (expected dense or hybrid)"
            )),
        }
    }
}

/// The embedding of one view of an entity: `view` is `None` for the single embedding text
/// (003 §8), else a key of [`Entity::views`].
#[derive(Debug, Clone, PartialEq)]
pub struct ViewVector {
    /// The entity.
    pub entity_id: String,
    /// The view (`None`: the whole embedding text).
    pub view: Option<String>,
    /// The normalised vector.
    pub vector: Vec<f32>,
}

/// A ranked SITUATION candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankedHit {
    /// The entity.
    pub entity_id: String,
    /// The ranking score: the cosine in dense mode, cosine + lexical bonus in hybrid mode.
    pub score: f32,
    /// The best cosine over the entity's views.
    pub dense: f32,
    /// The view whose cosine that is (`None` for the single embedding text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    /// Hybrid mode: the BM25 score normalised by the query's best (0–1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lexical: Option<f32>,
    /// Hybrid mode: the view with the best BM25 score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lexical_view: Option<String>,
}

/// How an entity reached the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Load mode ALWAYS.
    Always,
    /// STATE conditions held.
    State,
    /// Named by a crisis rule.
    Crisis,
    /// Named by a keyword boost.
    Keyword,
    /// Semantic search.
    Semantic,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Always => "always",
            Stage::State => "state",
            Stage::Crisis => "crisis",
            Stage::Keyword => "keyword",
            Stage::Semantic => "semantic",
        })
    }
}

/// One entity in the context, with how it got there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievedEntity {
    /// The entity.
    pub entity_id: String,
    /// Its type.
    pub entity_type: EntityType,
    /// Its title.
    pub title: String,
    /// The stage that brought it in (the highest-scoring one when several did).
    pub stage: Stage,
    /// Other stages that also selected it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Stage>,
    /// Similarity (1.0 for ALWAYS, STATE and pattern entities).
    pub similarity: f32,
    /// Its priority.
    pub priority: u8,
    /// priority / 100 × priority_weight.
    pub priority_bonus: f32,
    /// similarity + priority_bonus.
    pub final_score: f32,
    /// Tokens of its prompt text (cl100k_base).
    pub tokens: usize,
}

/// Why an entity was not put in the context.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum DropReason {
    /// A semantic candidate under the similarity threshold.
    Threshold {
        /// Its similarity.
        similarity: f32,
        /// The threshold.
        threshold: f32,
    },
    /// A semantic candidate above the threshold but beyond `top_k`.
    TopK {
        /// Its similarity.
        similarity: f32,
    },
    /// Selected by several stages; kept once.
    Duplicate {
        /// The stage it was kept under.
        kept_as: Stage,
    },
    /// It did not fit in the remaining budget.
    Budget {
        /// Its tokens.
        tokens: usize,
        /// Tokens already used.
        used: usize,
        /// The budget.
        budget: usize,
    },
    /// A KNOWLEDGE entity removed to make room for a GUARDRAIL or HANDLER.
    Displaced {
        /// The entity that took its place.
        by: String,
    },
    /// A pattern rule names an entity that is not in the knowledge base, or is inactive, or is
    /// not for this audience.
    Unavailable,
}

impl fmt::Display for DropReason {
    /// Why, in words: `similarity 0.123 below threshold 0.2`, `displaced by kb_x`, ….
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::Threshold {
                similarity,
                threshold,
            } => write!(f, "similarity {similarity:.3} below threshold {threshold}"),
            DropReason::TopK { similarity } => {
                write!(f, "similarity {similarity:.3} but beyond top_k")
            }
            DropReason::Duplicate { kept_as } => write!(f, "duplicate, kept as {kept_as}"),
            DropReason::Budget {
                tokens,
                used,
                budget,
            } => write!(f, "{tokens} tokens do not fit ({used} of {budget} used)"),
            DropReason::Displaced { by } => write!(f, "displaced by {by}"),
            DropReason::Unavailable => {
                f.write_str("not in the knowledge base, inactive, or not for this audience")
            }
        }
    }
}

/// A dropped entity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dropped {
    /// The entity.
    pub entity_id: String,
    /// The stage that proposed it.
    pub stage: Stage,
    /// Why it was dropped.
    #[serde(flatten)]
    pub reason: DropReason,
}

/// Candidates a stage proposed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageCandidates {
    /// The stage.
    pub stage: Stage,
    /// `(entity_id, similarity)`, in the stage's order.
    pub candidates: Vec<(String, f32)>,
}

/// The ranked context and the trace of how it was built.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retrieval {
    /// The context, in order.
    pub entities: Vec<RetrievedEntity>,
    /// What each stage proposed.
    pub stages: Vec<StageCandidates>,
    /// What was dropped and why.
    pub dropped: Vec<Dropped>,
    /// Tokens used.
    pub tokens_used: usize,
    /// The budget.
    pub token_budget: usize,
    /// Notes (for example: no query embedding, so no semantic stage).
    pub notes: Vec<String>,
    /// With several views per entity or hybrid ranking: how each semantic candidate matched
    /// (which view, the cosine and the lexical score).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<RankedHit>,
}

/// Counts tokens with cl100k_base.
pub struct TokenCounter {
    bpe: &'static tiktoken_rs::CoreBPE,
}

impl fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenCounter(cl100k_base)")
    }
}

impl TokenCounter {
    /// The cl100k_base tokenizer (shipped inside the binary; no download), parsed once per
    /// process.
    pub fn cl100k() -> Result<TokenCounter, RetrievalError> {
        static BPE: std::sync::OnceLock<Result<tiktoken_rs::CoreBPE, String>> =
            std::sync::OnceLock::new();
        let bpe = BPE.get_or_init(|| tiktoken_rs::cl100k_base().map_err(|e| e.to_string()));
        match bpe {
            Ok(bpe) => Ok(TokenCounter { bpe }),
            Err(e) => Err(RetrievalError::Tokenizer(e.clone())),
        }
    }

    /// Tokens in `text`.
    pub fn count(&self, text: &str) -> usize {
        self.bpe.encode_ordinary(text).len()
    }
}

/// A pipeline over one knowledge base, ready to answer many messages.
pub struct Pipeline {
    config: RetrievalConfig,
    entities: HashMap<String, Entity>,
    /// Each entity's tokens, counted on first use: building the cl100k tables costs tens of
    /// milliseconds, and the semantic bank never needs them.
    tokens: std::sync::OnceLock<Result<HashMap<String, usize>, String>>,
    always: Vec<String>,
    state: StateMatcher,
    patterns: Option<Arc<PatternMatcher>>,
    index: FlatIndex,
    /// Per index row: the entity's audiences.
    audiences: Vec<Vec<String>>,
    /// Several rows per entity (views) or hybrid: the pooled ranking below is used.
    pooled: Option<Pooled>,
    /// Candidates from a store's index instead of `index` ([`Pipeline::with_index`]).
    external: Option<External>,
}

/// The SITUATION stage's candidates from a store's approximate nearest-neighbour index (for
/// example PostgreSQL's HNSW), for [`Pipeline::with_index`].
#[derive(Debug, Clone)]
pub struct IndexSearch {
    /// The index.
    pub index: Arc<dyn EmbeddingIndex>,
    /// The model whose embeddings are searched (the embedder's name).
    pub model: String,
    /// How many candidates the index explores per search (HNSW's `ef_search`; at least the
    /// number asked for is used).
    pub ef_search: u32,
}

/// An [`IndexSearch`] with what the pipeline needs to check and order its answers.
struct External {
    search: IndexSearch,
    /// Per audience: how many active SITUATION entities it has (how many an exact search could
    /// return at most).
    eligible: HashMap<String, usize>,
    counters: SearchCounters,
}

/// How many SITUATION searches a pipeline made through a store's index, and how many of them
/// the exact search in the database answered instead ([`Pipeline::index_stats`]).
#[derive(Debug, Default)]
struct SearchCounters {
    searches: AtomicU64,
    exact: AtomicU64,
}

/// What the SITUATION searches of a [`Pipeline::with_index`] pipeline did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IndexStats {
    /// Searches made.
    pub searches: u64,
    /// Searches the index could not fill (a filter that few rows pass, or embeddings changed
    /// since the pipeline was built), answered by the exact search in the database instead.
    pub exact_fallbacks: u64,
}

/// The ranking over several rows per entity and, in hybrid mode, BM25.
struct Pooled {
    /// Entities in the index, in first-row order.
    entities: Vec<String>,
    /// Per entity: its audiences.
    audiences: Vec<Vec<String>>,
    /// Per index row: its entity slot and view.
    rows: Vec<(usize, Option<String>)>,
    /// Hybrid: BM25 over the same views, and each document's view.
    lexical: Option<(crate::lexical::Bm25Index, Vec<Option<String>>)>,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("entities", &self.entities.len())
            .field("indexed", &self.index.len())
            .field(
                "external",
                &self.external.as_ref().map(|e| e.search.index.describe()),
            )
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// Builds a pipeline from the knowledge base's active entities, the pattern rules, and the
    /// embeddings of SITUATION entities (`(entity_id, normalised vector)`; others are ignored).
    pub fn new(
        kb: &dyn KnowledgeBase,
        patterns: Option<Arc<PatternMatcher>>,
        embeddings: &[(String, Vec<f32>)],
        config: RetrievalConfig,
    ) -> Result<Pipeline, RetrievalError> {
        let views: Vec<ViewVector> = embeddings
            .iter()
            .map(|(id, v)| ViewVector {
                entity_id: id.clone(),
                view: None,
                vector: v.clone(),
            })
            .collect();
        Pipeline::with_views(kb, patterns, &views, config)
    }

    /// Builds a pipeline from embeddings of entities' views (several rows per entity allowed:
    /// an entity's similarity is the best of its rows). In hybrid mode the BM25 index covers the
    /// same texts: each embedded view's text, or the whole embedding text for `view: None`.
    pub fn with_views(
        kb: &dyn KnowledgeBase,
        patterns: Option<Arc<PatternMatcher>>,
        embeddings: &[ViewVector],
        config: RetrievalConfig,
    ) -> Result<Pipeline, RetrievalError> {
        let active = kb.list(&EntityFilter {
            active: Some(true),
            ..EntityFilter::default()
        })?;
        let always = active
            .iter()
            .filter(|e| e.load_mode == LoadMode::Always)
            .map(|e| e.entity_id.clone())
            .collect();
        let entities: HashMap<String, Entity> = active
            .into_iter()
            .map(|e| (e.entity_id.clone(), e))
            .collect();
        let dimension = embeddings.first().map_or(0, |e| e.vector.len());
        let mut index = FlatIndex::with_capacity(dimension, embeddings.len());
        let mut audiences = Vec::with_capacity(embeddings.len());
        let mut slots: HashMap<&str, usize> = HashMap::new();
        let mut pooled = Pooled {
            entities: Vec::new(),
            audiences: Vec::new(),
            rows: Vec::with_capacity(embeddings.len()),
            lexical: None,
        };
        let mut lexical_docs: Vec<(usize, String)> = Vec::new();
        let mut lexical_views: Vec<Option<String>> = Vec::new();
        let mut view_texts: Vec<Option<Vec<(String, String)>>> = Vec::new();
        for row in embeddings {
            let id = &row.entity_id;
            let Some(entity) = entities
                .get(id)
                .filter(|e| e.load_mode == LoadMode::Situation)
            else {
                continue;
            };
            index
                .push(id.clone(), &row.vector)
                .map_err(|e| RetrievalError::Index(e.to_string()))?;
            audiences.push(entity.audience_types.clone());
            let slot = *slots.entry(entity.entity_id.as_str()).or_insert_with(|| {
                pooled.entities.push(entity.entity_id.clone());
                pooled.audiences.push(entity.audience_types.clone());
                pooled.entities.len() - 1
            });
            pooled.rows.push((slot, row.view.clone()));
            if config.mode == RankMode::Hybrid {
                let text = match &row.view {
                    None => Some(entity.embedding_text()),
                    Some(key) => {
                        if view_texts.len() <= slot {
                            view_texts.resize_with(slot + 1, || None);
                        }
                        view_texts[slot]
                            .get_or_insert_with(|| entity.views())
                            .iter()
                            .find(|(k, _)| k == key)
                            .map(|(_, t)| t.clone())
                    }
                };
                if let Some(text) = text {
                    lexical_docs.push((slot, text));
                    lexical_views.push(row.view.clone());
                }
            }
        }
        let several = pooled.rows.len() > pooled.entities.len();
        let pooled = if several || config.mode == RankMode::Hybrid {
            if config.mode == RankMode::Hybrid {
                pooled.lexical = Some((
                    crate::lexical::Bm25Index::new(pooled.entities.len(), &lexical_docs),
                    lexical_views,
                ));
            }
            Some(pooled)
        } else {
            None
        };
        Ok(Pipeline {
            config,
            entities,
            tokens: std::sync::OnceLock::new(),
            always,
            state: StateMatcher::from_kb(kb)?,
            patterns,
            index,
            audiences,
            pooled,
            external: None,
        })
    }

    /// Builds a pipeline whose SITUATION candidates come from a store's approximate
    /// nearest-neighbour index (`search`) instead of an exact scan of embeddings held in memory.
    /// Only for dense ranking over one embedding per entity (003's pipeline): hybrid ranking adds
    /// a lexical score to every entity, which an index of embeddings cannot order by.
    ///
    /// A search asks the index for the `k` nearest embeddings of `search.model` among current,
    /// active SITUATION entities of the audience, then keeps those of entities in `kb` whose
    /// embedding is fresh (made from the text `kb` holds), scores them exactly as the exact scan
    /// does (so a candidate's similarity is the same to the bit, and so are thresholds and ties)
    /// and orders them as it does. When fewer than `k` remain although the audience has more
    /// entities, it asks again for more; when the index has no more to give, the exact search
    /// in the database answers instead (counted in [`Pipeline::index_stats`]).
    pub fn with_index(
        kb: &dyn KnowledgeBase,
        patterns: Option<Arc<PatternMatcher>>,
        search: IndexSearch,
        config: RetrievalConfig,
    ) -> Result<Pipeline, RetrievalError> {
        if config.mode != RankMode::Dense {
            return Err(RetrievalError::Config(format!(
                "an index search needs dense ranking ([retrieval] mode = \"dense\"), not {}: \
                 {} ranking scores every entity",
                config.mode.as_str(),
                config.mode.as_str()
            )));
        }
        let mut pipeline = Pipeline::with_views(kb, patterns, &[], config)?;
        let mut eligible: HashMap<String, usize> = HashMap::new();
        for e in pipeline.entities.values() {
            if e.load_mode == LoadMode::Situation {
                for audience in &e.audience_types {
                    *eligible.entry(audience.clone()).or_default() += 1;
                }
            }
        }
        pipeline.external = Some(External {
            search,
            eligible,
            counters: SearchCounters::default(),
        });
        Ok(pipeline)
    }

    /// What answers the SITUATION searches: `None` for the exact scan in memory, else the
    /// index's description (`PostgreSQL HNSW (pgvector 0.8.5)`).
    pub fn index_description(&self) -> Option<String> {
        self.external.as_ref().map(|e| e.search.index.describe())
    }

    /// Sets the counts of [`Pipeline::index_stats`] back to zero (after a warm-up, whose
    /// searches are not the run's).
    pub fn reset_index_stats(&self) {
        if let Some(e) = &self.external {
            e.counters.searches.store(0, Ordering::Relaxed);
            e.counters.exact.store(0, Ordering::Relaxed);
        }
    }

    /// The SITUATION searches made through the store's index so far (`None` for an exact
    /// pipeline).
    pub fn index_stats(&self) -> Option<IndexStats> {
        self.external.as_ref().map(|e| IndexStats {
            searches: e.counters.searches.load(Ordering::Relaxed),
            exact_fallbacks: e.counters.exact.load(Ordering::Relaxed),
        })
    }

    /// The `k` nearest SITUATION entities of `audience` through the store's index (see
    /// [`Pipeline::with_index`]): `(entity_id, similarity)`, best first, ties as the exact
    /// scan orders them (priority, then id).
    fn index_nearest(
        &self,
        external: &External,
        query: &[f32],
        audience: &str,
        k: usize,
    ) -> Result<Vec<(String, f32)>, RetrievalError> {
        let available = external.eligible.get(audience).copied().unwrap_or(0);
        let need = k.min(available);
        external.counters.searches.fetch_add(1, Ordering::Relaxed);
        if need == 0 {
            return Ok(Vec::new());
        }
        let mut method = SearchMethod::Index {
            ef_search: external.search.ef_search,
        };
        let mut limit = k;
        let kept = loop {
            let hits = external.search.index.search_embeddings(&EmbeddingSearch {
                model: &external.search.model,
                query,
                limit,
                load_mode: Some(LoadMode::Situation),
                audience: Some(audience),
                method,
            })?;
            let found = hits.len();
            let kept: Vec<assay_kb::EmbeddingHit> = hits
                .into_iter()
                .filter(|h| {
                    h.vector.len() == query.len()
                        && self.entities.get(&h.entity_id).is_some_and(|e| {
                            e.load_mode == LoadMode::Situation
                                && e.has_audience(audience)
                                && embedding_text_hash(e) == h.text_hash
                        })
                })
                .collect();
            if kept.len() >= need {
                break kept;
            }
            if found < limit {
                // The search has nothing more to give.
                if method == SearchMethod::Exact {
                    break kept;
                }
                method = SearchMethod::Exact;
                external.counters.exact.fetch_add(1, Ordering::Relaxed);
            } else {
                // Rows of entities changed since the pipeline was built: look further.
                limit = limit.saturating_mul(2);
            }
        };
        let dimension = query.len();
        let mut data = Vec::with_capacity(kept.len() * dimension);
        let mut ids = Vec::with_capacity(kept.len());
        for hit in kept {
            data.extend_from_slice(&hit.vector);
            ids.push(hit.entity_id);
        }
        // Scored by the exact scan's own kernel: the same similarity to the bit.
        let scores = FlatIndex::from_vec(dimension, data, ids.clone())
            .map_err(|e| RetrievalError::Index(e.to_string()))?
            .scores(query);
        let priority = |id: &str| self.entities.get(id).map_or(0, |e| e.priority.get());
        let mut ranked: Vec<(String, f32)> = ids.into_iter().zip(scores).collect();
        ranked.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| priority(&b.0).cmp(&priority(&a.0)))
                .then_with(|| a.0.cmp(&b.0))
        });
        ranked.truncate(k);
        Ok(ranked)
    }

    /// Each active entity's tokens (cl100k_base), counted on the first call.
    pub fn token_counts(&self) -> Result<&HashMap<String, usize>, RetrievalError> {
        self.tokens
            .get_or_init(|| {
                let counter = TokenCounter::cl100k().map_err(|e| e.to_string())?;
                Ok(self
                    .entities
                    .values()
                    .map(|e| (e.entity_id.clone(), counter.count(&e.prompt_text())))
                    .collect())
            })
            .as_ref()
            .map_err(|e| RetrievalError::Tokenizer(e.clone()))
    }

    /// The settings.
    pub fn config(&self) -> &RetrievalConfig {
        &self.config
    }

    /// How many SITUATION embeddings the pipeline holds in memory (0 for a pipeline that
    /// searches a store's index: [`Pipeline::with_index`]).
    pub fn indexed(&self) -> usize {
        self.index.len()
    }

    /// Whether the SITUATION stage has anything to search.
    fn searchable(&self) -> bool {
        self.external.is_some() || !self.index.is_empty()
    }

    /// The nearest SITUATION entities of an audience, without threshold (for the semantic bank
    /// and `--explain`): `(entity_id, similarity)`, best first. Fails only when a store's index
    /// does ([`Pipeline::with_index`]).
    pub fn nearest(
        &self,
        query: &[f32],
        audience: &str,
        k: usize,
    ) -> Result<Vec<(String, f32)>, RetrievalError> {
        if let Some(external) = &self.external {
            return self.index_nearest(external, query, audience, k);
        }
        let mask: Vec<bool> = self
            .audiences
            .iter()
            .map(|a| a.iter().any(|x| x == audience))
            .collect();
        Ok(self
            .index
            .search(query, k, Some(&mask))
            .into_iter()
            .map(|h| (self.index.id(h.row).to_owned(), h.score))
            .collect())
    }

    /// The `k` best SITUATION entities of an audience for a message, without threshold:
    /// exactly [`Pipeline::nearest`] with one embedding per entity in dense mode; otherwise
    /// each entity's best view, plus in hybrid mode its lexical bonus. Best first, ties by id.
    /// Fails only when a store's index does ([`Pipeline::with_index`]).
    pub fn rank(
        &self,
        query: &[f32],
        message: &str,
        audience: &str,
        k: usize,
    ) -> Result<Vec<RankedHit>, RetrievalError> {
        let Some(pooled) = &self.pooled else {
            return Ok(self
                .nearest(query, audience, k)?
                .into_iter()
                .map(|(entity_id, score)| RankedHit {
                    entity_id,
                    score,
                    dense: score,
                    view: None,
                    lexical: None,
                    lexical_view: None,
                })
                .collect());
        };
        let n = pooled.entities.len();
        let allowed: Vec<bool> = pooled
            .audiences
            .iter()
            .map(|a| a.iter().any(|x| x == audience))
            .collect();
        let mut dense = vec![f32::NEG_INFINITY; n];
        let mut view: Vec<Option<&Option<String>>> = vec![None; n];
        for (row, score) in self.index.scores(query).into_iter().enumerate() {
            let (slot, v) = &pooled.rows[row];
            if score > dense[*slot] {
                dense[*slot] = score;
                view[*slot] = Some(v);
            }
        }
        let (lexical, lexical_doc) = match &pooled.lexical {
            Some((bm25, _)) => {
                let (scores, docs) = bm25.scores_with_docs(message);
                let max = scores
                    .iter()
                    .zip(&allowed)
                    .filter(|(_, ok)| **ok)
                    .map(|(s, _)| *s)
                    .fold(0.0f32, f32::max);
                let norm: Vec<f32> = if max > 0.0 {
                    scores.iter().map(|s| s / max).collect()
                } else {
                    vec![0.0; n]
                };
                (Some(norm), docs)
            }
            None => (None, Vec::new()),
        };
        let weight = self.config.lexical_weight;
        let score = |i: usize| dense[i] + lexical.as_ref().map_or(0.0, |l| weight * l[i]);
        let better = |a: &(f32, usize), b: &(f32, usize)| {
            b.0.total_cmp(&a.0)
                .then_with(|| pooled.entities[a.1].cmp(&pooled.entities[b.1]))
        };
        let mut order: Vec<(f32, usize)> = (0..n)
            .filter(|&i| allowed[i] && dense[i].is_finite())
            .map(|i| (score(i), i))
            .collect();
        if k < order.len() {
            if k > 0 {
                order.select_nth_unstable_by(k - 1, better);
            }
            order.truncate(k);
        }
        order.sort_by(better);
        Ok(order
            .into_iter()
            .map(|(s, i)| RankedHit {
                entity_id: pooled.entities[i].clone(),
                score: s,
                dense: dense[i],
                view: view[i].cloned().flatten(),
                lexical: lexical.as_ref().map(|l| l[i]),
                lexical_view: lexical_doc
                    .get(i)
                    .copied()
                    .flatten()
                    .and_then(|d| pooled.lexical.as_ref().and_then(|(_, v)| v.get(d)))
                    .cloned()
                    .flatten(),
            })
            .collect())
    }

    /// An entity the pipeline can load, by id (its text is what a context holds:
    /// [`assay_core::entity::Entity::prompt_text`]).
    pub fn entity(&self, entity_id: &str) -> Option<&Entity> {
        self.entities.get(entity_id)
    }

    /// The ids of the entities the pipeline can load (the active ones), in no order.
    pub fn entity_ids(&self) -> impl Iterator<Item = &str> {
        self.entities.keys().map(String::as_str)
    }

    /// The priority of an entity, if it is active.
    pub fn priority(&self, entity_id: &str) -> Option<u8> {
        self.entities.get(entity_id).map(|e| e.priority.get())
    }

    fn candidate(&self, entity: &Entity, stage: Stage, similarity: f32) -> RetrievedEntity {
        let priority = entity.priority.get();
        let priority_bonus = f32::from(priority) / 100.0 * self.config.priority_weight;
        RetrievedEntity {
            entity_id: entity.entity_id.clone(),
            entity_type: entity.entity_type,
            title: entity.title.clone(),
            stage,
            also: Vec::new(),
            similarity,
            priority,
            priority_bonus,
            final_score: similarity + priority_bonus,
            tokens: self
                .token_counts()
                .ok()
                .and_then(|t| t.get(&entity.entity_id).copied())
                .unwrap_or(0),
        }
    }

    /// Retrieves the context for `message` from a user of `audience` in `state`.
    /// `query` is the message's embedding; without one the semantic stage is skipped. Fails
    /// only when a store's index does ([`Pipeline::with_index`]).
    pub fn retrieve(
        &self,
        message: &str,
        query: Option<&[f32]>,
        state: &UserState,
        audience: &str,
    ) -> Result<Retrieval, RetrievalError> {
        let mut proposed: Vec<RetrievedEntity> = Vec::new();
        let mut stages = Vec::new();
        let mut dropped = Vec::new();
        let mut notes = Vec::new();
        let mut matches = Vec::new();
        if let Err(e) = self.token_counts() {
            notes.push(format!(
                "tokens not counted ({e}): the budget is not enforced"
            ));
        }
        let mut record = |stage: Stage, list: &[RetrievedEntity]| {
            stages.push(StageCandidates {
                stage,
                candidates: list
                    .iter()
                    .map(|e| (e.entity_id.clone(), e.similarity))
                    .collect(),
            });
        };

        // 1. ALWAYS
        let always: Vec<RetrievedEntity> = self
            .always
            .iter()
            .filter_map(|id| self.entities.get(id))
            .filter(|e| e.has_audience(audience))
            .map(|e| self.candidate(e, Stage::Always, 1.0))
            .collect();
        record(Stage::Always, &always);
        proposed.extend(always);

        // 2. STATE (audience applies here, unlike in the state bank)
        let triggered: Vec<RetrievedEntity> = self
            .state
            .evaluate(state)
            .iter()
            .filter_map(|id| self.entities.get(id))
            .filter(|e| e.has_audience(audience))
            .map(|e| self.candidate(e, Stage::State, 1.0))
            .collect();
        record(Stage::State, &triggered);
        proposed.extend(triggered);

        // 3. Pattern rules: crisis entities regardless of audience (safety first), keywords by audience.
        let mut crisis_ids: Vec<String> = Vec::new();
        if let Some(patterns) = &self.patterns {
            let m = patterns.match_message(message);
            let mut crisis = Vec::new();
            for id in m.crisis_matches.iter().flat_map(|c| &c.entities) {
                match self.entities.get(id) {
                    Some(e) if !crisis_ids.contains(id) => {
                        crisis_ids.push(id.clone());
                        crisis.push(self.candidate(e, Stage::Crisis, 1.0));
                    }
                    Some(_) => {}
                    None => dropped.push(Dropped {
                        entity_id: id.clone(),
                        stage: Stage::Crisis,
                        reason: DropReason::Unavailable,
                    }),
                }
            }
            record(Stage::Crisis, &crisis);
            proposed.extend(crisis);
            let mut keyword = Vec::new();
            for k in &m.keyword_matches {
                match self
                    .entities
                    .get(&k.entity)
                    .filter(|e| e.has_audience(audience))
                {
                    Some(e) => keyword.push(self.candidate(e, Stage::Keyword, 1.0)),
                    None => dropped.push(Dropped {
                        entity_id: k.entity.clone(),
                        stage: Stage::Keyword,
                        reason: DropReason::Unavailable,
                    }),
                }
            }
            record(Stage::Keyword, &keyword);
            proposed.extend(keyword);
        }

        // 4. SITUATION semantic search
        match query {
            Some(q) if self.searchable() => {
                let fetched = self.rank(
                    q,
                    message,
                    audience,
                    self.config.top_k * self.config.fetch_factor,
                )?;
                if self.pooled.is_some() {
                    matches.clone_from(&fetched);
                }
                let mut semantic = Vec::new();
                for hit in fetched {
                    let (id, similarity) = (hit.entity_id, hit.score);
                    let Some(e) = self.entities.get(&id) else {
                        continue;
                    };
                    if similarity < self.config.score_threshold {
                        dropped.push(Dropped {
                            entity_id: id,
                            stage: Stage::Semantic,
                            reason: DropReason::Threshold {
                                similarity,
                                threshold: self.config.score_threshold,
                            },
                        });
                    } else if semantic.len() >= self.config.top_k {
                        dropped.push(Dropped {
                            entity_id: id,
                            stage: Stage::Semantic,
                            reason: DropReason::TopK { similarity },
                        });
                    } else {
                        semantic.push(self.candidate(e, Stage::Semantic, similarity));
                    }
                }
                record(Stage::Semantic, &semantic);
                proposed.extend(semantic);
            }
            Some(_) => notes
                .push("no SITUATION entity has an embedding: semantic stage skipped".to_owned()),
            None => notes.push("no query embedding: semantic stage skipped".to_owned()),
        }

        // 5. Dedupe (keep the best score, remember the other stages) and rank, crisis first.
        let mut unique: Vec<RetrievedEntity> = Vec::new();
        for e in proposed {
            if let Some(kept) = unique.iter_mut().find(|k| k.entity_id == e.entity_id) {
                let (winner, loser) = if e.final_score > kept.final_score {
                    (e, kept.clone())
                } else {
                    (kept.clone(), e)
                };
                let mut winner = winner;
                for s in loser.also.iter().copied().chain([loser.stage]) {
                    if s != winner.stage && !winner.also.contains(&s) {
                        winner.also.push(s);
                    }
                }
                dropped.push(Dropped {
                    entity_id: loser.entity_id.clone(),
                    stage: loser.stage,
                    reason: DropReason::Duplicate {
                        kept_as: winner.stage,
                    },
                });
                *kept = winner;
            } else {
                unique.push(e);
            }
        }
        let crisis_rank = |e: &RetrievedEntity| crisis_ids.iter().position(|c| *c == e.entity_id);
        unique.sort_by(|a, b| match (crisis_rank(a), crisis_rank(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => b
                .final_score
                .total_cmp(&a.final_score)
                .then_with(|| a.entity_id.cmp(&b.entity_id)),
        });

        // 6. Token budget.
        let budget = self.config.max_tokens_budget;
        let mut taken: Vec<RetrievedEntity> = Vec::new();
        let mut used = 0usize;
        for e in unique {
            if used + e.tokens <= budget {
                used += e.tokens;
                taken.push(e);
                continue;
            }
            if matches!(e.entity_type, EntityType::Guardrail | EntityType::Handler) {
                // Displace KNOWLEDGE entities, last first, until it fits.
                let mut displaced = Vec::new();
                let mut freed = 0usize;
                for (i, k) in taken.iter().enumerate().rev() {
                    if used - freed + e.tokens <= budget {
                        break;
                    }
                    if k.entity_type == EntityType::Knowledge && crisis_rank(k).is_none() {
                        freed += k.tokens;
                        displaced.push(i);
                    }
                }
                if used - freed + e.tokens <= budget {
                    for i in displaced {
                        let k = taken.remove(i);
                        dropped.push(Dropped {
                            entity_id: k.entity_id,
                            stage: k.stage,
                            reason: DropReason::Displaced {
                                by: e.entity_id.clone(),
                            },
                        });
                    }
                    used = used - freed + e.tokens;
                    taken.push(e);
                    continue;
                }
            }
            dropped.push(Dropped {
                entity_id: e.entity_id.clone(),
                stage: e.stage,
                reason: DropReason::Budget {
                    tokens: e.tokens,
                    used,
                    budget,
                },
            });
        }
        Ok(Retrieval {
            entities: taken,
            stages,
            dropped,
            tokens_used: used,
            token_budget: budget,
            notes,
            matches,
        })
    }
}

#[cfg(test)]
mod tests;
