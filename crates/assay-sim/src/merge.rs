//! Merging the reports of a sharded simulation (`assay simulate --shard hash:i/n` on several
//! machines, then `assay runs merge`) into the one report an unsharded run would have made.
//!
//! A shard runs the selected scenarios whose id hashes to it ([`assay_core::shard::Shard`]),
//! every repeat of each, so a scenario's runs are never split. [`merge`] checks that the
//! reports are the shards of one simulation (the same suite, models, judge, pass threshold,
//! repeats, criteria, gate, selection, fixture and baseline; every shard once, none missing),
//! puts every run back in the order the simulator reports them (scenario id, then repeat), and
//! computes every statistic through the simulator's own aggregation
//! ([`crate::run::aggregate`]): scenario summaries, criteria, totals, pass rate and its
//! interval, pass^k, the gate, the judge's consistency, and the comparison with the baseline.
//! What is per machine gets a merged value: the report is dated when the last shard's was,
//! its duration is the longest shard's (the shards ran side by side; each shard's own is in
//! [`SimMerged`]), `concurrency` and `runs_in_flight` are the largest any shard used, usage
//! and rate-limit counts are summed per model.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use assay_core::runlog::RateLimitRecord;
use assay_core::shard::Shard;
use assay_core::simulation::{
    MergedSimShard, RoleUsage, ScenarioRun, SimBaseline, SimMerged, SimReport, SimShard,
};
use assay_kb::datafile::DataError;
use serde_json::{Value, json};

/// Why shards' reports cannot be merged: always bad input (exit 2), each naming the files.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A report that cannot be read.
    #[error(transparent)]
    Read(#[from] DataError),
    /// Nothing to merge.
    #[error("no simulation reports to merge")]
    Empty,
    /// A report that is not a shard's, or whose runs are not its shard's.
    #[error("{file}: {message}")]
    Refused {
        /// The report's file.
        file: String,
        /// What is wrong with it.
        message: String,
    },
    /// Two reports of different simulations.
    #[error(
        "{first} and {file} are not shards of one simulation: {field} is {first_value} in {first} and {value} in {file}"
    )]
    Differs {
        /// What differs, as the report names it.
        field: String,
        /// The first report's file.
        first: String,
        /// Its value.
        first_value: String,
        /// The other report's file.
        file: String,
        /// Its value.
        value: String,
    },
    /// One shard given twice.
    #[error("{first} and {file} are both shard {shard}: give each shard's report once")]
    Twice {
        /// The first report of the shard.
        first: String,
        /// The second.
        file: String,
        /// The shard.
        shard: Shard,
    },
    /// Shards missing.
    #[error(
        "shard{} {} missing: a merge must cover the whole suite (the reports given are of shard{} {})",
        if missing.len() == 1 { "" } else { "s" },
        list(missing),
        if given.len() == 1 { "" } else { "s" },
        list(given)
    )]
    Missing {
        /// The shards no report is of.
        missing: Vec<Shard>,
        /// The shards given.
        given: Vec<Shard>,
    },
    /// The baseline the shards were compared with cannot be used.
    #[error("the shards were compared with the baseline {label}: {message}")]
    Baseline {
        /// The baseline's file as the shards name it.
        label: String,
        /// What is wrong.
        message: String,
    },
}

