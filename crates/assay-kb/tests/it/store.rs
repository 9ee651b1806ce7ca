//! Create, read, update, deactivate, history, crash consistency, retrievals, stats, export.

use assay_core::entity::{EntityType, LoadMode, Priority};
use assay_kb::{
    EntityFilter, EntityUpdate, InvalidEntity, KbError, KbStore, KnowledgeBase, MemoryKb,
    VersionConflict,
};
use serde_json::json;

use crate::backend::Backend;
use crate::{edit, entity};

fn ids(entities: &[assay_core::entity::Entity]) -> Vec<&str> {
    entities.iter().map(|e| e.entity_id.as_str()).collect()
}

fn create_get_and_list<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let a = entity("a", json!({"load_mode": "ALWAYS", "priority": 50}));
    let b = entity(
        "b",
        json!({"load_mode": "ALWAYS", "priority": 90, "audience_types": ["CLINICIAN"]}),
    );
    let c = entity(
        "c",
        json!({"load_mode": "ALWAYS", "priority": 90, "is_active": false}),
    );
    let d = entity("d", json!({"entity_type": "HANDLER", "priority": 99}));
    for e in [&a, &b, &c, &d] {
        store.create(e, &edit("admin", 1)).unwrap();
    }

    let stored = store.get_stored("a").unwrap().unwrap();
    assert_eq!(stored.entity, a);
    assert_eq!(
        (
            stored.version,
            stored.previous_version_id,
            stored.created_by.as_str()
        ),
        (1, None, "admin")
    );
    assert_eq!(
        (stored.created_at, stored.updated_at),
        (edit("", 1).at, edit("", 1).at)
    );
    assert_eq!(
        uuid::Uuid::parse_str(&stored.id).unwrap().get_version_num(),
        4
    );
    assert_eq!(
        store.get("c").unwrap(),
        Some(c),
        "get returns inactive entities"
    );
    assert!(store.get("zzz").unwrap().is_none());
    assert!(store.contains("d").unwrap() && !store.contains("zzz").unwrap());

    assert_eq!(
        ids(&store.list(&EntityFilter::default()).unwrap()),
        ["d", "b", "c", "a"]
    );
    assert_eq!(
        ids(&store.list(&EntityFilter::active(LoadMode::Always)).unwrap()),
        ["b", "a"]
    );
    let parents = EntityFilter {
        audience: Some("PARENT".into()),
        ..EntityFilter::active(LoadMode::Always)
    };
    assert_eq!(ids(&store.list(&parents).unwrap()), ["a"]);
    let handlers = EntityFilter {
        entity_type: Some(EntityType::Handler),
        ..EntityFilter::default()
    };
    assert_eq!(ids(&store.list(&handlers).unwrap()), ["d"]);
    let inactive = EntityFilter {
        active: Some(false),
        ..EntityFilter::default()
    };
    assert_eq!(ids(&store.list(&inactive).unwrap()), ["c"]);
}

fn create_rejects_taken_ids_and_invalid_entities<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    store
        .create(&entity("a", json!({})), &edit("admin", 1))
        .unwrap();
    store.deactivate("a", &edit("admin", 2)).unwrap();
    let err = store
        .create(&entity("a", json!({})), &edit("admin", 3))
        .unwrap_err();
    assert!(
        matches!(&err, KbError::AlreadyExists(id) if id == "a"),
        "{err}"
    );

    let err = store
        .create(&entity("t", json!({"title": " "})), &edit("admin", 1))
        .unwrap_err();
    assert!(matches!(
        err,
        KbError::InvalidEntity {
            problem: InvalidEntity::EmptyTitle,
            ..
        }
    ));
    let bad = entity(
        "h",
        json!({"load_mode": "STATE", "state_conditions": {"days": {"$gtee": 7}}}),
    );
    let err = store
        .create(&bad, &edit("admin", 1))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("entity `h`: state_conditions: field `days`: unknown operator `$gtee`"),
        "{err}"
    );
    assert!(!store.contains("h").unwrap());
}

