//! The system under test, into which a trial's prompts are injected (seed 001 INT-004).
//!
//! Three kinds of [`Target`]:
//!
//! * [`ChainTarget`], the built-in multi-agent chain: the agents run in the configured order
//!   (the seed's planner → researcher → expert → critic_planner → critic_researcher →
//!   critic_expert → finalizer by default), each one chat call (temperature 0) with its own
//!   system prompt and a user turn holding the question, the context files and every earlier
//!   agent's output under its name. The last agent's reply is the final answer: the text after
//!   its last `FINAL ANSWER:` marker when it has one (GAIA's convention), else the whole reply,
//!   trimmed. Calls go through the caller's wrapped models (retries, limits, call cache), so
//!   trials that share a prefix of the chain's prompts share its calls.
//! * [`CommandTarget`]: a program run once per case. stdin gets
//!   `{"prompts": {agent: text}, "question": …, "files": [{"path", "text"}]}`; stdout must be
//!   `{"final_answer": "…"}`, optionally with `"trace": [{"agent", "output"}]` (each agent's
//!   output in order, which the proposer of `--propose-rounds` reads). A non-zero exit, a
//!   reply that is not that JSON, or the timeout is a [`TargetError`] that keeps the
//!   program's stderr (its tail).
//! * [`HttpTarget`]: the same JSON POSTed to a URL; the reply's body is the same JSON. A
//!   non-2xx status, a bad body or the timeout is a [`TargetError`].
//!
//! A reply is read up to its cap (`max_reply_bytes`, [`DEFAULT_MAX_REPLY_BYTES`]) and one byte
//! more: a longer one is a bad reply (the program is stopped, the body left unread), never
//! buffered whole. `final_answer` must be a string: a number, an object or `null` is a bad
//! reply, not an answer.
//!
//! # Answer cases
//!
//! The answer bank of `assay run` asks the same targets with [`Target::respond`] and a
//! [`TargetRequest`] that also carries the user's state and the context assay's pipeline
//! selected. A command or endpoint then receives two more keys, present only in such requests
//! (the optimizer's requests are unchanged): `"user_state": {…}` and
//! `"context": [{"entity": "…", "text": "…"}]` (in rank order; `entity` left out when
//! unknown). Its reply may add `"contexts": [{"entity": "…", "text": "…"}]`, the contexts it
//! actually used (`entity` optional), which are then judged instead of the pipeline's, and
//! `"tool_calls": [{"name": "…", "arguments": {…}, "result"?: "…", "is_error"?: bool}]`, the
//! tools it called itself, in order ([`TargetToolCall`]), which an answer case's trajectory
//! rules check. The chain gets each context as an attached file (its path the entity, `context-<n>` without
//! one) and, when the state is not empty, a `# User state` section; it reports no contexts of
//! its own.
//!
//! # The dry check (INT-011)
//!
//! Before anything is spent, [`Target::dry_check`] proves that every agent's prompt reaches
//! the target. Each agent gets a prompt made of a unique marker
//! (`assay-dry-run:<agent>:<nonce>`).
//!
//! * The chain builds each agent's request with the very function a trial uses and checks the
//!   marker is that request's system prompt; an agent with a prompt but no place in the chain,
//!   or a chain agent without a prompt, fails the check.
//! * Command and HTTP targets receive `{"dry_run": true, "prompts": {…markers…},
//!   "question": "", "files": []}` and must answer, without calling any model,
//!   `{"prompt_sha256": {agent: "<hex sha256 of the prompt text as received>"}}`. Every agent
//!   must be there with the right hash.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::{ChatModel, ChatRequest, ProviderError};

/// The seed's seven agents in the seed's order: the chain's default.
pub const SEED_CHAIN: [&str; 7] = [
    "planner",
    "researcher",
    "expert",
    "critic_planner",
    "critic_researcher",
    "critic_expert",
    "finalizer",
];

