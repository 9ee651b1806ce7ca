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

#[test]
fn chat_and_reranker_keys_come_from_the_environment() {
    use assay_providers::{
        ChatSpec, ProviderOptions, RerankerSpec, build_chat_model_with_env, build_reranker_with_env,
    };
    let options = ProviderOptions::default();
    let no_env = |_: &str| None;
    let chat_err = |name: &str| {
        build_chat_model_with_env(&name.parse::<ChatSpec>().unwrap(), &options, &no_env)
            .unwrap_err()
    };
    let rerank_err = |name: &str| {
        build_reranker_with_env(&name.parse::<RerankerSpec>().unwrap(), &options, &no_env)
            .unwrap_err()
    };
    for (err, var, text) in [
        (
            chat_err("anthropic/claude-haiku-4-5"),
            "ANTHROPIC_API_KEY",
            "anthropic/claude-haiku-4-5: missing API key: set the environment variable ANTHROPIC_API_KEY",
        ),
        (
            chat_err("openai/gpt-4o-mini"),
            "OPENAI_API_KEY",
            "openai/gpt-4o-mini: missing API key: set the environment variable OPENAI_API_KEY",
        ),
        (
            rerank_err("voyage/rerank-2.5"),
            "VOYAGE_API_KEY",
            "voyage/rerank-2.5: missing API key: set the environment variable VOYAGE_API_KEY",
        ),
        (
            rerank_err("llm:anthropic/claude-haiku-4-5"),
            "ANTHROPIC_API_KEY",
            "anthropic/claude-haiku-4-5: missing API key: set the environment variable ANTHROPIC_API_KEY",
        ),
    ] {
        assert!(
            matches!(err.kind(), ProviderErrorKind::Auth { env_var } if *env_var == var),
            "{err:?}"
        );
        assert_eq!(err.to_string(), text);
    }
    // `none` needs nothing; a local OpenAI-compatible server needs no key.
    assert!(
        build_reranker_with_env(&RerankerSpec::None, &options, &no_env)
            .unwrap()
            .is_none()
    );
    let local = ProviderOptions {
        openai_base_url: "http://localhost:8080/v1".into(),
        ..ProviderOptions::default()
    };
    let chat =
        build_chat_model_with_env(&"openai/llama3".parse().unwrap(), &local, &no_env).unwrap();
    assert_eq!(chat.model(), "openai/llama3");
    let bad = ProviderOptions {
        anthropic_base_url: "api.anthropic.com".into(),
        ..ProviderOptions::default()
    };
    let err = build_chat_model_with_env(
        &"anthropic/claude-haiku-4-5".parse().unwrap(),
        &bad,
        &|_| Some("k-123456".into()),
    )
    .unwrap_err();
    assert!(
        matches!(err.kind(), ProviderErrorKind::Config { .. }),
        "{err:?}"
    );
}
