//! Reading trace files: OTLP JSON exports (`ExportTraceServiceRequest`'s JSON mapping) and
//! JSON Lines whose every line is either a whole export or one span (OTLP's span object, or
//! assay's flat [`FlatSpan`]). A folder is read recursively for `*.json` and `*.jsonl`, in name
//! order. What cannot be read is a [`TraceProblem`] with its position, and is skipped.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use assay_core::tracecheck::{FlatSpan, SpanPosition, TraceProblem};
use serde_json::Value;

use super::{AttrValue, RawSpan, RetrievalSpan, extract};
use crate::HarnessError;

/// What a file, a request or a set of files held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadOutcome {
    /// The retrieval spans, in the order read.
    pub spans: Vec<RetrievalSpan>,
    /// Spans read that are not retrieval spans.
    pub other_spans: usize,
    /// What was skipped, and where.
    pub problems: Vec<TraceProblem>,
    /// The files read, as named.
    pub files: Vec<String>,
    /// Files of which nothing could be read as a span, though they held something.
    pub unreadable_files: Vec<String>,
}

impl ReadOutcome {
    /// Adds spans: the retrieval ones extracted, the others counted, the bad ones a problem.
    pub fn add(&mut self, raw: Vec<RawSpan>) {
        for span in raw {
            match extract(&span) {
                Ok(Some(r)) => self.spans.push(r),
                Ok(None) => self.other_spans += 1,
                Err(p) => self.problems.push(p),
            }
        }
    }

    /// Why nothing can be checked, when nothing can: a file none of whose content is a span
    /// (bad input), or no retrieval span anywhere. The problems are listed with their
    /// positions.
    pub fn refusal(&self) -> Option<String> {
        let list = || {
            self.problems
                .iter()
                .take(20)
                .fold(String::new(), |mut out, p| {
                    let _ = write!(
                        out,
                        "
  {p}"
                    );
                    out
                })
        };
        if let Some(file) = self.unreadable_files.first() {
            return Some(format!("{file}: no span could be read from it{}", list()));
        }
        if self.spans.is_empty() {
            let looked = if self.other_spans > 0 {
                format!(
                    "{} spans read, none a retrieval span (`{}` = \"retrieval\")",
                    self.other_spans,
                    super::OPERATION
                )
            } else {
                "no span read".to_owned()
            };
            return Some(format!(
                "nothing to check in {}: {looked}{}",
                self.files.join(", "),
                list()
            ));
        }
        None
    }
}

/// Reads every path: a file, or a folder read recursively for `*.json` and `*.jsonl`. A path
/// that does not exist or cannot be read, or a folder with no such file, is bad input.
pub fn read_paths(paths: &[PathBuf]) -> Result<ReadOutcome, HarnessError> {
    let mut out = ReadOutcome::default();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|e| HarnessError::io(path, &e))?;
        let files = if meta.is_dir() {
            let mut files = Vec::new();
            collect(path, &mut files)?;
            if files.is_empty() {
                return Err(HarnessError::Usage(format!(
                    "{}: no .json or .jsonl file in this folder",
                    path.display()
                )));
            }
            files
        } else {
            vec![path.clone()]
        };
        for file in files {
            let text = std::fs::read_to_string(&file).map_err(|e| HarnessError::io(&file, &e))?;
            let name = file.display().to_string();
            let found = |o: &ReadOutcome| {
                o.spans.len()
                    + o.other_spans
                    + o.problems.iter().filter(|p| p.attribute.is_some()).count()
            };
            let before = found(&out);
            let jsonl = file.extension().is_some_and(|e| e == "jsonl");
            read_text(&name, &text, jsonl, &mut out);
            out.files.push(name.clone());
            if !text.trim().is_empty() && found(&out) == before {
                out.unreadable_files.push(name);
            }
        }
    }
    Ok(out)
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), HarnessError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| HarnessError::io(dir, &e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, files)?;
        } else if path
            .extension()
            .is_some_and(|e| e == "json" || e == "jsonl")
        {
            files.push(path);
        }
    }
    Ok(())
}

