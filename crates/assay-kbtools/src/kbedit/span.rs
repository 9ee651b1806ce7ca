//! Where each entity of a `kb/` file is written, so an edit rewrites that entity's own lines
//! and leaves every other byte of the file as it was (comments, blank lines, flow lists, key
//! order, the other entities).
//!
//! A file is a JSON array or a YAML block list of entities. [`item_spans`] finds the text of
//! each item: in JSON, each element of the top-level array (strings and nesting followed); in
//! YAML, the lines from an item's `- ` at the list's column to its last line that is not blank
//! and not a comment at the list's column (those belong between items). A layout it cannot
//! read that way (a flow-style YAML list, several documents) gives `None`, and the caller
//! rewrites the whole file instead. [`render_item`] writes one entity in the style of the
//! text it replaces (its indentation, JSON's indent width, one line or several).

use std::ops::Range;

use assay_kb::datafile::Format;
use serde_json::Value;

use crate::HarnessError;

/// The byte range of each item of the file's top-level list, in order (see the module docs).
pub fn item_spans(text: &str, format: Format) -> Option<Vec<Range<usize>>> {
    match format {
        Format::Json => json_spans(text),
        Format::Yaml => yaml_spans(text),
    }
}

fn json_spans(text: &str) -> Option<Vec<Range<usize>>> {
    let bytes = text.as_bytes();
    let mut i = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let skip_ws = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    i = skip_ws(i);
    if bytes.get(i) != Some(&b'[') {
        return None;
    }
    i += 1;
    let mut out = Vec::new();
    loop {
        i = skip_ws(i);
        if *bytes.get(i)? == b']' && out.is_empty() {
            break;
        }
        let start = i;
        let mut depth = 0usize;
        let mut in_string = false;
        // The value: up to its closing bracket at depth 0, or (a scalar) to the next `,`/`]`.
        loop {
            let b = *bytes.get(i)?;
            if in_string {
                match b {
                    b'\\' => i += 1,
                    b'"' => in_string = false,
                    _ => {}
                }
            } else {
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth > 0 => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    b',' | b']' if depth == 0 => break,
                    _ => {}
                }
            }
            i += 1;
        }
        let mut end = i;
        while end > start && bytes[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        out.push(start..end);
        i = skip_ws(i);
        match *bytes.get(i)? {
            b',' => i += 1,
            b']' => break,
            _ => return None,
        }
    }
    // Nothing but white space after the array.
    (skip_ws(i + 1) == bytes.len()).then_some(out)
}

/// The column of a line's first character that is not a space.
fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn yaml_spans(text: &str) -> Option<Vec<Range<usize>>> {
    // The lines with their byte offsets.
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        lines.push((at, line));
        at += line.len();
    }
    let content = |line: &str| line.trim_end_matches(['\n', '\r']).to_owned();
    let blank_or_comment = |line: &str| {
        let t = line.trim();
        t.is_empty() || t.starts_with('#')
    };
    let is_item = |line: &str, column: usize| {
        let c = content(line);
        indent(&c) == column && {
            let rest = &c[column..];
            rest == "-" || rest.starts_with("- ") || rest.starts_with("-\t")
        }
    };
    // The list's column: that of the first line that is neither blank nor a comment (after a
    // `---` that opens the document).
    let mut column = None;
    for &(_, line) in &lines {
        let c = content(line);
        let c = c.trim_start_matches('\u{feff}');
        if blank_or_comment(c) || (column.is_none() && c.trim_end() == "---") {
            continue;
        }
        let candidate = indent(c);
        if !is_item(c, candidate) {
            return None;
        }
        column = Some(candidate);
        break;
    }
    let column = column?;
    let mut starts = Vec::new();
    let mut opened = false;
    for (i, &(_, line)) in lines.iter().enumerate() {
        let c = content(line);
        let c = c.trim_start_matches('\u{feff}');
        if !opened && (blank_or_comment(c) || c.trim_end() == "---") {
            continue;
        }
        opened = true;
        if is_item(c, column) {
            starts.push(i);
        } else if !blank_or_comment(c) && indent(c) <= column {
            // Text at the list's column that is not an item (a second document, `...`, a
            // flow list's line): not a layout this can edit in place.
            return None;
        }
    }
    let mut out = Vec::with_capacity(starts.len());
    for (n, &first) in starts.iter().enumerate() {
        let next = starts.get(n + 1).copied().unwrap_or(lines.len());
        let mut last = next;
        // Blank lines and comments at the list's column after an item lead to the next one.
        while last > first + 1 {
            let c = content(lines[last - 1].1);
            if c.trim().is_empty() || (c.trim_start().starts_with('#') && indent(&c) <= column) {
                last -= 1;
            } else {
                break;
            }
        }
        let (mut start, _) = lines[first];
        if start == 0 && text.starts_with('\u{feff}') {
            // The byte-order mark is the file's, not the item's.
            start = '\u{feff}'.len_utf8();
        }
        let (end_at, end_line) = lines[last - 1];
        out.push(start..end_at + end_line.len());
    }
    Some(out)
}

/// The leading white space of the line `at` is on, when only white space precedes `at` there.
fn line_indent(text: &str, at: usize) -> Option<&str> {
    let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let before = &text[line_start..at];
    let before = before.trim_start_matches('\u{feff}');
    before
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then_some(before)
}

