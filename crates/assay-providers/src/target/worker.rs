//! A long-lived worker as the system under test: `[optimize] target = "worker"` (a program that
//! stays up), `target = "python:pkg.module:function"` and `target = "node:./src/bot.js#answer"`
//! (a function, served by the worker that ships with assay for that language).
//!
//! # The protocol (JSON lines over stdio; docs/worker.md)
//!
//! Each worker process is started once and kept. assay writes one request per line on its
//! stdin: the JSON a command target receives on stdin ([`TargetRequest::body`]) plus an
//! integer `"id"` (and `"traceparent"` when the case has a span). The worker writes one reply
//! per line on stdout, in any order: the JSON a command target prints, plus the same `"id"`;
//! or `{"id": …, "error": "…"}` when the product failed on that request (an error of that case,
//! never a score). A dry-run request (`"dry_run": true`) is answered with the prompts' hashes,
//! as a command's is.
//!
//! # Failures stay with their requests
//!
//! * A request that takes longer than the timeout is an error; the worker, busy with it, is
//!   stopped and started again, and the other requests it held fail with that reason.
//! * A worker that exits, or writes a line that is not a reply (not JSON, no integer id, longer
//!   than `[answer] max_reply_bytes`), fails the requests it held (with the tail of its stderr);
//!   the next request starts a fresh one. Requests on other workers are untouched.
//! * A worker that dies before it answers anything three times in a row (an import error, a
//!   missing interpreter) is not started again: the requests that follow fail at once with the
//!   reason, so a broken product costs seconds, not one start-up per case.
//!
//! Requests go to the worker with the fewest in flight; the shipped workers answer one at a
//! time, so `workers = N` is how many cases run at once (with `stateless = true`).
//! [`Target::close`] closes every worker's stdin and waits for it to exit (then kills it), as
//! the end of a run does; a worker is killed when dropped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::oneshot;

use super::{TargetError, Wire, keep_reading_tail, keep_tail};

/// The Python worker that ships with assay (`python -m assay_eval.worker`), run from its
/// source so that `python:` targets need nothing but an interpreter.
pub const PYTHON_WORKER: &str = include_str!("../../../../python/assay_eval/worker.py");
/// The Node.js worker that ships with assay (`assay-eval/worker.js`), run from its source.
pub const NODE_WORKER: &str = include_str!("../../../../npm/assay-eval/worker.js");

/// Starts in a row that died before answering anything, after which a worker is not started
/// again.
const FAILED_STARTS: usize = 3;
/// How long [`Target::close`] waits for a worker to exit after its stdin closed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

type Reply = Result<String, String>;
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One running worker process.
#[derive(Debug)]
struct Worker {
    child: Mutex<Option<tokio::process::Child>>,
    stdin: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    pending: Pending,
    /// Why it stopped, once it did (then it takes no more requests).
    dead: Arc<Mutex<Option<String>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Replies it gave.
    answered: Arc<AtomicUsize>,
}

impl Worker {
    fn stderr_tail(&self) -> String {
        keep_tail(&String::from_utf8_lossy(&lock(&self.stderr)))
    }

    fn is_dead(&self) -> bool {
        lock(&self.dead).is_some()
    }

    /// Stops it: every request it holds fails with `reason`.
    fn kill(&self, reason: &str) {
        lock(&self.dead).get_or_insert_with(|| reason.to_owned());
        if let Some(child) = lock(&self.child).as_mut() {
            let _ = child.start_kill();
        }
        fail_all(&self.pending, reason);
    }
}

fn fail_all(pending: &Pending, reason: &str) {
    for (_, tx) in lock(pending).drain() {
        let _ = tx.send(Err(reason.to_owned()));
    }
}

/// Reads one line of at most `cap` bytes (without its newline). `Ok(None)` at the end;
/// `Err(n)` when the line is longer than `cap` (`n` bytes read so far).
async fn read_line_capped(
    reader: &mut BufReader<tokio::process::ChildStdout>,
    cap: usize,
) -> std::io::Result<Result<Option<Vec<u8>>, usize>> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(Ok((!line.is_empty()).then_some(line)));
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if line.len() > cap + 1 {
            return Ok(Err(line.len()));
        }
        if done {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Ok(Some(line)));
        }
    }
}

