//! One conversation: the simulated user and the model under test take turns; the model's tool
//! calls go to the MCP servers and their results back to the model.
//!
//! Turn order is fixed by construction: user, assistant, user, … — never two user turns in a
//! row. The simulated user sees the conversation from its side: its own turns as `assistant`,
//! the assistant's replies as `user`, after an opening user turn that sets the scene (both APIs
//! want the first turn to be the user's).
//!
//! Each turn a model wrote records what its calls took ([`TurnUsage`]): wall time, tokens and
//! their cost at the caller's price, as seen through the call wrapper (so a cache hit shows as
//! one: no request sent, no time measured).

use std::sync::Arc;
use std::time::{Duration, Instant};

use assay_core::simulation::{Ending, Speaker, ToolCallRecord, Transcript, Turn, TurnUsage};
use assay_providers::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, Price, ProviderError, ToolCall, ToolChoice,
    ToolResult,
};
use chrono::{SecondsFormat, Utc};
use serde_json::Value;

use crate::mcp::{McpConnection, McpError, OfferedTool};
use crate::suite::Scenario;

/// Tokens the model under test may answer with per call.
pub const ASSISTANT_MAX_TOKENS: u32 = 2048;
/// Tokens the simulated user may answer with.
pub const SIMULATOR_MAX_TOKENS: u32 = 600;
/// Times an empty or refused simulated-user reply is asked again.
pub const SIMULATOR_RETRIES: u32 = 2;

/// The current time as the transcript records it (RFC 3339, milliseconds, UTC).
pub fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// What stopped a conversation early: not the model's fault, so no score.
#[derive(Debug, thiserror::Error)]
pub enum InfraError {
    /// A model call failed after the wrapper's retries.
    #[error("{role}: {error}")]
    Provider {
        /// `model under test`, `simulated user` or `judge`.
        role: &'static str,
        /// The error.
        error: ProviderError,
    },
    /// An MCP server failed.
    #[error(transparent)]
    Mcp(#[from] McpError),
    /// The simulated user gave no usable reply.
    #[error("simulated user: {0}")]
    Simulator(String),
}

/// A rewrite of every tool result on its way to the model under test (`assay redteam`'s
/// tool-injection: the transcript records what the model saw): the tool's name, its result.
pub type ToolTap = Arc<dyn Fn(&str, &mut String) + Send + Sync>;

/// What one conversation needs.
pub struct Conversation<'a> {
    /// The model under test.
    pub assistant: &'a Arc<dyn ChatModel>,
    /// The simulated user.
    pub simulator: &'a Arc<dyn ChatModel>,
    /// The model under test's system prompt.
    pub system_prompt: &'a str,
    /// The scenario.
    pub scenario: &'a Scenario,
    /// Which repeat (1-based).
    pub repeat: u32,
    /// The stop token.
    pub stop_token: &'a str,
    /// Tool rounds per assistant turn.
    pub max_tool_rounds: u32,
    /// The servers of this run.
    pub connections: &'a [McpConnection],
    /// Their tools.
    pub tools: &'a [OfferedTool],
    /// The model under test's price (`[providers.prices]`, else built in), when known: each
    /// assistant turn's cost.
    pub assistant_price: Option<Price>,
    /// The simulated user's price, when known.
    pub simulator_price: Option<Price>,
    /// Rewrites each tool result before the model sees it.
    pub tool_tap: Option<&'a ToolTap>,
}

/// What one turn's model calls took, while the turn is under way ([`TurnUsage`] once done).
#[derive(Debug, Default)]
struct Meter {
    calls: u32,
    cache_hits: u32,
    latency: Duration,
    input_tokens: u64,
    output_tokens: u64,
}

impl Meter {
    /// One call of `model`, timed (wall clock, the wrapper's retries and waits included) and
    /// counted. A response that needed no request came from the call cache (the chat
    /// providers send one request a call).
    async fn chat(
        &mut self,
        model: &Arc<dyn ChatModel>,
        request: &ChatRequest,
    ) -> Result<ChatResponse, ProviderError> {
        let started = Instant::now();
        let response = model.chat(request).await?;
        self.latency += started.elapsed();
        self.calls += 1;
        if response.usage.requests == 0 {
            self.cache_hits += 1;
        }
        self.input_tokens += response.usage.input_tokens;
        self.output_tokens += response.usage.output_tokens;
        Ok(response)
    }

