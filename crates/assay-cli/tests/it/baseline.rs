//! `assay run --baseline` and `assay runs diff` (issue 18): a run compared case by case with a
//! saved one, the regression rules of `[gate]`, and what differs between the two runs' setups
//! shown first.

use crate::fake_openai::{FakeOpenAi, Faults};
use crate::support::{Scratch, assay};

/// The saved results files (JSON) of a project, oldest first (`-2` after the plain stamp).
fn saved(p: &Scratch) -> Vec<String> {
    let mut names: Vec<String> = p
        .results()
        .into_iter()
        .filter(|n| n.starts_with("results_"))
        .collect();
    let key = |n: &String| {
        let id = n.trim_start_matches("results_").trim_end_matches(".json");
        let (stamp, k) = (
            id.get(..15).unwrap_or(id),
            id.get(16..).and_then(|k| k.parse().ok()).unwrap_or(1u32),
        );
        (stamp.to_owned(), k)
    };
    names.sort_by_key(key);
    names
}

#[test]
fn a_kb_edit_that_breaks_cases_fails_the_gate_and_names_exactly_those_cases() {
    let p = Scratch::example();
    let first = p.assay(&["run"]);
    assert_eq!(first.code, 0, "{first:?}");

    // An unchanged re-run: exit 0 and "no change".
    let same = p.assay(&["run", "--baseline", "latest"]);
    assert_eq!(same.code, 0, "{same:?}");
    assert!(same.stdout.starts_with("Compared with "), "{}", same.stdout);
    assert!(
        same.stdout.contains("  no change: same settings"),
        "{}",
        same.stdout
    );
    assert!(
        same.stdout.contains("regression gate: passed"),
        "{}",
        same.stdout
    );

    // The welcome handler, deactivated: the four state cases that expect it hard-fail.
    let root = p.root.to_str().unwrap().to_owned();
    let edit = assay(&[
        "kb",
        "deactivate",
        "handler_first_conversation",
        "--project",
        &root,
    ]);
    assert_eq!(edit.code, 0, "{edit:?}");
    let broken = ["STATE-001", "STATE-011", "STATE-014", "STATE-018"];
    let run = p.assay(&["run", "--baseline", "latest"]);
    assert_eq!(run.code, 1, "{run:?}");
    // The console leads with the comparison: the knowledge-base change first, then the cases.
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("Compared with "), "{}", run.stdout);
    assert!(
        lines[2].contains("knowledge base: entities 1 changed (handler_first_conversation)"),
        "{}",
        run.stdout
    );
    let expected = broken
        .iter()
        .map(|id| format!("state/{id}"))
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        run.stdout.contains(&format!(
            "4 new hard fail(s): {expected} (no_new_hard_fails)"
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(&format!(
            "the run regressed against the baseline: {expected}"
        )),
        "{}",
        run.stderr
    );
    // The reports say the same, and the JSON names exactly these cases.
    let names = saved(&p);
    let newest = names.last().unwrap();
    let log = p.json(&format!("results/{newest}"));
    let gate = &log["baseline"]["gate"];
    assert_eq!(gate["passed"], false);
    let cases: Vec<&str> = gate["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(cases, expected.split(", ").collect::<Vec<_>>());
    assert_eq!(
        log["baseline"]["kb_changes"]["changed"][0],
        "handler_first_conversation"
    );
    let stamp = newest
        .trim_start_matches("results_")
        .trim_end_matches(".json");
    let md = p.read(&format!("results/report_{stamp}.md"));
    assert!(md.contains("## Compared with "), "{md}");
    assert!(md.contains("**Regression gate: FAILED**"), "{md}");
    assert!(md.contains("### New hard fails (4)"), "{md}");
    for id in broken {
        assert!(
            md.contains(&format!("| state/{id} | 100 | 0 | -100 |")),
            "{md}"
        );
    }
    let html = p.read(&format!("results/report_{stamp}.html"));
    assert!(html.contains("<section id=\"compared\">"), "{html}");
    assert!(html.contains("Regression gate: FAILED"), "{html}");
    for id in broken {
        assert!(html.contains(&format!("<code>state/{id}</code>")), "{id}");
    }

    // The rule can be switched off; then only the health gate decides.
    p.edit(
        "assay.toml",
        "[gate]\n",
        "[gate]\nno_new_hard_fails = false\n",
    );
    let base = names[names.len() - 2]
        .trim_start_matches("results_")
        .trim_end_matches(".json")
        .to_owned();
    let off = p.assay(&["run", "--baseline", &base]);
    assert_eq!(off.code, 0, "{off:?}");
    assert!(
        off.stdout
            .contains("gate.no_new_hard_fails: (not set) → false"),
        "{}",
        off.stdout
    );

    // `assay runs diff` gives the same comparison between two saved runs.
    let diff = assay(&["runs", "diff", &base, "latest", "--project", &root]);
    assert_eq!(diff.code, 0, "{diff:?}");
    assert!(
        diff.stdout
            .contains("knowledge base: entities 1 changed (handler_first_conversation)"),
        "{}",
        diff.stdout
    );
    assert!(
        diff.stdout
            .contains("new hard fails: state/STATE-001 (100 → 0)"),
        "{}",
        diff.stdout
    );
    let json = assay(&[
        "runs",
        "diff",
        &base,
        "latest",
        "--json",
        "--project",
        &root,
    ]);
    assert_eq!(json.json()["counts"]["new_hard_fails"], 4);
    // The header, one line a run, and the line on the accepted baseline.
    let list = assay(&["runs", "list", "--project", &root]);
    assert_eq!(
        list.stdout.lines().count(),
        2 + saved(&p).len(),
        "{}",
        list.stdout
    );
    assert!(
        list.stdout
            .ends_with("no run accepted as the baseline yet (`assay runs accept latest`)\n"),
        "{}",
        list.stdout
    );
}

#[test]
fn a_run_with_another_embedder_leads_with_the_setup_difference() {
    let p = Scratch::example();
    assert_eq!(p.assay(&["run", "--banks", "semantic"]).code, 0);
    let server = FakeOpenAi::start(Vec::new(), Faults::default());
    let toml = p.read("assay.toml");
    p.write(
        "assay.toml",
        &format!(
            "{toml}\n[providers]\nopenai_base_url = \"{}\"\n",
            server.base_url
        ),
    );
    let run = p.assay_env(
        &[
            "run",
            "--banks",
            "semantic",
            "--embedder",
            "openai/text-embedding-3-small",
            "--baseline",
            "latest",
        ],
        &[("OPENAI_API_KEY", "sk-test-0123456789abcdef")],
    );
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[1].contains("The runs differ in what was run"),
        "{}",
        run.stdout
    );
    assert!(
        lines[2].starts_with("    setup.semantic: builtin/hashed-ngrams")
            && lines[2].contains("→ openai/text-embedding-3-small"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("no change"), "{}", run.stdout);
}

#[test]
fn a_baseline_that_cannot_be_compared_is_bad_input_and_nothing_is_written() {
    let p = Scratch::example();
    assert_eq!(p.assay(&["run"]).code, 0);
    let name = saved(&p).pop().unwrap();
    let log = p.json(&format!("results/{name}"));
    let refused = |baseline: &str, needle: &str| {
        let before = p.results();
        let run = p.assay(&["run", "--baseline", baseline]);
        assert_eq!(run.code, 2, "{baseline}: {run:?}");
        assert!(run.stderr.contains(needle), "{baseline}: {}", run.stderr);
        assert_eq!(p.results(), before, "nothing written");
    };
    // An older RunLog.
    let mut old = log.clone();
    old["schema_version"] = 1.into();
    p.write_json("old.json", &old);
    refused(
        p.path("old.json").to_str().unwrap(),
        "written by an older assay (RunLog version 1",
    );
    // A newer one.
    let mut newer = log.clone();
    newer["schema_version"] = 99.into();
    p.write_json("newer.json", &newer);
    refused(
        p.path("newer.json").to_str().unwrap(),
        "written by a newer assay",
    );
    // A run of another project: no case in common.
    let mut other = log.clone();
    for bank in ["semantic", "state", "pattern", "always"] {
        for case in other[bank]["results"].as_array_mut().unwrap() {
            case["test_id"] = format!("OTHER-{}", case["test_id"].as_str().unwrap()).into();
        }
    }
    other["project"] = "/somewhere/else".into();
    p.write_json("other.json", &other);
    refused(
        p.path("other.json").to_str().unwrap(),
        "a run of another project (`/somewhere/else`)",
    );
    // Not a results file, not JSON, and an id that names no run.
    p.write("notes.json", "{\"hello\": 1}");
    refused(
        p.path("notes.json").to_str().unwrap(),
        "not a run's results file",
    );
    p.write("torn.json", "{\"schema_version\": 2, ");
    refused(p.path("torn.json").to_str().unwrap(), "not JSON");
    refused("2020-01-01-0000", "no saved run");
    refused(
        "nonsense",
        "not a file, `latest`, `accepted`, a saved run's id",
    );
}
