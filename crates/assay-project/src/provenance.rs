//! Provenance kept complete: a generated case's `entity_versions` lists every entity the case
//! names in any expectation field (expected, secondary, not expected, rank checks, handlers,
//! matches), with the version it had when the case came to name it, so an edit to any of them
//! makes the case stale (`assay_run::freshness::StaleCheck`).
//!
//! The versions are recorded where a case comes to name an entity: when a draft is made (the
//! calibrator's secondaries included), when it is accepted (what an edit added), when
//! calibration (or a human override) changes an accepted case's expectations, and when a
//! reviewer confirms it. An entity already listed keeps its version: only a confirmation moves
//! it.

use std::collections::BTreeMap;

use assay_core::bank::Case;
use assay_core::draft::Provenance;
use assay_core::entity::Entity;
use assay_kb::store::KbStore;

use crate::HarnessError;

/// An entity's fields as a JSON object, in schema order.
pub fn entity_map(entity: &Entity) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(entity) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

/// Every entity's current version in `store` (active or not).
pub fn current_versions(store: &dyn KbStore) -> Result<BTreeMap<String, u32>, HarnessError> {
    let mut out = BTreeMap::new();
    for e in assay_kb::KnowledgeBase::list(store, &assay_kb::EntityFilter::default())? {
        if let Some(stored) = store.get_stored(&e.entity_id)? {
            out.insert(e.entity_id.clone(), stored.version);
        }
    }
    Ok(out)
}

/// Adds to `provenance` the version in `versions` of each of `ids` it does not list yet (an id
/// the knowledge base lacks, such as a `known_missing` one, is left out). Returns the ids added.
pub fn record<'a>(
    provenance: &mut Provenance,
    ids: impl IntoIterator<Item = &'a str>,
    versions: &BTreeMap<String, u32>,
) -> Vec<String> {
    let mut added = Vec::new();
    for id in ids {
        if provenance.entity_versions.contains_key(id) {
            continue;
        }
        if let Some(v) = versions.get(id) {
            provenance.entity_versions.insert(id.to_owned(), *v);
            added.push(id.to_owned());
        }
    }
    added
}

/// Adds to `case`'s provenance (when it has one) the version of every entity an expectation
/// field names that it does not list yet. Returns the ids added.
pub fn record_named<C: Case + ?Sized>(
    case: &mut C,
    versions: &BTreeMap<String, u32>,
) -> Vec<String> {
    let named: Vec<String> = case
        .expects()
        .into_iter()
        .chain(case.excludes())
        .cloned()
        .collect();
    match case.provenance_mut() {
        Some(p) => record(p, named.iter().map(String::as_str), versions),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::bank::{PatternCase, SemanticCase};

    fn versions() -> BTreeMap<String, u32> {
        [("a", 3), ("b", 1), ("c", 7), ("d", 2)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect()
    }

    #[test]
    fn every_entity_an_expectation_field_names_is_recorded_and_listed_ones_keep_their_version() {
        let mut case: SemanticCase = serde_json::from_value(serde_json::json!({
            "test_id": "GEN-1", "prompt": "p",
            "expected_primary": ["a"], "expected_secondary": ["b"], "not_expected": ["c"],
            "rank_check": [{"higher": "a", "lower": "d"}],
            "known_missing": ["gone"],
            "provenance": {"method": "llm", "entity_id": "a", "entity_versions": {"a": 1},
                "generated_at": "2026-11-28T00:00:00Z"}
        }))
        .unwrap();
        let added = record_named(&mut case, &versions());
        assert_eq!(added, ["b", "d", "c"]);
        let p = case.provenance.as_ref().unwrap();
        // `a` keeps the version it was made from (only a confirmation moves it); the entity the
        // knowledge base lacks is not listed.
        assert_eq!(
            p.entity_versions,
            [("a", 1), ("b", 1), ("c", 7), ("d", 2)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect::<BTreeMap<_, _>>()
        );
        // Complete already: nothing more.
        assert!(record_named(&mut case, &versions()).is_empty());

        // A pattern case's matches and secondaries too; a case without provenance is left alone.
        let mut pattern: PatternCase = serde_json::from_value(serde_json::json!({
            "test_id": "P1", "prompt": "p", "expected_matches": ["a"],
            "expected_secondary": ["b"], "not_expected_matches": ["c"]
        }))
        .unwrap();
        assert!(record_named(&mut pattern, &versions()).is_empty());
        assert!(pattern.provenance.is_none());
    }
}
