//! `assay generate DIR`: draft cases from the knowledge base (see docs/generate.md).

use std::io::IsTerminal;
use std::path::PathBuf;

use assay_generate::{self as generate, Estimate, GenerateOutcome, GenerateRequest, Observer};
use assay_project::project::Project;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::generate_review::{GenerateCoverageArgs, GenerateReviewArgs};
use super::{current_thread_runtime, log_warnings, out};
use crate::exit::Exit;

/// `assay generate`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GenerateArgs {
    #[command(subcommand)]
    pub command: Option<GenerateCommand>,

    /// The project directory.
    #[arg(required = true)]
    pub dir: Option<PathBuf>,

    /// The banks to draft cases for, comma-separated: semantic, state, pattern.
    #[arg(long, default_value = "semantic,state,pattern", value_name = "BANKS")]
    pub banks: String,

    /// Only these entities (ids, comma-separated): SITUATION entities for semantic drafts,
    /// STATE handlers for state drafts, the entities pattern rules bring in for pattern drafts.
    #[arg(long, value_name = "IDS", conflicts_with = "changed_since")]
    pub entities: Option<String>,

    /// Only the entities whose content changed since a saved run (its id, results file,
    /// `latest` or `accepted`).
    #[arg(long, value_name = "RUN")]
    pub changed_since: Option<String>,

    /// Drafts per SITUATION entity (semantic) and per pattern rule (each way) (default:
    /// [generate] per_entity, else 5).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub per_entity: Option<u32>,

    /// The model that writes messages, `vendor/model` (default: [generate] model in
    /// assay.toml, else [calibration] model).
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub model: Option<String>,

    /// Refuse to start when the estimated cost is above this many US dollars, and stop before a
    /// call that would pass it.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,

    /// The language the messages are written in (default: [generate] language, else English).
    #[arg(long, value_name = "LANG")]
    pub language: Option<String>,

    /// Finish an interrupted generation: calls already answered are read from its journal,
    /// not paid for again.
    #[arg(long)]
    pub resume: bool,

    /// Print the estimate and what would be generated, and call nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Print the generation's summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    /// Model calls in flight at once (default: [generate] concurrency, else 4).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,

    #[command(flatten)]
    pub batch: crate::args::BatchArg,
}

/// `assay generate …`
#[derive(Debug, Subcommand)]
pub enum GenerateCommand {
    /// List drafts and findings by entity, and accept, edit or reject them.
    ///
    /// Without an action, lists what is pending (findings first, each checked against the
    /// knowledge base and rules as they are now: still holds, or fixed since). --accept copies
    /// drafts into test_banks/<bank>/generated.json as ordinary cases that keep their
    /// provenance; --reject marks them rejected with --reason; --edit changes a pending draft's
    /// fields; --confirm marks accepted cases that a knowledge-base edit made stale as checked
    /// (each must pass in the latest saved run); --retire takes accepted cases out of their
    /// bank with --reason.
    Review(Box<GenerateReviewArgs>),
    /// Entities, STATE handlers and pattern rules that no case tests, and cases per entity.
    Coverage(GenerateCoverageArgs),
}

/// How many findings, rejections and duplicates the console lists (the rest: `--json`).
const SHOWN: usize = 5;

pub fn run(args: &GenerateArgs) -> anyhow::Result<Exit> {
    let Some(dir) = &args.dir else {
        anyhow::bail!(assay_project::HarnessError::Usage(
            "assay generate: the project directory is required".into()
        ));
    };
    let project = Project::load(dir)?;
    log_warnings(&project.warnings);
    let request = GenerateRequest {
        banks: generate::parse_banks(&args.banks)?,
        entities: args.entities.as_ref().map(|s| {
            s.split(',')
                .map(|id| id.trim().to_owned())
                .filter(|id| !id.is_empty())
                .collect()
        }),
        changed_since: args.changed_since.clone(),
        per_entity: args.per_entity,
        model: args.model.clone(),
        budget: args.budget,
        language: args.language.clone(),
        resume: args.resume,
        dry_run: args.dry_run,
        concurrency: args.concurrency,
    };
    let draw = !args.json && std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(
        None,
        if draw {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    if let Ok(style) = ProgressStyle::with_template("generate [{bar:30}] {pos}/{len} calls {msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    let estimate = |e: &Estimate| {
        // On stderr, before any call: stdout stays the summary (or the JSON).
        super::err(&format!("{}\n", estimate_line(e)));
    };
    let progress = |done: usize, planned: usize, cost: f64| {
        bar.set_length(planned as u64);
        bar.set_position(done as u64);
        bar.set_message(format!("${cost:.4} so far"));
    };
    let observer = Observer {
        estimate: &estimate,
        progress: &progress,
    };
    let outcome = current_thread_runtime()?.block_on(generate::generate(
        &project,
        &request,
        &args.batch.env(),
        std::time::SystemTime::now().into(),
        &observer,
    ));
    bar.finish_and_clear();
    let outcome = outcome?;
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&outcome)?));
    } else {
        out(&summary(&outcome, &project.settings.root));
    }
    Ok(if outcome.errors() > 0 {
        Exit::Infrastructure
    } else {
        Exit::Success
    })
}

