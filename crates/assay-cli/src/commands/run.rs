//! `assay run`

use std::io::IsTerminal;
use std::path::PathBuf;

use assay_core::aggregate::CaseRecord;
use assay_core::bank::BankType;
use assay_project::HarnessError;
use assay_project::project::Project;
use assay_project::results;
use assay_report::console::Listing;
use assay_run::caselog;
use assay_run::freshness;
use assay_run::run::{RunRequest, gate_passed};
use assay_run::session::{JournalMode, RunSetup, execute};
use clap::Args;

use super::{current_thread_runtime, env, log_warnings, out, output};
use crate::exit::Exit;
use crate::progress::Bar;

/// `assay run`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Banks to run: `all`, or a comma-separated list of semantic, state, pattern, always.
    #[arg(long, default_value = "all", value_name = "BANKS")]
    pub banks: String,

    /// Run only the case with this test_id (in whichever bank holds it); repeat it for more
    /// cases.
    #[arg(long, value_name = "ID")]
    pub test: Vec<String>,

    /// Run only the cases whose test_ids this file lists, one a line (blank lines and lines
    /// starting with `#` are skipped); with --test, the cases of both.
    #[arg(long, value_name = "FILE")]
    pub tests_from: Option<PathBuf>,

    /// List the cases the other options select (`bank::test_id`, one a line; with --json, a
    /// JSON object) without running anything or writing anything.
    #[arg(long, conflicts_with_all = ["resume", "baseline", "junit", "changed_since", "no_save", "all", "failures_only"])]
    pub list: bool,

    /// Run only the semantic cases with this topic.
    #[arg(long, value_name = "TOPIC")]
    pub topic: Option<String>,

    /// Print the RunLog as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// Also write JUnit XML to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Do not save results/results_<stamp>.json and results/report_<stamp>.md.
    #[arg(long)]
    pub no_save: bool,

    /// List every hard fail and critical failure in the summary (the default lists the worst
    /// few, with counts per reason).
    #[arg(long, conflicts_with = "all")]
    pub failures_only: bool,

    /// List every case below 100 in the summary, and every error.
    #[arg(long)]
    pub all: bool,

    /// Embedder for the semantic bank (`vendor/model`); overrides ASSAY_EMBEDDER and assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,

    /// Reranker for the semantic bank: `none`, `voyage/<model>`, `anthropic/<model>` or
    /// `openai/<model>`; overrides ASSAY_RERANKER and assay.toml.
    #[arg(long, value_name = "SPEC")]
    pub reranker: Option<String>,

    /// Provider call cache: `read-write`, `off` or `replay` (a miss is an error; no network);
    /// overrides ASSAY_CACHE and assay.toml.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,

    #[command(flatten)]
    pub batch: crate::args::BatchArg,

    /// Semantic cases in flight at once; overrides assay.toml.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,

    /// Resume the interrupted run of the same options from its journal (.assay/journal.jsonl):
    /// finished cases are not run again.
    #[arg(long)]
    pub resume: bool,

    /// Compare with a saved run: `accepted` (the run your team accepted with `assay runs
    /// accept`; until one is, the run is compared with nothing and says so), `latest` (the
    /// newest saved run before this one, whatever it was like: after a bad run, the next is
    /// compared with the bad one), a saved run's id (its stamp, like 2026-11-25-0915, or its
    /// run_id) or a results JSON file. In CI, use `accepted`.
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,

    /// Run each semantic case K times, when a stage is stochastic (an LLM reranker): each
    /// repeat is its own call (the repeat is part of the cache key); a case scores the mean of
    /// its repeats, the semantic average gets a 95 % interval, and cases whose repeats disagree
    /// are listed as unstable.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,

    /// Run one shard of the suite: `hash:i/n` keeps the cases whose bank and test id hash to
    /// shard i of n (from 1), so n machines run a suite between them and adding a case moves
    /// no other. Each shard saves its own run; `assay runs merge` makes them one run, where
    /// the baseline gate belongs (so --baseline is refused here).
    #[arg(long, value_name = "hash:i/n", value_parser = parse_shard, conflicts_with_all = ["baseline"])]
    pub shard: Option<assay_core::shard::Shard>,

    /// Keep no journal (.assay/journal.jsonl): the run cannot be resumed. With --no-save it
    /// writes nothing in the project and takes no run lock, so such runs may go side by side
    /// (the shards pytest-xdist's workers run, whose --json RunLogs `assay runs merge` takes).
    #[arg(long, conflicts_with = "resume")]
    pub no_journal: bool,

    /// Also run the pending drafts under test_banks/drafts/ (`assay generate`).
    #[arg(long)]
    pub include_drafts: bool,

    /// Run only the cases that name an entity whose content changed since a saved run (its
    /// id, results file, `latest` or `accepted`), plus the always-bank cases of those
    /// entities' audiences; the console says how many cases it skipped.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["test", "shard"])]
    pub changed_since: Option<String>,
}

