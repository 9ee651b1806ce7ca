//! The OpenAI-compatible client against a fake server speaking its wire format.

use assay_providers::{
    Embedder, EmbedderOptions, EmbedderSpec, InputKind, OpenAiEmbedder, ProviderErrorKind, Usage,
    build_embedder_with_env,
};
use serde_json::json;

use crate::support::{
    FakeServer, OPENAI_KEY, Reply, assert_synthesized_in_order, fixture_json, fixture_vectors,
    openai_key, synthesize, texts,
};

fn openai(server: &FakeServer, options: EmbedderOptions) -> OpenAiEmbedder {
    let options = EmbedderOptions {
        openai_base_url: server.base.clone(),
        ..options
    };
    OpenAiEmbedder::new("text-embedding-3-small", Some(openai_key()), &options).unwrap()
}

fn no_env(_: &str) -> Option<String> {
    None
}

#[tokio::test]
async fn sends_the_documented_request_and_parses_the_answer() {
    let body = fixture_json("openai_embeddings.json");
    let server = FakeServer::always(Reply::json(&body)).await;
    let embedder = openai(&server, EmbedderOptions::default());
    let input = vec![
        "nasty email from my ex".to_string(),
        "co-parenting plan".to_string(),
    ];
    let out = embedder
        .embed_with_usage(&input, InputKind::Query)
        .await
        .unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/embeddings")
    );
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.body,
        json!({"input": input, "model": "text-embedding-3-small", "encoding_format": "float"}),
        "no input_type: the OpenAI API has none"
    );
    assert_eq!(out.vectors, fixture_vectors(&body));
    assert_eq!(
        out.usage,
        Usage {
            input_tokens: 13,
            output_tokens: 0,
            requests: 1
        }
    );
    assert_eq!(
        (embedder.model(), embedder.dimension()),
        ("openai/text-embedding-3-small", Some(8))
    );
}

#[tokio::test]
async fn out_of_order_indexes_are_reassembled() {
    let server = FakeServer::always(Reply::json(&fixture_json(
        "openai_embeddings_unordered.json",
    )))
    .await;
    let embedder = openai(&server, EmbedderOptions::default());
    let out = embedder
        .embed(&texts(3), InputKind::Document)
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![
            vec![1.0, 0.0, 0.0, 0.0],
            vec![0.0, 0.6, 0.8, 0.0],
            vec![0.0, 0.0, 0.6, 0.8]
        ]
    );
}

#[tokio::test]
async fn batches_300_inputs_with_the_default_size_of_128() {
    let server = FakeServer::start(synthesize).await;
    let embedder = openai(&server, EmbedderOptions::default());
    let out = embedder
        .embed_with_usage(&texts(300), InputKind::Document)
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(
        requests
            .iter()
            .map(|r| r.inputs().len())
            .collect::<Vec<_>>(),
        vec![128, 128, 44]
    );
    assert_eq!(
        requests
            .iter()
            .flat_map(crate::support::Recorded::inputs)
            .collect::<Vec<_>>(),
        texts(300)
    );
    assert_synthesized_in_order(&out.vectors);
    assert_eq!(
        out.usage,
        Usage {
            input_tokens: 600,
            output_tokens: 0,
            requests: 3
        }
    );
}

#[tokio::test]
async fn local_server_without_a_key_gets_no_authorization_header() {
    let server = FakeServer::start(synthesize).await;
    let spec: EmbedderSpec = "openai/nomic-embed-text".parse().unwrap();
    let embedder = build_embedder_with_env(&spec, &server.options(), &no_env).unwrap();
    let out = embedder.embed(&texts(2), InputKind::Query).await.unwrap();
    assert_synthesized_in_order(&out);
    let request = &server.requests()[0];
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.body["model"], "nomic-embed-text");
}

#[tokio::test]
async fn local_server_with_a_key_in_the_environment_gets_it() {
    let server = FakeServer::start(synthesize).await;
    let env = |name: &str| (name == "OPENAI_API_KEY").then(|| OPENAI_KEY.to_string());
    let embedder =
        build_embedder_with_env(&"openai/m".parse().unwrap(), &server.options(), &env).unwrap();
    embedder.embed(&texts(1), InputKind::Query).await.unwrap();
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
}

#[test]
fn api_openai_com_without_a_key_fails_before_any_request() {
    let spec: EmbedderSpec = "openai/text-embedding-3-small".parse().unwrap();
    let err = build_embedder_with_env(&spec, &EmbedderOptions::default(), &no_env).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ProviderErrorKind::Auth {
                env_var: "OPENAI_API_KEY"
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "openai/text-embedding-3-small: missing API key: set the environment variable OPENAI_API_KEY"
    );
    assert!(!err.is_retryable());
}

#[test]
fn bad_base_urls_are_config_errors() {
    for base in ["localhost:8080/v1", "ftp://example.com/v1", ""] {
        let options = EmbedderOptions {
            openai_base_url: base.into(),
            ..EmbedderOptions::default()
        };
        let err = OpenAiEmbedder::new("m", None, &options).unwrap_err();
        assert!(
            matches!(err.kind(), ProviderErrorKind::Config { .. }),
            "{base}: {err:?}"
        );
        assert!(err.to_string().contains("invalid base URL"), "{err}");
    }
}
