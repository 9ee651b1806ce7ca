//! Synthetic experiments and simulation reports for the web UI's tests and benchmark: an
//! optimizer experiment of any number of trials (finished, with `report.json`, or still
//! running, with only its journal) and a simulation report of any number of runs and turns,
//! written in the files' real formats, with `inject` put into every string a user or a model
//! can put there (prompts, questions, answers, reasoning, turns, tool arguments and results,
//! scenario names) so pages can be checked for escaping.
//!
//! Run alone (the benchmark, `bench/ui/run.sh`):
//! `cargo run --release --example ui_fixtures -- DIR [--trials N] [--runs N] [--turns N]`
//! writes `DIR/experiments/big/` and `DIR/sim/reports/report_20260101_000000.json`.

#![allow(dead_code, clippy::cast_precision_loss, clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use assay_core::experiment::{
    Bootstrap, CaseChange, CaseResult, Comparison, DataRef, EXPERIMENT_SCHEMA_VERSION,
    ExperimentReport, McNemar, McNemarMethod, Metrics, RubricGrade, Significance, StepResult,
    TrialOutcome, TrialRecord, Usage, UsageTotals,
};
use assay_core::simulation::{
    CheckResult, CheckStatus, CriterionScore, CriterionSummary, Ending, FailedBy, JudgeInfo,
    Judgement, RoleUsage, SIM_SCHEMA_VERSION, Scale, ScenarioRun, ScenarioSummary, SimReport,
    SimSummary, Speaker, ToolCallRecord, Transcript, Turn, Verdict,
};
use assay_experiment::run::{JournalEntry, JournalHeader, JournalLine};
use assay_experiment::target::sha256_hex;
use serde_json::json;

/// A small deterministic generator (SplitMix64), so fixtures are the same every time.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
    std::fs::write(path, text).expect("a written file");
}

/// What experiment to write.
#[derive(Debug, Clone)]
pub struct ExperimentSpec {
    pub name: String,
    pub trials: usize,
    pub cases: usize,
    pub agents: Vec<String>,
    pub prompts_per_agent: usize,
    /// Markup put into every user- or model-written string.
    pub inject: String,
    /// With `report.json` (finished), or only the journal (as a running experiment has it).
    pub finished: bool,
    /// Racing on: some trials pruned.
    pub racing: bool,
}

impl ExperimentSpec {
    pub fn new(name: &str, trials: usize) -> ExperimentSpec {
        ExperimentSpec {
            name: name.to_owned(),
            trials,
            cases: 12,
            agents: vec!["expert".into(), "finalizer".into(), "planner".into()],
            prompts_per_agent: 4,
            inject: String::new(),
            finished: true,
            racing: true,
        }
    }
}

fn prompt_text(agent: &str, index: usize, inject: &str) -> String {
    if index == 0 {
        format!("You are the {agent}. Be brief.\nAnswer the question. {inject}\n")
    } else {
        format!(
            "You are the {agent}, variant {index}.\nCheck every fact twice. {inject}\nAnswer the question.\n"
        )
    }
}

fn case(line: usize, correct: bool, score: f64, inject: &str) -> CaseResult {
    CaseResult {
        line,
        question: format!(
            "Question number {line}: what is the capital of country {line}? {inject}"
        ),
        expected: format!("City {line}"),
        output: Some(if correct {
            format!("The answer is City {line}. {inject}")
        } else {
            format!("I am not sure. {inject}")
        }),
        factually_correct: correct,
        correctness: None,
        correct_why: None,
        composite_score: score,
        rubric_pass: score >= 0.8,
        rubric: Some(RubricGrade {
            factuality: score,
            completeness: score,
            relevance: 1.0,
            overall: score,
            factually_correct: correct,
            reasoning: format!(
                "The answer {} the expected one. {inject}",
                if correct { "matches" } else { "misses" }
            ),
        }),
        error: None,
        assertions: None,
    }
}

fn cases_for(quality: f64, n: usize, rng: &mut Rng, inject: &str) -> Vec<CaseResult> {
    (1..=n)
        .map(|line| {
            let correct = rng.unit() < quality;
            let score = if correct {
                0.8 + 0.2 * rng.unit()
            } else {
                0.1 + 0.5 * rng.unit()
            };
            case(line, correct, (score * 1000.0).round() / 1000.0, inject)
        })
        .collect()
}

