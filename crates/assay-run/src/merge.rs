//! The runs of a suite's shards merged into the run of the whole (`assay runs merge`).
//!
//! Each shard (`assay run --shard hash:i/n`) records which shard it ran and a digest of the
//! whole suite's case ids in run order ([`assay_core::runlog::ShardRun`]). A merge checks that
//! the shards belong together: the same assay, settings, knowledge base, systems under test,
//! selection and suite, every shard of the count present once, and the project it is run in
//! holding that same suite. It believes no shard's cases it cannot check: every case must be
//! one its shard runs (its key hashes to that shard, so a case moved between shards is named),
//! and the SHA-256 of a shard's cases, recorded when it was saved
//! (`ShardRun::cases_sha256`, whether its cases are listed or streamed), must match them, so a
//! score or verdict edited afterwards is refused, naming the file.
//! Then it takes every case from the shards' run logs and feeds them
//! to the aggregator in the order a run of the whole suite takes them, so the totals, the
//! statistics, the worst cases listed and every report are the ones an unsharded run gives.
//!
//! The merge holds the cases of the shards in memory while it orders them (about a kilobyte a
//! case); the run log it writes is streamed.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use assay_core::aggregate::{Aggregator, CaseRecord};
use assay_core::bank::BankType;
use assay_core::runlog::{CaseLog, MergedRun, MergedShard, RunFilters, RunLog, SCHEMA_VERSION};

use crate::HarnessError;
use crate::caselog;
use crate::journal::{JOURNAL_VERSION, JournalHeader};
use crate::run::{self, RunRequest, SuiteDigest};
use assay_project::project::Project;

/// One shard's saved run.
#[derive(Debug, Clone)]
pub struct ShardFile {
    /// Its results file (`results_<stamp>.json`).
    pub path: PathBuf,
    /// What it holds.
    pub log: RunLog,
}

impl ShardFile {
    /// Reads a shard's results file.
    pub fn read(path: &Path) -> Result<ShardFile, HarnessError> {
        let log = crate::baseline::read_file(path)?;
        Ok(ShardFile {
            path: path.to_owned(),
            log,
        })
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }
}

/// The merged run, not yet saved.
#[derive(Debug)]
pub struct Merged {
    /// The RunLog of the whole suite.
    pub log: RunLog,
    /// Its run log (every case, in run order), when the RunLog lists only the worst cases:
    /// a file in the results folder that saving the run moves beside it.
    pub run_log: Option<assay_project::results::HeldTemp>,
}

/// Setup entries that describe how a shard went rather than what it ran (searches counted,
/// the warm-up's cost): they may differ between shards.
const VOLATILE_SETUP: [&str; 2] = ["semantic_search_detail", "semantic_warm_up"];

fn usage(message: String) -> HarnessError {
    HarnessError::Usage(message)
}