/// `--shard`'s value.
pub fn parse_shard(spec: &str) -> Result<assay_core::shard::Shard, String> {
    assay_core::shard::Shard::parse(spec)
}

fn parse_banks(spec: &str) -> Result<Vec<BankType>, HarnessError> {
    assay_run::run::parse_banks(spec).map_err(|e| HarnessError::Usage(format!("--banks: {e}")))
}

pub fn run(args: &RunArgs) -> anyhow::Result<Exit> {
    if let Some(path) = &args.junit {
        output::format("--junit", path, &[output::Format::Xml])?;
    }
    let mut request = RunRequest {
        banks: parse_banks(&args.banks)?,
        tests: selected_tests(args)?,
        topic: args.topic.clone(),
        shard: args.shard,
        changed: None,
        drafts: None,
    };
    // A run streams its state, pattern and always banks from their files (memory that does
    // not grow with them); one case by id is looked up in the banks held whole.
    let mut project = if request.tests.is_empty() {
        Project::load_for_run(&args.dir)?
    } else {
        Project::load(&args.dir)?
    };
    // Drafts are read only when asked for, strictly, and join their banks as cases.
    if args.include_drafts {
        request.drafts = Some(freshness::include_drafts(&mut project)?);
    }
    log_warnings(&project.warnings);
    if args.list {
        let cases = assay_run::run::list_cases(&project, &request)?;
        out(&listing(&cases, args.json));
        return Ok(Exit::Success);
    }
    // --changed-since: the run is found and compared with the knowledge base before anything
    // runs; nothing changed, or no case naming what changed, runs nothing.
    if let Some(spec) = args.changed_since.as_deref() {
        let reference = freshness::load_reference(&project, spec)?;
        let changed = assay_run::session::changed_since(&project, &reference, spec, &env)?;
        let all = assay_run::run::count_selected(&project, &request)?;
        request.changed = Some(changed.clone());
        let selected = if changed.entities.is_empty() {
            0
        } else {
            assay_run::run::count_selected(&project, &request)?
        };
        if selected == 0 {
            out(&nothing_to_run(&changed, all, args.json));
            return Ok(Exit::Success);
        }
    }
    // The baseline is found and checked before anything runs: a bad one writes nothing.
    let baseline = match args.baseline.as_deref() {
        Some(spec) => {
            let found = assay_run::baseline::load(&project, spec)?;
            if found.is_none() {
                tracing::warn!(
                    "--baseline accepted: no run has been accepted yet, so this run is compared with nothing (accept one with `assay runs accept latest`)"
                );
            }
            found
        }
        None => None,
    };
    let setup = RunSetup {
        embedder: args.embedder.clone(),
        reranker: args.reranker.clone(),
        cache: args.cache.clone(),
        concurrency: args.concurrency,
        journal: if args.no_journal {
            JournalMode::Off
        } else if args.resume {
            JournalMode::Resume
        } else {
            JournalMode::Start
        },
        save: !args.no_save,
        repeat: args.repeat,
        baseline,
        answer: Some(assay_experiment::answer::factory()),
    };
    let show_progress =
        !args.json && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
    let mut bar = Bar::new(show_progress);
    let rt = current_thread_runtime()?;
    let outcome = rt.block_on(execute(
        &project,
        &request,
        &setup,
        &args.batch.env(),
        &mut bar,
    ))?;
    for w in outcome.log.warnings.iter().skip(project.warnings.len()) {
        tracing::warn!("{w}");
    }
    let listing = if args.all {
        Listing::All
    } else if args.failures_only {
        Listing::Failures
    } else {
        Listing::Summary
    };
    let output = Output {
        json: args.json,
        junit: args.junit.as_deref(),
        listing,
        run_log: None,
    };
    finish(&project, &outcome, &output)
}

