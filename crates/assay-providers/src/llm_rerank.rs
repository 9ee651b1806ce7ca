//! [`LlmReranker`]: listwise reranking by a chat model.
//!
//! The model sees the query and every candidate's id, title and summary, and answers with strict
//! JSON `{"ranked_ids": ["id", ...]}`, best first, asked for and checked through
//! [`ask_structured`](crate::ask_structured) (the schema in the request; a reply that is not such
//! an object, or names none of the candidates, gets a corrective turn,
//! [`LlmReranker::DEFAULT_RETRIES`] times by default, then is reported as
//! [`ProviderErrorKind::Malformed`](crate::ProviderErrorKind::Malformed), quoting the start of
//! the reply). Unknown ids in a usable reply are dropped, repeats removed, the list cut to
//! `top_k`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;

use serde::Deserialize;
use serde_json::json;

use crate::chat::{ChatModel, ChatRequest};
use crate::rerank::{Ranked, RerankDocument, Reranker, Reranking};
use crate::structured::{SchemaCheck, ask_structured};
use crate::{ProviderError, RequestCost};

/// The system prompt of every reranking call.
const SYSTEM_PROMPT: &str = "You are a precise search-relevance judge. You rank knowledge-base \
entries by how useful they are for answering or handling a user's message. You answer with \
strict JSON only: no prose, no code fences.";

/// A reranker that asks a chat model to order the candidates (listwise).
#[derive(Debug, Clone)]
pub struct LlmReranker {
    chat: Arc<dyn ChatModel>,
    name: String,
    retries: u32,
}

impl LlmReranker {
    /// How many times an unparsable reply is asked again by default.
    pub const DEFAULT_RETRIES: u32 = 2;

    /// A reranker over `chat`, named `llm:<chat model name>`.
    pub fn new(chat: Arc<dyn ChatModel>) -> LlmReranker {
        LlmReranker {
            name: format!("llm:{}", chat.model()),
            chat,
            retries: Self::DEFAULT_RETRIES,
        }
    }

    /// Asks again at most `retries` times when a reply cannot be parsed.
    pub fn with_retries(mut self, retries: u32) -> LlmReranker {
        self.retries = retries;
        self
    }

    /// The chat request sent for `query` and `documents`.
    pub fn request(query: &str, documents: &[RerankDocument], top_k: usize) -> ChatRequest {
        let mut prompt = String::new();
        let _ = write!(prompt, "User message:\n{}\n\nCandidates:\n", query.trim());
        for document in documents {
            let _ = write!(
                prompt,
                "\n- id: {}\n  title: {}\n  summary: {}\n",
                document.id,
                one_line(&document.title),
                one_line(&document.summary)
            );
        }
        let _ = write!(
            prompt,
            "\nRank the candidates by relevance to the user message, most relevant first, and \
             return the ids of the best {top_k} (or fewer, if there are fewer candidates). Use \
             only ids from the list above, each at most once. Answer with this JSON and nothing \
             else:\n{{\"ranked_ids\": [\"<id>\", ...]}}"
        );
        let longest_id = documents.iter().map(|d| d.id.len()).max().unwrap_or(0);
        let budget = 64 + top_k.min(documents.len()) * (longest_id + 6);
        ChatRequest::new(
            Some(SYSTEM_PROMPT.to_owned()),
            prompt,
            u32::try_from(budget.clamp(256, 4096)).unwrap_or(4096),
        )
    }
}

/// Collapses whitespace so a multi-line summary stays on its line of the prompt: the words of
/// `split_whitespace`, joined by single spaces, in one pass (it runs for every candidate of
/// every request).
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        if c.is_whitespace() {
            gap = !out.is_empty();
        } else {
            if gap {
                out.push(' ');
                gap = false;
            }
            out.push(c);
        }
    }
    out
}

/// The answer's shape.
#[derive(Debug, Deserialize)]
struct RankedIds {
    ranked_ids: Vec<String>,
}

/// The reply schema: an object with an array of id strings.
fn schema() -> Result<SchemaCheck, ProviderError> {
    SchemaCheck::new(
        "ranking",
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["ranked_ids"],
            "properties": {"ranked_ids": {"type": "array", "items": {"type": "string"}}}
        }),
    )
}

/// Maps ids to document indices: known ids only, first occurrence, at most `top_k`.
fn order_of(ids: &[String], documents: &[RerankDocument], top_k: usize) -> Vec<Ranked> {
    let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(documents.len());
    for (index, document) in documents.iter().enumerate() {
        by_id.entry(document.id.as_str()).or_insert(index);
    }
    let mut seen = HashSet::new();
    ids.iter()
        .filter_map(|id| by_id.get(id.trim()).copied())
        .filter(|index| seen.insert(*index))
        .take(top_k)
        .map(|index| Ranked { index, score: None })
        .collect()
}

/// A usable answer names at least one candidate (or, when empty, names nothing wrong).
fn check_ids(ids: &RankedIds, documents: &[RerankDocument]) -> Result<(), String> {
    if !ids.ranked_ids.is_empty() && order_of(&ids.ranked_ids, documents, 1).is_empty() {
        return Err("`ranked_ids` names none of the candidate ids".to_owned());
    }
    Ok(())
}

#[async_trait]
impl Reranker for LlmReranker {
    fn model(&self) -> &str {
        &self.name
    }

