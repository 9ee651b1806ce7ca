//! The run endpoints, /health, /openapi.json and the errors.

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use serde_json::Value;

use crate::support::{Server, assert_error, bank_ids, topic_ids};

fn ids(results: &Value) -> Vec<String> {
    results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["test_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_ok_and_not_busy() {
    let server = Server::example();
    let (status, body) = server.get("/health").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["project"], server.root.display().to_string());
    assert_eq!(body["busy"], false);
    assert!(body["current_run"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_run_counts_every_bank_and_saves() {
    let server = Server::example();
    let (status, body) = server.get("/cli/test-harness").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let total: usize = bank_ids().values().map(Vec::len).sum();
    assert_eq!(body["total_tests"], total);
    assert!(
        ["CRITICAL", "POOR", "FAIR", "GOOD", "EXCELLENT"]
            .contains(&body["health_status"].as_str().unwrap())
    );
    assert!(body["combined_score"].as_f64().unwrap() > 0.0);
    assert!(body["hard_fails"].is_u64());
    assert!(body["critical_failures"].is_array());
    assert_eq!(body["error_count"], 0);
    assert!(body["gate_passed"].is_boolean());
    assert!(!body["run_id"].as_str().unwrap().is_empty());
    // Saved by default, and only the summary: no RunLog, no failures, no usage (no provider).
    let saved = &body["saved"];
    for key in ["json", "markdown", "html"] {
        let path = std::path::Path::new(saved[key].as_str().unwrap());
        assert!(path.is_file(), "{path:?}");
        assert!(path.starts_with(server.root.join("results")), "{path:?}");
    }
    let files = server.results();
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("results_") && f.rsplit('.').next() == Some("json"))
    );
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("report_") && f.rsplit('.').next() == Some("md"))
    );
    let saved_log: Value =
        serde_json::from_str(&std::fs::read_to_string(saved["json"].as_str().unwrap()).unwrap())
            .unwrap();
    assert_eq!(saved_log["run_id"], body["run_id"]);
    for key in ["run_log", "failures"] {
        assert!(body.get(key).is_none(), "{key} in {body:#}");
    }
    // The semantic bank called the (built-in) embedder through the provider wrapper.
    assert!(
        body["usage"]["models"]["builtin/hashed-ngrams"]["calls"]
            .as_u64()
            .unwrap()
            > 0,
        "{body:#}"
    );
    // The lock is released.
    assert_eq!(server.get("/health").await.1["busy"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selected_banks_without_saving() {
    let server = Server::example();
    let (status, body) = server
        .get("/cli/test-harness?banks=state,Pattern&save_results=false")
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let banks = bank_ids();
    assert_eq!(
        body["total_tests"],
        banks["state"].len() + banks["pattern"].len()
    );
    assert!(body["saved"].is_null());
    // No provider was called: no usage.
    assert!(body.get("usage").is_none(), "{body:#}");
    assert!(server.results().is_empty(), "{:?}", server.results());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_and_failures_only() {
    let server = Server::example();
    let (status, body) = server
        .get("/cli/test-harness?banks=semantic,always&verbose=true&failures_only=1&save_results=false")
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    let log = &body["run_log"];
    assert_eq!(log["run_id"], body["run_id"]);
    assert_eq!(log["summary"]["total_tests"], body["total_tests"]);
    assert!(log["state"].is_null() && log["pattern"].is_null());
    let failures = body["failures"].as_object().unwrap();
    let keys: Vec<&str> = failures.keys().map(String::as_str).collect();
    assert_eq!(keys, ["always", "semantic"]);
    for (bank, failed) in failures {
        let expected: Vec<String> = log[bank]["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["score"].as_u64().is_none_or(|s| s < 100))
            .map(|r| r["test_id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids(failed), expected, "{bank}");
        for f in failed.as_array().unwrap() {
            assert!(f["score"].as_u64().is_none_or(|s| s < 100), "{f}");
            assert!(f.get("error").is_some() && f.get("is_hard_fail").is_some());
        }
    }
    // The example has semantic cases below 100 with the lexical embedder.
    assert!(!failures["semantic"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_test_in_each_bank() {
    let server = Server::example();
    for (bank, ids) in bank_ids() {
        let id = &ids[ids.len() / 2];
        let (status, body) = server.get(&format!("/cli/test-harness/test/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{body:#}");
        assert_eq!(body["bank"], bank);
        assert_eq!(body["test_id"], id.as_str());
        assert_eq!(body["result"]["test_id"], id.as_str());
        assert!(body["result"].get("score").is_some());
        assert!(body["result"].get("breakdown").is_some());
        assert_eq!(body["total_tests"], 1);
        assert!(body["saved"].is_null());
        assert!(body.get("run_log").is_none());
    }
    let (status, body) = server
        .get("/cli/test-harness/test/STATE-001?debug=true")
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(
        body["run_log"]["state"]["results"][0]["test_id"],
        "STATE-001"
    );
    assert!(body["run_log"]["semantic"].is_null());
    assert!(server.results().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_runs_only_its_semantic_cases() {
    let server = Server::example();
    let expected = topic_ids("gray_rock");
    assert!(expected.len() > 1);
    let (status, body) = server.get("/cli/test-harness/topic/gray_rock").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    assert_eq!(body["topic"], "gray_rock");
    assert_eq!(ids(&body["results"]), expected);
    assert_eq!(body["total_tests"], expected.len());
    for r in body["results"].as_array().unwrap() {
        assert!(
            r["topics"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "gray_rock")
        );
    }
    assert!(body["saved"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ids_and_topics_are_404() {
    let server = Server::example();
    let got = server.get("/cli/test-harness/test/NOPE-404").await;
    assert_error(&got, StatusCode::NOT_FOUND, "unknown test id `NOPE-404`");
    let got = server.get("/cli/test-harness/topic/no_such_topic").await;
    assert_error(&got, StatusCode::NOT_FOUND, "unknown topic `no_such_topic`");
    let got = server.get("/cli/nothing-here").await;
    assert_error(
        &got,
        StatusCode::NOT_FOUND,
        "no route for `/cli/nothing-here`",
    );
    let got = server.request(Method::POST, "/health", None).await;
    assert_error(&got, StatusCode::METHOD_NOT_ALLOWED, "/health");
    // A 404 releases the lock.
    assert_eq!(server.get("/health").await.1["busy"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_400_json() {
    let server = Server::example();
    let got = server.get("/cli/test-harness?banks=state,stats").await;
    assert_error(&got, StatusCode::BAD_REQUEST, "unknown bank `stats`");
    let got = server.get("/cli/test-harness?verbose=maybe").await;
    assert_error(
        &got,
        StatusCode::BAD_REQUEST,
        "`verbose`: expected true or false, got `maybe`",
    );
    let got = server
        .get("/cli/test-harness?save_results=false&colour=red")
        .await;
    assert_error(
        &got,
        StatusCode::BAD_REQUEST,
        "unknown query parameter `colour`",
    );
    let got = server.get("/cli/test-harness?banks=all&banks=state").await;
    assert_error(
        &got,
        StatusCode::BAD_REQUEST,
        "`banks` is given more than once",
    );
    let got = server.get("/cli/test-harness/test/STATE-001?debug=2").await;
    assert_error(&got, StatusCode::BAD_REQUEST, "`debug`");
    let got = server
        .get("/cli/test-harness/topic/gray_rock?verbose=true")
        .await;
    assert_error(
        &got,
        StatusCode::BAD_REQUEST,
        "unknown query parameter `verbose`",
    );
    let got = server.get("/cli/test-harness/test/%FF").await;
    assert_error(&got, StatusCode::BAD_REQUEST, "invalid path");
    // Nothing ran, nothing was saved.
    assert!(server.results().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_is_409_while_one_holds_the_lock() {
    let server = Server::example();
    let guard = server.state.begin("held by the test").unwrap();
    let (_, health) = server.get("/health").await;
    assert_eq!(health["busy"], true);
    assert_eq!(health["current_run"]["what"], "held by the test");
    let started = health["current_run"]["started"]
        .as_str()
        .unwrap()
        .to_owned();
    for (method, uri) in [
        (Method::GET, "/cli/test-harness"),
        (Method::GET, "/cli/test-harness/test/STATE-001"),
        (Method::GET, "/cli/test-harness/topic/gray_rock"),
        (Method::POST, "/cli/calibrate"),
    ] {
        let got = server.request(method, uri, None).await;
        assert_error(&got, StatusCode::CONFLICT, "a run is already in progress");
        assert_error(&got, StatusCode::CONFLICT, &started);
        assert_error(&got, StatusCode::CONFLICT, "held by the test");
        assert_eq!(got.1["code"], "busy");
    }
    // Parameters are checked first: a bad request is 400 even while busy.
    let got = server.get("/cli/test-harness?banks=nope").await;
    assert_error(&got, StatusCode::BAD_REQUEST, "`nope`");
    drop(guard);
    let (status, body) = server.get("/cli/test-harness/test/STATE-001").await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_one_wins_the_other_gets_409() {
    let server = Server::example();
    let uri = "/cli/test-harness?save_results=false";
    let (a, b) = tokio::join!(server.get(uri), server.get(uri));
    let mut statuses = [a.0, b.0];
    statuses.sort();
    // Both may succeed one after the other when the first finishes before the second starts;
    // they never run together, and a loser is a clean 409.
    for (status, body) in [&a, &b] {
        if *status == StatusCode::CONFLICT {
            assert_error(
                &(*status, body.clone()),
                StatusCode::CONFLICT,
                "already in progress",
            );
        } else {
            assert_eq!(*status, StatusCode::OK, "{body:#}");
        }
    }
    assert!(statuses.contains(&StatusCode::OK), "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_that_does_not_load_is_422_naming_the_file() {
    let server = Server::example();
    server.append("assay.toml", "\n[gate]\nmin_helth = \"GOOD\"\n");
    let got = server.get("/cli/test-harness?save_results=false").await;
    assert_error(&got, StatusCode::UNPROCESSABLE_ENTITY, "assay.toml");
    assert_eq!(got.1["code"], "invalid_project");

    let server = Server::example();
    server.write("test_banks/state/state_handler_tests.json", "{\"tests\": [");
    let got = server.get("/cli/test-harness/test/STATE-001").await;
    assert_error(
        &got,
        StatusCode::UNPROCESSABLE_ENTITY,
        "state_handler_tests.json",
    );
    // The project is loaded per request: fixing the file fixes the next request.
    std::fs::copy(
        crate::support::example().join("test_banks/state/state_handler_tests.json"),
        server
            .root
            .join("test_banks/state/state_handler_tests.json"),
    )
    .unwrap();
    let (status, _) = server.get("/cli/test-harness/test/STATE-001").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_describes_every_route() {
    let server = Server::example();
    let (status, doc) = server.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc, assay_server::openapi::document());
    let routed: BTreeSet<(String, String)> = assay_server::routes()
        .into_iter()
        .map(|r| (r.method.as_str().to_ascii_lowercase(), r.path.to_owned()))
        .collect();
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    assert_eq!(routed, documented);
    // Every path parameter is declared, every $ref resolves, every running route documents
    // its errors.
    let text = doc.to_string();
    for (method, path) in &documented {
        let op = &doc["paths"][path][method];
        assert!(op["responses"]["200"].is_object(), "{method} {path}");
        for name in path.split('{').skip(1).map(|s| &s[..s.find('}').unwrap()]) {
            assert!(
                op["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == name && p["in"] == "path"),
                "{method} {path}: {name}"
            );
        }
        if path.starts_with("/cli/") {
            for code in ["400", "409", "422", "500"] {
                assert_eq!(
                    op["responses"][code]["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/Error",
                    "{method} {path} {code}"
                );
            }
        }
    }
    for r in text.split("\"#/components/schemas/").skip(1) {
        let name = &r[..r.find('"').unwrap()];
        assert!(doc["components"]["schemas"][name].is_object(), "{name}");
    }
    // The parameters each route documents are the ones it accepts: an undocumented one is
    // rejected (checked on the cheap routes).
    let (_, body) = server
        .get("/cli/test-harness/test/X?debug=true&verbose=true")
        .await;
    assert!(
        body["error"].as_str().unwrap().contains("(expected debug)"),
        "{body}"
    );
}