fn list(shards: &[Shard]) -> String {
    shards
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A digest (16 hex digits of SHA-256) of a baseline report as read: what a shard records of
/// its `--baseline`, so that the merge compares the whole with the same report.
pub fn baseline_version(report: &SimReport) -> String {
    crate::suite::digest(&[serde_json::to_string(report).unwrap_or_default()])
}

/// The SHA-256 (hex) of a shard's runs as a report holds them: each run serialised as JSON and
/// ended by a newline, in order. What a shard records of its runs when it is saved
/// (`SimShard::runs_sha256`) and the merge checks.
pub fn runs_digest(runs: &[ScenarioRun]) -> String {
    use sha2::{Digest as _, Sha256};
    let mut hash = Sha256::new();
    for run in runs {
        hash.update(serde_json::to_string(run).unwrap_or_default().as_bytes());
        hash.update(b"\n");
    }
    format!("{:x}", hash.finalize())
}

/// Reads the shards' reports (`.json`, or `.md` with the `.json` beside it), each labelled
/// with its file.
pub fn read_shards(files: &[PathBuf]) -> Result<Vec<(String, SimReport)>, MergeError> {
    files
        .iter()
        .map(|f| {
            let report = crate::report::read(f)?;
            Ok((crate::report::json_path(f).display().to_string(), report))
        })
        .collect()
}

/// Reads the shards' reports and, when they were compared with a baseline, the baseline (its
/// path as the shards name it; a relative one is looked for from the current folder, then
/// from `project`), and merges them ([`merge`]).
pub fn merge_files(files: &[PathBuf], project: &Path) -> Result<SimReport, MergeError> {
    let shards = read_shards(files)?;
    let wanted = shards
        .iter()
        .find_map(|(_, r)| r.shard.as_ref().and_then(|s| s.baseline.clone()));
    let baseline = match wanted {
        None => None,
        Some(b) => {
            let given = PathBuf::from(&b.label);
            let path = if given.is_relative() && !crate::report::json_path(&given).exists() {
                project.join(&given)
            } else {
                given
            };
            Some(
                crate::report::read(&path).map_err(|e| MergeError::Baseline {
                    label: b.label.clone(),
                    message: format!(
                        "{e}; the merge compares the whole suite with it, so run it where that file is"
                    ),
                })?,
            )
        }
    };
    merge(&shards, baseline.as_ref())
}

/// A setting every shard of one simulation shares, as shown in an error.
struct Setting {
    field: &'static str,
    value: fn(&SimReport, &SimShard) -> Value,
}

const SETTINGS: &[Setting] = &[
    Setting {
        field: "`schema_version`",
        value: |r, _| json!(r.schema_version),
    },
    Setting {
        field: "the suite (`suite`)",
        value: |r, _| json!(r.suite),
    },
    Setting {
        field: "the shard count",
        value: |_, s| json!(s.shard.count),
    },
    Setting {
        field: "the suite's version (`shard.suite_version`: suite.yaml, the system prompt or a scenario changed)",
        value: |_, s| json!(s.suite_version),
    },
    Setting {
        field: "the fixture's version (`shard.fixture_version`)",
        value: |_, s| json!(s.fixture_version),
    },
    Setting {
        field: "the model under test (`model`)",
        value: |r, _| json!(r.model),
    },
    Setting {
        field: "the simulated user's model (`simulator_model`)",
        value: |r, _| json!(r.simulator_model),
    },
    Setting {
        field: "the judge's model (`evaluator_model`)",
        value: |r, _| json!(r.evaluator_model),
    },
    Setting {
        field: "the judge's version (`judge.version`)",
        value: |r, _| json!(r.judge.as_ref().map(|j| &j.version)),
    },
    Setting {
        field: "the judge's samples (`judge.samples`)",
        value: |r, _| json!(r.judge.as_ref().map(|j| j.samples)),
    },
    Setting {
        field: "`pass_threshold`",
        value: |r, _| json!(r.pass_threshold),
    },
    Setting {
        field: "the runs per scenario (`repeat`)",
        value: |r, _| json!(r.repeat),
    },
    Setting {
        field: "the criteria (`criteria`)",
        value: |r, _| {
            json!(
                r.criteria
                    .iter()
                    .map(|c| json!({"id": c.id, "name": c.name, "weight": c.weight}))
                    .collect::<Vec<_>>()
            )
        },
    },
    Setting {
        field: "the gate (`shard.gate`)",
        value: |_, s| json!(s.gate),
    },
    Setting {
        field: "the baseline (`shard.baseline`)",
        value: |_, s| json!(s.baseline),
    },
];

/// A value as an error shows it: strings in backticks, the rest as compact JSON, long ones cut.
fn show(value: &Value) -> String {
    let text = match value {
        Value::String(s) => format!("`{s}`"),
        Value::Null => "absent".to_owned(),
        other => other.to_string(),
    };
    if text.chars().count() > 160 {
        format!("{}…", text.chars().take(160).collect::<String>())
    } else {
        text
    }
}

/// Checks that `shards` (each labelled with its file) are every shard of one simulation, once,
/// and merges them into the report an unsharded run would have made (see the module's
/// documentation). `baseline` is the report the shards were compared with (`--baseline`),
/// needed when they were; it is compared with the whole as an unsharded run compares it.
pub fn merge(
    shards: &[(String, SimReport)],
    baseline: Option<&SimReport>,
) -> Result<SimReport, MergeError> {
    let mut parts: Vec<(&str, &SimReport, &SimShard)> = Vec::with_capacity(shards.len());
    for (file, report) in shards {
        let shard = report.shard.as_ref().ok_or_else(|| MergeError::Refused {
            file: file.clone(),
            message: if report.merged.is_some() {
                "already a merged report, not a shard's".to_owned()
            } else {
                "not a shard's report (it has no `shard`: it was made by `assay simulate` without --shard); only the reports of `assay simulate --shard hash:i/n` are merged".to_owned()
            },
        })?;
        parts.push((file, report, shard));
    }
    let Some(&(first_file, first, first_shard)) = parts.first() else {
        return Err(MergeError::Empty);
    };
    for &(file, report, shard) in &parts[1..] {
        for setting in SETTINGS {
            let (a, b) = (
                (setting.value)(first, first_shard),
                (setting.value)(report, shard),
            );
            if a != b {
                return Err(MergeError::Differs {
                    field: setting.field.to_owned(),
                    first: first_file.to_owned(),
                    first_value: show(&a),
                    file: file.to_owned(),
                    value: show(&b),
                });
            }
        }
        if shard.scenarios != first_shard.scenarios {
            let (a, b): (BTreeSet<&String>, BTreeSet<&String>) = (
                first_shard.scenarios.iter().collect(),
                shard.scenarios.iter().collect(),
            );
            let describe = |with: &BTreeSet<&String>, id: &str| {
                format!(
                    "{} scenario(s), {} `{id}`",
                    with.len(),
                    if with.contains(&id.to_owned()) {
                        "with"
                    } else {
                        "without"
                    }
                )
            };
            let id = a
                .symmetric_difference(&b)
                .next()
                .map_or_else(String::new, |id| (*id).clone());
            return Err(MergeError::Differs {
                field: "the selected scenarios (`shard.scenarios`)".to_owned(),
                first: first_file.to_owned(),
                first_value: describe(&a, &id),
                file: file.to_owned(),
                value: describe(&b, &id),
            });
        }
    }
    parts.sort_by_key(|(_, _, s)| s.shard.index);
    for pair in parts.windows(2) {
        if pair[0].2.shard == pair[1].2.shard {
            return Err(MergeError::Twice {
                first: pair[0].0.to_owned(),
                file: pair[1].0.to_owned(),
                shard: pair[0].2.shard,
            });
        }
    }
    let count = first_shard.shard.count;
    let given: Vec<Shard> = parts.iter().map(|(_, _, s)| s.shard).collect();
    let missing: Vec<Shard> = (1..=count)
        .map(|index| Shard { index, count })
        .filter(|s| !given.contains(s))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { missing, given });
    }

    // Every run where its scenario's id puts it, once; every selected scenario present; every
    // shard's runs as they were saved.
    let selection: BTreeSet<&str> = first_shard.scenarios.iter().map(String::as_str).collect();
    let mut seen: BTreeSet<(&str, u32)> = BTreeSet::new();
    let mut changed: Option<MergeError> = None;
    for &(file, report, shard) in &parts {
        let Some(recorded) = shard.runs_sha256.as_deref() else {
            return Err(MergeError::Refused {
                file: file.to_owned(),
                message: "it records no digest of its runs (`shard.runs_sha256`), so they cannot be checked: run this shard again with this assay".to_owned(),
            });
        };
        let got = runs_digest(&report.runs);
        if got != recorded && changed.is_none() {
            // Named once every run is placed: a run moved to another shard, or a scenario's
            // runs removed, is named by its scenario first.
            changed = Some(MergeError::Refused {
                file: file.to_owned(),
                message: format!(
                    "its runs changed since it was saved (their SHA-256 is {got}, the report recorded {recorded}): a verdict, a score or a run was edited, added or removed; run this shard again"
                ),
            });
        }
        for run in &report.runs {
            let id = run.scenario_id.as_str();
            let refuse = |message: String| MergeError::Refused {
                file: file.to_owned(),
                message,
            };
            if !selection.contains(id) {
                return Err(refuse(format!(
                    "it holds scenario `{id}`, which its `shard.scenarios` does not select"
                )));
            }
            if !shard.shard.contains(id) {
                return Err(refuse(format!(
                    "it holds scenario `{id}`, which belongs to shard {}, not {}",
                    Shard {
                        index: Shard::of(id, count),
                        count
                    },
                    shard.shard
                )));
            }
            if !seen.insert((id, run.repeat)) {
                return Err(refuse(format!("it holds run {id} #{} twice", run.repeat)));
            }
        }
    }
    let covered: BTreeSet<&str> = seen.iter().map(|(id, _)| *id).collect();
    if let Some(absent) = selection.iter().find(|id| !covered.contains(**id)) {
        let owner = Shard {
            index: Shard::of(absent, count),
            count,
        };
        let file = parts
            .iter()
            .find(|(_, _, s)| s.shard == owner)
            .map_or("", |(f, _, _)| f);
        return Err(MergeError::Refused {
            file: file.to_owned(),
            message: format!(
                "shard {owner} has no run of scenario `{absent}`, which the simulation selected"
            ),
        });
    }
    // A run edited, added or removed where nothing above names it.
    if let Some(e) = changed {
        return Err(e);
    }

    let mut merged = first.clone();
    merged.runs = parts
        .iter()
        .flat_map(|(_, r, _)| r.runs.iter().cloned())
        .collect();
    parts
        .iter()
        .map(|(_, r, _)| r.generated_at.as_str())
        .max()
        .unwrap_or_default()
        .clone_into(&mut merged.generated_at);
    merged.duration_ms = parts
        .iter()
        .map(|(_, r, _)| r.duration_ms)
        .max()
        .unwrap_or(0);
    merged.concurrency = parts
        .iter()
        .map(|(_, r, _)| r.concurrency)
        .max()
        .unwrap_or(1);
    merged.runs_in_flight = parts
        .iter()
        .map(|(_, r, _)| r.runs_in_flight)
        .max()
        .unwrap_or(1);
    merged.usage = usage(&merged, parts.iter().map(|(_, r, _)| *r));
    merged.rate_limits = rate_limits(parts.iter().map(|(_, r, _)| *r));
    merged.shard = None;
    merged.baseline = None;
    merged.merged = Some(SimMerged {
        count,
        suite_version: first_shard.suite_version.clone(),
        shards: parts
            .iter()
            .map(|(_, r, s)| MergedSimShard {
                index: s.shard.index,
                generated_at: r.generated_at.clone(),
                duration_ms: r.duration_ms,
                scenarios: r
                    .runs
                    .iter()
                    .map(|run| run.scenario_id.as_str())
                    .collect::<BTreeSet<_>>()
                    .len() as u32,
                runs: r.runs.len() as u32,
            })
            .collect(),
    });
    crate::run::aggregate(&mut merged, first_shard.gate.as_ref());
    if let Some(wanted) = &first_shard.baseline {
        let base = baseline.ok_or_else(|| MergeError::Baseline {
            label: wanted.label.clone(),
            message: "give that report to compare the whole suite with it".to_owned(),
        })?;
        let version = baseline_version(base);
        if version != wanted.version {
            return Err(MergeError::Baseline {
                label: wanted.label.clone(),
                message: format!(
                    "that file is not the report the shards read (its version is {version}, theirs {}): it changed since",
                    wanted.version
                ),
            });
        }
        merged.baseline = Some(SimBaseline::of(&wanted.label, base, &merged));
    }
    Ok(merged)
}

