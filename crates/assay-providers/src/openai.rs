//! `openai/<model>`: OpenAI-compatible embeddings (`POST {base}/embeddings`): OpenAI itself, or a
//! local server with a compatible API (vLLM, llama.cpp, Ollama, text-embeddings-inference) when
//! the base URL points at it.
//!
//! Wire format (the only place it lives): request
//! `{"input": [...], "model": "...", "encoding_format": "float"}` with
//! `Authorization: Bearer $OPENAI_API_KEY` (no header when there is no key, for local servers);
//! answer `{"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [...]}],
//! "model": "...", "usage": {"prompt_tokens": N, "total_tokens": N}}`. `input_type` has no
//! equivalent and is ignored.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::embed::{Embedder, Embeddings, InputKind, Usage};
use crate::http::{ApiKey, DimensionCell, Http, batches, endpoint, reassemble};
use crate::{EmbedderOptions, ProviderError};

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
        let vectors = reassemble(items, input.len())?;
        self.dimension.check(&vectors)?;
        // Some compatible servers fill only `total_tokens` (the same number for embeddings).
        let input_tokens = response.usage.map_or(0, |u| {
            if u.prompt_tokens > 0 {
                u.prompt_tokens
            } else {
                u.total_tokens
            }
        });
        Ok(Embeddings {
            vectors,
            usage: Usage {
                input_tokens,
                requests: 1,
            },
        })
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
        let mut out = Embeddings {
            vectors: Vec::with_capacity(texts.len()),
            usage: Usage::default(),
        };
        for range in batches(texts.len(), self.batch_size) {
            let batch = self
                .embed_batch(&texts[range])
                .await
                .map_err(|e| e.with_model(self.name.clone()))?;
            out.vectors.extend(batch.vectors);
            out.usage += batch.usage;
        }
        Ok(out)
    }
}
