//! Rerankers: the Voyage client against a fake server, and the LLM listwise reranker over a
//! scripted chat model.

use std::sync::Arc;

use assay_providers::{
    LlmReranker, ProviderErrorKind, Ranked, RerankDocument, Reranker, RerankerSpec, Usage,
    VoyageReranker, build_reranker_with_env,
};
use serde_json::json;

use crate::support::{
    FakeServer, Reply, ScriptedChat, VOYAGE_KEY, all_keys, fixture_json, voyage_key,
};

fn documents() -> Vec<RerankDocument> {
    [
        (
            "e1",
            "Holiday schedule",
            "Who has the children over the winter break.",
        ),
        ("e2", "Child support", ""),
        (
            "e3",
            "BIFF responses",
            "Brief, informative, friendly, firm replies to hostile emails.",
        ),
        (
            "e4",
            "School pickups",
            "Who collects the children after school.",
        ),
    ]
    .iter()
    .map(|(id, title, summary)| RerankDocument {
        id: (*id).into(),
        title: (*title).into(),
        summary: (*summary).into(),
    })
    .collect()
}

fn indices(order: &[Ranked]) -> Vec<usize> {
    order.iter().map(|r| r.index).collect()
}

fn voyage(server: &FakeServer) -> VoyageReranker {
    VoyageReranker::new("rerank-2.5", voyage_key(), &server.provider_options()).unwrap()
}

#[tokio::test]
async fn voyage_sends_the_documented_request_and_parses_the_answer() {
    let server = FakeServer::always(Reply::json(&fixture_json("voyage_rerank.json"))).await;
    let reranker = voyage(&server);
    assert_eq!(reranker.model(), "voyage/rerank-2.5");
    let docs = &documents()[..3];
    let out = reranker
        .rerank("my ex sent a nasty email", docs, 3)
        .await
        .unwrap();

    let r = &server.requests()[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/rerank"));
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {VOYAGE_KEY}").as_str())
    );
    assert_eq!(
        r.body,
        json!({
            "query": "my ex sent a nasty email",
            "documents": [
                "Holiday schedule: Who has the children over the winter break.",
                "Child support",
                "BIFF responses: Brief, informative, friendly, firm replies to hostile emails."
            ],
            "model": "rerank-2.5",
            "top_k": 3
        })
    );
    assert_eq!(
        out.order,
        vec![
            Ranked {
                index: 2,
                score: Some(0.898_437_5)
            },
            Ranked {
                index: 0,
                score: Some(0.566_406_25)
            },
            Ranked {
                index: 1,
                score: Some(0.238_281_25)
            },
        ]
    );
    assert_eq!(
        out.usage,
        Usage {
            input_tokens: 112,
            output_tokens: 0,
            requests: 1
        }
    );
}

