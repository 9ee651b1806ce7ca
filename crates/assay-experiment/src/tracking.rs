//! Tracking (seed 001 OPT-007, OPT-015): the experiment as three runs, `<name>_baseline`,
//! `<name>_optimize` and `<name>_eval`, each with params, tags and metrics.
//!
//! * Params: the test-data versions and fingerprints, seed, trials, directions, target,
//!   grader, threshold, and each agent's prompt index and sha256.
//! * Tags: each agent's prompt text (`prompt.<agent>`, cut to 5,000 characters: MLflow keeps
//!   8,000 per tag), and for the optimize run the Pareto front and the best trial.
//! * Metrics: `factually_correct_count`, `average_composite_score`,
//!   `factual_correctness_percentage` — once for the baseline and eval runs, per trial as steps
//!   (step = trial number) for the optimize run — plus calls, tokens and cost.
//!
//! Sinks: [`Mlflow`] over MLflow's REST API (`experiments/get-by-name`, `experiments/create`,
//! `runs/create`, `runs/log-batch`, `runs/update`; every POST with `Content-Type:
//! application/json`), or, without `--mlflow-uri`, [`write_local`]: the same runs as JSON files
//! under `experiments/<name>/tracking/`.
//!
//! [`optuna_journal`] exports the study in Optuna's `JournalFileStorage` format (one JSON
//! operation a line, Optuna 4/5's operation codes: 0 create study, 2 a study user attribute,
//! 4 a create-trial carrying its params, distributions, values and state), which `optuna-dashboard` and
//! `optuna.storages.JournalStorage(JournalFileBackend(path))` open.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assay_core::experiment::{ExperimentReport, Metrics, StepResult, TrialOutcome, UsageTotals};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The Optuna journal's file name inside the experiment folder.
pub const OPTUNA_JOURNAL: &str = "optuna_journal.log";
/// Characters of a prompt kept in a tag.
const TAG_CHARS: usize = 5000;

/// Tracking failed: an infrastructure error.
#[derive(Debug, thiserror::Error)]
pub enum TrackingError {
    /// MLflow refused or could not be reached.
    #[error("MLflow {endpoint}: {message}")]
    Mlflow {
        /// The endpoint.
        endpoint: String,
        /// What went wrong.
        message: String,
    },
    /// A local file could not be written.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// One metric point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricPoint {
    /// The metric's key.
    pub key: String,
    /// Its value.
    pub value: f64,
    /// The step (trial number for the optimize run, else 0).
    pub step: u64,
}

/// One tracked run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackedRun {
    /// `<name>_baseline`, `<name>_optimize` or `<name>_eval`.
    pub name: String,
    /// Params (MLflow: immutable per run).
    pub params: BTreeMap<String, String>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Metrics.
    pub metrics: Vec<MetricPoint>,
}

fn metric_points(m: &Metrics, step: u64, out: &mut Vec<MetricPoint>) {
    for (key, value) in [
        ("factually_correct_count", m.factually_correct_count as f64),
        ("average_composite_score", m.average_composite_score),
        (
            "factual_correctness_percentage",
            m.factual_correctness_percentage,
        ),
    ] {
        out.push(MetricPoint {
            key: key.into(),
            value,
            step,
        });
    }
}

fn usage_points(prefix: &str, u: &UsageTotals, out: &mut Vec<MetricPoint>) {
    for (key, value) in [
        ("calls", u.calls as f64),
        ("cache_hits", u.cache_hits as f64),
        ("input_tokens", u.input_tokens as f64),
        ("output_tokens", u.output_tokens as f64),
    ] {
        out.push(MetricPoint {
            key: format!("{prefix}_{key}"),
            value,
            step: 0,
        });
    }
    if let Some(c) = u.cost_usd {
        out.push(MetricPoint {
            key: format!("{prefix}_cost_usd"),
            value: c,
            step: 0,
        });
    }
}

