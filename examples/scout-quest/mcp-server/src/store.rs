//! The quest database (SQLite) and the rules every change must follow.
//!
//! Money is kept in whole cents. A broken rule is a [`StoreError::Rule`] whose message is
//! written for the model that called the tool: what was wrong and what it may do instead.

use std::path::Path;

use chrono::NaiveDate;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::{Value, json};

use crate::fixture::{Badge, Fixture, Status, looks_like_email};

const SCHEMA_VERSION: &str = "1";

const SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE quest (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    goal TEXT NOT NULL,
    target_cents INTEGER NOT NULL,
    savings_cents INTEGER NOT NULL
);
CREATE TABLE chores (id TEXT PRIMARY KEY, name TEXT NOT NULL, frequency TEXT NOT NULL, pos INTEGER NOT NULL);
CREATE TABLE chore_log (
    id INTEGER PRIMARY KEY,
    chore_id TEXT NOT NULL REFERENCES chores(id),
    date TEXT NOT NULL,
    notes TEXT,
    UNIQUE (chore_id, date)
);
CREATE TABLE budget_entries (
    week INTEGER PRIMARY KEY,
    income_cents INTEGER NOT NULL,
    expenses_cents INTEGER NOT NULL,
    notes TEXT
);
CREATE TABLE requirements (
    id TEXT PRIMARY KEY,
    badge TEXT NOT NULL,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    status TEXT NOT NULL,
    pos INTEGER NOT NULL
);
CREATE TABLE requirement_history (
    id INTEGER PRIMARY KEY,
    requirement_id TEXT NOT NULL REFERENCES requirements(id),
    from_status TEXT NOT NULL,
    to_status TEXT NOT NULL,
    evidence TEXT
);
CREATE TABLE emails (
    id INTEGER PRIMARY KEY,
    recipients TEXT NOT NULL,
    cc TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE goal_history (
    id INTEGER PRIMARY KEY,
    old_goal TEXT NOT NULL,
    old_target_cents INTEGER NOT NULL,
    new_goal TEXT NOT NULL,
    new_target_cents INTEGER NOT NULL,
    reason TEXT
);
";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A rule the caller broke; the message says how to fix the call.
    #[error("{0}")]
    Rule(String),
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("stored data is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

type Result<T> = std::result::Result<T, StoreError>;

fn rule<T>(message: impl Into<String>) -> Result<T> {
    Err(StoreError::Rule(message.into()))
}

/// An open quest database. `today` decides what counts as "today's" chores.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    today: NaiveDate,
}

impl Store {
    /// Creates a database at `path` from the fixture, replacing any file already there.
    pub fn create(path: &Path, fixture: &Fixture, today: NaiveDate) -> Result<Store> {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return rule(format!("cannot replace {}: {e}", path.display())),
        }
        let mut conn = Connection::open(path)?;
        let tx = conn.transaction()?;
        tx.execute_batch(SCHEMA)?;
        let mut meta = tx.prepare("INSERT INTO meta (key, value) VALUES (?1, ?2)")?;
        meta.execute(params!["schema_version", SCHEMA_VERSION])?;
        meta.execute(params!["scout", serde_json::to_string(&fixture.scout)?])?;
        meta.execute(params![
            "character",
            serde_json::to_string(&fixture.character)?
        ])?;
        meta.execute(params![
            "contacts",
            serde_json::to_string(&fixture.contacts)?
        ])?;
        drop(meta);
        tx.execute(
            "INSERT INTO quest (id, goal, target_cents, savings_cents) VALUES (1, ?1, ?2, ?3)",
            params![
                fixture.quest.goal,
                cents(fixture.quest.target_budget),
                cents(fixture.quest.savings_to_date)
            ],
        )?;
        for (pos, c) in (0_i64..).zip(&fixture.chores) {
            tx.execute(
                "INSERT INTO chores (id, name, frequency, pos) VALUES (?1, ?2, ?3, ?4)",
                params![c.id, c.name, c.frequency, pos],
            )?;
        }
        for (pos, r) in (0_i64..).zip(&fixture.requirements) {
            tx.execute(
                "INSERT INTO requirements (id, badge, title, description, status, pos)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    r.id,
                    r.badge.as_str(),
                    r.title,
                    r.description,
                    r.status.as_str(),
                    pos
                ],
            )?;
        }
        tx.commit()?;
        Ok(Store { conn, today })
    }

    /// Opens a database made by [`Store::create`]; a missing file is a rule error.
    pub fn open(path: &Path, today: NaiveDate) -> Result<Store> {
        if !path.is_file() {
            return rule(format!(
                "database {} does not exist: run `scout-quest-mcp init --db {} --fixture FILE` first",
                path.display(),
                path.display()
            ));
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        let version: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .unwrap_or(None);
        if version.as_deref() != Some(SCHEMA_VERSION) {
            return rule(format!(
                "{} is not a scout-quest database (schema {SCHEMA_VERSION}): run `scout-quest-mcp init` again",
                path.display()
            ));
        }
        Ok(Store { conn, today })
    }

    fn meta(&self, key: &str) -> Result<Value> {
        let text: String =
            self.conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))?;
        Ok(serde_json::from_str(&text)?)
    }

    /// The whole quest state, as `get_quest_state`, the resource and `dump` show it.
    pub fn quest_state(&self) -> Result<Value> {
        let today = self.today.to_string();
        let chore_log = self.rows(
            "SELECT l.chore_id, c.name AS chore, l.date, l.notes
             FROM chore_log l JOIN chores c ON c.id = l.chore_id ORDER BY l.date, l.id",
        )?;
        let chores_today: Vec<Value> = chore_log
            .iter()
            .filter(|e| e["date"] == today.as_str())
            .cloned()
            .collect();
        let mut emails = self
            .rows("SELECT id, recipients AS \"to\", cc, subject, body FROM emails ORDER BY id")?;
        for email in &mut emails {
            for key in ["to", "cc"] {
                let list = email[key]
                    .as_str()
                    .and_then(|t| serde_json::from_str(t).ok());
                email[key] = list.unwrap_or_default();
            }
        }
        let quest = self.rows(
            "SELECT goal, target_cents / 100.0 AS target_budget, savings_cents / 100.0 AS savings_to_date,
                    MAX(target_cents - savings_cents, 0) / 100.0 AS still_needed FROM quest",
        )?;
        Ok(json!({
            "today": today,
            "scout": self.meta("scout")?,
            "quest": quest.into_iter().next().unwrap_or_default(),
            "character": self.meta("character")?,
            "contacts": self.meta("contacts")?,
            "chores": self.rows("SELECT id, name, frequency FROM chores ORDER BY pos")?,
            "chores_today": chores_today,
            "chore_log": chore_log,
            "budget_entries": self.rows(
                "SELECT week, income_cents / 100.0 AS income, expenses_cents / 100.0 AS expenses,
                        (income_cents - expenses_cents) / 100.0 AS savings, notes
                 FROM budget_entries ORDER BY week",
            )?,
            "requirements": self.rows("SELECT id, badge, title, status FROM requirements ORDER BY pos")?,
            "emails": emails,
            "goal_history": self.rows(
                "SELECT old_goal, old_target_cents / 100.0 AS old_target_budget, new_goal,
                        new_target_cents / 100.0 AS new_target_budget, reason
                 FROM goal_history ORDER BY id",
            )?,
        }))
    }

    /// Every row of `sql` as a JSON object keyed by column name. REAL columns hold dollars
    /// (cents / 100.0) and go through [`dollars`].
    fn rows(&self, sql: &str) -> Result<Vec<Value>> {
        let mut stmt = self.conn.prepare(sql)?;
        let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let mut object = serde_json::Map::new();
            for (i, name) in names.iter().enumerate() {
                let value = match row.get_ref(i)? {
                    ValueRef::Integer(n) => Value::from(n),
                    ValueRef::Real(x) => dollars(x),
                    ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t)),
                    ValueRef::Null | ValueRef::Blob(_) => Value::Null,
                };
                object.insert(name.clone(), value);
            }
            out.push(Value::Object(object));
        }
        Ok(out)
    }

    /// Requirements with descriptions, optionally filtered by badge and status.
    pub fn requirements(&self, badge: Option<&str>, status: Option<&str>) -> Result<Value> {
        let badge = badge
            .map(|b| {
                Badge::parse(b).ok_or_else(|| {
                    StoreError::Rule(format!(
                        "unknown badge `{b}`: use personal_management or family_life"
                    ))
                })
            })
            .transpose()?;
        let status = status.map(parse_status).transpose()?;
        let all = self
            .rows("SELECT id, badge, title, description, status FROM requirements ORDER BY pos")?;
        let picked: Vec<Value> = all
            .into_iter()
            .filter(|r| badge.is_none_or(|b| r["badge"] == b.as_str()))
            .filter(|r| status.is_none_or(|s| r["status"] == s.as_str()))
            .collect();
        Ok(json!({ "requirements": picked }))
    }

    /// Logs one chore (by id or name, any case) for a date (default today).
    pub fn log_chore(
        &mut self,
        chore: &str,
        date: Option<&str>,
        notes: Option<&str>,
    ) -> Result<Value> {
        let wanted = chore.trim().to_lowercase();
        let chores: Vec<(String, String)> = {
            let mut stmt = self
                .conn
                .prepare("SELECT id, name FROM chores ORDER BY pos")?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?
        };
        let Some((id, name)) = chores
            .iter()
            .find(|(id, name)| id.to_lowercase() == wanted || name.to_lowercase() == wanted)
        else {
            let known: Vec<String> = chores
                .iter()
                .map(|(id, name)| format!("{id} ({name})"))
                .collect();
            return rule(format!(
                "unknown chore `{chore}`; the scout's chores are: {}",
                known.join(", ")
            ));
        };
        let date = match date {
            None => self.today,
            Some(d) => NaiveDate::parse_from_str(d.trim(), "%Y-%m-%d")
                .or_else(|_| rule(format!("date `{d}` is not a YYYY-MM-DD date")))?,
        };
        if date > self.today {
            return rule(format!(
                "{date} is in the future (today is {}); log chores once they are done",
                self.today
            ));
        }
        if (self.today - date).num_days() > 7 {
            return rule(format!(
                "{date} is more than 7 days ago (today is {}); chores can be logged for the past week only",
                self.today
            ));
        }
        let inserted = self.conn.execute(
            "INSERT OR IGNORE INTO chore_log (chore_id, date, notes) VALUES (?1, ?2, ?3)",
            params![id, date.to_string(), notes],
        )?;
        if inserted == 0 {
            return rule(format!(
                "`{id}` ({name}) is already logged for {date}; each chore counts once a day"
            ));
        }
        let logged_that_day: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM chore_log WHERE date = ?1",
            [date.to_string()],
            |r| r.get(0),
        )?;
        Ok(json!({
            "logged": {"chore_id": id, "chore": name, "date": date.to_string(), "notes": notes},
            "chores_logged_that_day": logged_that_day,
        }))
    }

    /// Records one budget week; its savings (income − expenses) go to savings_to_date.
    pub fn log_budget_entry(
        &mut self,
        week: i64,
        income: f64,
        expenses: f64,
        notes: Option<&str>,
    ) -> Result<Value> {
        if week < 1 {
            return rule(format!("week must be 1 or more (got {week})"));
        }
        for (field, value) in [("income", income), ("expenses", expenses)] {
            if !value.is_finite() || value < 0.0 {
                return rule(format!(
                    "{field} must be a dollar amount of 0 or more (got {value})"
                ));
            }
        }
        let (income, expenses) = (cents(income), cents(expenses));
        let tx = self.conn.transaction()?;
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO budget_entries (week, income_cents, expenses_cents, notes)
             VALUES (?1, ?2, ?3, ?4)",
            params![week, income, expenses, notes],
        )?;
        if inserted == 0 {
            return rule(format!(
                "week {week} already has a budget entry; each week is logged once (use the next week number for a new week)"
            ));
        }
        tx.execute(
            "UPDATE quest SET savings_cents = savings_cents + ?1",
            [income - expenses],
        )?;
        let (savings, target): (i64, i64) =
            tx.query_row("SELECT savings_cents, target_cents FROM quest", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        tx.commit()?;
        Ok(json!({
            "entry": {"week": week, "income": money(income), "expenses": money(expenses),
                      "savings": money(income - expenses), "notes": notes},
            "savings_to_date": money(savings),
            "still_needed": money((target - savings).max(0)),
        }))
    }

    /// Moves a requirement one step along the status machine.
    pub fn advance_requirement(
        &mut self,
        id: &str,
        new_status: &str,
        evidence: Option<&str>,
    ) -> Result<Value> {
        let id = id.trim().to_lowercase();
        let current: Option<String> = self
            .conn
            .query_row(
                "SELECT status FROM requirements WHERE id = ?1",
                [&id],
                |r| r.get(0),
            )
            .optional()?;
        let Some(current) = current else {
            let ids = self.rows("SELECT id FROM requirements ORDER BY pos")?;
            let ids: Vec<&str> = ids.iter().filter_map(|r| r["id"].as_str()).collect();
            return rule(format!(
                "unknown requirement `{id}`; the ids are: {}",
                ids.join(", ")
            ));
        };
        let from = parse_status(&current)?;
        let to = parse_status(new_status.trim())?;
        if !from.next().contains(&to) {
            let allowed: Vec<&str> = from.next().iter().map(|s| s.as_str()).collect();
            let allowed = if allowed.is_empty() {
                "none: it is finished".to_owned()
            } else {
                allowed.join(" or ")
            };
            return rule(format!(
                "{id} cannot go from {from} to {to}; from {from} the next status can be: {allowed}"
            ));
        }
        let tx = self.conn.transaction()?;
        tx.execute(
            "UPDATE requirements SET status = ?1 WHERE id = ?2",
            params![to.as_str(), id],
        )?;
        tx.execute(
            "INSERT INTO requirement_history (requirement_id, from_status, to_status, evidence) VALUES (?1, ?2, ?3, ?4)",
            params![id, from.as_str(), to.as_str(), evidence],
        )?;
        tx.commit()?;
        let next: Vec<&str> = to.next().iter().map(|s| s.as_str()).collect();
        Ok(
            json!({"requirement_id": id, "from": from.as_str(), "to": to.as_str(), "evidence": evidence, "next_allowed": next}),
        )
    }

    /// Records (never sends) an email; the parent must be copied (youth protection).
    pub fn compose_email(
        &mut self,
        to: &[String],
        cc: &[String],
        subject: &str,
        body: &str,
    ) -> Result<Value> {
        let clean = |list: &[String]| -> Vec<String> {
            list.iter().map(|a| a.trim().to_lowercase()).collect()
        };
        let (to, cc) = (clean(to), clean(cc));
        if to.is_empty() {
            return rule("`to` needs at least one address");
        }
        if let Some(bad) = to.iter().chain(&cc).find(|a| !looks_like_email(a)) {
            return rule(format!(
                "`{bad}` is not a bare email address (write name@example.com, without names or brackets)"
            ));
        }
        if subject.trim().is_empty() || body.trim().is_empty() {
            return rule("the email needs a subject and a body");
        }
        let parent = &self.meta("contacts")?["parent"];
        let parent_email = parent["email"].as_str().unwrap_or_default().to_lowercase();
        if !to.iter().chain(&cc).any(|a| *a == parent_email) {
            return rule(format!(
                "youth protection: every email from the scout must copy a parent. Add {} ({}) to cc and compose it again",
                parent_email,
                parent["name"].as_str().unwrap_or("the parent")
            ));
        }
        self.conn.execute(
            "INSERT INTO emails (recipients, cc, subject, body) VALUES (?1, ?2, ?3, ?4)",
            params![
                serde_json::to_string(&to)?,
                serde_json::to_string(&cc)?,
                subject,
                body
            ],
        )?;
        let id = self.conn.last_insert_rowid();
        Ok(
            json!({"status": "recorded (not sent)", "email": {"id": id, "to": to, "cc": cc, "subject": subject, "body": body}}),
        )
    }

    /// Replaces the quest goal and budget, keeping the old ones in goal_history.
    pub fn update_quest_goal(
        &mut self,
        goal: &str,
        target_budget: f64,
        reason: Option<&str>,
    ) -> Result<Value> {
        let goal = goal.trim();
        if goal.is_empty() {
            return rule("goal must not be empty");
        }
        if !target_budget.is_finite() || target_budget <= 0.0 {
            return rule(format!(
                "target_budget must be a dollar amount above 0 (got {target_budget})"
            ));
        }
        let tx = self.conn.transaction()?;
        let (old_goal, old_target, savings): (String, i64, i64) = tx.query_row(
            "SELECT goal, target_cents, savings_cents FROM quest",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let target = cents(target_budget);
        tx.execute(
            "UPDATE quest SET goal = ?1, target_cents = ?2",
            params![goal, target],
        )?;
        tx.execute(
            "INSERT INTO goal_history (old_goal, old_target_cents, new_goal, new_target_cents, reason)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![old_goal, old_target, goal, target, reason],
        )?;
        tx.commit()?;
        Ok(json!({
            "quest": {"goal": goal, "target_budget": money(target), "savings_to_date": money(savings),
                      "still_needed": money((target - savings).max(0))},
            "previous": {"goal": old_goal, "target_budget": money(old_target)},
        }))
    }
}

