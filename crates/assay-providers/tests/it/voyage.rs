//! The Voyage client against a fake server speaking its wire format.

use assay_providers::{
    Embedder, EmbedderOptions, InputKind, Usage, VoyageEmbedder, build_embedder_with_env,
};
use serde_json::json;

use crate::support::{
    FakeServer, Reply, VOYAGE_KEY, assert_synthesized_in_order, fixture_json, fixture_vectors,
    synthesize, texts, voyage_key,
};

fn voyage(server: &FakeServer, options: EmbedderOptions) -> VoyageEmbedder {
    VoyageEmbedder::new(
        "voyage-2",
        voyage_key(),
        &EmbedderOptions {
            voyage_base_url: server.base.clone(),
            ..options
        },
    )
    .unwrap()
}

#[tokio::test]
async fn sends_the_documented_request_and_parses_the_answer() {
    let body = fixture_json("voyage_embeddings.json");
    let server = FakeServer::always(Reply::json(&body)).await;
    let embedder = voyage(&server, EmbedderOptions::default());
    assert_eq!(
        (embedder.model(), embedder.dimension()),
        ("voyage/voyage-2", None)
    );

    let input = vec![
        "How do I respond to a nasty email?".to_string(),
        "BIFF: brief, informative, friendly, firm".to_string(),
        "Holiday schedule".to_string(),
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
        Some(format!("Bearer {VOYAGE_KEY}").as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.body,
        json!({"input": input, "model": "voyage-2", "input_type": "query"})
    );

    assert_eq!(out.vectors, fixture_vectors(&body));
    for v in &out.vectors {
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6, "{norm}");
    }
    assert_eq!(
        out.usage,
        Usage {
            input_tokens: 27,
            output_tokens: 0,
            requests: 1
        }
    );
    assert_eq!(embedder.dimension(), Some(8));
}

#[tokio::test]
async fn documents_are_sent_with_input_type_document() {
    let server = FakeServer::start(synthesize).await;
    let embedder = voyage(&server, EmbedderOptions::default());
    embedder
        .embed(&texts(2), InputKind::Document)
        .await
        .unwrap();
    embedder.embed(&texts(1), InputKind::Query).await.unwrap();
    let types: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.body["input_type"].clone())
        .collect();
    assert_eq!(types, vec![json!("document"), json!("query")]);
}

#[tokio::test]
async fn batches_at_most_128_inputs_and_reassembles_in_order() {
    let server = FakeServer::start(synthesize).await;
    // A larger configured batch is capped at Voyage's limit of 128.
    let embedder = voyage(
        &server,
        EmbedderOptions {
            batch_size: Some(500),
            ..EmbedderOptions::default()
        },
    );
    let input = texts(300);
    let out = embedder
        .embed_with_usage(&input, InputKind::Document)
        .await
        .unwrap();

    let requests = server.requests();
    let sizes: Vec<usize> = requests.iter().map(|r| r.inputs().len()).collect();
    assert_eq!(sizes, vec![128, 128, 44]);
    let sent: Vec<String> = requests
        .iter()
        .flat_map(crate::support::Recorded::inputs)
        .collect();
    assert_eq!(sent, input, "every input sent once, in order");
    assert!(
        requests
            .iter()
            .all(|r| r.body["input_type"] == "document" && r.body["model"] == "voyage-2")
    );

    assert_eq!(out.vectors.len(), 300);
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
async fn smaller_batch_size_is_respected() {
    let server = FakeServer::start(synthesize).await;
    let embedder = voyage(
        &server,
        EmbedderOptions {
            batch_size: Some(2),
            ..EmbedderOptions::default()
        },
    );
    let out = embedder.embed(&texts(5), InputKind::Query).await.unwrap();
    let sizes: Vec<usize> = server.requests().iter().map(|r| r.inputs().len()).collect();
    assert_eq!(sizes, vec![2, 2, 1]);
    assert_synthesized_in_order(&out);
}

#[tokio::test]
async fn empty_input_sends_nothing() {
    let server = FakeServer::start(synthesize).await;
    let embedder = voyage(&server, EmbedderOptions::default());
    assert!(
        embedder
            .embed(&[], InputKind::Query)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn built_from_the_registry_with_the_key_from_the_environment() {
    let server = FakeServer::start(synthesize).await;
    let env = |name: &str| (name == "VOYAGE_API_KEY").then(|| VOYAGE_KEY.to_string());
    let embedder = build_embedder_with_env(
        &"voyage/voyage-large-2".parse().unwrap(),
        &server.options(),
        &env,
    )
    .unwrap();
    assert_eq!(embedder.model(), "voyage/voyage-large-2");
    embedder.embed(&texts(1), InputKind::Query).await.unwrap();
    let request = &server.requests()[0];
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {VOYAGE_KEY}").as_str())
    );
    assert_eq!(request.body["model"], "voyage-large-2");
}

#[tokio::test]
async fn a_changed_dimension_is_an_error() {
    let server = FakeServer::start(|request| {
        let n = request.inputs().len();
        let data: Vec<_> = (0..n).map(|i| json!({"object": "embedding", "embedding": vec![1.0; n + 1], "index": i})).collect();
        Reply::json(&json!({"object": "list", "data": data, "model": "voyage-2", "usage": {"total_tokens": 1}}))
    })
    .await;
    let embedder = voyage(&server, EmbedderOptions::default());
    embedder.embed(&texts(1), InputKind::Query).await.unwrap();
    let err = embedder
        .embed(&texts(2), InputKind::Query)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("length changed from 2 to 3"),
        "{err}"
    );
}
