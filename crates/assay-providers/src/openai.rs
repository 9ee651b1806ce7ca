//! `openai/<model>`: OpenAI-compatible embeddings (`POST {base}/embeddings`): OpenAI itself, or a
//! local server with a compatible API (vLLM, llama.cpp, Ollama, text-embeddings-inference) when
//! the base URL points at it.
//!
//! Chat: [`OpenAiChat`] speaks `POST {base}/chat/completions` to the same servers.
//!
//! Embeddings wire format (the only place it lives): request
//! `{"input": [...], "model": "...", "encoding_format": "float"}` with
//! `Authorization: Bearer $OPENAI_API_KEY` (no header when there is no key, for local servers);
//! answer `{"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [...]}],
//! "model": "...", "usage": {"prompt_tokens": N, "total_tokens": N}}`. `input_type` has no
//! equivalent and is ignored.
//!
//! Chat wire format: request `{"model": "...", "messages": [{"role": "system", "content": "..."}?,
//! {"role": "user", "content": "..."}, ...], "max_completion_tokens": N, "temperature": T?,
//! "tools": [{"type": "function", "function": {"name", "description", "parameters"}}]?,
//! "tool_choice": "auto"|"required"|"none"|{"type": "function", "function": {"name"}}?,
//! "response_format": {"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}?}`;
//! an assistant turn that calls tools is `{"role": "assistant", "content": null|"...",
//! "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}]}`
//! and each result `{"role": "tool", "tool_call_id", "content"}` (errors prefixed `Error: `, the
//! API having no error flag)
//! (`max_tokens` instead of `max_completion_tokens` for servers other than api.openai.com: vLLM,
//! llama.cpp and Ollama all read `max_tokens`, while OpenAI's newer models reject it); answer
//! `{"id": "chatcmpl-…", "object": "chat.completion", "choices": [{"index": 0, "message":
//! {"role": "assistant", "content": "...", "refusal": null}, "finish_reason": "stop"}], "usage":
//! {"prompt_tokens": N, "completion_tokens": M, "total_tokens": N+M}}`. Errors are
//! `{"error": {"message": "...", "type": "...", "code": "..."}}`.

pub(crate) mod batch;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use serde_json::{Value, json};

use crate::chat::{
    BatchApi, ChatMessage, ChatModel, ChatRequest, ChatResponse, Role, ToolCall, ToolChoice,
};
use crate::embed::{Embedder, Embeddings, InputKind, Usage};
use crate::http::{
    ApiKey, DimensionCell, Http, embed_in_batches, endpoint, host, one_request_embeddings,
};
use crate::{EmbedderOptions, ProviderError, ProviderOptions};

/// Inputs per request unless [`EmbedderOptions::batch_size`] says otherwise (OpenAI accepts up
/// to 2048; local servers are often happier with fewer).
pub const OPENAI_DEFAULT_BATCH: usize = 128;

/// An embedding model behind an OpenAI-compatible API.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    name: String,
    model_id: String,
    url: String,
    http: Http,
    batch_size: usize,
    dimension: DimensionCell,
}

#[derive(Serialize)]
struct Request<'a> {
    input: &'a [String],
    model: &'a str,
    encoding_format: &'static str,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Datum>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

#[derive(Deserialize)]
struct Datum {
    index: usize,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    total_tokens: u64,
}

impl OpenAiEmbedder {
    /// A client for `model` at `options.openai_base_url`; `key` may be `None` for local servers.
    pub fn new(
        model: &str,
        key: Option<ApiKey>,
        options: &EmbedderOptions,
    ) -> Result<OpenAiEmbedder, ProviderError> {
        let name = format!("openai/{model}");
        let with_name = |e: ProviderError| e.with_model(name.clone());
        Ok(OpenAiEmbedder {
            url: endpoint(&options.openai_base_url, "embeddings").map_err(with_name)?,
            http: Http::new(options.timeout, key).map_err(with_name)?,
            batch_size: options.batch_size.unwrap_or(OPENAI_DEFAULT_BATCH).max(1),
            model_id: model.to_owned(),
            dimension: DimensionCell::default(),
            name,
        })
    }

