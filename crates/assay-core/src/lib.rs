//! Domain types of assay, the test harness for LLM and RAG applications.
//!
//! This crate is pure: it does no I/O. It holds
//!
//! * [`answer`]: the answer bank's cases, results, grounded-answer metrics and case score;
//! * [`assertion`]: deterministic assertions on a reply (`contains`, `regex`, `json-schema`,
//!   `latency`, `refusal`, …, each with a `not-` form), their weights, threshold and critical flag;
//! * [`entity`]: knowledge-base entities (003 §1, §4): [`entity::Entity`], types, load modes;
//! * [`condition`]: STATE `state_conditions`, parsed and evaluated against a [`UserState`];
//! * [`state_fields`]: typed user state: the built-in fields' types, a project's declared
//!   ones, and the checks of cases' states and of conditions against them; [`timestamp`], the
//!   RFC 3339 instants both compare;
//! * [`draft`]: draft cases from `assay generate`, their provenance and findings;
//!   [`provenance`], where a case came from, kept on it once accepted;
//! * [`bank`]: test banks and cases of the four mechanisms, and pattern rules (000 §5);
//! * [`scoring`]: the 100-point scoring system (000 §3);
//! * [`ir`]: recall@k, MRR and nDCG@k of the semantic bank's ranked lists;
//! * [`experiment`]: the versioned record of a prompt-optimization experiment (seed 001);
//! * [`stats`]: the shared statistics, re-exported from the `assay-stats` crate so that
//!   `assay_core::stats::…` paths keep working;
//! * [`shard`]: `--shard hash:i/n`, which cases a shard of a suite runs;
//! * [`tracecheck`]: production retrieval spans checked against the project, and drafts made of them;
//! * [`trajectory`]: rules on the tool calls of a transcript (tools used or not, order, call
//!   bounds, arguments, turns), shared by the simulator and the answer bank; [`jsonpath`], the
//!   dot paths and JSON comparisons they and the simulator's state checks use;
//! * [`runlog`]: the versioned [`runlog::RunLog`] and its parts (bank results, weights, health,
//!   notable cases, the case record, the baseline comparison's record), plain data (000 §6.5,
//!   §9.4); [`ratelimit`], the rate-limit record it shares with the other reports;
//! * [`aggregate`]: the folds that fill a RunLog (the streaming [`aggregate::Aggregator`], the
//!   summary); [`rundiff`]: two RunLogs compared case by case;
//! * [`verdict`]: a case's verdict (pass, fail with the checks that failed it, error), stored on
//!   the case and read by every surface; [`decide`], the one function that decides it.
//!
//! ```
//! use assay_core::scoring::{score, ScoreInput};
//! let r = score(&ScoreInput { primary_pass: true, false_positives: vec!["x".into()], ..Default::default() });
//! assert_eq!((r.score, r.is_hard_fail), (80, false));
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod aggregate;
pub mod agreement;
pub mod answer;
pub mod assertion;
pub mod bank;
pub mod condition;
pub mod decide;
pub mod draft;
pub mod entity;
pub mod experiment;
pub mod ir;
pub mod jsonpath;
pub mod provenance;
pub mod ratelimit;
pub mod rundiff;
pub mod runlog;
pub mod schema;
pub mod scoring;
pub mod shard;
pub mod simulation;
pub mod state_fields;
pub use assay_stats as stats;
pub mod text;
pub mod timestamp;
pub mod tracecheck;
pub mod trajectory;
pub mod verdict;

/// The facts about a user that STATE conditions read: a map whose fields are typed by a
/// [`state_fields::StateSchema`]. The fields of 003 §5 (`user_type`, `conversation_count`,
/// `days_since_last`, …) and 000 §6.2 (`is_first_conversation`, `last_rating`, …) are
/// built in; a project declares its own (`[state.fields]`).
pub type UserState = serde_json::Map<String, serde_json::Value>;
