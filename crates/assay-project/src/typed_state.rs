//! Typed user state in a project: `[state.fields]` of `assay.toml` ([`StateConfig`]), and the
//! checks that every STATE condition and every case's `user_state` fits the types, before
//! anything runs ([`assay_core::state_fields`] holds the types and the rules).
//!
//! A mistake is an error naming the file, the line and the field, with the closest known name
//! where one is near: a value of the wrong type (`"65"` for an integer), an ordering operator on
//! a field that is not a number or a timestamp, an unknown field (with how to declare it), an
//! audience (`user_type`) that no entity's `audience_types` names. A case that leaves its
//! audience out runs as `PARENT`, the default: where the knowledge base has no `PARENT`
//! audience that is an error, and where it has others too, a warning naming the cases.
//!
//! The checks run in two steps, because a run's banks are read while the knowledge base loads
//! ([`crate::project::Project::load`]): the cases' states are checked against the types as
//! they are read, and what they say of audiences is kept ([`StateUses`]) to be checked once
//! the audiences are known (from the `kb/` files, or the store's snapshot where a database is
//! the source of truth).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use assay_core::UserState;
use assay_core::condition::Conditions;
use assay_core::entity::{DEFAULT_AUDIENCE, Entity};
use assay_core::state_fields::{FieldProblem, FieldType, StateSchema};
use assay_kb::datafile::{self, DataError};
use serde::Deserialize;

use crate::HarnessError;

/// `[state]`: the user state that STATE conditions and cases read.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// The types of the project's own user-state fields, by name: `age = "integer"`,
    /// `plan = { enum = ["free", "paid"] }`. A type is `integer`, `number`, `boolean`,
    /// `string`, `timestamp` (RFC 3339), `audience` (a name some entity's `audience_types`
    /// lists), `list of` one of those, or an enum of fixed strings. The store's own fields
    /// (`user_type`, `conversation_count`, `days_since_last`, `last_rating`, …) have their
    /// types already; a condition or a case that names any other field is an error until it
    /// is declared here.
    pub fields: BTreeMap<String, FieldTypeSpec>,
}

impl StateConfig {
    /// The schema: the built-in fields and these.
    pub fn schema(&self) -> Result<StateSchema, String> {
        StateSchema::new(
            self.fields
                .iter()
                .map(|(name, spec)| (name.clone(), spec.0.clone())),
        )
        .map_err(|e| format!("state.fields: {e}"))
    }
}

/// One declared type (`[state.fields]`): a type's name, or `{ enum = [...] }`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldTypeSpec(pub FieldType);

impl<'de> Deserialize<'de> for FieldTypeSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct EnumSpec {
            #[serde(rename = "enum")]
            values: Vec<String>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Name(String),
            Enum(EnumSpec),
        }
        match Raw::deserialize(d) {
            Ok(Raw::Name(name)) => FieldType::parse(&name)
                .map(FieldTypeSpec)
                .map_err(serde::de::Error::custom),
            Ok(Raw::Enum(EnumSpec { values })) if values.is_empty() => {
                Err(serde::de::Error::custom("an enum needs at least one value"))
            }
            Ok(Raw::Enum(EnumSpec { values })) => Ok(FieldTypeSpec(FieldType::Enum(values))),
            Err(_) => Err(serde::de::Error::custom(
                "expected a type's name (\"integer\", \"list of string\", …) or { enum = [\"a\", \"b\"] }",
            )),
        }
    }
}

impl schemars::JsonSchema for FieldTypeSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FieldType".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A user-state field's type: its name, or an enum of fixed strings.",
            "anyOf": [
                {"type": "string", "enum": FieldType::names()},
                {
                    "type": "object",
                    "properties": {
                        "enum": {"type": "array", "items": {"type": "string"}, "minItems": 1}
                    },
                    "required": ["enum"],
                    "additionalProperties": false,
                },
            ],
        })
    }
}