    async fn embed_batch(&self, input: &[String]) -> Result<Embeddings, ProviderError> {
        tracing::debug!(model = %self.name, inputs = input.len(), "openai embeddings request");
        let request = Request {
            input,
            model: &self.model_id,
            encoding_format: "float",
        };
        let response: Response = self.http.post_json(&self.url, &request).await?;
        let items = response
            .data
            .into_iter()
            .map(|d| (d.index, d.embedding))
            .collect();
        // Some compatible servers fill only `total_tokens` (the same number for embeddings).
        let input_tokens = response.usage.map_or(0, |u| {
            if u.prompt_tokens > 0 {
                u.prompt_tokens
            } else {
                u.total_tokens
            }
        });
        one_request_embeddings(items, input.len(), &self.dimension, input_tokens)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> Option<usize> {
        self.dimension.get()
    }

    async fn embed_with_usage(
        &self,
        texts: &[String],
        _kind: InputKind,
    ) -> Result<Embeddings, ProviderError> {
        embed_in_batches(&self.name, texts, self.batch_size, |batch| {
            self.embed_batch(batch)
        })
        .await
    }
}

/// A chat model behind an OpenAI-compatible API (OpenAI, vLLM, llama.cpp, Ollama, …).
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    name: String,
    model_id: String,
    url: String,
    http: Http,
    /// Send `max_completion_tokens` (api.openai.com) rather than `max_tokens` (everyone else).
    completion_tokens_field: bool,
}

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
}

/// One turn in the chat-completions shape; a user turn that returns tool results becomes one
/// `tool` message per result (then a `user` message if it also has text).
fn push_wire_messages(message: &ChatMessage, out: &mut Vec<Value>) {
    for result in &message.tool_results {
        // The API has no error flag on tool messages: say it in the content.
        let content = if result.is_error {
            format!("Error: {}", result.content)
        } else {
            result.content.clone()
        };
        out.push(json!({"role": "tool", "tool_call_id": result.call_id, "content": content}));
    }
    if message.role == Role::Assistant && !message.tool_calls.is_empty() {
        let calls: Vec<Value> = message
            .tool_calls
            .iter()
            .map(|call| {
                let arguments = match &call.arguments {
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                json!({"id": call.id, "type": "function",
                       "function": {"name": call.name, "arguments": arguments}})
            })
            .collect();
        let content = if message.content.is_empty() {
            Value::Null
        } else {
            Value::String(message.content.clone())
        };
        out.push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
    } else if message.tool_results.is_empty() || !message.content.is_empty() {
        out.push(json!({"role": message.role.as_str(), "content": message.content}));
    }
}

#[derive(Deserialize)]
struct ChatAnswer {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: AnswerMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct AnswerMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Vec<AnswerToolCall>,
}

#[derive(Deserialize)]
struct AnswerToolCall {
    #[serde(default)]
    id: String,
    function: AnswerFunction,
}

#[derive(Deserialize)]
struct AnswerFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl OpenAiChat {
    /// `GET {base}/models` for the preflight.
    fn models_url(&self) -> String {
        let base = self.url.trim_end_matches("chat/completions");
        format!("{base}models")
    }

    /// A client for `model` at `options.openai_base_url`; `key` may be `None` for local servers.
    pub fn new(
        model: &str,
        key: Option<ApiKey>,
        options: &ProviderOptions,
    ) -> Result<OpenAiChat, ProviderError> {
        let name = format!("openai/{model}");
        let with_name = |e: ProviderError| e.with_model(name.clone());
        Ok(OpenAiChat {
            url: endpoint(&options.openai_base_url, "chat/completions").map_err(with_name)?,
            http: Http::new(options.timeout, key).map_err(with_name)?,
            completion_tokens_field: host(&options.openai_base_url)
                .is_some_and(|h| h == "api.openai.com"),
            model_id: model.to_owned(),
            name,
        })
    }
}

#[async_trait]
impl ChatModel for OpenAiChat {
    fn model(&self) -> &str {
        &self.name
    }

    /// `GET {base}/models`: the model is found when the list has its id. A server without the
    /// endpoint (404, 405, 501) cannot say; an authentication failure is an error.
    async fn check_model(&self) -> Result<crate::chat::ModelCheck, ProviderError> {
        use crate::chat::ModelCheck;
        let url = self.models_url();
        let with_name = |e: ProviderError| e.with_model(self.name.clone());
        let (status, body) = self.http.get_raw(&url).await.map_err(with_name)?;
        if matches!(status, 404 | 405 | 501) {
            return Ok(ModelCheck::Unknown(format!(
                "GET {url} answered {status}: the server does not list its models"
            )));
        }
        if !(200..300).contains(&status) {
            return Err(with_name(self.http.status_error(status, &body)));
        }
        #[derive(Deserialize)]
        struct Listed {
            id: String,
        }
        #[derive(Deserialize)]
        struct List {
            data: Vec<Listed>,
        }
        let Ok(list) = serde_json::from_slice::<List>(&body) else {
            return Ok(ModelCheck::Unknown(format!(
                "GET {url}: the answer is not a model list"
            )));
        };
        let known: Vec<String> = list.data.into_iter().map(|m| m.id).collect();
        Ok(if known.contains(&self.model_id) {
            ModelCheck::Found
        } else {
            ModelCheck::Missing { known }
        })
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        tracing::debug!(
            model = %self.name,
            messages = request.messages.len(),
            max_tokens = request.max_tokens,
            "openai chat request"
        );
        let body = self.wire_body(request);
        let with_name = |e: ProviderError| e.with_model(self.name.clone());
        let answer: ChatAnswer = self
            .http
            .post_json(&self.url, &body)
            .await
            .map_err(with_name)?;
        response_of(answer).map_err(with_name)
    }

    fn batch_api(&self) -> Option<Arc<dyn BatchApi>> {
        let base = self.url.trim_end_matches("chat/completions");
        Some(Arc::new(batch::OpenAiBatch::new(
            self.clone(),
            base.trim_end_matches('/').to_owned(),
        )))
    }
}

impl OpenAiChat {
    /// The body of `POST {base}/chat/completions` for `request` (also a batch line's `body`).
    pub(crate) fn wire_body(&self, request: &ChatRequest) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = &request.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        for message in &request.messages {
            push_wire_messages(message, &mut messages);
        }
        let (max_completion_tokens, max_tokens) = if self.completion_tokens_field {
            (Some(request.max_tokens), None)
        } else {
            (None, Some(request.max_tokens))
        };
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
        let tool_choice = request.tool_choice.as_ref().map(|c| match c {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        });
        let response_format = request.output_schema.as_ref().map(|s| {
            json!({"type": "json_schema",
                   "json_schema": {"name": s.name, "schema": s.schema, "strict": true}})
        });
        let body = ChatBody {
            model: &self.model_id,
            messages,
            max_completion_tokens,
            max_tokens,
            temperature: request.temperature,
            tools,
            tool_choice,
            response_format,
            seed: request.seed,
        };
        serde_json::to_value(body).unwrap_or(Value::Null)
    }

    /// The `vendor/model` name and the HTTP client, for the batch API.
    pub(crate) fn parts(&self) -> (&str, &Http) {
        (&self.name, &self.http)
    }
}

