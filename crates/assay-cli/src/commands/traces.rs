//! `assay traces check`

use assay_project::HarnessError;
use assay_project::engine;
use assay_project::project::Project;
use assay_traces::{check, drafts, read};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

use super::{current_thread_runtime, env, log_warnings, out};
use crate::exit::Exit;

/// `assay traces …`
#[derive(Debug, Subcommand)]
pub enum TracesCommand {
    /// Check retrieval spans from OTLP JSON exports or JSON Lines of spans (a folder is read
    /// recursively for *.json and *.jsonl; `assay serve` writes what it receives to
    /// .assay/traces/).
    ///
    /// A malformed span, line or attribute is reported with its position (file, line, JSON
    /// path, attribute) and skipped; the rest is still checked.
    ///
    /// Exit codes: 0 every span agrees with assay's selection; 1 at least one disagrees; 2 bad
    /// input (a path that cannot be read, a file from which no span can be read, no retrieval
    /// span at all, bad flags, a drafts file that exists); 3 infrastructure errors (the
    /// embedder, the store).
    Check(TracesCheckArgs),
}

/// `assay traces check`
#[derive(Debug, Args)]
pub struct TracesCheckArgs {
    /// Trace files or folders.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub paths: Vec<PathBuf>,

    /// Print every span's result as JSON on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,

    /// List every disagreeing span, entity and skipped span in the summary, not the first few.
    #[arg(long)]
    pub all: bool,

    /// The pipeline stages whose entities count as missing when production lacks them,
    /// comma-separated: always, state, crisis, keyword, semantic (default: all). Use
    /// `semantic,crisis,keyword` when production's retrieval spans hold only what its search
    /// returned.
    #[arg(long, value_name = "LIST")]
    pub stages: Option<String>,

    /// Write a draft semantic case for each disagreeing span (or each span --span names) to
    /// this new file (never overwritten; not inside test_banks/). See `assay schema
    /// trace-drafts`.
    #[arg(long, value_name = "FILE")]
    pub drafts: Option<PathBuf>,

    /// Write the draft cases into the project's drafts (test_banks/drafts/semantic/, a new
    /// file), where `assay generate review` lists, accepts, edits or rejects them; a span
    /// already drafted there or in a bank is skipped.
    #[arg(long, conflicts_with = "drafts")]
    pub to_review: bool,

    /// With --drafts or --to-review: the spans to draft, by span id or trace id (repeatable),
    /// whether they disagree or not.
    #[arg(long = "span", value_name = "ID")]
    pub spans: Vec<String>,

    /// Embedder (`vendor/model`); overrides ASSAY_EMBEDDER and assay.toml.
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,

    /// Call-cache mode for a remote embedder: read-write, off or replay.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,
}

pub fn run(project: &Path, command: &TracesCommand) -> anyhow::Result<Exit> {
    match command {
        TracesCommand::Check(args) => check_command(project, args),
    }
}

fn check_command(dir: &Path, args: &TracesCheckArgs) -> anyhow::Result<Exit> {
    // The drafts file is JSON: a file named otherwise is refused before anything is read.
    if let Some(path) = &args.drafts {
        super::output::format("--drafts", path, &[super::output::Format::Json])?;
    }
    let stages = match &args.stages {
        Some(text) => check::parse_stages(text)?,
        None => Vec::new(),
    };
    let project = Project::load(dir)?;
    log_warnings(&project.warnings);
    let read = read::read_paths(&args.paths)?;
    if let Some(why) = read.refusal() {
        return Err(HarnessError::Usage(why).into());
    }
    if args.json {
        // The summary lists them; with --json, stderr says so too.
        for p in &read.problems {
            tracing::warn!("skipped {p}");
        }
    }
    let store = engine::open_store(&project.settings)?;
    engine::sync_kb(&store, &project)?;
    let setup = check::CheckSetup {
        embedder: args.embedder.clone(),
        cache: args.cache.clone(),
        stages,
    };
    let report = current_thread_runtime()?
        .block_on(check::check_spans(&project, &store, &setup, &env, read))?;

    if !args.spans.is_empty() && args.drafts.is_none() && !args.to_review {
        return Err(HarnessError::Usage(
            "--span: chooses the spans to draft; give --drafts FILE or --to-review too".into(),
        )
        .into());
    }
    let mut reviewed = None;
    if args.drafts.is_some() || args.to_review {
        let chosen: Vec<_> = if args.spans.is_empty() {
            report
                .spans
                .iter()
                .filter(|s| !s.disagreements.is_empty())
                .collect()
        } else {
            let wanted = |s: &&assay_core::tracecheck::SpanCheck| {
                args.spans
                    .iter()
                    .any(|id| id == &s.span_id || id == &s.trace_id)
            };
            let chosen: Vec<_> = report.spans.iter().filter(wanted).collect();
            if let Some(unknown) = args.spans.iter().find(|id| {
                !report
                    .spans
                    .iter()
                    .any(|s| &&s.span_id == id || &&s.trace_id == id)
            }) {
                return Err(HarnessError::Usage(format!(
                    "--span {unknown}: no retrieval span with this span or trace id"
                ))
                .into());
            }
            chosen
        };
        if let Some(path) = &args.drafts {
            let file = drafts::draft_file(&chosen);
            drafts::write(path, &project, &file)?;
            tracing::info!(
                "wrote {} draft cases to {}",
                file.drafts.len(),
                path.display()
            );
        } else {
            let version = |id: &str| store.get_stored(id).ok().flatten().map(|s| s.version);
            let r = drafts::to_review(&project, &chosen, &version)?;
            if let Some(file) = &r.file {
                tracing::info!("wrote {} draft cases to {}", r.written, file.display());
            }
            reviewed = Some(r);
        }
    }

    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&report)?));
    } else {
        let mut text = assay_report::tracecheck::render(&report, args.all);
        if let Some(path) = &args.drafts {
            text.push_str(&format!(
                "\nDraft cases written to {} (review them, then copy each `case` into a semantic bank).\n",
                path.display()
            ));
        }
        if let Some(r) = &reviewed {
            match &r.file {
                Some(file) => text.push_str(&format!(
                    "\nDraft cases: {} written to {} for `assay generate review`",
                    r.written,
                    file.strip_prefix(dir).unwrap_or(file).display()
                )),
                None => text.push_str("\nDraft cases: none written"),
            }
            if r.skipped.is_empty() {
                text.push_str(".\n");
            } else {
                text.push_str(&format!(
                    "; {} skipped, already drafted or in a bank ({}).\n",
                    super::kb::plural(r.skipped.len(), "span"),
                    r.skipped
                        .iter()
                        .take(5)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        out(&text);
    }
    Ok(if report.errored > 0 {
        Exit::Infrastructure
    } else if report.has_disagreements() {
        Exit::GateFailed
    } else {
        Exit::Success
    })
}
