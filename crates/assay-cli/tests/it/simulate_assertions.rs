//! Issue 29: deterministic assertions (`assert`) in a simulator scenario, end to end in both wire
//! formats. They are checked on the assistant's final reply; a failed one fails the run with the
//! check named, even though the scripted judge passes it; a bad spec is exit 2 naming the
//! scenario file and the field, before any model is called.

use std::time::Duration;

use serde_json::Value;

use crate::assertion_types::{check_statuses, every_type};
use crate::sim_provider::Behaviour;
use crate::simulate::{
    ANTHROPIC, OPENAI, checks_of_kind, extend_scenario, project, provider, refused_before_any_call,
    run_of, simulate,
};

#[test]
fn final_reply_assertions_pass_and_a_critical_one_fails_the_run_in_both_wire_formats() {
    let provider = provider(Behaviour::default());
    for models in [ANTHROPIC, OPENAI] {
        let run_with = |rules: &str| {
            let scratch = project(&provider);
            extend_scenario(&scratch, rules);
            let out = simulate(
                &scratch,
                &[&models[..], &["--scenarios", "daily_chore", "--json"]].concat(),
                &[],
            );
            (out.code, out.json(), out)
        };

        let (code, report, out) = run_with(
            "assert:\n  - {type: icontains, value: \"what next\"}\n  - {type: not-refusal, critical: true}\n",
        );
        assert_eq!(code, 0, "{models:?}: {out:?}");
        let run = run_of(&report, "daily_chore");
        assert_eq!(run["verdict"], "pass", "{run}");
        let checks = checks_of_kind(run, "assertion");
        assert_eq!(checks.len(), 2, "{}", run["checks"]);
        assert_eq!(checks[0]["name"], "assert[0]: icontains \"what next\"");
        assert_eq!(checks[1]["name"], "assert[1]: not-refusal");
        assert!(checks.iter().all(|c| c["status"] == "passed"), "{checks:?}");

        let (code, report, out) = run_with(
            "assert:\n  - {type: icontains, value: \"what next\"}\n  - {type: contains, value: \"tomorrow\", critical: true}\n",
        );
        assert_eq!(code, 1, "{models:?}: {out:?}");
        let run = run_of(&report, "daily_chore");
        assert_eq!(run["verdict"], "fail", "{run}");
        assert_eq!(run["failed_by"], "check");
        assert_eq!(run["judge_verdict"], "pass", "the scripted judge passed it");
        let checks = checks_of_kind(run, "assertion");
        assert_eq!(checks[0]["status"], "passed");
        assert_eq!(checks[1]["status"], "failed");
        assert!(
            run["reason"]
                .as_str()
                .unwrap()
                .contains("assert[1]: contains \"tomorrow\""),
            "{run}"
        );
    }
}

#[test]
fn bad_assertion_specs_are_exit_2_naming_file_and_field_and_write_nothing() {
    let cases: [(&str, &[&str]); 3] = [
        (
            "assert:\n  - {type: contains, value: a}\n  - {type: regex, value: \"(\"}\n",
            &[
                "daily_chore.yaml",
                "assert[1].value",
                "invalid regular expression",
            ],
        ),
        (
            "assert:\n  - {type: icontain, value: a}\n",
            &["daily_chore.yaml", "assert[0].type", "icontains"],
        ),
        (
            "assert_threshold: 0.5\n",
            &["daily_chore.yaml", "assert_threshold"],
        ),
    ];
    refused_before_any_call(&cases);
}

/// The final reply of a run: the last assistant turn that said something.
fn final_reply(run: &Value) -> String {
    run["transcript"]["turns"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|t| {
            t["role"] == "assistant" && !t["content"].as_str().unwrap_or("").trim().is_empty()
        })
        .and_then(|t| t["content"].as_str())
        .unwrap_or_else(|| panic!("no final reply in {run}"))
        .to_owned()
}

#[test]
fn every_assertion_type_passes_and_fails_on_the_final_reply_in_both_wire_formats() {
    // A few milliseconds a call, so the final reply's latency is measurably above 0.
    let provider = provider(Behaviour {
        latency: Duration::from_millis(5),
        ..Behaviour::default()
    });
    for models in [ANTHROPIC, OPENAI] {
        let priced = |rules: &str| {
            let scratch = project(&provider);
            let toml = scratch.read("assay.toml");
            scratch.write(
                "assay.toml",
                &format!(
                    "{toml}\n[providers.prices]\n\"{}\" = {{ input = 1.0, output = 2.0 }}\n",
                    models[1]
                ),
            );
            extend_scenario(&scratch, rules);
            simulate(
                &scratch,
                &[&models[..], &["--scenarios", "daily_chore", "--json"]].concat(),
                &[],
            )
        };
        let first = priced("");
        assert_eq!(first.code, 0, "{models:?}: {first:?}");
        let reply = final_reply(run_of(&first.json(), "daily_chore"));

        let specs = every_type(&reply, true, true);
        let list: Vec<Value> = specs.iter().map(|(s, _)| s.clone()).collect();
        let out = priced(&format!(
            "assert: {}\nassert_threshold: 0\n",
            serde_json::to_string(&list).unwrap()
        ));
        let report = out.json();
        let run = run_of(&report, "daily_chore");
        assert_eq!(
            final_reply(run),
            reply,
            "the scripted assistant answers alike"
        );
        // One check per assertion, then the list's threshold as a check of its own.
        let checks: Vec<Value> = checks_of_kind(run, "assertion")
            .into_iter()
            .filter(|c| c["name"].as_str().unwrap_or("").starts_with("assert["))
            .cloned()
            .collect();
        check_statuses(&specs, &Value::Array(checks));
    }
}
