//! `voyage/<model>`: Voyage AI embeddings (`POST {base}/embeddings`).
//!
//! Wire format (the only place it lives):
//! request `{"input": [...], "model": "voyage-2", "input_type": "query" | "document"}` with
//! `Authorization: Bearer $VOYAGE_API_KEY`; answer
//! `{"object": "list", "data": [{"object": "embedding", "embedding": [...], "index": 0}, ...],
//! "model": "voyage-2", "usage": {"total_tokens": N}}`. At most 128 inputs per request (003 §2).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::embed::{Embedder, Embeddings, InputKind, Usage};
use crate::http::{ApiKey, DimensionCell, Http, batches, endpoint, reassemble};
use crate::{EmbedderOptions, ProviderError};

/// Voyage's limit on inputs per request.
pub const VOYAGE_MAX_BATCH: usize = 128;

/// A Voyage AI embedding model.
#[derive(Debug)]
pub struct VoyageEmbedder {
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
    input_type: &'static str,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Datum>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

#[derive(Deserialize)]
struct Datum {
    embedding: Vec<f32>,
    index: usize,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    total_tokens: u64,
}

impl VoyageEmbedder {
    /// A client for `model` (e.g. `voyage-2`) at `options.voyage_base_url`, sending at most
    /// `min(options.batch_size, 128)` inputs per request.
    pub fn new(
        model: &str,
        key: ApiKey,
        options: &EmbedderOptions,
    ) -> Result<VoyageEmbedder, ProviderError> {
        let name = format!("voyage/{model}");
        let with_name = |e: ProviderError| e.with_model(name.clone());
        Ok(VoyageEmbedder {
            url: endpoint(&options.voyage_base_url, "embeddings").map_err(with_name)?,
            http: Http::new(options.timeout, Some(key)).map_err(with_name)?,
            batch_size: options
                .batch_size
                .unwrap_or(VOYAGE_MAX_BATCH)
                .clamp(1, VOYAGE_MAX_BATCH),
            model_id: model.to_owned(),
            dimension: DimensionCell::default(),
            name,
        })
    }

    async fn embed_batch(
        &self,
        input: &[String],
        kind: InputKind,
    ) -> Result<Embeddings, ProviderError> {
        tracing::debug!(
            model = %self.name,
            inputs = input.len(),
            input_type = kind.as_str(),
            "voyage embeddings request"
        );
        let request = Request {
            input,
            model: &self.model_id,
            input_type: kind.as_str(),
        };
        let response: Response = self.http.post_json(&self.url, &request).await?;
        let items = response
            .data
            .into_iter()
            .map(|d| (d.index, d.embedding))
            .collect();
        let vectors = reassemble(items, input.len())?;
        self.dimension.check(&vectors)?;
        let input_tokens = response.usage.map_or(0, |u| u.total_tokens);
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
impl Embedder for VoyageEmbedder {
    fn model(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> Option<usize> {
        self.dimension.get()
    }

    async fn embed_with_usage(
        &self,
        texts: &[String],
        kind: InputKind,
    ) -> Result<Embeddings, ProviderError> {
        let mut out = Embeddings {
            vectors: Vec::with_capacity(texts.len()),
            usage: Usage::default(),
        };
        for range in batches(texts.len(), self.batch_size) {
            let batch = self
                .embed_batch(&texts[range], kind)
                .await
                .map_err(|e| e.with_model(self.name.clone()))?;
            out.vectors.extend(batch.vectors);
            out.usage += batch.usage;
        }
        Ok(out)
    }
}
