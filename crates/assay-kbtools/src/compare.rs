//! The dual-read check (003 §7 phase 3): the same messages retrieved from two stores, and the
//! differences in the entities each selects and their order.
//!
//! Each store is read as it is (nothing is imported into either); the entity embeddings each
//! store lacks for the chosen embedder are computed and stored first, as before any retrieval.
//! The messages are embedded once and the same vectors go to both pipelines, so a difference
//! comes from the stores' contents alone.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use assay_core::UserState;
use assay_core::entity::DEFAULT_AUDIENCE;
use assay_kb::datafile::DataError;
use serde::{Deserialize, Serialize};

use crate::HarnessError;
use assay_project::engine::{self, OpenStore};
use assay_project::project::Project;

/// One message to retrieve for.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// A name for it in reports (the test id, or `line N` of a file).
    #[serde(default)]
    pub id: String,
    /// The user's message.
    pub message: String,
    /// The audience (default: the state's `user_type`, else `PARENT`).
    #[serde(default)]
    pub audience: Option<String>,
    /// The user state STATE conditions read.
    #[serde(default)]
    pub user_state: UserState,
}

impl Message {
    /// The audience: `audience`, else the state's `user_type`, else `PARENT`.
    pub fn audience(&self) -> String {
        self.audience
            .clone()
            .or_else(|| {
                self.user_state
                    .get("user_type")
                    .and_then(|v| v.as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| DEFAULT_AUDIENCE.to_owned())
    }
}

/// The semantic bank's prompts, with their test ids and user states.
pub fn bank_messages(project: &Project) -> Vec<Message> {
    project
        .banks
        .semantic
        .iter()
        .map(|located| Message {
            id: located.case.test_id.clone(),
            message: located.case.prompt.clone(),
            audience: None,
            user_state: located.case.user_state.clone(),
        })
        .collect()
}

/// The messages of a file: one per line, or, for a `.jsonl` file, one JSON object per line
/// (`{"message": …, "id"?, "audience"?, "user_state"?}`). Blank lines are skipped. An error
/// names the file and line.
pub fn read_messages(path: &Path) -> Result<Vec<Message>, HarnessError> {
    let text = std::fs::read_to_string(path).map_err(|e| HarnessError::io(path, &e))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let jsonl = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    let mut messages = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let at = |message: String| DataError {
            path: path.to_owned(),
            line: Some(number),
            column: None,
            message,
        };
        let mut message = if jsonl {
            serde_json::from_str::<Message>(line).map_err(|e| at(e.to_string()))?
        } else {
            Message {
                id: String::new(),
                message: line.trim().to_owned(),
                audience: None,
                user_state: UserState::new(),
            }
        };
        if message.message.trim().is_empty() {
            return Err(at("the message is empty".into()).into());
        }
        if message.id.is_empty() {
            message.id = format!("line {number}");
        }
        messages.push(message);
    }
    if messages.is_empty() {
        return Err(DataError::new(path, "no messages in the file").into());
    }
    Ok(messages)
}

/// How one message's selections compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The same entities in the same order.
    Identical,
    /// The same entities in another order.
    Order,
    /// Different entities.
    Entities,
    /// The message could not be embedded (an infrastructure error, not a difference).
    Error,
}

/// One message's selections from both stores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageComparison {
    /// The message's name.
    pub id: String,
    /// The message.
    pub message: String,
    /// How the selections compare.
    pub outcome: Outcome,
    /// The entities store A selected, in order.
    pub a: Vec<String>,
    /// The entities store B selected, in order.
    pub b: Vec<String>,
    /// Selected by A only.
    pub only_a: Vec<String>,
    /// Selected by B only.
    pub only_b: Vec<String>,
    /// The first position (from 1) where the two lists differ.
    pub first_difference: Option<usize>,
    /// Why the message could not be retrieved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl MessageComparison {
    fn new(id: String, message: String, a: Vec<String>, b: Vec<String>) -> MessageComparison {
        let in_a: HashSet<&String> = a.iter().collect();
        let in_b: HashSet<&String> = b.iter().collect();
        let only_a: Vec<String> = a.iter().filter(|e| !in_b.contains(e)).cloned().collect();
        let only_b: Vec<String> = b.iter().filter(|e| !in_a.contains(e)).cloned().collect();
        let first_difference = (0..a.len().max(b.len()))
            .find(|&i| a.get(i) != b.get(i))
            .map(|i| i + 1);
        let outcome = if first_difference.is_none() {
            Outcome::Identical
        } else if only_a.is_empty() && only_b.is_empty() {
            Outcome::Order
        } else {
            Outcome::Entities
        };
        MessageComparison {
            id,
            message,
            outcome,
            a,
            b,
            only_a,
            only_b,
            first_difference,
            error: None,
        }
    }

    /// How far apart the selections are, for "worst first": entities in one only, then how
    /// early the lists part.
    pub fn severity(&self) -> (usize, usize) {
        (
            self.only_a.len() + self.only_b.len(),
            usize::MAX - self.first_difference.unwrap_or(usize::MAX),
        )
    }
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Store A.
    pub a: String,
    /// Store B.
    pub b: String,
    /// The embedder both used.
    pub embedder: String,
    /// Messages compared.
    pub total: usize,
    /// Messages with identical selections.
    pub identical: usize,
    /// Messages whose selections differ only in order.
    pub order: usize,
    /// Messages whose selections hold different entities.
    pub entities: usize,
    /// Messages that could not be retrieved.
    pub errors: usize,
    /// Every message, in input order.
    pub messages: Vec<MessageComparison>,
}

impl Comparison {
    /// Whether every message selected the same entities in the same order.
    pub fn is_identical(&self) -> bool {
        self.identical == self.total
    }

