//! Reading a saved simulation report (`sim/reports/report_<stamp>.json`) for a comparison, a
//! baseline or a page: the version is checked before the body is read, so a report of an
//! unknown version says so instead of failing on a missing field.

use std::path::{Path, PathBuf};

use assay_core::simulation::{SIM_SCHEMA_OLDEST, SIM_SCHEMA_VERSION, SimReport};
use assay_kb::datafile::DataError;

/// The JSON report beside `path` (a `.md` report's `.json` twin), or `path` itself.
pub fn json_path(path: &Path) -> PathBuf {
    if path.extension().is_some_and(|e| e == "json") {
        path.to_owned()
    } else {
        path.with_extension("json")
    }
}

/// Reads a simulation report (`.json`, or a `.md` with its `.json` beside it). Errors name the
/// file (and the line and column of a syntax error): a missing file, not JSON, not a report,
/// a version this assay does not read.
pub fn read(path: &Path) -> Result<SimReport, DataError> {
    let path = json_path(path);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        DataError::new(
            &path,
            if e.kind() == std::io::ErrorKind::NotFound {
                "no such simulation report".to_owned()
            } else {
                format!("cannot read the simulation report: {e}")
            },
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| DataError {
        path: path.clone(),
        line: Some(e.line()),
        column: Some(e.column()),
        message: format!("not JSON: {e}"),
    })?;
    let version = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| {
            DataError::new(
                &path,
                "not a simulation report (no `schema_version`; expected sim/reports/report_<stamp>.json)",
            )
        })?;
    if version > u64::from(SIM_SCHEMA_VERSION) || version < u64::from(SIM_SCHEMA_OLDEST) {
        return Err(DataError::new(
            &path,
            format!(
                "a simulation report of version {version}; this assay reads versions {SIM_SCHEMA_OLDEST} to {SIM_SCHEMA_VERSION}"
            ),
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| DataError::new(&path, format!("not a simulation report: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_reports_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let p = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let e = read(&dir.path().join("nope.json")).unwrap_err();
        assert!(e.message.contains("no such simulation report"), "{e}");
        let e = read(&p("torn.json", "{\"schema_version\": 2,")).unwrap_err();
        assert!(
            e.message.starts_with("not JSON") && e.line == Some(1),
            "{e}"
        );
        let e = read(&p("other.json", "{\"hello\": 1}")).unwrap_err();
        assert!(e.message.contains("no `schema_version`"), "{e}");
        let e = read(&p("future.json", "{\"schema_version\": 9}")).unwrap_err();
        assert!(
            e.message
                .contains("version 9; this assay reads versions 1 to"),
            "{e}"
        );
        let e = read(&p("empty.json", "{\"schema_version\": 2}")).unwrap_err();
        assert!(
            e.message.contains("not a simulation report: missing field"),
            "{e}"
        );
        // A Markdown report's JSON twin is read.
        let e = read(&dir.path().join("report_x.md")).unwrap_err();
        assert!(e.path.ends_with("report_x.json"), "{e}");
    }
}
