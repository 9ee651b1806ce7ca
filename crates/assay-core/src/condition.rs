//! State conditions: the tests a STATE entity's `state_conditions` make on a [`UserState`].
//!
//! Two dialects appear in the specifications and both are accepted, mixed freely:
//!
//! * 000 §6.2: `{"days_since_last": {"gte": 7}}` with `eq`, `gte`, `lte`, `in`;
//! * 003 §3: `{"days_since_last": {"$gte": 7}}` with `$eq`, `$gte`, `$lte`, `$gt`, `$lt`,
//!   a bare list (`{"rating": [1, 2]}`, membership) and a bare scalar (`{"count": 0}`, equality).
//!
//! assay adds `ne`, `gt`, `lt`, `nin` and `exists` (each also with a `$` prefix). Every test on
//! a field must hold, and every field must hold. A missing or `null` value never satisfies a
//! comparison (including `ne` and `nin`); only `exists: false` matches it.
//!
//! ```
//! use assay_core::condition::Conditions;
//! let conditions: serde_json::Map<String, serde_json::Value> =
//!     serde_json::from_str(r#"{"is_first_conversation": {"eq": false}, "days_since_last": {"$gte": 7}}"#).unwrap();
//! let conditions = Conditions::parse(&conditions).unwrap();
//! let state = serde_json::json!({"is_first_conversation": false, "days_since_last": 9});
//! assert!(conditions.matches(state.as_object().unwrap()));
//! ```

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Value};

use crate::UserState;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Gte,
    /// Less than.
    Lt,
    /// Less than or equal.
    Lte,
    /// One of a list.
    In,
    /// None of a list.
    Nin,
    /// Present and not null (`true`) or missing or null (`false`).
    Exists,
}

impl Op {
    /// Every operator's name, without the `$` prefix.
    pub const NAMES: [&'static str; 9] =
        ["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "exists"];

    /// Parses an operator name, with or without the `$` prefix.
    pub fn parse(name: &str) -> Option<Op> {
        let bare = name.strip_prefix('$').unwrap_or(name);
        Some(match bare {
            "eq" => Op::Eq,
            "ne" => Op::Ne,
            "gt" => Op::Gt,
            "gte" => Op::Gte,
            "lt" => Op::Lt,
            "lte" => Op::Lte,
            "in" => Op::In,
            "nin" => Op::Nin,
            "exists" => Op::Exists,
            _ => return None,
        })
    }

    /// The operator's name, without the `$` prefix.
    pub fn name(self) -> &'static str {
        match self {
            Op::Eq => "eq",
            Op::Ne => "ne",
            Op::Gt => "gt",
            Op::Gte => "gte",
            Op::Lt => "lt",
            Op::Lte => "lte",
            Op::In => "in",
            Op::Nin => "nin",
            Op::Exists => "exists",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One test on one field.
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    /// The operator.
    pub op: Op,
    /// The operand (a list for `in`/`nin`, a boolean for `exists`).
    pub operand: Value,
}

/// The tests on one field of the user state.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The user-state field.
    pub field: String,
    /// All must hold.
    pub tests: Vec<Test>,
}

/// A parsed, validated set of conditions; all must hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conditions {
    conditions: Vec<Condition>,
}

/// Why a `state_conditions` object is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    /// An operator assay does not know.
    #[error(
        "field `{field}`: unknown operator `{op}`{} (expected one of eq, ne, gt, gte, lt, lte, in, nin, exists, each optionally with a `$` prefix)",
        closest_op(.op)
    )]
    UnknownOperator {
        /// The field.
        field: String,
        /// The operator as written.
        op: String,
    },
    /// An operand of the wrong shape.
    #[error("field `{field}`: operator `{op}` {expected}, found {found}")]
    BadOperand {
        /// The field.
        field: String,
        /// The operator.
        op: Op,
        /// What the operator needs.
        expected: &'static str,
        /// What was found.
        found: String,
    },
    /// A field with an empty operator object.
    #[error("field `{field}`: an empty operator object tests nothing")]
    Empty {
        /// The field.
        field: String,
    },
}

/// ` (did you mean `gte`?)` for an unknown operator close to a known one, keeping its `$`.
fn closest_op(op: &str) -> String {
    let (dollar, bare) = match op.strip_prefix('$') {
        Some(bare) => ("$", bare),
        None => ("", op),
    };
    // A name with a letter left out (`ge`, `le`) is the shortest one it is a part of;
    // otherwise the closest, when one letter off (the names are short and near one another).
    let within = |name: &str| {
        let mut letters = name.chars();
        !bare.is_empty() && bare.chars().all(|c| letters.any(|l| l == c))
    };
    let near = Op::NAMES
        .into_iter()
        .filter(|name| within(name) && name.len() == bare.len() + 1)
        .min_by_key(|name| name.len())
        .or_else(|| {
            crate::text::closest(bare, Op::NAMES)
                .filter(|near| crate::text::edit_distance(bare, near) <= 1)
        });
    near.map(|near| format!(" (did you mean `{dollar}{near}`?)"))
        .unwrap_or_default()
}

