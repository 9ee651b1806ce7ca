//! `anthropic/<model>`: the Anthropic Messages API (`POST {base}/v1/messages`).
//!
//! Wire format (the only place it lives): headers `x-api-key: $ANTHROPIC_API_KEY` and
//! `anthropic-version: 2023-06-01`; request
//! `{"model": "...", "max_tokens": N, "system": "..."?, "messages": [{"role": "user", "content":
//! "..."}], "temperature": T?}`; answer `{"id": "msg_…", "type": "message", "role": "assistant",
//! "model": "...", "content": [{"type": "text", "text": "..."}, ...], "stop_reason": "end_turn",
//! "stop_sequence": null, "usage": {"input_tokens": N, "output_tokens": M, ...}}`. Errors are
//! `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}` (529 is
//! "overloaded", retryable like any 5xx).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::chat::{ChatMessage, ChatModel, ChatRequest, ChatResponse};
use crate::http::{ApiKey, AuthScheme, Http, endpoint};
use crate::{ProviderError, ProviderOptions, Usage};

/// The `anthropic-version` header this client speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A Claude model behind the Anthropic Messages API.
#[derive(Debug)]
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
    messages: &'a [ChatMessage],
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
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
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
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

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        tracing::debug!(
            model = %self.name,
            messages = request.messages.len(),
            max_tokens = request.max_tokens,
            "anthropic messages request"
        );
        let body = Request {
            model: &self.model_id,
            max_tokens: request.max_tokens,
            system: request.system.as_deref(),
            messages: &request.messages,
            temperature: request.temperature,
        };
        let response: Response = self
            .http
            .post_json(&self.url, &body)
            .await
            .map_err(|e| e.with_model(self.name.clone()))?;
        let text = response
            .content
            .into_iter()
            .filter(|b| b.kind == "text")
            .filter_map(|b| b.text)
            .collect::<String>();
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
        Ok(ChatResponse {
            text,
            stop_reason: response.stop_reason,
            usage,
        })
    }
}