/// The audiences the entities name (inactive ones too: an audience is the project's whether
/// or not its entities are loaded now).
pub fn audiences<'a>(entities: impl IntoIterator<Item = &'a Entity>) -> BTreeSet<String> {
    entities
        .into_iter()
        .flat_map(|e| e.audience_types.iter().cloned())
        .collect()
}

/// How many mistakes one error lists (the rest are counted).
const LISTED: usize = 20;
/// How many cases a warning about a missing audience names per file (the rest are counted).
const DEFAULTED_LISTED: usize = 5;

/// One mistake: where (a file, or none for an entity of a database store) and what.
#[derive(Debug, Clone, PartialEq)]
struct Mistake {
    file: Option<PathBuf>,
    line: Option<usize>,
    text: String,
}

/// The mistakes found, turned into one error (the first one's file and line, the others
/// listed under it).
#[derive(Debug, Default)]
pub(crate) struct Mistakes {
    list: Vec<Mistake>,
    /// Each file's text, read once when a line is looked for.
    texts: HashMap<PathBuf, String>,
}

impl Mistakes {
    /// A mistake in a file, its line found by `entry` (the `(key, value)` that starts the
    /// entry, then the keys down to the field).
    fn in_file(&mut self, file: &Path, entry: (&str, &str), keys: &[&str], text: String) {
        let contents = self
            .texts
            .entry(file.to_owned())
            .or_insert_with(|| std::fs::read_to_string(file).unwrap_or_default());
        let line = datafile::entry_line(contents, entry, keys);
        self.list.push(Mistake {
            file: Some(file.to_owned()),
            line,
            text,
        });
    }

    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The mistakes of a case's `user_state` (`place`: `tests[3] (S1)`).
    pub(crate) fn case_state(
        &mut self,
        schema: &StateSchema,
        file: &Path,
        place: &str,
        test_id: &str,
        state: &UserState,
    ) {
        for FieldProblem { field, message, .. } in schema.check_state(state) {
            self.in_file(
                file,
                ("test_id", test_id),
                &["user_state", &field],
                format!("{place}: user_state.{field}: {message}"),
            );
        }
    }

    /// [`Mistakes::into_result`] for mistakes that are all in files.
    pub(crate) fn into_data(self) -> Result<(), DataError> {
        match self.into_result() {
            Ok(()) => Ok(()),
            Err(HarnessError::Data(e)) => Err(e),
            Err(other) => Err(DataError::new("", other.to_string())),
        }
    }

    /// `Ok` when there are none; else the error.
    pub(crate) fn into_result(self) -> Result<(), HarnessError> {
        let Some(first) = self.list.first() else {
            return Ok(());
        };
        let at = |m: &Mistake| match (&m.file, m.line) {
            (Some(f), Some(l)) => format!("{}:{l}: ", f.display()),
            (Some(f), None) => format!("{}: ", f.display()),
            (None, _) => String::new(),
        };
        let mut message = first.text.clone();
        for m in self.list.iter().skip(1).take(LISTED - 1) {
            message.push_str(&format!("\n  also {}{}", at(m), m.text));
        }
        if self.list.len() > LISTED {
            message.push_str(&format!("\n  … and {} more", self.list.len() - LISTED));
        }
        Err(match &first.file {
            Some(file) => HarnessError::Data(DataError {
                line: first.line,
                ..DataError::new(file, message)
            }),
            None => HarnessError::Usage(message),
        })
    }
}

/// The place of a case in messages: `tests[3] (S1)`.
pub fn case_place(index: usize, test_id: &str) -> String {
    format!("tests[{index}] ({test_id})")
}

/// Checks a case's `user_state` against the types (not the audiences: see [`StateUses`]):
/// the error names the file, the line and the field, `tests[3] (S1): user_state.age: expected
/// an integer, …` (`place` is `tests[3] (S1)`).
pub fn check_case_state(
    schema: &StateSchema,
    file: &Path,
    place: &str,
    test_id: &str,
    state: &UserState,
) -> Result<(), DataError> {
    let mut mistakes = Mistakes::default();
    mistakes.case_state(schema, file, place, test_id, state);
    mistakes.into_data()
}

