//! Deterministic assertions: checks on a reply that need no model.
//!
//! One library for every place that checks a reply: optimizer test cases (`assert` on a JSONL
//! line), answer cases and simulator scenarios. An assertion is written
//! `{"type": …, "value": …, "weight": …, "critical": …}`; a list of them is an
//! [`AssertionSet`], parsed and validated once by [`AssertionSet::parse`] (a bad regex, an
//! unknown type or a value of the wrong shape is an [`AssertionError`] naming the field, such as
//! `assert[2].value`) and evaluated on an [`Output`] by [`AssertionSet::evaluate`] into an
//! [`AssertionReport`].
//!
//! Each assertion ends in one of three [`Status`]es: passed, failed, or **error**: a `latency`
//! or `cost` assertion on a reply whose latency or cost was not measured can be neither passed
//! nor failed, so it is reported as an error of that assertion and left out of the score. The
//! score is the weighted share of the decided assertions that passed; the set passes when the
//! score reaches the threshold (default 1: all must pass) and no `critical` assertion failed.
//! A failed critical assertion fails whatever holds the set (a case, a scenario) whatever a
//! judge says: evidence outranks opinion.
//!
//! ```
//! use assay_core::assertion::{AssertionSet, Output};
//! let set = AssertionSet::parse(
//!     &serde_json::json!([{"type": "icontains", "value": "paris"},
//!                         {"type": "not-refusal", "critical": true}]),
//!     None,
//!     "assert",
//! )
//! .unwrap();
//! let report = set.evaluate(&Output::text("The capital is Paris."));
//! assert!(report.passed && !report.critical_failed);
//! ```

use std::fmt;
use std::sync::Arc;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The fields an assertion object may have.
const FIELDS: [&str; 4] = ["type", "value", "weight", "critical"];

/// How much of the reply's start [`Kind::Refusal`] reads, in characters: a refusal says so up
/// front, and an answer that later writes "I cannot stress enough" is not one.
pub const REFUSAL_WINDOW: usize = 300;

/// The phrases that mark a refusal (matched lower-cased, with typographic apostrophes made
/// straight, within the first [`REFUSAL_WINDOW`] characters).
pub const REFUSAL_PHRASES: [&str; 24] = [
    "i can't",
    "i cannot",
    "i can not",
    "i won't",
    "i will not",
    "i'm unable",
    "i am unable",
    "i'm not able to",
    "i am not able to",
    "i'm not allowed",
    "i am not allowed",
    "i'm not permitted",
    "i am not permitted",
    "i must decline",
    "i have to decline",
    "i decline",
    "i'm sorry, but",
    "i am sorry, but",
    "sorry, but i",
    "i apologize, but",
    "i'm afraid i can",
    "unable to help with",
    "can't help with",
    "cannot help with",
];

/// The kinds of assertion (without the `not-` prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// The reply, trimmed, is exactly `value`.
    Equals,
    /// The reply contains `value`.
    Contains,
    /// The reply contains `value`, ignoring case.
    IContains,
    /// The reply contains at least one of the strings in `value`.
    ContainsAny,
    /// The reply contains every string in `value`.
    ContainsAll,
    /// [`Kind::ContainsAny`], ignoring case.
    IContainsAny,
    /// [`Kind::ContainsAll`], ignoring case.
    IContainsAll,
    /// The reply matches the regular expression `value`.
    Regex,
    /// The reply, with leading whitespace trimmed, starts with `value`.
    StartsWith,
    /// The reply parses as JSON.
    IsJson,
    /// The reply parses as JSON and validates against the JSON Schema `value`.
    JsonSchema,
    /// The reply's length in characters is within `value` (`{min?, max?}`).
    Length,
    /// The call took at most `value` milliseconds.
    Latency,
    /// The call cost at most `value` US dollars.
    Cost,
    /// The reply declines to answer ([`REFUSAL_PHRASES`]).
    Refusal,
}

