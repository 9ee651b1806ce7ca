//! Boundary cases for STATE handlers, made without a model: for every test in a handler's
//! `state_conditions`, the user states on each side of the boundary it draws.
//!
//! A field's *candidate values* come from each of its tests:
//!
//! | test | values (side) |
//! |------|---------------|
//! | `gte: n` | `n - step` (below, fails), `n` (at, holds) |
//! | `gt: n` | `n` (at, fails), `n + step` (above, holds) |
//! | `lt: n` | `n - step` (below, holds), `n` (at, fails) |
//! | `lte: n` | `n` (at, holds), `n + step` (above, fails) |
//! | `eq: v`, a bare value | `v` (holds), a different value (fails); a boolean gives both |
//! | `ne: v` | `v` (fails), a different value (holds) |
//! | `in: [a, b]`, a bare list | `a`, `b` (hold), a value outside the list (fails) |
//! | `nin: [a, b]` | `a`, `b` (fail), a value outside the list (holds) |
//! | `exists: true` / `false` | a value / the field left out |
//!
//! The step is 1 when the operand is a whole number (and the values are then whole numbers);
//! for any other number it is 0.01, or a billionth of the operand when that is larger, so that
//! the value stays on its side of a large operand. For a string operand (which compares
//! alphabetically) the value below is the operand less its last character and the value above
//! is the operand with `~` appended.
//!
//! Every test on a field and every field must hold (the condition language has no `or`; a
//! list is the one way to accept several values). So a handler gets one state where every
//! condition holds (it triggers), then, for every field and each of its candidate values, that
//! state with only this field changed: it triggers exactly when the value passes every test on
//! its field. That flips each clause alone. Identical states are made once per handler.
//!
//! The values are of the field's type ([`assay_core::state_fields`]), so that every case made
//! is one the project accepts: a timestamp's neighbours are a second before and after it; a
//! "different" or "outside" value of an enum (or an audience, whose values are the audiences
//! the entities name) is one of its other values, and there is none when the list names them
//! all; `exists: true` is given a value of the type. A field the schema does not know (none
//! passes validation) is treated by its operands alone.
//!
//! The expectations come from the table above, not from [`assay_core::condition`]; the tests
//! check them against that evaluator independently.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use assay_core::UserState;
use assay_core::bank::StateCase;
use assay_core::condition::{Condition, Conditions, Op, Test};
use assay_core::draft::{GenerationMethod, Provenance};
use assay_core::entity::{Entity, LoadMode};
use assay_core::state_fields::{FieldType, StateSchema};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The user-state field the audience is read from.
const USER_TYPE: &str = "user_type";

/// The boundary cases of every active STATE handler in `entities` that has conditions, in
/// entity order, their values of the types `schema` gives (with its audiences). `versions`
/// gives each entity's current version (recorded in the provenance); `generation` and
/// `generated_at` are the generation's id and time. A handler whose conditions do not parse,
/// or that no state can satisfy, gets no case (and a warning in the log).
pub fn boundary_cases(
    schema: &StateSchema,
    entities: &[Entity],
    versions: &BTreeMap<String, u32>,
    generation: &str,
    generated_at: &str,
) -> Vec<StateCase> {
    let mut cases = Vec::new();
    for entity in entities {
        if !entity.is_active || entity.load_mode != LoadMode::State {
            continue;
        }
        let Some(raw) = entity
            .state_conditions
            .as_ref()
            .filter(|raw| !raw.is_empty())
        else {
            continue;
        };
        let conditions = match Conditions::parse(raw) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(handler = %entity.entity_id, error = %e, "state_conditions do not parse; no boundary cases");
                continue;
            }
        };
        let Some(states) = handler_states(&conditions, schema) else {
            tracing::warn!(handler = %entity.entity_id, "no user state satisfies every condition; no boundary cases");
            continue;
        };
        let audience = (!conditions.conditions().iter().any(|c| c.field == USER_TYPE))
            .then(|| entity.audience_types.first())
            .flatten();
        for state in states {
            cases.push(to_case(
                entity,
                versions,
                generation,
                generated_at,
                audience,
                state,
            ));
        }
    }
    cases
}

