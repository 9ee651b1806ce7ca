//! Spec 003 §8 on the example knowledge base, every test group:
//! retrieval quality (MiniLM), state conditions, embedding text content, similar concepts
//! distinguishable (MiniLM), the full pipeline, and crisis priority.
//!
//! The MiniLM model comes from `ASSAY_TEST_MODEL_DIR` (default
//! `target/test-models/all-minilm-l6-v2`, fetched by `scripts/fetch-test-model.sh`). Without it
//! these tests fail with that instruction, unless `ASSAY_SKIP_MODEL_TESTS=1` says to skip them.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{Run, Scratch, assay};

/// `local/<dir>` for the MiniLM test model, or `None` when skipping is asked for.
pub(crate) fn minilm() -> Option<String> {
    let dir = std::env::var_os("ASSAY_TEST_MODEL_DIR").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/test-models/all-minilm-l6-v2")
        },
        PathBuf::from,
    );
    if dir.join("model.safetensors").is_file() {
        return Some(format!("local/{}", dir.canonicalize().unwrap().display()));
    }
    if std::env::var("ASSAY_SKIP_MODEL_TESTS").as_deref() == Ok("1") {
        eprintln!(
            "skipped: no MiniLM model at {} (ASSAY_SKIP_MODEL_TESTS=1)",
            dir.display()
        );
        return None;
    }
    panic!(
        "the MiniLM test model is missing at {}: run scripts/fetch-test-model.sh (or set ASSAY_TEST_MODEL_DIR)",
        dir.display()
    );
}

fn retrieve(p: &Scratch, message: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "retrieve",
        message,
        "--json",
        "--project",
        p.root.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    assay(&args)
}

