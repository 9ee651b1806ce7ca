//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    /// Exit codes: 0 passed, 1 quality gate failed (CRITICAL health, or below [gate] in
    /// assay.toml), 2 bad input, 3 infrastructure errors.
    Run(RunArgs),
    /// Print each semantic case's resolved expectations and where they came from, or record a
    /// human override (`assay expectations override`).
    Expectations(ExpectationsArgs),
    /// Calibrate semantic expectations with a strong chat model and the whole knowledge base.
    ///
    /// Changed cases go into a new history file (test_banks/semantic/history/); human overrides
    /// stay in force. Raw replies go to calibration/opus_responses/ and the run is logged in
    /// calibration/calibration_log.json. Nothing existing is modified; --dry-run writes nothing.
    Calibrate(CalibrateArgs),
    /// Work with bank files.
    Banks {
        #[command(subcommand)]
        command: BanksCommand,
    },
    /// Load and validate a project without running anything.
    Validate(ProjectArg),
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
    /// Read and change stored user state (003 §5), which STATE conditions read.
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
    /// Markdown and a JSON report and the transcripts under DIR/sim/reports/. Exit codes: 0
    /// passed, 1 the suite's gate failed, 2 bad input, 3 provider or MCP errors kept scenario
    /// runs from a verdict. `assay simulate compare REPORT…` puts several reports side by side.
    Simulate(SimulateArgs),
    /// Serve the HTTP API (000 §7): run banks, one case or a topic, and calibrate, over JSON;
    /// edit the knowledge base (/admin/kb/, 003 §4); read saved runs (/runs).
    ///
    /// Knowledge-base writes need `Authorization: Bearer $ASSAY_ADMIN_TOKEN`; without that
    /// variable the admin API is read-only. Everything else has no authentication: keep it on
    /// localhost (the default). One run or calibration at a time; a second gets 409.
    /// GET /openapi.json describes every route.
    Serve(ServeArgs),
}

/// `assay serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The project directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project: PathBuf,

    /// The port to listen on (0: any free port).
    #[arg(long, default_value_t = 8000, value_name = "N")]
    pub port: u16,

    /// The address to bind. Anything but localhost exposes an API without authentication.
    #[arg(long, default_value = "127.0.0.1", value_name = "HOST")]
    pub host: String,
}

/// A project directory.
#[derive(Debug, Args)]
pub struct ProjectArg {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
}

/// `assay run`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Banks to run: `all`, or a comma-separated list of semantic, state, pattern, always.
    #[arg(long, default_value = "all", value_name = "BANKS")]
    pub banks: String,

    /// Run only the case with this test_id (in whichever bank holds it).
    #[arg(long, value_name = "ID")]
    pub test: Option<String>,

    /// Run only the semantic cases with this topic.
    #[arg(long, value_name = "TOPIC")]
    pub topic: Option<String>,

    /// Print the RunLog as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// Also write JUnit XML to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Do not save results/results_<stamp>.json and results/report_<stamp>.md.
    #[arg(long)]
    pub no_save: bool,

    /// List only failing cases in the summary (the default lists every imperfect case).
    #[arg(long)]
    pub failures_only: bool,

    /// Embedder for the semantic bank (`vendor/model`); overrides ASSAY_EMBEDDER and assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,

    /// Reranker for the semantic bank: `none`, `voyage/<model>`, `anthropic/<model>` or
    /// `openai/<model>`; overrides ASSAY_RERANKER and assay.toml.
    #[arg(long, value_name = "SPEC")]
    pub reranker: Option<String>,

    /// Provider call cache: `read-write`, `off` or `replay` (a miss is an error; no network);
    /// overrides ASSAY_CACHE and assay.toml.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,

    /// Semantic cases in flight at once; overrides assay.toml.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,

    /// Resume the interrupted run of the same options from its journal (.assay/journal.jsonl):
    /// finished cases are not run again.
    #[arg(long)]
    pub resume: bool,
}

/// `assay retrieve`
#[derive(Debug, Args)]
pub struct RetrieveArgs {
    /// The user's message.
    pub message: String,

    /// The project directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project: PathBuf,

    /// The user's state as a JSON object, e.g. '{"days_since_last": 9}'.
    #[arg(long, value_name = "JSON", conflicts_with = "user")]
    pub state: Option<String>,

    /// Read the user's state from the store (see `assay state`).
    #[arg(long, value_name = "USER_ID")]
    pub user: Option<String>,

    /// The audience (default: the state's user_type, else PARENT).
    #[arg(long, value_name = "AUDIENCE")]
    pub audience: Option<String>,

    /// Show each stage's candidates and why entities were dropped.
    #[arg(long)]
    pub explain: bool,

    /// Print JSON.
    #[arg(long)]
    pub json: bool,

    /// Embedder (`vendor/model`); overrides ASSAY_EMBEDDER and assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,
}

/// `assay embed`
#[derive(Debug, Args)]
pub struct EmbedArgs {
    /// The texts.
    #[arg(required = true)]
    pub texts: Vec<String>,

