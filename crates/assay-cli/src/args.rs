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
    /// With --baseline, the run is compared case by case with a saved run: the console leads
    /// with what differs between the two runs' setups and the regressions, the reports gain a
    /// "Compared with" section, and [gate]'s regression rules apply (no_new_hard_fails and
    /// no_new_critical, on by default; max_score_drop).
    ///
    /// Exit codes: 0 passed, 1 quality gate failed (CRITICAL health, below [gate] in assay.toml,
    /// or a regression rule broken; the cases are named), 2 bad input, 3 infrastructure errors.
    Run(RunArgs),
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

/// The two sets of optimizer test data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DataKind {
    /// The cases the search optimises on.
    Optimization,
    /// The held-out cases of the final evaluation.
    Evaluation,
}

/// `assay data …`
#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Create a test-data version from a folder holding test_cases.jsonl and the context files
    /// it names (relative to the folder). Every case and file is validated first; only
    /// test_cases.jsonl and the named files are copied; an existing version is never
    /// overwritten. The first version of a kind becomes its latest.
    #[command(disable_version_flag = true)]
    CreateVersion(CreateVersionArgs),
    /// Set the version `assay optimize` uses when none is named.
    SetLatest(SetLatestArgs),
    /// List the versions of both kinds, the latest marked with `*`.
    ListVersions {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `assay data create-version`
#[derive(Debug, Args)]
pub struct CreateVersionArgs {
    /// Which set.
    #[arg(long = "type", value_enum, value_name = "TYPE")]
    pub kind: DataKind,
    /// The new version's name (letters, digits, `.`, `_`, `-`; e.g. v1.1.0).
    #[arg(long, value_name = "V")]
    pub version: String,
    /// What is in it or what changed.
    #[arg(long, value_name = "TEXT")]
    pub description: String,
    /// The folder with test_cases.jsonl and its context files.
    #[arg(long, value_name = "DIR")]
    pub source_dir: PathBuf,
}

/// `assay data set-latest`
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(true)))]
pub struct SetLatestArgs {
    /// The optimization version to use by default.
    #[arg(long, value_name = "V", group = "which")]
    pub optimization_version: Option<String>,
    /// The evaluation version to use by default.
    #[arg(long, value_name = "V", group = "which")]
    pub evaluation_version: Option<String>,
}

/// `assay prompts …`
#[derive(Debug, Subcommand)]
pub enum PromptsCommand {
    /// Load and validate the prompt lists the optimizer searches: each agent's production
    /// prompt (index 0) and its variants from prompt_variations/<agent>/ (1..N).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Install an experiment's optimized_prompts/ into prompts/ (after human review).
    ///
    /// Prints the evidence the experiment recorded and a unified diff; writes only with --yes.
    Promote {
        /// The experiment (a folder under experiments/).
        #[arg(value_name = "EXPERIMENT")]
        experiment: String,
        /// Apply the change (without it, only show it).
        #[arg(long)]
        yes: bool,
    },
    /// Restore production prompts from an experiment's baseline_prompts/.
    ///
    /// `EXPERIMENT`: the prompts that were in production when that experiment started.
    /// `baseline`: the baseline_prompts/ of the experiment promoted most recently (from
    /// .assay/prompt-history.jsonl), i.e. undo the last promotion. To go back to an earlier
    /// experiment's optimized prompts, promote that experiment again.
    Rollback {
        /// An experiment, or `baseline`.
        #[arg(value_name = "EXPERIMENT|baseline")]
        target: String,
        /// Apply the change (without it, only show it).
        #[arg(long)]
        yes: bool,
    },
}

/// `assay serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The project directory (as `--project`).
    #[arg(value_name = "DIR", conflicts_with = "project")]
    pub dir: Option<PathBuf>,

    /// The project directory.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub project: PathBuf,

    /// The port to listen on (0: any free port).
    #[arg(long, default_value_t = 8000, value_name = "N")]
    pub port: u16,

    /// The address to bind. Anything but localhost exposes an API without authentication.
    #[arg(long, default_value = "127.0.0.1", value_name = "HOST")]
    pub host: String,

    /// Seconds a connection may take to send a request's headers (from its start or its
    /// previous answer) before it is closed.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub header_timeout: f64,

    /// Seconds a request body may send nothing before the request fails (408).
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub body_timeout: f64,

    /// Connections served at once; more wait in the operating system's queue.
    #[arg(long, default_value_t = 512, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_connections: u32,
}

