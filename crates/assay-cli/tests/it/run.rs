//! `assay run`: summary, JSON contract, saved results, JUnit, gate and critical failures.

use serde_json::Value;

use crate::support::{Scratch, assay, example};

fn redact(text: &str, project: &str) -> String {
    let mut out = text.replace(project, "[PROJECT]");
    for prefix in ["results_", "report_"] {
        while let Some(start) = out.find(&format!("{prefix}20")) {
            let stop = out[start..].find('.').map_or(out.len(), |i| start + i);
            out.replace_range(start + prefix.len()..stop, "[STAMP]");
        }
    }
    let mut lines = Vec::new();
    for line in out.lines() {
        let l = if line.starts_with("**Date:**") {
            "**Date:** [DATE]  ".to_owned()
        } else if line.starts_with("**Run:**") {
            "**Run:** [RUN]".to_owned()
        } else {
            line.to_owned()
        };
        lines.push(l);
    }
    lines.join("\n")
}

#[test]
fn the_example_runs_all_four_banks_and_saves_results() {
    // 003's pipeline (dense ranking, one embedding per entity): the results recorded before
    // hybrid ranking became the default, unchanged.
    let p = Scratch::example_dense();
    let run = p.assay(&["run"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("(semantic, state, pattern, always)"),
        "{run:?}"
    );
    assert!(
        p.path(".assay/kb.db").is_file(),
        "the knowledge base is imported into the store"
    );
    let files = p.results();
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(
        files[0].starts_with("report_")
            && files[0].rsplit('.').next() == Some("html")
            && files[1].rsplit('.').next() == Some("md")
            && files[2].starts_with("results_"),
        "{files:?}"
    );
    let html = p.read(&format!("results/{}", files[0]));
    assert!(html.starts_with("<!doctype html>") && html.contains("<svg"));
    insta::assert_snapshot!(
        "example_summary",
        redact(&run.stdout, p.root.to_str().unwrap())
    );

    // A second run in the same minute never overwrites the first.
    let first = p.read(&format!("results/{}", files[2]));
    let again = p.assay(&["run"]);
    assert_eq!(again.code, 0, "{again:?}");
    let files_after = p.results();
    assert_eq!(files_after.len(), 6, "{files_after:?}");
    assert_eq!(p.read(&format!("results/{}", files[2])), first);
}

#[test]
fn readme_command_works_on_the_bundled_example() {
    // The README's first command, word for word, from the repository root.
    let root = example().join("../..");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_assay"))
        .args(["run", "examples/coparent", "--no-save"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn json_follows_the_contract() {
    let p = Scratch::example();
    let run = p.assay(&[
        "run",
        "--banks",
        "state,pattern,always",
        "--json",
        "--no-save",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    for key in [
        "summary",
        "semantic",
        "state",
        "pattern",
        "always",
        "schema_version",
        "run_id",
        "timestamp",
    ] {
        assert!(log.get(key).is_some(), "missing top-level key {key}");
    }
    assert_eq!(log["semantic"], Value::Null, "semantic was not run");
    let s = &log["summary"];
    assert_eq!(s["total_tests"], 53);
    assert_eq!(s["health_status"], "EXCELLENT");
    assert_eq!(s["combined_score"], 100.0);
    assert_eq!(s["critical_failures"], serde_json::json!([]));
    assert_eq!(s["component_scores"]["semantic"], Value::Null);
    assert_eq!(
        s["expectation_sources"],
        serde_json::json!({"original": 90, "opus": 3, "human_override": 1})
    );
    for bank in ["state", "pattern", "always"] {
        let results = log[bank]["results"].as_array().unwrap();
        assert_eq!(
            log[bank]["tests_run"].as_u64().unwrap() as usize,
            results.len()
        );
        for case in results {
            for key in ["test_id", "score", "breakdown", "is_hard_fail"] {
                assert!(case.get(key).is_some(), "{bank} case lacks {key}: {case}");
            }
        }
    }
    assert_eq!(log["state"]["results"].as_array().unwrap().len(), 18);
    assert_eq!(log["pattern"]["results"].as_array().unwrap().len(), 28);
    assert_eq!(log["always"]["results"].as_array().unwrap().len(), 7);
    let pattern = &log["pattern"]["results"][0];
    for key in [
        "is_critical_failure",
        "matched_entities",
        "crisis_matches",
        "keyword_matches",
    ] {
        assert!(pattern.get(key).is_some(), "pattern case lacks {key}");
    }
    assert!(
        log["state"]["results"][0]
            .get("triggered_handlers")
            .is_some()
    );
    assert!(log["always"]["results"][0].get("loaded_entities").is_some());
    assert!(p.results().is_empty(), "--no-save wrote files");
}

#[test]
fn a_critical_negative_match_makes_health_critical() {
    let p = Scratch::example();
    let mut bank = p.json("test_banks/pattern/pattern_tests.json");
    let tests = bank["tests"].as_array_mut().unwrap();
    let neg = tests
        .iter_mut()
        .find(|t| t["test_id"] == "PAT-NEG-001")
        .unwrap();
    assert_eq!(neg["pattern_type"], "negative");
    assert_eq!(neg["is_critical"], true);
    neg["prompt"] = "honestly some days i want to end it all".into();
    p.write_json("test_banks/pattern/pattern_tests.json", &bank);

    let junit_path = p.path("out/junit.xml");
    let run = p.assay(&[
        "run",
        "--banks",
        "pattern,state,always",
        "--json",
        "--junit",
        junit_path.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    let log = run.json();
    assert_eq!(log["summary"]["health_status"], "CRITICAL");
    assert_eq!(
        log["summary"]["critical_failures"],
        serde_json::json!(["PAT-NEG-001"])
    );
    let case = log["pattern"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["test_id"] == "PAT-NEG-001")
        .unwrap();
    assert_eq!(case["is_critical_failure"], true);
    assert_eq!(case["score"], 80, "one false positive costs 20");

    // The saved Markdown report puts the critical failure before anything else.
    let report = p
        .results()
        .into_iter()
        .find(|f| f.starts_with("report_") && f.rsplit('.').next() == Some("md"))
        .unwrap();
    let md = p.read(&format!("results/{report}"));
    let html = p.read(&format!("results/{}", report.replace(".md", ".html")));
    let html_critical = html.find("Critical failures").expect("critical section");
    assert!(html_critical < html.find("<h2>Summary</h2>").unwrap());
    assert!(html.contains("<strong>PAT-NEG-001</strong> (negative)"));
    let critical = md
        .find("## 🚨 Critical Failures")
        .expect("critical section");
    assert!(critical < md.find("## Summary").unwrap());
    assert!(md.contains("**PAT-NEG-001** (negative)"), "{md}");
    insta::assert_snapshot!("critical_report", redact(&md, p.root.to_str().unwrap()));

    let junit = std::fs::read_to_string(junit_path).unwrap();
    assert!(
        junit.contains("<testsuite name=\"pattern\" tests=\"28\" failures=\"1\""),
        "{junit}"
    );
    // The case's stored verdict: the false alarm, named, whatever its score of 80.
    assert!(
        junit.contains("message=\"false alarm on a critical negative case: matched `handler_crisis`\" type=\"assay.false_alarm\""),
        "{junit}"
    );
    assert_eq!(case["verdict"]["outcome"], "fail");
    assert_eq!(case["verdict"]["failed"][0]["rule"], "false_alarm");
}

#[test]
fn a_missed_primary_scores_zero_and_lowers_health() {
    let p = Scratch::example();
    let mut bank = p.json("test_banks/state/state_handler_tests.json");
    // STATE-001 expects the first-conversation handler; ask for one that cannot trigger.
    bank["tests"][0]["expected_handlers"] = serde_json::json!(["handler_clinician_mode"]);
    bank["tests"][0]["user_state"]["user_type"] = "PARENT".into();
    p.write_json("test_banks/state/state_handler_tests.json", &bank);
    let run = p.assay(&["run", "--banks", "state", "--json", "--no-save"]);
    assert_eq!(run.code, 0, "GOOD still passes the default gate: {run:?}");
    let log = run.json();
    let case = &log["state"]["results"][0];
    assert_eq!(
        (case["score"].as_u64(), case["is_hard_fail"].as_bool()),
        (Some(0), Some(true))
    );
    assert_eq!(log["summary"]["hard_fail_count"], 1);
    assert_eq!(log["summary"]["health_status"], "GOOD");
}

#[test]
fn the_gate_can_demand_more() {
    let p = Scratch::example();
    let mut bank = p.json("test_banks/always/always_load_tests.json");
    bank["tests"][0]["expected_always"] = serde_json::json!(["frank_clinician_persona"]);
    p.write_json("test_banks/always/always_load_tests.json", &bank);
    p.write("assay.toml", "[gate]\nmin_health = \"EXCELLENT\"\n");
    let run = p.assay(&["run", "--banks", "always", "--no-save"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("ALWAYS-001"), "{run:?}");
}

#[test]
fn a_single_case_runs_alone() {
    let p = Scratch::example();
    let run = p.assay(&["run", "--test", "PAT-KW-001", "--json", "--no-save"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    assert_eq!(log["summary"]["total_tests"], 1);
    assert_eq!(log["filters"]["banks"], serde_json::json!(["pattern"]));
    assert_eq!(log["state"], Value::Null);
}

#[test]
fn junit_counts_every_case() {
    let p = Scratch::example();
    let junit = p.path("ci/junit.xml");
    let run = p.assay(&[
        "run",
        "--banks",
        "state,pattern,always",
        "--no-save",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let xml = std::fs::read_to_string(junit).unwrap();
    assert!(xml.starts_with("<?xml"));
    assert!(
        xml.contains("<testsuites name=\"assay\" tests=\"53\" failures=\"0\" errors=\"0\""),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 53);
}

#[test]
fn the_semantic_bank_records_every_stage() {
    let p = Scratch::example();
    let run = p.assay(&["run", "--banks", "semantic", "--json", "--no-save"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    let sem = &log["semantic"];
    assert_eq!(sem["tests_run"], 94);
    assert_eq!(sem["errors"], 0);
    assert!(
        log["setup"]["semantic"]
            .as_str()
            .unwrap()
            .starts_with("builtin/hashed-ngrams top 15"),
        "{}",
        log["setup"]
    );
    for case in sem["results"].as_array().unwrap() {
        assert_eq!(case["candidates"].as_array().unwrap().len(), 15, "{case}");
        assert_eq!(case["selections"].as_array().unwrap().len(), 6, "{case}");
        for key in [
            "test_id",
            "score",
            "breakdown",
            "is_hard_fail",
            "expectation_source",
            "lost",
            "topics",
        ] {
            assert!(case.get(key).is_some(), "semantic case lacks {key}");
        }
        // Every expected entity that was not selected says which stage lost it.
        let lost = case["lost"].as_array().unwrap().len();
        let missing_secondary = case["secondary_missing"].as_array().unwrap().len();
        assert!(lost >= missing_secondary, "{case}");
    }
    let overridden = sem["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["test_id"] == "V2-LOY-002")
        .unwrap();
    assert_eq!(
        overridden["expectation_source"],
        "human_override_2026-10-09"
    );
    assert!(sem["topic_scores"].as_object().unwrap().len() > 5);
}

#[test]
fn a_topic_runs_its_semantic_cases() {
    let p = Scratch::example();
    let run = p.assay(&["run", "--topic", "gray_rock", "--json", "--no-save"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    let results = log["semantic"]["results"].as_array().unwrap();
    assert!(!results.is_empty());
    assert!(results.iter().all(|c| {
        c["topics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "gray_rock")
    }));
    assert_eq!(log["state"], Value::Null);
}

#[test]
fn version_and_help() {
    let run = assay(&["--version"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.starts_with("assay "), "{run:?}");
    let commands: [&[&str]; 11] = [
        &["run", "--help"],
        &["expectations", "--help"],
        &["banks", "migrate", "--help"],
        &["init", "--help"],
        &["validate", "--help"],
        &["retrieve", "--help"],
        &["embed", "--help"],
        &["kb", "--help"],
        &["kb", "history", "--help"],
        &["state", "--help"],
        &["state", "record", "--help"],
    ];
    for cmd in commands {
        let run = assay(cmd);
        assert_eq!(run.code, 0, "{cmd:?}: {run:?}");
        assert!(run.stdout.contains("Usage: assay"), "{cmd:?}: {run:?}");
    }
}

#[test]
fn init_makes_a_project_that_passes() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("new");
    let run = assay(&["init", project.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = assay(&["run", project.to_str().unwrap(), "--no-save"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("EXCELLENT"), "{run:?}");
    // The files it writes name their schema: no warning about that key, whichever way a bank
    // is read (streamed by `run`, whole by `validate`).
    assert!(!run.stderr.contains("unknown field"), "{run:?}");
    let validate = assay(&["validate", project.to_str().unwrap()]);
    assert_eq!(validate.code, 0, "{validate:?}");
    assert!(!validate.stderr.contains("unknown field"), "{validate:?}");
    let again = assay(&["init", project.to_str().unwrap()]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(again.stderr.contains("refusing to overwrite"), "{again:?}");
}

#[test]
fn the_example_with_default_hybrid_ranking_scores_higher_than_003s_pipeline() {
    let hybrid = Scratch::example();
    let dense = Scratch::example_dense();
    let score = |p: &Scratch| {
        let run = p.assay(&["run", "--banks", "semantic", "--json", "--no-save"]);
        assert_eq!(run.code, 0, "{run:?}");
        let log = run.json();
        (
            log["semantic"]["average_score"].as_f64().unwrap(),
            log["semantic"]["hard_fails"].as_u64().unwrap(),
        )
    };
    let (h, h_fails) = score(&hybrid);
    let (d, d_fails) = score(&dense);
    assert_eq!((d, d_fails), (76.2, 16), "003's pipeline is unchanged");
    // Measured when hybrid became the default (docs/guide.md): 83.1 with 8 hard fails.
    assert_eq!((h, h_fails), (83.1, 8));
}

#[test]
fn the_summary_groups_failures_by_rule_and_the_flags_list_cases() {
    // The default is readable at any bank size: counts by verdict, the failed cases grouped
    // by the rule that failed them, counts per reason, and no line per case; `--all` and
    // `--failures-only` list cases one per line, failures first.
    let p = Scratch::example_dense();
    let case_lines = |out: &str| {
        out.lines()
            .filter(|l| l.starts_with("  V2-") || l.starts_with("  PAT-") || l.starts_with("  ST-"))
            .count()
    };
    let default = p.assay(&["run", "--no-save"]);
    assert_eq!(case_lines(&default.stdout), 0, "{}", default.stdout);
    for line in [
        "cases           147: 131 passed, 16 failed, 0 errors (16 hard fails)",
        "failed: 16 of 147 (by the rule that failed them)",
        "  expected missing        16  semantic/",
        "cases below 100: 49 of 147 (why points were lost)",
        "`--failures-only` lists each failed case with its checks",
    ] {
        assert!(
            default.stdout.contains(line),
            "{line:?} in {}",
            default.stdout
        );
    }

    let all = p.assay(&["run", "--no-save", "--all"]);
    assert_eq!(case_lines(&all.stdout), 49, "{}", all.stdout);
    assert!(!all.stdout.contains("more below 100"), "{}", all.stdout);
    // Worst first: every hard fail comes before the first case that kept points.
    let scores: Vec<u32> = all
        .stdout
        .lines()
        .filter(|l| l.starts_with("  V2-"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] <= w[1]), "{scores:?}");

    let failures = p.assay(&["run", "--no-save", "--failures-only"]);
    assert_eq!(case_lines(&failures.stdout), 16, "{}", failures.stdout);
    assert!(
        failures.stdout.contains("\nfailures:\n"),
        "{}",
        failures.stdout
    );
    // Each with the check that failed it.
    assert!(
        failures
            .stdout
            .lines()
            .filter(|l| l.starts_with("  V2-"))
            .all(|l| l.contains(" failed ") && l.contains("expected primary entity missing: ")),
        "{}",
        failures.stdout
    );

    let both = p.assay(&["run", "--no-save", "--all", "--failures-only"]);
    assert_eq!(both.code, 2, "{both:?}");
}
