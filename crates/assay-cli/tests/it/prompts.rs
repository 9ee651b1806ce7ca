//! `assay prompts …`: the optimizer's prompt lists, promotion and rollback, on a scratch copy of
//! examples/gaia-mini.

use crate::data::{redact, refused_in, tree};
use crate::support::{Run, Scratch, assay, repo_path};

fn gaia() -> Scratch {
    Scratch::copy_of(&repo_path("examples/gaia-mini"))
}

fn prompts(p: &Scratch, args: &[&str]) -> Run {
    let mut full = vec!["prompts", "--project", p.root.to_str().unwrap()];
    full.extend_from_slice(args);
    assay(&full)
}

/// A finished experiment: the production prompts as baseline, two of them changed as the
/// optimized set.
fn with_experiment(p: &Scratch, name: &str) {
    for agent in [
        "planner",
        "researcher",
        "expert",
        "critic_planner",
        "critic_researcher",
        "critic_expert",
        "finalizer",
    ] {
        let file = format!("{agent}_system_prompt.txt");
        let text = p.read(&format!("prompts/{file}"));
        p.write(
            &format!("experiments/{name}/baseline_prompts/{file}"),
            &text,
        );
        let optimized = match agent {
            "finalizer" => p.read("prompt_variations/finalizer/v3.txt"),
            "researcher" => p.read("prompt_variations/researcher/v2.txt"),
            _ => text,
        };
        p.write(
            &format!("experiments/{name}/optimized_prompts/{file}"),
            &optimized,
        );
    }
}

fn refused(p: &Scratch, args: &[&str]) -> Run {
    refused_in(p, "prompts", args)
}

#[test]
fn list_shows_each_agents_prompts() {
    let p = gaia();
    let run = prompts(&p, &["list"]);
    assert_eq!(run.code, 0, "{run:?}");
    insta::assert_snapshot!("prompts_list", run.stdout);
    let json = prompts(&p, &["list", "--json"]).json();
    assert_eq!(json["combinations"], "16384");
    assert_eq!(json["agents"][0]["agent"], "critic_expert");
    assert_eq!(
        json["agents"][0]["prompts"][3]["file"],
        "prompt_variations/critic_expert/v3.txt"
    );
}

#[test]
fn promote_shows_a_diff_and_writes_only_with_yes() {
    let p = gaia();
    with_experiment(&p, "exp_001");
    let before = tree(&p.root);
    let dry = prompts(&p, &["promote", "exp_001"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert_eq!(tree(&p.root), before, "nothing written without --yes");
    insta::assert_snapshot!("prompts_promote_dry", redact(&dry.stdout, &p.root));

    let finalizer_before = p.read("prompts/finalizer_system_prompt.txt");
    let applied = prompts(&p, &["promote", "exp_001", "--yes"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    insta::assert_snapshot!("prompts_promote_yes", redact(&applied.stdout, &p.root));
    assert_eq!(
        p.read("prompts/finalizer_system_prompt.txt"),
        p.read("prompt_variations/finalizer/v3.txt")
    );
    // The replaced prompts are in the backup.
    let backups: Vec<_> = std::fs::read_dir(p.path(".assay/prompt-backups"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(backups.len(), 1);
    assert_eq!(
        std::fs::read_to_string(backups[0].join("finalizer_system_prompt.txt")).unwrap(),
        finalizer_before
    );
    assert_eq!(std::fs::read_dir(&backups[0]).unwrap().count(), 7);
    assert!(!p.path(".assay/lock.json").exists());

    // Promoting again changes nothing.
    let again = prompts(&p, &["promote", "exp_001", "--yes"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("nothing to change"), "{again:?}");

    // `rollback baseline`: the baseline of the experiment promoted last.
    let dry = prompts(&p, &["rollback", "baseline"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout
            .starts_with("rollback exp_001: 2 of 7 prompts change"),
        "{dry:?}"
    );
    assert!(dry.stdout.contains("--yes"), "{dry:?}");
    let back = prompts(&p, &["rollback", "baseline", "--yes"]);
    assert_eq!(back.code, 0, "{back:?}");
    assert_eq!(
        p.read("prompts/finalizer_system_prompt.txt"),
        finalizer_before
    );
    let history = p.read(".assay/prompt-history.jsonl");
    assert_eq!(history.lines().count(), 2, "{history}");
}

#[test]
fn rollback_baseline_needs_a_promotion() {
    let p = gaia();
    with_experiment(&p, "exp_001");
    let run = refused(&p, &["rollback", "baseline"]);
    assert!(run.stderr.contains("no promotion recorded"), "{run:?}");
    assert!(run.stderr.contains("experiments: exp_001"), "{run:?}");
}

#[test]
fn an_unknown_experiment_is_refused() {
    let p = gaia();
    let run = refused(&p, &["promote", "exp_404", "--yes"]);
    assert!(run.stderr.contains("no experiment `exp_404`"), "{run:?}");
}

#[test]
fn an_empty_prompt_file_is_refused() {
    let p = gaia();
    p.write("prompt_variations/expert/v2.txt", "  \n\n");
    let run = refused(&p, &["list"]);
    assert!(
        run.stderr
            .contains("prompt_variations/expert/v2.txt: prompt file is empty (or only whitespace)"),
        "{run:?}"
    );
    // The same in an experiment's prompts: promotion writes nothing.
    let p = gaia();
    with_experiment(&p, "exp_001");
    p.write(
        "experiments/exp_001/optimized_prompts/planner_system_prompt.txt",
        "",
    );
    let run = refused(&p, &["promote", "exp_001", "--yes"]);
    assert!(
        run.stderr
            .contains("optimized_prompts/planner_system_prompt.txt: prompt file is empty"),
        "{run:?}"
    );
}

#[test]
fn an_unknown_agent_in_variants_is_refused() {
    let p = gaia();
    p.write("prompt_variations/summarizer/v1.txt", "Summarize.");
    let run = refused(&p, &["list"]);
    assert!(
        run.stderr.contains(
            "prompt_variations/summarizer: unknown agent `summarizer` in variants: there is no prompts/summarizer_system_prompt.txt"
        ),
        "{run:?}"
    );
}
