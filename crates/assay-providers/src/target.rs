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
            TargetError::Provider { .. } | TargetError::Command { .. } | TargetError::Http { .. }
        )
    }

    /// Whether the target could not be reached at all (a connection refused, a timeout, a
    /// provider that failed after its retries): at the dry check that is exit 3, the rest a
    /// setup to fix (exit 2).
    pub fn is_unreachable(&self) -> bool {
        match self {
            TargetError::Provider { .. } => true,
            TargetError::Command { problem, .. } => problem.contains("timed out"),
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use crate::{ChatResponse, Usage};

    use super::*;

    #[derive(Debug, Default)]
    struct Echo(Mutex<Vec<ChatRequest>>);

    #[async_trait]
    impl ChatModel for Echo {
        fn model(&self) -> &'static str {
            "test/echo"
        }
        async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
            self.0.lock().unwrap().push(request.clone());
            let sys = request.system.clone().unwrap_or_default();
            Ok(ChatResponse {
                text: format!("notes from {sys}\nFINAL ANSWER: {sys}"),
                usage: Usage::default(),
                ..ChatResponse::default()
            })
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn chain(order: &[&str], model: &Arc<Echo>) -> ChainTarget {
        let m: Arc<dyn ChatModel> = model.clone();
        ChainTarget {
            chain: names(order),
            models: order.iter().map(|a| ((*a).to_owned(), m.clone())).collect(),
            max_tokens: 64,
        }
    }

    #[test]
    fn chain_order_defaults_to_the_seed_then_names_with_the_finalizer_last() {
        let mut seed = names(&SEED_CHAIN);
        seed.reverse();
        assert_eq!(ChainTarget::order(&seed, None), names(&SEED_CHAIN));
        assert_eq!(
            ChainTarget::order(&names(&["finalizer", "b", "a"]), None),
            names(&["a", "b", "finalizer"])
        );
        assert_eq!(
            ChainTarget::order(&names(&["a", "b"]), Some(&names(&["b", "a"]))),
            names(&["b", "a"])
        );
    }

    #[tokio::test]
    async fn each_agent_gets_its_prompt_and_the_earlier_outputs() {
        let model = Arc::new(Echo::default());
        let target = chain(&["planner", "finalizer"], &model);
        let prompts: BTreeMap<String, String> = [("planner", "P"), ("finalizer", "F")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
        let files = [TargetFile {
            path: "ctx/a.txt".into(),
            text: "context".into(),
        }];
        let answer = target.answer(&prompts, "Why?", &files).await.unwrap();
        assert_eq!(answer, "F");
        let seen = model.0.lock().unwrap();
        assert_eq!(seen[0].system.as_deref(), Some("P"));
        let second = &seen[1].messages[0].content;
        assert!(second.contains("## planner\nnotes from P"), "{second}");
        assert!(second.contains("## ctx/a.txt\ncontext"));
        assert!(second.contains("FINAL ANSWER: <the answer>"));
    }

    #[tokio::test]
    async fn the_dry_check_finds_agents_whose_prompts_would_not_arrive() {
        let model = Arc::new(Echo::default());
        let target = chain(&["planner", "finalizer"], &model);
        target
            .dry_check(&names(&["finalizer", "planner"]))
            .await
            .unwrap();
        let e = target
            .dry_check(&names(&["finalizer", "planner", "expert"]))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("expert: not in the chain"), "{e}");
        let e = target.dry_check(&names(&["planner"])).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("finalizer: in the chain but has no prompt")
        );
        assert!(
            model.0.lock().unwrap().is_empty(),
            "the dry check calls no model"
        );
    }

    #[test]
    fn a_reply_may_carry_each_agents_output() {
        let a = parse_answer(
            "t",
            r#"{"final_answer": "42", "trace": [{"agent": "planner", "output": "plan"}, {"agent": "finalizer", "output": "FINAL ANSWER: 42"}]}"#,
        )
        .unwrap();
        assert_eq!(a.answered.final_answer, "42");
        assert_eq!(
            a.answered.steps[0],
            ("planner".to_owned(), "plan".to_owned())
        );
        assert_eq!(a.answered.steps.len(), 2);
        assert_eq!(a.contexts, None);
        assert!(
            parse_answer("t", r#"{"final_answer": "x"}"#)
                .unwrap()
                .answered
                .steps
                .is_empty()
        );
        assert!(parse_answer("t", r#"{"final_answer": null}"#).is_err());
    }

    /// Issue 42: a final answer that is not a string is a bad reply, never an answer.
    #[test]
    fn a_final_answer_that_is_not_a_string_is_a_bad_reply() {
        for (body, kind) in [
            (r#"{"final_answer": 42}"#, "got a number: 42"),
            (r#"{"final_answer": true}"#, "got a boolean: true"),
            (r#"{"final_answer": ["a"]}"#, "got an array"),
            (r#"{"final_answer": {"text": "a"}}"#, "got an object"),
        ] {
            let e = parse_answer("command `p`", body).unwrap_err();
            assert!(matches!(e, TargetError::BadReply { .. }), "{e:?}");
            let text = e.to_string();
            assert!(
                text.contains("`final_answer` must be a string") && text.contains(kind),
                "{text}"
            );
        }
    }

    /// Issue 42: a command that prints without end is stopped at its cap, its output never
    /// buffered whole; a reply within the cap reads.
    #[tokio::test]
    async fn a_command_reply_longer_than_the_cap_is_stopped_and_refused() {
        let mut t = script(
            r#"cat >/dev/null; printf '{"final_answer": "'; yes x | tr -d '
' | head -c 50000000; echo '"}'"#,
        );
        t.max_reply_bytes = 4096;
        t.timeout = Duration::from_secs(20);
        let started = std::time::Instant::now();
        let e = t.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap_err();
        assert!(matches!(e, TargetError::BadReply { .. }), "{e:?}");
        assert!(
            e.to_string()
                .contains("the reply is longer than 4096 bytes (`[answer] max_reply_bytes`)"),
            "{e}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "it was stopped"
        );
        let mut small = script(r#"cat >/dev/null; echo '{"final_answer": "short"}'"#);
        // 26 bytes with its newline: a cap of 26 takes it, 25 does not.
        small.max_reply_bytes = 26;
        assert_eq!(
            small.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap(),
            "short"
        );
        small.max_reply_bytes = 25;
        assert!(small.answer(&BTreeMap::new(), "Q?", &[]).await.is_err());
    }

    /// Serves every connection on a local port with `answer` (the raw HTTP reply: head and
    /// body), after reading the request; returns the URL.
    async fn raw_server(answer: fn() -> Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    // The head, then the body its Content-Length announces.
                    loop {
                        let Ok(n) = stream.read(&mut buf).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        seen.extend_from_slice(&buf[..n]);
                        let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let length = text
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            if seen.len() >= end + 4 + length {
                                break;
                            }
                        }
                    }
                    let _ = stream.write_all(&answer()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        format!("http://{addr}/answer")
    }

    /// Issue 42: an endpoint's body is read up to the cap: a declared length over it is
    /// refused before the body is read, a chunked body that runs past it is cut off there.
    #[tokio::test]
    async fn an_http_reply_longer_than_the_cap_is_refused() {
        let declared = raw_server(|| {
            let mut r = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n".to_vec();
            r.extend_from_slice(b"{\"final_answer\": \"");
            r
        })
        .await;
        let chunked = raw_server(|| {
            let mut r = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            let chunk = vec![b'x'; 1000];
            for _ in 0..200 {
                r.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                r.extend_from_slice(&chunk);
                r.extend_from_slice(b"\r\n");
            }
            r.extend_from_slice(b"0\r\n\r\n");
            r
        })
        .await;
        let fine = raw_server(|| {
            let body = br#"{"final_answer": "ok"}"#;
            let mut r = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            r.extend_from_slice(body);
            r
        })
        .await;
        for url in [&declared, &chunked] {
            let mut t = HttpTarget::new(url, Duration::from_secs(10), true).unwrap();
            t.max_reply_bytes = 100_000;
            let e = t.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap_err();
            assert!(matches!(e, TargetError::BadReply { .. }), "{url}: {e:?}");
            assert!(
                e.to_string()
                    .contains("the reply is longer than 100000 bytes"),
                "{url}: {e}"
            );
        }
        let mut t = HttpTarget::new(&fine, Duration::from_secs(10), true).unwrap();
        t.max_reply_bytes = 100_000;
        assert_eq!(t.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap(), "ok");
    }

    /// A program that writes much to stderr and answers before reading its input is read
    /// whole; only the tail of its stderr is kept with a failure.
    #[tokio::test]
    async fn stderr_is_kept_by_its_tail_and_never_blocks_the_reply() {
        let t = script(r#"yes e | head -c 300000 >&2; echo '{"final_answer": "ok"}'"#);
        assert_eq!(t.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap(), "ok");
        let t = script(r"yes e | head -c 300000 >&2; echo last words >&2; exit 3");
        let e = t
            .answer(&BTreeMap::new(), "Q?", &[])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("exited with") && e.ends_with("last words"),
            "{e}"
        );
        assert!(e.len() < 3 * KEPT_CHARS, "{}", e.len());
    }

    #[test]
    fn final_answer_extraction() {
        assert_eq!(extract_final_answer("x\nFinal Answer:  42 \n"), "42");
        assert_eq!(extract_final_answer("  just this "), "just this");
        assert_eq!(
            extract_final_answer("FINAL ANSWER: a\nFINAL ANSWER: b"),
            "b"
        );
    }

    fn script(body: &str) -> CommandTarget {
        CommandTarget {
            command: vec!["sh".into(), "-c".into(), body.into()],
            dir: std::env::temp_dir(),
            timeout: Duration::from_secs(5),
            stateless: false,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
        }
    }

    #[tokio::test]
    async fn a_command_gets_json_on_stdin_and_answers_on_stdout() {
        let t = script(
            r#"input=$(cat); case "$input" in *'"question":"Q?"'*) echo '{"final_answer":"yes"}';; *) echo '{"final_answer":"no"}';; esac"#,
        );
        let prompts = BTreeMap::from([("a".to_owned(), "p".to_owned())]);
        assert_eq!(t.answer(&prompts, "Q?", &[]).await.unwrap(), "yes");
    }

    #[tokio::test]
    async fn command_failures_keep_stderr_and_are_errors() {
        let prompts = BTreeMap::new();
        let e = script("cat >/dev/null; echo boom >&2; exit 3")
            .answer(&prompts, "q", &[])
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("exited with") && e.to_string().contains("stderr: boom"),
            "{e}"
        );
        let e = script("cat >/dev/null; echo not json")
            .answer(&prompts, "q", &[])
            .await
            .unwrap_err();
        assert!(e.to_string().contains("bad reply"), "{e}");
        let mut slow = script("sleep 5");
        slow.timeout = Duration::from_millis(200);
        let e = slow.answer(&prompts, "q", &[]).await.unwrap_err();
        assert!(e.to_string().contains("timed out"), "{e}");
    }

    #[tokio::test]
    async fn a_command_dry_run_must_echo_every_prompts_hash() {
        // A program that hashes what it received, as a real target would.
        let py = r#"
import sys, json, hashlib
r = json.load(sys.stdin)
assert r.get("dry_run") is True
h = {a: hashlib.sha256(p.encode()).hexdigest() for a, p in r["prompts"].items() if a != "skip"}
print(json.dumps({"prompt_sha256": h}))
"#;
        let t = CommandTarget {
            command: vec!["python3".into(), "-c".into(), py.into()],
            ..script("")
        };
        t.dry_check(&names(&["a", "b"])).await.unwrap();
        let e = t.dry_check(&names(&["a", "skip"])).await.unwrap_err();
        assert!(e.to_string().contains("skip: no hash in the reply"), "{e}");
    }

    fn answer_case() -> TargetRequest {
        let state = json!({"plan": "pro", "country": "FR"});
        TargetRequest {
            question: "Can I export?".into(),
            files: Vec::new(),
            user_state: state.as_object().cloned(),
            context: Some(vec![
                TargetContext {
                    entity: Some("export-guide".into()),
                    text: "Pro plans export to CSV.".into(),
                },
                TargetContext {
                    entity: None,
                    text: "Exports run nightly.".into(),
                },
            ]),
        }
    }

    #[tokio::test]
    async fn an_answer_case_sends_state_and_context_and_reads_the_contexts_used() {
        // Echoes what it received: the reply names the state and the first context, and says
        // it used only the first context.
        let py = r#"
import sys, json
r = json.load(sys.stdin)
ctx = r["context"]
answer = r["user_state"]["plan"] + "|" + ctx[0]["text"] + "|" + str(len(ctx)) + "|" + str("entity" in ctx[1])
print(json.dumps({"final_answer": answer, "contexts": [ctx[0], {"text": "own note"}],
                  "trace": [{"agent": "bot", "output": answer}]}))
"#;
        let t = CommandTarget {
            command: vec!["python3".into(), "-c".into(), py.into()],
            ..script("")
        };
        let prompts = BTreeMap::from([("bot".to_owned(), "Be brief.".to_owned())]);
        let r = t.respond(&prompts, &answer_case()).await.unwrap();
        assert_eq!(
            r.answered.final_answer,
            "pro|Pro plans export to CSV.|2|False"
        );
        assert_eq!(r.answered.steps.len(), 1);
        assert_eq!(
            r.contexts,
            Some(vec![
                TargetContext {
                    entity: Some("export-guide".into()),
                    text: "Pro plans export to CSV.".into(),
                },
                TargetContext {
                    entity: None,
                    text: "own note".into(),
                },
            ])
        );
    }

    #[tokio::test]
    async fn an_optimizer_case_sends_neither_state_nor_context() {
        let t = script(
            r#"input=$(cat); case "$input" in *user_state*|*'"context"'*) echo '{"final_answer":"extra keys"}';; *) echo '{"final_answer":"plain"}';; esac"#,
        );
        let prompts = BTreeMap::from([("a".to_owned(), "p".to_owned())]);
        assert_eq!(t.answer(&prompts, "Q?", &[]).await.unwrap(), "plain");
        let body = TargetRequest::question("Q?", &[]).body(&prompts);
        assert_eq!(body, request_body(&prompts, "Q?", &[]));
        let full = answer_case().body(&prompts);
        assert_eq!(full["user_state"]["country"], "FR");
        assert_eq!(full["context"][0]["entity"], "export-guide");
        assert!(full["context"][1].get("entity").is_none(), "{full}");
        // An answer case with an empty state still says so.
        let empty = TargetRequest {
            user_state: Some(serde_json::Map::new()),
            context: Some(Vec::new()),
            ..TargetRequest::question("Q?", &[])
        };
        assert_eq!(empty.body(&prompts)["user_state"], json!({}));
        assert_eq!(empty.body(&prompts)["context"], json!([]));
    }

    #[test]
    fn a_reply_with_malformed_contexts_is_a_bad_reply() {
        let e = parse_answer(
            "t",
            r#"{"final_answer": "x", "contexts": [{"entity": "a"}]}"#,
        )
        .unwrap_err();
        assert!(
            matches!(e, TargetError::BadReply { .. }) && e.to_string().contains("contexts"),
            "{e}"
        );
        let e =
            parse_answer("t", r#"{"final_answer": "x", "contexts": "all of them"}"#).unwrap_err();
        assert!(matches!(e, TargetError::BadReply { .. }), "{e}");
    }

    #[test]
    fn a_reply_may_report_its_tool_calls_in_order() {
        let r = parse_answer(
            "t",
            r#"{"final_answer": "x", "tool_calls": [
                {"name": "find_loan", "arguments": {"book": 42}, "result": "on loan"},
                {"name": "renew_loan", "arguments": "{\"book\": 42}", "is_error": true},
                {"name": "ping"}]}"#,
        )
        .unwrap();
        let calls = r.tool_calls.unwrap();
        assert_eq!(
            calls[0],
            TargetToolCall {
                name: "find_loan".into(),
                arguments: json!({"book": 42}),
                result: Some("on loan".into()),
                is_error: false,
            }
        );
        assert_eq!(
            calls[1].arguments,
            json!({"book": 42}),
            "a JSON string is read"
        );
        assert!(calls[1].is_error && calls[1].result.is_none());
        assert_eq!(calls[2].arguments, json!({}));
        assert_eq!(
            parse_answer("t", r#"{"final_answer": "x"}"#)
                .unwrap()
                .tool_calls,
            None
        );
        assert_eq!(
            parse_answer("t", r#"{"final_answer": "x", "tool_calls": []}"#)
                .unwrap()
                .tool_calls,
            Some(Vec::new())
        );
    }

    #[test]
    fn a_reply_with_malformed_tool_calls_is_a_bad_reply() {
        for (body, why) in [
            (
                r#"{"final_answer": "x", "tool_calls": "some"}"#,
                "tool_calls",
            ),
            (
                r#"{"final_answer": "x", "tool_calls": [{"arguments": {}}]}"#,
                "name",
            ),
            (
                r#"{"final_answer": "x", "tool_calls": [{"name": " "}]}"#,
                "tool_calls[0].name",
            ),
            (
                r#"{"final_answer": "x", "tool_calls": [{"name": "a", "arguments": [1]}]}"#,
                "tool_calls[0].arguments",
            ),
        ] {
            let e = parse_answer("t", body).unwrap_err();
            assert!(
                matches!(e, TargetError::BadReply { .. }) && e.to_string().contains(why),
                "{body}: {e}"
            );
        }
    }

    #[tokio::test]
    async fn the_chain_gets_the_context_as_files_and_the_state_as_a_section() {
        let model = Arc::new(Echo::default());
        let target = chain(&["planner", "finalizer"], &model);
        let prompts: BTreeMap<String, String> = [("planner", "P"), ("finalizer", "F")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
        let mut case = answer_case();
        case.files.push(TargetFile {
            path: "case.txt".into(),
            text: "from the case".into(),
        });
        let r = target.respond(&prompts, &case).await.unwrap();
        assert_eq!(r.answered.final_answer, "F");
        assert_eq!(r.contexts, None, "the chain reports no contexts of its own");
        {
            let seen = model.0.lock().unwrap();
            for request in seen.iter() {
                let user = &request.messages[0].content;
                assert!(
                    user.contains("## export-guide\nPro plans export to CSV."),
                    "{user}"
                );
                assert!(
                    user.contains("## context-2\nExports run nightly."),
                    "{user}"
                );
                assert!(user.contains("## case.txt\nfrom the case"), "{user}");
                assert!(user.contains("# User state\n"), "{user}");
                assert!(user.contains(r#""plan": "pro""#), "{user}");
                // The case's files first, then the context in rank order.
                let at = |needle: &str| user.find(needle).unwrap();
                assert!(at("## case.txt") < at("## export-guide"));
                assert!(at("## export-guide") < at("## context-2"));
            }
        }
        // An empty state adds no section, and without context the optimizer's requests are
        // unchanged.
        model.0.lock().unwrap().clear();
        let plain = TargetRequest {
            user_state: Some(serde_json::Map::new()),
            context: Some(Vec::new()),
            ..TargetRequest::question("Why?", &[])
        };
        target.respond(&prompts, &plain).await.unwrap();
        target.answer(&prompts, "Why?", &[]).await.unwrap();
        let seen = model.0.lock().unwrap();
        assert_eq!(seen.len(), 4);
        assert!(!seen[0].messages[0].content.contains("# User state"));
        assert!(!seen[0].messages[0].content.contains("# Attached files"));
        assert_eq!(seen[0], seen[2]);
        assert_eq!(seen[1], seen[3]);
    }
}