fn cut(text: &str) -> String {
    text.chars().take(TAG_CHARS).collect()
}

fn common(report: &ExperimentReport) -> BTreeMap<String, String> {
    let mut p = BTreeMap::new();
    p.insert("experiment".into(), report.name.clone());
    p.insert("seed".into(), report.seed.to_string());
    p.insert("target".into(), report.target.clone());
    p.insert("grader".into(), report.grader.clone());
    p.insert("threshold".into(), report.threshold.to_string());
    p
}

fn step_params(step: &StepResult, p: &mut BTreeMap<String, String>) {
    p.insert("data_kind".into(), step.data.kind.clone());
    p.insert(
        "data_version".into(),
        step.data.version.clone().unwrap_or_else(|| "-".into()),
    );
    p.insert("data_path".into(), step.data.path.clone());
    p.insert("data_fingerprint".into(), step.data.fingerprint.clone());
    p.insert("cases".into(), step.data.cases.to_string());
    for (agent, i) in &step.params {
        p.insert(format!("prompt_index.{agent}"), i.to_string());
    }
    for (agent, h) in &step.prompt_sha256 {
        p.insert(format!("prompt_sha256.{agent}"), h.clone());
    }
}

/// The three runs of a finished experiment.
pub fn runs_of(
    report: &ExperimentReport,
    baseline_prompts: &BTreeMap<String, String>,
) -> Vec<TrackedRun> {
    let mut runs = Vec::new();
    // Baseline.
    let mut params = common(report);
    step_params(&report.baseline, &mut params);
    let mut metrics = Vec::new();
    metric_points(&report.baseline.metrics, 0, &mut metrics);
    runs.push(TrackedRun {
        name: format!("{}_baseline", report.name),
        params,
        tags: baseline_prompts
            .iter()
            .map(|(a, t)| (format!("prompt.{a}"), cut(t)))
            .collect(),
        metrics,
    });
    // Optimize.
    let mut params = common(report);
    params.insert("trials".into(), report.trials_requested.to_string());
    params.insert("directions".into(), report.directions.join(", "));
    params.insert("search_mode".into(), report.search_mode.clone());
    params.insert(
        "optimization_version".into(),
        report
            .baseline
            .data
            .version
            .clone()
            .unwrap_or_else(|| "-".into()),
    );
    params.insert(
        "optimization_fingerprint".into(),
        report.baseline.data.fingerprint.clone(),
    );
    for (agent, n) in &report.agents {
        params.insert(format!("prompts_available.{agent}"), n.to_string());
    }
    let mut metrics = Vec::new();
    for t in &report.trials {
        if let Some(m) = &t.metrics
            && matches!(t.outcome, TrialOutcome::Complete | TrialOutcome::Duplicate)
        {
            metric_points(m, t.number as u64, &mut metrics);
        }
    }
    if let Some(m) = report
        .best_trial
        .and_then(|n| report.trials.iter().find(|t| t.number == n))
        .and_then(|best| best.metrics.as_ref())
    {
        let mut best = Vec::new();
        metric_points(m, 0, &mut best);
        metrics.extend(best.into_iter().map(|p| MetricPoint {
            key: format!("best_{}", p.key),
            ..p
        }));
    }
    usage_points("target", &report.usage.target, &mut metrics);
    usage_points("grader", &report.usage.grader, &mut metrics);
    if !report.usage.proposer.is_zero() {
        usage_points("proposer", &report.usage.proposer, &mut metrics);
    }
    let mut tags: BTreeMap<String, String> = report
        .best_prompts
        .iter()
        .map(|(a, t)| (format!("prompt.{a}"), cut(t)))
        .collect();
    tags.insert(
        "pareto_front".into(),
        serde_json::to_string(
            &report
                .trials
                .iter()
                .filter(|t| report.pareto_front.contains(&t.number))
                .map(|t| json!({"trial": t.number, "values": t.values, "params": t.params}))
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default(),
    );
    if let Some(b) = report.best_trial {
        tags.insert("best_trial".into(), b.to_string());
        tags.insert(
            "best_params".into(),
            serde_json::to_string(&report.best_params).unwrap_or_default(),
        );
    }
    if !report.proposals.is_empty() {
        let brief: Vec<serde_json::Value> = report
            .proposals
            .iter()
            .map(|p| {
                serde_json::json!({"round": p.round, "k": p.k, "agent": p.agent,
                    "sha256": p.sha256, "status": p.status, "file": p.file})
            })
            .collect();
        tags.insert(
            "proposals".into(),
            cut(&serde_json::to_string(&brief).unwrap_or_default()),
        );
    }
    if let Some(h) = &report.hand_written {
        tags.insert("proposals_vs_hand_written".into(), h.verdict.clone());
    }
    runs.push(TrackedRun {
        name: format!("{}_optimize", report.name),
        params,
        tags,
        metrics,
    });
    // Eval.
    if let Some(eval) = &report.evaluation {
        let mut params = common(report);
        step_params(eval, &mut params);
        let mut metrics = Vec::new();
        metric_points(&eval.metrics, 0, &mut metrics);
        if let Some(b) = &report.evaluation_baseline {
            let mut v = Vec::new();
            metric_points(&b.metrics, 0, &mut v);
            metrics.extend(v.into_iter().map(|p| MetricPoint {
                key: format!("baseline_{}", p.key),
                ..p
            }));
        }
        let mut tags: BTreeMap<String, String> = report
            .best_prompts
            .iter()
            .map(|(a, t)| (format!("prompt.{a}"), cut(t)))
            .collect();
        if let Some(c) = report.comparisons.iter().find(|c| c.set == "evaluation") {
            tags.insert("significance".into(), c.significance.verdict.clone());
            metrics.push(MetricPoint {
                key: "mcnemar_p_value".into(),
                value: c.significance.mcnemar.p_value,
                step: 0,
            });
        }
        runs.push(TrackedRun {
            name: format!("{}_eval", report.name),
            params,
            tags,
            metrics,
        });
    }
    runs
}

/// Writes the runs as `tracking/<run>.json` (atomically, replacing an earlier copy).
pub fn write_local(dir: &Path, runs: &[TrackedRun]) -> Result<Vec<PathBuf>, TrackingError> {
    let mut out = Vec::new();
    for run in runs {
        let path = dir.join(format!("{}.json", run.name));
        let io = |e: &dyn std::fmt::Display| TrackingError::Io {
            path: path.clone(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(|e| io(&e))?;
        let json = serde_json::to_vec_pretty(run).map_err(|e| io(&e))?;
        assay_project::results::write_replace(&path, &json).map_err(|e| io(&e))?;
        out.push(path);
    }
    Ok(out)
}

/// An MLflow tracking server.
#[derive(Debug, Clone)]
pub struct Mlflow {
    base: String,
    client: reqwest::Client,
}

impl Mlflow {
    /// A client of the server at `uri` (e.g. `http://127.0.0.1:5000`).
    pub fn new(uri: &str) -> Result<Mlflow, TrackingError> {
        assay_telemetry::tls::ensure_provider();
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| TrackingError::Mlflow {
                endpoint: uri.to_owned(),
                message: e.to_string(),
            })?;
        Ok(Mlflow {
            base: format!("{}/api/2.0/mlflow", uri.trim_end_matches('/')),
            client,
        })
    }

    async fn call(
        &self,
        endpoint: &str,
        body: Option<&Value>,
        query: &[(&str, &str)],
    ) -> Result<Value, TrackingError> {
        let url = format!("{}/{endpoint}", self.base);
        let request = if let Some(b) = body {
            // MLflow answers 400 to a POST without this content type.
            self.client
                .post(&url)
                .header("Content-Type", "application/json")
                .body(b.to_string())
        } else {
            let url = reqwest::Url::parse_with_params(&url, query).map_err(|e| {
                TrackingError::Mlflow {
                    endpoint: endpoint.to_owned(),
                    message: e.to_string(),
                }
            })?;
            self.client.get(url)
        };
        let fail = |message: String| TrackingError::Mlflow {
            endpoint: endpoint.to_owned(),
            message,
        };
        let response = request
            .send()
            .await
            .map_err(|e| fail(format!("cannot reach it: {e}")))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| fail(e.to_string()))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !status.is_success() {
            return Err(fail(format!(
                "HTTP {status}: {}",
                text.chars().take(500).collect::<String>()
            )));
        }
        Ok(value)
    }

    /// The id of experiment `name`, created when missing.
    pub async fn experiment_id(&self, name: &str) -> Result<String, TrackingError> {
        if let Ok(v) = self
            .call(
                "experiments/get-by-name",
                None,
                &[("experiment_name", name)],
            )
            .await
            && let Some(id) = v["experiment"]["experiment_id"].as_str()
        {
            return Ok(id.to_owned());
        }
        let v = self
            .call("experiments/create", Some(&json!({"name": name})), &[])
            .await?;
        v["experiment_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| TrackingError::Mlflow {
                endpoint: "experiments/create".into(),
                message: format!("no experiment_id in {v}"),
            })
    }

    /// Logs the runs into experiment `experiment` and returns their run ids.
    pub async fn log(
        &self,
        experiment: &str,
        runs: &[TrackedRun],
    ) -> Result<Vec<String>, TrackingError> {
        let id = self.experiment_id(experiment).await?;
        let now = chrono::Utc::now().timestamp_millis();
        let mut ids = Vec::new();
        for run in runs {
            let v = self
                .call(
                    "runs/create",
                    Some(
                        &json!({"experiment_id": id, "run_name": run.name, "start_time": now,
                                 "tags": [{"key": "assay.tool", "value": "assay optimize"}]}),
                    ),
                    &[],
                )
                .await?;
            let run_id = v["run"]["info"]["run_id"]
                .as_str()
                .ok_or_else(|| TrackingError::Mlflow {
                    endpoint: "runs/create".into(),
                    message: format!("no run id in {v}"),
                })?
                .to_owned();
            let params: Vec<Value> = run
                .params
                .iter()
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect();
            let tags: Vec<Value> = run
                .tags
                .iter()
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect();
            let metrics: Vec<Value> = run
                .metrics
                .iter()
                .map(|m| json!({"key": m.key, "value": m.value, "timestamp": now, "step": m.step}))
                .collect();
            // log-batch takes at most 100 params, 100 tags and 1,000 metrics a call.
            for chunk in params.chunks(100) {
                self.call(
                    "runs/log-batch",
                    Some(&json!({"run_id": run_id, "params": chunk})),
                    &[],
                )
                .await?;
            }
            for chunk in tags.chunks(100) {
                self.call(
                    "runs/log-batch",
                    Some(&json!({"run_id": run_id, "tags": chunk})),
                    &[],
                )
                .await?;
            }
            for chunk in metrics.chunks(1000) {
                self.call(
                    "runs/log-batch",
                    Some(&json!({"run_id": run_id, "metrics": chunk})),
                    &[],
                )
                .await?;
            }
            self.call(
                "runs/update",
                Some(&json!({"run_id": run_id, "status": "FINISHED",
                             "end_time": chrono::Utc::now().timestamp_millis()})),
                &[],
            )
            .await?;
            ids.push(run_id);
        }
        Ok(ids)
    }
}

