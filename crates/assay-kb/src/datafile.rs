//! Reading data files (JSON and YAML) with errors that name the file, the line, the column and
//! the field, and warnings for fields assay does not know.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// The syntax of a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.json`
    Json,
    /// `.yaml` / `.yml`
    Yaml,
}

impl Format {
    /// The format a file name implies, if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "json" => Some(Format::Json),
            "yaml" | "yml" => Some(Format::Yaml),
            _ => None,
        }
    }
}

/// A data file that could not be read or is not valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong, naming the field when known.
    pub message: String,
}

impl DataError {
    /// An error about a whole file, or a place found by other means.
    pub fn new(path: impl Into<PathBuf>, message: impl Into<String>) -> DataError {
        DataError {
            path: path.into(),
            line: None,
            column: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for DataError {}

/// Drops the " at line N column M" a parser appends, since [`DataError`] carries the place.
fn bare_message(message: &str) -> &str {
    message
        .rsplit_once(" at line ")
        .map_or(message, |(head, _)| head)
}

/// Drops a path the YAML parser puts in front of its message (`.[0]: …`, `name: …`), since the
/// field path from `serde_path_to_error` (`field`) is added instead: each part once.
fn strip_yaml_path<'m>(message: &'m str, field: &str) -> &'m str {
    let last = field
        .rsplit(['.', ']'])
        .find(|s| !s.is_empty())
        .unwrap_or(field);
    match message.split_once(": ") {
        Some((head, rest))
            if !head.contains(' ')
                && (head.starts_with(['.', '['])
                    || (!field.is_empty()
                        && (head == field || head.ends_with(last) || field.starts_with(head)))) =>
        {
            rest
        }
        _ => message,
    }
}

/// `message` about the field at `path` (`semantic.top_k`), as every data-file error reads:
/// `path: message`, with the closest known name suggested for an unknown field or value.
pub fn with_field(path: &str, message: &str) -> String {
    let message = suggest(message);
    // serde's path to an unknown field ends with the field, which the message names already.
    let path = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
        .and_then(|(name, _)| path.strip_suffix(name))
        .map_or(path, |parent| parent.trim_end_matches('.'));
    if path.is_empty() || path == "." {
        message
    } else {
        format!("{path}: {message}")
    }
}

/// Rewrites serde's "unknown field `guidence_do`, expected one of `entity_id`, …" (and the
/// same for an unknown variant) as "unknown field `guidence_do` (did you mean `guidance_do`?)":
/// the closest known name when there is one within a typo's reach, else the known names.
fn suggest(message: &str) -> String {
    let Some((head, expected)) = message.split_once(", expected ") else {
        return message.to_owned();
    };
    let (kind, rest) = if let Some(rest) = head.strip_prefix("unknown field `") {
        ("field", rest)
    } else if let Some(rest) = head.strip_prefix("unknown variant `") {
        ("value", rest)
    } else {
        return message.to_owned();
    };
    let Some(name) = rest.strip_suffix('`') else {
        return message.to_owned();
    };
    let known: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|k| !k.is_empty())
        .collect();
    match assay_core::text::closest(name, known.iter().copied()) {
        Some(near) => format!("unknown {kind} `{name}` (did you mean `{near}`?)"),
        None if known.is_empty() => message.to_owned(),
        None => format!(
            "unknown {kind} `{name}`; expected one of {}",
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Renders an ignored field's path the way error paths read: `tests[0].notes`.
fn field_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", field_path(parent)),
        Path::Map { parent, key } => {
            let parent = field_path(parent);
            if parent.is_empty() {
                key.clone()
            } else {
                format!("{parent}.{key}")
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => field_path(parent),
    }
}

/// Parses `text` (the contents of `path`) as `T`. Fields that `T` does not know are reported
/// through `warn` with their path; they are not an error.
pub fn parse<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    format: Format,
    warn: &mut dyn FnMut(String),
) -> Result<T, DataError> {
    // Windows editors start UTF-8 files with a byte-order mark; it is not part of the data.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut ignored = Vec::new();
    let mut on_ignored = |p: serde_ignored::Path<'_>| ignored.push(field_path(&p));
    let result = match format {
        Format::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let wrapped = serde_ignored::Deserializer::new(&mut de, &mut on_ignored);
            let value = serde_path_to_error::deserialize::<_, T>(wrapped).map_err(|e| {
                let field = e.path().to_string();
                let inner = e.into_inner();
                let (line, column) = (inner.line(), inner.column());
                DataError {
                    path: path.to_owned(),
                    line: (line > 0).then_some(line),
                    column: (column > 0).then_some(column),
                    message: with_field(&field, bare_message(&inner.to_string())),
                }
            });
            // One JSON value per text: anything after it but whitespace (a second object, a
            // trailing comma, stray words) is an error, never silently dropped.
            value.and_then(|value| match de.end() {
                Ok(()) => Ok(value),
                Err(e) => Err(DataError {
                    path: path.to_owned(),
                    line: (e.line() > 0).then_some(e.line()),
                    column: (e.column() > 0).then_some(e.column()),
                    message: format!(
                        "unexpected text after the JSON value ({}); one value is expected here",
                        bare_message(&e.to_string())
                    ),
                }),
            })
        }
        Format::Yaml => {
            let de = serde_norway::Deserializer::from_str(text);
            let de = serde_ignored::Deserializer::new(de, &mut on_ignored);
            serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
                let field = e.path().to_string();
                let inner = e.into_inner();
                let location = inner.location();
                DataError {
                    path: path.to_owned(),
                    line: location.as_ref().map(serde_norway::Location::line),
                    column: location.as_ref().map(serde_norway::Location::column),
                    message: with_field(
                        &field,
                        strip_yaml_path(bare_message(&inner.to_string()), &field),
                    ),
                }
            })
        }
    };
    let value = result?;
    for field in ignored {
        warn(format!(
            "{}: unknown field `{field}` (ignored)",
            path.display()
        ));
    }
    Ok(value)
}

