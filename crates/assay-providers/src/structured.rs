//! Structured output: the one way every LLM-as-judge call (calibration, the LLM reranker, rubric
//! graders, the simulator's judge) asks a chat model for JSON and makes sure it got it.
//!
//! [`ask_structured`] puts the JSON schema in the request ([`OutputSchema`]: OpenAI-compatible
//! servers get `response_format: json_schema`, Anthropic a forced tool), then checks the reply in
//! three steps: it must hold a JSON object ([`extract_json`]: the whole reply, else the first
//! `{…}` that parses, which skips code fences and prose), the object must validate against the
//! schema (the `jsonschema` crate, draft 2020-12), and it must deserialise into the caller's type
//! and pass the caller's own check (ids that must exist, sums that must hold). A reply that fails
//! any step is answered with one corrective turn quoting what was wrong — a new request, so the
//! call cache never hands the same bad reply back — at most `retries` times; then the call is a
//! [`ProviderErrorKind::Malformed`](crate::ProviderErrorKind::Malformed) error quoting the start of
//! the last reply. Callers record that as an error, never as a score.

use std::fmt::Write as _;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::{ChatMessage, ChatModel, ChatRequest, OutputSchema};
use crate::text::excerpt;
use crate::{ProviderError, Usage};

/// How many corrective turns [`ask_structured`] allows by default.
pub const DEFAULT_STRUCTURED_RETRIES: u32 = 2;

/// A validated structured answer.
#[derive(Debug, Clone)]
pub struct Structured<T> {
    /// The answer, deserialised and checked.
    pub value: T,
    /// The JSON object it came from.
    pub json: Value,
    /// The raw text of the reply that was used.
    pub raw: String,
    /// Chat calls made (1 when the first reply was good).
    pub calls: u32,
    /// What all those calls consumed together.
    pub usage: Usage,
}

/// A compiled schema, ready to check replies against.
#[derive(Debug)]
pub struct SchemaCheck {
    schema: OutputSchema,
    validator: jsonschema::Validator,
}

impl SchemaCheck {
    /// Compiles `schema`; an invalid schema is a configuration error (a bug in the caller).
    pub fn new(name: &str, schema: Value) -> Result<SchemaCheck, ProviderError> {
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| ProviderError::config(format!("the `{name}` schema is invalid: {e}")))?;
        Ok(SchemaCheck {
            schema: OutputSchema {
                name: name.to_owned(),
                schema,
            },
            validator,
        })
    }

    /// The schema as requests carry it.
    pub fn output_schema(&self) -> &OutputSchema {
        &self.schema
    }

    /// Checks one reply: JSON, the schema, the type, then `check`. The error says what is wrong
    /// in words the model can act on.
    pub fn parse<T: DeserializeOwned>(
        &self,
        reply: &str,
        check: &(dyn Fn(&T) -> Result<(), String> + Sync),
    ) -> Result<(T, Value), String> {
        self.parse_with(reply, &|json: &Value| typed(json, check))
    }

    /// Checks one reply: JSON, the schema, then `parse` turns the valid object into the caller's
    /// value (or says what is wrong with it).
    pub fn parse_with<T>(
        &self,
        reply: &str,
        parse: &(dyn Fn(&Value) -> Result<T, String> + Sync),
    ) -> Result<(T, Value), String> {
        // The first object that follows the schema; else the first object's problems.
        let mut first_problems: Option<Vec<String>> = None;
        let mut chosen = None;
        for json in json_objects(reply) {
            let problems: Vec<String> = self
                .validator
                .iter_errors(&json)
                .take(4)
                .map(|e| {
                    let at = e.instance_path().to_string();
                    if at.is_empty() {
                        e.to_string()
                    } else {
                        format!("at {at}: {e}")
                    }
                })
                .collect();
            if problems.is_empty() {
                chosen = Some(json);
                break;
            }
            first_problems.get_or_insert(problems);
        }
        let json = match (chosen, first_problems) {
            (Some(json), _) => json,
            (None, Some(problems)) => {
                return Err(format!(
                    "the JSON does not follow the schema: {}",
                    problems.join("; ")
                ));
            }
            (None, None) if reply.trim().is_empty() => return Err("the reply was empty".into()),
            (None, None) => return Err("the reply holds no JSON object".into()),
        };
        let value = parse(&json)?;
        Ok((value, json))
    }
}

/// `json` as `T`, then the caller's `check`.
fn typed<T: DeserializeOwned>(
    json: &Value,
    check: &(dyn Fn(&T) -> Result<(), String> + Sync),
) -> Result<T, String> {
    let value: T = serde_json::from_value(json.clone())
        .map_err(|e| format!("the JSON does not have the expected shape: {e}"))?;
    check(&value)?;
    Ok(value)
}