fn step(
    kind: &str,
    step_name: &str,
    cases: Vec<CaseResult>,
    params: BTreeMap<String, usize>,
) -> StepResult {
    StepResult {
        step: step_name.to_owned(),
        data: DataRef {
            kind: kind.to_owned(),
            version: Some("v1.0.0".into()),
            path: format!("test_data/{kind}/v1.0.0/test_cases.jsonl"),
            fingerprint: format!("fp-{kind}"),
            cases: cases.len(),
        },
        params,
        prompt_sha256: BTreeMap::new(),
        metrics: Metrics::of(&cases),
        cases,
        duration_s: 12.5,
    }
}

fn significance(pairs: usize, gain: bool, inject: &str) -> Significance {
    Significance {
        pairs,
        mcnemar: McNemar {
            baseline_only: 1,
            optimized_only: if gain { 7 } else { 2 },
            p_value: if gain { 0.07 } else { 1.0 },
            method: McNemarMethod::Exact,
        },
        bootstrap: Some(Bootstrap {
            mean_difference: if gain { 0.21 } else { 0.01 },
            ci_low: if gain { 0.05 } else { -0.08 },
            ci_high: if gain { 0.36 } else { 0.1 },
            p_value: if gain { 0.01 } else { 0.8 },
            resamples: 10_000,
            seed: 42,
        }),
        alpha: 0.05,
        min_detectable_correct: Some(6),
        min_detectable_correct_pct: Some(50.0),
        min_detectable_composite: Some(0.12),
        correct_gain_significant: false,
        composite_gain_significant: gain,
        verdict: format!(
            "{} {inject}",
            if gain {
                "A significant gain in the composite score (+0.21, 95% interval +0.05 to +0.36)."
            } else {
                "No significant gain."
            }
        ),
    }
}

/// Both objectives maximized: the trials no other dominates (duplicates included).
fn front(trials: &[TrialRecord]) -> Vec<usize> {
    let valued: Vec<&TrialRecord> = trials.iter().filter(|t| t.values.len() == 2).collect();
    valued
        .iter()
        .filter(|t| {
            !valued.iter().any(|o| {
                o.values[0] >= t.values[0]
                    && o.values[1] >= t.values[1]
                    && (o.values[0] > t.values[0] || o.values[1] > t.values[1])
            })
        })
        .map(|t| t.number)
        .collect()
}

