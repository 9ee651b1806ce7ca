//! One module per subcommand; each declares its arguments (beside the code that reads them),
//! parses them into settings and calls the library. Here: the top-level `Cli` and `Command`,
//! and the dispatch.

mod banks;
mod calibrate;
mod check;
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
mod redteam;
mod retrieve;
mod run;
mod runs;
pub mod schema;
mod serve;
mod simulate;
mod state;
mod traces;
mod validate;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use banks::BanksCommand;
use calibrate::CalibrateArgs;
use check::CheckArgs;
use data::DataCommand;
use embed::EmbedArgs;
use expectations::ExpectationsArgs;
use generate::{GenerateArgs, GenerateCommand};
use init::InitArgs;
use judge::JudgeCommand;
use kb::KbCommand;
use optimize::{EvaluateArgs, OptimizeArgs};
use prompts::PromptsCommand;
use redteam::RedteamArgs;
use retrieve::RetrieveArgs;
use run::RunArgs;
use runs::RunsCommand;
use serve::ServeArgs;
use simulate::SimulateArgs;
use state::StateCommand;
use traces::TracesCommand;

use crate::args::ProjectArg;
use crate::exit::Exit;
pub use crate::stdio::{err, out};

/// assay: a fast, offline test harness for LLM and RAG applications.
///
/// Point it at a project directory (knowledge base in kb/, test banks in test_banks/,
/// optional assay.toml) and it scores how well retrieval works, in seconds.
#[derive(Debug, Parser)]
#[command(name = "assay", version, about, long_about, propagate_version = true)]
pub struct Cli {
    /// More logging on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run test banks against a project and report scores and health.
    ///
    /// With --baseline, the run is compared case by case with a saved run: the console leads
    /// with what differs between the two runs' setups and the regressions, the reports gain a
    /// "Compared with" section, and [gate]'s regression rules apply (no_new_hard_fails and
    /// no_new_critical, on by default; max_score_drop).
    ///
    /// Exit codes: 0 passed, 1 quality gate failed (CRITICAL health, below [gate] in assay.toml,
    /// or a regression rule broken; the cases are named), 2 bad input, 3 infrastructure errors.
    Run(RunArgs),
    /// Attack the assistant, offline: crisis messages rewritten to dodge the pattern rules,
    /// instructions planted in the user's message and in the knowledge base's context, canaries
    /// in the user's state; each attempt judged by objective evidence.
    ///
    /// Every attempt is seeded and journaled in results/redteam/<run>/ (with report.md,
    /// report.json and junit.xml); each family's attack success rate is reported with its 95 %
    /// interval, or its upper bound when nothing worked. See docs/redteam.md.
    ///
    /// Exit codes: 0 every family within `[redteam] max_success_rate` (and no worse than
    /// --baseline), 1 a family above it, 2 bad input, 3 infrastructure errors.
    Redteam(RedteamArgs),
    /// Write draft test cases from the knowledge base, review them, and see what no case covers.
    ///
    /// `assay generate DIR` writes drafts into test_banks/drafts/<bank>/ (runs ignore them
    /// unless given --include-drafts): semantic messages a model writes for each SITUATION
    /// entity, user states on each side of every STATE condition's boundaries (no model), and
    /// messages that should and should not fire each pattern rule. A draft the system under test
    /// does not treat as intended is a finding, listed for review as such. Nothing a person
    /// wrote is overwritten. `assay generate review` accepts, edits or rejects drafts;
    /// `assay generate coverage` lists entities, handlers and rules without a case. See
    /// docs/generate.md.
    ///
    /// Exit codes: 0 done, 2 bad input (or --budget below the estimate: nothing is called),
    /// 3 infrastructure errors (the provider, the store).
    Generate(GenerateArgs),
    /// Measure a judge against people: the simulator's judge or the optimizer's llm-rubric
    /// grader scores items people labelled, and the agreement is reported per criterion
    /// (Cohen's kappa, Spearman, mean absolute error, a confusion table) and overall (with a
    /// bootstrap interval). See docs/judges.md.
    Judge {
        /// The project directory.
        #[arg(long, global = true, default_value = ".", value_name = "DIR")]
        project: PathBuf,
        #[command(subcommand)]
        command: JudgeCommand,
    },
    /// The saved runs of a project: list them, or compare two case by case (what the web UI's
    /// run diff shows).
    Runs {
        /// The project directory.
        #[arg(long, global = true, default_value = ".", value_name = "DIR")]
        project: PathBuf,
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Check production traces against the project: each retrieval span's query through
    /// assay's own pipeline beside what production retrieved (entities missing or extra, rank
    /// differences, unknown or inactive ids served, crisis patterns that fired with no handler
    /// loaded), summarised by kind and by entity. See docs/traces.md.
    Traces {
        /// The project directory.
        #[arg(long, global = true, default_value = ".", value_name = "DIR")]
        project: PathBuf,
        #[command(subcommand)]
        command: TracesCommand,
    },
    /// Print each semantic case's resolved expectations and where they came from, or record a
    /// human override (`assay expectations override`).
    Expectations(ExpectationsArgs),
    /// Calibrate semantic expectations with a strong chat model and the whole knowledge base.
    ///
    /// Changed cases go into a new history file (test_banks/semantic/history/); human overrides
    /// stay in force. Raw replies go to calibration/opus_responses/ and the run is logged in
    /// calibration/calibration_log.json. Nothing existing is modified; --dry-run writes nothing.
    Calibrate(CalibrateArgs),
    /// Check one reply against assertions (docs/assertions.md), outside a run: the JSON on
    /// stdin (or --input) is `{"reply": "…", "assert": [...]}`, with optional `threshold`,
    /// `latency_ms` and `cost_usd`. What `assay_eval.check` calls from Python.
    ///
    /// Exit codes: 0 the assertions passed; 1 they did not; 2 bad input (the field named).
    Check(CheckArgs),
    /// Work with bank files.
    Banks {
        #[command(subcommand)]
        command: BanksCommand,
    },
    /// Load and validate a project without running anything.
    Validate(ProjectArg),
    /// Print the JSON Schema of a kind of file assay reads (knowledge-base files, the four
    /// banks, pattern rules, expectation history, assay.toml, simulation suites and scenarios,
    /// judge labels, optimizer cases), for editors and validators. Without KIND, lists the
    /// kinds. docs/reference/ has a page on each.
    Schema {
        /// The kind of file (`assay schema` lists them).
        kind: Option<String>,
        /// Print the kind's reference page (Markdown) instead of its schema.
        #[arg(long, requires = "kind")]
        markdown: bool,
    },
    /// Retrieve the context for a message with the project's retrieval pipeline.
    ///
    /// Stages: ALWAYS, STATE (conditions on the user's state), pattern rules (crisis first),
    /// SITUATION semantic search (threshold, top_k), then ranking by similarity + priority bonus
    /// and a token budget counted with cl100k_base.
    Retrieve(RetrieveArgs),
    /// Print the embedding of each text (for checking a model).
    Embed(EmbedArgs),
    /// Manage the knowledge-base store (`.assay/kb.db`): import, list, edit, history, embed.
    ///
    /// The project's kb/ files are the source of truth: create, update and deactivate change
    /// the files and the store together, so the next import changes nothing.
    Kb {
        /// The project directory.
        #[arg(long, global = true, default_value = ".", value_name = "DIR")]
        project: PathBuf,
        #[command(subcommand)]
        command: KbCommand,
    },
    /// Read and change stored user state (user type, conversation count, last rating, …),
    /// which STATE conditions read.
    State {
        /// The project directory.
        #[arg(long, global = true, default_value = ".", value_name = "DIR")]
        project: PathBuf,
        #[command(subcommand)]
        command: StateCommand,
    },
    /// Create a small project that runs as it is.
    Init(InitArgs),
    /// Simulate conversations: a simulated user talks with the model under test, which calls
    /// the tools of MCP servers; a judge scores each transcript on weighted criteria.
    ///
    /// Reads DIR/sim/ (suite.yaml, scenarios/, fixtures/; see docs/simulate.md) and writes a
    /// Markdown and a JSON report and the transcripts under DIR/sim/reports/.
    ///
    /// Objective checks decide: a run whose expected_state check fails is a failed run, whatever
    /// the judge scored (unless the check is `advisory: true`); a check that cannot be read makes
    /// the run an error.
    ///
    /// Exit codes: 0 every scored run passed (or the suite's `gate:` allowed the failures:
    /// only `min_pass_rate` allows failing runs) and the gate passed; 1 a scored run failed, or
    /// the gate failed, or --baseline found a significant regression; 2 bad input; 3 provider,
    /// MCP or judge errors kept scenario runs from a verdict. `assay simulate compare REPORT…`
    /// puts several reports side by side.
    Simulate(SimulateArgs),
    /// Optimize the agents' system prompts: baseline on the optimization cases,
    /// a multi-objective TPE study over prompts/ and prompt_variations/, the best prompts on
    /// the held-out evaluation cases, and a paired comparison.
    ///
    /// Writes experiments/NAME/ (baseline_prompts/, optimized_prompts/, logs/, journal,
    /// report.md/json, tracking/, optuna_journal.log; see docs/optimize.md). Exit codes: 0
    /// finished, 2 bad input, 3 an infrastructure error or the budget halted the run.
    Optimize(OptimizeArgs),
    /// Evaluate a prompt folder on the evaluation cases next to the production prompts
    /// (step 3 of `assay optimize` alone).
    Evaluate(EvaluateArgs),
    /// Serve the web UI (/ui/: knowledge base, runs, experiments, simulations) and the HTTP
    /// API: run banks, one case or a topic, and calibrate, over JSON; edit the knowledge base
    /// (/admin/kb/); read saved runs (/runs). `assay serve DIR` or `--project DIR`.
    ///
    /// The folder may hold any of test banks, a knowledge base, runs, experiments and
    /// simulation reports, or none yet: each page shows what is there or names the command
    /// that fills it. Running, testing a case or a topic and calibrating need test banks.
    ///
    /// Knowledge-base writes need `Authorization: Bearer $ASSAY_ADMIN_TOKEN`; without that
    /// variable the admin API is read-only. Everything else has no authentication: keep it on
    /// localhost (the default). One run or calibration at a time; a second gets 409.
    /// GET /openapi.json describes every route.
    Serve(ServeArgs),
    /// Versioned test data of the prompt optimizer: test_data/versions.json and
    /// test_data/<optimization|evaluation>/<version>/ (see docs/optimize.md).
    ///
    /// Versions are never overwritten; `assay optimize` uses the latest of each kind unless
    /// --optimization-version / --evaluation-version say otherwise.
    Data {
        /// The project directory.
        #[arg(long, global = true, default_value = ".", value_name = "DIR")]
        project: PathBuf,
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Promote an experiment's optimized prompts to production (prompts/), or roll back.
    ///
    /// Shows a unified diff of what would change in prompts/ and changes nothing without
    /// --yes. With --yes, the production prompts are backed up first (.assay/prompt-backups/),
    /// then replaced atomically, under the project lock.
    Prompts {
        /// The project directory.
        #[arg(long, global = true, default_value = ".", value_name = "DIR")]
        project: PathBuf,
        #[command(subcommand)]
        command: PromptsCommand,
    },
}

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
        Command::Redteam(a) => Some((a.dir.clone(), "assay redteam")),
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
        Command::Check(args) => check::run(&args),
        Command::Init(args) => init::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Simulate(args) => simulate::run(&args),
        Command::Optimize(args) => optimize::optimize(&args),
        Command::Evaluate(args) => optimize::evaluate(&args),
        Command::Retrieve(args) => retrieve::run(&args),
        Command::Redteam(args) => redteam::run(&args),
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
