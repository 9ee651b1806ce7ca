//! `assay.toml`: the project's settings. Every key is optional and every default matches the
//! specification; unknown keys are an error (they are almost always typos).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assay_core::runlog::{Health, Weights};
use assay_kb::datafile::DataError;
use serde::Deserialize;

/// The settings file's name.
pub const SETTINGS_FILE: &str = "assay.toml";

mod redteam;
pub use redteam::{PatternsConfig, REDTEAM_FAMILIES, RedteamConfig};

/// `[paths]`: where the project's parts live, relative to the project directory.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PathsConfig {
    /// Entity files (default `kb`).
    pub kb: PathBuf,
    /// Test banks, one folder per bank: `semantic/`, `state/`, `pattern/`, `always/` (default
    /// `test_banks`).
    pub test_banks: PathBuf,
    /// Saved results and reports (default `results`).
    pub results: PathBuf,
}

impl Default for PathsConfig {
    fn default() -> Self {
        PathsConfig {
            kb: "kb".into(),
            test_banks: "test_banks".into(),
            results: "results".into(),
        }
    }
}

/// `[weights]`: each bank's weight in the combined score (default 0.60/0.15/0.15/0.10, and
/// 0.25 for the answer bank; the weights of the banks that ran are normalised).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct WeightsConfig {
    /// Semantic bank weight.
    pub semantic: f64,
    /// State bank weight.
    pub state: f64,
    /// Pattern bank weight.
    pub pattern: f64,
    /// Always bank weight.
    pub always: f64,
    /// Answer bank weight.
    pub answer: f64,
}

impl Default for WeightsConfig {
    fn default() -> Self {
        let w = Weights::default();
        WeightsConfig {
            semantic: w.semantic,
            state: w.state,
            pattern: w.pattern,
            always: w.always,
            answer: w.answer,
        }
    }
}

/// `[gate]`: when a run fails (exit code 1).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GateConfig {
    /// The lowest health that passes (default `POOR`: only `CRITICAL` fails).
    pub min_health: String,
    /// The lowest combined score that passes (default 0).
    pub min_score: f64,
    /// With `--baseline`: fail when a case hard-fails that did not in the baseline (default
    /// true).
    pub no_new_hard_fails: bool,
    /// With `--baseline`: fail when a case is a critical failure that was not in the baseline
    /// (default true).
    pub no_new_critical: bool,
    /// With `--baseline`: fail when the combined score falls by more than this many points
    /// (0-100; default: no limit).
    pub max_score_drop: Option<f64>,
    /// With `--baseline`: fail when one of an answer case's metrics (faithfulness, context
    /// recall, context precision, answer relevancy; each 0-1) falls by more than this share
    /// (0-1; default 0.1; 1 switches the rule off).
    pub max_metric_drop: f64,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            min_health: "POOR".into(),
            min_score: 0.0,
            no_new_hard_fails: true,
            no_new_critical: true,
            max_score_drop: None,
            max_metric_drop: DEFAULT_MAX_METRIC_DROP,
        }
    }
}

/// `[gate]`'s default `max_metric_drop`: an answer metric may fall by a tenth.
pub const DEFAULT_MAX_METRIC_DROP: f64 = 0.1;

/// The regression rules of `[gate]`, applied when a run is compared with a baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegressionRules {
    /// No case newly hard-fails.
    pub no_new_hard_fails: bool,
    /// No case newly fails critically.
    pub no_new_critical: bool,
    /// The combined score falls by at most this much.
    pub max_score_drop: Option<f64>,
    /// No answer case's metric falls by more than this share (0-1).
    pub max_metric_drop: f64,
}

/// `[semantic]`: how the semantic bank selects each case's entities: embedding search, then
/// reranking.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SemanticConfig {
    /// Candidates taken from the embedding search (default 15).
    pub candidates: usize,
    /// Entities kept after reranking (default 6).
    pub top_k: usize,
    /// Minimum seconds between reranker calls (default 1.25).
    pub rate_limit_delay: f64,
    /// The reranker: `none` (default: similarity + priority), `voyage/<model>` (Voyage rerank),
    /// or a chat model, `anthropic/<model>` or `openai/<model>` (an LLM listwise reranker).
    pub reranker: Option<String>,
    /// Semantic cases in flight at once (default 4).
    pub concurrency: usize,
    /// How the SITUATION candidates are found: `auto` (default: the store's vector index when
    /// the store has one, ranking is dense over one embedding per entity, and there are at
    /// least `index_min_entities` active SITUATION entities; else every embedding scored
    /// exactly), `exact` (always score every embedding) or `index` (always the store's index;
    /// an error where there is none).
    pub search: String,
    /// `search = "auto"` uses the index from this many active SITUATION entities (default
    /// [`INDEX_MIN_ENTITIES`]).
    pub index_min_entities: usize,
    /// How many candidates the HNSW index explores per search (pgvector's `hnsw.ef_search`,
    /// 1 to 1000; at least the number of candidates asked for is used; default
    /// [`DEFAULT_EF_SEARCH`]). Higher finds more of the exact answer, more slowly:
    /// `assay kb check-index` measures it.
    pub ef_search: u32,
    /// What the bank scores: `pipeline` (what the retrieval pipeline loads for the message,
    /// exactly as `assay retrieve` shows it: its similarity threshold, top_k, pattern rules and
    /// token budget; what `assay init` writes) or `top_k` (the `top_k` best of the `candidates`
    /// nearest, whatever their similarity; the default when unset, as projects made before
    /// the setting existed were scored).
    pub selection: String,
    /// Before the run, search the store's vector index once for every semantic case, so the
    /// run's searches do not pay for a cold index (its pages read from disk on the first
    /// pass); the run's setup records what the warm-up cost (`semantic_warm_up`). Only an
    /// index search has anything to warm (default false).
    pub warm_up: bool,
}

/// The values `[semantic] search` accepts.
pub const SEARCH_MODES: [&str; 3] = ["auto", "exact", "index"];
/// `[semantic] index_min_entities` by default: below it the exact scan takes under about 10 ms
/// a search on one core (bench/README.md, "store") and finds the exact answer.
pub const INDEX_MIN_ENTITIES: usize = 100_000;
/// `[semantic] ef_search` by default.
pub const DEFAULT_EF_SEARCH: u32 = 400;
/// The largest `ef_search` pgvector accepts.
pub const MAX_EF_SEARCH: u32 = 1000;

impl Default for SemanticConfig {
    fn default() -> Self {
        SemanticConfig {
            candidates: 15,
            top_k: 6,
            rate_limit_delay: 1.25,
            reranker: None,
            concurrency: 4,
            search: "auto".into(),
            index_min_entities: INDEX_MIN_ENTITIES,
            ef_search: DEFAULT_EF_SEARCH,
            selection: "top_k".into(),
            warm_up: false,
        }
    }
}

