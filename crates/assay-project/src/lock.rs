//! The project lock: one optimize, evaluate or prompt change at a time per project
//! (seed 001 CONC-001..015).
//!
//! [`ProjectLock::acquire`] takes an exclusive operating-system lock on `.assay/lock`
//! ([`std::fs::File::try_lock`]: `flock` on Unix, `LockFileEx` on Windows) without waiting.
//! The holder then writes who it is (pid, start time, operation, command line) to
//! `.assay/lock.json` atomically, so a refused run gets [`LockError::Held`] naming the holder.
//!
//! The operating-system lock, not the existence of a file, decides: the lock is released when
//! the [`ProjectLock`] is dropped and, because the kernel owns it, when the process dies in any
//! way (`kill -9` included). A `lock.json` left by a killed holder is stale and is simply
//! overwritten by the next holder; `.assay/lock` itself is never deleted (deleting a lock file
//! lets two processes lock two different files).
//!
//! Every event (acquired, refused, released) is logged with `tracing` (CONC-015).
//!
//! ```
//! use assay_project::lock::{LockError, ProjectLock};
//! let dir = tempfile::tempdir().unwrap();
//! let held = ProjectLock::acquire(dir.path(), "optimize", "assay optimize .").unwrap();
//! // A second attempt, even from the same process, is refused and names the holder.
//! match ProjectLock::acquire(dir.path(), "evaluate", "assay evaluate .") {
//!     Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
//!     other => panic!("{other:?}"),
//! }
//! drop(held);
//! ProjectLock::acquire(dir.path(), "evaluate", "assay evaluate .").unwrap();
//! ```

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The lock file, relative to the project.
pub const LOCK_FILE: &str = ".assay/lock";
/// The holder's description, relative to the project.
pub const HOLDER_FILE: &str = ".assay/lock.json";
/// The run lock (one `assay run` that journals or saves at a time per project: they share
/// `.assay/journal.jsonl`), relative to the project.
pub const RUN_LOCK_FILE: &str = ".assay/run.lock";
/// The run lock holder's description, relative to the project.
pub const RUN_HOLDER_FILE: &str = ".assay/run.json";

/// Who holds the lock, as written to `.assay/lock.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// The holder's process id.
    pub pid: u32,
    /// When it took the lock (RFC 3339, UTC).
    pub started: String,
    /// What it is doing: `optimize`, `evaluate`, `prompts promote`, …
    pub operation: String,
    /// Its command line.
    pub command: String,
    /// What it works on, when the operation has a subject (the experiment an `optimize`
    /// runs), so that a reader can tell which experiment is running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process (or another lock in this one) holds it. The holder's details come from
    /// `.assay/lock.json` and are `None` when it could not be read.
    #[error("{}", held_message(.path, .pid.as_ref(), .started.as_deref(), .operation.as_deref(), .command.as_deref()))]
    Held {
        /// The lock file.
        path: PathBuf,
        /// The holder's process id.
        pid: Option<u32>,
        /// When the holder took the lock.
        started: Option<String>,
        /// What the holder is doing.
        operation: Option<String>,
        /// The holder's command line.
        command: Option<String>,
    },
    /// Another process kept the knowledge-base lock longer than the wait.
    #[error("the knowledge base is being changed by another assay process ({} held for {waited_secs:.0} s); try again", path.display())]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// How long this process waited.
        waited_secs: f64,
    },
    /// The lock file could not be created or locked.
    #[error("cannot lock {}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
}

impl LockError {
    /// Whether the lock failed for a reason outside the user's request (the file system),
    /// rather than because another run holds it.
    pub fn is_infrastructure(&self) -> bool {
        matches!(self, LockError::Io { .. } | LockError::Busy { .. })
    }
}

fn held_message(
    path: &Path,
    pid: Option<&u32>,
    started: Option<&str>,
    operation: Option<&str>,
    command: Option<&str>,
) -> String {
    let project = path
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| path.display().to_string(), |p| p.display().to_string());
    let rule = if path.ends_with(RUN_LOCK_FILE) {
        "one `assay run` at a time per project (runs share its journal, .assay/journal.jsonl): start the next one when this one has finished"
    } else {
        "one optimize, evaluate or prompt change runs at a time per project: wait for it to finish, or stop it"
    };
    match pid {
        Some(pid) => format!(
            "another assay run holds the lock on project {project}: {} (pid {pid}, started {}, command: {}); {rule}",
            operation.unwrap_or("unknown operation"),
            started.unwrap_or("unknown"),
            command.unwrap_or("unknown"),
        ),
        None => format!(
            "another assay run holds the lock on project {project} ({}; its holder did not say who it is); \
             one optimize, evaluate or prompt change runs at a time per project",
            path.display()
        ),
    }
}