impl Kind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [Kind; 15] = [
        Kind::Equals,
        Kind::Contains,
        Kind::IContains,
        Kind::ContainsAny,
        Kind::ContainsAll,
        Kind::IContainsAny,
        Kind::IContainsAll,
        Kind::Regex,
        Kind::StartsWith,
        Kind::IsJson,
        Kind::JsonSchema,
        Kind::Length,
        Kind::Latency,
        Kind::Cost,
        Kind::Refusal,
    ];

    /// The name written in `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Equals => "equals",
            Kind::Contains => "contains",
            Kind::IContains => "icontains",
            Kind::ContainsAny => "contains-any",
            Kind::ContainsAll => "contains-all",
            Kind::IContainsAny => "icontains-any",
            Kind::IContainsAll => "icontains-all",
            Kind::Regex => "regex",
            Kind::StartsWith => "starts-with",
            Kind::IsJson => "is-json",
            Kind::JsonSchema => "json-schema",
            Kind::Length => "length",
            Kind::Latency => "latency",
            Kind::Cost => "cost",
            Kind::Refusal => "refusal",
        }
    }

    /// Every name `type` accepts: each kind and its `not-` form.
    pub fn type_names() -> Vec<String> {
        Kind::ALL
            .iter()
            .flat_map(|k| [k.as_str().to_owned(), format!("not-{}", k.as_str())])
            .collect()
    }
}

/// A bad assertion spec: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct AssertionError {
    /// The field's path, such as `assert[2].value`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// One deterministic assertion on a reply, as written (docs/assertions.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AssertionConfig {
    /// The assertion's kind, or its `not-` form, which passes exactly when the kind fails.
    #[serde(rename = "type")]
    #[schemars(schema_with = "type_schema")]
    pub kind: String,
    /// What the kind checks against: a string (`equals`, `contains`, `icontains`, `regex`,
    /// `starts-with`), a non-empty list of strings (`contains-any`, `contains-all`,
    /// `icontains-any`, `icontains-all`), a JSON Schema object (`json-schema`), `{min?, max?}`
    /// characters (`length`), maximum milliseconds (`latency`), maximum US dollars (`cost`);
    /// none for `is-json` and `refusal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The assertion's weight in the set's score (a positive number; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// When true, failing this assertion fails the case whatever else says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub critical: bool,
}

fn type_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": Kind::type_names(),
    })
}

/// An assertion's value as a result records it: compact JSON, cut with an ellipsis.
fn shown_value(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > AssertionResult::VALUE_SHOWN {
        let cut: String = text.chars().take(AssertionResult::VALUE_SHOWN).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// The JSON Schema of one assertion object.
pub fn assertion_schema() -> schemars::Schema {
    schemars::schema_for!(AssertionConfig)
}

/// The checked form of an assertion's value.
#[derive(Clone)]
enum Check {
    Text(String),
    Texts(Vec<String>),
    Pattern(Regex),
    Schema(Arc<jsonschema::Validator>),
    Length {
        min: Option<usize>,
        max: Option<usize>,
    },
    Max(f64),
    None,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Text(s) => write!(f, "Text({s:?})"),
            Check::Texts(v) => write!(f, "Texts({v:?})"),
            Check::Pattern(r) => write!(f, "Pattern({:?})", r.as_str()),
            Check::Schema(_) => write!(f, "Schema(..)"),
            Check::Length { min, max } => write!(f, "Length({min:?}..{max:?})"),
            Check::Max(m) => write!(f, "Max({m})"),
            Check::None => write!(f, "None"),
        }
    }
}

/// One parsed, validated assertion.
#[derive(Debug, Clone)]
pub struct Assertion {
    /// What it checks.
    pub kind: Kind,
    /// Whether it is the `not-` form.
    pub negate: bool,
    /// Its weight (default 1).
    pub weight: f64,
    /// Whether failing it fails the case.
    pub critical: bool,
    /// As written.
    pub config: AssertionConfig,
    check: Check,
}

impl Assertion {
    /// The `type` as written (`not-contains`).
    pub fn type_name(&self) -> &str {
        &self.config.kind
    }
}

/// A validated list of assertions and the share of their weight that must pass.
#[derive(Debug, Clone)]
pub struct AssertionSet {
    /// The assertions, in the order written.
    pub assertions: Vec<Assertion>,
    /// The weighted share (0–1) of decided assertions that must pass; `None` means all.
    pub threshold: Option<f64>,
}

impl PartialEq for AssertionSet {
    fn eq(&self, other: &Self) -> bool {
        self.threshold == other.threshold
            && self.assertions.len() == other.assertions.len()
            && self
                .assertions
                .iter()
                .zip(&other.assertions)
                .all(|(a, b)| a.config == b.config)
    }
}

// Weights and the threshold are checked finite when parsed, so equality is reflexive.
impl Eq for AssertionSet {}