/// A long-lived worker pool (see the module docs).
#[derive(Debug)]
pub struct WorkerTarget {
    /// The target in words (`worker `…``, `python:pkg.mod:fn`, `node:./bot.js#answer`).
    pub label: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Where it runs (the project directory).
    pub dir: PathBuf,
    /// How long one request may take.
    pub timeout: Duration,
    /// Declared stateless in `assay.toml`.
    pub stateless: bool,
    /// The most bytes one reply line may hold.
    pub max_reply_bytes: usize,
    slots: Vec<tokio::sync::Mutex<Option<Arc<Worker>>>>,
    in_flight: Vec<AtomicUsize>,
    next_id: AtomicU64,
    failed_starts: AtomicUsize,
    last_start_failure: Mutex<Option<String>>,
    started: AtomicUsize,
}

impl WorkerTarget {
    /// A pool of `workers` processes (at least one) running `command` in `dir`, started when
    /// first needed.
    pub fn new(
        label: String,
        command: Vec<String>,
        dir: PathBuf,
        workers: usize,
        timeout: Duration,
        stateless: bool,
        max_reply_bytes: usize,
    ) -> WorkerTarget {
        let n = workers.max(1);
        WorkerTarget {
            label,
            command,
            dir,
            timeout,
            stateless,
            max_reply_bytes,
            slots: (0..n).map(|_| tokio::sync::Mutex::new(None)).collect(),
            in_flight: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            next_id: AtomicU64::new(1),
            failed_starts: AtomicUsize::new(0),
            last_start_failure: Mutex::new(None),
            started: AtomicUsize::new(0),
        }
    }

    /// How many worker processes were started so far (restarts included).
    pub fn starts(&self) -> usize {
        self.started.load(Ordering::Relaxed)
    }

    fn error(&self, problem: String, stderr: String) -> TargetError {
        TargetError::Worker {
            target: self.label.clone(),
            problem,
            stderr,
        }
    }

    /// The worker of slot `i`, started when it has none or its last one stopped.
    async fn worker(&self, i: usize) -> Result<Arc<Worker>, TargetError> {
        let mut slot = self.slots[i].lock().await;
        if let Some(w) = slot.as_ref() {
            if !w.is_dead() {
                return Ok(Arc::clone(w));
            }
            if w.answered.load(Ordering::Relaxed) == 0 {
                self.failed_starts.fetch_add(1, Ordering::Relaxed);
                let why = lock(&w.dead).clone().unwrap_or_default();
                let tail = w.stderr_tail();
                *lock(&self.last_start_failure) = Some(if tail.trim().is_empty() {
                    why
                } else {
                    format!("{why}; stderr: {}", tail.trim())
                });
            } else {
                self.failed_starts.store(0, Ordering::Relaxed);
            }
            *slot = None;
        }
        if self.failed_starts.load(Ordering::Relaxed) >= FAILED_STARTS {
            let last = lock(&self.last_start_failure).clone().unwrap_or_default();
            return Err(self.error(
                format!(
                    "not started again: {FAILED_STARTS} workers in a row stopped before answering anything (the last: {last})"
                ),
                String::new(),
            ));
        }
        let w = Arc::new(self.spawn()?);
        *slot = Some(Arc::clone(&w));
        Ok(w)
    }

    fn spawn(&self) -> Result<Worker, TargetError> {
        let (program, args) = self
            .command
            .split_first()
            .ok_or_else(|| self.error("empty command".into(), String::new()))?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .current_dir(&self.dir)
            .env("ASSAY_WORKER", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.error(format!("cannot start `{program}`: {e}"), String::new()))?;
        self.started.fetch_add(1, Ordering::Relaxed);
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(e) = child.stderr.take() {
            tokio::spawn(keep_reading_tail(e, Arc::clone(&stderr)));
        }
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let dead = Arc::new(Mutex::new(None));
        let answered = Arc::new(AtomicUsize::new(0));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let worker = Worker {
            child: Mutex::new(Some(child)),
            stdin: tokio::sync::Mutex::new(stdin),
            pending: Arc::clone(&pending),
            dead: Arc::clone(&dead),
            stderr: Arc::clone(&stderr),
            answered: Arc::clone(&answered),
        };
        if let Some(out) = stdout {
            let cap = self.max_reply_bytes;
            tokio::spawn(read_replies(
                BufReader::new(out),
                cap,
                pending,
                dead,
                answered,
            ));
        }
        Ok(worker)
    }

    /// The slot with the fewest requests in flight (the first of those).
    fn pick(&self) -> usize {
        (0..self.in_flight.len())
            .min_by_key(|i| self.in_flight[*i].load(Ordering::Relaxed))
            .unwrap_or(0)
    }