    /// The turn's usage, its tokens priced at `price`.
    fn finish(self, price: Option<Price>) -> TurnUsage {
        TurnUsage {
            calls: self.calls,
            cache_hits: self.cache_hits,
            latency_ms: (self.cache_hits == 0)
                .then(|| u64::try_from(self.latency.as_millis()).unwrap_or(u64::MAX)),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost_usd: price.map(|p| {
                (self.input_tokens as f64 * p.input + self.output_tokens as f64 * p.output) / 1e6
            }),
        }
    }
}

/// The simulated user's system prompt: the persona, then the rules of the game.
pub fn simulator_system_prompt(persona: &str, stop_token: &str) -> String {
    format!(
        "{persona}\n\n---\nYou are playing the user described above in a conversation with an \
         assistant, to test the assistant. Stay in character the whole time: use only the facts \
         given above (do not invent new ones), keep to the goals and the way of talking described, \
         and never act as the assistant. Each reply is only your next message to the assistant, \
         with no narration, stage directions or quotation marks. When your goal is reached, or \
         the conversation has clearly run its course, end your last message with {stop_token} \
         (your message may be only {stop_token})."
    )
}

/// The opening turn the simulated user sees before its own first message.
const SIMULATOR_OPENING: &str =
    "(The conversation begins. Send your first message to the assistant.)";