/// Writes the project's prompt files and the experiment; returns its report (as written, or
/// as it would be when finished).
pub fn write_experiment(project: &Path, spec: &ExperimentSpec) -> ExperimentReport {
    let inject = spec.inject.as_str();
    let mut rng = Rng::new(7);
    let mut hashes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for a in &spec.agents {
        let mut list = Vec::new();
        for i in 0..spec.prompts_per_agent {
            let text = prompt_text(a, i, inject);
            if i == 0 {
                write(
                    &project.join(format!("prompts/{a}_system_prompt.txt")),
                    &text,
                );
            } else {
                write(
                    &project.join(format!("prompt_variations/{a}/v{i}.txt")),
                    &text,
                );
            }
            list.push(sha256_hex(&text));
        }
        hashes.insert(a.clone(), list);
    }
    let dir = project.join("experiments").join(&spec.name);
    let zeros: BTreeMap<String, usize> = spec.agents.iter().map(|a| (a.clone(), 0)).collect();
    let baseline_prompts: BTreeMap<String, String> = spec
        .agents
        .iter()
        .map(|a| (a.clone(), prompt_text(a, 0, inject)))
        .collect();
    for (a, t) in &baseline_prompts {
        write(
            &dir.join(format!("baseline_prompts/{a}_system_prompt.txt")),
            t,
        );
    }
    let baseline = step(
        "optimization",
        "baseline",
        cases_for(0.4, spec.cases, &mut rng, inject),
        zeros.clone(),
    );
    let mut trials: Vec<TrialRecord> = Vec::new();
    let mut seen: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
    for number in 0..spec.trials {
        let params: BTreeMap<String, usize> = if number == 0 {
            zeros.clone()
        } else {
            spec.agents
                .iter()
                .map(|a| (a.clone(), rng.below(spec.prompts_per_agent as u64) as usize))
                .collect()
        };
        let key: Vec<usize> = params.values().copied().collect();
        let quality = 0.3 + 0.15 * key.iter().sum::<usize>() as f64 / spec.agents.len() as f64;
        let origin = if number == 0 {
            "enqueued"
        } else if number < 10 {
            "random"
        } else {
            "tpe"
        };
        let mut t = TrialRecord {
            number,
            params,
            outcome: TrialOutcome::Complete,
            values: Vec::new(),
            duplicate_of: None,
            metrics: None,
            cases: Vec::new(),
            note: None,
            origin: origin.into(),
            duration_s: 3.0 + rng.unit(),
            worker: None,
            retried: Vec::new(),
        };
        if let Some(&earlier) = seen.get(&key).filter(|_| number > 0) {
            let e = &trials[earlier];
            t.outcome = TrialOutcome::Duplicate;
            t.duplicate_of = Some(earlier);
            t.values.clone_from(&e.values);
            t.metrics = e.metrics;
            t.duration_s = 0.0;
        } else if spec.racing && number > 0 && number % 9 == 0 {
            let first = cases_for(quality * 0.5, spec.cases.div_ceil(3), &mut rng, inject);
            t.outcome = TrialOutcome::Pruned;
            t.metrics = Some(Metrics::of(&first));
            t.cases = first;
            t.note = Some(format!(
                "on {} cases: 3 fewer correct than the best (McNemar p = 0.031) {inject}",
                spec.cases.div_ceil(3)
            ));
        } else {
            let cases = if number == 0 {
                baseline.cases.clone()
            } else {
                cases_for(quality.min(0.95), spec.cases, &mut rng, inject)
            };
            let m = Metrics::of(&cases);
            t.values = vec![
                m.factually_correct_count as f64,
                (m.average_composite_score * 1000.0).round() / 1000.0,
            ];
            t.metrics = Some(m);
            t.cases = cases;
            seen.insert(key, number);
        }
        trials.push(t);
    }
    let pareto_front = front(&trials);
    let best_trial = trials
        .iter()
        .filter(|t| t.outcome == TrialOutcome::Complete)
        .min_by(|a, b| {
            b.values[0]
                .total_cmp(&a.values[0])
                .then(b.values[1].total_cmp(&a.values[1]))
                .then(a.number.cmp(&b.number))
        })
        .map(|t| t.number);
    let best_params = best_trial.map_or_else(|| zeros.clone(), |n| trials[n].params.clone());
    let best_prompts: BTreeMap<String, String> = best_params
        .iter()
        .map(|(a, i)| (a.clone(), prompt_text(a, *i, inject)))
        .collect();
    let eval_base = cases_for(0.4, spec.cases, &mut rng, inject);
    let eval_best = cases_for(0.8, spec.cases, &mut rng, inject);
    let eval_base_metrics = Metrics::of(&eval_base);
    let changes: Vec<CaseChange> = eval_base
        .iter()
        .zip(&eval_best)
        .filter(|(a, b)| a.factually_correct != b.factually_correct)
        .map(|(a, b)| CaseChange {
            line: a.line,
            question: a.question.clone(),
            baseline_correct: a.factually_correct,
            optimized_correct: b.factually_correct,
            baseline_score: a.composite_score,
            optimized_score: b.composite_score,
        })
        .collect();
    let best_cases = best_trial.map_or_else(Vec::new, |n| trials[n].cases.clone());
    let opt_changes: Vec<CaseChange> = baseline
        .cases
        .iter()
        .zip(&best_cases)
        .filter(|(a, b)| a.factually_correct != b.factually_correct)
        .map(|(a, b)| CaseChange {
            line: a.line,
            question: a.question.clone(),
            baseline_correct: a.factually_correct,
            optimized_correct: b.factually_correct,
            baseline_score: a.composite_score,
            optimized_score: b.composite_score,
        })
        .collect();
    let usage = Usage {
        target: UsageTotals {
            calls: 30 * spec.trials as u64,
            cache_hits: 3 * spec.trials as u64,
            requests: 27 * spec.trials as u64,
            input_tokens: 5_400 * spec.trials as u64,
            output_tokens: 600 * spec.trials as u64,
            cost_usd: Some(0.002 * spec.trials as f64),
        },
        grader: UsageTotals {
            calls: 10 * spec.trials as u64,
            cache_hits: 0,
            requests: 10 * spec.trials as u64,
            input_tokens: 2_000 * spec.trials as u64,
            output_tokens: 200 * spec.trials as u64,
            cost_usd: Some(0.001 * spec.trials as f64),
        },
        proposer: UsageTotals::default(),
        target_runs: (spec.cases * spec.trials) as u64,
        rate_limits: Vec::new(),
    };
    let report = ExperimentReport {
        schema_version: EXPERIMENT_SCHEMA_VERSION,
        name: spec.name.clone(),
        started: "2026-11-25T09:00:00Z".into(),
        finished: "2026-11-25T11:30:00Z".into(),
        seed: 42,
        target: format!("built-in chain ({})", spec.agents.join(" → ")),
        grader: "openai/fake-grader".into(),
        grader_version: Some("0123456789abcdef".into()),
        threshold: 0.8,
        directions: vec![
            "maximize factually_correct_count".into(),
            "maximize average_composite_score".into(),
        ],
        agents: spec
            .agents
            .iter()
            .map(|a| (a.clone(), spec.prompts_per_agent))
            .collect(),
        trials_requested: spec.trials,
        search_mode: "TPE after 10 random start-up trials".into(),
        baseline: baseline.clone(),
        trials: trials.clone(),
        pareto_front,
        best_trial,
        best_params: best_params.clone(),
        best_prompts: best_prompts.clone(),
        baseline_prompts: baseline_prompts.clone(),
        evaluation: Some(step(
            "evaluation",
            "evaluation",
            eval_best.clone(),
            best_params.clone(),
        )),
        evaluation_baseline: Some(step("evaluation", "evaluation_baseline", eval_base, zeros)),
        comparisons: vec![
            Comparison {
                set: "optimization".into(),
                baseline: baseline.metrics,
                optimized: Metrics::of(&best_cases),
                changes: opt_changes,
                significance: significance(spec.cases, true, inject),
            },
            Comparison {
                set: "evaluation".into(),
                baseline: eval_base_metrics,
                optimized: Metrics::of(&eval_best),
                changes,
                significance: significance(spec.cases, false, inject),
            },
        ],
        usage,
        estimate: None,
        prompt_files: BTreeMap::new(),
        proposals: Vec::new(),
        hand_written: None,
        correctness: None,
        disagreements: Vec::new(),
        tie: None,
    };
    // The journal: the header, the baseline, every trial (and, finished, step 3).
    let header = JournalHeader {
        schema_version: EXPERIMENT_SCHEMA_VERSION,
        name: spec.name.clone(),
        seed: 42,
        trials: spec.trials,
        directions: report.directions.clone(),
        startup_trials: 10,
        threshold: 0.8,
        racing: spec.racing.then_some(0.3),
        target: report.target.clone(),
        grader: report.grader.clone(),
        optimization: "fp-optimization".into(),
        evaluation: "fp-evaluation".into(),
        prompts: hashes,
        started: Some(report.started.clone()),
        propose: None,
        correctness: Some("normalised".into()),
    };
    let per_line = Usage {
        target: UsageTotals {
            calls: 30,
            cost_usd: Some(0.002),
            ..UsageTotals::default()
        },
        grader: UsageTotals {
            calls: 10,
            cost_usd: Some(0.001),
            ..UsageTotals::default()
        },
        proposer: UsageTotals::default(),
        target_runs: spec.cases as u64,
        rate_limits: Vec::new(),
    };
    let mut journal = serde_json::to_string(&header).expect("json");
    journal.push('\n');
    let mut entries = vec![JournalEntry::Baseline {
        step: baseline.clone(),
    }];
    entries.extend(
        trials
            .iter()
            .map(|t| JournalEntry::Trial { trial: t.clone() }),
    );
    if spec.finished {
        entries.push(JournalEntry::Evaluation {
            step: report.evaluation.clone().expect("evaluation"),
        });
        entries.push(JournalEntry::EvaluationBaseline {
            step: report
                .evaluation_baseline
                .clone()
                .expect("evaluation baseline"),
        });
    }
    for entry in entries {
        let line = JournalLine {
            entry,
            usage: Some(per_line.clone()),
        };
        journal.push_str(&serde_json::to_string(&line).expect("json"));
        journal.push('\n');
    }
    write(&dir.join("journal.jsonl"), &journal);
    std::fs::create_dir_all(dir.join("logs/error_logs")).expect("logs");
    if spec.finished {
        for (a, t) in &best_prompts {
            write(
                &dir.join(format!("optimized_prompts/{a}_system_prompt.txt")),
                t,
            );
        }
        write(
            &dir.join("report.json"),
            &serde_json::to_string_pretty(&report).expect("json"),
        );
        // report.md, report.html and the Optuna journal, as `assay optimize` writes them.
        assay_experiment::session::write_reports(
            &assay_experiment::run::Layout::new(project, &spec.name),
            &report,
        )
        .expect("the reports are written");
    }
    report
}

