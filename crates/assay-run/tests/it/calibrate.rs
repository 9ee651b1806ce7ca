//! Calibration and human overrides on a small scratch project, with a scripted chat model.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use assay_core::bank::{ExpectationSet, RankCheck};
use assay_project::HarnessError;
use assay_project::expectations::HistoryFile;
use assay_project::project::Project;
use assay_providers::{ChatModel, ChatRequest, ChatResponse, ProviderError, Usage};
use assay_run::calibrate::{CalibrationOutcome, CalibrationRequest, CaseStatus, Scope, calibrate};
use assay_run::overrides::{OverrideRequest, record_override};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};

/// A test double: replies by test id and attempt (1-based), from a script.
type Script = Box<dyn Fn(&str, usize) -> Result<String, ProviderError> + Send + Sync>;

struct Scripted {
    script: Script,
    requests: Mutex<Vec<ChatRequest>>,
}

impl std::fmt::Debug for Scripted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scripted")
    }
}

impl Scripted {
    fn new(
        script: impl Fn(&str, usize) -> Result<String, ProviderError> + Send + Sync + 'static,
    ) -> Scripted {
        Scripted {
            script: Box::new(script),
            requests: Mutex::new(Vec::new()),
        }
    }

    fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

fn test_id_of(request: &ChatRequest) -> String {
    let first = &request.messages[0].content;
    let rest = first
        .strip_prefix("Test case ")
        .expect("user message starts with the case");
    rest.split([':', '\n']).next().unwrap().to_owned()
}

#[async_trait::async_trait]
impl ChatModel for Scripted {
    fn model(&self) -> &'static str {
        "test/scripted"
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        let attempt = request.messages.len().div_ceil(2);
        let text = (self.script)(&test_id_of(request), attempt)?;
        Ok(ChatResponse {
            text,
            tool_calls: Vec::new(),
            stop_reason: Some("end_turn".into()),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
                requests: 1,
            },
        })
    }
}

fn reply(primary: &[&str], secondary: &[&str], not: &[&str], rank: &[(&str, &str)]) -> String {
    let rank: Vec<Value> = rank
        .iter()
        .map(|(h, l)| json!({"higher": h, "lower": l}))
        .collect();
    json!({
        "expected_primary": primary,
        "expected_secondary": secondary,
        "not_expected": not,
        "rank_check": rank,
        "reasoning": "because the message says so",
    })
    .to_string()
}

fn set(
    primary: &[&str],
    secondary: &[&str],
    not: &[&str],
    rank: &[(&str, &str)],
) -> ExpectationSet {
    let v = |x: &[&str]| x.iter().map(|s| (*s).to_owned()).collect();
    ExpectationSet {
        expected_primary: v(primary),
        expected_secondary: v(secondary),
        not_expected: v(not),
        rank_check: rank
            .iter()
            .map(|(h, l)| RankCheck {
                higher: (*h).into(),
                lower: (*l).into(),
            })
            .collect(),
    }
}

const KB: &str = r"
- entity_id: alpha
  entity_type: KNOWLEDGE
  title: Alpha
  concept_summary: The alpha concept.
  recognition: alpha situations
- entity_id: beta
  entity_type: KNOWLEDGE
  title: Beta
- entity_id: gamma
  entity_type: SCRIPT
  title: Gamma
- entity_id: crisis
  entity_type: HANDLER
  title: Crisis
  red_flags: danger
- entity_id: persona
  entity_type: PERSONA
  title: Persona
  load_mode: ALWAYS
- entity_id: retired
  entity_type: KNOWLEDGE
  title: Retired
  is_active: false
";

const OVERRIDE_FILE: &str = "expectations_2026-01-01.json";

