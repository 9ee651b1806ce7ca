//! [`SqliteStore`]: the knowledge base (and the user state) in one SQLite database.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use assay_core::entity::{Entity, EntityType, LoadMode, Priority};
use chrono::{DateTime, Utc};
use rusqlite::{
    Connection, Row, RowIndex, Rows, ToSql, Transaction, TransactionBehavior, named_params,
};
use serde::de::DeserializeOwned;

use super::rows::{self, EDITABLE_BY, LOAD_MODES, VersionRow, by_name, check, editable_by_name};
use super::schema;
use super::{
    Edit, EntityUpdate, EntityVersion, ImportReport, KbStats, KbStore, Staleness, StoredEntity,
    ViewEmbedding, changed_fields,
};
use crate::timestamp::{parse_time, time_text};
use crate::{EntityFilter, KbError, KnowledgeBase};

/// A [`KbStore`] (and [`crate::StateStore`]) in one SQLite database, `.assay/kb.db` by
/// convention.
///
/// The connection sits behind a mutex, so the store is `Send + Sync` and calls are serialised
/// within a process. Writes run in `IMMEDIATE` transactions and the database is in WAL mode,
/// so other processes may read while one writes.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

/// How long a write waits for another process's write to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

impl SqliteStore {
    /// Opens (or creates) the database at `path`, creating its parent folders, and brings its
    /// schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, KbError> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| KbError::Store(format!("cannot create {}: {e}", parent.display())))?;
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(
                path = %path.display(),
                mode,
                "the knowledge-base database is not in WAL mode"
            );
        }
        // Safe with WAL: a power loss may lose the last commits, never consistency.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        SqliteStore::init(conn)
    }

    /// A store in memory, gone when dropped (for tests and one-off runs).
    pub fn in_memory() -> Result<SqliteStore, KbError> {
        SqliteStore::init(Connection::open_in_memory()?)
    }

    fn init(mut conn: Connection) -> Result<SqliteStore, KbError> {
        conn.pragma_update(None, "foreign_keys", true)?;
        schema::migrate(&mut conn)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
        })
    }

    /// The schema version of the database (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<u32, KbError> {
        schema::version(&self.lock())
    }

    /// The connection. A panic while it was held cannot have left a transaction open
    /// (`Transaction` rolls back when dropped), so a poisoned lock is taken over.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `change` to the current version of an entity and writes the result as a new
    /// version when it differs.
    fn change(
        &self,
        entity_id: &str,
        edit: &Edit,
        change: impl FnOnce(&Entity) -> Entity,
    ) -> Result<StoredEntity, KbError> {
        let mut conn = self.lock();
        let tx = write_transaction(&mut conn)?;
        let row = must_current(&tx, entity_id)?;
        edit.check_version(entity_id, row.version)?;
        let new = change(&row.entity);
        let changed = changed_fields(&row.entity, &new);
        if changed.is_empty() {
            return Ok(row.into_stored());
        }
        check(&new)?;
        write_version(&tx, &new, Some(&row), &changed, edit)?;
        let stored = must_current(&tx, entity_id)?.into_stored();
        tx.commit()?;
        Ok(stored)
    }
}

/// Starts a transaction that takes the write lock at once, so its reads and writes see one
/// state.
pub(crate) fn write_transaction(conn: &mut Connection) -> rusqlite::Result<Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
}

/// The columns every entity query reads, in the order of the schema.
macro_rules! columns {
    () => {
        "id, entity_id, entity_type, subtype, title, concept_summary, recognition, keywords, \
         guidance_do, guidance_dont, examples, red_flags, load_mode, priority, state_conditions, \
         audience_types, source_author, source_title, source_year, is_active, editable_by, version, \
         previous_version_id, is_current, retrieval_count, created_at, updated_at, created_by, \
         embedding_model, embedding_text_hash, changed_fields"
    };
}

