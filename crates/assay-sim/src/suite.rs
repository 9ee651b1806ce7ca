//! The files under `sim/`: the suite, the scenarios and the fixture, read and validated before
//! anything runs (docs/simulate.md is the user's reference).
//!
//! Syntax and type errors come from [`assay_kb::datafile`] with file, line, column and field;
//! rule errors (an unknown criterion in `evaluation_weights`, a duplicate id, weights that are
//! all zero) name the file, the field and the line where the field is written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use assay_core::simulation::{Scale, SimGate};
use assay_kb::datafile::{self, DataError, Format};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The suite file's name under `sim/`.
pub const SUITE_FILE: &str = "suite.yaml";
/// The default stop token the simulated user ends a conversation with.
pub const DEFAULT_STOP_TOKEN: &str = "[[DONE]]";
/// The default number of tool-call rounds in one assistant turn.
pub const DEFAULT_MAX_TOOL_ROUNDS: u32 = 8;
/// The largest `max_turns` a scenario may ask for.
pub const MAX_TURNS_LIMIT: u32 = 50;

/// The JSON Schema of `sim/suite.yaml` (`assay schema suite`).
pub fn suite_schema() -> schemars::Schema {
    schemars::schema_for!(SuiteConfig)
}

/// The JSON Schema of a scenario file, `sim/scenarios/*.yaml` (`assay schema scenario`).
pub fn scenario_schema() -> schemars::Schema {
    schemars::schema_for!(ScenarioConfig)
}

/// `sim/suite.yaml` as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SuiteConfig {
    /// The JSON Schema the file follows, for editors that complete and check it (`assay
    /// schema`); assay itself does not read it.
    #[serde(rename = "$schema", default, skip_serializing)]
    pub schema: Option<String>,
    /// Shown in reports.
    pub name: String,
    /// The system prompt of the model under test.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// A file holding it, relative to `sim/`.
    #[serde(default)]
    pub system_prompt_file: Option<String>,
    /// The fixture file, relative to `sim/`.
    #[serde(default)]
    pub fixture: Option<String>,
    /// A scenario run passes when its overall score reaches this (0-10; default 7).
    #[serde(default = "default_threshold")]
    pub pass_threshold: f64,
    /// An optional gate over the whole run.
    #[serde(default)]
    pub gate: Option<SimGate>,
    /// Tool-call rounds allowed in one assistant turn.
    #[serde(default = "default_rounds")]
    pub max_tool_rounds: u32,
    /// The simulated user's stop token.
    #[serde(default = "default_stop_token")]
    pub stop_token: String,
    /// MCP servers whose tools the model under test may call.
    #[serde(default)]
    pub mcp_servers: Vec<ServerConfig>,
    /// Steps before each scenario run.
    #[serde(default)]
    pub setup: Vec<StepConfig>,
    /// Steps after each scenario run.
    #[serde(default)]
    pub teardown: Vec<StepConfig>,
    /// The judge's criteria.
    pub criteria: Vec<CriterionConfig>,
}

fn default_threshold() -> f64 {
    7.0
}
fn default_rounds() -> u32 {
    DEFAULT_MAX_TOOL_ROUNDS
}
fn default_stop_token() -> String {
    DEFAULT_STOP_TOKEN.to_owned()
}

/// One MCP server: a command started per scenario run (stdio) or a URL (streamable HTTP).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `[a-z0-9_-]+`, unique.
    pub name: String,
    /// Program and arguments (placeholders and `${VAR}` expanded).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// Extra environment for the command.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A streamable-HTTP endpoint.
    #[serde(default)]
    pub url: Option<String>,
    /// Seconds a tool call may take (default 30).
    #[serde(default = "default_tool_timeout")]
    pub timeout_secs: f64,
}

fn default_tool_timeout() -> f64 {
    30.0
}

/// A setup or teardown step, or the source of an expected-state check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepConfig {
    /// A program and its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// An MCP tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolStep>,
    /// An MCP resource read (checks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceStep>,
    /// Run before the stdio servers start (commands only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub before_servers: bool,
}

