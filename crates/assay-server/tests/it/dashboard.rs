//! One dashboard for every project: a folder holding only an experiment and a simulation
//! report (or nothing) is served, each missing part is an empty state that names the command
//! that fills it, and the harness routes answer 422 `no_test_banks`; the runs over time, a
//! case's own page, and the cases that name an entity.

use axum::http::StatusCode;
use serde_json::Value;

use crate::support::{Server, assert_error};
use crate::ui::{get, send};
use crate::ui_fixtures::{ExperimentSpec, SimulationSpec, write_experiment, write_simulation};

/// A folder with an experiment and a simulation report, and nothing else.
fn lab_only() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lab");
    std::fs::create_dir_all(&root).unwrap();
    write_experiment(&root, &ExperimentSpec::new("exp_only", 6));
    write_simulation(&root, &SimulationSpec::new("20261125_093000", 2, 2, 4));
    Server::over(dir, &root)
}

#[tokio::test]
async fn a_folder_of_an_experiment_and_a_simulation_is_served_with_empty_states() {
    let s = lab_only();
    let dir = s.root.display().to_string();

    let experiments = get(&s, "/ui/experiments", None).await;
    assert_eq!(experiments.status, StatusCode::OK, "{}", experiments.body);
    assert!(
        experiments.body.contains("exp_only"),
        "{}",
        experiments.body
    );
    let simulations = get(&s, "/ui/simulations", None).await;
    assert_eq!(simulations.status, StatusCode::OK, "{}", simulations.body);
    assert!(simulations.body.contains("20261125_093000"));
    let report = get(&s, "/ui/experiments/exp_only", None).await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.body);

    let runs = get(&s, "/ui/runs", None).await;
    assert_eq!(runs.status, StatusCode::OK, "{}", runs.body);
    assert!(runs.body.contains("id=\"empty-runs\""), "{}", runs.body);
    assert!(
        runs.body.contains(&format!(
            "No runs yet: <code>assay run {dir}</code> writes one"
        )),
        "{}",
        runs.body
    );
    assert!(runs.body.contains("It needs test banks"), "{}", runs.body);

    let entities = get(&s, "/ui/entities", None).await;
    assert_eq!(entities.status, StatusCode::OK, "{}", entities.body);
    assert!(
        entities.body.contains("id=\"empty-kb\""),
        "{}",
        entities.body
    );
    assert!(
        entities.body.contains(&format!("assay init {dir}")),
        "{}",
        entities.body
    );
    assert!(
        entities
            .body
            .contains("This folder holds 1 experiment, 1 simulation report"),
        "{}",
        entities.body
    );
    for page in ["/ui/stats", "/ui/retrieval", "/ui/bulk"] {
        let p = get(&s, page, None).await;
        assert_eq!(p.status, StatusCode::OK, "{page}: {}", p.body);
        assert!(p.body.contains("id=\"empty-kb\""), "{page}: {}", p.body);
    }
    let missing = get(&s, "/ui/entities/anything", None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.body);
    assert!(
        missing.body.contains("no knowledge base"),
        "{}",
        missing.body
    );
    assert!(
        !s.root.join(".assay/kb.db").exists(),
        "browsing makes no store in a folder without a knowledge base"
    );

    // The saved-runs API answers an empty list; the harness routes a clear 422.
    let (status, runs) = s.get("/runs").await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    assert_eq!(runs["runs"], Value::Array(Vec::new()));
    for uri in [
        "/cli/test-harness",
        "/cli/test-harness/test/S001",
        "/cli/test-harness/topic/bedtime",
    ] {
        let got = s.get(uri).await;
        assert_error(&got, StatusCode::UNPROCESSABLE_ENTITY, "no test banks");
        assert_eq!(got.1["code"], "no_test_banks", "{uri}");
    }
    let got = s.post("/cli/calibrate", None).await;
    assert_error(&got, StatusCode::UNPROCESSABLE_ENTITY, "no test banks");
    let (status, health) = s.get("/health").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["busy"], false, "the refused run released the lock");
}

