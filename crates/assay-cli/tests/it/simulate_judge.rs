//! `assay judge agree` on simulation labels: a judge whose disagreement with people is known,
//! measured against scikit-learn, and the example's own labels.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use std::sync::atomic::Ordering;

use crate::sim_provider::Behaviour;
use crate::simulate::{ANTHROPIC, env_with, project, provider, runs, simulate};

/// The Python of the test virtualenv (scikit-learn for the kappa check).
fn test_python() -> PathBuf {
    let python = crate::support::test_python();
    assert!(
        python.is_file(),
        "no Python at {} (run scripts/ci-setup, which installs scikit-learn there)",
        python.display()
    );
    python
}

/// scikit-learn's Cohen's kappa of two score lists (quadratic weights over 0-10, or none).
fn sklearn_kappa(human: &[f64], judge: &[f64], quadratic: bool) -> f64 {
    let script = format!(
        "import json,sys\nfrom sklearn.metrics import cohen_kappa_score\nh={h}\nj={j}\n{call}\n",
        h = serde_json::to_string(&human.iter().map(|v| *v as i64).collect::<Vec<_>>()).unwrap(),
        j = serde_json::to_string(&judge.iter().map(|v| v.round() as i64).collect::<Vec<_>>())
            .unwrap(),
        call = if quadratic {
            "print(cohen_kappa_score(h, j, weights='quadratic', labels=list(range(11))))"
        } else {
            "print(cohen_kappa_score(h, j))"
        }
    );
    let out = Command::new(test_python())
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Issue 18: `assay judge agree` against a scripted judge whose disagreement with the labels
/// is known by construction: the labels are the judge's own scores with k of n flipped, and
/// the kappa is scikit-learn's.
#[test]
fn judge_agree_measures_a_judge_whose_disagreement_is_known() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let prompt = scratch.read("sim/prompts/coach_system_prompt.md");
    scratch.write(
        "sim/prompts/coach_system_prompt.md",
        &format!("{prompt}\nVARIED_SCORES\n"),
    );
    let out = simulate(
        &scratch,
        &[&ANTHROPIC[..], &["--repeat", "2"]].concat(),
        &[],
    );
    assert!(out.code <= 1, "{out:?}");
    let report: Value = serde_json::from_str(&scratch.read("sim/reports/latest.json")).unwrap();
    std::fs::copy(
        scratch.path("sim/reports/latest.json"),
        scratch.path("sim/reports/labelled.json"),
    )
    .unwrap();
    // Labels: the judge's own scores on two criteria, with k of n changed.
    let (ordinal, binary) = ("requirement_accuracy", "ypt_compliance");
    let runs = runs(&report);
    let n = runs.len();
    let flipped_ordinal = [1usize, 4, 7, 12];
    let flipped_binary = [2usize, 9];
    let mut labels = String::from("judge: simulation\nreport: reports/labelled.json\nitems:\n");
    let mut human = (Vec::new(), Vec::new());
    for (i, run) in runs.iter().enumerate() {
        let score = |id: &str| {
            run["judgement"]["scores"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["id"] == id)
                .unwrap_or_else(|| panic!("no {id} in {run}"))["score"]
                .as_f64()
                .unwrap()
        };
        let mut o = score(ordinal);
        if flipped_ordinal.contains(&i) {
            o = (o + 5.0) % 11.0;
        }
        let mut b = score(binary);
        if flipped_binary.contains(&i) {
            b = 10.0 - b;
        }
        human.0.push(o);
        human.1.push(b);
        labels.push_str(&format!(
            "  - run: {}#{}\n    scores: {{{ordinal}: {o}, {binary}: {b}}}\n",
            run["scenario_id"].as_str().unwrap(),
            run["repeat"]
        ));
    }
    scratch.write("sim/labels.yaml", &labels);
    let root = scratch.root().to_str().unwrap().to_owned();
    let env = env_with(&[]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let agree = crate::support::assay_env(
        &[
            "judge",
            "agree",
            scratch.path("sim/labels.yaml").to_str().unwrap(),
            "--model",
            "anthropic/judge",
            "--project",
            &root,
            "--json",
        ],
        &env,
    );
    assert_eq!(agree.code, 0, "{agree:?}");
    let a = agree.json();
    assert_eq!(a["items"], n);
    let criterion = |id: &str| {
        a["measurement"]["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    };
    let judge_scores = |id: &str| -> Vec<f64> {
        a["per_item"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["scores"][id][1].as_f64().unwrap())
            .collect()
    };
    // The judge agrees except on the flipped ones (each moved 5 points or more, or flipped).
    let c = criterion(ordinal);
    assert_eq!(c["n"], n);
    assert_eq!(c["kappa_weights"], "quadratic");
    let expected_agreement = (n - flipped_ordinal.len()) as f64 / n as f64;
    assert!(
        (c["agreement"].as_f64().unwrap() - expected_agreement).abs() < 1e-12,
        "{c}"
    );
    let kappa = sklearn_kappa(&human.0, &judge_scores(ordinal), true);
    assert!(
        (c["kappa"].as_f64().unwrap() - kappa).abs() < 1e-9,
        "{c} vs sklearn {kappa}"
    );
    let c = criterion(binary);
    assert_eq!(c["kappa_weights"], "none");
    let expected_agreement = (n - flipped_binary.len()) as f64 / n as f64;
    assert!(
        (c["agreement"].as_f64().unwrap() - expected_agreement).abs() < 1e-12,
        "{c}"
    );
    let kappa = sklearn_kappa(&human.1, &judge_scores(binary), false);
    assert!(
        (c["kappa"].as_f64().unwrap() - kappa).abs() < 1e-9,
        "{c} vs sklearn {kappa}"
    );
    assert_eq!(
        a["measurement"]["disagreements"].as_array().unwrap().len(),
        flipped_ordinal.len() + flipped_binary.len()
    );
    // The console says the same in a few lines; --min-kappa above it fails.
    let console = crate::support::assay_env(
        &[
            "judge",
            "agree",
            scratch.path("sim/labels.yaml").to_str().unwrap(),
            "--model",
            "anthropic/judge",
            "--project",
            &root,
            "--min-kappa",
            "0.99",
        ],
        &env,
    );
    assert_eq!(console.code, 1, "{console:?}");
    assert!(
        console.stdout.contains("overall agreement"),
        "{}",
        console.stdout
    );
    assert!(
        console.stdout.contains("largest disagreements"),
        "{}",
        console.stdout
    );

    // Bad labels: exit 2, naming the file and the problem.
    for (from, to, needle) in [
        (
            ordinal,
            "requirement_acuracy",
            "unknown criterion `requirement_acuracy`",
        ),
        (
            &format!("{binary}: 10"),
            &format!("{binary}: 5"),
            "5 is not on the criterion's scale (0 or 10)",
        ),
        (
            "report: reports/labelled.json",
            "report: ../../../etc/hostname",
            "leaves the project's folder",
        ),
    ] {
        let text = labels.replacen(from, to, 1);
        if text == labels {
            continue;
        }
        scratch.write("sim/bad-labels.yaml", &text);
        let bad = crate::support::assay_env(
            &[
                "judge",
                "agree",
                scratch.path("sim/bad-labels.yaml").to_str().unwrap(),
                "--project",
                &root,
            ],
            &env,
        );
        assert_eq!(bad.code, 2, "{needle}: {bad:?}");
        assert!(
            bad.stderr.contains("bad-labels.yaml") && bad.stderr.contains(needle),
            "{needle}: {}",
            bad.stderr
        );
    }
    // The template lists every run and every criterion, scores left empty.
    let template = crate::support::assay_env(
        &[
            "judge",
            "template",
            scratch.path("sim/reports/labelled.json").to_str().unwrap(),
            "--project",
            &root,
        ],
        &env,
    );
    assert_eq!(template.code, 0, "{template:?}");
    assert_eq!(template.stdout.matches("  - run: ").count(), n);
    assert!(
        template
            .stdout
            .contains("      requirement_accuracy:    # 0-10"),
        "{}",
        template.stdout
    );
}

/// Issue 18: the bundled scout-quest labels (hand-written transcripts, no report) load and are
/// measured against the scripted judge.
#[test]
fn the_example_judge_labels_are_measured() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let root = scratch.root().to_str().unwrap().to_owned();
    let env = env_with(&[]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = crate::support::assay_env(
        &[
            "judge",
            "agree",
            scratch
                .path("sim/labels/judge_labels.yaml")
                .to_str()
                .unwrap(),
            "--model",
            "anthropic/judge",
            "--project",
            &root,
            "--judge-samples",
            "2",
        ],
        &env,
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("against 6 labelled item(s)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("state_management"), "{}", run.stdout);
    assert!(run.stdout.contains("verdicts: agree on"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("self-consistency: the verdict flipped between samples on 0% of items"),
        "{}",
        run.stdout
    );
    assert_eq!(provider.stats.judge.load(Ordering::SeqCst), 12);
}
