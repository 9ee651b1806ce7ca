//! Prompt-optimization experiments (issue 11, seed 001): the files and adapters around the
//! pure sampler in `assay-optimize`.
//!
//! * [`cases`]: the seed's JSONL test cases and their context files, validated before any
//!   model call ([`cases::load_cases`]).
//! * [`prompts`]: each agent's prompt list, the production prompt at index 0 and the variants
//!   after it ([`prompts::load_prompt_lists`]), and prompt folders in the production layout.
//! * [`promote`]: promotion and rollback of production prompts (diff, backup, atomic writes,
//!   history), after human review.
//! * [`target`]: the system under test into which a trial's prompts are injected (the built-in
//!   multi-agent chain, a command, an HTTP endpoint) and the dry check that every agent's
//!   prompt reaches it: re-exported from [`assay_providers::target`], which the answer bank
//!   shares; [`session::build_target`] builds the one `[optimize]` describes.
//! * [`answer`]: that target, with the production prompts, as the answer bank's product
//!   ([`answer::answer_system`], [`answer::factory`] for a run).
//! * [`correct`]: whether an answer is correct (the first objective): words on word
//!   boundaries and numbers as numbers with their units by default; exact, numeric, regex,
//!   the grader's own call or the spec's substring rule per project or per case.
//!   [`correctness`] names the rules (a leaf the test cases read too).
//! * [`grade`]: llm-rubric through [`assay_providers::ask_structured`], beside the case's
//!   correctness rule.
//! * [`propose`]: reflective prompt proposals (`--propose-rounds`, GEPA-style): the cases
//!   shown, the proposer's request, the guards, the provenance files.
//! * [`run`]: the three steps (baseline, the study, evaluation), the journal and `--resume`,
//!   the budget and racing.
//! * [`stats`]: baseline vs optimized on the same cases: McNemar and the paired bootstrap from
//!   [`assay_core::stats`], and the optimizer's minimum detectable effect.
//! * [`tracking`]: MLflow runs over REST, the local tracking store, the Optuna journal export.
//! * [`session`]: a whole optimization or evaluation as `assay optimize` / `assay evaluate` run
//!   it (settings, cases, lock, services, estimate, budget, dry check, the steps, the reports
//!   and tracking): the one entry point, which the CLI maps its arguments to.
//! * [`view`]: experiments as pages show them: finished from their report, running or
//!   interrupted from their journal, with their progress.
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

pub mod agree;
pub mod answer;
pub mod cases;
pub mod correct;
pub mod correctness;
pub mod error;
pub mod grade;
pub mod promote;
pub mod prompts;
pub mod propose;
pub mod run;
pub mod session;
pub mod stats;
pub mod target;
pub mod testdata;
pub mod tracking;
pub mod view;

pub use error::ExperimentError;
