//! The SQLite schema and its migrations.
//!
//! The schema version is SQLite's `PRAGMA user_version`: 0 for a new database, then the number
//! of migrations applied. A migration is appended to [`MIGRATIONS`], never edited once
//! released.

use rusqlite::{Connection, TransactionBehavior};

use crate::KbError;

/// Version 1: the entity table of 003 §1 and the user-state table of 003 §5.
///
/// Departures from the seed's Postgres schema:
///
/// * The seed puts `UNIQUE` on `entity_id`, yet its own versioning trigger copies a row with the
///   same `entity_id` as history, which that constraint forbids. Here every version is a row,
///   `is_current` marks the one in use, and the partial unique index
///   `idx_kb_current_entity ON (entity_id) WHERE is_current = 1` allows exactly one current
///   row per entity.
/// * `state_conditions` and `audience_types` are JSON text; the embedding is a BLOB of
///   little-endian `f32`s with the model, dimension and a SHA-256 of the embedded text beside
///   it, so staleness can be decided.
/// * Timestamps are RFC 3339 UTC text with microseconds (they sort as text).
/// * `changed_fields` (a JSON array, NULL for version 1) records what each version changed:
///   superseded rows are stored inactive (003 §1), so the history could not be rebuilt from
///   the rows alone.
/// * The GIN index on `audience_types` has no SQLite equivalent; audiences are filtered in
///   code. The other indexes of §1 are partial on current rows, which every read asks for.
const V1: &str = r#"
CREATE TABLE kb_content_entities (
    id TEXT PRIMARY KEY NOT NULL,
    entity_id TEXT NOT NULL CHECK (length(entity_id) > 0),
    entity_type TEXT NOT NULL
        CHECK (entity_type IN ('PERSONA', 'GUARDRAIL', 'HANDLER', 'KNOWLEDGE', 'SCRIPT', 'RULE')),
    subtype TEXT,
    title TEXT NOT NULL,

    concept_summary TEXT,
    recognition TEXT,
    keywords TEXT,
    guidance_do TEXT,
    guidance_dont TEXT,
    examples TEXT,
    red_flags TEXT,

    load_mode TEXT NOT NULL DEFAULT 'SITUATION'
        CHECK (load_mode IN ('ALWAYS', 'STATE', 'SITUATION')),
    priority INTEGER NOT NULL DEFAULT 50 CHECK (priority BETWEEN 0 AND 100),
    state_conditions TEXT CHECK (state_conditions IS NULL OR json_valid(state_conditions)),
    audience_types TEXT NOT NULL DEFAULT '["PARENT"]' CHECK (json_valid(audience_types)),

    embedding BLOB,
    embedding_model TEXT,
    embedding_dim INTEGER,
    embedding_text_hash TEXT,

    source_author TEXT,
    source_title TEXT,
    source_year INTEGER,

    is_active INTEGER NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
    editable_by TEXT NOT NULL DEFAULT 'ADMIN' CHECK (editable_by IN ('ADMIN', 'TRAINER', 'HIDDEN')),
    retrieval_count INTEGER NOT NULL DEFAULT 0 CHECK (retrieval_count >= 0),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    created_by TEXT NOT NULL,

    version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
    previous_version_id TEXT REFERENCES kb_content_entities(id),
    is_current INTEGER NOT NULL DEFAULT 1 CHECK (is_current IN (0, 1)),
    changed_fields TEXT CHECK (changed_fields IS NULL OR json_valid(changed_fields)),

    CHECK ((embedding IS NULL) = (embedding_model IS NULL)
        AND (embedding IS NULL) = (embedding_dim IS NULL)
        AND (embedding IS NULL) = (embedding_text_hash IS NULL)),
    CHECK (embedding IS NULL OR length(embedding) = 4 * embedding_dim),
    CHECK (is_current = 1 OR is_active = 0)
);

CREATE UNIQUE INDEX idx_kb_current_entity ON kb_content_entities(entity_id) WHERE is_current = 1;
CREATE UNIQUE INDEX idx_kb_entity_version ON kb_content_entities(entity_id, version);
CREATE INDEX idx_kb_entity_type ON kb_content_entities(entity_type) WHERE is_current = 1;
CREATE INDEX idx_kb_load_mode ON kb_content_entities(load_mode, is_active) WHERE is_current = 1;
CREATE INDEX idx_kb_priority ON kb_content_entities(priority DESC, entity_id) WHERE is_current = 1;

CREATE TABLE user_state (
    user_id TEXT PRIMARY KEY NOT NULL,
    user_type TEXT NOT NULL DEFAULT 'PARENT',
    conversation_count INTEGER NOT NULL DEFAULT 0 CHECK (conversation_count >= 0),
    session_type TEXT,
    interaction_rating INTEGER CHECK (interaction_rating BETWEEN 1 AND 5),
    just_logged INTEGER NOT NULL DEFAULT 0 CHECK (just_logged IN (0, 1)),
    skills_practiced TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(skills_practiced)),
    last_topics TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(last_topics)),
    first_seen TEXT,
    last_seen TEXT,
    state_data TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(state_data)),
    updated_at TEXT NOT NULL
);
"#;

/// Version 2: one embedding per retrieval view of an entity (`Entity::views`), per model,
/// with the SHA-256 of the view's text, so a view is re-embedded only when its text changes.
/// Several models' views live side by side.
const V2: &str = "
CREATE TABLE kb_view_embeddings (
    entity_id TEXT NOT NULL,
    view TEXT NOT NULL,
    model TEXT NOT NULL CHECK (length(model) > 0),
    text_hash TEXT NOT NULL,
    dim INTEGER NOT NULL CHECK (dim > 0),
    embedding BLOB NOT NULL,
    CHECK (length(embedding) = 4 * dim),
    PRIMARY KEY (model, entity_id, view)
);
";

/// The migrations, in order; migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[V1, V2];

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The schema version of a database (`PRAGMA user_version`).
pub fn version(conn: &Connection) -> Result<u32, KbError> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

/// Brings a database to [`SCHEMA_VERSION`], one migration per transaction. The version is
/// re-read inside each write transaction, so two processes opening a new database at once
/// do not both migrate it.
pub fn migrate(conn: &mut Connection) -> Result<(), KbError> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current = version(&tx)?;
        if current > SCHEMA_VERSION {
            return Err(KbError::Store(format!(
                "the database has schema version {current}, newer than this assay supports \
                 ({SCHEMA_VERSION}): upgrade assay"
            )));
        }
        let Some(migration) = MIGRATIONS.get(current as usize) else {
            return Ok(());
        };
        tx.execute_batch(migration)?;
        tx.pragma_update(None, "user_version", current + 1)?;
        tx.commit()?;
        tracing::debug!(version = current + 1, "migrated the knowledge-base schema");
    }
}
