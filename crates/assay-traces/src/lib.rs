//! Production traces checked against the project: what `assay traces check` and `assay
//! serve`'s `/v1/traces` do.
//!
//! [`read::read_paths`] reads OTLP JSON exports and JSON Lines of spans into [`RawSpan`]s
//! (every malformed part a [`TraceProblem`] with its position, skipped); [`extract`] keeps the
//! retrieval spans (query, documents, user state, audience); [`check::check_spans`] runs each
//! query through the project's pipeline, as `assay retrieve` does, and compares the selection
//! with what production returned; [`drafts`] turns chosen spans into draft semantic cases.
//!
//! ```
//! use assay_traces::{AttrValue, RawSpan, extract};
//! use assay_core::tracecheck::SpanPosition;
//! let span = RawSpan {
//!     trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
//!     span_id: "b7ad6b7169203331".into(),
//!     parent_span_id: None,
//!     name: "retrieve".into(),
//!     start_time_unix_nano: None,
//!     service_name: None,
//!     position: SpanPosition { file: "t.jsonl".into(), line: Some(1), path: String::new() },
//!     attributes: vec![
//!         ("gen_ai.operation.name".into(), AttrValue::Str("retrieval".into())),
//!         ("gen_ai.retrieval.query.text".into(), AttrValue::Str("hello".into())),
//!         ("gen_ai.retrieval.documents".into(), AttrValue::Str(r#"[{"id": "gray_rock", "score": 0.8}]"#.into())),
//!     ],
//! };
//! let retrieval = extract(&span).unwrap().unwrap();
//! assert_eq!(retrieval.documents[0].id, "gray_rock");
//! ```
#![deny(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod check;
pub mod drafts;
pub mod read;

pub use assay_project::HarnessError;

use std::collections::BTreeMap;

use assay_core::UserState;
use assay_core::tracecheck::{FlatSpan, ProductionDocument, SpanPosition, TraceProblem};
use serde_json::Value;

/// `gen_ai.operation.name`: `retrieval` marks a retrieval span.
pub const OPERATION: &str = "gen_ai.operation.name";
/// The query.
pub const QUERY: &str = "gen_ai.retrieval.query.text";
/// The documents returned, in rank order.
pub const DOCUMENTS: &str = "gen_ai.retrieval.documents";
/// The user state (a JSON object), optional.
pub const USER_STATE: &str = "assay.user_state";
/// The audience production served, optional.
pub const AUDIENCE: &str = "assay.audience";
/// OpenInference's query, read when [`QUERY`] is absent.
pub const OI_INPUT: &str = "input.value";
/// OpenInference's span kind: `RETRIEVER` marks a retrieval span too.
pub const OI_KIND: &str = "openinference.span.kind";

/// An attribute's value, as OTLP has them.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// `stringValue`.
    Str(String),
    /// `intValue`.
    Int(i64),
    /// `doubleValue`.
    Double(f64),
    /// `boolValue`.
    Bool(bool),
    /// `arrayValue`.
    Array(Vec<AttrValue>),
    /// `kvlistValue`.
    KvList(Vec<(String, AttrValue)>),
    /// `bytesValue` (as sent), or an empty value.
    Other(String),
    /// A value that could not be read, and why.
    Invalid(String),
}

