//! The OpenAI-compatible chat client against a fake server speaking its wire format.

use std::time::Duration;

use assay_providers::{
    ChatMessage, ChatModel, ChatRequest, ModelCheck, OpenAiChat, ProviderErrorKind, Usage,
    build_chat_model_with_env,
};
use serde_json::json;

use crate::support::{FakeServer, OPENAI_KEY, Reply, fixture, fixture_json, openai_key};

#[tokio::test]
async fn sends_the_documented_request_and_parses_the_answer() {
    let server =
        FakeServer::always(Reply::json(&fixture_json("openai_chat_completion.json"))).await;
    let chat = OpenAiChat::new(
        "gpt-4o-mini",
        Some(openai_key()),
        &server.provider_options(),
    )
    .unwrap();
    assert_eq!(chat.model(), "openai/gpt-4o-mini");
    let request = ChatRequest {
        system: Some("Be brief.".into()),
        messages: vec![
            ChatMessage::user("My ex is late again."),
            ChatMessage::assistant("How late?"),
            ChatMessage::user("An hour."),
        ],
        max_tokens: 200,
        temperature: Some(0.0),
        tools: Vec::new(),
        tool_choice: None,
        output_schema: None,
        seed: None,
    };
    let response = chat.chat(&request).await.unwrap();

    let r = &server.requests()[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    // Not api.openai.com: `max_tokens`, which vLLM, llama.cpp and Ollama read.
    assert_eq!(
        r.body,
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "My ex is late again."},
                {"role": "assistant", "content": "How late?"},
                {"role": "user", "content": "An hour."}
            ],
            "max_tokens": 200,
            "temperature": 0.0
        })
    );
    assert_eq!(
        response.text,
        "Keep it brief and stick to the schedule: confirm the pickup time and leave the rest unanswered."
    );
    assert_eq!(response.stop_reason.as_deref(), Some("stop"));
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 31,
            output_tokens: 19,
            requests: 1
        }
    );
}

#[tokio::test]
async fn a_local_server_needs_no_key_and_gets_no_auth_header() {
    let server =
        FakeServer::always(Reply::json(&fixture_json("openai_chat_completion.json"))).await;
    let chat = build_chat_model_with_env(
        &"openai/llama-3.1-8b".parse().unwrap(),
        &server.provider_options(),
        &|_| None,
    )
    .unwrap();
    let request = ChatRequest {
        system: None,
        messages: vec![ChatMessage::user("hi")],
        max_tokens: 5,
        temperature: None,
        tools: Vec::new(),
        tool_choice: None,
        output_schema: None,
        seed: None,
    };
    chat.chat(&request).await.unwrap();
    let r = &server.requests()[0];
    assert_eq!(r.header("authorization"), None);
    assert_eq!(
        r.body,
        json!({"model": "llama-3.1-8b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})
    );
}

#[tokio::test]
async fn error_bodies_are_parsed() {
    let reply = Reply::raw(429, &fixture("openai_error_429.json")).header("retry-after-ms", "120");
    let server = FakeServer::always(reply).await;
    let chat = OpenAiChat::new(
        "gpt-4o-mini",
        Some(openai_key()),
        &server.provider_options(),
    )
    .unwrap();
    let err = chat
        .chat(&ChatRequest::new(None, "hi", 5))
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    assert_eq!(err.retry_after(), Some(Duration::from_millis(120)));
    assert!(
        err.to_string().starts_with(
            "openai/gpt-4o-mini: HTTP 429 (retry after 0.12s): Rate limit reached for gpt-4o-mini"
        ),
        "{err}"
    );

    let server = FakeServer::always(Reply::raw(401, &fixture("openai_error_401.json"))).await;
    let chat = OpenAiChat::new(
        "gpt-4o-mini",
        Some(openai_key()),
        &server.provider_options(),
    )
    .unwrap();
    let err = chat
        .chat(&ChatRequest::new(None, "hi", 5))
        .await
        .unwrap_err();
    assert!(!err.is_retryable());
    assert!(
        err.to_string()
            .contains("HTTP 401: Incorrect API key provided"),
        "{err}"
    );
}

#[tokio::test]
async fn no_choices_is_malformed_and_a_refusal_is_text() {
    let server = FakeServer::always(Reply::json(
        &json!({"object": "chat.completion", "choices": []}),
    ))
    .await;
    let chat = OpenAiChat::new("m", None, &server.provider_options()).unwrap();
    let err = chat
        .chat(&ChatRequest::new(None, "hi", 5))
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ProviderErrorKind::Malformed { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "openai/m: malformed response: the answer has no choices"
    );

    let refusal = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
        "refusal": "I can't help with that."}, "finish_reason": "stop"}]});
    let server = FakeServer::always(Reply::json(&refusal)).await;
    let chat = OpenAiChat::new("m", None, &server.provider_options()).unwrap();
    let response = chat.chat(&ChatRequest::new(None, "hi", 5)).await.unwrap();
    assert_eq!(response.text, "I can't help with that.");
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 0,
            output_tokens: 0,
            requests: 1
        }
    );
}