impl ServeArgs {
    /// The project: the positional `DIR`, else `--project`.
    pub fn project(&self) -> &std::path::Path {
        self.dir.as_deref().unwrap_or(&self.project)
    }
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

    /// List every hard fail and critical failure in the summary (the default lists the worst
    /// few, with counts per reason).
    #[arg(long, conflicts_with = "all")]
    pub failures_only: bool,

    /// List every case below 100 in the summary, and every error.
    #[arg(long)]
    pub all: bool,

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

    /// Compare with a saved run: `accepted` (the run your team accepted with `assay runs
    /// accept`; until one is, the run is compared with nothing and says so), `latest` (the
    /// newest saved run before this one, whatever it was like: after a bad run, the next is
    /// compared with the bad one), a saved run's id (its stamp, like 2026-11-25-0915, or its
    /// run_id) or a results JSON file. In CI, use `accepted`.
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,

    /// Run each semantic case K times, when a stage is stochastic (an LLM reranker): each
    /// repeat is its own call (the repeat is part of the cache key); a case scores the mean of
    /// its repeats, the semantic average gets a 95 % interval, and cases whose repeats disagree
    /// are listed as unstable.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,

    /// Run one shard of the suite: `hash:i/n` keeps the cases whose bank and test id hash to
    /// shard i of n (from 1), so n machines run a suite between them and adding a case moves
    /// no other. Each shard saves its own run; `assay runs merge` makes them one run, where
    /// the baseline gate belongs (so --baseline is refused here).
    #[arg(long, value_name = "hash:i/n", value_parser = parse_shard, conflicts_with_all = ["test", "baseline"])]
    pub shard: Option<assay_core::shard::Shard>,

    /// Also run the pending drafts under test_banks/drafts/ (`assay generate`).
    #[arg(long)]
    pub include_drafts: bool,

    /// Run only the cases that name an entity whose content changed since a saved run (its
    /// id, results file, `latest` or `accepted`), plus the always-bank cases of those
    /// entities' audiences; the console says how many cases it skipped.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["test", "shard"])]
    pub changed_since: Option<String>,
}

/// `--shard`'s value.
pub fn parse_shard(spec: &str) -> Result<assay_core::shard::Shard, String> {
    assay_core::shard::Shard::parse(spec)
}

