//! `assay state …`: stored user state (003 §5), the facts STATE conditions read, kept in the
//! project's store (`.assay/kb.db`).

use std::path::Path;

use assay_core::UserState;
use assay_project::HarnessError;
use assay_project::engine;
use assay_project::settings::{ProjectSettings, SETTINGS_FILE};
use clap::Subcommand;
use serde_json::{Map, Value};

use super::kb::assignment;
use super::out;
use crate::exit::Exit;

/// `assay state …`
#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Show a user's state (the default for a new user).
    Show {
        /// The user.
        #[arg(long, value_name = "USER_ID")]
        user: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set fields of a user's state.
    Set {
        /// The user.
        #[arg(long, value_name = "USER_ID")]
        user: String,
        /// FIELD=VALUE pairs (VALUE is read as JSON when it parses, else text).
        #[arg(required = true, value_name = "FIELD=VALUE")]
        fields: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Record an interaction: rating, topics, skills, last seen now.
    Record {
        /// The user.
        #[arg(long, value_name = "USER_ID")]
        user: String,
        /// The user's rating, 1 to 5.
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=5))]
        rating: Option<u8>,
        /// A topic discussed (repeatable).
        #[arg(long = "topic", value_name = "TOPIC")]
        topics: Vec<String>,
        /// A skill practised (repeatable).
        #[arg(long = "skill", value_name = "SKILL")]
        skills: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(dir: &Path, command: &StateCommand) -> anyhow::Result<Exit> {
    if !dir.is_dir() {
        return Err(HarnessError::Usage(format!(
            "project directory `{}` does not exist",
            dir.display()
        ))
        .into());
    }
    let settings = ProjectSettings::load(dir)?;
    // Not a store in whatever folder the command happens to run in.
    if !(dir.join(SETTINGS_FILE).is_file()
        || settings.kb_dir.is_dir()
        || settings.banks_dir.is_dir())
    {
        return Err(HarnessError::Usage(format!(
            "`{}` is not an assay project (no {SETTINGS_FILE}, kb/ or test_banks/); name one with --project DIR",
            dir.display()
        ))
        .into());
    }
    let store = engine::open_store(&settings)?;
    let now = std::time::SystemTime::now().into();
    let (user, state, as_json) = match command {
        StateCommand::Show { user, json } => (
            user,
            store
                .get_user_state(checked(user)?, now)
                .map_err(HarnessError::from)?,
            *json,
        ),
        StateCommand::Set { user, fields, json } => {
            let updates = read_fields(fields)?;
            let state = store
                .update_user_state(checked(user)?, &updates, now)
                .map_err(HarnessError::from)?;
            (user, state, *json)
        }
        StateCommand::Record {
            user,
            rating,
            topics,
            skills,
            json,
        } => {
            let state = store
                .record_interaction(checked(user)?, *rating, topics, skills, now)
                .map_err(HarnessError::from)?;
            (user, state, *json)
        }
    };
    if as_json {
        let mut text = serde_json::to_string_pretty(&Value::Object(state))?;
        text.push('\n');
        out(&text);
    } else {
        out(&render(user, &state));
    }
    Ok(Exit::Success)
}

fn checked(user: &str) -> Result<&str, HarnessError> {
    if user.trim().is_empty() {
        Err(HarnessError::Usage("--user: the user id is empty".into()))
    } else {
        Ok(user)
    }
}

/// `FIELD=VALUE` pairs as an update (VALUE is JSON when it parses, else text).
fn read_fields(pairs: &[String]) -> Result<Map<String, Value>, HarnessError> {
    let mut updates = Map::new();
    for pair in pairs {
        let (field, value, _) = assignment(pair)?;
        if updates.contains_key(&field) {
            return Err(HarnessError::Usage(format!(
                "field `{field}` is given twice"
            )));
        }
        updates.insert(field, value);
    }
    Ok(updates)
}

/// The state with sorted keys: strings bare, anything else as JSON.
fn render(user: &str, state: &UserState) -> String {
    let mut keys: Vec<&String> = state.keys().collect();
    keys.sort();
    let width = keys.iter().map(|k| k.len()).max().unwrap_or(0);
    let mut text = format!("state of user `{user}`\n");
    for key in keys {
        let value = match &state[key.as_str()] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        text.push_str(&format!("  {key:<width$}  {value}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_read_json_or_text() {
        let map = read_fields(&["session_type=debrief".into(), "just_logged=true".into()]).unwrap();
        assert_eq!(map["session_type"], json!("debrief"));
        assert_eq!(map["just_logged"], json!(true));
        let err = read_fields(&["a=1".into(), "a=2".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`a` is given twice"), "{err}");
    }

    #[test]
    fn render_sorts_keys() {
        let state: UserState = serde_json::from_value(json!({"b": 1, "a": "x"})).unwrap();
        assert_eq!(render("u", &state), "state of user `u`\n  a  x\n  b  1\n");
    }
}