/// `tool: {server, name, arguments}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolStep {
    /// The server's name.
    pub server: String,
    /// The tool's name.
    pub name: String,
    /// Its arguments (an object).
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// `resource: {server, uri}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceStep {
    /// The server's name.
    pub server: String,
    /// The resource's URI.
    pub uri: String,
}

/// One judging criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CriterionConfig {
    /// `[a-z0-9_]+`, unique.
    pub id: String,
    /// Shown in reports (default: the id).
    #[serde(default)]
    pub name: Option<String>,
    /// `0-10` (default) or `pass_fail`.
    #[serde(default = "default_scale")]
    pub scale: Scale,
    /// The default weight.
    pub weight: f64,
    /// What good and bad look like, for the judge.
    pub rubric: String,
}

fn default_scale() -> Scale {
    Scale::ZeroToTen
}

impl CriterionConfig {
    /// The name to show.
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// One scenario file as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioConfig {
    /// The JSON Schema the file follows, for editors that complete and check it (`assay
    /// schema`); assay itself does not read it.
    #[serde(rename = "$schema", default, skip_serializing)]
    pub schema: Option<String>,
    /// `[a-z0-9_-]+`, unique.
    pub id: String,
    /// Shown in reports.
    pub name: String,
    /// What the scenario tests.
    pub description: String,
    /// The simulated user's instructions.
    pub persona_prompt: String,
    /// The simulated user's first message.
    pub initial_message: String,
    /// User turns at most, the initial message included.
    pub max_turns: u32,
    /// Weights that replace the suite's defaults for some criteria.
    #[serde(default)]
    pub evaluation_weights: BTreeMap<String, f64>,
    /// Objective checks after the conversation.
    #[serde(default)]
    pub expected_state: Vec<CheckConfig>,
    /// Objective checks of the assistant's tool calls in the transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<assay_core::trajectory::TrajectoryConfig>,
    /// Deterministic assertions on the assistant's final reply (docs/assertions.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<assay_core::assertion::AssertionConfig>>")]
    pub assert: Option<Value>,
    /// The weighted share (0–1) of `assert` that must pass (default: all, each assertion
    /// deciding the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assert_threshold: Option<f64>,
}

/// One expected-state check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckConfig {
    /// Shown in reports.
    pub name: String,
    /// A tool call whose text result is JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolStep>,
    /// A resource whose text is JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceStep>,
    /// A command whose stdout is JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// What must hold of that JSON.
    pub expect: Vec<Expectation>,
    /// Reported, but does not decide the verdict (default false: a failed check fails the run,
    /// whatever the judge scored).
    #[serde(default)]
    pub advisory: bool,
}

/// One assertion on a JSON value at a dot path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// Dot path (`a.b.0.c`; numbers index arrays); empty for the whole value.
    #[serde(default)]
    pub path: String,
    /// The value equals this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    /// A string contains this text (case-insensitive), or an array holds an element equal to
    /// it (or, for a string, an element containing it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<Value>,
    /// An array, object or string has this many items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    /// A number is at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// A number is at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// The path exists (true) or not (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
}

/// A server, resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerKind {
    /// Started per scenario run.
    Stdio {
        /// Program and arguments (placeholders not yet expanded).
        command: Vec<String>,
        /// Extra environment.
        env: BTreeMap<String, String>,
    },
    /// Already running.
    Http {
        /// The endpoint (placeholders not yet expanded).
        url: String,
    },
}

/// A server of the suite.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    /// Its name.
    pub name: String,
    /// How to reach it.
    pub kind: ServerKind,
    /// Seconds per tool call.
    pub timeout_secs: f64,
}

/// A scenario, validated, with its weights resolved.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file it came from.
    pub path: PathBuf,
    /// As written.
    pub config: ScenarioConfig,
    /// Criterion id → weight, normalised to sum 1.
    pub weights: BTreeMap<String, f64>,
    /// `assert` and `assert_threshold`, validated.
    pub assertions: Option<assay_core::assertion::AssertionSet>,
}

