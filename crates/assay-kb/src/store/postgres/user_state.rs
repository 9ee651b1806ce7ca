//! The user state (see [`crate::user_state`]) in the `user_state` table.

use assay_core::UserState;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use tokio_postgres::{GenericClient, Transaction};

use super::{PgResult, PgStore, write_tx};
use crate::user_state::{Record, interaction};
use crate::{KbError, StateStore};
impl PgStore {
    /// Loads a user's record (or the defaults), changes it, and saves it, in one transaction.
    fn modify_user(
        &self,
        user_id: &str,
        now: DateTime<Utc>,
        change: impl FnOnce(&mut Record) -> Result<(), KbError> + Send,
    ) -> Result<UserState, KbError> {
        self.block(async {
            let mut client = self.client().await?;
            let tx = write_tx(&mut client).await?;
            let mut record = load_user(&*tx, user_id).await?.unwrap_or_default();
            change(&mut record)?;
            save_user(&tx, &record, user_id, now).await?;
            tx.commit().await.pg()?;
            Ok(record.to_state(user_id, now))
        })
    }
}

async fn load_user(client: &impl GenericClient, user_id: &str) -> Result<Option<Record>, KbError> {
    let rows = client
        .query(
            "SELECT user_type, conversation_count, session_type, interaction_rating, \
             just_logged, skills_practiced, last_topics, first_seen, last_seen, state_data \
             FROM user_state WHERE user_id = $1",
            &[&user_id],
        )
        .await
        .pg()?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let bad = |column: &str, value: String| {
        KbError::Store(format!("user `{user_id}`: bad {column} `{value}`"))
    };
    let count: i32 = row.try_get(1).pg()?;
    let rating: Option<i32> = row.try_get(3).pg()?;
    let state_data: Value = row.try_get(9).pg()?;
    Ok(Some(Record {
        user_type: row.try_get(0).pg()?,
        conversation_count: u32::try_from(count)
            .map_err(|_| bad("conversation_count", count.to_string()))?,
        session_type: row.try_get(2).pg()?,
        interaction_rating: rating
            .map(|r| u8::try_from(r).map_err(|_| bad("interaction_rating", r.to_string())))
            .transpose()?,
        just_logged: row.try_get(4).pg()?,
        skills_practiced: row.try_get(5).pg()?,
        last_topics: row.try_get(6).pg()?,
        first_seen: row.try_get(7).pg()?,
        last_seen: row.try_get(8).pg()?,
        state_data: match state_data {
            Value::Object(map) => map,
            other => return Err(bad("state_data", other.to_string())),
        },
    }))
}

async fn save_user(
    tx: &Transaction<'_>,
    record: &Record,
    user_id: &str,
    now: DateTime<Utc>,
) -> Result<(), KbError> {
    let count = i32::try_from(record.conversation_count).unwrap_or(i32::MAX);
    let rating = record.interaction_rating.map(i32::from);
    let state_data = Value::Object(record.state_data.clone());
    tx.execute(
        "INSERT INTO user_state (user_id, user_type, conversation_count, session_type, \
         interaction_rating, just_logged, skills_practiced, last_topics, first_seen, last_seen, \
         state_data, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::json, $12) \
         ON CONFLICT (user_id) DO UPDATE SET user_type = excluded.user_type, \
         conversation_count = excluded.conversation_count, \
         session_type = excluded.session_type, interaction_rating = excluded.interaction_rating, \
         just_logged = excluded.just_logged, skills_practiced = excluded.skills_practiced, \
         last_topics = excluded.last_topics, first_seen = excluded.first_seen, \
         last_seen = excluded.last_seen, state_data = excluded.state_data, \
         updated_at = excluded.updated_at",
        &[
            &user_id,
            &record.user_type,
            &count,
            &record.session_type,
            &rating,
            &record.just_logged,
            &record.skills_practiced,
            &record.last_topics,
            &record.first_seen,
            &record.last_seen,
            &state_data,
            &now,
        ],
    )
    .await
    .pg()?;
    Ok(())
}

impl StateStore for PgStore {
    fn get_user_state(&self, user_id: &str, now: DateTime<Utc>) -> Result<UserState, KbError> {
        let record = self.block(async {
            let client = self.client().await?;
            load_user(&**client, user_id).await
        })?;
        Ok(record.unwrap_or_default().to_state(user_id, now))
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
