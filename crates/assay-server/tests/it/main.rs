//! Integration tests: the API's router on scratch copies of the example project.

mod admin;
mod answer;
mod api;
mod calibrate;
mod dashboard;
mod drafts;
mod errors;
mod experiments;
mod redteam;
mod runs;
mod simulations;
mod support;
mod traces;
mod ui;
#[path = "../../../assay-cli/examples/ui_fixtures.rs"]
mod ui_fixtures;
