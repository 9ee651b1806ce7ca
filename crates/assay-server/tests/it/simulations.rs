//! The simulation pages through `app()`: the list, a report (scenarios with verdicts, mean,
//! spread and pass^k; the criteria heat map; state checks; errors and simulator faults apart),
//! a transcript with expandable tool calls beside the judge and the checks, a comparison of
//! reports, bad files as clear messages, and markup inert everywhere.

use axum::http::StatusCode;

use crate::support::Server;
use crate::ui::{INJECT, assert_inert, get};
use crate::ui_fixtures::{SimulationSpec, write_simulation};

fn spec(stamp: &str, scenarios: usize, repeat: u32) -> SimulationSpec {
    let mut s = SimulationSpec::new(stamp, scenarios, repeat, 8);
    INJECT.clone_into(&mut s.inject);
    s
}

#[tokio::test]
async fn reports_transcripts_and_comparisons_render_with_everything_escaped() {
    let s = Server::example();
    let a = write_simulation(&s.root, &spec("20261125_093000", 6, 4));
    let mut other = spec("20261126_093000", 6, 4);
    other.model = "openai/<b>other</b>".into();
    other.seed = 9;
    write_simulation(&s.root, &other);

    let list = get(&s, "/ui/simulations", None).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert_inert(&list, "simulation list");
    assert!(list.body.contains("20261125_093000") && list.body.contains("20261126_093000"));
    assert!(
        list.body.find("20261126_093000") < list.body.find("20261125_093000"),
        "newest first"
    );
    assert!(list.body.contains("openai/&lt;b&gt;other&lt;/b&gt;"));
    assert!(list.body.contains("name=\"r\" value=\"20261125_093000\""));

    let page = get(&s, "/ui/simulations/20261125_093000", None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_inert(&page, "simulation report");
    for section in [
        "id=\"scenario-table\"",
        "id=\"heatmap\"",
        "id=\"check-table\"",
        "id=\"errors\"",
        "id=\"faults\"",
        "id=\"uncertain\"",
        "id=\"failed\"",
        "id=\"run-table\"",
        "pass^4",
    ] {
        assert!(page.body.contains(section), "{section}");
    }
    // Verdicts are words and symbols, each run linked to its transcript.
    assert!(page.body.contains("✓ pass") && page.body.contains("✗ FAIL (check)"));
    assert!(page.body.contains("! ERROR"));
    assert!(
        page.body
            .contains("/ui/simulations/20261125_093000/runs/scenario_000/1")
    );
    // The heat map: a row per scenario, a cell per criterion, each with its number.
    let heat = &page.body[page.body.find("id=\"heatmap\"").unwrap()..];
    let heat = &heat[..heat.find("</table>").unwrap()];
    assert_eq!(
        heat.matches("<tr><th scope=\"row\">").count(),
        a.scenarios.len()
    );
    assert!(heat.contains("class=\"num h"));

    // A transcript: turns, tool calls expandable with arguments, result, error flag and
    // duration; the judge's scores with their reasoning; the checks with what they read.
    let run = a
        .runs
        .iter()
        .find(|r| r.repeat == 1 && r.transcript.is_some())
        .unwrap();
    let uri = format!(
        "/ui/simulations/20261125_093000/runs/{}/{}",
        run.scenario_id, run.repeat
    );
    let t = get(&s, &uri, None).await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.body);
    assert_inert(&t, "transcript");
    assert_eq!(
        t.body.matches("<article class=\"turn").count(),
        run.transcript.as_ref().unwrap().turns.len()
    );
    assert!(t.body.contains("<details class=\"tool\" id=\"call-1\">"));
    assert!(t.body.contains("<h4>Arguments</h4><pre class=\"args\">"));
    assert!(t.body.contains("✓ ok") && t.body.contains(" ms"));
    assert!(t.body.contains("class=\"reasoning\""));
    assert!(t.body.contains("read from tool scout-quest.get_state"));
    assert!(t.body.contains("What it read"));
    // A run whose tool call failed shows the flag.
    let failing = a
        .runs
        .iter()
        .find(|r| {
            r.transcript
                .as_ref()
                .is_some_and(|t| t.tool_calls().any(|c| c.is_error))
        })
        .unwrap();
    let t = get(
        &s,
        &format!(
            "/ui/simulations/20261125_093000/runs/{}/{}",
            failing.scenario_id, failing.repeat
        ),
        None,
    )
    .await;
    assert!(t.body.contains("<details class=\"tool error\""));
    assert!(t.body.contains("✗ error"));

    // Two reports compared as `assay simulate compare` does.
    let c = get(
        &s,
        "/ui/simulations/compare?r=20261125_093000&r=20261126_093000",
        None,
    )
    .await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.body);
    assert_inert(&c, "comparison");
    assert!(c.body.contains("id=\"comparison\""));
    assert!(
        c.body.contains("anthropic/coach-under-test") && c.body.contains("openai/&lt;b&gt;other")
    );
    assert!(c.body.contains("id=\"verdicts\""));
    assert!(c.body.contains(" against anthropic/coach-under-test: "));
    let one = get(&s, "/ui/simulations/compare?r=20261125_093000", None).await;
    assert_eq!(one.status, StatusCode::BAD_REQUEST);
    let unknown = get(
        &s,
        "/ui/simulations/compare?r=20261125_093000&r=19990101_000000",
        None,
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let odd = get(&s, "/ui/simulations/compare?r=a&x=1", None).await;
    assert_eq!(odd.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn bad_simulation_files_are_clear_messages_never_500() {
    let s = Server::example();
    let r = write_simulation(&s.root, &spec("20261125_093000", 2, 2));
    // A run whose transcript is in neither the report nor its file.
    let path = s.root.join("sim/reports/report_20261125_093000.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let run = &r.runs[0];
    v["runs"][0].as_object_mut().unwrap().remove("transcript");
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    let file = s.root.join(format!(
        "sim/reports/transcripts/20261125_093000/{}-{}.json",
        run.scenario_id, run.repeat
    ));
    // Still there: read from the file.
    let uri = format!(
        "/ui/simulations/20261125_093000/runs/{}/{}",
        run.scenario_id, run.repeat
    );
    let page = get(&s, &uri, None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("<article class=\"turn"), "{}", page.body);
    std::fs::remove_file(&file).unwrap();
    let page = get(&s, &uri, None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("id=\"no-transcript\""));
    assert!(page.body.contains("there is no transcript file at"));
    assert!(
        page.body.contains("class=\"reasoning\""),
        "the judgement is still shown"
    );
    let missing = get(&s, "/ui/simulations/20261125_093000/runs/nope/1", None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let bad = get(&s, "/ui/simulations/20261125_093000/runs/nope/x", None).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    s.write(
        "sim/reports/report_20270101_000000.json",
        "{\"schema_version\": 42, \"suite\": \"future\"}",
    );
    let p = get(&s, "/ui/simulations/20270101_000000", None).await;
    assert_eq!(p.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", p.body);
    assert!(
        p.body.contains("a simulation report of version 42"),
        "{}",
        p.body
    );
    s.write(
        "sim/reports/report_20270102_000000.json",
        "{\"schema_version\": 2,",
    );
    let p = get(&s, "/ui/simulations/20270102_000000", None).await;
    assert_eq!(p.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(p.body.contains("not JSON"));
    let p = get(&s, "/ui/simulations/20990101_000000", None).await;
    assert_eq!(p.status, StatusCode::NOT_FOUND);
    let p = get(&s, "/ui/simulations/..%2F..%2Fetc", None).await;
    assert_eq!(p.status, StatusCode::BAD_REQUEST);
    let list = get(&s, "/ui/simulations", None).await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(
        list.body.matches("✗ unreadable").count(),
        2,
        "{}",
        list.body
    );
}

#[tokio::test]
async fn a_scenario_id_that_climbs_out_of_the_project_reads_nothing_there() {
    let s = Server::example();
    let r = write_simulation(&s.root, &spec("20261125_093000", 1, 1));
    let run = &r.runs[0];
    let inside = s.root.join(format!(
        "sim/reports/transcripts/20261125_093000/{}-{}.json",
        run.scenario_id, run.repeat
    ));
    // A transcript outside the project, with a marker, where `../` from the transcripts
    // folder leads.
    let outside = s.root.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mut secret: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&inside).unwrap()).unwrap();
    secret["turns"][0]["content"] = "OUTSIDE-MARKER".into();
    std::fs::write(outside.join("leak-1.json"), secret.to_string()).unwrap();
    let path = s.root.join("sim/reports/report_20261125_093000.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["runs"][0].as_object_mut().unwrap().remove("transcript");
    v["runs"][0]["scenario_id"] = "../../../../../outside/leak".into();
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    let page = get(
        &s,
        "/ui/simulations/20261125_093000/runs/..%2F..%2F..%2F..%2F..%2Foutside%2Fleak/1",
        None,
    )
    .await;
    assert!(
        page.status.is_success() || page.status.is_client_error(),
        "{}",
        page.body
    );
    assert!(!page.body.contains("OUTSIDE-MARKER"), "{}", page.body);
    assert!(
        !page.body.contains("<article class=\"turn"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("leaves the transcripts folder"),
        "{}",
        page.body
    );

    // A symbolic link inside the transcripts folder that leads out is refused too.
    v["runs"][0]["scenario_id"] = "linked".into();
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    std::os::unix::fs::symlink(
        outside.join("leak-1.json"),
        s.root
            .join("sim/reports/transcripts/20261125_093000/linked-1.json"),
    )
    .unwrap();
    let page = get(&s, "/ui/simulations/20261125_093000/runs/linked/1", None).await;
    assert!(!page.body.contains("OUTSIDE-MARKER"), "{}", page.body);
    assert!(
        page.body.contains("leads outside the transcripts folder"),
        "{}",
        page.body
    );
}