/// A scratch project: six entities (one inactive), four semantic cases, T4 under a human
/// override that adds `gamma`.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("kb")).unwrap();
    std::fs::write(root.join("kb/entities.yaml"), KB).unwrap();
    let semantic = root.join("test_banks/semantic");
    std::fs::create_dir_all(semantic.join("history")).unwrap();
    let case = |id: &str, prompt: &str, e: &ExpectationSet| {
        json!({"test_id": id, "name": format!("case {id}"), "prompt": prompt,
               "expected_primary": e.expected_primary, "expected_secondary": e.expected_secondary,
               "not_expected": e.not_expected, "rank_check": e.rank_check, "user_state": {}})
    };
    let bank = json!({
        "bank_type": "SEMANTIC", "version": "2.0",
        "tests": [
            case("T1", "alpha things", &set(&["alpha"], &["beta"], &[], &[("alpha", "beta")])),
            case("T2", "beta things", &set(&["beta"], &[], &[], &[])),
            case("T3", "gamma things", &set(&["gamma"], &[], &["crisis"], &[])),
            case("T4", "alpha again", &set(&["alpha"], &[], &[], &[])),
        ]
    });
    std::fs::write(
        semantic.join("bank.json"),
        serde_json::to_string_pretty(&bank).unwrap(),
    )
    .unwrap();
    let history = json!({
        "version": "2026-01-01T00:00:00Z",
        "changes": [{
            "test_id": "T4",
            "previous": {"expected_primary": ["alpha"]},
            "updated": {"expected_primary": ["alpha"], "expected_secondary": ["beta"]},
            "opus_reasoning": "earlier",
            "human_override": {
                "expected_primary": ["alpha"], "expected_secondary": ["gamma"],
                "not_expected": [], "rank_check": [],
                "override_date": "2026-01-02", "reason": "clinical review", "reviewer": "Dr. R"
            }
        }],
        "unchanged_count": 3, "changed_count": 1
    });
    std::fs::write(
        semantic.join("history").join(OVERRIDE_FILE),
        serde_json::to_string_pretty(&history).unwrap(),
    )
    .unwrap();
    dir
}

fn load(root: &Path) -> Project {
    Project::load(root).unwrap()
}

fn day(d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, d, h, 0, 0).unwrap()
}

