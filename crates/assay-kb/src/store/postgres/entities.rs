//! Entity rows: reading them, and writing a new version.

use assay_core::entity::{Entity, EntityType, LoadMode, Priority};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row, Transaction};

use super::{PgResult, pg_err};
use crate::store::Edit;
use crate::store::rows::{EDITABLE_BY, LOAD_MODES, VersionRow, by_name, editable_by_name};
use crate::{EntityFilter, KbError};
/// The columns every entity query reads, in this order (see [`read_row`]).
pub(super) const COLUMNS: &str = "id::text, entity_id, entity_type, subtype, title, concept_summary, \
     recognition, keywords, guidance_do, guidance_dont, examples, red_flags, load_mode, priority, \
     state_conditions, audience_types, source_author, source_title, source_year, is_active, \
     editable_by, version, previous_version_id::text, is_current, retrieval_count, created_at, \
     updated_at, created_by, embedding_model, embedding_text_hash, changed_fields";

pub(super) fn read_row(row: &Row) -> Result<VersionRow, KbError> {
    let id: String = row.try_get(0).pg()?;
    let bad =
        |column: &str, value: &str| KbError::Store(format!("row {id}: bad {column} `{value}`"));
    let text = |at: usize| -> Result<Option<String>, KbError> { row.try_get(at).pg() };
    let entity_type: String = row.try_get(2).pg()?;
    let load_mode: String = row.try_get(12).pg()?;
    let priority: i32 = row.try_get(13).pg()?;
    let state_conditions: Option<Value> = row.try_get(14).pg()?;
    let editable_by: String = row.try_get(20).pg()?;
    let version: i32 = row.try_get(21).pg()?;
    let retrieval_count: i64 = row.try_get(24).pg()?;
    let changed: Option<Value> = row.try_get(30).pg()?;
    let entity = Entity {
        entity_id: row.try_get(1).pg()?,
        entity_type: by_name(&EntityType::ALL, EntityType::as_str, &entity_type)
            .ok_or_else(|| bad("entity_type", &entity_type))?,
        subtype: text(3)?,
        title: row.try_get(4).pg()?,
        concept_summary: text(5)?,
        recognition: text(6)?,
        keywords: text(7)?,
        guidance_do: text(8)?,
        guidance_dont: text(9)?,
        examples: text(10)?,
        red_flags: text(11)?,
        load_mode: by_name(&LOAD_MODES, LoadMode::as_str, &load_mode)
            .ok_or_else(|| bad("load_mode", &load_mode))?,
        priority: u8::try_from(priority)
            .ok()
            .and_then(Priority::new)
            .ok_or_else(|| bad("priority", &priority.to_string()))?,
        state_conditions: match state_conditions {
            None => None,
            Some(Value::Object(map)) => Some(map),
            Some(other) => return Err(bad("state_conditions", &other.to_string())),
        },
        audience_types: row.try_get(15).pg()?,
        source_author: text(16)?,
        source_title: text(17)?,
        source_year: row.try_get(18).pg()?,
        is_active: row.try_get(19).pg()?,
        editable_by: by_name(&EDITABLE_BY, editable_by_name, &editable_by)
            .ok_or_else(|| bad("editable_by", &editable_by))?,
    };
    Ok(VersionRow {
        entity,
        version: u32::try_from(version).map_err(|_| bad("version", &version.to_string()))?,
        previous_version_id: row.try_get(22).pg()?,
        is_current: row.try_get(23).pg()?,
        retrieval_count: u64::try_from(retrieval_count)
            .map_err(|_| bad("retrieval_count", &retrieval_count.to_string()))?,
        created_at: row.try_get(25).pg()?,
        updated_at: row.try_get(26).pg()?,
        created_by: row.try_get(27).pg()?,
        embedding_model: text(28)?,
        embedding_text_hash: text(29)?,
        changed_fields: match changed {
            None => Vec::new(),
            Some(value) => serde_json::from_value(value.clone())
                .map_err(|_| bad("changed_fields", &value.to_string()))?,
        },
        id,
    })
}

pub(super) fn read_rows(rows: &[Row]) -> Result<Vec<VersionRow>, KbError> {
    rows.iter().map(read_row).collect()
}

/// The current version of an entity.
pub(super) async fn current(
    client: &impl GenericClient,
    entity_id: &str,
) -> Result<Option<VersionRow>, KbError> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM kb_content_entities WHERE entity_id = $1 AND is_current"
            ),
            &[&entity_id],
        )
        .await
        .pg()?;
    rows.first().map(read_row).transpose()
}

pub(super) async fn must_current(
    client: &impl GenericClient,
    entity_id: &str,
) -> Result<VersionRow, KbError> {
    current(client, entity_id)
        .await?
        .ok_or_else(|| KbError::NotFound(entity_id.to_owned()))
}

