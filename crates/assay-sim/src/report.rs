//! Saving a simulation report ([`save`]: `sim/reports/report_<stamp>.md`, `.json`, `.html`
//! and one JSON file per transcript) and reading a saved one ([`read`]) for a comparison, a
//! baseline or a page: the version is checked before the body is read, so a report of an
//! unknown version says so instead of failing on a missing field.

use std::path::{Path, PathBuf};

use assay_core::simulation::{
    SIM_SCHEMA_OLDEST, SIM_SCHEMA_VERSION, ScenarioRun, SimReport, Transcript,
};
use assay_kb::datafile::DataError;
use assay_project::results::{write_new, write_replace};

/// The saved reports' folder, relative to the project.
pub const REPORTS_DIR: &str = "sim/reports";

/// What [`save`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedReport {
    /// The report's stamp (`20261125_093000`, `_2` … when one second saw several).
    pub stamp: String,
    /// The Markdown report.
    pub markdown: PathBuf,
    /// The JSON report (what [`read`], a comparison and a baseline read).
    pub json: PathBuf,
    /// The self-contained HTML report.
    pub html: PathBuf,
    /// The folder of the transcripts, one `<scenario>-<repeat>.json` per run.
    pub transcripts: PathBuf,
}

/// A report file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {message}", path.display())]
pub struct SaveError {
    /// The file or folder.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

fn save_error(path: &Path, e: &dyn std::fmt::Display) -> SaveError {
    SaveError {
        path: path.to_owned(),
        message: e.to_string(),
    }
}

/// A transcript's file name in its report's transcript folder.
pub fn transcript_file(run: &ScenarioRun) -> String {
    format!("{}-{}.json", run.scenario_id, run.repeat)
}

/// A report's stamp from its `generated_at` (RFC 3339): `YYYYMMDD_HHMMSS`.
fn base_stamp(generated_at: &str) -> String {
    let digits: String = generated_at
        .chars()
        .take(19)
        .filter(char::is_ascii_digit)
        .collect();
    format!(
        "{}_{}",
        &digits[..8.min(digits.len())],
        &digits[8.min(digits.len())..]
    )
}

/// Where `--output FILE` puts the reports: its extension decides which one goes there
/// (`.md` Markdown, `.json` JSON, `.html` HTML) and the others go beside it under the same
/// name with their own extension, so no report is written over another. The Markdown, JSON and
/// HTML paths, or what is wrong with the extension.
pub fn output_paths(output: &Path) -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let ext = output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("md" | "json" | "html") => Ok((
            output.with_extension("md"),
            output.with_extension("json"),
            output.with_extension("html"),
        )),
        _ => Err(format!(
            "--output {}: the file's extension decides which report goes there: .md (Markdown), .json (JSON) or .html (HTML); the other two are written beside it",
            output.display()
        )),
    }
}

/// Writes the Markdown, JSON and self-contained HTML reports and one JSON file per transcript,
/// each atomically, into `project/sim/reports/` (or, with `output`, the report its extension
/// names to that path and the others beside it, [`output_paths`]). The stamped files are never overwritten (a second report in the
/// same second gets `_2`, `_3`, …); `latest.md` and `latest.json` are replaced.
/// A simulation does the same in two steps ([`ReportFiles`]): its transcripts as its runs
/// finish, the reports at the end.
pub fn save(
    project: &Path,
    output: Option<&Path>,
    report: &SimReport,
) -> Result<SavedReport, SaveError> {
    let files = ReportFiles::reserve(project, output, &report.generated_at)?;
    for run in &report.runs {
        if let Some(t) = &run.transcript {
            files.write_transcript(&run.scenario_id, run.repeat, t);
        }
    }
    files.finish(report)
}

/// A report's files while its simulation runs: the stamp and the transcript folder, taken
/// before the first run (after the preflight) so that each transcript is written as its
/// conversation ends, beside the judge's calls, rather than all of them after the last run; an
/// interrupted simulation leaves the transcripts of the conversations that ended, and no
/// report. [`ReportFiles::finish`] writes the reports.
#[derive(Debug)]
pub struct ReportFiles {
    output: Option<PathBuf>,
    reports_dir: PathBuf,
    stamp: String,
    markdown_path: PathBuf,
    json_path: PathBuf,
    html_path: PathBuf,
    transcripts: PathBuf,
    /// The first transcript that could not be written: [`ReportFiles::finish`] fails with it.
    failed: std::sync::Mutex<Option<SaveError>>,
}