/// Each model's calls, tokens and cost summed over the shards, in the order an unsharded run
/// lists them (the model under test, the simulated user, the judge), then any other. A cost is
/// summed when every shard that used the model priced it.
fn usage<'a>(merged: &SimReport, reports: impl Iterator<Item = &'a SimReport>) -> Vec<RoleUsage> {
    let mut out: Vec<(RoleUsage, bool)> = Vec::new();
    for u in reports.flat_map(|r| r.usage.iter()) {
        match out.iter_mut().find(|(o, _)| o.model == u.model) {
            Some((o, priced)) => {
                o.calls += u.calls;
                o.cache_hits += u.cache_hits;
                o.input_tokens += u.input_tokens;
                o.output_tokens += u.output_tokens;
                *priced &= u.cost_usd.is_some();
                o.cost_usd = Some(o.cost_usd.unwrap_or(0.0) + u.cost_usd.unwrap_or(0.0));
            }
            None => out.push((u.clone(), u.cost_usd.is_some())),
        }
    }
    let order = [
        &merged.model,
        &merged.simulator_model,
        &merged.evaluator_model,
    ];
    out.sort_by_key(|(u, _)| order.iter().position(|m| **m == u.model).unwrap_or(3));
    out.into_iter()
        .map(|(mut u, priced)| {
            if !priced {
                u.cost_usd = None;
            }
            u
        })
        .collect()
}

