//! The optimizer's first objective on the real binary: a prompt that makes the target answer
//! with a wrong number that contains the expected one ("15 g" for "5 g"), or with a fragment
//! that lacks its number ("g" for "400 g"), scores nothing under the default rule (the spec's
//! substring rule counted it correct); a misspelt model is refused before anything is written;
//! an agent with no variants is named; a model declared free can be budgeted.

use std::time::Duration;

use crate::optimize::provider;
use crate::support::Scratch;

const ENV: [(&str, &str); 1] = [("OPENAI_API_KEY", "test-key")];

/// One agent, `solver`, with three variants that all reach the answer: `v1` writes it with a
/// `1` in front ([[NOISY]]), `v2` only its last word ([[TERSE]]), `v3` as it is. The production
/// prompt never reaches it.
fn project(url: &str, extra: &str) -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let s = Scratch::copy_of(dir.path());
    s.write("prompts/solver_system_prompt.txt", "You solve recipes.\n");
    s.write(
        "prompt_variations/solver/v1.txt",
        "[[GOOD]] [[NOISY]] You solve recipes, with flair.\n",
    );
    s.write(
        "prompt_variations/solver/v2.txt",
        "[[GOOD]] [[TERSE]] You solve recipes in one word.\n",
    );
    s.write(
        "prompt_variations/solver/v3.txt",
        "[[GOOD]] You solve recipes and give the amount with its unit.\n",
    );
    let line = |q: &str, key: &str| {
        format!("{{\"question\": \"{q} [key:{key}]\", \"files\": [], \"answer\": \"{key}\"}}\n")
    };
    s.write(
        "cases/opt.jsonl",
        &[
            line("Salt for half the dough?", "5 g"),
            line("Flour for two loaves?", "400 g"),
            line("Sugar for the cake?", "300 g"),
            line("Yeast for one loaf?", "7 g"),
        ]
        .concat(),
    );
    s.write(
        "cases/eval.jsonl",
        &[
            line("Butter for the crust?", "200 g"),
            line("Milk for the batter?", "250 ml"),
            line("Oil for the pan?", "15 ml"),
        ]
        .concat(),
    );
    s.write(
        "assay.toml",
        &format!(
            "[providers]\nopenai_base_url = \"{url}/v1\"\nmax_retries = 1\n\n[optimize]\nmodel = \"openai/fake-agent\"\ngrader_model = \"openai/fake-grader\"\nchain = [\"solver\"]\n{extra}"
        ),
    );
    s
}

fn optimize(s: &Scratch, name: &str, more: &[&str]) -> crate::support::Run {
    let mut a = vec![
        "optimize",
        "--experiment-name",
        name,
        "--optimization-trials",
        "4",
        "--optimization-test-cases",
        "cases/opt.jsonl",
        "--evaluation-test-cases",
        "cases/eval.jsonl",
        "--json",
    ];
    a.extend_from_slice(more);
    s.assay_env(&a, &ENV)
}

