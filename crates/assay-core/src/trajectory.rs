//! Trajectory checks: `trajectory:` rules tested against the tool calls of a transcript (which
//! tools were used or left alone, in what order, how often, with what arguments, and how many
//! user turns the conversation took). The simulator checks a scenario's assistant with them
//! (`assay-sim`); the answer bank checks the tool calls a product reports, as a one-turn
//! transcript (`assay-run`).
//!
//! Each rule becomes one [`CheckResult`] of kind [`CheckKind::Trajectory`], named after the
//! rule, that decides the verdict as an expected-state check does (a failed required check
//! fails the run or the case, whatever the judge scored). Its `calls` are the evidence: the
//! calls that satisfied the rule, or the ones that broke it, numbered as on the transcript page
//! (`call-N`, `turn-N`).
//!
//! ```
//! use assay_core::trajectory::TrajectoryConfig;
//! let rules: TrajectoryConfig =
//!     serde_json::from_value(serde_json::json!({"order": ["find_loan", "renew_loan"]})).unwrap();
//! assert!(rules.validate().is_ok());
//! let bad: TrajectoryConfig = serde_json::from_value(serde_json::json!({"order": [""]})).unwrap();
//! assert_eq!(bad.validate().unwrap_err().field, "trajectory.order[0]");
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::jsonpath::{at_path, json_eq, show};
use crate::simulation::{
    CallRef, CheckKind, CheckResult, CheckStatus, Ending, Speaker, ToolCallRecord, Transcript, Turn,
};

/// A `trajectory:` section as written (a scenario's, or an answer case's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrajectoryConfig {
    /// Tools that must be called at least once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_used: Vec<String>,
    /// Tools that must never be called.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_not_used: Vec<String>,
    /// Tools that must appear in this order among the calls (other calls may come between
    /// them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<String>,
    /// Bounds on how many times each tool is called.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calls: BTreeMap<String, CallBounds>,
    /// The most tool calls in the whole conversation (or answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls: Option<u32>,
    /// At least one call of a tool whose arguments match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<ArgumentRule>,
    /// The most user turns the conversation may take (an answer case is one turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// The fewest user turns the conversation may take (an answer case is one turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_turns: Option<u32>,
    /// Reported, but does not decide the verdict (default false: a failed trajectory check
    /// fails the run or the case, whatever the judge scored).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub advisory: bool,
}

/// `{min, max}` calls of one tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallBounds {
    /// At least this many calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u32>,
    /// At most this many calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
}

/// `{tool, match}`: at least one call of `tool` whose arguments match every entry of `match`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArgumentRule {
    /// The tool's name.
    pub tool: String,
    /// Dot path into the call's arguments (`a.b.0`) → the value it must equal, or
    /// `{regex: "…"}` that it (as text) must match.
    #[serde(rename = "match")]
    pub matches: BTreeMap<String, ArgumentMatch>,
}

/// What an argument must be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ArgumentMatch {
    /// `{regex: "…"}`: the value (a string, or any other value as JSON text) matches.
    Regex {
        /// The pattern (Rust `regex` syntax, unanchored).
        regex: String,
    },
    /// Any other value: the argument equals it (numbers as numbers).
    Value(Value),
}

/// A rule that cannot be used: the field (`trajectory.calls.find_book.max`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct TrajectoryError {
    /// The field, as a dotted path from the scenario's or the case's root.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> TrajectoryError {
    TrajectoryError {
        field: field.into(),
        message: message.into(),
    }
}

impl TrajectoryConfig {
    /// Whether no rule is given.
    pub fn is_empty(&self) -> bool {
        self.tools_used.is_empty()
            && self.tools_not_used.is_empty()
            && self.order.is_empty()
            && self.calls.is_empty()
            && self.max_calls.is_none()
            && self.arguments.is_empty()
            && self.max_turns.is_none()
            && self.min_turns.is_none()
    }

