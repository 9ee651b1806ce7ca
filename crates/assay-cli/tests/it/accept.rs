//! Issue 42: a baseline a team can accept. `assay runs accept` refuses a run that is not the
//! whole suite (a shard, `--test`, `--topic`, `--changed-since`, a `--banks` subset, pending
//! drafts: exit 2, the reason named, nothing written) and accepts a CRITICAL or errored run
//! with a warning that `baseline/history.jsonl` keeps; `assay runs list` marks each kind.

use serde_json::{Value, json};

use crate::fake_openai::{FakeOpenAi, Faults};
use crate::support::{Run, Scratch, assay, assay_env};

/// `assay runs ARGS --project <p>`.
fn runs(p: &Scratch, args: &[&str]) -> Run {
    let mut full = vec!["runs"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--project", p.root.to_str().unwrap()]);
    assay(&full)
}

/// Runs `assay run ARGS` (saved), expecting `code`, and returns the saved run's id.
fn saved_run(p: &Scratch, args: &[&str], code: i32) -> String {
    let run = p.assay(&[&["run"], args].concat());
    assert_eq!(run.code, code, "{args:?}: {run:?}");
    let list = runs(p, &["list", "--json"]).json();
    list[0]["id"].as_str().unwrap().to_owned()
}

/// `assay runs accept ID` refused: exit 2, every `needles` in the message, nothing written.
fn refused(p: &Scratch, id: &str, needles: &[&str]) {
    let run = runs(p, &["accept", id, "--by", "ana"]);
    assert_eq!(run.code, 2, "accept {id}: {run:?}");
    for needle in needles {
        assert!(run.stderr.contains(needle), "{needle:?} in {run:?}");
    }
    assert!(
        !p.path("baseline").exists(),
        "a refused accept writes nothing"
    );
}

/// A pending semantic draft, which `--include-drafts` runs as a case.
fn write_draft(p: &Scratch) {
    p.write_json(
        "test_banks/drafts/semantic/gen-20261128T000000Z.json",
        &json!({
            "bank_type": "SEMANTIC",
            "generation": "gen-20261128T000000Z",
            "created": "2026-11-28T00:00:00Z",
            "drafts": [{
                "case": {
                    "test_id": "GEN-SEM-1",
                    "prompt": "he keeps baiting me trying to get a reaction",
                    "expected_primary": ["gray_rock"],
                    "provenance": {"method": "llm", "entity_id": "gray_rock",
                        "entity_versions": {"gray_rock": 1}, "model": "scripted/model",
                        "generated_at": "2026-11-28T00:00:00Z"}
                },
                "status": "pending"
            }]
        }),
    );
}

#[test]
fn accept_refuses_every_run_that_is_not_the_whole_suite_naming_why() {
    let p = Scratch::example();
    let whole = saved_run(&p, &[], 0);

    // --test: `latest` is that run, refused, and the message names the whole run to accept.
    let test = saved_run(&p, &["--test", "V2-GR-001"], 0);
    refused(
        &p,
        "latest",
        &[
            &format!("run {test} is a partial run (--test V2-GR-001)"),
            &format!("`assay runs accept {whole}`"),
        ],
    );
    refused(&p, &test, &["partial run (--test V2-GR-001)"]);

    // --topic.
    let topic_run = saved_run(&p, &["--topic", "gray_rock"], 0);
    refused(&p, &topic_run, &["partial run (--topic gray_rock)"]);

    // A --banks subset: the banks with cases it left out are named.
    let banks = saved_run(&p, &["--banks", "state,pattern"], 0);
    refused(
        &p,
        &banks,
        &["partial run (--banks state,pattern (left out: semantic, always))"],
    );

    // --changed-since, after an edit that some cases name: "N of M cases".
    let edit = assay(&[
        "kb",
        "update",
        "gray_rock",
        "--set",
        "concept_summary=Stay brief and boring.",
        "--project",
        p.root.to_str().unwrap(),
    ]);
    assert_eq!(edit.code, 0, "{edit:?}");
    let changed = saved_run(&p, &["--changed-since", &whole], 0);
    let record =
        p.json(&format!("results/results_{changed}.json"))["filters"]["changed_since"].clone();
    let (ran, skipped) = (
        record["ran"].as_u64().unwrap(),
        record["skipped"].as_u64().unwrap(),
    );
    assert!(ran > 0 && skipped > 0, "{record}");
    refused(
        &p,
        &changed,
        &[&format!(
            "partial run (--changed-since {whole} ({ran} of {} cases))",
            ran + skipped
        )],
    );

    // Pending drafts.
    write_draft(&p);
    let drafts = saved_run(&p, &["--include-drafts"], 0);
    refused(
        &p,
        &drafts,
        &[
            "included 1 pending draft(s) (`--include-drafts`)",
            "assay generate review",
        ],
    );
    std::fs::remove_dir_all(p.path("test_banks/drafts")).unwrap();

    // A shard.
    let shard = saved_run(&p, &["--shard", "hash:1/2"], 0);
    refused(
        &p,
        &shard,
        &["ran shard hash:1/2 of the suite", "assay runs merge"],
    );

    // The list says what each run is; `assay runs list DIR` is the same list.
    let list = runs(&p, &["list"]);
    assert_eq!(list.code, 0, "{list:?}");
    let line = |id: &str| -> String {
        list.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no line for {id} in\n{}", list.stdout))
            .to_owned()
    };
    assert!(line(&whole).ends_with("  whole suite"), "{}", line(&whole));
    assert!(
        line(&test).ends_with("partial: --test V2-GR-001"),
        "{}",
        line(&test)
    );
    assert!(line(&banks).contains("partial: --banks state,pattern"));
    assert!(line(&changed).contains(&format!("partial: --changed-since {whole}")));
    assert!(line(&drafts).ends_with("1 draft"), "{}", line(&drafts));
    assert!(line(&shard).ends_with("shard hash:1/2"), "{}", line(&shard));
    let positional = assay(&["runs", "list", p.root.to_str().unwrap()]);
    assert_eq!(positional.code, 0, "{positional:?}");
    assert_eq!(positional.stdout, list.stdout);
    let json = runs(&p, &["list", "--json"]).json();
    let entry = |id: &str| -> Value {
        json.as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(entry(&test)["partial"], json!(["--test V2-GR-001"]));
    assert_eq!(entry(&drafts)["drafts"], 1);
    assert!(entry(&whole).get("partial").is_none());

    // The whole run is accepted.
    let ok = runs(&p, &["accept", &whole, "--by", "ana"]);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(
        !ok.stdout.contains("warning") && ok.stderr.is_empty(),
        "{ok:?}"
    );
    assert!(p.json("baseline/accepted.json").get("warnings").is_none());
}

#[test]
fn a_critical_run_is_accepted_with_its_warning_recorded_in_the_history() {
    // A crisis message in a critical negative case: a critical failure, health CRITICAL.
    let p = crate::cli_edges::critical_example();
    let critical = saved_run(&p, &[], 1);

    let accept = runs(&p, &["accept", "latest", "--by", "ana"]);
    assert_eq!(accept.code, 0, "{accept:?}");
    let warning = "the accepted run's health is CRITICAL (critical failures: PAT-NEG-001)";
    assert!(accept.stderr.contains(warning), "{accept:?}");
    assert!(
        accept
            .stdout
            .contains(&format!("accepted run {critical} (score")),
        "{accept:?}"
    );
    assert!(
        accept.stdout.contains(&format!("  warning: {warning}")),
        "{accept:?}"
    );
    let history = p.read("baseline/history.jsonl");
    let line: Value = serde_json::from_str(history.lines().last().unwrap()).unwrap();
    assert_eq!(line["id"], critical.as_str());
    let warnings = line["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{line}");
    assert!(warnings[0].as_str().unwrap().starts_with(warning), "{line}");
    assert_eq!(
        p.json("baseline/accepted.json")["warnings"],
        line["warnings"]
    );
}

#[test]
fn an_errored_run_is_accepted_with_its_warning_recorded_in_the_history() {
    let p = Scratch::example();
    let bank = p.json("test_banks/semantic/parent_test_bank.json");
    let first = &bank["tests"][0];
    let poisoned = first["prompt"].as_str().unwrap().to_owned();
    let poisoned_id = first["test_id"].as_str().unwrap().to_owned();
    // Every request holding that case's message fails: the case is an error, not a score.
    let server = FakeOpenAi::start(
        crate::providers::entity_ids(&p),
        Faults {
            poison: Some(poisoned),
            ..Faults::default()
        },
    );
    crate::providers::configure(&p, &server, "cache = \"off\"");
    let run = p.assay_env(&["run"], &[crate::providers::KEY]);
    assert_eq!(run.code, 3, "an errored case is exit 3: {run:?}");
    let id = runs(&p, &["list", "--json"]).json()[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = p.json(&format!("results/results_{id}.json"));
    assert_eq!(log["summary"]["error_count"], 1, "{poisoned_id}");

    let accept = assay_env(
        &[
            "runs",
            "accept",
            &id,
            "--json",
            "--project",
            p.root.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(accept.code, 0, "{accept:?}");
    let warning = "the accepted run has 1 errored case(s) (infrastructure errors, no score)";
    assert!(accept.stderr.contains(warning), "{accept:?}");
    assert!(
        accept.json()["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with(warning),
        "{accept:?}"
    );
    let history = p.read("baseline/history.jsonl");
    let line: Value = serde_json::from_str(history.lines().last().unwrap()).unwrap();
    assert!(
        line["warnings"][0].as_str().unwrap().starts_with(warning),
        "{line}"
    );
}
