//! The deterministic retrieval mechanisms of assay: ALWAYS loading, STATE condition matching
//! and crisis / keyword pattern rules (003 §3, 000 §6.2–6.4).
//!
//! ```
//! use assay_core::bank::PatternRules;
//! use assay_retrieval::patterns::PatternMatcher;
//! let rules: PatternRules = serde_json::from_str(
//!     r#"{"keyword_boosts": [{"keywords": ["gray rock"], "entity": "gray_rock"}]}"#).unwrap();
//! let matcher = PatternMatcher::new(&rules).unwrap();
//! assert_eq!(matcher.matched_entities("Is GRAY ROCK right here?"), vec!["gray_rock"]);
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod lexical;
pub mod patterns;
pub mod pipeline;
pub mod vector;

use assay_core::UserState;
use assay_core::condition::{ConditionError, Conditions};
use assay_core::entity::{Entity, LoadMode};
use assay_kb::{EntityFilter, KbError, KnowledgeBase};

/// Errors of the retrieval mechanisms.
#[derive(Debug, thiserror::Error)]
pub enum RetrievalError {
    /// The knowledge base failed.
    #[error(transparent)]
    Kb(#[from] KbError),
    /// The tokenizer could not be loaded.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// An embedding does not fit the index.
    #[error("vector index: {0}")]
    Index(String),
    /// The pipeline cannot be built as asked (for example an index search with hybrid
    /// ranking).
    #[error("{0}")]
    Config(String),
    /// A STATE entity's conditions are not valid.
    #[error("entity `{entity_id}`: state_conditions: {source}")]
    Condition {
        /// The entity.
        entity_id: String,
        /// What is wrong.
        source: ConditionError,
    },
}

/// The active ALWAYS entities for an audience, by priority (000 §6.4, 003 §3).
pub fn always_entities(
    kb: &dyn KnowledgeBase,
    audience: &str,
) -> Result<Vec<Entity>, RetrievalError> {
    let filter = EntityFilter {
        audience: Some(audience.to_owned()),
        ..EntityFilter::active(LoadMode::Always)
    };
    Ok(kb.list(&filter)?)
}

/// Evaluates the conditions of STATE entities against a user state (000 §6.2).
#[derive(Debug, Clone, Default)]
pub struct StateMatcher {
    handlers: Vec<(String, Conditions)>,
}

impl StateMatcher {
    /// Every active STATE entity that has conditions, by priority. No audience filtering: that
    /// belongs to the retrieval pipeline, not to the state bank.
    pub fn from_kb(kb: &dyn KnowledgeBase) -> Result<StateMatcher, RetrievalError> {
        let mut handlers = Vec::new();
        for entity in kb.list(&EntityFilter::active(LoadMode::State))? {
            let Some(raw) = &entity.state_conditions else {
                continue;
            };
            let conditions =
                Conditions::parse(raw).map_err(|source| RetrievalError::Condition {
                    entity_id: entity.entity_id.clone(),
                    source,
                })?;
            if !conditions.is_empty() {
                handlers.push((entity.entity_id, conditions));
            }
        }
        Ok(StateMatcher { handlers })
    }

    /// The ids of the entities whose conditions all hold, in priority order.
    pub fn evaluate(&self, state: &UserState) -> Vec<String> {
        self.handlers
            .iter()
            .filter(|(_, c)| c.matches(state))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// How many STATE entities are evaluated.
    pub fn len(&self) -> usize {
        self.handlers.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_kb::MemoryKb;
    use serde_json::json;

    fn kb() -> MemoryKb {
        let entities = json!([
            {"entity_id": "persona", "entity_type": "PERSONA", "title": "P", "load_mode": "ALWAYS", "priority": 100},
            {"entity_id": "clin", "entity_type": "PERSONA", "title": "C", "load_mode": "ALWAYS", "audience_types": ["CLINICIAN"]},
            {"entity_id": "old", "entity_type": "GUARDRAIL", "title": "O", "load_mode": "ALWAYS", "is_active": false},
            {"entity_id": "handler_first", "entity_type": "HANDLER", "title": "F", "load_mode": "STATE",
             "state_conditions": {"is_first_conversation": {"eq": true}}},
            {"entity_id": "handler_clinician", "entity_type": "HANDLER", "title": "C", "load_mode": "STATE",
             "audience_types": ["CLINICIAN"], "state_conditions": {"user_type": {"in": ["CLINICIAN"]}}},
            {"entity_id": "handler_off", "entity_type": "HANDLER", "title": "X", "load_mode": "STATE", "is_active": false,
             "state_conditions": {"is_first_conversation": {"eq": true}}}
        ]);
        MemoryKb::new(serde_json::from_value(entities).unwrap()).unwrap()
    }

    #[test]
    fn always_respects_audience_and_activity() {
        let ids: Vec<_> = always_entities(&kb(), "PARENT")
            .unwrap()
            .into_iter()
            .map(|e| e.entity_id)
            .collect();
        assert_eq!(ids, vec!["persona"]);
        let ids: Vec<_> = always_entities(&kb(), "CLINICIAN")
            .unwrap()
            .into_iter()
            .map(|e| e.entity_id)
            .collect();
        assert_eq!(ids, vec!["clin"]);
    }

    #[test]
    fn state_matcher_skips_inactive_and_ignores_audience() {
        let m = StateMatcher::from_kb(&kb()).unwrap();
        assert_eq!(m.len(), 2);
        let state = json!({"is_first_conversation": true, "user_type": "CLINICIAN"});
        let mut got = m.evaluate(state.as_object().unwrap());
        got.sort();
        assert_eq!(got, vec!["handler_clinician", "handler_first"]);
    }
}
