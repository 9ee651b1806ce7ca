//! The saved runs, read-only: `/runs`, `/runs/{id}`, `/runs/{id}/cases`, `/runs/{a}/diff/{b}`.

use axum::http::{Method, StatusCode};
use serde_json::Value;

use crate::support::{Server, assert_error};

/// Runs the state bank (fast) and saves it; returns the saved RunLog's id (its stamp).
async fn saved_run(server: &Server) -> String {
    let (status, body) = server.get("/cli/test-harness?banks=state,always").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    saved_id(&body)
}

/// The saved RunLog's id (its stamp) in a run's answer.
fn saved_id(body: &Value) -> String {
    let json = body["saved"]["json"].as_str().unwrap();
    let name = std::path::Path::new(json)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    name.strip_prefix("results_")
        .unwrap()
        .strip_suffix(".json")
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_list_read_and_compare() {
    let server = Server::example();
    let (status, empty) = server.get("/runs").await;
    assert_eq!(status, StatusCode::OK, "{empty:#}");
    assert_eq!(empty["runs"], serde_json::json!([]));

    let first = saved_run(&server).await;
    // A second, different run: one state case made worse by hand, as a regression would.
    let log_path = server.root.join(format!("results/results_{first}.json"));
    let mut log: Value =
        serde_json::from_str(&std::fs::read_to_string(&log_path).unwrap()).unwrap();
    let case = &mut log["state"]["results"][0];
    assert_eq!(case["score"], 100, "{case:#}");
    case["score"] = 40.into();
    let worse_id = case["test_id"].as_str().unwrap().to_owned();
    log["run_id"] = "hand-edited".into();
    log["timestamp"] = "2099-01-01T00:00:00Z".into();
    server.write(
        "results/results_2099-01-01-0000.json",
        &serde_json::to_string(&log).unwrap(),
    );
    // Not a RunLog: left out of the list, and a 422 when asked for.
    server.write(
        "results/results_2000-01-01-0000.json",
        "{\"not\": \"a run\"}",
    );

    let (status, list) = server.get("/runs").await;
    assert_eq!(status, StatusCode::OK);
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{list:#}");
    assert_eq!(runs[0]["id"], "2099-01-01-0000");
    assert_eq!(runs[1]["id"], first.as_str());
    let r = &runs[1];
    assert!(r["combined_score"].is_number());
    assert!(r["health_status"].is_string());
    assert!(r["total_tests"].as_u64().unwrap() > 0);
    assert_eq!(r["banks"], serde_json::json!(["always", "state"]));
    assert_eq!(
        std::path::Path::new(r["markdown"].as_str().unwrap()).extension(),
        Some(std::ffi::OsStr::new("md"))
    );
    assert!(runs[0]["markdown"].is_null());

    let (status, got) = server.get(&format!("/runs/{first}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["run_id"], runs[1]["run_id"]);
    assert!(got["state"]["results"].is_array());

    let (status, diff) = server
        .get(&format!("/runs/{first}/diff/2099-01-01-0000"))
        .await;
    assert_eq!(status, StatusCode::OK, "{diff:#}");
    assert_eq!(diff["worse"].as_array().unwrap().len(), 1);
    assert_eq!(diff["worse"][0]["test_id"], worse_id.as_str());
    assert_eq!(diff["worse"][0]["before"], 100);
    assert_eq!(diff["worse"][0]["after"], 40);
    assert_eq!(diff["worse"][0]["delta"], -60);
    assert!(diff["better"].as_array().unwrap().is_empty());
    let total = r["total_tests"].as_u64().unwrap() as usize;
    assert_eq!(diff["unchanged"].as_array().unwrap().len(), total - 1);
    assert_eq!(diff["counts"]["worse"], 1);
    assert_eq!(diff["after"]["run_id"], "hand-edited");
    // And the other way round it got better.
    let (_, back) = server
        .get(&format!("/runs/2099-01-01-0000/diff/{first}"))
        .await;
    assert_eq!(back["better"][0]["test_id"], worse_id.as_str());

    // Every case as JSON Lines, all banks or one.
    let lines = |body: &[u8]| -> Vec<Value> {
        std::str::from_utf8(body)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let resp = server
        .raw(Method::GET, &format!("/runs/{first}/cases"), None, &[])
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let all = lines(&body);
    assert_eq!(all.len(), total);
    assert!(all.iter().all(|c| c["result"]["test_id"].is_string()));
    let resp = server
        .raw(
            Method::GET,
            &format!("/runs/{first}/cases?bank=always"),
            None,
            &[],
        )
        .await;
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let always = lines(&body);
    assert!(!always.is_empty() && always.len() < total);
    assert!(always.iter().all(|c| c["bank"] == "always"));
    let got = server.get(&format!("/runs/{first}/cases?bank=nope")).await;
    assert_error(&got, StatusCode::BAD_REQUEST, "unknown bank `nope`");

    let got = server.get("/runs/2000-01-01-0000").await;
    assert_error(&got, StatusCode::UNPROCESSABLE_ENTITY, "not a RunLog");
    let got = server.get("/runs/2001-01-01-0000").await;
    assert_error(
        &got,
        StatusCode::NOT_FOUND,
        "no saved run `2001-01-01-0000`",
    );
    let got = server
        .get(&format!("/runs/{first}/diff/2001-01-01-0000"))
        .await;
    assert_error(&got, StatusCode::NOT_FOUND, "2001-01-01-0000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_ids_cannot_reach_outside_the_results_folder() {
    let server = Server::example();
    // A file that a traversal would find.
    server.write("results_secret.json", "{}");
    server.write("results/../assay-secret.json", "{}");
    for path in [
        "/runs/..%2Fassay.toml",
        "/runs/..%2F..%2Fetc%2Fpasswd",
        "/runs/%2E%2E",
        "/runs/..%2Fresults_secret",
        "/runs/secret",
        "/runs/2026-01-01-0000%2F..%2F..%2Fassay",
        "/runs/2026-01-01-0000%00",
        "/runs/..%2Fassay.toml/diff/2026-01-01-0000",
        "/runs/2026-01-01-0000/diff/..%2F..%2Fassay",
    ] {
        let got = server.get(path).await;
        assert_error(&got, StatusCode::BAD_REQUEST, "is not a run id");
    }
    // Runs are read-only.
    let got = server
        .request(Method::DELETE, "/runs/2026-01-01-0000", None)
        .await;
    assert_error(&got, StatusCode::METHOD_NOT_ALLOWED, "does not take DELETE");
}

/// The example's state bank grown past what a RunLog lists whole, run and saved: its id and
/// its run log's file name.
async fn streamed_run(server: &Server) -> (String, String) {
    let rel = "test_banks/state/state_handler_tests.json";
    let path = server.root.join(rel);
    let mut bank: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cases = bank["tests"].as_array().unwrap().clone();
    let grown: Vec<Value> = (0..6_000)
        .map(|i| {
            let mut c = cases[i % cases.len()].clone();
            c["test_id"] = format!("S-{i:05}").into();
            c
        })
        .collect();
    bank["tests"] = grown.into();
    server.write(rel, &bank.to_string());
    let (status, body) = server.get("/cli/test-harness?banks=state").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let id = saved_id(&body);
    // The API's runs list every case in the RunLog; `assay run` streams a run this large to a
    // run log. Make this one so: its cases moved to `cases_<id>.jsonl`, as the save writes it.
    let log_path = server.root.join(format!("results/results_{id}.json"));
    let mut log: Value =
        serde_json::from_str(&std::fs::read_to_string(&log_path).unwrap()).unwrap();
    let file = format!("cases_{id}.jsonl");
    let mut text = serde_json::json!({"journal": 1, "run_id": log["run_id"],
        "timestamp": log["timestamp"], "request": "banks=state", "setup": "fixture"})
    .to_string();
    text.push('\n');
    let results = log["state"]["results"].as_array().unwrap();
    for r in results {
        text.push_str(&serde_json::json!({"bank": "state", "result": r}).to_string());
        text.push('\n');
    }
    server.write(&format!("results/{file}"), &text);
    log["cases"] = serde_json::json!({"file": file, "count": results.len()});
    log["notable"]["complete"] = false.into();
    server.write(
        &format!("results/results_{id}.json"),
        &serde_json::to_string(&log).unwrap(),
    );
    (id, file)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_run_log_is_a_422_naming_file_and_line_before_any_case_is_sent() {
    let server = Server::example();
    let (id, file) = streamed_run(&server).await;
    let path = server.root.join("results").join(&file);
    let original = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let resp = server
        .raw(Method::GET, &format!("/runs/{id}/cases"), None, &[])
        .await;
    assert_eq!(resp.status(), StatusCode::OK);

    let damage = |edit: &dyn Fn(&mut Vec<String>)| {
        let mut l: Vec<String> = lines.iter().map(|s| (*s).to_owned()).collect();
        edit(&mut l);
        std::fs::write(&path, l.join("\n") + "\n").unwrap();
    };
    // A line replaced by a copy of another; an unknown bank with another bank asked for; a
    // bad header; a truncated line.
    for (edit, uri, needle) in [
        (
            Box::new(|l: &mut Vec<String>| l[9] = l[4].clone()) as Box<dyn Fn(&mut Vec<String>)>,
            format!("/runs/{id}/cases"),
            format!("{file}:10: the state case"),
        ),
        (
            Box::new(|l: &mut Vec<String>| {
                l[7] = l[7].replacen("\"bank\":\"state\"", "\"bank\":\"xstate\"", 1);
            }),
            format!("/runs/{id}/cases?bank=state"),
            format!("{file}:8: unknown bank `xstate`"),
        ),
        (
            Box::new(|l: &mut Vec<String>| l[0] = "{\"journal\": 1,".into()),
            format!("/runs/{id}/cases"),
            format!("{file}:1: not a run log header"),
        ),
        (
            Box::new(|l: &mut Vec<String>| l[3].truncate(30)),
            format!("/runs/{id}/cases"),
            format!("{file}:4: not a case"),
        ),
    ] {
        damage(&*edit);
        let got = server.get(&uri).await;
        assert_error(&got, StatusCode::UNPROCESSABLE_ENTITY, &needle);
    }
    // Missing, or a folder in its place: a 422 that says which.
    std::fs::remove_file(&path).unwrap();
    let got = server.get(&format!("/runs/{id}/cases")).await;
    assert_error(&got, StatusCode::UNPROCESSABLE_ENTITY, "is missing");
    std::fs::create_dir(&path).unwrap();
    let got = server.get(&format!("/runs/{id}/cases")).await;
    assert_error(&got, StatusCode::UNPROCESSABLE_ENTITY, "is a folder");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_while_the_cli_runs_on_the_project_is_a_409_naming_it() {
    let server = Server::example();
    let held =
        assay_project::lock::ProjectLock::acquire_run(&server.root, "assay run . --banks state")
            .unwrap();
    let got = server.get("/cli/test-harness?banks=state").await;
    assert_error(
        &got,
        StatusCode::CONFLICT,
        "another assay run holds the lock on project",
    );
    assert!(
        got.1["error"]
            .as_str()
            .unwrap()
            .contains("command: assay run . --banks state"),
        "{:#}",
        got.1
    );
    drop(held);
    let (status, body) = server.get("/cli/test-harness?banks=state").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
}
