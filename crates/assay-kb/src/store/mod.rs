//! The versioned entity store: the admin API of 003 §4 over the schema of 003 §1.
//!
//! [`KbStore`] extends [`KnowledgeBase`] (which reads the current version of every entity) with
//! writes. Every write that changes an entity adds a new version and supersedes the old one;
//! nothing is deleted. [`SqliteStore`] is the SQLite backend; `PgStore` (cargo feature
//! `postgres`) the PostgreSQL + pgvector one, with the same behaviour.
//!
//! Embeddings are kept on the current version together with the model that made them and a
//! hash of the text they embed ([`Entity::embedding_text`]); an embedding is fresh only while
//! both still match (see [`Staleness`]).

#[cfg(feature = "postgres")]
mod postgres;
mod rows;
mod schema;
mod sqlite;
mod sqlite_state;

use std::collections::BTreeMap;

use assay_core::entity::{Entity, EntityType, LoadMode, Priority};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{EntityFilter, KbError, KnowledgeBase, VersionConflict};

#[cfg(feature = "postgres")]
pub use postgres::{
    HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH, HNSW_M, PG_SCHEMA_VERSION, PgStore, connection_config,
    hnsw_index_sql, is_postgres_url,
};
pub use schema::SCHEMA_VERSION;
pub use sqlite::SqliteStore;

/// Who makes a change, and when: written to the new version's `created_by` and `created_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The author (a user name, `"import"`, …).
    pub by: String,
    /// When the change is made.
    pub at: DateTime<Utc>,
    /// The version an update or deactivation was made from: the store checks it against the
    /// current version inside its write transaction and refuses a stale edit with
    /// [`KbError::Conflict`], so two writers (two processes included) never silently overwrite
    /// each other. `None`: no check. Creation and import ignore it.
    pub expected_version: Option<u32>,
}

impl Edit {
    /// A change by `by` at `at`.
    pub fn new(by: impl Into<String>, at: DateTime<Utc>) -> Edit {
        Edit {
            by: by.into(),
            at,
            expected_version: None,
        }
    }

    /// This change, made from version `version` of the entity (see
    /// [`Edit::expected_version`]).
    #[must_use]
    pub fn expecting(mut self, version: Option<u32>) -> Edit {
        self.expected_version = version;
        self
    }

    /// [`KbError::Conflict`] unless `current` is the version this change was made from.
    pub fn check_version(&self, entity_id: &str, current: u32) -> Result<(), KbError> {
        match self.expected_version {
            Some(expected) if expected != current => Err(KbError::Conflict(VersionConflict {
                entity_id: entity_id.to_owned(),
                expected,
                current,
            })),
            _ => Ok(()),
        }
    }

    /// A change by `by`, now (the system clock).
    pub fn now(by: impl Into<String>) -> Edit {
        Edit::new(by, Utc::now())
    }
}

/// The current version of an entity, with its row metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntity {
    /// The row id of this version (a UUID v4).
    pub id: String,
    /// The entity.
    pub entity: Entity,
    /// The version number, from 1.
    pub version: u32,
    /// The row id of the version this one replaced.
    pub previous_version_id: Option<String>,
    /// How often retrieval returned the entity (carried over from version to version).
    pub retrieval_count: u64,
    /// When this version was written.
    pub created_at: DateTime<Utc>,
    /// When this row last changed (written or superseded).
    pub updated_at: DateTime<Utc>,
    /// Who wrote this version.
    pub created_by: String,
    /// The model of the stored embedding, if any (it may be stale: see
    /// [`KbStore::embedding_status`]).
    pub embedding_model: Option<String>,
}

/// One version of an entity, as [`KbStore::history`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityVersion {
    /// The row id of this version.
    pub id: String,
    /// The version number, from 1.
    pub version: u32,
    /// The row id of the version this one replaced.
    pub previous_version_id: Option<String>,
    /// Whether this is the current version.
    pub is_current: bool,
    /// The entity as this version defined it (`is_active` included, although superseded rows
    /// are stored inactive).
    pub entity: Entity,
    /// When this version was written.
    pub created_at: DateTime<Utc>,
    /// When this row last changed (written or superseded).
    pub updated_at: DateTime<Utc>,
    /// Who wrote this version.
    pub created_by: String,
    /// The fields this version changed from the previous one, in schema order (empty for
    /// version 1).
    pub changed_fields: Vec<String>,
}

