//! Shared helpers: a scratch copy of the example project, the router over it, requests, and a
//! snapshot of the project's files.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use assay_server::{AppState, app};
use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// The bundled example project.
pub fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/coparent")
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "results" || name == ".assay" {
            continue;
        }
        let to = dst.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

/// A scratch copy of the example project with the API over it.
pub struct Server {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub state: AppState,
    pub app: Router,
}

impl Server {
    /// The example project, with no environment variables.
    pub fn example() -> Server {
        Server::with_env(&[])
    }

    /// The example project, with these environment variables (and no others).
    pub fn with_env(vars: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        copy_dir(&example(), &root);
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let state = AppState::with_env(&root, Arc::new(move |name| vars.get(name).cloned()));
        let app = app(state.clone());
        Server {
            _dir: dir,
            root,
            state,
            app,
        }
    }

    /// The API over the folder `root` (inside `dir`, removed on drop), with no environment
    /// variables.
    pub fn over(dir: tempfile::TempDir, root: &Path) -> Server {
        let state = AppState::with_env(root, Arc::new(|_| None));
        Server {
            app: app(state.clone()),
            state,
            root: root.to_owned(),
            _dir: dir,
        }
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Appends to a file.
    pub fn append(&self, rel: &str, text: &str) {
        let path = self.root.join(rel);
        let old = std::fs::read_to_string(&path).unwrap();
        std::fs::write(path, format!("{old}{text}")).unwrap();
    }

    pub async fn get(&self, uri: &str) -> (StatusCode, Value) {
        self.request(Method::GET, uri, None).await
    }

    pub async fn post(&self, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
        self.request(Method::POST, uri, body).await
    }

    pub async fn request(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
    ) -> (StatusCode, Value) {
        self.request_with(method, uri, body, &[]).await
    }

    /// The raw response to a request with these headers.
    pub async fn raw(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
        headers: &[(&str, String)],
    ) -> Response<Body> {
        let mut req = Request::builder().method(method).uri(uri);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        let req = req
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
            .unwrap();
        self.app.clone().oneshot(req).await.unwrap()
    }

    /// A request with these headers; the answer must be JSON.
    pub async fn request_with(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
        headers: &[(&str, String)],
    ) -> (StatusCode, Value) {
        let response = self.raw(method, uri, body, headers).await;
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            content_type.as_deref(),
            Some("application/json"),
            "{uri}: not JSON: {}",
            String::from_utf8_lossy(&bytes)
        );
        let value = serde_json::from_slice(&bytes).unwrap();
        (status, value)
    }

    /// Every file of the project (but the `.assay` store and cache) with its contents.
    pub fn files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let entry = entry.unwrap();
                let path = entry.path();
                if entry.file_name() == ".assay" {
                    continue;
                }
                if entry.file_type().unwrap().is_dir() {
                    walk(root, &path, out);
                } else {
                    out.insert(
                        path.strip_prefix(root).unwrap().to_owned(),
                        std::fs::read(&path).unwrap(),
                    );
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.root, &self.root, &mut out);
        out
    }

    /// The files under `results/`.
    pub fn results(&self) -> Vec<String> {
        match std::fs::read_dir(self.root.join("results")) {
            Err(_) => Vec::new(),
            Ok(dir) => {
                let mut names: Vec<String> = dir
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                names
            }
        }
    }
}

/// Asserts a JSON error with this status whose message contains `needle`.
#[track_caller]
pub fn assert_error(got: &(StatusCode, Value), status: StatusCode, needle: &str) {
    let (s, body) = got;
    assert_eq!(*s, status, "{body:#}");
    assert_eq!(body["status"], status.as_u16(), "{body:#}");
    let message = body["error"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{needle:?} not in {message:?}");
    assert!(body["code"].is_string(), "{body:#}");
}

/// The test ids of the example's banks, by bank key.
pub fn bank_ids() -> BTreeMap<&'static str, Vec<String>> {
    let files = [
        ("semantic", "semantic/parent_test_bank.json"),
        ("state", "state/state_handler_tests.json"),
        ("pattern", "pattern/pattern_tests.json"),
        ("always", "always/always_load_tests.json"),
    ];
    files
        .into_iter()
        .map(|(bank, file)| {
            let text = std::fs::read_to_string(example().join("test_banks").join(file)).unwrap();
            let value: Value = serde_json::from_str(&text).unwrap();
            let ids = value["tests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["test_id"].as_str().unwrap().to_owned())
                .collect();
            (bank, ids)
        })
        .collect()
}

/// The semantic test ids with `topic`.
pub fn topic_ids(topic: &str) -> Vec<String> {
    let text = std::fs::read_to_string(example().join("test_banks/semantic/parent_test_bank.json"))
        .unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    value["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["topics"].as_array().unwrap().iter().any(|x| x == topic))
        .map(|t| t["test_id"].as_str().unwrap().to_owned())
        .collect()
}
