//! `assay simulate` end to end: the real binary, the example's MCP server (`scout-quest-mcp`,
//! a real SQLite database per scenario run), and a local server speaking the Anthropic and
//! OpenAI wire formats that plays simulated user, model under test and judge
//! (`examples/sim_provider.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::sim_provider::{Behaviour, Stats, router};
use crate::support::{Run, Scratch, assay_env};

/// The example's MCP server, built next to the `assay` binary (`cargo test --workspace` builds
/// it; otherwise it is built here once).
pub(crate) fn scout_server() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = Path::new(env!("CARGO_BIN_EXE_assay")).parent().unwrap();
        let path = dir.join("scout-quest-mcp");
        if !path.exists() {
            let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cargo.args([
                "build",
                "-q",
                "-p",
                "scout-quest-mcp",
                "--bin",
                "scout-quest-mcp",
            ]);
            if dir.ends_with("release") {
                cargo.arg("--release");
            }
            let status = cargo.status().expect("cargo runs");
            assert!(status.success(), "building scout-quest-mcp failed");
        }
        path
    })
    .clone()
}

/// A running scripted provider.
pub struct Provider {
    pub url: String,
    pub stats: Arc<Stats>,
}

pub fn provider(behaviour: Behaviour) -> Provider {
    let stats = Arc::new(Stats::default());
    let url = crate::support::serve(router(behaviour, stats.clone()));
    Provider { url, stats }
}

/// A copy of examples/scout-quest whose assay.toml points at `provider`.
pub(crate) fn project(provider: &Provider) -> Scratch {
    let scratch = Scratch::copy_of(&crate::support::repo_path("examples/scout-quest"));
    let _ = std::fs::remove_dir_all(scratch.path("mcp-server"));
    scratch.write(
        "assay.toml",
        &format!(
            "[providers]\nanthropic_base_url = \"{0}\"\nopenai_base_url = \"{0}/v1\"\nmax_retries = 4\n",
            provider.url
        ),
    );
    scratch
}

pub(crate) fn env_with<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, String)> {
    let server = scout_server().display().to_string();
    let mut env: Vec<(&str, String)> = vec![
        ("SCOUT_QUEST_MCP", server),
        ("ANTHROPIC_API_KEY", "test-key".into()),
        ("OPENAI_API_KEY", "test-key".into()),
        ("SCOUT_QUEST_TODAY", "2026-11-25".into()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    env
}

pub(crate) fn simulate(scratch: &Scratch, args: &[&str], extra_env: &[(&str, &str)]) -> Run {
    let env = env_with(extra_env);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut full = vec!["simulate", scratch.root().to_str().unwrap()];
    full.extend_from_slice(args);
    assay_env(&full, &env)
}

pub(crate) const ANTHROPIC: [&str; 6] = [
    "--model",
    "anthropic/coach-under-test",
    "--simulator-model",
    "anthropic/scout-sim",
    "--evaluator-model",
    "anthropic/judge",
];

pub(crate) fn runs(report: &Value) -> &Vec<Value> {
    report["runs"].as_array().unwrap()
}

/// Appends `text` (YAML) to the daily_chore scenario of a scout-quest copy.
pub(crate) fn extend_scenario(scratch: &Scratch, text: &str) {
    let scenario = scratch.read("sim/scenarios/daily_chore.yaml");
    scratch.write(
        "sim/scenarios/daily_chore.yaml",
        &format!("{scenario}{text}"),
    );
}

/// A run's checks of one kind (`state`, `trajectory`, `assertion`).
pub(crate) fn checks_of_kind<'r>(run: &'r Value, kind: &str) -> Vec<&'r Value> {
    run["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == kind)
        .collect()
}

/// Each addition to the daily_chore scenario is exit 2 with stderr naming every expected
/// piece, writes no report and reaches no assistant.
pub(crate) fn refused_before_any_call(additions: &[(&str, &[&str])]) {
    let provider = provider(Behaviour::default());
    for (text, expect) in additions {
        let scratch = project(&provider);
        extend_scenario(&scratch, text);
        let out = simulate(
            &scratch,
            &[&ANTHROPIC[..], &["--scenarios", "daily_chore"]].concat(),
            &[],
        );
        assert_eq!(out.code, 2, "{text}: {out:?}");
        for e in *expect {
            assert!(out.stderr.contains(e), "{text}: {e} not in {}", out.stderr);
        }
        assert!(
            !scratch.path("sim/reports").exists(),
            "{text}: nothing written"
        );
    }
    assert_eq!(provider.stats.assistant.load(Ordering::SeqCst), 0);
}

pub(crate) fn run_of<'r>(report: &'r Value, id: &str) -> &'r Value {
    runs(report)
        .iter()
        .find(|r| r["scenario_id"] == id)
        .unwrap_or_else(|| panic!("no run of {id}"))
}

pub(crate) fn tool_calls(run: &Value) -> Vec<&Value> {
    run["transcript"]["turns"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["tool_calls"].as_array().into_iter().flatten())
        .collect()
}

