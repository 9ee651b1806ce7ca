//! Integration tests: the real `assay` binary on real project files.

mod accept;
#[path = "../../examples/answer_judge.rs"]
mod answer_judge;
mod answers;
mod answers_replies;
mod answers_trajectory;
mod assertion_types;
mod assertions;
mod bad_input;
mod baseline;
mod batch;
mod calibrate;
mod changed_since;
mod ci_recipes;
mod cli_edges;
mod correctness;
mod data;
mod eval_set;
mod expectations;
mod fake_openai;
mod first_hour;
mod fuzz;
mod generate;
#[path = "../../examples/generate_provider.rs"]
mod generate_provider;
mod generate_review;
mod help_pages;
mod integrity;
mod ir;
mod judge;
mod judge_claims;
mod kb;
mod kb_store;
mod migrate;
mod optimize;
#[cfg(feature = "postgres")]
mod optimize_shared;
mod otel_backends;
mod otlp_sink;
mod packaging;
#[path = "../../examples/prompt_provider.rs"]
mod prompt_provider;
mod prompts;
mod propose;
mod providers;
mod pytest_plugin;
mod quality;
mod redteam;
mod redteam_sim;
mod release;
mod retrieve;
mod run;
mod scale;
mod schema;
mod serve;
mod shard;
#[path = "../../examples/sim_provider.rs"]
mod sim_provider;
mod simulate;
mod simulate_assertions;
mod simulate_files;
mod simulate_gate;
mod simulate_judge;
mod simulate_shard;
mod simulate_trajectory;
mod stale_tracking;
mod state;
mod support;
mod telemetry;
mod traces;
mod typed_state;
mod ui_browser;
#[path = "../../examples/ui_fixtures.rs"]
mod ui_fixtures;
mod verdicts;
mod workers;
