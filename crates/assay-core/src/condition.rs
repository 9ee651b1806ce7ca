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

    fn name(self) -> &'static str {
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
        "field `{field}`: unknown operator `{op}` (expected one of eq, ne, gt, gte, lt, lte, in, nin, exists, each optionally with a `$` prefix)"
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

fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
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