/// The whole `sim/` folder, validated.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The project folder.
    pub project: PathBuf,
    /// The `sim/` folder.
    pub sim_dir: PathBuf,
    /// As written.
    pub config: SuiteConfig,
    /// The model under test's system prompt.
    pub system_prompt: String,
    /// The fixture file and its contents as JSON.
    pub fixture: Option<(PathBuf, Value)>,
    /// The servers.
    pub servers: Vec<Server>,
    /// The scenarios, sorted by id.
    pub scenarios: Vec<Scenario>,
    /// Warnings found while loading (unknown fields, weights that do not sum to 1).
    pub warnings: Vec<String>,
}

/// Why `sim/` could not be loaded: always bad input (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// A file is missing, unreadable or invalid.
    #[error(transparent)]
    Data(#[from] DataError),
}

impl Suite {
    /// The criteria in suite order.
    pub fn criteria(&self) -> &[CriterionConfig] {
        &self.config.criteria
    }

    /// The scenario with this id.
    pub fn scenario(&self, id: &str) -> Option<&Scenario> {
        self.scenarios.iter().find(|s| s.config.id == id)
    }

    /// A digest (16 hex digits of SHA-256) of the suite as read: `suite.yaml`, the system
    /// prompt and every scenario, as parsed (comments and layout do not count; `${VAR}`
    /// placeholders count as written, not as expanded, so machines with other paths agree).
    /// Shards of one simulation must share it.
    pub fn version(&self) -> String {
        // The suite's config as parsed (its `Debug` form: the config is read, never written,
        // so it has no serialised form of its own), the prompt as read, the scenarios as JSON.
        let mut parts = vec![format!("{:?}", self.config), self.system_prompt.clone()];
        parts.extend(
            self.scenarios
                .iter()
                .map(|s| serde_json::to_string(&s.config).unwrap_or_default()),
        );
        digest(&parts)
    }

    /// A digest (16 hex digits of SHA-256) of the fixture's contents, when the suite has one.
    pub fn fixture_version(&self) -> Option<String> {
        self.fixture
            .as_ref()
            .map(|(_, value)| digest(&[value.to_string()]))
    }
}