/// `[providers]`: how model providers are called (every chat, rerank and remote embedding call
/// goes through one wrapper with these settings).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProvidersConfig {
    /// The call cache in `.assay/cache.db`: `read-write` (default), `off`, or `replay` (a miss
    /// is an error: re-runs and CI are deterministic and make no calls).
    pub cache: String,
    /// Seconds before a request times out (default 60).
    pub timeout_seconds: f64,
    /// Retries of a failed call (5xx, timeouts, broken or garbled answers; default 4). A 429
    /// or 529 ("slow down") is not a failure: it waits for the rate limiter and spends none.
    pub max_retries: u32,
    /// Calls in flight at once per provider (default 4): the ceiling of the adaptive
    /// concurrency, which backs off when the provider says slow down.
    pub max_concurrency: usize,
    /// The most seconds one call may take, retries and waits for rate limits included; a call
    /// still held back then is recorded as an error (default 600).
    pub max_wait_seconds: f64,
    /// The backoff ceiling before the first retry of a failed call, in seconds (default 0.5);
    /// it doubles on each retry up to `max_backoff_seconds` (default 20), and each wait is a
    /// uniform draw below the ceiling ("full jitter"). A `retry-after` from the provider wins.
    pub retry_backoff_seconds: f64,
    /// The largest backoff ceiling, in seconds (default 20).
    pub max_backoff_seconds: f64,
    /// Base URL of the Anthropic API (default `https://api.anthropic.com`).
    pub anthropic_base_url: Option<String>,
    /// Base URL of an OpenAI-compatible API (default `https://api.openai.com/v1`).
    pub openai_base_url: Option<String>,
    /// Base URL of the Voyage AI API (default `https://api.voyageai.com/v1`).
    pub voyage_base_url: Option<String>,
    /// Prices you declare, by `vendor/model`, in USD per million tokens: a number for both
    /// input and output (`"openai/llama-3.1-8b" = 0` declares a local model free) or
    /// `{ input = 0.5, output = 1.5 }`. They come before the built-in list, so costs are
    /// counted and `--budget` can be enforced for models the list does not know.
    pub prices: BTreeMap<String, PriceSetting>,
    /// Limits that several models share, by a name of your choosing: `team_key = ["openai/a",
    /// "openai/b"]`. Declare one when the provider counts those models' requests against one
    /// bucket (one API key's limit, or a proxy's): the models then share one rate limiter,
    /// which paces them together, instead of each believing it has the whole bucket and
    /// together overrunning it. A model may be in one group only.
    pub shared_limits: BTreeMap<String, Vec<String>>,
    /// Pool undeclared shared limits (default true): models on the same base URL and API key
    /// that the provider refuses together while their own limiters believe they have room,
    /// or whose rate-limit headers show one bucket of the same size drained by both, are
    /// pooled into one limiter for the rest of the run (the log says which, and the limiter
    /// is named `shared:auto (…)`). Set false if it pools models that do not share a limit.
    pub pool_shared_limits: bool,
    /// Slow start (default true): a model nothing is remembered about starts with 4 calls in
    /// flight and one more per answer, up to `max_concurrency`, so that a limit nobody
    /// announced refuses a few calls instead of a whole first wave; it ends at the first limit
    /// signal (a 429, or rate-limit headers showing a bucket running low), at the ceiling, or
    /// when the headers show ample room. Set false to start at `max_concurrency` at once.
    pub slow_start: bool,
    /// Remember the rate limits a run learned (each bucket's size and rate, from the headers
    /// or the 429s, and which models share one) in `.assay/limits.json` for a week, so that the
    /// next run paces from its first request instead of being refused again to learn them
    /// (default true). A remembered limit the provider contradicts is corrected at once.
    pub remember_limits: bool,
    /// Send the calls nobody waits on interactively (the LLM reranker, judges, calibration,
    /// generation, the optimizer's grader, the simulator's judge) through the provider's batch
    /// API: OpenAI batches or Anthropic Message Batches, at the batch price (default false;
    /// `--batch` turns it on for one command). See docs/batch.md.
    pub batch: bool,
    /// Seconds between two polls of a submitted batch (default 30).
    pub batch_poll_seconds: f64,
    /// Seconds without a new request after which the waiting requests are submitted as one
    /// batch (default 2).
    pub batch_window_seconds: f64,
    /// The most requests in one batch (default 10000; OpenAI takes 50000, Anthropic 100000).
    pub batch_max_requests: usize,
}

/// One declared price (`[providers.prices]`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum PriceSetting {
    /// The same price per million input and output tokens (0: free).
    Flat(f64),
    /// Input and output priced apart.
    Split {
        /// USD per million input tokens.
        input: f64,
        /// USD per million output tokens.
        output: f64,
    },
}

impl PriceSetting {
    /// As the providers' [`assay_providers::Price`].
    pub fn price(self) -> assay_providers::Price {
        match self {
            PriceSetting::Flat(p) => assay_providers::Price {
                input: p,
                output: p,
            },
            PriceSetting::Split { input, output } => assay_providers::Price { input, output },
        }
    }
}

impl Default for ProvidersConfig {
    fn default() -> Self {
        ProvidersConfig {
            cache: "read-write".into(),
            timeout_seconds: 60.0,
            max_retries: 4,
            max_concurrency: 4,
            max_wait_seconds: 600.0,
            retry_backoff_seconds: 0.5,
            max_backoff_seconds: 20.0,
            anthropic_base_url: None,
            openai_base_url: None,
            voyage_base_url: None,
            prices: BTreeMap::new(),
            shared_limits: BTreeMap::new(),
            pool_shared_limits: true,
            slow_start: true,
            remember_limits: true,
            batch: false,
            batch_poll_seconds: 30.0,
            batch_window_seconds: 2.0,
            batch_max_requests: 10_000,
        }
    }
}

/// `[calibration]`: the strong model that proposes the semantic cases' expectations
/// (`assay calibrate`).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CalibrationConfig {
    /// `vendor/model` of the calibrating chat model (default `anthropic/claude-opus-4-5`).
    pub model: String,
    /// Cases calibrated at once (default 2).
    pub concurrency: usize,
}

impl Default for CalibrationConfig {
    fn default() -> Self {
        CalibrationConfig {
            model: "anthropic/claude-opus-4-5".into(),
            concurrency: 2,
        }
    }
}

/// `[answer]`: the answer bank (`test_banks/answer/`): the product's replies, judged on
/// grounded-answer metrics (docs/answers.md). The product is the `[optimize]` target.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AnswerTableConfig {
    /// `vendor/model` of the judge that extracts claims and gives verdicts (default
    /// `anthropic/claude-sonnet-4-6`).
    pub judge_model: String,
    /// Tokens the judge may answer with (default 2048).
    pub judge_max_tokens: u32,
    /// The metrics computed for every case that does not list its own (default all four:
    /// faithfulness, answer_relevancy, context_precision, context_recall; context recall only
    /// where the case has a reference).
    pub metrics: Vec<assay_core::answer::Metric>,
    /// Minimum score (0–1) per metric; a case below it fails (a case's own `minimum` wins).
    #[schemars(schema_with = "assay_core::answer::minimum_schema")]
    pub minimum: BTreeMap<assay_core::answer::Metric, f64>,
    /// Weights in a case's score: a metric's name, or `assertions` (default 1 each).
    pub weights: BTreeMap<String, f64>,
    /// Questions the judge reads off a reply for answer relevancy (default 3).
    pub relevancy_questions: usize,
    /// Answer cases in flight at once when the product is stateless (default 4).
    pub concurrency: usize,
    /// The most bytes one reply of the product (the `[optimize]` command or HTTP target) may
    /// have (default 1,048,576: 1 MiB). A longer reply is an error of its case (the rest is
    /// never read); the optimizer's targets are held to it too.
    pub max_reply_bytes: usize,
}

