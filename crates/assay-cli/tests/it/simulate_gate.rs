//! The simulator's gates: a pass-rate gate, judge samples that find the runs a fickle judge
//! flips, and a baseline report that gates on significant regression.

use std::sync::atomic::Ordering;

use serde_json::Value;

use crate::sim_provider::Behaviour;
use crate::simulate::*;

/// Issue 18: with a gate that allows some failures (`min_pass_rate`), a failed run does not
/// fail the command by itself; without one, one failed run does.
#[test]
pub(crate) fn only_a_pass_rate_gate_allows_failing_runs() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let prompt = scratch.read("sim/prompts/coach_system_prompt.md");
    scratch.write(
        "sim/prompts/coach_system_prompt.md",
        &format!("{prompt}\nCLAIM_WITHOUT_TOOLS\n"),
    );
    let suite = scratch.read("sim/suite.yaml");
    scratch.write(
        "sim/suite.yaml",
        &suite.replace(
            "  min_mean_overall: 7.0\n  min_pass_rate: 0.8\n",
            "  min_pass_rate: 0.5\n",
        ),
    );
    let out = simulate(
        &scratch,
        &[&ANTHROPIC[..], &["--scenarios", "daily_chore,off_topic"]].concat(),
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("gate: passed"), "{}", out.stdout);
    scratch.write(
        "sim/suite.yaml",
        &suite.replace(
            "  min_mean_overall: 7.0\n  min_pass_rate: 0.8\n",
            "  min_mean_overall: 1.0\n",
        ),
    );
    let out = simulate(
        &scratch,
        &[&ANTHROPIC[..], &["--scenarios", "daily_chore,off_topic"]].concat(),
        &[],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout
            .contains("only `gate.min_pass_rate` allows failing runs"),
        "{}",
        out.stdout
    );
}

/// Issue 18: a judge asked three times that changes its mind on one scenario: that run is
/// `uncertain` (apart from pass and fail), and the report measures the judge's consistency.
#[test]
pub(crate) fn judge_samples_find_the_runs_a_fickle_judge_flips() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    scratch.edit(
        "sim/scenarios/off_topic.yaml",
        "description: ",
        "description: FICKLE ",
    );
    let out = simulate(
        &scratch,
        &[
            &OPENAI[..],
            &[
                "--scenarios",
                "off_topic,goal_change",
                "--judge-samples",
                "3",
                "--json",
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(out.code, 0, "{out:?}");
    let report = out.json();
    let off = run_of(&report, "off_topic");
    assert_eq!(off["verdict"], "uncertain", "{off}");
    assert_eq!(off["judge_verdict"], "uncertain");
    assert_eq!(off["judge_samples"].as_array().unwrap().len(), 3);
    assert_eq!(off["reason"], "the judge passed 1 of 3 samples");
    let goal = run_of(&report, "goal_change");
    assert_eq!(goal["verdict"], "pass");
    assert_eq!(report["summary"]["uncertain"], 1);
    assert_eq!(
        report["summary"]["passed"], 1,
        "uncertain runs are not scored"
    );
    let c = &report["judge"]["consistency"];
    assert_eq!(
        (c["judged"].as_u64(), c["flipped"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(c["flip_share"], 0.5);
    assert_eq!(report["judge"]["samples"], 3);
    // Three judge calls per run: the resamples are calls of their own, not cache hits.
    assert_eq!(provider.stats.judge.load(Ordering::SeqCst), 6);
    let md = scratch.read("sim/reports/latest.md");
    assert!(
        md.contains("3 samples: verdict flipped in 1/2 runs (50%)"),
        "{md}"
    );
    assert!(md.contains("off_topic #1 — uncertain"), "{md}");
}

/// Issue 18: `--baseline` gates on "no significant regression"; a baseline judged by another
/// judge version is refused unless asked for.
#[test]
pub(crate) fn a_baseline_report_gates_on_significant_regression() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let args = [
        &ANTHROPIC[..],
        &["--scenarios", "daily_chore,off_topic", "--repeat", "5"],
    ]
    .concat();
    let first = simulate(&scratch, &args, &[]);
    assert_eq!(first.code, 0, "{first:?}");
    let base = scratch.path("sim/reports/baseline.json");
    std::fs::copy(scratch.path("sim/reports/latest.json"), &base).unwrap();
    let base = base.to_str().unwrap().to_owned();
    let with_base = [&args[..], &["--baseline", &base]].concat();

    // The same product again: no regression.
    let same = simulate(&scratch, &with_base, &[]);
    assert_eq!(same.code, 0, "{same:?}");
    assert!(
        same.stdout.contains("no significant regression"),
        "{}",
        same.stdout
    );

    // The assistant now claims the chores without logging them: every daily_chore run fails.
    let prompt = scratch.read("sim/prompts/coach_system_prompt.md");
    scratch.write(
        "sim/prompts/coach_system_prompt.md",
        &format!("{prompt}\nCLAIM_WITHOUT_TOOLS\n"),
    );
    let worse = simulate(&scratch, &with_base, &[]);
    assert_eq!(worse.code, 1, "{worse:?}");
    assert!(worse.stdout.contains("REGRESSED"), "{}", worse.stdout);
    assert!(
        worse
            .stdout
            .contains("scenario `daily_chore`: pass rate fell 100 points"),
        "{}",
        worse.stdout
    );
    let report: Value = serde_json::from_str(&scratch.read("sim/reports/latest.json")).unwrap();
    assert_eq!(report["baseline"]["passed"], false);
    assert!(
        scratch
            .read("sim/reports/latest.md")
            .contains("**Compared with ")
    );

    // A rubric changed: the judge's version differs and the baseline is refused (exit 2,
    // nothing run), unless the user accepts it.
    let suite = scratch.read("sim/suite.yaml");
    scratch.write(
        "sim/suite.yaml",
        &suite.replacen("rubric: |", "rubric: |\n      Be strict.", 1),
    );
    let before = provider.stats.requests.load(Ordering::SeqCst);
    let refused = simulate(&scratch, &with_base, &[]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused.stderr.contains("--allow-judge-change"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        provider.stats.requests.load(Ordering::SeqCst),
        before,
        "no model call"
    );
    let allowed = simulate(
        &scratch,
        &[&with_base[..], &["--allow-judge-change"]].concat(),
        &[],
    );
    assert_eq!(allowed.code, 1, "{allowed:?}");
    assert!(
        allowed.stdout.contains("was judged differently"),
        "{}",
        allowed.stdout
    );
}
