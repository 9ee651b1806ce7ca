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
//! {"role": "user", "content": "..."}, ...], "max_completion_tokens": N, "temperature": T?}`
//! (`max_tokens` instead of `max_completion_tokens` for servers other than api.openai.com: vLLM,
//! llama.cpp and Ollama all read `max_tokens`, while OpenAI's newer models reject it); answer
//! `{"id": "chatcmpl-…", "object": "chat.completion", "choices": [{"index": 0, "message":
//! {"role": "assistant", "content": "...", "refusal": null}, "finish_reason": "stop"}], "usage":
//! {"prompt_tokens": N, "completion_tokens": M, "total_tokens": N+M}}`. Errors are
//! `{"error": {"message": "...", "type": "...", "code": "..."}}`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::chat::{ChatModel, ChatRequest, ChatResponse};
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
#[derive(Debug)]
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
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: &'a str,
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
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl OpenAiChat {
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

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        tracing::debug!(
            model = %self.name,
            messages = request.messages.len(),
            max_tokens = request.max_tokens,
            "openai chat request"
        );
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = &request.system {
            messages.push(WireMessage {
                role: "system",
                content: system,
            });
        }
        messages.extend(request.messages.iter().map(|m| WireMessage {
            role: m.role.as_str(),
            content: &m.content,
        }));
        let (max_completion_tokens, max_tokens) = if self.completion_tokens_field {
            (Some(request.max_tokens), None)
        } else {
            (None, Some(request.max_tokens))
        };
        let body = ChatBody {
            model: &self.model_id,
            messages,
            max_completion_tokens,
            max_tokens,
            temperature: request.temperature,
        };
        let with_name = |e: ProviderError| e.with_model(self.name.clone());
        let answer: ChatAnswer = self
            .http
            .post_json(&self.url, &body)
            .await
            .map_err(with_name)?;
        let Some(choice) = answer.choices.into_iter().next() else {
            return Err(with_name(ProviderError::malformed(
                "the answer has no choices",
            )));
        };
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
            stop_reason: choice.finish_reason,
            usage: Usage {
                input_tokens,
                output_tokens,
                requests: 1,
            },
        })
    }
}