/// The largest `[answer] max_reply_bytes`: 1 GiB.
pub const MAX_REPLY_BYTES_LIMIT: usize = 1 << 30;

impl Default for AnswerTableConfig {
    fn default() -> Self {
        AnswerTableConfig {
            judge_model: "anthropic/claude-sonnet-4-6".into(),
            judge_max_tokens: 2048,
            metrics: assay_core::answer::Metric::ALL.to_vec(),
            minimum: BTreeMap::new(),
            weights: BTreeMap::new(),
            relevancy_questions: 3,
            concurrency: 4,
            max_reply_bytes: assay_providers::target::DEFAULT_MAX_REPLY_BYTES,
        }
    }
}

impl AnswerTableConfig {
    /// Checks the values; the error names the field (`answer.weights.faithful: …`).
    pub fn validate(&self) -> Result<(), String> {
        if !self.judge_model.contains('/') {
            return Err("answer.judge_model: name the model as vendor/model".into());
        }
        if self.judge_max_tokens == 0 {
            return Err("answer.judge_max_tokens: must be at least 1".into());
        }
        if self.relevancy_questions == 0 || self.relevancy_questions > 10 {
            return Err("answer.relevancy_questions: must be between 1 and 10".into());
        }
        if self.concurrency == 0 {
            return Err("answer.concurrency: must be at least 1".into());
        }
        if self.max_reply_bytes == 0 || self.max_reply_bytes > MAX_REPLY_BYTES_LIMIT {
            return Err(format!(
                "answer.max_reply_bytes: must be from 1 to {MAX_REPLY_BYTES_LIMIT} (1 GiB), found {}",
                self.max_reply_bytes
            ));
        }
        for (metric, min) in &self.minimum {
            if !(min.is_finite() && (0.0..=1.0).contains(min)) {
                return Err(format!(
                    "answer.minimum.{metric}: must be a share between 0 and 1, found {min}"
                ));
            }
        }
        for (name, w) in &self.weights {
            if name != "assertions" && assay_core::answer::Metric::parse(name).is_none() {
                return Err(format!(
                    "answer.weights.{name}: unknown (expected faithfulness, answer_relevancy, context_precision, context_recall or assertions)"
                ));
            }
            if !(w.is_finite() && *w >= 0.0) {
                return Err(format!(
                    "answer.weights.{name}: must be a number of 0 or more, found {w}"
                ));
            }
        }
        Ok(())
    }

    /// The weights of a case's score.
    pub fn score_weights(&self) -> assay_core::answer::ScoreWeights {
        assay_core::answer::ScoreWeights {
            metrics: self
                .weights
                .iter()
                .filter_map(|(k, v)| assay_core::answer::Metric::parse(k).map(|m| (m, *v)))
                .collect(),
            assertions: self.weights.get("assertions").copied().unwrap_or(1.0),
        }
    }
}

/// `[generate]`: defaults of `assay generate` (draft cases written by a model).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GenerateConfig {
    /// `vendor/model` of the model that writes messages (default: `[calibration] model`).
    pub model: Option<String>,
    /// The language messages are written in, a name or a code (default `english`).
    pub language: String,
    /// Drafts per SITUATION entity, and per pattern rule each way (default 5).
    pub per_entity: u32,
    /// Two messages whose embeddings' cosine is at least this are near-duplicates: the later
    /// one is dropped and counted (default 0.95).
    pub duplicate_threshold: f64,
    /// The longest one model call may take, retries included, before it counts as an error
    /// (default 120 seconds).
    pub timeout_seconds: f64,
    /// Model calls in flight at once (default 4).
    pub concurrency: usize,
}

impl Default for GenerateConfig {
    fn default() -> Self {
        GenerateConfig {
            model: None,
            language: "english".into(),
            per_entity: 5,
            duplicate_threshold: 0.95,
            timeout_seconds: 120.0,
            concurrency: 4,
        }
    }
}

/// `[simulate]`: defaults of `assay simulate` (the conversation simulator).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SimulateConfig {
    /// `vendor/model` of the model under test when `--model` is not given.
    pub model: Option<String>,
    /// `vendor/model` of the simulated user (default `anthropic/claude-sonnet-4-6`).
    pub simulator_model: String,
    /// `vendor/model` of the judge (default `anthropic/claude-sonnet-4-6`).
    pub evaluator_model: String,
    /// Model calls in flight at once, across the three roles (default 4).
    pub concurrency: usize,
    /// Conversations open at once, each with its own MCP servers (default: twice
    /// `concurrency`, so that a conversation waiting for its turn never leaves a call slot idle).
    pub runs_in_flight: Option<usize>,
}

impl Default for SimulateConfig {
    fn default() -> Self {
        SimulateConfig {
            model: None,
            simulator_model: "anthropic/claude-sonnet-4-6".into(),
            evaluator_model: "anthropic/claude-sonnet-4-6".into(),
            concurrency: 4,
            runs_in_flight: None,
        }
    }
}

/// `[optimize]`: the prompt optimizer (`assay optimize`, `assay evaluate`).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OptimizeConfig {
    /// The system under test: `chain` (the built-in multi-agent chain, default), `command`
    /// (a program run once per case), `http` (an endpoint), `worker` (a program started once
    /// and sent every case as a JSON line, docs/worker.md), `python:package.module:function`
    /// or `node:./path/to/module.js#export` (a function, served by the worker assay ships
    /// for that language).
    pub target: String,
    /// `target = "command"` or `"worker"`: the program and its arguments, run in the project
    /// directory.
    pub command: Vec<String>,
    /// Worker processes of a `worker`, `python:` or `node:` target (default 1), each started
    /// once; with `stateless = true` that many cases run at once.
    pub workers: usize,
    /// `target = "http"`: the URL requests are POSTed to.
    pub url: Option<String>,
    /// Seconds one command, HTTP or worker request may take (default 300).
    pub timeout_seconds: f64,
    /// The command, endpoint or worker keeps no state between requests, so cases may run
    /// at once (`--max-concurrency`, `[answer] concurrency`; default false; the chain is
    /// stateless).
    pub stateless: bool,
    /// The chain's agent order (default: planner, researcher, expert, critic_planner,
    /// critic_researcher, critic_expert, finalizer when those are exactly the agents, else the
    /// agents in name order with `finalizer` last).
    pub chain: Option<Vec<String>>,
    /// `vendor/model` of the chain's agents (default `anthropic/claude-haiku-4-5`).
    pub model: String,
    /// A different `vendor/model` for some agents.
    pub agent_models: BTreeMap<String, String>,
    /// Tokens each chain agent may answer with (default 1024).
    pub agent_max_tokens: u32,
    /// `vendor/model` of the llm-rubric grader (default `anthropic/claude-sonnet-4-6`).
    pub grader_model: String,
    /// The composite score at which a case passes the rubric (default 0.8).
    pub threshold: f64,
    /// Random start-up trials before TPE (default 10, Optuna's).
    pub startup_trials: usize,
    /// The objectives, each `maximize <metric>` or `minimize <metric>` (default
    /// `maximize factually_correct_count`, `maximize average_composite_score`).
    pub directions: Vec<String>,
    /// Cases of one trial run at once for stateless targets (default 1: one case at a time).
    pub max_concurrency: usize,
    /// `--racing`: the share of the optimization cases a combination is first scored on
    /// (default 0.5).
    pub racing_fraction: f64,
    /// `[optimize.propose]`: reflective prompt proposals (`--propose-rounds`).
    pub propose: ProposeConfig,
    /// How an answer is judged correct, the first objective (default `normalised`: words on
    /// word boundaries, numbers as numbers with their units); also `exact`, `numeric`,
    /// `regex` (each case's `pattern`), `grader` (the grader's own call) and `seed` (correct
    /// when either text contains the other). A test case may name its own (`"correctness"`).
    pub correctness: String,
    /// Units that count as one another for the correctness rule, each `1 kg = 1000 g`.
    pub units: Vec<String>,
    /// Agents searched with their production prompt only, on purpose: an agent with no
    /// variants is an error unless it is named here.
    pub fixed_agents: Vec<String>,
    /// The check of every model before anything is written: `models` (default: ask the
    /// provider whether each model exists, where it can say), `call` (also one one-token
    /// call per model) or `off`.
    pub preflight: String,
    /// A PostgreSQL URL (`postgresql://user@host/db`, no password: `PGPASSWORD` or a pgpass
    /// file) where the study's trials are kept, so that `assay optimize --worker` processes on
    /// any machines share one experiment (`--storage` overrides; default: none, the local
    /// journal). See docs/optimize.md.
    pub storage: Option<String>,
    /// How often a worker of a shared study touches its heartbeat, in seconds (default 10);
    /// a trial or step whose worker missed three is taken over by another.
    pub heartbeat_seconds: f64,
}

