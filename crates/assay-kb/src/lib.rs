//! The assay knowledge base: the [`KnowledgeBase`] interface that retrieval reads, loading
//! entities from a project's `kb/` folder, and the versioned store.
//!
//! A project's `kb/` files (JSON arrays or YAML lists of entities, 003 §4 fields) are the source
//! of truth. [`load_dir`] reads and validates them into a [`MemoryKb`].
//!
//! The [`store`] module holds the [`KbStore`] trait (the admin API of 003 §4: create, update,
//! deactivate, version history, import and export, embeddings, retrieval counts, statistics) and
//! [`SqliteStore`], its SQLite backend. Every change to an entity writes a new version and
//! nothing is deleted (003 §1). The [`user_state`] module keeps the per-user facts that STATE
//! conditions read (003 §5) in the same database.
//!
//! ```
//! use assay_kb::{EntityFilter, KnowledgeBase, MemoryKb};
//! let entity: assay_core::entity::Entity = serde_json::from_str(
//!     r#"{"entity_id":"gray_rock","entity_type":"KNOWLEDGE","title":"Gray rock"}"#).unwrap();
//! let kb = MemoryKb::new(vec![entity]).unwrap();
//! assert_eq!(kb.list(&EntityFilter::default()).unwrap().len(), 1);
//! ```
//!
//! The store keeps every version:
//!
//! ```
//! use assay_kb::{Edit, EntityUpdate, KbStore, KnowledgeBase, SqliteStore};
//! let store = SqliteStore::in_memory().unwrap();
//! let entity = serde_json::from_str(
//!     r#"{"entity_id":"gray_rock","entity_type":"KNOWLEDGE","title":"Gray rock"}"#).unwrap();
//! store.create(&entity, &Edit::now("admin")).unwrap();
//! let update = EntityUpdate { title: Some("Gray rock method".into()), ..EntityUpdate::default() };
//! let stored = store.update("gray_rock", &update, &Edit::now("admin")).unwrap();
//! assert_eq!(stored.version, 2);
//! assert_eq!(store.history("gray_rock").unwrap()[1].changed_fields, ["title"]);
//! assert_eq!(store.get("gray_rock").unwrap().unwrap().title, "Gray rock method");
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod datafile;
mod files;
pub mod store;
mod timestamp;
pub mod user_state;

use std::collections::HashMap;

use assay_core::condition::{ConditionError, Conditions};
use assay_core::entity::{Entity, EntityType, LoadMode};

pub use files::{LoadedKb, fingerprint, load_dir};
pub use store::{
    Edit, EmbeddingHit, EmbeddingIndex, EmbeddingSearch, EntityUpdate, EntityVersion, ImportReport,
    KbBackend, KbStats, KbStore, SearchMethod, SqliteStore, Staleness, StoredEntity, ViewEmbedding,
    embedding_text_hash, view_text_hash,
};
#[cfg(feature = "postgres")]
pub use store::{PgStore, is_postgres_url};
pub use user_state::StateStore;

