//! The [`ChatModel`] trait and the small types around it.
//!
//! A chat request is what every supported API can express: an optional system prompt, a list of
//! user/assistant turns, a token limit and a temperature. Requests and responses are plain data
//! (`Serialize` + `Deserialize`): the call wrapper hashes requests for its cache and stores
//! responses there.

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{ProviderError, Usage};

/// Who speaks a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user (or the harness speaking for one).
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// The wire name: `user` or `assistant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said (plain text).
    pub content: String,
}

impl ChatMessage {
    /// A user turn.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::User,
            content: content.into(),
        }
    }

    /// An assistant turn.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// A request to a chat model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The system prompt, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation so far; the last turn is normally the user's.
    pub messages: Vec<ChatMessage>,
    /// The most tokens the reply may have.
    pub max_tokens: u32,
    /// Sampling temperature; `None` for the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// A single user turn with an optional system prompt, temperature 0.
    pub fn new(system: Option<String>, user: impl Into<String>, max_tokens: u32) -> ChatRequest {
        ChatRequest {
            system,
            messages: vec![ChatMessage::user(user)],
            max_tokens,
            temperature: Some(0.0),
        }
    }
}

/// A chat model's answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The reply's text (text blocks joined).
    pub text: String,
    /// Why generation stopped, as the provider says it (`end_turn`, `stop`, `max_tokens`,
    /// `length`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// What the call consumed.
    pub usage: Usage,
}

/// Answers chat requests.
///
/// Contract for implementations: one request, one HTTP call (no retries, no caching: the call
/// wrapper owns those, guided by [`ProviderError::is_retryable`]); errors carry the
/// `vendor/model` name; API keys never appear in errors or logs.
#[async_trait]
pub trait ChatModel: fmt::Debug + Send + Sync {
    /// The `vendor/model` name, e.g. `anthropic/claude-haiku-4-5`.
    fn model(&self) -> &str;

    /// Sends one request.
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError>;
}
