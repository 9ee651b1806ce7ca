//! The `assay` binary: parse arguments, install logging, dispatch, map errors to exit codes.

mod args;
mod commands;
mod exit;
mod progress;
mod stdio;

use clap::Parser;

/// mimalloc instead of the system allocator: a run allocates and frees many small objects
/// (parsed YAML, rows, JSON); measured on the harness bench below.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = commands::Cli::parse();
    let filter = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_writer(std::io::stderr)
        // A closed stderr (`2>&1 | head -1`) drops the log line; its own report would panic.
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
    match commands::dispatch(cli.command) {
        Ok(code) => code.into(),
        Err(err) => exit::report(&err),
    }
}