/// `[optimize.propose]`: after the search over the hand-written prompts, a proposer model
/// reads the traces of optimization cases the best combination gets wrong and writes revised
/// prompts, which join the study (GEPA-style; docs/optimize.md).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProposeConfig {
    /// `vendor/model` of the proposer (default: the grader's model).
    pub model: Option<String>,
    /// Proposal rounds (default 0: none; `--propose-rounds` overrides).
    pub rounds: usize,
    /// Proposals per round (default 1), for the agents the selector picks.
    pub proposals_per_round: usize,
    /// Agents whose prompts may be revised (default: every agent).
    pub agents: Vec<String>,
    /// Which agent a round revises: `blame` (default: the proposer reads the failing cases'
    /// traces and names the agent whose output went wrong first; the majority wins) or `all`
    /// (every agent that may be revised, each in its own proposal).
    pub selector: String,
    /// Optimization cases shown with each request, the worst first (default 3, as GEPA).
    pub minibatch: usize,
    /// Study trials over the grown space after each round's proposals (default 2).
    pub trials_per_round: usize,
    /// Tokens the proposer may answer with (default 4096).
    pub max_tokens: u32,
    /// Text a proposal for an agent must keep, agent → markers (besides `FINAL ANSWER:`,
    /// always required when the parent prompt has it).
    pub required: BTreeMap<String, Vec<String>>,
}

impl Default for ProposeConfig {
    fn default() -> Self {
        ProposeConfig {
            model: None,
            rounds: 0,
            proposals_per_round: 1,
            agents: Vec::new(),
            selector: "blame".into(),
            minibatch: 3,
            trials_per_round: 2,
            max_tokens: 4096,
            required: BTreeMap::new(),
        }
    }
}

impl Default for OptimizeConfig {
    fn default() -> Self {
        OptimizeConfig {
            target: "chain".into(),
            command: Vec::new(),
            workers: 1,
            url: None,
            timeout_seconds: 300.0,
            stateless: false,
            chain: None,
            model: "anthropic/claude-haiku-4-5".into(),
            agent_models: BTreeMap::new(),
            agent_max_tokens: 1024,
            grader_model: "anthropic/claude-sonnet-4-6".into(),
            threshold: 0.8,
            startup_trials: 10,
            directions: vec![
                "maximize factually_correct_count".into(),
                "maximize average_composite_score".into(),
            ],
            max_concurrency: 1,
            racing_fraction: 0.5,
            propose: ProposeConfig::default(),
            correctness: "normalised".into(),
            units: Vec::new(),
            fixed_agents: Vec::new(),
            preflight: "models".into(),
            storage: None,
            heartbeat_seconds: 10.0,
        }
    }
}

/// `[verdict]`: when a case fails, the same for every surface (the console, the reports,
/// JUnit, the pytest plugin, the web UI, run comparisons): decided once, where the case is
/// scored, and stored on it.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct VerdictConfig {
    /// A case scoring under this (0–100) fails, besides the cases its own checks fail (a hard
    /// fail, a critical failure, a failed assertion, metric minimum or trajectory rule). Unset
    /// by default: a score below 100 alone fails no case.
    pub pass_score: Option<u32>,
}

/// What `[report] junit_pass_score` became, for the error that names it.
const REPORT_REMOVED: &str = "`[report] junit_pass_score` was removed: a case's verdict is now decided once, where it is scored, and every surface (console, reports, JUnit, pytest, web UI) shows the same one. To fail every case scoring under a score on all of them, write it as `[verdict]` `pass_score = N`; to fail only the cases assay fails (hard fails, critical failures, failed checks), delete the line";

/// The error for a `[report]` table, which no longer exists: where it is and what replaced it.
fn report_removed(table: &toml::Table, text: &str) -> Option<(Option<usize>, String)> {
    let report = table.get("report")?;
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.trim_start().starts_with(needle))
            .map(|i| i + 1)
    };
    let junit = report
        .as_table()
        .is_some_and(|t| t.contains_key("junit_pass_score"));
    Some(if junit {
        (
            line_of("junit_pass_score").or_else(|| line_of("[report]")),
            format!("report.junit_pass_score: {REPORT_REMOVED}"),
        )
    } else {
        (
            line_of("[report]"),
            "report: the `[report]` table was removed (its one setting, junit_pass_score, became `[verdict] pass_score`, which applies to every surface); delete the table".to_owned(),
        )
    })
}

/// `[embedder]`: how entity and query texts are embedded.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedderConfig {
    /// `vendor/model`: `builtin/hashed-ngrams` (default), `local/<dir>` (or `local` with
    /// `model_dir`), `hf/<repo>`, `voyage/<model>`, `openai/<model>`.
    pub model: Option<String>,
    /// The model directory for `model = "local"`, relative to the project.
    pub model_dir: Option<PathBuf>,
    /// Base URL of an OpenAI-compatible server (default `https://api.openai.com/v1`).
    pub openai_base_url: Option<String>,
    /// Base URL of the Voyage API (default `https://api.voyageai.com/v1`).
    pub voyage_base_url: Option<String>,
    /// Seconds before a request times out (default 60).
    pub timeout_seconds: Option<f64>,
    /// Texts per request or forward pass (default: each provider's own).
    pub batch_size: Option<usize>,
    /// Prepended to every query (the user's message) before it is embedded; default: what
    /// the model's card asks for (`query: ` for E5 models, the BGE v1.5 search instruction),
    /// else nothing. `""` turns it off.
    pub query_prefix: Option<String>,
    /// Prepended to every document (an entity's text or view) before it is embedded; default:
    /// `passage: ` for E5 models, else nothing.
    pub document_prefix: Option<String>,
}

