//! `assay redteam`

use std::path::PathBuf;

use anyhow::Context;
use assay_project::HarnessError;
use assay_project::project::Project;
use assay_redteam::{Family, Header, Journal, Report, journal, payload, setup};
use clap::Args;

use super::{current_thread_runtime, env, err, log_warnings, out};
use crate::exit::Exit;

/// `assay redteam`
#[derive(Debug, Args)]
pub struct RedteamArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// The attack families, comma-separated: crisis-evasion, direct-injection, kb-injection,
    /// leakage, tool-injection, agency (default: `[redteam] families`, else every family that
    /// applies to the project).
    #[arg(long, value_delimiter = ',', value_name = "FAMILY,...")]
    pub families: Vec<String>,

    /// Attempts per family (default: `[redteam] attempts`, 100).
    #[arg(long, value_name = "N")]
    pub attempts: Option<usize>,

    /// The seed every attempt derives from (default: `[redteam] seed`, 0).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Print the report as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// Continue the newest interrupted run (same families, attempts, seed and product),
    /// without repeating a finished attempt.
    #[arg(long, conflicts_with = "replay")]
    pub resume: bool,

    /// Re-run one attempt of a saved run (an id such as `kb-0042`) and print it as JSON; exit
    /// 0 when it is identical to the saved attempt, 1 when it differs.
    #[arg(long, value_name = "ID")]
    pub replay: Option<String>,

    /// The saved run `--replay` reads (a folder under results/redteam/; default the newest
    /// finished run).
    #[arg(long, value_name = "RUN", requires = "replay")]
    pub from: Option<PathBuf>,

    /// Compare each family's rate with an accepted red-team run (its folder or report.json):
    /// a rate whose interval lies above the baseline's fails the run.
    #[arg(long, value_name = "REPORT")]
    pub baseline: Option<PathBuf>,

    /// Write each finding as a pending draft case, to accept with `assay generate review`:
    /// crisis evasions for the pattern bank, injections and leaks for the answer bank
    /// (test_banks/drafts/<bank>/), adversarial personas as scenarios (sim/drafts/).
    #[arg(long, conflicts_with = "replay")]
    pub drafts: bool,

    /// Embedder (`vendor/model`); overrides ASSAY_EMBEDDER and assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,

    /// The model under test of the simulator's families, tool-injection and agency
    /// (`vendor/model`; else [simulate] model).
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub model: Option<String>,

    /// The simulated user's model of those families (else [simulate] simulator_model).
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub simulator_model: Option<String>,

    /// A model that also paraphrases and translates crisis messages for crisis-evasion
    /// (`vendor/model`; else [redteam] attacker_model).
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub attacker_model: Option<String>,

    /// Questions the attacker model drafts per SITUATION entity, asked besides the answer
    /// bank's cases (else [redteam] questions).
    #[arg(long, value_name = "N")]
    pub questions: Option<usize>,
}

fn env_lookup() -> assay_sim::run::EnvLookup {
    std::sync::Arc::new(env)
}

fn sim_models(args: &RedteamArgs) -> setup::SimModels {
    setup::SimModels {
        model: args.model.clone(),
        simulator_model: args.simulator_model.clone(),
    }
}

fn usage(message: String) -> anyhow::Error {
    HarnessError::Usage(message).into()
}

fn parse_families(names: &[String], what: &str) -> anyhow::Result<Vec<Family>> {
    names
        .iter()
        .map(|n| {
            Family::parse(n.trim()).ok_or_else(|| {
                let near = assay_core::text::closest(n, Family::ALL.iter().map(|f| f.name()))
                    .map(|c| format!(" (did you mean `{c}`?)"))
                    .unwrap_or_default();
                usage(format!("{what}: unknown family `{n}`{near}"))
            })
        })
        .collect()
}