impl Serialize for AssertionSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let configs: Vec<&AssertionConfig> = self.assertions.iter().map(|a| &a.config).collect();
        let mut st = s.serialize_struct("AssertionSet", 2)?;
        st.serialize_field("assertions", &configs)?;
        st.serialize_field("threshold", &self.threshold)?;
        st.end()
    }
}

/// What a reply is checked on: its text and, where measured, the call's latency and cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Output<'a> {
    /// The reply.
    pub text: &'a str,
    /// How long the call took, in milliseconds (`None`: not measured).
    pub latency_ms: Option<f64>,
    /// What the call cost, in US dollars (`None`: not measured).
    pub cost_usd: Option<f64>,
}

impl<'a> Output<'a> {
    /// A reply with neither latency nor cost measured.
    pub fn text(text: &'a str) -> Output<'a> {
        Output {
            text,
            latency_ms: None,
            cost_usd: None,
        }
    }
}

/// How one assertion ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// It held.
    Passed,
    /// It did not hold.
    Failed,
    /// It could not be decided (a latency or cost that was not measured): neither a pass nor
    /// a fail, left out of the score.
    Error,
}

/// One assertion's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssertionResult {
    /// Its 0-based position in the list.
    pub index: usize,
    /// Its `type` as written.
    #[serde(rename = "type")]
    pub kind: String,
    /// Passed, failed or error.
    pub status: Status,
    /// Whether it passed (`status == passed`).
    pub passed: bool,
    /// Why, in a few words (`no "Paris"`, `took 1250 ms, over 1000 ms`).
    pub reason: String,
    /// Its weight.
    pub weight: f64,
    /// Whether it is critical.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub critical: bool,
    /// Its `value` as written, compact JSON cut at [`AssertionResult::VALUE_SHOWN`]
    /// characters (absent for kinds that take none, and in reports written before it was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl AssertionResult {
    /// Characters of an assertion's value a result keeps.
    pub const VALUE_SHOWN: usize = 120;

    /// The assertion as a reader names it: its type and value (`contains "Paris"`), or its
    /// type alone.
    pub fn name(&self) -> String {
        match &self.value {
            Some(v) => format!("{} {v}", self.kind),
            None => self.kind.clone(),
        }
    }
}

/// The outcome of a set of assertions on one reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssertionReport {
    /// One result per assertion, in order.
    pub results: Vec<AssertionResult>,
    /// The weighted share of the decided assertions that passed (`None` when none could be
    /// decided).
    pub score: Option<f64>,
    /// The threshold the score had to reach (1 when the set named none).
    pub threshold: f64,
    /// Whether the set passed: a score at or above the threshold and no critical failure.
    pub passed: bool,
    /// Whether a critical assertion failed (an error is not a failure).
    pub critical_failed: bool,
    /// How many assertions ended in an error.
    pub errors: usize,
}

impl AssertionReport {
    /// The results that failed, then those that errored.
    pub fn not_passed(&self) -> impl Iterator<Item = &AssertionResult> {
        self.results.iter().filter(|r| r.status != Status::Passed)
    }
}