/// The position of each column of `columns!()` in a row that selected them: reading by
/// position, not by name, spares rusqlite a search through every column name for every value.
mod col {
    macro_rules! positions {
        ($($name:ident),* $(,)?) => {
            positions!(@ 0usize; $($name),*);
            /// The names, in order (checked against `columns!()` by a test).
            #[cfg(test)]
            pub(super) const NAMES: &[&str] = &[$(stringify!($name)),*];
        };
        (@ $at:expr; $name:ident $(, $rest:ident)*) => {
            pub(super) const $name: usize = $at;
            positions!(@ $at + 1usize; $($rest),*);
        };
        (@ $at:expr;) => {};
    }
    positions!(
        ID,
        ENTITY_ID,
        ENTITY_TYPE,
        SUBTYPE,
        TITLE,
        CONCEPT_SUMMARY,
        RECOGNITION,
        KEYWORDS,
        GUIDANCE_DO,
        GUIDANCE_DONT,
        EXAMPLES,
        RED_FLAGS,
        LOAD_MODE,
        PRIORITY,
        STATE_CONDITIONS,
        AUDIENCE_TYPES,
        SOURCE_AUTHOR,
        SOURCE_TITLE,
        SOURCE_YEAR,
        IS_ACTIVE,
        EDITABLE_BY,
        VERSION,
        PREVIOUS_VERSION_ID,
        IS_CURRENT,
        RETRIEVAL_COUNT,
        CREATED_AT,
        UPDATED_AT,
        CREATED_BY,
        EMBEDDING_MODEL,
        EMBEDDING_TEXT_HASH,
        CHANGED_FIELDS,
    );
}

/// Writes `entity` as a new row: version 1 without `previous`, else the version after it,
/// which stops being current. The embedding and the retrieval count carry over.
const INSERT: &str = "INSERT INTO kb_content_entities (id, entity_id, entity_type, subtype, \
     title, concept_summary, recognition, keywords, guidance_do, guidance_dont, examples, red_flags, \
     load_mode, priority, state_conditions, audience_types, source_author, source_title, \
     source_year, is_active, editable_by, embedding, embedding_model, embedding_dim, \
     embedding_text_hash, retrieval_count, created_at, updated_at, created_by, version, \
     previous_version_id, is_current, changed_fields) \
     SELECT :id, :entity_id, :entity_type, :subtype, :title, :concept_summary, :recognition, \
     :keywords, :guidance_do, :guidance_dont, :examples, :red_flags, :load_mode, :priority, \
     :state_conditions, :audience_types, :source_author, :source_title, :source_year, :is_active, \
     :editable_by, p.embedding, p.embedding_model, p.embedding_dim, p.embedding_text_hash, \
     coalesce(p.retrieval_count, 0), :at, :at, :by, coalesce(p.version, 0) + 1, p.id, 1, \
     :changed_fields \
     FROM (SELECT 1) LEFT JOIN kb_content_entities p ON p.id = :previous_id";

