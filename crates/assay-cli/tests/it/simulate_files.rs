//! What a simulation writes, and when: transcripts as conversations end (an interrupted run
//! keeps them), and a preflight that fails beside the runs' setup stops them before any call.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;

use serde_json::Value;

use crate::sim_provider::Behaviour;
use crate::simulate::{ANTHROPIC, env_with, project, provider, runs, sim_scratch, simulate};

/// Issue 32: each transcript is written as its conversation ends, not after the last run, so a
/// simulation interrupted part way leaves the transcripts of the conversations that ended (whole
/// files: each is written atomically) and no report.
#[test]
fn transcripts_are_written_as_conversations_end_and_survive_an_interrupted_run() {
    let provider = provider(Behaviour {
        latency: std::time::Duration::from_millis(300),
        ..Behaviour::default()
    });
    let scratch = project(&provider);
    let env = env_with(&[]);
    let mut command = Command::new(env!("CARGO_BIN_EXE_assay"));
    command
        .args(["simulate", scratch.root().to_str().unwrap()])
        .args(ANTHROPIC)
        .args(["--scenarios", "daily_chore,off_topic"])
        .args(["--concurrency", "1", "--runs-in-flight", "1"])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (k, v) in &env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let reports = scratch.path("sim/reports");
    let transcripts = |reports: &Path| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(reports.join("transcripts"))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .flat_map(|stamp| std::fs::read_dir(stamp.path()).into_iter().flatten())
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        files
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let first = loop {
        if let [file] = transcripts(&reports).as_slice() {
            break file.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no transcript appeared while the simulation ran"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the simulation ended before a transcript was seen"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    // One conversation at a time: the second has at least its judge's call and several turns
    // of 300 ms to go.
    child.kill().unwrap();
    child.wait().unwrap();
    let transcript: Value = serde_json::from_str(&std::fs::read_to_string(&first).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", first.display()));
    assert!(
        !transcript["turns"].as_array().unwrap().is_empty(),
        "{transcript}"
    );
    let reports_written: Vec<String> = std::fs::read_dir(&reports)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("report_") || n.starts_with("latest"))
        .collect();
    assert_eq!(reports_written, Vec::<String>::new());

    // An uninterrupted simulation writes the same files as before: one transcript per run,
    // beside the reports that link to them.
    let out = simulate(
        &scratch,
        &[
            &ANTHROPIC[..],
            &["--scenarios", "off_topic", "--repeat", "2"],
        ]
        .concat(),
        &[],
    );
    assert!(out.code == 0 || out.code == 1, "{out:?}");
    let json = std::fs::read_dir(&reports)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("report_"))
                && p.extension().is_some_and(|e| e == "json")
        })
        .expect("a report");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let stamp = json
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches("report_")
        .to_owned();
    for run in runs(&report) {
        let file = reports.join(format!(
            "transcripts/{stamp}/{}-{}.json",
            run["scenario_id"].as_str().unwrap(),
            run["repeat"]
        ));
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(saved, run["transcript"], "{}", file.display());
    }
    assert_eq!(transcripts(&reports).len(), 3);
}

/// Issue 32: the preflight runs beside the scenario runs' setup. One that fails after the runs
/// started theirs (a check names a tool no server offers: known only once the preflight's
/// server answered) still stops the simulation before any model call, writes no report and
/// no transcript, and leaves no scratch folder or server behind.
#[test]
fn a_preflight_that_fails_beside_the_runs_setup_stops_them_before_any_call() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    scratch.edit(
        "sim/scenarios/daily_chore.yaml",
        "tool: {server: scout, name: get_quest_state, arguments: {}}",
        "tool: {server: scout, name: no_such_tool, arguments: {}}",
    );
    let out = simulate(
        &scratch,
        &[&ANTHROPIC[..], &["--repeat", "3"]].concat(),
        &[],
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .contains("server `scout` has no tool `no_such_tool`"),
        "{}",
        out.stderr
    );
    assert_eq!(
        provider.stats.requests.load(Ordering::SeqCst),
        0,
        "no model call"
    );
    assert!(!scratch.path("sim/reports").exists(), "nothing written");
    assert_eq!(sim_scratch(&scratch), Vec::<String>::new());
}
