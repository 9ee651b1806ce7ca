//! The assay knowledge base: the [`KnowledgeBase`] interface that retrieval reads, and loading
//! entities from a project's `kb/` folder.
//!
//! A project's `kb/` files (JSON arrays or YAML lists of entities, 003 §4 fields) are the source
//! of truth. [`load_dir`] reads and validates them into a [`MemoryKb`]; the SQLite store
//! implements the same trait.
//!
//! ```
//! use assay_kb::{EntityFilter, KnowledgeBase, MemoryKb};
//! let entity: assay_core::entity::Entity = serde_json::from_str(
//!     r#"{"entity_id":"gray_rock","entity_type":"KNOWLEDGE","title":"Gray rock"}"#).unwrap();
//! let kb = MemoryKb::new(vec![entity]).unwrap();
//! assert_eq!(kb.list(&EntityFilter::default()).unwrap().len(), 1);
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod datafile;
mod files;

use std::collections::HashMap;

use assay_core::entity::{Entity, EntityType, LoadMode};

pub use files::{LoadedKb, load_dir};

/// Errors of a knowledge base.
#[derive(Debug, thiserror::Error)]
pub enum KbError {
    /// A `kb/` file is not valid.
    #[error(transparent)]
    Data(#[from] datafile::DataError),
    /// Two entities share an id.
    #[error("duplicate entity_id `{0}`")]
    Duplicate(String),
    /// A store backend failed.
    #[error("knowledge-base store: {0}")]
    Store(String),
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
    fn duplicate_ids_are_rejected() {
        let e = entity("a", "ALWAYS", 50, &["PARENT"], true);
        assert!(
            matches!(MemoryKb::new(vec![e.clone(), e]), Err(KbError::Duplicate(id)) if id == "a")
        );
    }
}
