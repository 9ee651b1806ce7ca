//! Typed user state: the type of every field a STATE condition or a case's `user_state` reads.
//!
//! The user-state store's own fields have their types ([`built_in`]); a project declares the
//! fields it adds (`[state.fields]` in `assay.toml`). A [`StateSchema`] holds both, and the
//! project's audiences once the knowledge base is known, and checks against them:
//!
//! * a case's `user_state` ([`StateSchema::check_state`]): every field known, every value of
//!   its field's type (`null` means "not set" and fits every type);
//! * a parsed `state_conditions` ([`StateSchema::check_conditions`]): every field known, every
//!   operand of its field's type, an ordering operator (`gt`, `gte`, `lt`, `lte`) only on a
//!   number or a timestamp, each element of an `in`/`nin` list of the field's type.
//!
//! A mistake there would otherwise switch a test off silently: `{"age": "65"}` never compares
//! with `{gte: 65}`, so the handler never triggers and no failure says why.
//!
//! ```
//! use assay_core::state_fields::{FieldType, StateSchema};
//! let schema = StateSchema::new([("age".to_owned(), FieldType::Integer)]).unwrap();
//! let state = serde_json::json!({"age": "65"});
//! let problems = schema.check_state(state.as_object().unwrap());
//! assert_eq!(problems[0].field, "age");
//! assert!(problems[0].message.contains("expected an integer, found the string \"65\""));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use crate::UserState;
use crate::condition::{Conditions, Op};
pub use crate::timestamp::parse_timestamp;

/// The type of one user-state field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldType {
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// Any string.
    String,
    /// An RFC 3339 date and time (`2026-11-21T12:00:00Z`); ordered by the instant it names.
    Timestamp,
    /// A string that names an audience: one that some entity's `audience_types` lists.
    Audience,
    /// One of a fixed set of strings.
    Enum(Vec<String>),
    /// A list whose elements have the inner type (a scalar type).
    List(Box<FieldType>),
}

/// The scalar type names a declaration may use (each also as `list of <name>`).
pub const SCALAR_NAMES: [&str; 6] = [
    "integer",
    "number",
    "boolean",
    "string",
    "timestamp",
    "audience",
];

impl FieldType {
    /// Parses a type name: `integer`, `number`, `boolean`, `string`, `timestamp`, `audience`,
    /// or `list of ` one of those. An enum is declared with its values instead
    /// ([`FieldType::Enum`]).
    pub fn parse(name: &str) -> Result<FieldType, String> {
        let name = name.trim();
        if let Some(inner) = name.strip_prefix("list of ") {
            return match scalar(inner.trim()) {
                Some(t) => Ok(FieldType::List(Box::new(t))),
                None => Err(unknown_type(name)),
            };
        }
        scalar(name).ok_or_else(|| unknown_type(name))
    }

    /// Every name [`FieldType::parse`] accepts.
    pub fn names() -> Vec<String> {
        SCALAR_NAMES
            .iter()
            .map(|s| (*s).to_owned())
            .chain(SCALAR_NAMES.iter().map(|s| format!("list of {s}")))
            .collect()
    }

    /// Whether the ordering operators (`gt`, `gte`, `lt`, `lte`) apply.
    pub fn is_ordered(&self) -> bool {
        matches!(
            self,
            FieldType::Integer | FieldType::Number | FieldType::Timestamp
        )
    }

    /// The type with an article, for messages: `an integer`, `a list of string`.
    pub fn described(&self) -> String {
        let name = self.to_string();
        let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        format!("{article} {name}")
    }