/// The knowledge-base lock file, relative to the project.
pub const KB_LOCK_FILE: &str = ".assay/kb.lock";
/// How long [`KbLock::acquire`] waits for another process's knowledge-base write.
pub const KB_LOCK_WAIT: Duration = Duration::from_secs(30);

/// An exclusive hold on a project's knowledge base, across processes: an operating-system lock
/// on `.assay/kb.lock`, released when dropped or when the process dies.
///
/// With `kb/` files as the source of truth, an edit is a read of the files, a version check, a
/// file rewrite and an import into the store; an import alone reads the files and writes the
/// store. Each of these holds the lock from the moment it reads the files until its store write
/// is done, so two servers, or a server and `assay kb update`, never both pass a version check
/// for the same version, and an import never writes files read before another edit landed.
/// Unlike [`ProjectLock`] it waits (writes are short), up to a bound.
#[derive(Debug)]
pub struct KbLock {
    file: File,
    path: PathBuf,
}

impl KbLock {
    /// Takes the knowledge-base lock of the project at `project_root`, waiting up to
    /// [`KB_LOCK_WAIT`] for another holder.
    pub fn acquire(project_root: &Path) -> Result<KbLock, LockError> {
        KbLock::acquire_within(project_root, KB_LOCK_WAIT)
    }

    /// [`KbLock::acquire`], waiting up to `wait`.
    pub fn acquire_within(project_root: &Path, wait: Duration) -> Result<KbLock, LockError> {
        let path = project_root.join(KB_LOCK_FILE);
        let file = open_lock_file(&path)?;
        let start = std::time::Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let waited = start.elapsed();
                    if waited >= wait {
                        return Err(LockError::Busy {
                            path,
                            waited_secs: waited.as_secs_f64(),
                        });
                    }
                    std::thread::sleep(pause.min(wait.saturating_sub(waited)));
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(TryLockError::Error(e)) => {
                    return Err(LockError::Io {
                        path,
                        message: e.to_string(),
                    });
                }
            }
        }
        tracing::debug!(lock = %path.display(), waited_ms = start.elapsed().as_millis() as u64, "knowledge-base lock acquired");
        Ok(KbLock { file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for KbLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
        tracing::debug!(lock = %self.path.display(), "knowledge-base lock released");
    }
}

/// An exclusive hold on a project; released when dropped or when the process ends.
#[derive(Debug)]
pub struct ProjectLock {
    file: File,
    path: PathBuf,
    holder_path: PathBuf,
    holder: LockHolder,
}

impl ProjectLock {
    /// Takes the project's lock without waiting, or says who holds it.
    pub fn acquire(
        project_root: &Path,
        operation: &str,
        command_line: &str,
    ) -> Result<ProjectLock, LockError> {
        ProjectLock::acquire_for(project_root, operation, None, command_line)
    }

    /// [`ProjectLock::acquire`] for an operation on `subject` (the experiment an `optimize`
    /// runs), which the holder's description records.
    pub fn acquire_for(
        project_root: &Path,
        operation: &str,
        subject: Option<&str>,
        command_line: &str,
    ) -> Result<ProjectLock, LockError> {
        ProjectLock::acquire_at(
            project_root.join(LOCK_FILE),
            project_root.join(HOLDER_FILE),
            operation,
            subject,
            command_line,
        )
    }

    /// The run lock (`.assay/run.lock`), without waiting: an `assay run` that journals or
    /// saves holds it from before its journal is opened until its results are saved, so two
    /// runs never share a journal. Optimizations and simulations do not take it.
    pub fn acquire_run(project_root: &Path, command_line: &str) -> Result<ProjectLock, LockError> {
        ProjectLock::acquire_at(
            project_root.join(RUN_LOCK_FILE),
            project_root.join(RUN_HOLDER_FILE),
            "run",
            None,
            command_line,
        )
    }