fn update_keeps_the_old_version<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let v1 = store
        .create(&entity("a", json!({"priority": 50})), &edit("alice", 1))
        .unwrap();
    let update = EntityUpdate {
        title: Some("A, revised".into()),
        priority: Priority::new(80),
        ..EntityUpdate::default()
    };
    let v2 = store.update("a", &update, &edit("bob", 2)).unwrap();

    assert_eq!(
        (v2.version, v2.previous_version_id.as_deref()),
        (2, Some(v1.id.as_str()))
    );
    assert_ne!(v2.id, v1.id);
    assert_eq!(v2.entity.title, "A, revised");
    assert_eq!(v2.entity.priority.get(), 80);
    assert_eq!(
        v2.entity.keywords.as_deref(),
        Some("k"),
        "fields not in the update are kept"
    );
    assert_eq!(store.get("a").unwrap().unwrap(), v2.entity);

    assert_eq!(backend.rows("a"), [(1, false, false), (2, true, true)]);

    let history = store.history("a").unwrap();
    assert_eq!(history.len(), 2);
    let (old, new) = (&history[0], &history[1]);
    assert_eq!(
        (old.id.as_str(), old.version, old.is_current),
        (v1.id.as_str(), 1, false)
    );
    assert_eq!(
        old.entity, v1.entity,
        "the old version's content is kept as it was"
    );
    assert!(old.changed_fields.is_empty());
    assert_eq!(
        (old.created_by.as_str(), old.created_at),
        ("alice", edit("", 1).at)
    );
    assert_eq!(
        old.updated_at,
        edit("", 2).at,
        "superseded when v2 was written"
    );
    assert_eq!(
        (new.id.as_str(), new.version, new.is_current),
        (v2.id.as_str(), 2, true)
    );
    assert_eq!(new.previous_version_id.as_deref(), Some(v1.id.as_str()));
    assert_eq!(
        (new.created_by.as_str(), new.created_at),
        ("bob", edit("", 2).at)
    );
    assert_eq!(new.changed_fields, ["title", "priority"]);
}

fn an_update_that_changes_nothing_adds_no_version<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let v1 = store
        .create(&entity("a", json!({"priority": 50})), &edit("admin", 1))
        .unwrap();
    let same = EntityUpdate {
        title: Some("a".into()),
        priority: Priority::new(50),
        ..EntityUpdate::default()
    };
    assert_eq!(store.update("a", &same, &edit("admin", 2)).unwrap(), v1);
    assert_eq!(
        store
            .update("a", &EntityUpdate::default(), &edit("admin", 2))
            .unwrap(),
        v1
    );
    assert_eq!(store.history("a").unwrap().len(), 1);

    let err = store.update("zzz", &same, &edit("admin", 2)).unwrap_err();
    assert!(
        matches!(&err, KbError::NotFound(id) if id == "zzz"),
        "{err}"
    );
    assert!(matches!(store.history("zzz"), Err(KbError::NotFound(_))));
}

fn deactivate_is_a_soft_delete_with_a_version<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    store
        .create(&entity("a", json!({})), &edit("admin", 1))
        .unwrap();
    let v2 = store.deactivate("a", &edit("admin", 2)).unwrap();
    assert_eq!((v2.version, v2.entity.is_active), (2, false));
    assert!(!store.get("a").unwrap().unwrap().is_active);
    assert!(
        store
            .list(&EntityFilter {
                active: Some(true),
                ..EntityFilter::default()
            })
            .unwrap()
            .is_empty()
    );

    assert_eq!(
        store.deactivate("a", &edit("admin", 3)).unwrap(),
        v2,
        "already inactive: no version"
    );

    let reactivate = EntityUpdate {
        is_active: Some(true),
        ..EntityUpdate::default()
    };
    let v3 = store.update("a", &reactivate, &edit("admin", 4)).unwrap();
    assert_eq!((v3.version, v3.entity.is_active), (3, true));

    let history = store.history("a").unwrap();
    let summary: Vec<(u32, bool, Vec<String>)> = history
        .iter()
        .map(|v| (v.version, v.entity.is_active, v.changed_fields.clone()))
        .collect();
    assert_eq!(
        summary,
        [
            (1, true, vec![]),
            (2, false, vec!["is_active".to_owned()]),
            (3, true, vec!["is_active".to_owned()])
        ]
    );
    assert_eq!(
        backend.rows("a"),
        [(1, false, false), (2, false, false), (3, true, true)]
    );
}

fn a_failure_inside_an_update_leaves_the_store_consistent<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let v1 = store
        .create(&entity("a", json!({})), &edit("admin", 1))
        .unwrap();
    backend.crash_on_insert("a");

    let update = EntityUpdate {
        title: Some("A2".into()),
        ..EntityUpdate::default()
    };
    let err = store
        .update("a", &update, &edit("admin", 2))
        .unwrap_err()
        .to_string();
    assert!(err.contains("simulated crash"), "{err}");
    let err = store
        .deactivate("a", &edit("admin", 2))
        .unwrap_err()
        .to_string();
    assert!(err.contains("simulated crash"), "{err}");

    assert_eq!(
        backend.rows("a"),
        [(1, true, true)],
        "the old row is current and active; no orphan row"
    );
    assert_eq!(store.get_stored("a").unwrap().unwrap(), v1);

    backend.heal();
    assert_eq!(
        store
            .update("a", &update, &edit("admin", 3))
            .unwrap()
            .version,
        2
    );
}