/// Reading rows of SQLite.
trait ReadRow: Sized {
    fn read(row: &Row<'_>) -> Result<Self, KbError>;
    fn read_all(rows: Rows<'_>) -> Result<Vec<Self>, KbError>;
}

impl ReadRow for VersionRow {
    fn read(row: &Row<'_>) -> Result<VersionRow, KbError> {
        let id: String = row.get(col::ID)?;
        let bad =
            |column: &str, value: &str| KbError::Store(format!("row {id}: bad {column} `{value}`"));
        let time = |at: usize, column: &str| -> Result<DateTime<Utc>, KbError> {
            let text: String = row.get(at)?;
            parse_time(&text).ok_or_else(|| bad(column, &text))
        };

        let entity_type: String = row.get(col::ENTITY_TYPE)?;
        let load_mode: String = row.get(col::LOAD_MODE)?;
        let editable_by: String = row.get(col::EDITABLE_BY)?;
        let priority: i64 = row.get(col::PRIORITY)?;
        let retrieval_count: i64 = row.get(col::RETRIEVAL_COUNT)?;
        let entity = Entity {
            entity_id: row.get(col::ENTITY_ID)?,
            entity_type: by_name(&EntityType::ALL, EntityType::as_str, &entity_type)
                .ok_or_else(|| bad("entity_type", &entity_type))?,
            title: row.get(col::TITLE)?,
            subtype: row.get(col::SUBTYPE)?,
            concept_summary: row.get(col::CONCEPT_SUMMARY)?,
            recognition: row.get(col::RECOGNITION)?,
            keywords: row.get(col::KEYWORDS)?,
            guidance_do: row.get(col::GUIDANCE_DO)?,
            guidance_dont: row.get(col::GUIDANCE_DONT)?,
            examples: row.get(col::EXAMPLES)?,
            red_flags: row.get(col::RED_FLAGS)?,
            load_mode: by_name(&LOAD_MODES, LoadMode::as_str, &load_mode)
                .ok_or_else(|| bad("load_mode", &load_mode))?,
            priority: u8::try_from(priority)
                .ok()
                .and_then(Priority::new)
                .ok_or_else(|| bad("priority", &priority.to_string()))?,
            state_conditions: json_column(row, &id, col::STATE_CONDITIONS, "state_conditions")?,
            audience_types: json_column(row, &id, col::AUDIENCE_TYPES, "audience_types")?
                .unwrap_or_default(),
            source_author: row.get(col::SOURCE_AUTHOR)?,
            source_title: row.get(col::SOURCE_TITLE)?,
            source_year: row.get(col::SOURCE_YEAR)?,
            is_active: row.get(col::IS_ACTIVE)?,
            editable_by: by_name(&EDITABLE_BY, editable_by_name, &editable_by)
                .ok_or_else(|| bad("editable_by", &editable_by))?,
        };
        Ok(VersionRow {
            entity,
            version: row.get(col::VERSION)?,
            previous_version_id: row.get(col::PREVIOUS_VERSION_ID)?,
            is_current: row.get(col::IS_CURRENT)?,
            retrieval_count: u64::try_from(retrieval_count)
                .map_err(|_| bad("retrieval_count", &retrieval_count.to_string()))?,
            created_at: time(col::CREATED_AT, "created_at")?,
            updated_at: time(col::UPDATED_AT, "updated_at")?,
            created_by: row.get(col::CREATED_BY)?,
            embedding_model: row.get(col::EMBEDDING_MODEL)?,
            embedding_text_hash: row.get(col::EMBEDDING_TEXT_HASH)?,
            changed_fields: json_column(row, &id, col::CHANGED_FIELDS, "changed_fields")?
                .unwrap_or_default(),
            id,
        })
    }

    fn read_all(mut rows: Rows<'_>) -> Result<Vec<VersionRow>, KbError> {
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(VersionRow::read(row)?);
        }
        Ok(out)
    }
}

/// A JSON text column, parsed.
pub(crate) fn json_column<T: DeserializeOwned>(
    row: &Row<'_>,
    id: &str,
    at: impl RowIndex,
    column: &str,
) -> Result<Option<T>, KbError> {
    let text: Option<String> = row.get(at)?;
    text.map(|t| {
        serde_json::from_str(&t)
            .map_err(|e| KbError::Store(format!("row {id}: bad {column} `{t}` ({e})")))
    })
    .transpose()
}

/// The current version of an entity.
fn current(conn: &Connection, entity_id: &str) -> Result<Option<VersionRow>, KbError> {
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT ",
        columns!(),
        " FROM kb_content_entities WHERE entity_id = ?1 AND is_current = 1"
    ))?;
    let mut rows = stmt.query([entity_id])?;
    rows.next()?.map(VersionRow::read).transpose()
}

fn must_current(conn: &Connection, entity_id: &str) -> Result<VersionRow, KbError> {
    current(conn, entity_id)?.ok_or_else(|| KbError::NotFound(entity_id.to_owned()))
}

/// The current versions passing `filter`, by priority (highest first), then id.
fn current_rows(conn: &Connection, filter: &EntityFilter) -> Result<Vec<VersionRow>, KbError> {
    let mut sql = String::from(concat!(
        "SELECT ",
        columns!(),
        " FROM kb_content_entities WHERE is_current = 1"
    ));
    let entity_type = filter.entity_type.map(EntityType::as_str);
    let load_mode = filter.load_mode.map(LoadMode::as_str);
    let mut params: Vec<(&str, &dyn ToSql)> = Vec::new();
    if let Some(entity_type) = &entity_type {
        sql.push_str(" AND entity_type = :entity_type");
        params.push((":entity_type", entity_type));
    }
    if let Some(load_mode) = &load_mode {
        sql.push_str(" AND load_mode = :load_mode");
        params.push((":load_mode", load_mode));
    }
    if let Some(active) = &filter.active {
        sql.push_str(" AND is_active = :active");
        params.push((":active", active));
    }
    sql.push_str(" ORDER BY priority DESC, entity_id");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = VersionRow::read_all(stmt.query(params.as_slice())?)?;
    // The audience (a JSON array) is tested here; `accepts` also re-checks the rest.
    Ok(rows
        .into_iter()
        .filter(|r| filter.accepts(&r.entity))
        .collect())
}

