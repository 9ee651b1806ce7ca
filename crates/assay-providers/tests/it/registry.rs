//! `build_embedder`: names in, embedders (or clear errors) out.

use assay_providers::{
    EmbedderOptions, EmbedderSpec, InputKind, ProviderErrorKind, build_embedder, cosine,
};

#[tokio::test]
async fn builtin_works_with_zero_setup() {
    let embedder = build_embedder(
        &"builtin/hashed-ngrams".parse().unwrap(),
        &EmbedderOptions::default(),
    )
    .unwrap();
    assert_eq!(
        (embedder.model(), embedder.dimension()),
        ("builtin/hashed-ngrams", Some(1024))
    );
    let texts = [
        "custody schedule for the holidays",
        "holiday custody schedule",
        "tax forms",
    ]
    .map(String::from);
    let v = embedder.embed(&texts, InputKind::Document).await.unwrap();
    assert!(
        cosine(&v[0], &v[1]) > 0.5 && cosine(&v[0], &v[2]) < 0.2,
        "{} {}",
        cosine(&v[0], &v[1]),
        cosine(&v[0], &v[2])
    );
    // Lexical: the same text embeds the same way whatever the input kind.
    let q = embedder.embed(&texts[..1], InputKind::Query).await.unwrap();
    assert_eq!(q[0], v[0]);
}

#[test]
fn bad_names_say_what_is_accepted() {
    let err = "minilm".parse::<EmbedderSpec>().unwrap_err();
    assert!(matches!(err.kind(), ProviderErrorKind::Config { .. }));
    assert_eq!(
        err.to_string(),
        "invalid embedder name `minilm`: no vendor prefix; expected builtin/hashed-ngrams, local/<model dir>, \
         hf/<owner>/<repo>, voyage/<model> or openai/<model>"
    );
}

#[cfg(feature = "local")]
#[test]
fn local_errors_name_the_missing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-model");
    let spec: EmbedderSpec = format!("local/{}", missing.display()).parse().unwrap();
    let err = build_embedder(&spec, &EmbedderOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), ProviderErrorKind::Model { path, .. } if *path == missing),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("model directory not found"),
        "{err}"
    );
    assert_eq!(err.model(), Some(spec.to_string().as_str()));
}

#[cfg(not(feature = "local"))]
#[test]
fn local_needs_the_feature() {
    for name in ["local//opt/m", "hf/sentence-transformers/all-MiniLM-L6-v2"] {
        let err = build_embedder(&name.parse().unwrap(), &EmbedderOptions::default()).unwrap_err();
        assert!(
            err.to_string().contains("without its `local` feature"),
            "{err}"
        );
    }
}

#[cfg(feature = "local")]
#[test]
fn hf_is_lazy_and_cached_under_the_configured_root() {
    let root = tempfile::tempdir().unwrap();
    let options = EmbedderOptions {
        model_cache_dir: Some(root.path().to_owned()),
        ..EmbedderOptions::default()
    };
    let embedder = build_embedder(
        &"hf/sentence-transformers/all-MiniLM-L6-v2".parse().unwrap(),
        &options,
    )
    .unwrap();
    assert_eq!(
        (embedder.model(), embedder.dimension()),
        ("hf/sentence-transformers/all-MiniLM-L6-v2", None)
    );
    assert_eq!(
        std::fs::read_dir(root.path()).unwrap().count(),
        0,
        "nothing is fetched before the first call"
    );
}
