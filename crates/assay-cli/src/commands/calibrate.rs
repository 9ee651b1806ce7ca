//! `assay calibrate`

use std::collections::HashMap;
use std::path::PathBuf;

use assay_core::bank::{ExpectationSet, RankCheck};
use assay_project::HarnessError;
use assay_project::project::Project;
use assay_run::calibrate::{CalibrationOutcome, CalibrationRequest, CaseStatus, Scope};
use assay_run::session::{CalibrationSetup, calibrate};
use clap::Args;

use super::{current_thread_runtime, log_warnings, out};
use crate::exit::Exit;

/// `assay calibrate`
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Which cases: `full` (all), `affected` (those mentioning --added-entities in their
    /// expectations or top candidates) or `single` (--test-ids).
    #[arg(long, default_value = "full", value_parser = ["full", "affected", "single"])]
    pub scope: String,

    /// The cases for --scope single (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub test_ids: Vec<String>,

    /// Entities added to the knowledge base (comma-separated); required by --scope affected.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub added_entities: Vec<String>,

    /// The knowledge-base version to record.
    #[arg(long, value_name = "VERSION")]
    pub kb_version: Option<String>,

    /// Why the calibration runs (default by scope: full_recalibration, kb_entity_added,
    /// single_case).
    #[arg(long, value_name = "TRIGGER")]
    pub trigger: Option<String>,

    /// Ask the model and report, but write nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,

    /// The calibrating chat model (`vendor/model`); overrides assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub model: Option<String>,

    /// Chat calls in flight at once.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,

    /// Embedder for the top candidates of `--scope affected`; overrides ASSAY_EMBEDDER and
    /// assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,

    /// Provider call cache: `read-write`, `off` or `replay`; overrides ASSAY_CACHE and assay.toml.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,

    #[command(flatten)]
    pub batch: crate::args::BatchArg,
}

pub fn run(args: &CalibrateArgs) -> anyhow::Result<Exit> {
    let project = Project::load(&args.dir)?;
    log_warnings(&project.warnings);
    let scope: Scope = args.scope.parse().map_err(HarnessError::Usage)?;
    let request = CalibrationRequest {
        scope,
        test_ids: args.test_ids.clone(),
        added_entities: args.added_entities.clone(),
        kb_version: args.kb_version.clone(),
        dry_run: args.dry_run,
        trigger: args.trigger.clone(),
        top_candidates: HashMap::new(),
        concurrency: args.concurrency.unwrap_or(0),
    };
    let setup = CalibrationSetup {
        model: args.model.clone(),
        embedder: args.embedder.clone(),
        cache: args.cache.clone(),
    };
    let outcome = current_thread_runtime()?.block_on(calibrate(
        &project,
        &request,
        &setup,
        &args.batch.env(),
        std::time::SystemTime::now().into(),
    ))?;
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&outcome)?));
    } else {
        out(&summary(&outcome, &project));
    }
    Ok(if outcome.counts.errors > 0 {
        Exit::Infrastructure
    } else {
        Exit::Success
    })
}

fn list(ids: &[String]) -> String {
    if ids.is_empty() {
        "-".to_owned()
    } else {
        ids.join(", ")
    }
}

fn ranks(r: &[RankCheck]) -> Vec<String> {
    r.iter()
        .map(|r| format!("{}>{}", r.higher, r.lower))
        .collect()
}

/// The lines of the fields that differ, `previous → proposed`.
fn diff(previous: &ExpectationSet, proposed: &ExpectationSet) -> Vec<String> {
    let mut lines = Vec::new();
    let fields = [
        (
            "primary",
            &previous.expected_primary,
            &proposed.expected_primary,
        ),
        (
            "secondary",
            &previous.expected_secondary,
            &proposed.expected_secondary,
        ),
        (
            "not expected",
            &previous.not_expected,
            &proposed.not_expected,
        ),
    ];
    for (label, a, b) in fields {
        let (mut sa, mut sb) = (a.clone(), b.clone());
        sa.sort();
        sb.sort();
        if sa != sb {
            lines.push(format!("{label}: {} → {}", list(a), list(b)));
        }
    }
    let (mut ra, mut rb) = (ranks(&previous.rank_check), ranks(&proposed.rank_check));
    let (a_text, b_text) = (list(&ra), list(&rb));
    ra.sort();
    rb.sort();
    if ra != rb {
        lines.push(format!("rank: {a_text} → {b_text}"));
    }
    lines
}

fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 160 {
        format!("{}…", line.chars().take(159).collect::<String>())
    } else {
        line
    }
}

fn summary(o: &CalibrationOutcome, project: &Project) -> String {
    let c = &o.counts;
    let mut text = format!(
        "Calibrated {} semantic case{} with {} (scope {}{})\n",
        c.selected,
        if c.selected == 1 { "" } else { "s" },
        o.model,
        o.scope,
        if o.dry_run { ", dry run" } else { "" }
    );
    for case in &o.cases {
        match case.status {
            CaseStatus::Unchanged => {}
            CaseStatus::Changed | CaseStatus::OverrideKept => {
                let note = if case.status == CaseStatus::OverrideKept {
                    format!(
                        "  (human override kept: {}; proposal recorded)",
                        case.previous_source
                    )
                } else {
                    String::new()
                };
                text.push_str(&format!("\n  {}{note}\n", case.test_id));
                if let Some(proposed) = &case.proposed {
                    for line in diff(&case.previous, proposed) {
                        text.push_str(&format!("    {line}\n"));
                    }
                }
                if let Some(r) = &case.reasoning {
                    text.push_str(&format!("    why: {}\n", one_line(r)));
                }
            }
            CaseStatus::Error => {
                text.push_str(&format!(
                    "\n  {}  ERROR: {}\n",
                    case.test_id,
                    one_line(case.error.as_deref().unwrap_or("unknown error"))
                ));
            }
        }
    }
    text.push_str(&format!(
        "\n{} changed, {} unchanged, {} override{} kept, {} error{}\n",
        c.changed,
        c.unchanged,
        c.overrides_kept,
        if c.overrides_kept == 1 { "" } else { "s" },
        c.errors,
        if c.errors == 1 { "" } else { "s" }
    ));
    let root = &project.settings.root;
    let show = |p: &std::path::Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    if o.dry_run {
        text.push_str("Dry run: nothing written.\n");
    } else {
        match &o.history_file {
            Some(p) => text.push_str(&format!("History: {}\n", show(p))),
            None => text.push_str("History: nothing changed, no file written\n"),
        }
        if let Some(p) = &o.responses_file {
            text.push_str(&format!("Raw replies: {}\n", show(p)));
        }
        if let Some(p) = &o.log_file {
            text.push_str(&format!("Log: {}\n", show(p)));
        }
    }
    text
}