    async fn send(&self, slot: usize, body: &Value) -> Result<String, TargetError> {
        let worker = self.worker(slot).await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut request = body.clone();
        request["id"] = Value::from(id);
        if let Some(traceparent) = assay_telemetry::current_traceparent() {
            request["traceparent"] = Value::String(traceparent);
        }
        let mut line = serde_json::to_vec(&request).unwrap_or_default();
        line.push(b'\n');
        let (tx, rx) = oneshot::channel();
        lock(&worker.pending).insert(id, tx);
        let written = {
            let mut stdin = worker.stdin.lock().await;
            match stdin.as_mut() {
                Some(s) => match s.write_all(&line).await {
                    Ok(()) => s.flush().await,
                    Err(e) => Err(e),
                },
                None => Err(std::io::Error::other("its stdin is closed")),
            }
        };
        if let Err(e) = written {
            lock(&worker.pending).remove(&id);
            // It is gone (its reader says why when it sees the end); this request fails now.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let why = lock(&worker.dead)
                .clone()
                .unwrap_or_else(|| format!("cannot write the request: {e}"));
            worker.kill(&why);
            return Err(self.error(why, worker.stderr_tail()));
        }
        match tokio::time::timeout(self.timeout, rx).await {
            Err(_) => {
                lock(&worker.pending).remove(&id);
                let why = format!(
                    "a request timed out after {:.0} s, so the worker was stopped (it is started again for the next request)",
                    self.timeout.as_secs_f64()
                );
                worker.kill(&why);
                Err(self.error(
                    format!("timed out after {:.0} s", self.timeout.as_secs_f64()),
                    worker.stderr_tail(),
                ))
            }
            Ok(Err(_)) => Err(self.error(
                "the worker stopped without answering".into(),
                worker.stderr_tail(),
            )),
            Ok(Ok(Err(why))) => {
                // Let its stderr catch up with its death.
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(self.error(why, worker.stderr_tail()))
            }
            Ok(Ok(Ok(reply))) => {
                let value: Value = serde_json::from_str(&reply).unwrap_or(Value::Null);
                if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
                    let text = match error {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    return Err(self.error(
                        format!("the product failed on this request: {}", keep_tail(&text)),
                        String::new(),
                    ));
                }
                Ok(reply)
            }
        }
    }
}

/// Reads a worker's replies and hands each to its request, until the worker stops or writes
/// something that is not a reply.
async fn read_replies(
    mut out: BufReader<tokio::process::ChildStdout>,
    cap: usize,
    pending: Pending,
    dead: Arc<Mutex<Option<String>>>,
    answered: Arc<AtomicUsize>,
) {
    let reason = loop {
        match read_line_capped(&mut out, cap).await {
            Err(e) => break format!("cannot read its output: {e}"),
            Ok(Err(n)) => {
                break format!(
                    "it wrote a reply longer than {cap} bytes (`[answer] max_reply_bytes`; {n} bytes read), so it was stopped"
                );
            }
            Ok(Ok(None)) => break "it exited".to_owned(),
            Ok(Ok(Some(line))) => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let text = String::from_utf8_lossy(&line).into_owned();
                let id = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v.get("id").and_then(Value::as_u64));
                let Some(id) = id else {
                    break format!(
                        "it wrote a line that is not a reply (a JSON object with the request's integer \"id\"), so it was stopped: {}",
                        keep_tail(text.trim()).chars().take(200).collect::<String>()
                    );
                };
                answered.fetch_add(1, Ordering::Relaxed);
                if let Some(tx) = lock(&pending).remove(&id) {
                    let _ = tx.send(Ok(text));
                } else {
                    tracing::debug!(id, "a worker answered a request nobody waits for");
                }
            }
        }
    };
    let reason = lock(&dead).get_or_insert(reason).clone();
    fail_all(&pending, &reason);
}

#[async_trait]
impl Wire for WorkerTarget {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn is_stateless(&self) -> bool {
        self.stateless
    }

    async fn exchange(&self, body: &Value) -> Result<String, TargetError> {
        let slot = self.pick();
        self.in_flight[slot].fetch_add(1, Ordering::Relaxed);
        let out = self.send(slot, body).await;
        self.in_flight[slot].fetch_sub(1, Ordering::Relaxed);
        out
    }