/// `[retrieval]`: the retrieval pipeline (ALWAYS, STATE, pattern and SITUATION entities, the
/// final score and the token budget).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RetrievalSettingsConfig {
    /// SITUATION entities kept (default 5).
    pub top_k: usize,
    /// Candidates fetched per kept entity before the threshold (default 2).
    pub fetch_factor: usize,
    /// Minimum similarity of a SITUATION entity (default 0.65; see the guide for the built-in
    /// embedder).
    pub score_threshold: Option<f32>,
    /// Weight of priority in the final score (default 0.15).
    pub priority_weight: f32,
    /// Token budget of the context (default 3000).
    pub max_tokens_budget: usize,
    /// `hybrid` (dense + BM25, the default: see the guide for the measurements) or `dense`
    /// (ranked by cosine similarity alone).
    pub mode: String,
    /// `single` (one embedding of the whole embedding text: title, recognition, keywords and
    /// examples; the default) or `multi`
    /// (one embedding per view: title, each recognition line, keywords, each example).
    pub views: String,
    /// Hybrid mode: weight of the normalised BM25 score (default 0.3).
    pub lexical_weight: Option<f32>,
    /// Values tuned for one embedder (`assay kb tune --write`), keyed by its `vendor/model`
    /// name; they win over the general ones above when that embedder is used.
    pub tuned: BTreeMap<String, TunedConfig>,
}

/// `[retrieval.tuned."<embedder>"]`: what `assay kb tune` chose for one embedder.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TunedConfig {
    /// The similarity threshold of the SITUATION stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_threshold: Option<f32>,
    /// The semantic bank's first-stage candidates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<usize>,
    /// Hybrid mode's lexical weight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lexical_weight: Option<f32>,
}

/// The retrieval modes `[retrieval] mode` accepts.
pub const RETRIEVAL_MODES: [&str; 2] = ["dense", "hybrid"];
/// The view settings `[retrieval] views` accepts.
pub const RETRIEVAL_VIEWS: [&str; 2] = ["single", "multi"];

impl Default for RetrievalSettingsConfig {
    fn default() -> Self {
        RetrievalSettingsConfig {
            top_k: 5,
            fetch_factor: 2,
            score_threshold: None,
            priority_weight: 0.15,
            max_tokens_budget: 3000,
            mode: "hybrid".into(),
            views: "single".into(),
            lexical_weight: None,
            tuned: BTreeMap::new(),
        }
    }
}

/// The whole `assay.toml`, as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProjectConfig {
    /// Where the knowledge base is kept: a `postgres://user@host:port/db` URL (no
    /// password: PGPASSWORD or a pgpass file), or an SQLite file (`sqlite:PATH` or a path,
    /// relative to the project). Default: the embedded `.assay/kb.db`. `ASSAY_STORE` overrides.
    pub store: Option<String>,
    /// The `[paths]` table: where the project's parts live.
    pub paths: PathsConfig,
    /// The `[weights]` table: each bank's share of the combined score.
    pub weights: WeightsConfig,
    /// The `[gate]` table: when a run fails (exit 1).
    pub gate: GateConfig,
    /// The `[semantic]` table: the semantic bank's sizes, reranker, search and selection.
    pub semantic: SemanticConfig,
    /// The `[verdict]` table: when a case fails, for every surface.
    pub verdict: VerdictConfig,
    /// The `[embedder]` table: which model embeds entities and messages.
    pub embedder: EmbedderConfig,
    /// The `[retrieval]` table: the retrieval pipeline `assay retrieve` and the product run.
    pub retrieval: RetrievalSettingsConfig,
    /// The `[providers]` table: how model providers are called (limits, retries, cache, prices).
    pub providers: ProvidersConfig,
    /// The `[calibration]` table: the model that proposes expectations.
    pub calibration: CalibrationConfig,
    /// The `[simulate]` table: the conversation simulator's models and limits.
    pub simulate: SimulateConfig,
    /// The `[generate]` table: defaults of `assay generate`.
    pub generate: GenerateConfig,
    /// The `[answer]` table: the answer bank's judge, metrics, minimums and weights.
    pub answer: AnswerTableConfig,
    /// The `[optimize]` table: the prompt optimizer.
    pub optimize: OptimizeConfig,
    /// The `[telemetry]` table: OpenTelemetry export of runs' spans.
    pub telemetry: assay_telemetry::TableValues,
    /// The `[state]` table: the types of the project's own user-state fields.
    pub state: crate::typed_state::StateConfig,
    /// The `[patterns]` table: how the pattern rules read a message.
    pub patterns: PatternsConfig,
    /// The `[redteam]` table: `assay redteam`'s defaults.
    pub redteam: RedteamConfig,
}

/// The cache modes `[providers] cache` accepts.
pub const CACHE_MODES: [&str; 3] = ["read-write", "off", "replay"];

/// Resolved settings of a project.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectSettings {
    /// The project directory.
    pub root: PathBuf,
    /// `store`, as written (resolved by [`crate::engine::open_store`]).
    pub store: Option<String>,
    /// `kb/`, resolved.
    pub kb_dir: PathBuf,
    /// `test_banks/`, resolved.
    pub banks_dir: PathBuf,
    /// `results/`, resolved.
    pub results_dir: PathBuf,
    /// Bank weights.
    pub weights: Weights,
    /// The lowest passing health.
    pub min_health: Health,
    /// The lowest passing combined score.
    pub min_score: f64,
    /// Semantic pipeline sizes.
    pub semantic: SemanticConfig,
    /// The rules a case's verdict is decided with (`[verdict]`).
    pub verdict: assay_core::verdict::VerdictRules,
    /// Embedder settings, as written (resolved by [`crate::engine::choose_embedder`]).
    pub embedder: EmbedderConfig,
    /// Retrieval pipeline settings.
    pub retrieval: RetrievalSettingsConfig,
    /// Provider call settings.
    pub providers: ProvidersConfig,
    /// Calibration settings.
    pub calibration: CalibrationConfig,
    /// Conversation-simulator defaults.
    pub simulate: SimulateConfig,
    /// `assay generate` defaults.
    pub generate: GenerateConfig,
    /// The answer bank's settings.
    pub answer: AnswerTableConfig,
    /// Prompt-optimizer settings.
    pub optimize: OptimizeConfig,
    /// OpenTelemetry export, as written (resolved with the `OTEL_*` variables when a command
    /// starts).
    pub telemetry: assay_telemetry::TableValues,
    /// `[gate]`'s regression rules (for `--baseline`).
    pub regression: RegressionRules,
    /// `[patterns]`.
    pub patterns: PatternsConfig,
    /// `[redteam]`.
    pub redteam: RedteamConfig,
    /// The types of every user-state field: the built-in ones and `[state.fields]` (the
    /// audiences are added once the knowledge base is known).
    pub state: assay_core::state_fields::StateSchema,
    /// The settings that shape results, as written: `assay.toml`'s `[weights]`, `[patterns]`, `[semantic]`,
    /// `[retrieval]`, `[embedder]`, `[gate]`, `[answer]` and `[verdict]` tables as dotted keys (`retrieval.top_k`) and
    /// their TOML values. A run records them, so a comparison of two runs can say which
    /// differ; a setting left at its default is not listed (the assay version decides it).
    pub recorded: std::collections::BTreeMap<String, String>,
}