/// Tokens each chain agent may answer with (default).
pub const DEFAULT_AGENT_MAX_TOKENS: u32 = 1024;
/// Characters of stderr or body kept with a failure.
const KEPT_CHARS: usize = 2000;
/// Bytes of a command's stderr kept while it runs (its tail): enough for [`KEPT_CHARS`].
const KEPT_STDERR_BYTES: usize = 4 * KEPT_CHARS;

/// The most bytes a reply of a command or HTTP target may have unless set otherwise
/// (`[answer] max_reply_bytes`): 1 MiB. A target reads at most one byte more than its cap,
/// so a product that prints without end costs the cap, never the whole output.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 1_048_576;

/// A context file as the target receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetFile {
    /// The path as the test case names it.
    pub path: String,
    /// Its text.
    pub text: String,
}

/// A piece of context: what an answer case sends (the pipeline's selection, in rank order) and
/// what a target may say it used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetContext {
    /// The entity it came from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    /// Its text.
    pub text: String,
}

/// A tool call a target says it made while answering (`"tool_calls"` in a reply), in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetToolCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments: an object (a string holding a JSON object is read as that object, as
    /// chat APIs send them); `{}` when left out.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// What the tool returned, when the target says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Whether the tool reported an error.
    #[serde(default)]
    pub is_error: bool,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// One case as a target receives it, beside the prompts.
///
/// `user_state` and `context` are sent only when `Some` (answer cases); the optimizer's cases
/// leave them `None`, so its requests are exactly the question and the files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetRequest {
    /// The question (the user's message).
    pub question: String,
    /// The case's context files.
    pub files: Vec<TargetFile>,
    /// The user's state.
    pub user_state: Option<serde_json::Map<String, Value>>,
    /// The context selected for the question, in rank order.
    pub context: Option<Vec<TargetContext>>,
}

impl TargetRequest {
    /// A request with just a question and its files (what the optimizer sends).
    pub fn question(question: &str, files: &[TargetFile]) -> TargetRequest {
        TargetRequest {
            question: question.to_owned(),
            files: files.to_vec(),
            user_state: None,
            context: None,
        }
    }

    /// The files the chain attaches: the case's files, then each context (its path the
    /// entity, else `context-<n>`, 1-based).
    pub fn attached_files(&self) -> Vec<TargetFile> {
        let mut files = self.files.clone();
        for (i, c) in self.context.iter().flatten().enumerate() {
            files.push(TargetFile {
                path: c
                    .entity
                    .clone()
                    .unwrap_or_else(|| format!("context-{}", i + 1)),
                text: c.text.clone(),
            });
        }
        files
    }

    /// The JSON a command or HTTP target receives for this case.
    pub fn body(&self, prompts: &BTreeMap<String, String>) -> Value {
        let mut body = request_body(prompts, &self.question, &self.files);
        if let Some(state) = &self.user_state {
            body["user_state"] = Value::Object(state.clone());
        }
        if let Some(context) = &self.context {
            body["context"] = json!(context);
        }
        body
    }
}

/// A target's reply to a case: the answer and its trace, and the contexts it says it used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Responded {
    /// The final answer and the agents' outputs.
    pub answered: Answered,
    /// The contexts the target says it used (`"contexts"` in a reply; `None` when it does not
    /// say, and always for the chain).
    pub contexts: Option<Vec<TargetContext>>,
    /// The tools the target says it called, in order (`"tool_calls"` in a reply; `None` when
    /// it does not say, and always for the chain).
    pub tool_calls: Option<Vec<TargetToolCall>>,
}

