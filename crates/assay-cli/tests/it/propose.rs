//! `assay optimize --propose-rounds` end to end against the scripted server
//! (`examples/prompt_provider.rs`): one class of cases (`[needs:UNITS]`) is answered right only
//! when the finalizer's prompt carries `[[UNITS]]`, which no hand-written prompt does; the
//! scripted proposer writes it only when it is shown a failing case of that class. Evaluation
//! questions are marked `[held-out]`: the server answers 500 and counts a leak if one reaches
//! the proposer.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::optimize::{Provider, provider, trials_of};
use crate::support::Scratch;

const ENV: [(&str, &str); 1] = [("OPENAI_API_KEY", "test-key")];

fn line(q: &str, key: &str, d: u32) -> String {
    format!("{{\"question\": \"{q} [key:{key}] [d:{d}]\", \"files\": [], \"answer\": \"{key}\"}}\n")
}

/// Three agents with three prompts each; the finalizer's all ask for `FINAL ANSWER:`.
/// `units_in_optimization`: whether the optimization cases include `[needs:UNITS]` ones.
fn project(p: &Provider, proposer: &str, units_in_optimization: bool) -> Scratch {
    project_of(
        p,
        proposer,
        units_in_optimization,
        ["planner", "expert", "finalizer"],
        "agents = [\"finalizer\"]\n",
    )
}

/// [`project`] with the chain `chain` (its last agent writes the final answer) and the
/// `[optimize.propose]` lines `propose` (besides the model).
fn project_of(
    p: &Provider,
    proposer: &str,
    units_in_optimization: bool,
    chain: [&str; 3],
    propose: &str,
) -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let s = Scratch::copy_of(dir.path());
    let last = chain[2];
    for a in chain {
        let tail = if a == last {
            " End with FINAL ANSWER: <answer>."
        } else {
            ""
        };
        s.write(
            &format!("prompts/{a}_system_prompt.txt"),
            &format!("You are the {a}. Be brief.{tail}\n"),
        );
        s.write(
            &format!("prompt_variations/{a}/v1.txt"),
            &format!("You are the {a}. Be thorough.{tail}\n"),
        );
        s.write(
            &format!("prompt_variations/{a}/v2.txt"),
            &format!("[[GOOD]] You are the {a}. Check every fact.{tail}\n"),
        );
    }
    let mut opt = vec![
        line("Capital of France?", "Paris", 3),
        line("Largest planet?", "Jupiter", 1),
        line("Author of Hamlet?", "Shakespeare", 2),
        line("Chemical symbol of gold?", "Au", 3),
    ];
    if units_in_optimization {
        opt.extend([
            line("[needs:UNITS] Length of a marathon?", "42.195 km", 1),
            line(
                "[needs:UNITS] Boiling point of water at sea level?",
                "100 degrees C",
                1,
            ),
            line("[needs:UNITS] Mass of a litre of water?", "1 kg", 1),
        ]);
    }
    s.write("cases/opt.jsonl", &opt.concat());
    let eval = [
        line("[held-out] Red planet?", "Mars", 1),
        line("[held-out] Smallest prime?", "2", 2),
        line("[held-out] [needs:UNITS] Height of Everest?", "8849 m", 1),
        line("[held-out] [needs:UNITS] Speed of light?", "299792 km/s", 1),
        line(
            "[held-out] [needs:UNITS] Length of a football pitch?",
            "105 m",
            1,
        ),
        line(
            "[held-out] [needs:UNITS] Weight of a blue whale?",
            "150 tonnes",
            1,
        ),
        line(
            "[held-out] [needs:UNITS] Depth of the Mariana Trench?",
            "10994 m",
            1,
        ),
        line(
            "[held-out] [needs:UNITS] Body temperature?",
            "37 degrees C",
            1,
        ),
    ];
    s.write("cases/eval.jsonl", &eval.concat());
    s.write(
        "assay.toml",
        &format!(
            "[providers]\nopenai_base_url = \"{}/v1\"\nmax_retries = 1\n\n[optimize]\nmodel = \"openai/fake-agent\"\ngrader_model = \"openai/fake-grader\"\nchain = [\"{}\", \"{}\", \"{last}\"]\n\n[optimize.propose]\nmodel = \"openai/{proposer}\"\n{propose}",
            p.url, chain[0], chain[1]
        ),
    );
    s
}