    /// Checks that `value` (not `null`) is of this type. The message says what was expected
    /// and what was found: `expected an integer, found the string "65"`.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        let expected = |what: &str| Err(format!("expected {what}, found {}", found(value)));
        match self {
            FieldType::Integer => match value {
                Value::Number(n) if is_whole(n) => Ok(()),
                _ => expected("an integer"),
            },
            FieldType::Number => match value {
                Value::Number(_) => Ok(()),
                _ => expected("a number"),
            },
            FieldType::Boolean => match value {
                Value::Bool(_) => Ok(()),
                _ => expected("true or false"),
            },
            FieldType::String | FieldType::Audience => match value {
                Value::String(_) => Ok(()),
                _ => expected("a string"),
            },
            FieldType::Timestamp => match value {
                Value::String(s) if parse_timestamp(s).is_some() => Ok(()),
                _ => expected("an RFC 3339 timestamp such as \"2026-11-21T12:00:00Z\""),
            },
            FieldType::Enum(values) => match value {
                Value::String(s) if values.iter().any(|v| v == s) => Ok(()),
                Value::String(s) => Err(format!(
                    "`{s}` is not one of its values{}; expected one of {}",
                    did_you_mean(s, values.iter().map(String::as_str)),
                    quoted(values.iter().map(String::as_str))
                )),
                _ => expected(&format!(
                    "one of {}",
                    quoted(values.iter().map(String::as_str))
                )),
            },
            FieldType::List(inner) => match value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        inner.check(item).map_err(|e| {
                            format!("element {i}: {e} (a list of {inner} was expected)")
                        })?;
                    }
                    Ok(())
                }
                _ => expected(&self.described()),
            },
        }
    }

    /// The type a declaration would most likely give a field whose value is `value`, for the
    /// hint of an unknown field's error (`integer` for 65, `list of string` for `["a"]`).
    pub fn guess(value: &Value) -> &'static str {
        match value {
            Value::Bool(_) => "boolean",
            Value::Number(n) if is_whole(n) => "integer",
            Value::Number(_) => "number",
            Value::String(s) if parse_timestamp(s).is_some() => "timestamp",
            Value::Array(items) => match items.first() {
                Some(Value::Number(n)) if is_whole(n) => "list of integer",
                Some(Value::Number(_)) => "list of number",
                Some(Value::Bool(_)) => "list of boolean",
                _ => "list of string",
            },
            _ => "string",
        }
    }
}

fn scalar(name: &str) -> Option<FieldType> {
    Some(match name {
        "integer" => FieldType::Integer,
        "number" => FieldType::Number,
        "boolean" => FieldType::Boolean,
        "string" => FieldType::String,
        "timestamp" => FieldType::Timestamp,
        "audience" => FieldType::Audience,
        _ => return None,
    })
}

fn unknown_type(name: &str) -> String {
    let names = FieldType::names();
    // A short form (`bool`, `int`, `list of str`) is the name it starts; else the closest.
    let near = (name.len() >= 3)
        .then(|| names.iter().find(|n| n.starts_with(name)))
        .flatten()
        .map_or_else(
            || did_you_mean(name, names.iter().map(String::as_str)),
            |n| format!(" (did you mean `{n}`?)"),
        );
    format!(
        "unknown type `{name}`{near}; expected one of {}, or {{ enum = [\"a\", \"b\"] }} for a fixed set of strings",
        quoted(names.iter().map(String::as_str))
    )
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::Integer => f.write_str("integer"),
            FieldType::Number => f.write_str("number"),
            FieldType::Boolean => f.write_str("boolean"),
            FieldType::String => f.write_str("string"),
            FieldType::Timestamp => f.write_str("timestamp"),
            FieldType::Audience => f.write_str("audience"),
            FieldType::Enum(values) => write!(f, "enum [{}]", values.join(", ")),
            FieldType::List(inner) => write!(f, "list of {inner}"),
        }
    }
}

/// Whether a JSON number is whole (`3`, `3.0`; not `3.5`).
fn is_whole(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|x| x.fract() == 0.0)
}

/// What a value is, for messages: `the string "65"`, `the number 6.5`, `a list`.
fn found(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {}", Value::String(s.clone())),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    crate::text::closest(name, candidates)
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default()
}

fn quoted<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The user-state store's own fields and their types: the columns of the `user_state` table
/// and the keys derived from them (`is_first_conversation`, `days_since_last`, `last_rating`),
/// and `has_pending_debrief`, which the specification's debrief handler reads (the store
/// keeps it with the other fields of a project's own).
pub fn built_in() -> Vec<(&'static str, FieldType)> {
    let strings = || FieldType::List(Box::new(FieldType::String));
    vec![
        ("user_id", FieldType::String),
        ("user_type", FieldType::Audience),
        ("conversation_count", FieldType::Integer),
        ("is_first_conversation", FieldType::Boolean),
        ("days_since_last", FieldType::Integer),
        ("session_type", FieldType::String),
        ("interaction_rating", FieldType::Integer),
        ("last_rating", FieldType::Integer),
        ("just_logged", FieldType::Boolean),
        ("skills_practiced", strings()),
        ("last_topics", strings()),
        ("first_seen", FieldType::Timestamp),
        ("last_seen", FieldType::Timestamp),
        ("has_pending_debrief", FieldType::Boolean),
    ]
}

/// Where a field's type comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The user-state store's own field ([`built_in`]).
    BuiltIn,
    /// Declared by the project (`[state.fields]`).
    Declared,
}

/// One mistake in a user state or a condition, on one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// The field.
    pub field: String,
    /// The operator of the test that is wrong, for a condition (as `gte`, without `$`).
    pub op: Option<Op>,
    /// What is wrong.
    pub message: String,
}