/// The fields an update may change (003 §4 `KBEntityUpdate`); `None` leaves a field as it is.
///
/// The optional fields take `Some(None)` to clear them: in a YAML or JSON update an explicit
/// `null` (`concept_summary: null`, or `--set concept_summary=null`), as in a JSON merge patch
/// (RFC 7386); a field left out is left alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(clippy::option_option)] // serde's idiom for "left out" vs "null"
pub struct EntityUpdate {
    /// New title.
    #[serde(
        default,
        deserialize_with = "required",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<String>,
    /// New concept summary.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub concept_summary: Option<Option<String>>,
    /// New recognition text.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub recognition: Option<Option<String>>,
    /// New keywords.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub keywords: Option<Option<String>>,
    /// New guidance (do).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub guidance_do: Option<Option<String>>,
    /// New guidance (don't).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub guidance_dont: Option<Option<String>>,
    /// New examples.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub examples: Option<Option<String>>,
    /// New red flags.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub red_flags: Option<Option<String>>,
    /// New load mode.
    #[serde(
        default,
        deserialize_with = "required",
        skip_serializing_if = "Option::is_none"
    )]
    pub load_mode: Option<LoadMode>,
    /// New priority.
    #[serde(
        default,
        deserialize_with = "required",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority: Option<Priority>,
    /// New state conditions.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    pub state_conditions: Option<Option<Map<String, Value>>>,
    /// New audiences.
    #[serde(
        default,
        deserialize_with = "required",
        skip_serializing_if = "Option::is_none"
    )]
    pub audience_types: Option<Vec<String>>,
    /// Activate (`true`) or deactivate (`false`).
    #[serde(
        default,
        deserialize_with = "required",
        skip_serializing_if = "Option::is_none"
    )]
    pub is_active: Option<bool>,
}

impl EntityUpdate {
    /// `entity` with this update applied.
    pub fn apply(&self, entity: &Entity) -> Entity {
        let EntityUpdate {
            title,
            concept_summary,
            recognition,
            keywords,
            guidance_do,
            guidance_dont,
            examples,
            red_flags,
            load_mode,
            priority,
            state_conditions,
            audience_types,
            is_active,
        } = self;
        let text = |new: &Option<Option<String>>, old: &Option<String>| match new {
            Some(value) => value.clone(),
            None => old.clone(),
        };
        Entity {
            title: title.clone().unwrap_or_else(|| entity.title.clone()),
            concept_summary: text(concept_summary, &entity.concept_summary),
            recognition: text(recognition, &entity.recognition),
            keywords: text(keywords, &entity.keywords),
            guidance_do: text(guidance_do, &entity.guidance_do),
            guidance_dont: text(guidance_dont, &entity.guidance_dont),
            examples: text(examples, &entity.examples),
            red_flags: text(red_flags, &entity.red_flags),
            load_mode: load_mode.unwrap_or(entity.load_mode),
            priority: priority.unwrap_or(entity.priority),
            state_conditions: match state_conditions {
                Some(value) => value.clone(),
                None => entity.state_conditions.clone(),
            },
            audience_types: audience_types
                .clone()
                .unwrap_or_else(|| entity.audience_types.clone()),
            is_active: is_active.unwrap_or(entity.is_active),
            ..entity.clone()
        }
    }
}

/// A required field: left out (`None`) or given a value, never `null`.
fn required<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    match Option::<T>::deserialize(deserializer)? {
        Some(value) => Ok(Some(value)),
        None => Err(serde::de::Error::custom(
            "null is not allowed here: the field is required and cannot be cleared",
        )),
    }
}