/// One use of an audience by a case: the first place each value is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AudienceUse {
    /// The case's file.
    pub file: PathBuf,
    /// Its place in the file: `tests[3] (S1)`.
    pub place: String,
    /// Its test id.
    pub test_id: String,
    /// The field: `user_type` (an always or answer case's own) or `user_state.<field>`.
    pub field: String,
    /// How many cases use the value.
    pub cases: usize,
}

/// The cases of one file that give no audience and so run as the default one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaulted {
    /// How many.
    pub count: usize,
    /// The first few: `tests[0] (S1)`.
    pub listed: Vec<String>,
    /// The first one's test id (its line).
    pub first_id: String,
}

/// What the cases say about audiences, kept from reading the banks until the audiences are
/// known: each audience a case names (the first place it does), and the cases that name none
/// where the default audience is used.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateUses {
    /// By audience.
    pub audiences: BTreeMap<String, AudienceUse>,
    /// By file.
    pub defaulted: BTreeMap<PathBuf, Defaulted>,
}

impl StateUses {
    /// Adds `other`'s uses (read from other banks) to these.
    pub fn merge(&mut self, other: StateUses) {
        for (value, u) in other.audiences {
            self.audiences
                .entry(value)
                .and_modify(|mine| mine.cases += u.cases)
                .or_insert(u);
        }
        for (file, d) in other.defaulted {
            let mine = self.defaulted.entry(file).or_default();
            if mine.count == 0 {
                *mine = d;
            } else {
                mine.count += d.count;
            }
        }
    }

    /// Records the audiences a case's state names (the fields whose type is an audience),
    /// and its own `user_type` when it has one (`own`: `Some(Some(..))`, or `Some(None)` for
    /// a case whose audience defaults when neither it nor its state gives one).
    pub fn record(
        &mut self,
        schema: &StateSchema,
        file: &Path,
        place: &str,
        test_id: &str,
        state: &UserState,
        own: Option<Option<&str>>,
    ) {
        let mut add = |value: &str, field: String| {
            self.audiences
                .entry(value.to_owned())
                .and_modify(|u| u.cases += 1)
                .or_insert_with(|| AudienceUse {
                    file: file.to_owned(),
                    place: place.to_owned(),
                    test_id: test_id.to_owned(),
                    field,
                    cases: 1,
                });
        };
        for (field, value) in state {
            let (Some(t), false) = (schema.get(field), value.is_null()) else {
                continue;
            };
            match (t, value) {
                (FieldType::Audience, serde_json::Value::String(s)) => {
                    add(s, format!("user_state.{field}"));
                }
                (FieldType::List(inner), serde_json::Value::Array(items))
                    if **inner == FieldType::Audience =>
                {
                    for s in items.iter().filter_map(serde_json::Value::as_str) {
                        add(s, format!("user_state.{field}"));
                    }
                }
                _ => {}
            }
        }
        let Some(own) = own else { return };
        if let Some(value) = own {
            add(value, "user_type".to_owned());
        } else if state
            .get(USER_TYPE)
            .and_then(serde_json::Value::as_str)
            .is_none()
        {
            let d = self.defaulted.entry(file.to_owned()).or_default();
            if d.count == 0 {
                test_id.clone_into(&mut d.first_id);
            }
            d.count += 1;
            if d.listed.len() < DEFAULTED_LISTED {
                d.listed.push(place.to_owned());
            }
        }
    }

