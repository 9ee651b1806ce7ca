//! Drives the built binary: `init`, `serve` over hand-written MCP JSON-RPC, `dump`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_scout-quest-mcp");
const TODAY: &str = "2026-03-02";

fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/fixtures/test-scout.yaml")
}

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("SCOUT_QUEST_TODAY", TODAY)
        .env_remove("SCOUT_QUEST_MCP_CRASH_AFTER")
        .env_remove("SCOUT_QUEST_MCP_SLOW");
    cmd
}

fn output(args: &[&str]) -> Output {
    command(args).output().expect("the binary runs")
}

fn init(dir: &Path) -> String {
    let db = dir.join("scout.db").display().to_string();
    let fixture = fixture_path().display().to_string();
    let out = output(&["init", "--db", &db, "--fixture", &fixture]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    db
}

/// A running `serve` process and its stdout lines, read on a thread so a hang fails the test.
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Server {
    fn start(db: &str, env: &[(&str, &str)]) -> Server {
        let mut cmd = command(&["serve", "--db", db]);
        cmd.envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("serve starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and waits for the response with its id (skipping notifications).
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        message["params"] = params;
        self.send(&message);
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|e| panic!("no answer to {method}: {e}"));
            let message: Value = serde_json::from_str(&line).expect("stdout carries JSON-RPC only");
            if message["id"] == id {
                return message;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let init = self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "it", "version": "0"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        init
    }

    fn call(&mut self, id: u64, tool: &str, arguments: &Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments.clone()}),
        )["result"]
            .clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The JSON inside a tool result's single text block.
fn text_json(result: &Value) -> Value {
    let content = result["content"].as_array().expect("content");
    assert_eq!(content.len(), 1, "{result}");
    serde_json::from_str(content[0]["text"].as_str().expect("text")).expect("JSON text")
}

#[test]
fn serve_speaks_mcp_and_dump_shows_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let db = init(dir.path());
    let mut server = Server::start(&db, &[]);

    let init = server.initialize();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "scout-quest-mcp",
        "{init}"
    );
    assert!(
        init["result"]["capabilities"]["resources"].is_object(),
        "{init}"
    );
    assert!(
        init["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("parent")
    );

    let tools = server.request(2, "tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    assert!(names.contains(&"log_chore") && names.contains(&"compose_email"));

    let logged = server.call(
        3,
        "log_chore",
        &json!({"chore": "Dishes", "notes": "after dinner"}),
    );
    assert_eq!(logged["isError"], false, "{logged}");
    assert_eq!(text_json(&logged)["logged"]["date"], TODAY);

    let again = server.call(4, "log_chore", &json!({"chore": "dishes"}));
    assert_eq!(again["isError"], true, "{again}");
    assert!(
        again["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("already logged")
    );

    let no_cc = server.call(
        5,
        "compose_email",
        &json!({"to": ["ken.alvarez@scoutquest.test"], "subject": "Meeting", "body": "Hello"}),
    );
    assert_eq!(no_cc["isError"], true, "{no_cc}");
    assert!(
        no_cc["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("dana.rivera@scoutquest.test")
    );

    let read = server.request(6, "resources/read", json!({"uri": "scout://quest-state"}));
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "application/json", "{read}");
    let state: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    assert_eq!(state["chores_today"][0]["chore_id"], "dishes");
    assert_eq!(state["emails"], json!([]));

    drop(server);
    let out = output(&["dump", "--db", &db]);
    assert!(out.status.success());
    let dumped: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(dumped, state);
    assert_eq!(dumped["chore_log"].as_array().unwrap().len(), 1);
}

#[test]
fn crash_hook_exits_before_answering() {
    let dir = tempfile::tempdir().unwrap();
    let db = init(dir.path());
    let mut server = Server::start(&db, &[("SCOUT_QUEST_MCP_CRASH_AFTER", "1")]);
    server.initialize();
    assert_eq!(
        server.call(2, "get_quest_state", &json!({}))["isError"],
        false
    );
    server.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": "get_quest_state", "arguments": {}}}));
    match server.lines.recv_timeout(Duration::from_secs(20)) {
        Err(RecvTimeoutError::Disconnected) => {}
        other => panic!("expected the server to exit without answering, got {other:?}"),
    }
    assert_eq!(server.child.wait().unwrap().code(), Some(1));
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db").display().to_string();
    let out = output(&["serve", "--db", &missing]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("scout-quest-mcp init"));

    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(fixture_path())
        .unwrap()
        .replace("target_budget: 800", "target_budget: -5");
    std::fs::write(&bad, text).unwrap();
    let db = dir.path().join("x.db").display().to_string();
    let out = output(&["init", "--db", &db, "--fixture", &bad.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("quest.target_budget"),
        "{stderr}"
    );
    assert!(!Path::new(&db).exists());
}

#[test]
fn slow_hook_delays_only_its_tool() {
    let dir = tempfile::tempdir().unwrap();
    let db = init(dir.path());
    let mut server = Server::start(&db, &[("SCOUT_QUEST_MCP_SLOW", "get_requirements:400")]);
    server.initialize();
    let started = std::time::Instant::now();
    assert_eq!(
        server.call(2, "get_quest_state", &json!({}))["isError"],
        false
    );
    assert!(started.elapsed() < Duration::from_millis(400));
    let started = std::time::Instant::now();
    let listed = server.call(3, "get_requirements", &json!({"badge": "family_life"}));
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(
        text_json(&listed)["requirements"].as_array().unwrap().len(),
        5
    );
}
