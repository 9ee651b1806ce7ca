//! `local/<dir>`: a sentence-transformer (BERT family, e.g. all-MiniLM-L6-v2) run in-process
//! with candle on the CPU: mean pooling over real tokens (the attention mask), then L2
//! normalisation — what sentence-transformers does for these models.
//!
//! Two settings of the shipped `tokenizer.json` are overridden, because they silently change the
//! vectors (see shared/DEPENDENCIES.md):
//! * padding becomes `BatchLongest` (all-MiniLM's file pads every input to 128 tokens; mean
//!   pooling must then use the mask or every pair scores cosine 0.7–0.9);
//! * truncation becomes the model's `max_seq_length` from `sentence_bert_config.json` when the
//!   directory has one, else 256 (sentence-transformers' value for all-MiniLM-L6-v2), capped by
//!   `max_position_embeddings`; the file's 128 makes long texts drift.
//!
//! Thread count: candle's matmuls use `RAYON_NUM_THREADS` threads (default: all cores).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{self, BertModel};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::embed::{Embedder, Embeddings, InputKind, Usage};
use crate::{EmbedderOptions, ProviderError, ProviderErrorKind};

/// Texts per forward pass unless [`EmbedderOptions::batch_size`] says otherwise.
pub const LOCAL_DEFAULT_BATCH: usize = 32;

/// The maximum sequence length used when the directory has no `sentence_bert_config.json`.
pub const DEFAULT_MAX_SEQ_LENGTH: usize = 256;

/// The files a model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// A BERT sentence-transformer loaded from a directory.
pub struct LocalEmbedder {
    name: String,
    batch_size: usize,
    inner: Arc<Bert>,
}

struct Bert {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dimension: usize,
    max_seq_length: usize,
}

impl LocalEmbedder {
    /// Loads `dir/{config.json, tokenizer.json, model.safetensors}` (and
    /// `sentence_bert_config.json` if present). Blocks while reading ~100 MB; errors name the
    /// missing or invalid file.
    pub fn load(dir: &Path, options: &EmbedderOptions) -> Result<LocalEmbedder, ProviderError> {
        let name = format!("local/{}", dir.display());
        let inner = Bert::load(dir).map_err(|e| e.with_model(name.clone()))?;
        Ok(LocalEmbedder {
            name,
            batch_size: options.batch_size.unwrap_or(LOCAL_DEFAULT_BATCH).max(1),
            inner: Arc::new(inner),
        })
    }

    /// The same model under another `vendor/model` name (used by `hf/`).
    pub(crate) fn renamed(mut self, name: String) -> LocalEmbedder {
        self.name = name;
        self
    }

    /// The number of tokens after which inputs are truncated.
    pub fn max_seq_length(&self) -> usize {
        self.inner.max_seq_length
    }
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("name", &self.name)
            .field("dimension", &self.inner.dimension)
            .field("max_seq_length", &self.inner.max_seq_length)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> Option<usize> {
        Some(self.inner.dimension)
    }

    async fn embed_with_usage(
        &self,
        texts: &[String],
        _kind: InputKind,
    ) -> Result<Embeddings, ProviderError> {
        // Like sentence-transformers, batch texts of similar token counts together (longest
        // first) so that little compute goes to padding; padding does not change the vectors
        // (the mean pooling uses the attention mask), and the output is put back in input
        // order. Counting tokens first costs a tokenizer pass, a few percent of the forward
        // passes it saves (bench/README.md).
        let lengths: Vec<usize> = texts
            .iter()
            .map(|t| self.inner.token_count(t).unwrap_or(t.len()))
            .collect();
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
        let mut slots: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let mut usage = Usage::default();
        for indices in order.chunks(self.batch_size) {
            let inner = Arc::clone(&self.inner);
            let chunk: Vec<String> = indices.iter().map(|&i| texts[i].clone()).collect();
            let (vectors, tokens) = tokio::task::spawn_blocking(move || inner.embed(chunk))
                .await
                .map_err(|e| {
                    ProviderError::from(ProviderErrorKind::Inference {
                        message: format!("the embedding task failed: {e}"),
                    })
                })
                .and_then(|r| r)
                .map_err(|e| e.with_model(self.name.clone()))?;
            if vectors.len() != indices.len() {
                return Err(ProviderError::from(ProviderErrorKind::Inference {
                    message: format!("{} vectors for {} texts", vectors.len(), indices.len()),
                })
                .with_model(self.name.clone()));
            }
            for (&i, vector) in indices.iter().zip(vectors) {
                slots[i] = vector;
            }
            usage.input_tokens += tokens;
        }
        Ok(Embeddings {
            vectors: slots,
            usage,
        })
    }
}

impl Bert {
    fn load(dir: &Path) -> Result<Bert, ProviderError> {
        if !dir.is_dir() {
            return Err(ProviderError::model_file(
                dir,
                format!(
                    "model directory not found (it must hold {})",
                    MODEL_FILES.join(", ")
                ),
            ));
        }
        let config_path = dir.join("config.json");
        let config: bert::Config =
            serde_json::from_str(&read_text(&config_path)?).map_err(|e| {
                ProviderError::model_file(&config_path, format!("not a BERT config: {e}"))
            })?;
        let max_seq_length = max_seq_length(dir)?.min(config.max_position_embeddings);

        let tokenizer_path = dir.join("tokenizer.json");
        if !tokenizer_path.is_file() {
            return Err(ProviderError::model_file(&tokenizer_path, "not found"));
        }
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| {
            ProviderError::model_file(&tokenizer_path, format!("not a tokenizer: {e}"))
        })?;
        let padding = match tokenizer.get_padding() {
            Some(p) => PaddingParams {
                strategy: PaddingStrategy::BatchLongest,
                ..p.clone()
            },
            None => PaddingParams {
                pad_id: config.pad_token_id as u32,
                ..PaddingParams::default()
            },
        };
        tokenizer.with_padding(Some(padding));
        let truncation = TruncationParams {
            max_length: max_seq_length,
            ..tokenizer.get_truncation().cloned().unwrap_or_default()
        };
        tokenizer.with_truncation(Some(truncation)).map_err(|e| {
            ProviderError::model_file(&tokenizer_path, format!("cannot set truncation: {e}"))
        })?;