/// One derived state: the values, whether the handler should trigger, and why.
#[derive(Debug, Clone, PartialEq)]
struct BoundaryState {
    state: UserState,
    triggers: bool,
    variant: String,
}

/// A candidate value for one field: `None` leaves the field out.
#[derive(Debug, Clone, PartialEq)]
struct Point {
    value: Option<Value>,
    label: String,
}

fn to_case(
    entity: &Entity,
    versions: &BTreeMap<String, u32>,
    generation: &str,
    generated_at: &str,
    audience: Option<&String>,
    mut b: BoundaryState,
) -> StateCase {
    let handler = &entity.entity_id;
    if let Some(a) = audience {
        b.state
            .insert(USER_TYPE.to_owned(), Value::String(a.clone()));
    }
    let (expected, not_expected) = if b.triggers {
        (vec![handler.clone()], Vec::new())
    } else {
        (Vec::new(), vec![handler.clone()])
    };
    let outcome = if b.triggers {
        "triggers"
    } else {
        "does not trigger"
    };
    StateCase {
        test_id: format!("GEN-STATE-{handler}-{}", state_digest(&b.state)),
        name: format!("{handler} {outcome}: {}", b.variant),
        user_state: b.state,
        expected_handlers: expected,
        not_expected_handlers: not_expected,
        known_missing: Vec::new(),
        provenance: Some(Provenance {
            method: GenerationMethod::Boundary,
            entity_id: Some(handler.clone()),
            entity_versions: versions
                .get(handler)
                .map(|v| BTreeMap::from([(handler.clone(), *v)]))
                .unwrap_or_default(),
            model: None,
            prompt_hash: None,
            language: None,
            variant: Some(b.variant),
            generation: Some(generation.to_owned()),
            generated_at: generated_at.to_owned(),
            accepted_by: None,
            accepted_at: None,
            confirmed_by: None,
            confirmed_at: None,
        }),
    }
}

