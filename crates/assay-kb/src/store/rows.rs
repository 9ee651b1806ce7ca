//! What the backends share: a stored row as read, and the decisions about rows that do not
//! depend on where they are stored (staleness, the history's active flags, the import plan,
//! statistics, input checks). Each backend reads and writes rows its own way.

use std::collections::{BTreeMap, HashSet};

use assay_core::entity::{EditableBy, Entity, LoadMode};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::{
    EmbeddingCoverage, EntityVersion, ImportReport, KbStats, Staleness, StoredEntity,
    ViewEmbedding, changed_fields,
};
use crate::{KbError, check_entity};

/// One stored row: a version of an entity.
#[derive(Debug, Clone)]
pub(crate) struct VersionRow {
    pub(crate) id: String,
    pub(crate) entity: Entity,
    pub(crate) version: u32,
    pub(crate) previous_version_id: Option<String>,
    pub(crate) is_current: bool,
    pub(crate) retrieval_count: u64,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
    pub(crate) created_by: String,
    pub(crate) embedding_model: Option<String>,
    pub(crate) embedding_text_hash: Option<String>,
    pub(crate) changed_fields: Vec<String>,
}

impl VersionRow {
    /// Whether this row's embedding can be used with `model`.
    pub(crate) fn staleness(&self, model: &str) -> Staleness {
        match (&self.embedding_model, &self.embedding_text_hash) {
            (None, _) => Staleness::Missing,
            (Some(other), _) if other != model => Staleness::OtherModel {
                model: other.clone(),
            },
            (Some(_), Some(hash)) if *hash == text_hash(&self.entity) => Staleness::Fresh,
            (Some(_), _) => Staleness::TextChanged,
        }
    }

    pub(crate) fn into_stored(self) -> StoredEntity {
        StoredEntity {
            id: self.id,
            entity: self.entity,
            version: self.version,
            previous_version_id: self.previous_version_id,
            retrieval_count: self.retrieval_count,
            created_at: self.created_at,
            updated_at: self.updated_at,
            created_by: self.created_by,
            embedding_model: self.embedding_model,
        }
    }

    fn into_version(self) -> EntityVersion {
        EntityVersion {
            id: self.id,
            version: self.version,
            previous_version_id: self.previous_version_id,
            is_current: self.is_current,
            entity: self.entity,
            created_at: self.created_at,
            updated_at: self.updated_at,
            created_by: self.created_by,
            changed_fields: self.changed_fields,
        }
    }
}

/// An entity's versions from its rows (oldest first). Superseded rows are stored inactive
/// (003 §1): each version's own flag is rebuilt from the current one backwards, through the
/// versions that changed it.
pub(crate) fn history(
    entity_id: &str,
    rows: Vec<VersionRow>,
) -> Result<Vec<EntityVersion>, KbError> {
    let Some(last) = rows.last() else {
        return Err(KbError::NotFound(entity_id.to_owned()));
    };
    let mut active = last.entity.is_active;
    let mut versions: Vec<EntityVersion> = rows.into_iter().map(VersionRow::into_version).collect();
    for version in versions.iter_mut().rev() {
        version.entity.is_active = active;
        if version.changed_fields.iter().any(|f| f == "is_active") {
            active = !active;
        }
    }
    Ok(versions)
}

/// An entity that passes [`check_entity`], or [`KbError::InvalidEntity`].
pub(crate) fn check(entity: &Entity) -> Result<(), KbError> {
    check_entity(entity)
        .map(|_| ())
        .map_err(|problem| KbError::InvalidEntity {
            entity_id: entity.entity_id.clone(),
            problem,
        })
}

/// The SHA-256 (hex) of the text an entity's embedding is made from.
pub(crate) fn text_hash(entity: &Entity) -> String {
    format!("{:x}", Sha256::digest(entity.embedding_text().as_bytes()))
}

pub(crate) const LOAD_MODES: [LoadMode; 3] =
    [LoadMode::Always, LoadMode::State, LoadMode::Situation];
pub(crate) const EDITABLE_BY: [EditableBy; 3] =
    [EditableBy::Admin, EditableBy::Trainer, EditableBy::Hidden];

pub(crate) fn editable_by_name(editable_by: EditableBy) -> &'static str {
    match editable_by {
        EditableBy::Admin => "ADMIN",
        EditableBy::Trainer => "TRAINER",
        EditableBy::Hidden => "HIDDEN",
    }
}

pub(crate) fn by_name<T: Copy>(
    all: &[T],
    name: impl Fn(T) -> &'static str,
    text: &str,
) -> Option<T> {
    all.iter().copied().find(|v| name(*v) == text)
}

/// One version an import writes: `entity` after `previous` (`None`: version 1).
pub(crate) struct ImportWrite<'a> {
    pub(crate) entity: Entity,
    pub(crate) previous: Option<&'a VersionRow>,
    pub(crate) changed: Vec<&'static str>,
}

/// Checks the entities of an import: each valid, no id twice.
pub(crate) fn check_import(entities: &[Entity]) -> Result<HashSet<&str>, KbError> {
    let mut ids = HashSet::with_capacity(entities.len());
    for entity in entities {
        check(entity)?;
        if !ids.insert(entity.entity_id.as_str()) {
            return Err(KbError::Duplicate(entity.entity_id.clone()));
        }
    }
    Ok(ids)
}