fn correct_of(report: &serde_json::Value, variant: u64) -> u64 {
    report["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["params"]["solver"] == variant && t["outcome"] == "complete")
        .unwrap_or_else(|| panic!("no complete trial of variant {variant}: {report}"))["metrics"]
        ["factually_correct_count"]
        .as_u64()
        .unwrap()
}

#[test]
fn wrong_numbers_and_fragments_score_nothing_and_the_search_prefers_the_right_answers() {
    let p = provider(Duration::ZERO);
    let s = project(&p.url, "");
    let run = optimize(&s, "default", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let r = run.json();
    // Exhaustive over 4 combinations: every variant is scored.
    assert_eq!(
        correct_of(&r, 1),
        0,
        "[[NOISY]] answers \"15 g\" for \"5 g\""
    );
    assert_eq!(
        correct_of(&r, 2),
        0,
        "[[TERSE]] answers \"g\" for \"400 g\""
    );
    assert_eq!(correct_of(&r, 3), 4);
    assert_eq!(r["best_params"]["solver"], 3, "{}", r["best_params"]);
    assert_eq!(r["evaluation"]["metrics"]["factually_correct_count"], 3);
    assert_eq!(r["correctness"], "normalised");
    // The fake grader calls "15 g" right (it contains "5 g"): every such case is listed as a
    // disagreement, with the rule's reason.
    let d = r["disagreements"].as_array().unwrap();
    assert!(
        d.iter().any(|d| d["output"] == "15 g"
            && d["expected"] == "5 g"
            && d["check"] == false
            && d["grader"] == true
            && d["why"] == "15 g is not 5 g"),
        "{d:#?}"
    );
    let md = s.read("experiments/default/report.md");
    assert!(
        md.contains("## Where the correctness rule and the grader disagree"),
        "{md}"
    );
    assert!(md.contains("15 g is not 5 g"), "{md}");
    assert!(
        md.contains("Correct answers counted by: normalised"),
        "{md}"
    );
    let html = s.read("experiments/default/report.html");
    assert!(html.contains("id=\"disagreements\""));

    // The spec's substring rule, kept for comparison, counts both distortions correct.
    let seed = project(&p.url, "correctness = \"seed\"\n");
    let run = optimize(&seed, "seed", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let r = run.json();
    assert_eq!(correct_of(&r, 1), 4);
    assert_eq!(correct_of(&r, 2), 4);
    // NOISY (trial 1) and the right answers tie on both objectives under the seed rule, and
    // the report says how the tie was broken.
    assert_eq!(r["best_params"]["solver"], 1, "{}", r["best_params"]);
    let tie = r["tie"].as_str().unwrap();
    assert!(tie.contains("tie") && tie.contains("earliest"), "{tie}");
}

#[test]
fn a_case_may_name_its_own_rule_and_a_bad_one_is_refused_by_line_and_field() {
    let p = provider(Duration::ZERO);
    let s = project(&p.url, "");
    s.write(
        "cases/opt.jsonl",
        "{\"question\": \"Salt? [key:5 g]\", \"files\": [], \"answer\": \"5 g\", \"correctness\": \"regex\", \"pattern\": \"^1?5 g$\"}\n{\"question\": \"Flour? [key:400 g]\", \"files\": [], \"answer\": \"400 g\"}\n",
    );
    let run = optimize(&s, "percase", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    // The regex accepts NOISY's "15 g" on line 1; the default rule refuses "1400 g" on line 2.
    assert_eq!(correct_of(&run.json(), 1), 1);

    for (line, message) in [
        (
            "{\"question\": \"q [key:5 g]\", \"files\": [], \"answer\": \"5 g\", \"correctness\": \"fuzzy\"}\n",
            "opt.jsonl:1: correctness: unknown correctness rule `fuzzy`",
        ),
        (
            "{\"question\": \"q [key:5 g]\", \"files\": [], \"answer\": \"5 g\", \"correctness\": \"numerc\"}\n",
            "opt.jsonl:1: correctness: unknown correctness rule `numerc` (did you mean `numeric`?)",
        ),
        (
            "{\"question\": \"q [key:5 g]\", \"files\": [], \"answer\": \"5 g\", \"corectness\": \"exact\"}\n",
            "opt.jsonl:1: unknown field `corectness` (did you mean `correctness`?)",
        ),
        (
            "{\"question\": \"q [key:5 g]\", \"files\": [], \"answer\": \"5 g\", \"correctness\": \"regex\"}\n",
            "opt.jsonl:1: `correctness` is `regex` but the case has no `pattern`",
        ),
        (
            "{\"question\": \"q [key:5 g]\", \"files\": [], \"answer\": \"5 g\", \"correctness\": \"regex\", \"pattern\": \"(\"}\n",
            "opt.jsonl:1: `pattern`: not a regular expression",
        ),
        (
            "{\"question\": \"q [key:Paris]\", \"files\": [], \"answer\": \"Paris\", \"correctness\": \"numeric\"}\n",
            "opt.jsonl:1: `correctness` is `numeric` but the expected answer `Paris` states no number",
        ),
    ] {
        s.write("cases/opt.jsonl", line);
        let run = optimize(&s, "bad", &[]);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains(message), "{message}\n{run:?}");
        assert!(!s.path("experiments/bad").exists());
    }
}

#[test]
fn a_misspelt_grader_is_refused_before_anything_is_written_and_the_name_stays_free() {
    let p = provider(Duration::ZERO);
    let s = project(&p.url, "");
    s.edit(
        "assay.toml",
        "grader_model = \"openai/fake-grader\"",
        "grader_model = \"openai/fake-grder\"",
    );
    let run = optimize(&s, "exp", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "[optimize] grader_model: the provider has no model `fake-grder` (did you mean `fake-grader`?)"
        ),
        "{run:?}"
    );
    assert!(run.stderr.contains("nothing was written"), "{run:?}");
    assert!(!run.stderr.contains("estimate before any call"), "{run:?}");
    assert!(!s.path("experiments").exists(), "{:?}", s.results());
    let calls = p.stats.grader.load(std::sync::atomic::Ordering::SeqCst)
        + p.stats.agent.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(calls, 0, "no chat call before the preflight passed");
    s.edit(
        "assay.toml",
        "grader_model = \"openai/fake-grder\"",
        "grader_model = \"openai/fake-grader\"",
    );
    let run = optimize(&s, "exp", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    // A used name is refused before anything is estimated.
    let again = optimize(&s, "exp", &[]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(again.stderr.contains("already exists"), "{again:?}");
    assert!(
        !again.stderr.contains("estimate before any call"),
        "{again:?}"
    );
}

#[test]
fn an_agent_without_variants_is_named_unless_held_fixed_on_purpose() {
    let p = provider(Duration::ZERO);
    let s = project(&p.url, "chain = [\"planner\", \"solver\"]\n");
    s.edit("assay.toml", "chain = [\"solver\"]\n", "");
    s.write("prompts/planner_system_prompt.txt", "You plan.\n");
    std::fs::create_dir_all(s.path("prompt_variations/planner")).unwrap();
    let run = optimize(&s, "exp", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("prompt_variations/planner")
            && run
                .stderr
                .contains("agent `planner` has no prompt variants: the folder is empty"),
        "{run:?}"
    );
    std::fs::remove_dir(s.path("prompt_variations/planner")).unwrap();
    let run = optimize(&s, "exp", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("the folder does not exist"), "{run:?}");
    assert!(!s.path("experiments").exists());
    s.edit(
        "assay.toml",
        "[optimize]\n",
        "[optimize]\nfixed_agents = [\"planner\"]\n",
    );
    let run = optimize(&s, "exp", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("agent `planner` is held at its production prompt"),
        "{run:?}"
    );
}

#[test]
fn a_model_declared_free_can_be_budgeted() {
    let p = provider(Duration::ZERO);
    let s = project(&p.url, "");
    let run = optimize(&s, "unpriced", &["--budget", "1"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("no known price"), "{run:?}");
    assert!(run.stderr.contains("[providers.prices]"), "{run:?}");
    s.edit(
        "assay.toml",
        "max_retries = 1\n",
        "max_retries = 1\n\n[providers.prices]\n\"openai/fake-agent\" = 0\n\"openai/fake-grader\" = { input = 0, output = 0 }\n",
    );
    let run = optimize(&s, "free", &["--budget", "1"]);
    assert_eq!(run.code, 0, "{run:?}");
    let r = run.json();
    assert_eq!(r["usage"]["grader"]["cost_usd"], 0.0, "{}", r["usage"]);
    assert_eq!(r["estimate"]["grader"]["cost_usd"], 0.0);
}

#[test]
fn a_target_with_a_syntax_error_fails_the_dry_check_with_exit_2() {
    let p = provider(Duration::ZERO);
    let s = project(
        &p.url,
        "target = \"command\"\ncommand = [\"python3\", \"-c\", \"print(\"]\n",
    );
    s.edit("assay.toml", "chain = [\"solver\"]\n", "");
    let run = optimize(&s, "exp", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("dry check"), "{run:?}");
    assert!(run.stderr.contains("SyntaxError"), "{run:?}");
    assert!(!s.path("experiments").exists());
}