/// Eight hex digits of a digest of the state with its keys sorted: the same state always
/// gets the same id, whichever generation makes it.
fn state_digest(state: &UserState) -> String {
    let sorted: BTreeMap<&String, &Value> = state.iter().collect();
    let text = serde_json::to_string(&sorted).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    digest[..4].iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The states of one handler: the one where everything holds first, then each field changed
/// alone to each of its candidate values. `None` when no candidate satisfies some field.
fn handler_states(conditions: &Conditions, schema: &StateSchema) -> Option<Vec<BoundaryState>> {
    let fields: Vec<(&Condition, Vec<Point>)> = conditions
        .conditions()
        .iter()
        .map(|c| (c, field_points(c, typed(schema, &c.field).as_ref())))
        .collect();
    // The value of each field where all its tests hold.
    let mut base: Vec<&Point> = Vec::with_capacity(fields.len());
    for (condition, points) in &fields {
        base.push(points.iter().find(|p| field_holds(condition, p))?);
    }
    let make = |changed: Option<(usize, &Point)>| {
        let mut state = UserState::new();
        for (i, ((condition, _), point)) in fields.iter().zip(&base).enumerate() {
            let point = match changed {
                Some((j, p)) if j == i => p,
                _ => point,
            };
            if let Some(v) = &point.value {
                state.insert(condition.field.clone(), v.clone());
            }
        }
        state
    };
    let mut out: Vec<BoundaryState> = Vec::new();
    let all_hold = fields
        .iter()
        .zip(&base)
        .map(|((c, _), p)| format!("{} {}", c.field, p.label))
        .collect::<Vec<_>>()
        .join(", ");
    out.push(BoundaryState {
        state: make(None),
        triggers: true,
        variant: format!("every condition holds ({all_hold})"),
    });
    for (i, (condition, points)) in fields.iter().enumerate() {
        for point in points {
            let state = make(Some((i, point)));
            if out.iter().any(|b| b.state == state) {
                continue;
            }
            out.push(BoundaryState {
                state,
                triggers: field_holds(condition, point),
                variant: format!("{} {}", condition.field, point.label),
            });
        }
    }
    Some(out)
}

/// Whether a candidate passes every test on its field (the value was derived for one test;
/// the others on the same field are checked here, by the rules in the module's table).
fn field_holds(condition: &Condition, point: &Point) -> bool {
    condition
        .tests
        .iter()
        .all(|t| passes(point.value.as_ref(), t))
}

/// A number as a JSON value: a whole number when it is one.
fn number(x: f64, integral: bool) -> Value {
    if integral {
        // Whole operands are far inside i64 in any real condition; a float keeps the rest.
        #[allow(clippy::cast_possible_truncation)]
        let whole = x as i64;
        #[allow(clippy::cast_precision_loss)]
        if whole as f64 == x {
            return Value::from(whole);
        }
    }
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

fn is_integral(n: &serde_json::Number) -> bool {
    // Beyond 2^53 a float has no unit step.
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|x| x.fract() == 0.0 && x.abs() < 9.0e15)
}

/// The step to the next value on the other side of a numeric boundary.
fn step(n: &serde_json::Number) -> f64 {
    if is_integral(n) {
        1.0
    } else {
        (n.as_f64().unwrap_or(0.0).abs() * 1e-9).max(0.01)
    }
}

/// A field's type as the values are made: an audience is an enum of the audiences (a plain
/// string while they are unknown); `None` for a field the schema does not know.
fn typed(schema: &StateSchema, field: &str) -> Option<FieldType> {
    let audiences = || match schema.audiences() {
        Some(a) => FieldType::Enum(a.iter().cloned().collect()),
        None => FieldType::String,
    };
    Some(match schema.get(field)? {
        FieldType::Audience => audiences(),
        FieldType::List(inner) if **inner == FieldType::Audience => {
            FieldType::List(Box::new(audiences()))
        }
        other => other.clone(),
    })
}

/// A timestamp `seconds` later (or earlier), in RFC 3339 (UTC).
fn shifted(timestamp: &str, seconds: i64) -> Option<Value> {
    let t = chrono::DateTime::parse_from_rfc3339(timestamp).ok()?;
    let t = t.with_timezone(&chrono::Utc) + chrono::Duration::seconds(seconds);
    Some(Value::String(
        t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    ))
}

/// A value of type `t`, for `exists: true`.
fn sample(t: Option<&FieldType>) -> Option<Value> {
    Some(match t {
        None | Some(FieldType::Boolean) => Value::Bool(true),
        Some(FieldType::Integer | FieldType::Number) => Value::from(1),
        Some(FieldType::String | FieldType::Audience) => Value::String("OTHER".to_owned()),
        Some(FieldType::Timestamp) => Value::String("2026-01-01T00:00:00Z".to_owned()),
        Some(FieldType::Enum(values)) => Value::String(values.first()?.clone()),
        Some(FieldType::List(_)) => Value::Array(Vec::new()),
    })
}

/// The value just below and just above an ordered operand.
fn neighbours(operand: &Value, t: Option<&FieldType>) -> (Option<Value>, Option<Value>) {
    if let (Some(FieldType::Timestamp), Value::String(s)) = (t, operand) {
        return (shifted(s, -1), shifted(s, 1));
    }
    match operand {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            let (s, whole) = (step(n), is_integral(n));
            (Some(number(x - s, whole)), Some(number(x + s, whole)))
        }
        Value::String(s) => {
            let mut below = s.clone();
            let below = below.pop().map(|_| Value::String(below));
            (below, Some(Value::String(format!("{s}~"))))
        }
        _ => (None, None),
    }
}

/// A value of type `t` different from `v`: `None` when there is none (an enum of one value).
fn different(v: &Value, t: Option<&FieldType>) -> Option<Value> {
    match (t, v) {
        (Some(FieldType::Enum(values)), _) => values
            .iter()
            .find(|x| v.as_str() != Some(x))
            .cloned()
            .map(Value::String),
        (Some(FieldType::Timestamp), Value::String(s)) => shifted(s, 1),
        (Some(FieldType::List(inner)), Value::Array(a)) if a.is_empty() => {
            Some(Value::Array(vec![sample(Some(inner))?]))
        }
        _ => Some(untyped_different(v)),
    }
}

