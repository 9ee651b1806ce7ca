//! Import: the `kb/` files are the source of truth.

use assay_kb::{KbError, KbStore, KnowledgeBase};

use crate::backend::Backend;
use serde_json::json;

use crate::{edit, entity, example_kb};

fn versions(store: &impl KbStore) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = store
        .export()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e.entity_id.clone(),
                store.get_stored(&e.entity_id).unwrap().unwrap().version,
            )
        })
        .collect();
    out.sort();
    out
}

fn importing_the_same_files_twice_changes_nothing<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let entities = example_kb();
    assert!(
        entities.len() >= 40,
        "the example KB has {} entities",
        entities.len()
    );

    let first = store.import(&entities, &edit("import", 1)).unwrap();
    assert_eq!(first.created.len(), entities.len());
    assert!(first.updated.is_empty() && first.unchanged.is_empty() && first.deactivated.is_empty());
    let before = versions(store);

    let second = store.import(&entities, &edit("import", 2)).unwrap();
    assert!(
        second.created.is_empty() && second.updated.is_empty() && second.deactivated.is_empty(),
        "{second:?}"
    );
    assert_eq!(second.unchanged.len(), entities.len());
    assert_eq!(versions(store), before);
    assert!(before.iter().all(|(_, version)| *version == 1));
    assert_eq!(store.stats("m").unwrap().versions, entities.len());
}

fn a_changed_file_versions_only_what_changed<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let files = vec![
        entity("a", json!({})),
        entity("b", json!({"examples": "Parent: hi"})),
        entity("c", json!({})),
        entity("d", json!({})),
    ];
    store.import(&files, &edit("import", 1)).unwrap();

    let mut changed = files.clone();
    changed[1].examples = Some("Parent: hello".into());
    changed.remove(2); // c is gone from the files
    changed.push(entity("e", json!({})));
    let report = store.import(&changed, &edit("import", 2)).unwrap();
    assert_eq!(report.created, ["e"]);
    assert_eq!(report.updated, ["b"]);
    assert_eq!(report.unchanged, ["a", "d"]);
    assert_eq!(report.deactivated, ["c"]);
    assert_eq!(
        versions(store),
        [("a", 1), ("b", 2), ("c", 2), ("d", 1), ("e", 1)].map(|(id, v)| (id.to_owned(), v))
    );
    assert_eq!(store.history("b").unwrap()[1].changed_fields, ["examples"]);
    assert!(!store.get("c").unwrap().unwrap().is_active);

    let again = store.import(&changed, &edit("import", 3)).unwrap();
    assert!(
        again.deactivated.is_empty(),
        "an entity already inactive is left alone: {again:?}"
    );

    let back = store.import(&files, &edit("import", 4)).unwrap();
    assert_eq!(
        back.updated,
        ["b", "c"],
        "c comes back active, b gets its old text"
    );
    assert_eq!(back.deactivated, ["e"]);
    assert!(store.get("c").unwrap().unwrap().is_active);
}

fn an_import_with_duplicate_ids_is_refused_whole<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let files = [
        entity("a", json!({})),
        entity("b", json!({})),
        entity("a", json!({})),
    ];
    let err = store.import(&files, &edit("import", 1)).unwrap_err();
    assert!(matches!(&err, KbError::Duplicate(id) if id == "a"), "{err}");
    assert!(store.export().unwrap().is_empty());
}

fn an_import_compares_every_content_and_configuration_field<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let base = entity(
        "a",
        json!({"state_conditions": {"n": {"eq": 1}}, "load_mode": "STATE"}),
    );
    store
        .import(std::slice::from_ref(&base), &edit("import", 1))
        .unwrap();
    let variants = [
        json!({"entity_type": "RULE"}),
        json!({"subtype": "x"}),
        json!({"concept_summary": "x"}),
        json!({"guidance_dont": "x"}),
        json!({"red_flags": "x"}),
        json!({"state_conditions": {"n": {"eq": 2}}}),
        json!({"audience_types": ["CLINICIAN"]}),
        json!({"source_year": 2020}),
        json!({"editable_by": "HIDDEN"}),
    ];
    for variant in &variants {
        let mut value = serde_json::to_value(&base).unwrap();
        for (k, v) in variant.as_object().unwrap() {
            value[k] = v.clone();
        }
        let changed = serde_json::from_value(value).unwrap();
        let report = store.import(&[changed], &edit("import", 2)).unwrap();
        assert_eq!(report.updated, ["a"], "{variant}");
        let field = variant.as_object().unwrap().keys().next().unwrap();
        let history = store.history("a").unwrap();
        assert_eq!(
            history.last().unwrap().changed_fields,
            std::slice::from_ref(field)
        );
        // Going back to the base is a change too.
        let report = store
            .import(std::slice::from_ref(&base), &edit("import", 3))
            .unwrap();
        assert_eq!(report.updated, ["a"], "{variant}");
    }
    assert_eq!(store.history("a").unwrap().len(), 1 + 2 * variants.len());
}

crate::backend::backend_tests!(
    importing_the_same_files_twice_changes_nothing,
    a_changed_file_versions_only_what_changed,
    an_import_with_duplicate_ids_is_refused_whole,
    an_import_compares_every_content_and_configuration_field,
);
