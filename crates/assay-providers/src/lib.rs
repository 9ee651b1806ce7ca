//! Model providers for assay behind small async traits — embedders, chat models and rerankers —
//! and the one call wrapper that owns retries, limits, caching and accounting for all of them.
//!
//! * [`Embedder`]: texts in, L2-normalised vectors out, tagged with a `vendor/model` name and an
//!   [`InputKind`] (query or document). [`EmbedderSpec`] parses names — `builtin/hashed-ngrams`,
//!   `local/<dir>`, `hf/<repo>`, `voyage/<model>`, `openai/<model>` — and [`build_embedder`]
//!   turns one into an embedder, given [`EmbedderOptions`] (base URLs, timeout, batch size,
//!   model cache). Implementations: [`HashedNgramEmbedder`] (built in, LEXICAL: it matches
//!   words, not meaning), [`VoyageEmbedder`] and [`OpenAiEmbedder`] (HTTP), and with the `local`
//!   feature (on by default) [`LocalEmbedder`] (a sentence-transformer such as
//!   all-MiniLM-L6-v2, run with candle) and [`HfEmbedder`] (the same, fetched from the Hub).
//! * [`ChatModel`]: a [`ChatRequest`] (system prompt, turns, token limit, temperature, tools the
//!   model may call, a JSON schema for the answer) in, a [`ChatResponse`] (text, tool calls) out. [`ChatSpec`] parses `anthropic/<model>` ([`AnthropicChat`], the
//!   Messages API) and `openai/<model>` ([`OpenAiChat`], any OpenAI-compatible server);
//!   [`build_chat_model`] builds one from [`ProviderOptions`].
//! * Structured output ([`ask_structured`] with a [`SchemaCheck`]): the schema in the request,
//!   the reply validated against it and the caller's checks, a corrective turn on a bad reply,
//!   then a `Malformed` error. Every LLM-as-judge call goes through it.
//! * [`Reranker`]: orders [`RerankDocument`]s for a query, best `top_k` first. [`RerankerSpec`]
//!   parses `none`, `voyage/<model>` ([`VoyageReranker`], a cross-encoder) and
//!   `anthropic/<model>`, `openai/<model>` or `llm:<vendor>/<model>` ([`LlmReranker`], listwise
//!   reranking by a chat model answering `{"ranked_ids": [...]}`); [`build_reranker`] builds one
//!   (`None` for `none`).
//! * The call wrapper ([`Guarded`] with a [`CallContext`]): every provider call goes through it,
//!   and it owns what the clients do not — a minimum interval between call starts and a
//!   concurrency limit ([`CallPolicy`]), retries with exponential backoff and full jitter that
//!   honour `retry-after`, the provider's rate limits (adaptive concurrency per model, a gate
//!   after a 429, pacing by the provider's rate-limit headers: [`limit`], [`RateLimits`]; a 429
//!   does not spend a retry), a content-addressed SQLite cache of responses ([`CallCache`], in
//!   [`CacheMode`] `off`, `read-write` or `replay`), and per-model counts, tokens, latency and
//!   cost ([`Accounting`], [`AccountingSnapshot`]). The clients never retry or cache.
//! * Batch mode ([`Batcher`], [`batch`]): calls nobody waits on sent through the provider's
//!   batch API (OpenAI batches, Anthropic Message Batches) at the batch price, polled, matched
//!   by custom id, journaled so that an interrupted command polls its batches again.
//! * [`target`]: the product under test as the optimizer and the answer bank both reach it — the
//!   built-in multi-agent chain (through wrapped [`ChatModel`]s), a command run once per case,
//!   an HTTP endpoint — with its JSON exchange and the dry check that every prompt arrives.
//! * [`ProviderError`]: a [`ProviderErrorKind`] plus [`ProviderError::is_retryable`] and, once a
//!   retrying layer gave up, [`ProviderError::attempts`].
//!
//! API keys come only from the environment ([`EnvVars`]: `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`,
//! `VOYAGE_API_KEY`) and never appear in errors, `Debug` output or logs. Wire formats live only in
//! their client modules.
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

mod anthropic;
pub mod batch;
mod builtin;
mod call;
mod chat;
mod embed;
mod error;
#[cfg(feature = "local")]
mod hf;
mod http;
pub mod limit;
mod llm_rerank;
#[cfg(feature = "local")]
mod local;
mod openai;
mod rerank;
mod spec;
mod structured;
pub mod target;
mod text;
mod voyage;

pub use anthropic::{ANTHROPIC_VERSION, AnthropicChat};
pub use batch::{BatchSettings, Batcher};
pub use builtin::HashedNgramEmbedder;
pub use call::{
    Accounting, AccountingSnapshot, BATCH_PRICE_FACTOR, CacheMode, CallCache, CallContext,
    CallKind, CallPolicy, Guarded, ModelStats, Price, RateLimitStats, cache_key, is_throttle,
    is_transient, price, price_with,
};
pub use chat::{
    BatchApi, BatchPoll, ChatMessage, ChatModel, ChatRequest, ChatResponse, ModelCheck,
    OutputSchema, Role, ToolCall, ToolChoice, ToolResult, ToolSpec,
};
pub use embed::{Embedder, Embeddings, InputKind, Usage, cosine, cosine_f64, l2_normalize};
pub use error::{ProviderError, ProviderErrorKind};
#[cfg(feature = "local")]
pub use hf::{HfEmbedder, hf_cache_dir, hf_file_url};
pub use http::ApiKey;
pub use limit::{
    LearnedBucket, LearnedLimit, LimitKind, LimitMemory, LimitStatus, RateLimits, RequestCost,
};
pub use llm_rerank::LlmReranker;
#[cfg(feature = "local")]
pub use local::{DEFAULT_MAX_SEQ_LENGTH, LOCAL_DEFAULT_BATCH, LocalEmbedder, MODEL_FILES};
pub use openai::{OPENAI_DEFAULT_BATCH, OpenAiChat, OpenAiEmbedder};
pub use rerank::{Ranked, RerankDocument, Reranker, Reranking};
pub use spec::{
    ChatSpec, EmbedderOptions, EmbedderSpec, EnvVars, ProviderOptions, RerankerSpec,
    build_chat_model, build_chat_model_with_env, build_embedder, build_embedder_with_env,
    build_reranker, build_reranker_with_env, default_model_cache_dir, model_dir_from_env,
};
pub use structured::{
    DEFAULT_STRUCTURED_RETRIES, SchemaCheck, Structured, StructuredAttempt, StructuredTrace,
    ask_structured, ask_structured_traced, extract_json,
};
pub use voyage::{VOYAGE_MAX_BATCH, VoyageEmbedder, VoyageReranker};