    async fn close(&self) {
        for slot in &self.slots {
            let Some(worker) = slot.lock().await.take() else {
                continue;
            };
            // EOF on its stdin: the shipped workers finish what they hold and exit.
            worker.stdin.lock().await.take();
            let child = lock(&worker.child).take();
            if let Some(mut child) = child
                && tokio::time::timeout(CLOSE_GRACE, child.wait())
                    .await
                    .is_err()
            {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            lock(&worker.dead).get_or_insert_with(|| "closed".into());
        }
    }
}

impl Drop for WorkerTarget {
    fn drop(&mut self) {
        for slot in &self.slots {
            if let Ok(mut s) = slot.try_lock()
                && let Some(w) = s.take()
                && let Some(child) = lock(&w.child).as_mut()
            {
                let _ = child.start_kill();
            }
        }
    }
}

/// What a `python:` or `node:` target runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionTarget {
    /// `python` or `node`.
    pub language: &'static str,
    /// The function as written after the prefix.
    pub spec: String,
}

impl FunctionTarget {
    /// `python:pkg.module:function` or `node:./src/bot.js#answer`; `None` for other targets.
    pub fn parse(target: &str) -> Option<Result<FunctionTarget, String>> {
        if let Some(spec) = target.strip_prefix("python:") {
            return Some(check_python_spec(spec).map(|()| FunctionTarget {
                language: "python",
                spec: spec.to_owned(),
            }));
        }
        if let Some(spec) = target.strip_prefix("node:") {
            return Some(check_node_spec(spec).map(|()| FunctionTarget {
                language: "node",
                spec: spec.to_owned(),
            }));
        }
        None
    }

    /// The command that serves it: the interpreter (`interpreter`, else found as
    /// [`find_python`] / [`find_node`] say) running assay's worker from its source.
    pub fn command(&self, dir: &Path, interpreter: Option<&str>) -> Vec<String> {
        match self.language {
            "python" => vec![
                interpreter.map_or_else(|| find_python(dir), str::to_owned),
                "-c".into(),
                PYTHON_WORKER.into(),
                self.spec.clone(),
            ],
            _ => vec![
                interpreter.map_or_else(find_node, str::to_owned),
                "--input-type=commonjs".into(),
                "-e".into(),
                NODE_WORKER.into(),
                "--".into(),
                self.spec.clone(),
            ],
        }
    }
}

fn check_python_spec(spec: &str) -> Result<(), String> {
    let ident = |s: &str| {
        !s.is_empty()
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    let (module, function) = spec.split_once(':').ok_or_else(|| {
        format!("`python:{spec}`: name the function as python:package.module:function")
    })?;
    if !module.split('.').all(ident) {
        return Err(format!(
            "`python:{spec}`: `{module}` is not a module name (dotted Python identifiers)"
        ));
    }
    if !function.split('.').all(ident) {
        return Err(format!(
            "`python:{spec}`: `{function}` is not a function name (a Python identifier, or Class.method)"
        ));
    }
    Ok(())
}

fn check_node_spec(spec: &str) -> Result<(), String> {
    let (path, name) = spec.split_once('#').unwrap_or((spec, "default"));
    if path.trim().is_empty() {
        return Err(format!(
            "`node:{spec}`: name the module file, as node:./src/bot.js#answer"
        ));
    }
    if name.trim().is_empty() {
        return Err(format!(
            "`node:{spec}`: name the export after `#` (or leave `#` out for the default export)"
        ));
    }
    Ok(())
}

/// The Python a `python:` target runs: `$ASSAY_PYTHON`, else the active virtual environment's
/// (`$VIRTUAL_ENV`), else the one beside this `assay` (installed from the wheel into an
/// environment), else the project's `.venv`, else `python3` on `PATH`.
pub fn find_python(dir: &Path) -> String {
    if let Some(p) = std::env::var_os("ASSAY_PYTHON").filter(|p| !p.is_empty()) {
        return p.to_string_lossy().into_owned();
    }
    let bin = if cfg!(windows) { "Scripts" } else { "bin" };
    let exe = if cfg!(windows) {
        "python.exe"
    } else {
        "python"
    };
    let mut candidates = Vec::new();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").filter(|p| !p.is_empty()) {
        candidates.push(PathBuf::from(venv).join(bin).join(exe));
    }
    if let Some(here) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        candidates.push(here.join(exe));
    }
    candidates.push(dir.join(".venv").join(bin).join(exe));
    candidates.into_iter().find(|p| p.is_file()).map_or_else(
        || if cfg!(windows) { "python" } else { "python3" }.into(),
        |p| p.to_string_lossy().into_owned(),
    )
}

/// The Node.js a `node:` target runs: `$ASSAY_NODE`, else `node` on `PATH`.
pub fn find_node() -> String {
    std::env::var("ASSAY_NODE")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "node".into())
}

#[cfg(test)]
mod tests;