/// What went wrong running the target: a trial failure (infrastructure), never a score.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// A chain agent's model call failed after the wrapper's retries.
    #[error("agent {agent}: {source}")]
    Provider {
        /// The agent.
        agent: String,
        /// The provider's error.
        #[source]
        source: ProviderError,
    },
    /// The command could not start, exited non-zero or timed out.
    #[error("command `{command}`: {problem}{}", stderr_note(.stderr))]
    Command {
        /// The command line.
        command: String,
        /// What happened.
        problem: String,
        /// Its stderr (the last 2,000 characters).
        stderr: String,
    },
    /// A long-lived worker could not start, stopped, wrote something that is not a reply,
    /// timed out, or said the product failed on the request.
    #[error("{target}: {problem}{}", stderr_note(.stderr))]
    Worker {
        /// The target in words.
        target: String,
        /// What happened.
        problem: String,
        /// The tail of the worker's stderr, when it says something.
        stderr: String,
    },
    /// The endpoint could not be reached, answered non-2xx or timed out.
    #[error("POST {url}: {problem}")]
    Http {
        /// The URL.
        url: String,
        /// What happened (status and the start of the body).
        problem: String,
    },
    /// The reply was not `{"final_answer": "…"}` (or, for the dry check, the hashes).
    #[error("{target}: bad reply: {problem}")]
    BadReply {
        /// The target, in words.
        target: String,
        /// What was wrong.
        problem: String,
    },
    /// The dry check found agents whose prompts do not reach the target.
    #[error("{target}: the prompts of {} do not reach the target ({detail})", .agents.join(", "))]
    Unreached {
        /// The target, in words.
        target: String,
        /// The agents.
        agents: Vec<String>,
        /// Why, per agent.
        detail: String,
    },
}

impl TargetError {
    /// Whether the target could not be reached or run (exit code 3), rather than answering
    /// in a way that shows a misconfiguration (exit code 2).
    pub fn is_infrastructure(&self) -> bool {
        matches!(
            self,
            TargetError::Provider { .. }
                | TargetError::Command { .. }
                | TargetError::Http { .. }
                | TargetError::Worker { .. }
        )
    }

    /// Whether the target could not be reached at all (a connection refused, a timeout, a
    /// provider that failed after its retries): at the dry check that is exit 3, the rest a
    /// setup to fix (exit 2).
    pub fn is_unreachable(&self) -> bool {
        match self {
            TargetError::Provider { .. } => true,
            TargetError::Command { problem, .. } => problem.contains("timed out"),
            TargetError::Worker { problem, .. } => problem.starts_with("timed out"),
            TargetError::Http { problem, .. } => {
                problem == "timed out" || problem.starts_with("cannot reach it")
            }
            _ => false,
        }
    }
}

fn stderr_note(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", stderr.trim())
    }
}

fn keep_tail(text: &str) -> String {
    let n = text.chars().count();
    if n <= KEPT_CHARS {
        text.to_owned()
    } else {
        format!("…{}", text.chars().skip(n - KEPT_CHARS).collect::<String>())
    }
}

/// The hex sha256 of a text.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The system under test.
#[async_trait]
pub trait Target: fmt::Debug + Send + Sync {
    /// The target in words (for logs and the report).
    fn describe(&self) -> String;

    /// Whether cases may run concurrently (`--max-concurrency`): true only for targets that
    /// keep no state between executions.
    fn stateless(&self) -> bool;

    /// Runs one case with these prompts and returns the final answer.
    async fn answer(
        &self,
        prompts: &BTreeMap<String, String>,
        question: &str,
        files: &[TargetFile],
    ) -> Result<String, TargetError> {
        Ok(self
            .answer_traced(prompts, question, files)
            .await?
            .final_answer)
    }

    /// Runs one case and returns the final answer with what each agent said on the way (the
    /// proposer reads it): the chain's every reply in order; a command or endpoint's optional
    /// `"trace": [{"agent": …, "output": …}]`.
    async fn answer_traced(
        &self,
        prompts: &BTreeMap<String, String>,
        question: &str,
        files: &[TargetFile],
    ) -> Result<Answered, TargetError> {
        Ok(self
            .respond(prompts, &TargetRequest::question(question, files))
            .await?
            .answered)
    }

    /// Runs one case, with the user's state and the selected context when the request has
    /// them (answer cases, see the module docs), and returns the answer, its trace and the
    /// contexts the target says it used.
    async fn respond(
        &self,
        prompts: &BTreeMap<String, String>,
        request: &TargetRequest,
    ) -> Result<Responded, TargetError>;

    /// Checks that each of `agents`' prompts reaches the target (see the module docs).
    async fn dry_check(&self, agents: &[String]) -> Result<(), TargetError>;