fn a_failure_inside_an_import_writes_nothing<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    store
        .import(
            &[entity("a", json!({})), entity("gone", json!({}))],
            &edit("import", 1),
        )
        .unwrap();
    backend.crash_on_insert("c");

    let files = [
        entity("a", json!({"title": "A2"})),
        entity("b", json!({})),
        entity("c", json!({})),
    ];
    let err = store
        .import(&files, &edit("import", 2))
        .unwrap_err()
        .to_string();
    assert!(err.contains("simulated crash"), "{err}");

    assert_eq!(backend.total_rows(), 2);
    assert_eq!(backend.rows("a"), [(1, true, true)]);
    assert_eq!(backend.rows("gone"), [(1, true, true)]);
}

fn retrievals_are_counted_without_versions<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    for id in ["a", "b"] {
        store
            .create(&entity(id, json!({})), &edit("admin", 1))
            .unwrap();
    }
    let retrieved = ["a", "a", "b", "zzz"].map(String::from);
    assert_eq!(store.record_retrievals(&retrieved).unwrap(), 3);
    let a = store.get_stored("a").unwrap().unwrap();
    assert_eq!((a.retrieval_count, a.version), (2, 1));
    assert_eq!(store.get_stored("b").unwrap().unwrap().retrieval_count, 1);

    let update = EntityUpdate {
        title: Some("A2".into()),
        ..EntityUpdate::default()
    };
    let a = store.update("a", &update, &edit("admin", 2)).unwrap();
    assert_eq!(
        (a.retrieval_count, a.version),
        (2, 2),
        "the count carries over to the new version"
    );
}

fn stats_count_types_modes_embeddings_and_retrievals<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let entities = [
        entity("k1", json!({})),
        entity("k2", json!({"load_mode": "ALWAYS"})),
        entity(
            "h1",
            json!({"entity_type": "HANDLER", "load_mode": "STATE", "state_conditions": {"n": {"eq": 0}}}),
        ),
        entity("old", json!({"is_active": false})),
    ];
    store.import(&entities, &edit("import", 1)).unwrap();
    store
        .update(
            "k1",
            &EntityUpdate {
                priority: Priority::new(10),
                ..EntityUpdate::default()
            },
            &edit("a", 2),
        )
        .unwrap();
    store.set_embedding("k1", "m", &[1.0, 0.0]).unwrap();
    store.set_embedding("k2", "other", &[1.0, 0.0]).unwrap();
    store
        .record_retrievals(&["h1", "k1", "h1", "old"].map(String::from))
        .unwrap();

    let stats = store.stats("m").unwrap();
    assert_eq!(
        (stats.entities, stats.active, stats.inactive, stats.versions),
        (4, 3, 1, 5)
    );
    assert_eq!(
        serde_json::to_value(&stats.by_type).unwrap(),
        json!({"HANDLER": 1, "KNOWLEDGE": 2}),
        "by_type counts active entities"
    );
    assert_eq!(
        serde_json::to_value(&stats.by_load_mode).unwrap(),
        json!({"ALWAYS": 1, "STATE": 1, "SITUATION": 1})
    );
    let coverage = &stats.embeddings;
    assert_eq!(
        (
            coverage.model.as_str(),
            coverage.fresh,
            coverage.stale,
            coverage.missing
        ),
        ("m", 1, 1, 1)
    );
    assert_eq!(stats.total_retrievals, 4);
    assert_eq!(
        stats.top_retrieved,
        [
            ("h1".to_owned(), 2),
            ("k1".to_owned(), 1),
            ("old".to_owned(), 1)
        ]
    );
}

fn export_round_trips_into_files<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let entities = crate::example_kb();
    store.import(&entities, &edit("import", 1)).unwrap();
    store
        .deactivate("handler_crisis", &edit("admin", 2))
        .unwrap();

    let exported = store.export().unwrap();
    assert_eq!(exported.len(), entities.len());
    let types: Vec<EntityType> = exported.iter().map(|e| e.entity_type).collect();
    assert!(types.is_sorted(), "exported by type, in schema order");

    let text = serde_json::to_string_pretty(&exported).unwrap();
    let kb = MemoryKb::new(serde_json::from_str(&text).unwrap()).unwrap();
    assert_eq!(kb.entities(), exported.as_slice());
    for original in &entities {
        let mut expected = original.clone();
        expected.is_active &= original.entity_id != "handler_crisis";
        assert_eq!(
            kb.get(&original.entity_id).unwrap().as_ref(),
            Some(&expected)
        );
    }
    let report = store.import(kb.entities(), &edit("import", 3)).unwrap();
    assert_eq!(report.unchanged.len(), entities.len(), "{report:?}");
}