/// Each model's rate-limit record over the shards: requests, throttled answers and waiting
/// summed; the concurrency each settled at and the lowest it went, the lowest of any shard's;
/// the ceiling, the highest.
fn rate_limits<'a>(reports: impl Iterator<Item = &'a SimReport>) -> Vec<RateLimitRecord> {
    let mut out: Vec<RateLimitRecord> = Vec::new();
    for l in reports.flat_map(|r| r.rate_limits.iter()) {
        match out.iter_mut().find(|o| o.model == l.model) {
            Some(o) => {
                o.requests += l.requests;
                o.throttled += l.throttled;
                o.wait_ms += l.wait_ms;
                o.concurrency = o.concurrency.min(l.concurrency);
                o.min_concurrency = o.min_concurrency.min(l.min_concurrency);
                o.ceiling = o.ceiling.max(l.ceiling);
                if o.limiter.is_none() {
                    o.limiter.clone_from(&l.limiter);
                }
            }
            None => out.push(l.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use assay_core::simulation::{
        CriterionScore, CriterionSummary, JudgeInfo, Judgement, SIM_SCHEMA_VERSION, Scale,
        ScenarioRun, ShardBaseline, SimGate, SimSummary, Verdict,
    };

    use super::*;

    const IDS: [&str; 7] = [
        "budget",
        "chores",
        "email",
        "goal",
        "onboarding",
        "refund",
        "zeta",
    ];

    fn judgement(score: f64) -> Judgement {
        Judgement {
            scores: ["tone", "goal"]
                .iter()
                .map(|id| CriterionScore {
                    id: (*id).to_owned(),
                    name: (*id).to_owned(),
                    scale: Scale::ZeroToTen,
                    score,
                    weight: 0.5,
                    reasoning: String::new(),
                })
                .collect(),
            overall: score,
            simulator_kept_persona: true,
            simulator_issue: String::new(),
            summary: String::new(),
            calls: 1,
        }
    }

    /// A run with a score that depends on its scenario and repeat; some fail, one is an error
    /// and one has judge samples that disagree.
    fn run(id: &str, repeat: u32) -> ScenarioRun {
        let score = (id.len() as f64 * 1.3 + f64::from(repeat) * 0.7) % 10.0;
        let error = id == "email" && repeat == 2;
        let samples = if id == "goal" {
            vec![judgement(score), judgement(score - 3.0)]
        } else {
            Vec::new()
        };
        ScenarioRun {
            scenario_id: id.to_owned(),
            scenario_name: id.to_uppercase(),
            repeat,
            verdict: if error {
                Verdict::Error
            } else if score >= 7.0 {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            failed_by: None,
            judge_verdict: None,
            reason: None,
            overall: (!error).then_some(score),
            judgement: (!error).then(|| judgement(score)),
            judge_samples: samples,
            checks: Vec::new(),
            error: error.then(|| "judge: timed out".to_owned()),
            warnings: Vec::new(),
            transcript: None,
            duration_ms: u64::from(repeat) * 10,
        }
    }

    fn gate() -> SimGate {
        SimGate {
            min_mean_overall: Some(5.0),
            min_pass_rate: Some(0.5),
        }
    }

    /// The report an unsharded simulation of `ids` makes (before usage and baseline).
    fn whole(ids: &[&str]) -> SimReport {
        let mut report = SimReport {
            schema_version: SIM_SCHEMA_VERSION,
            suite: "scouts".into(),
            model: "m".into(),
            simulator_model: "u".into(),
            evaluator_model: "j".into(),
            generated_at: "2026-11-25T09:00:00.000Z".into(),
            pass_threshold: 7.0,
            repeat: 3,
            concurrency: 4,
            runs_in_flight: 8,
            duration_ms: 100,
            summary: SimSummary::default(),
            gate: None,
            scenarios: Vec::new(),
            criteria: ["tone", "goal"]
                .iter()
                .map(|id| CriterionSummary {
                    id: (*id).to_owned(),
                    name: (*id).to_owned(),
                    weight: 0.5,
                    mean: None,
                    min: None,
                })
                .collect(),
            // In the order the runs finished, as the simulator collects them.
            runs: (1..=3)
                .rev()
                .flat_map(|k| ids.iter().map(move |id| run(id, k)))
                .collect(),
            usage: Vec::new(),
            judge: Some(JudgeInfo {
                version: "0123456789abcdef".into(),
                samples: 2,
                consistency: None,
            }),
            baseline: None,
            rate_limits: Vec::new(),
            shard: None,
            merged: None,
        };
        crate::run::aggregate(&mut report, Some(&gate()));
        report
    }

    /// Shard `index` of `count` as `assay simulate --shard` saves it.
    fn shard(ids: &[&str], index: u32, count: u32) -> SimReport {
        let s = Shard { index, count };
        let mine: Vec<&str> = ids.iter().copied().filter(|id| s.contains(id)).collect();
        let mut report = whole(&mine);
        report.gate = None;
        report.generated_at = format!("2026-11-25T09:00:0{index}.000Z");
        report.duration_ms = u64::from(index) * 100;
        report.usage = vec![RoleUsage {
            model: "m".into(),
            calls: u64::from(index),
            cache_hits: 0,
            input_tokens: 10,
            output_tokens: 1,
            cost_usd: Some(0.5),
        }];
        report.shard = Some(SimShard {
            shard: s,
            scenarios: ids.iter().map(|id| (*id).to_owned()).collect(),
            suite_version: "aaaaaaaaaaaaaaaa".into(),
            fixture_version: None,
            gate: Some(gate()),
            baseline: None,
            runs_sha256: Some(runs_digest(&report.runs)),
        });
        report
    }

    fn shards(ids: &[&str], count: u32) -> Vec<(String, SimReport)> {
        (1..=count)
            .rev()
            .map(|i| (format!("shard{i}.json"), shard(ids, i, count)))
            .collect()
    }

    /// The report without what legitimately differs from an unsharded run's.
    fn comparable(report: &SimReport) -> Value {
        let mut v = serde_json::to_value(report).unwrap();
        for key in ["generated_at", "duration_ms", "usage", "merged"] {
            v.as_object_mut().unwrap().remove(key);
        }
        v
    }

    #[test]
    fn the_merge_is_the_unsharded_report_in_suite_order() {
        let parts = shards(&IDS, 3);
        // Every shard holds something here, and the shards are given last first.
        assert!(parts.iter().all(|(_, r)| !r.runs.is_empty()));
        let merged = merge(&parts, None).unwrap();
        let expected = whole(&IDS);
        assert_eq!(comparable(&merged), comparable(&expected));
        // Runs in the simulator's order (scenario id, then repeat), not shard order.
        let order: Vec<(String, u32)> = merged
            .runs
            .iter()
            .map(|r| (r.scenario_id.clone(), r.repeat))
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
        assert_eq!(merged.runs.len(), IDS.len() * 3);
        assert!(merged.summary.errors == 1 && merged.gate.is_some());
        assert!(merged.judge.as_ref().unwrap().consistency.is_some());
        // The merged values of what is per machine.
        assert_eq!(merged.generated_at, "2026-11-25T09:00:03.000Z");
        assert_eq!(merged.duration_ms, 300);
        assert_eq!(merged.usage.len(), 1);
        assert_eq!(
            (merged.usage[0].calls, merged.usage[0].cost_usd),
            (6, Some(1.5))
        );
        let m = merged.merged.as_ref().unwrap();
        assert_eq!(m.count, 3);
        assert_eq!(
            m.shards.iter().map(|s| s.index).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(
            m.shards.iter().map(|s| s.runs).sum::<u32>() as usize,
            merged.runs.len()
        );
        assert!(merged.shard.is_none());
    }

    #[test]
    fn a_shard_with_no_scenario_merges() {
        // Seven scenarios in twelve shards: some shards are empty, and still count.
        let parts = shards(&IDS, 12);
        assert!(parts.iter().any(|(_, r)| r.runs.is_empty()));
        let merged = merge(&parts, None).unwrap();
        assert_eq!(comparable(&merged), comparable(&whole(&IDS)));
    }

    #[test]
    fn adding_a_scenario_moves_no_other() {
        let before = shards(&IDS[..6], 3);
        let after = shards(&IDS, 3);
        for ((_, b), (_, a)) in before.iter().zip(&after) {
            let ids = |r: &SimReport| {
                r.scenarios
                    .iter()
                    .map(|s| s.id.clone())
                    .filter(|id| id != "zeta")
                    .collect::<Vec<_>>()
            };
            assert_eq!(ids(b), ids(a));
        }
    }

    #[test]
    fn the_baseline_is_compared_with_the_whole() {
        let mut base = whole(&IDS);
        base.runs.iter_mut().for_each(|r| {
            if let Some(o) = &mut r.overall {
                *o = (*o + 2.0).min(10.0);
            }
        });
        crate::run::aggregate(&mut base, Some(&gate()));
        let recorded = ShardBaseline {
            label: "base.json".into(),
            version: baseline_version(&base),
        };
        let mut parts = shards(&IDS, 2);
        for (_, r) in &mut parts {
            r.shard.as_mut().unwrap().baseline = Some(recorded.clone());
        }
        let merged = merge(&parts, Some(&base)).unwrap();
        let mut expected = whole(&IDS);
        expected.baseline = Some(SimBaseline::of("base.json", &base, &expected));
        assert_eq!(merged.baseline, expected.baseline);

        let e = merge(&parts, None).unwrap_err().to_string();
        assert!(
            e.contains("baseline base.json") && e.contains("give that report"),
            "{e}"
        );
        let mut other = base.clone();
        other.model = "someone-else".into();
        let e = merge(&parts, Some(&other)).unwrap_err().to_string();
        assert!(e.contains("not the report the shards read"), "{e}");
    }

    fn refused(parts: &[(String, SimReport)]) -> String {
        merge(parts, None).unwrap_err().to_string()
    }

    #[test]
    fn reports_of_other_settings_are_refused_naming_the_field_the_files_and_the_values() {
        let mut parts = shards(&IDS, 3);
        parts[2].1.model = "openai/other".into();
        let e = refused(&parts);
        assert_eq!(
            e,
            "shard3.json and shard1.json are not shards of one simulation: the model under test (`model`) is `m` in shard3.json and `openai/other` in shard1.json"
        );

        let mut parts = shards(&IDS, 3);
        parts[1].1.judge.as_mut().unwrap().version = "ffffffffffffffff".into();
        let e = refused(&parts);
        assert!(
            e.contains("`judge.version`")
                && e.contains("`0123456789abcdef` in shard3.json")
                && e.contains("`ffffffffffffffff` in shard2.json"),
            "{e}"
        );

        let mut parts = shards(&IDS, 3);
        parts[1].1.criteria[0].weight = 0.7;
        assert!(refused(&parts).contains("the criteria (`criteria`)"));

        let mut parts = shards(&IDS, 3);
        parts[1].1.shard.as_mut().unwrap().fixture_version = Some("0000".into());
        let e = refused(&parts);
        assert!(
            e.contains("the fixture's version") && e.contains("absent in shard3.json"),
            "{e}"
        );

        let mut parts = shards(&IDS, 3);
        parts[1].1.shard.as_mut().unwrap().scenarios.pop();
        let e = refused(&parts);
        assert!(
            e.contains("the selected scenarios")
                && e.contains("7 scenario(s), with `zeta` in shard3.json")
                && e.contains("6 scenario(s), without `zeta` in shard2.json"),
            "{e}"
        );

        let mut parts = shards(&IDS, 3);
        parts.push(("four.json".into(), shard(&IDS, 2, 4)));
        let e = refused(&parts);
        assert!(
            e.contains("the shard count is 3 in shard3.json and 4 in four.json"),
            "{e}"
        );
    }

    #[test]
    fn a_shard_twice_missing_shards_and_unsharded_reports_are_refused() {
        let mut parts = shards(&IDS, 3);
        parts.push(("again.json".into(), shard(&IDS, 2, 3)));
        let e = refused(&parts);
        assert!(
            e.contains("shard2.json and again.json are both shard hash:2/3"),
            "{e}"
        );

        let mut parts = shards(&IDS, 4);
        parts.retain(|(f, _)| f != "shard2.json" && f != "shard4.json");
        let e = refused(&parts);
        assert!(
            e.starts_with("shards hash:2/4, hash:4/4 missing: a merge must cover the whole suite"),
            "{e}"
        );

        let mut parts = shards(&IDS, 3);
        parts[0].1.shard = None;
        let e = refused(&parts);
        assert!(
            e.starts_with("shard3.json: not a shard's report (it has no `shard`"),
            "{e}"
        );
        let merged = merge(&shards(&IDS, 3), None).unwrap();
        let e = refused(&[("merged.json".into(), merged)]);
        assert!(e.contains("already a merged report"), "{e}");
        assert!(matches!(merge(&[], None), Err(MergeError::Empty)));
    }

    /// Issue 42: a shard's runs are checked against the digest saved with them.
    #[test]
    fn runs_edited_since_the_save_are_refused() {
        let mut parts = shards(&IDS, 3);
        let at = parts.iter().position(|(_, r)| !r.runs.is_empty()).unwrap();
        let run = &mut parts[at].1.runs[0];
        run.verdict = if run.verdict == Verdict::Pass {
            Verdict::Fail
        } else {
            Verdict::Pass
        };
        let file = parts[at].0.clone();
        let e = refused(&parts);
        assert!(
            e.starts_with(&format!("{file}: its runs changed since it was saved")),
            "{e}"
        );

        let mut parts = shards(&IDS, 3);
        parts[1].1.shard.as_mut().unwrap().runs_sha256 = None;
        let file = parts[1].0.clone();
        let e = refused(&parts);
        assert!(
            e.starts_with(&format!(
                "{file}: it records no digest of its runs (`shard.runs_sha256`)"
            )),
            "{e}"
        );
        // As saved, they merge.
        assert!(merge(&shards(&IDS, 3), None).is_ok());
    }

    #[test]
    fn runs_outside_their_shard_are_refused() {
        let mut parts = shards(&IDS, 3);
        let stray = parts[0].1.runs[0].clone();
        parts[1].1.runs.push(stray.clone());
        let e = refused(&parts);
        assert!(
            e.contains(&format!(
                "it holds scenario `{}`, which belongs to shard",
                stray.scenario_id
            )),
            "{e}"
        );

        let mut parts = shards(&IDS, 3);
        let owner = parts.iter().position(|(_, r)| !r.runs.is_empty()).unwrap();
        let id = parts[owner].1.runs[0].scenario_id.clone();
        parts[owner].1.runs.retain(|r| r.scenario_id != id);
        let e = refused(&parts);
        assert!(
            e.contains(&format!(
                "has no run of scenario `{id}`, which the simulation selected"
            )),
            "{e}"
        );
    }
}
