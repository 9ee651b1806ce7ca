//! One module per subcommand; each parses its arguments into settings and calls the library.

mod banks;
mod calibrate;
mod data;
mod embed;
mod expectations;
mod generate;
mod generate_review;
mod init;
mod judge;
mod kb;
mod kb_check_index;
mod kb_compare;
mod optimize;
mod otel;
mod output;
mod prompts;
mod retrieve;
mod run;
mod runs;
pub mod schema;
mod serve;
mod simulate;
mod state;
mod traces;
mod validate;

use crate::args::{BanksCommand, Command, GenerateCommand};
use crate::exit::Exit;

/// Runs a subcommand.
pub fn dispatch(command: Command) -> anyhow::Result<Exit> {
    // The commands that call models or run cases export their spans when telemetry is on.
    let traced = match &command {
        Command::Run(a) => Some((a.dir.clone(), "assay run")),
        Command::Calibrate(a) => Some((a.dir.clone(), "assay calibrate")),
        Command::Generate(a) if a.command.is_none() => a.dir.clone().map(|d| (d, "assay generate")),
        Command::Simulate(a) if a.command.is_none() => a.dir.clone().map(|d| (d, "assay simulate")),
        Command::Optimize(a) => Some((a.dir.clone(), "assay optimize")),
        Command::Evaluate(a) => Some((a.dir.clone(), "assay evaluate")),
        Command::Retrieve(a) => Some((a.project.clone(), "assay retrieve")),
        Command::Judge { project, .. } => Some((project.clone(), "assay judge")),
        _ => None,
    };
    let telemetry = match &traced {
        Some((dir, name)) => otel::start(dir, name)?,
        None => None,
    };
    let result = dispatch_command(command);
    if let Some(telemetry) = telemetry {
        let span = telemetry.span();
        match &result {
            Ok(exit) => span.set("assay.exit", format!("{exit:?}")),
            Err(e) => span.fail("command_error", crate::exit::chain_message(e)),
        }
        telemetry.finish();
    }
    result
}

fn dispatch_command(command: Command) -> anyhow::Result<Exit> {
    match command {
        Command::Run(args) => run::run(&args),
        Command::Runs { project, command } => runs::run(&project, &command),
        Command::Judge { project, command } => judge::run(&project, &command),
        Command::Expectations(args) => expectations::run(&args),
        Command::Calibrate(args) => calibrate::run(&args),
        Command::Generate(args) => match &args.command {
            Some(GenerateCommand::Review(review)) => generate_review::review(review),
            Some(GenerateCommand::Coverage(coverage)) => generate_review::coverage(coverage),
            None => generate::run(&args),
        },
        Command::Banks {
            command: BanksCommand::Migrate(args),
        } => banks::migrate(&args.dir),
        Command::Validate(args) => validate::run(&args.dir),
        Command::Schema { kind, markdown } => schema::run(kind.as_deref(), markdown),
        Command::Init(args) => init::run(&args.dir),
        Command::Serve(args) => serve::run(&args),
        Command::Simulate(args) => simulate::run(&args),
        Command::Optimize(args) => optimize::optimize(&args),
        Command::Evaluate(args) => optimize::evaluate(&args),
        Command::Retrieve(args) => retrieve::run(&args),
        Command::Embed(args) => embed::run(&args),
        Command::Kb { project, command } => kb::run(&project, &command),
        Command::State { project, command } => state::run(&project, &command),
        Command::Data { project, command } => data::run(&project, &command),
        Command::Prompts { project, command } => prompts::run(&project, &command),
        Command::Traces { project, command } => traces::run(&project, &command),
    }
}

/// A runtime for the async provider calls of one command.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// A single-threaded runtime, for work whose futures are not `Send` (the SQLite store is used
/// across awaits).
pub fn current_thread_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The process environment, as the lookup the harness takes.
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Writes to stdout, ignoring a closed pipe (`assay … | head -1`): the command goes on and
/// ends with the exit code it would have had, which is what a CI step that pipes assay's
/// output through `head` or `grep -q` reads. Every line of data goes through here, never
/// `println!`, which panics on a closed pipe.
pub fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Writes to stderr, ignoring a closed pipe, as [`out`] does for stdout (never `eprintln!`,
/// which panics when stderr is closed).
pub fn err(text: &str) {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

/// The command line as typed, for the project lock's holder description.
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Logs the project's loading warnings on stderr.
pub fn log_warnings(warnings: &[String]) {
    for w in warnings {
        tracing::warn!("{w}");
    }
}