/// Reads a file's text (`jsonl`: one JSON value a line) into `out`.
pub fn read_text(file: &str, text: &str, jsonl: bool, out: &mut ReadOutcome) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if jsonl {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = SpanPosition {
                file: file.to_owned(),
                line: Some(i + 1),
                path: String::new(),
            };
            match serde_json::from_str::<Value>(line) {
                Ok(value) => {
                    let spans = spans_of(&value, &at, &mut out.problems);
                    out.add(spans);
                }
                Err(e) => out.problems.push(TraceProblem {
                    position: at,
                    attribute: None,
                    message: format!("not valid JSON at column {}: {}", e.column(), bare(&e)),
                }),
            }
        }
    } else {
        let at = SpanPosition {
            file: file.to_owned(),
            line: None,
            path: String::new(),
        };
        match serde_json::from_str::<Value>(text) {
            Ok(value) => {
                let spans = spans_of(&value, &at, &mut out.problems);
                out.add(spans);
            }
            Err(e) => out.problems.push(TraceProblem {
                position: SpanPosition {
                    line: Some(e.line()),
                    ..at
                },
                attribute: None,
                message: format!("not valid JSON: {e}"),
            }),
        }
    }
}

/// serde_json's message without its ` at line 1 column 2` (the position is given apart).
fn bare(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

/// The spans in one JSON value: an export (`resourceSpans`), an OTLP span object, or a flat
/// span.
pub fn spans_of(
    value: &Value,
    at: &SpanPosition,
    problems: &mut Vec<TraceProblem>,
) -> Vec<RawSpan> {
    let problem = |path: String, message: String| TraceProblem {
        position: SpanPosition { path, ..at.clone() },
        attribute: None,
        message,
    };
    let Value::Object(map) = value else {
        problems.push(problem(
            String::new(),
            "expected a JSON object: an OTLP export ({\"resourceSpans\": …}) or one span".into(),
        ));
        return Vec::new();
    };
    if map.contains_key("resourceSpans") {
        return export_spans(value, at, problems);
    }
    let otlp = map.contains_key("traceId")
        || map.contains_key("spanId")
        || map.get("attributes").is_some_and(Value::is_array);
    if otlp {
        return otlp_span(value, &[], at.clone(), problems)
            .into_iter()
            .collect();
    }
    match serde_path_to_error::deserialize::<_, FlatSpan>(value) {
        Ok(flat) => vec![RawSpan {
            trace_id: flat.trace_id,
            span_id: flat.span_id,
            parent_span_id: flat.parent_span_id,
            name: flat.name,
            start_time_unix_nano: flat.start_time_unix_nano,
            service_name: flat.service_name,
            position: at.clone(),
            attributes: flat
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), AttrValue::from_json(v)))
                .collect(),
        }],
        Err(e) => {
            let field = e.path().to_string();
            problems.push(problem(
                String::new(),
                assay_kb::datafile::with_field(&field, &e.into_inner().to_string()),
            ));
            Vec::new()
        }
    }
}

/// The spans of an `ExportTraceServiceRequest` in its JSON mapping.
fn export_spans(
    value: &Value,
    at: &SpanPosition,
    problems: &mut Vec<TraceProblem>,
) -> Vec<RawSpan> {
    let mut out = Vec::new();
    let bad = |problems: &mut Vec<TraceProblem>, path: String, message: &str| {
        problems.push(TraceProblem {
            position: SpanPosition { path, ..at.clone() },
            attribute: None,
            message: message.to_owned(),
        });
    };
    let Some(resources) = value["resourceSpans"].as_array() else {
        bad(problems, "resourceSpans".into(), "expected an array");
        return out;
    };
    for (r, resource) in resources.iter().enumerate() {
        let rpath = format!("resourceSpans[{r}]");
        let resource_attrs = match resource.pointer("/resource/attributes") {
            Some(Value::Array(a)) => {
                attributes(a, &format!("{rpath}.resource.attributes"), &mut |p, m| {
                    bad(problems, p, m);
                })
            }
            _ => Vec::new(),
        };
        let scopes = match resource
            .get("scopeSpans")
            .or_else(|| resource.get("instrumentationLibrarySpans"))
        {
            Some(Value::Array(s)) => s,
            None => continue,
            Some(_) => {
                bad(problems, format!("{rpath}.scopeSpans"), "expected an array");
                continue;
            }
        };
        for (s, scope) in scopes.iter().enumerate() {
            let spath = format!("{rpath}.scopeSpans[{s}]");
            let spans = match scope.get("spans") {
                Some(Value::Array(s)) => s,
                None => continue,
                Some(_) => {
                    bad(problems, format!("{spath}.spans"), "expected an array");
                    continue;
                }
            };
            for (i, span) in spans.iter().enumerate() {
                let position = SpanPosition {
                    path: format!("{spath}.spans[{i}]"),
                    ..at.clone()
                };
                if let Some(span) = otlp_span(span, &resource_attrs, position, problems) {
                    out.push(span);
                }
            }
        }
    }
    out
}

