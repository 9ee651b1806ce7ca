//! `assay run`

use std::io::IsTerminal;

use anyhow::Context;
use assay_core::bank::BankType;
use assay_harness::HarnessError;
use assay_harness::engine::{self, SemanticSearch};
use assay_harness::project::Project;
use assay_harness::results;
use assay_harness::run::{Backends, RunRequest, gate_passed, run as run_banks};
use assay_harness::runners::SemanticRetriever;
use assay_retrieval::pipeline::Pipeline;

use super::{env, log_warnings, out, runtime};
use crate::args::RunArgs;
use crate::exit::Exit;
use crate::progress::Bar;

fn parse_banks(spec: &str) -> Result<Vec<BankType>, HarnessError> {
    let spec = spec.trim();
    if spec.is_empty() || spec.eq_ignore_ascii_case("all") {
        return Ok(Vec::new());
    }
    spec.split(',')
        .map(|b| {
            let b = b.trim().to_ascii_lowercase();
            BankType::from_key(&b).ok_or_else(|| {
                HarnessError::Usage(format!(
                    "--banks: unknown bank `{b}` (expected all, or a list of semantic, state, pattern, always)"
                ))
            })
        })
        .collect()
}

/// Whether the request may run semantic cases (so the embedder is needed).
fn wants_semantic(project: &Project, request: &RunRequest) -> bool {
    let cases = &project.banks.semantic;
    let bank_selected = request.banks.is_empty()
        || request.banks.contains(&BankType::Semantic)
        || request.topic.is_some();
    let case_selected = request
        .test
        .as_ref()
        .is_none_or(|t| cases.iter().any(|c| &c.case.test_id == t));
    !cases.is_empty() && bank_selected && case_selected
}

type Queries = std::collections::HashMap<String, Result<Vec<f32>, String>>;

/// Builds the embedder, refreshes stale entity embeddings, embeds every semantic prompt, and
/// builds the pipeline.
fn prepare_semantic(
    project: &Project,
    store: &assay_kb::store::SqliteStore,
    flag: Option<&str>,
) -> anyhow::Result<(Pipeline, Queries, String)> {
    let choice = engine::choose_embedder(&project.settings, flag, &env)?;
    let embedder = engine::build_embedder(&choice)?;
    let rt = runtime()?;
    let refreshed = rt.block_on(engine::refresh_embeddings(
        store,
        embedder.as_ref(),
        false,
        None,
    ))?;
    tracing::info!(
        embedded = refreshed.embedded.len(),
        fresh = refreshed.fresh,
        model = embedder.model(),
        "entity embeddings"
    );
    let config = engine::retrieval_config(&project.settings, &choice);
    let pipeline = engine::build_pipeline(store, project, embedder.model(), config)?;
    let prompts: Vec<String> = project
        .banks
        .semantic
        .iter()
        .map(|c| c.case.prompt.clone())
        .collect();
    let queries = rt.block_on(engine::embed_queries(embedder.as_ref(), &prompts));
    Ok((pipeline, queries, embedder.model().to_owned()))
}

pub fn run(args: &RunArgs) -> anyhow::Result<Exit> {
    let request = RunRequest {
        banks: parse_banks(&args.banks)?,
        test: args.test.clone(),
        topic: args.topic.clone(),
    };
    let project = Project::load(&args.dir)?;
    log_warnings(&project.warnings);

    // The knowledge base the banks read is the store, refreshed from the kb/ files.
    let store = engine::open_store(&project.settings)?;
    let imported = engine::import_kb(&store, &project)?;
    tracing::info!(
        created = imported.created.len(),
        updated = imported.updated.len(),
        deactivated = imported.deactivated.len(),
        unchanged = imported.unchanged.len(),
        "imported kb/ into {}",
        engine::store_path(&project.settings).display()
    );

    let show_progress =
        !args.json && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
    let mut bar = Bar::new(show_progress);
    let semantic = if wants_semantic(&project, &request) {
        Some(prepare_semantic(
            &project,
            &store,
            args.embedder.as_deref(),
        )?)
    } else {
        None
    };
    let search = semantic.as_ref().map(|(pipeline, queries, model)| {
        let s = &project.settings.semantic;
        SemanticSearch::new(pipeline, queries.clone(), s.candidates, s.top_k, model)
    });
    let backends = Backends {
        kb: &store,
        semantic: search.as_ref().map(|s| s as &dyn SemanticRetriever),
    };
    let log = run_banks(&project, &request, backends, &mut bar)?;
    for w in log.warnings.iter().skip(project.warnings.len()) {
        tracing::warn!("{w}");
    }

    let json = assay_report::json(&log);
    let saved = if args.no_save {
        None
    } else {
        let markdown = assay_report::markdown::render(&log);
        let dir = &project.settings.results_dir;
        let saved = results::save(dir, &results::stamp(&log.timestamp), &json, &markdown)
            .with_context(|| format!("cannot save results in {}", dir.display()))
            .map_err(|e| HarnessError::Infrastructure(format!("{e:#}")))?;
        Some(saved)
    };
    if let Some(path) = &args.junit {
        let xml = assay_report::junit::render(&log, project.settings.report.junit_pass_score);
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
        }
        results::write_replace(path, xml.as_bytes()).map_err(|e| HarnessError::io(path, &e))?;
    }

    if args.json {
        out(&json);
    } else {
        let mut text = assay_report::console::render(&log, args.failures_only);
        if let Some(s) = &saved {
            text.push_str(&format!(
                "\nsaved {} and {}\n",
                s.json.display(),
                s.markdown.display()
            ));
        }
        out(&text);
    }

    Ok(if log.summary.error_count > 0 {
        Exit::Infrastructure
    } else if gate_passed(&log, &project.settings) {
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