impl AssertionSet {
    /// Parses and validates `list` (a JSON array of assertion objects) with its optional
    /// `threshold`. `field` is how the caller names the list (`assert`), so an error reads
    /// `assert[2].value: …`; a bad threshold is named `{field}_threshold`.
    pub fn parse(
        list: &Value,
        threshold: Option<f64>,
        field: &str,
    ) -> Result<AssertionSet, AssertionError> {
        let err = |f: String, m: String| AssertionError {
            field: f,
            message: m,
        };
        let Value::Array(items) = list else {
            return Err(err(
                field.to_owned(),
                format!("expected a list of assertions, found {}", json_kind(list)),
            ));
        };
        if let Some(t) = threshold
            && !(t.is_finite() && (0.0..=1.0).contains(&t))
        {
            return Err(err(
                format!("{field}_threshold"),
                format!("must be a share between 0 and 1, found {t}"),
            ));
        }
        let assertions = items
            .iter()
            .enumerate()
            .map(|(i, item)| parse_one(item, &format!("{field}[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AssertionSet {
            assertions,
            threshold,
        })
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.assertions.is_empty()
    }

    /// Evaluates every assertion on `output`.
    pub fn evaluate(&self, output: &Output<'_>) -> AssertionReport {
        let results: Vec<AssertionResult> = self
            .assertions
            .iter()
            .enumerate()
            .map(|(index, a)| {
                let (status, reason) = match check(a, output) {
                    Decided::Error(why) => (Status::Error, why),
                    Decided::Held(held, why) => {
                        let pass = held != a.negate;
                        let why = if a.negate {
                            format!("{why} (negated)")
                        } else {
                            why
                        };
                        (if pass { Status::Passed } else { Status::Failed }, why)
                    }
                };
                AssertionResult {
                    index,
                    kind: a.config.kind.clone(),
                    status,
                    passed: status == Status::Passed,
                    reason,
                    weight: a.weight,
                    critical: a.critical,
                    value: a.config.value.as_ref().map(shown_value),
                }
            })
            .collect();
        let decided: f64 = results
            .iter()
            .filter(|r| r.status != Status::Error)
            .map(|r| r.weight)
            .sum();
        let won: f64 = results.iter().filter(|r| r.passed).map(|r| r.weight).sum();
        let score = (decided > 0.0).then(|| won / decided);
        let threshold = self.threshold.unwrap_or(1.0);
        let critical_failed = results
            .iter()
            .any(|r| r.critical && r.status == Status::Failed);
        // A tolerance so that three of three weights of 1/3 reach a threshold of 1.
        let passed = !critical_failed && score.is_some_and(|s| s + 1e-9 >= threshold);
        let errors = results.iter().filter(|r| r.status == Status::Error).count();
        AssertionReport {
            results,
            score,
            threshold,
            passed,
            critical_failed,
            errors,
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn parse_one(item: &Value, at: &str) -> Result<Assertion, AssertionError> {
    let err = |f: &str, m: String| AssertionError {
        field: if f.is_empty() {
            at.to_owned()
        } else {
            format!("{at}.{f}")
        },
        message: m,
    };
    let Value::Object(map) = item else {
        return Err(err(
            "",
            format!(
                "expected an assertion object ({{\"type\": …, \"value\": …}}), found {}",
                json_kind(item)
            ),
        ));
    };
    for key in map.keys() {
        if !FIELDS.contains(&key.as_str()) {
            let hint = if key == "threshold" {
                " (a threshold belongs to the list, not to one assertion)".to_owned()
            } else {
                crate::text::closest(key, FIELDS)
                    .map(|k| format!(" (did you mean `{k}`?)"))
                    .unwrap_or_default()
            };
            return Err(err(
                key,
                format!(
                    "unknown field{hint}; an assertion has {}",
                    FIELDS.map(|f| format!("`{f}`")).join(", ")
                ),
            ));
        }
    }
    let name = match map.get("type") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(err(
                "type",
                format!("expected a string, found {}", json_kind(other)),
            ));
        }
        None => return Err(err("type", "missing".to_owned())),
    };
    let (negate, base) = match name.strip_prefix("not-") {
        Some(rest) => (true, rest),
        None => (false, name),
    };
    let Some(kind) = Kind::ALL.into_iter().find(|k| k.as_str() == base) else {
        let names = Kind::type_names();
        let hint = crate::text::closest(name, names.iter().map(String::as_str))
            .map(|k| format!(" (did you mean `{k}`?)"))
            .unwrap_or_default();
        return Err(err(
            "type",
            format!(
                "unknown assertion type `{name}`{hint}; known: {}, each also as `not-…`",
                Kind::ALL.map(Kind::as_str).join(", ")
            ),
        ));
    };
    let weight = match map.get("weight") {
        None => 1.0,
        Some(v) => match v.as_f64() {
            Some(w) if w.is_finite() && w > 0.0 => w,
            _ => {
                return Err(err(
                    "weight",
                    format!("expected a positive number, found {v}"),
                ));
            }
        },
    };
    let critical = match map.get("critical") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(err(
                "critical",
                format!("expected true or false, found {v}"),
            ));
        }
    };
    let value = map.get("value");
    let check = parse_value(kind, value).map_err(|m| err("value", m))?;
    Ok(Assertion {
        kind,
        negate,
        weight,
        critical,
        config: AssertionConfig {
            kind: name.to_owned(),
            value: value.cloned(),
            weight: map.get("weight").and_then(Value::as_f64),
            critical,
        },
        check,
    })
}

