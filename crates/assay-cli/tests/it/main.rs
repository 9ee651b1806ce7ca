//! Integration tests: the real `assay` binary on real project files.

mod bad_input;
mod baseline;
mod calibrate;
mod correctness;
mod data;
mod eval_set;
mod expectations;
mod fake_openai;
mod first_hour;
mod fuzz;
mod integrity;
mod ir;
mod judge;
mod kb;
mod kb_store;
mod migrate;
mod optimize;
#[path = "../../examples/prompt_provider.rs"]
mod prompt_provider;
mod prompts;
mod propose;
mod providers;
mod quality;
mod retrieve;
mod run;
mod scale;
mod schema;
mod serve;
#[path = "../../examples/sim_provider.rs"]
mod sim_provider;
mod simulate;
mod state;
mod support;
mod ui_browser;
#[path = "../../examples/ui_fixtures.rs"]
mod ui_fixtures;
