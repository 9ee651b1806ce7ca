//! `anthropic/<model>`: the Anthropic Messages API (`POST {base}/v1/messages`).
//!
//! Wire format (the only place it lives): headers `x-api-key: $ANTHROPIC_API_KEY` and
//! `anthropic-version: 2023-06-01`; request
//! `{"model": "...", "max_tokens": N, "system": "..."?, "messages": [{"role": "user", "content":
//! "..."}], "temperature": T?, "tools": [{"name", "description", "input_schema"}]?,
//! "tool_choice": {"type": "auto"|"any"|"tool"|"none", "name"?}?}`; a turn with tool traffic has
//! content blocks: `{"type": "tool_use", "id", "name", "input"}` (assistant) and
//! `{"type": "tool_result", "tool_use_id", "content", "is_error"?}` (user). Structured output is
//! one extra tool whose `input_schema` is the answer's schema, forced with `tool_choice`; its
//! `input` is the answer. Answer `{"id": "msg_…", "type": "message", "role": "assistant",
//! "model": "...", "content": [{"type": "text", "text": "..."}, ...], "stop_reason": "end_turn",
//! "stop_sequence": null, "usage": {"input_tokens": N, "output_tokens": M, ...}}`. Errors are
//! `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}` (529 is
//! "overloaded", retryable like any 5xx).

pub(crate) mod batch;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::chat::{
    BatchApi, ChatMessage, ChatModel, ChatRequest, ChatResponse, Role, ToolCall, ToolChoice,
    ToolSpec,
};
use crate::http::{ApiKey, AuthScheme, Http, endpoint};
use crate::{ProviderError, ProviderOptions, Usage};

/// The `anthropic-version` header this client speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A Claude model behind the Anthropic Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicChat {
    name: String,
    model_id: String,
    url: String,
    http: Http,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a str>,
    messages: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
}

#[derive(Deserialize)]
struct Response {
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Value>,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// One turn in the Messages API's shape: a plain string when it is only text, else content
/// blocks (`tool_result` blocks first in a user turn, as the API requires; `tool_use` blocks
/// after the text in an assistant turn).
fn wire_message(message: &ChatMessage) -> Value {
    if message.tool_calls.is_empty() && message.tool_results.is_empty() {
        return json!({"role": message.role.as_str(), "content": message.content});
    }
    let mut blocks = Vec::new();
    for result in &message.tool_results {
        let mut block = json!({
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": result.content,
        });
        if result.is_error {
            block["is_error"] = Value::Bool(true);
        }
        blocks.push(block);
    }
    if !message.content.is_empty() {
        blocks.push(json!({"type": "text", "text": message.content}));
    }
    if message.role == Role::Assistant {
        for call in &message.tool_calls {
            blocks.push(json!({
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": call.arguments,
            }));
        }
    }
    json!({"role": message.role.as_str(), "content": blocks})
}

fn wire_tool(tool: &ToolSpec) -> Value {
    json!({"name": tool.name, "description": tool.description, "input_schema": tool.input_schema})
}

fn wire_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        ToolChoice::None => json!({"type": "none"}),
    }
}

impl AnthropicChat {
    /// A client for `model` (e.g. `claude-haiku-4-5`) at `options.anthropic_base_url`.
    pub fn new(
        model: &str,
        key: ApiKey,
        options: &ProviderOptions,
    ) -> Result<AnthropicChat, ProviderError> {
        let name = format!("anthropic/{model}");
        let with_name = |e: ProviderError| e.with_model(name.clone());
        Ok(AnthropicChat {
            url: endpoint(&options.anthropic_base_url, "v1/messages").map_err(with_name)?,
            http: Http::new(options.timeout, Some(key))
                .map_err(with_name)?
                .with_auth(AuthScheme::XApiKey)
                .with_header("anthropic-version", ANTHROPIC_VERSION),
            model_id: model.to_owned(),
            name,
        })
    }
}

#[async_trait]
impl ChatModel for AnthropicChat {
    fn model(&self) -> &str {
        &self.name
    }

