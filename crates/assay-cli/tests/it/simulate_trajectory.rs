//! Issue 29: trajectory checks on a simulator suite, end to end in both wire formats. The
//! scripted assistant (`examples/sim_provider.rs`) logs a chore before it reads the quest state
//! (`WRITE_BEFORE_READ`), reads the state in a loop (`LOOP_READS`), or behaves; the scenario's
//! `trajectory:` decides the run like a state check, naming the call that broke it.

use serde_json::Value;

use crate::sim_provider::Behaviour;
use crate::simulate::{
    ANTHROPIC, OPENAI, checks_of_kind, extend_scenario, project, provider, refused_before_any_call,
    run_of, simulate,
};
use crate::support::Scratch;

const RULES: &str = "trajectory:
  order: [get_quest_state, log_chore]
  calls:
    get_quest_state: {max: 2}
  arguments:
    - tool: log_chore
      match: {chore: {regex: \"(?i)dishes\"}}
";

fn with_rules(scratch: &Scratch, rules: &str, marker: &str) {
    extend_scenario(scratch, rules);
    let prompt = scratch.read("sim/prompts/coach_system_prompt.md");
    scratch.write(
        "sim/prompts/coach_system_prompt.md",
        &format!("{prompt}\n{marker}\n"),
    );
}

fn check<'r>(run: &'r Value, prefix: &str) -> &'r Value {
    checks_of_kind(run, "trajectory")
        .into_iter()
        .find(|c| c["name"].as_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("no check {prefix}: {}", run["checks"]))
}

#[test]
fn writes_before_reading_loops_and_honest_assistants_in_both_wire_formats() {
    let provider = provider(Behaviour::default());
    for models in [ANTHROPIC, OPENAI] {
        let run_with = |marker: &str| {
            let scratch = project(&provider);
            with_rules(&scratch, RULES, marker);
            let out = simulate(
                &scratch,
                &[&models[..], &["--scenarios", "daily_chore", "--json"]].concat(),
                &[],
            );
            (out.code, out.json(), out)
        };

        // Honest: reads, then logs both chores; every trajectory check passes with its calls.
        let (code, report, out) = run_with("");
        assert_eq!(code, 0, "{models:?}: {out:?}");
        let run = run_of(&report, "daily_chore");
        assert_eq!(run["verdict"], "pass", "{run}");
        assert_eq!(
            checks_of_kind(run, "trajectory").len(),
            3,
            "{}",
            run["checks"]
        );
        assert!(
            checks_of_kind(run, "trajectory")
                .iter()
                .all(|c| c["status"] == "passed")
        );
        let order = check(run, "trajectory: order");
        assert_eq!(order["calls"][0]["name"], "get_quest_state");
        assert_eq!(order["calls"][0]["call"], 1);
        assert_eq!(order["calls"][1]["name"], "log_chore");
        assert!(
            order["calls"][1]["id"]
                .as_str()
                .is_some_and(|id| !id.is_empty())
        );

        // Writes before it reads: the order check fails, naming the call that came first.
        let (code, report, out) = run_with("WRITE_BEFORE_READ");
        assert_eq!(code, 1, "{models:?}: {out:?}");
        let run = run_of(&report, "daily_chore");
        assert_eq!(run["verdict"], "fail");
        assert_eq!(run["failed_by"], "check");
        let order = check(run, "trajectory: order");
        assert_eq!(order["status"], "failed");
        assert_eq!(
            order["details"][0],
            "log_chore (call 1, turn 2) came before get_quest_state (call 2, turn 2), and log_chore was not called after it",
            "{models:?}"
        );
        assert_eq!(order["calls"][0]["call"], 1);
        assert!(
            run["reason"]
                .as_str()
                .unwrap()
                .contains("`trajectory: order get_quest_state → log_chore`"),
            "{run}"
        );
        assert_eq!(
            check(run, "trajectory: log_chore called with")["status"],
            "passed"
        );

        // Loops: reads the state four times in one turn; the call bound fails at the third.
        let (code, report, out) = run_with("LOOP_READS");
        assert_eq!(code, 1, "{models:?}: {out:?}");
        let run = run_of(&report, "daily_chore");
        assert_eq!(run["verdict"], "fail");
        let bound = check(run, "trajectory: get_quest_state called at most 2");
        assert_eq!(bound["status"], "failed");
        let why = bound["details"][0].as_str().unwrap();
        assert!(
            why.starts_with("get_quest_state called ")
                && why.ends_with(", at most 2: the 3rd is get_quest_state (call 3, turn 2)"),
            "{why}"
        );
        assert_eq!(bound["calls"][0]["call"], 3);
        // It never logged a chore: the arguments rule has no call to match.
        assert_eq!(
            check(run, "trajectory: log_chore called with")["details"][0],
            "log_chore was never called"
        );
    }
}

#[test]
fn bad_trajectory_rules_are_exit_2_naming_file_and_field_and_write_nothing() {
    let cases: [(&str, &[&str]); 4] = [
        (
            "trajectory:\n  tool_used: [log_chore]\n",
            &["daily_chore.yaml", "tool_used"],
        ),
        (
            "trajectory:\n  arguments:\n    - tool: log_chore\n      match: {chore: {regex: \"(\"}}\n",
            &[
                "daily_chore.yaml",
                "trajectory.arguments[0].match.chore.regex",
                "bad regex",
            ],
        ),
        (
            "trajectory:\n  calls:\n    log_chore: {min: 3, max: 1}\n",
            &["daily_chore.yaml", "trajectory.calls.log_chore.min"],
        ),
        (
            "trajectory:\n  order: [find_book, log_chore]\n",
            &[
                "daily_chore.yaml",
                "trajectory.order[0]",
                "no server offers a tool `find_book`",
            ],
        ),
    ];
    refused_before_any_call(&cases);
}