/// `item` written to replace `old`, the text at `span` of `text`, in its style: YAML as a list
/// item at the same column; JSON on one line if `old` was, else pretty with `old`'s indent
/// width, continuation lines at its indentation. The result ends as `old` ends (with or without
/// a newline).
pub fn render_item(
    text: &str,
    span: &Range<usize>,
    item: &Value,
    format: Format,
) -> Result<String, HarnessError> {
    let old = &text[span.clone()];
    let base = line_indent(text, span.start).unwrap_or("");
    let rendered = match format {
        Format::Json if !old.contains('\n') => serde_json::to_string(item)
            .map_err(|e| HarnessError::Infrastructure(format!("cannot write JSON: {e}")))?,
        Format::Json => {
            // The indent width: the second line's indentation past the item's.
            let width = old
                .lines()
                .nth(1)
                .map(|l| l.len() - l.trim_start().len())
                .and_then(|n| n.checked_sub(base.len()))
                .filter(|n| (1..=8).contains(n))
                .unwrap_or(2);
            let unit = " ".repeat(width);
            let mut buf = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
            let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
            serde::Serialize::serialize(item, &mut ser)
                .map_err(|e| HarnessError::Infrastructure(format!("cannot write JSON: {e}")))?;
            let pretty = String::from_utf8(buf)
                .map_err(|e| HarnessError::Infrastructure(format!("cannot write JSON: {e}")))?;
            pretty
                .lines()
                .enumerate()
                .map(|(i, l)| {
                    if i == 0 {
                        l.to_owned()
                    } else {
                        format!("{base}{l}")
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        Format::Yaml => {
            let yaml = super::to_yaml(&Value::Array(vec![item.clone()]))?;
            // The span starts at the line's start: every line at the list's column.
            let column = " ".repeat(indent(old));
            yaml.lines()
                .map(|l| {
                    if l.is_empty() {
                        String::new()
                    } else {
                        format!("{column}{l}")
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let ends_in_newline = old.ends_with('\n');
    let mut out = rendered.trim_end_matches('\n').to_owned();
    if ends_in_newline {
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts<'a>(text: &'a str, spans: &[Range<usize>]) -> Vec<&'a str> {
        spans.iter().map(|s| &text[s.clone()]).collect()
    }

    #[test]
    fn json_items_are_found_through_strings_and_nesting() {
        let text = "\u{feff}[\n  {\"entity_id\": \"a\", \"t\": \"a ] , } \\\" x\"},\n  {\"entity_id\": \"b\",\n   \"l\": [1, {\"x\": [2]}]\n  }\n]\n";
        let spans = item_spans(text, Format::Json).unwrap();
        assert_eq!(
            texts(text, &spans),
            [
                "{\"entity_id\": \"a\", \"t\": \"a ] , } \\\" x\"}",
                "{\"entity_id\": \"b\",\n   \"l\": [1, {\"x\": [2]}]\n  }"
            ]
        );
        assert_eq!(item_spans("[]", Format::Json).unwrap().len(), 0);
        assert!(item_spans("{\"a\": 1}", Format::Json).is_none());
        assert!(item_spans("[{\"a\": 1}] x", Format::Json).is_none());
        assert!(item_spans("[{\"a\": 1}", Format::Json).is_none());
    }

    #[test]
    fn yaml_items_end_before_the_blank_lines_and_comments_that_lead_to_the_next() {
        let text = "# header\n\n- entity_id: a\n  keywords: [x, y]\n  recognition: |\n    - a line\n    # not a comment\n\n# about b\n- entity_id: b\n  title: B\n";
        let spans = item_spans(text, Format::Yaml).unwrap();
        assert_eq!(
            texts(text, &spans),
            [
                "- entity_id: a\n  keywords: [x, y]\n  recognition: |\n    - a line\n    # not a comment\n",
                "- entity_id: b\n  title: B\n"
            ]
        );
        // An indented list, and a document marker before it.
        let text = "---\n  - entity_id: a\n    x: 1\n  - entity_id: b\n";
        let spans = item_spans(text, Format::Yaml).unwrap();
        assert_eq!(
            texts(text, &spans),
            ["  - entity_id: a\n    x: 1\n", "  - entity_id: b\n"]
        );
        // A flow list, a mapping at the top, a second document: not edited in place.
        assert!(item_spans("[{entity_id: a}]\n", Format::Yaml).is_none());
        assert!(item_spans("entities:\n- entity_id: a\n", Format::Yaml).is_none());
        assert!(item_spans("- entity_id: a\n---\n- entity_id: b\n", Format::Yaml).is_none());
    }

    #[test]
    fn an_item_is_rendered_in_the_style_of_the_text_it_replaces() {
        let item = serde_json::json!({"entity_id": "b", "keywords": "k", "priority": 7});
        // JSON: one line stays one line; a pretty item keeps its indentation and indent width.
        let text = "[\n  {\"entity_id\": \"b\", \"priority\": 1}\n]\n";
        let span = item_spans(text, Format::Json).unwrap()[0].clone();
        assert_eq!(
            render_item(text, &span, &item, Format::Json).unwrap(),
            r#"{"entity_id":"b","keywords":"k","priority":7}"#
        );
        let text = "[\n    {\n        \"entity_id\": \"b\"\n    }\n]\n";
        let span = item_spans(text, Format::Json).unwrap()[0].clone();
        assert_eq!(
            render_item(text, &span, &item, Format::Json).unwrap(),
            "{\n        \"entity_id\": \"b\",\n        \"keywords\": \"k\",\n        \"priority\": 7\n    }"
        );
        // YAML: a list item at the same column, ending as the old text ended.
        let text = "  - entity_id: b\n    priority: 1";
        let span = item_spans(text, Format::Yaml).unwrap()[0].clone();
        assert_eq!(
            render_item(text, &span, &item, Format::Yaml).unwrap(),
            "  - entity_id: b\n    keywords: k\n    priority: 7"
        );
    }
}
