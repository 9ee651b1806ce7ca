//! Integration tests: the real `assay` binary on real project files.

mod bad_input;
mod expectations;
mod kb;
mod migrate;
mod quality;
mod retrieve;
mod run;
mod state;
mod support;