    /// Embedder (`vendor/model`); overrides ASSAY_EMBEDDER and the project's assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,

    /// The project whose assay.toml names the embedder.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project: PathBuf,

    /// Embed as documents instead of queries (matters for Voyage).
    #[arg(long)]
    pub document: bool,

    /// Print JSON: {"model", "dimension", "embeddings": [[...]]}.
    #[arg(long)]
    pub json: bool,
}

/// `assay kb …`
#[derive(Debug, Subcommand)]
pub enum KbCommand {
    /// Import the kb/ files into the store (unchanged entities get no new version).
    Import,
    /// List current entities.
    List(KbListArgs),
    /// Show one entity with its version and embedding status.
    Show {
        /// The entity.
        entity_id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Create an entity from a YAML or JSON file holding one entity (003 §4 fields).
    Create {
        /// The file.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// Who makes the change.
        #[arg(long, default_value = "cli")]
        by: String,
    },
    /// Update an entity: a new version; the old one is kept.
    Update {
        /// The entity.
        entity_id: String,
        /// A YAML or JSON file with the fields to change (003 §4 `KBEntityUpdate`).
        #[arg(long, value_name = "FILE", required_unless_present = "set")]
        file: Option<PathBuf>,
        /// A field to change, as FIELD=VALUE (VALUE is read as JSON when it parses, else text).
        #[arg(long = "set", value_name = "FIELD=VALUE")]
        set: Vec<String>,
        /// Who makes the change.
        #[arg(long, default_value = "cli")]
        by: String,
    },
    /// Deactivate an entity (a soft delete: a new, inactive version).
    Deactivate {
        /// The entity.
        entity_id: String,
        /// Who makes the change.
        #[arg(long, default_value = "cli")]
        by: String,
    },
    /// Every version of an entity, with what changed.
    History {
        /// The entity.
        entity_id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Embed entities whose embedding is missing or stale (all with --all, or one).
    Embed {
        /// Only this entity.
        entity_id: Option<String>,
        /// Re-embed every active entity.
        #[arg(long, conflicts_with = "entity_id")]
        all: bool,
        /// Embedder (`vendor/model`).
        #[arg(long, value_name = "VENDOR/MODEL")]
        embedder: Option<String>,
    },
    /// Choose the similarity threshold, the number of candidates and the hybrid lexical weight
    /// for an embedder on the semantic bank, with k-fold cross-validation.
    Tune {
        /// The project directory (instead of --project).
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Embedder (`vendor/model`).
        #[arg(long, value_name = "VENDOR/MODEL")]
        embedder: Option<String>,
        /// Number of folds.
        #[arg(long, default_value_t = 5)]
        folds: usize,
        /// Write the chosen values into assay.toml under the embedder's name.
        #[arg(long)]
        write: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Counts by type and load mode, embedding coverage, retrieval counts.
    Stats {
        /// Embedder whose coverage to report (`vendor/model`).
        #[arg(long, value_name = "VENDOR/MODEL")]
        embedder: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write the current entities as a YAML or JSON list.
    Export {
        /// json or yaml.
        #[arg(long, default_value = "yaml")]
        format: String,
        /// Write here instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

/// `assay kb list`
#[derive(Debug, Args)]
pub struct KbListArgs {
    /// Only this entity type (PERSONA, GUARDRAIL, HANDLER, KNOWLEDGE, SCRIPT, RULE).
    #[arg(long = "type", value_name = "TYPE")]
    pub entity_type: Option<String>,
    /// Only this load mode (ALWAYS, STATE, SITUATION).
    #[arg(long, value_name = "MODE")]
    pub load_mode: Option<String>,
    /// Only entities for this audience.
    #[arg(long, value_name = "AUDIENCE")]
    pub audience: Option<String>,
    /// Include inactive entities.
    #[arg(long, conflicts_with = "inactive")]
    pub all: bool,
    /// Only inactive entities.
    #[arg(long)]
    pub inactive: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `assay state …`
#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Show a user's state (the default for a new user).
    Show {
        /// The user.
        #[arg(long, value_name = "USER_ID")]
        user: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set fields of a user's state.
    Set {
        /// The user.
        #[arg(long, value_name = "USER_ID")]
        user: String,
        /// FIELD=VALUE pairs (VALUE is read as JSON when it parses, else text).
        #[arg(required = true, value_name = "FIELD=VALUE")]
        fields: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Record an interaction: rating, topics, skills, last seen now.
    Record {
        /// The user.
        #[arg(long, value_name = "USER_ID")]
        user: String,
        /// The user's rating, 1 to 5.
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=5))]
        rating: Option<u8>,
        /// A topic discussed (repeatable).
        #[arg(long = "topic", value_name = "TOPIC")]
        topics: Vec<String>,
        /// A skill practised (repeatable).
        #[arg(long = "skill", value_name = "SKILL")]
        skills: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `assay expectations`
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ExpectationsArgs {
    #[command(subcommand)]
    pub command: Option<ExpectationsCommand>,

    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Print JSON: a summary of sources and every case's expectations with `_source`.
    #[arg(long)]
    pub json: bool,
}

/// `assay expectations …`
#[derive(Debug, Subcommand)]
pub enum ExpectationsCommand {
    /// Record a human override of a semantic case's expectations, dated today.
    ///
    /// Writes a new history file; nothing existing changes. The override wins over every
    /// calibration until a newer override replaces it.
    Override(OverrideArgs),
}

/// `assay expectations override`
#[derive(Debug, Args)]
pub struct OverrideArgs {
    /// The semantic case.
    pub test_id: String,

    /// The project directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project: PathBuf,

    /// Expected primary entities (comma-separated or repeated).
    #[arg(long, required = true, value_delimiter = ',', value_name = "IDS")]
    pub primary: Vec<String>,

    /// Expected secondary entities.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub secondary: Vec<String>,

    /// Entities that must not be retrieved.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub not_expected: Vec<String>,

    /// A rank check, HIGHER>LOWER (repeatable).
    #[arg(long, value_delimiter = ',', value_name = "HIGHER>LOWER")]
    pub rank_check: Vec<String>,

    /// Why the override is right (required).
    #[arg(long, required = true)]
    pub reason: String,

    /// Who decided.
    #[arg(long, value_name = "NAME")]
    pub reviewer: Option<String>,

    /// Print what was recorded as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `assay calibrate`
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Which cases: `full` (all), `affected` (those mentioning --added-entities in their
    /// expectations or top candidates) or `single` (--test-ids).
    #[arg(long, default_value = "full", value_parser = ["full", "affected", "single"])]
    pub scope: String,

    /// The cases for --scope single (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub test_ids: Vec<String>,

    /// Entities added to the knowledge base (comma-separated); required by --scope affected.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub added_entities: Vec<String>,

    /// The knowledge-base version to record.
    #[arg(long, value_name = "VERSION")]
    pub kb_version: Option<String>,

    /// Why the calibration runs (default by scope: full_recalibration, kb_entity_added,
    /// single_case).
    #[arg(long, value_name = "TRIGGER")]
    pub trigger: Option<String>,

    /// Ask the model and report, but write nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,

    /// The calibrating chat model (`vendor/model`); overrides assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub model: Option<String>,

    /// Chat calls in flight at once.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,

    /// Embedder for the top candidates of `--scope affected`; overrides ASSAY_EMBEDDER and
    /// assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,

    /// Provider call cache: `read-write`, `off` or `replay`; overrides ASSAY_CACHE and assay.toml.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,
}

/// `assay banks …`
#[derive(Debug, Subcommand)]
pub enum BanksCommand {
    /// Add `bank_type` and `version` to pre-V2 bank files in place (originals kept as .bak).
    Migrate(ProjectArg),
}

/// `assay init`
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to create the project (created if missing; existing files are never overwritten).
    pub dir: PathBuf,
}

/// `assay simulate`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub command: Option<SimulateCommand>,

    /// The project directory (with sim/suite.yaml).
    #[arg(required = true)]
    pub dir: Option<PathBuf>,

    /// The model under test, `vendor/model` (default: [simulate] model in assay.toml).
    #[arg(long)]
    pub model: Option<String>,

    /// Scenarios to run: `all` or ids separated by commas.
    #[arg(long, default_value = "all")]
    pub scenarios: String,

    /// The simulated user's model (default: [simulate] simulator_model, else
    /// anthropic/claude-sonnet-4-6).
    #[arg(long)]
    pub simulator_model: Option<String>,

    /// The judge's model (default: [simulate] evaluator_model, else anthropic/claude-sonnet-4-6).
    #[arg(long)]
    pub evaluator_model: Option<String>,

    /// Runs per scenario; the report shows mean, spread and pass^k.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,

    /// Scenario runs in flight at once (default: [simulate] concurrency, else 4).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: Option<u32>,

    /// Where the Markdown report goes (the JSON beside it); default
    /// DIR/sim/reports/report_<stamp>.md, also copied to latest.md.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Call cache mode: read-write, off or replay (overrides ASSAY_CACHE and assay.toml).
    #[arg(long)]
    pub cache: Option<String>,

    /// Print the JSON report on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// Keep each scenario run's scratch folder (under DIR/.assay/sim/).
    #[arg(long)]
    pub keep_workdirs: bool,
}

/// `assay simulate` subcommands.
#[derive(Debug, Subcommand)]
pub enum SimulateCommand {
    /// Put several simulation reports side by side: models as columns, scenarios as rows.
    ///
    /// Takes the JSON reports (or the Markdown reports with their JSON beside them). Prints
    /// Markdown; --html writes a colour-coded HTML page too.
    Compare(CompareArgs),
}

/// `assay simulate compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Simulation reports (.json, or .md with the .json beside it).
    #[arg(required = true, num_args = 1..)]
    pub reports: Vec<PathBuf>,

    /// Also write the comparison as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Write the Markdown here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}
