//! Integration tests: the API's router on scratch copies of the example project.

mod admin;
mod api;
mod calibrate;
mod runs;
mod support;
mod ui;