/// A chat completion (a batch result line's `response.body`) as a [`ChatResponse`].
pub(crate) fn parse_answer(answer: Value) -> Result<ChatResponse, ProviderError> {
    let answer: ChatAnswer = serde_json::from_value(answer)
        .map_err(|e| ProviderError::malformed(format!("not a chat completion: {e}")))?;
    response_of(answer)
}

fn response_of(answer: ChatAnswer) -> Result<ChatResponse, ProviderError> {
    let Some(choice) = answer.choices.into_iter().next() else {
        return Err(ProviderError::malformed("the answer has no choices"));
    };
    let tool_calls = choice
        .message
        .tool_calls
        .into_iter()
        .map(|call| ToolCall {
            id: call.id,
            name: call.function.name,
            // Arguments come as a JSON string; keep what the model wrote when it is not JSON
            // so the caller can show the model its mistake.
            arguments: serde_json::from_str(&call.function.arguments)
                .unwrap_or(Value::String(call.function.arguments)),
        })
        .collect();
    let text = choice
        .message
        .content
        .or(choice.message.refusal)
        .unwrap_or_default();
    let (input_tokens, output_tokens) = answer
        .usage
        .map_or((0, 0), |u| (u.prompt_tokens, u.completion_tokens));
    Ok(ChatResponse {
        text,
        tool_calls,
        stop_reason: choice.finish_reason,
        usage: Usage {
            input_tokens,
            output_tokens,
            requests: 1,
        },
    })
}