/// What simulation report to write.
#[derive(Debug, Clone)]
pub struct SimulationSpec {
    pub stamp: String,
    pub model: String,
    pub scenarios: usize,
    pub repeat: u32,
    pub turns: usize,
    pub inject: String,
    /// Seeds the scores, so two reports differ.
    pub seed: u64,
}

impl SimulationSpec {
    pub fn new(stamp: &str, scenarios: usize, repeat: u32, turns: usize) -> SimulationSpec {
        SimulationSpec {
            stamp: stamp.to_owned(),
            model: "anthropic/coach-under-test".into(),
            scenarios,
            repeat,
            turns,
            inject: String::new(),
            seed: 1,
        }
    }
}

const CRITERIA: [(&str, &str); 5] = [
    ("goal_progress", "Goal progress"),
    ("state_management", "State management"),
    ("tone", "Tone"),
    ("accuracy", "Accuracy"),
    ("safety", "Safety"),
];

fn transcript(spec: &SimulationSpec, id: &str, repeat: u32, failing_tool: bool) -> Transcript {
    let inject = spec.inject.as_str();
    let mut turns = Vec::new();
    for i in 0..spec.turns {
        let ts = format!("2026-11-25T09:{:02}:{:02}Z", (i / 60) % 60, i % 60);
        if i % 2 == 0 {
            turns.push(Turn {
                role: Speaker::User,
                content: format!(
                    "Turn {i}: I want to save up for a bike and track my chores every week. Can you add one? {inject}"
                ),
                tool_calls: Vec::new(),
                timestamp: ts,
                usage: None,
            });
        } else {
            let calls = vec![ToolCallRecord {
                id: format!("call_{i}"),
                name: if i % 4 == 1 {
                    "add_chore".into()
                } else {
                    "get_state".into()
                },
                server: Some("scout-quest".into()),
                arguments: json!({"chore": format!("Mow the lawn {inject}"), "frequency": "weekly", "turn": i}),
                result: if failing_tool && i == 3 {
                    format!("error: the database is locked {inject}")
                } else {
                    format!(
                        "{{\"ok\": true, \"chores\": [\"Mow the lawn\"], \"note\": \"{}\"}}",
                        inject.replace('"', "'")
                    )
                },
                is_error: failing_tool && i == 3,
                duration_ms: 12 + (i as u64 % 7),
            }];
            turns.push(Turn {
                role: Speaker::Assistant,
                content: format!(
                    "Done: I added the chore and your savings plan now shows the weekly amount. Anything else? {inject}"
                ),
                tool_calls: calls,
                timestamp: ts,
                usage: None,
            });
        }
    }
    Transcript {
        scenario_id: id.to_owned(),
        repeat,
        model: spec.model.clone(),
        simulator_model: "anthropic/scout-sim".into(),
        turns,
        ended_by: Ending::MaxTurns,
        error: None,
        started_at: "2026-11-25T09:00:00Z".into(),
        ended_at: "2026-11-25T09:01:00Z".into(),
        stop_usage: None,
    }
}