/// The `assay.toml` tables whose values a run records ([`ProjectSettings::recorded`]).
pub const RECORDED_TABLES: [&str; 8] = [
    "weights",
    "patterns",
    "semantic",
    "retrieval",
    "embedder",
    "gate",
    "answer",
    "verdict",
];

/// The recorded settings of a parsed `assay.toml`.
fn recorded(table: &toml::Table) -> std::collections::BTreeMap<String, String> {
    fn flatten(
        prefix: &str,
        value: &toml::Value,
        out: &mut std::collections::BTreeMap<String, String>,
    ) {
        match value {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    flatten(&format!("{prefix}.{k}"), v, out);
                }
            }
            other => {
                out.insert(prefix.to_owned(), other.to_string());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for name in RECORDED_TABLES {
        if let Some(v) = table.get(name) {
            flatten(name, v, &mut out);
        }
    }
    out
}

/// The dotted key of the first float in `value` that is not finite, if any.
fn non_finite(value: &toml::Value, key: &str) -> Option<String> {
    let join = |k: &str| {
        if key.is_empty() {
            k.to_owned()
        } else {
            format!("{key}.{k}")
        }
    };
    match value {
        toml::Value::Float(f) if !f.is_finite() => Some(key.to_owned()),
        toml::Value::Table(t) => t.iter().find_map(|(k, v)| non_finite(v, &join(k))),
        toml::Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| non_finite(v, &format!("{key}[{i}]"))),
        _ => None,
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl ProjectSettings {
    /// Reads `root/assay.toml` if it exists; otherwise every default.
    pub fn load(root: &Path) -> Result<ProjectSettings, DataError> {
        let path = root.join(SETTINGS_FILE);
        let config = if path.exists() {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| DataError::new(&path, format!("cannot read file: {e}")))?;
            let located = |e: toml::de::Error, field: &str| {
                let (line, column) = e.span().map(|s| line_col(&text, s.start)).unzip();
                DataError {
                    path: path.clone(),
                    line,
                    column,
                    message: assay_kb::datafile::with_field(field, e.message()),
                }
            };
            // The removed `[report]` table is named with what replaced it, before serde's
            // "unknown field" could.
            if let Some((line, message)) = text
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| report_removed(&t, &text))
            {
                return Err(DataError {
                    path: path.clone(),
                    line,
                    column: None,
                    message,
                });
            }
            let de = toml::Deserializer::parse(&text).map_err(|e| located(e, ""))?;
            let config: ProjectConfig = serde_path_to_error::deserialize(de).map_err(|e| {
                let field = e.path().to_string();
                located(e.into_inner(), &field)
            })?;
            // TOML can write `inf` and `nan`; no setting means either.
            let table = text.parse::<toml::Table>().unwrap_or_default();
            if let Some(key) = non_finite(&toml::Value::Table(table.clone()), "") {
                let last = key.rsplit('.').next().unwrap_or(&key).to_owned();
                return Err(DataError {
                    path: path.clone(),
                    line: text
                        .lines()
                        .position(|l| l.trim_start().starts_with(&last))
                        .map(|i| i + 1),
                    column: None,
                    message: format!("{key}: must be a finite number (not inf or nan)"),
                });
            }
            (config, recorded(&table))
        } else {
            (ProjectConfig::default(), std::collections::BTreeMap::new())
        };
        let (config, recorded) = config;
        let declared: Vec<String> = config.state.fields.keys().cloned().collect();
        let mut settings = ProjectSettings::resolve(root, config).map_err(|m| {
            // A declaration that retypes a built-in field is found here: its line, too.
            let line = m
                .strip_prefix("state.fields: `")
                .and_then(|rest| rest.split_once('`'))
                .filter(|(name, _)| declared.iter().any(|d| d == name))
                .and_then(|(name, _)| {
                    let text = std::fs::read_to_string(&path).ok()?;
                    toml_key_line(&text, name)
                });
            DataError {
                line,
                ..DataError::new(&path, m)
            }
        })?;
        settings.recorded = recorded;
        Ok(settings)
    }

    /// Validates and resolves a config.
    pub fn resolve(root: &Path, config: ProjectConfig) -> Result<ProjectSettings, String> {
        let w = config.weights;
        let weights = Weights {
            semantic: w.semantic,
            state: w.state,
            pattern: w.pattern,
            always: w.always,
            answer: w.answer,
        };
        config.answer.validate()?;
        for (name, value) in [
            ("semantic", w.semantic),
            ("state", w.state),
            ("pattern", w.pattern),
            ("always", w.always),
            ("answer", w.answer),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!(
                    "weights.{name}: must be a number of 0 or more, found {value}"
                ));
            }
        }
        if !(w.semantic + w.state + w.pattern + w.always).is_finite() {
            return Err("weights: the weights add up to more than a number can hold; use weights of ordinary size (they are normalised)".into());
        }
        if w.semantic + w.state + w.pattern + w.always <= 0.0 {
            return Err("weights: at least one weight must be above 0".into());
        }
        let min_health = Health::parse(&config.gate.min_health).ok_or_else(|| {
            format!(
                "gate.min_health: unknown health `{}` (expected CRITICAL, POOR, FAIR, GOOD or EXCELLENT)",
                config.gate.min_health
            )
        })?;
        if config
            .gate
            .max_score_drop
            .is_some_and(|d| !(0.0..=100.0).contains(&d))
        {
            return Err("gate.max_score_drop: must be between 0 and 100 points".into());
        }
        if !(0.0..=1.0).contains(&config.gate.max_metric_drop) {
            return Err(format!(
                "gate.max_metric_drop: must be a share between 0 and 1 (0.1 is a tenth), found {}",
                config.gate.max_metric_drop
            ));
        }
        if !(0.0..=100.0).contains(&config.gate.min_score) {
            return Err(format!(
                "gate.min_score: must be between 0 and 100, found {}",
                config.gate.min_score
            ));
        }
        if config.semantic.top_k == 0 || config.semantic.candidates < config.semantic.top_k {
            return Err(format!(
                "semantic: need 0 < top_k <= candidates, found top_k {} and candidates {}",
                config.semantic.top_k, config.semantic.candidates
            ));
        }
        if !(config.semantic.rate_limit_delay.is_finite()
            && config.semantic.rate_limit_delay >= 0.0)
        {
            return Err("semantic.rate_limit_delay: must be 0 or more seconds".into());
        }
        let r = &config.retrieval;
        if r.top_k == 0 || r.fetch_factor == 0 {
            return Err("retrieval: top_k and fetch_factor must be at least 1".into());
        }
        if r.score_threshold
            .is_some_and(|t| !(-1.0..=1.0).contains(&t))
        {
            return Err("retrieval.score_threshold: must be between -1 and 1".into());
        }
        if !(r.priority_weight.is_finite() && r.priority_weight >= 0.0) {
            return Err("retrieval.priority_weight: must be 0 or more".into());
        }
        if !RETRIEVAL_MODES.contains(&r.mode.as_str()) {
            return Err(format!(
                "retrieval.mode: unknown mode `{}` (expected dense or hybrid)",
                r.mode
            ));
        }
        if !RETRIEVAL_VIEWS.contains(&r.views.as_str()) {
            return Err(format!(
                "retrieval.views: unknown value `{}` (expected single or multi)",
                r.views
            ));
        }
        let lexical_weights = r
            .lexical_weight
            .iter()
            .chain(r.tuned.values().filter_map(|t| t.lexical_weight.as_ref()));
        for w in lexical_weights {
            if !(w.is_finite() && (0.0..=10.0).contains(w)) {
                return Err("retrieval.lexical_weight: must be between 0 and 10".into());
            }
        }
        for (name, t) in &r.tuned {
            if t.score_threshold
                .is_some_and(|x| !(-1.0..=1.0).contains(&x))
            {
                return Err(format!(
                    "retrieval.tuned.\"{name}\".score_threshold: must be between -1 and 1"
                ));
            }
            if t.candidates.is_some_and(|c| c < config.semantic.top_k) {
                return Err(format!(
                    "retrieval.tuned.\"{name}\".candidates: must be at least [semantic] top_k"
                ));
            }
        }
        if config
            .embedder
            .timeout_seconds
            .is_some_and(|t| !(t.is_finite() && t > 0.0))
        {
            return Err("embedder.timeout_seconds: must be more than 0".into());
        }
        if config.embedder.batch_size == Some(0) {
            return Err("embedder.batch_size: must be at least 1".into());
        }
        if config.semantic.concurrency == 0 {
            return Err("semantic.concurrency: must be at least 1".into());
        }
        let semantic = &config.semantic;
        if !SEARCH_MODES.contains(&semantic.search.as_str()) {
            return Err(format!(
                "semantic.search: unknown value `{}` (expected auto, exact or index)",
                semantic.search
            ));
        }
        if Selection::parse(&semantic.selection).is_none() {
            let near =
                assay_core::text::closest(&semantic.selection, Selection::NAMES.iter().copied())
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default();
            return Err(format!(
                "semantic.selection: unknown value `{}`{near}; expected `pipeline` or `top_k`",
                semantic.selection
            ));
        }
        if !(1..=MAX_EF_SEARCH).contains(&semantic.ef_search) {
            return Err(format!(
                "semantic.ef_search: must be between 1 and {MAX_EF_SEARCH} (pgvector's range), found {}",
                semantic.ef_search
            ));
        }
        if semantic.search == "index" {
            if r.mode != "dense" {
                return Err(format!(
                    "semantic.search: `index` needs [retrieval] mode = \"dense\" (found `{}`): hybrid ranking adds a lexical score to every entity, which an index of embeddings cannot rank by",
                    r.mode
                ));
            }
            if r.views != "single" {
                return Err(format!(
                    "semantic.search: `index` needs [retrieval] views = \"single\" (found `{}`): the index holds one embedding per entity",
                    r.views
                ));
            }
        }
        let p = &config.providers;
        if !CACHE_MODES.contains(&p.cache.as_str()) {
            return Err(format!(
                "providers.cache: unknown mode `{}` (expected read-write, off or replay)",
                p.cache
            ));
        }
        if !(p.timeout_seconds.is_finite() && p.timeout_seconds > 0.0) {
            return Err("providers.timeout_seconds: must be more than 0".into());
        }
        if !(p.max_wait_seconds.is_finite() && p.max_wait_seconds > 0.0) {
            return Err("providers.max_wait_seconds: must be more than 0".into());
        }
        if !(p.retry_backoff_seconds.is_finite()
            && p.retry_backoff_seconds >= 0.0
            && p.max_backoff_seconds.is_finite()
            && p.max_backoff_seconds >= p.retry_backoff_seconds)
        {
            return Err("providers.retry_backoff_seconds and max_backoff_seconds: must be 0 or more, the maximum at least the first".into());
        }
        if !(p.batch_poll_seconds.is_finite() && p.batch_poll_seconds > 0.0) {
            return Err("providers.batch_poll_seconds: must be more than 0".into());
        }
        if !(p.batch_window_seconds.is_finite() && p.batch_window_seconds >= 0.0) {
            return Err("providers.batch_window_seconds: must be 0 or more".into());
        }
        if p.batch_max_requests == 0 || p.batch_max_requests > 50_000 {
            return Err("providers.batch_max_requests: must be between 1 and 50000".into());
        }
        if p.max_concurrency == 0 || config.calibration.concurrency == 0 {
            return Err(
                "providers.max_concurrency and calibration.concurrency: must be at least 1".into(),
            );
        }
        let generate = &config.generate;
        if generate.per_entity == 0 || generate.per_entity > 100 {
            return Err("generate.per_entity: must be between 1 and 100".into());
        }
        if generate.concurrency == 0 {
            return Err("generate.concurrency: must be at least 1".into());
        }
        if !(generate.duplicate_threshold.is_finite()
            && generate.duplicate_threshold > 0.0
            && generate.duplicate_threshold <= 1.0)
        {
            return Err("generate.duplicate_threshold: must be more than 0 and at most 1".into());
        }
        if !(generate.timeout_seconds.is_finite() && generate.timeout_seconds > 0.0) {
            return Err("generate.timeout_seconds: must be more than 0".into());
        }
        if generate.language.trim().is_empty() {
            return Err("generate.language: must not be empty".into());
        }
        if generate.model.as_deref().is_some_and(|m| !m.contains('/')) {
            return Err("generate.model: name the model as vendor/model".into());
        }
        if config.simulate.concurrency == 0 {
            return Err("simulate.concurrency: must be at least 1".into());
        }
        if config.simulate.runs_in_flight == Some(0) {
            return Err("simulate.runs_in_flight: must be at least 1".into());
        }
        for (model, p) in &config.providers.prices {
            let p = p.price();
            if !(p.input.is_finite() && p.input >= 0.0 && p.output.is_finite() && p.output >= 0.0) {
                return Err(format!(
                    "providers.prices.\"{model}\": a price is USD per million tokens, 0 or more"
                ));
            }
            if !model.contains('/') {
                return Err(format!(
                    "providers.prices.\"{model}\": name the model as vendor/model, as the settings that use it do"
                ));
            }
        }
        for (name, models) in &config.providers.shared_limits {
            if models.len() < 2 {
                return Err(format!(
                    "providers.shared_limits.{name}: a shared limit needs two models or more"
                ));
            }
            if let Some(bad) = models.iter().find(|m| !m.contains('/')) {
                return Err(format!(
                    "providers.shared_limits.{name}: `{bad}`: name the model as vendor/model, as the settings that use it do"
                ));
            }
        }
        assay_providers::RateLimits::with_shared(&config.providers.shared_limits)
            .map_err(|e| format!("providers.shared_limits: {e}"))?;
        let o = &config.optimize;
        match o.target.as_str() {
            "command" if o.command.is_empty() => {
                return Err(
                    "optimize.command: `target = \"command\"` needs the program to run".into(),
                );
            }
            "worker" if o.command.is_empty() => {
                return Err(
                    "optimize.command: `target = \"worker\"` needs the program to start".into(),
                );
            }
            "http" if o.url.is_none() => {
                return Err("optimize.url: `target = \"http\"` needs the URL".into());
            }
            "chain" | "command" | "http" | "worker" => {}
            other => match assay_providers::target::FunctionTarget::parse(other) {
                Some(Ok(_)) => {}
                Some(Err(problem)) => return Err(format!("optimize.target: {problem}")),
                None => {
                    return Err(format!(
                        "optimize.target: unknown target `{other}` (expected chain, command, http, worker, python:package.module:function or node:./module.js#export)"
                    ));
                }
            },
        }
        if o.workers == 0 || o.workers > 256 {
            return Err(format!(
                "optimize.workers: must be from 1 to 256, found {}",
                o.workers
            ));
        }
        if !(o.timeout_seconds.is_finite() && o.timeout_seconds > 0.0) {
            return Err("optimize.timeout_seconds: must be more than 0".into());
        }
        if !(0.0..=1.0).contains(&o.threshold) {
            return Err("optimize.threshold: must be between 0 and 1".into());
        }
        if o.max_concurrency == 0 || o.agent_max_tokens == 0 {
            return Err(
                "optimize.max_concurrency and optimize.agent_max_tokens: must be at least 1".into(),
            );
        }
        if !(o.racing_fraction > 0.0 && o.racing_fraction < 1.0) {
            return Err("optimize.racing_fraction: must be between 0 and 1 (exclusive)".into());
        }
        if !(o.heartbeat_seconds.is_finite() && o.heartbeat_seconds > 0.0) {
            return Err("optimize.heartbeat_seconds: must be a positive number of seconds".into());
        }
        if let Some(url) = &o.storage {
            let lower = url.trim().to_ascii_lowercase();
            if !(lower.starts_with("postgres://") || lower.starts_with("postgresql://")) {
                return Err(format!(
                    "optimize.storage: `{url}` is not a PostgreSQL URL (postgresql://user@host/db); leave it out for the local journal"
                ));
            }
        }
        if o.directions.is_empty() {
            return Err("optimize.directions: name at least one objective".into());
        }
        if !["models", "call", "off"].contains(&o.preflight.as_str()) {
            return Err(format!(
                "optimize.preflight: unknown check `{}` (expected models, call or off)",
                o.preflight
            ));
        }
        let p = &o.propose;
        if p.proposals_per_round == 0 || p.minibatch == 0 || p.max_tokens == 0 {
            return Err(
                "optimize.propose.proposals_per_round, minibatch and max_tokens: must be at least 1"
                    .into(),
            );
        }
        if !["blame", "all"].contains(&p.selector.as_str()) {
            return Err(format!(
                "optimize.propose.selector: unknown selector `{}` (expected blame or all)",
                p.selector
            ));
        }
        if p.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err(
                "optimize.propose.model: must not be empty (leave it out for the grader's model)"
                    .into(),
            );
        }
        if let Some(score) = config.verdict.pass_score.filter(|s| *s > 100) {
            return Err(format!(
                "verdict.pass_score: must be between 0 and 100, found {score}"
            ));
        }
        if config.store.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Err(
                "store: must not be empty (leave it out for the embedded .assay/kb.db)".into(),
            );
        }
        // The table alone (no variables) must make sense: a wrong protocol or endpoint is
        // named here, before anything runs.
        assay_telemetry::ExportConfig::resolve(&config.telemetry, &|_| None)
            .map_err(|e| e.to_string().replace("assay.toml: ", ""))?;
        let state = config.state.schema()?;
        config.redteam.validate()?;
        config.redteam.validate_state(&state)?;
        Ok(ProjectSettings {
            root: root.to_owned(),
            store: config.store,
            kb_dir: root.join(&config.paths.kb),
            banks_dir: root.join(&config.paths.test_banks),
            results_dir: root.join(&config.paths.results),
            weights,
            min_health,
            min_score: config.gate.min_score,
            semantic: config.semantic,
            verdict: assay_core::verdict::VerdictRules {
                pass_score: config.verdict.pass_score,
            },
            embedder: config.embedder,
            retrieval: config.retrieval,
            providers: config.providers,
            calibration: config.calibration,
            simulate: config.simulate,
            generate: config.generate,
            answer: config.answer,
            optimize: config.optimize,
            telemetry: config.telemetry,
            regression: RegressionRules {
                no_new_hard_fails: config.gate.no_new_hard_fails,
                no_new_critical: config.gate.no_new_critical,
                max_score_drop: config.gate.max_score_drop,
                max_metric_drop: config.gate.max_metric_drop,
            },
            patterns: config.patterns,
            redteam: config.redteam,
            state,
            recorded: std::collections::BTreeMap::new(),
        })
    }
}

