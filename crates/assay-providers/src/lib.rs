//! Model providers for assay behind small async traits. This release covers embeddings.
//!
//! * [`Embedder`]: texts in, L2-normalised vectors out, tagged with a `vendor/model` name and an
//!   [`InputKind`] (query or document). Object safe: use it as `Box<dyn Embedder>` or
//!   `Arc<dyn Embedder>`.
//! * [`EmbedderSpec`] parses names — `builtin/hashed-ngrams`, `local/<dir>`, `hf/<repo>`,
//!   `voyage/<model>`, `openai/<model>` — and [`build_embedder`] turns one into an embedder,
//!   given [`EmbedderOptions`] (base URLs, timeout, batch size, model cache).
//! * Implementations: [`HashedNgramEmbedder`] (built in, LEXICAL: it matches words, not meaning),
//!   [`VoyageEmbedder`] and [`OpenAiEmbedder`] (HTTP), and with the `local` feature (on by
//!   default) [`LocalEmbedder`] (a sentence-transformer such as all-MiniLM-L6-v2, run with candle)
//!   and [`HfEmbedder`] (the same, fetched from the Hugging Face Hub).
//! * [`ProviderError`]: a [`ProviderErrorKind`] plus [`ProviderError::is_retryable`], which a
//!   wrapper that owns retries, rate limits and caching uses; the embedders themselves never retry.
//!
//! API keys come only from the environment ([`EnvVars`]) and never appear in errors, `Debug`
//! output or logs. Wire formats live only in their client modules.
//!
//! ```
//! use assay_providers::{build_embedder, cosine, EmbedderOptions, EmbedderSpec, InputKind};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let spec: EmbedderSpec = "builtin/hashed-ngrams".parse()?;
//! let embedder = build_embedder(&spec, &EmbedderOptions::default())?;
//! let texts = ["my ex sent a nasty email", "answering a nasty email", "flour and butter"]
//!     .map(String::from);
//! let v = embedder.embed(&texts, InputKind::Document).await?;
//! assert_eq!((embedder.model(), v[0].len()), ("builtin/hashed-ngrams", 1024));
//! assert!(cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]));
//! # Ok::<(), assay_providers::ProviderError>(())
//! # }).unwrap();
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod builtin;
mod embed;
mod error;
#[cfg(feature = "local")]
mod hf;
mod http;
#[cfg(feature = "local")]
mod local;
mod openai;
mod spec;
mod voyage;

pub use builtin::HashedNgramEmbedder;
pub use embed::{Embedder, Embeddings, InputKind, Usage, cosine, l2_normalize};
pub use error::{ProviderError, ProviderErrorKind};
#[cfg(feature = "local")]
pub use hf::{HfEmbedder, hf_cache_dir, hf_file_url};
pub use http::ApiKey;
#[cfg(feature = "local")]
pub use local::{DEFAULT_MAX_SEQ_LENGTH, LOCAL_DEFAULT_BATCH, LocalEmbedder, MODEL_FILES};
pub use openai::{OPENAI_DEFAULT_BATCH, OpenAiEmbedder};
pub use spec::{
    EmbedderOptions, EmbedderSpec, EnvVars, build_embedder, build_embedder_with_env,
    default_model_cache_dir, model_dir_from_env,
};
pub use voyage::{VOYAGE_MAX_BATCH, VoyageEmbedder};