/// The first JSON object in `reply`: the whole reply if it is one, else the first `{` from which
/// one object parses (skipping ```` ```json ```` fences and prose around it).
pub fn extract_json(reply: &str) -> Option<Value> {
    json_objects(reply).next()
}

/// Every JSON object in `reply`, in order: the whole reply if it is one, else each `{` from
/// which an object parses.
fn json_objects(reply: &str) -> impl Iterator<Item = Value> + '_ {
    let whole = match serde_json::from_str(reply.trim()) {
        Ok(value @ Value::Object(_)) => Some(value),
        _ => None,
    };
    let done = whole.is_some();
    whole
        .into_iter()
        .chain(
            reply
                .match_indices('{')
                .filter(move |_| !done)
                .filter_map(|(start, _)| {
                    serde_json::Deserializer::from_str(&reply[start..])
                        .into_iter::<Value>()
                        .next()
                        .and_then(Result::ok)
                        .filter(Value::is_object)
                }),
        )
}

/// One reply of a structured conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StructuredAttempt {
    /// The reply's text.
    pub reply: String,
    /// Why generation stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// What was wrong with it (`None` for the reply that was used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Every reply of a structured conversation and what they consumed together.
#[derive(Debug, Clone, Default)]
pub struct StructuredTrace {
    /// The replies, in order.
    pub attempts: Vec<StructuredAttempt>,
    /// Usage of all calls.
    pub usage: Usage,
}

/// Sends `request` with `schema` and returns the first reply that validates and passes `check`,
/// asking again with a corrective turn at most `retries` times (see the module docs).
///
/// Provider errors (after the call wrapper's own retries) are returned as they are; the final
/// `Malformed` error carries no model name, so the caller tags it with the name of whatever
/// asked (a reranker, a judge).
pub async fn ask_structured<T: DeserializeOwned>(
    chat: &dyn ChatModel,
    request: ChatRequest,
    schema: &SchemaCheck,
    retries: u32,
    check: &(dyn Fn(&T) -> Result<(), String> + Sync),
) -> Result<Structured<T>, ProviderError> {
    let (result, trace) = ask_structured_traced(chat, request, schema, retries, &|json: &Value| {
        typed(json, check)
    })
    .await;
    let (value, json) = result?;
    let calls = trace.attempts.len() as u32;
    let raw = trace
        .attempts
        .into_iter()
        .last()
        .map(|a| a.reply)
        .unwrap_or_default();
    Ok(Structured {
        value,
        json,
        raw,
        calls,
        usage: trace.usage,
    })
}