/// Tools as functions, an assistant turn with `tool_calls`, results as `tool` messages, and an
/// answer whose arguments are a JSON string (kept as text when it is not JSON).
#[tokio::test]
async fn tool_calls_and_results_use_function_messages() {
    use assay_providers::{OutputSchema, ToolCall, ToolChoice, ToolResult, ToolSpec};
    let body = json!({
        "id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [
                {"id": "call_2", "type": "function",
                 "function": {"name": "log_chore", "arguments": "{\"chore\":\"dishes\"}"}},
                {"id": "call_3", "type": "function",
                 "function": {"name": "log_chore", "arguments": "{not json"}}
            ]}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
    });
    let server = FakeServer::always(Reply::json(&body)).await;
    let chat = OpenAiChat::new("gpt-4o-mini", None, &server.provider_options()).unwrap();
    let schema = json!({"type": "object", "properties": {}});
    let request = ChatRequest {
        system: Some("Coach.".into()),
        messages: vec![
            ChatMessage::user("did dishes"),
            ChatMessage::assistant_with_tools(
                "",
                vec![ToolCall {
                    id: "call_1".into(),
                    name: "get_state".into(),
                    arguments: json!({"verbose": true}),
                }],
            ),
            ChatMessage::tool_results(vec![ToolResult {
                call_id: "call_1".into(),
                content: "locked".into(),
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
        tool_choice: Some(ToolChoice::Tool("log_chore".into())),
        output_schema: None,
        seed: None,
    };
    let response = chat.chat(&request).await.unwrap();
    assert_eq!(
        server.requests()[0].body,
        json!({
            "model": "gpt-4o-mini", "max_tokens": 100,
            "messages": [
                {"role": "system", "content": "Coach."},
                {"role": "user", "content": "did dishes"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_state", "arguments": "{\"verbose\":true}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Error: locked"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "log_chore", "description": "Log a chore.", "parameters": schema}}],
            "tool_choice": {"type": "function", "function": {"name": "log_chore"}}
        })
    );
    assert_eq!(response.text, "");
    assert_eq!(response.tool_calls.len(), 2);
    assert_eq!(response.tool_calls[0].arguments, json!({"chore": "dishes"}));
    assert_eq!(response.tool_calls[1].arguments, json!("{not json"));

    let mut structured = ChatRequest::new(None, "grade", 50);
    structured.output_schema = Some(OutputSchema {
        name: "verdict".into(),
        schema: schema.clone(),
    });
    chat.chat(&structured).await.unwrap();
    assert_eq!(
        server.requests()[1].body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": true}})
    );
}

#[tokio::test]
async fn check_model_reads_the_model_list() {
    let server = FakeServer::start(|r| {
        assert_eq!(r.method, axum::http::Method::GET);
        assert!(r.path.ends_with("/v1/models"), "{}", r.path);
        Reply::json(&json!({"object": "list", "data": [
            {"id": "llama-3.1-8b", "object": "model"}, {"id": "qwen2.5-7b", "object": "model"}]}))
    })
    .await;
    let found = OpenAiChat::new("llama-3.1-8b", None, &server.provider_options()).unwrap();
    assert_eq!(found.check_model().await.unwrap(), ModelCheck::Found);
    let typo = OpenAiChat::new("llama-3.1-8", None, &server.provider_options()).unwrap();
    assert_eq!(
        typo.check_model().await.unwrap(),
        ModelCheck::Missing {
            known: vec!["llama-3.1-8b".into(), "qwen2.5-7b".into()]
        }
    );
    // No model list (404/405): it cannot say.
    let bare = FakeServer::always(Reply::raw(405, "")).await;
    let chat = OpenAiChat::new("m", None, &bare.provider_options()).unwrap();
    assert!(matches!(
        chat.check_model().await.unwrap(),
        ModelCheck::Unknown(_)
    ));
}