    fn with_chat(
        &self,
        wrap: &dyn Fn(Arc<dyn ChatModel>) -> Option<Arc<dyn ChatModel>>,
    ) -> Option<Arc<dyn Reranker>> {
        let chat = wrap(Arc::clone(&self.chat))?;
        Some(Arc::new(LlmReranker {
            chat,
            name: self.name.clone(),
            retries: self.retries,
        }))
    }

    fn request_cost(&self, query: &str, documents: &[RerankDocument], top_k: usize) -> RequestCost {
        RequestCost::of_chat(&LlmReranker::request(query, documents, top_k))
    }

    async fn rerank(
        &self,
        query: &str,
        documents: &[RerankDocument],
        top_k: usize,
    ) -> Result<Reranking, ProviderError> {
        self.rerank_sample(query, documents, top_k, 0).await
    }

    fn is_stochastic(&self) -> bool {
        true
    }

    fn operation(&self) -> &'static str {
        "chat"
    }

    async fn rerank_sample(
        &self,
        query: &str,
        documents: &[RerankDocument],
        top_k: usize,
        sample: u32,
    ) -> Result<Reranking, ProviderError> {
        if documents.is_empty() || top_k == 0 {
            return Ok(Reranking::default());
        }
        let mut request = LlmReranker::request(query, documents, top_k);
        if sample > 0 {
            request.seed = Some(u64::from(sample));
        }
        let schema = schema()?;
        let answer = ask_structured::<RankedIds>(
            self.chat.as_ref(),
            request,
            &schema,
            self.retries,
            &|ids| check_ids(ids, documents),
        )
        .await
        .map_err(|e| {
            // Keep the chat model's own name on its error; tag untagged ones with ours.
            if e.model().is_some() {
                e
            } else {
                e.with_model(self.name.clone())
            }
        })?;
        Ok(Reranking {
            order: order_of(&answer.value.ranked_ids, documents, top_k),
            usage: answer.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(ids: &[&str]) -> Vec<RerankDocument> {
        ids.iter()
            .map(|id| RerankDocument {
                id: (*id).to_owned(),
                title: format!("Title {id}"),
                summary: format!("Summary of\n{id}"),
            })
            .collect()
    }

    #[test]
    fn one_line_collapses_whitespace_like_split_whitespace() {
        let slow = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        for text in [
            "Gray rock: stay brief and dull",
            "",
            " leading",
            "trailing ",
            "two  spaces",
            "line\nbreak",
            "tab\there",
            "vertical\u{b}tab",
            "form\u{c}feed\r\n",
            "no\u{a0}break space",
            "café au lait",
        ] {
            assert_eq!(one_line(text), slow(text), "{text:?}");
        }
    }

    fn indices(order: &[Ranked]) -> Vec<usize> {
        order.iter().map(|r| r.index).collect()
    }

    fn parse(reply: &str, d: &[RerankDocument], top_k: usize) -> Result<Vec<usize>, String> {
        let (ids, _) = schema()
            .unwrap()
            .parse::<RankedIds>(reply, &|ids| check_ids(ids, d))?;
        Ok(indices(&order_of(&ids.ranked_ids, d, top_k)))
    }

    #[test]
    fn parses_plain_fenced_and_wrapped_json() {
        let d = docs(&["a", "b", "c"]);
        for reply in [
            r#"{"ranked_ids": ["c", "a"]}"#,
            "```json\n{\"ranked_ids\": [\"c\", \"a\"]}\n```",
            "Here you go: {\"note\": {\"x\": 1}} then {\"ranked_ids\": [\"c\",\"a\"]} hope it helps",
        ] {
            assert_eq!(parse(reply, &d, 5), Ok(vec![2, 0]), "{reply}");
        }
    }

    #[test]
    fn drops_unknown_and_repeated_ids_and_cuts_to_top_k() {
        let d = docs(&["a", "b", "c", "d"]);
        let reply = r#"{"ranked_ids": ["x", "b", "b", "d", "a", "c"]}"#;
        assert_eq!(parse(reply, &d, 2), Ok(vec![1, 3]));
        assert_eq!(parse(reply, &d, 10), Ok(vec![1, 3, 0, 2]));
        let none = parse(r#"{"ranked_ids": ["x"]}"#, &d, 2).unwrap_err();
        assert!(none.contains("none of the candidate ids"), "{none}");
        assert_eq!(parse(r#"{"ranked_ids": []}"#, &d, 2), Ok(vec![]));
    }

    #[test]
    fn rejects_replies_without_ranked_ids() {
        let d = docs(&["a"]);
        for reply in [
            "a, b",
            r#"{"ids": ["a"]}"#,
            r#"{"ranked_ids": "a"}"#,
            r#"{"ranked_ids": [{"id": "a"}]}"#,
            "{\"ranked_ids\": [\"a\"",
        ] {
            assert!(parse(reply, &d, 2).is_err(), "{reply}");
        }
    }

    #[test]
    fn prompt_lists_every_candidate_on_its_own_lines() {
        let request = LlmReranker::request("  my ex emailed me ", &docs(&["e1", "e2"]), 1);
        let prompt = &request.messages[0].content;
        assert!(
            prompt.starts_with("User message:\nmy ex emailed me\n"),
            "{prompt}"
        );
        assert!(prompt.contains("- id: e2\n  title: Title e2\n  summary: Summary of e2\n"));
        assert!(prompt.contains("the best 1 "), "{prompt}");
        assert!(prompt.ends_with(r#"{"ranked_ids": ["<id>", ...]}"#));
        assert_eq!(request.temperature, Some(0.0));
        assert_eq!(request.max_tokens, 256);
    }
}
