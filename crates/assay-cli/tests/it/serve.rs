//! `assay serve`: the real binary, on a free port, answering /health over plain HTTP/1.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{Scratch, assay};

/// Kills the server when the test ends, passed or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `assay serve` (as `command` runs it, its log dropped) and reads the address it
/// prints.
fn started(mut command: Command) -> (Server, String) {
    let child = command
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    listening(Server(child))
}

/// The address a started server prints on its first line.
fn listening(mut server: Server) -> (Server, String) {
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("no URL on stdout: {line:?}"));
    let addr = format!("127.0.0.1:{port}");
    (server, addr)
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
    let mut command = Command::new(env!("CARGO_BIN_EXE_assay"));
    command
        .args(["serve", "--port", "0", "--project"])
        .arg(&project.root);
    let (_server, addr) = started(command);
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

/// A request over plain HTTP/1.1: the status code and the JSON body.
fn call(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status: u16 = response[9..12].parse().unwrap();
    let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
    (
        status,
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}")),
    )
}

/// Starts `assay serve` on a free port of 127.0.0.1; returns the server, its address and its
/// log.
fn start(project: &Scratch, env: &[(&str, &str)]) -> (Server, String, std::path::PathBuf) {
    let (server, addr) = start_logged(project, env, "serve.log");
    (server, addr, project.path("serve.log"))
}