/// A field that may be left out (`None`), set to `null` (`Some(None)`) or given a value.
#[allow(clippy::option_option)]
fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// The names of the fields (content and configuration, not `entity_id`) whose values differ
/// between `old` and `new`, in schema order.
pub fn changed_fields(old: &Entity, new: &Entity) -> Vec<&'static str> {
    // Destructured so that a new `Entity` field does not compile until it is compared here.
    let Entity {
        entity_id: _,
        entity_type,
        title,
        subtype,
        concept_summary,
        recognition,
        keywords,
        guidance_do,
        guidance_dont,
        examples,
        red_flags,
        load_mode,
        priority,
        state_conditions,
        audience_types,
        source_author,
        source_title,
        source_year,
        is_active,
        editable_by,
    } = new;
    let mut changed = Vec::new();
    macro_rules! compare {
        ($($field:ident),*) => {
            $(if old.$field != *$field {
                changed.push(stringify!($field));
            })*
        };
    }
    compare!(
        entity_type,
        subtype,
        title,
        concept_summary,
        recognition,
        keywords,
        guidance_do,
        guidance_dont,
        examples,
        red_flags,
        load_mode,
        priority,
        state_conditions,
        audience_types,
        source_author,
        source_title,
        source_year,
        is_active,
        editable_by
    );
    changed
}

/// What [`KbStore::import`] did, entity ids by outcome (each list sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    /// New entities.
    pub created: Vec<String>,
    /// Entities whose content or configuration changed (a new version each).
    pub updated: Vec<String>,
    /// Entities already stored as they are in the files.
    pub unchanged: Vec<String>,
    /// Active entities missing from the files, now deactivated (a new version each).
    pub deactivated: Vec<String>,
}

/// Whether an entity's stored embedding can be used with a model (see
/// [`KbStore::embedding_status`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Staleness {
    /// Made by this model from the entity's current embedding text.
    Fresh,
    /// No embedding is stored.
    Missing,
    /// Made by another model.
    OtherModel {
        /// The model that made it.
        model: String,
    },
    /// Made from text that has changed since.
    TextChanged,
}

impl Staleness {
    /// Whether the embedding can be used as it is.
    pub fn is_fresh(&self) -> bool {
        *self == Staleness::Fresh
    }
}

/// Embedding coverage of the active entities for one model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EmbeddingCoverage {
    /// The model.
    pub model: String,
    /// Active entities with a fresh embedding.
    pub fresh: usize,
    /// Active entities with a stale embedding (another model, or changed text).
    pub stale: usize,
    /// Active entities without an embedding.
    pub missing: usize,
}

/// Statistics of a store (003 §4 `/stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KbStats {
    /// Entities (current versions), active or not.
    pub entities: usize,
    /// Active entities.
    pub active: usize,
    /// Inactive entities.
    pub inactive: usize,
    /// Stored versions of all entities (rows, history included).
    pub versions: usize,
    /// Active entities by type.
    pub by_type: BTreeMap<EntityType, usize>,
    /// Active entities by load mode.
    pub by_load_mode: BTreeMap<LoadMode, usize>,
    /// Embedding coverage for the model asked about.
    pub embeddings: EmbeddingCoverage,
    /// Retrievals of all entities.
    pub total_retrievals: u64,
    /// The most retrieved entities (at most [`KbStats::TOP_RETRIEVED`]), most first, then by
    /// id; entities never retrieved are left out.
    pub top_retrieved: Vec<(String, u64)>,
}

impl KbStats {
    /// How many entities [`KbStats::top_retrieved`] lists at most.
    pub const TOP_RETRIEVED: usize = 10;
}

/// The embedding of one retrieval view of an entity ([`Entity::views`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ViewEmbedding {
    /// The entity.
    pub entity_id: String,
    /// The view's key (`title`, `recognition.1`, `keywords`, `example.1`, …).
    pub view: String,
    /// [`view_text_hash`] of the text it was made from.
    pub text_hash: String,
    /// The vector.
    pub vector: Vec<f32>,
}

/// The SHA-256 (hex) of a view's text, stored beside its embedding.
pub fn view_text_hash(text: &str) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(text.as_bytes()))
}

/// A knowledge base that can be edited, keeping every version (003 §1, §4).
///
/// Reads through [`KnowledgeBase`] see the current version of each entity. Writes that change
/// an entity add a version; a write that changes nothing adds none. Nothing is ever deleted:
/// [`KbStore::deactivate`] is a soft delete.
pub trait KbStore: KnowledgeBase {
    /// The current version of an entity, with its metadata.
    fn get_stored(&self, entity_id: &str) -> Result<Option<StoredEntity>, KbError>;

