//! Saved runs stay whole: two `assay run` on one project never share a journal (the second is
//! refused, naming the first), a process killed inside the save leaves the saved run intact
//! and `--resume` then says it was saved, and a run log changed afterwards is named by every
//! reader instead of believed.

use std::time::{Duration, Instant};

use crate::scale::{grow_state_bank_to, saved};
use crate::support::{Run, Scratch, assay};

/// Cases of the grown state bank: a run this size streams its cases to a run log.
const CASES: usize = 10_000;

fn project() -> Scratch {
    let p = Scratch::example();
    grow_state_bank_to(&p, CASES);
    p
}

fn id_of(name: &str) -> &str {
    name.trim_start_matches("results_")
        .trim_end_matches(".json")
}

/// `assay runs diff A B [--json]` on the project.
fn runs_diff(p: &Scratch, a: &str, b: &str, json: bool) -> Run {
    let root = p.root().to_str().unwrap().to_owned();
    let mut args = vec!["runs", "diff", a, b, "--project", &root];
    if json {
        args.push("--json");
    }
    assay(&args)
}

#[test]
fn two_runs_on_one_project_never_share_a_journal() {
    let p = project();
    let mut refused = 0;
    let mut finished = 0;
    for round in 0..20 {
        let first = p.spawn_output(&["run", "--banks", "state"]);
        std::thread::sleep(Duration::from_millis(50));
        let second = p.assay(&["run", "--banks", "state"]);
        let first = first.wait_with_output().unwrap();
        let outcomes = [
            (
                first.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&first.stderr).into_owned(),
            ),
            (second.code, second.stderr.clone()),
        ];
        // Whichever reached the lock first runs; the other finishes first or is refused,
        // naming the holder. Never both refused, never a damaged save.
        assert!(
            outcomes.iter().any(|(code, _)| *code == 0),
            "round {round}: {outcomes:?}"
        );
        for (code, stderr) in &outcomes {
            match code {
                0 => finished += 1,
                2 => {
                    assert!(
                        stderr.contains("another assay run holds the lock on project")
                            && stderr.contains("run (pid ")
                            && stderr.contains("one `assay run` at a time per project"),
                        "round {round}: {stderr}"
                    );
                    assert!(
                        !stderr.contains("interrupted run"),
                        "a live run was called interrupted: {stderr}"
                    );
                    refused += 1;
                }
                _ => panic!("round {round}: {outcomes:?}"),
            }
        }
    }
    assert!(refused > 0, "the second run never met the first");
    let names = saved(&p);
    assert_eq!(names.len(), finished, "{:?}", p.results());
    // Every saved run is whole: its run log belongs to it and passes every check, so any two
    // compare, and the latest is a baseline.
    for pair in names.windows(2) {
        let diff = runs_diff(&p, id_of(&pair[0]), id_of(&pair[1]), true);
        assert_eq!(diff.code, 0, "{pair:?}: {diff:?}");
        assert_eq!(diff.json()["counts"]["unchanged"], CASES, "{pair:?}");
    }
    let run = p.assay(&["run", "--banks", "state", "--baseline", "latest"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!p.path(".assay/journal.jsonl").exists());
}

#[test]
fn a_kill_inside_the_save_leaves_the_saved_run_whole_and_resume_says_it_was_saved() {
    let p = project();
    let run = p.assay(&["run", "--banks", "state"]);
    assert_eq!(run.code, 0, "{run:?}");
    let first = saved(&p);
    let cases: Vec<String> = p
        .results()
        .into_iter()
        .filter(|n| n.starts_with("cases_"))
        .collect();
    assert_eq!(cases.len(), 1, "{:?}", p.results());
    let before = std::fs::read(p.path(&format!("results/{}", cases[0]))).unwrap();
    // The state a kill leaves between the save and the journal's removal: the journal still
    // linked to the saved run log.
    std::fs::hard_link(
        p.path(&format!("results/{}", cases[0])),
        p.path(".assay/journal.jsonl"),
    )
    .unwrap();

    // --resume: the run was saved; nothing is run or saved again.
    let resumed = p.assay(&["run", "--banks", "state", "--resume"]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert!(resumed.stderr.contains("was saved already"), "{resumed:?}");
    assert_eq!(saved(&p), first);
    assert!(!p.path(".assay/journal.jsonl").exists());
    assert_eq!(
        std::fs::read(p.path(&format!("results/{}", cases[0]))).unwrap(),
        before
    );

    // A plain run after the same state: the saved run log keeps its cases.
    std::fs::hard_link(
        p.path(&format!("results/{}", cases[0])),
        p.path(".assay/journal.jsonl"),
    )
    .unwrap();
    let started = Instant::now();
    let run = p.assay(&["run", "--banks", "state"]);
    assert_eq!(run.code, 0, "{run:?} after {:?}", started.elapsed());
    assert_eq!(
        std::fs::read(p.path(&format!("results/{}", cases[0]))).unwrap(),
        before,
        "the next run wrote into the saved run's run log"
    );
    let names = saved(&p);
    assert_eq!(names.len(), 2, "{names:?}");
    let diff = runs_diff(&p, id_of(&names[0]), id_of(&names[1]), false);
    assert_eq!(diff.code, 0, "{diff:?}");
}

#[test]
fn a_run_log_changed_after_the_save_is_named_not_believed() {
    let p = project();
    let run = p.assay(&["run", "--banks", "state"]);
    assert_eq!(run.code, 0, "{run:?}");
    let names = saved(&p);
    let id = id_of(&names[0]).to_owned();
    let file = p
        .results()
        .into_iter()
        .find(|n| n.starts_with("cases_"))
        .unwrap();
    let path = p.path(&format!("results/{file}"));
    let original = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = original.lines().collect();
    // Line 6 replaced by a copy of line 3: the count holds.
    lines[5] = lines[2];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let diff = runs_diff(&p, &id, &id, false);
    assert_eq!(diff.code, 2, "{diff:?}");
    assert!(
        diff.stderr.contains(&format!("{file}:6: the state case"))
            && diff.stderr.contains("again (first on line 3)"),
        "{diff:?}"
    );
    let base = p.assay(&["run", "--banks", "state", "--baseline", &id]);
    assert_ne!(base.code, 0, "{base:?}");
    assert!(base.stderr.contains(&format!("{file}:6:")), "{base:?}");
}