#[tokio::test]
async fn an_empty_folder_has_an_empty_state_on_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("empty");
    std::fs::create_dir_all(&root).unwrap();
    let s = Server::over(dir, &root);
    for (page, id, command) in [
        ("/ui/entities", "empty-kb", "assay init"),
        ("/ui/runs", "empty-runs", "assay run"),
        ("/ui/experiments", "empty-experiments", "assay optimize"),
        ("/ui/simulations", "empty-simulations", "assay simulate"),
        ("/ui/redteam", "empty-redteam", "assay redteam"),
    ] {
        let p = get(&s, page, None).await;
        assert_eq!(p.status, StatusCode::OK, "{page}: {}", p.body);
        assert!(
            p.body.contains(&format!("id=\"{id}\"")),
            "{page}: {}",
            p.body
        );
        assert!(p.body.contains(command), "{page}: {}", p.body);
    }
    let entities = get(&s, "/ui/entities", None).await;
    assert!(
        entities.body.contains("nothing assay reads yet"),
        "{}",
        entities.body
    );
}

/// The run ids saved under `results/`.
fn saved(s: &Server) -> Vec<String> {
    let mut ids: Vec<String> = s
        .results()
        .into_iter()
        .filter_map(|n| {
            n.strip_prefix("results_")
                .and_then(|n| n.strip_suffix(".json"))
                .map(str::to_owned)
        })
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_run_links_its_cases_and_an_entity_lists_the_cases_that_name_it() {
    let s = Server::example();
    let (status, body) = s.get("/cli/test-harness?save_results=true").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = saved(&s).pop().unwrap();

    // The runs page: one run is one point on the chart, its duration the run's own.
    let runs = get(&s, "/ui/runs", None).await;
    assert_eq!(runs.status, StatusCode::OK, "{}", runs.body);
    assert!(
        runs.body.contains("<svg id=\"runs-trend\""),
        "{}",
        runs.body
    );
    let log: Value = serde_json::from_str(
        &std::fs::read_to_string(s.root.join(format!("results/results_{id}.json"))).unwrap(),
    )
    .unwrap();
    let ms = log["duration_ms"].as_u64().unwrap();
    let shown = if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    };
    assert!(runs.body.contains(&shown), "{shown} in {}", runs.body);
    assert!(
        runs.body.contains("<td class=\"when\">"),
        "timestamps do not wrap"
    );

    // The run's page links every case id it shows to the case's page.
    let detail = get(&s, &format!("/ui/runs/{id}"), None).await;
    assert_eq!(detail.status, StatusCode::OK, "{}", detail.body);
    let prefix = format!("href=\"/ui/runs/{id}/cases/");
    let at = detail.body.find(&prefix).expect("a linked case id") + prefix.len();
    let test_id: String = detail.body[at..]
        .chars()
        .take_while(|c| *c != '"')
        .collect();
    let case = get(&s, &format!("/ui/runs/{id}/cases/{test_id}"), None).await;
    assert_eq!(case.status, StatusCode::OK, "{}", case.body);
    for part in [
        "<dt>bank</dt>",
        "<dt>score</dt>",
        "<dt>why</dt>",
        "<dt>expected</dt>",
        "<dt>came back</dt>",
    ] {
        assert!(case.body.contains(part), "{part}: {}", case.body);
    }
    let nothing = get(&s, &format!("/ui/runs/{id}/cases/no%3Csuch%3E"), None).await;
    assert_eq!(nothing.status, StatusCode::NOT_FOUND);
    assert!(
        nothing.body.contains("no case `no&lt;such&gt;`"),
        "{}",
        nothing.body
    );
    let bad = get(&s, "/ui/runs/not-a-run/cases/S001", None).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    // An entity that the semantic cases expect lists them, linked to this run's results.
    let bank: Value = serde_json::from_str(
        &std::fs::read_to_string(s.root.join("test_banks/semantic/parent_test_bank.json")).unwrap(),
    )
    .unwrap();
    let first = &bank["tests"][0];
    let entity = first["expected_primary"][0].as_str().unwrap();
    let case_id = first["test_id"].as_str().unwrap();
    let page = get(&s, &format!("/ui/entities/{entity}"), None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("id=\"entity-cases\""), "{}", page.body);
    assert!(
        page.body
            .contains(&format!("href=\"/ui/runs/{id}/cases/{case_id}\"")),
        "{case_id} linked: {}",
        page.body
    );
    assert!(page.body.contains("expected primary"), "{}", page.body);
}