    /// Adds a new entity as version 1. Fails with [`KbError::AlreadyExists`] when the id is
    /// taken, even by an inactive entity.
    fn create(&self, entity: &Entity, edit: &Edit) -> Result<StoredEntity, KbError>;

    /// Applies `update` to the current version; when anything changes, writes it as a new
    /// version. Fails with [`KbError::NotFound`] for an unknown id.
    fn update(
        &self,
        entity_id: &str,
        update: &EntityUpdate,
        edit: &Edit,
    ) -> Result<StoredEntity, KbError>;

    /// Soft-deletes an entity: a new version with `is_active = false` (none when it is already
    /// inactive). Reactivate with an update setting `is_active`.
    fn deactivate(&self, entity_id: &str, edit: &Edit) -> Result<StoredEntity, KbError>;

    /// Every version of an entity, oldest first. Fails with [`KbError::NotFound`] for an
    /// unknown id.
    fn history(&self, entity_id: &str) -> Result<Vec<EntityVersion>, KbError>;

    /// Makes the store match `entities` (a project's `kb/` files, the source of truth), in one
    /// transaction: creates new ids, versions changed entities (content and configuration are
    /// compared; embeddings and statistics are not), leaves unchanged ones alone, and
    /// deactivates active entities that `entities` lacks.
    fn import(&self, entities: &[Entity], edit: &Edit) -> Result<ImportReport, KbError>;

    /// The current version of every entity, active or not, by type (schema order) then id:
    /// what a `kb/` file would hold.
    fn export(&self) -> Result<Vec<Entity>, KbError>;

    /// Stores the embedding `model` made of the entity's current embedding text. Does not add a
    /// version.
    fn set_embedding(&self, entity_id: &str, model: &str, vector: &[f32]) -> Result<(), KbError>;

    /// Whether each entity passing `filter` has a fresh embedding for `model`, in
    /// [`KnowledgeBase::list`] order. An embedding is stale when it was made by another model
    /// or from another text than the entity's current [`Entity::embedding_text`].
    fn embedding_status(
        &self,
        filter: &EntityFilter,
        model: &str,
    ) -> Result<Vec<(String, Staleness)>, KbError>;

    /// The fresh embeddings of `model` for the entities passing `filter`, in
    /// [`KnowledgeBase::list`] order. Entities without one are left out.
    fn current_embeddings(
        &self,
        filter: &EntityFilter,
        model: &str,
    ) -> Result<Vec<(String, Vec<f32>)>, KbError>;

    /// Every stored view embedding of `model` (fresh or not: compare `text_hash` with
    /// [`view_text_hash`] of the entity's current view text).
    fn view_embeddings(&self, model: &str) -> Result<Vec<ViewEmbedding>, KbError>;

    /// Stores view embeddings of `model` (replacing those of the same entity and view), and
    /// removes `model`'s views of the listed `(entity_id, view)` pairs that `rows` does not
    /// hold, in one transaction. Does not add a version.
    fn set_view_embeddings(
        &self,
        model: &str,
        rows: &[ViewEmbedding],
        remove: &[(String, String)],
    ) -> Result<(), KbError>;

    /// Counts one retrieval for each id (an id listed twice counts twice). Does not add a
    /// version. Returns how many retrievals were counted (unknown ids count none).
    fn record_retrievals(&self, entity_ids: &[String]) -> Result<usize, KbError>;

    /// Statistics, with embedding coverage for `embedding_model`.
    fn stats(&self, embedding_model: &str) -> Result<KbStats, KbError>;
}

/// How [`EmbeddingIndex::search_embeddings`] searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMethod {
    /// Through the approximate nearest-neighbour index, exploring `ef_search` candidates (at
    /// least the limit).
    Index {
        /// HNSW's `ef_search`.
        ef_search: u32,
    },
    /// Every matching embedding scored, in the database: exact, and slow on large tables.
    Exact,
}