    /// Stops what the target keeps running between cases (a worker's processes), cleanly;
    /// called at the end of a run. Nothing for the others.
    async fn close(&self) {}
}

/// A final answer and the agents' outputs that led to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answered {
    /// The final answer.
    pub final_answer: String,
    /// `(agent, output)` in the order the agents ran (empty when the target does not say).
    pub steps: Vec<(String, String)>,
}

/// Marker prompts for the dry check: one unique text per agent.
pub fn dry_run_prompts(agents: &[String]) -> BTreeMap<String, String> {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let nonce = u64::from(std::process::id()) ^ micros;
    agents
        .iter()
        .map(|a| (a.clone(), format!("assay-dry-run:{a}:{nonce:x}")))
        .collect()
}

/// The final answer in a reply: after the last `FINAL ANSWER:` (any case), else all of it.
pub fn extract_final_answer(reply: &str) -> String {
    let lower = reply.to_lowercase();
    // Lower-casing can change byte lengths; search on the original when it did not.
    if lower.len() == reply.len()
        && let Some(at) = lower.rfind("final answer:")
    {
        return reply[at + "final answer:".len()..].trim().to_owned();
    }
    reply.trim().to_owned()
}

// ---------------------------------------------------------------------------------------------
// The built-in chain

/// The built-in multi-agent chain (see the module docs).
#[derive(Debug, Clone)]
pub struct ChainTarget {
    /// Agents in order; the last one's reply is the final answer.
    pub chain: Vec<String>,
    /// Each agent's (wrapped) model.
    pub models: BTreeMap<String, Arc<dyn ChatModel>>,
    /// Tokens each agent may answer with.
    pub max_tokens: u32,
}

impl ChainTarget {
    /// The chain order for these agents: `configured` when given, else the seed's seven when
    /// they are exactly the agents, else the agents in name order with `finalizer` last when
    /// there is one.
    pub fn order(agents: &[String], configured: Option<&[String]>) -> Vec<String> {
        if let Some(c) = configured {
            return c.to_vec();
        }
        let set: BTreeSet<&str> = agents.iter().map(String::as_str).collect();
        if set == SEED_CHAIN.iter().copied().collect() {
            return SEED_CHAIN.iter().map(|s| (*s).to_owned()).collect();
        }
        let mut order: Vec<String> = agents
            .iter()
            .filter(|a| *a != "finalizer")
            .cloned()
            .collect();
        order.sort();
        if set.contains("finalizer") {
            order.push("finalizer".into());
        }
        order
    }

    /// The request agent `index` of the chain sends, given the earlier agents' outputs:
    /// `files` are the files it attaches ([`TargetRequest::attached_files`]), `user_state` goes
    /// in a `# User state` section when it is not empty.
    pub fn request(
        &self,
        index: usize,
        prompts: &BTreeMap<String, String>,
        question: &str,
        files: &[TargetFile],
        user_state: Option<&serde_json::Map<String, Value>>,
        previous: &[(String, String)],
    ) -> Option<ChatRequest> {
        let agent = self.chain.get(index)?;
        let system = prompts.get(agent)?.clone();
        let mut user = format!("# Question\n{}\n", question.trim());
        if let Some(state) = user_state.filter(|s| !s.is_empty()) {
            let text = serde_json::to_string_pretty(state).unwrap_or_default();
            let _ = write!(user, "\n# User state\n{text}\n");
        }
        if !files.is_empty() {
            user.push_str("\n# Attached files\n");
            for f in files {
                let _ = write!(user, "\n## {}\n{}\n", f.path, f.text.trim_end());
            }
        }
        if !previous.is_empty() {
            user.push_str("\n# Work so far\n");
            for (name, output) in previous {
                let _ = write!(user, "\n## {name}\n{}\n", output.trim());
            }
        }
        let _ = write!(
            user,
            "\nYou are the {agent}.{}",
            if index + 1 == self.chain.len() {
                " End your reply with a line `FINAL ANSWER: <the answer>`."
            } else {
                ""
            }
        );
        Some(ChatRequest::new(Some(system), user, self.max_tokens))
    }
}