fn parse_status(s: &str) -> Result<Status> {
    Status::parse(s).ok_or_else(|| {
        let all: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
        StoreError::Rule(format!(
            "unknown status `{s}`; the statuses are: {}",
            all.join(", ")
        ))
    })
}

fn cents(dollars: f64) -> i64 {
    (dollars * 100.0).round() as i64
}

/// Cents as a JSON dollar amount: whole amounts as integers (`40`), others with cents (`12.5`).
fn money(cents: i64) -> Value {
    dollars(cents as f64 / 100.0)
}

fn dollars(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        Value::from(x as i64)
    } else {
        Value::from(x)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn fixture() -> Fixture {
        Fixture::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/fixtures/test-scout.yaml"),
        )
        .unwrap()
    }

    pub(crate) fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 3, 2).unwrap()
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::create(&dir.path().join("q.db"), &fixture(), today()).unwrap();
        (dir, s)
    }

    fn rule_message<T: std::fmt::Debug>(r: Result<T>) -> String {
        match r {
            Err(StoreError::Rule(m)) => m,
            other => panic!("expected a rule error, got {other:?}"),
        }
    }

    #[test]
    fn chores_log_once_per_day_by_id_or_name() {
        let (_d, mut s) = store();
        s.log_chore("DISHES", None, Some("all of them")).unwrap();
        s.log_chore("feed and walk biscuit", None, None).unwrap();
        let m = rule_message(s.log_chore("dishes", Some("2026-03-02"), None));
        assert!(m.contains("already logged"), "{m}");
        s.log_chore("dishes", Some("2026-03-01"), None).unwrap();
        let state = s.quest_state().unwrap();
        assert_eq!(state["chores_today"].as_array().unwrap().len(), 2);
        assert_eq!(state["chore_log"].as_array().unwrap().len(), 3);
        assert_eq!(state["chores_today"][0]["chore_id"], "dishes");
    }

    #[test]
    fn unknown_chores_and_bad_dates_are_refused() {
        let (_d, mut s) = store();
        let m = rule_message(s.log_chore("mow the lawn", None, None));
        assert!(m.contains("dishes") && m.contains("trash"), "{m}");
        assert!(rule_message(s.log_chore("dog", Some("2026-03-03"), None)).contains("future"));
        assert!(rule_message(s.log_chore("dog", Some("2026-02-01"), None)).contains("7 days"));
        assert!(rule_message(s.log_chore("dog", Some("March 1"), None)).contains("YYYY-MM-DD"));
    }

    #[test]
    fn budget_weeks_add_to_savings_once() {
        let (_d, mut s) = store();
        let r = s.log_budget_entry(1, 40.0, 12.5, None).unwrap();
        assert_eq!(r["savings_to_date"], json!(177.5));
        assert_eq!(r["entry"]["income"], json!(40));
        let m = rule_message(s.log_budget_entry(1, 10.0, 0.0, None));
        assert!(m.contains("already has"), "{m}");
        assert!(rule_message(s.log_budget_entry(0, 1.0, 0.0, None)).contains("week"));
        assert!(rule_message(s.log_budget_entry(2, -1.0, 0.0, None)).contains("income"));
        let state = s.quest_state().unwrap();
        assert_eq!(state["quest"]["savings_to_date"], json!(177.5));
        assert_eq!(state["budget_entries"].as_array().unwrap().len(), 1);
        assert_eq!(state["budget_entries"][0]["income"], json!(40));
        assert_eq!(state["budget_entries"][0]["savings"], json!(27.5));
        assert_eq!(state["quest"]["target_budget"], json!(800));
    }

    #[test]
    fn requirements_follow_the_status_machine() {
        let (_d, mut s) = store();
        // pm_1 starts in_progress.
        let m = rule_message(s.advance_requirement("pm_1", "approved", None));
        assert!(m.contains("ready_for_review or not_started"), "{m}");
        s.advance_requirement("pm_1", "ready_for_review", Some("price table"))
            .unwrap();
        s.advance_requirement("PM_1", "submitted", None).unwrap();
        s.advance_requirement("pm_1", "approved", None).unwrap();
        assert!(
            rule_message(s.advance_requirement("pm_1", "in_progress", None)).contains("finished")
        );
        s.advance_requirement("pm_2", "not_started", None).unwrap();
        assert!(rule_message(s.advance_requirement("pm_9", "in_progress", None)).contains("fl_6"));
        assert!(
            rule_message(s.advance_requirement("pm_3", "started", None)).contains("in_progress")
        );
        let listed = s
            .requirements(Some("personal_management"), Some("approved"))
            .unwrap();
        assert_eq!(listed["requirements"].as_array().unwrap().len(), 1);
        assert!(listed["requirements"][0]["description"].is_string());
        assert!(rule_message(s.requirements(Some("cooking"), None)).contains("family_life"));
    }

    #[test]
    fn emails_must_copy_the_parent() {
        let (_d, mut s) = store();
        let to = ["ken.alvarez@scoutquest.test".to_owned()];
        let m = rule_message(s.compose_email(&to, &[], "Meeting", "Hi"));
        assert!(m.contains("dana.rivera@scoutquest.test"), "{m}");
        let cc = ["Dana.Rivera@scoutquest.test ".to_owned()];
        let r = s.compose_email(&to, &cc, "Meeting", "Hi").unwrap();
        assert_eq!(r["email"]["cc"][0], "dana.rivera@scoutquest.test");
        let bad = ["Ken <ken.alvarez@scoutquest.test>".to_owned()];
        assert!(rule_message(s.compose_email(&bad, &cc, "x", "y")).contains("bare"));
        let state = s.quest_state().unwrap();
        assert_eq!(state["emails"].as_array().unwrap().len(), 1);
        assert_eq!(
            state["emails"][0]["to"],
            json!(["ken.alvarez@scoutquest.test"])
        );
        assert_eq!(
            state["emails"][0]["cc"],
            json!(["dana.rivera@scoutquest.test"])
        );
    }

    #[test]
    fn goal_changes_are_kept_in_history() {
        let (_d, mut s) = store();
        assert!(rule_message(s.update_quest_goal("Bike", 0.0, None)).contains("above 0"));
        s.update_quest_goal("Buy a mountain bike", 450.0, Some("rides with friends"))
            .unwrap();
        let state = s.quest_state().unwrap();
        assert_eq!(state["quest"]["goal"], "Buy a mountain bike");
        assert_eq!(state["quest"]["still_needed"], json!(300));
        assert_eq!(state["goal_history"][0]["old_target_budget"], json!(800));
    }

    #[test]
    fn open_needs_an_initialised_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.db");
        let m = rule_message(Store::open(&path, today()));
        assert!(m.contains("scout-quest-mcp init"), "{m}");
        std::fs::write(&path, b"").unwrap();
        assert!(rule_message(Store::open(&path, today())).contains("not a scout-quest database"));
        drop(Store::create(&path, &fixture(), today()).unwrap());
        assert_eq!(
            Store::open(&path, today()).unwrap().quest_state().unwrap()["scout"]["age"],
            14
        );
    }
}