#[test]
fn serve_edits_the_kb_over_http_as_the_cli_does() {
    let token = "integration-token-1234";
    let project = Scratch::example();
    let (_server, addr, log) = start(&project, &[("ASSAY_ADMIN_TOKEN", token)]);

    // Create, read back, update, see the history: over real HTTP.
    let new = r#"{"entity_id": "script_pickup_delay", "entity_type": "SCRIPT", "title": "Running late to a pickup"}"#;
    let (status, created) = call(&addr, "POST", "/admin/kb/entities", Some(token), Some(new));
    assert_eq!(status, 200, "{created:#}");
    assert_eq!(created["entity"]["version"], 1);
    assert!(project.path("kb/script_pickup_delay.yaml").is_file());
    let (status, updated) = call(
        &addr,
        "PUT",
        "/admin/kb/entities/script_pickup_delay",
        Some(token),
        Some(r#"{"title": "Running late to a handoff", "expected_version": 1}"#),
    );
    assert_eq!(status, 200, "{updated:#}");
    assert_eq!(updated["entity"]["version"], 2);
    let (status, stale) = call(
        &addr,
        "PUT",
        "/admin/kb/entities/script_pickup_delay",
        Some(token),
        Some(r#"{"title": "Someone else's title", "expected_version": 1}"#),
    );
    assert_eq!(
        (status, stale["code"].as_str()),
        (409, Some("stale_version"))
    );
    let (status, history) = call(
        &addr,
        "GET",
        "/admin/kb/entities/script_pickup_delay/versions",
        None,
        None,
    );
    assert_eq!(status, 200);
    let versions = history["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[1]["changed_fields"], serde_json::json!(["title"]));
    // The CLI sees the API's versions.
    let shown = assay(&[
        "kb",
        "show",
        "script_pickup_delay",
        "--json",
        "--project",
        project.root.to_str().unwrap(),
    ]);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert_eq!(shown.json()["title"], "Running late to a handoff");

    // The same edit through the CLI on a twin project writes the same bytes.
    let (status, _) = call(
        &addr,
        "PUT",
        "/admin/kb/entities/handler_returning_user",
        Some(token),
        Some(r#"{"priority": 77, "keywords": null, "expected_version": 1}"#),
    );
    assert_eq!(status, 200);
    let twin = Scratch::example();
    let run = assay(&[
        "kb",
        "update",
        "handler_returning_user",
        "--set",
        "priority=77",
        "--set",
        "keywords=null",
        "--project",
        twin.root.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        project.read("kb/handlers.yaml"),
        twin.read("kb/handlers.yaml")
    );
    assert_ne!(
        project.read("kb/handlers.yaml"),
        std::fs::read_to_string(crate::support::example().join("kb/handlers.yaml")).unwrap()
    );

    // Without the token: 401, and nothing changes.
    let (status, _) = call(&addr, "DELETE", "/admin/kb/entities/gray_rock", None, None);
    assert_eq!(status, 401);
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(!stderr.contains(token), "the token was logged: {stderr}");
}

#[test]
fn serve_without_a_token_is_read_only_and_says_so() {
    let project = Scratch::example();
    let (_server, addr, log) = start(&project, &[]);
    let (status, page) = call(&addr, "GET", "/admin/kb/entities?page_size=5", None, None);
    assert_eq!(status, 200, "{page:#}");
    assert_eq!(page["items"].as_array().unwrap().len(), 5);
    let (status, body) = call(
        &addr,
        "DELETE",
        "/admin/kb/entities/gray_rock",
        Some("anything"),
        None,
    );
    assert_eq!((status, body["code"].as_str()), (403, Some("read_only")));
    let (status, runs) = call(&addr, "GET", "/runs", None, None);
    assert_eq!(status, 200);
    assert!(runs["runs"].is_array());
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.contains("read-only"), "{stderr}");
}

/// [`start`] with its own log file, for tests that run several servers on one project.
fn start_logged(project: &Scratch, env: &[(&str, &str)], log: &str) -> (Server, String) {
    let log = project.path(log);
    let mut command = Command::new(env!("CARGO_BIN_EXE_assay"));
    command
        .args(["serve", "--port", "0", "--project"])
        .arg(&project.root)
        .env_remove("RUST_LOG")
        .env_remove("ASSAY_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
    for (k, v) in env {
        command.env(k, v);
    }
    listening(Server(command.spawn().unwrap()))
}

/// The entity's current version and title, as a server reports it.
fn current(addr: &str, id: &str) -> (u64, String) {
    let (status, body) = call(addr, "GET", &format!("/admin/kb/entities/{id}"), None, None);
    assert_eq!(status, 200, "{body:#}");
    let entity = body.get("entity").unwrap_or(&body);
    (
        entity["version"].as_u64().unwrap(),
        entity["title"].as_str().unwrap().to_owned(),
    )
}

/// What every round of a two-writer race must leave: the winner's title in the entity's
/// `kb/` file and as the store's newest version, one version more than before.
fn assert_round(project: &Scratch, addr: &str, round: usize, before: u64, winner_title: &str) {
    let (version, title) = current(addr, "gray_rock");
    assert_eq!(
        version,
        before + 1,
        "round {round}: one accepted edit, one new version"
    );
    assert_eq!(
        title, winner_title,
        "round {round}: the store holds the winner's edit"
    );
    let file = project.read("kb/knowledge.yaml");
    assert!(
        file.contains(winner_title),
        "round {round}: the kb/ file holds the winner's edit"
    );
}

/// The history: one version per accepted edit, each made from the one before it.
fn assert_history(addr: &str, expected: usize) {
    let (status, history) = call(
        addr,
        "GET",
        "/admin/kb/entities/gray_rock/versions",
        None,
        None,
    );
    assert_eq!(status, 200);
    let versions = history["versions"].as_array().unwrap();
    assert_eq!(versions.len(), expected, "{history:#}");
    for (i, v) in versions.iter().enumerate() {
        assert_eq!(v["version"], i + 1);
        if i > 0 {
            assert_eq!(
                v["previous_version_id"],
                versions[i - 1]["id"],
                "version {}",
                i + 1
            );
        }
    }
}

#[test]
fn two_servers_on_one_project_accept_exactly_one_of_two_edits_of_a_version() {
    let token = "race-token-1234";
    let project = Scratch::example();
    assert!(project.read("kb/knowledge.yaml").contains("gray_rock"));
    let (_a, addr_a) = start_logged(&project, &[("ASSAY_ADMIN_TOKEN", token)], "a.log");
    let (_b, addr_b) = start_logged(&project, &[("ASSAY_ADMIN_TOKEN", token)], "b.log");
    let (first, _) = current(&addr_a, "gray_rock");
    let rounds = 20;
    for round in 0..rounds {
        let (before, _) = current(&addr_b, "gray_rock");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let racers: Vec<_> = [("A", addr_a.clone()), ("B", addr_b.clone())]
            .into_iter()
            .map(|(who, addr)| {
                let barrier = std::sync::Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let title = format!("Gray rock, round {round} by {who}");
                    let body =
                        serde_json::json!({"title": title, "expected_version": before}).to_string();
                    barrier.wait();
                    let (status, reply) = call(
                        &addr,
                        "PUT",
                        "/admin/kb/entities/gray_rock",
                        Some(token),
                        Some(&body),
                    );
                    (status, reply, title)
                })
            })
            .collect();
        let results: Vec<(u16, serde_json::Value, String)> =
            racers.into_iter().map(|r| r.join().unwrap()).collect();
        let mut statuses: Vec<u16> = results.iter().map(|r| r.0).collect();
        statuses.sort_unstable();
        assert_eq!(statuses, vec![200, 409], "round {round}: {results:#?}");
        let winner = results.iter().find(|r| r.0 == 200).unwrap();
        let loser = results.iter().find(|r| r.0 == 409).unwrap();
        assert_eq!(
            loser.1["code"], "stale_version",
            "round {round}: {:#}",
            loser.1
        );
        assert_round(&project, &addr_a, round, before, &winner.2);
    }
    assert_history(&addr_b, usize::try_from(first).unwrap() + rounds);
}

#[test]
fn a_server_and_kb_update_accept_exactly_one_of_two_edits_of_a_version() {
    let token = "race-token-5678";
    let project = Scratch::example();
    let (_server, addr) = start_logged(&project, &[("ASSAY_ADMIN_TOKEN", token)], "serve.log");
    let (first, _) = current(&addr, "gray_rock");
    let rounds = 20;
    let mut cli_wins = 0;
    for round in 0..rounds {
        let (before, _) = current(&addr, "gray_rock");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let server_title = format!("Gray rock, round {round} by the API");
        let cli_title = format!("Gray rock, round {round} by the CLI");
        let api = {
            let barrier = std::sync::Arc::clone(&barrier);
            let addr = addr.clone();
            let body =
                serde_json::json!({"title": server_title, "expected_version": before}).to_string();
            std::thread::spawn(move || {
                barrier.wait();
                call(
                    &addr,
                    "PUT",
                    "/admin/kb/entities/gray_rock",
                    Some(token),
                    Some(&body),
                )
                .0
            })
        };
        let mut cli = Command::new(env!("CARGO_BIN_EXE_assay"));
        cli.args(["kb", "update", "gray_rock", "--set"])
            .arg(format!("title={cli_title}"))
            .args(["--expect-version", &before.to_string(), "--project"])
            .arg(&project.root)
            .env_remove("RUST_LOG");
        barrier.wait();
        let cli_out = cli.output().unwrap();
        let api_status = api.join().unwrap();
        let stderr = String::from_utf8_lossy(&cli_out.stderr);
        let winner = match (api_status, cli_out.status.code()) {
            (200, Some(2)) => {
                assert!(stderr.contains("version"), "round {round}: {stderr}");
                &server_title
            }
            (409, Some(0)) => {
                cli_wins += 1;
                &cli_title
            }
            other => panic!("round {round}: not one success and one refusal: {other:?} {stderr}"),
        };
        assert_round(&project, &addr, round, before, winner);
    }
    assert_history(&addr, usize::try_from(first).unwrap() + rounds);
    eprintln!("the CLI won {cli_wins} of {rounds} rounds");
}

/// Whether the server has finished with `stream`: it answered and closed, or reset it (a
/// read that would still block means the connection is being held open).
fn finished(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn stalled_connections_are_closed_and_health_answers_throughout() {
    // 200 connections that stall, with the open-file limit at 1,024: 100 stop inside their
    // headers, 100 send a head that promises a body and then nothing. Slow clients must not
    // hold the server: they are closed within the timeouts while /health answers throughout.
    let project = Scratch::example();
    let mut command = Command::new("sh");
    command.arg("-c").arg(format!(
        "ulimit -n 1024 && exec '{}' serve --port 0 --header-timeout 2 --body-timeout 2 --project '{}'",
        env!("CARGO_BIN_EXE_assay"),
        project.root.display()
    ));
    let (_server, addr) = started(command);
    let mut stalled: Vec<TcpStream> = (0..200)
        .map(|i| {
            let mut s = TcpStream::connect(&addr).unwrap();
            if i % 2 == 0 {
                write!(s, "GET /health HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ").unwrap();
            } else {
                write!(
                    s,
                    "POST /cli/calibrate?dry_run=true HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
                )
                .unwrap();
            }
            s
        })
        .collect();
    let start = std::time::Instant::now();
    let mut slowest = Duration::ZERO;
    while start.elapsed() < Duration::from_secs(5) {
        let asked = std::time::Instant::now();
        let response = get(&addr, "/health");
        slowest = slowest.max(asked.elapsed());
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        slowest < Duration::from_secs(1),
        "/health took {slowest:?} with 200 stalled connections"
    );
    // Past both timeouts (2 s) and a margin: every stalled connection is finished.
    let open = stalled
        .iter_mut()
        .map(finished)
        .filter(|done| !done)
        .count();
    assert_eq!(open, 0, "{open} stalled connections still held after 5 s");
}

#[test]
fn serve_takes_the_project_as_run_does() {
    // `assay serve DIR`, as `assay run DIR`.
    let project = Scratch::example();
    let mut command = Command::new(env!("CARGO_BIN_EXE_assay"));
    command.args(["serve", "--port", "0"]).arg(&project.root);
    let (_server, addr) = started(command);
    let response = get(&addr, "/health");
    let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
    let health: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(health["project"], project.root.display().to_string());
    // Both at once is a usage error, before anything listens.
    let both = assay(&[
        "serve",
        project.root.to_str().unwrap(),
        "--project",
        project.root.to_str().unwrap(),
    ]);
    assert_eq!(both.code, 2, "{both:?}");
}

/// A folder holding one experiment and one simulation report, and nothing else (no test
/// banks, no knowledge base, no runs), made with the UI fixtures as `assay optimize` and
/// `assay simulate` save them.
pub(crate) fn lab_only() -> (tempfile::TempDir, std::path::PathBuf) {
    use crate::ui_fixtures::{ExperimentSpec, SimulationSpec, write_experiment, write_simulation};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lab");
    std::fs::create_dir_all(&root).unwrap();
    write_experiment(&root, &ExperimentSpec::new("exp_lab", 8));
    write_simulation(&root, &SimulationSpec::new("20261125_093000", 2, 2, 4));
    (dir, root)
}

/// The status and body of a GET.
fn fetch(addr: &str, path: &str) -> (u16, String) {
    let response = get(addr, path);
    let status: u16 = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{path}: no status line: {response:?}"));
    let body = response
        .find("\r\n\r\n")
        .map_or("", |at| &response[at + 4..])
        .to_owned();
    (status, body)
}

#[test]
fn serve_starts_on_a_folder_of_an_experiment_and_a_simulation_report() {
    let (_dir, root) = lab_only();
    let mut command = Command::new(env!("CARGO_BIN_EXE_assay"));
    command.args(["serve", "--port", "0"]).arg(&root);
    let (_server, addr) = started(command);

    let (status, body) = fetch(&addr, "/health");
    assert_eq!(status, 200, "{body}");
    for (page, needle) in [
        ("/ui/experiments", "exp_lab"),
        ("/ui/simulations", "20261125_093000"),
        ("/ui/runs", "id=\"empty-runs\""),
        ("/ui/entities", "id=\"empty-kb\""),
    ] {
        let (status, body) = fetch(&addr, page);
        assert_eq!(status, 200, "{page}: {body}");
        assert!(body.contains(needle), "{page}: {needle} not in {body}");
    }

    // A harness route gets a JSON error that says why, and the server stays up.
    let (status, error) = call(&addr, "GET", "/cli/test-harness", None, None);
    assert_eq!(status, 422, "{error:#}");
    assert_eq!(error["code"], "no_test_banks", "{error:#}");
    assert!(
        error["error"].as_str().unwrap().contains("no test banks"),
        "{error:#}"
    );
    let (status, error) = call(&addr, "POST", "/cli/calibrate", None, None);
    assert_eq!((status, &error["code"]), (422, &"no_test_banks".into()));
    let (status, _) = fetch(&addr, "/health");
    assert_eq!(status, 200, "still serving");

    // `assay run` still refuses the folder.
    let run = assay(&["run", root.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("no test_banks folder"), "{run:?}");
}

#[test]
fn serve_refuses_a_folder_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let out = assay(&["serve", "--port", "0", missing.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("does not exist"), "{out:?}");
}

/// Where `text` cites a seed or a spec section, as the pattern
/// `(seed|spec)\s*0\d\d|\b00\d\s*§|§\s*\d` (case-insensitive) finds it: the text around it.
fn cites_a_section(text: &str) -> Option<String> {
    let c: Vec<char> = text.chars().flat_map(char::to_lowercase).collect();
    let digit = |i: usize| c.get(i).is_some_and(char::is_ascii_digit);
    let space = |mut i: usize| {
        while c.get(i).is_some_and(|ch| ch.is_whitespace()) {
            i += 1;
        }
        i
    };
    let word = |i: usize| {
        c.get(i)
            .is_some_and(|ch| ch.is_alphanumeric() || *ch == '_')
    };
    let around = |i: usize| {
        c[i.saturating_sub(40)..(i + 40).min(c.len())]
            .iter()
            .collect()
    };
    for i in 0..c.len() {
        for w in ["seed", "spec"] {
            let at = w
                .chars()
                .enumerate()
                .all(|(k, ch)| c.get(i + k) == Some(&ch));
            if at {
                let j = space(i + 4);
                if c.get(j) == Some(&'0') && digit(j + 1) && digit(j + 2) {
                    return Some(around(i));
                }
            }
        }
        if c[i] == '0' && c.get(i + 1) == Some(&'0') && digit(i + 2) && (i == 0 || !word(i - 1)) {
            let j = space(i + 3);
            if c.get(j) == Some(&'§') {
                return Some(around(i));
            }
        }
        if c[i] == '§' && digit(space(i + 1)) {
            return Some(around(i));
        }
    }
    None
}

#[test]
fn the_section_pattern_finds_what_it_should() {
    for hit in [
        "the API of 000 §7",
        "spec 000",
        "Seed 001's domain",
        "see §4",
        "003 § 4",
    ] {
        assert!(cites_a_section(hit).is_some(), "{hit}");
    }
    for miss in ["seed 1", "a100 §", "§ a", "spectrum 001", "specs 000"] {
        assert!(cites_a_section(miss).is_none(), "{miss}");
    }
}

/// The `href="/ui/…"` links of a page, unescaped, without their fragments.
fn ui_links(body: &str) -> Vec<String> {
    body.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|href| href.starts_with("/ui/"))
        .map(|href| {
            let href = href.replace("&amp;", "&");
            href.split('#').next().unwrap_or_default().to_owned()
        })
        .collect()
}

#[test]
fn no_page_cites_a_seed_or_a_spec_section() {
    let project = Scratch::example();
    // Two runs (for a run's page, its cases and a comparison), an experiment and two
    // simulation reports, so every kind of page has something to show.
    for _ in 0..2 {
        let run = project.assay(&["run"]);
        assert!(run.code <= 1, "{run:?}");
    }
    {
        use crate::ui_fixtures::{
            ExperimentSpec, SimulationSpec, write_experiment, write_simulation,
        };
        write_experiment(&project.root, &ExperimentSpec::new("exp_pages", 8));
        for stamp in ["20261125_093000", "20261126_093000"] {
            write_simulation(&project.root, &SimulationSpec::new(stamp, 2, 2, 4));
        }
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_assay"));
    command.args(["serve", "--port", "0"]).arg(&project.root);
    let (_server, addr) = started(command);

    // Every page the UI links to, from the navigation down (links to the same page with
    // other sort orders or filters included), at most 1,500.
    let mut queue: std::collections::VecDeque<String> = [
        "/ui/entities",
        "/ui/entities/new",
        "/ui/retrieval",
        "/ui/retrieval?query=my+ex+is+late+again",
        "/ui/bulk",
        "/ui/stats",
        "/ui/runs",
        "/ui/experiments",
        "/ui/simulations",
        "/ui/simulations/compare?r=20261125_093000&r=20261126_093000",
        "/ui/login",
        "/ui/no/such/page",
        "/ui/runs/2000-01-01-0000",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    let mut seen: std::collections::HashSet<String> = queue.iter().cloned().collect();
    let mut kinds = std::collections::BTreeSet::new();
    while let Some(page) = queue.pop_front() {
        if page.starts_with("/ui/assets/") || page.starts_with("/ui/bulk/export") {
            continue;
        }
        let (status, body) = fetch(&addr, &page);
        assert!(status < 500, "{page}: {status}\n{body}");
        if let Some(at) = cites_a_section(&body) {
            panic!("{page} cites a seed or spec section: …{at}…");
        }
        // The shape of the page's path (`/ui/runs/*/cases/*`), to check the crawl's reach.
        let shape: Vec<&str> = page
            .split('?')
            .next()
            .unwrap_or_default()
            .split('/')
            .enumerate()
            .map(|(i, part)| if i <= 2 || i == 4 { part } else { "*" })
            .collect();
        kinds.insert(format!("{} {}", shape.join("/"), shape.len()));
        for link in ui_links(&body) {
            if seen.len() < 1_500 && seen.insert(link.clone()) {
                queue.push_back(link);
            }
        }
    }
    assert!(seen.len() > 60, "the crawl reached {} pages", seen.len());
    for reached in [
        "/ui/runs/*/cases/* 6",
        "/ui/runs/*/diff/* 6",
        "/ui/entities/* 4",
        "/ui/experiments/* 4",
        "/ui/simulations/*/runs/*/* 7",
    ] {
        assert!(kinds.contains(reached), "no page like {reached}: {kinds:?}");
    }

    // The JSON side: the OpenAPI document and the errors.
    let (status, doc) = fetch(&addr, "/openapi.json");
    assert_eq!(status, 200);
    assert_eq!(cites_a_section(&doc), None, "the OpenAPI document");
    for path in [
        "/cli/test-harness/topic/no_such_topic",
        "/runs/2000-01-01-0000",
        "/nowhere",
    ] {
        let (_, body) = fetch(&addr, path);
        assert_eq!(cites_a_section(&body), None, "{path}: {body}");
    }
}
