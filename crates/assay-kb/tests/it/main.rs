//! Integration tests of assay-kb: the versioned store and user state, on every backend (see
//! [`backend`]).

mod backend;
mod embeddings;
mod import;
mod store;
mod user_state;

use std::path::{Path, PathBuf};

use assay_core::entity::Entity;
use assay_kb::{Edit, SqliteStore};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};

/// A KNOWLEDGE entity titled after its id, with `extra` fields.
pub fn entity(id: &str, extra: Value) -> Entity {
    let mut value =
        json!({"entity_id": id, "entity_type": "KNOWLEDGE", "title": id, "keywords": "k"});
    let (Value::Object(object), Value::Object(extra)) = (&mut value, extra) else {
        panic!("extra fields must be an object")
    };
    object.extend(extra);
    serde_json::from_value(value).unwrap()
}

/// 2026-11-`day` at `hour`:00 UTC.
pub fn at(day: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, day, hour, 0, 0).unwrap()
}

/// A change by `by` on 2026-11-`day`.
pub fn edit(by: &str, day: u32) -> Edit {
    Edit::new(by, at(day, 12))
}

/// A store in a fresh temporary folder, with the database path (to open a second connection).
pub fn file_store() -> (tempfile::TempDir, PathBuf, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".assay/kb.db");
    let store = SqliteStore::open(&path).unwrap();
    (dir, path, store)
}

/// The bundled example project's knowledge base.
pub fn example_kb() -> Vec<Entity> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/coparent/kb");
    assay_kb::load_dir(&dir).unwrap().kb.entities().to_vec()
}