    /// Checks the recorded audiences against `audiences` (those the entities name; an empty
    /// set, a knowledge base without entities, checks nothing): an audience no entity names
    /// is an error, and so are cases that run as the default audience where no entity names
    /// it; where it is one audience among others, they are a warning. Returns the warnings.
    pub fn check(&self, audiences: &BTreeSet<String>) -> Result<Vec<String>, HarnessError> {
        let mut warnings = Vec::new();
        if audiences.is_empty() {
            return Ok(warnings);
        }
        let mut mistakes = Mistakes::default();
        let listed = audiences
            .iter()
            .map(|a| format!("`{a}`"))
            .collect::<Vec<_>>()
            .join(", ");
        for (value, u) in &self.audiences {
            if audiences.contains(value) {
                continue;
            }
            let near = assay_core::text::closest(value, audiences.iter().map(String::as_str))
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            let others = match u.cases {
                1 => String::new(),
                n => format!(" ({} other cases name it too)", n - 1),
            };
            let keys: Vec<&str> = u.field.split('.').collect();
            mistakes.in_file(
                &u.file,
                ("test_id", &u.test_id),
                &keys,
                format!(
                    "{}: {}: `{value}` is not an audience: no entity's audience_types names it{near}; the audiences are {listed}{others}",
                    u.place, u.field
                ),
            );
        }
        for (file, d) in &self.defaulted {
            let more = match d.count.saturating_sub(d.listed.len()) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            let cases = format!("{}{more}", d.listed.join(", "));
            if !audiences.contains(DEFAULT_AUDIENCE) {
                mistakes.in_file(
                    file,
                    ("test_id", &d.first_id),
                    &[],
                    format!(
                        "{cases}: no user_type, so {} run as `{DEFAULT_AUDIENCE}` (the default audience), which no entity's audience_types names; set user_state.user_type to one of {listed}",
                        if d.count == 1 { "it would" } else { "they would" }
                    ),
                );
            } else if audiences.len() > 1 {
                warnings.push(format!(
                    "{}: {} no user_type and {} as `{DEFAULT_AUDIENCE}` (the default audience), though the knowledge base has the audiences {listed}: {cases}; set user_state.user_type to say which",
                    file.display(),
                    if d.count == 1 {
                        "a case has".to_owned()
                    } else {
                        format!("{} cases have", d.count)
                    },
                    if d.count == 1 { "runs" } else { "run" }
                ));
            }
        }
        mistakes.into_result()?;
        Ok(warnings)
    }
}

/// The user-state field an audience is read from.
pub const USER_TYPE: &str = "user_type";