/// The types of every user-state field a project knows, and its audiences once known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSchema {
    fields: BTreeMap<String, (FieldType, Origin)>,
    audiences: Option<BTreeSet<String>>,
}

impl Default for StateSchema {
    /// The built-in fields alone.
    fn default() -> Self {
        StateSchema {
            fields: built_in()
                .into_iter()
                .map(|(name, t)| (name.to_owned(), (t, Origin::BuiltIn)))
                .collect(),
            audiences: None,
        }
    }
}

impl StateSchema {
    /// The built-in fields and the project's `declared` ones. A declared field may repeat a
    /// built-in one's type, or narrow a built-in string to an enum; any other type for a
    /// built-in field is an error naming it.
    pub fn new(
        declared: impl IntoIterator<Item = (String, FieldType)>,
    ) -> Result<StateSchema, String> {
        let mut schema = StateSchema::default();
        for (name, t) in declared {
            if name.trim().is_empty() {
                return Err("a field name is empty".to_owned());
            }
            if let Some((built, _)) = schema.fields.get(&name) {
                let narrows = *built == FieldType::String && matches!(t, FieldType::Enum(_));
                if *built != t && !narrows {
                    return Err(format!(
                        "`{name}` is a built-in field of type {built}; it cannot be declared {t} (leave it out, or use an enum to narrow a built-in string)"
                    ));
                }
            }
            if let FieldType::Enum(values) = &t
                && values.is_empty()
            {
                return Err(format!("`{name}`: an enum needs at least one value"));
            }
            schema.fields.insert(name, (t, Origin::Declared));
        }
        Ok(schema)
    }

    /// The schema with the project's audiences: every audience value is then checked against
    /// them. An empty set (a knowledge base without entities) checks nothing.
    #[must_use]
    pub fn with_audiences(mut self, audiences: BTreeSet<String>) -> StateSchema {
        self.audiences = (!audiences.is_empty()).then_some(audiences);
        self
    }

    /// The audiences, when known.
    pub fn audiences(&self) -> Option<&BTreeSet<String>> {
        self.audiences.as_ref()
    }

    /// A field's type, if the field is known.
    pub fn get(&self, field: &str) -> Option<&FieldType> {
        self.fields.get(field).map(|(t, _)| t)
    }