/// `assay judge …`
#[derive(Debug, Subcommand)]
pub enum JudgeCommand {
    /// Judge the labelled items again and measure the agreement with the labels.
    ///
    /// Items left unscored (no score, no verdict) are skipped and counted. Paths in the labels
    /// file (`report`, `transcript`) are looked up beside the labels file first, then in the
    /// project folder.
    ///
    /// Exit codes: 0 measured; 1 a criterion's kappa is below --min-kappa; 2 bad labels
    /// (unknown criteria, scores off the scale, runs the report does not have, no item
    /// scored); 3 the judge failed on some items (reported apart, left out of the measures).
    Agree {
        /// The labels file (YAML or JSON; `judge: simulation`, `judge: rubric` or `judge:
        /// claims`).
        labels: PathBuf,
        /// The judge's `vendor/model` (default: [simulate] evaluator_model for simulation
        /// labels, [optimize] grader_model for rubric labels, [answer] judge_model for claim
        /// labels).
        #[arg(long, value_name = "VENDOR/MODEL")]
        model: Option<String>,
        /// Judge each item K times (another criteria order and seed each time): items whose
        /// verdict flips are listed as uncertain (apart from too lenient and too strict), and
        /// each criterion's spread across the samples is reported.
        #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
        judge_samples: u32,
        /// Fail (exit 1) when a criterion's kappa is below this (or undefined).
        #[arg(long, value_name = "KAPPA")]
        min_kappa: Option<f64>,
        /// Call cache mode: read-write, off or replay.
        #[arg(long)]
        cache: Option<String>,
        /// Print the agreement as JSON (every item).
        #[arg(long)]
        json: bool,
    },
    /// Write a labels file to fill in for a saved simulation report: every run, every
    /// criterion left empty (label blind: the judge's scores are not shown).
    ///
    /// The file names the report so that `assay judge agree` finds it: with --output, by a
    /// path relative to the output file's folder; on stdout (redirected anywhere), by a path
    /// relative to the project folder, where `agree` looks when nothing is beside the labels
    /// file. `latest.json` is named by the stamped report it copies, which later simulations
    /// leave alone.
    Template {
        /// The simulation report (JSON, or the Markdown with its JSON beside it), inside the
        /// project.
        report: PathBuf,
        /// Write here instead of stdout (never over an existing file; missing folders are
        /// made).
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

/// `assay runs …`
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// The saved runs, newest first; a shard, a partial run (--test, --topic, --changed-since,
    /// a --banks subset), a run with drafts and a merged run are marked so.
    List {
        /// The project directory (as `assay run DIR` takes it; the same as --project).
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compare two runs case by case: what differs in their setups, regressions, topics,
    /// improvements, and the paired comparison of their per-case scores. Each run is a saved
    /// run's id, `latest`, `accepted`, or a results JSON file.
    Diff {
        /// The first run (the baseline).
        before: String,
        /// The second run.
        after: String,
        /// Print the comparison as JSON (every case, unchanged ones included).
        #[arg(long)]
        json: bool,
    },
    /// Accept a saved run as the project's baseline: `assay run --baseline accepted` compares
    /// with it until another is accepted. The run is copied into baseline/ (commit that
    /// folder so CI compares with it) with who accepted it and when; baseline/history.jsonl
    /// keeps every acceptance.
    ///
    /// Only a run of the whole suite can be the baseline: a shard, a partial run (--test,
    /// --topic, --changed-since, a --banks subset) and a run with pending drafts
    /// (--include-drafts) are refused (exit 2, the reason named). A CRITICAL run or one with
    /// errored cases is accepted with a warning, which the acceptance records.
    Accept {
        /// A saved run's id (like 2026-11-25-0915), or `latest`.
        #[arg(value_name = "RUN_ID|latest")]
        run: String,
        /// Who accepts it (default: ASSAY_USER, else the login name).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        /// Why (kept with the acceptance).
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
        /// Print the acceptance as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Merge the runs of a suite's shards (`assay run --shard hash:i/n`, one results file per
    /// shard) into one run of the whole suite, saved like any run: totals, statistics, the
    /// baseline gate and every report computed over all the cases, as one run would give
    /// them. Shards of different settings, knowledge bases, suites or shard counts, a shard
    /// given twice and a missing shard are refused, naming the difference. Simulation reports
    /// of `assay simulate --shard` merge the same way.
    Merge(MergeArgs),
}

/// `assay runs merge`
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' results files (`results/results_<stamp>.json` of each shard's run, with
    /// its `cases_<stamp>.jsonl` beside it when it has one), in any order.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,

    /// Compare the merged run with a saved run and apply the regression rules, as `assay run
    /// --baseline` does: `accepted`, `latest`, a saved run's id or a results JSON file.
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,

    /// Also write JUnit XML of the merged run to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Print the merged RunLog as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// Do not save the merged run in the results folder.
    #[arg(long)]
    pub no_save: bool,
}

/// `assay traces …`
#[derive(Debug, Subcommand)]
pub enum TracesCommand {
    /// Check retrieval spans from OTLP JSON exports or JSON Lines of spans (a folder is read
    /// recursively for *.json and *.jsonl; `assay serve` writes what it receives to
    /// .assay/traces/).
    ///
    /// A malformed span, line or attribute is reported with its position (file, line, JSON
    /// path, attribute) and skipped; the rest is still checked.
    ///
    /// Exit codes: 0 every span agrees with assay's selection; 1 at least one disagrees; 2 bad
    /// input (a path that cannot be read, a file from which no span can be read, no retrieval
    /// span at all, bad flags, a drafts file that exists); 3 infrastructure errors (the
    /// embedder, the store).
    Check(TracesCheckArgs),
}

/// `assay traces check`
#[derive(Debug, Args)]
pub struct TracesCheckArgs {
    /// Trace files or folders.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub paths: Vec<PathBuf>,

    /// Print every span's result as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// List every disagreeing span, entity and skipped span in the summary, not the first few.
    #[arg(long)]
    pub all: bool,

    /// The pipeline stages whose entities count as missing when production lacks them,
    /// comma-separated: always, state, crisis, keyword, semantic (default: all). Use
    /// `semantic,crisis,keyword` when production's retrieval spans hold only what its search
    /// returned.
    #[arg(long, value_name = "LIST")]
    pub stages: Option<String>,

    /// Write a draft semantic case for each disagreeing span (or each span --span names) to
    /// this new file (never overwritten; not inside test_banks/). See `assay schema
    /// trace-drafts`.
    #[arg(long, value_name = "FILE")]
    pub drafts: Option<PathBuf>,

    /// Write the draft cases into the project's drafts (test_banks/drafts/semantic/, a new
    /// file), where `assay generate review` lists, accepts, edits or rejects them; a span
    /// already drafted there or in a bank is skipped.
    #[arg(long, conflicts_with = "drafts")]
    pub to_review: bool,

    /// With --drafts or --to-review: the spans to draft, by span id or trace id (repeatable),
    /// whether they disagree or not.
    #[arg(long = "span", value_name = "ID")]
    pub spans: Vec<String>,

    /// Embedder (`vendor/model`); overrides ASSAY_EMBEDDER and assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,

    /// Call-cache mode for a remote embedder: read-write, off or replay.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,
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
    /// Create an entity from a YAML or JSON file holding one entity (the fields of a
    /// knowledge-base entity: see docs/reference/kb.md).
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
        /// A YAML or JSON file with the fields to change: title, concept_summary, recognition,
        /// keywords, guidance_do, guidance_dont, examples, red_flags, load_mode, priority,
        /// state_conditions, audience_types, is_active (`null` clears an optional one).
        #[arg(long, value_name = "FILE", required_unless_present = "set")]
        file: Option<PathBuf>,
        /// A field to change, as FIELD=VALUE (VALUE is read as JSON when it parses, else text).
        #[arg(long = "set", value_name = "FIELD=VALUE")]
        set: Vec<String>,
        /// Who makes the change.
        #[arg(long, default_value = "cli")]
        by: String,
        /// Refuse the change (exit 2, nothing written) unless VERSION is still the entity's
        /// current version: the edit was made against it and must not overwrite a newer one.
        #[arg(long, value_name = "VERSION")]
        expect_version: Option<u32>,
    },
    /// Deactivate an entity (a soft delete: a new, inactive version).
    Deactivate {
        /// The entity.
        entity_id: String,
        /// Who makes the change.
        #[arg(long, default_value = "cli")]
        by: String,
        /// Refuse unless VERSION is still the entity's current version.
        #[arg(long, value_name = "VERSION")]
        expect_version: Option<u32>,
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
        /// json or yaml (default: the --output file's extension, else yaml).
        #[arg(long)]
        format: Option<String>,
        /// Write here instead of stdout; its extension (.yaml, .yml or .json) decides the
        /// format, and a --format that says otherwise is refused.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Dual-read check: retrieve the same messages from two stores and report where the
    /// selected entities or their order differ (exit 1 when they differ).
    Compare(KbCompareArgs),
    /// Measure the store's vector index (PostgreSQL's HNSW): the recall@k of its nearest
    /// entities against the exact search, per message and on average, and the time of each;
    /// exit 1 when the mean recall is below --min-recall.
    CheckIndex(KbCheckIndexArgs),
}

/// `assay kb check-index`
#[derive(Debug, Args)]
pub struct KbCheckIndexArgs {
    /// Messages to search for: one per line, or JSON lines (`.jsonl`: `{"message": …,
    /// "audience"?, "user_state"?, "id"?}`). Default: the semantic bank's prompts.
    #[arg(long, value_name = "FILE")]
    pub messages: Option<PathBuf>,
    /// Nearest entities compared per message (default: [semantic] candidates, the semantic
    /// bank's first stage).
    #[arg(long, value_name = "K")]
    pub k: Option<usize>,
    /// hnsw.ef_search for the index searches (default: [semantic] ef_search).
    #[arg(long, value_name = "N")]
    pub ef_search: Option<u32>,
    /// The mean recall@k below which the check fails (exit 1).
    #[arg(long, default_value_t = assay_kbtools::check_index::DEFAULT_MIN_RECALL, value_name = "R")]
    pub min_recall: f64,
    /// The recall@k below which one message fails the check (exit 1), whatever the mean: the
    /// default 0.5 fails a message for which the index found less than half of the exact
    /// answer; 0 turns the floor off.
    #[arg(long, default_value_t = assay_kbtools::check_index::DEFAULT_MIN_QUERY_RECALL, value_name = "R")]
    pub min_query_recall: f64,
    /// Embedder (`vendor/model`; default: the project's).
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,
    /// Provider call cache for the embeddings: `read-write`, `off` or `replay` (a miss is an
    /// error; no network); overrides ASSAY_CACHE and assay.toml.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,
    /// How many of the lowest-recall messages the summary shows.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub worst: usize,
    /// Print the whole check, every message included, as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `assay kb compare`
#[derive(Debug, Args)]
pub struct KbCompareArgs {
    /// A store, twice (A then B): `postgres://user@host:port/db` (password from PGPASSWORD or
    /// a pgpass file), or an SQLite file (`sqlite:PATH` or a path, relative to the project).
    #[arg(long = "store", value_name = "STORE", required = true, num_args = 1)]
    pub stores: Vec<String>,
    /// Messages to retrieve: one per line, or JSON lines (`.jsonl`: `{"message": …,
    /// "audience"?, "user_state"?, "id"?}`). Default: the semantic bank's prompts.
    #[arg(long, value_name = "FILE")]
    pub messages: Option<PathBuf>,
    /// Embedder (`vendor/model`; default: the project's).
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,
    /// How many differing messages the summary shows.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub worst: usize,
    /// Print every message's comparison as JSON.
    #[arg(long)]
    pub json: bool,
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

/// `assay generate`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GenerateArgs {
    #[command(subcommand)]
    pub command: Option<GenerateCommand>,

    /// The project directory.
    #[arg(required = true)]
    pub dir: Option<PathBuf>,

    /// The banks to draft cases for, comma-separated: semantic, state, pattern.
    #[arg(long, default_value = "semantic,state,pattern", value_name = "BANKS")]
    pub banks: String,

    /// Only these entities (ids, comma-separated): SITUATION entities for semantic drafts,
    /// STATE handlers for state drafts, the entities pattern rules bring in for pattern drafts.
    #[arg(long, value_name = "IDS", conflicts_with = "changed_since")]
    pub entities: Option<String>,

    /// Only the entities whose content changed since a saved run (its id, results file,
    /// `latest` or `accepted`).
    #[arg(long, value_name = "RUN")]
    pub changed_since: Option<String>,

    /// Drafts per SITUATION entity (semantic) and per pattern rule (each way) (default:
    /// [generate] per_entity, else 5).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub per_entity: Option<u32>,

    /// The model that writes messages, `vendor/model` (default: [generate] model in
    /// assay.toml, else [calibration] model).
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub model: Option<String>,

    /// Refuse to start when the estimated cost is above this many US dollars, and stop before a
    /// call that would pass it.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,

    /// The language the messages are written in (default: [generate] language, else English).
    #[arg(long, value_name = "LANG")]
    pub language: Option<String>,

    /// Finish an interrupted generation: calls already answered are read from its journal,
    /// not paid for again.
    #[arg(long)]
    pub resume: bool,

    /// Print the estimate and what would be generated, and call nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Print the generation's summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    /// Model calls in flight at once (default: [generate] concurrency, else 4).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
}

/// `assay generate …`
#[derive(Debug, Subcommand)]
pub enum GenerateCommand {
    /// List drafts and findings by entity, and accept, edit or reject them.
    ///
    /// Without an action, lists what is pending (findings first, each checked against the
    /// knowledge base and rules as they are now: still holds, or fixed since). --accept copies
    /// drafts into test_banks/<bank>/generated.json as ordinary cases that keep their
    /// provenance; --reject marks them rejected with --reason; --edit changes a pending draft's
    /// fields; --confirm marks accepted cases that a knowledge-base edit made stale as checked
    /// (each must pass in the latest saved run); --retire takes accepted cases out of their
    /// bank with --reason.
    Review(Box<GenerateReviewArgs>),
    /// Entities, STATE handlers and pattern rules that no case tests, and cases per entity.
    Coverage(GenerateCoverageArgs),
}

/// `assay generate review`
#[derive(Debug, Args)]
pub struct GenerateReviewArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Accept these drafts (test ids, comma-separated, or `all-pending`).
    #[arg(long, value_name = "IDS", conflicts_with_all = ["reject", "edit"])]
    pub accept: Option<String>,

    /// Reject these drafts (test ids, comma-separated); needs --reason.
    #[arg(long, value_name = "IDS", requires = "reason", conflicts_with = "edit")]
    pub reject: Option<String>,

    /// Why the drafts are rejected, or the cases retired.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// Confirm that accepted cases still hold after their entities changed (test ids of
    /// cases in a bank's generated.json, comma-separated, or `all-stale`): their provenance
    /// moves to the entities' current versions, so they are no longer reported stale. Each
    /// case must have passed in the latest saved run, made on the knowledge base as it is now.
    #[arg(long, value_name = "IDS", conflicts_with_all = ["accept", "reject", "edit"])]
    pub confirm: Option<String>,

    /// Retire accepted generated cases (test ids of cases in a bank's generated.json,
    /// comma-separated): each is taken out of its bank, and who retired it, when, why and the
    /// case are kept in retired.jsonl beside it. Needs --reason.
    #[arg(
        long,
        value_name = "IDS",
        requires = "reason",
        conflicts_with_all = ["accept", "reject", "edit", "confirm"]
    )]
    pub retire: Option<String>,

