//! User state (003 §5): the facts about a user that STATE conditions read, kept in the
//! `user_state` table beside the knowledge base.
//!
//! [`StateStore`] returns an [`assay_core::UserState`] (an open map) holding the keys both
//! condition dialects read:
//!
//! | key | from |
//! | --- | --- |
//! | the columns of 003 §5: `user_id`, `user_type`, `conversation_count`, `session_type`, `interaction_rating`, `just_logged`, `skills_practiced`, `last_topics`, `first_seen`, `last_seen` | the row |
//! | `is_first_conversation` | `conversation_count == 0` |
//! | `days_since_last` | whole days from `last_seen` to `now`; absent if never seen |
//! | `last_rating` | `interaction_rating` (000 §6.2 name) |
//! | anything else (`has_pending_debrief`, …) | `state_data`, a JSON object |
//!
//! Unset values (`session_type`, the ratings, the timestamps) are absent rather than `null`.
//! Each of these keys has a type ([`assay_core::state_fields::built_in`]: `conversation_count`
//! an integer, `first_seen` a timestamp, `user_type` an audience, …), which conditions and
//! cases are checked against; a project declares the types of its own keys.
//! Every function takes the current time as an argument; none reads a clock.
//!
//! ```
//! use assay_kb::{SqliteStore, StateStore};
//! use chrono::{TimeZone, Utc};
//! let store = SqliteStore::in_memory().unwrap();
//! let monday = Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0).unwrap();
//! store.record_interaction("u1", Some(5), &["boundaries".into()], &[], monday).unwrap();
//! let state = store.get_user_state("u1", monday + chrono::Duration::days(10)).unwrap();
//! assert_eq!(state["days_since_last"], 10);
//! assert_eq!(state["last_rating"], 5);
//! assert_eq!(state["is_first_conversation"], false);
//! ```

use assay_core::UserState;
use assay_core::entity::DEFAULT_AUDIENCE;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value};

use crate::KbError;
use crate::timestamp::{parse_time, time_text};

/// The user type of a user the store has not seen (003 §5).
pub const DEFAULT_USER_TYPE: &str = DEFAULT_AUDIENCE;

/// How many topics `last_topics` keeps (the most recent).
pub const MAX_TOPICS: usize = 10;

/// Read and write access to user state.
pub trait StateStore: Send + Sync {
    /// The state of a user as of `now`; a user never stored gets the defaults (user type
    /// `PARENT`, no conversations, `is_first_conversation` true, no `days_since_last`).
    fn get_user_state(&self, user_id: &str, now: DateTime<Utc>) -> Result<UserState, KbError>;

    /// Sets fields of a user's state and returns the new state.
    ///
    /// The fields of 003 §5 go to their columns (`null` resets one to its default); the derived
    /// keys are translated: `last_rating` sets `interaction_rating`, `days_since_last` sets
    /// `last_seen` to that many days before `now`, `is_first_conversation` sets
    /// `conversation_count` to 0 (`true`) or at least 1 (`false`). Any other field goes to
    /// `state_data` (`null` removes it). A value of the wrong type, a rating outside 1–5, or a
    /// contradiction is an error, and nothing is written.
    fn update_user_state(
        &self,
        user_id: &str,
        updates: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<UserState, KbError>;

    /// Records one finished interaction at `now`: counts it, keeps `rating` (1–5) as the last
    /// rating (an interaction without one keeps the previous rating), appends new topics
    /// (keeping the last [`MAX_TOPICS`]; a repeated topic moves to the end) and new skills,
    /// sets `first_seen` once and `last_seen` to `now`. Returns the new state.
    fn record_interaction(
        &self,
        user_id: &str,
        rating: Option<u8>,
        topics: &[String],
        skills: &[String],
        now: DateTime<Utc>,
    ) -> Result<UserState, KbError>;
}

/// One row of `user_state` (each backend loads and saves it its own way).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    pub(crate) user_type: String,
    pub(crate) conversation_count: u32,
    pub(crate) session_type: Option<String>,
    pub(crate) interaction_rating: Option<u8>,
    pub(crate) just_logged: bool,
    pub(crate) skills_practiced: Vec<String>,
    pub(crate) last_topics: Vec<String>,
    pub(crate) first_seen: Option<DateTime<Utc>>,
    pub(crate) last_seen: Option<DateTime<Utc>>,
    pub(crate) state_data: Map<String, Value>,
}