/// Every file under `root` with its bytes.
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.strip_prefix(root).unwrap().to_owned(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

fn history_dir(root: &Path) -> PathBuf {
    root.join("test_banks/semantic/history")
}

fn history_names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(history_dir(root))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn request(scope: Scope) -> CalibrationRequest {
    CalibrationRequest {
        scope,
        kb_version: Some("v9".into()),
        concurrency: 2,
        ..CalibrationRequest::default()
    }
}

/// The script of the main scenario: T1 unchanged (reordered), T2 changed, T3 unchanged, T4
/// differs from its override.
#[allow(clippy::unnecessary_wraps)] // the shape of a script
fn main_script(id: &str, _attempt: usize) -> Result<String, ProviderError> {
    Ok(match id {
        "T1" => reply(&["alpha"], &["beta"], &[], &[("alpha", "beta")]),
        "T2" => reply(&["beta"], &["gamma"], &["crisis"], &[]),
        "T3" => format!("```json\n{}\n```", reply(&["gamma"], &[], &["crisis"], &[])),
        "T4" => reply(&["alpha"], &["beta"], &[], &[]),
        other => panic!("unexpected case {other}"),
    })
}

fn status(outcome: &CalibrationOutcome) -> Vec<(&str, CaseStatus)> {
    outcome
        .cases
        .iter()
        .map(|c| (c.test_id.as_str(), c.status))
        .collect()
}

#[tokio::test]
async fn changed_unchanged_and_override_kept() {
    let dir = project();
    let root = dir.path();
    let before = std::fs::read(history_dir(root).join(OVERRIDE_FILE)).unwrap();
    let model = Scripted::new(main_script);
    let outcome = calibrate(&load(root), &model, &request(Scope::Full), day(21, 10))
        .await
        .unwrap();
    assert_eq!(
        status(&outcome),
        [
            ("T1", CaseStatus::Unchanged),
            ("T2", CaseStatus::Changed),
            ("T3", CaseStatus::Unchanged),
            ("T4", CaseStatus::OverrideKept),
        ]
    );
    let c = outcome.counts;
    assert_eq!(
        (
            c.selected,
            c.changed,
            c.unchanged,
            c.overrides_kept,
            c.errors
        ),
        (4, 1, 2, 1, 0)
    );
    assert_eq!(outcome.usage.requests, 4);
    assert_eq!(
        outcome.cases[3].previous_source,
        "human_override_2026-01-02"
    );

    // The system prompt carries every active entity, sorted, and no inactive one.
    let requests = model.requests();
    let system = requests[0].system.clone().unwrap();
    assert!(
        requests
            .iter()
            .all(|r| r.system.as_deref() == Some(system.as_str()))
    );
    let order: Vec<usize> = [
        "### alpha",
        "### beta",
        "### crisis",
        "### gamma",
        "### persona",
    ]
    .iter()
    .map(|h| system.find(h).unwrap_or_else(|| panic!("{h} missing")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert!(!system.contains("### retired"));
    assert!(system.contains("summary: The alpha concept."));

    // The history file: the seed's schema, T2 changed, T4 with its override carried forward.
    let path = outcome.history_file.clone().unwrap();
    assert!(path.ends_with("expectations_2026-11-21.json"));
    let file: Value = read_json(&path);
    assert_eq!(file["version"], "2026-11-21T10:00:00Z");
    assert_eq!(file["calibration_trigger"], "full_recalibration");
    assert_eq!(file["kb_version"], "v9");
    assert_eq!(
        (
            file["changed_count"].as_u64(),
            file["unchanged_count"].as_u64()
        ),
        (Some(2), Some(2))
    );
    let history: HistoryFile = read_json(&path);
    let ids: Vec<&str> = history.changes.iter().map(|c| c.test_id.as_str()).collect();
    assert_eq!(ids, ["T2", "T4"]);
    assert_eq!(
        history.changes[0].previous,
        Some(set(&["beta"], &[], &[], &[]))
    );
    assert_eq!(history.changes[0].human_override, None);
    assert_eq!(file["changes"][0]["human_override"], Value::Null);
    let t4 = &history.changes[1];
    assert_eq!(t4.updated, Some(set(&["alpha"], &["beta"], &[], &[])));
    assert_eq!(
        t4.opus_reasoning.as_deref(),
        Some("because the message says so")
    );
    let kept = t4.human_override.as_ref().unwrap();
    assert_eq!(
        (
            kept.expected_secondary.clone(),
            kept.override_date.as_deref(),
            kept.reviewer.as_deref()
        ),
        (vec!["gamma".to_owned()], Some("2026-01-02"), Some("Dr. R"))
    );
    assert_eq!(
        std::fs::read(history_dir(root).join(OVERRIDE_FILE)).unwrap(),
        before
    );

    // Resolution afterwards: T2 from the new calibration, T4 still the human override.
    let p = load(root);
    let resolve = |id: &str| {
        let case = &p
            .banks
            .semantic
            .iter()
            .find(|l| l.case.test_id == id)
            .unwrap()
            .case;
        p.expectations.resolve(case)
    };
    assert_eq!(resolve("T2").source.to_string(), "opus_2026-11-21");
    assert_eq!(
        resolve("T2").expectations,
        set(&["beta"], &["gamma"], &["crisis"], &[])
    );
    assert_eq!(
        resolve("T4").source.to_string(),
        "human_override_2026-01-02"
    );
    assert_eq!(resolve("T1").source.to_string(), "original");

    // Raw replies and the log.
    let raw: Value = read_json(outcome.responses_file.as_ref().unwrap());
    assert!(
        outcome
            .responses_file
            .as_ref()
            .unwrap()
            .ends_with("calibration/opus_responses/calibration_2026-11-21.json")
    );
    assert_eq!(raw["cases"].as_array().unwrap().len(), 4);
    assert!(
        raw["cases"][2]["replies"][0]
            .as_str()
            .unwrap()
            .starts_with("```json")
    );
    assert_eq!(raw["model"], "test/scripted");
    let log: Vec<Value> = read_json(&root.join("calibration/calibration_log.json"));
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["run_id"], outcome.run_id.as_str());
    assert_eq!(log[0]["counts"]["overrides_kept"], 1);
    assert_eq!(
        log[0]["history_file"],
        "test_banks/semantic/history/expectations_2026-11-21.json"
    );
    assert_eq!(log[0]["test_ids"], json!(["T1", "T2", "T3", "T4"]));

    // The outcome serialises for --json and the HTTP API.
    let v = serde_json::to_value(&outcome).unwrap();
    assert_eq!(v["cases"][3]["status"], "override_kept");
    assert_eq!(v["scope"], "full");
}

#[tokio::test]
async fn an_invalid_reply_gets_one_corrective_retry() {
    let dir = project();
    let root = dir.path();
    let model = Scripted::new(|id, attempt| {
        Ok(match (id, attempt) {
            ("T1", 1) => reply(&["alpha", "nonexistent"], &[], &[], &[]),
            ("T1", _) => reply(&["alpha"], &["gamma"], &[], &[]),
            ("T2", _) => "I think beta.".to_owned(),
            ("T3", _) => reply(&["gamma"], &["retired"], &[], &[]),
            _ => panic!("unexpected"),
        })
    });
    let mut req = request(Scope::Single);
    req.test_ids = vec!["T3".into(), "T1".into(), "T2".into()];
    let outcome = calibrate(&load(root), &model, &req, day(21, 10))
        .await
        .unwrap();
    assert_eq!(
        status(&outcome),
        [
            ("T1", CaseStatus::Changed),
            ("T2", CaseStatus::Error),
            ("T3", CaseStatus::Error)
        ]
    );
    assert_eq!(outcome.cases[0].attempts, 2);
    let err = outcome.cases[1].error.as_deref().unwrap();
    assert!(
        err.contains("invalid reply after a corrective retry") && err.contains("no JSON object"),
        "{err}"
    );
    // An inactive entity is not a valid id.
    assert!(
        outcome.cases[2]
            .error
            .as_deref()
            .unwrap()
            .contains("`retired`")
    );

    // The corrective turn: the bad reply, then the validation error, as a follow-up user turn.
    let retry = model
        .requests()
        .into_iter()
        .find(|r| test_id_of(r) == "T1" && r.messages.len() == 3)
        .unwrap();
    assert!(retry.messages[1].content.contains("nonexistent"));
    assert!(
        retry.messages[2]
            .content
            .contains("`nonexistent` is not an entity_id")
    );
    assert_eq!(model.requests().len(), 6);

    // Only T1 is written; the errors are kept in the raw file.
    let history: HistoryFile = read_json(outcome.history_file.as_ref().unwrap());
    assert_eq!(history.changes.len(), 1);
    assert_eq!(history.changes[0].test_id, "T1");
    assert_eq!(history.calibration_trigger.as_deref(), Some("single_case"));
    let raw: Value = read_json(outcome.responses_file.as_ref().unwrap());
    assert_eq!(raw["cases"][1]["replies"].as_array().unwrap().len(), 2);
    assert_eq!(raw["cases"][1]["reply_errors"].as_array().unwrap().len(), 2);
    let log: Vec<Value> = read_json(&root.join("calibration/calibration_log.json"));
    assert_eq!(log[0]["counts"]["errors"], 2);
}

#[tokio::test]
async fn a_failed_call_is_an_error_case_without_a_corrective_retry() {
    let dir = project();
    let model = Scripted::new(|id, _| {
        if id == "T2" {
            Err(ProviderError::malformed("boom"))
        } else {
            main_script(id, 1)
        }
    });
    let outcome = calibrate(
        &load(dir.path()),
        &model,
        &request(Scope::Full),
        day(21, 10),
    )
    .await
    .unwrap();
    assert_eq!(outcome.cases[1].status, CaseStatus::Error);
    assert_eq!(outcome.cases[1].attempts, 1);
    assert!(
        outcome.cases[1]
            .error
            .as_deref()
            .unwrap()
            .contains("chat call failed")
    );
    assert_eq!(model.requests().len(), 4);
}

#[tokio::test]
async fn usage_errors_come_before_any_call_and_write_nothing() {
    let dir = project();
    let root = dir.path();
    let before = tree(root);
    let p = load(root);
    let model = Scripted::new(|_, _| panic!("no call expected"));
    let check = |req: CalibrationRequest, want: &'static str| {
        let (p, model) = (&p, &model);
        async move {
            let e = calibrate(p, model, &req, day(21, 10)).await.unwrap_err();
            assert!(matches!(e, HarnessError::Usage(_)), "{e:?}");
            assert!(e.to_string().contains(want), "{e} should contain {want}");
        }
    };
    let mut single = request(Scope::Single);
    check(single.clone(), "needs the test ids").await;
    single.test_ids = vec!["T1".into(), "NOPE-1".into()];
    check(single, "unknown test id `NOPE-1`").await;
    check(request(Scope::Affected), "needs the added entities").await;
    let mut affected = request(Scope::Affected);
    affected.added_entities = vec!["ghost".into()];
    check(affected, "`ghost`").await;
    let mut full = request(Scope::Full);
    full.test_ids = vec!["T1".into()];
    check(full, "only for scope `single`").await;
    assert_eq!(tree(root), before);
}

#[tokio::test]
async fn two_calibrations_on_one_day_make_two_files_and_the_second_wins() {
    let dir = project();
    let root = dir.path();
    let first = calibrate(
        &load(root),
        &Scripted::new(main_script),
        &request(Scope::Full),
        day(21, 9),
    )
    .await
    .unwrap();
    let first_path = first.history_file.unwrap();
    let first_bytes = std::fs::read(&first_path).unwrap();

    let model = Scripted::new(|id, a| match id {
        "T2" => Ok(reply(&["beta"], &["alpha"], &[], &[])),
        _ => main_script(id, a),
    });
    let second = calibrate(&load(root), &model, &request(Scope::Full), day(21, 15))
        .await
        .unwrap();
    let second_path = second.history_file.unwrap();
    assert!(
        second_path.ends_with("expectations_2026-11-21_02.json"),
        "{second_path:?}"
    );
    assert_eq!(std::fs::read(&first_path).unwrap(), first_bytes);
    assert_eq!(
        history_names(root),
        [
            OVERRIDE_FILE,
            "expectations_2026-11-21.json",
            "expectations_2026-11-21_02.json"
        ]
    );
    // The second run saw the first's calibration as the previous expectations.
    assert_eq!(second.cases[1].previous_source, "opus_2026-11-21");
    let p = load(root);
    assert_eq!(p.expectations.files()[0], second_path);
    let t2 = &p.banks.semantic[1].case;
    let r = p.expectations.resolve(t2);
    assert_eq!(r.source.to_string(), "opus_2026-11-21_02");
    assert_eq!(r.expectations, set(&["beta"], &["alpha"], &[], &[]));

    assert!(
        second
            .responses_file
            .unwrap()
            .ends_with("calibration_2026-11-21_02.json")
    );
    let log: Vec<Value> = read_json(&root.join("calibration/calibration_log.json"));
    assert_eq!(log.len(), 2);
    assert_eq!(
        log[1]["history_file"],
        "test_banks/semantic/history/expectations_2026-11-21_02.json"
    );
}

#[tokio::test]
async fn nothing_changed_writes_no_history_but_logs_the_run() {
    let dir = project();
    let root = dir.path();
    let model = Scripted::new(|id, a| match id {
        "T2" => Ok(reply(&["beta"], &[], &[], &[])),
        "T4" => Ok(reply(&["alpha"], &["gamma"], &[], &[])),
        _ => main_script(id, a),
    });
    let outcome = calibrate(&load(root), &model, &request(Scope::Full), day(21, 9))
        .await
        .unwrap();
    assert_eq!(outcome.counts.unchanged, 4);
    assert_eq!(outcome.history_file, None);
    assert_eq!(history_names(root), [OVERRIDE_FILE]);
    let log: Vec<Value> = read_json(&root.join("calibration/calibration_log.json"));
    assert_eq!((log.len(), &log[0]["history_file"]), (1, &Value::Null));
}

#[tokio::test]
async fn a_dry_run_writes_nothing() {
    let dir = project();
    let root = dir.path();
    let before = tree(root);
    let mut req = request(Scope::Full);
    req.dry_run = true;
    let outcome = calibrate(&load(root), &Scripted::new(main_script), &req, day(21, 9))
        .await
        .unwrap();
    assert_eq!(outcome.counts.changed, 1);
    assert_eq!(
        (
            &outcome.history_file,
            &outcome.responses_file,
            &outcome.log_file
        ),
        (&None, &None, &None)
    );
    assert_eq!(tree(root), before);
}

#[tokio::test]
async fn a_malformed_log_is_an_error_and_nothing_is_written() {
    let dir = project();
    let root = dir.path();
    std::fs::create_dir_all(root.join("calibration")).unwrap();
    std::fs::write(
        root.join("calibration/calibration_log.json"),
        "{\"not\": \"a list\"}",
    )
    .unwrap();
    let before = tree(root);
    let model = Scripted::new(main_script);
    let e = calibrate(&load(root), &model, &request(Scope::Full), day(21, 9))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("calibration_log.json"), "{e}");
    assert!(model.requests().is_empty());
    assert_eq!(tree(root), before);
}