fn parse_value(kind: Kind, value: Option<&Value>) -> Result<Check, String> {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err("must not be empty".to_owned()),
        Some(v) => Err(format!("expected a string, found {}", json_kind(v))),
        None => Err("missing (this type needs a string)".to_owned()),
    };
    let max = |v: Option<&Value>, unit: &str| match v {
        Some(n @ Value::Number(_)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Check::Max(x)),
            _ => Err(format!(
                "expected a non-negative number of {unit}, found {n}"
            )),
        },
        Some(v) => Err(format!(
            "expected a non-negative number of {unit}, found {}",
            json_kind(v)
        )),
        None => Err(format!("missing (the most {unit} allowed)")),
    };
    match kind {
        Kind::Equals | Kind::Contains | Kind::IContains | Kind::StartsWith => {
            text(value).map(Check::Text)
        }
        Kind::ContainsAny | Kind::ContainsAll | Kind::IContainsAny | Kind::IContainsAll => {
            let Some(Value::Array(items)) = value else {
                return Err(match value {
                    None => "missing (this type needs a list of strings)".to_owned(),
                    Some(v) => format!("expected a list of strings, found {}", json_kind(v)),
                });
            };
            if items.is_empty() {
                return Err("must list at least one string".to_owned());
            }
            items
                .iter()
                .enumerate()
                .map(|(i, v)| text(Some(v)).map_err(|m| format!("[{i}]: {m}")))
                .collect::<Result<Vec<_>, _>>()
                .map(Check::Texts)
        }
        Kind::Regex => {
            let pattern = text(value)?;
            Regex::new(&pattern)
                .map(Check::Pattern)
                .map_err(|e| format!("invalid regular expression: {e}"))
        }
        Kind::JsonSchema => match value {
            Some(schema @ (Value::Object(_) | Value::Bool(_))) => jsonschema::validator_for(schema)
                .map(|v| Check::Schema(Arc::new(v)))
                .map_err(|e| format!("invalid JSON Schema: {e}")),
            Some(v) => Err(format!(
                "expected a JSON Schema object, found {}",
                json_kind(v)
            )),
            None => Err("missing (this type needs a JSON Schema object)".to_owned()),
        },
        Kind::Length => parse_length(value),
        Kind::Latency => max(value, "milliseconds"),
        Kind::Cost => max(value, "US dollars"),
        Kind::IsJson | Kind::Refusal => match value {
            None => Ok(Check::None),
            Some(_) => Err(format!(
                "`{}` takes no value{}",
                kind.as_str(),
                if kind == Kind::IsJson {
                    " (use `json-schema` to check the JSON's shape)"
                } else {
                    ""
                }
            )),
        },
    }
}

fn parse_length(value: Option<&Value>) -> Result<Check, String> {
    let Some(Value::Object(map)) = value else {
        return Err(match value {
            None => "missing (expected {\"min\": …, \"max\": …} in characters)".to_owned(),
            Some(v) => format!(
                "expected {{\"min\": …, \"max\": …}} in characters, found {}",
                json_kind(v)
            ),
        });
    };
    let bound = |map: &Map<String, Value>, key: &str| -> Result<Option<usize>, String> {
        match map.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| format!("{key}: expected a whole number of characters, found {v}")),
        }
    };
    if let Some(k) = map.keys().find(|k| *k != "min" && *k != "max") {
        return Err(format!("{k}: unknown field; a length has `min` and `max`"));
    }
    let (min, max) = (bound(map, "min")?, bound(map, "max")?);
    match (min, max) {
        (None, None) => Err("name `min`, `max` or both".to_owned()),
        (Some(lo), Some(hi)) if lo > hi => Err(format!("min {lo} is above max {hi}")),
        _ => Ok(Check::Length { min, max }),
    }
}

/// An assertion's kind held or not (before `not-`), or could not be decided.
enum Decided {
    Held(bool, String),
    Error(String),
}

