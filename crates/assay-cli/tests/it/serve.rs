//! `assay serve`: the real binary, on a free port, answering /health over plain HTTP/1.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::Scratch;

/// Kills the server when the test ends, passed or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn serve_answers_health_on_a_free_port() {
    let project = Scratch::example();
    let child = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args(["serve", "--port", "0", "--project"])
        .arg(&project.root)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim();
    let port = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("no URL on stdout: {line:?}"));
    let addr = format!("127.0.0.1:{port}");
    assert_ne!(addr, "127.0.0.1:0");

    let response = get(&addr, "/health");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
    let health: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["busy"], false);
    assert_eq!(health["project"], project.root.display().to_string());

    let response = get(&addr, "/cli/test-harness/topic/no_such_topic");
    assert!(response.starts_with("HTTP/1.1 404"), "{response}");
}

#[test]
fn serve_refuses_a_bad_project_before_listening() {
    let project = Scratch::example();
    project.write("assay.toml", "[gate]\nmin_helth = \"GOOD\"\n");
    let out = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args(["serve", "--port", "0", "--project"])
        .arg(&project.root)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("assay.toml"), "{stderr}");
}
