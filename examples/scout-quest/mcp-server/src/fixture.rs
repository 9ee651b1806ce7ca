//! The fixture: the scout profile `init` loads into a fresh database.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A fixture that failed to load, naming the file and the field.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct FixtureError {
    pub file: String,
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    pub scout: Scout,
    pub quest: Quest,
    pub character: Character,
    pub chores: Vec<Chore>,
    pub contacts: Contacts,
    pub requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scout {
    pub name: String,
    pub email: String,
    pub age: u32,
    pub troop: String,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Quest {
    pub goal: String,
    pub target_budget: f64,
    #[serde(default)]
    pub savings_to_date: f64,
}

/// How the coach should sound; stored and shown as given.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Character {
    pub base: String,
    pub quest_overlay: String,
    /// 1 (calm, plain) to 5 (high energy, playful).
    pub tone: u8,
    /// 1 (no quest theming) to 5 (quest metaphors everywhere).
    pub domain: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub avoid: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Chore {
    pub id: String,
    pub name: String,
    pub frequency: String,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Contacts {
    pub parent: Contact,
    #[serde(default)]
    pub counselors: Vec<Counselor>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Contact {
    pub name: String,
    pub email: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relationship: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Counselor {
    pub name: String,
    pub email: String,
    pub badge: Badge,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    pub id: String,
    pub badge: Badge,
    pub title: String,
    pub description: String,
    #[serde(default)]
    pub status: Status,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Badge {
    PersonalManagement,
    FamilyLife,
}

impl Badge {
    pub const ALL: [Badge; 2] = [Badge::PersonalManagement, Badge::FamilyLife];

    pub fn as_str(self) -> &'static str {
        match self {
            Badge::PersonalManagement => "personal_management",
            Badge::FamilyLife => "family_life",
        }
    }

    pub fn parse(s: &str) -> Option<Badge> {
        Badge::ALL.into_iter().find(|b| b.as_str() == s)
    }
}

/// Where a requirement stands. The allowed moves are in [`Status::next`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    NotStarted,
    InProgress,
    ReadyForReview,
    Submitted,
    Approved,
}

impl Status {
    pub const ALL: [Status; 5] = [
        Status::NotStarted,
        Status::InProgress,
        Status::ReadyForReview,
        Status::Submitted,
        Status::Approved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::NotStarted => "not_started",
            Status::InProgress => "in_progress",
            Status::ReadyForReview => "ready_for_review",
            Status::Submitted => "submitted",
            Status::Approved => "approved",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// The statuses a requirement may move to from this one.
    pub fn next(self) -> &'static [Status] {
        match self {
            Status::NotStarted => &[Status::InProgress],
            Status::InProgress => &[Status::ReadyForReview, Status::NotStarted],
            Status::ReadyForReview => &[Status::Submitted],
            Status::Submitted => &[Status::Approved],
            Status::Approved => &[],
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A bare address: one `@`, a dotted domain, no spaces or angle brackets.
pub fn looks_like_email(s: &str) -> bool {
    let Some((user, domain)) = s.split_once('@') else {
        return false;
    };
    !user.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '<' | '>' | ',' | ';'))
}

impl Fixture {
    /// Reads, parses and checks a fixture file (YAML or JSON).
    pub fn load(path: &Path) -> Result<Fixture, FixtureError> {
        let file = path.display().to_string();
        let fail = |field: &str, message: String| FixtureError {
            file: file.clone(),
            field: field.to_owned(),
            message,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| fail("file", format!("cannot be read: {e}")))?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let de = serde_norway::Deserializer::from_str(text);
        let fixture: Fixture = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let field = if field == "." {
                "(document)".into()
            } else {
                field
            };
            let message = e.into_inner().to_string();
            // serde_norway may start its message with (part of) the path: say it once.
            let message = match message.split_once(": ") {
                Some((head, rest)) if !head.contains(' ') && field.starts_with(head) => {
                    rest.to_owned()
                }
                _ => message,
            };
            fail(&field, message)
        })?;
        fixture
            .check()
            .map_err(|(field, message)| fail(&field, message))?;
        Ok(fixture)
    }

    /// The checks serde cannot express, as `(field, message)`.
    fn check(&self) -> Result<(), (String, String)> {
        let err = |field: &str, message: &str| Err((field.to_owned(), message.to_owned()));
        let email = |field: &str, value: &str| {
            if looks_like_email(value) {
                Ok(())
            } else {
                Err((
                    field.to_owned(),
                    format!("`{value}` is not an email address"),
                ))
            }
        };
        if self.scout.name.trim().is_empty() {
            return err("scout.name", "must not be empty");
        }
        email("scout.email", &self.scout.email)?;
        if self.scout.age == 0 {
            return err("scout.age", "must be at least 1");
        }
        if self.quest.goal.trim().is_empty() {
            return err("quest.goal", "must not be empty");
        }
        if !(self.quest.target_budget.is_finite() && self.quest.target_budget > 0.0) {
            return err("quest.target_budget", "must be a number above 0");
        }
        if !self.quest.savings_to_date.is_finite() {
            return err("quest.savings_to_date", "must be a number");
        }
        for (field, value) in [
            ("character.tone", self.character.tone),
            ("character.domain", self.character.domain),
        ] {
            if !(1..=5).contains(&value) {
                return err(field, "must be between 1 and 5");
            }
        }
        email("contacts.parent.email", &self.contacts.parent.email)?;
        for (i, c) in self.contacts.counselors.iter().enumerate() {
            email(&format!("contacts.counselors[{i}].email"), &c.email)?;
        }
        if self.chores.is_empty() {
            return err("chores", "list at least one chore");
        }
        let mut seen = HashSet::new();
        for (i, chore) in self.chores.iter().enumerate() {
            if !is_id(&chore.id) {
                return err(
                    &format!("chores[{i}].id"),
                    "use lowercase letters, digits and _",
                );
            }
            if !seen.insert(chore.id.as_str()) {
                return err(&format!("chores[{i}].id"), "duplicate chore id");
            }
        }
        if self.requirements.is_empty() {
            return err("requirements", "list at least one requirement");
        }
        let mut seen = HashSet::new();
        for (i, req) in self.requirements.iter().enumerate() {
            if !is_id(&req.id) {
                return err(
                    &format!("requirements[{i}].id"),
                    "use lowercase letters, digits and _",
                );
            }
            if !seen.insert(req.id.as_str()) {
                return err(&format!("requirements[{i}].id"), "duplicate requirement id");
            }
        }
        Ok(())
    }
}

fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example_path() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/fixtures/test-scout.yaml")
    }

    #[test]
    fn the_shipped_fixture_loads() {
        let f = Fixture::load(&example_path()).unwrap();
        assert_eq!(f.scout.age, 14);
        assert_eq!(f.chores.len(), 3);
        assert!(f.requirements.iter().any(|r| r.id == "fl_6"));
    }

    fn load_str(text: &str) -> Result<Fixture, FixtureError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.yaml");
        std::fs::write(&path, text).unwrap();
        Fixture::load(&path)
    }

    #[test]
    fn a_bad_status_names_the_field() {
        let text = std::fs::read_to_string(example_path()).unwrap().replacen(
            "status: in_progress",
            "status: done",
            1,
        );
        let e = load_str(&text).unwrap_err();
        assert_eq!(e.field, "requirements[0].status");
        assert!(e.message.starts_with("unknown variant `done`"), "{e}");
        assert!(e.message.contains("not_started"), "{e}");
        assert!(e.to_string().contains("f.yaml"), "{e}");
    }

    #[test]
    fn semantic_errors_name_the_field() {
        let base = std::fs::read_to_string(example_path()).unwrap();
        let e = load_str(&base.replace("dana.rivera@scoutquest.test", "dana")).unwrap_err();
        assert_eq!(e.field, "contacts.parent.email");
        let e = load_str(&base.replace("id: trash", "id: dog")).unwrap_err();
        assert_eq!(e.field, "chores[2].id");
        let e = load_str(&base.replace("tone: 3", "tone: 9")).unwrap_err();
        assert_eq!(e.field, "character.tone");
        let e = load_str(&base.replace("troop:", "troupe:")).unwrap_err();
        assert!(e.field.starts_with("scout"), "{e}");
        assert!(e.message.contains("troupe"), "{e}");
    }

    #[test]
    fn the_status_machine_moves_forward_one_step() {
        assert_eq!(Status::NotStarted.next(), &[Status::InProgress]);
        assert!(Status::InProgress.next().contains(&Status::NotStarted));
        assert!(!Status::ReadyForReview.next().contains(&Status::Approved));
        assert!(Status::Approved.next().is_empty());
    }

    #[test]
    fn email_shapes() {
        assert!(looks_like_email("a.b@c.test"));
        assert!(!looks_like_email("Dana <dana@c.test>"));
        assert!(!looks_like_email("dana@localhost"));
        assert!(!looks_like_email("a@b@c.test"));
        assert!(!looks_like_email("@c.test"));
    }
}
