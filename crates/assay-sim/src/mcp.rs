//! The MCP side: servers started (stdio) or reached (streamable HTTP) for a scenario run through
//! `rmcp`'s client, their tools offered to the model under test, calls executed and their
//! results fed back, resources read for expected-state checks; and the placeholders and
//! commands that setup, teardown and checks use.
//!
//! A tool that answers with `isError` is a normal result (the model sees the error as the tool's
//! result, as MCP clients do). A server that dies, cannot be reached or does not answer within
//! its `timeout_secs` is an [`McpError`]: the scenario run becomes an error, never a score.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use assay_providers::ToolSpec;
use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolRequestParams, ContentBlock, ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Map, Value};

use crate::suite::{Server, ServerKind};

/// How long a server may take to start and answer `initialize`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// An MCP server could not be started, reached, or did not answer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("MCP server `{server}`: {message}")]
pub struct McpError {
    /// The server's name.
    pub server: String,
    /// What went wrong, with a hint where one helps.
    pub message: String,
}

/// The values placeholders stand for in one scenario run.
#[derive(Debug, Clone)]
pub struct Vars {
    /// `{workdir}`: the run's scratch folder.
    pub workdir: PathBuf,
    /// `{sim}`
    pub sim: PathBuf,
    /// `{project}`
    pub project: PathBuf,
    /// `{fixture}` (empty when the suite has none).
    pub fixture: Option<PathBuf>,
    /// `{scenario}`
    pub scenario: String,
}