    /// The differing messages, worst first.
    pub fn worst(&self) -> Vec<&MessageComparison> {
        let mut differing: Vec<&MessageComparison> = self
            .messages
            .iter()
            .filter(|m| matches!(m.outcome, Outcome::Order | Outcome::Entities))
            .collect();
        differing.sort_by_key(|m| std::cmp::Reverse(m.severity()));
        differing
    }
}

/// Retrieves `messages` from stores `a` and `b` with the project's retrieval settings and the
/// embedder `embedder_flag` chooses (else the project's), and compares the selections.
pub async fn compare(
    project: &Project,
    a: &OpenStore,
    b: &OpenStore,
    messages: &[Message],
    embedder_flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Comparison, HarnessError> {
    let settings = &project.settings;
    let choice = engine::choose_embedder(settings, embedder_flag, env)?;
    let embedder = engine::build_embedder(&choice)?;
    let prompts: Vec<String> = messages.iter().map(|m| m.message.clone()).collect();
    let queries = engine::embed_queries(embedder.as_ref(), &prompts).await;
    let mut selections: Vec<HashMap<usize, Vec<String>>> = Vec::new();
    for store in [a, b] {
        let kb = engine::snapshot(&**store)?;
        let (pipeline, _) = engine::prepare_pipeline(
            &**store,
            &kb,
            project,
            embedder.as_ref(),
            engine::retrieval_config(settings, &choice),
        )
        .await?;
        let mut selected = HashMap::new();
        for (i, m) in messages.iter().enumerate() {
            if let Some(Ok(query)) = queries.get(&m.message) {
                let retrieval = pipeline
                    .retrieve(&m.message, Some(query), &m.user_state, &m.audience())
                    .map_err(|e| HarnessError::Infrastructure(e.to_string()))?;
                selected.insert(
                    i,
                    retrieval
                        .entities
                        .into_iter()
                        .map(|e| e.entity_id)
                        .collect(),
                );
            }
        }
        selections.push(selected);
    }
    let mut compared = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        if let (Some(sa), Some(sb)) = (selections[0].remove(&i), selections[1].remove(&i)) {
            compared.push(MessageComparison::new(
                m.id.clone(),
                m.message.clone(),
                sa,
                sb,
            ));
        } else {
            let error = match queries.get(&m.message) {
                Some(Err(e)) => e.clone(),
                _ => "the message was not embedded".to_owned(),
            };
            compared.push(MessageComparison {
                id: m.id.clone(),
                message: m.message.clone(),
                outcome: Outcome::Error,
                a: Vec::new(),
                b: Vec::new(),
                only_a: Vec::new(),
                only_b: Vec::new(),
                first_difference: None,
                error: Some(error),
            });
        }
    }
    let count = |o: Outcome| compared.iter().filter(|m| m.outcome == o).count();
    Ok(Comparison {
        a: a.location.to_string(),
        b: b.location.to_string(),
        embedder: embedder.model().to_owned(),
        total: compared.len(),
        identical: count(Outcome::Identical),
        order: count(Outcome::Order),
        entities: count(Outcome::Entities),
        errors: count(Outcome::Error),
        messages: compared,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn selections_compare_by_entities_then_order() {
        let same =
            MessageComparison::new("m".into(), "x".into(), ids(&["a", "b"]), ids(&["a", "b"]));
        assert_eq!(
            (same.outcome, same.first_difference),
            (Outcome::Identical, None)
        );
        let order =
            MessageComparison::new("m".into(), "x".into(), ids(&["a", "b"]), ids(&["b", "a"]));
        assert_eq!(
            (order.outcome, order.first_difference),
            (Outcome::Order, Some(1))
        );
        let other = MessageComparison::new(
            "m".into(),
            "x".into(),
            ids(&["a", "b", "c"]),
            ids(&["a", "d"]),
        );
        assert_eq!(other.outcome, Outcome::Entities);
        assert_eq!(
            (other.only_a, other.only_b),
            (ids(&["b", "c"]), ids(&["d"]))
        );
        assert_eq!(other.first_difference, Some(2));
        let shorter = MessageComparison::new("m".into(), "x".into(), ids(&["a"]), ids(&["a", "b"]));
        assert_eq!(
            (shorter.outcome, shorter.first_difference),
            (Outcome::Entities, Some(2))
        );
    }

    #[test]
    fn message_files_are_lines_or_jsonl() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("messages.txt");
        std::fs::write(&plain, "\u{feff}first message\n\n  second  \n").unwrap();
        let read = read_messages(&plain).unwrap();
        assert_eq!(
            read.iter()
                .map(|m| (m.id.as_str(), m.message.as_str()))
                .collect::<Vec<_>>(),
            [("line 1", "first message"), ("line 3", "second")]
        );
        let jsonl = dir.path().join("messages.jsonl");
        std::fs::write(
            &jsonl,
            "{\"message\": \"hi\", \"audience\": \"CLINICIAN\"}\n{\"message\": \"x\", \"colour\": 1}\n",
        )
        .unwrap();
        let err = read_messages(&jsonl).unwrap_err().to_string();
        assert!(err.contains("messages.jsonl:2"), "{err}");
        assert!(err.contains("unknown field `colour`"), "{err}");
        std::fs::write(&jsonl, "{\"message\": \" \"}\n").unwrap();
        let err = read_messages(&jsonl).unwrap_err().to_string();
        assert!(
            err.contains(":1") && err.contains("the message is empty"),
            "{err}"
        );
        std::fs::write(&plain, "\n \n").unwrap();
        let err = read_messages(&plain).unwrap_err().to_string();
        assert!(err.contains("no messages"), "{err}");
    }
}