#[async_trait]
impl Target for ChainTarget {
    fn describe(&self) -> String {
        format!("built-in chain ({})", self.chain.join(" → "))
    }

    fn stateless(&self) -> bool {
        true
    }

    async fn respond(
        &self,
        prompts: &BTreeMap<String, String>,
        case: &TargetRequest,
    ) -> Result<Responded, TargetError> {
        let files = case.attached_files();
        let state = case.user_state.as_ref();
        let mut previous: Vec<(String, String)> = Vec::with_capacity(self.chain.len());
        for (i, agent) in self.chain.iter().enumerate() {
            let request = self
                .request(i, prompts, &case.question, &files, state, &previous)
                .ok_or_else(|| TargetError::Unreached {
                    target: self.describe(),
                    agents: vec![agent.clone()],
                    detail: "no prompt for this agent".into(),
                })?;
            let model = self
                .models
                .get(agent)
                .ok_or_else(|| TargetError::Unreached {
                    target: self.describe(),
                    agents: vec![agent.clone()],
                    detail: "no model for this agent".into(),
                })?;
            let reply = model
                .chat(&request)
                .await
                .map_err(|source| TargetError::Provider {
                    agent: agent.clone(),
                    source,
                })?;
            previous.push((agent.clone(), reply.text));
        }
        Ok(Responded {
            answered: Answered {
                final_answer: previous
                    .last()
                    .map(|(_, text)| extract_final_answer(text))
                    .unwrap_or_default(),
                steps: previous,
            },
            contexts: None,
            tool_calls: None,
        })
    }

    async fn dry_check(&self, agents: &[String]) -> Result<(), TargetError> {
        let markers = dry_run_prompts(agents);
        let mut problems: BTreeMap<String, String> = BTreeMap::new();
        for a in agents {
            if !self.chain.contains(a) {
                problems.insert(a.clone(), "not in the chain".into());
            }
        }
        let mut previous = Vec::new();
        for (i, agent) in self.chain.iter().enumerate() {
            if !self.models.contains_key(agent) {
                problems.insert(agent.clone(), "no model".into());
            }
            match self.request(i, &markers, "dry run", &[], None, &previous) {
                None => {
                    problems.insert(agent.clone(), "in the chain but has no prompt".into());
                }
                Some(r) if r.system.as_deref() != markers.get(agent).map(String::as_str) => {
                    problems.insert(agent.clone(), "its request lacks its prompt".into());
                }
                Some(_) => {}
            }
            previous.push((agent.clone(), String::new()));
        }
        unreached(self.describe(), problems)
    }
}

fn unreached(target: String, problems: BTreeMap<String, String>) -> Result<(), TargetError> {
    if problems.is_empty() {
        return Ok(());
    }
    let detail = problems
        .iter()
        .map(|(a, why)| format!("{a}: {why}"))
        .collect::<Vec<_>>()
        .join("; ");
    Err(TargetError::Unreached {
        target,
        agents: problems.into_keys().collect(),
        detail,
    })
}

// ---------------------------------------------------------------------------------------------
// Command and HTTP targets

/// The request a command or HTTP target receives for an optimizer's case (an answer case's
/// adds to it: [`TargetRequest::body`]).
pub fn request_body(
    prompts: &BTreeMap<String, String>,
    question: &str,
    files: &[TargetFile],
) -> Value {
    json!({"prompts": prompts, "question": question, "files": files})
}

#[derive(Deserialize)]
struct AnswerReply {
    final_answer: Value,
    #[serde(default)]
    trace: Vec<TraceStep>,
    #[serde(default)]
    contexts: Option<Vec<TargetContext>>,
    #[serde(default)]
    tool_calls: Option<Vec<TargetToolCall>>,
}

#[derive(Deserialize)]
struct TraceStep {
    agent: String,
    output: Value,
}

