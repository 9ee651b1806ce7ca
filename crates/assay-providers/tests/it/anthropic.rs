//! The Anthropic Messages client against a fake server speaking its wire format.

use assay_providers::{
    AnthropicChat, ChatMessage, ChatModel, ChatRequest, ProviderErrorKind, Usage,
    build_chat_model_with_env,
};
use serde_json::json;

use crate::support::{
    ANTHROPIC_KEY, FakeServer, Reply, all_keys, anthropic_key, fixture, fixture_json,
};

fn client(server: &FakeServer) -> AnthropicChat {
    AnthropicChat::new(
        "claude-haiku-4-5",
        anthropic_key(),
        &server.provider_options(),
    )
    .unwrap()
}

#[tokio::test]
async fn sends_the_documented_request_and_parses_the_answer() {
    let server = FakeServer::always(Reply::json(&fixture_json("anthropic_message.json"))).await;
    let chat = client(&server);
    assert_eq!(chat.model(), "anthropic/claude-haiku-4-5");

    let request = ChatRequest {
        system: Some("You help co-parents answer hostile messages.".into()),
        messages: vec![
            ChatMessage::user("My ex wrote: you are always late."),
            ChatMessage::assistant("What would you like to say?"),
            ChatMessage::user("Something calm."),
        ],
        max_tokens: 300,
        temperature: Some(0.25),
        tools: Vec::new(),
        tool_choice: None,
        output_schema: None,
        seed: None,
    };
    let response = chat.chat(&request).await.unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some(ANTHROPIC_KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        r.header("authorization"),
        None,
        "no Bearer header for Anthropic"
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.body,
        json!({
            "model": "claude-haiku-4-5",
            "max_tokens": 300,
            "system": "You help co-parents answer hostile messages.",
            "messages": [
                {"role": "user", "content": "My ex wrote: you are always late."},
                {"role": "assistant", "content": "What would you like to say?"},
                {"role": "user", "content": "Something calm."}
            ],
            "temperature": 0.25
        })
    );

    assert_eq!(
        response.text,
        "Keep it BIFF: brief, informative, friendly and firm. Answer only the logistics and skip the accusations."
    );
    assert_eq!(response.stop_reason.as_deref(), Some("end_turn"));
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 42,
            output_tokens: 23,
            requests: 1
        }
    );
}

#[tokio::test]
async fn optional_fields_are_left_out_and_non_text_blocks_ignored() {
    let body = json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "ok"}
        ],
        "stop_reason": "max_tokens", "stop_sequence": null,
        "usage": {"input_tokens": 5, "output_tokens": 1}
    });
    let server = FakeServer::always(Reply::json(&body)).await;
    let request = ChatRequest {
        system: None,
        messages: vec![ChatMessage::user("hi")],
        max_tokens: 1,
        temperature: None,
        tools: Vec::new(),
        tool_choice: None,
        output_schema: None,
        seed: None,
    };
    let response = client(&server).chat(&request).await.unwrap();
    assert_eq!(
        server.requests()[0].body,
        json!({"model": "claude-haiku-4-5", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})
    );
    assert_eq!(response.text, "ok");
    assert_eq!(response.stop_reason.as_deref(), Some("max_tokens"));
}

