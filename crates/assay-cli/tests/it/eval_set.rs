//! The retrieval evaluation set (`bench/retrieval/eval_set.jsonl`, issue 10): at least 80
//! everyday messages over every topic of the example's semantic bank, each naming an active
//! SITUATION entity of the example, and none reusing the knowledge base's wording: no 4-word
//! sequence of a message occurs anywhere in the KB's text.

use std::collections::{BTreeSet, HashSet};

use assay_core::entity::{Entity, LoadMode};
use assay_kb::KnowledgeBase;
use serde_json::Value;

use crate::support::example;

/// Lower-case words: letters and digits, apostrophes dropped (`don't` → `dont`).
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .replace(['\'', '’'], "")
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

fn grams(text: &str) -> Vec<String> {
    words(text).windows(4).map(|w| w.join(" ")).collect()
}

/// Every text field of an entity, as written.
fn texts(e: &Entity) -> Vec<String> {
    let v = serde_json::to_value(e).unwrap();
    v.as_object()
        .unwrap()
        .values()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect()
}

fn eval_set() -> Vec<Value> {
    let path = example().join("../../bench/retrieval/eval_set.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_eval_set_covers_every_topic_with_known_entities() {
    let set = eval_set();
    assert!(set.len() >= 80, "{} messages", set.len());
    let kb = assay_kb::load_dir(&example().join("kb")).unwrap().kb;
    let mut ids = HashSet::new();
    for item in &set {
        assert!(
            ids.insert(item["id"].as_str().unwrap().to_owned()),
            "{item}"
        );
        let entity = kb
            .get(item["entity"].as_str().unwrap())
            .unwrap()
            .unwrap_or_else(|| panic!("unknown entity in {item}"));
        assert!(
            entity.is_active && entity.load_mode == LoadMode::Situation,
            "{item}"
        );
        assert!(!item["message"].as_str().unwrap().trim().is_empty());
    }
    let bank: Value = serde_json::from_str(
        &std::fs::read_to_string(example().join("test_banks/semantic/parent_test_bank.json"))
            .unwrap(),
    )
    .unwrap();
    let bank_topics: BTreeSet<&str> = bank["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["topics"].as_array().unwrap())
        .map(|t| t.as_str().unwrap())
        .collect();
    let covered: BTreeSet<&str> = set.iter().map(|i| i["topic"].as_str().unwrap()).collect();
    let missing: Vec<_> = bank_topics.difference(&covered).collect();
    assert!(missing.is_empty(), "topics without a message: {missing:?}");
}

#[test]
fn no_four_word_sequence_of_a_message_is_in_the_kb() {
    let kb = assay_kb::load_dir(&example().join("kb")).unwrap().kb;
    let entities = kb.list(&assay_kb::EntityFilter::default()).unwrap();
    assert!(entities.len() > 40);
    let kb_grams: HashSet<String> = entities
        .iter()
        .flat_map(texts)
        .flat_map(|t| grams(&t))
        .collect();
    // The check itself finds a copied phrase.
    assert!(kb_grams.contains("he keeps baiting me"));
    let copied: Vec<String> = eval_set()
        .iter()
        .flat_map(|item| {
            let message = item["message"].as_str().unwrap().to_owned();
            grams(&message)
                .into_iter()
                .filter(|g| kb_grams.contains(g))
                .map(move |g| format!("{}: {g:?}", item["id"]))
        })
        .collect();
    assert!(
        copied.is_empty(),
        "phrases taken from the KB:\n{}",
        copied.join("\n")
    );
}