fn parse_answer(target: &str, body: &str) -> Result<Responded, TargetError> {
    let bad = |problem: String| TargetError::BadReply {
        target: target.to_owned(),
        problem,
    };
    let reply: AnswerReply = serde_json::from_str(body.trim()).map_err(|e| {
        bad(format!(
            "expected {{\"final_answer\": \"…\"}} (with optional \"trace\": [{{\"agent\", \"output\"}}] and \"contexts\": [{{\"entity\"?, \"text\"}}], \"tool_calls\": [{{\"name\", \"arguments\"?, \"result\"?, \"is_error\"?}}]): {e}; got: {}",
            keep_tail(body.trim())
        ))
    })?;
    let text = |v: Value| match v {
        Value::String(s) => s,
        other => other.to_string(),
    };
    let final_answer = match reply.final_answer {
        Value::String(s) => s,
        Value::Null => return Err(bad("`final_answer` is null".into())),
        other => {
            let kind = match &other {
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::Array(_) => "an array",
                _ => "an object",
            };
            return Err(bad(format!(
                "`final_answer` must be a string (the reply's text), got {kind}: {}",
                keep_tail(&other.to_string())
            )));
        }
    };
    let mut tool_calls = reply.tool_calls;
    for (i, call) in tool_calls.iter_mut().flatten().enumerate() {
        if let Value::String(text) = &call.arguments
            && let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(text)
        {
            call.arguments = parsed;
        }
        if call.name.trim().is_empty() {
            return Err(bad(format!("tool_calls[{i}].name is empty")));
        }
        if !call.arguments.is_object() {
            return Err(bad(format!(
                "tool_calls[{i}].arguments: expected an object, got {}",
                keep_tail(&call.arguments.to_string())
            )));
        }
    }
    Ok(Responded {
        answered: Answered {
            final_answer,
            steps: reply
                .trace
                .into_iter()
                .map(|s| (s.agent, text(s.output)))
                .collect(),
        },
        contexts: reply.contexts,
        tool_calls,
    })
}

fn check_hashes(
    target: String,
    body: &str,
    markers: &BTreeMap<String, String>,
) -> Result<(), TargetError> {
    #[derive(Deserialize)]
    struct Echo {
        prompt_sha256: BTreeMap<String, String>,
    }
    let echo: Echo = serde_json::from_str(body.trim()).map_err(|e| TargetError::BadReply {
        target: target.clone(),
        problem: format!(
            "the dry run (`\"dry_run\": true`) must answer {{\"prompt_sha256\": {{agent: hex}}}}: {e}; got: {}",
            keep_tail(body.trim())
        ),
    })?;
    let mut problems = BTreeMap::new();
    for (agent, prompt) in markers {
        match echo.prompt_sha256.get(agent) {
            None => {
                problems.insert(agent.clone(), "no hash in the reply".into());
            }
            Some(h) if !h.eq_ignore_ascii_case(&sha256_hex(prompt)) => {
                problems.insert(
                    agent.clone(),
                    "its hash differs from the prompt sent".into(),
                );
            }
            Some(_) => {}
        }
    }
    unreached(target, problems)
}

/// A target reached with the JSON exchange of the module docs: one request body in, one reply
/// body out. Every `Wire` is a [`Target`] (answers and the dry check are built on `exchange`).
#[async_trait]
pub trait Wire: fmt::Debug + Send + Sync {
    /// The target in words.
    fn name(&self) -> String;
    /// Declared stateless.
    fn is_stateless(&self) -> bool;
    /// Sends one request and returns the reply's body.
    async fn exchange(&self, body: &Value) -> Result<String, TargetError>;
    /// Stops what it keeps running ([`Target::close`]).
    async fn close(&self) {}
}

#[async_trait]
impl<W: Wire> Target for W {
    fn describe(&self) -> String {
        self.name()
    }

    fn stateless(&self) -> bool {
        self.is_stateless()
    }

    async fn respond(
        &self,
        prompts: &BTreeMap<String, String>,
        request: &TargetRequest,
    ) -> Result<Responded, TargetError> {
        let out = self.exchange(&request.body(prompts)).await?;
        parse_answer(&self.name(), &out)
    }

