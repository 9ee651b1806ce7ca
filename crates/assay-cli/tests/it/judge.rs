//! `assay judge` as a newcomer uses it: from inside the labels' folder, with a bare file name;
//! a template written with `--output` or a shell redirect; labels half filled in; a judge that
//! changes its mind between samples.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::sim_provider::Behaviour;
use crate::simulate::{env_with, project, provider};
use crate::support::{Run, Scratch};

#[test]
fn agree_takes_a_bare_labels_file_name_from_inside_its_folder() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let root = scratch.root().to_str().unwrap().to_owned();
    let env = env_with(&[]);
    let out = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args([
            "judge",
            "agree",
            "judge_labels.yaml",
            "--model",
            "anthropic/judge",
            "--project",
            &root,
        ])
        .current_dir(scratch.path("sim/labels"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stderr.contains("empty path"), "{stderr}");
    assert!(stdout.contains("against 6 labelled item(s)"), "{stdout}");
}

/// Runs the binary in `cwd`, its stdout into `stdout_to` when given (a shell's `>`).
fn assay_in(cwd: &Path, args: &[&str], stdout_to: Option<&Path>) -> Run {
    let env = env_with(&[]);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_assay"));
    cmd.args(args)
        .current_dir(cwd)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1");
    if let Some(file) = stdout_to {
        cmd.stdout(Stdio::from(std::fs::File::create(file).unwrap()));
    }
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A simulation of two scenarios against the scripted provider, saved in `sim/reports/`;
/// returns the stamped report's file name (`latest.json` is its copy).
fn simulated(scratch: &Scratch) -> String {
    let root = scratch.root().to_str().unwrap().to_owned();
    let run = assay_in(
        scratch.root(),
        &[
            "simulate",
            &root,
            "--model",
            "anthropic/coach-under-test",
            "--simulator-model",
            "anthropic/scout-sim",
            "--evaluator-model",
            "anthropic/judge",
            "--scenarios",
            "off_topic,goal_change",
        ],
        None,
    );
    assert!(run.code <= 1, "{run:?}");
    let mut stamped: Vec<String> = std::fs::read_dir(scratch.path("sim/reports"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("report_") && Path::new(n).extension() == Some("json".as_ref()))
        .collect();
    assert_eq!(stamped.len(), 1, "{stamped:?}");
    stamped.pop().unwrap()
}

/// A template with a score given to its first run only.
fn score_first_run(template: &str) -> String {
    template.replacen(
        "requirement_accuracy:    # 0-10",
        "requirement_accuracy: 8    # 0-10",
        1,
    )
}

/// Issue 27: a template written with `--output` (into a folder it makes) or with a shell
/// redirect names a report `agree` finds, from wherever it is run; `latest.json` is named by
/// the stamped report it copies; a report in neither place is an error naming both.
#[test]
fn template_paths_resolve_wherever_the_labels_file_lands() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let stamped = simulated(&scratch);
    let root = scratch.root().to_str().unwrap().to_owned();
    let agree = |cwd: &Path, labels: &str, project: &str| {
        assay_in(
            cwd,
            &[
                "judge",
                "agree",
                labels,
                "--model",
                "anthropic/judge",
                "--project",
                project,
            ],
            None,
        )
    };

    // --output, from the project folder, into a folder that does not exist yet.
    let out = assay_in(
        scratch.root(),
        &[
            "judge",
            "template",
            "sim/reports/latest.json",
            "--output",
            "sim/labels/mine/labels.yaml",
        ],
        None,
    );
    assert_eq!(out.code, 0, "{out:?}");
    let text = scratch.read("sim/labels/mine/labels.yaml");
    assert!(
        text.contains(&format!("\nreport: ../../reports/{stamped}\n")),
        "relative to the labels file's folder, the stamped report: {text}"
    );
    assert!(text.contains("Given latest.json"), "{text}");
    assert!(text.contains("#   ../../reports/transcripts/"), "{text}");
    scratch.write("sim/labels/mine/labels.yaml", &score_first_run(&text));
    let absolute = scratch
        .path("sim/labels/mine/labels.yaml")
        .to_str()
        .unwrap()
        .to_owned();
    for (cwd, labels, project) in [
        (
            scratch.root().to_owned(),
            "sim/labels/mine/labels.yaml",
            ".",
        ),
        (scratch.path("sim/labels/mine"), "labels.yaml", "../../.."),
        (std::env::temp_dir(), absolute.as_str(), root.as_str()),
    ] {
        let run = agree(&cwd, labels, project);
        assert_eq!(run.code, 0, "from {}: {run:?}", cwd.display());
        assert!(run.stdout.contains("against 1 labelled item(s)"), "{run:?}");
        assert!(run.stdout.contains("1 item unscored, skipped"), "{run:?}");
    }

    // A shell redirect, from the sim/ folder: the path is the project folder's.
    let out = assay_in(
        &scratch.path("sim"),
        &[
            "judge",
            "template",
            "reports/latest.json",
            "--project",
            "..",
        ],
        Some(&scratch.path("sim/labels.yaml")),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let text = scratch.read("sim/labels.yaml");
    assert!(
        text.contains(&format!("\nreport: sim/reports/{stamped}\n")),
        "relative to the project folder: {text}"
    );
    scratch.write("sim/labels.yaml", &score_first_run(&text));
    for (cwd, labels, project) in [
        (scratch.root().to_owned(), "sim/labels.yaml", "."),
        (scratch.path("sim"), "labels.yaml", ".."),
    ] {
        let run = agree(&cwd, labels, project);
        assert_eq!(run.code, 0, "from {}: {run:?}", cwd.display());
        assert!(run.stdout.contains("against 1 labelled item(s)"), "{run:?}");
    }

    // A report in neither place: exit 2, naming the file and both paths tried.
    scratch.edit(
        "sim/labels.yaml",
        &format!("report: sim/reports/{stamped}"),
        "report: sim/reports/gone.json",
    );
    let run = agree(scratch.root(), "sim/labels.yaml", ".");
    assert_eq!(run.code, 2, "{run:?}");
    for needle in [
        "labels.yaml",
        "report: `sim/reports/gone.json` not found",
        "looked beside the labels file",
        "sim/sim/reports/gone.json",
        "in the project folder",
    ] {
        assert!(run.stderr.contains(needle), "{needle}: {}", run.stderr);
    }
}

/// Issue 27: items left empty are skipped and counted (console and JSON); nothing scored is
/// an error naming the file; a score given but wrong stays an error naming file, item, field.
#[test]
fn unscored_items_are_skipped_and_wrong_scores_are_errors() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    simulated(&scratch);
    let template = assay_in(
        scratch.root(),
        &["judge", "template", "sim/reports/latest.json"],
        None,
    );
    assert_eq!(template.code, 0, "{template:?}");
    let agree = |text: &str, json: bool| {
        scratch.write("sim/labels.yaml", text);
        let mut args = vec![
            "judge",
            "agree",
            "sim/labels.yaml",
            "--model",
            "anthropic/judge",
        ];
        if json {
            args.push("--json");
        }
        assay_in(scratch.root(), &args, None)
    };

    let none = agree(&template.stdout, false);
    assert_eq!(none.code, 2, "{none:?}");
    assert!(
        none.stderr.contains("labels.yaml")
            && none.stderr.contains("none of the 2 item(s) is scored"),
        "{}",
        none.stderr
    );

    let one = score_first_run(&template.stdout);
    let run = agree(&one, true);
    assert_eq!(run.code, 0, "{run:?}");
    let a = run.json();
    assert_eq!(
        (a["items"].as_u64(), a["unscored"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(a["per_item"].as_array().unwrap().len(), 1);

    let first = one
        .lines()
        .find_map(|l| l.strip_prefix("  - run: "))
        .unwrap()
        .to_owned();
    for (from, to, needles) in [
        (
            "requirement_accuracy: 8 ",
            "requirement_accuracy: 11 ",
            vec![
                "items[0]",
                &first,
                "scores.requirement_accuracy: 11 is not on the criterion's scale",
            ],
        ),
        (
            "requirement_accuracy: 8 ",
            "requirement_accuracy: high ",
            vec!["items[0]", "scores", "requirement_accuracy"],
        ),
        (
            "requirement_accuracy: 8 ",
            "requirement_acuracy: 8 ",
            vec![
                "items[0]",
                &first,
                "unknown criterion `requirement_acuracy`",
            ],
        ),
        (
            "    verdict:    #",
            "    verdict: maybe    #",
            vec!["items[0]", &first, "verdict: `maybe` is not pass or fail"],
        ),
    ] {
        let text = one.replacen(from, to, 1);
        assert_ne!(text, one, "{from}");
        let run = agree(&text, false);
        assert_eq!(run.code, 2, "{to}: {run:?}");
        for needle in needles {
            assert!(
                run.stderr.contains("labels.yaml") && run.stderr.contains(needle),
                "{to}: {needle}: {}",
                run.stderr
            );
        }
    }
}

/// The suite's criteria, in its order.
fn suite_criteria(scratch: &Scratch) -> Vec<String> {
    scratch
        .read("sim/suite.yaml")
        .lines()
        .filter_map(|l| l.strip_prefix("  - id: "))
        .map(|id| id.trim().to_owned())
        .collect()
}

/// Issue 27: a judge asked three times that changes its mind on chosen items (their
/// transcripts say FICKLE: the scripted judge fails them in every resample): exactly those
/// items are uncertain, in the console and in --json, kept out of too lenient and too strict;
/// each criterion's spread is reported; the criteria keep the suite's order.
#[test]
fn a_judge_that_flips_chosen_items_names_exactly_those_uncertain() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let chosen = ["off_topic-good", "counselor_prep-email"];
    let mut uncertain = Vec::new();
    for name in chosen {
        let rel = format!("sim/labels/transcripts/{name}.json");
        let t: Value = serde_json::from_str(&scratch.read(&rel)).unwrap();
        uncertain.push(format!(
            "{}#{}",
            t["scenario_id"].as_str().unwrap(),
            t["repeat"]
        ));
        scratch.edit(&rel, "\"content\": \"", "\"content\": \"FICKLE ");
    }
    let labels = scratch.path("sim/labels/judge_labels.yaml");
    let labels = labels.to_str().unwrap();
    let root = scratch.root().to_str().unwrap();
    let args = [
        "judge",
        "agree",
        labels,
        "--model",
        "openai/judge",
        "--project",
        root,
        "--judge-samples",
        "3",
    ];
    let console = assay_in(scratch.root(), &args, None);
    assert_eq!(console.code, 0, "{console:?}");
    let json = assay_in(scratch.root(), &[&args[..], &["--json"]].concat(), None);
    assert_eq!(json.code, 0, "{json:?}");
    let a = json.json();

    let c = &a["consistency"];
    let named: Vec<&str> = c["uncertain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut expected = uncertain.clone();
    expected.sort_by_key(|item| {
        a["per_item"]
            .as_array()
            .unwrap()
            .iter()
            .position(|i| i["item"] == item.as_str())
    });
    assert_eq!(named, expected, "{c}");
    for item in a["per_item"].as_array().unwrap() {
        let flipped = uncertain.iter().any(|u| item["item"] == u.as_str());
        assert_eq!(
            item["uncertain"].as_bool().unwrap_or(false),
            flipped,
            "{item}"
        );
        if flipped {
            assert_eq!(item["samples_passed"], 1, "{item}");
            assert!(item.get("judge_verdict").is_none(), "{item}");
        }
    }
    let v = &a["measurement"]["verdicts"];
    assert_eq!(v["n"].as_u64(), Some(6 - uncertain.len() as u64), "{v}");
    for list in ["judge_too_lenient", "judge_too_strict"] {
        for item in v[list].as_array().unwrap() {
            assert!(!uncertain.iter().any(|u| item == u.as_str()), "{list}: {v}");
        }
    }
    assert_eq!(a["flip_share"].as_f64(), Some(uncertain.len() as f64 / 6.0));

    // The criteria in the suite's order, everywhere; each with its spread.
    let order = suite_criteria(&scratch);
    let ids = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&a["measurement"]["criteria"]), order);
    assert_eq!(ids(&c["criteria"]), order);
    let keys: Vec<&String> = a["per_item"][5]["scores"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    let in_suite: Vec<&String> = order.iter().filter(|id| keys.contains(id)).collect();
    assert_eq!(keys, in_suite, "an item's scores in the suite's order");
    for spread in c["criteria"].as_array().unwrap() {
        assert_eq!(spread["n"], 6, "{spread}");
        assert_eq!(
            spread["unstable"].as_u64(),
            Some(spread["unstable_items"].as_array().unwrap().len() as u64)
        );
    }
    let accuracy = &c["criteria"][0];
    assert!(accuracy["mean_sd"].as_f64().unwrap() > 0.0, "{accuracy}");
    assert_eq!(
        accuracy["unstable_items"].as_array().unwrap().len(),
        2,
        "{accuracy}"
    );

    // The console says the same.
    let text = &console.stdout;
    assert!(
        text.contains(&format!(
            "uncertain (the verdict flipped across the 3 samples; left out of the verdicts): {}",
            expected.join(", ")
        )),
        "{text}"
    );
    assert!(text.contains("(2 of 6)"), "{text}");
    assert!(text.contains("spread across samples"), "{text}");
    let rows: Vec<usize> = order
        .iter()
        .map(|id| {
            text.find(&format!("  {id} "))
                .unwrap_or_else(|| panic!("{id}: {text}"))
        })
        .collect();
    assert!(
        rows.windows(2).all(|w| w[0] < w[1]),
        "the suite's order: {text}"
    );
}
