//! The run (000 §6): the four case runners, the answer bank with its judges, the unified
//! runner with its journal and run logs, whole runs as `assay run` does them ([`session`]),
//! calibration and human overrides of expectations, saved runs, baselines and their
//! acceptance, shard merges and stale-case tracking ([`freshness`]).
//!
//! Entry points: [`run::run`] runs a [`run::RunRequest`] against a loaded
//! [`assay_project::project::Project`] and returns the [`assay_core::runlog::RunLog`];
//! [`session::execute`] does a whole run as `assay run` does (store import, embedder,
//! reranker, provider-call wrapper, journal, saved results).
//!
//! ```no_run
//! use assay_project::project::Project;
//! use assay_run::run::{Backends, Quiet, RunOptions, RunRequest, run};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let project = Project::load(std::path::Path::new("examples/coparent")).unwrap();
//! let request = RunRequest::default();
//! let backends = Backends::files(&project);
//! let log = run(&project, &request, backends, RunOptions::default(), &mut Quiet)
//!     .await
//!     .unwrap();
//! println!("{}", log.summary.health_status);
//! # });
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod accepted;
pub mod answer;
pub mod baseline;
pub mod calibrate;
pub mod caselog;
pub mod freshness;
pub mod journal;
pub mod merge;
pub mod overrides;
pub mod run;
pub mod runners;
pub mod runs;
pub mod session;
pub mod telemetry;

pub use assay_project::HarnessError;