/// 16 hex digits of the SHA-256 of `parts`, each length-prefixed (so no two lists of parts
/// share a digest by moving text from one part to the next).
pub(crate) fn digest(parts: &[String]) -> String {
    use sha2::{Digest as _, Sha256};
    let mut h = Sha256::new();
    for part in parts {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize()
        .iter()
        .take(8)
        .fold(String::new(), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// The 1-based line of the first line of `text` that writes `key` as a mapping key (YAML
/// `key:` or JSON `"key":`), if any.
pub(crate) fn line_of(text: &str, key: &str) -> Option<usize> {
    assay_kb::datafile::key_line(text, key, 0)
}

fn rule_error(path: &Path, text: &str, key: &str, message: String) -> DataError {
    DataError {
        path: path.to_owned(),
        line: line_of(text, key),
        column: None,
        message,
    }
}

fn valid_id(id: &str, underscore_only: bool) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.chars().all(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || c == '_'
                || (!underscore_only && c == '-')
        })
}

fn read_text(path: &Path) -> Result<String, DataError> {
    std::fs::read_to_string(path).map_err(|e| {
        DataError::new(
            path,
            if e.kind() == std::io::ErrorKind::NotFound {
                "file not found".to_owned()
            } else {
                format!("cannot read file: {e}")
            },
        )
    })
}

fn parse_file<T: serde::de::DeserializeOwned>(
    path: &Path,
    warnings: &mut Vec<String>,
) -> Result<(T, String), DataError> {
    let format = Format::from_path(path).ok_or_else(|| {
        DataError::new(
            path,
            "unsupported file type (expected .yaml, .yml or .json)",
        )
    })?;
    let text = read_text(path)?;
    let value = datafile::parse(path, &text, format, &mut |w| warnings.push(w))?;
    Ok((value, text))
}

/// Checks a step's shape: exactly one of `command`/`tool` (and `resource` only where allowed).
fn check_step(
    path: &Path,
    text: &str,
    field: &str,
    step: &StepConfig,
    servers: &[Server],
) -> Result<(), DataError> {
    let kinds = usize::from(step.command.is_some())
        + usize::from(step.tool.is_some())
        + usize::from(step.resource.is_some());
    if kinds != 1 || step.resource.is_some() {
        return Err(rule_error(
            path,
            text,
            field,
            format!("{field}: each step needs exactly one of `command` or `tool`"),
        ));
    }
    if let Some(command) = &step.command
        && command.first().is_none_or(|p| p.trim().is_empty())
    {
        return Err(rule_error(
            path,
            text,
            field,
            format!("{field}: `command` needs a program"),
        ));
    }
    if let Some(tool) = &step.tool {
        if step.before_servers {
            return Err(rule_error(
                path,
                text,
                "before_servers",
                format!("{field}: a `tool` step cannot run `before_servers`"),
            ));
        }
        check_server_ref(path, text, field, &tool.server, servers)?;
        if !tool.arguments.is_object() {
            return Err(rule_error(
                path,
                text,
                "arguments",
                format!(
                    "{field}: tool `{}`: `arguments` must be a mapping",
                    tool.name
                ),
            ));
        }
    }
    Ok(())
}

fn check_server_ref(
    path: &Path,
    text: &str,
    field: &str,
    server: &str,
    servers: &[Server],
) -> Result<(), DataError> {
    if servers.iter().any(|s| s.name == server) {
        Ok(())
    } else {
        let known: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        Err(rule_error(
            path,
            text,
            "server",
            format!(
                "{field}: unknown server `{server}` (mcp_servers: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        ))
    }
}

fn check_weight(path: &Path, text: &str, key: &str, weight: f64) -> Result<(), DataError> {
    if weight.is_finite() && weight >= 0.0 {
        Ok(())
    } else {
        Err(rule_error(
            path,
            text,
            key,
            format!("weight of `{key}` must be a number >= 0, got {weight}"),
        ))
    }
}

/// Loads and validates `<project>/sim/`.
pub fn load(project: &Path) -> Result<Suite, SuiteError> {
    let sim_dir = project.join("sim");
    let suite_path = ["suite.yaml", "suite.yml", "suite.json"]
        .iter()
        .map(|n| sim_dir.join(n))
        .find(|p| p.exists())
        .unwrap_or_else(|| sim_dir.join(SUITE_FILE));
    let mut warnings = Vec::new();
    let (config, text): (SuiteConfig, String) = parse_file(&suite_path, &mut warnings)?;
    let err = |key: &str, message: String| rule_error(&suite_path, &text, key, message);

    if config.name.trim().is_empty() {
        return Err(err("name", "`name` must not be empty".into()).into());
    }
    let system_prompt = match (&config.system_prompt, &config.system_prompt_file) {
        (Some(p), None) => p.clone(),
        (None, Some(file)) => {
            let path = datafile::file_inside(project, &sim_dir, file, "the project's folder")
                .map_err(|e| err("system_prompt_file", format!("system_prompt_file: {e}")))?;
            read_text(&path).map_err(|e| {
                err(
                    "system_prompt_file",
                    format!("system_prompt_file `{file}`: {}", e.message),
                )
            })?
        }
        _ => {
            return Err(err(
                "system_prompt",
                "give exactly one of `system_prompt` or `system_prompt_file`".into(),
            )
            .into());
        }
    };
    if system_prompt.trim().is_empty() {
        return Err(err("system_prompt", "the system prompt is empty".into()).into());
    }
    if !(0.0..=10.0).contains(&config.pass_threshold) {
        return Err(err(
            "pass_threshold",
            format!(
                "`pass_threshold` must be between 0 and 10, got {}",
                config.pass_threshold
            ),
        )
        .into());
    }
    if let Some(gate) = &config.gate {
        if gate
            .min_mean_overall
            .is_some_and(|v| !(0.0..=10.0).contains(&v))
        {
            return Err(err(
                "min_mean_overall",
                "`gate.min_mean_overall` must be between 0 and 10".into(),
            )
            .into());
        }
        if gate
            .min_pass_rate
            .is_some_and(|v| !(0.0..=1.0).contains(&v))
        {
            return Err(err(
                "min_pass_rate",
                "`gate.min_pass_rate` must be between 0 and 1".into(),
            )
            .into());
        }
    }
    if config.max_tool_rounds == 0 || config.max_tool_rounds > 64 {
        return Err(err(
            "max_tool_rounds",
            "`max_tool_rounds` must be between 1 and 64".into(),
        )
        .into());
    }
    if config.stop_token.trim().is_empty() {
        return Err(err("stop_token", "`stop_token` must not be empty".into()).into());
    }

    let fixture = match &config.fixture {
        None => None,
        Some(file) => {
            let path = datafile::file_inside(project, &sim_dir, file, "the project's folder")
                .map_err(|e| err("fixture", format!("fixture: {e}")))?;
            let (value, _): (Value, String) = parse_file(&path, &mut warnings).map_err(|e| {
                if e.line.is_none() {
                    err("fixture", format!("fixture `{file}`: {}", e.message))
                } else {
                    e
                }
            })?;
            let path = std::path::absolute(&path).unwrap_or(path);
            Some((path, value))
        }
    };

    // Servers.
    let mut servers: Vec<Server> = Vec::new();
    for s in &config.mcp_servers {
        if !valid_id(&s.name, false) {
            return Err(err(
                "name",
                format!("server name `{}` must be [a-z0-9_-]+", s.name),
            )
            .into());
        }
        if servers.iter().any(|o| o.name == s.name) {
            return Err(err("name", format!("server `{}` is defined twice", s.name)).into());
        }
        if !(s.timeout_secs.is_finite() && s.timeout_secs > 0.0) {
            return Err(err(
                "timeout_secs",
                format!("server `{}`: `timeout_secs` must be > 0", s.name),
            )
            .into());
        }
        let kind = match (&s.command, &s.url) {
            (Some(command), None) => {
                if command.first().is_none_or(|p| p.trim().is_empty()) {
                    return Err(err(
                        "command",
                        format!("server `{}`: `command` needs a program", s.name),
                    )
                    .into());
                }
                ServerKind::Stdio {
                    command: command.clone(),
                    env: s.env.clone(),
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(err(
                        "url",
                        format!(
                            "server `{}`: `url` must start with http:// or https://",
                            s.name
                        ),
                    )
                    .into());
                }
                ServerKind::Http { url: url.clone() }
            }
            _ => {
                return Err(err(
                    "mcp_servers",
                    format!(
                        "server `{}`: give exactly one of `command` or `url`",
                        s.name
                    ),
                )
                .into());
            }
        };
        servers.push(Server {
            name: s.name.clone(),
            kind,
            timeout_secs: s.timeout_secs,
        });
    }
    for (field, steps) in [("setup", &config.setup), ("teardown", &config.teardown)] {
        for step in steps {
            check_step(&suite_path, &text, field, step, &servers)?;
        }
    }

    // Criteria.
    if config.criteria.is_empty() {
        return Err(err(
            "criteria",
            "`criteria` must list at least one criterion".into(),
        )
        .into());
    }
    let mut ids = BTreeSet::new();
    for c in &config.criteria {
        if !valid_id(&c.id, true) {
            return Err(err("id", format!("criterion id `{}` must be [a-z0-9_]+", c.id)).into());
        }
        if !ids.insert(c.id.as_str()) {
            return Err(err("id", format!("criterion `{}` is defined twice", c.id)).into());
        }
        check_weight(&suite_path, &text, &c.id, c.weight)?;
        if c.rubric.trim().is_empty() {
            return Err(err(
                "rubric",
                format!("criterion `{}` has an empty rubric", c.id),
            )
            .into());
        }
    }
    let default_sum: f64 = config.criteria.iter().map(|c| c.weight).sum();
    if !default_sum.is_finite() {
        return Err(err(
            "weight",
            "the criteria's weights add up to more than a number can hold; use weights of ordinary size (they are normalised to sum 1)".into(),
        )
        .into());
    }
    if default_sum <= 0.0 {
        return Err(err("weight", "the criteria's weights are all zero".into()).into());
    }
    if (default_sum - 1.0).abs() > 1e-3 {
        warnings.push(format!(
            "{}: the criteria's weights sum to {default_sum:.3}, not 1; they are normalised",
            suite_path.display()
        ));
    }

    // Scenarios.
    let scenario_dir = sim_dir.join("scenarios");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&scenario_dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| Format::from_path(p).is_some())
            .collect(),
        Err(e) => {
            return Err(DataError::new(
                &scenario_dir,
                format!("cannot read the scenario folder: {e}"),
            )
            .into());
        }
    };
    files.sort();
    if files.is_empty() {
        return Err(DataError::new(&scenario_dir, "no scenario files (.yaml, .yml, .json)").into());
    }
    let mut scenarios: Vec<Scenario> = Vec::new();
    for path in files {
        let (scenario, stext): (ScenarioConfig, String) = parse_file(&path, &mut warnings)?;
        let serr = |key: &str, message: String| rule_error(&path, &stext, key, message);
        if !valid_id(&scenario.id, false) {
            return Err(serr(
                "id",
                format!("scenario id `{}` must be [a-z0-9_-]+", scenario.id),
            )
            .into());
        }
        if let Some(other) = scenarios.iter().find(|s| s.config.id == scenario.id) {
            return Err(serr(
                "id",
                format!(
                    "scenario id `{}` is also used by {}",
                    scenario.id,
                    other.path.display()
                ),
            )
            .into());
        }
        for (key, value) in [
            ("name", &scenario.name),
            ("persona_prompt", &scenario.persona_prompt),
            ("initial_message", &scenario.initial_message),
        ] {
            if value.trim().is_empty() {
                return Err(serr(key, format!("`{key}` must not be empty")).into());
            }
        }
        if scenario.max_turns == 0 || scenario.max_turns > MAX_TURNS_LIMIT {
            return Err(serr(
                "max_turns",
                format!(
                    "`max_turns` must be between 1 and {MAX_TURNS_LIMIT}, got {}",
                    scenario.max_turns
                ),
            )
            .into());
        }
        let mut weights: BTreeMap<String, f64> = config
            .criteria
            .iter()
            .map(|c| (c.id.clone(), c.weight))
            .collect();
        for (key, weight) in &scenario.evaluation_weights {
            if !weights.contains_key(key) {
                return Err(serr(
                    key,
                    format!(
                        "evaluation_weights: unknown criterion `{key}` (the suite's criteria: {})",
                        config
                            .criteria
                            .iter()
                            .map(|c| c.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .into());
            }
            check_weight(&path, &stext, key, *weight)?;
            weights.insert(key.clone(), *weight);
        }
        let sum: f64 = weights.values().sum();
        if !sum.is_finite() {
            return Err(serr(
                "evaluation_weights",
                "evaluation_weights: the weights add up to more than a number can hold; use weights of ordinary size (they are normalised to sum 1)".into(),
            )
            .into());
        }
        if sum <= 0.0 {
            return Err(serr(
                "evaluation_weights",
                "evaluation_weights: all weights are zero".into(),
            )
            .into());
        }
        for w in weights.values_mut() {
            *w /= sum;
        }
        for check in &scenario.expected_state {
            let sources = usize::from(check.tool.is_some())
                + usize::from(check.resource.is_some())
                + usize::from(check.command.is_some());
            if sources != 1 {
                return Err(serr(
                    "expected_state",
                    format!(
                        "expected_state `{}`: give exactly one of `tool`, `resource` or `command`",
                        check.name
                    ),
                )
                .into());
            }
            if let Some(server) = check
                .tool
                .as_ref()
                .map(|t| &t.server)
                .or(check.resource.as_ref().map(|r| &r.server))
            {
                check_server_ref(&path, &stext, "expected_state", server, &servers)?;
            }
            if check.expect.is_empty() {
                return Err(serr(
                    "expect",
                    format!("expected_state `{}`: `expect` is empty", check.name),
                )
                .into());
            }
            for e in &check.expect {
                let ops = usize::from(e.equals.is_some())
                    + usize::from(e.contains.is_some())
                    + usize::from(e.length.is_some())
                    + usize::from(e.min.is_some())
                    + usize::from(e.max.is_some())
                    + usize::from(e.exists.is_some());
                if ops != 1 {
                    return Err(serr(
                        "expect",
                        format!(
                            "expected_state `{}`: each expectation needs exactly one of equals, contains, length, min, max, exists (path `{}`)",
                            check.name, e.path
                        ),
                    )
                    .into());
                }
            }
        }
        if let Some(trajectory) = &scenario.trajectory
            && let Err(e) = trajectory.validate()
        {
            return Err(serr("trajectory", e.to_string()).into());
        }
        let assertions = match &scenario.assert {
            None if scenario.assert_threshold.is_some() => {
                return Err(serr(
                    "assert_threshold",
                    "assert_threshold: given without `assert`".to_owned(),
                )
                .into());
            }
            None => None,
            Some(list) => Some(
                assay_core::assertion::AssertionSet::parse(
                    list,
                    scenario.assert_threshold,
                    "assert",
                )
                .map_err(|e| serr("assert", e.to_string()))?,
            ),
        };
        scenarios.push(Scenario {
            path,
            config: scenario,
            weights,
            assertions,
        });
    }
    scenarios.sort_by(|a, b| a.config.id.cmp(&b.config.id));
    Ok(Suite {
        project: project.to_owned(),
        sim_dir,
        config,
        system_prompt,
        fixture,
        servers,
        scenarios,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_of_finds_yaml_and_json_keys() {
        let text = "name: x\ncriteria:\n  - id: a\n    weight: 1\n";
        assert_eq!(line_of(text, "criteria"), Some(2));
        assert_eq!(line_of(text, "id"), Some(3));
        assert_eq!(line_of("{\n  \"max_turns\": 0\n}", "max_turns"), Some(2));
        assert_eq!(line_of(text, "nothing"), None);
    }

    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }

    /// The versions shards compare: the same files anywhere give the same version; a comment
    /// changes nothing; a scenario's or the fixture's content changes its version.
    #[test]
    fn the_suite_and_fixture_versions_follow_content_not_place() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scout-quest/sim");
        let project = |edit: &dyn Fn(&Path)| {
            let dir = tempfile::tempdir().unwrap();
            copy(&example, &dir.path().join("sim"));
            edit(&dir.path().join("sim"));
            let suite = load(dir.path()).unwrap();
            (suite.version(), suite.fixture_version().unwrap())
        };
        let append = |file: &str, text: &str| {
            let text = text.to_owned();
            let file = file.to_owned();
            move |sim: &Path| {
                let path = sim.join(&file);
                let old = std::fs::read_to_string(&path).unwrap();
                std::fs::write(&path, format!("{old}{text}")).unwrap();
            }
        };
        let plain = project(&|_| {});
        assert_eq!(plain, project(&|_| {}));
        assert_eq!(plain, project(&append("suite.yaml", "\n# a comment\n")));
        let scenario = project(&|sim| {
            let path = sim.join("scenarios/off_topic.yaml");
            let old = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, old.replacen("description: ", "description: Now ", 1)).unwrap();
        });
        assert_ne!(scenario.0, plain.0);
        assert_eq!(scenario.1, plain.1);
        let fixture = project(&|sim| {
            let path = sim.join("fixtures/test-scout.yaml");
            let old = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, old.replacen("Will", "Wilma", 1)).unwrap();
        });
        assert_eq!(fixture.0, plain.0);
        assert_ne!(fixture.1, plain.1);
    }

    #[test]
    fn ids() {
        assert!(valid_id("daily_chore", false));
        assert!(valid_id("daily-chore", false));
        assert!(!valid_id("daily-chore", true));
        assert!(!valid_id("Daily", false));
        assert!(!valid_id("", false));
    }
}