impl Vars {
    /// `text` with `{workdir}`, `{sim}`, `{project}`, `{fixture}`, `{scenario}` and `${VAR}` /
    /// `${VAR:-default}` (from `env`) expanded; other braces are left as they are.
    pub fn expand(&self, text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
        let fixture = self
            .fixture
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(i) = rest.find(['{', '$']) {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            if let Some(inner) = tail.strip_prefix("${")
                && let Some(end) = inner.find('}')
            {
                let spec = &inner[..end];
                let (name, default) = spec
                    .split_once(":-")
                    .map_or((spec, None), |(n, d)| (n, Some(d)));
                let value = env(name).filter(|v| !v.is_empty());
                out.push_str(&value.unwrap_or_else(|| default.unwrap_or("").to_owned()));
                rest = &inner[end + 1..];
                continue;
            }
            let named = [
                ("{workdir}", self.workdir.display().to_string()),
                ("{sim}", self.sim.display().to_string()),
                ("{project}", self.project.display().to_string()),
                ("{fixture}", fixture.clone()),
                ("{scenario}", self.scenario.clone()),
            ];
            if let Some((key, value)) = named.iter().find(|(k, _)| tail.starts_with(k)) {
                out.push_str(value);
                rest = &tail[key.len()..];
            } else {
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
        out.push_str(rest);
        out
    }

    /// Every string inside `value` expanded.
    pub fn expand_json(&self, value: &Value, env: &dyn Fn(&str) -> Option<String>) -> Value {
        match value {
            Value::String(s) => Value::String(self.expand(s, env)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.expand_json(v, env)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.expand_json(v, env)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// Finds a program the way a shell would: a path with a `/` as it is (relative to `cwd`),
/// else the first match on `PATH`.
pub fn resolve_program(program: &str, cwd: &Path, path_var: Option<&str>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = cwd.join(program);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// What a command printed.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

/// Runs `argv` (already expanded) in `cwd` with a time limit. A non-zero exit, a program that
/// cannot be started or a timeout is an error that quotes stderr's end.
pub async fn run_command(
    argv: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<CommandOutput, String> {
    let Some((program, args)) = argv.split_first() else {
        return Err("empty command".to_owned());
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| {
            format!(
                "`{program}` did not finish within {}s",
                timeout.as_secs_f64()
            )
        })?
        .map_err(|e| format!("`{program}` failed: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.success() {
        Ok(CommandOutput { stdout, stderr })
    } else {
        Err(format!(
            "`{}` exited with {}{}",
            argv.join(" "),
            output.status,
            tail_of(&stderr)
        ))
    }
}

/// `: <last lines of text>` when there is any text.
fn tail_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let start = lines.len().saturating_sub(3);
    format!(": {}", lines[start..].join(" | "))
}

/// The outcome of one tool call that the server answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The result as text (text blocks joined; structured content as JSON when there is no
    /// text).
    pub text: String,
    /// The tool reported an error.
    pub is_error: bool,
}

/// A live connection to one server.
pub struct McpConnection {
    name: String,
    client: RunningService<RoleClient, ()>,
    timeout: Duration,
    stderr_log: Option<PathBuf>,
    tools: Vec<rmcp::model::Tool>,
}

impl std::fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConnection")
            .field("name", &self.name)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl McpConnection {
    /// Starts (stdio) or reaches (HTTP) `server`, initialises it and lists its tools. A stdio
    /// server runs in `vars.workdir`, its stderr going to `<workdir>/<name>.stderr.log`.
    pub async fn start(
        server: &Server,
        vars: &Vars,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<McpConnection, McpError> {
        let fail = |message: String| McpError {
            server: server.name.clone(),
            message,
        };
        let (client, stderr_log) = match &server.kind {
            ServerKind::Stdio {
                command,
                env: extra,
            } => {
                let argv: Vec<String> = command.iter().map(|a| vars.expand(a, env)).collect();
                let program = &argv[0];
                let resolved = resolve_program(program, &vars.workdir, env("PATH").as_deref())
                    .ok_or_else(|| {
                        fail(format!(
                            "cannot find the program `{program}` of its command (not a file, and not on PATH); build or install it, or fix `command` in sim/suite.yaml"
                        ))
                    })?;
                let log_path = vars.workdir.join(format!("{}.stderr.log", server.name));
                let log = std::fs::File::create(&log_path)
                    .map_err(|e| fail(format!("cannot create {}: {e}", log_path.display())))?;
                let mut command = tokio::process::Command::new(&resolved);
                command
                    .args(&argv[1..])
                    .current_dir(&vars.workdir)
                    .kill_on_drop(true);
                for (k, v) in extra {
                    command.env(k, vars.expand(v, env));
                }
                let (transport, _) = TokioChildProcess::builder(command)
                    .stderr(log)
                    .spawn()
                    .map_err(|e| fail(format!("cannot start `{}`: {e}", argv.join(" "))))?;
                let client = tokio::time::timeout(START_TIMEOUT, ().serve(transport))
                    .await
                    .map_err(|_| {
                        fail(format!(
                            "`{}` did not answer `initialize` within {}s",
                            argv.join(" "),
                            START_TIMEOUT.as_secs()
                        ))
                    })?
                    .map_err(|e| {
                        fail(format!(
                            "`{}` did not start as an MCP server: {e}{}",
                            argv.join(" "),
                            tail_of(&std::fs::read_to_string(&log_path).unwrap_or_default())
                        ))
                    })?;
                (client, Some(log_path))
            }
            ServerKind::Http { url } => {
                let url = vars.expand(url, env);
                // rmcp builds its own reqwest client, which needs the crypto provider.
                assay_telemetry::tls::ensure_provider();
                let transport = StreamableHttpClientTransport::from_uri(url.clone());
                let client = tokio::time::timeout(START_TIMEOUT, ().serve(transport))
                    .await
                    .map_err(|_| fail(format!("{url} did not answer `initialize` within {}s; is the server running?", START_TIMEOUT.as_secs())))?
                    .map_err(|e| {
                        fail(format!(
                            "cannot reach {url}: {e}; start the server first (it is not started by assay) or fix `url` in sim/suite.yaml"
                        ))
                    })?;
                (client, None)
            }
        };
        let mut connection = McpConnection {
            name: server.name.clone(),
            client,
            timeout: Duration::from_secs_f64(server.timeout_secs),
            stderr_log,
            tools: Vec::new(),
        };
        let tools = tokio::time::timeout(connection.timeout, connection.client.list_all_tools())
            .await
            .map_err(|_| fail("`tools/list` timed out".to_owned()))?
            .map_err(|e| connection.failure(&format!("`tools/list` failed: {e}")))?;
        connection.tools = tools;
        Ok(connection)
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools it offers.
    pub fn tools(&self) -> &[rmcp::model::Tool] {
        &self.tools
    }

    fn failure(&self, message: &str) -> McpError {
        let stderr = self
            .stderr_log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        McpError {
            server: self.name.clone(),
            message: format!("{message}{}", tail_of(&stderr)),
        }
    }

    /// Calls a tool. `Ok` when the server answered (also when the tool reported an error);
    /// `Err` when it did not (dead, timed out, protocol error).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<ToolOutcome, McpError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let result = tokio::time::timeout(self.timeout, self.client.call_tool(params))
            .await
            .map_err(|_| {
                self.failure(&format!(
                    "tool `{name}` did not answer within {}s",
                    self.timeout.as_secs_f64()
                ))
            })?;
        match result {
            Ok(result) => {
                let mut text = blocks_text(&result.content);
                if text.is_empty()
                    && let Some(structured) = &result.structured_content
                {
                    text = structured.to_string();
                }
                Ok(ToolOutcome {
                    text,
                    is_error: result.is_error.unwrap_or(false),
                })
            }
            // The server answered with a JSON-RPC error (unknown tool, invalid arguments):
            // a result the model should see, not a broken server.
            Err(rmcp::ServiceError::McpError(e)) => Ok(ToolOutcome {
                text: e.message.to_string(),
                is_error: true,
            }),
            Err(e) => Err(self.failure(&format!("tool `{name}` failed: {e}"))),
        }
    }

    /// Reads a resource's text.
    pub async fn read_resource(&self, uri: &str) -> Result<String, McpError> {
        let result = tokio::time::timeout(
            self.timeout,
            self.client
                .read_resource(ReadResourceRequestParams::new(uri)),
        )
        .await
        .map_err(|_| self.failure(&format!("reading `{uri}` timed out")))?
        .map_err(|e| self.failure(&format!("reading `{uri}` failed: {e}")))?;
        let mut text = String::new();
        for content in &result.contents {
            if let ResourceContents::TextResourceContents { text: t, .. } = content {
                text.push_str(t);
            }
        }
        Ok(text)
    }

    /// Closes the connection (a stdio server's stdin closes and the child is reaped).
    pub async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.client.cancel()).await;
    }
}

/// The text of a tool result's content blocks, one per line; non-text blocks are named.
fn blocks_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in blocks {
        if !out.is_empty() {
            out.push('\n');
        }
        match block {
            ContentBlock::Text(t) => out.push_str(&t.text),
            ContentBlock::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { text, .. } => out.push_str(text),
                ResourceContents::BlobResourceContents { uri, .. } => {
                    let _ = write!(out, "[binary resource {uri}]");
                }
                _ => out.push_str("[resource]"),
            },
            ContentBlock::Image(_) => out.push_str("[image]"),
            ContentBlock::Audio(_) => out.push_str("[audio]"),
            _ => out.push_str("[content]"),
        }
    }
    out
}

/// A tool as the model under test sees it, and where calls to it go.
#[derive(Debug, Clone)]
pub struct OfferedTool {
    /// What the model sees.
    pub spec: ToolSpec,
    /// Index of the server in the run's connection list.
    pub server: usize,
    /// The tool's name on its server.
    pub name: String,
}

/// The tools of all servers, named for the chat APIs (`[a-zA-Z0-9_-]{1,64}`): a name that two
/// servers share becomes `<server>__<name>` on both.
pub fn offered_tools(connections: &[McpConnection]) -> Vec<OfferedTool> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for c in connections {
        for t in &c.tools {
            *counts.entry(t.name.as_ref()).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    for (index, c) in connections.iter().enumerate() {
        for t in &c.tools {
            let shown = if counts[t.name.as_ref()] > 1 {
                format!("{}__{}", c.name, t.name)
            } else {
                t.name.to_string()
            };
            out.push(OfferedTool {
                spec: ToolSpec {
                    name: api_name(&shown),
                    description: t
                        .description
                        .as_deref()
                        .map(str::to_owned)
                        .or_else(|| t.title.clone())
                        .unwrap_or_default(),
                    input_schema: api_schema(&t.input_schema),
                },
                server: index,
                name: t.name.to_string(),
            });
        }
    }
    out
}

/// A name both chat APIs accept: other characters become `_`, cut to 64.
fn api_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// An MCP `inputSchema` as a tool schema both APIs accept: an `object` with `properties`,
/// without `$schema` (which some servers reject in tool definitions).
fn api_schema(schema: &Map<String, Value>) -> Value {
    let mut schema = schema.clone();
    schema.remove("$schema");
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Value::Object(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        Vars {
            workdir: PathBuf::from("/tmp/w"),
            sim: PathBuf::from("/p/sim"),
            project: PathBuf::from("/p"),
            fixture: Some(PathBuf::from("/p/sim/fixtures/f.yaml")),
            scenario: "daily".into(),
        }
    }

    #[test]
    fn placeholders_and_environment_expand() {
        let env = |k: &str| (k == "BIN").then(|| "/opt/bin/srv".to_owned());
        let v = vars();
        assert_eq!(
            v.expand(
                "${BIN:-srv} --db {workdir}/x.db --f {fixture} {scenario}",
                &env
            ),
            "/opt/bin/srv --db /tmp/w/x.db --f /p/sim/fixtures/f.yaml daily"
        );
        assert_eq!(v.expand("${NOPE:-fallback}", &env), "fallback");
        assert_eq!(v.expand("${NOPE}x", &env), "x");
        assert_eq!(
            v.expand("{\"a\": 1} {other} $5", &env),
            "{\"a\": 1} {other} $5"
        );
        assert_eq!(
            v.expand_json(&serde_json::json!({"p": ["{project}", 3]}), &env),
            serde_json::json!({"p": ["/p", 3]})
        );
    }

    #[test]
    fn tool_names_and_schemas_fit_the_apis() {
        assert_eq!(api_name("read.file/v2"), "read_file_v2");
        assert_eq!(api_name(&"x".repeat(80)).len(), 64);
        let schema: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}))
        .unwrap();
        assert_eq!(
            api_schema(&schema),
            serde_json::json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn programs_resolve_like_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("tool");
        std::fs::write(&bin, "").unwrap();
        let path = dir.path().display().to_string();
        assert_eq!(
            resolve_program("tool", Path::new("/"), Some(&path)),
            Some(bin.clone())
        );
        assert_eq!(
            resolve_program("./tool", dir.path(), None),
            Some(dir.path().join("./tool"))
        );
        assert_eq!(
            resolve_program("missing", Path::new("/"), Some(&path)),
            None
        );
    }

    #[tokio::test]
    async fn commands_report_failures_with_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let ok = run_command(
            &["sh".into(), "-c".into(), "echo hi".into()],
            dir.path(),
            &BTreeMap::new(),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(ok.stdout, "hi\n");
        let err = run_command(
            &["sh".into(), "-c".into(), "echo broken >&2; exit 3".into()],
            dir.path(),
            &BTreeMap::new(),
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
        assert!(
            err.contains("exit status: 3") && err.contains("broken"),
            "{err}"
        );
        let slow = run_command(
            &["sleep".into(), "5".into()],
            dir.path(),
            &BTreeMap::new(),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err();
        assert!(slow.contains("did not finish"), "{slow}");
    }
}
