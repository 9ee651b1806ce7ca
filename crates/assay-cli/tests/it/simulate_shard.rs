//! Issue 30: `assay simulate --shard hash:i/n` on several machines, then `assay runs merge`:
//! the merged report is the unsharded one, scenario for scenario; a scenario's shard is its
//! own; shards that are not one simulation's are refused, naming the difference.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::sim_provider::Behaviour;
use crate::simulate::{env_with, project, provider};
use crate::support::{Run, Scratch, assay_env};

const MODELS: [&str; 6] = [
    "--model",
    "openai/coach-under-test",
    "--simulator-model",
    "openai/scout-sim",
    "--evaluator-model",
    "openai/judge",
];

fn assay(args: &[&str]) -> Run {
    let env = env_with(&[]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assay_env(args, &env)
}

/// `assay simulate DIR MODELS ARGS --cache off` (no call cache, so that usage is comparable);
/// a model flag in `args` replaces the default one.
fn simulate(scratch: &Scratch, args: &[&str]) -> Run {
    let root = scratch.root().to_str().unwrap();
    let models: Vec<&str> = MODELS
        .chunks(2)
        .filter(|pair| !args.contains(&pair[0]))
        .flatten()
        .copied()
        .collect();
    assay(&[&["simulate", root], &models[..], args, &["--cache", "off"]].concat())
}

/// Shard `index` of `count`, its report saved as `shards/<name>.md` (and `.json`).
fn shard(scratch: &Scratch, args: &[&str], spec: &str, name: &str) -> (Run, String) {
    let output = scratch.path(&format!("shards/{name}.md"));
    let out = simulate(
        scratch,
        &[
            args,
            &["--shard", spec, "--output", output.to_str().unwrap()],
        ]
        .concat(),
    );
    (
        out,
        scratch
            .path(&format!("shards/{name}.json"))
            .display()
            .to_string(),
    )
}

fn merge(scratch: &Scratch, files: &[&str], json: bool) -> Run {
    let root = scratch.root().to_str().unwrap();
    let mut args = vec!["runs", "--project", root, "merge"];
    args.extend_from_slice(files);
    if json {
        args.push("--json");
    }
    assay(&args)
}

/// The report without what differs from run to run or machine to machine: times, durations,
/// and where a merged report came from.
fn comparable(report: &Value) -> Value {
    let mut r = report.clone();
    for key in ["generated_at", "duration_ms", "rate_limits", "merged"] {
        r.as_object_mut().unwrap().remove(key);
    }
    for run in r["runs"].as_array_mut().unwrap() {
        run.as_object_mut().unwrap().remove("duration_ms");
        let Some(t) = run["transcript"].as_object_mut() else {
            continue;
        };
        t.remove("started_at");
        t.remove("ended_at");
        // Latency differs run to run, and a replay answers from the cache (no latency, a
        // cache hit); tokens and cost are the same.
        if let Some(u) = t.get_mut("stop_usage").and_then(Value::as_object_mut) {
            u.remove("latency_ms");
            u.remove("cache_hits");
        }
        for turn in t["turns"].as_array_mut().unwrap() {
            turn.as_object_mut().unwrap().remove("timestamp");
            if let Some(u) = turn.get_mut("usage").and_then(Value::as_object_mut) {
                u.remove("latency_ms");
                u.remove("cache_hits");
            }
            for call in turn["tool_calls"].as_array_mut().into_iter().flatten() {
                call.as_object_mut().unwrap().remove("duration_ms");
            }
        }
    }
    r
}

fn scenario_ids(report: &Value) -> BTreeSet<String> {
    report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["scenario_id"].as_str().unwrap().to_owned())
        .collect()
}