/// The environment variable that overrides `store` in `assay.toml`.
pub const ASSAY_STORE: &str = "ASSAY_STORE";

/// The store a project is configured with, and where the choice came from: `ASSAY_STORE`,
/// else `store` in `assay.toml`, else the embedded `.assay/kb.db` (`None`).
pub fn store_setting(
    settings: &ProjectSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Option<String>, &'static str) {
    match env(ASSAY_STORE).filter(|s| !s.trim().is_empty()) {
        Some(store) => (Some(store), ASSAY_STORE),
        None => match &settings.store {
            Some(store) => (Some(store.clone()), "assay.toml"),
            None => (None, "default"),
        },
    }
}

/// Whether a `store` setting names a database (`postgres://…`): a store that is its own
/// source of truth, whose `kb/` files are imported only when asked.
pub fn is_database(spec: &str) -> bool {
    let lower = spec.trim().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// How the semantic bank selects what it scores (`[semantic] selection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Selection {
    /// The `top_k` best of the `candidates` nearest entities, by the reranker or by similarity
    /// plus priority, whatever they score (the original harness's runner; the default of a
    /// project that does not say).
    #[default]
    TopK,
    /// What the retrieval pipeline loads for the message, exactly as `assay retrieve` shows it:
    /// its similarity threshold, its own `top_k`, pattern rules, dedupe and token budget (the
    /// default of a project `assay init` makes).
    Pipeline,
}

impl Selection {
    /// The values `[semantic] selection` accepts.
    pub const NAMES: [&'static str; 2] = ["pipeline", "top_k"];

    /// The setting's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Selection::TopK => "top_k",
            Selection::Pipeline => "pipeline",
        }
    }

    /// Parses the setting's value.
    pub fn parse(value: &str) -> Option<Selection> {
        match value {
            "top_k" => Some(Selection::TopK),
            "pipeline" => Some(Selection::Pipeline),
            _ => None,
        }
    }
}

/// The line (1-based) where a TOML file writes `key = …` (bare or quoted), if it does.
fn toml_key_line(text: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    text.lines()
        .position(|line| {
            let line = line.trim_start();
            [key, quoted.as_str()].iter().any(|k| {
                line.strip_prefix(k)
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            })
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests;