/// A refusal or out-of-character meta reply from the simulated user's model.
fn is_refusal(text: &str) -> bool {
    let t = text.trim_start().to_ascii_lowercase();
    [
        "i can't roleplay",
        "i cannot roleplay",
        "i'm sorry, but i can",
        "as an ai",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

impl Conversation<'_> {
    /// Runs the conversation. An infrastructure failure ends it early with
    /// [`Ending::Error`] and the error in the transcript.
    pub async fn run(&self) -> Transcript {
        let started_at = now();
        let config = &self.scenario.config;
        let mut transcript = Transcript {
            scenario_id: config.id.clone(),
            repeat: self.repeat,
            model: self.assistant.model().to_owned(),
            simulator_model: self.simulator.model().to_owned(),
            turns: Vec::new(),
            ended_by: Ending::MaxTurns,
            error: None,
            started_at: started_at.clone(),
            ended_at: started_at,
            stop_usage: None,
        };
        let result = self.converse(&mut transcript).await;
        if let Err(e) = result {
            transcript.ended_by = Ending::Error;
            transcript.error = Some(e.to_string());
        }
        transcript.ended_at = now();
        transcript
    }

    async fn converse(&self, transcript: &mut Transcript) -> Result<(), InfraError> {
        let config = &self.scenario.config;
        // The model under test's view.
        let mut history: Vec<ChatMessage> = Vec::new();
        let mut user_message = config.initial_message.clone();
        let mut user_turns = 1u32;
        // The opening message is the scenario's: no model call made it.
        let mut user_usage: Option<TurnUsage> = None;
        loop {
            transcript.turns.push(Turn {
                role: Speaker::User,
                content: user_message.clone(),
                tool_calls: Vec::new(),
                timestamp: now(),
                usage: user_usage.take(),
            });
            history.push(ChatMessage::user(user_message.clone()));
            let (reply, calls, usage) = self.assistant_turn(&mut history).await?;
            transcript.turns.push(Turn {
                role: Speaker::Assistant,
                content: reply,
                tool_calls: calls,
                timestamp: now(),
                usage: Some(usage),
            });
            if user_turns >= config.max_turns {
                transcript.ended_by = Ending::MaxTurns;
                return Ok(());
            }
            let (next, usage) = self.simulated_user_turn(transcript).await?;
            user_usage = Some(usage);
            user_turns += 1;
            match next.split_once(self.stop_token) {
                Some((before, after)) => {
                    let said = format!("{}{}", before.trim(), after.trim());
                    let said = said.trim();
                    if said.is_empty() {
                        transcript.stop_usage = user_usage.take();
                    } else {
                        transcript.turns.push(Turn {
                            role: Speaker::User,
                            content: said.to_owned(),
                            tool_calls: Vec::new(),
                            timestamp: now(),
                            usage: user_usage.take(),
                        });
                    }
                    transcript.ended_by = Ending::StopToken;
                    return Ok(());
                }
                None => next.trim().clone_into(&mut user_message),
            }
        }
    }

    /// One assistant turn: calls the model, runs its tool calls, feeds results back, until it
    /// answers without tools or the round limit is reached (then once more with tools off).
    /// Returns the reply, the tool calls and what the model's calls took.
    async fn assistant_turn(
        &self,
        history: &mut Vec<ChatMessage>,
    ) -> Result<(String, Vec<ToolCallRecord>, TurnUsage), InfraError> {
        let specs: Vec<_> = self.tools.iter().map(|t| t.spec.clone()).collect();
        let mut records = Vec::new();
        let mut rounds = 0u32;
        let mut meter = Meter::default();
        loop {
            let mut request = ChatRequest::conversation(
                Some(self.system_prompt.to_owned()),
                history.clone(),
                ASSISTANT_MAX_TOKENS,
            );
            if !specs.is_empty() {
                request.tools.clone_from(&specs);
                if rounds >= self.max_tool_rounds {
                    request.tool_choice = Some(ToolChoice::None);
                }
            }
            let response = meter
                .chat(self.assistant, &request)
                .await
                .map_err(|error| InfraError::Provider {
                    role: "model under test",
                    error,
                })?;
            if response.tool_calls.is_empty() || rounds >= self.max_tool_rounds {
                history.push(ChatMessage::assistant(response.text.clone()));
                return Ok((response.text, records, meter.finish(self.assistant_price)));
            }
            rounds += 1;
            let mut results = Vec::with_capacity(response.tool_calls.len());
            for call in &response.tool_calls {
                let record = self.execute(call).await?;
                results.push(ToolResult {
                    call_id: call.id.clone(),
                    content: record.result.clone(),
                    is_error: record.is_error,
                });
                records.push(record);
            }
            history.push(ChatMessage::assistant_with_tools(
                response.text,
                response.tool_calls,
            ));
            history.push(ChatMessage::tool_results(results));
        }
    }

    /// Runs one tool call. A tool error, an unknown tool or bad arguments are results the model
    /// sees; a server that fails is an [`InfraError`].
    async fn execute(&self, call: &ToolCall) -> Result<ToolCallRecord, InfraError> {
        let started = Instant::now();
        let mut record = ToolCallRecord {
            id: call.id.clone(),
            name: call.name.clone(),
            server: None,
            arguments: call.arguments.clone(),
            result: String::new(),
            is_error: true,
            duration_ms: 0,
        };
        let tool = self.tools.iter().find(|t| t.spec.name == call.name);
        let connection = tool.map(|t| &self.connections[t.server]);
        // A call refused before it reaches a server (an unknown tool, arguments that are not an
        // object) is a span too: the model made it, and it failed.
        let span = assay_telemetry::genai::tool_call(
            &call.name,
            &call.id,
            connection.map(McpConnection::name),
        );
        assay_telemetry::genai::content(&span, assay_telemetry::genai::TOOL_ARGUMENTS, || {
            call.arguments.to_string()
        });
        let refuse = |mut record: ToolCallRecord, kind: &str, why: String| {
            span.fail(kind, why.clone());
            span.end();
            record.result = why;
            record
        };
        let (Some(tool), Some(connection)) = (tool, connection) else {
            return Ok(refuse(
                record,
                "unknown_tool",
                format!("Unknown tool `{}`.", call.name),
            ));
        };
        record.server = Some(connection.name().to_owned());
        let arguments = match &call.arguments {
            Value::Object(map) => map.clone(),
            Value::Null => serde_json::Map::new(),
            Value::String(raw) => {
                return Ok(refuse(
                    record,
                    "bad_arguments",
                    format!("The arguments are not valid JSON: {raw}"),
                ));
            }
            other => {
                return Ok(refuse(
                    record,
                    "bad_arguments",
                    format!("The arguments must be a JSON object, not {other}"),
                ));
            }
        };
        let outcome = match connection.call_tool(&tool.name, arguments).await {
            Ok(outcome) => outcome,
            Err(e) => {
                span.fail("mcp", e.to_string());
                span.end();
                return Err(e.into());
            }
        };
        assay_telemetry::genai::content(&span, assay_telemetry::genai::TOOL_RESULT, || {
            outcome.text.clone()
        });
        if outcome.is_error {
            span.fail("tool_error", "the tool answered with an error");
        }
        span.end();
        record.result = outcome.text;
        if let Some(tap) = self.tool_tap {
            tap(&record.name, &mut record.result);
        }
        record.is_error = outcome.is_error;
        record.duration_ms = started.elapsed().as_millis() as u64;
        Ok(record)
    }

    /// The simulated user's next message (retried when empty or a refusal) and what its calls
    /// took, retries included.
    async fn simulated_user_turn(
        &self,
        transcript: &Transcript,
    ) -> Result<(String, TurnUsage), InfraError> {
        let config = &self.scenario.config;
        let mut messages = vec![ChatMessage::user(SIMULATOR_OPENING)];
        for turn in &transcript.turns {
            messages.push(match turn.role {
                Speaker::User => ChatMessage::assistant(turn.content.clone()),
                Speaker::Assistant => ChatMessage::user(if turn.content.trim().is_empty() {
                    "(no reply)".to_owned()
                } else {
                    turn.content.clone()
                }),
            });
        }
        let mut request = ChatRequest::conversation(
            Some(simulator_system_prompt(
                &config.persona_prompt,
                self.stop_token,
            )),
            messages,
            SIMULATOR_MAX_TOKENS,
        );
        let mut last = String::new();
        let mut meter = Meter::default();
        for attempt in 0..=SIMULATOR_RETRIES {
            let response = meter
                .chat(self.simulator, &request)
                .await
                .map_err(|error| InfraError::Provider {
                    role: "simulated user",
                    error,
                })?;
            let text = response.text.trim().to_owned();
            if !text.is_empty() && !is_refusal(&text) {
                return Ok((text, meter.finish(self.simulator_price)));
            }
            tracing::warn!(
                scenario = %config.id,
                attempt,
                reply = %text.chars().take(80).collect::<String>(),
                "the simulated user gave no usable reply; asking again"
            );
            // A changed request, so the call cache cannot hand back the same reply.
            request
                .messages
                .push(ChatMessage::assistant(if text.is_empty() {
                    "(nothing)".to_owned()
                } else {
                    text.clone()
                }));
            request.messages.push(ChatMessage::user(
                "(That was not a message from your character. Reply in character with your next \
                 message to the assistant.)",
            ));
            last = text;
        }
        Err(InfraError::Simulator(format!(
            "no usable reply after {} attempts (last: {:?})",
            SIMULATOR_RETRIES + 1,
            last.chars().take(80).collect::<String>()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use assay_providers::Usage;

    use crate::suite::ScenarioConfig;

    /// A chat model that answers from a script, each call after `delay`, reporting `usage`.
    #[derive(Debug)]
    struct Scripted {
        name: &'static str,
        replies: Mutex<Vec<&'static str>>,
        delay: Duration,
        usage: Usage,
    }

    #[async_trait::async_trait]
    impl ChatModel for Scripted {
        fn model(&self) -> &str {
            self.name
        }
        async fn chat(&self, _request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
            tokio::time::sleep(self.delay).await;
            let mut replies = self
                .replies
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let text = if replies.is_empty() {
                "(script over)"
            } else {
                replies.remove(0)
            };
            Ok(ChatResponse {
                text: text.to_owned(),
                usage: self.usage,
                ..ChatResponse::default()
            })
        }
    }

    fn scripted(
        name: &'static str,
        replies: Vec<&'static str>,
        delay_ms: u64,
        usage: (u64, u64, u32),
    ) -> Arc<dyn ChatModel> {
        Arc::new(Scripted {
            name,
            replies: Mutex::new(replies),
            delay: Duration::from_millis(delay_ms),
            usage: Usage {
                input_tokens: usage.0,
                output_tokens: usage.1,
                requests: usage.2,
            },
        })
    }

    fn scenario(max_turns: u32) -> Scenario {
        let config: ScenarioConfig = serde_json::from_value(serde_json::json!({
            "id": "chores", "name": "Chores", "description": "d",
            "persona_prompt": "You are Will.", "initial_message": "Hi, log my chores.",
            "max_turns": max_turns
        }))
        .expect("a valid scenario");
        Scenario {
            path: "chores.yaml".into(),
            config,
            weights: std::collections::BTreeMap::new(),
            assertions: None,
        }
    }

    async fn converse(
        assistant: &Arc<dyn ChatModel>,
        simulator: &Arc<dyn ChatModel>,
        scenario: &Scenario,
        prices: (Option<Price>, Option<Price>),
    ) -> Transcript {
        Conversation {
            assistant,
            simulator,
            system_prompt: "Help.",
            scenario,
            repeat: 1,
            stop_token: "[[DONE]]",
            max_tool_rounds: 3,
            connections: &[],
            tools: &[],
            assistant_price: prices.0,
            simulator_price: prices.1,
            tool_tap: None,
        }
        .run()
        .await
    }

    #[tokio::test]
    async fn each_turn_records_its_model_s_latency_tokens_and_cost() {
        const DELAY: u64 = 30;
        let assistant = scripted(
            "test/assistant",
            vec!["Logged.", "Done."],
            DELAY,
            (350, 120, 1),
        );
        // The simulated user refuses once (asked again: two calls in its turn), then ends with
        // only the stop token (no turn of its own).
        let simulator = scripted(
            "test/user",
            vec!["As an AI, I cannot.", "Also the lawn.", "[[DONE]]"],
            5,
            (80, 10, 1),
        );
        let price = Price {
            input: 3.0,
            output: 15.0,
        };
        let t = converse(&assistant, &simulator, &scenario(5), (Some(price), None)).await;
        assert_eq!(t.ended_by, Ending::StopToken, "{:?}", t.error);
        let roles: Vec<Speaker> = t.turns.iter().map(|t| t.role).collect();
        assert_eq!(
            roles,
            [
                Speaker::User,
                Speaker::Assistant,
                Speaker::User,
                Speaker::Assistant
            ]
        );
        assert_eq!(t.turns[0].usage, None, "the scenario wrote the opening");
        for turn in [&t.turns[1], &t.turns[3]] {
            let u = turn.usage.as_ref().expect("an assistant turn is measured");
            assert_eq!(u.calls, 1);
            assert_eq!(u.cache_hits, 0);
            assert!(u.latency_ms.is_some_and(|ms| ms >= DELAY), "{u:?}");
            assert_eq!((u.input_tokens, u.output_tokens), (350, 120));
            let cost = u.cost_usd.expect("a known price");
            assert!(
                (cost - (350.0 * 3.0 + 120.0 * 15.0) / 1e6).abs() < 1e-12,
                "{cost}"
            );
        }
        let user = t.turns[2]
            .usage
            .as_ref()
            .expect("the simulated user's turn");
        assert_eq!(
            (user.calls, user.input_tokens, user.output_tokens),
            (2, 160, 20)
        );
        assert!(user.latency_ms.is_some_and(|ms| ms >= 10), "{user:?}");
        assert_eq!(user.cost_usd, None, "an unknown price is no cost, not zero");
        let closing = t.stop_usage.as_ref().expect("the stop-token call");
        assert_eq!((closing.calls, closing.input_tokens), (1, 80));

        let totals = t.usage_of(Speaker::Assistant).expect("measured");
        assert_eq!(
            (totals.calls, totals.input_tokens, totals.output_tokens),
            (2, 700, 240)
        );
        assert!(totals.latency_ms.is_some_and(|ms| ms >= 2 * DELAY));
        let totals = t.usage_of(Speaker::User).expect("measured");
        assert_eq!((totals.calls, totals.output_tokens), (3, 30));
    }

    #[tokio::test]
    async fn a_cached_call_has_tokens_and_cost_but_no_latency() {
        // No request sent: the call wrapper answered from its cache.
        let assistant = scripted("test/assistant", vec!["Logged."], 0, (350, 120, 0));
        let simulator = scripted("test/user", vec![], 0, (1, 1, 1));
        let price = Price {
            input: 1.0,
            output: 1.0,
        };
        let t = converse(&assistant, &simulator, &scenario(1), (Some(price), None)).await;
        assert_eq!(t.ended_by, Ending::MaxTurns);
        let u = t.turns[1].usage.as_ref().expect("measured");
        assert_eq!((u.calls, u.cache_hits, u.latency_ms), (1, 1, None));
        assert_eq!((u.input_tokens, u.output_tokens), (350, 120));
        assert!(u.cost_usd.is_some_and(|c| (c - 470.0 / 1e6).abs() < 1e-12));
        assert_eq!(t.stop_usage, None);
    }

    #[test]
    fn refusals_are_recognised() {
        assert!(is_refusal("I can't roleplay as a minor."));
        assert!(is_refusal("  As an AI, I cannot"));
        assert!(!is_refusal("i did the dishes and the lawn"));
    }

    #[test]
    fn the_simulator_prompt_names_the_stop_token() {
        let p = simulator_system_prompt("You are Will.", "[[DONE]]");
        assert!(p.starts_with("You are Will.\n"));
        assert!(p.contains("end your last message with [[DONE]]"));
    }
}
