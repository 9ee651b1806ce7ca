//! The OpenTelemetry GenAI conventions assay writes (and `assay traces check` reads): attribute
//! names and the spans built from them.

use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

use crate::Span;

/// `gen_ai.operation.name`: `chat`, `embeddings`, `retrieval`, `execute_tool`, …
pub const OPERATION: &str = "gen_ai.operation.name";
/// `gen_ai.provider.name`: `anthropic`, `openai`, …
pub const PROVIDER: &str = "gen_ai.provider.name";
/// `gen_ai.request.model`.
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.response.model`.
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
/// `gen_ai.request.max_tokens`.
pub const MAX_TOKENS: &str = "gen_ai.request.max_tokens";
/// `gen_ai.request.temperature`.
pub const TEMPERATURE: &str = "gen_ai.request.temperature";
/// `gen_ai.usage.input_tokens`.
pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens`.
pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.input.messages` (content: only with the opt-in).
pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// `gen_ai.output.messages` (content: only with the opt-in).
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// `gen_ai.data_source.id`: the knowledge base a retrieval reads.
pub const DATA_SOURCE: &str = "gen_ai.data_source.id";
/// `gen_ai.retrieval.query.text` (content: only with the opt-in).
pub const QUERY_TEXT: &str = "gen_ai.retrieval.query.text";
/// `gen_ai.retrieval.documents`: `[{"id", "score"}]` as a JSON string, best first.
pub const DOCUMENTS: &str = "gen_ai.retrieval.documents";
/// `gen_ai.tool.name`.
pub const TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`.
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `gen_ai.tool.type`.
pub const TOOL_TYPE: &str = "gen_ai.tool.type";
/// `gen_ai.tool.call.arguments` (content: only with the opt-in).
pub const TOOL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// `gen_ai.tool.call.result` (content: only with the opt-in).
pub const TOOL_RESULT: &str = "gen_ai.tool.call.result";
/// `gen_ai.conversation.id`.
pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `gen_ai.agent.name`.
pub const AGENT_NAME: &str = "gen_ai.agent.name";
/// The event a verdict is.
pub const EVALUATION_EVENT: &str = "gen_ai.evaluation.result";
/// `gen_ai.evaluation.name`.
pub const EVALUATION_NAME: &str = "gen_ai.evaluation.name";
/// `gen_ai.evaluation.score.value`.
pub const EVALUATION_SCORE: &str = "gen_ai.evaluation.score.value";
/// `gen_ai.evaluation.score.label`.
pub const EVALUATION_LABEL: &str = "gen_ai.evaluation.score.label";
/// `gen_ai.evaluation.explanation`.
pub const EVALUATION_EXPLANATION: &str = "gen_ai.evaluation.explanation";
/// `assay.role`: which of assay's roles made a provider call (reranker, calibrator, grader,
/// target, user, assistant, judge, proposer, embedder).
pub const ROLE: &str = "assay.role";
/// `assay.user_state`: the user state a retrieval ran for, a JSON object (content).
pub const USER_STATE: &str = "assay.user_state";
/// `assay.cache_hit`: the answer came from the call cache.
pub const CACHE_HIT: &str = "assay.cache_hit";

/// `vendor/model` split into the provider name and the model (`anthropic/claude-x` →
/// `anthropic`, `claude-x`; `llm:openai/gpt` → `openai`, `gpt`; a bare name has no vendor).
pub fn split_model(spec: &str) -> (Option<&str>, &str) {
    let spec = spec.strip_prefix("llm:").unwrap_or(spec);
    match spec.split_once('/') {
        Some((vendor, model)) if !vendor.is_empty() && !model.is_empty() => (Some(vendor), model),
        _ => (None, spec),
    }
}

/// A client span for a provider call: `{operation} {model}`, kind CLIENT, under the current
/// span.
pub fn provider_call(
    operation: &'static str,
    model_spec: &str,
    role: Option<&'static str>,
) -> Span {
    // Every provider call passes here: with export off, nothing is formatted.
    if !crate::enabled() {
        return Span::default();
    }
    let (vendor, model) = split_model(model_spec);
    Span::start(format!("{operation} {model}"), SpanKind::Client, || {
        let mut a = vec![
            KeyValue::new(OPERATION, operation),
            KeyValue::new(REQUEST_MODEL, model.to_owned()),
        ];
        if let Some(vendor) = vendor {
            a.push(KeyValue::new(PROVIDER, vendor.to_owned()));
        }
        if let Some(role) = role {
            a.push(KeyValue::new(ROLE, role));
        }
        a
    })
}