#[tokio::test]
async fn error_bodies_are_parsed() {
    let server = FakeServer::always(Reply::raw(
        400,
        &fixture("anthropic_error_invalid_request.json"),
    ))
    .await;
    let err = client(&server)
        .chat(&ChatRequest::new(None, "hi", 100_000))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(400));
    assert!(!err.is_retryable());
    assert_eq!(err.model(), Some("anthropic/claude-haiku-4-5"));
    assert!(
        err.to_string().starts_with(
            "anthropic/claude-haiku-4-5: HTTP 400: max_tokens: 100000 > 64000, which is the maximum"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn overloaded_529_is_retryable() {
    let server =
        FakeServer::always(Reply::raw(529, &fixture("anthropic_error_overloaded.json"))).await;
    let err = client(&server)
        .chat(&ChatRequest::new(None, "hi", 10))
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ProviderErrorKind::Http { status: 529, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert!(err.to_string().ends_with("HTTP 529: Overloaded"), "{err}");
}

#[tokio::test]
async fn a_body_without_content_is_malformed() {
    let server = FakeServer::always(Reply::json(&json!({"type": "message", "usage": {}}))).await;
    let err = client(&server)
        .chat(&ChatRequest::new(None, "hi", 10))
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ProviderErrorKind::Malformed { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn built_from_the_registry() {
    let server = FakeServer::always(Reply::json(&fixture_json("anthropic_message.json"))).await;
    let chat = build_chat_model_with_env(
        &"anthropic/claude-sonnet-4-5".parse().unwrap(),
        &server.provider_options(),
        &all_keys,
    )
    .unwrap();
    assert_eq!(chat.model(), "anthropic/claude-sonnet-4-5");
    chat.chat(&ChatRequest::new(None, "hi", 10)).await.unwrap();
    let r = &server.requests()[0];
    assert_eq!(r.body["model"], "claude-sonnet-4-5");
    assert_eq!(r.header("x-api-key"), Some(ANTHROPIC_KEY));
}

/// A request with tools, a turn that called them and the turn with their results (one an
/// error), and an answer with `tool_use` blocks.
#[tokio::test]
async fn tool_calls_and_results_use_content_blocks() {
    use assay_providers::{ToolCall, ToolChoice, ToolResult, ToolSpec};
    let body = json!({
        "id": "msg_02", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [
            {"type": "text", "text": "Logging it."},
            {"type": "tool_use", "id": "toolu_2", "name": "log_chore", "input": {"chore": "dishes"}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 50, "output_tokens": 12}
    });
    let server = FakeServer::always(Reply::json(&body)).await;
    let schema = json!({"type": "object", "properties": {"chore": {"type": "string"}}});
    let request = ChatRequest {
        system: Some("Coach.".into()),
        messages: vec![
            ChatMessage::user("did dishes"),
            ChatMessage::assistant_with_tools(
                "Checking.",
                vec![ToolCall {
                    id: "toolu_1".into(),
                    name: "get_state".into(),
                    arguments: json!({}),
                }],
            ),
            ChatMessage::tool_results(vec![ToolResult {
                call_id: "toolu_1".into(),
                content: "database locked".into(),
                is_error: true,
            }]),
        ],
        max_tokens: 100,
        temperature: None,
        tools: vec![ToolSpec {
            name: "log_chore".into(),
            description: "Log a chore.".into(),
            input_schema: schema.clone(),
        }],
        tool_choice: Some(ToolChoice::Auto),
        output_schema: None,
        seed: None,
    };
    let response = client(&server).chat(&request).await.unwrap();
    assert_eq!(
        server.requests()[0].body,
        json!({
            "model": "claude-haiku-4-5", "max_tokens": 100, "system": "Coach.",
            "messages": [
                {"role": "user", "content": "did dishes"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_state", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "database locked",
                     "is_error": true}
                ]}
            ],
            "tools": [{"name": "log_chore", "description": "Log a chore.", "input_schema": schema}],
            "tool_choice": {"type": "auto"}
        })
    );
    assert_eq!(response.text, "Logging it.");
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            id: "toolu_2".into(),
            name: "log_chore".into(),
            arguments: json!({"chore": "dishes"})
        }]
    );
    assert_eq!(response.stop_reason.as_deref(), Some("tool_use"));
}

/// Structured output is one forced tool; its input is the answer's text.
#[tokio::test]
async fn an_output_schema_is_a_forced_tool_whose_input_is_the_answer() {
    use assay_providers::OutputSchema;
    let body = json!({
        "id": "msg_03", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [{"type": "tool_use", "id": "toolu_9", "name": "verdict",
                     "input": {"score": 7}}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 5, "output_tokens": 3}
    });
    let server = FakeServer::always(Reply::json(&body)).await;
    let schema = json!({"type": "object", "required": ["score"],
                        "properties": {"score": {"type": "integer"}}});
    let mut request = ChatRequest::new(None, "grade", 50);
    request.output_schema = Some(OutputSchema {
        name: "verdict".into(),
        schema: schema.clone(),
    });
    let response = client(&server).chat(&request).await.unwrap();
    let sent = &server.requests()[0].body;
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "tool", "name": "verdict"})
    );
    assert_eq!(sent["tools"][0]["input_schema"], schema);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&response.text).unwrap(),
        json!({"score": 7})
    );
    assert!(response.tool_calls.is_empty());
}

#[tokio::test]
async fn check_model_asks_for_the_model_and_reads_not_found_errors() {
    let server = FakeServer::start(|r| {
        if r.path.ends_with("/v1/models/claude-haiku-4-5") {
            Reply::json(&json!({"type": "model", "id": "claude-haiku-4-5"}))
        } else {
            Reply::raw(
                404,
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-haiku-4-5"}}"#,
            )
        }
    })
    .await;
    assert_eq!(
        client(&server).check_model().await.unwrap(),
        assay_providers::ModelCheck::Found
    );
    let seen = server.requests();
    assert_eq!(seen[0].method, axum::http::Method::GET);
    assert_eq!(seen[0].header("x-api-key"), Some(ANTHROPIC_KEY));
    assert_eq!(seen[0].header("anthropic-version"), Some("2023-06-01"));
    let missing = AnthropicChat::new(
        "claude-haiku-4-55",
        anthropic_key(),
        &server.provider_options(),
    )
    .unwrap();
    assert_eq!(
        missing.check_model().await.unwrap(),
        assay_providers::ModelCheck::Missing { known: Vec::new() }
    );
    // A server without the endpoint cannot say.
    let bare = FakeServer::always(Reply::raw(404, "Not Found")).await;
    assert!(matches!(
        client(&bare).check_model().await.unwrap(),
        assay_providers::ModelCheck::Unknown(_)
    ));
    // A refused key is an error, not a verdict on the model.
    let refused = FakeServer::always(Reply::raw(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ))
    .await;
    let e = client(&refused).check_model().await.unwrap_err();
    assert_eq!(e.status(), Some(401), "{e}");
}
