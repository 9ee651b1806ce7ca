//! Integration tests: the API's router on scratch copies of the example project.

mod api;
mod calibrate;
mod support;
mod ui;
