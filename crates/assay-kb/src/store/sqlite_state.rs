//! The SQLite backend of [`StateStore`]: a user's [`Record`] loaded from and saved to the
//! `user_state` table.

use assay_core::UserState;
use chrono::{DateTime, Utc};
use rusqlite::Connection;
use serde_json::{Map, Value};

use super::sqlite::{json_column, to_json, write_transaction};
use crate::timestamp::{parse_time, time_text};
use crate::user_state::{Record, StateStore, interaction};
use crate::{KbError, SqliteStore};

impl Record {
    fn load(conn: &Connection, user_id: &str) -> Result<Option<Record>, KbError> {
        let mut stmt = conn.prepare_cached(
            "SELECT user_type, conversation_count, session_type, interaction_rating, just_logged, \
             skills_practiced, last_topics, first_seen, last_seen, state_data \
             FROM user_state WHERE user_id = ?1",
        )?;
        let mut rows = stmt.query([user_id])?;
        let Some(row) = rows.next()? else {
            return Ok(None);
        };
        let time = |column: &str| -> Result<Option<DateTime<Utc>>, KbError> {
            let text: Option<String> = row.get(column)?;
            text.map(|t| {
                parse_time(&t)
                    .ok_or_else(|| KbError::Store(format!("user `{user_id}`: bad {column} `{t}`")))
            })
            .transpose()
        };
        Ok(Some(Record {
            user_type: row.get("user_type")?,
            conversation_count: row.get("conversation_count")?,
            session_type: row.get("session_type")?,
            interaction_rating: row.get("interaction_rating")?,
            just_logged: row.get("just_logged")?,
            skills_practiced: json_column(row, user_id, "skills_practiced", "skills_practiced")?
                .unwrap_or_default(),
            last_topics: json_column(row, user_id, "last_topics", "last_topics")?
                .unwrap_or_default(),
            first_seen: time("first_seen")?,
            last_seen: time("last_seen")?,
            state_data: json_column(row, user_id, "state_data", "state_data")?.unwrap_or_default(),
        }))
    }

    fn save(&self, conn: &Connection, user_id: &str, now: DateTime<Utc>) -> Result<(), KbError> {
        conn.prepare_cached(
            "INSERT INTO user_state (user_id, user_type, conversation_count, session_type, \
             interaction_rating, just_logged, skills_practiced, last_topics, first_seen, last_seen, \
             state_data, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
             ON CONFLICT (user_id) DO UPDATE SET user_type = excluded.user_type, \
             conversation_count = excluded.conversation_count, \
             session_type = excluded.session_type, interaction_rating = excluded.interaction_rating, \
             just_logged = excluded.just_logged, skills_practiced = excluded.skills_practiced, \
             last_topics = excluded.last_topics, first_seen = excluded.first_seen, \
             last_seen = excluded.last_seen, state_data = excluded.state_data, \
             updated_at = excluded.updated_at",
        )?
        .execute((
            user_id,
            &self.user_type,
            self.conversation_count,
            &self.session_type,
            self.interaction_rating,
            self.just_logged,
            to_json(&self.skills_practiced)?,
            to_json(&self.last_topics)?,
            self.first_seen.map(time_text),
            self.last_seen.map(time_text),
            to_json(&self.state_data)?,
            time_text(now),
        ))?;
        Ok(())
    }
}

impl SqliteStore {
    /// Loads a user's record (or the defaults), changes it, and saves it, in one transaction.
    fn modify_user(
        &self,
        user_id: &str,
        now: DateTime<Utc>,
        change: impl FnOnce(&mut Record) -> Result<(), KbError>,
    ) -> Result<UserState, KbError> {
        let mut conn = self.lock();
        let tx = write_transaction(&mut conn)?;
        let mut record = Record::load(&tx, user_id)?.unwrap_or_default();
        change(&mut record)?;
        record.save(&tx, user_id, now)?;
        tx.commit()?;
        Ok(record.to_state(user_id, now))
    }
}

impl StateStore for SqliteStore {
    fn get_user_state(&self, user_id: &str, now: DateTime<Utc>) -> Result<UserState, KbError> {
        let record = Record::load(&self.lock(), user_id)?.unwrap_or_default();
        Ok(record.to_state(user_id, now))
    }

    fn update_user_state(
        &self,
        user_id: &str,
        updates: &Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Result<UserState, KbError> {
        self.modify_user(user_id, now, |record| record.apply(user_id, updates, now))
    }

    fn record_interaction(
        &self,
        user_id: &str,
        rating: Option<u8>,
        topics: &[String],
        skills: &[String],
        now: DateTime<Utc>,
    ) -> Result<UserState, KbError> {
        self.modify_user(user_id, now, interaction(rating, topics, skills, now)?)
    }
}