fn check(a: &Assertion, out: &Output<'_>) -> Decided {
    let text = out.text;
    let lower = || text.to_lowercase();
    let held = |b: bool, why: String| Decided::Held(b, why);
    match (&a.check, a.kind) {
        (Check::Text(v), Kind::Equals) => {
            let b = text.trim() == v;
            held(
                b,
                if b {
                    "equal".into()
                } else {
                    format!("not equal to {v:?}")
                },
            )
        }
        (Check::Text(v), Kind::Contains) => {
            let b = text.contains(v.as_str());
            held(b, found(b, v))
        }
        (Check::Text(v), Kind::IContains) => {
            let b = lower().contains(&v.to_lowercase());
            held(b, found(b, v))
        }
        (Check::Text(v), _) => {
            let b = text.trim_start().starts_with(v.as_str());
            held(
                b,
                if b {
                    format!("starts with {v:?}")
                } else {
                    format!("does not start with {v:?}")
                },
            )
        }
        (Check::Texts(vs), kind) => {
            let fold = matches!(kind, Kind::IContainsAny | Kind::IContainsAll);
            let hay = if fold { lower() } else { text.to_owned() };
            let has = |v: &String| {
                if fold {
                    hay.contains(&v.to_lowercase())
                } else {
                    hay.contains(v.as_str())
                }
            };
            if matches!(kind, Kind::ContainsAny | Kind::IContainsAny) {
                match vs.iter().find(|v| has(v)) {
                    Some(v) => held(true, format!("has {v:?}")),
                    None => held(false, format!("none of {vs:?}")),
                }
            } else {
                let missing: Vec<&String> = vs.iter().filter(|v| !has(v)).collect();
                if missing.is_empty() {
                    held(true, format!("has all {}", vs.len()))
                } else {
                    held(false, format!("missing {missing:?}"))
                }
            }
        }
        (Check::Pattern(re), _) => match re.find(text) {
            Some(m) => held(true, format!("matches at {:?}", m.as_str())),
            None => held(false, format!("no match for /{}/", re.as_str())),
        },
        (Check::Schema(validator), _) => match parse_json(text) {
            Err(e) => held(false, format!("not JSON: {e}")),
            Ok(v) => match validator.iter_errors(&v).next() {
                None => held(true, "valid against the schema".into()),
                Some(e) => held(false, format!("schema: {e} (at `{}`)", e.instance_path())),
            },
        },
        (Check::Length { min, max }, _) => {
            let n = text.chars().count();
            let short = min.is_some_and(|lo| n < lo);
            let long = max.is_some_and(|hi| n > hi);
            held(
                !short && !long,
                match (short, long) {
                    (true, _) => format!("{n} characters, under {}", min.unwrap_or_default()),
                    (_, true) => format!("{n} characters, over {}", max.unwrap_or_default()),
                    _ => format!("{n} characters"),
                },
            )
        }
        (Check::Max(limit), Kind::Latency) => match out.latency_ms {
            None => Decided::Error("latency was not measured".into()),
            Some(ms) => held(
                ms <= *limit,
                format!(
                    "took {ms:.0} ms, {} {limit} ms",
                    if ms <= *limit { "within" } else { "over" }
                ),
            ),
        },
        (Check::Max(limit), _) => match out.cost_usd {
            None => Decided::Error("cost was not measured".into()),
            Some(usd) => held(
                usd <= *limit,
                format!(
                    "cost ${usd:.6}, {} ${limit}",
                    if usd <= *limit { "within" } else { "over" }
                ),
            ),
        },
        (Check::None, Kind::IsJson) => match parse_json(text) {
            Ok(_) => held(true, "valid JSON".into()),
            Err(e) => held(false, format!("not JSON: {e}")),
        },
        (Check::None, _) => match refusal(text) {
            Some(phrase) => held(true, format!("refuses ({phrase:?})")),
            None => held(false, "does not refuse".into()),
        },
    }
}

fn found(b: bool, v: &str) -> String {
    if b {
        format!("has {v:?}")
    } else {
        format!("no {v:?}")
    }
}

/// Parses the reply as JSON: trimmed, and inside one ```` ```json ```` fence if it is fenced.
fn parse_json(text: &str) -> Result<Value, serde_json::Error> {
    let t = text.trim();
    let inner = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .unwrap_or(t);
    serde_json::from_str(inner.trim())
}