/// [`ask_structured`] for callers that keep every reply (calibration writes them all to its
/// raw-responses file) and build their value from the validated JSON with `parse`. The trace is
/// returned whatever the outcome; a reply cut off at the token limit says so in its problem.
pub async fn ask_structured_traced<T>(
    chat: &dyn ChatModel,
    mut request: ChatRequest,
    schema: &SchemaCheck,
    retries: u32,
    parse: &(dyn Fn(&Value) -> Result<T, String> + Sync),
) -> (Result<(T, Value), ProviderError>, StructuredTrace) {
    request.output_schema = Some(schema.schema.clone());
    let attempts = retries.saturating_add(1);
    let mut trace = StructuredTrace::default();
    for attempt in 1..=attempts {
        let response = match chat.chat(&request).await {
            Ok(response) => response,
            Err(e) => return (Err(e), trace),
        };
        trace.usage += response.usage;
        match schema.parse_with(&response.text, parse) {
            Ok(found) => {
                trace.attempts.push(StructuredAttempt {
                    reply: response.text,
                    stop_reason: response.stop_reason,
                    problem: None,
                });
                return (Ok(found), trace);
            }
            Err(mut why) => {
                if matches!(
                    response.stop_reason.as_deref(),
                    Some("max_tokens" | "length")
                ) {
                    why.push_str(" (the reply was cut off at the token limit)");
                }
                tracing::warn!(
                    model = chat.model(),
                    schema = %schema.schema.name,
                    attempt,
                    attempts,
                    problem = %why,
                    reply = %excerpt(response.text.trim(), 80),
                    "unusable structured reply"
                );
                let said = if response.text.trim().is_empty() {
                    "(an empty reply)".to_owned()
                } else {
                    response.text.clone()
                };
                request.messages.push(ChatMessage::assistant(said));
                let mut correction = String::new();
                let _ = write!(
                    correction,
                    "That answer cannot be used: {why}. Answer again with only one JSON object \
                     that follows the `{}` schema, with no prose and no code fences.",
                    schema.schema.name
                );
                request.messages.push(ChatMessage::user(correction));
                trace.attempts.push(StructuredAttempt {
                    reply: response.text,
                    stop_reason: response.stop_reason,
                    problem: Some(why),
                });
            }
        }
    }
    let last = trace.attempts.last().cloned().unwrap_or(StructuredAttempt {
        reply: String::new(),
        stop_reason: None,
        problem: None,
    });
    let error = ProviderError::malformed(format!(
        "no usable `{}` answer after {attempts} attempt(s): {} (last reply starts: {:?})",
        schema.schema.name,
        last.problem.as_deref().unwrap_or("no reply"),
        excerpt(last.reply.trim(), 120)
    ))
    .with_attempts(attempts);
    (Err(error), trace)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::ChatResponse;

    #[derive(Debug)]
    struct Scripted {
        replies: Mutex<Vec<&'static str>>,
        seen: Mutex<Vec<ChatRequest>>,
    }

    #[async_trait]
    impl ChatModel for Scripted {
        fn model(&self) -> &'static str {
            "test/scripted"
        }
        async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
            self.seen.lock().unwrap().push(request.clone());
            let text = self.replies.lock().unwrap().remove(0).to_owned();
            Ok(ChatResponse {
                text,
                usage: Usage {
                    requests: 1,
                    input_tokens: 10,
                    output_tokens: 2,
                },
                ..ChatResponse::default()
            })
        }
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Score {
        score: u32,
        reasoning: String,
    }

    fn schema() -> SchemaCheck {
        SchemaCheck::new(
            "score",
            json!({"type": "object", "additionalProperties": false,
                   "required": ["score", "reasoning"],
                   "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10},
                                  "reasoning": {"type": "string"}}}),
        )
        .unwrap()
    }

    fn scripted(replies: Vec<&'static str>) -> Scripted {
        Scripted {
            replies: Mutex::new(replies),
            seen: Mutex::new(Vec::new()),
        }
    }

    fn run<T: DeserializeOwned>(
        model: &Scripted,
        check: &(dyn Fn(&T) -> Result<(), String> + Sync),
    ) -> Result<Structured<T>, ProviderError> {
        let request = ChatRequest::new(None, "grade it", 100);
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(ask_structured(model, request, &schema(), 2, check))
    }

    #[test]
    fn a_good_first_reply_is_one_call_with_the_schema_in_the_request() {
        let model = scripted(vec![
            "```json\n{\"score\": 7, \"reasoning\": \"fine\"}\n```",
        ]);
        let got = run::<Score>(&model, &|_| Ok(())).unwrap();
        assert_eq!(
            got.value,
            Score {
                score: 7,
                reasoning: "fine".into()
            }
        );
        assert_eq!((got.calls, got.usage.requests), (1, 1));
        let seen = model.seen.lock().unwrap();
        assert_eq!(seen[0].output_schema.as_ref().unwrap().name, "score");
    }

    #[test]
    fn schema_violations_get_a_corrective_turn_naming_the_problem() {
        let model = scripted(vec![
            r#"{"score": 11, "reasoning": "too generous"}"#,
            r#"{"score": 9, "reasoning": "ok"}"#,
        ]);
        let got = run::<Score>(&model, &|_| Ok(())).unwrap();
        assert_eq!((got.value.score, got.calls, got.usage.requests), (9, 2, 2));
        let seen = model.seen.lock().unwrap();
        let second = &seen[1].messages;
        assert_eq!(second.len(), 3);
        assert!(second[1].content.contains("too generous"));
        assert!(
            second[2].content.contains("/score") && second[2].content.contains("11"),
            "{}",
            second[2].content
        );
    }

    #[test]
    fn the_callers_check_counts_and_three_bad_replies_are_an_error() {
        let model = scripted(vec![
            "not json at all",
            "",
            r#"{"score": 3, "reasoning": ""}"#,
        ]);
        let err = run::<Score>(&model, &|s: &Score| {
            if s.reasoning.is_empty() {
                Err("reasoning must not be empty".into())
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("3 attempt") && text.contains("reasoning must not be empty"),
            "{text}"
        );
        assert_eq!(err.attempts(), Some(3));
        let seen = model.seen.lock().unwrap();
        assert!(seen[2].messages[3].content.contains("empty"));
    }

    #[test]
    fn extract_json_finds_the_first_object() {
        assert_eq!(extract_json(r#" {"a": 1} "#), Some(json!({"a": 1})));
        assert_eq!(
            extract_json("Sure! {\"a\": {\"b\": 2}} and {\"c\": 3}"),
            Some(json!({"a": {"b": 2}}))
        );
        assert_eq!(extract_json("[1, 2]"), None);
        assert_eq!(extract_json("{\"a\": "), None);
        assert_eq!(extract_json(""), None);
    }

    #[test]
    fn an_invalid_schema_is_a_config_error() {
        let err = SchemaCheck::new("bad", json!({"type": 12})).unwrap_err();
        assert!(err.to_string().contains("`bad` schema is invalid"), "{err}");
    }
}
