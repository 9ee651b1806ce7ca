//! Real OpenTelemetry trace receivers from PyPI, for the export tests: an MLflow tracking server
//! (OTLP/HTTP at `/v1/traces`, protobuf or JSON, the `x-mlflow-experiment-id` header required) and
//! an Arize Phoenix server (OTLP/HTTP at `/v1/traces`, protobuf only: JSON gets 415; the project
//! is the resource attribute `openinference.project.name`, else `default`). Each runs on free
//! ports with its store in a temporary folder, with telemetry off and nothing fetched from the
//! network, and is stopped (its whole process group) when the [`Backend`] is dropped.
//! [`Backend::spans`] reads every stored span back through the backend's own API
//! (`crates/assay-cli/tests/otel_fetch.py`, which notes what each backend changes in a span).
//!
//! MLflow comes from the test virtualenv (`target/test-venv`), Phoenix from its own
//! (`target/test-venv-phoenix`, `ASSAY_TEST_PHOENIX_VENV`): both made by `scripts/ci-setup`.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::support::{repo_path, test_python};

/// How long a server may take to answer its health check (about 15 s on an idle machine).
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// A running trace receiver.
pub struct Backend {
    /// `mlflow` or `phoenix`.
    pub kind: &'static str,
    /// The base URL for `OTEL_EXPORTER_OTLP_ENDPOINT`: `endpoint + "/v1/traces"` is the OTLP path.
    pub endpoint: String,
    /// Headers every export must carry (MLflow: `x-mlflow-experiment-id`).
    pub headers: Vec<(String, String)>,
    child: Child,
    dir: tempfile::TempDir,
}

/// A span as the backend stored it.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::struct_field_names, reason = "OTLP's names")]
pub struct Span {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    /// `OK`, `ERROR` or `UNSET`.
    pub status: String,
    /// Phoenix: the project; MLflow: the experiment id.
    pub project: String,
    /// Values as JSON numbers, strings, booleans (MLflow's JSON encoding undone). Backends add
    /// attributes of their own (`mlflow.*`; OpenInference's `llm.*`, `retrieval.*`).
    pub attributes: Map<String, Value>,
    pub events: Vec<Event>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub name: String,
    pub attributes: Map<String, Value>,
}

impl Span {
    /// An attribute whose value is JSON text (`gen_ai.retrieval.documents`), parsed: Phoenix keeps
    /// the string as sent, MLflow hands it back already parsed; this reads both the same.
    pub fn json_attr(&self, key: &str) -> Option<Value> {
        match self.attributes.get(key)? {
            Value::String(s) => Some(serde_json::from_str(s).unwrap_or(Value::String(s.clone()))),
            other => Some(other.clone()),
        }
    }

    /// The events of this name.
    pub fn events_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Event> + 'a {
        self.events.iter().filter(move |e| e.name == name)
    }
}

impl Backend {
    /// Every span stored, ordered by trace and span id.
    pub fn spans(&self) -> Vec<Span> {
        let mut cmd = Command::new(test_python());
        cmd.arg(repo_path("crates/assay-cli/tests/otel_fetch.py"))
            .arg(self.kind)
            .arg(&self.endpoint)
            .env("MLFLOW_DISABLE_TELEMETRY", "true")
            .env("DO_NOT_TRACK", "true");
        let out = cmd.output().expect("otel_fetch.py runs");
        assert!(
            out.status.success(),
            "reading the spans back from {} failed: {}\n--- server log ---\n{}",
            self.kind,
            String::from_utf8_lossy(&out.stderr),
            self.log_tail()
        );
        let all: Vec<Value> =
            serde_json::from_slice(&out.stdout).expect("otel_fetch.py prints JSON");
        all.iter().map(span_from_json).collect()
    }