/// A similarity search of the stored entity embeddings: the current, active entities with an
/// embedding of `model` (of the query's dimension), optionally only those of one load mode and
/// audience, nearest first by cosine distance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmbeddingSearch<'a> {
    /// The model whose embeddings are searched.
    pub model: &'a str,
    /// The query vector.
    pub query: &'a [f32],
    /// At most this many rows.
    pub limit: usize,
    /// Only entities of this load mode.
    pub load_mode: Option<LoadMode>,
    /// Only entities for this audience.
    pub audience: Option<&'a str>,
    /// Index or exact.
    pub method: SearchMethod,
}

/// An entity an [`EmbeddingSearch`] found, with its stored embedding as it is (whether it is
/// fresh is the caller's to check, against [`embedding_text_hash`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingHit {
    /// The entity.
    pub entity_id: String,
    /// [`embedding_text_hash`] of the text the embedding was made from.
    pub text_hash: String,
    /// The stored vector.
    pub vector: Vec<f32>,
}

/// The hash stored beside an entity's embedding: the SHA-256 (hex) of
/// [`Entity::embedding_text`]. The embedding is fresh while it equals the hash of the entity's
/// current text.
pub fn embedding_text_hash(entity: &Entity) -> String {
    rows::text_hash(entity)
}

/// An approximate nearest-neighbour index over a store's current entity embeddings: the
/// PostgreSQL store's HNSW indexes (`PgStore`). A run takes the semantic stage's candidates from
/// it instead of scoring every embedding when `[semantic] search` says so.
pub trait EmbeddingIndex: Send + Sync + std::fmt::Debug {
    /// What searches, for records: `PostgreSQL HNSW (pgvector 0.8.5)`.
    fn describe(&self) -> String;

    /// Whether an index covers embeddings of `dimension` (pgvector indexes at most 2,000
    /// dimensions; larger ones are searched exactly).
    fn has_index(&self, dimension: usize) -> Result<bool, KbError>;

    /// The dimension of `model`'s stored embeddings (of current entities), if there are any.
    fn embedding_dimension(&self, model: &str) -> Result<Option<usize>, KbError>;

    /// The nearest stored embeddings to `search.query`, nearest first (an index search may
    /// return its rows slightly out of order; rescore them).
    fn search_embeddings(&self, search: &EmbeddingSearch<'_>)
    -> Result<Vec<EmbeddingHit>, KbError>;
}

/// A whole store, entities and user state: what a project opens, whichever the backend
/// ([`SqliteStore`], or `PgStore` with the `postgres` feature).
pub trait KbBackend: KbStore + crate::StateStore + std::fmt::Debug {}

impl<T: KbStore + crate::StateStore + std::fmt::Debug> KbBackend for T {}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity() -> Entity {
        serde_json::from_value(serde_json::json!({
            "entity_id": "e", "entity_type": "KNOWLEDGE", "title": "E", "keywords": "a, b",
        }))
        .unwrap()
    }

    #[test]
    fn empty_update_changes_nothing() {
        let e = entity();
        assert_eq!(EntityUpdate::default().apply(&e), e);
    }

    #[test]
    fn update_overrides_given_fields() {
        let e = entity();
        let update: EntityUpdate =
            serde_json::from_str(r#"{"title":"New","priority":90,"is_active":false}"#).unwrap();
        let new = update.apply(&e);
        assert_eq!(changed_fields(&e, &new), ["title", "priority", "is_active"]);
        assert_eq!(new.keywords.as_deref(), Some("a, b"));
    }

    #[test]
    fn update_rejects_unknown_fields_and_bad_priority() {
        assert!(serde_json::from_str::<EntityUpdate>(r#"{"titel":"x"}"#).is_err());
        assert!(serde_json::from_str::<EntityUpdate>(r#"{"priority":101}"#).is_err());
    }

    #[test]
    fn condition_key_order_is_not_a_change() {
        let mut a = entity();
        a.state_conditions = serde_json::from_str(r#"{"x":{"eq":1},"y":{"gte":2}}"#).unwrap();
        let mut b = a.clone();
        b.state_conditions = serde_json::from_str(r#"{"y":{"gte":2},"x":{"eq":1}}"#).unwrap();
        assert!(changed_fields(&a, &b).is_empty());
    }
}
