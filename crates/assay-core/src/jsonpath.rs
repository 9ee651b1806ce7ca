//! Small helpers on JSON values shared by the checks that read JSON: a value at a dot path
//! (`a.b.0`), equality that compares numbers as numbers, and a value shown on one short line.
//!
//! ```
//! use assay_core::jsonpath::{at_path, json_eq};
//! use serde_json::json;
//! let state = json!({"chores": [{"name": "dishes", "minutes": 10}]});
//! assert_eq!(at_path(&state, "chores.0.name"), Some(&json!("dishes")));
//! assert!(json_eq(&state["chores"][0]["minutes"], &json!(10.0)));
//! ```

use serde_json::Value;

/// The value at a dot path (`a.b.0`: object keys, and array indexes from 0), if there is one.
/// An empty path is the value itself.
pub fn at_path<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    if path.trim().is_empty() {
        return Some(value);
    }
    path.split('.').try_fold(value, |v, key| match v {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// The most characters [`show`] keeps.
pub const SHOWN_CHARS: usize = 120;

/// A value as JSON text on one line, cut at [`SHOWN_CHARS`] characters (with `…`).
pub fn show(value: &Value) -> String {
    let s = value.to_string();
    if s.chars().count() > SHOWN_CHARS {
        format!("{}…", s.chars().take(SHOWN_CHARS).collect::<String>())
    } else {
        s
    }
}

/// Whether two values are equal, numbers compared as numbers (`1 == 1.0`), everything else
/// structurally.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn paths_reach_keys_and_indexes_or_nothing() {
        let v = json!({"a": {"b": [10, {"c": "x"}]}});
        assert_eq!(at_path(&v, ""), Some(&v));
        assert_eq!(at_path(&v, "a.b.0"), Some(&json!(10)));
        assert_eq!(at_path(&v, "a.b.1.c"), Some(&json!("x")));
        assert_eq!(at_path(&v, "a.b.2"), None);
        assert_eq!(at_path(&v, "a.b.x"), None);
        assert_eq!(at_path(&v, "a.b.0.c"), None);
        assert_eq!(at_path(&v, "z"), None);
    }

    #[test]
    fn numbers_compare_as_numbers_and_the_rest_structurally() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!json_eq(&json!([1]), &json!([1, 1])));
        assert!(!json_eq(&json!("1"), &json!(1)));
    }

    #[test]
    fn long_values_are_cut() {
        assert_eq!(show(&json!("ab")), "\"ab\"");
        let long = show(&json!("y".repeat(500)));
        assert_eq!(long.chars().count(), SHOWN_CHARS + 1);
        assert!(long.ends_with('…'));
    }
}