impl ReportFiles {
    /// Takes the first free stamp of `generated_at` (`YYYYMMDD_HHMMSS`, then `_2`, …: no
    /// `report_<stamp>.md` and no `transcripts/<stamp>/`) and makes the transcript folder.
    pub fn reserve(
        project: &Path,
        output: Option<&Path>,
        generated_at: &str,
    ) -> Result<Self, SaveError> {
        let reports_dir = project.join(REPORTS_DIR);
        let base = base_stamp(generated_at);
        let stamp = (1..1000)
            .map(|n| {
                if n == 1 {
                    base.clone()
                } else {
                    format!("{base}_{n}")
                }
            })
            .find(|s| {
                !reports_dir.join(format!("report_{s}.md")).exists()
                    && !reports_dir.join("transcripts").join(s).exists()
            })
            .ok_or_else(|| SaveError {
                path: reports_dir.clone(),
                message: format!("too many reports stamped {base}"),
            })?;
        let (markdown_path, json_path, html_path) = if let Some(path) = output {
            output_paths(path).map_err(|message| SaveError {
                path: path.to_owned(),
                message,
            })?
        } else {
            let md = reports_dir.join(format!("report_{stamp}.md"));
            (
                md.clone(),
                md.with_extension("json"),
                md.with_extension("html"),
            )
        };
        let base_dir = markdown_path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        std::fs::create_dir_all(&base_dir).map_err(|e| save_error(&base_dir, &e))?;
        let transcripts = base_dir.join("transcripts").join(&stamp);
        std::fs::create_dir_all(&transcripts).map_err(|e| save_error(&transcripts, &e))?;
        Ok(ReportFiles {
            output: output.map(Path::to_owned),
            reports_dir,
            stamp,
            markdown_path,
            json_path,
            html_path,
            transcripts,
            failed: std::sync::Mutex::default(),
        })
    }

    /// The stamp the reports will have.
    pub fn stamp(&self) -> &str {
        &self.stamp
    }

    /// Writes one run's transcript (`<scenario>-<repeat>.json`, atomically, replacing). A
    /// failure is kept for [`ReportFiles::finish`], which reports the first.
    pub fn write_transcript(&self, scenario_id: &str, repeat: u32, transcript: &Transcript) {
        let path = self
            .transcripts
            .join(format!("{scenario_id}-{repeat}.json"));
        let written = serde_json::to_string_pretty(transcript)
            .map_err(|e| save_error(&path, &e))
            .and_then(|text| {
                write_replace(&path, text.as_bytes()).map_err(|e| save_error(&path, &e))
            });
        if let Err(e) = written {
            let mut failed = self
                .failed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            failed.get_or_insert(e);
        }
    }

    /// Writes the Markdown, JSON and HTML reports (and `latest.md`, `latest.json` without
    /// `--output`), each atomically, rendered and written side by side; fails with the first
    /// transcript that could not be written, before writing any report.
    pub fn finish(&self, report: &SimReport) -> Result<SavedReport, SaveError> {
        if let Some(e) = self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            return Err(e);
        }
        let ReportFiles {
            output,
            reports_dir,
            stamp,
            markdown_path,
            json_path,
            html_path,
            transcripts,
            ..
        } = self;
        let replace = output.is_some();
        let put = |path: &Path, text: &str, replace: bool| {
            if replace {
                write_replace(path, text.as_bytes())
            } else {
                write_new(path, text.as_bytes())
            }
            .map_err(|e| save_error(path, &e))
        };
        // Each file is rendered and written (synced) on its own thread: the renderings and
        // the syncs overlap instead of following one another after the last run.
        let (markdown, json, html) = std::thread::scope(|scope| {
            let markdown = scope.spawn(|| {
                let text = assay_report::simulation::markdown(report);
                put(markdown_path, &text, replace)?;
                if !replace {
                    put(&reports_dir.join("latest.md"), &text, true)?;
                }
                Ok(())
            });
            let json = scope.spawn(|| {
                let text = serde_json::to_string_pretty(report)
                    .map_err(|e| save_error(markdown_path, &e))?;
                put(json_path, &text, replace)?;
                if !replace {
                    put(&reports_dir.join("latest.json"), &text, true)?;
                }
                Ok(())
            });
            let html = assay_report::simulation::html(
                report,
                &assay_report::simulation::TranscriptFiles {
                    dir: format!("transcripts/{stamp}"),
                },
            );
            let html = put(html_path, &html, replace);
            let joined = |h: std::thread::ScopedJoinHandle<'_, Result<(), SaveError>>| {
                h.join().unwrap_or_else(|_| {
                    Err(SaveError {
                        path: markdown_path.clone(),
                        message: "writing the report panicked".into(),
                    })
                })
            };
            (joined(markdown), joined(json), html)
        });
        markdown?;
        json?;
        html?;
        Ok(SavedReport {
            stamp: stamp.clone(),
            markdown: markdown_path.clone(),
            json: json_path.clone(),
            html: html_path.clone(),
            transcripts: transcripts.clone(),
        })
    }
}

/// What a list of reports shows of each: its head, without the runs.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct ReportHead {
    /// The suite's name.
    pub suite: String,
    /// The model under test.
    pub model: String,
    /// The judge's model.
    pub evaluator_model: String,
    /// When the report was made.
    pub generated_at: String,
    /// Runs per scenario.
    pub repeat: u32,
    /// The counts.
    pub summary: assay_core::simulation::SimSummary,
    /// The gate, when the suite has one.
    #[serde(default)]
    pub gate: Option<assay_core::simulation::GateOutcome>,
    /// Wall-clock milliseconds.
    pub duration_ms: u64,
}