/// A value different from `v`, of the same kind.
fn untyped_different(v: &Value) -> Value {
    match v {
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            number(x + step(n), is_integral(n))
        }
        Value::String(s) => Value::String(if s == "OTHER" {
            "OTHER_2".to_owned()
        } else {
            "OTHER".to_owned()
        }),
        Value::Array(a) if a.is_empty() => Value::Array(vec![Value::from(0)]),
        Value::Array(_) => Value::Array(Vec::new()),
        Value::Null | Value::Object(_) => Value::Bool(true),
    }
}

/// A value of type `t` not in `list`, or `None` when every value of the type is listed (both
/// booleans, every value of an enum).
fn outside(list: &[Value], t: Option<&FieldType>) -> Option<Value> {
    let listed = |v: &Value| list.iter().any(|x| same(x, v));
    match t {
        Some(FieldType::Enum(values)) => {
            return values
                .iter()
                .map(|x| Value::String(x.clone()))
                .find(|x| !listed(x));
        }
        Some(FieldType::Timestamp) => {
            let latest = list.iter().filter_map(Value::as_str).max_by(|a, b| {
                assay_core::condition::compare(&Value::from(*a), &Value::from(*b))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })?;
            return shifted(latest, 1);
        }
        Some(FieldType::List(inner)) => {
            return [
                Value::Array(Vec::new()),
                Value::Array(vec![sample(Some(inner))?]),
            ]
            .into_iter()
            .find(|x| !listed(x));
        }
        _ => {}
    }
    if list.iter().all(Value::is_number) && !list.is_empty() {
        let max = list
            .iter()
            .filter_map(Value::as_f64)
            .fold(f64::NEG_INFINITY, f64::max);
        let whole = list.iter().all(|v| v.as_number().is_some_and(is_integral));
        return Some(number(max + 1.0, whole));
    }
    if list.iter().all(Value::is_boolean) && !list.is_empty() {
        return [Value::Bool(false), Value::Bool(true)]
            .into_iter()
            .find(|v| !listed(v));
    }
    // One of the first len + 1 names is not listed.
    (1..=list.len() + 1)
        .map(|i| {
            Value::String(if i == 1 {
                "OTHER".to_owned()
            } else {
                format!("OTHER_{i}")
            })
        })
        .find(|v| !listed(v))
}

fn show(value: &Value) -> String {
    value.to_string()
}

/// The candidate values one field's tests give, with their labels (duplicates removed), of
/// the field's type `t`.
fn field_points(condition: &Condition, t: Option<&FieldType>) -> Vec<Point> {
    let mut points: Vec<Point> = Vec::new();
    let mut add = |value: Option<Value>, label: String| {
        if !points
            .iter()
            .any(|p| opt_same(p.value.as_ref(), value.as_ref()))
        {
            points.push(Point { value, label });
        }
    };
    for test in &condition.tests {
        let o = &test.operand;
        let at = |value: Option<Value>, side: &str| {
            let shown = value.as_ref().map_or("missing".to_owned(), show);
            format!("= {shown}, {side} {} {}", test.op, show(o))
        };
        match test.op {
            Op::Gte | Op::Gt | Op::Lt | Op::Lte => {
                let (below, above) = neighbours(o, t);
                let (first, first_side, second, second_side) = match test.op {
                    Op::Gte | Op::Lt => (below, "below", Some(o.clone()), "at"),
                    _ => (Some(o.clone()), "at", above, "above"),
                };
                if let Some(v) = first {
                    add(Some(v.clone()), at(Some(v), first_side));
                }
                if let Some(v) = second {
                    add(Some(v.clone()), at(Some(v), second_side));
                }
            }
            Op::Eq | Op::Ne => {
                add(Some(o.clone()), at(Some(o.clone()), "equal to"));
                // None: no other value of the type; the field left out differs too.
                let d = different(o, t);
                add(d.clone(), at(d, "different from"));
            }
            Op::In | Op::Nin => {
                let list = o.as_array().map(Vec::as_slice).unwrap_or_default();
                for v in list {
                    add(Some(v.clone()), at(Some(v.clone()), "listed in"));
                }
                // None: every value of the type is listed; the field left out is outside.
                let out = outside(list, t);
                add(out.clone(), at(out, "outside"));
            }
            Op::Exists => {
                if let Some(present) = sample(t) {
                    add(Some(present), format!("present, exists {o}"));
                }
                add(None, format!("missing, exists {o}"));
            }
        }
    }
    points
}

