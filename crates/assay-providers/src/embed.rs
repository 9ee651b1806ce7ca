//! The [`Embedder`] trait and the small types around it.

use std::fmt;

use async_trait::async_trait;

use crate::ProviderError;

/// What a text is used for. Voyage embeds queries and documents differently (its `input_type`);
/// providers without the distinction ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// A search query (a user message).
    Query,
    /// A document to be searched (a knowledge-base entity).
    Document,
}

impl InputKind {
    /// The wire name: `query` or `document`.
    pub fn as_str(self) -> &'static str {
        match self {
            InputKind::Query => "query",
            InputKind::Document => "document",
        }
    }
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one call consumed, for accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Input tokens as counted by the provider (the tokenizer's count for `local/`; 0 for the
    /// built-in embedder, which has no tokenizer).
    pub input_tokens: u64,
    /// Output tokens (chat models; 0 for embedders and rerankers).
    #[serde(default)]
    pub output_tokens: u64,
    /// HTTP requests sent (0 for in-process embedders).
    pub requests: u32,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.requests += other.requests;
    }
}

/// Vectors and the usage of the call that made them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Embeddings {
    /// One L2-normalised vector per input text, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// What the call consumed.
    pub usage: Usage,
}

/// Turns texts into vectors.
///
/// Contract for implementations:
/// * one vector per input, in input order, all of [`Embedder::dimension`] length;
/// * every vector has L2 norm 1 (the zero vector is allowed only for inputs with nothing to
///   embed, e.g. an empty text in the built-in embedder), so cosine similarity is a dot product;
/// * an empty input gives an empty output without contacting any server;
/// * the same text and kind give the same vector (up to the provider's own nondeterminism).
///
/// Retries, rate limits and caching are not the embedder's job: a wrapper owns them, guided by
/// [`ProviderError::is_retryable`].
#[async_trait]
pub trait Embedder: fmt::Debug + Send + Sync {
    /// The `vendor/model` name stored next to the vectors, e.g. `voyage/voyage-2`.
    fn model(&self) -> &str;

    /// The vector length, when known: up front for in-process models, after the first
    /// successful call for remote ones.
    fn dimension(&self) -> Option<usize>;

    /// Embeds `texts` and reports the usage of the call.
    async fn embed_with_usage(
        &self,
        texts: &[String],
        kind: InputKind,
    ) -> Result<Embeddings, ProviderError>;

    /// Embeds `texts`: one L2-normalised vector per text, in order.
    async fn embed(
        &self,
        texts: &[String],
        kind: InputKind,
    ) -> Result<Vec<Vec<f32>>, ProviderError> {
        Ok(self.embed_with_usage(texts, kind).await?.vectors)
    }
}

/// Scales `v` to unit L2 norm in place; the zero vector (or one that is not finite) is left as is.
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in v {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

/// The cosine similarity of two vectors (0 when either is the zero vector). For the unit
/// vectors an [`Embedder`] returns this is their dot product.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    cosine_f64(a, b) as f32
}

/// [`cosine`] without the final rounding to `f32`: the one implementation, which answer
/// relevancy reads at full precision.
pub fn cosine_f64(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_and_cosine() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v);
        assert!(
            (v[0] - 0.6).abs() < 1e-7 && (v[1] - 0.8).abs() < 1e-7,
            "{v:?}"
        );
        let mut zero = vec![0.0; 3];
        l2_normalize(&mut zero);
        assert_eq!(zero, vec![0.0; 3]);
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-7);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 5.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }

    #[test]
    fn input_kind_wire_names() {
        assert_eq!(InputKind::Query.as_str(), "query");
        assert_eq!(InputKind::Document.to_string(), "document");
    }
}