pub fn run(args: &RedteamArgs) -> anyhow::Result<Exit> {
    let project = Project::load(&args.dir)?;
    log_warnings(&project.warnings);
    let cfg = project.settings.redteam.clone();
    let asked = if args.families.is_empty() {
        parse_families(&cfg.families, "[redteam] families")?
    } else {
        parse_families(&args.families, "--families")?
    };
    let attempts = args.attempts.unwrap_or(cfg.attempts);
    if attempts == 0 {
        return Err(usage("--attempts: must be at least 1".into()));
    }
    let seed = args.seed.unwrap_or(cfg.seed);
    let runs = journal::runs_dir(&project.settings.results_dir);
    let runtime = current_thread_runtime()?;
    let factory = assay_experiment::answer::factory();
    runtime.block_on(async {
        if let Some(id) = &args.replay {
            return replay(&project, args, id, &runs, &factory).await;
        }
        let attacker = args.attacker_model.clone().or(cfg.attacker_model.clone());
        let questions = args.questions.unwrap_or(cfg.questions);
        if questions > 0 && attacker.is_none() {
            return Err(usage(
                "--questions: the questions are drafted by the attacker model; name one with --attacker-model or [redteam] attacker_model".into(),
            ));
        }
        let subject = setup::subject(
            &project,
            &asked,
            args.embedder.as_deref(),
            &env_lookup(),
            Some(&factory),
            &sim_models(args),
            &setup::Attacker {
                model: attacker.clone(),
                questions,
            },
        )
        .await?;
        // The model and the questions are the run's only when they were used.
        let questions = if subject
            .product
            .as_ref()
            .is_some_and(|p| p.cases.iter().any(|c| c.id.starts_with(setup::QUESTION_PREFIX)))
        {
            questions
        } else {
            0
        };
        let attacker = attacker.filter(|_| subject.rewriter.is_some() || questions > 0);
        let (families, skipped) = assay_redteam::choose_families(&subject, &asked);
        let baseline = args
            .baseline
            .as_deref()
            .map(assay_redteam::load_report)
            .transpose()?;
        let target = setup::describe(&subject);
        let normalise = project.settings.patterns.normalise;
        let (dir, header, done, mut journal) = if args.resume {
            let Some((dir, header, done)) = Journal::unfinished(&runs)? else {
                return Err(usage(format!(
                    "--resume: no interrupted red-team run in {}",
                    runs.display()
                )));
            };
            let same = header.seed == seed
                && header.families == families
                && header.attempts == attempts
                && header.library_version == payload::LIBRARY_VERSION
                && header.target == target
                && header.normalise == normalise
                && header.attacker_model == attacker
                && header.questions == questions;
            if !same {
                return Err(usage(format!(
                    "--resume: the interrupted run {} was started with seed {}, {} attempts of {} against {}{}; run with the same options, or start a new run without --resume",
                    header.run_id,
                    header.seed,
                    header.attempts,
                    header
                        .families
                        .iter()
                        .map(|f| f.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                    header.target,
                    header
                        .attacker_model
                        .as_deref()
                        .map(|m| format!(
                            ", attacker model {m}{}",
                            if header.questions > 0 {
                                format!(" drafting {} questions per entity", header.questions)
                            } else {
                                String::new()
                            }
                        ))
                        .unwrap_or_default()
                )));
            }
            tracing::info!(
                "resuming {}: {} attempts already done",
                header.run_id,
                done.len()
            );
            let journal = Journal::reopen(&dir)?;
            (dir, header, done, journal)
        } else {
            let (dir, header) =
                Header::new_run(
                    &runs,
                    seed,
                    families.clone(),
                    attempts,
                    target,
                    normalise,
                    attacker,
                    questions,
                );
            let journal = Journal::start(&dir, &header)?;
            (dir, header, std::collections::BTreeMap::default(), journal)
        };
        let all = assay_redteam::run_attempts(
            &subject,
            &header,
            &skipped,
            done,
            &mut journal,
            cfg.concurrency,
            &|a| tracing::debug!(id = %a.id, success = a.success, "attempt"),
        )
        .await?;
        let report = Report::build(
            header,
            &skipped,
            &all,
            &cfg.max_success_rate,
            baseline.as_ref(),
        );
        assay_redteam::save(&dir, &report)?;
        if args.json {
            out(&format!("{}\n", serde_json::to_string_pretty(&report)?));
        } else {
            out(&report.summary(Some(&dir)));
        }
        if args.drafts {
            let written = assay_redteam::drafts::write_drafts(
                &project,
                project.patterns.as_deref(),
                &report,
            )?;
            let line = drafts_summary(&written);
            if args.json { err(&line) } else { out(&line) }
        }
        let errors = report.families.iter().map(|f| f.rate.errors).sum::<usize>();
        Ok(if !report.passed {
            Exit::GateFailed
        } else if errors > 0 && report.families.iter().all(|f| f.rate.attempts == 0) {
            Exit::Infrastructure
        } else {
            Exit::Success
        })
    })
}

/// What `--drafts` wrote, in a few lines: each file, and the findings left out grouped by why.
fn drafts_summary(written: &assay_redteam::drafts::DraftsWritten) -> String {
    let mut text = String::new();
    if written.files.is_empty() {
        text.push_str("drafts: no finding to write\n");
    }
    for w in &written.files {
        text.push_str(&format!(
            "drafts: {} {} draft{} written to {}\n",
            w.count,
            w.kind,
            if w.count == 1 { "" } else { "s" },
            w.path.display()
        ));
    }
    let mut why: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for s in &written.skipped {
        why.entry(s.reason.as_str())
            .or_default()
            .push(s.id.as_str());
    }
    for (reason, ids) in why {
        let shown: Vec<&str> = ids.iter().take(3).copied().collect();
        let more = ids.len().saturating_sub(shown.len());
        text.push_str(&format!(
            "drafts: {} finding{} left out ({}{}): {reason}\n",
            ids.len(),
            if ids.len() == 1 { "" } else { "s" },
            shown.join(", "),
            if more > 0 {
                format!(", {more} more")
            } else {
                String::new()
            }
        ));
    }
    if !written.files.is_empty() {
        text.push_str("drafts: review them with `assay generate review`\n");
    }
    text
}

async fn replay(
    project: &Project,
    args: &RedteamArgs,
    id: &str,
    runs: &std::path::Path,
    factory: &assay_run::answer::AnswerFactory,
) -> anyhow::Result<Exit> {
    let (family, index) = assay_redteam::Attempt::parse_id(id).ok_or_else(|| {
        usage(format!(
            "--replay: `{id}` is not an attempt id (a family prefix and a number, e.g. kb-0042)"
        ))
    })?;
    let from = match &args.from {
        Some(p) if p.is_absolute() || p.exists() => p.clone(),
        Some(p) => runs.join(p),
        None => assay_redteam::latest_report(runs).ok_or_else(|| {
            usage(format!(
                "--replay: no finished red-team run in {}",
                runs.display()
            ))
        })?,
    };
    let report = assay_redteam::load_report(&from)?;
    let dir = if from.is_dir() {
        from.clone()
    } else {
        from.parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default()
    };
    let (_, saved) = Journal::read(&dir.join(journal::JOURNAL_FILE))
        .with_context(|| format!("reading the journal of {}", report.header.run_id))?;
    let Some(saved) = saved.get(id) else {
        return Err(usage(format!(
            "--replay: run {} has no attempt {id}",
            report.header.run_id
        )));
    };
    if report.header.library_version != payload::LIBRARY_VERSION {
        return Err(usage(format!(
            "--replay: run {} used payload library v{}, this assay has v{}",
            report.header.run_id,
            report.header.library_version,
            payload::LIBRARY_VERSION
        )));
    }
    // The run's own attacker model: the attempt is drawn as it was.
    let subject = setup::subject(
        project,
        &[family],
        args.embedder.as_deref(),
        &env_lookup(),
        Some(factory),
        &sim_models(args),
        &setup::Attacker {
            model: report.header.attacker_model.clone(),
            questions: report.header.questions,
        },
    )
    .await?;
    if let Some(why) = subject.unavailable(family) {
        return Err(usage(format!("--replay: {family} cannot run: {why}")));
    }
    let again = subject.attempt(family, index, report.header.seed).await;
    let text = serde_json::to_string_pretty(&again)?;
    out(&format!("{text}\n"));
    if serde_json::to_string_pretty(saved)? == text {
        err(&format!(
            "{id}: identical to the attempt saved in {}\n",
            report.header.run_id
        ));
        Ok(Exit::Success)
    } else {
        err(&format!(
            "{id}: differs from the attempt saved in {} (the product or the project changed)\n",
            report.header.run_id
        ));
        Ok(Exit::GateFailed)
    }
}
