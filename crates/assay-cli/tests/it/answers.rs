//! Issue 29: the answer bank through the real binary. A branch library's helpdesk
//! (`tests/fixtures/answer-kb`) whose product is a script (`product.py`, the optimizer's command
//! target) and whose judge is the scripted server of `examples/answer_judge.rs`: each metric
//! equals its value computed by hand from the written definition, a judge reply that does not
//! parse and a product that fails are errors kept out of the averages, every assertion type
//! passes and fails on one reply, bad specs are exit 2 naming the field, and a prompt change that
//! makes the replies ungrounded fails `run --baseline` naming the cases whose faithfulness fell.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::answer_judge::{Stats, Table, router};
use crate::assertion_types::{check_statuses, every_type};
use crate::support::{Run, Scratch, repo_path};

/// The judge's table: which sentences the knowledge base supports (the grounded replies' and
/// the references'), the questions a reply answers, the evasive reply and the reply whose
/// verdicts come back as prose.
fn table() -> Value {
    json!({
        "verdicts": {
            "You can keep a book for three weeks.": "loan_periods",
            "You can renew it online twice.": "loan_periods",
            "Books are lent for three weeks.": "loan_periods",
            "They can be renewed online twice.": "loan_periods",
            "Colour printing costs 50p a page.": "printing",
            "You pay at the desk.": "printing",
            "Yes: study rooms can be booked up to seven days ahead, for two hours a day.": "study_rooms"
        },
        "questions": {
            "You can keep a book for three weeks. You can renew it online twice.": ["How long can I keep a book I borrowed?"],
            "Colour printing costs 50p a page. You pay at the desk.": ["What does it cost to print in colour?"]
        },
        "noncommittal": ["I'm sorry, I can't help with that: I can only answer questions about the library."],
        "garbage": ["Children pay no late fees."]
    })
}

pub(crate) struct Library {
    pub(crate) scratch: Scratch,
    pub(crate) stats: Arc<Stats>,
}

pub(crate) fn library() -> Library {
    let stats = Arc::new(Stats::default());
    let table = Table::from_json(&table()).unwrap();
    let url = crate::support::serve(router(table, stats.clone()));
    let scratch = Scratch::copy_of(&repo_path("crates/assay-cli/tests/fixtures/answer-kb"));
    let toml = scratch.read("assay.toml");
    scratch.write(
        "assay.toml",
        &format!(
            "{toml}\n[providers]\nopenai_base_url = \"{url}/v1\"\nmax_retries = 0\n\n[answer]\njudge_model = \"openai/scripted-judge\"\n"
        ),
    );
    Library { scratch, stats }
}

impl Library {
    pub(crate) fn run(&self, args: &[&str]) -> Run {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        self.scratch
            .assay_env(&full, &[("OPENAI_API_KEY", "test-key")])
    }
}

pub(crate) fn case<'a>(log: &'a Value, id: &str) -> &'a Value {
    log["answer"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["test_id"] == id)
        .unwrap_or_else(|| panic!("no answer case {id} in {}", log["answer"]))
}