    /// Edit one pending draft (its test id); the changes are given with --set.
    #[arg(long, value_name = "ID", requires = "set")]
    pub edit: Option<String>,

    /// A field to change, `field=value` (a JSON value, or text): for example
    /// `prompt=...` or `expected_primary=["a","b"]`. Repeatable.
    #[arg(long, value_name = "FIELD=VALUE")]
    pub set: Vec<String>,

    /// Only drafts made for this entity.
    #[arg(long, value_name = "ID")]
    pub entity: Option<String>,

    /// Who is reviewing (default: ASSAY_USER, else the login name).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,

    /// List every draft, not the first few of each entity.
    #[arg(long)]
    pub all: bool,

    /// Print the drafts as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `assay generate coverage`
#[derive(Debug, Args)]
pub struct GenerateCoverageArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Count pending drafts as cases too.
    #[arg(long)]
    pub include_drafts: bool,

    /// List every uncovered entity, not the first few.
    #[arg(long)]
    pub all: bool,

    /// Print the coverage as JSON on stdout.
    #[arg(long)]
    pub json: bool,
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

    /// Model calls in flight at once, across the simulated user, the model under test and the
    /// judge (default: [simulate] concurrency, else 4). This is the limit your provider sees.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: Option<u32>,

    /// Conversations open at once, each with its own MCP servers (default: [simulate]
    /// runs_in_flight, else twice --concurrency).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub runs_in_flight: Option<u32>,

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

