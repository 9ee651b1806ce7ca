//! Saving a run: `results/results_<stamp>.json`, `results/report_<stamp>.md` and
//! `results/report_<stamp>.html`, written atomically (temporary file, then a link that never replaces an existing file).
//!
//! Every atomic write of assay goes through here ([`write_new`], [`write_replace`],
//! [`write_replace_with`], [`temporary`]): the temporary file is `.assay-tmp-…` beside the
//! target, and its writer holds an operating-system lock on it for as long as it is open (the
//! kernel releases it when the process ends in any way, `kill -9` included). A process killed
//! mid-write leaves its temporary file behind; the next write into that folder sweeps it
//! ([`sweep`]): only files whose lock nobody holds and that have not changed for
//! [`SWEEP_AFTER`], so a file another live process is writing is never touched.

use std::collections::HashSet;
use std::fs::{File, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How every temporary file of an atomic write is named: `.assay-tmp-` and random letters.
pub const TEMP_PREFIX: &str = ".assay-tmp-";

/// How long a temporary file must have been left unchanged before a sweep may remove it, on
/// top of its lock being free: the lock proves its writer is gone; the age covers the instant
/// between a writer creating the file and locking it.
pub const SWEEP_AFTER: Duration = Duration::from_secs(120);

/// A new temporary file in `dir` (`.assay-tmp-…<suffix>`), locked for as long as it is open,
/// after sweeping what killed writers left in `dir` (once per folder and process).
pub fn temporary(dir: &Path, suffix: &str) -> std::io::Result<tempfile::NamedTempFile> {
    sweep_once(dir);
    let tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .suffix(suffix)
        .tempfile_in(dir)?;
    // A file system without locks still gets its file: a sweep cannot take its lock either,
    // and leaves it alone.
    if let Err(e) = tmp.as_file().try_lock() {
        tracing::debug!(path = %tmp.path().display(), "cannot lock a temporary file: {e}");
    }
    Ok(tmp)
}

/// A temporary file kept by its path (removed when dropped) whose lock stays held: what a
/// writer hands on once it has finished writing and closed the file, until the file is moved
/// into place or dropped.
#[derive(Debug)]
pub struct HeldTemp {
    path: tempfile::TempPath,
    _lock: File,
}

impl HeldTemp {
    /// Keeps `file`'s path and its lock (through a second handle of the same open file).
    pub fn new(file: tempfile::NamedTempFile) -> std::io::Result<HeldTemp> {
        let lock = file.as_file().try_clone()?;
        Ok(HeldTemp {
            path: file.into_temp_path(),
            _lock: lock,
        })
    }
}

impl std::ops::Deref for HeldTemp {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

/// Sweeps `dir` the first time this process writes there ([`sweep`]).
fn sweep_once(dir: &Path) {
    static SWEPT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let first = SWEPT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(dir.to_owned());
    if first {
        let removed = sweep(dir);
        if removed > 0 {
            tracing::info!(
                removed,
                dir = %dir.display(),
                "removed temporary files that killed processes left behind"
            );
        }
    }
}

/// Removes from `dir` the temporary files of atomic writes (`.assay-tmp-*`, and the run logs
/// of `assay runs merge` before they had that name, `.assay-merge-*`) that are provably
/// abandoned: unchanged for [`SWEEP_AFTER`] and locked by no process. A file whose lock is
/// held, or whose lock cannot be tried, is left alone. Returns how many it removed; failures
/// are logged, never fatal.
pub fn sweep(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !(name.starts_with(TEMP_PREFIX) || name.starts_with(".assay-merge-")) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= SWEEP_AFTER);
        if !meta.is_file() || !old {
            continue;
        }
        let path = entry.path();
        let Ok(file) = File::open(&path) else {
            continue;
        };
        match file.try_lock() {
            Ok(()) => match std::fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) => tracing::debug!(path = %path.display(), "cannot remove: {e}"),
            },
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => {
                tracing::debug!(path = %path.display(), "cannot tell whether a writer holds it: {e}");
            }
        }
    }
    removed
}

/// Where a run was saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedResults {
    /// The RunLog.
    pub json: PathBuf,
    /// The Markdown report.
    pub markdown: PathBuf,
    /// The self-contained HTML report.
    pub html: PathBuf,
    /// The run log (every case, one a line), when the run kept one.
    pub cases: Option<PathBuf>,
}

/// A run rendered for saving: the RunLog and its reports.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// The RunLog as JSON.
    pub json: String,
    /// The Markdown report.
    pub markdown: String,
    /// The HTML report.
    pub html: String,
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
    let mut tmp = temporary(dir, "")?;
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