impl Default for Record {
    fn default() -> Self {
        Record {
            user_type: DEFAULT_USER_TYPE.to_owned(),
            conversation_count: 0,
            session_type: None,
            interaction_rating: None,
            just_logged: false,
            skills_practiced: Vec::new(),
            last_topics: Vec::new(),
            first_seen: None,
            last_seen: None,
            state_data: Map::new(),
        }
    }
}

fn check_rating(rating: i64) -> Result<u8, KbError> {
    u8::try_from(rating)
        .ok()
        .filter(|r| (1..=5).contains(r))
        .ok_or_else(|| KbError::Invalid(format!("rating {rating} is out of range (1 to 5)")))
}

impl Record {
    /// The state conditions read, as of `now`.
    pub(crate) fn to_state(&self, user_id: &str, now: DateTime<Utc>) -> UserState {
        let mut state = UserState::new();
        let mut set = |key: &str, value: Value| {
            state.insert(key.to_owned(), value);
        };
        set("user_id", user_id.into());
        set("user_type", self.user_type.clone().into());
        set("conversation_count", self.conversation_count.into());
        set(
            "is_first_conversation",
            (self.conversation_count == 0).into(),
        );
        if let Some(last_seen) = self.last_seen {
            set(
                "days_since_last",
                (now - last_seen).num_days().max(0).into(),
            );
        }
        if let Some(session_type) = &self.session_type {
            set("session_type", session_type.clone().into());
        }
        if let Some(rating) = self.interaction_rating {
            set("interaction_rating", rating.into());
            set("last_rating", rating.into());
        }
        set("just_logged", self.just_logged.into());
        set("skills_practiced", self.skills_practiced.clone().into());
        set("last_topics", self.last_topics.clone().into());
        if let Some(first_seen) = self.first_seen {
            set("first_seen", time_text(first_seen).into());
        }
        if let Some(last_seen) = self.last_seen {
            set("last_seen", time_text(last_seen).into());
        }
        for (key, value) in &self.state_data {
            state.entry(key.clone()).or_insert_with(|| value.clone());
        }
        state
    }

    /// Applies the updates of [`StateStore::update_user_state`].
    pub(crate) fn apply(
        &mut self,
        user_id: &str,
        updates: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<(), KbError> {
        let mut first_conversation = None;
        for (key, value) in updates {
            let bad = |expected: &str| {
                KbError::Invalid(format!(
                    "user state `{key}`: expected {expected}, found {value}"
                ))
            };
            let text = || match value {
                Value::Null => Ok(None),
                Value::String(s) => Ok(Some(s.clone())),
                _ => Err(bad("a string or null")),
            };
            let count = || {
                value
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| bad("a whole number"))
            };
            match key.as_str() {
                "user_type" => {
                    self.user_type = text()?.unwrap_or_else(|| DEFAULT_USER_TYPE.to_owned());
                }
                "conversation_count" => {
                    self.conversation_count = if value.is_null() { 0 } else { count()? }
                }
                "session_type" => self.session_type = text()?,
                "interaction_rating" | "last_rating" => {
                    self.interaction_rating = match value {
                        Value::Null => None,
                        _ => Some(check_rating(
                            value.as_i64().ok_or_else(|| bad("a rating from 1 to 5"))?,
                        )?),
                    };
                }
                "just_logged" => {
                    self.just_logged =
                        !value.is_null() && value.as_bool().ok_or_else(|| bad("a boolean"))?;
                }
                "skills_practiced" | "last_topics" => {
                    let list = match value {
                        Value::Null => Vec::new(),
                        _ => serde_json::from_value(value.clone())
                            .map_err(|_| bad("a list of strings"))?,
                    };
                    if key == "skills_practiced" {
                        self.skills_practiced = list;
                    } else {
                        self.last_topics = list;
                    }
                }
                "first_seen" | "last_seen" => {
                    let time = text()?
                        .map(|t| parse_time(&t).ok_or_else(|| bad("an RFC 3339 time")))
                        .transpose()?;
                    if key == "first_seen" {
                        self.first_seen = time;
                    } else {
                        self.last_seen = time;
                    }
                }
                "days_since_last" => {
                    self.last_seen = if value.is_null() {
                        None
                    } else {
                        Some(now - Duration::days(count()?.into()))
                    };
                }
                "is_first_conversation" => {
                    first_conversation = Some(value.as_bool().ok_or_else(|| bad("a boolean"))?);
                }
                "user_id" if value.as_str() == Some(user_id) => {}
                "user_id" | "updated_at" => {
                    return Err(KbError::Invalid(format!(
                        "user state `{key}` cannot be updated"
                    )));
                }
                _ if value.is_null() => {
                    self.state_data.remove(key);
                }
                _ => {
                    self.state_data.insert(key.clone(), value.clone());
                }
            }
        }
        if let Some(first) = first_conversation
            && first != (self.conversation_count == 0)
        {
            if updates.contains_key("conversation_count") {
                return Err(KbError::Invalid(format!(
                    "user state: is_first_conversation {first} contradicts conversation_count {}",
                    self.conversation_count
                )));
            }
            self.conversation_count = u32::from(!first);
        }
        Ok(())
    }

