//! Expected-state checks: after the conversation, read the state (an MCP tool, an MCP resource
//! or a command; JSON in every case) and test it. A check whose source fails or is not JSON is
//! an error of that check, not a failed check.

use assay_core::simulation::{CheckKind, CheckResult, CheckStatus};
use serde_json::Value;

use crate::suite::{CheckConfig, Expectation};

pub use assay_core::jsonpath::at_path;
pub(crate) use assay_core::jsonpath::{json_eq, show};

/// Tests one expectation; `Err` says why it does not hold.
pub fn test(root: &Value, e: &Expectation) -> Result<(), String> {
    let path = if e.path.is_empty() { "(root)" } else { &e.path };
    let found = at_path(root, &e.path);
    if let Some(exists) = e.exists {
        return if found.is_some() == exists {
            Ok(())
        } else if exists {
            Err(format!("{path}: missing"))
        } else {
            Err(format!("{path}: present, expected absent"))
        };
    }
    let Some(value) = found else {
        return Err(format!("{path}: missing"));
    };
    if let Some(expected) = &e.equals {
        return if json_eq(value, expected) {
            Ok(())
        } else {
            Err(format!("{path}: {} ≠ {}", show(value), show(expected)))
        };
    }
    if let Some(needle) = &e.contains {
        let holds = match (value, needle) {
            (Value::String(hay), Value::String(n)) => {
                hay.to_lowercase().contains(&n.to_lowercase())
            }
            (Value::Array(items), Value::String(n)) => items.iter().any(|item| match item {
                Value::String(s) => s.to_lowercase().contains(&n.to_lowercase()),
                other => {
                    json_eq(other, needle)
                        || other.to_string().to_lowercase().contains(&n.to_lowercase())
                }
            }),
            (Value::Array(items), other) => items.iter().any(|item| json_eq(item, other)),
            (Value::Object(map), Value::String(n)) => map.contains_key(n),
            _ => false,
        };
        return if holds {
            Ok(())
        } else {
            Err(format!(
                "{path}: {} does not contain {}",
                show(value),
                show(needle)
            ))
        };
    }
    if let Some(length) = e.length {
        let actual = match value {
            Value::Array(a) => Some(a.len()),
            Value::Object(o) => Some(o.len()),
            Value::String(s) => Some(s.chars().count()),
            _ => None,
        };
        return match actual {
            Some(n) if n as u64 == length => Ok(()),
            Some(n) => Err(format!("{path}: length {n}, expected {length}")),
            None => Err(format!("{path}: {} has no length", show(value))),
        };
    }
    let number = value.as_f64();
    if let Some(min) = e.min {
        return match number {
            Some(n) if n >= min => Ok(()),
            Some(n) => Err(format!("{path}: {n} < {min}")),
            None => Err(format!("{path}: {} is not a number", show(value))),
        };
    }
    if let Some(max) = e.max {
        return match number {
            Some(n) if n <= max => Ok(()),
            Some(n) => Err(format!("{path}: {n} > {max}")),
            None => Err(format!("{path}: {} is not a number", show(value))),
        };
    }
    Err(format!("{path}: no expectation given"))
}

/// Where `check` reads the state from, in words (`tool quest.get_state {…}`, `resource
/// quest://state`, `command sqlite3 …`).
pub fn source_of(check: &CheckConfig) -> String {
    if let Some(t) = &check.tool {
        let args = t.arguments.to_string();
        if args == "{}" {
            format!("tool {}.{}", t.server, t.name)
        } else {
            format!("tool {}.{} {args}", t.server, t.name)
        }
    } else if let Some(r) = &check.resource {
        format!("resource {} from {}", r.uri, r.server)
    } else if let Some(c) = &check.command {
        format!("command {}", c.join(" "))
    } else {
        "nothing".to_owned()
    }
}

/// The most of a state's text a check result keeps.
pub const STATE_KEPT_CHARS: usize = 2000;

