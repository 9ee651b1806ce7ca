//! A suite split across machines and merged back (`assay run --shard hash:i/n`, `assay runs
//! merge`): the merged run equals the run of the whole suite case for case, adding cases moves
//! no case to another shard, and shards that do not belong together are refused by name.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::scale::{grow_state_bank_to, saved};
use crate::support::{Scratch, assay, timeless};

/// The suite: the example's 94 semantic cases, and its state, pattern and always banks grown
/// to 10,000 cases in all.
const STATE: usize = 6_000;
const PATTERN: usize = 3_000;
const ALWAYS: usize = 906;
const TOTAL: usize = 94 + STATE + PATTERN + ALWAYS;

/// Grows a bank of the example to `count` cases, its own repeated under new ids (`prefix`
/// and a number from `from`).
fn grow(p: &Scratch, rel: &str, prefix: &str, from: usize, count: usize) {
    let mut bank = p.json(rel);
    let cases = bank["tests"].as_array().unwrap().clone();
    let grown: Vec<Value> = (from..from + count)
        .map(|i| {
            let mut c = cases[i % cases.len()].clone();
            c["test_id"] = format!("{prefix}-{i:05}").into();
            c
        })
        .collect();
    bank["tests"] = grown.into();
    p.write_json(rel, &bank);
}

fn project() -> Scratch {
    let p = Scratch::example();
    grow_state_bank_to(&p, STATE);
    grow(&p, "test_banks/pattern/pattern_tests.json", "P", 0, PATTERN);
    grow(
        &p,
        "test_banks/always/always_load_tests.json",
        "A",
        0,
        ALWAYS,
    );
    p
}

/// The newest saved RunLog and its path.
fn newest(p: &Scratch) -> (String, Value) {
    let names = saved(p);
    let name = names.last().expect("a saved run").clone();
    let path = format!("results/{name}");
    let log = p.json(&path);
    (p.path(&path).display().to_string(), log)
}

/// Every case of a saved run, by `bank/test_id`, from its run log or its lists, without its
/// duration.
fn cases(p: &Scratch, log: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    match log["cases"]["file"].as_str() {
        Some(file) => {
            for line in p.read(&format!("results/{file}")).lines().skip(1) {
                let v: Value = serde_json::from_str(line).unwrap();
                let key = format!(
                    "{}/{}",
                    v["bank"].as_str().unwrap(),
                    v["result"]["test_id"].as_str().unwrap()
                );
                assert!(
                    out.insert(key.clone(), timeless(v["result"].clone()))
                        .is_none(),
                    "{key} twice"
                );
            }
        }
        None => {
            for bank in ["semantic", "state", "pattern", "always"] {
                for c in log[bank]["results"].as_array().into_iter().flatten() {
                    let key = format!("{bank}/{}", c["test_id"].as_str().unwrap());
                    out.insert(key, timeless(c.clone()));
                }
            }
        }
    }
    out
}

/// A RunLog without what differs between two runs of the same cases: ids, times, file names,
/// how it was made and how its searches went.
fn comparable(log: &Value) -> Value {
    // Durations measure the run, the run's and each case's.
    let mut v = timeless(log.clone());
    let o = v.as_object_mut().unwrap();
    for key in [
        "run_id",
        "timestamp",
        "merged",
        "shard",
        "cases",
        "rate_limits",
    ] {
        o.remove(key);
    }
    if let Some(setup) = o.get_mut("setup").and_then(Value::as_object_mut) {
        setup.remove("semantic_search_detail");
    }
    v
}

/// The lines of a report without its run id, times and file names.
fn report_lines(text: &str, log: &Value) -> Vec<String> {
    let id = log["run_id"].as_str().unwrap();
    let stamp = log["timestamp"].as_str().unwrap();
    text.lines()
        .filter(|l| !l.contains(id) && !l.contains(stamp) && !l.contains("cases_"))
        .filter(|l| !l.contains("Duration") && !l.contains("duration") && !l.contains(" ms"))
        .map(str::to_owned)
        .collect()
}