    /// Judge each transcript K times (the criteria in another order, another seed, each
    /// time): the report gives each criterion's spread and the share of runs whose verdict
    /// flips, and a run the samples pass and fail is `uncertain` (apart from pass and fail).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub judge_samples: u32,

    /// Compare with a saved report (JSON, or the Markdown with its JSON beside it) and fail
    /// (exit 1) on a significant regression: the per-scenario mean overall falls (paired
    /// bootstrap over scenarios, 95 %), or a scenario with two or more scored runs on each side
    /// falls (bootstrap over its runs).
    #[arg(long, value_name = "REPORT")]
    pub baseline: Option<PathBuf>,

    /// With --baseline: compare even when the baseline was judged by another judge (model or
    /// version); by default that is refused, since a change of judge would pass for a change of
    /// model.
    #[arg(long, requires = "baseline")]
    pub allow_judge_change: bool,

    /// Keep this simulation's scratch folder (under DIR/.assay/sim/, marked KEPT): assay never
    /// removes a kept folder; other runs' folders are removed when they end, or, when killed,
    /// by the next simulation.
    #[arg(long)]
    pub keep_workdirs: bool,

    /// Run one shard of the selected scenarios: `hash:i/n` keeps the scenarios whose id hashes
    /// to shard i of n (from 1), every repeat of each, so n machines run a suite between them
    /// and adding a scenario moves no other. Each shard saves its own report, without a gate
    /// or a baseline verdict (it exits 0 unless errors kept runs from a verdict);
    /// `assay runs merge` makes the reports one, as an unsharded run would, and decides both.
    #[arg(long, value_name = "hash:i/n", value_parser = assay_core::shard::Shard::parse)]
    pub shard: Option<assay_core::shard::Shard>,
}

