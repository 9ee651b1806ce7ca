//! `assay judge agree` on `judge: claims` labels (issue 29): the answer judge's claim verdicts
//! measured against people's, with the scripted judge server
//! (`examples/answer_judge.rs`) answering from a fixed table.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::answer_judge::{Stats, Table, router};
use crate::support::{Run, Scratch, assay_env};

const ENV: [(&str, &str); 1] = [("OPENAI_API_KEY", "test-key")];

/// Six claims in two items. People support claims 1, 2 and 4 (naming the entity of 1 and 2);
/// the table below makes the judge support 1, 2, 4 and 6: it agrees on 5 of 6, and is too
/// lenient on `shed-hours#3`. It attributes claim 2 to `tool-shed` where the person said
/// `plot-fees`.
const LABELS: &str = "\
judge: claims
items:
  - id: plot-fees
    contexts:
      - entity: plot-fees
        text: A plot costs 40 euros a year, paid in March.
      - entity: tool-shed
        text: The tool shed opens at 8 every weekday.
    claims:
      - claim: A plot costs 40 euros a year.
        supported: true
        entity: plot-fees
      - claim: The fee is paid in March.
        supported: true
        entity: plot-fees
      - claim: Plots come with a free shed key.
        supported: false
  - id: shed-hours
    contexts:
      - entity: tool-shed
        text: The tool shed opens at 8 every weekday.
    claims:
      - claim: The shed opens at 8.
        supported: true
      - claim: The shed is open on Sundays.
        supported: false
      - claim: Members may borrow the mower.
        supported: false
        note: the passage says nothing of the mower
";

/// A project whose `[answer] judge_model` is the scripted judge; the server's stats.
fn project() -> (Scratch, Arc<Stats>) {
    let table = Table::from_json(&json!({
        "verdicts": {
            "A plot costs 40 euros a year.": "plot-fees",
            "The fee is paid in March.": "tool-shed",
            "The shed opens at 8.": "tool-shed",
            "Members may borrow the mower.": true
        },
        "garbage": ["GARBLED"]
    }))
    .unwrap();
    let stats = Arc::new(Stats::default());
    let url = crate::support::serve(router(table, stats.clone()));
    let dir = tempfile::tempdir().unwrap();
    let s = Scratch::copy_of(dir.path());
    s.write(
        "assay.toml",
        &format!(
            "[providers]\nopenai_base_url = \"{url}/v1\"\n\n[answer]\njudge_model = \"openai/claims-judge\"\n"
        ),
    );
    s.write("labels/claims.yaml", LABELS);
    (s, stats)
}

fn agree(s: &Scratch, labels: &str, extra: &[&str]) -> Run {
    let root = s.root().to_str().unwrap().to_owned();
    let path = s.path(labels).to_str().unwrap().to_owned();
    let mut args = vec!["judge", "agree", path.as_str(), "--project", root.as_str()];
    args.extend_from_slice(extra);
    assay_env(&args, &ENV)
}

fn close(value: &Value, expected: f64) -> bool {
    value.as_f64().is_some_and(|v| (v - expected).abs() < 1e-9)
}