/// Checks that `shards` are the shards of one run of one suite, every one present once.
pub fn check(shards: &[ShardFile]) -> Result<(), HarnessError> {
    let Some(first) = shards.first() else {
        return Err(usage(
            "runs merge: name the results files of the shards (results/results_<stamp>.json of each `assay run --shard hash:i/n`)".into(),
        ));
    };
    for s in shards {
        if s.log.merged.is_some() {
            return Err(usage(format!(
                "{}: a merged run already; merge the shards' own results files",
                s.name()
            )));
        }
        if s.log.shard.is_none() {
            return Err(usage(format!(
                "{}: not a shard's run (it ran the whole suite); `assay runs merge` takes the runs of `assay run --shard hash:i/n`",
                s.name()
            )));
        }
    }
    let shard = |s: &ShardFile| s.log.shard.clone().expect("checked above");
    let a = first;
    let sa = shard(a);
    for b in &shards[1..] {
        let sb = shard(b);
        let differ = |what: &str, x: &dyn std::fmt::Display, y: &dyn std::fmt::Display| {
            usage(format!(
                "these shards are not of one run: {what} differs: {} has {x}, {} has {y}",
                a.name(),
                b.name()
            ))
        };
        if sa.shard.count != sb.shard.count {
            return Err(differ(
                "the shard count",
                &format!("shard {}", sa.shard),
                &format!("shard {}", sb.shard),
            ));
        }
        if a.log.assay_version != b.log.assay_version {
            return Err(differ(
                "the assay version",
                &a.log.assay_version,
                &b.log.assay_version,
            ));
        }
        if a.log.schema_version != b.log.schema_version {
            return Err(differ(
                "the RunLog version",
                &a.log.schema_version,
                &b.log.schema_version,
            ));
        }
        if a.log.filters != b.log.filters {
            return Err(differ(
                "the selection (--banks, --test, --topic)",
                &filters(&a.log.filters),
                &filters(&b.log.filters),
            ));
        }
        if let Some((key, x, y)) = first_difference(&a.log.settings, &b.log.settings) {
            return Err(differ(&format!("the setting `{key}`"), &x, &y));
        }
        if a.log.kb.digest != b.log.kb.digest {
            return Err(differ("the knowledge base", &kb(&a.log), &kb(&b.log)));
        }
        let stable = |log: &RunLog| -> BTreeMap<String, String> {
            log.setup
                .iter()
                .filter(|(k, _)| !VOLATILE_SETUP.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        if let Some((key, x, y)) = first_difference(&stable(&a.log), &stable(&b.log)) {
            return Err(differ(&format!("the system under test (`{key}`)"), &x, &y));
        }
        let repeats = |log: &RunLog| log.semantic.as_ref().map_or(1, |s| s.repeats);
        if repeats(&a.log) != repeats(&b.log) {
            return Err(differ("--repeat", &repeats(&a.log), &repeats(&b.log)));
        }
        if sa.suite != sb.suite || sa.suite_cases != sb.suite_cases {
            return Err(differ(
                "the suite (the test banks' cases)",
                &format!("{} cases, digest {}", sa.suite_cases, sa.suite),
                &format!("{} cases, digest {}", sb.suite_cases, sb.suite),
            ));
        }
    }
    let count = sa.shard.count;
    let mut seen: BTreeMap<u32, &ShardFile> = BTreeMap::new();
    for s in shards {
        let index = shard(s).shard.index;
        if let Some(other) = seen.insert(index, s) {
            return Err(usage(format!(
                "shard {index} of {count} is given twice: {} and {}",
                other.name(),
                s.name()
            )));
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| !seen.contains_key(i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(usage(format!(
            "shard{} {} of {count} missing: a merge is the whole suite, so every shard's results file is needed",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        )));
    }
    Ok(())
}

fn filters(f: &RunFilters) -> String {
    let banks: Vec<&str> = f.banks.iter().map(|b| b.key()).collect();
    let mut out = format!("banks {}", banks.join(","));
    if let Some(t) = &f.test {
        out.push_str(&format!(", test {t}"));
    }
    if let Some(t) = &f.topic {
        out.push_str(&format!(", topic {t}"));
    }
    out
}

fn kb(log: &RunLog) -> String {
    format!("{} entities, digest {}", log.kb.count, log.kb.digest)
}

/// The first key whose value differs between two maps, with both values (`(absent)` for a
/// missing one).
fn first_difference(
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> Option<(String, String, String)> {
    let absent = || "(absent)".to_owned();
    a.keys()
        .chain(b.keys())
        .find(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            (
                k.clone(),
                a.get(k).map_or_else(absent, |v| format!("`{v}`")),
                b.get(k).map_or_else(absent, |v| format!("`{v}`")),
            )
        })
}

/// Merges the shards' runs into the run of the whole suite of `project` (see the module
/// docs). The shards are checked first ([`check`]); then the project must hold the suite
/// they ran, under the settings they ran with.
pub fn merge(project: &Project, mut shards: Vec<ShardFile>) -> Result<Merged, HarnessError> {
    check(&shards)?;
    shards.sort_by_key(|s| s.log.shard.as_ref().map_or(0, |r| r.shard.index));
    let first = &shards[0];
    let shard_run = first.log.shard.clone().expect("checked");
    let settings = &project.settings;
    if let Some((key, ours, theirs)) = first_difference(&settings.recorded, &first.log.settings) {
        return Err(usage(format!(
            "the project in {} is not set up as the shards were: the setting `{key}` is {ours} here and {theirs} in {}",
            settings.root.display(),
            first.name()
        )));
    }

    // Every case of every shard, by bank and id.
    let mut cases: HashMap<(BankType, String), CaseRecord> = HashMap::new();
    let mut changed: Option<HarnessError> = None;
    for s in &shards {
        let dir = s.path.parent().unwrap_or(Path::new("."));
        let file = caselog::cases_file(dir, &s.log);
        let refused = |message: String| {
            HarnessError::Data(assay_kb::datafile::DataError::new(&s.path, message))
        };
        let ran = s.log.shard.as_ref().expect("checked").clone();
        let Some(recorded) = ran.cases_sha256.as_deref() else {
            return Err(refused(
                "records no digest of its cases (`shard.cases_sha256`), so they cannot be checked: run this shard again with this assay".into(),
            ));
        };
        let mut duplicate = false;
        let mut digest = caselog::CasesDigest::default();
        caselog::for_each_case(&s.log, file.as_deref(), None, &mut |r| {
            // A case belongs to the shard its key hashes to: one found elsewhere was moved.
            let key = run::case_key(r.bank(), r.test_id());
            let owner = assay_core::shard::Shard::of(&key, ran.shard.count);
            if owner != ran.shard.index {
                return Err(format!(
                    "holds case {key}, which belongs to shard {owner} of {} (by the hash of its id), not to this shard {}: the shard's results were changed",
                    ran.shard.count, ran.shard.index
                ));
            }
            digest.add(&r)?;
            duplicate |= cases.insert((r.bank(), r.test_id().to_owned()), r).is_some();
            Ok(())
        })
        .map_err(|e| match e {
            caselog::CaseLogError::Each(message) => refused(message),
            other => refused(other.to_string()),
        })?;
        let got = digest.finish();
        if got != recorded && changed.is_none() {
            // Named after every case is placed: a case moved to another shard, or removed from
            // the suite's, is named by its id first.
            changed = Some(refused(format!(
                "its cases changed since the shard was saved (their SHA-256 is {got}, the shard recorded {recorded}): a score, a verdict or a case was edited, added or removed; run this shard again"
            )));
        }
        if duplicate {
            return Err(usage(format!(
                "{}: holds a case another shard holds too; these are not shards of one run",
                s.name()
            )));
        }
    }

    let filters = first.log.filters.clone();
    let banks = filters.banks.clone();
    let request = RunRequest {
        banks: banks.clone(),
        tests: filters
            .selected_tests()
            .into_iter()
            .map(str::to_owned)
            .collect(),
        topic: filters.topic.clone(),
        shard: None,
        changed: None,
        drafts: filters.drafts,
    };
    let run_id = uuid::Uuid::new_v4().to_string();
    let timestamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let total = cases.len();
    // The run log, written as the cases are taken in run order; kept only when the RunLog
    // cannot list them all.
    let mut writer = if total > run::LISTED_WHOLE {
        std::fs::create_dir_all(&settings.results_dir)
            .map_err(|e| HarnessError::io(&settings.results_dir, &e))?;
        let file = assay_project::results::temporary(&settings.results_dir, ".jsonl")
            .map_err(|e| HarnessError::io(&settings.results_dir, &e))?;
        let header = JournalHeader {
            journal: JOURNAL_VERSION,
            run_id: run_id.clone(),
            timestamp: timestamp.clone(),
            request: run::request_key(&request),
            setup: format!("merged from {} shards", shards.len()),
        };
        let mut w = std::io::BufWriter::new(file);
        writeln!(w, "{}", json_line(&header)?)
            .map_err(|e| write_error(&settings.results_dir, &e))?;
        Some(w)
    } else {
        None
    };

    let mut agg = Aggregator::new(run::LISTED, run::LISTED_WHOLE);
    let mut digest = SuiteDigest::default();
    let mut index: HashMap<BankType, usize> = HashMap::new();
    let mut missing: Option<String> = None;
    let mut failure: Option<HarnessError> = None;
    let no_matcher = project.patterns.is_none();
    for bank in &banks {
        // Every case is pushed, in order: the semantic slots grow to the bank's size.
        agg.start(*bank, 0);
        run::for_each_suite_case(project, &request, &[*bank], &mut |bank, test_id, _| {
            digest.add(bank, test_id);
            let Some(record) = cases.remove(&(bank, test_id.to_owned())) else {
                // A run without pattern rules scores no pattern case.
                if !(bank == BankType::Pattern && no_matcher) && missing.is_none() {
                    missing = Some(run::case_key(bank, test_id));
                }
                return;
            };
            if let Some(w) = writer.as_mut()
                && failure.is_none()
                && let Err(e) = json_line(&record).and_then(|l| {
                    writeln!(w, "{l}").map_err(|e| write_error(&settings.results_dir, &e))
                })
            {
                failure = Some(e);
            }
            let i = index.entry(bank).or_insert(0);
            agg.push(*i, record);
            *i += 1;
        })?;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let ours = digest.finish(shard_run.shard);
    if ours.suite != shard_run.suite || ours.suite_cases != shard_run.suite_cases {
        return Err(usage(format!(
            "the test banks in {} are not the suite the shards ran ({} cases here, {} in the shards' suite): merge in the checkout the shards ran from",
            settings.root.display(),
            ours.suite_cases,
            shard_run.suite_cases
        )));
    }
    if let Some(key) = missing {
        return Err(usage(format!(
            "case {key} of the suite is in no shard's results; the shards' results are incomplete"
        )));
    }
    if let Some(((bank, id), _)) = cases.iter().next() {
        return Err(usage(format!(
            "case {} is in a shard's results but not in the suite",
            run::case_key(*bank, id)
        )));
    }
    // A case edited, added or removed where nothing above names it.
    if let Some(e) = changed {
        return Err(e);
    }
    let run_log = match writer {
        Some(w) => {
            let file = w
                .into_inner()
                .map_err(|e| write_error(&settings.results_dir, e.error()))?;
            file.as_file()
                .sync_all()
                .map_err(|e| write_error(&settings.results_dir, &e))?;
            Some(
                assay_project::results::HeldTemp::new(file)
                    .map_err(|e| write_error(&settings.results_dir, &e))?,
            )
        }
        None => None,
    };

    let repeats = first.log.semantic.as_ref().map_or(1, |s| s.repeats);
    let run::Finished {
        results,
        notable,
        cases: case_count,
        summary,
    } = run::Finished::of(project, agg, repeats);

    let mut warnings: Vec<String> = Vec::new();
    for s in &shards {
        for w in &s.log.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
    }
    // Each shard found the stale cases among its own; the merged run lists as many as one run.
    let mut stale: Vec<_> = shards
        .iter()
        .flat_map(|s| s.log.stale.iter().cloned())
        .collect();
    let stale_more = shards.iter().map(|s| s.log.stale_more).sum::<usize>()
        + stale.len().saturating_sub(assay_core::runlog::STALE_LISTED);
    stale.truncate(assay_core::runlog::STALE_LISTED);
    let log = RunLog {
        schema_version: SCHEMA_VERSION,
        assay_version: first.log.assay_version.clone(),
        run_id,
        project: settings.root.display().to_string(),
        timestamp,
        // The shards ran side by side: the merged run took as long as the slowest.
        duration_ms: shards.iter().map(|s| s.log.duration_ms).max().unwrap_or(0),
        filters,
        setup: merged_setup(&shards),
        summary,
        semantic: results.semantic,
        state: results.state,
        pattern: results.pattern,
        always: results.always,
        answer: results.answer,
        warnings,
        settings: first.log.settings.clone(),
        kb: first.log.kb.clone(),
        baseline: None,
        cases: run_log.as_ref().map(|_| CaseLog {
            file: run::JOURNALED.to_owned(),
            count: case_count,
            sha256: None,
        }),
        notable_cases: Some(notable),
        rate_limits: shards
            .iter()
            .flat_map(|s| s.log.rate_limits.iter().cloned())
            .collect(),
        shard: None,
        merged: Some(MergedRun {
            count: shard_run.shard.count,
            suite: shard_run.suite.clone(),
            shards: shards
                .iter()
                .map(|s| MergedShard {
                    index: s.log.shard.as_ref().map_or(0, |r| r.shard.index),
                    run_id: s.log.run_id.clone(),
                    timestamp: s.log.timestamp.clone(),
                    cases: s.log.summary.total_tests,
                    duration_ms: s.log.duration_ms,
                })
                .collect(),
        }),
        stale,
        stale_more,
    };
    Ok(Merged { log, run_log })
}

/// The shards' setup: what every shard shares as it is; an entry that differs between them
/// (how a shard's searches went) as each shard's value in turn.
fn merged_setup(shards: &[ShardFile]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let keys: std::collections::BTreeSet<&String> =
        shards.iter().flat_map(|s| s.log.setup.keys()).collect();
    for key in keys {
        let values: Vec<Option<&String>> = shards.iter().map(|s| s.log.setup.get(key)).collect();
        let merged = if values.iter().all(|v| *v == values[0]) {
            values[0].cloned()
        } else {
            Some(
                shards
                    .iter()
                    .zip(&values)
                    .filter_map(|(s, v)| {
                        let index = s.log.shard.as_ref().map_or(0, |r| r.shard.index);
                        v.map(|v| format!("shard {index}: {v}"))
                    })
                    .collect::<Vec<_>>()
                    .join(" | "),
            )
        };
        if let Some(v) = merged {
            out.insert(key.clone(), v);
        }
    }
    out
}

fn json_line<T: serde::Serialize>(value: &T) -> Result<String, HarnessError> {
    serde_json::to_string(value)
        .map_err(|e| HarnessError::Infrastructure(format!("cannot encode a case: {e}")))
}

fn write_error(dir: &Path, e: &std::io::Error) -> HarnessError {
    HarnessError::Infrastructure(format!(
        "cannot write the merged run log in {}: {e}",
        dir.display()
    ))
}