/// Errors of a knowledge base.
#[derive(Debug, thiserror::Error)]
pub enum KbError {
    /// A `kb/` file is not valid.
    #[error(transparent)]
    Data(#[from] datafile::DataError),
    /// Two entities share an id.
    #[error("duplicate entity_id `{0}`")]
    Duplicate(String),
    /// A store backend failed, or holds data it cannot read.
    #[error("knowledge-base store: {0}")]
    Store(String),
    /// No entity has this id.
    #[error("no entity `{0}`")]
    NotFound(String),
    /// An entity with this id exists already (active or not).
    #[error("entity `{0}` already exists")]
    AlreadyExists(String),
    /// An edit was made from a version that is no longer the current one.
    #[error(transparent)]
    Conflict(#[from] VersionConflict),
    /// An entity breaks a rule every entity must meet.
    #[error("entity `{entity_id}`: {problem}")]
    InvalidEntity {
        /// The entity.
        entity_id: String,
        /// What is wrong.
        problem: InvalidEntity,
    },
    /// A request to the store is not valid (an embedding, a user-state update, a rating).
    #[error("{0}")]
    Invalid(String),
    /// The SQLite backend failed.
    #[error("knowledge-base store: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// An edit made from a version of an entity that is no longer the current one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "entity `{entity_id}` is at version {current}, not version {expected} that this edit was made from; reload it and edit again"
)]
pub struct VersionConflict {
    /// The entity.
    pub entity_id: String,
    /// The version the edit was made from.
    pub expected: u32,
    /// The current version.
    pub current: u32,
}

impl KbError {
    /// Whether the store itself failed (infrastructure, exit code 3) rather than the input
    /// being wrong (bad input, exit code 2).
    pub fn is_infrastructure(&self) -> bool {
        matches!(self, KbError::Store(_) | KbError::Sqlite(_))
    }
}

/// Why an entity cannot be loaded or stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidEntity {
    /// The `entity_id` is empty.
    #[error("entity_id is empty")]
    EmptyId,
    /// The `entity_id` breaks the id rule ([`check_entity_id`]).
    #[error("entity_id `{id}`: {why}")]
    BadId {
        /// The id as given (cut to 60 characters for the message).
        id: String,
        /// Which part of the rule it breaks.
        why: String,
    },
    /// The title is empty.
    #[error("title is empty")]
    EmptyTitle,
    /// The `state_conditions` do not parse.
    #[error("state_conditions: {0}")]
    Conditions(#[from] ConditionError),
}

/// The longest `entity_id`, in bytes of UTF-8: with `.yaml` and a temporary suffix it still
/// names a file on every common file system (255 bytes a name).
pub const MAX_ENTITY_ID_BYTES: usize = 128;

/// The id rule: 1 to [`MAX_ENTITY_ID_BYTES`] bytes of letters, digits, `_`, `-` and `.`
/// (letters and digits of any script), not starting with `.`. An id names its file
/// (`kb/<entity_id>.yaml`) and appears in URLs, so nothing else is allowed.
pub fn check_entity_id(id: &str) -> Result<(), InvalidEntity> {
    if id.trim().is_empty() {
        return Err(InvalidEntity::EmptyId);
    }
    let bad = |why: String| {
        let shown: String = id.chars().take(60).collect();
        let shown = if shown.len() < id.len() {
            format!("{shown}…")
        } else {
            shown
        };
        Err(InvalidEntity::BadId { id: shown, why })
    };
    if id.len() > MAX_ENTITY_ID_BYTES {
        return bad(format!(
            "is {} bytes long; ids are at most {MAX_ENTITY_ID_BYTES} bytes of UTF-8",
            id.len()
        ));
    }
    if id.starts_with('.') {
        return bad("must not start with `.`".into());
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return bad(format!(
            "{c:?} is not allowed; use letters, digits, `_`, `-` and `.`"
        ));
    }
    Ok(())
}

/// Checks the rules every entity must meet (the id rule of [`check_entity_id`], a non-empty
/// title, valid `state_conditions`) and returns its parsed conditions.
pub fn check_entity(entity: &Entity) -> Result<Option<Conditions>, InvalidEntity> {
    check_entity_id(&entity.entity_id)?;
    if entity.title.trim().is_empty() {
        return Err(InvalidEntity::EmptyTitle);
    }
    Ok(entity
        .state_conditions
        .as_ref()
        .map(Conditions::parse)
        .transpose()?)
}

/// Which entities to list. Every `None` matches all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntityFilter {
    /// Only this type.
    pub entity_type: Option<EntityType>,
    /// Only this load mode.
    pub load_mode: Option<LoadMode>,
    /// Only active (`true`) or inactive (`false`) entities.
    pub active: Option<bool>,
    /// Only entities for this audience.
    pub audience: Option<String>,
}

impl EntityFilter {
    /// Active entities of one load mode.
    pub fn active(load_mode: LoadMode) -> EntityFilter {
        EntityFilter {
            load_mode: Some(load_mode),
            active: Some(true),
            ..EntityFilter::default()
        }
    }

    /// Whether `entity` passes the filter.
    pub fn accepts(&self, entity: &Entity) -> bool {
        self.entity_type.is_none_or(|t| entity.entity_type == t)
            && self.load_mode.is_none_or(|m| entity.load_mode == m)
            && self.active.is_none_or(|a| entity.is_active == a)
            && self
                .audience
                .as_deref()
                .is_none_or(|a| entity.has_audience(a))
    }
}

/// Read access to the current version of every entity.
pub trait KnowledgeBase: Send + Sync {
    /// The entity with this id, if any.
    fn get(&self, entity_id: &str) -> Result<Option<Entity>, KbError>;

    /// Entities passing `filter`, by priority (highest first), then id.
    fn list(&self, filter: &EntityFilter) -> Result<Vec<Entity>, KbError>;

