use super::*;
use assay_core::bank::PatternRules;
use assay_kb::MemoryKb;
use serde_json::json;

fn kb() -> MemoryKb {
    let long = "word ".repeat(400);
    let entities = json!([
        {"entity_id": "persona", "entity_type": "PERSONA", "title": "Persona", "load_mode": "ALWAYS", "priority": 100, "concept_summary": "Warm and direct."},
        {"entity_id": "guard", "entity_type": "GUARDRAIL", "title": "Guardrail", "load_mode": "ALWAYS", "priority": 100, "guidance_do": "Stay safe."},
        {"entity_id": "clin", "entity_type": "PERSONA", "title": "Clinician", "load_mode": "ALWAYS", "audience_types": ["CLINICIAN"]},
        {"entity_id": "handler_first", "entity_type": "HANDLER", "title": "First", "load_mode": "STATE", "priority": 10,
         "state_conditions": {"conversation_count": 0}, "guidance_do": long},
        {"entity_id": "handler_crisis", "entity_type": "HANDLER", "title": "Crisis", "priority": 100, "guidance_do": "Call 988."},
        {"entity_id": "rule_crisis", "entity_type": "RULE", "title": "Crisis rule", "priority": 100},
        {"entity_id": "gray_rock", "entity_type": "KNOWLEDGE", "title": "Gray rock", "priority": 70, "guidance_do": long},
        {"entity_id": "biff", "entity_type": "SCRIPT", "title": "BIFF", "priority": 60},
        {"entity_id": "boundaries", "entity_type": "KNOWLEDGE", "title": "Boundaries", "priority": 50},
        {"entity_id": "far", "entity_type": "KNOWLEDGE", "title": "Far", "priority": 90}
    ]);
    MemoryKb::new(serde_json::from_value(entities).unwrap()).unwrap()
}

fn rules() -> PatternMatcher {
    let rules: PatternRules = serde_json::from_value(json!({
        "crisis_patterns": [{"pattern": "want to end it", "entities": ["handler_crisis", "rule_crisis", "ghost"], "is_critical": true}],
        "keyword_boosts": [{"keywords": ["gray rock"], "entity": "gray_rock"}]
    }))
    .unwrap();
    PatternMatcher::new(&rules).unwrap()
}

fn pipeline(budget: usize) -> Pipeline {
    let embeddings = vec![
        ("gray_rock".to_owned(), vec![1.0, 0.0, 0.0]),
        ("biff".to_owned(), vec![0.8, 0.6, 0.0]),
        ("boundaries".to_owned(), vec![0.7, 0.0, 0.714_142_8]),
        ("far".to_owned(), vec![0.0, 0.0, 1.0]),
        ("persona".to_owned(), vec![1.0, 0.0, 0.0]),
    ];
    let config = RetrievalConfig {
        max_tokens_budget: budget,
        ..RetrievalConfig::default()
    };
    Pipeline::new(&kb(), Some(Arc::new(rules())), &embeddings, config).unwrap()
}

fn ids(r: &Retrieval) -> Vec<&str> {
    r.entities.iter().map(|e| e.entity_id.as_str()).collect()
}

