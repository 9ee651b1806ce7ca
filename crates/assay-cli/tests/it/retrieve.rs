//! `assay retrieve` and `assay embed`: the retrieval engine on its own.

use serde_json::Value;

use crate::support::{Run, Scratch, assay};

fn retrieve(p: &Scratch, args: &[&str]) -> Run {
    let mut full = vec!["retrieve"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--project", p.root.to_str().unwrap()]);
    assay(&full)
}

fn ids(doc: &Value) -> Vec<String> {
    doc["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["entity_id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn crisis_content_comes_first() {
    // 003 §8 test_crisis_detection_priority
    let p = Scratch::example();
    let run = retrieve(
        &p,
        &["i just cant do this anymore i want to end it", "--json"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    let got = ids(&doc);
    assert!(
        ["handler_crisis", "rule_crisis_detection"].contains(&got[0].as_str()),
        "{got:?}"
    );
    assert_eq!(doc["entities"][0]["stage"], "crisis");
    for e in doc["entities"].as_array().unwrap() {
        for key in [
            "entity_id",
            "entity_type",
            "stage",
            "similarity",
            "final_score",
            "tokens",
        ] {
            assert!(e.get(key).is_some(), "entity lacks {key}: {e}");
        }
    }
    assert!(doc["tokens_used"].as_u64().unwrap() <= doc["token_budget"].as_u64().unwrap());
}

#[test]
fn a_new_user_gets_always_entities_and_the_first_conversation_handler() {
    // 003 §8 test_full_retrieval_pipeline
    let p = Scratch::example();
    let run = retrieve(
        &p,
        &[
            "hi im new here",
            "--state",
            r#"{"is_first_conversation": true, "conversation_count": 0}"#,
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    let got = ids(&doc);
    for id in [
        "frank_parent_persona",
        "core_behavioral_guardrails",
        "handler_first_conversation",
    ] {
        assert!(got.contains(&id.to_owned()), "{id} missing from {got:?}");
    }
    let handler = doc["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["entity_id"] == "handler_first_conversation")
        .unwrap();
    assert_eq!(handler["stage"], "state");
}

#[test]
fn the_audience_decides_the_persona() {
    let p = Scratch::example();
    let run = retrieve(
        &p,
        &[
            "how should I document this",
            "--audience",
            "CLINICIAN",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let got = ids(&run.json());
    assert!(
        got.contains(&"frank_clinician_persona".to_owned()),
        "{got:?}"
    );
    assert!(!got.contains(&"frank_parent_persona".to_owned()), "{got:?}");
}

#[test]
fn explain_shows_stages_and_drops() {
    let p = Scratch::example();
    let run = retrieve(
        &p,
        &[
            "she sent me another nasty email what do i say",
            "--explain",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    let stages: Vec<&str> = doc["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        vec!["always", "state", "crisis", "keyword", "semantic"]
    );
    assert!(
        doc["dropped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["reason"] == "threshold"),
        "{}",
        doc["dropped"]
    );

    let text = retrieve(
        &p,
        &["she sent me another nasty email what do i say", "--explain"],
    );
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains("stages:") && text.stdout.contains("dropped:"),
        "{text:?}"
    );
    assert!(text.stdout.contains("below threshold"), "{text:?}");
}

#[test]
fn retrieval_counts_are_recorded() {
    let p = Scratch::example();
    for _ in 0..2 {
        assert_eq!(retrieve(&p, &["hello", "--json"]).code, 0);
    }
    let stats = assay(&[
        "kb",
        "stats",
        "--json",
        "--project",
        p.root.to_str().unwrap(),
    ]);
    assert_eq!(stats.code, 0, "{stats:?}");
    assert!(
        stats.json()["total_retrievals"].as_u64().unwrap() >= 6,
        "{}",
        stats.stdout
    );
}

#[test]
fn bad_state_is_a_usage_error() {
    let p = Scratch::example();
    let run = retrieve(&p, &["hello", "--state", "[1, 2]"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("--state: expected a JSON object"),
        "{run:?}"
    );
    let run = retrieve(&p, &["hello", "--state", "{nope"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--state: not valid JSON"), "{run:?}");
}

#[test]
fn embed_prints_unit_vectors() {
    let run = assay(&[
        "embed",
        "gray rock",
        "a nasty email",
        "--json",
        "--embedder",
        "builtin/hashed-ngrams",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["model"], "builtin/hashed-ngrams");
    let dim = doc["dimension"].as_u64().unwrap() as usize;
    let vectors = doc["embeddings"].as_array().unwrap();
    assert_eq!(vectors.len(), 2);
    for v in vectors {
        let v: Vec<f64> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(v.len(), dim);
        let norm: f64 = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }
    let bad = assay(&["embed", "x", "--embedder", "voyage/voyage-2"]);
    assert_eq!(bad.code, 2, "a missing key is bad input: {bad:?}");
    assert!(bad.stderr.contains("VOYAGE_API_KEY"), "{bad:?}");
}

#[test]
fn explain_shows_which_view_matched_with_several_views_and_hybrid_ranking() {
    let p = Scratch::example();
    let toml = p.read("assay.toml");
    p.write(
        "assay.toml",
        &format!("{toml}\n[retrieval]\nviews = \"multi\"\nmode = \"hybrid\"\n"),
    );
    let run = retrieve(
        &p,
        &["he keeps trying to push my buttons at pickup", "--explain"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("semantic matches"), "{}", run.stdout);
    assert!(run.stdout.contains("cosine"), "{}", run.stdout);
    let run = retrieve(
        &p,
        &[
            "he keeps trying to push my buttons at pickup",
            "--explain",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    let matches = doc["matches"].as_array().unwrap();
    assert!(!matches.is_empty());
    let first = &matches[0];
    assert!(first["view"].is_string(), "{first}");
    assert!(first["lexical"].is_number(), "{first}");
    // A second retrieval embeds nothing new, and gives the same answer.
    let again = retrieve(
        &p,
        &[
            "he keeps trying to push my buttons at pickup",
            "--explain",
            "--json",
        ],
    );
    assert_eq!(again.json()["matches"], doc["matches"]);
}

#[test]
fn an_unknown_retrieval_mode_is_bad_input() {
    let p = Scratch::example();
    let toml = p.read("assay.toml");
    p.write(
        "assay.toml",
        &format!("{toml}\n[retrieval]\nmode = \"fuzzy\"\n"),
    );
    let run = retrieve(&p, &["hello"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("retrieval.mode"), "{}", run.stderr);
}
