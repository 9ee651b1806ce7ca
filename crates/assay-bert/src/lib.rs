//! A BERT encoder's forward pass on the CPU, for sentence embeddings: the weights of a Hugging
//! Face `model.safetensors`, each text run at its own token count (no padding), the matrix
//! multiplies on candle's `gemm` (AVX-512 or AVX2 kernels chosen at run time) and everything
//! else in fused, vectorised passes (`kernels.rs`: safe SIMD through `pulp`).
//!
//! It is its own crate so that it is compiled optimised in every profile (the workspace's
//! `Cargo.toml` names it under `[profile.dev.package]`): the passes are generic code of `pulp`
//! and candle, compiled where they are used, and unoptimised they took about three quarters of
//! an embedding's time in debug builds and tests. `assay-providers` (feature `local`) wraps it
//! with the tokenizer, pooling and the `Embedder` trait.
#![deny(missing_docs)]

mod bert;
mod kernels;

pub use bert::{Config, Encoder, LoadError};
pub use kernels::Activation;