/// The file a data file names (`name`, relative to the folder `base`), checked to stay inside
/// the folder `root` (`folder` says what that folder is, for messages: "the project's folder"):
/// not absolute, no `..` that climbs out, and, once symbolic links are resolved, still inside.
/// Returns the file's real path. The optimizer's context files and the simulator's suite files
/// follow this one rule, so a data file never makes assay read (and send to a model) a file
/// from elsewhere on the machine.
pub fn file_inside(root: &Path, base: &Path, name: &str, folder: &str) -> Result<PathBuf, String> {
    use std::path::Component;
    if name.trim().is_empty() {
        return Err("empty path".into());
    }
    // Both made absolute and free of `.` and `..` (as `--project ../..` gives), so that
    // the comparison below is of the same spelling of the same folders.
    let root = lexical(&std::path::absolute(root).map_err(|e| format!("{}: {e}", root.display()))?);
    let base = lexical(&std::path::absolute(base).map_err(|e| format!("{}: {e}", base.display()))?);
    let mut normal = base.clone();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(part) => normal.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "`{name}` is absolute; name files relative to {} (inside {folder})",
                    base.display()
                ));
            }
        }
    }
    if !normal.starts_with(&root) {
        return Err(format!(
            "`{name}` leaves {folder} ({}); files must stay inside it",
            root.display()
        ));
    }
    if normal == root {
        return Err(format!("`{name}` names {folder}, not a file"));
    }
    let real = std::fs::canonicalize(&normal)
        .map_err(|e| format!("`{name}` not found under {} ({e})", base.display()))?;
    let real_root = std::fs::canonicalize(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    if !real.starts_with(&real_root) {
        return Err(format!(
            "`{name}` leads outside {folder} (a symbolic link to {})",
            real.display()
        ));
    }
    if !real.is_file() {
        return Err(format!("`{name}` is not a file"));
    }
    Ok(real)
}

