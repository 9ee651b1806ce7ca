//! `assay optimize` sharing one study in PostgreSQL (`--storage`, `--worker`): workers in
//! separate processes, one joining late, against the prompt-sensitive provider of
//! optimize.rs (whose best combination is known); a worker killed mid-trial; inputs that do
//! not match the study's.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::kb_store::postgres::database;
use crate::optimize::{Provider, args, project, provider};
use crate::support::{Run, Scratch, finished};

/// The optimizer's arguments for the experiment `name` shared in `url`, with the call cache
/// off (every evaluation reaches the provider, so its counts say what ran).
fn shared(name: &str, trials: &str, url: &str, worker: bool) -> Vec<String> {
    let mut a: Vec<String> = args(name, trials).into_iter().map(str::to_owned).collect();
    a.extend([
        "--cache".into(),
        "off".into(),
        "--storage".into(),
        url.to_owned(),
    ]);
    if worker {
        a.push("--worker".into());
    }
    a
}

fn start(s: &Scratch, a: &[String], worker: &str) -> std::process::Child {
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    s.spawn_env_output(
        &a,
        &[
            ("OPENAI_API_KEY", "test-key"),
            ("ASSAY_WORKER_NAME", worker),
        ],
    )
}

/// A query on the study's tables.
fn query(url: &str, sql: &str) -> Vec<tokio_postgres::Row> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        // The tables appear with the first worker.
        client.query(sql, &[]).await.unwrap_or_default()
    })
}