/// The case ids of `--test` and `--tests-from`.
fn selected_tests(args: &RunArgs) -> Result<std::collections::BTreeSet<String>, HarnessError> {
    let mut tests: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for t in &args.test {
        if t.trim().is_empty() {
            return Err(HarnessError::Usage("--test: the case id is empty".into()));
        }
        tests.insert(t.trim().to_owned());
    }
    if let Some(path) = &args.tests_from {
        let text = std::fs::read_to_string(path).map_err(|e| {
            HarnessError::Usage(format!(
                "--tests-from {}: cannot read it: {e}",
                path.display()
            ))
        })?;
        let before = tests.len();
        for line in text.lines() {
            let id = line.trim();
            if !id.is_empty() && !id.starts_with('#') {
                tests.insert(id.to_owned());
            }
        }
        if tests.len() == before && args.test.is_empty() {
            return Err(HarnessError::Usage(format!(
                "--tests-from {}: lists no case id (one a line)",
                path.display()
            )));
        }
    }
    Ok(tests)
}

/// `--list`'s output: `bank::test_id` lines, or `{"cases": [{"bank", "test_id"}], "count"}`.
fn listing(cases: &[(BankType, String)], json: bool) -> String {
    if json {
        let cases: Vec<serde_json::Value> = cases
            .iter()
            .map(|(b, t)| serde_json::json!({"bank": b.key(), "test_id": t}))
            .collect();
        let n = cases.len();
        return format!("{:#}\n", serde_json::json!({"cases": cases, "count": n}));
    }
    let mut text = String::new();
    for (b, t) in cases {
        text.push_str(b.key());
        text.push_str("::");
        text.push_str(t);
        text.push('\n');
    }
    text
}

/// What `--changed-since` says when it runs nothing (exit 0): nothing changed, or no case of
/// the selected banks names what changed. With `--json`, the `filters.changed_since` record of
/// a run of no case.
fn nothing_to_run(changed: &freshness::ChangedEntities, all: usize, json: bool) -> String {
    let record = assay_core::runlog::ChangedSince {
        reference: changed.reference.clone(),
        run_id: changed.run_id.clone(),
        entities: changed
            .entities
            .iter()
            .take(assay_core::runlog::ChangedSince::LISTED)
            .cloned()
            .collect(),
        entity_count: changed.entities.len(),
        ran: 0,
        skipped: all,
    };
    if json {
        let value = serde_json::json!({ "changed_since": record });
        return format!("{value:#}\n");
    }
    let spec = &changed.reference;
    if changed.entities.is_empty() {
        return format!(
            "nothing changed since {spec} (run {}): no entity differs from its knowledge base, so none of the {all} cases ran\n",
            changed.run_id
        );
    }
    format!(
        "{}; no case of the selected banks names {}, so none ran\n",
        assay_report::console::changed_line(&record),
        if record.entity_count == 1 {
            "it"
        } else {
            "them"
        }
    )
}

/// How a finished run is shown.
pub(super) struct Output<'a> {
    /// The RunLog as JSON instead of the summary.
    pub json: bool,
    /// JUnit XML to this file too.
    pub junit: Option<&'a std::path::Path>,
    /// How much of the run the summary lists.
    pub listing: Listing,
    /// Where every case is when the run was not saved and its RunLog lists only the worst
    /// (a saved run's is found from the save).
    pub run_log: Option<&'a std::path::Path>,
}

