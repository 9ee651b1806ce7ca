//! Embeddings: stored on the current version, fresh only for the same model and text.

use assay_core::entity::{LoadMode, Priority};
use assay_kb::{EntityFilter, EntityUpdate, KbStore, Staleness};

use crate::backend::Backend;
use serde_json::json;

use crate::{edit, entity};

fn status(store: &impl KbStore, model: &str) -> Vec<(String, Staleness)> {
    store
        .embedding_status(&EntityFilter::default(), model)
        .unwrap()
}

fn status_of(store: &impl KbStore, id: &str, model: &str) -> Staleness {
    status(store, model)
        .into_iter()
        .find(|(e, _)| e == id)
        .unwrap()
        .1
}

fn staleness_follows_model_and_text<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    store
        .create(&entity("a", json!({"priority": 60})), &edit("admin", 1))
        .unwrap();
    store
        .create(&entity("b", json!({})), &edit("admin", 1))
        .unwrap();
    assert_eq!(
        status(store, "m"),
        [
            ("a".to_owned(), Staleness::Missing),
            ("b".to_owned(), Staleness::Missing)
        ]
    );

    store.set_embedding("a", "m", &[0.25, -1.5, 3.0]).unwrap();
    assert_eq!(status_of(store, "a", "m"), Staleness::Fresh);
    assert_eq!(
        status_of(store, "a", "m2"),
        Staleness::OtherModel { model: "m".into() }
    );
    assert_eq!(
        store.get_stored("a").unwrap().unwrap().version,
        1,
        "no version for an embedding"
    );

    // Fields outside the embedding text (003 §8) keep it fresh; the embedding carries over.
    let update = EntityUpdate {
        concept_summary: Some(Some("not embedded".into())),
        priority: Priority::new(70),
        ..EntityUpdate::default()
    };
    store.update("a", &update, &edit("admin", 2)).unwrap();
    assert_eq!(status_of(store, "a", "m"), Staleness::Fresh);

    let update = EntityUpdate {
        keywords: Some(Some("new keywords".into())),
        ..EntityUpdate::default()
    };
    store.update("a", &update, &edit("admin", 3)).unwrap();
    assert_eq!(status_of(store, "a", "m"), Staleness::TextChanged);
    assert!(
        store
            .current_embeddings(&EntityFilter::default(), "m")
            .unwrap()
            .is_empty()
    );

    store.set_embedding("a", "m", &[1.0, 2.0]).unwrap();
    assert!(status_of(store, "a", "m").is_fresh());
    assert_eq!(
        store
            .current_embeddings(&EntityFilter::default(), "m")
            .unwrap(),
        [("a".to_owned(), vec![1.0, 2.0])]
    );
}

fn current_embeddings_are_fresh_filtered_and_ordered<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let entities = [
        entity("low", json!({"priority": 10})),
        entity("high", json!({"priority": 90})),
        entity("always", json!({"load_mode": "ALWAYS"})),
        entity("off", json!({"is_active": false})),
        entity("other", json!({})),
    ];
    store.import(&entities, &edit("import", 1)).unwrap();
    for (id, x) in [("low", 1.0), ("high", 2.0), ("always", 3.0), ("off", 4.0)] {
        store.set_embedding(id, "m", &[x, 0.5]).unwrap();
    }
    store.set_embedding("other", "m2", &[5.0, 0.5]).unwrap();

    let filter = EntityFilter::active(LoadMode::Situation);
    let embeddings = store.current_embeddings(&filter, "m").unwrap();
    assert_eq!(
        embeddings,
        [
            ("high".to_owned(), vec![2.0, 0.5]),
            ("low".to_owned(), vec![1.0, 0.5])
        ]
    );
    let all = store
        .current_embeddings(&EntityFilter::default(), "m")
        .unwrap();
    assert_eq!(all.len(), 4);
}

fn view_embeddings_are_kept_per_model_and_replaced_or_removed<B: Backend>() {
    use assay_kb::{ViewEmbedding, view_text_hash};
    let backend = B::new();
    let store = backend.store();
    let row = |entity: &str, view: &str, text: &str, x: f32| ViewEmbedding {
        entity_id: entity.into(),
        view: view.into(),
        text_hash: view_text_hash(text),
        vector: vec![x, 1.0],
    };
    store
        .set_view_embeddings(
            "m1",
            &[row("a", "title", "A", 0.1), row("a", "keywords", "k", 0.2)],
            &[],
        )
        .unwrap();
    store
        .set_view_embeddings("m2", &[row("a", "title", "A", 0.9)], &[])
        .unwrap();
    // Replace one view's text, remove the other.
    store
        .set_view_embeddings(
            "m1",
            &[row("a", "title", "A2", 0.3)],
            &[("a".into(), "keywords".into())],
        )
        .unwrap();
    let m1 = store.view_embeddings("m1").unwrap();
    assert_eq!(m1, vec![row("a", "title", "A2", 0.3)]);
    assert_eq!(
        store.view_embeddings("m2").unwrap(),
        vec![row("a", "title", "A", 0.9)]
    );
    assert!(
        store
            .set_view_embeddings("m1", &[row("a", "title", "A", f32::NAN)], &[])
            .is_err()
    );
}

crate::backend::backend_tests!(
    staleness_follows_model_and_text,
    current_embeddings_are_fresh_filtered_and_ordered,
    view_embeddings_are_kept_per_model_and_replaced_or_removed,
);