    /// Whether an entity with this id exists (active or not).
    fn contains(&self, entity_id: &str) -> Result<bool, KbError> {
        Ok(self.get(entity_id)?.is_some())
    }
}

/// A knowledge base held in memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryKb {
    entities: Vec<Entity>,
    index: HashMap<String, usize>,
}

impl MemoryKb {
    /// Builds a knowledge base; entity ids must be unique.
    pub fn new(entities: Vec<Entity>) -> Result<MemoryKb, KbError> {
        let mut index = HashMap::with_capacity(entities.len());
        for (i, e) in entities.iter().enumerate() {
            if index.insert(e.entity_id.clone(), i).is_some() {
                return Err(KbError::Duplicate(e.entity_id.clone()));
            }
        }
        Ok(MemoryKb { entities, index })
    }

    /// Every entity, in load order.
    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }
}

impl KnowledgeBase for MemoryKb {
    fn get(&self, entity_id: &str) -> Result<Option<Entity>, KbError> {
        Ok(self.index.get(entity_id).map(|i| self.entities[*i].clone()))
    }

    fn list(&self, filter: &EntityFilter) -> Result<Vec<Entity>, KbError> {
        let mut out: Vec<Entity> = self
            .entities
            .iter()
            .filter(|e| filter.accepts(e))
            .cloned()
            .collect();
        out.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.entity_id.cmp(&b.entity_id))
        });
        Ok(out)
    }

    fn contains(&self, entity_id: &str) -> Result<bool, KbError> {
        Ok(self.index.contains_key(entity_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_rule() {
        for ok in [
            "gray_rock",
            "a",
            "v1.2-b",
            "séance",
            "日本語",
            &"x".repeat(128),
        ] {
            assert_eq!(check_entity_id(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_entity_id(" "), Err(InvalidEntity::EmptyId));
        for (bad, why) in [
            ("x".repeat(129), "129 bytes"),
            ("é".repeat(65), "130 bytes"),
            ("é".repeat(126), "252 bytes"),
            (".hidden".into(), "start with `.`"),
            ("a/b".into(), "'/' is not allowed"),
            ("a b".into(), "' ' is not allowed"),
            ("a:b".into(), "':' is not allowed"),
        ] {
            let e = check_entity_id(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.starts_with("entity_id `"), "{e}");
            assert!(e.len() < 200, "a long id is cut in the message: {e}");
        }
    }

    fn entity(id: &str, mode: &str, priority: u8, audience: &[&str], active: bool) -> Entity {
        serde_json::from_value(serde_json::json!({
            "entity_id": id, "entity_type": "KNOWLEDGE", "title": id, "load_mode": mode,
            "priority": priority, "audience_types": audience, "is_active": active,
        }))
        .unwrap()
    }

    #[test]
    fn filters_and_orders_by_priority() {
        let kb = MemoryKb::new(vec![
            entity("a", "ALWAYS", 50, &["PARENT"], true),
            entity("b", "ALWAYS", 90, &["PARENT", "CLINICIAN"], true),
            entity("c", "ALWAYS", 99, &["CLINICIAN"], true),
            entity("d", "ALWAYS", 99, &["PARENT"], false),
            entity("e", "SITUATION", 99, &["PARENT"], true),
        ])
        .unwrap();
        let filter = EntityFilter {
            audience: Some("PARENT".into()),
            ..EntityFilter::active(LoadMode::Always)
        };
        let ids: Vec<_> = kb
            .list(&filter)
            .unwrap()
            .into_iter()
            .map(|e| e.entity_id)
            .collect();
        assert_eq!(ids, vec!["b", "a"]);
        assert!(kb.contains("d").unwrap());
        assert!(kb.get("zzz").unwrap().is_none());
    }

    #[test]
    fn store_failures_are_infrastructure() {
        assert!(KbError::Store("disk full".into()).is_infrastructure());
        assert!(!KbError::NotFound("x".into()).is_infrastructure());
        assert!(!KbError::Duplicate("x".into()).is_infrastructure());
    }

    #[test]
    fn duplicate_ids_are_rejected() {
        let e = entity("a", "ALWAYS", 50, &["PARENT"], true);
        assert!(
            matches!(MemoryKb::new(vec![e.clone(), e]), Err(KbError::Duplicate(id)) if id == "a")
        );
    }
}
