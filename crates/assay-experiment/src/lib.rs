//! Prompt-optimization experiments (issue 11, seed 001): the files and adapters around the
//! pure sampler in `assay-optimize`.
//!
//! * [`cases`]: the seed's JSONL test cases and their context files, validated before any
//!   model call ([`cases::load_cases`]).
//! * [`prompts`]: each agent's prompt list, the production prompt at index 0 and the variants
//!   after it ([`prompts::load_prompt_lists`]), and prompt folders in the production layout.
//! * [`promote`]: promotion and rollback of production prompts (diff, backup, atomic writes,
//!   history), after human review.
//! * [`testdata`]: `test_data/versions.json` and the versioned case sets: resolution (CLI >
//!   latest), creation (validated, copied, never overwritten), the latest pointers.
//!
//! Every error names the file and, where there is one, the line and field
//! ([`error::ExperimentError`]).
//!
//! ```
//! use std::collections::BTreeMap;
//! let dir = tempfile::tempdir().unwrap();
//! let prompts = BTreeMap::from([("planner".to_owned(), "Plan the steps.".to_owned())]);
//! assay_experiment::prompts::write_prompt_dir(&dir.path().join("prompts"), &prompts).unwrap();
//! let lists = assay_experiment::prompts::load_prompt_lists(dir.path()).unwrap();
//! assert_eq!(lists.baseline(), prompts);
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod cases;
pub mod error;
pub mod promote;
pub mod prompts;
pub mod testdata;

pub use error::ExperimentError;