/// `path` with its `.` and `..` parts resolved by name (an absolute path stays absolute; `..`
/// at the root stays at the root). Symbolic links are not followed: [`file_inside`] checks
/// them afterwards on the real paths.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The 1-based line of the `nth` (0-based) place in `text` that writes `key` as a mapping key:
/// YAML `key:` at the start of a line (or after `- `), or JSON `"key":` anywhere. What errors
/// found after parsing (a duplicate id, a bad value) name the line with.
pub fn key_line(text: &str, key: &str, nth: usize) -> Option<usize> {
    let mut found = 0usize;
    for (number, line) in text.lines().enumerate() {
        let here = key_starts(line, key).len();
        if found + here > nth {
            return Some(number + 1);
        }
        found += here;
    }
    None
}

/// Where on `line` each place that writes `key` as a mapping key starts: the byte offset of
/// what follows its `:`.
fn key_starts(line: &str, key: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let trimmed = line.trim_start().trim_start_matches("- ").trim_start();
    if let Some(rest) = trimmed.strip_prefix(key)
        && let Some(after) = rest.strip_prefix(':')
    {
        out.push(line.len() - after.len());
    }
    let quoted = format!("\"{key}\"");
    let mut from = 0usize;
    while let Some(at) = line[from..].find(&quoted) {
        let at = from + at;
        let escaped = line[..at].ends_with('\\');
        let rest = &line[at + quoted.len()..];
        if !escaped && let Some(after) = rest.trim_start().strip_prefix(':') {
            out.push(line.len() - after.len());
        }
        from = at + quoted.len();
    }
    out
}

/// The 1-based line that writes `key` with the scalar `value` (`entity_id: x`,
/// `"test_id": "S1"`), then, from there on, the line of each of `keys` in turn: the place of
/// a field inside one entry of a list (`[("test_id", "S1")]`, then `user_state`, then `age`).
/// A key not found after the previous one leaves the line where it was; `None` when the
/// entry itself is not found.
pub fn entry_line(text: &str, (key, value): (&str, &str), keys: &[&str]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let written = |after: &str| {
        let after = after.trim_start();
        let unquoted = after
            .strip_prefix('"')
            .and_then(|a| a.strip_prefix(value)?.strip_prefix('"'))
            .or_else(|| {
                after
                    .strip_prefix('\'')
                    .and_then(|a| a.strip_prefix(value)?.strip_prefix('\''))
            })
            .or_else(|| {
                after
                    .strip_prefix(value)
                    .filter(|rest| rest.is_empty() || rest.starts_with([' ', ',', '}', '#']))
            });
        unquoted.is_some()
    };
    let mut at = lines.iter().position(|line| {
        key_starts(line, key)
            .into_iter()
            .any(|start| written(&line[start..]))
    })?;
    for k in keys {
        if let Some(next) = (at..lines.len()).find(|&i| !key_starts(lines[i], k).is_empty()) {
            at = next;
        }
    }
    Some(at + 1)
}

/// Reads a data file's text, its format taken from its extension.
pub fn read_text(path: &Path) -> Result<(Format, String), DataError> {
    let format = Format::from_path(path).ok_or_else(|| {
        DataError::new(
            path,
            "unsupported file type (expected .json, .yaml or .yml)",
        )
    })?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| DataError::new(path, format!("cannot read file: {e}")))?;
    Ok((format, text))
}