impl ConditionError {
    /// The field the error is about.
    pub fn field(&self) -> &str {
        match self {
            ConditionError::UnknownOperator { field, .. }
            | ConditionError::BadOperand { field, .. }
            | ConditionError::Empty { field } => field,
        }
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(_) => "a boolean".to_owned(),
        Value::Number(_) => "a number".to_owned(),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

impl Conditions {
    /// Parses and validates a `state_conditions` object.
    pub fn parse(raw: &Map<String, Value>) -> Result<Conditions, ConditionError> {
        let mut conditions = Vec::with_capacity(raw.len());
        for (field, spec) in raw {
            let tests = match spec {
                Value::Object(ops) => {
                    if ops.is_empty() {
                        return Err(ConditionError::Empty {
                            field: field.clone(),
                        });
                    }
                    let mut tests = Vec::with_capacity(ops.len());
                    for (name, operand) in ops {
                        let op =
                            Op::parse(name).ok_or_else(|| ConditionError::UnknownOperator {
                                field: field.clone(),
                                op: name.clone(),
                            })?;
                        validate_operand(field, op, operand)?;
                        tests.push(Test {
                            op,
                            operand: operand.clone(),
                        });
                    }
                    tests
                }
                Value::Array(_) => vec![Test {
                    op: Op::In,
                    operand: spec.clone(),
                }],
                scalar => {
                    validate_operand(field, Op::Eq, scalar)?;
                    vec![Test {
                        op: Op::Eq,
                        operand: scalar.clone(),
                    }]
                }
            };
            conditions.push(Condition {
                field: field.clone(),
                tests,
            });
        }
        Ok(Conditions { conditions })
    }

    /// The parsed conditions, in file order.
    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    /// Whether there is nothing to test.
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Whether every condition holds for `state`.
    pub fn matches(&self, state: &UserState) -> bool {
        self.conditions.iter().all(|c| {
            let value = state.get(&c.field);
            c.tests.iter().all(|t| test(value, t))
        })
    }
}

fn validate_operand(field: &str, op: Op, operand: &Value) -> Result<(), ConditionError> {
    let bad = |expected: &'static str| ConditionError::BadOperand {
        field: field.to_owned(),
        op,
        expected,
        found: describe(operand),
    };
    match op {
        Op::Eq | Op::Ne => match operand {
            Value::Null => Err(bad(
                "needs a value (use `exists: false` to test for a missing value)",
            )),
            Value::Object(_) => Err(bad("needs a scalar or a list")),
            _ => Ok(()),
        },
        Op::Gt | Op::Gte | Op::Lt | Op::Lte => match operand {
            Value::Number(_) | Value::String(_) => Ok(()),
            _ => Err(bad("needs a number or a string")),
        },
        Op::In | Op::Nin => match operand {
            Value::Array(_) => Ok(()),
            _ => Err(bad("needs a list")),
        },
        Op::Exists => match operand {
            Value::Bool(_) => Ok(()),
            _ => Err(bad("needs true or false")),
        },
    }
}

/// The JSON Schema of a `state_conditions` object (`assay schema kb`): each field maps to a
/// bare value (equality), a bare list (membership) or an object of operators, each known by
/// name with and without its `$`, with the operand it takes. An unknown operator is then an
/// error in an editor too. The types of the fields themselves are the project's
/// ([`crate::state_fields`]), so the schema cannot say them.
pub fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let scalar = serde_json::json!({"type": ["string", "number", "boolean"]});
    let value = serde_json::json!({"$ref": "#/$defs/ConditionValue"});
    let operand = |op: Op| -> Value {
        match op {
            Op::Eq | Op::Ne => serde_json::json!({
                "description": format!("A value of the field's type (a list for a list field): the field {}.", if op == Op::Eq { "equals it" } else { "is set and differs from it" }),
                "$ref": "#/$defs/ConditionValue",
            }),
            Op::Gt | Op::Gte | Op::Lt | Op::Lte => serde_json::json!({
                "description": "A number, or an RFC 3339 timestamp for a timestamp field: only numbers and timestamps are ordered.",
                "type": ["number", "string"],
            }),
            Op::In | Op::Nin => serde_json::json!({
                "description": format!("Values of the field's type: the field {} them.", if op == Op::In { "is one of" } else { "is set and is none of" }),
                "type": "array",
                "items": value.clone(),
            }),
            Op::Exists => serde_json::json!({
                "description": "`true`: the field is set (not null); `false`: it is missing or null.",
                "type": "boolean",
            }),
        }
    };
    let mut operators = Map::new();
    for name in Op::NAMES {
        let op = Op::parse(name).unwrap_or(Op::Eq);
        operators.insert(name.to_owned(), operand(op));
        operators.insert(format!("${name}"), operand(op));
    }
    let defs = generator.definitions_mut();
    defs.insert(
        "ConditionValue".to_owned(),
        serde_json::json!({
            "description": "A value a condition compares with: a string, a number or a boolean, or a list of them (for a list field).",
            "anyOf": [scalar.clone(), {"type": "array", "items": scalar}],
        }),
    );
    defs.insert(
        "Condition".to_owned(),
        serde_json::json!({
            "description": "The tests on one user-state field (a built-in field, or one declared in assay.toml's [state.fields]): a bare value (the field equals it), a bare list (the field is one of its values), or operators, all of which must hold.",
            "anyOf": [
                {"type": ["string", "number", "boolean"]},
                {"type": "array", "items": value},
                {"$ref": "#/$defs/Operators"},
            ],
        }),
    );
    defs.insert(
        "Operators".to_owned(),
        serde_json::json!({
            "description": "Operators on one field, each also written with a `$` (`$gte`); all must hold. Any other name is an error.",
            "type": "object",
            "minProperties": 1,
            "properties": operators,
            "additionalProperties": false,
        }),
    );
    schemars::json_schema!({
        "type": ["object", "null"],
        "additionalProperties": {"$ref": "#/$defs/Condition"},
    })
}

