//! Scratch folders of a simulation, cleaned up after every run and after killed ones.
//!
//! Each `assay simulate` works in one folder `<root>/<stamp>-<pid>/` (the preflight and one
//! sub-folder per scenario run, with the servers' databases and logs). The folder's owner holds
//! an operating-system lock on `<root>/<stamp>-<pid>.lock` for as long as it runs; the kernel
//! releases it when the process ends in any way, `kill -9` included. So:
//!
//! * a run removes its folder and lock file when it ends ([`RunScratch`]'s `Drop`), unless asked
//!   to keep it (`--keep-workdirs`: a `KEPT` file inside marks it, and nothing removes it);
//! * a run first removes what earlier runs left ([`sweep`]): every folder whose lock nobody
//!   holds (its owner is gone), and folders of the old layout, which had no lock. A folder whose
//!   lock is held belongs to a run still going, perhaps in another process, and is left alone.
//!
//! The lock file is made under a temporary name, locked, then renamed into place, so a lock
//! file that exists under its real name is locked from the start: a sweep can never take the
//! lock of a run that is still setting up.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// The file that marks a folder kept on purpose (`--keep-workdirs`).
pub const KEPT_MARKER: &str = "KEPT";

/// This run's scratch folder, owned for as long as the value lives.
#[derive(Debug)]
pub struct RunScratch {
    dir: PathBuf,
    lock_path: PathBuf,
    lock: Option<File>,
    keep: bool,
}

impl RunScratch {
    /// Sweeps `root` ([`sweep`]), then makes and owns a new folder in it. With `keep`, the
    /// folder stays after the run (marked [`KEPT_MARKER`]).
    pub fn create(root: &Path, keep: bool) -> std::io::Result<RunScratch> {
        std::fs::create_dir_all(root)?;
        let removed = sweep(root);
        if removed > 0 {
            tracing::info!(
                removed,
                root = %root.display(),
                "removed scratch folders that killed runs left behind"
            );
        }
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f");
        let pid = std::process::id();
        let name = format!("{stamp}-{pid}");
        let lock_path = root.join(format!("{name}.lock"));
        let temporary = root.join(format!(".{name}.lock.tmp"));
        let lock = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        lock.try_lock().map_err(|e| match e {
            TryLockError::Error(e) => e,
            TryLockError::WouldBlock => std::io::Error::other("a new lock file is locked"),
        })?;
        std::fs::rename(&temporary, &lock_path)?;
        let dir = root.join(&name);
        std::fs::create_dir(&dir)?;
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        if keep {
            std::fs::write(
                dir.join(KEPT_MARKER),
                format!("kept by assay simulate (pid {pid}) --keep-workdirs\n"),
            )?;
        }
        Ok(RunScratch {
            dir,
            lock_path,
            lock: Some(lock),
            keep,
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RunScratch {
    fn drop(&mut self) {
        if !self.keep
            && let Err(e) = std::fs::remove_dir_all(&self.dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), "cannot remove the scratch folder: {e}");
        }
        // Remove the lock file while holding it, then let go.
        let _ = std::fs::remove_file(&self.lock_path);
        drop(self.lock.take());
    }
}

/// Removes from `root` the scratch folders whose owner is gone (their lock is free, or they
/// have none) and lock files left without a folder; keeps kept folders and the folders of runs
/// still going. Returns how many folders it removed. Failures are logged, never fatal.
pub fn sweep(root: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            if path.join(KEPT_MARKER).exists() {
                continue;
            }
            let lock_path = root.join(format!("{name}.lock"));
            let held = match lock_if_free(&lock_path) {
                LockState::Held => true,
                LockState::Free(_) | LockState::Missing => false,
            };
            if held {
                continue;
            }
            match std::fs::remove_dir_all(&path) {
                Ok(()) => removed += 1,
                Err(e) => {
                    tracing::warn!(dir = %path.display(), "cannot remove a stale scratch folder: {e}");
                    continue;
                }
            }
            let _ = std::fs::remove_file(&lock_path);
        } else if let Some(stem) = name.strip_suffix(".lock")
            && !stem.starts_with('.')
            && !root.join(stem).exists()
            && let LockState::Free(_) = lock_if_free(&path)
        {
            let _ = std::fs::remove_file(&path);
        } else if name.starts_with('.')
            && name.ends_with(".lock.tmp")
            && let LockState::Free(_) = lock_if_free(&path)
        {
            // A run killed between making its lock file and naming it.
            let _ = std::fs::remove_file(&path);
        }
    }
    removed
}

enum LockState {
    /// Another process holds it.
    Held,
    /// Nobody did: we hold it now (until the file is dropped).
    Free(#[allow(dead_code)] File),
    /// There is no lock file.
    Missing,
}

fn lock_if_free(path: &Path) -> LockState {
    let Ok(file) = OpenOptions::new().write(true).open(path) else {
        return LockState::Missing;
    };
    match file.try_lock() {
        Ok(()) => LockState::Free(file),
        // Held, or a lock we cannot even try: the owner may be alive, so its work stays.
        Err(TryLockError::WouldBlock | TryLockError::Error(_)) => LockState::Held,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(root: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(root)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_finished_run_leaves_nothing() {
        let root = tempfile::tempdir().unwrap();
        let scratch = RunScratch::create(root.path(), false).unwrap();
        std::fs::create_dir_all(scratch.dir().join("s-1")).unwrap();
        std::fs::write(scratch.dir().join("s-1/db.sqlite"), "x").unwrap();
        assert_eq!(names(root.path()).len(), 2, "the folder and its lock");
        drop(scratch);
        assert!(names(root.path()).is_empty(), "{:?}", names(root.path()));
    }

    #[test]
    fn a_kept_run_stays_and_is_never_swept() {
        let root = tempfile::tempdir().unwrap();
        let kept = RunScratch::create(root.path(), true).unwrap();
        let dir = kept.dir().to_owned();
        drop(kept);
        assert!(dir.join(KEPT_MARKER).is_file());
        assert_eq!(sweep(root.path()), 0);
        assert!(dir.is_dir());
    }

    #[test]
    fn leftovers_of_dead_owners_are_swept_and_live_runs_are_not() {
        let root = tempfile::tempdir().unwrap();
        // A killed run: its folder and a lock file nobody holds.
        std::fs::create_dir_all(root.path().join("20260101T000000.000-1/s-1")).unwrap();
        std::fs::write(root.path().join("20260101T000000.000-1.lock"), "").unwrap();
        // The old layout: a stamp folder with no lock at all, and the old preflight folder.
        std::fs::create_dir_all(root.path().join("20251231T000000.000/s-2")).unwrap();
        std::fs::create_dir_all(root.path().join("preflight")).unwrap();
        // A lock file whose folder is gone, and a half-made one.
        std::fs::write(root.path().join("20260101T000001.000-2.lock"), "").unwrap();
        std::fs::write(root.path().join(".20260101T000002.000-3.lock.tmp"), "").unwrap();
        // A run still going (this process holds its lock through another open file).
        let live = RunScratch::create(root.path(), false).unwrap();
        let live_name = live
            .dir()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(sweep(root.path()), 0, "a second sweep finds nothing more");
        let left = names(root.path());
        assert_eq!(
            left,
            vec![live_name.clone(), format!("{live_name}.lock")],
            "{left:?}"
        );
        drop(live);
        assert!(names(root.path()).is_empty());
    }
}
