//! `local/<dir>`: a sentence-transformer (BERT family, e.g. all-MiniLM-L6-v2) run in-process
//! on the CPU: mean pooling over the real tokens, then L2 normalisation — what
//! sentence-transformers does for these models.
//!
//! The forward pass is assay's own (the `assay-bert` crate): each text is run at its own token
//! count, with no padding at all, the matrix multiplies go to candle's `gemm` (AVX-512 or AVX2
//! kernels chosen at run time) and the rest is fused, vectorised passes; 1.9× (1 thread) to
//! 2.7× (2 threads) the throughput of candle-transformers' `BertModel` on the same model, and
//! above sentence-transformers on PyTorch (bench/README.md, "MiniLM embedding").
//!
//! Two settings of the shipped `tokenizer.json` are overridden, because they silently change the
//! vectors (see shared/DEPENDENCIES.md):
//! * padding is turned off (all-MiniLM's file pads every input to 128 tokens; the padded
//!   positions would then enter the attention and the mean);
//! * truncation becomes the model's `max_seq_length` from `sentence_bert_config.json` when the
//!   directory has one, else 256 (sentence-transformers' value for all-MiniLM-L6-v2), capped by
//!   `max_position_embeddings`; the file's 128 makes long texts drift.
//!
//! Thread count: the global rayon pool's (`RAYON_NUM_THREADS`, default all cores): each thread
//! runs its share of a batch's texts through the whole model; with one thread everything runs on
//! the calling thread.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tokenizers::{Tokenizer, TruncationParams};

use crate::embed::{Embedder, Embeddings, InputKind, Usage};
use crate::{EmbedderOptions, ProviderError, ProviderErrorKind};
use assay_bert::{Config, Encoder};

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
    encoder: Encoder,
    tokenizer: Tokenizer,
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
        // first); there is no padding (each text runs at its own length), but batches of similar
        // lengths keep the per-sequence attention passes even. The output is put back in input
        // order. The texts are tokenised once, off the async thread.
        let name = self.name.clone();
        let failed = move |e: tokio::task::JoinError| {
            ProviderError::from(ProviderErrorKind::Inference {
                message: format!("the embedding task failed: {e}"),
            })
            .with_model(name.clone())
        };
        let inner = Arc::clone(&self.inner);
        let owned = texts.to_vec();
        let ids = tokio::task::spawn_blocking(move || inner.tokenize(owned))
            .await
            .map_err(&failed)?
            .map_err(|e| e.with_model(self.name.clone()))?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let mut slots: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let mut usage = Usage::default();
        for indices in order.chunks(self.batch_size) {
            let inner = Arc::clone(&self.inner);
            let batch: Vec<Vec<u32>> = indices.iter().map(|&i| ids[i].clone()).collect();
            usage.input_tokens += batch.iter().map(|s| s.len() as u64).sum::<u64>();
            let vectors = tokio::task::spawn_blocking(move || inner.embed(&batch))
                .await
                .map_err(&failed)?
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
        let config: Config = serde_json::from_str(&read_text(&config_path)?).map_err(|e| {
            ProviderError::model_file(&config_path, format!("not a BERT config: {e}"))
        })?;
        let activation = config.check().map_err(|e| {
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
        tokenizer.with_padding(None);
        let truncation = TruncationParams {
            max_length: max_seq_length,
            ..tokenizer.get_truncation().cloned().unwrap_or_default()
        };
        tokenizer.with_truncation(Some(truncation)).map_err(|e| {
            ProviderError::model_file(&tokenizer_path, format!("cannot set truncation: {e}"))
        })?;

        let weights_path = dir.join("model.safetensors");
        let weights = std::fs::read(&weights_path).map_err(|e| io_error(&weights_path, &e))?;
        let encoder = Encoder::load(&weights, &config, activation)
            .map_err(|e| ProviderError::model_file(&weights_path, e.to_string()))?;
        tracing::debug!(
            dir = %dir.display(),
            dimension = config.hidden_size,
            max_seq_length,
            "loaded local embedding model"
        );
        Ok(Bert {
            encoder,
            tokenizer,
            dimension: config.hidden_size,
            max_seq_length,
        })
    }

    /// The token ids of each text after truncation, special tokens included, no padding.
    fn tokenize(&self, texts: Vec<String>) -> Result<Vec<Vec<u32>>, ProviderError> {
        let encodings = self.tokenizer.encode_batch(texts, true).map_err(|e| {
            ProviderError::from(ProviderErrorKind::Inference {
                message: format!("tokenizing: {e}"),
            })
        })?;
        Ok(encodings.iter().map(|e| e.get_ids().to_vec()).collect())
    }

    /// Embeds one batch of token id sequences.
    fn embed(&self, sequences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ProviderError> {
        self.encoder
            .embed(sequences)
            .map_err(|message| ProviderError::from(ProviderErrorKind::Inference { message }))
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
