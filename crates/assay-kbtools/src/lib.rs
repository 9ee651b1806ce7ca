//! Knowledge-base tooling: the one way an entity is created, updated, deactivated or
//! re-embedded ([`kbedit`], for `assay kb` and the admin API), threshold and weight tuning
//! ([`tune`]), two stores or embedders compared ([`compare`]) and the vector index checked
//! against exact search ([`check_index`]).
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod check_index;
pub mod compare;
pub mod kbedit;
pub mod tune;

pub use assay_project::HarnessError;
