//! Report renderers of assay: RunLog (or SimReport) in, text out. Reports never call providers
//! and never compute scores; they only read the record.
//!
//! * [`console::render`]: the terminal summary of `assay run`;
//! * [`agreement`]: a judge's agreement with people (`assay judge agree`);
//! * [`markdown::render`]: the Markdown report (000 §6.6), critical failures first;
//! * [`html::render`]: the self-contained HTML report (inline CSS and SVG charts), the same
//!   content the web UI's run page shows;
//! * [`junit::render`]: JUnit XML for CI systems;
//! * [`json`]: the RunLog itself, pretty-printed;
//! * [`rundiff`]: a comparison of two runs for the console, as a Markdown section and as an
//!   HTML section (a report's "Compared with", the web UI's run diff);
//! * [`simulation`]: the console summary, Markdown report and model comparison (Markdown, HTML)
//!   of a conversation simulation, from its [`assay_core::simulation::SimReport`].
//! * [`tracecheck`]: the console summary of production traces checked against the project;
//! * [`trend`]: the saved runs over time as an SVG chart (the web UI's runs page).
//!
//! ```
//! assert_eq!(assay_report::junit::escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agreement;
pub mod answer;
mod common;
pub mod console;
pub mod experiment;
pub mod html;
pub mod junit;
mod limits;
pub mod markdown;
pub mod reference;
pub mod rundiff;
mod select;
pub mod simulation;
mod svg;
pub mod tracecheck;
pub mod trend;
mod verdict;

pub use assay_core::runlog::RunLog;

/// The RunLog as pretty-printed JSON, with a trailing newline.
pub fn json(log: &RunLog) -> String {
    let mut text =
        serde_json::to_string_pretty(log).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}