/// Writes `entity` as version 1 (`previous` is `None`) or as the version after `previous`,
/// which stops being current and active. `changed` names the fields that differ.
fn write_version(
    tx: &Transaction<'_>,
    entity: &Entity,
    previous: Option<&VersionRow>,
    changed: &[&str],
    edit: &Edit,
) -> Result<(), KbError> {
    let at = time_text(edit.at);
    if let Some(previous) = previous {
        let superseded = tx
            .prepare_cached(
                "UPDATE kb_content_entities SET is_current = 0, is_active = 0, updated_at = ?1 \
                 WHERE id = ?2 AND is_current = 1",
            )?
            .execute((&at, &previous.id))?;
        if superseded != 1 {
            return Err(KbError::Store(format!(
                "entity `{}`: version {} is no longer current",
                entity.entity_id, previous.version
            )));
        }
    }
    let state_conditions = entity.state_conditions.as_ref().map(to_json).transpose()?;
    let audience_types = to_json(&entity.audience_types)?;
    let changed_fields = previous.map(|_| to_json(changed)).transpose()?;
    tx.prepare_cached(INSERT)?.execute(named_params! {
        ":id": uuid::Uuid::new_v4().to_string(),
        ":entity_id": entity.entity_id,
        ":entity_type": entity.entity_type.as_str(),
        ":subtype": entity.subtype,
        ":title": entity.title,
        ":concept_summary": entity.concept_summary,
        ":recognition": entity.recognition,
        ":keywords": entity.keywords,
        ":guidance_do": entity.guidance_do,
        ":guidance_dont": entity.guidance_dont,
        ":examples": entity.examples,
        ":red_flags": entity.red_flags,
        ":load_mode": entity.load_mode.as_str(),
        ":priority": entity.priority.get(),
        ":state_conditions": state_conditions,
        ":audience_types": audience_types,
        ":source_author": entity.source_author,
        ":source_title": entity.source_title,
        ":source_year": entity.source_year,
        ":is_active": entity.is_active,
        ":editable_by": editable_by_name(entity.editable_by),
        ":at": at,
        ":by": edit.by,
        ":changed_fields": changed_fields,
        ":previous_id": previous.map(|p| &p.id),
    })?;
    Ok(())
}

/// JSON text of a value the store writes.
pub(crate) fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, KbError> {
    serde_json::to_string(value).map_err(|e| KbError::Store(format!("cannot encode JSON: {e}")))
}

fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode_vector(entity_id: &str, blob: &[u8]) -> Result<Vec<f32>, KbError> {
    if !blob.len().is_multiple_of(4) {
        return Err(KbError::Store(format!(
            "entity `{entity_id}`: embedding of {} bytes",
            blob.len()
        )));
    }
    Ok(blob
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

impl KnowledgeBase for SqliteStore {
    fn get(&self, entity_id: &str) -> Result<Option<Entity>, KbError> {
        Ok(current(&self.lock(), entity_id)?.map(|r| r.entity))
    }

    fn list(&self, filter: &EntityFilter) -> Result<Vec<Entity>, KbError> {
        Ok(current_rows(&self.lock(), filter)?
            .into_iter()
            .map(|r| r.entity)
            .collect())
    }

    fn contains(&self, entity_id: &str) -> Result<bool, KbError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM kb_content_entities \
             WHERE entity_id = ?1 AND is_current = 1)",
        )?;
        Ok(stmt.query_row([entity_id], |row| row.get(0))?)
    }
}

impl KbStore for SqliteStore {
    fn get_stored(&self, entity_id: &str) -> Result<Option<StoredEntity>, KbError> {
        Ok(current(&self.lock(), entity_id)?.map(VersionRow::into_stored))
    }