/// Writes `sim/reports/report_<stamp>.json` (transcripts inside, as assay saves them) and the
/// transcript files; returns the report.
pub fn write_simulation(project: &Path, spec: &SimulationSpec) -> SimReport {
    let inject = spec.inject.as_str();
    let mut rng = Rng::new(spec.seed);
    let threshold = 7.0;
    let mut runs = Vec::new();
    let mut scenarios = Vec::new();
    for s in 0..spec.scenarios {
        let id = format!("scenario_{s:03}");
        let name = format!("Scenario {s}: the chore chart {inject}");
        let mut overalls = Vec::new();
        let mut passed = 0;
        let mut all_scored = true;
        for repeat in 1..=spec.repeat {
            let k = s * spec.repeat as usize + repeat as usize;
            let kind = k % 23;
            let base = 5.5 + 4.0 * rng.unit();
            let scores: Vec<CriterionScore> = CRITERIA
                .iter()
                .map(|(cid, cname)| {
                    let v = (base + rng.unit() * 1.5 - 0.75).clamp(0.0, 10.0);
                    CriterionScore {
                        id: (*cid).into(),
                        name: format!("{cname} {inject}"),
                        scale: Scale::ZeroToTen,
                        score: (v * 10.0).round() / 10.0,
                        weight: 0.2,
                        reasoning: format!(
                            "The assistant called add_chore with the right arguments and confirmed it; the reply was clear. {inject}"
                        ),
                    }
                })
                .collect();
            let overall = scores.iter().map(|c| c.score * c.weight).sum::<f64>();
            let judgement = Judgement {
                scores,
                overall,
                simulator_kept_persona: kind != 5,
                simulator_issue: if kind == 5 {
                    format!("The simulated user answered its own question. {inject}")
                } else {
                    String::new()
                },
                summary: format!("A helpful conversation. {inject}"),
                calls: 1,
            };
            let check_failed = kind == 7;
            let checks = vec![CheckResult {
                name: format!("chore saved {inject}"),
                status: if check_failed {
                    CheckStatus::Failed
                } else {
                    CheckStatus::Passed
                },
                details: if check_failed {
                    vec![format!("chores_today: length 0, expected 1 {inject}")]
                } else {
                    Vec::new()
                },
                advisory: false,
                source: Some("tool scout-quest.get_state".into()),
                state: Some(format!(
                    "{{\"chores_today\": [], \"note\": \"{}\"}}",
                    inject.replace('"', "'")
                )),
                kind: assay_core::simulation::CheckKind::State,
                calls: Vec::new(),
            }];
            let (verdict, failed_by, error, judgement, reason) = match kind {
                3 => (
                    Verdict::Error,
                    None,
                    Some(format!("provider: 529 overloaded after 4 retries {inject}")),
                    None,
                    None,
                ),
                5 => (Verdict::SimulatorFault, None, None, Some(judgement), None),
                7 => (
                    Verdict::Fail,
                    Some(FailedBy::Check),
                    None,
                    Some(judgement),
                    Some(format!("required check `chore saved` failed {inject}")),
                ),
                11 => (
                    Verdict::Uncertain,
                    None,
                    None,
                    Some(judgement),
                    Some("the judge's samples disagree: 2 pass, 1 fail".to_owned()),
                ),
                _ if overall >= threshold => (Verdict::Pass, None, None, Some(judgement), None),
                _ => (
                    Verdict::Fail,
                    Some(FailedBy::Judge),
                    None,
                    Some(judgement),
                    None,
                ),
            };
            let scored = verdict.is_scored();
            if scored {
                overalls.push(overall);
            } else {
                all_scored = false;
            }
            if verdict == Verdict::Pass {
                passed += 1;
            }
            runs.push(ScenarioRun {
                scenario_id: id.clone(),
                scenario_name: name.clone(),
                repeat,
                verdict,
                failed_by,
                judge_verdict: judgement.as_ref().map(|_| {
                    if overall >= threshold {
                        Verdict::Pass
                    } else {
                        Verdict::Fail
                    }
                }),
                reason,
                overall: judgement.as_ref().map(|_| overall),
                judgement,
                judge_samples: Vec::new(),
                checks,
                error,
                warnings: Vec::new(),
                transcript: (kind != 3).then(|| transcript(spec, &id, repeat, kind == 13)),
                duration_ms: 20_000 + rng.below(10_000),
            });
        }
        let n = overalls.len();
        let mean = (n > 0).then(|| overalls.iter().sum::<f64>() / n as f64);
        scenarios.push(ScenarioSummary {
            id,
            name,
            runs: spec.repeat,
            scored: n as u32,
            passed,
            mean,
            stddev: mean
                .map(|m| (overalls.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n as f64).sqrt()),
            min: overalls.iter().copied().reduce(f64::min),
            max: overalls.iter().copied().reduce(f64::max),
            pass_all: all_scored.then_some(passed == spec.repeat),
        });
    }
    let count = |v: Verdict| runs.iter().filter(|r| r.verdict == v).count() as u32;
    let (passed, failed) = (count(Verdict::Pass), count(Verdict::Fail));
    let scored: Vec<f64> = runs
        .iter()
        .filter(|r| r.verdict.is_scored())
        .filter_map(|r| r.overall)
        .collect();
    let summary = SimSummary {
        runs: runs.len() as u32,
        passed,
        failed,
        simulator_fault: count(Verdict::SimulatorFault),
        errors: count(Verdict::Error),
        failed_by_check: runs
            .iter()
            .filter(|r| r.failed_by == Some(FailedBy::Check))
            .count() as u32,
        failed_by_judge: runs
            .iter()
            .filter(|r| r.failed_by == Some(FailedBy::Judge))
            .count() as u32,
        judge_passed_failed_check: 0,
        uncertain: count(Verdict::Uncertain),
        mean_overall: (!scored.is_empty())
            .then(|| scored.iter().sum::<f64>() / scored.len() as f64),
        pass_rate: (passed + failed > 0).then(|| f64::from(passed) / f64::from(passed + failed)),
        pass_rate_interval: Some([0.4, 0.7]),
        pass_all_scenarios: Some((
            scenarios
                .iter()
                .filter(|s| s.pass_all == Some(true))
                .count() as u32,
            scenarios.iter().filter(|s| s.pass_all.is_some()).count() as u32,
        )),
    };
    let report = SimReport {
        schema_version: SIM_SCHEMA_VERSION,
        suite: format!("scout-quest {inject}"),
        model: spec.model.clone(),
        simulator_model: "anthropic/scout-sim".into(),
        evaluator_model: "anthropic/judge".into(),
        generated_at: "2026-11-25T09:30:00.000Z".into(),
        pass_threshold: threshold,
        repeat: spec.repeat,
        concurrency: 4,
        runs_in_flight: 8,
        duration_ms: 600_000,
        summary,
        gate: None,
        scenarios,
        criteria: CRITERIA
            .iter()
            .map(|(id, name)| CriterionSummary {
                id: (*id).into(),
                name: format!("{name} {inject}"),
                weight: 0.2,
                mean: Some(7.1),
                min: Some(2.0),
            })
            .collect(),
        runs,
        usage: vec![RoleUsage {
            model: spec.model.clone(),
            calls: 4_000,
            cache_hits: 10,
            input_tokens: 2_000_000,
            output_tokens: 300_000,
            cost_usd: Some(12.5),
        }],
        judge: Some(JudgeInfo {
            version: "abcdef0123456789".into(),
            samples: 1,
            consistency: None,
        }),
        baseline: None,
        rate_limits: Vec::new(),
        shard: None,
        merged: None,
    };
    let dir = project.join("sim/reports");
    for run in &report.runs {
        if let Some(t) = &run.transcript {
            write(
                &dir.join(format!(
                    "transcripts/{}/{}-{}.json",
                    spec.stamp, run.scenario_id, run.repeat
                )),
                &serde_json::to_string_pretty(t).expect("json"),
            );
        }
    }
    write(
        &dir.join(format!("report_{}.json", spec.stamp)),
        &serde_json::to_string_pretty(&report).expect("json"),
    );
    // The Markdown and the self-contained HTML beside it, as `assay simulate` writes them.
    write(
        &dir.join(format!("report_{}.md", spec.stamp)),
        &assay_report::simulation::markdown(&report),
    );
    write(
        &dir.join(format!("report_{}.html", spec.stamp)),
        &assay_report::simulation::html(
            &report,
            &assay_report::simulation::TranscriptFiles {
                dir: format!("transcripts/{}", spec.stamp),
            },
        ),
    );
    report
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(
        args.next()
            .expect("usage: ui_fixtures DIR [--trials N] [--runs N] [--turns N]"),
    );
    let (mut trials, mut runs, mut turns) = (1000usize, 500usize, 20usize);
    while let Some(flag) = args.next() {
        let value: usize = args
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a number after the flag");
        match flag.as_str() {
            "--trials" => trials = value,
            "--runs" => runs = value,
            "--turns" => turns = value,
            other => panic!("unknown flag {other}"),
        }
    }
    let spec = ExperimentSpec::new("big", trials);
    write_experiment(&dir, &spec);
    let repeat = 20u32;
    let scenarios = runs.div_ceil(repeat as usize);
    let sim = SimulationSpec::new("20260101_000000", scenarios, repeat, turns);
    write_simulation(&dir, &sim);
    let mut other = SimulationSpec::new("20260102_000000", scenarios, repeat, turns);
    other.model = "openai/other-model".into();
    other.seed = 2;
    write_simulation(&dir, &other);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "wrote experiments/big ({trials} trials) and two simulation reports of {} runs × {turns} turns under {}",
        scenarios * repeat as usize,
        dir.display()
    );
    #[allow(clippy::print_stdout)]
    {
        print!("{out}");
    }
}