#[tokio::test]
async fn affected_selects_by_resolved_expectations_and_top_candidates() {
    let dir = project();
    let p = load(dir.path());
    let model = Scripted::new(main_script);
    let mut req = request(Scope::Affected);
    req.added_entities = vec!["gamma".into()];
    req.dry_run = true;
    // T3 names gamma in the bank; T4 only through its human override.
    let outcome = calibrate(&p, &model, &req, day(21, 9)).await.unwrap();
    assert_eq!(outcome.test_ids(), ["T3", "T4"]);
    assert_eq!(outcome.trigger, "kb_entity_added");
    // T1 is selected through its top candidates.
    req.top_candidates =
        HashMap::from([("T1".to_owned(), vec!["beta".to_owned(), "gamma".to_owned()])]);
    let outcome = calibrate(&p, &model, &req, day(21, 9)).await.unwrap();
    assert_eq!(outcome.test_ids(), ["T1", "T3", "T4"]);
}

#[test]
fn the_calibration_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let dir = project();
    let p = load(dir.path());
    let model = Scripted::new(main_script);
    let req = request(Scope::Full);
    let fut = calibrate(&p, &model, &req, day(21, 9));
    assert_send(&fut);
}

#[test]
fn an_override_is_a_new_file_and_resolves_as_human_override() {
    let dir = project();
    let root = dir.path();
    let before = tree(root);
    let p = load(root);
    let req = OverrideRequest {
        test_id: "T1".into(),
        expectations: set(&["alpha"], &["gamma"], &["crisis"], &[("alpha", "gamma")]),
        reason: "  clinical review: gamma matters here ".into(),
        reviewer: Some("Dr. Q".into()),
    };
    let outcome = record_override(&p, &req, day(21, 9)).unwrap();
    assert_eq!(outcome.previous_source, "original");
    assert_eq!(
        outcome.previous,
        set(&["alpha"], &["beta"], &[], &[("alpha", "beta")])
    );
    assert!(
        outcome
            .history_file
            .ends_with("expectations_2026-11-21.json")
    );
    // Every existing file is untouched; one file is new.
    let after = tree(root);
    assert!(before.iter().all(|(k, v)| after.get(k) == Some(v)));
    assert_eq!(after.len(), before.len() + 1);

    let file: Value = read_json(&outcome.history_file);
    assert_eq!(file["calibration_trigger"], "human_override");
    let change = &file["changes"][0];
    assert!(change.get("updated").is_none());
    assert_eq!(change["human_override"]["override_date"], "2026-11-21");
    assert_eq!(
        change["human_override"]["reason"],
        "clinical review: gamma matters here"
    );
    assert_eq!(change["human_override"]["reviewer"], "Dr. Q");

    let p = load(root);
    let r = p.expectations.resolve(&p.banks.semantic[0].case);
    assert_eq!(r.source.to_string(), "human_override_2026-11-21");
    assert_eq!(r.expectations, req.expectations);

    // A calibration later that day keeps the override and sorts after it.
    let model = Scripted::new(main_script);
    let mut creq = request(Scope::Single);
    creq.test_ids = vec!["T1".into()];
    let outcome = calibrate(&p, &model, &creq, day(21, 12)).await_blocking();
    assert_eq!(outcome.cases[0].status, CaseStatus::OverrideKept);
    assert!(
        outcome
            .history_file
            .unwrap()
            .ends_with("expectations_2026-11-21_02.json")
    );
    let p = load(root);
    let r = p.expectations.resolve(&p.banks.semantic[0].case);
    assert_eq!(r.source.to_string(), "human_override_2026-11-21");
}