/// What an import of `entities` (checked by [`check_import`], ids `ids`) over the current rows
/// `stored` writes, and its report: new ids are created, changed entities versioned, active
/// entities missing from `entities` deactivated.
pub(crate) fn plan_import<'a>(
    stored: &'a BTreeMap<String, VersionRow>,
    entities: &[Entity],
    ids: &HashSet<&str>,
) -> (ImportReport, Vec<ImportWrite<'a>>) {
    let mut report = ImportReport::default();
    let mut writes = Vec::new();
    for entity in entities {
        let id = entity.entity_id.clone();
        match stored.get(&id) {
            None => {
                writes.push(ImportWrite {
                    entity: entity.clone(),
                    previous: None,
                    changed: Vec::new(),
                });
                report.created.push(id);
            }
            Some(row) => {
                let changed = changed_fields(&row.entity, entity);
                if changed.is_empty() {
                    report.unchanged.push(id);
                } else {
                    writes.push(ImportWrite {
                        entity: entity.clone(),
                        previous: Some(row),
                        changed,
                    });
                    report.updated.push(id);
                }
            }
        }
    }
    for (id, row) in stored {
        if row.entity.is_active && !ids.contains(id.as_str()) {
            writes.push(ImportWrite {
                entity: Entity {
                    is_active: false,
                    ..row.entity.clone()
                },
                previous: Some(row),
                changed: vec!["is_active"],
            });
            report.deactivated.push(id.clone());
        }
    }
    for list in [
        &mut report.created,
        &mut report.updated,
        &mut report.unchanged,
    ] {
        list.sort();
    }
    (report, writes)
}

/// Logs what an import did.
pub(crate) fn log_import(report: &ImportReport) {
    tracing::debug!(
        created = report.created.len(),
        updated = report.updated.len(),
        unchanged = report.unchanged.len(),
        deactivated = report.deactivated.len(),
        "imported entities"
    );
}

/// The current rows as entities in export order: by type (schema order), then id.
pub(crate) fn export(rows: Vec<VersionRow>) -> Vec<Entity> {
    let mut entities: Vec<Entity> = rows.into_iter().map(|r| r.entity).collect();
    entities.sort_by(|a, b| {
        a.entity_type
            .cmp(&b.entity_type)
            .then_with(|| a.entity_id.cmp(&b.entity_id))
    });
    entities
}

/// Statistics of the current rows `rows` of a store holding `versions` rows in all.
pub(crate) fn stats(rows: &[VersionRow], versions: usize, embedding_model: &str) -> KbStats {
    let mut stats = KbStats {
        entities: rows.len(),
        versions,
        embeddings: EmbeddingCoverage {
            model: embedding_model.to_owned(),
            ..EmbeddingCoverage::default()
        },
        ..KbStats::default()
    };
    for row in rows {
        stats.total_retrievals += row.retrieval_count;
        if !row.entity.is_active {
            stats.inactive += 1;
            continue;
        }
        stats.active += 1;
        *stats.by_type.entry(row.entity.entity_type).or_default() += 1;
        *stats.by_load_mode.entry(row.entity.load_mode).or_default() += 1;
        match row.staleness(embedding_model) {
            Staleness::Fresh => stats.embeddings.fresh += 1,
            Staleness::Missing => stats.embeddings.missing += 1,
            Staleness::OtherModel { .. } | Staleness::TextChanged => {
                stats.embeddings.stale += 1;
            }
        }
    }
    let mut top: Vec<(String, u64)> = rows
        .iter()
        .filter(|r| r.retrieval_count > 0)
        .map(|r| (r.entity.entity_id.clone(), r.retrieval_count))
        .collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.truncate(KbStats::TOP_RETRIEVED);
    stats.top_retrieved = top;
    stats
}

/// Checks an embedding [`super::KbStore::set_embedding`] is given; returns its dimension.
pub(crate) fn check_embedding(
    entity_id: &str,
    model: &str,
    vector: &[f32],
) -> Result<u32, KbError> {
    let invalid = |what: &str| Err(KbError::Invalid(format!("entity `{entity_id}`: {what}")));
    if model.trim().is_empty() {
        return invalid("the embedding model is empty");
    }
    if vector.is_empty() {
        return invalid("the embedding is empty");
    }
    if vector.iter().any(|x| !x.is_finite()) {
        return invalid("the embedding has a value that is not finite");
    }
    match u32::try_from(vector.len()) {
        Ok(dim) => Ok(dim),
        Err(_) => invalid("the embedding is too long"),
    }
}

/// Checks the view embeddings [`super::KbStore::set_view_embeddings`] is given.
pub(crate) fn check_view_embeddings(model: &str, rows: &[ViewEmbedding]) -> Result<(), KbError> {
    if model.trim().is_empty() {
        return Err(KbError::Invalid("the embedding model is empty".into()));
    }
    for r in rows {
        let invalid = |what: &str| {
            Err(KbError::Invalid(format!(
                "entity `{}` view `{}`: {what}",
                r.entity_id, r.view
            )))
        };
        if r.vector.is_empty() {
            return invalid("the embedding is empty");
        }
        if r.vector.iter().any(|x| !x.is_finite()) {
            return invalid("the embedding has a value that is not finite");
        }
        if u32::try_from(r.vector.len()).is_err() {
            return invalid("the embedding is too long");
        }
    }
    Ok(())
}
