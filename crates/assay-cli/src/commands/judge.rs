//! `assay judge agree` and `assay judge template`.

use std::path::{Path, PathBuf};

use assay_project::HarnessError;
use assay_project::engine::{ProviderCalls, build_chat_model};
use assay_project::settings::ProjectSettings;
use clap::Subcommand;

use super::{env, out, runtime};
use crate::exit::Exit;

/// `assay judge …`
#[derive(Debug, Subcommand)]
pub enum JudgeCommand {
    /// Judge the labelled items again and measure the agreement with the labels.
    ///
    /// Items left unscored (no score, no verdict) are skipped and counted. Paths in the labels
    /// file (`report`, `transcript`) are looked up beside the labels file first, then in the
    /// project folder.
    ///
    /// Exit codes: 0 measured; 1 a criterion's kappa is below --min-kappa; 2 bad labels
    /// (unknown criteria, scores off the scale, runs the report does not have, no item
    /// scored); 3 the judge failed on some items (reported apart, left out of the measures).
    Agree {
        /// The labels file (YAML or JSON; `judge: simulation`, `judge: rubric` or `judge:
        /// claims`).
        labels: PathBuf,
        /// The judge's `vendor/model` (default: [simulate] evaluator_model for simulation
        /// labels, [optimize] grader_model for rubric labels, [answer] judge_model for claim
        /// labels).
        #[arg(long, value_name = "VENDOR/MODEL")]
        model: Option<String>,
        /// Judge each item K times (another criteria order and seed each time): items whose
        /// verdict flips are listed as uncertain (apart from too lenient and too strict), and
        /// each criterion's spread across the samples is reported.
        #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
        judge_samples: u32,
        /// Fail (exit 1) when a criterion's kappa is below this (or undefined).
        #[arg(long, value_name = "KAPPA")]
        min_kappa: Option<f64>,
        /// Call cache mode: read-write, off or replay.
        #[arg(long)]
        cache: Option<String>,
        /// Print the agreement as JSON (every item).
        #[arg(long)]
        json: bool,
    },
    /// Write a labels file to fill in for a saved simulation report: every run, every
    /// criterion left empty (label blind: the judge's scores are not shown).
    ///
    /// The file names the report so that `assay judge agree` finds it: with --output, by a
    /// path relative to the output file's folder; on stdout (redirected anywhere), by a path
    /// relative to the project folder, where `agree` looks when nothing is beside the labels
    /// file. `latest.json` is named by the stamped report it copies, which later simulations
    /// leave alone.
    Template {
        /// The simulation report (JSON, or the Markdown with its JSON beside it), inside the
        /// project.
        report: PathBuf,
        /// Write here instead of stdout (never over an existing file; missing folders are
        /// made).
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

pub fn run(dir: &Path, command: &JudgeCommand) -> anyhow::Result<Exit> {
    match command {
        JudgeCommand::Template { report, output } => template(dir, report, output.as_deref()),
        JudgeCommand::Agree {
            labels,
            model,
            judge_samples,
            min_kappa,
            cache,
            json,
        } => {
            if min_kappa.is_some_and(|k| !(-1.0..=1.0).contains(&k)) {
                return Err(
                    HarnessError::Usage("--min-kappa: must be between -1 and 1".into()).into(),
                );
            }
            let settings = ProjectSettings::load(dir)?;
            let kind = assay_sim::agree::labels_kind(labels)?;
            let rt = runtime()?;
            let report = match kind.as_str() {
                "simulation" => {
                    let suite = assay_sim::load(dir)?;
                    let loaded = assay_sim::agree::load_labels(labels, &suite)?;
                    let name = model
                        .clone()
                        .unwrap_or_else(|| settings.simulate.evaluator_model.clone());
                    let calls = ProviderCalls::open(&settings, cache.as_deref(), &env, true)?;
                    let judge = calls.chat(
                        "judge",
                        build_chat_model(&settings, &name, "--model", &env)?,
                    );
                    rt.block_on(assay_sim::agree::agree(
                        &suite,
                        &loaded,
                        judge.as_ref(),
                        *judge_samples,
                    ))
                }
                "rubric" => {
                    let loaded =
                        assay_experiment::agree::load_labels(labels, settings.optimize.threshold)?;
                    let name = model
                        .clone()
                        .unwrap_or_else(|| settings.optimize.grader_model.clone());
                    let calls = ProviderCalls::open(&settings, cache.as_deref(), &env, true)?;
                    let model = calls.chat(
                        "grader",
                        build_chat_model(&settings, &name, "--model", &env)?,
                    );
                    let grader = assay_experiment::grade::Grader {
                        model: model.as_ref(),
                        threshold: settings.optimize.threshold,
                    };
                    rt.block_on(assay_experiment::agree::agree(
                        &grader,
                        &loaded,
                        *judge_samples,
                    ))
                }
                "claims" => {
                    let loaded = assay_run::answer::agree::load_labels(labels)?;
                    let name = model
                        .clone()
                        .unwrap_or_else(|| settings.answer.judge_model.clone());
                    let calls = ProviderCalls::open(&settings, cache.as_deref(), &env, true)?;
                    let judge = assay_run::answer::judge::AnswerJudge {
                        model: calls.chat(
                            "judge",
                            build_chat_model(&settings, &name, "--model", &env)?,
                        ),
                        embedder: None,
                        max_tokens: settings.answer.judge_max_tokens,
                    };
                    let claims = rt.block_on(assay_run::answer::agree::agree(
                        &judge,
                        &loaded,
                        *judge_samples,
                    ));
                    if *json {
                        out(&format!("{}\n", serde_json::to_string_pretty(&claims)?));
                    } else {
                        out(&claims.console());
                    }
                    return Ok(verdict(&claims.report, *min_kappa));
                }
                other => {
                    return Err(HarnessError::Data(assay_kb::datafile::DataError::new(
                        labels,
                        format!("judge: `{other}` is not `simulation`, `rubric` or `claims`"),
                    ))
                    .into());
                }
            };
            if *json {
                out(&format!("{}\n", serde_json::to_string_pretty(&report)?));
            } else {
                out(&assay_report::agreement::console(&report));
            }
            Ok(verdict(&report, *min_kappa))
        }
    }
}

/// The exit code of a measurement: 3 when the judge failed on some items, 1 when a criterion's
/// kappa is below `min_kappa` (logged, naming them), else 0.
fn verdict(report: &assay_core::agreement::AgreementReport, min_kappa: Option<f64>) -> Exit {
    let below: Vec<String> = min_kappa
        .map(|min| {
            report
                .measurement
                .criteria
                .iter()
                .filter(|c| {
                    c.kappa.is_none_or(|k| {
                        assay_report::agreement::kappa_rounded(k)
                            < assay_report::agreement::kappa_rounded(min)
                    })
                })
                .map(|c| {
                    format!(
                        "{} ({})",
                        c.id,
                        c.kappa.map_or_else(
                            || "undefined".to_owned(),
                            |k| format!(
                                "{:.2}, {}",
                                k,
                                assay_report::agreement::kappa_words(Some(k))
                            )
                        )
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if !below.is_empty() {
        let min = min_kappa.unwrap_or_default();
        tracing::error!(
            "kappa below --min-kappa {min:.2} ({} by Landis & Koch's bands) on: {}",
            assay_report::agreement::kappa_words(Some(min)),
            below.join(", ")
        );
    }
    if !report.errors.is_empty() {
        Exit::Infrastructure
    } else if !below.is_empty() {
        Exit::GateFailed
    } else {
        Exit::Success
    }
}

fn template(dir: &Path, report: &Path, output: Option<&Path>) -> anyhow::Result<Exit> {
    // A labels template is YAML (with comments): a file named otherwise is refused.
    if let Some(path) = output {
        super::output::format("--output", path, &[super::output::Format::Yaml])?;
    }
    let suite = assay_sim::load(dir)?;
    let sim = assay_sim::report::read(report)?;
    let text =
        assay_sim::agree::template(&suite, report, &sim, output).map_err(HarnessError::Data)?;
    match output {
        Some(path) => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| HarnessError::Usage(format!("{}: {e}", parent.display())))?;
            }
            assay_project::results::write_new(path, text.as_bytes())
                .map_err(|e| HarnessError::Usage(format!("{}: {e}", path.display())))?;
            out(&format!("wrote {}\n", path.display()));
        }
        None => out(&text),
    }
    Ok(Exit::Success)
}
