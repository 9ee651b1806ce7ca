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

/// PostgreSQL's HNSW search (`PgStore::nearest`): the nearest current, active entities of the
/// model, nearest first, with any `ef_search`, repeated on pooled connections (the statement is
/// prepared once per connection and the `SET` is pipelined with it).
#[cfg(feature = "postgres")]
#[test]
fn postgres_nearest_finds_the_nearest_active_entities_of_the_model() {
    use crate::backend::Postgres;

    let backend = Postgres::new();
    let store = backend.store();
    // Pseudo-random vectors, distinct for every i (a tie in distance would make the exact
    // order, and so the comparison, arbitrary).
    let vector = |i: usize| -> Vec<f32> {
        let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
        (0..8)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    };
    for i in 0..40 {
        let id = format!("e{i:02}");
        store
            .create(&entity(&id, json!({})), &edit("admin", 1))
            .unwrap();
        store.set_embedding(&id, "m", &vector(i)).unwrap();
    }
    // Right on the query, but another model's or deactivated: never returned.
    let query = vector(100);
    store
        .create(&entity("other_model", json!({})), &edit("admin", 1))
        .unwrap();
    store.set_embedding("other_model", "m2", &query).unwrap();
    store
        .create(&entity("retired", json!({})), &edit("admin", 1))
        .unwrap();
    store.set_embedding("retired", "m", &query).unwrap();
    store.deactivate("retired", &edit("admin", 2)).unwrap();
    store.ensure_vector_index(8).unwrap();

    let cosine_distance = |a: &[f32], b: &[f32]| {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        1.0 - dot / (norm(a) * norm(b))
    };
    let mut exact: Vec<(String, f32)> = (0..40)
        .map(|i| (format!("e{i:02}"), cosine_distance(&query, &vector(i))))
        .collect();
    exact.sort_by(|a, b| a.1.total_cmp(&b.1));
    exact.truncate(5);
    for ef in [5, 40, 40, 200, 1] {
        let found = store.nearest("m", &query, 5, ef).unwrap();
        let ids: Vec<&str> = found.iter().map(|(id, _)| id.as_str()).collect();
        let want: Vec<&str> = exact.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, want, "ef_search {ef}");
        for ((_, got), (_, distance)) in found.iter().zip(&exact) {
            assert!((got - distance).abs() < 1e-5, "{got} against {distance}");
        }
    }
    assert!(
        store
            .nearest("m", &[1.0, 2.0], 5, 40)
            .is_ok_and(|v| v.is_empty()),
        "a dimension without embeddings finds nothing"
    );
}

/// Issue 20: the search a run takes its candidates from (`EmbeddingIndex::search_embeddings`)
/// finds, through the HNSW index, what the exact search finds, with the load-mode and audience
/// filters applied in the query; the stored text hash comes back so the caller can tell a stale
/// embedding; and a filter that only a few rows pass still fills the limit (iterative scan).
#[cfg(feature = "postgres")]
#[test]
fn postgres_index_search_filters_like_the_exact_search() {
    use assay_kb::{
        EmbeddingIndex, EmbeddingSearch, KnowledgeBase, SearchMethod, embedding_text_hash,
    };

    use crate::backend::Postgres;

    let backend = Postgres::new();
    let store = backend.store();
    // Pseudo-random vectors, distinct for every i (a tie in distance would make the exact
    // order, and so the comparison, arbitrary).
    let vector = |i: usize| -> Vec<f32> {
        let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
        (0..8)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    };
    // 300 SITUATION entities; every tenth is for clinicians only; a few ALWAYS entities.
    for i in 0..300 {
        let id = format!("s{i:03}");
        let audience = if i % 10 == 0 { "CLINICIAN" } else { "PARENT" };
        store
            .create(
                &entity(&id, json!({"audience_types": [audience]})),
                &edit("admin", 1),
            )
            .unwrap();
        store.set_embedding(&id, "m", &vector(i)).unwrap();
    }
    for i in 0..5 {
        let id = format!("always{i}");
        store
            .create(
                &entity(&id, json!({"load_mode": "ALWAYS"})),
                &edit("admin", 1),
            )
            .unwrap();
        store.set_embedding(&id, "m", &vector(i)).unwrap();
    }
    assert!(store.has_index(8).unwrap(), "made with the first embedding");
    assert!(!store.has_index(9).unwrap());
    assert!(!store.has_index(4096).unwrap(), "too wide for pgvector");
    assert_eq!(store.embedding_dimension("m").unwrap(), Some(8));
    assert_eq!(store.embedding_dimension("other").unwrap(), None);
    assert!(store.describe().starts_with("PostgreSQL HNSW (pgvector "));

    let ids = |hits: &[assay_kb::EmbeddingHit]| -> Vec<String> {
        let mut ids: Vec<String> = hits.iter().map(|h| h.entity_id.clone()).collect();
        ids.sort();
        ids
    };
    for q in [3usize, 50, 117, 299] {
        let query = vector(q * 13 + 1);
        for (audience, limit) in [("PARENT", 15), ("CLINICIAN", 15), ("CLINICIAN", 30)] {
            let search = |method| EmbeddingSearch {
                model: "m",
                query: &query,
                limit,
                load_mode: Some(assay_core::entity::LoadMode::Situation),
                audience: Some(audience),
                method,
            };
            let exact = store
                .search_embeddings(&search(SearchMethod::Exact))
                .unwrap();
            let index = store
                .search_embeddings(&search(SearchMethod::Index { ef_search: 100 }))
                .unwrap();
            assert_eq!(exact.len(), limit, "{audience}");
            assert_eq!(ids(&index), ids(&exact), "query {q}, {audience}, {limit}");
            for hit in &index {
                let n: usize = hit.entity_id[1..].parse().unwrap();
                assert_eq!(hit.vector, vector(n));
                assert_eq!(
                    n.is_multiple_of(10),
                    audience == "CLINICIAN",
                    "{}",
                    hit.entity_id
                );
                let stored = store.get(&hit.entity_id).unwrap().unwrap();
                assert_eq!(hit.text_hash, embedding_text_hash(&stored));
            }
        }
    }
    // A changed text keeps the old embedding, with the old text's hash: the caller sees it is
    // stale.
    let update: assay_kb::EntityUpdate =
        serde_json::from_value(json!({"keywords": "changed"})).unwrap();
    store.update("s001", &update, &edit("admin", 2)).unwrap();
    let hits = store
        .search_embeddings(&EmbeddingSearch {
            model: "m",
            query: &vector(1),
            limit: 1,
            load_mode: Some(assay_core::entity::LoadMode::Situation),
            audience: None,
            method: SearchMethod::Index { ef_search: 40 },
        })
        .unwrap();
    assert_eq!(hits[0].entity_id, "s001");
    let current = store.get("s001").unwrap().unwrap();
    assert_ne!(hits[0].text_hash, embedding_text_hash(&current));
    // Another model, or a limit of 0: nothing.
    let none = EmbeddingSearch {
        model: "other",
        query: &vector(1),
        limit: 5,
        load_mode: None,
        audience: None,
        method: SearchMethod::Index { ef_search: 40 },
    };
    assert!(store.search_embeddings(&none).unwrap().is_empty());
    let zero = EmbeddingSearch {
        model: "m",
        limit: 0,
        ..none
    };
    assert!(store.search_embeddings(&zero).unwrap().is_empty());
    // `nearest` still answers in exact order on a connection a filtered search used.
    for _ in 0..10 {
        let found = store.nearest("m", &vector(7), 3, 40).unwrap();
        assert!(found.windows(2).all(|w| w[0].1 <= w[1].1), "{found:?}");
    }
}