fn ids(doc: &Value, keep: impl Fn(&Value) -> bool) -> Vec<String> {
    doc["entities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| keep(e))
        .map(|e| e["entity_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The entities retrieval found for the message: everything but ALWAYS and STATE entities.
fn retrieved(doc: &Value) -> Vec<String> {
    ids(doc, |e| e["stage"] != "always" && e["stage"] != "state")
}

struct Case {
    message: &'static str,
    expected: &'static [&'static str],
    should_not_match: &'static [&'static str],
}

const CASES: [Case; 10] = [
    Case {
        message: "she sent me another nasty email what do i say",
        expected: &["biff_response"],
        should_not_match: &["gray_rock"],
    },
    Case {
        message: "got a 10 page text full of accusations",
        expected: &["biff_response"],
        should_not_match: &[],
    },
    Case {
        message: "he keeps baiting me trying to get a reaction",
        expected: &["gray_rock"],
        should_not_match: &[],
    },
    Case {
        message: "she wants me to blow up so she can record it",
        expected: &["gray_rock"],
        should_not_match: &[],
    },
    Case {
        message: "she shows up whenever she wants no respect for my time",
        expected: &["boundary_setting"],
        should_not_match: &[],
    },
    Case {
        message: "im about to lose it things are getting heated",
        expected: &["de_escalation"],
        should_not_match: &[],
    },
    Case {
        message: "my kid apologizes for having fun at my house",
        expected: &["loyalty_binds"],
        should_not_match: &[],
    },
    Case {
        message: "my daughter says im a narcissistic abuser shes 9",
        expected: &["parental_alienation"],
        should_not_match: &["domestic_violence"],
    },
    Case {
        message: "i dont want to be here anymore whats the point",
        expected: &["handler_crisis", "rule_crisis_detection"],
        should_not_match: &[],
    },
    Case {
        message: "my kid feels guilty spending time with me",
        expected: &["loyalty_binds"],
        should_not_match: &["parental_alienation"],
    },
];

/// Runs the 003 §8 retrieval cases; returns the failures as readable lines.
fn quality_failures(p: &Scratch, embedder: &str) -> Vec<String> {
    let mut failures = Vec::new();
    for case in &CASES {
        let run = retrieve(p, case.message, &["--embedder", embedder]);
        assert_eq!(run.code, 0, "{run:?}");
        let got = retrieved(&run.json());
        let top3: Vec<&str> = got.iter().take(3).map(String::as_str).collect();
        for e in case.expected {
            if !top3.contains(e) {
                failures.push(format!(
                    "{:?}: expected {e} in the top 3, got {top3:?}",
                    case.message
                ));
            }
        }
        for e in case.should_not_match {
            if top3.contains(e) {
                failures.push(format!(
                    "{:?}: {e} should not be in the top 3 {top3:?}",
                    case.message
                ));
            }
        }
    }
    failures
}

#[test]
fn retrieval_quality_with_minilm() {
    let Some(model) = minilm() else { return };
    let p = Scratch::example_embedded(&model, false);
    let failures = quality_failures(&p, &model);
    assert!(
        failures.is_empty(),
        "003 §8 retrieval cases failing with MiniLM (default settings):\n{}",
        failures.join("\n")
    );
}

#[test]
fn retrieval_quality_with_minilm_in_003s_pipeline() {
    let Some(model) = minilm() else { return };
    let p = Scratch::example_embedded(&model, true);
    let failures = quality_failures(&p, &model);
    assert!(
        failures.is_empty(),
        "003 §8 retrieval cases failing with MiniLM (dense, single view):\n{}",
        failures.join("\n")
    );
}

#[test]
fn similar_concepts_are_distinguishable_with_minilm() {
    let Some(model) = minilm() else { return };
    let loaded = assay_kb::load_dir(&crate::support::example().join("kb")).unwrap();
    let text = |id: &str| {
        use assay_kb::KnowledgeBase;
        loaded.kb.get(id).unwrap().unwrap().embedding_text()
    };
    let (a, b) = (text("parental_alienation"), text("loyalty_binds"));
    let run = assay(&[
        "embed",
        "--document",
        "--json",
        "--embedder",
        &model,
        &a,
        &b,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["dimension"], 384);
    let v: Vec<Vec<f64>> = doc["embeddings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect();
    let cos: f64 = v[0].iter().zip(&v[1]).map(|(x, y)| x * y).sum();
    assert!(
        0.5 < cos && cos < 0.85,
        "cos(parental_alienation, loyalty_binds) = {cos}"
    );
}

#[test]
fn embedding_text_holds_the_right_fields() {
    use assay_kb::KnowledgeBase;
    let loaded = assay_kb::load_dir(&crate::support::example().join("kb")).unwrap();
    let biff = loaded.kb.get("biff_response").unwrap().unwrap();
    let text = biff.embedding_text();
    assert!(text.contains(&biff.title));
    assert!(text.contains("nasty email"), "from recognition");
    assert!(text.contains("Parent:"), "from examples");
    assert!(
        biff.concept_summary
            .as_deref()
            .unwrap()
            .starts_with("BIFF is a framework")
    );
    assert!(
        !text.contains("BIFF is a framework"),
        "the concept summary is excluded"
    );
}

#[test]
fn state_conditions_from_stored_user_state() {
    let p = Scratch::example();
    let project = p.root.to_str().unwrap();
    let state = |args: &[&str]| {
        let mut full = vec!["state"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--project", project]);
        let run = assay(&full);
        assert_eq!(run.code, 0, "{run:?}");
        run
    };
    let handlers = |user: &str, audience: &str| {
        let run = retrieve(&p, "hello", &["--user", user, "--audience", audience]);
        assert_eq!(run.code, 0, "{run:?}");
        ids(&run.json(), |e| e["stage"] == "state")
    };
    // A new user (conversation_count 0) gets the first-conversation handler.
    assert!(handlers("new", "PARENT").contains(&"handler_first_conversation".to_owned()));
    // A returning user, last seen ten days ago.
    state(&[
        "set",
        "--user",
        "back",
        "conversation_count=3",
        "days_since_last=10",
    ]);
    assert!(handlers("back", "PARENT").contains(&"handler_returning_user".to_owned()));
    // Right after a hard interaction rated 2.
    state(&["record", "--user", "rough", "--rating", "2"]);
    let got = handlers("rough", "PARENT");
    assert!(
        got.contains(&"handler_post_escalation".to_owned()),
        "{got:?}"
    );
    assert!(
        !got.contains(&"handler_celebrating_wins".to_owned()),
        "{got:?}"
    );
    // A clinician.
    state(&["set", "--user", "doc", "user_type=CLINICIAN"]);
    assert!(handlers("doc", "CLINICIAN").contains(&"handler_clinician_mode".to_owned()));
}

#[test]
fn crisis_priority_with_minilm() {
    let Some(model) = minilm() else { return };
    for p in [
        Scratch::example_embedded(&model, false),
        Scratch::example_embedded(&model, true),
    ] {
        let run = retrieve(
            &p,
            "i just cant do this anymore i want to end it",
            &["--embedder", &model],
        );
        assert_eq!(run.code, 0, "{run:?}");
        let first = ids(&run.json(), |_| true).remove(0);
        assert!(
            ["handler_crisis", "rule_crisis_detection"].contains(&first.as_str()),
            "{first}"
        );
    }
}
