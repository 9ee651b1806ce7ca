//! `voyage/<model>`: Voyage AI embeddings (`POST {base}/embeddings`) and reranking
//! ([`VoyageReranker`], `POST {base}/rerank`).
//!
//! Embeddings wire format (the only place it lives):
//! request `{"input": [...], "model": "voyage-2", "input_type": "query" | "document"}` with
//! `Authorization: Bearer $VOYAGE_API_KEY`; answer
//! `{"object": "list", "data": [{"object": "embedding", "embedding": [...], "index": 0}, ...],
//! "model": "voyage-2", "usage": {"total_tokens": N}}`. At most 128 inputs per request (003 §2).
//!
//! Rerank wire format: request `{"query": "...", "documents": ["title: summary", ...], "model":
//! "rerank-2.5", "top_k": K}`; answer `{"object": "list", "data": [{"index": 3,
//! "relevance_score": 0.91}, ...], "model": "rerank-2.5", "usage": {"total_tokens": N}}`, best
//! first.

use std::collections::HashSet;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::embed::{Embedder, Embeddings, InputKind, Usage};
use crate::http::{
    ApiKey, DimensionCell, Http, embed_in_batches, endpoint, one_request_embeddings,
};
use crate::rerank::{Ranked, RerankDocument, Reranker, Reranking};
use crate::{EmbedderOptions, ProviderError, ProviderOptions};

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
        let input_tokens = response.usage.map_or(0, |u| u.total_tokens);
        one_request_embeddings(items, input.len(), &self.dimension, input_tokens)
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
        embed_in_batches(&self.name, texts, self.batch_size, |batch| {
            self.embed_batch(batch, kind)
        })
        .await
    }
}

/// A Voyage AI reranker (a cross-encoder such as `rerank-2.5`), scoring each document's
/// [`RerankDocument::text`] against the query.
#[derive(Debug)]
pub struct VoyageReranker {
    name: String,
    model_id: String,
    url: String,
    http: Http,
}

#[derive(Serialize)]
struct RerankRequest<'a> {
    query: &'a str,
    documents: Vec<String>,
    model: &'a str,
    top_k: usize,
}

#[derive(Deserialize)]
struct RerankResponse {
    data: Vec<RerankDatum>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

#[derive(Deserialize)]
struct RerankDatum {
    index: usize,
    relevance_score: f64,
}

impl VoyageReranker {
    /// A client for `model` (e.g. `rerank-2.5`) at `options.voyage_base_url`.
    pub fn new(
        model: &str,
        key: ApiKey,
        options: &ProviderOptions,
    ) -> Result<VoyageReranker, ProviderError> {
        let name = format!("voyage/{model}");
        let with_name = |e: ProviderError| e.with_model(name.clone());
        Ok(VoyageReranker {
            url: endpoint(&options.voyage_base_url, "rerank").map_err(with_name)?,
            http: Http::new(options.timeout, Some(key)).map_err(with_name)?,
            model_id: model.to_owned(),
            name,
        })
    }

    async fn send(
        &self,
        query: &str,
        documents: &[RerankDocument],
        top_k: usize,
    ) -> Result<Reranking, ProviderError> {
        let top_k = top_k.min(documents.len());
        tracing::debug!(
            model = %self.name,
            documents = documents.len(),
            top_k,
            "voyage rerank request"
        );
        let request = RerankRequest {
            query,
            documents: documents.iter().map(RerankDocument::text).collect(),
            model: &self.model_id,
            top_k,
        };
        let response: RerankResponse = self.http.post_json(&self.url, &request).await?;
        let mut seen = HashSet::with_capacity(response.data.len());
        let mut order = Vec::with_capacity(response.data.len());
        for datum in response.data {
            if datum.index >= documents.len() || !seen.insert(datum.index) {
                return Err(ProviderError::malformed(format!(
                    "rerank index {} is out of range or repeated ({} documents)",
                    datum.index,
                    documents.len()
                )));
            }
            if !datum.relevance_score.is_finite() {
                return Err(ProviderError::malformed(format!(
                    "rerank score of document {} is not a finite number",
                    datum.index
                )));
            }
            order.push(Ranked {
                index: datum.index,
                score: Some(datum.relevance_score),
            });
        }
        // Voyage answers best first; sort anyway (stable) so the contract holds regardless.
        order.sort_by(|a, b| b.score.unwrap_or(0.0).total_cmp(&a.score.unwrap_or(0.0)));
        order.truncate(top_k);
        Ok(Reranking {
            order,
            usage: Usage {
                input_tokens: response.usage.map_or(0, |u| u.total_tokens),
                output_tokens: 0,
                requests: 1,
            },
        })
    }
}

#[async_trait]
impl Reranker for VoyageReranker {
    fn model(&self) -> &str {
        &self.name
    }

    async fn rerank(
        &self,
        query: &str,
        documents: &[RerankDocument],
        top_k: usize,
    ) -> Result<Reranking, ProviderError> {
        if documents.is_empty() || top_k == 0 {
            return Ok(Reranking::default());
        }
        self.send(query, documents, top_k)
            .await
            .map_err(|e| e.with_model(self.name.clone()))
    }
}