fn args<'a>(name: &'a str, rounds: Option<&'a str>) -> Vec<&'a str> {
    let mut a = vec![
        "optimize",
        "--experiment-name",
        name,
        "--optimization-trials",
        "27",
        "--optimization-test-cases",
        "cases/opt.jsonl",
        "--evaluation-test-cases",
        "cases/eval.jsonl",
        "--json",
    ];
    if let Some(r) = rounds {
        a.extend(["--propose-rounds", r]);
    }
    a
}

fn optimize(s: &Scratch, a: &[&str]) -> Value {
    let run = s.assay_env(a, &ENV);
    assert_eq!(run.code, 0, "{run:?}");
    run.json()
}

#[test]
fn a_proposal_shown_the_failing_class_is_found_and_beats_the_hand_written_prompts_held_out() {
    let p = provider(Duration::ZERO);
    let s = project(&p, "fake-proposer", true);
    let r = optimize(&s, &args("prop", Some("1")));
    // The proposal: for the finalizer, from the best hand-written combination, shown the
    // three failing [needs:UNITS] cases; accepted and scored as trial 27.
    let proposals = r["proposals"].as_array().unwrap();
    assert_eq!(proposals.len(), 1, "{proposals:?}");
    let prop = &proposals[0];
    assert_eq!(prop["agent"], "finalizer");
    assert_eq!(prop["status"], "accepted");
    assert_eq!(prop["index"], 3);
    assert_eq!(prop["trial"], 27);
    assert_eq!(prop["cases_shown"], serde_json::json!([5, 6, 7]));
    assert_eq!(prop["minibatch"][0][0], 0);
    assert_eq!(prop["minibatch"][1][0], 3);
    assert!(prop["text"].as_str().unwrap().contains("[[UNITS]]"));
    assert_eq!(
        r["best_params"],
        serde_json::json!({"expert": 2, "finalizer": 3, "planner": 2})
    );
    assert_eq!(r["trials"][27]["origin"], "proposed");
    assert_eq!(r["agents"]["finalizer"], 4);
    // Held out: 8/8 against the best hand-written combination's 2/8 — significant.
    assert_eq!(r["evaluation"]["metrics"]["factually_correct_count"], 8);
    let hand = &r["hand_written"];
    assert_eq!(hand["verdict"], "better", "{hand}");
    assert_eq!(
        hand["params"],
        serde_json::json!({"expert": 2, "finalizer": 2, "planner": 2})
    );
    assert_eq!(hand["evaluation"]["metrics"]["factually_correct_count"], 2);
    // Provenance: the prompt file and its sidecar, named in the report.
    let file = "prompt_variations/finalizer/proposed/prop-r1-1.txt";
    assert_eq!(prop["file"], file);
    assert!(s.read(file).contains("[[UNITS]]"));
    let sidecar = s.json("prompt_variations/finalizer/proposed/prop-r1-1.json");
    assert_eq!(sidecar["parent_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(sidecar["model"], "openai/fake-proposer");
    assert_eq!(sidecar["round"], 1);
    assert!(sidecar["reasoning"].as_str().unwrap().contains("unit"));
    assert!(
        sidecar["questions_shown"][0]
            .as_str()
            .unwrap()
            .contains("[needs:UNITS]")
    );
    let md = s.read("experiments/prop/report.md");
    assert!(
        md.contains("## Proposals") && md.contains("proposal r1-1"),
        "{md}"
    );
    assert!(md.contains("beat the best hand-written"), "{md}");
    let html = s.read("experiments/prop/report.html");
    assert!(html.contains("id=\"proposals\"") && html.contains("proposal r1-1"));
    // Cost: estimated, accounted as its own role; the evaluation never reached the proposer.
    assert_eq!(r["estimate"]["proposer"]["calls"], 1);
    assert_eq!(r["usage"]["proposer"]["calls"], 1);
    assert_eq!(p.stats.proposer.load(Ordering::SeqCst), 1);
    assert_eq!(p.stats.leaks.load(Ordering::SeqCst), 0);
    // A later experiment reads the proposal like any variant; its proposer call is cached.
    let later = optimize(&s, &args("later", Some("1")));
    assert_eq!(later["agents"]["finalizer"], 4);
    assert_eq!(
        later["prompt_files"]["finalizer"][3],
        "prompt_variations/finalizer/proposed/prop-r1-1.txt"
    );
    let run = s.assay_env(&["optimize", "--help"], &ENV);
    assert!(run.stdout.contains("--propose-rounds"), "{run:?}");
}

#[test]
fn proposals_that_are_empty_copies_garbage_or_shown_only_passing_cases_change_nothing() {
    let p = provider(Duration::ZERO);
    // The reference: no proposals.
    let plain = optimize(&project(&p, "fake-proposer", true), &args("x", None));
    assert!(plain.get("hand_written").is_none());
    let cases = [
        ("fake-proposer-empty", true, "rejected", "empty"),
        (
            "fake-proposer-copy",
            true,
            "rejected",
            "a copy of finalizer's prompt #2",
        ),
        ("fake-proposer-garbage", true, "rejected", "`FINAL ANSWER:`"),
    ];
    for (model, units, status, why) in cases {
        let s = project(&p, model, units);
        let r = optimize(&s, &args("x", Some("1")));
        let prop = &r["proposals"][0];
        assert_eq!(prop["status"], status, "{model}: {prop}");
        assert!(
            prop["reason"].as_str().unwrap().contains(why),
            "{model}: {prop}"
        );
        assert_eq!(
            r["trials"].as_array().unwrap().len(),
            27,
            "{model}: not a trial"
        );
        assert_eq!(r["best_params"], plain["best_params"], "{model}");
        assert_eq!(
            r["evaluation"]["metrics"], plain["evaluation"]["metrics"],
            "{model}"
        );
        assert_eq!(r["hand_written"]["verdict"], "hand_written", "{model}");
        assert!(
            !s.path("prompt_variations/finalizer/proposed/x-r1-1.txt")
                .exists(),
            "{model}: no prompt file for a refused proposal"
        );
        assert!(
            s.path("prompt_variations/finalizer/proposed/x-r1-1.json")
                .exists()
        );
    }
    // Without failing [needs:UNITS] cases among the optimization cases the proposer is shown
    // only passing ones: its rewrite does no better on them and is not scored further.
    let plain = optimize(&project(&p, "fake-proposer", false), &args("y", None));
    let s = project(&p, "fake-proposer", false);
    let r = optimize(&s, &args("y", Some("2")));
    for prop in r["proposals"].as_array().unwrap() {
        assert_eq!(prop["status"], "not_better", "{prop}");
    }
    assert_eq!(r["trials"].as_array().unwrap().len(), 27);
    assert_eq!(r["best_params"], plain["best_params"]);
    assert_eq!(r["evaluation"]["metrics"], plain["evaluation"]["metrics"]);
    assert_eq!(p.stats.leaks.load(Ordering::SeqCst), 0);
}

#[test]
fn a_run_killed_in_a_proposal_round_resumes_to_the_same_proposals_and_best() {
    let p = provider(Duration::from_millis(25));
    let s = project(&p, "fake-proposer", true);
    let mut first = s.spawn(&args("kill", Some("2")), &ENV);
    let journal = s.path("experiments/kill/journal.jsonl");
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&journal).unwrap_or_default();
        if text.contains("\"kind\":\"proposal\"") || start.elapsed() > Duration::from_secs(180) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    first.kill().unwrap(); // SIGKILL, inside round 1
    first.wait().unwrap();
    let journal_text = std::fs::read_to_string(&journal).unwrap();
    assert!(journal_text.contains("\"kind\":\"proposal\""));
    assert!(
        !s.path("experiments/kill/report.json").exists(),
        "killed before the end"
    );
    let mut resume = args("kill", Some("2"));
    resume.push("--resume");
    let resumed = optimize(&s, &resume);
    let fresh = optimize(
        &project(&p, "fake-proposer", true),
        &args("kill", Some("2")),
    );
    let texts = |v: &Value| -> Vec<(Value, Value)> {
        v["proposals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["text"].clone(), p["status"].clone()))
            .collect()
    };
    assert_eq!(texts(&resumed), texts(&fresh));
    assert_eq!(resumed["proposals"].as_array().unwrap().len(), 2);
    assert_eq!(trials_of(&resumed), trials_of(&fresh));
    assert_eq!(resumed["best_params"], fresh["best_params"]);
    assert_eq!(
        resumed["evaluation"]["metrics"],
        fresh["evaluation"]["metrics"]
    );
    // Other proposal settings cannot resume this journal.
    let mut other = args("kill", Some("3"));
    other.push("--resume");
    let run = s.assay_env(&other, &ENV);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("proposal settings"), "{run:?}");
}

/// Issue 32: the failing class is fixed only by the last agent in name order (and in the chain),
/// so round-robin in name order would spend two rounds on the other two. The blame call names
/// the writer from the failing traces; its first proposal fixes the class.
#[test]
fn issue_32_blame_revises_the_agent_at_fault_within_two_rounds() {
    let p = provider(Duration::ZERO);
    let chain = ["analyst", "checker", "writer"];
    let s = project_of(&p, "fake-proposer", true, chain, "");
    let r = optimize(&s, &args("blame", Some("2")));
    let proposals = r["proposals"].as_array().unwrap();
    assert_eq!(proposals.len(), 2, "{proposals:?}");
    let first = &proposals[0];
    assert_eq!(first["agent"], "writer", "{first}");
    assert_eq!(first["status"], "accepted", "{first}");
    assert_eq!(first["chosen"]["rule"], "blame", "{first}");
    let votes = first["chosen"]["votes"].as_array().unwrap();
    assert_eq!(votes.len(), 3, "{first}");
    assert!(votes.iter().all(|v| v["agent"] == "writer"), "{first}");
    let why = first["chosen"]["why"].as_str().unwrap();
    assert!(
        why.contains("named first in 3 of 3 failing cases") && why.contains("lacks its unit"),
        "{why}"
    );
    assert!(
        r["best_params"]["writer"].as_u64().unwrap() >= 3,
        "{}",
        r["best_params"]
    );
    // Held out: the best hand-written combination's 2/8 rises to 8/8.
    let hand = &r["hand_written"];
    assert_eq!(
        hand["evaluation"]["metrics"]["factually_correct_count"], 2,
        "{hand}"
    );
    assert_eq!(r["evaluation"]["metrics"]["factually_correct_count"], 8);
    assert_eq!(hand["verdict"], "better", "{hand}");
    // Round 2 starts from a combination that fails no optimization case: nothing to blame,
    // and the record says so. One blame call in all; the estimate allows one a round.
    let second = &proposals[1]["chosen"];
    assert_eq!(second["rule"], "round_robin", "{second}");
    assert_eq!(
        second["why"],
        "round-robin fallback: the best combination fails no optimization case"
    );
    assert_eq!(p.stats.blame.load(Ordering::SeqCst), 1);
    assert_eq!(r["estimate"]["proposer"]["calls"], 4);
    assert_eq!(p.stats.leaks.load(Ordering::SeqCst), 0);
    // The report says why.
    let md = s.read("experiments/blame/report.md");
    assert!(md.contains("named first in 3 of 3 failing cases"), "{md}");
    let html = s.read("experiments/blame/report.html");
    assert!(html.contains("named first in 3 of 3 failing cases"));
}

/// Issue 32: a blame reply that never parses falls back to round-robin in chain order, and the
/// record says so; `selector = "all"` revises every agent in a round.
#[test]
fn issue_32_a_failed_blame_falls_back_to_round_robin_and_selector_all_revises_every_agent() {
    let p = provider(Duration::ZERO);
    let chain = ["analyst", "checker", "writer"];
    let s = project_of(&p, "fake-proposer-garbage", true, chain, "");
    let r = optimize(&s, &args("fallback", Some("1")));
    let chosen = &r["proposals"][0]["chosen"];
    assert_eq!(r["proposals"][0]["agent"], "analyst", "{chosen}");
    assert_eq!(chosen["rule"], "round_robin", "{chosen}");
    let why = chosen["why"].as_str().unwrap();
    assert!(
        why.starts_with("round-robin fallback: the blame call"),
        "{why}"
    );
    assert!(
        s.read("experiments/fallback/report.md")
            .contains("round-robin fallback")
    );

    let s = project_of(&p, "fake-proposer", true, chain, "selector = \"all\"\n");
    let r = optimize(&s, &args("all", Some("1")));
    let agents: Vec<&str> = r["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["analyst", "checker", "writer"]);
    for p in r["proposals"].as_array().unwrap() {
        assert_eq!(p["chosen"]["why"], "all agents (selector all)", "{p}");
    }
    assert_eq!(r["proposals"][2]["status"], "accepted");
    assert_eq!(r["evaluation"]["metrics"]["factually_correct_count"], 8);
}