fn state(v: serde_json::Value) -> UserState {
    match v {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn stages_threshold_and_scores() {
    let p = pipeline(100_000);
    assert_eq!(p.indexed(), 4, "only SITUATION entities are indexed");
    let r = p
        .retrieve(
            "she keeps baiting me",
            Some(&[1.0, 0.0, 0.0]),
            &state(json!({"conversation_count": 3})),
            "PARENT",
        )
        .unwrap();
    assert_eq!(
        ids(&r),
        vec!["guard", "persona", "gray_rock", "biff", "boundaries"]
    );
    let gray = &r.entities[2];
    assert_eq!(gray.stage, Stage::Semantic);
    assert!((gray.final_score - (1.0 + 0.7 * 0.15)).abs() < 1e-5);
    assert!(
        r.dropped
            .iter()
            .any(|d| d.entity_id == "far" && matches!(d.reason, DropReason::Threshold { .. }))
    );
    assert!(r.entities.iter().all(|e| e.tokens > 0));
}

#[test]
fn crisis_comes_first_and_missing_rule_entities_are_reported() {
    let p = pipeline(100_000);
    let r = p
        .retrieve(
            "i just want to end it",
            Some(&[1.0, 0.0, 0.0]),
            &UserState::new(),
            "PARENT",
        )
        .unwrap();
    assert_eq!(&ids(&r)[..2], &["handler_crisis", "rule_crisis"]);
    assert!(
        r.dropped
            .iter()
            .any(|d| d.entity_id == "ghost" && d.reason == DropReason::Unavailable)
    );
}

#[test]
fn duplicates_are_kept_once_with_every_stage() {
    let p = pipeline(100_000);
    let r = p
        .retrieve(
            "is gray rock the answer",
            Some(&[1.0, 0.0, 0.0]),
            &UserState::new(),
            "PARENT",
        )
        .unwrap();
    let gray: Vec<_> = r
        .entities
        .iter()
        .filter(|e| e.entity_id == "gray_rock")
        .collect();
    assert_eq!(gray.len(), 1);
    assert!(gray[0].stage == Stage::Keyword || gray[0].also.contains(&Stage::Keyword));
    assert!(
        r.dropped
            .iter()
            .any(|d| matches!(d.reason, DropReason::Duplicate { .. }))
    );
}

#[test]
fn audience_filters_always_and_semantic() {
    let p = pipeline(100_000);
    let r = p
        .retrieve(
            "hello",
            Some(&[1.0, 0.0, 0.0]),
            &UserState::new(),
            "CLINICIAN",
        )
        .unwrap();
    assert_eq!(ids(&r), vec!["clin"]);
}

#[test]
fn a_handler_displaces_knowledge_when_the_budget_is_short() {
    let p = pipeline(0);
    let first = p.token_counts().unwrap()["handler_first"];
    let gray = p.token_counts().unwrap()["gray_rock"];
    let small: usize = ["guard", "persona", "biff", "boundaries"]
        .iter()
        .map(|id| p.token_counts().unwrap()[*id])
        .sum();
    // Room for the small ones and gray rock, not for the handler as well.
    let budget = small + gray + first / 2;
    let p = pipeline(budget);
    let r = p
        .retrieve(
            "she keeps baiting me",
            Some(&[1.0, 0.0, 0.0]),
            &state(json!({"conversation_count": 0})),
            "PARENT",
        )
        .unwrap();
    let got = ids(&r);
    assert!(got.contains(&"handler_first"), "{got:?}");
    assert!(!got.contains(&"gray_rock"), "{got:?}");
    assert!(r.dropped.iter().any(|d| d.entity_id == "gray_rock"
        && d.reason
            == DropReason::Displaced {
                by: "handler_first".into()
            }));
    assert!(r.tokens_used <= budget);
}

#[test]
fn dense_single_rank_is_exactly_nearest() {
    let p = pipeline(100_000);
    let q = [0.6, 0.8, 0.0];
    let ranked: Vec<(String, f32)> = p
        .rank(&q, "anything", "PARENT", 3)
        .unwrap()
        .into_iter()
        .map(|h| (h.entity_id, h.score))
        .collect();
    assert_eq!(ranked, p.nearest(&q, "PARENT", 3).unwrap());
    let r = p
        .retrieve("anything", Some(&q), &UserState::new(), "PARENT")
        .unwrap();
    assert!(r.matches.is_empty(), "no match detail in 003's pipeline");
}

fn view(id: &str, view: &str, v: [f32; 3]) -> ViewVector {
    ViewVector {
        entity_id: id.into(),
        view: Some(view.into()),
        vector: v.to_vec(),
    }
}

#[test]
fn an_entity_scores_its_best_view() {
    let views = vec![
        view("gray_rock", "title", [1.0, 0.0, 0.0]),
        view("gray_rock", "keywords", [0.0, 1.0, 0.0]),
        view("biff", "title", [0.6, 0.8, 0.0]),
        view("far", "title", [0.0, 0.0, 1.0]),
    ];
    let p = Pipeline::with_views(&kb(), None, &views, RetrievalConfig::default()).unwrap();
    let hits = p.rank(&[0.0, 1.0, 0.0], "", "PARENT", 10).unwrap();
    assert_eq!(hits[0].entity_id, "gray_rock");
    assert_eq!(hits[0].view.as_deref(), Some("keywords"));
    assert!((hits[0].score - 1.0).abs() < 1e-6);
    assert_eq!(hits.len(), 3, "one hit per entity");
    let r = p
        .retrieve("", Some(&[0.0, 1.0, 0.0]), &UserState::new(), "PARENT")
        .unwrap();
    assert_eq!(r.matches[0].view.as_deref(), Some("keywords"));
}

#[test]
fn hybrid_adds_a_normalised_lexical_bonus() {
    // Same cosine for gray_rock and boundaries; the message names the boundaries entity.
    let views = vec![
        view("gray_rock", "title", [1.0, 0.0, 0.0]),
        view("boundaries", "title", [1.0, 0.0, 0.0]),
    ];
    let config = RetrievalConfig {
        mode: RankMode::Hybrid,
        lexical_weight: 0.5,
        ..RetrievalConfig::default()
    };
    let p = Pipeline::with_views(&kb(), None, &views, config).unwrap();
    let hits = p
        .rank(
            &[1.0, 0.0, 0.0],
            "what are healthy boundaries?",
            "PARENT",
            10,
        )
        .unwrap();
    assert_eq!(hits[0].entity_id, "boundaries");
    assert_eq!(hits[0].lexical, Some(1.0));
    assert!((hits[0].score - 1.5).abs() < 1e-6);
    assert_eq!(hits[0].lexical_view.as_deref(), Some("title"));
    assert_eq!(hits[1].lexical, Some(0.0));
    assert!((hits[1].score - 1.0).abs() < 1e-6);
    // With no lexical match at all, the order is the dense one.
    let hits = p.rank(&[1.0, 0.0, 0.0], "zzz", "PARENT", 10).unwrap();
    assert!(hits.iter().all(|h| h.lexical == Some(0.0)));
}

#[test]
fn without_a_query_the_semantic_stage_is_skipped() {
    let p = pipeline(100_000);
    let r = p
        .retrieve("hello", None, &UserState::new(), "PARENT")
        .unwrap();
    assert_eq!(ids(&r), vec!["guard", "persona"]);
    assert_eq!(r.notes.len(), 1);
}

/// An index over the test knowledge base's embeddings, answering from memory: exactly, or
/// with its best answers left out (`miss` of them), as an approximate index might.
#[derive(Debug)]
struct FakeIndex {
    rows: Vec<(Entity, Vec<f32>, String)>,
    miss: usize,
    calls: std::sync::Mutex<Vec<(usize, SearchMethod)>>,
}

impl FakeIndex {
    fn new(embeddings: &[(&str, [f32; 3])], miss: usize) -> FakeIndex {
        let kb = kb();
        let rows = embeddings
            .iter()
            .map(|(id, v)| {
                let e = kb.get(id).unwrap().unwrap();
                let hash = embedding_text_hash(&e);
                (e, v.to_vec(), hash)
            })
            .collect();
        FakeIndex {
            rows,
            miss,
            calls: std::sync::Mutex::default(),
        }
    }
}

impl EmbeddingIndex for FakeIndex {
    fn describe(&self) -> String {
        "fake".into()
    }

    fn has_index(&self, _: usize) -> Result<bool, assay_kb::KbError> {
        Ok(true)
    }

    fn embedding_dimension(&self, _: &str) -> Result<Option<usize>, assay_kb::KbError> {
        Ok(Some(3))
    }

    fn search_embeddings(
        &self,
        search: &EmbeddingSearch<'_>,
    ) -> Result<Vec<assay_kb::EmbeddingHit>, assay_kb::KbError> {
        self.calls
            .lock()
            .unwrap()
            .push((search.limit, search.method));
        let mut hits: Vec<(f32, assay_kb::EmbeddingHit)> = self
            .rows
            .iter()
            .filter(|(e, _, _)| {
                e.is_active
                    && search.load_mode.is_none_or(|m| m == e.load_mode)
                    && search.audience.is_none_or(|a| e.has_audience(a))
            })
            .map(|(e, v, hash)| {
                let score = crate::vector::dot(v, search.query);
                let hit = assay_kb::EmbeddingHit {
                    entity_id: e.entity_id.clone(),
                    text_hash: hash.clone(),
                    vector: v.clone(),
                };
                (score, hit)
            })
            .collect();
        hits.sort_by(|a, b| b.0.total_cmp(&a.0));
        let skip = match search.method {
            SearchMethod::Index { .. } => self.miss,
            SearchMethod::Exact => 0,
        };
        Ok(hits
            .into_iter()
            .skip(skip)
            .take(search.limit)
            .map(|(_, h)| h)
            .collect())
    }
}

const EMBEDDINGS: [(&str, [f32; 3]); 4] = [
    ("gray_rock", [1.0, 0.0, 0.0]),
    ("biff", [0.8, 0.6, 0.0]),
    ("boundaries", [0.7, 0.0, 0.714_142_8]),
    ("far", [0.0, 0.0, 1.0]),
];

fn index_pipeline(index: Arc<FakeIndex>) -> Pipeline {
    // The budget of `pipeline(100_000)`, which the index pipeline is compared with.
    let config = RetrievalConfig {
        mode: RankMode::Dense,
        max_tokens_budget: 100_000,
        ..RetrievalConfig::default()
    };
    let search = IndexSearch {
        index,
        model: "m".into(),
        ef_search: 40,
    };
    Pipeline::with_index(&kb(), Some(Arc::new(rules())), search, config).unwrap()
}

/// Every SITUATION entity of the PARENT audience with an embedding (as a run has them,
/// after its refresh), so an index never comes up short and never falls back; in the
/// order a store lists them (priority, then id), which is how the exact scan breaks ties
/// (`handler_crisis` and `far` tie at 0 for the first query).
const EVERY_SITUATION: [(&str, [f32; 3]); 6] = [
    ("handler_crisis", [0.0, -1.0, 0.0]),
    ("rule_crisis", [-0.6, 0.0, -0.8]),
    EMBEDDINGS[3],
    EMBEDDINGS[0],
    EMBEDDINGS[1],
    EMBEDDINGS[2],
];

#[test]
fn an_index_pipeline_selects_what_the_exact_one_selects() {
    // The exact scan in memory over the same embeddings, with the same settings.
    let embeddings: Vec<(String, Vec<f32>)> = EVERY_SITUATION
        .iter()
        .map(|(id, v)| ((*id).to_owned(), v.to_vec()))
        .collect();
    let config = RetrievalConfig {
        mode: RankMode::Dense,
        max_tokens_budget: 100_000,
        ..RetrievalConfig::default()
    };
    let exact = Pipeline::new(&kb(), Some(Arc::new(rules())), &embeddings, config).unwrap();
    let index = Arc::new(FakeIndex::new(&EVERY_SITUATION, 0));
    let p = index_pipeline(index.clone());
    assert_eq!(p.index_description().as_deref(), Some("fake"));
    assert_eq!(exact.index_description(), None);
    for q in [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.1, 0.99]] {
        for k in [1, 2, 3, 10] {
            assert_eq!(
                p.nearest(&q, "PARENT", k).unwrap(),
                exact.nearest(&q, "PARENT", k).unwrap(),
                "{q:?} k {k}"
            );
        }
        for message in ["she keeps baiting me", "is gray rock the answer"] {
            let state = UserState::new();
            assert_eq!(
                p.retrieve(message, Some(&q), &state, "PARENT").unwrap(),
                exact.retrieve(message, Some(&q), &state, "PARENT").unwrap()
            );
        }
    }
    let stats = p.index_stats().unwrap();
    assert!(stats.searches > 0);
    assert_eq!(stats.exact_fallbacks, 0);
    // An audience without SITUATION entities asks nothing of the index.
    let calls = index.calls.lock().unwrap().len();
    assert!(
        p.nearest(&[1.0, 0.0, 0.0], "CLINICIAN", 5)
            .unwrap()
            .is_empty()
    );
    assert_eq!(index.calls.lock().unwrap().len(), calls);
}

#[test]
fn an_index_that_comes_up_short_is_answered_exactly() {
    // The "index" leaves out its best answer: with fewer rows than asked for, the exact
    // search answers.
    let index = Arc::new(FakeIndex::new(&EMBEDDINGS, 1));
    let p = index_pipeline(index.clone());
    let exact = pipeline(100_000);
    let q = [1.0, 0.0, 0.0];
    assert_eq!(
        p.nearest(&q, "PARENT", 10).unwrap(),
        exact.nearest(&q, "PARENT", 10).unwrap()
    );
    assert_eq!(
        index.calls.lock().unwrap().as_slice(),
        &[
            (10, SearchMethod::Index { ef_search: 40 }),
            (10, SearchMethod::Exact)
        ]
    );
    assert_eq!(p.index_stats().unwrap().exact_fallbacks, 1);
    // When the index fills the limit it is trusted: approximate, as asked for.
    let two = p.nearest(&q, "PARENT", 2).unwrap();
    assert_eq!(two[0].0, "biff", "{two:?}");
    assert_eq!(p.index_stats().unwrap().exact_fallbacks, 1);
}

#[test]
fn stale_and_unknown_rows_from_the_index_are_skipped() {
    let mut index = FakeIndex::new(&EMBEDDINGS, 0);
    // gray_rock's stored embedding was made from another text; `ghost` is not in the
    // pipeline's knowledge base (made after it was read).
    index.rows[0].2 = "stale".into();
    let mut ghost = index.rows[1].0.clone();
    ghost.entity_id = "ghost".into();
    let hash = embedding_text_hash(&ghost);
    index.rows.push((ghost, vec![0.9, 0.1, 0.0], hash));
    let index = Arc::new(index);
    let p = index_pipeline(index.clone());
    let got = p.nearest(&[1.0, 0.0, 0.0], "PARENT", 2).unwrap();
    let ids: Vec<&str> = got.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["biff", "boundaries"]);
    // Two of the first two were skipped: it asked again for more, through the index.
    assert_eq!(
        index.calls.lock().unwrap().as_slice(),
        &[
            (2, SearchMethod::Index { ef_search: 40 }),
            (4, SearchMethod::Index { ef_search: 40 })
        ]
    );
}

#[test]
fn an_index_pipeline_needs_dense_ranking() {
    let search = IndexSearch {
        index: Arc::new(FakeIndex::new(&EMBEDDINGS, 0)),
        model: "m".into(),
        ef_search: 40,
    };
    let config = RetrievalConfig {
        mode: RankMode::Hybrid,
        ..RetrievalConfig::default()
    };
    let err = Pipeline::with_index(&kb(), None, search, config).unwrap_err();
    assert!(err.to_string().contains("needs dense ranking"), "{err}");
}
