//! Integration tests of assay-providers: the HTTP clients (embeddings, chat, rerank) against fake
//! servers on 127.0.0.1, the LLM reranker over a scripted chat model, the call wrapper (retries,
//! limits, cache, accounting), the registry, and (feature `local`) the candle embedder against a
//! sentence-transformers reference.

mod anthropic;
mod call;
mod errors;
#[cfg(feature = "local")]
mod local;
mod openai;
mod openai_chat;
mod ratelimit;
mod registry;
mod rerank;
mod secrets;
mod support;
mod voyage;
