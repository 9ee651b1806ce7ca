//! Integration tests: the real `assay` binary on real project files.

mod bad_input;
mod expectations;
mod migrate;
mod run;
mod support;