fn read_json(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every scenario twice, a judge asked three times that flips on one scenario, an assistant
/// that claims chores without logging them (failed checks), compared with a baseline: three
/// shards merged give the unsharded report, verdicts, scores, statistics, gate, baseline
/// comparison and usage alike, and the same exit code.
#[test]
fn three_shards_merge_into_the_unsharded_report() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let base = scratch.path("base.json").display().to_string();
    let args = ["--repeat", "2", "--judge-samples", "3"];
    let first = simulate(&scratch, &args);
    assert_eq!(first.code, 0, "{first:?}");
    std::fs::copy(scratch.path("sim/reports/latest.json"), &base).unwrap();

    scratch.edit(
        "sim/scenarios/off_topic.yaml",
        "description: ",
        "description: FICKLE ",
    );
    let prompt = scratch.read("sim/prompts/coach_system_prompt.md");
    scratch.write(
        "sim/prompts/coach_system_prompt.md",
        &format!("{prompt}\nCLAIM_WITHOUT_TOOLS\n"),
    );
    let args = [&args[..], &["--baseline", &base, "--allow-judge-change"]].concat();
    let whole = simulate(&scratch, &[&args[..], &["--json"]].concat());
    assert_eq!(whole.code, 1, "the baseline gate fails: {whole:?}");
    let whole = whole.json();
    assert!(whole.get("shard").is_none() && whole.get("merged").is_none());
    assert_eq!(whole["baseline"]["passed"], false);
    assert!(whole["summary"]["uncertain"].as_u64() > Some(0));

    let mut files = Vec::new();
    let mut seen = BTreeSet::new();
    for i in 1..=3 {
        let (out, file) = shard(&scratch, &args, &format!("hash:{i}/3"), &format!("s{i}"));
        // A shard's gate and baseline verdict belong to the merge: it fails only on errors.
        assert_eq!(out.code, 0, "{out:?}");
        assert!(
            out.stdout.contains(&format!("shard hash:{i}/3: ")),
            "{}",
            out.stdout
        );
        let report = read_json(&file);
        assert_eq!(
            report["shard"]["shard"],
            serde_json::json!({"index": i, "count": 3})
        );
        assert_eq!(report["shard"]["scenarios"].as_array().unwrap().len(), 9);
        assert!(report.get("gate").is_none() && report.get("baseline").is_none());
        let ids = scenario_ids(&report);
        assert!(seen.is_disjoint(&ids), "a scenario in two shards");
        seen.extend(ids);
        files.push(file);
    }
    assert_eq!(seen, scenario_ids(&whole), "every scenario in one shard");

    let reports_before = std::fs::read_dir(scratch.path("sim/reports"))
        .unwrap()
        .count();
    // Given in any order.
    let merged = merge(&scratch, &[&files[2], &files[0], &files[1]], true);
    assert_eq!(merged.code, 1, "the unsharded run's exit code: {merged:?}");
    let merged = merged.json();
    assert_eq!(comparable(&merged), comparable(&whole));
    assert_eq!(merged["merged"]["count"], 3);
    // Saved as `assay simulate` saves: Markdown, JSON, HTML and transcripts, latest replaced.
    assert_eq!(scratch.json("sim/reports/latest.json"), merged);
    let reports_after = std::fs::read_dir(scratch.path("sim/reports"))
        .unwrap()
        .count();
    assert_eq!(
        reports_after,
        reports_before + 3,
        "report_<stamp>.md, .json and .html"
    );

    // The summary, as `assay simulate` prints it.
    let out = merge(&scratch, &[&files[0], &files[1], &files[2]], false);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout
            .contains("18 scenario run(s) (9 scenario(s) × 2)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("merged from 3 shard(s)"),
        "{}",
        out.stdout
    );
}

/// A scenario's shard depends on its id alone: adding a scenario moves no other.
#[test]
fn adding_a_scenario_moves_no_other() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let ids = |scratch: &Scratch, tag: &str| -> Vec<BTreeSet<String>> {
        (1..=3)
            .map(|i| {
                let (out, file) = shard(scratch, &[], &format!("hash:{i}/3"), &format!("{tag}{i}"));
                assert_eq!(out.code, 0, "{out:?}");
                scenario_ids(&read_json(&file))
            })
            .collect()
    };
    let before = ids(&scratch, "before");
    let scenario = scratch.read("sim/scenarios/off_topic.yaml");
    scratch.write(
        "sim/scenarios/zz_added.yaml",
        &scenario.replacen("id: off_topic", "id: zz_added", 1),
    );
    let after = ids(&scratch, "after");
    for (b, a) in before.iter().zip(&after) {
        let mut a = a.clone();
        a.remove("zz_added");
        assert_eq!(*b, a);
    }
    assert!(after.iter().any(|a| a.contains("zz_added")));
}

