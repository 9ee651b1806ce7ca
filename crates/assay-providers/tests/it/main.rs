//! Integration tests of assay-providers: the HTTP clients against fake servers on 127.0.0.1, the
//! registry, and (feature `local`) the candle embedder against a sentence-transformers reference.

mod errors;
#[cfg(feature = "local")]
mod local;
mod openai;
mod registry;
mod secrets;
mod support;
mod voyage;