    fn acquire_at(
        path: PathBuf,
        holder_path: PathBuf,
        operation: &str,
        subject: Option<&str>,
        command_line: &str,
    ) -> Result<ProjectLock, LockError> {
        let io = |e: &std::io::Error| LockError::Io {
            path: path.clone(),
            message: e.to_string(),
        };
        let file = open_lock_file(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = read_holder(&holder_path);
                // Info, not warn: the refusal itself reaches the user as the error.
                tracing::info!(
                    lock = %path.display(),
                    operation,
                    holder_pid = holder.as_ref().map(|h| h.pid),
                    holder_operation = holder.as_ref().map(|h| h.operation.as_str()),
                    "project lock refused: held by another run"
                );
                return Err(match holder {
                    Some(h) => LockError::Held {
                        path,
                        pid: Some(h.pid),
                        started: Some(h.started),
                        operation: Some(h.operation),
                        command: Some(h.command),
                    },
                    None => LockError::Held {
                        path,
                        pid: None,
                        started: None,
                        operation: None,
                        command: None,
                    },
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(&e)),
        }
        let holder = LockHolder {
            pid: std::process::id(),
            started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            operation: operation.to_owned(),
            command: command_line.to_owned(),
            subject: subject.map(str::to_owned),
        };
        let json = serde_json::to_vec_pretty(&holder).unwrap_or_default();
        if let Err(e) = crate::results::write_replace(&holder_path, &json) {
            // The lock is ours; only the description failed. Say so, but hold on.
            tracing::warn!(file = %holder_path.display(), "cannot describe the lock holder: {e}");
        }
        tracing::info!(
            lock = %path.display(),
            operation,
            pid = holder.pid,
            "project lock acquired"
        );
        Ok(ProjectLock {
            file,
            path,
            holder_path,
            holder,
        })
    }

    /// Who holds it (this process).
    pub fn holder(&self) -> &LockHolder {
        &self.holder
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ProjectLock {
    fn drop(&mut self) {
        // Take our description away first (only if it is still ours), then unlock.
        if read_holder(&self.holder_path).as_ref() == Some(&self.holder) {
            let _ = std::fs::remove_file(&self.holder_path);
        }
        let _ = self.file.unlock();
        tracing::info!(
            lock = %self.path.display(),
            operation = self.holder.operation,
            "project lock released"
        );
    }
}

/// Whether a project's lock is held, as [`probe`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// Nobody holds it.
    Free,
    /// Someone does; who, when `.assay/lock.json` says.
    Held(Option<LockHolder>),
}

/// Whether the project's lock is held, and by whom, for pages that show what is running. It
/// writes nothing: with no `.assay/lock` nobody has ever held it; otherwise the lock is tried
/// and, when free, released at once (a window of microseconds in which another `acquire` would
/// be refused).
pub fn probe(project_root: &Path) -> Result<LockState, LockError> {
    let path = project_root.join(LOCK_FILE);
    let file = match OpenOptions::new().read(true).write(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LockState::Free),
        Err(e) => {
            return Err(LockError::Io {
                path,
                message: e.to_string(),
            });
        }
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(LockState::Free)
        }
        Err(TryLockError::WouldBlock) => Ok(LockState::Held(read_holder(
            &project_root.join(HOLDER_FILE),
        ))),
        Err(TryLockError::Error(e)) => Err(LockError::Io {
            path,
            message: e.to_string(),
        }),
    }
}

/// Opens (creating it and its folder) a lock file; it is never truncated or deleted.
fn open_lock_file(path: &Path) -> Result<File, LockError> {
    let io = |e: &std::io::Error| LockError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io(&e))?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io(&e))
}