    /// `GET {base}/v1/models/{id}`: 200 found; a 404 whose body is Anthropic's
    /// `not_found_error` says there is no such model; any other 404 (a server without the
    /// endpoint) cannot say.
    async fn check_model(&self) -> Result<crate::chat::ModelCheck, ProviderError> {
        use crate::chat::ModelCheck;
        let base = self.url.trim_end_matches("v1/messages");
        let url = format!("{base}v1/models/{}", self.model_id);
        let with_name = |e: ProviderError| e.with_model(self.name.clone());
        let (status, body) = self.http.get_raw(&url).await.map_err(with_name)?;
        if (200..300).contains(&status) {
            return Ok(ModelCheck::Found);
        }
        if status == 404 {
            let not_found = serde_json::from_slice::<Value>(&body)
                .is_ok_and(|v| v["error"]["type"].as_str() == Some("not_found_error"));
            return Ok(if not_found {
                ModelCheck::Missing { known: Vec::new() }
            } else {
                ModelCheck::Unknown(format!(
                    "GET {url} answered 404 without Anthropic's not_found_error: the server does not describe its models"
                ))
            });
        }
        if matches!(status, 405 | 501) {
            return Ok(ModelCheck::Unknown(format!(
                "GET {url} answered {status}: the server does not describe its models"
            )));
        }
        Err(with_name(self.http.status_error(status, &body)))
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        tracing::debug!(
            model = %self.name,
            messages = request.messages.len(),
            max_tokens = request.max_tokens,
            "anthropic messages request"
        );
        let body = self.wire_body(request);
        let response: Response = self
            .http
            .post_json(&self.url, &body)
            .await
            .map_err(|e| e.with_model(self.name.clone()))?;
        Ok(response_of(response, request))
    }

    fn batch_api(&self) -> Option<Arc<dyn BatchApi>> {
        let base = self.url.trim_end_matches("v1/messages");
        Some(Arc::new(batch::AnthropicBatch::new(
            self.clone(),
            base.trim_end_matches('/').to_owned(),
        )))
    }
}

impl AnthropicChat {
    /// The body of `POST {base}/v1/messages` for `request` (also a batch request's `params`).
    pub(crate) fn wire_body(&self, request: &ChatRequest) -> Value {
        let mut tools: Vec<Value> = request.tools.iter().map(wire_tool).collect();
        let mut tool_choice = request.tool_choice.as_ref().map(wire_choice);
        // Structured output: one tool whose input schema is the answer's schema, which the
        // model is made to call; its input is the answer.
        if let Some(schema) = &request.output_schema {
            tools.push(json!({
                "name": schema.name,
                "description": "Give your answer by calling this tool with it.",
                "input_schema": schema.schema,
            }));
            tool_choice = Some(json!({"type": "tool", "name": schema.name}));
        }
        let body = Request {
            model: &self.model_id,
            max_tokens: request.max_tokens,
            system: request.system.as_deref(),
            messages: request.messages.iter().map(wire_message).collect(),
            temperature: request.temperature,
            tools,
            tool_choice,
        };
        serde_json::to_value(body).unwrap_or(Value::Null)
    }

    /// The `vendor/model` name and the HTTP client, for the batch API.
    pub(crate) fn parts(&self) -> (&str, &Http) {
        (&self.name, &self.http)
    }
}

/// A message (a batch result's `result.message`) as the answer to `request`.
pub(crate) fn parse_message(
    message: Value,
    request: &ChatRequest,
) -> Result<ChatResponse, ProviderError> {
    let response: Response = serde_json::from_value(message)
        .map_err(|e| ProviderError::malformed(format!("not a message: {e}")))?;
    Ok(response_of(response, request))
}

/// The answer to `request`: text blocks joined; with an output schema, the forced tool's input.
fn response_of(response: Response, request: &ChatRequest) -> ChatResponse {
    let forced = request.output_schema.as_ref().map(|s| s.name.as_str());
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in response.content {
        match block.kind.as_str() {
            "text" => text.push_str(block.text.as_deref().unwrap_or_default()),
            "tool_use" => {
                let name = block.name.unwrap_or_default();
                let input = block.input.unwrap_or(Value::Null);
                if forced == Some(name.as_str()) {
                    text = input.to_string();
                } else {
                    tool_calls.push(ToolCall {
                        id: block.id.unwrap_or_default(),
                        name,
                        arguments: input,
                    });
                }
            }
            _ => {}
        }
    }
    let usage = response.usage.map_or(
        Usage {
            requests: 1,
            ..Usage::default()
        },
        |u| Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            requests: 1,
        },
    );
    ChatResponse {
        text,
        tool_calls,
        stop_reason: response.stop_reason,
        usage,
    }
}