    /// Applies [`StateStore::record_interaction`].
    pub(crate) fn record(
        &mut self,
        rating: Option<u8>,
        topics: &[String],
        skills: &[String],
        now: DateTime<Utc>,
    ) {
        self.conversation_count = self.conversation_count.saturating_add(1);
        if rating.is_some() {
            self.interaction_rating = rating;
        }
        for topic in topics.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
            self.last_topics.retain(|t| t != topic);
            self.last_topics.push(topic.to_owned());
        }
        let excess = self.last_topics.len().saturating_sub(MAX_TOPICS);
        self.last_topics.drain(..excess);
        for skill in skills.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            if !self.skills_practiced.iter().any(|s| s == skill) {
                self.skills_practiced.push(skill.to_owned());
            }
        }
        self.first_seen.get_or_insert(now);
        self.last_seen = Some(now);
    }
}

/// The change [`StateStore::record_interaction`] makes to a record, once its rating is checked.
pub(crate) fn interaction<'a>(
    rating: Option<u8>,
    topics: &'a [String],
    skills: &'a [String],
    now: DateTime<Utc>,
) -> Result<impl FnOnce(&mut Record) -> Result<(), KbError> + Send + 'a, KbError> {
    if let Some(rating) = rating {
        check_rating(rating.into())?;
    }
    Ok(move |record: &mut Record| {
        record.record(rating, topics, skills, now);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
    }

    fn apply(record: &mut Record, updates: Value) -> Result<(), KbError> {
        let Value::Object(updates) = updates else {
            panic!("updates must be an object")
        };
        record.apply("u", &updates, now())
    }

    #[test]
    fn defaults_for_a_new_user() {
        let state = Record::default().to_state("u", now());
        assert_eq!(
            Value::Object(state),
            json!({
                "user_id": "u", "user_type": "PARENT", "conversation_count": 0,
                "is_first_conversation": true, "just_logged": false,
                "skills_practiced": [], "last_topics": [],
            })
        );
    }

    #[test]
    fn every_field_the_store_returns_is_a_built_in_field_of_its_type() {
        let mut record = Record::default();
        apply(
            &mut record,
            json!({
                "user_type": "CLINICIAN", "conversation_count": 3, "session_type": "debrief",
                "interaction_rating": 4, "just_logged": true, "skills_practiced": ["biff"],
                "last_topics": ["handoffs"], "first_seen": "2026-01-02T03:04:05Z",
                "days_since_last": 2, "has_pending_debrief": true,
            }),
        )
        .unwrap();
        let state = record.to_state("u", now());
        let schema = assay_core::state_fields::StateSchema::default();
        assert_eq!(schema.check_state(&state), []);
        let mut built_in: Vec<&str> = assay_core::state_fields::built_in()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        built_in.sort_unstable();
        let mut returned: Vec<&str> = state.keys().map(String::as_str).collect();
        returned.sort_unstable();
        assert_eq!(returned, built_in, "the store returns every built-in field");
    }

    #[test]
    fn derived_keys_are_translated() {
        let mut record = Record::default();
        apply(
            &mut record,
            json!({"days_since_last": 9, "is_first_conversation": false, "last_rating": 2}),
        )
        .unwrap();
        assert_eq!(record.last_seen, Some(now() - Duration::days(9)));
        assert_eq!(record.conversation_count, 1);
        assert_eq!(record.interaction_rating, Some(2));
        let state = record.to_state("u", now());
        assert_eq!(
            (&state["days_since_last"], &state["last_rating"]),
            (&json!(9), &json!(2))
        );
        apply(
            &mut record,
            json!({"is_first_conversation": true, "days_since_last": null}),
        )
        .unwrap();
        assert_eq!((record.conversation_count, record.last_seen), (0, None));
    }

    #[test]
    fn null_resets_and_removes() {
        let mut record = Record::default();
        apply(
            &mut record,
            json!({"user_type": "CLINICIAN", "session_type": "debrief", "mood": "ok", "just_logged": true}),
        )
        .unwrap();
        apply(
            &mut record,
            json!({"user_type": null, "session_type": null, "mood": null, "just_logged": null}),
        )
        .unwrap();
        assert_eq!(record, Record::default());
    }

    #[test]
    fn bad_updates_are_errors() {
        for (updates, message) in [
            (
                json!({"conversation_count": -1}),
                "expected a whole number, found -1",
            ),
            (
                json!({"interaction_rating": 6}),
                "rating 6 is out of range (1 to 5)",
            ),
            (json!({"last_rating": "5"}), "expected a rating from 1 to 5"),
            (json!({"just_logged": "yes"}), "expected a boolean"),
            (json!({"last_topics": [1]}), "expected a list of strings"),
            (
                json!({"last_seen": "yesterday"}),
                "expected an RFC 3339 time",
            ),
            (json!({"user_id": "other"}), "`user_id` cannot be updated"),
            (
                json!({"conversation_count": 3, "is_first_conversation": true}),
                "is_first_conversation true contradicts conversation_count 3",
            ),
        ] {
            let err = apply(&mut Record::default(), updates)
                .unwrap_err()
                .to_string();
            assert!(err.contains(message), "{err}");
        }
        apply(&mut Record::default(), json!({"user_id": "u"})).unwrap();
    }

    #[test]
    fn record_keeps_the_last_topics_and_unique_skills() {
        let mut record = Record::default();
        let topics: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
        record.record(Some(4), &topics, &["biff".into(), " biff ".into()], now());
        record.record(
            None,
            &["t5".into(), " ".into()],
            &["gray rock".into(), "biff".into()],
            now(),
        );
        assert_eq!(
            record.last_topics,
            ["t2", "t3", "t4", "t6", "t7", "t8", "t9", "t10", "t11", "t5"]
        );
        assert_eq!(record.skills_practiced, ["biff", "gray rock"]);
        assert_eq!(
            (record.conversation_count, record.interaction_rating),
            (2, Some(4))
        );
        assert_eq!(
            (record.first_seen, record.last_seen),
            (Some(now()), Some(now()))
        );
    }

    #[test]
    fn days_since_last_counts_whole_days_and_never_goes_negative() {
        let record = Record {
            last_seen: Some(now()),
            ..Record::default()
        };
        let days = |later: Duration| record.to_state("u", now() + later)["days_since_last"].clone();
        assert_eq!(days(Duration::hours(47)), json!(1));
        assert_eq!(days(Duration::days(7)), json!(7));
        assert_eq!(days(-Duration::days(1)), json!(0));
    }
}