/// Writes what `write` produces to `target` atomically (a temporary file beside it, synced,
/// then renamed), replacing it if it exists: for output too large to hold in memory.
pub fn write_replace_with(
    target: &Path,
    write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = staged(target, b"")?;
    let mut out = std::io::BufWriter::new(tmp.as_file());
    write(&mut out)?;
    out.flush()?;
    drop(out);
    tmp.as_file().sync_all()?;
    tmp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

/// Writes `contents` to `target` atomically, replacing it if it exists.
pub fn write_replace(target: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = staged(target, contents)?;
    tmp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

/// Saves a run under `dir` with the first free stamp (`<stamp>`, then `<stamp>-2`, …): its run
/// log when it has one (`cases`, moved to `cases_<stamp>.jsonl`), then the RunLog and the
/// reports `render` makes, given the run log's new file name. Existing files are never
/// overwritten; a save that fails part way takes back what it wrote (the run log stays where
/// it was).
pub fn save(
    dir: &Path,
    stamp: &str,
    cases: Option<&Path>,
    render: &mut dyn FnMut(Option<&str>) -> Rendered,
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
        let cases_name = format!("cases_{stamp}{suffix}.jsonl");
        let cases_path = dir.join(&cases_name);
        if [&json_path, &md_path, &html_path, &cases_path]
            .iter()
            .any(|p| p.exists())
        {
            continue;
        }
        // The run log is linked into place (never replacing a file) before the RunLog that
        // names it is written.
        let moved = match cases {
            Some(from) => match link_new(from, &cases_path) {
                Ok(()) => Some(cases_path.clone()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            },
            None => None,
        };
        let take_back = || {
            if let Some(p) = &moved {
                drop(std::fs::remove_file(p));
            }
        };
        let rendered = render(moved.as_ref().map(|_| cases_name.as_str()));
        match write_new(&json_path, rendered.json.as_bytes()) {
            Ok(()) => {}
            Err(e) => {
                take_back();
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    continue;
                }
                return Err(e);
            }
        }
        let reports = write_new(&md_path, rendered.markdown.as_bytes()).and_then(|()| {
            write_new(&html_path, rendered.html.as_bytes())
                .inspect_err(|_| drop(std::fs::remove_file(&md_path)))
        });
        match reports {
            Ok(()) => {
                if let Some(from) = cases {
                    // The run log now lives beside the RunLog.
                    drop(std::fs::remove_file(from));
                }
                return Ok(SavedResults {
                    json: json_path,
                    markdown: md_path,
                    html: html_path,
                    cases: moved,
                });
            }
            Err(e) => {
                // Keep the files together: take back what we just wrote.
                std::fs::remove_file(&json_path)?;
                take_back();
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

/// Gives `from` the second name `to` (failing with `AlreadyExists` rather than replacing a
/// file), synced; copies where a hard link is not possible (another file system).
fn link_new(from: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(from, to) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(e),
        Err(_) => {
            let mut tmp = temporary(to.parent().unwrap_or(Path::new(".")), "")?;
            std::io::copy(&mut std::fs::File::open(from)?, tmp.as_file_mut())?;
            tmp.persist_noclobber(to).map_err(|e| e.error)?;
        }
    }
    std::fs::File::open(to)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_takes_only_old_unlocked_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let old = std::time::SystemTime::now() - SWEEP_AFTER - Duration::from_secs(60);
        let make = |name: &str, aged: bool| {
            let path = dir.path().join(name);
            std::fs::write(&path, "x").unwrap();
            if aged {
                let f = File::options().write(true).open(&path).unwrap();
                f.set_modified(old).unwrap();
            }
            path
        };
        make(".assay-tmp-dead", true);
        make(".assay-merge-dead.jsonl", true);
        make(".assay-tmp-fresh", false);
        make("report.md", true);
        let live = make(".assay-tmp-live", true);
        let held = File::open(&live).unwrap();
        held.lock().unwrap();
        assert_eq!(sweep(dir.path()), 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec![".assay-tmp-fresh", ".assay-tmp-live", "report.md"]
        );
        drop(held);
        assert_eq!(sweep(dir.path()), 1, "its writer gone, the old file goes");
    }

    #[test]
    fn a_temporary_file_is_locked_while_its_writer_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = temporary(dir.path(), ".jsonl").unwrap();
        let name = tmp
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with(TEMP_PREFIX), "{name}");
        assert_eq!(
            tmp.path().extension(),
            Some(std::ffi::OsStr::new("jsonl")),
            "{name}"
        );
        let other = File::open(tmp.path()).unwrap();
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        // Handed on as a path, it stays locked until dropped, then it is gone.
        let held = HeldTemp::new(tmp).unwrap();
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        let path = held.to_path_buf();
        drop(held);
        assert!(!path.exists());
    }

    #[test]
    fn never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let r = |json: &str, markdown: &str| Rendered {
            json: json.into(),
            markdown: markdown.into(),
            html: "<p>a</p>".into(),
        };
        let a = save(dir.path(), "2026-11-21-2040", None, &mut |_| {
            r("{\"a\":1}", "# a")
        })
        .unwrap();
        let b = save(dir.path(), "2026-11-21-2040", None, &mut |_| {
            r("{\"b\":2}", "# b")
        })
        .unwrap();
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
    fn the_run_log_moves_beside_the_run_it_belongs_to() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal.jsonl");
        std::fs::write(&journal, "{}\n").unwrap();
        // A stamp whose first name is taken by a run log goes to the next.
        std::fs::write(dir.path().join("cases_2026-11-21-2040.jsonl"), "x").unwrap();
        let mut named = None;
        let saved = save(dir.path(), "2026-11-21-2040", Some(&journal), &mut |name| {
            named = name.map(str::to_owned);
            Rendered::default()
        })
        .unwrap();
        assert_eq!(named.as_deref(), Some("cases_2026-11-21-2040-2.jsonl"));
        assert!(saved.json.ends_with("results_2026-11-21-2040-2.json"));
        assert_eq!(
            std::fs::read_to_string(saved.cases.unwrap()).unwrap(),
            "{}\n"
        );
        assert!(!journal.exists());
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