/// Kappa by hand: the person supports 3 of 6 claims, the judge 4 of 6, and they agree on 5.
/// Observed agreement 5/6; chance agreement 3/6 · 4/6 + 3/6 · 2/6 = 1/2; kappa = (5/6 − 1/2) /
/// (1 − 1/2) = 2/3.
#[test]
fn the_claims_judge_is_measured_against_people_with_kappa_by_hand() {
    let (scratch, stats) = project();
    let run = agree(&scratch, "labels/claims.yaml", &["--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["kind"], "claims");
    assert_eq!(
        report["judge_model"], "openai/claims-judge",
        "[answer] judge_model"
    );
    assert_eq!(report["items"], 6, "each claim is an item");
    assert_eq!(report["judge_version"].as_str().unwrap().len(), 16);
    let criteria = report["measurement"]["criteria"].as_array().unwrap();
    assert_eq!(criteria.len(), 1, "{report}");
    let crit = &criteria[0];
    assert_eq!(
        (crit["id"].as_str(), crit["n"].as_u64()),
        (Some("supported"), Some(6))
    );
    assert!(close(&crit["kappa"], 2.0 / 3.0), "{crit}");
    assert!(close(&crit["agreement"], 5.0 / 6.0), "{crit}");
    let verdicts = &report["measurement"]["verdicts"];
    assert_eq!(verdicts["judge_too_lenient"], json!(["shed-hours#3"]));
    assert_eq!(verdicts["judge_too_strict"], json!([]));
    assert!(close(&verdicts["kappa"], 2.0 / 3.0), "{verdicts}");
    let entity = &report["entity"];
    assert_eq!(
        (entity["n"].as_u64(), entity["agreed"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(close(&entity["share"], 0.5), "{entity}");
    assert_eq!(
        entity["mismatches"],
        json!([{"item": "plot-fees#2", "human": "plot-fees", "judge": ["tool-shed"]}])
    );
    assert_eq!(
        stats.received.load(Ordering::SeqCst),
        2,
        "one verdict call per item, all its claims at once"
    );

    // The console: the same numbers, in words.
    let run = agree(&scratch, "labels/claims.yaml", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for needle in [
        "(claims judge, version",
        "against 6 labelled item(s)",
        "0.67",
        "(substantial)",
        "too lenient on shed-hours#3",
        "the judge named yours on 1 of 2 claim(s) (50%)",
        "plot-fees#2: yours plot-fees → the judge's tool-shed",
    ] {
        assert!(run.stdout.contains(needle), "{needle}: {run:?}");
    }

    // --min-kappa above the measured kappa fails the gate (exit 1), naming the criterion.
    let run = agree(&scratch, "labels/claims.yaml", &["--min-kappa", "0.9"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("kappa below --min-kappa 0.90")
            && run.stderr.contains("supported (0.67"),
        "{}",
        run.stderr
    );
    let run = agree(&scratch, "labels/claims.yaml", &["--min-kappa", "0.6"]);
    assert_eq!(run.code, 0, "{run:?}");

    // --model names another judge; --judge-samples asks each item again, with its own seed.
    let run = agree(
        &scratch,
        "labels/claims.yaml",
        &[
            "--model",
            "openai/other-judge",
            "--judge-samples",
            "2",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    assert_eq!(report["judge_model"], "openai/other-judge");
    assert_eq!(report["samples"], 2);
    assert_eq!(
        report["consistency"]["uncertain"],
        json!([]),
        "a steady judge"
    );
    assert!(close(
        &report["measurement"]["criteria"][0]["kappa"],
        2.0 / 3.0
    ));
}

#[test]
fn bad_claim_labels_are_refused_naming_the_field_and_line() {
    let (s, stats) = project();
    for (from, to, needles) in [
        (
            "      - claim: The shed is open on Sundays.\n        supported: false\n",
            "      - claim: The shed is open on Sundays.\n        suported: false\n",
            vec![
                "bad.yaml:26",
                "unknown field `suported`",
                "did you mean `supported`?",
            ],
        ),
        (
            "  - id: shed-hours",
            "  - id: plot-fees",
            vec![
                "bad.yaml:18",
                "items[1]: id: `plot-fees` is used by an earlier item",
            ],
        ),
        (
            "      - claim: Plots come with a free shed key.\n        supported: false\n",
            "      - claim: Plots come with a free shed key.\n        supported: false\n        entity: tool-shed\n",
            vec!["items[0]: claims[2].entity", "not supported"],
        ),
    ] {
        let text = LABELS.replacen(from, to, 1);
        assert_ne!(text, LABELS, "{from}");
        s.write("labels/bad.yaml", &text);
        let run = agree(&s, "labels/bad.yaml", &[]);
        assert_eq!(run.code, 2, "{to}: {run:?}");
        for needle in needles {
            assert!(run.stderr.contains(needle), "{needle}: {}", run.stderr);
        }
    }
    // An item with no claims (shed-hours' are the file's last lines).
    let at = LABELS.rfind("    claims:\n").unwrap();
    s.write(
        "labels/bad.yaml",
        &format!("{}    claims: []\n", &LABELS[..at]),
    );
    let run = agree(&s, "labels/bad.yaml", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("claims: item `shed-hours` has none"),
        "{}",
        run.stderr
    );
    // A `judge:` assay does not know: the kinds it does are named.
    s.write(
        "labels/bad.yaml",
        &LABELS.replacen("judge: claims", "judge: claim", 1),
    );
    let run = agree(&s, "labels/bad.yaml", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("is not `simulation`, `rubric` or `claims`"),
        "{}",
        run.stderr
    );
    assert_eq!(
        stats.received.load(Ordering::SeqCst),
        0,
        "nothing was judged"
    );
}

/// A judge reply that cannot be parsed, after its corrective turns, is an error of each claim of
/// its item (exit 3), never a verdict; the other item is still measured.
#[test]
fn an_unparseable_judge_reply_is_an_error_of_the_items_claims() {
    let (s, _stats) = project();
    s.write(
        "labels/claims.yaml",
        &LABELS.replacen(
            "The shed is open on Sundays.",
            "The shed is open on Sundays. GARBLED",
            1,
        ),
    );
    let run = agree(&s, "labels/claims.yaml", &["--json"]);
    assert_eq!(run.code, 3, "{run:?}");
    let a = run.json();
    let errors: Vec<&str> = a["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    for (k, e) in errors.iter().enumerate() {
        assert!(
            e.starts_with(&format!(
                "shed-hours#{}: faithfulness: judging the claims",
                k + 1
            )),
            "{e}"
        );
    }
    assert_eq!(a["items"], 6);
    assert_eq!(
        a["measurement"]["criteria"][0]["n"], 3,
        "plot-fees' claims only"
    );
    let judged: Vec<&str> = a["per_item"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item"].as_str().unwrap())
        .collect();
    assert_eq!(judged, ["plot-fees#1", "plot-fees#2", "plot-fees#3"]);
}