fn the_traits_are_object_safe_and_shareable<B: Backend>() {
    let backend = B::new();
    let store = std::sync::Arc::new(backend.reopen());
    let kb: std::sync::Arc<dyn KbStore> = store.clone();
    let state: std::sync::Arc<dyn assay_kb::StateStore> = store;
    let worker = std::thread::spawn(move || kb.create(&entity("a", json!({})), &edit("admin", 1)));
    assert_eq!(worker.join().unwrap().unwrap().version, 1);
    assert_eq!(
        state.get_user_state("u", crate::at(1, 9)).unwrap()["conversation_count"],
        0
    );
}

fn the_store_can_be_called_from_async_code<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let created =
        current.block_on(async { store.create(&entity("a", json!({})), &edit("admin", 1)) });
    assert_eq!(created.unwrap().version, 1);
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let store = std::sync::Arc::new(backend.reopen());
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let store = store.clone();
            multi.spawn(async move {
                store.update(
                    "a",
                    &EntityUpdate {
                        title: Some(format!("A{i}")),
                        ..EntityUpdate::default()
                    },
                    &edit("admin", 2),
                )
            })
        })
        .collect();
    let versions: Vec<u32> = multi.block_on(async {
        let mut versions = Vec::new();
        for task in tasks {
            versions.push(task.await.unwrap().unwrap().version);
        }
        versions
    });
    assert_eq!(versions.iter().max(), Some(&5), "{versions:?}");
    assert_eq!(
        backend.rows("a").len(),
        5,
        "four serialised updates, four new versions"
    );
}

/// An edit made from a version that is no longer current is refused inside the store's write
/// transaction, also when another connection (another process) made the newer version; nothing
/// is written. Without an expected version there is no check.
fn stale_edits_are_refused_by_the_store_across_connections<B: Backend>() {
    let backend = B::new();
    let alice = backend.store();
    let bob = backend.reopen();
    alice
        .create(&entity("a", json!({"priority": 50})), &edit("alice", 1))
        .unwrap();
    let priority = |p: u8| EntityUpdate {
        priority: Priority::new(p),
        ..EntityUpdate::default()
    };

    let v2 = alice
        .update("a", &priority(70), &edit("alice", 2).expecting(Some(1)))
        .unwrap();
    assert_eq!(v2.version, 2);
    let stale = bob.update("a", &priority(80), &edit("bob", 2).expecting(Some(1)));
    assert!(
        matches!(
            stale,
            Err(KbError::Conflict(VersionConflict { ref entity_id, expected: 1, current: 2 })) if entity_id == "a"
        ),
        "{stale:?}"
    );
    let stale = bob.deactivate("a", &edit("bob", 2).expecting(Some(1)));
    assert!(matches!(stale, Err(KbError::Conflict(_))), "{stale:?}");
    let message = stale.unwrap_err().to_string();
    assert!(
        message.contains("version 2") && message.contains("version 1"),
        "{message}"
    );
    let current = alice.get_stored("a").unwrap().unwrap();
    assert_eq!(
        (
            current.version,
            current.entity.priority.get(),
            current.entity.is_active
        ),
        (2, 70, true),
        "nothing written"
    );
    assert_eq!(backend.rows("a").len(), 2);

    let v3 = bob
        .update("a", &priority(80), &edit("bob", 3).expecting(Some(2)))
        .unwrap();
    assert_eq!((v3.version, v3.entity.priority.get()), (3, 80));
    let v4 = alice.deactivate("a", &edit("alice", 4)).unwrap();
    assert_eq!((v4.version, v4.entity.is_active), (4, false), "no check");
}

crate::backend::backend_tests!(
    the_store_can_be_called_from_async_code,
    stale_edits_are_refused_by_the_store_across_connections,
    create_get_and_list,
    create_rejects_taken_ids_and_invalid_entities,
    update_keeps_the_old_version,
    an_update_that_changes_nothing_adds_no_version,
    deactivate_is_a_soft_delete_with_a_version,
    a_failure_inside_an_update_leaves_the_store_consistent,
    a_failure_inside_an_import_writes_nothing,
    retrievals_are_counted_without_versions,
    stats_count_types_modes_embeddings_and_retrievals,
    export_round_trips_into_files,
    the_traits_are_object_safe_and_shareable,
);
