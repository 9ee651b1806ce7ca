//! Exit codes (DESIGN.md): 0 passed; 1 quality gate failed; 2 bad input or usage;
//! 3 infrastructure errors kept the run from a verdict.

use std::process::ExitCode;

use assay_harness::HarnessError;

/// The outcome of a command that ran to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything passed.
    Success,
    /// The quality gate failed.
    GateFailed,
    /// Infrastructure errors kept cases from a verdict.
    Infrastructure,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        match e {
            Exit::Success => ExitCode::SUCCESS,
            Exit::GateFailed => ExitCode::from(1),
            Exit::Infrastructure => ExitCode::from(3),
        }
    }
}

/// Prints an error on stderr and chooses its exit code: 3 for infrastructure (a provider, the
/// store), else 2.
pub fn report(err: &anyhow::Error) -> ExitCode {
    #[allow(clippy::print_stderr)]
    {
        eprintln!("error: {err:#}");
    }
    let infrastructure = err.chain().any(|e| {
        e.downcast_ref::<HarnessError>()
            .is_some_and(HarnessError::is_infrastructure)
            || e.downcast_ref::<assay_kb::KbError>()
                .is_some_and(assay_kb::KbError::is_infrastructure)
            || e.downcast_ref::<assay_experiment::ExperimentError>()
                .is_some_and(assay_experiment::ExperimentError::is_infrastructure)
            || e.downcast_ref::<assay_harness::lock::LockError>()
                .is_some_and(assay_harness::lock::LockError::is_infrastructure)
    });
    ExitCode::from(if infrastructure { 3 } else { 2 })
}