/// The current versions passing `filter`, by priority (highest first), then id (byte order).
pub(super) async fn current_rows(
    client: &impl GenericClient,
    filter: &EntityFilter,
) -> Result<Vec<VersionRow>, KbError> {
    let mut sql = format!("SELECT {COLUMNS} FROM kb_content_entities WHERE is_current");
    let entity_type = filter.entity_type.map(EntityType::as_str);
    let load_mode = filter.load_mode.map(LoadMode::as_str);
    let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
    if let Some(entity_type) = &entity_type {
        params.push(entity_type);
        sql.push_str(&format!(" AND entity_type = ${}", params.len()));
    }
    if let Some(load_mode) = &load_mode {
        params.push(load_mode);
        sql.push_str(&format!(" AND load_mode = ${}", params.len()));
    }
    if let Some(active) = &filter.active {
        params.push(active);
        sql.push_str(&format!(" AND is_active = ${}", params.len()));
    }
    if let Some(audience) = &filter.audience {
        // Served by the GIN index on audience_types.
        params.push(audience);
        sql.push_str(&format!(
            " AND audience_types @> ARRAY[${}::text]",
            params.len()
        ));
    }
    sql.push_str(" ORDER BY priority DESC, entity_id COLLATE \"C\"");
    let rows = client.query(&sql, &params).await.pg()?;
    Ok(read_rows(&rows)?
        .into_iter()
        .filter(|r| filter.accepts(&r.entity))
        .collect())
}

/// Writes `entity` as a new row: version 1 without `previous`, else the version after it, which
/// stops being current and active. The embedding and the retrieval count carry over.
pub(super) const INSERT: &str = "INSERT INTO kb_content_entities (id, entity_id, entity_type, subtype, \
     title, concept_summary, recognition, keywords, guidance_do, guidance_dont, examples, \
     red_flags, load_mode, priority, state_conditions, audience_types, source_author, \
     source_title, source_year, is_active, editable_by, embedding, embedding_model, \
     embedding_dim, embedding_text_hash, retrieval_count, created_at, updated_at, created_by, \
     version, previous_version_id, is_current, changed_fields) \
     SELECT $1::text::uuid, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, \
     $8::text, $9::text, $10::text, $11::text, $12::text, $13::text, $14::int4, $15::json, \
     $16::text[], $17::text, $18::text, $19::int4, $20::bool, $21::text, p.embedding, \
     p.embedding_model, p.embedding_dim, p.embedding_text_hash, coalesce(p.retrieval_count, 0), \
     $22::timestamptz, $22::timestamptz, $23::text, coalesce(p.version, 0) + 1, p.id, TRUE, \
     $24::json \
     FROM (SELECT 1) AS one LEFT JOIN kb_content_entities p ON p.id = $25::text::uuid";

/// Writes `entity` as version 1 (`previous` is `None`) or as the version after `previous`,
/// which stops being current and active. `changed` names the fields that differ.
pub(super) async fn write_version(
    tx: &Transaction<'_>,
    entity: &Entity,
    previous: Option<&VersionRow>,
    changed: &[&str],
    edit: &Edit,
) -> Result<(), KbError> {
    if let Some(previous) = previous {
        let superseded = tx
            .execute(
                "UPDATE kb_content_entities SET is_current = FALSE, is_active = FALSE, \
                 updated_at = $1 WHERE id = $2::text::uuid AND is_current",
                &[&edit.at, &previous.id],
            )
            .await
            .pg()?;
        if superseded != 1 {
            return Err(KbError::Store(format!(
                "entity `{}`: version {} is no longer current",
                entity.entity_id, previous.version
            )));
        }
    }
    let state_conditions = entity.state_conditions.clone().map(Value::Object);
    let changed_fields = previous.map(|_| Value::from(changed.to_vec()));
    let id = uuid::Uuid::new_v4().to_string();
    let priority = i32::from(entity.priority.get());
    let previous_id = previous.map(|p| p.id.as_str());
    tx.execute(
        INSERT,
        &[
            &id,
            &entity.entity_id,
            &entity.entity_type.as_str(),
            &entity.subtype,
            &entity.title,
            &entity.concept_summary,
            &entity.recognition,
            &entity.keywords,
            &entity.guidance_do,
            &entity.guidance_dont,
            &entity.examples,
            &entity.red_flags,
            &entity.load_mode.as_str(),
            &priority,
            &state_conditions,
            &entity.audience_types,
            &entity.source_author,
            &entity.source_title,
            &entity.source_year,
            &entity.is_active,
            &editable_by_name(entity.editable_by),
            &edit.at,
            &edit.by,
            &changed_fields,
            &previous_id,
        ],
    )
    .await
    .map_err(|e| {
        if e.as_db_error()
            .and_then(|db| db.constraint())
            .is_some_and(|c| c == "idx_kb_current_entity")
        {
            KbError::AlreadyExists(entity.entity_id.clone())
        } else {
            pg_err(&e)
        }
    })?;
    Ok(())
}