/// `assay simulate` subcommands.
#[derive(Debug, Subcommand)]
pub enum SimulateCommand {
    /// Put several simulation reports side by side: models as columns, scenarios as rows.
    ///
    /// Takes the JSON reports (or the Markdown reports with their JSON beside them). Each cell
    /// is a scenario's mean overall score with its 95 % bootstrap interval over the repeats;
    /// each pair of reports gets a verdict (better, worse, not distinguishable), scenario by
    /// scenario and over all scenarios. Warns when the reports were judged differently.
    /// Prints Markdown; --html writes a colour-coded HTML page too; --json the comparison.
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

    /// Print the comparison as JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
}

/// `assay optimize`
#[derive(Debug, Args)]
pub struct OptimizeArgs {
    /// The project directory (prompts/, prompt_variations/, test_data/).
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// The experiment's name: its folder under experiments/.
    #[arg(long, value_name = "NAME")]
    pub experiment_name: String,

    /// Trials of the study (the baseline is trial 0); at least 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000), allow_negative_numbers = true)]
    pub optimization_trials: u64,

    /// A test-case file instead of test_data/optimization/VERSION (files relative to it).
    #[arg(long, value_name = "FILE")]
    pub optimization_test_cases: Option<PathBuf>,

    /// A test-case file instead of test_data/evaluation/VERSION.
    #[arg(long, value_name = "FILE")]
    pub evaluation_test_cases: Option<PathBuf>,