/// One OTLP span object; a problem when it has no ids.
fn otlp_span(
    value: &Value,
    resource: &[(String, AttrValue)],
    position: SpanPosition,
    problems: &mut Vec<TraceProblem>,
) -> Option<RawSpan> {
    let mut pending = Vec::new();
    let mut bad = |path: String, message: &str| pending.push((path, message.to_owned()));
    let id = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_ascii_lowercase)
    };
    let ids = (id("traceId"), id("spanId"));
    let attrs = match value.get("attributes") {
        Some(Value::Array(a)) => attributes(a, &format!("{}.attributes", position.path), &mut bad),
        None => Vec::new(),
        Some(_) => {
            bad(format!("{}.attributes", position.path), "expected an array");
            Vec::new()
        }
    };
    for (path, message) in pending {
        problems.push(TraceProblem {
            position: SpanPosition {
                path,
                ..position.clone()
            },
            attribute: None,
            message,
        });
    }
    let (Some(trace_id), Some(span_id)) = ids else {
        let missing = match ids {
            (None, None) => "`traceId` and `spanId`",
            (None, _) => "`traceId`",
            _ => "`spanId`",
        };
        problems.push(TraceProblem {
            position,
            attribute: None,
            message: format!("a span without {missing}: skipped"),
        });
        return None;
    };
    for (key, id) in [("traceId", &trace_id), ("spanId", &span_id)] {
        if !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            problems.push(TraceProblem {
                position,
                attribute: None,
                message: format!("`{key}`: expected hex digits, got `{id}`: skipped"),
            });
            return None;
        }
    }
    let service_name = resource
        .iter()
        .find(|(k, _)| k == "service.name")
        .and_then(|(_, v)| v.as_str().map(str::to_owned));
    Some(RawSpan {
        trace_id,
        span_id,
        parent_span_id: id("parentSpanId"),
        name: value
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        start_time_unix_nano: value.get("startTimeUnixNano").and_then(|v| match v {
            Value::String(s) => s.parse().ok(),
            other => other.as_u64(),
        }),
        service_name,
        position,
        attributes: attrs,
    })
}

/// OTLP JSON attributes: `[{"key": …, "value": {"stringValue": …}}, …]`.
fn attributes(
    list: &[Value],
    path: &str,
    bad: &mut dyn FnMut(String, &str),
) -> Vec<(String, AttrValue)> {
    let mut out = Vec::new();
    for (i, kv) in list.iter().enumerate() {
        let Some(key) = kv.get("key").and_then(Value::as_str) else {
            bad(
                format!("{path}[{i}]"),
                "an attribute without `key`: skipped",
            );
            continue;
        };
        let value = kv
            .get("value")
            .map_or(AttrValue::Other(String::new()), any_value);
        out.push((key.to_owned(), value));
    }
    out
}

