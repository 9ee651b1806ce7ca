//! Shared helpers: a scratch copy of the example project and a way to run the binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The bundled example project.
pub fn example() -> PathBuf {
    repo_path("examples/coparent")
}

/// A path in the repository.
pub fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// Copies a folder as a checkout would have it: without `results/`, `reports/`, `target/` and
/// `.assay/` (runs, builds and local state).
pub(crate) fn copy_dir(src: &Path, dst: &Path) {
    copy_dir_keeping(src, dst, false);
}

/// The test virtualenv `scripts/ci-setup` makes (`ASSAY_TEST_PYTHON_VENV`, default
/// `target/test-venv`).
pub(crate) fn test_venv() -> PathBuf {
    std::env::var_os("ASSAY_TEST_PYTHON_VENV")
        .map_or_else(|| repo_path("target/test-venv"), PathBuf::from)
}

/// The Python the tests run: `ASSAY_TEST_PYTHON`, else the test virtualenv's.
pub(crate) fn test_python() -> PathBuf {
    std::env::var_os("ASSAY_TEST_PYTHON")
        .map_or_else(|| test_venv().join("bin/python"), PathBuf::from)
}

/// Copies a project; with `store`, its `.assay/kb.db` too (not its locks or caches).
fn copy_dir_keeping(src: &Path, dst: &Path, store: bool) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "results" || name == "reports" || name == "target" {
            continue;
        }
        if name == ".assay" {
            let db = entry.path().join("kb.db");
            if store && db.is_file() {
                std::fs::create_dir_all(dst.join(".assay")).unwrap();
                std::fs::copy(db, dst.join(".assay/kb.db")).unwrap();
            }
            continue;
        }
        let to = dst.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_dir_keeping(&entry.path(), &to, store);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

/// Example projects whose knowledge base is already embedded, per embedder: built once per
/// test process. Embedding the example's knowledge base with MiniLM takes about a minute in a
/// debug build; the tests that use MiniLM copy the store instead of redoing it (a store copied
/// with its files re-embeds nothing: the entities are unchanged, and the dense single-view
/// settings read the same embeddings).
static EMBEDDED: std::sync::Mutex<Vec<(String, Scratch)>> = std::sync::Mutex::new(Vec::new());

/// A scratch copy of the example project, removed on drop.
pub struct Scratch {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl Scratch {
    pub fn example() -> Scratch {
        Scratch::copy_of(&example())
    }

    /// An empty project folder, for a test that writes every file itself.
    pub fn empty() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        Scratch { _dir: dir, root }
    }

    /// A scratch copy of any project folder.
    pub fn copy_of(src: &Path) -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        copy_dir(src, &root);
        Scratch { _dir: dir, root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The example, pinned to 003's pipeline: `[retrieval] mode = "dense"`, `views = "single"`
    /// (the results the tests recorded before hybrid ranking became the default).
    /// A scratch copy of the example (`dense`: [`Scratch::example_dense`]) whose store already
    /// holds its knowledge base embedded with `embedder` (see [`EMBEDDED`]).
    pub fn example_embedded(embedder: &str, dense: bool) -> Scratch {
        let mut templates = EMBEDDED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = embedder.to_owned();
        if !templates.iter().any(|(k, _)| *k == key) {
            // Kept for the whole process (a static is never dropped): under target/tmp, so a
            // leftover goes with `cargo clean` rather than piling up in /tmp.
            let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            let root = dir.path().join("project");
            copy_dir(&example(), &root);
            let t = Scratch { _dir: dir, root };
            let root = t.root.to_str().unwrap().to_owned();
            let warm = assay_env(
                &[
                    "retrieve",
                    "warm up",
                    "--json",
                    "--project",
                    &root,
                    "--embedder",
                    embedder,
                ],
                &[],
            );
            assert_eq!(warm.code, 0, "embedding the example: {warm:?}");
            templates.push((key.clone(), t));
        }
        let template = &templates.iter().find(|(k, _)| *k == key).unwrap().1;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        copy_dir_keeping(&template.root, &root, true);
        let s = Scratch { _dir: dir, root };
        if dense {
            s.make_dense();
        }
        s
    }

    pub fn example_dense() -> Scratch {
        let p = Scratch::example();
        p.make_dense();
        p
    }

    /// Dense retrieval with one view per entity (003's pipeline).
    fn make_dense(&self) {
        let toml = self.read("assay.toml");
        self.write(
            "assay.toml",
            &format!("{toml}\n[retrieval]\nmode = \"dense\"\nviews = \"single\"\n"),
        );
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Replaces `from` (which must occur) with `to` in a file.
    pub fn edit(&self, rel: &str, from: &str, to: &str) {
        let text = self.read(rel);
        assert!(text.contains(from), "{rel} does not contain {from:?}");
        self.write(rel, &text.replacen(from, to, 1));
    }

    pub fn json(&self, rel: &str) -> serde_json::Value {
        serde_json::from_str(&self.read(rel)).unwrap()
    }

    pub fn write_json(&self, rel: &str, value: &serde_json::Value) {
        self.write(rel, &serde_json::to_string_pretty(value).unwrap());
    }

    /// Files in results/, sorted.
    pub fn results(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.path("results")) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    pub fn assay(&self, args: &[&str]) -> Run {
        self.assay_env(args, &[])
    }

    /// The arguments with the project directory after the subcommand words.
    fn full_args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut full: Vec<&str> = args.to_vec();
        let root = self.root.to_str().unwrap();
        let at = full
            .iter()
            .position(|a| a.starts_with("--"))
            .unwrap_or(full.len());
        full.insert(at, root);
        full
    }

    /// Runs the binary with extra environment variables.
    pub fn assay_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        assay_env(&self.full_args(args), env)
    }

    /// Starts the binary without waiting for it, its output kept for `wait_with_output`.
    pub fn spawn_output(&self, args: &[&str]) -> std::process::Child {
        self.spawn_with(args, &[], std::process::Stdio::piped)
    }

    /// Starts the binary with extra environment variables without waiting for it, its output
    /// kept for [`finished`].
    pub fn spawn_env_output(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        self.spawn_with(args, env, std::process::Stdio::piped)
    }

    /// Starts the binary without waiting for it.
    pub fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
        self.spawn_with(args, env, std::process::Stdio::null)
    }

    fn spawn_with(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        output: fn() -> std::process::Stdio,
    ) -> std::process::Child {
        Command::new(env!("CARGO_BIN_EXE_assay"))
            .args(self.full_args(args))
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdout(output())
            .stderr(output())
            .spawn()
            .unwrap()
    }
}

/// A RunLog (or any part of one) without what only measures its run: every `duration_ms`,
/// the run's and each case's. Two runs of the same cases compare equal once timeless.
pub fn timeless(mut value: serde_json::Value) -> serde_json::Value {
    match &mut value {
        serde_json::Value::Object(o) => {
            o.remove("duration_ms");
            for v in o.values_mut() {
                *v = timeless(v.take());
            }
        }
        serde_json::Value::Array(a) => {
            for v in a.iter_mut() {
                *v = timeless(v.take());
            }
        }
        _ => {}
    }
    value
}

/// The outcome of one run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Waits for a child started with its output kept and returns it as a [`Run`].
pub fn finished(child: std::process::Child) -> Run {
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn assay(args: &[&str]) -> Run {
    assay_env(args, &[])
}

pub fn assay_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args(args)
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Serves `app` on a free local port from a thread of its own (a two-worker runtime) and
/// returns its base URL, `http://127.0.0.1:PORT`.
pub fn serve(app: axum::Router) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}