#[tokio::test]
async fn the_chart_reads_with_many_runs_and_a_diff_links_its_cases() {
    let s = Server::example();
    let (status, body) = s.get("/cli/test-harness?save_results=true").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = saved(&s).pop().unwrap();
    let text = std::fs::read_to_string(s.root.join(format!("results/results_{id}.json"))).unwrap();
    // 200 more runs, a day apart, oldest first.
    for day in 0..200u32 {
        let mut log: Value = serde_json::from_str(&text).unwrap();
        let stamp = format!("2030-{:02}-{:02}-0900", day / 28 % 12 + 1, day % 28 + 1);
        log["timestamp"] = format!(
            "2030-{:02}-{:02}T09:00:00Z",
            day / 28 % 12 + 1,
            day % 28 + 1
        )
        .into();
        log["summary"]["combined_score"] = (50.0 + f64::from(day % 50)).into();
        std::fs::write(
            s.root.join(format!("results/results_{stamp}.json")),
            serde_json::to_string(&log).unwrap(),
        )
        .unwrap();
    }
    let runs = get(&s, "/ui/runs", None).await;
    assert_eq!(runs.status, StatusCode::OK);
    let chart = &runs.body[runs.body.find("<svg id=\"runs-trend\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    let weighted = &chart[chart.find("series-weighted").unwrap()..];
    assert_eq!(
        weighted.matches("class=\"point\"").count(),
        200,
        "the newest 200 runs"
    );
    assert!(runs.body.contains("the newest 200 of 201 runs"), "caption");
    // Newest last: the chart's last point is the newest run.
    let last = weighted.rfind("href=\"/ui/runs/").unwrap();
    assert!(
        weighted[last..].starts_with("href=\"/ui/runs/2030-08-"),
        "{}",
        &weighted[last..last + 40]
    );

    let older = saved(&s)[0].clone();
    let diff = get(&s, &format!("/ui/runs/{older}/diff/2030-01-01-0900"), None).await;
    assert_eq!(diff.status, StatusCode::OK, "{}", diff.body);
    assert!(
        diff.body.contains("href=\"/ui/runs/2030-01-01-0900/cases/"),
        "{}",
        diff.body
    );
    let page = send(
        &s,
        axum::http::Request::builder()
            .uri("/ui/runs/2030-01-01-0900")
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
}

#[tokio::test]
async fn an_admin_accepts_a_run_from_its_page_and_the_runs_page_marks_it() {
    use crate::ui::{TOKEN, csrf, post, sign_in};
    let s = Server::with_env(&[("ASSAY_ADMIN_TOKEN", TOKEN)]);
    let (status, body) = s.get("/cli/test-harness?save_results=true").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = saved(&s).pop().unwrap();

    let runs = get(&s, "/ui/runs", None).await;
    assert!(
        runs.body.contains("No run is accepted as the baseline yet"),
        "{}",
        runs.body
    );
    // Signed out, the form is there but disabled, and a post is refused.
    let page = get(&s, &format!("/ui/runs/{id}"), None).await;
    assert!(
        page.body.contains("Accept as the baseline"),
        "{}",
        page.body
    );
    let token = csrf(&page.body);
    let refused = post(
        &s,
        &format!("/ui/runs/{id}/accept"),
        &[("csrf", &token), ("by", "ana")],
        None,
        Some("http://127.0.0.1:8000"),
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
    assert!(!s.root.join("baseline").exists());

    let cookie = sign_in(&s).await;
    let page = get(&s, &format!("/ui/runs/{id}"), Some(&cookie)).await;
    let token = csrf(&page.body);
    let done = post(
        &s,
        &format!("/ui/runs/{id}/accept"),
        &[("csrf", &token), ("by", "ana"), ("note", "the release run")],
        Some(&cookie),
        Some("http://127.0.0.1:8000"),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(s.root.join("baseline/accepted.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["id"], id.as_str());
    assert_eq!(record["accepted_by"], "ana (web UI)");
    assert_eq!(record["note"], "the release run");

    let runs = get(&s, "/ui/runs", None).await;
    assert!(
        runs.body.contains(&format!(
            "The accepted baseline is run <a class=\"nowrap\" href=\"/ui/runs/{id}\">{id}</a>"
        )),
        "{}",
        runs.body
    );
    assert!(
        runs.body.contains("<span class=\"tag accepted\""),
        "{}",
        runs.body
    );
    assert!(
        runs.body.contains("accepted</text>"),
        "the chart marks it: {}",
        runs.body
    );
    let page = get(&s, &format!("/ui/runs/{id}"), None).await;
    assert!(
        page.body
            .contains("accepted baseline</span> by ana (web UI)"),
        "{}",
        page.body
    );
}

/// Issue 42: a run of part of the suite is tagged on the runs page, plotted apart on the chart
/// (a hollow point off the line, never a dip), and cannot be accepted from its page.
#[tokio::test]
async fn a_partial_run_is_tagged_plotted_apart_and_not_offered_as_the_baseline() {
    use crate::ui::{TOKEN, csrf, post, sign_in};
    let s = Server::with_env(&[("ASSAY_ADMIN_TOKEN", TOKEN)]);
    let (status, body) = s.get("/cli/test-harness?save_results=true").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = s
        .get("/cli/test-harness?banks=state,pattern&save_results=true")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ids = saved(&s);
    let partial = ids
        .iter()
        .find(|id| {
            let text =
                std::fs::read_to_string(s.root.join(format!("results/results_{id}.json"))).unwrap();
            text.contains("banks_left_out")
        })
        .expect("the --banks run records the banks it left out")
        .clone();
    let whole = ids.iter().find(|id| **id != partial).unwrap().clone();

    let runs = get(&s, "/ui/runs", None).await;
    assert_eq!(runs.status, StatusCode::OK, "{}", runs.body);
    let row = |id: &str| {
        let at = runs
            .body
            .find(&format!("<td class=\"id\" title=\"{id}\">"))
            .unwrap();
        runs.body[at..at + runs.body[at..].find("</tr>").unwrap()].to_owned()
    };
    assert!(
        row(&partial).contains(
            "<span class=\"tag partial\" title=\"a partial run: --banks state,pattern (left out: semantic, always)\">partial</span>"
        ),
        "{}",
        row(&partial)
    );
    assert!(!row(&whole).contains("tag partial"), "{}", row(&whole));
    let chart = &runs.body[runs.body.find("<svg id=\"runs-trend\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    let weighted = &chart[chart.find("series-weighted").unwrap()..];
    let weighted = &weighted[..weighted.find("</g>").unwrap()];
    assert_eq!(weighted.matches("class=\"point\"").count(), 1, "{weighted}");
    assert!(!weighted.contains(&partial), "{weighted}");
    let apart = &chart[chart.find("series-apart").expect("an apart series")..];
    assert!(
        apart.contains(&format!("href=\"/ui/runs/{partial}\""))
            && apart.contains("class=\"point apart\"")
            && apart.contains("not comparable with a whole run"),
        "{apart}"
    );

    // Its page offers no accept form, and says why; a post is refused all the same.
    let cookie = sign_in(&s).await;
    let page = get(&s, &format!("/ui/runs/{partial}"), Some(&cookie)).await;
    assert!(
        page.body
            .contains("Not a run of the whole suite (partial: --banks state,pattern"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("Accept as the baseline</button>"));
    let token = csrf(
        &get(&s, &format!("/ui/runs/{whole}"), Some(&cookie))
            .await
            .body,
    );
    let refused = post(
        &s,
        &format!("/ui/runs/{partial}/accept"),
        &[("csrf", &token), ("by", "ana")],
        Some(&cookie),
        Some("http://127.0.0.1:8000"),
    )
    .await;
    assert!(refused.status.is_client_error(), "{}", refused.body);
    assert!(
        refused.body.contains("is a partial run"),
        "{}",
        refused.body
    );
    assert!(!s.root.join("baseline").exists());
}
