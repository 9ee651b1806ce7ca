//! The [`ChatModel`] trait and the small types around it.
//!
//! A chat request is what every supported API can express: an optional system prompt, a list of
//! user/assistant turns, a token limit, a temperature, and optionally tools the model may call
//! ([`ToolSpec`], [`ToolChoice`]) and a JSON schema its answer must follow ([`OutputSchema`]).
//! An assistant turn may carry the [`ToolCall`]s the model made; the next user turn carries their
//! [`ToolResult`]s. Requests and responses are plain data (`Serialize` + `Deserialize`): the
//! call wrapper hashes requests for its cache and stores responses there. Fields that are empty
//! are left out of the JSON, so a request without tools hashes as it always did.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said (plain text; may be empty on a turn that only calls tools or only returns
    /// tool results).
    pub content: String,
    /// Assistant turns: the tools the model called, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// User turns: the results of the previous assistant turn's tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_results: Vec<ToolResult>,
}

impl ChatMessage {
    /// A user turn.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::User,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
        }
    }

    /// An assistant turn.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
        }
    }

    /// An assistant turn that calls tools (with any text the model said before calling them).
    pub fn assistant_with_tools(content: impl Into<String>, calls: Vec<ToolCall>) -> ChatMessage {
        ChatMessage {
            tool_calls: calls,
            ..ChatMessage::assistant(content)
        }
    }

    /// A user turn that returns tool results.
    pub fn tool_results(results: Vec<ToolResult>) -> ChatMessage {
        ChatMessage {
            tool_results: results,
            ..ChatMessage::user("")
        }
    }
}

/// A tool the model may call: a name, what it does, and a JSON schema of its arguments (the
/// shape MCP's `inputSchema` and both chat APIs use).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name (`[a-zA-Z0-9_-]{1,64}` for both APIs).
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON schema of the arguments (an `object` schema).
    pub input_schema: Value,
}

/// Whether and which tools the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "name")]
pub enum ToolChoice {
    /// The model decides (the default when tools are given).
    Auto,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Tool(String),
    /// The model must not call tools.
    None,
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; the result must quote it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model gave them (an object; a string holding what the model wrote
    /// when it was not valid JSON).
    pub arguments: Value,
}

/// The result of one tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The [`ToolCall::id`] this answers.
    pub call_id: String,
    /// What the tool returned (text), or the error message.
    pub content: String,
    /// The tool failed: `content` is its error, shown to the model as the tool's result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// A JSON schema the answer must follow (structured output). Clients put it in the request in
/// their API's way: OpenAI-compatible servers as `response_format: json_schema`, Anthropic as
/// one tool the model is made to call. The answer's [`ChatResponse::text`] is then the JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSchema {
    /// A short name for the schema (`[a-zA-Z0-9_-]`), e.g. `verdict`.
    pub name: String,
    /// The JSON schema (an `object` schema).
    pub schema: Value,
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
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Whether it must call them (`None`: the API's default, which is `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// A JSON schema the answer must follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<OutputSchema>,
    /// A sampling seed, sent to APIs that take one (OpenAI-compatible `seed`); part of the
    /// call cache's key either way, so two samples of one request are two calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl ChatRequest {
    /// A single user turn with an optional system prompt, temperature 0.
    pub fn new(system: Option<String>, user: impl Into<String>, max_tokens: u32) -> ChatRequest {
        ChatRequest {
            system,
            messages: vec![ChatMessage::user(user)],
            max_tokens,
            temperature: Some(0.0),
            tools: Vec::new(),
            tool_choice: None,
            output_schema: None,
            seed: None,
        }
    }

    /// A conversation with an optional system prompt, the provider's default temperature and
    /// no tools.
    pub fn conversation(
        system: Option<String>,
        messages: Vec<ChatMessage>,
        max_tokens: u32,
    ) -> ChatRequest {
        ChatRequest {
            system,
            messages,
            max_tokens,
            temperature: None,
            tools: Vec::new(),
            tool_choice: None,
            output_schema: None,
            seed: None,
        }
    }
}

/// A chat model's answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The reply's text (text blocks joined); with an [`OutputSchema`], the JSON answer.
    pub text: String,
    /// The tools the model called, in order (empty when it called none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
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

    /// The provider's batch API for this model, if it has one (OpenAI batches, Anthropic
    /// Message Batches): a [`crate::Batcher`] sends calls nobody waits on through it. `None`
    /// (the default): calls go one by one.
    fn batch_api(&self) -> Option<Arc<dyn BatchApi>> {
        None
    }

    /// Asks the provider whether it has this model, without a chat call (a preflight before
    /// anything is spent or written). Providers that cannot say answer
    /// [`ModelCheck::Unknown`].
    async fn check_model(&self) -> Result<ModelCheck, ProviderError> {
        Ok(ModelCheck::Unknown(
            "this provider cannot be asked for its models".into(),
        ))
    }
}

/// What a provider said of a model ([`ChatModel::check_model`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelCheck {
    /// The provider has it.
    Found,
    /// The provider says it has no such model; `known` holds the models it listed (empty when
    /// it did not list them).
    Missing {
        /// The model ids the provider listed.
        known: Vec<String>,
    },
    /// The provider cannot say (why, in words).
    Unknown(String),
}

// ---------------------------------------------------------------------------------------------
// Batch APIs

/// A provider's batch API for one chat model. Implementations hold the wire format only: no
/// retries, no waiting, no cache (the [`crate::Batcher`] owns those).
#[async_trait]
pub trait BatchApi: fmt::Debug + Send + Sync {
    /// `openai` or `anthropic`.
    fn provider(&self) -> &'static str;

    /// The API's base URL (a batch is polled where it was submitted).
    fn base_url(&self) -> &str;

    /// The `vendor/model` name.
    fn model(&self) -> &str;

    /// Submits `requests` (custom id, request) as one batch; returns the batch's id.
    async fn submit(&self, requests: &[(String, ChatRequest)]) -> Result<String, ProviderError>;

    /// Asks how batch `id` is doing; once it ended, its results by custom id.
    async fn poll(&self, id: &str) -> Result<BatchPoll, ProviderError>;

    /// One successful result (the raw answer [`BatchPoll::Ended`] gave) as the answer to
    /// `request`.
    fn parse(&self, answer: Value, request: &ChatRequest) -> Result<ChatResponse, ProviderError>;
}

/// What a poll said.
#[derive(Debug)]
pub enum BatchPoll {
    /// Still running; the provider's status (`validating`, `in_progress`, …).
    Pending(String),
    /// Ended with the provider's final status (`completed`, `ended`, `expired`, `cancelled`,
    /// `failed`) and the results it has, by custom id. A custom id without a result was not run.
    Ended {
        /// The provider's final status.
        status: String,
        /// The results by custom id.
        results: Vec<(String, ItemResult)>,
    },
}

/// The result of one request of a batch.
#[derive(Debug)]
pub enum ItemResult {
    /// It succeeded: the raw answer, for [`BatchApi::parse`].
    Answer(Value),
    /// It failed (the provider's message, with the HTTP status when there was one).
    Failed(String),
    /// It was not run (expired or cancelled): it is sent interactively.
    NotRun,
}