fn merge(p: &Scratch, logs: &[String], extra: &[&str]) -> crate::support::Run {
    let root = p.root().display().to_string();
    let mut args = vec!["runs", "merge", "--project", root.as_str()];
    args.extend(logs.iter().map(String::as_str));
    args.extend_from_slice(extra);
    assay(&args)
}

#[test]
fn four_shards_merged_equal_the_whole_suite_case_for_case() {
    let p = project();
    let junit_whole = p.path("junit-whole.xml").display().to_string();
    let whole = p.assay(&["run", "--junit", junit_whole.as_str()]);
    assert!(whole.code == 0 || whole.code == 1, "{whole:?}");
    let (_, whole_log) = newest(&p);
    assert_eq!(whole_log["summary"]["total_tests"], TOTAL);
    assert_eq!(
        whole_log["notable"]["complete"], false,
        "10,000 cases keep a run log"
    );
    let whole_cases = cases(&p, &whole_log);
    assert_eq!(whole_cases.len(), TOTAL);

    // Four shards, each its own run with its own run log.
    let mut logs = Vec::new();
    let mut members: BTreeMap<String, u32> = BTreeMap::new();
    let mut shard_totals = 0;
    for i in 1..=4u32 {
        let spec = format!("hash:{i}/4");
        let run = p.assay(&["run", "--shard", spec.as_str()]);
        assert!(run.code == 0 || run.code == 1, "{spec}: {run:?}");
        let (path, log) = newest(&p);
        assert_eq!(log["shard"]["shard"]["index"], i);
        assert_eq!(log["shard"]["suite_cases"], TOTAL);
        let n = log["summary"]["total_tests"].as_u64().unwrap() as usize;
        // An even split: a quarter each, give or take.
        assert!((2_200..2_800).contains(&n), "{spec}: {n} cases");
        shard_totals += n;
        for key in cases(&p, &log).into_keys() {
            assert!(
                members.insert(key.clone(), i).is_none(),
                "{key} in two shards"
            );
        }
        logs.push(path);
    }
    assert_eq!(shard_totals, TOTAL);
    // A shard is part of a run: never `latest`, never accepted.
    let root = p.root().display().to_string();
    let accept = assay(&["runs", "accept", "latest", "--project", root.as_str()]);
    assert_eq!(accept.code, 0, "{accept:?}");
    assert_eq!(
        p.json("baseline/accepted.json")["run_id"],
        whole_log["run_id"],
        "`latest` is the newest whole run, not a shard"
    );

    // Merged, in another order than the shards' own.
    let junit_merged = p.path("junit-merged.xml").display().to_string();
    let mut shuffled = logs.clone();
    shuffled.reverse();
    let merged = merge(&p, &shuffled, &["--junit", junit_merged.as_str()]);
    assert_eq!(merged.code, whole.code, "{merged:?}");
    let (_, merged_log) = newest(&p);
    assert_eq!(merged_log["merged"]["count"], 4);
    assert_eq!(merged_log["merged"]["shards"].as_array().unwrap().len(), 4);
    assert_eq!(
        comparable(&merged_log),
        comparable(&whole_log),
        "the merged RunLog differs from the whole run's"
    );
    let merged_cases = cases(&p, &merged_log);
    assert_eq!(merged_cases, whole_cases, "a case differs");
    // The reports and JUnit say the same, line for line (the run's id and times aside).
    for (kind, a, b) in [("report.md", "md", "md"), ("report.html", "html", "html")] {
        let stamp = |log: &Value| {
            saved(&p)
                .into_iter()
                .find(|n| p.json(&format!("results/{n}"))["run_id"] == log["run_id"])
                .unwrap()
                .trim_start_matches("results_")
                .trim_end_matches(".json")
                .to_owned()
        };
        let whole_report = p.read(&format!("results/report_{}.{a}", stamp(&whole_log)));
        let merged_report = p.read(&format!("results/report_{}.{b}", stamp(&merged_log)));
        assert_eq!(
            report_lines(&merged_report, &merged_log),
            report_lines(&whole_report, &whole_log),
            "{kind} differs"
        );
    }
    let junit = |path: &str| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| {
                // Times and the run's name aside (a case's time is its own measurement).
                let re = regex::Regex::new(r#"(time|timestamp|id|name)="[^"]*""#).unwrap();
                let time = regex::Regex::new(r#" time="[^"]*""#).unwrap();
                if l.contains("<testsuites") || l.contains("<testsuite ") {
                    re.replace_all(l, "").into_owned()
                } else {
                    time.replace_all(l, "").into_owned()
                }
            })
            .collect()
    };
    assert_eq!(junit(&junit_merged), junit(&junit_whole), "JUnit differs");

    // The baseline gate over the merged whole: against the accepted whole run, nothing
    // regressed.
    let gated = merge(
        &p,
        &logs,
        &["--baseline", "accepted", "--no-save", "--json"],
    );
    assert_eq!(gated.code, whole.code, "{gated:?}");
    let gate = &gated.json()["baseline"]["gate"];
    assert_eq!(gate["passed"], true, "{gate}");

    // 100 more cases: no case changes shard.
    grow(
        &p,
        "test_banks/always/always_load_tests.json",
        "A",
        0,
        ALWAYS + 100,
    );
    let mut moved = Vec::new();
    let mut added = 0;
    for i in 1..=4u32 {
        let spec = format!("hash:{i}/4");
        let run = p.assay(&["run", "--shard", spec.as_str(), "--no-save", "--json"]);
        assert!(run.code == 0 || run.code == 1, "{spec}: {run:?}");
        let log = run.json();
        for bank in ["semantic", "state", "pattern", "always"] {
            for c in log[bank]["results"].as_array().into_iter().flatten() {
                let key = format!("{bank}/{}", c["test_id"].as_str().unwrap());
                match members.get(&key) {
                    Some(&was) if was != i => moved.push(key),
                    Some(_) => {}
                    None => added += 1,
                }
            }
        }
    }
    assert_eq!(added, 100);
    assert!(moved.is_empty(), "cases moved shard: {moved:?}");
}