#[test]
fn invalid_overrides_are_usage_errors_and_write_nothing() {
    let dir = project();
    let root = dir.path();
    let before = tree(root);
    let p = load(root);
    let ok = OverrideRequest {
        test_id: "T1".into(),
        expectations: set(&["alpha"], &[], &[], &[]),
        reason: "because".into(),
        reviewer: None,
    };
    let check = |req: OverrideRequest, want: &str| {
        let e = record_override(&p, &req, day(21, 9)).unwrap_err();
        assert!(matches!(e, HarnessError::Usage(_)), "{e:?}");
        assert!(e.to_string().contains(want), "{e} should contain {want}");
    };
    check(
        OverrideRequest {
            test_id: "NOPE".into(),
            ..ok.clone()
        },
        "unknown test id `NOPE`",
    );
    check(
        OverrideRequest {
            reason: "  ".into(),
            ..ok.clone()
        },
        "the reason is empty",
    );
    check(
        OverrideRequest {
            expectations: set(&["alpha", "ghost"], &[], &[], &[]),
            ..ok.clone()
        },
        "unknown entity `ghost`",
    );
    check(
        OverrideRequest {
            expectations: set(&["alpha"], &[], &["alpha"], &[]),
            ..ok.clone()
        },
        "`alpha` is in both expected_primary and not_expected",
    );
    check(
        OverrideRequest {
            expectations: set(&[], &["alpha"], &[], &[]),
            ..ok.clone()
        },
        "expected_primary is empty",
    );
    check(
        OverrideRequest {
            expectations: set(&["alpha"], &[], &["crisis"], &[("alpha", "crisis")]),
            ..ok
        },
        "`crisis` is not an expected entity",
    );
    assert_eq!(tree(root), before);
}

/// Runs a future to completion on a small runtime (for the synchronous tests).
trait AwaitBlocking: std::future::Future {
    fn await_blocking(self) -> CalibrationOutcome;
}

impl<F: std::future::Future<Output = Result<CalibrationOutcome, HarnessError>>> AwaitBlocking
    for F
{
    fn await_blocking(self) -> CalibrationOutcome {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(self)
            .unwrap()
    }
}