/// Evaluates `check` against the text its source returned (or the error reading it).
pub fn evaluate(check: &CheckConfig, source: Result<String, String>) -> CheckResult {
    let read = source.as_ref().ok().map(|text| {
        let text = text.trim();
        match text.char_indices().nth(STATE_KEPT_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        }
    });
    let result = |status, details| CheckResult {
        name: check.name.clone(),
        status,
        details,
        advisory: check.advisory,
        source: Some(source_of(check)),
        state: read.clone(),
        kind: CheckKind::State,
        calls: Vec::new(),
    };
    let text = match source {
        Ok(text) => text,
        Err(e) => {
            return result(
                CheckStatus::Error,
                vec![format!("cannot read the state: {e}")],
            );
        }
    };
    let root: Value = match serde_json::from_str(text.trim()) {
        Ok(v) => v,
        Err(e) => {
            return result(
                CheckStatus::Error,
                vec![format!(
                    "the state is not JSON ({e}): {}",
                    text.chars().take(120).collect::<String>()
                )],
            );
        }
    };
    let failures: Vec<String> = check
        .expect
        .iter()
        .filter_map(|e| test(&root, e).err())
        .collect();
    if failures.is_empty() {
        result(CheckStatus::Passed, Vec::new())
    } else {
        result(CheckStatus::Failed, failures)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn exp(path: &str, op: Value) -> Expectation {
        let mut e: Expectation = serde_json::from_value(op).unwrap();
        e.path = path.to_owned();
        e
    }

    #[test]
    fn expectations_hold_or_say_why_not() {
        let state = json!({"chores_today": [{"chore": "Mow the lawn"}, {"chore": "Dishes"}],
                           "quest": {"goal": "Build a gaming PC", "savings": 120.0},
                           "emails": [{"cc": ["mom@example.com"]}]});
        let ok = [
            exp("chores_today", json!({"length": 2})),
            exp("chores_today.1.chore", json!({"equals": "Dishes"})),
            exp("quest.goal", json!({"contains": "gaming"})),
            exp("quest.savings", json!({"equals": 120})),
            exp("quest.savings", json!({"min": 100})),
            exp("quest.savings", json!({"max": 120})),
            exp("emails.0.cc", json!({"contains": "MOM@example.com"})),
            exp("quest.bike", json!({"exists": false})),
            exp("quest", json!({"contains": "goal"})),
        ];
        for e in &ok {
            assert_eq!(test(&state, e), Ok(()), "{e:?}");
        }
        let bad = [
            (
                exp("chores_today", json!({"length": 3})),
                "length 2, expected 3",
            ),
            (
                exp("quest.goal", json!({"contains": "bike"})),
                "does not contain",
            ),
            (exp("quest.savings", json!({"min": 200})), "120 < 200"),
            (exp("quest.nothing", json!({"equals": 1})), "missing"),
            (exp("quest.goal", json!({"min": 1})), "not a number"),
        ];
        for (e, why) in &bad {
            let err = test(&state, e).unwrap_err();
            assert!(err.contains(why), "{err} / {why}");
        }
    }

    #[test]
    fn unreadable_state_is_an_error_not_a_failure() {
        let check: CheckConfig = serde_json::from_value(json!({
            "name": "n", "command": ["x"], "expect": [{"path": "a", "equals": 1}]}))
        .unwrap();
        assert_eq!(
            evaluate(&check, Ok("{\"a\": 1}".into())).status,
            CheckStatus::Passed
        );
        assert_eq!(
            evaluate(&check, Ok("{\"a\": 2}".into())).status,
            CheckStatus::Failed
        );
        assert_eq!(
            evaluate(&check, Ok("not json".into())).status,
            CheckStatus::Error
        );
        assert_eq!(
            evaluate(&check, Err("dead".into())).status,
            CheckStatus::Error
        );
        // What was read, and from where, is kept for the report.
        let r = evaluate(&check, Ok(" {\"a\": 2} ".into()));
        assert_eq!(r.source.as_deref(), Some("command x"));
        assert_eq!(r.state.as_deref(), Some("{\"a\": 2}"));
        assert_eq!(evaluate(&check, Err("dead".into())).state, None);
        let long = format!("\"{}\"", "y".repeat(3 * STATE_KEPT_CHARS));
        let r = evaluate(&check, Ok(long));
        assert_eq!(r.state.unwrap().chars().count(), STATE_KEPT_CHARS + 1);
    }
}