/// Shards of different settings, a missing shard, a shard twice and an unsharded report are
/// bad input (exit 2), the difference and the files named, and nothing is written.
#[test]
fn shards_that_are_not_one_simulation_are_refused() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let some = [
        "--scenarios",
        "daily_chore,goal_change,off_topic,onboarding",
    ];
    let ran = |args: &[&str], spec: &str, name: &str| {
        let (out, file) = shard(&scratch, args, spec, name);
        assert_eq!(out.code, 0, "{out:?}");
        (out.stdout, file)
    };
    let (_, one) = ran(&some, "hash:1/2", "one");
    let (_, two) = ran(&some, "hash:2/2", "two");
    let other_model = [&some[..], &["--model", "openai/another-coach"]].concat();
    let (_, other) = ran(&other_model, "hash:2/2", "other");
    let (_, four) = ran(&some, "hash:1/4", "four");
    // A shard that selects no scenario (none of these four hashes to 1 of 8) saves an empty
    // report, which the merge counts as that shard's.
    let (said, empty) = ran(&some, "hash:1/8", "empty");
    assert!(
        said.contains("shard hash:1/8: 0 of the 4 selected scenario(s)"),
        "{said}"
    );
    assert_eq!(read_json(&empty)["runs"], serde_json::json!([]));
    let whole = simulate(&scratch, &some);
    assert_eq!(whole.code, 0, "{whole:?}");
    let unsharded = scratch
        .path("sim/reports/latest.json")
        .display()
        .to_string();

    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(scratch.path("sim/reports"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing();
    let refused = |files: &[&str], expect: &[&str]| {
        let out = merge(&scratch, files, false);
        assert_eq!(out.code, 2, "{out:?}");
        for e in expect {
            assert!(out.stderr.contains(e), "{e:?} not in {}", out.stderr);
        }
        assert!(out.stdout.is_empty(), "{out:?}");
    };
    refused(
        &[&one, &other],
        &[
            &format!("{one} and {other} are not shards of one simulation"),
            "the model under test (`model`) is `openai/coach-under-test`",
            "and `openai/another-coach` in",
        ],
    );
    refused(&[&one, &four], &["the shard count is 2 in", "and 4 in"]);
    refused(
        &[&one],
        &["shard hash:2/2 missing: a merge must cover the whole suite"],
    );
    refused(&[&one, &two, &two], &["are both shard hash:2/2"]);
    refused(
        &[&unsharded, &one],
        &["not a shard's report (it has no `shard`"],
    );
    assert_eq!(listing(), before, "nothing written");

    // Issue 42: a shard's runs are checked against the digest it saved. A verdict edited by
    // hand is refused, naming the file; so is a run moved to another shard, naming it.
    let mut report = read_json(&one);
    assert_eq!(
        report["shard"]["runs_sha256"].as_str().map(str::len),
        Some(64),
        "{}",
        report["shard"]
    );
    let runs = report["runs"].as_array().unwrap().clone();
    assert!(!runs.is_empty());
    let flipped = if runs[0]["verdict"] == "pass" {
        "fail"
    } else {
        "pass"
    };
    report["runs"][0]["verdict"] = flipped.into();
    let edited = scratch.path("shards/one-edited.json").display().to_string();
    std::fs::write(&edited, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    refused(
        &[&edited, &two],
        &[&format!("{edited}: its runs changed since it was saved")],
    );
    let mut to = read_json(&two);
    to["runs"].as_array_mut().unwrap().push(runs[0].clone());
    let mut from = read_json(&one);
    from["runs"].as_array_mut().unwrap().remove(0);
    let (moved_from, moved_to) = (
        scratch.path("shards/one-moved.json").display().to_string(),
        scratch.path("shards/two-moved.json").display().to_string(),
    );
    std::fs::write(&moved_from, serde_json::to_string_pretty(&from).unwrap()).unwrap();
    std::fs::write(&moved_to, serde_json::to_string_pretty(&to).unwrap()).unwrap();
    let id = runs[0]["scenario_id"].as_str().unwrap();
    refused(
        &[&moved_from, &moved_to],
        &[&format!(
            "{moved_to}: it holds scenario `{id}`, which belongs to shard hash:1/2, not hash:2/2"
        )],
    );
    // A report saved before the digest was recorded cannot be checked.
    let mut old = read_json(&one);
    old["shard"].as_object_mut().unwrap().remove("runs_sha256");
    let unchecked = scratch.path("shards/one-old.json").display().to_string();
    std::fs::write(&unchecked, serde_json::to_string_pretty(&old).unwrap()).unwrap();
    refused(
        &[&unchecked, &two],
        &["it records no digest of its runs (`shard.runs_sha256`)"],
    );
    assert_eq!(listing(), before, "nothing written");

    // The right shards merge.
    let out = merge(&scratch, &[&two, &one], false);
    assert_eq!(out.code, 0, "{out:?}");
}