/// Reads the holder's description. A holder that has just taken the lock may not have written
/// it yet: a missing or unreadable file is retried for a short while.
fn read_holder(path: &Path) -> Option<LockHolder> {
    for attempt in 0..10 {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(holder) = serde_json::from_str::<LockHolder>(&text)
        {
            return Some(holder);
        }
        if attempt < 9 {
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    const CHILD_ENV: &str = "ASSAY_LOCK_TEST_CHILD_PROJECT";

    #[test]
    fn probing_says_who_holds_the_lock_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(probe(dir.path()).unwrap(), LockState::Free);
        assert!(
            !dir.path().join(".assay").exists(),
            "a probe creates nothing"
        );
        let lock =
            ProjectLock::acquire_for(dir.path(), "optimize", Some("exp1"), "assay optimize .")
                .unwrap();
        match probe(dir.path()).unwrap() {
            LockState::Held(Some(h)) => {
                assert_eq!(h.subject.as_deref(), Some("exp1"));
                assert_eq!(h.operation, "optimize");
            }
            other => panic!("{other:?}"),
        }
        drop(lock);
        assert_eq!(probe(dir.path()).unwrap(), LockState::Free);
        // The probe released what it tried: the lock can be taken again.
        ProjectLock::acquire(dir.path(), "evaluate", "assay evaluate .").unwrap();
    }

    #[test]
    fn second_acquire_is_refused_with_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let lock = ProjectLock::acquire(dir.path(), "optimize", "assay optimize . -n 5").unwrap();
        assert!(dir.path().join(HOLDER_FILE).is_file());
        let err = ProjectLock::acquire(dir.path(), "evaluate", "assay evaluate .").unwrap_err();
        let LockError::Held {
            pid,
            started,
            operation,
            command,
            ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(*pid, Some(std::process::id()));
        assert_eq!(started.as_deref(), Some(lock.holder().started.as_str()));
        assert_eq!(operation.as_deref(), Some("optimize"));
        assert_eq!(command.as_deref(), Some("assay optimize . -n 5"));
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("command: assay optimize . -n 5"), "{msg}");
        assert!(!err.is_infrastructure());
        drop(lock);
        assert!(
            !dir.path().join(HOLDER_FILE).exists(),
            "description removed"
        );
        assert!(dir.path().join(LOCK_FILE).exists(), "the lock file stays");
        ProjectLock::acquire(dir.path(), "evaluate", "assay evaluate .").unwrap();
    }

    #[test]
    fn the_kb_lock_waits_then_says_who_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let held = KbLock::acquire(dir.path()).unwrap();
        let start = std::time::Instant::now();
        let err = KbLock::acquire_within(dir.path(), Duration::from_millis(150)).unwrap_err();
        assert!(start.elapsed() >= Duration::from_millis(150));
        assert!(matches!(err, LockError::Busy { .. }), "{err:?}");
        assert!(err.is_infrastructure());
        assert!(
            err.to_string()
                .contains("being changed by another assay process"),
            "{err}"
        );
        // Released on drop, and taken by a waiter as soon as it is.
        let waiter = {
            let root = dir.path().to_owned();
            std::thread::spawn(move || {
                KbLock::acquire_within(&root, Duration::from_secs(10)).map(drop)
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        waiter.join().unwrap().unwrap();
        // The project lock is another file: holding one does not block the other.
        let _kb = KbLock::acquire(dir.path()).unwrap();
        ProjectLock::acquire(dir.path(), "optimize", "x").unwrap();
    }

    #[test]
    fn a_stale_description_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".assay")).unwrap();
        let stale = LockHolder {
            pid: 999_999,
            started: "2026-01-01T00:00:00Z".into(),
            operation: "optimize".into(),
            command: "assay optimize (killed)".into(),
            subject: None,
        };
        std::fs::write(
            dir.path().join(HOLDER_FILE),
            serde_json::to_string(&stale).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "").unwrap();
        let lock = ProjectLock::acquire(dir.path(), "optimize", "assay optimize .").unwrap();
        let now: LockHolder =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(HOLDER_FILE)).unwrap())
                .unwrap();
        assert_eq!(now.pid, std::process::id());
        assert_eq!(&now, lock.holder());
    }

    #[test]
    fn an_unwritable_project_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        // `.assay` is a file, so the lock cannot be created under it.
        std::fs::write(dir.path().join(".assay"), "").unwrap();
        let err = ProjectLock::acquire(dir.path(), "optimize", "x").unwrap_err();
        assert!(matches!(err, LockError::Io { .. }), "{err:?}");
        assert!(err.is_infrastructure());
    }

    /// Outside the child role: a lock taken and dropped in-process can be taken again. As the
    /// child of `held_by_a_child_process_then_freed_by_its_death` (the variable set), it takes
    /// the lock, says so on stdout and waits to be killed.
    #[test]
    fn child_role_holds_the_lock() {
        let Some(project) = std::env::var_os(CHILD_ENV) else {
            let dir = tempfile::tempdir().unwrap();
            drop(ProjectLock::acquire(dir.path(), "optimize", "first").unwrap());
            let again = ProjectLock::acquire(dir.path(), "optimize", "second").unwrap();
            assert_eq!(again.holder().command, "second");
            return;
        };
        let _lock = ProjectLock::acquire(Path::new(&project), "optimize", "child holder").unwrap();
        #[allow(clippy::print_stdout)]
        {
            println!("LOCKED");
        }
        std::thread::sleep(Duration::from_secs(120));
    }

    #[test]
    fn held_by_a_child_process_then_freed_by_its_death() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "lock::tests::child_role_holds_the_lock",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let locked = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.contains("LOCKED"));
        assert!(locked, "the child never took the lock");

        let err = ProjectLock::acquire(dir.path(), "optimize", "parent").unwrap_err();
        match &err {
            LockError::Held { pid, command, .. } => {
                assert_eq!(*pid, Some(child.id()));
                assert_eq!(command.as_deref(), Some("child holder"));
            }
            other @ (LockError::Io { .. } | LockError::Busy { .. }) => panic!("{other:?}"),
        }

        // kill -9: the child cannot clean up; the kernel releases the lock.
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            dir.path().join(HOLDER_FILE).exists(),
            "a stale description stays behind"
        );
        let lock = ProjectLock::acquire(dir.path(), "optimize", "parent").unwrap();
        assert_eq!(lock.holder().pid, std::process::id());
    }
}