/// The refusal phrase the reply opens with, or `"(empty reply)"` for an empty reply.
pub fn refusal(text: &str) -> Option<&'static str> {
    if text.trim().is_empty() {
        return Some("(empty reply)");
    }
    let head: String = text
        .chars()
        .take(REFUSAL_WINDOW)
        .collect::<String>()
        .to_lowercase()
        .replace(['\u{2019}', '\u{2018}'], "'");
    REFUSAL_PHRASES.into_iter().find(|p| head.contains(p))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn set(list: &Value) -> AssertionSet {
        AssertionSet::parse(list, None, "assert").unwrap()
    }

    fn one(spec: &Value, text: &str) -> Status {
        set(&json!([spec])).evaluate(&Output::text(text)).results[0].status
    }

    fn bad(list: &Value) -> String {
        AssertionSet::parse(list, None, "assert")
            .unwrap_err()
            .to_string()
    }

    /// Every kind passes on one fixture and fails on another, and its `not-` form inverts.
    #[test]
    fn each_kind_passes_and_fails_on_a_pair_of_fixtures() {
        let measured = |ms: f64, usd: f64, spec: &Value| {
            set(&json!([spec]))
                .evaluate(&Output {
                    text: "x",
                    latency_ms: Some(ms),
                    cost_usd: Some(usd),
                })
                .results[0]
                .status
        };
        let cases: Vec<(Value, &str, &str)> = vec![
            (
                json!({"type": "equals", "value": "Paris"}),
                " Paris\n",
                "Paris, France",
            ),
            (
                json!({"type": "contains", "value": "Paris"}),
                "It is Paris.",
                "It is paris.",
            ),
            (
                json!({"type": "icontains", "value": "PARIS"}),
                "it is paris",
                "it is Lyon",
            ),
            (
                json!({"type": "contains-any", "value": ["Lyon", "Paris"]}),
                "Paris",
                "Nice",
            ),
            (
                json!({"type": "contains-all", "value": ["a1", "b2"]}),
                "b2 a1",
                "a1 only",
            ),
            (
                json!({"type": "icontains-any", "value": ["LYON", "paris"]}),
                "PARIS",
                "nice",
            ),
            (
                json!({"type": "icontains-all", "value": ["A1", "b2"]}),
                "a1 B2",
                "A1",
            ),
            (
                json!({"type": "regex", "value": "^\\d{3}-\\d{4}$"}),
                "555-1234",
                "555-12345",
            ),
            (
                json!({"type": "starts-with", "value": "Yes"}),
                "  Yes, it is.",
                "No. Yes.",
            ),
            (
                json!({"type": "is-json"}),
                "```json\n{\"a\": 1}\n```",
                "{a: 1}",
            ),
            (
                json!({"type": "json-schema", "value": {"type": "object", "required": ["city"],
                       "properties": {"city": {"type": "string"}}}}),
                r#"{"city": "Paris"}"#,
                r#"{"city": 7}"#,
            ),
            (
                json!({"type": "length", "value": {"min": 2, "max": 5}}),
                "héllo",
                "héllo!",
            ),
            (
                json!({"type": "refusal"}),
                "I’m sorry, but I can’t help with that.",
                "Sure: 42.",
            ),
        ];
        for (spec, pass, fail) in cases {
            assert_eq!(one(&spec, pass), Status::Passed, "{spec} on {pass:?}");
            assert_eq!(one(&spec, fail), Status::Failed, "{spec} on {fail:?}");
            let mut not = spec.clone();
            not["type"] = json!(format!("not-{}", spec["type"].as_str().unwrap()));
            assert_eq!(one(&not, pass), Status::Failed, "{not} on {pass:?}");
            assert_eq!(one(&not, fail), Status::Passed, "{spec} on {fail:?}");
        }
        let latency = json!({"type": "latency", "value": 1000});
        assert_eq!(measured(999.0, 0.0, &latency), Status::Passed);
        assert_eq!(measured(1001.0, 0.0, &latency), Status::Failed);
        let cost = json!({"type": "not-cost", "value": 0.01});
        assert_eq!(measured(0.0, 0.02, &cost), Status::Passed);
        assert_eq!(measured(0.0, 0.005, &cost), Status::Failed);
    }

    #[test]
    fn unmeasured_latency_and_cost_are_errors_left_out_of_the_score() {
        let s = set(&json!([
            {"type": "latency", "value": 10, "critical": true},
            {"type": "not-cost", "value": 1},
            {"type": "contains", "value": "ok"}
        ]));
        let r = s.evaluate(&Output::text("ok"));
        assert_eq!(r.results[0].status, Status::Error);
        assert_eq!(r.results[0].reason, "latency was not measured");
        assert_eq!(r.results[1].status, Status::Error);
        assert_eq!((r.errors, r.score, r.passed), (2, Some(1.0), true));
        assert!(!r.critical_failed, "an error is not a critical failure");
        // Nothing decided: no score, and not a pass.
        let r = set(&json!([{"type": "cost", "value": 1}])).evaluate(&Output::text("x"));
        assert_eq!((r.score, r.passed), (None, false));
    }

    #[test]
    fn weights_and_threshold_decide_the_set() {
        let list = json!([
            {"type": "contains", "value": "a", "weight": 3},
            {"type": "contains", "value": "b"}
        ]);
        let all = set(&list).evaluate(&Output::text("a"));
        assert_eq!((all.score, all.passed), (Some(0.75), false));
        let s = AssertionSet::parse(&list, Some(0.75), "assert").unwrap();
        let r = s.evaluate(&Output::text("a"));
        assert_eq!((r.score, r.passed, r.threshold), (Some(0.75), true, 0.75));
        assert!(!s.evaluate(&Output::text("b")).passed, "0.25 < 0.75");
    }

    #[test]
    fn a_critical_failure_fails_the_set_whatever_the_score() {
        let list = json!([
            {"type": "contains", "value": "a", "weight": 9},
            {"type": "not-icontains", "value": "password", "critical": true}
        ]);
        let s = AssertionSet::parse(&list, Some(0.5), "assert").unwrap();
        let r = s.evaluate(&Output::text("a: the Password is x"));
        assert_eq!(r.score, Some(0.9));
        assert!(r.critical_failed && !r.passed);
        assert!(s.evaluate(&Output::text("a")).passed);
    }

    #[test]
    fn bad_specs_name_the_field() {
        let cases = [
            (
                json!({}),
                "assert: expected a list of assertions, found an object",
            ),
            (json!([1]), "assert[0]: expected an assertion object"),
            (json!([{"value": "x"}]), "assert[0].type: missing"),
            (
                json!([{"type": "contains", "value": "a"}, {"type": "contain", "value": "a"}]),
                "assert[1].type: unknown assertion type `contain` (did you mean `contains`?)",
            ),
            (
                json!([{"type": "regex", "value": "("}]),
                "assert[0].value: invalid regular expression",
            ),
            (json!([{"type": "contains"}]), "assert[0].value: missing"),
            (
                json!([{"type": "contains", "value": 3}]),
                "assert[0].value: expected a string, found a number",
            ),
            (
                json!([{"type": "contains-all", "value": []}]),
                "assert[0].value: must list at least one",
            ),
            (
                json!([{"type": "contains-any", "value": ["a", 2]}]),
                "assert[0].value: [1]: expected a string",
            ),
            (
                json!([{"type": "json-schema", "value": {"type": 7}}]),
                "assert[0].value: invalid JSON Schema",
            ),
            (
                json!([{"type": "length", "value": {"min": 5, "max": 2}}]),
                "assert[0].value: min 5 is above max 2",
            ),
            (
                json!([{"type": "length", "value": {"mx": 2}}]),
                "assert[0].value: mx: unknown field",
            ),
            (
                json!([{"type": "latency", "value": "fast"}]),
                "assert[0].value: expected a non-negative number of milliseconds",
            ),
            (
                json!([{"type": "is-json", "value": {}}]),
                "assert[0].value: `is-json` takes no value",
            ),
            (
                json!([{"type": "equals", "value": "a", "weight": 0}]),
                "assert[0].weight: expected a positive number",
            ),
            (
                json!([{"type": "equals", "value": "a", "critical": "yes"}]),
                "assert[0].critical: expected true or false",
            ),
            (
                json!([{"type": "equals", "value": "a", "wieght": 2}]),
                "assert[0].wieght: unknown field (did you mean `weight`?)",
            ),
            (
                json!([{"type": "equals", "value": "a", "threshold": 0.5}]),
                "assert[0].threshold: unknown field (a threshold belongs to the list",
            ),
        ];
        for (list, want) in cases {
            let got = bad(&list);
            assert!(got.starts_with(want), "{list}: {got}");
        }
        let e = AssertionSet::parse(&json!([]), Some(1.5), "assert").unwrap_err();
        assert_eq!(
            e.to_string(),
            "assert_threshold: must be a share between 0 and 1, found 1.5"
        );
    }

    #[test]
    fn the_schema_lists_every_type_and_its_not_form() {
        let schema = serde_json::to_value(assertion_schema()).unwrap();
        let names = schema["properties"]["type"]["enum"].as_array().unwrap();
        assert_eq!(names.len(), 30);
        assert!(names.contains(&json!("not-json-schema")));
        assert_eq!(schema["additionalProperties"], json!(false));
    }

    #[test]
    fn refusal_reads_only_the_opening() {
        assert_eq!(refusal("I cannot share that."), Some("i cannot"));
        assert_eq!(refusal("   "), Some("(empty reply)"));
        let late = format!(
            "{} I cannot stress this enough.",
            "Paris is the capital. ".repeat(20)
        );
        assert_eq!(refusal(&late), None);
    }
}
