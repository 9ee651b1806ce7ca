//! Saving a run: `results/results_<stamp>.json`, `results/report_<stamp>.md` and
//! `results/report_<stamp>.html`, written atomically (temporary file, then a link that never replaces an existing file).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Where a run was saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedResults {
    /// The RunLog.
    pub json: PathBuf,
    /// The Markdown report.
    pub markdown: PathBuf,
    /// The self-contained HTML report.
    pub html: PathBuf,
}

/// The rendered reports saved beside a run's JSON.
#[derive(Debug, Clone, Copy)]
pub struct Reports<'a> {
    /// The Markdown report.
    pub markdown: &'a str,
    /// The HTML report.
    pub html: &'a str,
}

/// The file stamp of a run that started at `timestamp` (RFC 3339): `YYYY-MM-DD-HHMM`, UTC.
pub fn stamp(timestamp: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(timestamp)
        .map_or_else(|_| chrono::Utc::now(), |t| t.with_timezone(&chrono::Utc))
        .format("%Y-%m-%d-%H%M")
        .to_string()
}

/// Writes `contents` to a temporary file next to `target`, synced, with the permissions an
/// ordinary new file gets (a temporary file is created readable by its owner only).
fn staged(target: &Path, contents: &[u8]) -> std::io::Result<tempfile::NamedTempFile> {
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".assay-tmp-")
        .tempfile_in(dir)?;
    tmp.write_all(contents)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.as_file().sync_all()?;
    Ok(tmp)
}

/// Writes `contents` to `target` atomically, failing with `AlreadyExists` rather than replacing
/// an existing file.
pub fn write_new(target: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = staged(target, contents)?;
    tmp.persist_noclobber(target).map_err(|e| e.error)?;
    Ok(())
}

/// Writes `contents` to `target` atomically, replacing it if it exists.
pub fn write_replace(target: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = staged(target, contents)?;
    tmp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

/// Saves a run's JSON, Markdown and HTML under `dir` with the first free stamp
/// (`<stamp>`, then `<stamp>-2`, `<stamp>-3`, …). Existing files are never overwritten.
pub fn save(
    dir: &Path,
    stamp: &str,
    json: &str,
    reports: Reports<'_>,
) -> std::io::Result<SavedResults> {
    std::fs::create_dir_all(dir)?;
    for n in 1..10_000 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let json_path = dir.join(format!("results_{stamp}{suffix}.json"));
        let md_path = dir.join(format!("report_{stamp}{suffix}.md"));
        let html_path = dir.join(format!("report_{stamp}{suffix}.html"));
        if json_path.exists() || md_path.exists() || html_path.exists() {
            continue;
        }
        match write_new(&json_path, json.as_bytes()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        let reports = write_new(&md_path, reports.markdown.as_bytes()).and_then(|()| {
            write_new(&html_path, reports.html.as_bytes())
                .inspect_err(|_| drop(std::fs::remove_file(&md_path)))
        });
        match reports {
            Ok(()) => {
                return Ok(SavedResults {
                    json: json_path,
                    markdown: md_path,
                    html: html_path,
                });
            }
            Err(e) => {
                // Keep the files together: take back the JSON we just wrote.
                std::fs::remove_file(&json_path)?;
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
            }
        }
    }
    Err(std::io::Error::other(format!(
        "no free results file name for stamp {stamp}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let r = |markdown| Reports {
            markdown,
            html: "<p>a</p>",
        };
        let a = save(dir.path(), "2026-11-21-2040", "{\"a\":1}", r("# a")).unwrap();
        let b = save(dir.path(), "2026-11-21-2040", "{\"b\":2}", r("# b")).unwrap();
        assert!(a.json.ends_with("results_2026-11-21-2040.json"));
        assert!(b.json.ends_with("results_2026-11-21-2040-2.json"));
        assert!(b.markdown.ends_with("report_2026-11-21-2040-2.md"));
        assert!(b.html.ends_with("report_2026-11-21-2040-2.html"));
        assert_eq!(std::fs::read_to_string(&a.json).unwrap(), "{\"a\":1}");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 6, "no temporary files left: {names:?}");
    }

    #[test]
    fn stamp_is_utc_minutes() {
        assert_eq!(stamp("2026-11-21T22:40:59+02:00"), "2026-11-21-2040");
    }

    #[cfg(unix)]
    #[test]
    fn saved_files_are_readable_by_others() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        write_new(&p, b"{}").unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
    }

    #[test]
    fn write_new_refuses_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        std::fs::write(&p, "old").unwrap();
        assert_eq!(
            write_new(&p, b"new").unwrap_err().kind(),
            std::io::ErrorKind::AlreadyExists
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
    }
}