/// Records token usage.
pub fn usage(span: &Span, input_tokens: u64, output_tokens: u64) {
    span.set_with(|| {
        vec![
            KeyValue::new(
                INPUT_TOKENS,
                i64::try_from(input_tokens).unwrap_or(i64::MAX),
            ),
            KeyValue::new(
                OUTPUT_TOKENS,
                i64::try_from(output_tokens).unwrap_or(i64::MAX),
            ),
        ]
    });
}

/// Records the documents a retrieval returned, best first, with their scores where known.
pub fn documents<'a>(span: &Span, documents: impl IntoIterator<Item = (&'a str, Option<f64>)>) {
    if span.is_recording() {
        span.set(DOCUMENTS, documents_json(documents));
    }
}

/// The documents a retrieval returned as the JSON string [`DOCUMENTS`] holds:
/// `[{"id":…,"score":…}]`, the score left out where unknown or not finite. Written straight
/// into the string (no JSON tree: every exported case span has one).
pub fn documents_json<'a>(documents: impl IntoIterator<Item = (&'a str, Option<f64>)>) -> String {
    #[derive(serde::Serialize)]
    struct Document<'a> {
        id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        score: Option<f64>,
    }
    let mut out = Vec::with_capacity(64);
    out.push(b'[');
    for (i, (id, score)) in documents.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let document = Document {
            id,
            score: score.filter(|s| s.is_finite()),
        };
        // Writing into a Vec cannot fail, and a &str and an f64 always serialize.
        let _ = serde_json::to_writer(&mut out, &document);
    }
    out.push(b']');
    String::from_utf8(out).unwrap_or_default()
}

/// An `execute_tool` span for a tool call, under the current span; `server` is the MCP server
/// that offers the tool (none for a tool nobody offers).
pub fn tool_call(tool: &str, call_id: &str, server: Option<&str>) -> Span {
    if !crate::enabled() {
        return Span::default();
    }
    Span::start(format!("execute_tool {tool}"), SpanKind::Internal, || {
        let mut a = vec![
            KeyValue::new(OPERATION, "execute_tool"),
            KeyValue::new(TOOL_NAME, tool.to_owned()),
            KeyValue::new(TOOL_CALL_ID, call_id.to_owned()),
            KeyValue::new(TOOL_TYPE, "function"),
        ];
        if let Some(server) = server {
            a.push(KeyValue::new("assay.mcp.server", server.to_owned()));
        }
        a
    })
}

/// Records content only with the opt-in.
pub fn content(span: &Span, key: &'static str, text: impl FnOnce() -> String) {
    if span.is_recording() && crate::capture_content() {
        span.set(key, text());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_specs_split_into_provider_and_model() {
        assert_eq!(
            split_model("anthropic/claude-x"),
            (Some("anthropic"), "claude-x")
        );
        assert_eq!(split_model("llm:openai/gpt-4o"), (Some("openai"), "gpt-4o"));
        assert_eq!(
            split_model("local/models/minilm"),
            (Some("local"), "models/minilm")
        );
        assert_eq!(split_model("plain"), (None, "plain"));
    }

    #[test]
    fn documents_are_a_json_list_with_scores_where_known() {
        let json = documents_json([
            ("a", Some(0.5)),
            ("quote\"d", None),
            ("nan", Some(f64::NAN)),
        ]);
        assert_eq!(
            json,
            r#"[{"id":"a","score":0.5},{"id":"quote\"d"},{"id":"nan"}]"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        assert_eq!(parsed[1]["id"], "quote\"d");
        assert_eq!(documents_json([]), "[]");
    }

    #[test]
    fn spans_are_free_and_silent_when_off() {
        let span = provider_call("chat", "openai/m", Some("judge"));
        assert!(!span.is_recording());
        usage(&span, 1, 2);
        documents(&span, [("a", Some(0.5))]);
        span.evaluation(&crate::Evaluation {
            name: "x",
            ..crate::Evaluation::default()
        });
        assert_eq!(span.traceparent(), None);
        span.end();
    }
}