/// Polls until `sql` returns a row (at most `limit`).
fn wait_for(url: &str, sql: &str, limit: Duration) -> tokio_postgres::Row {
    let until = Instant::now() + limit;
    loop {
        if let Some(row) = query(url, sql).into_iter().next() {
            return row;
        }
        assert!(Instant::now() < until, "nothing for {sql} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn calls(p: &Provider) -> (u64, u64) {
    (
        p.stats.agent.load(Ordering::SeqCst),
        p.stats.grader.load(Ordering::SeqCst),
    )
}

/// The trial numbers each worker ran, from the report.
fn per_worker(report: &Value) -> BTreeMap<String, Vec<u64>> {
    let mut by = BTreeMap::<String, Vec<u64>>::new();
    for t in report["trials"].as_array().unwrap() {
        let worker = t["worker"].as_str().expect("every trial names its worker");
        by.entry(worker.to_owned())
            .or_default()
            .push(t["number"].as_u64().unwrap());
    }
    by
}

#[test]
fn three_workers_one_late_share_one_study_and_find_what_one_process_finds() {
    let p = provider(Duration::from_millis(10));
    let s = project(&p, "heartbeat_seconds = 0.5\n");

    // One process, the local journal: the reference.
    let solo_args: Vec<&str> = args("solo", "27")
        .into_iter()
        .chain(["--cache", "off"])
        .collect();
    let solo = s.assay_env(&solo_args, &[("OPENAI_API_KEY", "test-key")]);
    assert_eq!(solo.code, 0, "{solo:?}");
    let solo = solo.json();
    let solo_calls = calls(&p);

    let url = database();
    let first = start(&s, &shared("team", "27", &url, false), "w1");
    let second = start(&s, &shared("team", "27", &url, true), "w2");
    // The third joins once trials are under way.
    wait_for(
        &url,
        "SELECT number FROM assay_trials WHERE study = 'team' AND state = 'done' AND number > 2",
        Duration::from_secs(60),
    );
    let third = start(&s, &shared("team", "27", &url, true), "w3");
    let runs: Vec<Run> = [first, second, third].into_iter().map(finished).collect();
    for run in &runs {
        assert_eq!(run.code, 0, "{run:?}");
    }
    let (reports, joined): (Vec<Value>, Vec<Value>) = runs
        .iter()
        .map(Run::json)
        .partition(|v| v.get("schema_version").is_some());
    assert_eq!(reports.len(), 1, "one worker finishes: {runs:?}");
    let report = &reports[0];

    // Every trial once, as many as asked for.
    let numbers: Vec<u64> = report["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..27).collect::<Vec<u64>>());
    let rows = query(
        &url,
        "SELECT count(*) FROM assay_trials WHERE study = 'team'",
    );
    assert_eq!(rows[0].get::<_, i64>(0), 27);
    // The same optimum as one process, found the same way (the whole space, exhaustively).
    assert_eq!(report["best_params"], solo["best_params"]);
    assert_eq!(
        report["best_params"],
        serde_json::json!({"expert": 2, "finalizer": 2, "planner": 2})
    );
    assert_eq!(
        report["evaluation"]["metrics"],
        solo["evaluation"]["metrics"]
    );
    // The baseline, every trial and the evaluation ran once in all: the provider saw exactly
    // the calls of the single process.
    let all = calls(&p);
    assert_eq!(
        (all.0 - solo_calls.0, all.1 - solo_calls.1),
        solo_calls,
        "agent and grader calls of the shared study = the single process's"
    );

    // The report lists the trials per worker, and each joined worker's own list agrees.
    let by = per_worker(report);
    assert!(by.len() >= 2, "trials ran on several workers: {by:?}");
    assert_eq!(by.values().map(Vec::len).sum::<usize>(), 27);
    for j in &joined {
        let worker = j["worker"].as_str().unwrap();
        let mut theirs: Vec<u64> = j["trials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect();
        theirs.sort_unstable();
        assert_eq!(
            by.get(worker).cloned().unwrap_or_default(),
            theirs,
            "{worker}"
        );
    }
    let md = s.read("experiments/team/report.md");
    assert!(md.contains("### Workers"), "{md}");
    for w in by.keys() {
        assert!(md.contains(&format!("| {w} |")), "{w}: {md}");
    }
    let steps = query(
        &url,
        "SELECT step FROM assay_steps WHERE study = 'team' AND state = 'done' ORDER BY step",
    );
    let steps: BTreeSet<String> = steps.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        steps,
        BTreeSet::from(["baseline".to_owned(), "finish".to_owned()])
    );

    // A worker whose inputs differ from the study's is refused, naming what differs; a plain
    // run may not reuse the name of a finished study; --worker needs a storage.
    let mut other = shared("team", "27", &url, true);
    other.extend(["--seed".into(), "7".into()]);
    let refused = finished(start(&s, &other, "w4"));
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("seed"), "{}", refused.stderr);
    let again = finished(start(&s, &shared("team", "27", &url, false), "w5"));
    assert_eq!(again.code, 2, "{again:?}");
    assert!(again.stderr.contains("is finished"), "{}", again.stderr);
    let mut lone: Vec<&str> = args("lone", "3");
    lone.push("--worker");
    let lone = s.assay_env(&lone, &[("OPENAI_API_KEY", "test-key")]);
    assert_eq!(lone.code, 2, "{lone:?}");
    assert!(lone.stderr.contains("--storage"), "{}", lone.stderr);
}

#[test]
fn a_worker_killed_mid_trial_has_its_trial_retried_and_the_study_completes() {
    // A trial takes four cases of four calls at 60 ms: about a second.
    let p = provider(Duration::from_millis(60));
    let s = project(&p, "heartbeat_seconds = 0.3\n");
    let url = database();
    let a = start(&s, &shared("killed", "8", &url, false), "w1");
    let mut b = start(&s, &shared("killed", "8", &url, true), "w2");
    let row = wait_for(
        &url,
        "SELECT number FROM assay_trials WHERE study = 'killed' AND worker = 'w2' AND state = 'running'",
        Duration::from_secs(60),
    );
    let number = row.get::<_, i32>(0) as u64;
    b.kill().unwrap();
    let _ = b.wait();
    let run = finished(a);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    let trials = report["trials"].as_array().unwrap();
    let numbers: Vec<u64> = trials
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..8).collect::<Vec<u64>>());
    let retried = &trials[number as usize];
    assert_eq!(retried["worker"], "w1", "{retried}");
    assert_eq!(retried["outcome"], "complete", "{retried}");
    let note = retried["retried"][0].as_str().unwrap();
    assert!(
        note.contains("w2") && note.contains("stopped heart-beating"),
        "{note}"
    );
    let md = s.read("experiments/killed/report.md");
    assert!(
        md.contains(&format!("trial {number}: attempt 1 by w2")),
        "{md}"
    );
}