/// Reads and parses a file, its format taken from its extension.
pub fn read<T: DeserializeOwned>(
    path: &Path,
    warn: &mut dyn FnMut(String),
) -> Result<T, DataError> {
    let (format, text) = read_text(path)?;
    parse(path, &text, format, warn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_line_finds_a_field_of_one_entry() {
        let yaml = "- entity_id: a\n  state_conditions:\n    age: {gte: 1}\n- entity_id: \"b\"\n  title: B\n  state_conditions:\n    age: {gte: \"65\"}\n";
        assert_eq!(
            entry_line(yaml, ("entity_id", "b"), &["state_conditions", "age"]),
            Some(7)
        );
        assert_eq!(
            entry_line(yaml, ("entity_id", "a"), &["state_conditions", "age"]),
            Some(3)
        );
        assert_eq!(entry_line(yaml, ("entity_id", "b"), &["nothing"]), Some(4));
        assert_eq!(entry_line(yaml, ("entity_id", "c"), &[]), None);
        let json = "{\"tests\": [\n  {\"test_id\": \"S1\", \"user_state\": {\"age\": 3}},\n  {\"test_id\": \"S10\",\n   \"user_state\": {\"x\": 1, \"age\": \"65\"}}\n]}";
        assert_eq!(
            entry_line(json, ("test_id", "S1"), &["user_state", "age"]),
            Some(2)
        );
        assert_eq!(
            entry_line(json, ("test_id", "S10"), &["user_state", "age"]),
            Some(4)
        );
    }

    #[test]
    fn key_line_finds_the_nth_yaml_or_json_key() {
        let yaml = "name: x\nitems:\n  - id: a\n    weight: 1\n  - id: b\n";
        assert_eq!(key_line(yaml, "items", 0), Some(2));
        assert_eq!(key_line(yaml, "id", 1), Some(5));
        assert_eq!(key_line(yaml, "id", 2), None);
        assert_eq!(key_line(yaml, "nothing", 0), None);
        let json =
            "{\"items\": [{\"id\": \"a\"}, {\"id\": \"b\",\n \"note\": \"\\\"id\\\": no\"}]}";
        assert_eq!(key_line(json, "id", 1), Some(1), "two keys on one line");
        assert_eq!(
            key_line(json, "id", 2),
            None,
            "an escaped quote in a string is not a key"
        );
        assert_eq!(
            key_line("{\n  \"max_turns\": 0\n}", "max_turns", 0),
            Some(2)
        );
    }
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        tests: Vec<Item>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Item {
        id: String,
        n: u8,
    }

    fn json(text: &str) -> (Result<Doc, DataError>, Vec<String>) {
        let mut warnings = Vec::new();
        let r = parse(Path::new("bank.json"), text, Format::Json, &mut |w| {
            warnings.push(w);
        });
        (r, warnings)
    }

    #[test]
    fn a_byte_order_mark_is_not_data() {
        let (r, _) = json("\u{feff}{\"tests\": [{\"id\": \"a\", \"n\": 1}]}");
        assert_eq!(r.unwrap().tests[0].id, "a");
        let mut warnings = Vec::new();
        let doc: Doc = parse(
            Path::new("bank.yaml"),
            "\u{feff}tests:\n  - id: b\n    n: 2\n",
            Format::Yaml,
            &mut |w| warnings.push(w),
        )
        .unwrap();
        assert_eq!((doc.tests[0].id.as_str(), doc.tests[0].n), ("b", 2));
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let (r, _) = json("{\n  \"tests\": [\n    {\"id\": \"a\" \"n\": 1}\n  ]\n}");
        let e = r.unwrap_err();
        assert_eq!((e.line, e.column), (Some(3), Some(16)));
        assert!(e.to_string().starts_with("bank.json:3:16: "), "{e}");
    }

    #[test]
    fn text_after_the_value_is_an_error_with_its_place() {
        for (text, column) in [
            ("{\"tests\": []}{\"tests\": []}", 14),
            ("{\"tests\": []} garbage", 15),
            ("{\"tests\": []},", 14),
        ] {
            let (r, _) = json(text);
            let e = r.unwrap_err();
            assert_eq!((e.line, e.column), (Some(1), Some(column)), "{text}: {e}");
            assert!(e.message.contains("after the JSON value"), "{e}");
        }
        let (r, _) = json("{\"tests\": []}  \n\t ");
        assert!(r.is_ok(), "trailing whitespace is fine");
    }

    #[test]
    fn a_yaml_type_error_names_its_field_once() {
        let mut warn = |_: String| {};
        let e = parse::<Doc>(
            Path::new("a.yaml"),
            "tests:\n  - id: [1, 2]\n    n: 1\n",
            Format::Yaml,
            &mut warn,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("tests[0].id: invalid type"), "{e}");
        assert_eq!(e.matches("id:").count(), 1, "{e}");
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Top {
            name: String,
        }
        let e = parse::<Top>(Path::new("a.yaml"), "name: [1]\n", Format::Yaml, &mut warn)
            .unwrap_err()
            .to_string();
        assert!(e.contains(": name: invalid type"), "{e}");
        assert!(!e.contains("name: name"), "{e}");
    }

    #[test]
    fn missing_field_names_the_path() {
        let (r, _) = json("{\"tests\": [{\"id\": \"a\", \"n\": 1}, {\"id\": \"b\"}]}");
        let e = r.unwrap_err().to_string();
        assert!(e.contains("tests[1]: missing field `n`"), "{e}");
    }

    #[test]
    fn wrong_type_names_the_field() {
        let (r, _) = json("{\"tests\": [{\"id\": \"a\", \"n\": \"x\"}]}");
        let e = r.unwrap_err().to_string();
        assert!(
            e.starts_with("bank.json:1:") && e.contains("tests[0].n: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn unknown_fields_warn() {
        let (r, w) = json("{\"tests\": [{\"id\": \"a\", \"n\": 1, \"nte\": 2}], \"extra\": true}");
        assert!(r.is_ok());
        assert_eq!(
            w,
            vec![
                "bank.json: unknown field `tests[0].nte` (ignored)".to_owned(),
                "bank.json: unknown field `extra` (ignored)".to_owned()
            ]
        );
    }

    #[test]
    fn an_unknown_field_of_a_strict_type_is_an_error_with_a_suggestion() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Strict {
            guidance_do: Option<String>,
            title: String,
        }
        let mut warnings = Vec::new();
        let e = parse::<Vec<Strict>>(
            Path::new("kb/bikes.yaml"),
            "- title: Chains\n  guidence_do: oil it\n",
            Format::Yaml,
            &mut |w| warnings.push(w),
        )
        .unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(
            e.message
                .ends_with("[0]: unknown field `guidence_do` (did you mean `guidance_do`?)"),
            "{e}"
        );
        let e = parse::<Strict>(
            Path::new("a.json"),
            "{\"title\": \"t\", \"zzz\": 1}",
            Format::Json,
            &mut |w| warnings.push(w),
        )
        .unwrap_err();
        assert!(
            e.message
                .ends_with("unknown field `zzz`; expected one of `guidance_do`, `title`"),
            "{e}"
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn a_root_spelt_with_dot_dot_holds_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        std::fs::create_dir_all(root.join("sim/labels")).unwrap();
        std::fs::write(root.join("sim/report.json"), "{}").unwrap();
        // The root as `project/sim/labels/../..`, the base as `project/sim/labels`.
        let spelt = root.join("sim/labels/../..");
        let found = file_inside(
            &spelt,
            &root.join("sim/labels"),
            "../report.json",
            "the project",
        )
        .unwrap();
        assert!(found.ends_with("sim/report.json"), "{}", found.display());
        let outside = file_inside(&spelt, &root.join("sim"), "../../x.json", "the project");
        assert!(outside.unwrap_err().contains("leaves the project"));
        assert_eq!(lexical(Path::new("/a/./b/../c")), Path::new("/a/c"));
        assert_eq!(lexical(Path::new("/../a")), Path::new("/a"));
    }

    #[test]
    fn yaml_errors_have_locations() {
        let mut w = Vec::new();
        let r: Result<Doc, _> = parse(
            Path::new("kb.yaml"),
            "tests:\n  - id: a\n    n: 300\n",
            Format::Yaml,
            &mut |x| w.push(x),
        );
        let e = r.unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("tests[0].n"), "{e}");
    }
}