#[test]
pub(crate) fn anthropic_wire_format_end_to_end_with_real_tool_calls() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let out = simulate(&scratch, &[&ANTHROPIC[..], &["--json"]].concat(), &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let report = out.json();
    assert_eq!(runs(&report).len(), 9);
    assert_eq!(report["summary"]["passed"], 9, "{}", report["summary"]);

    // The judge's scores are parsed and weighted with the scenario's weights over the defaults.
    let chore = run_of(&report, "daily_chore");
    let scores = chore["judgement"]["scores"].as_array().unwrap();
    assert_eq!(scores.len(), 7);
    let weights: f64 = scores.iter().map(|s| s["weight"].as_f64().unwrap()).sum();
    assert!((weights - 1.0).abs() < 1e-9);
    let state = scores
        .iter()
        .find(|s| s["id"] == "state_management")
        .unwrap();
    assert_eq!(state["score"], 9.0, "tool calls without errors");
    let overall: f64 = scores
        .iter()
        .map(|s| s["weight"].as_f64().unwrap() * s["score"].as_f64().unwrap())
        .sum();
    assert!((chore["overall"].as_f64().unwrap() - overall).abs() < 1e-9);
    // state_management's weight is the scenario's 0.35 over a total that no longer sums to 1.
    assert!(state["weight"].as_f64().unwrap() > 0.3);

    // Every tool call is in the transcript with arguments and the server's real result.
    let calls = tool_calls(chore);
    let names: Vec<&str> = calls.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(&names[..3], ["get_quest_state", "log_chore", "log_chore"]);
    assert_eq!(calls[1]["server"], "scout");
    assert_eq!(
        calls[1]["arguments"]["chore"],
        "Wash and put away the dinner dishes"
    );
    assert_eq!(calls[1]["is_error"], false, "{}", calls[1]);
    assert!(
        calls[0]["result"]
            .as_str()
            .unwrap()
            .contains("Test Scout Will")
    );
    // The expected-state check read the database after the conversation: both chores.
    assert_eq!(
        chore["checks"][0]["status"], "passed",
        "{}",
        chore["checks"]
    );
    assert_eq!(chore["verdict"], "pass");

    // The email went through the youth-protection rule with the parent in cc.
    let email = run_of(&report, "counselor_prep");
    let compose = tool_calls(email)
        .into_iter()
        .find(|c| c["name"] == "compose_email")
        .unwrap();
    assert_eq!(compose["is_error"], false, "{compose}");
    assert_eq!(
        email["checks"][0]["status"], "passed",
        "{}",
        email["checks"]
    );

    // Reports and transcripts on disk.
    let reports = scratch.path("sim/reports");
    let md = std::fs::read_to_string(reports.join("latest.md")).unwrap();
    assert!(md.contains("| Daily chore log (`daily_chore`) |"), "{md}");
    assert!(md.contains("log_chore("), "tool calls in the excerpts");
    let transcripts = std::fs::read_dir(reports.join("transcripts"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(std::fs::read_dir(&transcripts).unwrap().count(), 9);
    // The self-contained HTML report beside the Markdown, linking each run's transcript file.
    let stamp = transcripts
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let html = std::fs::read_to_string(reports.join(format!("report_{stamp}.html"))).unwrap();
    assert!(html.starts_with("<!doctype html>") && !html.contains("<script"));
    assert!(html.contains("id=\"heatmap\"") && html.contains("Daily chore log"));
    assert!(html.contains(&format!("href=\"transcripts/{stamp}/daily_chore-1.json\"")));
    // Each check records where it read the state and what it read.
    assert!(
        email["checks"][0]["source"]
            .as_str()
            .unwrap()
            .starts_with("tool ")
    );
    assert!(email["checks"][0]["state"].is_string());
    // One request per role per call: the judge once per run.
    assert_eq!(provider.stats.judge.load(Ordering::SeqCst), 9);
}

#[test]
pub(crate) fn openai_wire_format_with_repeats_reports_spread_and_pass_k() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let out = simulate(
        &scratch,
        &[
            "--model",
            "openai/coach",
            "--simulator-model",
            "openai/sim",
            "--evaluator-model",
            "openai/judge",
            "--scenarios",
            "daily_chore,goal_change",
            "--repeat",
            "2",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("4 scenario run(s) (2 scenario(s) × 2)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("pass^2 2/2 scenarios"),
        "{}",
        out.stdout
    );
    let report: Value = serde_json::from_str(&scratch.read("sim/reports/latest.json")).unwrap();
    assert_eq!(runs(&report).len(), 4);
    let goal = run_of(&report, "goal_change");
    let update = tool_calls(goal)
        .into_iter()
        .find(|c| c["name"] == "update_quest_goal")
        .unwrap();
    assert_eq!(update["arguments"]["target_budget"], 450);
    assert_eq!(goal["checks"][0]["status"], "passed", "{}", goal["checks"]);
    let summary = &report["scenarios"][0];
    assert_eq!(
        (summary["runs"].as_u64(), summary["pass_all"].as_bool()),
        (Some(2), Some(true))
    );
    assert_eq!(summary["stddev"], 0.0);
    let md = scratch.read("sim/reports/latest.md");
    assert!(md.contains("pass^2"), "{md}");
}

/// The parts of a report that must not change between a recorded run and its replay.
pub(crate) fn stable(report: &Value) -> Value {
    let mut r = report.clone();
    for key in ["generated_at", "duration_ms", "usage", "rate_limits"] {
        r.as_object_mut().unwrap().remove(key);
    }
    for run in r["runs"].as_array_mut().unwrap() {
        run.as_object_mut().unwrap().remove("duration_ms");
        let t = run["transcript"].as_object_mut().unwrap();
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

#[test]
pub(crate) fn a_replayed_simulation_is_identical_and_makes_no_calls() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let args = [
        &ANTHROPIC[..],
        &["--scenarios", "daily_chore,counselor_prep", "--json"],
    ]
    .concat();
    let first = simulate(
        &scratch,
        &[&args[..], &["--cache", "read-write"]].concat(),
        &[],
    );
    assert_eq!(first.code, 0, "{first:?}");
    let before = provider.stats.requests.load(Ordering::SeqCst);
    assert!(before > 0);
    let replay = simulate(&scratch, &[&args[..], &["--cache", "replay"]].concat(), &[]);
    assert_eq!(replay.code, 0, "{replay:?}");
    assert_eq!(
        provider.stats.requests.load(Ordering::SeqCst),
        before,
        "no network calls"
    );
    assert_eq!(stable(&first.json()), stable(&replay.json()));
    let usage = replay.json()["usage"].clone();
    assert!(
        usage
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["cache_hits"] == u["calls"]),
        "{usage}"
    );
}

#[test]
pub(crate) fn provider_faults_are_retried_and_nothing_is_misscored() {
    let provider = provider(Behaviour {
        fail_every: 4,
        ..Behaviour::default()
    });
    let scratch = project(&provider);
    let out = simulate(
        &scratch,
        &[
            &ANTHROPIC[..],
            &[
                "--scenarios",
                "daily_chore,budget_entry,goal_change",
                "--json",
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        provider.stats.faults.load(Ordering::SeqCst) >= 4,
        "429s and 500s were injected"
    );
    let report = out.json();
    assert_eq!(report["summary"]["errors"], 0);
    assert_eq!(report["summary"]["passed"], 3);
}

#[test]
pub(crate) fn concurrency_bounds_model_calls_across_roles_while_more_conversations_are_open() {
    // `--concurrency` is what the provider sees: calls in flight across the simulated user,
    // the model under test and the judge together, however many conversations are open.
    let provider = provider(Behaviour {
        latency: std::time::Duration::from_millis(40),
        ..Behaviour::default()
    });
    let scratch = project(&provider);
    let out = simulate(
        &scratch,
        &[
            &ANTHROPIC[..],
            &["--concurrency", "3", "--runs-in-flight", "7", "--json"],
        ]
        .concat(),
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let report = out.json();
    assert_eq!(report["concurrency"], 3);
    assert_eq!(report["runs_in_flight"], 7);
    assert_eq!(report["summary"]["errors"], 0, "{report}");
    let most = provider.stats.max_in_flight.load(Ordering::SeqCst);
    assert_eq!(
        most, 3,
        "the limit is shared by the three roles and is used in full"
    );

    // The default keeps twice as many conversations open as there are call slots.
    let out = simulate(
        &scratch,
        &[
            &ANTHROPIC[..],
            &["--scenarios", "daily_chore", "--concurrency", "2", "--json"],
        ]
        .concat(),
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json()["runs_in_flight"], 4);
}

#[test]
pub(crate) fn mcp_crash_tool_timeout_and_unparsable_judge_are_errors_apart() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    // The judge answers prose for this scenario; the simulated user breaks character in another.
    scratch.edit(
        "sim/scenarios/off_topic.yaml",
        "persona_prompt: |\n",
        "persona_prompt: |\n  JUDGE_GARBAGE\n",
    );
    scratch.edit(
        "sim/scenarios/onboarding.yaml",
        "persona_prompt: |\n",
        "persona_prompt: |\n  BREAK_CHARACTER\n",
    );
    scratch.edit("sim/suite.yaml", "timeout_secs: 30", "timeout_secs: 1");
    let out = simulate(
        &scratch,
        &[
            &ANTHROPIC[..],
            &[
                "--scenarios",
                "daily_chore,off_topic,onboarding,goal_change",
            ],
        ]
        .concat(),
        // The server takes 3 s to answer log_chore: over the 1 s timeout.
        &[("SCOUT_QUEST_MCP_SLOW", "log_chore:3000")],
    );
    assert_eq!(out.code, 3, "{out:?}");
    let report: Value = serde_json::from_str(&scratch.read("sim/reports/latest.json")).unwrap();
    let chore = run_of(&report, "daily_chore");
    assert_eq!(chore["verdict"], "error");
    assert!(
        chore["error"]
            .as_str()
            .unwrap()
            .contains("did not answer within 1s"),
        "{chore}"
    );
    assert!(chore["overall"].is_null());
    let garbage = run_of(&report, "off_topic");
    assert_eq!(garbage["verdict"], "error");
    let why = garbage["error"].as_str().unwrap();
    assert!(
        why.starts_with("judge:") && why.contains("3 attempt"),
        "{why}"
    );
    let fault = run_of(&report, "onboarding");
    assert_eq!(fault["verdict"], "simulator_fault");
    assert_eq!(
        run_of(&report, "goal_change")["verdict"],
        "pass",
        "{}",
        run_of(&report, "goal_change")
    );
    let s = &report["summary"];
    assert_eq!(
        (
            s["errors"].as_u64(),
            s["simulator_fault"].as_u64(),
            s["passed"].as_u64()
        ),
        (Some(2), Some(1), Some(1))
    );
    // Only the scored run counts in the mean.
    assert_eq!(s["mean_overall"], run_of(&report, "goal_change")["overall"]);
    assert!(out.stdout.contains("Errors (not scored)"), "{}", out.stdout);

    // A server that dies mid-conversation: its second tool call kills it (daily_chore makes
    // three, cringe_recovery one).
    let crash = simulate(
        &scratch,
        &[
            &ANTHROPIC[..],
            &["--scenarios", "daily_chore,cringe_recovery", "--json"],
        ]
        .concat(),
        &[("SCOUT_QUEST_MCP_CRASH_AFTER", "1")],
    );
    assert_eq!(crash.code, 3, "{crash:?}");
    let report = crash.json();
    let chore = run_of(&report, "daily_chore");
    assert_eq!(chore["verdict"], "error");
    assert!(
        chore["error"]
            .as_str()
            .unwrap()
            .contains("MCP server `scout`"),
        "{chore}"
    );
    assert_eq!(run_of(&report, "cringe_recovery")["verdict"], "pass");
}

#[test]
pub(crate) fn bad_input_is_exit_2_with_file_line_and_field_and_writes_nothing() {
    let provider = provider(Behaviour::default());
    let check = |edit: &dyn Fn(&Scratch), args: &[&str], expect: &[&str]| {
        let scratch = project(&provider);
        edit(&scratch);
        let out = simulate(&scratch, &[&ANTHROPIC[..], args].concat(), &[]);
        assert_eq!(out.code, 2, "{out:?}");
        for e in expect {
            assert!(out.stderr.contains(e), "missing {e:?} in {}", out.stderr);
        }
        assert!(!scratch.path("sim/reports").exists(), "nothing written");
        assert_eq!(
            provider.stats.requests.load(Ordering::SeqCst),
            0,
            "no model call"
        );
    };
    check(
        &|s| {
            s.edit(
                "sim/scenarios/daily_chore.yaml",
                "initial_message: \"hey i did my chores\"\n",
                "",
            );
        },
        &[],
        &["daily_chore.yaml", "missing field `initial_message`"],
    );
    check(
        &|s| {
            s.edit(
                "sim/scenarios/daily_chore.yaml",
                "  state_management: 0.35",
                "  state_mgmt: 0.35",
            );
        },
        &[],
        &["daily_chore.yaml:", "unknown criterion `state_mgmt`"],
    );
    check(
        &|s| {
            s.edit(
                "sim/scenarios/daily_chore.yaml",
                "max_turns: 8",
                "max_turns: 0",
            );
        },
        &[],
        &["daily_chore.yaml:", "max_turns"],
    );
    check(
        &|s| {
            let suite = s.read("sim/suite.yaml");
            s.write("sim/suite.yaml", &regex_weights(&suite, "0.0"));
        },
        &[],
        &["suite.yaml", "weights are all zero"],
    );
    check(
        &|s| {
            s.edit(
                "sim/suite.yaml",
                "${SCOUT_QUEST_MCP:-scout-quest-mcp}\", \"serve\"",
                "no-such-mcp-server\", \"serve\"",
            );
        },
        &[],
        &["cannot find the program `no-such-mcp-server`"],
    );
    check(
        &|_| {},
        &["--scenarios", "daily_chore,nope"],
        &["unknown scenario `nope`"],
    );
    // Weights whose sum is not a finite number (issue 22): bad input before any call, never a
    // run where every score is 0.
    check(
        &|s| {
            let suite = s.read("sim/suite.yaml");
            s.write("sim/suite.yaml", &regex_weights(&suite, "1.0e308"));
        },
        &[],
        &["suite.yaml:", "add up to more than a number can hold"],
    );
    check(
        &|s| {
            s.edit(
                "sim/scenarios/daily_chore.yaml",
                "  state_management: 0.35\n  requirement_accuracy: 0.10",
                "  state_management: 1.0e308\n  requirement_accuracy: 1.0e308",
            );
        },
        &[],
        &["daily_chore.yaml:", "add up to more than a number can hold"],
    );
    // Files outside the project are never read (issue 22): `..`, absolute, and a symbolic link.
    for (field, value) in [
        ("system_prompt_file", "../../../../../../../../etc/hostname"),
        ("system_prompt_file", "/etc/hostname"),
        ("fixture", "../../../../../../../../etc/hostname"),
    ] {
        check(
            &|s| {
                let suite = s.read("sim/suite.yaml");
                let line = suite
                    .lines()
                    .find(|l| l.starts_with(&format!("{field}:")))
                    .unwrap()
                    .to_owned();
                s.write(
                    "sim/suite.yaml",
                    &suite.replace(&line, &format!("{field}: {value}")),
                );
            },
            &[],
            &["suite.yaml:", field, value],
        );
    }
    #[cfg(unix)]
    check(
        &|s| {
            std::os::unix::fs::symlink("/etc/hostname", s.path("sim/prompts/linked.md")).unwrap();
            s.edit(
                "sim/suite.yaml",
                "system_prompt_file: prompts/coach_system_prompt.md",
                "system_prompt_file: prompts/linked.md",
            );
        },
        &[],
        &["suite.yaml:", "leads outside the project's folder"],
    );
    // A path that leaves sim/ but stays in the project is fine (checked by its absence of
    // error in the run tests); one error chain, each part once (issue 22).
    let scratch = project(&provider);
    scratch.edit(
        "sim/scenarios/daily_chore.yaml",
        "max_turns: 8",
        "max_turns: 99",
    );
    let out = simulate(&scratch, &ANTHROPIC, &[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.stderr.matches("must be between 1 and").count(),
        1,
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("daily_chore.yaml").count(),
        1,
        "{}",
        out.stderr
    );
    let scratch = project(&provider);
    scratch.edit(
        "sim/scenarios/daily_chore.yaml",
        "max_turns: 8",
        "max_turns: 8\nname: [1, 2]",
    );
    let first = scratch.read("sim/scenarios/daily_chore.yaml");
    let first_name = first
        .lines()
        .find(|l| l.starts_with("name:"))
        .unwrap()
        .to_owned();
    scratch.write(
        "sim/scenarios/daily_chore.yaml",
        &first.replacen(&format!("{first_name}\n"), "", 1),
    );
    let out = simulate(&scratch, &ANTHROPIC, &[]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("name: invalid type"), "{}", out.stderr);
    assert!(!out.stderr.contains("name: name"), "{}", out.stderr);
    assert_eq!(
        out.stderr.matches("daily_chore.yaml").count(),
        1,
        "{}",
        out.stderr
    );
}

/// The suite with every `weight: x` replaced by `weight: <value>`.
pub(crate) fn regex_weights(suite: &str, value: &str) -> String {
    suite
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("weight:") {
                let indent = &l[..l.len() - l.trim_start().len()];
                format!("{indent}weight: {value}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
pub(crate) fn weights_that_do_not_sum_to_one_are_normalised_with_a_warning() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let suite = scratch.read("sim/suite.yaml");
    scratch.write("sim/suite.yaml", &regex_weights(&suite, "2"));
    let out = simulate(
        &scratch,
        &[&ANTHROPIC[..], &["--scenarios", "off_topic", "--json"]].concat(),
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains("sum to 14.000, not 1; they are normalised"),
        "{}",
        out.stderr
    );
    let report = out.json();
    let scores = run_of(&report, "off_topic")["judgement"]["scores"]
        .as_array()
        .unwrap()
        .clone();
    let weights: f64 = scores.iter().map(|s| s["weight"].as_f64().unwrap()).sum();
    assert!((weights - 1.0).abs() < 1e-9);
}

#[test]
pub(crate) fn compare_puts_models_side_by_side_in_markdown_and_html() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let mut paths = Vec::new();
    for (model, out) in [("anthropic/coach-a", "a.md"), ("openai/coach-<b>", "b.md")] {
        let path = scratch.path(out).display().to_string();
        let run = simulate(
            &scratch,
            &[
                "--model",
                model,
                "--simulator-model",
                "anthropic/sim",
                "--evaluator-model",
                "anthropic/judge",
                "--scenarios",
                "off_topic,goal_change",
                "--output",
                &path,
            ],
            &[],
        );
        assert_eq!(run.code, 0, "{run:?}");
        paths.push(path);
    }
    let html = scratch.path("compare.html").display().to_string();
    let out = assay_env(
        &["simulate", "compare", &paths[0], &paths[1], "--html", &html],
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("| scenario | anthropic/coach-a | openai/coach-<b> |"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("| Mid-quest adaptation (`goal_change`) |"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("✅"));
    // Issue 18: a verdict for the pair, with its interval, and one line per pair.
    assert!(out.stdout.contains("## Verdicts"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("- openai/coach-<b> against anthropic/coach-a: not distinguishable ("),
        "{}",
        out.stdout
    );
    let json = assay_env(
        &["simulate", "compare", &paths[0], &paths[1], "--json"],
        &[],
    );
    assert_eq!(json.code, 0, "{json:?}");
    let c = json.json();
    assert_eq!(c["pairs"][0]["overall"]["verdict"], "not_distinguishable");
    assert_eq!(c["reports"][1]["model"], "openai/coach-<b>");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("openai/coach-&lt;b&gt;") && !page.contains("coach-<b>"));
    assert!(page.contains("class=\"num pass\""));
    let bad = assay_env(
        &[
            "simulate",
            "compare",
            &scratch.path("sim/suite.yaml").display().to_string(),
        ],
        &[],
    );
    assert_eq!(bad.code, 2, "{bad:?}");
}

/// The npm packages of scripts/fetch-mcp-servers.sh, or `None` when skipping is asked for.
pub(crate) fn npm_servers() -> Option<PathBuf> {
    let dir = std::env::var_os("ASSAY_TEST_NPM_DIR").map_or_else(
        || crate::support::repo_path("target/test-npm"),
        PathBuf::from,
    );
    if dir
        .join("node_modules/@modelcontextprotocol/server-memory")
        .exists()
    {
        return Some(dir);
    }
    if std::env::var_os("ASSAY_SKIP_NPM_TESTS").is_some() {
        eprintln!(
            "skipped: no MCP servers from npm at {} (ASSAY_SKIP_NPM_TESTS=1)",
            dir.display()
        );
        return None;
    }
    panic!(
        "the published MCP servers are missing at {}: run scripts/fetch-mcp-servers.sh (or set ASSAY_TEST_NPM_DIR)",
        dir.display()
    );
}

/// One scenario against `@modelcontextprotocol/server-memory` (stdio, started by assay) and
/// one against `@modelcontextprotocol/server-everything` over streamable HTTP (already running).
#[test]
pub(crate) fn published_mcp_servers_over_stdio_and_streamable_http() {
    let Some(npm) = npm_servers() else { return };
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let modules = npm.join("node_modules/@modelcontextprotocol");
    // A free port for the HTTP server.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _http = Kill(
        Command::new("node")
            .arg(modules.join("server-everything/dist/index.js"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("node runs"),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "server-everything did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let memory = modules
        .join("server-memory/dist/index.js")
        .display()
        .to_string();
    let suite = format!(
        r#"name: published servers
system_prompt: "You are a helpful assistant with a memory and an echo tool."
pass_threshold: 7
mcp_servers:
  - name: memory
    command: ["node", "{memory}"]
    env: {{MEMORY_FILE_PATH: "{{workdir}}/memory.jsonl"}}
  - name: everything
    url: "http://127.0.0.1:{port}/mcp"
criteria:
  - id: helpfulness
    weight: 0.5
    rubric: Did the assistant do what was asked?
  - id: state_management
    weight: 0.5
    rubric: Did it use its tools correctly?
"#
    );
    let _ = std::fs::remove_dir_all(scratch.path("sim/scenarios"));
    scratch.write("sim/suite.yaml", &suite);
    scratch.write(
        "sim/scenarios/memory.yaml",
        "id: memory\nname: Remember a fact\ndescription: The user asks the assistant to remember something.\npersona_prompt: You are Will and want the assistant to remember you are saving for a PC.\ninitial_message: please remember that i am saving for a gaming pc\nmax_turns: 3\nexpected_state:\n  - name: the entity is in the graph\n    tool: {server: memory, name: read_graph, arguments: {}}\n    expect:\n      - path: entities\n        length: 1\n      - path: entities.0.observations\n        contains: gaming PC\n",
    );
    scratch.write(
        "sim/scenarios/echo.yaml",
        "id: echo\nname: Echo over HTTP\ndescription: The user asks for an echo.\npersona_prompt: You are a tester who wants the assistant to use its echo tool.\ninitial_message: can you echo something for me\nmax_turns: 2\n",
    );
    let out = simulate(&scratch, &[&ANTHROPIC[..], &["--json"]].concat(), &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let report = out.json();
    let memory_run = run_of(&report, "memory");
    let create = tool_calls(memory_run)
        .into_iter()
        .find(|c| c["name"] == "create_entities")
        .unwrap();
    assert_eq!(
        (create["server"].as_str(), create["is_error"].as_bool()),
        (Some("memory"), Some(false))
    );
    assert_eq!(
        memory_run["checks"][0]["status"], "passed",
        "{}",
        memory_run["checks"]
    );
    let echo = tool_calls(run_of(&report, "echo"))
        .into_iter()
        .find(|c| c["name"] == "echo")
        .unwrap()
        .clone();
    assert_eq!(echo["server"], "everything");
    assert!(
        echo["result"]
            .as_str()
            .unwrap()
            .contains("hello from assay"),
        "{echo}"
    );
}

/// The Markdown report and the console summary of a small run, as a user sees them.
#[test]
pub(crate) fn report_and_console_snapshots() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let out = simulate(
        &scratch,
        &[
            &ANTHROPIC[..],
            &[
                "--scenarios",
                "daily_chore,counselor_prep",
                "--concurrency",
                "1",
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let root = scratch.root().display().to_string();
    let redact = |text: &str| {
        text.replace(&root, "[PROJECT]")
            .lines()
            .map(|l| {
                if let Some(i) = l.find("report_20") {
                    format!("{}report_[STAMP].md (transcripts and JSON beside it; --json prints the JSON)", &l[..i])
                } else if l.starts_with("> ⏱") {
                    "> ⏱ [TIME · TOKENS · COST]".to_owned()
                } else if l.starts_with("Totals:") {
                    "Totals: [TIME · TOKENS · COST]".to_owned()
                } else if l.starts_with("Model under test") {
                    l.split(" · ").filter(|p| !p.contains(" UTC")).collect::<Vec<_>>().join(" · ")
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    insta::assert_snapshot!("simulate_console", redact(&out.stdout));
    insta::assert_snapshot!(
        "simulate_report",
        redact(&scratch.read("sim/reports/latest.md"))
    );
}

/// Expected-state checks read the state through a tool, a resource and a command alike.
#[test]
pub(crate) fn expected_state_reads_a_tool_a_resource_and_a_command() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let text = scratch.read("sim/scenarios/goal_change.yaml");
    let head = &text[..text.find("expected_state:").unwrap()];
    scratch.write(
        "sim/scenarios/goal_change.yaml",
        &format!(
            "{head}expected_state:
  - name: by tool
    tool: {{server: scout, name: get_quest_state, arguments: {{}}}}
    expect:
      - {{path: quest.goal, contains: bike}}
  - name: by resource
    resource: {{server: scout, uri: \"scout://quest-state\"}}
    expect:
      - {{path: quest.goal, contains: bike}}
      - {{path: goal_history, length: 1}}
  - name: by command
    command: [\"${{SCOUT_QUEST_MCP}}\", dump, --db, \"{{workdir}}/scout.db\"]
    expect:
      - {{path: quest.target_budget, equals: 450}}
  - name: a check that fails
    command: [\"${{SCOUT_QUEST_MCP}}\", dump, --db, \"{{workdir}}/scout.db\"]
    expect:
      - {{path: quest.target_budget, max: 100}}
  - name: a check that cannot be read
    command: [sh, -c, \"echo not json\"]
    expect:
      - {{path: quest, exists: true}}
"
        ),
    );
    let args = [&ANTHROPIC[..], &["--scenarios", "goal_change", "--json"]].concat();
    // A failed required check fails the run (exit 1), and says which.
    let out = simulate(&scratch, &args, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    let report = out.json();
    let run = run_of(&report, "goal_change");
    assert_eq!(
        (run["verdict"].as_str(), run["failed_by"].as_str()),
        (Some("fail"), Some("check"))
    );
    assert!(
        run["reason"]
            .as_str()
            .unwrap()
            .contains("`a check that fails`"),
        "{run}"
    );
    // Advisory, it no longer decides; the check that cannot be read makes the run an error
    // (exit 3): a verdict needs every required check.
    scratch.edit(
        "sim/scenarios/goal_change.yaml",
        "  - name: a check that fails\n",
        "  - name: a check that fails\n    advisory: true\n",
    );
    let out = simulate(&scratch, &args, &[]);
    assert_eq!(out.code, 3, "{out:?}");
    let report = out.json();
    let run = run_of(&report, "goal_change");
    assert_eq!(run["verdict"], "error");
    assert!(
        run["error"]
            .as_str()
            .unwrap()
            .contains("`a check that cannot be read`")
            && run["error"]
                .as_str()
                .unwrap()
                .contains("could not be evaluated"),
        "{run}"
    );
    // Both advisory: the judge decides, and every check is still reported.
    scratch.edit(
        "sim/scenarios/goal_change.yaml",
        "  - name: a check that cannot be read\n",
        "  - name: a check that cannot be read\n    advisory: true\n",
    );
    let out = simulate(&scratch, &args, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let report = out.json();
    assert_eq!(run_of(&report, "goal_change")["verdict"], "pass");
    let checks = run_of(&report, "goal_change")["checks"]
        .as_array()
        .unwrap()
        .clone();
    let statuses: Vec<&str> = checks
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["passed", "passed", "passed", "failed", "error"],
        "{checks:?}"
    );
    assert!(
        checks[3]["details"][0]
            .as_str()
            .unwrap()
            .contains("450 > 100")
    );
    assert!(
        checks[4]["details"][0]
            .as_str()
            .unwrap()
            .contains("not JSON")
    );
}

/// The entries of `.assay/sim/` (none when the folder does not exist).
pub(crate) fn sim_scratch(scratch: &Scratch) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(scratch.path(".assay/sim"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
pub(crate) fn scratch_folders_go_after_every_run_and_a_killed_runs_on_the_next_start() {
    // A slow provider, so the run is surely mid-conversation (servers up, databases written)
    // when it is killed.
    let provider = provider(Behaviour {
        latency: std::time::Duration::from_millis(400),
        ..Behaviour::default()
    });
    let scratch = project(&provider);
    let env = env_with(&[]);
    let mut command = Command::new(env!("CARGO_BIN_EXE_assay"));
    command
        .args(["simulate", scratch.root().to_str().unwrap()])
        .args(ANTHROPIC)
        .args(["--scenarios", "daily_chore,off_topic"])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (k, v) in &env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let killed_dir = loop {
        let run_dirs: Vec<String> = sim_scratch(&scratch)
            .into_iter()
            .filter(|n| Path::new(n).extension().is_none_or(|e| e != "lock"))
            .collect();
        if let [dir] = run_dirs.as_slice()
            && scratch
                .path(&format!(".assay/sim/{dir}/daily_chore-1/scout.db"))
                .exists()
        {
            break dir.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no scenario scratch folder appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL: nothing can clean up
    child.wait().unwrap();
    assert!(
        scratch.path(&format!(".assay/sim/{killed_dir}")).is_dir(),
        "a killed run leaves its folder"
    );

    // The next run removes it, and leaves nothing of its own.
    let out = simulate(
        &scratch,
        &[&ANTHROPIC[..], &["--scenarios", "off_topic"]].concat(),
        &[],
    );
    assert!(out.code == 0 || out.code == 1, "{out:?}");
    assert_eq!(
        sim_scratch(&scratch),
        Vec::<String>::new(),
        "{:?}",
        sim_scratch(&scratch)
    );

    // `--keep-workdirs` keeps this run's folder (and no later run removes it).
    let out = simulate(
        &scratch,
        &[
            &ANTHROPIC[..],
            &["--scenarios", "off_topic", "--keep-workdirs"],
        ]
        .concat(),
        &[],
    );
    assert!(out.code == 0 || out.code == 1, "{out:?}");
    let kept = sim_scratch(&scratch);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let out = simulate(
        &scratch,
        &[&ANTHROPIC[..], &["--scenarios", "off_topic"]].concat(),
        &[],
    );
    assert!(out.code == 0 || out.code == 1, "{out:?}");
    assert_eq!(sim_scratch(&scratch), kept);
}

pub(crate) const OPENAI: [&str; 6] = [
    "--model",
    "openai/coach-under-test",
    "--simulator-model",
    "openai/scout-sim",
    "--evaluator-model",
    "openai/judge",
];

/// Issue 18: an assistant that claims an action its tools never performed, before a judge that
/// believes it. The state check decides: the run fails, the command exits 1, and the reports
/// name the check and count the judge's error; an advisory check does not decide.
#[test]
pub(crate) fn a_failed_state_check_fails_the_run_whatever_the_judge_says() {
    let provider = provider(Behaviour::default());
    for models in [ANTHROPIC, OPENAI] {
        let scratch = project(&provider);
        let prompt = scratch.read("sim/prompts/coach_system_prompt.md");
        scratch.write(
            "sim/prompts/coach_system_prompt.md",
            &format!("{prompt}\nCLAIM_WITHOUT_TOOLS\n"),
        );
        // No gate: the default rule, every scored run must pass.
        let suite = scratch.read("sim/suite.yaml");
        scratch.write(
            "sim/suite.yaml",
            &suite.replace("gate:\n  min_mean_overall: 7.0\n  min_pass_rate: 0.8\n", ""),
        );
        let out = simulate(
            &scratch,
            &[&models[..], &["--scenarios", "daily_chore,off_topic"]].concat(),
            &[],
        );
        assert_eq!(out.code, 1, "{models:?}: {out:?}");
        assert!(
            out.stdout.contains("Failed by a state check"),
            "{}",
            out.stdout
        );
        assert!(
            out.stdout
                .contains("failed check `exactly the two chores Will did are logged for today` (chores_today: length 0, expected 2)"),
            "{}",
            out.stdout
        );
        assert!(
            out.stdout.contains("(the judge said pass)"),
            "{}",
            out.stdout
        );
        assert!(
            out.stdout
                .contains("the judge passed 1 run(s) whose state check failed"),
            "{}",
            out.stdout
        );
        assert!(
            out.stdout
                .contains("gate (no `gate:` in the suite: every scored run must pass): FAILED (1 scored run(s) failed (daily_chore #1)"),
            "{}",
            out.stdout
        );
        let report: Value = serde_json::from_str(&scratch.read("sim/reports/latest.json")).unwrap();
        assert_eq!(report["schema_version"], 4);
        let chore = run_of(&report, "daily_chore");
        assert_eq!(chore["verdict"], "fail");
        assert_eq!(chore["failed_by"], "check");
        assert_eq!(chore["judge_verdict"], "pass");
        assert!(
            chore["overall"].as_f64().unwrap() >= 7.0,
            "the judge was fooled"
        );
        assert!(tool_calls(chore).is_empty(), "no tool was called");
        assert_eq!(report["summary"]["failed_by_check"], 1);
        assert_eq!(report["summary"]["judge_passed_failed_check"], 1);
        assert_eq!(run_of(&report, "off_topic")["verdict"], "pass");
        let md = scratch.read("sim/reports/latest.md");
        assert!(md.contains("daily_chore #1 — FAIL (check)"), "{md}");
        assert!(md.contains("The judge alone said **pass**"), "{md}");
        assert!(
            md.contains("The judge passed 1 run(s) whose state check failed"),
            "{md}"
        );

        // The same check marked advisory: reported, but the judge decides (and passes).
        scratch.edit(
            "sim/scenarios/daily_chore.yaml",
            "  - name: exactly the two chores Will did are logged for today\n",
            "  - name: exactly the two chores Will did are logged for today\n    advisory: true\n",
        );
        let out = simulate(
            &scratch,
            &[&models[..], &["--scenarios", "daily_chore"]].concat(),
            &[],
        );
        assert_eq!(out.code, 0, "{models:?}: {out:?}");
        let report: Value = serde_json::from_str(&scratch.read("sim/reports/latest.json")).unwrap();
        let chore = run_of(&report, "daily_chore");
        assert_eq!(chore["verdict"], "pass");
        assert_eq!(chore["checks"][0]["status"], "failed");
        assert_eq!(chore["checks"][0]["advisory"], true);
        let md = scratch.read("sim/reports/latest.md");
        assert!(md.contains("(advisory) Failed"), "{md}");
    }
}