    /// The optimization test-data version (default: latest_optimization in versions.json).
    #[arg(long, value_name = "V")]
    pub optimization_version: Option<String>,

    /// The evaluation test-data version (default: latest_evaluation in versions.json).
    #[arg(long, value_name = "V")]
    pub evaluation_version: Option<String>,

    /// Log the three runs to this MLflow tracking server (else experiments/NAME/tracking/).
    #[arg(long, value_name = "URI")]
    pub mlflow_uri: Option<String>,

    /// The sampler's seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Continue an interrupted experiment from its journal.
    #[arg(long)]
    pub resume: bool,

    /// A hard cap on the spend in USD, checked before each case is dispatched.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,

    /// Score new combinations on a subset first; drop those clearly worse than the best.
    #[arg(long)]
    pub racing: bool,

    /// After the search, R rounds in which a proposer model reads the failed optimization
    /// cases' traces and writes revised prompts that join the study (default [optimize.propose]
    /// rounds, 0).
    #[arg(long, value_name = "R")]
    pub propose_rounds: Option<usize>,

    /// Cases of one trial at once, for stateless targets only (default [optimize]
    /// max_concurrency, 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_concurrency: Option<u64>,

    /// Call cache mode: read-write, off or replay (default [providers] cache).
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,

    /// Print the experiment report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `assay evaluate`
#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// The prompt folder to evaluate (<agent>_system_prompt.txt files).
    #[arg(long, value_name = "DIR")]
    pub prompts: PathBuf,

    /// A name for the logs' folder under experiments/ (default evaluate_<time>).
    #[arg(long, value_name = "NAME")]
    pub experiment_name: Option<String>,

    /// A test-case file instead of test_data/evaluation/VERSION.
    #[arg(long, value_name = "FILE")]
    pub evaluation_test_cases: Option<PathBuf>,

    /// The evaluation test-data version (default: latest_evaluation).
    #[arg(long, value_name = "V")]
    pub evaluation_version: Option<String>,

    /// The bootstrap's seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// A hard cap on the spend in USD.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,

    /// Cases at once, for stateless targets only.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_concurrency: Option<u64>,

    /// Call cache mode: read-write, off or replay.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,

    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}