    /// Every tool name the rules mention, with the field that mentions it.
    pub fn tool_names(&self) -> Vec<(String, &str)> {
        let mut out = Vec::new();
        for (i, t) in self.tools_used.iter().enumerate() {
            out.push((format!("trajectory.tools_used[{i}]"), t.as_str()));
        }
        for (i, t) in self.tools_not_used.iter().enumerate() {
            out.push((format!("trajectory.tools_not_used[{i}]"), t.as_str()));
        }
        for (i, t) in self.order.iter().enumerate() {
            out.push((format!("trajectory.order[{i}]"), t.as_str()));
        }
        for t in self.calls.keys() {
            out.push((format!("trajectory.calls.{t}"), t.as_str()));
        }
        for (i, rule) in self.arguments.iter().enumerate() {
            out.push((
                format!("trajectory.arguments[{i}].tool"),
                rule.tool.as_str(),
            ));
        }
        out
    }

    /// Checks the rules' shape: names not empty, bounds that can hold, patterns that compile.
    pub fn validate(&self) -> Result<(), TrajectoryError> {
        if self.is_empty() {
            return Err(bad(
                "trajectory",
                "no rule given (tools_used, tools_not_used, order, calls, max_calls, arguments, max_turns, min_turns)",
            ));
        }
        for (field, name) in self.tool_names() {
            if name.trim().is_empty() {
                return Err(bad(field, "a tool name must not be empty"));
            }
        }
        if let Some(t) = self
            .tools_used
            .iter()
            .find(|t| self.tools_not_used.contains(t))
        {
            return Err(bad(
                "trajectory.tools_not_used",
                format!("`{t}` is also in tools_used"),
            ));
        }
        for (tool, b) in &self.calls {
            let field = format!("trajectory.calls.{tool}");
            match (b.min, b.max) {
                (None, None) => return Err(bad(field, "give `min`, `max` or both")),
                (Some(min), Some(max)) if min > max => {
                    return Err(bad(format!("{field}.min"), format!("{min} > max {max}")));
                }
                _ => {}
            }
        }
        if let (Some(min), Some(max)) = (self.min_turns, self.max_turns)
            && min > max
        {
            return Err(bad(
                "trajectory.min_turns",
                format!("{min} > max_turns {max}"),
            ));
        }
        for (i, rule) in self.arguments.iter().enumerate() {
            if rule.matches.is_empty() {
                return Err(bad(
                    format!("trajectory.arguments[{i}].match"),
                    "give at least one argument to match",
                ));
            }
            for (path, m) in &rule.matches {
                if let ArgumentMatch::Regex { regex } = m
                    && let Err(e) = regex::Regex::new(regex)
                {
                    return Err(bad(
                        format!("trajectory.arguments[{i}].match.{path}.regex"),
                        format!("bad regex: {}", one_line(&e.to_string())),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One call with its place in the transcript.
struct Call<'t> {
    at: CallRef,
    record: &'t ToolCallRecord,
}

fn calls_of(t: &Transcript) -> Vec<Call<'_>> {
    let mut out = Vec::new();
    for (i, turn) in t.turns.iter().enumerate() {
        for record in &turn.tool_calls {
            out.push(Call {
                at: CallRef {
                    call: out.len() + 1,
                    turn: i + 1,
                    id: record.id.clone(),
                    name: record.name.clone(),
                },
                record,
            });
        }
    }
    out
}

fn refs<'a>(calls: impl IntoIterator<Item = &'a Call<'a>>) -> Vec<CallRef> {
    calls.into_iter().map(|c| c.at.clone()).collect()
}

/// `n`th in words: 1st, 2nd, 3rd, 4th….
fn nth(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn times(n: usize) -> String {
    if n == 1 {
        "once".to_owned()
    } else {
        format!("{n} times")
    }
}

/// Tests one argument against its matcher; `Err` says why it does not hold.
fn test_argument(arguments: &Value, path: &str, m: &ArgumentMatch) -> Result<(), String> {
    let Some(value) = at_path(arguments, path) else {
        return Err(format!("{path}: missing"));
    };
    match m {
        ArgumentMatch::Regex { regex } => {
            let re = regex::Regex::new(regex).map_err(|e| format!("bad regex: {e}"))?;
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if re.is_match(&text) {
                Ok(())
            } else {
                Err(format!("{path}: {} does not match /{regex}/", show(value)))
            }
        }
        ArgumentMatch::Value(expected) => {
            if json_eq(value, expected) {
                Ok(())
            } else {
                Err(format!("{path}: {} ≠ {}", show(value), show(expected)))
            }
        }
    }
}

fn describe_match(rule: &ArgumentRule) -> String {
    rule.matches
        .iter()
        .map(|(path, m)| match m {
            ArgumentMatch::Regex { regex } => format!("{path} ~ /{regex}/"),
            ArgumentMatch::Value(v) => format!("{path} = {}", show(v)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn bounds_text(min: Option<u32>, max: Option<u32>) -> String {
    match (min, max) {
        (Some(a), Some(b)) if a == b => format!("exactly {a}"),
        (Some(a), Some(b)) => format!("{a} to {b}"),
        (Some(a), None) => format!("at least {a}"),
        (None, Some(b)) => format!("at most {b}"),
        (None, None) => "any number".to_owned(),
    }
}

/// Tests `count` against the bounds; on failure, why, and which calls broke it (the first call
/// past the maximum, or every call when there are too few).
fn test_bounds<'a>(
    what: &str,
    list: &[&'a Call<'a>],
    min: Option<u32>,
    max: Option<u32>,
) -> Result<Vec<CallRef>, (String, Vec<CallRef>)> {
    let n = list.len();
    if let Some(max) = max
        && n > max as usize
    {
        let over = list[max as usize];
        return Err((
            format!(
                "{what} called {}, at most {max}: the {} is {}",
                times(n),
                nth(max as usize + 1),
                over.at
            ),
            vec![over.at.clone()],
        ));
    }
    if let Some(min) = min
        && n < min as usize
    {
        return Err((
            format!("{what} called {}, at least {min}", times(n)),
            refs(list.iter().copied()),
        ));
    }
    Ok(refs(list.iter().copied()))
}

/// Evaluates every rule of `config` against the transcript's tool calls: one check per rule, in
/// the order the rules are documented.
pub fn evaluate(config: &TrajectoryConfig, transcript: &Transcript) -> Vec<CheckResult> {
    let calls = calls_of(transcript);
    let named =
        |tool: &str| -> Vec<&Call<'_>> { calls.iter().filter(|c| c.record.name == tool).collect() };
    let mut out = Vec::new();
    let mut push = |name: String, outcome: Result<Vec<CallRef>, (String, Vec<CallRef>)>| {
        let (status, details, evidence) = match outcome {
            Ok(evidence) => (CheckStatus::Passed, Vec::new(), evidence),
            Err((why, evidence)) => (CheckStatus::Failed, vec![why], evidence),
        };
        out.push(CheckResult {
            name,
            status,
            details,
            advisory: config.advisory,
            source: Some("the assistant's tool calls".to_owned()),
            state: None,
            kind: CheckKind::Trajectory,
            calls: evidence,
        });
    };

    for tool in &config.tools_used {
        let found = named(tool);
        push(
            format!("trajectory: {tool} used"),
            match found.first() {
                Some(first) => Ok(vec![first.at.clone()]),
                None => Err((format!("{tool} was never called"), Vec::new())),
            },
        );
    }
    for tool in &config.tools_not_used {
        let found = named(tool);
        push(
            format!("trajectory: {tool} not used"),
            match found.first() {
                None => Ok(Vec::new()),
                Some(first) => Err((
                    format!(
                        "{tool} called {}, first as {}",
                        times(found.len()),
                        first.at
                    ),
                    refs(found.iter().copied()),
                )),
            },
        );
    }
    if !config.order.is_empty() {
        push(
            format!("trajectory: order {}", config.order.join(" → ")),
            test_order(&config.order, &calls),
        );
    }
    for (tool, b) in &config.calls {
        push(
            format!("trajectory: {tool} called {}", bounds_text(b.min, b.max)),
            test_bounds(tool, &named(tool), b.min, b.max),
        );
    }
    if let Some(max) = config.max_calls {
        let all: Vec<&Call<'_>> = calls.iter().collect();
        push(
            format!("trajectory: at most {max} tool calls"),
            test_bounds("tools", &all, None, Some(max)).map(|_| Vec::new()),
        );
    }
    for rule in &config.arguments {
        push(
            format!(
                "trajectory: {} called with {}",
                rule.tool,
                describe_match(rule)
            ),
            test_arguments(rule, &named(&rule.tool)),
        );
    }
    if config.min_turns.is_some() || config.max_turns.is_some() {
        let n = transcript.user_turns();
        let name = format!(
            "trajectory: {} user turns",
            bounds_text(config.min_turns, config.max_turns)
        );
        let outcome = if config.max_turns.is_some_and(|m| n > m as usize) {
            Err((
                format!(
                    "{n} user turns, at most {}",
                    config.max_turns.unwrap_or_default()
                ),
                Vec::new(),
            ))
        } else if config.min_turns.is_some_and(|m| n < m as usize) {
            Err((
                format!(
                    "{n} user turns, at least {}",
                    config.min_turns.unwrap_or_default()
                ),
                Vec::new(),
            ))
        } else {
            Ok(Vec::new())
        };
        push(name, outcome);
    }
    out
}

/// What a reply's trajectory checks say when the product reported no tool calls.
pub const NO_CALLS_REPORTED: &str = "the product reported no tool calls (its reply has no `tool_calls`), so they were checked as none";

/// Evaluates `config` against the tool calls a product reported with one reply: a one-turn
/// transcript (the user's message, then the reply with its calls), so calls are numbered from
/// 1 in turn 2 and the conversation has 1 user turn. `calls` is `None` when the product did
/// not report any: the rules are then checked against no calls (`tools_used` and `order`
/// cannot hold), and every check says so ([`NO_CALLS_REPORTED`]).
pub fn evaluate_reply(
    config: &TrajectoryConfig,
    message: &str,
    reply: &str,
    calls: Option<&[ToolCallRecord]>,
) -> Vec<CheckResult> {
    let turn = |role, content: &str, tool_calls: Vec<ToolCallRecord>| Turn {
        role,
        content: content.to_owned(),
        tool_calls,
        timestamp: String::new(),
        usage: None,
    };
    let transcript = Transcript {
        scenario_id: String::new(),
        repeat: 1,
        model: String::new(),
        simulator_model: String::new(),
        turns: vec![
            turn(Speaker::User, message, Vec::new()),
            turn(
                Speaker::Assistant,
                reply,
                calls.map(<[ToolCallRecord]>::to_vec).unwrap_or_default(),
            ),
        ],
        ended_by: Ending::StopToken,
        error: None,
        started_at: String::new(),
        ended_at: String::new(),
        stop_usage: None,
    };
    let mut checks = evaluate(config, &transcript);
    for c in &mut checks {
        c.source = Some("the product's tool calls".to_owned());
        if calls.is_none() {
            c.details.push(NO_CALLS_REPORTED.to_owned());
        }
    }
    checks
}

/// The order rule: each tool of `order` must be called after the one before it (the earliest
/// such call is taken, so that the rest has the most room). On failure, the call that came too
/// early (or the note that the tool was never called) names the break.
fn test_order(
    order: &[String],
    calls: &[Call<'_>],
) -> Result<Vec<CallRef>, (String, Vec<CallRef>)> {
    let mut matched: Vec<&Call<'_>> = Vec::new();
    let mut from = 0usize;
    for tool in order {
        if let Some(i) = calls[from..].iter().position(|c| &c.record.name == tool) {
            matched.push(&calls[from + i]);
            from += i + 1;
            continue;
        }
        let Some(prev) = matched.last() else {
            return Err((format!("{tool} was never called"), Vec::new()));
        };
        let early = calls[..from].iter().rfind(|c| &c.record.name == tool);
        return Err(match early {
            Some(early) => (
                format!(
                    "{} came before {}, and {tool} was not called after it",
                    early.at, prev.at
                ),
                vec![early.at.clone(), prev.at.clone()],
            ),
            None => (
                format!("{tool} was never called (expected after {})", prev.at),
                vec![prev.at.clone()],
            ),
        });
    }
    Ok(refs(matched))
}

/// The arguments rule: the first call of the tool whose arguments match; on failure, each call
/// of the tool with the first argument that did not match.
fn test_arguments(
    rule: &ArgumentRule,
    found: &[&Call<'_>],
) -> Result<Vec<CallRef>, (String, Vec<CallRef>)> {
    if found.is_empty() {
        return Err((format!("{} was never called", rule.tool), Vec::new()));
    }
    let mut misses = Vec::new();
    for call in found {
        let miss = rule
            .matches
            .iter()
            .find_map(|(path, m)| test_argument(&call.record.arguments, path, m).err());
        match miss {
            None => return Ok(vec![call.at.clone()]),
            Some(why) => misses.push(format!("{}: {why}", call.at)),
        }
    }
    Err((
        format!("no {} call matched: {}", rule.tool, misses.join("; ")),
        refs(found.iter().copied()),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A transcript: each inner list is one assistant turn's calls (name, arguments), after a
    /// user turn.
    fn transcript(turns: &[&[(&str, Value)]]) -> Transcript {
        let mut out = Vec::new();
        let mut id = 0;
        for calls in turns {
            out.push(Turn {
                role: Speaker::User,
                content: "hi".into(),
                tool_calls: Vec::new(),
                timestamp: "t".into(),
                usage: None,
            });
            out.push(Turn {
                role: Speaker::Assistant,
                content: "ok".into(),
                tool_calls: calls
                    .iter()
                    .map(|(name, args)| {
                        id += 1;
                        ToolCallRecord {
                            id: format!("c{id}"),
                            name: (*name).to_owned(),
                            server: Some("lib".into()),
                            arguments: args.clone(),
                            result: "{}".into(),
                            is_error: false,
                            duration_ms: 1,
                        }
                    })
                    .collect(),
                timestamp: "t".into(),
                usage: None,
            });
        }
        Transcript {
            scenario_id: "s".into(),
            repeat: 1,
            model: "m".into(),
            simulator_model: "u".into(),
            turns: out,
            ended_by: Ending::StopToken,
            error: None,
            started_at: "t".into(),
            ended_at: "t".into(),
            stop_usage: None,
        }
    }

    fn rules(yaml: Value) -> TrajectoryConfig {
        let c: TrajectoryConfig = serde_json::from_value(yaml).unwrap();
        c.validate().unwrap();
        c
    }

    /// The one check `config` makes, on `t`.
    fn one(config: &TrajectoryConfig, t: &Transcript) -> CheckResult {
        let mut checks = evaluate(config, t);
        assert_eq!(checks.len(), 1, "{checks:?}");
        let c = checks.remove(0);
        assert_eq!(c.kind, CheckKind::Trajectory);
        c
    }

    fn honest() -> Transcript {
        transcript(&[
            &[("find_book", json!({"title": "Dune"}))],
            &[("borrow_book", json!({"isbn": "978-0441013593", "days": 14}))],
        ])
    }

    fn borrows_first() -> Transcript {
        transcript(&[&[
            ("borrow_book", json!({"isbn": "x"})),
            ("find_book", json!({"title": "Dune"})),
        ]])
    }

    #[test]
    fn tools_used_and_not_used() {
        let used = rules(json!({"tools_used": ["find_book"]}));
        let c = one(&used, &honest());
        assert_eq!(c.status, CheckStatus::Passed);
        assert_eq!(c.calls[0].to_string(), "find_book (call 1, turn 2)");
        let c = one(&used, &transcript(&[&[("borrow_book", json!({}))]]));
        assert_eq!(c.status, CheckStatus::Failed);
        assert_eq!(c.details, ["find_book was never called"]);

        let not = rules(json!({"tools_not_used": ["delete_account"]}));
        assert_eq!(one(&not, &honest()).status, CheckStatus::Passed);
        let t = transcript(&[
            &[("find_book", json!({}))],
            &[("delete_account", json!({}))],
        ]);
        let c = one(&not, &t);
        assert_eq!(c.status, CheckStatus::Failed);
        assert_eq!(
            c.details,
            ["delete_account called once, first as delete_account (call 2, turn 4)"]
        );
        assert_eq!(c.calls[0].id, "c2");
    }

    #[test]
    fn order_names_the_call_that_came_too_early() {
        let order = rules(json!({"order": ["find_book", "borrow_book"]}));
        let c = one(&order, &honest());
        assert_eq!(c.status, CheckStatus::Passed, "{c:?}");
        assert_eq!(c.calls.iter().map(|r| r.call).collect::<Vec<_>>(), [1, 2]);
        let c = one(&order, &borrows_first());
        assert_eq!(c.status, CheckStatus::Failed);
        assert_eq!(
            c.details,
            [
                "borrow_book (call 1, turn 2) came before find_book (call 2, turn 2), and borrow_book was not called after it"
            ]
        );
        assert_eq!(c.calls[0].name, "borrow_book");
        // A tool never called at all.
        let c = one(&order, &transcript(&[&[("find_book", json!({}))]]));
        assert_eq!(
            c.details,
            ["borrow_book was never called (expected after find_book (call 1, turn 2))"]
        );
        let c = one(&order, &transcript(&[]));
        assert_eq!(c.details, ["find_book was never called"]);
        // Other calls between them do not matter; a later repeat repairs an early one.
        let t = transcript(&[&[
            ("borrow_book", json!({})),
            ("find_book", json!({})),
            ("ping", json!({})),
            ("borrow_book", json!({})),
        ]]);
        assert_eq!(one(&order, &t).status, CheckStatus::Passed);
    }

    #[test]
    fn call_bounds_per_tool_and_in_all() {
        let bounded = rules(json!({"calls": {"find_book": {"min": 1, "max": 6}}}));
        assert_eq!(one(&bounded, &honest()).status, CheckStatus::Passed);
        let looping: Vec<(&str, Value)> = (0..9).map(|_| ("find_book", json!({}))).collect();
        let t = transcript(&[&looping]);
        let c = one(&bounded, &t);
        assert_eq!(c.status, CheckStatus::Failed);
        assert_eq!(
            c.details,
            ["find_book called 9 times, at most 6: the 7th is find_book (call 7, turn 2)"]
        );
        assert_eq!(c.calls.len(), 1);
        let c = one(&bounded, &transcript(&[&[("borrow_book", json!({}))]]));
        assert_eq!(c.details, ["find_book called 0 times, at least 1"]);

        let total = rules(json!({"max_calls": 2}));
        assert_eq!(one(&total, &honest()).status, CheckStatus::Passed);
        let c = one(&total, &t);
        assert_eq!(c.status, CheckStatus::Failed);
        assert_eq!(c.calls[0].call, 3);
    }

    #[test]
    fn arguments_by_value_and_pattern() {
        let by_value = rules(json!({"arguments": [
            {"tool": "borrow_book", "match": {"days": 14.0, "isbn": {"regex": "^978-"}}}]}));
        let c = one(&by_value, &honest());
        assert_eq!(c.status, CheckStatus::Passed, "{c:?}");
        assert_eq!(c.calls[0].call, 2);
        let c = one(&by_value, &borrows_first());
        assert_eq!(c.status, CheckStatus::Failed);
        assert_eq!(
            c.details,
            ["no borrow_book call matched: borrow_book (call 1, turn 2): days: missing"]
        );
        let nested = rules(json!({"arguments": [
            {"tool": "find_book", "match": {"filters.0": {"regex": "(?i)sci"}}}]}));
        let t = transcript(&[&[("find_book", json!({"filters": ["SciFi"]}))]]);
        assert_eq!(one(&nested, &t).status, CheckStatus::Passed);
        let t = transcript(&[&[("find_book", json!({"filters": ["poetry"]}))]]);
        assert!(one(&nested, &t).details[0].contains("does not match /(?i)sci/"));
    }

    #[test]
    fn turn_bounds() {
        let turns = rules(json!({"min_turns": 2, "max_turns": 3}));
        assert_eq!(one(&turns, &honest()).status, CheckStatus::Passed);
        let c = one(&turns, &borrows_first());
        assert_eq!(c.details, ["1 user turns, at least 2"]);
        let long = transcript(&[&[], &[], &[], &[]]);
        assert_eq!(one(&turns, &long).details, ["4 user turns, at most 3"]);
    }

    #[test]
    fn every_rule_is_one_named_check_and_advisory_carries_over() {
        let all = rules(json!({"tools_used": ["find_book"], "tools_not_used": ["x"],
            "order": ["find_book", "borrow_book"], "calls": {"find_book": {"max": 1}},
            "max_calls": 5, "arguments": [{"tool": "find_book", "match": {"title": "Dune"}}],
            "max_turns": 4, "advisory": true}));
        let checks = evaluate(&all, &honest());
        assert_eq!(checks.len(), 7);
        assert!(
            checks
                .iter()
                .all(|c| c.status == CheckStatus::Passed && c.advisory)
        );
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names[2], "trajectory: order find_book → borrow_book");
        assert_eq!(names[3], "trajectory: find_book called at most 1");
    }

    #[test]
    fn bad_rules_name_their_field() {
        let check = |v: Value, field: &str| {
            let c: TrajectoryConfig = serde_json::from_value(v).unwrap();
            assert_eq!(c.validate().unwrap_err().field, field);
        };
        check(json!({}), "trajectory");
        check(json!({"calls": {"a": {}}}), "trajectory.calls.a");
        check(
            json!({"calls": {"a": {"min": 3, "max": 1}}}),
            "trajectory.calls.a.min",
        );
        check(
            json!({"arguments": [{"tool": "a", "match": {"x": {"regex": "("}}}]}),
            "trajectory.arguments[0].match.x.regex",
        );
        check(
            json!({"arguments": [{"tool": "a", "match": {}}]}),
            "trajectory.arguments[0].match",
        );
        check(json!({"order": ["a", " "]}), "trajectory.order[1]");
        check(
            json!({"min_turns": 3, "max_turns": 2}),
            "trajectory.min_turns",
        );
        check(
            json!({"tools_used": ["a"], "tools_not_used": ["a"]}),
            "trajectory.tools_not_used",
        );
        // Unknown fields are rejected by serde.
        assert!(serde_json::from_value::<TrajectoryConfig>(json!({"tool_used": ["a"]})).is_err());
        assert!(
            serde_json::from_value::<TrajectoryConfig>(json!({"calls": {"a": {"maximum": 1}}}))
                .is_err()
        );
    }
    fn reported(calls: &[(&str, Value)]) -> Vec<ToolCallRecord> {
        calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| ToolCallRecord {
                id: format!("call-{}", i + 1),
                name: (*name).to_owned(),
                server: None,
                arguments: args.clone(),
                result: String::new(),
                is_error: false,
                duration_ms: 0,
            })
            .collect()
    }

    #[test]
    fn a_reply_is_one_turn_and_its_calls_are_numbered_in_turn_2() {
        let config = rules(json!({"order": ["find_loan", "renew_loan"],
            "calls": {"renew_loan": {"max": 1}}, "max_turns": 1, "min_turns": 1}));
        let honest = reported(&[
            ("find_loan", json!({"book": 42})),
            ("renew_loan", json!({"book": 42})),
        ]);
        let checks = evaluate_reply(&config, "Renew book 42.", "Done.", Some(&honest));
        assert_eq!(checks.len(), 3);
        assert!(
            checks.iter().all(|c| c.status == CheckStatus::Passed
                && c.details.is_empty()
                && c.source.as_deref() == Some("the product's tool calls")),
            "{checks:?}"
        );
        assert_eq!(
            checks[0].calls[1].to_string(),
            "renew_loan (call 2, turn 2)"
        );
        assert_eq!(checks[0].calls[1].id, "call-2");

        let blind = reported(&[
            ("renew_loan", json!({"book": 42})),
            ("renew_loan", json!({"book": 42})),
        ]);
        let checks = evaluate_reply(&config, "Renew book 42.", "Done.", Some(&blind));
        assert_eq!(checks[0].details, ["find_loan was never called"]);
        assert_eq!(
            checks[1].details,
            ["renew_loan called 2 times, at most 1: the 2nd is renew_loan (call 2, turn 2)"]
        );
        assert_eq!(checks[2].status, CheckStatus::Passed, "one user turn");
    }

    #[test]
    fn a_reply_without_reported_calls_is_checked_as_none_and_says_so() {
        let config = rules(json!({"tools_used": ["find_loan"], "tools_not_used": ["delete"]}));
        let checks = evaluate_reply(&config, "m", "r", None);
        assert_eq!(checks[0].status, CheckStatus::Failed);
        assert_eq!(
            checks[0].details,
            ["find_loan was never called", NO_CALLS_REPORTED]
        );
        assert_eq!(checks[1].status, CheckStatus::Passed);
        assert_eq!(checks[1].details, [NO_CALLS_REPORTED]);
        // An empty list is a report: no calls were made, and nothing more is said.
        let checks = evaluate_reply(&config, "m", "r", Some(&[]));
        assert_eq!(checks[0].details, ["find_loan was never called"]);
        assert!(checks[1].details.is_empty());
    }
}