    fn create(&self, entity: &Entity, edit: &Edit) -> Result<StoredEntity, KbError> {
        check(entity)?;
        let mut conn = self.lock();
        let tx = write_transaction(&mut conn)?;
        if current(&tx, &entity.entity_id)?.is_some() {
            return Err(KbError::AlreadyExists(entity.entity_id.clone()));
        }
        write_version(&tx, entity, None, &[], edit)?;
        let stored = must_current(&tx, &entity.entity_id)?.into_stored();
        tx.commit()?;
        Ok(stored)
    }

    fn update(
        &self,
        entity_id: &str,
        update: &EntityUpdate,
        edit: &Edit,
    ) -> Result<StoredEntity, KbError> {
        self.change(entity_id, edit, |entity| update.apply(entity))
    }

    fn deactivate(&self, entity_id: &str, edit: &Edit) -> Result<StoredEntity, KbError> {
        self.change(entity_id, edit, |entity| Entity {
            is_active: false,
            ..entity.clone()
        })
    }

    fn history(&self, entity_id: &str) -> Result<Vec<EntityVersion>, KbError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(concat!(
            "SELECT ",
            columns!(),
            " FROM kb_content_entities WHERE entity_id = ?1 ORDER BY version"
        ))?;
        let rows = VersionRow::read_all(stmt.query([entity_id])?)?;
        rows::history(entity_id, rows)
    }

    fn import(&self, entities: &[Entity], edit: &Edit) -> Result<ImportReport, KbError> {
        let ids = rows::check_import(entities)?;
        let mut conn = self.lock();
        let tx = write_transaction(&mut conn)?;
        let stored: BTreeMap<String, VersionRow> = current_rows(&tx, &EntityFilter::default())?
            .into_iter()
            .map(|r| (r.entity.entity_id.clone(), r))
            .collect();
        let (report, writes) = rows::plan_import(&stored, entities, &ids);
        for write in &writes {
            write_version(&tx, &write.entity, write.previous, &write.changed, edit)?;
        }
        tx.commit()?;
        rows::log_import(&report);
        Ok(report)
    }

    fn export(&self) -> Result<Vec<Entity>, KbError> {
        Ok(rows::export(current_rows(
            &self.lock(),
            &EntityFilter::default(),
        )?))
    }

    fn set_embedding(&self, entity_id: &str, model: &str, vector: &[f32]) -> Result<(), KbError> {
        let dim = rows::check_embedding(entity_id, model, vector)?;
        let mut conn = self.lock();
        let tx = write_transaction(&mut conn)?;
        let row = must_current(&tx, entity_id)?;
        tx.execute(
            "UPDATE kb_content_entities \
             SET embedding = ?1, embedding_model = ?2, embedding_dim = ?3, embedding_text_hash = ?4 \
             WHERE id = ?5",
            (
                encode_vector(vector),
                model,
                dim,
                rows::text_hash(&row.entity),
                &row.id,
            ),
        )?;
        tx.commit()?;
        Ok(())
    }

    fn view_embeddings(&self, model: &str) -> Result<Vec<ViewEmbedding>, KbError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT entity_id, view, text_hash, embedding FROM kb_view_embeddings \
             WHERE model = ?1 ORDER BY entity_id, view",
        )?;
        let rows: Vec<(String, String, String, Vec<u8>)> = stmt
            .query_map([model], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(entity_id, view, text_hash, blob)| {
                let vector = decode_vector(&entity_id, &blob)?;
                Ok(ViewEmbedding {
                    entity_id,
                    view,
                    text_hash,
                    vector,
                })
            })
            .collect()
    }

    fn set_view_embeddings(
        &self,
        model: &str,
        rows: &[ViewEmbedding],
        remove: &[(String, String)],
    ) -> Result<(), KbError> {
        rows::check_view_embeddings(model, rows)?;
        let mut conn = self.lock();
        let tx = write_transaction(&mut conn)?;
        {
            let mut delete = tx.prepare_cached(
                "DELETE FROM kb_view_embeddings WHERE model = ?1 AND entity_id = ?2 AND view = ?3",
            )?;
            for (entity_id, view) in remove {
                delete.execute((model, entity_id, view))?;
            }
            let mut insert = tx.prepare_cached(
                "INSERT OR REPLACE INTO kb_view_embeddings \
                 (entity_id, view, model, text_hash, dim, embedding) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for r in rows {
                insert.execute((
                    &r.entity_id,
                    &r.view,
                    model,
                    &r.text_hash,
                    u32::try_from(r.vector.len()).unwrap_or(u32::MAX),
                    encode_vector(&r.vector),
                ))?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn embedding_status(
        &self,
        filter: &EntityFilter,
        model: &str,
    ) -> Result<Vec<(String, Staleness)>, KbError> {
        let rows = current_rows(&self.lock(), filter)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let staleness = r.staleness(model);
                (r.entity.entity_id, staleness)
            })
            .collect())
    }

    fn current_embeddings(
        &self,
        filter: &EntityFilter,
        model: &str,
    ) -> Result<Vec<(String, Vec<f32>)>, KbError> {
        let conn = self.lock();
        let fresh: Vec<String> = current_rows(&conn, filter)?
            .into_iter()
            .filter(|r| r.staleness(model).is_fresh())
            .map(|r| r.entity.entity_id)
            .collect();
        if fresh.is_empty() {
            return Ok(Vec::new());
        }
        let mut stmt = conn.prepare_cached(
            "SELECT entity_id, embedding FROM kb_content_entities \
             WHERE is_current = 1 AND embedding_model = ?1",
        )?;
        let mut blobs: HashMap<String, Vec<u8>> = stmt
            .query_map([model], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        fresh
            .into_iter()
            .filter_map(|id| blobs.remove(&id).map(|blob| (id, blob)))
            .map(|(id, blob)| {
                let vector = decode_vector(&id, &blob)?;
                Ok((id, vector))
            })
            .collect()
    }

    fn record_retrievals(&self, entity_ids: &[String]) -> Result<usize, KbError> {
        let mut conn = self.lock();
        let tx = write_transaction(&mut conn)?;
        let mut counted = 0;
        {
            let mut stmt = tx.prepare_cached(
                "UPDATE kb_content_entities SET retrieval_count = retrieval_count + 1 \
                 WHERE entity_id = ?1 AND is_current = 1",
            )?;
            for id in entity_ids {
                counted += stmt.execute([id])?;
            }
        }
        tx.commit()?;
        Ok(counted)
    }

    fn stats(&self, embedding_model: &str) -> Result<KbStats, KbError> {
        let conn = self.lock();
        let rows = current_rows(&conn, &EntityFilter::default())?;
        let versions: i64 =
            conn.query_row("SELECT count(*) FROM kb_content_entities", [], |row| {
                row.get(0)
            })?;
        Ok(rows::stats(
            &rows,
            usize::try_from(versions).unwrap_or_default(),
            embedding_model,
        ))
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn entity(id: &str) -> Entity {
        serde_json::from_value(serde_json::json!({
            "entity_id": id, "entity_type": "KNOWLEDGE", "title": id, "keywords": "k",
        }))
        .unwrap()
    }

    fn edit(minute: u32) -> Edit {
        Edit::new(
            "tester",
            Utc.with_ymd_and_hms(2026, 11, 21, 12, minute, 0).unwrap(),
        )
    }

    #[test]
    fn column_positions_follow_the_select_list() {
        let selected: Vec<String> = columns!().split(',').map(|c| c.trim().to_owned()).collect();
        let positions: Vec<String> = col::NAMES.iter().map(|n| n.to_lowercase()).collect();
        assert_eq!(selected, positions);
        assert_eq!(col::NAMES[col::CHANGED_FIELDS], "CHANGED_FIELDS");
        assert_eq!(col::CHANGED_FIELDS, selected.len() - 1);
    }

    fn row_count(store: &SqliteStore, entity_id: &str) -> i64 {
        store
            .lock()
            .query_row(
                "SELECT count(*) FROM kb_content_entities WHERE entity_id = ?1",
                [entity_id],
                |r| r.get(0),
            )
            .unwrap()
    }

    #[test]
    fn new_database_has_the_current_schema() {
        let store = SqliteStore::in_memory().unwrap();
        assert_eq!(store.schema_version().unwrap(), schema::SCHEMA_VERSION);
        assert_eq!(schema::SCHEMA_VERSION, 2);
    }

    #[test]
    fn reopening_keeps_data_and_newer_schemas_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/.assay/kb.db");
        {
            let store = SqliteStore::open(&path).unwrap();
            store.create(&entity("a"), &edit(0)).unwrap();
            let mode: String = store
                .lock()
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "wal");
        }
        let store = SqliteStore::open(&path).unwrap();
        assert!(store.contains("a").unwrap());
        store
            .lock()
            .pragma_update(None, "user_version", 99)
            .unwrap();
        drop(store);
        let err = SqliteStore::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("schema version 99, newer than this assay supports (2)"),
            "{err}"
        );
    }

    #[test]
    fn timestamps_round_trip_and_sort_as_text() {
        let a = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(parse_time(&time_text(a)), Some(a));
        assert_eq!(time_text(a), "2026-01-02T03:04:05.000000Z");
        assert!(time_text(a) < time_text(a + chrono::Duration::microseconds(1)));
    }

    #[test]
    fn vectors_round_trip_little_endian() {
        let v = [1.0_f32, -0.5, 3.25e-3];
        let blob = encode_vector(&v);
        assert_eq!(&blob[..4], &1.0_f32.to_le_bytes());
        assert_eq!(decode_vector("x", &blob).unwrap(), v);
        assert!(decode_vector("x", &blob[..5]).is_err());
    }

    #[test]
    fn a_failed_insert_rolls_back_the_supersession() {
        let store = SqliteStore::in_memory().unwrap();
        let v1 = store.create(&entity("a"), &edit(0)).unwrap();
        store
            .lock()
            .execute_batch(
                "CREATE TRIGGER crash BEFORE INSERT ON kb_content_entities WHEN NEW.version > 1 \
                 BEGIN SELECT RAISE(ABORT, 'simulated crash'); END;",
            )
            .unwrap();
        let update = EntityUpdate {
            title: Some("A2".into()),
            ..EntityUpdate::default()
        };
        let err = store.update("a", &update, &edit(1)).unwrap_err();
        assert!(err.to_string().contains("simulated crash"), "{err}");
        assert_eq!(store.get_stored("a").unwrap().unwrap(), v1);
        assert_eq!(row_count(&store, "a"), 1);
    }

    #[test]
    fn history_keeps_each_versions_own_active_flag() {
        let store = SqliteStore::in_memory().unwrap();
        store.create(&entity("a"), &edit(0)).unwrap();
        store.deactivate("a", &edit(1)).unwrap();
        let reactivate = EntityUpdate {
            is_active: Some(true),
            ..EntityUpdate::default()
        };
        store.update("a", &reactivate, &edit(2)).unwrap();
        let history = store.history("a").unwrap();
        let flags: Vec<bool> = history.iter().map(|v| v.entity.is_active).collect();
        assert_eq!(flags, [true, false, true]);
        // As stored, superseded rows are inactive (003 §1).
        let stored: Vec<bool> = store
            .lock()
            .prepare("SELECT is_active FROM kb_content_entities ORDER BY version")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(stored, [false, false, true]);
    }

    #[test]
    fn only_one_row_per_entity_can_be_current() {
        let store = SqliteStore::in_memory().unwrap();
        let v1 = store.create(&entity("a"), &edit(0)).unwrap();
        let err = store
            .lock()
            .execute(
                "INSERT INTO kb_content_entities (id, entity_id, entity_type, title, created_at, \
                 updated_at, created_by, version) SELECT 'x', entity_id, entity_type, title, \
                 created_at, updated_at, created_by, 2 FROM kb_content_entities WHERE id = ?1",
                [&v1.id],
            )
            .unwrap_err();
        assert!(
            err.to_string().contains("UNIQUE constraint failed"),
            "{err}"
        );
    }

    #[test]
    fn bad_embeddings_are_rejected() {
        let store = SqliteStore::in_memory().unwrap();
        store.create(&entity("a"), &edit(0)).unwrap();
        for (model, vector) in [("", &[1.0][..]), ("m", &[][..]), ("m", &[f32::NAN][..])] {
            assert!(matches!(
                store.set_embedding("a", model, vector),
                Err(KbError::Invalid(_))
            ));
        }
        assert!(
            matches!(store.set_embedding("zzz", "m", &[1.0]), Err(KbError::NotFound(id)) if id == "zzz")
        );
    }
}