#[test]
fn shards_that_do_not_belong_together_are_refused_by_name() {
    let p = Scratch::example();
    let shard = |p: &Scratch, spec: &str| {
        let run = p.assay(&["run", "--shard", spec]);
        assert!(run.code == 0 || run.code == 1, "{spec}: {run:?}");
        newest(p).0
    };
    let one = shard(&p, "hash:1/3");
    let two = shard(&p, "hash:2/3");
    let three = shard(&p, "hash:3/3");
    let before = p.results();

    let refused = |logs: &[String], expect: &[&str]| {
        let run = merge(&p, logs, &[]);
        assert_eq!(run.code, 2, "{run:?}");
        for e in expect {
            assert!(run.stderr.contains(e), "missing `{e}`: {run:?}");
        }
        assert_eq!(p.results(), before, "a refused merge wrote something");
    };
    refused(&[one.clone(), two.clone()], &["shard 3 of 3 missing"]);
    refused(
        &[one.clone(), two.clone(), two.clone(), three.clone()],
        &["shard 2 of 3 is given twice"],
    );

    // A shard run under other settings.
    p.edit("assay.toml", "semantic = 0.60", "semantic = 0.50");
    p.edit("assay.toml", "state = 0.15", "state = 0.25");
    let other = shard(&p, "hash:3/3");
    let before = p.results();
    let run = merge(&p, &[one.clone(), two.clone(), other.clone()], &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("weights.semantic"), "{run:?}");
    assert!(
        run.stderr.contains("0.6") && run.stderr.contains("0.5"),
        "{run:?}"
    );
    assert_eq!(p.results(), before);
    p.edit("assay.toml", "semantic = 0.50", "semantic = 0.60");
    p.edit("assay.toml", "state = 0.25", "state = 0.15");

    // Another shard count.
    let of_two = shard(&p, "hash:2/2");
    let run = merge(&p, &[one.clone(), of_two], &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("shard count"), "{run:?}");

    // Another knowledge base.
    let kb = std::fs::read_dir(p.path("kb"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|f| f.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .unwrap();
    let text = std::fs::read_to_string(&kb).unwrap();
    let changed = text.replacen("  title: ", "  title: Revised ", 1);
    assert_ne!(text, changed);
    std::fs::write(&kb, changed).unwrap();
    let other_kb = shard(&p, "hash:3/3");
    let run = merge(&p, &[one.clone(), two.clone(), other_kb], &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("knowledge base"), "{run:?}");
    std::fs::write(&kb, text).unwrap();

    // A whole run is not a shard.
    let whole = p.assay(&["run"]);
    assert!(whole.code == 0 || whole.code == 1, "{whole:?}");
    let run = merge(&p, &[one.clone(), two.clone(), newest(&p).0], &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("not a shard's run"), "{run:?}");

    // And the right three merge.
    let run = merge(&p, &[three, one, two], &["--no-save"]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");

    // Flags that make no sense with a shard.
    let run = p.assay(&["run", "--shard", "hash:5/4"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("from 1 to 4"), "{run:?}");
    let run = p.assay(&["run", "--shard", "hash:1/2", "--baseline", "latest"]);
    assert_eq!(run.code, 2, "{run:?}");
}

/// Issue 42: a shard's results carry a digest of its cases whether they are listed in its
/// RunLog or streamed: a score edited in a shard whose RunLog lists its cases, and a case moved
/// from one shard's results to another's, are refused by `runs merge` (exit 2) naming the file,
/// and the moved case by its id; nothing is written.
#[test]
fn edited_scores_and_moved_cases_are_refused_by_name() {
    let p = Scratch::example();
    let mut logs = Vec::new();
    for i in 1..=3 {
        let spec = format!("hash:{i}/3");
        let run = p.assay(&["run", "--shard", spec.as_str()]);
        assert!(run.code == 0 || run.code == 1, "{spec}: {run:?}");
        logs.push(newest(&p).0);
    }
    let read = |path: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let write = |path: &str, log: &Value| {
        std::fs::write(path, serde_json::to_string_pretty(log).unwrap()).unwrap();
    };
    let originals: Vec<String> = logs
        .iter()
        .map(|l| std::fs::read_to_string(l).unwrap())
        .collect();
    let restore = || {
        for (path, text) in logs.iter().zip(&originals) {
            std::fs::write(path, text).unwrap();
        }
    };
    for l in &logs {
        let log = read(l);
        assert!(
            log.get("cases").is_none(),
            "the example's shards list their cases"
        );
        let digest = log["shard"]["cases_sha256"].as_str().unwrap_or_default();
        assert_eq!(digest.len(), 64, "{}", log["shard"]);
    }
    let before = p.results();
    let refused = |expect: &[&str]| {
        let run = merge(&p, &logs, &[]);
        assert_eq!(run.code, 2, "{run:?}");
        for e in expect {
            assert!(run.stderr.contains(e), "missing `{e}`: {}", run.stderr);
        }
        assert_eq!(p.results(), before, "a refused merge wrote something");
    };

    // A score edited by hand, everything else left as it was.
    let mut log = read(&logs[0]);
    let case = &mut log["state"]["results"][0];
    let score = case["score"].as_u64().unwrap();
    case["score"] = (if score == 100 { 40 } else { 100 }).into();
    write(&logs[0], &log);
    refused(&[
        &format!("{}: its cases changed since the shard was saved", logs[0]),
        "the shard recorded",
    ]);
    restore();

    // A case moved from shard 1's results to shard 2's: both files still read, the case is in
    // exactly one shard, and the moved one is named by where it belongs.
    let mut one = read(&logs[0]);
    let mut two = read(&logs[1]);
    let moved = one["state"]["results"].as_array_mut().unwrap().remove(0);
    let id = moved["test_id"].as_str().unwrap().to_owned();
    two["state"]["results"].as_array_mut().unwrap().push(moved);
    write(&logs[0], &one);
    write(&logs[1], &two);
    refused(&[&format!(
        "{}: holds case state/{id}, which belongs to shard 1 of 3 (by the hash of its id), not to this shard 2",
        logs[1]
    )]);
    restore();

    // A shard saved before the digest was recorded cannot be checked.
    let mut old = read(&logs[2]);
    old["shard"].as_object_mut().unwrap().remove("cases_sha256");
    write(&logs[2], &old);
    refused(&[&format!(
        "{}: records no digest of its cases (`shard.cases_sha256`)",
        logs[2]
    )]);
    restore();

    // As saved, they merge.
    let run = merge(&p, &logs, &["--no-save"]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
}
