//! `assay generate` end to end: the real binary on a knowledge base the tests were not written
//! from (`tests/fixtures/generate-kb`, a community garden's helpdesk) against a scripted
//! generator (`examples/generate_provider.rs`) whose quirks are steered by markers in the
//! entities' text: a duplicate, a duplicate of an existing case, prose instead of JSON, JSON
//! of the wrong shape, an empty list, a message in the wrong language, a crisis message the
//! pattern misses and a look-alike it fires on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::generate_provider::{Behaviour, Stats, router};
use crate::support::{Run, Scratch, repo_path};

const MODEL: &str = "openai/scripted";

/// The fixture's SITUATION entities and how many drafts of 3 each keeps, by the script's
/// markers: (id, kept, duplicates, rejection reason).
const EXPECTED: [(&str, usize, usize, Option<&str>); 10] = [
    ("compost_smell", 2, 1, None),
    ("handler_injury", 3, 0, None),
    ("hose_rota", 3, 0, None),
    ("mulch_weeds", 2, 1, None),
    ("plot_neglect", 0, 0, Some("empty")),
    ("plot_waitlist", 3, 0, None),
    ("rain_barrels", 3, 0, None),
    ("seed_library", 2, 0, Some("off_language")),
    ("soil_testing", 0, 0, Some("invalid_reply")),
    ("tool_shed_access", 0, 0, Some("invalid_reply")),
];

struct Garden {
    scratch: Scratch,
    stats: Arc<Stats>,
}

/// A copy of the fixture whose assay.toml points at a fresh scripted server (with a price, so
/// budgets can be checked).
fn garden() -> Garden {
    let stats = Arc::new(Stats::default());
    let url = crate::support::serve(router(Behaviour::default(), stats.clone()));
    let scratch = Scratch::copy_of(&repo_path("crates/assay-cli/tests/fixtures/generate-kb"));
    let toml = scratch.read("assay.toml");
    scratch.write(
        "assay.toml",
        &format!(
            "{toml}\n[providers]\nopenai_base_url = \"{url}/v1\"\nmax_retries = 0\n\n[providers.prices]\n\"{MODEL}\" = {{ input = 1.0, output = 2.0 }}\n"
        ),
    );
    Garden { scratch, stats }
}

impl Garden {
    fn generate(&self, args: &[&str]) -> Run {
        let mut full = vec!["generate", "--model", MODEL];
        full.extend_from_slice(args);
        self.scratch
            .assay_env(&full, &[("OPENAI_API_KEY", "test-key")])
    }

    fn digests(&self) -> Vec<String> {
        self.stats
            .log
            .lock()
            .unwrap()
            .iter()
            .map(|(_, d)| d.clone())
            .collect()
    }
}

fn draft_files(scratch: &Scratch, bank: &str) -> Vec<PathBuf> {
    let dir = scratch.path(&format!("test_banks/drafts/{bank}"));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

fn read(path: &PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn bank<'a>(outcome: &'a Value, name: &str) -> &'a Value {
    outcome["banks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["bank"] == name)
        .unwrap_or_else(|| panic!("no {name} bank in {outcome:#}"))
}

/// What a draft says, without what names its generation (ids, times).
fn gist(draft: &Value) -> Value {
    let c = &draft["case"];
    json!([
        c["prompt"],
        c["expected_primary"],
        c["expected_secondary"],
        c["expected_matches"],
        c["not_expected_matches"],
        c["expected_handlers"],
        c["user_state"],
        draft["finding"]["kind"],
        c["provenance"]["prompt_hash"]
    ])
}

fn gists(scratch: &Scratch) -> BTreeMap<&'static str, Vec<Value>> {
    ["semantic", "state", "pattern"]
        .into_iter()
        .map(|b| {
            let drafts = draft_files(scratch, b)
                .iter()
                .flat_map(|f| read(f)["drafts"].as_array().unwrap().clone())
                .map(|d| gist(&d))
                .collect();
            (b, drafts)
        })
        .collect()
}