fn estimate_line(e: &Estimate) -> String {
    let cost = e.cost_usd.map_or_else(
        || "cost unknown (no price for the model)".to_owned(),
        |c| format!("at most ${c:.4}"),
    );
    format!(
        "Estimate: {} calls ({} writing messages, {} calibrating), {} input / {} output tokens at most, {cost}",
        e.calls(),
        e.generation_calls,
        e.calibrator_calls,
        e.input_tokens,
        e.output_tokens
    )
}

fn counts(map: &std::collections::BTreeMap<String, usize>) -> String {
    if map.is_empty() {
        return "none".to_owned();
    }
    map.iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn summary(o: &GenerateOutcome, root: &std::path::Path) -> String {
    let show = |p: &std::path::Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let mut text = format!(
        "Generation {}{}{} ({} per entity, {}, {})\n",
        o.generation,
        if o.resumed { ", resumed" } else { "" },
        if o.dry_run { ", dry run" } else { "" },
        o.request.get("per_entity").map_or("?", String::as_str),
        o.request.get("language").map_or("?", String::as_str),
        o.request.get("model").map_or("?", String::as_str),
    );
    for b in &o.banks {
        let noun = match b.bank.as_str() {
            "state" => "handler",
            "pattern" => "rule",
            _ => "entit",
        };
        let singles = b.per_entity.keys().filter(|k| !k.contains('+')).count();
        let pairs = b.per_entity.len() - singles;
        let plural = |n: usize| match (noun, n) {
            ("entit", 1) => "y",
            ("entit", _) => "ies",
            (_, 1) => "",
            _ => "s",
        };
        let mut whom = format!("{singles} {noun}{}", plural(singles));
        if pairs > 0 {
            whom.push_str(&format!(
                " and {pairs} related pair{}",
                if pairs == 1 { "" } else { "s" }
            ));
        }
        if o.dry_run {
            let planned: usize = b.per_entity.values().sum();
            text.push_str(&format!(
                "\n  {}: up to {planned} drafts for {whom}\n",
                b.bank
            ));
            continue;
        }
        text.push_str(&format!(
            "\n  {}: {} draft{} for {whom}",
            b.bank,
            b.drafts,
            if b.drafts == 1 { "" } else { "s" },
        ));
        match &b.file {
            Some(f) => text.push_str(&format!(" -> {}\n", show(f))),
            None => text.push_str(" (no file written)\n"),
        }
        text.push_str(&format!(
            "    duplicates dropped: {}; rejected: {}; findings: {}; errors: {}\n",
            b.duplicates,
            counts(&b.rejected),
            counts(&b.findings),
            b.errors
        ));
        for f in b.finding_list.iter().take(SHOWN) {
            text.push_str(&format!(
                "    finding {} {}: {}\n",
                f.finding.kind.as_str(),
                f.test_id,
                f.finding.explanation
            ));
        }
        for r in b.rejections.iter().take(SHOWN) {
            text.push_str(&format!(
                "    rejected ({}) {}: {}\n",
                r.reason, r.source, r.detail
            ));
        }
        for d in b.duplicate_list.iter().take(SHOWN) {
            text.push_str(&format!("    duplicate {d}\n"));
        }
        for e in b.error_list.iter().take(SHOWN) {
            text.push_str(&format!("    error {e}\n"));
        }
        let more = b.finding_list.len().saturating_sub(SHOWN)
            + b.rejections.len().saturating_sub(SHOWN)
            + b.duplicate_list.len().saturating_sub(SHOWN)
            + b.error_list.len().saturating_sub(SHOWN);
        if more > 0 {
            text.push_str(&format!("    … {more} more in --json\n"));
        }
    }
    if o.dry_run {
        text.push_str(&format!(
            "\nDry run: nothing called or written ({} calls estimated).\n",
            o.estimate.calls()
        ));
        return text;
    }
    let c = &o.calls;
    text.push_str(&format!(
        "\nCalls: {} made ({} requests), {} from the journal, {} failed; cost {}\n",
        c.made,
        c.requests,
        c.replayed,
        c.errors,
        c.cost_usd
            .map_or_else(|| "unknown".to_owned(), |x| format!("${x:.4}"))
    ));
    if let Some(s) = &o.stopped {
        text.push_str(&format!(
            "Stopped: {s}. Finish with `assay generate --resume --budget …`.\n"
        ));
    } else if o.errors() > 0 {
        text.push_str(
            "Some calls failed: `assay generate --resume` makes only the missing ones.\n",
        );
    }
    if let Some(j) = &o.journal {
        text.push_str(&format!("Journal: {}\n", show(j)));
    }
    text.push_str(
        "Review with `assay generate review`; runs ignore drafts unless --include-drafts.\n",
    );
    text
}
