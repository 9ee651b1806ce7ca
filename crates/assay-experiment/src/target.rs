//! The system under test, into which a trial's prompts are injected: the built-in multi-agent
//! chain, a command or an HTTP endpoint, and the dry check that every agent's prompt reaches
//! it.
//!
//! The targets live in [`assay_providers::target`], one implementation shared with the answer
//! bank of `assay run`; this module re-exports them so the optimizer names them where it
//! always did. [`crate::session::build_target`] builds the one `[optimize]` describes.

pub use assay_providers::target::*;