/// The test's own reading of the fixture's two STATE conditions.
fn triggers(handler: &str, state: &Value) -> bool {
    match handler {
        "handler_returning_member" => state["days_since_last_visit"]
            .as_f64()
            .is_some_and(|d| d >= 14.0),
        "handler_new_plot_holder" => {
            matches!(state["plot_status"].as_str(), Some("new" | "trial"))
        }
        other => panic!("unknown handler {other}"),
    }
}

#[test]
fn every_situation_entity_gets_its_drafts_and_the_findings_keep_the_intent() {
    let g = garden();
    let run = g.generate(&["--per-entity", "3", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let outcome = run.json();
    let generation = outcome["generation"].as_str().unwrap().to_owned();

    // Semantic: N per entity minus the counted duplicates and rejections.
    let semantic = bank(&outcome, "semantic");
    let files = draft_files(&g.scratch, "semantic");
    assert_eq!(files.len(), 1);
    let file = read(&files[0]);
    assert_eq!(file["generation"], generation.as_str());
    assert_eq!(file["bank_type"], "SEMANTIC");
    let drafts = file["drafts"].as_array().unwrap();
    let mut per_entity: BTreeMap<String, usize> = BTreeMap::new();
    for d in drafts
        .iter()
        .filter(|d| d["case"]["category"] == "generated")
    {
        let primary = d["case"]["expected_primary"].as_array().unwrap();
        assert_eq!(primary.len(), 1);
        *per_entity
            .entry(primary[0].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let duplicates = semantic["duplicate_list"].as_array().unwrap();
    let rejections = semantic["rejections"].as_array().unwrap();
    for (id, kept, dups, rejected) in EXPECTED {
        assert_eq!(
            per_entity.get(id).copied().unwrap_or(0),
            kept,
            "{id}: {per_entity:?}"
        );
        let counted_dups = duplicates
            .iter()
            .filter(|d| d.as_str().unwrap().starts_with(&format!("{id}:")))
            .count();
        assert_eq!(counted_dups, dups, "{id}");
        let counted_rej: Vec<&Value> = rejections.iter().filter(|r| r["source"] == id).collect();
        match rejected {
            Some(reason) => {
                assert_eq!(counted_rej.len(), 1, "{id}: {rejections:?}");
                assert_eq!(counted_rej[0]["reason"], reason);
            }
            None => assert!(counted_rej.is_empty(), "{id}: {counted_rej:?}"),
        }
        // Whatever was asked and not kept is counted as a duplicate or a rejection.
        let lost = 3 - kept;
        let rejected_messages = match rejected {
            Some("off_language") => 1,
            Some("empty" | "invalid_reply") => 3,
            _ => 0,
        };
        let accounted = dups + rejected_messages;
        assert_eq!(lost, accounted, "{id}");
    }
    assert_eq!(semantic["duplicates"], 2);
    assert_eq!(
        semantic["rejected"],
        json!({"empty": 1, "invalid_reply": 2, "off_language": 1})
    );
    // Each reason in words.
    let detail = |source: &str| {
        rejections.iter().find(|r| r["source"] == source).unwrap()["detail"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(detail("tool_shed_access"), "the reply holds no JSON object");
    assert!(
        detail("soil_testing").contains("does not follow the schema"),
        "{}",
        detail("soil_testing")
    );
    assert_eq!(detail("plot_neglect"), "the reply holds no messages");
    assert!(
        detail("seed_library").contains("reads as Spanish"),
        "{}",
        detail("seed_library")
    );
    // No rejected text became a draft.
    assert!(
        drafts
            .iter()
            .all(|d| !d["case"]["prompt"].as_str().unwrap().contains("semillas"))
    );
    // The duplicate of the existing case was dropped.
    assert!(
        drafts
            .iter()
            .all(|d| d["case"]["prompt"] != "I keep seeing the same weeds")
    );
    // A message retrieval gives to another entity is a finding that keeps its intent.
    assert_eq!(semantic["findings"], json!({"overlap": 1}), "{semantic:#}");
    let drift = drafts
        .iter()
        .find(|d| {
            d["case"]["prompt"]
                .as_str()
                .unwrap()
                .contains("hogging the shared hose")
        })
        .unwrap();
    assert_eq!(drift["finding"]["kind"], "overlap");
    assert_eq!(drift["case"]["expected_primary"], json!(["rain_barrels"]));
    let observed = drift["finding"]["observed"].as_array().unwrap();
    assert!(observed.contains(&json!("hose_rota")) && !observed.contains(&json!("rain_barrels")));
    // Related pairs need both entities.
    let pairs: Vec<&Value> = drafts
        .iter()
        .filter(|d| d["case"]["category"] == "generated_pair")
        .collect();
    assert!(!pairs.is_empty());
    assert!(
        pairs
            .iter()
            .all(|d| d["case"]["expected_primary"].as_array().unwrap().len() == 2)
    );
    // Provenance on every draft.
    for d in drafts {
        let p = &d["case"]["provenance"];
        assert_eq!(p["method"], "llm");
        assert_eq!(p["model"], MODEL);
        assert_eq!(p["generation"], generation.as_str());
        assert_eq!(p["language"], "english");
        assert_eq!(p["prompt_hash"].as_str().unwrap().len(), 16);
        let primary = d["case"]["expected_primary"][0].as_str().unwrap();
        assert_eq!(p["entity_versions"][primary], 1, "{d:#}");
        assert_eq!(d["status"], "pending");
    }

    // State: exactly the values on each side of each condition, judged independently.
    let state_files = draft_files(&g.scratch, "state");
    assert_eq!(state_files.len(), 1);
    let state = read(&state_files[0]);
    let mut seen = BTreeSet::new();
    for d in state["drafts"].as_array().unwrap() {
        let c = &d["case"];
        let handler = c["provenance"]["entity_id"].as_str().unwrap();
        let expected = c["expected_handlers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h == handler);
        assert_eq!(expected, triggers(handler, &c["user_state"]), "{c:#}");
        let value = match handler {
            "handler_returning_member" => c["user_state"]["days_since_last_visit"].to_string(),
            _ => c["user_state"]["plot_status"].to_string(),
        };
        seen.insert(format!("{handler}={value}"));
    }
    let want: BTreeSet<String> = [
        "handler_returning_member=13",
        "handler_returning_member=14",
        "handler_new_plot_holder=\"new\"",
        "handler_new_plot_holder=\"trial\"",
        "handler_new_plot_holder=\"OTHER\"",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(seen, want);

    // Pattern: the miss keeps the generator's intent and is a finding, not a passing case.
    let pattern_files = draft_files(&g.scratch, "pattern");
    let pattern = read(&pattern_files[0]);
    let drafts = pattern["drafts"].as_array().unwrap();
    let miss = drafts
        .iter()
        .find(|d| {
            d["case"]["prompt"]
                .as_str()
                .unwrap()
                .starts_with("I cut my hand")
        })
        .expect("the scripted crisis message is a draft");
    assert_eq!(miss["finding"]["kind"], "pattern_miss");
    assert_eq!(miss["case"]["expected_matches"], json!(["handler_injury"]));
    assert_eq!(miss["case"]["pattern_type"], "crisis");
    assert_eq!(miss["case"]["is_critical"], true);
    assert!(
        miss["finding"]["intended"]
            .as_str()
            .unwrap()
            .contains("meant to fire")
    );
    assert!(
        miss["finding"]["explanation"]
            .as_str()
            .unwrap()
            .contains("meant this as a crisis message; your pattern misses it")
    );
    assert_eq!(miss["finding"]["observed"], json!([]));
    let caught = drafts
        .iter()
        .find(|d| {
            d["case"]["prompt"]
                .as_str()
                .unwrap()
                .contains("fell off the ladder")
        })
        .unwrap();
    assert!(caught.get("finding").is_none(), "{caught:#}");
    let alarm = drafts
        .iter()
        .find(|d| {
            d["case"]["prompt"]
                .as_str()
                .unwrap()
                .contains("can't breathe")
        })
        .unwrap();
    assert_eq!(alarm["finding"]["kind"], "pattern_false_alarm");
    assert_eq!(
        alarm["case"]["not_expected_matches"],
        json!(["handler_injury"])
    );
    assert_eq!(alarm["case"]["pattern_type"], "negative");
    assert_eq!(
        bank(&outcome, "pattern")["findings"],
        json!({"pattern_false_alarm": 1, "pattern_miss": 2})
    );

    // Every answered request is a call the outcome counts; no prompt was sent twice.
    assert_eq!(
        g.stats.answered(),
        outcome["calls"]["requests"].as_u64().unwrap() as usize
    );
    let digests = g.digests();
    assert_eq!(digests.iter().collect::<BTreeSet<_>>().len(), digests.len());

    // Ids are unique across banks.
    let mut ids = BTreeSet::new();
    for b in ["semantic", "state", "pattern"] {
        for f in draft_files(&g.scratch, b) {
            for d in read(&f)["drafts"].as_array().unwrap() {
                assert!(ids.insert(d["case"]["test_id"].as_str().unwrap().to_owned()));
            }
        }
    }

    // Again: a new generation, no file overwritten; what the drafts hold already is dropped.
    let before: Vec<(PathBuf, String)> = ["semantic", "state", "pattern"]
        .iter()
        .flat_map(|b| draft_files(&g.scratch, b))
        .map(|f| (f.clone(), std::fs::read_to_string(&f).unwrap()))
        .collect();
    std::thread::sleep(Duration::from_millis(1100));
    let again = g.generate(&["--per-entity", "3", "--json"]);
    assert_eq!(again.code, 0, "{again:?}");
    let again = again.json();
    assert_ne!(again["generation"], generation.as_str());
    for (f, text) in &before {
        assert_eq!(
            &std::fs::read_to_string(f).unwrap(),
            text,
            "{} changed",
            f.display()
        );
    }
    assert_eq!(bank(&again, "semantic")["drafts"], 0, "{again:#}");
    assert_eq!(bank(&again, "state")["drafts"], 0);
    assert_eq!(bank(&again, "state")["duplicates"], 5);
    assert_eq!(draft_files(&g.scratch, "pattern").len(), 2);
}

#[test]
fn the_console_summary_names_rejections_and_findings() {
    let g = garden();
    let run = g.generate(&["--per-entity", "2", "--banks", "semantic,pattern"]);
    assert_eq!(run.code, 0, "{run:?}");
    let out = &run.stdout;
    assert!(
        out.contains("rejected (invalid_reply) tool_shed_access: the reply holds no JSON object"),
        "{out}"
    );
    assert!(
        out.contains("finding pattern_miss GEN-PAT-crisis1-fire-2-"),
        "{out}"
    );
    assert!(out.contains("Journal: .assay/generate/"), "{out}");
    assert!(run.stderr.contains("Estimate: "), "{}", run.stderr);
}

#[test]
fn a_budget_below_the_estimate_is_refused_before_any_call() {
    let g = garden();
    let run = g.generate(&["--per-entity", "3", "--budget", "0.001"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("--budget: the estimate is $"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("nothing was called"), "{}", run.stderr);
    assert_eq!(g.stats.received.load(Ordering::SeqCst), 0);
    assert!(!g.scratch.path("test_banks/drafts").exists());
    assert!(!g.scratch.path(".assay/generate").exists());

    // A dry run estimates and calls nothing either.
    let dry = g.generate(&["--per-entity", "3", "--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(dry.json()["estimate"]["generation_calls"].as_u64().unwrap() > 0);
    assert_eq!(g.stats.received.load(Ordering::SeqCst), 0);
    assert!(!g.scratch.path("test_banks/drafts").exists());
}

#[test]
fn state_drafts_need_no_model() {
    // No server, no key, no price: boundary cases make no call.
    let scratch = Scratch::copy_of(&repo_path("crates/assay-cli/tests/fixtures/generate-kb"));
    let run = scratch.assay(&["generate", "--banks", "state", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let outcome = run.json();
    assert_eq!(outcome["calls"]["made"], 0);
    assert_eq!(outcome["estimate"]["generation_calls"], 0);
    assert_eq!(bank(&outcome, "state")["drafts"], 5);
    assert_eq!(draft_files(&scratch, "state").len(), 1);
    assert!(draft_files(&scratch, "semantic").is_empty());
    // An unknown entity is bad input, named.
    let bad = scratch.assay(&[
        "generate",
        "--banks",
        "state",
        "--entities",
        "handler_returnin_member",
    ]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr
            .contains("did you mean `handler_returning_member`"),
        "{}",
        bad.stderr
    );
}

#[test]
fn a_killed_generation_resumes_with_the_same_drafts_and_no_repeated_call() {
    // The reference: one uninterrupted generation.
    let reference = garden();
    let run = reference.generate(&["--per-entity", "2", "--concurrency", "1", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let total = reference.stats.answered();

    let g = garden();
    let k = 6;
    g.stats.hold_after.store(k, Ordering::SeqCst);
    let mut child = g.scratch.spawn(
        &[
            "generate",
            "--model",
            MODEL,
            "--per-entity",
            "2",
            "--concurrency",
            "1",
        ],
        &[("OPENAI_API_KEY", "test-key")],
    );
    let start = Instant::now();
    // With one call at a time, request k+1 is sent only after reply k was journaled.
    while g.stats.received.load(Ordering::SeqCst) <= k {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the generation never reached call {}",
            k + 1
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(g.stats.answered(), k);
    assert!(
        !g.scratch.path("test_banks/drafts").exists(),
        "nothing is written before the end"
    );

    g.stats.hold_after.store(0, Ordering::SeqCst);
    // A resume that asks something else is refused before any call, naming the flag.
    let other = g.scratch.assay_env(
        &["generate", "--resume", "--per-entity", "3"],
        &[("OPENAI_API_KEY", "test-key")],
    );
    assert_eq!(other.code, 2, "{other:?}");
    assert!(
        other.stderr.contains("--per-entity 3 (it asked 2)"),
        "{}",
        other.stderr
    );
    assert_eq!(g.stats.answered(), k);
    let resumed = g.scratch.assay_env(
        &["generate", "--resume", "--json"],
        &[("OPENAI_API_KEY", "test-key")],
    );
    assert_eq!(resumed.code, 0, "{resumed:?}");
    let outcome = resumed.json();
    assert_eq!(outcome["resumed"], true);
    assert_eq!(outcome["calls"]["replayed"], k);
    // The server answered every call once in all: none was paid twice.
    assert_eq!(g.stats.answered(), total);
    let digests = g.digests();
    assert_eq!(
        digests.iter().collect::<BTreeSet<_>>().len(),
        digests.len(),
        "a request was repeated"
    );
    // The same drafts as the uninterrupted generation.
    assert_eq!(gists(&g.scratch), gists(&reference.scratch));
    // Finished: there is nothing left to resume.
    let again = g
        .scratch
        .assay_env(&["generate", "--resume"], &[("OPENAI_API_KEY", "test-key")]);
    assert_eq!(again.code, 2, "{again:?}");
    assert!(
        again.stderr.contains("no interrupted generation"),
        "{}",
        again.stderr
    );
}

#[test]
fn changed_since_a_run_drafts_only_the_changed_entities_at_their_new_version() {
    let scratch = Scratch::copy_of(&repo_path("crates/assay-cli/tests/fixtures/generate-kb"));
    let run = scratch.assay(&["run", "--banks", "state"]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    scratch.edit("kb/handlers.yaml", "{gte: 14}", "{gte: 21}");
    let run = scratch.assay(&[
        "generate",
        "--banks",
        "state",
        "--changed-since",
        "latest",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let outcome = run.json();
    assert_eq!(outcome["request"]["entities"], "handler_returning_member");
    let state = read(&draft_files(&scratch, "state")[0]);
    let values: BTreeSet<String> = state["drafts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let c = &d["case"];
            assert_eq!(c["provenance"]["entity_id"], "handler_returning_member");
            assert_eq!(
                c["provenance"]["entity_versions"]["handler_returning_member"],
                2
            );
            c["user_state"]["days_since_last_visit"].to_string()
        })
        .collect();
    assert_eq!(values, BTreeSet::from(["20".to_owned(), "21".to_owned()]));
}

/// A draft file's drafts with what names their generation taken out: the generation and time
/// in the provenance, and the digest of the generation that ends a semantic or pattern id.
fn drafts_without_generation(path: &PathBuf) -> Vec<Value> {
    let mut file = read(path);
    let drafts = file["drafts"].as_array_mut().unwrap();
    for d in drafts.iter_mut() {
        let case = &mut d["case"];
        let id = case["test_id"].as_str().unwrap().to_owned();
        let kept = match id.rsplit_once('-') {
            Some((head, tail)) if id.starts_with("GEN-PAT") || !id.starts_with("GEN-STATE") => {
                assert_eq!(tail.len(), 6, "{id}");
                head.to_owned()
            }
            _ => id,
        };
        case["test_id"] = json!(kept);
        let p = case["provenance"].as_object_mut().unwrap();
        p.remove("generation");
        p.remove("generated_at");
    }
    file["drafts"].as_array().unwrap().clone()
}

#[test]
fn issue_42_a_resume_after_two_server_errors_writes_every_draft_of_an_uninterrupted_generation() {
    let args = ["--per-entity", "2", "--concurrency", "1", "--json"];
    // The reference: one uninterrupted generation.
    let reference = garden();
    let run = reference.generate(&args);
    assert_eq!(run.code, 0, "{run:?}");
    let uninterrupted = run.json();

    // The third and fourth calls (each writing an entity's messages) get a 500; the client
    // does not retry (max_retries = 0), so two calls fail.
    let g = garden();
    g.stats.fail_after.store(2, Ordering::SeqCst);
    g.stats.failures.store(2, Ordering::SeqCst);
    let run = g.generate(&args);
    assert_eq!(run.code, 3, "{run:?}");
    let failed = run.json();
    assert_eq!(failed["calls"]["errors"], 2, "{failed:#}");
    let partial = bank(&failed, "semantic")["drafts"].as_u64().unwrap();
    let whole = bank(&uninterrupted, "semantic")["drafts"].as_u64().unwrap();
    assert!(partial < whole, "{partial} of {whole}");
    let files = draft_files(&g.scratch, "semantic");
    assert_eq!(files.len(), 1);
    assert_eq!(
        read(&files[0])["drafts"].as_array().unwrap().len() as u64,
        partial
    );

    // The resume replays the answered calls, makes the two failed ones and writes what they
    // give into the same files.
    let resumed = g.scratch.assay_env(
        &["generate", "--resume", "--json"],
        &[("OPENAI_API_KEY", "test-key")],
    );
    assert_eq!(resumed.code, 0, "{resumed:?}");
    let outcome = resumed.json();
    assert_eq!(outcome["resumed"], true);
    assert_eq!(outcome["calls"]["errors"], 0, "{outcome:#}");
    // Only what the first process did not get is asked: the two failed calls and the
    // calibrator calls of the messages they give.
    assert_eq!(outcome["calls"]["replayed"], failed["calls"]["made"]);
    assert_eq!(
        outcome["calls"]["made"].as_u64().unwrap() + outcome["calls"]["replayed"].as_u64().unwrap(),
        uninterrupted["calls"]["made"].as_u64().unwrap(),
        "{outcome:#}"
    );
    // Its totals are an uninterrupted generation's: no draft counted as a duplicate of itself.
    for name in ["semantic", "state", "pattern"] {
        let (got, want) = (bank(&outcome, name), bank(&uninterrupted, name));
        for key in [
            "drafts",
            "per_entity",
            "duplicates",
            "rejected",
            "findings",
            "errors",
        ] {
            assert_eq!(got[key], want[key], "{name} {key}: {got:#}");
        }
    }
    // Every file holds every draft, field for field as the uninterrupted generation's.
    for name in ["semantic", "state", "pattern"] {
        let (got, want) = (
            draft_files(&g.scratch, name),
            draft_files(&reference.scratch, name),
        );
        assert_eq!(got.len(), want.len(), "{name}");
        for (got, want) in got.iter().zip(&want) {
            let drafts = drafts_without_generation(got);
            assert_eq!(
                drafts.len() as u64,
                bank(&outcome, name)["drafts"].as_u64().unwrap()
            );
            assert_eq!(drafts, drafts_without_generation(want), "{name}");
        }
    }
    // Finished: nothing is left to resume.
    let again = g
        .scratch
        .assay_env(&["generate", "--resume"], &[("OPENAI_API_KEY", "test-key")]);
    assert_eq!(again.code, 2, "{again:?}");
}
