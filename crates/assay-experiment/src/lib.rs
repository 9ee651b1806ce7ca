//! The prompt optimizer's experiment (`assay optimize`, `assay evaluate`, seed 001).
//!
//! * [`target`]: the system under test into which a trial's prompts are injected (the built-in
//!   multi-agent chain, a command, an HTTP endpoint) and the dry check that every agent's
//!   prompt reaches it.
//! * [`grade`]: llm-rubric through [`assay_providers::ask_structured`] and the seed's
//!   factual-correctness check.
//! * [`stats`]: McNemar, the paired bootstrap and the minimum detectable effect.
//!
//! ```
//! use assay_experiment::grade::factually_correct;
//! assert!(factually_correct("It is Mount Kilimanjaro.", "mount  kilimanjaro"));
//! assert!(!factually_correct("", "Paris"));
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod grade;
pub mod stats;
pub mod target;
pub mod tracking;