/// USD a finished experiment's report says it spent (target and grader).
fn cost(report: &Value) -> f64 {
    ["target", "grader"]
        .iter()
        .map(|role| report["usage"][role]["cost_usd"].as_f64().unwrap_or(0.0))
        .sum()
}

#[test]
fn the_budget_is_the_study_s_not_each_worker_s() {
    let p = provider(Duration::from_millis(5));
    let s = project(&p, "heartbeat_seconds = 0.5\n");
    s.edit(
        "assay.toml",
        "max_retries = 1\n",
        "max_retries = 1\n\n[providers.prices]\n\"openai/fake-agent\" = { input = 0.25, output = 2.0 }\n\"openai/fake-grader\" = 3\n",
    );
    // What the whole experiment costs with no budget, in one process.
    let whole: Vec<String> = shared("whole", "27", &database(), false);
    let whole_args: Vec<&str> = whole.iter().map(String::as_str).collect();
    let whole_run = s.assay_env(&whole_args, &[("OPENAI_API_KEY", "test-key")]);
    assert_eq!(whole_run.code, 0, "{whole_run:?}");
    let budget = cost(&whole_run.json()) * 0.3;
    assert!(budget > 0.0, "the prices give a cost: {whole_run:?}");

    // One worker alone with a budget of about a third of that stops over budget.
    let (agent0, _) = calls(&p);
    let mut alone = shared("alone", "27", &database(), false);
    alone.extend(["--budget".into(), format!("{budget}")]);
    let alone = finished(start(&s, &alone, "solo"));
    assert_eq!(alone.code, 3, "{alone:?}");
    assert!(alone.stderr.contains("--budget"), "{}", alone.stderr);
    let (agent1, _) = calls(&p);
    let alone_calls = agent1 - agent0;
    assert!(
        alone_calls > 3 * 12,
        "the budget covers a few trials: {alone_calls} calls"
    );

    // Two workers with the same budget share it: together they make about as many calls as
    // one (each may finish the trial it checked the budget for), not twice as many.
    let url = database();
    let mut team = shared("team", "27", &url, false);
    team.extend(["--budget".into(), format!("{budget}")]);
    let mut joiner = team.clone();
    joiner.push("--worker".into());
    let runs: Vec<Run> = [start(&s, &team, "w1"), start(&s, &joiner, "w2")]
        .into_iter()
        .map(finished)
        .collect();
    for run in &runs {
        assert_eq!(run.code, 3, "{run:?}");
        assert!(run.stderr.contains("--budget"), "{}", run.stderr);
    }
    let (agent2, _) = calls(&p);
    let team_calls = agent2 - agent1;
    eprintln!(
        "budget ${budget:.6}: one worker {alone_calls} agent calls, two workers {team_calls}"
    );
    // One trial is 4 cases of 3 agent calls: a worker that read the other's spend before the
    // other's last trial ended may run one trial more.
    assert!(
        team_calls <= alone_calls + 2 * 12,
        "two workers made {team_calls} agent calls under the budget one worker stopped at after {alone_calls}"
    );
    let spent: f64 = query(
        &url,
        "SELECT SUM(spent)::float8 FROM assay_spend WHERE study = 'team'",
    )[0]
    .get(0);
    let workers = query(
        &url,
        "SELECT COUNT(DISTINCT worker)::int8 FROM assay_spend WHERE study = 'team'",
    )[0]
    .get::<_, i64>(0);
    assert_eq!(workers, 2);
    assert!(spent > 0.0 && spent <= budget * 1.5, "{spent} of {budget}");
}