/// The saved reports (`sim/reports/report_<stamp>.json`), newest first, as `(stamp, path)`.
pub fn list(project: &Path) -> Vec<(String, PathBuf)> {
    let dir = project.join(REPORTS_DIR);
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_str()?.to_owned();
                    let stamp = name.strip_prefix("report_")?.strip_suffix(".json")?;
                    check_stamp(stamp).ok()?;
                    Some((stamp.to_owned(), e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| b.0.cmp(&a.0));
    out
}

/// Whether `stamp` can name a saved report (`report_<stamp>.json`): letters, digits, `_` and
/// `-`, 1 to 64 of them, so that it never names another path.
pub fn check_stamp(stamp: &str) -> Result<(), String> {
    if !stamp.is_empty()
        && stamp.len() <= 64
        && stamp
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        Ok(())
    } else {
        Err(format!(
            "`{stamp}` is not a report stamp (letters, digits, `_` and `-`, as in report_20261125_093000.json)"
        ))
    }
}

/// The path of the saved report `stamp` in `project`.
pub fn path_of(project: &Path, stamp: &str) -> Result<PathBuf, String> {
    check_stamp(stamp)?;
    Ok(project
        .join(REPORTS_DIR)
        .join(format!("report_{stamp}.json")))
}

/// The transcript file of `run` in the saved report `stamp` (its transcripts folder). The
/// scenario id comes from a report, which anyone can edit: a name that would leave the
/// transcripts folder (`../`, an absolute path, a symbolic link out) is refused by the
/// project's one rule for paths read from files ([`assay_kb::datafile::file_inside`]).
pub fn transcript_path(project: &Path, stamp: &str, run: &ScenarioRun) -> Result<PathBuf, String> {
    check_stamp(stamp)?;
    let root = project.join(REPORTS_DIR).join("transcripts");
    let base = root.join(stamp);
    let name = transcript_file(run);
    match assay_kb::datafile::file_inside(&root, &base, &name, "the transcripts folder") {
        Ok(path) => Ok(path),
        // A transcript that is not there is the caller's to report; one that would be
        // outside is refused.
        Err(e) if e.contains("not found under") => {
            let lexical = base.join(&name);
            let inside = lexical
                .components()
                .all(|c| !matches!(c, std::path::Component::ParentDir))
                && Path::new(&name).components().count() == 1;
            if inside {
                Ok(lexical)
            } else {
                Err(format!("the run's transcript `{name}` {e}"))
            }
        }
        Err(e) => Err(format!("the run's transcript: {e}")),
    }
}

/// Reads a report's head (checking its version as [`read`] does), skipping its runs.
pub fn read_head(path: &Path) -> Result<ReportHead, DataError> {
    let text = read_checked(path)?;
    serde_json::from_str(&text)
        .map_err(|e| DataError::new(path, format!("not a simulation report: {e}")))
}

/// Whether a JSON document is a simulation report (not a RunLog or another record): it has the
/// three models and the runs a [`SimReport`] always has.
pub fn is_report(value: &serde_json::Value) -> bool {
    ["simulator_model", "evaluator_model", "runs", "scenarios"]
        .iter()
        .all(|key| value.get(key).is_some())
}

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
    let text = read_checked(&path)?;
    serde_json::from_str(&text)
        .map_err(|e| DataError::new(&path, format!("not a simulation report: {e}")))
}

/// A report's text, once its version is known to be one this assay reads.
fn read_checked(path: &Path) -> Result<String, DataError> {
    #[derive(serde::Deserialize)]
    struct Version {
        schema_version: Option<serde_json::Value>,
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        DataError::new(
            path,
            if e.kind() == std::io::ErrorKind::NotFound {
                "no such simulation report".to_owned()
            } else {
                format!("cannot read the simulation report: {e}")
            },
        )
    })?;
    // The version first (a cheap pass that keeps nothing else), then the body straight into
    // the report's types: a big report is parsed once, without an intermediate tree.
    let version = serde_json::from_str::<Version>(&text).map_err(|e| DataError {
        path: path.to_owned(),
        line: Some(e.line()),
        column: Some(e.column()),
        message: format!("not JSON: {e}"),
    })?;
    let version = version
        .schema_version
        .as_ref()
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| {
            DataError::new(
                path,
                "not a simulation report (no `schema_version`; expected sim/reports/report_<stamp>.json)",
            )
        })?;
    if version > u64::from(SIM_SCHEMA_VERSION) || version < u64::from(SIM_SCHEMA_OLDEST) {
        return Err(DataError::new(
            path,
            format!(
                "a simulation report of version {version}; this assay reads versions {SIM_SCHEMA_OLDEST} to {SIM_SCHEMA_VERSION}"
            ),
        ));
    }
    Ok(text)
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