/// The study in Optuna's journal format (see the module docs).
pub fn optuna_journal(report: &ExperimentReport) -> String {
    const WORKER: &str = "assay-export";
    let directions: Vec<u8> = report
        .directions
        .iter()
        .map(|d| if d.starts_with("minimize") { 1 } else { 2 })
        .collect();
    let mut lines = vec![
        json!({"op_code": 0, "worker_id": WORKER, "study_name": report.name,
                                "directions": directions}),
    ];
    for (key, value) in [
        ("objectives", json!(report.directions)),
        ("best_trial", json!(report.best_trial)),
        ("search_mode", json!(report.search_mode)),
    ] {
        lines.push(json!({"op_code": 2, "worker_id": WORKER, "study_id": 0,
                          "user_attr": {key: value}}));
    }
    let time = |s: &str| {
        chrono::DateTime::parse_from_rfc3339(s).map_or_else(
            |_| "1970-01-01T00:00:00.000000".into(),
            |t| t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.6f").to_string(),
        )
    };
    let start = time(&report.started);
    for t in &report.trials {
        let mut distributions = serde_json::Map::new();
        let mut params = serde_json::Map::new();
        for (agent, &index) in &t.params {
            let n = report.agents.get(agent).copied().unwrap_or(index + 1);
            let choices: Vec<usize> = (0..n).collect();
            distributions.insert(
                agent.clone(),
                Value::String(
                    json!({"name": "CategoricalDistribution", "attributes": {"choices": choices}})
                        .to_string(),
                ),
            );
            params.insert(agent.clone(), json!(index as f64));
        }
        let (state, values) = match t.outcome {
            TrialOutcome::Complete | TrialOutcome::Duplicate => (1, Some(t.values.clone())),
            TrialOutcome::Pruned => (2, None),
            TrialOutcome::Failed => (3, None),
        };
        let (value, values) = match values {
            Some(v) if v.len() == 1 => (json!(v[0]), Value::Null),
            Some(v) => (Value::Null, json!(v)),
            None => (Value::Null, Value::Null),
        };
        let mut user_attrs = serde_json::Map::new();
        user_attrs.insert("origin".into(), json!(t.origin));
        if let Some(d) = t.duplicate_of {
            user_attrs.insert("duplicate_of".into(), json!(d));
        }
        if let Some(m) = &t.metrics {
            user_attrs.insert(
                "factually_correct_count".into(),
                json!(m.factually_correct_count),
            );
            user_attrs.insert(
                "average_composite_score".into(),
                json!(m.average_composite_score),
            );
        }
        lines.push(json!({
            "op_code": 4, "worker_id": WORKER, "study_id": 0,
            "datetime_start": start, "datetime_complete": start,
            "state": state, "value": value, "values": values,
            "distributions": distributions, "params": params,
            "user_attrs": user_attrs, "system_attrs": {}, "intermediate_values": {}
        }));
    }
    let mut out = String::new();
    for l in lines {
        out.push_str(&l.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use assay_core::experiment::{
        CaseResult, DataRef, EXPERIMENT_SCHEMA_VERSION, StepResult, TrialRecord, Usage,
    };

    use super::*;

    fn case(line: usize, correct: bool) -> CaseResult {
        CaseResult {
            line,
            question: "q".into(),
            expected: "a".into(),
            output: Some("a".into()),
            factually_correct: correct,
            correctness: None,
            correct_why: None,
            composite_score: if correct { 1.0 } else { 0.2 },
            rubric_pass: correct,
            rubric: None,
            error: None,
            assertions: None,
        }
    }

    fn step(name: &str, correct: bool) -> StepResult {
        let cases = vec![case(1, correct), case(2, false)];
        StepResult {
            step: name.into(),
            data: DataRef {
                kind: "optimization".into(),
                version: Some("v1.0.0".into()),
                path: "test_data/optimization/v1.0.0/test_cases.jsonl".into(),
                fingerprint: "f".into(),
                cases: 2,
            },
            params: BTreeMap::from([("planner".into(), 0)]),
            prompt_sha256: BTreeMap::from([("planner".into(), "h".into())]),
            metrics: Metrics::of(&cases),
            cases,
            duration_s: 0.0,
        }
    }

    fn trial(number: usize, index: usize, outcome: TrialOutcome, values: Vec<f64>) -> TrialRecord {
        TrialRecord {
            number,
            params: BTreeMap::from([("planner".into(), index)]),
            outcome,
            values,
            duplicate_of: None,
            metrics: Some(Metrics::of(&[case(1, index == 1)])),
            cases: Vec::new(),
            note: None,
            origin: "tpe".into(),
            duration_s: 0.0,
            worker: None,
            retried: Vec::new(),
        }
    }

    fn report() -> ExperimentReport {
        ExperimentReport {
            schema_version: EXPERIMENT_SCHEMA_VERSION,
            name: "exp".into(),
            started: "2026-11-25T09:00:00Z".into(),
            finished: "2026-11-25T09:10:00Z".into(),
            seed: 42,
            target: "chain".into(),
            grader: "test/grader".into(),
            grader_version: None,
            threshold: 0.8,
            directions: vec![
                "maximize factually_correct_count".into(),
                "maximize average_composite_score".into(),
            ],
            agents: BTreeMap::from([("planner".into(), 3)]),
            trials_requested: 3,
            search_mode: "TPE".into(),
            baseline: step("baseline", false),
            trials: vec![
                trial(0, 0, TrialOutcome::Complete, vec![0.0, 0.2]),
                trial(1, 1, TrialOutcome::Complete, vec![1.0, 0.6]),
                trial(2, 2, TrialOutcome::Pruned, Vec::new()),
            ],
            pareto_front: vec![1],
            best_trial: Some(1),
            best_params: BTreeMap::from([("planner".into(), 1)]),
            best_prompts: BTreeMap::from([("planner".into(), "Plan well.".into())]),
            baseline_prompts: BTreeMap::new(),
            evaluation: Some(step("evaluation", true)),
            evaluation_baseline: Some(step("evaluation_baseline", false)),
            comparisons: Vec::new(),
            usage: Usage::default(),
            estimate: None,
            prompt_files: BTreeMap::new(),
            proposals: Vec::new(),
            hand_written: None,
            correctness: None,
            disagreements: Vec::new(),
            tie: None,
        }
    }

    #[test]
    fn three_runs_with_per_trial_metrics_as_steps() {
        let baseline = BTreeMap::from([("planner".to_owned(), "Plan.".to_owned())]);
        let runs = runs_of(&report(), &baseline);
        let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["exp_baseline", "exp_optimize", "exp_eval"]);
        assert_eq!(runs[0].params["data_version"], "v1.0.0");
        assert_eq!(runs[0].tags["prompt.planner"], "Plan.");
        let steps: Vec<u64> = runs[1]
            .metrics
            .iter()
            .filter(|m| m.key == "factually_correct_count")
            .map(|m| m.step)
            .collect();
        assert_eq!(steps, [0, 1], "the pruned trial has no values");
        assert!(runs[1].tags["pareto_front"].contains("\"trial\":1"));
        assert!(
            runs[2]
                .metrics
                .iter()
                .any(|m| m.key == "baseline_factually_correct_count")
        );
    }

    #[test]
    fn the_optuna_journal_has_one_create_trial_per_trial() {
        let text = optuna_journal(&report());
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["op_code"], 0);
        assert_eq!(lines[0]["directions"], json!([2, 2]));
        let trials: Vec<&Value> = lines.iter().filter(|l| l["op_code"] == 4).collect();
        assert_eq!(trials.len(), 3);
        assert_eq!(trials[1]["values"], json!([1.0, 0.6]));
        assert_eq!(trials[1]["params"]["planner"], json!(1.0));
        assert_eq!(trials[2]["state"], 2);
        assert_eq!(trials[0]["datetime_start"], "2026-11-25T09:00:00.000000");
    }
}