/// Checks every entity's `state_conditions` against `schema` (with the audiences): each
/// mistake names the entity's file and line (from `sources`, the file each entity was read
/// from; an entity without one, from a database store, is named alone).
pub fn check_conditions<'a, S: std::hash::BuildHasher>(
    entities: impl IntoIterator<Item = &'a Entity>,
    sources: &HashMap<String, PathBuf, S>,
    schema: &StateSchema,
) -> Result<(), HarnessError> {
    let mut mistakes = Mistakes::default();
    for entity in entities {
        let Some(raw) = &entity.state_conditions else {
            continue;
        };
        let id = &entity.entity_id;
        let problems = match Conditions::parse(raw) {
            Ok(conditions) => schema.check_conditions(&conditions),
            Err(e) => vec![FieldProblem {
                field: e.field().to_owned(),
                op: None,
                message: e.to_string(),
            }],
        };
        for FieldProblem { field, message, .. } in problems {
            let text = format!("entity `{id}`: state_conditions.{field}: {message}");
            match sources.get(id) {
                Some(file) => {
                    mistakes.in_file(file, ("entity_id", id), &["state_conditions", &field], text);
                }
                None => mistakes.list.push(Mistake {
                    file: None,
                    line: None,
                    text: format!("the store's {text}"),
                }),
            }
        }
    }
    if mistakes.is_empty() {
        return Ok(());
    }
    mistakes.into_result()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entity(yaml_id: &str, conditions: &serde_json::Value) -> Entity {
        serde_json::from_value(json!({
            "entity_id": yaml_id, "entity_type": "HANDLER", "title": "H", "load_mode": "STATE",
            "state_conditions": conditions, "audience_types": ["PARENT", "STAFF"],
        }))
        .unwrap()
    }

    fn schema() -> StateSchema {
        StateSchema::new([("age".to_owned(), FieldType::Integer)]).unwrap()
    }

    #[test]
    fn declarations_parse_with_their_errors() {
        let config: StateConfig = toml::from_str(
            "[fields]\nage = \"integer\"\nplan = { enum = [\"free\", \"paid\"] }\ntags = \"list of string\"\n",
        )
        .unwrap();
        let schema = config.schema().unwrap();
        assert_eq!(schema.get("age"), Some(&FieldType::Integer));
        assert_eq!(
            schema.get("plan"),
            Some(&FieldType::Enum(vec!["free".into(), "paid".into()]))
        );
        for (text, message) in [
            ("[fields]\nage = \"integr\"\n", "did you mean `integer`?"),
            (
                "[fields]\nplan = { enum = [] }\n",
                "an enum needs at least one value",
            ),
            (
                "[fields]\nplan = { values = [\"a\"] }\n",
                "expected a type's name",
            ),
            ("[fields]\nage = 3\n", "expected a type's name"),
        ] {
            let err = toml::from_str::<StateConfig>(text).unwrap_err().to_string();
            assert!(err.contains(message), "{text}: {err}");
        }
        let config: StateConfig =
            toml::from_str("[fields]\nconversation_count = \"string\"\n").unwrap();
        let err = config.schema().unwrap_err();
        assert!(
            err.starts_with("state.fields: `conversation_count` is a built-in field"),
            "{err}"
        );
    }

    #[test]
    fn conditions_name_the_file_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.yaml");
        std::fs::write(
            &file,
            "- entity_id: h\n  state_conditions:\n    is_first_conversation: false\n    age: {$gte: \"65\"}\n",
        )
        .unwrap();
        let e = entity(
            "h",
            &json!({"is_first_conversation": false, "age": {"$gte": "65"}}),
        );
        let sources = HashMap::from([("h".to_owned(), file.clone())]);
        let err = check_conditions([&e], &sources, &schema())
            .unwrap_err()
            .to_string();
        assert!(err.contains("h.yaml:4: entity `h`: state_conditions.age: `gte`: expected an integer, found the string \"65\""), "{err}");
        // From a store: named without a file.
        let err = check_conditions([&e], &HashMap::new(), &schema())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("the store's entity `h`: state_conditions.age"),
            "{err}"
        );
        let fine = entity("h", &json!({"age": {"$gte": 65}}));
        check_conditions([&fine], &sources, &schema()).unwrap();
    }

    #[test]
    fn audiences_and_defaults_are_checked_once_known() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.json");
        std::fs::write(
            &file,
            "{\"tests\": [\n{\"test_id\": \"A1\",\n \"user_type\": \"STAF\"},\n{\"test_id\": \"S1\", \"user_state\": {}}\n]}",
        )
        .unwrap();
        let mut uses = StateUses::default();
        let empty = UserState::new();
        uses.record(
            &schema(),
            &file,
            "tests[0] (A1)",
            "A1",
            &empty,
            Some(Some("STAF")),
        );
        uses.record(&schema(), &file, "tests[1] (S1)", "S1", &empty, Some(None));
        let known = |names: &[&str]| names.iter().map(|s| (*s).to_owned()).collect();
        let err = uses
            .check(&known(&["PARENT", "STAFF"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a.json:3: tests[0] (A1): user_type: `STAF` is not an audience")
                && err.contains("(did you mean `STAFF`?)"),
            "{err}"
        );
        let mut fixed = StateUses::default();
        fixed.record(&schema(), &file, "tests[1] (S1)", "S1", &empty, Some(None));
        let warnings = fixed.check(&known(&["PARENT", "STAFF"])).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("a case has no user_type and runs as `PARENT`")
                && warnings[0].contains("tests[1] (S1)"),
            "{warnings:?}"
        );
        assert_eq!(
            fixed.check(&known(&["PARENT"])).unwrap(),
            Vec::<String>::new()
        );
        let err = fixed.check(&known(&["RIDER"])).unwrap_err().to_string();
        assert!(
            err.contains("a.json:4: tests[1] (S1): no user_type"),
            "{err}"
        );
        assert!(fixed.check(&BTreeSet::new()).unwrap().is_empty());
    }
}
