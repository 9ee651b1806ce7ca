//! `assay traces check`

use assay_project::HarnessError;
use assay_project::engine;
use assay_project::project::Project;
use assay_traces::{check, drafts, read};
use std::path::Path;

use super::{current_thread_runtime, env, log_warnings, out};
use crate::args::{TracesCheckArgs, TracesCommand};
use crate::exit::Exit;

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