fn metric(c: &Value, name: &str) -> f64 {
    c["metrics"][name]["score"]
        .as_f64()
        .unwrap_or_else(|| panic!("{name} has no score: {c}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// Context precision by its written definition: the mean of precision@k over the ranks k whose
/// context is useful.
fn precision_by_hand(useful: &[bool]) -> f64 {
    let mut hits = 0.0;
    let mut sum = 0.0;
    for (k, u) in useful.iter().enumerate() {
        if *u {
            hits += 1.0;
            sum += hits / (k as f64 + 1.0);
        }
    }
    if hits == 0.0 { 0.0 } else { sum / hits }
}

#[test]
fn each_metric_equals_its_definition_and_errors_are_kept_apart() {
    let lib = library();
    let run = lib.run(&["--banks", "answer", "--json"]);
    // Two cases errored: the run says so with exit 3 (an infrastructure error is not a verdict).
    assert_eq!(run.code, 3, "{run:?}");
    let log = run.json();
    let bank = &log["answer"];
    assert_eq!(bank["tests_run"], 6, "{bank}");

    // LIB-A1: both claims of the reply are in loan_periods; so are both of the reference's.
    let a1 = case(&log, "LIB-A1");
    assert_eq!(metric(a1, "faithfulness"), 1.0, "{a1}");
    let claims = a1["metrics"]["faithfulness"]["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 2);
    assert!(
        claims
            .iter()
            .all(|c| c["supported"] == true && c["entity"] == "loan_periods"),
        "{claims:?}"
    );
    assert_eq!(metric(a1, "context_recall"), 1.0, "{a1}");
    // The judge read the asked question itself off the reply: cosine 1.
    assert!(close(metric(a1, "answer_relevancy"), 1.0), "{a1}");
    // Precision: useful is the context of the entity the reference's claims name, at its rank
    // in what the pipeline loaded.
    let contexts: Vec<&str> = a1["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["entity"].as_str().unwrap())
        .collect();
    assert!(contexts.contains(&"loan_periods"), "{contexts:?}");
    assert!(
        contexts.contains(&"library_voice"),
        "the ALWAYS entity is in the context: {contexts:?}"
    );
    let useful: Vec<bool> = contexts.iter().map(|e| *e == "loan_periods").collect();
    let p = precision_by_hand(&useful);
    assert!(close(metric(a1, "context_precision"), p), "{p} vs {a1}");
    let verdicts = a1["metrics"]["context_precision"]["contexts"]
        .as_array()
        .unwrap();
    assert_eq!(verdicts.len(), contexts.len());
    assert_eq!(a1["contexts_from"], "pipeline");
    // Score: 100 × mean of the four metrics and the assertions' share (1).
    let expected = (100.0 * (1.0 + 1.0 + p + 1.0 + 1.0) / 5.0_f64).round();
    let got = a1["score"].as_f64().unwrap();
    assert!((got - expected).abs() <= 1.0, "{got} vs {expected}");
    assert_eq!(a1["is_hard_fail"], false);
    assert_eq!(a1["assertions"]["passed"], true);

    // LIB-A3: the product says which context it used: that one is judged, not the pipeline's.
    let a3 = case(&log, "LIB-A3");
    assert_eq!(a3["contexts_from"], "target", "{a3}");
    assert_eq!(a3["contexts"].as_array().unwrap().len(), 1);
    assert_eq!(metric(a3, "faithfulness"), 1.0);
    assert_eq!(
        a3["metrics"]["faithfulness"]["claims"][0]["entity"],
        "study_rooms"
    );
    // No reference: precision judged each context against the reply, and says so.
    assert_eq!(metric(a3, "context_precision"), 1.0);
    assert!(
        a3["metrics"]["context_precision"]["note"]
            .as_str()
            .unwrap()
            .contains("against the reply"),
        "{a3}"
    );
    assert!(a3["metrics"].get("context_recall").is_none(), "not asked");

    // LIB-A4: a refusal: the critical refusal assertion holds; the judge finds the reply
    // non-committal, so relevancy is 0 (Ragas' rule), and the case is not failed by it.
    let a4 = case(&log, "LIB-A4");
    assert_eq!(metric(a4, "answer_relevancy"), 0.0, "{a4}");
    assert_eq!(a4["metrics"]["answer_relevancy"]["noncommittal"], true);
    assert_eq!(a4["assertions"]["passed"], true);
    assert_eq!(a4["score"], 50, "(0 + 1) / 2: {a4}");

    // LIB-A5: every judge reply is prose: an error naming the metric, never a 0 or NaN.
    let a5 = case(&log, "LIB-A5");
    assert!(a5.get("score").is_none_or(Value::is_null), "{a5}");
    let error = a5["error"].as_str().unwrap();
    assert!(error.starts_with("judge: faithfulness"), "{error}");
    assert_eq!(a5["is_hard_fail"], false);

    // LIB-A6: the product exits 3: an error with its stderr, not a failure.
    let a6 = case(&log, "LIB-A6");
    let error = a6["error"].as_str().unwrap();
    assert!(error.contains("the product failed"), "{error}");
    assert!(error.contains("no reply for"), "{error}");

    // The bank's averages leave the two errors out, and say so.
    assert_eq!(bank["errors"], 2, "{bank}");
    let scored: Vec<f64> = bank["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["score"].as_f64())
        .collect();
    assert_eq!(scored.len(), 4);
    let mean = scored.iter().sum::<f64>() / 4.0;
    assert!(
        (bank["average_score"].as_f64().unwrap() - mean).abs() < 0.06,
        "{bank}"
    );
    assert_eq!(bank["metrics"]["faithfulness"]["cases"], 3, "{bank}");
    assert_eq!(log["summary"]["error_count"], 2);
    assert_eq!(
        log["summary"]["component_scores"]["answer"].as_f64(),
        Some(bank["average_score"].as_f64().unwrap())
    );
    // Nothing anywhere is NaN.
    assert!(!run.stdout.contains("NaN"), "{}", run.stdout);
    for entry in std::fs::read_dir(lib.scratch.path("results")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains("NaN"), "{}", path.display());
    }
    assert!(lib.stats.received.load(Ordering::SeqCst) > 0);
}

#[test]
fn the_console_and_the_reports_show_claims_verdicts_and_errors_apart() {
    let lib = library();
    let run = lib.run(&["--banks", "answer"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stdout.contains("answer"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("2 of 6 cases errored and are left out of every average"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("errors (not scored): 2"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("faithfulness"), "{}", run.stdout);
    let report = std::fs::read_dir(lib.scratch.path("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "md"))
        .expect("a Markdown report");
    let md = std::fs::read_to_string(report).unwrap();
    assert!(md.contains("LIB-A5"), "the errored case is listed: {md}");
    assert!(md.contains("judge: faithfulness"), "{md}");
    assert!(!md.contains("NaN"));
}

#[test]
fn every_assertion_type_passes_and_fails_in_an_answer_case() {
    let lib = library();
    // The product's reply to this message is JSON, so `is-json` and `json-schema` pass on it;
    // it measures latency and reports no cost.
    let specs = every_type(r#"{"open": "09:00", "close": "18:00"}"#, true, false);
    let list: Vec<Value> = specs.iter().map(|(s, _)| s.clone()).collect();
    lib.scratch.write_json(
        "test_banks/answer/types.json",
        &json!({"bank_type": "ANSWER", "version": "1.0", "tests": [{
            "test_id": "LIB-TYPES", "message": "Give me the opening hours as JSON.",
            "user_state": {"user_type": "PATRON"}, "metrics": [],
            "assert": list, "assert_threshold": 0.4
        }]}),
    );
    let run = lib.run(&["--banks", "answer", "--test", "LIB-TYPES", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    let c = case(&log, "LIB-TYPES");
    check_statuses(&specs, &c["assertions"]["results"]);
    // The passed share of the decided ones (the two cost ones are left out), over 0.4.
    let decided = specs.iter().filter(|(_, st)| *st != "error").count() as f64;
    let passed = specs.iter().filter(|(_, st)| *st == "passed").count() as f64;
    assert!(
        close(c["assertions"]["score"].as_f64().unwrap(), passed / decided),
        "{c}"
    );
    assert_eq!(c["assertions"]["errors"], 2);
    assert_eq!(c["is_hard_fail"], false, "{c}");
    assert_eq!(
        lib.stats.received.load(Ordering::SeqCst),
        0,
        "no metric, no judge call"
    );
}

/// The fixture's bank with `edit` applied to its cases.
fn edit_bank(lib: &Library, edit: impl FnOnce(&mut Vec<Value>)) {
    let path = "test_banks/answer/library.json";
    let mut bank = lib.scratch.json(path);
    edit(bank["tests"].as_array_mut().unwrap());
    lib.scratch.write_json(path, &bank);
}

#[test]
fn bad_answer_cases_are_exit_2_naming_file_case_and_field_and_nothing_runs() {
    type Edit = fn(&mut Vec<Value>);
    let bad: [(Edit, &[&str]); 5] = [
        (
            |t| t[0]["assert"] = json!([{"type": "icontain", "value": "three weeks"}]),
            &["library.json", "LIB-A1", "assert[0].type", "icontains"],
        ),
        (
            |t| t[0]["assert"] = json!([{"type": "regex", "value": "("}]),
            &["library.json", "LIB-A1", "assert[0].value"],
        ),
        (
            |t| t[0]["minimum"] = json!({"faithfulness": 1.5}),
            &["library.json", "LIB-A1", "minimum.faithfulness"],
        ),
        (
            |t| t[3]["metrics"] = json!(["answer_relevance"]),
            &["library.json", "answer_relevance"],
        ),
        (
            |t| t[2]["metrics"] = json!(["context_recall"]),
            &["library.json", "LIB-A3", "metrics", "reference"],
        ),
    ];
    for (edit, names) in bad {
        let lib = library();
        edit_bank(&lib, edit);
        let run = lib.run(&["--banks", "answer"]);
        assert_eq!(run.code, 2, "{names:?}: {run:?}");
        for n in names {
            assert!(run.stderr.contains(n), "no {n:?} in {}", run.stderr);
        }
        assert!(!lib.scratch.path("results").exists(), "nothing written");
        assert_eq!(lib.stats.received.load(Ordering::SeqCst), 0);
    }
}

#[test]
fn an_ungrounding_prompt_change_fails_the_baseline_gate_naming_the_cases_whose_faithfulness_fell() {
    let lib = library();
    // Without the two cases that error (their exit 3 would say nothing about the gate).
    edit_bank(&lib, |t| {
        t.retain(|c| c["test_id"] != "LIB-A5" && c["test_id"] != "LIB-A6");
    });
    let first = lib.run(&["--banks", "answer"]);
    assert_eq!(first.code, 0, "{first:?}");

    // The product's prompt loses its rule: it answers from what it thinks it knows.
    lib.scratch.edit(
        "prompts/answerer_system_prompt.txt",
        "Answer only from the context you are given",
        "Answer from what you know",
    );
    let second = lib.run(&["--banks", "answer", "--baseline", "latest", "--json"]);
    assert_eq!(second.code, 1, "{second:?}");
    let log = second.json();
    let gate = &log["baseline"]["gate"];
    assert_eq!(gate["passed"], false, "{gate}");
    let reasons = gate["reasons"].to_string();
    assert!(reasons.contains("faithfulness"), "{reasons}");
    for id in ["LIB-A1", "LIB-A2", "LIB-A3"] {
        assert!(reasons.contains(id), "{id} not named: {reasons}");
    }
    assert!(
        !reasons.contains("LIB-A4"),
        "the refusal did not change: {reasons}"
    );
    let a1 = case(&log, "LIB-A1");
    assert_eq!(metric(a1, "faithfulness"), 0.0, "{a1}");
    // The critical assertion decides LIB-A2 whatever the metrics say.
    let a2 = case(&log, "LIB-A2");
    assert_eq!(a2["score"], 0, "{a2}");
    assert_eq!(a2["assertions"]["critical_failed"], true);
    let changes = log["baseline"]["metric_changes"].as_array().unwrap();
    assert!(
        changes
            .iter()
            .any(|c| c["test_id"] == "LIB-A1" && c["metric"] == "faithfulness"),
        "{changes:?}"
    );
}