    /// Polls [`Backend::spans`] until at least `min` spans are stored (both backends store
    /// asynchronously), panicking with what is there after `timeout`.
    pub fn wait_for_spans(&self, min: usize, timeout: Duration) -> Vec<Span> {
        let start = Instant::now();
        loop {
            let spans = self.spans();
            if spans.len() >= min {
                return spans;
            }
            assert!(
                start.elapsed() < timeout,
                "{} holds {} spans after {timeout:?}, expected at least {min}: {spans:#?}\n--- server log ---\n{}",
                self.kind,
                spans.len(),
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The OTLP/HTTP traces URL.
    pub fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.endpoint)
    }

    /// The environment an exporter reads: `OTEL_EXPORTER_OTLP_ENDPOINT` and, where needed,
    /// `OTEL_EXPORTER_OTLP_HEADERS`.
    pub fn otlp_env(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(),
            self.endpoint.clone(),
        )];
        if !self.headers.is_empty() {
            let headers: Vec<String> = self
                .headers
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            env.push(("OTEL_EXPORTER_OTLP_HEADERS".to_owned(), headers.join(",")));
        }
        env
    }

    /// The server's own log, stdout and stderr (the end of it).
    pub fn log_tail(&self) -> String {
        log_tail(&self.dir.path().join("server.log"))
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        stop_group(&mut self.child);
    }
}

/// An MLflow tracking server (`mlflow server`, SQLite store) from the test virtualenv.
pub fn start_mlflow() -> Backend {
    let python = test_python();
    let ok = Command::new(&python)
        .args([
            "-c",
            "import sys, importlib.metadata as m; v = tuple(int(x) for x in m.version('mlflow').split('.')[:2]); sys.exit(v < (3, 6))",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} lacks mlflow 3.6 or later (its OTLP endpoint): run scripts/ci-setup",
        python.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "mlflow", "server", "--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .args(["--workers", "1", "--backend-store-uri"])
        .arg(format!(
            "sqlite:///{}",
            dir.path().join("mlflow.db").display()
        ))
        .arg("--default-artifact-root")
        .arg(dir.path().join("artifacts"))
        .env("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
        .env("MLFLOW_DISABLE_TELEMETRY", "true")
        .env("DO_NOT_TRACK", "true");
    let headers = vec![("x-mlflow-experiment-id".to_owned(), "0".to_owned())];
    start("mlflow", cmd, dir, port, "/health", headers)
}

/// An Arize Phoenix server (`phoenix serve`, SQLite in a temporary working folder) from
/// `ASSAY_TEST_PHOENIX_VENV` (default `target/test-venv-phoenix`).
pub fn start_phoenix() -> Backend {
    let venv = std::env::var_os("ASSAY_TEST_PHOENIX_VENV")
        .map_or_else(|| repo_path("target/test-venv-phoenix"), PathBuf::from);
    let python = venv.join("bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import phoenix.server.main"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} lacks arize-phoenix: run scripts/ci-setup",
        python.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let grpc_port = free_port();
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "phoenix.server.main", "serve"])
        .env("PHOENIX_WORKING_DIR", dir.path().join("phoenix"))
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc_port.to_string())
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
        .env("PHOENIX_DISABLE_AGENT_ASSISTANT", "true")
        .env("PHOENIX_ENABLE_MCP_SERVER", "false")
        .env_remove("PHOENIX_SQL_DATABASE_URL")
        .env_remove("PHOENIX_COLLECTOR_ENDPOINT")
        .env_remove("PHOENIX_PROJECT_NAME");
    start("phoenix", cmd, dir, port, "/healthz", Vec::new())
}