/// JSON equality with numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        _ => a == b,
    }
}

fn opt_same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// Whether `value` passes `test`, by the rules of the module's table: a missing value passes
/// only `exists: false`.
fn passes(value: Option<&Value>, test: &Test) -> bool {
    let o = &test.operand;
    if test.op == Op::Exists {
        return o.as_bool() == Some(value.is_some_and(|v| !v.is_null()));
    }
    let Some(v) = value.filter(|v| !v.is_null()) else {
        return false;
    };
    let order = || match (v, o) {
        (Value::Number(a), Value::Number(b)) => a.as_f64()?.partial_cmp(&b.as_f64()?),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => None,
    };
    let listed = || o.as_array().is_some_and(|l| l.iter().any(|x| same(x, v)));
    match test.op {
        Op::Eq => same(v, o),
        Op::Ne => !same(v, o),
        Op::Gt => order().is_some_and(std::cmp::Ordering::is_gt),
        Op::Gte => order().is_some_and(std::cmp::Ordering::is_ge),
        Op::Lt => order().is_some_and(std::cmp::Ordering::is_lt),
        Op::Lte => order().is_some_and(std::cmp::Ordering::is_le),
        Op::In => listed(),
        Op::Nin => !listed(),
        Op::Exists => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn handler(id: &str, conditions: &Value, audience: &[&str]) -> Entity {
        serde_json::from_value(json!({
            "entity_id": id,
            "entity_type": "HANDLER",
            "title": id,
            "load_mode": "STATE",
            "state_conditions": conditions,
            "audience_types": audience,
        }))
        .unwrap()
    }

    /// The states made for one condition, as (state without user_type, triggers), in order.
    fn states(conditions: &Value) -> Vec<(Value, bool)> {
        let e = handler("h", conditions, &["PARENT"]);
        boundary_cases(
            &StateSchema::default(),
            &[e],
            &BTreeMap::new(),
            "gen-1",
            "2026-01-01T00:00:00Z",
        )
        .into_iter()
        .map(|c| {
            let mut s = c.user_state.clone();
            if conditions.get(USER_TYPE).is_none() {
                assert_eq!(s.shift_remove(USER_TYPE), Some(json!("PARENT")));
            }
            let triggers = c.expected_handlers == ["h"];
            assert_eq!(c.not_expected_handlers.is_empty(), triggers);
            (Value::Object(s), triggers)
        })
        .collect()
    }

    #[test]
    fn each_operator_gives_the_values_on_each_side() {
        let table: Vec<(Value, Vec<(Value, bool)>)> = vec![
            (
                json!({"days": {"$gte": 7}}),
                vec![(json!({"days": 7}), true), (json!({"days": 6}), false)],
            ),
            (
                json!({"days": {"gt": 7}}),
                vec![(json!({"days": 8}), true), (json!({"days": 7}), false)],
            ),
            (
                json!({"days": {"$lt": 3}}),
                vec![(json!({"days": 2}), true), (json!({"days": 3}), false)],
            ),
            (
                json!({"days": {"lte": 2}}),
                vec![(json!({"days": 2}), true), (json!({"days": 3}), false)],
            ),
            (
                json!({"score": {"$gte": 0.5}}),
                vec![
                    (json!({"score": 0.5}), true),
                    (json!({"score": 0.49}), false),
                ],
            ),
            (
                json!({"first": {"eq": false}}),
                vec![
                    (json!({"first": false}), true),
                    (json!({"first": true}), false),
                ],
            ),
            (
                json!({"count": 0}),
                vec![(json!({"count": 0}), true), (json!({"count": 1}), false)],
            ),
            (
                json!({"t": {"$ne": "PARENT"}}),
                vec![
                    (json!({"t": "OTHER"}), true),
                    (json!({"t": "PARENT"}), false),
                ],
            ),
            (
                json!({"user_type": {"in": ["A", "B"]}}),
                vec![
                    (json!({"user_type": "A"}), true),
                    (json!({"user_type": "B"}), true),
                    (json!({"user_type": "OTHER"}), false),
                ],
            ),
            (
                json!({"rating": [1, 2]}),
                vec![
                    (json!({"rating": 1}), true),
                    (json!({"rating": 2}), true),
                    (json!({"rating": 3}), false),
                ],
            ),
            (
                json!({"t": {"nin": ["A"]}}),
                vec![(json!({"t": "OTHER"}), true), (json!({"t": "A"}), false)],
            ),
            (
                json!({"t": {"exists": false}}),
                vec![(json!({}), true), (json!({"t": true}), false)],
            ),
            // Two tests on one field: each side of each, judged against both.
            (
                json!({"n": {"$gt": 1, "$lt": 3}}),
                vec![
                    (json!({"n": 2}), true),
                    (json!({"n": 1}), false),
                    (json!({"n": 3}), false),
                ],
            ),
            // Two fields: everything holds, then each clause flipped alone.
            (
                json!({"first": {"eq": false}, "days": {"gte": 7}}),
                vec![
                    (json!({"first": false, "days": 7}), true),
                    (json!({"first": true, "days": 7}), false),
                    (json!({"first": false, "days": 6}), false),
                ],
            ),
        ];
        for (conditions, expected) in table {
            assert_eq!(states(&conditions), expected, "{conditions}");
        }
    }

    #[test]
    fn the_real_evaluator_agrees_with_every_expectation() {
        let conditions = [
            json!({"days": {"$gte": 7}}),
            json!({"days": {"gte": 7}, "first": {"eq": false}, "rating": {"lte": 2}}),
            json!({"n": {"$gt": 1, "$lt": 3}, "t": {"nin": ["A", "B"]}}),
            json!({"n": {"$gte": 2.5, "$lte": 2.5}}),
            json!({"big": {"lt": 1e20}, "s": {"gte": "m"}}),
            json!({"x": {"exists": true}, "y": {"exists": false}, "z": [true]}),
            json!({"user_type": {"in": ["CLINICIAN", "PROFESSIONAL"]}, "k": {"ne": 3}}),
            json!({"list": {"eq": [1, 2]}, "word": "yes"}),
        ];
        let mut total = 0;
        for raw in &conditions {
            let e = handler("h", raw, &["PARENT"]);
            let parsed = Conditions::parse(raw.as_object().unwrap()).unwrap();
            let cases = boundary_cases(&StateSchema::default(), &[e], &BTreeMap::new(), "g", "t");
            assert!(cases.iter().any(|c| c.expected_handlers == ["h"]), "{raw}");
            assert!(
                cases.iter().any(|c| c.not_expected_handlers == ["h"]),
                "{raw}"
            );
            for case in &cases {
                let triggers = parsed.matches(&case.user_state);
                assert_eq!(
                    triggers,
                    case.expected_handlers == ["h"],
                    "{raw}: {} ({})",
                    Value::Object(case.user_state.clone()),
                    case.name
                );
                total += 1;
            }
            let mut ids: Vec<&str> = cases.iter().map(|c| c.test_id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), cases.len(), "{raw}: ids are unique");
        }
        assert_eq!(total, 28, "every case of every condition was checked");
    }

    #[test]
    fn provenance_audience_and_skipped_entities() {
        let versions = BTreeMap::from([("welcome_back".to_owned(), 3)]);
        let returning = handler(
            "welcome_back",
            &json!({"days_since_last": {"$gte": 7}}),
            &["CLINICIAN", "PARENT"],
        );
        let clinician = handler(
            "clinician_mode",
            &json!({"user_type": {"in": ["CLINICIAN"]}}),
            &["CLINICIAN"],
        );
        let mut inactive = handler("off", &json!({"a": 1}), &["PARENT"]);
        inactive.is_active = false;
        let mut situation = handler("sit", &json!({"a": 1}), &["PARENT"]);
        situation.load_mode = LoadMode::Situation;
        let cases = boundary_cases(
            &StateSchema::default(),
            &[returning, inactive, situation, clinician],
            &versions,
            "gen-7",
            "2026-11-28T00:00:00Z",
        );
        let handlers: Vec<&str> = cases
            .iter()
            .filter_map(|c| c.provenance.as_ref()?.entity_id.as_deref())
            .collect();
        assert_eq!(
            handlers,
            [
                "welcome_back",
                "welcome_back",
                "clinician_mode",
                "clinician_mode"
            ]
        );
        let below = &cases[1];
        assert_eq!(below.user_state["user_type"], json!("CLINICIAN"));
        assert_eq!(below.user_state["days_since_last"], json!(6));
        let p = below.provenance.as_ref().unwrap();
        assert_eq!(p.method, GenerationMethod::Boundary);
        assert_eq!(p.entity_versions, versions);
        assert_eq!(p.generation.as_deref(), Some("gen-7"));
        assert_eq!(
            p.variant.as_deref(),
            Some("days_since_last = 6, below gte 7")
        );
        // A condition on user_type keeps its own values.
        assert_eq!(cases[3].user_state["user_type"], json!("OTHER"));
        assert!(
            cases[3]
                .provenance
                .as_ref()
                .unwrap()
                .entity_versions
                .is_empty()
        );
        // The same state gets the same id in another generation.
        let again = boundary_cases(
            &StateSchema::default(),
            &[handler(
                "welcome_back",
                &json!({"days_since_last": {"$gte": 7}}),
                &["CLINICIAN"],
            )],
            &versions,
            "gen-8",
            "t",
        );
        assert_eq!(again[1].test_id, below.test_id);
    }

    #[test]
    fn the_values_are_of_the_fields_types() {
        let schema = StateSchema::new([
            (
                "plan".to_owned(),
                FieldType::Enum(vec!["free".into(), "paid".into(), "team".into()]),
            ),
            ("renewed".to_owned(), FieldType::Timestamp),
            (
                "tags".to_owned(),
                FieldType::List(Box::new(FieldType::String)),
            ),
        ])
        .unwrap()
        .with_audiences(
            ["CLINICIAN", "PARENT"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        );
        let states = |conditions: &Value| -> Vec<(Value, bool)> {
            let e = handler("h", conditions, &["PARENT"]);
            let cases = boundary_cases(&schema, &[e], &BTreeMap::new(), "g", "t");
            let parsed = Conditions::parse(conditions.as_object().unwrap()).unwrap();
            cases
                .into_iter()
                .map(|c| {
                    // Every state made is one the project accepts, and the evaluator agrees.
                    assert_eq!(schema.check_state(&c.user_state), [], "{}", c.name);
                    let triggers = c.expected_handlers == ["h"];
                    assert_eq!(parsed.matches(&c.user_state), triggers, "{}", c.name);
                    let mut s = c.user_state;
                    if conditions.get(USER_TYPE).is_none() {
                        s.shift_remove(USER_TYPE);
                    }
                    (Value::Object(s), triggers)
                })
                .collect()
        };
        assert_eq!(
            states(&json!({"user_type": {"in": ["CLINICIAN"]}})),
            [
                (json!({"user_type": "CLINICIAN"}), true),
                (json!({"user_type": "PARENT"}), false),
            ]
        );
        // Every audience listed: only a missing value is outside, which nin refuses too.
        assert_eq!(
            states(&json!({"user_type": {"nin": ["CLINICIAN", "PARENT"]}})),
            []
        );
        assert_eq!(
            states(&json!({"plan": {"ne": "free"}})),
            [
                (json!({"plan": "paid"}), true),
                (json!({"plan": "free"}), false),
            ]
        );
        assert_eq!(
            states(&json!({"renewed": {"$lt": "2026-03-01T00:00:00Z"}})),
            [
                (json!({"renewed": "2026-02-28T23:59:59Z"}), true),
                (json!({"renewed": "2026-03-01T00:00:00Z"}), false),
            ]
        );
        assert_eq!(
            states(&json!({"tags": {"exists": true}})),
            [(json!({"tags": []}), true), (json!({}), false)]
        );
        assert_eq!(
            states(&json!({"tags": {"eq": []}})),
            [
                (json!({"tags": []}), true),
                (json!({"tags": ["OTHER"]}), false)
            ]
        );
    }

    #[test]
    fn an_unsatisfiable_condition_gets_no_case() {
        let e = handler("h", &json!({"n": {"gt": 3, "lt": 2}}), &["PARENT"]);
        assert!(
            boundary_cases(&StateSchema::default(), &[e], &BTreeMap::new(), "g", "t").is_empty()
        );
    }
}