        let weights_path = dir.join("model.safetensors");
        let device = Device::Cpu;
        let weights = std::fs::read(&weights_path).map_err(|e| io_error(&weights_path, &e))?;
        let vb =
            VarBuilder::from_buffered_safetensors(weights, bert::DTYPE, &device).map_err(|e| {
                ProviderError::model_file(&weights_path, format!("not a safetensors file: {e}"))
            })?;
        let model = BertModel::load(vb, &config).map_err(|e| {
            ProviderError::model_file(
                &weights_path,
                format!("the weights do not match config.json (is this a BERT model?): {e}"),
            )
        })?;
        tracing::debug!(
            dir = %dir.display(),
            dimension = config.hidden_size,
            max_seq_length,
            "loaded local embedding model"
        );
        Ok(Bert {
            model,
            tokenizer,
            device,
            dimension: config.hidden_size,
            max_seq_length,
        })
    }

    /// The tokens of `text` after truncation (special tokens included), or `None` when the
    /// tokenizer fails (the caller then falls back to the byte length for ordering).
    fn token_count(&self, text: &str) -> Option<usize> {
        self.tokenizer
            .encode(text, true)
            .ok()
            .map(|e| e.get_attention_mask().iter().filter(|&&m| m != 0).count())
    }

    /// Embeds one batch: the vectors and the number of real (non-padding) tokens.
    fn embed(&self, texts: Vec<String>) -> Result<(Vec<Vec<f32>>, u64), ProviderError> {
        if texts.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let inference = |e: &dyn fmt::Display| {
            ProviderError::from(ProviderErrorKind::Inference {
                message: e.to_string(),
            })
        };
        let encodings = self
            .tokenizer
            .encode_batch(texts, true)
            .map_err(|e| inference(&e))?;
        let (batch, len) = (
            encodings.len(),
            encodings.first().map_or(0, tokenizers::Encoding::len),
        );
        let mut ids = Vec::with_capacity(batch * len);
        let mut mask = Vec::with_capacity(batch * len);
        for encoding in &encodings {
            if encoding.len() != len {
                return Err(inference(
                    &"the tokenizer produced sequences of different lengths",
                ));
            }
            ids.extend_from_slice(encoding.get_ids());
            mask.extend_from_slice(encoding.get_attention_mask());
        }
        let tokens = mask.iter().map(|m| u64::from(*m)).sum();
        let forward = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, (batch, len), &self.device)?;
            let mask = Tensor::from_vec(mask, (batch, len), &self.device)?;
            // (batch, len, dim)
            let hidden = self.model.forward(&ids, &ids.zeros_like()?, Some(&mask))?;
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (batch, len, 1)
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (batch, dim)
            let counts = mask.sum(1)?.clamp(1e-9, f64::INFINITY)?; // (batch, 1)
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean
                .sqr()?
                .sum_keepdim(1)?
                .sqrt()?
                .clamp(1e-12, f64::INFINITY)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        let vectors = forward().map_err(|e| inference(&e))?;
        Ok((vectors, tokens))
    }
}

/// `max_seq_length` from `sentence_bert_config.json`, or [`DEFAULT_MAX_SEQ_LENGTH`].
fn max_seq_length(dir: &Path) -> Result<usize, ProviderError> {
    let path = dir.join("sentence_bert_config.json");
    if !path.is_file() {
        return Ok(DEFAULT_MAX_SEQ_LENGTH);
    }
    let json: serde_json::Value = serde_json::from_str(&read_text(&path)?)
        .map_err(|e| ProviderError::model_file(&path, format!("invalid JSON: {e}")))?;
    match json.get("max_seq_length") {
        None => Ok(DEFAULT_MAX_SEQ_LENGTH),
        Some(v) => v
            .as_u64()
            .filter(|n| *n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| {
                ProviderError::model_file(
                    &path,
                    format!("max_seq_length must be a positive integer, not {v}"),
                )
            }),
    }
}

fn read_text(path: &Path) -> Result<String, ProviderError> {
    std::fs::read_to_string(path).map_err(|e| io_error(path, &e))
}

fn io_error(path: &Path, e: &std::io::Error) -> ProviderError {
    let message = if e.kind() == std::io::ErrorKind::NotFound {
        "not found".to_owned()
    } else {
        e.to_string()
    };
    ProviderError::model_file(PathBuf::from(path), message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_seq_length_from_sentence_bert_config() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(max_seq_length(dir.path()).unwrap(), 256);
        std::fs::write(
            dir.path().join("sentence_bert_config.json"),
            r#"{"max_seq_length": 384, "do_lower_case": false}"#,
        )
        .unwrap();
        assert_eq!(max_seq_length(dir.path()).unwrap(), 384);
        std::fs::write(
            dir.path().join("sentence_bert_config.json"),
            r#"{"max_seq_length": "long"}"#,
        )
        .unwrap();
        let err = max_seq_length(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("sentence_bert_config.json") && err.contains("positive integer"),
            "{err}"
        );
    }
}