/// An OTLP `AnyValue` in JSON.
fn any_value(v: &Value) -> AttrValue {
    let Value::Object(map) = v else {
        return AttrValue::Invalid("expected an AnyValue object ({\"stringValue\": …})".into());
    };
    if let Some(s) = map.get("stringValue") {
        return s.as_str().map_or_else(
            || AttrValue::Invalid("`stringValue`: expected a string".into()),
            |s| AttrValue::Str(s.to_owned()),
        );
    }
    if let Some(i) = map.get("intValue") {
        let parsed = match i {
            Value::String(s) => s.trim().parse::<i64>().ok(),
            other => other.as_i64(),
        };
        return parsed.map_or_else(
            || AttrValue::Invalid(format!("`intValue`: expected an integer, got {i}")),
            AttrValue::Int,
        );
    }
    if let Some(d) = map.get("doubleValue") {
        let parsed = match d {
            Value::String(s) => s.trim().parse::<f64>().ok(),
            other => other.as_f64(),
        };
        return parsed.map_or_else(
            || AttrValue::Invalid(format!("`doubleValue`: expected a number, got {d}")),
            AttrValue::Double,
        );
    }
    if let Some(b) = map.get("boolValue") {
        return b.as_bool().map_or_else(
            || AttrValue::Invalid("`boolValue`: expected true or false".into()),
            AttrValue::Bool,
        );
    }
    if let Some(a) = map.get("arrayValue") {
        return match a.get("values") {
            Some(Value::Array(values)) => AttrValue::Array(values.iter().map(any_value).collect()),
            None => AttrValue::Array(Vec::new()),
            Some(_) => AttrValue::Invalid("`arrayValue.values`: expected an array".into()),
        };
    }
    if let Some(kv) = map.get("kvlistValue") {
        return match kv.get("values") {
            Some(Value::Array(values)) => AttrValue::KvList(
                values
                    .iter()
                    .filter_map(|kv| {
                        let key = kv.get("key")?.as_str()?.to_owned();
                        Some((
                            key,
                            kv.get("value")
                                .map_or(AttrValue::Other(String::new()), any_value),
                        ))
                    })
                    .collect(),
            ),
            None => AttrValue::KvList(Vec::new()),
            Some(_) => AttrValue::Invalid("`kvlistValue.values`: expected an array".into()),
        };
    }
    if let Some(b) = map.get("bytesValue") {
        return AttrValue::Other(b.as_str().unwrap_or_default().to_owned());
    }
    AttrValue::Other(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_with_a_bad_span_keeps_the_others() {
        let text = r#"{"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "app"}}]},
          "scopeSpans": [{"spans": [
            {"traceId": "AB12", "spanId": "01", "name": "r", "attributes": [
              {"key": "gen_ai.operation.name", "value": {"stringValue": "retrieval"}},
              {"key": "gen_ai.retrieval.query.text", "value": {"stringValue": "hi"}},
              {"key": "n", "value": {"intValue": "3"}}]},
            {"spanId": "02", "attributes": []},
            {"traceId": "ab12", "spanId": "03", "attributes": [
              {"key": "gen_ai.operation.name", "value": {"stringValue": "retrieval"}},
              {"key": "gen_ai.retrieval.query.text", "value": {"stringValue": "hi"}},
              {"key": "gen_ai.retrieval.documents", "value": {"stringValue": "not json"}}]},
            {"traceId": "ab12", "spanId": "04", "name": "chat"}
          ]}]}]}"#;
        let mut out = ReadOutcome::default();
        read_text("t.json", text, false, &mut out);
        assert_eq!(out.spans.len(), 1);
        assert_eq!(out.spans[0].trace_id, "ab12");
        assert_eq!(out.other_spans, 1);
        let problems: Vec<String> = out.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            problems,
            [
                "t.json resourceSpans[0].scopeSpans[0].spans[1]: a span without `traceId`: skipped",
                "t.json resourceSpans[0].scopeSpans[0].spans[2]: `gen_ai.retrieval.documents`: not valid JSON: expected ident at line 1 column 2",
            ]
        );
    }

    #[test]
    fn jsonl_lines_of_each_form() {
        let text = concat!(
            r#"{"trace_id": "aa", "span_id": "01", "attributes": {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "hi", "gen_ai.retrieval.documents": [{"id": "x"}]}}"#,
            "\n\n{oops\n",
            r#"{"trace_id": "aa", "span_id": "02", "atributes": {}}"#,
            "\n",
            r#"{"traceId": "aa", "spanId": "03", "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "retrieval"}}, {"key": "input.value", "value": {"stringValue": "q"}}]}"#,
            "\n"
        );
        let mut out = ReadOutcome::default();
        read_text("t.jsonl", text, true, &mut out);
        assert_eq!(out.spans.len(), 2);
        assert_eq!(out.spans[0].documents[0].id, "x");
        assert_eq!(out.spans[1].query, "q");
        let problems: Vec<String> = out.problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("t.jsonl:3: not valid JSON"),
            "{problems:?}"
        );
        assert!(problems[1].starts_with("t.jsonl:4: "), "{problems:?}");
        assert!(problems[1].contains("atributes"), "{problems:?}");
    }
}
