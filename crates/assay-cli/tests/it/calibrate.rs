//! `assay expectations override` and `assay calibrate`: usage errors, and an override that
//! resolves as `human_override_<date>` without touching existing files.

use crate::support::{Scratch, assay};

fn history(p: &Scratch) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(p.path("test_banks/semantic/history"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn an_override_is_recorded_in_a_new_file_and_wins() {
    let p = Scratch::example();
    let dir = p.path("");
    let dir = dir.to_str().unwrap();
    let before = history(&p);
    let old = p.read("test_banks/semantic/history/expectations_2026-11-05.json");
    let run = assay(&[
        "expectations",
        "override",
        "V2-GR-001",
        "--project",
        dir,
        "--primary",
        "gray_rock",
        "--secondary",
        "medium_response_time",
        "--rank-check",
        "gray_rock>medium_response_time",
        "--reason",
        "clinical review",
        "--reviewer",
        "Dr. T",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let out = run.json();
    let date = out["human_override"]["override_date"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(history(&p).len(), before.len() + 1);
    assert_eq!(
        p.read("test_banks/semantic/history/expectations_2026-11-05.json"),
        old
    );

    let run = assay(&["expectations", dir, "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    let case = doc["expectations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["test_id"] == "V2-GR-001")
        .unwrap()
        .clone();
    assert_eq!(case["_source"], format!("human_override_{date}"));
    assert_eq!(
        case["expected_secondary"],
        serde_json::json!(["medium_response_time"])
    );
}

#[test]
fn bad_overrides_and_calibrations_exit_2_and_write_nothing() {
    let p = Scratch::example();
    let dir = p.path("");
    let dir = dir.to_str().unwrap();
    let before = history(&p);
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "expectations",
                "override",
                "NOPE",
                "--project",
                dir,
                "--primary",
                "gray_rock",
                "--reason",
                "x",
            ],
            "unknown test id `NOPE`",
        ),
        (
            &[
                "expectations",
                "override",
                "V2-GR-001",
                "--project",
                dir,
                "--primary",
                "ghost",
                "--reason",
                " ",
            ],
            "unknown entity `ghost`",
        ),
        (
            &["calibrate", dir, "--scope", "single"],
            "needs the test ids",
        ),
        (
            &[
                "calibrate",
                dir,
                "--scope",
                "affected",
                "--added-entities",
                "ghost",
            ],
            "`ghost`",
        ),
        (
            &["calibrate", dir],
            "missing API key: set the environment variable ANTHROPIC_API_KEY",
        ),
    ];
    for (args, want) in cases {
        let run = assay(args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(want), "{args:?}: {run:?}");
    }
    assert_eq!(history(&p), before);
    assert!(!p.path("calibration").exists());
}