#[tokio::test]
async fn voyage_top_k_is_capped_and_applied() {
    let server = FakeServer::always(Reply::json(&fixture_json("voyage_rerank.json"))).await;
    let reranker = voyage(&server);
    let out = reranker.rerank("q", &documents()[..3], 2).await.unwrap();
    assert_eq!(
        indices(&out.order),
        vec![2, 0],
        "cut to top_k even if the server sends more"
    );
    let out = reranker.rerank("q", &documents()[..3], 10).await.unwrap();
    assert_eq!(out.order.len(), 3);
    let sent: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.body["top_k"].clone())
        .collect();
    assert_eq!(
        sent,
        vec![json!(2), json!(3)],
        "top_k never above the document count"
    );
    // Nothing to rank: no request.
    assert!(reranker.rerank("q", &[], 3).await.unwrap().order.is_empty());
    assert!(
        reranker
            .rerank("q", &documents(), 0)
            .await
            .unwrap()
            .order
            .is_empty()
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn voyage_bad_indices_are_malformed() {
    for data in [
        json!([{"index": 5, "relevance_score": 0.9}]),
        json!([{"index": 1, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.5}]),
        json!([{"index": 1}]),
    ] {
        let body = json!({"object": "list", "data": data, "model": "rerank-2.5", "usage": {"total_tokens": 3}});
        let server = FakeServer::always(Reply::json(&body)).await;
        let err = voyage(&server)
            .rerank("q", &documents()[..2], 2)
            .await
            .unwrap_err();
        assert!(
            matches!(err.kind(), ProviderErrorKind::Malformed { .. }),
            "{data}: {err:?}"
        );
        assert_eq!(err.model(), Some("voyage/rerank-2.5"));
    }
}

#[tokio::test]
async fn registry_builds_each_reranker() {
    let server = FakeServer::always(Reply::json(&fixture_json("voyage_rerank.json"))).await;
    let options = server.provider_options();
    let build = |name: &str| {
        build_reranker_with_env(&name.parse::<RerankerSpec>().unwrap(), &options, &all_keys)
            .unwrap()
            .map(|r| r.model().to_owned())
    };
    assert_eq!(build("none"), None);
    assert_eq!(
        build("voyage/rerank-2.5").as_deref(),
        Some("voyage/rerank-2.5")
    );
    assert_eq!(
        build("anthropic/claude-haiku-4-5").as_deref(),
        Some("llm:anthropic/claude-haiku-4-5")
    );
    assert_eq!(
        build("llm:anthropic/claude-haiku-4-5").as_deref(),
        Some("llm:anthropic/claude-haiku-4-5")
    );
    assert_eq!(
        build("openai/gpt-4o-mini").as_deref(),
        Some("llm:openai/gpt-4o-mini")
    );
}

#[tokio::test]
async fn llm_reranker_parses_a_fenced_reply() {
    let chat = ScriptedChat::new(&["```json\n{\"ranked_ids\": [\"e3\", \"e1\"]}\n```"]);
    let reranker = LlmReranker::new(chat.clone());
    assert_eq!(reranker.model(), "llm:mock/scripted");
    let out = reranker
        .rerank("my ex sent a nasty email", &documents(), 3)
        .await
        .unwrap();
    assert_eq!(
        out.order,
        vec![
            Ranked {
                index: 2,
                score: None
            },
            Ranked {
                index: 0,
                score: None
            }
        ]
    );
    assert_eq!(
        out.usage,
        Usage {
            input_tokens: 100,
            output_tokens: 10,
            requests: 1
        }
    );
    let request = &chat.requests.lock().unwrap()[0];
    let prompt = &request.messages[0].content;
    assert!(prompt.contains("my ex sent a nasty email"), "{prompt}");
    for d in documents() {
        assert!(
            prompt.contains(&format!("- id: {}\n  title: {}\n", d.id, d.title)),
            "{prompt}"
        );
    }
    assert!(
        prompt.contains(r#"{"ranked_ids": ["<id>", ...]}"#),
        "{prompt}"
    );
    assert!(request.system.as_deref().unwrap().contains("strict JSON"));
}

#[tokio::test]
async fn llm_reranker_drops_unknown_ids_and_repeats_and_cuts_to_top_k() {
    let chat = ScriptedChat::new(&[
        r#"Sure. {"ranked_ids": ["e9", "e4", "e4", "e2", "e1", "e3"]} Let me know!"#,
    ]);
    let out = LlmReranker::new(chat)
        .rerank("pickup", &documents(), 2)
        .await
        .unwrap();
    assert_eq!(indices(&out.order), vec![3, 1]);
}

#[tokio::test]
async fn llm_reranker_asks_again_after_an_unparsable_reply() {
    let chat = ScriptedChat::new(&["I think e3 is best.", r#"{"ranked_ids": ["e3"]}"#]);
    let out = LlmReranker::new(chat.clone())
        .rerank("q", &documents(), 2)
        .await
        .unwrap();
    assert_eq!(indices(&out.order), vec![2]);
    assert_eq!(chat.calls(), 2);
    assert_eq!(
        out.usage,
        Usage {
            input_tokens: 200,
            output_tokens: 20,
            requests: 2
        },
        "usage of both calls"
    );
}

#[tokio::test]
async fn llm_reranker_gives_up_with_a_malformed_error_quoting_the_reply() {
    let chat = ScriptedChat::new(&["I think e3 is best, then e1."]);
    let reranker = LlmReranker::new(chat.clone() as Arc<_>).with_retries(1);
    let err = reranker.rerank("q", &documents(), 2).await.unwrap_err();
    assert_eq!(chat.calls(), 2, "one call and one retry");
    assert!(
        matches!(err.kind(), ProviderErrorKind::Malformed { .. }),
        "{err:?}"
    );
    assert_eq!(err.attempts(), Some(2));
    assert_eq!(
        err.to_string(),
        "llm:mock/scripted: malformed response: no usable `ranking` answer after 2 attempt(s): \
         the reply holds no JSON object (last reply starts: \"I think e3 is best, then e1.\") \
         (gave up after 2 attempts)"
    );

    // The default: two retries. Ids that are all unknown count as unusable too.
    let chat = ScriptedChat::new(&[r#"{"ranked_ids": ["x1", "x2"]}"#]);
    let err = LlmReranker::new(chat.clone())
        .rerank("q", &documents(), 2)
        .await
        .unwrap_err();
    assert_eq!(chat.calls(), 3);
    assert!(
        err.to_string().contains("names none of the candidate ids"),
        "{err}"
    );
}

#[tokio::test]
async fn llm_reranker_skips_empty_input() {
    let chat = ScriptedChat::new(&["unused"]);
    let reranker = LlmReranker::new(chat.clone());
    assert!(reranker.rerank("q", &[], 5).await.unwrap().order.is_empty());
    assert!(
        reranker
            .rerank("q", &documents(), 0)
            .await
            .unwrap()
            .order
            .is_empty()
    );
    assert_eq!(chat.calls(), 0);
}