impl AttrValue {
    /// The value as JSON (a key-value list becomes an object).
    pub fn to_json(&self) -> Value {
        match self {
            AttrValue::Str(s) | AttrValue::Other(s) => Value::String(s.clone()),
            AttrValue::Int(i) => Value::from(*i),
            AttrValue::Double(d) => {
                serde_json::Number::from_f64(*d).map_or(Value::Null, Value::Number)
            }
            AttrValue::Bool(b) => Value::Bool(*b),
            AttrValue::Array(a) => Value::Array(a.iter().map(AttrValue::to_json).collect()),
            AttrValue::KvList(kv) => {
                Value::Object(kv.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            AttrValue::Invalid(_) => Value::Null,
        }
    }

    /// A JSON value as an attribute (an object becomes a key-value list).
    pub fn from_json(value: &Value) -> AttrValue {
        match value {
            Value::String(s) => AttrValue::Str(s.clone()),
            Value::Bool(b) => AttrValue::Bool(*b),
            Value::Number(n) => n
                .as_i64()
                .map(AttrValue::Int)
                .or_else(|| n.as_f64().map(AttrValue::Double))
                .unwrap_or_else(|| AttrValue::Invalid(format!("number {n} out of range"))),
            Value::Array(a) => AttrValue::Array(a.iter().map(AttrValue::from_json).collect()),
            Value::Object(o) => AttrValue::KvList(
                o.iter()
                    .map(|(k, v)| (k.clone(), AttrValue::from_json(v)))
                    .collect(),
            ),
            Value::Null => AttrValue::Other(String::new()),
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A span as read, before it is known to be a retrieval span.
#[derive(Debug, Clone, PartialEq)]
pub struct RawSpan {
    /// Hex.
    pub trace_id: String,
    /// Hex.
    pub span_id: String,
    /// Hex, when the span has a parent.
    pub parent_span_id: Option<String>,
    /// The span's name.
    pub name: String,
    /// When it started (ns since the epoch).
    pub start_time_unix_nano: Option<u64>,
    /// The resource's `service.name`.
    pub service_name: Option<String>,
    /// Where it was read.
    pub position: SpanPosition,
    /// Its attributes, in order.
    pub attributes: Vec<(String, AttrValue)>,
}

impl RawSpan {
    fn attribute(&self, key: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Whether it is a retrieval span: `gen_ai.operation.name` = `retrieval`, or OpenInference's
    /// `openinference.span.kind` = `RETRIEVER`.
    pub fn is_retrieval(&self) -> bool {
        self.attribute(OPERATION).and_then(AttrValue::as_str) == Some("retrieval")
            || self
                .attribute(OI_KIND)
                .and_then(AttrValue::as_str)
                .is_some_and(|k| k.eq_ignore_ascii_case("retriever"))
    }

    /// The span in assay's flat form, `received_at` set when given.
    pub fn to_flat(&self, received_at: Option<String>) -> FlatSpan {
        FlatSpan {
            trace_id: self.trace_id.clone(),
            span_id: self.span_id.clone(),
            parent_span_id: self.parent_span_id.clone(),
            name: self.name.clone(),
            start_time_unix_nano: self.start_time_unix_nano,
            service_name: self.service_name.clone(),
            received_at,
            attributes: self
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect(),
        }
    }
}

/// A retrieval span: a query and what production returned for it.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrievalSpan {
    /// The trace id.
    pub trace_id: String,
    /// The span id.
    pub span_id: String,
    /// The span's name.
    pub name: String,
    /// Where it was read.
    pub position: SpanPosition,
    /// The query.
    pub query: String,
    /// The documents, in rank order.
    pub documents: Vec<ProductionDocument>,
    /// The user state, when recorded.
    pub user_state: Option<UserState>,
    /// The audience, when recorded.
    pub audience: Option<String>,
}

/// The retrieval span in `span`: `Ok(None)` when it is not one, a problem naming the attribute
/// when one of its attributes cannot be read.
pub fn extract(span: &RawSpan) -> Result<Option<RetrievalSpan>, TraceProblem> {
    if !span.is_retrieval() {
        return Ok(None);
    }
    let problem = |attribute: &str, message: String| TraceProblem {
        position: span.position.clone(),
        attribute: Some(attribute.to_owned()),
        message,
    };
    let (key, query) = match (span.attribute(QUERY), span.attribute(OI_INPUT)) {
        (Some(v), _) => (QUERY, v),
        (None, Some(v)) => (OI_INPUT, v),
        (None, None) => {
            return Err(problem(
                QUERY,
                format!(
                    "a retrieval span needs its query (`{QUERY}`, or OpenInference's `{OI_INPUT}`)"
                ),
            ));
        }
    };
    let query = match query {
        AttrValue::Str(s) if !s.trim().is_empty() => s.clone(),
        AttrValue::Str(_) => return Err(problem(key, "the query is empty".into())),
        other => {
            return Err(problem(
                key,
                format!("expected a string, got {}", kind_of(other)),
            ));
        }
    };
    let documents = match span.attribute(DOCUMENTS) {
        Some(v) => documents(v).map_err(|m| problem(DOCUMENTS, m))?,
        None => openinference_documents(span).map_err(|(a, m)| problem(&a, m))?,
    };
    let user_state = match span.attribute(USER_STATE) {
        None => None,
        Some(AttrValue::Str(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(map)) => Some(map),
            Ok(_) => {
                return Err(problem(
                    USER_STATE,
                    "expected a JSON object, e.g. {\"days_since_last\": 9}".into(),
                ));
            }
            Err(e) => return Err(problem(USER_STATE, format!("not valid JSON: {e}"))),
        },
        Some(v @ AttrValue::KvList(_)) => match v.to_json() {
            Value::Object(map) => Some(map),
            _ => None,
        },
        Some(other) => {
            return Err(problem(
                USER_STATE,
                format!("expected a JSON object in a string, got {}", kind_of(other)),
            ));
        }
    };
    let audience = match span.attribute(AUDIENCE) {
        None => None,
        Some(AttrValue::Str(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Some(other) => {
            return Err(problem(
                AUDIENCE,
                format!("expected an audience name, got {}", kind_of(other)),
            ));
        }
    };
    Ok(Some(RetrievalSpan {
        trace_id: span.trace_id.clone(),
        span_id: span.span_id.clone(),
        name: span.name.clone(),
        position: span.position.clone(),
        query,
        documents,
        user_state,
        audience,
    }))
}

fn kind_of(v: &AttrValue) -> &'static str {
    match v {
        AttrValue::Str(_) => "a string",
        AttrValue::Int(_) => "an integer",
        AttrValue::Double(_) => "a number",
        AttrValue::Bool(_) => "a boolean",
        AttrValue::Array(_) => "an array",
        AttrValue::KvList(_) => "a key-value list",
        AttrValue::Other(_) => "bytes or an empty value",
        AttrValue::Invalid(_) => "a value that cannot be read",
    }
}

/// `gen_ai.retrieval.documents`: a JSON string `[{"id": …, "score": …}, …]`, or an array of
/// key-value lists (or of JSON object strings) with `id` and `score`.
fn documents(value: &AttrValue) -> Result<Vec<ProductionDocument>, String> {
    let items: Vec<Value> = match value {
        AttrValue::Str(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Array(items)) => items,
            Ok(_) => return Err("expected a JSON array of {\"id\", \"score\"} objects".into()),
            Err(e) => return Err(format!("not valid JSON: {e}")),
        },
        AttrValue::Array(items) => items
            .iter()
            .map(|item| match item {
                AttrValue::Str(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
                other => other.to_json(),
            })
            .collect(),
        AttrValue::Invalid(why) => return Err(why.clone()),
        other => {
            return Err(format!(
                "expected a JSON array in a string, or an array of key-value lists; got {}",
                kind_of(other)
            ));
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| document(item).map_err(|m| format!("[{i}]: {m}")))
        .collect()
}

fn document(item: &Value) -> Result<ProductionDocument, String> {
    let Value::Object(map) = item else {
        return Err("expected an object with `id` and, optionally, `score`".into());
    };
    let id = match map.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err("`id`: expected a non-empty string".into()),
        None => return Err("`id`: missing".into()),
    };
    let score = match map.get("score") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => Some(
            s.trim()
                .parse::<f64>()
                .map_err(|_| format!("`score`: expected a number, got `{s}`"))?,
        ),
        Some(_) => return Err("`score`: expected a number".into()),
    };
    Ok(ProductionDocument { id, score })
}

/// OpenInference's flat attributes `retrieval.documents.{i}.document.id` and `.score`, in the
/// order of `i`; no document attributes at all: production returned nothing.
fn openinference_documents(span: &RawSpan) -> Result<Vec<ProductionDocument>, (String, String)> {
    let mut by_index: BTreeMap<usize, (Option<String>, Option<f64>)> = BTreeMap::new();
    for (key, value) in &span.attributes {
        let Some(rest) = key.strip_prefix("retrieval.documents.") else {
            continue;
        };
        let Some((index, field)) = rest.split_once('.') else {
            continue;
        };
        let Ok(index) = index.parse::<usize>() else {
            return Err((
                key.clone(),
                "expected a document index after `retrieval.documents.`".into(),
            ));
        };
        let entry = by_index.entry(index).or_default();
        match (field, value) {
            ("document.id", AttrValue::Str(s)) => entry.0 = Some(s.clone()),
            ("document.id", AttrValue::Int(i)) => entry.0 = Some(i.to_string()),
            ("document.id", other) => {
                return Err((
                    key.clone(),
                    format!("expected a string, got {}", kind_of(other)),
                ));
            }
            ("document.score", AttrValue::Double(d)) => entry.1 = Some(*d),
            #[allow(clippy::cast_precision_loss)]
            ("document.score", AttrValue::Int(i)) => entry.1 = Some(*i as f64),
            ("document.score", other) => {
                return Err((
                    key.clone(),
                    format!("expected a number, got {}", kind_of(other)),
                ));
            }
            _ => {}
        }
    }
    by_index
        .into_iter()
        .map(|(i, (id, score))| match id {
            Some(id) => Ok(ProductionDocument { id, score }),
            None => Err((
                format!("retrieval.documents.{i}.document.id"),
                "missing: the document has other attributes but no id".into(),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(attributes: Vec<(&str, AttrValue)>) -> RawSpan {
        RawSpan {
            trace_id: "t".into(),
            span_id: "s".into(),
            parent_span_id: None,
            name: "retrieve".into(),
            start_time_unix_nano: None,
            service_name: None,
            position: SpanPosition {
                file: "f".into(),
                line: None,
                path: "spans[0]".into(),
            },
            attributes: attributes
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        }
    }

    fn s(text: &str) -> AttrValue {
        AttrValue::Str(text.into())
    }

    #[test]
    fn documents_as_a_json_string_an_array_or_openinference() {
        let json = span(vec![
            (OPERATION, s("retrieval")),
            (QUERY, s("q")),
            (DOCUMENTS, s(r#"[{"id": "a", "score": 0.5}, {"id": "b"}]"#)),
        ]);
        let r = extract(&json).unwrap().unwrap();
        assert_eq!(r.documents.len(), 2);
        assert_eq!(r.documents[0].score, Some(0.5));
        let array = span(vec![
            (OPERATION, s("retrieval")),
            (QUERY, s("q")),
            (
                DOCUMENTS,
                AttrValue::Array(vec![AttrValue::KvList(vec![
                    ("id".into(), s("a")),
                    ("score".into(), AttrValue::Double(0.25)),
                ])]),
            ),
        ]);
        assert_eq!(extract(&array).unwrap().unwrap().documents[0].id, "a");
        let oi = span(vec![
            (OI_KIND, s("RETRIEVER")),
            (OI_INPUT, s("q")),
            ("retrieval.documents.1.document.id", s("b")),
            ("retrieval.documents.0.document.id", s("a")),
            (
                "retrieval.documents.0.document.score",
                AttrValue::Double(0.9),
            ),
        ]);
        let r = extract(&oi).unwrap().unwrap();
        assert_eq!(
            r.documents
                .iter()
                .map(|d| d.id.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn problems_name_the_attribute() {
        let bad = span(vec![
            (OPERATION, s("retrieval")),
            (QUERY, s("q")),
            (DOCUMENTS, s("[{\"score\": 1}]")),
        ]);
        let p = extract(&bad).unwrap_err();
        assert_eq!(p.attribute.as_deref(), Some(DOCUMENTS));
        assert_eq!(p.message, "[0]: `id`: missing");
        let no_query = span(vec![(OPERATION, s("retrieval"))]);
        assert_eq!(
            extract(&no_query).unwrap_err().attribute.as_deref(),
            Some(QUERY)
        );
        let state = span(vec![
            (OPERATION, s("retrieval")),
            (QUERY, s("q")),
            (USER_STATE, s("[1]")),
        ]);
        assert_eq!(
            extract(&state).unwrap_err().attribute.as_deref(),
            Some(USER_STATE)
        );
        let other = span(vec![(OPERATION, s("chat"))]);
        assert_eq!(extract(&other).unwrap(), None);
    }
}