    async fn dry_check(&self, agents: &[String]) -> Result<(), TargetError> {
        let markers = dry_run_prompts(agents);
        let mut body = request_body(&markers, "", &[]);
        body["dry_run"] = Value::Bool(true);
        let out = self.exchange(&body).await?;
        check_hashes(self.name(), &out, &markers)
    }

    async fn close(&self) {
        Wire::close(self).await;
    }
}

/// A program run once per case (see the module docs).
#[derive(Debug, Clone)]
pub struct CommandTarget {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Where it runs (the project directory).
    pub dir: PathBuf,
    /// How long one execution may take.
    pub timeout: Duration,
    /// Declared stateless in `assay.toml`.
    pub stateless: bool,
    /// The most bytes its stdout may hold ([`DEFAULT_MAX_REPLY_BYTES`] unless set).
    pub max_reply_bytes: usize,
}

/// The error of a reply longer than `cap`.
fn too_long(target: String, cap: usize, note: &str) -> TargetError {
    TargetError::BadReply {
        target,
        problem: format!(
            "the reply is longer than {cap} bytes (`[answer] max_reply_bytes`), so it was not read{note}"
        ),
    }
}

/// Reads `from` to its end keeping only its last [`KEPT_STDERR_BYTES`] in `tail`.
async fn keep_reading_tail(
    mut from: impl tokio::io::AsyncRead + Unpin,
    tail: Arc<std::sync::Mutex<Vec<u8>>>,
) {
    use tokio::io::AsyncReadExt as _;
    let mut chunk = vec![0u8; 8192];
    while let Ok(n) = from.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let mut kept = tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.extend_from_slice(&chunk[..n]);
        if kept.len() > KEPT_STDERR_BYTES {
            let cut = kept.len() - KEPT_STDERR_BYTES;
            kept.drain(..cut);
        }
    }
}

#[async_trait]
impl Wire for CommandTarget {
    fn name(&self) -> String {
        format!("command `{}`", self.command.join(" "))
    }

    fn is_stateless(&self) -> bool {
        self.stateless
    }

    async fn exchange(&self, body: &Value) -> Result<String, TargetError> {
        let line = self.command.join(" ");
        let fail = |problem: String, stderr: String| TargetError::Command {
            command: line.clone(),
            problem,
            stderr,
        };
        let (program, args) = self
            .command
            .split_first()
            .ok_or_else(|| fail("empty command".into(), String::new()))?;
        let mut command = tokio::process::Command::new(program);
        // The case's span, so the product's own spans join assay's trace (W3C trace context
        // in the environment, as the OpenTelemetry SDKs read it).
        if let Some(traceparent) = assay_telemetry::current_traceparent() {
            command.env("TRACEPARENT", traceparent);
        }
        let mut child = command
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(format!("cannot start: {e}"), String::new()))?;
        let input = serde_json::to_vec(body).unwrap_or_default();
        // The input is fed, and stderr's tail kept, beside the reading of stdout: a program
        // that answers before reading its input, or writes much to stderr, never blocks it.
        if let Some(mut stdin) = child.stdin.take() {
            tokio::spawn(async move {
                // A program that exits without reading its input is judged by its exit status.
                let _ = stdin.write_all(&input).await;
                let _ = stdin.shutdown().await;
            });
        }
        let tail = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stderr_done = child
            .stderr
            .take()
            .map(|e| tokio::spawn(keep_reading_tail(e, Arc::clone(&tail))));
        let stderr_now = || {
            let kept = tail
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            keep_tail(&String::from_utf8_lossy(&kept))
        };
        let cap = self.max_reply_bytes;
        let mut stdout = child.stdout.take();
        let read = async {
            use tokio::io::AsyncReadExt as _;
            let mut out = Vec::new();
            if let Some(s) = stdout.as_mut() {
                s.take(cap as u64 + 1).read_to_end(&mut out).await?;
            }
            if out.len() > cap {
                return Ok(Err(out.len()));
            }
            child.wait().await.map(|status| Ok((out, status)))
        };
        let finished = tokio::time::timeout(self.timeout, read).await;
        let (out, status) = match finished {
            Err(_) => {
                let _ = child.start_kill();
                return Err(fail(
                    format!("timed out after {:.0} s", self.timeout.as_secs_f64()),
                    stderr_now(),
                ));
            }
            Ok(Err(e)) => {
                let _ = child.start_kill();
                return Err(fail(format!("cannot read its output: {e}"), stderr_now()));
            }
            Ok(Ok(Err(_))) => {
                // Stopped: what it had left to say is never read.
                let _ = child.start_kill();
                let _ = child.wait().await;
                return Err(too_long(self.name(), cap, &stderr_note(&stderr_now())));
            }
            Ok(Ok(Ok(done))) => done,
        };
        // Its stderr ends with it (or soon after, when a child of its own still holds it).
        if let Some(done) = stderr_done {
            let _ = tokio::time::timeout(Duration::from_secs(2), done).await;
        }
        let stderr = stderr_now();
        if !status.success() {
            return Err(fail(format!("exited with {status}"), stderr));
        }
        String::from_utf8(out).map_err(|_| fail("stdout is not UTF-8".into(), stderr))
    }
}