    /// Every known field, its type and where the type comes from, by name.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &FieldType, Origin)> {
        self.fields.iter().map(|(n, (t, o))| (n.as_str(), t, *o))
    }

    /// The error of a field the schema does not know: the closest known field, and how to
    /// declare it (with the type its `value` suggests).
    pub fn unknown_field(&self, field: &str, value: Option<&Value>) -> String {
        let guess = value.map_or("string", FieldType::guess);
        format!(
            "unknown user-state field `{field}`{}; a field of the project's own is declared with its type in assay.toml: [state.fields] {field} = \"{guess}\"",
            did_you_mean(field, self.fields.keys().map(String::as_str))
        )
    }

    /// Checks one value (not `null`) of a known field: its type, and, for an audience, that
    /// some entity names it (when the audiences are known).
    pub fn check_value(&self, field_type: &FieldType, value: &Value) -> Result<(), String> {
        field_type.check(value)?;
        match field_type {
            FieldType::Audience => self.check_audience(value),
            FieldType::List(inner) if **inner == FieldType::Audience => {
                value.as_array().map_or(Ok(()), |items| {
                    items.iter().enumerate().try_for_each(|(i, v)| {
                        self.check_audience(v)
                            .map_err(|e| format!("element {i}: {e}"))
                    })
                })
            }
            _ => Ok(()),
        }
    }

    /// Checks that a string names a known audience (always true while they are unknown).
    pub fn check_audience(&self, value: &Value) -> Result<(), String> {
        let (Some(audiences), Some(name)) = (&self.audiences, value.as_str()) else {
            return Ok(());
        };
        if audiences.contains(name) {
            return Ok(());
        }
        Err(format!(
            "`{name}` is not an audience: no entity's audience_types names it{}; the audiences are {}",
            did_you_mean(name, audiences.iter().map(String::as_str)),
            quoted(audiences.iter().map(String::as_str))
        ))
    }

    /// The mistakes of a case's `user_state`, in field order: an unknown field, a value of the
    /// wrong type, an audience no entity names. `null` is "not set" and fits every field.
    pub fn check_state(&self, state: &UserState) -> Vec<FieldProblem> {
        let mut problems = Vec::new();
        for (field, value) in state {
            let problem = |message: String| FieldProblem {
                field: field.clone(),
                op: None,
                message,
            };
            let Some(t) = self.get(field) else {
                problems.push(problem(self.unknown_field(field, Some(value))));
                continue;
            };
            if value.is_null() {
                continue;
            }
            if let Err(e) = self.check_value(t, value) {
                problems.push(problem(format!("{e} ({field} is {})", t.described())));
            }
        }
        problems
    }

    /// The mistakes of parsed conditions, in field order: an unknown field, an ordering
    /// operator on a field that is neither a number nor a timestamp, an operand (or an
    /// element of an `in`/`nin` list) not of the field's type, an audience no entity names.
    pub fn check_conditions(&self, conditions: &Conditions) -> Vec<FieldProblem> {
        let mut problems = Vec::new();
        for condition in conditions.conditions() {
            let field = &condition.field;
            let Some(t) = self.get(field) else {
                let sample = condition.tests.iter().find_map(|t| match t.op {
                    Op::Exists => None,
                    Op::In | Op::Nin => t.operand.as_array().and_then(|a| a.first()),
                    _ => Some(&t.operand),
                });
                problems.push(FieldProblem {
                    field: field.clone(),
                    op: None,
                    message: self.unknown_field(field, sample),
                });
                continue;
            };
            for test in &condition.tests {
                let problem = |message: String| FieldProblem {
                    field: field.clone(),
                    op: Some(test.op),
                    message,
                };
                let of_type = |value: &Value| {
                    self.check_value(t, value)
                        .map_err(|e| format!("{e} ({field} is {})", t.described()))
                };
                let result = match test.op {
                    Op::Exists => Ok(()),
                    Op::Gt | Op::Gte | Op::Lt | Op::Lte if !t.is_ordered() => Err(format!(
                        "an ordering operator compares numbers and timestamps, but {field} is {}",
                        t.described()
                    )),
                    Op::Eq | Op::Ne | Op::Gt | Op::Gte | Op::Lt | Op::Lte => of_type(&test.operand),
                    Op::In | Op::Nin => test
                        .operand
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                        .iter()
                        .enumerate()
                        .try_for_each(|(i, v)| of_type(v).map_err(|e| format!("element {i}: {e}"))),
                };
                if let Err(message) = result {
                    problems.push(problem(format!("`{}`: {message}", test.op)));
                }
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(declared: &[(&str, FieldType)]) -> StateSchema {
        StateSchema::new(declared.iter().map(|(n, t)| ((*n).to_owned(), t.clone()))).unwrap()
    }

    fn conditions(raw: &Value) -> Conditions {
        Conditions::parse(raw.as_object().unwrap()).unwrap()
    }

    #[test]
    fn type_names_parse_and_print() {
        for name in FieldType::names() {
            assert_eq!(FieldType::parse(&name).unwrap().to_string(), name);
        }
        let err = FieldType::parse("integr").unwrap_err();
        assert!(
            err.contains("unknown type `integr` (did you mean `integer`?)"),
            "{err}"
        );
        assert!(FieldType::parse("list of list of string").is_err());
        for (short, meant) in [
            ("bool", "boolean"),
            ("int", "integer"),
            ("list of str", "list of string"),
        ] {
            let err = FieldType::parse(short).unwrap_err();
            assert!(err.contains(&format!("(did you mean `{meant}`?)")), "{err}");
        }
        assert_eq!(FieldType::Integer.described(), "an integer");
        assert_eq!(
            FieldType::List(Box::new(FieldType::String)).described(),
            "a list of string"
        );
    }

    #[test]
    fn values_are_checked_against_their_type() {
        let ok = [
            (FieldType::Integer, json!(65)),
            (FieldType::Integer, json!(65.0)),
            (FieldType::Number, json!(6.5)),
            (FieldType::Boolean, json!(false)),
            (FieldType::String, json!("x")),
            (FieldType::Timestamp, json!("2026-11-21T12:00:00.123456Z")),
            (
                FieldType::Enum(vec!["free".into(), "paid".into()]),
                json!("paid"),
            ),
            (
                FieldType::List(Box::new(FieldType::String)),
                json!(["a", "b"]),
            ),
        ];
        for (t, v) in ok {
            assert_eq!(t.check(&v), Ok(()), "{t} {v}");
        }
        let bad = [
            (
                FieldType::Integer,
                json!("65"),
                "expected an integer, found the string \"65\"",
            ),
            (
                FieldType::Integer,
                json!(6.5),
                "expected an integer, found the number 6.5",
            ),
            (
                FieldType::Number,
                json!(true),
                "expected a number, found the boolean true",
            ),
            (FieldType::Boolean, json!("yes"), "expected true or false"),
            (
                FieldType::String,
                json!(3),
                "expected a string, found the number 3",
            ),
            (
                FieldType::Timestamp,
                json!("yesterday"),
                "expected an RFC 3339 timestamp",
            ),
            (
                FieldType::Enum(vec!["free".into(), "paid".into()]),
                json!("payd"),
                "`payd` is not one of its values (did you mean `paid`?)",
            ),
            (
                FieldType::List(Box::new(FieldType::String)),
                json!(["a", 1]),
                "element 1: expected a string, found the number 1",
            ),
        ];
        for (t, v, message) in bad {
            let err = t.check(&v).unwrap_err();
            assert!(err.contains(message), "{t} {v}: {err}");
        }
    }

    #[test]
    fn a_case_state_names_each_mistake() {
        let s = schema(&[("age", FieldType::Integer)]).with_audiences(
            ["PARENT", "STAFF"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        );
        let state = json!({
            "age": "65",
            "agee": 3,
            "user_type": "STAF",
            "days_since_last": null,
            "conversation_count": 2,
        });
        let problems = s.check_state(state.as_object().unwrap());
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["age", "agee", "user_type"]);
        assert!(
            problems[0].message.contains("(age is an integer)"),
            "{problems:?}"
        );
        assert!(
            problems[1]
                .message
                .contains("unknown user-state field `agee` (did you mean `age`?)")
                && problems[1]
                    .message
                    .contains("[state.fields] agee = \"integer\""),
            "{problems:?}"
        );
        assert!(
            problems[2].message.contains("`STAF` is not an audience")
                && problems[2].message.contains("did you mean `STAFF`?"),
            "{problems:?}"
        );
        // Without the audiences, an audience is only a string.
        let problems = schema(&[("age", FieldType::Integer)])
            .check_state(json!({"user_type": "STAF"}).as_object().unwrap());
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn conditions_are_checked_against_the_types() {
        let s = schema(&[
            ("age", FieldType::Integer),
            ("plan", FieldType::Enum(vec!["free".into(), "paid".into()])),
            ("renewed", FieldType::Timestamp),
        ])
        .with_audiences(
            ["PARENT", "CLINICIAN"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        );
        let ok = json!({
            "age": {"$gte": 65, "lt": 120},
            "plan": ["free", "paid"],
            "renewed": {"gt": "2026-01-01T00:00:00Z"},
            "user_type": {"in": ["CLINICIAN"]},
            "last_topics": {"exists": true},
            "is_first_conversation": false,
        });
        assert_eq!(s.check_conditions(&conditions(&ok)), []);
        for (raw, field, message) in [
            (
                json!({"age": {"$gte": "65"}}),
                "age",
                "`gte`: expected an integer, found the string \"65\" (age is an integer)",
            ),
            (
                json!({"session_type": {"gte": "a"}}),
                "session_type",
                "`gte`: an ordering operator compares numbers and timestamps, but session_type is a string",
            ),
            (
                json!({"plan": {"eq": "gold"}}),
                "plan",
                "`gold` is not one of its values",
            ),
            (
                json!({"age": {"in": [60, "65"]}}),
                "age",
                "`in`: element 1: expected an integer",
            ),
            (
                json!({"user_type": "STAF"}),
                "user_type",
                "`STAF` is not an audience",
            ),
            (
                json!({"renewed": {"lt": "2026-13-01T00:00:00Z"}}),
                "renewed",
                "expected an RFC 3339 timestamp",
            ),
            (
                json!({"agee": {"gte": 65}}),
                "agee",
                "unknown user-state field `agee` (did you mean `age`?)",
            ),
        ] {
            let problems = s.check_conditions(&conditions(&raw));
            assert_eq!(problems.len(), 1, "{raw}: {problems:?}");
            assert_eq!(problems[0].field, field, "{raw}");
            assert!(
                problems[0].message.contains(message),
                "{raw}: {}",
                problems[0].message
            );
        }
    }

    #[test]
    fn declarations_may_not_retype_a_built_in_field() {
        let err =
            StateSchema::new([("conversation_count".to_owned(), FieldType::String)]).unwrap_err();
        assert!(
            err.contains("`conversation_count` is a built-in field of type integer"),
            "{err}"
        );
        let narrowed = StateSchema::new([(
            "session_type".to_owned(),
            FieldType::Enum(vec!["debrief".into()]),
        )])
        .unwrap();
        assert_eq!(
            narrowed.get("session_type"),
            Some(&FieldType::Enum(vec!["debrief".into()]))
        );
        assert!(StateSchema::new([("x".to_owned(), FieldType::Enum(vec![]))]).is_err());
    }
}