/// Writes the JUnit file, prints the summary (or the JSON), and says how the run ends: the
/// exit code of `assay run`, which `assay runs merge` shares.
pub(super) fn finish(
    project: &Project,
    outcome: &assay_run::session::RunOutcome,
    output: &Output<'_>,
) -> anyhow::Result<Exit> {
    let log = &outcome.log;
    if let Some(path) = output.junit {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
        }
        // One case at a time, from the run log when the RunLog lists only the worst.
        let run_log = output
            .run_log
            .map(ToOwned::to_owned)
            .or_else(|| outcome.saved.as_ref().and_then(|s| s.cases.clone()));
        let mut failed: Option<String> = None;
        results::write_replace_with(path, &mut |out| {
            let mut cases = |bank: Option<BankType>, each: &mut dyn FnMut(CaseRecord)| {
                caselog::for_each_case(log, run_log.as_deref(), bank, &mut |r| {
                    each(r);
                    Ok(())
                })
                .map_err(|e| e.to_string())
            };
            assay_report::junit::write(log, &mut cases, out).map_err(|e| {
                failed = Some(e.clone());
                std::io::Error::other(e)
            })
        })
        .map_err(|e| match failed.take() {
            Some(why) => HarnessError::Infrastructure(format!("{}: {why}", path.display())),
            None => HarnessError::io(path, &e),
        })?;
    }

    if output.json {
        out(&outcome.json);
    } else {
        let listing = output.listing;
        let mut text = String::new();
        // A comparison leads: what differs between the runs, then the regressions.
        if let Some(diff) = &log.baseline {
            let label = diff.label.clone().unwrap_or_default();
            text.push_str(&assay_report::rundiff::console(diff, &label));
            text.push_str(
                "  (the report's \"Compared with\" section and --json's `baseline` list every changed case)\n\n",
            );
        }
        text.push_str(&assay_report::console::render(log, listing));
        if !outcome.usage_report.is_empty() {
            text.push('\n');
            text.push_str(&outcome.usage_report);
        }
        if let Some(merged) = &log.merged {
            let sizes: Vec<String> = merged.shards.iter().map(|s| s.cases.to_string()).collect();
            text.push_str(&format!(
                "\nmerged from {} shards (hash:1/{n} to hash:{n}/{n}): {} cases\n",
                merged.shards.len(),
                sizes.join(" + "),
                n = merged.count
            ));
        }
        if let Some(shard) = &log.shard {
            text.push_str(&format!(
                "\nshard {} of a suite of {} cases: {} of them ran here. The gate is decided over the whole suite, when the shards are merged (`assay runs merge`).\n",
                shard.shard, shard.suite_cases, log.summary.total_tests
            ));
        }
        if let Some(s) = &outcome.saved {
            text.push_str(&format!(
                "\nsaved {}, {} and {}\n",
                s.json.display(),
                s.markdown.display(),
                s.html.display()
            ));
        }
        out(&text);
    }

    let regression_failed = log
        .baseline
        .as_ref()
        .and_then(|d| d.gate.as_ref())
        .is_some_and(|g| !g.passed);
    if regression_failed && let Some(g) = log.baseline.as_ref().and_then(|d| d.gate.as_ref()) {
        tracing::error!(
            "the run regressed against the baseline: {}",
            g.cases.join(", ")
        );
    }
    let gate_ok = gate_passed(log, &project.settings);
    if !gate_ok && log.shard.is_none() && log.summary.error_count == 0 {
        let s = &log.summary;
        let settings = &project.settings;
        let why = if s.health_status == assay_core::runlog::Health::Critical {
            "the health is CRITICAL".to_owned()
        } else if s.health_status < settings.min_health {
            format!(
                "the health {} is below [gate] min_health {}",
                s.health_status, settings.min_health
            )
        } else {
            format!(
                "the combined score {:.1} is below [gate] min_score {:.1}",
                s.combined_score, settings.min_score
            )
        };
        tracing::error!("the gate failed: {why}");
    }
    Ok(if log.summary.error_count > 0 {
        Exit::Infrastructure
    } else if log.shard.is_some() {
        // A shard is part of the suite: its own health says nothing about the whole.
        Exit::Success
    } else if gate_ok && !regression_failed {
        Exit::Success
    } else {
        Exit::GateFailed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banks_parse() {
        assert_eq!(parse_banks("all").unwrap(), vec![]);
        assert_eq!(
            parse_banks("state, Pattern").unwrap(),
            vec![BankType::State, BankType::Pattern]
        );
        assert!(
            parse_banks("state,stats")
                .unwrap_err()
                .to_string()
                .contains("unknown bank `stats`")
        );
    }
}