/// An HTTP endpoint (see the module docs).
#[derive(Debug, Clone)]
pub struct HttpTarget {
    /// The URL requests are POSTed to.
    pub url: String,
    /// The client (with its timeout).
    pub client: reqwest::Client,
    /// Declared stateless in `assay.toml`.
    pub stateless: bool,
    /// The most bytes a reply's body may hold ([`DEFAULT_MAX_REPLY_BYTES`] unless set).
    pub max_reply_bytes: usize,
}

impl HttpTarget {
    /// A target at `url` whose requests time out after `timeout`, whose replies may hold
    /// [`DEFAULT_MAX_REPLY_BYTES`] (set `max_reply_bytes` for another cap).
    pub fn new(url: &str, timeout: Duration, stateless: bool) -> Result<HttpTarget, TargetError> {
        assay_telemetry::tls::ensure_provider();
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| TargetError::Http {
                url: url.to_owned(),
                problem: format!("cannot build the client: {e}"),
            })?;
        Ok(HttpTarget {
            url: url.to_owned(),
            client,
            stateless,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
        })
    }
}

#[async_trait]
impl Wire for HttpTarget {
    fn name(&self) -> String {
        format!("HTTP endpoint {}", self.url)
    }

    fn is_stateless(&self) -> bool {
        self.stateless
    }

    async fn exchange(&self, body: &Value) -> Result<String, TargetError> {
        let fail = |problem: String| TargetError::Http {
            url: self.url.clone(),
            problem,
        };
        let mut request = self.client.post(&self.url).json(body);
        // The case's span, so the product's own spans join assay's trace.
        if let Some(traceparent) = assay_telemetry::current_traceparent() {
            request = request.header("traceparent", traceparent);
        }
        let response = request.send().await.map_err(|e| {
            fail(if e.is_timeout() {
                "timed out".into()
            } else {
                format!("cannot reach it: {e}")
            })
        })?;
        let status = response.status();
        let cap = self.max_reply_bytes;
        let declared = response.content_length();
        if status.is_success() && declared.is_some_and(|n| n > cap as u64) {
            return Err(too_long(
                self.name(),
                cap,
                &format!(" (its Content-Length is {})", declared.unwrap_or_default()),
            ));
        }
        // Read a chunk at a time, never past the cap (an error's body: its first part).
        let mut body = Vec::new();
        let mut response = response;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| fail(format!("cannot read the body: {e}")))?
        {
            if body.len() + chunk.len() > cap {
                if status.is_success() {
                    return Err(too_long(self.name(), cap, ""));
                }
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        if !status.is_success() {
            return Err(fail(format!("HTTP {status}: {}", keep_tail(text.trim()))));
        }
        Ok(text)
    }
}

mod worker;
pub use worker::{
    FunctionTarget, NODE_WORKER, PYTHON_WORKER, WorkerTarget, find_node, find_python,
};

#[cfg(test)]
mod tests;
