//! Exit codes (DESIGN.md): 0 passed; 1 quality gate failed; 2 bad input or usage;
//! 3 infrastructure errors kept the run from a verdict.

use std::process::ExitCode;

use assay_project::HarnessError;

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

/// The error and its causes, each part once: a cause whose text the message already holds
/// (an error that quotes its source) is not repeated.
pub fn chain_message(err: &anyhow::Error) -> String {
    let mut message = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !text.is_empty() && !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

/// Prints an error on stderr and chooses its exit code: 3 for infrastructure (a provider, the
/// store), else 2.
pub fn report(err: &anyhow::Error) -> ExitCode {
    crate::stdio::err(&format!("error: {}\n", chain_message(err)));
    // An optimizer session decides for the errors under it (a dry check that fails because the
    // target exits non-zero is the user's setup, though the target's error alone would say
    // infrastructure).
    let session = err
        .chain()
        .find_map(|e| e.downcast_ref::<assay_experiment::session::SessionError>());
    let infrastructure = session.map_or_else(
        || {
            err.chain().any(|e| {
                e.downcast_ref::<HarnessError>()
                    .is_some_and(HarnessError::is_infrastructure)
                    || e.downcast_ref::<assay_kb::KbError>()
                        .is_some_and(assay_kb::KbError::is_infrastructure)
                    || e.downcast_ref::<assay_experiment::ExperimentError>()
                        .is_some_and(assay_experiment::ExperimentError::is_infrastructure)
                    || e.downcast_ref::<assay_project::lock::LockError>()
                        .is_some_and(assay_project::lock::LockError::is_infrastructure)
                    || e.downcast_ref::<assay_experiment::run::RunError>()
                        .is_some_and(assay_experiment::run::RunError::is_infrastructure)
                    || e.downcast_ref::<assay_experiment::target::TargetError>()
                        .is_some_and(assay_experiment::target::TargetError::is_infrastructure)
                    || e.is::<assay_experiment::tracking::TrackingError>()
                    || e.downcast_ref::<assay_experiment::session::SessionError>()
                        .is_some_and(assay_experiment::session::SessionError::is_infrastructure)
                    || e.downcast_ref::<assay_sim::session::SessionError>()
                        .is_some_and(assay_sim::session::SessionError::is_infrastructure)
                    || e.downcast_ref::<assay_redteam::RedteamError>()
                        .is_some_and(assay_redteam::RedteamError::is_infrastructure)
            })
        },
        assay_experiment::session::SessionError::is_infrastructure,
    );
    ExitCode::from(if infrastructure { 3 } else { 2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("study: {0}")]
    struct Quoting(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("sim/scenarios/a.yaml:6: `max_turns` must be between 1 and 50, got 99")]
    struct Inner;

    #[test]
    fn each_part_of_the_chain_once() {
        let err = anyhow::Error::new(Quoting(Inner));
        assert_eq!(
            chain_message(&err),
            "study: sim/scenarios/a.yaml:6: `max_turns` must be between 1 and 50, got 99"
        );
        let err = anyhow::Error::new(Inner).context("cannot load the suite");
        assert_eq!(
            chain_message(&err),
            "cannot load the suite: sim/scenarios/a.yaml:6: `max_turns` must be between 1 and 50, got 99"
        );
    }
}