/// JSON equality with numbers compared by value (`1 == 1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        _ => a == b,
    }
}

/// The order of two values: numbers by value, two RFC 3339 timestamps by the instants they
/// name (whatever their offsets and precision), other strings alphabetically.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => {
            match (
                crate::timestamp::parse_timestamp(x),
                crate::timestamp::parse_timestamp(y),
            ) {
                (Some(x), Some(y)) => Some(x.cmp(&y)),
                _ => Some(x.cmp(y)),
            }
        }
        _ => None,
    }
}

fn test(value: Option<&Value>, test: &Test) -> bool {
    let present = value.filter(|v| !v.is_null());
    if test.op == Op::Exists {
        return test.operand.as_bool() == Some(present.is_some());
    }
    // A missing or null value never satisfies a comparison.
    let Some(value) = present else { return false };
    let list = || {
        test.operand
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    match test.op {
        Op::Eq => json_eq(value, &test.operand),
        Op::Ne => !json_eq(value, &test.operand),
        Op::Gt => compare(value, &test.operand) == Some(Ordering::Greater),
        Op::Gte => matches!(
            compare(value, &test.operand),
            Some(Ordering::Greater | Ordering::Equal)
        ),
        Op::Lt => compare(value, &test.operand) == Some(Ordering::Less),
        Op::Lte => matches!(
            compare(value, &test.operand),
            Some(Ordering::Less | Ordering::Equal)
        ),
        Op::In => list().iter().any(|x| json_eq(value, x)),
        Op::Nin => !list().iter().any(|x| json_eq(value, x)),
        Op::Exists => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[allow(clippy::needless_pass_by_value)]
    fn check(conditions: Value, state: Value) -> bool {
        let conditions = Conditions::parse(conditions.as_object().unwrap()).unwrap();
        conditions.matches(state.as_object().unwrap())
    }

    #[allow(clippy::needless_pass_by_value)]
    fn parse_err(conditions: Value) -> ConditionError {
        Conditions::parse(conditions.as_object().unwrap()).unwrap_err()
    }

    #[test]
    fn seed_000_dialect() {
        let returning =
            json!({"is_first_conversation": {"eq": false}, "days_since_last": {"gte": 7}});
        assert!(check(
            returning.clone(),
            json!({"is_first_conversation": false, "days_since_last": 7})
        ));
        assert!(!check(
            returning.clone(),
            json!({"is_first_conversation": false, "days_since_last": 6})
        ));
        assert!(!check(
            returning.clone(),
            json!({"is_first_conversation": false, "days_since_last": null})
        ));
        assert!(!check(returning, json!({"is_first_conversation": false})));
        let clinician = json!({"user_type": {"in": ["CLINICIAN", "PROFESSIONAL"]}});
        assert!(check(
            clinician.clone(),
            json!({"user_type": "PROFESSIONAL"})
        ));
        assert!(!check(clinician.clone(), json!({"user_type": "PARENT"})));
        assert!(!check(clinician, json!({})));
        assert!(check(
            json!({"last_rating": {"lte": 2}}),
            json!({"last_rating": 2})
        ));
        assert!(!check(
            json!({"last_rating": {"lte": 2}}),
            json!({"last_rating": null})
        ));
    }

    #[test]
    fn seed_003_dialect() {
        assert!(check(
            json!({"days_since_last": {"$gte": 7}}),
            json!({"days_since_last": 10})
        ));
        assert!(check(json!({"n": {"$gt": 1, "$lt": 3}}), json!({"n": 2})));
        assert!(!check(json!({"n": {"$gt": 1, "$lt": 3}}), json!({"n": 3})));
        assert!(check(
            json!({"n": {"$lte": 3, "$eq": 3}}),
            json!({"n": 3.0})
        ));
        assert!(check(
            json!({"interaction_rating": [1, 2]}),
            json!({"interaction_rating": 2})
        ));
        assert!(!check(
            json!({"interaction_rating": [1, 2]}),
            json!({"interaction_rating": 3})
        ));
        assert!(check(
            json!({"conversation_count": 0}),
            json!({"conversation_count": 0})
        ));
        assert!(!check(json!({"conversation_count": 0}), json!({})));
        assert!(check(
            json!({"user_type": "CLINICIAN"}),
            json!({"user_type": "CLINICIAN"})
        ));
    }

    #[test]
    fn extensions() {
        assert!(check(
            json!({"t": {"ne": "PARENT"}}),
            json!({"t": "CLINICIAN"})
        ));
        assert!(
            !check(json!({"t": {"ne": "PARENT"}}), json!({})),
            "missing never satisfies ne"
        );
        assert!(check(json!({"t": {"nin": ["A"]}}), json!({"t": "B"})));
        assert!(!check(json!({"t": {"nin": ["A"]}}), json!({"t": null})));
        assert!(check(json!({"t": {"exists": true}}), json!({"t": 0})));
        assert!(!check(json!({"t": {"exists": true}}), json!({"t": null})));
        assert!(check(json!({"t": {"$exists": false}}), json!({})));
        assert!(check(
            json!({"d": {"gt": "2026-01-01"}}),
            json!({"d": "2026-02-01"})
        ));
    }

    #[test]
    fn mismatched_types_never_compare() {
        assert!(!check(json!({"n": {"gte": 1}}), json!({"n": "5"})));
        assert!(!check(json!({"n": {"gte": 1}}), json!({"n": true})));
        assert!(!check(json!({"n": {"eq": 1}}), json!({"n": "1"})));
    }

    #[test]
    fn unknown_operator_is_named() {
        let err = parse_err(json!({"days_since_last": {"$gtee": 7}}));
        assert_eq!(
            err,
            ConditionError::UnknownOperator {
                field: "days_since_last".into(),
                op: "$gtee".into()
            }
        );
        assert!(err.to_string().contains("unknown operator `$gtee`"));
    }

    #[test]
    fn an_unknown_operator_names_the_one_meant() {
        for (written, meant) in [
            ("ge", Some("gte")),
            ("$le", Some("$lte")),
            ("$gtee", Some("$gte")),
            ("nim", Some("nin")),
            ("equals", None),
        ] {
            let err = parse_err(json!({"age": {written: 1}})).to_string();
            match meant {
                Some(m) => assert!(err.contains(&format!("(did you mean `{m}`?)")), "{err}"),
                None => assert!(!err.contains("did you mean"), "{err}"),
            }
        }
    }

    #[test]
    fn timestamps_compare_by_the_instant_they_name() {
        let state = json!({"seen": "2026-01-01T00:00:00.5Z"});
        assert!(check(
            json!({"seen": {"gt": "2026-01-01T00:00:00Z"}}),
            state.clone()
        ));
        // 01:00 at +02:00 is 23:00 the day before: alphabetically the other way round.
        assert!(!check(
            json!({"seen": {"lt": "2026-01-01T01:00:00+02:00"}}),
            json!({"seen": "2026-01-01T00:30:00Z"})
        ));
        assert!(check(
            json!({"seen": {"lt": "2026-01-01T01:00:01+01:00"}}),
            state
        ));
    }

    #[test]
    fn bad_operands_are_rejected() {
        assert!(matches!(
            parse_err(json!({"x": {"in": 3}})),
            ConditionError::BadOperand { .. }
        ));
        assert!(matches!(
            parse_err(json!({"x": {"gte": [1]}})),
            ConditionError::BadOperand { .. }
        ));
        assert!(matches!(
            parse_err(json!({"x": {"exists": 1}})),
            ConditionError::BadOperand { .. }
        ));
        assert!(matches!(
            parse_err(json!({"x": null})),
            ConditionError::BadOperand { .. }
        ));
        assert!(matches!(
            parse_err(json!({"x": {}})),
            ConditionError::Empty { .. }
        ));
    }
}
