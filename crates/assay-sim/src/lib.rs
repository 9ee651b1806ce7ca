//! The conversation simulator (`assay simulate`): a simulated user talks with the model under
//! test, which calls tools served by MCP servers; a judge scores the transcript on weighted
//! criteria; reports and a side-by-side comparison of models.
//!
//! * [`suite`]: the files under `sim/` (suite, scenarios, fixture), validated before anything
//!   runs ([`suite::load`]).
//! * [`mcp`]: servers started per scenario run (stdio) or reached by URL (streamable HTTP)
//!   through `rmcp`, their tools offered to the model, placeholders and commands.
//! * [`conversation`]: the turn loop with tool rounds; [`assay_core::simulation::Transcript`],
//!   each turn with what its model calls took and cost
//!   ([`assay_core::simulation::TurnUsage`]).
//! * [`checks`]: expected-state checks read after the conversation.
//! * [`trajectory`]: trajectory checks of the assistant's tool calls in the transcript
//!   ([`assay_core::trajectory`], re-exported, with the preflight's test of the tools named).
//! * [`assertions`]: deterministic assertions (`assert`) on the assistant's final reply.
//! * [`judge`]: the judge's prompt, schema and weighting, through
//!   [`assay_providers::ask_structured`].
//! * [`run`]: preflight, concurrent scenario runs, aggregation into a [`SimReport`]
//!   ([`run::aggregate`], which [`merge`] shares) with verdicts `pass`, `fail`,
//!   `simulator_fault` and `error`; the record's types live in [`assay_core::simulation`] and
//!   `assay-report` renders them.
//! * [`scratch`]: the simulation's scratch folder, removed after the run, and leftovers of
//!   killed runs swept at the start.
//! * [`report`]: saving a report (Markdown, JSON, self-contained HTML, transcripts) and reading
//!   a saved one (its version checked).
//! * [`session`]: a whole simulation as `assay simulate` runs it (settings, suite, baseline
//!   checks, models behind one call limit, scratch, preflight, runs, saving): the one entry
//!   point, which the CLI maps its arguments to; with `--shard hash:i/n`, one shard of it.
//! * [`probe`]: one scenario run at a time with its persona replaced or its tool results
//!   rewritten, never judged (`assay redteam`'s simulator families).
//! * [`drafts`]: draft scenarios (`sim/drafts/`), written by `assay redteam --drafts` and
//!   reviewed with `assay generate review` into `sim/scenarios/`.
//! * [`merge`]: the shards' reports checked (one simulation, every shard once) and merged into
//!   the report an unsharded run would have made, through the simulator's own aggregation.
//!
//! Every model call goes through the caller's wrapped [`assay_providers::ChatModel`]s (retries,
//! limits, call cache, replay, accounting).
//!
//! ```
//! use assay_sim::checks::at_path;
//! let state = serde_json::json!({"chores": [{"name": "dishes"}]});
//! assert_eq!(at_path(&state, "chores.0.name"), Some(&serde_json::json!("dishes")));
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agree;
pub mod assertions;
pub mod checks;
pub mod conversation;
pub mod drafts;
pub mod judge;
pub mod mcp;
pub mod merge;
pub mod probe;
pub mod report;
pub mod run;
pub mod scratch;
pub mod session;
pub mod suite;
pub mod trajectory;

pub use assay_core::simulation::{SimReport, Verdict};
pub use run::{SimModels, SimOptions, preflight, select, simulate};
pub use suite::{Suite, SuiteError, load};