fn start(
    kind: &'static str,
    mut cmd: Command,
    dir: tempfile::TempDir,
    port: u16,
    health: &str,
    headers: Vec<(String, String)>,
) -> Backend {
    let log = dir.path().join("server.log");
    let out = std::fs::File::create(&log).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        // Its own process group, so that Drop stops the workers it forks too.
        .process_group(0);
    for var in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ] {
        cmd.env_remove(var);
    }
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{kind} server starts: {e}"));
    let mut backend = Backend {
        kind,
        endpoint: format!("http://127.0.0.1:{port}"),
        headers,
        child,
        dir,
    };
    let start = Instant::now();
    loop {
        if http_status(port, health) == Some(200) {
            return backend;
        }
        if let Ok(Some(status)) = backend.child.try_wait() {
            panic!(
                "the {kind} server exited ({status}) before it was ready\n--- server log ---\n{}",
                backend.log_tail()
            );
        }
        if start.elapsed() > START_TIMEOUT {
            let tail = backend.log_tail();
            drop(backend);
            panic!(
                "the {kind} server was not ready after {START_TIMEOUT:?}\n--- server log ---\n{tail}"
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The status code of a GET, if anything answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").ok()?;
    let mut head = [0u8; 32];
    let n = s.read(&mut head).ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn stop_group(child: &mut Child) {
    let group = format!("-{}", child.id());
    if child.try_wait().ok().flatten().is_none() {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &group])
            .stderr(Stdio::null())
            .status();
        let start = Instant::now();
        while child.try_wait().ok().flatten().is_none() && start.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // Whatever of the group is left (workers outliving their parent), and the parent itself.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &group])
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("INFO sqlalchemy.engine"))
        .collect();
    lines[lines.len().saturating_sub(80)..].join("\n")
}

fn span_from_json(v: &Value) -> Span {
    let text = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let map = |v: &Value| {
        v.get("attributes")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    Span {
        trace_id: text(v, "trace_id"),
        span_id: text(v, "span_id"),
        parent_span_id: v
            .get("parent_span_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        name: text(v, "name"),
        status: text(v, "status"),
        project: text(v, "project"),
        attributes: map(v),
        events: v
            .get("events")
            .and_then(Value::as_array)
            .map(|es| {
                es.iter()
                    .map(|e| Event {
                        name: text(e, "name"),
                        attributes: map(e),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Posts one OTLP/HTTP protobuf export of a three-span GenAI trace (built with the test
/// virtualenv's `opentelemetry-proto`): `run` > `retrieval` (documents as JSON text, input tokens,
/// a `gen_ai.evaluation.result` event) > `chat m`. Ids: `trace`, then `span` + 1, 2, 3.
const SEND_TRACE: &str = r#"
import sys, time, urllib.request
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
url, trace, span, project = sys.argv[1:5]
headers = dict(h.split("=", 1) for h in sys.argv[5:])
def kv(k, v):
    a = common_pb2.KeyValue(key=k)
    if isinstance(v, int): a.value.int_value = v
    elif isinstance(v, float): a.value.double_value = v
    else: a.value.string_value = v
    return a
ids = [span[:14] + "%02x" % i for i in (1, 2, 3)]
spans = [
    ("run", ids[0], None, {"gen_ai.operation.name": "invoke_agent"}, []),
    ("retrieval", ids[1], ids[0], {"gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.documents": '[{"id":"a","score":0.9}]', "gen_ai.usage.input_tokens": 12},
        [("gen_ai.evaluation.result", {"gen_ai.evaluation.name": "recall",
            "gen_ai.evaluation.score.value": 0.75, "gen_ai.evaluation.score.label": "pass",
            "gen_ai.evaluation.explanation": "3 of 4"})]),
    ("chat m", ids[2], ids[1], {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}, []),
]
req = ExportTraceServiceRequest()
rs = req.resource_spans.add()
rs.resource.attributes.extend([kv("service.name", "assay"), kv("openinference.project.name", project)])
ss = rs.scope_spans.add()
ss.scope.name = "assay"
now = time.time_ns()
for i, (name, sid, parent, attrs, events) in enumerate(spans):
    s = ss.spans.add()
    s.trace_id = bytes.fromhex(trace)
    s.span_id = bytes.fromhex(sid)
    if parent: s.parent_span_id = bytes.fromhex(parent)
    s.name = name
    s.kind = trace_pb2.Span.SPAN_KIND_INTERNAL
    s.start_time_unix_nano = now + i * 1000
    s.end_time_unix_nano = now + 1_000_000 - i * 1000
    s.attributes.extend(kv(k, v) for k, v in attrs.items())
    for name, ea in events:
        e = s.events.add()
        e.name = name
        e.time_unix_nano = now + 500
        e.attributes.extend(kv(k, v) for k, v in ea.items())
    s.status.code = trace_pb2.Status.STATUS_CODE_OK
r = urllib.request.Request(url, data=req.SerializeToString(), method="POST",
    headers={"Content-Type": "application/x-protobuf", **headers})
print(urllib.request.urlopen(r, timeout=60).status)
"#;

fn send_genai_trace(backend: &Backend, trace: &str, span: &str) {
    let out = Command::new(test_python())
        .args(["-c", SEND_TRACE])
        .arg(backend.traces_url())
        .args([trace, span, "assay-test"])
        .args(backend.headers.iter().map(|(k, v)| format!("{k}={v}")))
        .output()
        .expect("python runs");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "200",
        "export to {} failed: {}{}\n--- server log ---\n{}",
        backend.kind,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        backend.log_tail()
    );
}

fn random_hex(len: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    while out.len() < len {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(len);
    out
}

fn check_genai_trace(backend: &Backend) {
    let (trace, span) = (random_hex(32), random_hex(16));
    send_genai_trace(backend, &trace, &span);
    let spans = backend.wait_for_spans(3, Duration::from_secs(60));
    let kind = backend.kind;
    assert_eq!(spans.len(), 3, "{kind}: {spans:#?}");
    let by_name = |n: &str| {
        spans
            .iter()
            .find(|s| s.name == n)
            .unwrap_or_else(|| panic!("{kind}: no span {n}: {spans:#?}"))
    };
    let (run, retrieval, chat) = (by_name("run"), by_name("retrieval"), by_name("chat m"));
    let id = |i: u8| format!("{}{i:02x}", &span[..14]);
    for s in [run, retrieval, chat] {
        assert_eq!(s.trace_id, trace, "{kind}: {s:#?}");
        assert_eq!(s.status, "OK", "{kind}: {s:#?}");
    }
    assert_eq!(
        (run.span_id.clone(), run.parent_span_id.clone()),
        (id(1), None),
        "{kind}"
    );
    assert_eq!(
        (retrieval.span_id.clone(), retrieval.parent_span_id.clone()),
        (id(2), Some(id(1))),
        "{kind}"
    );
    assert_eq!(
        (chat.span_id.clone(), chat.parent_span_id.clone()),
        (id(3), Some(id(2))),
        "{kind}"
    );
    let attr = |s: &Span, k: &str| s.attributes.get(k).cloned();
    assert_eq!(
        attr(retrieval, "gen_ai.operation.name"),
        Some("retrieval".into()),
        "{kind}: {retrieval:#?}"
    );
    assert_eq!(
        attr(retrieval, "gen_ai.usage.input_tokens"),
        Some(12.into()),
        "{kind}: {retrieval:#?}"
    );
    assert_eq!(
        retrieval.json_attr("gen_ai.retrieval.documents"),
        Some(serde_json::json!([{"id": "a", "score": 0.9}])),
        "{kind}: {retrieval:#?}"
    );
    assert_eq!(
        attr(chat, "gen_ai.operation.name"),
        Some("chat".into()),
        "{kind}: {chat:#?}"
    );
    assert_eq!(
        attr(chat, "gen_ai.request.model"),
        Some("m".into()),
        "{kind}: {chat:#?}"
    );
    let events: Vec<&Event> = retrieval.events_named("gen_ai.evaluation.result").collect();
    assert_eq!(events.len(), 1, "{kind}: {retrieval:#?}");
    let expected = serde_json::json!({
        "gen_ai.evaluation.name": "recall",
        "gen_ai.evaluation.score.value": 0.75,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "3 of 4",
    });
    assert_eq!(
        Value::Object(events[0].attributes.clone()),
        expected,
        "{kind}"
    );
    assert!(
        run.events.is_empty() && chat.events.is_empty(),
        "{kind}: {spans:#?}"
    );
    if kind == "phoenix" {
        assert!(
            spans.iter().all(|s| s.project == "assay-test"),
            "{spans:#?}"
        );
    }
}

/// The receivers the export tests use take a GenAI trace over OTLP/HTTP protobuf and hand it
/// back, ids, parents, attributes and events intact.
#[test]
fn otel_backends_accept_genai_spans() {
    // Both at once: each takes about 15 s to start.
    let (mlflow, phoenix) = std::thread::scope(|s| {
        let m = s.spawn(start_mlflow);
        let p = s.spawn(start_phoenix);
        (m.join().unwrap(), p.join().unwrap())
    });
    check_genai_trace(&mlflow);
    check_genai_trace(&phoenix);
    assert_eq!(
        mlflow.otlp_env(),
        [
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(),
                mlflow.endpoint.clone()
            ),
            (
                "OTEL_EXPORTER_OTLP_HEADERS".to_owned(),
                "x-mlflow-experiment-id=0".to_owned()
            ),
        ]
    );
    assert_eq!(phoenix.otlp_env().len(), 1);
}
